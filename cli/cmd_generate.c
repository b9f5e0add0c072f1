// cmd_generate — `rlctl generate`: samples completions of one prompt from a Hugging Face model
// folder (optionally with a PEFT LoRA adapter) through the sampler engine (rollout/rl_sampler),
// and prints their text, or their ids, text, logprobs and finish reasons as JSON. It is a tool to
// look at a policy, not a server (that is `rlctl sampler serve`).
#include "rl_cli.h"

#include "rl_chat.h"
#include "rl_err.h"
#include "rl_model.h"
#include "rl_sampler.h"
#include "rl_tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_help[] =
    "usage: rlctl generate --model DIR [--adapter DIR] --prompt TEXT [--chat] [--n N]\n"
    "                      [--max-new-tokens K] [--temperature T] [--top-p P] [--top-k K]\n"
    "                      [--seed S] [--stop-id ID]... [--threads N] [--device D]\n"
    "                      [--max-batch B] [--json]\n\n"
    "Samples N completions of a prompt. The prompt is encoded as is (no BOS is added), or with\n"
    "--chat as one user message in the model's chat template followed by the assistant header.\n"
    "A completion ends at a stop token (the eos ids of config.json and generation_config.json,\n"
    "plus --stop-id) or after K tokens. The stop token is part of the ids and logprobs but not\n"
    "of the text. Logprobs are log_softmax(logits / T) over the whole vocabulary at the sampling\n"
    "temperature (T = 1 when greedy), as `rlctl logprobs` and the trainer compute them.\n\n"
    "  --model DIR          Hugging Face model folder (config.json, model.safetensors,\n"
    "                       tokenizer.json)\n"
    "  --adapter DIR        PEFT LoRA adapter folder to apply\n"
    "  --prompt TEXT        the prompt\n"
    "  --chat               render the prompt with the tokenizer's chat template\n"
    "  --n N                completions to sample (default 1); they share one prefill\n"
    "  --max-new-tokens K   most tokens per completion (default: 256, or what the context\n"
    "                       leaves after the prompt)\n"
    "  --temperature T      sampling temperature (default 1); 0 = greedy\n"
    "  --top-p P            nucleus sampling: keep the most likely tokens up to mass P\n"
    "                       (default 1 = off)\n"
    "  --top-k K            keep the K most likely tokens (default 0 = off)\n"
    "  --seed S             RNG seed (default 0); same seed and threads, same output\n"
    "  --stop-id ID         one more stop token id (repeatable)\n"
    "  --threads N          compute threads (default 0 = all cores)\n"
    "  --device D           cpu (the default), cuda or cuda:N: the model's steps on that GPU\n"
    "                       (bf16 matmuls; drawn there from the same seeded streams); with\n"
    "                       no usable GPU, exit 2 saying what was found\n"
    "  --max-batch B        most completions decoded at once (KV cache slots; default 64);\n"
    "                       the same tokens, the logprobs' last bits aside\n"
    "  --json               print {\"prompt_ids\": [...], \"samples\": [{\"ids\", \"text\",\n"
    "                       \"logprobs\", \"finish_reason\"}]} (ids: the completion only)\n"
    "  -h, --help           this help\n";

#define S_MAX_STOP 64

typedef struct {
    const char *model, *adapter, *prompt, *device;
    int chat, json, n, max_new, top_k, threads, max_new_set, max_batch;
    float temperature, top_p;
    uint64_t seed;
    int32_t stop[S_MAX_STOP];
    int n_stop;
} s_opts_t;

static int s_int(const char *flag, const char *v, long lo, long hi, int *out) {
    return rl_cli_int("generate", flag, v, lo, hi, out);
}

static int s_float(const char *flag, const char *v, double lo, double hi, float *out) {
    return rl_cli_float("generate", flag, v, lo, hi, out);
}

static int s_parse(int argc, char **argv, s_opts_t *o) {
    memset(o, 0, sizeof(*o));
    o->n = 1;
    o->max_batch = RL_SAMPLER_MAX_BATCH_DEFAULT;
    o->temperature = 1.0f;
    o->top_p = 1.0f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--chat") == 0) {
            o->chat = 1;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        static const char *const with_value[] = {
            "--model",       "--adapter", "--prompt",    "--n",    "--max-new-tokens",
            "--temperature", "--top-p",   "--top-k",     "--seed", "--stop-id",
            "--threads",     "--device",  "--max-batch", NULL};
        int known = 0;
        for (int j = 0; with_value[j]; j++) {
            known |= strcmp(a, with_value[j]) == 0;
        }
        if (!known) {
            fprintf(stderr, "rlctl generate: unknown option '%s' (see --help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rlctl generate: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--model") == 0) {
            o->model = v;
        } else if (strcmp(a, "--adapter") == 0) {
            o->adapter = v;
        } else if (strcmp(a, "--prompt") == 0) {
            o->prompt = v;
        } else if (strcmp(a, "--device") == 0) {
            o->device = v;
        } else if (strcmp(a, "--n") == 0) {
            rc = s_int(a, v, 1, 100000, &o->n);
        } else if (strcmp(a, "--max-batch") == 0) {
            rc = s_int(a, v, 1, 4096, &o->max_batch);
        } else if (strcmp(a, "--max-new-tokens") == 0) {
            rc = s_int(a, v, 1, 1 << 24, &o->max_new);
            o->max_new_set = 1;
        } else if (strcmp(a, "--temperature") == 0) {
            rc = s_float(a, v, 0.0, 1e6, &o->temperature);
            if (!rc && o->temperature > 0.0f &&
                o->temperature < (float)RL_SAMPLE_MIN_TEMPERATURE) {
                fprintf(stderr, "rlctl generate: --temperature %s: expected 0 (greedy) or at "
                                "least %g\n", v, RL_SAMPLE_MIN_TEMPERATURE);
                rc = RL_EXIT_USAGE;
            }
        } else if (strcmp(a, "--top-p") == 0) {
            rc = s_float(a, v, 0.0, 1.0, &o->top_p);
            if (!rc && o->top_p <= 0.0f) {
                fprintf(stderr, "rlctl generate: --top-p must be > 0 (1 = off)\n");
                rc = RL_EXIT_USAGE;
            }
        } else if (strcmp(a, "--top-k") == 0) {
            rc = s_int(a, v, 0, 1 << 30, &o->top_k);
        } else if (strcmp(a, "--threads") == 0) {
            rc = s_int(a, v, 0, 4096, &o->threads);
        } else if (strcmp(a, "--stop-id") == 0) {
            int id;
            rc = s_int(a, v, 0, INT32_MAX, &id);
            if (!rc && o->n_stop == S_MAX_STOP) {
                fprintf(stderr, "rlctl generate: at most %d --stop-id\n", S_MAX_STOP);
                rc = RL_EXIT_USAGE;
            }
            if (!rc) {
                o->stop[o->n_stop++] = id;
            }
        } else { // --seed
            rc = rl_cli_u64("generate", a, v, &o->seed);
        }
        if (rc) {
            return rc;
        }
    }
    if (!o->model || !o->prompt) {
        fprintf(stderr, "rlctl generate: --model DIR and --prompt TEXT are required "
                        "(see --help)\n");
        return RL_EXIT_USAGE;
    }
    return 0;
}


// Prints `text` (len bytes of UTF-8) as a JSON string.
static void s_json_string(const char *text, size_t len) {
    json_t *s = json_stringn(text, len);
    char *dump = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    fputs(dump ? dump : "\"\"", stdout);
    free(dump);
    json_decref(s);
}

// Text of a completion without its stop token; ids the tokenizer does not know (a model
// vocab_size larger than the tokenizer's) are left out.
static char *s_text(const rl_tokenizer_t *tok, const rl_sampler_result_t *r, size_t *len_p) {
    int n = r->n_ids - (r->finish == RL_SAMPLER_FINISH_STOP);
    char *text = NULL;
    if (rl_tokenizer_decode_known(tok, r->ids, (size_t)(n > 0 ? n : 0), 0, &text, len_p) != 0) {
        text = NULL;
    }
    return text;
}

int rl_cmd_generate(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_help, stdout);
        return RL_EXIT_OK;
    }
    s_opts_t o;
    int rc = s_parse(argc, argv, &o);
    if (rc) {
        return rc;
    }
    rl_model_t *model = NULL;
    rl_sampler_t *sampler = NULL;
    rl_sampler_result_t *res = NULL;
    int32_t *prompt_ids = NULL;
    size_t n_prompt = 0;
    rl_tokenizer_t *tok = NULL;
    rl_device_t dev;
    if ((rc = rl_cli_device("generate", o.device, NULL, &dev)) != 0) {
        return rc;
    }
    rc = rl_cli_load_model_on("generate", o.model, o.adapter, o.threads, &dev, 0, &model, &tok);
    if (rc) {
        goto done;
    }
    rc = rl_cli_encode("generate", tok, "prompt", o.model, o.prompt, o.chat, &prompt_ids,
                       &n_prompt);
    if (rc) {
        goto done;
    }
    sampler = rl_sampler_new(model);
    if (!sampler) {
        fprintf(stderr, "rlctl generate: out of memory\n");
        rc = RL_EXIT_FAIL;
        goto done;
    }
    int ctx = rl_sampler_context(sampler);
    if (!o.max_new_set) {
        // the default fits what the context leaves; an explicit K that does not is refused
        long room = (long)ctx - (long)n_prompt;
        o.max_new = room < 256 ? (int)(room > 1 ? room : 1) : 256;
    }
    rl_sampler_params_t sp;
    rl_sampler_params_default(&sp);
    sp.sample.temperature = o.temperature;
    sp.sample.top_p = o.top_p;
    sp.sample.top_k = o.top_k;
    sp.n = o.n;
    sp.max_new_tokens = o.max_new;
    sp.seed = o.seed;
    int32_t stop[S_MAX_STOP + 1];
    memcpy(stop, o.stop, (size_t)o.n_stop * sizeof(int32_t));
    sp.n_stop = o.n_stop;
    // the tokenizer's eos_token stops too (instruct models set it to the end-of-turn token)
    int32_t tok_eos = rl_tokenizer_eos_id(tok);
    if (tok_eos >= 0 && tok_eos < rl_model_config(model)->vocab_size) {
        stop[sp.n_stop++] = tok_eos;
    }
    sp.stop_ids = stop;
    sp.max_batch = o.max_batch;
    rl_sampler_prompt_t prompt = {prompt_ids, (int)n_prompt, 0};
    int r = rl_sampler_generate(sampler, &prompt, 1, &sp, &res);
    if (r) {
        fprintf(stderr, "rlctl generate: %s\n", rl_sampler_errmsg(sampler));
        rc = r == RL_EINVAL ? RL_EXIT_USAGE : RL_EXIT_FAIL;
        goto done;
    }
    // a logprob that is not a number (a model whose forward overflows: finite but huge weights
    // or lora_alpha) is an error, never printed: JSON has no NaN, and a sum of NaN says nothing
    for (int s = 0; s < o.n; s++) {
        for (int i = 0; i < res[s].n_ids; i++) {
            if (!isfinite(res[s].logprobs[i])) {
                fprintf(stderr,
                        "rlctl generate: sample %d, token %d: the logprob is %g: the model's "
                        "logits are not finite numbers (its weights or adapter overflow a "
                        "float); nothing printed\n",
                        s, i, (double)res[s].logprobs[i]);
                rc = RL_EXIT_FAIL;
                goto done;
            }
        }
    }
    if (o.json) {
        fputs("{\"prompt_ids\": [", stdout);
        for (size_t i = 0; i < n_prompt; i++) {
            printf("%s%d", i ? ", " : "", (int)prompt_ids[i]);
        }
        fputs("], \"samples\": [", stdout);
    }
    for (int s = 0; s < o.n; s++) {
        const rl_sampler_result_t *q = &res[s];
        size_t len = 0;
        char *text = s_text(tok, q, &len);
        double sum = 0.0;
        for (int i = 0; i < q->n_ids; i++) {
            sum += q->logprobs[i];
        }
        if (o.json) {
            fputs(s ? ", {\"ids\": [" : "{\"ids\": [", stdout);
            for (int i = 0; i < q->n_ids; i++) {
                printf("%s%d", i ? ", " : "", (int)q->ids[i]);
            }
            fputs("], \"text\": ", stdout);
            s_json_string(text ? text : "", text ? len : 0);
            fputs(", \"logprobs\": [", stdout);
            for (int i = 0; i < q->n_ids; i++) {
                printf("%s%.9g", i ? ", " : "", (double)q->logprobs[i]);
            }
            printf("], \"finish_reason\": \"%s\"}", rl_sampler_finish_name(q->finish));
        } else {
            printf("--- sample %d: %d tokens, finish %s, logprob %.4f\n", s, q->n_ids,
                   rl_sampler_finish_name(q->finish), sum);
            if (text) {
                fwrite(text, 1, len, stdout);
            }
            fputc('\n', stdout);
        }
        free(text);
    }
    if (o.json) {
        fputs("]}\n", stdout);
    }
    if (fflush(stdout) != 0) {
        rc = RL_EXIT_FAIL;
    }

done:
    rl_sampler_results_free(&res, o.n);
    rl_sampler_destroy(&sampler);
    free(prompt_ids);
    rl_model_destroy(&model);
    rl_tokenizer_destroy(&tok);
    return rc;
}

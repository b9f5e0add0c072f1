// cmd_logprobs — `rlctl logprobs`: the per-token logprobs of a completion given a prompt, from
// the training forward (rl_model_forward), the numbers the trainer computes. The prompt and the
// completion are tokenized separately and concatenated, so no token merges across the boundary
// (as a sampler's completion never does). Not a sampler: see `rlctl generate`.
#include "rl_cli.h"

#include "rl_chat.h"
#include "rl_err.h"
#include "rl_model.h"
#include "rl_sample.h"
#include "rl_tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_help[] =
    "usage: rlctl logprobs --model DIR [--adapter DIR] --prompt TEXT --completion TEXT\n"
    "                      [--chat] [--temperature T] [--threads N] [--device D] [--json]\n\n"
    "Prints log p(token | everything before it) for each token of the completion, and their\n"
    "sum: log_softmax(logits / T) over the whole vocabulary (T = 1 when 0 is given, the greedy\n"
    "convention of `rlctl generate`). Prompt and completion are encoded separately (no BOS is\n"
    "added) and concatenated; special tokens written in the text (e.g. <|im_end|>) encode as\n"
    "themselves.\n\n"
    "  --model DIR          Hugging Face model folder (config.json, model.safetensors,\n"
    "                       tokenizer.json)\n"
    "  --adapter DIR        PEFT LoRA adapter folder to apply\n"
    "  --prompt TEXT        the prompt (at least one token)\n"
    "  --completion TEXT    the completion to score\n"
    "  --chat               render the prompt with the tokenizer's chat template, as generate\n"
    "  --temperature T      temperature of the distribution (default 1)\n"
    "  --threads N          compute threads (default 0 = all cores)\n"
    "  --device D           cpu (default), cuda or cuda:N: the forward on that GPU (bf16\n"
    "                       matmuls: docs/gpu.md states the tolerance); with no usable GPU,\n"
    "                       exit 2 before anything is loaded, saying what was found\n"
    "  --json               print {\"prompt_ids\", \"completion_ids\", \"logprobs\", \"sum\"}\n"
    "  -h, --help           this help\n"
    "\nPlain output: one line per completion token (id, token, logprob), then the sum.\n";

typedef struct {
    const char *model, *adapter, *prompt, *completion, *device;
    int chat, json, threads;
    float temperature;
} s_opts_t;

static int s_parse(int argc, char **argv, s_opts_t *o) {
    memset(o, 0, sizeof(*o));
    o->temperature = 1.0f;
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
        const char **slot = NULL;
        const char *num = NULL;
        if (strcmp(a, "--model") == 0) {
            slot = &o->model;
        } else if (strcmp(a, "--adapter") == 0) {
            slot = &o->adapter;
        } else if (strcmp(a, "--prompt") == 0) {
            slot = &o->prompt;
        } else if (strcmp(a, "--completion") == 0) {
            slot = &o->completion;
        } else if (strcmp(a, "--device") == 0) {
            slot = &o->device;
        } else if (strcmp(a, "--temperature") == 0 || strcmp(a, "--threads") == 0) {
            slot = &num;
        } else {
            fprintf(stderr, "rlctl logprobs: unknown option '%s' (see --help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rlctl logprobs: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        *slot = argv[++i];
        if (num) {
            char *end;
            errno = 0;
            if (strcmp(a, "--temperature") == 0) {
                double t = strtod(num, &end);
                if (end == num || *end || errno || !(t >= 0.0 && t <= 1e6) ||
                    (t > 0.0 && t < RL_SAMPLE_MIN_TEMPERATURE)) {
                    fprintf(stderr, "rlctl logprobs: --temperature '%s': expected 0 or a number "
                                    "in [%g, 1e6]\n", num, RL_SAMPLE_MIN_TEMPERATURE);
                    return RL_EXIT_USAGE;
                }
                o->temperature = t == 0.0 ? 1.0f : (float)t;
            } else {
                long n = strtol(num, &end, 10);
                if (end == num || *end || errno || n < 0 || n > 4096) {
                    fprintf(stderr, "rlctl logprobs: --threads '%s': expected 0..4096\n", num);
                    return RL_EXIT_USAGE;
                }
                o->threads = (int)n;
            }
        }
    }
    if (!o->model || !o->prompt || !o->completion) {
        fprintf(stderr, "rlctl logprobs: --model DIR, --prompt TEXT and --completion TEXT are "
                        "required (see --help)\n");
        return RL_EXIT_USAGE;
    }
    return 0;
}


// Prints a token's text for the plain listing, with control characters escaped.
static void s_print_token(const rl_tokenizer_t *tok, int32_t id) {
    size_t len = 0;
    const char *b = rl_tokenizer_token_bytes(tok, id, &len);
    if (!b) {
        fputs("?", stdout);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\x%02x", c);
        } else {
            fputc(c, stdout);
        }
    }
}

int rl_cmd_logprobs(int argc, char **argv) {
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
    int32_t *p_ids = NULL, *c_ids = NULL, *tokens = NULL;
    float *logp = NULL;
    size_t P = 0, C = 0;
    rl_tokenizer_t *tok = NULL;
    rl_device_t dev;
    rc = rl_cli_device("logprobs", o.device, NULL, &dev);
    if (rc) {
        return rc;
    }
    char err[1024];
    tok = rl_tokenizer_new_dir(o.model, err, sizeof err); // the tokens first: a GPU holds T rows
    if (!tok) {
        fprintf(stderr, "rlctl logprobs: %s\n", err);
        return RL_EXIT_USAGE;
    }
    rc = rl_cli_encode("logprobs", tok, "prompt", o.model, o.prompt, o.chat, &p_ids, &P);
    if (!rc) {
        rc = rl_cli_encode("logprobs", tok, "completion", o.model, o.completion, 0, &c_ids,
                           &C);
    }
    rl_tokenizer_destroy(&tok);
    if (!rc) {
        rc = rl_cli_load_model_on("logprobs", o.model, o.adapter, o.threads, &dev,
                                  (int)(P + C > 0 ? P + C : 1), &model, &tok);
    }
    if (rc) {
        goto done;
    }
    if (P == 0) {
        fprintf(stderr, "rlctl logprobs: the prompt encodes to no tokens (the first completion "
                        "token needs a context)\n");
        rc = RL_EXIT_USAGE;
        goto done;
    }
    int ctx = rl_model_config(model)->max_position_embeddings;
    if (ctx > 0 && P + C > (size_t)ctx) {
        fprintf(stderr, "rlctl logprobs: too long: %zu prompt + %zu completion tokens = %zu, "
                        "more than the model's context of %d (max_position_embeddings)\n",
                P, C, P + C, ctx);
        rc = RL_EXIT_USAGE;
        goto done;
    }
    int T = (int)(P + C);
    tokens = malloc((size_t)T * sizeof(int32_t));
    logp = malloc((size_t)T * sizeof(float));
    if (!tokens || !logp) {
        fprintf(stderr, "rlctl logprobs: out of memory\n");
        rc = RL_EXIT_FAIL;
        goto done;
    }
    memcpy(tokens, p_ids, P * sizeof(int32_t));
    if (C) {
        memcpy(tokens + P, c_ids, C * sizeof(int32_t));
    }
    int r = rl_model_forward(model, tokens, &T, 1, T, o.temperature, 0, logp, NULL);
    if (r) {
        fprintf(stderr, "rlctl logprobs: %s\n", rl_model_errmsg(model));
        rc = r == RL_EINVAL ? RL_EXIT_USAGE : RL_EXIT_FAIL;
        goto done;
    }
    double sum = 0.0;
    for (size_t i = 0; i < C; i++) {
        sum += logp[P + i];
        if (!isfinite(logp[P + i])) { // never printed: JSON has no NaN (see rlctl generate)
            fprintf(stderr,
                    "rlctl logprobs: completion token %zu: the logprob is %g: the model's "
                    "logits are not finite numbers (its weights or adapter overflow a float); "
                    "nothing printed\n",
                    i, (double)logp[P + i]);
            rc = RL_EXIT_FAIL;
            goto done;
        }
    }
    if (o.json) {
        fputs("{\"prompt_ids\": [", stdout);
        for (size_t i = 0; i < P; i++) {
            printf("%s%d", i ? ", " : "", (int)p_ids[i]);
        }
        fputs("], \"completion_ids\": [", stdout);
        for (size_t i = 0; i < C; i++) {
            printf("%s%d", i ? ", " : "", (int)c_ids[i]);
        }
        fputs("], \"logprobs\": [", stdout);
        for (size_t i = 0; i < C; i++) {
            printf("%s%.9g", i ? ", " : "", (double)logp[P + i]);
        }
        printf("], \"sum\": %.9g}\n", sum);
    } else {
        for (size_t i = 0; i < C; i++) {
            printf("%d\t", (int)c_ids[i]);
            s_print_token(tok, c_ids[i]);
            printf("\t%.6f\n", (double)logp[P + i]);
        }
        printf("sum\t%.6f\n", sum);
    }
    if (fflush(stdout) != 0) {
        rc = RL_EXIT_FAIL;
    }

done:
    free(tokens);
    free(logp);
    free(p_ids);
    free(c_ids);
    rl_model_destroy(&model);
    rl_tokenizer_destroy(&tok);
    return rc;
}

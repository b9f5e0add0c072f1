// cmd_eval — `rlctl eval`: accuracy of a model (optionally with a PEFT adapter) on a held-out
// JSONL file. Each row's prompt is completed by the sampler and scored by the math_answer rule
// (the number after "#### ", else the last number, against the row's answer field); the format
// rate (completions that use "#### N") is reported beside it, as the cookbook task asks.
#include "rl_cli.h"

#include "rl_err.h"
#include "rl_eval.h"
#include "rl_model.h"
#include "rl_sampler.h"
#include "rl_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_help[] =
    "usage: rlctl eval --model DIR [--adapter DIR] --data FILE [--limit N] [--n N]\n"
    "                  [--temperature T] [--top-p P] [--top-k K] [--max-new-tokens K]\n"
    "                  [--seed S] [--prompt-field NAME] [--answer-field NAME] [--threads N]\n"
    "                  [--json]\n\n"
    "Completes each row's prompt (encoded as is, no special tokens) and scores the completion\n"
    "with the math_answer rule: the number after the last \"#### \", else the last number in\n"
    "the text, compared with the row's answer after removing commas. Prints the accuracy (mean\n"
    "over all completions), the format rate (completions that end in \"#### N\"), the mean\n"
    "completion length and the share cut by --max-new-tokens.\n\n"
    "  --model DIR          Hugging Face model folder\n"
    "  --adapter DIR        PEFT LoRA adapter folder to apply\n"
    "  --data FILE          JSONL rows with a prompt and an answer field\n"
    "  --limit N            evaluate the first N rows only (default: all)\n"
    "  --n N                completions per row (default 1)\n"
    "  --temperature T      sampling temperature (default 0 = greedy)\n"
    "  --top-p P, --top-k K sampling filters (default off)\n"
    "  --max-new-tokens K   most tokens per completion (default 64)\n"
    "  --seed S             RNG seed (default 0)\n"
    "  --prompt-field NAME  (default prompt)    --answer-field NAME  (default answer)\n"
    "  --threads N          compute threads (default 0 = all cores)\n"
    "  --json               print {\"accuracy\", \"format_rate\", ...} as JSON\n";

int rl_cmd_eval(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_help, stdout);
        return RL_EXIT_OK;
    }
    const char *model_dir = NULL, *adapter = NULL, *data_path = NULL;
    const char *prompt_field = "prompt", *answer_field = "answer";
    int limit = 0, n = 1, top_k = 0, max_new = 64, threads = 0, json = 0, rc = 0;
    float temperature = 0.0f, top_p = 1.0f;
    uint64_t seed = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || i + 1 >= argc) {
            fprintf(stderr, "rlctl eval: %s '%s' (see --help)\n",
                    strncmp(a, "--", 2) ? "unexpected argument" : "missing value for", a);
            return RL_EXIT_USAGE;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) {
            model_dir = v;
        } else if (!strcmp(a, "--adapter")) {
            adapter = v;
        } else if (!strcmp(a, "--data")) {
            data_path = v;
        } else if (!strcmp(a, "--prompt-field")) {
            prompt_field = v;
        } else if (!strcmp(a, "--answer-field")) {
            answer_field = v;
        } else if (!strcmp(a, "--limit")) {
            rc = rl_cli_int("eval", a, v, 0, 1 << 30, &limit);
        } else if (!strcmp(a, "--n")) {
            rc = rl_cli_int("eval", a, v, 1, 4096, &n);
        } else if (!strcmp(a, "--top-k")) {
            rc = rl_cli_int("eval", a, v, 0, 1 << 30, &top_k);
        } else if (!strcmp(a, "--max-new-tokens")) {
            rc = rl_cli_int("eval", a, v, 1, 1 << 24, &max_new);
        } else if (!strcmp(a, "--threads")) {
            rc = rl_cli_int("eval", a, v, 0, 4096, &threads);
        } else if (!strcmp(a, "--temperature")) {
            rc = rl_cli_float("eval", a, v, 0.0, 1e6, &temperature);
        } else if (!strcmp(a, "--top-p")) {
            rc = rl_cli_float("eval", a, v, 1e-9, 1.0, &top_p);
        } else if (!strcmp(a, "--seed")) {
            rc = rl_cli_u64("eval", a, v, &seed);
        } else {
            fprintf(stderr, "rlctl eval: unknown option '%s' (see --help)\n", a);
            return RL_EXIT_USAGE;
        }
    }
    if (rc) {
        return rc;
    }
    if (!model_dir || !data_path) {
        fprintf(stderr, "rlctl eval: --model DIR and --data FILE are required (see --help)\n");
        return RL_EXIT_USAGE;
    }
    char err[1024] = "";
    rl_model_t *model = NULL;
    rl_tokenizer_t *tok = NULL;
    rl_sampler_t *sampler = NULL;
    rl_eval_data_t *data = NULL;
    if ((rc = rl_cli_load_model("eval", model_dir, adapter, threads, &model, &tok)) != 0) {
        goto done;
    }
    rc = RL_EXIT_USAGE;
    if (!(data = rl_eval_data_load(data_path, prompt_field, answer_field, limit, err,
                                   sizeof err))) {
        fprintf(stderr, "rlctl eval: %s\n", err);
        goto done;
    }
    if (!(sampler = rl_sampler_new(model))) {
        fprintf(stderr, "rlctl eval: out of memory\n");
        rc = RL_EXIT_FAIL;
        goto done;
    }
    rl_sampler_params_t sp;
    rl_sampler_params_default(&sp);
    sp.sample.temperature = temperature;
    sp.sample.top_p = top_p;
    sp.sample.top_k = top_k;
    sp.n = n;
    sp.max_new_tokens = max_new;
    sp.seed = seed;
    int32_t eos = rl_tokenizer_eos_id(tok);
    if (eos >= 0 && eos < rl_model_config(model)->vocab_size) {
        sp.stop_ids = &eos; // the tokenizer's eos_token stops too, as in generate
        sp.n_stop = 1;
    }
    rl_eval_result_t r;
    int e = rl_eval_run(sampler, tok, data, &sp, rl_cli_math_score, NULL, &r, err, sizeof err);
    if (e != 0) {
        fprintf(stderr, "rlctl eval: %s\n", err);
        rc = e == RL_EINVAL ? RL_EXIT_USAGE : RL_EXIT_FAIL;
        goto done;
    }
    if (json) {
        printf("{\"rows\": %d, \"samples\": %d, \"accuracy\": %.6f, \"format_rate\": %.6f, "
               "\"mean_length\": %.3f, \"clipped_ratio\": %.6f, \"temperature\": %g, "
               "\"seconds\": %.3f, \"tokens_per_second\": %.1f}\n",
               r.rows, r.samples, r.accuracy, r.format_rate, r.mean_length, r.clipped_ratio,
               (double)temperature, r.seconds, r.seconds > 0 ? (double)r.tokens / r.seconds : 0);
    } else {
        printf("rows %d, samples %d, temperature %g: accuracy %.2f%%, format %.2f%%, "
               "mean length %.1f tokens, clipped %.2f%% (%.1f s, %.0f tokens/s)\n",
               r.rows, r.samples, (double)temperature, 100 * r.accuracy, 100 * r.format_rate,
               r.mean_length, 100 * r.clipped_ratio, r.seconds,
               r.seconds > 0 ? (double)r.tokens / r.seconds : 0);
    }
    rc = RL_EXIT_OK;
done:
    rl_eval_data_destroy(&data);
    rl_sampler_destroy(&sampler);
    rl_tokenizer_destroy(&tok);
    rl_model_destroy(&model);
    return rc;
}

// cmd_eval — `rlctl eval`: accuracy of a model (optionally with a PEFT adapter) on a held-out
// JSONL file. Each row's prompt is completed by the sampler and scored by the math_answer rule
// (the number after "#### ", else the last number, against the row's answer field); the format
// rate (completions that use "#### N") is reported beside it, as the cookbook task asks. And
// `rlctl pairs`: the same sampling and scoring, written out as preference pairs (a right and a
// wrong completion of one prompt) for DPO and reward models.
#include "rl_cli.h"

#include "rl_err.h"
#include "rl_eval.h"
#include "rl_model.h"
#include "rl_sampler.h"
#include "rl_tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_help[] =
    "usage: rlctl eval RECIPE.yaml [--model DIR] [--adapter DIR] [--run DIR] [--json]\n"
    "                  [key=value ...]\n"
    "       rlctl eval --model DIR [--adapter DIR] --data FILE [--limit N] [--n N]\n"
    "                  [--temperature T] [--top-p P] [--top-k K] [--max-new-tokens K]\n"
    "                  [--seed S] [--prompt-field NAME] [--answer-field NAME] [--threads N]\n"
    "                  [--device D] [--max-batch B] [--json]\n\n"
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
    "  --device D           cpu (the default), cuda or cuda:N: sample on that GPU (as\n"
    "                       `rlctl generate --device`); with no usable GPU, exit 2 saying\n"
    "                       what was found\n"
    "  --max-batch B        most completions decoded at once (KV cache slots; default 64;\n"
    "                       with a recipe: sampling.max_batch)\n"
    "  --json               print {\"accuracy\", \"format_rate\", ...} as JSON\n\n"
    "With a recipe it evaluates as the run does (docs/training.md, Evaluation): data.eval's\n"
    "first train.eval_samples prompts rendered as the run renders them, train.eval_k\n"
    "completions at the recipe's sampling settings and one greedy (the run's seeds), scored\n"
    "by the recipe's own rewards; prints eval/reward, eval/rewards/<name>/mean,\n"
    "eval/accuracy, eval/accuracy_greedy (the share whose total reaches\n"
    "train.eval_pass_threshold) and eval/pass@k. The model is the recipe's model.path,\n"
    "--model/--adapter, or a run folder's final/ (--run DIR: its adapter on model.path, or\n"
    "its whole model).\n"
    "  --run DIR            a run folder: evaluate its final/\n";

static const char s_pairs_help[] =
    "usage: rlctl pairs --model DIR [--adapter DIR] --data FILE --out FILE [--limit N] [--n N]\n"
    "                   [--temperature T] [--top-p P] [--top-k K] [--max-new-tokens K]\n"
    "                   [--seed S] [--prompt-field NAME] [--answer-field NAME] [--threads N]\n\n"
    "Preference pairs from a model's own samples: completes each row's prompt --n times\n"
    "(default 8, at --temperature 1), scores every completion with the math_answer rule as\n"
    "`rlctl eval` does, and for each prompt with at least one right and one wrong completion\n"
    "writes one row {\"prompt\", \"chosen\", \"rejected\", \"answer\"} to --out (TRL's\n"
    "preference format): chosen is the first right completion, rejected the first wrong one, in\n"
    "sample order. Prompts whose completions are all right or all wrong give no pair. The same\n"
    "seed gives the same file on one machine. Options as for `rlctl eval`, plus:\n"
    "  --out FILE           the JSONL file to write (replaced)\n";

typedef struct {
    const char *model_dir, *adapter, *data_path, *out_path;
    const char *prompt_field, *answer_field, *device;
    int limit, n, top_k, max_new, threads, json, max_batch;
    float temperature, top_p;
    uint64_t seed;
} s_opts_t;

// The options of `eval` (pairs = 0) or `pairs` (1). Returns 0, or an exit status after printing
// why.
static int s_parse(const char *cmd, int pairs, int argc, char **argv, s_opts_t *o) {
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (!pairs && strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || i + 1 >= argc) {
            fprintf(stderr, "rlctl %s: %s '%s' (see --help)\n", cmd,
                    strncmp(a, "--", 2) ? "unexpected argument" : "missing value for", a);
            return RL_EXIT_USAGE;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) {
            o->model_dir = v;
        } else if (!strcmp(a, "--adapter")) {
            o->adapter = v;
        } else if (!strcmp(a, "--data")) {
            o->data_path = v;
        } else if (pairs && !strcmp(a, "--out")) {
            o->out_path = v;
        } else if (!strcmp(a, "--prompt-field")) {
            o->prompt_field = v;
        } else if (!strcmp(a, "--answer-field")) {
            o->answer_field = v;
        } else if (!strcmp(a, "--device")) {
            o->device = v;
        } else if (!strcmp(a, "--limit")) {
            rc = rl_cli_int(cmd, a, v, 0, 1 << 30, &o->limit);
        } else if (!strcmp(a, "--n")) {
            rc = rl_cli_int(cmd, a, v, pairs ? 2 : 1, 4096, &o->n);
        } else if (!pairs && !strcmp(a, "--max-batch")) {
            rc = rl_cli_int(cmd, a, v, 1, 4096, &o->max_batch);
        } else if (!strcmp(a, "--top-k")) {
            rc = rl_cli_int(cmd, a, v, 0, 1 << 30, &o->top_k);
        } else if (!strcmp(a, "--max-new-tokens")) {
            rc = rl_cli_int(cmd, a, v, 1, 1 << 24, &o->max_new);
        } else if (!strcmp(a, "--threads")) {
            rc = rl_cli_int(cmd, a, v, 0, 4096, &o->threads);
        } else if (!strcmp(a, "--temperature")) {
            rc = rl_cli_float(cmd, a, v, 0.0, 1e6, &o->temperature);
        } else if (!strcmp(a, "--top-p")) {
            rc = rl_cli_float(cmd, a, v, 1e-9, 1.0, &o->top_p);
        } else if (!strcmp(a, "--seed")) {
            rc = rl_cli_u64(cmd, a, v, &o->seed);
        } else {
            fprintf(stderr, "rlctl %s: unknown option '%s' (see --help)\n", cmd, a);
            return RL_EXIT_USAGE;
        }
    }
    if (rc) {
        return rc;
    }
    if (!o->model_dir || !o->data_path || (pairs && !o->out_path)) {
        fprintf(stderr, "rlctl %s: --model DIR and --data FILE%s are required (see --help)\n", cmd,
                pairs ? " and --out FILE" : "");
        return RL_EXIT_USAGE;
    }
    return 0;
}

// pairs: every completion's text and score, in the order rl_eval_run scores them (prompt-major)
typedef struct {
    char **text;
    double *score;
    int k, total;
} s_collect_t;

static double s_collect(void *ctx, const char *text, size_t len, const char *answer,
                        int *formatted) {
    s_collect_t *c = ctx;
    double sc = rl_cli_math_score(NULL, text, len, answer, formatted);
    if (c->k < c->total) {
        c->text[c->k] = strndup(text, len);
        c->score[c->k] = c->text[c->k] ? sc : NAN;
        c->k++;
    }
    return sc;
}

// One preference row per prompt with a right and a wrong completion. Returns the pairs written,
// or -1 (err filled).
static int s_write_pairs(const s_opts_t *o, const rl_eval_data_t *data, const s_collect_t *c,
                         char *err, size_t err_len) {
    FILE *f = fopen(o->out_path, "w");
    if (!f) {
        snprintf(err, err_len, "%s: cannot write: %s", o->out_path, strerror(errno));
        return -1;
    }
    int pairs = 0, rows = rl_eval_data_count(data), bad = 0;
    for (int i = 0; i < rows && !bad; i++) {
        int right = -1, wrong = -1;
        for (int s = 0; s < o->n; s++) {
            int k = i * o->n + s;
            if (c->score[k] == 1.0 && right < 0) {
                right = k;
            } else if (c->score[k] == 0.0 && wrong < 0) {
                wrong = k;
            }
        }
        if (right < 0 || wrong < 0) {
            continue;
        }
        const rl_eval_row_t *row = rl_eval_data_row(data, i);
        json_t *obj = json_object();
        bad = !obj || json_object_set_new(obj, "prompt", json_string(row->prompt)) ||
              json_object_set_new(obj, "chosen", json_string(c->text[right])) ||
              json_object_set_new(obj, "rejected", json_string(c->text[wrong])) ||
              json_object_set_new(obj, "answer", json_string(row->answer));
        char *line = bad ? NULL : json_dumps(obj, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
        bad = !line || fprintf(f, "%s\n", line) < 0;
        free(line);
        json_decref(obj);
        pairs++;
    }
    if (fclose(f) != 0 || bad) {
        snprintf(err, err_len, "%s: cannot write (a completion that is not UTF-8, or the disk)",
                 o->out_path);
        return -1;
    }
    return pairs;
}

static int s_eval_or_pairs(const char *cmd, int pairs, int argc, char **argv) {
    s_opts_t o = {.prompt_field = "prompt",
                  .answer_field = "answer",
                  .n = pairs ? 8 : 1,
                  .max_new = 64,
                  .max_batch = RL_SAMPLER_MAX_BATCH_DEFAULT,
                  .temperature = pairs ? 1.0f : 0.0f,
                  .top_p = 1.0f};
    int rc = s_parse(cmd, pairs, argc, argv, &o);
    if (rc) {
        return rc;
    }
    char err[1024] = "";
    rl_model_t *model = NULL;
    rl_tokenizer_t *tok = NULL;
    rl_sampler_t *sampler = NULL;
    rl_eval_data_t *data = NULL;
    s_collect_t col = {0};
    rl_device_t dev;
    if ((rc = rl_cli_device(cmd, o.device, NULL, &dev)) != 0) {
        return rc;
    }
    if ((rc = rl_cli_load_model_on(cmd, o.model_dir, o.adapter, o.threads, &dev, 0, &model,
                                   &tok)) != 0) {
        goto done;
    }
    rc = RL_EXIT_USAGE;
    if (!(data = rl_eval_data_load(&o.data_path, 1, o.prompt_field, o.answer_field, o.limit, err,
                                   sizeof err))) {
        fprintf(stderr, "rlctl %s: %s\n", cmd, err);
        goto done;
    }
    rc = RL_EXIT_FAIL;
    if (!(sampler = rl_sampler_new(model))) {
        fprintf(stderr, "rlctl %s: out of memory\n", cmd);
        goto done;
    }
    if (pairs) {
        col.total = rl_eval_data_count(data) * o.n;
        col.text = calloc((size_t)col.total + 1, sizeof(char *));
        col.score = calloc((size_t)col.total + 1, sizeof(double));
        if (!col.text || !col.score) {
            fprintf(stderr, "rlctl %s: out of memory\n", cmd);
            goto done;
        }
    }
    rl_sampler_params_t sp;
    rl_sampler_params_default(&sp);
    sp.sample.temperature = o.temperature;
    sp.sample.top_p = o.top_p;
    sp.sample.top_k = o.top_k;
    sp.n = o.n;
    sp.max_new_tokens = o.max_new;
    sp.max_batch = o.max_batch;
    sp.seed = o.seed;
    int32_t eos = rl_tokenizer_eos_id(tok);
    if (eos >= 0 && eos < rl_model_config(model)->vocab_size) {
        sp.stop_ids = &eos; // the tokenizer's eos_token stops too, as in generate
        sp.n_stop = 1;
    }
    rl_eval_result_t r;
    int e = rl_eval_run(sampler, tok, data, &sp, pairs ? s_collect : rl_cli_math_score,
                        pairs ? &col : NULL, &r, err, sizeof err);
    if (e != 0) {
        fprintf(stderr, "rlctl %s: %s\n", cmd, err);
        rc = e == RL_EINVAL ? RL_EXIT_USAGE : RL_EXIT_FAIL;
        goto done;
    }
    if (pairs) {
        int np = s_write_pairs(&o, data, &col, err, sizeof err);
        if (np < 0) {
            fprintf(stderr, "rlctl %s: %s\n", cmd, err);
            goto done;
        }
        printf("rows %d, samples %d, temperature %g: accuracy %.2f%%; %d pairs (%.1f%% of the "
               "rows) written to %s\n",
               r.rows, r.samples, (double)o.temperature, 100 * r.accuracy, np,
               r.rows ? 100.0 * np / r.rows : 0.0, o.out_path);
    } else if (o.json) {
        printf("{\"rows\": %d, \"samples\": %d, \"accuracy\": %.6f, \"format_rate\": %.6f, "
               "\"mean_length\": %.3f, \"clipped_ratio\": %.6f, \"temperature\": %g, "
               "\"seconds\": %.3f, \"tokens_per_second\": %.1f}\n",
               r.rows, r.samples, r.accuracy, r.format_rate, r.mean_length, r.clipped_ratio,
               (double)o.temperature, r.seconds, r.seconds > 0 ? (double)r.tokens / r.seconds : 0);
    } else {
        printf("rows %d, samples %d, temperature %g: accuracy %.2f%%, format %.2f%%, "
               "mean length %.1f tokens, clipped %.2f%% (%.1f s, %.0f tokens/s)\n",
               r.rows, r.samples, (double)o.temperature, 100 * r.accuracy, 100 * r.format_rate,
               r.mean_length, 100 * r.clipped_ratio, r.seconds,
               r.seconds > 0 ? (double)r.tokens / r.seconds : 0);
    }
    rc = RL_EXIT_OK;
done:
    for (int k = 0; col.text && k < col.total; k++) {
        free(col.text[k]);
    }
    free(col.text);
    free(col.score);
    rl_eval_data_destroy(&data);
    rl_sampler_destroy(&sampler);
    rl_tokenizer_destroy(&tok);
    rl_model_destroy(&model);
    return rc;
}

int rl_cmd_eval(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_help, stdout);
        return RL_EXIT_OK;
    }
    size_t l = argc > 1 ? strlen(argv[1]) : 0;
    if (l > 5 && (!strcmp(argv[1] + l - 5, ".yaml") || !strcmp(argv[1] + l - 4, ".yml"))) {
        return rl_cli_eval_recipe(argc, argv); // a recipe: evaluate as its run does
    }
    return s_eval_or_pairs("eval", 0, argc, argv);
}

int rl_cmd_pairs(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_pairs_help, stdout);
        return RL_EXIT_OK;
    }
    return s_eval_or_pairs("pairs", 1, argc, argv);
}

// rlctl eval RECIPE — the evaluation of a run, by the recipe, in one process: data.eval's prompts
// (the first train.eval_samples, rendered as the run renders them), train.eval_k completions
// of each at the recipe's sampling settings and one greedy, scored by the recipe's own rewards
// (opened here as the reward worker opens them), with the run's metric names: eval/reward,
// eval/rewards/<name>/mean, eval/accuracy, eval/accuracy_greedy, eval/pass@k. The model is the
// recipe's, or --model/--adapter, or a run folder's final/ (--run).
#include "rl_chat.h"
#include "rl_algos.h"
#include "rl_cli.h"
#include "rl_config.h"
#include "rl_err.h"
#include "rl_prompts.h"
#include "rl_reward.h"
#include "rl_rollout.h"
#include "rl_run.h"
#include "rl_sampler.h"
#include "rl_tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    rl_rollout_eval_t st; // the figures, as a run computes them (rl_rollout_eval_stats)
    int n;
} s_pass_t;

// One pass: n completions per prompt at temperature t, scored; fills out. Returns 0 or an exit
// code after printing why.
static int s_pass(const rl_recipe_t *r, rl_model_t *m, rl_tokenizer_t *tok, rl_prompts_t *ps, int P,
                  rl_reward_t **rw, double t, int n, s_pass_t *out) {
    rl_sampler_t *smp = rl_sampler_new(m);
    rl_sampler_prompt_t *pr = calloc((size_t)P, sizeof *pr);
    int R = r->n_rewards, total = P * n, rc = 0;
    rl_reward_item_t *items = calloc((size_t)total, sizeof *items);
    char **texts = calloc((size_t)total, sizeof *texts);
    double *raw = calloc((size_t)R * (size_t)total + 1, sizeof *raw);
    double *tot = calloc((size_t)total, sizeof *tot);
    rl_sampler_result_t *res = NULL;
    if (!smp || !pr || !items || !texts || !raw || !tot) {
        fprintf(stderr, "rlctl eval: out of memory\n");
        rc = RL_EXIT_FAIL;
        goto done;
    }
    for (int i = 0; i < P; i++) {
        const rl_prompt_t *p = rl_prompts_get(ps, (size_t)i);
        pr[i] = (rl_sampler_prompt_t){p->ids, p->len, (uint64_t)i};
    }
    rl_sampler_params_t sp;
    rl_sampler_params_default(&sp);
    sp.sample.temperature = (float)t;
    sp.sample.top_p = t > 0 ? (float)r->sampling.top_p : 1.0f;
    sp.sample.top_k = t > 0 ? r->sampling.top_k : 0;
    sp.n = n;
    sp.max_new_tokens = r->sampling.max_new_tokens;
    sp.max_batch = r->sampling.max_batch;
    // as a run's request carries it (an int64 on the wire: 63 bits)
    sp.seed = rl_rollout_mix((uint64_t)r->run.seed, 0xE7A1ull) & 0x7fffffffffffffffull;
    if (rl_sampler_generate(smp, pr, P, &sp, &res) != 0) {
        fprintf(stderr, "rlctl eval: generation failed (a prompt longer than the context?)\n");
        rc = RL_EXIT_FAIL;
        goto done;
    }
    for (int j = 0; j < total; j++) {
        const rl_prompt_t *p = rl_prompts_get(ps, (size_t)(j / n));
        int k = res[j].n_ids - (res[j].finish == RL_SAMPLER_FINISH_STOP ? 1 : 0);
        size_t len = 0;
        if (rl_tokenizer_decode_known(tok, res[j].ids, (size_t)k, 0, &texts[j], &len) != 0) {
            texts[j] = strdup("");
        }
        for (int s = 0; texts[j] && s < r->sampling.stop.n; s++) { // stop strings: cut the text
            char *hit = strstr(texts[j], r->sampling.stop.items[s]);
            if (hit) {
                *hit = '\0';
            }
        }
        items[j] = (rl_reward_item_t){
            p->text,    p->text_len,          texts[j], strlen(texts[j] ? texts[j] : ""),
            res[j].ids, (size_t)res[j].n_ids, p->row,   p->row_len};
    }
    char err[2048];
    for (int q = 0; q < R && !rc; q++) {
        if (rl_reward_score(rw[q], items, (size_t)total, raw + (size_t)q * total, err,
                            sizeof err) != 0) {
            fprintf(stderr, "rlctl eval: %s\n", err);
            rc = RL_EXIT_FAIL;
        }
    }
    if (!rc) {
        rl_rollout_totals(r, raw, total, tot);
        rl_rollout_eval_stats(r, raw, tot, P, n, &out->st);
        out->n = n;
    }
done:
    rl_sampler_results_free(&res, total);
    for (int j = 0; texts && j < total; j++) {
        free(texts[j]);
    }
    free(texts);
    free(items);
    free(raw);
    free(tot);
    free(pr);
    rl_sampler_destroy(&smp);
    return rc;
}

int rl_cli_eval_recipe(int argc, char **argv) {
    const char *path = argv[1], *model_dir = NULL, *adapter = NULL, *run = NULL;
    const char *ovr[128];
    int n_ovr = 0, json = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], **slot = !strcmp(a, "--model")     ? &model_dir
                                          : !strcmp(a, "--adapter") ? &adapter
                                          : !strcmp(a, "--run")     ? &run
                                                                    : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (slot && i + 1 < argc) {
            *slot = argv[++i];
        } else if (strchr(a, '=') && a[0] != '-' && n_ovr < 128) {
            ovr[n_ovr++] = a;
        } else {
            fprintf(stderr,
                    "rlctl eval: with a recipe, '%s' is not --model, --adapter, --run, "
                    "--json or a key=value override (rlctl eval --help)\n",
                    a);
            return RL_EXIT_USAGE;
        }
    }
    char err[4096];
    rl_recipe_t *r = NULL;
    if (rl_recipe_load_file(rl_algos(), path, ovr, n_ovr, 0, &r, err, sizeof err) != 0) {
        fprintf(stderr, "%s\nrlctl eval: %s: not a usable recipe\n", err, path);
        return RL_EXIT_USAGE;
    }
    int rc = RL_EXIT_OK;
    if (!r->data.eval.n) {
        fprintf(stderr, "rlctl eval: %s has no data.eval (set it, e.g. data.eval=FILE)\n", path);
        rl_recipe_destroy(&r);
        return RL_EXIT_USAGE;
    }
    char fin[4200], cfg[4300];
    if (run) { // a run's final/: an adapter on the recipe's model, or a whole model
        snprintf(fin, sizeof fin, "%s/final", run);
        snprintf(cfg, sizeof cfg, "%s/adapter_config.json", fin);
        if (access(cfg, R_OK) == 0) {
            adapter = fin;
        } else {
            model_dir = fin;
        }
    }
    rl_model_t *m = NULL;
    rl_tokenizer_t *tok = NULL;
    rc = rl_cli_load_model("eval", model_dir ? model_dir : r->model.path, adapter, r->train.threads,
                           &m, &tok);
    if (rc) {
        rl_recipe_destroy(&r);
        return rc;
    }
    // the prompts as a run renders them: the recipe's chat template
    rl_chat_format_t chat = rl_run_chat_format(r);
    rl_prompts_t *ps =
        rl_prompts_load(rl_recipe_paths(&r->data.eval), r->data.eval.n, r->data.prompt_field, tok,
                        chat, r->data.max_prompt_length, r->data.truncation, err, sizeof err);
    rl_reward_t *rw[RL_RECIPE_MAX_REWARDS] = {0};
    int R = r->n_rewards;
    if (!ps) {
        fprintf(stderr, "rlctl eval: %s\n", err);
        rc = RL_EXIT_USAGE;
    }
    for (int q = 0; !rc && q < R; q++) {
        if (rl_reward_open(&r->rewards[q], r->train.threads, &rw[q], err, sizeof err) != 0) {
            fprintf(stderr, "rlctl eval: %s\n", err);
            rc = RL_EXIT_USAGE;
        }
    }
    int P = ps ? (int)rl_prompts_count(ps) : 0;
    if (!rc && r->train.eval_samples > 0 && r->train.eval_samples < P) {
        P = r->train.eval_samples;
    }
    s_pass_t sampled, greedy;
    if (!rc && R == 0) {
        fprintf(stderr, "rlctl eval: %s has no rewards to score with\n", path);
        rc = RL_EXIT_USAGE;
    }
    if (!rc) {
        rc = s_pass(r, m, tok, ps, P, rw, r->sampling.temperature, r->train.eval_k, &sampled);
    }
    if (!rc) {
        rc = s_pass(r, m, tok, ps, P, rw, 0.0, 1, &greedy);
    }
    if (!rc) {
        json_t *o = json_object();
        json_object_set_new(o, "eval/reward", json_real(sampled.st.reward));
        for (int q = 0; q < R; q++) {
            char key[300];
            snprintf(key, sizeof key, "eval/rewards/%s/mean", r->rewards[q].name);
            json_object_set_new(o, key, json_real(sampled.st.means[q]));
        }
        json_object_set_new(o, "eval/accuracy", json_real(sampled.st.accuracy));
        json_object_set_new(o, "eval/accuracy_greedy", json_real(greedy.st.accuracy));
        if (sampled.n > 1) {
            char key[64];
            snprintf(key, sizeof key, "eval/pass@%d", sampled.n);
            json_object_set_new(o, key, json_real(sampled.st.pass_at_k));
        }
        json_object_set_new(o, "rows", json_integer(P));
        if (json) {
            char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
            printf("%s\n", s ? s : "{}");
            free(s);
        } else {
            const char *k;
            json_t *v;
            json_object_foreach(o, k, v) {
                printf("%-28s %s%g\n", k, "", json_number_value(v));
            }
        }
        json_decref(o);
    }
    for (int q = 0; q < R; q++) {
        rl_reward_close(&rw[q]);
    }
    rl_prompts_destroy(&ps);
    rl_tokenizer_destroy(&tok);
    rl_model_destroy(&m);
    rl_recipe_destroy(&r);
    return rc;
}

// rl_algo_dpo — Direct Preference Optimization (Rafailov et al. 2023; TRL's DPOTrainer v0.28 and
// its loss variants; REFERENCE.md §1) as the controller runs it, on offline preference pairs.
// Per step:
//   1. take train.batch_size pairs in the run's data order (rl_data's preference rows: example
//      2i is prompt + chosen, 2i + 1 prompt + rejected, the loss mask on the completions);
//   2. the reference's summed completion logprobs of each row: from the reference cache
//      (rollout/rl_refcache, keyed by the tokenized data and the reference's weights) where it
//      has them, else computed now by the reference (its own worker, or the actor with adapters
//      off) and stored, so that a resumed run or a second run on the same data and base does not
//      compute them again (`ref/computed` counts the rows computed this step);
//   3. the actor's update: rl_pref_dpo_loss (algorithm.loss_type, beta, label_smoothing,
//      rpo_alpha) over micro-batches of whole pairs, then clip and AdamW;
//   4. the metrics with TRL's names: rewards/chosen, rewards/rejected, rewards/accuracies,
//      rewards/margins, logps/chosen, logps/rejected (and nll_loss with RPO).
// Evaluation (before training, every train.eval_every steps and after the last step):
//   - with data.eval, eval/accuracy and eval/accuracy_greedy keep their meaning for every
//     algorithm: the held-out prompts sampled at the recipe's temperature and greedily on the
//     samplers (the actor's weights synced to them first) and scored by the task's rule
//     (rl_rollout_evaluate, as GRPO does);
//   - with data.eval_pairs, the same loss and metrics as training on the held-out pairs under
//     eval/ (the policy's sums from the actor, no dropout; the reference's from the cache).
#include "rl_algos.h"

#include "rl_chat.h"
#include "rl_clock.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_pairs.h"
#include "rl_pref.h"
#include "rl_refcache.h"
#include "rl_rollout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the recipe: its keys and checks (rl_recipe_algo_def_t) ----------------------------------

static const char *const s_pref_losses[] = {[RL_RECIPE_PREF_SIGMOID] = "sigmoid",
                                            [RL_RECIPE_PREF_HINGE] = "hinge",
                                            [RL_RECIPE_PREF_IPO] = "ipo",
                                            NULL};

// clang-format off
static const rl_recipe_key_t s_dpo_keys[] = {
    {.section = "algorithm", .key = "loss_type", .type = RL_RECIPE_T_ENUM,
     .offset = RL_RECIPE_AT(algorithm.loss_type), RL_RECIPE_DEF("sigmoid"),
     .choices = s_pref_losses,
     .doc = "DPO's loss: sigmoid (DPO, cDPO with label_smoothing), hinge, ipo"},
    {.section = "algorithm", .key = "label_smoothing", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.label_smoothing), RL_RECIPE_DEF("0.0"),
     .flags = RL_RECIPE_K_MAX_EXCL, .max = 0.5, .doc = "cDPO's label noise epsilon (sigmoid only)"},
    {.section = "algorithm", .key = "rpo_alpha", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.rpo_alpha), RL_RECIPE_DEF("0.0"), .max = RL_RECIPE_BIG,
     .doc = "weight of RPO's NLL term on the chosen completions; 0 = off"},
    {0},
};
// clang-format on

// beta is DPO's temperature: > 0 (the pairs' shape is checked for every algorithm on pairs).
static void s_check(rl_recipe_check_t *c, const rl_recipe_t *r) {
    if (!(r->algorithm.beta > 0)) {
        rl_recipe_check_err(c, "algorithm.beta", "%g: DPO needs beta > 0 (TRL's default 0.1)",
                            r->algorithm.beta);
    }
}

static const rl_recipe_key_t *const s_keys[] = {rl_loss_beta_keys, s_dpo_keys, NULL};
static const rl_recipe_default_t s_defaults[] = {{"algorithm.beta", "0.1"}, {NULL, NULL}};

// The loss DPO trains with (the registry's, rl_loss.h).
#define S_LOSS "dpo"

typedef struct {
    rl_data_t *train;       // preference rows: 2 examples a pair
    rl_data_t *eval;        // data.eval_pairs, or NULL
    rl_rollout_data_t *acc; // data.eval's prompts and answers (accuracy by sampling), or NULL
    rl_refcache_t *cache;
    uint64_t data_hash, eval_hash, ref_hash;
} s_dpo_t;

static void s_roles(const rl_recipe_t *r, rl_algo_roles_t *out) {
    out->reference = r->roles.reference != RL_RECIPE_REF_ACTOR;
    out->sampling = r->data.eval.n > 0; // only to measure eval/accuracy
    out->samplers = out->sampling ? r->roles.samplers : 0;
}

// What s_create loads, checked before the run and by `rlctl validate` with the run's own
// messages: the pairs (rl_pairs_preflight) and data.eval's prompts.
static int s_preflight(const rl_recipe_t *r, char *err, size_t err_len) {
    int rc = rl_pairs_preflight(r, 1, 0, err, err_len);
    if (rc || !r->data.eval.n) {
        return rc;
    }
    rl_tokenizer_t *tok = rl_run_tokenizer(r, err, err_len);
    rl_rollout_data_t *acc = NULL;
    rc = tok ? rl_rollout_data_new(r, tok, RL_ROLLOUT_QUIET | RL_ROLLOUT_EVAL_ONLY, &acc, err,
                                   err_len)
             : RL_EINVAL;
    rl_rollout_data_destroy(&acc);
    rl_tokenizer_destroy(&tok);
    return rc;
}

static void s_destroy(void **state) {
    s_dpo_t *s = *state;
    if (s) {
        rl_data_destroy(&s->train);
        rl_data_destroy(&s->eval);
        rl_rollout_data_destroy(&s->acc);
        rl_refcache_destroy(&s->cache);
        free(s);
    }
    *state = NULL;
}

// data.ref_cache, else $XDG_CACHE_HOME/rlctl/refcache, else ~/.cache/rlctl/refcache
static void s_cache_dir(const rl_recipe_t *r, const char *run_dir, char *out, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (r->data.ref_cache) {
        snprintf(out, n, "%s", r->data.ref_cache);
    } else if (xdg && xdg[0] == '/') {
        snprintf(out, n, "%s/rlctl/refcache", xdg);
    } else if (home && home[0] == '/') {
        snprintf(out, n, "%s/.cache/rlctl/refcache", home);
    } else {
        snprintf(out, n, "%s/refcache", run_dir);
    }
}

// The hash of a dataset's tokenized examples (lengths, tokens, masks); *longest grows to its
// longest example.
static uint64_t s_hash_data(const rl_data_t *data, int *longest) {
    uint64_t h = RL_REFCACHE_HASH_INIT;
    for (size_t i = 0; i < rl_data_count(data); i++) {
        const int32_t *t;
        const uint8_t *m;
        int len;
        rl_data_example(data, i, &t, &m, &len, NULL);
        h = rl_refcache_hash(h, &len, sizeof len);
        h = rl_refcache_hash(h, t, (size_t)len * sizeof(*t));
        h = rl_refcache_hash(h, m, (size_t)len);
        *longest = len > *longest ? len : *longest;
    }
    return h;
}

static int s_create(rl_run_t *run, void **state, size_t *n_train, double *data_frame, char *err,
                    size_t err_len) {
    const rl_recipe_t *r = run->r;
    s_dpo_t *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = rl_pairs_load(r, run->tok, 1, 0, 0, &s->train, &s->eval, err, err_len);
    if (rc) {
        return rc;
    }
    if (r->data.eval.n) {
        rc = rl_rollout_data_new(r, run->tok, RL_ROLLOUT_QUIET | RL_ROLLOUT_EVAL_ONLY, &s->acc, err,
                                 err_len);
        if (rc) {
            return rc;
        }
    }
    // the cache's keys: the tokenized data (every example's tokens and mask) and the reference
    int longest = 2;
    s->data_hash = s_hash_data(s->train, &longest);
    s->eval_hash = s->eval ? s_hash_data(s->eval, &longest) : 0;
    rc = rl_refcache_hash_model(r->model.path, RL_REFCACHE_HASH_INIT, &s->ref_hash, err, err_len);
    char dir[4096];
    s_cache_dir(r, run->run_dir, dir, sizeof dir);
    if (!rc) {
        rc = rl_refcache_new(dir, &s->cache, err, err_len);
    }
    if (rc) {
        return rc;
    }
    rl_log_info("preference data: %zu pairs, %zu held-out pairs, %d held-out prompts; reference "
                "cache %s",
                rl_data_count(s->train) / 2, s->eval ? rl_data_count(s->eval) / 2 : (size_t)0,
                s->acc ? s->acc->n_eval : 0, dir);
    *n_train = rl_data_count(s->train) / 2;
    *data_frame = 8.0 * 2.0 * (double)r->train.batch_size * (double)longest;
    if (s->acc) {
        double f = rl_rollout_data_frame(run, s->acc, 0);
        *data_frame = f > *data_frame ? f : *data_frame;
    }
    return 0;
}

// ---- one step -----------------------------------------------------------------------------------

typedef struct {
    rl_pairs_rows_t rows; // the sequences (2 a pair)
    double *ref;          // (B) reference sums
    uint8_t *found;       // (B)
    float *logp;          // (B,T) scratch for logprobs
} s_step_t;

static void s_step_free(s_step_t *t) {
    rl_pairs_rows_free(&t->rows);
    free(t->ref);
    free(t->found);
    free(t->logp);
}

// The rows of examples ex[0..B) of a dataset into t, and its other arrays. Returns 0 or
// RL_ENOMEM (free with s_step_free either way).
static int s_rows(const rl_data_t *data, const int64_t *ex, int B, s_step_t *t) {
    memset(t, 0, sizeof *t);
    if (rl_pairs_rows(data, ex, B, &t->rows) != 0) {
        return RL_ENOMEM;
    }
    size_t bt = (size_t)B * (size_t)t->rows.T;
    t->ref = calloc((size_t)B + 1, sizeof(double));
    t->found = calloc((size_t)B + 1, 1);
    t->logp = calloc(bt, sizeof(float));
    return t->ref && t->found && t->logp ? 0 : RL_ENOMEM;
}

// The sum in double of logp[0..T) where mask is set, and (count may be NULL) how many.
static double s_masked_sum(const uint8_t *mask, const float *logp, int T, int *count) {
    double sum = 0;
    int n = 0;
    for (int c = 0; c < T; c++) {
        if (mask[c]) {
            sum += (double)logp[c];
            n++;
        }
    }
    if (count) {
        *count = n;
    }
    return sum;
}

// 2. the reference sums of the rows the cache lacks: one logprobs call over them, then stored.
static int s_reference(rl_run_t *run, s_dpo_t *s, uint64_t data_hash, s_step_t *t, int *computed,
                       char *err, size_t err_len) {
    const rl_pairs_rows_t *w = &t->rows;
    int B = w->B, T = w->T, hits = 0;
    int rc = rl_refcache_get(s->cache, data_hash, s->ref_hash, w->ex, B, t->ref, t->found, &hits,
                             err, err_len);
    *computed = rc ? 0 : B - hits;
    if (rc || hits == B) {
        return rc;
    }
    int n = B - hits, k = 0;
    int32_t *tok = malloc((size_t)n * (size_t)T * sizeof(int32_t));
    int32_t *len = malloc((size_t)n * sizeof(int32_t));
    int64_t *ex = malloc((size_t)n * sizeof(int64_t));
    double *sum = malloc((size_t)n * sizeof(double));
    if (!tok || !len || !ex || !sum) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int b = 0; !rc && b < B; b++) {
        if (!t->found[b]) {
            memcpy(tok + (size_t)k * T, w->tok + (size_t)b * T, (size_t)T * sizeof(int32_t));
            len[k] = w->len[b];
            ex[k++] = w->ex[b];
        }
    }
    if (!rc) {
        rc = rl_run_logprobs(run, 1, tok, len, n, T, 1.0, t->logp, err, err_len);
    }
    for (int i = 0, b = 0; !rc && b < B; b++) {
        if (t->found[b]) {
            continue;
        }
        t->ref[b] = sum[i] =
            s_masked_sum(w->mask + (size_t)b * T, t->logp + (size_t)i * T, T, NULL);
        i++;
    }
    if (!rc) {
        rc = rl_refcache_put(s->cache, data_hash, s->ref_hash, ex, sum, n, err, err_len);
    }
    free(tok);
    free(len);
    free(ex);
    free(sum);
    return rc;
}

// TRL's per-pair means of st under prefix ("" or "eval/"): rewards/chosen, rewards/rejected,
// rewards/accuracies, rewards/margins, logps/chosen, logps/rejected.
static int s_step(void *state, rl_run_t *run, int *advanced_p, char *note, size_t note_len,
                  char *err, size_t err_len) {
    s_dpo_t *s = state;
    const rl_recipe_t *r = run->r;
    int P = r->train.batch_size, B = 2 * P;
    double t0 = rl_clock_now();
    *advanced_p = 0;
    s_step_t t;
    memset(&t, 0, sizeof t);
    // 1. the step's pairs
    int64_t *ex = malloc((size_t)B * sizeof(int64_t));
    int rc = ex ? 0 : RL_ENOMEM;
    if (!rc) {
        rl_pairs_take(run, P, ex);
        rc = s_rows(s->train, ex, B, &t);
    }
    free(ex);
    if (rc) {
        rc = rl_errf(err, err_len, rc, "out of memory");
    }
    // 2. the reference
    int computed = 0;
    if (!rc) {
        rc = s_reference(run, s, s->data_hash, &t, &computed, err, err_len);
    }
    double t1 = rl_clock_now();
    // 3. the update
    double lr = rl_sched_lr(&run->sched, run->step);
    rl_proto_train_reply_t x;
    rl_msg_t *rep = NULL;
    if (!rc) {
        rc = rl_pairs_train(run, S_LOSS, &t.rows, t.ref, NULL, lr, &x, &rep, err, err_len);
    }
    s_step_free(&t);
    if (rc) {
        rl_msg_free(&rep);
        return rc;
    }
    *advanced_p = 1; // run->version stays: the samplers are synced before an evaluation only
    // 4. the metrics (TRL's names)
    rl_metrics_t *mt = run->metrics;
    rl_run_loss_metrics(run, S_LOSS, &x);
    rl_metrics_add(mt, "learning_rate", lr);
    rl_metrics_add(mt, "num_tokens", (double)run->num_tokens);
    rl_metrics_add(mt, "ref/computed", computed);
    rl_metrics_add(mt, "timing/reference", t1 - t0);
    rl_metrics_add(mt, "timing/train", rl_clock_now() - t1);
    rl_metrics_add(mt, "timing/step", rl_clock_now() - t0);
    snprintf(note, note_len, "loss %.4f acc %.2f margin %.3f",
             rl_run_loss_metric(S_LOSS, &x, "loss"),
             rl_run_loss_metric(S_LOSS, &x, "rewards/accuracies"),
             rl_run_loss_metric(S_LOSS, &x, "rewards/margins"));
    rl_msg_free(&rep);
    return 0;
}

// The held-out pairs, micro_batch_size sequences at a time: the policy's sums (the actor's
// logprobs at temperature 1, no dropout), the reference's (the cache, else computed and stored),
// rl_pref_dpo_loss over all pairs (divisors: the set's pairs and chosen tokens; no update), the
// metrics under eval/.
static int s_eval_pairs(s_dpo_t *s, rl_run_t *run, char *note, size_t note_len, char *err,
                        size_t err_len) {
    const rl_recipe_t *r = run->r;
    double t0 = rl_clock_now(), loss = 0, nll_denom = 0;
    int computed_all = 0;
    size_t n_ex = rl_data_count(s->eval);
    int mb = r->train.micro_batch_size >= 2 ? r->train.micro_batch_size / 2 * 2 : 2;
    rl_pref_dpo_t cfg = {r->algorithm.loss_type, r->algorithm.beta, r->algorithm.label_smoothing,
                         r->algorithm.rpo_alpha};
    rl_pref_dpo_stats_t st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < n_ex; i += 2) { // RPO's divisor: every chosen token of the set
        const uint8_t *m;
        int len;
        rl_data_example(s->eval, i, NULL, &m, &len, NULL);
        for (int k = 0; k < len; k++) {
            nll_denom += m[k];
        }
    }
    int rc = 0;
    for (size_t b0 = 0; !rc && b0 < n_ex; b0 += (size_t)mb) {
        int B = (int)(n_ex - b0 < (size_t)mb ? n_ex - b0 : (size_t)mb), computed = 0;
        int P = B / 2;
        s_step_t t;
        memset(&t, 0, sizeof t);
        // per pair k: policy chosen, rejected, reference chosen, rejected; token counts
        double *v = calloc((size_t)P * 6 + 1, sizeof(double));
        int *cnt = calloc((size_t)B + 1, sizeof(int));
        int64_t *ex = malloc((size_t)B * sizeof(int64_t));
        for (int i = 0; ex && i < B; i++) {
            ex[i] = (int64_t)(b0 + (size_t)i);
        }
        rc = v && cnt && ex ? s_rows(s->eval, ex, B, &t) : RL_ENOMEM;
        free(ex);
        if (rc) {
            rc = rl_errf(err, err_len, rc, "out of memory");
        }
        int T = t.rows.T;
        if (!rc) {
            rc = s_reference(run, s, s->eval_hash, &t, &computed, err, err_len);
            computed_all += computed;
        }
        if (!rc) {
            rc = rl_run_logprobs(run, 0, t.rows.tok, t.rows.len, B, T, 1.0, t.logp, err, err_len);
        }
        for (int i = 0; !rc && i < B; i++) {
            int n = 0, k = i / 2, rej = i % 2;
            double sum = s_masked_sum(t.rows.mask + (size_t)i * T, t.logp + (size_t)i * T, T, &n);
            v[(size_t)rej * P + k] = sum;            // s_w | s_l
            v[(size_t)(2 + rej) * P + k] = t.ref[i]; // r_w | r_l
            cnt[rej * P + k] = n;                    // n_w | n_l
        }
        if (!rc && P > 0) {
            double part = 0;
            rl_pref_batch_t pb = {P,
                                  v,
                                  v + P,
                                  v + 2 * P,
                                  v + 3 * P,
                                  cnt,
                                  cnt + P,
                                  (double)(n_ex / 2),
                                  nll_denom > 0 ? nll_denom : 1};
            if (rl_pref_dpo_loss(&pb, &cfg, &part, v + 4 * P, v + 5 * P, &st) != 0) {
                rc = rl_errf(err, err_len, RL_EINVAL,
                             "eval: a non-finite logprob in data.eval_pairs");
            }
            loss += part;
        }
        free(v);
        free(cnt);
        s_step_free(&t);
    }
    if (rc) {
        return rc;
    }
    // the update's statistics of the held-out pairs, logged as the update's under eval/
    const rl_loss_t *L = rl_loss_find(S_LOSS);
    rl_loss_stats_t list;
    memset(&list, 0, sizeof list);
    rl_pref_dpo_stats_list(&st, loss, 0, &list);
    rl_metrics_t *mt = run->metrics;
    rl_loss_metrics(L, &list, "eval/", mt);
    rl_metrics_add(mt, "eval/ref/computed", computed_all);
    rl_metrics_add(mt, "timing/eval_pairs", rl_clock_now() - t0);
    snprintf(note, note_len, "eval loss %.4f acc %.2f", loss,
             rl_loss_metric(L, &list, "rewards/accuracies"));
    return 0;
}

static int s_evaluate(void *state, rl_run_t *run, double *acc, double *acc_greedy, char *note,
                      size_t note_len, char *err, size_t err_len) {
    s_dpo_t *s = state;
    *acc = *acc_greedy = NAN;
    note[0] = 0;
    int rc = 0;
    if (s->acc && run->samplers.n > 0 && run->version != run->step) {
        // the samplers get the weights of this step (DPO samples nothing in training)
        run->version = run->step;
        rc = rl_run_sync_actor(run, err, err_len);
    }
    char a[128] = "", p[128] = "";
    if (!rc && s->acc && run->samplers.n > 0) {
        rc = rl_rollout_evaluate(s->acc, run, acc, acc_greedy, a, sizeof a, err, err_len);
    }
    if (!rc && s->eval) {
        rc = s_eval_pairs(s, run, p, sizeof p, err, err_len);
    }
    snprintf(note, note_len, "%s%s%s", a, a[0] && p[0] ? ", " : "", p);
    return rc;
}

const rl_algo_t rl_algo_dpo = {
    .recipe =
        {
            .name = "dpo",
            .title = "DPO",
            .doc = "direct preference optimization on chosen/rejected pairs against a frozen "
                   "reference",
            .uses = RL_RECIPE_USES_SEQUENCES | RL_RECIPE_USES_PAIRS | RL_RECIPE_USES_REF_SUMS,
            .keys = s_keys,
            .defaults = s_defaults,
            .check = s_check,
        },
    .roles = s_roles,
    .preflight = s_preflight,
    .create = s_create,
    .destroy = s_destroy,
    .step = s_step,
    .evaluate = s_evaluate,
    .bookends = 1,
    .stores = 0,
};

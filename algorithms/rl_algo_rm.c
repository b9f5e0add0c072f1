// rl_algo_rm — reward-model training (TRL's RewardTrainer; REFERENCE.md §1, Bradley-Terry) as the
// controller runs it, on the same preference pairs as DPO. The actor holds the reward model:
// model.path's decoder (LoRA or full, the lora section) with a scalar `score` head on the final
// norm's output, read at each sequence's last real token (rl_head.h). Per step:
//   1. take train.batch_size pairs in the run's data order (rl_pairs: example 2i is prompt +
//      chosen, 2i + 1 prompt + rejected; no EOS is appended, so the head reads the completion's
//      last token, the token transformers pools when the pad token is the EOS);
//   2. the actor's update: rl_pref_rm_loss, -log sigma(r_w - r_l - margin) + c (r_w + r_l)^2
//      (the margin from data.margin_field when the rows have it, c =
//      algorithm.center_rewards_coefficient), a mean over the step's pairs, in micro-batches of
//      whole pairs, then clip and AdamW;
//   3. the metrics: loss, rm/accuracy (pairs with r_w > r_l), rm/margin (mean r_w - r_l),
//      rm/chosen, rm/rejected (mean scores), grad_norm, learning_rate, num_tokens.
// Evaluation (before training, every train.eval_every steps, after the last step; with
// data.eval_pairs): the same loss and eval/rm/accuracy, eval/rm/margin on the held-out pairs from
// the actor's scores (no dropout, no update). final/ is an HF sequence classifier
// (<Arch>ForSequenceClassification, LoRA merged) that `rewards: - model:` and critic.init load.
#include "rl_algos.h"

#include "rl_clock.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_pairs.h"
#include "rl_pref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the recipe: its keys and checks (rl_recipe_algo_def_t) ----------------------------------

// clang-format off
static const rl_recipe_key_t s_rm_keys[] = {
    {.section = "algorithm", .key = "center_rewards_coefficient", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.center_rewards_coefficient), RL_RECIPE_DEF("0.0"),
     .max = RL_RECIPE_BIG,
     .doc = "weight of the reward model's centering term mean((r_w + r_l)^2) (TRL's "
            "center_rewards_coefficient); 0 = off"},
    {0},
};
// clang-format on

// A reward model samples nothing: its held-out data are pairs.
static void s_check(rl_recipe_check_t *c, const rl_recipe_t *r) {
    if (r->data.eval.n) {
        rl_recipe_check_err(c, "data.eval",
                            "a reward model samples nothing; hold pairs out with data.eval_pairs");
    }
}

static const rl_recipe_key_t *const s_keys[] = {s_rm_keys, NULL};

// The loss a reward model trains with (the registry's, rl_loss.h).
#define S_LOSS "rm"

typedef struct {
    rl_data_t *train; // preference rows: 2 examples a pair
    rl_data_t *eval;  // data.eval_pairs, or NULL
} s_rm_t;

static void s_roles(const rl_recipe_t *r, rl_algo_roles_t *out) {
    (void)r;
    (void)out; // the actor alone
}

// The pairs s_create loads, checked before the run and by `rlctl validate` with the run's own
// messages (rl_pairs_preflight).
static int s_preflight(const rl_recipe_t *r, char *err, size_t err_len) {
    return rl_pairs_preflight(r, 0, 1, err, err_len);
}

static void s_destroy(void **state) {
    s_rm_t *s = *state;
    if (s) {
        rl_data_destroy(&s->train);
        rl_data_destroy(&s->eval);
        free(s);
    }
    *state = NULL;
}

static int s_create(rl_run_t *run, void **state, size_t *n_train, double *data_frame, char *err,
                    size_t err_len) {
    const rl_recipe_t *r = run->r;
    s_rm_t *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = rl_pairs_load(r, run->tok, 0, 1, 0, &s->train, &s->eval, err, err_len);
    if (rc) {
        return rc;
    }
    int longest = 2;
    rl_data_t *sets[2] = {s->train, s->eval};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; sets[k] && i < rl_data_count(sets[k]); i++) {
            int len;
            rl_data_example(sets[k], i, NULL, NULL, &len, NULL);
            longest = len > longest ? len : longest;
        }
    }
    double m;
    rl_log_info("preference data: %zu pairs%s, %zu held-out pairs", rl_data_count(s->train) / 2,
                rl_data_margin(s->train, 0, &m) ? " with margins" : "",
                s->eval ? rl_data_count(s->eval) / 2 : (size_t)0);
    *n_train = rl_data_count(s->train) / 2;
    // the largest tensor a request carries: (B,T) int32 tokens of a step, with room
    *data_frame = 8.0 * 2.0 * (double)r->train.batch_size * (double)longest;
    return 0;
}

static int s_step(void *state, rl_run_t *run, int *advanced_p, char *note, size_t note_len,
                  char *err, size_t err_len) {
    s_rm_t *s = state;
    const rl_recipe_t *r = run->r;
    int P = r->train.batch_size, B = 2 * P;
    double t0 = rl_clock_now();
    *advanced_p = 0;
    // 1. the step's pairs (and their margins, on both rows of a pair)
    rl_pairs_rows_t w;
    memset(&w, 0, sizeof w);
    int64_t *ex = malloc((size_t)B * sizeof(int64_t));
    double *margin = malloc((size_t)B * sizeof(double)), m = 0;
    int has_margin = rl_data_margin(s->train, 0, &m);
    int rc = ex && margin ? 0 : RL_ENOMEM;
    if (!rc) {
        rl_pairs_take(run, P, ex);
        rc = rl_pairs_rows(s->train, ex, B, &w);
    }
    for (int b = 0; !rc && b < B; b++) {
        rl_data_margin(s->train, (size_t)ex[b], &margin[b]);
    }
    free(ex);
    if (rc) {
        rc = rl_errf(err, err_len, rc, "out of memory");
    }
    // 2. the update
    double lr = rl_sched_lr(&run->sched, run->step);
    rl_proto_train_reply_t x;
    rl_msg_t *rep = NULL;
    if (!rc) {
        rc = rl_pairs_train(run, S_LOSS, &w, NULL, has_margin ? margin : NULL, lr, &x, &rep, err,
                            err_len);
    }
    rl_pairs_rows_free(&w);
    free(margin);
    if (rc) {
        rl_msg_free(&rep);
        return rc;
    }
    *advanced_p = 1;
    // 3. the metrics
    rl_metrics_t *mt = run->metrics;
    rl_run_loss_metrics(run, S_LOSS, &x);
    rl_metrics_add(mt, "learning_rate", lr);
    rl_metrics_add(mt, "num_tokens", (double)run->num_tokens);
    rl_metrics_add(mt, "timing/step", rl_clock_now() - t0);
    snprintf(note, note_len, "loss %.4f acc %.2f margin %.3f",
             rl_run_loss_metric(S_LOSS, &x, "loss"), rl_run_loss_metric(S_LOSS, &x, "rm/accuracy"),
             rl_run_loss_metric(S_LOSS, &x, "rm/margin"));
    rl_msg_free(&rep);
    return 0;
}

// The held-out pairs, micro_batch_size sequences at a time: the actor's scores, then
// rl_pref_rm_loss over all pairs (divisor: the set's pairs; no update) and the metrics under
// eval/.
static int s_evaluate(void *state, rl_run_t *run, double *acc, double *acc_greedy, char *note,
                      size_t note_len, char *err, size_t err_len) {
    s_rm_t *s = state;
    const rl_recipe_t *r = run->r;
    *acc = *acc_greedy = NAN;
    if (!s->eval) {
        return 0;
    }
    double t0 = rl_clock_now(), loss = 0, m = 0;
    size_t n_ex = rl_data_count(s->eval);
    int mb = r->train.micro_batch_size >= 2 ? r->train.micro_batch_size / 2 * 2 : 2;
    int has_margin = rl_data_margin(s->eval, 0, &m);
    rl_pref_rm_stats_t st;
    memset(&st, 0, sizeof st);
    int rc = 0;
    for (size_t b0 = 0; !rc && b0 < n_ex; b0 += (size_t)mb) {
        int B = (int)(n_ex - b0 < (size_t)mb ? n_ex - b0 : (size_t)mb), P = B / 2;
        rl_pairs_rows_t w;
        memset(&w, 0, sizeof w);
        int64_t *ex = malloc((size_t)B * sizeof(int64_t));
        float *score = malloc((size_t)B * sizeof(float));
        double *v = malloc((size_t)P * 5 * sizeof(double) + 1); // q_w, q_l, margin, dq_w, dq_l
        for (int i = 0; ex && i < B; i++) {
            ex[i] = (int64_t)(b0 + (size_t)i);
        }
        rc = ex && score && v ? rl_pairs_rows(s->eval, ex, B, &w) : RL_ENOMEM;
        if (rc) {
            rc = rl_errf(err, err_len, rc, "out of memory");
        }
        if (!rc) {
            rc = rl_run_scores(run, &run->actor, w.tok, w.len, B, w.T, score, err, err_len);
        }
        for (int k = 0; !rc && k < P; k++) {
            v[k] = score[2 * k];
            v[P + k] = score[2 * k + 1];
            rl_data_margin(s->eval, (size_t)ex[2 * k], &v[2 * P + k]);
        }
        if (!rc && P > 0) {
            double part = 0;
            rl_pref_rm_batch_t pb = {P, v, v + P, has_margin ? v + 2 * P : NULL,
                                     (double)(n_ex / 2)};
            if (rl_pref_rm_loss(&pb, r->algorithm.center_rewards_coefficient, &part, v + 3 * P,
                                v + 4 * P, &st) != 0) {
                rc =
                    rl_errf(err, err_len, RL_EINVAL, "eval: a non-finite score in data.eval_pairs");
            }
            loss += part;
        }
        free(ex);
        free(score);
        free(v);
        rl_pairs_rows_free(&w);
    }
    if (rc) {
        return rc;
    }
    // the update's statistics of the held-out pairs, logged as the update's under eval/ (the
    // loss and the ranking: accuracy and margin)
    const rl_loss_t *L = rl_loss_find(S_LOSS);
    rl_loss_stats_t list;
    memset(&list, 0, sizeof list);
    rl_pref_rm_stats_list(&st, loss, 0, &list); // the scores' means are training's only
    rl_metrics_t *mt = run->metrics;
    rl_loss_metrics(L, &list, "eval/", mt);
    rl_metrics_add(mt, "timing/eval", rl_clock_now() - t0);
    snprintf(note, note_len, "eval loss %.4f acc %.3f", loss,
             rl_loss_metric(L, &list, "rm/accuracy"));
    return 0;
}

const rl_algo_t rl_algo_rm = {
    .recipe =
        {
            .name = "rm",
            .title = "a reward model",
            .doc = "a reward model (a score head) trained on preference pairs (Bradley-Terry)",
            .uses = RL_RECIPE_USES_SEQUENCES | RL_RECIPE_USES_PAIRS | RL_RECIPE_USES_MARGINS |
                    RL_RECIPE_USES_SCORE_HEAD,
            .keys = s_keys,
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

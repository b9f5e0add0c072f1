// test_policy — the one training step every loss uses (rl_policy_step) on the cookbook's arith
// base model (0.8M parameters, LoRA): micro-batches hold whole groups of rows (DPO's pairs), a
// batch whose rows are not whole groups is refused, every micro-batch is trimmed to its longest
// row, the loss callback sees each micro-batch once per pass (entropy on the first pass only
// when asked), a non-finite loss stops the step naming it with no update made, and the SFT
// step (rl_policy_train_sft) equals the generic step with the SFT loss written out here.
#include "rl_config.h"
#include "rl_err.h"
#include "rl_loss_sft.h"
#include "rl_policy.h"
#include "rl_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n_calls;
    int b0[32], n[32], T[32], it[32], ent[32];
    double value; // the loss each micro-batch reports
} s_log_t;

static int s_record(void *ctx, const rl_policy_micro_t *m, float *dlogp, double *loss) {
    s_log_t *l = ctx;
    if (l->n_calls < 32) {
        l->b0[l->n_calls] = m->b0;
        l->n[l->n_calls] = m->n;
        l->T[l->n_calls] = m->T;
        l->it[l->n_calls] = m->iteration;
        l->ent[l->n_calls] = m->entropy != NULL;
    }
    l->n_calls++;
    for (int i = 0; i < m->n * m->T; i++) {
        dlogp[i] = -m->mask[i] * 1e-3f; // a tiny push: the weights move, finitely
    }
    *loss = l->value;
    return 0;
}

static int s_sft(void *ctx, const rl_policy_micro_t *m, float *dlogp, double *loss) {
    int64_t n_tok = *(const int64_t *)ctx;
    *loss = rl_loss_sft_forward(m->logp, m->mask, m->n, m->T, n_tok);
    rl_loss_sft_backward(dlogp, m->mask, m->n, m->T, n_tok);
    return 0;
}

// A (6, 12) batch: row b holds 6 + b tokens (so micro-batches trim differently), mask on the last
// 4 of each.
static int32_t s_tok[72];
static int s_len[6];
static uint8_t s_mask[72];

static void s_batch(void) {
    memset(s_tok, 0, sizeof s_tok);
    memset(s_mask, 0, sizeof s_mask);
    for (int b = 0; b < 6; b++) {
        s_len[b] = 6 + b;
        for (int t = 0; t < s_len[b]; t++) {
            s_tok[b * 12 + t] = 1 + (b * 5 + t * 3) % 13;
            s_mask[b * 12 + t] = t >= s_len[b] - 4;
        }
    }
}

static rl_policy_t *s_policy(rl_recipe_t **r) {
    char err[4096];
    int rc = rl_recipe_load_file(RL_SOURCE_DIR "/cookbook/grpo_lora.yaml", NULL, 0, 0, r, err,
                                 sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    rl_policy_t *p = NULL;
    if (rc == 0) {
        rc = rl_policy_new(*r, 1, &p, err, sizeof err);
        CHECK_MSG(rc == 0, "%s", err);
    }
    return p;
}

int main(void) {
    s_batch();
    rl_recipe_t *r = NULL;
    rl_policy_t *p = s_policy(&r);
    if (!p) {
        rl_recipe_destroy(&r);
        RL_TEST_DONE();
    }
    char err[512];
    rl_policy_step_stats_t st;
    // groups of 2, micro-batch 3 -> micro-batches of 2 rows; two passes; entropy on pass 0 only
    rl_policy_rows_t rows = {6, 12, s_tok, s_len, s_mask, 2};
    rl_policy_step_opts_t o = {1.0f, 3, 2, 1e-3, 1.0, 1, 0};
    s_log_t log = {.value = 0.25};
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), 0);
    CHECK_INT(log.n_calls, 6);
    for (int i = 0; i < 6 && i < log.n_calls; i++) {
        CHECK_INT(log.n[i], 2);
        CHECK_INT(log.b0[i], 2 * (i % 3));
        CHECK_INT(log.it[i], i / 3);
        CHECK_INT(log.ent[i], i < 3);
        CHECK_INT(log.T[i], s_len[log.b0[i] + 1]); // trimmed to the longer of its two rows
    }
    CHECK_INT(st.iterations, 2);
    CHECK(st.loss == 0.75 && st.grad_norm > 0 && isfinite(st.grad_norm));
    // groups of 3, micro-batch 4 -> 3 rows each; micro-batch 1 -> one group (3 rows) each
    rows.group = 3;
    o.iterations = 1;
    o.micro_batch = 4;
    memset(&log, 0, sizeof log);
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), 0);
    CHECK(log.n_calls == 2 && log.n[0] == 3 && log.n[1] == 3 && log.b0[1] == 3);
    o.micro_batch = 1;
    memset(&log, 0, sizeof log);
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), 0);
    CHECK(log.n_calls == 2 && log.n[0] == 3);
    // rows that are not whole groups; a NaN loss (no update: the weights stay)
    rows.group = 4;
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "groups of 4");
    rows.group = 1;
    size_t nw = 0;
    const float *w = rl_policy_weights(p, &nw);
    float *before = malloc(nw * sizeof(float));
    memcpy(before, w, nw * sizeof(float));
    log.value = NAN;
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "iteration 1: the loss is NaN");
    o.step = 12;
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "step 12: the loss is NaN; stopping");
    w = rl_policy_weights(p, &nw);
    CHECK_MSG(memcmp(before, w, nw * sizeof(float)) == 0, "a failed step moved the weights");
    free(before);
    rl_policy_destroy(&p);
    rl_recipe_destroy(&r); // the policy borrowed it

    // rl_policy_train_sft == rl_policy_step with the SFT loss, on two fresh policies
    int64_t n_tok = 24;
    rl_policy_t *a = s_policy(&r), *b = NULL;
    rl_recipe_t *r2 = NULL;
    b = s_policy(&r2);
    rl_policy_step_stats_t sa, sb;
    rows.group = 1;
    CHECK_INT(rl_policy_train_sft(a, &rows, n_tok, 2, 1e-3, 1.0, 1, &sa, err, sizeof err), 0);
    rl_policy_step_opts_t os = {1.0f, 2, 1, 1e-3, 1.0, 0, 1};
    CHECK_INT(rl_policy_step(b, &rows, &os, s_sft, &n_tok, &sb, err, sizeof err), 0);
    size_t na = 0, nb = 0;
    const float *wa = rl_policy_weights(a, &na), *wb = rl_policy_weights(b, &nb);
    CHECK(sa.loss == sb.loss && sa.grad_norm == sb.grad_norm && sa.loss > 0);
    CHECK(na == nb && memcmp(wa, wb, na * sizeof(float)) == 0);
    rl_policy_destroy(&a);
    rl_policy_destroy(&b);
    rl_recipe_destroy(&r);
    rl_recipe_destroy(&r2);
    RL_TEST_DONE();
}

// test_loss_gspo — trainer/rl_loss_gspo (the registry's "gspo") against three independent
// answers:
//   hand values: the sequence ratio of a row (the geometric mean of its token ratios) inside the
//     clip range, above it and below it, its gradient through every token of the row, per-token
//     advantages of both signs in one row, and one update per batch (old = logp detached,
//     s = 1) giving GRPO's gradient;
//   central finite differences of the returned loss for all 144 knob combinations (aggregation,
//     KL estimator, TIS, dual clip, clip-higher), inputs placed away from every kink; also
//     old_logp NULL is exactly old_logp = a copy of logp, and micro-batches with the global
//     divisor add up to the whole batch;
//   PyTorch autograd goldens written by tests/reference/make_policy_loss_goldens.py into
//     tests/fixtures/gspo/ (the torch version is printed).
// And the registry: "gspo" is a policy loss, trained by GRPO's family adapter.
#include "rl_err.h"
#include "rl_grpo.h"
#include "rl_loss.h"
#include "rl_test.h"
#include "rl_test_fd.h"
#include "rl_test_golden.h"
#include "rl_test_policy_loss.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- tolerances --------------------------------------------------------------------------------
// The loss is computed in double from float inputs and only dlogp is rounded to float, so:
//   hand values and the goldens' loss: double rounding -> 1e-12 / 1e-10 relative (torch's
//     float64 exp() may differ from libm's by an ulp);
//   dlogp: one float rounding (6e-8 relative) -> 1e-6 of the largest element compared (a
//     formula error, such as a missing 1/n or the gradient on one token only, is >= 1e-1);
//   finite differences: Richardson-extrapolated central differences in double, steps 2^-7 and
//     2^-8 on logp quantised to 2^-12 (exact in float), truncation O(h^4) ~ 1e-9 -> 1e-6.
#define TOL_EXACT 1e-12
#define TOL_GOLDEN_LOSS 1e-10
#define TOL_GRAD 1e-6
#define TOL_FD 1e-6

static rl_grpo_math_fn s_loss;

static rl_recipe_algorithm_t s_alg(void) {
    rl_recipe_algorithm_t a;
    memset(&a, 0, sizeof(a));
    a.epsilon_low = 0.2;
    a.epsilon_high = 0.2;
    a.kl_estimator = RL_RECIPE_KL_K3;
    a.loss_agg = RL_RECIPE_AGG_TOKEN_MEAN;
    a.tis = RL_RECIPE_TIS_NONE;
    a.tis_cap = 2.0;
    return a;
}

static void test_registry(void) {
    const rl_loss_t *L = rl_loss_find("gspo");
    CHECK(L != NULL);
    if (!L) {
        return;
    }
    CHECK(L->policy_loss && L->rows == 1 && L->model == RL_LOSS_POLICY);
    CHECK(L->train == rl_grpo_train && L->stats == rl_grpo_stats);
    s_loss = rl_grpo_math(L);
    CHECK(s_loss != NULL && s_loss != rl_grpo_loss);
    char names[256];
    CHECK_CONTAINS(rl_loss_names(1, names, sizeof names), "gspo");
}

// ---- hand values --------------------------------------------------------------------------------

// One row of n active tokens with log-ratios x[t] (as rounded to float inputs: *sr gets the
// row's exact sequence ratio), advantage A, token_mean over D = 10.
static double s_row(const double *x, int n, double A, const rl_recipe_algorithm_t *alg,
                    float *dl, rl_grpo_loss_stats_t *st, double *sr) {
    float logp[8], old[8], mask[8];
    double mean = 0.0;
    for (int t = 0; t < n; t++) {
        old[t] = -1.0f - 0.25f * (float)t;
        logp[t] = (float)((double)old[t] + x[t]);
        mask[t] = 1.0f;
        mean += (double)logp[t] - (double)old[t];
    }
    *sr = exp(mean / n);
    rl_grpo_batch_t b = {1, n, logp, old, NULL, NULL, mask, &A, 10.0, NULL};
    memset(st, 0, sizeof *st);
    CHECK_INT(s_loss(&b, alg, dl, st), 0);
    return st->loss;
}

static void test_hand(void) {
    rl_recipe_algorithm_t alg = s_alg();
    float dl[8];
    rl_grpo_loss_stats_t st;
    // inside the range: s = exp(mean x) = exp(0.1); every token: l = -A s, and dL/dlogp_t =
    // (s / n) * sum over the row of -A / D = -A s / D, the same on every token of the row
    const double in[3] = {0.3, 0.1, -0.1};
    double s = 0.0, loss = s_row(in, 3, 1.5, &alg, dl, &st, &s);
    CHECK_CLOSE(loss, 3.0 * -1.5 * s / 10.0, TOL_EXACT);
    for (int t = 0; t < 3; t++) {
        CHECK_CLOSE(dl[t], -1.5 * s / 10.0, 1e-7);
    }
    CHECK(st.tokens == 3 && st.clip_low == 0 && st.clip_high == 0);
    CHECK_CLOSE(st.ratio, 3.0 * s, TOL_EXACT);
    // above the range with A > 0 (one token's ratio would be inside: 0.1): the whole row is
    // clipped at 1.2, gradient 0 on every token, three clipped tokens
    const double up[3] = {0.5, 0.3, 0.1};
    loss = s_row(up, 3, 2.0, &alg, dl, &st, &s);
    CHECK_CLOSE(loss, 3.0 * -2.0 * 1.2 / 10.0, TOL_EXACT);
    CHECK(dl[0] == 0.0f && dl[1] == 0.0f && dl[2] == 0.0f && st.clip_high == 3);
    // the same row with A < 0: not clipped (the ratio only raises the loss), gradient -A s / D
    loss = s_row(up, 3, -2.0, &alg, dl, &st, &s);
    CHECK_CLOSE(loss, 3.0 * 2.0 * s / 10.0, TOL_EXACT);
    CHECK_CLOSE(dl[1], 2.0 * s / 10.0, 1e-7);
    CHECK(st.clip_high == 0 && st.clip_low == 0);
    // below the range with A < 0: clipped at 0.8, gradient 0; with A > 0 it is not
    const double down[2] = {-0.2, -0.4};
    loss = s_row(down, 2, -1.0, &alg, dl, &st, &s);
    CHECK_CLOSE(loss, 2.0 * 0.8 / 10.0, TOL_EXACT);
    CHECK(dl[0] == 0.0f && dl[1] == 0.0f && st.clip_low == 2);
    loss = s_row(down, 2, 1.0, &alg, dl, &st, &s);
    CHECK_CLOSE(dl[0], -s / 10.0, 1e-7);
    CHECK_CLOSE(s, exp(-0.3), 1e-6);
    // dual clip c = 3, A < 0 and s = e^1.2 = 3.3 > c: the loss is -c A on every token, no
    // gradient
    alg.dual_clip = 3.0;
    const double big[2] = {1.0, 1.4};
    loss = s_row(big, 2, -0.5, &alg, dl, &st, &s);
    CHECK_CLOSE(loss, 2.0 * 1.5 / 10.0, TOL_EXACT);
    CHECK(dl[0] == 0.0f && dl[1] == 0.0f && st.dual_clip == 2);
    alg.dual_clip = 0.0;
    // per-token advantages of both signs in one row with s inside the range: the gradient of
    // every token is (s / n) sum_t -A_t / D
    float logp[4] = {-1.0f, -2.0f, -0.5f, -1.5f}, old[4], mask[4] = {1, 1, 1, 1};
    const float ax[4] = {0.2f, -0.1f, 0.05f, -0.05f};
    float atok[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    for (int t = 0; t < 4; t++) {
        old[t] = (float)((double)logp[t] - ax[t]);
    }
    double mean = 0.0, sum_a = 0.0;
    for (int t = 0; t < 4; t++) {
        mean += ((double)logp[t] - (double)old[t]) / 4.0;
        sum_a += atok[t];
    }
    double zero = 0.0;
    rl_grpo_batch_t b = {1, 4, logp, old, NULL, NULL, mask, &zero, 10.0, atok};
    memset(&st, 0, sizeof st);
    CHECK_INT(s_loss(&b, &alg, dl, &st), 0);
    s = exp(mean);
    CHECK_CLOSE(st.loss, -sum_a * s / 10.0, TOL_EXACT);
    for (int t = 0; t < 4; t++) {
        CHECK_CLOSE(dl[t], -sum_a * s / 4.0 / 10.0, 1e-7);
    }
    // one update per batch (old NULL): s = 1 and the gradient is GRPO's, -A / D on every token
    b.old_logp = NULL;
    b.adv_tok = NULL;
    double A = -0.7;
    b.adv = &A;
    float dg[4];
    rl_grpo_loss_stats_t sg = {0};
    memset(&st, 0, sizeof st);
    CHECK_INT(s_loss(&b, &alg, dl, &st), 0);
    CHECK_INT(rl_grpo_loss(&b, &alg, dg, &sg), 0);
    for (int t = 0; t < 4; t++) {
        CHECK_CLOSE(dl[t], dg[t], 1e-7 * fabs(dg[t]));
    }
    CHECK_CLOSE(st.loss, sg.loss, TOL_EXACT);
    CHECK(st.ratio == 4.0 && st.tokens == 4);
    // the checks of rl_grpo_loss apply
    alg.beta = 0.1;
    CHECK_INT(s_loss(&b, &alg, dl, &st), RL_EINVAL); // beta > 0 without ref_logp
}

// ---- finite differences over every knob combination ---------------------------------------------

enum { FB = 5, FT = 6 };

typedef struct {
    float logp[FB * FT], old[FB * FT], ref[FB * FT], mu[FB * FT], mask[FB * FT];
    double adv[FB];
} s_fd_t;

// Each row's mean log-ratio lies at least 0.03 from ln 0.8, ln 1.2, ln 1.28 and ln 3 (a step of
// 2^-7 on one token moves it by at most 2^-7 / 2): row 0 (A > 0) above both upper bounds, row
// 1 (A < 0) above the dual-clip bound 3, row 2 (A < 0) below the lower one, row 3 (A > 0)
// between 1.2 and 1.28 (clipped only with eps_high 0.2), row 4 empty. k3's clamp (d = -2.61)
// and the sequence-TIS interval (row sums 0.1, 1.6, -1.0, 0.3 against ln 2) as in test_grpo.
static void s_fd_inputs(s_fd_t *x) {
    static const float mask[FB][FT] = {{1, 1, 1, 1, 1, 1},
                                       {0, 0, 1, 1, 1, 0},
                                       {0, 1, 1, 1, 1, 1},
                                       {0, 0, 0, 1, 1, 0},
                                       {0, 0, 0, 0, 0, 0}};
    static const double adv[FB] = {1.3, -0.7, -1.1, 0.4, 0.9};
    static const double lr[FB][FT] = {{0.5, 0.2, 0.3, 0.1, 0.4, 0.4},
                                      {0.0, 0.0, 1.3, 1.6, 1.2, 0.0},
                                      {0.0, -0.5, -0.3, -0.1, -0.4, -0.2},
                                      {0.0, 0.0, 0.0, 0.2, 0.23, 0.0},
                                      {0.1, 0.1, 0.1, 0.1, 0.1, 0.1}};
    static const double td[FB][FT] = {{0.9, -0.4, 0.2, -0.4, 0.1, -0.3},
                                      {3.0, 3.0, 0.5, 0.9, 0.2, 3.0},
                                      {3.0, -0.4, -0.4, 0.2, -0.3, -0.1},
                                      {3.0, 3.0, 3.0, 0.5, -0.2, 3.0},
                                      {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}};
    static const double kd[6] = {-3.0, -1.0, -0.4, 0.2, 0.7, 1.5}; // logp - ref
    for (int b = 0; b < FB; b++) {
        x->adv[b] = adv[b];
        for (int t = 0; t < FT; t++) {
            int i = b * FT + t;
            double old = -0.3 - 0.37 * (double)((b * 7 + t * 3) % 11);
            x->logp[i] = (float)(nearbyint((old + lr[b][t]) * 4096.0) / 4096.0);
            x->old[i] = (float)old;
            x->ref[i] = (float)((double)x->logp[i] - kd[(b + t) % 6]);
            x->mu[i] = (float)(old - td[b][t]);
            x->mask[i] = mask[b][t];
        }
    }
}

// The loss of batch x with its logp replaced (an rl_fd_fn; ctx: s_fd_loss_t).
typedef struct {
    const s_fd_t *x;
    const rl_recipe_algorithm_t *alg;
    double denom;
    int use_ref;
} s_fd_loss_t;

static double s_fd_loss(void *ctx, const float *logp) {
    const s_fd_loss_t *c = ctx;
    const s_fd_t *x = c->x;
    rl_grpo_batch_t b = {FB,    FT,      logp,   x->old,   c->use_ref ? x->ref : NULL,
                         x->mu, x->mask, x->adv, c->denom, NULL};
    rl_grpo_loss_stats_t st = {0};
    float scratch[FB * FT];
    CHECK_INT(s_loss(&b, c->alg, scratch, &st), 0);
    return st.loss;
}

static void test_fd_all_knobs(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    const int aggs[3] = {RL_RECIPE_AGG_TOKEN_MEAN, RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN,
                         RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM};
    const double denoms[3] = {20.0, 8.0, 8.0 * 16.0}; // the global batch is larger
    const int tis[3] = {RL_RECIPE_TIS_NONE, RL_RECIPE_TIS_TOKEN, RL_RECIPE_TIS_SEQUENCE};
    double worst = 0.0;
    int combos = 0;
    for (int ia = 0; ia < 3; ia++) {
        for (int ik = 0; ik < 4; ik++) { // off, k1, k2, k3
            for (int it = 0; it < 3; it++) {
                for (int id = 0; id < 2; id++) {
                    for (int ie = 0; ie < 2; ie++) {
                        rl_recipe_algorithm_t alg = s_alg();
                        alg.loss_agg = aggs[ia];
                        alg.beta = ik ? 0.3 : 0.0;
                        alg.kl_estimator = ik == 1   ? RL_RECIPE_KL_K1
                                           : ik == 2 ? RL_RECIPE_KL_K2
                                                     : RL_RECIPE_KL_K3;
                        alg.tis = tis[it];
                        alg.dual_clip = id ? 3.0 : 0.0;
                        alg.epsilon_high = ie ? 0.28 : 0.2;
                        float g[FB * FT];
                        rl_grpo_batch_t b = {FB,   FT,     x.logp, x.old,      ik ? x.ref : NULL,
                                             x.mu, x.mask, x.adv,  denoms[ia], NULL};
                        rl_grpo_loss_stats_t st = {0};
                        CHECK_INT(s_loss(&b, &alg, g, &st), 0);
                        // every branch these inputs are meant to reach is reached
                        CHECK(st.clip_low == 5 && st.clip_high == (ie ? 6 : 8));
                        CHECK(st.dual_clip == (id ? 3 : 0));
                        CHECK(it != 2 || st.tis_masked == 2.0);
                        s_fd_loss_t c = {&x, &alg, denoms[ia], ik != 0};
                        rl_fd_cmp_t r =
                            RL_FD_CHECK(s_fd_loss, &c, x.logp, g, FB * FT, 1.0 / 128.0, NULL,
                                        TOL_FD, "agg %d kl %d tis %d dual %d eps_high %d", aggs[ia],
                                        ik, tis[it], id, ie);
                        worst = fmax(worst, r.rel);
                        combos++;
                    }
                }
            }
        }
    }
    fprintf(stderr,
            "finite differences: %d combinations, worst |dlogp - fd| / max|fd| = %.3g "
            "(tolerance %g)\n",
            combos, worst, TOL_FD);
    CHECK_INT(combos, 144);
}

// old_logp NULL is exactly old_logp = logp (detached), bit for bit; micro-batches of rows {0,1}
// and {2,3,4} with the global divisor add up to the whole batch.
static void test_old_null_and_micro_batches(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    rl_recipe_algorithm_t alg = s_alg();
    alg.beta = 0.3;
    alg.tis = RL_RECIPE_TIS_TOKEN;
    rl_test_policy_micro_batches(s_loss, alg, FB, FT, x.logp, x.old, x.ref, x.mu, x.mask, x.adv,
                                 20.0, TOL_EXACT);
}

// ---- PyTorch goldens ---------------------------------------------------------------------------

static void test_goldens(void) {
    rl_test_policy_golden_t g = {"loss_value", 1, 1, TOL_GOLDEN_LOSS, TOL_GRAD, 0.0, 0.0};
    rl_test_policy_goldens("gspo", s_loss, s_alg(), &g);
}

int main(void) {
    RL_TEST_RUN(test_registry);
    if (!s_loss) {
        RL_TEST_DONE();
    }
    RL_TEST_RUN(test_hand);
    RL_TEST_RUN(test_fd_all_knobs);
    RL_TEST_RUN(test_old_null_and_micro_batches);
    RL_TEST_RUN(test_goldens);
    RL_TEST_DONE();
}

// test_loss_cispo — trainer/rl_loss_cispo (the registry's "cispo") against three independent
// answers:
//   hand values: the detached weight clip(r, 1 - eps_low, 1 + eps_high) inside the range, at the
//     upper and at the lower bound, where every token keeps its gradient -w A (unlike GRPO's
//     clipped tokens), with A of either sign; one update per batch (old = logp detached, w = 1)
//     giving GRPO's gradient bit for bit;
//   central finite differences of the returned loss for all 144 knob combinations: the weight
//     is detached, so the differences move logp, old_logp and mu_logp of a token together (the
//     ratio, its clip and the TIS weights stay what they were) and only the log-probability the
//     loss multiplies, and the KL term, move: the derivative of the surrogate autograd
//     differentiates; also old_logp NULL is exactly old_logp = a copy of logp, and micro-batches
//     with the global divisor add up to the whole batch;
//   PyTorch autograd goldens written by tests/reference/make_policy_loss_goldens.py into
//     tests/fixtures/cispo/ (the torch version is printed).
// And the registry: "cispo" is a policy loss, trained by GRPO's family adapter.
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
//     formula error, such as an unclipped weight or a gradient through it, is >= 1e-2);
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
    const rl_loss_t *L = rl_loss_find("cispo");
    CHECK(L != NULL);
    if (!L) {
        return;
    }
    CHECK(L->policy_loss && L->rows == 1 && L->model == RL_LOSS_POLICY);
    CHECK(L->train == rl_grpo_train && L->stats == rl_grpo_stats);
    s_loss = rl_grpo_math(L);
    CHECK(s_loss != NULL && s_loss != rl_grpo_loss);
    char names[256];
    CHECK_CONTAINS(rl_loss_names(1, names, sizeof names), "cispo");
}

// ---- hand values --------------------------------------------------------------------------------

// One token with log-ratio x (as rounded to float: *r gets the exact ratio), advantage A,
// token_mean over D = 10.
static double s_tok(double x, double A, const rl_recipe_algorithm_t *alg, float *dl,
                    rl_grpo_loss_stats_t *st, double *r, float *lp_out) {
    float old = -1.25f, logp = (float)((double)old + x), mask = 1.0f;
    *r = exp((double)logp - (double)old);
    *lp_out = logp;
    rl_grpo_batch_t b = {1, 1, &logp, &old, NULL, NULL, &mask, &A, 10.0, NULL};
    memset(st, 0, sizeof *st);
    CHECK_INT(s_loss(&b, alg, dl, st), 0);
    return st->loss;
}

static void test_hand(void) {
    rl_recipe_algorithm_t alg = s_alg();
    float dl[1], lp;
    rl_grpo_loss_stats_t st;
    double r = 0.0;
    // inside the range: w = r, l = -r A logp, dl = -r A / D
    double loss = s_tok(0.1, 1.5, &alg, dl, &st, &r, &lp);
    CHECK_CLOSE(loss, -r * 1.5 * lp / 10.0, TOL_EXACT);
    CHECK_CLOSE(dl[0], -r * 1.5 / 10.0, 1e-7);
    CHECK(st.clip_low == 0 && st.clip_high == 0);
    CHECK_CLOSE(st.ratio, r, TOL_EXACT);
    // above it: w = 1.2, and the token keeps its gradient with either sign of A (GRPO's would
    // be 0 for A > 0)
    loss = s_tok(0.5, 2.0, &alg, dl, &st, &r, &lp);
    CHECK_CLOSE(loss, -1.2 * 2.0 * lp / 10.0, TOL_EXACT);
    CHECK_CLOSE(dl[0], -1.2 * 2.0 / 10.0, 1e-7);
    CHECK(st.clip_high == 1 && st.clip_low == 0);
    loss = s_tok(0.5, -2.0, &alg, dl, &st, &r, &lp);
    CHECK_CLOSE(dl[0], 1.2 * 2.0 / 10.0, 1e-7);
    // below it: w = 0.8
    loss = s_tok(-0.5, -1.0, &alg, dl, &st, &r, &lp);
    CHECK_CLOSE(loss, 0.8 * lp / 10.0, TOL_EXACT);
    CHECK_CLOSE(dl[0], 0.8 / 10.0, 1e-7);
    CHECK(st.clip_low == 1 && st.clip_high == 0);
    // the dual clip does not apply: the same with c = 3 and a ratio past it
    alg.dual_clip = 3.0;
    float d3[1];
    loss = s_tok(1.6, -1.0, &alg, d3, &st, &r, &lp);
    CHECK_CLOSE(d3[0], 1.2 / 10.0, 1e-7);
    CHECK(st.dual_clip == 0 && st.clip_high == 1);
    alg.dual_clip = 0.0;
    // the log-ratio clamp: r = exp(20) at most; the weight is the bound either way
    loss = s_tok(25.0, 1.0, &alg, dl, &st, &r, &lp);
    CHECK_CLOSE(st.ratio, exp(20.0), 1e-12);
    CHECK_CLOSE(dl[0], -1.2 / 10.0, 1e-7);
    // one update per batch (old NULL): w = 1 and the gradient is GRPO's bit for bit, in every
    // aggregation and with the KL term and token TIS
    float logp[4] = {-1.0f, -2.0f, -0.5f, -1.5f}, ref[4] = {-1.2f, -1.9f, -0.4f, -2.0f};
    float mu[4] = {-1.1f, -2.2f, -0.45f, -1.4f}, mask[4] = {1, 1, 1, 0};
    double A[2] = {-0.7, 0.9};
    rl_grpo_batch_t b = {2, 2, logp, NULL, ref, mu, mask, A, 7.0, NULL};
    for (int agg = 0; agg < 3; agg++) {
        alg = s_alg();
        alg.loss_agg = agg;
        alg.beta = 0.1;
        alg.tis = RL_RECIPE_TIS_TOKEN;
        float dc[4], dg[4];
        rl_grpo_loss_stats_t sc = {0}, sg = {0};
        CHECK_INT(s_loss(&b, &alg, dc, &sc), 0);
        CHECK_INT(rl_grpo_loss(&b, &alg, dg, &sg), 0);
        CHECK(memcmp(dc, dg, sizeof dc) == 0);
        CHECK(sc.ratio == 3.0 && sc.tokens == 3 && sc.kl == sg.kl);
    }
    // the checks of rl_grpo_loss apply
    b.ref_logp = NULL;
    CHECK_INT(s_loss(&b, &alg, dl, &st), RL_EINVAL); // beta > 0 without ref_logp
}

// ---- finite differences over every knob combination ---------------------------------------------

enum { FB = 5, FT = 6 };

typedef struct {
    float logp[FB * FT], old[FB * FT], ref[FB * FT], mu[FB * FT], mask[FB * FT];
    double adv[FB];
} s_fd_t;

// Log-ratios inside and outside the clip range on both sides (0.21: inside 1.28, outside 1.2),
// k3's clamp reached (logp - ref = -3), sequence-TIS row sums 0.1, 1.6, -1.0, 0.3 against ln 2
// (rows 1 and 2 dropped), an empty row. logp, old and mu are multiples of 2^-12 so that each +-
// h is exact in float.
static void s_fd_inputs(s_fd_t *x) {
    static const float mask[FB][FT] = {{1, 1, 1, 1, 1, 1},
                                       {0, 0, 1, 1, 1, 0},
                                       {0, 1, 1, 1, 1, 1},
                                       {0, 0, 0, 1, 1, 0},
                                       {0, 0, 0, 0, 0, 0}};
    static const double adv[FB] = {1.3, -0.7, -1.1, 0.4, 0.9};
    static const double lr[FB][FT] = {{0.3, 0.1, -0.5, 0.0, 0.21, 0.6},
                                      {0.0, 0.0, -0.9, 1.3, -0.1, 0.0},
                                      {0.0, 1.6, -0.3, 0.6, 0.0, -0.5},
                                      {0.0, 0.0, 0.0, 0.21, -0.3, 0.0},
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
            double old = nearbyint((-0.3 - 0.37 * (double)((b * 7 + t * 3) % 11)) * 4096.0) /
                         4096.0;
            x->logp[i] = (float)(nearbyint((old + lr[b][t]) * 4096.0) / 4096.0);
            x->old[i] = (float)old;
            x->ref[i] = (float)((double)x->logp[i] - kd[(b + t) % 6]);
            x->mu[i] = (float)(nearbyint((old - td[b][t]) * 4096.0) / 4096.0);
            x->mask[i] = mask[b][t];
        }
    }
}

// The loss with every token's logp, old_logp and mu_logp moved by its shift s[i] (an rl_fd_fn;
// ctx: s_fd_loss_t). The finite differences move one shift at a time: only logp's own value
// moves in the surrogate, the weight, its clip and the TIS weights are those of the unmoved
// batch. A shift of 0 leaves a value as it is, bit for bit.
typedef struct {
    const s_fd_t *x;
    const rl_recipe_algorithm_t *alg;
    double denom;
    int use_ref;
} s_fd_loss_t;

static double s_fd_loss(void *ctx, const float *s) {
    const s_fd_loss_t *c = ctx;
    const s_fd_t *x = c->x;
    float logp[FB * FT], old[FB * FT], mu[FB * FT];
    for (int i = 0; i < FB * FT; i++) {
        logp[i] = (float)((double)x->logp[i] + s[i]);
        old[i] = (float)((double)x->old[i] + s[i]);
        mu[i] = (float)((double)x->mu[i] + s[i]);
    }
    rl_grpo_batch_t b = {FB, FT,      logp,   old,      c->use_ref ? x->ref : NULL,
                         mu, x->mask, x->adv, c->denom, NULL};
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
                        // both bounds are met (0.21 is clipped at 1.2 only); the dual clip never
                        CHECK(st.clip_low == 5 && st.clip_high == (ie ? 5 : 7));
                        CHECK(st.dual_clip == 0);
                        CHECK(it != 2 || st.tis_masked == 2.0);
                        s_fd_loss_t c = {&x, &alg, denoms[ia], ik != 0};
                        float shift[FB * FT] = {0};
                        rl_fd_cmp_t r =
                            RL_FD_CHECK(s_fd_loss, &c, shift, g, FB * FT, 1.0 / 128.0, NULL, TOL_FD,
                                        "agg %d kl %d tis %d dual %d eps_high %d", aggs[ia], ik,
                                        tis[it], id, ie);
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
    rl_test_policy_goldens("cispo", s_loss, s_alg(), &g);
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

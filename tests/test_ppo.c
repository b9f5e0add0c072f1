// test_ppo — trainer/rl_ppo (and rl_grpo_loss used as the PPO policy loss) against three
// independent answers:
//   hand-computed values: a GAE example worked out below (per-token KL rewards, the score on the
//     last active token, a padded row, a row with a masked gap, an empty row, gamma and lambda
//     not 1), whitening (Bessel, n < 2, all-equal, in place), the explained variance and its
//     undefined case, single tokens of the value loss on every branch of the max and the clip,
//     the three aggregations, the KL controller, and every RL_EINVAL (nothing written);
//   central finite differences of the value loss (computed in double) for all three
//     aggregations, clipping on (0.2 and 0.4), off (0) and infinite, with values inside, near
//     and beyond the clip bounds: dvalues must be the derivative of stats.loss. Micro-batches
//     with the global denom add up to the whole batch;
//   PyTorch goldens written by tests/reference/make_ppo_goldens.py into tests/fixtures/ppo/:
//     rewards + GAE + returns + whitening + explained variance on random masked batches for
//     several gamma / lambda / beta, the value loss and dL/dV per aggregation, the PPO policy
//     loss (rl_grpo_loss with per-token advantages and old_logp) and dL/dlogp, and a run of the
//     KL controller (the torch version is printed).
// Not a trainer test: no model, no optimizer, no processes.
#include "rl_config.h"
#include "rl_err.h"
#include "rl_grpo.h"
#include "rl_ppo.h"
#include "rl_test.h"
#include "rl_test_fd.h"
#include "rl_test_golden.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- tolerances --------------------------------------------------------------------------------
// rl_ppo computes in double from float inputs; only dvalues is rounded to float. So:
//   the hand GAE example uses dyadic numbers (multiples of 2^-5 with gamma = lam = 1/2), for
//     which every operation is exact in any order: compared with ==;
//   other hand values and the goldens' rewards / advantages / returns / whitening / explained
//     variance / losses: double rounding over a few dozen terms (and torch's float64 rsqrt or
//     exp against libm's, an ulp apart) -> 1e-12 relative (1e-10 for losses, as test_grpo);
//   dvalues / dlogp against exact values: one float rounding (6e-8 relative) -> 1e-6 of the
//     largest element of the tensor compared (a wrong branch or a missing 1/2 moves a gradient
//     by >= 1e-2 relative);
//   finite differences: the value loss is piecewise quadratic in each V, so central differences
//     away from the kinks are exact up to rounding (~1e-13 here); Richardson with steps 2^-7
//     and 2^-8 on V quantised to 2^-12 (V +- h exact in float) is kept as in test_grpo, and the
//     comparison is with the float dvalues, hence 1e-6 relative again.
#define TOL_EXACT 1e-12
#define TOL_LOSS 1e-10
#define TOL_GRAD 1e-6
#define TOL_FD 1e-6

static rl_recipe_algorithm_t s_alg(void) {
    rl_recipe_algorithm_t a;
    memset(&a, 0, sizeof(a));
    a.epsilon_low = 0.2;
    a.epsilon_high = 0.2;
    a.dual_clip = 0.0;
    a.beta = 0.0;
    a.kl_estimator = RL_RECIPE_KL_K1;
    a.loss_agg = RL_RECIPE_AGG_TOKEN_MEAN;
    a.tis = RL_RECIPE_TIS_NONE;
    a.tis_cap = 2.0;
    return a;
}

// Compares n doubles; prints every element off by more than tol * max(1, |want|). tol 0 asks
// for equality.
static void s_check_vec(const char *what, const double *got, const double *want, int n,
                        double tol) {
    for (int i = 0; i < n; i++) {
        double s = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
        int ok = tol == 0.0 ? got[i] == want[i] : fabs(got[i] - want[i]) <= tol * s;
        CHECK_MSG(ok, "%s[%d]: got %.17g want %.17g", what, i, got[i], want[i]);
    }
}

// ---- the hand-computed GAE example --------------------------------------------------------------
//
// B = 4, T = 4, beta = 1/2, gamma = 1/2, lambda = 1/2 (gamma lambda = 1/4). "x" is a masked
// position: NaN in every input, 0 in every output.
//
//   row 0: mask [0 1 1 1]  (a prompt token, then 3 completion tokens)
//     old  [x  -1    -0.5  -2 ]     ref [x  -1.5  -0.5  -1 ]   k1 = old - ref = [x 0.5 0 -1]
//     KL reward -beta k1 = [x -0.25 0 0.5];  score 1 at t = 3  ->  r = [x -0.25 0 1.5]
//     kl_row = 0.5 + 0 - 1 = -0.5;   V = [x 0.5 0.25 1]
//     t = 3: delta = 1.5 + 0.5*0 - 1        =  0.5     A =  0.5                    R =  1.5
//     t = 2: delta = 0 + 0.5*1 - 0.25       =  0.25    A = 0.25 + 0.25*0.5 = 0.375 R = 0.625
//     t = 1: delta = -0.25 + 0.5*0.25 - 0.5 = -0.625   A = -0.625 + 0.25*0.375
//                                                        = -0.53125                R = -0.03125
//   row 1: mask [1 1 0 0]  (ends before T: padding, or a completion cut at max_new_tokens; the
//     last active token is terminal either way, nothing is bootstrapped)
//     old [-0.25 -1 x x]   ref [-0.75 -1 x x]   k1 = [0.5 0]   KL reward [-0.25 0]
//     score -1 at t = 1  ->  r = [-0.25 -1];   kl_row = 0.5;   V = [0.5 -0.5]
//     t = 1: delta = -1 + 0 - (-0.5)           = -0.5   A = -0.5                    R = -1
//     t = 0: delta = -0.25 + 0.5*(-0.5) - 0.5  = -1     A = -1 + 0.25*(-0.5) = -1.125
//                                                                                   R = -0.625
//   row 2: mask [1 0 1 0]  (a masked gap: t = 2 is the next active token of t = 0)
//     old [-1 x -2 x]   ref [-1.25 x -1.5 x]   k1 = [0.25 -0.5]   KL reward [-0.125 0.25]
//     score 2 at t = 2  ->  r = [-0.125 x 2.25 x];   kl_row = -0.25;   V = [1 x 0.5 x]
//     t = 2: delta = 2.25 + 0 - 0.5            =  1.75  A = 1.75                    R =  2.25
//     t = 0: delta = -0.125 + 0.5*0.5 - 1      = -0.875 A = -0.875 + 0.25*1.75
//                                                        = -0.4375                  R =  0.5625
//   row 3: mask [0 0 0 0]  (empty: score 5 goes nowhere; kl_row 0; everything 0)

enum { HB = 4, HT = 4 };

static void s_hand_inputs(float *mask, float *old, float *ref, float *values, double *score) {
    static const float m[HB * HT] = {0, 1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0};
    static const float o[HB * HT] = {0, -1, -0.5f, -2, -0.25f, -1, 0, 0, -1, 0, -2, 0, 0, 0, 0, 0};
    static const float r[HB * HT] = {0,      -1.5f, -0.5f, -1, -0.75f, -1, 0, 0,
                                     -1.25f, 0,     -1.5f, 0,  0,      0,  0, 0};
    static const float v[HB * HT] = {0, 0.5f, 0.25f, 1, 0.5f, -0.5f, 0, 0,
                                     1, 0,    0.5f,  0, 0,    0,     0, 0};
    for (int i = 0; i < HB * HT; i++) {
        mask[i] = m[i];
        old[i] = m[i] != 0.0f ? o[i] : NAN; // masked positions are never read
        ref[i] = m[i] != 0.0f ? r[i] : NAN;
        values[i] = m[i] != 0.0f ? v[i] : NAN;
    }
    score[0] = 1.0;
    score[1] = -1.0;
    score[2] = 2.0;
    score[3] = 5.0;
}

static void test_hand_gae(void) {
    float mask[HB * HT], old[HB * HT], ref[HB * HT], values[HB * HT];
    double score[HB];
    s_hand_inputs(mask, old, ref, values, score);
    static const double want_r[HB * HT] = {0,      -0.25, 0,    1.5, -0.25, -1, 0, 0,
                                           -0.125, 0,     2.25, 0,   0,     0,  0, 0};
    static const double want_kl[HB] = {-0.5, 0.5, -0.25, 0};
    static const double want_a[HB * HT] = {0,       -0.53125, 0.375, 0.5, -1.125, -0.5, 0, 0,
                                           -0.4375, 0,        1.75,  0,   0,      0,    0, 0};
    static const double want_ret[HB * HT] = {0,      -0.03125, 0.625, 1.5, -0.625, -1, 0, 0,
                                             0.5625, 0,        2.25,  0,   0,      0,  0, 0};
    double r[HB * HT], kl[HB], a[HB * HT], ret[HB * HT];
    int unscorable = -1;
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, 0.5, HB, HT, r, kl, &unscorable), 0);
    s_check_vec("hand rewards", r, want_r, HB * HT, 0.0);
    s_check_vec("hand kl_row", kl, want_kl, HB, 0.0);
    CHECK_INT(unscorable, 0);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, 0.5, HB, HT, a, ret), 0);
    s_check_vec("hand adv", a, want_a, HB * HT, 0.0);
    s_check_vec("hand ret", ret, want_ret, HB * HT, 0.0);

    // The explained variance of these returns against the values, by its definition: active
    // R = [-1/32 5/8 3/2 -5/8 -1 9/16 9/4] and R - V = A (the identity R = A + V).
    double Rv[7] = {-0.03125, 0.625, 1.5, -0.625, -1, 0.5625, 2.25};
    double Av[7] = {-0.53125, 0.375, 0.5, -1.125, -0.5, -0.4375, 1.75};
    double mr = 0, ma = 0, vr = 0, va = 0;
    for (int i = 0; i < 7; i++) {
        mr += Rv[i] / 7;
        ma += Av[i] / 7;
    }
    for (int i = 0; i < 7; i++) {
        vr += (Rv[i] - mr) * (Rv[i] - mr);
        va += (Av[i] - ma) * (Av[i] - ma);
    }
    double ev = 0;
    CHECK_INT(rl_ppo_explained_variance(mask, ret, values, HB, HT, &ev), 0);
    CHECK_CLOSE(ev, 1.0 - va / vr, TOL_EXACT);

    // Whitening the advantages: the 7 active values (sum 1/32), Bessel variance
    double wm = 0, wv = 0;
    for (int i = 0; i < 7; i++) {
        wm += Av[i];
    }
    wm /= 7;
    for (int i = 0; i < 7; i++) {
        wv += (Av[i] - wm) * (Av[i] - wm);
    }
    wv /= 6;
    double w[HB * HT], mean = 0, std = 0;
    CHECK_INT(rl_ppo_whiten(mask, a, HB, HT, w, &mean, &std), 0);
    CHECK_CLOSE(mean, 0.03125 / 7, TOL_EXACT);
    CHECK_CLOSE(std, sqrt(wv), TOL_EXACT);
    for (int i = 0; i < HB * HT; i++) {
        double want = mask[i] != 0.0f ? (a[i] - wm) / sqrt(wv + 1e-8) : 0.0;
        CHECK_MSG(fabs(w[i] - want) <= TOL_EXACT * fmax(1, fabs(want)), "whiten[%d] %.17g / %.17g",
                  i, w[i], want);
    }
}

// Rewards: an unscorable score keeps the KL rewards; beta 0 with or without ref; +-inf scores.
static void test_rewards_edges(void) {
    float mask[HB * HT], old[HB * HT], ref[HB * HT], values[HB * HT];
    double score[HB];
    s_hand_inputs(mask, old, ref, values, score);
    score[0] = NAN;
    score[2] = INFINITY;
    score[3] = -INFINITY; // the empty row's score is counted too
    double r[HB * HT], kl[HB];
    int bad = -1;
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, 0.5, HB, HT, r, kl, &bad), 0);
    CHECK_INT(bad, 3);
    // row 0: KL rewards only ([x -0.25 0 0.5]), row 2: [-0.125 x 0.25 x]
    CHECK(r[1] == -0.25 && r[2] == 0.0 && r[3] == 0.5);
    CHECK(r[8] == -0.125 && r[10] == 0.25);
    CHECK(r[4] == -0.25 && r[5] == -1.0); // row 1 untouched by the others
    CHECK(kl[0] == -0.5 && kl[2] == -0.25 && kl[3] == 0.0);

    // beta 0 with ref: kl_row still computed, rewards = the scores alone
    s_hand_inputs(mask, old, ref, values, score);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, 0.0, HB, HT, r, kl, &bad), 0);
    static const double want0[HB * HT] = {0, 0, 0, 1, 0, -1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0};
    s_check_vec("beta 0 rewards", r, want0, HB * HT, 0.0);
    CHECK(kl[0] == -0.5 && kl[1] == 0.5 && kl[2] == -0.25 && kl[3] == 0.0);
    // beta 0 with a non-finite k1: no term at all
    float old_nan[HB * HT];
    memcpy(old_nan, old, sizeof(old_nan));
    old_nan[1] = NAN;
    CHECK_INT(rl_ppo_token_rewards(mask, old_nan, ref, score, 0.0, HB, HT, r, NULL, NULL), 0);
    s_check_vec("beta 0, NaN k1", r, want0, HB * HT, 0.0);
    // beta 0 without ref (and without old): scores only, kl_row 0
    for (int b = 0; b < HB; b++) {
        kl[b] = 9.0;
    }
    CHECK_INT(rl_ppo_token_rewards(mask, NULL, NULL, score, 0.0, HB, HT, r, kl, NULL), 0);
    s_check_vec("no ref rewards", r, want0, HB * HT, 0.0);
    CHECK(kl[0] == 0.0 && kl[1] == 0.0 && kl[2] == 0.0 && kl[3] == 0.0);
}

static void test_rewards_gae_einval(void) {
    float mask[HB * HT], old[HB * HT], ref[HB * HT], values[HB * HT];
    double score[HB], r[HB * HT], kl[HB], a[HB * HT], ret[HB * HT];
    s_hand_inputs(mask, old, ref, values, score);
    for (int i = 0; i < HB * HT; i++) {
        r[i] = a[i] = ret[i] = 9.0;
    }
    kl[0] = 9.0;
    int bad = 77;
    CHECK_INT(rl_ppo_token_rewards(NULL, old, ref, score, 0.5, HB, HT, r, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, NULL, 0.5, HB, HT, r, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, 0.5, HB, HT, NULL, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, 0.5, 0, HT, r, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, 0.5, HB, 0, r, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, -0.1, HB, HT, r, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, NAN, HB, HT, r, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, INFINITY, HB, HT, r, kl, &bad),
              RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, old, NULL, score, 0.5, HB, HT, r, kl, &bad), RL_EINVAL);
    CHECK_INT(rl_ppo_token_rewards(mask, NULL, ref, score, 0.0, HB, HT, r, kl, &bad), RL_EINVAL);
    float half[HB * HT];
    memcpy(half, mask, sizeof(half));
    half[HB * HT - 1] = 0.5f;
    CHECK_INT(rl_ppo_token_rewards(half, old, ref, score, 0.5, HB, HT, r, kl, &bad), RL_EINVAL);
    CHECK(r[0] == 9.0 && r[HB * HT - 1] == 9.0 && kl[0] == 9.0 && bad == 77); // nothing written

    CHECK_INT(rl_ppo_gae(NULL, r, values, 0.5, 0.5, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, NULL, values, 0.5, 0.5, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, NULL, 0.5, 0.5, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, 0.5, HB, HT, NULL, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, 0.5, HB, HT, a, NULL), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 1.01, 0.5, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, -0.01, 0.5, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, NAN, 0.5, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, 1.01, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, -0.01, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, NAN, HB, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, 0.5, 0, HT, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.5, 0.5, HB, -1, a, ret), RL_EINVAL);
    CHECK_INT(rl_ppo_gae(half, r, values, 0.5, 0.5, HB, HT, a, ret), RL_EINVAL);
    CHECK(a[0] == 9.0 && ret[0] == 9.0 && a[HB * HT - 1] == 9.0); // nothing written
    // gamma and lam at both ends of [0, 1] are valid: gamma 0 gives A = R - V = r - V
    CHECK_INT(rl_ppo_gae(mask, r, values, 0.0, 1.0, HB, HT, a, ret), 0);
    CHECK(a[1] == r[1] - 0.5 && ret[1] == r[1]); // r here is still the 9.0 fill
    CHECK_INT(rl_ppo_gae(mask, r, values, 1.0, 0.0, HB, HT, a, ret), 0);
}

// ---- whitening and the explained variance ----------------------------------------------------

static void test_whiten(void) {
    // 2 x 3, active {1, 2, 3, 6}: mean 3, Bessel variance (4 + 1 + 0 + 9) / 3 = 14/3
    const float mask[6] = {1, 1, 0, 0, 1, 1};
    double x[6] = {1, 2, NAN, NAN, 3, 6}, out[6], mean = -1, std = -1;
    CHECK_INT(rl_ppo_whiten(mask, x, 2, 3, out, &mean, &std), 0);
    CHECK(mean == 3.0);
    CHECK_CLOSE(std, sqrt(14.0 / 3.0), TOL_EXACT);
    const double d = sqrt(14.0 / 3.0 + 1e-8);
    const double want[6] = {-2 / d, -1 / d, 0, 0, 0, 3 / d};
    s_check_vec("whiten", out, want, 6, TOL_EXACT);
    // in place: the same numbers, bit for bit
    CHECK_INT(rl_ppo_whiten(mask, x, 2, 3, x, NULL, NULL), 0);
    CHECK(memcmp(x, out, sizeof(out)) == 0);
    // the population variance (no Bessel) would give 3.5: make sure it is not what is used
    CHECK(fabs(out[5] - 3 / sqrt(3.5 + 1e-8)) > 1e-3);

    // all equal (0.1 three times: a computed mean would be off by an ulp): exactly 0, std 0
    double e[6] = {0.1, 0.1, NAN, NAN, 0.1, 0.1};
    CHECK_INT(rl_ppo_whiten(mask, e, 2, 3, out, &mean, &std), 0);
    CHECK(mean == 0.1 && std == 0.0);
    for (int i = 0; i < 6; i++) {
        CHECK_MSG(out[i] == 0.0, "all-equal whiten[%d] = %g", i, out[i]);
    }
    // one active token: the mean is subtracted, nothing divided (0, std 0)
    const float one[6] = {0, 0, 0, 0, 1, 0};
    double y[6] = {NAN, NAN, NAN, NAN, 4.5, NAN};
    CHECK_INT(rl_ppo_whiten(one, y, 2, 3, out, &mean, &std), 0);
    CHECK(mean == 4.5 && std == 0.0);
    for (int i = 0; i < 6; i++) {
        CHECK(out[i] == 0.0);
    }
    // no active token: all 0
    const float none[6] = {0};
    CHECK_INT(rl_ppo_whiten(none, y, 2, 3, out, &mean, &std), 0);
    CHECK(mean == 0.0 && std == 0.0 && out[4] == 0.0);
    // einval, nothing written
    out[0] = 9.0;
    mean = 9.0;
    CHECK_INT(rl_ppo_whiten(NULL, x, 2, 3, out, &mean, NULL), RL_EINVAL);
    CHECK_INT(rl_ppo_whiten(mask, NULL, 2, 3, out, &mean, NULL), RL_EINVAL);
    CHECK_INT(rl_ppo_whiten(mask, x, 2, 3, NULL, &mean, NULL), RL_EINVAL);
    CHECK_INT(rl_ppo_whiten(mask, x, 0, 3, out, &mean, NULL), RL_EINVAL);
    CHECK_INT(rl_ppo_whiten(mask, x, 2, 0, out, &mean, NULL), RL_EINVAL);
    const float bad[6] = {1, 1, 0, 0, 1, 2};
    CHECK_INT(rl_ppo_whiten(bad, x, 2, 3, out, &mean, NULL), RL_EINVAL);
    CHECK(out[0] == 9.0 && mean == 9.0);
}

static void test_explained_variance(void) {
    const float mask[6] = {1, 1, 0, 1, 1, 0};
    const double R[6] = {1, 2, NAN, 3, 4, NAN}; // Var = 1.25 (population)
    const float perfect[6] = {1, 2, NAN, 3, 4, NAN};
    const float off[6] = {0, 3, NAN, 2, 5, NAN}; // R - V = [1 -1 1 -1]: Var 1 -> ev 0.2
    const float mean[6] = {2.5f, 2.5f, NAN, 2.5f, 2.5f, NAN}; // predicts the mean: ev 0
    const float shift[6] = {0, 1, NAN, 2, 3, NAN};            // R - V = 1: a constant bias, ev 1
    double ev = -9;
    CHECK_INT(rl_ppo_explained_variance(mask, R, perfect, 2, 3, &ev), 0);
    CHECK(ev == 1.0);
    CHECK_INT(rl_ppo_explained_variance(mask, R, off, 2, 3, &ev), 0);
    CHECK_CLOSE(ev, 0.2, TOL_EXACT);
    CHECK_INT(rl_ppo_explained_variance(mask, R, mean, 2, 3, &ev), 0);
    CHECK_CLOSE(ev, 0.0, TOL_EXACT);
    CHECK_INT(rl_ppo_explained_variance(mask, R, shift, 2, 3, &ev), 0);
    CHECK(ev == 1.0);
    // Var(R) = 0: undefined, NaN (all equal; one token; none)
    const double Rc[6] = {0.1, 0.1, NAN, 0.1, 0.1, NAN};
    CHECK_INT(rl_ppo_explained_variance(mask, Rc, off, 2, 3, &ev), 0);
    CHECK(isnan(ev));
    const float one[6] = {0, 0, 0, 1, 0, 0}, none[6] = {0};
    ev = 0;
    CHECK_INT(rl_ppo_explained_variance(one, R, off, 2, 3, &ev), 0);
    CHECK(isnan(ev));
    ev = 0;
    CHECK_INT(rl_ppo_explained_variance(none, R, off, 2, 3, &ev), 0);
    CHECK(isnan(ev));
    ev = 9;
    CHECK_INT(rl_ppo_explained_variance(NULL, R, off, 2, 3, &ev), RL_EINVAL);
    CHECK_INT(rl_ppo_explained_variance(mask, NULL, off, 2, 3, &ev), RL_EINVAL);
    CHECK_INT(rl_ppo_explained_variance(mask, R, NULL, 2, 3, &ev), RL_EINVAL);
    CHECK_INT(rl_ppo_explained_variance(mask, R, off, 2, 3, NULL), RL_EINVAL);
    CHECK_INT(rl_ppo_explained_variance(mask, R, off, 0, 3, &ev), RL_EINVAL);
    const float bad[6] = {1, 1, 0, 1, -1, 0};
    CHECK_INT(rl_ppo_explained_variance(bad, R, off, 2, 3, &ev), RL_EINVAL);
    CHECK(ev == 9);
}

// ---- the value loss: hand values -------------------------------------------------------------

// One active token: returns the loss and *dv with denom 1, token_mean.
static double s_value1(double v, double vo, double r, double eps, float *dv, double *clipped) {
    const float mask = 1.0f, fv = (float)v, fo = (float)vo, fr = (float)r;
    rl_ppo_value_batch_t b = {1, 1, &fv, &fo, &fr, &mask, 1.0};
    rl_ppo_value_stats_t st = {0};
    CHECK_INT(rl_ppo_value_loss(&b, eps, RL_RECIPE_AGG_TOKEN_MEAN, dv, &st), 0);
    CHECK(st.tokens == 1.0);
    CHECK(st.sq_err == (v - r) * (v - r));
    *clipped = st.clipped;
    return st.loss;
}

static void test_value_branches(void) {
    float dv;
    double c;
    // inside the clip range: 1/2 (V - R)^2, dV = V - R
    CHECK(s_value1(1.0, 0.875, 0.5, 0.25, &dv, &c) == 0.125 && dv == 0.5f && c == 0.0);
    // above the range (Vc = 0.25), R = 0.75 beyond Vc: clipped branch (0.25) > 0.0625, flat
    CHECK(s_value1(1.0, 0.0, 0.75, 0.25, &dv, &c) == 0.125 && dv == 0.0f && c == 1.0);
    // above the range, R = 0 near V_old: the unclipped branch is larger, dV = V - R = 1
    CHECK(s_value1(1.0, 0.0, 0.0, 0.25, &dv, &c) == 0.5 && dv == 1.0f && c == 0.0);
    // below the range (Vc = -0.25), R = -1.25: clipped 1 > 0.0625, flat
    CHECK(s_value1(-1.0, 0.0, -1.25, 0.25, &dv, &c) == 0.5 && dv == 0.0f && c == 1.0);
    // below the range, R = -0.5: unclipped 0.25 > clipped 0.0625, dV = -0.5
    CHECK(s_value1(-1.0, 0.0, -0.5, 0.25, &dv, &c) == 0.125 && dv == -0.5f && c == 0.0);
    // exactly at the bound: Vc = V, no clipping, gradient passes (torch.clamp's closed range)
    CHECK(s_value1(0.25, 0.0, 1.0, 0.25, &dv, &c) == 0.28125 && dv == -0.75f && c == 0.0);
    // eps 0: no clipping at all, even far from V_old; +inf: the same
    CHECK(s_value1(1.0, 0.0, 0.75, 0.0, &dv, &c) == 0.03125 && dv == 0.25f && c == 0.0);
    CHECK(s_value1(1.0, 0.0, 0.75, INFINITY, &dv, &c) == 0.03125 && dv == 0.25f && c == 0.0);
    // eps 0 accepts old_values = NULL
    const float mask = 1.0f, v = 1.0f, r = 0.75f;
    rl_ppo_value_batch_t b = {1, 1, &v, NULL, &r, &mask, 1.0};
    CHECK_INT(rl_ppo_value_loss(&b, 0.0, RL_RECIPE_AGG_TOKEN_MEAN, &dv, NULL), 0);
    CHECK(dv == 0.25f);
}

// The three aggregations on a 2 x 3 batch: row 0 has 2 active tokens, row 1 has 1.
static void test_value_aggregation(void) {
    const float mask[6] = {1, 1, 0, 0, 1, 0};
    const float v[6] = {1, 2, NAN, NAN, -1, NAN}, vo[6] = {1, 2, NAN, NAN, -1, NAN};
    const float r[6] = {0, 1, NAN, NAN, 1, NAN}; // per-token l = 1/2, 1/2, 2
    float dv[6];
    struct {
        int agg;
        double denom, loss, g[6];
    } cases[] = {
        // sum l / D = 3 / 5; dV = (V - R) / D
        {RL_RECIPE_AGG_TOKEN_MEAN, 5.0, 3.0 / 5.0, {1 / 5.0, 1 / 5.0, 0, 0, -2 / 5.0, 0}},
        // (1/2 (1/2 + 1/2) + 2) / 4 = 5/8; dV row 0 = (V - R) / (2 * 4)
        {RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN, 4.0, 5.0 / 8.0, {1 / 8.0, 1 / 8.0, 0, 0, -2 / 4.0, 0}},
        // sum l / (B L_max) with B L_max = 2 * 3 = 6
        {RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM,
         6.0,
         3.0 / 6.0,
         {1 / 6.0, 1 / 6.0, 0, 0, -2 / 6.0, 0}},
    };
    for (int k = 0; k < 3; k++) {
        rl_ppo_value_batch_t b = {2, 3, v, vo, r, mask, cases[k].denom};
        rl_ppo_value_stats_t st = {0};
        st.loss = 10.0; // stats accumulate
        CHECK_INT(rl_ppo_value_loss(&b, 0.2, cases[k].agg, dv, &st), 0);
        CHECK_CLOSE(st.loss - 10.0, cases[k].loss, TOL_EXACT);
        for (int i = 0; i < 6; i++) {
            CHECK_MSG(fabs(dv[i] - cases[k].g[i]) <= 1e-7, "agg %d dv[%d] %g want %g", cases[k].agg,
                      i, dv[i], cases[k].g[i]);
        }
        CHECK(st.tokens == 3.0 && st.clipped == 0.0 && st.sq_err == 6.0 && st.value == 2.0 &&
              st.ret == 2.0);
    }
    // a micro-batch with no active token may come with denom 0
    const float none[6] = {0};
    rl_ppo_value_batch_t b = {2, 3, v, vo, r, none, 0.0};
    rl_ppo_value_stats_t st = {0};
    for (int i = 0; i < 6; i++) {
        dv[i] = 9.0f;
    }
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, RL_RECIPE_AGG_TOKEN_MEAN, dv, &st), 0);
    CHECK(st.loss == 0.0 && st.tokens == 0.0 && dv[0] == 0.0f && dv[5] == 0.0f);
}

static void test_value_einval(void) {
    const float mask[2] = {1, 0}, v[2] = {1, 1}, vo[2] = {0, 0}, r[2] = {0, 0};
    float dv[2] = {9.0f, 9.0f};
    rl_ppo_value_stats_t st = {0};
    st.tokens = 5.0;
    const int A = RL_RECIPE_AGG_TOKEN_MEAN;
    rl_ppo_value_batch_t ok = {1, 2, v, vo, r, mask, 1.0}, b;
    CHECK_INT(rl_ppo_value_loss(NULL, 0.2, A, dv, &st), RL_EINVAL);
    CHECK_INT(rl_ppo_value_loss(&ok, 0.2, A, NULL, &st), RL_EINVAL);
    b = ok;
    b.values = NULL;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    b = ok;
    b.returns = NULL;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    b = ok;
    b.mask = NULL;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    b = ok;
    b.old_values = NULL; // needed when clipping
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    b = ok;
    b.B = 0;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    b = ok;
    b.T = 0;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    CHECK_INT(rl_ppo_value_loss(&ok, -0.1, A, dv, &st), RL_EINVAL);
    CHECK_INT(rl_ppo_value_loss(&ok, NAN, A, dv, &st), RL_EINVAL);
    CHECK_INT(rl_ppo_value_loss(&ok, 0.2, 3, dv, &st), RL_EINVAL);
    CHECK_INT(rl_ppo_value_loss(&ok, 0.2, -1, dv, &st), RL_EINVAL);
    b = ok;
    b.denom = 0.0;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    b.denom = NAN;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    b.denom = INFINITY;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    const float half[2] = {1, 0.5f};
    b = ok;
    b.mask = half;
    CHECK_INT(rl_ppo_value_loss(&b, 0.2, A, dv, &st), RL_EINVAL);
    CHECK(dv[0] == 9.0f && dv[1] == 9.0f && st.tokens == 5.0 && st.loss == 0.0); // untouched
}

// ---- the value loss: finite differences --------------------------------------------------------

enum { FB = 5, FT = 6 };

typedef struct {
    float v[FB * FT], vo[FB * FT], r[FB * FT], mask[FB * FT];
} s_fd_t;

// V - V_old offsets d and R - V_old offsets q per token. With eps 0.2 the offsets put tokens
// inside the range (|d| <= 0.12), near its bounds (0.16, 0.24, 0.04 from them) and far out
// (0.5, 0.7), and q places R so that outside the range both branches of the max win somewhere
// (the clipped one when R lies beyond the midpoint of V and Vc). With eps 0.4 the same offsets
// are mostly inside. s_fd_check_kinks() verifies the distances to every kink for each eps.
static void s_fd_inputs(s_fd_t *x) {
    static const float mask[FB][FT] = {{1, 1, 1, 1, 1, 1},
                                       {0, 0, 1, 1, 1, 0},
                                       {0, 1, 1, 0, 1, 1}, // a masked gap
                                       {0, 0, 0, 1, 1, 0},
                                       {0, 0, 0, 0, 0, 0}};
    static const double d[FB][FT] = {{0.7, -0.24, 0.0, 0.16, 0.5, -0.7},
                                     {0.0, 0.0, 0.24, -0.5, 0.08, 0.0},
                                     {0.0, -0.16, 0.7, 0.0, -0.24, 0.24},
                                     {0.0, 0.0, 0.0, 0.5, -0.05, 0.0},
                                     {0.1, 0.1, 0.1, 0.1, 0.1, 0.1}};
    static const double q[FB][FT] = {{0.9, 0.3, -0.4, 0.5, 0.1, -1.1},
                                     {0.0, 0.0, -0.3, 0.2, 0.6, 0.0},
                                     {0.0, -0.9, -0.2, 0.0, -0.6, 0.45},
                                     {0.0, 0.0, 0.0, 1.2, 0.3, 0.0},
                                     {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}};
    for (int b = 0; b < FB; b++) {
        for (int t = 0; t < FT; t++) {
            int i = b * FT + t;
            double vo = -1.3 + 0.41 * (double)((b * 7 + t * 3) % 11) / 2.0;
            x->mask[i] = mask[b][t];
            x->vo[i] = (float)vo;
            // V on the 2^-12 grid, so V +- h (h = 2^-7, 2^-8) is exact in float
            x->v[i] = (float)(nearbyint((vo + d[b][t]) * 4096.0) / 4096.0);
            x->r[i] = (float)(vo + q[b][t]);
            if (mask[b][t] == 0.0f) { // never read
                x->v[i] = x->vo[i] = x->r[i] = NAN;
            }
        }
    }
}

// Every active token at least 0.03 from the clip bounds |V - V_old| = eps and, outside the range,
// from the crossing V + Vc = 2R of the two branches: beyond the largest step 2^-7 = 0.008.
// Returns the tokens on each branch: *inside, *out_unclipped, *out_clipped.
static void s_fd_check_kinks(const s_fd_t *x, double eps, int *inside, int *out_unclipped,
                             int *out_clipped) {
    *inside = *out_unclipped = *out_clipped = 0;
    for (int i = 0; i < FB * FT; i++) {
        if (x->mask[i] == 0.0f) {
            continue;
        }
        double v = x->v[i], vo = x->vo[i], r = x->r[i];
        double dd = fabs(v - vo);
        CHECK_MSG(fabs(dd - eps) >= 0.03, "fd input %d: |V - V_old| %.4f near eps %.2f", i, dd,
                  eps);
        if (dd < eps) {
            (*inside)++;
            continue;
        }
        double vc = v < vo - eps ? vo - eps : vo + eps;
        CHECK_MSG(fabs(v + vc - 2 * r) >= 0.03, "fd input %d: near the branch crossing", i);
        if ((vc - r) * (vc - r) > (v - r) * (v - r)) {
            (*out_clipped)++;
        } else {
            (*out_unclipped)++;
        }
    }
}

static double s_fd_loss(const s_fd_t *x, const float *v, double eps, int agg, double denom,
                        float *dv, rl_ppo_value_stats_t *st_out) {
    rl_ppo_value_batch_t b = {FB, FT, v, x->vo, x->r, x->mask, denom};
    rl_ppo_value_stats_t st = {0};
    float scratch[FB * FT];
    CHECK_INT(rl_ppo_value_loss(&b, eps, agg, dv ? dv : scratch, &st), 0);
    if (st_out) {
        *st_out = st;
    }
    return st.loss;
}

// s_fd_loss as an rl_fd_fn (ctx: s_fd_knobs_t): the loss of x with its values replaced by v.
typedef struct {
    const s_fd_t *x;
    double eps;
    int agg;
    double denom;
} s_fd_knobs_t;

static double s_fd_value_loss(void *ctx, const float *v) {
    const s_fd_knobs_t *k = ctx;
    return s_fd_loss(k->x, v, k->eps, k->agg, k->denom, NULL, NULL);
}

static void test_value_fd(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    const int aggs[3] = {RL_RECIPE_AGG_TOKEN_MEAN, RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN,
                         RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM};
    const double denoms[3] = {20.0, 7.0, 7.0 * 16.0}; // the global batch is larger
    const double epss[4] = {0.2, 0.4, 0.0, INFINITY};
    double worst = 0.0;
    int combos = 0;
    for (int ie = 0; ie < 4; ie++) {
        int in = 0, out_u = 0, out_c = 0;
        if (epss[ie] > 0.0 && isfinite(epss[ie])) {
            s_fd_check_kinks(&x, epss[ie], &in, &out_u, &out_c);
            // the branches these inputs are meant to reach are reached
            CHECK_MSG(in >= 3 && out_u >= 2 && out_c >= (ie == 0 ? 3 : 1),
                      "eps %g: %d inside, %d outside unclipped, %d clipped", epss[ie], in, out_u,
                      out_c);
        }
        for (int ia = 0; ia < 3; ia++) {
            float g[FB * FT];
            rl_ppo_value_stats_t st;
            s_fd_loss(&x, x.v, epss[ie], aggs[ia], denoms[ia], g, &st);
            CHECK(st.clipped == out_c);
            CHECK(st.tokens == 15.0);
            for (int i = 0; i < FB * FT; i++) {
                if (x.mask[i] == 0.0f) {
                    CHECK_MSG(g[i] == 0.0f, "masked dvalues[%d] = %g", i, g[i]);
                }
            }
            // masked values are NaN: never moved, never compared
            s_fd_knobs_t k = {&x, epss[ie], aggs[ia], denoms[ia]};
            rl_fd_cmp_t r = RL_FD_CHECK(s_fd_value_loss, &k, x.v, g, FB * FT, 1.0 / 128.0, x.mask,
                                        TOL_FD, "value fd: eps %g agg %d", epss[ie], aggs[ia]);
            worst = fmax(worst, r.rel);
            combos++;
        }
    }
    fprintf(stderr,
            "value loss finite differences: %d combinations, worst |dV - fd| / max|fd| = %.3g "
            "(tolerance %g)\n",
            combos, worst, TOL_FD);
    CHECK_INT(combos, 12);

    // eps 0 and eps +inf are the same loss (no clipping), bit for bit
    float g0[FB * FT], gi[FB * FT];
    double l0 = s_fd_loss(&x, x.v, 0.0, RL_RECIPE_AGG_TOKEN_MEAN, 20.0, g0, NULL);
    double li = s_fd_loss(&x, x.v, INFINITY, RL_RECIPE_AGG_TOKEN_MEAN, 20.0, gi, NULL);
    CHECK(l0 == li && memcmp(g0, gi, sizeof(g0)) == 0);
}

// Micro-batches with the global denom add up to the whole batch: rows {0,1} and {2,3,4}.
static void test_value_micro_batches(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    for (int ia = 0; ia < 3; ia++) {
        const double denom = 16.0;
        float g_all[FB * FT], g_mb[FB * FT];
        rl_ppo_value_batch_t b = {FB, FT, x.v, x.vo, x.r, x.mask, denom};
        rl_ppo_value_stats_t s_all = {0}, s_mb = {0};
        CHECK_INT(rl_ppo_value_loss(&b, 0.2, ia, g_all, &s_all), 0);
        for (int part = 0; part < 2; part++) {
            int r0 = part ? 2 : 0, n = part ? FB - 2 : 2;
            size_t o = (size_t)r0 * FT;
            rl_ppo_value_batch_t m = {n, FT, x.v + o, x.vo + o, x.r + o, x.mask + o, denom};
            CHECK_INT(rl_ppo_value_loss(&m, 0.2, ia, g_mb + o, &s_mb), 0);
        }
        CHECK_MSG(fabs(s_all.loss - s_mb.loss) <= 1e-14 * fmax(1, fabs(s_all.loss)),
                  "agg %d: one batch %.17g, micro-batches %.17g", ia, s_all.loss, s_mb.loss);
        CHECK_MSG(memcmp(g_all, g_mb, sizeof(g_all)) == 0, "agg %d: dvalues differ", ia);
        CHECK(s_all.tokens == s_mb.tokens && s_all.clipped == s_mb.clipped);
        CHECK_CLOSE(s_all.sq_err, s_mb.sq_err, 1e-14);
        CHECK_CLOSE(s_all.value, s_mb.value, 1e-14);
        CHECK_CLOSE(s_all.ret, s_mb.ret, 1e-14);
    }
}

// ---- the KL controller -------------------------------------------------------------------------

static void test_kl_controller(void) {
    double beta = 0.05;
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.0, 6.0, 64, 10000.0), 0); // on target: unchanged
    CHECK(beta == 0.05);
    // kl / target - 1 = 0.1: beta * (1 + 0.1 * 500 / 1000)
    beta = 0.05;
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.6, 6.0, 500, 1000.0), 0);
    CHECK_CLOSE(beta, 0.05 * 1.05, TOL_EXACT);
    // far above: the error is clipped at +0.2
    beta = 0.05;
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 60.0, 6.0, 500, 1000.0), 0);
    CHECK_CLOSE(beta, 0.05 * 1.1, TOL_EXACT);
    // far below (negative KL estimates happen): clipped at -0.2
    beta = 0.05;
    CHECK_INT(rl_ppo_kl_coef_update(&beta, -3.0, 6.0, 500, 1000.0), 0);
    CHECK_CLOSE(beta, 0.05 * 0.9, TOL_EXACT);
    // n_steps 0: unchanged; n_steps > 5 horizon with the error at -0.2: floored at 0
    beta = 0.05;
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 0.0, 6.0, 0, 1000.0), 0);
    CHECK(beta == 0.05);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 0.0, 6.0, 6000, 1000.0), 0);
    CHECK(beta == 0.0);
    // once 0 it stays 0 (a multiplicative controller)
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 60.0, 6.0, 64, 1000.0), 0);
    CHECK(beta == 0.0);
    // target 0: the fixed controller, beta unchanged whatever the KL
    beta = 0.05;
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 60.0, 0.0, 500, 1000.0), 0);
    CHECK(beta == 0.05);
    // einval, beta unchanged
    CHECK_INT(rl_ppo_kl_coef_update(NULL, 6.0, 6.0, 64, 1000.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, NAN, 6.0, 64, 1000.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, INFINITY, 6.0, 64, 1000.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.0, NAN, 64, 1000.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.0, INFINITY, 64, 1000.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.0, -1.0, 64, 1000.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.0, 6.0, -1, 1000.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.0, 6.0, 64, 0.0), RL_EINVAL);
    CHECK_INT(rl_ppo_kl_coef_update(&beta, 6.0, 6.0, 64, NAN), RL_EINVAL);
    CHECK(beta == 0.05);
    double neg = -0.1;
    CHECK_INT(rl_ppo_kl_coef_update(&neg, 6.0, 6.0, 64, 1000.0), RL_EINVAL);
    CHECK(neg == -0.1);
}

// ---- PyTorch goldens ---------------------------------------------------------------------------

static const char *const s_aggs[] = {"token_mean", "seq_mean_token_mean",
                                     "seq_mean_token_sum_norm"}; // RL_RECIPE_AGG_* order

static double s_worst_exact = 0.0, s_worst_loss = 0.0, s_worst_grad = 0.0;

// max over i of |got - want| / max(1, |want|), printing the first few elements above tol
static double s_cmp(const char *name, const char *what, const double *got, const double *want,
                    size_t n, double tol) {
    double err = 0.0;
    int shown = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i]));
        if (!(e <= tol) && shown++ < 5) { // NaN on either side fails
            fprintf(stderr, "  %s: %s[%zu] %.17g want %.17g\n", name, what, i, got[i], want[i]);
        }
        err = isnan(e) ? INFINITY : fmax(err, e);
    }
    CHECK_MSG(err <= tol, "%s: %s differs by %.3g (tol %g)", name, what, err, tol);
    return err;
}

// Gradient comparison: max |got - want| over max |want| (float gradients), masked must be 0.
static void s_golden_gae(const char *name, json_t *c) {
    const int B = (int)rl_golden_num(c, "B"), T = (int)rl_golden_num(c, "T");
    const size_t N = (size_t)B * (size_t)T;
    const double gamma = rl_golden_num(c, "gamma"), lam = rl_golden_num(c, "lam"),
                 beta = rl_golden_num(c, "beta");
    float *mask = rl_golden_listf(c, "mask", N, NULL);
    float *old = rl_golden_listf(c, "old_logp", N, mask),
          *ref = rl_golden_listf(c, "ref_logp", N, mask);
    float *values = rl_golden_listf(c, "values", N, mask);
    double *score = rl_golden_list(c, "score", (size_t)B);
    double *w_r = rl_golden_list(c, "rewards", N), *w_kl = rl_golden_list(c, "kl_row", (size_t)B);
    double *w_a = rl_golden_list(c, "adv", N), *w_ret = rl_golden_list(c, "ret", N);
    double *w_w = rl_golden_list(c, "whitened", N);
    double *r = calloc(N, sizeof(double)), *kl = calloc((size_t)B, sizeof(double));
    double *a = calloc(N, sizeof(double)), *ret = calloc(N, sizeof(double));
    double *w = calloc(N, sizeof(double));
    if (!mask || !old || !ref || !values || !score || !w_r || !w_kl || !w_a || !w_ret || !w_w ||
        !r || !kl || !a || !ret || !w) {
        CHECK_MSG(0, "%s: unreadable", name);
        goto done;
    }
    int unscorable = -1;
    CHECK_INT(rl_ppo_token_rewards(mask, old, ref, score, beta, B, T, r, kl, &unscorable), 0);
    CHECK_INT(unscorable, (int)rl_golden_num(c, "unscorable"));
    double err = s_cmp(name, "rewards", r, w_r, N, TOL_EXACT);
    err = fmax(err, s_cmp(name, "kl_row", kl, w_kl, (size_t)B, TOL_EXACT));
    CHECK_INT(rl_ppo_gae(mask, r, values, gamma, lam, B, T, a, ret), 0);
    err = fmax(err, s_cmp(name, "adv", a, w_a, N, TOL_EXACT));
    err = fmax(err, s_cmp(name, "ret", ret, w_ret, N, TOL_EXACT));
    double ev = NAN;
    CHECK_INT(rl_ppo_explained_variance(mask, ret, values, B, T, &ev), 0);
    double w_ev = rl_golden_num(c, "explained_variance");
    err = fmax(err, s_cmp(name, "explained_variance", &ev, &w_ev, 1, TOL_EXACT));
    double mean = NAN, std = NAN;
    CHECK_INT(rl_ppo_whiten(mask, a, B, T, w, &mean, &std), 0);
    err = fmax(err, s_cmp(name, "whitened", w, w_w, N, TOL_EXACT));
    double w_mean = rl_golden_num(c, "adv_mean"), w_std = rl_golden_num(c, "adv_std");
    err = fmax(err, s_cmp(name, "adv_mean", &mean, &w_mean, 1, TOL_EXACT));
    err = fmax(err, s_cmp(name, "adv_std", &std, &w_std, 1, TOL_EXACT));
    // whitening in place gives the same bits
    CHECK_INT(rl_ppo_whiten(mask, a, B, T, a, NULL, NULL), 0);
    CHECK_MSG(memcmp(a, w, N * sizeof(double)) == 0, "%s: in-place whitening differs", name);
    s_worst_exact = fmax(s_worst_exact, err);
    fprintf(stderr, "golden %-30s rewards/gae/whiten/ev max rel err %.3g (ev %.6f)\n", name, err,
            ev);
done:
    free(mask);
    free(old);
    free(ref);
    free(values);
    free(score);
    free(w_r);
    free(w_kl);
    free(w_a);
    free(w_ret);
    free(w_w);
    free(r);
    free(kl);
    free(a);
    free(ret);
    free(w);
}

static void s_golden_value(const char *name, json_t *c) {
    const int B = (int)rl_golden_num(c, "B"), T = (int)rl_golden_num(c, "T");
    const size_t N = (size_t)B * (size_t)T;
    const double eps = rl_golden_num(c, "eps_v");
    const int agg = rl_golden_enum(c, "loss_agg", s_aggs, 3);
    float *mask = rl_golden_listf(c, "mask", N, NULL);
    float *v = rl_golden_listf(c, "values", N, mask),
          *vo = rl_golden_listf(c, "old_values", N, mask);
    float *r = rl_golden_listf(c, "returns", N, mask);
    double *want = rl_golden_list(c, "dvalues", N);
    float *got = calloc(N, sizeof(float));
    if (!mask || !v || !vo || !r || !want || !got) {
        CHECK_MSG(0, "%s: unreadable", name);
        goto done;
    }
    rl_ppo_value_batch_t b = {B, T, v, eps > 0.0 ? vo : NULL, r, mask, rl_golden_num(c, "denom")};
    rl_ppo_value_stats_t st = {0};
    CHECK_INT(rl_ppo_value_loss(&b, eps, agg, got, &st), 0);
    double wl = rl_golden_num(c, "loss");
    double lerr = fabs(st.loss - wl) / fmax(fabs(wl), 1e-300);
    CHECK_MSG(lerr <= TOL_LOSS, "%s: loss %.17g want %.17g", name, st.loss, wl);
    double gerr = rl_golden_grad_err(name, "grad", got, want, mask, N, TOL_GRAD, NULL);
    json_t *js = json_object_get(c, "stats");
    struct {
        const char *key;
        double got;
    } fields[] = {{"tokens", st.tokens},
                  {"clipped", st.clipped},
                  {"sq_err", st.sq_err},
                  {"value", st.value},
                  {"ret", st.ret}};
    for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
        double wv = rl_golden_num(js, fields[k].key);
        CHECK_MSG(fabs(fields[k].got - wv) <= TOL_LOSS * fmax(1.0, fabs(wv)),
                  "%s: stats.%s %.17g want %.17g", name, fields[k].key, fields[k].got, wv);
    }
    s_worst_loss = fmax(s_worst_loss, lerr);
    s_worst_grad = fmax(s_worst_grad, gerr);
    fprintf(stderr, "golden %-30s loss rel err %.3g, dvalues %.3g (clipped %g of %g)\n", name, lerr,
            gerr, st.clipped, st.tokens);
done:
    free(mask);
    free(v);
    free(vo);
    free(r);
    free(want);
    free(got);
}

static void s_golden_policy(const char *name, json_t *c) {
    const int B = (int)rl_golden_num(c, "B"), T = (int)rl_golden_num(c, "T");
    const size_t N = (size_t)B * (size_t)T;
    json_t *ja = json_object_get(c, "alg");
    rl_recipe_algorithm_t alg = s_alg();
    alg.epsilon_low = rl_golden_num(ja, "epsilon_low");
    alg.epsilon_high = rl_golden_num(ja, "epsilon_high");
    alg.dual_clip = rl_golden_num(ja, "dual_clip");
    alg.beta = rl_golden_num(ja, "beta");
    static const char *const kls[] = {"k1", "k2", "k3"};
    alg.kl_estimator = rl_golden_enum(ja, "kl_estimator", kls, 3);
    alg.loss_agg = rl_golden_enum(ja, "loss_agg", s_aggs, 3);
    float *mask = rl_golden_listf(c, "mask", N, NULL);
    float *logp = rl_golden_listf(c, "logp", N, mask),
          *old = rl_golden_listf(c, "old_logp", N, mask);
    float *ref = rl_golden_listf(c, "ref_logp", N, mask),
          *adv = rl_golden_listf(c, "adv_tok", N, mask);
    double *want = rl_golden_list(c, "dlogp", N);
    float *got = calloc(N, sizeof(float));
    if (!mask || !logp || !old || !ref || !adv || !want || !got) {
        CHECK_MSG(0, "%s: unreadable", name);
        goto done;
    }
    // the PPO policy loss: per-token advantages, the rollout policy as old_logp, no sequence adv
    rl_grpo_batch_t b = {B, T, logp, old, ref, NULL, mask, NULL, rl_golden_num(c, "denom"), adv};
    rl_grpo_loss_stats_t st = {0};
    CHECK_INT(rl_grpo_loss(&b, &alg, got, &st), 0);
    double wl = rl_golden_num(c, "loss");
    double lerr = fabs(st.loss - wl) / fmax(fabs(wl), 1e-300);
    CHECK_MSG(lerr <= TOL_LOSS, "%s: loss %.17g want %.17g", name, st.loss, wl);
    double gerr = rl_golden_grad_err(name, "grad", got, want, mask, N, TOL_GRAD, NULL);
    json_t *js = json_object_get(c, "stats");
    struct {
        const char *key;
        double got;
    } fields[] = {{"tokens", st.tokens},       {"kl", st.kl},
                  {"clip_low", st.clip_low},   {"clip_high", st.clip_high},
                  {"dual_clip", st.dual_clip}, {"ratio", st.ratio}};
    for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
        double wv = rl_golden_num(js, fields[k].key);
        CHECK_MSG(fabs(fields[k].got - wv) <= TOL_LOSS * fmax(1.0, fabs(wv)),
                  "%s: stats.%s %.17g want %.17g", name, fields[k].key, fields[k].got, wv);
    }
    s_worst_loss = fmax(s_worst_loss, lerr);
    s_worst_grad = fmax(s_worst_grad, gerr);
    fprintf(stderr, "golden %-30s loss rel err %.3g, dlogp %.3g (clip %g/%g, dual %g)\n", name,
            lerr, gerr, st.clip_low, st.clip_high, st.dual_clip);
done:
    free(mask);
    free(logp);
    free(old);
    free(ref);
    free(adv);
    free(want);
    free(got);
}

static void s_golden_kl_ctl(const char *name, json_t *c) {
    double beta = rl_golden_num(c, "beta0");
    const double target = rl_golden_num(c, "target"), horizon = rl_golden_num(c, "horizon");
    json_t *steps = json_object_get(c, "steps");
    CHECK(json_is_array(steps) && json_array_size(steps) > 0);
    double err = 0.0;
    for (size_t k = 0; k < json_array_size(steps); k++) {
        json_t *s = json_array_get(steps, k);
        CHECK_INT(rl_ppo_kl_coef_update(&beta, rl_golden_num(s, "kl"), target,
                                        (int)rl_golden_num(s, "n_steps"), horizon),
                  0);
        double want = rl_golden_num(s, "beta");
        double e = fabs(beta - want) / want;
        CHECK_MSG(e <= TOL_EXACT, "%s: step %zu beta %.17g want %.17g", name, k, beta, want);
        err = fmax(err, e);
    }
    s_worst_exact = fmax(s_worst_exact, err);
    fprintf(stderr, "golden %-30s beta max rel err %.3g\n", name, err);
}

static void test_goldens(void) {
    char path[1024];
    json_error_t jerr;
    snprintf(path, sizeof(path), "%s/ppo/index.json", RL_FIXTURES);
    json_t *index = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    CHECK_MSG(index != NULL, "%s: %s", path, jerr.text);
    if (!index) {
        return;
    }
    fprintf(stderr, "goldens: torch %s\n",
            json_string_value(json_object_get(index, "torch_version")));
    json_t *cases = json_object_get(index, "cases");
    CHECK(json_is_array(cases));
    size_t n = json_array_size(cases);
    int kinds[4] = {0};
    for (size_t k = 0; k < n; k++) {
        const char *name = json_string_value(json_array_get(cases, k));
        if (!name) {
            CHECK_MSG(0, "index: case %zu has no name", k);
            continue;
        }
        snprintf(path, sizeof(path), "%s/ppo/%s.json", RL_FIXTURES, name);
        json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        CHECK_MSG(c != NULL, "%s: %s", path, jerr.text);
        if (!c) {
            continue;
        }
        const char *kind = json_string_value(json_object_get(c, "kind"));
        if (kind && strcmp(kind, "gae") == 0) {
            s_golden_gae(name, c);
            kinds[0]++;
        } else if (kind && strcmp(kind, "value") == 0) {
            s_golden_value(name, c);
            kinds[1]++;
        } else if (kind && strcmp(kind, "policy") == 0) {
            s_golden_policy(name, c);
            kinds[2]++;
        } else if (kind && strcmp(kind, "kl_ctl") == 0) {
            s_golden_kl_ctl(name, c);
            kinds[3]++;
        } else {
            CHECK_MSG(0, "%s: unknown kind", path);
        }
        json_decref(c);
    }
    // the index may grow, never lose a kind: GAE with several gamma/lambda, every aggregation of
    // the value loss plus no clipping, several policy-loss knob sets, the controller
    CHECK_MSG(kinds[0] >= 4 && kinds[1] >= 4 && kinds[2] >= 3 && kinds[3] >= 1,
              "goldens: %d gae, %d value, %d policy, %d kl_ctl cases", kinds[0], kinds[1], kinds[2],
              kinds[3]);
    fprintf(stderr,
            "goldens: %zu cases; worst rel err: rewards/gae/whiten/ev/beta %.3g, losses %.3g, "
            "gradients %.3g of max (tolerances %g, %g, %g)\n",
            n, s_worst_exact, s_worst_loss, s_worst_grad, TOL_EXACT, TOL_LOSS, TOL_GRAD);
    json_decref(index);
}

int main(void) {
    RL_TEST_RUN(test_hand_gae);
    RL_TEST_RUN(test_rewards_edges);
    RL_TEST_RUN(test_rewards_gae_einval);
    RL_TEST_RUN(test_whiten);
    RL_TEST_RUN(test_explained_variance);
    RL_TEST_RUN(test_value_branches);
    RL_TEST_RUN(test_value_aggregation);
    RL_TEST_RUN(test_value_einval);
    RL_TEST_RUN(test_value_fd);
    RL_TEST_RUN(test_value_micro_batches);
    RL_TEST_RUN(test_kl_controller);
    RL_TEST_RUN(test_goldens);
    RL_TEST_DONE();
}

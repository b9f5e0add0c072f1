// test_grpo — trainer/rl_grpo against three independent answers:
//   hand-computed values: advantages for every advantage x scale mode, NaN / infinite rewards,
//     zero-variance groups, the overlong penalty; the loss and dL/dlogp of single tokens for
//     every knob (clip low / high / clip-higher, dual clip, the log-ratio clamp, k1/k2/k3 and
//     k3's clamp, token and sequence TIS, each aggregation, masks with NaN garbage), the clip
//     statistics, and every RL_EINVAL;
//   central finite differences of the returned loss (computed in double) for all 144 loss-knob
//     combinations: dlogp must be the derivative of stats.loss. Also: old_logp NULL gives
//     exactly what old_logp = a copy of logp gives, and micro-batches with the global denom add
//     up to the whole batch;
//   PyTorch autograd goldens written by tests/reference/make_grpo_goldens.py into
//     tests/fixtures/grpo/ (the torch version is printed).
// Not a trainer test: no model, no optimizer.
#include "rl_err.h"
#include "rl_grpo.h"
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
// rl_grpo computes in double from float inputs and rounds only dlogp to float, so:
//   hand values and goldens' loss: double rounding (a few ulp over ~30 terms) -> 1e-12 / 1e-10
//     relative (the goldens' torch float64 exp() may differ from libm's by an ulp);
//   dlogp against exact values: one float rounding (6e-8 relative) -> 1e-6 of the largest
//     element of the tensor compared (any formula error moves a gradient by >= 1e-2 relative:
//     a missing TIS weight, a wrong clip branch, a KL gradient of the wrong estimator);
//   finite differences: Richardson-extrapolated central differences in double with steps 2^-7
//     and 2^-8 on inputs quantised to 2^-12, so logp +- h is exact in float and the truncation
//     error is O(h^4) ~ 1e-9; the comparison is the float dlogp, hence 1e-6 relative again.
#define TOL_EXACT 1e-12
#define TOL_GOLDEN_LOSS 1e-10
#define TOL_GRAD 1e-6
#define TOL_FD 1e-6

static rl_recipe_algorithm_t s_alg(void) {
    rl_recipe_algorithm_t a;
    memset(&a, 0, sizeof(a));
    a.scale_rewards = RL_RECIPE_SCALE_GROUP;
    a.advantage = RL_RECIPE_ADV_GRPO;
    a.std_eps = 1e-4;
    a.epsilon_low = 0.2;
    a.epsilon_high = 0.2;
    a.dual_clip = 0.0;
    a.beta = 0.0;
    a.kl_estimator = RL_RECIPE_KL_K3;
    a.loss_agg = RL_RECIPE_AGG_TOKEN_MEAN;
    a.tis = RL_RECIPE_TIS_NONE;
    a.tis_cap = 2.0;
    return a;
}

// Compares n doubles; prints every element off by more than tol * max(1, |want|).
static void s_check_vec(const char *what, const double *got, const double *want, int n,
                        double tol) {
    for (int i = 0; i < n; i++) {
        double s = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
        int ok = fabs(got[i] - want[i]) <= tol * s;
        CHECK_MSG(ok, "%s[%d]: got %.15g want %.15g", what, i, got[i], want[i]);
    }
}

// ---- advantages --------------------------------------------------------------------------------

static void test_advantages_modes(void) {
    // two groups of 4: {1,2,3,4} (mean 2.5, Bessel std sqrt(5/3)) and {0,0,0,1} (mean 0.25,
    // std 0.5); over all 8: mean 11/8, sum of squares 15.875, std sqrt(15.875/7)
    const double r[8] = {1, 2, 3, 4, 0, 0, 0, 1};
    const double m[2] = {2.5, 0.25}, sg[2] = {sqrt(5.0 / 3.0), 0.5}, sb = sqrt(15.875 / 7.0);
    const double eps = 1e-4;
    // rloo baselines: the mean of the 3 others
    const double loo[8] = {3.0, 8.0 / 3, 7.0 / 3, 2.0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0.0};
    const char *names[2][3] = {{"grpo/group", "grpo/batch", "grpo/none"},
                               {"rloo/group", "rloo/batch", "rloo/none"}};
    const int scales[3] = {RL_RECIPE_SCALE_GROUP, RL_RECIPE_SCALE_BATCH, RL_RECIPE_SCALE_NONE};
    for (int mode = 0; mode < 2; mode++) {
        for (int sc = 0; sc < 3; sc++) {
            rl_recipe_algorithm_t alg = s_alg();
            alg.advantage = mode ? RL_RECIPE_ADV_RLOO : RL_RECIPE_ADV_GRPO;
            alg.scale_rewards = scales[sc];
            double want[8], got[8];
            for (int i = 0; i < 8; i++) {
                int g = i / 4;
                double c = mode ? r[i] - loo[i] : r[i] - m[g];
                double div = sc == 0 ? sg[g] + eps : sc == 1 ? sb + eps : 1.0;
                want[i] = c / div;
            }
            rl_grpo_adv_stats_t st;
            memset(&st, 0xff, sizeof(st));
            CHECK_INT(rl_grpo_advantages(r, 2, 4, &alg, got, &st), 0);
            s_check_vec(names[mode][sc], got, want, 8, TOL_EXACT);
            CHECK_INT(st.groups, 2);
            CHECK_INT(st.zero_std_groups, 0);
            CHECK_INT(st.unscorable, 0);
            CHECK_CLOSE(st.reward_mean, 11.0 / 8.0, TOL_EXACT);
            CHECK_CLOSE(st.reward_std, (sg[0] + sg[1]) / 2.0, TOL_EXACT);
        }
    }
    // std_eps is added to the std, not to the variance: with eps 0.5 the first group divides by
    // sqrt(5/3) + 0.5
    rl_recipe_algorithm_t alg = s_alg();
    alg.std_eps = 0.5;
    double got[8];
    CHECK_INT(rl_grpo_advantages(r, 2, 4, &alg, got, NULL), 0);
    CHECK_CLOSE(got[3], 1.5 / (sqrt(5.0 / 3.0) + 0.5), TOL_EXACT);
}

static void test_advantages_unscorable(void) {
    // group 0 {1, NaN, 3, 5}: scorable {1,3,5}, mean 3, std 2; group 1 {2,2,2,2}: zero variance.
    // Batch over the 7 scorable: mean 17/7, sum of squares 51 - 289/7 = 68/7, std sqrt(34/21).
    const double r[8] = {1, NAN, 3, 5, 2, 2, 2, 2};
    const double eps = 1e-4, sb = sqrt(34.0 / 21.0);
    struct {
        int adv, scale;
        double want[4]; // group 0; group 1 is all 0
    } cases[] = {
        {RL_RECIPE_ADV_GRPO, RL_RECIPE_SCALE_GROUP, {-2 / (2 + eps), 0, 0, 2 / (2 + eps)}},
        {RL_RECIPE_ADV_GRPO, RL_RECIPE_SCALE_BATCH, {-2 / (sb + eps), 0, 0, 2 / (sb + eps)}},
        {RL_RECIPE_ADV_GRPO, RL_RECIPE_SCALE_NONE, {-2, 0, 0, 2}},
        // rloo: 1 - (3+5)/2 = -3, 3 - 3 = 0, 5 - 2 = 3
        {RL_RECIPE_ADV_RLOO, RL_RECIPE_SCALE_NONE, {-3, 0, 0, 3}},
        {RL_RECIPE_ADV_RLOO, RL_RECIPE_SCALE_GROUP, {-3 / (2 + eps), 0, 0, 3 / (2 + eps)}},
        {RL_RECIPE_ADV_RLOO, RL_RECIPE_SCALE_BATCH, {-3 / (sb + eps), 0, 0, 3 / (sb + eps)}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        rl_recipe_algorithm_t alg = s_alg();
        alg.advantage = cases[k].adv;
        alg.scale_rewards = cases[k].scale;
        double got[8], want[8] = {0};
        memcpy(want, cases[k].want, sizeof(cases[k].want));
        rl_grpo_adv_stats_t st;
        CHECK_INT(rl_grpo_advantages(r, 2, 4, &alg, got, &st), 0);
        char name[64];
        snprintf(name, sizeof(name), "nan case %zu", k);
        s_check_vec(name, got, want, 8, TOL_EXACT);
        CHECK(got[1] == 0.0 && got[4] == 0.0 && got[7] == 0.0);
        CHECK_INT(st.groups, 2);
        CHECK_INT(st.zero_std_groups, 1);
        CHECK_INT(st.unscorable, 1);
        CHECK_CLOSE(st.reward_mean, 17.0 / 7.0, TOL_EXACT);
        CHECK_CLOSE(st.reward_std, (2.0 + 0.0) / 2.0, TOL_EXACT);
    }
    // infinite rewards are unscorable too: {inf, 1, 2, -inf} -> scorable {1, 2}, std sqrt(1/2)
    const double ri[4] = {INFINITY, 1, 2, -INFINITY};
    rl_recipe_algorithm_t alg = s_alg();
    double got[4];
    rl_grpo_adv_stats_t st;
    CHECK_INT(rl_grpo_advantages(ri, 1, 4, &alg, got, &st), 0);
    const double want[4] = {0, -0.5 / (sqrt(0.5) + 1e-4), 0.5 / (sqrt(0.5) + 1e-4), 0};
    s_check_vec("inf rewards", got, want, 4, TOL_EXACT);
    CHECK_INT(st.unscorable, 2);
    CHECK_CLOSE(st.reward_mean, 1.5, TOL_EXACT);
}

static void test_advantages_zero_variance(void) {
    // every group has zero variance: equal rewards whose float mean is not the value itself
    // (0.1 * 4 / 4 != 0.1 in general), one scorable reward, two equal scorable, none scorable
    const double r[16] = {0.1, 0.1, 0.1, 0.1, NAN, NAN, NAN, 7, NAN, 3, NAN, 3, NAN, NAN, NAN, NAN};
    const int scales[3] = {RL_RECIPE_SCALE_GROUP, RL_RECIPE_SCALE_BATCH, RL_RECIPE_SCALE_NONE};
    for (int mode = 0; mode < 2; mode++) {
        for (int sc = 0; sc < 3; sc++) {
            rl_recipe_algorithm_t alg = s_alg();
            alg.advantage = mode ? RL_RECIPE_ADV_RLOO : RL_RECIPE_ADV_GRPO;
            alg.scale_rewards = scales[sc];
            alg.std_eps = 0.0; // no eps to hide a 0/0
            double got[16];
            rl_grpo_adv_stats_t st;
            CHECK_INT(rl_grpo_advantages(r, 4, 4, &alg, got, &st), 0);
            for (int i = 0; i < 16; i++) {
                CHECK_MSG(got[i] == 0.0, "mode %d scale %d: adv[%d] = %.17g, want exactly 0", mode,
                          sc, i, got[i]);
            }
            CHECK_INT(st.zero_std_groups, 4);
            CHECK_INT(st.unscorable, 9);
            CHECK_CLOSE(st.reward_mean, (0.4 + 7 + 6) / 7.0, TOL_EXACT);
            // groups with >= 2 scorable: the 0.1 group and the {3, 3} group, both std 0
            CHECK(st.reward_std == 0.0);
        }
    }
    // batch scaling: a zero-variance group stays 0 though the batch std is not 0; its rewards
    // still count in the batch std ({0,1,0,1} + {5,5,5,5}: mean 2.75, ss 4*0.5625... below)
    const double r2[8] = {0, 1, 0, 1, 5, 5, 5, 5};
    double mean = 22.0 / 8.0, ss = 0;
    for (int i = 0; i < 8; i++) {
        ss += (r2[i] - mean) * (r2[i] - mean);
    }
    rl_recipe_algorithm_t alg = s_alg();
    alg.scale_rewards = RL_RECIPE_SCALE_BATCH;
    double got[8];
    CHECK_INT(rl_grpo_advantages(r2, 2, 4, &alg, got, NULL), 0);
    double sb = sqrt(ss / 7.0);
    const double want[8] = {
        -0.5 / (sb + 1e-4), 0.5 / (sb + 1e-4), -0.5 / (sb + 1e-4), 0.5 / (sb + 1e-4), 0, 0, 0, 0};
    s_check_vec("batch with a zero-variance group", got, want, 8, TOL_EXACT);
}

static void test_advantages_einval(void) {
    const double r[4] = {1, 2, 3, 4};
    double adv[4] = {42, 42, 42, 42};
    rl_recipe_algorithm_t alg = s_alg();
    CHECK_INT(rl_grpo_advantages(r, 4, 1, &alg, adv, NULL), RL_EINVAL); // G < 2
    CHECK_INT(rl_grpo_advantages(r, 0, 4, &alg, adv, NULL), RL_EINVAL);
    CHECK_INT(rl_grpo_advantages(NULL, 1, 4, &alg, adv, NULL), RL_EINVAL);
    CHECK_INT(rl_grpo_advantages(r, 1, 4, NULL, adv, NULL), RL_EINVAL);
    CHECK_INT(rl_grpo_advantages(r, 1, 4, &alg, NULL, NULL), RL_EINVAL);
    alg.advantage = 7;
    CHECK_INT(rl_grpo_advantages(r, 1, 4, &alg, adv, NULL), RL_EINVAL);
    alg = s_alg();
    alg.scale_rewards = 9;
    CHECK_INT(rl_grpo_advantages(r, 1, 4, &alg, adv, NULL), RL_EINVAL);
    alg = s_alg();
    alg.std_eps = -1e-4;
    CHECK_INT(rl_grpo_advantages(r, 1, 4, &alg, adv, NULL), RL_EINVAL);
    CHECK(adv[0] == 42 && adv[3] == 42); // nothing written
    // finite rewards whose statistics overflow: the mean of 1.7e308 and -1.7e308 is 0, but
    // the sum of squares is infinite, which gave std inf and every advantage 0 silently
    const double huge[4] = {1.7e308, -1.7e308, 1.7e308, -1.7e308};
    alg = s_alg();
    CHECK_INT(rl_grpo_advantages(huge, 1, 4, &alg, adv, NULL), RL_EINVAL);
    const double big[4] = {1e160, 0, 0, 0}; // squares past DBL_MAX
    CHECK_INT(rl_grpo_advantages(big, 1, 4, &alg, adv, NULL), RL_EINVAL);
    const double fine[4] = {1e150, 0, 0, 0};
    CHECK_INT(rl_grpo_advantages(fine, 1, 4, &alg, adv, NULL), 0);
    CHECK(isfinite(adv[0]) && adv[0] > 0);
}

static void test_overlong(void) {
    // max 100, buffer 20: L_exp 80; the penalty grows by 1/20 per token past 80
    CHECK_CLOSE(rl_grpo_overlong_penalty(50, 100, 20, 1.0), 0.0, TOL_EXACT);
    CHECK_CLOSE(rl_grpo_overlong_penalty(80, 100, 20, 1.0), 0.0, TOL_EXACT);
    CHECK_CLOSE(rl_grpo_overlong_penalty(81, 100, 20, 1.0), -0.05, TOL_EXACT);
    CHECK_CLOSE(rl_grpo_overlong_penalty(90, 100, 20, 1.0), -0.5, TOL_EXACT);
    CHECK_CLOSE(rl_grpo_overlong_penalty(100, 100, 20, 1.0), -1.0, TOL_EXACT);
    CHECK_CLOSE(rl_grpo_overlong_penalty(130, 100, 20, 1.0), -1.0, TOL_EXACT); // floored
    CHECK_CLOSE(rl_grpo_overlong_penalty(90, 100, 20, 0.5), -0.25, TOL_EXACT);
    CHECK_CLOSE(rl_grpo_overlong_penalty(99, 100, 0, 1.0), 0.0, TOL_EXACT); // off
}

// ---- the loss: single tokens -------------------------------------------------------------------

typedef struct {
    double loss;
    double g; // dlogp of the token
    rl_grpo_loss_stats_t st;
} s_tok_t;

// One active token (B = T = 1). old/ref/mu: NULL or a value.
static s_tok_t s_token(const rl_recipe_algorithm_t *alg, float logp, const float *old,
                       const float *ref, const float *mu, double A, double denom) {
    float mask = 1.0f, dl = 12345.0f;
    rl_grpo_batch_t b = {1, 1, &logp, old, ref, mu, &mask, &A, denom, NULL};
    s_tok_t r;
    memset(&r, 0, sizeof(r));
    int rc = rl_grpo_loss(&b, alg, &dl, &r.st);
    CHECK_INT(rc, 0);
    r.loss = r.st.loss;
    r.g = dl;
    return r;
}

// The policy term alone. ratio: the intended ratio (old = logp - log(ratio) is rounded to
// float, so the exact ratio of the inputs is recomputed); branch 'u' = unclipped (l = -A r,
// dl = -A r), 'c' = clipped at `bound` (l = -A bound, dl = 0), 'd' = dual clip (l = -c A, dl = 0).
static void s_pg_case(const char *name, double el, double eh, double c, double A, double ratio,
                      char branch, double bound, int clow, int chigh, int dual) {
    rl_recipe_algorithm_t alg = s_alg();
    alg.epsilon_low = el;
    alg.epsilon_high = eh;
    alg.dual_clip = c;
    const float lp = -1.0f;
    const float old = (float)(-1.0 - log(ratio));
    const double r = exp((double)lp - (double)old);
    const double denom = 4.0;
    s_tok_t t = s_token(&alg, lp, &old, NULL, NULL, A, denom);
    double l = branch == 'u' ? -A * r : branch == 'c' ? -A * bound : -c * A;
    double g = branch == 'u' ? -A * r : 0.0;
    CHECK_MSG(fabs(t.loss - l / denom) <= TOL_EXACT, "%s: loss %.15g want %.15g", name, t.loss,
              l / denom);
    CHECK_MSG(fabs(t.g - g / denom) <= TOL_GRAD * fmax(1.0, fabs(g)), "%s: dlogp %.9g want %.9g",
              name, t.g, g / denom);
    CHECK_MSG(t.st.clip_low == clow && t.st.clip_high == chigh && t.st.dual_clip == dual,
              "%s: clip_low/high/dual %g/%g/%g want %d/%d/%d", name, t.st.clip_low, t.st.clip_high,
              t.st.dual_clip, clow, chigh, dual);
    CHECK_MSG(fabs(t.st.ratio - r) <= TOL_EXACT && t.st.tokens == 1.0 && t.st.tis_weight == 1.0 &&
                  t.st.kl == 0.0 && t.st.logprob_gap == 0.0,
              "%s: ratio %.15g tokens %g tis_weight %g kl %g gap %g", name, t.st.ratio, t.st.tokens,
              t.st.tis_weight, t.st.kl, t.st.logprob_gap);
}

static void test_loss_policy_term(void) {
    //          name                           eps_l eps_h  c    A    ratio br  bound lo hi du
    s_pg_case("A>0 above 1+eps_high", 0.2, 0.2, 0, 1.0, 1.5, 'c', 1.2, 0, 1, 0);
    s_pg_case("A>0 1.25 clip-higher 0.28", 0.2, 0.28, 0, 1.0, 1.25, 'u', 0, 0, 0, 0);
    s_pg_case("A>0 1.25 eps_high 0.2", 0.2, 0.2, 0, 1.0, 1.25, 'c', 1.2, 0, 1, 0);
    s_pg_case("A>0 1.35 clip-higher 0.28", 0.2, 0.28, 0, 1.0, 1.35, 'c', 1.28, 0, 1, 0);
    s_pg_case("A>0 below 1-eps_low", 0.2, 0.2, 0, 1.0, 0.5, 'u', 0, 0, 0, 0);
    s_pg_case("A<0 below 1-eps_low", 0.2, 0.2, 0, -1.0, 0.5, 'c', 0.8, 1, 0, 0);
    s_pg_case("A<0 0.5 eps_low 0.4", 0.4, 0.2, 0, -1.0, 0.5, 'c', 0.6, 1, 0, 0);
    s_pg_case("A<0 0.5 eps_low 0.6", 0.6, 0.2, 0, -1.0, 0.5, 'u', 0, 0, 0, 0);
    s_pg_case("A<0 above 1+eps_high", 0.2, 0.2, 0, -1.0, 1.5, 'u', 0, 0, 0, 0);
    s_pg_case("A>0 inside", 0.2, 0.2, 0, 0.7, 1.1, 'u', 0, 0, 0, 0);
    s_pg_case("A<0 inside", 0.2, 0.2, 0, -0.7, 0.9, 'u', 0, 0, 0, 0);
    // dual clip c = 3: A = -2, ratio 4: -min(-8, -2.4) = 8 > 6 -> 6
    s_pg_case("dual clip binds", 0.2, 0.2, 3.0, -2.0, 4.0, 'd', 0, 0, 0, 1);
    s_pg_case("dual clip loose", 0.2, 0.2, 3.0, -2.0, 2.5, 'u', 0, 0, 0, 0);
    s_pg_case("dual clip off", 0.2, 0.2, 0.0, -2.0, 4.0, 'u', 0, 0, 0, 0);
    s_pg_case("dual clip, A>0 is not bounded", 0.2, 0.2, 3.0, 2.0, 4.0, 'c', 1.2, 0, 1, 0);
    s_pg_case("dual clip, A<0 clipped low", 0.2, 0.2, 3.0, -2.0, 0.5, 'c', 0.8, 1, 0, 0);
    s_pg_case("A = 0", 0.2, 0.2, 3.0, 0.0, 1.7, 'u', 0, 0, 0, 0);

    // the log-ratio is clamped to [-20, 20] and has no gradient beyond it
    rl_recipe_algorithm_t alg = s_alg();
    float old = -26.0f;
    s_tok_t t = s_token(&alg, -1.0f, &old, NULL, NULL, -1.0, 1.0); // log-ratio 25, A < 0
    CHECK_CLOSE(t.loss, exp(20.0), TOL_EXACT);
    CHECK(t.g == 0.0f);
    CHECK_CLOSE(t.st.ratio, exp(20.0), TOL_EXACT);
    t = s_token(&alg, -1.0f, &old, NULL, NULL, 1.0, 1.0); // A > 0: the clip binds
    CHECK_CLOSE(t.loss, -1.2, TOL_EXACT);
    CHECK(t.g == 0.0f);
    old = 24.0f;
    t = s_token(&alg, -1.0f, &old, NULL, NULL, 1.0, 1.0); // log-ratio -25, A > 0: unclipped
    CHECK_CLOSE(t.loss, -exp(-20.0), TOL_EXACT);
    CHECK(t.g == 0.0f);
    old = -20.5f; // log-ratio 19.5: inside the clamp, the gradient is there
    t = s_token(&alg, -1.0f, &old, NULL, NULL, -1.0, 1.0);
    CHECK_CLOSE(t.g / exp(19.5), 1.0, TOL_GRAD);

    // old_logp NULL: ratio exactly 1, gradient -A (one update per batch)
    t = s_token(&alg, -0.75f, NULL, NULL, NULL, 1.5, 2.0);
    CHECK_CLOSE(t.loss, -1.5 / 2.0, TOL_EXACT);
    CHECK_CLOSE(t.g, -1.5 / 2.0, TOL_GRAD);
    CHECK(t.st.ratio == 1.0 && t.st.clip_low == 0 && t.st.clip_high == 0);
}

static void test_loss_kl(void) {
    // A = 0 isolates the KL term: l = beta k, dl = beta dk, d = logp - ref
    struct {
        int est;
        float lp, ref;
        double k, dk;
    } cases[] = {
        {RL_RECIPE_KL_K1, -1.0f, -1.5f, 0.5, 1.0},
        {RL_RECIPE_KL_K1, -4.0f, -1.0f, -3.0, 1.0},
        {RL_RECIPE_KL_K2, -1.0f, -1.5f, 0.125, 0.5},
        {RL_RECIPE_KL_K2, -4.0f, -1.0f, 4.5, -3.0},
        {RL_RECIPE_KL_K3, -1.0f, -1.5f, exp(-0.5) + 0.5 - 1.0, 1.0 - exp(-0.5)},
        {RL_RECIPE_KL_K3, -2.0f, -1.0f, exp(1.0) - 1.0 - 1.0, 1.0 - exp(1.0)},
        // d = -3: exp(3) - 3 - 1 = 16.09 > 10: clamped, no gradient
        {RL_RECIPE_KL_K3, -4.0f, -1.0f, 10.0, 0.0},
        {RL_RECIPE_KL_K3, -1.0f, -1.0f, 0.0, 0.0},
    };
    const double beta = 0.5;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        rl_recipe_algorithm_t alg = s_alg();
        alg.beta = beta;
        alg.kl_estimator = cases[k].est;
        s_tok_t t = s_token(&alg, cases[k].lp, NULL, &cases[k].ref, NULL, 0.0, 1.0);
        CHECK_MSG(fabs(t.loss - beta * cases[k].k) <= TOL_EXACT * fmax(1, fabs(cases[k].k)),
                  "kl case %zu: loss %.15g want %.15g", k, t.loss, beta * cases[k].k);
        CHECK_MSG(fabs(t.g - beta * cases[k].dk) <= TOL_GRAD * fmax(1, fabs(cases[k].dk)),
                  "kl case %zu: dlogp %.9g want %.9g", k, t.g, beta * cases[k].dk);
        CHECK_MSG(fabs(t.st.kl - cases[k].k) <= TOL_EXACT * fmax(1, fabs(cases[k].k)),
                  "kl case %zu: stats.kl %.15g want %.15g", k, t.st.kl, cases[k].k);
        // beta = 0 with ref given: no loss term, stats.kl still reported
        alg.beta = 0.0;
        t = s_token(&alg, cases[k].lp, NULL, &cases[k].ref, NULL, 0.0, 1.0);
        CHECK(t.loss == 0.0 && t.g == 0.0f);
        CHECK_MSG(fabs(t.st.kl - cases[k].k) <= TOL_EXACT * fmax(1, fabs(cases[k].k)),
                  "kl case %zu beta 0: stats.kl %.15g want %.15g", k, t.st.kl, cases[k].k);
    }
    // with the policy term: A = 1, ratio 1, k2 of d = 0.5: l = -1 + 0.5 * 0.125
    rl_recipe_algorithm_t alg = s_alg();
    alg.beta = 0.5;
    alg.kl_estimator = RL_RECIPE_KL_K2;
    float ref = -1.5f;
    s_tok_t t = s_token(&alg, -1.0f, NULL, &ref, NULL, 1.0, 1.0);
    CHECK_CLOSE(t.loss, -1.0 + 0.0625, TOL_EXACT);
    CHECK_CLOSE(t.g, -1.0 + 0.25, TOL_GRAD);
}

static void test_loss_tis_token(void) {
    rl_recipe_algorithm_t alg = s_alg();
    alg.tis = RL_RECIPE_TIS_TOKEN;
    alg.tis_cap = 2.0;
    // old NULL: old = logp; w = min(exp(logp - mu), 2); l = -w A, dl = -w A
    const float lp = -1.0f;
    const float mus[3] = {(float)(-1.0 - log(1.5)), -2.0f, -0.5f};
    for (int k = 0; k < 3; k++) {
        double e = exp((double)lp - (double)mus[k]);
        double w = e > 2.0 ? 2.0 : e;
        s_tok_t t = s_token(&alg, lp, NULL, NULL, &mus[k], 1.0, 1.0);
        CHECK_MSG(fabs(t.loss + w) <= TOL_EXACT && fabs(t.g + w) <= TOL_GRAD,
                  "tis token %d: loss %.15g dlogp %.9g want %.15g", k, t.loss, t.g, -w);
        CHECK_CLOSE(t.st.tis_weight, w, TOL_EXACT);
        CHECK_CLOSE(t.st.logprob_gap, fabs((double)lp - (double)mus[k]), TOL_EXACT);
    }
    // the weight uses old, not logp: old - mu = log 1.5, ratio 1.1, A = 1 (unclipped)
    const float old = (float)(-1.0 - log(1.1));
    const float mu = (float)((double)old - log(1.5));
    double r = exp((double)lp - (double)old), w = exp((double)old - (double)mu);
    s_tok_t t = s_token(&alg, lp, &old, NULL, &mu, 1.0, 1.0);
    CHECK_CLOSE(t.loss, -w * r, TOL_EXACT);
    CHECK_CLOSE(t.g, -w * r, TOL_GRAD);
    CHECK_CLOSE(t.st.logprob_gap, log(1.5), 1e-6);
    // PPO's approx_kl: (logp - old)^2 / 2 with old given; 0 with old detached
    double x = (double)lp - (double)old;
    CHECK_CLOSE(t.st.approx_kl, 0.5 * x * x, TOL_EXACT);
    t = s_token(&alg, lp, NULL, NULL, &mu, 1.0, 1.0);
    CHECK(t.st.approx_kl == 0.0);
    // the KL term is not weighted: k1, d = 0.5, beta 0.5, w = 1.5 (old NULL)
    alg.beta = 0.5;
    alg.kl_estimator = RL_RECIPE_KL_K1;
    const float ref = -1.5f;
    w = exp((double)lp - (double)mus[0]);
    t = s_token(&alg, lp, NULL, &ref, &mus[0], 1.0, 1.0);
    CHECK_MSG(fabs(t.loss - (-w + 0.25)) <= TOL_EXACT && fabs(t.g - (-w + 0.5)) <= TOL_GRAD,
              "tis token + kl: loss %.15g dlogp %.9g want %.15g %.9g (KL weighted?)", t.loss, t.g,
              -w + 0.25, -w + 0.5);
    // TIS off: mu given only feeds the gap, the weight is 1
    alg = s_alg();
    t = s_token(&alg, lp, NULL, NULL, &mus[1], 1.0, 1.0);
    CHECK_CLOSE(t.loss, -1.0, TOL_EXACT);
    CHECK(t.st.tis_weight == 1.0);
    CHECK_CLOSE(t.st.logprob_gap, 1.0, TOL_EXACT);
}

static void test_loss_tis_sequence(void) {
    // 4 rows of 2, old NULL, A = 1, cap 2 (log 2 = 0.693): log-weights (logp - mu summed over
    // the active tokens) 0.6 (kept), 0.8 (dropped), -0.8 (dropped), row 3 0.2 with a masked
    // token of log-weight 5 that must not count (kept)
    enum { B = 4, T = 2 };
    float logp[B * T], mu[B * T];
    const float mask[B * T] = {1, 1, 1, 1, 1, 1, 1, 0};
    const double diff[B * T] = {0.3, 0.3, 0.5, 0.3, -0.4, -0.4, 0.2, 5.0};
    const double adv[B] = {1, 1, 1, 1};
    for (int i = 0; i < B * T; i++) {
        logp[i] = -1.0f - 0.25f * (float)i;
        mu[i] = (float)((double)logp[i] - diff[i]);
    }
    rl_recipe_algorithm_t alg = s_alg();
    alg.tis = RL_RECIPE_TIS_SEQUENCE;
    rl_grpo_batch_t b = {B, T, logp, NULL, NULL, mu, mask, adv, 8.0, NULL};
    float dl[B * T];
    rl_grpo_loss_stats_t st = {0};
    CHECK_INT(rl_grpo_loss(&b, &alg, dl, &st), 0);
    CHECK_CLOSE(st.loss, -3.0 / 8.0, TOL_EXACT);
    const float want[B * T] = {-0.125f, -0.125f, 0, 0, 0, 0, -0.125f, 0};
    for (int i = 0; i < B * T; i++) {
        CHECK_MSG(dl[i] == want[i], "tis seq dlogp[%d] = %g want %g", i, dl[i], want[i]);
    }
    CHECK(st.tis_masked == 2.0);
    CHECK(st.tis_weight == 3.0);
    CHECK(st.tokens == 7.0);
    // dropped rows lose their KL term too: k1 (d = logp - ref = 0.25), beta 0.5
    float ref[B * T];
    for (int i = 0; i < B * T; i++) {
        ref[i] = logp[i] - 0.25f;
    }
    alg.beta = 0.5;
    alg.kl_estimator = RL_RECIPE_KL_K1;
    b.ref_logp = ref;
    memset(&st, 0, sizeof(st));
    CHECK_INT(rl_grpo_loss(&b, &alg, dl, &st), 0);
    CHECK_CLOSE(st.loss, (-3.0 + 3 * 0.125) / 8.0, TOL_EXACT);
    CHECK_CLOSE(st.kl, 7 * 0.25, TOL_EXACT); // stats describe all active tokens
    CHECK(dl[2] == 0.0f && dl[5] == 0.0f);
    CHECK_CLOSE(dl[0], (-1.0 + 0.5) / 8.0, TOL_GRAD);
    // cap 2.5 (log 0.916) keeps rows 1 and 2
    alg.tis_cap = 2.5;
    memset(&st, 0, sizeof(st));
    CHECK_INT(rl_grpo_loss(&b, &alg, dl, &st), 0);
    CHECK(st.tis_masked == 0.0);
    CHECK_CLOSE(st.loss, (-7.0 + 7 * 0.125) / 8.0, TOL_EXACT);
}

static void test_loss_aggregation(void) {
    // old NULL, no KL: l = -A on each active token. Rows: 3 active (A = 1), 1 active (A = -2),
    // none (A = 0.5).
    enum { B = 3, T = 3 };
    const float logp[B * T] = {-1, -2, -3, -1, -2, -3, -1, -2, -3};
    const float mask[B * T] = {1, 1, 1, 0, 1, 0, 0, 0, 0};
    const double adv[B] = {1.0, -2.0, 0.5};
    struct {
        int agg;
        double denom, loss;
        float g[B * T];
    } cases[] = {
        // sum(l m) / D, D = 10 active tokens in the global batch
        {RL_RECIPE_AGG_TOKEN_MEAN,
         10.0,
         (-3.0 + 2.0) / 10.0,
         {-0.1f, -0.1f, -0.1f, 0, 0.2f, 0, 0, 0, 0}},
        // sum_b [sum_t l m / n_b] / D, D = 5 sequences; the empty row adds 0
        {RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN,
         5.0,
         (-3.0 / 3.0 + 2.0 / 1.0) / 5.0,
         {(float)(-1.0 / 15), (float)(-1.0 / 15), (float)(-1.0 / 15), 0, 0.4f, 0, 0, 0, 0}},
        // sum(l m) / D, D = 3 sequences * 4 max_new_tokens
        {RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM,
         12.0,
         (-3.0 + 2.0) / 12.0,
         {(float)(-1.0 / 12), (float)(-1.0 / 12), (float)(-1.0 / 12), 0, (float)(2.0 / 12), 0, 0, 0,
          0}},
    };
    for (size_t k = 0; k < 3; k++) {
        rl_recipe_algorithm_t alg = s_alg();
        alg.loss_agg = cases[k].agg;
        rl_grpo_batch_t b = {B, T, logp, NULL, NULL, NULL, mask, adv, cases[k].denom, NULL};
        float dl[B * T];
        rl_grpo_loss_stats_t st = {0};
        CHECK_INT(rl_grpo_loss(&b, &alg, dl, &st), 0);
        CHECK_MSG(fabs(st.loss - cases[k].loss) <= TOL_EXACT, "agg %d: loss %.15g want %.15g",
                  cases[k].agg, st.loss, cases[k].loss);
        for (int i = 0; i < B * T; i++) {
            CHECK_MSG(fabs(dl[i] - cases[k].g[i]) <= 1e-7, "agg %d: dlogp[%d] %.9g want %.9g",
                      cases[k].agg, i, dl[i], cases[k].g[i]);
        }
        CHECK(st.tokens == 4.0);
    }
}

static void test_loss_mask(void) {
    // masked positions are never read: NaN and huge values there change nothing
    enum { B = 2, T = 3 };
    const float mask[B * T] = {0, 1, 1, 1, 0, 0};
    const double adv[B] = {0.8, -1.1};
    float logp[B * T] = {NAN, -1.0f, -0.5f, -2.0f, 1e30f, NAN};
    float old[B * T] = {NAN, -1.1f, -0.4f, -2.3f, -1e30f, NAN};
    float ref[B * T] = {1e30f, -1.2f, -0.9f, -1.5f, NAN, NAN};
    float mu[B * T] = {-1e30f, -1.05f, -0.45f, -2.2f, NAN, 1e30f};
    const int tis_modes[3] = {RL_RECIPE_TIS_NONE, RL_RECIPE_TIS_TOKEN, RL_RECIPE_TIS_SEQUENCE};
    for (int k = 0; k < 3; k++) {
        rl_recipe_algorithm_t alg = s_alg();
        alg.beta = 0.1;
        alg.dual_clip = 3.0;
        alg.tis = tis_modes[k];
        alg.loss_agg = RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN;
        rl_grpo_batch_t b = {B, T, logp, old, ref, mu, mask, adv, 2.0, NULL};
        float dl[B * T];
        for (int i = 0; i < B * T; i++) {
            dl[i] = 777.0f;
        }
        rl_grpo_loss_stats_t st = {0};
        CHECK_INT(rl_grpo_loss(&b, &alg, dl, &st), 0);
        CHECK_MSG(isfinite(st.loss) && isfinite(st.kl) && isfinite(st.ratio) &&
                      isfinite(st.logprob_gap),
                  "tis %d: masked garbage leaked: loss %g kl %g ratio %g gap %g", k, st.loss, st.kl,
                  st.ratio, st.logprob_gap);
        CHECK(dl[0] == 0.0f && dl[4] == 0.0f && dl[5] == 0.0f);
        CHECK(isfinite(dl[1]) && isfinite(dl[2]) && isfinite(dl[3]));
        CHECK(st.tokens == 3.0);
        // the same batch with clean masked positions gives bit-identical results
        float l2[B * T], o2[B * T], r2[B * T], m2[B * T], d2[B * T];
        for (int i = 0; i < B * T; i++) {
            l2[i] = mask[i] ? logp[i] : -1.0f;
            o2[i] = mask[i] ? old[i] : -1.0f;
            r2[i] = mask[i] ? ref[i] : -1.0f;
            m2[i] = mask[i] ? mu[i] : -1.0f;
        }
        rl_grpo_batch_t b2 = {B, T, l2, o2, r2, m2, mask, adv, 2.0, NULL};
        rl_grpo_loss_stats_t st2 = {0};
        CHECK_INT(rl_grpo_loss(&b2, &alg, d2, &st2), 0);
        CHECK(st.loss == st2.loss && memcmp(dl, d2, sizeof(dl)) == 0);
    }
}

static void test_loss_einval(void) {
    enum { B = 1, T = 2 };
    float logp[2] = {-1, -1}, mask[2] = {1, 1}, dl[2] = {9, 9};
    const double adv[1] = {1};
    rl_grpo_loss_stats_t st = {0};
    st.tokens = 5.0;
#define EXPECT_EINVAL(mutate)                                                                      \
    do {                                                                                           \
        rl_recipe_algorithm_t alg = s_alg();                                                       \
        rl_grpo_batch_t b = {B, T, logp, NULL, NULL, NULL, mask, adv, 1.0, NULL};                        \
        mutate;                                                                                    \
        CHECK_MSG(rl_grpo_loss(&b, &alg, dl, &st) == RL_EINVAL, "%s", #mutate);                    \
    } while (0)
    EXPECT_EINVAL(b.B = 0);
    EXPECT_EINVAL(b.T = 0);
    EXPECT_EINVAL(b.logp = NULL);
    EXPECT_EINVAL(b.mask = NULL);
    EXPECT_EINVAL(b.adv = NULL);
    EXPECT_EINVAL(b.denom = 0.0);
    EXPECT_EINVAL(b.denom = -1.0);
    EXPECT_EINVAL(b.denom = INFINITY);
    EXPECT_EINVAL(b.denom = NAN);
    EXPECT_EINVAL(alg.beta = 0.1); // no ref_logp
    EXPECT_EINVAL(alg.beta = -0.1);
    EXPECT_EINVAL(alg.tis = RL_RECIPE_TIS_TOKEN);    // no mu_logp
    EXPECT_EINVAL(alg.tis = RL_RECIPE_TIS_SEQUENCE); // no mu_logp
    EXPECT_EINVAL(alg.tis = RL_RECIPE_TIS_TOKEN; b.mu_logp = logp; alg.tis_cap = 0.5);
    EXPECT_EINVAL(alg.tis = 3);
    EXPECT_EINVAL(alg.kl_estimator = 3);
    EXPECT_EINVAL(alg.loss_agg = -1);
    EXPECT_EINVAL(alg.epsilon_low = 1.0);
    EXPECT_EINVAL(alg.epsilon_low = -0.1);
    EXPECT_EINVAL(alg.epsilon_high = -0.1);
    EXPECT_EINVAL(alg.dual_clip = 0.5);
    EXPECT_EINVAL(alg.dual_clip = 1.0);
    EXPECT_EINVAL(mask[1] = 0.5f);
    mask[1] = 1.0f;
#undef EXPECT_EINVAL
    {
        rl_recipe_algorithm_t alg = s_alg();
        rl_grpo_batch_t b = {B, T, logp, NULL, NULL, NULL, mask, adv, 1.0, NULL};
        CHECK(rl_grpo_loss(NULL, &alg, dl, &st) == RL_EINVAL);
        CHECK(rl_grpo_loss(&b, NULL, dl, &st) == RL_EINVAL);
        CHECK(rl_grpo_loss(&b, &alg, NULL, &st) == RL_EINVAL);
    }
    CHECK(dl[0] == 9.0f && dl[1] == 9.0f && st.tokens == 5.0 && st.loss == 0.0); // untouched
    // a micro-batch with no active token may come with denom 0: loss 0, dlogp 0
    {
        rl_recipe_algorithm_t alg = s_alg();
        float none[2] = {0, 0};
        rl_grpo_batch_t b = {B, T, logp, NULL, NULL, NULL, none, adv, 0.0, NULL};
        rl_grpo_loss_stats_t s2 = {0};
        CHECK_INT(rl_grpo_loss(&b, &alg, dl, &s2), 0);
        CHECK(dl[0] == 0.0f && dl[1] == 0.0f && s2.loss == 0.0 && s2.tokens == 0.0);
        CHECK_INT(rl_grpo_loss(&b, &alg, dl, NULL), 0); // stats may be NULL
    }
}

// ---- finite differences over every knob combination ---------------------------------------------

enum { FB = 5, FT = 6 };

typedef struct {
    float logp[FB * FT], old[FB * FT], ref[FB * FT], mu[FB * FT], mask[FB * FT];
    double adv[FB];
} s_fd_t;

// The (row, token) tables below put every active token at least 0.028 in log space from a
// kink (ln 0.8, ln 1.2, ln 1.28, ln 3, k3's clamp at d = -2.61, +-ln 2 for sequence TIS), far
// beyond the largest step 2^-7. logp is a multiple of 2^-12 so logp +- h is exact in float.
static void s_fd_inputs(s_fd_t *x) {
    static const float mask[FB][FT] = {{1, 1, 1, 1, 1, 1},
                                       {0, 0, 1, 1, 1, 0},
                                       {0, 1, 1, 1, 1, 1},
                                       {0, 0, 0, 1, 1, 0},
                                       {0, 0, 0, 0, 0, 0}};
    static const double adv[FB] = {1.3, -0.7, -1.1, 0.4, 0.9};
    // logp - old: rows with A > 0 meet the upper clip (0.21 is inside 1.28, outside 1.2), rows
    // with A < 0 the lower clip and, at 1.3 and 1.6 (ratios 3.7, 5.0), the dual clip
    static const double lr[FB][FT] = {{0.3, 0.1, -0.5, 0.0, 0.21, 0.6},
                                      {0.0, 0.0, -0.9, 1.3, -0.1, 0.0},
                                      {0.0, 1.6, -0.3, 0.6, 0.0, -0.5},
                                      {0.0, 0.0, 0.0, 0.21, -0.3, 0.0},
                                      {0.1, 0.1, 0.1, 0.1, 0.1, 0.1}};
    // old - mu: token weights up to e^0.9 = 2.46 (capped at 2); active row sums 0.1 (kept),
    // 1.6 (dropped), -1.0 (dropped), 0.3 (kept) for sequence TIS with cap 2
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
    const float *adv_tok; // NULL: x's sequence advantages
} s_fd_loss_t;

static double s_fd_loss(void *ctx, const float *logp) {
    const s_fd_loss_t *c = ctx;
    const s_fd_t *x = c->x;
    const float *ref = c->use_ref ? x->ref : NULL;
    const double *adv = c->adv_tok ? NULL : x->adv;
    rl_grpo_batch_t b = {FB, FT, logp, x->old, ref, x->mu, x->mask, adv, c->denom, c->adv_tok};
    rl_grpo_loss_stats_t st = {0};
    float scratch[FB * FT];
    CHECK_INT(rl_grpo_loss(&b, c->alg, scratch, &st), 0);
    return st.loss;
}

static void test_fd_all_knobs(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    const int aggs[3] = {RL_RECIPE_AGG_TOKEN_MEAN, RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN,
                         RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM};
    const double denoms[3] = {20.0, 8.0, 8.0 * 16.0}; // the global batch is larger
    const int tis[3] = {RL_RECIPE_TIS_NONE, RL_RECIPE_TIS_TOKEN, RL_RECIPE_TIS_SEQUENCE};
    const double dual[2] = {0.0, 3.0};
    const double eps_high[2] = {0.2, 0.28};
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
                        alg.dual_clip = dual[id];
                        alg.epsilon_high = eps_high[ie];
                        float g[FB * FT];
                        rl_grpo_batch_t b = {FB,   FT,     x.logp, x.old,     ik ? x.ref : NULL,
                                             x.mu, x.mask, x.adv,  denoms[ia], NULL};
                        rl_grpo_loss_stats_t st = {0};
                        CHECK_INT(rl_grpo_loss(&b, &alg, g, &st), 0);
                        // every branch these inputs are meant to reach is reached
                        CHECK(st.clip_low > 0 && st.clip_high > 0);
                        CHECK(id == 0 || st.dual_clip > 0);
                        CHECK(it != 2 || st.tis_masked == 2.0);
                        s_fd_loss_t c = {&x, &alg, denoms[ia], ik != 0, NULL};
                        rl_fd_cmp_t r =
                            RL_FD_CHECK(s_fd_loss, &c, x.logp, g, FB * FT, 1.0 / 128.0, NULL,
                                        TOL_FD, "agg %d kl %d tis %d dual %g eps_high %g", aggs[ia],
                                        ik, tis[it], dual[id], eps_high[ie]);
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

// old_logp NULL must be exactly old_logp = logp (detached): same loss, same gradient, same
// stats, bit for bit, for every knob combination.
static void test_old_null_is_detached_copy(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    int bad = 0;
    for (int ia = 0; ia < 3; ia++) {
        for (int ik = 0; ik < 4; ik++) {
            for (int it = 0; it < 3; it++) {
                rl_recipe_algorithm_t alg = s_alg();
                alg.loss_agg = ia;
                alg.beta = ik ? 0.3 : 0.0;
                alg.kl_estimator = ik ? ik - 1 : RL_RECIPE_KL_K3;
                alg.tis = it;
                alg.dual_clip = 3.0;
                float g1[FB * FT], g2[FB * FT];
                rl_grpo_batch_t b = {FB, FT, x.logp, NULL, x.ref, x.mu, x.mask, x.adv, 7.0, NULL};
                rl_grpo_loss_stats_t s1 = {0}, s2 = {0};
                CHECK_INT(rl_grpo_loss(&b, &alg, g1, &s1), 0);
                b.old_logp = x.logp;
                CHECK_INT(rl_grpo_loss(&b, &alg, g2, &s2), 0);
                if (memcmp(g1, g2, sizeof(g1)) != 0 || memcmp(&s1, &s2, sizeof(s1)) != 0) {
                    bad++;
                    fprintf(stderr, "old NULL vs copy: agg %d kl %d tis %d: loss %.17g vs %.17g\n",
                            ia, ik, it, s1.loss, s2.loss);
                }
                CHECK(s1.ratio == s1.tokens); // ratio exactly 1
            }
        }
    }
    CHECK_INT(bad, 0);
}

// Micro-batches with the global denom add up to the whole batch: rows {0,1} and {2,3,4}.
static void test_micro_batches(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    for (int ia = 0; ia < 3; ia++) {
        for (int it = 0; it < 3; it++) {
            rl_recipe_algorithm_t alg = s_alg();
            alg.loss_agg = ia;
            alg.beta = 0.04;
            alg.tis = it;
            alg.dual_clip = 3.0;
            alg.epsilon_high = 0.28;
            const double denom = 16.0; // the active tokens of this whole batch
            float g_all[FB * FT], g_mb[FB * FT];
            rl_grpo_batch_t b = {FB, FT, x.logp, x.old, x.ref, x.mu, x.mask, x.adv, denom, NULL};
            rl_grpo_loss_stats_t s_all = {0}, s_mb = {0};
            CHECK_INT(rl_grpo_loss(&b, &alg, g_all, &s_all), 0);
            const int split = 2;
            for (int part = 0; part < 2; part++) {
                int r0 = part ? split : 0, n = part ? FB - split : split;
                size_t o = (size_t)r0 * FT;
                rl_grpo_batch_t m = {n,        FT,         x.logp + o, x.old + o, x.ref + o,
                                     x.mu + o, x.mask + o, x.adv + r0, denom, NULL};
                CHECK_INT(rl_grpo_loss(&m, &alg, g_mb + o, &s_mb), 0);
            }
            CHECK_MSG(fabs(s_all.loss - s_mb.loss) <= 1e-14 * fmax(1, fabs(s_all.loss)),
                      "agg %d tis %d: one batch %.17g, micro-batches %.17g", ia, it, s_all.loss,
                      s_mb.loss);
            CHECK_MSG(memcmp(g_all, g_mb, sizeof(g_all)) == 0, "agg %d tis %d: dlogp differs", ia,
                      it);
            CHECK(s_all.tokens == s_mb.tokens && s_all.clip_low == s_mb.clip_low &&
                  s_all.clip_high == s_mb.clip_high && s_all.dual_clip == s_mb.dual_clip &&
                  s_all.tis_masked == s_mb.tis_masked);
            CHECK_CLOSE(s_all.kl, s_mb.kl, 1e-14);
            CHECK_CLOSE(s_all.ratio, s_mb.ratio, 1e-14);
            CHECK_CLOSE(s_all.tis_weight, s_mb.tis_weight, 1e-14);
            CHECK_CLOSE(s_all.logprob_gap, s_mb.logprob_gap, 1e-14);
        }
    }
}

// ---- PyTorch goldens ---------------------------------------------------------------------------

static const char *s_golden_cases[] = {
    "adv_group_grpo",
    "adv_batch_grpo",
    "adv_none_grpo",
    "adv_group_rloo",
    "adv_batch_rloo",
    "adv_none_rloo",
    "agg_token_mean",
    "agg_seq_mean_token_mean",
    "agg_seq_mean_token_sum_norm",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "clip_higher",
    "dual_clip",
    "tis_token",
    "tis_sequence",
    "old_null",
    "old_null_tis_sequence",
    "no_ref_no_mu",
    "all_knobs",
};

static double s_worst_golden_adv = 0.0;

static void s_golden_advantages(const char *name, json_t *c) {
    int n = (int)rl_golden_num(c, "n_groups"), G = (int)rl_golden_num(c, "G");
    json_t *ja = json_object_get(c, "alg");
    static const char *const scales[] = {"group", "batch", "none"};
    static const char *const modes[] = {"grpo", "rloo"};
    rl_recipe_algorithm_t alg = s_alg();
    // same order as RL_RECIPE_SCALE_*
    alg.scale_rewards = rl_golden_enum(ja, "scale_rewards", scales, 3);
    alg.advantage = rl_golden_enum(ja, "advantage", modes, 2);
    alg.std_eps = rl_golden_num(ja, "std_eps");
    size_t N = (size_t)n * (size_t)G;
    double *r = rl_golden_list(c, "rewards", N), *want = rl_golden_list(c, "adv", N);
    double *got = calloc(N, sizeof(double));
    if (!r || !want || !got) {
        CHECK_MSG(0, "%s: unreadable", name);
        goto done;
    }
    rl_grpo_adv_stats_t st;
    CHECK_INT(rl_grpo_advantages(r, n, G, &alg, got, &st), 0);
    double err = 0.0;
    for (size_t i = 0; i < N; i++) {
        err = fmax(err, fabs(got[i] - want[i]) / fmax(1.0, fabs(want[i])));
        CHECK_MSG(fabs(got[i] - want[i]) <= TOL_EXACT * fmax(1.0, fabs(want[i])),
                  "%s: adv[%zu] %.17g want %.17g", name, i, got[i], want[i]);
    }
    s_worst_golden_adv = fmax(s_worst_golden_adv, err);
    json_t *js = json_object_get(c, "stats");
    CHECK_INT(st.groups, (int)rl_golden_num(js, "groups"));
    CHECK_INT(st.zero_std_groups, (int)rl_golden_num(js, "zero_std_groups"));
    CHECK_INT(st.unscorable, (int)rl_golden_num(js, "unscorable"));
    CHECK_CLOSE(st.reward_mean, rl_golden_num(js, "reward_mean"), TOL_EXACT);
    CHECK_CLOSE(st.reward_std, rl_golden_num(js, "reward_std"), TOL_EXACT);
    fprintf(stderr, "golden %-28s adv max err %.3g\n", name, err);
done:
    free(r);
    free(want);
    free(got);
}

static rl_test_policy_golden_t s_golden_policy = {"loss",   0,   0,  TOL_GOLDEN_LOSS,
                                                  TOL_GRAD, 0.0, 0.0};

static void test_goldens(void) {
    char path[1024];
    json_error_t jerr;
    snprintf(path, sizeof(path), "%s/grpo/index.json", RL_FIXTURES);
    json_t *index = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    CHECK_MSG(index != NULL, "%s: %s", path, jerr.text);
    if (index) {
        fprintf(stderr, "goldens: torch %s\n",
                json_string_value(json_object_get(index, "torch_version")));
        json_decref(index);
    }
    size_t n = sizeof(s_golden_cases) / sizeof(s_golden_cases[0]);
    for (size_t k = 0; k < n; k++) {
        snprintf(path, sizeof(path), "%s/grpo/%s.json", RL_FIXTURES, s_golden_cases[k]);
        json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        CHECK_MSG(c != NULL, "%s: %s", path, jerr.text);
        if (!c) {
            continue;
        }
        const char *kind = json_string_value(json_object_get(c, "kind"));
        if (kind && strcmp(kind, "advantages") == 0) {
            s_golden_advantages(s_golden_cases[k], c);
        } else if (kind && strcmp(kind, "loss") == 0) {
            rl_test_policy_golden(s_golden_cases[k], c, rl_grpo_loss, s_alg(), &s_golden_policy);
        } else {
            CHECK_MSG(0, "%s: unknown kind", path);
        }
        json_decref(c);
    }
    fprintf(stderr,
            "goldens: %zu cases; worst advantage err %.3g, loss rel err %.3g, dlogp %.3g "
            "of max (tolerances %g, %g, %g)\n",
            n, s_worst_golden_adv, s_golden_policy.worst_loss, s_golden_policy.worst_grad,
            TOL_EXACT, TOL_GOLDEN_LOSS, TOL_GRAD);
}

// Per-token advantages (PPO's GAE): adv_tok holding each row's advantage on every token gives
// the sequence-advantage result bit for bit (loss, dlogp, every statistic); and with advantages
// that vary along the row the gradient matches central differences, for every aggregation,
// with and without the dual clip and KL.
static void test_token_advantages(void) {
    s_fd_t x;
    s_fd_inputs(&x);
    float flat[FB * FT], varied[FB * FT];
    for (int b = 0; b < FB; b++) {
        x.adv[b] = (double)(float)x.adv[b]; // per-token advantages are f32: the same values
    }
    for (int b = 0; b < FB; b++) {
        for (int t = 0; t < FT; t++) {
            flat[b * FT + t] = (float)x.adv[b];
            // signs and sizes change along the row, so both clip sides are met per row
            varied[b * FT + t] = (float)(x.adv[b] * (t % 2 ? -1.0 : 1.0) * (0.5 + 0.25 * t));
        }
    }
    const int aggs[3] = {RL_RECIPE_AGG_TOKEN_MEAN, RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN,
                         RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM};
    const double denoms[3] = {20.0, 8.0, 8.0 * 16.0};
    double worst = 0.0;
    for (int ia = 0; ia < 3; ia++) {
        for (int k = 0; k < 4; k++) { // dual clip off/on x beta 0/0.3 (k3)
            rl_recipe_algorithm_t alg = s_alg();
            alg.loss_agg = aggs[ia];
            alg.dual_clip = k & 1 ? 3.0 : 0.0;
            alg.beta = k & 2 ? 0.3 : 0.0;
            alg.kl_estimator = RL_RECIPE_KL_K3;
            float g1[FB * FT], g2[FB * FT];
            rl_grpo_batch_t b1 = {FB, FT, x.logp, x.old, x.ref, x.mu, x.mask, x.adv, denoms[ia],
                                  NULL};
            rl_grpo_batch_t b2 = {FB, FT, x.logp, x.old, x.ref, x.mu, x.mask, NULL, denoms[ia],
                                  flat};
            rl_grpo_loss_stats_t s1 = {0}, s2 = {0};
            CHECK_INT(rl_grpo_loss(&b1, &alg, g1, &s1), 0);
            CHECK_INT(rl_grpo_loss(&b2, &alg, g2, &s2), 0);
            CHECK_MSG(memcmp(g1, g2, sizeof g1) == 0 && memcmp(&s1, &s2, sizeof s1) == 0,
                      "agg %d knobs %d: broadcast per-token advantages differ from the "
                      "sequence ones", aggs[ia], k);
            // varied advantages against central differences
            rl_grpo_batch_t b3 = {FB, FT, x.logp, x.old, x.ref, x.mu, x.mask, NULL, denoms[ia],
                                  varied};
            rl_grpo_loss_stats_t s3 = {0};
            float g3[FB * FT];
            CHECK_INT(rl_grpo_loss(&b3, &alg, g3, &s3), 0);
            s_fd_loss_t c = {&x, &alg, denoms[ia], 1, varied};
            rl_fd_cmp_t r =
                RL_FD_CHECK(s_fd_loss, &c, x.logp, g3, FB * FT, 1.0 / 128.0, NULL, TOL_FD,
                            "agg %d knobs %d: per-token advantages", aggs[ia], k);
            worst = fmax(worst, r.rel);
        }
    }
    fprintf(stderr, "per-token advantages: worst |dlogp - fd| / max|fd| = %.3g\n", worst);
}

int main(void) {
    RL_TEST_RUN(test_advantages_modes);
    RL_TEST_RUN(test_advantages_unscorable);
    RL_TEST_RUN(test_advantages_zero_variance);
    RL_TEST_RUN(test_advantages_einval);
    RL_TEST_RUN(test_overlong);
    RL_TEST_RUN(test_loss_policy_term);
    RL_TEST_RUN(test_loss_kl);
    RL_TEST_RUN(test_loss_tis_token);
    RL_TEST_RUN(test_loss_tis_sequence);
    RL_TEST_RUN(test_loss_aggregation);
    RL_TEST_RUN(test_loss_mask);
    RL_TEST_RUN(test_loss_einval);
    RL_TEST_RUN(test_fd_all_knobs);
    RL_TEST_RUN(test_old_null_is_detached_copy);
    RL_TEST_RUN(test_micro_batches);
    RL_TEST_RUN(test_token_advantages);
    RL_TEST_RUN(test_goldens);
    RL_TEST_DONE();
}

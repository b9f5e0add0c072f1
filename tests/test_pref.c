// test_pref — trainer/rl_pref against three independent answers:
//   hand-computed values: every DPO variant (sigmoid, cDPO, hinge on both sides and at its kink,
//     IPO with its per-token normalisation, RPO's NLL term alone and with IPO), the statistics
//     (ties in the accuracy, the IPO-normalised rewards and logps), the reward model's loss with
//     and without margins and centering, numerically extreme margins, and every RL_EINVAL (with
//     nothing written);
//   central finite differences (Richardson, in double) of every DPO variant x label smoothing x
//     rpo_alpha (IPO's normalisation included) and of the reward-model loss with and without
//     margin and centering: ds / dq must be the derivative of the loss. Micro-batches with the
//     global divisors add up to the whole batch;
//   PyTorch goldens written by tests/reference/make_pref_goldens.py into tests/fixtures/pref/:
//     DPO on per-TOKEN log-probabilities (this test plays the trainer: it sums them into s,
//     calls rl_pref_dpo_loss and broadcasts ds to every masked token, which must equal autograd's
//     dL/dlogp), TRL's metrics, and the reward-model loss and dL/dq (the torch version is
//     printed).
// Not a trainer test: no model, no optimizer, no processes.
#include "rl_err.h"
#include "rl_pref.h"
#include "rl_test.h"
#include "rl_test_fd.h"
#include "rl_test_golden.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- tolerances --------------------------------------------------------------------------------
// rl_pref computes in double and returns double, so:
//   hand values built from dyadic numbers (hinge, IPO, the RPO term) are exact in any order:
//     compared with ==; those with logs and exps (sigmoid, cDPO, the RM) -> 1e-15 relative
//     (a few libm ulps);
//   goldens: torch's float64 logsigmoid against our softplus, and its sums of the token
//     log-probabilities in another order than ours (<= 12 terms of magnitude <= 10) -> 1e-12
//     relative for losses and metrics, 1e-12 of the largest element for gradients (a wrong sign,
//     a missing 1/n or beta moves them by >= 1e-2);
//   finite differences: the losses are smooth where the inputs sit (the hinge is kept >= 0.05
//     from its kink in z); Richardson on steps 2^-6 and 2^-7 leaves O(h^4) ~ 1e-10 of truncation
//     and ~1e-13 of rounding -> 1e-8 of the largest |fd|;
//   micro-batches: per-pair gradients use the same divisors, so they are bitwise equal; summed
//     shares and statistics are added in another order -> 1e-14 relative.
#define TOL_HAND 1e-15
#define TOL_GOLD 1e-12
#define TOL_FD 1e-8
#define TOL_SPLIT 1e-14

#define CHECK_EQ(a, b) CHECK_MSG((a) == (b), "%s = %.17g, want %.17g", #a, (double)(a), (double)(b))

// |a - b| <= tol * max(1, |b|), printing both.
#define CHECK_NEAR(a, b, tol)                                                                      \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol)*fmax(1.0, fabs((double)(b))),               \
              "%s = %.17g, want %.17g (tol %g)", #a, (double)(a), (double)(b), (double)(tol))

static double s_sig(double x) {
    return 1.0 / (1.0 + exp(-x));
}

static rl_pref_dpo_t s_cfg(int type, double beta, double eps, double alpha) {
    rl_pref_dpo_t c = {type, beta, eps, alpha};
    return c;
}

// ---- hand values: DPO --------------------------------------------------------------------------
//
// sigmoid, beta = 1/2, 3 pairs, D = 4 (the global batch has a 4th pair elsewhere):
//   pair 0: s_w -3, r_w -4, s_l -2, r_l -3  ->  a_w = 1, a_l = 1, h = 0, z = 0
//           l = -log sigma(0) = ln 2;  dl/dh = -beta sigma(0) = -1/4  -> ds_w = -1/16, ds_l = 1/16
//   pair 1: s_w -1, r_w -1 - 2 ln 3, s_l = r_l = -5  ->  h = 2 ln 3, z = ln 3, sigma(z) = 3/4
//           l = ln(1 + 1/3) = ln(4/3);  dl/dh = -beta/4 = -1/8  -> ds_w = -1/32, ds_l = 1/32
//   pair 2: s_w -6, r_w -2, s_l = r_l = -1  ->  h = -4, z = -2
//           l = ln(1 + e^2);  dl/dh = -sigma(2)/2  -> ds_w = -sigma(2)/8
//   L = (ln 2 + ln(4/3) + ln(1 + e^2)) / 4
//   rewards beta a: chosen [1/2, ln 3, -2], rejected [1/2, 0, 0]; accuracy: pair 0 is a tie
//   (not counted), pair 1 counts, pair 2 not -> 1; margin 0 + ln 3 - 2; logps -10 / -8; nll 10
// cDPO, eps = 1/4, same pairs: l = 3/4 softplus(-z) + 1/4 softplus(z),
//   dl/dh = beta (-3/4 sigma(-z) + 1/4 sigma(z)):
//   pair 0: l = ln 2, dl/dh = -1/8;  pair 1: sigma(-z) = 1/4, sigma(z) = 3/4: dl/dh = 0 (cDPO's
//   optimum is at sigma(z) = 1 - eps), l = 3/4 ln(4/3) + 1/4 ln 4;
//   pair 2: l = 3/4 ln(1 + e^2) + 1/4 ln(1 + e^-2), dl/dh = (-3/4 sigma(2) + 1/4 sigma(-2)) / 2
static void test_hand_sigmoid(void) {
    const double sw[3] = {-3, -1, -6}, rw[3] = {-4, -1 - 2 * log(3.0), -2};
    const double sl[3] = {-2, -5, -1}, rl[3] = {-3, -5, -1};
    rl_pref_batch_t b = {3, sw, sl, rw, rl, NULL, NULL, 4.0, 0.0};
    rl_pref_dpo_t cfg = s_cfg(RL_PREF_SIGMOID, 0.5, 0.0, 0.0);
    double loss = 0, dw[3], dl[3];
    rl_pref_dpo_stats_t st = {0};
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, &st), 0);
    CHECK_NEAR(loss, (log(2.0) + log(4.0 / 3.0) + log(1.0 + exp(2.0))) / 4.0, TOL_HAND);
    CHECK_NEAR(dw[0], -1.0 / 16, TOL_HAND);
    CHECK_NEAR(dl[0], 1.0 / 16, TOL_HAND);
    CHECK_NEAR(dw[1], -1.0 / 32, TOL_HAND);
    CHECK_NEAR(dl[1], 1.0 / 32, TOL_HAND);
    CHECK_NEAR(dw[2], -s_sig(2.0) / 8, TOL_HAND);
    CHECK_NEAR(dl[2], s_sig(2.0) / 8, TOL_HAND);
    CHECK_EQ(st.pairs, 3.0);
    CHECK_NEAR(st.loss, loss, 0.0);
    CHECK_NEAR(st.reward_chosen, 0.5 + log(3.0) - 2.0, TOL_HAND);
    CHECK_NEAR(st.reward_rejected, 0.5, TOL_HAND);
    CHECK_EQ(st.accuracy, 1.0);
    CHECK_NEAR(st.margin, log(3.0) - 2.0, TOL_HAND);
    CHECK_EQ(st.logp_chosen, -10.0);
    CHECK_EQ(st.logp_rejected, -8.0);
    CHECK_EQ(st.nll, 10.0);

    cfg.label_smoothing = 0.25;
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, NULL), 0);
    double want = log(2.0) + 0.75 * log(4.0 / 3.0) + 0.25 * log(4.0) + 0.75 * log(1.0 + exp(2.0)) +
                  0.25 * log(1.0 + exp(-2.0));
    CHECK_NEAR(loss, want / 4.0, TOL_HAND);
    CHECK_NEAR(dw[0], -1.0 / 32, TOL_HAND);
    CHECK_NEAR(dw[1], 0.0, TOL_HAND);
    CHECK_NEAR(dl[1], 0.0, TOL_HAND);
    CHECK_NEAR(dw[2], (-0.75 * s_sig(2.0) + 0.25 * s_sig(-2.0)) / 8, TOL_HAND);
    CHECK_NEAR(dl[2], (0.75 * s_sig(2.0) - 0.25 * s_sig(-2.0)) / 8, TOL_HAND);
}

// hinge, beta = 1/2, D = 4, h = [1, 2, 4, -2] (a_l = 0) -> z = [1/2, 1, 2, -1]:
//   l = relu(1 - z) = [1/2, 0, 0, 2]; dl/dh = -beta where 1 - z > 0: [-1/2, 0 (z = 1: the kink,
//   torch.relu's 0), 0, -1/2]; ds_w = dl/dh / 4 = [-1/8, 0, 0, -1/8], ds_l = -ds_w; L = 5/8.
static void test_hand_hinge(void) {
    const double sw[4] = {-1, -2, -4, -6}, rw[4] = {-2, -4, -8, -4};
    const double sl[4] = {-3, -3, -3, -3}, rl[4] = {-3, -3, -3, -3};
    rl_pref_batch_t b = {4, sw, sl, rw, rl, NULL, NULL, 4.0, 0.0};
    rl_pref_dpo_t cfg = s_cfg(RL_PREF_HINGE, 0.5, 0.0, 0.0);
    double loss = 0, dw[4], dl[4];
    rl_pref_dpo_stats_t st = {0};
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, &st), 0);
    CHECK_EQ(loss, 0.625);
    const double want[4] = {-0.125, 0.0, 0.0, -0.125};
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(dw[i] == want[i] && dl[i] == -want[i], "hinge pair %d: ds_w %.17g ds_l %.17g", i,
                  dw[i], dl[i]);
    }
    CHECK_EQ(st.accuracy, 3.0);
    CHECK_EQ(st.margin, 0.5 * (1 + 2 + 4 - 2));
    // label smoothing is ignored by hinge (TRL warns and ignores it): the same bits
    double loss2, dw2[4], dl2[4];
    cfg.label_smoothing = 0.3;
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss2, dw2, dl2, NULL), 0);
    CHECK(loss2 == loss && memcmp(dw, dw2, sizeof(dw)) == 0 && memcmp(dl, dl2, sizeof(dl)) == 0);
}

// IPO, beta = 1/2 (1/(2 beta) = 1), D = 2:
//   pair 0: n_w 4, s_w -10, r_w -16 -> a_w = 6/4 = 3/2;  n_l 2, s_l -4, r_l -3 -> a_l = -1/2
//           h = 2, l = (2 - 1)^2 = 1, dl/dh = 2: ds_w = 2 (1/4) / 2 = 1/4,
//           ds_l = -2 (1/2) / 2 = -1/2
//   pair 1: n_w 1, s_w = r_w = -2 -> a_w = 0;  n_l 8, s_l -8, r_l -12 -> a_l = 4/8 = 1/2
//           h = -1/2, l = 9/4, dl/dh = -3: ds_w = -3 / 2 = -3/2, ds_l = 3 (1/8) / 2 = 3/16
//   L = 13/8. Statistics from the normalised values (TRL v0.28.0): rewards chosen beta a_w =
//   [3/4, 0], rejected [-1/4, 1/4]; accuracy 1; margin 1 - 1/4 = 3/4; logps chosen -10/4 - 2 =
//   -9/2, rejected -4/2 - 8/8 = -3; nll (unnormalised) 12.
// IPO + RPO alpha = 1, N = 10 chosen tokens in the global batch: L = 13/8 + 12/10, and -1/10 on
// every ds_w (the NLL is on the raw token log-probabilities, not on the IPO means).
// RPO with sigmoid, beta = 1/2, alpha = 2, D = 4, N = 16, two pairs at h = 0 with s_w -3, -5:
//   L = 2 ln 2 / 4 + 2 * 8 / 16 = ln 2 / 2 + 1;  ds_w = -1/16 - 2/16 = -3/16;  ds_l = 1/16.
static void test_hand_ipo_rpo(void) {
    const double sw[2] = {-10, -2}, rw[2] = {-16, -2}, sl[2] = {-4, -8}, rl[2] = {-3, -12};
    const int nw[2] = {4, 1}, nl[2] = {2, 8};
    rl_pref_batch_t b = {2, sw, sl, rw, rl, nw, nl, 2.0, 0.0};
    rl_pref_dpo_t cfg = s_cfg(RL_PREF_IPO, 0.5, 0.0, 0.0);
    double loss = 0, dw[2], dl[2];
    rl_pref_dpo_stats_t st = {0};
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, &st), 0);
    CHECK_EQ(loss, 1.625);
    CHECK_EQ(dw[0], 0.25);
    CHECK_EQ(dl[0], -0.5);
    CHECK_EQ(dw[1], -1.5);
    CHECK_EQ(dl[1], 0.1875);
    CHECK_EQ(st.reward_chosen, 0.75);
    CHECK_EQ(st.reward_rejected, 0.0);
    CHECK_EQ(st.accuracy, 1.0);
    CHECK_EQ(st.margin, 0.75);
    CHECK_EQ(st.logp_chosen, -4.5);
    CHECK_EQ(st.logp_rejected, -3.0);
    CHECK_EQ(st.nll, 12.0);
    // label smoothing is ignored by IPO: the same bits
    double loss2, dw2[2], dl2[2];
    cfg.label_smoothing = 0.2;
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss2, dw2, dl2, NULL), 0);
    CHECK(loss2 == loss && memcmp(dw, dw2, sizeof(dw)) == 0 && memcmp(dl, dl2, sizeof(dl)) == 0);

    cfg.rpo_alpha = 1.0;
    b.nll_denom = 10.0;
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, NULL), 0);
    CHECK_NEAR(loss, 1.625 + 1.2, TOL_HAND);
    CHECK_NEAR(dw[0], 0.25 - 0.1, TOL_HAND);
    CHECK_NEAR(dw[1], -1.5 - 0.1, TOL_HAND);
    CHECK_EQ(dl[0], -0.5); // the NLL is on the chosen completion only
    CHECK_EQ(dl[1], 0.1875);

    const double sw2[2] = {-3, -5}, rw2[2] = {-4, -6}, sl2[2] = {-2, -1}, rl2[2] = {-3, -2};
    rl_pref_batch_t b2 = {2, sw2, sl2, rw2, rl2, NULL, NULL, 4.0, 16.0};
    rl_pref_dpo_t c2 = s_cfg(RL_PREF_SIGMOID, 0.5, 0.0, 2.0);
    CHECK_INT(rl_pref_dpo_loss(&b2, &c2, &loss, dw, dl, NULL), 0);
    CHECK_NEAR(loss, log(2.0) / 2 + 1.0, TOL_HAND);
    CHECK_NEAR(dw[0], -3.0 / 16, TOL_HAND);
    CHECK_NEAR(dw[1], -3.0 / 16, TOL_HAND);
    CHECK_NEAR(dl[0], 1.0 / 16, TOL_HAND);
    // rpo_alpha 0: nll_denom is not read (any value, NaN included)
    c2.rpo_alpha = 0.0;
    b2.nll_denom = NAN;
    CHECK_INT(rl_pref_dpo_loss(&b2, &c2, &loss, dw, dl, NULL), 0);
    CHECK_NEAR(loss, log(2.0) / 2, TOL_HAND);
    CHECK_NEAR(dw[0], -1.0 / 16, TOL_HAND);
}

// Numerically extreme margins: z = +-1000 must give 0 / 1000 (not inf or NaN), gradients 0 /
// -beta; an empty completion (s = 0, no tokens) is a valid sigmoid input.
static void test_hand_extremes(void) {
    const double sw[3] = {0, -1000, 0}, rw[3] = {-1000, 0, 0}, sl[3] = {0, 0, -2},
                 rl[3] = {0, 0, -1};
    const int nw[3] = {0, 0, 0}; // counts are not read by sigmoid
    rl_pref_batch_t b = {3, sw, sl, rw, rl, nw, nw, 1.0, 0.0};
    rl_pref_dpo_t cfg = s_cfg(RL_PREF_SIGMOID, 1.0, 0.0, 0.0);
    double loss = 0, dw[3], dl[3];
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, NULL), 0);
    // pair 0: z = 1000: l = 0, pair 1: z = -1000: l = 1000, pair 2: z = 1: l = ln(1 + e^-1)
    CHECK_NEAR(loss, 1000.0 + log1p(exp(-1.0)), TOL_HAND);
    CHECK_EQ(dw[0], 0.0);
    CHECK_EQ(dw[1], -1.0);
    CHECK_EQ(dl[1], 1.0);
    CHECK_NEAR(dw[2], -s_sig(-1.0), TOL_HAND);
    // cDPO at z = +-1000: the smoothing term makes the far side cost eps * 1000
    cfg.label_smoothing = 0.1;
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, NULL), 0);
    CHECK_NEAR(loss, 0.1 * 1000 + 0.9 * 1000 + 0.9 * log1p(exp(-1.0)) + 0.1 * log1p(exp(1.0)),
               TOL_HAND);
    CHECK_NEAR(dw[0], 0.1, TOL_HAND);
    CHECK_NEAR(dw[1], -0.9, TOL_HAND);
}

// ---- hand values: the reward model -------------------------------------------------------------
//
// D = 4. pair 0: q_w = q_l = 1/2 -> x = 0: l = ln 2, dq_w = -1/2 / 4 = -1/8, dq_l = 1/8
//        pair 1: q_w 2, q_l -1 -> x = 3: l = ln(1 + e^-3), dq_w = -sigma(-3)/4, dq_l = sigma(-3)/4
//   accuracy 1 (pair 0 is a tie), margin 3, chosen 5/2, rejected -1/2
// margins [1, 3]: x = [-1, 0]: l = ln(1 + e) + ln 2; dq_w = [-sigma(1), -1/2] / 4; the accuracy
//   and margin statistics do not change (TRL's margin metric leaves the margin column out)
// centering c = 1/4, no margins: both pairs have q_w + q_l = 1: + 1/4 each, d = 2 c 1 = 1/2:
//   dq_w = [(-1/2 + 1/2) / 4, (-sigma(-3) + 1/2) / 4] = [0, ...], dq_l = [1/4, (sigma(-3) + 1/2)/4]
static void test_hand_rm(void) {
    const double qw[2] = {0.5, 2.0}, ql[2] = {0.5, -1.0}, m[2] = {1.0, 3.0};
    rl_pref_rm_batch_t b = {2, qw, ql, NULL, 4.0};
    double loss = 0, dw[2], dl[2];
    rl_pref_rm_stats_t st = {0};
    CHECK_INT(rl_pref_rm_loss(&b, 0.0, &loss, dw, dl, &st), 0);
    CHECK_NEAR(loss, (log(2.0) + log1p(exp(-3.0))) / 4, TOL_HAND);
    CHECK_NEAR(dw[0], -0.125, TOL_HAND);
    CHECK_NEAR(dl[0], 0.125, TOL_HAND);
    CHECK_NEAR(dw[1], -s_sig(-3.0) / 4, TOL_HAND);
    CHECK_NEAR(dl[1], s_sig(-3.0) / 4, TOL_HAND);
    CHECK_EQ(st.pairs, 2.0);
    CHECK_EQ(st.accuracy, 1.0);
    CHECK_EQ(st.margin, 3.0);
    CHECK_EQ(st.chosen, 2.5);
    CHECK_EQ(st.rejected, -0.5);
    CHECK_EQ(st.loss, loss);

    b.margin = m;
    rl_pref_rm_stats_t sm = {0};
    CHECK_INT(rl_pref_rm_loss(&b, 0.0, &loss, dw, dl, &sm), 0);
    CHECK_NEAR(loss, (log1p(exp(1.0)) + log(2.0)) / 4, TOL_HAND);
    CHECK_NEAR(dw[0], -s_sig(1.0) / 4, TOL_HAND);
    CHECK_NEAR(dw[1], -0.125, TOL_HAND);
    CHECK_NEAR(dl[1], 0.125, TOL_HAND);
    CHECK(sm.accuracy == 1.0 && sm.margin == 3.0);

    b.margin = NULL;
    CHECK_INT(rl_pref_rm_loss(&b, 0.25, &loss, dw, dl, NULL), 0);
    CHECK_NEAR(loss, (log(2.0) + log1p(exp(-3.0)) + 0.5) / 4, TOL_HAND);
    CHECK_NEAR(dw[0], 0.0, TOL_HAND);
    CHECK_NEAR(dl[0], 0.25, TOL_HAND);
    CHECK_NEAR(dw[1], (-s_sig(-3.0) + 0.5) / 4, TOL_HAND);
    CHECK_NEAR(dl[1], (s_sig(-3.0) + 0.5) / 4, TOL_HAND);

    // x = +-800: no overflow, l = 0 / 800, gradients 0 / -1
    const double qw2[2] = {400, -400}, ql2[2] = {-400, 400};
    rl_pref_rm_batch_t b2 = {2, qw2, ql2, NULL, 1.0};
    CHECK_INT(rl_pref_rm_loss(&b2, 0.0, &loss, dw, dl, NULL), 0);
    CHECK_EQ(loss, 800.0);
    CHECK_EQ(dw[0], 0.0);
    CHECK_EQ(dw[1], -1.0);
    CHECK_EQ(dl[1], 1.0);
}

// ---- RL_EINVAL ---------------------------------------------------------------------------------

static double s_dw[2], s_dl[2], s_loss;
static rl_pref_dpo_stats_t s_st;

static void s_poison(void) {
    s_dw[0] = s_dw[1] = s_dl[0] = s_dl[1] = s_loss = 9.0;
    s_st.loss = s_st.pairs = s_st.nll = 9.0;
}

static int s_untouched(void) {
    return s_dw[0] == 9.0 && s_dw[1] == 9.0 && s_dl[0] == 9.0 && s_dl[1] == 9.0 && s_loss == 9.0 &&
           s_st.loss == 9.0 && s_st.pairs == 9.0 && s_st.nll == 9.0;
}

// One refused call: RL_EINVAL and nothing written.
static void s_dpo_bad(const char *what, const rl_pref_batch_t *b, const rl_pref_dpo_t *c) {
    s_poison();
    int rc = rl_pref_dpo_loss(b, c, &s_loss, s_dw, s_dl, &s_st);
    CHECK_MSG(rc == RL_EINVAL && s_untouched(), "dpo %s: rc %d (want RL_EINVAL), written %d", what,
              rc, !s_untouched());
}

static void test_dpo_einval(void) {
    double sw[2] = {-3, -4}, sl[2] = {-5, -6}, rw[2] = {-3.5, -4}, rl[2] = {-5, -5.5};
    int nw[2] = {3, 4}, nl[2] = {5, 6};
    const rl_pref_batch_t good = {2, sw, sl, rw, rl, nw, nl, 4.0, 20.0};
    const rl_pref_dpo_t gc = s_cfg(RL_PREF_IPO, 0.1, 0.1, 1.0);
    s_poison();
    CHECK_INT(rl_pref_dpo_loss(&good, &gc, &s_loss, s_dw, s_dl, &s_st), 0); // the baseline is valid
    CHECK(s_loss != 9.0 && s_st.pairs == 11.0);

    rl_pref_batch_t b;
    rl_pref_dpo_t c;
    s_dpo_bad("NULL b", NULL, &gc);
    s_dpo_bad("NULL cfg", &good, NULL);
    s_poison();
    CHECK_INT(rl_pref_dpo_loss(&good, &gc, &s_loss, NULL, s_dl, &s_st), RL_EINVAL);
    CHECK_INT(rl_pref_dpo_loss(&good, &gc, &s_loss, s_dw, NULL, &s_st), RL_EINVAL);
    CHECK(s_untouched());
#define BAD_B(field, value)                                                                        \
    do {                                                                                           \
        b = good;                                                                                  \
        b.field = value;                                                                           \
        s_dpo_bad(#field " = " #value, &b, &gc);                                                   \
    } while (0)
#define BAD_C(field, value)                                                                        \
    do {                                                                                           \
        c = gc;                                                                                    \
        c.field = value;                                                                           \
        s_dpo_bad(#field " = " #value, &good, &c);                                                 \
    } while (0)
    BAD_B(s_w, NULL);
    BAD_B(s_l, NULL);
    BAD_B(r_w, NULL);
    BAD_B(r_l, NULL);
    BAD_B(n_w, NULL); // IPO needs the counts
    BAD_B(n_l, NULL);
    BAD_B(n, 0);
    BAD_B(n, -1);
    BAD_B(denom, 0.0);
    BAD_B(denom, -2.0);
    BAD_B(denom, NAN);
    BAD_B(denom, INFINITY);
    BAD_B(nll_denom, 0.0); // with rpo_alpha > 0
    BAD_B(nll_denom, -1.0);
    BAD_B(nll_denom, NAN);
    BAD_B(nll_denom, INFINITY);
    BAD_C(loss_type, 3);
    BAD_C(loss_type, -1);
    BAD_C(beta, 0.0);
    BAD_C(beta, -0.1);
    BAD_C(beta, NAN);
    BAD_C(beta, INFINITY);
    BAD_C(label_smoothing, -0.01);
    BAD_C(label_smoothing, 0.5);
    BAD_C(label_smoothing, NAN);
    BAD_C(rpo_alpha, -0.5);
    BAD_C(rpo_alpha, NAN);
    BAD_C(rpo_alpha, INFINITY);
#undef BAD_B
#undef BAD_C
    // non-finite inputs, one at a time, in the last pair (pass 1 must not write the first)
    double *arrs[4] = {sw, sl, rw, rl};
    const char *names[4] = {"s_w", "s_l", "r_w", "r_l"};
    const double bads[3] = {NAN, INFINITY, -INFINITY};
    for (int a = 0; a < 4; a++) {
        for (int k = 0; k < 3; k++) {
            double keep = arrs[a][1];
            arrs[a][1] = bads[k];
            char what[64];
            snprintf(what, sizeof(what), "%s[1] = %g", names[a], bads[k]);
            s_dpo_bad(what, &good, &gc);
            arrs[a][1] = keep;
        }
    }
    // IPO token counts < 1
    nw[1] = 0;
    s_dpo_bad("IPO n_w[1] = 0", &good, &gc);
    nw[1] = 4;
    nl[1] = -1;
    s_dpo_bad("IPO n_l[1] = -1", &good, &gc);
    nl[1] = 6;
    // a loss that overflows: IPO with h ~ 1e200 squares to inf; a nll sum that overflows
    sw[1] = 1e200;
    rw[1] = -1e200;
    s_dpo_bad("IPO h^2 overflows", &good, &gc);
    sw[0] = sw[1] = -1.7e308;
    rw[0] = rw[1] = -1.7e308;
    c = gc;
    c.loss_type = RL_PREF_SIGMOID;
    s_dpo_bad("nll overflows", &good, &c);
    sw[0] = -3;
    sw[1] = -4;
    rw[0] = -3.5;
    rw[1] = -4;
    // what is valid: hinge / sigmoid without counts (and with counts of 0), label smoothing just
    // below 0.5, rpo 0 with a bad nll_denom, loss and stats NULL
    b = good;
    b.n_w = b.n_l = NULL;
    b.nll_denom = NAN;
    c = s_cfg(RL_PREF_HINGE, 0.1, 0.4999, 0.0);
    CHECK_INT(rl_pref_dpo_loss(&b, &c, NULL, s_dw, s_dl, NULL), 0);
    c.loss_type = RL_PREF_SIGMOID;
    CHECK_INT(rl_pref_dpo_loss(&b, &c, NULL, s_dw, s_dl, NULL), 0);
}

static void test_rm_einval(void) {
    double qw[2] = {1, 2}, ql[2] = {0, 3}, m[2] = {0.5, 0.5};
    const rl_pref_rm_batch_t good = {2, qw, ql, m, 4.0};
    double dw[2], dl[2], loss;
    rl_pref_rm_stats_t st;
#define RM_BAD(what, bp, c, dwp, dlp)                                                              \
    do {                                                                                           \
        dw[0] = dw[1] = dl[0] = dl[1] = loss = 9.0;                                                \
        st.loss = st.pairs = st.margin = 9.0;                                                      \
        int rc_ = rl_pref_rm_loss(bp, c, &loss, dwp, dlp, &st);                                    \
        int kept_ = dw[0] == 9.0 && dw[1] == 9.0 && dl[0] == 9.0 && dl[1] == 9.0 && loss == 9.0 && \
                    st.loss == 9.0 && st.pairs == 9.0 && st.margin == 9.0;                         \
        CHECK_MSG(rc_ == RL_EINVAL && kept_, "rm %s: rc %d, untouched %d", what, rc_, kept_);      \
    } while (0)
    rl_pref_rm_batch_t b;
    RM_BAD("NULL b", NULL, 0.0, dw, dl);
    RM_BAD("NULL dq_w", &good, 0.0, NULL, dl);
    RM_BAD("NULL dq_l", &good, 0.0, dw, NULL);
    b = good;
    b.q_w = NULL;
    RM_BAD("NULL q_w", &b, 0.0, dw, dl);
    b = good;
    b.q_l = NULL;
    RM_BAD("NULL q_l", &b, 0.0, dw, dl);
    b = good;
    b.n = 0;
    RM_BAD("n 0", &b, 0.0, dw, dl);
    const double denoms[4] = {0.0, -1.0, NAN, INFINITY};
    for (int k = 0; k < 4; k++) {
        b = good;
        b.denom = denoms[k];
        RM_BAD("bad denom", &b, 0.0, dw, dl);
    }
    RM_BAD("center < 0", &good, -0.01, dw, dl);
    RM_BAD("center NaN", &good, NAN, dw, dl);
    RM_BAD("center inf", &good, INFINITY, dw, dl);
    const double bads[3] = {NAN, INFINITY, -INFINITY};
    double *arrs[3] = {qw, ql, m};
    for (int a = 0; a < 3; a++) {
        for (int k = 0; k < 3; k++) {
            double keep = arrs[a][1];
            arrs[a][1] = bads[k];
            RM_BAD("non-finite input", &good, 0.1, dw, dl);
            arrs[a][1] = keep;
        }
    }
    qw[1] = 1e200; // centering squares 1e200: inf
    RM_BAD("centering overflows", &good, 1.0, dw, dl);
    qw[1] = 2;
#undef RM_BAD
    CHECK_INT(rl_pref_rm_loss(&good, 0.0, NULL, dw, dl, NULL), 0);
}

// ---- finite differences ------------------------------------------------------------------------
//
// Seven pairs of summed log-probabilities of realistic size (tens of nats, the policy a few nats
// from the reference); token counts 1..23. With beta = 0.1 their z = beta h stay >= 0.05 from the
// hinge's kink at 1 (checked), and both sides of it are met.
enum { FN = 7 };
static const double f_sw[FN] = {-23.25, -41.5, -7.75, -12.125, -60.0, -3.5, -18.0};
static const double f_rw[FN] = {-25.0, -38.0, -9.5, -12.0, -73.5, -3.0, -18.75};
static const double f_sl[FN] = {-30.5, -22.0, -15.25, -9.0, -48.0, -6.0, -20.5};
static const double f_rl[FN] = {-28.0, -23.5, -10.0, -9.875, -49.25, -6.5, -9.0};
static const int f_nw[FN] = {9, 17, 3, 5, 23, 1, 8};
static const int f_nl[FN] = {12, 8, 6, 4, 19, 2, 11};

static double s_dpo_l(const double *sw, const double *sl, const int *nw, const int *nl, int n,
                      const rl_pref_dpo_t *c, double D, double N, double *dw, double *dl) {
    rl_pref_batch_t b = {n, sw, sl, f_rw, f_rl, nw, nl, D, N};
    double loss = NAN, gw[FN], gl[FN];
    int rc = rl_pref_dpo_loss(&b, c, &loss, dw ? dw : gw, dl ? dl : gl, NULL);
    CHECK_INT(rc, 0);
    return loss;
}

// The DPO loss at x = (s_w, s_l), 2 FN numbers (an rl_fd_fn_d; ctx: s_dpo_fd_t).
typedef struct {
    const rl_pref_dpo_t *c;
    double D, N;
} s_dpo_fd_t;

static double s_dpo_fd(void *ctx, const double *x) {
    const s_dpo_fd_t *k = ctx;
    return s_dpo_l(x, x + FN, f_nw, f_nl, FN, k->c, k->D, k->N, NULL, NULL);
}

static void test_dpo_fd(void) {
    const int types[3] = {RL_PREF_SIGMOID, RL_PREF_HINGE, RL_PREF_IPO};
    const char *tnames[3] = {"sigmoid", "hinge", "ipo"};
    const double epss[2] = {0.0, 0.2}, alphas[2] = {0.0, 0.8};
    const double D = 10.0, N = 120.0; // the global batch is larger than these 7 pairs
    // the hinge's inputs are away from the kink and on both sides of it
    int above = 0, below = 0;
    for (int i = 0; i < FN; i++) {
        double z = 0.1 * ((f_sw[i] - f_rw[i]) - (f_sl[i] - f_rl[i]));
        CHECK_MSG(fabs(1.0 - z) >= 0.05, "fd pair %d: z = %g is near the hinge", i, z);
        above += z > 1.0;
        below += z < 1.0;
    }
    CHECK_MSG(above >= 2 && below >= 2, "hinge sides: %d above, %d below", above, below);
    double worst = 0.0;
    int combos = 0;
    for (int t = 0; t < 3; t++) {
        for (int e = 0; e < 2; e++) {
            for (int a = 0; a < 2; a++) {
                rl_pref_dpo_t c = s_cfg(types[t], 0.1, epss[e], alphas[a]);
                double x[2 * FN], g[2 * FN]; // (s_w, s_l) and (ds_w, ds_l)
                memcpy(x, f_sw, sizeof(f_sw));
                memcpy(x + FN, f_sl, sizeof(f_sl));
                s_dpo_l(x, x + FN, f_nw, f_nl, FN, &c, D, N, g, g + FN);
                s_dpo_fd_t k = {&c, D, N};
                rl_fd_cmp_t r = RL_FD_CHECK_D(s_dpo_fd, &k, x, g, 2 * FN, 1.0 / 64.0, NULL, TOL_FD,
                                              "dpo fd %s eps %g alpha %g (x = s_w, s_l)", tnames[t],
                                              epss[e], alphas[a]);
                CHECK_MSG(r.max_fd > 0.0, "dpo fd %s eps %g alpha %g: the loss is flat", tnames[t],
                          epss[e], alphas[a]);
                worst = fmax(worst, r.rel);
                combos++;
            }
        }
    }
    fprintf(stderr,
            "dpo finite differences: %d combinations, worst |ds - fd| / max|fd| = %.3g "
            "(tolerance %g)\n",
            combos, worst, TOL_FD);
    CHECK_INT(combos, 12);
}

static double s_rm_l(const double *qw, const double *ql, const double *m, double c, double *dw,
                     double *dl) {
    rl_pref_rm_batch_t b = {FN, qw, ql, m, 9.0};
    double loss = NAN, gw[FN], gl[FN];
    CHECK_INT(rl_pref_rm_loss(&b, c, &loss, dw ? dw : gw, dl ? dl : gl, NULL), 0);
    return loss;
}

// The reward model's loss at x = (q_w, q_l), 2 FN numbers (an rl_fd_fn_d; ctx: s_rm_fd_t).
typedef struct {
    const double *m;
    double center;
} s_rm_fd_t;

static double s_rm_fd(void *ctx, const double *x) {
    const s_rm_fd_t *k = ctx;
    return s_rm_l(x, x + FN, k->m, k->center, NULL, NULL);
}

static void test_rm_fd(void) {
    static const double q_w[FN] = {1.25, -0.5, 3.0, 0.75, -2.0, 0.125, 4.5};
    static const double q_l[FN] = {0.5, 1.5, -1.25, 0.75, -3.5, 2.0, 1.0};
    static const double marg[FN] = {0.5, 0.0, 2.0, 1.0, 0.25, 0.75, 3.0};
    const double centers[2] = {0.0, 0.05};
    double worst = 0.0;
    int combos = 0;
    for (int wm = 0; wm < 2; wm++) {
        for (int k = 0; k < 2; k++) {
            const double *m = wm ? marg : NULL;
            double x[2 * FN], g[2 * FN]; // (q_w, q_l) and (dq_w, dq_l)
            memcpy(x, q_w, sizeof(q_w));
            memcpy(x + FN, q_l, sizeof(q_l));
            s_rm_l(x, x + FN, m, centers[k], g, g + FN);
            s_rm_fd_t c = {m, centers[k]};
            rl_fd_cmp_t r =
                RL_FD_CHECK_D(s_rm_fd, &c, x, g, 2 * FN, 1.0 / 64.0, NULL, TOL_FD,
                              "rm fd margin %d center %g (x = q_w, q_l)", wm, centers[k]);
            CHECK_MSG(r.max_fd > 0.0, "rm fd margin %d center %g: the loss is flat", wm,
                      centers[k]);
            worst = fmax(worst, r.rel);
            combos++;
        }
    }
    fprintf(stderr,
            "rm finite differences: %d combinations, worst |dq - fd| / max|fd| = %.3g "
            "(tolerance %g)\n",
            combos, worst, TOL_FD);
    CHECK_INT(combos, 4);
}

// ---- micro-batches -----------------------------------------------------------------------------
//
// The 7 pairs as micro-batches of 3, 3 and 1 with the global divisors (D = 7 pairs, N = the 7
// chosen completions' tokens) against one call on all 7: shares add up to the whole loss, and the
// per-pair gradients are the same numbers.
static void test_micro_batches(void) {
    const int types[3] = {RL_PREF_SIGMOID, RL_PREF_HINGE, RL_PREF_IPO};
    const int cut[4] = {0, 3, 6, FN};
    double N = 0.0;
    for (int i = 0; i < FN; i++) {
        N += f_nw[i];
    }
    for (int t = 0; t < 3; t++) {
        rl_pref_dpo_t c = s_cfg(types[t], 0.1, 0.15, 0.6);
        rl_pref_batch_t all = {FN, f_sw, f_sl, f_rw, f_rl, f_nw, f_nl, FN, N};
        double whole, gw[FN], gl[FN];
        rl_pref_dpo_stats_t sw = {0}, sp = {0};
        CHECK_INT(rl_pref_dpo_loss(&all, &c, &whole, gw, gl, &sw), 0);
        double sum = 0.0, pw[FN], pl[FN];
        for (int k = 0; k < 3; k++) {
            const int o = cut[k];
            rl_pref_batch_t mb = {cut[k + 1] - o, f_sw + o, f_sl + o, f_rw + o, f_rl + o,
                                  f_nw + o,       f_nl + o, FN,       N};
            double part;
            CHECK_INT(rl_pref_dpo_loss(&mb, &c, &part, pw + o, pl + o, &sp), 0);
            sum += part;
        }
        CHECK_NEAR(sum, whole, TOL_SPLIT);
        CHECK_NEAR(sp.loss, whole, TOL_SPLIT);
        CHECK_MSG(memcmp(pw, gw, sizeof(gw)) == 0 && memcmp(pl, gl, sizeof(gl)) == 0,
                  "type %d: micro-batch gradients differ from the whole batch's", types[t]);
        CHECK_EQ(sp.pairs, (double)FN);
        CHECK_NEAR(sp.reward_chosen, sw.reward_chosen, TOL_SPLIT);
        CHECK_NEAR(sp.reward_rejected, sw.reward_rejected, TOL_SPLIT);
        CHECK_EQ(sp.accuracy, sw.accuracy);
        CHECK_NEAR(sp.margin, sw.margin, TOL_SPLIT);
        CHECK_NEAR(sp.logp_chosen, sw.logp_chosen, TOL_SPLIT);
        CHECK_NEAR(sp.logp_rejected, sw.logp_rejected, TOL_SPLIT);
        CHECK_NEAR(sp.nll, sw.nll, TOL_SPLIT);
    }
    // the reward model
    static const double qw[FN] = {1.25, -0.5, 3.0, 0.75, -2.0, 0.125, 4.5};
    static const double ql[FN] = {0.5, 1.5, -1.25, 0.75, -3.5, 2.0, 1.0};
    static const double m[FN] = {0.5, 0.0, 2.0, 1.0, 0.25, 0.75, 3.0};
    rl_pref_rm_batch_t all = {FN, qw, ql, m, FN};
    double whole, gw[FN], gl[FN], pw[FN], pl[FN], sum = 0.0;
    rl_pref_rm_stats_t sw = {0}, sp = {0};
    CHECK_INT(rl_pref_rm_loss(&all, 0.05, &whole, gw, gl, &sw), 0);
    for (int k = 0; k < 3; k++) {
        const int o = cut[k];
        rl_pref_rm_batch_t mb = {cut[k + 1] - o, qw + o, ql + o, m + o, FN};
        double part;
        CHECK_INT(rl_pref_rm_loss(&mb, 0.05, &part, pw + o, pl + o, &sp), 0);
        sum += part;
    }
    CHECK_NEAR(sum, whole, TOL_SPLIT);
    CHECK_NEAR(sp.loss, whole, TOL_SPLIT);
    CHECK(memcmp(pw, gw, sizeof(gw)) == 0 && memcmp(pl, gl, sizeof(gl)) == 0);
    CHECK(sp.pairs == FN && sp.accuracy == sw.accuracy);
    CHECK_NEAR(sp.margin, sw.margin, TOL_SPLIT);
    CHECK_NEAR(sp.chosen, sw.chosen, TOL_SPLIT);
    CHECK_NEAR(sp.rejected, sw.rejected, TOL_SPLIT);
}

// ---- PyTorch goldens ---------------------------------------------------------------------------

static const char *const s_types[] = {"sigmoid", "hinge", "ipo"};
static double s_worst_loss = 0.0, s_worst_grad = 0.0, s_worst_metric = 0.0;

// |got - want| / max(1, |want|), reported and tracked.
static void s_cmp_num(const char *name, const char *what, double got, double want) {
    double e = fabs(got - want) / fmax(1.0, fabs(want));
    CHECK_MSG(e <= TOL_GOLD, "%s: %s %.17g want %.17g (rel %.3g)", name, what, got, want, e);
    s_worst_metric = fmax(s_worst_metric, isnan(e) ? INFINITY : e);
}

// Gradient arrays against autograd's, relative to the largest |want| element.
static double s_cmp_grad(const char *name, const char *what, const double *got, const double *want,
                         size_t n) {
    double mx = 0.0, err = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(want[i]));
    }
    int shown = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / fmax(mx, 1e-300);
        if (!(e <= TOL_GOLD) && shown++ < 5) {
            fprintf(stderr, "  %s: %s[%zu] %.17g want %.17g\n", name, what, i, got[i], want[i]);
        }
        err = isnan(e) ? INFINITY : fmax(err, e);
    }
    CHECK_MSG(err <= TOL_GOLD, "%s: %s differs by %.3g of max %.3g (tol %g)", name, what, err, mx,
              TOL_GOLD);
    return err;
}

// The trainer's side: s = sum of the masked token log-probabilities in double; then the
// broadcast of ds to every masked token (0 elsewhere).
static void s_golden_dpo(const char *name, json_t *c) {
    const int n = (int)rl_golden_num(c, "n"), T = (int)rl_golden_num(c, "T");
    const size_t NT = (size_t)n * (size_t)T;
    float *mw = rl_golden_listf(c, "mask_w", NT, NULL),
          *ml = rl_golden_listf(c, "mask_l", NT, NULL);
    // masked positions come back as NaN: a sum that reads one shows
    float *lw = rl_golden_listf(c, "logp_w", NT, mw), *ll = rl_golden_listf(c, "logp_l", NT, ml);
    float *rw = rl_golden_listf(c, "ref_w", NT, mw), *rl = rl_golden_listf(c, "ref_l", NT, ml);
    double *want_w = rl_golden_list(c, "dlogp_w", NT), *want_l = rl_golden_list(c, "dlogp_l", NT);
    double *nwd = rl_golden_list(c, "n_w", (size_t)n), *nld = rl_golden_list(c, "n_l", (size_t)n);
    double *buf = calloc((size_t)n * 6 + NT * 2, sizeof(double));
    int *cnt = calloc((size_t)n * 2, sizeof(int));
    if (!mw || !ml || !lw || !ll || !rw || !rl || !want_w || !want_l || !nwd || !nld || !buf ||
        !cnt) {
        CHECK_MSG(0, "%s: unreadable", name);
        goto done;
    }
    double *sw = buf, *sl = sw + n, *srw = sl + n, *srl = srw + n, *dw = srl + n, *dl = dw + n;
    double *gw = dl + n, *gl = gw + NT;
    int *nw = cnt, *nl = cnt + n;
    for (int i = 0; i < n; i++) {
        int kw = 0, kl = 0;
        for (int t = 0; t < T; t++) {
            const size_t j = (size_t)i * (size_t)T + (size_t)t;
            if (mw[j] != 0.0f) {
                sw[i] += lw[j];
                srw[i] += rw[j];
                kw++;
            }
            if (ml[j] != 0.0f) {
                sl[i] += ll[j];
                srl[i] += rl[j];
                kl++;
            }
        }
        nw[i] = kw;
        nl[i] = kl;
        CHECK_MSG(kw == (int)nwd[i] && kl == (int)nld[i], "%s: pair %d counts %d/%d vs %g/%g", name,
                  i, kw, kl, nwd[i], nld[i]);
    }
    rl_pref_batch_t b = {
        n, sw, sl, srw, srl, nw, nl, rl_golden_num(c, "denom"), rl_golden_num(c, "nll_denom")};
    rl_pref_dpo_t cfg = {rl_golden_enum(c, "loss_type", s_types, 3), rl_golden_num(c, "beta"),
                         rl_golden_num(c, "label_smoothing"), rl_golden_num(c, "rpo_alpha")};
    double loss = NAN;
    rl_pref_dpo_stats_t st = {0};
    CHECK_INT(rl_pref_dpo_loss(&b, &cfg, &loss, dw, dl, &st), 0);
    for (int i = 0; i < n; i++) {
        for (int t = 0; t < T; t++) {
            const size_t j = (size_t)i * (size_t)T + (size_t)t;
            gw[j] = mw[j] != 0.0f ? dw[i] : 0.0;
            gl[j] = ml[j] != 0.0f ? dl[i] : 0.0;
        }
    }
    const double wl = rl_golden_num(c, "loss");
    const double lerr = fabs(loss - wl) / fmax(fabs(wl), 1e-300);
    CHECK_MSG(lerr <= TOL_GOLD, "%s: loss %.17g want %.17g", name, loss, wl);
    double gerr = fmax(s_cmp_grad(name, "dlogp_w", gw, want_w, NT),
                       s_cmp_grad(name, "dlogp_l", gl, want_l, NT));
    json_t *m = json_object_get(c, "metrics");
    const double P = st.pairs;
    s_cmp_num(name, "rewards/chosen", st.reward_chosen / P, rl_golden_num(m, "rewards/chosen"));
    s_cmp_num(name, "rewards/rejected", st.reward_rejected / P,
              rl_golden_num(m, "rewards/rejected"));
    s_cmp_num(name, "rewards/accuracies", st.accuracy / P, rl_golden_num(m, "rewards/accuracies"));
    s_cmp_num(name, "rewards/margins", st.margin / P, rl_golden_num(m, "rewards/margins"));
    s_cmp_num(name, "logps/chosen", st.logp_chosen / P, rl_golden_num(m, "logps/chosen"));
    s_cmp_num(name, "logps/rejected", st.logp_rejected / P, rl_golden_num(m, "logps/rejected"));
    s_cmp_num(name, "nll_loss", st.nll / b.nll_denom, rl_golden_num(m, "nll_loss"));
    s_cmp_num(name, "stats.loss", st.loss, loss);
    s_worst_loss = fmax(s_worst_loss, lerr);
    s_worst_grad = fmax(s_worst_grad, gerr);
    fprintf(stderr,
            "golden %-18s loss rel err %.3g, dlogp %.3g of max (%s, beta %g, eps %g, "
            "alpha %g, accuracy %g/%g)\n",
            name, lerr, gerr, s_types[cfg.loss_type], cfg.beta, cfg.label_smoothing, cfg.rpo_alpha,
            st.accuracy, P);
done:
    free(mw);
    free(ml);
    free(lw);
    free(ll);
    free(rw);
    free(rl);
    free(want_w);
    free(want_l);
    free(nwd);
    free(nld);
    free(buf);
    free(cnt);
}

static void s_golden_rm(const char *name, json_t *c) {
    const int n = (int)rl_golden_num(c, "n");
    double *qw = rl_golden_list(c, "q_w", (size_t)n), *ql = rl_golden_list(c, "q_l", (size_t)n);
    double *m = rl_golden_list(c, "margin", (size_t)n); // null in the file: NULL
    double *ww = rl_golden_list(c, "dq_w", (size_t)n), *wl = rl_golden_list(c, "dq_l", (size_t)n);
    double *dw = calloc((size_t)n, sizeof(double)), *dl = calloc((size_t)n, sizeof(double));
    if (!qw || !ql || !ww || !wl || !dw || !dl) {
        CHECK_MSG(0, "%s: unreadable", name);
        goto done;
    }
    rl_pref_rm_batch_t b = {n, qw, ql, m, rl_golden_num(c, "denom")};
    double loss = NAN;
    rl_pref_rm_stats_t st = {0};
    CHECK_INT(rl_pref_rm_loss(&b, rl_golden_num(c, "center"), &loss, dw, dl, &st), 0);
    const double want = rl_golden_num(c, "loss");
    const double lerr = fabs(loss - want) / fmax(fabs(want), 1e-300);
    CHECK_MSG(lerr <= TOL_GOLD, "%s: loss %.17g want %.17g", name, loss, want);
    double gerr = fmax(s_cmp_grad(name, "dq_w", dw, ww, (size_t)n),
                       s_cmp_grad(name, "dq_l", dl, wl, (size_t)n));
    json_t *jm = json_object_get(c, "metrics");
    s_cmp_num(name, "accuracy", st.accuracy / st.pairs, rl_golden_num(jm, "accuracy"));
    s_cmp_num(name, "margin", st.margin / st.pairs, rl_golden_num(jm, "margin"));
    s_cmp_num(name, "mean_reward", (st.chosen + st.rejected) / (2.0 * st.pairs),
              rl_golden_num(jm, "mean_reward"));
    s_worst_loss = fmax(s_worst_loss, lerr);
    s_worst_grad = fmax(s_worst_grad, gerr);
    fprintf(stderr, "golden %-18s loss rel err %.3g, dq %.3g of max (margin %s, center %g)\n", name,
            lerr, gerr, m ? "yes" : "no", rl_golden_num(c, "center"));
done:
    free(qw);
    free(ql);
    free(m);
    free(ww);
    free(wl);
    free(dw);
    free(dl);
}

static void test_goldens(void) {
    char path[1024];
    json_error_t jerr;
    snprintf(path, sizeof(path), "%s/pref/index.json", RL_FIXTURES);
    json_t *index = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    CHECK_MSG(index != NULL, "%s: %s", path, jerr.text);
    if (!index) {
        return;
    }
    fprintf(stderr, "goldens: torch %s\n",
            json_string_value(json_object_get(index, "torch_version")));
    json_t *cases = json_object_get(index, "cases");
    CHECK(json_is_array(cases));
    const size_t n = json_array_size(cases);
    int seen[5] = {0}; // sigmoid without rpo, cDPO, hinge, ipo, rpo; rm counted apart
    int rm[3] = {0};   // plain, margin, center
    for (size_t k = 0; k < n; k++) {
        const char *name = json_string_value(json_array_get(cases, k));
        if (!name) {
            CHECK_MSG(0, "index: case %zu has no name", k);
            continue;
        }
        snprintf(path, sizeof(path), "%s/pref/%s.json", RL_FIXTURES, name);
        json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        CHECK_MSG(c != NULL, "%s: %s", path, jerr.text);
        if (!c) {
            continue;
        }
        const char *kind = json_string_value(json_object_get(c, "kind"));
        if (kind && strcmp(kind, "dpo") == 0) {
            s_golden_dpo(name, c);
            const char *t = json_string_value(json_object_get(c, "loss_type"));
            const double eps = rl_golden_num(c, "label_smoothing");
            const double alpha = rl_golden_num(c, "rpo_alpha");
            if (t && strcmp(t, "sigmoid") == 0) {
                seen[0] += eps == 0.0 && alpha == 0.0;
                seen[1] += eps > 0.0;
            }
            seen[2] += t && strcmp(t, "hinge") == 0;
            seen[3] += t && strcmp(t, "ipo") == 0;
            seen[4] += alpha > 0.0;
        } else if (kind && strcmp(kind, "rm") == 0) {
            s_golden_rm(name, c);
            json_t *mg = json_object_get(c, "margin");
            rm[0] += json_is_null(mg) && rl_golden_num(c, "center") == 0.0;
            rm[1] += !json_is_null(mg);
            rm[2] += rl_golden_num(c, "center") > 0.0;
        } else {
            CHECK_MSG(0, "%s: unknown kind", path);
        }
        json_decref(c);
    }
    // the index may grow, never lose a variant
    CHECK_MSG(seen[0] >= 1 && seen[1] >= 1 && seen[2] >= 1 && seen[3] >= 1 && seen[4] >= 1 &&
                  rm[0] >= 1 && rm[1] >= 1 && rm[2] >= 1,
              "goldens: sigmoid %d, cdpo %d, hinge %d, ipo %d, rpo %d, rm plain %d, margin %d, "
              "center %d",
              seen[0], seen[1], seen[2], seen[3], seen[4], rm[0], rm[1], rm[2]);
    fprintf(stderr,
            "goldens: %zu cases; worst rel err: losses %.3g, gradients %.3g of max, "
            "metrics %.3g (tolerance %g)\n",
            n, s_worst_loss, s_worst_grad, s_worst_metric, TOL_GOLD);
    json_decref(index);
}

int main(void) {
    RL_TEST_RUN(test_hand_sigmoid);
    RL_TEST_RUN(test_hand_hinge);
    RL_TEST_RUN(test_hand_ipo_rpo);
    RL_TEST_RUN(test_hand_extremes);
    RL_TEST_RUN(test_hand_rm);
    RL_TEST_RUN(test_dpo_einval);
    RL_TEST_RUN(test_rm_einval);
    RL_TEST_RUN(test_dpo_fd);
    RL_TEST_RUN(test_rm_fd);
    RL_TEST_RUN(test_micro_batches);
    RL_TEST_RUN(test_goldens);
    RL_TEST_DONE();
}

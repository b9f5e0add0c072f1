// rl_loss_gspo — GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization"; REFERENCE.md §1):
// GRPO with the importance ratio of the whole sequence instead of each token's, clipped at the
// sequence level. A loss of GRPO's family (rl_grpo.h): the same batch, knobs and statistics as
// rl_grpo_loss, run by the family's adapter; selected with algorithm.policy_loss: gspo (TRL's
// importance_sampling_level: sequence, verl's policy_loss.loss_mode: gspo).
//
// Per row i with active tokens t (mask 1), n_i of them, old = old_logp or logp detached:
//   log s_i = clamp(sum_t (logp_t - old_t) / n_i, -20, 20)     the geometric mean of the token
//   s_i     = exp(log s_i)                                       ratios (no gradient where the
//                                                                clamp binds)
//   l_t     = -min(s_i A_t, clip(s_i, 1 - eps_low, 1 + eps_high) A_t)     broadcast over the row
//             then dual clip (A_t < 0: min(l_t, -c A_t)), TIS and the KL term exactly as
//             rl_grpo_loss does with s_i in place of the token's ratio
//   L       = the recipe's aggregation of l over the rows, as rl_grpo_loss
// The gradient flows through s_i into every token of the row (the paper's; TRL's
// importance_sampling_level: sequence):
//   dL/dlogp_t' = scale_i (s_i / n_i) sum_t w_t dpg_t/ds + scale_i beta dk_t'/dlogp_t'
// where dpg/ds = -A_t on the unclipped branch and 0 where the clip or the dual clip binds,
// w_t the TIS weight and scale_i the aggregation's factor of row i (1/D, or 1/(n_i D)). With
// sequence advantages and no token TIS this is s_i A scale_i on every token: verl's GSPO-token
// form (sg[s_i] pi/sg[pi]), which gives the same gradient; with token TIS weights verl's form
// weighs each token by its own w_t, this one by the row's mean. With one update per batch
// (old = logp detached) s_i = 1 and the gradient is GRPO's, -A scale on every token.
//
// Statistics (rl_grpo_loss_stats_t, per active token as rl_grpo_loss's): clip_low / clip_high
// count the tokens of rows whose s_i lies below / above the clip range on the side their
// advantage is clipped, ratio sums s_i over tokens (ratio/mean is the token-weighted mean of
// the sequence ratios), approx_kl the tokens' (logp - old)^2 / 2.
#include "rl_grpo.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

static int s_gspo_loss(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, float *dlogp,
                       rl_grpo_loss_stats_t *stats) {
    int rc = rl_grpo_check(b, alg, dlogp);
    if (rc) {
        return rc;
    }
    const int B = b->B, T = b->T;
    const double lo = 1.0 - alg->epsilon_low, hi = 1.0 + alg->epsilon_high;
    const double c = alg->dual_clip, beta = alg->beta;
    const double log_cap = alg->tis != RL_RECIPE_TIS_NONE ? log(alg->tis_cap) : 0.0;
    rl_grpo_loss_stats_t s = {0};

    for (int bi = 0; bi < B; bi++) {
        const size_t row = (size_t)bi * (size_t)T;
        const float *m = b->mask + row;
        const double A_seq = b->adv_tok ? 0.0 : b->adv[bi];
        // 1. the row's tokens, its mean log-ratio and its sequence-TIS log weight
        double n_b = 0.0, sum_x = 0.0, seq_log_w = 0.0;
        for (int t = 0; t < T; t++) {
            if (m[t] == 0.0f) {
                dlogp[row + t] = 0.0f;
                continue;
            }
            const double lp = b->logp[row + t];
            const double old = b->old_logp ? (double)b->old_logp[row + t] : lp;
            n_b += 1.0;
            sum_x += lp - old;
            if (alg->tis == RL_RECIPE_TIS_SEQUENCE) {
                seq_log_w += old - (double)b->mu_logp[row + t];
            }
        }
        if (n_b == 0.0) {
            continue;
        }
        const double scale = alg->loss_agg == RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN
                                 ? 1.0 / (n_b * b->denom)
                                 : 1.0 / b->denom;
        bool keep = true;
        if (alg->tis == RL_RECIPE_TIS_SEQUENCE && (seq_log_w < -log_cap || seq_log_w > log_cap)) {
            keep = false;
            s.tis_masked += 1.0;
        }
        // 2. the sequence ratio and its derivative in the mean log-ratio
        const double lx = sum_x / n_b;
        const double sr = exp(lx < -20.0 ? -20.0 : lx > 20.0 ? 20.0 : lx);
        const double dsr = (lx >= -20.0 && lx <= 20.0) ? sr : 0.0;
        const double clipped = sr < lo ? lo : sr > hi ? hi : sr;
        // 3. each token's loss at s_i, and the sum over the row of w_t dpg_t/ds
        double row_loss = 0.0, g_s = 0.0;
        for (int t = 0; t < T; t++) {
            const size_t i = row + t;
            if (m[t] == 0.0f) {
                continue;
            }
            const double A = b->adv_tok ? (double)b->adv_tok[i] : A_seq;
            const double lp = b->logp[i];
            const double old = b->old_logp ? (double)b->old_logp[i] : lp;
            const double l1 = -A * sr, l2 = -A * clipped;
            double pg, dpg;
            if (l2 > l1) { // the clipped branch: flat in s
                pg = l2;
                dpg = 0.0;
            } else {
                pg = l1;
                dpg = -A;
            }
            s.clip_low += (A < 0.0 && sr < lo);
            s.clip_high += (A > 0.0 && sr > hi);
            if (c > 0.0 && A < 0.0 && pg > -c * A) {
                pg = -c * A;
                dpg = 0.0;
                s.dual_clip += 1.0;
            }
            const double w = rl_grpo_tis_weight(b, alg, i, old, keep);
            double dk;
            const double k = rl_grpo_token_kl(b, alg, i, lp, old, &s, &dk);
            (void)dk; // the KL's gradient is added below, token by token
            if (keep) {
                row_loss += w * pg + (beta > 0.0 ? beta * k : 0.0);
                g_s += w * dpg;
            }
            const double x = lp - old;
            s.tokens += 1.0;
            s.ratio += sr;
            s.approx_kl += 0.5 * x * x;
            s.tis_weight += w;
        }
        s.loss += row_loss * scale;
        // 4. the gradient: through s_i into every token of the row, plus each token's KL term
        const double through_s = keep ? g_s * dsr / n_b : 0.0;
        for (int t = 0; t < T; t++) {
            const size_t i = row + t;
            if (m[t] == 0.0f) {
                continue;
            }
            double d = through_s;
            if (keep && beta > 0.0) {
                double dk = 0.0;
                rl_grpo_kl(alg->kl_estimator, (double)b->logp[i] - (double)b->ref_logp[i], &dk);
                d += beta * dk;
            }
            dlogp[i] = (float)(d * scale);
        }
    }

    if (stats) {
        rl_grpo_stats_add(stats, &s);
    }
    return 0;
}

static const rl_grpo_family_t s_family = {s_gspo_loss};

const rl_loss_t rl_loss_gspo_def = {
    .name = "gspo",
    .rows = 1,
    .needs = RL_LOSS_NEEDS_ADV,
    .model = RL_LOSS_POLICY,
    .policy_loss = 1,
    .train = rl_grpo_train,
    .impl = &s_family,
    .stats = rl_grpo_stats,
    .doc = "GSPO: GRPO's clipped loss on the sequence-level ratio (the geometric mean of the "
           "token ratios)",
};

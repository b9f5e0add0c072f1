// rl_loss_cispo — CISPO (MiniMax-M1, 2025: "clipped IS-weight policy optimization";
// REFERENCE.md §1): instead of PPO's min over a clipped and an unclipped surrogate, which drops
// the gradient of every token whose ratio left the clip range, the importance weight itself is
// clipped and detached and multiplies the token's log-probability, so every token keeps its
// gradient. A loss of GRPO's family (rl_grpo.h): the same batch, knobs and statistics as
// rl_grpo_loss, run by the family's adapter; selected with algorithm.policy_loss: cispo (verl's
// policy_loss.loss_mode: cispo, TRL's loss_type: cispo).
//
// Per active token t, with old = old_logp or logp detached:
//   r_t  = exp(clamp(logp_t - old_t, -20, 20))
//   w^_t = sg(clip(r_t, 1 - eps_low, 1 + eps_high))            detached: no gradient through it
//   l_t  = -w^_t A_t logp_t
//           then TIS (l *= w, or the row dropped), + beta k_t, and the aggregation exactly as
//           rl_grpo_loss
//   dl_t/dlogp_t = -w^_t A_t (times the TIS weight) + beta dk_t/dlogp_t
// The bounds are verl's: the recipe's epsilon_low / epsilon_high around 1, both sides (TRL's
// loss_type: cispo clamps at epsilon_high from above only, its epsilon_high being the bound on
// the ratio itself: epsilon_high_rlctl = epsilon_high_TRL - 1 with epsilon_low near 1; the
// paper sets no lower bound and tunes the upper). The dual clip does not apply: the loss is
// linear in logp with a bounded weight, so it stays bounded for A < 0 (its definition says
// no_dual_clip: a recipe that sets algorithm.dual_clip with it is refused; the statistic stays
// 0). With one update per batch (old = logp detached) w^ = 1 and the gradient is GRPO's, -A on
// every token (the loss's value, -A logp, is not).
//
// Statistics (rl_grpo_loss_stats_t, per active token as rl_grpo_loss's): clip_low / clip_high
// count the tokens whose weight was clipped at the lower / upper bound (whatever the sign of
// their advantage: no token loses its gradient), ratio sums r_t before the clip.
#include "rl_grpo.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

static int s_cispo_loss(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, float *dlogp,
                        rl_grpo_loss_stats_t *stats) {
    int rc = rl_grpo_check(b, alg, dlogp);
    if (rc) {
        return rc;
    }
    const int B = b->B, T = b->T;
    const double lo = 1.0 - alg->epsilon_low, hi = 1.0 + alg->epsilon_high;
    const double log_cap = alg->tis != RL_RECIPE_TIS_NONE ? log(alg->tis_cap) : 0.0;
    rl_grpo_loss_stats_t s = {0};

    for (int bi = 0; bi < B; bi++) {
        const size_t row = (size_t)bi * (size_t)T;
        const float *m = b->mask + row;
        const double A_seq = b->adv_tok ? 0.0 : b->adv[bi];
        const rl_grpo_row_t rw = rl_grpo_row(b, alg, bi, log_cap);
        const double scale = rw.scale;
        const bool keep = rw.keep;
        s.tis_masked += keep ? 0.0 : 1.0;
        double row_loss = 0.0;
        for (int t = 0; t < T; t++) {
            const size_t i = row + t;
            if (m[t] == 0.0f) {
                dlogp[i] = 0.0f;
                continue;
            }
            const double A = b->adv_tok ? (double)b->adv_tok[i] : A_seq;
            const double lp = b->logp[i];
            const double old = b->old_logp ? (double)b->old_logp[i] : lp; // detached
            const double x = lp - old;
            const double ratio = exp(x < -20.0 ? -20.0 : x > 20.0 ? 20.0 : x);
            const double wc = ratio < lo ? lo : ratio > hi ? hi : ratio; // detached
            s.clip_low += ratio < lo;
            s.clip_high += ratio > hi;
            // the policy term: linear in logp, its weight a constant
            const double pg = -wc * A * lp, dpg = -wc * A;
            rl_grpo_token_end(b, alg, i, lp, old, ratio, keep, scale, pg, dpg, &row_loss, dlogp,
                              &s);
        }
        s.loss += row_loss * scale;
    }

    if (stats) {
        rl_grpo_stats_add(stats, &s);
    }
    return 0;
}

static const rl_grpo_family_t s_family = {s_cispo_loss};

const rl_loss_t rl_loss_cispo_def = {
    .name = "cispo",
    .rows = 1,
    .needs = RL_LOSS_NEEDS_ADV,
    .model = RL_LOSS_POLICY,
    .policy_loss = 1,
    .no_dual_clip = 1,
    .train = rl_grpo_train,
    .impl = &s_family,
    .stats = rl_grpo_stats,
    .doc = "CISPO: the clipped importance weight, detached, times the token's log-probability",
};

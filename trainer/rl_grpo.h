// rl_grpo — the GRPO math of REFERENCE.md §1: group advantages from sequence rewards (group /
// batch / no std scaling, RLOO, NaN = unscorable, zero-variance groups), DAPO overlong shaping,
// and the clipped per-token policy loss with its gradient dL/dlogp (dual clip, k1/k2/k3 KL to
// the reference, token-level TIS or sequence masking, the three aggregations). Pure functions on
// arrays: no model, no processes. The actor worker runs rl_model_forward -> rl_grpo_loss ->
// rl_model_backward once per micro-batch; the aggregation divisor is a property of the global
// batch (all micro-batches, all ranks), so accumulation and data parallelism give the gradient
// of one big batch.
#ifndef RL_GRPO_H
#define RL_GRPO_H

#include "rl_config.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- advantages -------------------------------------------------------------------------------

typedef struct {
    int groups;               // groups seen
    int zero_std_groups;      // groups whose scorable rewards all equal (or < 2 scorable)
    int unscorable;           // NaN rewards
    double reward_mean;       // mean of the scorable rewards
    double reward_std;        // mean over groups of the group std (Bessel), TRL's reward_std
} rl_grpo_adv_stats_t;

// Advantages of n_groups groups of G sequence rewards each (group-major: reward g*G + i is
// completion i of prompt g), as alg says: alg->advantage (grpo: r - group mean; rloo: r - mean of
// the others), alg->scale_rewards (group: / (group std + std_eps); batch: / (std of all scorable
// rewards + std_eps); none), std with Bessel's correction. A NaN reward gets advantage 0 and is
// left out of every statistic. A zero-variance group gets 0 for every member. Writes adv
// (n_groups*G) and stats (may be NULL). Returns 0 or RL_EINVAL (G < 2, n_groups < 1).
int rl_grpo_advantages(const double *rewards, int n_groups, int G,
                       const rl_recipe_algorithm_t *alg, double *adv, rl_grpo_adv_stats_t *stats);

// DAPO overlong shaping of one completion of `len` tokens: with L_exp = max_new_tokens - buffer,
// returns min(-(len - L_exp) / buffer * penalty, 0) (0 when buffer is 0).
double rl_grpo_overlong_penalty(int len, int max_new_tokens, int buffer, double penalty);

// ---- the policy loss ---------------------------------------------------------------------------

// One micro-batch, laid out as rl_model_forward's (B,T) logprob arrays: row b holds one
// prompt + completion; logprob column t scores token t. mask[b,t] = 1 on the completion tokens
// the loss looks at (0 on prompt, padding and masked sequences).
typedef struct {
    int B, T;
    const float *logp;     // (B,T) current policy, from the training forward
    const float *old_logp; // (B,T) the policy that produced the batch, or NULL: logp itself
                           // (one update per batch: ratio 1, gradient A * dlogp)
    const float *ref_logp; // (B,T) reference; read only when alg->beta > 0
    const float *mu_logp;  // (B,T) sampler logprobs; read only when alg->tis != none
    const float *mask;     // (B,T) 0/1
    const double *adv;     // (B) sequence advantages (broadcast over tokens)
    // The aggregation's divisor for the whole global batch: token_mean: the active tokens of
    // the global batch; seq_mean_token_mean: the number of sequences of the global batch;
    // seq_mean_token_sum_norm: sequences of the global batch * max_new_tokens.
    double denom;
} rl_grpo_batch_t;

// Sums over the micro-batch's active tokens, to be added across micro-batches and ranks and
// divided by the caller (means over tokens: / tokens).
typedef struct {
    double loss;         // this micro-batch's share of the global loss (already / denom)
    double tokens;       // active tokens
    double kl;           // sum of the configured KL estimator (computed even when beta = 0
                         // if ref_logp is given; else 0)
    double clip_low;     // tokens with A < 0 and ratio < 1 - epsilon_low (clipped)
    double clip_high;    // tokens with A > 0 and ratio > 1 + epsilon_high (clipped)
    double dual_clip;    // tokens where the dual clip bound applied
    double ratio;        // sum of ratios
    double tis_weight;   // sum of the TIS weights used (1 per token when off)
    double tis_masked;   // sequences dropped by sequence-level TIS
    double logprob_gap;  // sum |old_logp - mu_logp| (when mu_logp is given)
} rl_grpo_loss_stats_t;

// Computes the micro-batch's loss and writes dlogp (B,T) = dL/dlogp (0 where mask is 0) for
// rl_model_backward, and adds (+=) into *stats (zero it before the first micro-batch). Per
// token (REFERENCE.md §1): ratio = exp(clamp(logp - old, -20, 20)); l = -min(ratio A,
// clip(ratio, 1 - eps_low, 1 + eps_high) A); dual clip c > 1 for A < 0: l = min(l, -c A);
// TIS token: l *= min(exp(old - mu), tis_cap) (detached); TIS sequence: the sequence's
// exp(sum(old - mu)) outside [1/tis_cap, tis_cap] drops it; plus beta * KL(k1|k2|k3, k3 clamped
// to [-10, 10]); aggregated as alg->loss_agg with b->denom. Returns 0 or RL_EINVAL.
int rl_grpo_loss(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, float *dlogp,
                 rl_grpo_loss_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif

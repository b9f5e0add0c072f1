// rl_ppo — the PPO-with-a-critic math of REFERENCE.md §1 that GRPO does not already have:
// per-token rewards (the KL penalty on every token plus the sequence score on the last one),
// GAE advantages and returns, masked whitening, the clipped value loss with its gradient
// dL/dV, the explained variance of the critic, and the adaptive KL controller (Ziegler et al.
// 2019; TRL's AdaptiveKLController). Pure functions on arrays: no model, no processes, no
// training loop. The PPO *policy* loss is not here: it is rl_grpo_loss (trainer/rl_grpo.h) with
// rl_grpo_batch_t.adv_tok = the whitened GAE advantages and old_logp = the rollout policy.
//
// Layout of every per-token array: (B,T) row-major, as rl_grpo_batch_t's: row b holds one
// prompt + completion, column t scores token t. mask[b,t] is exactly 0 or 1, 1 on the completion
// tokens the algorithm looks at (0 on prompt, padding and, in multi-turn rows, tool output).
// Positions with mask 0 are never read in any input array (they may hold garbage, NaN included)
// and are written as 0 in every output array. Math in double from the float inputs.
//
// One PPO step with these pieces (the driver owns the order):
//   rl_ppo_token_rewards (old_logp, ref_logp, scores)  -> r (B,T), per-row KL sums
//   rl_ppo_gae (r, values at rollout)                   -> A, R (B,T)
//   rl_ppo_explained_variance (R, values)               -> the `explained_variance` metric
//   rl_ppo_whiten (A)                                   -> adv_tok for rl_grpo_loss (as float)
//   per epoch / micro-batch: rl_grpo_loss (actor), rl_ppo_value_loss (critic; R as float)
//   rl_ppo_kl_coef_update (mean of the per-row KL sums) -> beta for the next step
// The losses' adapters at the end ("ppo": the actor's; "value": the critic's) run these through
// the policy's training step (rl_loss.h).
#ifndef RL_PPO_H
#define RL_PPO_H

#include "rl_loss.h"
#include "rl_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- rewards and advantages --------------------------------------------------------------------

// Per-token rewards of one batch. Per active token of row b, with k1 = old_logp - ref_logp:
//   r[b,t] = -beta * k1[b,t]                 (no term at all when beta = 0, even for a
//                                             non-finite k1, as rl_grpo_loss's KL term)
// plus score[b] added at the row's LAST active token (the largest t with mask 1); a row with no
// active token gets nothing. A score that is not finite (NaN = unscorable, and +-inf, as
// rl_grpo_advantages treats rewards) is added as 0 and counted in *unscorable: the row keeps
// its KL rewards, so an unscorable completion is still pulled toward the reference but carries
// no task signal (one broken reward function cannot poison the batch's GAE and whitening).
// Inputs: mask, old_logp (the policy that produced the batch, as recomputed by the trainer) and
// ref_logp (B,T); score (B). ref_logp may be NULL only when beta == 0 (then there is no KL
// term and kl_row is 0); old_logp may be NULL only when ref_logp is. Outputs: rewards (B,T)
// (written, =); kl_row (B) or NULL: sum over the row's active tokens of k1 (computed whenever
// ref_logp is given, even with beta = 0; 0 for an empty row), the per-sequence KL whose mean
// over rows is the `kl` metric and rl_ppo_kl_coef_update's input; unscorable or NULL: the
// number of non-finite scores among all B rows (empty rows included). Returns 0, or RL_EINVAL
// with nothing written (NULL mask/score/rewards, B or T < 1, beta < 0 or not finite, beta > 0
// without ref_logp, ref_logp without old_logp, a mask value other than 0/1).
int rl_ppo_token_rewards(const float *mask, const float *old_logp, const float *ref_logp,
                         const double *score, double beta, int B, int T, double *rewards,
                         double *kl_row, int *unscorable);

// Generalized advantage estimation (Schulman et al. 2016), row by row over the row's active
// tokens in order: for consecutive active tokens t < t' of row b (mask 0 positions between them,
// e.g. tool output in a multi-turn row, are skipped: t' plays the part of t+1),
//   delta_t = r_t + gamma * V_t' - V_t
//   A_t     = delta_t + gamma * lam * A_t'
//   R_t     = A_t + V_t                      (the critic's regression target, `returns`)
// and after the row's last active token V = 0 and A = 0 (REFERENCE's V_{T+1} = 0). The last
// active token is treated as terminal whether the completion ended with EOS or was truncated at
// max_new_tokens: a truncated completion is NOT bootstrapped with its last value. This is what
// TRL's PPO trainer does (its loop takes next value 0 past the end of the response and values
// of padding are zeroed; its masks have no gaps) and what verl's GAE does (it skips masked
// tokens, gaps included, in the same way).
// Inputs: mask (B,T); rewards (B,T) from rl_ppo_token_rewards; values (B,T), the critic's values
// at rollout time, aligned as the logprobs (values[b,t] estimates the return from token t on);
// gamma and lam in [0, 1]. Outputs (written, =): adv (B,T) and ret (B,T), 0 where mask is 0.
// Returns 0, or RL_EINVAL with nothing written (NULL array, B or T < 1, gamma or lam outside
// [0, 1] or NaN, a mask value other than 0/1).
int rl_ppo_gae(const float *mask, const double *rewards, const float *values, double gamma,
               double lam, int B, int T, double *adv, double *ret);

// The whitening epsilon of REFERENCE.md §1 (added to the variance, not to the std).
#define RL_PPO_WHITEN_EPS 1e-8

// Masked whitening over all active tokens of the batch (not per row): with n active values,
// their mean m and their variance with Bessel's correction s2 = sum (x - m)^2 / (n - 1),
//   out[b,t] = (x[b,t] - m) / sqrt(s2 + RL_PPO_WHITEN_EPS)
// the affine map of TRL's masked_whiten(shift_mean=True) and verl's masked_whiten (both use the
// unbiased masked variance). Degenerate batches, where those two divide by zero (TRL: NaN; verl
// raises): n = 0 writes 0 everywhere with *mean = *std = 0; n = 1 subtracts the mean only, so
// the single value becomes 0 with *std = 0 (the limit of the n >= 2 rule: active values that
// are all exactly equal have s2 = 0 and whiten to exactly 0; a lone value carries no signal
// relative to the batch, like a zero-variance GRPO group). Inputs: mask (B,T); x (B,T). Outputs:
// out (B,T) (may be x itself: whitening in place), 0 where mask is 0; mean and std (each may
// be NULL): m and sqrt(s2) before whitening (the `advantages/mean` metric and its spread).
// Returns 0, or RL_EINVAL with nothing written (NULL mask/x/out, B or T < 1, a mask value other
// than 0/1).
int rl_ppo_whiten(const float *mask, const double *x, int B, int T, double *out, double *mean,
                  double *std);

// The explained variance of the critic over the active tokens:
//   ev = 1 - Var(R - V) / Var(R)
// (both variances with the same divisor, so Bessel's correction cancels), R = ret from
// rl_ppo_gae, V = the rollout values given to it. 1 is a perfect critic, 0 one that predicts
// the mean, < 0 worse than that. Var(R) = 0 (all active returns exactly equal, which includes a
// batch with fewer than 2 active tokens) leaves it undefined: *ev = NaN, as CleanRL's
// explained_variance (verl's critic/vf_explained_var, the same ratio, adds 1e-5 to Var(R) and
// reports a large negative number instead); the metrics writer logs NaN as null. Not TRL's
// older ppo/val/var_explained = 1 - mean((V - R)^2) / Var(R), which also charges a constant
// bias of the critic (here a V off by a constant still explains everything) and divides by
// zero unguarded. Inputs: mask, ret (double) and values (float), all (B,T). Output: *ev. Returns 0,
// or RL_EINVAL with nothing written (NULL pointer, B or T < 1, a mask value other than 0/1).
int rl_ppo_explained_variance(const float *mask, const double *ret, const float *values, int B,
                              int T, double *ev);

// ---- the value loss ----------------------------------------------------------------------------

// One micro-batch of the critic, laid out as rl_grpo_batch_t.
typedef struct {
    int B, T;
    const float *values;     // (B,T) V: the critic's current values, from the training forward
    const float *old_values; // (B,T) V_old: the values at rollout time (those given to
                             // rl_ppo_gae); may be NULL when eps_v = 0 (no clipping)
    const float *returns;    // (B,T) R: rl_ppo_gae's ret, rounded to float
    const float *mask;       // (B,T) exactly 0 or 1
    // The aggregation's divisor for the whole global batch, as rl_grpo_batch_t.denom:
    // token_mean: the active tokens of the global batch; seq_mean_token_mean: its sequences;
    // seq_mean_token_sum_norm: its sequences * max_new_tokens. Finite and > 0 unless this
    // micro-batch has no active token (then loss and dvalues are 0).
    double denom;
} rl_ppo_value_batch_t;

// Sums over the micro-batch's active tokens, to be added across micro-batches and ranks and
// divided by the caller (value_clip_fraction = clipped / tokens, returns/mean = ret / tokens).
typedef struct {
    double loss;    // this micro-batch's share of the global value loss (already / denom,
                    // the 1/2 included): the `value_loss` metric
    double tokens;  // active tokens
    double clipped; // tokens whose clipped branch is strictly larger (the max picks it and the
                    // gradient is 0): TRL's vf_clipfrac numerator
    double sq_err;  // sum (V - R)^2 (TRL's val/error numerator)
    double value;   // sum V (current values)
    double ret;     // sum R
} rl_ppo_value_stats_t;

// The clipped value loss of REFERENCE.md §1 (TRL, verl). Per active token, with
// Vc = clip(V, V_old - eps_v, V_old + eps_v):
//   l = 1/2 * max((V - R)^2, (Vc - R)^2)
//   dl/dV = V - R where (V - R)^2 >= (Vc - R)^2, else 0 (the clipped branch wins, and Vc is
//           constant in V where the clip is active). Ties: inside the clip range Vc = V and both
//           branches have this gradient (autograd's max splits it between them, the clamp
//           passes it on, the sum is the same); outside it a tie is the kink V - R = R - Vc,
//           where we take the unclipped side (autograd would give half)
// eps_v > 0 clips (+inf never clips); eps_v = 0 turns clipping off: l = 1/2 (V - R)^2 (a clip
// range of width 0 would pin the clipped branch at V_old, which no recipe means; TRL always
// clips, with eps_v = 0.2; verl's default is 0.5). Aggregated with D = b->denom as loss_agg
// (RL_RECIPE_AGG_* of core/rl_config.h, the same rule as rl_grpo_loss):
//   token_mean, seq_mean_token_sum_norm:  sum_bt l m / D
//   seq_mean_token_mean:  sum_b [sum_t l m / sum_t m] / D   (a row with no active token adds 0)
// Writes (=) dvalues (B,T) = dL/dV (0 where mask is 0), rounded to float, and adds (+=) into
// *stats (zero it before the first micro-batch; may be NULL). Returns 0, or RL_EINVAL with
// nothing written (NULL b/values/returns/mask/dvalues, NULL old_values with eps_v > 0, B or T
// < 1, eps_v < 0 or NaN, an unknown loss_agg, a mask value other than 0/1, denom not finite
// or not > 0 with an active token).
int rl_ppo_value_loss(const rl_ppo_value_batch_t *b, double eps_v, int loss_agg, float *dvalues,
                      rl_ppo_value_stats_t *stats);

// ---- the adaptive KL controller ----------------------------------------------------------------

// Ziegler et al.'s adaptive KL coefficient (TRL's AdaptiveKLController):
//   e     = clip(kl / target - 1, -0.2, 0.2)
//   *beta = *beta * (1 + e * n_steps / horizon)          floored at 0
// kl is the batch's KL as the original measures it: the mean over the batch's sequences of the
// per-sequence sum of k1 over its completion tokens (the mean of rl_ppo_token_rewards' kl_row);
// n_steps is the number of sequences in that batch (all ranks), horizon the controller's
// horizon in sequences (TRL: target 6, horizon 10000). target = 0 is the fixed-coefficient
// controller (the recipe's algorithm.kl_target = 0): *beta is left as it is. verl feeds the same
// controller the mean over sequences of the per-token MEAN of its KL instead; pass that to follow
// verl. The floor only matters for n_steps > 5 * horizon, where the factor would turn negative.
// Returns 0, or RL_EINVAL with *beta unchanged (NULL beta, *beta < 0 or not finite, kl not finite,
// target < 0 or not finite, horizon not finite or not > 0, n_steps < 0): a NaN KL (a broken
// logprob) must not poison every later step.
int rl_ppo_kl_coef_update(double *beta, double kl, double target, int n_steps, double horizon);

// ---- the losses' adapters ------------------------------------------------------------------------

// "ppo": the actor's update, rl_grpo_train_alg with the recipe's algorithm but no KL term (beta
// 0: PPO puts its KL in the rewards; ref_logp, when given, is read for the kl statistic only, as
// k1), on b->token_adv (the whitened GAE advantages) with b->old_logp (the rollout policy's, for
// every pass and mini-batch). Statistics as rl_grpo_stats; PPO's metrics show approx_kl, not kl.
int rl_ppo_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                 const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len);

// "value": the critic's update (a model with a head): b->iterations passes of rl_ppo_value_loss
// (b->values = the values at rollout time, b->returns; the recipe's value_clip and loss_agg
// over b->denom) over micro-batches of b->micro_batch rows, then clip to optim.max_grad_norm and
// AdamW at rate b->lr. Statistics (the last pass's sums): loss (the `value_loss` metric),
// grad_norm, tokens, clipped, sq_err, value_sum, return_sum. out->old_logp (a policy's field)
// gets zeros. RL_EINVAL for a model without a head.
int rl_ppo_value_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                       const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

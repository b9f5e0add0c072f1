// rl_grpo — the GRPO math of REFERENCE.md §1: group advantages from sequence rewards (group /
// batch / no std scaling, RLOO, NaN = unscorable, zero-variance groups), DAPO overlong shaping,
// and the clipped per-token policy loss with its gradient dL/dlogp (dual clip, k1/k2/k3 KL to
// the reference, token-level TIS or sequence masking, the three aggregations). Pure functions on
// arrays: no model, no processes. The actor worker runs rl_model_forward -> rl_grpo_loss ->
// rl_model_backward once per micro-batch; the aggregation divisor is a property of the global
// batch (all micro-batches, all ranks), so accumulation and data parallelism give the gradient
// of one big batch. docs/training.md ("GRPO loss conventions") restates these rules with the
// reasons for each choice.
#ifndef RL_GRPO_H
#define RL_GRPO_H

#include "rl_config.h"
#include "rl_loss.h"
#include "rl_policy.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- advantages -------------------------------------------------------------------------------

// Written (=, not added) by rl_grpo_advantages for the whole call.
typedef struct {
    int groups;               // groups seen (n_groups)
    int zero_std_groups;      // groups whose scorable rewards all equal (or < 2 scorable): all
                              // their advantages are 0 (TRL's frac_reward_zero_std * groups)
    int unscorable;           // non-finite rewards (NaN, and +-inf, see below)
    double reward_mean;       // mean of the scorable rewards (0 when there are none)
    double reward_std;        // mean over the groups with >= 2 scorable rewards of their
                              // std (Bessel; 0 for an all-equal group), TRL's reward_std; 0
                              // when no group has 2
} rl_grpo_adv_stats_t;

// Advantages of n_groups groups of G sequence rewards each (group-major: reward g*G + i is
// completion i of prompt g), as alg says. Per group, over its n >= 2 scorable rewards with mean
// m and Bessel std s = sqrt(sum (r - m)^2 / (n - 1)):
//   alg->advantage    grpo: A_i = r_i - m;  rloo: A_i = r_i - mean_{j != i} r_j
//                     (= (r_i - m) * n / (n - 1)); both over the scorable members only
//   alg->scale_rewards group: A_i /= (s + std_eps);  batch: A_i /= (S + std_eps), S the Bessel
//                     std of all scorable rewards of the call (the mean stays per group);
//                     none: no division (Dr.GRPO). Scaling applies to rloo as well.
// A reward that is not finite (NaN = unscorable; an infinite reward is treated the same, so one
// broken reward function cannot poison the batch) gets A = 0 and is left out of every mean,
// std and statistic. A zero-variance group (all scorable rewards exactly equal, or fewer than 2
// scorable) gets A = 0 for every member, exactly. Writes adv (n_groups*G) and stats (may be
// NULL). Returns 0, or RL_EINVAL (NULL rewards/alg/adv, G < 2, n_groups < 1, an unknown
// advantage or scale_rewards value, std_eps < 0) with nothing written, or RL_EINVAL with adv
// undefined when finite rewards overflow a mean or std (|r| from about 1.3e154: the run
// refuses such scores before, naming the reward).
int rl_grpo_advantages(const double *rewards, int n_groups, int G,
                       const rl_recipe_algorithm_t *alg, double *adv, rl_grpo_adv_stats_t *stats);

// DAPO overlong shaping of one completion of `len` tokens: with L_exp = max_new_tokens - buffer,
// returns min(-(len - L_exp) / buffer * penalty, 0), floored at -penalty (DAPO's value for a
// completion longer than max_new_tokens); 0 when buffer <= 0.
double rl_grpo_overlong_penalty(int len, int max_new_tokens, int buffer, double penalty);

// ---- the policy loss ---------------------------------------------------------------------------

// One micro-batch, laid out as rl_model_forward's (B,T) logprob arrays: row b holds one
// prompt + completion; logprob column t scores token t. mask[b,t] = 1 on the completion tokens
// the loss looks at (0 on prompt, padding and masked sequences). Positions with mask 0 are never
// read in any array (they may hold garbage, NaN included).
typedef struct {
    int B, T;
    const float *logp;     // (B,T) current policy, from the training forward
    const float *old_logp; // (B,T) the policy that produced the batch, or NULL: logp itself,
                           // detached (one update per batch: ratio 1, gradient -A * dlogp)
    const float *ref_logp; // (B,T) reference; required when alg->beta > 0; when given with
                           // beta = 0 it is read for stats.kl only
    const float *mu_logp;  // (B,T) sampler logprobs; required when alg->tis != none; when given
                           // it is always read for stats.logprob_gap
    const float *mask;     // (B,T) exactly 0 or 1
    const double *adv;     // (B) sequence advantages (broadcast over tokens), unless adv_tok
    // The aggregation's divisor for the whole global batch: token_mean: the active tokens of
    // the global batch; seq_mean_token_mean: the number of sequences of the global batch;
    // seq_mean_token_sum_norm: sequences of the global batch * max_new_tokens. Must be finite
    // and > 0 unless this micro-batch has no active token (then loss and dlogp are 0).
    double denom;
    const float *adv_tok;  // (B,T) per-token advantages (PPO's GAE) or NULL: then adv. Where
                           // given, token t of row b uses adv_tok[b,t] in place of adv[b] in
                           // every term (clip sides, dual clip, the statistics)
} rl_grpo_batch_t;

// Sums over the micro-batch's active tokens (mask = 1, including the tokens of sequences that
// sequence-level TIS drops: every field but loss describes the batch, not the loss), to be added
// across micro-batches and ranks and divided by the caller (means over tokens: / tokens).
typedef struct {
    double loss;         // this micro-batch's share of the global loss (already / denom)
    double tokens;       // active tokens
    double kl;           // sum of the configured KL estimator (k3 after its clamp; computed
                         // even when beta = 0 if ref_logp is given; else 0)
    double clip_low;     // tokens with A < 0 and ratio < 1 - epsilon_low (clipped)
    double clip_high;    // tokens with A > 0 and ratio > 1 + epsilon_high (clipped)
    double dual_clip;    // tokens where the dual clip bound applied (-c*A < l strictly)
    double ratio;        // sum of ratios (after the log-ratio clamp)
    double tis_weight;   // sum of the TIS weights used: 1 per token when off; token: w; sequence:
                         // 1 per kept token, 0 per dropped one
    double tis_masked;   // sequences dropped by sequence-level TIS
    double logprob_gap;  // sum |old - mu_logp| (when mu_logp is given; old = logp when
                         // old_logp is NULL)
    double approx_kl;    // sum (logp - old)^2 / 2 (PPO's approx_kl, TRL's estimator; 0 when
                         // old_logp is NULL)
} rl_grpo_loss_stats_t;

// Computes the micro-batch's loss and writes (=) dlogp (B,T) = dL/dlogp (0 where mask is 0) for
// rl_model_backward, and adds (+=) into *stats (zero it before the first micro-batch; may be
// NULL). Per active token, with old = old_logp or detached logp, A = adv[b]:
//   ratio = exp(clamp(logp - old, -20, 20))            (no gradient where the clamp is active)
//   l_pg  = -min(ratio A, clip(ratio, 1 - eps_low, 1 + eps_high) A)
//           gradient -A * ratio, or 0 where the clipped branch is strictly smaller (the
//           clip_low / clip_high tokens), as autograd of min/clip gives
//   dual clip (c = alg->dual_clip, 0 = off, else > 1), A < 0: l_pg = min(l_pg, -c A)
//           (gradient 0 where the bound applies)
//   TIS token: l_pg *= w, w = min(exp(old - mu), tis_cap), detached; the KL term is not
//           weighted (as verl weights the policy-gradient loss only: the correction is for
//           the policy-gradient estimator, the KL penalty is a regulariser)
//   TIS sequence: a row whose exp(sum over its active tokens (old - mu)) lies outside
//           [1/tis_cap, tis_cap] is dropped from the loss (both terms; loss 0, dlogp 0), as if
//           masked; the decision is detached
//   l     = l_pg + beta * k, d = logp - ref:  k1 = d (dk = 1);  k2 = d^2 / 2 (dk = d);
//           k3 = exp(-d) + d - 1 clamped to [-10, 10] (dk = 1 - exp(-d), 0 where clamped)
// aggregated with D = b->denom as alg->loss_agg:
//   token_mean, seq_mean_token_sum_norm:  sum_bt l m / D
//   seq_mean_token_mean:  sum_b [sum_t l m / sum_t m] / D   (a row with no active token adds 0)
// Math in double; the loss is returned in double in stats->loss, dlogp rounded to float.
// Returns 0, or RL_EINVAL with nothing written (B or T < 1; NULL logp, mask, adv or dlogp; a
// mask value other than 0/1; denom not > 0 with an active token; beta > 0 without ref_logp;
// tis != none without mu_logp or with tis_cap < 1; epsilon_low outside [0, 1); epsilon_high
// < 0; beta < 0; dual_clip other than 0 or > 1; an unknown kl_estimator, loss_agg or tis).
int rl_grpo_loss(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, float *dlogp,
                 rl_grpo_loss_stats_t *stats);

// The checks of rl_grpo_loss's inputs (its RL_EINVAL cases), which the family's other losses
// share: 0 or RL_EINVAL.
int rl_grpo_check(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, const float *dlogp);
// The KL estimator k(d) of d = logp - ref (RL_RECIPE_KL_*: k1 = d, k2 = d^2 / 2, k3 = exp(-d) + d
// - 1 clamped to [-10, 10]) and *dk = dk/dlogp (0 where the clamp binds), as rl_grpo_loss adds it.
double rl_grpo_kl(int estimator, double d, double *dk);
// What a loss of the family computes first for row bi: its completion tokens n (the mask's 1s),
// the aggregation's factor on each token's loss (scale: 1 / (n denom) for seq_mean_token_mean,
// else 1 / denom; 0 when n is 0), and whether sequence TIS keeps the row (keep = 0 when the log
// of its sequence weight, sum of logp_old - mu_logp, lies outside [-log_cap, log_cap]; a NaN sum
// keeps it, so the NaN shows in the gap). log_cap: log(tis_cap), 0 without TIS.
typedef struct {
    double n, scale;
    int keep;
} rl_grpo_row_t;
rl_grpo_row_t rl_grpo_row(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, int bi,
                          double log_cap);
// What every loss of the family computes around token i's policy term, as rl_grpo_loss does:
// - tis_weight: its TIS weight w (1 without TIS; token TIS: min(exp(old - mu), tis_cap), NaN
//   kept; sequence TIS: 1 in a kept row, 0 in a dropped one);
// - token_kl: adds |old - mu| to s->logprob_gap (with mu_logp) and k to s->kl (with ref_logp),
//   and returns the KL term k of lp - ref with *dk its derivative (0 and 0 without ref_logp);
// - stats_add: to += s, field by field.
double rl_grpo_tis_weight(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, size_t i,
                          double old, int keep);
double rl_grpo_token_kl(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, size_t i,
                        double lp, double old, rl_grpo_loss_stats_t *s, double *dk);
void rl_grpo_stats_add(rl_grpo_loss_stats_t *to, const rl_grpo_loss_stats_t *s);
// The end of token i's loss in a loss whose dL/dlogp is per token (grpo, ppo, cispo), from its
// policy term pg and dpg = dpg/dlogp: in a kept row l = w pg (+ beta k), dl likewise (0 in a
// dropped row); *row_loss += l, dlogp[i] = dl * scale in float, and the token's sums in s
// (tokens, ratio, approx_kl of x = lp - old, tis_weight).
void rl_grpo_token_end(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, size_t i,
                       double lp, double old, double ratio, int keep, double scale, double pg,
                       double dpg, double *row_loss, float *dlogp, rl_grpo_loss_stats_t *s);

// ---- the family's adapter (the losses "grpo", "ppo", "gspo", "cispo") ---------------------------
// A policy-gradient loss of GRPO's family is its per-micro-batch math with rl_grpo_loss's
// contract (the same batch, the same statistics, each with its own meaning), run by the one
// adapter below. Its rl_loss_t.impl points to an rl_grpo_family_t.

typedef int (*rl_grpo_math_fn)(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg,
                               float *dlogp, rl_grpo_loss_stats_t *stats);
typedef struct {
    rl_grpo_math_fn loss;
} rl_grpo_family_t;

// The family's math of loss L (one selectable as algorithm.policy_loss, or trained by
// rl_grpo_train), or NULL.
rl_grpo_math_fn rl_grpo_math(const rl_loss_t *L);

// The family's statistics (ending with {0}): loss (the last pass's), grad_norm, tokens, kl,
// entropy (the first pass's), clip_low, clip_high, clip_region (their sum), dual_clip (only
// with alg->dual_clip > 0), ratio, tis_weight and tis_masked (only with alg->tis), logprob_gap,
// approx_kl: rl_grpo_loss_stats_t's sums over the batch, as GRPO's metrics show them.
extern const rl_loss_stat_t rl_grpo_stats[];

// The update of a loss of the family: b->iterations passes; in each, micro-batches of
// b->micro_batch sequences run forward (at b->temperature) -> the loss's math (alg) ->
// backward, then the gradient is clipped to max_grad_norm and AdamW steps at rate b->lr. The
// first pass's forward runs with the weights that produced the batch, so its logprobs are
// logπ_old: written to out->old_logp (may be NULL) and used as the old policy by the later
// passes (with one pass, old = logp detached, ratio 1) -- unless b->old_logp gives logπ_old
// (PPO: the rollout policy's, for every pass and mini-batch; then it is what out->old_logp
// gets). A non-finite loss or gradient norm is RL_EINVAL naming the pass, and no update is made.
// rl_grpo_train: alg = r->algorithm, max_grad_norm = r->optim.max_grad_norm.
int rl_grpo_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                  const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len);
int rl_grpo_train_alg(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_algorithm_t *alg,
                      double max_grad_norm, const rl_loss_batch_t *b, rl_loss_out_t *out,
                      char *err, size_t err_len);

// The recipe's keys of the clipped policy loss, which GRPO's family and PPO's actor share
// (rl_recipe_algo_def_t.keys): the clip bounds (epsilon_low, epsilon_high, dual_clip) and the
// token aggregation with the sampler-mismatch correction (loss_agg, tis, tis_cap).
extern const rl_recipe_key_t rl_grpo_clip_keys[];
extern const rl_recipe_key_t rl_grpo_token_keys[];

#ifdef __cplusplus
}
#endif
#endif

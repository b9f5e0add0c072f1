// rl_pref — the preference losses of REFERENCE.md §1 on per-pair numbers: DPO and its variants
// (sigmoid, cDPO label smoothing, hinge, IPO, RPO's NLL term) and the reward model's
// Bradley-Terry loss (with TRL RewardTrainer's margin and reward centering). Pure functions: no
// model, no processes, no training loop. The trainer calls them from the loss callback of its
// training step, once per micro-batch of whole pairs, and broadcasts the per-pair gradients to
// per-token gradients itself (below).
//
// Inputs are per pair i of the micro-batch (n pairs, chosen w and rejected l):
//   s_w[i], s_l[i]  the policy's SUMMED log-probabilities of the chosen / rejected completion:
//                   s = sum_t logp_t over the completion's masked tokens (mask 1), summed by the
//                   caller in double
//   r_w[i], r_l[i]  the same sums under the reference model (constants: no gradient)
//   n_w[i], n_l[i]  the number of masked tokens each sum runs over (read by IPO only)
// and the outputs ds_w[i] = dL/ds_w[i], ds_l[i] = dL/ds_l[i] of the micro-batch's share L.
//
// Broadcasting to tokens: since s_w[i] is a plain sum of the token log-probabilities, for every
// masked token t of pair i's chosen completion dL/dlogp_t = ds_w[i] exactly (and ds_l[i] for
// the rejected one); unmasked tokens get 0. IPO's division by the token count happens inside
// these functions (ds already carries the 1/n), so the same broadcast stays exact for IPO. The
// counts n_w, n_l must be the number of tokens the sums ran over.
//
// Aggregation, as rl_grpo_batch_t.denom: every per-pair term is divided by `denom`, the number of
// pairs in the GLOBAL batch (all micro-batches of the step, all data-parallel ranks), so that the
// shares of all micro-batches add up to the loss and gradient of one big batch (the batch mean
// over pairs). Statistics are sums over the micro-batch's pairs, to be added across micro-batches
// and ranks (every field is a double: one allreduce of the struct) and divided by the caller.
//
// Everything is in double. The reference versions are TRL's DPOTrainer v0.28.0 (the last release
// with `rpo_alpha` and with label smoothing on the sigmoid loss; trl/trainer/dpo_trainer.py) and
// TRL's RewardTrainer (trl/trainer/reward_trainer.py, the same in v0.28.0 and later). TRL 0.29
// rewrote DPOTrainer: rpo_alpha became loss_type ["sigmoid", "sft"] with loss_weights (the "sft"
// term is the same chosen-token mean of the NLL), "sigmoid" no longer reads label_smoothing, IPO
// clamps the token count to >= 1, and its rewards/* and logps/* metrics use the unnormalised sums
// even for IPO. We follow v0.28.0 throughout (the recipe's keys are its keys), so for IPO the
// statistics are those of the per-token means the IPO loss compares.
//
// The losses' adapters at the end ("dpo", "rm") run these through the policy's training step
// (rl_loss.h): per row the summed logprobs (or the score), per pair the loss, the per-pair
// gradients broadcast back.
#ifndef RL_PREF_H
#define RL_PREF_H

#include "rl_loss.h"
#include "rl_policy.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- DPO ---------------------------------------------------------------------------------------

// The recipe's loss_type (TRL's names in comments).
typedef enum {
    RL_PREF_SIGMOID = 0, // "sigmoid": DPO, cDPO with label smoothing
    RL_PREF_HINGE = 1,   // "hinge": SLiC-style hinge on the implicit reward margin
    RL_PREF_IPO = 2,     // "ipo": IPO on per-token mean log-probabilities
} rl_pref_loss_type_t;

// The recipe keys of the DPO loss.
typedef struct {
    int loss_type;          // RL_PREF_SIGMOID | RL_PREF_HINGE | RL_PREF_IPO
    double beta;            // > 0 and finite (DPO's default 0.1; IPO's tau)
    double label_smoothing; // epsilon in [0, 0.5): cDPO; used by sigmoid only (TRL ignores it
                            // for hinge and IPO, with a warning; so does this function)
    double rpo_alpha;       // alpha >= 0 and finite: weight of RPO's NLL term (0 = off)
} rl_pref_dpo_t;

// One micro-batch of whole pairs.
typedef struct {
    int n;             // pairs in this micro-batch, >= 1
    const double *s_w; // (n) policy, chosen: summed completion log-probabilities
    const double *s_l; // (n) policy, rejected
    const double *r_w; // (n) reference, chosen
    const double *r_l; // (n) reference, rejected
    const int *n_w;    // (n) chosen completion token counts, each >= 1; read by IPO only
                       // (may be NULL otherwise)
    const int *n_l;    // (n) rejected completion token counts, as n_w
    double denom;      // pairs in the global batch: finite and > 0
    double nll_denom;  // RPO only (rpo_alpha > 0; ignored otherwise): the chosen completion
                       // tokens of the global batch, sum of n_w over all its pairs; finite
                       // and > 0
} rl_pref_batch_t;

// Sums over the micro-batch's pairs (zero the struct before the first micro-batch). With
// P = pairs of the step (all ranks), TRL's metrics are: loss = loss (already a share),
// rewards/chosen = reward_chosen / P, rewards/rejected = reward_rejected / P,
// rewards/accuracies = accuracy / P, rewards/margins = margin / P, logps/chosen = logp_chosen /
// P, logps/rejected = logp_rejected / P, nll_loss (RPO) = nll / nll_denom.
typedef struct {
    double loss;            // this micro-batch's share of the global loss, RPO term included
    double pairs;           // pairs
    double reward_chosen;   // sum beta (s_w - r_w)   (IPO: beta (s_w - r_w) / n_w)
    double reward_rejected; // sum beta (s_l - r_l)   (IPO: beta (s_l - r_l) / n_l)
    double accuracy;        // pairs whose chosen reward > rejected reward (strictly)
    double margin;          // sum (chosen reward - rejected reward)
    double logp_chosen;     // sum s_w                (IPO: s_w / n_w)
    double logp_rejected;   // sum s_l                (IPO: s_l / n_l)
    double nll;             // sum -s_w (unnormalised, also for IPO): RPO's NLL numerator;
                            // summed whether or not rpo_alpha > 0
} rl_pref_dpo_stats_t;

// The DPO loss of one micro-batch. Per pair, with beta = cfg->beta:
//   a_w = s_w - r_w,  a_l = s_l - r_l      (IPO: a_w = (s_w - r_w) / n_w, a_l = (s_l - r_l) / n_l,
//                                          TRL's division of every logp sum by its token count)
//   h   = a_w - a_l,  z = beta h
//   sigmoid:  l = -(1 - eps) log sigma(z) - eps log sigma(-z)          (eps = label_smoothing)
//             dl/dh = beta [-(1 - eps) sigma(-z) + eps sigma(z)]
//   hinge:    l = relu(1 - z);  dl/dh = -beta where 1 - z > 0, else 0 (z = 1 exactly: 0, the
//             gradient autograd gives for torch.relu at 0)
//   ipo:      l = (h - 1/(2 beta))^2;  dl/dh = 2 (h - 1/(2 beta))
// log sigma is evaluated stably as -softplus(-x). With D = b->denom and N = b->nll_denom:
//   L = sum_i l_i / D  +  alpha * sum_i (-s_w[i]) / N                  (alpha = rpo_alpha)
//   ds_w[i] =  dl_i/dh * c_w / D - alpha / N,   ds_l[i] = -dl_i/dh * c_l / D
//   with c_w = 1/n_w[i], c_l = 1/n_l[i] for IPO, else 1.
// RPO's term is TRL's `nll_loss` times rpo_alpha: F.cross_entropy over the chosen completion
// tokens of the whole (per-device) batch, i.e. the MEAN OVER ALL CHOSEN TOKENS of the batch, not
// a mean of per-sequence means, always from the unnormalised token log-probabilities (also under
// IPO). With the global token count N it is the token mean of one big batch; it equals TRL's
// exactly when the step is one micro-batch on one rank (TRL takes the token mean per device
// micro-batch and then averages those). TRL's cross_entropy also skips completion tokens whose id
// is 0 (its ignore_index, the dummy label it writes on padding); that quirk is not reproduced.
// Writes (=) *loss (may be NULL; the share L), ds_w and ds_l (n), and adds (+=) into *stats (may
// be NULL). Returns 0, or RL_EINVAL with nothing written: NULL b, cfg, ds_w, ds_l or input
// array (n_w, n_l only for IPO); n < 1; an unknown loss_type; beta not finite or not > 0;
// label_smoothing outside [0, 0.5) or NaN; rpo_alpha < 0 or not finite; denom not finite or not
// > 0; nll_denom not finite or not > 0 with rpo_alpha > 0; any s or r not finite (a broken
// forward must not become an update); a token count < 1 under IPO; a loss (or the nll sum)
// that overflows.
int rl_pref_dpo_loss(const rl_pref_batch_t *b, const rl_pref_dpo_t *cfg, double *loss, double *ds_w,
                     double *ds_l, rl_pref_dpo_stats_t *stats);

// ---- the reward model --------------------------------------------------------------------------

// One micro-batch of pairs of reward-model scores.
typedef struct {
    int n;                // pairs in this micro-batch, >= 1
    const double *q_w;    // (n) score of the chosen completion (the scalar head's output)
    const double *q_l;    // (n) score of the rejected completion
    const double *margin; // (n) per-pair margin m_i (TRL's "margin" column), or NULL: 0
    double denom;         // pairs in the global batch: finite and > 0
} rl_pref_rm_batch_t;

// Sums over the micro-batch's pairs, as rl_pref_dpo_stats_t: TRL's RewardTrainer logs
// accuracy = accuracy / P and margin = margin / P (the margin column does not enter it), and
// mean_reward = (chosen + rejected) / (2 P).
typedef struct {
    double loss;     // this micro-batch's share of the global loss
    double pairs;    // pairs
    double accuracy; // pairs with q_w > q_l (strictly)
    double margin;   // sum (q_w - q_l)
    double chosen;   // sum q_w
    double rejected; // sum q_l
} rl_pref_rm_stats_t;

// The reward model's Bradley-Terry loss (TRL RewardTrainer). Per pair, with x = q_w - q_l - m
// and c = center_coef (TRL's center_rewards_coefficient; 0 = off):
//   l = -log sigma(x) + c (q_w + q_l)^2
//   dl/dq_w = -sigma(-x) + 2 c (q_w + q_l),   dl/dq_l = sigma(-x) + 2 c (q_w + q_l)
// TRL adds c * mean over the batch's pairs of (r_w + r_l)^2 to the mean over pairs of
// -logsigmoid(r_w - r_l - margin): both are means over the same pairs, so per pair it is the l
// above. With D = b->denom:  L = sum_i l_i / D,  dq_w[i] = dl_i/dq_w / D,  dq_l[i] likewise.
// Writes (=) *loss (may be NULL), dq_w and dq_l (n), adds (+=) into *stats (may be NULL).
// Returns 0, or RL_EINVAL with nothing written: NULL b, q_w, q_l, dq_w or dq_l; n < 1;
// center_coef < 0 or not finite; denom not finite or not > 0; a score or margin not finite; a
// loss that overflows.
int rl_pref_rm_loss(const rl_pref_rm_batch_t *b, double center_coef, double *loss, double *dq_w,
                    double *dq_l, rl_pref_rm_stats_t *stats);

// ---- the losses' adapters ------------------------------------------------------------------------

// "dpo": one pass of rl_pref_dpo_loss (the recipe's loss_type, beta, label_smoothing,
// rpo_alpha) over micro-batches of whole pairs (rows 2i: prompt + chosen, 2i + 1: prompt +
// rejected, rl_data's layout; b->micro_batch rows), then clip to optim.max_grad_norm and AdamW
// at rate b->lr. Per row, the policy's summed completion logprobs s (in double, at temperature 1)
// meet the reference's b->ref_sum[row] (computed once, e.g. rl_policy_sum_logprobs of the frozen
// reference, and cached); dL/ds is broadcast to every masked token of the row. The divisors are
// the whole batch's (the mesh's): pairs and, for RPO, its chosen completion tokens. Statistics
// (rl_pref_dpo_stats_t's sums): loss, grad_norm, pairs, reward_chosen, reward_rejected,
// accuracy, margin, logp_chosen, logp_rejected, and nll with rpo_alpha > 0. out->old_logp gets
// zeros. Returns 0 or an error with err filled (rows not in pairs, a non-finite loss: no update).
int rl_pref_dpo_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                      const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len);

// "rm": the reward model's update (a model with a head, rows in pairs as "dpo"'s): one pass of
// rl_pref_rm_loss (Bradley-Terry; b->margin's pair margins, on both rows of a pair, or none;
// the recipe's center_rewards_coefficient) on the rows' scores (the head at each row's last real
// token), micro-batches of whole pairs, then clip and AdamW at rate b->lr; the divisor is the
// batch's (the mesh's) pairs. Statistics (rl_pref_rm_stats_t's sums): loss, grad_norm, pairs,
// accuracy, margin, chosen, rejected. out->old_logp gets zeros.
int rl_pref_rm_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                     const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len);

// The statistics of st as the losses' lists name them, with `loss` (an evaluation on held-out
// pairs: the set's total, for rl_loss_metrics with prefix "eval/"); nll: add RPO's nll;
// scores: add the scores' sums (chosen, rejected).
void rl_pref_dpo_stats_list(const rl_pref_dpo_stats_t *st, double loss, int nll,
                            rl_loss_stats_t *out);
void rl_pref_rm_stats_list(const rl_pref_rm_stats_t *st, double loss, int scores,
                           rl_loss_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif

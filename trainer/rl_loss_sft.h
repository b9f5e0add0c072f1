// rl_loss_sft — supervised fine-tuning cross-entropy on per-token logprobs (REFERENCE.md §1,
// token_mean aggregation):
//     L = -(1 / N_tok) * sum_{b,t} mask[b,t] * logp[b,t]
// where N_tok is the number of active tokens (mask = 1) of the GLOBAL batch: every
// micro-batch of one optimizer step (and, later, every data-parallel rank). Each micro-batch
// adds its share, so the sum over micro-batches equals the loss and the gradient of one big
// batch exactly. logp comes from rl_model_forward (aligned so logp[b,t] scores tokens[b,t]).
// Not a model: it sees only logp and the mask (its adapter, at the end, runs it through the
// policy's training step).
#ifndef RL_LOSS_SFT_H
#define RL_LOSS_SFT_H

#include "rl_loss.h"
#include "rl_policy.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Number of active tokens (mask != 0) of a (B,T) mask, to be summed over the global batch.
int64_t rl_loss_sft_count(const float *mask, int B, int T);

// Returns this micro-batch's contribution -(1/n_tok) * sum(mask * logp) over (B,T).
// n_tok > 0 is the global active-token count; with n_tok 0 the loss is 0.
double rl_loss_sft_forward(const float *logp, const float *mask, int B, int T, int64_t n_tok);

// Writes (=, not +=) dlogp (B,T) = dL/dlogp = -mask / n_tok (0 where the mask is 0).
void rl_loss_sft_backward(float *dlogp, const float *mask, int B, int T, int64_t n_tok);

// "sft", the loss's adapter: one pass of the negative log-likelihood of the masked tokens over
// N_tok = b->denom, the step's loss tokens (token_mean over the whole step), at temperature 1,
// micro-batches of b->micro_batch rows, then clip to optim.max_grad_norm and AdamW at rate
// b->lr. Statistics: loss, grad_norm. out->old_logp gets zeros (SFT has no logπ_old).
int rl_loss_sft_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                      const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

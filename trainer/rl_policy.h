// rl_policy — the trainable policy of an RL run: the model (LoRA or full), its AdamW state and
// the GRPO update over one generated batch. The actor worker (roles/) holds one and serves its
// verbs with it: logprobs (of the policy, or of the reference = the same model with adapters
// disabled), train (num_iterations epochs over the batch in micro-batches: forward ->
// rl_grpo_loss -> backward, clip, AdamW), export of the trainable weights for the samplers, and
// checkpoint save/load. Read top to bottom in rl_policy.c. No processes, no protocol.
#ifndef RL_POLICY_H
#define RL_POLICY_H

#include "rl_config.h"
#include "rl_grpo.h"
#include "rl_model.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_policy rl_policy_t;

// The model options a recipe implies (tuning mode, LoRA rank/alpha/targets/dropout/rsLoRA, seed,
// recompute) with `threads` threads. Samplers load with the same options so that the trainable
// flat layout of rl_model_trainable matches the actor's and weights copy across as one array.
void rl_policy_model_opts(const rl_recipe_t *recipe, int threads, rl_model_opts_t *out);

// Loads recipe->model.path as the recipe's tuning mode (LoRA r/alpha/targets/dropout, seeded
// with run.seed) with `threads` compute threads, and creates the optimizer. caller owns
// *out; free with rl_policy_destroy.
int rl_policy_new(const rl_recipe_t *recipe, int threads, rl_policy_t **out, char *err,
                  size_t err_len);
void rl_policy_destroy(rl_policy_t **self_p);
// borrowed; valid until destroy.
rl_model_t *rl_policy_model(rl_policy_t *self);

// One batch of B right-padded sequences (prompt + completion), rl_model_forward's layout.
typedef struct {
    int B, T;
    const int32_t *tokens;  // (B,T)
    const int *lengths;     // (B)
    const uint8_t *mask;    // (B,T) 1 on the completion tokens the loss looks at
    const double *adv;      // (B)
    const float *mu_logp;   // (B,T) sampler logprobs (logprob-aligned), or NULL
    const float *ref_logp;  // (B,T) reference logprobs, or NULL
    double denom;           // rl_grpo_batch_t.denom for the whole global batch
} rl_policy_batch_t;

// logp (B,T) of the policy (adapter = 1) or the reference (adapter = 0: LoRA disabled; full
// tuning: a frozen copy of the base model, loaded on first use) at temperature T, no gradients.
int rl_policy_logprobs(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B,
                       int T, float temperature, int adapter, float *logp, char *err,
                       size_t err_len);

typedef struct {
    rl_grpo_loss_stats_t loss; // sums over the last iteration's micro-batches
    double grad_norm;          // before clipping, of the last iteration
    double entropy;            // sum over active tokens of the policy entropy (first iteration)
    int iterations;
} rl_policy_train_stats_t;

// The GRPO update: `iterations` times, micro-batches of micro_batch sequences run forward ->
// rl_grpo_loss (alg) -> backward, then the gradient is clipped to max_grad_norm and AdamW steps
// at rate lr. The first iteration's forward runs with the weights that produced the batch, so
// its logprobs are logπ_old: they are written to old_logp (B,T) (may be NULL) and used as the
// old policy by the later iterations (with one iteration, old = logp detached, ratio 1).
// A non-finite loss or gradient norm is RL_EINVAL naming the iteration, and no update is made.
int rl_policy_train(rl_policy_t *self, const rl_policy_batch_t *b,
                    const rl_recipe_algorithm_t *alg, float temperature, int micro_batch,
                    int iterations, double lr, double max_grad_norm, float *old_logp,
                    rl_policy_train_stats_t *stats, char *err, size_t err_len);

// The trainable weights as one flat array (LoRA: every A and B in rl_lora.h's layout; full: every
// parameter): what a sampler loads. borrowed; valid until the next train call or destroy.
const float *rl_policy_weights(rl_policy_t *self, size_t *n_p);
// 1 for LoRA, 0 for full tuning.
int rl_policy_is_lora(const rl_policy_t *self);

// Writes <dir>/adapter/ (PEFT) or <dir>/model/ (HF, fp32) and <dir>/optimizer.bin; state.json
// is the caller's (the dropout counter is rl_model_train_step(rl_policy_model(self))).
int rl_policy_save(rl_policy_t *self, const char *dir, const char *base_model, char *err,
                   size_t err_len);
// Restores what rl_policy_save wrote (and the dropout counter).
int rl_policy_load(rl_policy_t *self, const char *dir, uint64_t model_train_step, char *err,
                   size_t err_len);
// Saves final/: the PEFT adapter, or an HF folder (bf16 when bf16) without tokenizer files.
int rl_policy_save_final(rl_policy_t *self, const char *dir, const char *base_model, int bf16,
                         char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

// rl_policy — the trainable policy of a run: the model (LoRA or full), its AdamW state and the one
// training step every loss runs (rl_policy_step with a loss callback; each loss's adapter, next
// to its math, is registered in rl_loss.h). The actor worker (roles/rl_role_actor.c) holds one and serves its
// verbs with it: logprobs (of the policy, or of the reference = the same model with adapters
// disabled), train (micro-batches: forward -> loss -> backward, clip, AdamW), export of the
// trainable weights for the samplers, and checkpoint save/load. Read top to bottom in
// rl_policy.c. No processes, no protocol, no loss.
#ifndef RL_POLICY_H
#define RL_POLICY_H

#include "rl_coll.h"
#include "rl_config.h"
#include "rl_model.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_policy rl_policy_t;

// The model options a recipe implies (tuning mode, LoRA rank/alpha/targets/dropout/rsLoRA, seed,
// recompute, model.device and, on a GPU, activations for a micro-batch of the longest sequences)
// with `threads` threads. Samplers load with the same options so that the trainable flat layout
// of rl_model_trainable matches the actor's and weights copy across as one array.
void rl_policy_model_opts(const rl_recipe_t *recipe, int threads, rl_model_opts_t *out);
// The most tokens of one sequence the recipe trains on: prompt and completion (an algorithm that
// samples: data.max_prompt_length + sampling.max_new_tokens), or an example (data.max_length).
int rl_policy_seq_len(const rl_recipe_t *recipe);
// The device of a role's model: roles.devices' entry for `role` ("actor", "critic",
// "reference", or "samplers": entry rank mod n of a list), else model.device. Returns 0, or
// RL_EINVAL with err saying which entry is not a device (rl_cli_check_model refuses those first).
int rl_policy_role_device(const rl_recipe_t *recipe, const char *role, int rank, rl_device_t *out,
                          char *err, size_t err_len);
// Checks roles.devices: its keys are roles that hold the model, its values device names
// (samplers: one or a non-empty list). Returns 0, or RL_EINVAL with err (no file position).
int rl_policy_check_devices(const rl_recipe_t *recipe, char *err, size_t err_len);

// Whether local sampler k can take the actor's weights through CUDA IPC (roles.weight_sync):
// the actor (rank 0) and the sampler on GPUs, the same one or the sampler's able to reach the
// actor's as a peer (the CUDA module asked). Returns 1, or 0 with why saying which is not so.
int rl_policy_sync_ipc(const rl_recipe_t *recipe, int k, char *why, size_t why_len);

// On a mesh (mesh.dp × mesh.fsdp > 1), the devices of the ranks of each group that holds the
// model (the actor's; a critic on the actor's ranks or a mesh of its own; a reference on a mesh
// of its own): rank r on rl_policy_role_device(role, r). Refuses (RL_EINVAL, *key the recipe key
// to name) a group mixing the CPU and GPUs, two ranks of one group on one GPU without
// mesh.share_devices, and GPUs on a mesh across hosts (mesh.hostfile). 1×1: nothing to check.
// With mesh.collectives: nccl, also refuses (*key "mesh.collectives") what NCCL cannot serve: the
// actor's mesh on the CPU or with ranks sharing a GPU, train.optimizer_offload, a reward model's
// score head (algorithm rm).
int rl_policy_check_mesh_devices(const rl_recipe_t *recipe, const char **key, char *err,
                                 size_t err_len);
// Whether the actor's mesh sums its gradients between the ranks' GPUs with NCCL and steps AdamW
// on the devices, its state split over the ranks (mesh.collectives, docs/gpu.md), as far as the
// recipe tells: more than one rank, on GPUs, each rank on a GPU of its own, no score head, no
// train.optimizer_offload, collectives not host. At start NCCL must also load on every rank
// (auto: else host memory, said once; nccl: else the run stops).
int rl_policy_wants_nccl(const rl_recipe_t *recipe);

// Loads recipe->model.path as the recipe's tuning mode (LoRA r/alpha/targets/dropout, seeded
// with run.seed) with `threads` compute threads, and creates the optimizer. caller owns
// *out; free with rl_policy_destroy.
int rl_policy_new(const rl_recipe_t *recipe, int threads, rl_policy_t **out, char *err,
                  size_t err_len);
void rl_policy_destroy(rl_policy_t **self_p);
// borrowed; valid until destroy.
rl_model_t *rl_policy_model(rl_policy_t *self);

// ---- the critic: the same decoder with a value head -----------------------------------------
// PPO's value model: critic.init's weights, tuned as critic.lora says (the lora section's rank,
// alpha and targets), and a value head w (C) on the final norm's output. `base`: model.path with
// a head drawn N(0, initializer_range) from run.seed, as HF initialises a fresh `score` head; a
// folder: a reward model (HF's <Arch>ForSequenceClassification, num_labels 1, as OpenRLHF starts
// its critic), its decoder and its `score.weight` [1, C] as the head (RL_EINVAL naming the
// folder when it has none). Its optimizer holds the model's
// trainable view and the head (rl_optim parts); rl_policy_step trains both, with the loss
// callback given values instead of logprobs. Same ownership as rl_policy_new.
int rl_policy_new_critic(const rl_recipe_t *recipe, int threads, rl_policy_t **out, char *err,
                         size_t err_len);
// A reward model (algorithm rm): model.path in the recipe's tuning mode (lora section) with a
// score head w (C): the folder's own `score.weight` when model.path is a reward model (an HF
// sequence classifier: training goes on from it), else a fresh head drawn as the critic's. Its
// optimizer, training (the registry's "rm": rl_pref_rm_train) and scores (rl_policy_scores) are
// the head model's.
// Same ownership as rl_policy_new.
int rl_policy_new_rm(const rl_recipe_t *recipe, int threads, rl_policy_t **out, char *err,
                     size_t err_len);
// ---- on a mesh ------------------------------------------------------------------------------
// Any of the three above on a DP×FSDP mesh: coll (borrowed; outlives the policy) shards the model
// over its fsdp groups (rl_fsdp.h; a full-tuning reference too, when first used). Every verb
// below is then collective: each rank of the mesh calls it in the same order with its own rows
// (B may be 0: the rank keeps its peers company), and rl_policy_step's gradient norm and update
// are the mesh's whole batch's (the loss callback's divisors must be the global batch's); its
// loss and the callbacks' statistics are this rank's share (the caller sums them).
// rl_policy_weights gathers full tuning's weights (collective too).
typedef enum { RL_POLICY_ACTOR = 0, RL_POLICY_CRITIC = 1, RL_POLICY_RM = 2 } rl_policy_kind_t;
int rl_policy_new_sharded(const rl_recipe_t *recipe, int threads, rl_policy_kind_t kind,
                          rl_coll_t *coll, rl_policy_t **out, char *err, size_t err_len);

// This rank's bytes of model state: parameters (the base's, frozen or trained; on a mesh this
// rank's shard), the gradients (full tuning's, or LoRA's adapter's; on a mesh this rank's
// pieces), what stays whole on every rank (LoRA's A and B; a head and its gradient), the
// optimizer's m and v, and the transient gather/gradient buffers of a mesh (a layer and the root
// unit); coll_seconds: time in the mesh's collectives so far.
typedef struct {
    size_t params, grads, replicated, optimizer, buffers;
    double coll_seconds;
} rl_policy_bytes_t;
void rl_policy_bytes(const rl_policy_t *self, rl_policy_bytes_t *out);

// 1 for a critic or a reward model (a head), 0 for the policy.
int rl_policy_has_head(const rl_policy_t *self);
// 1 on a mesh (rl_policy_new_sharded), 0 for 1×1.
int rl_policy_sharded(const rl_policy_t *self);
// On a mesh: v[0..n) summed over every rank (collective: each rank calls it in the same order),
// the global batch's divisors a loss needs; 1×1: nothing to do. Returns 0 or an error.
int rl_policy_sum_global(rl_policy_t *self, double *v, int n, char *err, size_t err_len);
// values (B,T) of a critic, aligned like logprobs (rl_head.h: column t is the value of the state
// before token t), no gradients. RL_EINVAL for the policy.
int rl_policy_values(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B, int T,
                     float *values, char *err, size_t err_len);

// logp (B,T) of the policy (adapter = 1) or the reference (adapter = 0: LoRA disabled; full
// tuning: a frozen copy of the base model, loaded on first use) at temperature T, no gradients.
int rl_policy_logprobs(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B,
                       int T, float temperature, int adapter, float *logp, char *err,
                       size_t err_len);

// ---- one training step for every loss ---------------------------------------------------------
// The step of every loss: `iterations` passes over the batch; in each, micro-batches (whole
// groups of rows.group rows: DPO's chosen/rejected pairs stay together) run forward (trimmed to
// their longest row; a critic's forward gives values) -> the loss callback (writes dlogp or
// dvalues, returns the micro-batch's share of the loss) -> backward; then the gradient (a
// critic's head included) is clipped to max_grad_norm and AdamW steps at rate lr. This is where
// a data-parallel mesh reduces gradients.

// The rows of a batch: B right-padded sequences (rl_model_forward's layout).
typedef struct {
    int B, T;
    const int32_t *tokens;  // (B,T)
    const int *lengths;     // (B)
    const uint8_t *mask;    // (B,T) 1 on the tokens the loss looks at
    int group;              // micro-batches hold whole groups of this many rows (0 or 1: any)
} rl_policy_rows_t;

// One micro-batch as the loss sees it.
typedef struct {
    int b0, n, T;            // rows [b0, b0+n) of the batch, trimmed to T columns
    int iteration;           // 0-based pass over the batch
    const float *logp;       // (n,T) this forward's logprobs (NULL for a critic)
    const float *entropy;    // (n,T) on the first pass when the step asks for it, else NULL
    const float *mask;       // (n,T) the rows' mask as 0/1 floats
    const float *values;     // (n,T) a critic's values (rl_head.h's alignment), else NULL;
                             // (n) the rows' scores with rl_policy_step_opts_t.scores
} rl_policy_micro_t;

// Writes dout (n,T) = d loss / d(the forward's output: logp, or a critic's values) of the
// micro-batch and *loss its share of the loss. Returns 0 or an error code (the step fails).
typedef int (*rl_policy_loss_fn)(void *ctx, const rl_policy_micro_t *mb, float *dout,
                                 double *loss);

typedef struct {
    float temperature;       // the forward's: logprobs of logits / temperature
    int micro_batch;         // rows per forward (rounded down to whole groups, at least one)
    int iterations;          // passes over the batch
    double lr, max_grad_norm;
    int entropy;             // 1: compute the policy entropy on the first pass
    int64_t step;            // > 0: errors name "step <step>" (one pass) instead of the pass
    int scores;              // a model with a head: 1 gives the callback each row's score (the
                             // head at its last real token, n values) instead of values (n,T)
} rl_policy_step_opts_t;

typedef struct {
    double loss;             // the last pass's loss (the sum of the micro-batches' shares)
    double grad_norm;        // before clipping, of the last pass
    int iterations;
} rl_policy_step_stats_t;

// The step above. A non-finite loss or gradient norm is RL_EINVAL naming the pass, and that
// pass makes no update. Returns 0 or an error with err filled.
int rl_policy_step(rl_policy_t *self, const rl_policy_rows_t *rows,
                   const rl_policy_step_opts_t *opts, rl_policy_loss_fn loss, void *ctx,
                   rl_policy_step_stats_t *stats, char *err, size_t err_len);

// The scores (B) of a model with a head: the head at each row's last real token, no gradients.
int rl_policy_scores(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B, int T,
                     float *scores, char *err, size_t err_len);

// Per row of `rows` the summed logprobs of its masked tokens (in double, temperature 1) under
// the policy (adapter = 1) or the reference (adapter = 0), micro_batch rows per forward, no
// gradients: DPO's reference sums. sums: caller's (rows->B doubles).
int rl_policy_sum_logprobs(rl_policy_t *self, const rl_policy_rows_t *rows, int adapter,
                           int micro_batch, double *sums, char *err, size_t err_len);

// The trainable weights as one flat array (LoRA: every A and B in rl_lora.h's layout; full: every
// parameter): what a sampler loads. borrowed; valid until the next train call or destroy.
const float *rl_policy_weights(rl_policy_t *self, size_t *n_p);
// The size of that array (on a mesh without gathering it).
size_t rl_policy_n_weights(const rl_policy_t *self);
// 1 for LoRA, 0 for full tuning.
int rl_policy_is_lora(const rl_policy_t *self);

// Writes <dir>/adapter/ (PEFT) or <dir>/model/ (HF, fp32) and <dir>/optimizer.bin; state.json
// is the caller's (the dropout counter is rl_model_train_step(rl_policy_model(self))).
int rl_policy_save(rl_policy_t *self, const char *dir, const char *base_model, char *err,
                   size_t err_len);
// Restores what rl_policy_save wrote (and the dropout counter).
int rl_policy_load(rl_policy_t *self, const char *dir, uint64_t model_train_step, char *err,
                   size_t err_len);
// Saves final/: the PEFT adapter, or an HF folder (bf16 when bf16) without tokenizer files. A
// model with a head (a reward model, a critic) is saved as transformers'
// <Arch>ForSequenceClassification folder (rl_model_save_seq_cls: LoRA merged, `score.weight`,
// num_labels 1, pad_token_id: -1 writes null) that `rewards: - model:` and critic.init load.
int rl_policy_save_final(rl_policy_t *self, const char *dir, const char *base_model, int bf16,
                         int pad_token_id, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

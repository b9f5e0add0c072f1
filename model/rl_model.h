// rl_model — the Llama / Qwen2 / Qwen3 decoder (REFERENCE.md §2) for training and sampling on
// CPU in fp32. It loads an HF folder, runs forward and backward over a batch of sequences of
// different lengths, and runs cached forward steps for the sampler. Every loss in rlctl is a
// function of per-token logprobs, so the training interface is: forward -> logp (B,T), the loss
// computes dL/dlogp, backward accumulates parameter gradients (full tuning) or LoRA gradients.
// A critic or reward model is the same decoder with a scalar head (rl_head) on the final norm's
// output instead: forward with logp = NULL, rl_model_hidden, rl_model_backward_hidden.
// The layer kernels live in rl_layers; LoRA state and PEFT I/O in rl_lora; the half of a model on
// a GPU in rl_model_cuda. This module knows nothing about processes, collectives or losses, nor
// optimizers beyond a GPU model's AdamW step run where its parameters are (rl_optim's semantics,
// hyperparameters given by the caller).
#ifndef RL_MODEL_H
#define RL_MODEL_H

#include "rl_device.h"
#include "rl_hf.h"
#include "rl_lora.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- parameters ------------------------------------------------------------------------------
// One layer's tensors, HF layout (a Linear weight is [out, in], y = x W^T + b). Absent tensors
// are NULL (biases the architecture lacks, q_norm/k_norm outside qwen3). C = hidden_size,
// I = intermediate_size, NH/NKV heads, D = head_dim.
typedef struct {
    float *input_layernorm;          // (C)
    float *q_proj, *q_bias;          // (NH*D, C), (NH*D)
    float *k_proj, *k_bias;          // (NKV*D, C), (NKV*D)
    float *v_proj, *v_bias;          // (NKV*D, C), (NKV*D)
    float *o_proj, *o_bias;          // (C, NH*D), (C)
    float *q_norm, *k_norm;          // (D), (D)   qwen3 only
    float *post_attention_layernorm; // (C)
    float *gate_proj, *gate_bias;    // (I, C), (I)   biases: llama mlp_bias only
    float *up_proj, *up_bias;        // (I, C), (I)
    float *down_proj, *down_bias;    // (C, I), (C)
} rl_layer_params_t;

// The whole model's tensors. The same struct describes parameters and (full tuning) gradients;
// every tensor of one struct lies in one contiguous allocation (or mmap) in HF order.
typedef struct {
    float *embed_tokens; // (V, C)
    rl_layer_params_t *layers; // [L]
    float *norm;         // (C)
    float *lm_head;      // (V, C); == embed_tokens when tie_word_embeddings
} rl_model_params_t;

// ---- options ---------------------------------------------------------------------------------
typedef enum { RL_TUNE_NONE = 0, RL_TUNE_FULL = 1, RL_TUNE_LORA = 2 } rl_tune_t;

// LoRA targets as a bit set (PEFT module names).
enum {
    RL_LORA_Q = 1 << 0, RL_LORA_K = 1 << 1, RL_LORA_V = 1 << 2, RL_LORA_O = 1 << 3,
    RL_LORA_GATE = 1 << 4, RL_LORA_UP = 1 << 5, RL_LORA_DOWN = 1 << 6,
    RL_LORA_ALL = 0x7f,
};

typedef struct {
    rl_tune_t tune;        // NONE: inference only (no gradients); FULL; LORA
    int lora_r;            // R
    float lora_alpha;      // scale = alpha / R (alpha / sqrt(R) with use_rslora)
    float lora_dropout;    // applied to the LoRA branch input in training forward only; the
                           // k-th training forward (k from 1) masks module m of layer l with
                           // rl_lora_dropout_mask(seed, rl_lora_dropout_key(k, l, m))
    int lora_targets;      // RL_LORA_* bits
    int use_rslora;
    uint64_t seed;         // LoRA A init and dropout masks
    int recompute;         // 1: keep only layer inputs; recompute a layer's activations in backward
    int threads;           // OpenBLAS / loop threads for this model (0 = all cores)
    int seq_cls;           // 1: the folder may be an <Arch>ForSequenceClassification (a reward
                           // model): its `score.weight` is allowed (the caller reads it) and
                           // `lm_head.weight` may be missing. Without it the model has no
                           // vocabulary head: forward takes logp = NULL only, and backward
                           // (from dlogp), logits, rl_model_step refuse; save_hf leaves it out
    int sharded;           // 1: the parameters (and full tuning's gradients) are the caller's,
                           // sharded across ranks (trainer/rl_fsdp): load maps or converts them
                           // as for a frozen model and allocates no gradients; the caller copies
                           // its shards, calls rl_model_drop_weights, and points each unit's
                           // tensors at gathered buffers from a unit hook (below)
    rl_device_t device;    // where forward and backward compute (rl_device.h; default the CPU).
                           // A GPU: load and new_random also build the model's device half
                           // (model/rl_model_cuda.h, docs/gpu.md): every parameter uploaded,
                           // every buffer allocated for device_rows tokens; forward, backward,
                           // backward_hidden and hidden then run there. The host keeps its fp32
                           // parameters and gradient arrays, which rl_model_device_push / _pull
                           // move. Not with sharded. rl_kvcache_new then makes the cache on
                           // the GPU and rl_model_step runs there too (the sampler's path),
                           // as rl_model_logits does
    int device_infer;      // a GPU: the model never trains here (a sampler, a reference): no
                           // gradients, optimizer moments or backward buffers on the device
    int device_host_optim; // a GPU: the optimizer steps on the host (a mesh, a head,
                           // train.optimizer_offload): no AdamW moments on the device
                           // (rl_model_device_adamw and _optim_state refuse)
    const unsigned char
        *device_comm_id; // a GPU mesh whose ranks hold GPUs of their own: the
                         // ranks' NCCL group (rl_device_comm_id, made by one rank; borrowed
                         // during load) of device_comm_ranks > 1 ranks, this one
                         // device_comm_rank. The optimizer steps on the device, split over the
                         // group (ZeRO-2 by units): each backward sums a unit's gradients
                         // over the ranks as soon as they are complete (every rank runs as many
                         // backwards: rl_model_units_idle), each rank keeping its part of every
                         // unit (1/ranks of the gradients, and of the moments); AdamW updates
                         // this rank's parts and they are gathered back. The gradients are never
                         // whole (rl_model_device_pull of them refuses). NULL: none. Not with
                         // device_host_optim
    int device_comm_ranks, device_comm_rank;
    const unsigned char
        *device_shard_id; // ZeRO-3 of the frozen layers: a GPU mesh's fsdp group (ranks on GPUs
                          // of their own, fsdp > 1) as an NCCL id (rl_device_comm_id, made by
                          // one rank; borrowed during load) of device_shard_ranks > 1 ranks, this
                          // one device_shard_rank. Each decoder layer's frozen tensors (the base
                          // under LoRA; a frozen model's) are split over the group: this rank
                          // holds 1/ranks of every layer and all-gathers a layer into one buffer
                          // before computing it (forward, backward, recompute), so every rank of
                          // the group must run the same forwards and backwards
                          // (rl_model_units_idle where it has no rows). The results are the
                          // unsharded model's bit for bit. Not with tune FULL (nothing frozen);
                          // no KV cache (rl_kvcache_new refuses). NULL: none
    int device_shard_ranks, device_shard_rank;
    int device_shard_masters; // with device_comm_id and tune FULL: ZeRO-3 of the masters too: each
                              // unit's fp32 masters (but the final norm's) kept only as this
                              // rank's ZeRO-2 part; the group gathers a layer's bf16 copy (each
                              // rank rounds its part) before it is computed, and the layers'
                              // vectors and the embedding's and head's whole bf16 copies after
                              // each step; so every rank must run the same forwards and
                              // backwards (rl_model_units_idle); rl_model_device_pull of the
                              // parameters is then a collective (every rank calls it alike) and
                              // rl_model_device_ipc_export refuses. The same numbers
    int device_rows;       // a GPU: the tokens (the sum of lengths) the activations are made
                           // for (0: 4096); a forward with more makes them anew for its size
                           // (once: they only grow), a KV cache's step with more is refused
} rl_model_opts_t;

// Defaults: tune NONE, r 8, alpha 16, dropout 0, targets q|v, no rslora, seed 0, no recompute,
// not seq_cls, the CPU.
void rl_model_opts_default(rl_model_opts_t *opts);

typedef struct rl_model rl_model_t;

// Loads config.json + weights of HF folder `dir`. Frozen base weights stored as F32 are used
// in place from the read-only mmap (tune NONE or LORA: the parameters are then read-only, and
// the mapping stays open until destroy); F16/BF16 (and F32 data a foreign writer left
// unaligned) are converted once into one allocation. With
// tune FULL the parameters are copied into one writable allocation and gradients are
// allocated. Every weight is checked once for NaN and inf (a pass over the data at memory speed).
// On failure returns NULL and writes why into err (missing file, weights that do not match the
// config, a tensor holding a non-finite value, named). caller owns result; free with
// rl_model_destroy.
rl_model_t *rl_model_load(const char *dir, const rl_model_opts_t *opts, char *err,
                          size_t err_len);

// Creates a model with freshly initialised weights (HF init: N(0, initializer_range), biases
// 0, norms 1) from a config, seeded: the same draws as `rlctl init --seed` (one rl_rng stream,
// tensor by tensor in HF order). The weights are one writable allocation whatever the tune
// mode. caller owns result; free with rl_model_destroy.
rl_model_t *rl_model_new_random(const rl_hf_config_t *cfg, const rl_model_opts_t *opts,
                                uint64_t seed, char *err, size_t err_len);

void rl_model_destroy(rl_model_t **self_p);

// borrowed; valid until destroy.
const rl_hf_config_t *rl_model_config(const rl_model_t *self);
// Parameters (borrowed; valid until destroy). Gradients: NULL unless tune FULL (with
// opts.sharded the struct whose pointers the unit hook sets). The mesh layer gathers/frees
// parameters per layer around these pointers (rl_layer_params_t per layer).
rl_model_params_t *rl_model_params(rl_model_t *self);
rl_model_params_t *rl_model_grads(rl_model_t *self);

// The tensor of a params (or grads) struct by its Hugging Face name ("model.layers.3.mlp.up_proj.
// weight", "lm_head.weight"); L is the model's layer count. Returns the address of the struct's
// pointer (whose value is NULL for a tensor the architecture lacks), or NULL for a name that is
// not a tensor of this layout. borrowed; valid while *p is.
float **rl_model_params_find(rl_model_params_t *p, int L, const char *name);

// Trainable parameters as one flat array (full: every parameter in HF order, the tied head
// once; LoRA: every A and B in rl_lora.h's layout), with its gradient array of the same length,
// for the optimizer. tune NONE: NULL and *n_p = 0. borrowed; valid until destroy.
float *rl_model_trainable(rl_model_t *self, size_t *n_p);
// The floats of that array, also once a model that only infers on a GPU gave it back
// (rl_model_drop_host_weights: rl_model_trainable is then NULL, rl_model_device_load fills the
// device's).
size_t rl_model_trainable_size(rl_model_t *self);
// Every parameter as one writable flat array in HF order (the tied head once), when the model
// holds them so: a full-tuning load, or rl_model_new_random whatever the tune mode. Else NULL.
// borrowed; valid until destroy.
float *rl_model_weights_flat(rl_model_t *self, size_t *n_p);
float *rl_model_trainable_grads(rl_model_t *self);
// The LoRA adapter (NULL without one): a sharded trainer points its layers' gradients per unit.
// borrowed; valid until destroy.
rl_lora_t *rl_model_lora(rl_model_t *self);
void rl_model_zero_grad(rl_model_t *self);

// ---- training forward / backward --------------------------------------------------------------
// tokens (B,T) row-major, right-padded; lengths[b] in 1..T tokens are real (positions 0..len-1);
// ids at padding positions are ignored (any value).
// Writes logp (B,T): logp[b,t] = log_softmax(logits[b,t-1] / temperature)[tokens[b,t]] for
// 1 <= t < lengths[b]; 0 at t = 0 and at padding. entropy (B,T) or NULL: the entropy of that
// same distribution (in nats), aligned the same way. logp = NULL (entropy must then be NULL
// too) skips the vocabulary head entirely, no lm_head matmul and no softmax: only the decoder
// and the final norm run, for a critic or reward model that reads rl_model_hidden (the
// temperature is still checked, and kept for a later rl_model_backward). `train` = 1 keeps
// what backward needs (and applies LoRA dropout); 0 is a plain evaluation. Buffers grow on the
// first call with a larger B*T and are reused after. Returns 0, RL_EINVAL (a token id outside
// [0, V), a length outside [1, T], entropy without logp) or RL_ENOMEM; details in
// rl_model_errmsg.
int rl_model_forward(rl_model_t *self, const int32_t *tokens, const int *lengths, int B, int T,
                     float temperature, int train, float *logp, float *entropy);

// Lanes. A forward (and its backward) of B >= 2 sequences runs as P = min(n, B) lanes of
// contiguous sequences with about equal token counts, each on a thread of its own with
// one-thread BLAS (the model's own work buffers and, for lanes after the first, gradients added
// into the model's after backward), so that the small GEMMs and the element-wise kernels of a
// layer run in parallel instead of as two-thread BLAS calls between single-threaded loops.
// n = 0 (the default): the OpenBLAS thread count at the forward (rl_layers_set_threads); 1: one
// lane. A sharded model (opts.sharded) always runs one. Results depend on P only through the
// order of the gradient sum (lane 0 + lane 1 + ...) and on the rows each sgemm call sees.
void rl_model_set_lanes(rl_model_t *self, int n);
// The workers of rl_model_step: n threads (the caller and a pool the model keeps, rl_pool.h) split
// every matmul of a step by output columns (each packs only its share of the weights, as
// multi-threaded BLAS does) and the row-wise work (norms, RoPE, attention) by rows, with
// one-thread BLAS and a barrier between the two kinds. At most one worker per 16 rows (a batched
// decode; a prefill of one prompt or a single row runs on the BLAS threads). n = 0 (default):
// the BLAS thread count; 1: no workers. A sharded model runs none. A row's logits depend on n
// only through which columns share an sgemm call.
void rl_model_set_step_lanes(rl_model_t *self, int n);

// The final norm's output (B*T, C) of the last successful forward (with or without logp): row
// b*T + t is position t of sequence b, the input of the vocabulary head (and of a scalar head,
// rl_head.h). Padding rows (t >= lengths[b]) are zeros: a forward packs the sequences and runs
// no row for padding. NULL when
// there was no successful forward (or after rl_model_set_train_step). borrowed; valid until the
// next forward, rl_model_load_adapter or destroy (backward leaves it intact).
const float *rl_model_hidden(const rl_model_t *self);

// The number of training forwards run so far: the k - 1 of the next forward's LoRA dropout
// masks (rl_model_opts_t.lora_dropout). A checkpoint stores it and a resume restores it with
// rl_model_set_train_step, so the masks continue as in an uninterrupted run.
uint64_t rl_model_train_step(const rl_model_t *self);
void rl_model_set_train_step(rl_model_t *self, uint64_t step);

// Backward of the last training forward: dlogp (B,T) is dL/dlogp (0 where the loss does not
// look). Accumulates (+=) into the gradients (full) or the LoRA gradients. Returns 0 or an error:
// RL_EINVAL for a tune NONE model or when the last forward was not a successful training one.
// Also valid after a forward with logp = NULL (the head recomputes its logits).
int rl_model_backward(rl_model_t *self, const float *dlogp);

// Backward of the last training forward from dhidden (B*T, C) = dL/d(rl_model_hidden) instead of
// dlogp, for a scalar head (critic values, reward scores; rl_head.h computes dhidden). The
// vocabulary head contributes nothing (lm_head gets no gradient from this call). Rows at
// padding (t >= lengths[b]) are ignored, as if 0. Accumulates (+=) into the gradients (full:
// final norm, layers, embedding) or the LoRA gradients, exactly as rl_model_backward does below
// the final norm (the same code). Same errors as rl_model_backward. Calling both backwards
// after one forward adds both losses' gradients.
int rl_model_backward_hidden(rl_model_t *self, const float *dhidden);

// Logits (B,T,V) of the last forward (raw: not divided by the temperature), for tests on small
// models (computed on demand from the saved final hidden states; zeros at padding rows). NULL when
// there was no successful forward or on allocation failure. caller owns result; free with free().
float *rl_model_logits(rl_model_t *self);

// ---- cached forward for sampling ----------------------------------------------------------------
// A KV cache with n_slots independent sequences of up to max_len tokens each.
typedef struct rl_kvcache rl_kvcache_t;
// Holds L * n_slots * NKV*D * ldk floats for K (transposed, after k_norm and RoPE; ldk = max_len
// rounded up to 16) and L * n_slots * max_len * NKV*D for V.
// The model must outlive the cache. caller owns result; free with rl_kvcache_destroy. NULL on
// allocation failure or n_slots/max_len < 1. A model on a GPU keeps its cache there
// (rl_model_cuda.h: (n_slots, max_len, NKV, D) per layer for K and for V, nothing on the host),
// and rl_kvcache_copy / _copy_from copy on the device.
rl_kvcache_t *rl_kvcache_new(const rl_model_t *model, int n_slots, int max_len);
void rl_kvcache_destroy(rl_kvcache_t **self_p);
// Copies the first `len` positions of slot src into slot dst (N samples share one prompt prefill).
void rl_kvcache_copy(rl_kvcache_t *self, int dst, int src, int len);
// The same from slot src of another cache of the same model (`len` within both caches' max_len):
// a sampler's kept sequences (sessions) live in a cache of their own.
void rl_kvcache_copy_from(rl_kvcache_t *self, int dst, const rl_kvcache_t *from, int src, int len);

// Runs n new tokens: token i belongs to slot slots[i] at position pos[i], and attends to that
// slot's cached positions 0..pos[i]-1 plus the tokens of this call in the same slot at smaller
// positions (so a prompt prefill is one call with consecutive positions, and a batched decode
// step is one call with one token per slot). Writes logits (n, V) when logits is non-NULL, or
// only for the rows where want[i] != 0 when want is non-NULL (prefill needs only the last row).
// Rows of one call for the same slot must have distinct positions. The logits are raw (no
// temperature). A loaded adapter is applied unmerged (the same branch as forward, no dropout;
// rl_model_set_adapter_disabled applies too). Uses sgemv when n == 1. Scratch grows with n and
// is kept in the cache. Returns 0, or RL_EINVAL (slot outside [0, n_slots), position outside
// [0, max_len), bad token id, a cache of another model; message in rl_model_errmsg), RL_ENOMEM.
int rl_model_step(rl_model_t *self, rl_kvcache_t *cache, const int32_t *tokens, const int *slots,
                  const int *pos, int n, const unsigned char *want, float *logits);

// The draws of a step drawn where its logits are (rl_model_step_draw): draw j takes one token
// from the logits of row rows[j] of the step (a row may serve several draws: a prompt's samples
// share its last row) with the uniform u[j] in [0, 1) (the caller's seeded stream; unused when
// greedy), in rollout/rl_sample.c's pipeline and conventions: temperature (0: greedy, argmax,
// lowest id on ties), then top-k, then top-p renormalised over what top-k kept, then an inverse
// CDF in id order; the logprob is log_softmax(logits / T)[token] over the full vocabulary (T = 1
// when greedy). temperature, top_k, top_p as rl_sample_opts_t, already checked by the caller.
typedef struct {
    float temperature;
    int top_k;
    float top_p;
    int n;           // draws
    const int *rows; // [n] rows of the step, in [0, the step's n)
    const double *u; // [n] uniforms in [0, 1) (may be NULL when greedy)
    int32_t *tokens; // [n] out: the drawn ids
    float *logprobs; // [n] out: their logprobs
} rl_model_draws_t;
// 1 when the model computes on a GPU (opts.device). Then rl_model_step_draw runs on it: its
// logits stay there (a row of V floats each) and its draws come back as a token and a logprob
// each. On the CPU the sampler draws from rl_model_step's logits itself (rollout/rl_sample.h).
int rl_model_on_gpu(const rl_model_t *self);
// rl_model_step (the same checks and cache semantics) with no logits returned: the draws of d
// are made on the device and their tokens and logprobs written. Returns 0, RL_EINVAL (a
// draw's row outside [0, n), a CPU model) or rl_model_step's errors.
int rl_model_step_draw(rl_model_t *self, rl_kvcache_t *cache, const int32_t *tokens,
                       const int *slots, const int *pos, int n, const rl_model_draws_t *d);

// ---- LoRA adapters (PEFT) ----------------------------------------------------------------------
// Loads adapter_config.json + adapter_model.safetensors into a model created with tune LORA or
// NONE (NONE: the adapter is applied unmerged for inference and replaces any earlier one).
// Shapes must match the model; with tune LORA the rank and target modules must also equal the
// model's (the optimizer's layout), and the adapter's lora_alpha/use_rslora are adopted (the
// model's dropout stays). Errors name the tensor or module (rl_lora_load lists the refusals).
// Returns 0, RL_EINVAL (mismatch, tune FULL), RL_EUNSUPPORTED, RL_ENOTFOUND or an I/O error.
int rl_model_load_adapter(rl_model_t *self, const char *dir, char *err, size_t err_len);
// Saves the LoRA weights as a PEFT folder (adapter_config.json with base_model_name_or_path,
// which may be NULL, adapter_model.safetensors, F32; dir is created when absent). Returns 0,
// RL_EINVAL (no adapter) or an I/O error with err filled.
int rl_model_save_adapter(const rl_model_t *self, const char *dir, const char *base_model,
                          char *err, size_t err_len);
// Disables (1) or re-enables (0) the LoRA branch: the reference policy is the actor with
// adapters disabled.
void rl_model_set_adapter_disabled(rl_model_t *self, int disabled);
// Saves the model as an HF folder (config.json with torch_dtype, model.safetensors in F32 or
// BF16, sharded at 5 GB like save_pretrained), with LoRA merged (W += scale * B A) when an
// adapter is loaded and not disabled. dir is created when absent (one level). tokenizer files
// are the caller's job. Returns 0 or an error with err filled.
int rl_model_save_hf(const rl_model_t *self, const char *dir, int bf16, char *err,
                     size_t err_len);
// As rl_model_save_hf with the weights' dtype (RL_DTYPE_F32, _BF16 or _F16: round to nearest
// even) and the largest shard in bytes of tensor data (0: save_pretrained's 5 GB); above it the
// weights are model-0000i-of-0000N.safetensors with model.safetensors.index.json.
int rl_model_save_hf_as(const rl_model_t *self, const char *dir, rl_dtype_t dtype,
                        size_t max_shard_bytes, char *err, size_t err_len);

// Saves the model with a scalar head as an HF sequence classifier (a reward model), laid out as
// transformers' <Arch>ForSequenceClassification with num_labels 1: config.json with that
// architecture, id2label/label2id and pad_token_id (-1: null); model.safetensors with the
// decoder's tensors (LoRA merged as rl_model_save_hf does), no lm_head, and `score.weight` =
// score (C floats) as [1, C]. rl_model_load with seq_cls reads it back. Returns 0 or an error
// with err filled.
int rl_model_save_seq_cls(const rl_model_t *self, const char *dir, const float *score,
                          int pad_token_id, int bf16, char *err, size_t err_len);

// ---- sharded parameters (FSDP: trainer/rl_fsdp) ---------------------------------------------
// A model loaded with opts.sharded is computed in *units*: unit l < L is decoder layer l, unit L
// the rest (embedding, final norm, vocabulary head; like FSDP's root module it stays gathered
// from a forward's start to the end of the backward that follows, or of the forward when no
// backward can follow). The hook is told, in this order:
//   forward:  GATHER(L); for l = 0..L-1: GATHER(l), RELEASE(l); [no backward can follow:
//             RELEASE(L)]
//   backward: GRADS(L); for l = L-1..0: GATHER(l), GRADS(l), REDUCE(l), RELEASE(l); REDUCE(L),
//             RELEASE(L)
// GATHER: point the unit's tensors in rl_model_params at its full values. GRADS (full tuning):
// point its tensors in rl_model_grads at zeroed full-size gradients. REDUCE: the unit's gradients
// of this backward are complete. RELEASE: the unit's parameters (and gradients) are not read
// again before its next GATHER. A GATHER of a unit still gathered must be a no-op. A hook error
// fails the forward or backward (RL_EIO with the hook's message in rl_model_errmsg).
typedef enum {
    RL_UNIT_GATHER = 0,
    RL_UNIT_GRADS = 1,
    RL_UNIT_REDUCE = 2,
    RL_UNIT_RELEASE = 3,
} rl_unit_event_t;
// Returns 0 or an error code with msg (msg_len bytes) filled.
typedef int (*rl_model_unit_fn)(void *ctx, int unit, rl_unit_event_t ev, char *msg, size_t msg_len);
// Sets the hook (NULL: none; a model without opts.sharded never calls it).
void rl_model_set_unit_hook(rl_model_t *self, rl_model_unit_fn fn, void *ctx);
// The events of one forward (train: and the backward that follows) without computing anything:
// a rank of a sharded mesh with no rows left keeps its peers' collectives company. On a GPU
// with opts.device_shard_id: the layers' gathers of one forward (train: and of the backward that
// follows), nothing else; any other GPU model does nothing. Returns 0 or the hook's (the
// device's) error.
int rl_model_units_idle(rl_model_t *self, int train);
// The ranks a GPU model's frozen layers are sharded over (opts.device_shard_ranks when it took
// effect), else 1.
int rl_model_device_shard_ranks(const rl_model_t *self);
// Frees what load kept of the parameters (the mapping, converted copies) and sets every tensor
// pointer of rl_model_params to NULL: from now on the unit hook provides them. opts.sharded only.
void rl_model_drop_weights(rl_model_t *self);
// A model on a GPU that trains nothing (tune NONE, an adapter loaded or not), only a LoRA adapter
// (tune LORA), only infers (opts.device_infer: a sampler, also of full tuning) or trains in full
// with the optimizer on the device (not opts.device_host_optim: a mesh's rank that saves nothing)
// gives its host copy of the weights back once the device holds them (a reference beside the
// actor, a LoRA actor's or sampler's base, a full-tuning sampler's or rank's whole model: 32 GB of
// host memory at Llama-3-8B). It then computes on the device only: saving the model and pushing
// every parameter are refused, and so are pushing, pulling (full training: a pull makes the
// group's gathers and keeps nothing) and loading an adapter without tune LORA (RL_EINVAL, saying
// why); a LoRA adapter stays on the host, is pushed, pulled, loaded and saved as before; new
// weights reach the device through rl_model_device_load. Returns 0, or RL_EINVAL for any other
// model (on the CPU, full tuning with the optimizer on the host), with rl_model_errmsg.
int rl_model_drop_host_weights(rl_model_t *self);

// ---- a model on a GPU (opts.device) -------------------------------------------------------------
// The device holds the parameters a forward reads and the gradients a backward writes; the host's
// arrays (rl_model_params, rl_model_trainable, rl_model_trainable_grads, the adapter) are what
// was last pushed or pulled. Push: host -> device, the trainable parameters (all = 0: after an
// optimizer step on the host) or every parameter (all = 1: after code changed frozen weights in
// rl_model_params). Pull: device -> host, the trainable parameters (grads = 0: before saving an
// adapter or checkpoint) or their gradients (grads = 1: before an optimizer step on the host).
// rl_model_zero_grad zeroes both sides; rl_model_load_adapter pushes what it loaded.
// On a CPU model both do nothing and return 0. Return 0, or RL_EIO with rl_model_errmsg.
int rl_model_device_push(rl_model_t *self, int all);
int rl_model_device_pull(rl_model_t *self, int grads);
// A weight sync's piece straight into the device (rl_model_cuda_load: the host's trainable
// array neither read nor written): floats [offset, offset + n) of rl_model_trainable's layout
// (rl_model_trainable_size floats in all); last = 1 after the last piece. A model on a GPU (a
// group's rank: the whole array in one piece). Returns 0, or RL_EINVAL (on the CPU, a range past
// the end) or RL_EIO with rl_model_errmsg.
int rl_model_device_load(rl_model_t *self, size_t offset, const float *w, size_t n, int last);
// The optimizer's step where the parameters are, so that a step moves nothing between host and
// device: trainer/rl_optim's semantics on the device's trainable parameters (the caller keeps
// the hyperparameters, the schedule and the step count). clip: rl_optim_clip_grad_norm (*norm:
// the norm before clipping); adamw: one rl_optim_step with step count `step` (>= 1, after
// incrementing); optim_state: AdamW's m and v to (upload 0) or from (upload 1) host arrays laid
// out as rl_model_trainable (rl_optim_m / _v), for checkpoints. A CPU model or tune NONE:
// RL_EINVAL. Return 0, RL_EINVAL or RL_EIO with rl_model_errmsg.
// With a group (opts.device_comm_id): every rank calls clip, adamw and optim_state alike; clip's
// norm is the group's sum's (each backward summed its units), adamw gathers the
// updated parts, optim_state moves the whole m and v (every rank gets, or gives, all; a rank
// that downloads with m and v NULL takes part in the gathers and copies nothing: a checkpoint's
// ranks that do not write it).
int rl_model_device_clip(rl_model_t *self, double max_norm, double *norm);
int rl_model_device_adamw(rl_model_t *self, double lr, double beta1, double beta2, double eps,
                          double weight_decay, int64_t step);
int rl_model_device_optim_state(rl_model_t *self, float *m, float *v, int upload);
// The trainable parameters from one process's GPU model to another's on this machine without a
// trip through host memory (CUDA IPC; the same GPU, or another it can reach as a peer). export:
// handle (RL_MODEL_IPC_HANDLE bytes) for the device array of this model's trainable parameters
// (stable for the model's life; the updates queued are waited for), *layout a fingerprint of
// its layout and *n its floats (with gaps: not rl_model_trainable's count). load, in another
// process: that array copied device to device over this model's trainable parameters (the
// handle is opened once and kept); a model laid out otherwise (another config or tuning) is
// refused (RL_EINVAL). The host arrays are not updated by a load. The exporter must not update
// its parameters while a load reads them (the controller's order: docs/gpu.md). A CPU model:
// RL_EINVAL. Return 0, RL_EINVAL or RL_EIO with rl_model_errmsg.
#define RL_MODEL_IPC_HANDLE 64
int rl_model_device_ipc_export(rl_model_t *self, unsigned char *handle, uint64_t *layout,
                               int64_t *n);
int rl_model_device_ipc_load(rl_model_t *self, const unsigned char *handle, uint64_t layout,
                             int64_t n);
// A critic's or reward model's scalar head (rl_head.h) where the model is, so that the hidden
// states (B*T, C) stay on the device: forward over the last forward's final-norm output, w (C)
// the head's weight; score 0: out (B,T) = rl_head_values_forward's values, 1: out (B) =
// rl_head_score_forward's scores. backward, after a training forward, from dout (that shape):
// dw (C) += the head's gradient, then rl_model_backward_hidden from the head's dL/dhidden. The
// same numbers as rl_head over rl_model_hidden (each dot product in double, rounded once). A
// CPU model: RL_EINVAL (use rl_head there). Return 0, RL_EINVAL, RL_ENOMEM or RL_EIO.
int rl_model_device_head_forward(rl_model_t *self, const float *w, int score, float *out);
int rl_model_device_head_backward(rl_model_t *self, const float *w, int score, const float *dout,
                                  float *dw);

// What a model's device half holds, in bytes: the parts rl_model_load checks against the
// device's free memory and then allocates (each buffer 256-byte aligned; the CUDA allocator's
// own rounding and the process's context are not counted).
typedef struct {
    size_t weights;   // frozen tensors: matrices bf16, vectors fp32
    size_t trainable; // trainable parameters (LoRA A/B, or all with tune FULL): fp32 + a bf16 copy
    size_t grads;     // their fp32 gradients (0: tune NONE or device_infer)
    size_t optim;     // AdamW's m and v, fp32 (0 likewise)
    size_t acts;      // activations and scratch for the forward's packed tokens
} rl_model_device_plan_t;
// The plan of a model of config cfg with opts (tune, LoRA rank, targets and dropout, recompute,
// device_infer) on a GPU, for forwards of `rows` packed tokens (0: 4096); has_head: a vocabulary
// head (0: a sequence classifier's trunk). Needs no device, only the CUDA module (its kernels'
// scratch sizes). Returns 0, or RL_ENOTFOUND (no module: err says why) / RL_ENOMEM.
int rl_model_device_plan(const rl_hf_config_t *cfg, const rl_model_opts_t *opts, int has_head,
                         int rows, rl_model_device_plan_t *out, char *err, size_t err_len);
// Bytes of a KV cache on a GPU (rl_kvcache_new of a GPU model with activations for `rows`
// tokens): K and V of every layer, the RoPE table, a step's staging and logits, and with draws
// (rl_model_step_draw) the logits of one row per slot.
size_t rl_model_device_kvcache_bytes(const rl_hf_config_t *cfg, int n_slots, int max_len, int rows,
                                     int draws);

// Bytes a model on a GPU holds there now (its parts as rl_model_device_plan counts them, the
// activations at their current size), and a KV cache on a GPU; 0 on the CPU. For tests.
size_t rl_model_device_bytes(const rl_model_t *self);
// A model on a GPU: the CUDA graphs its decode steps captured and launched so far (a decode
// step, every row its own sequence, runs its layers as one graph launched; the same kernels,
// the same bits). Returns NULL while graphs are on, else why not (RLCTL_CUDA_GRAPHS=0, or a
// capture that failed, after which steps are queued kernel by kernel); "on the CPU" there.
const char *rl_model_device_graphs(const rl_model_t *self, long long *captured,
                                   long long *launched);
size_t rl_kvcache_device_bytes(const rl_kvcache_t *cache);

// Detail of the last error on this handle. borrowed; valid until the next call.
const char *rl_model_errmsg(const rl_model_t *self);
// Parameter count of the base model (tied head counted once); the trainable count is the n of
// rl_model_trainable.
int64_t rl_model_param_count(const rl_model_t *self);

#ifdef __cplusplus
}
#endif
#endif

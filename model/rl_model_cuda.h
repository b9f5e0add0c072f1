// rl_model_cuda — the device half of rl_model_t: the decoder's training and scoring path on an
// NVIDIA GPU through the CUDA module's table (model/cuda/rl_cuda_module.h, loaded by rl_device;
// this is host C and never links CUDA). rl_model.c creates it when rl_model_opts_t.device is a
// GPU and routes rl_model_forward / _backward / _backward_hidden / _hidden to it; nothing else
// calls it. It also holds the sampler's path (a KV cache on the device and the cached step,
// behind rl_kvcache_t and rl_model_step), rl_model_logits, and the optimizer's step.
//
// What lives on the device (docs/gpu.md, "The design of the device model"):
// - frozen weights: matmul weights (2-D) bf16, converted from the host model's fp32 copy (a bf16
//   file's values round-trip exactly: its bits); norms and biases (1-D) fp32;
// - trainable parameters (LoRA A/B, or every tensor with tune FULL): fp32 masters, a bf16 copy
//   of each for the matmuls (refreshed at every push), fp32 gradients; each tensor starts
//   256-byte aligned (cuBLASLt's assumption), the gaps between tensors are zeros;
// - activations and scratch for opts.device_rows packed tokens, allocated at creation and
//   reused: no device allocation in a step (a forward with more tokens makes them anew, once,
//   for its size: they only grow);
// - AdamW's moments (fp32, the trainable tensors' layout), for the optimizer's step on the device.
// The forward and backward mirror rl_model.c's s_layer_forward / s_layer_backward line for line:
// the same layers in the same order, matmuls bf16 x bf16 -> fp32 (cuBLASLt), everything else
// fp32; every reduction deterministic, so the same inputs give the same bits run after run.
#ifndef RL_MODEL_CUDA_H
#define RL_MODEL_CUDA_H

#include "rl_model.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_model_cuda rl_model_cuda_t;

// The device half of `host` (a model whose parameters, and LoRA adapter, are on the host) on
// opts->device (a GPU), its activations for opts->device_rows packed tokens (0: 4096).
// Uploads every parameter and allocates every buffer. Refuses (RL_EINVAL) sharded models, and
// (RL_ENOMEM) when the device has less free memory than the model needs, naming the bytes of
// each part; RL_ENOTFOUND / RL_EUNSUPPORTED as rl_device_check says. Returns 0 and *out, or an
// error with err filled. host must outlive the result (its config, adapter and parameters are
// read at every push; its frozen ones until rl_model_cuda_host_dropped). caller owns *out; free
// with rl_model_cuda_destroy.
int rl_model_cuda_new(rl_model_t *host, const rl_model_opts_t *opts, rl_model_cuda_t **out,
                      char *err, size_t err_len);
void rl_model_cuda_destroy(rl_model_cuda_t **self_p);

// rl_model_forward on the device, inputs already checked by it (ids in [0, V), lengths in
// [1, T], temperature > 0, entropy only with logp). step: the host's training-forward count
// (the LoRA dropout masks' k, already incremented for a training forward); lora_off: the
// adapter is disabled. More packed tokens than the activations hold: they are made anew for
// this forward's size first. Returns 0, or RL_ENOMEM (no room for them: the message names the
// bytes) or RL_EIO (a device call failed), message in rl_model_cuda_errmsg.
int rl_model_cuda_forward(rl_model_cuda_t *self, const int32_t *tokens, const int *lengths, int B,
                          int T, float temperature, int train, uint64_t step, int lora_off,
                          float *logp, float *entropy);
// The final norm's output (B*T, C) of the last forward, zeros at padding, written into hid
// (host, B*T*C floats) on the first call after a forward (later calls leave it). Returns 0 or
// RL_EIO.
int rl_model_cuda_hidden(rl_model_cuda_t *self, float *hid);
// Backward of the last training forward (the caller checked there was one) from dlogp (B,T) or
// dhidden (B*T,C) (host), rl_model_backward's and _backward_hidden's semantics: += into the
// device gradients. Returns 0, RL_EINVAL (no vocabulary head) or RL_EIO.
int rl_model_cuda_backward(rl_model_cuda_t *self, const float *dlogp);
int rl_model_cuda_backward_hidden(rl_model_cuda_t *self, const float *dhidden);

// The scalar head (rl_head.h) of a critic or reward model on the last forward's final-norm
// output, on the device: only its outputs come back, not the (B*T, C) hidden states. w (C): the
// head's weight (host). score 0: out (B,T) = rl_head_values_forward's values; 1: out (B) =
// rl_head_score_forward's scores (each dot product in double, rounded once, as there).
// head_backward, after a training forward, from dout (the same shape): dw (C, host) += the
// head's gradient (one float add of its double sum, as rl_head's), then the model's backward
// from the head's dL/dhidden (rl_model_cuda_backward_hidden's semantics). The head's buffers
// are made at the first call and grow with B*T. Return 0, RL_EINVAL, RL_ENOMEM or RL_EIO.
int rl_model_cuda_head_forward(rl_model_cuda_t *self, const float *w, int score, float *out);
int rl_model_cuda_head_backward(rl_model_cuda_t *self, const float *w, int score, const float *dout,
                                float *dw);

// Zeroes the device gradients. Returns 0 or RL_EIO.
int rl_model_cuda_zero_grad(rl_model_cuda_t *self);
// Host -> device: the trainable parameters from the host model's arrays (all = 0: after a host
// optimizer step or an adapter load), or every parameter (all = 1), bf16 copies refreshed.
// Returns 0 or RL_EIO.
int rl_model_cuda_push(rl_model_cuda_t *self, int all);
// The host model gave its frozen weights back (rl_model_drop_host_weights): no tensor that is
// not trainable points at them any more (a push of every parameter is the caller's to refuse).
void rl_model_cuda_host_dropped(rl_model_cuda_t *self);
// Host -> device: w, floats [offset, offset + n) of the host's flat trainable array
// (rl_model_trainable's layout) straight into the device's trainable parameters, the host's
// array neither read nor written (a weight sync's bucket); last = 1 after the last piece: the bf16
// copies refreshed. Waits for the copies (w is the caller's again). A group's rank (ZeRO-2, or
// ZeRO-3 of the masters) takes the whole array in one piece only (offset 0, last), each rank its
// parts, as a push would. Returns 0, RL_EINVAL, RL_ENOMEM or RL_EIO.
int rl_model_cuda_load(rl_model_cuda_t *self, size_t offset, const float *w, size_t n, int last);
// Device -> host: the trainable parameters (grads = 0) or their gradients (grads = 1) into the
// host model's arrays (rl_model_trainable / rl_model_trainable_grads). Returns 0 or RL_EIO.
int rl_model_cuda_pull(rl_model_cuda_t *self, int grads);

// The optimizer's step on the device, over the trainable parameters in place (tune FULL or
// LORA; RL_EINVAL otherwise), with trainer/rl_optim's semantics:
// - clip: *norm = the gradients' global L2 norm (a sum of squares in double, in a fixed order);
//   when max_norm > 0 and max_norm / (norm + 1e-6) < 1, every gradient times (float) that;
// - adamw: one AdamW update (rl_optim.h's formula, the CPU's operations in its order) with step
//   count `step` (>= 1, after incrementing), then the bf16 copies refreshed;
// - optim_state: AdamW's m and v to (upload 0) or from (upload 1) host arrays laid out as the
//   host's trainable array (rl_model_trainable), for checkpoints.
// Return 0, RL_EINVAL or RL_EIO.
int rl_model_cuda_clip(rl_model_cuda_t *self, double max_norm, double *norm);
int rl_model_cuda_adamw(rl_model_cuda_t *self, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int64_t step);
int rl_model_cuda_optim_state(rl_model_cuda_t *self, float *m, float *v, int upload);

// The trainable parameters to another process on this machine without a trip through the host
// (CUDA IPC). export: handle (RL_CUDA_IPC_HANDLE bytes) for the device array of the trainable
// parameters (its address is stable for the model's life), *layout a fingerprint of how it is
// laid out and *n its floats; waits for the updates queued first. load: the exporter's array
// copied device to device over this model's (the handle is opened at its first use and kept
// until another handle comes or destroy), the bf16 copies refreshed, waited for; a layout or
// size other than this model's is refused (RL_EINVAL). The host arrays are not updated. The
// exporter must not update its parameters while a load reads them. Return 0, RL_EINVAL or RL_EIO.
int rl_model_cuda_ipc_export(rl_model_cuda_t *self, unsigned char *handle, uint64_t *layout,
                             size_t *n);
int rl_model_cuda_ipc_load(rl_model_cuda_t *self, const unsigned char *handle, uint64_t layout,
                           size_t n);

// ZeRO-3 of the frozen layers (rl_model_opts_t.device_shard_id): idle = the layers' gathers of
// one forward (train: and of its backward), for a rank with no rows while its group computes.
// Returns 0 (nothing to do unsharded) or RL_EIO. shard_ranks: the group's ranks, else 1.
int rl_model_cuda_idle(rl_model_cuda_t *self, int train);
int rl_model_cuda_shard_ranks(const rl_model_cuda_t *self);

// Bytes of device memory the device half holds. (For messages and tests.)
size_t rl_model_cuda_bytes(const rl_model_cuda_t *self);
// The decode steps' CUDA graphs so far: captured, and launched (each launch a step's trunk).
// Returns NULL while graphs are on, else why not.
const char *rl_model_cuda_graph_stats(const rl_model_cuda_t *self, long long *captured,
                                      long long *launched);
// rl_model_device_plan and rl_model_device_kvcache_bytes (rl_model.h): the sizes
// rl_model_cuda_new and rl_model_cuda_cache_new allocate, computed the same way without a device.
int rl_model_cuda_plan(const rl_hf_config_t *cfg, const rl_model_opts_t *opts, int has_head,
                       int rows, rl_model_device_plan_t *out, char *err, size_t err_len);
size_t rl_model_cuda_cache_plan(const rl_hf_config_t *cfg, int n_slots, int max_len, int rows,
                                int draws);

// rl_model_logits on the device: out (B,T,V) = the raw logits of the last forward's rows (the
// vocabulary head over the final norm's bf16 output, as the sampler's step computes them),
// zeros at padding. The first call makes a device buffer of 64 rows of logits, kept until
// destroy. Returns 0, or RL_EINVAL (no forward since the last step, no vocabulary head),
// RL_ENOMEM, RL_EIO.
int rl_model_cuda_logits(rl_model_cuda_t *self, float *out);

// ---- the sampler's path (rl_kvcache_t and rl_model_step of a model on a GPU) ----
// A KV cache on the device: per layer K and V, each (n_slots, max_len, NKV, D) bf16 (fp32 with
// RLCTL_CUDA_ATTN=fp32), after k_norm and RoPE (the CPU cache's values rounded as the bf16
// attention would round them, not its transposed layout), the RoPE table of its
// max_len positions, and a step's staging. Returns 0 and *out (free with
// rl_model_cuda_cache_free), or RL_EINVAL (no vocabulary head) / RL_ENOMEM (the device has no
// room: the message names the bytes) / RL_EIO, message in rl_model_cuda_errmsg.
typedef struct rl_model_cuda_cache rl_model_cuda_cache_t;
int rl_model_cuda_cache_new(rl_model_cuda_t *self, int n_slots, int max_len,
                            rl_model_cuda_cache_t **out);
void rl_model_cuda_cache_free(rl_model_cuda_t *self, rl_model_cuda_cache_t **c_p);
// Bytes the cache holds on the device now (its draws' buffers once made).
size_t rl_model_cuda_cache_bytes(const rl_model_cuda_t *self, const rl_model_cuda_cache_t *c);
// Copies positions 0..len-1 of slot src of `from` into slot dst of `to` (both this model's;
// len within both), on the device.
int rl_model_cuda_cache_copy(rl_model_cuda_t *self, rl_model_cuda_cache_t *to, int dst,
                             const rl_model_cuda_cache_t *from, int src, int len);
// rl_model_step on the device, inputs already checked by it (ids, slots and positions in
// range), n at most device_rows: the rows' k and v go into their slots, each row attends to its
// slot's positions 0..pos[i] (runs of consecutive positions of a slot are one prefill), and the
// raw logits of the rows asked for (want NULL: every row) come back into logits (n, V) at their
// rows (logits NULL: none). draws (or NULL): rl_model_step_draw's draws, checked by it, made on
// the device from the logits of the rows they name (each row's once); only their tokens and
// logprobs come back. The forward's activations are the step's afterwards (rl_model_cuda_hidden
// refuses until the next forward). lora_off: the adapter is disabled. Returns 0, or RL_EINVAL /
// RL_ENOMEM (no room for the draws' logits) / RL_EIO with the message in rl_model_cuda_errmsg.
int rl_model_cuda_step(rl_model_cuda_t *self, rl_model_cuda_cache_t *c, const int32_t *tokens,
                       const int *slots, const int *pos, int n, const unsigned char *want,
                       float *logits, const rl_model_draws_t *draws, int lora_off);
// Detail of the last error. borrowed; valid until the next call.
const char *rl_model_cuda_errmsg(const rl_model_cuda_t *self);

#ifdef __cplusplus
}
#endif
#endif

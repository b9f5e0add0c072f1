// rl_cuda_attn — causal GQA attention on the GPU (model/cuda/rl_cuda_attn.cu): training forward
// and backward over packed variable-length sequences, with the semantics and layouts of
// rl_attention_forward_packed / rl_attention_backward_packed (model/rl_layers.h), and decode and
// prefill against a device KV cache (rl_attention_decode / rl_attention_prefill's semantics on a
// cache layout of the GPU's own). Tiled FlashAttention-style kernels with an online softmax: no
// (T,T) matrix exists anywhere, and the backward is deterministic (no float atomics). Two
// versions: fp32 on the CUDA cores, and bf16 on the tensor cores (the *_bf16 calls at the end,
// the model's).
// Not the model: it owns no memory; callers pass device buffers.
//
// Common to every call: all pointers are device memory; every float buffer is fp32 and every
// index array int32. The scale is 1/sqrt(D); query head h uses kv head h / (NH/NKV) (NKV >= 1
// divides NH); 1 <= D <= 256 (any D: 40, 64, 80, 128, 256, odd ones too). Calls are queued on the
// context's stream and return 0, or -1 with the context's message set (bad shapes, a launch that
// failed). Index arrays (starts, slots, positions, lengths) are read on the device, so the host
// never waits; their contracts are the caller's, and where a wrong value could read or write out
// of bounds the kernel refuses the row instead (stated per call).
//
// The KV cache (this file's own layout, not the CPU's transposed K): per layer, K and V each
// (n_slots, max_len, NKV, D) fp32 — position p of slot s, kv head g at
// ((s * max_len + p) * NKV + g) * D — the rows of the training k/v (N, NKV, D), so that a block
// reads whole rows of D floats. Callers keep all layers in one buffer and pass a layer's base.
#ifndef RL_CUDA_ATTN_H
#define RL_CUDA_ATTN_H

#include "rl_cuda_module.h"

#ifdef __cplusplus
extern "C" {
#endif

// Training forward over B >= 1 packed sequences: sequence b is rows starts[b]..starts[b+1]-1
// (starts (B+1), non-decreasing, starts[B] = N; empty sequences allowed) of q (N,NH,D),
// k/v (N,NKV,D) and out (N,NH,D). Query t of a sequence attends to its keys 0..t.
// Writes (=) out, and lse (N*NH) = log-sum-exp of each row's scaled scores, in the CPU's packed
// layout: head h, query t of sequence b at lse[starts[b]*NH + h*len_b + t] (lse may be NULL).
// Saved for backward: q, k, v, out, lse. N = starts[B], given by the host (it sizes the grid).
int rl_cuda_attn_forward(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q, const float *k,
                         const float *v, const int *starts, int B, int N, int NH, int NKV, int D);

// Training backward: ACCUMULATES (+=) dq (N,NH,D), dk and dv (N,NKV,D) (each may be NULL: not
// computed) from dout (N,NH,D) and the forward's q, k, v, out and lse, with P recomputed from lse
// (never stored). delta (N*NH) is scratch (overwritten): delta[row*NH + h] = dout . out, which
// equals rowsum(P * dP) (see the .cu). Deterministic: every gradient element is summed by one
// thread in a fixed order, so two runs give the same bits.
int rl_cuda_attn_backward(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv, float *delta,
                          const float *dout, const float *q, const float *k, const float *v,
                          const float *out, const float *lse, const int *starts, int B, int N,
                          int NH, int NKV, int D);

// KV cache write: row i of k/v (n,NKV,D) goes to position pos[i] of slot slots[i] (slots, pos
// (n)) of one layer's kcache/vcache (n_slots, max_len, NKV, D): written (=). A row whose slot
// or position is out of range is not written (the caller's bug; never out of bounds).
int rl_cuda_attn_cache_write(rl_cuda_ctx_t *ctx, float *kcache, float *vcache, const float *k,
                             const float *v, const int *slots, const int *pos, int n, int n_slots,
                             int max_len, int NKV, int D);

// Batched decode: out (S,NH,D) = attention of query row s of q (S,NH,D) over positions
// 0..n_ctx[s]-1 of slot slots[s] (slots may be NULL: row s uses slot s) of one layer's cache:
// each row its own slot and context length (n_ctx (S) on the device). Writes (=) out. A row
// whose slot is out of range or whose n_ctx is not in 1..max_len is written as NaN.
int rl_cuda_attn_decode(rl_cuda_ctx_t *ctx, float *out, const float *q, const float *kcache,
                        const float *vcache, const int *slots, const int *n_ctx, int S, int NH,
                        int NKV, int D, int n_slots, int max_len);

// Batched prefill: B >= 1 runs of queries packed like the training forward's sequences: run b
// is rows q_starts[b]..q_starts[b+1]-1 (q_starts (B+1), q_starts[B] = N) of q (N,NH,D), at
// positions pos0[b]..pos0[b]+n_b-1 of slot slots[b], whose K/V are already in the cache (slots,
// pos0 (B)); query i attends to cached positions 0..pos0[b]+i. Writes (=) out (N,NH,D). Run b
// with pos0[b] = 0 computes the training forward's rows with the same tiles and arithmetic.
// A run whose slot is out of range or with pos0 < 0 or pos0 + n_b > max_len is written as NaN.
int rl_cuda_attn_prefill(rl_cuda_ctx_t *ctx, float *out, const float *q, const float *kcache,
                         const float *vcache, const int *q_starts, const int *slots,
                         const int *pos0, int B, int N, int NH, int NKV, int D, int n_slots,
                         int max_len);

// The bf16 attention (the model's): attn_forward and attn_prefill on the tensor cores (wmma,
// sm_80+): q, k, v rounded to bf16 as their tiles are loaded (the head dimension padded with
// zeros to a multiple of 16), S = Q K^T accumulated in fp32, the online softmax in fp32, P
// rounded to bf16 for P V (fp32 accumulation); l sums the unrounded p, so lse is the log-sum-exp
// of the rounded inputs' scores. The same contracts, shapes and refusals as the fp32 calls; a
// decode step's row is bit for bit the same row of a longer prefill. Blocks of 4 warps (64 query
// rows) when D <= 128, else 2 (32 rows); keys in tiles of 64.
int rl_cuda_attn_forward_bf16(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q,
                              const float *k, const float *v, const int *starts, int B, int N,
                              int NH, int NKV, int D);
// The prefill reads a bf16 cache (the fp32 cache's layout with bf16 elements, as
// rl_cuda_attn_cache_write_bf16 writes it): the values its tiles would round fp32 ones to.
int rl_cuda_attn_prefill_bf16(rl_cuda_ctx_t *ctx, float *out, const float *q,
                              const uint16_t *kcache, const uint16_t *vcache, const int *q_starts,
                              const int *slots, const int *pos0, int B, int N, int NH, int NKV,
                              int D, int n_slots, int max_len);

// rl_cuda_attn_cache_write into a bf16 cache: each element rounded to bf16 (to nearest even).
int rl_cuda_attn_cache_write_bf16(rl_cuda_ctx_t *ctx, uint16_t *kcache, uint16_t *vcache,
                                  const float *k, const float *v, const int *slots, const int *pos,
                                  int n, int n_slots, int max_len, int NKV, int D);

// rl_cuda_attn_backward with q, k and v rounded to bf16 as they are read, so that the P it
// recomputes from lse is the one attn_forward_bf16 normalised. Up to head_dim 128 on the tensor
// cores: dout rounded too, S and dP accumulated in fp32, P and dS = P (dP - delta) computed in
// fp32 and rounded to bf16 for dV += P^T dO, dK += dS^T Q, dQ += dS K (fp32 accumulation;
// FlashAttention-2's bf16 backward). Past 128, the fp32 CUDA-core kernels on the rounded q, k,
// v. Deterministic either way (no atomics).
int rl_cuda_attn_backward_bf16(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv, float *delta,
                               const float *dout, const float *q, const float *k, const float *v,
                               const float *out, const float *lse, const int *starts, int B, int N,
                               int NH, int NKV, int D);

// rl_cuda_attn_decode over a bf16 cache: the same fp32 arithmetic on the cache's values (q as
// given). For bench_gpu's comparison with the model's decode steps (attn_prefill_bf16).
int rl_cuda_attn_decode_bf16c(rl_cuda_ctx_t *ctx, float *out, const float *q,
                              const uint16_t *kcache, const uint16_t *vcache, const int *slots,
                              const int *n_ctx, int S, int NH, int NKV, int D, int n_slots,
                              int max_len);

#ifdef __cplusplus
}
#endif
#endif

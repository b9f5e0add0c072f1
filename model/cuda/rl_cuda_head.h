// rl_cuda_head — the vocabulary head on the GPU (rl_cuda_head.cu): the fused, chunked logprob
// head and its backward (the semantics of rl_logprob_forward / rl_logprob_backward in
// rl_layers.h), full logits for a batch of rows (the sampler's decode step), and the draw of one
// token per row on the device (greedy, temperature, top-k, top-p) from a counter-based stream.
// Not the rest of the model, and not a sampler of sequences (that is the device model's job).
//
// The module's table (rl_cuda_module.h) carries these functions; callers use the table. This
// header declares them for rl_cuda.cu's table and holds the stream's generator, Philox4x32-10,
// as a static inline function that the host (the tests, a CPU twin) computes bit for bit alike.
//
// Every buffer is device memory unless said otherwise; bf16 buffers are `uint16_t *` (the bits).
// The matmuls go through the module's cuBLASLt gemm, whose algorithms assume 256-byte aligned
// operands (cuBLASLt's default): h, w, logits and dw must start 256-byte aligned (cudaMalloc's
// alignment); chunk rows are copied into the scratch, so row offsets never need to be.
#ifndef RL_CUDA_HEAD_H
#define RL_CUDA_HEAD_H

#include "rl_cuda_module.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define RL_CUDA_HD __host__ __device__
#else
#define RL_CUDA_HD
#endif

// The largest vocabulary rl_cuda_sample takes: its top-p search sums fixed-point masses (one
// per token, at most 2^40 each) in 64-bit integers, exact and order-free for V < 2^23.
#define RL_CUDA_SAMPLE_MAX_V (1 << 23)

// ---- the head ----

// Bytes of the scratch that rl_cuda_logprob_forward / _backward use for `chunk` rows: the
// chunk's fp32 logits (chunk,V), its bf16 dlogits (chunk,V), its bf16 rows of h (chunk,C) and
// fp32 rows of dh (chunk,C), each 256-byte aligned. 0 when an argument is < 1. Allocate once
// (dmalloc) and reuse: at V = 151,936, chunk 64 is 59 MB, chunk 256 is 234 MB.
size_t rl_cuda_logprob_scratch_bytes(int chunk, int C, int V);

// For each row i < N with targets[i] >= 0, z = h_i (C) @ w^T / temperature (w is lm_head (V,C)):
//   logp[i] = log_softmax(z)[targets[i]],  entropy[i] = -sum_v p_v log p_v (nats; NULL: skipped).
// Rows with targets[i] < 0 get logp 0 and entropy 0 (=); a target >= V gets NaN.
//   logp (N) fp32 =, entropy (N) fp32 = or NULL, h (N,C) bf16, w (V,C) bf16, targets (N) int32;
//   temperature > 0; scratch: rl_cuda_logprob_scratch_bytes(chunk, C, V) bytes, 256-aligned.
// Rows go `chunk` at a time (the last chunk shorter): only (chunk, V) fp32 logits exist at once.
// Per row: max, sum of exp (double), logp and entropy with the max subtracted. Returns 0 or -1.
int rl_cuda_logprob_forward(rl_cuda_ctx_t *ctx, float *logp, float *entropy, const uint16_t *h,
                            const uint16_t *w, const int32_t *targets, float temperature, int N,
                            int C, int V, void *scratch, int chunk);

// Recomputes each chunk's logits. With p = softmax(z), onehot = e_target, H the row's entropy:
//   dz = dlogp_i (onehot - p) - dentropy_i p (log p + H);  dlogits = dz / temperature (bf16);
//   dh (N,C) fp32 += dlogits @ w;  dw (V,C) fp32 += dlogits^T @ h.
// dlogp (N) fp32; dentropy (N) fp32 or NULL (entropy treated as a constant); dh or dw NULL
// skips it. Rows with targets < 0 (whatever their dlogp), or with dlogp 0 and no dentropy (or
// dentropy 0), contribute nothing: their dh rows are left as they were, bit for bit. dlogits are
// rounded to bf16 for the two matmuls, as PyTorch's bf16 autocast does. Returns 0 or -1.
int rl_cuda_logprob_backward(rl_cuda_ctx_t *ctx, float *dh, float *dw, const float *dlogp,
                             const float *dentropy, const uint16_t *h, const uint16_t *w,
                             const int32_t *targets, float temperature, int N, int C, int V,
                             void *scratch, int chunk);

// ---- the sampler's head ----

// logits (S,V) fp32 = h (S,C) bf16 @ w^T, divided by temperature when temperature > 0
// (fl(z / T), as the head does), raw when it is 0. ldh: h's row stride in elements (>= C), so
// that the last position of each slot can be read in place. Returns 0 or -1.
int rl_cuda_logits(rl_cuda_ctx_t *ctx, float *logits, const uint16_t *h, int ldh, const uint16_t *w,
                   float temperature, int S, int C, int V);

// One token per row of raw logits (S,V) fp32, in the order of Hugging Face's logits warpers
// (rollout/rl_sample.c): temperature, then top-k, then top-p renormalised over what top-k kept,
// then a categorical draw. Tokens rank by logit (the lower id first on ties).
//   temperature 0: greedy (argmax, lowest id on ties); else >= 1e-6 (RL_SAMPLE_MIN_TEMPERATURE).
//   top_k: keep the k most likely; 0 or >= V = off.  top_p in (0, 1]: keep the shortest
//   most-likely prefix whose mass reaches top_p of the kept mass; 1 = off.
// Row s draws with u = rl_cuda_uniform(keys[s], steps[s]) (keys (S), steps (S) uint64; unused,
// and may be NULL, when greedy): the same (key, step) and logits give the same token on one
// device, whichever slot and batch the row is in.
// Writes tokens (S) int32 = the drawn ids and, unless NULL, logprobs (S) fp32 =
// log_softmax(logits / T)[token] over the full vocabulary (T = 1 when greedy; DESIGN.md §4).
// V <= RL_CUDA_SAMPLE_MAX_V. Returns 0 or -1.
int rl_cuda_sample(rl_cuda_ctx_t *ctx, int32_t *tokens, float *logprobs, const float *logits,
                   float temperature, int top_k, float top_p, const uint64_t *keys,
                   const uint64_t *steps, int S, int V);

// rl_cuda_sample with each draw's row and uniform given (the sampler's step): draw s reads row
// rows[s] of logits (R,V) (rows (S) int32 in [0, R), repeats allowed: a prompt's samples draw
// from its one row) and draws with u[s] (u (S) double in [0, 1), the caller's seeded streams;
// unused, and may be NULL, when greedy). tokens, logprobs and the rest as rl_cuda_sample.
// Returns 0 or -1.
int rl_cuda_sample_rows(rl_cuda_ctx_t *ctx, int32_t *tokens, float *logprobs, const float *logits,
                        const int32_t *rows, const double *u, float temperature, int top_k,
                        float top_p, int S, int V);

// ---- the stream: Philox4x32-10 (Salmon et al., SC'11; Random123's constants) ----

// ctr (4) = Philox4x32-10(ctr, key (2)), in place.
static inline RL_CUDA_HD void rl_cuda_philox(uint32_t ctr[4], const uint32_t key[2]) {
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * ctr[0];
        uint64_t p1 = (uint64_t)0xCD9E8D57u * ctr[2];
        uint32_t c0 = (uint32_t)(p1 >> 32) ^ ctr[1] ^ k0;
        uint32_t c2 = (uint32_t)(p0 >> 32) ^ ctr[3] ^ k1;
        ctr[0] = c0;
        ctr[1] = (uint32_t)p1;
        ctr[2] = c2;
        ctr[3] = (uint32_t)p0;
    }
}

// The uniform in [0, 1) (53 bits) of a stream `key` at counter `step`: Philox4x32-10 of the
// counter (step, 0) under the key, its first two words.
static inline RL_CUDA_HD double rl_cuda_uniform(uint64_t key, uint64_t step) {
    uint32_t c[4] = {(uint32_t)step, (uint32_t)(step >> 32), 0u, 0u};
    uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
    rl_cuda_philox(c, k);
    uint64_t bits = ((uint64_t)c[0] << 32 | c[1]) >> 11;
    return (double)bits * (1.0 / 9007199254740992.0);
}

#ifdef __cplusplus
}
#endif
#endif

// rl_cuda_module — the table the CUDA backend of the model exports from its own shared module,
// librlctl_cuda.so (model/cuda/*.cu, linked to the CUDA runtime statically and to cuBLASLt).
// rl_device loads it with dlopen only when a GPU is asked for, so the rlctl binary never links
// CUDA and the same build runs on machines without it (DESIGN.md §2). Internal to model/:
// nothing outside model/ and the tests includes this.
//
// Everything here is plain C: device buffers are `void *` / typed pointers the host never
// dereferences, bf16 buffers are `uint16_t *` (the bits of a bfloat16), and a context (`ctx`)
// is one device, one stream, one cuBLASLt handle and its workspace. Every call is queued on the
// context's stream (asynchronous) unless it says it waits; every call returns 0, or -1 with
// the context's message (errmsg) saying what failed: the CUDA call, its error name and string.
// A launch's error is read (cudaGetLastError) right after the launch; an error of a kernel's
// execution surfaces at the next call that waits (sync, d2h).
#ifndef RL_CUDA_MODULE_H
#define RL_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CUDA_MODULE_ABI 1
#define RL_CUDA_MODULE_FILE "librlctl_cuda.so"
#define RL_CUDA_MODULE_SYMBOL "rl_cuda_module"

typedef struct {
    char name[128];       // "NVIDIA H100 80GB HBM3"
    size_t mem_total;     // bytes
    size_t mem_free;      // bytes, when asked
    int cc_major, cc_minor; // compute capability (8.0 A100, 9.0 H100/H200)
    int sms;              // multiprocessors
} rl_cuda_device_info_t;

typedef struct rl_cuda_ctx rl_cuda_ctx_t;

// cuBLASLt matmul: C (M,N) = alpha * op(A) op(B) + beta * C, row-major as everywhere in rlctl:
// op(A) (M,K), op(B) (K,N); A stored (M,K) or, transposed, (K,M); B stored (K,N) or,
// transposed, (N,K) (a Linear weight (OC,C) is B transposed: y = x W^T). A and B bf16, C fp32,
// accumulation fp32. lda/ldb/ldc: row strides in elements.
typedef struct {
    int M, N, K;
    int trans_a, trans_b;
    int lda, ldb, ldc;
    float alpha, beta;
} rl_cuda_gemm_t;

typedef struct rl_cuda_api {
    int abi;         // RL_CUDA_MODULE_ABI
    int struct_size; // sizeof(rl_cuda_module_t) as the module was built

    // ---- the devices (no context needed) ----
    // The driver's and the runtime's CUDA versions (1000 * major + 10 * minor) and the number of
    // devices this process may use (CUDA_VISIBLE_DEVICES honoured). Returns 0, or -1 with msg
    // saying what was found instead: no driver (libcuda not loadable, or too old for the
    // runtime), no device.
    int (*probe)(int *n_devices, int *driver_version, int *runtime_version, char *msg,
                 size_t msg_len);
    // What device `index` is (its free memory too). Returns 0 or -1 with msg.
    int (*device_info)(int index, rl_cuda_device_info_t *out, char *msg, size_t msg_len);

    // ---- a context: device + stream + cuBLASLt + workspace ----
    // caller owns *out; free with ctx_free. Returns 0 or -1 with msg.
    int (*ctx_new)(int device, rl_cuda_ctx_t **out, char *msg, size_t msg_len);
    void (*ctx_free)(rl_cuda_ctx_t *ctx);
    // The message of the context's last failure (borrowed; valid until the next call).
    const char *(*errmsg)(const rl_cuda_ctx_t *ctx);
    // Waits for everything queued on the context's stream; reports a kernel's execution error.
    int (*sync)(rl_cuda_ctx_t *ctx);

    // ---- memory (cudaMalloc: never managed memory) ----
    // *out: bytes of device memory (not cleared); free with dfree. Allocate once, at create
    // time: never in a step's loop.
    int (*dmalloc)(rl_cuda_ctx_t *ctx, size_t bytes, void **out);
    void (*dfree)(rl_cuda_ctx_t *ctx, void *dptr);
    // Copies bytes host -> device / device -> host; d2h waits for the stream first.
    int (*h2d)(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes);
    int (*d2h)(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes);
    // dst = byte value `v`, bytes long (cudaMemsetAsync).
    int (*dset)(rl_cuda_ctx_t *ctx, void *dst, int v, size_t bytes);

    // ---- conversions ----
    // out (n) bf16 = round-to-nearest-even(in (n) fp32), as torch's .to(bfloat16) does.
    int (*f32_to_bf16)(rl_cuda_ctx_t *ctx, uint16_t *out, const float *in, size_t n);
    // out (n) fp32 = in (n) bf16, exactly.
    int (*bf16_to_f32)(rl_cuda_ctx_t *ctx, float *out, const uint16_t *in, size_t n);

    // ---- matmul ----
    // g's C (fp32) = alpha op(A) op(B) + beta C; A, B bf16 (see rl_cuda_gemm_t).
    int (*gemm)(rl_cuda_ctx_t *ctx, const rl_cuda_gemm_t *g, const uint16_t *A,
                const uint16_t *B, float *C);

    // ---- a Linear's bias (rl_cuda_lin.h) ----
    // out (N, OC) fp32, row stride ldo: every row = bias (OC) fp32 (then a gemm with beta 1).
    int (*bias_rows)(rl_cuda_ctx_t *ctx, float *out, int ldo, const float *bias, int N, int OC);
    // dbias (OC) fp32 += column sums of dout (N, OC) fp32 (row stride ldd), in row order.
    int (*bias_grad)(rl_cuda_ctx_t *ctx, float *dbias, const float *dout, int ldd, int N, int OC);

    // ---- vocabulary head and sampling (rl_cuda_head.cu; contracts in rl_cuda_head.h) ----
    // Bytes of the head's scratch for `chunk` rows: (chunk,V) fp32 logits + (chunk,V) bf16
    // dlogits + (chunk,C) bf16 h rows + (chunk,C) fp32 dh rows, each 256-aligned; 0 if an arg < 1.
    size_t (*logprob_scratch_bytes)(int chunk, int C, int V);
    // The fused chunked logprob head (rl_logprob_forward's semantics): for rows with
    // targets[i] >= 0, z = h_i @ w^T / temperature, logp[i] = log_softmax(z)[targets[i]],
    // entropy[i] = -sum p log p; rows with targets < 0 get 0. logp (N) fp32 =, entropy (N)
    // fp32 = or NULL, h (N,C) bf16, w (V,C) bf16 (lm_head), targets (N) int32, temperature > 0,
    // scratch: logprob_scratch_bytes(chunk, C, V) bytes. Nothing is saved (backward recomputes).
    int (*logprob_forward)(rl_cuda_ctx_t *ctx, float *logp, float *entropy, const uint16_t *h,
                           const uint16_t *w, const int32_t *targets, float temperature, int N,
                           int C, int V, void *scratch, int chunk);
    // Its backward (rl_logprob_backward's semantics), logits recomputed chunk by chunk:
    // dz = dlogp_i (onehot - p) - dentropy_i p (log p + H_i), dlogits = dz / T rounded to bf16;
    // dh (N,C) fp32 += dlogits @ w; dw (V,C) fp32 += dlogits^T @ h (NULL skips either).
    // dlogp (N) fp32, dentropy (N) fp32 or NULL; rows with targets < 0, or dlogp 0 and no
    // dentropy, contribute nothing (their dh rows are untouched).
    int (*logprob_backward)(rl_cuda_ctx_t *ctx, float *dh, float *dw, const float *dlogp,
                            const float *dentropy, const uint16_t *h, const uint16_t *w,
                            const int32_t *targets, float temperature, int N, int C, int V,
                            void *scratch, int chunk);
    // logits (S,V) fp32 = h (S,C) bf16, row stride ldh, @ w (V,C) bf16 ^T; divided by
    // temperature when > 0, raw when 0 (the sampler's decode step).
    int (*logits)(rl_cuda_ctx_t *ctx, float *logits, const uint16_t *h, int ldh,
                  const uint16_t *w, float temperature, int S, int C, int V);
    // One token per row of raw logits (S,V) fp32: greedy at temperature 0 (argmax, lowest id on
    // ties), else temperature -> top-k -> top-p (renormalised) -> draw with u =
    // rl_cuda_uniform(keys[s], steps[s]) (Philox4x32-10; keys, steps (S) uint64). tokens (S)
    // int32 =; logprobs (S) fp32 = log_softmax(logits / T)[token] over the full vocabulary (T = 1
    // when greedy), or NULL.
    int (*sample)(rl_cuda_ctx_t *ctx, int32_t *tokens, float *logprobs, const float *logits,
                  float temperature, int top_k, float top_p, const uint64_t *keys,
                  const uint64_t *steps, int S, int V);
} rl_cuda_module_t;

// The module's one export (RL_CUDA_MODULE_SYMBOL).
typedef const rl_cuda_module_t *(*rl_cuda_module_fn)(void);

#ifdef __cplusplus
}
#endif
#endif

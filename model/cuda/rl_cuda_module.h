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

    // ---- attention (rl_cuda_attn.h: causal GQA, fp32; scale 1/sqrt(D); 1 <= D <= 256) ----
    // Training forward over B >= 1 packed sequences: sequence b is rows starts[b]..starts[b+1]-1
    // (starts (B+1) int32 on the device, N = starts[B]) of q (N,NH,D), k/v (N,NKV,D), all fp32.
    // Writes (=) out (N,NH,D) fp32 and lse (N*NH) fp32 in the CPU's packed layout
    // (lse[starts[b]*NH + h*len_b + t]; NULL: not written). Saved for backward: q k v out lse.
    // rl_attention_forward_packed's semantics; no (T,T) matrix.
    int (*attn_forward)(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q,
                        const float *k, const float *v, const int *starts, int B, int N, int NH,
                        int NKV, int D);
    // Training backward: accumulates (+=) dq (N,NH,D), dk, dv (N,NKV,D) fp32 (NULL: skipped) from
    // dout (N,NH,D) and the forward's q, k, v, out, lse (all fp32); delta (N*NH) fp32 is scratch
    // (overwritten). rl_attention_backward_packed's semantics; deterministic (no atomics).
    int (*attn_backward)(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv, float *delta,
                         const float *dout, const float *q, const float *k, const float *v,
                         const float *out, const float *lse, const int *starts, int B, int N,
                         int NH, int NKV, int D);
    // KV cache (per layer: K and V each (n_slots, max_len, NKV, D) fp32, not transposed): writes
    // (=) row i of k/v (n,NKV,D) fp32 at slot slots[i], position pos[i] (int32 (n) on the device;
    // rows out of range are not written).
    int (*attn_cache_write)(rl_cuda_ctx_t *ctx, float *kcache, float *vcache, const float *k,
                            const float *v, const int *slots, const int *pos, int n, int n_slots,
                            int max_len, int NKV, int D);
    // Batched decode: writes (=) out (S,NH,D) fp32, row s = attention of q row s (S,NH,D) over
    // positions 0..n_ctx[s]-1 of slot slots[s] (slots NULL: slot s; int32 (S) on the device);
    // rl_attention_decode's semantics. Rows with a bad slot or n_ctx outside 1..max_len: NaN.
    int (*attn_decode)(rl_cuda_ctx_t *ctx, float *out, const float *q, const float *kcache,
                       const float *vcache, const int *slots, const int *n_ctx, int S, int NH,
                       int NKV, int D, int n_slots, int max_len);
    // Batched prefill: run b is q rows q_starts[b]..q_starts[b+1]-1 (q (N,NH,D) fp32) at
    // positions pos0[b].. of slot slots[b], attending to cached positions 0..pos0[b]+i (int32
    // arrays on the device); writes (=) out (N,NH,D) fp32. rl_attention_prefill's semantics.
    // Runs with a bad slot or pos0 + n_b > max_len: NaN.
    int (*attn_prefill)(rl_cuda_ctx_t *ctx, float *out, const float *q, const float *kcache,
                        const float *vcache, const int *q_starts, const int *slots,
                        const int *pos0, int B, int N, int NH, int NKV, int D, int n_slots,
                        int max_len);
} rl_cuda_module_t;

// The module's one export (RL_CUDA_MODULE_SYMBOL).
typedef const rl_cuda_module_t *(*rl_cuda_module_fn)(void);

#ifdef __cplusplus
}
#endif
#endif

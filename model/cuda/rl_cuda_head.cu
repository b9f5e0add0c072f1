// rl_cuda_head — the vocabulary head and the draw of tokens on the GPU (contract in
// rl_cuda_head.h): the chunked logprob head (forward, backward), full logits for the sampler's
// rows, and temperature / top-k / top-p sampling from a Philox stream.
//
// Numerics. Logits come from the module's cuBLASLt gemm (bf16 x bf16, fp32 accumulation), one
// chunk of rows at a time, into an fp32 scratch; then one block per row reduces the row:
// max, then sum of exp(z - max) (each term one fp32 expf of an argument <= 0, summed in double:
// the normaliser's error is then the expf's 1-2 ulp, whatever V and the block's shape, as the CPU
// head's double sums; an FP64 add per 4 bytes read costs nothing in a kernel bound by memory).
// Every reduction is a fixed tree (warp shuffles, then one warp over the warps' results): no
// float atomics, so a row's results are the same on every run.
//
// The gemm is the module's own (rl_cuda.cu's s_gemm, static there): called through the table
// that rl_cuda_module() returns, so that the core keeps a single definition.
#include "rl_cuda_common.cuh"
#include "rl_cuda_head.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>

// The module's export (rl_cuda.cu). Declared with the definition's visibility: the module builds
// with hidden visibility, and a hidden reference would hide the export itself at link time.
extern "C" __attribute__((visibility("default"))) const rl_cuda_module_t *rl_cuda_module(void);

// Threads of the row kernels: one block per row, a multiple of 32 (every warp full, so every
// shuffle uses the full mask) and at most 1024 (one warp reduces the warps' results).
#define S_THREADS 512

// ---------------------------------------------------------------------------------------------
// block reductions and scans (fixed order; every thread of the block must call them)

template <typename T> __device__ __forceinline__ T s_warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v; // the same bits in every lane: a + b == b + a
}

__device__ __forceinline__ float s_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}

// The block's sum of v, returned to every thread. sh: 32 entries of shared memory.
template <typename T> __device__ T s_block_sum(T v, T *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = s_warp_sum(v);
    __syncthreads(); // sh may still be read from the previous call
    if (lane == 0) {
        sh[wid] = v;
    }
    __syncthreads();
    if (wid == 0) {
        T x = lane < nw ? sh[lane] : (T)0;
        x = s_warp_sum(x);
        if (lane == 0) {
            sh[0] = x; // warp 0 read sh[lane] before the shuffles
        }
    }
    __syncthreads();
    return sh[0];
}

__device__ float s_block_max(float v, float *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = s_warp_max(v);
    __syncthreads();
    if (lane == 0) {
        sh[wid] = v;
    }
    __syncthreads();
    if (wid == 0) {
        float x = lane < nw ? sh[lane] : -INFINITY;
        x = s_warp_max(x);
        if (lane == 0) {
            sh[0] = x;
        }
    }
    __syncthreads();
    return sh[0];
}

__device__ int s_block_max_int(int v, int *sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    __syncthreads();
    if (lane == 0) {
        sh[wid] = v;
    }
    __syncthreads();
    if (wid == 0) {
        int x = lane < nw ? sh[lane] : INT_MIN;
        for (int o = 16; o > 0; o >>= 1) {
            x = max(x, __shfl_xor_sync(0xffffffffu, x, o));
        }
        if (lane == 0) {
            sh[0] = x;
        }
    }
    __syncthreads();
    return sh[0];
}

// (value, index) ranks before (w, j): larger value, or the same value and a lower index.
__device__ __forceinline__ bool s_before(float v, int i, float w, int j) {
    return v > w || (v == w && i < j);
}

// The block's argmax of (v, i): the largest v, the lowest i on ties; returned to every thread.
// shv, shi: 32 entries each. NaNs never win.
__device__ int s_block_argmax(float v, int i, float *shv, int *shi) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        int j = __shfl_xor_sync(0xffffffffu, i, o);
        if (s_before(w, j, v, i)) {
            v = w;
            i = j;
        }
    }
    __syncthreads();
    if (lane == 0) {
        shv[wid] = v;
        shi[wid] = i;
    }
    __syncthreads();
    if (wid == 0) {
        float x = lane < nw ? shv[lane] : -INFINITY;
        int k = lane < nw ? shi[lane] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_xor_sync(0xffffffffu, x, o);
            int j = __shfl_xor_sync(0xffffffffu, k, o);
            if (s_before(w, j, x, k)) {
                x = w;
                k = j;
            }
        }
        if (lane == 0) {
            shi[0] = k;
        }
    }
    __syncthreads();
    return shi[0];
}

// Exclusive scan of v over the threads in thread order. Returns this thread's exclusive prefix,
// sets *incl to its inclusive prefix and *total to the block's sum. The boundaries agree bit for
// bit: thread t's *incl is thread t+1's exclusive prefix (so the intervals [excl, incl) of the
// threads tile [0, total) with neither gaps nor overlaps, in floating point too). sh: 33 entries.
template <typename T> __device__ T s_block_scan(T v, T *sh, T *incl, T *total) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    T x = v; // inclusive scan within the warp (Hillis-Steele)
    for (int o = 1; o < 32; o <<= 1) {
        T y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) {
            x += y;
        }
    }
    T ex = __shfl_up_sync(0xffffffffu, x, 1); // the previous lane's inclusive prefix
    __syncthreads();
    if (lane == 31) {
        sh[wid] = x; // the warp's total
    }
    __syncthreads();
    if (threadIdx.x == 0) { // the warps' offsets, serially: offset[w] = offset[w-1] + total[w-1]
        T c = (T)0;
        for (int w = 0; w < nw; w++) {
            T t = sh[w];
            sh[w] = c;
            c += t;
        }
        sh[32] = c;
    }
    __syncthreads();
    T off = sh[wid];
    *incl = x + off;
    *total = sh[32];
    return lane == 0 ? off : ex + off;
}

// ---------------------------------------------------------------------------------------------
// the head: one block per row of a chunk's logits

// The row's maximum of fl(z / T), then S = sum exp(y) and, when want_sy, SY = sum exp(y) y, with
// y = fl(z / T) - max (fp32, as the CPU head), the sums in double.
__device__ void s_row_stats(const float *z, int V, float temperature, int want_sy, float *mx_p,
                            double *s_p, double *sy_p, float *shf, double *shd) {
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        mx = fmaxf(mx, z[v] / temperature);
    }
    mx = s_block_max(mx, shf);
    double s = 0.0, sy = 0.0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float y = z[v] / temperature - mx;
        float e = expf(y);
        s += e;
        sy += (double)e * y;
    }
    *mx_p = mx;
    *s_p = s_block_sum(s, shd);
    *sy_p = want_sy ? s_block_sum(sy, shd) : 0.0;
}

// Row r of the chunk: logp[r] = y_t - log S, entropy[r] = log S - SY / S (H = -sum p log p with
// log p = y - log S; written with the max subtracted, it has no cancellation between large terms).
//   logp (n) fp32 =, entropy (n) or NULL, z (n,V) fp32 logits before the temperature, targets (n).
__global__ void s_logprob_rows_kernel(float *logp, float *entropy, const float *z,
                                      const int32_t *targets, float temperature, int V) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    const size_t r = blockIdx.x;
    const int t = targets[r];
    if (t < 0 || t >= V) { // the same for the whole block: no thread waits at a barrier alone
        if (threadIdx.x == 0) {
            logp[r] = t < 0 ? 0.0f : NAN;
            if (entropy) {
                entropy[r] = t < 0 ? 0.0f : NAN;
            }
        }
        return;
    }
    const float *zr = z + r * (size_t)V;
    float mx;
    double s, sy;
    s_row_stats(zr, V, temperature, entropy != NULL, &mx, &s, &sy, shf, shd);
    if (threadIdx.x == 0) {
        double log_s = log(s);
        // as the CPU head: lse = max + log S (double), logp = fl(z_t / T) - lse
        logp[r] = (float)((double)(zr[t] / temperature) - ((double)mx + log_s));
        if (entropy) {
            entropy[r] = (float)(log_s - sy / s);
        }
    }
}

// Row r of the chunk's dlogits (bf16):
//   dl_v = [g (onehot_v - p_v) - ge p_v (log p_v + H)] / T,  g = dlogp, ge = dentropy (or 0),
// with p_v = exp(y_v) / S, log p_v = y_v - log S, H = log S - SY / S. Rows with no work (target
// < 0, or g = ge = 0) get zeros, so that the matmuls add nothing for them; a target >= V, NaN.
// The row sums are double; the per-entry arithmetic fp32 (its error, ~1e-7 relative, is far
// below the bf16 rounding that follows).
//   dl (n,V) bf16 =, z (n,V) fp32, dlogp (n), dentropy (n) or NULL, targets (n).
__global__ void s_dlogits_kernel(__nv_bfloat16 *dl, const float *z, const float *dlogp,
                                 const float *dentropy, const int32_t *targets, float temperature,
                                 int V) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    const size_t r = blockIdx.x;
    __nv_bfloat16 *dr = dl + r * (size_t)V;
    const int t = targets[r];
    const float g = t >= 0 ? dlogp[r] : 0.0f;
    const float ge = t >= 0 && dentropy ? dentropy[r] : 0.0f;
    if (t < 0 || t >= V || (g == 0.0f && ge == 0.0f)) {
        const __nv_bfloat16 fill = __float2bfloat16_rn(t >= V ? NAN : 0.0f);
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            dr[v] = fill;
        }
        return;
    }
    const float *zr = z + r * (size_t)V;
    float mx;
    double s, sy;
    s_row_stats(zr, V, temperature, ge != 0.0f, &mx, &s, &sy, shf, shd);
    const double log_s = log(s);
    const float inv_s = (float)(1.0 / s), log_s_f = (float)log_s, h = (float)(log_s - sy / s);
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float y = zr[v] / temperature - mx;
        float p = expf(y) * inv_s;
        float dz = g * ((v == t ? 1.0f : 0.0f) - p);
        if (ge != 0.0f) {
            dz -= ge * p * ((y - log_s_f) + h);
        }
        dr[v] = __float2bfloat16_rn(dz / temperature);
    }
}

// dh rows (n,C) fp32 += dhc (n,C) fp32.
__global__ void s_add_kernel(float *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        dst[i] += src[i];
    }
}

// x (n) fp32 = fl(x / t).
__global__ void s_div_kernel(float *x, size_t n, float t) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        x[i] = x[i] / t;
    }
}

static unsigned s_grid(size_t n) {
    unsigned b = rl_cuda_blocks(n, 256);
    return b < 65535u * 8u ? b : 65535u * 8u; // grid-stride loops do the rest
}

// ---------------------------------------------------------------------------------------------
// the head's launches

static size_t s_al(size_t bytes) {
    return (bytes + 255) & ~(size_t)255;
}

// The scratch's regions, each 256-byte aligned (cuBLASLt's default assumption).
typedef struct {
    float *z;          // (chunk,V) fp32 logits
    __nv_bfloat16 *dl; // (chunk,V) bf16 dlogits
    uint16_t *hc;      // (chunk,C) bf16 rows of h
    float *dhc;        // (chunk,C) fp32 rows of dh
} s_scratch_t;

static s_scratch_t s_carve(void *scratch, int chunk, int C, int V) {
    size_t cv = (size_t)chunk * V, cc = (size_t)chunk * C;
    char *p = (char *)scratch;
    s_scratch_t s;
    s.z = (float *)p;
    p += s_al(cv * sizeof(float));
    s.dl = (__nv_bfloat16 *)p;
    p += s_al(cv * sizeof(__nv_bfloat16));
    s.hc = (uint16_t *)p;
    p += s_al(cc * sizeof(uint16_t));
    s.dhc = (float *)p;
    return s;
}

size_t rl_cuda_logprob_scratch_bytes(int chunk, int C, int V) {
    if (chunk < 1 || C < 1 || V < 1) {
        return 0;
    }
    size_t cv = (size_t)chunk * V, cc = (size_t)chunk * C;
    return s_al(cv * sizeof(float)) + s_al(cv * sizeof(uint16_t)) + s_al(cc * sizeof(uint16_t)) +
           s_al(cc * sizeof(float));
}

static int s_head_args(rl_cuda_ctx_t *ctx, const char *what, float temperature, int N, int C, int V,
                       const void *scratch, int chunk) {
    if (N < 0 || C < 1 || V < 1 || chunk < 1) {
        return rl_cuda_fail(ctx, "%s: N %d, C %d, V %d, chunk %d: need N >= 0, C, V, chunk >= 1",
                            what, N, C, V, chunk);
    }
    if (!(temperature > 0.0f) || !isfinite(temperature)) {
        return rl_cuda_fail(ctx, "%s: temperature %g must be a positive number", what,
                            (double)temperature);
    }
    if (!scratch || (uintptr_t)scratch % 256 != 0) {
        return rl_cuda_fail(ctx,
                            "%s: the scratch (%p) must be a 256-byte aligned device buffer "
                            "of rl_cuda_logprob_scratch_bytes(chunk, C, V) bytes",
                            what, scratch);
    }
    return 0;
}

// z (n,V) fp32 = hc (n,C) @ w^T, hc the bf16 rows [r0, r0 + n) of h copied into the scratch.
static int s_chunk_logits(rl_cuda_ctx_t *ctx, const s_scratch_t *sc, const uint16_t *h,
                          const uint16_t *w, int r0, int n, int C, int V) {
    RL_CUDA_CHECK(ctx, cudaMemcpyAsync(sc->hc, h + (size_t)r0 * C, (size_t)n * C * sizeof(uint16_t),
                                       cudaMemcpyDeviceToDevice, ctx->stream));
    rl_cuda_gemm_t g;
    g.M = n;
    g.N = V;
    g.K = C;
    g.trans_a = 0; // hc stored (n,C)
    g.trans_b = 1; // w stored (V,C): op(B) = w^T (C,V)
    g.lda = C;
    g.ldb = C;
    g.ldc = V;
    g.alpha = 1.0f;
    g.beta = 0.0f;
    return rl_cuda_module()->gemm(ctx, &g, sc->hc, w, sc->z);
}

int rl_cuda_logprob_forward(rl_cuda_ctx_t *ctx, float *logp, float *entropy, const uint16_t *h,
                            const uint16_t *w, const int32_t *targets, float temperature, int N,
                            int C, int V, void *scratch, int chunk) {
    if (s_head_args(ctx, "logprob_forward", temperature, N, C, V, scratch, chunk) != 0) {
        return -1;
    }
    s_scratch_t sc = s_carve(scratch, chunk, C, V);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        if (s_chunk_logits(ctx, &sc, h, w, r0, n, C, V) != 0) {
            return -1;
        }
        s_logprob_rows_kernel<<<n, S_THREADS, 0, ctx->stream>>>(
            logp + r0, entropy ? entropy + r0 : NULL, sc.z, targets + r0, temperature, V);
        RL_CUDA_LAUNCHED(ctx, "logprob_rows");
    }
    return 0;
}

int rl_cuda_logprob_backward(rl_cuda_ctx_t *ctx, float *dh, float *dw, const float *dlogp,
                             const float *dentropy, const uint16_t *h, const uint16_t *w,
                             const int32_t *targets, float temperature, int N, int C, int V,
                             void *scratch, int chunk) {
    if (s_head_args(ctx, "logprob_backward", temperature, N, C, V, scratch, chunk) != 0) {
        return -1;
    }
    if (!dlogp) {
        return rl_cuda_fail(ctx, "logprob_backward: dlogp is NULL");
    }
    if (!dh && !dw) {
        return 0;
    }
    const rl_cuda_module_t *m = rl_cuda_module();
    s_scratch_t sc = s_carve(scratch, chunk, C, V);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        int n = N - r0 < chunk ? N - r0 : chunk;
        if (s_chunk_logits(ctx, &sc, h, w, r0, n, C, V) != 0) {
            return -1;
        }
        s_dlogits_kernel<<<n, S_THREADS, 0, ctx->stream>>>(
            sc.dl, sc.z, dlogp + r0, dentropy ? dentropy + r0 : NULL, targets + r0, temperature, V);
        RL_CUDA_LAUNCHED(ctx, "dlogits");
        const uint16_t *dl = (const uint16_t *)sc.dl;
        if (dh) { // dhc (n,C) = dl (n,V) @ w (V,C); dh rows [r0, r0 + n) += dhc
            rl_cuda_gemm_t g;
            g.M = n;
            g.N = C;
            g.K = V;
            g.trans_a = 0;
            g.trans_b = 0;
            g.lda = V;
            g.ldb = C;
            g.ldc = C;
            g.alpha = 1.0f;
            g.beta = 0.0f;
            if (m->gemm(ctx, &g, dl, w, sc.dhc) != 0) {
                return -1;
            }
            size_t nc = (size_t)n * C;
            s_add_kernel<<<s_grid(nc), 256, 0, ctx->stream>>>(dh + (size_t)r0 * C, sc.dhc, nc);
            RL_CUDA_LAUNCHED(ctx, "add");
        }
        if (dw) { // dw (V,C) += dl^T (V,n) @ hc (n,C); dl stored (n,V) = (K,M)
            rl_cuda_gemm_t g;
            g.M = V;
            g.N = C;
            g.K = n;
            g.trans_a = 1;
            g.trans_b = 0;
            g.lda = V;
            g.ldb = C;
            g.ldc = C;
            g.alpha = 1.0f;
            g.beta = 1.0f;
            if (m->gemm(ctx, &g, dl, sc.hc, dw) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

int rl_cuda_logits(rl_cuda_ctx_t *ctx, float *logits, const uint16_t *h, int ldh, const uint16_t *w,
                   float temperature, int S, int C, int V) {
    if (S < 0 || C < 1 || V < 1 || ldh < C) {
        return rl_cuda_fail(ctx,
                            "logits: S %d, C %d, V %d, ldh %d: need S >= 0, C, V >= 1, "
                            "ldh >= C",
                            S, C, V, ldh);
    }
    if (!(temperature >= 0.0f) || !isfinite(temperature)) {
        return rl_cuda_fail(ctx, "logits: temperature %g must be 0 (raw) or positive",
                            (double)temperature);
    }
    if (S == 0) {
        return 0;
    }
    rl_cuda_gemm_t g;
    g.M = S;
    g.N = V;
    g.K = C;
    g.trans_a = 0;
    g.trans_b = 1;
    g.lda = ldh;
    g.ldb = C;
    g.ldc = V;
    g.alpha = 1.0f;
    g.beta = 0.0f;
    if (rl_cuda_module()->gemm(ctx, &g, h, w, logits) != 0) {
        return -1;
    }
    if (temperature > 0.0f && temperature != 1.0f) {
        size_t n = (size_t)S * V;
        s_div_kernel<<<s_grid(n), 256, 0, ctx->stream>>>(logits, n, temperature);
        RL_CUDA_LAUNCHED(ctx, "div");
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// sampling: one block per row
//
// The kept set is a prefix of one total order of the tokens: larger logit first, the lower id
// first on ties (the CPU's order). Each token has a 32-bit key, monotone in its logit, so that
// "a prefix" is "key > k, or key == k and id <= j" for one cutoff (k, j). Top-k's cutoff is the
// k-th largest key, found by radix select (four passes of 8 bits, integer histograms in shared
// memory), and among the tokens with that key, the right number in id order (a block scan).
// Top-p's cutoff is found the same way with masses instead of counts: each token's weight
// exp((x - max) / T) <= 1 as a 64-bit fixed-point integer (2^40 units), so that histograms and
// prefix masses are exact integer sums, the same in any order (no float atomics: the cutoff
// never depends on the order threads ran in). The draw is an inverse CDF in id order over the
// kept tokens' weights (double), through a block scan whose threads' intervals tile [0, total).
// Cost: about 15 passes over the row (more with top-k and top-p); fine for correctness, a later
// pass can fuse them.

#define S_FIX_ONE 1099511627776.0 // 2^40: a weight of 1 in fixed point

// A key monotone in the float: a > b <=> key(a) > key(b); -0 and +0 share +0's key (they tie).
__device__ __forceinline__ uint32_t s_key(float x) {
    uint32_t u = __float_as_uint(x + 0.0f); // -0 + 0 = +0
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

typedef struct {
    const float *x; // (V) raw logits of the row
    int V;
    float mx;     // max of x
    double inv_t; // 1 / T
    // the top-k cutoff (use_k): kept when key > kk, or key == kk and id <= jk
    int use_k;
    uint32_t kk;
    int jk;
    // the top-p cutoff (use_p), within the top-k set
    int use_p;
    uint32_t kp;
    int jp;
} s_row_t;

// The token's weight exp((x - max) / T) in (0, 1] (the CPU sampler's formula: the difference
// and the division in double, one fp32 expf).
__device__ __forceinline__ float s_weight(const s_row_t *R, int v) {
    return expf((float)(((double)R->x[v] - (double)R->mx) * R->inv_t));
}

__device__ __forceinline__ unsigned long long s_fix(float e) {
    return (unsigned long long)((double)e * S_FIX_ONE);
}

__device__ __forceinline__ bool s_in_k(const s_row_t *R, int v, uint32_t key) {
    return !R->use_k || key > R->kk || (key == R->kk && v <= R->jk);
}

__device__ __forceinline__ bool s_kept(const s_row_t *R, int v) {
    uint32_t key = s_key(R->x[v]);
    return s_in_k(R, v, key) && (!R->use_p || key > R->kp || (key == R->kp && v <= R->jp));
}

// Shared memory of the sampling kernel.
typedef struct {
    unsigned int cnt[256];
    unsigned long long mass[256];
    double d[33];
    unsigned long long u[33];
    unsigned int n[33];
    float f[32];
    int i[32];
    int sel, found;
    unsigned int rem;
    unsigned long long acc;
} s_sh_t;

// Radix select: the key of the k-th largest token (1 <= k <= V) and how many tokens with that
// key the first k take (*rem >= 1), by counts.
__device__ void s_select_count(const s_row_t *R, int k, uint32_t *key_p, unsigned *rem_p,
                               s_sh_t *sh) {
    uint32_t prefix = 0, mask = 0;
    unsigned rem = (unsigned)k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) {
            sh->cnt[b] = 0;
        }
        __syncthreads();
        for (int v = threadIdx.x; v < R->V; v += blockDim.x) {
            uint32_t key = s_key(R->x[v]);
            if ((key & mask) == prefix) {
                atomicAdd(&sh->cnt[(key >> shift) & 255u], 1u);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            // the bin holding the rem-th largest of the group; rem <= the group's count, so
            // bin 0 holds it when no higher bin does
            int b = 255;
            for (; b > 0 && rem > sh->cnt[b]; b--) {
                rem -= sh->cnt[b];
            }
            sh->sel = b;
            sh->rem = rem;
        }
        __syncthreads();
        prefix |= (uint32_t)sh->sel << shift;
        mask |= 255u << shift;
        rem = sh->rem;
    }
    *key_p = prefix;
    *rem_p = rem;
}

// This thread's contiguous range of ids [lo, hi) (the scans run over ids in order).
__device__ __forceinline__ void s_range(int V, int *lo, int *hi) {
    int seg = (V + (int)blockDim.x - 1) / (int)blockDim.x;
    long long a = (long long)threadIdx.x * seg;
    *lo = a < V ? (int)a : V;
    *hi = a + seg < V ? (int)(a + seg) : V;
}

// The id of the rem-th token (in id order) among those with key `key`, by counts.
__device__ int s_nth_tie(const s_row_t *R, uint32_t key, unsigned rem, s_sh_t *sh) {
    int lo, hi;
    s_range(R->V, &lo, &hi);
    unsigned c = 0;
    for (int v = lo; v < hi; v++) {
        c += s_key(R->x[v]) == key;
    }
    unsigned incl, total;
    unsigned ex = s_block_scan(c, sh->n, &incl, &total);
    if (threadIdx.x == 0) {
        sh->found = R->V - 1;
    }
    __syncthreads();
    if (ex < rem && rem <= incl) { // exactly one thread: the counts are integers
        for (int v = lo; v < hi; v++) {
            if (s_key(R->x[v]) == key && ++ex == rem) {
                sh->found = v;
                break;
            }
        }
    }
    __syncthreads();
    return sh->found;
}

// Top-p within the top-k set: the cutoff (key, id) of the shortest prefix whose fixed-point mass
// M satisfies (double)M >= top_p * (the set's mass). Radix select by mass, then the ties by id.
__device__ void s_select_mass(s_row_t *R, float top_p, s_sh_t *sh) {
    unsigned long long q = 0;
    for (int v = threadIdx.x; v < R->V; v += blockDim.x) {
        if (s_in_k(R, v, s_key(R->x[v]))) {
            q += s_fix(s_weight(R, v));
        }
    }
    const unsigned long long Q = s_block_sum(q, sh->u);
    // Q >= 2^40 (the argmax weighs 1 and is kept), so 0 < target <= Q
    const double target = (double)top_p * (double)Q;
    uint32_t prefix = 0, mask = 0;
    unsigned long long acc = 0; // the mass ranked above the current group: (double)acc < target
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) {
            sh->mass[b] = 0;
        }
        __syncthreads();
        for (int v = threadIdx.x; v < R->V; v += blockDim.x) {
            uint32_t key = s_key(R->x[v]);
            if ((key & mask) == prefix && s_in_k(R, v, key)) {
                atomicAdd(&sh->mass[(key >> shift) & 255u], s_fix(s_weight(R, v)));
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            // acc + the group's mass reaches the target, so bin 0 does when no higher bin does
            int b = 255;
            for (; b > 0 && (double)(acc + sh->mass[b]) < target; b--) {
                acc += sh->mass[b];
            }
            sh->sel = b;
            sh->acc = acc;
        }
        __syncthreads();
        prefix |= (uint32_t)sh->sel << shift;
        mask |= 255u << shift;
        acc = sh->acc;
    }
    // among the kept tokens with key `prefix`, in id order: the first whose running mass reaches
    int lo, hi;
    s_range(R->V, &lo, &hi);
    unsigned long long m = 0;
    for (int v = lo; v < hi; v++) {
        uint32_t key = s_key(R->x[v]);
        if (key == prefix && s_in_k(R, v, key)) {
            m += s_fix(s_weight(R, v));
        }
    }
    unsigned long long incl, total;
    unsigned long long ex = s_block_scan(m, sh->u, &incl, &total);
    if (threadIdx.x == 0) {
        sh->found = R->V - 1;
    }
    __syncthreads();
    // (double)(acc + running) >= target is monotone in the running mass: one thread crosses
    if ((double)(acc + ex) < target && (double)(acc + incl) >= target) {
        unsigned long long c = acc + ex;
        for (int v = lo; v < hi; v++) {
            uint32_t key = s_key(R->x[v]);
            if (key == prefix && s_in_k(R, v, key)) {
                c += s_fix(s_weight(R, v));
                if ((double)c >= target) {
                    sh->found = v;
                    break;
                }
            }
        }
    }
    __syncthreads();
    R->kp = prefix;
    R->jp = sh->found;
}

// Draw s: tokens[s], logprobs[s] (see rl_cuda_sample / rl_cuda_sample_rows). logits fp32 raw,
// row rows[s] (rows NULL: row s); the uniform us[s] (us NULL: Philox of keys[s], steps[s]).
__global__ void s_sample_kernel(int32_t *tokens, float *logprobs, const float *logits,
                                const int32_t *rows, const double *us, float temperature, int top_k,
                                float top_p, const uint64_t *keys, const uint64_t *steps, int V) {
    __shared__ s_sh_t sh;
    const size_t row = blockIdx.x;
    s_row_t R;
    R.x = logits + (rows ? (size_t)rows[row] : row) * (size_t)V;
    R.V = V;
    R.inv_t = temperature > 0.0f ? 1.0 / (double)temperature : 1.0;
    R.use_k = R.use_p = 0;
    R.kk = R.kp = 0;
    R.jk = R.jp = 0;
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        mx = fmaxf(mx, R.x[v]);
    }
    R.mx = s_block_max(mx, sh.f);
    double s = 0.0; // the normaliser over the full vocabulary, for the logprob
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        s += s_weight(&R, v);
    }
    s = s_block_sum(s, sh.d);
    int tok;
    if (temperature == 0.0f) {
        float best = -INFINITY;
        int at = INT_MAX;
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            if (s_before(R.x[v], v, best, at)) {
                best = R.x[v];
                at = v;
            }
        }
        tok = s_block_argmax(best, at, sh.f, sh.i);
        tok = tok < V ? tok : 0; // every logit NaN: the CPU's argmax keeps id 0
    } else {
        if (top_k > 0 && top_k < V) {
            unsigned rem;
            s_select_count(&R, top_k, &R.kk, &rem, &sh);
            R.jk = s_nth_tie(&R, R.kk, rem, &sh);
            R.use_k = 1;
        }
        if (top_p < 1.0f) {
            s_select_mass(&R, top_p, &sh);
            R.use_p = 1;
        }
        // inverse CDF in id order over the kept weights
        int lo, hi;
        s_range(V, &lo, &hi);
        double wsum = 0.0;
        int last = -1;
        for (int v = lo; v < hi; v++) {
            if (s_kept(&R, v)) {
                float e = s_weight(&R, v);
                if (e > 0.0f) {
                    wsum += e;
                    last = v;
                }
            }
        }
        double incl, total;
        double ex = s_block_scan(wsum, sh.d, &incl, &total);
        const int last_all = s_block_max_int(last, sh.i); // where u -> 1 lands after rounding
        const double target = (us ? us[row] : rl_cuda_uniform(keys[row], steps[row])) * total;
        if (threadIdx.x == 0) {
            sh.found = last_all;
        }
        __syncthreads();
        if (ex <= target && target < incl) { // at most one thread: the intervals tile [0, total)
            double want = target - ex, c = 0.0;
            int got = last;
            for (int v = lo; v < hi; v++) {
                if (s_kept(&R, v)) {
                    float e = s_weight(&R, v);
                    if (e > 0.0f) {
                        c += e;
                        if (want < c) {
                            got = v;
                            break;
                        }
                    }
                }
            }
            sh.found = got;
        }
        __syncthreads();
        tok = sh.found >= 0 ? sh.found : 0; // no positive weight (NaN logits): id 0
    }
    if (threadIdx.x == 0) {
        tokens[row] = tok;
        if (logprobs) {
            logprobs[row] = (float)(((double)R.x[tok] - (double)R.mx) * R.inv_t - log(s));
        }
    }
}

// The checks and the launch of both entries (by_rows: sample_rows, its uniforms given).
static int s_sample(rl_cuda_ctx_t *ctx, const char *name, int by_rows, int32_t *tokens,
                    float *logprobs, const float *logits, const int32_t *rows, const double *us,
                    float temperature, int top_k, float top_p, const uint64_t *keys,
                    const uint64_t *steps, int S, int V) {
    if (S < 0 || V < 1 || V > RL_CUDA_SAMPLE_MAX_V) {
        return rl_cuda_fail(ctx, "%s: S %d, V %d: need S >= 0 and 1 <= V <= %d", name, S, V,
                            RL_CUDA_SAMPLE_MAX_V);
    }
    if (!(temperature >= 0.0f) || !isfinite(temperature) ||
        (temperature > 0.0f && temperature < 1e-6f)) {
        return rl_cuda_fail(ctx, "%s: temperature %g: must be 0 (greedy) or at least 1e-06", name,
                            (double)temperature);
    }
    if (top_k < 0 || !(top_p > 0.0f && top_p <= 1.0f)) {
        return rl_cuda_fail(ctx, "%s: top_k %d, top_p %g: need top_k >= 0 and top_p in (0, 1]",
                            name, top_k, (double)top_p);
    }
    if (temperature > 0.0f && !us && (!keys || !steps)) {
        return rl_cuda_fail(ctx, "%s: %s needed at a temperature above 0", name,
                            by_rows ? "uniforms are" : "keys and steps are");
    }
    if (by_rows && !rows && S > 0) {
        return rl_cuda_fail(ctx, "%s: each draw's row is needed", name);
    }
    if (S == 0) {
        return 0;
    }
    s_sample_kernel<<<S, S_THREADS, 0, ctx->stream>>>(tokens, logprobs, logits, rows, us,
                                                      temperature, top_k, top_p, keys, steps, V);
    RL_CUDA_LAUNCHED(ctx, name);
    return 0;
}

int rl_cuda_sample(rl_cuda_ctx_t *ctx, int32_t *tokens, float *logprobs, const float *logits,
                   float temperature, int top_k, float top_p, const uint64_t *keys,
                   const uint64_t *steps, int S, int V) {
    return s_sample(ctx, "sample", 0, tokens, logprobs, logits, NULL, NULL, temperature, top_k,
                    top_p, keys, steps, S, V);
}

int rl_cuda_sample_rows(rl_cuda_ctx_t *ctx, int32_t *tokens, float *logprobs, const float *logits,
                        const int32_t *rows, const double *u, float temperature, int top_k,
                        float top_p, int S, int V) {
    return s_sample(ctx, "sample_rows", 1, tokens, logprobs, logits, rows, u, temperature, top_k,
                    top_p, NULL, NULL, S, V);
}

// rl_cuda_elt — the element-wise and small kernels of the decoder and the optimizer (see
// rl_cuda_elt.h for the numerics, rl_cuda_module.h for each entry's contract), each kernel with
// its launch function beside it (llm.c). Written for correctness first: one thread per element
// or pair (grid-stride loops), one warp per row for the row reductions, two launches for the
// sums over rows; a later pass optimises with measurements.
//
// Arithmetic that must be the CPU's bit for bit goes through __fmul_rn / __fadd_rn / __fsub_rn
// / __fdiv_rn / __fsqrt_rn: nvcc contracts a * b + c into an FMA unless told not to (the CPU's
// kernels round each product: x86-64's baseline has no FMA, and rl_layers.c is built with
// -ffp-contract=off), and these intrinsics are never contracted.
#include "rl_cuda_common.cuh"
#include "rl_cuda_elt.h"

#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum {
    S_THREADS = 256,      // threads per block of the element-wise kernels
    S_ROWS_PER_BLOCK = 8, // warps (rows) per block of the row kernels (256 threads)
    S_COL_TILE = 32,      // columns per block of the column sums (one warp wide)
    S_COL_LANES = 8,      // row lanes per block of the column sums
};

// Blocks of the element-wise grid-stride loops: the loops make any count right; this bounds it.
static unsigned s_grid(size_t n) {
    unsigned b = rl_cuda_blocks(n, S_THREADS);
    return b < (1u << 20) ? b : (1u << 20);
}

static __device__ __forceinline__ size_t s_tid(void) {
    return blockIdx.x * (size_t)blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ size_t s_stride(void) {
    return (size_t)gridDim.x * blockDim.x;
}

// The sum of v over the 32 lanes of a full warp, the same bits in every lane: the butterfly
// adds the same two values in both lanes of each pair (addition commutes exactly).
static __device__ __forceinline__ double s_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

static __device__ __forceinline__ float s_nan(void) {
    return __int_as_float(0x7fc00000);
}

// ---------------------------------------------------------------------------------------------
// scratch

size_t rl_cuda_elt_scratch_doubles(int C) {
    size_t cols = (size_t)RL_CUDA_ELT_CHUNKS * (size_t)(C > 0 ? C : 0);
    size_t sumsq = (size_t)RL_CUDA_ELT_SUMSQ_BLOCKS + 1;
    return cols > sumsq ? cols : sumsq;
}

// The row chunks of a column sum over N rows: per rows each, n chunks (<= RL_CUDA_ELT_CHUNKS),
// a function of N only (so the sums are the same bits on every device).
static void s_chunks(int N, int *per, int *n) {
    *per = (N + RL_CUDA_ELT_CHUNKS - 1) / RL_CUDA_ELT_CHUNKS;
    *per = *per > 0 ? *per : 1;
    *n = (N + *per - 1) / *per;
}

// dst (C) fp32 += (float)(sum over chunks j in order of part[j*C + c]) (double partials).
static __global__ void s_colsum_finish_kernel(float *dst, const double *part, int n_chunks, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    double s = 0.0;
    for (int j = 0; j < n_chunks; j++) {
        s += part[(size_t)j * C + c];
    }
    dst[c] = __fadd_rn(dst[c], (float)s);
}

// ---------------------------------------------------------------------------------------------
// embedding

static __global__ void s_embedding_forward_kernel(float *out, const int32_t *ids,
                                                  const __nv_bfloat16 *wte, size_t n, int C,
                                                  int V) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        size_t row = i / (size_t)C;
        int c = (int)(i - row * (size_t)C);
        int32_t id = ids[row];
        float y = 0.0f;
        if (id >= V) {
            y = s_nan();
        } else if (id >= 0) {
            y = __bfloat162float(wte[(size_t)id * C + c]);
        }
        out[i] = y;
    }
}

int rl_cuda_elt_embedding_forward(rl_cuda_ctx_t *ctx, float *out, const int32_t *ids,
                                  const uint16_t *wte, int N, int C, int V) {
    if (N < 0 || C <= 0 || V <= 0) {
        return rl_cuda_fail(ctx, "embedding_forward: N %d, C %d, V %d", N, C, V);
    }
    size_t n = (size_t)N * (size_t)C;
    if (n == 0) {
        return 0;
    }
    s_embedding_forward_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(
        out, ids, (const __nv_bfloat16 *)wte, n, C, V);
    RL_CUDA_LAUNCHED(ctx, "embedding_forward");
    return 0;
}

// The plan: sorting by (id, row), a total order on distinct rows, gives one result whatever the
// sort's algorithm; runs of equal ids are then contiguous and in increasing row order.
int rl_cuda_elt_embedding_plan(rl_cuda_ctx_t *ctx, const int32_t *ids, int N, int V, int32_t *rows,
                               int32_t *seg, int *n_seg) {
    *n_seg = 0;
    if (N < 0 || V <= 0) {
        return rl_cuda_fail(ctx, "embedding_plan: N %d, V %d", N, V);
    }
    int m = 0;
    for (int i = 0; i < N; i++) {
        if (ids[i] >= V) {
            return rl_cuda_fail(ctx,
                                "embedding_plan: ids[%d] = %d is outside the vocabulary "
                                "(V = %d)",
                                i, (int)ids[i], V);
        }
        if (ids[i] >= 0) {
            rows[m++] = i;
        }
    }
    std::sort(rows, rows + m,
              [ids](int32_t a, int32_t b) { return ids[a] != ids[b] ? ids[a] < ids[b] : a < b; });
    int u = 0;
    for (int k = 0; k < m; k++) {
        if (k == 0 || ids[rows[k]] != ids[rows[k - 1]]) {
            seg[u++] = k;
        }
    }
    seg[u] = m;
    *n_seg = u;
    return 0;
}

// Block (u, column tile): run u's vocabulary row, one thread per column, adding the run's rows
// in increasing row order from dwte's old value (rl_embedding_backward's order of additions).
static __global__ void s_embedding_backward_kernel(float *dwte, const float *dout,
                                                   const int32_t *ids, const int32_t *rows,
                                                   const int32_t *seg, int C) {
    int u = blockIdx.x;
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) {
        return;
    }
    int k0 = seg[u], k1 = seg[u + 1];
    if (k1 <= k0) {
        return;
    }
    float *d = dwte + (size_t)ids[rows[k0]] * C + c;
    float acc = *d;
    for (int k = k0; k < k1; k++) {
        acc = __fadd_rn(acc, dout[(size_t)rows[k] * C + c]);
    }
    *d = acc;
}

int rl_cuda_elt_embedding_backward(rl_cuda_ctx_t *ctx, float *dwte, const float *dout,
                                   const int32_t *ids, const int32_t *rows, const int32_t *seg,
                                   int n_seg, int C) {
    if (n_seg < 0 || C <= 0) {
        return rl_cuda_fail(ctx, "embedding_backward: n_seg %d, C %d", n_seg, C);
    }
    if (n_seg == 0) {
        return 0;
    }
    dim3 grid((unsigned)n_seg, (unsigned)((C + S_THREADS - 1) / S_THREADS));
    s_embedding_backward_kernel<<<grid, S_THREADS, 0, ctx->stream>>>(dwte, dout, ids, rows, seg, C);
    RL_CUDA_LAUNCHED(ctx, "embedding_backward");
    return 0;
}

// ---------------------------------------------------------------------------------------------
// RMSNorm: y = w * (x * r), r = 1/sqrt(fl(ss / C) + eps), ss = sum x^2 in double (the CPU's
// rounding sequence: rl_rmsnorm_forward). One warp per row; a row's warp exits as a whole, so
// every shuffle has its 32 lanes.

static __global__ void s_rmsnorm_forward_kernel(float *out, __nv_bfloat16 *out16, float *rstd,
                                                const float *inp, const float *w, float eps, int N,
                                                int C) {
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * S_ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= N) {
        return;
    }
    const float *x = inp + (size_t)row * C;
    double ss = 0.0;
    for (int c = lane; c < C; c += 32) {
        double v = x[c];
        ss += v * v;
    }
    ss = s_warp_sum(ss);
    float ms = (float)(ss / C);
    float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms, eps)));
    if (rstd && lane == 0) {
        rstd[row] = r;
    }
    // in place (out == inp): each lane reads its x[c] before it writes out[c]; no lane reads
    // another's element after the sum
    for (int c = lane; c < C; c += 32) {
        float y = __fmul_rn(w[c], __fmul_rn(x[c], r));
        size_t o = (size_t)row * C + c;
        if (out16) {
            out16[o] = __float2bfloat16_rn(y);
        }
        if (out) {
            out[o] = y;
        }
    }
}

int rl_cuda_elt_rmsnorm_forward(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16, float *rstd,
                                const float *inp, const float *w, float eps, int N, int C) {
    if (N < 0 || C <= 0) {
        return rl_cuda_fail(ctx, "rmsnorm_forward: N %d, C %d", N, C);
    }
    if (N == 0) {
        return 0;
    }
    unsigned blocks = (unsigned)((N + S_ROWS_PER_BLOCK - 1) / S_ROWS_PER_BLOCK);
    s_rmsnorm_forward_kernel<<<blocks, 32 * S_ROWS_PER_BLOCK, 0, ctx->stream>>>(
        out, (__nv_bfloat16 *)out_bf16, rstd, inp, w, eps, N, C);
    RL_CUDA_LAUNCHED(ctx, "rmsnorm_forward");
    return 0;
}

// dr/dx_k = -r^3 x_k / C, so dx_k = r g_k w_k - x_k k with k = fl(r^3 / C * sum_j g_j w_j x_j)
// (the dot in double, rl_rmsnorm_backward's sequence); dw_j += fl(fl(g_j x_j) r) summed apart.
static __global__ void s_rmsnorm_backward_kernel(float *dinp, const float *dout, const float *inp,
                                                 const float *w, const float *rstd, int N, int C,
                                                 int accumulate) {
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * S_ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= N) {
        return;
    }
    const float *x = inp + (size_t)row * C;
    const float *g = dout + (size_t)row * C;
    float r = rstd[row];
    double dot = 0.0;
    for (int c = lane; c < C; c += 32) {
        dot += (double)g[c] * (double)w[c] * (double)x[c];
    }
    dot = s_warp_sum(dot);
    float k = (float)(dot * (double)r * (double)r * (double)r / (double)C);
    float *dx = dinp + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float t = __fsub_rn(__fmul_rn(__fmul_rn(r, g[c]), w[c]), __fmul_rn(x[c], k));
        dx[c] = accumulate ? __fadd_rn(dx[c], t) : t;
    }
}

// Block (column tile, chunk): column sums of fl(fl(g x) r) over the chunk's rows, lanes of
// S_COL_LANES rows, then the lanes in order; part[chunk*C + c] (double).
static __global__ void s_rmsnorm_dw_kernel(double *part, const float *dout, const float *inp,
                                           const float *rstd, int N, int C, int per) {
    __shared__ double sh[S_COL_LANES][S_COL_TILE];
    int c = blockIdx.x * S_COL_TILE + threadIdx.x;
    int r0 = blockIdx.y * per;
    int r1 = r0 + per < N ? r0 + per : N;
    double acc = 0.0;
    if (c < C) {
        for (int r = r0 + threadIdx.y; r < r1; r += S_COL_LANES) {
            size_t o = (size_t)r * C + c;
            acc += (double)__fmul_rn(__fmul_rn(dout[o], inp[o]), rstd[r]);
        }
    }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        double s = 0.0;
        for (int j = 0; j < S_COL_LANES; j++) {
            s += sh[j][threadIdx.x];
        }
        part[(size_t)blockIdx.y * C + c] = s;
    }
}

int rl_cuda_elt_rmsnorm_backward(rl_cuda_ctx_t *ctx, float *dinp, float *dw, const float *dout,
                                 const float *inp, const float *w, const float *rstd, int N, int C,
                                 int accumulate, double *scratch) {
    if (N < 0 || C <= 0 || (dw && !scratch)) {
        return rl_cuda_fail(ctx, "rmsnorm_backward: N %d, C %d, dw %s without scratch", N, C,
                            dw && !scratch ? "given" : "not");
    }
    if (N == 0) {
        return 0;
    }
    if (dinp) {
        unsigned blocks = (unsigned)((N + S_ROWS_PER_BLOCK - 1) / S_ROWS_PER_BLOCK);
        s_rmsnorm_backward_kernel<<<blocks, 32 * S_ROWS_PER_BLOCK, 0, ctx->stream>>>(
            dinp, dout, inp, w, rstd, N, C, accumulate);
        RL_CUDA_LAUNCHED(ctx, "rmsnorm_backward");
    }
    if (dw) {
        int per, n_chunks;
        s_chunks(N, &per, &n_chunks);
        dim3 grid((unsigned)((C + S_COL_TILE - 1) / S_COL_TILE), (unsigned)n_chunks);
        dim3 block(S_COL_TILE, S_COL_LANES);
        s_rmsnorm_dw_kernel<<<grid, block, 0, ctx->stream>>>(scratch, dout, inp, rstd, N, C, per);
        RL_CUDA_LAUNCHED(ctx, "rmsnorm_backward dw");
        s_colsum_finish_kernel<<<rl_cuda_blocks((size_t)C, S_THREADS), S_THREADS, 0, ctx->stream>>>(
            dw, scratch, n_chunks, C);
        RL_CUDA_LAUNCHED(ctx, "rmsnorm_backward dw sum");
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// RoPE from the table (rl_rope_forward_table): one thread per pair (j, j + D/2) of a row and
// head, so in place is safe. The rotation at -p is the row of |p| with the sine negated (cos
// and sin are even and odd to the bit), and x * (-s) = -(x * s) exactly, so the inverse
// rotation's a - x1 (-s) is the CPU backward's a + x1 s bit for bit.

static __global__ void s_rope_kernel(float *out, const float *inp, const float *cs,
                                     const int32_t *pos, size_t n_pairs, int H, int D, int n_pos,
                                     int inverse, int accumulate) {
    int half = D / 2;
    for (size_t i = s_tid(); i < n_pairs; i += s_stride()) {
        size_t rh = i / (size_t)half; // row * H + head
        int j = (int)(i - rh * (size_t)half);
        size_t row = rh / (size_t)H;
        int p = pos[row];
        unsigned ap = p < 0 ? 0u - (unsigned)p : (unsigned)p; // |p|, INT32_MIN included
        size_t o = rh * (size_t)D;
        float y0, y1;
        if (ap >= (unsigned)n_pos) {
            y0 = y1 = s_nan();
        } else {
            float c = cs[(size_t)ap * D + j];
            float s = cs[(size_t)ap * D + half + j];
            if ((p < 0) != (inverse != 0)) {
                s = -s;
            }
            float x0 = inp[o + j], x1 = inp[o + j + half];
            y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
            y1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
        }
        if (accumulate) {
            y0 = __fadd_rn(out[o + j], y0);
            y1 = __fadd_rn(out[o + j + half], y1);
        }
        out[o + j] = y0;
        out[o + j + half] = y1;
    }
}

static int s_rope(rl_cuda_ctx_t *ctx, const char *what, float *out, const float *inp,
                  const float *cs, const int32_t *pos, int N, int H, int D, int n_pos, int inverse,
                  int accumulate) {
    if (N < 0 || H <= 0 || D <= 0 || D % 2 != 0 || n_pos <= 0) {
        return rl_cuda_fail(ctx, "%s: N %d, H %d, D %d (even), n_pos %d", what, N, H, D, n_pos);
    }
    size_t n_pairs = (size_t)N * (size_t)H * (size_t)(D / 2);
    if (n_pairs == 0) {
        return 0;
    }
    s_rope_kernel<<<s_grid(n_pairs), S_THREADS, 0, ctx->stream>>>(out, inp, cs, pos, n_pairs, H, D,
                                                                  n_pos, inverse, accumulate);
    RL_CUDA_LAUNCHED(ctx, what);
    return 0;
}

int rl_cuda_elt_rope_forward(rl_cuda_ctx_t *ctx, float *out, const float *inp, const float *cs,
                             const int32_t *pos, int N, int H, int D, int n_pos) {
    return s_rope(ctx, "rope_forward", out, inp, cs, pos, N, H, D, n_pos, 0, 0);
}

int rl_cuda_elt_rope_backward(rl_cuda_ctx_t *ctx, float *dinp, const float *dout, const float *cs,
                              const int32_t *pos, int N, int H, int D, int n_pos, int accumulate) {
    return s_rope(ctx, "rope_backward", dinp, dout, cs, pos, N, H, D, n_pos, 1, accumulate);
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: y = silu(g) u, silu(x) = x / (1 + e^-x); backward s = 1 / (1 + e^-x),
// dg = dout u s (1 + x (1 - s)), du = dout x s, each in rl_layers.c's order of operations.
//
// s_expf is rl_expf (rl_layers.c) operation for operation: Cody-Waite reduction, Cephes'
// degree-6 polynomial, 2^n through the exponent bits, x clamped to [-126 ln2, 127.5 ln2] (NaN
// passes the clamps). The CPU's exp is not libm's; porting it (not CUDA's expf) keeps the two
// paths the same bits.

static __device__ __forceinline__ float s_expf(float x) {
    const float lo = -87.3365478515625f, hi = 88.37626266479492f;
    x = x < lo ? lo : x;
    x = x > hi ? hi : x;
    const float magic = 12582912.0f; // 1.5 * 2^23
    float v = __fadd_rn(__fmul_rn(x, 1.44269504088896341f), magic);
    float n = __fsub_rn(v, magic);
    float r = __fsub_rn(x, __fmul_rn(n, 0.693359375f));
    r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));
    float p = 1.9875691500e-4f;
    p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
    p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
    p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
    float y = __fadd_rn(__fadd_rn(__fmul_rn(p, __fmul_rn(r, r)), r), 1.0f);
    uint32_t bits = (__float_as_uint(v) - 0x4B400000u + 127u) << 23;
    return __fmul_rn(y, __uint_as_float(bits));
}

// gate16 / up16 (NULL: not kept): bf16 copies of the inputs, for a backward that reads those.
static __global__ void s_swiglu_forward_kernel(float *out, __nv_bfloat16 *out16,
                                               __nv_bfloat16 *gate16, __nv_bfloat16 *up16,
                                               const float *gate, const float *up, size_t n) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        float x = gate[i], u = up[i];
        float y = __fmul_rn(__fdiv_rn(x, __fadd_rn(1.0f, s_expf(-x))), u);
        if (gate16) {
            gate16[i] = __float2bfloat16_rn(x);
        }
        if (up16) {
            up16[i] = __float2bfloat16_rn(u);
        }
        if (out16) {
            out16[i] = __float2bfloat16_rn(y);
        }
        if (out) {
            out[i] = y;
        }
    }
}

int rl_cuda_elt_swiglu_forward(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16,
                               const float *gate, const float *up, size_t n) {
    if (n == 0 || (!out && !out_bf16)) {
        return 0;
    }
    s_swiglu_forward_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(
        out, (__nv_bfloat16 *)out_bf16, (__nv_bfloat16 *)NULL, (__nv_bfloat16 *)NULL, gate, up, n);
    RL_CUDA_LAUNCHED(ctx, "swiglu_forward");
    return 0;
}

int rl_cuda_elt_swiglu_forward_keep(rl_cuda_ctx_t *ctx, uint16_t *out_bf16, uint16_t *gate_bf16,
                                    uint16_t *up_bf16, const float *gate, const float *up,
                                    size_t n) {
    if (n == 0 || (!out_bf16 && !gate_bf16 && !up_bf16)) {
        return 0;
    }
    s_swiglu_forward_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(
        (float *)NULL, (__nv_bfloat16 *)out_bf16, (__nv_bfloat16 *)gate_bf16,
        (__nv_bfloat16 *)up_bf16, gate, up, n);
    RL_CUDA_LAUNCHED(ctx, "swiglu_forward_keep");
    return 0;
}

static __device__ float s_ld(const float *p, size_t i) {
    return p[i];
}
static __device__ float s_ld(const __nv_bfloat16 *p, size_t i) {
    return __bfloat162float(p[i]);
}

// T: float, or __nv_bfloat16 (gate and up as the forward kept them: their fp32 values)
template <typename T>
static __global__ void
s_swiglu_backward_kernel(float *dgate, float *dup, __nv_bfloat16 *dgate16, __nv_bfloat16 *dup16,
                         const float *dout, const T *gate, const T *up, size_t n, int accumulate) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        float x = s_ld(gate, i), d = dout[i];
        float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, s_expf(-x)));
        if (dgate || dgate16) {
            float t = __fmul_rn(__fmul_rn(__fmul_rn(d, s_ld(up, i)), s),
                                __fadd_rn(1.0f, __fmul_rn(x, __fsub_rn(1.0f, s))));
            if (accumulate && dgate) {
                t = __fadd_rn(dgate[i], t);
            }
            if (dgate16) {
                dgate16[i] = __float2bfloat16_rn(t);
            }
            if (dgate) {
                dgate[i] = t;
            }
        }
        if (dup || dup16) {
            float t = __fmul_rn(__fmul_rn(d, x), s);
            if (accumulate && dup) {
                t = __fadd_rn(dup[i], t);
            }
            if (dup16) {
                dup16[i] = __float2bfloat16_rn(t);
            }
            if (dup) {
                dup[i] = t;
            }
        }
    }
}

int rl_cuda_elt_swiglu_backward(rl_cuda_ctx_t *ctx, float *dgate, float *dup, uint16_t *dgate_bf16,
                                uint16_t *dup_bf16, const float *dout, const float *gate,
                                const float *up, size_t n, int accumulate) {
    if (n == 0 || (!dgate && !dup && !dgate_bf16 && !dup_bf16)) {
        return 0;
    }
    s_swiglu_backward_kernel<float><<<s_grid(n), S_THREADS, 0, ctx->stream>>>(
        dgate, dup, (__nv_bfloat16 *)dgate_bf16, (__nv_bfloat16 *)dup_bf16, dout, gate, up, n,
        accumulate);
    RL_CUDA_LAUNCHED(ctx, "swiglu_backward");
    return 0;
}

int rl_cuda_elt_swiglu_backward_kept(rl_cuda_ctx_t *ctx, float *dgate, float *dup,
                                     uint16_t *dgate_bf16, uint16_t *dup_bf16, const float *dout,
                                     const uint16_t *gate_bf16, const uint16_t *up_bf16, size_t n,
                                     int accumulate) {
    if (n == 0 || (!dgate && !dup && !dgate_bf16 && !dup_bf16)) {
        return 0;
    }
    s_swiglu_backward_kernel<__nv_bfloat16><<<s_grid(n), S_THREADS, 0, ctx->stream>>>(
        dgate, dup, (__nv_bfloat16 *)dgate_bf16, (__nv_bfloat16 *)dup_bf16, dout,
        (const __nv_bfloat16 *)gate_bf16, (const __nv_bfloat16 *)up_bf16, n, accumulate);
    RL_CUDA_LAUNCHED(ctx, "swiglu_backward_kept");
    return 0;
}

// ---------------------------------------------------------------------------------------------
// residual, accumulate, dropout

static __global__ void s_add_kernel(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        out[i] = __fadd_rn(a[i], b[i]);
    }
}

int rl_cuda_elt_residual_forward(rl_cuda_ctx_t *ctx, float *out, const float *a, const float *b,
                                 size_t n) {
    if (n == 0) {
        return 0;
    }
    s_add_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(out, a, b, n);
    RL_CUDA_LAUNCHED(ctx, "residual_forward");
    return 0;
}

int rl_cuda_elt_accumulate(rl_cuda_ctx_t *ctx, float *dst, const float *src, size_t n) {
    if (n == 0) {
        return 0;
    }
    s_add_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(dst, dst, src, n);
    RL_CUDA_LAUNCHED(ctx, "accumulate");
    return 0;
}

static __global__ void s_dropout_forward_kernel(float *out, __nv_bfloat16 *out16, const float *inp,
                                                const float *mask, size_t n) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        float y = __fmul_rn(inp[i], mask[i]);
        if (out16) {
            out16[i] = __float2bfloat16_rn(y);
        }
        if (out) {
            out[i] = y;
        }
    }
}

int rl_cuda_elt_dropout_forward(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16,
                                const float *inp, const float *mask, size_t n) {
    if (n == 0 || (!out && !out_bf16)) {
        return 0;
    }
    s_dropout_forward_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(
        out, (__nv_bfloat16 *)out_bf16, inp, mask, n);
    RL_CUDA_LAUNCHED(ctx, "dropout_forward");
    return 0;
}

static __global__ void s_dropout_backward_kernel(float *dinp, const float *dout, const float *mask,
                                                 size_t n, int accumulate) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        float t = __fmul_rn(dout[i], mask[i]);
        dinp[i] = accumulate ? __fadd_rn(dinp[i], t) : t;
    }
}

// rl_lora.c's mixer (splitmix64's finaliser), the same constants and operations.
static __host__ __device__ __forceinline__ uint64_t s_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static __global__ void s_dropout_mask_kernel(float *mask, const int32_t *rows, int n, int width,
                                             uint32_t thresh, float inv, uint64_t base) {
    const size_t total = (size_t)n * (size_t)width;
    for (size_t j = s_tid(); j < total; j += s_stride()) {
        size_t r = j / (size_t)width, i = j % (size_t)width;
        uint64_t idx = (uint64_t)rows[r] * (uint64_t)width + i;
        mask[j] =
            (uint32_t)(s_mix64(base + idx * 0x9e3779b97f4a7c15ULL) >> 40) >= thresh ? inv : 0.0f;
    }
}

int rl_cuda_elt_dropout_mask(rl_cuda_ctx_t *ctx, float *mask, const int32_t *rows, int n, int width,
                             float p, uint64_t seed, uint64_t key) {
    if (n < 0 || width < 0 || !(p >= 0.0f && p < 1.0f)) {
        return rl_cuda_fail(ctx,
                            "dropout_mask: n %d, width %d, p %g: need n, width >= 0 and "
                            "0 <= p < 1",
                            n, width, (double)p);
    }
    if (n == 0 || width == 0) {
        return 0;
    }
    // the host's: the base of (seed, key), the threshold of the top 24 bits, 1 / (1 - p) in fp32
    const uint64_t base = s_mix64(seed ^ key);
    const uint32_t thresh = (uint32_t)((double)p * 16777216.0);
    const float inv = 1.0f / (1.0f - p);
    size_t total = (size_t)n * (size_t)width;
    s_dropout_mask_kernel<<<s_grid(total), S_THREADS, 0, ctx->stream>>>(mask, rows, n, width,
                                                                        thresh, inv, base);
    RL_CUDA_LAUNCHED(ctx, "dropout_mask");
    return 0;
}

int rl_cuda_elt_dropout_backward(rl_cuda_ctx_t *ctx, float *dinp, const float *dout,
                                 const float *mask, size_t n, int accumulate) {
    if (n == 0) {
        return 0;
    }
    s_dropout_backward_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(dinp, dout, mask, n,
                                                                        accumulate);
    RL_CUDA_LAUNCHED(ctx, "dropout_backward");
    return 0;
}

// ---------------------------------------------------------------------------------------------
// AdamW (rl_optim.c's s_update, element for element): the scalars in double on the host, as
// the CPU computes them, then per element, each operation rounded:
//   p = params * decay;  m += omb1 * (g - m);  v = b2 * v + (omb2 * g) * g;
//   denom = sqrt(v) * inv_bc2_sqrt + eps;  params = p - (step_size * m) / denom.

static __global__ void s_adamw_kernel(float *params, const float *grads, float *m, float *v,
                                      size_t n, float decay, float step_size, float inv_bc2_sqrt,
                                      float omb1, float omb2, float fb2, float eps) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        float g = grads[i];
        float p = __fmul_rn(params[i], decay);
        float mi = m[i];
        mi = __fadd_rn(mi, __fmul_rn(omb1, __fsub_rn(g, mi)));
        float vi = __fadd_rn(__fmul_rn(fb2, v[i]), __fmul_rn(__fmul_rn(omb2, g), g));
        m[i] = mi;
        v[i] = vi;
        float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), inv_bc2_sqrt), eps);
        params[i] = __fsub_rn(p, __fdiv_rn(__fmul_rn(step_size, mi), denom));
    }
}

int rl_cuda_elt_adamw_step(rl_cuda_ctx_t *ctx, float *params, const float *grads, float *m,
                           float *v, size_t n, double lr, double beta1, double beta2, double eps,
                           double weight_decay, int64_t step) {
    if (step < 1) {
        return rl_cuda_fail(ctx,
                            "adamw_step: step count %lld (the count after incrementing: "
                            ">= 1)",
                            (long long)step);
    }
    if (n == 0) {
        return 0;
    }
    const double t = (double)step;
    const double bc1 = 1.0 - pow(beta1, t);
    const double bc2_sqrt = sqrt(1.0 - pow(beta2, t));
    const float decay = (float)(1.0 - lr * weight_decay);
    const float step_size = (float)(lr / bc1);
    const float inv_bc2_sqrt = (float)(1.0 / bc2_sqrt);
    const float omb1 = (float)(1.0 - beta1), omb2 = (float)(1.0 - beta2), fb2 = (float)beta2;
    s_adamw_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(
        params, grads, m, v, n, decay, step_size, inv_bc2_sqrt, omb1, omb2, fb2, (float)eps);
    RL_CUDA_LAUNCHED(ctx, "adamw_step");
    return 0;
}

// ---------------------------------------------------------------------------------------------
// sum of squares (the clip's norm) and scale

static __global__ void s_sumsq_kernel(double *part, const float *x, size_t n) {
    __shared__ double sh[S_THREADS];
    double acc = 0.0;
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        double v = x[i];
        acc += v * v;
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = S_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sh[threadIdx.x] += sh[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[blockIdx.x] = sh[0];
    }
}

// one block of RL_CUDA_ELT_SUMSQ_BLOCKS threads: the partials in a fixed tree
static __global__ void s_sumsq_finish_kernel(double *out, const double *part, int n_part,
                                             int accumulate) {
    __shared__ double sh[RL_CUDA_ELT_SUMSQ_BLOCKS];
    sh[threadIdx.x] = (int)threadIdx.x < n_part ? part[threadIdx.x] : 0.0;
    __syncthreads();
    for (int s = RL_CUDA_ELT_SUMSQ_BLOCKS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sh[threadIdx.x] += sh[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *out = accumulate ? *out + sh[0] : sh[0];
    }
}

int rl_cuda_elt_sumsq(rl_cuda_ctx_t *ctx, double *out, const float *x, size_t n, int accumulate,
                      double *scratch) {
    if (!scratch) {
        return rl_cuda_fail(ctx, "sumsq: no scratch");
    }
    if (n == 0) {
        if (!accumulate) {
            RL_CUDA_CHECK(ctx, cudaMemsetAsync(out, 0, sizeof *out, ctx->stream));
        }
        return 0;
    }
    // the grid is a function of n only: the same partials on every device
    unsigned blocks = rl_cuda_blocks(n, S_THREADS);
    blocks = blocks < RL_CUDA_ELT_SUMSQ_BLOCKS ? blocks : RL_CUDA_ELT_SUMSQ_BLOCKS;
    s_sumsq_kernel<<<blocks, S_THREADS, 0, ctx->stream>>>(scratch, x, n);
    RL_CUDA_LAUNCHED(ctx, "sumsq");
    s_sumsq_finish_kernel<<<1, RL_CUDA_ELT_SUMSQ_BLOCKS, 0, ctx->stream>>>(out, scratch,
                                                                           (int)blocks, accumulate);
    RL_CUDA_LAUNCHED(ctx, "sumsq finish");
    return 0;
}

static __global__ void s_scale_kernel(float *x, float c, size_t n) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        x[i] = __fmul_rn(x[i], c);
    }
}

int rl_cuda_elt_scale(rl_cuda_ctx_t *ctx, float *x, float c, size_t n) {
    if (n == 0) {
        return 0;
    }
    s_scale_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(x, c, n);
    RL_CUDA_LAUNCHED(ctx, "scale");
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the scalar head (rl_head.c): output k reads hidden row r(k) = rows[k] (rows NULL: k), none
// when r(k) < 0. Forward: one warp per output, the dot in double rounded once. Backward: dh by
// element (each row read by at most one output, so no two threads write one element), dw as
// RMSNorm's dw (chunks of outputs, double partials), db in one block.

static __device__ __forceinline__ int s_head_row(const int32_t *rows, int k) {
    return rows ? rows[k] : k;
}

static __global__ void s_head_forward_kernel(float *out, const float *hidden, const float *w,
                                             const float *bias, const int32_t *rows, int n_out,
                                             int C) {
    int lane = threadIdx.x % 32;
    int k = blockIdx.x * S_ROWS_PER_BLOCK + threadIdx.x / 32;
    if (k >= n_out) {
        return;
    }
    int r = s_head_row(rows, k);
    if (r < 0) { // the whole warp: r is the same in every lane
        if (lane == 0) {
            out[k] = 0.0f;
        }
        return;
    }
    const float *h = hidden + (size_t)r * C;
    double acc = 0.0;
    for (int c = lane; c < C; c += 32) {
        acc += (double)h[c] * (double)w[c];
    }
    acc = s_warp_sum(acc);
    if (bias) {
        acc += (double)*bias;
    }
    if (lane == 0) {
        out[k] = (float)acc;
    }
}

int rl_cuda_elt_head_forward(rl_cuda_ctx_t *ctx, float *out, const float *hidden, const float *w,
                             const float *bias, const int32_t *rows, int n_out, int C) {
    if (n_out < 0 || C <= 0) {
        return rl_cuda_fail(ctx, "head_forward: n_out %d, C %d", n_out, C);
    }
    if (n_out == 0) {
        return 0;
    }
    unsigned blocks = (unsigned)((n_out + S_ROWS_PER_BLOCK - 1) / S_ROWS_PER_BLOCK);
    s_head_forward_kernel<<<blocks, 32 * S_ROWS_PER_BLOCK, 0, ctx->stream>>>(out, hidden, w, bias,
                                                                             rows, n_out, C);
    RL_CUDA_LAUNCHED(ctx, "head_forward");
    return 0;
}

static __global__ void s_head_dh_kernel(float *dhidden, const float *dout, const float *w,
                                        const int32_t *rows, size_t n, int C, int accumulate) {
    for (size_t i = s_tid(); i < n; i += s_stride()) {
        int k = (int)(i / (size_t)C);
        int c = (int)(i - (size_t)k * C);
        int r = s_head_row(rows, k);
        if (r < 0) {
            continue;
        }
        float t = __fmul_rn(dout[k], w[c]);
        float *d = dhidden + (size_t)r * C + c;
        *d = accumulate ? __fadd_rn(*d, t) : t;
    }
}

static __global__ void s_head_dw_kernel(double *part, const float *dout, const float *hidden,
                                        const int32_t *rows, int n_out, int C, int per) {
    __shared__ double sh[S_COL_LANES][S_COL_TILE];
    int c = blockIdx.x * S_COL_TILE + threadIdx.x;
    int k0 = blockIdx.y * per;
    int k1 = k0 + per < n_out ? k0 + per : n_out;
    double acc = 0.0;
    if (c < C) {
        for (int k = k0 + threadIdx.y; k < k1; k += S_COL_LANES) {
            int r = s_head_row(rows, k);
            float d = dout[k];
            if (r < 0 || d == 0.0f) {
                continue;
            }
            acc += (double)d * (double)hidden[(size_t)r * C + c];
        }
    }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        double s = 0.0;
        for (int j = 0; j < S_COL_LANES; j++) {
            s += sh[j][threadIdx.x];
        }
        part[(size_t)blockIdx.y * C + c] = s;
    }
}

// one block of S_THREADS: dbias += (float)(sum of dout[k] over r(k) >= 0), a fixed tree
static __global__ void s_head_db_kernel(float *dbias, const float *dout, const int32_t *rows,
                                        int n_out) {
    __shared__ double sh[S_THREADS];
    double acc = 0.0;
    for (int k = threadIdx.x; k < n_out; k += S_THREADS) {
        if (s_head_row(rows, k) >= 0) {
            acc += (double)dout[k];
        }
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = S_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sh[threadIdx.x] += sh[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *dbias = __fadd_rn(*dbias, (float)sh[0]);
    }
}

int rl_cuda_elt_head_backward(rl_cuda_ctx_t *ctx, float *dhidden, float *dw, float *dbias,
                              const float *dout, const float *hidden, const float *w,
                              const int32_t *rows, int n_out, int N, int C, int accumulate,
                              double *scratch) {
    if (n_out < 0 || N < 0 || C <= 0 || (!rows && n_out > N) || (dw && !scratch)) {
        return rl_cuda_fail(ctx, "head_backward: n_out %d, N %d, C %d, rows %s, dw %s", n_out, N, C,
                            rows ? "given" : "NULL (n_out <= N)",
                            dw && !scratch ? "without scratch" : "ok");
    }
    if (dhidden && !accumulate && N > 0) {
        RL_CUDA_CHECK(ctx, cudaMemsetAsync(dhidden, 0, (size_t)N * C * sizeof(float), ctx->stream));
    }
    if (n_out == 0) {
        return 0;
    }
    if (dhidden) {
        size_t n = (size_t)n_out * (size_t)C;
        s_head_dh_kernel<<<s_grid(n), S_THREADS, 0, ctx->stream>>>(dhidden, dout, w, rows, n, C,
                                                                   accumulate);
        RL_CUDA_LAUNCHED(ctx, "head_backward dh");
    }
    if (dw) {
        int per, n_chunks;
        s_chunks(n_out, &per, &n_chunks);
        dim3 grid((unsigned)((C + S_COL_TILE - 1) / S_COL_TILE), (unsigned)n_chunks);
        dim3 block(S_COL_TILE, S_COL_LANES);
        s_head_dw_kernel<<<grid, block, 0, ctx->stream>>>(scratch, dout, hidden, rows, n_out, C,
                                                          per);
        RL_CUDA_LAUNCHED(ctx, "head_backward dw");
        s_colsum_finish_kernel<<<rl_cuda_blocks((size_t)C, S_THREADS), S_THREADS, 0, ctx->stream>>>(
            dw, scratch, n_chunks, C);
        RL_CUDA_LAUNCHED(ctx, "head_backward dw sum");
    }
    if (dbias) {
        s_head_db_kernel<<<1, S_THREADS, 0, ctx->stream>>>(dbias, dout, rows, n_out);
        RL_CUDA_LAUNCHED(ctx, "head_backward db");
    }
    return 0;
}

// rl_cuda_attn — causal GQA attention (see rl_cuda_attn.h): the training forward and backward
// over packed sequences, the KV cache write, batched decode and batched prefill. fp32 on the
// CUDA cores, FlashAttention's tiling (Dao et al. 2022, algorithms 1 and 2) written plainly:
// correctness first. Then the same tiling in bf16 on the tensor cores (the forward, prefill and
// backward the model takes; their own sections below); K/V tiles double-buffered, GQA heads
// packed into one tile and split-K decode for long contexts are later optimisations, measured.
//
// Notation, per sequence and query head h (kv head g = h / (NH/NKV)), as in rl_layers.c:
//   S = scale Q K^T (causal: query t sees keys j <= t),  P = softmax(S) row-wise,  O = P V,
//   lse_t = log sum_j exp(S_tj)  (so that P_tj = exp(S_tj - lse_t), recomputed in backward).
//
// Forward (online softmax). A block owns a tile of query rows and walks the key tiles; per row
// it keeps the running max m, the running sum l = sum_j exp(S_tj - m) and the unnormalised
// O~ = sum_j exp(S_tj - m) v_j. A new tile with scores s_j and m' = max(m, max_j s_j) rescales:
//   l <- e^(m - m') l + sum_j e^(s_j - m'),   O~ <- e^(m - m') O~ + sum_j e^(s_j - m') v_j;
// at the end O = O~ / l and lse = m + log l. Key 0 is visible to every row and lies in the
// first tile, so m is finite after it, and l >= 1 (the max's own term is e^0).
//
// Backward. With dO given and P recomputed:
//   dV = P^T dO;   dP = dO V^T;   dS = P * (dP - D),  D_t = rowsum(P * dP)_t;
//   dQ = scale dS K;   dK = scale dS^T Q.
// (dS is the softmax's backward: dS_tj = P_tj (dP_tj - sum_i P_ti dP_ti).) And
// rowsum(P * dP)_t = sum_j P_tj (dO_t . v_j) = dO_t . (sum_j P_tj v_j) = dO_t . O_t, so D comes
// from the forward's output in one pass (s_delta_kernel) instead of a (T,T) product. Two kernels
// then split the work so that no two blocks add into the same gradient element (no atomics, a
// fixed summation order, the same bits every run): s_bwd_dkdv_kernel owns a tile of keys of one
// kv head and loops over the query heads of its group and the query tiles at or after it;
// s_bwd_dq_kernel owns a tile of queries of one head and loops over the key tiles up to it. Both
// recompute S and P (twice the forward's score work: fine for a first version).
//
// Geometry. Blocks of 256 threads seen as 16 x 16: ty = tid / 16 picks rows ty + 16 i, tx = tid
// % 16 picks columns tx + 16 j, so a row's 16 threads are one half-warp and its max and sum are
// half-warp shuffles. Tiles live in dynamic shared memory with rows of ld = D | 1 floats: an odd
// stride puts element d of 16 consecutive rows in 16 different banks. A head dimension D <= DMAX
// (64, 128 or 256, a template argument) keeps each thread's output columns tx + 16 c, c < DMAX/16,
// in registers. Sequences are found from the device's starts without the host reading them:
// sequence b's tiles are numbered from starts[b] / tile + b, which leaves room for its
// ceil(len_b / tile) tiles before sequence b+1's first (floor((s + len) / tile) + 1 >=
// floor(s / tile) + ceil(len / tile)), so N / tile + B blocks cover every tile and a block finds
// its sequence by binary search; blocks past a sequence's last tile exit at once.
#include "rl_cuda_attn.h"

#include "rl_cuda_common.cuh"

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <mma.h>
#include <mutex>

// ---------------------------------------------------------------------------------------------
// shared helpers

enum {
    S_THREADS = 256,     // threads of the training and prefill kernels: 16 x 16
    S_FWD_BR = 64,       // forward and prefill: query rows per tile
    S_FWD_BC = 32,       // forward and prefill: keys per tile
    S_BWD_BR = 32,       // backward: query rows per tile
    S_BWD_BC = 32,       // backward: keys per tile
    S_DEC_THREADS = 128, // decode: threads
    S_DEC_BK = 32,       // decode: keys per tile (a key per lane in the softmax)
    S_DEC_HPB = 8,       // decode: query heads per block
    S_DMAX = 256,        // the largest head dimension
};

// Row stride of a (rows, D) tile in shared memory: odd (see the top).
__host__ __device__ static inline int s_ld(int D) {
    return D | 1;
}

// Row stride of a (rows, BC) probability tile: two rows of one warp (ty, ty + 1) 16 banks apart.
__host__ __device__ static inline int s_pld(int BC) {
    return BC + 16;
}

__device__ static inline int s_imin(int a, int b) {
    return a < b ? a : b;
}

// The block's dynamic shared memory (launch argument), as floats; aligned for wmma's tiles.
__device__ static inline float *s_smem(void) {
    extern __shared__ __align__(128) float s_dyn[];
    return s_dyn;
}

// Max and sum over the 16 lanes of a half-warp (every lane of the warp calls it).
__device__ static inline float s_half_max(float x) {
    for (int o = 8; o > 0; o >>= 1) {
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    }
    return x;
}

__device__ static inline float s_half_sum(float x) {
    for (int o = 8; o > 0; o >>= 1) {
        x += __shfl_xor_sync(0xffffffffu, x, o);
    }
    return x;
}

// Over the 32 lanes of a warp.
__device__ static inline float s_warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) {
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    }
    return x;
}

__device__ static inline float s_warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) {
        x += __shfl_xor_sync(0xffffffffu, x, o);
    }
    return x;
}

// The sequence of tile x (tiles of `tile` rows numbered as at the top): returns b and sets *t to
// the tile's index within it, or returns -1 when x is past its sequence's last tile.
__device__ static int s_find(const int *starts, int B, int tile, int x, int *t) {
    int lo = 0, hi = B - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (starts[mid] / tile + mid <= x) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    int i = x - (starts[lo] / tile + lo), len = starts[lo + 1] - starts[lo];
    if (i < 0 || i >= (len + tile - 1) / tile) {
        return -1;
    }
    *t = i;
    return lo;
}

// x rounded to the nearest bf16 (to even), as a float.
__device__ static inline float s_r16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

// rows (n, D) at src (row stride rs) into dst (rows, ld), zeros for rows n..rows-1; a warp per
// row, lanes along it (reads of D consecutive floats). R16: each value rounded to bf16 (the
// bf16 backward, see attn_backward_bf16).
__device__ static inline float s_f(float x) {
    return x;
}

__device__ static inline float s_f(__nv_bfloat16 x) {
    return __bfloat162float(x);
}

template <bool R16 = false, typename S = float>
__device__ static inline void s_load_rows(float *dst, const S *src, size_t rs, int n, int rows,
                                          int D, int ld, int nthreads) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = nthreads / 32;
    for (int r = warp; r < rows; r += nw) {
        if (r < n) {
            const S *s = src + (size_t)r * rs;
            for (int d = lane; d < D; d += 32) {
                dst[r * ld + d] = R16 ? s_r16(s_f(s[d])) : s_f(s[d]);
            }
        } else {
            for (int d = lane; d < D; d += 32) {
                dst[r * ld + d] = 0.0f;
            }
        }
    }
}

// Launch geometry helpers (host).
static int s_dmax(int D) {
    return D <= 64 ? 64 : D <= 128 ? 128 : 256;
}

static size_t s_fwd_smem(int D) {
    return sizeof(float) *
           ((size_t)(S_FWD_BR + 2 * S_FWD_BC) * s_ld(D) + (size_t)S_FWD_BR * s_pld(S_FWD_BC));
}

static size_t s_bwd_smem(int D) {
    return sizeof(float) * ((size_t)(2 * S_BWD_BR + 2 * S_BWD_BC) * s_ld(D) +
                            2 * (size_t)S_BWD_BR * s_pld(S_BWD_BC) + 2 * (size_t)S_BWD_BR);
}

static size_t s_dec_smem(int D) {
    return sizeof(float) * ((size_t)S_DEC_HPB * D + 2 * (size_t)S_DEC_BK * s_ld(D) +
                            (size_t)S_DEC_HPB * S_DEC_BK + 2 * (size_t)S_DEC_HPB);
}

// The dynamic shared memory each kernel has been allowed on each device: cudaFuncSetAttribute
// is called once per kernel, device and size (it may wait for the device's copies, and a stream
// being captured refuses it: a decode step's CUDA graph is captured after a step alike ran).
typedef struct {
    const void *kernel;
    int device;
    size_t bytes;
} s_allowed_t;
static s_allowed_t s_allowed[64];
static int s_n_allowed;
static std::mutex s_allowed_mutex;

// Allows `kernel` its dynamic shared memory (past 48 KiB it must be asked for), or says that the
// device has too little.
template <typename K>
static int s_smem_attr(rl_cuda_ctx_t *ctx, K kernel, size_t bytes, const char *what, int D) {
    const void *k = reinterpret_cast<const void *>(kernel);
    std::lock_guard<std::mutex> lock(s_allowed_mutex);
    int at = 0;
    while (at < s_n_allowed && (s_allowed[at].kernel != k || s_allowed[at].device != ctx->device)) {
        at++;
    }
    if (at < s_n_allowed && s_allowed[at].bytes >= bytes) {
        return 0; // allowed before (at least as much)
    }
    int optin = 0;
    RL_CUDA_CHECK(
        ctx, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device));
    if (bytes > (size_t)optin) {
        return rl_cuda_fail(ctx,
                            "%s: head_dim %d needs %zu bytes of shared memory per block; cuda:%d "
                            "allows %d",
                            what, D, bytes, ctx->device, optin);
    }
    RL_CUDA_CHECK(
        ctx, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    if (at == s_n_allowed && s_n_allowed < (int)(sizeof s_allowed / sizeof s_allowed[0])) {
        s_allowed[s_n_allowed++] = s_allowed_t{k, ctx->device, bytes};
    } else if (at < s_n_allowed) {
        s_allowed[at].bytes = bytes;
    }
    return 0;
}

static int s_check_heads(rl_cuda_ctx_t *ctx, const char *what, int NH, int NKV, int D) {
    if (NH < 1 || NKV < 1 || NH % NKV != 0 || NH > 65535) {
        return rl_cuda_fail(ctx, "%s: %d query heads cannot share %d kv heads", what, NH, NKV);
    }
    if (D < 1 || D > S_DMAX) {
        return rl_cuda_fail(ctx, "%s: head_dim %d is not in 1..%d", what, D, S_DMAX);
    }
    return 0;
}

// Blocks covering the tiles of B packed sequences of N rows (see the top), or -1.
static long long s_tiles(int N, int B, int tile) {
    long long n = (long long)N / tile + B;
    return n <= INT_MAX ? n : -1;
}

// kernel<<<grid, threads, smem>>>(args) on the context's stream, its shared memory allowed first.
template <typename K, typename... A>
static int s_launch(rl_cuda_ctx_t *ctx, K kernel, dim3 grid, int threads, size_t smem,
                    const char *what, int D, A... args) {
    if (s_smem_attr(ctx, kernel, smem, what, D) != 0) {
        return -1;
    }
    kernel<<<grid, threads, smem, ctx->stream>>>(args...);
    RL_CUDA_LAUNCHED(ctx, what);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// where a forward or prefill block works (both kernels of each kind, fp32 and bf16)

// A block's tile: q and out at qo, keys and values at ko, queries q0.. of nq at positions p0..
struct s_at_t {
    size_t qo, ko;
    int nq, p0, q0;
    float *lse; // the forward's lse of this head and sequence (NULL: not asked, or a prefill)
};

// The training forward's block (tiles of BR rows): tile blockIdx.x (see s_find) of head
// blockIdx.y. Returns false when the block is past its sequence's last tile.
__device__ static bool s_fwd_at(s_at_t *a, float *lse, const int *starts, int B, int NH, int NKV,
                                int D, int BR) {
    int t;
    const int b = s_find(starts, B, BR, (int)blockIdx.x, &t);
    if (b < 0) {
        return false;
    }
    const int h = (int)blockIdx.y, g = h / (NH / NKV);
    const int row0 = starts[b], len = starts[b + 1] - row0;
    a->qo = (size_t)row0 * NH * D + (size_t)h * D;
    a->ko = (size_t)row0 * NKV * D + (size_t)g * D;
    a->nq = len, a->p0 = 0, a->q0 = t * BR;
    a->lse = lse ? lse + (size_t)row0 * NH + (size_t)h * len : NULL;
    return true;
}

// The prefill's block (tiles of BR rows, NT threads): run b's keys from its cache slot. A run
// with a bad slot or positions past max_len has its tile's rows written as NaN here; returns
// false then, and when the block is past its run's last tile.
__device__ static bool s_prefill_at(s_at_t *a, float *out, const int *q_starts, const int *slots,
                                    const int *pos0, int B, int NH, int NKV, int D, int n_slots,
                                    int max_len, int BR, int NT) {
    int t;
    const int b = s_find(q_starts, B, BR, (int)blockIdx.x, &t);
    if (b < 0) {
        return false;
    }
    const int h = (int)blockIdx.y, g = h / (NH / NKV), qs = NH * D, ks = NKV * D;
    const int row0 = q_starts[b], nq = q_starts[b + 1] - row0;
    const int slot = slots[b], p0 = pos0[b], q0 = t * BR;
    const size_t qo = (size_t)row0 * qs + (size_t)h * D;
    if (slot < 0 || slot >= n_slots || p0 < 0 || p0 > max_len - nq) {
        const int nr = s_imin(BR, nq - q0);
        for (int i = (int)threadIdx.x; i < nr * D; i += NT) {
            out[qo + (size_t)(q0 + i / D) * qs + i % D] = NAN;
        }
        return false;
    }
    a->qo = qo;
    a->ko = (size_t)slot * max_len * ks + (size_t)g * D;
    a->nq = nq, a->p0 = p0, a->q0 = q0, a->lse = NULL;
    return true;
}

// ---------------------------------------------------------------------------------------------
// forward: one tile of query rows against the key tiles up to its last row

// Queries i in [q0, q0 + BR) ∩ [0, nq) of one head at positions p0 + i, rows q + i*qs (out
// alike); keys and values at k + j*ks, v + j*ks for positions j <= p0 + i; lse[i] (lse may be
// NULL). Every thread of the block calls it.
template <int DMAX>
__device__ static void s_fwd_tile(float *out, float *lse, const float *q, const float *k,
                                  const float *v, int p0, int nq, int q0, int qs, int ks, int D,
                                  float scale) {
    constexpr int BR = S_FWD_BR, BC = S_FWD_BC, RI = BR / 16, CJ = BC / 16, CD = DMAX / 16;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int ld = s_ld(D), pld = s_pld(BC);
    float *sq = s_smem();               // (BR, ld) the tile's queries, 0 past nq
    float *sk = sq + BR * ld;           // (BC, ld) keys of the current tile, 0 past kend
    float *sv = sk + BC * ld;           // (BC, ld) values alike
    float *sp = sv + BC * ld;           // (BR, pld) probabilities of the current tile
    const int nr = s_imin(BR, nq - q0); // real rows, >= 1
    const int kend = p0 + q0 + nr;      // keys 0..kend-1 are seen by some row
    s_load_rows(sq, q + (size_t)q0 * qs, (size_t)qs, nr, BR, D, ld, S_THREADS);
    // a row past nq (never written) sees what the last real row sees: its scores stay finite
    int tpos[RI];
    float m[RI], l[RI], o[RI][CD];
#pragma unroll
    for (int i = 0; i < RI; i++) {
        tpos[i] = p0 + q0 + s_imin(ty + 16 * i, nr - 1);
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < CD; c++) {
            o[i][c] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < kend; k0 += BC) {
        __syncthreads(); // the previous tile's sk, sv, sp are read (and sq is written)
        const int nk = s_imin(BC, kend - k0);
        s_load_rows(sk, k + (size_t)k0 * ks, (size_t)ks, nk, BC, D, ld, S_THREADS);
        s_load_rows(sv, v + (size_t)k0 * ks, (size_t)ks, nk, BC, D, ld, S_THREADS);
        __syncthreads();
        float s[RI][CJ];
#pragma unroll
        for (int i = 0; i < RI; i++) {
#pragma unroll
            for (int j = 0; j < CJ; j++) {
                s[i][j] = 0.0f;
            }
        }
#pragma unroll 4
        for (int d = 0; d < D; d++) {
            float a[RI], b[CJ];
#pragma unroll
            for (int i = 0; i < RI; i++) {
                a[i] = sq[(ty + 16 * i) * ld + d];
            }
#pragma unroll
            for (int j = 0; j < CJ; j++) {
                b[j] = sk[(tx + 16 * j) * ld + d];
            }
#pragma unroll
            for (int i = 0; i < RI; i++) {
#pragma unroll
                for (int j = 0; j < CJ; j++) {
                    s[i][j] += a[i] * b[j];
                }
            }
        }
        // online softmax of each row over this tile (a row's 16 threads hold its BC scores)
#pragma unroll
        for (int i = 0; i < RI; i++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < CJ; j++) {
                s[i][j] = k0 + tx + 16 * j <= tpos[i] ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            const float mnew = fmaxf(m[i], s_half_max(mx)); // finite: key 0 is in tile 0
            const float alpha = expf(m[i] - mnew);          // 0 on the first tile
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < CJ; j++) {
                const float p = expf(s[i][j] - mnew); // 0 where masked
                sp[(ty + 16 * i) * pld + tx + 16 * j] = p;
                sum += p;
            }
            l[i] = alpha * l[i] + s_half_sum(sum);
            m[i] = mnew;
#pragma unroll
            for (int c = 0; c < CD; c++) {
                o[i][c] *= alpha;
            }
        }
        __syncthreads(); // sp complete
        for (int j = 0; j < nk; j++) {
            float p[RI];
#pragma unroll
            for (int i = 0; i < RI; i++) {
                p[i] = sp[(ty + 16 * i) * pld + j];
            }
#pragma unroll
            for (int c = 0; c < CD; c++) {
                const int col = tx + 16 * c;
                if (col < D) {
                    const float vv = sv[j * ld + col];
#pragma unroll
                    for (int i = 0; i < RI; i++) {
                        o[i][c] += p[i] * vv;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RI; i++) {
        const int r = ty + 16 * i;
        if (r < nr) {
            const float inv = 1.0f / l[i];
            float *dst = out + (size_t)(q0 + r) * qs;
#pragma unroll
            for (int c = 0; c < CD; c++) {
                const int col = tx + 16 * c;
                if (col < D) {
                    dst[col] = o[i][c] * inv;
                }
            }
            if (lse && tx == 0) {
                lse[q0 + r] = m[i] + logf(l[i]);
            }
        }
    }
}

// grid (N / BR + B, NH): tile blockIdx.x (see s_find) of query head blockIdx.y.
template <int DMAX>
__global__ void __launch_bounds__(S_THREADS)
    s_fwd_kernel(float *out, float *lse, const float *q, const float *k, const float *v,
                 const int *starts, int B, int NH, int NKV, int D, float scale) {
    s_at_t a;
    if (s_fwd_at(&a, lse, starts, B, NH, NKV, D, S_FWD_BR)) {
        s_fwd_tile<DMAX>(out + a.qo, a.lse, q + a.qo, k + a.ko, v + a.ko, 0, a.nq, a.q0, NH * D,
                         NKV * D, D, scale);
    }
}

// grid (N / BR + B, NH): as s_fwd_kernel, run b's keys from its cache slot.
template <int DMAX>
__global__ void __launch_bounds__(S_THREADS)
    s_prefill_kernel(float *out, const float *q, const float *kc, const float *vc,
                     const int *q_starts, const int *slots, const int *pos0, int B, int NH, int NKV,
                     int D, int n_slots, int max_len, float scale) {
    s_at_t a;
    if (s_prefill_at(&a, out, q_starts, slots, pos0, B, NH, NKV, D, n_slots, max_len, S_FWD_BR,
                     S_THREADS)) {
        s_fwd_tile<DMAX>(out + a.qo, NULL, q + a.qo, kc + a.ko, vc + a.ko, a.p0, a.nq, a.q0, NH * D,
                         NKV * D, D, scale);
    }
}

// ---------------------------------------------------------------------------------------------
// the bf16 forward on the tensor cores (attn_forward_bf16, attn_prefill_bf16)
//
// The same tiles and online softmax as s_fwd_tile, with the two products on the tensor cores
// (wmma m16n16k16: bf16 inputs, fp32 accumulators): q, k and v are rounded to bf16 as a tile is
// loaded (the head dimension padded with zeros to Dp, a multiple of 16), S = Q K^T and O += P V
// with P rounded to bf16 (its row sums l stay fp32, of the unrounded p: lse is the scores' own).
// A block has WARPS warps of 16 query rows each (BR = 16 WARPS: 4 when Dp <= 128, else 2 so that
// Dp 256 fits an A100's shared memory) and walks key tiles of BC = 64. Per warp, in shared
// memory: its scores (16, BC) fp32, its P (16, BC) bf16 and its O (16, Dp) fp32, which a wmma
// fragment cannot rescale in place (which element a lane holds is unspecified), so each tile's
// P V is added to O loaded from there. Two lanes own a row (its max, sum and rescaling: a pair's
// shuffle). A warp whose rows all precede a key tile skips it (for those rows nothing would
// change: every p is 0 and alpha 1), and a warp with no real row (a short run: a decode step's
// run of one row uses one warp of the block) skips every tile.
//
// A row's result depends only on its own q row, its keys and the tiles' fixed boundaries (an
// mma's element reads one row of a and one column of b), so a decode step's row is bit for bit
// the same row of a longer prefill, as with the fp32 kernels.
//
// Shared memory (bf16 strides Dp + 8 and BC + 8 and fp32 strides BC + 4 and Dp + 4: multiples
// of 16 bytes, and every fragment's first element 32-byte aligned, as wmma requires):
//   q (BR, Dp + 8), k and v (BC, Dp + 8) bf16; per warp: scores (16, BC + 4) fp32, P (16, BC + 8)
//   bf16, O (16, Dp + 4) fp32.
enum {
    S_TC_BC = 64, // keys per tile
};

__host__ __device__ static inline int s_tc_dp(int D) {
    return (D + 15) / 16 * 16;
}

static int s_tc_warps(int D) {
    return s_tc_dp(D) <= 128 ? 4 : 2;
}

__host__ __device__ static inline size_t s_tc_warp_bytes(int dp) {
    return (size_t)16 * (S_TC_BC + 4) * 4 + (size_t)16 * (S_TC_BC + 8) * 2 +
           (size_t)16 * (size_t)(dp + 4) * 4;
}

static size_t s_tc_smem(int D) {
    const int dp = s_tc_dp(D), warps = s_tc_warps(D);
    return (size_t)2 * (16 * warps + 2 * S_TC_BC) * (size_t)(dp + 8) +
           (size_t)warps * s_tc_warp_bytes(dp);
}

// rows (n, D) fp32 (rounded) or bf16 at src (row stride rs) into dst (rows, ld) bf16, columns
// D..dp-1 and rows n..rows-1 zero; a warp per row.
__device__ static inline __nv_bfloat16 s_bf(float x) {
    return __float2bfloat16_rn(x);
}

__device__ static inline __nv_bfloat16 s_bf(__nv_bfloat16 x) {
    return x;
}

template <typename S>
__device__ static inline void s_tc_load(__nv_bfloat16 *dst, const S *src, size_t rs, int n,
                                        int rows, int D, int dp, int ld, int nthreads) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = nthreads / 32;
    for (int r = warp; r < rows; r += nw) {
        const S *s = src + (size_t)r * rs;
        for (int d = lane; d < dp; d += 32) {
            dst[r * ld + d] = r < n && d < D ? s_bf(s[d]) : s_bf(0.0f);
        }
    }
}

// acc (16 x 16) += A B_j: A (16, 64) bf16 at ld ldp, B_j the 16 columns 16 j.. of a (64, Dp)
// bf16 tile at ld ldh (P V, P^T dO, dS^T Q, dS K: one 16-column block of the result).
__device__ static inline void
s_tc_ab(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> &acc,
        const __nv_bfloat16 *a, int ldp, const __nv_bfloat16 *b, int ldh, int j) {
    using namespace nvcuda;
    for (int kk = 0; kk < S_TC_BC; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, a + kk, (unsigned)ldp);
        wmma::load_matrix_sync(fb, b + kk * ldh + 16 * j, (unsigned)ldh);
        wmma::mma_sync(acc, fa, fb, acc);
    }
}

// out (16, 64) fp32 at ld lds = A (16 rows of a, row stride ldh) B^T, B the 64 rows of b: the
// scores of 16 rows against 64 (a's and b's first dp columns).
__device__ static inline void s_tc_abt(float *out, int lds, const __nv_bfloat16 *a,
                                       const __nv_bfloat16 *b, int ldh, int dp) {
    using namespace nvcuda;
    for (int j = 0; j < S_TC_BC / 16; j++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < dp; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
            wmma::load_matrix_sync(fa, a + kk, (unsigned)ldh);
            wmma::load_matrix_sync(fb, b + 16 * j * ldh + kk, (unsigned)ldh);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(out + 16 * j, acc, (unsigned)lds, wmma::mem_row_major);
    }
}

// s_fwd_tile's contract (queries i in [q0, q0 + BR) ∩ [0, nq) at positions p0 + i, keys j <=
// p0 + i), on the tensor cores. Every thread of the block calls it.
template <int WARPS, typename KT>
__device__ static void s_tc_fwd_tile(float *out, float *lse, const float *q, const KT *k,
                                     const KT *v, int p0, int nq, int q0, int qs, int ks, int D,
                                     float scale) {
    using namespace nvcuda;
    constexpr int BR = 16 * WARPS, BC = S_TC_BC, NT = 32 * WARPS;
    const int dp = s_tc_dp(D), ldh = dp + 8, lds = BC + 4, ldp = BC + 8, ldo = dp + 4;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    __nv_bfloat16 *sq = reinterpret_cast<__nv_bfloat16 *>(s_smem()); // (BR, ldh)
    __nv_bfloat16 *sk = sq + BR * ldh;                               // (BC, ldh)
    __nv_bfloat16 *sv = sk + BC * ldh;                               // (BC, ldh)
    char *wb = reinterpret_cast<char *>(sv + BC * ldh) + (size_t)warp * s_tc_warp_bytes(dp);
    float *ss = reinterpret_cast<float *>(wb);                            // (16, lds) scores
    __nv_bfloat16 *sp = reinterpret_cast<__nv_bfloat16 *>(ss + 16 * lds); // (16, ldp) P
    float *so = reinterpret_cast<float *>(sp + 16 * ldp);                 // (16, ldo) O
    const int nr = s_imin(BR, nq - q0);                                   // real rows, >= 1
    const int kend = p0 + q0 + nr; // keys 0..kend-1 are seen by some row
    s_tc_load(sq, q + (size_t)q0 * qs, (size_t)qs, nr, BR, D, dp, ldh, NT);
    // this lane's row (of the warp's 16) and half: scores half * BC/2.., O half * dp/2..; a row
    // past nq sees what the last real row sees (its scores stay finite)
    const int r = lane / 2, half = lane % 2, row = 16 * warp + r;
    const int tpos = p0 + q0 + s_imin(row, nr - 1);
    const int wlast = p0 + q0 + s_imin(16 * warp + 15, nr - 1); // the warp's last position
    const int ho = half * (dp / 2);
    float m = -INFINITY, l = 0.0f;
    for (int c = ho; c < ho + dp / 2; c++) {
        so[r * ldo + c] = 0.0f;
    }
    for (int k0 = 0; k0 < kend; k0 += BC) {
        __syncthreads(); // the previous tile's sk, sv are read (and sq is written)
        const int nk = s_imin(BC, kend - k0);
        s_tc_load(sk, k + (size_t)k0 * ks, (size_t)ks, nk, BC, D, dp, ldh, NT);
        s_tc_load(sv, v + (size_t)k0 * ks, (size_t)ks, nk, BC, D, dp, ldh, NT);
        __syncthreads();
        if (16 * warp >= nr || k0 > wlast) {
            continue; // the warp has no real row, or every row of it precedes these keys
        }
        s_tc_abt(ss, lds, sq + 16 * warp * ldh, sk, ldh, dp); // S = Q K^T, the warp's 16 rows
        __syncwarp();
        // online softmax over this tile: the lane's half row, its pair's other half by shuffle
        float sc[BC / 2];
        float mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < BC / 2; c++) {
            const int col = half * (BC / 2) + c;
            sc[c] = k0 + col <= tpos ? ss[r * lds + col] * scale : -INFINITY;
            mx = fmaxf(mx, sc[c]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float mnew = fmaxf(m, mx); // finite: key 0 is in tile 0
        const float alpha = expf(m - mnew);
        float sum = 0.0f;
#pragma unroll
        for (int c = 0; c < BC / 2; c++) {
            const float p = expf(sc[c] - mnew); // 0 where masked
            sp[r * ldp + half * (BC / 2) + c] = __float2bfloat16_rn(p);
            sum += p;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = alpha * l + sum;
        m = mnew;
        for (int c = ho; c < ho + dp / 2; c++) {
            so[r * ldo + c] *= alpha;
        }
        __syncwarp(); // P and the rescaled O complete
        // O += P V
        for (int j = 0; j < dp / 16; j++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, so + 16 * j, (unsigned)ldo, wmma::mem_row_major);
            s_tc_ab(acc, sp, ldp, sv, ldh, j);
            wmma::store_matrix_sync(so + 16 * j, acc, (unsigned)ldo, wmma::mem_row_major);
        }
        __syncwarp(); // O stored
    }
    // the warp writes its rows, lanes along each (l and m of row rr are lane 2 rr's)
    for (int rr = 0; rr < 16; rr++) {
        const float lr = __shfl_sync(0xffffffffu, l, 2 * rr);
        const float mr = __shfl_sync(0xffffffffu, m, 2 * rr);
        const int at = 16 * warp + rr;
        if (at < nr) {
            const float inv = 1.0f / lr;
            float *dst = out + (size_t)(q0 + at) * qs;
            for (int c = lane; c < D; c += 32) {
                dst[c] = so[rr * ldo + c] * inv;
            }
            if (lse && lane == 0) {
                lse[q0 + at] = mr + logf(lr);
            }
        }
    }
}

// grid (N / BR + B, NH): s_fwd_kernel's tiles on the tensor cores.
template <int WARPS>
__global__ void __launch_bounds__(32 * WARPS)
    s_tc_fwd_kernel(float *out, float *lse, const float *q, const float *k, const float *v,
                    const int *starts, int B, int NH, int NKV, int D, float scale) {
    s_at_t a;
    if (s_fwd_at(&a, lse, starts, B, NH, NKV, D, 16 * WARPS)) {
        s_tc_fwd_tile<WARPS, float>(out + a.qo, a.lse, q + a.qo, k + a.ko, v + a.ko, 0, a.nq, a.q0,
                                    NH * D, NKV * D, D, scale);
    }
}

// grid (N / BR + B, NH): s_prefill_kernel's runs on the tensor cores.
template <int WARPS>
__global__ void __launch_bounds__(32 * WARPS)
    s_tc_prefill_kernel(float *out, const float *q, const __nv_bfloat16 *kc,
                        const __nv_bfloat16 *vc, const int *q_starts, const int *slots,
                        const int *pos0, int B, int NH, int NKV, int D, int n_slots, int max_len,
                        float scale) {
    s_at_t a;
    if (s_prefill_at(&a, out, q_starts, slots, pos0, B, NH, NKV, D, n_slots, max_len, 16 * WARPS,
                     32 * WARPS)) {
        s_tc_fwd_tile<WARPS, __nv_bfloat16>(out + a.qo, NULL, q + a.qo, kc + a.ko, vc + a.ko, a.p0,
                                            a.nq, a.q0, NH * D, NKV * D, D, scale);
    }
}

// ---------------------------------------------------------------------------------------------
// backward

// delta[w] = dout_w . out_w for each of the rows (N*NH) rows of D floats: a warp per row.
__global__ void s_delta_kernel(float *delta, const float *dout, const float *out, size_t rows,
                               int D) {
    const size_t w = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
    const int lane = (int)(threadIdx.x % 32);
    if (w >= rows) {
        return; // the whole warp: w is the same in its 32 lanes
    }
    const float *a = dout + w * D, *b = out + w * D;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) {
        s += a[d] * b[d];
    }
    s = s_warp_sum(s);
    if (lane == 0) {
        delta[w] = s;
    }
}

// Scores and dP of one (BR queries) x (BC keys) tile: s[i][j] = q_r . k_c, dp[i][j] = do_r . v_c
// for rows r = ty + 16 i and keys c = tx + 16 j, from the tiles in shared memory.
template <int RI, int CJ>
__device__ static inline void s_bwd_scores(float (&s)[RI][CJ], float (&dp)[RI][CJ], const float *sq,
                                           const float *sdo, const float *sk, const float *sv,
                                           int ld, int D) {
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll
    for (int i = 0; i < RI; i++) {
#pragma unroll
        for (int j = 0; j < CJ; j++) {
            s[i][j] = 0.0f;
            dp[i][j] = 0.0f;
        }
    }
#pragma unroll 2
    for (int d = 0; d < D; d++) {
        float a[RI], g[RI], b[CJ], w[CJ];
#pragma unroll
        for (int i = 0; i < RI; i++) {
            a[i] = sq[(ty + 16 * i) * ld + d];
            g[i] = sdo[(ty + 16 * i) * ld + d];
        }
#pragma unroll
        for (int j = 0; j < CJ; j++) {
            b[j] = sk[(tx + 16 * j) * ld + d];
            w[j] = sv[(tx + 16 * j) * ld + d];
        }
#pragma unroll
        for (int i = 0; i < RI; i++) {
#pragma unroll
            for (int j = 0; j < CJ; j++) {
                s[i][j] += a[i] * b[j];
                dp[i][j] += g[i] * w[j];
            }
        }
    }
}

// Query rows q0.. (nr real) of head h into shared memory: q (rounded to bf16: R16), dout, lse,
// delta (zeros past nr).
template <bool R16>
__device__ static inline void
s_bwd_load_queries(float *sq, float *sdo, float *slse, float *sdl, const float *q,
                   const float *dout, const float *lse, const float *delta, int row0, int len,
                   int q0, int nr, int h, int NH, int D, int ld) {
    const size_t qs = (size_t)NH * D, qo = ((size_t)row0 + q0) * qs + (size_t)h * D;
    s_load_rows<R16>(sq, q + qo, qs, nr, S_BWD_BR, D, ld, S_THREADS);
    s_load_rows(sdo, dout + qo, qs, nr, S_BWD_BR, D, ld, S_THREADS);
    for (int r = (int)threadIdx.x; r < S_BWD_BR; r += S_THREADS) {
        slse[r] = r < nr ? lse[(size_t)row0 * NH + (size_t)h * len + q0 + r] : 0.0f;
        sdl[r] = r < nr ? delta[((size_t)row0 + q0 + r) * NH + h] : 0.0f;
    }
}

// grid (N / BC + B, NKV): key tile blockIdx.x of kv head blockIdx.y. dK and dV of the tile's
// keys are summed over the group's query heads and every query at or after the tile's first
// key, in registers (keys ty + 16 i, columns tx + 16 c), then added once.
template <int DMAX, bool R16>
__global__ void __launch_bounds__(S_THREADS)
    s_bwd_dkdv_kernel(float *dk, float *dv, const float *dout, const float *q, const float *k,
                      const float *v, const float *lse, const float *delta, const int *starts,
                      int B, int NH, int NKV, int D, float scale) {
    constexpr int BR = S_BWD_BR, BC = S_BWD_BC, RI = BR / 16, CJ = BC / 16, KI = BC / 16;
    constexpr int CD = DMAX / 16;
    int t;
    const int b = s_find(starts, B, BC, (int)blockIdx.x, &t);
    if (b < 0) {
        return;
    }
    const int g = (int)blockIdx.y, grp = NH / NKV, tid = (int)threadIdx.x;
    const int ty = tid / 16, tx = tid % 16, ld = s_ld(D), pld = s_pld(BC);
    const int row0 = starts[b], len = starts[b + 1] - row0, k0 = t * BC;
    const int nk = s_imin(BC, len - k0), ks = NKV * D;
    float *sk = s_smem();         // (BC, ld) the tile's keys (0 past nk)
    float *sv = sk + BC * ld;     // (BC, ld) values
    float *sq = sv + BC * ld;     // (BR, ld) queries of the current query tile (0 past nr)
    float *sdo = sq + BR * ld;    // (BR, ld) their dout
    float *sp = sdo + BR * ld;    // (BR, pld) P
    float *sds = sp + BR * pld;   // (BR, pld) dS
    float *slse = sds + BR * pld; // (BR) lse
    float *sdl = slse + BR;       // (BR) delta
    const size_t ko = ((size_t)row0 + k0) * ks + (size_t)g * D;
    s_load_rows<R16>(sk, k + ko, (size_t)ks, nk, BC, D, ld, S_THREADS);
    s_load_rows<R16>(sv, v + ko, (size_t)ks, nk, BC, D, ld, S_THREADS);
    float ak[KI][CD], av[KI][CD];
#pragma unroll
    for (int i = 0; i < KI; i++) {
#pragma unroll
        for (int c = 0; c < CD; c++) {
            ak[i][c] = 0.0f;
            av[i][c] = 0.0f;
        }
    }
    for (int h = g * grp; h < (g + 1) * grp; h++) {
        for (int q0 = (k0 / BR) * BR; q0 < len; q0 += BR) {
            const int nr = s_imin(BR, len - q0);
            __syncthreads(); // sq, sdo, sp, sds of the previous tile are read
            s_bwd_load_queries<R16>(sq, sdo, slse, sdl, q, dout, lse, delta, row0, len, q0, nr, h,
                                    NH, D, ld);
            __syncthreads(); // (the first time: sk, sv too)
            float s[RI][CJ], dp[RI][CJ];
            s_bwd_scores<RI, CJ>(s, dp, sq, sdo, sk, sv, ld, D);
#pragma unroll
            for (int i = 0; i < RI; i++) {
                const int r = ty + 16 * i;
#pragma unroll
                for (int j = 0; j < CJ; j++) {
                    const int c = tx + 16 * j;
                    float p = 0.0f, ds = 0.0f;
                    if (r < nr && k0 + c <= q0 + r) { // causal (and so c < nk)
                        p = expf(s[i][j] * scale - slse[r]);
                        ds = p * (dp[i][j] - sdl[r]);
                    }
                    sp[r * pld + c] = p;
                    sds[r * pld + c] = ds;
                }
            }
            __syncthreads(); // sp, sds complete
            // dV += P^T dO,  dK += dS^T Q  (scale applied once at the end)
            for (int r = 0; r < nr; r++) {
                float pk[KI], dk_[KI];
#pragma unroll
                for (int i = 0; i < KI; i++) {
                    pk[i] = sp[r * pld + ty + 16 * i];
                    dk_[i] = sds[r * pld + ty + 16 * i];
                }
#pragma unroll
                for (int c = 0; c < CD; c++) {
                    const int col = tx + 16 * c;
                    if (col < D) {
                        const float gq = sdo[r * ld + col], qq = sq[r * ld + col];
#pragma unroll
                        for (int i = 0; i < KI; i++) {
                            av[i][c] += pk[i] * gq;
                            ak[i][c] += dk_[i] * qq;
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < KI; i++) {
        const int key = ty + 16 * i;
        if (key < nk) {
            const size_t o = ((size_t)row0 + k0 + key) * ks + (size_t)g * D;
#pragma unroll
            for (int c = 0; c < CD; c++) {
                const int col = tx + 16 * c;
                if (col < D) {
                    if (dk) {
                        dk[o + col] += scale * ak[i][c];
                    }
                    if (dv) {
                        dv[o + col] += av[i][c];
                    }
                }
            }
        }
    }
}

// grid (N / BR + B, NH): query tile blockIdx.x of head blockIdx.y. dQ of the tile's rows summed
// over the key tiles up to its last row, in registers (rows ty + 16 i, columns tx + 16 c).
template <int DMAX, bool R16>
__global__ void __launch_bounds__(S_THREADS)
    s_bwd_dq_kernel(float *dq, const float *dout, const float *q, const float *k, const float *v,
                    const float *lse, const float *delta, const int *starts, int B, int NH, int NKV,
                    int D, float scale) {
    constexpr int BR = S_BWD_BR, BC = S_BWD_BC, RI = BR / 16, CJ = BC / 16, CD = DMAX / 16;
    int t;
    const int b = s_find(starts, B, BR, (int)blockIdx.x, &t);
    if (b < 0) {
        return;
    }
    const int h = (int)blockIdx.y, g = h / (NH / NKV), tid = (int)threadIdx.x;
    const int ty = tid / 16, tx = tid % 16, ld = s_ld(D), pld = s_pld(BC);
    const int row0 = starts[b], len = starts[b + 1] - row0, q0 = t * BR;
    const int nr = s_imin(BR, len - q0), ks = NKV * D, kend = q0 + nr;
    float *sq = s_smem();         // (BR, ld) the tile's queries (0 past nr)
    float *sdo = sq + BR * ld;    // (BR, ld) their dout
    float *sk = sdo + BR * ld;    // (BC, ld) keys of the current key tile (0 past kend)
    float *sv = sk + BC * ld;     // (BC, ld) values
    float *sds = sv + BC * ld;    // (BR, pld) dS
    float *slse = sds + BR * pld; // (BR) lse
    float *sdl = slse + BR;       // (BR) delta
    s_bwd_load_queries<R16>(sq, sdo, slse, sdl, q, dout, lse, delta, row0, len, q0, nr, h, NH, D,
                            ld);
    float acc[RI][CD];
#pragma unroll
    for (int i = 0; i < RI; i++) {
#pragma unroll
        for (int c = 0; c < CD; c++) {
            acc[i][c] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < kend; k0 += BC) {
        const int nk = s_imin(BC, kend - k0);
        __syncthreads(); // sk, sv, sds of the previous tile are read (sq, sdo, slse, sdl written)
        const size_t ko = ((size_t)row0 + k0) * ks + (size_t)g * D;
        s_load_rows<R16>(sk, k + ko, (size_t)ks, nk, BC, D, ld, S_THREADS);
        s_load_rows<R16>(sv, v + ko, (size_t)ks, nk, BC, D, ld, S_THREADS);
        __syncthreads();
        float s[RI][CJ], dp[RI][CJ];
        s_bwd_scores<RI, CJ>(s, dp, sq, sdo, sk, sv, ld, D);
#pragma unroll
        for (int i = 0; i < RI; i++) {
            const int r = ty + 16 * i;
#pragma unroll
            for (int j = 0; j < CJ; j++) {
                const int c = tx + 16 * j;
                float ds = 0.0f;
                if (r < nr && k0 + c <= q0 + r) {
                    const float p = expf(s[i][j] * scale - slse[r]);
                    ds = p * (dp[i][j] - sdl[r]);
                }
                sds[r * pld + c] = ds;
            }
        }
        __syncthreads(); // sds complete
        // dQ += dS K  (scale at the end)
        for (int j = 0; j < nk; j++) {
            float a[RI];
#pragma unroll
            for (int i = 0; i < RI; i++) {
                a[i] = sds[(ty + 16 * i) * pld + j];
            }
#pragma unroll
            for (int c = 0; c < CD; c++) {
                const int col = tx + 16 * c;
                if (col < D) {
                    const float kk = sk[j * ld + col];
#pragma unroll
                    for (int i = 0; i < RI; i++) {
                        acc[i][c] += a[i] * kk;
                    }
                }
            }
        }
    }
    const size_t qs = (size_t)NH * D;
#pragma unroll
    for (int i = 0; i < RI; i++) {
        const int r = ty + 16 * i;
        if (r < nr) {
            float *dst = dq + ((size_t)row0 + q0 + r) * qs + (size_t)h * D;
#pragma unroll
            for (int c = 0; c < CD; c++) {
                const int col = tx + 16 * c;
                if (col < D) {
                    dst[col] += scale * acc[i][c];
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the bf16 backward on the tensor cores (attn_backward_bf16 when Dp <= 128)
//
// FlashAttention-2's backward with its bf16 roundings: q, k, v and dout rounded to bf16 as their
// tiles are loaded, the scores and dP accumulated in fp32 on the tensor cores, P = exp(scale S -
// lse) and dS = P (dP - delta) in fp32, then rounded to bf16 for dV += P^T dO, dK += dS^T Q and
// dQ += dS K (fp32 accumulators in registers: wmma fragments, which need no per-row rescaling
// here, so they stay out of shared memory until the end). As with the fp32 kernels, one block
// owns each key tile (dK, dV: s_tc_bwd_dkdv_kernel, over the group's query heads and the query
// tiles at or after it) and another each query tile (dQ: s_tc_bwd_dq_kernel): no atomics, the
// same bits every run. Blocks of 4 warps; tiles of 64 queries and 64 keys, a warp owning 16 keys
// (dK, dV) or 16 queries (dQ). Dp <= 128 (NF = Dp / 16 <= 8 fragments each of dK and dV in
// registers); larger head dimensions take the CUDA cores (s_bwd_*_kernel<DMAX, true>).
//
// Shared memory: two tiles of 64 rows of bf16 (Dp + 8) for q and dout, two for k and v, lse and
// delta (64 floats each), and per warp the scores and dP (16, BC + 4) fp32, P and dS (16, BC + 8)
// bf16 and an output tile (16, Dp + 4) fp32.
enum {
    S_TCB_T = S_TC_BC, // queries and keys per tile (s_tc_abt's 64)
};

__host__ __device__ static inline size_t s_tcb_warp_bytes(int dp) {
    return (size_t)2 * 16 * (S_TCB_T + 4) * 4 + (size_t)2 * 16 * (S_TCB_T + 8) * 2 +
           (size_t)16 * (size_t)(dp + 4) * 4;
}

static size_t s_tcb_smem(int D) {
    const int dp = s_tc_dp(D);
    return (size_t)4 * S_TCB_T * (size_t)(dp + 8) * 2 + (size_t)2 * S_TCB_T * 4 +
           4 * s_tcb_warp_bytes(dp);
}

struct s_tcb_smem_t {
    __nv_bfloat16 *q, *dout, *k, *v; // (64, ldh) each
    float *lse, *delta;              // (64) each
    float *s, *dp;                   // this warp's (16, lds) each
    __nv_bfloat16 *p, *ds;           // this warp's (16, ldp) each
    float *o;                        // this warp's (16, ldo)
};

__device__ static inline s_tcb_smem_t s_tcb_layout(int dp) {
    constexpr int T = S_TCB_T;
    const int ldh = dp + 8, lds = T + 4, ldp = T + 8;
    s_tcb_smem_t m;
    m.q = reinterpret_cast<__nv_bfloat16 *>(s_smem());
    m.dout = m.q + T * ldh;
    m.k = m.dout + T * ldh;
    m.v = m.k + T * ldh;
    m.lse = reinterpret_cast<float *>(m.v + T * ldh);
    m.delta = m.lse + T;
    char *wb =
        reinterpret_cast<char *>(m.delta + T) + (size_t)(threadIdx.x / 32) * s_tcb_warp_bytes(dp);
    m.s = reinterpret_cast<float *>(wb);
    m.dp = m.s + 16 * lds;
    m.p = reinterpret_cast<__nv_bfloat16 *>(m.dp + 16 * lds);
    m.ds = m.p + 16 * ldp;
    m.o = reinterpret_cast<float *>(m.ds + 16 * ldp);
    return m;
}

// Query rows q0.. (nr real) of head h into the block's tiles: q and dout (rounded), lse, delta
// (zeros past nr). Every thread of the block (128) calls it.
__device__ static inline void s_tcb_load_queries(const s_tcb_smem_t *m, const float *q,
                                                 const float *dout, const float *lse,
                                                 const float *delta, int row0, int len, int q0,
                                                 int nr, int h, int NH, int D) {
    constexpr int T = S_TCB_T;
    const int dp = s_tc_dp(D), ldh = dp + 8;
    const size_t qs = (size_t)NH * D, qo = ((size_t)row0 + q0) * qs + (size_t)h * D;
    s_tc_load(m->q, q + qo, qs, nr, T, D, dp, ldh, 128);
    s_tc_load(m->dout, dout + qo, qs, nr, T, D, dp, ldh, 128);
    for (int i = (int)threadIdx.x; i < T; i += 128) {
        m->lse[i] = i < nr ? lse[(size_t)row0 * NH + (size_t)h * len + q0 + i] : 0.0f;
        m->delta[i] = i < nr ? delta[((size_t)row0 + q0 + i) * NH + h] : 0.0f;
    }
}

// acc[j] (16 x 16 blocks j of a (16, Dp) accumulator) += A B: A (16, 64) bf16 at ld ldp, B the
// (64, Dp) bf16 tile at ld ldh.
template <int NF>
__device__ static inline void
s_tcb_ab(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> (&acc)[NF],
         const __nv_bfloat16 *a, int ldp, const __nv_bfloat16 *b, int ldh, int dp) {
#pragma unroll
    for (int j = 0; j < NF; j++) {
        if (16 * j < dp) {
            s_tc_ab(acc[j], a, ldp, b, ldh, j);
        }
    }
}

// dst rows (n of this warp's 16, row stride rs) += scale * acc, through the warp's o tile.
template <int NF>
__device__ static inline void
s_tcb_add(float *dst, size_t rs, int n,
          nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> (&acc)[NF], float *o,
          int dp, int D, float scale) {
    using namespace nvcuda;
    const int ldo = dp + 4, lane = (int)threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < NF; j++) {
        if (16 * j < dp) {
            for (int i = 0; i < acc[j].num_elements; i++) {
                acc[j].x[i] *= scale;
            }
            wmma::store_matrix_sync(o + 16 * j, acc[j], (unsigned)ldo, wmma::mem_row_major);
        }
    }
    __syncwarp(); // o stored
    for (int r = 0; r < n; r++) {
        for (int c = lane; c < D; c += 32) {
            dst[(size_t)r * rs + c] += o[r * ldo + c];
        }
    }
    __syncwarp(); // o is read before it is written again
}

// grid (N / 64 + B, NKV): key tile blockIdx.x of kv head blockIdx.y; its warp w owns keys
// k0 + 16 w.. and sums their dK and dV over the group's query heads and the query tiles at or
// after the tile, in registers, then adds them once.
template <int NF>
__global__ void __launch_bounds__(128)
    s_tc_bwd_dkdv_kernel(float *dk, float *dv, const float *dout, const float *q, const float *k,
                         const float *v, const float *lse, const float *delta, const int *starts,
                         int B, int NH, int NKV, int D, float scale) {
    using namespace nvcuda;
    constexpr int T = S_TCB_T;
    int t;
    const int b = s_find(starts, B, T, (int)blockIdx.x, &t);
    if (b < 0) {
        return;
    }
    const int g = (int)blockIdx.y, grp = NH / NKV, warp = (int)threadIdx.x / 32;
    const int lane = (int)threadIdx.x % 32, r = lane / 2, half = lane % 2;
    const int dp = s_tc_dp(D), ldh = dp + 8, lds = T + 4, ldp = T + 8;
    const int row0 = starts[b], len = starts[b + 1] - row0, k0 = t * T;
    const int nk = s_imin(T, len - k0), ks = NKV * D;
    const s_tcb_smem_t m = s_tcb_layout(dp);
    const size_t ko = ((size_t)row0 + k0) * ks + (size_t)g * D;
    s_tc_load(m.k, k + ko, (size_t)ks, nk, T, D, dp, ldh, 128);
    s_tc_load(m.v, v + ko, (size_t)ks, nk, T, D, dp, ldh, 128);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> adk[NF], adv[NF];
#pragma unroll
    for (int j = 0; j < NF; j++) {
        wmma::fill_fragment(adk[j], 0.0f);
        wmma::fill_fragment(adv[j], 0.0f);
    }
    const int key = k0 + 16 * warp + r; // this lane's key (its row of S^T)
    for (int h = g * grp; h < (g + 1) * grp; h++) {
        for (int q0 = k0; q0 < len; q0 += T) {
            const int nr = s_imin(T, len - q0);
            __syncthreads(); // the previous query tile is read (the first time: k, v written)
            s_tcb_load_queries(&m, q, dout, lse, delta, row0, len, q0, nr, h, NH, D);
            __syncthreads();
            if (16 * warp >= nk || q0 + nr - 1 < k0 + 16 * warp) {
                continue; // no real key in this warp, or every query precedes its keys
            }
            s_tc_abt(m.s, lds, m.k + 16 * warp * ldh, m.q, ldh, dp);     // S^T
            s_tc_abt(m.dp, lds, m.v + 16 * warp * ldh, m.dout, ldh, dp); // dP^T
            __syncwarp();
#pragma unroll 4
            for (int c = half * (T / 2); c < (half + 1) * (T / 2); c++) { // queries q0 + c
                float p = 0.0f, ds = 0.0f;
                if (key < k0 + nk && c < nr && key <= q0 + c) {
                    p = expf(m.s[r * lds + c] * scale - m.lse[c]);
                    ds = p * (m.dp[r * lds + c] - m.delta[c]);
                }
                m.p[r * ldp + c] = __float2bfloat16_rn(p);
                m.ds[r * ldp + c] = __float2bfloat16_rn(ds);
            }
            // P^T and dS^T complete
            __syncwarp();
            s_tcb_ab<NF>(adv, m.p, ldp, m.dout, ldh, dp); // dV += P^T dO
            s_tcb_ab<NF>(adk, m.ds, ldp, m.q, ldh, dp);   // dK += dS^T Q
        }
    }
    if (16 * warp < nk) {
        const int n = s_imin(16, nk - 16 * warp);
        const size_t at = ko + (size_t)16 * warp * ks;
        if (dk) {
            s_tcb_add<NF>(dk + at, (size_t)ks, n, adk, m.o, dp, D, scale);
        }
        if (dv) {
            s_tcb_add<NF>(dv + at, (size_t)ks, n, adv, m.o, dp, D, 1.0f);
        }
    }
}

// grid (N / 64 + B, NH): query tile blockIdx.x of head blockIdx.y; its warp w owns queries
// q0 + 16 w.. and sums their dQ over the key tiles up to its last row, in registers.
template <int NF>
__global__ void __launch_bounds__(128)
    s_tc_bwd_dq_kernel(float *dq, const float *dout, const float *q, const float *k, const float *v,
                       const float *lse, const float *delta, const int *starts, int B, int NH,
                       int NKV, int D, float scale) {
    using namespace nvcuda;
    constexpr int T = S_TCB_T;
    int t;
    const int b = s_find(starts, B, T, (int)blockIdx.x, &t);
    if (b < 0) {
        return;
    }
    const int h = (int)blockIdx.y, g = h / (NH / NKV), warp = (int)threadIdx.x / 32;
    const int lane = (int)threadIdx.x % 32, r = lane / 2, half = lane % 2;
    const int dp = s_tc_dp(D), ldh = dp + 8, lds = T + 4, ldp = T + 8;
    const int row0 = starts[b], len = starts[b + 1] - row0, q0 = t * T;
    const int nr = s_imin(T, len - q0), ks = NKV * D, qs = NH * D, kend = q0 + nr;
    const s_tcb_smem_t m = s_tcb_layout(dp);
    const size_t qo = ((size_t)row0 + q0) * qs + (size_t)h * D;
    s_tcb_load_queries(&m, q, dout, lse, delta, row0, len, q0, nr, h, NH, D);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> adq[NF];
#pragma unroll
    for (int j = 0; j < NF; j++) {
        wmma::fill_fragment(adq[j], 0.0f);
    }
    const int row = 16 * warp + r; // this lane's query (of the tile)
    const int wlast = q0 + s_imin(16 * warp + 15, nr - 1);
    for (int k0 = 0; k0 < kend; k0 += T) {
        const int nk = s_imin(T, kend - k0);
        __syncthreads(); // the previous key tile is read (the first time: q, dout, lse written)
        const size_t ko = ((size_t)row0 + k0) * ks + (size_t)g * D;
        s_tc_load(m.k, k + ko, (size_t)ks, nk, T, D, dp, ldh, 128);
        s_tc_load(m.v, v + ko, (size_t)ks, nk, T, D, dp, ldh, 128);
        __syncthreads();
        if (16 * warp >= nr || k0 > wlast) {
            continue; // no real query in this warp, or every one precedes these keys
        }
        s_tc_abt(m.s, lds, m.q + 16 * warp * ldh, m.k, ldh, dp);     // S
        s_tc_abt(m.dp, lds, m.dout + 16 * warp * ldh, m.v, ldh, dp); // dP
        __syncwarp();
#pragma unroll 4
        for (int c = half * (T / 2); c < (half + 1) * (T / 2); c++) { // keys k0 + c
            float ds = 0.0f;
            if (row < nr && k0 + c <= q0 + row) {
                const float p = expf(m.s[r * lds + c] * scale - m.lse[row]);
                ds = p * (m.dp[r * lds + c] - m.delta[row]);
            }
            m.ds[r * ldp + c] = __float2bfloat16_rn(ds);
        }
        __syncwarp();
        s_tcb_ab<NF>(adq, m.ds, ldp, m.k, ldh, dp); // dQ += dS K
    }
    if (16 * warp < nr) {
        s_tcb_add<NF>(dq + qo + (size_t)16 * warp * qs, (size_t)qs, s_imin(16, nr - 16 * warp), adq,
                      m.o, dp, D, scale);
    }
}

// ---------------------------------------------------------------------------------------------
// KV cache: write and batched decode

// x as a cache element: fp32 as it is, bf16 rounded to nearest even.
__device__ static inline float s_as(float x, float *) {
    return x;
}

__device__ static inline __nv_bfloat16 s_as(float x, __nv_bfloat16 *) {
    return __float2bfloat16_rn(x);
}

template <typename C>
__global__ void s_cache_write_kernel(C *kc, C *vc, const float *k, const float *v, const int *slots,
                                     const int *pos, size_t total, int KVD, int n_slots,
                                     int max_len) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)KVD, e = i % (size_t)KVD;
        const int s = slots[r], p = pos[r];
        if (s < 0 || s >= n_slots || p < 0 || p >= max_len) {
            continue;
        }
        const size_t dst = ((size_t)s * max_len + p) * KVD + e;
        kc[dst] = s_as(k[i], kc);
        vc[dst] = s_as(v[i], vc);
    }
}

// grid (S, NKV, ceil(grp / HPB)), 128 threads: row s, the query heads h0..h0+nh-1 (nh <= HPB) of
// kv head blockIdx.y, against tiles of BK keys of its slot: each K and V row is read once for
// all the heads that share it. Scores: thread per (head, key); softmax: warp w owns heads w and
// w + 4 (BK = 32: a key per lane); output: thread per (head, column) elements tid + 128 e.
template <int DMAX, typename C>
__global__ void __launch_bounds__(S_DEC_THREADS)
    s_decode_kernel(float *out, const float *q, const C *kc, const C *vc, const int *slots,
                    const int *n_ctx, int NH, int NKV, int D, int n_slots, int max_len,
                    float scale) {
    constexpr int BK = S_DEC_BK, HPB = S_DEC_HPB, NT = S_DEC_THREADS, E = HPB * DMAX / NT;
    constexpr int HW = HPB / (NT / 32); // heads per warp in the softmax
    static_assert(BK == 32, "a key per lane");
    const int s = (int)blockIdx.x, g = (int)blockIdx.y, grp = NH / NKV;
    const int h0 = g * grp + (int)blockIdx.z * HPB, nh = s_imin(HPB, grp - (int)blockIdx.z * HPB);
    const int tid = (int)threadIdx.x, warp = tid / 32, lane = tid % 32, ld = s_ld(D);
    const int slot = slots ? slots[s] : s, n = n_ctx[s], ks = NKV * D;
    float *orow = out + ((size_t)s * NH + h0) * D; // heads h0.. are consecutive: nh * D floats
    if (slot < 0 || slot >= n_slots || n < 1 || n > max_len) {
        for (int i = tid; i < nh * D; i += NT) {
            orow[i] = NAN;
        }
        return;
    }
    float *sq = s_smem();      // (HPB, D) the queries
    float *sk = sq + HPB * D;  // (BK, ld) keys of the tile (0 past n)
    float *sv = sk + BK * ld;  // (BK, ld) values
    float *sp = sv + BK * ld;  // (HPB, BK) scores, then probabilities
    float *sa = sp + HPB * BK; // (HPB) the tile's rescale factors
    float *sl = sa + HPB;      // (HPB) the final sums
    const float *qrow = q + ((size_t)s * NH + h0) * D;
    for (int i = tid; i < nh * D; i += NT) {
        sq[i] = qrow[i];
    }
    const size_t base = (size_t)slot * max_len * ks + (size_t)g * D;
    float m[HW], l[HW], o[E];
#pragma unroll
    for (int u = 0; u < HW; u++) {
        m[u] = -INFINITY;
        l[u] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < E; e++) {
        o[e] = 0.0f;
    }
    for (int k0 = 0; k0 < n; k0 += BK) {
        const int nk = s_imin(BK, n - k0);
        __syncthreads(); // the previous tile is read (sq written)
        s_load_rows(sk, kc + base + (size_t)k0 * ks, (size_t)ks, nk, BK, D, ld, NT);
        s_load_rows(sv, vc + base + (size_t)k0 * ks, (size_t)ks, nk, BK, D, ld, NT);
        __syncthreads();
        for (int i = tid; i < nh * BK; i += NT) {
            const int hh = i / BK, j = i % BK;
            float acc = 0.0f;
            for (int d = 0; d < D; d++) {
                acc += sq[hh * D + d] * sk[j * ld + d];
            }
            sp[i] = j < nk ? acc * scale : -INFINITY;
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < HW; u++) {
            const int hh = warp + (NT / 32) * u;
            if (hh < nh) { // the same in the whole warp
                const float x = sp[hh * BK + lane];
                const float mnew = fmaxf(m[u], s_warp_max(x)); // finite: key k0 < n
                const float alpha = expf(m[u] - mnew), p = expf(x - mnew);
                sp[hh * BK + lane] = p;
                l[u] = alpha * l[u] + s_warp_sum(p);
                m[u] = mnew;
                if (lane == 0) {
                    sa[hh] = alpha;
                }
            }
        }
        __syncthreads();
#pragma unroll
        for (int e = 0; e < E; e++) {
            const int i = tid + NT * e;
            if (i < nh * D) {
                const int hh = i / D, d = i % D;
                float acc = o[e] * sa[hh];
                for (int j = 0; j < nk; j++) {
                    acc += sp[hh * BK + j] * sv[j * ld + d];
                }
                o[e] = acc;
            }
        }
    }
#pragma unroll
    for (int u = 0; u < HW; u++) {
        const int hh = warp + (NT / 32) * u;
        if (hh < nh && lane == 0) {
            sl[hh] = l[u];
        }
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < E; e++) {
        const int i = tid + NT * e;
        if (i < nh * D) {
            orow[i] = o[e] / sl[i / D];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// launches

template <int DMAX>
static int s_forward_launch(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q,
                            const float *k, const float *v, const int *starts, int B, int NH,
                            int NKV, int D, unsigned tiles) {
    const size_t smem = s_fwd_smem(D);
    if (s_smem_attr(ctx, s_fwd_kernel<DMAX>, smem, "attention forward", D) != 0) {
        return -1;
    }
    s_fwd_kernel<DMAX><<<dim3(tiles, (unsigned)NH), S_THREADS, smem, ctx->stream>>>(
        out, lse, q, k, v, starts, B, NH, NKV, D, 1.0f / sqrtf((float)D));
    RL_CUDA_LAUNCHED(ctx, "attention forward");
    return 0;
}

extern "C" int rl_cuda_attn_forward(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q,
                                    const float *k, const float *v, const int *starts, int B, int N,
                                    int NH, int NKV, int D) {
    if (s_check_heads(ctx, "attention forward", NH, NKV, D) != 0) {
        return -1;
    }
    const long long tiles = s_tiles(N, B, S_FWD_BR);
    if (B < 1 || N < 0 || tiles < 0) {
        return rl_cuda_fail(ctx, "attention forward: %d sequences of %d rows", B, N);
    }
    if (N == 0) {
        return 0;
    }
    switch (s_dmax(D)) {
    case 64:
        return s_forward_launch<64>(ctx, out, lse, q, k, v, starts, B, NH, NKV, D, (unsigned)tiles);
    case 128:
        return s_forward_launch<128>(ctx, out, lse, q, k, v, starts, B, NH, NKV, D,
                                     (unsigned)tiles);
    default:
        return s_forward_launch<256>(ctx, out, lse, q, k, v, starts, B, NH, NKV, D,
                                     (unsigned)tiles);
    }
}

template <int DMAX, bool R16>
static int s_backward_launch(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv,
                             const float *delta, const float *dout, const float *q, const float *k,
                             const float *v, const float *lse, const int *starts, int B, int N,
                             int NH, int NKV, int D) {
    const size_t smem = s_bwd_smem(D);
    const float scale = 1.0f / sqrtf((float)D);
    if (dk || dv) {
        const long long tiles = s_tiles(N, B, S_BWD_BC);
        if (s_smem_attr(ctx, s_bwd_dkdv_kernel<DMAX, R16>, smem, "attention backward", D) != 0) {
            return -1;
        }
        s_bwd_dkdv_kernel<DMAX, R16>
            <<<dim3((unsigned)tiles, (unsigned)NKV), S_THREADS, smem, ctx->stream>>>(
                dk, dv, dout, q, k, v, lse, delta, starts, B, NH, NKV, D, scale);
        RL_CUDA_LAUNCHED(ctx, "attention backward dk dv");
    }
    if (dq) {
        const long long tiles = s_tiles(N, B, S_BWD_BR);
        if (s_smem_attr(ctx, s_bwd_dq_kernel<DMAX, R16>, smem, "attention backward", D) != 0) {
            return -1;
        }
        s_bwd_dq_kernel<DMAX, R16>
            <<<dim3((unsigned)tiles, (unsigned)NH), S_THREADS, smem, ctx->stream>>>(
                dq, dout, q, k, v, lse, delta, starts, B, NH, NKV, D, scale);
        RL_CUDA_LAUNCHED(ctx, "attention backward dq");
    }
    return 0;
}

template <bool R16>
static int s_backward(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv, float *delta,
                      const float *dout, const float *q, const float *k, const float *v,
                      const float *out, const float *lse, const int *starts, int B, int N, int NH,
                      int NKV, int D) {
    if (s_check_heads(ctx, "attention backward", NH, NKV, D) != 0) {
        return -1;
    }
    if (B < 1 || N < 0 || s_tiles(N, B, S_BWD_BR) < 0) {
        return rl_cuda_fail(ctx, "attention backward: %d sequences of %d rows", B, N);
    }
    if (N == 0 || (!dq && !dk && !dv)) {
        return 0;
    }
    const size_t rows = (size_t)N * NH;
    s_delta_kernel<<<rl_cuda_blocks(rows * 32, 256), 256, 0, ctx->stream>>>(delta, dout, out, rows,
                                                                            D);
    RL_CUDA_LAUNCHED(ctx, "attention backward delta");
    switch (s_dmax(D)) {
    case 64:
        return s_backward_launch<64, R16>(ctx, dq, dk, dv, delta, dout, q, k, v, lse, starts, B, N,
                                          NH, NKV, D);
    case 128:
        return s_backward_launch<128, R16>(ctx, dq, dk, dv, delta, dout, q, k, v, lse, starts, B, N,
                                           NH, NKV, D);
    default:
        return s_backward_launch<256, R16>(ctx, dq, dk, dv, delta, dout, q, k, v, lse, starts, B, N,
                                           NH, NKV, D);
    }
}

extern "C" int rl_cuda_attn_backward(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv,
                                     float *delta, const float *dout, const float *q,
                                     const float *k, const float *v, const float *out,
                                     const float *lse, const int *starts, int B, int N, int NH,
                                     int NKV, int D) {
    return s_backward<false>(ctx, dq, dk, dv, delta, dout, q, k, v, out, lse, starts, B, N, NH, NKV,
                             D);
}

template <int NF>
static int s_tc_backward_launch(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv,
                                const float *delta, const float *dout, const float *q,
                                const float *k, const float *v, const float *lse, const int *starts,
                                int B, int N, int NH, int NKV, int D) {
    const size_t smem = s_tcb_smem(D);
    const float scale = 1.0f / sqrtf((float)D);
    const unsigned tiles = (unsigned)s_tiles(N, B, S_TCB_T);
    const char *what = "attention backward (bf16)";
    if ((dk || dv) && // one kernel computes both and adds those asked for
        s_launch(ctx, s_tc_bwd_dkdv_kernel<NF>, dim3(tiles, (unsigned)NKV), 128, smem, what, D, dk,
                 dv, dout, q, k, v, lse, delta, starts, B, NH, NKV, D, scale) != 0) {
        return -1;
    }
    if (dq && s_launch(ctx, s_tc_bwd_dq_kernel<NF>, dim3(tiles, (unsigned)NH), 128, smem, what, D,
                       dq, dout, q, k, v, lse, delta, starts, B, NH, NKV, D, scale) != 0) {
        return -1;
    }
    return 0;
}

extern "C" int rl_cuda_attn_backward_bf16(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv,
                                          float *delta, const float *dout, const float *q,
                                          const float *k, const float *v, const float *out,
                                          const float *lse, const int *starts, int B, int N, int NH,
                                          int NKV, int D) {
    if (s_check_heads(ctx, "attention backward (bf16)", NH, NKV, D) == 0 && s_tc_dp(D) <= 128 &&
        B >= 1 && N > 0 && s_tiles(N, B, S_TCB_T) >= 0 && (dq || dk || dv)) {
        const size_t rows = (size_t)N * NH;
        s_delta_kernel<<<rl_cuda_blocks(rows * 32, 256), 256, 0, ctx->stream>>>(delta, dout, out,
                                                                                rows, D);
        RL_CUDA_LAUNCHED(ctx, "attention backward delta (bf16)");
        return s_tc_dp(D) <= 64 ? s_tc_backward_launch<4>(ctx, dq, dk, dv, delta, dout, q, k, v,
                                                          lse, starts, B, N, NH, NKV, D)
                                : s_tc_backward_launch<8>(ctx, dq, dk, dv, delta, dout, q, k, v,
                                                          lse, starts, B, N, NH, NKV, D);
    }
    // past head_dim 128, and every refusal and empty call: the CUDA cores (q, k, v rounded)
    return s_backward<true>(ctx, dq, dk, dv, delta, dout, q, k, v, out, lse, starts, B, N, NH, NKV,
                            D);
}

template <typename C>
static int s_cache_write(rl_cuda_ctx_t *ctx, C *kcache, C *vcache, const float *k, const float *v,
                         const int *slots, const int *pos, int n, int n_slots, int max_len, int NKV,
                         int D) {
    if (n < 0 || n_slots < 1 || max_len < 1 || NKV < 1 || D < 1) {
        return rl_cuda_fail(ctx,
                            "attention cache write: %d rows into %d slots of %d positions "
                            "of %d x %d",
                            n, n_slots, max_len, NKV, D);
    }
    if (n == 0) {
        return 0;
    }
    const size_t total = (size_t)n * NKV * D;
    unsigned blocks = rl_cuda_blocks(total, 256);
    blocks = blocks < 65535u * 8u ? blocks : 65535u * 8u; // a grid-stride loop does the rest
    s_cache_write_kernel<C><<<blocks, 256, 0, ctx->stream>>>(kcache, vcache, k, v, slots, pos,
                                                             total, NKV * D, n_slots, max_len);
    RL_CUDA_LAUNCHED(ctx, "attention cache write");
    return 0;
}

extern "C" int rl_cuda_attn_cache_write(rl_cuda_ctx_t *ctx, float *kcache, float *vcache,
                                        const float *k, const float *v, const int *slots,
                                        const int *pos, int n, int n_slots, int max_len, int NKV,
                                        int D) {
    return s_cache_write(ctx, kcache, vcache, k, v, slots, pos, n, n_slots, max_len, NKV, D);
}

extern "C" int rl_cuda_attn_cache_write_bf16(rl_cuda_ctx_t *ctx, uint16_t *kcache, uint16_t *vcache,
                                             const float *k, const float *v, const int *slots,
                                             const int *pos, int n, int n_slots, int max_len,
                                             int NKV, int D) {
    return s_cache_write(ctx, reinterpret_cast<__nv_bfloat16 *>(kcache),
                         reinterpret_cast<__nv_bfloat16 *>(vcache), k, v, slots, pos, n, n_slots,
                         max_len, NKV, D);
}

template <int DMAX, typename C>
static int s_decode_launch(rl_cuda_ctx_t *ctx, float *out, const float *q, const C *kc, const C *vc,
                           const int *slots, const int *n_ctx, int S, int NH, int NKV, int D,
                           int n_slots, int max_len) {
    const int grp = NH / NKV;
    return s_launch(ctx, s_decode_kernel<DMAX, C>,
                    dim3((unsigned)S, (unsigned)NKV, (unsigned)((grp + S_DEC_HPB - 1) / S_DEC_HPB)),
                    S_DEC_THREADS, s_dec_smem(D), "attention decode", D, out, q, kc, vc, slots,
                    n_ctx, NH, NKV, D, n_slots, max_len, 1.0f / sqrtf((float)D));
}

template <typename C>
static int s_decode(rl_cuda_ctx_t *ctx, float *out, const float *q, const C *kcache,
                    const C *vcache, const int *slots, const int *n_ctx, int S, int NH, int NKV,
                    int D, int n_slots, int max_len) {
    if (s_check_heads(ctx, "attention decode", NH, NKV, D) != 0) {
        return -1;
    }
    if (S < 0 || n_slots < 1 || max_len < 1) {
        return rl_cuda_fail(ctx, "attention decode: %d rows, %d slots of %d positions", S, n_slots,
                            max_len);
    }
    if (S == 0) {
        return 0;
    }
    switch (s_dmax(D)) {
    case 64:
        return s_decode_launch<64, C>(ctx, out, q, kcache, vcache, slots, n_ctx, S, NH, NKV, D,
                                      n_slots, max_len);
    case 128:
        return s_decode_launch<128, C>(ctx, out, q, kcache, vcache, slots, n_ctx, S, NH, NKV, D,
                                       n_slots, max_len);
    default:
        return s_decode_launch<256, C>(ctx, out, q, kcache, vcache, slots, n_ctx, S, NH, NKV, D,
                                       n_slots, max_len);
    }
}

extern "C" int rl_cuda_attn_decode(rl_cuda_ctx_t *ctx, float *out, const float *q,
                                   const float *kcache, const float *vcache, const int *slots,
                                   const int *n_ctx, int S, int NH, int NKV, int D, int n_slots,
                                   int max_len) {
    return s_decode(ctx, out, q, kcache, vcache, slots, n_ctx, S, NH, NKV, D, n_slots, max_len);
}

extern "C" int rl_cuda_attn_decode_bf16c(rl_cuda_ctx_t *ctx, float *out, const float *q,
                                         const uint16_t *kcache, const uint16_t *vcache,
                                         const int *slots, const int *n_ctx, int S, int NH, int NKV,
                                         int D, int n_slots, int max_len) {
    return s_decode(ctx, out, q, reinterpret_cast<const __nv_bfloat16 *>(kcache),
                    reinterpret_cast<const __nv_bfloat16 *>(vcache), slots, n_ctx, S, NH, NKV, D,
                    n_slots, max_len);
}

template <int DMAX>
static int s_prefill_launch(rl_cuda_ctx_t *ctx, float *out, const float *q, const float *kc,
                            const float *vc, const int *q_starts, const int *slots, const int *pos0,
                            int B, int NH, int NKV, int D, int n_slots, int max_len,
                            unsigned tiles) {
    const size_t smem = s_fwd_smem(D);
    if (s_smem_attr(ctx, s_prefill_kernel<DMAX>, smem, "attention prefill", D) != 0) {
        return -1;
    }
    s_prefill_kernel<DMAX><<<dim3(tiles, (unsigned)NH), S_THREADS, smem, ctx->stream>>>(
        out, q, kc, vc, q_starts, slots, pos0, B, NH, NKV, D, n_slots, max_len,
        1.0f / sqrtf((float)D));
    RL_CUDA_LAUNCHED(ctx, "attention prefill");
    return 0;
}

extern "C" int rl_cuda_attn_prefill(rl_cuda_ctx_t *ctx, float *out, const float *q,
                                    const float *kcache, const float *vcache, const int *q_starts,
                                    const int *slots, const int *pos0, int B, int N, int NH,
                                    int NKV, int D, int n_slots, int max_len) {
    if (s_check_heads(ctx, "attention prefill", NH, NKV, D) != 0) {
        return -1;
    }
    const long long tiles = s_tiles(N, B, S_FWD_BR);
    if (B < 1 || N < 0 || tiles < 0 || n_slots < 1 || max_len < 1) {
        return rl_cuda_fail(ctx, "attention prefill: %d runs of %d rows, %d slots of %d positions",
                            B, N, n_slots, max_len);
    }
    if (N == 0) {
        return 0;
    }
    switch (s_dmax(D)) {
    case 64:
        return s_prefill_launch<64>(ctx, out, q, kcache, vcache, q_starts, slots, pos0, B, NH, NKV,
                                    D, n_slots, max_len, (unsigned)tiles);
    case 128:
        return s_prefill_launch<128>(ctx, out, q, kcache, vcache, q_starts, slots, pos0, B, NH, NKV,
                                     D, n_slots, max_len, (unsigned)tiles);
    default:
        return s_prefill_launch<256>(ctx, out, q, kcache, vcache, q_starts, slots, pos0, B, NH, NKV,
                                     D, n_slots, max_len, (unsigned)tiles);
    }
}

// ---- the bf16 forward and prefill (tensor cores) ----

extern "C" int rl_cuda_attn_forward_bf16(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q,
                                         const float *k, const float *v, const int *starts, int B,
                                         int N, int NH, int NKV, int D) {
    if (s_check_heads(ctx, "attention forward (bf16)", NH, NKV, D) != 0) {
        return -1;
    }
    const int warps = s_tc_warps(D);
    const long long tiles = s_tiles(N, B, 16 * warps);
    if (B < 1 || N < 0 || tiles < 0) {
        return rl_cuda_fail(ctx, "attention forward (bf16): %d sequences of %d rows", B, N);
    }
    if (N == 0) {
        return 0;
    }
    return s_launch(ctx, warps == 4 ? s_tc_fwd_kernel<4> : s_tc_fwd_kernel<2>,
                    dim3((unsigned)tiles, (unsigned)NH), 32 * warps, s_tc_smem(D),
                    "attention forward (bf16)", D, out, lse, q, k, v, starts, B, NH, NKV, D,
                    1.0f / sqrtf((float)D));
}

extern "C" int rl_cuda_attn_prefill_bf16(rl_cuda_ctx_t *ctx, float *out, const float *q,
                                         const uint16_t *kcache, const uint16_t *vcache,
                                         const int *q_starts, const int *slots, const int *pos0,
                                         int B, int N, int NH, int NKV, int D, int n_slots,
                                         int max_len) {
    if (s_check_heads(ctx, "attention prefill (bf16)", NH, NKV, D) != 0) {
        return -1;
    }
    const int warps = s_tc_warps(D);
    const long long tiles = s_tiles(N, B, 16 * warps);
    if (B < 1 || N < 0 || tiles < 0 || n_slots < 1 || max_len < 1) {
        return rl_cuda_fail(ctx,
                            "attention prefill (bf16): %d runs of %d rows, %d slots of %d "
                            "positions",
                            B, N, n_slots, max_len);
    }
    if (N == 0) {
        return 0;
    }
    return s_launch(ctx, warps == 4 ? s_tc_prefill_kernel<4> : s_tc_prefill_kernel<2>,
                    dim3((unsigned)tiles, (unsigned)NH), 32 * warps, s_tc_smem(D),
                    "attention prefill (bf16)", D, out, q,
                    reinterpret_cast<const __nv_bfloat16 *>(kcache),
                    reinterpret_cast<const __nv_bfloat16 *>(vcache), q_starts, slots, pos0, B, NH,
                    NKV, D, n_slots, max_len, 1.0f / sqrtf((float)D));
}

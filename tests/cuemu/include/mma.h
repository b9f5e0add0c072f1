// mma.h of cuemu (tests/cuemu/): the warp matrix functions (nvcuda::wmma) the module uses, the
// m16n16k16 tiles of bf16 (matrix_a, matrix_b) with fp32 accumulators, emulated on the fibers of
// cuemu_block.cpp. What the API promises is kept, what it leaves open is made hostile, so that
// code correct here is correct on a GPU:
// - A fragment's elements are spread over the warp's 32 lanes in an order the API does not
//   state: here lane l holds elements l, l + 32, ..., l + 224 of the tile read row by row (on a
//   GPU another order). Code may apply one operation to every x[i] (scale, convert); code that
//   assumes which element x[i] is gets wrong numbers here.
// - load_matrix_sync and store_matrix_sync need a pointer aligned to 32 bytes and ldm a multiple
//   of 16 bytes (8 bf16, 4 floats): anything else is fatal here (on a GPU: undefined). A load
//   reads and a store writes only the calling lane's elements, with no barrier, so shared memory
//   that other lanes wrote must be published by __syncwarp/__syncthreads first (as on a GPU).
// - mma_sync and load_matrix_sync are warp-collective: every lane of the warp must call them
//   (a barrier of the full warp; a lane missing is cuemu's fatal report).
// - mma_sync: d[r][c] = c[r][c] + sum over k = 0..15 of a[r][k] b[k][c], the products exact (bf16
//   times bf16 fits fp32) and added in fp32 in k order. A tensor core adds them in an order and
//   with internal precision of its own: the tests' tolerances cover it; only the element's row
//   of a, column of b and its c enter (so one row's result never depends on the other rows).
#ifndef CUEMU_MMA_H
#define CUEMU_MMA_H

#include "cuda_bf16.h"
#include "cuda_runtime.h"

#include <stdint.h>

namespace cuemu {
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The running thread's linear index in its block.
inline unsigned wmma_tid(void) {
    return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

// The tiles a warp's mma_sync gathers from its lanes: a, b, c (16 x 16 each, as floats), per
// warp of the running block (one block runs at a time).
inline float wmma_scratch[32][3][256];

inline void wmma_check(const void *p, unsigned ldm, size_t elem, const char *what) {
    if ((uintptr_t)p % 32 != 0) {
        fatal("%s: pointer %p is not 32-byte aligned (wmma needs 256 bits)", what, p);
    }
    if (ldm == 0 || ((size_t)ldm * elem) % 16 != 0) {
        fatal("%s: ldm %u is not a multiple of 16 bytes (%zu-byte elements)", what, ldm, elem);
    }
}
} // namespace cuemu

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "cuemu: only m16n16k16 wmma tiles are emulated");
    static_assert(std::is_same<T, __nv_bfloat16>::value || std::is_same<T, float>::value,
                  "cuemu: only bf16 inputs and fp32 accumulators are emulated");
    enum { num_elements = 8 };
    T x[8];
};

// Element i of the calling lane: (row, col) of the 16 x 16 tile.
inline void cuemu_elem(int i, int *r, int *c) {
    const int e = i * 32 + (int)(cuemu::wmma_tid() % 32);
    *r = e / 16;
    *c = e % 16;
}

template <typename Use, typename T, typename L>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float v) {
    for (int i = 0; i < 8; i++) {
        f.x[i] = T(v);
    }
}

// a (16 x 16, element (r, k)) or b (element (k, c)): row_major reads p[row * ldm + col],
// col_major p[col * ldm + row].
template <typename Use, typename L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, L> &f, const __nv_bfloat16 *p,
                             unsigned ldm) {
    static_assert(std::is_same<L, row_major>::value || std::is_same<L, col_major>::value,
                  "cuemu: a matrix_a/matrix_b fragment needs its layout");
    cuemu::wmma_check(p, ldm, 2, "wmma::load_matrix_sync");
    for (int i = 0; i < 8; i++) {
        int r, c;
        cuemu_elem(i, &r, &c);
        f.x[i] =
            std::is_same<L, row_major>::value ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
    }
    __syncwarp();
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                             unsigned ldm, layout_t layout) {
    cuemu::wmma_check(p, ldm, 4, "wmma::load_matrix_sync");
    for (int i = 0; i < 8; i++) {
        int r, c;
        cuemu_elem(i, &r, &c);
        f.x[i] = layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
    }
    __syncwarp();
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t layout) {
    cuemu::wmma_check(p, ldm, 4, "wmma::store_matrix_sync");
    for (int i = 0; i < 8; i++) {
        int r, c;
        cuemu_elem(i, &r, &c);
        (layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = f.x[i];
    }
}

template <typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
    const unsigned tid = cuemu::wmma_tid();
    float(*s)[256] = cuemu::wmma_scratch[(tid / 32) % 32];
    for (int i = 0; i < 8; i++) { // this lane's elements, at their places in the tiles
        int r, col;
        cuemu_elem(i, &r, &col);
        s[0][r * 16 + col] = (float)a.x[i];
        s[1][r * 16 + col] = (float)b.x[i];
        s[2][r * 16 + col] = c.x[i];
    }
    __syncwarp(); // every lane's parts are in
    float out[8];
    for (int i = 0; i < 8; i++) {
        int r, col;
        cuemu_elem(i, &r, &col);
        float acc = s[2][r * 16 + col];
        for (int k = 0; k < 16; k++) {
            acc += s[0][r * 16 + k] * s[1][k * 16 + col];
        }
        out[i] = acc;
    }
    __syncwarp(); // every lane has read the tiles (the next mma_sync overwrites them)
    for (int i = 0; i < 8; i++) {
        d.x[i] = out[i];
    }
}

} // namespace wmma
} // namespace nvcuda

#endif

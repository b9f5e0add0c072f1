// cuemu_device — the CUDA C++ device language as g++ sees it in cuemu, the CPU emulation of the
// CUDA module (tests/cuemu/, docs/gpu.md): the qualifiers (__global__, __device__, __shared__,
// ...), the built-in variables (threadIdx, blockIdx, blockDim, gridDim), the block barrier and
// the warp's shuffles and votes (every thread of a block is a fiber: cuemu_block.cpp), atomics,
// the rounding intrinsics with IEEE semantics (never fused: the emulated sources build with
// -ffp-contract=off) and the math functions. Not a CUDA implementation: only what the module's
// sources use and a few neighbours; anything else fails to compile, loudly.
//
// Included by the shim cuda_runtime.h; the launch syntax `k<<<g, b, smem, s>>>(args)` and
// `extern __shared__ T x[];` are rewritten by cuemu_transform.py into cuemu::launch(...) and
// cuemu::dynamic_shared() before g++ sees them.
#ifndef CUEMU_DEVICE_H
#define CUEMU_DEVICE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

// ---------------------------------------------------------------------------------------------
// qualifiers

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Static shared memory: one variable per kernel for the whole process (blocks run one after
// another on one host thread), gathered in one section that cuemu poisons (0xff bytes: NaN in
// every float lane) before each block, so that a read before the block wrote shows.
#define __shared__ static __attribute__((section("cuemu_shared")))

// ---------------------------------------------------------------------------------------------
// launch geometry and the built-in variables

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

typedef struct CUstream_st *cudaStream_t;

namespace cuemu {
extern uint3 thread_idx, block_idx; // the running thread's; set by the scheduler
extern dim3 block_dim, grid_dim;    // the running launch's
} // namespace cuemu

// read-only, as in CUDA
#define threadIdx (static_cast<const uint3 &>(::cuemu::thread_idx))
#define blockIdx (static_cast<const uint3 &>(::cuemu::block_idx))
#define blockDim (static_cast<const dim3 &>(::cuemu::block_dim))
#define gridDim (static_cast<const dim3 &>(::cuemu::grid_dim))
constexpr int warpSize = 32;

// ---------------------------------------------------------------------------------------------
// barriers and warps (cuemu_block.cpp)

namespace cuemu {
enum warp_op_t { WARP_IDX, WARP_UP, WARP_DOWN, WARP_XOR, WARP_BALLOT };

// __syncthreads: waits until every thread of the block is here. A thread that exited, or one
// waiting at a warp operation that cannot complete, makes it an error (reported, then abort).
void syncthreads(void);

// A warp operation of this lane: waits until every lane of `mask` is at a warp operation with
// the same mask, then returns the lane's result: the bits `value` of the source lane that `op`
// and `arg` (lane, delta or xor mask) name within segments of `width` lanes (the lane's own
// value where the source falls outside its segment), or for WARP_BALLOT the ballot of the
// lanes' values != 0. A lane of the mask that exited or waits elsewhere, a source lane outside
// the mask, or a bad width is an error (reported, then abort).
uint64_t warp_op(warp_op_t op, unsigned mask, uint64_t value, int arg, int width);

// The block's dynamic shared memory (the launch's smem bytes, poisoned before each block and
// ending at a guard page, so that a read past its end faults).
void *dynamic_shared(void);

template <typename T> inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "cuemu: a warp shuffle of a type over 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}

template <typename T> inline T from_bits(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}
} // namespace cuemu

inline void __syncthreads(void) {
    cuemu::syncthreads();
}

inline void __syncwarp(unsigned mask = 0xffffffffu) {
    cuemu::warp_op(cuemu::WARP_BALLOT, mask, 0, 0, 32);
}

template <typename T> inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    return cuemu::from_bits<T>(cuemu::warp_op(cuemu::WARP_IDX, mask, cuemu::to_bits(v), src_lane,
                                              width));
}

template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return cuemu::from_bits<T>(
        cuemu::warp_op(cuemu::WARP_UP, mask, cuemu::to_bits(v), (int)delta, width));
}

template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return cuemu::from_bits<T>(
        cuemu::warp_op(cuemu::WARP_DOWN, mask, cuemu::to_bits(v), (int)delta, width));
}

template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return cuemu::from_bits<T>(
        cuemu::warp_op(cuemu::WARP_XOR, mask, cuemu::to_bits(v), lane_mask, width));
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
    return (unsigned)cuemu::warp_op(cuemu::WARP_BALLOT, mask, pred != 0, 0, 32);
}

inline int __any_sync(unsigned mask, int pred) {
    return __ballot_sync(mask, pred) != 0;
}

inline int __all_sync(unsigned mask, int pred) {
    return __ballot_sync(mask, pred) == mask;
}

// Memory fences: the emulator's memory is sequentially consistent (one host thread).
inline void __threadfence(void) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

inline void __threadfence_block(void) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

// ---------------------------------------------------------------------------------------------
// atomics: a fiber never switches inside one, so a plain read-modify-write is atomic. Each
// returns the old value.

#define CUEMU_ATOMIC(name, T, expr)                                                              \
    inline T name(T *p, T v) {                                                                   \
        T old = *p;                                                                              \
        *p = (expr);                                                                             \
        return old;                                                                              \
    }
CUEMU_ATOMIC(atomicAdd, int, old + v)
CUEMU_ATOMIC(atomicAdd, unsigned, old + v)
CUEMU_ATOMIC(atomicAdd, unsigned long long, old + v)
CUEMU_ATOMIC(atomicAdd, float, old + v)
CUEMU_ATOMIC(atomicAdd, double, old + v)
CUEMU_ATOMIC(atomicSub, int, old - v)
CUEMU_ATOMIC(atomicSub, unsigned, old - v)
CUEMU_ATOMIC(atomicExch, int, v)
CUEMU_ATOMIC(atomicExch, unsigned, v)
CUEMU_ATOMIC(atomicExch, unsigned long long, v)
CUEMU_ATOMIC(atomicExch, float, v)
CUEMU_ATOMIC(atomicMax, int, old > v ? old : v)
CUEMU_ATOMIC(atomicMax, unsigned, old > v ? old : v)
CUEMU_ATOMIC(atomicMax, unsigned long long, old > v ? old : v)
CUEMU_ATOMIC(atomicMin, int, old < v ? old : v)
CUEMU_ATOMIC(atomicMin, unsigned, old < v ? old : v)
CUEMU_ATOMIC(atomicMin, unsigned long long, old < v ? old : v)
CUEMU_ATOMIC(atomicAnd, int, old & v)
CUEMU_ATOMIC(atomicAnd, unsigned, old & v)
CUEMU_ATOMIC(atomicOr, int, old | v)
CUEMU_ATOMIC(atomicOr, unsigned, old | v)
CUEMU_ATOMIC(atomicXor, int, old ^ v)
CUEMU_ATOMIC(atomicXor, unsigned, old ^ v)
#undef CUEMU_ATOMIC

template <typename T> inline T cuemu_atomic_cas(T *p, T compare, T v) {
    T old = *p;
    *p = old == compare ? v : old;
    return old;
}

inline int atomicCAS(int *p, int compare, int v) {
    return cuemu_atomic_cas(p, compare, v);
}

inline unsigned atomicCAS(unsigned *p, unsigned compare, unsigned v) {
    return cuemu_atomic_cas(p, compare, v);
}

inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long compare,
                                    unsigned long long v) {
    return cuemu_atomic_cas(p, compare, v);
}

// ---------------------------------------------------------------------------------------------
// rounding intrinsics: one IEEE operation each, round to nearest even, never contracted

inline float __fadd_rn(float a, float b) {
    return a + b;
}
inline float __fsub_rn(float a, float b) {
    return a - b;
}
inline float __fmul_rn(float a, float b) {
    return a * b;
}
inline float __fdiv_rn(float a, float b) {
    return a / b;
}
inline float __frcp_rn(float a) {
    return 1.0f / a;
}
inline float __fsqrt_rn(float a) {
    return sqrtf(a);
}
inline float __fmaf_rn(float a, float b, float c) {
    return fmaf(a, b, c); // one rounding, as the GPU's FFMA
}
inline double __dadd_rn(double a, double b) {
    return a + b;
}
inline double __dsub_rn(double a, double b) {
    return a - b;
}
inline double __dmul_rn(double a, double b) {
    return a * b;
}
inline double __ddiv_rn(double a, double b) {
    return a / b;
}
inline double __dsqrt_rn(double a) {
    return sqrt(a);
}
inline double __fma_rn(double a, double b, double c) {
    return fma(a, b, c);
}

// The fast approximations: the host's accurate functions (their GPU error is not emulated).
inline float __expf(float x) {
    return expf(x);
}
inline float __logf(float x) {
    return logf(x);
}
inline float __fdividef(float a, float b) {
    return a / b;
}
inline float rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
    return 1.0 / sqrt(x);
}

// ---------------------------------------------------------------------------------------------
// bits

inline unsigned __float_as_uint(float f) {
    return cuemu::from_bits<unsigned>(cuemu::to_bits(f));
}
inline int __float_as_int(float f) {
    return cuemu::from_bits<int>(cuemu::to_bits(f));
}
inline float __uint_as_float(unsigned u) {
    return cuemu::from_bits<float>(cuemu::to_bits(u));
}
inline float __int_as_float(int i) {
    return cuemu::from_bits<float>(cuemu::to_bits(i));
}
inline long long __double_as_longlong(double d) {
    return cuemu::from_bits<long long>(cuemu::to_bits(d));
}
inline double __longlong_as_double(long long i) {
    return cuemu::from_bits<double>(cuemu::to_bits(i));
}
inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
    return __builtin_popcountll(x);
}
inline int __clz(int x) {
    return x ? __builtin_clz((unsigned)x) : 32;
}
inline int __clzll(long long x) {
    return x ? __builtin_clzll((unsigned long long)x) : 64;
}
inline int __ffs(int x) {
    return __builtin_ffs(x);
}
inline int __ffsll(long long x) {
    return __builtin_ffsll(x);
}
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
    return (x >> 16) | (x << 16);
}
inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * b) >> 32);
}
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

// ---------------------------------------------------------------------------------------------
// min and max: CUDA's overloads for the integer and floating types

#define CUEMU_MINMAX(T)                                                                          \
    inline T min(T a, T b) {                                                                     \
        return a < b ? a : b;                                                                    \
    }                                                                                            \
    inline T max(T a, T b) {                                                                     \
        return a > b ? a : b;                                                                    \
    }
CUEMU_MINMAX(int)
CUEMU_MINMAX(unsigned)
CUEMU_MINMAX(long)
CUEMU_MINMAX(unsigned long)
CUEMU_MINMAX(long long)
CUEMU_MINMAX(unsigned long long)
#undef CUEMU_MINMAX
inline float min(float a, float b) {
    return fminf(a, b);
}
inline float max(float a, float b) {
    return fmaxf(a, b);
}
inline double min(double a, double b) {
    return fmin(a, b);
}
inline double max(double a, double b) {
    return fmax(a, b);
}

// ---------------------------------------------------------------------------------------------
// launches (cuemu_transform.py writes `k<<<g, b, smem, s>>>(args)` as
// cuemu::launch("k", cuemu::config(g, b, smem, s), k, args))

namespace cuemu {
struct launch_config_t {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};

inline launch_config_t config(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0) {
    return launch_config_t{grid, block, smem, stream};
}

// Runs body(arg) as every thread of every block of the launch, on the calling host thread, and
// returns when all are done (a stream's work is done when it is queued). A configuration the
// GPU refuses (block or grid too large, too much shared memory, a bad stream) runs nothing and
// sets the error cudaGetLastError returns. kernel: the kernel's address (its attributes).
void run(const char *name, const void *kernel, const launch_config_t &c, void (*body)(void *),
         void *arg);

// Stream capture (cudaStreamBeginCapture): when stream s is being captured, appends work to the
// capture (to run, in order, at each cudaGraphLaunch of its graph) and returns true; else
// false, and the caller runs it now.
bool capture(cudaStream_t s, std::function<void()> work);

// The kernel's parameters are converted once, on the host, as a launch does; each thread gets
// its own copy of them.
template <typename... P, typename... A>
void launch(const char *name, const launch_config_t &c, void (*kernel)(P...), A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A), "cuemu: a launch with the wrong argument count");
    struct call_t {
        void (*kernel)(P...);
        std::tuple<P...> params;
    };
    auto call =
        std::make_shared<call_t>(call_t{kernel, std::tuple<P...>(std::forward<A>(args)...)});
    void (*body)(void *) = [](void *a) {
        call_t *cl = static_cast<call_t *>(a);
        std::apply(cl->kernel, cl->params); // by value: each thread's own copy
    };
    const void *k = reinterpret_cast<const void *>(kernel);
    launch_config_t on_default = c; // a graph does not depend on the stream it was captured on
    on_default.stream = 0;
    if (capture(c.stream, [name, k, on_default, body, call]() {
            run(name, k, on_default, body, call.get());
        })) {
        return; // recorded with its parameters as they are now, run when the graph is launched
    }
    run(name, k, c, body, call.get());
}
} // namespace cuemu

#endif

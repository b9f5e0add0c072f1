// rl_cuda_common — what every .cu file of the CUDA module shares: the context's layout, the
// error helpers (every CUDA and cuBLAS call checked, the last error read after every launch:
// STYLE.md §12), and the launch geometry helpers. Internal to model/cuda/.
#ifndef RL_CUDA_COMMON_CUH
#define RL_CUDA_COMMON_CUH

#include "rl_cuda_module.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdio.h>

// One device, one stream, one cuBLASLt handle with its workspace, and the last failure's text.
struct rl_cuda_ctx {
    int device;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *workspace; // cuBLASLt's scratch, bytes: RL_CUDA_LT_WORKSPACE
    char err[512];
};

#define RL_CUDA_LT_WORKSPACE ((size_t)32 << 20)

// Formats the context's message; returns -1 (so that `return rl_cuda_fail(...)` reads well).
static inline int rl_cuda_fail(rl_cuda_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int rl_cuda_fail(rl_cuda_ctx_t *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    va_end(ap);
    return -1;
}

// Checks a CUDA runtime call: on failure fills the context's message with the call's text,
// file:line and the error's name and string, and returns -1 from the enclosing function. The
// failed call also left its error as the thread's last error, which the next launch's
// cudaGetLastError (RL_CUDA_LAUNCHED) would report as that kernel's: it is read here, and so
// cleared (an error that spoils the context stays: every later call reports it anyway).
#define RL_CUDA_CHECK(ctx, call)                                                                 \
    do {                                                                                         \
        cudaError_t rl_e_ = (call);                                                              \
        if (rl_e_ != cudaSuccess) {                                                              \
            (void)cudaGetLastError();                                                            \
            return rl_cuda_fail((ctx), "%s (%s:%d): %s: %s", #call, __FILE__, __LINE__,          \
                                cudaGetErrorName(rl_e_), cudaGetErrorString(rl_e_));            \
        }                                                                                        \
    } while (0)

// The same for a cuBLAS(Lt) status.
#define RL_CUBLAS_CHECK(ctx, call)                                                               \
    do {                                                                                         \
        cublasStatus_t rl_s_ = (call);                                                           \
        if (rl_s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            return rl_cuda_fail((ctx), "%s (%s:%d): cuBLAS status %d", #call, __FILE__,          \
                                __LINE__, (int)rl_s_);                                           \
        }                                                                                        \
    } while (0)

// After a kernel launch: the launch's own error (bad configuration, no kernel image for this
// device), named after the kernel.
#define RL_CUDA_LAUNCHED(ctx, name) RL_CUDA_CHECK(ctx, cudaGetLastError())

// Blocks of `threads` covering n items (at least 1 block).
static inline unsigned rl_cuda_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 0 ? (b < 2147483647u ? b : 2147483647u) : 1);
}

#endif

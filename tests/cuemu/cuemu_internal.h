// cuemu_internal — what the parts of cuemu (tests/cuemu/) share behind the CUDA API they
// emulate: the emulated device's limits, the last error, the checks of device pointers and
// streams, kernels' attributes, and the fatal report. Not part of any API: only cuemu's .cpp
// files include it.
#ifndef CUEMU_INTERNAL_H
#define CUEMU_INTERNAL_H

#include "cuda_runtime.h"

#include <stddef.h>

namespace cuemu {

// The emulated device: the limits of an H100 (compute capability 9.0).
enum {
    CC_MAJOR = 9,
    CC_MINOR = 0,
    SMS = 132,
    MAX_THREADS = 1024,                  // per block
    MAX_BLOCK_Z = 64,                    // blockDim.z
    MAX_GRID_YZ = 65535,                 // gridDim.y, gridDim.z
    SMEM_DEFAULT = 48 * 1024,            // shared memory per block without opting in
    SMEM_OPTIN = 227 * 1024,             // with cudaFuncAttributeMaxDynamicSharedMemorySize
    VERSION = 13000,                     // driver and runtime: CUDA 13.0
};
#define CUEMU_DEVICE_NAME "cuemu (CPU emulation)"

// Records e as the host thread's last error (cudaGetLastError) and returns it.
cudaError_t set_error(cudaError_t e);

// Whether [p, p + bytes) lies inside one live cudaMalloc'd buffer.
bool device_range(const void *p, size_t bytes);

// Whether s is the default stream (0) or a live one.
bool stream_ok(cudaStream_t s);

// The dynamic shared memory a kernel may use (cudaFuncAttributeMaxDynamicSharedMemorySize,
// else SMEM_DEFAULT).
size_t kernel_smem_limit(const void *kernel);

// A fault of the emulated program that a GPU would not report (or would hang on): prints
// "cuemu: " and the message on stderr, with the running kernel, block and thread when there is
// one, then aborts. The test fails loudly.
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// A call cuemu does not emulate (an attribute, a data type): says so on stderr; the caller
// then returns its API's refusal.
void not_emulated(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace cuemu

#endif

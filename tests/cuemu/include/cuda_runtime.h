// cuda_runtime.h of cuemu, the CPU emulation of the CUDA module (tests/cuemu/, docs/gpu.md): the
// subset of the CUDA runtime API that model/cuda uses, with CUDA's names, types and error
// numbers, implemented on the host (cuemu_runtime.cpp). "Device" memory is host memory, each
// buffer ending at a guard page; every call runs synchronously, so a stream is ordered by
// construction. The emulated device is "cuemu (CPU emulation)", compute capability 9.0, with an
// H100's launch limits. What the module does not use is not here: it fails to compile, loudly.
// Not the toolkit's header: nothing here needs CUDA.
#ifndef CUEMU_CUDA_RUNTIME_H
#define CUEMU_CUDA_RUNTIME_H

#include "cuemu_device.h"

#include <stddef.h>

// ---------------------------------------------------------------------------------------------
// errors (CUDA's numbers)

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorMapBufferObjectFailed = 205,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
};
typedef enum cudaError cudaError_t;

// The error's name ("cudaErrorInvalidValue") and text; "unrecognized error code" otherwise.
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
// The last error any runtime call or launch of this host thread set, and clears it.
cudaError_t cudaGetLastError(void);
// The same, without clearing it.
cudaError_t cudaPeekAtLastError(void);

// ---------------------------------------------------------------------------------------------
// versions and devices

// CUDA 13.0 (13000), the version of the toolkit the module is built with.
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
// CUEMU_DEVICES (default 1) emulated devices, each with CUEMU_MEMORY bytes (default 16 GiB).
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceSynchronize(void);

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major, minor;
    int multiProcessorCount;
};
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);

enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock = 1,
    cudaDevAttrMaxSharedMemoryPerBlock = 8,
    cudaDevAttrWarpSize = 10,
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
// Those above; any other is refused (cudaErrorInvalidValue) with a message on stderr.
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);

// Peers: every pair of distinct devices can access each other, performance rank 0, unless
// CUEMU_PEER=0 (none can). A device is not its own peer (cudaErrorInvalidDevice, as CUDA).
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
enum cudaDeviceP2PAttr {
    cudaDevP2PAttrPerformanceRank = 1,
    cudaDevP2PAttrAccessSupported = 2,
};
cudaError_t cudaDeviceGetP2PAttribute(int *value, cudaDeviceP2PAttr attr, int src, int dst);

// ---------------------------------------------------------------------------------------------
// memory

// Host memory standing for device memory, filled with 0xff bytes (NaN: uninitialised device
// memory may hold anything) and ending at a guard page, so that a kernel reading past a buffer's
// end faults and cuemu names the kernel. Aligned to 16 bytes, not the GPU's 256: the buffer's
// size is rounded up to 16 bytes only, so that the guard page sits close behind its end; the
// bytes between (and 16 before the buffer) are canaries checked after every kernel, so that a
// write just past either end is reported too. Refused with cudaErrorMemoryAllocation past the
// device's CUEMU_MEMORY.
cudaError_t cudaMalloc(void **ptr, size_t bytes);
template <typename T> inline cudaError_t cudaMalloc(T **ptr, size_t bytes) {
    return cudaMalloc(reinterpret_cast<void **>(ptr), bytes);
}
// A pointer cudaMalloc did not return is refused (cudaErrorInvalidValue).
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
// The device side(s) must lie inside one cudaMalloc'd buffer, else cudaErrorInvalidValue with a
// message on stderr (on a GPU: an illegal address, or worse).
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemset(void *dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream = 0);

// ---------------------------------------------------------------------------------------------
// interprocess memory (CUDA IPC): another process of this machine maps a buffer

#define CUDA_IPC_HANDLE_SIZE 64
typedef struct cudaIpcMemHandle_st {
    char reserved[CUDA_IPC_HANDLE_SIZE];
} cudaIpcMemHandle_t;
#define cudaIpcMemLazyEnablePeerAccess 0x01
// A handle to the cudaMalloc'd buffer devPtr (its start: cuemu refuses a pointer inside it).
// The first call moves the buffer's pages into a memory file (memfd) at the same address, its
// contents kept, and keeps the file open until cudaFree: the handle names this process and the
// file, so a process that may read this one's /proc/<pid>/fd maps the same pages.
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr);
// Maps another process's buffer into this one (a device pointer of the current device, inside
// one live buffer for the checks, its own guard page behind it; not counted against this
// device's memory). Refused as CUDA refuses: a handle of this process
// (cudaErrorInvalidResourceHandle), of a buffer freed since, or on another device without
// cudaIpcMemLazyEnablePeerAccess and peer access (CUEMU_PEER); a handle that is not one, or a
// process gone (cudaErrorMapBufferObjectFailed).
cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags);
// Unmaps what cudaIpcOpenMemHandle mapped (cudaFree refuses it).
cudaError_t cudaIpcCloseMemHandle(void *devPtr);

// ---------------------------------------------------------------------------------------------
// streams: handles checked, work done when queued

enum { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// graphs: a stream's work captured once, launched many times

// Between cudaStreamBeginCapture and cudaStreamEndCapture, kernels and cublasLtMatmul queued on
// the stream are recorded with their parameters as they are then, not run. Stricter than CUDA,
// which may also record copies: any copy or memset on the stream, a synchronize, cudaMalloc,
// cudaFree or cudaFuncSetAttribute of the capturing thread, or a graph launched on it, is
// refused
// (cudaErrorStreamCaptureUnsupported) and invalidates the capture, whose end then fails
// (cudaErrorStreamCaptureInvalidated, no graph). The default stream cannot be captured
// (cudaErrorStreamCaptureImplicit), nor one already capturing (cudaErrorIllegalState is CUDA's;
// here cudaErrorInvalidValue). The mode is accepted and ignored.
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
// An executable copy of graph (flags must be 0); the graph may then be destroyed.
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags);
// Runs the recorded work in order, as queued on stream.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

// ---------------------------------------------------------------------------------------------
// kernels' attributes

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};
// Allows a kernel up to `value` bytes of dynamic shared memory (at most the opt-in limit);
// a launch with more than 48 KiB needs it, as on the GPU.
cudaError_t cuemu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value);
template <typename T> inline cudaError_t cudaFuncSetAttribute(T *kernel, cudaFuncAttribute attr,
                                                             int value) {
    return cuemu_func_set_attribute(reinterpret_cast<const void *>(kernel), attr, value);
}

#endif

// cuemu_runtime — the CUDA runtime calls of cuda_runtime.h (cuemu's) on the host: versions,
// devices and their properties, device memory (host mappings ending at a guard page, with
// canaries just around each buffer, counted against a fake device size so that refusals can be
// tested), interprocess handles (CUDA IPC: a buffer's pages moved into a memory file that another
// process maps), copies and sets that check their device side against the live buffers, streams
// (checked handles; the work is done when it is queued), kernels' shared memory attribute, and
// the last error. Environment:
//   CUEMU_DEVICES  how many devices (default 1; 0: the driver sees none)
//   CUEMU_MEMORY   each device's memory in bytes, or with K/M/G/T (default 16G)
//   CUEMU_PEER     0: no device can access another's memory (default: all can, rank 0)
//   CUEMU_CAPTURE_FAIL  set (not 0): every stream capture fails at its end (read at each end)
//   CUEMU_CONTEXTS a file each process appends "<comm>\t<command line>\n" to the first time it
//                  makes a call that makes a CUDA context (cudaSetDevice, memory, streams,
//                  copies, sets, IPC; not the version, count, property, attribute and peer
//                  queries): which processes would hold one on a GPU
// Not the kernels' execution (cuemu_block.cpp) nor cuBLASLt (cuemu_blaslt.cpp).
#include "cuemu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <vector>

struct CUstream_st {
    unsigned flags;
    bool capturing;   // between cudaStreamBeginCapture and cudaStreamEndCapture
    bool invalidated; // a refused call during the capture: its end fails
    pthread_t by;     // the thread that began it
    std::vector<std::function<void()>> work; // recorded so far
};
struct CUgraph_st {
    std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> work;
};

namespace {

using namespace cuemu;

struct alloc_t {
    size_t bytes;    // as asked
    char *map;       // the mapping: map_bytes, its last page the guard
    size_t map_bytes;
    int device;
    int fd;      // >= 0: exported (cudaIpcGetMemHandle): the memory file its pages live in
    bool opened; // another process's buffer (cudaIpcOpenMemHandle): its own, not ours
    uint64_t id; // this process's count of buffers: a handle names it
};

// The bytes around a buffer that no kernel may write: S_FRONT before it, and after it up to the
// next multiple of 16 (the guard page follows).
const unsigned char S_CANARY = 0xcd;
const size_t S_FRONT = 16;

std::mutex s_mutex; // the tables below
std::map<uintptr_t, alloc_t> s_allocs; // by address
std::set<CUstream_st *> s_streams;
std::map<const void *, size_t> s_kernel_smem;
size_t s_used[16];
uint64_t s_next_id;

thread_local cudaError_t s_last = cudaSuccess;
thread_local int s_device = 0;

struct config_t {
    int devices;
    size_t memory;
};

const config_t &s_config(void) {
    static config_t c;
    static std::once_flag once;
    std::call_once(once, [] {
        c.devices = 1;
        c.memory = (size_t)16 << 30;
        const char *d = getenv("CUEMU_DEVICES");
        if (d && d[0]) {
            char *end = NULL;
            long n = strtol(d, &end, 10);
            if (!end || *end || n < 0 || n > 16) {
                fatal("CUEMU_DEVICES=%s is not a number of devices in 0..16", d);
            }
            c.devices = (int)n;
        }
        const char *m = getenv("CUEMU_MEMORY");
        if (m && m[0]) {
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(m, &end, 10);
            int shift = 0;
            if (end && *end) {
                const char *units = "KMGT";
                const char *u = strchr(units, *end);
                if (!u || end[1]) {
                    fatal("CUEMU_MEMORY=%s is not bytes, or a number with K, M, G or T", m);
                }
                shift = 10 * (int)(u - units + 1);
            }
            if (errno || end == m || v == 0 || v > (~0ull >> shift)) {
                fatal("CUEMU_MEMORY=%s is not a memory size", m);
            }
            c.memory = (size_t)(v << shift);
        }
    });
    return c;
}

cudaError_t s_ret(cudaError_t e) {
    return set_error(e);
}

// A call refused during a capture (cudaErrorStreamCaptureUnsupported), which it invalidates:
// one on a capturing stream (s), or any of this thread while one of its streams captures
// (s NULL: cudaMalloc, cudaFree, cudaDeviceSynchronize). 0: not refused.
cudaError_t s_capture_refuses(const char *call, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(s_mutex);
    for (CUstream_st *t : s_streams) {
        if (t->capturing && (t == s || (s == NULL && pthread_equal(t->by, pthread_self())))) {
            t->invalidated = true;
            fprintf(stderr, "cuemu: %s during a stream capture: refused, the capture invalidated\n",
                    call);
            return set_error(cudaErrorStreamCaptureUnsupported);
        }
    }
    return cudaSuccess;
}

bool s_device_ok(int d) {
    return d >= 0 && d < s_config().devices;
}

// This process makes (or uses) a context: said once per process in CUEMU_CONTEXTS's file.
void s_context(void) {
    static std::mutex m;
    static pid_t said = 0; // a forked child has not said it yet
    const char *path = getenv("CUEMU_CONTEXTS");
    if (!path || !path[0]) {
        return;
    }
    std::lock_guard<std::mutex> lock(m);
    if (said == getpid()) {
        return;
    }
    said = getpid();
    char comm[64] = "", cmd[1024] = "";
    FILE *f = fopen("/proc/self/comm", "r");
    if (f) {
        if (!fgets(comm, sizeof comm, f)) {
            comm[0] = 0;
        }
        fclose(f);
    }
    comm[strcspn(comm, "\n")] = 0;
    f = fopen("/proc/self/cmdline", "r");
    size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    for (size_t i = 0; i + 1 < n; i++) {
        cmd[i] = cmd[i] ? cmd[i] : ' ';
    }
    cmd[n] = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char line[1200];
        int len = snprintf(line, sizeof line, "%s\t%s\n", comm, cmd);
        if (write(fd, line, (size_t)len) != len) {
            fprintf(stderr, "cuemu: CUEMU_CONTEXTS=%s: a short write\n", path);
        }
        close(fd);
    }
}

// The live buffer holding [p, p + bytes), or NULL. Caller holds s_mutex.
const alloc_t *s_find(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = s_allocs.upper_bound(a);
    if (it == s_allocs.begin()) {
        return NULL;
    }
    --it;
    if (a - it->first > it->second.bytes || bytes > it->second.bytes - (a - it->first)) {
        return NULL;
    }
    return &it->second;
}

cudaError_t s_check_range(const char *call, const char *side, const void *p, size_t bytes) {
    if (bytes == 0 || device_range(p, bytes)) {
        return cudaSuccess;
    }
    fprintf(stderr,
            "cuemu: %s: the %s [%p, +%zu bytes) is not inside one cudaMalloc'd buffer (on a "
            "GPU: an illegal address, or another buffer overwritten)\n",
            call, side, p, bytes);
    return s_ret(cudaErrorInvalidValue);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// shared with the other parts (cuemu_internal.h)

namespace cuemu {

cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess) {
        s_last = e;
    }
    return e;
}

void check_canaries(const char *who) {
    std::lock_guard<std::mutex> lock(s_mutex);
    for (const auto &a : s_allocs) {
        const unsigned char *data = (const unsigned char *)a.first;
        const size_t tail = (a.second.bytes + 15) / 16 * 16 - a.second.bytes;
        for (size_t i = 0; i < S_FRONT + tail; i++) {
            const long at = i < S_FRONT ? (long)i - (long)S_FRONT
                                        : (long)(a.second.bytes + (i - S_FRONT));
            if (data[at] != S_CANARY) {
                fatal("%s wrote outside a cudaMalloc'd buffer of %zu bytes at %p: at byte "
                      "offset %ld (on a GPU: another buffer silently overwritten)",
                      who, a.second.bytes, (const void *)data, at);
            }
        }
    }
}

bool device_range(const void *p, size_t bytes) {
    std::lock_guard<std::mutex> lock(s_mutex);
    return s_find(p, bytes) != NULL;
}

bool stream_ok(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(s_mutex);
    return s == NULL || s_streams.count(s) > 0;
}

bool capture(cudaStream_t s, std::function<void()> work) {
    std::lock_guard<std::mutex> lock(s_mutex);
    if (s == NULL || !s_streams.count(s) || !s->capturing) {
        return false;
    }
    s->work.push_back(std::move(work));
    return true;
}

size_t kernel_smem_limit(const void *kernel) {
    std::lock_guard<std::mutex> lock(s_mutex);
    auto it = s_kernel_smem.find(kernel);
    return it == s_kernel_smem.end() ? (size_t)SMEM_DEFAULT : it->second;
}

} // namespace cuemu

// ---------------------------------------------------------------------------------------------
// errors

namespace {
struct error_name_t {
    cudaError_t e;
    const char *name, *text;
};
const error_name_t s_errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorMapBufferObjectFailed, "cudaErrorMapBufferObjectFailed",
     "mapping of buffer object failed"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
};
} // namespace

const char *cudaGetErrorName(cudaError_t e) {
    for (const auto &x : s_errors) {
        if (x.e == e) {
            return x.name;
        }
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
    for (const auto &x : s_errors) {
        if (x.e == e) {
            return x.text;
        }
    }
    return "unrecognized error code";
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = s_last;
    s_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) {
    return s_last;
}

// ---------------------------------------------------------------------------------------------
// versions and devices

cudaError_t cudaDriverGetVersion(int *version) {
    if (!version) {
        return s_ret(cudaErrorInvalidValue);
    }
    *version = VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
    if (!version) {
        return s_ret(cudaErrorInvalidValue);
    }
    *version = VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) {
        return s_ret(cudaErrorInvalidValue);
    }
    *count = s_config().devices;
    return *count > 0 ? cudaSuccess : s_ret(cudaErrorNoDevice);
}

static int s_peers(void) {
    const char *p = getenv("CUEMU_PEER");
    return !(p && !strcmp(p, "0"));
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
    if (!can) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (!s_device_ok(device) || !s_device_ok(peer) || device == peer) {
        return s_ret(cudaErrorInvalidDevice);
    }
    *can = s_peers();
    return cudaSuccess;
}

cudaError_t cudaDeviceGetP2PAttribute(int *value, cudaDeviceP2PAttr attr, int src, int dst) {
    if (!value) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (!s_device_ok(src) || !s_device_ok(dst) || src == dst) {
        return s_ret(cudaErrorInvalidDevice);
    }
    *value = attr == cudaDevP2PAttrAccessSupported ? s_peers() : 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    if (!s_device_ok(device)) {
        return s_ret(s_config().devices ? cudaErrorInvalidDevice : cudaErrorNoDevice);
    }
    s_context();
    s_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
    if (!device) {
        return s_ret(cudaErrorInvalidValue);
    }
    *device = s_device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    return s_capture_refuses("cudaDeviceSynchronize", NULL);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    if (!p) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (!s_device_ok(device)) {
        return s_ret(cudaErrorInvalidDevice);
    }
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", CUEMU_DEVICE_NAME);
    p->totalGlobalMem = s_config().memory;
    p->sharedMemPerBlock = SMEM_DEFAULT;
    p->sharedMemPerBlockOptin = SMEM_OPTIN;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = MAX_THREADS;
    p->maxThreadsDim[0] = MAX_THREADS;
    p->maxThreadsDim[1] = MAX_THREADS;
    p->maxThreadsDim[2] = MAX_BLOCK_Z;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = MAX_GRID_YZ;
    p->maxGridSize[2] = MAX_GRID_YZ;
    p->major = CC_MAJOR;
    p->minor = CC_MINOR;
    p->multiProcessorCount = SMS;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (!value) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (!s_device_ok(device)) {
        return s_ret(cudaErrorInvalidDevice);
    }
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
        *value = MAX_THREADS;
        return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
        *value = SMEM_DEFAULT;
        return cudaSuccess;
    case cudaDevAttrWarpSize:
        *value = 32;
        return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
        *value = SMS;
        return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
        *value = CC_MAJOR;
        return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
        *value = CC_MINOR;
        return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
        *value = SMEM_OPTIN;
        return cudaSuccess;
    }
    not_emulated("cudaDeviceGetAttribute(%d)", (int)attr);
    return s_ret(cudaErrorInvalidValue);
}

// ---------------------------------------------------------------------------------------------
// memory

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    if (!ptr) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (cudaError_t e = s_capture_refuses("cudaMalloc", NULL)) {
        *ptr = NULL;
        return e;
    }
    *ptr = NULL;
    if (!s_device_ok(s_device)) {
        return s_ret(cudaErrorNoDevice);
    }
    if (bytes == 0) {
        return cudaSuccess;
    }
    s_context();
    static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t total = s_config().memory;
    std::lock_guard<std::mutex> lock(s_mutex);
    if (bytes > total - s_used[s_device] || bytes > ((size_t)1 << 46)) {
        return s_ret(cudaErrorMemoryAllocation);
    }
    const size_t rounded = (bytes + 15) / 16 * 16;
    const size_t map_bytes = (rounded + S_FRONT + page - 1) / page * page + page;
    void *m = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        return s_ret(cudaErrorMemoryAllocation);
    }
    char *guard = (char *)m + map_bytes - page;
    if (mprotect(guard, page, PROT_NONE) != 0) {
        munmap(m, map_bytes);
        return s_ret(cudaErrorMemoryAllocation);
    }
    char *data = guard - rounded;
    memset(data - S_FRONT, S_CANARY, S_FRONT);
    memset(data, 0xff, bytes);
    memset(data + bytes, S_CANARY, rounded - bytes);
    s_allocs[(uintptr_t)data] =
        alloc_t{bytes, (char *)m, map_bytes, s_device, -1, false, ++s_next_id};
    s_used[s_device] += bytes;
    *ptr = data;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
    if (!ptr) {
        return cudaSuccess;
    }
    if (cudaError_t e = s_capture_refuses("cudaFree", NULL)) {
        return e;
    }
    std::lock_guard<std::mutex> lock(s_mutex);
    auto it = s_allocs.find((uintptr_t)ptr);
    if (it == s_allocs.end()) {
        fprintf(stderr, "cuemu: cudaFree(%p): not a pointer cudaMalloc returned, or freed twice\n",
                ptr);
        return s_ret(cudaErrorInvalidValue);
    }
    if (it->second.opened) {
        fprintf(stderr,
                "cuemu: cudaFree(%p): another process's buffer (cudaIpcOpenMemHandle): "
                "cudaIpcCloseMemHandle unmaps it\n",
                ptr);
        return s_ret(cudaErrorInvalidValue);
    }
    if (it->second.fd >= 0) {
        close(it->second.fd);
    }
    s_used[it->second.device] -= it->second.bytes;
    munmap(it->second.map, it->second.map_bytes);
    s_allocs.erase(it);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (!free_bytes || !total_bytes) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (!s_device_ok(s_device)) {
        return s_ret(cudaErrorNoDevice);
    }
    s_context();
    std::lock_guard<std::mutex> lock(s_mutex);
    *total_bytes = s_config().memory;
    *free_bytes = *total_bytes - s_used[s_device];
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    if (!stream_ok(stream)) {
        return s_ret(cudaErrorInvalidResourceHandle);
    }
    if (cudaError_t e = s_capture_refuses("cudaMemcpyAsync", stream)) {
        return e;
    }
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
        return s_ret(cudaErrorInvalidMemcpyDirection);
    }
    if ((dst_dev && s_check_range("cudaMemcpy", "destination", dst, bytes)) ||
        (src_dev && s_check_range("cudaMemcpy", "source", src, bytes))) {
        return cudaErrorInvalidValue;
    }
    if (bytes) {
        memmove(dst, src, bytes);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return cudaMemcpyAsync(dst, src, bytes, kind, NULL);
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    if (!stream_ok(stream)) {
        return s_ret(cudaErrorInvalidResourceHandle);
    }
    if (cudaError_t e = s_capture_refuses("cudaMemsetAsync", stream)) {
        return e;
    }
    if (s_check_range("cudaMemset", "destination", dst, bytes)) {
        return cudaErrorInvalidValue;
    }
    if (bytes) {
        memset(dst, value, bytes);
    }
    return cudaSuccess;
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
    return cudaMemsetAsync(dst, value, bytes, NULL);
}

// ---------------------------------------------------------------------------------------------
// interprocess memory

namespace {

// What a handle holds (the first bytes of its 64).
struct ipc_t {
    char magic[8]; // "cuemuIPC"
    int32_t pid, fd, device, pad;
    uint64_t id, bytes, map_bytes, data_off;
};
static_assert(sizeof(ipc_t) <= CUDA_IPC_HANDLE_SIZE, "an IPC handle holds 64 bytes");

const char S_IPC_MAGIC[8] = {'c', 'u', 'e', 'm', 'u', 'I', 'P', 'C'};

void s_memfd_name(char *buf, size_t cap, long pid, uint64_t id) {
    snprintf(buf, cap, "cuemu-%ld-%llu", pid, (unsigned long long)id);
}

} // namespace

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    if (!handle || !devPtr) {
        return s_ret(cudaErrorInvalidValue);
    }
    s_context();
    static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    std::lock_guard<std::mutex> lock(s_mutex);
    auto it = s_allocs.find((uintptr_t)devPtr);
    if (it == s_allocs.end() || it->second.opened) {
        fprintf(stderr,
                "cuemu: cudaIpcGetMemHandle(%p): not the start of a buffer this process "
                "cudaMalloc'd\n",
                devPtr);
        return s_ret(cudaErrorInvalidValue);
    }
    alloc_t &a = it->second;
    const size_t file_bytes = a.map_bytes - page; // all but the guard page
    if (a.fd < 0) {
        char name[64];
        s_memfd_name(name, sizeof name, (long)getpid(), a.id);
        int fd = memfd_create(name, MFD_CLOEXEC);
        if (fd < 0) {
            return s_ret(cudaErrorMemoryAllocation);
        }
        size_t done = 0;
        if (ftruncate(fd, (off_t)file_bytes) != 0) {
            close(fd);
            return s_ret(cudaErrorMemoryAllocation);
        }
        while (done < file_bytes) {
            ssize_t w = pwrite(fd, a.map + done, file_bytes - done, (off_t)done);
            if (w <= 0) {
                close(fd);
                return s_ret(cudaErrorMemoryAllocation);
            }
            done += (size_t)w;
        }
        // the same addresses, now the file's pages: pointers into the buffer stay valid
        if (mmap(a.map, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) !=
            (void *)a.map) {
            fatal("cudaIpcGetMemHandle: cannot map the memory file over the buffer at %p", devPtr);
        }
        a.fd = fd;
    }
    ipc_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, S_IPC_MAGIC, sizeof h.magic);
    h.pid = (int32_t)getpid();
    h.fd = a.fd;
    h.device = a.device;
    h.id = a.id;
    h.bytes = a.bytes;
    h.map_bytes = a.map_bytes;
    h.data_off = (uint64_t)((char *)devPtr - a.map);
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &h, sizeof h);
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    if (!devPtr || flags > cudaIpcMemLazyEnablePeerAccess) {
        return s_ret(cudaErrorInvalidValue);
    }
    *devPtr = NULL;
    s_context();
    static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    ipc_t h;
    memcpy(&h, handle.reserved, sizeof h);
    if (memcmp(h.magic, S_IPC_MAGIC, sizeof h.magic) != 0 || h.pid <= 0 || h.fd < 0 ||
        h.map_bytes <= page || h.map_bytes % page || h.data_off + h.bytes > h.map_bytes - page) {
        return s_ret(cudaErrorMapBufferObjectFailed);
    }
    if (h.pid == (int32_t)getpid()) { // CUDA refuses a process's own handles too
        return s_ret(cudaErrorInvalidResourceHandle);
    }
    if (!s_device_ok(s_device)) {
        return s_ret(cudaErrorNoDevice);
    }
    if (h.device != s_device &&
        (!(flags & cudaIpcMemLazyEnablePeerAccess) || !s_peers() || !s_device_ok(h.device))) {
        return s_ret(cudaErrorInvalidDevice);
    }
    // the file must still be that buffer's (fd numbers are reused once it is freed)
    char path[64], link[256], name[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h.pid, (int)h.fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0) {
        return s_ret(cudaErrorMapBufferObjectFailed); // the process or the file is gone
    }
    link[n] = 0;
    s_memfd_name(name, sizeof name, (long)h.pid, h.id);
    const char *at = strstr(link, name);
    if (!strstr(link, "memfd:") || !at || (at[strlen(name)] != 0 && at[strlen(name)] != ' ')) {
        return s_ret(cudaErrorInvalidResourceHandle); // freed since
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        return s_ret(cudaErrorMapBufferObjectFailed);
    }
    const size_t file_bytes = (size_t)h.map_bytes - page;
    struct stat st;
    char *m = NULL;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size == file_bytes) {
        void *r = mmap(NULL, (size_t)h.map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r != MAP_FAILED) {
            m = (char *)r;
            if (mmap(m, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) !=
                (void *)m) {
                munmap(m, (size_t)h.map_bytes);
                m = NULL;
            }
        }
    }
    close(fd);
    if (!m) {
        return s_ret(cudaErrorMapBufferObjectFailed);
    }
    char *data = m + h.data_off;
    std::lock_guard<std::mutex> lock(s_mutex);
    s_allocs[(uintptr_t)data] =
        alloc_t{(size_t)h.bytes, m, (size_t)h.map_bytes, s_device, -1, true, ++s_next_id};
    *devPtr = data;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
    std::lock_guard<std::mutex> lock(s_mutex);
    auto it = s_allocs.find((uintptr_t)devPtr);
    if (!devPtr || it == s_allocs.end() || !it->second.opened) {
        fprintf(stderr,
                "cuemu: cudaIpcCloseMemHandle(%p): not a pointer cudaIpcOpenMemHandle "
                "returned, or closed twice\n",
                devPtr);
        return s_ret(cudaErrorInvalidValue);
    }
    munmap(it->second.map, it->second.map_bytes);
    s_allocs.erase(it);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// streams

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
    if (!stream || flags > cudaStreamNonBlocking) {
        return s_ret(cudaErrorInvalidValue);
    }
    s_context();
    CUstream_st *s = new CUstream_st{flags, false, false, pthread_self(), {}};
    std::lock_guard<std::mutex> lock(s_mutex);
    s_streams.insert(s);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(s_mutex);
    if (!stream || !s_streams.erase(stream)) {
        return s_ret(cudaErrorInvalidResourceHandle);
    }
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    if (!stream_ok(stream)) {
        return s_ret(cudaErrorInvalidResourceHandle);
    }
    return s_capture_refuses("cudaStreamSynchronize", stream);
}

// ---------------------------------------------------------------------------------------------
// graphs

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    (void)mode;
    if (stream == NULL) {
        return s_ret(cudaErrorStreamCaptureImplicit);
    }
    std::lock_guard<std::mutex> lock(s_mutex);
    if (!s_streams.count(stream)) {
        return s_ret(cudaErrorInvalidResourceHandle);
    }
    if (stream->capturing) {
        return s_ret(cudaErrorInvalidValue);
    }
    stream->capturing = true;
    stream->invalidated = false;
    stream->by = pthread_self();
    stream->work.clear();
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    std::lock_guard<std::mutex> lock(s_mutex);
    if (!graph || !stream || !s_streams.count(stream) || !stream->capturing) {
        return s_ret(cudaErrorInvalidValue);
    }
    *graph = NULL;
    stream->capturing = false;
    std::vector<std::function<void()>> work;
    work.swap(stream->work);
    // CUEMU_CAPTURE_FAIL (read at every end): every capture fails, as one a GPU invalidates for
    // a call the emulation allows (the caller's fallback is what a test then checks)
    const char *fail = getenv("CUEMU_CAPTURE_FAIL");
    if (stream->invalidated || (fail && *fail && strcmp(fail, "0") != 0)) {
        return s_ret(cudaErrorStreamCaptureInvalidated);
    }
    *graph = new CUgraph_st{std::move(work)};
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags) {
    if (!exec || !graph || flags != 0) {
        return s_ret(cudaErrorInvalidValue);
    }
    *exec = new CUgraphExec_st{graph->work};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    if (!exec) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (!stream_ok(stream)) {
        return s_ret(cudaErrorInvalidResourceHandle);
    }
    if (cudaError_t e = s_capture_refuses("cudaGraphLaunch", stream)) {
        return e;
    }
    for (const auto &w : exec->work) {
        w();
    }
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// kernels' attributes

cudaError_t cuemu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value) {
    if (!kernel) {
        return s_ret(cudaErrorInvalidDevicePointer);
    }
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) {
        not_emulated("cudaFuncSetAttribute(%d)", (int)attr);
        return s_ret(cudaErrorInvalidValue);
    }
    if (value < 0 || value > SMEM_OPTIN) {
        return s_ret(cudaErrorInvalidValue);
    }
    if (cudaError_t e = s_capture_refuses("cudaFuncSetAttribute", NULL)) {
        return e; // it may synchronize the device: a capture refuses it (as CUDA's may)
    }
    std::lock_guard<std::mutex> lock(s_mutex);
    s_kernel_smem[kernel] = (size_t)value;
    return cudaSuccess;
}

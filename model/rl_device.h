// rl_device — where a model computes: the CPU, or an NVIDIA GPU through the CUDA module
// (librlctl_cuda.so, loaded with dlopen only when a GPU is asked for: the rlctl binary never
// links CUDA, and the same build runs on machines without it). This module parses device names
// (`cpu`, `cuda`, `cuda:N`), finds and checks the CUDA module, and says precisely why a GPU
// cannot be used: no module in this build, no CUDA libraries, no driver, no device, an index
// out of range, too little memory. Not the model's device code (model/cuda/).
#ifndef RL_DEVICE_H
#define RL_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int cuda;  // 0: the CPU; 1: an NVIDIA GPU
    int index; // the GPU's index among the visible ones (CUDA_VISIBLE_DEVICES honoured)
} rl_device_t;

// Parses "cpu", "cuda" (= cuda:0) or "cuda:N" (N a decimal index < 1024). Returns 0 or
// RL_EINVAL with err saying what is allowed.
int rl_device_parse(const char *text, rl_device_t *out, char *err, size_t err_len);

// Writes "cpu" or "cuda:N" into buf (cap bytes); returns buf.
char *rl_device_name(const rl_device_t *d, char *buf, size_t cap);

// What a GPU is, once found usable (rl_device_check).
typedef struct {
    char name[128];
    size_t mem_total, mem_free; // bytes
    int cc_major, cc_minor;
    int driver_version, runtime_version; // 1000 * major + 10 * minor
    int n_devices;                        // visible devices
} rl_device_info_t;

// Checks that device d can be used: for the CPU, always. For a GPU: the CUDA module loads (the
// file RLCTL_CUDA_MODULE names, else it is looked for beside the running binary, then where the
// build put it: rl_device_cuda), the driver is there
// and new enough, the index is among the visible devices, its compute capability is one the
// module was built for (8.0 or above), and at least `min_free` bytes of its memory are free
// (0: no check). info (may be NULL) gets what was found. Returns 0, or RL_ENOTFOUND (no module,
// no driver, no device, index out of range) / RL_EUNSUPPORTED (compute capability) / RL_ENOMEM
// (memory) with err saying what was found, in words a user can act on.
int rl_device_check(const rl_device_t *d, size_t min_free, rl_device_info_t *info, char *err,
                    size_t err_len);
// rl_device_parse then rl_device_check (no memory asked): a name a user gave (--device,
// model.device). Returns 0 with *out set, or the first one's error.
int rl_device_open(const char *text, rl_device_t *out, char *err, size_t err_len);

// From now on (on = 1) this process asks the GPUs nothing itself: rl_device_check and
// rl_device_peer run their CUDA queries in a short-lived child process (named rlctl-probe) and
// take its answer. CUDA makes a context on a device the first time a process asks it for its
// free memory (hundreds of MB of that device's memory, kept until the process exits): a
// controller that only checks and plans (rlctl validate, run, plan) must not hold one on every
// GPU of the placement for the whole run. Call it before any CUDA query; the module may already
// be loaded (that makes no context). Each distinct query is asked once and its answer kept for
// the process's life (the free memory too: a controller checks before its workers start).
void rl_device_isolate(int on);

// Whether GPU a can read and write GPU b's memory directly (peer access; a == b: 1). Returns 0
// with *access set, or RL_ENOTFOUND (no module) / RL_EIO with err.
int rl_device_peer(int a, int b, int *access, char *err, size_t err_len);

// A fresh id of a group of GPU ranks' NCCL communicator (RL_DEVICE_COMM_ID bytes): one rank makes
// it and hands it to the others (rl_model_opts_t.device_comm_id); id NULL: only whether NCCL
// opens (what the other ranks ask). NCCL is opened here for the first time in this process
// (RLCTL_NCCL_LIBRARY, else libnccl.so.2): RL_ENOTFOUND saying so when it cannot be (or when the
// CUDA module cannot), else 0.
#define RL_DEVICE_COMM_ID 128
int rl_device_comm_id(unsigned char *id, char *err, size_t err_len);

// The CUDA module's table (model/cuda/rl_cuda_module.h), loaded once per process and kept until
// exit; NULL with err filled when it cannot be loaded (not built, or its libraries missing).
// The environment variable RLCTL_CUDA_MODULE, when set and not empty, names the module file to
// load instead of the default (that path and no other: one that does not exist, does not load
// or has no rl_cuda_module table of this ABI is refused with a message naming
// RLCTL_CUDA_MODULE=<path>). It is how the tests point at the CPU emulation of the module,
// librlctl_cuda_emu.so (tests/cuemu/, docs/gpu.md). Read once, at the first call.
// borrowed; valid until program exit.
const struct rl_cuda_api *rl_device_cuda(char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

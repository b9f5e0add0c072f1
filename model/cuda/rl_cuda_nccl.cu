// rl_cuda_nccl — the module's collectives between devices (rl_cuda_module.h's comm_* entries):
// NCCL, opened with dlopen on first use so that the module loads, and everything else in it
// works, on a machine without NCCL. The handful of NCCL declarations used are written here (their
// values are NCCL's ABI, stable across NCCL 2.x); nccl.h is not included.
#include "rl_cuda_nccl.h"
#include "rl_cuda_common.cuh"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int s_result_t; // ncclResult_t: 0 success
typedef void *s_comm_t; // ncclComm_t
typedef struct {
    char internal[RL_CUDA_COMM_ID];
} s_id_t;                                         // ncclUniqueId
enum { S_SUM = 0, S_FLOAT32 = 7, S_FLOAT64 = 8 }; // ncclSum, ncclFloat32, ncclFloat64

static struct {
    void *lib;
    char msg[512]; // why it could not be opened
    s_result_t (*get_unique_id)(s_id_t *);
    s_result_t (*comm_init_rank)(s_comm_t *, int, s_id_t, int);
    s_result_t (*comm_destroy)(s_comm_t);
    const char *(*error_string)(s_result_t);
    s_result_t (*all_reduce)(const void *, void *, size_t, int, int, s_comm_t, cudaStream_t);
    s_result_t (*reduce_scatter)(const void *, void *, size_t, int, int, s_comm_t, cudaStream_t);
    s_result_t (*all_gather)(const void *, void *, size_t, int, s_comm_t, cudaStream_t);
} s_nccl;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

struct rl_cuda_comm {
    s_comm_t comm;
    int nranks, rank;
};

static void s_open(void) {
    const char *path = getenv("RLCTL_NCCL_LIBRARY");
    const char *name = path && *path ? path : "libnccl.so.2";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(s_nccl.msg, sizeof s_nccl.msg,
                 "NCCL is not available: cannot open %s (%s); set RLCTL_NCCL_LIBRARY to its path "
                 "(torch's wheel has one: nvidia/nccl/lib/libnccl.so.2), or use "
                 "mesh.collectives: host",
                 name, e ? e : "no error text");
        return;
    }
    const char *syms[] = {"ncclGetUniqueId",    "ncclCommInitRank", "ncclCommDestroy",
                          "ncclGetErrorString", "ncclAllReduce",    "ncclReduceScatter",
                          "ncclAllGather"};
    void *fn[sizeof syms / sizeof syms[0]];
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        if (!(fn[i] = dlsym(lib, syms[i]))) {
            snprintf(s_nccl.msg, sizeof s_nccl.msg, "NCCL is not usable: %s has no %s", name,
                     syms[i]);
            dlclose(lib);
            return;
        }
    }
    s_nccl.get_unique_id = (s_result_t(*)(s_id_t *))fn[0];
    s_nccl.comm_init_rank = (s_result_t(*)(s_comm_t *, int, s_id_t, int))fn[1];
    s_nccl.comm_destroy = (s_result_t(*)(s_comm_t))fn[2];
    s_nccl.error_string = (const char *(*)(s_result_t))fn[3];
    s_nccl.all_reduce =
        (s_result_t(*)(const void *, void *, size_t, int, int, s_comm_t, cudaStream_t))fn[4];
    s_nccl.reduce_scatter =
        (s_result_t(*)(const void *, void *, size_t, int, int, s_comm_t, cudaStream_t))fn[5];
    s_nccl.all_gather =
        (s_result_t(*)(const void *, void *, size_t, int, s_comm_t, cudaStream_t))fn[6];
    s_nccl.lib = lib;
}

// 0 when NCCL is open, else -1 with msg.
static int s_ready(char *msg, size_t msg_len) {
    pthread_once(&s_once, s_open);
    if (!s_nccl.lib) {
        snprintf(msg, msg_len, "%s", s_nccl.msg);
        return -1;
    }
    return 0;
}

static const char *s_str(s_result_t r) {
    const char *s = s_nccl.error_string ? s_nccl.error_string(r) : NULL;
    return s ? s : "unknown NCCL error";
}

#define S_NCCL(ctx, call)                                                                          \
    do {                                                                                           \
        s_result_t rl_r_ = (call);                                                                 \
        if (rl_r_ != 0) {                                                                          \
            return rl_cuda_fail((ctx), "%s: NCCL error %d: %s", #call, rl_r_, s_str(rl_r_));       \
        }                                                                                          \
    } while (0)

int rl_cuda_comm_id(unsigned char *id, char *msg, size_t msg_len) {
    if (s_ready(msg, msg_len)) {
        return -1;
    }
    if (!id) {
        return 0; // only whether NCCL opens (an id starts a listener that waits for its group)
    }
    s_id_t u;
    s_result_t r = s_nccl.get_unique_id(&u);
    if (r != 0) {
        snprintf(msg, msg_len, "ncclGetUniqueId: NCCL error %d: %s", r, s_str(r));
        return -1;
    }
    memcpy(id, &u, sizeof u);
    return 0;
}

int rl_cuda_comm_new(rl_cuda_ctx_t *ctx, const unsigned char *id, int nranks, int rank,
                     rl_cuda_comm_t **out) {
    *out = NULL;
    if (s_ready(ctx->err, sizeof ctx->err)) {
        return -1;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        return rl_cuda_fail(ctx, "a communicator's rank %d of %d", rank, nranks);
    }
    rl_cuda_comm_t *c = (rl_cuda_comm_t *)calloc(1, sizeof *c);
    if (!c) {
        return rl_cuda_fail(ctx, "out of memory");
    }
    s_id_t u;
    memcpy(&u, id, sizeof u);
    c->nranks = nranks;
    c->rank = rank;
    cudaError_t e = cudaSetDevice(ctx->device);
    s_result_t r = e == cudaSuccess ? s_nccl.comm_init_rank(&c->comm, nranks, u, rank) : 0;
    if (e != cudaSuccess || r != 0) {
        free(c);
        return e != cudaSuccess ? rl_cuda_fail(ctx, "cudaSetDevice: %s", cudaGetErrorString(e))
                                : rl_cuda_fail(ctx,
                                               "ncclCommInitRank (rank %d of %d): NCCL "
                                               "error %d: %s",
                                               rank, nranks, r, s_str(r));
    }
    *out = c;
    return 0;
}

void rl_cuda_comm_free(rl_cuda_comm_t *comm) {
    if (comm) {
        if (comm->comm && s_nccl.comm_destroy) {
            s_nccl.comm_destroy(comm->comm);
        }
        free(comm);
    }
}

int rl_cuda_comm_reduce_scatter(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, float *buf,
                                size_t count) {
    // in place: the receive buffer is this rank's block of the send buffer (NCCL allows it)
    S_NCCL(ctx, s_nccl.reduce_scatter(buf, buf + (size_t)comm->rank * count, count, S_FLOAT32,
                                      S_SUM, comm->comm, ctx->stream));
    return 0;
}

int rl_cuda_comm_all_gather(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, float *buf, size_t count) {
    S_NCCL(ctx, s_nccl.all_gather(buf + (size_t)comm->rank * count, buf, count, S_FLOAT32,
                                  comm->comm, ctx->stream));
    return 0;
}

int rl_cuda_comm_sum_f64(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, double *buf, size_t n) {
    S_NCCL(ctx, s_nccl.all_reduce(buf, buf, n, S_FLOAT64, S_SUM, comm->comm, ctx->stream));
    return 0;
}

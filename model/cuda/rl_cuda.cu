// rl_cuda — the CUDA module's core (see rl_cuda_module.h): device probing, contexts, device
// memory, bf16 conversions and the cuBLASLt matmul, and the module's one export. The kernels of
// the layers live in their own files beside it, each with its launch function.
#include "rl_cuda_attn.h"
#include "rl_cuda_common.cuh"
#include "rl_cuda_lin.h"
#include "rl_cuda_head.h"
#include "rl_cuda_elt.h"
#include "rl_cuda_nccl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// devices

// Also clears the thread's last error that the failed call left (see RL_CUDA_CHECK).
static int s_msg(char *msg, size_t msg_len, const char *what, cudaError_t e) {
    (void)cudaGetLastError();
    snprintf(msg, msg_len, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

static int s_probe(int *n_devices, int *driver_version, int *runtime_version, char *msg,
                   size_t msg_len) {
    *n_devices = 0;
    *driver_version = 0;
    *runtime_version = 0;
    cudaRuntimeGetVersion(runtime_version);
    cudaError_t e = cudaDriverGetVersion(driver_version);
    if (e != cudaSuccess) {
        return s_msg(msg, msg_len, "no CUDA driver", e);
    }
    if (*driver_version == 0) {
        snprintf(msg, msg_len, "no CUDA driver (libcuda.so.1 is not installed or not loadable)");
        return -1;
    }
    if (*driver_version < *runtime_version) {
        snprintf(msg, msg_len,
                 "the CUDA driver supports CUDA %d.%d, older than the runtime rlctl was built "
                 "with (%d.%d): update the driver",
                 *driver_version / 1000, (*driver_version % 1000) / 10, *runtime_version / 1000,
                 (*runtime_version % 1000) / 10);
        return -1;
    }
    e = cudaGetDeviceCount(n_devices);
    if (e != cudaSuccess) {
        *n_devices = 0;
        return s_msg(msg, msg_len, "no usable CUDA device", e);
    }
    if (*n_devices == 0) {
        snprintf(msg, msg_len, "the CUDA driver sees no device (CUDA_VISIBLE_DEVICES=%s)",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
        return -1;
    }
    return 0;
}

static int s_peer(int a, int b, int *access, int *rank, char *msg, size_t msg_len) {
    *access = 0;
    *rank = -1;
    cudaError_t e = cudaDeviceCanAccessPeer(access, a, b);
    if (e != cudaSuccess) {
        return s_msg(msg, msg_len, "cannot ask whether the devices are peers", e);
    }
    if (*access &&
        (e = cudaDeviceGetP2PAttribute(rank, cudaDevP2PAttrPerformanceRank, a, b)) != cudaSuccess) {
        return s_msg(msg, msg_len, "cannot read the peers' performance rank", e);
    }
    return 0;
}

static int s_device_info(int index, rl_cuda_device_info_t *out, char *msg, size_t msg_len) {
    memset(out, 0, sizeof *out);
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, index);
    if (e != cudaSuccess) {
        return s_msg(msg, msg_len, "cannot read the device's properties", e);
    }
    snprintf(out->name, sizeof out->name, "%.127s", p.name);
    out->mem_total = p.totalGlobalMem;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sms = p.multiProcessorCount;
    int prev = 0;
    cudaGetDevice(&prev);
    size_t free_b = 0, total_b = 0;
    if ((e = cudaSetDevice(index)) != cudaSuccess ||
        (e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) {
        cudaSetDevice(prev);
        return s_msg(msg, msg_len, "cannot read the device's free memory", e);
    }
    cudaSetDevice(prev);
    out->mem_free = free_b;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// contexts

static void s_ctx_free(rl_cuda_ctx_t *ctx) {
    if (!ctx) {
        return;
    }
    cudaSetDevice(ctx->device);
    if (ctx->stream) {
        cudaStreamSynchronize(ctx->stream);
    }
    if (ctx->workspace) {
        cudaFree(ctx->workspace);
    }
    if (ctx->lt) {
        cublasLtDestroy(ctx->lt);
    }
    if (ctx->stream) {
        cudaStreamDestroy(ctx->stream);
    }
    free(ctx);
}

static int s_ctx_new(int device, rl_cuda_ctx_t **out, char *msg, size_t msg_len) {
    *out = NULL;
    rl_cuda_ctx_t *ctx = (rl_cuda_ctx_t *)calloc(1, sizeof *ctx);
    if (!ctx) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    ctx->device = device;
    int rc = 0;
    cudaError_t e;
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaMalloc(&ctx->workspace, RL_CUDA_LT_WORKSPACE)) != cudaSuccess) {
        rc = s_msg(msg, msg_len, "cannot set up the device", e);
    } else if (cublasLtCreate(&ctx->lt) != CUBLAS_STATUS_SUCCESS) {
        snprintf(msg, msg_len, "cannot create a cuBLASLt handle");
        rc = -1;
    }
    if (rc) {
        s_ctx_free(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}

static const char *s_errmsg(const rl_cuda_ctx_t *ctx) {
    return ctx->err;
}

static int s_sync(rl_cuda_ctx_t *ctx) {
    RL_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
    return 0;
}

// ---------------------------------------------------------------------------------------------
// memory

static int s_dmalloc(rl_cuda_ctx_t *ctx, size_t bytes, void **out) {
    *out = NULL;
    RL_CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        // a refused allocation is the caller's to handle, and the context goes on: the error
        // must not stay the thread's last one, or the next launch reports it as its own
        (void)cudaGetLastError();
        *out = NULL;
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return rl_cuda_fail(ctx, "cannot allocate %zu bytes on cuda:%d (%zu of %zu free): %s",
                            bytes, ctx->device, free_b, total_b, cudaGetErrorString(e));
    }
    return 0;
}

static void s_dfree(rl_cuda_ctx_t *ctx, void *dptr) {
    (void)ctx;
    if (dptr) {
        cudaFree(dptr);
    }
}

static int s_h2d(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes) {
    RL_CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    // the source is the caller's pageable memory, which it may reuse at once
    RL_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
    return 0;
}

static int s_d2h(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes) {
    RL_CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    RL_CUDA_CHECK(ctx, cudaStreamSynchronize(ctx->stream));
    return 0;
}

static int s_d2d(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes) {
    RL_CUDA_CHECK(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return 0;
}

// ---------------------------------------------------------------------------------------------
// CUDA graphs

struct rl_cuda_graph {
    cudaGraphExec_t exec;
};

static int s_graph_begin(rl_cuda_ctx_t *ctx) {
    RL_CUDA_CHECK(ctx, cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    return 0;
}

static int s_graph_end(rl_cuda_ctx_t *ctx, rl_cuda_graph_t **out) {
    *out = NULL;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(ctx->stream, &g);
    if (e != cudaSuccess || g == NULL) {
        (void)cudaGetLastError(); // the context goes on without the graph
        return rl_cuda_fail(ctx, "the stream's capture failed: %s",
                            e != cudaSuccess ? cudaGetErrorString(e) : "no graph");
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rl_cuda_fail(ctx, "cannot instantiate the captured graph: %s",
                            cudaGetErrorString(e));
    }
    rl_cuda_graph_t *r = (rl_cuda_graph_t *)malloc(sizeof *r);
    if (!r) {
        cudaGraphExecDestroy(x);
        return rl_cuda_fail(ctx, "out of memory");
    }
    r->exec = x;
    *out = r;
    return 0;
}

static int s_graph_launch(rl_cuda_ctx_t *ctx, rl_cuda_graph_t *graph) {
    RL_CUDA_CHECK(ctx, cudaGraphLaunch(graph->exec, ctx->stream));
    return 0;
}

static void s_graph_free(rl_cuda_graph_t *graph) {
    if (graph) {
        cudaGraphExecDestroy(graph->exec);
        free(graph);
    }
}

static int s_ipc_export(rl_cuda_ctx_t *ctx, void *dptr, unsigned char *handle) {
    static_assert(sizeof(cudaIpcMemHandle_t) == RL_CUDA_IPC_HANDLE, "CUDA's IPC handle size");
    cudaIpcMemHandle_t h;
    RL_CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
    RL_CUDA_CHECK(ctx, cudaIpcGetMemHandle(&h, dptr));
    memcpy(handle, &h, sizeof h);
    return 0;
}

static int s_ipc_open(rl_cuda_ctx_t *ctx, const unsigned char *handle, void **dptr) {
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    *dptr = NULL;
    RL_CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
    RL_CUDA_CHECK(ctx, cudaIpcOpenMemHandle(dptr, h, cudaIpcMemLazyEnablePeerAccess));
    return 0;
}

static int s_ipc_close(rl_cuda_ctx_t *ctx, void *dptr) {
    RL_CUDA_CHECK(ctx, cudaSetDevice(ctx->device));
    RL_CUDA_CHECK(ctx, cudaIpcCloseMemHandle(dptr));
    return 0;
}

static int s_dset(rl_cuda_ctx_t *ctx, void *dst, int v, size_t bytes) {
    RL_CUDA_CHECK(ctx, cudaMemsetAsync(dst, v, bytes, ctx->stream));
    return 0;
}

// ---------------------------------------------------------------------------------------------
// conversions

__global__ void s_f32_to_bf16_kernel(__nv_bfloat16 *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        out[i] = __float2bfloat16_rn(in[i]);
    }
}

__global__ void s_bf16_to_f32_kernel(float *out, const __nv_bfloat16 *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        out[i] = __bfloat162float(in[i]);
    }
}

static unsigned s_grid(size_t n) {
    unsigned b = rl_cuda_blocks(n, 256);
    return b < 65535u * 8u ? b : 65535u * 8u; // grid-stride loops do the rest
}

static int s_f32_to_bf16(rl_cuda_ctx_t *ctx, uint16_t *out, const float *in, size_t n) {
    if (n == 0) {
        return 0;
    }
    s_f32_to_bf16_kernel<<<s_grid(n), 256, 0, ctx->stream>>>((__nv_bfloat16 *)out, in, n);
    RL_CUDA_LAUNCHED(ctx, "f32_to_bf16");
    return 0;
}

static int s_bf16_to_f32(rl_cuda_ctx_t *ctx, float *out, const uint16_t *in, size_t n) {
    if (n == 0) {
        return 0;
    }
    s_bf16_to_f32_kernel<<<s_grid(n), 256, 0, ctx->stream>>>(out, (const __nv_bfloat16 *)in, n);
    RL_CUDA_LAUNCHED(ctx, "bf16_to_f32");
    return 0;
}

// ---------------------------------------------------------------------------------------------
// matmul (cuBLASLt)
//
// cuBLASLt is column-major. A row-major (R,C) matrix with row stride ld is the column-major
// (C,R) matrix with leading dimension ld, its transpose. So row-major C = op(A) op(B) is
// column-major C^T = op(B)^T op(A)^T: we ask cuBLASLt for D' (N,M) = op'(B') op'(A') with
// B' = B as stored (column-major view), A' = A as stored, and the op flags kept: a stored
// row-major B (K,N) is column-major (N,K) = B^T, which op N leaves as B^T, as C^T needs.

static int s_gemm(rl_cuda_ctx_t *ctx, const rl_cuda_gemm_t *g, const uint16_t *A,
                  const uint16_t *B, float *C) {
    if (g->M <= 0 || g->N <= 0) {
        return 0;
    }
    if (g->K <= 0) {
        return rl_cuda_fail(ctx, "gemm: K = %d", g->K);
    }
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    int rc = 0;
    cublasOperation_t ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    // column-major view: first operand is B (N x K after op), second A (K x M after op)
    uint64_t b_rows = g->trans_b ? (uint64_t)g->K : (uint64_t)g->N; // column-major rows of B'
    uint64_t b_cols = g->trans_b ? (uint64_t)g->N : (uint64_t)g->K;
    uint64_t a_rows = g->trans_a ? (uint64_t)g->M : (uint64_t)g->K;
    uint64_t a_cols = g->trans_a ? (uint64_t)g->K : (uint64_t)g->M;
    size_t ws = RL_CUDA_LT_WORKSPACE;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    cublasStatus_t s;
#define S_LT(call)                                                                               \
    do {                                                                                         \
        if ((s = (call)) != CUBLAS_STATUS_SUCCESS) {                                             \
            rc = rl_cuda_fail(ctx, "gemm %dx%dx%d: %s: cuBLAS status %d", g->M, g->N, g->K,     \
                              #call, (int)s);                                                    \
            goto done;                                                                           \
        }                                                                                        \
    } while (0)
    S_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    S_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tb, sizeof tb));
    S_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ta, sizeof ta));
    S_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, b_rows, b_cols, g->ldb));
    S_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, a_rows, a_cols, g->lda));
    S_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, (uint64_t)g->N, (uint64_t)g->M, g->ldc));
    S_LT(cublasLtMatmulPreferenceCreate(&pref));
    S_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                              sizeof ws));
    S_LT(cublasLtMatmulAlgoGetHeuristic(ctx->lt, op, lb, la, lc, lc, pref, 1, &heur, &found));
    if (found < 1) {
        rc = rl_cuda_fail(ctx, "gemm %dx%dx%d: cuBLASLt has no algorithm for it", g->M, g->N,
                          g->K);
        goto done;
    }
    S_LT(cublasLtMatmul(ctx->lt, op, &g->alpha, B, lb, A, la, &g->beta, C, lc, C, lc,
                        &heur.algo, ctx->workspace, ws, ctx->stream));
#undef S_LT
done:
    if (pref) {
        cublasLtMatmulPreferenceDestroy(pref);
    }
    if (lc) {
        cublasLtMatrixLayoutDestroy(lc);
    }
    if (la) {
        cublasLtMatrixLayoutDestroy(la);
    }
    if (lb) {
        cublasLtMatrixLayoutDestroy(lb);
    }
    if (op) {
        cublasLtMatmulDescDestroy(op);
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------
// the export

static const rl_cuda_module_t s_module = {
    RL_CUDA_MODULE_ABI,
    (int)sizeof(rl_cuda_module_t),
    s_probe,
    s_device_info,
    s_ctx_new,
    s_ctx_free,
    s_errmsg,
    s_sync,
    s_dmalloc,
    s_dfree,
    s_h2d,
    s_d2h,
    s_dset,
    s_f32_to_bf16,
    s_bf16_to_f32,
    s_gemm,
    rl_cuda_bias_rows,
    rl_cuda_bias_grad,
    // ---- vocabulary head and sampling (rl_cuda_head.cu) ----
    rl_cuda_logprob_scratch_bytes,
    rl_cuda_logprob_forward,
    rl_cuda_logprob_backward,
    rl_cuda_logits,
    rl_cuda_sample,
    // ---- element-wise and small kernels (rl_cuda_elt.cu) ----
    rl_cuda_elt_scratch_doubles,
    rl_cuda_elt_embedding_forward,
    rl_cuda_elt_embedding_plan,
    rl_cuda_elt_embedding_backward,
    rl_cuda_elt_rmsnorm_forward,
    rl_cuda_elt_rmsnorm_backward,
    rl_cuda_elt_rope_forward,
    rl_cuda_elt_rope_backward,
    rl_cuda_elt_swiglu_forward,
    rl_cuda_elt_swiglu_backward,
    rl_cuda_elt_residual_forward,
    rl_cuda_elt_accumulate,
    rl_cuda_elt_dropout_forward,
    rl_cuda_elt_dropout_backward,
    rl_cuda_elt_adamw_step,
    rl_cuda_elt_sumsq,
    rl_cuda_elt_scale,
    rl_cuda_elt_head_forward,
    rl_cuda_elt_head_backward,
    // ---- attention ----
    rl_cuda_attn_forward,
    rl_cuda_attn_backward,
    rl_cuda_attn_cache_write,
    rl_cuda_attn_decode,
    rl_cuda_attn_prefill,
    // ---- appended ----
    s_d2d,
    rl_cuda_sample_rows,
    s_peer,
    rl_cuda_elt_dropout_mask,
    s_ipc_export,
    s_ipc_open,
    s_ipc_close,
    // ---- collectives between devices (rl_cuda_nccl.cu) ----
    rl_cuda_comm_id,
    rl_cuda_comm_new,
    rl_cuda_comm_free,
    rl_cuda_comm_reduce_scatter,
    rl_cuda_comm_all_gather,
    rl_cuda_comm_sum_f64,
    // ---- SwiGLU keeping gate and up in bf16 ----
    rl_cuda_elt_swiglu_forward_keep,
    rl_cuda_elt_swiglu_backward_kept,
    // ---- CUDA graphs ----
    s_graph_begin,
    s_graph_end,
    s_graph_launch,
    s_graph_free,
    // ---- attention in bf16 ----
    rl_cuda_attn_forward_bf16,
    rl_cuda_attn_prefill_bf16,
    rl_cuda_attn_backward_bf16,
    rl_cuda_attn_cache_write_bf16,
    rl_cuda_attn_decode_bf16c,
};

extern "C" __attribute__((visibility("default"))) const rl_cuda_module_t *rl_cuda_module(void) {
    return &s_module;
}

// cuemu_blaslt — cuBLASLt's matmul as cuemu emulates it (cublasLt.h, cuemu's): column-major
// D (m,n) = alpha op(A) (m,k) op(B) (k,n) + beta C, op N or T, A and B bf16, C and D fp32, the
// compute type fp32. Each product of two bf16 values is exact in fp32; the products are summed
// in fp32 in the order of k, then D = fl(fl(alpha acc) + fl(beta c)) (C not read when beta is 0,
// as cuBLAS promises; op(A), op(B) not read when alpha is 0). A real GPU sums in another order
// (tensor-core tiles, split-k): its results differ in the last bits, within the fp32
// accumulation bound the tests hold both to. Every matrix must lie in one cudaMalloc'd buffer.
// Anything else is refused loudly (cuemu::not_emulated + CUBLAS_STATUS_NOT_SUPPORTED).
#include "cuemu_internal.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <string.h>

#include <vector>

struct cublasLtContext {
    unsigned magic;
};

struct cublasLtMatmulDescOpaque_t {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    cublasOperation_t ta, tb;
};

struct cublasLtMatrixLayoutOpaque_t {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};

struct cublasLtMatmulPreferenceOpaque_t {
    uint64_t max_workspace;
};

namespace {

const unsigned S_MAGIC = 0x6375656du; // "cuem"
const uint64_t S_ALGO = 0x63756d6d616c676full;

// The problem's shape (m, n, k) when cuemu computes it, or a refusal with the reason on stderr.
cublasStatus_t s_shape(const cublasLtMatmulDescOpaque_t *op, const cublasLtMatrixLayoutOpaque_t *a,
                       const cublasLtMatrixLayoutOpaque_t *b, const cublasLtMatrixLayoutOpaque_t *c,
                       const cublasLtMatrixLayoutOpaque_t *d, uint64_t *m, uint64_t *n,
                       uint64_t *k) {
    if (!op || !a || !b || !c || !d) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (a->type != CUDA_R_16BF || b->type != CUDA_R_16BF || c->type != CUDA_R_32F ||
        d->type != CUDA_R_32F) {
        cuemu::not_emulated("cuBLASLt matmul with data types A %d B %d C %d D %d (only A, B "
                            "CUDA_R_16BF and C, D CUDA_R_32F are)",
                            (int)a->type, (int)b->type, (int)c->type, (int)d->type);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    *m = d->rows;
    *n = d->cols;
    *k = op->ta == CUBLAS_OP_N ? a->cols : a->rows;
    const uint64_t am = op->ta == CUBLAS_OP_N ? a->rows : a->cols;
    const uint64_t bk = op->tb == CUBLAS_OP_N ? b->rows : b->cols;
    const uint64_t bn = op->tb == CUBLAS_OP_N ? b->cols : b->rows;
    if (am != *m || bk != *k || bn != *n || c->rows != *m || c->cols != *n) {
        fprintf(stderr,
                "cuemu: cuBLASLt matmul: shapes do not agree: op(A) %llux%llu, op(B) %llux%llu, "
                "C %llux%llu, D %llux%llu\n",
                (unsigned long long)am, (unsigned long long)*k, (unsigned long long)bk,
                (unsigned long long)bn, (unsigned long long)c->rows,
                (unsigned long long)c->cols, (unsigned long long)*m, (unsigned long long)*n);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const cublasLtMatrixLayoutOpaque_t *all[4] = {a, b, c, d};
    for (auto *l : all) {
        if (l->ld < 1 || (uint64_t)l->ld < l->rows) {
            fprintf(stderr, "cuemu: cuBLASLt matmul: a layout of %llu rows has ld %lld\n",
                    (unsigned long long)l->rows, (long long)l->ld);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

// Bytes a column-major (rows, cols, ld) matrix of `elem`-byte elements spans.
size_t s_span(const cublasLtMatrixLayoutOpaque_t *l, size_t elem) {
    if (l->rows == 0 || l->cols == 0) {
        return 0;
    }
    return ((size_t)l->ld * (size_t)(l->cols - 1) + (size_t)l->rows) * elem;
}

float s_bf16(const void *p, size_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
    if (!handle) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *handle = new cublasLtContext{S_MAGIC};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (!handle || handle->magic != S_MAGIC) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    handle->magic = 0;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
    if (!desc) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) {
        cuemu::not_emulated("cuBLASLt compute type %d with scale type %d (only "
                            "CUBLAS_COMPUTE_32F with CUDA_R_32F is)",
                            (int)compute, (int)scale);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    *desc = new cublasLtMatmulDescOpaque_t{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    delete desc;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
    if (!desc || !buf || size != sizeof(int32_t)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    int32_t v;
    memcpy(&v, buf, sizeof v);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) {
            cuemu::not_emulated("cuBLASLt operation %d (only N and T are)", (int)v);
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->ta : desc->tb) = (cublasOperation_t)v;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        if (v == 0) { // host
            return CUBLAS_STATUS_SUCCESS;
        }
        break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        if (v == 1) { // CUBLASLT_EPILOGUE_DEFAULT
            return CUBLAS_STATUS_SUCCESS;
        }
        break;
    default:
        break;
    }
    cuemu::not_emulated("cublasLtMatmulDescSetAttribute(attribute %d, value %d)", (int)attr,
                        (int)v);
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    if (!layout) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    delete layout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!pref) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *pref = new cublasLtMatmulPreferenceOpaque_t{0};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t size) {
    if (!pref || !buf) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size == sizeof(uint64_t)) {
        memcpy(&pref->max_workspace, buf, sizeof(uint64_t));
        return CUBLAS_STATUS_SUCCESS;
    }
    if (attr == CUBLASLT_MATMUL_PREF_SEARCH_MODE && size == sizeof(uint32_t)) {
        uint32_t v;
        memcpy(&v, buf, sizeof v);
        if (v == 0) {
            return CUBLAS_STATUS_SUCCESS;
        }
    }
    cuemu::not_emulated("cublasLtMatmulPreferenceSetAttribute(attribute %d, %zu bytes)",
                        (int)attr, size);
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *results,
                                              int *returned) {
    if (!handle || handle->magic != S_MAGIC) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!pref || requested < 1 || !results || !returned) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *returned = 0;
    uint64_t m, n, k;
    cublasStatus_t s = s_shape(desc, a, b, c, d, &m, &n, &k);
    if (s != CUBLAS_STATUS_SUCCESS) {
        return s;
    }
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = S_ALGO;
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                              const void *alpha_p, const void *A, cublasLtMatrixLayout_t a,
                              const void *B, cublasLtMatrixLayout_t b, const void *beta_p,
                              const void *C, cublasLtMatrixLayout_t c, void *D,
                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspace_bytes, cudaStream_t stream) {
    (void)workspace;
    (void)workspace_bytes; // the algorithm needs none
    if (!handle || handle->magic != S_MAGIC) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!alpha_p || !beta_p || !algo || algo->data[0] != S_ALGO || !cuemu::stream_ok(stream)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    // a stream being captured: the call recorded with copies of its descriptors and scalars
    // (the caller may destroy them now), run again at each launch of the graph
    struct saved_t {
        cublasLtMatmulDescOpaque_t desc;
        cublasLtMatrixLayoutOpaque_t a, b, c, d;
        float alpha, beta;
        cublasLtMatmulAlgo_t algo;
    };
    if (desc && a && b && c && d) {
        auto sv = std::make_shared<saved_t>(saved_t{*desc, *a, *b, *c, *d, 0.0f, 0.0f, *algo});
        memcpy(&sv->alpha, alpha_p, sizeof sv->alpha);
        memcpy(&sv->beta, beta_p, sizeof sv->beta);
        if (cuemu::capture(stream, [=]() {
                // replayed on the default stream (a graph does not depend on the stream it was
                // captured on); a failure now is a buffer freed since the capture
                if (cublasLtMatmul(handle, &sv->desc, &sv->alpha, A, &sv->a, B, &sv->b, &sv->beta,
                                   C, &sv->c, D, &sv->d, &sv->algo, workspace, workspace_bytes,
                                   NULL) != CUBLAS_STATUS_SUCCESS) {
                    cuemu::fatal("cublasLtMatmul replayed by a graph launch failed (a buffer "
                                 "freed since the capture?)");
                }
            })) {
            return CUBLAS_STATUS_SUCCESS;
        }
    }
    uint64_t m, n, k;
    cublasStatus_t s = s_shape(desc, a, b, c, d, &m, &n, &k);
    if (s != CUBLAS_STATUS_SUCCESS) {
        return s;
    }
    float alpha, beta;
    memcpy(&alpha, alpha_p, sizeof alpha);
    memcpy(&beta, beta_p, sizeof beta);
    const bool read_ab = alpha != 0.0f && k > 0, read_c = beta != 0.0f;
    struct {
        const char *name;
        const void *p;
        size_t bytes;
        bool used;
    } mats[4] = {{"A", A, s_span(a, 2), read_ab},
                 {"B", B, s_span(b, 2), read_ab},
                 {"C", C, s_span(c, 4), read_c},
                 {"D", D, s_span(d, 4), true}};
    for (auto &x : mats) {
        if (x.used && x.bytes && !cuemu::device_range(x.p, x.bytes)) {
            fprintf(stderr,
                    "cuemu: cublasLtMatmul %llux%llux%llu: %s [%p, +%zu bytes) is not inside one "
                    "cudaMalloc'd buffer\n",
                    (unsigned long long)m, (unsigned long long)n, (unsigned long long)k, x.name,
                    x.p, x.bytes);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    if (m == 0 || n == 0) {
        return CUBLAS_STATUS_SUCCESS;
    }
    // op(A) as fp32, column-major (m, k) packed; op(B) read element by element
    std::vector<float> af(read_ab ? (size_t)m * k : 0), acc((size_t)m);
    for (uint64_t kk = 0; read_ab && kk < k; kk++) {
        for (uint64_t i = 0; i < m; i++) {
            size_t at = desc->ta == CUBLAS_OP_N ? i + kk * (size_t)a->ld : kk + i * (size_t)a->ld;
            af[i + kk * m] = s_bf16(A, at);
        }
    }
    const uint64_t MB = 512; // rows per block: the block of op(A) stays in cache over n columns
    for (uint64_t i0 = 0; i0 < m; i0 += MB) {
        const uint64_t i1 = i0 + MB < m ? i0 + MB : m;
        for (uint64_t j = 0; j < n; j++) {
            float *acc_p = acc.data();
            for (uint64_t i = i0; i < i1; i++) {
                acc_p[i] = 0.0f;
            }
            for (uint64_t kk = 0; read_ab && kk < k; kk++) {
                size_t bt = desc->tb == CUBLAS_OP_N ? kk + j * (size_t)b->ld : j + kk * (size_t)b->ld;
                const float bv = s_bf16(B, bt);
                const float *col = af.data() + kk * m;
                for (uint64_t i = i0; i < i1; i++) {
                    acc_p[i] += col[i] * bv; // exact product, one rounding per addition
                }
            }
            const float *cc = static_cast<const float *>(C) + j * (size_t)c->ld;
            float *dd = static_cast<float *>(D) + j * (size_t)d->ld;
            for (uint64_t i = i0; i < i1; i++) {
                const float ab = alpha * acc_p[i];
                dd[i] = read_c ? ab + beta * cc[i] : ab;
            }
        }
    }
    cuemu::check_canaries("cublasLtMatmul");
    return CUBLAS_STATUS_SUCCESS;
}

// rl_cuda_lin — a Linear layer's bias on the GPU (see rl_cuda_lin.h).
#include "rl_cuda_common.cuh"
#include "rl_cuda_lin.h"

// One thread per element of the (N, OC) block: consecutive threads take consecutive columns.
__global__ void s_bias_rows_kernel(float *out, int ldo, const float *bias, int N, int OC) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < (size_t)N * (size_t)OC) {
        size_t r = i / (size_t)OC, c = i % (size_t)OC;
        out[r * (size_t)ldo + c] = bias[c];
    }
}

extern "C" int rl_cuda_bias_rows(rl_cuda_ctx_t *ctx, float *out, int ldo, const float *bias,
                                 int N, int OC) {
    if (N <= 0 || OC <= 0) {
        return 0;
    }
    size_t n = (size_t)N * (size_t)OC;
    s_bias_rows_kernel<<<rl_cuda_blocks(n, 256), 256, 0, ctx->stream>>>(out, ldo, bias, N, OC);
    RL_CUDA_LAUNCHED(ctx, "bias_rows");
    return 0;
}

// One thread per column, down the rows in order: reads of a warp are consecutive columns of a
// row (coalesced); the sum is in fp32, in row order, so the result is the same every run.
__global__ void s_bias_grad_kernel(float *dbias, const float *dout, int ldd, int N, int OC) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) {
        return;
    }
    float s = 0.0f;
    for (int r = 0; r < N; r++) {
        s += dout[(size_t)r * (size_t)ldd + c];
    }
    dbias[c] += s;
}

extern "C" int rl_cuda_bias_grad(rl_cuda_ctx_t *ctx, float *dbias, const float *dout, int ldd,
                                 int N, int OC) {
    if (N <= 0 || OC <= 0) {
        return 0;
    }
    s_bias_grad_kernel<<<rl_cuda_blocks((size_t)OC, 128), 128, 0, ctx->stream>>>(dbias, dout, ldd,
                                                                                  N, OC);
    RL_CUDA_LAUNCHED(ctx, "bias_grad");
    return 0;
}

// rl_cuda_lin — the small kernels around a Linear layer's matmul on the GPU (the matmul itself is
// the module's cuBLASLt gemm): writing a bias into every row before a gemm with beta 1, and a
// bias's gradient as column sums. Plain C declarations of rl_cuda_lin.cu's launch functions;
// the module's table holds them. Internal to model/cuda/.
#ifndef RL_CUDA_LIN_H
#define RL_CUDA_LIN_H

#include "rl_cuda_module.h"

#ifdef __cplusplus
extern "C" {
#endif

// out (N, OC) fp32 with row stride ldo: out[i][j] = bias[j] (bias fp32 (OC)).
int rl_cuda_bias_rows(rl_cuda_ctx_t *ctx, float *out, int ldo, const float *bias, int N, int OC);

// dbias (OC) fp32 += sum over i of dout[i][j] (dout fp32 (N, OC), row stride ldd); the sum runs
// over rows in order (one thread per column: deterministic).
int rl_cuda_bias_grad(rl_cuda_ctx_t *ctx, float *dbias, const float *dout, int ldd, int N, int OC);

#ifdef __cplusplus
}
#endif
#endif

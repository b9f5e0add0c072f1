// rl_cuda_nccl — plain C declarations of rl_cuda_nccl.cu's entries of the module's table (the
// comm_* entries of rl_cuda_module.h: their contracts are there). Internal to model/cuda/.
#ifndef RL_CUDA_NCCL_H
#define RL_CUDA_NCCL_H

#include "rl_cuda_module.h"

#ifdef __cplusplus
extern "C" {
#endif

int rl_cuda_comm_id(unsigned char *id, char *msg, size_t msg_len);
int rl_cuda_comm_new(rl_cuda_ctx_t *ctx, const unsigned char *id, int nranks, int rank,
                     rl_cuda_comm_t **out);
void rl_cuda_comm_free(rl_cuda_comm_t *comm);
int rl_cuda_comm_reduce_scatter(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, float *buf, size_t count);
int rl_cuda_comm_all_gather(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, float *buf, size_t count);
int rl_cuda_comm_sum_f64(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, double *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif

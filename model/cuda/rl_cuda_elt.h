// rl_cuda_elt — the element-wise and small kernels of the decoder and the optimizer on the
// device (rl_cuda_elt.cu): embedding and its backward, RMSNorm (also per head: qwen3's q/k
// norm), RoPE from rl_rope_table's table, SwiGLU, residual add and accumulate, LoRA dropout,
// AdamW, the gradient's sum of squares and the clip's scale, and the scalar value/score head.
// Each matches its CPU kernel (model/rl_layers.h, trainer/rl_optim.c, model/rl_head.c): same
// semantics, same layouts, and, where the CPU's arithmetic is a fixed sequence of IEEE
// operations, the same operations in the same order (explicit __fmul_rn / __fadd_rn /
// __fdiv_rn / __fsqrt_rn: nvcc may not fuse them into FMAs), so that those results are bit for
// bit the CPU's. Not the model: it owns no memory and keeps no state; the callers (the device
// model, tests/test_cuda_elt.c) allocate every buffer.
//
// The contracts (shapes, dtypes, = or +=, what is saved) are the table's comments in
// rl_cuda_module.h, where callers read them; these are the functions behind those entries
// (hidden in the module; reached through the table). Every function queues work on the
// context's stream and returns 0, or -1 with the context's message set (bad arguments, a
// launch's error); none waits, except embedding_plan, which runs on the host.
//
// Numerics and determinism (no float atomics anywhere; every result is the same bits from run
// to run and from device to device for the same inputs and shapes):
// - Bit for bit the CPU kernel: embedding forward and backward, RoPE forward and backward,
//   residual, accumulate, dropout, AdamW, scale (elementary IEEE operations in the CPU's order).
// - SwiGLU: the CPU's exp (rl_expf, a Cephes polynomial with 2-ulp error) is ported operation
//   for operation (s_expf), so it is designed to be bit for bit the CPU's too; the tests allow
//   what CUDA's own expf would differ by (a few ulp).
// - Sums over a row (RMSNorm's sum of squares and its backward's dot product, the head's dot
//   product) accumulate in double, as the CPU does, in a fixed order (per lane, then a
//   butterfly over the warp): the result differs from the CPU's only by the order of double
//   additions, so the float results are equal or one ulp apart.
// - Sums over rows (RMSNorm's dw, the head's dw and db): the rows are cut into at most
//   RL_CUDA_ELT_CHUNKS chunks (their size a function of the row count only); a first kernel
//   writes each chunk's column sums in double into the caller's scratch, a second adds the
//   chunks in chunk order and adds the total, rounded to float, into dw. Two launches, no
//   atomics.
// - The embedding's backward: every vocabulary row is written by one thread per column, which
//   adds its gradient rows in increasing row order starting from dwte's old value: the CPU's
//   sequence of float additions, so bit for bit. The rows of each id are found by a plan built
//   on the host (embedding_plan: the rows with ids >= 0 sorted by (id, row), and where each
//   id's run starts) from the ids the host has anyway (it uploads them); the plan is uploaded
//   beside the ids.
// - The gradient's sum of squares: per-thread double sums over a grid of a fixed size for n
//   (at most RL_CUDA_ELT_SUMSQ_BLOCKS blocks), a fixed tree per block, the blocks' partials
//   (double, in the scratch) summed by one block in a fixed tree: the CPU sums in double too,
//   so they agree to about n * 2^-53 relative.
#ifndef RL_CUDA_ELT_H
#define RL_CUDA_ELT_H

#include "rl_cuda_module.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Row chunks of the column sums (RMSNorm's dw, the head's dw) and blocks of the sum of squares.
#define RL_CUDA_ELT_CHUNKS 64
#define RL_CUDA_ELT_SUMSQ_BLOCKS 1024

size_t rl_cuda_elt_scratch_doubles(int C);

int rl_cuda_elt_embedding_forward(rl_cuda_ctx_t *ctx, float *out, const int32_t *ids,
                                  const uint16_t *wte, int N, int C, int V);
int rl_cuda_elt_embedding_plan(rl_cuda_ctx_t *ctx, const int32_t *ids, int N, int V, int32_t *rows,
                               int32_t *seg, int *n_seg);
int rl_cuda_elt_embedding_backward(rl_cuda_ctx_t *ctx, float *dwte, const float *dout,
                                   const int32_t *ids, const int32_t *rows, const int32_t *seg,
                                   int n_seg, int C);

int rl_cuda_elt_rmsnorm_forward(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16, float *rstd,
                                const float *inp, const float *w, float eps, int N, int C);
int rl_cuda_elt_rmsnorm_backward(rl_cuda_ctx_t *ctx, float *dinp, float *dw, const float *dout,
                                 const float *inp, const float *w, const float *rstd, int N, int C,
                                 int accumulate, double *scratch);

int rl_cuda_elt_rope_forward(rl_cuda_ctx_t *ctx, float *out, const float *inp, const float *cs,
                             const int32_t *pos, int N, int H, int D, int n_pos);
int rl_cuda_elt_rope_backward(rl_cuda_ctx_t *ctx, float *dinp, const float *dout, const float *cs,
                              const int32_t *pos, int N, int H, int D, int n_pos, int accumulate);

int rl_cuda_elt_swiglu_forward(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16,
                               const float *gate, const float *up, size_t n);
int rl_cuda_elt_swiglu_backward(rl_cuda_ctx_t *ctx, float *dgate, float *dup, uint16_t *dgate_bf16,
                                uint16_t *dup_bf16, const float *dout, const float *gate,
                                const float *up, size_t n, int accumulate);
int rl_cuda_elt_swiglu_forward_keep(rl_cuda_ctx_t *ctx, uint16_t *out_bf16, uint16_t *gate_bf16,
                                    uint16_t *up_bf16, const float *gate, const float *up,
                                    size_t n);
int rl_cuda_elt_swiglu_backward_kept(rl_cuda_ctx_t *ctx, float *dgate, float *dup,
                                     uint16_t *dgate_bf16, uint16_t *dup_bf16, const float *dout,
                                     const uint16_t *gate_bf16, const uint16_t *up_bf16, size_t n,
                                     int accumulate);

int rl_cuda_elt_residual_forward(rl_cuda_ctx_t *ctx, float *out, const float *a, const float *b,
                                 size_t n);
int rl_cuda_elt_accumulate(rl_cuda_ctx_t *ctx, float *dst, const float *src, size_t n);
int rl_cuda_elt_dropout_forward(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16,
                                const float *inp, const float *mask, size_t n);
int rl_cuda_elt_dropout_backward(rl_cuda_ctx_t *ctx, float *dinp, const float *dout,
                                 const float *mask, size_t n, int accumulate);
// LoRA dropout's mask, made on the device: mask (n, width) fp32 = rl_lora_dropout_mask_rows's
// (model/rl_lora.c: the splitmix64 finaliser over seed, key and the element's index
// rows[r] * width + i in the caller's batch; 1/(1-p) where kept, 0 where dropped), bit for bit.
// rows (n) int32 on the device; 0 <= p < 1.
int rl_cuda_elt_dropout_mask(rl_cuda_ctx_t *ctx, float *mask, const int32_t *rows, int n, int width,
                             float p, uint64_t seed, uint64_t key);

int rl_cuda_elt_adamw_step(rl_cuda_ctx_t *ctx, float *params, const float *grads, float *m,
                           float *v, size_t n, double lr, double beta1, double beta2, double eps,
                           double weight_decay, int64_t step);
int rl_cuda_elt_sumsq(rl_cuda_ctx_t *ctx, double *out, const float *x, size_t n, int accumulate,
                      double *scratch);
int rl_cuda_elt_scale(rl_cuda_ctx_t *ctx, float *x, float c, size_t n);

int rl_cuda_elt_head_forward(rl_cuda_ctx_t *ctx, float *out, const float *hidden, const float *w,
                             const float *bias, const int32_t *rows, int n_out, int C);
int rl_cuda_elt_head_backward(rl_cuda_ctx_t *ctx, float *dhidden, float *dw, float *dbias,
                              const float *dout, const float *hidden, const float *w,
                              const int32_t *rows, int n_out, int N, int C, int accumulate,
                              double *scratch);

#ifdef __cplusplus
}
#endif
#endif

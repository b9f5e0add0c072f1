// rl_layers — the decoder's layer kernels, forward and backward, in fp32 on the CPU (llm.c
// pattern, STYLE.md §6): embedding, RMSNorm, linear, LoRA, dropout, RoPE (default + llama3),
// causal GQA attention over right-padded batches, single-query cached attention, SwiGLU,
// residual add, and the chunked logprob head. Every fast kernel has a naive `_ref` twin that
// computes the same thing in double with plain loops; the tests check the fast kernels against
// the twins and the twins' backward passes against central finite differences.
// This module is not the model: it owns no memory, knows no config beyond RoPE's, and does no
// I/O. Callers allocate every buffer (scratch sizes are given by the *_scratch_floats calls).
//
// Conventions. Shapes in comments are row-major; BT = B*T rows. Forward writes (=) its output
// unless it says "+=". Backward ACCUMULATES (+=) into every gradient it is given; a NULL
// gradient pointer skips that gradient (frozen weights). Saved values are written by forward
// and read by backward. Matmuls go through OpenBLAS (cblas_sgemm/sgemv); thread count is set
// with rl_layers_set_threads. Outputs must not alias inputs unless a comment allows it.
#ifndef RL_LAYERS_H
#define RL_LAYERS_H

#include "rl_hf.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Sets the OpenBLAS thread count used by every kernel (n <= 0: all cores).
void rl_layers_set_threads(int n);

// ---- embedding ---------------------------------------------------------------------------------
// out (BT,C) = wte[ids[i]] (wte is (V,C)); a row with ids[i] < 0 is written as zeros.
// ids are not range-checked against V: the caller validates tokens.
void rl_embedding_forward(float *out, const int32_t *ids, const float *wte, int BT, int C);
// dwte[ids[i]] += dout[i] for every row with ids[i] >= 0.
void rl_embedding_backward(float *dwte, const float *dout, const int32_t *ids, int BT, int C);

// ---- RMSNorm -----------------------------------------------------------------------------------
// out (N,C) = w * x * rstd, rstd = 1/sqrt(mean(x^2) + eps) per row; saves rstd (N) (NULL: not
// saved). out may equal inp. Per-head q_norm/k_norm: N = BT*NH, C = D.
void rl_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, float eps,
                        int N, int C);
// Accumulates dinp (N,C) and dw (C); needs the forward's inp and rstd. NULL skips.
void rl_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                         const float *w, const float *rstd, int N, int C);

// ---- linear ------------------------------------------------------------------------------------
// out (BT,OC) = inp (BT,C) @ w^T + bias;  w is (OC,C), bias is (OC) or NULL
void rl_linear_forward(float *out, const float *inp, const float *w, const float *bias, int BT,
                       int C, int OC);
// accumulates (+=) into dinp (BT,C), dw (OC,C), dbias (OC); NULL skips a gradient
void rl_linear_backward(float *dinp, float *dw, float *dbias, const float *dout,
                        const float *inp, const float *w, int BT, int C, int OC);
// The same, but dinp = dout @ w when set_inp (dinp's old contents unread: no zeroing first).
void rl_linear_backward_ex(float *dinp, float *dw, float *dbias, const float *dout,
                           const float *inp, const float *w, int BT, int C, int OC, int set_inp);
// logits (N,V) = h (N,C) @ w^T, no temperature (a linear without bias; for tests and
// rl_model_logits).
void rl_logits_forward(float *logits, const float *h, const float *w, int N, int C, int V);

// ---- LoRA --------------------------------------------------------------------------------------
// out (BT,OC) += scale * (inp @ A^T) @ B^T;  A (R,C), B (OC,R); saves xa (BT,R) = inp @ A^T.
// `inp` is the LoRA branch input: the layer input itself, or with dropout the output of
// rl_dropout_forward(x_drop, x, mask) (the base path keeps using x). Backward takes the same
// branch input; with dropout pass a zeroed scratch as dinp, then rl_dropout_backward(dx, dx_drop,
// mask) routes it into the layer input's gradient (d x_drop / dx = mask).
void rl_lora_forward(float *out, float *xa, const float *inp, const float *A, const float *B,
                     float scale, int BT, int C, int R, int OC);
// dxa = scale * dout @ B (BT,R), kept in scratch dxa (BT*R floats, overwritten);
// dinp (BT,C) += dxa @ A;  dA (R,C) += dxa^T @ inp;  dB (OC,R) += scale * dout^T @ xa.
// NULL skips dinp / dA / dB.
void rl_lora_backward(float *dinp, float *dA, float *dB, float *dxa, const float *dout,
                      const float *inp, const float *xa, const float *A, const float *B,
                      float scale, int BT, int C, int R, int OC);

// ---- dropout (inverted) ------------------------------------------------------------------------
// out (N) = inp * mask, mask[i] in {0, 1/(1-p)} built by the caller from its seeded RNG.
// out may equal inp.
void rl_dropout_forward(float *out, const float *inp, const float *mask, size_t N);
// dinp (N) += dout * mask
void rl_dropout_backward(float *dinp, const float *dout, const float *mask, size_t N);

// ---- residual ----------------------------------------------------------------------------------
// out (N) = a + b (out may equal a or b). Its backward is rl_accumulate into both inputs' grads.
void rl_residual_forward(float *out, const float *a, const float *b, size_t N);
// dst (N) += src
void rl_accumulate(float *dst, const float *src, size_t N);

// ---- RoPE (rotate_half, pairs (i, i+D/2)) -------------------------------------------------------
// inv_freq (D/2) for cfg's head_dim, rope_theta and rope scaling (default or llama3), rounded
// exactly as transformers does in float32: inv = 1 / fl(theta ^ fl(2i / D)), then the llama3
// rescale in float32 (wavelen = 2*pi/inv; > orig/low_ff: inv/factor; < orig/high_ff: inv; else
// (1-s)*inv/factor + s*inv with s = (orig/wavelen - low_ff)/(high_ff - low_ff)).
void rl_rope_inv_freq(float *inv_freq, const rl_hf_config_t *cfg);
// out (BT,NH,D) = rotate(inp) at angle pos[i] * inv_freq per row i:
//   out[j] = x[j] cos - x[j+D/2] sin,  out[j+D/2] = x[j+D/2] cos + x[j] sin  (j < D/2).
// The angle is fl(inv_freq * (float)pos) and cos/sin are fl(cos/sin in double): the same
// rounding sequence as torch fp32. out may equal inp (in place). NH may be NH or NKV.
void rl_rope_forward(float *out, const float *inp, const float *inv_freq, const int *pos, int BT,
                     int NH, int D);
// The same rotation from a table: cs (n_pos, D) holds cos of position t's angles in its first
// D/2 floats and sin in the rest (rl_rope_table, positions 0..n_pos-1); pos may be negative
// (|pos| < n_pos: the inverse rotation). Bit for bit rl_rope_forward, without a cos and sin per
// row and pair.
void rl_rope_table(float *cs, const float *inv_freq, int n_pos, int D);
void rl_rope_forward_table(float *out, const float *inp, const float *cs, const int *pos, int BT,
                           int NH, int D);
// dinp (BT,NH,D) += R(pos)^T dout (rotation by -angle). dinp must not alias dout; for an
// in-place inverse rotation call rl_rope_forward with negated positions (exactly the same).
void rl_rope_backward(float *dinp, const float *dout, const float *inv_freq, const int *pos,
                      int BT, int NH, int D);

// ---- exp ---------------------------------------------------------------------------------------
// e^x within 2 ulp (Cephes' expf polynomial; 8e-8 relative measured), without branches or a libm
// call, so that the element-wise loops calling it vectorise (SwiGLU); exact at 0; 2^-126 for x
// below -126 ln2, finite up to x = 127.5 ln2 and clamped above. Defined in rl_layers.c (test_layers
// measures its error against exp in double over a sweep).
float rl_expf(float x);

// ---- causal GQA attention over right-padded sequences ----------------------------------------
// q (B,T,NH,D), k/v (B,T,NKV,D), out (B,T,NH,D). Sequence b has lengths[b] in [0, T] real
// tokens (right padding). Query head h uses kv head h / (NH/NKV); scores scaled by 1/sqrt(D);
// query t attends to keys j <= t (so j < lengths[b] for real rows). Rows t >= lengths[b] are
// written as zeros and get zero gradients; padded k/v/q values are never read.
// Saves lse (B,NH,T): the log-sum-exp of each row's scaled scores (0 on padded rows), from which
// backward recomputes the probabilities (memory O(B*NH*T), not O(T^2)). lse may be NULL.
// scratch: rl_attention_scratch_floats(T) floats (query rows go in blocks of 64, so this is
// 2*min(T,64)*T, not T^2).
size_t rl_attention_scratch_floats(int T);
void rl_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                          const int *lengths, int B, int T, int NH, int NKV, int D,
                          float *scratch);
// Accumulates dq (B,T,NH,D), dk, dv (B,T,NKV,D); needs the forward's q, k, v, lse.
// Derivation (per b, h, with P = softmax(S), S = scale q k^T causal):
//   dv += P^T dout;  dP = dout v^T;  dS = P * (dP - rowsum(P * dP));
//   dq += scale dS k;  dk += scale dS^T q.
void rl_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *lse, const int *lengths,
                           int B, int T, int NH, int NKV, int D, float *scratch);

// The same over packed sequences (no padding rows): sequence b occupies rows
// starts[b]..starts[b+1]-1 of q (N,NH,D), k/v (N,NKV,D), out (N,NH,D), N = starts[B]; lse (N*NH)
// holds head h of sequence b at lse[starts[b]*NH + h*len_b + t]. scratch:
// rl_attention_scratch_floats(longest length). Bit for bit the padded kernels' rows.
void rl_attention_forward_packed(float *out, float *lse, const float *q, const float *k,
                                 const float *v, const int *starts, int B, int NH, int NKV, int D,
                                 float *scratch);
void rl_attention_backward_packed(float *dq, float *dk, float *dv, const float *dout,
                                  const float *q, const float *k, const float *v, const float *lse,
                                  const int *starts, int B, int NH, int NKV, int D, float *scratch);

// ---- attention against a KV cache (decode and prefill) ----------------------------------------
// The cache keeps K transposed and V row-major: element d of kv head g at position p is
// kt[(g*D + d)*ldk + p] and vcache[p*ldv + g*D + d]. ldk is at least the positions' count
// rounded up to 16 (rl_attention_ldk): decode reads whole blocks of 16 keys, so the values past
// n_ctx are read (and ignored: they need not be finite). ldv >= NKV*D.
size_t rl_attention_ldk(int max_len);

// Decode: out (NH,D) = softmax(scale q_h K_g^T) V_g for each head h (g = h/(NH/NKV)), q (NH,D),
// over n_ctx >= 1 cached positions. Loops over 16-key and 16-float blocks (vector clones), no
// BLAS: a few dozen keys of a few dozen floats are less work than a BLAS call's overhead.
// Query heads sharing a kv head go two at a time (one load of K and V each).
// scratch: 2 * rl_attention_ldk(n_ctx) floats.
void rl_attention_decode(float *out, const float *q, const float *kt, size_t ldk,
                         const float *vcache, size_t ldv, int n_ctx, int NH, int NKV, int D,
                         float *scratch);

// Prefill: n queries of one sequence at consecutive positions pos0..pos0+n-1, q (n,NH,D), whose
// K/V are already in the cache; query i attends to cached positions 0..pos0+i. out (n,NH,D).
// One sgemm per head and block of 64 rows for the scores and one for the output.
// scratch: rl_attention_prefill_scratch_floats(n, pos0 + n) floats.
size_t rl_attention_prefill_scratch_floats(int n, int n_ctx);
void rl_attention_prefill(float *out, const float *q, const float *kt, size_t ldk,
                          const float *vcache, size_t ldv, int pos0, int n, int NH, int NKV, int D,
                          float *scratch);

// ---- SwiGLU ------------------------------------------------------------------------------------
// out (N) = silu(gate) * up, silu(x) = x / (1 + exp(-x)). out may equal gate or up.
void rl_swiglu_forward(float *out, const float *gate, const float *up, size_t N);
// dgate += dout * up * silu'(gate), silu'(x) = s (1 + x (1 - s)), s = sigmoid(x);
// dup += dout * silu(gate). NULL skips.
void rl_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                        const float *up, size_t N);
// The same, writing (=) dgate and dup instead of adding.
void rl_swiglu_backward_set(float *dgate, float *dup, const float *dout, const float *gate,
                            const float *up, size_t N);

// ---- logprob head (chunked over rows) ----------------------------------------------------------
// For each row i < N with targets[i] >= 0, z = h_i (C) @ w^T / temperature (w is lm_head (V,C)):
//   logp[i] = log_softmax(z)[targets[i]],  entropy[i] = -sum_v p_v log p_v (nats; NULL: skipped).
// Rows with targets[i] < 0 get logp 0 and entropy 0. Only (chunk, V) logits exist at a time
// (V may be 151,936); rows with a target are packed, so padding costs nothing.
// chunk >= 1 (capped at 256); scratch: rl_logprob_scratch_floats(chunk, C, V) floats.
size_t rl_logprob_scratch_floats(int chunk, int C, int V);
void rl_logprob_forward(float *logp, float *entropy, const float *h, const float *w,
                        const int32_t *targets, float temperature, int N, int C, int V,
                        float *scratch, int chunk);
// Recomputes each chunk's logits. With p = softmax(z), onehot = e_target:
//   dz = dlogp_i (onehot - p) - dentropy_i p (log p + H_i);  dlogits = dz / temperature;
//   dh (N,C) += dlogits @ w;  dw (V,C) += dlogits^T @ h.
// dentropy may be NULL (entropy treated as a constant); dh or dw NULL skips. Rows with
// targets < 0, or with dlogp 0 and no dentropy, are skipped.
void rl_logprob_backward(float *dh, float *dw, const float *dlogp, const float *dentropy,
                         const float *h, const float *w, const int32_t *targets,
                         float temperature, int N, int C, int V, float *scratch, int chunk);

// ---- naive double-precision twins (tests only; same semantics, plain loops) ---------------------
void rl_embedding_forward_ref(double *out, const int32_t *ids, const double *wte, int BT, int C);
void rl_embedding_backward_ref(double *dwte, const double *dout, const int32_t *ids, int BT,
                               int C);
void rl_rmsnorm_forward_ref(double *out, double *rstd, const double *inp, const double *w,
                            double eps, int N, int C);
void rl_rmsnorm_backward_ref(double *dinp, double *dw, const double *dout, const double *inp,
                             const double *w, const double *rstd, int N, int C);
void rl_linear_forward_ref(double *out, const double *inp, const double *w, const double *bias,
                           int BT, int C, int OC);
void rl_linear_backward_ref(double *dinp, double *dw, double *dbias, const double *dout,
                            const double *inp, const double *w, int BT, int C, int OC);
void rl_lora_forward_ref(double *out, double *xa, const double *inp, const double *A,
                         const double *B, double scale, int BT, int C, int R, int OC);
void rl_lora_backward_ref(double *dinp, double *dA, double *dB, const double *dout,
                          const double *inp, const double *xa, const double *A, const double *B,
                          double scale, int BT, int C, int R, int OC);
// inv_freq (D/2) in double, same formula as rl_rope_inv_freq without float rounding.
void rl_rope_inv_freq_ref(double *inv_freq, const rl_hf_config_t *cfg);
void rl_rope_forward_ref(double *out, const double *inp, const double *inv_freq, const int *pos,
                         int BT, int NH, int D);
void rl_rope_backward_ref(double *dinp, const double *dout, const double *inv_freq,
                          const int *pos, int BT, int NH, int D);
void rl_attention_forward_ref(double *out, double *lse, const double *q, const double *k,
                              const double *v, const int *lengths, int B, int T, int NH,
                              int NKV, int D);
void rl_attention_backward_ref(double *dq, double *dk, double *dv, const double *dout,
                               const double *q, const double *k, const double *v,
                               const double *lse, const int *lengths, int B, int T, int NH,
                               int NKV, int D);
void rl_attention_decode_ref(double *out, const double *q, const double *kcache,
                             const double *vcache, int n_ctx, size_t kv_stride, int NH, int NKV,
                             int D);
void rl_swiglu_forward_ref(double *out, const double *gate, const double *up, size_t N);
void rl_swiglu_backward_ref(double *dgate, double *dup, const double *dout, const double *gate,
                            const double *up, size_t N);
void rl_logprob_forward_ref(double *logp, double *entropy, const double *h, const double *w,
                            const int32_t *targets, double temperature, int N, int C, int V);
void rl_logprob_backward_ref(double *dh, double *dw, const double *dlogp, const double *dentropy,
                             const double *h, const double *w, const int32_t *targets,
                             double temperature, int N, int C, int V);

#ifdef __cplusplus
}
#endif
#endif

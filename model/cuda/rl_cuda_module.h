// rl_cuda_module — the table the CUDA backend of the model exports from its own shared module,
// librlctl_cuda.so (model/cuda/*.cu, linked to the CUDA runtime statically and to cuBLASLt).
// rl_device loads it with dlopen only when a GPU is asked for, so the rlctl binary never links
// CUDA and the same build runs on machines without it (DESIGN.md §2). Internal to model/:
// nothing outside model/ and the tests includes this.
//
// Everything here is plain C: device buffers are `void *` / typed pointers the host never
// dereferences, bf16 buffers are `uint16_t *` (the bits of a bfloat16), and a context (`ctx`)
// is one device, one stream, one cuBLASLt handle and its workspace. Every call is queued on the
// context's stream (asynchronous) unless it says it waits; every call returns 0, or -1 with
// the context's message (errmsg) saying what failed: the CUDA call, its error name and string.
// A launch's error is read (cudaGetLastError) right after the launch; an error of a kernel's
// execution surfaces at the next call that waits (sync, d2h).
#ifndef RL_CUDA_MODULE_H
#define RL_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CUDA_MODULE_ABI 1
#define RL_CUDA_MODULE_FILE "librlctl_cuda.so"
#define RL_CUDA_MODULE_SYMBOL "rl_cuda_module"
#define RL_CUDA_IPC_HANDLE 64 // bytes of an interprocess handle (cudaIpcMemHandle_t)

typedef struct {
    char name[128];       // "NVIDIA H100 80GB HBM3"
    size_t mem_total;     // bytes
    size_t mem_free;      // bytes, when asked
    int cc_major, cc_minor; // compute capability (8.0 A100, 9.0 H100/H200)
    int sms;              // multiprocessors
} rl_cuda_device_info_t;

typedef struct rl_cuda_ctx rl_cuda_ctx_t;
typedef struct rl_cuda_comm rl_cuda_comm_t; // a rank's NCCL communicator (comm_new)
typedef struct rl_cuda_graph rl_cuda_graph_t; // a captured stream's work (graph_end)
#define RL_CUDA_COMM_ID 128                 // bytes of a communicator's id (ncclUniqueId)

// cuBLASLt matmul: C (M,N) = alpha * op(A) op(B) + beta * C, row-major as everywhere in rlctl:
// op(A) (M,K), op(B) (K,N); A stored (M,K) or, transposed, (K,M); B stored (K,N) or,
// transposed, (N,K) (a Linear weight (OC,C) is B transposed: y = x W^T). A and B bf16, C fp32,
// accumulation fp32. lda/ldb/ldc: row strides in elements.
typedef struct {
    int M, N, K;
    int trans_a, trans_b;
    int lda, ldb, ldc;
    float alpha, beta;
} rl_cuda_gemm_t;

typedef struct rl_cuda_api {
    int abi;         // RL_CUDA_MODULE_ABI
    int struct_size; // sizeof(rl_cuda_module_t) as the module was built

    // ---- the devices (no context needed) ----
    // The driver's and the runtime's CUDA versions (1000 * major + 10 * minor) and the number of
    // devices this process may use (CUDA_VISIBLE_DEVICES honoured). Returns 0, or -1 with msg
    // saying what was found instead: no driver (libcuda not loadable, or too old for the
    // runtime), no device.
    int (*probe)(int *n_devices, int *driver_version, int *runtime_version, char *msg,
                 size_t msg_len);
    // What device `index` is (its free memory too). Returns 0 or -1 with msg.
    int (*device_info)(int index, rl_cuda_device_info_t *out, char *msg, size_t msg_len);

    // ---- a context: device + stream + cuBLASLt + workspace ----
    // caller owns *out; free with ctx_free. Returns 0 or -1 with msg.
    int (*ctx_new)(int device, rl_cuda_ctx_t **out, char *msg, size_t msg_len);
    void (*ctx_free)(rl_cuda_ctx_t *ctx);
    // The message of the context's last failure (borrowed; valid until the next call).
    const char *(*errmsg)(const rl_cuda_ctx_t *ctx);
    // Waits for everything queued on the context's stream; reports a kernel's execution error.
    int (*sync)(rl_cuda_ctx_t *ctx);

    // ---- memory (cudaMalloc: never managed memory) ----
    // *out: bytes of device memory (not cleared); free with dfree. Allocate once, at create
    // time: never in a step's loop.
    int (*dmalloc)(rl_cuda_ctx_t *ctx, size_t bytes, void **out);
    void (*dfree)(rl_cuda_ctx_t *ctx, void *dptr);
    // Copies bytes host -> device / device -> host; d2h waits for the stream first.
    int (*h2d)(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes);
    int (*d2h)(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes);
    // dst = byte value `v`, bytes long (cudaMemsetAsync).
    int (*dset)(rl_cuda_ctx_t *ctx, void *dst, int v, size_t bytes);

    // ---- conversions ----
    // out (n) bf16 = round-to-nearest-even(in (n) fp32), as torch's .to(bfloat16) does.
    int (*f32_to_bf16)(rl_cuda_ctx_t *ctx, uint16_t *out, const float *in, size_t n);
    // out (n) fp32 = in (n) bf16, exactly.
    int (*bf16_to_f32)(rl_cuda_ctx_t *ctx, float *out, const uint16_t *in, size_t n);

    // ---- matmul ----
    // g's C (fp32) = alpha op(A) op(B) + beta C; A, B bf16 (see rl_cuda_gemm_t).
    int (*gemm)(rl_cuda_ctx_t *ctx, const rl_cuda_gemm_t *g, const uint16_t *A,
                const uint16_t *B, float *C);

    // ---- a Linear's bias (rl_cuda_lin.h) ----
    // out (N, OC) fp32, row stride ldo: every row = bias (OC) fp32 (then a gemm with beta 1).
    int (*bias_rows)(rl_cuda_ctx_t *ctx, float *out, int ldo, const float *bias, int N, int OC);
    // dbias (OC) fp32 += column sums of dout (N, OC) fp32 (row stride ldd), in row order.
    int (*bias_grad)(rl_cuda_ctx_t *ctx, float *dbias, const float *dout, int ldd, int N, int OC);

    // ---- vocabulary head and sampling (rl_cuda_head.cu; contracts in rl_cuda_head.h) ----
    // Bytes of the head's scratch for `chunk` rows: (chunk,V) fp32 logits + (chunk,V) bf16
    // dlogits + (chunk,C) bf16 h rows + (chunk,C) fp32 dh rows, each 256-aligned; 0 if an arg < 1.
    size_t (*logprob_scratch_bytes)(int chunk, int C, int V);
    // The fused chunked logprob head (rl_logprob_forward's semantics): for rows with
    // targets[i] >= 0, z = h_i @ w^T / temperature, logp[i] = log_softmax(z)[targets[i]],
    // entropy[i] = -sum p log p; rows with targets < 0 get 0. logp (N) fp32 =, entropy (N)
    // fp32 = or NULL, h (N,C) bf16, w (V,C) bf16 (lm_head), targets (N) int32, temperature > 0,
    // scratch: logprob_scratch_bytes(chunk, C, V) bytes. Nothing is saved (backward recomputes).
    int (*logprob_forward)(rl_cuda_ctx_t *ctx, float *logp, float *entropy, const uint16_t *h,
                           const uint16_t *w, const int32_t *targets, float temperature, int N,
                           int C, int V, void *scratch, int chunk);
    // Its backward (rl_logprob_backward's semantics), logits recomputed chunk by chunk:
    // dz = dlogp_i (onehot - p) - dentropy_i p (log p + H_i), dlogits = dz / T rounded to bf16;
    // dh (N,C) fp32 += dlogits @ w; dw (V,C) fp32 += dlogits^T @ h (NULL skips either).
    // dlogp (N) fp32, dentropy (N) fp32 or NULL; rows with targets < 0, or dlogp 0 and no
    // dentropy, contribute nothing (their dh rows are untouched).
    int (*logprob_backward)(rl_cuda_ctx_t *ctx, float *dh, float *dw, const float *dlogp,
                            const float *dentropy, const uint16_t *h, const uint16_t *w,
                            const int32_t *targets, float temperature, int N, int C, int V,
                            void *scratch, int chunk);
    // logits (S,V) fp32 = h (S,C) bf16, row stride ldh, @ w (V,C) bf16 ^T; divided by
    // temperature when > 0, raw when 0 (the sampler's decode step).
    int (*logits)(rl_cuda_ctx_t *ctx, float *logits, const uint16_t *h, int ldh,
                  const uint16_t *w, float temperature, int S, int C, int V);
    // One token per row of raw logits (S,V) fp32: greedy at temperature 0 (argmax, lowest id on
    // ties), else temperature -> top-k -> top-p (renormalised) -> draw with u =
    // rl_cuda_uniform(keys[s], steps[s]) (Philox4x32-10; keys, steps (S) uint64). tokens (S)
    // int32 =; logprobs (S) fp32 = log_softmax(logits / T)[token] over the full vocabulary (T = 1
    // when greedy), or NULL.
    int (*sample)(rl_cuda_ctx_t *ctx, int32_t *tokens, float *logprobs, const float *logits,
                  float temperature, int top_k, float top_p, const uint64_t *keys,
                  const uint64_t *steps, int S, int V);

    // ---- element-wise and small kernels (rl_cuda_elt.cu; numerics in rl_cuda_elt.h) ----
    // Each matches its CPU kernel (rl_layers.h, rl_optim.h, rl_head.h). All buffers are device
    // buffers except where an entry says host; ints are int32. n = 0 / N = 0 does nothing
    // (a set output of sumsq is still written). Outputs must not alias inputs unless allowed.
    //
    // Doubles of device scratch that rmsnorm_backward (with dw), head_backward (with dw) for rows
    // of C columns, and sumsq need (RL_CUDA_ELT_CHUNKS * C, at least RL_CUDA_ELT_SUMSQ_BLOCKS
    // + 1); one buffer, allocated once for the largest C, serves every call on one stream.
    size_t (*elt_scratch_doubles)(int C);
    // out (N,C) fp32 = wte[ids[i]], wte (V,C) bf16, ids (N) int32; a row with ids[i] < 0 is
    // zeros (rl_embedding_forward), one with ids[i] >= V is NaN (a caller's bug made visible
    // instead of a read outside wte).
    int (*embedding_forward)(rl_cuda_ctx_t *ctx, float *out, const int32_t *ids,
                             const uint16_t *wte, int N, int C, int V);
    // HOST, no device work: the plan of embedding_backward from the host's copy of ids (N):
    // rows (N, host int32) = the rows i with ids[i] >= 0, sorted by (ids[i], i); seg (N + 1,
    // host int32): run u of equal ids is rows[seg[u] .. seg[u+1]-1]; *n_seg runs. Upload rows
    // and seg (the first *n_seg + 1 entries) for embedding_backward. -1 when an id is >= V.
    int (*embedding_plan)(rl_cuda_ctx_t *ctx, const int32_t *ids, int N, int V, int32_t *rows,
                          int32_t *seg, int *n_seg);
    // dwte (V,C) fp32 += dout (N,C) fp32 row i into row ids[i], for the rows of the plan (ids,
    // rows, seg: device copies; ids < 0 skipped): rl_embedding_backward bit for bit (each
    // vocabulary row adds its rows in increasing order; no atomics).
    int (*embedding_backward)(rl_cuda_ctx_t *ctx, float *dwte, const float *dout,
                              const int32_t *ids, const int32_t *rows, const int32_t *seg,
                              int n_seg, int C);
    // RMSNorm over N rows of C (per head: N = rows * heads, C = D): y = w * (x * rstd),
    // rstd = 1/sqrt(mean(x^2) + eps). inp (N,C) fp32, w (C) fp32. Writes out (N,C) fp32 and/or
    // out_bf16 (N,C) bf16 (= round-to-nearest-even of the fp32 y; either may be NULL), saves
    // rstd (N) fp32 (NULL: not saved). out may equal inp.
    int (*rmsnorm_forward)(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16, float *rstd,
                           const float *inp, const float *w, float eps, int N, int C);
    // Backward of rmsnorm_forward from dout (N,C) fp32, the forward's inp (N,C) and rstd (N)
    // fp32, w (C): dinp (N,C) fp32 += (accumulate) or = (the old contents unread) dx;
    // dw (C) fp32 += sum over rows of dout * x * rstd. NULL skips dinp / dw. scratch: device,
    // elt_scratch_doubles(C) doubles, needed with dw.
    int (*rmsnorm_backward)(rl_cuda_ctx_t *ctx, float *dinp, float *dw, const float *dout,
                            const float *inp, const float *w, const float *rstd, int N, int C,
                            int accumulate, double *scratch);
    // RoPE (rotate_half, pairs (j, j + D/2)) from rl_rope_table's table cs (n_pos, D) fp32
    // (cos in the first D/2 floats of a row, sin in the rest): out (N,H,D) fp32 = R(pos[i]) inp
    // (N,H,D) fp32, row i at position pos (N) int32, |pos| < n_pos (negative: the inverse
    // rotation; past n_pos: NaN). rl_rope_forward_table bit for bit. out may equal inp. D even.
    int (*rope_forward)(rl_cuda_ctx_t *ctx, float *out, const float *inp, const float *cs,
                        const int32_t *pos, int N, int H, int D, int n_pos);
    // Its backward: dinp (N,H,D) fp32 += (accumulate: rl_rope_backward bit for bit) or =
    // (rl_rope_forward_table at -pos bit for bit) R(pos)^T dout (N,H,D) fp32. dinp may equal
    // dout when setting (in place).
    int (*rope_backward)(rl_cuda_ctx_t *ctx, float *dinp, const float *dout, const float *cs,
                         const int32_t *pos, int N, int H, int D, int n_pos, int accumulate);
    // out (n) = silu(gate) * up, gate and up fp32 (rl_swiglu_forward): out fp32 and/or out_bf16
    // bf16 (either may be NULL). out may equal gate or up.
    int (*swiglu_forward)(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16, const float *gate,
                          const float *up, size_t n);
    // Its backward from dout (n) fp32 and the forward's gate, up (n) fp32: dgate, dup (n) fp32
    // += (accumulate: rl_swiglu_backward) or = (rl_swiglu_backward_set); dgate_bf16 / dup_bf16
    // (n) bf16 = the rounded final dgate / dup (for the matmuls behind; the gradient itself when
    // dgate / dup is NULL). Any output may be NULL.
    int (*swiglu_backward)(rl_cuda_ctx_t *ctx, float *dgate, float *dup, uint16_t *dgate_bf16,
                           uint16_t *dup_bf16, const float *dout, const float *gate,
                           const float *up, size_t n, int accumulate);
    // out (n) fp32 = a + b, a and b fp32 (out may equal a or b).
    int (*residual_forward)(rl_cuda_ctx_t *ctx, float *out, const float *a, const float *b,
                            size_t n);
    // dst (n) fp32 += src (n) fp32 (the residual's backward, gradient sums).
    int (*accumulate)(rl_cuda_ctx_t *ctx, float *dst, const float *src, size_t n);
    // LoRA dropout: out (n) = inp * mask, inp and mask (n) fp32 (mask in {0, 1/(1-p)}, the
    // caller's): out fp32 and/or out_bf16 bf16 (either NULL). out may equal inp.
    int (*dropout_forward)(rl_cuda_ctx_t *ctx, float *out, uint16_t *out_bf16, const float *inp,
                           const float *mask, size_t n);
    // dinp (n) fp32 += (accumulate: rl_dropout_backward) or = dout * mask, both (n) fp32.
    int (*dropout_backward)(rl_cuda_ctx_t *ctx, float *dinp, const float *dout,
                            const float *mask, size_t n, int accumulate);
    // One AdamW update (rl_optim.h's formula, bit for bit rl_optim_step): params, m, v (n) fp32
    // updated in place from grads (n) fp32 (read only), at rate lr, for step count `step` >= 1
    // (the count after incrementing: rl_optim_steps after the CPU's step).
    int (*adamw_step)(rl_cuda_ctx_t *ctx, float *params, const float *grads, float *m, float *v,
                      size_t n, double lr, double beta1, double beta2, double eps,
                      double weight_decay, int64_t step);
    // *out (one device double) = (or += with accumulate) sum of x[i]^2, x (n) fp32, summed in
    // double in a fixed order (the same bits every run): the clip's norm is sqrt of the sum of
    // every part's (read *out back with d2h). scratch: elt_scratch_doubles(.) doubles.
    int (*sumsq)(rl_cuda_ctx_t *ctx, double *out, const float *x, size_t n, int accumulate,
                 double *scratch);
    // x (n) fp32 *= c (the clip: c = (float)(max_norm / (norm + 1e-6)) when below 1).
    int (*scale)(rl_cuda_ctx_t *ctx, float *x, float c, size_t n);
    // The scalar head (rl_head.h): out (n_out) fp32 = hidden[r] . w + bias with r = rows[k]
    // (rows (n_out) int32, NULL: r = k), 0 where r < 0; hidden (N,C) fp32, w (C) fp32, bias
    // one fp32 or NULL (0). The dot product in double, rounded once. Critic values: rows[b*T+t]
    // = b*T+t-1 for 1 <= t < lengths[b], else -1; reward scores: rows[b] = b*T+lengths[b]-1.
    int (*head_forward)(rl_cuda_ctx_t *ctx, float *out, const float *hidden, const float *w,
                        const float *bias, const int32_t *rows, int n_out, int C);
    // Its backward from dout (n_out) fp32; each row of hidden (N,C) is read by at most one
    // output. dhidden (N,C) fp32: row r(k) += (accumulate) dout[k] * w, or, without
    // accumulate, row r(k) = dout[k] * w and every other row 0 (rl_head_*_backward);
    // dw (C) fp32 += sum_k dout[k] hidden[r(k)] (double, rounded once; terms with dout 0
    // skipped); dbias (1) fp32 += sum_k dout[k] over r(k) >= 0. NULL skips a gradient.
    // scratch: elt_scratch_doubles(C) doubles, needed with dw.
    int (*head_backward)(rl_cuda_ctx_t *ctx, float *dhidden, float *dw, float *dbias,
                         const float *dout, const float *hidden, const float *w,
                         const int32_t *rows, int n_out, int N, int C, int accumulate,
                         double *scratch);

    // ---- attention (rl_cuda_attn.h: causal GQA, fp32; scale 1/sqrt(D); 1 <= D <= 256) ----
    // Training forward over B >= 1 packed sequences: sequence b is rows starts[b]..starts[b+1]-1
    // (starts (B+1) int32 on the device, N = starts[B]) of q (N,NH,D), k/v (N,NKV,D), all fp32.
    // Writes (=) out (N,NH,D) fp32 and lse (N*NH) fp32 in the CPU's packed layout
    // (lse[starts[b]*NH + h*len_b + t]; NULL: not written). Saved for backward: q k v out lse.
    // rl_attention_forward_packed's semantics; no (T,T) matrix.
    int (*attn_forward)(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q,
                        const float *k, const float *v, const int *starts, int B, int N, int NH,
                        int NKV, int D);
    // Training backward: accumulates (+=) dq (N,NH,D), dk, dv (N,NKV,D) fp32 (NULL: skipped) from
    // dout (N,NH,D) and the forward's q, k, v, out, lse (all fp32); delta (N*NH) fp32 is scratch
    // (overwritten). rl_attention_backward_packed's semantics; deterministic (no atomics).
    int (*attn_backward)(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv, float *delta,
                         const float *dout, const float *q, const float *k, const float *v,
                         const float *out, const float *lse, const int *starts, int B, int N,
                         int NH, int NKV, int D);
    // KV cache (per layer: K and V each (n_slots, max_len, NKV, D) fp32, not transposed): writes
    // (=) row i of k/v (n,NKV,D) fp32 at slot slots[i], position pos[i] (int32 (n) on the device;
    // rows out of range are not written).
    int (*attn_cache_write)(rl_cuda_ctx_t *ctx, float *kcache, float *vcache, const float *k,
                            const float *v, const int *slots, const int *pos, int n, int n_slots,
                            int max_len, int NKV, int D);
    // Batched decode: writes (=) out (S,NH,D) fp32, row s = attention of q row s (S,NH,D) over
    // positions 0..n_ctx[s]-1 of slot slots[s] (slots NULL: slot s; int32 (S) on the device);
    // rl_attention_decode's semantics. Rows with a bad slot or n_ctx outside 1..max_len: NaN.
    int (*attn_decode)(rl_cuda_ctx_t *ctx, float *out, const float *q, const float *kcache,
                       const float *vcache, const int *slots, const int *n_ctx, int S, int NH,
                       int NKV, int D, int n_slots, int max_len);
    // Batched prefill: run b is q rows q_starts[b]..q_starts[b+1]-1 (q (N,NH,D) fp32) at
    // positions pos0[b].. of slot slots[b], attending to cached positions 0..pos0[b]+i (int32
    // arrays on the device); writes (=) out (N,NH,D) fp32. rl_attention_prefill's semantics.
    // Runs with a bad slot or pos0 + n_b > max_len: NaN.
    int (*attn_prefill)(rl_cuda_ctx_t *ctx, float *out, const float *q, const float *kcache,
                        const float *vcache, const int *q_starts, const int *slots,
                        const int *pos0, int B, int N, int NH, int NKV, int D, int n_slots,
                        int max_len);

    // ---- appended (the table only grows: struct_size tells a loader what a module has) ----
    // Copies bytes device -> device on the stream (cudaMemcpyAsync; the KV cache's slot copies).
    int (*d2d)(rl_cuda_ctx_t *ctx, void *dst, const void *src, size_t bytes);
    // `sample` with each draw's row and uniform given: draw s reads row rows[s] (int32) of
    // logits and draws with u[s] (double in [0, 1); may be NULL when greedy). The sampler's
    // draw on the device: its streams stay the host's, and a prompt's samples share one row.
    int (*sample_rows)(rl_cuda_ctx_t *ctx, int32_t *tokens, float *logprobs, const float *logits,
                       const int32_t *rows, const double *u, float temperature, int top_k,
                       float top_p, int S, int V);
    // Between two visible devices a != b (no context needed): *access = 1 when a can read and
    // write b's memory directly (peer access), and *rank = the driver's performance rank of
    // that link (0 the best; cudaDevP2PAttrPerformanceRank). The runtime does not say whether
    // the link is NVLink or PCIe. Returns 0, or -1 with msg.
    int (*peer)(int a, int b, int *access, int *rank, char *msg, size_t msg_len);
    // LoRA dropout's mask on the device (rl_cuda_elt_dropout_mask): mask (n, width) fp32 =
    // rl_lora_dropout_mask_rows(rows, n, width, p, seed, key) bit for bit, rows (n) int32.
    int (*dropout_mask)(rl_cuda_ctx_t *ctx, float *mask, const int32_t *rows, int n, int width,
                        float p, uint64_t seed, uint64_t key);
    // ---- interprocess memory (CUDA IPC): weights another process on this machine reads ----
    // handle (RL_CUDA_IPC_HANDLE bytes) = cudaIpcGetMemHandle of dptr, the start of a buffer
    // dmalloc returned. Returns 0 or -1 with errmsg.
    int (*ipc_export)(rl_cuda_ctx_t *ctx, void *dptr, unsigned char *handle);
    // *dptr = another process's exported buffer, mapped for this context's device
    // (cudaIpcOpenMemHandle; on another device, with peer access enabled lazily) until
    // ipc_close. The exporter keeps it alive, and does not write it while this process reads.
    // Returns 0 or -1 with errmsg (a handle of this process, of a buffer freed since, of a
    // process gone, or a device that cannot reach it).
    int (*ipc_open)(rl_cuda_ctx_t *ctx, const unsigned char *handle, void **dptr);
    int (*ipc_close)(rl_cuda_ctx_t *ctx, void *dptr);
    // ---- collectives between devices (NCCL; rl_cuda_nccl.h): a mesh's ranks on GPUs of their
    // own. NCCL is not linked: the library is opened on first use (RLCTL_NCCL_LIBRARY, else
    // libnccl.so.2), so the module loads where it is missing; each entry then fails saying so.
    // id (RL_CUDA_COMM_ID bytes) = a fresh ncclGetUniqueId, made by one rank and handed to the
    // others (no context needed); id NULL: only whether NCCL opens (the other ranks: an id starts
    // a listener that waits for its group). Returns 0 or -1 with msg.
    int (*comm_id)(unsigned char *id, char *msg, size_t msg_len);
    // *out = this process's communicator (rank of nranks, on the context's device) of the group
    // that shares id: ncclCommInitRank, which waits until every rank has called it. caller owns
    // *out; free with comm_free. Returns 0 or -1 with errmsg.
    int (*comm_new)(rl_cuda_ctx_t *ctx, const unsigned char *id, int nranks, int rank,
                    rl_cuda_comm_t **out);
    void (*comm_free)(rl_cuda_comm_t *comm);
    // In place, queued on the context's stream, every rank calling alike (the same counts, the
    // same order). reduce_scatter: buf (nranks * count floats) summed over the ranks; this
    // rank's block buf[rank * count .. +count) holds its part of the sum (the other blocks are
    // left undefined). all_gather: every rank's block buf[r * count .. +count) to every rank.
    // sum_f64: buf (n doubles) = the sum over the ranks. Return 0 or -1 with errmsg.
    int (*comm_reduce_scatter)(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, float *buf, size_t count);
    int (*comm_all_gather)(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, float *buf, size_t count);
    int (*comm_sum_f64)(rl_cuda_ctx_t *ctx, rl_cuda_comm_t *comm, double *buf, size_t n);
    // ---- SwiGLU keeping gate and up in bf16 (the training forward's activations, half the
    // bytes of fp32) ----
    // swiglu_forward's out_bf16 bit for bit, and gate_bf16 / up_bf16 (n) = gate / up rounded
    // to bf16 (any output may be NULL).
    int (*swiglu_forward_keep)(rl_cuda_ctx_t *ctx, uint16_t *out_bf16, uint16_t *gate_bf16,
                               uint16_t *up_bf16, const float *gate, const float *up, size_t n);
    // swiglu_backward from those bf16 gate and up: bit for bit swiglu_backward given their
    // fp32 values.
    int (*swiglu_backward_kept)(rl_cuda_ctx_t *ctx, float *dgate, float *dup, uint16_t *dgate_bf16,
                                uint16_t *dup_bf16, const float *dout, const uint16_t *gate_bf16,
                                const uint16_t *up_bf16, size_t n, int accumulate);
    // ---- CUDA graphs: the context's stream captured once, launched many times ----
    // graph_begin: the kernels and matmuls queued on the context's stream from now on are
    // recorded with their arguments, not run (cudaStreamBeginCapture, thread-local mode). Until
    // graph_end nothing else may touch the stream or allocate (h2d, d2h, dset, sync, dmalloc
    // fail and spoil the capture). graph_end: the capture ends; *out = its executable graph
    // (caller owns it; graph_free), or NULL and -1 with errmsg when the capture failed (the
    // context goes on: the recorded work simply never runs). graph_launch runs it on the
    // context's stream, as if its work were queued again with the same arguments.
    int (*graph_begin)(rl_cuda_ctx_t *ctx);
    int (*graph_end)(rl_cuda_ctx_t *ctx, rl_cuda_graph_t **out);
    int (*graph_launch)(rl_cuda_ctx_t *ctx, rl_cuda_graph_t *graph);
    void (*graph_free)(rl_cuda_graph_t *graph);
    // ---- attention in bf16 (rl_cuda_attn.h): the tensor cores' forward and prefill, and the
    // backward that matches them ----
    // attn_forward's and attn_prefill's contracts with q, k and v rounded to bf16 and P to bf16
    // for P V (fp32 accumulation, lse of the rounded inputs' scores): the model's attention.
    int (*attn_forward_bf16)(rl_cuda_ctx_t *ctx, float *out, float *lse, const float *q,
                             const float *k, const float *v, const int *starts, int B, int N,
                             int NH, int NKV, int D);
    // attn_prefill_bf16 reads a bf16 cache (the same layout, bf16 elements; attn_cache_write_bf16
    // writes it): the values the forward would round them to, half the bytes.
    int (*attn_prefill_bf16)(rl_cuda_ctx_t *ctx, float *out, const float *q, const uint16_t *kcache,
                             const uint16_t *vcache, const int *q_starts, const int *slots,
                             const int *pos0, int B, int N, int NH, int NKV, int D, int n_slots,
                             int max_len);
    // attn_backward's contract with q, k and v rounded to bf16 as they are read (the scores and
    // P that attn_forward_bf16 saw), and up to head_dim 128 on the tensor cores with dout, P and
    // dS rounded to bf16 for the products (FlashAttention-2's bf16 backward).
    int (*attn_backward_bf16)(rl_cuda_ctx_t *ctx, float *dq, float *dk, float *dv, float *delta,
                              const float *dout, const float *q, const float *k, const float *v,
                              const float *out, const float *lse, const int *starts, int B, int N,
                              int NH, int NKV, int D);
    // attn_cache_write into a bf16 cache: each element rounded to bf16 (to nearest even).
    int (*attn_cache_write_bf16)(rl_cuda_ctx_t *ctx, uint16_t *kcache, uint16_t *vcache,
                                 const float *k, const float *v, const int *slots, const int *pos,
                                 int n, int n_slots, int max_len, int NKV, int D);
    // attn_decode over a bf16 cache: its arithmetic (fp32 on the CUDA cores, q as given) on the
    // cache's values. Not the model's (its steps take attn_prefill_bf16, whose bits a decode step
    // shares with a prefill): bench_gpu times the two, which decides.
    int (*attn_decode_bf16c)(rl_cuda_ctx_t *ctx, float *out, const float *q, const uint16_t *kcache,
                             const uint16_t *vcache, const int *slots, const int *n_ctx, int S,
                             int NH, int NKV, int D, int n_slots, int max_len);
} rl_cuda_module_t;

// The module's one export (RL_CUDA_MODULE_SYMBOL).
typedef const rl_cuda_module_t *(*rl_cuda_module_fn)(void);

#ifdef __cplusplus
}
#endif
#endif

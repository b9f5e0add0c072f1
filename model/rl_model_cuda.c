// rl_model_cuda — the device half of rl_model_t (see rl_model_cuda.h): rl_model.c's forward and
// backward, layer for layer, queued on one CUDA context through the module's table. Host C: it
// never includes a CUDA header. The layer functions below read side by side with rl_model.c's
// s_layer_forward / s_layer_backward: the same calls in the same order, with the dtypes of the
// device (docs/gpu.md): a matmul's input is bf16, produced by the kernel before it (the norms and
// SwiGLU write it, the rest is converted once), its output fp32; everything else is fp32.
#include "rl_model_cuda.h"

#include "cuda/rl_cuda_module.h"
#include "rl_device.h"
#include "rl_err.h"
#include "rl_fault.h"
#include "rl_layers.h"
#include "rl_log.h"
#include "rl_lora.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Every device buffer, and every tensor inside one, starts at a multiple of S_ALIGN bytes: the
// alignment cuBLASLt's heuristics assume for its operands (and cudaMalloc gives).
#define S_ALIGN ((size_t)256)
// A trainable tensor starts at a multiple of S_TALIGN elements, so that its fp32 master and its
// bf16 copy (at the same element offset) both start S_ALIGN-aligned.
#define S_TALIGN ((size_t)128)
// Host rows of bf16 a frozen tensor is converted and uploaded in (4 MiB).
#define S_STAGE ((size_t)1 << 21)

enum { S_Q = 0, S_K, S_V, S_O, S_GATE, S_UP, S_DOWN };

// A tensor on the device: fp32 values (norms and biases; with a trainable tensor its master),
// the bf16 copy the matmuls read (matmul weights; NULL otherwise), and its fp32 gradient (a
// trainable tensor of a model that trains; NULL otherwise). All NULL: absent (a bias the
// architecture lacks).
typedef struct {
    float *f;
    uint16_t *h;
    float *g;
} s_dt_t;

// The fields of rl_layer_params_t by index (all float *): a device layer is an array of them.
enum { S_NF = (int)(sizeof(rl_layer_params_t) / sizeof(float *)) };
#define S_FI(field) ((int)(offsetof(rl_layer_params_t, field) / sizeof(float *)))

typedef struct {
    s_dt_t t[S_NF];
} s_dlayer_t;
#define S_W(dl, field) (&(dl)->t[S_FI(field)])

// One tensor of the host model and where it lives on the device, for push and pull.
typedef struct {
    float *host;      // the host's fp32 values
    float *host_grad; // the host's gradient array (a trainable tensor with gradients) or NULL
    size_t n;         // elements
    int trainable;    // in the trainable allocations (fp32 master, bf16 copy, gradient)
    s_dt_t *dt;       // its device pointers
    int layer;        // a frozen tensor of a sharded layer (ZeRO-3): its layer, else -1
    size_t off;       // and its byte offset in the layer's block
    int unit;         // a trainable tensor's unit (self->units), else -1
    size_t t_at;      // and its offset in the trainable layout (floats; tmem's without mshard)
    int vec;          // a trainable 1-D tensor (a norm's weight, a bias): read in fp32
    size_t v_at;      // a vector of a gathered layer (at_use): its whole fp32 at lvec + v_at
    size_t h_at;      // a trainable tensor's offset in the host's flat trainable array
                      // (rl_model_trainable), SIZE_MAX when it is not in it
} s_tensor_t;

// Units of the trainable tensors for a group's ZeRO-2: runs of consecutive tensors of tmem with
// the same key (S_UE the embedding, S_UN the final norm, S_UH the head, l >= 0 layer l's own).
enum { S_UH = -3, S_UE = -2, S_UN = -1 };
typedef struct {
    int key;
    size_t lo, n; // floats [lo, lo + n) of tmem (the tensors and the gaps between them)
    size_t part;  // a rank's part: ceil(n / ranks) rounded up to S_TALIGN (the last one padded)
    size_t at;    // this rank's part's offset in gacc, mmem and vmem
    int in_ebuf;  // its gradients in ebuf (the tied embedding: written at the backward's start
                  // and end), else ubuf
    int sharded;  // its masters kept only as this rank's part (mpart + ro; mshard)
    int at_use;   // sharded and its bf16 copy gathered whole into hbuf before it is computed (a
                  // layer: s_gather), its vectors' fp32 kept whole in lvec; a sharded root (the
                  // embedding, the head) keeps its bf16 copy whole at tbf + bo instead; both made
                  // again after each step
    size_t vn;    // its vectors' floats (each S_TALIGN-aligned)
    int whole_h;  // its bf16 copy whole at tbf + bo: every unit without mshard, the sharded
                  // roots with it (the final norm's bf16 copy is read by nothing)
    size_t ro;    // not sharded: its whole masters at tmem + ro (n floats; without mshard lo)
    size_t bo;    // whole_h: its bf16 copy's offset in tbf (without mshard bo = ro = lo)
} s_unit_t;

// One layer's saved activations on the device. N = packed rows; QD = NH*D, KVD = NKV*D. The
// fp32 tensors are rl_model.c's s_act_t; the matmul inputs are kept only in bf16 (ln1, att_h,
// ln2, act), which is what the weight gradients read, and so are gate and up (computed in fp32
// into the model's gate32 / up32, the layer's SwiGLU reads them so; its backward reads the bf16
// copies, as PyTorch's bf16 autograd keeps them: half the bytes of the largest activations).
typedef struct {
    uint16_t *ln1;              // (N,C) bf16   input_layernorm output
    float *rstd1;               // (N) fp32
    float *q, *k;               // (N,QD), (N,KVD) fp32 before q_norm/k_norm (qwen3 only)
    float *rstdq, *rstdk;       // (N*NH), (N*NKV) fp32 (qwen3 only)
    float *qr, *kr, *v;         // (N,QD), (N,KVD), (N,KVD) fp32 after norm and RoPE; v
    float *lse;                 // (N*NH) fp32 attention log-sum-exp (the CPU's packed layout)
    float *att;                 // (N,QD) fp32 attention output
    uint16_t *att_h;            // (N,QD) bf16 its copy (o_proj's input)
    float *h;                   // (N,C) fp32 residual stream after attention
    uint16_t *ln2;              // (N,C) bf16 post_attention_layernorm output
    float *rstd2;               // (N) fp32
    uint16_t *gate_h, *up_h;    // (N,I) bf16 each (a model that trains; else NULL)
    uint16_t *act;              // (N,I) bf16 silu(gate) * up (down_proj's input)
    uint16_t *xa[RL_LORA_NMOD]; // (N,R) bf16 LoRA x A^T per targeted module
} s_act_t;

struct rl_model_cuda {
    const rl_cuda_module_t *cu;
    rl_cuda_ctx_t *ctx;
    int device;
    rl_model_t *host;
    rl_hf_config_t cfg;
    int tune, recompute;
    int C, I, NH, NKV, D, QD, KVD, V, L, R, maxin;
    int rows;  // packed tokens the buffers hold (opts.device_rows)
    int chunk; // rows of the vocabulary head at a time
    int has_head;
    int lora_targets; // the adapter's modules (0: no adapter)
    float plan_p;     // a plan's LoRA dropout (no host model to read it from)
    int infer;        // rl_model_opts_t.device_infer: no gradients, no moments, no backward
    int host_optim;   // rl_model_opts_t.device_host_optim: gradients, no moments
    uint64_t seed;    // LoRA dropout masks (rl_model_opts_t.seed)

    // ---- parameters
    s_dt_t embed, norm, head; // head = embed when tied (the same pointers)
    s_dlayer_t *layers;       // [L]
    s_dt_t *lora_a, *lora_b;  // [L * 7]: A (R,in) and B (out,R) of module m of layer l
    s_tensor_t *tensors;      // [n_tensors] every tensor, for push and pull
    int n_tensors;
    void *wmem;         // frozen tensors: bf16 (2-D) or fp32 (1-D), each aligned
    float *tmem,
        *gmem; // trainable masters and gradients (t_n floats each; gaps 0); a group: no gmem
    float *mmem, *vmem; // AdamW's moments (pn floats each: t_n, or a group's parts; gaps 0)
    uint16_t *tbf;      // bf16 copies of tmem (the same element offsets without mshard)
    size_t t_n, w_bytes;
    // a mesh's group (opts.device_comm_id; NULL: none, ranks 1): ZeRO-2 by units. Unit u's floats
    // of tmem are split in `ranks` parts; rank r owns part r of each unit: its summed gradients
    // (gacc + at), its moments (mmem, vmem + at) and its AdamW update. A unit's gradients are
    // written into its buffer (ubuf, or ebuf), zeroed before its backward; after it they are
    // reduce-scattered over the group and this rank's part added into gacc. After AdamW every
    // rank's updated part is all-gathered back into tmem.
    rl_cuda_comm_t *comm;
    int ranks, rank;
    s_unit_t *units; // [n_units] in tmem order
    int n_units;
    size_t pn;         // gacc's, mmem's and vmem's floats (no group: t_n)
    size_t ub_n, eb_n; // ubuf's and ebuf's floats (ranks * the largest part of their units)
    float *gacc, *ubuf, *ebuf;
    // ZeRO-3 of the masters (opts.device_shard_masters, a group, tune FULL): every unit's fp32
    // masters but the final norm's are only this rank's part (mpart + ro). Before a layer is
    // computed each rank rounds its part to bf16 and the group all-gathers the layer's bf16 copy
    // into hbuf (wb_n elements; s_gather); its matrices point there. Its vectors (norms, biases:
    // read in fp32) are kept whole in lvec (lv_n floats), and the embedding's and the head's bf16
    // copies whole in tbf (their fp32 is read by nothing); both made again from the parts
    // gathered in fp32 after each step (s_part_gather). tmem then holds the final norm (r_n
    // floats), tbf the embedding and the head (b_n); without mshard r_n = b_n = t_n, the whole
    // trainable array.
    int mshard;
    // A full-tuning model that only infers (device_infer, one rank: a sampler) keeps no fp32
    // masters (r_n 0): its matrices' bf16 copies whole in tbf, its vectors' fp32 whole in lvec,
    // what a forward reads; new weights are rounded into them as they arrive (push, load, IPC).
    int lean;
    size_t r_n, b_n, wb_n, mp_n, lv_n; // tmem's, tbf's, hbuf's, mpart's, lvec's elements
    float *mpart, *lvec;
    uint16_t *hbuf;
    // ZeRO-3 of the frozen layers (opts.device_shard_id; sranks 1: none): every layer's frozen
    // tensors are laid out alike in a block of lbytes; this rank keeps bytes [srank * sbytes,
    // + sbytes) of each block (shards: L of them) and all-gathers a layer into gbuf (sranks *
    // sbytes) before computing it; every layer's frozen device pointers point into gbuf. Both in
    // wmem, at byte offsets shards_at and gbuf_at.
    rl_cuda_comm_t *scomm;
    int sranks, srank;
    int gathered; // the layer gbuf holds (-1: none)
    size_t lbytes, sbytes, shards_at, gbuf_at;
    char *shards, *gbuf;
    void *ipc_src; // another process's tmem, mapped (rl_model_cuda_ipc_load); NULL: none
    unsigned char ipc_handle[RL_CUDA_IPC_HANDLE]; // ipc_src's handle

    // ---- activations and scratch: one allocation (amem) for `rows` tokens
    void *amem;
    size_t a_bytes;
    s_act_t *acts; // [sets]: one per layer when a backward follows, else one
    int sets;
    float *x;              // (L+1) x (N,C) fp32 layer inputs, each slot aligned (s_x); x[L] the
                           // final norm's input
    float *lnf, *rstdf;    // (N,C), (N) fp32 final norm
    uint16_t *lnf_h;       // (N,C) bf16 its copy (the vocabulary head's input)
    float *lp, *ent, *dlp; // (N) fp32 head outputs per row (row t predicts token t+1), dlogp
    float *rope_cs;        // (rows, D) fp32 cos and sin per position (rl_rope_table)
    void *head_scratch;    // logprob_scratch_bytes(chunk, C, V)
    double *escratch;      // elt_scratch_doubles(max(C, D))
    float *xin;            // (N,maxin) fp32 a dropped module's input, back from bf16
    uint16_t *lx_h;        // (N,maxin) bf16 the LoRA branch's input after dropout
    float *mask;           // (N,maxin) fp32 the dropout mask (from the host's generator)
    float *xa32, *dxa;     // (N,R) fp32 x A^T before rounding; dL/dxa
    uint16_t *dxa_h;       // (N,R) bf16
    float *dres, *dln, *datt, *dqr, *dkr, *dq, *dk, *dv; // gradients (rl_model.c's names)
    float *dgate, *dup, *dact, *dlx, *delta;
    // (N,I) fp32 the gate and up projections of the layer a forward computes: a model that
    // trains lends it dgate and dup (a layer's forward and backward never overlap), else its own
    float *gate32, *up32;
    uint16_t *dgate_h, *dup_h, *dout_h; // bf16 copies of the gradients the matmuls read
    int32_t *d_ids, *d_targets, *d_pos, *d_starts, *d_erows, *d_eseg;
    int32_t *d_grow; // (N) each row's index b*T+t in the caller's batch (the dropout masks')
    double *d_sumsq; // (1) the clip's sum of squares

    // ---- host staging, allocated once
    int32_t *ids, *targets, *pos, *starts, *erows, *eseg;
    int *grow; // (N) the row's index b*T+t in the caller's batch (dropout masks)
    float *lp_h, *ent_h, *dlp_h, *packed;
    uint16_t *stage; // S_STAGE bf16

    // ---- the last forward
    int B, T, N, valid, train, lora_off, hid_done;
    float *d_lg; // (S_LG, V) fp32 rl_model_cuda_logits' chunk, made at its first call
    // the scalar head's (rl_model_cuda_head_*), made at its first call and grown with B*T: its
    // weight (C) and gradient (C) fp32, then (cap) outputs fp32 and (cap) rows int32
    void *d_hd;
    size_t hd_cap;
    int32_t *h_hrows; // (hd_cap) host staging of the rows
    int hd_rows;      // the rows on the device are the last forward's: 1 values', 2 scores'; 0 not
    float *h_hdw;     // (C) the gradient back from the device
    float temperature;
    uint64_t step;

    // attention: the bf16 kernels on the tensor cores (attn_*_bf16), or the fp32 ones
    // (RLCTL_CUDA_ATTN=fp32: slower, for comparisons)
    int attn_fp32;

    // ---- CUDA graphs of decode steps (s_step_trunk)
    int graphs; // 0: never (RLCTL_CUDA_GRAPHS=0, or a capture failed: g_off says)
    char g_off[512];
    unsigned a_gen; // the activations' generation: s_rows_alloc moves them
    long long g_captured, g_launched;

    char errmsg[512];
};

// ---------------------------------------------------------------------------------------------
// errors

static int s_err(rl_model_cuda_t *self, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_err(rl_model_cuda_t *self, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->errmsg, sizeof self->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

// A device call failed: the module's message, and where.
static int s_cufail(rl_model_cuda_t *self, int line) {
    return s_err(self, RL_EIO, "cuda:%d: %s (rl_model_cuda.c:%d)", self->device,
                 self->cu->errmsg(self->ctx), line);
}

#define S_TRY(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            return s_cufail(self, __LINE__);                                                       \
        }                                                                                          \
    } while (0)

const char *rl_model_cuda_errmsg(const rl_model_cuda_t *self) {
    return self->errmsg;
}

// Bytes of the trainable arrays (s_group_sizes done): the fp32 masters and their bf16 copies
// (*t), the gradients (*g, with grads: a group's parts and unit buffers) and AdamW's moments (*o,
// with moments).
static void s_trainable_bytes(const rl_model_cuda_t *self, int grads, int moments, size_t *t,
                              size_t *g, size_t *o) {
    *t = (self->r_n + self->mp_n + self->lv_n) * sizeof(float) +
         (self->b_n + self->wb_n) * sizeof(uint16_t);
    *g = !grads            ? 0
         : self->ranks > 1 ? (self->pn + self->ub_n + self->eb_n) * sizeof(float)
                           : self->t_n * sizeof(float);
    *o = moments ? 2 * self->pn * sizeof(float) : 0;
}

size_t rl_model_cuda_bytes(const rl_model_cuda_t *self) {
    size_t t, g, o;
    s_trainable_bytes(self, self->gmem || self->gacc, self->mmem != NULL, &t, &g, &o);
    return self->w_bytes + t + g + o + self->a_bytes;
}

// ---------------------------------------------------------------------------------------------
// small helpers

static size_t s_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

// The floats of unit u's part this rank owns that are in the unit (the last rank's part may be
// short, or empty: the rest is padding).
static size_t s_part_len(const rl_model_cuda_t *self, const s_unit_t *u) {
    size_t p0 = (size_t)self->rank * u->part;
    return u->n > p0 ? (u->n - p0 < u->part ? u->n - p0 : u->part) : 0;
}

// The scalar head's buffers in d_hd (s_head_rows): 0 its weight (C) then gradient (C), 1 the
// outputs (hd_cap), 2 the rows (hd_cap int32).
static void *s_head_buf(const rl_model_cuda_t *self, int which) {
    size_t o1 = s_up(2 * (size_t)self->C * sizeof(float), S_ALIGN);
    size_t o2 = o1 + s_up(self->hd_cap * sizeof(float), S_ALIGN);
    return (char *)self->d_hd + (which == 0 ? 0 : which == 1 ? o1 : o2);
}

// Carves aligned pieces out of one allocation: with base NULL it only counts bytes.
typedef struct {
    char *base;
    size_t off;
} s_lay_t;

static void *s_take(s_lay_t *y, size_t bytes) {
    void *p = y->base && bytes ? y->base + y->off : NULL;
    y->off += s_up(bytes, S_ALIGN);
    return p;
}

// bf16 bits of x, rounded to nearest even (the module's f32_to_bf16; weights are finite).
static uint16_t s_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int s_lora_on(const rl_model_cuda_t *self, int m) {
    return !self->lora_off && (self->lora_targets & (1 << m));
}

// C (M,N) fp32 = alpha op(A) op(B) + beta C; A, B bf16 (rl_cuda_gemm_t, row-major).
static int s_gemm(rl_model_cuda_t *self, int M, int N, int K, int ta, int tb, const uint16_t *A,
                  int lda, const uint16_t *Bm, int ldb, float *C, int ldc, float alpha,
                  float beta) {
    // cuBLASLt's heuristics assume 256-byte aligned operands: a misaligned one is this file's
    // bug (the emulation would not notice it; a GPU would fail or pick no algorithm)
    RL_ASSERT((uintptr_t)A % S_ALIGN == 0 && (uintptr_t)Bm % S_ALIGN == 0 &&
              (uintptr_t)C % S_ALIGN == 0);
    rl_cuda_gemm_t g = {.M = M,
                        .N = N,
                        .K = K,
                        .trans_a = ta,
                        .trans_b = tb,
                        .lda = lda,
                        .ldb = ldb,
                        .ldc = ldc,
                        .alpha = alpha,
                        .beta = beta};
    S_TRY(self->cu->gemm(self->ctx, &g, A, Bm, C));
    return 0;
}

// ---------------------------------------------------------------------------------------------
// projections: a Linear plus its LoRA branch (rl_model.c's s_proj / s_proj_backward)

// The LoRA branch's input of module m in a training forward with dropout: *lx = lx_h (N,IC)
// bf16 = bf16(x * mask), x the module's bf16 input and mask rl_lora_dropout_mask_rows(seed, key)
// of the caller's rows, made on the device (dropout_mask: the CPU's masks, bit for bit).
// Returns 0, RL_EINVAL (no mask buffers) or RL_EIO, message set.
static int s_dropped(rl_model_cuda_t *self, const uint16_t *x, int IC, float p, uint64_t key,
                     const uint16_t **lx) {
    const rl_cuda_module_t *cu = self->cu;
    const size_t cnt = (size_t)self->N * (size_t)IC;
    if (!self->mask) { // rl_lora_set_dropout after the buffers were laid out without dropout
        return s_err(self, RL_EINVAL,
                     "cuda:%d: LoRA dropout %g, but the device model was made with dropout 0 (no "
                     "mask buffers)",
                     self->device, (double)p);
    }
    S_TRY(cu->dropout_mask(self->ctx, self->mask, self->d_grow, self->N, IC, p, self->seed, key));
    S_TRY(cu->bf16_to_f32(self->ctx, self->xin, x, cnt));
    S_TRY(cu->dropout_forward(self->ctx, NULL, self->lx_h, self->xin, self->mask, cnt));
    *lx = self->lx_h;
    return 0;
}

// Whether the device half trains: gradients, AdamW's moments, a backward's buffers.
static int s_grads(const rl_model_cuda_t *self) {
    return self->tune != RL_TUNE_NONE && !self->infer;
}

static float s_lora_p(const rl_model_cuda_t *self) {
    if (!self->host) { // a plan (rl_model_cuda_plan): the options' dropout
        return self->plan_p;
    }
    rl_lora_t *lo = rl_model_lora(self->host);
    return lo ? rl_lora_dropout(lo) : 0.0f;
}

static float s_lora_scale(const rl_model_cuda_t *self) {
    return rl_lora_scale(rl_model_lora(self->host));
}

// Module m of layer l: out (N,OC) fp32 = x W^T + b + scale * drop(x) A^T B^T, x (N,IC) bf16;
// saves xa (N,R) bf16. Dropout only when `key` is non-zero (a training forward).
static int s_proj(rl_model_cuda_t *self, int l, int m, float *out, uint16_t *xa, const uint16_t *x,
                  const s_dt_t *W, const s_dt_t *bias, int IC, int OC, uint64_t key) {
    const int N = self->N;
    if (bias->f) {
        S_TRY(self->cu->bias_rows(self->ctx, out, OC, bias->f, N, OC));
    }
    if (s_gemm(self, N, OC, IC, 0, 1, x, IC, W->h, IC, out, OC, 1.0f, bias->f ? 1.0f : 0.0f)) {
        return RL_EIO;
    }
    if (!s_lora_on(self, m)) {
        return 0;
    }
    const int R = self->R;
    const s_dt_t *A = &self->lora_a[l * RL_LORA_NMOD + m],
                 *Bm = &self->lora_b[l * RL_LORA_NMOD + m];
    const float p = s_lora_p(self);
    const uint16_t *lx = x;
    int rc = key && p > 0.0f ? s_dropped(self, x, IC, p, key, &lx) : 0;
    if (rc) {
        return rc;
    }
    if (s_gemm(self, N, R, IC, 0, 1, lx, IC, A->h, IC, self->xa32, R, 1.0f, 0.0f)) {
        return RL_EIO;
    }
    S_TRY(self->cu->f32_to_bf16(self->ctx, xa, self->xa32, (size_t)N * R));
    return s_gemm(self, N, OC, R, 0, 1, xa, R, Bm->h, R, out, OC, s_lora_scale(self), 1.0f);
}

// Backward of s_proj: dinp (N,IC) fp32 = (set) or += dout W + the LoRA branch's; dW, dbias
// (FULL) and dA, dB (LORA) +=. dout (N,OC) fp32 and dout_h its bf16 copy (NULL: made here).
static int s_proj_backward(rl_model_cuda_t *self, int l, int m, float *dinp, const s_dt_t *W,
                           const s_dt_t *bias, const float *dout, const uint16_t *dout_h,
                           const uint16_t *x, const uint16_t *xa, int IC, int OC, uint64_t key,
                           int set) {
    const rl_cuda_module_t *cu = self->cu;
    const int N = self->N;
    if (!dout_h) {
        S_TRY(cu->f32_to_bf16(self->ctx, self->dout_h, dout, (size_t)N * OC));
        dout_h = self->dout_h;
    }
    // dinp (N,IC) = dout (N,OC) @ W (OC,IC); dW (OC,IC) += dout^T @ x; dbias += column sums
    if (s_gemm(self, N, IC, OC, 0, 0, dout_h, OC, W->h, IC, dinp, IC, 1.0f, set ? 0.0f : 1.0f) ||
        (W->g && s_gemm(self, OC, IC, N, 1, 0, dout_h, OC, x, IC, W->g, IC, 1.0f, 1.0f))) {
        return RL_EIO;
    }
    if (bias->g) {
        S_TRY(cu->bias_grad(self->ctx, bias->g, dout, OC, N, OC));
    }
    if (!s_lora_on(self, m)) {
        return 0;
    }
    const int R = self->R;
    const float scale = s_lora_scale(self), p = s_lora_p(self);
    const s_dt_t *A = &self->lora_a[l * RL_LORA_NMOD + m],
                 *Bm = &self->lora_b[l * RL_LORA_NMOD + m];
    const int drop = key && p > 0.0f;
    const uint16_t *lx = x;
    // the branch saw drop(x): regenerate it (the same mask, the same bits)
    int rc = drop ? s_dropped(self, x, IC, p, key, &lx) : 0;
    if (rc) {
        return rc;
    }
    // dxa (N,R) = scale * dout @ B; dA (R,IC) += dxa^T @ lx; dB (OC,R) += scale * dout^T @ xa
    if (s_gemm(self, N, R, OC, 0, 0, dout_h, OC, Bm->h, R, self->dxa, R, scale, 0.0f)) {
        return RL_EIO;
    }
    S_TRY(cu->f32_to_bf16(self->ctx, self->dxa_h, self->dxa, (size_t)N * R));
    if ((A->g && s_gemm(self, R, IC, N, 1, 0, self->dxa_h, R, lx, IC, A->g, IC, 1.0f, 1.0f)) ||
        (Bm->g && s_gemm(self, OC, R, N, 1, 0, dout_h, OC, xa, R, Bm->g, R, scale, 1.0f))) {
        return RL_EIO;
    }
    // dlx (N,IC) = dxa @ A: into dinp directly, or through the mask (d drop(x) / dx = mask)
    if (!drop) {
        return s_gemm(self, N, IC, R, 0, 0, self->dxa_h, R, A->h, IC, dinp, IC, 1.0f, 1.0f);
    }
    if (s_gemm(self, N, IC, R, 0, 0, self->dxa_h, R, A->h, IC, self->dlx, IC, 1.0f, 0.0f)) {
        return RL_EIO;
    }
    S_TRY(cu->dropout_backward(self->ctx, dinp, self->dlx, self->mask, (size_t)N * IC, 1));
    return 0;
}

static uint64_t s_key(const rl_model_cuda_t *self, int train, int l, int m) {
    return train ? rl_lora_dropout_key(self->step, l, m) : 0;
}

// ---------------------------------------------------------------------------------------------
// one decoder layer

// A KV cache on the device (rl_model_cuda.h): per layer K then V, each (n_slots, max_len, NKV,
// D) bf16 (attn_cache_write_bf16's layout: the values the bf16 attention rounds K and V to), or
// fp32 with the fp32 attention (RLCTL_CUDA_ATTN=fp32), the RoPE table of its positions, and a
// step's run arrays.
struct rl_model_cuda_cache {
    int n_slots, max_len;
    int rows;        // the most rows of a step (the model's buffers when the cache was made)
    char *mem;       // L x (K, V), each `slot` elements of `es` bytes
    size_t slot;     // n_slots * max_len * KVD
    size_t es;       // 2 (bf16) or 4 (fp32)
    float *rope_cs;  // (max_len, D) fp32 (rl_rope_table)
    // a step's inputs, one block (S_STEP_INTS(rows) int32) uploaded at once: (rows) each row's
    // slot, (rows + 1) run starts, (rows) run slots, (rows) run first positions, (rows) token ids
    // and (rows) positions; on the device at fixed addresses (a decode step's graph reads them),
    // and its host staging laid out alike (then h_map)
    int32_t *d_rows, *d_qstarts, *d_rslots, *d_pos0, *d_ids, *d_pos;
    int32_t *h_rows, *h_qstarts, *h_rslots, *h_pos0, *h_ids, *h_pos;
    int runs;
    float *d_logits; // (S_LG, V) fp32 a chunk of logits rows
    // the draws on the device (rl_model_step_draw), made at the first and grown at a larger one:
    int *h_map;      // (rows) host: each step row's index among the rows drawn from, or -1
    int lg_cap;      // rows of d_dlg
    float *d_dlg;    // (lg_cap, V) fp32: the logits of the rows drawn from, each once
    int draw_cap;    // draws of the blocks below
    // host staging laid out as d_u's block: (draw_cap) uniforms, each draw's row of d_dlg, the
    // tokens and logprobs drawn (one copy up, one down)
    double *h_u;
    int32_t *h_drow, *h_tok;
    float *h_lp;
    double *d_u;     // (draw_cap) uniforms, then int32 rows, int32 tokens, fp32 logprobs
    int32_t *d_drow, *d_tok;
    float *d_lp;
    // CUDA graphs of decode steps' trunks (s_step_trunk), by rows and lora_off; the model's
    // buffers' generation they were captured with
    struct {
        int n, lora_off;
        unsigned gen;
        uint64_t used; // the tick it was last launched at (the least recent one goes first)
        rl_cuda_graph_t *g;
    } graphs[8];
    int last_n, last_off; // the last decode step's (a second alike is captured)
    uint64_t tick;
};

// Layer l's K (kv 0) or V (kv 1) in cache c.
static char *s_kv_at(const rl_model_cuda_cache_t *c, int l, int kv) {
    return c->mem + ((size_t)l * 2 + (size_t)kv) * c->slot * c->es;
}

// RLCTL_CUDA_ATTN=fp32: the fp32 attention (CUDA cores) and an fp32 KV cache, for comparisons;
// otherwise the bf16 attention (tensor cores) and a bf16 cache.
static int s_attn_fp32(void) {
    const char *attn = getenv("RLCTL_CUDA_ATTN");
    return attn && strcmp(attn, "fp32") == 0;
}
#define S_LG 64 // logits rows computed (and brought to the host) at a time
#define S_GRAPHS 8
#define S_STEP_INTS(rows) (6 * (size_t)(rows) + 1)

// x_out (N,C) = layer l (x_in), saving into a (rl_model.c's s_layer_forward). kv: the cached
// step (rl_model_step): RoPE at the cache's table, k and v written into its slots, attention over
// them (runs of consecutive positions of a slot, each row up to its own position); NULL: the
// training forward over packed sequences.
// A group's unit of key `key` (NULL: no group, or no such unit: its tensors are frozen).
static const s_unit_t *s_unit_of(const rl_model_cuda_t *self, int key) {
    for (int i = 0; self->ranks > 1 && i < self->n_units; i++) {
        if (self->units[i].key == key) {
            return &self->units[i];
        }
    }
    return NULL;
}

// ZeRO-2 in a group's backward: before the unit's gradients are written, its buffer zeroed
// (begin); once they are complete, summed over the group, this rank's part added into gacc
// (end). Nothing without a group or such a unit. Every rank calls them alike (end is a
// collective).
static int s_unit_begin(rl_model_cuda_t *self, int key) {
    const s_unit_t *u = s_unit_of(self, key);
    if (u) {
        S_TRY(self->cu->dset(self->ctx, u->in_ebuf ? self->ebuf : self->ubuf, 0,
                             (size_t)self->ranks * u->part * sizeof(float)));
    }
    return 0;
}

static int s_unit_end(rl_model_cuda_t *self, int key) {
    const s_unit_t *u = s_unit_of(self, key);
    if (u) {
        float *buf = u->in_ebuf ? self->ebuf : self->ubuf;
        S_TRY(self->cu->comm_reduce_scatter(self->ctx, self->comm, buf, u->part));
        S_TRY(self->cu->accumulate(self->ctx, self->gacc + u->at,
                                   buf + (size_t)self->rank * u->part, u->part));
    }
    return 0;
}

// The start of a backward, before the head's gradients are written: its unit's buffer zeroed,
// or the tied embedding's (the head writes it now, the embedding at the end).
static int s_backward_begin(rl_model_cuda_t *self) {
    int rc = s_unit_begin(self, S_UH);
    return rc || !self->cfg.tie_word_embeddings ? rc : s_unit_begin(self, S_UE);
}

// After the head's backward (or none: a backward from the hidden states), before the final
// norm's: the head's unit summed (zeros without a head's backward, so that every path makes the
// same collectives), the final norm's buffer zeroed.
static int s_backward_head_end(rl_model_cuda_t *self) {
    int rc = s_unit_end(self, S_UH);
    return rc ? rc : s_unit_begin(self, S_UN);
}

// ZeRO-3: layer l's frozen tensors into gbuf, every rank's shard all-gathered (queued on the
// stream after the work before it, which has read the layer gathered last). Nothing when they
// are there already (a backward right after its forward's last layer, a recompute's backward)
// or the model is not sharded. Every rank of the group calls it alike: its skips depend only on
// the sequence of forwards and backwards, the same on every rank.
static int s_gather(rl_model_cuda_t *self, int l) {
    if ((self->sranks < 2 && !self->mshard) || self->gathered == l) {
        return 0;
    }
    self->gathered = -1;
    if (self->mshard) { // layer l's bf16 copy: every rank's part rounded, then all-gathered
        const s_unit_t *u = s_unit_of(self, l);
        RL_ASSERT(u && u->at_use);
        S_TRY(self->cu->f32_to_bf16(self->ctx, self->hbuf + (size_t)self->rank * u->part,
                                    self->mpart + u->ro, u->part));
        // bf16 pairs moved as floats (the parts are S_TALIGN multiples: even)
        S_TRY(self->cu->comm_all_gather(self->ctx, self->comm, (float *)(void *)self->hbuf,
                                        u->part / 2));
        self->gathered = l;
        return 0;
    }
    S_TRY(self->cu->d2d(self->ctx, self->gbuf + (size_t)self->srank * self->sbytes,
                        self->shards + (size_t)l * self->sbytes, self->sbytes));
    S_TRY(self->cu->comm_all_gather(self->ctx, self->scomm, (float *)(void *)self->gbuf,
                                    self->sbytes / sizeof(float)));
    self->gathered = l;
    return 0;
}

// mshard: a sharded unit's whole fp32 masters into its unit's buffer (*out; the buffer's
// gradients are spent between backwards), every rank's part all-gathered. Every rank of the
// group calls it alike.
static int s_part_gather(rl_model_cuda_t *self, const s_unit_t *u, float **out) {
    float *buf = u->in_ebuf ? self->ebuf : self->ubuf;
    RL_ASSERT(u->sharded && buf);
    S_TRY(self->cu->d2d(self->ctx, buf + (size_t)self->rank * u->part, self->mpart + u->ro,
                        u->part * sizeof(float)));
    S_TRY(self->cu->comm_all_gather(self->ctx, self->comm, buf, u->part));
    *out = buf;
    return 0;
}

// A gathered layer's (unit i's) vectors into lvec from its whole fp32 masters (a unit's floats).
static int s_vectors_from(rl_model_cuda_t *self, int i, const float *whole) {
    for (int k = 0; k < self->n_tensors; k++) {
        const s_tensor_t *t = &self->tensors[k];
        if (t->unit == i && t->vec) {
            S_TRY(self->cu->d2d(self->ctx, t->dt->f, whole + (t->t_at - self->units[i].lo),
                                t->n * sizeof(float)));
        }
    }
    return 0;
}

// The bf16 copies of tmem's whole units rounded again, at once (the gaps are zeros in both).
// With mshard the only whole unit is the final norm, whose bf16 copy nothing reads: none.
static int s_round_whole(rl_model_cuda_t *self) {
    if (!self->mshard && self->r_n) {
        S_TRY(self->cu->f32_to_bf16(self->ctx, self->tbf, self->tmem, self->r_n));
    }
    return 0;
}

int rl_model_cuda_idle(rl_model_cuda_t *self, int train) {
    int rc = 0;
    for (int l = 0; !rc && l < self->L; l++) { // a forward's
        rc = s_gather(self, l);
    }
    // its backward's, in s_backward_trunk's order: the gathers, and a group's sums of zeros
    const int back = train && s_grads(self);
    if (!rc && back) {
        rc = s_backward_begin(self);
        rc = rc ? rc : s_backward_head_end(self);
        rc = rc ? rc : s_unit_end(self, S_UN);
    }
    for (int l = self->L - 1; !rc && back && l >= 0; l--) {
        rc = s_gather(self, l);
        rc = rc ? rc : s_unit_begin(self, l);
        rc = rc ? rc : s_unit_end(self, l);
    }
    if (!rc && back && self->embed.g) {
        rc = self->cfg.tie_word_embeddings ? 0 : s_unit_begin(self, S_UE);
        rc = rc ? rc : s_unit_end(self, S_UE);
    }
    if (!rc && (self->sranks > 1 || self->ranks > 1)) {
        S_TRY(self->cu->sync(self->ctx));
    }
    return rc;
}

int rl_model_cuda_shard_ranks(const rl_model_cuda_t *self) {
    return self->sranks;
}

static int s_layer_forward(rl_model_cuda_t *self, int l, s_act_t *a, const float *x_in,
                           float *x_out, int train, const rl_model_cuda_cache_t *kv) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    int rc = s_gather(self, l);
    if (rc) {
        return rc;
    }
    const s_dlayer_t *w = &self->layers[l];
    const int B = self->B, N = self->N, C = self->C, I = self->I;
    const int NH = self->NH, NKV = self->NKV, D = self->D, QD = self->QD, KVD = self->KVD;
    const float eps = self->cfg.rms_norm_eps;
    const int qkn = self->cfg.qk_norm;
#define S_PROJ(m, out, x, W, b, IC, OC)                                                            \
    if ((rc = s_proj(self, l, m, out, a->xa[m], x, S_W(w, W), S_W(w, b), IC, OC,                   \
                     s_key(self, train, l, m))) != 0) {                                            \
        return rc;                                                                                 \
    }

    S_TRY(cu->rmsnorm_forward(ctx, NULL, a->ln1, a->rstd1, x_in, S_W(w, input_layernorm)->f, eps, N,
                              C));
    S_PROJ(S_Q, qkn ? a->q : a->qr, a->ln1, q_proj, q_bias, C, QD);
    S_PROJ(S_K, qkn ? a->k : a->kr, a->ln1, k_proj, k_bias, C, KVD);
    S_PROJ(S_V, a->v, a->ln1, v_proj, v_bias, C, KVD);
    if (qkn) { // Qwen3: RMSNorm over each head of q and k, before RoPE
        S_TRY(cu->rmsnorm_forward(ctx, a->qr, NULL, a->rstdq, a->q, S_W(w, q_norm)->f, eps, N * NH,
                                  D));
        S_TRY(cu->rmsnorm_forward(ctx, a->kr, NULL, a->rstdk, a->k, S_W(w, k_norm)->f, eps, N * NKV,
                                  D));
    }
    const float *cs = kv ? kv->rope_cs : self->rope_cs;
    const int n_pos = kv ? kv->max_len : self->rows;
    const int32_t *dpos = kv ? kv->d_pos : self->d_pos;
    S_TRY(cu->rope_forward(ctx, a->qr, a->qr, cs, dpos, N, NH, D, n_pos));
    S_TRY(cu->rope_forward(ctx, a->kr, a->kr, cs, dpos, N, NKV, D, n_pos));
    if (kv) {
        void *kc = s_kv_at(kv, l, 0), *vc = s_kv_at(kv, l, 1);
        if (self->attn_fp32) {
            S_TRY(cu->attn_cache_write(ctx, kc, vc, a->kr, a->v, kv->d_rows, dpos, N, kv->n_slots,
                                       kv->max_len, NKV, D));
            S_TRY(cu->attn_prefill(ctx, a->att, a->qr, kc, vc, kv->d_qstarts, kv->d_rslots,
                                   kv->d_pos0, kv->runs, N, NH, NKV, D, kv->n_slots, kv->max_len));
        } else {
            S_TRY(cu->attn_cache_write_bf16(ctx, kc, vc, a->kr, a->v, kv->d_rows, dpos, N,
                                            kv->n_slots, kv->max_len, NKV, D));
            S_TRY(cu->attn_prefill_bf16(ctx, a->att, a->qr, kc, vc, kv->d_qstarts, kv->d_rslots,
                                        kv->d_pos0, kv->runs, N, NH, NKV, D, kv->n_slots,
                                        kv->max_len));
        }
    } else {
        S_TRY((self->attn_fp32 ? cu->attn_forward : cu->attn_forward_bf16)(
            ctx, a->att, a->lse, a->qr, a->kr, a->v, self->d_starts, B, N, NH, NKV, D));
    }
    S_TRY(cu->f32_to_bf16(ctx, a->att_h, a->att, (size_t)N * QD));
    S_PROJ(S_O, a->h, a->att_h, o_proj, o_bias, QD, C);
    S_TRY(cu->residual_forward(ctx, a->h, a->h, x_in, (size_t)N * C));

    S_TRY(cu->rmsnorm_forward(ctx, NULL, a->ln2, a->rstd2, a->h,
                              S_W(w, post_attention_layernorm)->f, eps, N, C));
    S_PROJ(S_GATE, self->gate32, a->ln2, gate_proj, gate_bias, C, I);
    S_PROJ(S_UP, self->up32, a->ln2, up_proj, up_bias, C, I);
    S_TRY(cu->swiglu_forward_keep(ctx, a->act, a->gate_h, a->up_h, self->gate32, self->up32,
                                  (size_t)N * I));
    S_PROJ(S_DOWN, x_out, a->act, down_proj, down_bias, I, C);
    S_TRY(cu->residual_forward(ctx, x_out, x_out, a->h, (size_t)N * C));
#undef S_PROJ
    return 0;
}

// Backward of s_layer_forward. On entry dres (N,C) = dL/dx_out; on return dL/dx_in
// (rl_model.c's s_layer_backward).
static int s_layer_backward(rl_model_cuda_t *self, int l, const s_act_t *a, const float *x_in) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    const s_dlayer_t *w = &self->layers[l];
    const int B = self->B, N = self->N, C = self->C, I = self->I;
    const int NH = self->NH, NKV = self->NKV, D = self->D, QD = self->QD, KVD = self->KVD;
    const int qkn = self->cfg.qk_norm;
    const size_t nI = (size_t)N * I, nQ = (size_t)N * QD, nK = (size_t)N * KVD;
    float *dres = self->dres;
    int rc = s_gather(self, l);
    if (rc) {
        return rc;
    }
#define S_PROJ_BWD(m, dinp, W, b, dout, dout_h, x, IC, OC, set)                                    \
    if ((rc = s_proj_backward(self, l, m, dinp, S_W(w, W), S_W(w, b), dout, dout_h, x, a->xa[m],   \
                              IC, OC, s_key(self, 1, l, m), set)) != 0) {                          \
        return rc;                                                                                 \
    }

    // x_out = h + down(swiglu(gate(ln2), up(ln2))): dh = dres + (through the MLP). The first
    // writer of each gradient buffer sets it (no zeroing pass); the others add.
    S_PROJ_BWD(S_DOWN, self->dact, down_proj, down_bias, dres, NULL, a->act, I, C, 1);
    S_TRY(cu->swiglu_backward_kept(ctx, self->dgate, self->dup, self->dgate_h, self->dup_h,
                                   self->dact, a->gate_h, a->up_h, nI, 0));
    S_PROJ_BWD(S_UP, self->dln, up_proj, up_bias, self->dup, self->dup_h, a->ln2, C, I, 1);
    S_PROJ_BWD(S_GATE, self->dln, gate_proj, gate_bias, self->dgate, self->dgate_h, a->ln2, C, I,
               0);
    S_TRY(cu->rmsnorm_backward(ctx, dres, S_W(w, post_attention_layernorm)->g, self->dln, a->h,
                               S_W(w, post_attention_layernorm)->f, a->rstd2, N, C, 1,
                               self->escratch)); // dres is now dL/dh

    // h = x_in + o(attention(rope(norm(q)), rope(norm(k)), v))
    S_PROJ_BWD(S_O, self->datt, o_proj, o_bias, dres, NULL, a->att_h, QD, C, 1);
    S_TRY(cu->dset(ctx, self->dqr, 0, nQ * sizeof(float)));
    S_TRY(cu->dset(ctx, self->dkr, 0, nK * sizeof(float)));
    S_TRY(cu->dset(ctx, self->dv, 0, nK * sizeof(float)));
    S_TRY((self->attn_fp32 ? cu->attn_backward : cu->attn_backward_bf16)(
        ctx, self->dqr, self->dkr, self->dv, self->delta, self->datt, a->qr, a->kr, a->v, a->att,
        a->lse, self->d_starts, B, N, NH, NKV, D));
    // RoPE is a rotation: its backward is the rotation by -angle, in place
    S_TRY(cu->rope_backward(ctx, self->dqr, self->dqr, self->rope_cs, self->d_pos, N, NH, D,
                            self->rows, 0));
    S_TRY(cu->rope_backward(ctx, self->dkr, self->dkr, self->rope_cs, self->d_pos, N, NKV, D,
                            self->rows, 0));
    float *dQ = self->dqr, *dK = self->dkr;
    if (qkn) {
        S_TRY(cu->rmsnorm_backward(ctx, self->dq, S_W(w, q_norm)->g, self->dqr, a->q,
                                   S_W(w, q_norm)->f, a->rstdq, N * NH, D, 0, self->escratch));
        S_TRY(cu->rmsnorm_backward(ctx, self->dk, S_W(w, k_norm)->g, self->dkr, a->k,
                                   S_W(w, k_norm)->f, a->rstdk, N * NKV, D, 0, self->escratch));
        dQ = self->dq;
        dK = self->dk;
    }
    S_PROJ_BWD(S_Q, self->dln, q_proj, q_bias, dQ, NULL, a->ln1, C, QD, 1);
    S_PROJ_BWD(S_K, self->dln, k_proj, k_bias, dK, NULL, a->ln1, C, KVD, 0);
    S_PROJ_BWD(S_V, self->dln, v_proj, v_bias, self->dv, NULL, a->ln1, C, KVD, 0);
    S_TRY(cu->rmsnorm_backward(ctx, dres, S_W(w, input_layernorm)->g, self->dln, x_in,
                               S_W(w, input_layernorm)->f, a->rstd1, N, C, 1,
                               self->escratch)); // dres is now dL/dx_in
#undef S_PROJ_BWD
    return 0;
}

// Layer l's input (N,C): each layer's slot starts S_ALIGN-aligned (down_proj's gemm writes it).
static float *s_x(rl_model_cuda_t *self, int l) {
    return self->x +
           (size_t)l * s_up((size_t)self->rows * (size_t)self->C, S_ALIGN / sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// forward / backward (the API)

static int s_rows_alloc(rl_model_cuda_t *self, int rows);

int rl_model_cuda_forward(rl_model_cuda_t *self, const int32_t *tokens, const int *lengths, int B,
                          int T, float temperature, int train, uint64_t step, int lora_off,
                          float *logp, float *entropy) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    self->valid = 0;
    self->hid_done = 0;
    self->hd_rows = 0;
    int64_t n = 0;
    for (int b = 0; b < B; b++) {
        n += lengths[b];
    }
    if (n > INT_MAX / 2) {
        return s_err(self, RL_EINVAL, "cuda:%d: this forward has %lld tokens: too many",
                     self->device, (long long)n);
    }
    if (train && rl_fault("cuda_oom")) { // tests only (docs/reliability.md): as the growth below
        return s_err(self, RL_ENOMEM,
                     "cuda:%d: no room for the activations of %lld tokens (%zu bytes): out of "
                     "memory (RLCTL_FAULT=cuda_oom)",
                     self->device, (long long)n, self->a_bytes);
    }
    if (n > self->rows) { // the buffers grow, once, to the new largest forward
        int rc = s_rows_alloc(self, (int)n);
        if (rc) {
            return rc;
        }
    }
    const int N = (int)n, C = self->C;
    self->B = B;
    self->T = T;
    self->N = N;
    self->temperature = temperature;
    self->step = step;
    self->lora_off = lora_off;
    self->train = train && s_grads(self);
    for (int b = 0, r = 0; b < B; b++) {
        const int32_t *tk = tokens + (size_t)b * T;
        self->starts[b] = r;
        for (int t = 0; t < lengths[b]; t++, r++) {
            self->ids[r] = tk[t];
            self->targets[r] = t + 1 < lengths[b] ? tk[t + 1] : -1; // row t predicts token t+1
            self->pos[r] = t;
            self->grow[r] = b * T + t;
        }
    }
    self->starts[B] = N;
    S_TRY(cu->h2d(ctx, self->d_ids, self->ids, (size_t)N * sizeof(int32_t)));
    S_TRY(cu->h2d(ctx, self->d_targets, self->targets, (size_t)N * sizeof(int32_t)));
    S_TRY(cu->h2d(ctx, self->d_pos, self->pos, (size_t)N * sizeof(int32_t)));
    S_TRY(cu->h2d(ctx, self->d_starts, self->starts, (size_t)(B + 1) * sizeof(int32_t)));
    if (self->train && self->d_grow) { // the rows the dropout masks are keyed by
        S_TRY(cu->h2d(ctx, self->d_grow, self->grow, (size_t)N * sizeof(int32_t)));
    }

    // stored activations for every layer only when a backward can follow
    const int per_layer = self->train && !self->recompute;
    S_TRY(cu->embedding_forward(ctx, s_x(self, 0), self->d_ids, self->embed.h, N, C, self->V));
    for (int l = 0; l < self->L; l++) {
        int rc = s_layer_forward(self, l, &self->acts[per_layer ? l : 0], s_x(self, l),
                                 s_x(self, l + 1), train, NULL);
        if (rc) {
            return rc;
        }
    }
    S_TRY(cu->rmsnorm_forward(ctx, self->lnf, self->lnf_h, self->rstdf, s_x(self, self->L),
                              self->norm.f, self->cfg.rms_norm_eps, N, C));
    if (logp) { // no logp: a critic or reward model reads the hidden states instead
        S_TRY(cu->logprob_forward(ctx, self->lp, entropy ? self->ent : NULL, self->lnf_h,
                                  self->head.h, self->d_targets, temperature, N, C, self->V,
                                  self->head_scratch, self->chunk));
        S_TRY(cu->d2h(ctx, self->lp_h, self->lp, (size_t)N * sizeof(float)));
        if (entropy) {
            S_TRY(cu->d2h(ctx, self->ent_h, self->ent, (size_t)N * sizeof(float)));
        }
        // logp[b,t] is the prediction of token t by row t-1
        for (int b = 0; b < B; b++) {
            float *lp = logp + (size_t)b * T, *en = entropy ? entropy + (size_t)b * T : NULL;
            const int r0 = self->starts[b] - 1;
            for (int t = 0; t < T; t++) {
                int ok = t >= 1 && t < lengths[b];
                lp[t] = ok ? self->lp_h[r0 + t] : 0.0f;
                if (en) {
                    en[t] = ok ? self->ent_h[r0 + t] : 0.0f;
                }
            }
        }
    } else {
        S_TRY(cu->sync(ctx)); // a kernel's failure shows here, not in a later call
    }
    self->valid = 1;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the sampler's path: a KV cache on the device and the cached step

void rl_model_cuda_cache_free(rl_model_cuda_t *self, rl_model_cuda_cache_t **c_p) {
    if (!c_p || !*c_p) {
        return;
    }
    rl_model_cuda_cache_t *c = *c_p;
    const rl_cuda_module_t *cu = self->cu;
    cu->dfree(self->ctx, c->mem);
    cu->dfree(self->ctx, c->rope_cs);
    cu->dfree(self->ctx, c->d_rows);
    cu->dfree(self->ctx, c->d_logits);
    cu->dfree(self->ctx, c->d_dlg);
    cu->dfree(self->ctx, c->d_u);
    for (int i = 0; i < S_GRAPHS; i++) {
        cu->graph_free(c->graphs[i].g);
    }
    free(c->h_u);
    free(c->h_rows);
    free(c);
    *c_p = NULL;
}

int rl_model_cuda_cache_new(rl_model_cuda_t *self, int n_slots, int max_len,
                            rl_model_cuda_cache_t **out) {
    const rl_cuda_module_t *cu = self->cu;
    *out = NULL;
    if (!self->has_head) {
        return s_err(self, RL_EINVAL, "this model has no vocabulary head: it cannot sample");
    }
    if (self->sranks > 1 || self->mshard) { // a step would gather with peers that do not step
        return s_err(self, RL_EINVAL,
                     "cuda:%d: a model whose layers are sharded over %d ranks (ZeRO-3) cannot "
                     "sample: a sampler holds its model whole",
                     self->device, self->mshard ? self->ranks : self->sranks);
    }
    rl_model_cuda_cache_t *c = calloc(1, sizeof *c);
    const size_t R = (size_t)self->rows;
    if (c) {
        c->h_rows = malloc((S_STEP_INTS(R) + R) * sizeof(int32_t));
    }
    if (!c || !c->h_rows) {
        free(c);
        return s_err(self, RL_ENOMEM, "out of memory for a KV cache's staging");
    }
    c->h_qstarts = c->h_rows + R;
    c->h_rslots = c->h_qstarts + R + 1;
    c->h_pos0 = c->h_rslots + R;
    c->h_ids = c->h_pos0 + R;
    c->h_pos = c->h_ids + R;
    c->h_map = c->h_pos + R;
    c->n_slots = n_slots;
    c->max_len = max_len;
    c->rows = self->rows;
    c->slot = (size_t)n_slots * (size_t)max_len * (size_t)self->KVD;
    c->es = self->attn_fp32 ? 4 : 2;
    const size_t kv = (size_t)self->L * 2 * c->slot * c->es;
    const size_t cs_n = (size_t)max_len * (size_t)self->D;
    int rc = cu->dmalloc(self->ctx, kv, (void **)&c->mem);
    rc = rc ? rc : cu->dmalloc(self->ctx, cs_n * sizeof(float), (void **)&c->rope_cs);
    rc = rc ? rc : cu->dmalloc(self->ctx, S_STEP_INTS(R) * sizeof(int32_t), (void **)&c->d_rows);
    rc = rc ? rc
            : cu->dmalloc(self->ctx, (size_t)S_LG * (size_t)self->V * sizeof(float),
                          (void **)&c->d_logits);
    if (rc) {
        s_err(self, RL_ENOMEM,
              "cuda:%d: no room for a KV cache of %d slots x %d positions (%.2f GiB): %s",
              self->device, n_slots, max_len, (double)kv / (1 << 30), cu->errmsg(self->ctx));
        rl_model_cuda_cache_free(self, &c);
        return RL_ENOMEM;
    }
    c->d_qstarts = c->d_rows + R;
    c->d_rslots = c->d_qstarts + R + 1;
    c->d_pos0 = c->d_rslots + R;
    c->d_ids = c->d_pos0 + R;
    c->d_pos = c->d_ids + R;
    float *inv = malloc((size_t)(self->D / 2) * sizeof(float));
    float *cs = malloc(cs_n * sizeof(float));
    if (!inv || !cs) {
        free(inv);
        free(cs);
        rl_model_cuda_cache_free(self, &c);
        return s_err(self, RL_ENOMEM, "out of memory for a KV cache's RoPE table");
    }
    rl_rope_inv_freq(inv, &self->cfg);
    rl_rope_table(cs, inv, max_len, self->D);
    rc = cu->h2d(self->ctx, c->rope_cs, cs, cs_n * sizeof(float));
    free(inv);
    free(cs);
    if (rc) {
        rl_model_cuda_cache_free(self, &c);
        return s_cufail(self, __LINE__);
    }
    *out = c;
    return 0;
}

size_t rl_model_cuda_cache_bytes(const rl_model_cuda_t *self, const rl_model_cuda_cache_t *c) {
    size_t b = (size_t)self->L * 2 * c->slot * c->es;
    b += (size_t)c->max_len * (size_t)self->D * sizeof(float);
    b += S_STEP_INTS(c->rows) * sizeof(int32_t);
    b += (size_t)S_LG * (size_t)self->V * sizeof(float);
    b += (size_t)c->lg_cap * (size_t)self->V * sizeof(float) + (size_t)c->draw_cap * 20;
    return b;
}

int rl_model_cuda_cache_copy(rl_model_cuda_t *self, rl_model_cuda_cache_t *to, int dst,
                             const rl_model_cuda_cache_t *from, int src, int len) {
    const rl_cuda_module_t *cu = self->cu;
    const size_t KVD = (size_t)self->KVD;
    for (int l = 0; l < self->L && len > 0; l++) {
        for (int kv = 0; kv < 2; kv++) { // K, then V: positions 0..len-1 of the slot
            char *d = s_kv_at(to, l, kv) + (size_t)dst * (size_t)to->max_len * KVD * to->es;
            const char *s =
                s_kv_at(from, l, kv) + (size_t)src * (size_t)from->max_len * KVD * from->es;
            S_TRY(cu->d2d(self->ctx, d, s, (size_t)len * KVD * to->es));
        }
    }
    return 0;
}

// Room for n draws from r distinct rows: the first draw's buffers, or larger ones (at least
// the cache's slots, a sampler's batch, so that its steps allocate once).
static int s_draw_room(rl_model_cuda_t *self, rl_model_cuda_cache_t *c, int n, int r) {
    const rl_cuda_module_t *cu = self->cu;
    if (r > c->lg_cap) {
        int cap = r > c->n_slots ? r : c->n_slots;
        size_t bytes = (size_t)cap * (size_t)self->V * sizeof(float);
        cu->dfree(self->ctx, c->d_dlg);
        c->d_dlg = NULL;
        c->lg_cap = 0;
        if (cu->dmalloc(self->ctx, bytes, (void **)&c->d_dlg) != 0) {
            return s_err(self, RL_ENOMEM,
                         "cuda:%d: no room for %d rows of logits to draw from "
                         "(%.2f GiB): %s",
                         self->device, cap, (double)bytes / (1 << 30), cu->errmsg(self->ctx));
        }
        c->lg_cap = cap;
    }
    if (n > c->draw_cap) {
        int cap = n > c->n_slots ? n : c->n_slots;
        cu->dfree(self->ctx, c->d_u);
        free(c->h_u);
        c->d_u = NULL;
        c->draw_cap = 0;
        c->h_u = malloc((size_t)cap * 20);
        if (!c->h_u || cu->dmalloc(self->ctx, (size_t)cap * 20, (void **)&c->d_u) != 0) {
            return s_err(self, RL_ENOMEM, "cuda:%d: no room for %d draws", self->device, cap);
        }
        c->d_drow = (int32_t *)(c->d_u + cap);
        c->d_tok = c->d_drow + cap;
        c->d_lp = (float *)(c->d_tok + cap);
        c->h_drow = (int32_t *)(c->h_u + cap);
        c->h_tok = c->h_drow + cap;
        c->h_lp = (float *)(c->h_tok + cap);
        c->draw_cap = cap;
    }
    return 0;
}

// The draws of a step from the final norm's rows (rl_model_step_draw): the logits of each row
// drawn from, once, then one sample_rows over every draw.
static int s_step_draws(rl_model_cuda_t *self, rl_model_cuda_cache_t *c, int n,
                        const rl_model_draws_t *d) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    const int C = self->C, V = self->V;
    if (d->n == 0) {
        return 0;
    }
    for (int i = 0; i < n; i++) {
        c->h_map[i] = -1;
    }
    for (int j = 0; j < d->n; j++) {
        c->h_map[d->rows[j]] = 0;
    }
    int r = 0;
    for (int i = 0; i < n; i++) {
        c->h_map[i] = c->h_map[i] < 0 ? -1 : r++;
    }
    int rc = s_draw_room(self, c, d->n, r);
    if (rc) {
        return rc;
    }
    for (int j = 0; j < d->n; j++) {
        c->h_drow[j] = c->h_map[d->rows[j]];
    }
    for (int i = 0; i < n;) { // runs of consecutive rows drawn from: one matmul each
        if (c->h_map[i] < 0) {
            i++;
            continue;
        }
        int k = 1;
        while (i + k < n && c->h_map[i + k] >= 0) {
            k++;
        }
        S_TRY(cu->logits(ctx, c->d_dlg + (size_t)c->h_map[i] * V, self->lnf_h + (size_t)i * C, C,
                         self->head.h, 0.0f, k, C, V));
        i += k;
    }
    // one copy up (the uniforms, when drawn, and the rows) and one down (tokens and logprobs):
    // each copy waits for the device
    const int draw = d->temperature > 0.0f;
    const size_t cap = (size_t)c->draw_cap, nd = (size_t)d->n;
    if (draw) {
        memcpy(c->h_u, d->u, nd * sizeof(double));
        S_TRY(cu->h2d(ctx, c->d_u, c->h_u, cap * sizeof(double) + nd * sizeof(int32_t)));
    } else {
        S_TRY(cu->h2d(ctx, c->d_drow, c->h_drow, nd * sizeof(int32_t)));
    }
    S_TRY(cu->sample_rows(ctx, c->d_tok, c->d_lp, c->d_dlg, c->d_drow, draw ? c->d_u : NULL,
                          d->temperature, d->top_k, d->top_p, d->n, V));
    S_TRY(cu->d2h(ctx, c->h_tok, c->d_tok, cap * sizeof(int32_t) + nd * sizeof(float)));
    memcpy(d->tokens, c->h_tok, nd * sizeof(int32_t));
    memcpy(d->logprobs, c->h_lp, nd * sizeof(float));
    return 0;
}

// A step's embedding, layers and final norm, queued on the stream.
static int s_trunk_queue(rl_model_cuda_t *self, rl_model_cuda_cache_t *c, int n) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    const int C = self->C;
    S_TRY(cu->embedding_forward(ctx, s_x(self, 0), c->d_ids, self->embed.h, n, C, self->V));
    for (int l = 0; l < self->L; l++) {
        int rc = s_layer_forward(self, l, &self->acts[0], s_x(self, l), s_x(self, l + 1), 0, c);
        if (rc) {
            return rc;
        }
    }
    S_TRY(cu->rmsnorm_forward(ctx, self->lnf, self->lnf_h, self->rstdf, s_x(self, self->L),
                              self->norm.f, self->cfg.rms_norm_eps, n, C));
    return 0;
}

// The trunk of a step (s_trunk_queue). A decode step (n rows, each a run of its own: every
// kernel's arguments are then n, lora_off and buffers at fixed addresses, its inputs uploaded
// before) goes through a CUDA graph: launched when one of the cache's was captured for n and
// lora_off with the buffers where they are, else captured at the second step alike in a row
// (a step's rows change as sequences end: a single one is not worth a capture). Graphs of
// buffers since moved are freed. A failed capture turns graphs off for this model (the step is
// then queued as before; g_off says why). The same kernels with the same arguments: the same
// bits as queued.
static int s_step_trunk(rl_model_cuda_t *self, rl_model_cuda_cache_t *c, int n, int runs) {
    const rl_cuda_module_t *cu = self->cu;
    if (!self->graphs || runs != n) {
        return s_trunk_queue(self, c, n);
    }
    c->tick++;
    int lo = 0;
    for (int i = 0; i < S_GRAPHS; i++) {
        if (c->graphs[i].g && c->graphs[i].gen != self->a_gen) { // stale: never launched again
            cu->graph_free(c->graphs[i].g);
            c->graphs[i].g = NULL;
            c->graphs[i].used = 0;
        }
        if (c->graphs[i].g && c->graphs[i].n == n && c->graphs[i].lora_off == self->lora_off) {
            c->graphs[i].used = c->tick;
            self->g_launched++;
            S_TRY(cu->graph_launch(self->ctx, c->graphs[i].g));
            return 0;
        }
        lo = c->graphs[i].used < c->graphs[lo].used ? i : lo;
    }
    if (c->last_n != n || c->last_off != self->lora_off) {
        c->last_n = n;
        c->last_off = self->lora_off;
        return s_trunk_queue(self, c, n);
    }
    cu->graph_free(c->graphs[lo].g); // the least recently launched (or an empty entry)
    c->graphs[lo].g = NULL;
    rl_cuda_graph_t *g = NULL;
    int rc = cu->graph_begin(self->ctx) != 0;
    if (!rc) {
        rc = s_trunk_queue(self, c, n) != 0;
        rc = cu->graph_end(self->ctx, &g) != 0 || rc;
    }
    if (rc || !g) {
        cu->graph_free(g);
        self->graphs = 0;
        snprintf(self->g_off, sizeof self->g_off, "a capture failed: %s", cu->errmsg(self->ctx));
        // once: from now on every step is queued as before, correct but slower
        rl_log_warn("cuda:%d: CUDA graphs of decode steps are off: %s", self->device, self->g_off);
        return s_trunk_queue(self, c, n);
    }
    c->graphs[lo].n = n;
    c->graphs[lo].lora_off = self->lora_off;
    c->graphs[lo].gen = self->a_gen;
    c->graphs[lo].used = c->tick;
    c->graphs[lo].g = g;
    self->g_captured++;
    self->g_launched++;
    S_TRY(cu->graph_launch(self->ctx, g));
    return 0;
}

const char *rl_model_cuda_graph_stats(const rl_model_cuda_t *self, long long *captured,
                                      long long *launched) {
    *captured = self->g_captured;
    *launched = self->g_launched;
    return self->graphs ? NULL : self->g_off[0] ? self->g_off : "RLCTL_CUDA_GRAPHS=0";
}

int rl_model_cuda_step(rl_model_cuda_t *self, rl_model_cuda_cache_t *c, const int32_t *tokens,
                       const int *slots, const int *pos, int n, const unsigned char *want,
                       float *logits, const rl_model_draws_t *draws, int lora_off) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    if (n > self->rows || n > c->rows) {
        return s_err(self, RL_EINVAL,
                     "cuda:%d: a step of %d tokens is more than the %d the device model's buffers "
                     "hold (rl_model_opts_t.device_rows)",
                     self->device, n, c->rows < self->rows ? c->rows : self->rows);
    }
    const int C = self->C, V = self->V;
    self->valid = 0; // the activations are the step's now
    self->hid_done = 0;
    self->hd_rows = 0;
    self->N = n;
    self->B = 0;
    self->train = 0;
    self->step = 0;
    self->lora_off = lora_off;
    // the rows, and their runs: consecutive positions of one slot (a prompt's prefill)
    int R = 0;
    for (int i = 0; i < n; i++) {
        c->h_ids[i] = tokens[i];
        c->h_pos[i] = pos[i];
        c->h_rows[i] = slots[i];
        if (i == 0 || slots[i] != slots[i - 1] || pos[i] != pos[i - 1] + 1) {
            c->h_qstarts[R] = i;
            c->h_rslots[R] = slots[i];
            c->h_pos0[R] = pos[i];
            R++;
        }
    }
    c->h_qstarts[R] = n;
    c->runs = R;
    // one upload of the block up to the last position (a copy waits for the device: one, not six)
    S_TRY(cu->h2d(ctx, c->d_rows, c->h_rows, (size_t)(c->h_pos + n - c->h_rows) * sizeof(int32_t)));
    int trc = s_step_trunk(self, c, n, R);
    if (trc) {
        return trc;
    }
    // the raw logits of the rows asked for: runs of wanted rows, S_LG rows at a time
    for (int i = 0; logits && i < n;) {
        if (want && !want[i]) {
            i++;
            continue;
        }
        int k = 1;
        while (i + k < n && k < S_LG && (!want || want[i + k])) {
            k++;
        }
        S_TRY(cu->logits(ctx, c->d_logits, self->lnf_h + (size_t)i * C, C, self->head.h, 0.0f, k, C,
                         V));
        S_TRY(cu->d2h(ctx, logits + (size_t)i * V, c->d_logits, (size_t)k * V * sizeof(float)));
        i += k;
    }
    if (draws) {
        int rc = s_step_draws(self, c, n, draws);
        if (rc) {
            return rc;
        }
    }
    S_TRY(cu->sync(ctx)); // a kernel's failure shows here, not in a later call
    return 0;
}

int rl_model_cuda_logits(rl_model_cuda_t *self, float *out) {
    const rl_cuda_module_t *cu = self->cu;
    if (!self->valid || !self->has_head) {
        return s_err(self, RL_EINVAL, "no forward to take logits from, or no vocabulary head");
    }
    const int C = self->C, V = self->V, T = self->T;
    if (!self->d_lg &&
        cu->dmalloc(self->ctx, (size_t)S_LG * V * sizeof(float), (void **)&self->d_lg) != 0) {
        return s_err(self, RL_ENOMEM, "cuda:%d: no room for %d rows of logits: %s", self->device,
                     S_LG, cu->errmsg(self->ctx));
    }
    memset(out, 0, (size_t)self->B * T * V * sizeof(float));
    for (int b = 0; b < self->B; b++) {
        for (int r = self->starts[b]; r < self->starts[b + 1];) {
            int k = self->starts[b + 1] - r < S_LG ? self->starts[b + 1] - r : S_LG;
            S_TRY(cu->logits(self->ctx, self->d_lg, self->lnf_h + (size_t)r * C, C, self->head.h,
                             0.0f, k, C, V));
            float *o = out + ((size_t)b * T + (size_t)(r - self->starts[b])) * V;
            S_TRY(cu->d2h(self->ctx, o, self->d_lg, (size_t)k * V * sizeof(float)));
            r += k;
        }
    }
    return 0;
}

int rl_model_cuda_hidden(rl_model_cuda_t *self, float *hid) {
    if (!self->valid) {
        return s_err(self, RL_EINVAL, "no forward on the device");
    }
    if (self->hid_done) {
        return 0;
    }
    const int C = self->C, T = self->T;
    S_TRY(self->cu->d2h(self->ctx, self->packed, self->lnf,
                        (size_t)self->N * (size_t)C * sizeof(float)));
    for (int b = 0; b < self->B; b++) {
        size_t len = (size_t)(self->starts[b + 1] - self->starts[b]);
        float *hb = hid + (size_t)b * T * C;
        memcpy(hb, self->packed + (size_t)self->starts[b] * C, len * C * sizeof *hb);
        memset(hb + len * C, 0, ((size_t)T - len) * C * sizeof *hb);
    }
    self->hid_done = 1;
    return 0;
}

// The part of backward below the final norm's output (rl_model.c's s_backward_trunk). On entry
// dln (N,C) = dL/d(final norm output); accumulates every gradient of the final norm, the layers
// and (full tuning) the embedding.
static int s_backward_trunk(rl_model_cuda_t *self) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    const int N = self->N, C = self->C;
    int rc = s_backward_head_end(self);
    if (rc) {
        return rc;
    }
    S_TRY(cu->rmsnorm_backward(ctx, self->dres, self->norm.g, self->dln, s_x(self, self->L),
                               self->norm.f, self->rstdf, N, C, 0, self->escratch));
    if ((rc = s_unit_end(self, S_UN)) != 0) { // a group: the final norm's gradients summed
        return rc;
    }
    for (int l = self->L - 1; l >= 0; l--) {
        s_act_t *a = &self->acts[self->recompute ? 0 : l];
        // the same inputs, masks and kernels give the same activations bit for bit; x[l+1] is
        // rewritten with the value it already holds
        if (self->recompute &&
            (rc = s_layer_forward(self, l, a, s_x(self, l), s_x(self, l + 1), 1, NULL)) != 0) {
            return rc;
        }
        if ((rc = s_unit_begin(self, l)) != 0 ||
            (rc = s_layer_backward(self, l, a, s_x(self, l))) != 0 ||
            (rc = s_unit_end(self, l)) != 0) {
            return rc;
        }
    }
    if (self->embed.g && !self->cfg.tie_word_embeddings && (rc = s_unit_begin(self, S_UE)) != 0) {
        return rc;
    }
    if (self->embed.g) {
        // the rows of each id in row order, planned on the host from the ids it holds
        int n_seg = 0;
        S_TRY(cu->embedding_plan(ctx, self->ids, N, self->V, self->erows, self->eseg, &n_seg));
        S_TRY(cu->h2d(ctx, self->d_erows, self->erows, (size_t)N * sizeof(int32_t)));
        S_TRY(cu->h2d(ctx, self->d_eseg, self->eseg, (size_t)(n_seg + 1) * sizeof(int32_t)));
        S_TRY(cu->embedding_backward(ctx, self->embed.g, self->dres, self->d_ids, self->d_erows,
                                     self->d_eseg, n_seg, C));
        if ((rc = s_unit_end(self, S_UE)) != 0) {
            return rc;
        }
    }
    S_TRY(cu->sync(ctx)); // a kernel's failure shows here
    return 0;
}

// 1 when a backward may follow: the last forward was a training one; else 0 with the message.
static int s_can_backward(rl_model_cuda_t *self) {
    if (self->valid && self->train) {
        return 1;
    }
    s_err(self, RL_EINVAL,
          self->infer ? "an inference-only device model has no backward "
                        "(rl_model_opts_t.device_infer)"
                      : "backward needs a preceding training forward (train = 1)");
    return 0;
}

int rl_model_cuda_backward(rl_model_cuda_t *self, const float *dlogp) {
    const rl_cuda_module_t *cu = self->cu;
    if (!s_can_backward(self)) {
        return RL_EINVAL;
    }
    if (!self->has_head) {
        return s_err(self, RL_EINVAL, "this model has no vocabulary head: no dlogp");
    }
    const int B = self->B, T = self->T, N = self->N, C = self->C;
    for (int b = 0; b < B; b++) {
        const float *dl = dlogp + (size_t)b * T;
        float *dr = self->dlp_h + self->starts[b];
        const int len = self->starts[b + 1] - self->starts[b];
        for (int t = 0; t < len; t++) {
            // row t's logprob is logp[b,t+1]; rows without a target stay 0
            dr[t] = t + 1 < len ? dl[t + 1] : 0.0f;
        }
    }
    S_TRY(cu->h2d(self->ctx, self->dlp, self->dlp_h, (size_t)N * sizeof(float)));
    // the head recomputes its logits from lnf, so this also follows a forward with logp NULL
    S_TRY(cu->dset(self->ctx, self->dln, 0, (size_t)N * C * sizeof(float)));
    int rc = s_backward_begin(self);
    if (rc) {
        return rc;
    }
    S_TRY(cu->logprob_backward(self->ctx, self->dln, self->head.g, self->dlp, NULL, self->lnf_h,
                               self->head.h, self->d_targets, self->temperature, N, C, self->V,
                               self->head_scratch, self->chunk));
    return s_backward_trunk(self);
}

int rl_model_cuda_backward_hidden(rl_model_cuda_t *self, const float *dhidden) {
    if (!s_can_backward(self)) {
        return RL_EINVAL;
    }
    const int B = self->B, T = self->T, C = self->C;
    for (int b = 0; b < B; b++) { // padding rows are not read
        memcpy(self->packed + (size_t)self->starts[b] * C, dhidden + (size_t)b * T * C,
               (size_t)(self->starts[b + 1] - self->starts[b]) * C * sizeof(float));
    }
    S_TRY(self->cu->h2d(self->ctx, self->dln, self->packed,
                        (size_t)self->N * (size_t)C * sizeof(float)));
    int rc = s_backward_begin(self);
    return rc ? rc : s_backward_trunk(self);
}

// ---------------------------------------------------------------------------------------------
// the scalar head of a critic or reward model (rl_head.h) on the final norm's output

// The head's rows of the last forward (score: each sequence's last token; else the values'
// alignment, row b*T+t reading the token before t) on the device, their count in *n_out; the
// head's buffers made or grown first. Uploaded once per forward (a backward reuses them).
static int s_head_rows(rl_model_cuda_t *self, int score, int *n_out) {
    const rl_cuda_module_t *cu = self->cu;
    const int B = self->B, T = self->T, C = self->C;
    const size_t n = score ? (size_t)B : (size_t)B * T;
    *n_out = (int)n;
    if (self->hd_rows == score + 1) {
        return 0;
    }
    if (n > self->hd_cap) {
        cu->dfree(self->ctx, self->d_hd);
        self->d_hd = NULL;
        free(self->h_hrows);
        self->hd_cap = 0;
        self->hd_rows = 0;
        self->h_hrows = malloc(n * sizeof(int32_t));
        if (!self->h_hdw) {
            self->h_hdw = malloc((size_t)C * sizeof(float));
        }
        size_t bytes = s_up(2 * (size_t)C * sizeof(float), S_ALIGN) +
                       s_up(n * sizeof(float), S_ALIGN) + n * sizeof(int32_t);
        if (!self->h_hrows || !self->h_hdw || cu->dmalloc(self->ctx, bytes, &self->d_hd) != 0) {
            return s_err(self, RL_ENOMEM, "no room for the head's %zu bytes", bytes);
        }
        self->hd_cap = n;
    }
    for (int b = 0; b < B; b++) {
        const int r0 = self->starts[b], len = self->starts[b + 1] - r0;
        if (score) {
            self->h_hrows[b] = r0 + len - 1;
            continue;
        }
        for (int t = 0; t < T; t++) {
            self->h_hrows[(size_t)b * T + t] = t >= 1 && t < len ? r0 + t - 1 : -1;
        }
    }
    S_TRY(cu->h2d(self->ctx, s_head_buf(self, 2), self->h_hrows, n * sizeof(int32_t)));
    self->hd_rows = score + 1;
    return 0;
}

int rl_model_cuda_head_forward(rl_model_cuda_t *self, const float *w, int score, float *out) {
    const rl_cuda_module_t *cu = self->cu;
    if (!self->valid) {
        return s_err(self, RL_EINVAL, "no forward on the device");
    }
    int n = 0, rc = s_head_rows(self, score, &n);
    if (rc) {
        return rc;
    }
    float *dw = s_head_buf(self, 0), *dout = s_head_buf(self, 1);
    S_TRY(cu->h2d(self->ctx, dw, w, (size_t)self->C * sizeof(float)));
    S_TRY(cu->head_forward(self->ctx, dout, self->lnf, dw, NULL, s_head_buf(self, 2), n, self->C));
    S_TRY(cu->d2h(self->ctx, out, dout, (size_t)n * sizeof(float)));
    return 0;
}

int rl_model_cuda_head_backward(rl_model_cuda_t *self, const float *w, int score, const float *dout,
                                float *dw) {
    const rl_cuda_module_t *cu = self->cu;
    if (!s_can_backward(self)) {
        return RL_EINVAL;
    }
    const int C = self->C;
    int n = 0, rc = s_head_rows(self, score, &n);
    if (rc) {
        return rc;
    }
    float *d_w = s_head_buf(self, 0), *d_out = s_head_buf(self, 1), *d_dw = d_w + C;
    S_TRY(cu->h2d(self->ctx, d_w, w, (size_t)C * sizeof(float)));
    S_TRY(cu->h2d(self->ctx, d_out, dout, (size_t)n * sizeof(float)));
    S_TRY(cu->dset(self->ctx, d_dw, 0, (size_t)C * sizeof(float)));
    // dln = dL/d(final norm output): the head's rows, every other row 0 (no accumulate)
    S_TRY(cu->head_backward(self->ctx, self->dln, d_dw, NULL, d_out, self->lnf, d_w,
                            s_head_buf(self, 2), n, self->N, C, 0, self->escratch));
    S_TRY(cu->d2h(self->ctx, self->h_hdw, d_dw, (size_t)C * sizeof(float)));
    for (int i = 0; i < C; i++) {
        dw[i] += self->h_hdw[i]; // the one float add rl_head's backward makes
    }
    return s_backward_trunk(self);
}

// ---------------------------------------------------------------------------------------------
// parameters: push and pull

int rl_model_cuda_zero_grad(rl_model_cuda_t *self) {
    if (self->gmem || self->gacc) {
        S_TRY(self->cu->dset(self->ctx, self->gmem ? self->gmem : self->gacc, 0,
                             (self->gmem ? self->t_n : self->pn) * sizeof(float)));
        S_TRY(self->cu->sync(self->ctx));
    }
    return 0;
}

// The host's fp32 values x (n) rounded here and uploaded as bf16 into dst, through the staging.
static int s_push_bf16(rl_model_cuda_t *self, uint16_t *dst, const float *x, size_t n) {
    for (size_t o = 0; o < n; o += S_STAGE) {
        size_t k = n - o < S_STAGE ? n - o : S_STAGE;
        for (size_t j = 0; j < k; j++) {
            self->stage[j] = s_bf16(x[o + j]);
        }
        S_TRY(self->cu->h2d(self->ctx, dst + o, self->stage, k * sizeof(uint16_t))); // h2d waits
    }
    return 0;
}

// This rank's part of a sharded layer's frozen tensor t: the bytes of its shard of the layer's
// block that t covers, converted (a matrix, to bf16) and uploaded into the layer's shard.
static int s_push_shard(rl_model_cuda_t *self, const s_tensor_t *t) {
    const size_t es = t->dt->h ? sizeof(uint16_t) : sizeof(float);
    const size_t lo = (size_t)self->srank * self->sbytes, hi = lo + self->sbytes;
    const size_t a = t->off > lo ? t->off : lo;
    const size_t b = t->off + t->n * es < hi ? t->off + t->n * es : hi;
    if (a >= b) {
        return 0; // another rank's
    }
    // the block's offsets and the shard's bounds are S_ALIGN multiples: whole elements
    const size_t e0 = (a - t->off) / es, e1 = (b - t->off) / es;
    char *dst = self->shards + (size_t)t->layer * self->sbytes + (a - lo);
    if (es == sizeof(float)) {
        S_TRY(self->cu->h2d(self->ctx, dst, t->host + e0, (e1 - e0) * es));
        return 0;
    }
    return s_push_bf16(self, (uint16_t *)(void *)dst, t->host + e0, e1 - e0);
}

// This rank's part of a sharded unit's trainable tensor t (mshard): the floats of t in the part,
// uploaded into mpart.
static int s_push_part(rl_model_cuda_t *self, const s_tensor_t *t) {
    const s_unit_t *u = &self->units[t->unit];
    const size_t lo = u->lo + (size_t)self->rank * u->part, hi = lo + u->part;
    const size_t a = t->t_at > lo ? t->t_at : lo;
    const size_t b = t->t_at + t->n < hi ? t->t_at + t->n : hi;
    if (a < b) {
        S_TRY(self->cu->h2d(self->ctx, self->mpart + u->ro + (a - lo), t->host + (a - t->t_at),
                            (b - a) * sizeof(float)));
    }
    return 0;
}

// Elements [at, at + len) of trainable tensor t (one rank, no mshard) from src: a lean model's
// matrix rounded into its bf16 copy (it has no master), else into its fp32 at dt->f.
static int s_put(rl_model_cuda_t *self, const s_tensor_t *t, size_t at, const float *src,
                 size_t len) {
    if (self->lean && !t->vec) {
        return s_push_bf16(self, t->dt->h + at, src, len);
    }
    S_TRY(self->cu->h2d(self->ctx, t->dt->f + at, src, len * sizeof(float)));
    return 0;
}

int rl_model_cuda_push(rl_model_cuda_t *self, int all) {
    const rl_cuda_module_t *cu = self->cu;
    rl_cuda_ctx_t *ctx = self->ctx;
    if (all || self->mshard) {
        self->gathered = -1; // the shards change: no layer in gbuf is current
    }
    for (int i = 0; i < self->n_tensors; i++) {
        const s_tensor_t *t = &self->tensors[i];
        const s_unit_t *u = t->trainable ? &self->units[t->unit] : NULL;
        int rc = 0;
        if ((all && t->layer >= 0) || (u && u->sharded)) {
            rc = t->layer >= 0 ? s_push_shard(self, t) : s_push_part(self, t);
            if (!rc && u && !u->at_use) { // a sharded root's whole bf16 copy, rounded as the
                                          // module rounds
                rc = s_push_bf16(self, t->dt->h, t->host, t->n);
            } else if (!rc && u && t->vec) { // a gathered layer's vector, whole in fp32
                S_TRY(cu->h2d(ctx, t->dt->f, t->host, t->n * sizeof(float)));
            }
        } else if (t->trainable) {
            rc = s_put(self, t, 0, t->host, t->n);
        } else if (all && t->dt->h) { // a frozen matmul weight: rounded here, uploaded in bf16
            rc = s_push_bf16(self, t->dt->h, t->host, t->n);
        } else if (all) {
            S_TRY(cu->h2d(ctx, t->dt->f, t->host, t->n * sizeof(float)));
        }
        if (rc) {
            return rc;
        }
    }
    int rc = s_round_whole(self);
    if (rc) {
        return rc;
    }
    S_TRY(cu->sync(ctx));
    return 0;
}

void rl_model_cuda_host_dropped(rl_model_cuda_t *self) {
    for (int i = 0; i < self->n_tensors; i++) {
        if (!self->tensors[i].trainable || self->tune == RL_TUNE_FULL) {
            self->tensors[i].host = NULL;
        }
    }
}

int rl_model_cuda_load(rl_model_cuda_t *self, size_t offset, const float *w, size_t n, int last) {
    size_t whole = 0;
    for (int i = 0; i < self->n_tensors; i++) {
        const s_tensor_t *t = &self->tensors[i];
        whole += t->trainable && t->h_at != SIZE_MAX ? t->n : 0;
    }
    if ((self->mshard || self->ranks > 1) && offset == 0 && n == whole && whole > 0 && last) {
        // a group's rank: the whole array at once, pushed as the host's would be (each rank
        // its parts), from w instead of the host's arrays
        float **was = malloc((size_t)self->n_tensors * sizeof *was);
        if (!was) {
            return s_err(self, RL_ENOMEM, "out of memory");
        }
        for (int i = 0; i < self->n_tensors; i++) {
            s_tensor_t *t = &self->tensors[i];
            was[i] = t->host;
            t->host = t->trainable && t->h_at != SIZE_MAX ? (float *)w + t->h_at : t->host;
        }
        int rc = rl_model_cuda_push(self, 0);
        for (int i = 0; i < self->n_tensors; i++) {
            self->tensors[i].host = was[i];
        }
        free(was);
        return rc;
    }
    if (self->mshard || self->ranks > 1 || !self->t_n) {
        return s_err(self, RL_EINVAL,
                     "cuda:%d: weights are loaded in pieces only into a model of one rank that "
                     "has trainable parameters (a group's rank takes the whole array at once)",
                     self->device);
    }
    for (int i = 0; i < self->n_tensors; i++) {
        const s_tensor_t *t = &self->tensors[i];
        if (!t->trainable || t->h_at == SIZE_MAX) {
            continue;
        }
        size_t a = t->h_at > offset ? t->h_at : offset;
        size_t b = t->h_at + t->n < offset + n ? t->h_at + t->n : offset + n;
        int rc = a < b ? s_put(self, t, a - t->h_at, w + (a - offset), b - a) : 0;
        if (rc) {
            return rc;
        }
    }
    int rc = last ? s_round_whole(self) : 0;
    if (rc) {
        return rc;
    }
    S_TRY(self->cu->sync(self->ctx)); // w is the caller's again
    return 0;
}

int rl_model_cuda_pull(rl_model_cuda_t *self, int grads) {
    if (self->lean) {
        return s_err(self, RL_EINVAL,
                     "cuda:%d: a model that only infers keeps no fp32 masters to pull (their "
                     "bf16 copies only)",
                     self->device);
    }
    if (grads && self->ranks > 1) {
        return s_err(self, RL_EINVAL,
                     "cuda:%d: the gradients are split over the group's %d ranks (ZeRO-2): none "
                     "is whole to pull",
                     self->device, self->ranks);
    }
    float *whole = NULL; // a sharded unit's masters gathered (by its first tensor), every rank
                         // alike
    for (int i = 0; i < self->n_tensors; i++) {
        const s_tensor_t *t = &self->tensors[i];
        if (!t->trainable || (grads && (!t->host_grad || !t->dt->g))) {
            continue;
        }
        const s_unit_t *u = &self->units[t->unit];
        const float *src = grads ? t->dt->g : t->dt->f;
        if (!grads && u->sharded) {
            int first = i == 0 || self->tensors[i - 1].unit != t->unit;
            int rc = first ? s_part_gather(self, u, &whole) : 0;
            if (rc) {
                return rc;
            }
            src = whole + (t->t_at - u->lo);
        }
        float *dst = grads ? t->host_grad : t->host; // NULL: given back (the gathers only)
        if (dst) {
            S_TRY(self->cu->d2h(self->ctx, dst, src, t->n * sizeof(float)));
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the optimizer's step: rl_optim's clip_grad_norm_ and AdamW on the device

int rl_model_cuda_clip(rl_model_cuda_t *self, double max_norm, double *norm) {
    const rl_cuda_module_t *cu = self->cu;
    double ss = 0.0;
    *norm = 0.0;
    if (!self->gmem && !self->gacc) {
        return s_err(self, RL_EINVAL, "clip: the model has no gradients (tune NONE)");
    }
    // the gaps between tensors and the parts' padding are zeros: the sum of squares of the
    // trainable gradients (a group: of this rank's parts, summed over the ranks in the backward,
    // then summed over the ranks: the same on every rank)
    float *g = self->gacc ? self->gacc : self->gmem;
    S_TRY(cu->sumsq(self->ctx, self->d_sumsq, g, self->pn, 0, self->escratch));
    if (self->comm) {
        S_TRY(cu->comm_sum_f64(self->ctx, self->comm, self->d_sumsq, 1));
    }
    S_TRY(cu->d2h(self->ctx, &ss, self->d_sumsq, sizeof ss));
    *norm = sqrt(ss);
    if (max_norm > 0.0 && isfinite(*norm)) {
        double coef = max_norm / (*norm + 1e-6);
        if (coef < 1.0) {
            S_TRY(cu->scale(self->ctx, g, (float)coef, self->pn));
            S_TRY(cu->sync(self->ctx));
        }
    }
    return 0;
}

int rl_model_cuda_adamw(rl_model_cuda_t *self, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int64_t step) {
    const rl_cuda_module_t *cu = self->cu;
    if (!self->gmem && !self->gacc) {
        return s_err(self, RL_EINVAL, "AdamW: the model has no gradients (tune NONE)");
    }
    if (!self->mmem) {
        return s_err(self, RL_EINVAL,
                     "AdamW: the model keeps no moments on the device (its optimizer steps on "
                     "the host: device_host_optim)");
    }
    if (step < 1) {
        return s_err(self, RL_EINVAL, "AdamW: step %lld must be >= 1", (long long)step);
    }
    // the gaps stay zeros: g = m = v = p = 0 gives p = 0 - lr' 0 / (0 + eps)
    if (!self->comm) {
        S_TRY(cu->adamw_step(self->ctx, self->tmem, self->gmem, self->mmem, self->vmem, self->t_n,
                             lr, beta1, beta2, eps, weight_decay, step));
    }
    // a group: this rank's part of each unit, then every rank's updated part to every rank
    // (through the unit's buffer, whose gradients are spent); a sharded unit's part is all this
    // rank keeps: what is kept whole (a layer's vectors, a root's bf16 copy) made from them
    for (int i = 0; self->comm && i < self->n_units; i++) {
        const s_unit_t *u = &self->units[i];
        size_t p0 = (size_t)self->rank * u->part, cnt = s_part_len(self, u);
        float *buf = u->in_ebuf ? self->ebuf : self->ubuf;
        float *p = u->sharded ? self->mpart + u->ro : self->tmem + u->ro + p0;
        if (cnt) {
            S_TRY(cu->adamw_step(self->ctx, p, self->gacc + u->at, self->mmem + u->at,
                                 self->vmem + u->at, cnt, lr, beta1, beta2, eps, weight_decay,
                                 step));
        }
        if (u->sharded) {
            int rc = s_part_gather(self, u, &buf);
            rc = rc ? rc : u->at_use ? s_vectors_from(self, i, buf) : 0;
            if (rc) {
                return rc;
            }
            if (!u->at_use) { // a root: its whole bf16 copy
                S_TRY(cu->f32_to_bf16(self->ctx, self->tbf + u->bo, buf, u->n));
            }
            continue;
        }
        if (cnt) {
            S_TRY(cu->d2d(self->ctx, buf + p0, p, cnt * sizeof(float)));
        }
        S_TRY(cu->comm_all_gather(self->ctx, self->comm, buf, u->part));
        S_TRY(cu->d2d(self->ctx, self->tmem + u->ro, buf, u->n * sizeof(float)));
    }
    self->gathered = self->mshard ? -1 : self->gathered;
    int rc = s_round_whole(self);
    if (rc) {
        return rc;
    }
    S_TRY(cu->sync(self->ctx));
    return 0;
}

// Each trainable tensor between a device array laid out as the trainable layout (dev: as tmem
// without mshard) and the host's flat layout (host: the trainable tensors back to back); unit
// >= 0: only that unit's tensors, dev then the unit's floats (a unit's buffer).
static int s_flat_copy(rl_model_cuda_t *self, float *dev, float *host, int upload, int unit) {
    size_t off = 0; // the tensor's place in the host's layout
    for (int i = 0; i < self->n_tensors; i++) {
        const s_tensor_t *t = &self->tensors[i];
        if (!t->trainable) {
            continue;
        }
        if (unit < 0 || t->unit == unit) {
            float *d = dev + (t->t_at - (unit >= 0 ? self->units[unit].lo : 0));
            if (upload) {
                S_TRY(self->cu->h2d(self->ctx, d, host + off, t->n * sizeof(float)));
            } else {
                S_TRY(self->cu->d2h(self->ctx, host + off, d, t->n * sizeof(float)));
            }
        }
        off += t->n;
    }
    return 0;
}

// A group's moments between this rank's parts and the host's flat layout, a unit at a time
// through the unit's buffer (the gradients are spent after a step; a backward zeroes a unit's
// buffer before writing it): download gathers every rank's part of the unit there and copies its
// tensors to the host (m NULL: not: a rank that does not write the checkpoint); upload copies the
// unit's tensors there (the gaps zeros) and keeps this rank's part.
static int s_optim_group(rl_model_cuda_t *self, float *m, float *v, int upload) {
    const rl_cuda_module_t *cu = self->cu;
    for (int i = 0; i < self->n_units; i++) {
        const s_unit_t *u = &self->units[i];
        float *buf = u->in_ebuf ? self->ebuf : self->ubuf;
        size_t p0 = (size_t)self->rank * u->part;
        for (int k = 0; k < 2; k++) {
            float *dev = (k ? self->vmem : self->mmem) + u->at;
            if (upload) {
                S_TRY(cu->dset(self->ctx, buf, 0, (size_t)self->ranks * u->part * sizeof(float)));
            } else {
                S_TRY(cu->d2d(self->ctx, buf + p0, dev, u->part * sizeof(float)));
                S_TRY(cu->comm_all_gather(self->ctx, self->comm, buf, u->part));
            }
            int rc = upload || m ? s_flat_copy(self, buf, k ? v : m, upload, i) : 0;
            if (rc) {
                return rc;
            }
            if (upload) {
                S_TRY(cu->d2d(self->ctx, dev, buf + p0, u->part * sizeof(float)));
            }
        }
    }
    S_TRY(cu->sync(self->ctx));
    return 0;
}

int rl_model_cuda_optim_state(rl_model_cuda_t *self, float *m, float *v, int upload) {
    if (!self->mmem) {
        return s_err(self, RL_EINVAL, "the model has no optimizer state (tune NONE)");
    }
    if (upload && (!m || !v)) {
        return s_err(self, RL_EINVAL, "optim_state: no moments to upload");
    }
    if (self->comm) {
        return s_optim_group(self, m, v, upload);
    }
    if (!m) { // a download without a group takes part in nothing
        return 0;
    }
    int rc = s_flat_copy(self, self->mmem, m, upload, -1);
    return rc ? rc : s_flat_copy(self, self->vmem, v, upload, -1);
}

// ---------------------------------------------------------------------------------------------
// the weights to another process on this machine (CUDA IPC)

_Static_assert(RL_MODEL_IPC_HANDLE == RL_CUDA_IPC_HANDLE, "the model's IPC handle is CUDA's");

// FNV-1a over t_n and every trainable tensor's offset and size: two models whose trainable
// arrays are laid out alike (the same config and options) give the same number.
static uint64_t s_fnv(uint64_t h, uint64_t v) {
    for (int k = 0; k < 8; k++, v >>= 8) {
        h = (h ^ (v & 0xff)) * 1099511628211ull;
    }
    return h;
}

static uint64_t s_layout_hash(const rl_model_cuda_t *self) {
    uint64_t h = s_fnv(1469598103934665603ull, self->t_n);
    for (int i = 0; i < self->n_tensors; i++) {
        const s_tensor_t *t = &self->tensors[i];
        if (t->trainable) {
            h = s_fnv(s_fnv(s_fnv(h, (uint64_t)t->t_at), t->n), (uint64_t)i);
        }
    }
    return h;
}

int rl_model_cuda_ipc_export(rl_model_cuda_t *self, unsigned char *handle, uint64_t *layout,
                             size_t *n) {
    if (!self->tmem || self->lean) {
        return s_err(self, RL_EINVAL, "the model has no trainable parameters to share%s",
                     self->lean ? " (it only infers: no fp32 masters)" : "");
    }
    if (self->mshard) {
        return s_err(self, RL_EINVAL,
                     "cuda:%d: the trainable parameters are split over the group's %d ranks "
                     "(ZeRO-3 of the masters): no whole array to share",
                     self->device, self->ranks);
    }
    S_TRY(self->cu->sync(self->ctx)); // every update queued before is in the buffer
    S_TRY(self->cu->ipc_export(self->ctx, self->tmem, handle));
    *layout = s_layout_hash(self);
    *n = self->t_n;
    return 0;
}

int rl_model_cuda_ipc_load(rl_model_cuda_t *self, const unsigned char *handle, uint64_t layout,
                           size_t n) {
    const rl_cuda_module_t *cu = self->cu;
    if (!self->t_n) {
        return s_err(self, RL_EINVAL, "the model has no trainable parameters to load");
    }
    if (n != self->t_n || layout != s_layout_hash(self)) {
        return s_err(self, RL_EINVAL,
                     "the shared weights are laid out otherwise than this model's (%zu floats, "
                     "layout %016llx; this model: %zu, %016llx): not the same model and options",
                     n, (unsigned long long)layout, self->t_n,
                     (unsigned long long)s_layout_hash(self));
    }
    if (self->ipc_src && memcmp(self->ipc_handle, handle, RL_CUDA_IPC_HANDLE) != 0) {
        void *old = self->ipc_src;
        self->ipc_src = NULL;
        S_TRY(cu->ipc_close(self->ctx, old));
    }
    if (!self->ipc_src) {
        S_TRY(cu->ipc_open(self->ctx, handle, &self->ipc_src));
        memcpy(self->ipc_handle, handle, RL_CUDA_IPC_HANDLE);
    }
    if (self->lean) { // no masters: the bf16 copies rounded from the exporter's, vectors copied
        S_TRY(cu->f32_to_bf16(self->ctx, self->tbf, self->ipc_src, self->t_n));
        for (int i = 0; i < self->n_tensors; i++) {
            const s_tensor_t *t = &self->tensors[i];
            if (t->trainable && t->vec) {
                S_TRY(cu->d2d(self->ctx, t->dt->f, (const float *)self->ipc_src + t->t_at,
                              t->n * sizeof(float)));
            }
        }
    } else {
        S_TRY(cu->d2d(self->ctx, self->tmem, self->ipc_src, self->t_n * sizeof(float)));
        S_TRY(cu->f32_to_bf16(self->ctx, self->tbf, self->tmem, self->t_n));
    }
    S_TRY(cu->sync(self->ctx)); // the copy is done before the exporter may write again
    return 0;
}

// ---------------------------------------------------------------------------------------------
// creation

// Lays out (base NULL: counts) the activations, scratch and index buffers for `rows` tokens.
static size_t s_layout(rl_model_cuda_t *self, char *base) {
    s_lay_t y = {base, 0};
    const size_t n = (size_t)self->rows, C = (size_t)self->C, I = (size_t)self->I;
    const size_t QD = (size_t)self->QD, KVD = (size_t)self->KVD, R = (size_t)self->R;
    const size_t f = sizeof(float), h = sizeof(uint16_t), i32 = sizeof(int32_t);
    const int qkn = self->cfg.qk_norm;
    const int grads = s_grads(self);
    const int dropout = self->lora_targets && s_lora_p(self) > 0.0f;
    const size_t maxin = (size_t)self->maxin;
    for (int s = 0; s < self->sets; s++) {
        s_act_t dummy, *a = base ? &self->acts[s] : &dummy;
        a->ln1 = s_take(&y, n * C * h);
        a->rstd1 = s_take(&y, n * f);
        a->q = s_take(&y, qkn ? n * QD * f : 0);
        a->k = s_take(&y, qkn ? n * KVD * f : 0);
        a->rstdq = s_take(&y, qkn ? n * (size_t)self->NH * f : 0);
        a->rstdk = s_take(&y, qkn ? n * (size_t)self->NKV * f : 0);
        a->qr = s_take(&y, n * QD * f);
        a->kr = s_take(&y, n * KVD * f);
        a->v = s_take(&y, n * KVD * f);
        a->lse = s_take(&y, n * (size_t)self->NH * f);
        a->att = s_take(&y, n * QD * f);
        a->att_h = s_take(&y, n * QD * h);
        a->h = s_take(&y, n * C * f);
        a->ln2 = s_take(&y, n * C * h);
        a->rstd2 = s_take(&y, n * f);
        a->gate_h = s_take(&y, grads ? n * I * h : 0);
        a->up_h = s_take(&y, grads ? n * I * h : 0);
        a->act = s_take(&y, n * I * h);
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            a->xa[m] = s_take(&y, (self->lora_targets & (1 << m)) ? n * R * h : 0);
        }
    }
    self->x = s_take(&y, (size_t)(self->L + 1) * s_up(n * C, S_ALIGN / f) * f);
    self->lnf = s_take(&y, n * C * f);
    self->lnf_h = s_take(&y, n * C * h);
    self->rstdf = s_take(&y, n * f);
    self->lp = s_take(&y, n * f);
    self->ent = s_take(&y, n * f);
    self->dlp = s_take(&y, n * f);
    self->rope_cs = s_take(&y, n * (size_t)self->D * f);
    self->head_scratch = s_take(
        &y, self->has_head ? self->cu->logprob_scratch_bytes(self->chunk, self->C, self->V) : 0);
    int ec = self->C > self->D ? self->C : self->D;
    self->escratch = s_take(&y, self->cu->elt_scratch_doubles(ec) * sizeof(double));
    self->xin = s_take(&y, dropout ? n * maxin * f : 0);
    self->lx_h = s_take(&y, dropout ? n * maxin * h : 0);
    self->mask = s_take(&y, dropout ? n * maxin * f : 0);
    self->xa32 = s_take(&y, n * R * f);
    self->dxa = s_take(&y, grads ? n * R * f : 0);
    self->dxa_h = s_take(&y, grads ? n * R * h : 0);
    self->dres = s_take(&y, grads ? n * C * f : 0);
    self->dln = s_take(&y, grads ? n * C * f : 0);
    self->datt = s_take(&y, grads ? n * QD * f : 0);
    self->dqr = s_take(&y, grads ? n * QD * f : 0);
    self->dkr = s_take(&y, grads ? n * KVD * f : 0);
    self->dq = s_take(&y, grads && qkn ? n * QD * f : 0);
    self->dk = s_take(&y, grads && qkn ? n * KVD * f : 0);
    self->dv = s_take(&y, grads ? n * KVD * f : 0);
    self->dact = s_take(&y, grads ? n * I * f : 0);
    self->dgate = s_take(&y, grads ? n * I * f : 0);
    self->dup = s_take(&y, grads ? n * I * f : 0);
    self->gate32 = grads ? self->dgate : s_take(&y, n * I * f);
    self->up32 = grads ? self->dup : s_take(&y, n * I * f);
    self->dgate_h = s_take(&y, grads ? n * I * h : 0);
    self->dup_h = s_take(&y, grads ? n * I * h : 0);
    self->dout_h = s_take(&y, grads ? n * maxin * h : 0);
    self->dlx = s_take(&y, grads && dropout ? n * maxin * f : 0);
    self->delta = s_take(&y, grads ? n * (size_t)self->NH * f : 0);
    self->d_ids = s_take(&y, n * i32);
    self->d_targets = s_take(&y, n * i32);
    self->d_pos = s_take(&y, n * i32);
    self->d_starts = s_take(&y, (n + 1) * i32);
    self->d_grow = s_take(&y, dropout ? n * i32 : 0);
    self->d_erows = s_take(&y, grads ? n * i32 : 0);
    self->d_eseg = s_take(&y, grads ? (n + 1) * i32 : 0);
    self->d_sumsq = s_take(&y, grads ? sizeof(double) : 0);
    return y.off;
}

// Frees the host staging of `rows` tokens (s_rows_alloc's), pointers NULL.
static void s_staging_free(rl_model_cuda_t *self) {
    free(self->ids);
    free(self->targets);
    free(self->pos);
    free(self->starts);
    free(self->erows);
    free(self->eseg);
    free(self->grow);
    free(self->lp_h);
    free(self->ent_h);
    free(self->dlp_h);
    free(self->packed);
    self->ids = self->targets = self->pos = self->starts = self->erows = self->eseg = NULL;
    self->grow = NULL;
    self->lp_h = self->ent_h = self->dlp_h = self->packed = NULL;
}

// The activations, scratch and host staging for `rows` packed tokens (at creation, and when a
// forward needs more: they grow, as the CPU model's buffers do). The last forward is lost.
// Returns 0, or RL_ENOMEM / RL_EIO with the message in self->errmsg (the old buffers freed).
static int s_rows_alloc(rl_model_cuda_t *self, int rows) {
    const rl_cuda_module_t *cu = self->cu;
    self->valid = 0;
    self->hid_done = 0;
    self->hd_rows = 0;
    cu->dfree(self->ctx, self->amem);
    self->amem = NULL;
    s_staging_free(self);
    self->rows = rows;
    self->a_gen++; // graphs captured before point at the old buffers
    self->a_bytes = s_layout(self, NULL);
    if (cu->dmalloc(self->ctx, self->a_bytes, &self->amem) != 0) {
        self->rows = 0;
        return s_err(self, RL_ENOMEM,
                     "cuda:%d: no room for the activations of %d tokens (%zu bytes): %s",
                     self->device, rows, self->a_bytes, cu->errmsg(self->ctx));
    }
    s_layout(self, self->amem);
    const size_t n = (size_t)rows;
    self->ids = malloc(n * sizeof(int32_t));
    self->targets = malloc(n * sizeof(int32_t));
    self->pos = malloc(n * sizeof(int32_t));
    self->starts = malloc((n + 1) * sizeof(int32_t));
    self->erows = malloc(n * sizeof(int32_t));
    self->eseg = malloc((n + 1) * sizeof(int32_t));
    self->grow = malloc(n * sizeof(int));
    self->lp_h = malloc(n * sizeof(float));
    self->ent_h = malloc(n * sizeof(float));
    self->dlp_h = malloc(n * sizeof(float));
    self->packed = malloc(n * (size_t)self->C * sizeof(float));
    float *inv = malloc((size_t)(self->D / 2) * sizeof(float));
    float *cs = malloc(n * (size_t)self->D * sizeof(float));
    if (!self->ids || !self->targets || !self->pos || !self->starts || !self->erows ||
        !self->eseg || !self->grow || !self->lp_h || !self->ent_h || !self->dlp_h ||
        !self->packed || !inv || !cs) {
        free(inv);
        free(cs);
        return s_err(self, RL_ENOMEM, "out of memory for the device model's staging");
    }
    rl_rope_inv_freq(inv, &self->cfg);
    rl_rope_table(cs, inv, rows, self->D);
    int bad = cu->h2d(self->ctx, self->rope_cs, cs, n * (size_t)self->D * sizeof(float)) != 0;
    free(inv);
    free(cs);
    return bad ? s_cufail(self, __LINE__) : 0;
}

// A trainable tensor of unit key `key` (1-D: vec) placed at floats [off, off + len) of tmem,
// appended to the last unit when it has that key, else to a new one. Returns the unit's index.
static int s_unit_add(rl_model_cuda_t *self, int key, size_t off, size_t len, int vec) {
    s_unit_t *u = self->n_units ? &self->units[self->n_units - 1] : NULL;
    if (!u || u->key != key) {
        u = &self->units[self->n_units++];
        u->key = key;
        u->lo = off;
    }
    u->n = off + len - u->lo;
    u->vn += vec ? len : 0;
    return (int)(u - self->units);
}

// A tensor's unit key from its name: model.layers.<l>. -> l, the embedding S_UE, the head S_UH,
// else (the final norm) S_UN.
static int s_unit_key(const char *name) {
    if (!strncmp(name, "model.layers.", 13)) {
        return atoi(name + 13);
    }
    return strcmp(name, "model.embed_tokens.weight") == 0 ? S_UE
           : strcmp(name, "lm_head.weight") == 0          ? S_UH
                                                          : S_UN;
}

// The byte offset of a frozen tensor (ndim 2: bf16, else fp32; n elements), each S_ALIGN-aligned:
// of wmem (layer -1: a whole tensor, counted in w_bytes), or of its layer's block (a sharded
// layer's: counted in lbytes, from 0 at each new layer *cur).
static size_t s_frozen_at(rl_model_cuda_t *self, int layer, int *cur, int ndim, size_t n) {
    size_t bytes = s_up(n * (ndim == 2 ? sizeof(uint16_t) : sizeof(float)), S_ALIGN), at;
    if (layer < 0) {
        at = self->w_bytes;
        self->w_bytes += bytes;
        return at;
    }
    if (layer != *cur) {
        *cur = layer;
        self->lbytes = 0;
    }
    at = self->lbytes;
    self->lbytes += bytes;
    return at;
}

// Every tensor of the host model into self->tensors, with its device placement: trainable
// tensors at element offsets of the trainable allocations (*t_n elements so far), frozen ones at
// byte offsets of wmem (*w_bytes so far). Pointers are offsets from NULL until s_bind.
// With no host model (a plan: rl_model_cuda_plan) only the sizes: w_bytes and t_n.
static int s_plan(rl_model_cuda_t *self, char *err, size_t err_len) {
    const int full = self->tune == RL_TUNE_FULL;
    const int sizes = self->host == NULL;
    const int shard = self->sranks > 1;
    int cur = -1; // the layer whose block lbytes counts (every layer's is laid out alike)
    rl_model_params_t *hp = sizes ? NULL : rl_model_params(self->host);
    rl_model_params_t *hg = sizes ? NULL : rl_model_grads(self->host);
    rl_lora_t *lo = sizes ? NULL : rl_model_lora(self->host);
    const int L = self->L;
    int n_specs = rl_hf_tensor_specs(&self->cfg, NULL, 0);
    rl_hf_tensor_spec_t *specs = calloc((size_t)n_specs, sizeof *specs);
    self->tensors = calloc((size_t)n_specs + 2 * (size_t)L * RL_LORA_NMOD, sizeof *self->tensors);
    self->units = calloc((size_t)L + 3, sizeof *self->units);
    if (!specs || !self->tensors || !self->units) {
        free(specs);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_hf_tensor_specs(&self->cfg, specs, n_specs);
    for (int i = 0; i < n_specs; i++) {
        if (sizes) {
            size_t n = (size_t)(specs[i].ndim == 1 ? specs[i].shape[0]
                                                   : specs[i].shape[0] * specs[i].shape[1]);
            const int l = s_unit_key(specs[i].name); // a layer's index, else < 0
            if (!self->has_head && !strcmp(specs[i].name, "lm_head.weight")) {
                continue; // a sequence classifier's: no lm_head
            } else if (full) {
                s_unit_add(self, s_unit_key(specs[i].name), self->t_n, s_up(n, S_TALIGN),
                           specs[i].ndim == 1);
                self->t_n += s_up(n, S_TALIGN);
            } else {
                (void)s_frozen_at(self, shard && l >= 0 ? l : -1, &cur, specs[i].ndim, n);
            }
            continue;
        }
        float **slot = rl_model_params_find(hp, L, specs[i].name);
        RL_ASSERT(slot);
        if (!*slot) {
            continue; // a sequence classifier's missing lm_head
        }
        s_dt_t *dt;
        int layer = -1;
        if (slot == &hp->embed_tokens) {
            dt = &self->embed;
        } else if (slot == &hp->norm) {
            dt = &self->norm;
        } else if (slot == &hp->lm_head) {
            dt = &self->head;
        } else {
            ptrdiff_t k = slot - (float **)hp->layers;
            RL_ASSERT(k >= 0 && k < (ptrdiff_t)L * S_NF);
            dt = &self->layers[k / S_NF].t[k % S_NF];
            layer = (int)(k / S_NF);
        }
        s_tensor_t *t = &self->tensors[self->n_tensors++];
        t->host = *slot;
        t->n = (size_t)(specs[i].ndim == 1 ? specs[i].shape[0]
                                           : specs[i].shape[0] * specs[i].shape[1]);
        t->dt = dt;
        t->trainable = full;
        t->layer = -1;
        t->unit = -1;
        if (full) {
            t->t_at = self->t_n;
            t->vec = specs[i].ndim == 1;
            t->unit = s_unit_add(self, s_unit_key(specs[i].name), self->t_n, s_up(t->n, S_TALIGN),
                                 t->vec);
            float **gslot = rl_model_params_find(hg, L, specs[i].name);
            t->host_grad = gslot ? *gslot : NULL;
            // offsets, made pointers by s_bind: the master, its bf16 copy, its gradient
            dt->f = (float *)(uintptr_t)(self->t_n + 1);
            self->t_n += s_up(t->n, S_TALIGN);
        } else {
            t->layer = shard ? layer : -1;
            t->off = s_frozen_at(self, t->layer, &cur, specs[i].ndim, t->n);
            if (specs[i].ndim == 2) {
                dt->h = (uint16_t *)(uintptr_t)(t->off + 1);
            } else {
                dt->f = (float *)(uintptr_t)(t->off + 1);
            }
        }
    }
    free(specs);
    if (shard && self->lbytes == 0) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "a model sharded over %d ranks (ZeRO-3 of its frozen layers) needs frozen "
                       "layers: tune FULL has none",
                       self->sranks);
    }
    if (shard) { // the shards, then the gathered layer, after the whole tensors
        self->sbytes =
            s_up((self->lbytes + (size_t)self->sranks - 1) / (size_t)self->sranks, S_ALIGN);
        self->shards_at = self->w_bytes;
        self->w_bytes += (size_t)L * self->sbytes;
        self->gbuf_at = self->w_bytes;
        self->w_bytes += (size_t)self->sranks * self->sbytes;
    }
    for (int l = 0; (lo || (sizes && self->R > 0)) && l < L; l++) {
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            if (!(self->lora_targets & (1 << m))) {
                continue;
            }
            int in, out;
            rl_lora_module_dims(&self->cfg, m, &in, &out);
            for (int ab = 0; ab < 2 && sizes; ab++) {
                size_t len = s_up((size_t)self->R * (size_t)(ab ? out : in), S_TALIGN);
                s_unit_add(self, l, self->t_n, len, 0);
                self->t_n += len;
            }
            for (int ab = 0; ab < 2 && !sizes; ab++) {
                s_tensor_t *t = &self->tensors[self->n_tensors++];
                t->host = ab ? rl_lora_B(lo, l, m) : rl_lora_A(lo, l, m);
                t->host_grad = ab ? rl_lora_dB(lo, l, m) : rl_lora_dA(lo, l, m);
                t->n = (size_t)self->R * (size_t)(ab ? out : in);
                t->trainable = 1;
                t->layer = -1;
                t->t_at = self->t_n;
                t->unit = s_unit_add(self, l, self->t_n, s_up(t->n, S_TALIGN), 0);
                t->dt =
                    ab ? &self->lora_b[l * RL_LORA_NMOD + m] : &self->lora_a[l * RL_LORA_NMOD + m];
                t->dt->f = (float *)(uintptr_t)(self->t_n + 1);
                self->t_n += s_up(t->n, S_TALIGN);
            }
        }
    }
    if (!sizes) { // where each trainable tensor is in the host's flat array (weight syncs)
        size_t tn = 0;
        const float *base = rl_model_trainable(self->host, &tn);
        for (int i = 0; i < self->n_tensors; i++) {
            s_tensor_t *t = &self->tensors[i];
            int in = t->trainable && base && t->host >= base && t->host + t->n <= base + tn;
            t->h_at = in ? (size_t)(t->host - base) : SIZE_MAX;
        }
    }
    return 0;
}

// The offsets s_plan left in the tensors' device pointers, made pointers into the allocations.
static void s_bind(rl_model_cuda_t *self) {
    const int grads = s_grads(self);
    if (self->sranks > 1) {
        self->shards = (char *)self->wmem + self->shards_at;
        self->gbuf = (char *)self->wmem + self->gbuf_at;
    }
    for (int i = 0; i < self->n_tensors; i++) {
        s_dt_t *dt = self->tensors[i].dt;
        if (self->tensors[i].trainable) {
            size_t off = (size_t)(uintptr_t)dt->f - 1;
            // a sharded layer's matrices are read where it is gathered (bf16), its vectors whole
            // in lvec; a sharded root's fp32 is read by nothing (its bf16 copy is whole)
            const s_tensor_t *t = &self->tensors[i];
            const s_unit_t *u = &self->units[t->unit];
            // lean (no masters): its vectors whole in lvec, its matrices' fp32 nowhere
            dt->f = (u->at_use || self->lean) && t->vec ? self->lvec + t->v_at
                    : u->sharded || self->lean          ? NULL
                                                        : self->tmem + u->ro + (off - u->lo);
            dt->h = u->at_use    ? self->hbuf + (off - u->lo)
                    : u->whole_h ? self->tbf + u->bo + (off - u->lo)
                                 : NULL;
            // a LoRA adapter of a model that does not train (tune NONE) has no gradients; a
            // group's are written into their unit's buffer
            dt->g = !grads            ? NULL
                    : self->ranks > 1 ? (u->in_ebuf ? self->ebuf : self->ubuf) + (off - u->lo)
                                      : self->gmem + off;
        } else {
            // a sharded layer's tensors are read where its layer is gathered
            char *base = self->tensors[i].layer >= 0 ? self->gbuf : (char *)self->wmem;
            if (dt->h) {
                dt->h = (uint16_t *)(base + ((size_t)(uintptr_t)dt->h - 1));
            } else {
                dt->f = (float *)(base + ((size_t)(uintptr_t)dt->f - 1));
            }
        }
    }
    if (self->cfg.tie_word_embeddings) {
        self->head = self->embed; // one tensor: both uses read it and add into its gradient
    }
}

// Rows of the vocabulary head at a time: about 4M logits (16 MiB fp32), 64..256 rows.
static int s_head_chunk(int V) {
    int c = (int)(((size_t)1 << 22) / (size_t)V);
    return c < 64 ? 64 : c > 256 ? 256 : c;
}

// The shapes of a device half (self->cfg, tune and recompute set): the config's, an adapter of
// rank R on `targets`, a vocabulary head or not, activations for `rows` tokens.
static void s_dims(rl_model_cuda_t *self, const rl_hf_config_t *cfg, int R, int targets,
                   int has_head, int rows) {
    self->C = cfg->hidden_size;
    self->I = cfg->intermediate_size;
    self->NH = cfg->num_attention_heads;
    self->NKV = cfg->num_key_value_heads;
    self->D = cfg->head_dim;
    self->QD = self->NH * self->D;
    self->KVD = self->NKV * self->D;
    self->V = cfg->vocab_size;
    self->L = cfg->num_hidden_layers;
    self->R = R;
    self->lora_targets = targets;
    self->rows = rows;
    self->chunk = s_head_chunk(self->V);
    self->has_head = has_head;
    int mx = self->C > self->I ? self->C : self->I;
    self->maxin = mx > self->QD ? mx : self->QD;
    self->sets = s_grads(self) && !self->recompute ? self->L : 1;
}

// ZeRO-3's group (opts.device_shard_ranks > 1), before s_plan lays the layers out.
static void s_shard_sizes(rl_model_cuda_t *self, const rl_model_opts_t *opts) {
    self->sranks = opts->device_shard_ranks > 1 ? opts->device_shard_ranks : 1;
    self->srank = self->sranks > 1 ? opts->device_shard_rank : 0;
    self->gathered = -1;
}

// The trainable arrays' sizes once s_plan counted t_n and the units: one rank (m and v of t_n
// floats), or a group's ranks (opts.device_comm_ranks > 1: each unit in `ranks` parts of
// S_TALIGN multiples; gacc, m and v hold this rank's; ubuf and ebuf the largest unit's whole).
static void s_group_sizes(rl_model_cuda_t *self, const rl_model_opts_t *opts) {
    self->ranks = opts->device_comm_ranks > 1 ? opts->device_comm_ranks : 1;
    self->rank = self->ranks > 1 ? opts->device_comm_rank : 0;
    self->pn = self->ranks > 1 ? 0 : self->t_n;
    self->ub_n = self->eb_n = 0;
    const size_t W = (size_t)self->ranks;
    for (int i = 0; self->ranks > 1 && i < self->n_units; i++) {
        s_unit_t *u = &self->units[i];
        u->part = s_up((u->n + W - 1) / W, S_TALIGN);
        u->at = self->pn;
        self->pn += u->part;
        u->in_ebuf = u->key == S_UE && self->cfg.tie_word_embeddings;
        size_t *b = u->in_ebuf ? &self->eb_n : &self->ub_n;
        *b = W * u->part > *b ? W * u->part : *b;
    }
    // ZeRO-3 of the masters: every unit's part but the final norm's, which stays whole, back to
    // back (tmem: ro, r_n); the bf16 copies of the embedding and the head whole (tbf: bo, b_n);
    // the layers' bf16 copies gathered whole into hbuf before they are computed, their vectors
    // whole (lvec: lv_n)
    self->mshard = self->ranks > 1 && self->tune == RL_TUNE_FULL && s_grads(self) &&
                   opts->device_shard_masters;
    self->lean = self->infer && self->tune == RL_TUNE_FULL && self->ranks == 1;
    self->r_n = self->b_n = self->wb_n = self->mp_n = self->lv_n = 0;
    for (int i = 0; i < self->n_units; i++) {
        s_unit_t *u = &self->units[i];
        u->sharded = self->mshard && u->key != S_UN;
        u->at_use = u->sharded && u->key >= 0;
        u->ro = u->sharded ? self->mp_n : self->r_n;
        if (u->sharded) {
            self->mp_n += u->part;
        } else if (!self->lean) { // lean: no masters
            self->r_n += u->n;
        }
        u->whole_h = !self->mshard || (u->sharded && !u->at_use);
        u->bo = self->b_n;
        self->b_n += u->whole_h ? u->n : 0;
        self->wb_n = u->at_use && W * u->part > self->wb_n ? W * u->part : self->wb_n;
        self->lv_n += u->at_use || self->lean ? u->vn : 0;
    }
    // each gathered layer's vectors' places in lvec (lean: every vector's), in tensor order
    size_t at = 0;
    for (int i = 0; i < self->n_tensors; i++) {
        s_tensor_t *t = &self->tensors[i];
        if (t->trainable && t->vec && (self->units[t->unit].at_use || self->lean)) {
            t->v_at = at;
            at += s_up(t->n, S_TALIGN);
        }
    }
}

int rl_model_cuda_plan(const rl_hf_config_t *cfg, const rl_model_opts_t *opts, int has_head,
                       int rows, rl_model_device_plan_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    char why[1536];
    const rl_cuda_module_t *cu = rl_device_cuda(why, sizeof why);
    if (!cu) {
        return rl_errf(err, err_len, RL_ENOTFOUND, "a plan needs the CUDA module: %s", why);
    }
    rl_model_cuda_t *self = calloc(1, sizeof *self);
    if (!self) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    const int lora = opts->tune == RL_TUNE_LORA;
    self->cu = cu;
    self->cfg = *cfg;
    self->tune = opts->tune;
    self->recompute = opts->recompute;
    self->infer = opts->device_infer;
    self->host_optim = opts->device_host_optim;
    s_dims(self, cfg, lora ? opts->lora_r : 0, lora ? opts->lora_targets : 0, has_head,
           rows > 0 ? rows : 4096);
    self->plan_p = lora ? opts->lora_dropout : 0.0f;
    s_shard_sizes(self, opts);
    int rc = s_plan(self, err, err_len);
    if (!rc) {
        const int grads = s_grads(self);
        s_group_sizes(self, opts);
        out->weights = self->w_bytes;
        s_trainable_bytes(self, grads, grads && !self->host_optim, &out->trainable, &out->grads,
                          &out->optim);
        out->acts = s_layout(self, NULL);
    }
    free(self->tensors);
    free(self->units);
    free(self);
    return rc;
}

size_t rl_model_cuda_cache_plan(const rl_hf_config_t *cfg, int n_slots, int max_len, int rows,
                                int draws) {
    const size_t KVD = (size_t)cfg->num_key_value_heads * (size_t)cfg->head_dim;
    const size_t V = (size_t)cfg->vocab_size, R = (size_t)rows;
    const size_t es = s_attn_fp32() ? 4 : 2; // the cache's elements: bf16, or fp32
    size_t b = (size_t)cfg->num_hidden_layers * 2 * (size_t)n_slots * (size_t)max_len * KVD * es;
    b += (size_t)max_len * (size_t)cfg->head_dim * 4; // the RoPE table
    b += S_STEP_INTS(R) * 4;                          // a step's inputs
    b += (size_t)S_LG * V * 4;                        // rl_model_step's logits chunk
    if (draws) { // rl_model_step_draw: the logits of a row per slot, and the draws' block
        b += (size_t)n_slots * V * 4 + (size_t)n_slots * 20;
    }
    return b;
}

int rl_model_cuda_new(rl_model_t *host, const rl_model_opts_t *opts, rl_model_cuda_t **out,
                      char *err, size_t err_len) {
    *out = NULL;
    char why[1536];
    if (opts->sharded) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "cuda:%d: a sharded model (FSDP) cannot run on a GPU yet",
                       opts->device.index);
    }
    if (opts->device_rows < 0) {
        return rl_errf(err, err_len, RL_EINVAL, "device_rows %d must be >= 0 (0: 4096)",
                       opts->device_rows);
    }
    rl_device_info_t info;
    int rc = rl_device_check(&opts->device, 0, &info, err, err_len);
    if (rc) {
        return rc;
    }
    const rl_cuda_module_t *cu = rl_device_cuda(why, sizeof why);
    if (!cu) {
        return rl_errf(err, err_len, RL_ENOTFOUND, "cuda:%d: %s", opts->device.index, why);
    }
    rl_model_cuda_t *self = calloc(1, sizeof *self);
    if (!self) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    const rl_hf_config_t *cfg = rl_model_config(host);
    rl_lora_t *lo = rl_model_lora(host);
    self->cu = cu;
    self->device = opts->device.index;
    self->host = host;
    self->cfg = *cfg;
    self->tune = opts->tune;
    self->recompute = opts->recompute;
    self->infer = opts->device_infer;
    self->host_optim = opts->device_host_optim;
    s_dims(self, cfg, lo ? rl_lora_rank(lo) : 0, lo ? rl_lora_targets(lo) : 0,
           rl_model_params(host)->lm_head != NULL, opts->device_rows ? opts->device_rows : 4096);
    self->seed = opts->seed;
    const char *graphs = getenv("RLCTL_CUDA_GRAPHS");
    self->graphs = !(graphs && strcmp(graphs, "0") == 0);
    self->attn_fp32 = s_attn_fp32();
    self->layers = calloc((size_t)self->L, sizeof *self->layers);
    self->lora_a = calloc((size_t)self->L * RL_LORA_NMOD, sizeof *self->lora_a);
    self->lora_b = calloc((size_t)self->L * RL_LORA_NMOD, sizeof *self->lora_b);
    self->acts = calloc((size_t)self->sets, sizeof *self->acts);
    char msg[512] = "";
    if (!self->layers || !self->lora_a || !self->lora_b || !self->acts) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    s_shard_sizes(self, opts);
    if (self->sranks > 1 &&
        (!opts->device_shard_id || self->srank < 0 || self->srank >= self->sranks)) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "cuda:%d: layers sharded over %d ranks need the group's id and a rank "
                     "below %d (%d)",
                     self->device, self->sranks, self->sranks, opts->device_shard_rank);
        goto fail;
    }
    if ((rc = s_plan(self, err, err_len)) != 0) {
        goto fail;
    }
    s_group_sizes(self, opts);
    if (self->ranks > 1 && (!opts->device_comm_id || self->rank < 0 || self->rank >= self->ranks ||
                            self->host_optim || self->infer)) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "cuda:%d: a group of %d ranks needs its id, a rank below %d (%d), and the "
                     "optimizer on the device",
                     self->device, self->ranks, self->ranks, opts->device_comm_rank);
        goto fail;
    }
    if (cu->ctx_new(self->device, &self->ctx, msg, sizeof msg) != 0) {
        rc = rl_errf(err, err_len, RL_EIO, "cuda:%d (%s): %s", self->device, info.name, msg);
        goto fail;
    }
    self->a_bytes = s_layout(self, NULL);
    // what the device must hold, checked against its free memory before anything is allocated
    const int grads = s_grads(self);
    size_t t_bytes, g_bytes, o_bytes;
    s_trainable_bytes(self, grads, grads && !self->host_optim, &t_bytes, &g_bytes, &o_bytes);
    size_t need = self->w_bytes + t_bytes + g_bytes + o_bytes + self->a_bytes;
    rl_cuda_device_info_t di;
    if (cu->device_info(self->device, &di, msg, sizeof msg) != 0) {
        rc = rl_errf(err, err_len, RL_EIO, "cuda:%d: %s", self->device, msg);
        goto fail;
    }
    if (need > di.mem_free) {
        rc = rl_errf(err, err_len, RL_ENOMEM,
                     "cuda:%d (%s): the model needs %zu bytes of device memory (frozen weights "
                     "%zu, trainable parameters and their bf16 copies %zu, gradients %zu, "
                     "AdamW moments %zu, activations and scratch %zu for %d tokens) and %zu of "
                     "%zu are free",
                     self->device, di.name, need, self->w_bytes, t_bytes, g_bytes, o_bytes,
                     self->a_bytes, self->rows, di.mem_free, di.mem_total);
        goto fail;
    }
    if ((self->w_bytes && cu->dmalloc(self->ctx, self->w_bytes, &self->wmem) != 0) ||
        (self->t_n && (cu->dmalloc(self->ctx, (self->r_n ? self->r_n : 1) * sizeof(float),
                                   (void **)&self->tmem) ||
                       cu->dmalloc(self->ctx, (self->b_n ? self->b_n : 1) * sizeof(uint16_t),
                                   (void **)&self->tbf))) ||
        (self->mshard &&
         (cu->dmalloc(self->ctx, self->mp_n * sizeof(float), (void **)&self->mpart) ||
          cu->dmalloc(self->ctx, self->wb_n * sizeof(uint16_t), (void **)&self->hbuf))) ||
        ((self->mshard || self->lean) &&
         cu->dmalloc(self->ctx, (self->lv_n ? self->lv_n : 1) * sizeof(float),
                     (void **)&self->lvec)) ||
        (self->t_n && grads && self->ranks == 1 &&
         cu->dmalloc(self->ctx, self->t_n * sizeof(float), (void **)&self->gmem)) ||
        (self->t_n && grads && self->ranks > 1 &&
         (cu->dmalloc(self->ctx, self->pn * sizeof(float), (void **)&self->gacc) ||
          cu->dmalloc(self->ctx, self->ub_n * sizeof(float), (void **)&self->ubuf) ||
          (self->eb_n &&
           cu->dmalloc(self->ctx, self->eb_n * sizeof(float), (void **)&self->ebuf)))) ||
        (self->t_n && o_bytes &&
         (cu->dmalloc(self->ctx, self->pn * sizeof(float), (void **)&self->mmem) ||
          cu->dmalloc(self->ctx, self->pn * sizeof(float), (void **)&self->vmem)))) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "cuda:%d (%s): the model needs %zu bytes: %s",
                     self->device, di.name, need, cu->errmsg(self->ctx));
        goto fail;
    }
    s_bind(self);
    self->stage = malloc(S_STAGE * sizeof(uint16_t));
    if (!self->stage) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory for the device model's staging");
        goto fail;
    }
    if ((rc = s_rows_alloc(self, self->rows)) != 0) {
        rl_errf(err, err_len, rc, "%s", self->errmsg);
        goto fail;
    }
    // the gaps between trainable tensors stay zeros (whole-array kernels read them); so do a
    // sharded layer's, gathered with it
    if ((self->shards &&
         cu->dset(self->ctx, self->shards, 0, (size_t)self->L * self->sbytes) != 0) ||
        (self->tmem && cu->dset(self->ctx, self->tmem, 0, self->r_n * sizeof(float))) ||
        (self->tbf && cu->dset(self->ctx, self->tbf, 0, self->b_n * sizeof(uint16_t))) ||
        (self->mpart && cu->dset(self->ctx, self->mpart, 0, self->mp_n * sizeof(float))) ||
        (self->lvec && cu->dset(self->ctx, self->lvec, 0, self->lv_n * sizeof(float))) ||
        (self->gmem && cu->dset(self->ctx, self->gmem, 0, self->t_n * sizeof(float))) ||
        (self->gacc && cu->dset(self->ctx, self->gacc, 0, self->pn * sizeof(float))) ||
        (self->mmem && cu->dset(self->ctx, self->mmem, 0, self->pn * sizeof(float))) ||
        (self->vmem && cu->dset(self->ctx, self->vmem, 0, self->pn * sizeof(float)))) {
        rc = rl_errf(err, err_len, RL_EIO, "cuda:%d: %s", self->device, cu->errmsg(self->ctx));
        goto fail;
    }
    if ((rc = rl_model_cuda_push(self, 1)) != 0) {
        rl_errf(err, err_len, rc, "%s", self->errmsg);
        goto fail;
    }
    // the group last: ncclCommInitRank waits for every rank, which has then loaded its model
    if (self->ranks > 1 &&
        cu->comm_new(self->ctx, opts->device_comm_id, self->ranks, self->rank, &self->comm) != 0) {
        rc = rl_errf(err, err_len, RL_EIO, "cuda:%d: the mesh's NCCL group: %s", self->device,
                     cu->errmsg(self->ctx));
        goto fail;
    }
    if (self->sranks > 1 && cu->comm_new(self->ctx, opts->device_shard_id, self->sranks,
                                         self->srank, &self->scomm) != 0) {
        rc = rl_errf(err, err_len, RL_EIO, "cuda:%d: the NCCL group of the sharded layers: %s",
                     self->device, cu->errmsg(self->ctx));
        goto fail;
    }
    *out = self;
    return 0;
fail:
    rl_model_cuda_destroy(&self);
    return rc;
}

void rl_model_cuda_destroy(rl_model_cuda_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_model_cuda_t *self = *self_p;
    if (self->ctx) {
        if (self->ipc_src) {
            self->cu->ipc_close(self->ctx, self->ipc_src);
        }
        self->cu->comm_free(self->comm);
        self->cu->comm_free(self->scomm);
        self->cu->dfree(self->ctx, self->wmem);
        self->cu->dfree(self->ctx, self->tmem);
        self->cu->dfree(self->ctx, self->tbf);
        self->cu->dfree(self->ctx, self->gmem);
        self->cu->dfree(self->ctx, self->gacc);
        self->cu->dfree(self->ctx, self->mpart);
        self->cu->dfree(self->ctx, self->lvec);
        self->cu->dfree(self->ctx, self->hbuf);
        self->cu->dfree(self->ctx, self->ubuf);
        self->cu->dfree(self->ctx, self->ebuf);
        self->cu->dfree(self->ctx, self->mmem);
        self->cu->dfree(self->ctx, self->vmem);
        self->cu->dfree(self->ctx, self->amem);
        self->cu->dfree(self->ctx, self->d_lg);
        self->cu->dfree(self->ctx, self->d_hd);
        self->cu->ctx_free(self->ctx);
    }
    free(self->layers);
    free(self->lora_a);
    free(self->lora_b);
    free(self->tensors);
    free(self->units);
    free(self->acts);
    s_staging_free(self);
    free(self->stage);
    free(self->h_hrows);
    free(self->h_hdw);
    free(self);
    *self_p = NULL;
}

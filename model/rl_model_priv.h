// rl_model_priv — what the model's two files share and nothing outside model/ uses: the model's
// and the KV cache's structs, the logprob head's chunking, and the helpers the cached step
// (rl_kv.c) calls in rl_model.c. Not an API: rl_model.h is. Names are rl_mdl_* / RL_MDL_*.
#ifndef RL_MODEL_PRIV_H
#define RL_MODEL_PRIV_H

#include "rl_hf.h"
#include "rl_lora.h"
#include "rl_model.h"
#include "rl_model_cuda.h"
#include "rl_pool.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define RL_MDL_BIG_ENDIAN 1
#else
#define RL_MDL_BIG_ENDIAN 0
#endif

// Rows of logits alive at once in the logprob head and in rl_model_step's sparse logits: as many
// as keep chunk*V logits within RL_MDL_HEAD_FLOATS (4 MiB), between 64 and 256 rows (rl_logprob's
// cap): 256 at V <= 4096, 128 at V = 8192, the floor of 64 from V = 16,384 (V = 151,936: 39 MB
// of logits, as before). Each chunk re-packs the lm_head in sgemm and (backward) reads and
// writes its whole gradient; at V = 8192, C = 256, 2048 rows the head's forward + backward
// took 480 ms at 128 rows vs 560 ms at 64, and no less at 256 (logits no longer in cache).
#ifndef RL_MDL_HEAD_FLOATS
#define RL_MDL_HEAD_FLOATS ((size_t)1 << 20)
#endif
#define RL_MDL_HEAD_CHUNK_MIN 64
#define RL_MDL_HEAD_CHUNK_MAX 256

static inline int rl_mdl_head_chunk(int V) {
    size_t c = RL_MDL_HEAD_FLOATS / (size_t)V;
    c = c < RL_MDL_HEAD_CHUNK_MIN ? RL_MDL_HEAD_CHUNK_MIN : c;
    return c > RL_MDL_HEAD_CHUNK_MAX ? RL_MDL_HEAD_CHUNK_MAX : (int)c;
}

// One layer's saved activations of a forward; every pointer lies in the work allocation.
// N = B*T rows; QD = NH*D, KVD = NKV*D.
typedef struct {
    float *ln1, *rstd1;      // (N,C), (N)     input_layernorm output and 1/rms
    float *q, *k;            // (N,QD), (N,KVD) projections before q_norm/k_norm (qwen3 only)
    float *rstdq, *rstdk;    // (N*NH), (N*NKV) per-head 1/rms (qwen3 only)
    float *qr, *kr, *v;      // (N,QD), (N,KVD), (N,KVD) q and k after norm and RoPE; v
    float *lse;              // (N*NH) attention log-sum-exp (rl_attention_forward_packed)
    float *att;              // (N,QD) attention output
    float *h;                // (N,C) residual stream after attention
    float *ln2, *rstd2;      // (N,C), (N)
    float *gate, *up, *act;  // (N,I) each; act = silu(gate) * up
    float *xa[RL_LORA_NMOD]; // (N,R) LoRA x A^T per targeted module
} rl_mdl_act_t;

// Lanes of one forward at most (threads beyond it leave BLAS threads to each lane).
enum { RL_MDL_LANES_MAX = 16 };
_Static_assert((int)RL_MDL_LANES_MAX <= (int)RL_POOL_MAX, "a lane per pool worker");
// Rows of a step per lane at least (below, a lane's GEMMs are too small to gain).
enum { RL_MDL_STEP_LANE_ROWS = 16 };

struct rl_model {
    rl_hf_config_t cfg;
    rl_model_opts_t opts;
    int C, I, NH, NKV, D, QD, KVD, V, L;

    // ---- parameters
    rl_st_model_t *st;                   // kept open while tensors point into its mapping
    float *param_mem;                    // owned parameter floats (FULL: every tensor in HF order)
    size_t param_n;                      // floats in param_mem
    int params_in_map;                   // 1: some tensors point into the read-only mmap
    int host_dropped;                    // rl_model_drop_host_weights: the device's only
    size_t dropped_n;                    // and a full model's trainable floats then
    rl_layer_params_t *layers, *glayers; // [L] each
    rl_model_params_t params, grads;     // grads: FULL only (pointers NULL otherwise)
    float *grad_mem;                     // FULL: same layout as param_mem
    float *inv_freq;                     // (D/2)
    int has_head;          // a vocabulary head (lm_head, or the tied embedding) was loaded
    rl_model_unit_fn hook; // opts.sharded: gathers and reduces units (rl_model.h)
    void *hook_ctx;

    // ---- LoRA
    rl_lora_t *lora; // NULL when no adapter
    int lora_disabled;
    uint64_t dropout_seed;

    // ---- training work buffers (grown on demand, never shrunk). A forward packs its B
    // sequences without padding: sequence b is rows starts[b]..starts[b+1]-1, N = starts[B].
    int N_cap, T_cap, B_cap, sets_cap, grads_cap; // capacities of the work allocation
    float *work;
    int32_t *iwork;
    rl_mdl_act_t *acts;                // [sets_cap]; acts[l] (or acts[0] with recompute / eval)
    float *x;                          // (L+1, N, C) layer inputs; x[L] is the final norm's input
    float *lnf, *rstdf;                // (N,C), (N) final norm
    float *lp_row, *ent_row, *dlp_row; // (N) head outputs per row (row t predicts token t+1)
    float *mask, *xdrop, *ddrop;       // (N*maxin) LoRA dropout mask, branch input, its grad
    float *att_scratch, *head_scratch;
    float *rope_cs; // (T,D) cos and sin of each position's angles (rl_rope_table)
    int rope_n;     // positions rope_cs holds
    float *dres, *dln, *datt, *dqr, *dkr, *dq, *dk, *dv, *dact, *dgate, *dup, *dxa; // grads
    int32_t *ids, *targets;      // (N) embedding ids, head targets (-1: none)
    int *pos, *negpos, *lengths; // (N) positions, negated positions; (B)
    int *starts;                 // (B+1) first row of each sequence
    int *grow;                   // (N) the row's index b*T + t in the caller's padded batch: the
                                 // LoRA dropout mask of a row is a function of it, not of packing
    float *hid;                  // (B*T, C) rl_model_hidden: lnf unpacked, zeros at padding
    size_t hid_cap;

    // ---- lanes: a forward of B >= 2 sequences with T threads runs as P = min(T, B) lanes of
    // contiguous sequences, each a shadow model (shared weights; its own work buffers and
    // gradients, added into these after backward) on a thread of its own with one-thread BLAS.
    // lane 0 is this model itself.
    int shadow;                        // 1: a lane's shadow (owns only work buffers and gradients)
    int lanes_max;                     // rl_model_set_lanes (0: the BLAS thread count)
    int step_lanes;                    // rl_model_set_step_lanes (0: the BLAS thread count)
    rl_pool_t *pool;                   // the workers of rl_model_step (created on first use)
    int n_lanes;                       // lanes of the last forward (1: no shadows ran)
    int lane_b0[RL_MDL_LANES_MAX + 1]; // lane k has sequences lane_b0[k]..lane_b0[k+1]-1
    rl_model_t *lanes[RL_MDL_LANES_MAX]; // [1..] shadows (created on first use)

    // ---- last forward
    int B, T, N, fwd_valid, fwd_train; // this lane's sequences, their T, packed rows
    int fwd_B, fwd_T;                  // the caller's batch (B,T) (all lanes)
    float temperature;
    uint64_t fwd_step;

    // ---- a GPU (opts.device): the device half, which runs forward and backward (rl_model_cuda.h)
    rl_model_cuda_t *cuda;

    char errmsg[512];
};

struct rl_kvcache {
    const rl_model_t *model;
    int n_slots, max_len;
    size_t ldk;     // rl_attention_ldk(max_len)
    float *k;       // (L, n_slots, KVD, ldk): K transposed, after k_norm and RoPE
    float *v;       // (L, n_slots, max_len, KVD)
    float *rope_cs; // (max_len, D) RoPE cos and sin of every position (rl_rope_table)
    // rl_model_step's scratch, grown with n: shared rows, and per worker xa and att_scratch
    int n_cap, r_cap, p_cap; // rows, LoRA rank and workers the scratch was laid out for
    float *work;
    float *x, *ln, *q, *kk, *vv, *att, *o, *gate, *up, *hs, *lg;
    float *xa[RL_MDL_LANES_MAX], *att_scratch[RL_MDL_LANES_MAX];
    rl_model_cuda_cache_t *dev; // a model on a GPU: the cache lives there (k, v, rope_cs NULL)
};

// A layer's projections, in LoRA's module order (rl_mdl_proj_cols's m).
enum { RL_MDL_Q = 0, RL_MDL_K, RL_MDL_V, RL_MDL_O, RL_MDL_GATE, RL_MDL_UP, RL_MDL_DOWN };

// ---- rl_model.c's helpers that rl_kv.c calls --------------------------------------------------

// Writes the message into self->errmsg and returns code.
int rl_mdl_err(rl_model_t *self, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Elements of a tensor of the spec (1-D or 2-D).
int64_t rl_mdl_numel(const rl_hf_tensor_spec_t *t);
// Columns c0..c1-1 of module m of layer l (m -1: the vocabulary head) into out (n, ldo), with
// the LoRA branch (see rl_model.c).
void rl_mdl_proj_cols(rl_model_t *self, int l, int m, float *out, int ldo, float *xa,
                      const float *inp, const float *lx, const float *W, const float *bias, int n,
                      int IC, int c0, int c1);
// Frees the lanes of a lane-parallel forward.
void rl_mdl_lanes_free(rl_model_t *self);
// Runs fn(arg, k, P') for k < P' on the model's pool with one-thread BLAS; returns P'.
int rl_mdl_pool_run(rl_model_t *self, void (*fn)(void *arg, int k, int P), void *arg, int P);

#endif

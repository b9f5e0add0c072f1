// rl_model — the Llama / Qwen2 / Qwen3 decoder over rl_layers' kernels (see rl_model.h).
// Loading binds every tensor of rl_hf_tensor_specs to a struct of pointers (llm.c): into the
// read-only mmap for frozen F32 weights, into one owned allocation otherwise. Forward is a flat
// list of layer calls, backward the same calls in exact reverse order; the cached step for the
// sampler shares the projections with forward. No optimizer, loss, process or collective here.
#include "rl_model.h"
#include "rl_model_priv.h"

#include "rl_err.h"
#include "rl_layers.h"
#include "rl_lora.h"
#include "rl_model_cuda.h"
#include "rl_pool.h"
#include "rl_rng.h"
#include "rl_safetensors.h"

#include <cblas.h>
#undef I // OpenBLAS's cblas.h pulls in <complex.h>; I is the MLP width here

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int rl_mdl_err(rl_model_t *self, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->errmsg, sizeof self->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

void rl_model_opts_default(rl_model_opts_t *opts) {
    memset(opts, 0, sizeof *opts);
    opts->tune = RL_TUNE_NONE;
    opts->lora_r = 8;
    opts->lora_alpha = 16.0f;
    opts->lora_dropout = 0.0f;
    opts->lora_targets = RL_LORA_Q | RL_LORA_V;
    opts->use_rslora = 0;
    opts->seed = 0;
    opts->recompute = 0;
    opts->threads = 0;
}

// ---------------------------------------------------------------------------------------------
// parameter layout

float **rl_model_params_find(rl_model_params_t *p, int L, const char *name) {
    static const struct {
        const char *suffix;
        size_t off;
    } fields[] = {
        {"input_layernorm.weight", offsetof(rl_layer_params_t, input_layernorm)},
        {"self_attn.q_proj.weight", offsetof(rl_layer_params_t, q_proj)},
        {"self_attn.q_proj.bias", offsetof(rl_layer_params_t, q_bias)},
        {"self_attn.k_proj.weight", offsetof(rl_layer_params_t, k_proj)},
        {"self_attn.k_proj.bias", offsetof(rl_layer_params_t, k_bias)},
        {"self_attn.v_proj.weight", offsetof(rl_layer_params_t, v_proj)},
        {"self_attn.v_proj.bias", offsetof(rl_layer_params_t, v_bias)},
        {"self_attn.o_proj.weight", offsetof(rl_layer_params_t, o_proj)},
        {"self_attn.o_proj.bias", offsetof(rl_layer_params_t, o_bias)},
        {"self_attn.q_norm.weight", offsetof(rl_layer_params_t, q_norm)},
        {"self_attn.k_norm.weight", offsetof(rl_layer_params_t, k_norm)},
        {"post_attention_layernorm.weight", offsetof(rl_layer_params_t, post_attention_layernorm)},
        {"mlp.gate_proj.weight", offsetof(rl_layer_params_t, gate_proj)},
        {"mlp.gate_proj.bias", offsetof(rl_layer_params_t, gate_bias)},
        {"mlp.up_proj.weight", offsetof(rl_layer_params_t, up_proj)},
        {"mlp.up_proj.bias", offsetof(rl_layer_params_t, up_bias)},
        {"mlp.down_proj.weight", offsetof(rl_layer_params_t, down_proj)},
        {"mlp.down_proj.bias", offsetof(rl_layer_params_t, down_bias)},
    };
    if (strcmp(name, "model.embed_tokens.weight") == 0) {
        return &p->embed_tokens;
    }
    if (strcmp(name, "model.norm.weight") == 0) {
        return &p->norm;
    }
    if (strcmp(name, "lm_head.weight") == 0) {
        return &p->lm_head;
    }
    const char *pre = "model.layers.";
    if (strncmp(name, pre, strlen(pre)) != 0) {
        return NULL;
    }
    char *end;
    long l = strtol(name + strlen(pre), &end, 10);
    if (*end != '.' || l < 0 || l >= L) {
        return NULL;
    }
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        if (strcmp(end + 1, fields[i].suffix) == 0) {
            return (float **)((char *)&p->layers[l] + fields[i].off);
        }
    }
    return NULL;
}

int64_t rl_mdl_numel(const rl_hf_tensor_spec_t *t) {
    return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
}

static int s_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// Common part of load and new_random: the struct, the layer arrays, RoPE, LoRA.
static rl_model_t *s_new(const rl_hf_config_t *cfg, const rl_model_opts_t *opts, char *err,
                         size_t err_len) {
    rl_model_opts_t def;
    if (!opts) {
        rl_model_opts_default(&def);
        opts = &def;
    }
    if (opts->tune != RL_TUNE_NONE && opts->tune != RL_TUNE_FULL && opts->tune != RL_TUNE_LORA) {
        rl_errf(err, err_len, RL_EINVAL, "unknown tune mode %d", (int)opts->tune);
        return NULL;
    }
    if (opts->tune == RL_TUNE_LORA &&
        (opts->lora_r < 1 || !(opts->lora_targets & RL_LORA_ALL) ||
         (opts->lora_targets & ~RL_LORA_ALL) || !(opts->lora_dropout >= 0.0f) ||
         !(opts->lora_dropout < 1.0f))) {
        rl_errf(err, err_len, RL_EINVAL, "LoRA options: r %d must be >= 1, targets 0x%x a "
                "non-empty subset of 0x7f, dropout %g in [0, 1)", opts->lora_r,
                (unsigned)opts->lora_targets, (double)opts->lora_dropout);
        return NULL;
    }
    if (cfg->head_dim % 2 != 0) {
        rl_errf(err, err_len, RL_EINVAL, "head_dim %d must be even for RoPE", cfg->head_dim);
        return NULL;
    }
    if (opts->device.cuda && opts->sharded) {
        rl_errf(err, err_len, RL_EINVAL,
                "cuda:%d: a sharded model (FSDP) cannot run on a GPU yet", opts->device.index);
        return NULL;
    }
    rl_model_t *self = calloc(1, sizeof *self);
    if (!self) {
        rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->opts = *opts;
    self->C = cfg->hidden_size;
    self->I = cfg->intermediate_size;
    self->NH = cfg->num_attention_heads;
    self->NKV = cfg->num_key_value_heads;
    self->D = cfg->head_dim;
    self->QD = self->NH * self->D;
    self->KVD = self->NKV * self->D;
    self->V = cfg->vocab_size;
    self->L = cfg->num_hidden_layers;
    self->layers = calloc((size_t)self->L, sizeof *self->layers);
    self->glayers = calloc((size_t)self->L, sizeof *self->glayers);
    self->inv_freq = malloc((size_t)(self->D / 2) * sizeof *self->inv_freq);
    if (!self->layers || !self->glayers || !self->inv_freq) {
        rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    self->params.layers = self->layers;
    self->grads.layers = self->glayers;
    self->n_lanes = 1;
    rl_rope_inv_freq(self->inv_freq, cfg);
    // the k-th training forward (k from 1) drops module m of layer l with
    // rl_lora_dropout_mask(seed, rl_lora_dropout_key(k, l, m)); a hash, not A's rl_rng stream
    self->dropout_seed = opts->seed;
    if (opts->tune == RL_TUNE_LORA) {
        self->lora = rl_lora_new(cfg, opts->lora_r, opts->lora_alpha, opts->lora_dropout,
                                 opts->lora_targets, opts->use_rslora, opts->seed, 1);
        if (!self->lora) {
            rl_errf(err, err_len, RL_ENOMEM, "out of memory for the LoRA adapter");
            goto fail;
        }
    }
    rl_layers_set_threads(opts->threads);
    return self;
fail:
    rl_model_destroy(&self);
    return NULL;
}

// FULL: the gradient allocation, bound in the same layout as param_mem (HF order).
static int s_alloc_grads(rl_model_t *self, const rl_hf_tensor_spec_t *specs, int n, char *err,
                         size_t err_len) {
    self->grad_mem = calloc(self->param_n, sizeof *self->grad_mem);
    if (!self->grad_mem) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory for %zu gradients",
                       self->param_n);
    }
    float *g = self->grad_mem;
    for (int i = 0; i < n; i++) {
        float **slot = rl_model_params_find(&self->grads, self->L, specs[i].name);
        RL_ASSERT(slot);
        *slot = g;
        g += rl_mdl_numel(&specs[i]);
    }
    if (self->cfg.tie_word_embeddings) {
        self->grads.lm_head = self->grads.embed_tokens; // both uses accumulate into one tensor
    }
    return 0;
}

// The device half at load; the NCCL ids the options borrow are spent then (the groups are made),
// so the model's copy forgets them: a later rebuild (an adapter load) refuses a group, saying
// so, instead of reading the caller's freed id.
static int s_cuda_new(rl_model_t *self, char *err, size_t err_len) {
    int rc = rl_model_cuda_new(self, &self->opts, &self->cuda, err, err_len);
    self->opts.device_comm_id = NULL;
    self->opts.device_shard_id = NULL;
    return rc;
}

rl_model_t *rl_model_load(const char *dir, const rl_model_opts_t *opts, char *err,
                          size_t err_len) {
    rl_hf_config_t cfg;
    if (rl_hf_config_load(dir, &cfg, err, err_len) != 0) {
        return NULL;
    }
    rl_model_t *self = s_new(&cfg, opts, err, err_len);
    rl_hf_tensor_spec_t *specs = NULL;
    if (!self) {
        return NULL;
    }
    if (!(self->st = rl_st_model_open(dir, err, err_len)) ||
        rl_hf_check_weights_ex(&cfg, self->st, self->opts.seq_cls, err, err_len) != 0) {
        goto fail;
    }
    int n = rl_hf_tensor_specs(&cfg, NULL, 0);
    specs = calloc((size_t)n, sizeof *specs);
    if (!specs) {
        rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    rl_hf_tensor_specs(&cfg, specs, n);
    // a sequence classifier without a vocabulary head: lm_head.weight (the last spec) is absent
    if (self->opts.seq_cls && n > 0 && strcmp(specs[n - 1].name, "lm_head.weight") == 0 &&
        !rl_st_model_find(self->st, "lm_head.weight")) {
        n--;
    }
    // sharded: the caller copies its shards out of what load keeps, then drops it
    const int full = self->opts.tune == RL_TUNE_FULL && !self->opts.sharded;
    // A frozen F32 tensor is used in place when the host reads it as floats: little-endian and
    // 4-byte aligned (a foreign writer may leave the data unaligned). Everything else is
    // converted once into param_mem.
    size_t owned = 0;
    for (int i = 0; i < n; i++) {
        const rl_st_tensor_t *t = rl_st_model_find(self->st, specs[i].name);
        int in_place = !full && !RL_MDL_BIG_ENDIAN && t->dtype == RL_DTYPE_F32 &&
                       ((uintptr_t)t->data % sizeof(float)) == 0;
        owned += in_place ? 0 : (size_t)rl_mdl_numel(&specs[i]);
    }
    if (owned && !(self->param_mem = malloc(owned * sizeof *self->param_mem))) {
        rl_errf(err, err_len, RL_ENOMEM, "out of memory for %zu parameters", owned);
        goto fail;
    }
    self->param_n = owned;
    float *p = self->param_mem;
    for (int i = 0; i < n; i++) {
        const rl_st_tensor_t *t = rl_st_model_find(self->st, specs[i].name);
        float **slot = rl_model_params_find(&self->params, self->L, specs[i].name);
        RL_ASSERT(slot);
        int in_place = !full && !RL_MDL_BIG_ENDIAN && t->dtype == RL_DTYPE_F32 &&
                       ((uintptr_t)t->data % sizeof(float)) == 0;
        // a NaN or inf weight would make every logprob NaN: refused here, naming the tensor
        if (rl_st_check_finite(t, dir, err, err_len) != 0) {
            goto fail;
        }
        if (in_place) {
            *slot = (float *)(uintptr_t)t->data; // read-only mapping: frozen weights only
            self->params_in_map = 1;
        } else {
            rl_st_to_f32(p, t);
            *slot = p;
            p += rl_mdl_numel(&specs[i]);
        }
    }
    if (cfg.tie_word_embeddings) {
        self->params.lm_head = self->params.embed_tokens;
    }
    self->has_head = self->params.lm_head != NULL;
    if (full && s_alloc_grads(self, specs, n, err, err_len) != 0) {
        goto fail;
    }
    if (!self->params_in_map) {
        rl_st_model_destroy(&self->st); // nothing borrows the mapping
    }
    if (self->opts.device.cuda && s_cuda_new(self, err, err_len) != 0) {
        goto fail;
    }
    free(specs);
    return self;
fail:
    free(specs);
    rl_model_destroy(&self);
    return NULL;
}

rl_model_t *rl_model_new_random(const rl_hf_config_t *cfg, const rl_model_opts_t *opts,
                                uint64_t seed, char *err, size_t err_len) {
    rl_model_t *self = s_new(cfg, opts, err, err_len);
    rl_hf_tensor_spec_t *specs = NULL;
    if (!self) {
        return NULL;
    }
    int n = rl_hf_tensor_specs(cfg, NULL, 0);
    specs = calloc((size_t)n, sizeof *specs);
    self->param_n = (size_t)rl_hf_param_count(cfg);
    self->param_mem = malloc(self->param_n * sizeof *self->param_mem);
    if (!specs || !self->param_mem) {
        rl_errf(err, err_len, RL_ENOMEM, "out of memory for %zu parameters", self->param_n);
        goto fail;
    }
    rl_hf_tensor_specs(cfg, specs, n);
    // the draws of `rlctl init` (cli/cmd_init.c): one stream, tensor by tensor in HF order
    rl_rng_t rng;
    rl_rng_seed(&rng, seed);
    float *p = self->param_mem;
    for (int i = 0; i < n; i++) {
        int64_t numel = rl_mdl_numel(&specs[i]);
        if (s_ends_with(specs[i].name, ".bias")) {
            memset(p, 0, (size_t)numel * sizeof *p);
        } else if (s_ends_with(specs[i].name, "norm.weight")) {
            for (int64_t k = 0; k < numel; k++) {
                p[k] = 1.0f;
            }
        } else {
            rl_rng_fill_normal(&rng, p, (size_t)numel, 0.0f, (float)cfg->initializer_range);
        }
        float **slot = rl_model_params_find(&self->params, self->L, specs[i].name);
        RL_ASSERT(slot);
        *slot = p;
        p += numel;
    }
    if (cfg->tie_word_embeddings) {
        self->params.lm_head = self->params.embed_tokens;
    }
    self->has_head = 1;
    if (self->opts.tune == RL_TUNE_FULL && !self->opts.sharded &&
        s_alloc_grads(self, specs, n, err, err_len) != 0) {
        goto fail;
    }
    if (self->opts.device.cuda && s_cuda_new(self, err, err_len) != 0) {
        goto fail;
    }
    free(specs);
    return self;
fail:
    free(specs);
    rl_model_destroy(&self);
    return NULL;
}

void rl_model_destroy(rl_model_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_model_t *self = *self_p;
    RL_ASSERT(!self->shadow);
    rl_model_cuda_destroy(&self->cuda);
    rl_mdl_lanes_free(self);
    rl_pool_destroy(&self->pool);
    free(self->hid);
    rl_lora_destroy(&self->lora);
    rl_st_model_destroy(&self->st);
    free(self->param_mem);
    free(self->grad_mem);
    free(self->layers);
    free(self->glayers);
    free(self->inv_freq);
    free(self->work);
    free(self->iwork);
    free(self->acts);
    free(self);
    *self_p = NULL;
}

const rl_hf_config_t *rl_model_config(const rl_model_t *self) { return &self->cfg; }

rl_model_params_t *rl_model_params(rl_model_t *self) { return &self->params; }

rl_model_params_t *rl_model_grads(rl_model_t *self) {
    return self->opts.tune == RL_TUNE_FULL ? &self->grads : NULL;
}

float *rl_model_trainable(rl_model_t *self, size_t *n_p) {
    if (self->opts.tune == RL_TUNE_FULL) {
        *n_p = self->param_n;
        return self->param_mem;
    }
    if (self->opts.tune == RL_TUNE_LORA) {
        return rl_lora_params(self->lora, n_p);
    }
    *n_p = 0;
    return NULL;
}

rl_lora_t *rl_model_lora(rl_model_t *self) {
    return self->lora;
}

size_t rl_model_trainable_size(rl_model_t *self) {
    size_t n = 0;
    (void)rl_model_trainable(self, &n);
    return self->host_dropped && self->opts.tune == RL_TUNE_FULL ? self->dropped_n : n;
}

float *rl_model_weights_flat(rl_model_t *self, size_t *n_p) {
    // param_mem holds every tensor in HF order exactly when nothing points into the mapping
    // and it is the whole model (a frozen load may convert only some tensors)
    int whole = self->param_mem && !self->params_in_map &&
                self->param_n == (size_t)rl_hf_param_count(&self->cfg);
    *n_p = whole ? self->param_n : 0;
    return whole ? self->param_mem : NULL;
}

float *rl_model_trainable_grads(rl_model_t *self) {
    if (self->opts.tune == RL_TUNE_FULL) {
        return self->grad_mem;
    }
    if (self->opts.tune == RL_TUNE_LORA) {
        return rl_lora_grads(self->lora);
    }
    return NULL;
}

void rl_model_zero_grad(rl_model_t *self) {
    if (self->cuda && rl_model_cuda_zero_grad(self->cuda) != 0) {
        snprintf(self->errmsg, sizeof self->errmsg, "%s", rl_model_cuda_errmsg(self->cuda));
    }
    // on a GPU the gradients are the device's (zeroed there): the host's are written whole by
    // rl_model_device_pull(..., 1) before anything reads them, so they are left untouched (a
    // Llama-3-8B tuned in full: 32 GB of host memory never mapped, and not cleared every step)
    if (self->grad_mem && !self->cuda) {
        memset(self->grad_mem, 0, self->param_n * sizeof *self->grad_mem);
    }
    if (self->lora) {
        rl_lora_zero_grad(self->lora);
    }
}

int64_t rl_model_param_count(const rl_model_t *self) { return rl_hf_param_count(&self->cfg); }

const char *rl_model_errmsg(const rl_model_t *self) { return self->errmsg; }

// ---------------------------------------------------------------------------------------------
// work buffers

static int s_lora_on(const rl_model_t *self, int m) {
    return self->lora && !self->lora_disabled && (rl_lora_targets(self->lora) & (1 << m));
}

static int s_maxin(const rl_model_t *self) {
    int mx = self->C > self->I ? self->C : self->I;
    return mx > self->QD ? mx : self->QD;
}

// Lays out (when `base` is NULL only counts) every buffer of a forward/backward over N rows of
// T positions in `sets` activation sets. Returns the float count.
static size_t s_layout(rl_model_t *self, float *base, int N, int T, int sets, int with_grads) {
    const size_t n = (size_t)N, C = (size_t)self->C, I = (size_t)self->I;
    const size_t QD = (size_t)self->QD, KVD = (size_t)self->KVD;
    const size_t R = self->lora ? (size_t)rl_lora_rank(self->lora) : 0;
    const int qkn = self->cfg.qk_norm;
    const int dropout = self->lora && rl_lora_dropout(self->lora) > 0.0f;
    size_t off = 0;
#define S_TAKE(ptr, count)                                                                    \
    do {                                                                                      \
        size_t c_ = (count);                                                                  \
        if (base) {                                                                           \
            (ptr) = c_ ? base + off : NULL;                                                   \
        }                                                                                     \
        off += (c_ + 15) & ~(size_t)15; /* 64-byte steps keep rows aligned for BLAS */        \
    } while (0)
    for (int s = 0; s < sets; s++) {
        rl_mdl_act_t *a = base ? &self->acts[s] : NULL;
        rl_mdl_act_t dummy;
        if (!a) {
            a = &dummy;
        }
        S_TAKE(a->ln1, n * C);
        S_TAKE(a->rstd1, n);
        S_TAKE(a->q, qkn ? n * QD : 0);
        S_TAKE(a->k, qkn ? n * KVD : 0);
        S_TAKE(a->rstdq, qkn ? n * (size_t)self->NH : 0);
        S_TAKE(a->rstdk, qkn ? n * (size_t)self->NKV : 0);
        S_TAKE(a->qr, n * QD);
        S_TAKE(a->kr, n * KVD);
        S_TAKE(a->v, n * KVD);
        S_TAKE(a->lse, n * (size_t)self->NH);
        S_TAKE(a->att, n * QD);
        S_TAKE(a->h, n * C);
        S_TAKE(a->ln2, n * C);
        S_TAKE(a->rstd2, n);
        S_TAKE(a->gate, n * I);
        S_TAKE(a->up, n * I);
        S_TAKE(a->act, n * I);
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            int on = self->lora && (rl_lora_targets(self->lora) & (1 << m));
            S_TAKE(a->xa[m], on ? n * R : 0);
        }
    }
    S_TAKE(self->x, (size_t)(self->L + 1) * n * C);
    S_TAKE(self->lnf, n * C);
    S_TAKE(self->rstdf, n);
    S_TAKE(self->lp_row, n);
    S_TAKE(self->ent_row, n);
    S_TAKE(self->dlp_row, n);
    S_TAKE(self->mask, dropout ? n * (size_t)s_maxin(self) : 0);
    S_TAKE(self->xdrop, dropout ? n * (size_t)s_maxin(self) : 0);
    S_TAKE(self->att_scratch, rl_attention_scratch_floats(T));
    S_TAKE(self->rope_cs, (size_t)T * (size_t)self->D);
    S_TAKE(self->head_scratch,
           rl_logprob_scratch_floats(rl_mdl_head_chunk(self->V), self->C, self->V));
    size_t g = with_grads ? 1 : 0;
    S_TAKE(self->ddrop, g && dropout ? n * (size_t)s_maxin(self) : 0);
    S_TAKE(self->dres, g * n * C);
    S_TAKE(self->dln, g * n * C);
    S_TAKE(self->datt, g * n * QD);
    S_TAKE(self->dqr, g * n * QD);
    S_TAKE(self->dkr, g * n * KVD);
    S_TAKE(self->dq, g && qkn ? n * QD : 0);
    S_TAKE(self->dk, g && qkn ? n * KVD : 0);
    S_TAKE(self->dv, g * n * KVD);
    S_TAKE(self->dact, g * n * I);
    S_TAKE(self->dgate, g * n * I);
    S_TAKE(self->dup, g * n * I);
    S_TAKE(self->dxa, g * n * R);
#undef S_TAKE
    return off;
}

// Makes the work buffers hold N packed rows of B sequences of at most T tokens in `sets`
// activation sets (plus gradient scratch when the model trains). Reallocates only when
// something grows.
static int s_ensure(rl_model_t *self, int N, int B, int T, int sets) {
    const int with_grads = self->opts.tune != RL_TUNE_NONE;
    if (self->work && N <= self->N_cap && T <= self->T_cap && B <= self->B_cap &&
        sets <= self->sets_cap && with_grads <= self->grads_cap) {
        return 0;
    }
    int nN = N > self->N_cap ? N : self->N_cap, nT = T > self->T_cap ? T : self->T_cap;
    int nB = B > self->B_cap ? B : self->B_cap, ns = sets > self->sets_cap ? sets : self->sets_cap;
    free(self->work);
    free(self->iwork);
    free(self->acts);
    self->work = NULL;
    self->iwork = NULL;
    self->acts = calloc((size_t)ns, sizeof *self->acts);
    size_t nf = s_layout(self, NULL, nN, nT, ns, with_grads);
    self->work = malloc(nf * sizeof *self->work);
    self->iwork = malloc(((size_t)5 * (size_t)nN + 2 * (size_t)nB + 1) * sizeof *self->iwork);
    if (!self->acts || !self->work || !self->iwork) {
        free(self->work);
        free(self->iwork);
        free(self->acts);
        self->work = NULL;
        self->iwork = NULL;
        self->acts = NULL;
        self->N_cap = self->T_cap = self->B_cap = self->sets_cap = 0;
        return rl_mdl_err(self, RL_ENOMEM, "out of memory for activations of %d x %d tokens", B, T);
    }
    s_layout(self, self->work, nN, nT, ns, with_grads);
    self->rope_n = 0;
    self->ids = self->iwork;
    self->targets = self->iwork + nN;
    self->pos = (int *)(self->iwork + 2 * (size_t)nN);
    self->negpos = (int *)(self->iwork + 3 * (size_t)nN);
    self->grow = (int *)(self->iwork + 4 * (size_t)nN);
    self->lengths = (int *)(self->iwork + 5 * (size_t)nN);
    self->starts = (int *)(self->iwork + 5 * (size_t)nN + nB);
    self->N_cap = nN;
    self->T_cap = nT;
    self->B_cap = nB;
    self->sets_cap = ns;
    self->grads_cap = with_grads;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// projections: a Linear plus its LoRA branch

// Columns c0..c1-1 of module m of layer l (m -1: no LoRA branch, the vocabulary head): out
// (n, ldo) gets inp (n,IC) W[c0:c1]^T + bias[c0:c1] + scale * (lx A^T) B[c0:c1]^T, lx the LoRA
// branch's input (inp, or inp after dropout); saves xa = lx A^T (n,R). cblas_sgemv for a single
// row (DESIGN.md §4: sgemm with M = 1 repacks the whole matrix per call).
void rl_mdl_proj_cols(rl_model_t *self, int l, int m, float *out, int ldo, float *xa,
                      const float *inp, const float *lx, const float *W, const float *bias, int n,
                      int IC, int c0, int c1) {
    const int w = c1 - c0;
    if (w <= 0 || n <= 0) {
        return;
    }
    float *o = out + c0;
    const float *Wc = W + (size_t)c0 * IC;
    if (n == 1) {
        if (bias) {
            memcpy(o, bias + c0, (size_t)w * sizeof *o);
        }
        cblas_sgemv(CblasRowMajor, CblasNoTrans, w, IC, 1.0f, Wc, IC, inp, 1, bias ? 1.0f : 0.0f, o,
                    1);
    } else {
        for (int i = 0; bias && i < n; i++) {
            memcpy(o + (size_t)i * ldo, bias + c0, (size_t)w * sizeof *o);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w, IC, 1.0f, inp, IC, Wc, IC,
                    bias ? 1.0f : 0.0f, o, ldo);
    }
    if (m < 0 || !s_lora_on(self, m)) {
        return;
    }
    const rl_lora_t *lo = self->lora;
    const int R = rl_lora_rank(lo);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, R, IC, 1.0f, lx, IC,
                rl_lora_A(lo, l, m), IC, 0.0f, xa, R);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w, R, rl_lora_scale(lo), xa, R,
                rl_lora_B(lo, l, m) + (size_t)c0 * R, R, 1.0f, o, ldo);
}

// Module m of layer l: out (n,OC) = inp W^T + b + scale * drop(inp) A^T B^T. Dropout only when
// `dropout_key` is non-zero (training forward); saves xa (n,R).
static void s_proj(rl_model_t *self, int l, int m, float *out, float *xa, const float *inp,
                   const float *W, const float *bias, int n, int IC, int OC,
                   uint64_t dropout_key) {
    const float *x = inp;
    if (dropout_key && s_lora_on(self, m) && rl_lora_dropout(self->lora) > 0.0f && self->mask) {
        rl_lora_dropout_mask_rows(self->mask, self->grow, n, IC, rl_lora_dropout(self->lora),
                                  self->dropout_seed, dropout_key);
        rl_dropout_forward(self->xdrop, inp, self->mask, (size_t)n * (size_t)IC);
        x = self->xdrop;
    }
    rl_mdl_proj_cols(self, l, m, out, OC, xa, inp, x, W, bias, n, IC, 0, OC);
}

// Backward of s_proj: dinp (n,IC) += dout W + LoRA branch; dW, dbias (NULL: frozen) +=.
// set: dinp = (its old contents unread) instead of +=.
static void s_proj_backward(rl_model_t *self, int l, int m, float *dinp, float *dW, float *dbias,
                            const float *dout, const float *inp, const float *W, const float *xa,
                            int n, int IC, int OC, uint64_t dropout_key, int set) {
    rl_linear_backward_ex(dinp, dW, dbias, dout, inp, W, n, IC, OC, set);
    if (!s_lora_on(self, m)) {
        return;
    }
    const rl_lora_t *lo = self->lora;
    const float p = rl_lora_dropout(lo);
    float *A = rl_lora_A(lo, l, m), *Bm = rl_lora_B(lo, l, m);
    float *dA = rl_lora_dA(lo, l, m), *dB = rl_lora_dB(lo, l, m);
    const int R = rl_lora_rank(lo);
    if (dropout_key && p > 0.0f && self->mask) {
        // the branch saw drop(inp) = inp * mask: regenerate the mask, route dx_drop * mask
        size_t cnt = (size_t)n * (size_t)IC;
        rl_lora_dropout_mask_rows(self->mask, self->grow, n, IC, p, self->dropout_seed,
                                  dropout_key);
        rl_dropout_forward(self->xdrop, inp, self->mask, cnt);
        memset(self->ddrop, 0, cnt * sizeof *self->ddrop);
        rl_lora_backward(self->ddrop, dA, dB, self->dxa, dout, self->xdrop, xa, A, Bm,
                         rl_lora_scale(lo), n, IC, R, OC);
        rl_dropout_backward(dinp, self->ddrop, self->mask, cnt);
        return;
    }
    rl_lora_backward(dinp, dA, dB, self->dxa, dout, inp, xa, A, Bm, rl_lora_scale(lo), n, IC, R,
                     OC);
}

static uint64_t s_key(const rl_model_t *self, int train, int l, int m) {
    return train ? rl_lora_dropout_key(self->fwd_step, l, m) : 0;
}

// ---------------------------------------------------------------------------------------------
// training forward / backward

// One decoder layer over the batch: x_out (N,C) = layer(x_in), saving into a.
static void s_layer_forward(rl_model_t *self, int l, rl_mdl_act_t *a, const float *x_in,
                            float *x_out, int train) {
    const rl_layer_params_t *w = &self->layers[l];
    const int B = self->B, N = self->N, C = self->C, I = self->I;
    const int NH = self->NH, NKV = self->NKV, D = self->D, QD = self->QD, KVD = self->KVD;
    const float eps = self->cfg.rms_norm_eps;
    const int qkn = self->cfg.qk_norm;

    rl_rmsnorm_forward(a->ln1, a->rstd1, x_in, w->input_layernorm, eps, N, C);
    s_proj(self, l, RL_MDL_Q, qkn ? a->q : a->qr, a->xa[RL_MDL_Q], a->ln1, w->q_proj, w->q_bias, N,
           C, QD, s_key(self, train, l, RL_MDL_Q));
    s_proj(self, l, RL_MDL_K, qkn ? a->k : a->kr, a->xa[RL_MDL_K], a->ln1, w->k_proj, w->k_bias, N,
           C, KVD, s_key(self, train, l, RL_MDL_K));
    s_proj(self, l, RL_MDL_V, a->v, a->xa[RL_MDL_V], a->ln1, w->v_proj, w->v_bias, N, C, KVD,
           s_key(self, train, l, RL_MDL_V));
    if (qkn) { // Qwen3: RMSNorm over each head of q and k, before RoPE
        rl_rmsnorm_forward(a->qr, a->rstdq, a->q, w->q_norm, eps, N * NH, D);
        rl_rmsnorm_forward(a->kr, a->rstdk, a->k, w->k_norm, eps, N * NKV, D);
    }
    rl_rope_forward_table(a->qr, a->qr, self->rope_cs, self->pos, N, NH, D);
    rl_rope_forward_table(a->kr, a->kr, self->rope_cs, self->pos, N, NKV, D);
    rl_attention_forward_packed(a->att, a->lse, a->qr, a->kr, a->v, self->starts, B, NH, NKV, D,
                                self->att_scratch);
    s_proj(self, l, RL_MDL_O, a->h, a->xa[RL_MDL_O], a->att, w->o_proj, w->o_bias, N, QD, C,
           s_key(self, train, l, RL_MDL_O));
    rl_residual_forward(a->h, a->h, x_in, (size_t)N * C);

    rl_rmsnorm_forward(a->ln2, a->rstd2, a->h, w->post_attention_layernorm, eps, N, C);
    s_proj(self, l, RL_MDL_GATE, a->gate, a->xa[RL_MDL_GATE], a->ln2, w->gate_proj, w->gate_bias, N,
           C, I, s_key(self, train, l, RL_MDL_GATE));
    s_proj(self, l, RL_MDL_UP, a->up, a->xa[RL_MDL_UP], a->ln2, w->up_proj, w->up_bias, N, C, I,
           s_key(self, train, l, RL_MDL_UP));
    rl_swiglu_forward(a->act, a->gate, a->up, (size_t)N * I);
    s_proj(self, l, RL_MDL_DOWN, x_out, a->xa[RL_MDL_DOWN], a->act, w->down_proj, w->down_bias, N,
           I, C, s_key(self, train, l, RL_MDL_DOWN));
    rl_residual_forward(x_out, x_out, a->h, (size_t)N * C);
}

// Backward of s_layer_forward. On entry dres (N,C) = dL/dx_out; on return dL/dx_in.
static void s_layer_backward(rl_model_t *self, int l, const rl_mdl_act_t *a, const float *x_in) {
    const rl_layer_params_t *w = &self->layers[l];
    const int full = self->opts.tune == RL_TUNE_FULL;
    const rl_layer_params_t *g = full ? &self->glayers[l] : NULL;
    const int B = self->B, N = self->N, C = self->C, I = self->I;
    const int NH = self->NH, NKV = self->NKV, D = self->D, QD = self->QD, KVD = self->KVD;
    const int qkn = self->cfg.qk_norm;
    const size_t nI = (size_t)N * I, nQ = (size_t)N * QD, nK = (size_t)N * KVD;
    float *dres = self->dres;
#define S_G(field) (g ? g->field : NULL)

    // x_out = h + down(swiglu(gate(ln2), up(ln2))): dh = dres + (through the MLP). The first
    // writer of each gradient buffer sets it (no zeroing pass); the others add.
    s_proj_backward(self, l, RL_MDL_DOWN, self->dact, S_G(down_proj), S_G(down_bias), dres, a->act,
                    w->down_proj, a->xa[RL_MDL_DOWN], N, I, C, s_key(self, 1, l, RL_MDL_DOWN), 1);
    rl_swiglu_backward_set(self->dgate, self->dup, self->dact, a->gate, a->up, nI);
    s_proj_backward(self, l, RL_MDL_UP, self->dln, S_G(up_proj), S_G(up_bias), self->dup, a->ln2,
                    w->up_proj, a->xa[RL_MDL_UP], N, C, I, s_key(self, 1, l, RL_MDL_UP), 1);
    s_proj_backward(self, l, RL_MDL_GATE, self->dln, S_G(gate_proj), S_G(gate_bias), self->dgate,
                    a->ln2, w->gate_proj, a->xa[RL_MDL_GATE], N, C, I,
                    s_key(self, 1, l, RL_MDL_GATE), 0);
    rl_rmsnorm_backward(dres, S_G(post_attention_layernorm), self->dln, a->h,
                        w->post_attention_layernorm, a->rstd2, N, C); // dres is now dL/dh

    // h = x_in + o(attention(rope(norm(q)), rope(norm(k)), v))
    s_proj_backward(self, l, RL_MDL_O, self->datt, S_G(o_proj), S_G(o_bias), dres, a->att,
                    w->o_proj, a->xa[RL_MDL_O], N, QD, C, s_key(self, 1, l, RL_MDL_O), 1);
    memset(self->dqr, 0, nQ * sizeof(float));
    memset(self->dkr, 0, nK * sizeof(float));
    memset(self->dv, 0, nK * sizeof(float));
    rl_attention_backward_packed(self->dqr, self->dkr, self->dv, self->datt, a->qr, a->kr, a->v,
                                 a->lse, self->starts, B, NH, NKV, D, self->att_scratch);
    // RoPE is a rotation: its backward is the rotation by -angle, done in place
    rl_rope_forward_table(self->dqr, self->dqr, self->rope_cs, self->negpos, N, NH, D);
    rl_rope_forward_table(self->dkr, self->dkr, self->rope_cs, self->negpos, N, NKV, D);
    float *dQ = self->dqr, *dK = self->dkr;
    if (qkn) {
        memset(self->dq, 0, nQ * sizeof(float));
        memset(self->dk, 0, nK * sizeof(float));
        rl_rmsnorm_backward(self->dq, S_G(q_norm), self->dqr, a->q, w->q_norm, a->rstdq, N * NH,
                            D);
        rl_rmsnorm_backward(self->dk, S_G(k_norm), self->dkr, a->k, w->k_norm, a->rstdk,
                            N * NKV, D);
        dQ = self->dq;
        dK = self->dk;
    }
    s_proj_backward(self, l, RL_MDL_Q, self->dln, S_G(q_proj), S_G(q_bias), dQ, a->ln1, w->q_proj,
                    a->xa[RL_MDL_Q], N, C, QD, s_key(self, 1, l, RL_MDL_Q), 1);
    s_proj_backward(self, l, RL_MDL_K, self->dln, S_G(k_proj), S_G(k_bias), dK, a->ln1, w->k_proj,
                    a->xa[RL_MDL_K], N, C, KVD, s_key(self, 1, l, RL_MDL_K), 0);
    s_proj_backward(self, l, RL_MDL_V, self->dln, S_G(v_proj), S_G(v_bias), self->dv, a->ln1,
                    w->v_proj, a->xa[RL_MDL_V], N, C, KVD, s_key(self, 1, l, RL_MDL_V), 0);
    rl_rmsnorm_backward(dres, S_G(input_layernorm), self->dln, x_in, w->input_layernorm,
                        a->rstd1, N, C); // dres is now dL/dx_in
#undef S_G
}

// Tells the unit hook of a sharded model about unit `unit` (rl_model.h for the order).
static int s_unit(rl_model_t *self, int unit, rl_unit_event_t ev) {
    if (!self->hook || !self->opts.sharded) {
        return 0;
    }
    char msg[400] = "";
    int rc = self->hook(self->hook_ctx, unit, ev, msg, sizeof msg);
    return rc ? rl_mdl_err(self, RL_EIO, "parameters of unit %d: %s", unit, msg) : 0;
}

void rl_model_set_unit_hook(rl_model_t *self, rl_model_unit_fn fn, void *ctx) {
    self->hook = fn;
    self->hook_ctx = ctx;
}

int rl_model_units_idle(rl_model_t *self, int train) {
    if (self->cuda) {
        int rc = rl_model_cuda_idle(self->cuda, train);
        return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
    }
    const int L = self->L;
    int rc = s_unit(self, L, RL_UNIT_GATHER);
    for (int l = 0; !rc && l < L; l++) {
        rc = s_unit(self, l, RL_UNIT_GATHER) || s_unit(self, l, RL_UNIT_RELEASE) ? RL_EIO : 0;
    }
    if (rc || !(train && self->opts.tune != RL_TUNE_NONE)) {
        return rc ? rc : s_unit(self, L, RL_UNIT_RELEASE);
    }
    rc = s_unit(self, L, RL_UNIT_GRADS);
    for (int l = L - 1; !rc && l >= 0; l--) {
        rc = s_unit(self, l, RL_UNIT_GATHER) || s_unit(self, l, RL_UNIT_GRADS) ||
                     s_unit(self, l, RL_UNIT_REDUCE) || s_unit(self, l, RL_UNIT_RELEASE)
                 ? RL_EIO
                 : 0;
    }
    return rc ? rc : s_unit(self, L, RL_UNIT_REDUCE) ? RL_EIO : s_unit(self, L, RL_UNIT_RELEASE);
}

int rl_model_device_shard_ranks(const rl_model_t *self) {
    return self->cuda ? rl_model_cuda_shard_ranks(self->cuda) : 1;
}

// What load kept of the parameters freed, every tensor pointer NULL.
static void s_free_weights(rl_model_t *self) {
    free(self->param_mem);
    self->param_mem = NULL;
    self->param_n = 0;
    rl_st_model_destroy(&self->st);
    self->params_in_map = 0;
    self->params.embed_tokens = self->params.norm = self->params.lm_head = NULL;
    memset(self->layers, 0, (size_t)self->L * sizeof *self->layers);
}

int rl_model_drop_host_weights(rl_model_t *self) {
    const int frozen = self->opts.tune == RL_TUNE_NONE; // an adapter loaded into it stays
    const int full = self->opts.tune == RL_TUNE_FULL;
    const int full_dev = full && (self->opts.device_infer || !self->opts.device_host_optim);
    if (!self->cuda || (!frozen && !full_dev && self->opts.tune != RL_TUNE_LORA)) {
        return rl_mdl_err(self, RL_EINVAL,
                          "only a model on a GPU that trains nothing, only a LoRA adapter, only "
                          "infers, or whose optimizer steps there gives its host weights back");
    }
    self->dropped_n = full ? self->param_n : 0;
    s_free_weights(self); // a LoRA adapter's arrays are its own: they stay
    rl_model_cuda_host_dropped(self->cuda);
    self->host_dropped = 1;
    return 0;
}

void rl_model_drop_weights(rl_model_t *self) {
    RL_ASSERT(self->opts.sharded);
    s_free_weights(self);
}

static float *s_x(rl_model_t *self, int l) {
    return self->x + (size_t)l * (size_t)self->N * (size_t)self->C;
}

// ---------------------------------------------------------------------------------------------
// one lane: a forward / backward of B packed sequences on this thread

// Forward of sequences tokens (B,T) (rows b0.. of the caller's batch: the dropout rows) into
// logp/entropy (B,T) and hid (B*T,C) when non-NULL. Inputs are checked by rl_model_forward.
static int s_fwd(rl_model_t *self, const int32_t *tokens, const int *lengths, int B, int T, int b0,
                 float temperature, int train, float *logp, float *entropy, float *hid) {
    self->fwd_valid = 0;
    int N = 0;
    for (int b = 0; b < B; b++) {
        N += lengths[b];
    }
    // stored activations for every layer only when a backward can follow
    const int sets = train && self->opts.tune != RL_TUNE_NONE && !self->opts.recompute ? self->L
                                                                                       : 1;
    int rc = s_ensure(self, N, B, T, sets);
    if (rc) {
        return rc;
    }
    const int C = self->C;
    self->B = B;
    self->T = T;
    self->N = N;
    self->temperature = temperature;
    for (int b = 0, r = 0; b < B; b++) {
        const int32_t *tk = tokens + (size_t)b * T;
        self->lengths[b] = lengths[b];
        self->starts[b] = r;
        for (int t = 0; t < lengths[b]; t++, r++) {
            self->ids[r] = tk[t];
            self->targets[r] = t + 1 < lengths[b] ? tk[t + 1] : -1; // row t predicts token t+1
            self->pos[r] = t;
            self->negpos[r] = -t;
            self->grow[r] = (b0 + b) * T + t;
        }
    }
    self->starts[B] = N;
    if (self->rope_n < T) { // the table's rows never change: filled once per size
        rl_rope_table(self->rope_cs, self->inv_freq, T, self->D);
        self->rope_n = T;
    }

    if ((rc = s_unit(self, self->L, RL_UNIT_GATHER)) != 0) {
        return rc;
    }
    rl_embedding_forward(s_x(self, 0), self->ids, self->params.embed_tokens, N, C);
    for (int l = 0; l < self->L; l++) {
        rl_mdl_act_t *a = &self->acts[sets == 1 ? 0 : l];
        if ((rc = s_unit(self, l, RL_UNIT_GATHER)) != 0) {
            return rc;
        }
        s_layer_forward(self, l, a, s_x(self, l), s_x(self, l + 1), train);
        if ((rc = s_unit(self, l, RL_UNIT_RELEASE)) != 0) {
            return rc;
        }
    }
    rl_rmsnorm_forward(self->lnf, self->rstdf, s_x(self, self->L), self->params.norm,
                       self->cfg.rms_norm_eps, N, C);
    if (logp) { // no logp: a critic or reward model reads the hidden states instead
        rl_logprob_forward(self->lp_row, entropy ? self->ent_row : NULL, self->lnf,
                           self->params.lm_head, self->targets, temperature, N, C, self->V,
                           self->head_scratch, rl_mdl_head_chunk(self->V));
        // logp[b,t] is the prediction of token t by row t-1
        for (int b = 0; b < B; b++) {
            float *lp = logp + (size_t)b * T, *en = entropy ? entropy + (size_t)b * T : NULL;
            const int r0 = self->starts[b] - 1;
            for (int t = 0; t < T; t++) {
                int ok = t >= 1 && t < lengths[b];
                lp[t] = ok ? self->lp_row[r0 + t] : 0.0f;
                if (en) {
                    en[t] = ok ? self->ent_row[r0 + t] : 0.0f;
                }
            }
        }
    }
    for (int b = 0; hid && b < B; b++) {
        size_t real = (size_t)lengths[b] * C;
        float *hb = hid + (size_t)b * T * C;
        memcpy(hb, self->lnf + (size_t)self->starts[b] * C, real * sizeof *hb);
        memset(hb + real, 0, ((size_t)T * C - real) * sizeof *hb);
    }
    self->fwd_valid = 1;
    self->fwd_train = train && self->opts.tune != RL_TUNE_NONE;
    // the root unit stays gathered for the backward that can follow
    if (!self->fwd_train && (rc = s_unit(self, self->L, RL_UNIT_RELEASE)) != 0) {
        self->fwd_valid = 0;
        return rc;
    }
    return 0;
}

// The part of backward below the final norm's output, shared by rl_model_backward and
// rl_model_backward_hidden. On entry dln (N,C) = dL/d(final norm output); accumulates every
// gradient of the final norm, the layers and (full tuning) the embedding.
static int s_backward_trunk(rl_model_t *self) {
    const int N = self->N, C = self->C;
    const int full = self->opts.tune == RL_TUNE_FULL;
    memset(self->dres, 0, (size_t)N * C * sizeof(float));
    rl_rmsnorm_backward(self->dres, full ? self->grads.norm : NULL, self->dln,
                        s_x(self, self->L), self->params.norm, self->rstdf, N, C);
    const int recompute = self->opts.recompute;
    int rc = 0;
    for (int l = self->L - 1; l >= 0; l--) {
        rl_mdl_act_t *a = &self->acts[recompute ? 0 : l];
        if ((rc = s_unit(self, l, RL_UNIT_GATHER)) != 0 ||
            (rc = s_unit(self, l, RL_UNIT_GRADS)) != 0) {
            return rc;
        }
        if (recompute) {
            // the same inputs, masks and kernels give the same activations bit for bit; x[l+1]
            // is rewritten with the value it already holds
            s_layer_forward(self, l, a, s_x(self, l), s_x(self, l + 1), 1);
        }
        s_layer_backward(self, l, a, s_x(self, l));
        if ((rc = s_unit(self, l, RL_UNIT_REDUCE)) != 0 ||
            (rc = s_unit(self, l, RL_UNIT_RELEASE)) != 0) {
            return rc;
        }
    }
    if (full) {
        rl_embedding_backward(self->grads.embed_tokens, self->dres, self->ids, N, C);
    }
    if ((rc = s_unit(self, self->L, RL_UNIT_REDUCE)) != 0 ||
        (rc = s_unit(self, self->L, RL_UNIT_RELEASE)) != 0) {
        return rc;
    }
    return 0;
}

// Backward from dlogp (B,T) of this lane's sequences.
static int s_bwd(rl_model_t *self, const float *dlogp) {
    const int B = self->B, T = self->T, N = self->N, C = self->C;
    const int full = self->opts.tune == RL_TUNE_FULL;
    for (int b = 0; b < B; b++) {
        const float *dl = dlogp + (size_t)b * T;
        float *dr = self->dlp_row + self->starts[b];
        for (int t = 0; t < self->lengths[b]; t++) {
            // row t's logprob is logp[b,t+1]; rows without a target stay 0
            dr[t] = t + 1 < self->lengths[b] ? dl[t + 1] : 0.0f;
        }
    }
    // the head recomputes its logits from lnf, so this also follows a forward with logp NULL
    memset(self->dln, 0, (size_t)N * C * sizeof(float));
    rl_logprob_backward(self->dln, full ? self->grads.lm_head : NULL, self->dlp_row, NULL,
                        self->lnf, self->params.lm_head, self->targets, self->temperature, N, C,
                        self->V, self->head_scratch, rl_mdl_head_chunk(self->V));
    return s_backward_trunk(self);
}

// Backward from dhidden (B*T,C) of this lane's sequences; padding rows are not read.
static int s_bwd_hidden(rl_model_t *self, const float *dhidden) {
    const int B = self->B, T = self->T, C = self->C;
    for (int b = 0; b < B; b++) {
        memcpy(self->dln + (size_t)self->starts[b] * C, dhidden + (size_t)b * T * C,
               (size_t)self->lengths[b] * C * sizeof(float));
    }
    return s_backward_trunk(self);
}

// ---------------------------------------------------------------------------------------------
// lanes

// The fields of rl_layer_params_t (all float *), to move gradient pointers between allocations.
#define S_LAYER_FIELDS(X)                                                                          \
    X(input_layernorm)                                                                             \
    X(q_proj) X(q_bias) X(k_proj) X(k_bias) X(v_proj) X(v_bias) X(o_proj) X(o_bias) X(q_norm)      \
        X(k_norm) X(post_attention_layernorm) X(gate_proj) X(gate_bias) X(up_proj) X(up_bias)      \
            X(down_proj) X(down_bias)
#define S_COUNT(f) +1
_Static_assert(sizeof(rl_layer_params_t) == (0 S_LAYER_FIELDS(S_COUNT)) * sizeof(float *),
               "S_LAYER_FIELDS lists every field");
#undef S_COUNT

static void s_shadow_free(rl_model_t **p) {
    rl_model_t *sh = *p;
    if (!sh) {
        return;
    }
    rl_lora_destroy(&sh->lora);
    free(sh->grad_mem);
    free(sh->glayers);
    free(sh->work);
    free(sh->iwork);
    free(sh->acts);
    free(sh);
    *p = NULL;
}

void rl_mdl_lanes_free(rl_model_t *self) {
    for (int k = 1; k < RL_MDL_LANES_MAX; k++) {
        s_shadow_free(&self->lanes[k]);
    }
    self->n_lanes = 1;
}

// A shadow of self for lane k: the same weights, options and adapter; work buffers and
// gradients of its own (zeroed).
static rl_model_t *s_shadow_new(rl_model_t *self) {
    rl_model_t *sh = malloc(sizeof *sh);
    if (!sh) {
        return NULL;
    }
    *sh = *self;
    sh->shadow = 1;
    sh->st = NULL;
    sh->pool = NULL;
    sh->param_mem = NULL; // borrowed through params/layers
    sh->work = NULL;
    sh->iwork = NULL;
    sh->acts = NULL;
    sh->hid = NULL;
    sh->hid_cap = 0;
    sh->N_cap = sh->T_cap = sh->B_cap = sh->sets_cap = sh->grads_cap = 0;
    sh->fwd_valid = 0;
    sh->grad_mem = NULL;
    sh->glayers = NULL;
    sh->lora = NULL;
    sh->cuda = NULL;
    memset(sh->lanes, 0, sizeof sh->lanes);
    sh->n_lanes = 1;
    if (self->grad_mem) {
        sh->grad_mem = calloc(self->param_n, sizeof *sh->grad_mem);
        sh->glayers = calloc((size_t)self->L, sizeof *sh->glayers);
        if (!sh->grad_mem || !sh->glayers) {
            s_shadow_free(&sh);
            return NULL;
        }
#define S_MOVE(p) ((p) ? sh->grad_mem + ((p)-self->grad_mem) : NULL)
        for (int l = 0; l < self->L; l++) {
#define S_FIELD(f) sh->glayers[l].f = S_MOVE(self->glayers[l].f);
            S_LAYER_FIELDS(S_FIELD)
#undef S_FIELD
        }
        sh->grads.embed_tokens = S_MOVE(self->grads.embed_tokens);
        sh->grads.norm = S_MOVE(self->grads.norm);
        sh->grads.lm_head = S_MOVE(self->grads.lm_head);
        sh->grads.layers = sh->glayers;
#undef S_MOVE
    }
    if (self->lora && !(sh->lora = rl_lora_shadow_new(self->lora))) {
        s_shadow_free(&sh);
        return NULL;
    }
    return sh;
}

// Lane k's shadow, created on first use and made to follow what may have changed since.
static rl_model_t *s_lane(rl_model_t *self, int k) {
    rl_model_t *sh = self->lanes[k];
    if (!sh && !(sh = self->lanes[k] = s_shadow_new(self))) {
        return NULL;
    }
    if (sh->lora && rl_lora_shadow_sync(sh->lora, self->lora) != 0) {
        return NULL;
    }
    sh->params = self->params;
    sh->lora_disabled = self->lora_disabled;
    sh->fwd_step = self->fwd_step;
    return sh;
}

// How many lanes a forward of B sequences runs as: one per BLAS thread, at most one per
// sequence; a sharded model (its unit hook gathers layer by layer) runs one.
static int s_lane_count(const rl_model_t *self, int B) {
    if (self->opts.sharded || self->shadow) {
        return 1;
    }
    int P = self->lanes_max > 0 ? self->lanes_max : openblas_get_num_threads();
    P = P < B ? P : B;
    P = P < RL_MDL_LANES_MAX ? P : RL_MDL_LANES_MAX;
    return P > 1 ? P : 1;
}

// Contiguous runs of sequences with about equal token counts, at least one each.
static void s_partition(rl_model_t *self, const int *lengths, int B, int P) {
    int64_t total = 0, acc = 0;
    for (int b = 0; b < B; b++) {
        total += lengths[b];
    }
    int b = 0;
    self->lane_b0[0] = 0;
    for (int k = 1; k < P; k++) {
        int64_t goal = total * k / P;
        while (b < B - (P - k) && (b <= self->lane_b0[k - 1] || 2 * acc + lengths[b] <= 2 * goal)) {
            acc += lengths[b++];
        }
        self->lane_b0[k] = b;
    }
    self->lane_b0[P] = B;
}

enum { S_OP_FWD, S_OP_BWD, S_OP_BWD_HIDDEN };

typedef struct {
    rl_model_t *m;
    int op, B, T, b0, train;
    const int32_t *tokens;
    const int *lengths;
    float temperature;
    float *logp, *entropy, *hid;
    const float *grad; // dlogp (B,T) or dhidden (B*T,C)
    int rc;
} s_job_t;

static void s_job_run(s_job_t *j) {
    switch (j->op) {
    case S_OP_FWD:
        j->rc = s_fwd(j->m, j->tokens, j->lengths, j->B, j->T, j->b0, j->temperature, j->train,
                      j->logp, j->entropy, j->hid);
        break;
    case S_OP_BWD: j->rc = s_bwd(j->m, j->grad); break;
    default: j->rc = s_bwd_hidden(j->m, j->grad); break;
    }
}

// Runs fn(arg, k, P') for k < P' on the model's pool (rl_pool.h; created on first use), each
// with one-thread BLAS (the role's thread count is restored after). Returns P': P, or fewer
// when threads could not be started (1: fn ran here alone).
int rl_mdl_pool_run(rl_model_t *self, void (*fn)(void *arg, int k, int P), void *arg, int P) {
    if (P > 1 && !self->pool) {
        self->pool = rl_pool_new();
    }
    if (P < 2 || !self->pool) {
        fn(arg, 0, 1);
        return 1;
    }
    const int blas = openblas_get_num_threads();
    openblas_set_num_threads(1);
    P = rl_pool_run(self->pool, fn, arg, P);
    openblas_set_num_threads(blas);
    return P;
}

typedef struct {
    s_job_t *jobs;
    int n;
} s_jobs_t;

// Worker k of P runs jobs k, k + P, ... (all of them when a thread is missing).
static void s_jobs_worker(void *arg, int k, int P) {
    s_jobs_t *a = arg;
    for (int i = k; i < a->n; i += P) {
        s_job_run(&a->jobs[i]);
    }
}

// The lanes' jobs, one per worker (rl_mdl_pool_run). Returns the first failing job's code, its
// message copied into self.
static int s_jobs(rl_model_t *self, s_job_t *jobs, int P) {
    s_jobs_t a = {jobs, P};
    rl_mdl_pool_run(self, s_jobs_worker, &a, P);
    for (int k = 0; k < P; k++) {
        if (jobs[k].rc) {
            if (jobs[k].m != self) {
                snprintf(self->errmsg, sizeof self->errmsg, "%s", jobs[k].m->errmsg);
            }
            return jobs[k].rc;
        }
    }
    return 0;
}

// After a lanes backward: every shadow's gradients into this model's, the shadows' zeroed.
static void s_lanes_merge(rl_model_t *self) {
    for (int k = 1; k < self->n_lanes; k++) {
        rl_model_t *sh = self->lanes[k];
        if (self->grad_mem) {
            float *g = self->grad_mem, *h = sh->grad_mem;
            for (size_t i = 0; i < self->param_n; i++) {
                g[i] += h[i];
            }
            memset(h, 0, self->param_n * sizeof *h);
        }
        if (self->lora && sh->lora) {
            rl_lora_shadow_move(self->lora, sh->lora);
        }
    }
}

// A backward over the lanes of the last forward (op S_OP_BWD or S_OP_BWD_HIDDEN; grad in the
// caller's (B,T) or (B*T,C) layout, `row` floats per position).
static int s_lanes_backward(rl_model_t *self, int op, const float *grad, size_t row) {
    if (self->n_lanes == 1) {
        return op == S_OP_BWD ? s_bwd(self, grad) : s_bwd_hidden(self, grad);
    }
    s_job_t jobs[RL_MDL_LANES_MAX];
    for (int k = 0; k < self->n_lanes; k++) {
        size_t b0 = (size_t)self->lane_b0[k];
        jobs[k] = (s_job_t){.m = k ? self->lanes[k] : self,
                            .op = op,
                            .grad = grad + b0 * (size_t)self->fwd_T * row};
    }
    int rc = s_jobs(self, jobs, self->n_lanes);
    s_lanes_merge(self);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// training forward / backward (the API)

int rl_model_forward(rl_model_t *self, const int32_t *tokens, const int *lengths, int B, int T,
                     float temperature, int train, float *logp, float *entropy) {
    self->fwd_valid = 0;
    if (B < 1 || T < 1 || (int64_t)B * T > INT32_MAX / 4) {
        return rl_mdl_err(self, RL_EINVAL, "batch %d x %d: B and T must be >= 1", B, T);
    }
    if (!(temperature > 0.0f) || !isfinite(temperature)) {
        return rl_mdl_err(self, RL_EINVAL, "temperature %g must be a positive number",
                          (double)temperature);
    }
    if (logp && !self->has_head) {
        return rl_mdl_err(self, RL_EINVAL,
                          "this model has no vocabulary head (a sequence classifier): no logprobs");
    }
    if (!logp && entropy) {
        return rl_mdl_err(self, RL_EINVAL,
                          "entropy needs logp (logp = NULL skips the vocabulary "
                          "head)");
    }
    if (self->opts.device.cuda && !self->cuda) {
        return rl_mdl_err(self, RL_EIO,
                          "cuda:%d: the model's device half is gone (an adapter load "
                          "failed to rebuild it)",
                          self->opts.device.index);
    }
    for (int b = 0; b < B; b++) {
        if (lengths[b] < 1 || lengths[b] > T) {
            return rl_mdl_err(self, RL_EINVAL, "lengths[%d] = %d is outside [1, %d]", b, lengths[b],
                              T);
        }
        for (int t = 0; t < lengths[b]; t++) {
            int32_t id = tokens[(size_t)b * T + t];
            if (id < 0 || id >= self->V) {
                return rl_mdl_err(self, RL_EINVAL, "token id %d at [%d,%d] is outside [0, %d)",
                                  (int)id, b, t, self->V);
            }
        }
    }
    size_t nh = (size_t)B * (size_t)T * (size_t)self->C;
    if (nh > self->hid_cap) {
        free(self->hid);
        self->hid_cap = 0;
        if (!(self->hid = malloc(nh * sizeof *self->hid))) {
            return rl_mdl_err(self, RL_ENOMEM, "out of memory for %d x %d hidden states", B, T);
        }
        self->hid_cap = nh;
    }
    if (train) {
        self->fwd_step++; // a fresh dropout mask per training forward
    }
    self->fwd_B = B;
    self->fwd_T = T;
    self->n_lanes = 1;
    int rc;
    if (self->cuda) { // the device half runs it all (rl_model_cuda.h)
        self->temperature = temperature;
        rc = rl_model_cuda_forward(self->cuda, tokens, lengths, B, T, temperature, train,
                                   self->fwd_step, self->lora_disabled, logp, entropy);
        if (rc) {
            return rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda));
        }
        self->fwd_valid = 1;
        self->fwd_train = train && self->opts.tune != RL_TUNE_NONE;
        return 0;
    }
    const int P = s_lane_count(self, B);
    if (P == 1) {
        rc = s_fwd(self, tokens, lengths, B, T, 0, temperature, train, logp, entropy, self->hid);
    } else {
        s_partition(self, lengths, B, P);
        s_job_t jobs[RL_MDL_LANES_MAX];
        for (int k = 0; k < P; k++) {
            rl_model_t *m = k ? s_lane(self, k) : self;
            if (!m) {
                return rl_mdl_err(self, RL_ENOMEM, "out of memory for lane %d of the forward", k);
            }
            int b0 = self->lane_b0[k];
            size_t o = (size_t)b0 * T;
            jobs[k] = (s_job_t){.m = m,
                                .op = S_OP_FWD,
                                .B = self->lane_b0[k + 1] - b0,
                                .T = T,
                                .b0 = b0,
                                .train = train,
                                .tokens = tokens + o,
                                .lengths = lengths + b0,
                                .temperature = temperature,
                                .logp = logp ? logp + o : NULL,
                                .entropy = entropy ? entropy + o : NULL,
                                .hid = self->hid + o * (size_t)self->C};
        }
        rc = s_jobs(self, jobs, P);
        self->n_lanes = P;
        self->fwd_valid = rc == 0; // every lane's forward succeeded
    }
    return rc;
}

uint64_t rl_model_train_step(const rl_model_t *self) {
    return self->fwd_step;
}

void rl_model_set_train_step(rl_model_t *self, uint64_t step) {
    self->fwd_step = step;
    self->fwd_valid = 0; // a backward must not pair the old activations with the new masks
}

// Both backward entry points need a trainable model and the activations of a training forward.
static int s_backward_check(rl_model_t *self) {
    if (self->opts.tune == RL_TUNE_NONE) {
        return rl_mdl_err(self, RL_EINVAL, "backward needs a trainable model (tune FULL or LORA)");
    }
    if (!self->fwd_valid || !self->fwd_train) {
        return rl_mdl_err(self, RL_EINVAL,
                          "backward needs a preceding training forward (train = 1)");
    }
    return s_unit(self, self->L, RL_UNIT_GRADS);
}

int rl_model_backward(rl_model_t *self, const float *dlogp) {
    if (!self->has_head) {
        return rl_mdl_err(self, RL_EINVAL,
                          "this model has no vocabulary head (a sequence classifier): no dlogp");
    }
    int rc = s_backward_check(self);
    if (!rc && self->cuda && (rc = rl_model_cuda_backward(self->cuda, dlogp)) != 0) {
        return rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda));
    }
    return rc || self->cuda ? rc : s_lanes_backward(self, S_OP_BWD, dlogp, 1);
}

int rl_model_backward_hidden(rl_model_t *self, const float *dhidden) {
    int rc = s_backward_check(self);
    if (!rc && self->cuda && (rc = rl_model_cuda_backward_hidden(self->cuda, dhidden)) != 0) {
        return rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda));
    }
    return rc || self->cuda ? rc
                            : s_lanes_backward(self, S_OP_BWD_HIDDEN, dhidden, (size_t)self->C);
}

void rl_model_set_lanes(rl_model_t *self, int n) {
    self->lanes_max = n > 0 ? n : 0;
}

void rl_model_set_step_lanes(rl_model_t *self, int n) {
    self->step_lanes = n > 0 ? n : 0;
}

const float *rl_model_hidden(const rl_model_t *self) {
    if (self->cuda && self->fwd_valid) { // brought from the device on the first call
        return rl_model_cuda_hidden(self->cuda, self->hid) == 0 ? self->hid : NULL;
    }
    return self->fwd_valid ? self->hid : NULL;
}

int rl_model_device_plan(const rl_hf_config_t *cfg, const rl_model_opts_t *opts, int has_head,
                         int rows, rl_model_device_plan_t *out, char *err, size_t err_len) {
    return rl_model_cuda_plan(cfg, opts, has_head, rows, out, err, err_len);
}

size_t rl_model_device_kvcache_bytes(const rl_hf_config_t *cfg, int n_slots, int max_len, int rows,
                                     int draws) {
    return rl_model_cuda_cache_plan(cfg, n_slots, max_len, rows, draws);
}

size_t rl_model_device_bytes(const rl_model_t *self) {
    return self->cuda ? rl_model_cuda_bytes(self->cuda) : 0;
}

const char *rl_model_device_graphs(const rl_model_t *self, long long *captured,
                                   long long *launched) {
    *captured = *launched = 0;
    return self->cuda ? rl_model_cuda_graph_stats(self->cuda, captured, launched) : "on the CPU";
}

int rl_model_device_push(rl_model_t *self, int all) {
    if (self->host_dropped && (all || self->opts.tune != RL_TUNE_LORA)) {
        return rl_mdl_err(self, RL_EINVAL,
                          "the model gave its host weights back (rl_model_drop_host_weights): "
                          "%s",
                          all ? "only a LoRA adapter can be pushed" : "nothing to push");
    }
    int rc = self->cuda ? rl_model_cuda_push(self->cuda, all) : 0;
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_load(rl_model_t *self, size_t offset, const float *w, size_t n, int last) {
    const size_t total = rl_model_trainable_size(self);
    if (!self->cuda || offset > total || n > total - offset) {
        return rl_mdl_err(self, RL_EINVAL,
                          "device_load: %zu floats at %zu for a model %s%zu trainable", n, offset,
                          self->cuda ? "with " : "on the CPU with ", total);
    }
    int rc = rl_model_cuda_load(self->cuda, offset, w, n, last);
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_pull(rl_model_t *self, int grads) {
    // full tuning that trains without its host copy: the gathers only (a group's collectives)
    const int gathers = !grads && self->opts.tune == RL_TUNE_FULL && !self->opts.device_infer;
    if (self->host_dropped && self->opts.tune != RL_TUNE_LORA && !gathers) {
        return rl_mdl_err(self, RL_EINVAL,
                          "the model gave its host weights back (rl_model_drop_host_weights): "
                          "nowhere to pull to");
    }
    int rc = self->cuda ? rl_model_cuda_pull(self->cuda, grads) : 0;
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_ipc_export(rl_model_t *self, unsigned char *handle, uint64_t *layout,
                               int64_t *n) {
    *layout = 0;
    *n = 0;
    if (!self->cuda) {
        return rl_mdl_err(self, RL_EINVAL, "weights shared through CUDA IPC need a model on a GPU");
    }
    size_t k = 0;
    int rc = rl_model_cuda_ipc_export(self->cuda, handle, layout, &k);
    *n = (int64_t)k;
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_ipc_load(rl_model_t *self, const unsigned char *handle, uint64_t layout,
                             int64_t n) {
    if (!self->cuda) {
        return rl_mdl_err(self, RL_EINVAL, "weights shared through CUDA IPC need a model on a GPU");
    }
    if (n < 0) {
        return rl_mdl_err(self, RL_EINVAL, "shared weights of %lld floats", (long long)n);
    }
    int rc = rl_model_cuda_ipc_load(self->cuda, handle, layout, (size_t)n);
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_head_forward(rl_model_t *self, const float *w, int score, float *out) {
    if (!self->cuda || !self->fwd_valid) {
        return rl_mdl_err(self, RL_EINVAL, "the device's head needs a forward on a GPU");
    }
    int rc = rl_model_cuda_head_forward(self->cuda, w, score, out);
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_head_backward(rl_model_t *self, const float *w, int score, const float *dout,
                                  float *dw) {
    if (!self->cuda) {
        return rl_mdl_err(self, RL_EINVAL, "the device's head needs a model on a GPU");
    }
    int rc = s_backward_check(self);
    if (!rc && (rc = rl_model_cuda_head_backward(self->cuda, w, score, dout, dw)) != 0) {
        return rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda));
    }
    return rc;
}

int rl_model_device_clip(rl_model_t *self, double max_norm, double *norm) {
    *norm = 0.0;
    if (!self->cuda) {
        return rl_mdl_err(self, RL_EINVAL, "rl_model_device_clip: the model is not on a GPU");
    }
    int rc = rl_model_cuda_clip(self->cuda, max_norm, norm);
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_adamw(rl_model_t *self, double lr, double beta1, double beta2, double eps,
                          double weight_decay, int64_t step) {
    if (!self->cuda) {
        return rl_mdl_err(self, RL_EINVAL, "rl_model_device_adamw: the model is not on a GPU");
    }
    int rc = rl_model_cuda_adamw(self->cuda, lr, beta1, beta2, eps, weight_decay, step);
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_device_optim_state(rl_model_t *self, float *m, float *v, int upload) {
    if (!self->cuda) {
        return rl_mdl_err(self, RL_EINVAL,
                          "rl_model_device_optim_state: the model is not on a GPU");
    }
    int rc = rl_model_cuda_optim_state(self->cuda, m, v, upload);
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

float *rl_model_logits(rl_model_t *self) {
    if (self->cuda) {
        float *out = malloc((size_t)self->fwd_B * self->fwd_T * self->V * sizeof *out);
        if (!out) {
            rl_mdl_err(self, RL_ENOMEM, "out of memory for %d x %d logits",
                       self->fwd_B * self->fwd_T, self->V);
            return NULL;
        }
        int rc = rl_model_cuda_logits(self->cuda, out);
        if (rc) {
            free(out);
            rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda));
            return NULL;
        }
        return out;
    }
    if (!self->fwd_valid || !self->params.lm_head) {
        rl_mdl_err(self, RL_EINVAL, "no forward to take logits from, or no vocabulary head");
        return NULL;
    }
    const int T = self->fwd_T, C = self->C, V = self->V;
    float *out = calloc((size_t)self->fwd_B * T * V, sizeof *out);
    if (!out) {
        rl_mdl_err(self, RL_ENOMEM, "out of memory for %d x %d logits", self->fwd_B * T, V);
        return NULL;
    }
    for (int k = 0; k < self->n_lanes; k++) {
        const rl_model_t *m = k ? self->lanes[k] : self;
        for (int b = 0; b < m->B; b++) {
            float *o = out + ((size_t)(self->lane_b0[k] * (self->n_lanes > 1) + b) * T) * V;
            rl_logits_forward(o, m->lnf + (size_t)m->starts[b] * C, self->params.lm_head,
                              m->lengths[b], C, V);
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// adapters and export

int rl_model_load_adapter(rl_model_t *self, const char *dir, char *err, size_t err_len) {
    const int train = self->opts.tune == RL_TUNE_LORA;
    if (self->host_dropped && !train) { // its device half would be made from the host's base
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: the model gave its host weights back: no adapter can be loaded", dir);
    }
    if (self->opts.tune == RL_TUNE_FULL) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: a LoRA adapter needs a model created with tune LORA or NONE", dir);
    }
    rl_lora_t *lo = NULL;
    int rc = rl_lora_load(&self->cfg, dir, train, &lo, err, err_len);
    if (rc) {
        return rc;
    }
    if (train) {
        // the optimizer holds the trainable layout: the adapter must have the same shape
        char why[400];
        rc = rl_lora_copy_from(self->lora, lo, why, sizeof why);
        rl_lora_destroy(&lo);
        if (rc) {
            return rl_errf(err, err_len, rc, "%s: %s", dir, why);
        }
        if (self->cuda && (rc = rl_model_cuda_push(self->cuda, 0)) != 0) {
            return rl_errf(err, err_len, rc, "%s: %s", dir, rl_model_cuda_errmsg(self->cuda));
        }
    } else {
        rl_lora_destroy(&self->lora);
        self->lora = lo;
        rl_mdl_lanes_free(self); // their buffers and adapter shadows follow the old adapter
        // the work buffers are laid out for the adapter's rank, targets and dropout
        free(self->work);
        free(self->iwork);
        free(self->acts);
        self->work = NULL;
        self->iwork = NULL;
        self->acts = NULL;
        self->N_cap = self->T_cap = self->B_cap = self->sets_cap = 0;
        self->fwd_valid = 0;
        if (self->cuda) { // the device half is laid out for the adapter too: made anew
            rl_model_cuda_destroy(&self->cuda);
            if ((rc = rl_model_cuda_new(self, &self->opts, &self->cuda, err, err_len)) != 0) {
                return rc;
            }
        }
    }
    return 0;
}

int rl_model_save_adapter(const rl_model_t *self, const char *dir, const char *base_model,
                          char *err, size_t err_len) {
    if (!self->lora) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: the model has no LoRA adapter to save",
                       dir);
    }
    return rl_lora_save(self->lora, dir, base_model, err, err_len);
}

void rl_model_set_adapter_disabled(rl_model_t *self, int disabled) {
    self->lora_disabled = disabled ? 1 : 0;
}

// The LoRA module index of an HF tensor name ("model.layers.3.mlp.up_proj.weight"), or -1.
static int s_lora_module_of(const char *name, int *layer) {
    const char *pre = "model.layers.";
    if (strncmp(name, pre, strlen(pre)) != 0) {
        return -1;
    }
    char *end;
    long l = strtol(name + strlen(pre), &end, 10);
    if (*end != '.') {
        return -1;
    }
    for (int m = 0; m < RL_LORA_NMOD; m++) {
        const char *path = rl_lora_module_path(m);
        size_t np = strlen(path);
        if (strncmp(end + 1, path, np) == 0 && strcmp(end + 1 + np, ".weight") == 0) {
            *layer = (int)l;
            return m;
        }
    }
    return -1;
}

// The HF folder of the model (score == NULL), or of its sequence classifier with head `score`
// [1, C] and pad id pad_token_id (no lm_head, `score.weight` last).
static int s_save_hf(const rl_model_t *self, const char *dir, rl_dtype_t dt, size_t max_shard,
                     const float *score, int pad_token_id, char *err, size_t err_len);

int rl_model_save_hf(const rl_model_t *self, const char *dir, int bf16, char *err,
                     size_t err_len) {
    return s_save_hf(self, dir, bf16 ? RL_DTYPE_BF16 : RL_DTYPE_F32, 0, NULL, 0, err, err_len);
}

int rl_model_save_hf_as(const rl_model_t *self, const char *dir, rl_dtype_t dtype,
                        size_t max_shard_bytes, char *err, size_t err_len) {
    return s_save_hf(self, dir, dtype, max_shard_bytes, NULL, 0, err, err_len);
}

int rl_model_save_seq_cls(const rl_model_t *self, const char *dir, const float *score,
                          int pad_token_id, int bf16, char *err, size_t err_len) {
    if (!score) {
        return rl_errf(err, err_len, RL_EINVAL, "save_seq_cls: no score head");
    }
    return s_save_hf(self, dir, bf16 ? RL_DTYPE_BF16 : RL_DTYPE_F32, 0, score, pad_token_id, err,
                     err_len);
}

static int s_save_hf(const rl_model_t *self, const char *dir, rl_dtype_t dt, size_t max_shard,
                     const float *score, int pad_token_id, char *err, size_t err_len) {
    if (self->host_dropped) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: the model gave its host weights back: nothing to save", dir);
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return rl_errf(err, err_len, errno, "%s: %s", dir, strerror(errno));
    }
    rl_hf_config_t cfg = self->cfg;
    snprintf(cfg.torch_dtype, sizeof cfg.torch_dtype, "%s",
             dt == RL_DTYPE_BF16  ? "bfloat16"
             : dt == RL_DTYPE_F16 ? "float16"
                                  : "float32");
    const int merge = self->lora && !self->lora_disabled;
    int n = rl_hf_tensor_specs(&cfg, NULL, 0);
    rl_hf_tensor_spec_t *specs = calloc((size_t)n, sizeof *specs);
    rl_st_writer_t *w = rl_st_writer_new();
    char *cfg_json = score ? rl_hf_config_to_json_seq_cls(&cfg, pad_token_id)
                           : rl_hf_config_to_json(&cfg);
    float *tmp = NULL;
    int rc = 0;
    if (!specs || !w || !cfg_json) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    rl_hf_tensor_specs(&cfg, specs, n);
    if (merge) { // one buffer as large as the largest Linear, reused (the writer copies)
        size_t mx = 0;
        for (int i = 0; i < n; i++) {
            mx = (size_t)rl_mdl_numel(&specs[i]) > mx ? (size_t)rl_mdl_numel(&specs[i]) : mx;
        }
        if (!(tmp = malloc(mx * sizeof *tmp))) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            goto fail;
        }
    }
    for (int i = 0; i < n; i++) {
        rl_model_params_t p = self->params;
        float **slot = rl_model_params_find(&p, self->L, specs[i].name);
        RL_ASSERT(slot);
        if (strcmp(specs[i].name, "lm_head.weight") == 0 && (!*slot || score)) {
            continue; // a sequence classifier's folder has no vocabulary head
        }
        RL_ASSERT(*slot);
        const float *data = *slot;
        int l = 0, m = s_lora_module_of(specs[i].name, &l);
        if (merge && m >= 0 && (rl_lora_targets(self->lora) & (1 << m))) {
            memcpy(tmp, data, (size_t)rl_mdl_numel(&specs[i]) * sizeof *tmp);
            rl_lora_merge(self->lora, l, m, tmp); // W += scale * B A
            rc = rl_st_writer_add_f32(w, specs[i].name, dt, specs[i].ndim, specs[i].shape, tmp);
        } else if (dt == RL_DTYPE_F32 && !RL_MDL_BIG_ENDIAN) {
            rc = rl_st_writer_add(w, specs[i].name, dt, specs[i].ndim, specs[i].shape, data);
        } else {
            rc = rl_st_writer_add_f32(w, specs[i].name, dt, specs[i].ndim, specs[i].shape, data);
        }
        if (rc) {
            rl_errf(err, err_len, rc, "adding tensor '%s': %s", specs[i].name, rl_strerror(rc));
            goto fail;
        }
    }
    if (score) {
        const int64_t shape[2] = {1, self->C};
        rc = rl_st_writer_add_f32(w, "score.weight", dt, 2, shape, score);
        if (rc) {
            rl_errf(err, err_len, rc, "adding tensor 'score.weight': %s", rl_strerror(rc));
            goto fail;
        }
    }
    // shards of 5 GB as transformers' save_pretrained; one model.safetensors below that
    max_shard = max_shard ? max_shard : (size_t)5000000000ULL;
    if ((rc = rl_st_writer_write_sharded(w, dir, max_shard, err, err_len)) != 0) {
        goto fail;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) {
        rc = rl_errf(err, err_len, errno, "%s: %s", path, strerror(errno));
        goto fail;
    }
    size_t len = strlen(cfg_json);
    int bad = fwrite(cfg_json, 1, len, f) != len || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    if (bad) {
        rc = rl_errf(err, err_len, RL_EIO, "%s: write failed", path);
    }
fail:
    free(tmp);
    free(cfg_json);
    free(specs);
    rl_st_writer_destroy(&w);
    return rc;
}

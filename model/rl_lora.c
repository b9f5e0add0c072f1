// rl_lora — LoRA adapter state, PEFT folder I/O and merge (see rl_lora.h). The forward and
// backward of the LoRA branch are rl_layers' kernels; this file owns memory, formats and the
// dropout mask.
#include "rl_lora.h"

#include "rl_config.h"
#include "rl_err.h"
#include "rl_rng.h"
#include "rl_safetensors.h"

#include <cblas.h>
#undef I // OpenBLAS's cblas.h pulls in <complex.h>; I is the MLP width here
#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct rl_lora {
    rl_hf_config_t cfg;
    int R, targets, use_rslora;
    float alpha, dropout, scale;
    float *mem;   // every A and B, layer-major, module order, A then B
    float *dmem;  // gradients, same layout, or NULL
    size_t n;     // floats in mem
    size_t *off;  // [L * 7] offset of A of (l, m) in mem, or SIZE_MAX when not targeted
    size_t *lstart; // [L + 1] where layer l's A and B start in mem (layer-major)
    float **dlayer; // [L] where layer l's gradients go instead of dmem (NULL: dmem)
    int shadow;     // 1: mem, off, lstart belong to another adapter (rl_lora_shadow_new)
};

// The module names are the recipe's (core/rl_config.h: one list for recipe, model and PEFT
// files); where each projection sits in a decoder layer is the model's knowledge.
_Static_assert(RL_LORA_NMOD == RL_RECIPE_LORA_NMOD, "one module numbering");
static const char *const s_paths[RL_LORA_NMOD] = {
    "self_attn." RL_RECIPE_LORA_Q_PROJ, "self_attn." RL_RECIPE_LORA_K_PROJ,
    "self_attn." RL_RECIPE_LORA_V_PROJ, "self_attn." RL_RECIPE_LORA_O_PROJ,
    "mlp." RL_RECIPE_LORA_GATE_PROJ,    "mlp." RL_RECIPE_LORA_UP_PROJ,
    "mlp." RL_RECIPE_LORA_DOWN_PROJ};

const char *rl_lora_module_name(int m) {
    return rl_recipe_lora_module_name(m);
}

const char *rl_lora_module_path(int m) {
    return m >= 0 && m < RL_LORA_NMOD ? s_paths[m] : NULL;
}

void rl_lora_module_dims(const rl_hf_config_t *cfg, int m, int *in, int *out) {
    const int C = cfg->hidden_size, I = cfg->intermediate_size;
    const int QD = cfg->num_attention_heads * cfg->head_dim;
    const int KVD = cfg->num_key_value_heads * cfg->head_dim;
    static const int ins[RL_LORA_NMOD] = {0, 0, 0, 1, 0, 0, 2};
    const int widths[3] = {C, QD, I};
    const int outs[RL_LORA_NMOD] = {QD, KVD, KVD, C, I, I, C};
    RL_ASSERT(m >= 0 && m < RL_LORA_NMOD);
    *in = widths[ins[m]];
    *out = outs[m];
}

// ---------------------------------------------------------------------------------------------
// state

static float s_scale(float alpha, int r, int rslora) {
    return rslora ? alpha / sqrtf((float)r) : alpha / (float)r;
}

// Allocates the state with zeroed A and B.
static rl_lora_t *s_alloc(const rl_hf_config_t *cfg, int r, float alpha, float dropout,
                          int targets, int use_rslora, int with_grads) {
    if (!cfg || r < 1 || !(targets & 0x7f) || (targets & ~0x7f) || !(dropout >= 0.0f) ||
        !(dropout < 1.0f)) {
        return NULL;
    }
    const int L = cfg->num_hidden_layers;
    rl_lora_t *self = calloc(1, sizeof *self);
    if (!self) {
        return NULL;
    }
    self->cfg = *cfg;
    self->R = r;
    self->targets = targets;
    self->use_rslora = use_rslora ? 1 : 0;
    self->alpha = alpha;
    self->dropout = dropout;
    self->scale = s_scale(alpha, r, self->use_rslora);
    self->off = malloc((size_t)L * RL_LORA_NMOD * sizeof *self->off);
    self->lstart = malloc((size_t)(L + 1) * sizeof *self->lstart);
    self->dlayer = calloc((size_t)(L > 0 ? L : 1), sizeof *self->dlayer);
    if (!self->off || !self->lstart || !self->dlayer) {
        goto fail;
    }
    size_t n = 0;
    for (int l = 0; l < L; l++) {
        self->lstart[l] = n;
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            self->off[l * RL_LORA_NMOD + m] = SIZE_MAX;
            if (targets & (1 << m)) {
                int in, out;
                rl_lora_module_dims(cfg, m, &in, &out);
                self->off[l * RL_LORA_NMOD + m] = n;
                n += (size_t)r * (size_t)(in + out);
            }
        }
    }
    self->n = n;
    self->lstart[L] = n;
    self->mem = calloc(n, sizeof *self->mem);
    if (!self->mem) {
        goto fail;
    }
    if (with_grads && !(self->dmem = calloc(n, sizeof *self->dmem))) {
        goto fail;
    }
    return self;
fail:
    rl_lora_destroy(&self);
    return NULL;
}

rl_lora_t *rl_lora_new(const rl_hf_config_t *cfg, int r, float alpha, float dropout,
                       int targets, int use_rslora, uint64_t seed, int with_grads) {
    rl_lora_t *self = s_alloc(cfg, r, alpha, dropout, targets, use_rslora, with_grads);
    if (!self) {
        return NULL;
    }
    rl_rng_t rng;
    rl_rng_seed(&rng, seed);
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            float *A = rl_lora_A(self, l, m);
            if (A) {
                int in, out;
                rl_lora_module_dims(cfg, m, &in, &out);
                float bound = 1.0f / sqrtf((float)in);
                rl_rng_fill_uniform(&rng, A, (size_t)r * (size_t)in, -bound, bound);
            }
        }
    }
    return self;
}

void rl_lora_destroy(rl_lora_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_lora_t *self = *self_p;
    if (!self->shadow) {
        free(self->mem);
        free(self->off);
        free(self->lstart);
    }
    free(self->dmem);
    free(self->dlayer);
    free(self);
    *self_p = NULL;
}

int rl_lora_rank(const rl_lora_t *self) { return self->R; }
int rl_lora_targets(const rl_lora_t *self) { return self->targets; }
float rl_lora_alpha(const rl_lora_t *self) { return self->alpha; }
float rl_lora_dropout(const rl_lora_t *self) { return self->dropout; }
int rl_lora_use_rslora(const rl_lora_t *self) { return self->use_rslora; }
float rl_lora_scale(const rl_lora_t *self) { return self->scale; }

void rl_lora_set_dropout(rl_lora_t *self, float dropout) {
    RL_ASSERT(dropout >= 0.0f && dropout < 1.0f);
    self->dropout = dropout;
}

static size_t s_off(const rl_lora_t *self, int l, int m) {
    RL_ASSERT(l >= 0 && l < self->cfg.num_hidden_layers && m >= 0 && m < RL_LORA_NMOD);
    return self->off[l * RL_LORA_NMOD + m];
}

float *rl_lora_A(const rl_lora_t *self, int l, int m) {
    size_t o = s_off(self, l, m);
    return o == SIZE_MAX ? NULL : self->mem + o;
}

float *rl_lora_B(const rl_lora_t *self, int l, int m) {
    size_t o = s_off(self, l, m);
    int in, out;
    rl_lora_module_dims(&self->cfg, m, &in, &out);
    return o == SIZE_MAX ? NULL : self->mem + o + (size_t)self->R * (size_t)in;
}

// Where the gradient of the float at offset o of layer l lives: the layer's own buffer when one
// is set (rl_lora_set_layer_grads), else the gradient array; NULL when there is neither.
static float *s_grad(const rl_lora_t *self, int l, size_t o) {
    if (self->dlayer[l]) {
        return self->dlayer[l] + (o - self->lstart[l]);
    }
    return self->dmem ? self->dmem + o : NULL;
}

float *rl_lora_dA(const rl_lora_t *self, int l, int m) {
    size_t o = s_off(self, l, m);
    return o == SIZE_MAX ? NULL : s_grad(self, l, o);
}

float *rl_lora_dB(const rl_lora_t *self, int l, int m) {
    size_t o = s_off(self, l, m);
    int in, out;
    rl_lora_module_dims(&self->cfg, m, &in, &out);
    return o == SIZE_MAX ? NULL : s_grad(self, l, o + (size_t)self->R * (size_t)in);
}

size_t rl_lora_layer_span(const rl_lora_t *self, int l, size_t *off) {
    RL_ASSERT(l >= 0 && l < self->cfg.num_hidden_layers);
    *off = self->lstart[l];
    return self->lstart[l + 1] - self->lstart[l];
}

void rl_lora_set_layer_grads(rl_lora_t *self, int l, float *grads) {
    RL_ASSERT(l >= 0 && l < self->cfg.num_hidden_layers);
    self->dlayer[l] = grads;
}

void rl_lora_drop_grads(rl_lora_t *self) {
    free(self->dmem);
    self->dmem = NULL;
}

float *rl_lora_params(rl_lora_t *self, size_t *n_p) {
    if (n_p) {
        *n_p = self->n;
    }
    return self->mem;
}

float *rl_lora_grads(rl_lora_t *self) { return self->dmem; }

void rl_lora_zero_grad(rl_lora_t *self) {
    if (self->dmem) {
        memset(self->dmem, 0, self->n * sizeof *self->dmem);
    }
}

static void s_targets_str(char *buf, size_t cap, int targets) {
    size_t len = 0;
    buf[0] = '\0';
    for (int m = 0; m < RL_LORA_NMOD; m++) {
        if ((targets & (1 << m)) && len < cap) {
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? "," : "",
                                    rl_lora_module_name(m));
        }
    }
}

int rl_lora_copy_from(rl_lora_t *self, const rl_lora_t *src, char *err, size_t err_len) {
    RL_ASSERT(self->cfg.num_hidden_layers == src->cfg.num_hidden_layers);
    if (self->R != src->R) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "adapter rank r=%d does not match the model's LoRA rank r=%d", src->R,
                       self->R);
    }
    for (int m = 0; m < RL_LORA_NMOD; m++) {
        int a = (src->targets >> m) & 1, b = (self->targets >> m) & 1;
        if (a != b) {
            char want[96];
            s_targets_str(want, sizeof want, self->targets);
            return rl_errf(err, err_len, RL_EINVAL,
                           "adapter %s target module '%s' but the model's LoRA targets %s",
                           a ? "has" : "lacks", rl_lora_module_name(m), want);
        }
    }
    RL_ASSERT(self->n == src->n);
    memcpy(self->mem, src->mem, self->n * sizeof *self->mem);
    self->alpha = src->alpha;
    self->use_rslora = src->use_rslora;
    self->scale = src->scale;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// dropout: a counter-based mask (splitmix64 finaliser over seed, key and index), so forward
// and backward (and a recomputed forward) agree without storing it.

static inline uint64_t s_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t rl_lora_dropout_key(uint64_t step, int l, int m) {
    return s_mix(step * 0x9e3779b97f4a7c15ULL + (uint64_t)l * RL_LORA_NMOD + (uint64_t)m + 1);
}

// keep when the top 24 bits, as a uniform in [0, 1), are >= p
static inline int s_keep(uint64_t base, size_t i, uint32_t thresh) {
    return (uint32_t)(s_mix(base + (uint64_t)i * 0x9e3779b97f4a7c15ULL) >> 40) >= thresh;
}

// Elements i0..i0+n-1 of the mask of (seed, key) into mask[0..n).
static void s_mask_span(float *mask, size_t i0, size_t n, float p, uint64_t seed, uint64_t key) {
    const uint64_t base = s_mix(seed ^ key);
    const uint32_t thresh = (uint32_t)((double)p * 16777216.0);
    const float inv = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        mask[i] = s_keep(base, i0 + i, thresh) ? inv : 0.0f;
    }
}

void rl_lora_dropout_mask(float *mask, size_t n, float p, uint64_t seed, uint64_t key) {
    s_mask_span(mask, 0, n, p, seed, key);
}

void rl_lora_dropout_mask_rows(float *mask, const int *rows, int n, int width, float p,
                               uint64_t seed, uint64_t key) {
    for (int r = 0; r < n; r++) {
        s_mask_span(mask + (size_t)r * width, (size_t)rows[r] * (size_t)width, (size_t)width, p,
                    seed, key);
    }
}

// ---------------------------------------------------------------------------------------------
// shadows

rl_lora_t *rl_lora_shadow_new(const rl_lora_t *src) {
    rl_lora_t *self = calloc(1, sizeof *self);
    if (!self) {
        return NULL;
    }
    self->shadow = 1;
    if (rl_lora_shadow_sync(self, src) != 0) {
        rl_lora_destroy(&self);
    }
    return self;
}

int rl_lora_shadow_sync(rl_lora_t *self, const rl_lora_t *src) {
    float *dmem = self->dmem, **dlayer = self->dlayer;
    size_t had = dmem ? self->n : 0;
    int L = self->cfg.num_hidden_layers;
    if (dlayer && L != src->cfg.num_hidden_layers) {
        free(dlayer);
        dlayer = NULL;
    }
    *self = *src;
    self->shadow = 1;
    self->dmem = dmem;
    self->dlayer = dlayer;
    if (had != src->n) {
        free(self->dmem);
        self->dmem = calloc(src->n ? src->n : 1, sizeof *self->dmem);
    }
    if (!self->dlayer) {
        self->dlayer = calloc((size_t)src->cfg.num_hidden_layers, sizeof *self->dlayer);
    }
    return self->dmem && self->dlayer ? 0 : RL_ENOMEM;
}

void rl_lora_shadow_move(rl_lora_t *src, rl_lora_t *self) {
    for (int l = 0; l < src->cfg.num_hidden_layers; l++) {
        float *d = s_grad(src, l, src->lstart[l]);
        const float *g = self->dmem + src->lstart[l];
        size_t n = src->lstart[l + 1] - src->lstart[l];
        for (size_t i = 0; d && i < n; i++) {
            d[i] += g[i];
        }
    }
    memset(self->dmem, 0, self->n * sizeof *self->dmem);
}

// ---------------------------------------------------------------------------------------------
// merge

void rl_lora_merge(const rl_lora_t *self, int l, int m, float *W) {
    const float *A = rl_lora_A(self, l, m), *B = rl_lora_B(self, l, m);
    if (!A) {
        return;
    }
    int in, out;
    rl_lora_module_dims(&self->cfg, m, &in, &out);
    // W (out,in) += scale * B (out,R) @ A (R,in)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out, in, self->R, self->scale, B,
                self->R, A, in, 1.0f, W, in);
}

// ---------------------------------------------------------------------------------------------
// PEFT folders

#define S_PREFIX "base_model.model.model.layers."

static void s_key(char *buf, size_t cap, int l, int m, char ab) {
    snprintf(buf, cap, S_PREFIX "%d.%s.lora_%c.weight", l, s_paths[m], ab);
}

static int s_mkdir(const char *dir, char *err, size_t err_len) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        return rl_errf(err, err_len, errno, "%s: %s", dir, strerror(errno));
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: not a directory", dir);
    }
    return 0;
}

int rl_lora_save(const rl_lora_t *self, const char *dir, const char *base_model, char *err,
                 size_t err_len) {
    int rc = s_mkdir(dir, err, err_len);
    if (rc) {
        return rc;
    }
    char path[4096];
    json_t *cfg = json_object(), *targets = json_array();
    rl_st_writer_t *w = rl_st_writer_new();
    char *text = NULL;
    if (!cfg || !targets || !w) {
        json_decref(targets);
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    for (int m = 0; m < RL_LORA_NMOD; m++) {
        if (self->targets & (1 << m)) {
            json_array_append_new(targets, json_string(rl_lora_module_name(m)));
        }
    }
    // the keys PEFT itself writes for a plain LoRA, so that PEFT, vLLM and TRL load it
    json_object_set_new(cfg, "alpha_pattern", json_object());
    json_object_set_new(cfg, "base_model_name_or_path",
                        base_model ? json_string(base_model) : json_null());
    json_object_set_new(cfg, "bias", json_string("none"));
    json_object_set_new(cfg, "fan_in_fan_out", json_false());
    json_object_set_new(cfg, "inference_mode", json_true());
    json_object_set_new(cfg, "init_lora_weights", json_true());
    json_object_set_new(cfg, "layers_pattern", json_null());
    json_object_set_new(cfg, "layers_to_transform", json_null());
    json_object_set_new(cfg, "lora_alpha", json_real(self->alpha));
    json_object_set_new(cfg, "lora_dropout", json_real(self->dropout));
    json_object_set_new(cfg, "modules_to_save", json_null());
    json_object_set_new(cfg, "peft_type", json_string("LORA"));
    json_object_set_new(cfg, "r", json_integer(self->R));
    json_object_set_new(cfg, "rank_pattern", json_object());
    json_object_set_new(cfg, "revision", json_null());
    json_object_set_new(cfg, "target_modules", targets);
    json_object_set_new(cfg, "task_type", json_string("CAUSAL_LM"));
    json_object_set_new(cfg, "use_dora", json_false());
    json_object_set_new(cfg, "use_rslora", self->use_rslora ? json_true() : json_false());
    text = json_dumps(cfg, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
    if (!text) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }

    for (int l = 0; l < self->cfg.num_hidden_layers; l++) {
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            if (!(self->targets & (1 << m))) {
                continue;
            }
            int in, out;
            rl_lora_module_dims(&self->cfg, m, &in, &out);
            char key[160];
            int64_t sa[2] = {self->R, in}, sb[2] = {out, self->R};
            s_key(key, sizeof key, l, m, 'A');
            rc = rl_st_writer_add(w, key, RL_DTYPE_F32, 2, sa, rl_lora_A(self, l, m));
            if (rc == 0) {
                s_key(key, sizeof key, l, m, 'B');
                rc = rl_st_writer_add(w, key, RL_DTYPE_F32, 2, sb, rl_lora_B(self, l, m));
            }
            if (rc) {
                rl_errf(err, err_len, rc, "adding tensor '%s': %s", key, rl_strerror(rc));
                goto fail;
            }
        }
    }
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if ((rc = rl_st_writer_write(w, path, err, err_len)) != 0) {
        goto fail;
    }
    // the config last: a folder with a config has its weights
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) {
        rc = rl_errf(err, err_len, errno, "%s: %s", path, strerror(errno));
        goto fail;
    }
    size_t len = strlen(text);
    int bad = fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    if (bad) {
        rc = rl_errf(err, err_len, RL_EIO, "%s: write failed", path);
    }
fail:
    free(text);
    json_decref(cfg);
    rl_st_writer_destroy(&w);
    return rc;
}

// "q_proj, k_proj, ..., down_proj" for messages
static void s_module_list(char *out, size_t n) {
    size_t o = 0;
    out[0] = '\0';
    for (int m = 0; m < RL_LORA_NMOD && o < n; m++) {
        o += (size_t)snprintf(out + o, n - o, "%s%s", m ? ", " : "", rl_lora_module_name(m));
    }
}

// Module index of a PEFT target name ("q_proj", or a dotted path ending in it), -1 if none.
static int s_module_index(const char *name) {
    const char *dot = strrchr(name, '.');
    const char *last = dot ? dot + 1 : name;
    for (int m = 0; m < RL_LORA_NMOD; m++) {
        if (strcmp(last, rl_recipe_lora_module_name(m)) == 0) {
            return m;
        }
    }
    return -1;
}

// A config key that must be absent, null, false or empty: a PEFT feature rlctl does not run.
static int s_refuse_feature(json_t *root, const char *key, const char *path, char *err,
                            size_t err_len) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v) || json_is_false(v) ||
        ((json_is_object(v) && json_object_size(v) == 0)) ||
        (json_is_array(v) && json_array_size(v) == 0)) {
        return 0;
    }
    return rl_errf(err, err_len, RL_EUNSUPPORTED, "%s: '%s' is set; rlctl supports plain LoRA "
                   "only (no %s)", path, key, key);
}

// Parses adapter_config.json into rank, alpha, dropout, targets, rslora.
static int s_parse_config(const char *path, int *r, float *alpha, float *dropout, int *targets,
                          int *rslora, char *err, size_t err_len) {
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            return rl_errf(err, err_len, RL_ENOTFOUND, "%s: no such file", path);
        }
        fclose(f);
        return rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: %s", path, je.line, je.column,
                       je.text);
    }
    int rc = 0;
    if (!json_is_object(root)) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: not a JSON object", path);
        goto fail;
    }
    json_t *v = json_object_get(root, "peft_type");
    if (!json_is_string(v) || strcmp(json_string_value(v), "LORA") != 0) {
        rc = rl_errf(err, err_len, RL_EUNSUPPORTED, "%s: 'peft_type' must be \"LORA\"", path);
        goto fail;
    }
    v = json_object_get(root, "task_type");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || strcmp(json_string_value(v), "CAUSAL_LM") != 0)) {
        rc = rl_errf(err, err_len, RL_EUNSUPPORTED, "%s: 'task_type' must be \"CAUSAL_LM\"",
                     path);
        goto fail;
    }
    v = json_object_get(root, "r");
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: 'r' must be a positive integer", path);
        goto fail;
    }
    *r = (int)json_integer_value(v);
    v = json_object_get(root, "lora_alpha");
    if (!json_is_number(v)) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: 'lora_alpha' must be a number", path);
        goto fail;
    }
    *alpha = (float)json_number_value(v);
    if (!isfinite(*alpha)) { // 1e39 parses as a double but is inf as the float the model scales by
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "%s: 'lora_alpha' is %g, not a finite float (|lora_alpha| < 3.4e38)", path,
                     json_number_value(v));
        goto fail;
    }
    v = json_object_get(root, "lora_dropout");
    *dropout = 0.0f;
    if (v && !json_is_null(v)) {
        if (!json_is_number(v) || json_number_value(v) < 0.0 || json_number_value(v) >= 1.0) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: 'lora_dropout' must be in [0, 1)", path);
            goto fail;
        }
        *dropout = (float)json_number_value(v);
    }
    v = json_object_get(root, "use_rslora");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: 'use_rslora' must be a boolean", path);
        goto fail;
    }
    *rslora = json_is_true(v);
    v = json_object_get(root, "bias");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || strcmp(json_string_value(v), "none") != 0)) {
        rc = rl_errf(err, err_len, RL_EUNSUPPORTED, "%s: 'bias' must be \"none\"", path);
        goto fail;
    }
    static const char *const refused[] = {
        "use_dora",      "modules_to_save", "layers_to_transform", "rank_pattern",
        "alpha_pattern", "fan_in_fan_out",  "lora_bias",           "layer_replication",
        "exclude_modules", "target_parameters"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        if ((rc = s_refuse_feature(root, refused[i], path, err, err_len)) != 0) {
            goto fail;
        }
    }
    v = json_object_get(root, "target_modules");
    *targets = 0;
    char mods[128];
    s_module_list(mods, sizeof mods);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        int m = s_module_index(s);
        if (strcmp(s, RL_RECIPE_LORA_ALL_LINEAR) == 0) {
            *targets = 0x7f;
        } else if (m >= 0) {
            *targets = 1 << m;
        } else {
            rc = rl_errf(err, err_len, RL_EUNSUPPORTED,
                         "%s: target_modules '%s' is not supported (a list of %s, or \"%s\")",
                         path, s, mods, RL_RECIPE_LORA_ALL_LINEAR);
            goto fail;
        }
    } else if (json_is_array(v) && json_array_size(v) > 0) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            int m = json_is_string(e) ? s_module_index(json_string_value(e)) : -1;
            if (m < 0) {
                rc = rl_errf(err, err_len, RL_EINVAL,
                             "%s: target module '%s' is not a Linear of the model (%s)", path,
                             json_is_string(e) ? json_string_value(e) : "(not a string)", mods);
                goto fail;
            }
            *targets |= 1 << m;
        }
    } else {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "%s: 'target_modules' must be a non-empty list of module names", path);
        goto fail;
    }
fail:
    json_decref(root);
    return rc;
}

// Parses "base_model.model.model.layers.<l>.<path>.lora_<A|B>.weight"; 0 on a match.
static int s_parse_key(const char *name, int L, int *l, int *m, char *ab) {
    size_t np = strlen(S_PREFIX);
    if (strncmp(name, S_PREFIX, np) != 0) {
        return -1;
    }
    const char *p = name + np;
    char *end;
    errno = 0;
    long li = strtol(p, &end, 10);
    if (end == p || *end != '.' || errno || li < 0 || li >= L || (p[0] == '0' && end - p > 1)) {
        return -1;
    }
    p = end + 1;
    for (int k = 0; k < RL_LORA_NMOD; k++) {
        size_t n = strlen(s_paths[k]);
        if (strncmp(p, s_paths[k], n) == 0 && (strcmp(p + n, ".lora_A.weight") == 0 ||
                                               strcmp(p + n, ".lora_B.weight") == 0)) {
            *l = (int)li;
            *m = k;
            *ab = p[n + 6];
            return 0;
        }
    }
    return -1;
}

int rl_lora_describe(const char *dir, rl_lora_info_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    int rc = s_parse_config(path, &out->r, &out->alpha, &out->dropout, &out->targets,
                            &out->use_rslora, err, err_len);
    if (rc != 0) {
        return rc;
    }
    json_t *root = json_load_file(path, 0, NULL);
    json_t *b = root ? json_object_get(root, "base_model_name_or_path") : NULL;
    if (json_is_string(b)) {
        snprintf(out->base_model, sizeof out->base_model, "%s", json_string_value(b));
    }
    json_decref(root);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    rl_st_file_t *f = NULL;
    if ((rc = rl_st_file_load(path, &f, err, err_len)) != 0) {
        return rc;
    }
    // seen[l * NMOD + m]: bit 0 = A, bit 1 = B, over the layers the names hold
    int n = rl_st_file_count(f), L = 0;
    for (int i = 0; i < n; i++) {
        int l, m;
        char ab;
        if (s_parse_key(rl_st_file_tensor(f, i)->name, 1 << 20, &l, &m, &ab) == 0) {
            L = l + 1 > L ? l + 1 : L;
        }
    }
    unsigned char *seen = calloc((size_t)L * RL_LORA_NMOD + 1, 1);
    if (!seen) {
        rl_st_file_destroy(&f);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n && rc == 0; i++) {
        const rl_st_tensor_t *t = rl_st_file_tensor(f, i);
        int l, m;
        char ab;
        if (s_parse_key(t->name, L, &l, &m, &ab) != 0) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: tensor '%.200s' is not a LoRA weight "
                         "(%s<layer>.<module>.lora_A|lora_B.weight)",
                         path, t->name, S_PREFIX);
        } else if (!(out->targets & (1 << m))) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: tensor '%.200s' is of %s, which "
                         "target_modules does not name",
                         path, t->name, rl_lora_module_name(m));
        } else if (t->ndim != 2 || t->shape[ab == 'A' ? 0 : 1] != out->r) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: tensor '%.200s' is not of rank r = %d "
                         "(lora_A is (r, in), lora_B (out, r))",
                         path, t->name, out->r);
        } else if (seen[l * RL_LORA_NMOD + m] & (ab == 'A' ? 1 : 2)) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: tensor '%.200s' appears twice", path,
                         t->name);
        } else {
            seen[l * RL_LORA_NMOD + m] |= ab == 'A' ? 1 : 2;
        }
    }
    for (int k = 0; k < L * RL_LORA_NMOD && rc == 0; k++) {
        if (seen[k] == 1 || seen[k] == 2) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: layer %d's %s has lora_%c but not lora_%c",
                         path, k / RL_LORA_NMOD, rl_lora_module_name(k % RL_LORA_NMOD),
                         seen[k] == 1 ? 'A' : 'B', seen[k] == 1 ? 'B' : 'A');
        }
        out->pairs += seen[k] == 3;
    }
    out->layers = L;
    free(seen);
    rl_st_file_destroy(&f);
    return rc;
}

int rl_lora_load(const rl_hf_config_t *cfg, const char *dir, int with_grads, rl_lora_t **out,
                 char *err, size_t err_len) {
    *out = NULL;
    char path[4096];
    int r = 0, targets = 0, rslora = 0;
    float alpha = 0.0f, dropout = 0.0f;
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    int rc = s_parse_config(path, &r, &alpha, &dropout, &targets, &rslora, err, err_len);
    if (rc) {
        return rc;
    }
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    rl_st_file_t *f = NULL;
    if ((rc = rl_st_file_load(path, &f, err, err_len)) != 0) {
        return rc;
    }
    rl_lora_t *self = s_alloc(cfg, r, alpha, dropout, targets, rslora, with_grads);
    if (!self) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory for a rank-%d adapter", r);
        goto fail;
    }
    // every tensor in the file must be one we expect, with its shape
    const int L = cfg->num_hidden_layers;
    int n = rl_st_file_count(f);
    for (int i = 0; i < n; i++) {
        const rl_st_tensor_t *t = rl_st_file_tensor(f, i);
        int l, m;
        char ab;
        if (s_parse_key(t->name, L, &l, &m, &ab) != 0) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: unexpected tensor '%s' (not a LoRA weight of a %d-layer %s model)",
                         path, t->name, L, rl_hf_arch_name(cfg->arch));
            goto fail;
        }
        if (!(targets & (1 << m))) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: tensor '%s' belongs to module '%s', which target_modules does "
                         "not list", path, t->name, rl_lora_module_name(m));
            goto fail;
        }
        int in, o;
        rl_lora_module_dims(cfg, m, &in, &o);
        int64_t want0 = ab == 'A' ? r : o, want1 = ab == 'A' ? in : r;
        if (t->ndim != 2 || t->shape[0] != want0 || t->shape[1] != want1) {
            char got[96] = "[";
            size_t len = 1;
            for (int d = 0; d < t->ndim && len < sizeof got; d++) {
                len += (size_t)snprintf(got + len, sizeof got - len, "%s%lld", d ? "," : "",
                                        (long long)t->shape[d]);
            }
            if (len < sizeof got) {
                snprintf(got + len, sizeof got - len, "]");
            }
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: tensor '%s' has shape %s, expected [%lld,%lld] (r=%d, %s is "
                         "%d -> %d)",
                         path, t->name, got, (long long)want0, (long long)want1, r,
                         rl_lora_module_name(m), in, o);
            goto fail;
        }
        if ((rc = rl_st_check_finite(t, path, err, err_len)) != 0) {
            goto fail;
        }
        rl_st_to_f32(ab == 'A' ? rl_lora_A(self, l, m) : rl_lora_B(self, l, m), t);
    }
    // and every expected tensor must be there
    for (int l = 0; l < L; l++) {
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            if (!(targets & (1 << m))) {
                continue;
            }
            for (int k = 0; k < 2; k++) {
                char key[160];
                s_key(key, sizeof key, l, m, k ? 'B' : 'A');
                if (!rl_st_file_find(f, key)) {
                    rc = rl_errf(err, err_len, RL_EINVAL, "%s: missing tensor '%s'", path, key);
                    goto fail;
                }
            }
        }
    }
    *out = self;
    self = NULL;
fail:
    rl_lora_destroy(&self);
    rl_st_file_destroy(&f);
    return rc;
}

// test_model — rl_model and rl_lora on tiny random models (C = 8, L = 2, V = 11).
// `numeric` group: backward against a double-precision central finite difference of
// L = sum(w * logp) computed by a reference decoder built from rl_layers' double `_ref` twins
// (llama, qwen2 with biases, qwen3 with q/k norm and head_dim != C/NH; tied and untied; full and
// LoRA), cached decode against the full forward, recompute against stored activations; the
// scalar head (rl_head: critic values, reward scores) through rl_model_backward_hidden against
// finite differences of every parameter / LoRA entry and the head weight, and the logp path
// bit for bit unchanged by forwards without the vocabulary head.
// `unit` group: PEFT folders (round trip, refusals naming the tensor/module, the field or tensor
// that is not finite; a base folder with a NaN weight refused naming it), merged export,
// argument errors, zero-copy loading of F32 weights, `rlctl export`.
// Usage: test_model [numeric|unit] (no argument: both).
#include "rl_test.h"
#include "rl_test_fd.h"

#include "rl_err.h"
#include "rl_head.h"
#include "rl_hf.h"
#include "rl_layers.h"
#include "rl_lora.h"
#include "rl_model.h"
#include "rl_rng.h"
#include "rl_safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// configs

// arch "llama" (GQA 2:1), "llama_b" (llama with attention/mlp biases and llama3 RoPE scaling),
// "qwen2" (q/k/v biases), "qwen3" (q/k norm, head_dim 6 != C/NH = 4).
static rl_hf_config_t s_cfg(const char *arch, int tied) {
    char json[1024];
    const char *type = strncmp(arch, "llama", 5) == 0 ? "llama" : arch;
    const char *extra = "";
    if (strcmp(arch, "llama_b") == 0) {
        extra = ",\"attention_bias\":true,\"mlp_bias\":true,\"rope_scaling\":{\"rope_type\":"
                "\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                "\"original_max_position_embeddings\":16}";
    } else if (strcmp(arch, "qwen3") == 0) {
        extra = ",\"head_dim\":6";
    }
    snprintf(json, sizeof json,
             "{\"model_type\":\"%s\",\"hidden_size\":8,\"intermediate_size\":12,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
             "\"vocab_size\":11,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
             "\"max_position_embeddings\":64,\"initializer_range\":0.5,"
             "\"tie_word_embeddings\":%s%s}",
             type, tied ? "true" : "false", extra);
    rl_hf_config_t cfg;
    char err[512];
    int rc = rl_hf_config_parse(json, strlen(json), "test", &cfg, err, sizeof err);
    if (rc) {
        fprintf(stderr, "config: %s\n", err);
        abort();
    }
    return cfg;
}

// ---------------------------------------------------------------------------------------------
// the layer fields, for copying parameters into the double reference

enum { F_LN1, F_Q, F_QB, F_K, F_KB, F_V, F_VB, F_O, F_OB, F_QN, F_KN, F_LN2, F_G, F_GB, F_U,
       F_UB, F_D, F_DB, NF };
static const char *const s_fname[NF] = {"ln1", "q", "q_bias", "k", "k_bias", "v", "v_bias", "o",
                                        "o_bias", "q_norm", "k_norm", "ln2", "gate", "gate_bias",
                                        "up", "up_bias", "down", "down_bias"};

static float **s_field(rl_layer_params_t *p, int f) {
    float **t[NF] = {&p->input_layernorm, &p->q_proj, &p->q_bias, &p->k_proj, &p->k_bias,
                     &p->v_proj, &p->v_bias, &p->o_proj, &p->o_bias, &p->q_norm, &p->k_norm,
                     &p->post_attention_layernorm, &p->gate_proj, &p->gate_bias, &p->up_proj,
                     &p->up_bias, &p->down_proj, &p->down_bias};
    return t[f];
}

static size_t s_field_n(const rl_hf_config_t *c, int f) {
    size_t C = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
    size_t QD = (size_t)c->num_attention_heads * (size_t)c->head_dim;
    size_t KVD = (size_t)c->num_key_value_heads * (size_t)c->head_dim, D = (size_t)c->head_dim;
    size_t n[NF] = {C, QD * C, QD, KVD * C, KVD, KVD * C, KVD, C * QD, C, D, D, C,
                    I * C, I, I * C, I, C * I, C};
    return n[f];
}

// LoRA module m uses field s_mod_field[m]
static const int s_mod_field[RL_LORA_NMOD] = {F_Q, F_K, F_V, F_O, F_G, F_U, F_D};

// ---------------------------------------------------------------------------------------------
// double-precision reference decoder (rl_layers' _ref twins, plain composition)

typedef struct {
    rl_hf_config_t cfg;
    double *emb, *norm, *head; // head == emb when tied
    double *w[2][NF];          // [L][field], NULL when absent
    double *A[2][RL_LORA_NMOD], *B[2][RL_LORA_NMOD];
    int R;
    double scale;
    float dropout;   // LoRA dropout of the model's first training forward (rl_model.c's key)
    uint64_t seed;
    int loss;        // S_LOSS_*: what s_ref_loss sums
    double *score;   // (C) scalar head weight (S_LOSS_VALUES, S_LOSS_SCORE)
} s_ref_t;

// s_ref_loss's loss: sum wts*logp (B,T); sum wts*values (B,T) or sum wts*scores (B) of the
// scalar head (rl_head.h) on the final norm's output.
enum { S_LOSS_LOGP = 0, S_LOSS_VALUES, S_LOSS_SCORE };

static double *s_dup(const float *p, size_t n) {
    if (!p) {
        return NULL;
    }
    double *d = malloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) {
        d[i] = p[i];
    }
    return d;
}

// Copies the model's parameters (and the LoRA weights laid out as rl_lora.h states: layer-major,
// module order, A then B) into doubles.
static void s_ref_init(s_ref_t *r, rl_model_t *m, int lora_targets, int R, double scale) {
    memset(r, 0, sizeof *r);
    r->cfg = *rl_model_config(m);
    const rl_hf_config_t *c = &r->cfg;
    rl_model_params_t *p = rl_model_params(m);
    size_t VC = (size_t)c->vocab_size * (size_t)c->hidden_size;
    r->emb = s_dup(p->embed_tokens, VC);
    r->norm = s_dup(p->norm, (size_t)c->hidden_size);
    r->head = c->tie_word_embeddings ? r->emb : s_dup(p->lm_head, VC);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        for (int f = 0; f < NF; f++) {
            r->w[l][f] = s_dup(*s_field(&p->layers[l], f), s_field_n(c, f));
        }
    }
    r->R = R;
    r->scale = scale;
    if (lora_targets) {
        size_t n;
        float *t = rl_model_trainable(m, &n);
        size_t off = 0;
        for (int l = 0; l < c->num_hidden_layers; l++) {
            for (int k = 0; k < RL_LORA_NMOD; k++) {
                if (lora_targets & (1 << k)) {
                    int in, out;
                    rl_lora_module_dims(c, k, &in, &out);
                    r->A[l][k] = s_dup(t + off, (size_t)R * in);
                    off += (size_t)R * in;
                    r->B[l][k] = s_dup(t + off, (size_t)out * R);
                    off += (size_t)out * R;
                }
            }
        }
        RL_ASSERT(off == n);
    }
}

static void s_ref_free(s_ref_t *r) {
    if (r->head != r->emb) {
        free(r->head);
    }
    free(r->emb);
    free(r->norm);
    free(r->score);
    for (int l = 0; l < 2; l++) {
        for (int f = 0; f < NF; f++) {
            free(r->w[l][f]);
        }
        for (int k = 0; k < RL_LORA_NMOD; k++) {
            free(r->A[l][k]);
            free(r->B[l][k]);
        }
    }
}

static void s_ref_proj(const s_ref_t *r, int l, int k, double *out, const double *inp, int N,
                       int IC, int OC) {
    int f = s_mod_field[k];
    rl_linear_forward_ref(out, inp, r->w[l][f], r->w[l][f + 1], N, IC, OC); // bias: next field
    if (r->A[l][k]) {
        size_t n = (size_t)N * IC;
        double *xa = malloc((size_t)N * r->R * sizeof *xa), *xd = malloc(n * sizeof *xd);
        float *mask = malloc(n * sizeof *mask);
        for (size_t i = 0; i < n; i++) {
            mask[i] = 1.0f;
        }
        if (r->dropout > 0.0f) { // the mask of the model's first training forward
            rl_lora_dropout_mask(mask, n, r->dropout, r->seed, rl_lora_dropout_key(1, l, k));
        }
        for (size_t i = 0; i < n; i++) {
            xd[i] = inp[i] * mask[i];
        }
        rl_lora_forward_ref(out, xa, xd, r->A[l][k], r->B[l][k], r->scale, N, IC, r->R, OC);
        free(xa);
        free(xd);
        free(mask);
    }
}

// The decoder up to the final norm: hid (B*T, C), as rl_model_hidden; tg (B*T) gets the head's
// targets (row t predicts token t+1, -1 where none).
static void s_ref_hidden(const s_ref_t *r, const int32_t *tok, const int *len, int B, int T,
                         double *hid, int32_t *tg) {
    const rl_hf_config_t *c = &r->cfg;
    const int N = B * T, C = c->hidden_size, I = c->intermediate_size, NH = c->num_attention_heads;
    const int NKV = c->num_key_value_heads, D = c->head_dim, QD = NH * D, KVD = NKV * D;
    const double eps = c->rms_norm_eps;
    int32_t *ids = malloc((size_t)N * sizeof *ids);
    int *pos = malloc((size_t)N * sizeof *pos);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int i = b * T + t;
            ids[i] = t < len[b] ? tok[i] : -1;
            tg[i] = t + 1 < len[b] ? tok[i + 1] : -1;
            pos[i] = t;
        }
    }
    double *inv = malloc((size_t)(D / 2) * sizeof *inv);
    rl_rope_inv_freq_ref(inv, c);
    size_t nC = (size_t)N * C;
    double *x = calloc(nC, 8), *ln = calloc(nC, 8), *rs = calloc((size_t)N * NH, 8);
    double *q = calloc((size_t)N * QD, 8), *k = calloc((size_t)N * KVD, 8);
    double *v = calloc((size_t)N * KVD, 8), *qr = calloc((size_t)N * QD, 8);
    double *kr = calloc((size_t)N * KVD, 8), *att = calloc((size_t)N * QD, 8);
    double *lse = calloc((size_t)N * NH, 8), *o = calloc(nC, 8), *h = calloc(nC, 8);
    double *g = calloc((size_t)N * I, 8), *u = calloc((size_t)N * I, 8);
    double *act = calloc((size_t)N * I, 8);
    rl_embedding_forward_ref(x, ids, r->emb, N, C);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        double *const *w = r->w[l];
        rl_rmsnorm_forward_ref(ln, rs, x, w[F_LN1], eps, N, C);
        s_ref_proj(r, l, 0, q, ln, N, C, QD);
        s_ref_proj(r, l, 1, k, ln, N, C, KVD);
        s_ref_proj(r, l, 2, v, ln, N, C, KVD);
        if (c->qk_norm) {
            rl_rmsnorm_forward_ref(qr, rs, q, w[F_QN], eps, N * NH, D);
            memcpy(q, qr, (size_t)N * QD * 8);
            rl_rmsnorm_forward_ref(kr, rs, k, w[F_KN], eps, N * NKV, D);
            memcpy(k, kr, (size_t)N * KVD * 8);
        }
        rl_rope_forward_ref(qr, q, inv, pos, N, NH, D);
        rl_rope_forward_ref(kr, k, inv, pos, N, NKV, D);
        rl_attention_forward_ref(att, lse, qr, kr, v, len, B, T, NH, NKV, D);
        s_ref_proj(r, l, 3, o, att, N, QD, C);
        for (size_t i = 0; i < nC; i++) {
            h[i] = x[i] + o[i];
        }
        rl_rmsnorm_forward_ref(ln, rs, h, w[F_LN2], eps, N, C);
        s_ref_proj(r, l, 4, g, ln, N, C, I);
        s_ref_proj(r, l, 5, u, ln, N, C, I);
        rl_swiglu_forward_ref(act, g, u, (size_t)N * I);
        s_ref_proj(r, l, 6, o, act, N, I, C);
        for (size_t i = 0; i < nC; i++) {
            x[i] = h[i] + o[i];
        }
    }
    rl_rmsnorm_forward_ref(hid, rs, x, r->norm, eps, N, C);
    free(ids), free(pos), free(inv), free(x), free(ln), free(rs), free(q), free(k);
    free(v), free(qr), free(kr), free(att), free(lse), free(o), free(h), free(g), free(u);
    free(act);
}

// w . hid_row in double (the scalar head)
static double s_ref_dot(const double *w, const double *row, int C) {
    double acc = 0.0;
    for (int i = 0; i < C; i++) {
        acc += w[i] * row[i];
    }
    return acc;
}

// Returns the loss of r->loss: L = sum_{b,t} wts[b,t] * logp[b,t] with logp (B,T) aligned as
// rl_model_forward's; or L = sum_{b,t} wts[b,t] * v[b,t], v[b,t] = w . hid[b,t-1] for
// 1 <= t < len[b], else 0 (rl_head values); or L = sum_b wts[b] * s[b], s[b] = w .
// hid[b,len[b]-1] (rl_head score). out (B,T or B) or NULL gets logp / v / s.
static double s_ref_loss(const s_ref_t *r, const int32_t *tok, const int *len, int B, int T,
                         double temp, const double *wts, double *out) {
    const int N = B * T, C = r->cfg.hidden_size;
    double *hid = calloc((size_t)N * C, 8), *lp = calloc((size_t)N, 8);
    int32_t *tg = malloc((size_t)N * sizeof *tg);
    s_ref_hidden(r, tok, len, B, T, hid, tg);
    double loss = 0.0;
    if (r->loss == S_LOSS_SCORE) {
        for (int b = 0; b < B; b++) {
            double val = s_ref_dot(r->score, hid + ((size_t)b * T + len[b] - 1) * C, C);
            if (out) {
                out[b] = val;
            }
            loss += wts ? wts[b] * val : 0.0;
        }
    } else {
        if (r->loss == S_LOSS_LOGP) {
            rl_logprob_forward_ref(lp, NULL, hid, r->head, tg, temp, N, C, r->cfg.vocab_size);
        } else { // values: row t-1 holds the value of column t, as lp
            for (int i = 0; i < N; i++) {
                lp[i] = s_ref_dot(r->score, hid + (size_t)i * C, C);
            }
        }
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                int i = b * T + t;
                double val = t >= 1 && t < len[b] ? lp[i - 1] : 0.0;
                if (out) {
                    out[i] = val;
                }
                loss += wts ? wts[i] * val : 0.0;
            }
        }
    }
    free(hid), free(lp), free(tg);
    return loss;
}

// ---------------------------------------------------------------------------------------------
// helpers

static rl_model_t *s_model(const rl_hf_config_t *cfg, rl_tune_t tune, int targets, int rslora,
                           float dropout, int recompute, uint64_t seed) {
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.tune = tune;
    o.lora_r = 3;
    o.lora_alpha = 5.0f;
    o.lora_targets = targets;
    o.use_rslora = rslora;
    o.lora_dropout = dropout;
    o.recompute = recompute;
    o.seed = seed;
    o.threads = 1;
    char err[512] = "";
    rl_model_t *m = rl_model_new_random(cfg, &o, seed, err, sizeof err);
    if (!m) {
        fprintf(stderr, "new_random: %s\n", err);
        abort();
    }
    return m;
}

// Gives norms and biases non-trivial values (init has them at 1 and 0, where some gradient
// paths vanish) and, for LoRA, B non-zero (PEFT's B = 0 makes dA = 0).
static void s_shake(rl_model_t *m, uint64_t seed) {
    const rl_hf_config_t *c = rl_model_config(m);
    rl_model_params_t *p = rl_model_params(m);
    rl_rng_t rng;
    rl_rng_seed(&rng, seed);
    for (int l = 0; l < c->num_hidden_layers; l++) {
        for (int f = 0; f < NF; f++) {
            float *t = *s_field(&p->layers[l], f);
            int is_norm = f == F_LN1 || f == F_LN2 || f == F_QN || f == F_KN;
            int is_bias = f == F_QB || f == F_KB || f == F_VB || f == F_OB || f == F_GB ||
                          f == F_UB || f == F_DB;
            if (t && (is_norm || is_bias)) {
                for (size_t i = 0; i < s_field_n(c, f); i++) {
                    t[i] = (is_norm ? 1.0f : 0.0f) + 0.3f * (float)rl_rng_normal(&rng);
                }
            }
        }
    }
    for (int i = 0; i < c->hidden_size; i++) {
        p->norm[i] = 1.0f + 0.3f * (float)rl_rng_normal(&rng);
    }
    size_t n;
    float *t = rl_model_trainable(m, &n);
    if (t && rl_model_grads(m) == NULL) { // LoRA: every A and B
        rl_rng_fill_normal(&rng, t, n, 0.0f, 0.4f);
    }
}

// B = 2 sequences, T = 5, lengths 5 and 3; padding holds out-of-range ids that must be ignored.
#define S_B 2
#define S_T 5
static const int32_t s_tok[S_B * S_T] = {1, 7, 3, 10, 4, 2, 9, 5, 99, -3};
static const int s_len[S_B] = {5, 3};

static double s_max_abs_diff(const float *a, const float *b, size_t n) {
    double mx = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        mx = d > mx ? d : mx;
    }
    return mx;
}

// ---------------------------------------------------------------------------------------------
// (1) backward against double finite differences

typedef struct {
    const char *arch;
    int tied;
    rl_tune_t tune;
    int rslora;
    float dropout;
} s_case_t;

static double s_worst_grad_err = 0.0, s_worst_fwd_err = 0.0, s_worst_grad_rel = 0.0;
static int s_n_grads = 0;

// The reference's loss with weights wts (an rl_fd_fn_d: the parameter moved is one of r's).
typedef struct {
    const s_ref_t *r;
    const double *wts;
} s_fd_ctx_t;

static double s_fd_loss(void *ctx, const double *x) {
    (void)x; // a parameter of c->r, moved in place
    const s_fd_ctx_t *c = ctx;
    return s_ref_loss(c->r, s_tok, s_len, S_B, S_T, 0.7, c->wts, NULL);
}

// One parameter: float backward gradient g vs the central difference of the double loss.
static void s_fd_check(const char *what, s_ref_t *r, double *dp, float g, const double *wts,
                       int *bad) {
    s_fd_ctx_t c = {r, wts};
    double fd = rl_fd_central_d(s_fd_loss, &c, dp, 0, 1e-5);
    // Tolerance: the truncation error of the double difference is h^2 f''' / 6 ~ 1e-10 and its
    // rounding 1e-16 / h ~ 1e-11, so fd is exact to ~1e-9; the float backward rounds each of
    // its O(10^2) products per gradient entry at 6e-8 relative, on terms of O(1): expect a few
    // 1e-6 absolute. 2e-4 absolute + 1e-3 relative leaves margin across BLAS kernels and
    // thread counts while still catching any wrong term (which is O(1e-2) or more here).
    double err = fabs((double)g - fd);
    double tol = 2e-4 + 1e-3 * fabs(fd);
    s_worst_grad_err = err > s_worst_grad_err ? err : s_worst_grad_err;
    if (fabs(fd) > 1e-2 && err / fabs(fd) > s_worst_grad_rel) {
        s_worst_grad_rel = err / fabs(fd);
    }
    if (!(err <= tol)) {
        (*bad)++;
        fprintf(stderr, "  %s: backward %.9g vs finite difference %.9g (err %.3g)\n", what,
                (double)g, fd, err);
    }
}

static void s_grad_case(const s_case_t *k) {
    rl_hf_config_t cfg = s_cfg(k->arch, k->tied);
    const int lora = k->tune == RL_TUNE_LORA;
    const int targets = lora ? RL_LORA_ALL : 0;
    rl_model_t *m = s_model(&cfg, k->tune, targets, k->rslora, k->dropout, 0, 11);
    s_shake(m, 12);
    const int R = 3;
    double scale = k->rslora ? 5.0 / sqrt(3.0) : 5.0 / 3.0;
    s_ref_t r;
    s_ref_init(&r, m, targets, R, scale);
    r.dropout = k->dropout;
    r.seed = 11;

    // weights of the loss at valid positions
    double wts[S_B * S_T];
    float dlogp[S_B * S_T], logp[S_B * S_T], ent[S_B * S_T];
    rl_rng_t rng;
    rl_rng_seed(&rng, 5);
    for (int i = 0; i < S_B * S_T; i++) {
        int t = i % S_T, b = i / S_T;
        wts[i] = t >= 1 && t < s_len[b] ? 2.0 * rl_rng_uniform(&rng) - 1.0 : 0.0;
        dlogp[i] = (float)wts[i];
    }
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 0.7f, 1, logp, ent), 0);
    double ref_logp[S_B * S_T];
    s_ref_loss(&r, s_tok, s_len, S_B, S_T, 0.7, wts, ref_logp);
    for (int i = 0; i < S_B * S_T; i++) {
        double e = fabs(logp[i] - ref_logp[i]);
        s_worst_fwd_err = e > s_worst_fwd_err ? e : s_worst_fwd_err;
        CHECK_CLOSE(logp[i], ref_logp[i], 2e-5);
        int t = i % S_T, b = i / S_T;
        if (t == 0 || t >= s_len[b]) {
            CHECK(logp[i] == 0.0f && ent[i] == 0.0f);
        } else {
            CHECK(logp[i] < 0.0f && ent[i] > 0.0f && ent[i] <= logf(11.0f) + 1e-5f);
        }
    }
    rl_model_zero_grad(m);
    CHECK_INT(rl_model_backward(m, dlogp), 0);

    int bad = 0, checked = 0;
    char what[128];
    rl_rng_seed(&rng, 77);
    if (!lora) {
        rl_model_params_t *g = rl_model_grads(m);
        CHECK(g != NULL);
        for (int l = 0; l < cfg.num_hidden_layers; l++) {
            for (int f = 0; f < NF; f++) {
                if (!r.w[l][f]) {
                    continue;
                }
                float *gf = *s_field(&g->layers[l], f);
                for (int rep = 0; rep < 2; rep++) {
                    size_t i = (size_t)rl_rng_below(&rng, s_field_n(&cfg, f));
                    snprintf(what, sizeof what, "%s%s layer %d %s[%zu]", k->arch,
                             k->tied ? " tied" : "", l, s_fname[f], i);
                    s_fd_check(what, &r, &r.w[l][f][i], gf[i], wts, &bad);
                    checked++;
                }
            }
        }
        // embedding rows of used tokens (tied: the same entries also feed the head)
        for (int rep = 0; rep < 3; rep++) {
            size_t i = (size_t)s_tok[rep * 2 + 1] * cfg.hidden_size + (size_t)rep;
            snprintf(what, sizeof what, "%s embed[%zu]", k->arch, i);
            s_fd_check(what, &r, &r.emb[i], g->embed_tokens[i], wts, &bad);
            i = (size_t)rl_rng_below(&rng, (uint64_t)cfg.vocab_size * cfg.hidden_size);
            snprintf(what, sizeof what, "%s lm_head[%zu]", k->arch, i);
            s_fd_check(what, &r, &r.head[i], g->lm_head[i], wts, &bad);
            i = (size_t)rl_rng_below(&rng, (uint64_t)cfg.hidden_size);
            snprintf(what, sizeof what, "%s norm[%zu]", k->arch, i);
            s_fd_check(what, &r, &r.norm[i], g->norm[i], wts, &bad);
            checked += 3;
        }
        if (k->tied) {
            CHECK(g->lm_head == g->embed_tokens);
        }
    } else {
        CHECK(rl_model_grads(m) == NULL);
        size_t n;
        rl_model_trainable(m, &n);
        const float *gt = rl_model_trainable_grads(m);
        size_t off = 0;
        for (int l = 0; l < cfg.num_hidden_layers; l++) {
            for (int km = 0; km < RL_LORA_NMOD; km++) {
                int in, out;
                rl_lora_module_dims(&cfg, km, &in, &out);
                for (int rep = 0; rep < 2; rep++) {
                    size_t i = (size_t)rl_rng_below(&rng, (uint64_t)R * in);
                    snprintf(what, sizeof what, "%s layer %d %s lora_A[%zu]", k->arch, l,
                             rl_lora_module_name(km), i);
                    s_fd_check(what, &r, &r.A[l][km][i], gt[off + i], wts, &bad);
                    size_t j = (size_t)rl_rng_below(&rng, (uint64_t)out * R);
                    snprintf(what, sizeof what, "%s layer %d %s lora_B[%zu]", k->arch, l,
                             rl_lora_module_name(km), j);
                    s_fd_check(what, &r, &r.B[l][km][j], gt[off + (size_t)R * in + j], wts,
                               &bad);
                    checked += 2;
                }
                off += (size_t)R * (in + out);
            }
        }
        CHECK(off == n);
    }
    CHECK_MSG(bad == 0, "%s%s %s: %d of %d gradients off", k->arch, k->tied ? " tied" : "",
              lora ? "lora" : "full", bad, checked);
    s_n_grads += checked;
    s_ref_free(&r);
    rl_model_destroy(&m);
}

static void s_test_grads(void) {
    static const s_case_t cases[] = {
        {"llama", 0, RL_TUNE_FULL, 0, 0.0f},   {"llama_b", 1, RL_TUNE_FULL, 0, 0.0f},
        {"qwen2", 0, RL_TUNE_FULL, 0, 0.0f},   {"qwen2", 1, RL_TUNE_LORA, 0, 0.0f},
        {"qwen3", 0, RL_TUNE_FULL, 0, 0.0f},   {"qwen3", 1, RL_TUNE_FULL, 0, 0.0f},
        {"qwen3", 0, RL_TUNE_LORA, 1, 0.0f},   {"llama", 1, RL_TUNE_LORA, 0, 0.0f},
        {"llama_b", 0, RL_TUNE_LORA, 0, 0.3f}, // dropout: the double reference applies the mask
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s_grad_case(&cases[i]);
    }
    fprintf(stderr, "grads: %d checked; worst |backward - fd| %.3g (relative %.3g where |fd| > "
            "0.01), worst |logp - double ref| %.3g\n", s_n_grads, s_worst_grad_err,
            s_worst_grad_rel, s_worst_fwd_err);
}

// ---------------------------------------------------------------------------------------------
// (7) the scalar head (rl_head) through the whole model: critic values and reward scores

typedef struct {
    const char *arch;
    int tied;
    rl_tune_t tune;
    int rslora;
    float dropout;
    int loss; // S_LOSS_VALUES or S_LOSS_SCORE
} s_head_case_t;

// One loss L = sum c * v (values, c (B,T)) or sum c * s (scores, c (B)) through the head and the
// whole model: forward hidden and head output against the double reference, then the backward
// (rl_head_*_backward -> rl_model_backward_hidden) against central differences of L in double
// for EVERY scalar the loss depends on: every parameter (full) or every LoRA A/B entry (LoRA),
// and every entry of the head weight w.
static void s_head_case(const s_head_case_t *k) {
    rl_hf_config_t cfg = s_cfg(k->arch, k->tied);
    const int lora = k->tune == RL_TUNE_LORA, values = k->loss == S_LOSS_VALUES;
    const int targets = lora ? RL_LORA_ALL : 0, C = cfg.hidden_size;
    const char *tag = values ? "values" : "score";
    rl_model_t *m = s_model(&cfg, k->tune, targets, k->rslora, k->dropout, 0, 11);
    s_shake(m, 12);
    const int R = 3;
    s_ref_t r;
    s_ref_init(&r, m, targets, R, k->rslora ? 5.0 / sqrt(3.0) : 5.0 / 3.0);
    r.dropout = k->dropout;
    r.seed = 11;
    r.loss = k->loss;

    // the head weight (float values, so the double reference holds exactly the same numbers)
    // and the loss coefficients: at every position, the ones the head ignores included (t = 0,
    // padding, and for values the last real token), which must not matter
    rl_rng_t rng;
    rl_rng_seed(&rng, 13);
    float w[64], dw[64];
    RL_ASSERT(C <= 64);
    rl_rng_fill_normal(&rng, w, (size_t)C, 0.0f, 0.5f);
    r.score = malloc((size_t)C * sizeof *r.score);
    for (int i = 0; i < C; i++) {
        r.score[i] = w[i];
        dw[i] = 0.0f;
    }
    const int n_out = values ? S_B * S_T : S_B;
    double c[S_B * S_T], ref_out[S_B * S_T];
    float cf[S_B * S_T], out[S_B * S_T];
    for (int i = 0; i < n_out; i++) {
        cf[i] = (float)(2.0 * rl_rng_uniform(&rng) - 1.0);
        c[i] = cf[i];
    }

    // forward without the vocabulary head: hidden and head output against the reference
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 0.7f, 1, NULL, NULL), 0);
    const float *hid = rl_model_hidden(m);
    CHECK(hid != NULL);
    if (!hid) {
        s_ref_free(&r);
        rl_model_destroy(&m);
        return;
    }
    double *ref_hid = calloc((size_t)S_B * S_T * C, sizeof *ref_hid);
    int32_t tg[S_B * S_T];
    s_ref_hidden(&r, s_tok, s_len, S_B, S_T, ref_hid, tg);
    double e_hid = 0.0, e_out = 0.0;
    for (int b = 0; b < S_B; b++) {
        for (size_t i = (size_t)b * S_T * C; i < ((size_t)b * S_T + s_len[b]) * C; i++) {
            e_hid = fmax(e_hid, fabs(hid[i] - ref_hid[i]));
            CHECK_MSG(isfinite(hid[i]), "hidden[%zu] = %g", i, (double)hid[i]);
        }
    }
    if (values) {
        rl_head_values_forward(out, hid, w, s_len, S_B, S_T, C);
    } else {
        rl_head_score_forward(out, hid, w, s_len, S_B, S_T, C);
    }
    s_ref_loss(&r, s_tok, s_len, S_B, S_T, 0.7, c, ref_out);
    for (int i = 0; i < n_out; i++) {
        e_out = fmax(e_out, fabs(out[i] - ref_out[i]));
        if (values && ref_out[i] == 0.0) { // t = 0 and padding: exactly 0
            CHECK(out[i] == 0.0f);
        }
    }
    // fp32 decoder (as logp in s_grad_case) then one C = 8 dot product of O(1) terms
    CHECK_MSG(e_hid < 2e-5 && e_out < 2e-5, "%s %s: max |hidden - ref| %.3g, |%s - ref| %.3g",
              k->arch, tag, e_hid, tag, e_out);
    s_worst_fwd_err = fmax(s_worst_fwd_err, fmax(e_hid, e_out));
    free(ref_hid);

    // backward: the head gives dhidden and dw, the model takes dhidden
    float *dhid = malloc((size_t)S_B * S_T * C * sizeof *dhid);
    if (values) {
        rl_head_values_backward(dhid, dw, cf, hid, w, s_len, S_B, S_T, C);
    } else {
        rl_head_score_backward(dhid, dw, cf, hid, w, s_len, S_B, S_T, C);
    }
    rl_model_zero_grad(m);
    CHECK_INT(rl_model_backward_hidden(m, dhid), 0);

    int bad = 0, checked = 0;
    char what[160];
    for (int i = 0; i < C; i++) {
        snprintf(what, sizeof what, "%s %s head w[%d]", k->arch, tag, i);
        s_fd_check(what, &r, &r.score[i], dw[i], c, &bad);
        checked++;
    }
    if (!lora) {
        rl_model_params_t *g = rl_model_grads(m);
        for (int l = 0; l < cfg.num_hidden_layers; l++) {
            for (int f = 0; f < NF; f++) {
                float *gf = r.w[l][f] ? *s_field(&g->layers[l], f) : NULL;
                for (size_t i = 0; gf && i < s_field_n(&cfg, f); i++) {
                    snprintf(what, sizeof what, "%s%s %s layer %d %s[%zu]", k->arch,
                             k->tied ? " tied" : "", tag, l, s_fname[f], i);
                    s_fd_check(what, &r, &r.w[l][f][i], gf[i], c, &bad);
                    checked++;
                }
            }
        }
        const size_t VC = (size_t)cfg.vocab_size * C;
        for (size_t i = 0; i < VC; i++) { // the input embedding only: no vocabulary head here
            snprintf(what, sizeof what, "%s %s embed[%zu]", k->arch, tag, i);
            s_fd_check(what, &r, &r.emb[i], g->embed_tokens[i], c, &bad);
            checked++;
        }
        for (int i = 0; i < C; i++) {
            snprintf(what, sizeof what, "%s %s norm[%d]", k->arch, tag, i);
            s_fd_check(what, &r, &r.norm[i], g->norm[i], c, &bad);
            checked++;
        }
        if (!k->tied) { // lm_head gets nothing from backward_hidden: exactly 0
            int nz = 0;
            for (size_t i = 0; i < VC; i++) {
                nz += g->lm_head[i] != 0.0f;
            }
            CHECK_MSG(nz == 0, "%s %s: %d lm_head gradients non-zero", k->arch, tag, nz);
        }
    } else {
        size_t n;
        rl_model_trainable(m, &n);
        const float *gt = rl_model_trainable_grads(m);
        size_t off = 0;
        for (int l = 0; l < cfg.num_hidden_layers; l++) {
            for (int km = 0; km < RL_LORA_NMOD; km++) {
                int in, o;
                rl_lora_module_dims(&cfg, km, &in, &o);
                for (size_t i = 0; i < (size_t)R * in; i++) {
                    snprintf(what, sizeof what, "%s %s layer %d %s lora_A[%zu]", k->arch, tag, l,
                             rl_lora_module_name(km), i);
                    s_fd_check(what, &r, &r.A[l][km][i], gt[off + i], c, &bad);
                }
                for (size_t j = 0; j < (size_t)o * R; j++) {
                    snprintf(what, sizeof what, "%s %s layer %d %s lora_B[%zu]", k->arch, tag, l,
                             rl_lora_module_name(km), j);
                    s_fd_check(what, &r, &r.B[l][km][j], gt[off + (size_t)R * in + j], c, &bad);
                }
                checked += R * (in + o);
                off += (size_t)R * (in + o);
            }
        }
        CHECK(off == n);
    }
    CHECK_MSG(bad == 0, "%s%s %s %s: %d of %d gradients off", k->arch, k->tied ? " tied" : "",
              lora ? "lora" : "full", tag, bad, checked);
    fprintf(stderr, "head %s%s %s%s %s: %d gradients checked (every one), %d off\n", k->arch,
            k->tied ? " tied" : "", lora ? "lora" : "full", k->dropout > 0.0f ? " dropout" : "",
            tag, checked, bad);
    s_n_grads += checked;

    // dw accumulates (+=): a second backward of the head doubles it exactly (x + x = 2x)
    float dw2[64];
    memcpy(dw2, dw, sizeof dw2);
    if (values) {
        rl_head_values_backward(NULL, dw2, cf, hid, w, s_len, S_B, S_T, C);
    } else {
        rl_head_score_backward(NULL, dw2, cf, hid, w, s_len, S_B, S_T, C);
    }
    int acc_ok = 1;
    for (int i = 0; i < C; i++) {
        acc_ok &= dw2[i] == 2.0f * dw[i];
    }
    CHECK_MSG(acc_ok, "%s %s: dw does not accumulate", k->arch, tag);
    free(dhid);
    s_ref_free(&r);
    rl_model_destroy(&m);
}

// Existing paths unchanged by the scalar head: a forward with logp == NULL between two
// forwards changes nothing the logp path computes (logp, entropy, logits, gradients, bit for
// bit), computes the same hidden states, and rl_model_backward also follows it. Padding rows of
// dhidden do not reach any gradient.
static void s_test_head_paths(void) {
    static const struct {
        const char *arch;
        rl_tune_t tune;
    } cases[] = {{"llama_b", RL_TUNE_FULL}, {"qwen3", RL_TUNE_LORA}};
    for (size_t ci = 0; ci < 2; ci++) {
        rl_hf_config_t cfg = s_cfg(cases[ci].arch, 0);
        const int C = cfg.hidden_size, V = cfg.vocab_size;
        // a: logp forward only; b: a hidden-only forward first; c: hidden-only, then backward
        rl_model_t *a = s_model(&cfg, cases[ci].tune, RL_LORA_ALL, 0, 0.0f, 0, 51);
        rl_model_t *b = s_model(&cfg, cases[ci].tune, RL_LORA_ALL, 0, 0.0f, 0, 51);
        rl_model_t *c = s_model(&cfg, cases[ci].tune, RL_LORA_ALL, 0, 0.0f, 0, 51);
        s_shake(a, 52);
        s_shake(b, 52);
        s_shake(c, 52);
        float lpa[S_B * S_T], lpb[S_B * S_T], ea[S_B * S_T], eb[S_B * S_T], dl[S_B * S_T];
        for (int i = 0; i < S_B * S_T; i++) {
            dl[i] = 0.25f * (float)(i % 5) - 0.5f;
        }
        const size_t nh = (size_t)S_B * S_T * C;
        float *h_only = malloc(nh * sizeof(float)), *h_logp = malloc(nh * sizeof(float));
        CHECK(rl_model_hidden(b) == NULL); // no forward yet
        CHECK_INT(rl_model_forward(b, s_tok, s_len, S_B, S_T, 0.7f, 1, NULL, NULL), 0);
        memcpy(h_only, rl_model_hidden(b), nh * sizeof(float));
        float *lg_only = rl_model_logits(b); // the logits are still there on demand
        CHECK_INT(rl_model_forward(a, s_tok, s_len, S_B, S_T, 0.7f, 1, lpa, ea), 0);
        CHECK_INT(rl_model_forward(b, s_tok, s_len, S_B, S_T, 0.7f, 1, lpb, eb), 0);
        memcpy(h_logp, rl_model_hidden(b), nh * sizeof(float));
        float *lga = rl_model_logits(a), *lgb = rl_model_logits(b);
        CHECK(memcmp(lpa, lpb, sizeof lpa) == 0 && memcmp(ea, eb, sizeof ea) == 0);
        CHECK(memcmp(h_only, h_logp, nh * sizeof(float)) == 0);
        CHECK(memcmp(h_logp, rl_model_hidden(a), nh * sizeof(float)) == 0);
        CHECK(lga && lgb && lg_only);
        if (lga && lgb && lg_only) {
            CHECK(memcmp(lga, lgb, (size_t)S_B * S_T * V * sizeof(float)) == 0);
            CHECK(memcmp(lga, lg_only, (size_t)S_B * S_T * V * sizeof(float)) == 0);
        }
        free(lga), free(lgb), free(lg_only);
        // backward after a logp forward (a, b) and after a hidden-only forward (c)
        CHECK_INT(rl_model_forward(c, s_tok, s_len, S_B, S_T, 0.7f, 1, NULL, NULL), 0);
        CHECK_INT(rl_model_backward(a, dl), 0);
        CHECK_INT(rl_model_backward(b, dl), 0);
        CHECK_INT(rl_model_backward(c, dl), 0);
        CHECK(memcmp(h_logp, rl_model_hidden(a), nh * sizeof(float)) == 0); // backward keeps it
        size_t n;
        rl_model_trainable(a, &n);
        const float *ga = rl_model_trainable_grads(a), *gb = rl_model_trainable_grads(b);
        const float *gc = rl_model_trainable_grads(c);
        CHECK(memcmp(ga, gb, n * sizeof(float)) == 0);
        CHECK(memcmp(ga, gc, n * sizeof(float)) == 0);

        // backward_hidden ignores padding rows: garbage there changes no gradient
        float w[64], v[S_B * S_T], cv[S_B * S_T];
        rl_rng_t rng;
        rl_rng_seed(&rng, 53);
        rl_rng_fill_normal(&rng, w, (size_t)C, 0.0f, 0.5f);
        rl_rng_fill_normal(&rng, cv, S_B * S_T, 0.0f, 1.0f);
        float *dh = malloc(nh * sizeof(float)), *g1 = malloc(n * sizeof(float));
        rl_head_values_forward(v, rl_model_hidden(a), w, s_len, S_B, S_T, C);
        rl_head_values_backward(dh, NULL, cv, rl_model_hidden(a), w, s_len, S_B, S_T, C);
        rl_model_zero_grad(a);
        CHECK_INT(rl_model_backward_hidden(a, dh), 0);
        memcpy(g1, ga, n * sizeof(float));
        for (int bb = 0; bb < S_B; bb++) {
            for (size_t i = ((size_t)bb * S_T + s_len[bb]) * C; i < (size_t)(bb + 1) * S_T * C;
                 i++) {
                dh[i] = 1e3f;
            }
        }
        rl_model_zero_grad(a);
        CHECK_INT(rl_model_backward_hidden(a, dh), 0);
        CHECK_MSG(memcmp(g1, ga, n * sizeof(float)) == 0, "%s: padding rows of dhidden leak",
                  cases[ci].arch);
        // both backwards after one forward add up (the gradient of the sum of both losses)
        rl_model_zero_grad(a);
        CHECK_INT(rl_model_backward(a, dl), 0);
        CHECK_INT(rl_model_backward_hidden(a, dh), 0);
        double dsum = 0.0;
        for (size_t i = 0; i < n; i++) {
            dsum = fmax(dsum, fabs((double)ga[i] - (double)gb[i] - (double)g1[i]));
        }
        CHECK_MSG(dsum < 1e-5, "%s: backward + backward_hidden vs the sum: %.3g",
                  cases[ci].arch, dsum);
        fprintf(stderr, "head paths %s: logp forward unchanged by a hidden-only forward (bit for "
                "bit), padding rows ignored, sum of both backwards within %.3g\n",
                cases[ci].arch, dsum);
        free(dh), free(g1), free(h_only), free(h_logp);
        rl_model_destroy(&a);
        rl_model_destroy(&b);
        rl_model_destroy(&c);
    }
}

static void s_test_head(void) {
    static const s_head_case_t cases[] = {
        {"llama", 0, RL_TUNE_FULL, 0, 0.0f, S_LOSS_VALUES},
        {"llama", 1, RL_TUNE_LORA, 0, 0.0f, S_LOSS_VALUES},
        {"qwen3", 1, RL_TUNE_FULL, 0, 0.0f, S_LOSS_VALUES},
        {"qwen3", 0, RL_TUNE_LORA, 1, 0.0f, S_LOSS_VALUES},
        {"qwen2", 1, RL_TUNE_FULL, 0, 0.0f, S_LOSS_VALUES},
        {"llama_b", 0, RL_TUNE_LORA, 0, 0.3f, S_LOSS_VALUES}, // dropout: first forward's masks
        {"llama", 1, RL_TUNE_FULL, 0, 0.0f, S_LOSS_SCORE},
        {"qwen3", 0, RL_TUNE_LORA, 0, 0.0f, S_LOSS_SCORE},
        {"qwen3", 1, RL_TUNE_FULL, 0, 0.0f, S_LOSS_SCORE},
        {"llama_b", 0, RL_TUNE_FULL, 0, 0.0f, S_LOSS_SCORE},
    };
    s_worst_grad_err = s_worst_grad_rel = s_worst_fwd_err = 0.0;
    s_n_grads = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s_head_case(&cases[i]);
    }
    fprintf(stderr, "head grads: %d checked; worst |backward - fd| %.3g (relative %.3g where "
            "|fd| > 0.01), worst |hidden or head output - double ref| %.3g\n", s_n_grads,
            s_worst_grad_err, s_worst_grad_rel, s_worst_fwd_err);
    s_test_head_paths();
}

// ---------------------------------------------------------------------------------------------
// (4) recompute gives the same gradients

static void s_test_recompute(void) {
    static const struct {
        const char *arch;
        rl_tune_t tune;
        float dropout;
    } cases[] = {{"qwen3", RL_TUNE_FULL, 0.0f}, {"qwen2", RL_TUNE_LORA, 0.3f}};
    for (size_t c = 0; c < 2; c++) {
        rl_hf_config_t cfg = s_cfg(cases[c].arch, 0);
        rl_model_t *a = s_model(&cfg, cases[c].tune, RL_LORA_ALL, 0, cases[c].dropout, 0, 3);
        rl_model_t *b = s_model(&cfg, cases[c].tune, RL_LORA_ALL, 0, cases[c].dropout, 1, 3);
        s_shake(a, 4);
        s_shake(b, 4);
        float lpa[S_B * S_T], lpb[S_B * S_T], dl[S_B * S_T];
        for (int i = 0; i < S_B * S_T; i++) {
            dl[i] = (float)(i % 3) - 1.0f;
        }
        // two steps, so the second step's dropout masks differ from the first's
        for (int step = 0; step < 2; step++) {
            CHECK_INT(rl_model_forward(a, s_tok, s_len, S_B, S_T, 1.0f, 1, lpa, NULL), 0);
            CHECK_INT(rl_model_forward(b, s_tok, s_len, S_B, S_T, 1.0f, 1, lpb, NULL), 0);
            CHECK_INT(rl_model_backward(a, dl), 0);
            CHECK_INT(rl_model_backward(b, dl), 0);
        }
        size_t n;
        rl_model_trainable(a, &n);
        double d = s_max_abs_diff(rl_model_trainable_grads(a), rl_model_trainable_grads(b), n);
        double dlp = s_max_abs_diff(lpa, lpb, S_B * S_T);
        fprintf(stderr, "recompute %s: max |dgrad| %.3g, max |dlogp| %.3g over %zu params\n",
                cases[c].arch, d, dlp, n);
        CHECK(d == 0.0 && dlp == 0.0); // same kernels on the same inputs: bit for bit
        if (cases[c].dropout > 0.0f) {
            // dropout acts in training only: eval forwards agree with dropout-free math, and
            // two training forwards draw different masks
            float e1[S_B * S_T], t1[S_B * S_T], t2[S_B * S_T];
            CHECK_INT(rl_model_forward(a, s_tok, s_len, S_B, S_T, 1.0f, 0, e1, NULL), 0);
            CHECK_INT(rl_model_forward(a, s_tok, s_len, S_B, S_T, 1.0f, 1, t1, NULL), 0);
            CHECK_INT(rl_model_forward(a, s_tok, s_len, S_B, S_T, 1.0f, 1, t2, NULL), 0);
            CHECK(s_max_abs_diff(t1, t2, S_B * S_T) > 0.0);
            CHECK(s_max_abs_diff(e1, t1, S_B * S_T) > 0.0);
            // resume: restoring the training-forward count replays the same masks
            uint64_t k = rl_model_train_step(a);
            CHECK_INT(k, 4); // two steps above, then t1 and t2
            rl_model_set_train_step(b, k - 1);
            CHECK_INT(rl_model_forward(b, s_tok, s_len, S_B, S_T, 1.0f, 1, t1, NULL), 0);
            CHECK(s_max_abs_diff(t1, t2, S_B * S_T) == 0.0);
        }
        rl_model_destroy(&a);
        rl_model_destroy(&b);
    }
}

// ---------------------------------------------------------------------------------------------
// (4b) lanes: a forward and backward split over lanes (threads of their own) equal one lane's up
// to rounding (a row's sgemm may take another kernel in a smaller batch; lane gradients are
// summed in lane order), with the same dropout masks; shadows start every backward from zero.

static double s_rel_diff(const float *a, const float *b, size_t n) {
    double mx = 0.0, d = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)a[i]));
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    }
    return d / fmax(mx, 1e-30);
}

static void s_test_lanes(void) {
    static const struct {
        const char *arch;
        rl_tune_t tune;
        float dropout;
        int recompute, lanes;
    } cases[] = {{"qwen3", RL_TUNE_FULL, 0.0f, 0, 2},
                 {"qwen2", RL_TUNE_LORA, 0.3f, 1, 3},
                 {"llama", RL_TUNE_LORA, 0.0f, 0, 16}};
    enum { B = 5, T = 6 };
    const int32_t tok[B * T] = {1, 7, 3, 10, 4, 2, 9, 5, 8, 0, 0, 0, 3, 3, 6,
                                2, 1, 0, 4,  0, 0, 0, 0, 0, 6, 5, 4, 3, 2, 1};
    const int len[B] = {6, 3, 5, 1, 6};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rl_hf_config_t cfg = s_cfg(cases[c].arch, 0);
        const int C = cfg.hidden_size;
        rl_model_t *m[2];
        float lp[2][B * T], en[2][B * T], dl[B * T], *lg[2],
            *dh = malloc(sizeof(float) * B * T * C);
        const float *hid[2];
        for (int i = 0; i < B * T; i++) {
            dl[i] = (float)(i % 3) - 1.0f;
        }
        for (int i = 0; i < B * T * C; i++) {
            dh[i] = (float)((i * 7) % 5) * 0.1f - 0.2f;
        }
        for (int k = 0; k < 2; k++) {
            m[k] = s_model(&cfg, cases[c].tune, RL_LORA_ALL, 0, cases[c].dropout,
                           cases[c].recompute, 5);
            s_shake(m[k], 6);
            rl_model_set_lanes(m[k], k ? cases[c].lanes : 1);
            // two steps: the second backward must not see the first's shadow gradients twice
            for (int step = 0; step < 2; step++) {
                CHECK_INT(rl_model_forward(m[k], tok, len, B, T, 0.8f, 1, lp[k], en[k]), 0);
                CHECK_INT(rl_model_backward(m[k], dl), 0);
                CHECK_INT(rl_model_backward_hidden(m[k], dh), 0);
            }
            hid[k] = rl_model_hidden(m[k]);
            lg[k] = rl_model_logits(m[k]);
            CHECK(hid[k] && lg[k]);
        }
        size_t n;
        rl_model_trainable(m[0], &n);
        double dg = s_rel_diff(rl_model_trainable_grads(m[0]), rl_model_trainable_grads(m[1]), n);
        double dlp = s_rel_diff(lp[0], lp[1], B * T), den = s_rel_diff(en[0], en[1], B * T);
        double dhd = s_rel_diff(hid[0], hid[1], (size_t)B * T * C);
        double dlg = s_rel_diff(lg[0], lg[1], (size_t)B * T * cfg.vocab_size);
        fprintf(stderr,
                "lanes %s x%d: relative max diff grads %.3g, logp %.3g, entropy %.3g, "
                "hidden %.3g, logits %.3g\n",
                cases[c].arch, cases[c].lanes, dg, dlp, den, dhd, dlg);
        CHECK(dg < 1e-5 && dlp < 1e-5 && den < 1e-5 && dhd < 1e-5 && dlg < 1e-5);
        // padding rows: zeros in hidden, logits, logp
        int pad_ok = 1;
        for (int b = 0; b < B; b++) {
            for (int t = len[b]; t < T; t++) {
                pad_ok &= lp[1][b * T + t] == 0.0f && hid[1][((size_t)b * T + t) * C] == 0.0f &&
                          lg[1][((size_t)b * T + t) * cfg.vocab_size] == 0.0f;
            }
        }
        CHECK(pad_ok);
        free(lg[0]);
        free(lg[1]);
        free(dh);
        rl_model_destroy(&m[0]);
        rl_model_destroy(&m[1]);
    }
}

// (4c) step lanes: a prefill of many slots and batched decode steps split over lanes of whole
// slots give the logits of one lane (up to a row's sgemm rounding in a smaller batch).
static void s_test_step_lanes(void) {
    rl_hf_config_t cfg = s_cfg("qwen2", 0);
    enum { S = 40, P = 3, STEPS = 2 };
    const int V = cfg.vocab_size;
    rl_model_t *m[2];
    rl_kvcache_t *kv[2];
    float *lg[2];
    int32_t tok[S * P];
    int slot[S * P], pos[S * P];
    for (int k = 0; k < 2; k++) {
        m[k] = s_model(&cfg, RL_TUNE_LORA, RL_LORA_ALL, 0, 0.0f, 0, 8);
        s_shake(m[k], 9);
        rl_model_set_step_lanes(m[k], k ? 3 : 1);
        kv[k] = rl_kvcache_new(m[k], S, P + STEPS);
        lg[k] = malloc(sizeof(float) * (S * P + S * STEPS) * V);
        CHECK(kv[k] && lg[k]);
        for (int i = 0; i < S * P; i++) {
            tok[i] = (int32_t)((i * 7 + 3) % V), slot[i] = i / P, pos[i] = i % P;
        }
        CHECK_INT(rl_model_step(m[k], kv[k], tok, slot, pos, S * P, NULL, lg[k]), 0);
        for (int st = 0; st < STEPS; st++) {
            for (int i = 0; i < S; i++) {
                tok[i] = (int32_t)((i * 5 + st) % V), slot[i] = i, pos[i] = P + st;
            }
            float *out = lg[k] + (size_t)(S * P + S * st) * V;
            CHECK_INT(rl_model_step(m[k], kv[k], tok, slot, pos, S, NULL, out), 0);
        }
    }
    double d = s_rel_diff(lg[0], lg[1], (size_t)(S * P + S * STEPS) * V);
    fprintf(stderr, "step lanes x3: relative max diff of the logits %.3g\n", d);
    CHECK(d < 1e-5);
    for (int k = 0; k < 2; k++) {
        free(lg[k]);
        rl_kvcache_destroy(&kv[k]);
        rl_model_destroy(&m[k]);
    }
}

// ---------------------------------------------------------------------------------------------
// (2) cached decode equals the full forward

// logp of token `next` under logits (V) at temperature temp
static double s_logp_of(const float *logits, int V, int next, double temp) {
    double mx = -1e300, s = 0.0;
    for (int v = 0; v < V; v++) {
        mx = logits[v] / temp > mx ? logits[v] / temp : mx;
    }
    for (int v = 0; v < V; v++) {
        s += exp(logits[v] / temp - mx);
    }
    return logits[next] / temp - mx - log(s);
}

static void s_test_kvcache(void) {
    static const char *const archs[] = {"llama_b", "qwen3"};
    for (int ai = 0; ai < 2; ai++) {
        rl_hf_config_t cfg = s_cfg(archs[ai], ai);
        rl_model_t *m = s_model(&cfg, RL_TUNE_LORA, RL_LORA_ALL, 0, 0.0f, 0, 21);
        s_shake(m, 22);
        const int V = cfg.vocab_size, B = 3, T = 7;
        const int32_t tok[3 * 7] = {1, 2, 3, 4, 5, 6, 7, 10, 9, 8, 0, 0, 0, 0,
                                    3, 3, 5, 1, 2, 0, 0};
        const int len[3] = {7, 3, 5};
        const double temp = 0.8;
        float logp[3 * 7];
        CHECK_INT(rl_model_forward(m, tok, len, B, T, (float)temp, 0, logp, NULL), 0);

        // one slot at a time: prefill 2 tokens in one call (only the last row wanted), then decode
        rl_kvcache_t *c = rl_kvcache_new(m, 4, 8);
        float *lg = calloc((size_t)8 * V, sizeof *lg);
        double worst = 0.0;
        for (int b = 0; b < B; b++) {
            int32_t pre[2] = {tok[b * T], tok[b * T + 1]};
            int slots[2] = {b, b}, pos[2] = {0, 1};
            unsigned char want[2] = {0, 1};
            for (int i = 0; i < 2 * V; i++) {
                lg[i] = 12345.0f;
            }
            CHECK_INT(rl_model_step(m, c, pre, slots, pos, 2, want, lg), 0);
            CHECK(lg[0] == 12345.0f); // row 0 not wanted: untouched
            double e = fabs(s_logp_of(lg + V, V, tok[b * T + 2], temp) - logp[b * T + 2]);
            worst = e > worst ? e : worst;
            for (int t = 2; t + 1 < len[b]; t++) {
                int s = b, p = t;
                CHECK_INT(rl_model_step(m, c, &tok[b * T + t], &s, &p, 1, NULL, lg), 0);
                e = fabs(s_logp_of(lg, V, tok[b * T + t + 1], temp) - logp[b * T + t + 1]);
                worst = e > worst ? e : worst;
            }
        }
        fprintf(stderr, "kvcache %s: worst |logp(step) - logp(forward)| %.3g\n", archs[ai],
                worst);
        CHECK(worst < 1e-5);

        // batched decode of slots at different lengths == the same rows one at a time
        rl_kvcache_t *c2 = rl_kvcache_new(m, 4, 8);
        for (int b = 0; b < B; b++) { // prefill each slot to len[b] - 1 tokens
            int32_t pre[8];
            int slots[8], pos[8];
            for (int t = 0; t < len[b] - 1; t++) {
                pre[t] = tok[b * T + t];
                slots[t] = b;
                pos[t] = t;
            }
            CHECK_INT(rl_model_step(m, c2, pre, slots, pos, len[b] - 1, NULL, NULL), 0);
        }
        rl_kvcache_copy(c2, 3, 0, len[0] - 1); // a 4th slot sharing slot 0's prefix
        int32_t nt[4] = {tok[0 * T + len[0] - 1], tok[1 * T + len[1] - 1],
                         tok[2 * T + len[2] - 1], tok[0 * T + len[0] - 1]};
        int slots[4] = {0, 1, 2, 3}, pos[4] = {len[0] - 1, len[1] - 1, len[2] - 1, len[0] - 1};
        float *batched = calloc((size_t)4 * V, sizeof *batched);
        CHECK_INT(rl_model_step(m, c2, nt, slots, pos, 4, NULL, batched), 0);
        // the one-at-a-time reference: cache c holds every slot's prefix from the loop above
        double wb = 0.0;
        for (int i = 0; i < 3; i++) {
            CHECK_INT(rl_model_step(m, c, &nt[i], &slots[i], &pos[i], 1, NULL, lg), 0);
            double d = s_max_abs_diff(lg, batched + (size_t)i * V, (size_t)V);
            wb = d > wb ? d : wb;
        }
        double dcopy = s_max_abs_diff(batched, batched + (size_t)3 * V, (size_t)V);
        fprintf(stderr, "kvcache %s: batched vs single max |dlogit| %.3g, copied slot %.3g\n",
                archs[ai], wb, dcopy);
        CHECK(wb < 1e-5);
        CHECK(dcopy == 0.0); // same cache contents, same row math

        // bad positions / slots / tokens
        int bad_pos = 8, s0 = 0;
        int32_t t0 = 1, tbad = 11;
        CHECK_INT(rl_model_step(m, c, &t0, &s0, &bad_pos, 1, NULL, lg), RL_EINVAL);
        CHECK_CONTAINS(rl_model_errmsg(m), "position 8");
        int bad_slot = 4, p0 = 0;
        CHECK_INT(rl_model_step(m, c, &t0, &bad_slot, &p0, 1, NULL, lg), RL_EINVAL);
        CHECK_CONTAINS(rl_model_errmsg(m), "slot 4");
        CHECK_INT(rl_model_step(m, c, &tbad, &s0, &p0, 1, NULL, lg), RL_EINVAL);
        CHECK_CONTAINS(rl_model_errmsg(m), "token id 11");

        free(batched);
        free(lg);
        rl_kvcache_destroy(&c);
        rl_kvcache_destroy(&c2);
        CHECK(c == NULL);
        rl_model_destroy(&m);
    }
}

// Prefill runs (rows of one slot at consecutive positions in one call, the blocked-sgemm
// attention path) against token-by-token steps and the full forward: a run longer than one
// 64-row attention block, a run that continues after cached positions, and one call mixing
// runs with single tokens of other slots.
static void s_test_prefill(void) {
    static const char *const archs[] = {"llama_b", "qwen3"};
    for (int ai = 0; ai < 2; ai++) {
        rl_hf_config_t cfg = s_cfg(archs[ai], ai);
        rl_model_t *m = s_model(&cfg, RL_TUNE_LORA, RL_LORA_ALL, 0, 0.0f, 0, 31);
        s_shake(m, 32);
        enum { T = 150 };
        const int V = cfg.vocab_size;
        int32_t seq[T];
        int slot[T], pos[T];
        rl_rng_t rng;
        rl_rng_seed(&rng, 33);
        for (int t = 0; t < T; t++) {
            seq[t] = (int32_t)rl_rng_below(&rng, (uint64_t)V);
        }
        int len = T;
        float logp[T];
        CHECK_INT(rl_model_forward(m, seq, &len, 1, T, 1.0f, 0, logp, NULL), 0);
        float *fwd = rl_model_logits(m); // (T,V)
        CHECK(fwd != NULL);

        // reference: token by token (the decode path)
        rl_kvcache_t *c1 = rl_kvcache_new(m, 1, T);
        float *ref = calloc((size_t)T * V, sizeof *ref);
        for (int t = 0; t < T; t++) {
            int s0 = 0, p = t;
            CHECK_INT(rl_model_step(m, c1, &seq[t], &s0, &p, 1, NULL, ref + (size_t)t * V), 0);
        }
        // the whole prompt in one call (3 attention blocks)
        rl_kvcache_t *c2 = rl_kvcache_new(m, 5, T);
        float *lg = calloc((size_t)T * V, sizeof *lg);
        for (int t = 0; t < T; t++) {
            slot[t] = 2;
            pos[t] = t;
        }
        CHECK_INT(rl_model_step(m, c2, seq, slot, pos, T, NULL, lg), 0);
        double d_step = s_max_abs_diff(lg, ref, (size_t)T * V);
        double d_fwd = s_max_abs_diff(lg, fwd, (size_t)T * V);
        // continuing after cached positions: 0..36 in one call, 37..112 (crossing the second
        // block boundary of the run's own blocks), then 113..149; only the last row wanted
        for (int t = 0; t < T; t++) {
            slot[t] = 4;
        }
        const int cut[4] = {0, 37, 113, T};
        double d_cont = 0.0;
        for (int k = 0; k < 3; k++) {
            int n = cut[k + 1] - cut[k];
            unsigned char want[T];
            memset(want, 0, sizeof want);
            want[n - 1] = 1;
            CHECK_INT(rl_model_step(m, c2, seq + cut[k], slot, pos + cut[k], n, want, lg), 0);
            double d = s_max_abs_diff(lg + (size_t)(n - 1) * V,
                                      ref + (size_t)(cut[k + 1] - 1) * V, (size_t)V);
            d_cont = d > d_cont ? d : d_cont;
        }
        // the continued slot's cache equals the one-call prefill's: one more decode step agrees
        {
            int s4 = 4, s2 = 2, p = T - 1;
            float *a = calloc((size_t)V, sizeof *a), *b = calloc((size_t)V, sizeof *b);
            CHECK_INT(rl_model_step(m, c2, &seq[T - 1], &s4, &p, 1, NULL, a), 0);
            CHECK_INT(rl_model_step(m, c2, &seq[T - 1], &s2, &p, 1, NULL, b), 0);
            double d = s_max_abs_diff(a, ref + (size_t)(T - 1) * V, (size_t)V);
            d_cont = d > d_cont ? d : d_cont;
            d = s_max_abs_diff(b, ref + (size_t)(T - 1) * V, (size_t)V);
            d_cont = d > d_cont ? d : d_cont;
            free(a);
            free(b);
        }
        // one call mixing runs and single tokens: slot 1 one token at position 5 (after a
        // 5-token prefill), slot 0 a run 10..79 (after a 10-token prefill), slot 3 one token at
        // 0, slot 2 a fresh run 0..1 (adjacent rows of another slot must not join a run)
        rl_kvcache_t *c3 = rl_kvcache_new(m, 4, T);
        for (int t = 0; t < 5; t++) { // slot 1: 0..4 in one call
            slot[t] = 1;
            pos[t] = t;
        }
        CHECK_INT(rl_model_step(m, c3, seq, slot, pos, 5, NULL, NULL), 0);
        for (int t = 0; t < 10; t++) { // slot 0: 0..9 in one call
            slot[t] = 0;
            pos[t] = t;
        }
        CHECK_INT(rl_model_step(m, c3, seq, slot, pos, 10, NULL, NULL), 0);
        int n = 0;
        int32_t mt[T];
        slot[n] = 1, pos[n] = 5, n++;
        for (int t = 10; t < 80; t++) {
            slot[n] = 0, pos[n] = t, n++;
        }
        slot[n] = 3, pos[n] = 0, n++;
        slot[n] = 2, pos[n] = 0, n++;
        slot[n] = 2, pos[n] = 1, n++;
        for (int i = 0; i < n; i++) {
            mt[i] = seq[pos[i]];
        }
        CHECK_INT(rl_model_step(m, c3, mt, slot, pos, n, NULL, lg), 0);
        double d_mix = 0.0;
        for (int i = 0; i < n; i++) {
            double d = s_max_abs_diff(lg + (size_t)i * V, ref + (size_t)pos[i] * V, (size_t)V);
            d_mix = d > d_mix ? d : d_mix;
        }
        // slot 0 continues with a run 80..81 split by slot 1's next token (two single rows)
        slot[0] = 0, pos[0] = 80, slot[1] = 1, pos[1] = 6, slot[2] = 0, pos[2] = 81;
        for (int i = 0; i < 3; i++) {
            mt[i] = seq[pos[i]];
        }
        CHECK_INT(rl_model_step(m, c3, mt, slot, pos, 3, NULL, lg), 0);
        for (int i = 0; i < 3; i++) {
            double d = s_max_abs_diff(lg + (size_t)i * V, ref + (size_t)pos[i] * V, (size_t)V);
            d_mix = d > d_mix ? d : d_mix;
        }
        // sgemv (decode) and blocked sgemm (prefill) attention round differently: the bound is
        // 1e-5 relative to the largest logit (~5 here)
        double mx = 1.0;
        for (size_t i = 0; i < (size_t)T * V; i++) {
            mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
        }
        fprintf(stderr,
                "prefill %s: max |dlogit| one call vs steps %.3g, vs forward %.3g, continued %.3g, "
                "mixed %.3g (max |logit| %.3g)\n",
                archs[ai], d_step, d_fwd, d_cont, d_mix, mx);
        CHECK(d_step < 1e-5 * mx);
        CHECK(d_fwd < 1e-5 * mx);
        CHECK(d_cont < 1e-5 * mx);
        CHECK(d_mix < 1e-5 * mx);
        free(lg);
        free(ref);
        free(fwd);
        rl_kvcache_destroy(&c1);
        rl_kvcache_destroy(&c2);
        rl_kvcache_destroy(&c3);
        rl_model_destroy(&m);
    }
}

// ---------------------------------------------------------------------------------------------
// (5) argument errors

static void s_test_errors(void) {
    rl_hf_config_t cfg = s_cfg("llama", 0);
    rl_model_t *m = s_model(&cfg, RL_TUNE_FULL, 0, 0, 0.0f, 0, 1);
    float lp[S_B * S_T], dl[S_B * S_T] = {0};
    int32_t tok[S_B * S_T];
    memcpy(tok, s_tok, sizeof tok);
    CHECK_INT(rl_model_backward(m, dl), RL_EINVAL); // no forward yet
    CHECK_CONTAINS(rl_model_errmsg(m), "training forward");
    float *dh = calloc((size_t)S_B * S_T * cfg.hidden_size, sizeof *dh);
    CHECK_INT(rl_model_backward_hidden(m, dh), RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "training forward");
    CHECK(rl_model_hidden(m) == NULL);
    float ent[S_B * S_T];
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 1.0f, 1, NULL, ent), RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "entropy needs logp");
    tok[3] = 11;
    CHECK_INT(rl_model_forward(m, tok, s_len, S_B, S_T, 1.0f, 1, lp, NULL), RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "token id 11 at [0,3]");
    tok[3] = -1;
    CHECK_INT(rl_model_forward(m, tok, s_len, S_B, S_T, 1.0f, 1, lp, NULL), RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "token id -1");
    int len0[2] = {5, 0}, len6[2] = {6, 1};
    CHECK_INT(rl_model_forward(m, s_tok, len0, S_B, S_T, 1.0f, 1, lp, NULL), RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "lengths[1] = 0");
    CHECK_INT(rl_model_forward(m, s_tok, len6, S_B, S_T, 1.0f, 1, lp, NULL), RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "lengths[0] = 6");
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 0.0f, 1, lp, NULL), RL_EINVAL);
    CHECK_INT(rl_model_forward(m, s_tok, s_len, 0, S_T, 1.0f, 1, lp, NULL), RL_EINVAL);
    CHECK_INT(rl_model_backward(m, dl), RL_EINVAL); // failed forwards leave nothing to undo
    CHECK_INT(rl_model_backward_hidden(m, dh), RL_EINVAL);
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 1.0f, 1, NULL, NULL), 0);
    CHECK(rl_model_hidden(m) != NULL);
    CHECK_INT(rl_model_forward(m, s_tok, s_len, 0, S_T, 1.0f, 1, NULL, NULL), RL_EINVAL);
    CHECK(rl_model_hidden(m) == NULL); // a failed forward leaves no hidden states
    CHECK_INT(rl_model_backward_hidden(m, dh), RL_EINVAL);
    // an eval forward is not enough for backward
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 1.0f, 0, lp, NULL), 0);
    CHECK_INT(rl_model_backward(m, dl), RL_EINVAL);
    CHECK_INT(rl_model_backward_hidden(m, dh), RL_EINVAL);
    // logits of the last forward: (B,T,V), and log_softmax of row t-1 gives logp[t]
    float *lg = rl_model_logits(m);
    CHECK(lg != NULL);
    if (lg) {
        CHECK_CLOSE(s_logp_of(lg + (size_t)1 * cfg.vocab_size, cfg.vocab_size, s_tok[2], 1.0),
                    lp[2], 1e-5);
    }
    free(lg);
    // growth: a larger batch after a smaller one, then the small one again (buffers reused)
    int32_t big[4 * 9] = {0};
    int lens[4] = {9, 1, 4, 9};
    float lpb[4 * 9];
    CHECK_INT(rl_model_forward(m, big, lens, 4, 9, 1.0f, 1, lpb, NULL), 0);
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 1.0f, 1, lp, NULL), 0);
    CHECK_INT(rl_model_backward(m, dl), 0);
    rl_model_destroy(&m);
    CHECK(m == NULL);
    rl_model_destroy(&m); // no-op on NULL

    // tune NONE has nothing to train
    rl_model_t *n = s_model(&cfg, RL_TUNE_NONE, 0, 0, 0.0f, 0, 1);
    size_t cnt = 99;
    CHECK(rl_model_trainable(n, &cnt) == NULL && cnt == 0);
    CHECK(rl_model_grads(n) == NULL);
    CHECK_INT(rl_model_forward(n, s_tok, s_len, S_B, S_T, 1.0f, 1, lp, NULL), 0);
    CHECK_INT(rl_model_backward(n, dl), RL_EINVAL);
    CHECK_INT(rl_model_backward_hidden(n, dh), RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(n), "trainable");
    free(dh);
    CHECK_INT(rl_model_param_count(n), rl_hf_param_count(&cfg));
    rl_model_destroy(&n);

    // bad options
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.tune = RL_TUNE_LORA;
    o.lora_r = 0;
    char err[256] = "";
    CHECK(rl_model_new_random(&cfg, &o, 1, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "r 0");
}

// ---------------------------------------------------------------------------------------------
// (3) PEFT folders, (6) zero copy, rlctl export

static char s_tmp[256];

static void s_path(char *buf, size_t cap, const char *rel) {
    snprintf(buf, cap, "%s/%s", s_tmp, rel);
}

// Replaces the first `from` in file path by `to` (a hand edit of a config).
static void s_replace(const char *path, const char *from, const char *to) {
    char *txt = rl_test_read_file(path, NULL), *at = txt ? strstr(txt, from) : NULL;
    FILE *f = at ? fopen(path, "wb") : NULL;
    CHECK_MSG(f != NULL, "%s: no '%s' to replace", path, from);
    if (f) {
        fwrite(txt, 1, (size_t)(at - txt), f);
        fputs(to, f);
        fputs(at + strlen(from), f);
        fclose(f);
    }
    free(txt);
}

// Overwrites the last 4 bytes of a safetensors file (its last F32 weight) with the bits `u`.
static void s_poke_last(const char *path, uint32_t u) {
    FILE *f = fopen(path, "r+b");
    unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                          (unsigned char)(u >> 24)};
    CHECK(f && fseek(f, -4, SEEK_END) == 0 && fwrite(b, 1, 4, f) == 4);
    if (f) {
        fclose(f);
    }
}

static void s_forward(rl_model_t *m, float *lp) {
    CHECK_INT(rl_model_forward(m, s_tok, s_len, S_B, S_T, 1.0f, 0, lp, NULL), 0);
}

// 1 when ptr lies in a mapping of a file whose path ends in `suffix` (/proc/self/maps).
static int s_in_file_mapping(const void *ptr, const char *suffix) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) {
        return -1;
    }
    char line[1024];
    int found = 0;
    uintptr_t p = (uintptr_t)ptr;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || p < lo || p >= hi) {
            continue;
        }
        char *nl = strchr(line, '\n');
        if (nl) {
            *nl = '\0';
        }
        size_t n = strlen(line), m = strlen(suffix);
        found = n >= m && strcmp(line + n - m, suffix) == 0;
    }
    fclose(f);
    return found;
}

// Writes a PEFT folder by hand, with one tensor's shape or the target list altered.
static void s_write_adapter(const char *dir, const rl_hf_config_t *cfg, const char *targets_json,
                            int targets, int bad_shape) {
    mkdir(dir, 0755);
    char path[512];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"peft_type\":\"LORA\",\"task_type\":\"CAUSAL_LM\",\"r\":2,\"lora_alpha\":4,"
               "\"lora_dropout\":0.0,\"bias\":\"none\",\"target_modules\":%s}\n",
            targets_json);
    fclose(f);
    rl_st_writer_t *w = rl_st_writer_new();
    float *zeros = calloc(4096, sizeof *zeros);
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            if (!(targets & (1 << m))) {
                continue;
            }
            int in, out;
            rl_lora_module_dims(cfg, m, &in, &out);
            char key[160];
            int64_t sa[2] = {2, in + (bad_shape && l == 1 && m == 2)}, sb[2] = {out, 2};
            snprintf(key, sizeof key, "base_model.model.model.layers.%d.%s.lora_A.weight", l,
                     rl_lora_module_path(m));
            rl_st_writer_add(w, key, RL_DTYPE_F32, 2, sa, zeros);
            snprintf(key, sizeof key, "base_model.model.model.layers.%d.%s.lora_B.weight", l,
                     rl_lora_module_path(m));
            rl_st_writer_add(w, key, RL_DTYPE_F32, 2, sb, zeros);
        }
    }
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    char err[256];
    CHECK_INT(rl_st_writer_write(w, path, err, sizeof err), 0);
    rl_st_writer_destroy(&w);
    free(zeros);
}

static void s_test_peft(void) {
    rl_hf_config_t cfg = s_cfg("qwen3", 0);
    const int targets = RL_LORA_Q | RL_LORA_V | RL_LORA_DOWN;
    rl_model_t *m = s_model(&cfg, RL_TUNE_LORA, targets, 0, 0.1f, 0, 31);
    s_shake(m, 32);
    float lp_m[S_B * S_T], lp[S_B * S_T];
    s_forward(m, lp_m);
    char base[512], ad[512], err[512] = "";

    // the base model as an HF folder (fp32): LoRA disabled means no merge
    s_path(base, sizeof base, "base");
    rl_model_set_adapter_disabled(m, 1);
    float lp_base[S_B * S_T];
    s_forward(m, lp_base);
    CHECK(s_max_abs_diff(lp_base, lp_m, S_B * S_T) > 1e-3); // the adapter does something
    CHECK_INT(rl_model_save_hf(m, base, 0, err, sizeof err), 0);
    // a base folder with a NaN or inf weight is refused at load, naming the tensor (every
    // logprob would be NaN)
    char nanbase[512], stp[700];
    s_path(nanbase, sizeof nanbase, "nanbase");
    CHECK_INT(rl_model_save_hf(m, nanbase, 0, err, sizeof err), 0);
    snprintf(stp, sizeof stp, "%s/model.safetensors", nanbase);
    rl_model_opts_t no;
    rl_model_opts_default(&no);
    for (int k = 0; k < 2; k++) {
        s_poke_last(stp, k ? 0x7f800000u : 0x7fc00000u);
        err[0] = '\0';
        rl_model_t *bad = rl_model_load(nanbase, &no, err, sizeof err);
        CHECK(bad == NULL);
        rl_model_destroy(&bad);
        CHECK_CONTAINS(err, "nanbase: tensor '");
        CHECK_CONTAINS(err, k ? "' holds a non-finite value (inf at element "
                              : "' holds a non-finite value (nan at element ");
    }
    rl_model_set_adapter_disabled(m, 0);

    // save -> load into a NONE model over the saved base: the same forward
    s_path(ad, sizeof ad, "adapter");
    CHECK_INT(rl_model_save_adapter(m, ad, "org/tiny-qwen3", err, sizeof err), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/adapter_config.json", ad);
    char *txt = rl_test_read_file(path, NULL);
    CHECK(txt != NULL);
    if (txt) {
        CHECK_CONTAINS(txt, "\"peft_type\": \"LORA\"");
        CHECK_CONTAINS(txt, "\"task_type\": \"CAUSAL_LM\"");
        CHECK_CONTAINS(txt, "\"r\": 3");
        CHECK_CONTAINS(txt, "\"bias\": \"none\"");
        CHECK_CONTAINS(txt, "\"base_model_name_or_path\": \"org/tiny-qwen3\"");
        CHECK_CONTAINS(txt, "\"use_rslora\": false");
        CHECK_CONTAINS(txt, "\"q_proj\"");
        CHECK_CONTAINS(txt, "\"down_proj\"");
        CHECK(strstr(txt, "k_proj") == NULL);
    }
    free(txt);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", ad);
    rl_st_file_t *sf = rl_st_file_open(path, err, sizeof err);
    CHECK(sf != NULL);
    if (sf) {
        const rl_st_tensor_t *t =
            rl_st_file_find(sf, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
        CHECK(t && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 8);
        t = rl_st_file_find(sf, "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
        CHECK(t && t->ndim == 2 && t->shape[0] == 8 && t->shape[1] == 3);
        CHECK_INT(rl_st_file_count(sf), 2 * 2 * 3);
        rl_st_file_destroy(&sf);
    }
    // one thread as s_model's models have: the thread count sets the lanes, and so how a
    // forward's rows are split into sgemm calls, which changes the last bits with some
    // OpenBLAS kernels (numerics.md, "Reproducibility")
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.threads = 1;
    rl_model_t *n = rl_model_load(base, &o, err, sizeof err);
    CHECK_MSG(n != NULL, "%s", err);
    if (n) {
        s_forward(n, lp);
        CHECK(s_max_abs_diff(lp, lp_base, S_B * S_T) == 0.0);
        CHECK_INT(rl_model_load_adapter(n, ad, err, sizeof err), 0);
        s_forward(n, lp);
        double d = s_max_abs_diff(lp, lp_m, S_B * S_T);
        fprintf(stderr, "peft: reloaded adapter max |dlogp| %.3g\n", d);
        CHECK(d == 0.0);
        rl_model_set_adapter_disabled(n, 1);
        s_forward(n, lp);
        CHECK(s_max_abs_diff(lp, lp_base, S_B * S_T) == 0.0);
        rl_model_set_adapter_disabled(n, 0);

        // merged export == unmerged forward (fp32 within 1e-5; bf16 roughly)
        char merged[512];
        s_path(merged, sizeof merged, "merged");
        CHECK_INT(rl_model_save_hf(n, merged, 0, err, sizeof err), 0);
        rl_model_t *g = rl_model_load(merged, &o, err, sizeof err);
        CHECK_MSG(g != NULL, "%s", err);
        if (g) {
            s_forward(g, lp);
            double dm = s_max_abs_diff(lp, lp_m, S_B * S_T);
            fprintf(stderr, "peft: merged export vs unmerged max |dlogp| %.3g\n", dm);
            CHECK(dm < 1e-5);
            rl_model_destroy(&g);
        }
        s_path(merged, sizeof merged, "merged_bf16");
        CHECK_INT(rl_model_save_hf(n, merged, 1, err, sizeof err), 0);
        g = rl_model_load(merged, &o, err, sizeof err);
        CHECK_MSG(g != NULL, "%s", err);
        if (g) {
            CHECK_STR(rl_model_config(g)->torch_dtype, "bfloat16");
            s_forward(g, lp);
            double dm = s_max_abs_diff(lp, lp_m, S_B * S_T);
            fprintf(stderr, "peft: bf16 merged export vs unmerged max |dlogp| %.3g\n", dm);
            CHECK(dm < 0.1); // bf16 keeps 8 bits of mantissa; O(1) weights, 2 layers
            // (6) converted weights are owned memory, not the mapping
            CHECK_INT(s_in_file_mapping(rl_model_params(g)->embed_tokens, "model.safetensors"),
                      0);
            rl_model_destroy(&g);
        }
        rl_model_destroy(&n);
    }

    // a LoRA model loads an adapter of its own shape (resume), and refuses another rank/targets
    rl_model_t *same = s_model(&cfg, RL_TUNE_LORA, targets, 0, 0.0f, 0, 99);
    CHECK_INT(rl_model_load_adapter(same, ad, err, sizeof err), 0);
    size_t na, nb;
    float *ta = rl_model_trainable(m, &na), *tb = rl_model_trainable(same, &nb);
    CHECK(na == nb && memcmp(ta, tb, na * sizeof *ta) == 0);
    rl_model_destroy(&same);
    rl_model_t *other = s_model(&cfg, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_K | RL_LORA_V, 0, 0.0f,
                                0, 5);
    err[0] = '\0';
    CHECK_INT(rl_model_load_adapter(other, ad, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "k_proj");
    rl_model_destroy(&other);

    // hand-written adapters: a misshapen tensor, a module that is not a Linear, a wrong-size
    // model, a missing file
    rl_model_t *none = rl_model_load(base, &o, err, sizeof err);
    CHECK(none != NULL);
    if (none) {
        char bad[512];
        s_path(bad, sizeof bad, "bad_shape");
        s_write_adapter(bad, &cfg, "[\"q_proj\",\"v_proj\"]", RL_LORA_Q | RL_LORA_V, 1);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight");
        CHECK_CONTAINS(err, "expected [2,8]");
        s_path(bad, sizeof bad, "bad_target");
        s_write_adapter(bad, &cfg, "[\"q_proj\",\"embed_tokens\"]", RL_LORA_Q, 0);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "embed_tokens");
        s_path(bad, sizeof bad, "extra_tensor"); // v_proj tensors, but only q_proj targeted
        s_write_adapter(bad, &cfg, "[\"q_proj\"]", RL_LORA_Q | RL_LORA_V, 0);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "v_proj");
        s_path(bad, sizeof bad, "missing_tensor"); // k_proj listed, no tensors for it
        s_write_adapter(bad, &cfg, "[\"q_proj\",\"k_proj\"]", RL_LORA_Q, 0);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "missing tensor 'base_model.model.model.layers.0.self_attn.k_proj");
        s_path(bad, sizeof bad, "dora"); // a PEFT feature rlctl does not run: named
        s_write_adapter(bad, &cfg, "[\"q_proj\"],\"use_dora\":true", RL_LORA_Q, 0);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EUNSUPPORTED);
        CHECK_CONTAINS(err, "use_dora");
        s_path(bad, sizeof bad, "absent");
        CHECK(rl_model_load_adapter(none, bad, err, sizeof err) == RL_ENOTFOUND);
        // a qwen3 adapter on a llama-shaped model of another width: refused by shape
        rl_hf_config_t wide = cfg;
        wide.hidden_size = 16;
        s_path(bad, sizeof bad, "wide");
        s_write_adapter(bad, &wide, "[\"q_proj\"]", RL_LORA_Q, 0);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "self_attn.q_proj.lora_A.weight' has shape [2,16]");
        // what `rlctl inspect` says of an adapter folder without its base (rl_lora_describe):
        // the saved adapter's settings; tensors of a module the config does not target, and a
        // config whose r is not the tensors' rank, refused naming the tensor
        rl_lora_info_t info;
        CHECK_INT(rl_lora_describe(ad, &info, err, sizeof err), 0);
        CHECK_INT(info.r, 3);
        CHECK_INT(info.layers, 2);
        CHECK_INT(info.pairs, 6);
        CHECK_INT(info.use_rslora, 0);
        CHECK_STR(info.base_model, "org/tiny-qwen3");
        CHECK_INT(info.targets & RL_LORA_Q, RL_LORA_Q);
        s_path(bad, sizeof bad, "ins_extra");
        s_write_adapter(bad, &cfg, "[\"q_proj\"]", RL_LORA_Q | RL_LORA_V, 0);
        CHECK_INT(rl_lora_describe(bad, &info, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "self_attn.v_proj.lora_A.weight' is of v_proj, which target_modules "
                            "does not name");
        s_path(bad, sizeof bad, "ins_rank");
        s_write_adapter(bad, &cfg, "[\"q_proj\"]", RL_LORA_Q, 0);
        char rcfg[600];
        snprintf(rcfg, sizeof rcfg, "%s/adapter_config.json", bad);
        s_replace(rcfg, "\"r\":2", "\"r\":5");
        CHECK_INT(rl_lora_describe(bad, &info, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "is not of rank r = 5");
        if (access(RL_BINARY_DIR "/rlctl", X_OK) == 0) {
            char cmd[1400], out[8192];
            snprintf(cmd, sizeof cmd, "%s/rlctl inspect %s 2>&1", RL_BINARY_DIR, ad);
            CHECK_INT(rl_test_shell(cmd, out, sizeof out), 0);
            CHECK_CONTAINS(out, "adapter: LoRA r 3, lora_alpha ");
            CHECK_CONTAINS(out, "; 2 layers, 6 modules\nbase model: org/tiny-qwen3\n");
            CHECK_CONTAINS(out, "total: 12 tensors, ");
            snprintf(cmd, sizeof cmd, "%s/rlctl inspect %s --json 2>&1", RL_BINARY_DIR, ad);
            CHECK_INT(rl_test_shell(cmd, out, sizeof out), 0);
            CHECK_CONTAINS(out, "\"base_model_name_or_path\": \"org/tiny-qwen3\"");
            snprintf(cmd, sizeof cmd, "%s/rlctl inspect %s 2>&1", RL_BINARY_DIR, bad);
            CHECK_INT(rl_test_shell(cmd, out, sizeof out), 1);
            CHECK_CONTAINS(out, "rlctl inspect: ");
            CHECK_CONTAINS(out, "is not of rank r = 5");
        }
        // a good hand-written adapter (all-zero B) leaves the base forward unchanged
        s_path(bad, sizeof bad, "zero");
        s_write_adapter(bad, &cfg, "\"all-linear\"", RL_LORA_ALL, 0);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), 0);
        s_forward(none, lp);
        CHECK(s_max_abs_diff(lp, lp_base, S_B * S_T) == 0.0);
        // non-finite adapters (they gave logprob -nan): a lora_alpha no float holds, a NaN or
        // -inf weight; refused naming the field or the tensor
        char acfg[600], ast[600];
        s_path(bad, sizeof bad, "nonfinite");
        s_write_adapter(bad, &cfg, "\"all-linear\"", RL_LORA_ALL, 0);
        snprintf(acfg, sizeof acfg, "%s/adapter_config.json", bad);
        snprintf(ast, sizeof ast, "%s/adapter_model.safetensors", bad);
        s_replace(acfg, "\"lora_alpha\":4", "\"lora_alpha\":1e39");
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "adapter_config.json: 'lora_alpha' is 1e+39, not a finite float");
        s_replace(acfg, "\"lora_alpha\":1e39", "\"lora_alpha\":4");
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), 0);
        s_poke_last(ast, 0x7fc00000u);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "adapter_model.safetensors: tensor 'base_model.model.model.layers.");
        CHECK_CONTAINS(err, "' holds a non-finite value (nan at element ");
        s_poke_last(ast, 0xff800000u);
        CHECK_INT(rl_model_load_adapter(none, bad, err, sizeof err), RL_EINVAL);
        CHECK_CONTAINS(err, "(-inf at element ");
        // the adapter that loaded last is still the one in use
        s_forward(none, lp);
        CHECK(s_max_abs_diff(lp, lp_base, S_B * S_T) == 0.0);
        // (6) F32 frozen weights are used in place from the read-only mapping
        CHECK_INT(s_in_file_mapping(rl_model_params(none)->embed_tokens, "model.safetensors"), 1);
        CHECK_INT(s_in_file_mapping(rl_model_params(none)->layers[1].down_proj,
                                    "model.safetensors"), 1);
        rl_model_destroy(&none);
    }
    // (6) F32 data left unaligned by a foreign writer (header length not a multiple of 4) is
    // converted instead of read in place
    char un[512];
    s_path(un, sizeof un, "unaligned");
    mkdir(un, 0755);
    size_t flen = 0;
    snprintf(path, sizeof path, "%s/model.safetensors", base);
    unsigned char *raw = (unsigned char *)rl_test_read_file(path, &flen);
    CHECK(raw != NULL && flen > 8);
    if (raw) {
        uint64_t hn = 0;
        for (int i = 0; i < 8; i++) {
            hn |= (uint64_t)raw[i] << (8 * i);
        }
        uint64_t hn1 = hn + 1; // one more space after the JSON shifts every tensor by a byte
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) {
            len8[i] = (unsigned char)(hn1 >> (8 * i));
        }
        snprintf(path, sizeof path, "%s/model.safetensors", un);
        FILE *uf = fopen(path, "wb");
        fwrite(len8, 1, 8, uf);
        fwrite(raw + 8, 1, (size_t)hn, uf);
        fputc(' ', uf);
        fwrite(raw + 8 + hn, 1, flen - 8 - (size_t)hn, uf);
        fclose(uf);
        char src[600], dst[600];
        snprintf(src, sizeof src, "%s/config.json", base);
        snprintf(dst, sizeof dst, "%s/config.json", un);
        char *cj = rl_test_read_file(src, NULL);
        uf = fopen(dst, "wb");
        fputs(cj ? cj : "", uf);
        fclose(uf);
        free(cj);
        free(raw);
        rl_model_t *u = rl_model_load(un, &o, err, sizeof err);
        CHECK_MSG(u != NULL, "%s", err);
        if (u) {
            CHECK_INT(s_in_file_mapping(rl_model_params(u)->embed_tokens, "model.safetensors"), 0);
            s_forward(u, lp);
            CHECK(s_max_abs_diff(lp, lp_base, S_B * S_T) == 0.0);
            rl_model_destroy(&u);
        }
    }
    o.tune = RL_TUNE_FULL;
    rl_model_t *full = rl_model_load(base, &o, err, sizeof err);
    CHECK(full != NULL);
    if (full) { // full tuning copies into writable memory
        CHECK_INT(s_in_file_mapping(rl_model_params(full)->embed_tokens, "model.safetensors"), 0);
        CHECK(rl_model_grads(full) != NULL);
        CHECK_INT(rl_model_load_adapter(full, ad, err, sizeof err), RL_EINVAL);
        rl_model_destroy(&full);
    }
    // a model folder that does not match: error from the loader
    CHECK(rl_model_load(ad, &o, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');

    // a tied model with every bias (llama attention_bias + mlp_bias, llama3 RoPE) round-trips
    // through save_hf: no lm_head tensor, the same forward
    {
        rl_hf_config_t tc = s_cfg("llama_b", 1);
        rl_model_t *t = s_model(&tc, RL_TUNE_FULL, 0, 0, 0.0f, 0, 41);
        s_shake(t, 42);
        float lt[S_B * S_T];
        s_forward(t, lt);
        char tdir[512];
        s_path(tdir, sizeof tdir, "tied");
        CHECK_INT(rl_model_save_hf(t, tdir, 0, err, sizeof err), 0);
        o.tune = RL_TUNE_NONE;
        rl_model_t *t2 = rl_model_load(tdir, &o, err, sizeof err);
        CHECK_MSG(t2 != NULL, "%s", err);
        if (t2) {
            CHECK(rl_model_params(t2)->lm_head == rl_model_params(t2)->embed_tokens);
            CHECK(rl_model_params(t2)->layers[0].o_bias != NULL);
            CHECK(rl_model_params(t2)->layers[1].down_bias != NULL);
            CHECK_INT(rl_model_config(t2)->rope_type, RL_ROPE_LLAMA3);
            s_forward(t2, lp);
            CHECK(s_max_abs_diff(lp, lt, S_B * S_T) == 0.0);
            rl_model_destroy(&t2);
        }
        rl_model_destroy(&t);
    }

    // rlctl export: merged folder with the tokenizer files copied
    char cmd[2048], out[4096], exp_dir[512];
    s_path(path, sizeof path, "base/tokenizer.json");
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"version\":\"1.0\"}\n", f);
        fclose(f);
    }
    s_path(exp_dir, sizeof exp_dir, "exported");
    snprintf(cmd, sizeof cmd, "%s/rlctl export --model %s --adapter %s --out %s 2>&1",
             RL_BINARY_DIR, base, ad, exp_dir);
    if (access(RL_BINARY_DIR "/rlctl", X_OK) == 0) {
        int st = rl_test_shell(cmd, out, sizeof out);
        CHECK_MSG(st == 0, "%s -> %d: %s", cmd, st, out);
        snprintf(path, sizeof path, "%s/tokenizer.json", exp_dir);
        CHECK(access(path, R_OK) == 0);
        o.tune = RL_TUNE_NONE;
        rl_model_t *e = rl_model_load(exp_dir, &o, err, sizeof err);
        CHECK_MSG(e != NULL, "%s", err);
        if (e) {
            s_forward(e, lp);
            CHECK(s_max_abs_diff(lp, lp_m, S_B * S_T) < 1e-5);
            rl_model_destroy(&e);
        }
        // bf16, sharded under a tiny --max-shard-size=BYTES, every tokenizer/template file
        // copied; exporting that folder again with the default dtype keeps bf16 (the base's)
        char bf[512], again[512];
        s_path(bf, sizeof bf, "exported_bf16");
        s_path(again, sizeof again, "exported_again");
        s_path(path, sizeof path, "base/chat_template.jinja");
        if ((f = fopen(path, "w")) != NULL) {
            fputs("{{ messages }}", f);
            fclose(f);
        }
        static char cmd2[8192];
        snprintf(cmd2, sizeof cmd2,
                 "%s/rlctl export --model %s --adapter %s --out %s --dtype bf16 "
                 "--max-shard-size=100 2>&1 && %s/rlctl export --model %s --out %s 2>&1",
                 RL_BINARY_DIR, base, ad, bf, RL_BINARY_DIR, bf, again);
        st = rl_test_shell(cmd2, out, sizeof out);
        CHECK_MSG(st == 0, "%s -> %d: %s", cmd2, st, out);
        CHECK_CONTAINS(out, ", bf16, 2 tokenizer/template/generation files copied"); // 2nd: auto
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", bf);
        char *idx = rl_test_read_file(path, NULL);
        CHECK_MSG(idx && strstr(idx, "-of-000") && strstr(idx, "\"weight_map\""),
                  "no sharded index: %s", idx ? idx : "(none)");
        free(idx);
        snprintf(path, sizeof path, "%s/chat_template.jinja", again);
        CHECK(access(path, R_OK) == 0);
        snprintf(path, sizeof path, "%s/config.json", again);
        char *cj = rl_test_read_file(path, NULL);
        CHECK_MSG(cj && strstr(cj, "\"torch_dtype\": \"bfloat16\""), "auto lost bf16: %s",
                  cj ? cj : "");
        free(cj);
        rl_model_t *eb = rl_model_load(again, &o, err, sizeof err);
        CHECK_MSG(eb != NULL, "%s", err);
        if (eb) {
            s_forward(eb, lp);
            CHECK(s_max_abs_diff(lp, lp_m, S_B * S_T) < 5e-2); // bf16 rounding
            rl_model_destroy(&eb);
        }
        snprintf(cmd, sizeof cmd, "%s/rlctl export --model %s --adapter %s/bad_shape --out %s "
                 "2>&1", RL_BINARY_DIR, base, s_tmp, exp_dir);
        st = rl_test_shell(cmd, out, sizeof out);
        CHECK_INT(st, 2);
        CHECK_CONTAINS(out, "v_proj.lora_A.weight");
    } else {
        fprintf(stderr, "rlctl not built: export command not checked\n");
    }
    rl_model_destroy(&m);
}

int main(int argc, char **argv) {
    const char *group = argc > 1 ? argv[1] : "all";
    int all = strcmp(group, "all") == 0;
    if (all || strcmp(group, "numeric") == 0) {
        RL_TEST_RUN(s_test_grads);
        RL_TEST_RUN(s_test_head);
        RL_TEST_RUN(s_test_recompute);
        RL_TEST_RUN(s_test_lanes);
        RL_TEST_RUN(s_test_step_lanes);
        RL_TEST_RUN(s_test_kvcache);
        RL_TEST_RUN(s_test_prefill);
    }
    if (all || strcmp(group, "unit") == 0) {
        RL_TEST_RUN(s_test_errors);
        rl_test_tmpdir(s_tmp, sizeof s_tmp, "model");
        RL_TEST_RUN(s_test_peft);
        rl_test_tmpdir_done(s_tmp);
    }
    RL_TEST_DONE();
}

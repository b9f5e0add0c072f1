// rl_kv — the sampler's path through the model (see rl_model.h): the KV cache of independent
// sequences (slots) and the cached step, which appends tokens to slots and gives their logits,
// over the same projections as the training forward (rl_model.c), split over the model's pool of
// workers by rows (rl_model_set_step_lanes).
#include "rl_model.h"
#include "rl_model_priv.h"

#include "rl_err.h"
#include "rl_layers.h"
#include "rl_lora.h"
#include "rl_pool.h"

#include <cblas.h>
#undef I // OpenBLAS's cblas.h pulls in <complex.h>; I is the MLP width here

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// KV cache and the cached step

rl_kvcache_t *rl_kvcache_new(const rl_model_t *model, int n_slots, int max_len) {
    if (!model || n_slots < 1 || max_len < 1) {
        return NULL;
    }
    rl_kvcache_t *self = calloc(1, sizeof *self);
    if (!self) {
        return NULL;
    }
    self->model = model;
    self->n_slots = n_slots;
    self->max_len = max_len;
    if (model->cuda) { // on the model's GPU: nothing on the host
        if (rl_model_cuda_cache_new(model->cuda, n_slots, max_len, &self->dev) != 0) {
            free(self);
            return NULL;
        }
        return self;
    }
    self->ldk = rl_attention_ldk(max_len);
    size_t n = (size_t)model->L * (size_t)n_slots * (size_t)model->KVD;
    self->k = calloc(n * self->ldk, sizeof *self->k);
    self->v = calloc(n * (size_t)max_len, sizeof *self->v);
    self->rope_cs = malloc((size_t)max_len * (size_t)model->D * sizeof *self->rope_cs);
    if (!self->k || !self->v || !self->rope_cs) {
        rl_kvcache_destroy(&self);
        return NULL;
    }
    rl_rope_table(self->rope_cs, model->inv_freq, max_len, model->D);
    return self;
}

void rl_kvcache_destroy(rl_kvcache_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_kvcache_t *self = *self_p;
    if (self->dev) {
        rl_model_cuda_cache_free(self->model->cuda, &self->dev);
    }
    free(self->k);
    free(self->v);
    free(self->rope_cs);
    free(self->work);
    free(self);
    *self_p = NULL;
}

// K^T of layer l, slot s: (KVD, ldk).
static float *s_kt(const rl_kvcache_t *c, int l, int s) {
    return c->k + ((size_t)l * (size_t)c->n_slots + (size_t)s) * (size_t)c->model->KVD * c->ldk;
}

// V of layer l, slot s: (max_len, KVD).
static float *s_v(const rl_kvcache_t *c, int l, int s) {
    return c->v + ((size_t)l * (size_t)c->n_slots + (size_t)s) * (size_t)c->max_len *
                      (size_t)c->model->KVD;
}

void rl_kvcache_copy(rl_kvcache_t *self, int dst, int src, int len) {
    if (dst == src) {
        return;
    }
    rl_kvcache_copy_from(self, dst, self, src, len);
}

void rl_kvcache_copy_from(rl_kvcache_t *self, int dst, const rl_kvcache_t *from, int src, int len) {
    RL_ASSERT(from->model == self->model);
    RL_ASSERT(dst >= 0 && dst < self->n_slots && src >= 0 && src < from->n_slots);
    RL_ASSERT(len >= 0 && len <= self->max_len && len <= from->max_len);
    if (len == 0) {
        return;
    }
    if (self->dev) { // a failure shows at the next step, as a kernel's does (the stream's error)
        (void)rl_model_cuda_cache_copy(self->model->cuda, self->dev, dst, from->dev, src, len);
        return;
    }
    const int KVD = self->model->KVD;
    for (int l = 0; l < self->model->L; l++) {
        float *kd = s_kt(self, l, dst);
        const float *ks = s_kt(from, l, src);
        for (int e = 0; e < KVD; e++) {
            memcpy(kd + (size_t)e * self->ldk, ks + (size_t)e * from->ldk,
                   (size_t)len * sizeof(float));
        }
        memcpy(s_v(self, l, dst), s_v(from, l, src), (size_t)len * (size_t)KVD * sizeof(float));
    }
}

static int s_step_ensure(rl_model_t *model, rl_kvcache_t *c, int n, int P) {
    const int r = model->lora ? rl_lora_rank(model->lora) : 0;
    if (c->work && n <= c->n_cap && r <= c->r_cap && P <= c->p_cap) {
        return 0;
    }
    const size_t N = (size_t)n, C = (size_t)model->C, I = (size_t)model->I;
    const size_t QD = (size_t)model->QD, KVD = (size_t)model->KVD, R = (size_t)r;
    const size_t HC = (size_t)rl_mdl_head_chunk(model->V);
    size_t sizes[9 + 2 * RL_MDL_LANES_MAX] = {N * C,  N * C, N * QD, N * KVD, N * KVD,
                                              N * QD, N * C, N * I,  N * I};
    float **ptrs[9 + 2 * RL_MDL_LANES_MAX] = {&c->x,   &c->ln, &c->q,    &c->kk, &c->vv,
                                              &c->att, &c->o,  &c->gate, &c->up};
    int cnt = 9;
    sizes[cnt] = HC * C, ptrs[cnt++] = &c->hs;
    sizes[cnt] = HC * (size_t)model->V, ptrs[cnt++] = &c->lg;
    for (int k = 0; k < P; k++) {
        sizes[cnt] = N * R, ptrs[cnt++] = &c->xa[k];
        sizes[cnt] = rl_attention_prefill_scratch_floats(n, c->max_len);
        ptrs[cnt++] = &c->att_scratch[k];
    }
    size_t total = 0;
    for (int i = 0; i < cnt; i++) {
        total += (sizes[i] + 15) & ~(size_t)15;
    }
    free(c->work);
    c->n_cap = 0;
    if (!(c->work = malloc(total * sizeof(float)))) {
        return rl_mdl_err(model, RL_ENOMEM, "out of memory for a step of %d tokens", n);
    }
    size_t off = 0;
    for (int i = 0; i < cnt; i++) {
        *ptrs[i] = c->work + off;
        off += (sizes[i] + 15) & ~(size_t)15;
    }
    c->n_cap = n;
    c->r_cap = r;
    c->p_cap = P;
    return 0;
}

// ---- the workers of a step (rl_model_set_step_lanes)
// A step's P workers split every matmul by output columns (each packs only its share of the
// weights, as multi-threaded BLAS does) and the row-wise work (norms, RoPE, attention) by rows,
// meeting at a barrier between the two kinds.

typedef struct {
    rl_model_t *m;
    rl_kvcache_t *c;
    const int32_t *tokens;
    const int *slots, *pos;
    int n;
    const unsigned char *want;
    float *logits;
    int distinct;     // every row in a slot of its own: a row's attention reads only its own K/V
    int P;            // workers that run
    rl_barrier_t bar; // for the P workers
} s_step_t;

// Worker k's share [*a, *b) of n items: rows (align 1), or columns aligned to 16 floats.
static void s_share(int n, int k, int P, int align, int *a, int *b) {
    int64_t u = ((int64_t)n + align - 1) / align; // units
    *a = (int)(u * k / P) * align;
    *b = (int)(u * (k + 1) / P) * align;
    *a = *a < n ? *a : n;
    *b = *b < n ? *b : n;
}

// Final norm and lm_head: logits (n,V) of every row, or of the rows where want[i] != 0.
static void s_step_logits(s_step_t *s, int k, const float *h) {
    rl_model_t *self = s->m;
    rl_kvcache_t *c = s->c;
    const int C = self->C, V = self->V, n = s->n, P = s->P;
    const float eps = self->cfg.rms_norm_eps, *W = self->params.lm_head;
    int r0, r1, v0, v1;
    s_share(n, k, P, 1, &r0, &r1);
    s_share(V, k, P, 16, &v0, &v1);
    if (!s->want) {
        rl_rmsnorm_forward(c->ln + (size_t)r0 * C, NULL, h + (size_t)r0 * C, self->params.norm, eps,
                           r1 - r0, C);
        rl_barrier_wait(&s->bar);
        rl_mdl_proj_cols(self, 0, -1, s->logits, V, NULL, c->ln, c->ln, W, NULL, n, C, v0, v1);
        return;
    }
    // the wanted rows in chunks: one sgemv for a single row, sgemm for several
    const int chunk = rl_mdl_head_chunk(V);
    int rows[RL_MDL_HEAD_CHUNK_MAX];
    for (int i = 0; i < n;) {
        int cnt = 0;
        for (; i < n && cnt < chunk; i++) {
            if (s->want[i]) {
                rows[cnt++] = i;
            }
        }
        if (cnt == 0) {
            break;
        }
        int j0, j1;
        s_share(cnt, k, P, 1, &j0, &j1);
        for (int j = j0; j < j1; j++) {
            rl_rmsnorm_forward(c->hs + (size_t)j * C, NULL, h + (size_t)rows[j] * C,
                               self->params.norm, eps, 1, C);
        }
        rl_barrier_wait(&s->bar);
        if (cnt == 1) {
            rl_mdl_proj_cols(self, 0, -1, s->logits + (size_t)rows[0] * V, V, NULL, c->hs, c->hs, W,
                             NULL, 1, C, v0, v1);
        } else {
            rl_mdl_proj_cols(self, 0, -1, c->lg, V, NULL, c->hs, c->hs, W, NULL, cnt, C, v0, v1);
            rl_barrier_wait(&s->bar);
            for (int j = j0; j < j1; j++) {
                memcpy(s->logits + (size_t)rows[j] * V, c->lg + (size_t)j * V,
                       (size_t)V * sizeof(float));
            }
        }
        rl_barrier_wait(&s->bar); // hs and lg are free for the next chunk
    }
}

// Worker k of a step (all of the work when P = 1): checked, scratch ready.
static void s_step_work(s_step_t *s, int k) {
    rl_model_t *self = s->m;
    rl_kvcache_t *cache = s->c;
    const int C = self->C, I = self->I, NH = self->NH, NKV = self->NKV, D = self->D;
    const int QD = self->QD, KVD = self->KVD, n = s->n, P = s->P;
    const int *slots = s->slots, *pos = s->pos;
    const float eps = self->cfg.rms_norm_eps;
    float *x = cache->x, *ln = cache->ln, *q = cache->q, *kk = cache->kk, *v = cache->vv;
    float *att = cache->att, *o = cache->o, *gate = cache->gate, *up = cache->up;
    float *xa = cache->xa[k], *scratch = cache->att_scratch[k];
    int r0, r1, nr;
    s_share(n, k, P, 1, &r0, &r1);
    nr = r1 - r0;
    int cq[2], ck[2], cc[2], ci[2]; // this worker's columns of QD, KVD, C and I
    s_share(QD, k, P, 16, &cq[0], &cq[1]);
    s_share(KVD, k, P, 16, &ck[0], &ck[1]);
    s_share(C, k, P, 16, &cc[0], &cc[1]);
    s_share(I, k, P, 16, &ci[0], &ci[1]);

    rl_embedding_forward(x + (size_t)r0 * C, s->tokens + r0, self->params.embed_tokens, nr, C);
    for (int l = 0; l < self->L; l++) {
        const rl_layer_params_t *w = &self->layers[l];
        rl_rmsnorm_forward(ln + (size_t)r0 * C, NULL, x + (size_t)r0 * C, w->input_layernorm, eps,
                           nr, C);
        rl_barrier_wait(&s->bar);
        rl_mdl_proj_cols(self, l, RL_MDL_Q, q, QD, xa, ln, ln, w->q_proj, w->q_bias, n, C, cq[0],
                         cq[1]);
        rl_mdl_proj_cols(self, l, RL_MDL_K, kk, KVD, xa, ln, ln, w->k_proj, w->k_bias, n, C, ck[0],
                         ck[1]);
        rl_mdl_proj_cols(self, l, RL_MDL_V, v, KVD, xa, ln, ln, w->v_proj, w->v_bias, n, C, ck[0],
                         ck[1]);
        rl_barrier_wait(&s->bar);
        float *qr = q + (size_t)r0 * QD, *kr = kk + (size_t)r0 * KVD;
        if (self->cfg.qk_norm) {
            rl_rmsnorm_forward(qr, NULL, qr, w->q_norm, eps, nr * NH, D);
            rl_rmsnorm_forward(kr, NULL, kr, w->k_norm, eps, nr * NKV, D);
        }
        rl_rope_forward_table(qr, qr, cache->rope_cs, pos + r0, nr, NH, D);
        rl_rope_forward_table(kr, kr, cache->rope_cs, pos + r0, nr, NKV, D);
        for (int i = r0; i < r1; i++) {
            float *kt = s_kt(cache, l, slots[i]) + pos[i];
            const float *ki = kk + (size_t)i * KVD;
            for (int e = 0; e < KVD; e++) {
                kt[(size_t)e * cache->ldk] = ki[e];
            }
            memcpy(s_v(cache, l, slots[i]) + (size_t)pos[i] * KVD, v + (size_t)i * KVD,
                   (size_t)KVD * sizeof(float));
        }
        // every row's k/v is in the cache before any attends (unless rows have slots of their
        // own), so a prefill row sees the rows before it. A run of rows i..j-1 of one slot at
        // consecutive positions (a prompt prefill) attends with blocked sgemm
        // (rl_attention_prefill); a lone row (decode) with rl_attention_decode. Either way row i
        // sees the slot's cache 0..pos[i].
        if (!s->distinct) {
            rl_barrier_wait(&s->bar);
        }
        for (int i = r0, j; i < r1; i = j) {
            for (j = i + 1; j < r1 && slots[j] == slots[i] && pos[j] == pos[j - 1] + 1; j++) {
            }
            const float *kt = s_kt(cache, l, slots[i]), *vc = s_v(cache, l, slots[i]);
            if (j - i == 1) {
                rl_attention_decode(att + (size_t)i * QD, q + (size_t)i * QD, kt, cache->ldk, vc,
                                    (size_t)KVD, pos[i] + 1, NH, NKV, D, scratch);
            } else {
                rl_attention_prefill(att + (size_t)i * QD, q + (size_t)i * QD, kt, cache->ldk, vc,
                                     (size_t)KVD, pos[i], j - i, NH, NKV, D, scratch);
            }
        }
        rl_barrier_wait(&s->bar);
        rl_mdl_proj_cols(self, l, RL_MDL_O, o, C, xa, att, att, w->o_proj, w->o_bias, n, QD, cc[0],
                         cc[1]);
        for (int i = 0; i < n && cc[1] > cc[0]; i++) {
            float *xi = x + (size_t)i * C + cc[0];
            rl_residual_forward(xi, xi, o + (size_t)i * C + cc[0], (size_t)(cc[1] - cc[0]));
        }
        rl_barrier_wait(&s->bar);
        rl_rmsnorm_forward(ln + (size_t)r0 * C, NULL, x + (size_t)r0 * C,
                           w->post_attention_layernorm, eps, nr, C);
        rl_barrier_wait(&s->bar);
        rl_mdl_proj_cols(self, l, RL_MDL_GATE, gate, I, xa, ln, ln, w->gate_proj, w->gate_bias, n,
                         C, ci[0], ci[1]);
        rl_mdl_proj_cols(self, l, RL_MDL_UP, up, I, xa, ln, ln, w->up_proj, w->up_bias, n, C, ci[0],
                         ci[1]);
        for (int i = 0; i < n && ci[1] > ci[0]; i++) {
            float *g = gate + (size_t)i * I + ci[0];
            rl_swiglu_forward(g, g, up + (size_t)i * I + ci[0], (size_t)(ci[1] - ci[0]));
        }
        rl_barrier_wait(&s->bar);
        rl_mdl_proj_cols(self, l, RL_MDL_DOWN, o, C, xa, gate, gate, w->down_proj, w->down_bias, n,
                         I, cc[0], cc[1]);
        for (int i = 0; i < n && cc[1] > cc[0]; i++) {
            float *xi = x + (size_t)i * C + cc[0];
            rl_residual_forward(xi, xi, o + (size_t)i * C + cc[0], (size_t)(cc[1] - cc[0]));
        }
        rl_barrier_wait(&s->bar);
    }
    if (s->logits) {
        s_step_logits(s, k, x);
    }
}

// Workers of a step: rl_model_set_step_lanes's count (default the BLAS thread count), at most
// one per RL_MDL_STEP_LANE_ROWS rows; 1 for a sharded model.
static int s_step_workers(const rl_model_t *self, int n) {
    if (self->opts.sharded) {
        return 1;
    }
    int P = self->step_lanes > 0 ? self->step_lanes : openblas_get_num_threads();
    P = P < RL_MDL_LANES_MAX ? P : RL_MDL_LANES_MAX;
    P = P < n / RL_MDL_STEP_LANE_ROWS ? P : n / RL_MDL_STEP_LANE_ROWS;
    return P > 1 ? P : 1;
}

// One worker of a step (rl_pool_run's job), with one-thread BLAS set by the caller.
static void s_step_job(void *arg, int k, int P) {
    s_step_t *s = arg;
    if (k == 0) {
        RL_ASSERT(P == s->P);
    }
    s_step_work(s, k);
}

// rl_model_step's checks, shared with rl_model_step_draw.
static int s_step_check(rl_model_t *self, const rl_kvcache_t *cache, const int32_t *tokens,
                        const int *slots, const int *pos, int n) {
    if (cache->model != self) {
        return rl_mdl_err(self, RL_EINVAL, "the KV cache belongs to another model");
    }
    if (!self->has_head) { // (the host's head may be given back: rl_model_drop_host_weights)
        return rl_mdl_err(self, RL_EINVAL,
                          "this model has no vocabulary head (a sequence "
                          "classifier): it cannot sample");
    }
    if (n < 1) {
        return rl_mdl_err(self, RL_EINVAL, "a step needs n >= 1 tokens (got %d)", n);
    }
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= self->V) {
            return rl_mdl_err(self, RL_EINVAL, "token id %d at row %d is outside [0, %d)",
                              (int)tokens[i], i, self->V);
        }
        if (slots[i] < 0 || slots[i] >= cache->n_slots) {
            return rl_mdl_err(self, RL_EINVAL, "slot %d at row %d is outside [0, %d)", slots[i], i,
                              cache->n_slots);
        }
        if (pos[i] < 0 || pos[i] >= cache->max_len) {
            return rl_mdl_err(self, RL_EINVAL, "position %d at row %d is outside [0, %d) (max_len)",
                              pos[i], i, cache->max_len);
        }
    }
    return 0;
}

int rl_model_on_gpu(const rl_model_t *self) {
    return self->cuda != NULL;
}

size_t rl_kvcache_device_bytes(const rl_kvcache_t *cache) {
    return cache->dev ? rl_model_cuda_cache_bytes(cache->model->cuda, cache->dev) : 0;
}

int rl_model_step_draw(rl_model_t *self, rl_kvcache_t *cache, const int32_t *tokens,
                       const int *slots, const int *pos, int n, const rl_model_draws_t *d) {
    int rc = s_step_check(self, cache, tokens, slots, pos, n);
    if (rc) {
        return rc;
    }
    if (!cache->dev) {
        return rl_mdl_err(self, RL_EINVAL,
                          "rl_model_step_draw needs a model on a GPU (on the CPU the caller "
                          "draws from rl_model_step's logits)");
    }
    for (int j = 0; j < d->n; j++) {
        if (d->rows[j] < 0 || d->rows[j] >= n) {
            return rl_mdl_err(self, RL_EINVAL, "draw %d reads row %d, outside the step's [0, %d)",
                              j, d->rows[j], n);
        }
    }
    if (d->temperature > 0.0f && d->n > 0 && !d->u) {
        return rl_mdl_err(self, RL_EINVAL, "draws at a temperature above 0 need uniforms");
    }
    rc = rl_model_cuda_step(self->cuda, cache->dev, tokens, slots, pos, n, NULL, NULL, d,
                            self->lora_disabled);
    return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
}

int rl_model_step(rl_model_t *self, rl_kvcache_t *cache, const int32_t *tokens, const int *slots,
                  const int *pos, int n, const unsigned char *want, float *logits) {
    int rc = s_step_check(self, cache, tokens, slots, pos, n);
    if (rc) {
        return rc;
    }
    if (cache->dev) { // the model's GPU runs it all (rl_model_cuda.h)
        rc = rl_model_cuda_step(self->cuda, cache->dev, tokens, slots, pos, n, want, logits, NULL,
                                self->lora_disabled);
        return rc ? rl_mdl_err(self, rc, "%s", rl_model_cuda_errmsg(self->cuda)) : 0;
    }
    s_step_t s = {.m = self,
                  .c = cache,
                  .tokens = tokens,
                  .slots = slots,
                  .pos = pos,
                  .n = n,
                  .want = want,
                  .logits = logits,
                  .P = s_step_workers(self, n)};
    s.distinct = 1; // slots in increasing order (a batched decode's rows) are distinct
    for (int i = 1; i < n && s.distinct; i++) {
        s.distinct = slots[i] > slots[i - 1];
    }
    if (s.P > 1 && !self->pool) {
        self->pool = rl_pool_new();
    }
    // the workers' shares depend on P: fewer workers when a thread cannot start, known first
    s.P = self->pool ? rl_pool_reserve(self->pool, s.P) : 1;
    rc = s_step_ensure(self, cache, n, s.P);
    if (rc) {
        return rc;
    }
    rl_barrier_init(&s.bar, s.P);
    if (s.P == 1) { // on the role's BLAS threads
        s_step_work(&s, 0);
        return 0;
    }
    rl_mdl_pool_run(self, s_step_job, &s, s.P);
    return 0;
}

// rl_fsdp — sharded parameters around the model's unit hook. See rl_fsdp.h; read top to bottom:
// units and pieces, setup, the hook, the step's reductions, whole-model views.
#include "rl_fsdp.h"

#include "rl_clock.h"
#include "rl_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One tensor of a unit: where the model reads it (and, full tuning, writes its gradient), its
// size, and its offset in the whole-model layout (HF order).
typedef struct {
    float **slot, **gslot;
    size_t n, hf_off;
    char name[96];
} s_tensor_t;

// A unit: its tensors in HF order laid end to end (the unit's flat array), split over the fsdp
// group; this rank's piece is [lo, lo + counts[k]) of it, at shard_off in the shard.
typedef struct {
    s_tensor_t *t;
    int n_t;
    size_t numel, lo, shard_off;
    size_t *counts; // [fsdp]
    int gathered, grads_on;
} s_unit_t;

struct rl_fsdp {
    rl_model_t *model;
    rl_coll_t *coll;
    int f, k, dp; // fsdp size, this rank's index in its fsdp group, dp size
    int L, full, tied;
    s_unit_t *units;       // [L + 1]: the layers, then the root
    float *shard, *gshard; // this rank's pieces, units in order; gshard: full tuning only
    size_t n_shard, full_n;
    float *lbuf, *rbuf, *lgbuf, *rgbuf; // gather/gradient buffers: a layer, the root
    float *tmp;                         // a reduce-scatter's output (the largest piece)
    size_t lcap, rcap, tmp_cap;
    // replicated trainables: the parts, their sizes split over the fsdp group, this rank's slice
    rl_optim_part_t rep[4];
    int n_rep;
    size_t n_repl, r_lo, *rcounts;
    float *rslice_p, *rslice_g, *rstage;
    // LoRA's adapter (NULL: none): A and B whole on every rank (the forward reads them); each
    // layer's gradients computed into a buffer of one layer and reduce-scattered into this rank's
    // piece of the layer (rl_mesh_split of its span), the optimizer's state only the pieces'
    rl_lora_t *lora;
    size_t n_lora, n_ad, ad_cap;
    size_t *ad_span, *ad_len, *ad_lo, *ad_off; // [L]: the layer's span in the flat array, its
                                               // length, this rank's piece in it, in the pieces
    size_t *ad_counts;                         // [L * fsdp] every rank's piece of each layer
    float *ad_g, *ad_p, *ad_buf;               // gradient and parameter pieces; one layer's
                                               // gradients
    double coll_s;
};

// ---- pieces -----------------------------------------------------------------------------------

// The even split of n floats over the fsdp group (rl_mesh_split): counts[j] for each member;
// returns where this rank's piece starts. Grows *cap to the largest piece.
static size_t s_split(const rl_fsdp_t *self, size_t n, size_t *counts, size_t *cap) {
    size_t mine = 0;
    for (int j = 0; j < self->f; j++) {
        int64_t lo, hi;
        rl_mesh_split((int64_t)n, self->f, j, &lo, &hi);
        counts[j] = (size_t)(hi - lo);
        mine = j == self->k ? (size_t)lo : mine;
        *cap = counts[j] > *cap ? counts[j] : *cap;
    }
    return mine;
}

// This rank's piece of unit u (piece: its floats) from a whole-model array (HF order).
static void s_piece_copy(const rl_fsdp_t *self, const s_unit_t *u, float *piece,
                         const float *whole) {
    size_t lo = u->lo, hi = u->lo + u->counts[self->k], off = 0;
    for (int i = 0; i < u->n_t; i++) {
        size_t a = off > lo ? off : lo, b = off + u->t[i].n < hi ? off + u->t[i].n : hi;
        if (a < b) {
            memcpy(piece + (a - lo), whole + u->t[i].hf_off + (a - off), (b - a) * sizeof(float));
        }
        off += u->t[i].n;
    }
}

// Points unit u's tensors (params, or gradients) at a whole unit laid out at buf.
static void s_point(rl_fsdp_t *self, s_unit_t *u, float *buf, int grads) {
    size_t off = 0;
    for (int i = 0; i < u->n_t; i++) {
        *(grads ? u->t[i].gslot : u->t[i].slot) = buf ? buf + off : NULL;
        off += u->t[i].n;
    }
    if (self->tied && u == &self->units[self->L]) { // the head is the embedding
        rl_model_params_t *p = grads ? rl_model_grads(self->model) : rl_model_params(self->model);
        p->lm_head = p->embed_tokens;
    }
}

static int s_coll_err(rl_fsdp_t *self, double t0, int rc) {
    self->coll_s += rl_clock_now() - t0;
    return rc;
}

// All-gathers unit u's pieces of `shard_like` (the shard's layout) into buf.
static int s_gather_unit(rl_fsdp_t *self, s_unit_t *u, const float *shard_like, float *buf,
                         char *err, size_t err_len) {
    double t0 = rl_clock_now();
    int rc = rl_coll_all_gather(self->coll, RL_MESH_FSDP, shard_like + u->shard_off, buf, u->counts,
                                err, err_len);
    return s_coll_err(self, t0, rc);
}

// ---- setup ------------------------------------------------------------------------------------

static int s_unit_of(const char *name, int L) {
    int l = -1, n = 0;
    if (sscanf(name, "model.layers.%d.%n", &l, &n) == 1 && n > 0 && l >= 0 && l < L) {
        return l;
    }
    return L;
}

static int s_build_units(rl_fsdp_t *self, char *err, size_t err_len) {
    const rl_hf_config_t *cfg = rl_model_config(self->model);
    rl_model_params_t *p = rl_model_params(self->model), *g = rl_model_grads(self->model);
    int n = rl_hf_tensor_specs(cfg, NULL, 0);
    rl_hf_tensor_spec_t *specs = calloc((size_t)n, sizeof *specs);
    self->units = calloc((size_t)self->L + 1, sizeof *self->units);
    if (!specs || !self->units) {
        free(specs);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_hf_tensor_specs(cfg, specs, n);
    for (int i = 0; i < n; i++) {
        s_unit_t *u = &self->units[s_unit_of(specs[i].name, self->L)];
        float **slot = rl_model_params_find(p, self->L, specs[i].name);
        if (!slot || !*slot) {
            continue; // a sequence classifier's absent vocabulary head
        }
        s_tensor_t *t = realloc(u->t, (size_t)(u->n_t + 1) * sizeof *t);
        if (!t) {
            free(specs);
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        u->t = t;
        size_t numel = 1;
        for (int d = 0; d < specs[i].ndim; d++) {
            numel *= (size_t)specs[i].shape[d];
        }
        t[u->n_t] = (s_tensor_t){slot, g ? rl_model_params_find(g, self->L, specs[i].name) : NULL,
                                 numel, self->full_n, ""};
        snprintf(t[u->n_t].name, sizeof t[u->n_t].name, "%s", specs[i].name);
        u->n_t++;
        u->numel += numel;
        self->full_n += numel;
    }
    free(specs);
    for (int ui = 0; ui <= self->L; ui++) {
        s_unit_t *u = &self->units[ui];
        if (!(u->counts = calloc((size_t)self->f, sizeof *u->counts))) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        u->lo = s_split(self, u->numel, u->counts, &self->tmp_cap);
        u->shard_off = self->n_shard;
        self->n_shard += u->counts[self->k];
        size_t *cap = ui == self->L ? &self->rcap : &self->lcap;
        *cap = u->numel > *cap ? u->numel : *cap;
    }
    return 0;
}

// LoRA's adapter, split per layer over the fsdp group (see the struct).
static int s_build_adapter(rl_fsdp_t *self, char *err, size_t err_len) {
    rl_lora_t *lo = self->lora;
    const int L = self->L, f = self->f;
    rl_lora_params(lo, &self->n_lora);
    self->ad_span = calloc((size_t)L + 1, sizeof(size_t));
    self->ad_len = calloc((size_t)L + 1, sizeof(size_t));
    self->ad_lo = calloc((size_t)L + 1, sizeof(size_t));
    self->ad_off = calloc((size_t)L + 1, sizeof(size_t));
    self->ad_counts = calloc((size_t)L * (size_t)f + 1, sizeof(size_t));
    if (!self->ad_span || !self->ad_len || !self->ad_lo || !self->ad_off || !self->ad_counts) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int l = 0; l < L; l++) {
        self->ad_len[l] = rl_lora_layer_span(lo, l, &self->ad_span[l]);
        self->ad_cap = self->ad_len[l] > self->ad_cap ? self->ad_len[l] : self->ad_cap;
        self->ad_lo[l] =
            s_split(self, self->ad_len[l], self->ad_counts + (size_t)l * f, &self->tmp_cap);
        self->ad_off[l] = self->n_ad;
        self->n_ad += self->ad_counts[(size_t)l * f + self->k];
    }
    self->ad_g = calloc(self->n_ad + 1, sizeof(float));
    self->ad_p = malloc((self->n_ad + 1) * sizeof(float));
    self->ad_buf = f > 1 ? malloc((self->ad_cap + 1) * sizeof(float)) : NULL;
    if (!self->ad_g || !self->ad_p || (f > 1 && !self->ad_buf)) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory for the adapter's pieces");
    }
    rl_lora_drop_grads(lo); // each layer's gradients now go where the hook points them
    return 0;
}

static int s_hook(void *ctx, int unit, rl_unit_event_t ev, char *msg, size_t msg_len);

// The fields both constructors set: the group's shape, the replicated parts and their slices,
// and (model != NULL) the units, the adapter and their buffers.
static int s_init(rl_fsdp_t *self, rl_model_t *model, rl_coll_t *coll, const rl_optim_part_t *rep,
                  int n_rep, char *err, size_t err_len) {
    if (n_rep < 0 || n_rep > 4) {
        return rl_errf(err, err_len, RL_EINVAL, "fsdp: %d replicated parts (at most 4)", n_rep);
    }
    self->model = model;
    self->coll = coll;
    self->f = rl_coll_group_size(coll, RL_MESH_FSDP);
    self->k = rl_coll_group_index(coll, RL_MESH_FSDP);
    self->dp = rl_coll_group_size(coll, RL_MESH_DP);
    int rc = 0;
    if (model) {
        self->L = rl_model_config(model)->num_hidden_layers;
        self->full = rl_model_grads(model) != NULL;
        self->tied = rl_model_config(model)->tie_word_embeddings;
        self->lora = rl_model_lora(model);
        rc = s_build_units(self, err, err_len);
        if (!rc && self->lora) {
            rc = s_build_adapter(self, err, err_len);
        }
    }
    for (int i = 0; !rc && i < n_rep; i++) {
        self->rep[i] = rep[i];
        self->n_repl += rep[i].n;
    }
    self->n_rep = n_rep;
    if (!rc && !(self->rcounts = calloc((size_t)self->f, sizeof(size_t)))) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (!rc) {
        size_t unused = 0;
        self->r_lo = s_split(self, self->n_repl, self->rcounts, &unused);
        size_t rk = self->rcounts[self->k];
        const int f1 = self->f == 1;
        self->shard = malloc((self->n_shard ? self->n_shard : 1) * sizeof(float));
        self->gshard = self->full ? calloc(self->n_shard ? self->n_shard : 1, sizeof(float)) : NULL;
        self->lbuf = f1 || !model ? NULL : malloc(self->lcap * sizeof(float) + 1);
        self->rbuf = f1 || !model ? NULL : malloc(self->rcap * sizeof(float) + 1);
        self->lgbuf = f1 || !self->full ? NULL : malloc(self->lcap * sizeof(float) + 1);
        self->rgbuf = f1 || !self->full ? NULL : malloc(self->rcap * sizeof(float) + 1);
        self->tmp = malloc((self->tmp_cap + 1) * sizeof(float));
        self->rslice_p = malloc((rk + 1) * sizeof(float));
        self->rslice_g = calloc(rk + 1, sizeof(float));
        self->rstage = malloc((self->n_repl + 1) * sizeof(float));
        if (!self->shard || (self->full && !self->gshard) ||
            (!f1 && model && (!self->lbuf || !self->rbuf)) ||
            (!f1 && self->full && (!self->lgbuf || !self->rgbuf)) || !self->tmp ||
            !self->rslice_p || !self->rslice_g || !self->rstage) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory for the parameter shards");
        }
    }
    return rc;
}

int rl_fsdp_new(rl_model_t *model, rl_coll_t *coll, const rl_optim_part_t *rep, int n_rep,
                rl_fsdp_t **out, char *err, size_t err_len) {
    *out = NULL;
    rl_fsdp_t *self = calloc(1, sizeof *self);
    if (!self) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = s_init(self, model, coll, rep, n_rep, err, err_len);
    if (!rc) { // this rank's pieces out of the loaded tensors (read in place from the mapping)
        rc = rl_fsdp_scatter_model(self, model, err, err_len);
    }
    if (rc) {
        rl_fsdp_destroy(&self);
        return rc;
    }
    rl_model_drop_weights(model);
    rl_model_set_unit_hook(model, s_hook, self);
    *out = self;
    return 0;
}

int rl_fsdp_new_replicated(rl_coll_t *coll, const rl_optim_part_t *rep, int n_rep, rl_fsdp_t **out,
                           char *err, size_t err_len) {
    *out = NULL;
    rl_fsdp_t *self = calloc(1, sizeof *self);
    if (!self) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = s_init(self, NULL, coll, rep, n_rep, err, err_len);
    if (rc) {
        rl_fsdp_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void rl_fsdp_destroy(rl_fsdp_t **self_p) {
    rl_fsdp_t *self = *self_p;
    if (!self) {
        return;
    }
    if (self->units) {
        for (int ui = 0; ui <= self->L; ui++) {
            free(self->units[ui].t);
            free(self->units[ui].counts);
        }
    }
    if (self->model) {
        rl_model_set_unit_hook(self->model, NULL, NULL);
    }
    free(self->units);
    free(self->shard);
    free(self->gshard);
    free(self->lbuf);
    free(self->rbuf);
    free(self->lgbuf);
    free(self->rgbuf);
    free(self->tmp);
    free(self->rcounts);
    free(self->rslice_p);
    free(self->rslice_g);
    free(self->rstage);
    free(self->ad_span);
    free(self->ad_len);
    free(self->ad_lo);
    free(self->ad_off);
    free(self->ad_counts);
    free(self->ad_g);
    free(self->ad_p);
    free(self->ad_buf);
    free(self);
    *self_p = NULL;
}

// ---- the unit hook ----------------------------------------------------------------------------

// Reduce-scatters buf (the group's pieces laid end to end, counts[j] floats each) over the fsdp
// group and adds this rank's summed piece into dst.
static int s_reduce_into(rl_fsdp_t *self, const float *buf, const size_t *counts, float *dst,
                         char *msg, size_t msg_len) {
    double t0 = rl_clock_now();
    int rc = rl_coll_reduce_scatter(self->coll, RL_MESH_FSDP, buf, self->tmp, counts, msg, msg_len);
    if (s_coll_err(self, t0, rc)) {
        return rc;
    }
    for (size_t i = 0; i < counts[self->k]; i++) {
        dst[i] += self->tmp[i];
    }
    return 0;
}

static int s_hook(void *ctx, int unit, rl_unit_event_t ev, char *msg, size_t msg_len) {
    rl_fsdp_t *self = ctx;
    s_unit_t *u = &self->units[unit];
    const int root = unit == self->L, f1 = self->f == 1;
    switch (ev) {
    case RL_UNIT_GATHER:
        if (u->gathered) {
            return 0;
        }
        if (f1) { // the whole unit is this rank's piece: used in place
            s_point(self, u, self->shard + u->shard_off, 0);
        } else {
            float *buf = root ? self->rbuf : self->lbuf;
            int rc = s_gather_unit(self, u, self->shard, buf, msg, msg_len);
            if (rc) {
                return rc;
            }
            s_point(self, u, buf, 0);
        }
        u->gathered = 1;
        return 0;
    case RL_UNIT_GRADS:
        if (self->lora && !root) { // the layer's LoRA gradients: in place, or a zeroed buffer
            float *g = f1 ? self->ad_g + self->ad_off[unit] : self->ad_buf;
            if (!f1) {
                memset(g, 0, self->ad_len[unit] * sizeof(float));
            }
            rl_lora_set_layer_grads(self->lora, unit, g);
        }
        if (!self->full) {
            return 0;
        }
        if (f1) { // accumulate in place, as a 1×1 run does
            s_point(self, u, self->gshard + u->shard_off, 1);
        } else {
            float *gbuf = root ? self->rgbuf : self->lgbuf;
            memset(gbuf, 0, u->numel * sizeof(float));
            s_point(self, u, gbuf, 1);
        }
        u->grads_on = 1;
        return 0;
    case RL_UNIT_REDUCE:
        if (self->lora && !root && !f1) {
            int rc = s_reduce_into(self, self->ad_buf, self->ad_counts + (size_t)unit * self->f,
                                   self->ad_g + self->ad_off[unit], msg, msg_len);
            if (rc) {
                return rc;
            }
        }
        if (!self->full || f1 || !u->grads_on) {
            return 0;
        }
        return s_reduce_into(self, root ? self->rgbuf : self->lgbuf, u->counts,
                             self->gshard + u->shard_off, msg, msg_len);
    case RL_UNIT_RELEASE:
        if (self->lora && !root) {
            rl_lora_set_layer_grads(self->lora, unit, NULL);
        }
        s_point(self, u, NULL, 0);
        if (self->full) {
            s_point(self, u, NULL, 1);
        }
        u->gathered = u->grads_on = 0;
        return 0;
    }
    return rl_errf(msg, msg_len, RL_EINVAL, "unknown unit event %d", (int)ev);
}

// ---- the step's reductions --------------------------------------------------------------------

int rl_fsdp_optim_parts(rl_fsdp_t *self, rl_optim_part_t parts[2]) {
    int k = 0;
    if (self->full) {
        parts[k++] = (rl_optim_part_t){self->shard, self->gshard, self->n_shard};
    } else if (self->lora) {
        parts[k++] = (rl_optim_part_t){self->ad_p, self->ad_g, self->n_ad};
    }
    if (self->n_repl) {
        parts[k++] = (rl_optim_part_t){self->rslice_p, self->rslice_g, self->rcounts[self->k]};
    }
    return k;
}

size_t rl_fsdp_optim_size(const rl_fsdp_t *self) {
    return (self->full   ? self->n_shard
            : self->lora ? self->n_ad
                         : 0) +
           (self->n_repl ? self->rcounts[self->k] : 0);
}

size_t rl_fsdp_replicated_size(const rl_fsdp_t *self) {
    return self->n_repl;
}

size_t rl_fsdp_whole_state_size(const rl_fsdp_t *self) {
    return (self->full ? self->full_n : self->lora ? self->n_lora : 0) + self->n_repl;
}
size_t rl_fsdp_full_size(const rl_fsdp_t *self) {
    return self->full_n;
}

void rl_fsdp_zero_grad(rl_fsdp_t *self) {
    if (self->gshard) {
        memset(self->gshard, 0, self->n_shard * sizeof(float));
    }
    if (self->ad_g) {
        memset(self->ad_g, 0, self->n_ad * sizeof(float));
    }
    for (int i = 0; i < self->n_rep; i++) {
        memset(self->rep[i].grads, 0, self->rep[i].n * sizeof(float));
    }
}

// Copies the replicated parts' params or grads into/out of one array laid end to end.
static void s_rep_copy(rl_fsdp_t *self, float *flat, int grads, int to_flat) {
    size_t off = 0;
    for (int i = 0; i < self->n_rep; i++) {
        float *a = grads ? self->rep[i].grads : self->rep[i].params;
        memcpy(to_flat ? flat + off : a, to_flat ? a : flat + off, self->rep[i].n * sizeof(float));
        off += self->rep[i].n;
    }
}

int rl_fsdp_reduce_grads(rl_fsdp_t *self, double max_norm, double *norm, char *err,
                         size_t err_len) {
    double t0 = rl_clock_now();
    int rc = 0;
    size_t rk = self->rcounts[self->k];
    if (self->full && self->dp > 1) {
        rc = rl_coll_all_reduce(self->coll, RL_MESH_DP, self->gshard, self->n_shard, err, err_len);
    }
    if (!rc && self->lora) {
        if (self->dp > 1) {
            rc = rl_coll_all_reduce(self->coll, RL_MESH_DP, self->ad_g, self->n_ad, err, err_len);
        }
        float *mem = rl_lora_params(self->lora, NULL); // whole and the same on every rank
        for (int l = 0; l < self->L; l++) {
            memcpy(self->ad_p + self->ad_off[l], mem + self->ad_span[l] + self->ad_lo[l],
                   self->ad_counts[(size_t)l * self->f + self->k] * sizeof(float));
        }
    }
    if (!rc && self->n_repl) {
        s_rep_copy(self, self->rstage, 1, 1);
        rc = rl_coll_reduce_scatter(self->coll, RL_MESH_FSDP, self->rstage, self->rslice_g,
                                    self->rcounts, err, err_len);
        if (!rc && self->dp > 1) {
            rc = rl_coll_all_reduce(self->coll, RL_MESH_DP, self->rslice_g, rk, err, err_len);
        }
        s_rep_copy(self, self->rstage, 0, 1); // the parameters: the same on every rank
        memcpy(self->rslice_p, self->rstage + self->r_lo, rk * sizeof(float));
    }
    double ss = 0.0;
    for (size_t i = 0; self->full && i < self->n_shard; i++) {
        ss += (double)self->gshard[i] * (double)self->gshard[i];
    }
    for (size_t i = 0; self->lora && i < self->n_ad; i++) {
        ss += (double)self->ad_g[i] * (double)self->ad_g[i];
    }
    for (size_t i = 0; i < rk; i++) {
        ss += (double)self->rslice_g[i] * (double)self->rslice_g[i];
    }
    if (!rc && self->f > 1) { // the dp replicas hold the same pieces: sum over one row
        rc = rl_coll_all_reduce_f64(self->coll, RL_MESH_FSDP, &ss, 1, err, err_len);
    }
    s_coll_err(self, t0, 0);
    if (rc) {
        return rc;
    }
    *norm = sqrt(ss);
    if (max_norm > 0.0 && isfinite(*norm)) {
        double coef = max_norm / (*norm + 1e-6);
        if (coef < 1.0) {
            float c = (float)coef;
            for (size_t i = 0; self->full && i < self->n_shard; i++) {
                self->gshard[i] *= c;
            }
            for (size_t i = 0; self->lora && i < self->n_ad; i++) {
                self->ad_g[i] *= c;
            }
            for (size_t i = 0; i < rk; i++) {
                self->rslice_g[i] *= c;
            }
        }
    }
    return 0;
}

// Every layer's pieces of `pieces` (the adapter pieces' layout) all-gathered into `flat` (the
// adapter's layout: layer spans laid end to end).
static int s_gather_adapter(rl_fsdp_t *self, const float *pieces, float *flat, char *err,
                            size_t err_len) {
    int rc = 0;
    double t0 = rl_clock_now();
    for (int l = 0; !rc && l < self->L; l++) {
        rc = rl_coll_all_gather(self->coll, RL_MESH_FSDP, pieces + self->ad_off[l],
                                flat + self->ad_span[l], self->ad_counts + (size_t)l * self->f, err,
                                err_len);
    }
    s_coll_err(self, t0, 0);
    return rc;
}

int rl_fsdp_gather_replicated(rl_fsdp_t *self, char *err, size_t err_len) {
    int rc = 0;
    if (self->lora) { // the updated pieces of the adapter back into its whole A and B
        rc = s_gather_adapter(self, self->ad_p, rl_lora_params(self->lora, NULL), err, err_len);
    }
    if (rc || !self->n_repl) {
        return rc;
    }
    double t0 = rl_clock_now();
    rc = rl_coll_all_gather(self->coll, RL_MESH_FSDP, self->rslice_p, self->rstage, self->rcounts,
                            err, err_len);
    s_coll_err(self, t0, 0);
    if (!rc) {
        s_rep_copy(self, self->rstage, 0, 0);
    }
    return rc;
}

// ---- whole-model views ------------------------------------------------------------------------

// Every unit of shard_like (the shard's layout) gathered into whole (HF order).
static int s_gather_units(rl_fsdp_t *self, const float *shard_like, float *whole, char *err,
                          size_t err_len) {
    float *buf = NULL;
    if (self->f > 1 &&
        !(buf = malloc((self->rcap > self->lcap ? self->rcap : self->lcap) * sizeof(float) + 1))) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (int ui = 0; !rc && ui <= self->L; ui++) {
        s_unit_t *u = &self->units[ui];
        const float *src = shard_like + u->shard_off;
        if (buf && (rc = s_gather_unit(self, u, shard_like, buf, err, err_len)) == 0) {
            src = buf;
        }
        size_t off = 0;
        for (int i = 0; !rc && i < u->n_t; i++) {
            memcpy(whole + u->t[i].hf_off, src + off, u->t[i].n * sizeof(float));
            off += u->t[i].n;
        }
    }
    free(buf);
    return rc;
}

int rl_fsdp_gather_full(rl_fsdp_t *self, float *out, char *err, size_t err_len) {
    return s_gather_units(self, self->shard, out, err, err_len);
}

void rl_fsdp_scatter_full(rl_fsdp_t *self, const float *full) {
    for (int ui = 0; ui <= self->L; ui++) {
        s_unit_t *u = &self->units[ui];
        s_piece_copy(self, u, self->shard + u->shard_off, full);
    }
}

int rl_fsdp_scatter_model(rl_fsdp_t *self, rl_model_t *src, char *err, size_t err_len) {
    rl_model_params_t *p = rl_model_params(src);
    for (int ui = 0; ui <= self->L; ui++) {
        s_unit_t *u = &self->units[ui];
        size_t lo = u->lo, hi = u->lo + u->counts[self->k], off = 0;
        for (int i = 0; i < u->n_t; i++) {
            float **slot = rl_model_params_find(p, self->L, u->t[i].name);
            if (!slot || !*slot) {
                return rl_errf(err, err_len, RL_EINVAL, "%s: missing in the model loaded",
                               u->t[i].name);
            }
            size_t a = off > lo ? off : lo, b = off + u->t[i].n < hi ? off + u->t[i].n : hi;
            if (a < b) {
                memcpy(self->shard + u->shard_off + (a - lo), *slot + (a - off),
                       (b - a) * sizeof(float));
            }
            off += u->t[i].n;
        }
    }
    return 0;
}

int rl_fsdp_gather_state(rl_fsdp_t *self, const float *state, float *out, char *err,
                         size_t err_len) {
    size_t head = self->full ? self->full_n : self->lora ? self->n_lora : 0;
    size_t sh = self->full ? self->n_shard : self->lora ? self->n_ad : 0;
    int rc = self->full   ? s_gather_units(self, state, out, err, err_len)
             : self->lora ? s_gather_adapter(self, state, out, err, err_len)
                          : 0;
    if (!rc && self->n_repl) {
        double t0 = rl_clock_now();
        rc = rl_coll_all_gather(self->coll, RL_MESH_FSDP, state + sh, out + head, self->rcounts,
                                err, err_len);
        s_coll_err(self, t0, 0);
    }
    return rc;
}

void rl_fsdp_scatter_state(rl_fsdp_t *self, const float *whole, float *state) {
    size_t head = self->full ? self->full_n : self->lora ? self->n_lora : 0;
    size_t sh = self->full ? self->n_shard : self->lora ? self->n_ad : 0;
    for (int ui = 0; self->full && ui <= self->L; ui++) {
        s_unit_t *u = &self->units[ui];
        s_piece_copy(self, u, state + u->shard_off, whole);
    }
    for (int l = 0; self->lora && !self->full && l < self->L; l++) {
        memcpy(state + self->ad_off[l], whole + self->ad_span[l] + self->ad_lo[l],
               self->ad_counts[(size_t)l * self->f + self->k] * sizeof(float));
    }
    memcpy(state + sh, whole + head + self->r_lo, self->rcounts[self->k] * sizeof(float));
}

void rl_fsdp_bytes(const rl_fsdp_t *self, rl_fsdp_bytes_t *out) {
    const size_t fs = sizeof(float);
    out->params = self->n_shard * fs;
    out->grads = (self->full ? self->n_shard : self->lora ? self->n_ad : 0) * fs;
    out->replicated = ((self->lora ? self->n_lora : 0) + 2 * self->n_repl) * fs;
    size_t bufs = self->f > 1 ? (self->lcap + self->rcap) * (self->full ? 2 : 1) : 0;
    bufs += self->f > 1 && self->lora ? self->ad_cap : 0;
    out->buffers = bufs * fs;
}

double rl_fsdp_coll_seconds(const rl_fsdp_t *self) {
    return self->coll_s;
}

// rl_policy — the actor's model, optimizer and GRPO update. Read top to bottom: options, setup,
// logprobs, the update, weights and checkpoints.
#include "rl_policy.h"

#include "rl_err.h"
#include "rl_optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rl_policy {
    const rl_recipe_t *r;
    int threads;
    rl_model_t *model;
    rl_model_t *ref;        // full tuning's frozen reference, loaded on first use
    rl_optim_t *optim;
    float *params, *grads;  // trainable flat view (borrowed from model)
    size_t n_params;
    // micro-batch scratch, grown to the largest (mb, T) seen
    int32_t *tok;
    int *len;
    float *logp, *ent, *dlogp, *old, *mu, *refl, *mask;
    size_t cap;
    float *old_all;         // (B,T) logπ_old of the batch, grown
    size_t cap_all;
};

// ---- options and setup ---------------------------------------------------------------------

static int s_lora_bits(const rl_recipe_strlist_t *tm) {
    static const char *const names[] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                        "gate_proj", "up_proj", "down_proj"};
    int bits = 0;
    for (int i = 0; i < tm->n; i++) {
        for (int k = 0; k < 7; k++) {
            if (strcmp(tm->items[i], names[k]) == 0) {
                bits |= 1 << k; // RL_LORA_Q .. RL_LORA_DOWN in this order
            }
        }
        if (strcmp(tm->items[i], "all-linear") == 0) {
            bits |= RL_LORA_ALL;
        }
    }
    return bits;
}

void rl_policy_model_opts(const rl_recipe_t *r, int threads, rl_model_opts_t *mo) {
    rl_model_opts_default(mo);
    mo->tune = r->lora.enabled ? RL_TUNE_LORA : RL_TUNE_FULL;
    mo->lora_r = r->lora.r;
    mo->lora_alpha = (float)r->lora.alpha;
    mo->lora_dropout = (float)r->lora.dropout;
    mo->lora_targets = s_lora_bits(&r->lora.target_modules);
    mo->use_rslora = r->lora.use_rslora;
    mo->seed = (uint64_t)r->run.seed;
    mo->recompute = r->train.recompute;
    mo->threads = threads;
}

static int s_load_model(rl_policy_t *p, const char *dir, char *err, size_t err_len) {
    rl_model_opts_t mo;
    rl_policy_model_opts(p->r, p->threads, &mo);
    char msg[2048];
    rl_model_t *m = rl_model_load(dir, &mo, msg, sizeof(msg));
    if (!m) {
        return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
    }
    size_t n = 0;
    float *params = rl_model_trainable(m, &n);
    float *grads = rl_model_trainable_grads(m);
    if (!params || !grads || n == 0 || (p->optim && n != p->n_params)) {
        rl_model_destroy(&m);
        return rl_errf(err, err_len, RL_EINVAL, "%s: %zu trainable parameters, expected %zu",
                       dir, n, p->n_params);
    }
    rl_model_destroy(&p->model);
    p->model = m;
    p->params = params;
    p->grads = grads;
    p->n_params = n;
    return 0;
}

int rl_policy_new(const rl_recipe_t *r, int threads, rl_policy_t **out, char *err,
                  size_t err_len) {
    *out = NULL;
    rl_policy_t *p = calloc(1, sizeof(*p));
    if (!p) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    p->r = r;
    p->threads = threads;
    int rc = s_load_model(p, r->model.path, err, err_len);
    if (rc) {
        rl_policy_destroy(&p);
        return rc;
    }
    rl_optim_hparams_t hp = {r->optim.betas[0], r->optim.betas[1], r->optim.eps,
                             r->optim.weight_decay};
    p->optim = rl_optim_new(p->n_params, &hp);
    if (!p->optim) {
        rl_policy_destroy(&p);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory (optimizer state)");
    }
    *out = p;
    return 0;
}

void rl_policy_destroy(rl_policy_t **self_p) {
    rl_policy_t *p = *self_p;
    if (!p) {
        return;
    }
    rl_model_destroy(&p->model);
    rl_model_destroy(&p->ref);
    rl_optim_destroy(&p->optim);
    free(p->tok);
    free(p->len);
    free(p->logp);
    free(p->ent);
    free(p->dlogp);
    free(p->old);
    free(p->mu);
    free(p->refl);
    free(p->mask);
    free(p->old_all);
    free(p);
    *self_p = NULL;
}

rl_model_t *rl_policy_model(rl_policy_t *self) { return self->model; }

int rl_policy_is_lora(const rl_policy_t *self) { return self->r->lora.enabled ? 1 : 0; }

const float *rl_policy_weights(rl_policy_t *self, size_t *n_p) {
    *n_p = self->n_params;
    return self->params;
}

// ---- logprobs --------------------------------------------------------------------------------

int rl_policy_logprobs(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B,
                       int T, float temperature, int adapter, float *logp, char *err,
                       size_t err_len) {
    rl_model_t *m = self->model;
    if (!adapter && !self->r->lora.enabled) {
        if (!self->ref) {
            rl_model_opts_t mo;
            rl_policy_model_opts(self->r, self->threads, &mo);
            mo.tune = RL_TUNE_NONE;
            char msg[2048];
            self->ref = rl_model_load(self->r->model.path, &mo, msg, sizeof(msg));
            if (!self->ref) {
                return rl_errf(err, err_len, RL_EINVAL, "reference: %s", msg);
            }
        }
        m = self->ref;
    }
    if (!adapter && m == self->model) {
        rl_model_set_adapter_disabled(m, 1);
    }
    int rc = rl_model_forward(m, tokens, lengths, B, T, temperature, 0, logp, NULL);
    if (!adapter && m == self->model) {
        rl_model_set_adapter_disabled(m, 0);
    }
    if (rc) {
        return rl_errf(err, err_len, rc, "logprobs: %s", rl_model_errmsg(m));
    }
    return 0;
}

// ---- the update --------------------------------------------------------------------------------

static int s_grow(void **p, size_t n, size_t size) {
    void *q = realloc(*p, n * size);
    if (!q) {
        return RL_ENOMEM;
    }
    *p = q;
    return 0;
}

static int s_scratch(rl_policy_t *p, size_t bt, int mb) {
    if (bt <= p->cap) {
        return 0;
    }
    if (s_grow((void **)&p->tok, bt, sizeof(int32_t)) || s_grow((void **)&p->logp, bt, 4) ||
        s_grow((void **)&p->ent, bt, 4) || s_grow((void **)&p->dlogp, bt, 4) ||
        s_grow((void **)&p->old, bt, 4) || s_grow((void **)&p->mu, bt, 4) ||
        s_grow((void **)&p->refl, bt, 4) || s_grow((void **)&p->mask, bt, 4) ||
        s_grow((void **)&p->len, (size_t)mb, sizeof(int))) {
        return RL_ENOMEM;
    }
    p->cap = bt;
    return 0;
}

// Copies rows [b0, b0+n) of a (B,T) array into a dense (n,Tm) one.
static void s_rows_f(float *dst, const float *src, int b0, int n, int T, int Tm) {
    for (int i = 0; i < n; i++) {
        memcpy(dst + (size_t)i * Tm, src + (size_t)(b0 + i) * T, (size_t)Tm * sizeof(float));
    }
}

int rl_policy_train(rl_policy_t *self, const rl_policy_batch_t *b,
                    const rl_recipe_algorithm_t *alg, float temperature, int micro_batch,
                    int iterations, double lr, double max_grad_norm, float *old_logp,
                    rl_policy_train_stats_t *stats, char *err, size_t err_len) {
    memset(stats, 0, sizeof(*stats));
    if (b->B < 1 || b->T < 2 || micro_batch < 1 || iterations < 1) {
        return rl_errf(err, err_len, RL_EINVAL, "train: empty batch or bad micro-batch size");
    }
    size_t bt_all = (size_t)b->B * (size_t)b->T;
    if (bt_all > self->cap_all) {
        if (s_grow((void **)&self->old_all, bt_all, sizeof(float))) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        self->cap_all = bt_all;
    }
    int mb = micro_batch < b->B ? micro_batch : b->B;
    if (s_scratch(self, (size_t)mb * (size_t)b->T, mb)) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int it = 0; it < iterations; it++) {
        rl_model_zero_grad(self->model);
        rl_grpo_loss_stats_t ls;
        memset(&ls, 0, sizeof(ls));
        double entropy = 0.0;
        for (int b0 = 0; b0 < b->B; b0 += mb) {
            int n = b->B - b0 < mb ? b->B - b0 : mb;
            int Tm = 1;
            for (int i = 0; i < n; i++) {
                self->len[i] = b->lengths[b0 + i];
                Tm = self->len[i] > Tm ? self->len[i] : Tm;
            }
            for (int i = 0; i < n; i++) {
                memcpy(self->tok + (size_t)i * Tm, b->tokens + (size_t)(b0 + i) * b->T,
                       (size_t)Tm * sizeof(int32_t));
                for (int t = 0; t < Tm; t++) {
                    self->mask[(size_t)i * Tm + t] = b->mask[(size_t)(b0 + i) * b->T + t];
                }
            }
            int rc = rl_model_forward(self->model, self->tok, self->len, n, Tm, temperature, 1,
                                      self->logp, it == 0 ? self->ent : NULL);
            if (rc) {
                return rl_errf(err, err_len, rc, "train forward: %s",
                               rl_model_errmsg(self->model));
            }
            rl_grpo_batch_t g = {0};
            g.B = n;
            g.T = Tm;
            g.logp = self->logp;
            g.mask = self->mask;
            g.adv = b->adv + b0;
            g.denom = b->denom;
            if (it == 0) {
                for (int i = 0; i < n; i++) {
                    float *o = self->old_all + (size_t)(b0 + i) * b->T;
                    memcpy(o, self->logp + (size_t)i * Tm, (size_t)Tm * sizeof(float));
                    memset(o + Tm, 0, (size_t)(b->T - Tm) * sizeof(float));
                    for (int t = 0; t < Tm; t++) {
                        entropy += (double)self->mask[(size_t)i * Tm + t] *
                                   (double)self->ent[(size_t)i * Tm + t];
                    }
                }
                g.old_logp = NULL; // the weights that sampled: ratio 1, gradient A dlogp
            } else {
                s_rows_f(self->old, self->old_all, b0, n, b->T, Tm);
                g.old_logp = self->old;
            }
            if (b->mu_logp) {
                s_rows_f(self->mu, b->mu_logp, b0, n, b->T, Tm);
                g.mu_logp = self->mu;
            }
            if (b->ref_logp) {
                s_rows_f(self->refl, b->ref_logp, b0, n, b->T, Tm);
                g.ref_logp = self->refl;
            }
            rc = rl_grpo_loss(&g, alg, self->dlogp, &ls);
            if (rc) {
                return rl_errf(err, err_len, rc, "train: bad loss input");
            }
            rc = rl_model_backward(self->model, self->dlogp);
            if (rc) {
                return rl_errf(err, err_len, rc, "train backward: %s",
                               rl_model_errmsg(self->model));
            }
        }
        if (!isfinite(ls.loss)) {
            return rl_errf(err, err_len, RL_EINVAL, "iteration %d: the loss is %s", it + 1,
                           isnan(ls.loss) ? "NaN" : "infinite");
        }
        double gnorm = rl_optim_clip_grad_norm(self->grads, self->n_params, max_grad_norm);
        if (!isfinite(gnorm)) {
            return rl_errf(err, err_len, RL_EINVAL, "iteration %d: the gradient norm is %s",
                           it + 1, isnan(gnorm) ? "NaN" : "infinite");
        }
        rl_optim_step(self->optim, self->params, self->grads, lr);
        stats->loss = ls;
        stats->grad_norm = gnorm;
        if (it == 0) {
            stats->entropy = entropy;
        }
        stats->iterations = it + 1;
    }
    if (old_logp) {
        memcpy(old_logp, self->old_all, bt_all * sizeof(float));
    }
    return 0;
}

// ---- weights and checkpoints ---------------------------------------------------------------

int rl_policy_save(rl_policy_t *self, const char *dir, const char *base_model, char *err,
                   size_t err_len) {
    char path[4200];
    int rc;
    if (self->r->lora.enabled) {
        snprintf(path, sizeof(path), "%s/adapter", dir);
        rc = rl_model_save_adapter(self->model, path, base_model, err, err_len);
    } else {
        snprintf(path, sizeof(path), "%s/model", dir);
        rc = rl_model_save_hf(self->model, path, 0, err, err_len);
    }
    if (rc) {
        return rc;
    }
    snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
    return rl_optim_save(self->optim, path, err, err_len);
}

int rl_policy_load(rl_policy_t *self, const char *dir, uint64_t model_train_step, char *err,
                   size_t err_len) {
    char path[4200], msg[2048];
    int rc;
    if (self->r->lora.enabled) {
        snprintf(path, sizeof(path), "%s/adapter", dir);
        rc = rl_model_load_adapter(self->model, path, msg, sizeof(msg));
        if (rc) {
            return rl_errf(err, err_len, rc, "%s", msg);
        }
    } else {
        snprintf(path, sizeof(path), "%s/model", dir);
        if ((rc = s_load_model(self, path, err, err_len)) != 0) {
            return rc;
        }
    }
    snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
    rc = rl_optim_load(self->optim, path, err, err_len);
    if (rc) {
        return rc;
    }
    rl_model_set_train_step(self->model, model_train_step);
    return 0;
}

int rl_policy_save_final(rl_policy_t *self, const char *dir, const char *base_model, int bf16,
                         char *err, size_t err_len) {
    if (self->r->lora.enabled) {
        return rl_model_save_adapter(self->model, dir, base_model, err, err_len);
    }
    return rl_model_save_hf(self->model, dir, bf16, err, err_len);
}

// rl_grpo — GRPO advantages and the clipped policy loss of REFERENCE.md §1, written so that each
// line can be checked against the formulas in rl_grpo.h. Not the training loop (trainer/
// rl_policy), not a model: it sees sequence rewards, or (B,T) logprob arrays and a mask.
//
// Everything is computed in double from the float inputs (exactly representable), so the loss
// is reproducible to double rounding whatever the caller's split into micro-batches; only the
// gradient handed to rl_model_backward is rounded to float.
#include "rl_grpo.h"

#include "rl_err.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// ---- advantages -------------------------------------------------------------------------------

// A reward that is not a finite number cannot enter a mean: it is "unscorable" (REFERENCE §1).
static bool s_scorable(double r) {
    return isfinite(r);
}

// Mean and Bessel std of the scorable values of r[0..n): two passes, so large rewards with a
// small spread keep their digits. *cnt gets the number of scorable values; *equal is true when
// they are all exactly equal (or fewer than 2), which is the zero-variance test: a computed std
// of equal values need not be exactly 0 (0.1 + 0.1 + 0.1 != 0.3), equality is.
static void s_moments(const double *r, size_t n, size_t *cnt, double *mean, double *std,
                      bool *equal) {
    size_t k = 0;
    double sum = 0.0, first = 0.0;
    bool eq = true;
    for (size_t i = 0; i < n; i++) {
        if (!s_scorable(r[i])) {
            continue;
        }
        if (k == 0) {
            first = r[i];
        } else if (r[i] != first) {
            eq = false;
        }
        sum += r[i];
        k++;
    }
    double m = k ? sum / (double)k : 0.0;
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (s_scorable(r[i])) {
            ss += (r[i] - m) * (r[i] - m);
        }
    }
    *cnt = k;
    *mean = m;
    *equal = eq || k < 2;
    *std = (k >= 2 && !eq) ? sqrt(ss / (double)(k - 1)) : 0.0;
}

int rl_grpo_advantages(const double *rewards, int n_groups, int G, const rl_recipe_algorithm_t *alg,
                       double *adv, rl_grpo_adv_stats_t *stats) {
    if (!rewards || !alg || !adv || n_groups < 1 || G < 2) {
        return RL_EINVAL;
    }
    if ((alg->advantage != RL_RECIPE_ADV_GRPO && alg->advantage != RL_RECIPE_ADV_RLOO) ||
        (alg->scale_rewards != RL_RECIPE_SCALE_GROUP &&
         alg->scale_rewards != RL_RECIPE_SCALE_BATCH &&
         alg->scale_rewards != RL_RECIPE_SCALE_NONE) ||
        !(alg->std_eps >= 0.0)) {
        return RL_EINVAL;
    }
    const size_t N = (size_t)n_groups * (size_t)G;

    // Batch moments: reward_mean, and the divisor of scale_rewards = batch (TRL's
    // rewards.std() over the whole batch; zero-variance groups' rewards included).
    size_t n_all;
    double mean_all, std_all;
    bool equal_all;
    s_moments(rewards, N, &n_all, &mean_all, &std_all, &equal_all);
    if (!isfinite(mean_all) || !isfinite(std_all)) {
        return RL_EINVAL; // finite rewards whose sums overflow (|r| near 1.3e154 and above)
    }

    int zero = 0, std_groups = 0;
    double std_sum = 0.0;
    for (int g = 0; g < n_groups; g++) {
        const double *r = rewards + (size_t)g * (size_t)G;
        double *a = adv + (size_t)g * (size_t)G;
        size_t n;
        double m, s;
        bool equal;
        s_moments(r, (size_t)G, &n, &m, &s, &equal);
        if (!isfinite(m) || !isfinite(s)) {
            return RL_EINVAL;
        }
        if (n >= 2) {
            std_sum += s;
            std_groups++;
        }
        double div = 1.0;
        if (alg->scale_rewards == RL_RECIPE_SCALE_GROUP) {
            div = s + alg->std_eps;
        } else if (alg->scale_rewards == RL_RECIPE_SCALE_BATCH) {
            div = std_all + alg->std_eps;
        }
        // equal: every centred reward is 0 (the group carries no signal). !(div > 0) cannot
        // happen for a group with two distinct rewards (then s > 0 and S > 0) short of
        // underflow; it is guarded so no division by zero can reach adv.
        if (equal || !(div > 0.0)) {
            zero++;
            for (int i = 0; i < G; i++) {
                a[i] = 0.0;
            }
            continue;
        }
        // rloo: r_i - (n m - r_i) / (n - 1) = (r_i - m) * n / (n - 1), without the cancellation
        // of the left form.
        double f = alg->advantage == RL_RECIPE_ADV_RLOO ? (double)n / (double)(n - 1) : 1.0;
        for (int i = 0; i < G; i++) {
            a[i] = s_scorable(r[i]) ? (r[i] - m) * f / div : 0.0;
        }
    }
    if (stats) {
        stats->groups = n_groups;
        stats->zero_std_groups = zero;
        stats->unscorable = (int)(N - n_all);
        stats->reward_mean = mean_all;
        stats->reward_std = std_groups ? std_sum / std_groups : 0.0;
    }
    return 0;
}

double rl_grpo_overlong_penalty(int len, int max_new_tokens, int buffer, double penalty) {
    if (buffer <= 0) {
        return 0.0;
    }
    int l_exp = max_new_tokens - buffer;
    if (len <= l_exp) {
        return 0.0;
    }
    double p = -(double)(len - l_exp) / (double)buffer * penalty;
    return p < -penalty ? -penalty : p;
}

// ---- the policy loss ---------------------------------------------------------------------------

int rl_grpo_check(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, const float *dlogp) {
    if (!b || !alg || !dlogp || !b->logp || !b->mask || (!b->adv && !b->adv_tok) || b->B < 1 ||
        b->T < 1) {
        return RL_EINVAL;
    }
    if (!(alg->epsilon_low >= 0.0 && alg->epsilon_low < 1.0) || !(alg->epsilon_high >= 0.0) ||
        !(alg->beta >= 0.0) || !(alg->dual_clip == 0.0 || alg->dual_clip > 1.0)) {
        return RL_EINVAL;
    }
    if (alg->kl_estimator != RL_RECIPE_KL_K1 && alg->kl_estimator != RL_RECIPE_KL_K2 &&
        alg->kl_estimator != RL_RECIPE_KL_K3) {
        return RL_EINVAL;
    }
    if (alg->loss_agg != RL_RECIPE_AGG_TOKEN_MEAN &&
        alg->loss_agg != RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN &&
        alg->loss_agg != RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM) {
        return RL_EINVAL;
    }
    if (alg->tis != RL_RECIPE_TIS_NONE && alg->tis != RL_RECIPE_TIS_TOKEN &&
        alg->tis != RL_RECIPE_TIS_SEQUENCE) {
        return RL_EINVAL;
    }
    if (alg->tis != RL_RECIPE_TIS_NONE && (!b->mu_logp || !(alg->tis_cap >= 1.0))) {
        return RL_EINVAL;
    }
    if (alg->beta > 0.0 && !b->ref_logp) {
        return RL_EINVAL;
    }
    bool active = false;
    for (size_t i = 0; i < (size_t)b->B * (size_t)b->T; i++) {
        if (b->mask[i] != 0.0f && b->mask[i] != 1.0f) {
            return RL_EINVAL;
        }
        active |= b->mask[i] != 0.0f;
    }
    if (active && !(b->denom > 0.0 && isfinite(b->denom))) {
        return RL_EINVAL;
    }
    return 0;
}

// The KL estimator k(d) of d = logp - ref and dk/dlogp (REFERENCE §1; Schulman's k1/k2/k3).
// k3 = exp(ref - logp) - (ref - logp) - 1 = exp(-d) + d - 1 >= 0, so only its upper clamp can
// bind; torch.clamp passes the gradient on the closed interval, hence <= 10.
double rl_grpo_kl(int estimator, double d, double *dk) {
    if (estimator == RL_RECIPE_KL_K1) {
        *dk = 1.0;
        return d;
    }
    if (estimator == RL_RECIPE_KL_K2) {
        *dk = d;
        return 0.5 * d * d;
    }
    double e = exp(-d);
    double k = e + d - 1.0;
    if (k > 10.0) {
        *dk = 0.0;
        return 10.0;
    }
    if (k < -10.0) { // unreachable for finite d (k3 >= 0); kept so the clamp reads as specified
        *dk = 0.0;
        return -10.0;
    }
    *dk = 1.0 - e;
    return k;
}

rl_grpo_row_t rl_grpo_row(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, int bi,
                          double log_cap) {
    const int T = b->T;
    const size_t row = (size_t)bi * (size_t)T;
    const float *m = b->mask + row;
    double n_b = 0.0, seq_log_w = 0.0;
    for (int t = 0; t < T; t++) {
        if (m[t] != 0.0f) {
            n_b += 1.0;
            if (alg->tis == RL_RECIPE_TIS_SEQUENCE) {
                double old = b->old_logp ? b->old_logp[row + t] : b->logp[row + t];
                seq_log_w += old - (double)b->mu_logp[row + t];
            }
        }
    }
    rl_grpo_row_t r = {n_b, 0.0, 1};
    if (n_b > 0.0) {
        r.scale = alg->loss_agg == RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN ? 1.0 / (n_b * b->denom)
                                                                     : 1.0 / b->denom;
    }
    // NaN sums compare false both ways and keep the row: the NaN then shows in the gap.
    if (alg->tis == RL_RECIPE_TIS_SEQUENCE && (seq_log_w < -log_cap || seq_log_w > log_cap)) {
        r.keep = 0;
    }
    return r;
}

int rl_grpo_loss(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, float *dlogp,
                 rl_grpo_loss_stats_t *stats) {
    int rc = rl_grpo_check(b, alg, dlogp);
    if (rc) {
        return rc;
    }
    const int B = b->B, T = b->T;
    const double lo = 1.0 - alg->epsilon_low, hi = 1.0 + alg->epsilon_high;
    const double c = alg->dual_clip;
    // Sequence TIS compares the log of the sequence weight with +-log(cap): the same interval
    // as exp(sum) in [1/cap, cap], without overflowing exp on long sequences.
    const double log_cap = alg->tis != RL_RECIPE_TIS_NONE ? log(alg->tis_cap) : 0.0;
    rl_grpo_loss_stats_t s = {0};

    for (int bi = 0; bi < B; bi++) {
        const size_t row = (size_t)bi * (size_t)T;
        const float *m = b->mask + row;
        const double A_seq = b->adv_tok ? 0.0 : b->adv[bi];
        const rl_grpo_row_t rw = rl_grpo_row(b, alg, bi, log_cap);
        const double scale = rw.scale;
        const bool keep = rw.keep;
        s.tis_masked += keep ? 0.0 : 1.0;
        double row_loss = 0.0;
        for (int t = 0; t < T; t++) {
            const size_t i = row + t;
            if (m[t] == 0.0f) {
                dlogp[i] = 0.0f;
                continue;
            }
            const double A = b->adv_tok ? (double)b->adv_tok[i] : A_seq;
            const double lp = b->logp[i];
            const double old = b->old_logp ? (double)b->old_logp[i] : lp; // detached
            // ratio and its derivative; torch.clamp passes the gradient on [-20, 20].
            const double x = lp - old;
            const double ratio = exp(x < -20.0 ? -20.0 : x > 20.0 ? 20.0 : x);
            const double dratio = (x >= -20.0 && x <= 20.0) ? ratio : 0.0;

            // l_pg = -min(ratio A, clip(ratio) A) = max(l1, l2). l2 > l1 means A (ratio -
            // clip(ratio)) > 0: ratio is outside the clip range, on the side where the bound
            // limits the improvement, and clip() is flat there: gradient 0. Otherwise
            // (l1 >= l2, ties included, which happen only inside the range where both
            // branches have the same gradient) the gradient is that of -ratio A.
            const double clipped = ratio < lo ? lo : ratio > hi ? hi : ratio;
            const double l1 = -A * ratio, l2 = -A * clipped;
            double pg, dpg;
            if (l2 > l1) {
                pg = l2;
                dpg = 0.0;
            } else {
                pg = l1;
                dpg = -A * dratio;
            }
            s.clip_low += (A < 0.0 && ratio < lo);
            s.clip_high += (A > 0.0 && ratio > hi);
            // Dual clip (verl's clip_ratio_c): for A < 0 the loss grows without bound in the
            // ratio; cap it at -c A (a constant, so gradient 0 where the cap binds).
            if (c > 0.0 && A < 0.0 && pg > -c * A) {
                pg = -c * A;
                dpg = 0.0;
                s.dual_clip += 1.0;
            }

            rl_grpo_token_end(b, alg, i, lp, old, ratio, keep, scale, pg, dpg, &row_loss, dlogp,
                              &s);
        }
        s.loss += row_loss * scale;
    }

    if (stats) {
        rl_grpo_stats_add(stats, &s);
    }
    return 0;
}

double rl_grpo_tis_weight(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, size_t i,
                          double old, int keep) {
    if (alg->tis == RL_RECIPE_TIS_TOKEN) {
        double e = exp(old - (double)b->mu_logp[i]);
        return e > alg->tis_cap ? alg->tis_cap : e; // NaN stays NaN
    }
    if (alg->tis == RL_RECIPE_TIS_SEQUENCE) {
        return keep ? 1.0 : 0.0;
    }
    return 1.0;
}

double rl_grpo_token_kl(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, size_t i,
                        double lp, double old, rl_grpo_loss_stats_t *s, double *dk) {
    if (b->mu_logp) {
        s->logprob_gap += fabs(old - (double)b->mu_logp[i]);
    }
    double k = 0.0;
    *dk = 0.0;
    if (b->ref_logp) {
        k = rl_grpo_kl(alg->kl_estimator, lp - (double)b->ref_logp[i], dk);
        s->kl += k;
    }
    return k;
}

void rl_grpo_token_end(const rl_grpo_batch_t *b, const rl_recipe_algorithm_t *alg, size_t i,
                       double lp, double old, double ratio, int keep, double scale, double pg,
                       double dpg, double *row_loss, float *dlogp, rl_grpo_loss_stats_t *s) {
    const double w = rl_grpo_tis_weight(b, alg, i, old, keep);
    double dk;
    const double k = rl_grpo_token_kl(b, alg, i, lp, old, s, &dk);
    double l = 0.0, dl = 0.0;
    if (keep) {
        l = w * pg;
        dl = w * dpg;
        if (alg->beta > 0.0) { // beta 0: no term at all, even where k is not finite
            l += alg->beta * k;
            dl += alg->beta * dk;
        }
    }
    *row_loss += l;
    dlogp[i] = (float)(dl * scale);
    const double x = lp - old;
    s->tokens += 1.0;
    s->ratio += ratio;
    s->approx_kl += 0.5 * x * x;
    s->tis_weight += w;
}

void rl_grpo_stats_add(rl_grpo_loss_stats_t *to, const rl_grpo_loss_stats_t *s) {
    to->loss += s->loss;
    to->tokens += s->tokens;
    to->kl += s->kl;
    to->clip_low += s->clip_low;
    to->clip_high += s->clip_high;
    to->dual_clip += s->dual_clip;
    to->ratio += s->ratio;
    to->tis_weight += s->tis_weight;
    to->tis_masked += s->tis_masked;
    to->logprob_gap += s->logprob_gap;
    to->approx_kl += s->approx_kl;
}

// ---- the family's adapter ---------------------------------------------------------------------
// The first pass's forward runs with the weights that sampled the batch: its logprobs are
// logπ_old, kept for the later passes and returned. Scratch: the batch's logπ_old (B,T) and
// the micro-batch's rows of the per-token inputs, allocated once per update.

const rl_loss_stat_t rl_grpo_stats[] = {
    {"loss", RL_LOSS_SHARE, "loss", NULL},
    {"grad_norm", RL_LOSS_GLOBAL, "grad_norm", NULL},
    {"tokens", RL_LOSS_SUM, NULL, NULL},
    {"kl", RL_LOSS_SUM, "kl", "tokens"},
    {"entropy", RL_LOSS_SUM, "entropy", "tokens"},
    {"clip_low", RL_LOSS_SUM, "clip_ratio/low_mean", "tokens"},
    {"clip_high", RL_LOSS_SUM, "clip_ratio/high_mean", "tokens"},
    {"clip_region", RL_LOSS_SUM, "clip_ratio/region_mean", "tokens"},
    {"dual_clip", RL_LOSS_SUM, "clip_ratio/dual_mean", "tokens"},
    {"ratio", RL_LOSS_SUM, "ratio/mean", "tokens"},
    {"tis_weight", RL_LOSS_SUM, "tis/weight_mean", "tokens"},
    {"tis_masked", RL_LOSS_SUM, "tis/masked_sequences", NULL},
    {"logprob_gap", RL_LOSS_SUM, NULL, NULL},
    {"approx_kl", RL_LOSS_SUM, NULL, NULL},
    {0},
};

rl_grpo_math_fn rl_grpo_math(const rl_loss_t *L) {
    // the family's members are the ones trained by its adapter (PPO's through rl_ppo_train)
    return L && L->impl && (L->train == rl_grpo_train || L->policy_loss)
               ? ((const rl_grpo_family_t *)L->impl)->loss
               : NULL;
}

typedef struct {
    rl_grpo_math_fn math;
    const rl_loss_batch_t *b;
    const rl_recipe_algorithm_t *alg;
    float *old_all;            // (B,T) logπ_old of the batch (the first pass's logprobs)
    float *old, *mu, *ref, *tadv; // (mb,T) the micro-batch's rows
    rl_grpo_loss_stats_t ls;   // of the pass in progress
    double entropy;            // first pass: sum over active tokens
} s_family_ctx_t;

// Copies rows [b0, b0+n) of a (B,T) array into a dense (n,Tm) one.
static void s_rows_f(float *dst, const float *src, int b0, int n, int T, int Tm) {
    for (int i = 0; i < n; i++) {
        memcpy(dst + (size_t)i * Tm, src + (size_t)(b0 + i) * T, (size_t)Tm * sizeof(float));
    }
}

static void s_add_entropy(s_family_ctx_t *c, const rl_policy_micro_t *m) {
    for (int i = 0; i < m->n; i++) {
        for (int t = 0; t < m->T; t++) {
            c->entropy += (double)m->mask[(size_t)i * m->T + t] *
                          (double)m->entropy[(size_t)i * m->T + t];
        }
    }
}

static int s_family_loss(void *ctx, const rl_policy_micro_t *m, float *dlogp, double *loss) {
    s_family_ctx_t *c = ctx;
    const rl_loss_batch_t *b = c->b;
    int n = m->n, Tm = m->T, b0 = m->b0;
    if (m->b0 == 0) {
        memset(&c->ls, 0, sizeof(c->ls)); // a new pass: its own statistics
    }
    rl_grpo_batch_t g = {0};
    g.B = n;
    g.T = Tm;
    g.logp = m->logp;
    g.mask = m->mask;
    g.adv = b->adv ? b->adv + b0 : NULL;
    g.denom = b->denom;
    if (b->token_adv) {
        s_rows_f(c->tadv, b->token_adv, b0, n, b->T, Tm);
        g.adv_tok = c->tadv;
    }
    if (b->old_logp) {
        // logπ_old given (PPO: the rollout policy's, for every pass and mini-batch)
        s_rows_f(c->old, b->old_logp, b0, n, b->T, Tm);
        g.old_logp = c->old;
        if (m->iteration == 0) {
            s_add_entropy(c, m);
        }
    } else if (m->iteration == 0) {
        for (int i = 0; i < n; i++) {
            float *o = c->old_all + (size_t)(b0 + i) * b->T;
            memcpy(o, m->logp + (size_t)i * Tm, (size_t)Tm * sizeof(float));
            memset(o + Tm, 0, (size_t)(b->T - Tm) * sizeof(float));
        }
        s_add_entropy(c, m);
        g.old_logp = NULL; // the weights that sampled: ratio 1, gradient A dlogp
    } else {
        s_rows_f(c->old, c->old_all, b0, n, b->T, Tm);
        g.old_logp = c->old;
    }
    if (b->mu_logp) {
        s_rows_f(c->mu, b->mu_logp, b0, n, b->T, Tm);
        g.mu_logp = c->mu;
    }
    if (b->ref_logp) {
        s_rows_f(c->ref, b->ref_logp, b0, n, b->T, Tm);
        g.ref_logp = c->ref;
    }
    double before = c->ls.loss;
    int rc = c->math(&g, c->alg, dlogp, &c->ls);
    *loss = c->ls.loss - before;
    return rc;
}

int rl_grpo_train_alg(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_algorithm_t *alg,
                      double max_grad_norm, const rl_loss_batch_t *b, rl_loss_out_t *out,
                      char *err, size_t err_len) {
    memset(&out->stats, 0, sizeof out->stats);
    out->iterations = 0;
    s_family_ctx_t c;
    memset(&c, 0, sizeof c);
    c.math = self->impl ? ((const rl_grpo_family_t *)self->impl)->loss : NULL;
    c.b = b;
    c.alg = alg;
    if (!c.math) {
        return rl_errf(err, err_len, RL_EINVAL, "train: %s is not a policy-gradient loss",
                       self->name);
    }
    size_t bt = (size_t)(b->B > 0 ? b->B : 0) * (size_t)(b->T > 0 ? b->T : 0);
    size_t mbt = (size_t)(b->micro_batch > 0 ? b->micro_batch : 1) * (size_t)(b->T > 0 ? b->T : 0);
    mbt = mbt < bt ? mbt : bt;
    float *buf = malloc((bt + 4 * mbt + 1) * sizeof(float));
    if (!buf) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c.old_all = buf;
    c.old = buf + bt;
    c.mu = c.old + mbt;
    c.ref = c.mu + mbt;
    c.tadv = c.ref + mbt;
    rl_policy_rows_t rows = {b->B, b->T, b->tokens, b->lengths, b->mask, 1};
    rl_policy_step_opts_t o = {(float)b->temperature, b->micro_batch, b->iterations, b->lr,
                               max_grad_norm, 1, 0, 0};
    rl_policy_step_stats_t st;
    int rc = rl_policy_step(model, &rows, &o, s_family_loss, &c, &st, err, err_len);
    if (!rc) {
        rl_loss_stats_t *s = &out->stats;
        rl_loss_stats_put(s, "loss", c.ls.loss);
        rl_loss_stats_put(s, "grad_norm", st.grad_norm);
        rl_loss_stats_put(s, "tokens", c.ls.tokens);
        rl_loss_stats_put(s, "kl", c.ls.kl);
        rl_loss_stats_put(s, "entropy", c.entropy);
        rl_loss_stats_put(s, "clip_low", c.ls.clip_low);
        rl_loss_stats_put(s, "clip_high", c.ls.clip_high);
        rl_loss_stats_put(s, "clip_region", c.ls.clip_low + c.ls.clip_high);
        if (alg->dual_clip > 0) {
            rl_loss_stats_put(s, "dual_clip", c.ls.dual_clip);
        }
        rl_loss_stats_put(s, "ratio", c.ls.ratio);
        if (alg->tis != RL_RECIPE_TIS_NONE) {
            rl_loss_stats_put(s, "tis_weight", c.ls.tis_weight);
            rl_loss_stats_put(s, "tis_masked", c.ls.tis_masked);
        }
        rl_loss_stats_put(s, "logprob_gap", c.ls.logprob_gap);
        rl_loss_stats_put(s, "approx_kl", c.ls.approx_kl);
        out->iterations = st.iterations;
        if (out->old_logp) {
            memcpy(out->old_logp, b->old_logp ? b->old_logp : c.old_all, bt * sizeof(float));
        }
    }
    free(buf);
    return rc;
}

int rl_grpo_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                  const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len) {
    return rl_grpo_train_alg(self, model, &r->algorithm, r->optim.max_grad_norm, b, out, err,
                             err_len);
}

static const rl_grpo_family_t s_grpo_family = {rl_grpo_loss};

const rl_loss_t rl_grpo_def = {
    .name = "grpo",
    .rows = 1,
    .needs = RL_LOSS_NEEDS_ADV,
    .model = RL_LOSS_POLICY,
    .policy_loss = 1,
    .train = rl_grpo_train,
    .impl = &s_grpo_family,
    .stats = rl_grpo_stats,
    .doc = "GRPO's clipped policy-gradient loss (per-token ratio; rl_grpo_loss)",
};

// ---- the recipe's keys of the clipped policy loss (GRPO's family and PPO's actor) -----------

static const char *const s_aggs[] = {[RL_RECIPE_AGG_TOKEN_MEAN] = "token_mean",
                                     [RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN] = "seq_mean_token_mean",
                                     [RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM] =
                                         "seq_mean_token_sum_norm",
                                     NULL};
static const char *const s_tis[] = {[RL_RECIPE_TIS_NONE] = "none",
                                    [RL_RECIPE_TIS_TOKEN] = "token",
                                    [RL_RECIPE_TIS_SEQUENCE] = "sequence",
                                    NULL};

// clang-format off
const rl_recipe_key_t rl_grpo_clip_keys[] = {
    {.section = "algorithm", .key = "epsilon_low", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.epsilon_low), RL_RECIPE_DEF("0.2"),
     .flags = RL_RECIPE_K_MAX_EXCL, .max = 1, .doc = "lower clip: ratio >= 1 - epsilon_low"},
    {.section = "algorithm", .key = "epsilon_high", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.epsilon_high), RL_RECIPE_DEF("0.2"), .max = 10,
     .doc = "upper clip: ratio <= 1 + epsilon_high (DAPO clip-higher 0.28)"},
    {.section = "algorithm", .key = "dual_clip", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.dual_clip), RL_RECIPE_DEF("0"), .max = 100,
     .doc = "dual-clip constant c for negative advantages; 0 = off, else > 1"},
    {0},
};
// clang-format on

// clang-format off
const rl_recipe_key_t rl_grpo_token_keys[] = {
    {.section = "algorithm", .key = "loss_agg", .type = RL_RECIPE_T_ENUM,
     .offset = RL_RECIPE_AT(algorithm.loss_agg), RL_RECIPE_DEF("token_mean"), .choices = s_aggs,
     .doc = "how token losses are averaged (REFERENCE §1)"},
    {.section = "algorithm", .key = "tis", .type = RL_RECIPE_T_ENUM,
     .offset = RL_RECIPE_AT(algorithm.tis), RL_RECIPE_DEF("none"), .choices = s_tis,
     .doc = "sampler-mismatch correction: truncated IS per token, or sequence masking"},
    {.section = "algorithm", .key = "tis_cap", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.tis_cap), RL_RECIPE_DEF("2.0"), .min = 1, .max = 1000,
     .doc = "TIS bound C (token: w <= C; sequence: 1/C <= w <= C)"},
    {0},
};
// clang-format on

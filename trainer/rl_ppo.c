// rl_ppo — per-token rewards, GAE, whitening, the clipped value loss, the explained variance and
// the adaptive KL controller of REFERENCE.md §1, written so that each line can be checked
// against the formulas in rl_ppo.h. Not the policy loss (rl_grpo_loss with per-token
// advantages), not the PPO loop, not a model: it sees (B,T) arrays and a mask.
//
// Everything is computed in double from float inputs (exactly representable); only dvalues,
// handed to the critic's backward, is rounded to float.
#include "rl_ppo.h"

#include "rl_config.h"
#include "rl_err.h"
#include "rl_grpo.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// ---- shared checks -----------------------------------------------------------------------------

// Every mask value is exactly 0 or 1; *active (may be NULL) gets the number of 1s.
static bool s_mask_ok(const float *mask, size_t n, size_t *active) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (mask[i] != 0.0f && mask[i] != 1.0f) {
            return false;
        }
        k += mask[i] != 0.0f;
    }
    if (active) {
        *active = k;
    }
    return true;
}

static bool s_unit(double x) {
    return x >= 0.0 && x <= 1.0; // false for NaN
}

// ---- rewards -----------------------------------------------------------------------------------

int rl_ppo_token_rewards(const float *mask, const float *old_logp, const float *ref_logp,
                         const double *score, double beta, int B, int T, double *rewards,
                         double *kl_row, int *unscorable) {
    if (!mask || !score || !rewards || B < 1 || T < 1 || !(beta >= 0.0 && isfinite(beta)) ||
        (beta > 0.0 && !ref_logp) || (ref_logp && !old_logp)) {
        return RL_EINVAL;
    }
    if (!s_mask_ok(mask, (size_t)B * (size_t)T, NULL)) {
        return RL_EINVAL;
    }
    int bad = 0;
    for (int b = 0; b < B; b++) {
        const size_t row = (size_t)b * (size_t)T;
        const float *m = mask + row;
        double *r = rewards + row;
        double kl = 0.0;
        int last = -1;
        for (int t = 0; t < T; t++) {
            r[t] = 0.0;
            if (m[t] == 0.0f) {
                continue;
            }
            last = t;
            if (ref_logp) {
                // k1 of the sampled token under the rollout policy: the single-sample estimate
                // of KL(pi_old || pi_ref) that Ziegler et al. put into the reward
                const double k1 = (double)old_logp[row + t] - (double)ref_logp[row + t];
                kl += k1;
                if (beta > 0.0) { // beta 0: no term at all, even where k1 is not finite
                    r[t] = -beta * k1;
                }
            }
        }
        // The score is the reward of the whole sequence: the return of the terminal action.
        const bool ok = isfinite(score[b]);
        bad += !ok;
        if (last >= 0 && ok) {
            r[last] += score[b];
        }
        if (kl_row) {
            kl_row[b] = kl;
        }
    }
    if (unscorable) {
        *unscorable = bad;
    }
    return 0;
}

// ---- GAE ---------------------------------------------------------------------------------------

int rl_ppo_gae(const float *mask, const double *rewards, const float *values, double gamma,
               double lam, int B, int T, double *adv, double *ret) {
    if (!mask || !rewards || !values || !adv || !ret || B < 1 || T < 1 || !s_unit(gamma) ||
        !s_unit(lam)) {
        return RL_EINVAL;
    }
    if (!s_mask_ok(mask, (size_t)B * (size_t)T, NULL)) {
        return RL_EINVAL;
    }
    const double gl = gamma * lam;
    for (int b = 0; b < B; b++) {
        const size_t row = (size_t)b * (size_t)T;
        // Backwards over the row; next_v and next_a are V and A of the next ACTIVE token (0 past
        // the last one: the episode ends there, V_{T+1} = 0). A masked position leaves them as
        // they are, so the recursion runs over the active tokens as one contiguous sequence (the
        // rule of verl's compute_gae_advantage_return, verl/trainer/ppo/core_algos.py, which
        // carries nextvalues and lastgaelam across tokens whose response_mask is 0).
        double next_v = 0.0, next_a = 0.0;
        for (int t = T - 1; t >= 0; t--) {
            const size_t i = row + (size_t)t;
            if (mask[i] == 0.0f) {
                adv[i] = 0.0;
                ret[i] = 0.0;
                continue;
            }
            const double v = values[i];
            const double delta = rewards[i] + gamma * next_v - v;
            const double a = delta + gl * next_a;
            adv[i] = a;
            ret[i] = a + v;
            next_v = v;
            next_a = a;
        }
    }
    return 0;
}

// ---- whitening and the explained variance -------------------------------------------------------

// Mean and sum of squared deviations of x over the active tokens (two passes, so values with a
// large mean and a small spread keep their digits). *equal is true when the active values are
// all exactly equal (or fewer than 2): then the true mean is that value and ss is exactly 0,
// while the computed mean of equal values need not be (0.1 + 0.1 + 0.1 != 0.3).
static void s_masked_moments(const float *mask, const double *x, size_t N, size_t *cnt,
                             double *mean, double *ss, bool *equal) {
    size_t n = 0;
    double sum = 0.0, first = 0.0;
    bool eq = true;
    for (size_t i = 0; i < N; i++) {
        if (mask[i] == 0.0f) {
            continue;
        }
        if (n == 0) {
            first = x[i];
        } else if (x[i] != first) {
            eq = false;
        }
        sum += x[i];
        n++;
    }
    double m = n ? sum / (double)n : 0.0;
    double s = 0.0;
    if (eq) {
        m = first; // 0 when n = 0
    } else {
        for (size_t i = 0; i < N; i++) {
            if (mask[i] != 0.0f) {
                s += (x[i] - m) * (x[i] - m);
            }
        }
    }
    *cnt = n;
    *mean = m;
    *ss = s;
    *equal = eq || n < 2;
}

int rl_ppo_whiten(const float *mask, const double *x, int B, int T, double *out, double *mean,
                  double *std) {
    if (!mask || !x || !out || B < 1 || T < 1) {
        return RL_EINVAL;
    }
    const size_t N = (size_t)B * (size_t)T;
    if (!s_mask_ok(mask, N, NULL)) {
        return RL_EINVAL;
    }
    size_t n;
    double m, ss;
    bool equal;
    s_masked_moments(mask, x, N, &n, &m, &ss, &equal);
    // Bessel's correction: TRL's masked_whiten (trl/core.py) and verl's (verl/utils/
    // torch_functional.py) both take masked_var with unbiased=True, which scales the masked mean
    // of squares by mask_sum / (mask_sum - 1); TRL divides by zero for a sum of 1, verl raises
    // ValueError for sums 0 and 1. Here n < 2 (no spread to speak of) and all-equal batches have
    // var 0, and x - m is exactly 0 on every active token.
    const double var = (n >= 2 && !equal) ? ss / (double)(n - 1) : 0.0;
    const double inv = 1.0 / sqrt(var + RL_PPO_WHITEN_EPS);
    for (size_t i = 0; i < N; i++) {
        out[i] = mask[i] != 0.0f ? (x[i] - m) * inv : 0.0; // out may be x: read before write
    }
    if (mean) {
        *mean = m;
    }
    if (std) {
        *std = sqrt(var);
    }
    return 0;
}

int rl_ppo_explained_variance(const float *mask, const double *ret, const float *values, int B,
                              int T, double *ev) {
    if (!mask || !ret || !values || !ev || B < 1 || T < 1) {
        return RL_EINVAL;
    }
    const size_t N = (size_t)B * (size_t)T;
    if (!s_mask_ok(mask, N, NULL)) {
        return RL_EINVAL;
    }
    size_t n;
    double m, ss;
    bool equal;
    s_masked_moments(mask, ret, N, &n, &m, &ss, &equal);
    if (equal) {
        *ev = NAN; // Var(R) = 0: the ratio is undefined
        return 0;
    }
    // Var(R - V) * n with the residual's own mean; the common divisor (n or n - 1) cancels.
    double rsum = 0.0;
    for (size_t i = 0; i < N; i++) {
        if (mask[i] != 0.0f) {
            rsum += ret[i] - (double)values[i];
        }
    }
    const double rm = rsum / (double)n;
    double rss = 0.0;
    for (size_t i = 0; i < N; i++) {
        if (mask[i] != 0.0f) {
            const double d = ret[i] - (double)values[i] - rm;
            rss += d * d;
        }
    }
    *ev = 1.0 - rss / ss;
    return 0;
}

// ---- the value loss ----------------------------------------------------------------------------

int rl_ppo_value_loss(const rl_ppo_value_batch_t *b, double eps_v, int loss_agg, float *dvalues,
                      rl_ppo_value_stats_t *stats) {
    if (!b || !dvalues || !b->values || !b->returns || !b->mask || b->B < 1 || b->T < 1 ||
        !(eps_v >= 0.0) || (eps_v > 0.0 && !b->old_values)) {
        return RL_EINVAL;
    }
    if (loss_agg != RL_RECIPE_AGG_TOKEN_MEAN && loss_agg != RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN &&
        loss_agg != RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM) {
        return RL_EINVAL;
    }
    const int B = b->B, T = b->T;
    size_t active;
    if (!s_mask_ok(b->mask, (size_t)B * (size_t)T, &active)) {
        return RL_EINVAL;
    }
    if (active && !(b->denom > 0.0 && isfinite(b->denom))) {
        return RL_EINVAL;
    }
    const bool clip = eps_v > 0.0;
    rl_ppo_value_stats_t s = {0};

    for (int bi = 0; bi < B; bi++) {
        const size_t row = (size_t)bi * (size_t)T;
        const float *m = b->mask + row;
        double n_b = 0.0;
        for (int t = 0; t < T; t++) {
            n_b += m[t];
        }
        // Every token's loss of this row is multiplied by `scale` (the aggregation).
        double scale = 0.0;
        if (n_b > 0.0) {
            scale = loss_agg == RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN ? 1.0 / (n_b * b->denom)
                                                                  : 1.0 / b->denom;
        }
        double row_loss = 0.0;
        for (int t = 0; t < T; t++) {
            const size_t i = row + (size_t)t;
            if (m[t] == 0.0f) {
                dvalues[i] = 0.0f;
                continue;
            }
            const double v = b->values[i], r = b->returns[i];
            const double e1 = v - r;
            const double l1 = e1 * e1;
            double l = l1, dl = e1; // d(1/2 e1^2)/dV = e1
            if (clip) {
                // The critic may not move its prediction more than eps_v from the rollout value
                // and gain from it: where the clipped prediction is further from R, the max
                // takes that branch, which is flat in V.
                const double vo = b->old_values[i];
                const double lo = vo - eps_v, hi = vo + eps_v;
                const double vc = v < lo ? lo : v > hi ? hi : v;
                const double e2 = vc - r;
                const double l2 = e2 * e2;
                if (l2 > l1) {
                    l = l2;
                    dl = 0.0;
                    s.clipped += 1.0;
                }
            }
            row_loss += 0.5 * l;
            dvalues[i] = (float)(dl * scale);
            s.tokens += 1.0;
            s.sq_err += l1;
            s.value += v;
            s.ret += r;
        }
        s.loss += row_loss * scale;
    }

    if (stats) {
        stats->loss += s.loss;
        stats->tokens += s.tokens;
        stats->clipped += s.clipped;
        stats->sq_err += s.sq_err;
        stats->value += s.value;
        stats->ret += s.ret;
    }
    return 0;
}

// ---- the adaptive KL controller ----------------------------------------------------------------

int rl_ppo_kl_coef_update(double *beta, double kl, double target, int n_steps, double horizon) {
    if (!beta || !(*beta >= 0.0 && isfinite(*beta)) || !isfinite(kl) ||
        !(target >= 0.0 && isfinite(target)) || !(horizon > 0.0 && isfinite(horizon)) ||
        n_steps < 0) {
        return RL_EINVAL;
    }
    if (target == 0.0) { // the fixed controller
        return 0;
    }
    // A proportional controller on log(beta): KL above target raises beta, below lowers it, by
    // at most 20% per horizon's worth of sequences.
    double e = kl / target - 1.0;
    e = e < -0.2 ? -0.2 : e > 0.2 ? 0.2 : e;
    const double f = 1.0 + e * (double)n_steps / horizon;
    *beta = f > 0.0 ? *beta * f : 0.0;
    return 0;
}

// ---- the losses' adapters ------------------------------------------------------------------------

int rl_ppo_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                 const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len) {
    rl_recipe_algorithm_t alg = r->algorithm;
    alg.beta = 0;
    alg.kl_estimator = RL_RECIPE_KL_K1;
    return rl_grpo_train_alg(self, model, &alg, r->optim.max_grad_norm, b, out, err, err_len);
}

// PPO's metrics of the actor: as GRPO's, but its KL is measured at rollout (the controller's
// `kl`), and approx_kl tells how far the update moved from the rollout policy.
static const rl_loss_stat_t s_ppo_stats[] = {
    {"loss", RL_LOSS_SHARE, "loss", NULL},
    {"grad_norm", RL_LOSS_GLOBAL, "grad_norm", NULL},
    {"tokens", RL_LOSS_SUM, NULL, NULL},
    {"entropy", RL_LOSS_SUM, "entropy", "tokens"},
    {"approx_kl", RL_LOSS_SUM, "approx_kl", "tokens"},
    {"clip_low", RL_LOSS_SUM, "clip_ratio/low_mean", "tokens"},
    {"clip_high", RL_LOSS_SUM, "clip_ratio/high_mean", "tokens"},
    {"clip_region", RL_LOSS_SUM, "clip_ratio/region_mean", "tokens"},
    {"dual_clip", RL_LOSS_SUM, "clip_ratio/dual_mean", "tokens"},
    {"ratio", RL_LOSS_SUM, "ratio/mean", "tokens"},
    {"tis_weight", RL_LOSS_SUM, "tis/weight_mean", "tokens"},
    {"tis_masked", RL_LOSS_SUM, "tis/masked_sequences", NULL},
    {"kl", RL_LOSS_SUM, NULL, NULL},
    {"logprob_gap", RL_LOSS_SUM, NULL, NULL},
    {0},
};

static const rl_grpo_family_t s_ppo_family = {rl_grpo_loss};

const rl_loss_t rl_ppo_def = {
    .name = "ppo",
    .rows = 1,
    .needs = RL_LOSS_NEEDS_TOKEN_ADV | RL_LOSS_NEEDS_OLD,
    .model = RL_LOSS_POLICY,
    .train = rl_ppo_train,
    .impl = &s_ppo_family,
    .stats = s_ppo_stats,
    .doc = "PPO's clipped policy loss on GAE advantages, without a KL term (it is in the rewards)",
};

typedef struct {
    const rl_loss_batch_t *b;
    double value_clip;
    int loss_agg;
    float *old, *ret;         // (mb,T) the micro-batch's rows
    rl_ppo_value_stats_t vs;  // of the pass in progress
} s_value_ctx_t;

// Copies rows [b0, b0+n) of a (B,T) array into a dense (n,Tm) one.
static void s_rows_f(float *dst, const float *src, int b0, int n, int T, int Tm) {
    for (int i = 0; i < n; i++) {
        memcpy(dst + (size_t)i * Tm, src + (size_t)(b0 + i) * T, (size_t)Tm * sizeof(float));
    }
}

static int s_value_loss(void *ctx, const rl_policy_micro_t *m, float *dvalues, double *loss) {
    s_value_ctx_t *c = ctx;
    int n = m->n, Tm = m->T, T = c->b->T;
    if (m->b0 == 0) {
        memset(&c->vs, 0, sizeof(c->vs)); // a new pass: its own statistics
    }
    s_rows_f(c->old, c->b->values, m->b0, n, T, Tm);
    s_rows_f(c->ret, c->b->returns, m->b0, n, T, Tm);
    rl_ppo_value_batch_t vb = {n, Tm, m->values, c->old, c->ret, m->mask, c->b->denom};
    double before = c->vs.loss;
    int rc = rl_ppo_value_loss(&vb, c->value_clip, c->loss_agg, dvalues, &c->vs);
    *loss = c->vs.loss - before;
    return rc;
}

int rl_ppo_value_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                       const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len) {
    (void)self;
    memset(&out->stats, 0, sizeof out->stats);
    out->iterations = 0;
    if (!rl_policy_has_head(model)) {
        return rl_errf(err, err_len, RL_EINVAL, "train: the value loss needs a critic");
    }
    size_t bt = (size_t)(b->B > 0 ? b->B : 0) * (size_t)(b->T > 0 ? b->T : 0);
    size_t mbt = (size_t)(b->micro_batch > 0 ? b->micro_batch : 1) * (size_t)(b->T > 0 ? b->T : 0);
    mbt = mbt < bt ? mbt : bt;
    s_value_ctx_t c;
    memset(&c, 0, sizeof c);
    c.b = b;
    c.value_clip = r->algorithm.value_clip;
    c.loss_agg = r->algorithm.loss_agg;
    c.old = malloc((2 * mbt + 1) * sizeof(float));
    if (!c.old) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c.ret = c.old + mbt;
    rl_policy_rows_t rows = {b->B, b->T, b->tokens, b->lengths, b->mask, 1};
    rl_policy_step_opts_t o = {1.0f, b->micro_batch, b->iterations, b->lr,
                               r->optim.max_grad_norm, 0, b->step, 0};
    rl_policy_step_stats_t st;
    int rc = rl_policy_step(model, &rows, &o, s_value_loss, &c, &st, err, err_len);
    free(c.old);
    if (!rc) {
        rl_loss_stats_t *s = &out->stats;
        rl_loss_stats_put(s, "loss", c.vs.loss);
        rl_loss_stats_put(s, "grad_norm", st.grad_norm);
        rl_loss_stats_put(s, "tokens", c.vs.tokens);
        rl_loss_stats_put(s, "clipped", c.vs.clipped);
        rl_loss_stats_put(s, "sq_err", c.vs.sq_err);
        rl_loss_stats_put(s, "value_sum", c.vs.value);
        rl_loss_stats_put(s, "return_sum", c.vs.ret);
        out->iterations = st.iterations;
        if (out->old_logp) {
            memset(out->old_logp, 0, bt * sizeof(float));
        }
    }
    return rc;
}

// The critic's metrics: PPO logs them beside the actor's, under their own names.
static const rl_loss_stat_t s_value_stats[] = {
    {"loss", RL_LOSS_SHARE, "value_loss", NULL},
    {"grad_norm", RL_LOSS_GLOBAL, "critic/grad_norm", NULL},
    {"tokens", RL_LOSS_SUM, NULL, NULL},
    {"clipped", RL_LOSS_SUM, "value_clip_fraction", "tokens"},
    {"sq_err", RL_LOSS_SUM, NULL, NULL},
    {"value_sum", RL_LOSS_SUM, NULL, NULL},
    {"return_sum", RL_LOSS_SUM, NULL, NULL},
    {0},
};

const rl_loss_t rl_ppo_value_def = {
    .name = "value",
    .rows = 1,
    .needs = RL_LOSS_NEEDS_VALUES,
    .model = RL_LOSS_CRITIC,
    .train = rl_ppo_value_train,
    .stats = s_value_stats,
    .doc = "PPO's clipped value loss of the critic against the returns",
};

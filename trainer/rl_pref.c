// rl_pref — the DPO losses (sigmoid / cDPO, hinge, IPO, RPO's NLL term) and the reward model's
// Bradley-Terry loss, written so that each line can be checked against the formulas in
// rl_pref.h. Not a trainer: it sees per-pair sums of log-probabilities (or per-pair scores) and
// returns the loss share and the per-pair gradients; the caller runs the models and broadcasts.
//
// Every function works in two passes over the pairs: the first validates the inputs and
// computes the loss (so that a non-finite input or an overflowing loss is refused with nothing
// written), the second writes the gradients and the statistics. Both passes call the same
// per-pair helper, so they cannot disagree.
#include "rl_pref.h"

#include "rl_err.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// ---- stable pieces -----------------------------------------------------------------------------

// softplus(x) = log(1 + e^x) without overflow for large x or loss of digits for very negative x;
// -log sigma(x) = softplus(-x), the form REFERENCE.md asks for (and torch's logsigmoid uses).
static double s_softplus(double x) {
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

// sigma(x) = 1 / (1 + e^-x), with exp only ever of a non-positive number.
static double s_sigmoid(double x) {
    if (x >= 0.0) {
        return 1.0 / (1.0 + exp(-x));
    }
    const double e = exp(x);
    return e / (1.0 + e);
}

static bool s_pos(double x) {
    return x > 0.0 && isfinite(x); // false for NaN
}

// ---- DPO ---------------------------------------------------------------------------------------

// One pair's numbers: the loss l, dl/dh, the chain factors c_w = dh/ds_w and c_l = -dh/ds_l,
// and the implicit rewards and (normalised for IPO) log-probabilities for the statistics.
typedef struct {
    double l, dldh, c_w, c_l;
    double rew_w, rew_l, lp_w, lp_l;
} s_dpo_pair_t;

static void s_dpo_pair(const rl_pref_batch_t *b, const rl_pref_dpo_t *cfg, int i, s_dpo_pair_t *p) {
    const double beta = cfg->beta;
    double c_w = 1.0, c_l = 1.0;
    if (cfg->loss_type == RL_PREF_IPO) {
        // TRL v0.28.0 divides every summed logp (policy and reference alike) by its completion's
        // token count (`all_logps / loss_mask.sum(-1)` in concatenated_forward) when "ipo" is in
        // loss_type; the loss, the rewards and the logps/* metrics then all see per-token means.
        c_w = 1.0 / (double)b->n_w[i];
        c_l = 1.0 / (double)b->n_l[i];
    }
    const double a_w = (b->s_w[i] - b->r_w[i]) * c_w;
    const double a_l = (b->s_l[i] - b->r_l[i]) * c_l;
    const double h = a_w - a_l;
    const double z = beta * h;
    double l, dldh;
    switch (cfg->loss_type) {
    case RL_PREF_SIGMOID: {
        // -(1 - eps) log sigma(z) - eps log sigma(-z): the Bradley-Terry likelihood of the label,
        // which cDPO flips with probability eps. d softplus(x)/dx = sigma(x).
        const double eps = cfg->label_smoothing;
        l = (1.0 - eps) * s_softplus(-z) + eps * s_softplus(z);
        dldh = beta * (-(1.0 - eps) * s_sigmoid(-z) + eps * s_sigmoid(z));
        break;
    }
    case RL_PREF_HINGE: {
        // relu(1 - z): zero loss (and gradient) once the margin z reaches 1; at the kink z = 1
        // exactly, torch.relu's backward passes 0 (its derivative is taken as 0 at 0).
        const double u = 1.0 - z;
        l = u > 0.0 ? u : 0.0;
        dldh = u > 0.0 ? -beta : 0.0;
        break;
    }
    default: { // RL_PREF_IPO (the type was checked before): regress h onto 1/(2 beta) (Eq. 17
               // of the IPO paper, beta playing tau)
        const double d = h - 1.0 / (2.0 * beta);
        l = d * d;
        dldh = 2.0 * d;
        break;
    }
    }
    p->l = l;
    p->dldh = dldh;
    p->c_w = c_w;
    p->c_l = c_l;
    // TRL: chosen_rewards = beta * (chosen_logps - ref_chosen_logps), from the same (IPO:
    // normalised) logps the loss saw; logps/chosen is the mean of chosen_logps.
    p->rew_w = beta * a_w;
    p->rew_l = beta * a_l;
    p->lp_w = b->s_w[i] * c_w;
    p->lp_l = b->s_l[i] * c_l;
}

int rl_pref_dpo_loss(const rl_pref_batch_t *b, const rl_pref_dpo_t *cfg, double *loss, double *ds_w,
                     double *ds_l, rl_pref_dpo_stats_t *stats) {
    if (!b || !cfg || !ds_w || !ds_l || b->n < 1 || !b->s_w || !b->s_l || !b->r_w || !b->r_l) {
        return RL_EINVAL;
    }
    const int lt = cfg->loss_type;
    if (lt != RL_PREF_SIGMOID && lt != RL_PREF_HINGE && lt != RL_PREF_IPO) {
        return RL_EINVAL;
    }
    if (!s_pos(cfg->beta) || !(cfg->label_smoothing >= 0.0 && cfg->label_smoothing < 0.5) ||
        !(cfg->rpo_alpha >= 0.0 && isfinite(cfg->rpo_alpha)) || !s_pos(b->denom)) {
        return RL_EINVAL;
    }
    const bool rpo = cfg->rpo_alpha > 0.0;
    if (rpo && !s_pos(b->nll_denom)) {
        return RL_EINVAL;
    }
    const bool ipo = lt == RL_PREF_IPO;
    if (ipo && (!b->n_w || !b->n_l)) {
        return RL_EINVAL;
    }
    const int n = b->n;

    // Pass 1: validate every pair and compute the loss, writing nothing.
    double lsum = 0.0, nll = 0.0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(b->s_w[i]) || !isfinite(b->s_l[i]) || !isfinite(b->r_w[i]) ||
            !isfinite(b->r_l[i])) {
            return RL_EINVAL;
        }
        if (ipo && (b->n_w[i] < 1 || b->n_l[i] < 1)) {
            return RL_EINVAL; // TRL divides by 0 here (NaN); an empty completion has no mean
        }
        s_dpo_pair_t p;
        s_dpo_pair(b, cfg, i, &p);
        lsum += p.l;
        nll -= b->s_w[i];
    }
    // RPO (TRL v0.28.0 get_batch_loss_metrics: losses + rpo_alpha * nll_loss, then .mean() over
    // pairs): the NLL is one scalar for the batch, so alpha * NLL is added once, not per pair.
    const double share = lsum / b->denom + (rpo ? cfg->rpo_alpha * nll / b->nll_denom : 0.0);
    if (!isfinite(share) || !isfinite(nll)) {
        return RL_EINVAL;
    }

    // Pass 2: gradients and statistics. dL/ds_w = dl/dh * dh/ds_w / D + d(alpha NLL)/ds_w, with
    // dh/ds_w = c_w, dh/ds_l = -c_l and d(-alpha sum s_w / N)/ds_w = -alpha / N.
    const double drpo = rpo ? -cfg->rpo_alpha / b->nll_denom : 0.0;
    rl_pref_dpo_stats_t s = {0};
    for (int i = 0; i < n; i++) {
        s_dpo_pair_t p;
        s_dpo_pair(b, cfg, i, &p);
        ds_w[i] = p.dldh * p.c_w / b->denom + drpo;
        ds_l[i] = -p.dldh * p.c_l / b->denom;
        s.reward_chosen += p.rew_w;
        s.reward_rejected += p.rew_l;
        s.accuracy += p.rew_w > p.rew_l; // TRL: (chosen_rewards > rejected_rewards).float()
        s.margin += p.rew_w - p.rew_l;
        s.logp_chosen += p.lp_w;
        s.logp_rejected += p.lp_l;
    }
    if (loss) {
        *loss = share;
    }
    if (stats) {
        stats->loss += share;
        stats->pairs += (double)n;
        stats->reward_chosen += s.reward_chosen;
        stats->reward_rejected += s.reward_rejected;
        stats->accuracy += s.accuracy;
        stats->margin += s.margin;
        stats->logp_chosen += s.logp_chosen;
        stats->logp_rejected += s.logp_rejected;
        stats->nll += nll;
    }
    return 0;
}

// ---- the reward model --------------------------------------------------------------------------

int rl_pref_rm_loss(const rl_pref_rm_batch_t *b, double center_coef, double *loss, double *dq_w,
                    double *dq_l, rl_pref_rm_stats_t *stats) {
    if (!b || !dq_w || !dq_l || b->n < 1 || !b->q_w || !b->q_l || !s_pos(b->denom) ||
        !(center_coef >= 0.0 && isfinite(center_coef))) {
        return RL_EINVAL;
    }
    const int n = b->n;
    const double c = center_coef;

    // Pass 1: validate and sum the loss. TRL (reward_trainer.py, compute_loss):
    //   -logsigmoid(r_w - r_l - margin).mean() + c * mean((r_w + r_l)^2)
    // both means over the same pairs, hence one per-pair term each, divided by the global count.
    double lsum = 0.0;
    for (int i = 0; i < n; i++) {
        const double m = b->margin ? b->margin[i] : 0.0;
        if (!isfinite(b->q_w[i]) || !isfinite(b->q_l[i]) || !isfinite(m)) {
            return RL_EINVAL;
        }
        const double x = b->q_w[i] - b->q_l[i] - m;
        const double sum = b->q_w[i] + b->q_l[i];
        lsum += s_softplus(-x) + c * sum * sum; // -log sigma(x) = softplus(-x)
    }
    const double share = lsum / b->denom;
    if (!isfinite(share)) {
        return RL_EINVAL;
    }

    // Pass 2: dl/dx = -sigma(-x), dx/dq_w = 1, dx/dq_l = -1; the centering term pulls both
    // scores of a pair toward a zero sum (the reward's offset is otherwise free: Bradley-Terry
    // sees differences only).
    rl_pref_rm_stats_t s = {0};
    for (int i = 0; i < n; i++) {
        const double m = b->margin ? b->margin[i] : 0.0;
        const double x = b->q_w[i] - b->q_l[i] - m;
        const double g = s_sigmoid(-x);
        const double dc = 2.0 * c * (b->q_w[i] + b->q_l[i]);
        dq_w[i] = (-g + dc) / b->denom;
        dq_l[i] = (g + dc) / b->denom;
        s.accuracy += b->q_w[i] > b->q_l[i]; // TRL: (rewards_chosen > rewards_rejected)
        s.margin += b->q_w[i] - b->q_l[i];   // TRL's margin metric leaves the margin column out
        s.chosen += b->q_w[i];
        s.rejected += b->q_l[i];
    }
    if (loss) {
        *loss = share;
    }
    if (stats) {
        stats->loss += share;
        stats->pairs += (double)n;
        stats->accuracy += s.accuracy;
        stats->margin += s.margin;
        stats->chosen += s.chosen;
        stats->rejected += s.rejected;
    }
    return 0;
}

// ---- the losses' adapters ------------------------------------------------------------------------

// rows in pairs: on a mesh a rank may hold none (it keeps its peers company)
static int s_check_pairs(rl_policy_t *model, const rl_loss_batch_t *b, const char *what,
                         char *err, size_t err_len) {
    if (b->B < (rl_policy_sharded(model) ? 0 : 2) || b->B % 2 != 0) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "train: %s takes rows in pairs (chosen, rejected), groups of 2", what);
    }
    return 0;
}

static void s_zero_old(const rl_loss_batch_t *b, rl_loss_out_t *out) {
    if (out->old_logp) {
        memset(out->old_logp, 0,
               (size_t)(b->B > 0 ? b->B : 0) * (size_t)(b->T > 0 ? b->T : 0) * sizeof(float));
    }
}

// A micro-batch holds whole pairs: per row the summed masked logprobs, then rl_pref_dpo_loss
// per pair, then dL/ds broadcast over the row's mask.
typedef struct {
    const double *ref_sum;
    const rl_pref_dpo_t *cfg;
    double pairs, nll_denom;
    rl_pref_dpo_stats_t st; // of the pass
} s_dpo_ctx_t;

static int s_dpo_loss(void *ctx, const rl_policy_micro_t *m, float *dlogp, double *loss) {
    s_dpo_ctx_t *c = ctx;
    int n = m->n / 2, T = m->T;
    double *buf = calloc((size_t)(n > 0 ? n : 1) * 8, sizeof(double));
    int *cnt = calloc((size_t)(n > 0 ? n : 1) * 2, sizeof(int));
    if (!buf || !cnt) {
        free(buf);
        free(cnt);
        return RL_ENOMEM;
    }
    double *s_w = buf, *s_l = buf + n, *r_w = buf + 2 * n, *r_l = buf + 3 * n;
    double *ds_w = buf + 4 * n, *ds_l = buf + 5 * n;
    for (int i = 0; i < m->n; i++) {
        double sum = 0;
        int k = 0;
        for (int t = 0; t < T; t++) {
            float mk = m->mask[(size_t)i * T + t];
            sum += mk != 0.0f ? (double)m->logp[(size_t)i * T + t] : 0.0;
            k += mk != 0.0f;
        }
        int pair = i / 2, rej = i % 2;
        (rej ? s_l : s_w)[pair] = sum;
        (rej ? r_l : r_w)[pair] = c->ref_sum[m->b0 + i];
        cnt[rej * n + pair] = k;
    }
    rl_pref_batch_t b = {n, s_w, s_l, r_w, r_l, cnt, cnt + n, c->pairs, c->nll_denom};
    double part = 0;
    int rc = rl_pref_dpo_loss(&b, c->cfg, &part, ds_w, ds_l, &c->st);
    for (int i = 0; !rc && i < m->n; i++) {
        double g = (i % 2 ? ds_l : ds_w)[i / 2];
        for (int t = 0; t < T; t++) {
            size_t j = (size_t)i * T + t;
            dlogp[j] = m->mask[j] != 0.0f ? (float)g : 0.0f;
        }
    }
    *loss = part;
    free(buf);
    free(cnt);
    return rc;
}

int rl_pref_dpo_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                      const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len) {
    (void)self;
    memset(&out->stats, 0, sizeof out->stats);
    out->iterations = 0;
    int rc = s_check_pairs(model, b, "DPO", err, err_len);
    if (rc) {
        return rc;
    }
    rl_pref_dpo_t cfg = {r->algorithm.loss_type, r->algorithm.beta, r->algorithm.label_smoothing,
                         r->algorithm.rpo_alpha};
    s_dpo_ctx_t c;
    memset(&c, 0, sizeof c);
    c.ref_sum = b->ref_sum;
    c.cfg = &cfg;
    double d[2] = {b->B / 2, 0}; // pairs; the chosen completions' tokens (RPO's divisor)
    for (int i = 0; i < b->B; i += 2) {
        for (int t = 0; t < b->T; t++) {
            d[1] += b->mask[(size_t)i * b->T + t] != 0;
        }
    }
    if ((rc = rl_policy_sum_global(model, d, 2, err, err_len)) != 0) {
        return rc; // the divisors are the mesh's whole batch's
    }
    c.pairs = d[0];
    c.nll_denom = d[1] > 0 ? d[1] : 1; // read only with rpo_alpha > 0, where an empty chosen
                                       // side is an error
    rl_policy_rows_t rows = {b->B, b->T, b->tokens, b->lengths, b->mask, 2};
    rl_policy_step_opts_t o = {1.0f, b->micro_batch, 1, b->lr, r->optim.max_grad_norm, 0,
                               b->step, 0};
    rl_policy_step_stats_t st;
    rc = rl_policy_step(model, &rows, &o, s_dpo_loss, &c, &st, err, err_len);
    if (!rc) {
        rl_loss_stats_t *s = &out->stats;
        rl_loss_stats_put(s, "loss", st.loss);
        rl_loss_stats_put(s, "grad_norm", st.grad_norm);
        rl_pref_dpo_stats_list(&c.st, st.loss, r->algorithm.rpo_alpha > 0, s);
        out->iterations = st.iterations;
        s_zero_old(b, out);
    }
    return rc;
}

void rl_pref_dpo_stats_list(const rl_pref_dpo_stats_t *st, double loss, int nll,
                            rl_loss_stats_t *out) {
    rl_loss_stats_put(out, "loss", loss);
    rl_loss_stats_put(out, "pairs", st->pairs);
    rl_loss_stats_put(out, "reward_chosen", st->reward_chosen);
    rl_loss_stats_put(out, "reward_rejected", st->reward_rejected);
    rl_loss_stats_put(out, "accuracy", st->accuracy);
    rl_loss_stats_put(out, "margin", st->margin);
    rl_loss_stats_put(out, "logp_chosen", st->logp_chosen);
    rl_loss_stats_put(out, "logp_rejected", st->logp_rejected);
    if (nll) {
        rl_loss_stats_put(out, "nll", st->nll);
    }
    out->updates = 1;
}

static const rl_loss_stat_t s_dpo_stats[] = {
    {"loss", RL_LOSS_SHARE, "loss", NULL},
    {"grad_norm", RL_LOSS_GLOBAL, "grad_norm", NULL},
    {"pairs", RL_LOSS_SUM, NULL, NULL},
    {"reward_chosen", RL_LOSS_SUM, "rewards/chosen", "pairs"},
    {"reward_rejected", RL_LOSS_SUM, "rewards/rejected", "pairs"},
    {"accuracy", RL_LOSS_SUM, "rewards/accuracies", "pairs"},
    {"margin", RL_LOSS_SUM, "rewards/margins", "pairs"},
    {"logp_chosen", RL_LOSS_SUM, "logps/chosen", "pairs"},
    {"logp_rejected", RL_LOSS_SUM, "logps/rejected", "pairs"},
    {"nll", RL_LOSS_SUM, "nll_loss", NULL},
    {0},
};

const rl_loss_t rl_pref_dpo_def = {
    .name = "dpo",
    .rows = 2,
    .needs = RL_LOSS_NEEDS_REF_SUM,
    .model = RL_LOSS_POLICY,
    .train = rl_pref_dpo_train,
    .stats = s_dpo_stats,
    .doc = "DPO (sigmoid, cDPO, hinge, IPO; RPO's NLL) on pairs against the reference's sums",
};

typedef struct {
    const double *margin; // (pairs) or NULL
    double center, pairs;
    rl_pref_rm_stats_t st;
} s_rm_ctx_t;

static int s_rm_loss(void *ctx, const rl_policy_micro_t *m, float *dscores, double *loss) {
    s_rm_ctx_t *c = ctx;
    int n = m->n / 2;
    double *buf = calloc((size_t)(n > 0 ? n : 1) * 5, sizeof(double));
    if (!buf) {
        return RL_ENOMEM;
    }
    double *q_w = buf, *q_l = buf + n, *mg = buf + 2 * n, *dw = buf + 3 * n, *dl = buf + 4 * n;
    for (int i = 0; i < n; i++) {
        q_w[i] = m->values[2 * i];
        q_l[i] = m->values[2 * i + 1];
        mg[i] = c->margin ? c->margin[m->b0 / 2 + i] : 0.0;
    }
    rl_pref_rm_batch_t b = {n, q_w, q_l, c->margin ? mg : NULL, c->pairs};
    double part = 0;
    int rc = rl_pref_rm_loss(&b, c->center, &part, dw, dl, &c->st);
    for (int i = 0; !rc && i < n; i++) {
        dscores[2 * i] = (float)dw[i];
        dscores[2 * i + 1] = (float)dl[i];
    }
    *loss = part;
    free(buf);
    return rc;
}

int rl_pref_rm_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                     const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len) {
    (void)self;
    memset(&out->stats, 0, sizeof out->stats);
    out->iterations = 0;
    if (!rl_policy_has_head(model)) {
        return rl_errf(err, err_len, RL_EINVAL, "train: a reward model needs a score head");
    }
    int rc = s_check_pairs(model, b, "a reward model", err, err_len);
    if (rc) {
        return rc;
    }
    s_rm_ctx_t c;
    memset(&c, 0, sizeof c);
    double *margin = b->margin ? malloc((size_t)(b->B / 2 + 1) * sizeof(double)) : NULL;
    if (b->margin && !margin) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; margin && i < b->B / 2; i++) {
        margin[i] = b->margin[2 * i]; // a pair's margin rides on both of its rows
    }
    c.margin = margin;
    c.center = r->algorithm.center_rewards_coefficient;
    c.pairs = b->B / 2;
    rc = rl_policy_sum_global(model, &c.pairs, 1, err, err_len); // the mesh's whole batch's
    rl_policy_rows_t rows = {b->B, b->T, b->tokens, b->lengths, b->mask, 2};
    rl_policy_step_opts_t o = {1.0f, b->micro_batch, 1, b->lr, r->optim.max_grad_norm, 0,
                               b->step, 1};
    rl_policy_step_stats_t st;
    if (!rc) {
        rc = rl_policy_step(model, &rows, &o, s_rm_loss, &c, &st, err, err_len);
    }
    free(margin);
    if (!rc) {
        rl_loss_stats_t *s = &out->stats;
        rl_loss_stats_put(s, "loss", st.loss);
        rl_loss_stats_put(s, "grad_norm", st.grad_norm);
        rl_pref_rm_stats_list(&c.st, st.loss, 1, s);
        out->iterations = st.iterations;
        s_zero_old(b, out);
    }
    return rc;
}

void rl_pref_rm_stats_list(const rl_pref_rm_stats_t *st, double loss, int scores,
                           rl_loss_stats_t *out) {
    rl_loss_stats_put(out, "loss", loss);
    rl_loss_stats_put(out, "pairs", st->pairs);
    rl_loss_stats_put(out, "accuracy", st->accuracy);
    rl_loss_stats_put(out, "margin", st->margin);
    if (scores) {
        rl_loss_stats_put(out, "chosen", st->chosen);
        rl_loss_stats_put(out, "rejected", st->rejected);
    }
    out->updates = 1;
}

static const rl_loss_stat_t s_rm_stats[] = {
    {"loss", RL_LOSS_SHARE, "loss", NULL},
    {"grad_norm", RL_LOSS_GLOBAL, "grad_norm", NULL},
    {"pairs", RL_LOSS_SUM, NULL, NULL},
    {"accuracy", RL_LOSS_SUM, "rm/accuracy", "pairs"},
    {"margin", RL_LOSS_SUM, "rm/margin", "pairs"},
    {"chosen", RL_LOSS_SUM, "rm/chosen", "pairs"},
    {"rejected", RL_LOSS_SUM, "rm/rejected", "pairs"},
    {0},
};

const rl_loss_t rl_pref_rm_def = {
    .name = "rm",
    .rows = 2,
    .needs = 0,
    .model = RL_LOSS_POLICY,
    .train = rl_pref_rm_train,
    .stats = s_rm_stats,
    .doc = "the reward model's Bradley-Terry loss on pairs of scores (margin, centering)",
};

// rl_loss — the registry of losses (see rl_loss.h): the list of definitions, lookups by name,
// and the statistics lists' merging and metrics. Each definition lives beside its math; this
// file only names them, one line each.
#include "rl_loss.h"

#include "rl_err.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- the registry -------------------------------------------------------------------------------
// One line a loss: X(the symbol of its definition, in trainer/rl_<loss>.c).

#define S_LOSSES(X)                                                                            \
    X(rl_grpo_def)                                                                             \
    X(rl_loss_gspo_def)                                                                        \
    X(rl_loss_cispo_def)                                                                       \
    X(rl_ppo_def)                                                                              \
    X(rl_ppo_value_def)                                                                        \
    X(rl_loss_sft_def)                                                                         \
    X(rl_pref_dpo_def)                                                                         \
    X(rl_pref_rm_def)

#define S_DECLARE(sym) extern const rl_loss_t sym;
#define S_REF(sym) &sym,
S_LOSSES(S_DECLARE)
static const rl_loss_t *const s_losses[] = {S_LOSSES(S_REF)};
#define S_N ((int)(sizeof s_losses / sizeof s_losses[0]))

const rl_loss_t *rl_loss_find(const char *name) {
    for (int i = 0; name && i < S_N; i++) {
        if (strcmp(s_losses[i]->name, name) == 0) {
            return s_losses[i];
        }
    }
    return NULL;
}

int rl_loss_all(const rl_loss_t *const **all) {
    *all = s_losses;
    return S_N;
}

const char *rl_loss_names(int policy, char *out, size_t cap) {
    size_t len = 0;
    if (cap > 0) {
        out[0] = '\0';
    }
    for (int i = 0; i < S_N && cap > 0; i++) {
        if (policy && !s_losses[i]->policy_loss) {
            continue;
        }
        int k = snprintf(out + len, cap - len, "%s%s", len ? ", " : "", s_losses[i]->name);
        if (k < 0 || (size_t)k >= cap - len) {
            break; // truncated
        }
        len += (size_t)k;
    }
    return out;
}

// ---- statistics lists -----------------------------------------------------------------------------

static int s_index(const rl_loss_stats_t *s, const char *name) {
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->name[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

void rl_loss_stats_put(rl_loss_stats_t *s, const char *name, double value) {
    int i = s_index(s, name);
    if (i < 0) {
        RL_ASSERT(s->n < RL_LOSS_MAX_STATS);
        i = s->n++;
        s->name[i] = name;
    }
    s->value[i] = value;
}

int rl_loss_stats_get(const rl_loss_stats_t *s, const char *name, double *value) {
    int i = s_index(s, name);
    if (i < 0) {
        return 0;
    }
    *value = s->value[i];
    return 1;
}

static const rl_loss_stat_t *s_def(const rl_loss_t *self, const char *name) {
    for (const rl_loss_stat_t *d = self->stats; d && d->name; d++) {
        if (strcmp(d->name, name) == 0) {
            return d;
        }
    }
    return NULL;
}

int rl_loss_stats_merge_rank(const rl_loss_t *self, rl_loss_stats_t *acc,
                             const rl_loss_stats_t *x) {
    for (int i = 0; i < acc->n; i++) {
        double v;
        if (!rl_loss_stats_get(x, acc->name[i], &v)) {
            return RL_EPROTO;
        }
        const rl_loss_stat_t *d = s_def(self, acc->name[i]);
        if (!d || d->merge != RL_LOSS_GLOBAL) {
            acc->value[i] += v; // a statistic the definition does not know is summed
        }
    }
    return 0;
}

int rl_loss_stats_merge_update(const rl_loss_t *self, rl_loss_stats_t *acc,
                               const rl_loss_stats_t *x) {
    int known = 0;
    for (int i = 0; i < x->n; i++) {
        const rl_loss_stat_t *d = s_def(self, x->name[i]);
        if (!d) {
            continue; // not the definition's: nothing would log it
        }
        known++;
        int j = s_index(acc, d->name);
        if (j < 0 && acc->updates > 0) {
            return RL_EPROTO;
        }
        if (j < 0) {
            rl_loss_stats_put(acc, d->name, 0.0); // the definition's name: outlives x
            j = acc->n - 1;
        }
        acc->value[j] += x->value[i]; // from 0, as a mean over the updates is summed
    }
    if (acc->updates > 0 && known != acc->n) {
        return RL_EPROTO;
    }
    acc->updates++;
    return 0;
}

// ---- metrics ------------------------------------------------------------------------------------

// The metric of definition d from list s: 0 with *v, or -1 when s lacks what it needs.
static int s_metric(const rl_loss_stat_t *d, const rl_loss_stats_t *s, double *v) {
    double x, per = 1.0;
    if (!d->metric || !rl_loss_stats_get(s, d->name, &x)) {
        return -1;
    }
    if (d->per) {
        if (!rl_loss_stats_get(s, d->per, &per)) {
            return -1;
        }
        per = per > 0 ? per : 1.0;
    } else if (d->merge != RL_LOSS_SUM) {
        per = s->updates > 0 ? (double)s->updates : 1.0;
    }
    *v = x / per;
    return 0;
}

double rl_loss_metric(const rl_loss_t *self, const rl_loss_stats_t *s, const char *metric) {
    for (const rl_loss_stat_t *d = self->stats; d && d->name; d++) {
        double v;
        if (d->metric && strcmp(d->metric, metric) == 0 && s_metric(d, s, &v) == 0) {
            return v;
        }
    }
    return NAN;
}

void rl_loss_metrics(const rl_loss_t *self, const rl_loss_stats_t *s, const char *prefix,
                     rl_metrics_t *mt) {
    char key[128];
    for (const rl_loss_stat_t *d = self->stats; d && d->name; d++) {
        double v;
        if (s_metric(d, s, &v) == 0) {
            snprintf(key, sizeof key, "%s%s", prefix, d->metric);
            rl_metrics_add(mt, key, v);
        }
    }
}

// ---- the KL coefficient (GRPO, PPO; DPO's temperature) -------------------------------------

// clang-format off
const rl_recipe_key_t rl_loss_beta_keys[] = {
    {.section = "algorithm", .key = "beta", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.beta), RL_RECIPE_DEF("0.0"), .max = 100,
     .doc = "KL coefficient; 0 = no reference model (PPO: of the per-token KL reward; DPO: the "
            "loss's temperature, > 0)"},
    {0},
};
// clang-format on

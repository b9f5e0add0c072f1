// rl_loss_sft — token_mean cross-entropy over the global batch. Derivation of the backward:
// L = -(1/N) sum m*logp is linear in logp, so dL/dlogp[b,t] = -m[b,t]/N; N is a constant of
// the step (counted before the first micro-batch runs), not a function of logp.
#include "rl_loss_sft.h"

#include <stddef.h>
#include <string.h>

int64_t rl_loss_sft_count(const float *mask, int B, int T) {
    int64_t n = 0;
    for (size_t i = 0; i < (size_t)B * (size_t)T; i++) {
        n += mask[i] != 0.0f;
    }
    return n;
}

double rl_loss_sft_forward(const float *logp, const float *mask, int B, int T, int64_t n_tok) {
    if (n_tok <= 0) {
        return 0.0;
    }
    // accumulate in double: a step can hold 10^5..10^6 tokens
    double s = 0.0;
    for (size_t i = 0; i < (size_t)B * (size_t)T; i++) {
        s += (double)mask[i] * (double)logp[i];
    }
    return -s / (double)n_tok;
}

void rl_loss_sft_backward(float *dlogp, const float *mask, int B, int T, int64_t n_tok) {
    const float scale = n_tok > 0 ? (float)(-1.0 / (double)n_tok) : 0.0f;
    for (size_t i = 0; i < (size_t)B * (size_t)T; i++) {
        dlogp[i] = mask[i] * scale;
    }
}

// ---- the loss's adapter ----------------------------------------------------------------------------

static int s_sft_loss(void *ctx, const rl_policy_micro_t *m, float *dlogp, double *loss) {
    int64_t n_tok = *(const int64_t *)ctx;
    *loss = rl_loss_sft_forward(m->logp, m->mask, m->n, m->T, n_tok);
    rl_loss_sft_backward(dlogp, m->mask, m->n, m->T, n_tok);
    return 0;
}

int rl_loss_sft_train(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                      const rl_loss_batch_t *b, rl_loss_out_t *out, char *err, size_t err_len) {
    (void)self;
    memset(&out->stats, 0, sizeof out->stats);
    out->iterations = 0;
    int64_t n_tok = (int64_t)b->denom;
    rl_policy_rows_t rows = {b->B, b->T, b->tokens, b->lengths, b->mask, 1};
    rl_policy_step_opts_t o = {1.0f, b->micro_batch, 1, b->lr, r->optim.max_grad_norm, 0,
                               b->step, 0};
    rl_policy_step_stats_t st;
    int rc = rl_policy_step(model, &rows, &o, s_sft_loss, &n_tok, &st, err, err_len);
    if (!rc) {
        rl_loss_stats_put(&out->stats, "loss", st.loss);
        rl_loss_stats_put(&out->stats, "grad_norm", st.grad_norm);
        out->iterations = st.iterations;
        if (out->old_logp) {
            memset(out->old_logp, 0,
                   (size_t)(b->B > 0 ? b->B : 0) * (size_t)(b->T > 0 ? b->T : 0) * sizeof(float));
        }
    }
    return rc;
}

static const rl_loss_stat_t s_sft_stats[] = {
    {"loss", RL_LOSS_SHARE, "loss", NULL},
    {"grad_norm", RL_LOSS_GLOBAL, "grad_norm", NULL},
    {0},
};

const rl_loss_t rl_loss_sft_def = {
    .name = "sft",
    .rows = 1,
    .needs = 0,
    .model = RL_LOSS_POLICY,
    .train = rl_loss_sft_train,
    .stats = s_sft_stats,
    .doc = "the negative log-likelihood of the masked tokens, over the step's tokens",
};

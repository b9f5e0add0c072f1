// rl_loss_sft — token_mean cross-entropy over the global batch. Derivation of the backward:
// L = -(1/N) sum m*logp is linear in logp, so dL/dlogp[b,t] = -m[b,t]/N; N is a constant of
// the step (counted before the first micro-batch runs), not a function of logp.
#include "rl_loss_sft.h"

#include <stddef.h>

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

// test_loss_sft — the SFT loss: value by hand, central finite differences of the backward,
// and gradient accumulation (sum over micro-batches with the global token count) equal to one
// big batch.
#include "rl_loss_sft.h"
#include "rl_test.h"
#include "rl_test_fd.h"

#include <math.h>
#include <stdlib.h>

// The loss at logp (an rl_fd_fn; ctx: s_sft_t, the batch's mask and its active-token count).
typedef struct {
    const float *mask;
    int B, T;
    int64_t n;
} s_sft_t;

static double s_loss(void *ctx, const float *logp) {
    const s_sft_t *c = ctx;
    return rl_loss_sft_forward(logp, c->mask, c->B, c->T, c->n);
}

int main(void) {
    enum { B = 3, T = 5 };
    float logp[B * T], mask[B * T], dlogp[B * T];
    for (int i = 0; i < B * T; i++) {
        logp[i] = -0.1f * (float)(i % 7) - 0.05f;
        mask[i] = (i % 3 != 0) ? 1.0f : 0.0f;
    }
    int64_t n = rl_loss_sft_count(mask, B, T);
    CHECK_INT(n, 10);
    double by_hand = 0.0;
    for (int i = 0; i < B * T; i++) {
        if (i % 3 != 0) {
            by_hand -= logp[i];
        }
    }
    by_hand /= 10.0;
    CHECK_CLOSE(rl_loss_sft_forward(logp, mask, B, T, n), by_hand, 1e-12);
    CHECK_CLOSE(rl_loss_sft_forward(logp, mask, B, T, 0), 0.0, 0);

    // Central differences in double: the loss is linear in logp, so the difference quotient
    // (over the step the float logp actually took) is exact up to rounding; h = 1e-3 on values
    // ~0.5 gives ~1e-7 relative rounding in the quotient, so 1e-5 is a loose bound.
    rl_loss_sft_backward(dlogp, mask, B, T, n);
    s_sft_t c = {mask, B, T, n};
    for (int i = 0; i < B * T; i++) {
        double fd = rl_fd_central(s_loss, &c, logp, (size_t)i, 1e-3);
        CHECK_CLOSE(dlogp[i], fd, 1e-5);
    }
    // masked positions get exactly 0
    CHECK(dlogp[0] == 0.0f && dlogp[3] == 0.0f);

    // Accumulation: rows {0}, {1,2} as micro-batches with the global N equal the whole batch.
    double whole = rl_loss_sft_forward(logp, mask, B, T, n);
    double parts = rl_loss_sft_forward(logp, mask, 1, T, n) +
                   rl_loss_sft_forward(logp + T, mask + T, 2, T, n);
    CHECK_CLOSE(parts, whole, 1e-12);
    float dparts[B * T];
    rl_loss_sft_backward(dparts, mask, 1, T, n);
    rl_loss_sft_backward(dparts + T, mask + T, 2, T, n);
    for (int i = 0; i < B * T; i++) {
        CHECK(dparts[i] == dlogp[i]);
    }
    // Perplexity-style sanity: every active logp = log(1/4) gives loss log 4.
    for (int i = 0; i < B * T; i++) {
        logp[i] = (float)log(0.25);
    }
    CHECK_CLOSE(rl_loss_sft_forward(logp, mask, B, T, n), log(4.0), 1e-6);
    RL_TEST_DONE();
}

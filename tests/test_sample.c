// tests for rollout/rl_sample, the per-token sampling kernels (unit): log_softmax at a
// temperature, argmax, top-k (heap against the full-sort twin, ties), top-p, the categorical
// draw; the sampling distribution against hand-computed ones; and frequency (chi-square) checks
// of rl_sample_token's draws against that distribution with fixed seeds.
#include "rl_err.h"
#include "rl_rng.h"
#include "rl_sample.h"
#include "rl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// kernels

static void s_test_log_softmax(void) {
    const float x[4] = {1.0f, 2.0f, 3.0f, -1.0f};
    float lp[4], pr[4];
    for (int ti = 0; ti < 3; ti++) {
        double T = ti == 0 ? 1.0 : ti == 1 ? 0.5 : 2.0;
        rl_sample_log_softmax(lp, pr, x, 4, (float)T);
        double z = 0.0;
        for (int i = 0; i < 4; i++) {
            z += exp(x[i] / T);
        }
        for (int i = 0; i < 4; i++) {
            CHECK_CLOSE(lp[i], x[i] / T - log(z), 1e-6);
            CHECK_CLOSE(pr[i], exp(x[i] / T) / z, 1e-6);
        }
    }
    // T <= 0 reports the T = 1 distribution (greedy convention)
    float lp1[4];
    rl_sample_log_softmax(lp, NULL, x, 4, 0.0f);
    rl_sample_log_softmax(lp1, NULL, x, 4, 1.0f);
    CHECK(memcmp(lp, lp1, sizeof lp) == 0);
    // large logits do not overflow
    const float big[3] = {1000.0f, 999.0f, -1000.0f};
    rl_sample_log_softmax(lp, pr, big, 3, 1.0f);
    CHECK_CLOSE(lp[0], -log(1.0 + exp(-1.0)), 1e-6);
    CHECK(isfinite(lp[2]));
}

static void s_test_argmax_top_k(void) {
    const float t[6] = {0.5f, 2.0f, 2.0f, -1.0f, 3.0f, 2.0f};
    CHECK_INT(rl_sample_argmax(t, 6), 4);
    const float ties[3] = {1.0f, 1.0f, 1.0f};
    CHECK_INT(rl_sample_argmax(ties, 3), 0);
    int32_t idx[6];
    CHECK_INT(rl_sample_top_k(idx, t, 6, 3), 3);
    CHECK_INT(idx[0], 4); // ties on 2.0 broken by the lower index
    CHECK_INT(idx[1], 1);
    CHECK_INT(idx[2], 2);
    CHECK_INT(rl_sample_top_k(idx, t, 6, 10), 6);
    CHECK_INT(idx[5], 3);
    // heap against the full sort on random rows with many ties (values on a coarse grid)
    rl_rng_t rng;
    rl_rng_seed(&rng, 11);
    enum { V = 1000 };
    static float x[V];
    static int32_t a[V], b[V];
    int bad = 0;
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < V; i++) {
            x[i] = (float)(int)(rl_rng_below(&rng, 50)) * 0.25f - 5.0f;
        }
        int k = 1 + (int)rl_rng_below(&rng, V + 20);
        int na = rl_sample_top_k(a, x, V, k), nb = rl_sample_top_k_ref(b, x, V, k);
        bad += na != nb || memcmp(a, b, (size_t)na * sizeof(int32_t)) != 0;
    }
    CHECK_INT(bad, 0);
}

static void s_test_top_p_categorical(void) {
    const float lp[4] = {0.5f, 0.3f, 0.15f, 0.05f}; // probabilities
    int32_t idx[4] = {0, 1, 2, 3};
    CHECK_INT(rl_sample_top_p(lp, idx, 4, 0.45f), 1); // 0.5 >= 0.45
    CHECK_INT(rl_sample_top_p(lp, idx, 4, 0.7f), 2);  // 0.8 >= 0.7
    CHECK_INT(rl_sample_top_p(lp, idx, 4, 0.81f), 3); // 0.95 >= 0.81
    CHECK_INT(rl_sample_top_p(lp, idx, 4, 1.0f), 4);
    CHECK_INT(rl_sample_top_p(lp, idx, 4, 0.01f), 1);
    // over 3 candidates (after a top-k), the mass is renormalised: 0.5/0.95 = 0.526 < 0.6
    CHECK_INT(rl_sample_top_p(lp, idx, 3, 0.6f), 2);
    // categorical: cumulative 0.5, 0.8, 0.95, 1.0
    CHECK_INT(rl_sample_categorical(lp, NULL, 4, 0.0), 0);
    CHECK_INT(rl_sample_categorical(lp, NULL, 4, 0.49), 0);
    CHECK_INT(rl_sample_categorical(lp, NULL, 4, 0.51), 1);
    CHECK_INT(rl_sample_categorical(lp, NULL, 4, 0.9), 2);
    CHECK_INT(rl_sample_categorical(lp, NULL, 4, 0.999999), 3);
    int32_t rev[2] = {3, 1}; // weights 0.05, 0.3 -> cumulative 0.1428, 1
    CHECK_INT(rl_sample_categorical(lp, rev, 2, 0.1), 0);
    CHECK_INT(rl_sample_categorical(lp, rev, 2, 0.2), 1);
    // a zero weight is never drawn, even at u -> 1
    const float zw[3] = {1.0f, 0.0f, 0.0f};
    CHECK_INT(rl_sample_categorical(zw, NULL, 3, 0.9999999999), 0);
    const float zw2[3] = {0.0f, 2.0f, 0.0f};
    CHECK_INT(rl_sample_categorical(zw2, NULL, 3, 0.0), 1);
}

static void s_test_opts_check(void) {
    rl_sample_opts_t o;
    char err[256];
    rl_sample_opts_default(&o);
    CHECK_INT(rl_sample_opts_check(&o, err, sizeof err), 0);
    o.temperature = -1.0f;
    CHECK_INT(rl_sample_opts_check(&o, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "temperature");
    o.temperature = 1e-40f; // logits / T overflow a float: every logprob NaN
    CHECK_INT(rl_sample_opts_check(&o, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "must be 0 (greedy) or at least 1e-06");
    o.temperature = 1e-6f;
    CHECK_INT(rl_sample_opts_check(&o, err, sizeof err), 0);
    rl_sample_opts_default(&o);
    o.top_p = 0.0f;
    CHECK_INT(rl_sample_opts_check(&o, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "top_p");
    o.top_p = 1.5f;
    CHECK_INT(rl_sample_opts_check(&o, err, sizeof err), RL_EINVAL);
    rl_sample_opts_default(&o);
    o.top_k = -2;
    CHECK_INT(rl_sample_opts_check(&o, err, sizeof err), RL_EINVAL);
}

// The sampling distribution for p = {0.4, 0.25, 0.2, 0.1, 0.05} (logits = log p) under each
// option, computed by hand.
static void s_test_dist_hand(void) {
    const double p[5] = {0.4, 0.25, 0.2, 0.1, 0.05};
    float logits[5], probs[5], logp[5], pr[5];
    int32_t idx[5];
    for (int i = 0; i < 5; i++) {
        logits[i] = (float)log(p[i]);
    }
    rl_sample_opts_t o;
    struct {
        float T;
        int k;
        float top_p;
        double want[5];
    } cases[] = {
        {1.0f, 0, 1.0f, {0.4, 0.25, 0.2, 0.1, 0.05}},
        {1.0f, 2, 1.0f, {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0}},
        {1.0f, 0, 0.6f, {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0}},  // 0.4 < 0.6 <= 0.65
        {1.0f, 0, 0.65f, {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0}}, // exactly reached (float 0.65)
        {1.0f, 0, 0.66f, {0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85, 0, 0}},
        // top-k 3 then top-p over the renormalised three: 0.4/0.85 = 0.47, 0.76, 1
        {1.0f, 3, 0.7f, {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0}},
        {1.0f, 3, 0.8f, {0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85, 0, 0}},
        {1.0f, 1, 1.0f, {1, 0, 0, 0, 0}},
        {0.0f, 0, 1.0f, {1, 0, 0, 0, 0}}, // greedy
        {0.3f, 1, 0.5f, {1, 0, 0, 0, 0}},
    };
    int n_cases = (int)(sizeof cases / sizeof cases[0]);
    for (int c = 0; c < n_cases; c++) {
        o.temperature = cases[c].T;
        o.top_k = cases[c].k;
        o.top_p = cases[c].top_p;
        rl_sample_dist(probs, logp, pr, idx, logits, 5, &o);
        for (int i = 0; i < 5; i++) {
            CHECK_MSG(fabs(probs[i] - cases[c].want[i]) < 1e-6, "case %d token %d: %g vs %g", c,
                      i, (double)probs[i], cases[c].want[i]);
        }
    }
    // temperature 2: p^(1/2) renormalised, then top-k 2
    o.temperature = 2.0f;
    o.top_k = 2;
    o.top_p = 1.0f;
    rl_sample_dist(probs, logp, pr, idx, logits, 5, &o);
    double z = sqrt(0.4) + sqrt(0.25);
    CHECK_CLOSE(probs[0], sqrt(0.4) / z, 1e-6);
    CHECK_CLOSE(probs[1], sqrt(0.25) / z, 1e-6);
    CHECK_CLOSE(probs[2], 0.0, 0.0);
}

// Draws `n` tokens with rl_sample_token (uniforms from a fixed seed) and checks the counts
// against rl_sample_dist with a chi-square statistic: under the null it has mean df and standard
// deviation sqrt(2 df); the bound df + 6 sqrt(2 df) + 10 is beyond any fluctuation at this seed
// while a wrong distribution (e.g. an off-by-one cutoff, a bias of a few percent) exceeds it by
// far at these draw counts. Also: no token outside the kept set, and the reported logprob is the
// full-vocabulary log_softmax at T, not the renormalised one.
static void s_chi2(const float *logits, int V, const rl_sample_opts_t *o, uint64_t seed, int n,
                   const char *what) {
    float *probs = calloc((size_t)V, sizeof(float)), *logp = malloc((size_t)V * sizeof(float));
    float *ref_lp = malloc((size_t)V * sizeof(float)), *pr = malloc((size_t)V * sizeof(float));
    int32_t *idx = malloc((size_t)V * sizeof(int32_t));
    long *count = calloc((size_t)V, sizeof(long));
    RL_ASSERT(probs && logp && idx && count && ref_lp && pr);
    rl_sample_dist(probs, logp, pr, idx, logits, V, o);
    rl_sample_log_softmax(ref_lp, NULL, logits, V, o->temperature);
    rl_rng_t rng;
    rl_rng_seed(&rng, seed);
    int outside = 0, lp_bad = 0;
    for (int i = 0; i < n; i++) {
        float lp;
        int32_t t = rl_sample_token(logp, pr, idx, logits, V, o, rl_rng_uniform(&rng), &lp);
        count[t]++;
        outside += probs[t] == 0.0f;
        lp_bad += lp != ref_lp[t];
    }
    double chi2 = 0.0;
    int df = -1;
    for (int v = 0; v < V; v++) {
        if (probs[v] > 0.0f) {
            double e = (double)n * probs[v];
            chi2 += (count[v] - e) * (count[v] - e) / e;
            df++;
        }
    }
    double bound = df + 6.0 * sqrt(2.0 * (df > 0 ? df : 1)) + 10.0;
    printf("chi2 %-28s df %4d  chi2 %8.2f  bound %8.2f\n", what, df, chi2, bound);
    CHECK_MSG(chi2 < bound, "%s: chi2 %g >= %g (df %d)", what, chi2, bound, df);
    CHECK_MSG(outside == 0, "%s: %d draws outside the kept set", what, outside);
    CHECK_MSG(lp_bad == 0, "%s: %d reported logprobs differ from log_softmax", what, lp_bad);
    free(probs);
    free(logp);
    free(ref_lp);
    free(pr);
    free(idx);
    free(count);
}

static void s_test_chi2(void) {
    enum { V = 300 };
    static float logits[V];
    rl_rng_t rng;
    rl_rng_seed(&rng, 5);
    for (int i = 0; i < V; i++) {
        logits[i] = (float)(2.0 * rl_rng_normal(&rng));
    }
    rl_sample_opts_t o;
    rl_sample_opts_default(&o);
    s_chi2(logits, V, &o, 1, 60000, "T=1");
    o.temperature = 0.7f;
    s_chi2(logits, V, &o, 2, 60000, "T=0.7");
    o.temperature = 1.3f;
    o.top_k = 20;
    s_chi2(logits, V, &o, 3, 60000, "T=1.3 top_k=20");
    o.top_k = 0;
    o.top_p = 0.9f;
    s_chi2(logits, V, &o, 4, 60000, "T=1.3 top_p=0.9");
    o.top_k = 50;
    o.top_p = 0.5f;
    s_chi2(logits, V, &o, 5, 60000, "T=1.3 top_k=50 top_p=0.5");
    // a flat-ish row over a larger vocabulary: top-p alone must go past its first 64 candidates
    // (to the sort of the filtered set) and still agree with the full sort
    enum { BIG = 2000 };
    static float flat[BIG], probs[BIG], logp[BIG], pr[BIG];
    static int32_t idx[BIG], ref[BIG];
    for (int i = 0; i < BIG; i++) {
        flat[i] = (float)(0.1 * rl_rng_normal(&rng));
    }
    o.temperature = 1.0f;
    o.top_k = 0;
    o.top_p = 0.95f;
    int kept = rl_sample_dist(probs, logp, pr, idx, flat, BIG, &o);
    rl_sample_log_softmax(logp, pr, flat, BIG, 1.0f);
    rl_sample_top_k_ref(ref, flat, BIG, BIG);
    double c = 0.0;
    int want = 0;
    while (c < 0.95) {
        c += pr[ref[want++]];
    }
    CHECK_MSG(kept == want, "top-p over %d: kept %d, full sort %d", BIG, kept, want);
    CHECK(kept > 1024);
    s_chi2(flat, BIG, &o, 6, 20000, "V=2000 top_p=0.95");
}

int main(void) {
    RL_TEST_RUN(s_test_log_softmax);
    RL_TEST_RUN(s_test_argmax_top_k);
    RL_TEST_RUN(s_test_top_p_categorical);
    RL_TEST_RUN(s_test_opts_check);
    RL_TEST_RUN(s_test_dist_hand);
    RL_TEST_RUN(s_test_chi2);
    RL_TEST_DONE();
}

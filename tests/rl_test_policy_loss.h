// rl_test_policy_loss — what the suites of GRPO's family of losses share (test_grpo, test_ppo's
// policy, test_loss_cispo, test_loss_gspo): a PyTorch golden case of a policy loss (written by
// tests/reference/ scripts) run through the loss's math, and a folder of such cases. For suites
// that include rl_test.h and link jansson and the trainer.
#ifndef RL_TEST_POLICY_LOSS_H
#define RL_TEST_POLICY_LOSS_H

#include "rl_grpo.h"
#include "rl_test.h"
#include "rl_test_golden.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *loss_key; // the golden's loss value: "loss" (grpo) or "loss_value"
    int nan_masked;       // masked positions read as NaN (the loss must never look at them)
    int approx_kl;        // the golden's stats have approx_kl
    double tol_loss;      // relative, on the loss and every statistic
    double tol_grad;      // on dlogp, relative to its largest element
    double worst_loss, worst_grad; // the worst seen so far (updated)
} rl_test_policy_golden_t;

// Golden case `name` (c: its "alg", "B", "T", "logp", "old_logp", "ref_logp", "mu_logp", "mask",
// "adv", "denom", "dlogp", the loss, "stats") through fn with base's other settings: the loss
// and every statistic within g->tol_loss, dlogp within g->tol_grad of its largest element and
// exactly 0 where masked. Failures name the case.
static inline void rl_test_policy_golden(const char *name, json_t *c, rl_grpo_math_fn fn,
                                         rl_recipe_algorithm_t alg, rl_test_policy_golden_t *g) {
    int B = (int)rl_golden_num(c, "B"), T = (int)rl_golden_num(c, "T");
    size_t N = (size_t)B * (size_t)T;
    json_t *ja = json_object_get(c, "alg");
    static const char *const kls[] = {"k1", "k2", "k3"};
    static const char *const aggs[] = {"token_mean", "seq_mean_token_mean",
                                       "seq_mean_token_sum_norm"};
    static const char *const tis[] = {"none", "token", "sequence"};
    alg.epsilon_low = rl_golden_num(ja, "epsilon_low");
    alg.epsilon_high = rl_golden_num(ja, "epsilon_high");
    alg.dual_clip = rl_golden_num(ja, "dual_clip");
    alg.beta = rl_golden_num(ja, "beta");
    alg.kl_estimator = rl_golden_enum(ja, "kl_estimator", kls, 3); // RL_RECIPE_KL_* order
    alg.loss_agg = rl_golden_enum(ja, "loss_agg", aggs, 3);
    alg.tis = rl_golden_enum(ja, "tis", tis, 3);
    alg.tis_cap = rl_golden_num(ja, "tis_cap");
    float *mask = rl_golden_listf(c, "mask", N, NULL);
    const float *nan_at = g->nan_masked ? mask : NULL;
    float *logp = rl_golden_listf(c, "logp", N, nan_at);
    float *old = rl_golden_listf(c, "old_logp", N, nan_at);
    float *ref = rl_golden_listf(c, "ref_logp", N, nan_at);
    float *mu = rl_golden_listf(c, "mu_logp", N, nan_at);
    double *adv = rl_golden_list(c, "adv", (size_t)B), *want = rl_golden_list(c, "dlogp", N);
    float *got = calloc(N ? N : 1, sizeof(float));
    if (!logp || !mask || !adv || !want || !got) {
        CHECK_MSG(0, "%s: unreadable", name);
        goto done;
    }
    rl_grpo_batch_t b = {B, T, logp, old, ref, mu, mask, adv, rl_golden_num(c, "denom"), NULL};
    rl_grpo_loss_stats_t st = {0};
    CHECK_INT(fn(&b, &alg, got, &st), 0);
    double wl = rl_golden_num(c, g->loss_key);
    double lerr = fabs(st.loss - wl) / fmax(fabs(wl), 1e-300);
    CHECK_MSG(lerr <= g->tol_loss, "%s: loss %.17g want %.17g", name, st.loss, wl);
    double max_want = 0.0;
    double gerr = rl_golden_grad_err(name, "dlogp", got, want, mask, N, g->tol_grad, &max_want);
    g->worst_grad = fmax(g->worst_grad, gerr);
    g->worst_loss = fmax(g->worst_loss, lerr);
    json_t *js = json_object_get(c, "stats");
    struct {
        const char *key;
        double got;
    } fields[] = {{"tokens", st.tokens},           {"kl", st.kl},
                  {"clip_low", st.clip_low},       {"clip_high", st.clip_high},
                  {"dual_clip", st.dual_clip},     {"ratio", st.ratio},
                  {"tis_weight", st.tis_weight},   {"tis_masked", st.tis_masked},
                  {"logprob_gap", st.logprob_gap}, {"approx_kl", st.approx_kl}};
    const size_t nf = sizeof(fields) / sizeof(fields[0]) - (g->approx_kl ? 0 : 1);
    for (size_t k = 0; k < nf; k++) {
        double w = rl_golden_num(js, fields[k].key);
        CHECK_MSG(fabs(fields[k].got - w) <= g->tol_loss * fmax(1.0, fabs(w)),
                  "%s: stats.%s %.17g want %.17g", name, fields[k].key, fields[k].got, w);
    }
    fprintf(stderr, "golden %-28s loss rel err %.3g, dlogp %.3g of max|dlogp| %.3g\n", name, lerr,
            gerr, max_want);
done:
    free(logp);
    free(old);
    free(ref);
    free(mu);
    free(mask);
    free(adv);
    free(want);
    free(got);
}

// Every case of RL_FIXTURES/<loss>/index.json ("cases": names; "torch_version"), each
// <name>.json naming `loss`, through fn (at least 10 cases).
static inline void rl_test_policy_goldens(const char *loss, rl_grpo_math_fn fn,
                                          rl_recipe_algorithm_t base, rl_test_policy_golden_t *g) {
    char path[1024];
    json_error_t jerr;
    snprintf(path, sizeof(path), "%s/%s/index.json", RL_FIXTURES, loss);
    json_t *index = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    CHECK_MSG(index != NULL, "%s: %s", path, jerr.text);
    json_t *cases = index ? json_object_get(index, "cases") : NULL;
    CHECK(json_array_size(cases) >= 10);
    if (index) {
        fprintf(stderr, "goldens: torch %s\n",
                json_string_value(json_object_get(index, "torch_version")));
    }
    for (size_t k = 0; k < json_array_size(cases); k++) {
        const char *name = json_string_value(json_array_get(cases, k));
        snprintf(path, sizeof(path), "%s/%s/%s.json", RL_FIXTURES, loss, name ? name : "?");
        json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        CHECK_MSG(c != NULL, "%s: %s", path, jerr.text);
        if (c) {
            CHECK_STR(json_string_value(json_object_get(c, "loss")), loss);
            rl_test_policy_golden(name, c, fn, base, g);
            json_decref(c);
        }
    }
    fprintf(stderr,
            "goldens: %zu cases; worst loss rel err %.3g, dlogp %.3g of max (tolerances "
            "%g, %g)\n",
            json_array_size(cases), g->worst_loss, g->worst_grad, g->tol_loss, g->tol_grad);
    json_decref(index);
}

// A policy loss fn on a batch of B rows of T (B >= 5) with the given inputs: old_logp NULL is
// exactly old_logp = logp (detached), bit for bit; micro-batches of rows {0,1} and {2..B-1} with
// the batch's divisor (denom) give the whole batch's gradient to the bit, and its loss within
// tol_exact and its token and clip counts. logp, old, ref, mu, mask (B*T), adv (B).
static inline void rl_test_policy_micro_batches(rl_grpo_math_fn fn, rl_recipe_algorithm_t alg,
                                                int B, int T, const float *logp, const float *old,
                                                const float *ref, const float *mu,
                                                const float *mask, const double *adv, double denom,
                                                double tol_exact) {
    const size_t N = (size_t)B * (size_t)T;
    float *g1 = calloc(N, sizeof *g1), *g2 = calloc(N, sizeof *g2);
    RL_ASSERT(g1 && g2);
    rl_grpo_batch_t b = {B, T, logp, NULL, ref, mu, mask, adv, denom, NULL};
    rl_grpo_loss_stats_t s1 = {0}, s2 = {0};
    CHECK_INT(fn(&b, &alg, g1, &s1), 0);
    b.old_logp = logp;
    CHECK_INT(fn(&b, &alg, g2, &s2), 0);
    CHECK(memcmp(g1, g2, N * sizeof *g1) == 0 && memcmp(&s1, &s2, sizeof s1) == 0);
    b.old_logp = old;
    rl_grpo_loss_stats_t whole = {0}, parts = {0};
    CHECK_INT(fn(&b, &alg, g1, &whole), 0);
    rl_grpo_batch_t p1 = b, p2 = b;
    p1.B = 2;
    p2.B = B - 2;
    p2.logp += 2 * T;
    p2.old_logp += 2 * T;
    p2.ref_logp += 2 * T;
    p2.mu_logp += 2 * T;
    p2.mask += 2 * T;
    p2.adv += 2;
    CHECK_INT(fn(&p1, &alg, g2, &parts), 0);
    CHECK_INT(fn(&p2, &alg, g2 + 2 * T, &parts), 0);
    CHECK(memcmp(g1, g2, N * sizeof *g1) == 0);
    CHECK_CLOSE(parts.loss, whole.loss, tol_exact);
    CHECK(parts.tokens == whole.tokens && parts.clip_high == whole.clip_high);
    free(g1);
    free(g2);
}

#endif

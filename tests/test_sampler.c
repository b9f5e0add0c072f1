// tests for rollout/rl_sampler, the sampler engine, on tiny random models (llama, qwen2, qwen3
// shapes): the logprobs the sampler reports against rl_model_forward over the same prompt +
// completion at the same temperature (the trainer/sampler gap, which must be rounding only),
// greedy against the argmax of the full forward's logits step by step, determinism across calls,
// prompt orders and batch compositions, slot recycling, stop / length finishes and refusals, a
// cancel callback (changes nothing until it cancels; then RL_ECANCELED at that step).
// The kernels are tested in test_sample.c.
#include "rl_err.h"
#include "rl_hf.h"
#include "rl_model.h"
#include "rl_rng.h"
#include "rl_sample.h"
#include "rl_sampler.h"
#include "rl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// engine on tiny random models

static const char *s_configs[] = {
    "{\"model_type\": \"qwen2\", \"hidden_size\": 32, \"intermediate_size\": 64,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"vocab_size\": 40, \"max_position_embeddings\": 64, \"initializer_range\": 0.2,"
    " \"tie_word_embeddings\": true, \"eos_token_id\": 39}",
    "{\"model_type\": \"qwen3\", \"hidden_size\": 32, \"intermediate_size\": 48,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 1,"
    " \"head_dim\": 16, \"vocab_size\": 56, \"max_position_embeddings\": 48,"
    " \"initializer_range\": 0.2, \"tie_word_embeddings\": false, \"eos_token_id\": [54, 55]}",
    "{\"model_type\": \"llama\", \"hidden_size\": 24, \"intermediate_size\": 40,"
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 2,"
    " \"vocab_size\": 33, \"max_position_embeddings\": 40, \"initializer_range\": 0.25,"
    " \"eos_token_id\": 32}",
};

static rl_model_t *s_model(int which) {
    char err[512];
    rl_hf_config_t cfg;
    const char *json = s_configs[which];
    if (rl_hf_config_parse(json, strlen(json), "test config", &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "FAIL: config %d: %s\n", which, err);
        return NULL;
    }
    rl_model_opts_t opts;
    rl_model_opts_default(&opts);
    opts.threads = 1;
    rl_model_t *m = rl_model_new_random(&cfg, &opts, 1234 + (uint64_t)which, err, sizeof err);
    if (!m) {
        fprintf(stderr, "FAIL: model %d: %s\n", which, err);
    }
    return m;
}

enum { N_PROMPTS = 4 };
static const int32_t s_p0[] = {3, 7, 1};
static const int32_t s_p1[] = {5, 5, 2, 9, 11};
static const int32_t s_p2[] = {1};
static const int32_t s_p3[] = {8, 6, 4, 2, 0, 1, 3, 5, 7, 9};

static void s_prompts(rl_sampler_prompt_t *p) {
    const int32_t *ids[N_PROMPTS] = {s_p0, s_p1, s_p2, s_p3};
    const int lens[N_PROMPTS] = {3, 5, 1, 10};
    for (int i = 0; i < N_PROMPTS; i++) {
        p[i].ids = ids[i];
        p[i].len = lens[i];
        p[i].index = (uint64_t)i;
    }
}

// Scores every result with one batched rl_model_forward (right-padded) at temperature T and
// returns the largest |sampler logprob - forward logp| over all completion tokens.
// With `logits_out` non-NULL also returns the forward's logits (B,T,V) and the layout.
static double s_gap(rl_model_t *m, const rl_sampler_prompt_t *prompts,
                    const rl_sampler_result_t *res, int total, float T, float **logits_out,
                    int *Tmax_out) {
    int Tmax = 1;
    for (int k = 0; k < total; k++) {
        int len = prompts[res[k].prompt].len + res[k].n_ids;
        Tmax = len > Tmax ? len : Tmax;
    }
    RL_ASSERT(total > 0);
    size_t BT = (size_t)total * (size_t)Tmax;
    int32_t *tok = calloc(BT, sizeof(int32_t));
    int *lens = calloc((size_t)total, sizeof(int));
    float *logp = calloc(BT, sizeof(float));
    RL_ASSERT(tok && lens && logp);
    for (int k = 0; k < total; k++) {
        const rl_sampler_prompt_t *q = &prompts[res[k].prompt];
        memcpy(tok + (size_t)k * Tmax, q->ids, (size_t)q->len * sizeof(int32_t));
        memcpy(tok + (size_t)k * Tmax + q->len, res[k].ids, (size_t)res[k].n_ids * sizeof(int32_t));
        lens[k] = q->len + res[k].n_ids;
    }
    int rc = rl_model_forward(m, tok, lens, total, Tmax, T, 0, logp, NULL);
    CHECK_MSG(rc == 0, "forward: %s", rl_model_errmsg(m));
    double gap = 0.0;
    for (int k = 0; rc == 0 && k < total; k++) {
        int P = prompts[res[k].prompt].len;
        for (int j = 0; j < res[k].n_ids; j++) {
            double d = fabs((double)res[k].logprobs[j] - logp[(size_t)k * Tmax + P + j]);
            gap = d > gap ? d : gap;
        }
    }
    if (logits_out) {
        *logits_out = rc == 0 ? rl_model_logits(m) : NULL;
        *Tmax_out = Tmax;
    }
    free(tok);
    free(lens);
    free(logp);
    return gap;
}

static int s_same(const rl_sampler_result_t *a, const rl_sampler_result_t *b, int bitwise_lp) {
    if (a->n_ids != b->n_ids || a->finish != b->finish ||
        memcmp(a->ids, b->ids, (size_t)a->n_ids * sizeof(int32_t)) != 0) {
        return 0;
    }
    for (int j = 0; j < a->n_ids; j++) {
        if (bitwise_lp ? a->logprobs[j] != b->logprobs[j]
                       : fabs(a->logprobs[j] - b->logprobs[j]) > 1e-5) {
            return 0;
        }
    }
    return 1;
}

static double s_worst_gap = 0.0;

// on_token's view of a call, against the results of the same call made before.
typedef struct {
    const rl_sampler_result_t *want;
    int n, bad, done;
} s_seen_t;
static int s_seen_len[64];

static void s_on_token(void *arg, const rl_sampler_result_t *r, int done) {
    s_seen_t *s = arg;
    int k = r->prompt * 4 + r->sample; // n 4
    const rl_sampler_result_t *w = &s->want[k];
    int i = r->n_ids - 1;
    s->bad += k >= 64 || i != s_seen_len[k] || i >= w->n_ids || r->ids[i] != w->ids[i] ||
              r->logprobs[i] != w->logprobs[i] || done != (i == w->n_ids - 1) ||
              (done && r->finish != w->finish);
    s_seen_len[k < 64 ? k : 0]++;
    s->done += done;
}

static void s_test_engine(int which) {
    rl_model_t *m = s_model(which);
    CHECK(m != NULL);
    if (!m) {
        return;
    }
    const rl_hf_config_t *cfg = rl_model_config(m);
    const int V = cfg->vocab_size;
    rl_sampler_t *s = rl_sampler_new(m);
    CHECK(s != NULL);
    rl_sampler_prompt_t prompts[N_PROMPTS];
    s_prompts(prompts);
    rl_sampler_params_t p;
    rl_sampler_params_default(&p);
    p.n = 4;
    p.max_new_tokens = 12;
    p.seed = 99;

    // ---- the key check: sampler logprobs == training forward logp, at several settings ----
    struct {
        float T;
        int k;
        float top_p;
    } settings[] = {{1.0f, 0, 1.0f}, {0.7f, 0, 1.0f}, {1.3f, 10, 0.9f}, {0.5f, 0, 0.8f}};
    for (int si = 0; si < 4; si++) {
        p.sample.temperature = settings[si].T;
        p.sample.top_k = settings[si].k;
        p.sample.top_p = settings[si].top_p;
        rl_sampler_result_t *res = NULL;
        int rc = rl_sampler_generate(s, prompts, N_PROMPTS, &p, &res);
        CHECK_MSG(rc == 0, "generate: %s", rl_sampler_errmsg(s));
        if (rc) {
            continue;
        }
        int total = N_PROMPTS * p.n;
        for (int k = 0; k < total; k++) {
            CHECK_INT(res[k].prompt, k / p.n);
            CHECK_INT(res[k].sample, k % p.n);
            CHECK(res[k].n_ids >= 1 && res[k].n_ids <= p.max_new_tokens);
            for (int j = 0; j < res[k].n_ids; j++) {
                CHECK(res[k].ids[j] >= 0 && res[k].ids[j] < V);
            }
        }
        // one prefill per prompt, one token per decode row
        rl_sampler_stats_t st;
        rl_sampler_stats(s, &st);
        CHECK_INT(st.prefill_tokens, 3 + 5 + 1 + 10);
        double gap = s_gap(m, prompts, res, total, settings[si].T, NULL, NULL);
        printf("model %d  T=%.1f top_k=%d top_p=%.1f  max |sampler - forward| logprob gap %.3g"
               "  (%lld decode tokens, %lld steps)\n",
               which, (double)settings[si].T, settings[si].k, (double)settings[si].top_p, gap,
               (long long)st.decode_tokens, (long long)st.steps);
        // The same logits computed two ways (cached step with sgemv/decode attention vs the
        // training forward with sgemm): they differ by rounding only, a few ulps (measured
        // ~6e-7 relative, 2.5e-6 at |logit| ~ 4 with these inits), divided by T in the logprob;
        // 1e-5 keeps a margin at T = 0.5, while any convention error (a temperature applied
        // twice or not at all, logprobs renormalised over the top-k/top-p set, an off-by-one
        // position, a cache copy of the wrong length) shows as >= 1e-2.
        CHECK_MSG(gap < 1e-5, "model %d setting %d: gap %g", which, si, gap);
        s_worst_gap = gap > s_worst_gap ? gap : s_worst_gap;

        // determinism: the same call again gives bitwise the same output, with on_token too;
        // on_token sees each sequence's tokens one at a time, in order, done with its last
        rl_sampler_result_t *again = NULL;
        s_seen_t seen = {res, 0, 0, 0};
        rl_sampler_params_t pt = p;
        pt.on_token = s_on_token;
        pt.on_token_arg = &seen;
        memset(s_seen_len, 0, sizeof s_seen_len);
        rc = rl_sampler_generate(s, prompts, N_PROMPTS, &pt, &again);
        CHECK(rc == 0);
        for (int k = 0; rc == 0 && k < total; k++) {
            CHECK_MSG(s_same(&res[k], &again[k], 1), "rerun differs at %d", k);
            CHECK_MSG(s_seen_len[k] == res[k].n_ids, "on_token saw %d tokens of %d's %d",
                      s_seen_len[k], k, res[k].n_ids);
        }
        CHECK_MSG(!seen.bad && seen.done == total, "on_token: %d wrong, %d done of %d", seen.bad,
                  seen.done, total);
        rl_sampler_results_free(&again, total);

        // batch composition: each prompt alone (same index), and all of them through 3 slots
        // (so samples of one prompt are split across prefills), give the same samples
        for (int q = 0; q < N_PROMPTS; q++) {
            rl_sampler_result_t *one = NULL;
            rc = rl_sampler_generate(s, &prompts[q], 1, &p, &one);
            CHECK(rc == 0);
            for (int j = 0; rc == 0 && j < p.n; j++) {
                CHECK_MSG(s_same(&res[q * p.n + j], &one[j], 0),
                          "prompt %d sample %d alone differs", q, j);
            }
            rl_sampler_results_free(&one, p.n);
        }
        rl_sampler_params_t p3 = p;
        p3.max_batch = 3;
        rl_sampler_result_t *narrow = NULL;
        rc = rl_sampler_generate(s, prompts, N_PROMPTS, &p3, &narrow);
        CHECK(rc == 0);
        for (int k = 0; rc == 0 && k < total; k++) {
            CHECK_MSG(s_same(&res[k], &narrow[k], 0), "max_batch 3 differs at %d", k);
        }
        rl_sampler_results_free(&narrow, total);
        // reversed prompt order, indices kept
        rl_sampler_prompt_t rev[N_PROMPTS];
        for (int q = 0; q < N_PROMPTS; q++) {
            rev[q] = prompts[N_PROMPTS - 1 - q];
        }
        rl_sampler_result_t *rres = NULL;
        rc = rl_sampler_generate(s, rev, N_PROMPTS, &p, &rres);
        CHECK(rc == 0);
        for (int q = 0; rc == 0 && q < N_PROMPTS; q++) {
            for (int j = 0; j < p.n; j++) {
                CHECK_MSG(s_same(&res[q * p.n + j], &rres[(N_PROMPTS - 1 - q) * p.n + j], 0),
                          "reversed order differs at prompt %d sample %d", q, j);
            }
        }
        rl_sampler_results_free(&rres, total);
        // a different seed gives different samples
        rl_sampler_params_t p2 = p;
        p2.seed = p.seed + 1;
        rl_sampler_result_t *other = NULL;
        rc = rl_sampler_generate(s, prompts, N_PROMPTS, &p2, &other);
        CHECK(rc == 0);
        int differ = 0;
        for (int k = 0; rc == 0 && k < total; k++) {
            differ += !s_same(&res[k], &other[k], 0);
        }
        CHECK(differ > 0);
        rl_sampler_results_free(&other, total);
        // the samples of one prompt are not all the same (their streams differ)
        int distinct = 0;
        for (int j = 1; j < p.n; j++) {
            distinct += !s_same(&res[0], &res[j], 0);
        }
        CHECK(settings[si].T < 0.6f || distinct > 0);
        rl_sampler_results_free(&res, total);
    }

    // ---- greedy: each token is the argmax of the full forward's logits ----
    p.sample.temperature = 0.0f;
    p.sample.top_k = 0;
    p.sample.top_p = 1.0f;
    p.n = 2;
    p.no_eos = 1;
    rl_sampler_result_t *g = NULL;
    int rc = rl_sampler_generate(s, prompts, N_PROMPTS, &p, &g);
    CHECK_MSG(rc == 0, "greedy: %s", rl_sampler_errmsg(s));
    if (rc == 0) {
        int total = N_PROMPTS * p.n;
        float *logits = NULL;
        int Tmax = 0;
        double gap = s_gap(m, prompts, g, total, 1.0f, &logits, &Tmax);
        CHECK_MSG(gap < 1e-5, "greedy gap %g (logprobs at T = 1)", gap);
        CHECK(logits != NULL);
        int bad = 0;
        for (int k = 0; logits && k < total; k++) {
            int P = prompts[g[k].prompt].len;
            CHECK_INT(g[k].n_ids, p.max_new_tokens); // no eos, no stop: always length
            CHECK_INT(g[k].finish, RL_SAMPLER_FINISH_LENGTH);
            for (int j = 0; j < g[k].n_ids; j++) {
                const float *row = logits + ((size_t)k * Tmax + P + j - 1) * V;
                bad += rl_sample_argmax(row, V) != g[k].ids[j];
            }
            // both samples of a prompt are the same under greedy
            if (g[k].sample == 1) {
                CHECK(s_same(&g[k], &g[k - 1], 1));
            }
        }
        CHECK_MSG(bad == 0, "model %d: %d greedy tokens differ from the forward's argmax",
                  which, bad);
        free(logits);

        // ---- stop: the 4th greedy token of prompt 0 as a stop id ends the sample there ----
        int32_t stop = g[0].ids[3];
        int first = 0;
        while (g[0].ids[first] != stop) {
            first++;
        }
        rl_sampler_params_t ps = p;
        ps.stop_ids = &stop;
        ps.n_stop = 1;
        rl_sampler_result_t *st = NULL;
        rc = rl_sampler_generate(s, prompts, 1, &ps, &st);
        CHECK(rc == 0);
        if (rc == 0) {
            CHECK_INT(st[0].finish, RL_SAMPLER_FINISH_STOP);
            CHECK_INT(st[0].n_ids, first + 1);           // the stop token is included ...
            CHECK_INT(st[0].ids[st[0].n_ids - 1], stop);  // ... as the last id
            CHECK_CLOSE(st[0].logprobs[first], g[0].logprobs[first], 1e-6); // ... with its logprob
            CHECK_STR(rl_sampler_finish_name(st[0].finish), "stop");
        }
        rl_sampler_results_free(&st, p.n);
        // the config's eos ids stop too (no_eos = 0): at a high temperature some of these
        // samples draw one, and none continues past it
        rl_sampler_params_t pe = p;
        pe.no_eos = 0;
        pe.sample.temperature = 1.5f;
        pe.max_new_tokens = 30;
        pe.n = 8;
        rl_sampler_result_t *er = NULL;
        rc = rl_sampler_generate(s, prompts, 1, &pe, &er);
        CHECK(rc == 0);
        for (int k = 0; rc == 0 && k < pe.n; k++) {
            for (int j = 0; j < er[k].n_ids; j++) {
                int is_eos = 0;
                for (int e = 0; e < cfg->n_eos; e++) {
                    is_eos |= er[k].ids[j] == cfg->eos_token_ids[e];
                }
                CHECK(!is_eos || (j == er[k].n_ids - 1 && er[k].finish == RL_SAMPLER_FINISH_STOP));
            }
            CHECK(er[k].finish == RL_SAMPLER_FINISH_STOP || er[k].n_ids == pe.max_new_tokens);
        }
        rl_sampler_results_free(&er, pe.n);
    }
    rl_sampler_results_free(&g, N_PROMPTS * 2);

    // ---- refusals ----
    int ctx = rl_sampler_context(s);
    CHECK_INT(ctx, cfg->max_position_embeddings);
    int32_t *long_ids = calloc((size_t)ctx, sizeof(int32_t));
    rl_sampler_prompt_t lp = {long_ids, ctx - 4, 7};
    rl_sampler_params_t pl;
    rl_sampler_params_default(&pl);
    pl.max_new_tokens = 4; // exactly fills the context: accepted
    rl_sampler_result_t *r = NULL;
    rc = rl_sampler_generate(s, &lp, 1, &pl, &r);
    CHECK_MSG(rc == 0, "prompt + max_new == context: %s", rl_sampler_errmsg(s));
    rl_sampler_results_free(&r, 1);
    pl.max_new_tokens = 5;
    rc = rl_sampler_generate(s, &lp, 1, &pl, &r);
    CHECK_INT(rc, RL_EINVAL);
    CHECK(r == NULL);
    CHECK_CONTAINS(rl_sampler_errmsg(s), "too long");
    CHECK_CONTAINS(rl_sampler_errmsg(s), "max_position_embeddings");
    lp.len = 0;
    CHECK_INT(rl_sampler_generate(s, &lp, 1, &pl, &r), RL_EINVAL);
    CHECK_CONTAINS(rl_sampler_errmsg(s), "empty");
    long_ids[0] = V;
    lp.len = 1;
    CHECK_INT(rl_sampler_generate(s, &lp, 1, &pl, &r), RL_EINVAL);
    CHECK_CONTAINS(rl_sampler_errmsg(s), "vocabulary");
    long_ids[0] = 0;
    pl.sample.top_p = 0.0f;
    CHECK_INT(rl_sampler_generate(s, &lp, 1, &pl, &r), RL_EINVAL);
    CHECK_CONTAINS(rl_sampler_errmsg(s), "top_p");
    pl.sample.top_p = 1.0f;
    pl.n = 0;
    CHECK_INT(rl_sampler_generate(s, &lp, 1, &pl, &r), RL_EINVAL);
    pl.n = 1;
    pl.max_new_tokens = 0;
    CHECK_INT(rl_sampler_generate(s, &lp, 1, &pl, &r), RL_EINVAL);
    // no prompts: nothing to do
    pl.max_new_tokens = 1;
    CHECK_INT(rl_sampler_generate(s, &lp, 0, &pl, &r), 0);
    CHECK(r == NULL);
    free(long_ids);

    rl_sampler_destroy(&s);
    CHECK(s == NULL);
    rl_sampler_destroy(&s); // no-op
    rl_model_destroy(&m);
}

// A cancel callback: counts its calls in *arg; cancels once asked more than s_cancel_at times
// (-1: never).
static int s_cancel_calls, s_cancel_at;
static int s_cancel(void *arg) {
    int *calls = arg;
    (*calls)++;
    return s_cancel_at >= 0 && *calls > s_cancel_at;
}

// Sessions (an episode's turns): turn 1 of 6 episodes (2 prompts x 3 samples, kept under
// their keys); turn 2 continues each with its completion and 2 more tokens, as one prompt per
// episode under the same key: only the new tokens are prefilled (the rest comes from the kept
// cache), and the results equal those of a sampler without sessions, token for token and
// logprobs within 1e-5 (the kept cache was computed by decode steps, the other by a prefill: the
// same sums in another order), on every model; a call without sessions drops them, and
// rl_sampler_sessions_clear empties the store.
static double s_worst_session;

static void s_test_sessions(int which) {
    rl_model_t *m = s_model(which);
    if (!m) {
        CHECK(0);
        return;
    }
    int V = rl_model_config(m)->vocab_size;
    rl_sampler_t *kept = rl_sampler_new(m), *plain = rl_sampler_new(m);
    int32_t a[4] = {3, 7, 1, 2}, b[2] = {5, 6};
    rl_sampler_prompt_t first[2] = {{a, 4, 11}, {b, 2, 12}};
    rl_sampler_params_t p;
    rl_sampler_params_default(&p);
    p.n = 3;
    p.max_new_tokens = 6;
    p.seed = 9;
    p.no_eos = 1; // every turn runs 6 tokens: predictable lengths
    p.sample.temperature = 1.0f;
    uint64_t keys[2] = {1000, 2000}; // sample s of prompt p: keys[p] + s
    p.sessions = keys;
    rl_sampler_result_t *r1 = NULL;
    CHECK_INT(rl_sampler_generate(kept, first, 2, &p, &r1), 0);
    // turn 2: one prompt per episode, its whole sequence so far plus two tokens
    int32_t ids[6][16];
    rl_sampler_prompt_t second[6];
    uint64_t keys2[6];
    int64_t expect_reused = 0;
    for (int e = 0; r1 && e < 6; e++) {
        const rl_sampler_prompt_t *q = &first[e / 3];
        int n = 0;
        for (int t = 0; t < q->len; t++) {
            ids[e][n++] = q->ids[t];
        }
        for (int t = 0; t < r1[e].n_ids; t++) {
            ids[e][n++] = r1[e].ids[t];
        }
        expect_reused += n - 1;
        ids[e][n++] = (int32_t)((e + 1) % V);
        ids[e][n++] = (int32_t)((e + 4) % V);
        second[e] = (rl_sampler_prompt_t){ids[e], n, 50 + (uint64_t)e};
        keys2[e] = keys[e / 3] + (uint64_t)(e % 3);
    }
    rl_sampler_params_t p2 = p;
    p2.n = 1;
    p2.seed = 10;
    p2.sessions = keys2;
    rl_sampler_result_t *r2 = NULL, *r2p = NULL;
    CHECK_INT(rl_sampler_generate(kept, second, 6, &p2, &r2), 0);
    rl_sampler_stats_t st;
    rl_sampler_stats(kept, &st);
    CHECK_MSG(st.reused_tokens == expect_reused && st.prefill_tokens == 6 * 3,
              "model %d: reused %lld prefilled %lld (want %lld and 18)", which,
              (long long)st.reused_tokens, (long long)st.prefill_tokens, (long long)expect_reused);
    rl_sampler_params_t p3 = p2;
    p3.sessions = NULL;
    CHECK_INT(rl_sampler_generate(plain, second, 6, &p3, &r2p), 0);
    // the kept cache was computed a token at a time (decode), the plain one in one prefill: the
    // same numbers up to float rounding, so the same tokens and logprobs within 1e-5
    for (int e = 0; r2 && r2p && e < 6; e++) {
        double md = 0;
        int same = r2[e].n_ids == r2p[e].n_ids;
        for (int t = 0; same && t < r2[e].n_ids; t++) {
            same &= r2[e].ids[t] == r2p[e].ids[t];
            double d = fabs((double)r2[e].logprobs[t] - r2p[e].logprobs[t]);
            md = d > md ? d : md;
        }
        CHECK_MSG(same && md < 1e-5,
                  "model %d episode %d: with the kept cache: same tokens %d, logprobs off by %g",
                  which, e, same, md);
        s_worst_session = md > s_worst_session ? md : s_worst_session;
    }
    // a call that names no session drops them: the same turn again prefills everything
    rl_sampler_result_t *r3 = NULL;
    CHECK_INT(rl_sampler_generate(kept, first, 2, &p3, &r3), 0);
    rl_sampler_results_free(&r3, 2);
    CHECK_INT(rl_sampler_generate(kept, second, 6, &p2, &r3), 0);
    rl_sampler_stats(kept, &st);
    CHECK_MSG(st.reused_tokens == 0, "model %d: %lld tokens reused from dropped sessions", which,
              (long long)st.reused_tokens);
    rl_sampler_sessions_clear(kept);
    rl_sampler_results_free(&r1, 6);
    rl_sampler_results_free(&r2, 6);
    rl_sampler_results_free(&r2p, 6);
    rl_sampler_results_free(&r3, 6);
    rl_sampler_destroy(&kept);
    rl_sampler_destroy(&plain);
    rl_model_destroy(&m);
}

// Many prompts, more than max_batch slots, n > max_batch: slots are recycled as sequences
// finish, and every result still matches the forward pass and its alone-in-a-batch twin.
static void s_test_scheduling(void) {
    rl_model_t *m = s_model(0);
    if (!m) {
        CHECK(0);
        return;
    }
    rl_sampler_t *s = rl_sampler_new(m);
    enum { NP = 9 };
    int32_t ids[NP][6];
    rl_sampler_prompt_t prompts[NP];
    for (int q = 0; q < NP; q++) {
        for (int t = 0; t < 6; t++) {
            ids[q][t] = (q * 7 + t * 3) % 39;
        }
        prompts[q].ids = ids[q];
        prompts[q].len = 1 + q % 6;
        prompts[q].index = 100 + (uint64_t)q;
    }
    rl_sampler_params_t p;
    rl_sampler_params_default(&p);
    p.n = 5;
    p.max_new_tokens = 9;
    p.max_batch = 4;
    p.seed = 3;
    p.sample.temperature = 1.5f; // hits the eos (39) now and then: uneven lengths
    rl_sampler_result_t *res = NULL;
    int rc = rl_sampler_generate(s, prompts, NP, &p, &res);
    CHECK_MSG(rc == 0, "%s", rl_sampler_errmsg(s));
    if (rc == 0) {
        double gap = s_gap(m, prompts, res, NP * p.n, p.sample.temperature, NULL, NULL);
        printf("scheduling: %d prompts x %d samples through %d slots: gap %.3g\n", NP, p.n,
               p.max_batch, gap);
        CHECK(gap < 1e-5);
        s_worst_gap = gap > s_worst_gap ? gap : s_worst_gap;
        rl_sampler_params_t wide = p;
        wide.max_batch = 64;
        rl_sampler_result_t *w = NULL;
        rc = rl_sampler_generate(s, prompts, NP, &wide, &w);
        CHECK(rc == 0);
        for (int k = 0; rc == 0 && k < NP * p.n; k++) {
            CHECK_MSG(s_same(&res[k], &w[k], 0), "max_batch 4 vs 64 differ at %d", k);
        }
        rl_sampler_results_free(&w, NP * p.n);
        // a cancel callback that never cancels changes nothing, bit for bit; one that cancels
        // before the 4th model step stops the call there with RL_ECANCELED and no results,
        // and the sampler serves the next call as before
        s_cancel_calls = 0;
        s_cancel_at = -1;
        rl_sampler_params_t pc = p;
        pc.cancel = s_cancel;
        pc.cancel_arg = &s_cancel_calls;
        rl_sampler_stats_t st1;
        rc = rl_sampler_generate(s, prompts, NP, &pc, &w);
        rl_sampler_stats(s, &st1);
        CHECK(rc == 0);
        CHECK_MSG(s_cancel_calls == st1.steps, "cancel asked %d times for %lld steps",
                  s_cancel_calls, (long long)st1.steps);
        for (int k = 0; rc == 0 && k < NP * p.n; k++) {
            CHECK_MSG(s_same(&res[k], &w[k], 1), "with a cancel callback: differs at %d", k);
        }
        rl_sampler_results_free(&w, NP * p.n);
        s_cancel_calls = 0;
        s_cancel_at = 3;
        rc = rl_sampler_generate(s, prompts, NP, &pc, &w);
        rl_sampler_stats(s, &st1);
        CHECK_MSG(rc == RL_ECANCELED && w == NULL && st1.steps == 3 &&
                      strstr(rl_sampler_errmsg(s), "cancelled") != NULL,
                  "cancel at step 3: rc %d, %lld steps, '%s'", rc, (long long)st1.steps,
                  rl_sampler_errmsg(s));
        rc = rl_sampler_generate(s, prompts, NP, &p, &w);
        CHECK(rc == 0);
        for (int k = 0; rc == 0 && k < NP * p.n; k++) {
            CHECK_MSG(s_same(&res[k], &w[k], 1), "after a cancelled call: differs at %d", k);
        }
        rl_sampler_results_free(&w, NP * p.n);
    }
    rl_sampler_results_free(&res, NP * p.n);
    rl_sampler_destroy(&s);
    rl_model_destroy(&m);
}

int main(void) {
    for (int i = 0; i < (int)(sizeof s_configs / sizeof s_configs[0]); i++) {
        RL_TEST_RUN(s_test_engine, i);
    }
    RL_TEST_RUN(s_test_scheduling);
    for (int i = 0; i < 3; i++) {
        RL_TEST_RUN(s_test_sessions, i);
    }
    printf("sessions: kept cache vs prefill: logprobs within %.3g\n", s_worst_session);
    printf("worst sampler/forward logprob gap: %.3g\n", s_worst_gap);
    RL_TEST_DONE();
}

// rl_sample — the per-token sampling kernels of the sampler: log_softmax at a temperature, top-k
// selection, the top-p (nucleus) cutoff, the categorical draw, and the pipeline that chains them
// (temperature -> top-k -> top-p -> draw, the order of Hugging Face's logits warpers).
//
// Convention (DESIGN.md §4): the logprob reported for a drawn token is always
// log_softmax(logits / T) over the FULL vocabulary; top-k and top-p only shape which token is
// drawn. Temperature 0 means greedy (argmax, lowest id on ties) and reports log_softmax(logits)
// at T = 1, so a trainer scoring greedy samples uses T = 1.
//
// These are pure functions over one row of logits: no model, no RNG state (the caller passes the
// uniform draw), no allocation except in the work buffers the caller provides. Not a sampler of
// sequences (that is rl_sampler).
#ifndef RL_SAMPLE_H
#define RL_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// What shapes the draw of one token.
typedef struct {
    float temperature; // > 0: softmax(logits / T); 0: greedy
    int top_k;         // keep the k most likely tokens; 0 (or >= V) = off
    float top_p;       // keep the smallest most-likely set with mass >= top_p; 1 = off
} rl_sample_opts_t;

// Defaults: temperature 1, top_k 0 (off), top_p 1 (off).
void rl_sample_opts_default(rl_sample_opts_t *opts);

// The smallest temperature above 0 (greedy): logits divided by less can pass what a float holds
// (|logit| 100 / 3e-37) and every logprob turns NaN; 1e-6 keeps a margin of thirty decades.
#define RL_SAMPLE_MIN_TEMPERATURE 1e-6

// Returns 0 when opts is usable, RL_EINVAL otherwise (temperature < 0, not finite, or between 0
// and RL_SAMPLE_MIN_TEMPERATURE, top_k < 0, top_p outside (0, 1]) with the reason in err.
int rl_sample_opts_check(const rl_sample_opts_t *opts, char *err, size_t err_len);

// logp (V) = log_softmax(logits (V) / temperature), the normaliser summed in double; and, when
// probs is non-NULL, probs (V) = softmax(logits / temperature) from the same pass (one exp per
// entry). temperature <= 0 is taken as 1 (the greedy convention).
void rl_sample_log_softmax(float *logp, float *probs, const float *logits, int V,
                           float temperature);

// Index of the largest of x (V), the lowest index on ties. V >= 1.
int32_t rl_sample_argmax(const float *x, int V);

// Writes into idx the indices of the min(k, V) largest values of x (V), ordered by decreasing
// value, the lower index first on ties; returns min(k, V). O(V log k) with a heap. k >= 1.
int rl_sample_top_k(int32_t *idx, const float *x, int V, int k);
// The naive twin (full sort) for the tests; same contract.
int rl_sample_top_k_ref(int32_t *idx, const float *x, int V, int k);

// Nucleus cutoff over n candidates idx[0..n) sorted by decreasing probability p[idx[i]]: returns
// the length of the shortest prefix whose mass is >= top_p times the mass of all n candidates
// (so top-p applies to the distribution that top-k left, renormalised); at least 1.
int rl_sample_top_p(const float *p, const int32_t *idx, int n, float top_p);

// Categorical draw: returns i in [0, n) with probability w[i'] / sum, where i' = idx[i] (or i
// when idx is NULL), for a uniform u in [0, 1). The weights (>= 0) need not be normalised; sums
// are in double; a zero-weight entry is never returned. Returns the position i, not the token.
int rl_sample_categorical(const float *w, const int32_t *idx, int n, double u);

// The pipeline for one row. logits (V) in; writes logp (V) = log_softmax(logits / T) (T = 1
// when greedy) and probs (V) = softmax(logits / T), and uses idx (V) as scratch. u is the uniform
// for the draw (unused when greedy). Returns the drawn token and sets *logprob_p = logp[token].
// opts must pass rl_sample_opts_check. Cost: one exp per vocabulary entry, plus O(V log k) for
// top-k and, for top-p, a sort of the few most likely tokens.
int32_t rl_sample_token(float *logp, float *probs, int32_t *idx, const float *logits, int V,
                        const rl_sample_opts_t *opts, double u, float *logprob_p);

// The distribution rl_sample_token draws from, written out: dist (V) holds the renormalised
// probability of each kept token and 0 elsewhere (greedy: 1 at the argmax). Uses logp (V), probs
// (V) and idx (V) as scratch. Returns the number of kept tokens. For tests and diagnostics.
int rl_sample_dist(float *dist, float *logp, float *probs, int32_t *idx, const float *logits,
                   int V, const rl_sample_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif

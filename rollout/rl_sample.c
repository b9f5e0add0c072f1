// rl_sample — per-token sampling kernels; the contract is in rl_sample.h. Everything here is a
// function of one logits row and one uniform, so a sequence's tokens depend only on its logits
// and its own RNG stream, never on which other sequences share the batch.
#include "rl_sample.h"

#include "rl_err.h"

#include <math.h>
#include <stdlib.h>

void rl_sample_opts_default(rl_sample_opts_t *opts) {
    opts->temperature = 1.0f;
    opts->top_k = 0;
    opts->top_p = 1.0f;
}

int rl_sample_opts_check(const rl_sample_opts_t *o, char *err, size_t err_len) {
    if (!(o->temperature >= 0.0f) || !isfinite(o->temperature) ||
        (o->temperature > 0.0f && o->temperature < (float)RL_SAMPLE_MIN_TEMPERATURE)) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "temperature %g: must be 0 (greedy) or at least %g (the logits divided "
                       "by less overflow a float)",
                       (double)o->temperature, RL_SAMPLE_MIN_TEMPERATURE);
    }
    if (o->top_k < 0) {
        return rl_errf(err, err_len, RL_EINVAL, "top_k %d: must be >= 0 (0 = off)", o->top_k);
    }
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f)) {
        return rl_errf(err, err_len, RL_EINVAL, "top_p %g: must be in (0, 1] (1 = off)",
                       (double)o->top_p);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// log_softmax, argmax

void rl_sample_log_softmax(float *logp, float *probs, const float *logits, int V,
                           float temperature) {
    // log_softmax(x/T)_i = (x_i - max)/T - log(sum_j exp((x_j - max)/T)); the max shift keeps exp
    // in range and the sum in double keeps the normaliser exact to float precision for any V.
    // Each weight is one expf of an argument <= 0: its float rounding is ~1e-7 relative, and
    // only the large weights (arguments near 0) matter to the sum.
    double inv_t = temperature > 0.0f ? 1.0 / (double)temperature : 1.0;
    float mx = logits[0];
    for (int i = 1; i < V; i++) {
        mx = logits[i] > mx ? logits[i] : mx;
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        float e = expf((float)(((double)logits[i] - mx) * inv_t));
        if (probs) {
            probs[i] = e;
        }
        sum += e;
    }
    double lse = log(sum), inv_sum = 1.0 / sum;
    for (int i = 0; i < V; i++) {
        logp[i] = (float)(((double)logits[i] - mx) * inv_t - lse);
        if (probs) {
            probs[i] = (float)(probs[i] * inv_sum);
        }
    }
}

int32_t rl_sample_argmax(const float *x, int V) {
    int32_t best = 0;
    for (int i = 1; i < V; i++) {
        if (x[i] > x[best]) {
            best = i;
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------------------
// top-k: a min-heap of the k best seen so far, whose root is the worst of them

// a ranks before b: larger value, or the same value and a lower index
static inline int s_before(const float *x, int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
}

static void s_sift_down(int32_t *h, int n, int i, const float *x) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && s_before(x, h[w], h[l])) {
            w = l;
        }
        if (r < n && s_before(x, h[w], h[r])) {
            w = r;
        }
        if (w == i) {
            return;
        }
        int32_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

// Sorts a heap built by s_sift_down (worst at the root) into best-first order in place.
static void s_heap_sort(int32_t *h, int n, const float *x) {
    // moving the worst to the end each time leaves the best first
    for (int end = n - 1; end > 0; end--) {
        int32_t t = h[0];
        h[0] = h[end];
        h[end] = t;
        s_sift_down(h, end, 0, x);
    }
}

static void s_heapify(int32_t *h, int n, const float *x) {
    for (int i = n / 2 - 1; i >= 0; i--) {
        s_sift_down(h, n, i, x);
    }
}

int rl_sample_top_k(int32_t *idx, const float *x, int V, int k) {
    RL_ASSERT(k >= 1 && V >= 1);
    if (k > V) {
        k = V;
    }
    for (int i = 0; i < k; i++) {
        idx[i] = i;
    }
    s_heapify(idx, k, x);
    for (int32_t j = k; j < V; j++) {
        if (s_before(x, j, idx[0])) {
            idx[0] = j;
            s_sift_down(idx, k, 0, x);
        }
    }
    s_heap_sort(idx, k, x);
    return k;
}

typedef struct {
    float v;
    int32_t i;
} s_pair_t;

static int s_pair_cmp(const void *pa, const void *pb) {
    const s_pair_t *a = pa, *b = pb;
    if (a->v != b->v) {
        return a->v > b->v ? -1 : 1;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

int rl_sample_top_k_ref(int32_t *idx, const float *x, int V, int k) {
    RL_ASSERT(k >= 1 && V >= 1);
    s_pair_t *p = malloc((size_t)V * sizeof(*p));
    RL_ASSERT(p);
    for (int i = 0; i < V; i++) {
        p[i].v = x[i];
        p[i].i = i;
    }
    qsort(p, (size_t)V, sizeof(*p), s_pair_cmp);
    k = k > V ? V : k;
    for (int i = 0; i < k; i++) {
        idx[i] = p[i].i;
    }
    free(p);
    return k;
}

// ---------------------------------------------------------------------------------------------
// top-p, categorical

static double s_mass(const float *p, const int32_t *idx, int n) {
    double m = 0.0;
    for (int i = 0; i < n; i++) {
        m += p[idx ? idx[i] : i];
    }
    return m;
}

// Shortest prefix of idx (sorted, most likely first) whose mass reaches `target`.
static int s_top_p_prefix(const float *p, const int32_t *idx, int n, double target) {
    double c = 0.0;
    for (int i = 0; i < n; i++) {
        c += p[idx[i]];
        if (c >= target) {
            return i + 1;
        }
    }
    return n; // rounding left the target out of reach: keep everything
}

int rl_sample_top_p(const float *p, const int32_t *idx, int n, float top_p) {
    RL_ASSERT(n >= 1);
    return s_top_p_prefix(p, idx, n, (double)top_p * s_mass(p, idx, n));
}

int rl_sample_categorical(const float *w, const int32_t *idx, int n, double u) {
    RL_ASSERT(n >= 1);
    double target = u * s_mass(w, idx, n), c = 0.0;
    int last = 0; // the last entry with positive weight: where rounding at u -> 1 lands
    for (int i = 0; i < n; i++) {
        double wi = w[idx ? idx[i] : i];
        if (wi > 0.0) {
            c += wi;
            last = i;
            if (target < c) {
                return i;
            }
        }
    }
    return last;
}

// ---------------------------------------------------------------------------------------------
// the pipeline: temperature -> top-k -> top-p -> draw

// The kept set for a temperature > 0, from probs (V) = softmax(logits / T): returns n and fills
// idx[0..n) (most likely first), or returns V with *all_p = 1 when nothing is cut (idx untouched;
// the set is 0..V-1).
static int s_keep(int32_t *idx, const float *probs, const float *logits, int V,
                  const rl_sample_opts_t *o, int *all_p) {
    int top_k = o->top_k > 0 && o->top_k < V ? o->top_k : 0;
    int top_p = o->top_p < 1.0f;
    *all_p = 0;
    if (!top_k && !top_p) {
        *all_p = 1;
        return V;
    }
    if (top_k) {
        // ranked by the logits themselves: the order of probs without its rounding ties
        int n = rl_sample_top_k(idx, logits, V, top_k);
        return top_p ? rl_sample_top_p(probs, idx, n, o->top_p) : n;
    }
    // top-p alone. The nucleus is usually a few tokens: rank the top 64 first. Otherwise sort
    // only A = {i : p_i >= (1 - top_p) / V}: its complement holds less than 1 - top_p of the
    // mass, so A holds more than top_p, and A is a prefix of the sorted order, so the nucleus
    // is a prefix of sorted A. (The threshold is halved against rounding: a superset of A
    // keeps the argument.)
    double total = s_mass(probs, NULL, V), target = (double)o->top_p * total;
    int n = rl_sample_top_k(idx, logits, V, 64 < V ? 64 : V);
    if (n == V || s_mass(probs, idx, n) >= target) {
        return s_top_p_prefix(probs, idx, n, target);
    }
    double thr = 0.5 * (1.0 - (double)o->top_p) * total / V;
    n = 0;
    for (int32_t i = 0; i < V; i++) {
        if (probs[i] >= thr) {
            idx[n++] = i;
        }
    }
    s_heapify(idx, n, logits);
    s_heap_sort(idx, n, logits);
    return s_top_p_prefix(probs, idx, n, target);
}

int32_t rl_sample_token(float *logp, float *probs, int32_t *idx, const float *logits, int V,
                        const rl_sample_opts_t *o, double u, float *logprob_p) {
    int32_t tok;
    if (o->temperature == 0.0f) {
        rl_sample_log_softmax(logp, NULL, logits, V, 1.0f);
        tok = rl_sample_argmax(logits, V);
    } else {
        rl_sample_log_softmax(logp, probs, logits, V, o->temperature);
        int all;
        int n = s_keep(idx, probs, logits, V, o, &all);
        int i = rl_sample_categorical(probs, all ? NULL : idx, n, u);
        tok = all ? i : idx[i];
    }
    *logprob_p = logp[tok];
    return tok;
}

int rl_sample_dist(float *dist, float *logp, float *probs, int32_t *idx, const float *logits,
                   int V, const rl_sample_opts_t *o) {
    for (int i = 0; i < V; i++) {
        dist[i] = 0.0f;
    }
    if (o->temperature == 0.0f) {
        dist[rl_sample_argmax(logits, V)] = 1.0f;
        return 1;
    }
    rl_sample_log_softmax(logp, probs, logits, V, o->temperature);
    int all;
    int n = s_keep(idx, probs, logits, V, o, &all);
    const int32_t *set = all ? NULL : idx;
    double m = s_mass(probs, set, n);
    for (int i = 0; i < n; i++) {
        int32_t t = set ? set[i] : i;
        dist[t] = (float)(probs[t] / m);
    }
    return n;
}

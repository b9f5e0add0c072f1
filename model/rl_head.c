// rl_head — scalar head (critic values, reward-model scores) over rl_model's final norm output
// (see rl_head.h). Both readings are one map from an output element to the hidden row it reads
// (or none), followed by the same dot products forward and the same outer products backward.
#include "rl_head.h"

#include <stddef.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// which hidden row an output reads

enum { S_VALUES = 0, S_SCORE = 1 };

// values: output k = b*T + t reads row k - 1 when 1 <= t < lengths[b] (the state before token
// t); score: output k = b reads row b*T + lengths[b] - 1 (the last real token). -1: no row.
static ptrdiff_t s_row(int kind, int k, const int *lengths, int T) {
    if (kind == S_SCORE) {
        return (ptrdiff_t)k * T + lengths[k] - 1;
    }
    int b = k / T, t = k % T;
    return t >= 1 && t < lengths[b] ? (ptrdiff_t)k - 1 : -1;
}

// w . h in double, rounded once: C may be thousands, and a critic's values feed GAE differences
static float s_dot(const float *h, const float *w, int C) {
    double acc = 0.0;
    for (int c = 0; c < C; c++) {
        acc += (double)h[c] * (double)w[c];
    }
    return (float)acc;
}

// ---------------------------------------------------------------------------------------------
// forward / backward, shared by both readings (n_out = B*T for values, B for the score)

static void s_forward(int kind, float *out, const float *hidden, const float *w, const int *lengths,
                      int n_out, int T, int C) {
    for (int k = 0; k < n_out; k++) {
        ptrdiff_t r = s_row(kind, k, lengths, T);
        out[k] = r < 0 ? 0.0f : s_dot(hidden + (size_t)r * C, w, C);
    }
}

// out_k = w . h_{r(k)}  =>  dh_{r(k)} = dout_k w  (each row is read by at most one output, so
// set, not add);  dw = sum_k dout_k h_{r(k)}.
static void s_backward(int kind, float *dhidden, float *dw, const float *dout, const float *hidden,
                       const float *w, const int *lengths, int n_out, int B, int T, int C) {
    if (dhidden) {
        memset(dhidden, 0, (size_t)B * T * C * sizeof *dhidden);
        for (int k = 0; k < n_out; k++) {
            ptrdiff_t r = s_row(kind, k, lengths, T);
            if (r < 0) {
                continue;
            }
            float *dh = dhidden + (size_t)r * C;
            for (int c = 0; c < C; c++) {
                dh[c] = dout[k] * w[c];
            }
        }
    }
    if (dw) {
        // up to B*T terms per element: summed in double over blocks of columns, so the rows
        // are still read contiguously and the partial sums stay on the stack
        enum { S_BLOCK = 64 };
        double acc[S_BLOCK];
        for (int c0 = 0; c0 < C; c0 += S_BLOCK) {
            int nc = C - c0 < S_BLOCK ? C - c0 : S_BLOCK;
            memset(acc, 0, sizeof acc);
            for (int k = 0; k < n_out; k++) {
                ptrdiff_t r = s_row(kind, k, lengths, T);
                if (r < 0 || dout[k] == 0.0f) {
                    continue;
                }
                const float *h = hidden + (size_t)r * C + c0;
                double d = dout[k];
                for (int c = 0; c < nc; c++) {
                    acc[c] += d * (double)h[c];
                }
            }
            for (int c = 0; c < nc; c++) {
                dw[c0 + c] += (float)acc[c];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// public

void rl_head_values_forward(float *v, const float *hidden, const float *w, const int *lengths,
                            int B, int T, int C) {
    s_forward(S_VALUES, v, hidden, w, lengths, B * T, T, C);
}

void rl_head_values_backward(float *dhidden, float *dw, const float *dv, const float *hidden,
                             const float *w, const int *lengths, int B, int T, int C) {
    s_backward(S_VALUES, dhidden, dw, dv, hidden, w, lengths, B * T, B, T, C);
}

void rl_head_score_forward(float *s, const float *hidden, const float *w, const int *lengths, int B,
                           int T, int C) {
    s_forward(S_SCORE, s, hidden, w, lengths, B, T, C);
}

void rl_head_score_backward(float *dhidden, float *dw, const float *ds, const float *hidden,
                            const float *w, const int *lengths, int B, int T, int C) {
    s_backward(S_SCORE, dhidden, dw, ds, hidden, w, lengths, B, B, T, C);
}

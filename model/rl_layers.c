// rl_layers — fp32 layer kernels (forward + backward) of the decoder and their double twins.
// The fast kernels lean on OpenBLAS for every matmul (beta = 1 in backward so gradients
// accumulate) and use plain loops elsewhere; the `_ref` twins are the slow, obvious versions the
// tests trust. Derivations of each backward pass sit next to the code.
#include "rl_layers.h"

#include "rl_err.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// Element-wise kernels compiled once per vector width, picked by the CPU at load time (GCC on
// x86-64 with ifunc; elsewhere one baseline build).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    !defined(RL_NO_CLONES)
#define S_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define S_CLONES
#endif

// python's 2 * math.pi (M_PI is not in strict C11)
#define S_TWO_PI 6.283185307179586

// ----------------------------------------------------------------------------------------------
// exp for the element-wise kernels (rl_layers.h): e^x = 2^n e^r, n = round(x log2(e)) by the
// 1.5 * 2^23 rounding trick, r = x - n ln2 with ln2 in two parts (Cody and Waite; the first is
// exact in 9 bits, so n * C1 is exact), e^r by Cephes' degree-6 minimax polynomial of expf on
// |r| <= ln2 / 2 (relative error about 1e-7), 2^n through the exponent bits. x is clamped to
// [-126 ln2, 127.5 ln2] so that 2^n stays a normal float: below, e^x is 2^-126 instead of a
// subnormal or 0; above, 2^127 e^r instead of inf (no kernel here sees either: they are
// exponents of non-positive numbers or of gate values far inside). NaN propagates. No branch,
// no libm call: loops over it vectorise.

float rl_expf(float x) {
    const float lo = -87.3365478515625f, hi = 88.37626266479492f;
    x = x < lo ? lo : x; // comparisons are false for NaN, which passes through
    x = x > hi ? hi : x;
    const float magic = 12582912.0f; // 1.5 * 2^23: its last mantissa bits hold round(x log2 e)
    float v = x * 1.44269504088896341f + magic;
    float n = v - magic;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    // n's integer from v's bits (no float-to-int conversion, which NaN would make undefined),
    // in unsigned arithmetic: n + 127 is in [1, 254] for every x the clamps let through
    uint32_t vb;
    memcpy(&vb, &v, sizeof vb);
    uint32_t bits = (vb - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

// ----------------------------------------------------------------------------------------------
// threads

void rl_layers_set_threads(int n) {
    openblas_set_num_threads(n > 0 ? n : openblas_get_num_procs());
}

// ----------------------------------------------------------------------------------------------
// embedding

void rl_embedding_forward(float *out, const int32_t *ids, const float *wte, int BT, int C) {
    for (int i = 0; i < BT; i++) {
        float *o = out + (size_t)i * C;
        if (ids[i] < 0) {
            memset(o, 0, (size_t)C * sizeof(float));
        } else {
            memcpy(o, wte + (size_t)ids[i] * C, (size_t)C * sizeof(float));
        }
    }
}

void rl_embedding_backward(float *dwte, const float *dout, const int32_t *ids, int BT, int C) {
    for (int i = 0; i < BT; i++) {
        if (ids[i] < 0) {
            continue;
        }
        float *d = dwte + (size_t)ids[i] * C;
        const float *g = dout + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            d[c] += g[c];
        }
    }
}

// ----------------------------------------------------------------------------------------------
// RMSNorm: y = w * (x * r), r = (mean(x^2) + eps)^(-1/2). Rounded as transformers does in fp32:
// n = fl(x * r), y = fl(w * n). The sum of squares is accumulated in double (one row at a time,
// cheap next to the matmuls, and closer to torch's pairwise sum than a naive float loop).

void rl_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, float eps,
                        int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *y = out + (size_t)i * C;
        double ss = 0.0;
        for (int c = 0; c < C; c++) {
            ss += (double)x[c] * x[c];
        }
        float ms = (float)(ss / C);
        float r = 1.0f / sqrtf(ms + eps);
        if (rstd) {
            rstd[i] = r;
        }
        for (int c = 0; c < C; c++) {
            float n = x[c] * r;
            y[c] = w[c] * n;
        }
    }
}

// dr/dx_k = -r^3 x_k / C, so
//   dx_k = r (g_k w_k) - x_k r^3 / C * sum_j g_j w_j x_j;   dw_j += g_j x_j r.
void rl_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                         const float *w, const float *rstd, int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        const float *g = dout + (size_t)i * C;
        float r = rstd[i];
        if (dw) {
            for (int c = 0; c < C; c++) {
                dw[c] += g[c] * x[c] * r;
            }
        }
        if (dinp) {
            double dot = 0.0;
            for (int c = 0; c < C; c++) {
                dot += (double)g[c] * w[c] * x[c];
            }
            float k = (float)(dot * r * r * r / C);
            float *dx = dinp + (size_t)i * C;
            for (int c = 0; c < C; c++) {
                dx[c] += r * g[c] * w[c] - x[c] * k;
            }
        }
    }
}

// ----------------------------------------------------------------------------------------------
// linear

void rl_linear_forward(float *out, const float *inp, const float *w, const float *bias, int BT,
                       int C, int OC) {
    if (BT <= 0 || OC <= 0) {
        return;
    }
    if (bias) {
        for (int i = 0; i < BT; i++) {
            memcpy(out + (size_t)i * OC, bias, (size_t)OC * sizeof(float));
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BT, OC, C, 1.0f, inp, C, w, C,
                bias ? 1.0f : 0.0f, out, OC);
}

// dinp = dout @ w;  dw = dout^T @ inp;  dbias = column sums of dout.
void rl_linear_backward(float *dinp, float *dw, float *dbias, const float *dout,
                        const float *inp, const float *w, int BT, int C, int OC) {
    rl_linear_backward_ex(dinp, dw, dbias, dout, inp, w, BT, C, OC, 0);
}

void rl_linear_backward_ex(float *dinp, float *dw, float *dbias, const float *dout,
                           const float *inp, const float *w, int BT, int C, int OC, int set_inp) {
    if (BT <= 0) {
        return;
    }
    if (dinp) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BT, C, OC, 1.0f, dout, OC, w, C,
                    set_inp ? 0.0f : 1.0f, dinp, C);
    }
    if (dw) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, BT, 1.0f, dout, OC, inp, C,
                    1.0f, dw, C);
    }
    if (dbias) {
        for (int i = 0; i < BT; i++) {
            const float *g = dout + (size_t)i * OC;
            for (int o = 0; o < OC; o++) {
                dbias[o] += g[o];
            }
        }
    }
}

void rl_logits_forward(float *logits, const float *h, const float *w, int N, int C, int V) {
    rl_linear_forward(logits, h, w, NULL, N, C, V);
}

// ----------------------------------------------------------------------------------------------
// LoRA: y += s (x A^T) B^T. With xa = x A^T and dxa = s dy B:
//   dx += dxa A,  dA += dxa^T x,  dB += s dy^T xa.

void rl_lora_forward(float *out, float *xa, const float *inp, const float *A, const float *B,
                     float scale, int BT, int C, int R, int OC) {
    if (BT <= 0) {
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BT, R, C, 1.0f, inp, C, A, C, 0.0f, xa,
                R);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BT, OC, R, scale, xa, R, B, R, 1.0f, out,
                OC);
}

void rl_lora_backward(float *dinp, float *dA, float *dB, float *dxa, const float *dout,
                      const float *inp, const float *xa, const float *A, const float *B,
                      float scale, int BT, int C, int R, int OC) {
    if (BT <= 0) {
        return;
    }
    if (dB) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, R, BT, scale, dout, OC, xa, R,
                    1.0f, dB, R);
    }
    if (!dinp && !dA) {
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BT, R, OC, scale, dout, OC, B, R,
                0.0f, dxa, R);
    if (dinp) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BT, C, R, 1.0f, dxa, R, A, C, 1.0f,
                    dinp, C);
    }
    if (dA) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, R, C, BT, 1.0f, dxa, R, inp, C, 1.0f,
                    dA, C);
    }
}

// ----------------------------------------------------------------------------------------------
// dropout and residual

void rl_dropout_forward(float *out, const float *inp, const float *mask, size_t N) {
    for (size_t i = 0; i < N; i++) {
        out[i] = inp[i] * mask[i];
    }
}

void rl_dropout_backward(float *dinp, const float *dout, const float *mask, size_t N) {
    for (size_t i = 0; i < N; i++) {
        dinp[i] += dout[i] * mask[i];
    }
}

void rl_residual_forward(float *out, const float *a, const float *b, size_t N) {
    for (size_t i = 0; i < N; i++) {
        out[i] = a[i] + b[i];
    }
}

void rl_accumulate(float *dst, const float *src, size_t N) {
    for (size_t i = 0; i < N; i++) {
        dst[i] += src[i];
    }
}

// ----------------------------------------------------------------------------------------------
// RoPE. transformers (fp32): inv = 1 / (theta ** (arange(0, D, 2).float() / D)); the power's
// base is the python float theta cast to float32, `1 / t` is t.reciprocal(). The llama3 rescale
// then runs in float32 tensor ops whose python scalars are cast to float32:
//   wavelen = (1/inv) * f(2 pi);  lowf = inv / factor  where wavelen > orig/low_ff;
//   s = ((1/wavelen) * f(orig) - f(low_ff)) / f(high_ff - low_ff);
//   mid = ((1 - s) * inv) / factor + s * inv  where !(wavelen < orig/high_ff) && !(wavelen > ..)
// powf/cosf are taken as the correctly rounded double result (torch's are within 1 ulp).

void rl_rope_inv_freq(float *inv_freq, const rl_hf_config_t *cfg) {
    int D = cfg->head_dim;
    float base = (float)cfg->rope_theta;
    for (int i = 0; i < D / 2; i++) {
        float e = (float)(2 * i) / (float)D;
        float p = (float)pow((double)base, (double)e);
        inv_freq[i] = 1.0f / p;
    }
    if (cfg->rope_type != RL_ROPE_LLAMA3) {
        return;
    }
    float factor = (float)cfg->rope_factor;
    float low_ff = (float)cfg->rope_low_freq_factor;
    double orig_d = (double)cfg->rope_original_max_position_embeddings;
    float orig = (float)orig_d;
    float low_wavelen = (float)(orig_d / cfg->rope_low_freq_factor);
    float high_wavelen = (float)(orig_d / cfg->rope_high_freq_factor);
    float ff_span = (float)(cfg->rope_high_freq_factor - cfg->rope_low_freq_factor);
    float two_pi = (float)S_TWO_PI;
    for (int i = 0; i < D / 2; i++) {
        float inv = inv_freq[i];
        float wavelen = (1.0f / inv) * two_pi;
        float llama = wavelen > low_wavelen ? inv / factor : inv;
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
            float s = ((1.0f / wavelen) * orig - low_ff) / ff_span;
            float a = ((1.0f - s) * llama) / factor;
            float b = s * llama;
            llama = a + b;
        }
        inv_freq[i] = llama;
    }
}

// Angle fl(inv * (float)pos) (torch: inv_freq @ position_ids in fp32, k = 1); then
// y_j = fl(fl(x_j c) - fl(x_{j+h} s)), y_{j+h} = fl(fl(x_{j+h} c) + fl(x_j s)).
void rl_rope_forward(float *out, const float *inp, const float *inv_freq, const int *pos, int BT,
                     int NH, int D) {
    int half = D / 2;
    for (int i = 0; i < BT; i++) {
        float p = (float)pos[i];
        for (int j = 0; j < half; j++) {
            float ang = inv_freq[j] * p;
            float c = (float)cos((double)ang);
            float s = (float)sin((double)ang);
            for (int h = 0; h < NH; h++) {
                size_t o = ((size_t)i * NH + h) * D;
                float x0 = inp[o + j], x1 = inp[o + j + half];
                float a0 = x0 * c, b0 = x1 * s;
                float a1 = x1 * c, b1 = x0 * s;
                out[o + j] = a0 - b0;
                out[o + j + half] = a1 + b1;
            }
        }
    }
}

void rl_rope_table(float *cs, const float *inv_freq, int n_pos, int D) {
    int half = D / 2;
    for (int t = 0; t < n_pos; t++) {
        float p = (float)t;
        for (int j = 0; j < half; j++) {
            float ang = inv_freq[j] * p;
            cs[(size_t)t * D + j] = (float)cos((double)ang);
            cs[(size_t)t * D + half + j] = (float)sin((double)ang);
        }
    }
}

// cos and sin are even and odd to the bit (and fl(inv * -t) = -fl(inv * t)), so a negative
// position takes its row of the table with the sine negated: the rl_rope_forward results.
void rl_rope_forward_table(float *out, const float *inp, const float *cs, const int *pos, int BT,
                           int NH, int D) {
    int half = D / 2;
    for (int i = 0; i < BT; i++) {
        int p = pos[i] < 0 ? -pos[i] : pos[i];
        const float *c = cs + (size_t)p * D, *sn = c + half;
        float sg = pos[i] < 0 ? -1.0f : 1.0f;
        for (int h = 0; h < NH; h++) {
            size_t o = ((size_t)i * NH + h) * D;
            for (int j = 0; j < half; j++) {
                float s = sg * sn[j];
                float x0 = inp[o + j], x1 = inp[o + j + half];
                float a0 = x0 * c[j], b0 = x1 * s;
                float a1 = x1 * c[j], b1 = x0 * s;
                out[o + j] = a0 - b0;
                out[o + j + half] = a1 + b1;
            }
        }
    }
}

// Forward is y = R x with R = [[c, -s], [s, c]] on (x_j, x_{j+h}); backward is R^T.
void rl_rope_backward(float *dinp, const float *dout, const float *inv_freq, const int *pos,
                      int BT, int NH, int D) {
    int half = D / 2;
    for (int i = 0; i < BT; i++) {
        float p = (float)pos[i];
        for (int j = 0; j < half; j++) {
            float ang = inv_freq[j] * p;
            float c = (float)cos((double)ang);
            float s = (float)sin((double)ang);
            for (int h = 0; h < NH; h++) {
                size_t o = ((size_t)i * NH + h) * D;
                float g0 = dout[o + j], g1 = dout[o + j + half];
                dinp[o + j] += g0 * c + g1 * s;
                dinp[o + j + half] += g1 * c - g0 * s;
            }
        }
    }
}

// ----------------------------------------------------------------------------------------------
// Causal GQA attention. Everything runs on one query/key stream at a time (one (b, h), or one
// cached sequence's head): queries at positions p0..p0+n-1 (row stride ldq) against keys and
// values 0..p0+n-1 (row stride ldk). Query rows go in blocks of S_ATT_BLK: a block whose last
// position is t needs only keys 0..t, so the scores of a block are one (rb, nk) sgemm, which
// skips most of the masked upper triangle and bounds the scratch to S_ATT_BLK rows of keys.
// S = scale Q K^T, causal softmax in place, O = P V. lse_t = max + log(sum exp(S - max)) lets
// backward recompute P = exp(S - lse) without storing (B,NH,T,T).
enum { S_ATT_BLK = 64 };

static int s_min(int a, int b) {
    return a < b ? a : b;
}

// row[j] = e^(row[j] - m) for j < n: the softmax numerators (rl_expf; vector clones).
S_CLONES static void s_exp_shift(float *row, int n, float m) {
    for (int j = 0; j < n; j++) {
        row[j] = rl_expf(row[j] - m);
    }
}

// Scores of query rows r0..r0+rb-1 (positions p0+r0..) against keys 0..nk-1 into S (rb,nk):
// key j at k + j*ldk, or (kt) K transposed, key j's element d at k + d*ldk + j.
static void s_att_scores(float *S, const float *q, int ldq, const float *k, int ldk, int kt, int r0,
                         int rb, int nk, int D, float scale) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, kt ? CblasNoTrans : CblasTrans, rb, nk, D, scale,
                q + (size_t)r0 * ldq, ldq, k, ldk, 0.0f, S, nk);
}

static void s_att_fwd(float *o, int ldo, float *lse, const float *q, int ldq, const float *k,
                      int ldk, int kt, const float *v, int ldv, int p0, int n, int D, float scale,
                      float *S) {
    for (int r0 = 0; r0 < n; r0 += S_ATT_BLK) {
        int rb = s_min(S_ATT_BLK, n - r0), nk = p0 + r0 + rb;
        s_att_scores(S, q, ldq, k, ldk, kt, r0, rb, nk, D, scale);
        for (int i = 0; i < rb; i++) {
            int t = p0 + r0 + i; // keys 0..t are visible
            float *row = S + (size_t)i * nk;
            float mx = row[0];
            for (int j = 1; j <= t; j++) {
                mx = row[j] > mx ? row[j] : mx;
            }
            s_exp_shift(row, t + 1, mx);
            double sum = 0.0;
            for (int j = 0; j <= t; j++) {
                sum += row[j];
            }
            float inv = (float)(1.0 / sum);
            for (int j = 0; j <= t; j++) {
                row[j] *= inv;
            }
            for (int j = t + 1; j < nk; j++) {
                row[j] = 0.0f;
            }
            if (lse) {
                lse[r0 + i] = mx + (float)log(sum);
            }
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rb, D, nk, 1.0f, S, nk, v, ldv, 0.0f,
                    o + (size_t)r0 * ldo, ldo);
    }
}

size_t rl_attention_scratch_floats(int T) {
    return 2 * (size_t)s_min(T, S_ATT_BLK) * (size_t)T;
}

// Where sequence b lies: padded (starts NULL: rows b*T.., lengths[b] real; lse of head h at
// (b*NH + h)*T) or packed (rows starts[b]..starts[b+1]-1; lse of head h at starts[b]*NH + h*len).
typedef struct {
    size_t row0, lse0, lse_h; // first row; lse of head h at lse0 + h*lse_h
    int len;
} s_seq_t;

static s_seq_t s_seq(const int *starts, const int *lengths, int b, int T, int NH) {
    s_seq_t q;
    if (starts) {
        q.len = starts[b + 1] - starts[b];
        q.row0 = (size_t)starts[b];
        q.lse0 = (size_t)starts[b] * NH;
        q.lse_h = (size_t)q.len;
    } else {
        q.len = lengths[b];
        q.row0 = (size_t)b * T;
        q.lse0 = (size_t)b * NH * T;
        q.lse_h = (size_t)T;
    }
    return q;
}

static void s_attention_forward(float *out, float *lse, const float *q, const float *k,
                                const float *v, const int *starts, const int *lengths, int B, int T,
                                int NH, int NKV, int D, float *scratch) {
    float scale = 1.0f / sqrtf((float)D);
    int qs = NH * D, ks = NKV * D, grp = NH / NKV;
    for (int b = 0; b < B; b++) {
        s_seq_t sq = s_seq(starts, lengths, b, T, NH);
        int L = sq.len;
        for (int h = 0; h < NH; h++) {
            int g = h / grp;
            const float *qb = q + sq.row0 * qs + (size_t)h * D;
            const float *kb = k + sq.row0 * ks + (size_t)g * D;
            const float *vb = v + sq.row0 * ks + (size_t)g * D;
            float *ob = out + sq.row0 * qs + (size_t)h * D;
            float *lb = lse ? lse + sq.lse0 + (size_t)h * sq.lse_h : NULL;
            for (int t = L > 0 ? L : 0; !starts && t < T; t++) {
                memset(ob + (size_t)t * qs, 0, (size_t)D * sizeof(float));
                if (lb) {
                    lb[t] = 0.0f;
                }
            }
            if (L > 0) {
                s_att_fwd(ob, qs, lb, qb, qs, kb, ks, 0, vb, ks, 0, L, D, scale, scratch);
            }
        }
    }
}

void rl_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                          const int *lengths, int B, int T, int NH, int NKV, int D,
                          float *scratch) {
    s_attention_forward(out, lse, q, k, v, NULL, lengths, B, T, NH, NKV, D, scratch);
}

void rl_attention_forward_packed(float *out, float *lse, const float *q, const float *k,
                                 const float *v, const int *starts, int B, int NH, int NKV, int D,
                                 float *scratch) {
    s_attention_forward(out, lse, q, k, v, starts, NULL, B, 0, NH, NKV, D, scratch);
}

// Per row block (keys 0..nk-1), with P recomputed from lse:
//   dP = dO V^T;  dv += P^T dO;  dS = P * (dP - rowsum(P * dP));  dq += scale dS K;
//   dk += scale dS^T Q.
static void s_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                 const float *k, const float *v, const float *lse,
                                 const int *starts, const int *lengths, int B, int T, int NH,
                                 int NKV, int D, float *scratch) {
    float scale = 1.0f / sqrtf((float)D);
    int qs = NH * D, ks = NKV * D, grp = NH / NKV;
    int Tmax = T;
    for (int b = 0; starts && b < B; b++) {
        Tmax = starts[b + 1] - starts[b] > Tmax ? starts[b + 1] - starts[b] : Tmax;
    }
    float *P = scratch;
    float *dP = scratch + (size_t)s_min(Tmax, S_ATT_BLK) * Tmax;
    for (int b = 0; b < B; b++) {
        s_seq_t sq = s_seq(starts, lengths, b, T, NH);
        int L = sq.len;
        for (int h = 0; L > 0 && h < NH; h++) {
            int g = h / grp;
            size_t qo = sq.row0 * qs + (size_t)h * D;
            size_t ko = sq.row0 * ks + (size_t)g * D;
            const float *lb = lse + sq.lse0 + (size_t)h * sq.lse_h;
            for (int r0 = 0; r0 < L; r0 += S_ATT_BLK) {
                int rb = s_min(S_ATT_BLK, L - r0), nk = r0 + rb;
                const float *qblk = q + qo + (size_t)r0 * qs;
                const float *dob = dout + qo + (size_t)r0 * qs;
                s_att_scores(P, q + qo, qs, k + ko, ks, 0, r0, rb, nk, D, scale);
                for (int i = 0; i < rb; i++) {
                    int t = r0 + i;
                    float *row = P + (size_t)i * nk;
                    s_exp_shift(row, t + 1, lb[t]);
                    for (int j = t + 1; j < nk; j++) {
                        row[j] = 0.0f;
                    }
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rb, nk, D, 1.0f, dob, qs,
                            v + ko, ks, 0.0f, dP, nk);
                if (dv) {
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, D, rb, 1.0f, P, nk,
                                dob, qs, 1.0f, dv + ko, ks);
                }
                for (int i = 0; i < rb; i++) { // softmax backward, in place in dP
                    int t = r0 + i;
                    float *pr = P + (size_t)i * nk;
                    float *dr = dP + (size_t)i * nk;
                    double dot = 0.0;
                    for (int j = 0; j <= t; j++) {
                        dot += (double)pr[j] * dr[j];
                    }
                    float fd = (float)dot;
                    for (int j = 0; j <= t; j++) {
                        dr[j] = pr[j] * (dr[j] - fd);
                    }
                    for (int j = t + 1; j < nk; j++) {
                        dr[j] = 0.0f;
                    }
                }
                if (dq) {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rb, D, nk, scale, dP,
                                nk, k + ko, ks, 1.0f, dq + qo + (size_t)r0 * qs, qs);
                }
                if (dk) {
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, D, rb, scale, dP, nk,
                                qblk, qs, 1.0f, dk + ko, ks);
                }
            }
        }
    }
}

void rl_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *lse, const int *lengths,
                           int B, int T, int NH, int NKV, int D, float *scratch) {
    s_attention_backward(dq, dk, dv, dout, q, k, v, lse, NULL, lengths, B, T, NH, NKV, D, scratch);
}

void rl_attention_backward_packed(float *dq, float *dk, float *dv, const float *dout,
                                  const float *q, const float *k, const float *v, const float *lse,
                                  const int *starts, int B, int NH, int NKV, int D,
                                  float *scratch) {
    s_attention_backward(dq, dk, dv, dout, q, k, v, lse, starts, NULL, B, 0, NH, NKV, D, scratch);
}

size_t rl_attention_ldk(int max_len) {
    return ((size_t)(max_len > 0 ? max_len : 1) + 15) & ~(size_t)15;
}

size_t rl_attention_prefill_scratch_floats(int n, int n_ctx) {
    size_t pre = (size_t)s_min(n, S_ATT_BLK) * (size_t)n_ctx, dec = 2 * rl_attention_ldk(n_ctx);
    return pre > dec ? pre : dec;
}

void rl_attention_prefill(float *out, const float *q, const float *kt, size_t ldk,
                          const float *vcache, size_t ldv, int pos0, int n, int NH, int NKV, int D,
                          float *scratch) {
    float scale = 1.0f / sqrtf((float)D);
    int grp = NH / NKV;
    for (int h = 0; h < NH; h++) {
        int g = h / grp;
        s_att_fwd(out + (size_t)h * D, NH * D, NULL, q + (size_t)h * D, NH * D,
                  kt + (size_t)g * D * ldk, (int)ldk, 1, vcache + (size_t)g * D, (int)ldv, pos0, n,
                  D, scale, scratch);
    }
}

// 16 floats as one value (a GNU C vector: GCC and clang lower it to one AVX-512 register, two
// AVX2 or four SSE ones; element-wise IEEE operations, so every width computes the same bits).
typedef float s_v16 __attribute__((vector_size(64)));
typedef float s_v16u __attribute__((vector_size(64), aligned(4), may_alias));

// Vector loads and stores of 16 floats at any alignment (macros: a function returning a 64-byte
// vector has a different ABI per target).
#define S_LD(p) (*(const s_v16u *)(p))
#define S_ST(p, x) (*(s_v16u *)(p) = (x))
typedef int s_v16i __attribute__((vector_size(64)));

// For heads h < nh (1 or 2) of one kv head: s[h*ls + 16*v + j] = scale * q_h . K^T[:, 16*v + j]
// for v < nv (1..4) blocks of 16 keys, q_h at q + h*D: nh*nv running sums over d (independent
// chains; the heads share each load of K). nh and nv are constants where this is inlined.
static inline __attribute__((always_inline)) void s_scores16(float *s, size_t ls, const float *q,
                                                             const float *kt, size_t ldk, int D,
                                                             int nh, int nv, float scale) {
    const s_v16 z = {0}; // z + x: x in every element
    s_v16 a[2][4] = {{z, z, z, z}, {z, z, z, z}};
    for (int d = 0; d < D; d++) {
        const float *kr = kt + (size_t)d * ldk;
        for (int v = 0; v < nv; v++) {
            const s_v16 k = S_LD(kr + 16 * v);
            for (int h = 0; h < nh; h++) {
                a[h][v] += (z + q[(size_t)h * D + d]) * k;
            }
        }
    }
    for (int h = 0; h < nh; h++) {
        for (int v = 0; v < nv; v++) {
            S_ST(s + h * ls + 16 * v, a[h][v] * scale);
        }
    }
}

// Softmax of the first n of s in place (nb = ceil(n/16) blocks; the padding past n set to -inf
// first): max and e^(s - max) 16 at a time; the sum in double over four interleaved partial sums.
static inline __attribute__((always_inline)) void s_softmax16(float *s, int n, int nb) {
    for (int j = n; j < 16 * nb; j++) {
        s[j] = -INFINITY;
    }
    s_v16 m = S_LD(s);
    for (int k = 1; k < nb; k++) {
        s_v16 x = S_LD(s + 16 * k);
        s_v16i gt = x > m;
        m = (s_v16)(((s_v16i)x & gt) | ((s_v16i)m & ~gt));
    }
    float mx = m[0];
    for (int j = 1; j < 16; j++) {
        mx = m[j] > mx ? m[j] : mx;
    }
    s_exp_shift(s, 16 * nb, mx); // e^-inf = 0 past n
    double sum4[4] = {0.0, 0.0, 0.0, 0.0};
    for (int j = 0; j < 16 * nb; j += 4) {
        for (int k = 0; k < 4; k++) {
            sum4[k] += s[j + k];
        }
    }
    const float inv = (float)(1.0 / ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3])));
    for (int j = 0; j < 16 * nb; j++) {
        s[j] *= inv;
    }
}

// out_h (D) = p_h V for heads h < nh (1 or 2; out_h at out + h*D, p_h at p + h*lp) in blocks of
// 16 floats, each summed over keys j = 0, 1, 2, 3 (mod 4) apart, then added; the heads share
// each load of V. nh is a constant where this is inlined.
static inline __attribute__((always_inline)) void
s_pv16(float *out, const float *p, size_t lp, const float *v, size_t ldv, int n, int D, int nh) {
    const s_v16 z = {0};
    int d0 = 0;
    for (; d0 + 16 <= D; d0 += 16) {
        s_v16 e[2][4] = {{z, z, z, z}, {z, z, z, z}};
        const float *vd = v + d0;
        int j = 0;
        for (; j + 4 <= n; j += 4) {
            for (int c = 0; c < 4; c++) {
                const s_v16 x = S_LD(vd + (size_t)(j + c) * ldv);
                for (int h = 0; h < nh; h++) {
                    e[h][c] += (z + p[h * lp + j + c]) * x;
                }
            }
        }
        for (int c = 0; c < 3; c++) { // the last n mod 4 keys (c a constant once unrolled)
            if (j + c < n) {
                const s_v16 x = S_LD(vd + (size_t)(j + c) * ldv);
                for (int h = 0; h < nh; h++) {
                    e[h][c] += (z + p[h * lp + j + c]) * x;
                }
            }
        }
        for (int h = 0; h < nh; h++) {
            S_ST(out + (size_t)h * D + d0, (e[h][0] + e[h][1]) + (e[h][2] + e[h][3]));
        }
    }
    for (; d0 < D; d0++) {
        for (int h = 0; h < nh; h++) {
            float e[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int j = 0; j < n; j++) {
                e[j & 3] += p[h * lp + j] * v[(size_t)j * ldv + d0];
            }
            out[(size_t)h * D + d0] = (e[0] + e[1]) + (e[2] + e[3]);
        }
    }
}

// nh (1 or 2) query heads of one kv head over n keys: scores (s: nh rows of ls >= 16 ceil(n/16)
// floats), softmax, p V. Every vector clone does the same additions in the same order.
static inline __attribute__((always_inline)) void
s_decode_heads(float *out, const float *q, const float *kt, size_t ldk, const float *v, size_t ldv,
               int n, int D, float scale, float *s, size_t ls, int nh) {
    const int nb = (n + 15) / 16;
    int b = 0;
    for (; b + 4 <= nb; b += 4) {
        s_scores16(s + 16 * b, ls, q, kt + 16 * b, ldk, D, nh, 4, scale);
    }
    switch (nb - b) {
    case 3: s_scores16(s + 16 * b, ls, q, kt + 16 * b, ldk, D, nh, 3, scale); break;
    case 2: s_scores16(s + 16 * b, ls, q, kt + 16 * b, ldk, D, nh, 2, scale); break;
    case 1: s_scores16(s + 16 * b, ls, q, kt + 16 * b, ldk, D, nh, 1, scale); break;
    default: break;
    }
    for (int h = 0; h < nh; h++) {
        s_softmax16(s + h * ls, n, nb);
    }
    s_pv16(out, s, ls, v, ldv, n, D, nh);
}

S_CLONES static void s_decode_pair(float *out, const float *q, const float *kt, size_t ldk,
                                   const float *v, size_t ldv, int n, int D, float scale, float *s,
                                   size_t ls) {
    s_decode_heads(out, q, kt, ldk, v, ldv, n, D, scale, s, ls, 2);
}

S_CLONES static void s_decode_one(float *out, const float *q, const float *kt, size_t ldk,
                                  const float *v, size_t ldv, int n, int D, float scale, float *s) {
    s_decode_heads(out, q, kt, ldk, v, ldv, n, D, scale, s, 0, 1);
}

void rl_attention_decode(float *out, const float *q, const float *kt, size_t ldk,
                         const float *vcache, size_t ldv, int n_ctx, int NH, int NKV, int D,
                         float *scratch) {
    const float scale = 1.0f / sqrtf((float)D);
    const int grp = NH / NKV;
    const size_t ls = rl_attention_ldk(n_ctx);
    for (int g = 0; g < NKV; g++) { // the query heads g*grp.. of kv head g, two at a time
        const float *ktg = kt + (size_t)g * D * ldk, *vg = vcache + (size_t)g * D;
        int h = g * grp;
        for (; h + 2 <= (g + 1) * grp; h += 2) {
            s_decode_pair(out + (size_t)h * D, q + (size_t)h * D, ktg, ldk, vg, ldv, n_ctx, D,
                          scale, scratch, ls);
        }
        if (h < (g + 1) * grp) {
            s_decode_one(out + (size_t)h * D, q + (size_t)h * D, ktg, ldk, vg, ldv, n_ctx, D, scale,
                         scratch);
        }
    }
}

// ----------------------------------------------------------------------------------------------
// SwiGLU: y = silu(g) u; silu(x) = x s, s = sigmoid(x); silu'(x) = s + x s (1 - s).
// Built for AVX-512, AVX2 and the baseline, chosen at load time (GCC's target_clones): these
// loops are a division and rl_expf per element, 3-5x faster 16 wide than 4 wide. Every clone
// computes the same IEEE operations in the same order (no FMA contraction: -ffp-contract=off
// for this file), so the results do not depend on the machine's vector width.

S_CLONES void rl_swiglu_forward(float *out, const float *gate, const float *up, size_t N) {
    if (out == gate) { // in place: a loop of its own, or the vectoriser's overlap check fails
        for (size_t i = 0; i < N; i++) {
            float x = out[i];
            out[i] = (x / (1.0f + rl_expf(-x))) * up[i];
        }
        return;
    }
    for (size_t i = 0; i < N; i++) {
        float x = gate[i], u = up[i];
        out[i] = (x / (1.0f + rl_expf(-x))) * u;
    }
}

// acc: dgate/dup += the gradients; else = them (the old contents unread).
static inline void s_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                     const float *up, size_t N, int acc) {
    for (size_t i = 0; i < N; i++) {
        float x = gate[i];
        float s = 1.0f / (1.0f + rl_expf(-x));
        if (dgate) {
            dgate[i] = (acc ? dgate[i] : 0.0f) + dout[i] * up[i] * s * (1.0f + x * (1.0f - s));
        }
        if (dup) {
            dup[i] = (acc ? dup[i] : 0.0f) + dout[i] * x * s;
        }
    }
}

S_CLONES void rl_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, size_t N) {
    s_swiglu_backward(dgate, dup, dout, gate, up, N, 1);
}

S_CLONES void rl_swiglu_backward_set(float *dgate, float *dup, const float *dout, const float *gate,
                                     const float *up, size_t N) {
    s_swiglu_backward(dgate, dup, dout, gate, up, N, 0);
}

// ----------------------------------------------------------------------------------------------
// Logprob head. Rows with work are packed (hc) chunk at a time; logits z = fl(fl(h w^T) / temp)
// as torch's `logits / temperature`. Per row, with m = max z, S = sum exp(z - m) (double):
// lse = m + log S, logp_t = z_t - lse, H = lse - sum p z.

size_t rl_logprob_scratch_floats(int chunk, int C, int V) {
    return (size_t)chunk * ((size_t)V + 2 * (size_t)C);
}

// Packs up to `chunk` rows, from row *i_p on, that have work (a target; in backward also a
// non-zero dlogp or dentropy) into hc (chunk,C); returns how many, their row indices in idx.
static int s_pack(const float *h, int N, int C, int chunk, int *i_p, int *idx,
                  const int32_t *targets, const float *dlogp, const float *dent, float *hc) {
    int n = 0;
    while (*i_p < N && n < chunk) {
        int i = (*i_p)++;
        if (targets[i] < 0) {
            continue;
        }
        if (dlogp && dlogp[i] == 0.0f && (!dent || dent[i] == 0.0f)) {
            continue;
        }
        idx[n] = i;
        memcpy(hc + (size_t)n * C, h + (size_t)i * C, (size_t)C * sizeof(float));
        n++;
    }
    return n;
}

// Rows per chunk at most (the packed row indices live on the stack).
enum { S_PACK_MAX = 256 };

// z (n,V) = fl(hc w^T) / temperature for the packed rows.
static void s_chunk_logits(float *z, const float *hc, const float *w, float temperature, int n,
                           int C, int V) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, V, C, 1.0f, hc, C, w, C, 0.0f, z, V);
    if (temperature != 1.0f) {
        size_t m = (size_t)n * V;
        for (size_t e = 0; e < m; e++) {
            z[e] /= temperature;
        }
    }
}

// Row statistics: lse and sum_v p_v z_v.
// expf (1 ulp) with double sums: as accurate as needed and ~3x cheaper than exp() over V = 152k.
static float s_row_max(const float *z, int V) {
    float mx = z[0];
    for (int v = 1; v < V; v++) {
        mx = z[v] > mx ? z[v] : mx;
    }
    return mx;
}

static void s_row_stats(const float *z, int V, double *lse_p, double *pz_p) {
    float mx = s_row_max(z, V);
    double sum = 0.0, sz = 0.0;
    for (int v = 0; v < V; v++) {
        float e = expf(z[v] - mx);
        sum += e;
        sz += (double)e * z[v];
    }
    *lse_p = mx + log(sum);
    *pz_p = sz / sum;
}

void rl_logprob_forward(float *logp, float *entropy, const float *h, const float *w,
                        const int32_t *targets, float temperature, int N, int C, int V,
                        float *scratch, int chunk) {
    if (chunk > S_PACK_MAX) {
        chunk = S_PACK_MAX;
    }
    float *hc = scratch;
    float *z = scratch + (size_t)chunk * C;
    int idx[S_PACK_MAX];
    for (int i = 0; i < N; i++) {
        logp[i] = 0.0f;
        if (entropy) {
            entropy[i] = 0.0f;
        }
    }
    int next = 0;
    for (;;) {
        int n = s_pack(h, N, C, chunk, &next, idx, targets, NULL, NULL, hc);
        if (n == 0) {
            break;
        }
        s_chunk_logits(z, hc, w, temperature, n, C, V);
        for (int r = 0; r < n; r++) {
            const float *zr = z + (size_t)r * V;
            double lse, pz;
            s_row_stats(zr, V, &lse, &pz);
            logp[idx[r]] = (float)(zr[targets[idx[r]]] - lse);
            if (entropy) {
                entropy[idx[r]] = (float)(lse - pz);
            }
        }
    }
}

// With p = softmax(z), log p_v = z_v - lse, H = -sum p log p:
//   d logp_t / dz_v = [v == t] - p_v;   dH/dz_v = -p_v (log p_v + H).
void rl_logprob_backward(float *dh, float *dw, const float *dlogp, const float *dentropy,
                         const float *h, const float *w, const int32_t *targets,
                         float temperature, int N, int C, int V, float *scratch, int chunk) {
    if (chunk > S_PACK_MAX) {
        chunk = S_PACK_MAX;
    }
    float *hc = scratch;
    float *z = scratch + (size_t)chunk * C;
    float *dhc = z + (size_t)chunk * V;
    int idx[S_PACK_MAX];
    int next = 0;
    for (;;) {
        int n = s_pack(h, N, C, chunk, &next, idx, targets, dlogp, dentropy, hc);
        if (n == 0) {
            break;
        }
        s_chunk_logits(z, hc, w, temperature, n, C, V);
        for (int r = 0; r < n; r++) {
            float *zr = z + (size_t)r * V;
            int i = idx[r];
            double gl = dlogp[i];
            double ge = dentropy ? dentropy[i] : 0.0;
            double inv_t = 1.0 / temperature;
            if (ge == 0.0) { // the usual case: dz = gl (onehot - p), two passes, in place
                float mx = s_row_max(zr, V);
                double sum = 0.0;
                for (int v = 0; v < V; v++) {
                    zr[v] = expf(zr[v] - mx);
                    sum += zr[v];
                }
                float k = (float)(-gl * inv_t / sum);
                for (int v = 0; v < V; v++) {
                    zr[v] *= k;
                }
            } else {
                double lse, pz;
                s_row_stats(zr, V, &lse, &pz);
                double H = lse - pz;
                for (int v = 0; v < V; v++) {
                    double lp = zr[v] - lse;
                    double p = exp(lp);
                    double dz = -gl * p - ge * p * (lp + H);
                    zr[v] = (float)(dz * inv_t);
                }
            }
            zr[targets[i]] += (float)(gl * inv_t);
        }
        if (dh) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, C, V, 1.0f, z, V, w, C,
                        0.0f, dhc, C);
            for (int r = 0; r < n; r++) {
                rl_accumulate(dh + (size_t)idx[r] * C, dhc + (size_t)r * C, (size_t)C);
            }
        }
        if (dw) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, n, 1.0f, z, V, hc, C, 1.0f,
                        dw, C);
        }
    }
}

// ==============================================================================================
// double-precision twins: plain loops, no BLAS, written for obviousness.

void rl_embedding_forward_ref(double *out, const int32_t *ids, const double *wte, int BT, int C) {
    for (int i = 0; i < BT; i++) {
        for (int c = 0; c < C; c++) {
            out[(size_t)i * C + c] = ids[i] < 0 ? 0.0 : wte[(size_t)ids[i] * C + c];
        }
    }
}

void rl_embedding_backward_ref(double *dwte, const double *dout, const int32_t *ids, int BT,
                               int C) {
    for (int i = 0; i < BT; i++) {
        if (ids[i] >= 0) {
            for (int c = 0; c < C; c++) {
                dwte[(size_t)ids[i] * C + c] += dout[(size_t)i * C + c];
            }
        }
    }
}

void rl_rmsnorm_forward_ref(double *out, double *rstd, const double *inp, const double *w,
                            double eps, int N, int C) {
    for (int i = 0; i < N; i++) {
        const double *x = inp + (size_t)i * C;
        double ss = 0.0;
        for (int c = 0; c < C; c++) {
            ss += x[c] * x[c];
        }
        double r = 1.0 / sqrt(ss / C + eps);
        if (rstd) {
            rstd[i] = r;
        }
        for (int c = 0; c < C; c++) {
            out[(size_t)i * C + c] = w[c] * x[c] * r;
        }
    }
}

void rl_rmsnorm_backward_ref(double *dinp, double *dw, const double *dout, const double *inp,
                             const double *w, const double *rstd, int N, int C) {
    for (int i = 0; i < N; i++) {
        const double *x = inp + (size_t)i * C;
        const double *g = dout + (size_t)i * C;
        double r = rstd[i];
        double dot = 0.0;
        for (int c = 0; c < C; c++) {
            dot += g[c] * w[c] * x[c];
        }
        for (int c = 0; c < C; c++) {
            if (dw) {
                dw[c] += g[c] * x[c] * r;
            }
            if (dinp) {
                dinp[(size_t)i * C + c] += r * g[c] * w[c] - x[c] * r * r * r * dot / C;
            }
        }
    }
}

void rl_linear_forward_ref(double *out, const double *inp, const double *w, const double *bias,
                           int BT, int C, int OC) {
    for (int i = 0; i < BT; i++) {
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) {
                s += inp[(size_t)i * C + c] * w[(size_t)o * C + c];
            }
            out[(size_t)i * OC + o] = s;
        }
    }
}

void rl_linear_backward_ref(double *dinp, double *dw, double *dbias, const double *dout,
                            const double *inp, const double *w, int BT, int C, int OC) {
    for (int i = 0; i < BT; i++) {
        for (int o = 0; o < OC; o++) {
            double g = dout[(size_t)i * OC + o];
            if (dbias) {
                dbias[o] += g;
            }
            for (int c = 0; c < C; c++) {
                if (dinp) {
                    dinp[(size_t)i * C + c] += g * w[(size_t)o * C + c];
                }
                if (dw) {
                    dw[(size_t)o * C + c] += g * inp[(size_t)i * C + c];
                }
            }
        }
    }
}

void rl_lora_forward_ref(double *out, double *xa, const double *inp, const double *A,
                         const double *B, double scale, int BT, int C, int R, int OC) {
    for (int i = 0; i < BT; i++) {
        for (int r = 0; r < R; r++) {
            double s = 0.0;
            for (int c = 0; c < C; c++) {
                s += inp[(size_t)i * C + c] * A[(size_t)r * C + c];
            }
            xa[(size_t)i * R + r] = s;
        }
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (int r = 0; r < R; r++) {
                s += xa[(size_t)i * R + r] * B[(size_t)o * R + r];
            }
            out[(size_t)i * OC + o] += scale * s;
        }
    }
}

void rl_lora_backward_ref(double *dinp, double *dA, double *dB, const double *dout,
                          const double *inp, const double *xa, const double *A, const double *B,
                          double scale, int BT, int C, int R, int OC) {
    for (int i = 0; i < BT; i++) {
        for (int r = 0; r < R; r++) {
            double dxa = 0.0;
            for (int o = 0; o < OC; o++) {
                double g = dout[(size_t)i * OC + o];
                dxa += scale * g * B[(size_t)o * R + r];
                if (dB) {
                    dB[(size_t)o * R + r] += scale * g * xa[(size_t)i * R + r];
                }
            }
            for (int c = 0; c < C; c++) {
                if (dinp) {
                    dinp[(size_t)i * C + c] += dxa * A[(size_t)r * C + c];
                }
                if (dA) {
                    dA[(size_t)r * C + c] += dxa * inp[(size_t)i * C + c];
                }
            }
        }
    }
}

void rl_rope_inv_freq_ref(double *inv_freq, const rl_hf_config_t *cfg) {
    int D = cfg->head_dim;
    for (int i = 0; i < D / 2; i++) {
        double inv = 1.0 / pow(cfg->rope_theta, (double)(2 * i) / D);
        if (cfg->rope_type == RL_ROPE_LLAMA3) {
            double orig = cfg->rope_original_max_position_embeddings;
            double lo = cfg->rope_low_freq_factor, hi = cfg->rope_high_freq_factor;
            double wavelen = S_TWO_PI / inv;
            if (wavelen > orig / lo) {
                inv = inv / cfg->rope_factor;
            } else if (wavelen >= orig / hi) {
                double s = (orig / wavelen - lo) / (hi - lo);
                inv = (1.0 - s) * inv / cfg->rope_factor + s * inv;
            }
        }
        inv_freq[i] = inv;
    }
}

static void s_rope_ref(double *out, const double *inp, const double *inv_freq, const int *pos,
                       int BT, int NH, int D, double sign, int accumulate) {
    int half = D / 2;
    for (int i = 0; i < BT; i++) {
        for (int h = 0; h < NH; h++) {
            size_t o = ((size_t)i * NH + h) * D;
            for (int j = 0; j < half; j++) {
                double ang = sign * pos[i] * inv_freq[j];
                double c = cos(ang), s = sin(ang);
                double x0 = inp[o + j], x1 = inp[o + j + half];
                double y0 = x0 * c - x1 * s, y1 = x1 * c + x0 * s;
                if (accumulate) {
                    out[o + j] += y0;
                    out[o + j + half] += y1;
                } else {
                    out[o + j] = y0;
                    out[o + j + half] = y1;
                }
            }
        }
    }
}

void rl_rope_forward_ref(double *out, const double *inp, const double *inv_freq, const int *pos,
                         int BT, int NH, int D) {
    s_rope_ref(out, inp, inv_freq, pos, BT, NH, D, 1.0, 0);
}

void rl_rope_backward_ref(double *dinp, const double *dout, const double *inv_freq,
                          const int *pos, int BT, int NH, int D) {
    s_rope_ref(dinp, dout, inv_freq, pos, BT, NH, D, -1.0, 1);
}

// Softmax probabilities of row (b, h, t) over keys 0..t into p; returns lse.
static double s_att_row_ref(double *p, const double *q, const double *k, int b, int t, int h,
                            int T, int NH, int NKV, int D) {
    int g = h / (NH / NKV);
    double scale = 1.0 / sqrt((double)D);
    const double *qr = q + (((size_t)b * T + t) * NH + h) * D;
    double mx = -INFINITY;
    for (int j = 0; j <= t; j++) {
        const double *kr = k + (((size_t)b * T + j) * NKV + g) * D;
        double s = 0.0;
        for (int d = 0; d < D; d++) {
            s += qr[d] * kr[d];
        }
        p[j] = s * scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    double sum = 0.0;
    for (int j = 0; j <= t; j++) {
        sum += exp(p[j] - mx);
    }
    double lse = mx + log(sum);
    for (int j = 0; j <= t; j++) {
        p[j] = exp(p[j] - lse);
    }
    return lse;
}

void rl_attention_forward_ref(double *out, double *lse, const double *q, const double *k,
                              const double *v, const int *lengths, int B, int T, int NH,
                              int NKV, int D) {
    double *p = malloc((size_t)(T > 0 ? T : 1) * sizeof(double));
    RL_ASSERT(p != NULL);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            int g = h / (NH / NKV);
            for (int t = 0; t < T; t++) {
                double *o = out + (((size_t)b * T + t) * NH + h) * D;
                for (int d = 0; d < D; d++) {
                    o[d] = 0.0;
                }
                double l = 0.0;
                if (t < lengths[b]) {
                    l = s_att_row_ref(p, q, k, b, t, h, T, NH, NKV, D);
                    for (int j = 0; j <= t; j++) {
                        const double *vr = v + (((size_t)b * T + j) * NKV + g) * D;
                        for (int d = 0; d < D; d++) {
                            o[d] += p[j] * vr[d];
                        }
                    }
                }
                if (lse) {
                    lse[((size_t)b * NH + h) * T + t] = l;
                }
            }
        }
    }
    free(p);
}

// Per row: dp_j = dO . v_j;  ds_j = p_j (dp_j - sum_i p_i dp_i);  dq += scale ds_j k_j;
// dk_j += scale ds_j q;  dv_j += p_j dO. (lse is recomputed here; the saved one is not needed.)
void rl_attention_backward_ref(double *dq, double *dk, double *dv, const double *dout,
                               const double *q, const double *k, const double *v,
                               const double *lse, const int *lengths, int B, int T, int NH,
                               int NKV, int D) {
    (void)lse;
    double *p = malloc(2 * (size_t)(T > 0 ? T : 1) * sizeof(double));
    RL_ASSERT(p != NULL);
    double *dp = p + (T > 0 ? T : 1);
    double scale = 1.0 / sqrt((double)D);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            int g = h / (NH / NKV);
            for (int t = 0; t < lengths[b] && t < T; t++) {
                s_att_row_ref(p, q, k, b, t, h, T, NH, NKV, D);
                size_t qo = (((size_t)b * T + t) * NH + h) * D;
                const double *go = dout + qo;
                double dot = 0.0;
                for (int j = 0; j <= t; j++) {
                    const double *vr = v + (((size_t)b * T + j) * NKV + g) * D;
                    dp[j] = 0.0;
                    for (int d = 0; d < D; d++) {
                        dp[j] += go[d] * vr[d];
                    }
                    dot += p[j] * dp[j];
                }
                for (int j = 0; j <= t; j++) {
                    size_t ko = (((size_t)b * T + j) * NKV + g) * D;
                    double ds = p[j] * (dp[j] - dot);
                    for (int d = 0; d < D; d++) {
                        if (dq) {
                            dq[qo + d] += scale * ds * k[ko + d];
                        }
                        if (dk) {
                            dk[ko + d] += scale * ds * q[qo + d];
                        }
                        if (dv) {
                            dv[ko + d] += p[j] * go[d];
                        }
                    }
                }
            }
        }
    }
    free(p);
}

void rl_attention_decode_ref(double *out, const double *q, const double *kcache,
                             const double *vcache, int n_ctx, size_t kv_stride, int NH, int NKV,
                             int D) {
    double scale = 1.0 / sqrt((double)D);
    double *p = malloc((size_t)(n_ctx > 0 ? n_ctx : 1) * sizeof(double));
    RL_ASSERT(p != NULL);
    for (int h = 0; h < NH; h++) {
        int g = h / (NH / NKV);
        double mx = -INFINITY;
        for (int j = 0; j < n_ctx; j++) {
            double s = 0.0;
            for (int d = 0; d < D; d++) {
                s += q[(size_t)h * D + d] * kcache[j * kv_stride + (size_t)g * D + d];
            }
            p[j] = s * scale;
            mx = p[j] > mx ? p[j] : mx;
        }
        double sum = 0.0;
        for (int j = 0; j < n_ctx; j++) {
            p[j] = exp(p[j] - mx);
            sum += p[j];
        }
        for (int d = 0; d < D; d++) {
            double o = 0.0;
            for (int j = 0; j < n_ctx; j++) {
                o += p[j] / sum * vcache[j * kv_stride + (size_t)g * D + d];
            }
            out[(size_t)h * D + d] = o;
        }
    }
    free(p);
}

void rl_swiglu_forward_ref(double *out, const double *gate, const double *up, size_t N) {
    for (size_t i = 0; i < N; i++) {
        out[i] = gate[i] / (1.0 + exp(-gate[i])) * up[i];
    }
}

void rl_swiglu_backward_ref(double *dgate, double *dup, const double *dout, const double *gate,
                            const double *up, size_t N) {
    for (size_t i = 0; i < N; i++) {
        double x = gate[i], s = 1.0 / (1.0 + exp(-x));
        if (dgate) {
            dgate[i] += dout[i] * up[i] * (s + x * s * (1.0 - s));
        }
        if (dup) {
            dup[i] += dout[i] * x * s;
        }
    }
}

// log-softmax of row i's logits z = h_i w^T / temp into lp (V); returns the entropy.
static double s_logsoftmax_ref(double *lp, const double *h, const double *w, int i,
                               double temperature, int C, int V) {
    double mx = -INFINITY;
    for (int v = 0; v < V; v++) {
        double s = 0.0;
        for (int c = 0; c < C; c++) {
            s += h[(size_t)i * C + c] * w[(size_t)v * C + c];
        }
        lp[v] = s / temperature;
        mx = lp[v] > mx ? lp[v] : mx;
    }
    double sum = 0.0;
    for (int v = 0; v < V; v++) {
        sum += exp(lp[v] - mx);
    }
    double lse = mx + log(sum), H = 0.0;
    for (int v = 0; v < V; v++) {
        lp[v] -= lse;
        H -= exp(lp[v]) * lp[v];
    }
    return H;
}

void rl_logprob_forward_ref(double *logp, double *entropy, const double *h, const double *w,
                            const int32_t *targets, double temperature, int N, int C, int V) {
    double *lp = malloc((size_t)(V > 0 ? V : 1) * sizeof(double));
    RL_ASSERT(lp != NULL);
    for (int i = 0; i < N; i++) {
        logp[i] = 0.0;
        if (entropy) {
            entropy[i] = 0.0;
        }
        if (targets[i] < 0) {
            continue;
        }
        double H = s_logsoftmax_ref(lp, h, w, i, temperature, C, V);
        logp[i] = lp[targets[i]];
        if (entropy) {
            entropy[i] = H;
        }
    }
    free(lp);
}

void rl_logprob_backward_ref(double *dh, double *dw, const double *dlogp, const double *dentropy,
                             const double *h, const double *w, const int32_t *targets,
                             double temperature, int N, int C, int V) {
    double *lp = malloc((size_t)(V > 0 ? V : 1) * sizeof(double));
    RL_ASSERT(lp != NULL);
    for (int i = 0; i < N; i++) {
        if (targets[i] < 0) {
            continue;
        }
        double H = s_logsoftmax_ref(lp, h, w, i, temperature, C, V);
        for (int v = 0; v < V; v++) {
            double p = exp(lp[v]);
            double dz = dlogp[i] * ((v == targets[i]) - p);
            if (dentropy) {
                dz -= dentropy[i] * p * (lp[v] + H);
            }
            dz /= temperature;
            for (int c = 0; c < C; c++) {
                if (dh) {
                    dh[(size_t)i * C + c] += dz * w[(size_t)v * C + c];
                }
                if (dw) {
                    dw[(size_t)v * C + c] += dz * h[(size_t)i * C + c];
                }
            }
        }
    }
    free(lp);
}

// test_cuda_head — the vocabulary head and the sampler's draw on cuda:0 (label gpu; skipped
// without a GPU). The host-side half runs everywhere first: the Philox stream against Random123's
// known answers, the CPU fp32 head within the bounds the GPU is held to (so the bounds are shown
// to hold for an fp32 path here, not only claimed), and the sampler's host model against the CPU
// sampler (rollout/rl_sample.c) and, with its own draws, against the chi-square test. Then, on a
// GPU: the head (forward, backward) against rl_logprob_forward_ref / backward_ref (double) and
// against the CPU fp32 head, on the same bf16-rounded h and w, outputs and scratch poisoned first;
// full logits; sampling (exact draws, the distribution, exclusion, ties, reproducibility; the
// many-row cases through sample_rows, the sampler's entry: rows stored once in reverse order
// and named per draw, uniforms given); the argument edge cases.
//
// Tolerances (per element, each from a first-order bound; the worst ratio is printed):
// - logits: the inputs are exactly the bf16 values both sides use, so the only error is fp32
//   accumulation over C; tensor cores may truncate rather than round, so u = 2^-23 per add:
//   |dz| <= d_i = C 2^-23 sum_c |h_ic| max_v |w_vc| (before the temperature).
// - logp = y_t - logsumexp(y): its derivative in y has l1 norm <= 2, so 2 d_i / T; plus the
//   row's fp32/double arithmetic (expf 2 ulp in the normaliser, the final rounding):
//   2^-20 (1 + |logp|).
// - entropy: dH/dy_v = -p_v (log p_v + H), l1 norm <= 2H: 2 d_i / T (2H + 1), plus
//   2^-20 (1 + H + log V) (y - max rounded in fp32).
// - dlogits, per entry: the bf16 rounding, 2^-8 relative (bf16 keeps 8 significant bits; 2^-7
//   allowed), and an absolute 1e-30 where tiny p underflow in fp32; the logits' error moves
//   p_v by <= 2 d_i / T relative, so g p_v and ge p_v (log p_v + H) by 4 d_i / T^2 p_v (...);
//   fp32 arithmetic 2^-20 of the terms. dh = dlogits @ w accumulates V terms in fp32:
//   V 2^-23 sum_v |dl_v| |w_vc|; dw accumulates N terms and its initial value: (N+1) 2^-23 (...).
//   The sum of the per-entry bounds times |w| (or |h|), times 1.25 for second-order terms.
// - sampling: the GPU's token must lie in the kept set exactly (the CPU sampler's support); its
//   CDF interval must hold u * W up to 2^-20 W (the host model's weights use the host's expf,
//   which may differ from the device's by an ulp or two); and at least 90% of draws must be the
//   host model's token exactly. Frequencies over 65,536 draws pass a chi-square test at p = 1e-6
//   (the draws are deterministic, so this is a check on this stream, not a flaky one).
// - the draw's logprob: the same formula as the host model's in double, the normaliser's terms
//   differing by the expf's ulps: 4e-6 + 4e-7 |logp|.
#include "rl_test_cuda.h"

#include "cuda/rl_cuda_head.h"
#include "rl_layers.h"
#include "rl_sample.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_gpu; // cuda:0 is usable: the device half runs

static uint64_t s_rng = 0x243f6a8885a308d3ull;

static double s_u01(void) { // [0, 1), xorshift64*
    s_rng ^= s_rng >> 12;
    s_rng ^= s_rng << 25;
    s_rng ^= s_rng >> 27;
    uint64_t r = s_rng * 0x2545f4914f6cdd1dull;
    return (double)(r >> 11) / 9007199254740992.0;
}

static float s_uniform(void) { // (-1, 1)
    return (float)(s_u01() * 2.0 - 1.0);
}

static void *s_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "FAIL: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

// Every |got - want| <= tol (per element) and got finite; prints the worst element by its ratio
// to its own tolerance. Returns 1 when all are within.
static int s_within(const char *what, const float *got, const double *want, const double *tol,
                    size_t n) {
    size_t bad = 0, worst = 0;
    double worst_r = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double r =
            isfinite(got[i]) ? (tol[i] > 0 ? d / tol[i] : (d == 0 ? 0 : INFINITY)) : INFINITY;
        if (!(r <= 1.0)) {
            bad++;
        }
        if (!(r <= worst_r)) {
            worst_r = r;
            worst = i;
        }
    }
    printf("%-52s n %-8zu worst %.2f of tol at %zu (got %.9g, want %.9g, tol %.3g)%s\n", what, n,
           worst_r, worst, n ? (double)got[worst] : 0.0, n ? want[worst] : 0.0,
           n ? tol[worst] : 0.0, bad ? " FAIL" : "");
    CHECK_MSG(bad == 0, "%s: %zu of %zu elements outside their tolerance", what, bad, n);
    return bad == 0;
}

static uint16_t *s_bf16_fill(float *f, double *d, size_t n, float scale) {
    uint16_t *b = s_alloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        b[i] = rl_test_bf16(s_uniform() * scale);
        f[i] = rl_test_from_bf16(b[i]);
        d[i] = f[i];
    }
    return b;
}

// A device buffer filled with NaN, allocated through rl_test_poisoned (fails the suite if not).
static void *s_poisoned(size_t bytes) {
    return rl_test_poisoned(bytes);
}

// ---------------------------------------------------------------------------------------------
// the stream

static void test_philox(void) {
    // Random123's kat_vectors: philox4x32 10, counter (4), key (2) -> (4)
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int t = 0; t < 3; t++) {
        uint32_t c[4] = {kat[t][0], kat[t][1], kat[t][2], kat[t][3]};
        uint32_t k[2] = {kat[t][4], kat[t][5]};
        rl_cuda_philox(c, k);
        for (int j = 0; j < 4; j++) {
            CHECK_MSG(c[j] == kat[t][6 + j], "philox KAT %d word %d: %08x, want %08x", t, j, c[j],
                      kat[t][6 + j]);
        }
    }
    // the uniform: [0, 1), 53 bits, mean 1/2 over many steps
    double sum = 0, lo = 1, hi = 0;
    int n = 1 << 16;
    for (int i = 0; i < n; i++) {
        double u = rl_cuda_uniform(0x1234abcdull, (uint64_t)i);
        sum += u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    CHECK(lo >= 0.0 && hi < 1.0);
    CHECK_MSG(fabs(sum / n - 0.5) < 5 * sqrt(1.0 / 12 / n), "uniform mean %g", sum / n);
    CHECK(rl_cuda_uniform(1, 2) != rl_cuda_uniform(2, 1));
    printf("philox4x32-10: Random123 known answers, uniform mean %.5f over %d steps\n", sum / n, n);
}

// ---------------------------------------------------------------------------------------------
// the head

typedef struct {
    int N, C, V, chunk;
    float T;
    int entropy;  // forward computes the entropy
    int backward; // also the backward
    int dentropy; // backward takes a dentropy
    int dw;       // backward computes dw (full tuning)
} s_head_case_t;

// The bound on the logits' fp32 accumulation error per row (before the temperature).
static void s_logit_err(double *d, const double *h, const double *w, int N, int C, int V) {
    double *wmax = s_alloc((size_t)C * sizeof *wmax);
    for (int v = 0; v < V; v++) {
        for (int c = 0; c < C; c++) {
            double a = fabs(w[(size_t)v * C + c]);
            wmax[c] = a > wmax[c] ? a : wmax[c];
        }
    }
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int c = 0; c < C; c++) {
            s += fabs(h[(size_t)i * C + c]) * wmax[c];
        }
        d[i] = C * ldexp(1.0, -23) * s;
    }
    free(wmax);
}

// A row has work in backward (rl_logprob_backward's rule).
static int s_has_work(int32_t t, float g, const float *ge) {
    return t >= 0 && !(g == 0.0f && (!ge || *ge == 0.0f));
}

// ---- white-box: the row kernels on the exact logits the GPU computed
// The scratch (rl_cuda_head.h) starts with the last chunk's fp32 logits (before the temperature),
// then, 256-byte aligned, its bf16 dlogits. Given those logits, the row kernels' only errors are
// their own arithmetic, so they are held much tighter than the end-to-end bounds (which must
// cover the matmul's accumulation): an element dropped from a reduction (p ~ 1e-3 here) or a
// wrong sign shows at once.

static size_t s_al256(size_t b) {
    return (b + 255) / 256 * 256;
}

// y (V) = fl(z / T) as the device divides, its max, and in double: S = sum exp(y - max),
// SY = sum exp(y - max) (y - max).
static void s_row_exact(const float *z, float T, int V, double *y, double *mx_p, double *s_p,
                        double *sy_p) {
    float mx = -INFINITY;
    for (int v = 0; v < V; v++) {
        float yv = z[v] / T;
        y[v] = yv;
        mx = yv > mx ? yv : mx;
    }
    double s = 0, sy = 0;
    for (int v = 0; v < V; v++) {
        double e = exp(y[v] - mx);
        s += e;
        sy += e * (y[v] - mx);
    }
    *mx_p = mx;
    *s_p = s;
    *sy_p = sy;
}

// The last chunk's logits against double (the gemm's call: shapes, transposes, rows), then its
// rows' logp and entropy against the same logits in double: 2^-19 (1 + |logp|) and
// 2^-19 (1 + H + log V) (expf's 2 ulp and fl(y - max) in the sums, the final rounding).
static void s_tight_forward(const char *tag, const float *z, const float *lp, const float *ent,
                            const int32_t *tg, const double *hd, const double *wd, float T, int n,
                            int C, int V) {
    char what[160];
    size_t nv = (size_t)n * V;
    double *want = s_alloc(nv * 8), *tol = s_alloc(nv * 8), *y = s_alloc((size_t)V * 8);
    for (int r = 0; r < n; r++) {
        for (int v = 0; v < V; v++) {
            double a = 0, sa = 0;
            for (int c = 0; c < C; c++) {
                double q = hd[(size_t)r * C + c] * wd[(size_t)v * C + c];
                a += q;
                sa += fabs(q);
            }
            want[(size_t)r * V + v] = a;
            tol[(size_t)r * V + v] = C * ldexp(1.0, -23) * sa + 1e-30;
        }
    }
    snprintf(what, sizeof what, "chunk logits %s", tag);
    s_within(what, z, want, tol, nv);
    for (int r = 0; r < n; r++) {
        double mx, S, SY;
        want[r] = tol[r] = 0;
        want[n + r] = tol[n + r] = 0;
        if (tg[r] < 0 || tg[r] >= V) {
            continue;
        }
        s_row_exact(z + (size_t)r * V, T, V, y, &mx, &S, &SY);
        want[r] = y[tg[r]] - mx - log(S);
        tol[r] = ldexp(1.0, -19) * (1 + fabs(want[r]));
        want[n + r] = log(S) - SY / S;
        tol[n + r] = ldexp(1.0, -19) * (1 + want[n + r] + log((double)V));
    }
    snprintf(what, sizeof what, "chunk logp (tight) %s", tag);
    s_within(what, lp, want, tol, (size_t)n);
    if (ent) {
        snprintf(what, sizeof what, "chunk entropy (tight) %s", tag);
        s_within(what, ent, want + n, tol + n, (size_t)n);
    }
    free(want);
    free(tol);
    free(y);
}

// A C copy of the device's dlogits kernel (s_dlogits_kernel), run here without a GPU so that
// s_tight_backward's tolerance is shown to hold for the kernel's own arithmetic.
static void s_emulate_dlogits(uint16_t *dl, const float *z, const float *g, const float *ge,
                              const int32_t *tg, float T, int n, int V) {
    for (int r = 0; r < n; r++) {
        const float *zr = z + (size_t)r * V;
        uint16_t *dr = dl + (size_t)r * V;
        float gr = g[r], ger = ge ? ge[r] : 0.0f;
        if (!s_has_work(tg[r], gr, ge ? &ge[r] : NULL)) {
            memset(dr, 0, (size_t)V * 2);
            continue;
        }
        float mx = -INFINITY;
        for (int v = 0; v < V; v++) {
            float y = zr[v] / T;
            mx = y > mx ? y : mx;
        }
        double S = 0, SY = 0;
        for (int v = 0; v < V; v++) {
            float y = zr[v] / T - mx, e = expf(y);
            S += e;
            SY += (double)e * y;
        }
        double log_s = log(S);
        float inv_s = (float)(1.0 / S), log_s_f = (float)log_s, h = (float)(log_s - SY / S);
        for (int v = 0; v < V; v++) {
            float y = zr[v] / T - mx, p = expf(y) * inv_s;
            float dz = gr * ((v == tg[r] ? 1.0f : 0.0f) - p);
            if (ger != 0.0f) {
                dz -= ger * p * ((y - log_s_f) + h);
            }
            dr[v] = rl_test_bf16(dz / T);
        }
    }
}

// The last chunk's bf16 dlogits against the exact math on its fp32 logits: the bf16 rounding
// (2^-8 relative, 2^-7 allowed) plus the fp32 arithmetic, 2^-19 of the terms, plus 1e-30 of
// them absolute (p below fp32's range underflows to a denormal or 0, as bf16 shares fp32's
// exponent range). Rows without work: zeros.
static void s_tight_backward(const char *tag, const float *z, const uint16_t *dl, const float *g,
                             const float *ge, const int32_t *tg, float T, int n, int V) {
    char what[160];
    size_t nv = (size_t)n * V, zeros = 0;
    double *want = s_alloc(nv * 8), *tol = s_alloc(nv * 8), *y = s_alloc((size_t)V * 8);
    float *got = s_alloc(nv * 4);
    for (int r = 0; r < n; r++) {
        const uint16_t *dr = dl + (size_t)r * V;
        for (int v = 0; v < V; v++) {
            got[(size_t)r * V + v] = rl_test_from_bf16(dr[v]);
        }
        if (!s_has_work(tg[r], g[r], ge ? &ge[r] : NULL)) {
            for (int v = 0; v < V; v++) {
                zeros += dr[v] != 0;
            }
            continue; // want = tol = 0: exact zeros
        }
        double mx, S, SY;
        s_row_exact(z + (size_t)r * V, T, V, y, &mx, &S, &SY);
        double lse = log(S), H = lse - SY / S, gi = g[r], gei = ge ? ge[r] : 0.0;
        for (int v = 0; v < V; v++) {
            double lp = y[v] - mx - lse, p = exp(lp), oh = v == tg[r];
            double w = (gi * (oh - p) - gei * p * (lp + H)) / T;
            want[(size_t)r * V + v] = w;
            tol[(size_t)r * V + v] =
                ldexp(1.0, -7) * fabs(w) +
                ldexp(1.0, -19) * (fabs(gi) * (p + oh) + fabs(gei) * p * (fabs(lp + H) + 1)) / T +
                1e-30 * (fabs(gi) + fabs(gei) * (fabs(lp + H) + 1)) / T;
        }
    }
    CHECK_MSG(zeros == 0, "%s: %zu dlogits of rows without work are not 0", tag, zeros);
    snprintf(what, sizeof what, "chunk dlogits (tight) %s", tag);
    s_within(what, got, want, tol, nv);
    free(want);
    free(tol);
    free(y);
    free(got);
}

static void s_head_case(const s_head_case_t *k) {
    const int N = k->N, C = k->C, V = k->V;
    const double T = k->T;
    const size_t nc = (size_t)N * C, vc = (size_t)V * C;
    char what[160], tag[96];
    snprintf(tag, sizeof tag, "N %d C %d V %d chunk %d T %g%s", N, C, V, k->chunk, T,
             k->entropy ? " H" : "");
    float *hf = s_alloc(nc * 4), *wf = s_alloc(vc * 4);
    double *hd = s_alloc(nc * 8), *wd = s_alloc(vc * 8);
    uint16_t *hb = s_bf16_fill(hf, hd, nc, 1.0f);
    uint16_t *wb = s_bf16_fill(wf, wd, vc, 0.64f); // logits of standard deviation ~3
    for (int i = 0; i < N; i++) {
        if (i % 17 == 4) { // a few peaked rows: p_max near 1, entropy near 0
            for (int c = 0; c < C; c++) {
                size_t e = (size_t)i * C + c;
                hb[e] = rl_test_bf16(hf[e] * 4.0f);
                hf[e] = rl_test_from_bf16(hb[e]);
                hd[e] = hf[e];
            }
        }
    }
    int32_t *tg = s_alloc((size_t)N * sizeof *tg);
    for (int i = 0; i < N; i++) {
        tg[i] = (int32_t)(s_u01() * V);
        tg[i] = i % 11 == 5 ? V - 1 : i % 13 == 2 ? 0 : tg[i];
        if (i % 7 == 3 || (N > 1 && i == N - 1)) {
            tg[i] = -1;
        }
    }

    // ---- forward: references and tolerances
    double *lp_ref = s_alloc((size_t)N * 8), *ent_ref = s_alloc((size_t)N * 8);
    double *dlt = s_alloc((size_t)N * 8), *tol_lp = s_alloc((size_t)N * 8);
    double *tol_ent = s_alloc((size_t)N * 8);
    rl_logprob_forward_ref(lp_ref, ent_ref, hd, wd, tg, T, N, C, V);
    s_logit_err(dlt, hd, wd, N, C, V);
    for (int i = 0; i < N; i++) {
        tol_lp[i] = tg[i] < 0 ? 0 : 2 * dlt[i] / T + ldexp(1.0, -20) * (1 + fabs(lp_ref[i]));
        tol_ent[i] = tg[i] < 0 ? 0
                               : 2 * dlt[i] / T * (2 * ent_ref[i] + 1) +
                                     ldexp(1.0, -20) * (1 + ent_ref[i] + log((double)V));
    }
    int cchunk = k->chunk < 256 ? k->chunk : 256; // the CPU head's cap
    float *scr = s_alloc(rl_logprob_scratch_floats(cchunk, C, V) * 4);
    float *lp_cpu = s_alloc((size_t)N * 4), *ent_cpu = s_alloc((size_t)N * 4);
    rl_logprob_forward(lp_cpu, ent_cpu, hf, wf, tg, k->T, N, C, V, scr, cchunk);
    snprintf(what, sizeof what, "cpu fp32 logp    %s", tag);
    s_within(what, lp_cpu, lp_ref, tol_lp, (size_t)N);
    snprintf(what, sizeof what, "cpu fp32 entropy %s", tag);
    s_within(what, ent_cpu, ent_ref, tol_ent, (size_t)N);

    // the last chunk's rows, and (without a GPU) the tight checks on the CPU head's own logits
    const int r0 = (N - 1) / k->chunk * k->chunk, nl = N - r0;
    float *zc = s_alloc((size_t)nl * V * 4);
    rl_logits_forward(zc, hf + (size_t)r0 * C, wf, nl, C, V);
    if (!s_gpu) {
        snprintf(what, sizeof what, "cpu %s", tag);
        s_tight_forward(what, zc, lp_cpu + r0, k->entropy ? ent_cpu + r0 : NULL, tg + r0,
                        hd + (size_t)r0 * C, wd, k->T, nl, C, V);
    }

    size_t sbytes = 0;
    uint16_t *d_h = NULL, *d_w = NULL;
    int32_t *d_tg = NULL;
    void *d_scr = NULL;
    if (s_gpu) {
        sbytes = rl_test_cu->logprob_scratch_bytes(k->chunk, C, V);
        d_h = rl_test_dup(hb, nc * 2);
        d_w = rl_test_dup(wb, vc * 2);
        d_tg = rl_test_dup(tg, (size_t)N * 4);
        d_scr = s_poisoned(sbytes);
        float *d_lp = s_poisoned((size_t)N * 4);
        float *d_ent = k->entropy ? s_poisoned((size_t)N * 4) : NULL;
        int rc = rl_test_cu->logprob_forward(rl_test_ctx, d_lp, d_ent, d_h, d_w, d_tg, k->T, N, C,
                                             V, d_scr, k->chunk);
        CHECK_MSG(rc == 0, "logprob_forward %s: %s", tag, rl_test_cu->errmsg(rl_test_ctx));
        float *lp = rl_test_back(d_lp, (size_t)N * 4);
        snprintf(what, sizeof what, "gpu logp         %s", tag);
        s_within(what, lp, lp_ref, tol_lp, (size_t)N);
        snprintf(what, sizeof what, "gpu logp vs cpu  %s", tag);
        double *lpc = s_alloc((size_t)N * 8), *tol2 = s_alloc((size_t)N * 8);
        for (int i = 0; i < N; i++) {
            lpc[i] = lp_cpu[i];
            tol2[i] = 2 * tol_lp[i];
        }
        s_within(what, lp, lpc, tol2, (size_t)N);
        size_t nz = 0;
        for (int i = 0; i < N; i++) {
            nz += tg[i] < 0 && lp[i] != 0.0f;
        }
        CHECK_MSG(nz == 0, "%s: %zu rows without a target have logp != 0", tag, nz);
        float *ent = NULL;
        if (k->entropy) {
            ent = rl_test_back(d_ent, (size_t)N * 4);
            snprintf(what, sizeof what, "gpu entropy      %s", tag);
            s_within(what, ent, ent_ref, tol_ent, (size_t)N);
            nz = 0;
            for (int i = 0; i < N; i++) {
                nz += tg[i] < 0 && ent[i] != 0.0f;
            }
            CHECK_MSG(nz == 0, "%s: %zu rows without a target have entropy != 0", tag, nz);
            rl_test_dfree(d_ent);
        }
        // the last chunk, on the logits the GPU left in the scratch
        float *zs = rl_test_back(d_scr, (size_t)nl * V * 4);
        snprintf(what, sizeof what, "gpu %s", tag);
        s_tight_forward(what, zs, lp + r0, ent ? ent + r0 : NULL, tg + r0, hd + (size_t)r0 * C, wd,
                        k->T, nl, C, V);
        free(zs);
        free(ent);
        free(lp);
        free(lpc);
        free(tol2);
        rl_test_dfree(d_lp);
    }

    if (k->backward) {
        // ---- backward: gradients in, references, tolerances
        float *g = s_alloc((size_t)N * 4), *ge = s_alloc((size_t)N * 4);
        double *gd = s_alloc((size_t)N * 8), *ged = s_alloc((size_t)N * 8);
        for (int i = 0; i < N; i++) {
            g[i] = i % 5 == 1 ? 0.0f : s_uniform();
            ge[i] = i % 10 == 1 ? 0.0f : 0.5f * s_uniform();
            if (tg[i] < 0) { // never read: the row is skipped whatever its gradient
                g[i] = NAN;
                ge[i] = NAN;
            }
            gd[i] = g[i];
            ged[i] = ge[i];
        }
        const float *gep = k->dentropy ? ge : NULL;
        float *dh0 = s_alloc(nc * 4), *dw0 = s_alloc(vc * 4);
        for (size_t e = 0; e < nc; e++) {
            dh0[e] = s_uniform();
        }
        for (size_t e = 0; e < vc; e++) {
            dw0[e] = 0.1f * s_uniform();
        }
        double *dh_ref = s_alloc(nc * 8), *dw_ref = s_alloc(vc * 8);
        rl_logprob_backward_ref(dh_ref, k->dw ? dw_ref : NULL, gd, k->dentropy ? ged : NULL, hd, wd,
                                tg, T, N, C, V);
        // dl (double) and its error bound, row by row; tol_dh, tol_dw; the cross-check sum
        double *tol_dh = s_alloc(nc * 8), *tol_dw = s_alloc(vc * 8), *chk = s_alloc(nc * 8);
        double *scale_dh = s_alloc(nc * 8);
        double *z = s_alloc((size_t)V * 8), *dl = s_alloc((size_t)V * 8);
        double *er = s_alloc((size_t)V * 8);
        for (int i = 0; i < N; i++) {
            if (!s_has_work(tg[i], g[i], gep ? &ge[i] : NULL)) {
                continue;
            }
            double mx = -INFINITY, s = 0, H = 0;
            for (int v = 0; v < V; v++) {
                double a = 0;
                for (int c = 0; c < C; c++) {
                    a += hd[(size_t)i * C + c] * wd[(size_t)v * C + c];
                }
                z[v] = a / T;
                mx = z[v] > mx ? z[v] : mx;
            }
            for (int v = 0; v < V; v++) {
                s += exp(z[v] - mx);
            }
            double lse = mx + log(s);
            for (int v = 0; v < V; v++) {
                double lp = z[v] - lse;
                H -= exp(lp) * lp;
            }
            double gi = gd[i], gei = gep ? ged[i] : 0.0, D = dlt[i] / T;
            for (int v = 0; v < V; v++) {
                double lp = z[v] - lse, p = exp(lp), oh = v == tg[i];
                dl[v] = (gi * (oh - p) - gei * p * (lp + H)) / T;
                double lh = fabs(lp + H);
                er[v] = ldexp(1.0, -7) * fabs(dl[v]) +
                        4 * D / T * p * (fabs(gi) + fabs(gei) * (3 + 2 * H + lh)) +
                        ldexp(1.0, -20) * (fabs(gi) * (p + oh) + fabs(gei) * p * (lh + 1)) / T;
            }
            for (int v = 0; v < V; v++) {
                double adh = er[v] + V * ldexp(1.0, -23) * fabs(dl[v]);
                double adw = er[v] + (N + 1) * ldexp(1.0, -23) * fabs(dl[v]);
                for (int c = 0; c < C; c++) {
                    double wv = wd[(size_t)v * C + c];
                    tol_dh[(size_t)i * C + c] += adh * fabs(wv);
                    chk[(size_t)i * C + c] += dl[v] * wv;
                    scale_dh[(size_t)i * C + c] += fabs(dl[v] * wv);
                    tol_dw[(size_t)v * C + c] += adw * fabs(hd[(size_t)i * C + c]);
                }
            }
        }
        // the bounds rest on our own dl: it must give the reference's dh
        size_t off = 0;
        for (size_t e = 0; e < nc; e++) {
            off += !(fabs(chk[e] - dh_ref[e]) <= 1e-9 * scale_dh[e] + 1e-12);
        }
        CHECK_MSG(off == 0, "%s: the test's dlogits disagree with rl_logprob_backward_ref in %zu",
                  tag, off);
        double *want_dh = s_alloc(nc * 8), *want_dw = s_alloc(vc * 8);
        for (size_t e = 0; e < nc; e++) {
            want_dh[e] = dh0[e] + dh_ref[e];
            tol_dh[e] = 1.25 * tol_dh[e] + ldexp(1.0, -22) * fabs(want_dh[e]);
        }
        for (size_t e = 0; e < vc; e++) {
            want_dw[e] = dw0[e] + dw_ref[e];
            tol_dw[e] = 1.25 * tol_dw[e] + (N + 1) * ldexp(1.0, -23) * fabs(dw0[e]) +
                        ldexp(1.0, -22) * fabs(want_dw[e]);
        }
        snprintf(tag + strlen(tag), sizeof tag - strlen(tag), "%s%s", k->dentropy ? " dH" : "",
                 k->dw ? " dw" : "");
        // the CPU fp32 head (no bf16 dlogits) within the same bounds
        float *dh_cpu = s_alloc(nc * 4), *dw_cpu = s_alloc(vc * 4);
        memcpy(dh_cpu, dh0, nc * 4);
        memcpy(dw_cpu, dw0, vc * 4);
        rl_logprob_backward(dh_cpu, k->dw ? dw_cpu : NULL, g, gep, hf, wf, tg, k->T, N, C, V, scr,
                            cchunk);
        snprintf(what, sizeof what, "cpu fp32 dh      %s", tag);
        s_within(what, dh_cpu, want_dh, tol_dh, nc);
        if (k->dw) {
            snprintf(what, sizeof what, "cpu fp32 dw      %s", tag);
            s_within(what, dw_cpu, want_dw, tol_dw, vc);
        }
        if (!s_gpu) {
            // the kernel's arithmetic, copied in C, within the tight tolerance; and its bf16
            // dlogits of every row through exact matmuls within the end-to-end bounds (which
            // must cover the bf16 rounding the CPU fp32 head above does not have)
            uint16_t *dle = s_alloc((size_t)nl * V * 2);
            s_emulate_dlogits(dle, zc, g + r0, gep ? ge + r0 : NULL, tg + r0, k->T, nl, V);
            snprintf(what, sizeof what, "emulated %s", tag);
            s_tight_backward(what, zc, dle, g + r0, gep ? ge + r0 : NULL, tg + r0, k->T, nl, V);
            free(dle);
            float *za = s_alloc((size_t)N * V * 4);
            uint16_t *dla = s_alloc((size_t)N * V * 2);
            rl_logits_forward(za, hf, wf, N, C, V);
            s_emulate_dlogits(dla, za, g, gep, tg, k->T, N, V);
            double *eh = s_alloc(nc * 8), *ew = s_alloc(vc * 8);
            for (int i = 0; i < N; i++) {
                for (int v = 0; v < V; v++) {
                    double d = rl_test_from_bf16(dla[(size_t)i * V + v]);
                    if (d == 0) {
                        continue;
                    }
                    for (int c = 0; c < C; c++) {
                        eh[(size_t)i * C + c] += d * wd[(size_t)v * C + c];
                        ew[(size_t)v * C + c] += d * hd[(size_t)i * C + c];
                    }
                }
            }
            float *ehf = s_alloc(nc * 4), *ewf = s_alloc(vc * 4);
            for (size_t e = 0; e < nc; e++) {
                ehf[e] = (float)(dh0[e] + eh[e]);
            }
            for (size_t e = 0; e < vc; e++) {
                ewf[e] = (float)(dw0[e] + ew[e]);
            }
            snprintf(what, sizeof what, "emulated dh      %s", tag);
            s_within(what, ehf, want_dh, tol_dh, nc);
            if (k->dw) {
                snprintf(what, sizeof what, "emulated dw      %s", tag);
                s_within(what, ewf, want_dw, tol_dw, vc);
            }
            free(za);
            free(dla);
            free(eh);
            free(ew);
            free(ehf);
            free(ewf);
        }
        if (s_gpu) {
            float *d_dh = rl_test_dup(dh0, nc * 4);
            float *d_dw = k->dw ? rl_test_dup(dw0, vc * 4) : NULL;
            float *d_g = rl_test_dup(g, (size_t)N * 4);
            float *d_ge = rl_test_dup(ge, (size_t)N * 4);
            CHECK_INT(rl_test_cu->dset(rl_test_ctx, d_scr, 0xff, sbytes), 0); // poison again
            int rc = rl_test_cu->logprob_backward(rl_test_ctx, d_dh, d_dw, d_g,
                                                  k->dentropy ? d_ge : NULL, d_h, d_w, d_tg, k->T,
                                                  N, C, V, d_scr, k->chunk);
            CHECK_MSG(rc == 0, "logprob_backward %s: %s", tag, rl_test_cu->errmsg(rl_test_ctx));
            float *dh = rl_test_back(d_dh, nc * 4);
            snprintf(what, sizeof what, "gpu dh           %s", tag);
            s_within(what, dh, want_dh, tol_dh, nc);
            // rows without work: untouched, bit for bit
            size_t moved = 0;
            for (int i = 0; i < N; i++) {
                if (!s_has_work(tg[i], g[i], gep ? &ge[i] : NULL)) {
                    moved += memcmp(dh + (size_t)i * C, dh0 + (size_t)i * C, (size_t)C * 4) != 0;
                }
            }
            CHECK_MSG(moved == 0, "%s: %zu rows without work changed dh", tag, moved);
            // the last chunk's dlogits, on the logits the GPU left in the scratch
            float *zs = rl_test_back(d_scr, (size_t)nl * V * 4);
            char *dl_at = (char *)d_scr + s_al256((size_t)k->chunk * V * 4);
            uint16_t *dls = rl_test_back(dl_at, (size_t)nl * V * 2);
            snprintf(what, sizeof what, "gpu %s", tag);
            s_tight_backward(what, zs, dls, g + r0, gep ? ge + r0 : NULL, tg + r0, k->T, nl, V);
            free(zs);
            free(dls);
            if (k->dw) {
                float *dwg = rl_test_back(d_dw, vc * 4);
                snprintf(what, sizeof what, "gpu dw           %s", tag);
                s_within(what, dwg, want_dw, tol_dw, vc);
                free(dwg);
                rl_test_dfree(d_dw);
            }
            free(dh);
            rl_test_dfree(d_dh);
            rl_test_dfree(d_g);
            rl_test_dfree(d_ge);
        }
        free(g);
        free(ge);
        free(gd);
        free(ged);
        free(dh0);
        free(dw0);
        free(dh_ref);
        free(dw_ref);
        free(tol_dh);
        free(tol_dw);
        free(chk);
        free(scale_dh);
        free(z);
        free(dl);
        free(er);
        free(want_dh);
        free(want_dw);
        free(dh_cpu);
        free(dw_cpu);
    }
    if (s_gpu) {
        rl_test_dfree(d_h);
        rl_test_dfree(d_w);
        rl_test_dfree(d_tg);
        rl_test_dfree(d_scr);
    }
    free(hf);
    free(wf);
    free(hd);
    free(wd);
    free(hb);
    free(wb);
    free(tg);
    free(lp_ref);
    free(ent_ref);
    free(dlt);
    free(tol_lp);
    free(tol_ent);
    free(scr);
    free(lp_cpu);
    free(ent_cpu);
    free(zc);
}

static void test_head(void) {
    // N 1, 37, 300; chunks that do not divide N (and 1, and one larger than N); V odd; C 200
    const s_head_case_t cases[] = {
        {1, 200, 1001, 4, 1.0f, 1, 1, 1, 1},      {37, 200, 1001, 8, 0.7f, 0, 1, 0, 0},
        {37, 200, 1001, 1, 1.0f, 1, 1, 1, 1},     {300, 200, 1001, 64, 0.7f, 1, 1, 1, 1},
        {300, 200, 1001, 512, 1.0f, 1, 1, 0, 1},  {37, 200, 32003, 16, 0.7f, 1, 1, 1, 1},
        {300, 200, 32003, 128, 1.0f, 1, 0, 0, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        s_head_case(&cases[c]);
    }
}

// Arguments: refusals with their reasons, N = 0, every target -1.
static void test_head_edges(void) {
    const int N = 3, C = 8, V = 16;
    uint16_t hb[3 * 8], wb[16 * 8];
    for (int i = 0; i < N * C; i++) {
        hb[i] = rl_test_bf16(s_uniform());
    }
    for (int i = 0; i < V * C; i++) {
        wb[i] = rl_test_bf16(s_uniform());
    }
    int32_t none[3] = {-1, -1, -1};
    float g[3] = {1.0f, NAN, -2.0f}, dh0[3 * 8];
    for (int i = 0; i < N * C; i++) {
        dh0[i] = s_uniform();
    }
    size_t sb = rl_test_cu->logprob_scratch_bytes(2, C, V);
    uint16_t *d_h = rl_test_dup(hb, sizeof hb), *d_w = rl_test_dup(wb, sizeof wb);
    int32_t *d_tg = rl_test_dup(none, sizeof none);
    float *d_g = rl_test_dup(g, sizeof g), *d_dh = rl_test_dup(dh0, sizeof dh0);
    float *d_lp = s_poisoned(N * 4), *d_ent = s_poisoned(N * 4);
    char *d_scr = s_poisoned(sb + 256);
    const rl_cuda_module_t *m = rl_test_cu;
    rl_cuda_ctx_t *x = rl_test_ctx;
    CHECK_INT(m->logprob_forward(x, d_lp, d_ent, d_h, d_w, d_tg, 1.0f, N, C, V, d_scr, 0), -1);
    CHECK_CONTAINS(m->errmsg(x), "chunk 0");
    CHECK_INT(m->logprob_forward(x, d_lp, d_ent, d_h, d_w, d_tg, 0.0f, N, C, V, d_scr, 2), -1);
    CHECK_CONTAINS(m->errmsg(x), "temperature 0");
    CHECK_INT(m->logprob_forward(x, d_lp, d_ent, d_h, d_w, d_tg, NAN, N, C, V, d_scr, 2), -1);
    CHECK_INT(m->logprob_forward(x, d_lp, d_ent, d_h, d_w, d_tg, 1.0f, N, C, V, d_scr + 16, 2), -1);
    CHECK_CONTAINS(m->errmsg(x), "256-byte aligned");
    CHECK_INT(m->logprob_forward(x, d_lp, d_ent, d_h, d_w, d_tg, 1.0f, -1, C, V, d_scr, 2), -1);
    CHECK_INT(
        m->logprob_backward(x, d_dh, NULL, NULL, NULL, d_h, d_w, d_tg, 1.0f, N, C, V, d_scr, 2),
        -1);
    CHECK_CONTAINS(m->errmsg(x), "dlogp");
    // N = 0: nothing written
    CHECK_INT(m->logprob_forward(x, d_lp, d_ent, d_h, d_w, d_tg, 1.0f, 0, C, V, d_scr, 2), 0);
    float *lp = rl_test_back(d_lp, N * 4);
    CHECK(isnan(lp[0]) && isnan(lp[1]) && isnan(lp[2]));
    free(lp);
    // every target -1: zeros, and dh untouched whatever dlogp says (NaN included)
    CHECK_INT(m->logprob_forward(x, d_lp, d_ent, d_h, d_w, d_tg, 0.5f, N, C, V, d_scr, 2), 0);
    lp = rl_test_back(d_lp, N * 4);
    float *ent = rl_test_back(d_ent, N * 4);
    CHECK(lp[0] == 0 && lp[1] == 0 && lp[2] == 0 && ent[0] == 0 && ent[1] == 0 && ent[2] == 0);
    CHECK_INT(
        m->logprob_backward(x, d_dh, NULL, d_g, NULL, d_h, d_w, d_tg, 0.5f, N, C, V, d_scr, 2), 0);
    float *dh = rl_test_back(d_dh, sizeof dh0);
    CHECK_MSG(memcmp(dh, dh0, sizeof dh0) == 0, "dh changed with every target -1");
    // a target >= V is a caller's bug: NaN, not a read past the row
    int32_t big[3] = {0, V, 1};
    int32_t *d_big = rl_test_dup(big, sizeof big);
    CHECK_INT(m->logprob_forward(x, d_lp, NULL, d_h, d_w, d_big, 1.0f, N, C, V, d_scr, 2), 0);
    float *lpb = rl_test_back(d_lp, N * 4);
    CHECK(isfinite(lpb[0]) && isnan(lpb[1]) && isfinite(lpb[2]));
    free(lp);
    free(ent);
    free(dh);
    free(lpb);
    rl_test_dfree(d_h);
    rl_test_dfree(d_w);
    rl_test_dfree(d_tg);
    rl_test_dfree(d_g);
    rl_test_dfree(d_dh);
    rl_test_dfree(d_lp);
    rl_test_dfree(d_ent);
    rl_test_dfree(d_scr);
    rl_test_dfree(d_big);
}

// logits (S,V) = h (S,C; row stride ldh) @ w^T [/ T], against double.
static void test_logits(void) {
    const int S = 5, C = 200, V = 1001, ldh = 213;
    size_t hn = (size_t)S * ldh, wn = (size_t)V * C;
    float *hf = s_alloc(hn * 4), *wf = s_alloc(wn * 4);
    double *hd = s_alloc(hn * 8), *wd = s_alloc(wn * 8);
    uint16_t *hb = s_bf16_fill(hf, hd, hn, 1.0f), *wb = s_bf16_fill(wf, wd, wn, 0.64f);
    uint16_t *d_h = rl_test_dup(hb, hn * 2), *d_w = rl_test_dup(wb, wn * 2);
    double *want = s_alloc((size_t)S * V * 8), *tol = s_alloc((size_t)S * V * 8);
    const float temps[2] = {0.0f, 0.7f};
    for (int t = 0; t < 2; t++) {
        double T = temps[t] > 0 ? temps[t] : 1.0;
        for (int s = 0; s < S; s++) {
            for (int v = 0; v < V; v++) {
                double a = 0, sa = 0;
                for (int c = 0; c < C; c++) {
                    double p = hd[(size_t)s * ldh + c] * wd[(size_t)v * C + c];
                    a += p;
                    sa += fabs(p);
                }
                want[(size_t)s * V + v] = a / T;
                tol[(size_t)s * V + v] =
                    C * ldexp(1.0, -23) * sa / T + ldexp(1.0, -23) * fabs(a / T);
            }
        }
        float *d_l = s_poisoned((size_t)S * V * 4);
        int rc = rl_test_cu->logits(rl_test_ctx, d_l, d_h, ldh, d_w, temps[t], S, C, V);
        CHECK_MSG(rc == 0, "logits: %s", rl_test_cu->errmsg(rl_test_ctx));
        float *l = rl_test_back(d_l, (size_t)S * V * 4);
        char what[96];
        snprintf(what, sizeof what, "gpu logits S %d C %d V %d ldh %d T %g", S, C, V, ldh,
                 (double)temps[t]);
        s_within(what, l, want, tol, (size_t)S * V);
        free(l);
        rl_test_dfree(d_l);
    }
    CHECK_INT(rl_test_cu->logits(rl_test_ctx, NULL, d_h, C - 1, d_w, 0.0f, S, C, V), -1);
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "ldh");
    CHECK_INT(rl_test_cu->logits(rl_test_ctx, NULL, d_h, ldh, d_w, -1.0f, S, C, V), -1);
    CHECK_INT(rl_test_cu->logits(rl_test_ctx, NULL, d_h, ldh, d_w, 1.0f, 0, C, V), 0);
    rl_test_dfree(d_h);
    rl_test_dfree(d_w);
    free(hf);
    free(wf);
    free(hd);
    free(wd);
    free(hb);
    free(wb);
    free(want);
    free(tol);
}

// ---------------------------------------------------------------------------------------------
// sampling: a host model of the device's draw, written plainly (a full sort)

typedef struct {
    int V;
    double W;        // the kept tokens' weight, summed in id order
    double *lo, *hi; // (V) each kept token's interval of the id-order CDF; -1 when not kept
    double *lp;      // (V) log_softmax(x / T) (T = 1 when greedy)
    char *loose;     // (V) tokens the device may keep: the set, or up to the tokens whose
                     // top-p cutoff lies within rounding of the target
    int n_kept;
    int border; // the top-p cutoff lies within rounding of its target: the set may differ
                // by the tokens at the cutoff (draws are then checked against `loose`)
    int greedy; // the argmax (temperature 0)
} s_plan_t;

static const float *s_sort_x;

static int s_rank_cmp(const void *pa, const void *pb) { // larger logit first, then lower id
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    float xa = s_sort_x[a], xb = s_sort_x[b];
    if (xa != xb) {
        return xa > xb ? -1 : 1;
    }
    return a < b ? -1 : a > b;
}

static void s_plan_free(s_plan_t *P) {
    free(P->lo);
    free(P->hi);
    free(P->lp);
    free(P->loose);
}

static void s_plan(s_plan_t *P, const float *x, int V, float T, int top_k, float top_p) {
    memset(P, 0, sizeof *P);
    P->V = V;
    P->lo = s_alloc((size_t)V * 8);
    P->hi = s_alloc((size_t)V * 8);
    P->lp = s_alloc((size_t)V * 8);
    P->loose = s_alloc((size_t)V);
    float mx = x[0];
    int am = 0;
    for (int v = 1; v < V; v++) {
        if (x[v] > mx) {
            mx = x[v];
            am = v;
        }
    }
    double inv_t = T > 0 ? 1.0 / (double)T : 1.0, S = 0;
    float *e = s_alloc((size_t)V * 4);
    for (int v = 0; v < V; v++) {
        e[v] = expf((float)(((double)x[v] - mx) * inv_t));
        S += e[v];
        P->lo[v] = P->hi[v] = -1;
    }
    for (int v = 0; v < V; v++) {
        P->lp[v] = ((double)x[v] - mx) * inv_t - log(S);
    }
    P->greedy = am;
    if (T == 0) {
        P->lo[am] = 0;
        P->hi[am] = P->W = 1;
        P->n_kept = 1;
        P->loose[am] = 1;
        free(e);
        return;
    }
    int32_t *ord = s_alloc((size_t)V * 4);
    for (int v = 0; v < V; v++) {
        ord[v] = v;
    }
    s_sort_x = x;
    qsort(ord, (size_t)V, 4, s_rank_cmp);
    int n = top_k > 0 && top_k < V ? top_k : V, n_hi = n;
    if (top_p < 1.0f) {
        // the device's fixed-point masses; its expf may differ from ours by 2 ulp per weight,
        // which moves its running masses and target by <= 2^-21 Q: the cutoff is certain only
        // outside that margin (2^-20 Q allowed)
        uint64_t Q = 0, c = 0;
        for (int i = 0; i < n; i++) {
            Q += (uint64_t)((double)e[ord[i]] * 1099511627776.0);
        }
        double target = (double)top_p * (double)Q, margin = ldexp((double)Q, -20);
        int n_at = -1, n_lo = -1;
        for (int i = 0; i < n; i++) {
            c += (uint64_t)((double)e[ord[i]] * 1099511627776.0);
            if (n_lo < 0 && (double)c >= target - margin) {
                n_lo = i + 1;
            }
            if (n_at < 0 && (double)c >= target) {
                n_at = i + 1;
            }
            if ((double)c >= target + margin || i == n - 1) {
                n_hi = i + 1;
                break;
            }
        }
        P->border = n_lo != n_hi;
        n = n_at;
    }
    char *kept = s_alloc((size_t)V);
    for (int i = 0; i < n; i++) {
        kept[ord[i]] = 1;
    }
    for (int i = 0; i < n_hi; i++) {
        P->loose[ord[i]] = 1;
    }
    double c = 0;
    for (int v = 0; v < V; v++) {
        if (kept[v] && e[v] > 0) {
            P->lo[v] = c;
            c += e[v];
            P->hi[v] = c;
            P->n_kept++;
        }
    }
    P->W = c;
    free(kept);
    free(ord);
    free(e);
}

static int s_plan_draw(const s_plan_t *P, double u) {
    double t = u * P->W;
    int last = P->greedy;
    for (int v = 0; v < P->V; v++) {
        if (P->hi[v] >= 0) {
            last = v;
            if (t < P->hi[v]) {
                return v;
            }
        }
    }
    return last;
}

// The device's token is acceptable: kept, and its interval holds u W up to the margin.
static int s_plan_ok(const s_plan_t *P, int tok, double u) {
    if (tok < 0 || tok >= P->V || P->hi[tok] < 0) {
        return 0;
    }
    double t = u * P->W, m = ldexp(P->W, -20);
    return P->lo[tok] - m <= t && t < P->hi[tok] + m;
}

// The plan against the CPU sampler (rollout/rl_sample.c): the same support and probabilities,
// and the same logprobs. Host-only.
static void s_plan_vs_cpu(const char *what, const s_plan_t *P, const float *x, float T, int top_k,
                          float top_p, float *dist) {
    int V = P->V;
    float *lp = s_alloc((size_t)V * 4), *pr = s_alloc((size_t)V * 4);
    int32_t *idx = s_alloc((size_t)V * 4);
    rl_sample_opts_t o = {T, top_k, top_p};
    rl_sample_dist(dist, lp, pr, idx, x, V, &o);
    size_t diff = 0, off = 0;
    double worst = 0;
    for (int v = 0; v < V; v++) {
        int kept = P->hi[v] >= 0;
        diff += P->border ? (dist[v] > 0 && !P->loose[v]) : kept != (dist[v] > 0);
        if (kept && !P->border) {
            double p = (P->hi[v] - P->lo[v]) / P->W;
            double r = fabs(dist[v] - p) / (1e-5 * p + 1e-30);
            worst = r > worst ? r : worst;
            off += r > 1;
        }
    }
    rl_sample_log_softmax(lp, NULL, x, V, T > 0 ? T : 1.0f);
    size_t lbad = 0;
    for (int v = 0; v < V; v++) {
        lbad += !(fabs(lp[v] - P->lp[v]) <= 4e-6 + 4e-7 * fabs(P->lp[v]));
    }
    CHECK_MSG(diff == 0,
              "%s: the host model keeps %zu tokens the CPU sampler does not (or the "
              "reverse)",
              what, diff);
    CHECK_MSG(off == 0, "%s: %zu kept probabilities differ from the CPU sampler's (worst %.2f)",
              what, off, worst);
    CHECK_MSG(lbad == 0, "%s: %zu logprobs differ from rl_sample_log_softmax", what, lbad);
    free(lp);
    free(pr);
    free(idx);
}

// Chi-square of counts (V) over n draws against dist (V): tokens outside the support never drawn
// (exact); bins of expected count < 5 merged into the most likely token's bin; the critical value
// at p = 1e-6 by Wilson-Hilferty.
static void s_chi2(const char *what, const long *count, const float *dist, int V, long n) {
    long outside = 0, o_rest = 0;
    double e_rest = 0;
    int top = -1;
    for (int v = 0; v < V; v++) {
        if (dist[v] <= 0) {
            outside += count[v];
        } else if (top < 0 || dist[v] > dist[top]) {
            top = v;
        }
    }
    CHECK_MSG(outside == 0, "%s: %ld draws outside the kept set", what, outside);
    double chi = 0;
    int bins = 0;
    for (int v = 0; v < V; v++) {
        double e = (double)n * dist[v];
        if (dist[v] > 0 && v != top && e < 5) {
            e_rest += e;
            o_rest += count[v];
        }
    }
    for (int v = 0; v < V; v++) {
        double e = (double)n * dist[v], o = (double)count[v];
        if (dist[v] <= 0 || (v != top && e < 5)) {
            continue;
        }
        if (v == top) {
            e += e_rest;
            o += (double)o_rest;
        }
        chi += (o - e) * (o - e) / e;
        bins++;
    }
    int df = bins - 1;
    if (df < 1) {
        CHECK_MSG(count[top] == n, "%s: %ld of %ld draws on the only kept token", what, count[top],
                  n);
        printf("%-52s %ld draws, all on token %d\n", what, n, top);
        return;
    }
    double a = 2.0 / (9.0 * df), crit = df * pow(1 - a + 4.753 * sqrt(a), 3);
    printf("%-52s %ld draws, chi2 %.1f, df %d, critical %.1f (p 1e-6)%s\n", what, n, chi, df, crit,
           chi <= crit ? "" : " FAIL");
    CHECK_MSG(chi <= crit, "%s: chi2 %.1f over %d bins past %.1f", what, chi, bins, crit);
}

static uint64_t s_stream(int r) {
    return 0x9E3779B97F4A7C15ull * (uint64_t)(r + 1) ^ 0x5eedull;
}

// rows (R,V) distinct logits; the batch has R * reps rows (row s uses rows[s % R], stream
// s_stream(s % R), step base + s / R), launched `launches` times with fresh steps. Checks every
// draw against the host model; with R == 1, the frequencies (chi-square) and exclusion.
static void s_sample_case(const char *name, const float *rows, int R, int V, float T, int top_k,
                          float top_p, int reps, int launches) {
    char what[160];
    snprintf(what, sizeof what, "%s V %d T %g k %d p %g", name, V, (double)T, top_k, (double)top_p);
    int S = R * reps;
    s_plan_t *P = s_alloc((size_t)R * sizeof *P);
    float *dist = s_alloc((size_t)V * 4);
    int border = 0;
    for (int r = 0; r < R; r++) {
        s_plan(&P[r], rows + (size_t)r * V, V, T, top_k, top_p);
        s_plan_vs_cpu(what, &P[r], rows + (size_t)r * V, T, top_k, top_p, dist);
        border += P[r].border;
    }
    if (border) {
        printf("%s: %d of %d rows have a top-p cutoff within rounding: their draws are checked "
               "against the tokens either side of it\n",
               what, border, R);
    }
    float *x = s_alloc((size_t)S * V * 4);
    uint64_t *keys = s_alloc((size_t)S * 8), *steps = s_alloc((size_t)S * 8);
    for (int s = 0; s < S; s++) {
        memcpy(x + (size_t)s * V, rows + (size_t)(s % R) * V, (size_t)V * 4);
        keys[s] = s_stream(s % R);
    }
    // R > 1: the sampler's entry, sample_rows: the R rows once, in reverse order, each draw
    // naming its row and bringing its uniform (the same Philox values, computed here)
    int32_t *map = s_alloc((size_t)S * 4);
    double *us = s_alloc((size_t)S * 8);
    float *rev = s_alloc((size_t)R * V * 4);
    for (int s = 0; s < S; s++) {
        map[s] = R - 1 - s % R;
    }
    for (int r = 0; r < R; r++) {
        memcpy(rev + (size_t)(R - 1 - r) * V, rows + (size_t)r * V, (size_t)V * 4);
    }
    float *d_x = NULL, *d_lp = NULL;
    uint64_t *d_keys = NULL, *d_steps = NULL;
    int32_t *d_tok = NULL, *d_map = NULL;
    double *d_us = NULL;
    if (s_gpu) {
        d_map = rl_test_dup(map, (size_t)S * 4);
        d_us = rl_test_dup(NULL, (size_t)S * 8);
        d_x = R == 1 ? rl_test_dup(x, (size_t)S * V * 4) : rl_test_dup(rev, (size_t)R * V * 4);
        d_keys = rl_test_dup(keys, (size_t)S * 8);
        d_steps = rl_test_dup(NULL, (size_t)S * 8);
        d_tok = rl_test_poisoned((size_t)S * 4);
        d_lp = s_poisoned((size_t)S * 4);
    }
    long *count = s_alloc((size_t)V * sizeof *count);
    long n = 0, n_sure = 0, exact = 0, bad = 0, lbad = 0;
    for (int l = 0; l < launches; l++) {
        for (int s = 0; s < S; s++) {
            steps[s] = (uint64_t)l * reps + (uint64_t)(s / R);
        }
        int32_t *tok;
        float *lp;
        if (s_gpu) {
            int rc;
            if (R == 1) {
                CHECK_INT(rl_test_cu->h2d(rl_test_ctx, d_steps, steps, (size_t)S * 8), 0);
                rc = rl_test_cu->sample(rl_test_ctx, d_tok, d_lp, d_x, T, top_k, top_p, d_keys,
                                        d_steps, S, V);
            } else {
                for (int s = 0; s < S; s++) {
                    us[s] = rl_cuda_uniform(keys[s], steps[s]);
                }
                CHECK_INT(rl_test_cu->h2d(rl_test_ctx, d_us, us, (size_t)S * 8), 0);
                rc = rl_test_cu->sample_rows(rl_test_ctx, d_tok, d_lp, d_x, d_map,
                                             T > 0 ? d_us : NULL, T, top_k, top_p, S, V);
            }
            CHECK_MSG(rc == 0, "sample %s: %s", what, rl_test_cu->errmsg(rl_test_ctx));
            tok = rl_test_back(d_tok, (size_t)S * 4);
            lp = rl_test_back(d_lp, (size_t)S * 4);
        } else { // the host model's own draws: exercises the statistics here
            tok = s_alloc((size_t)S * 4);
            lp = s_alloc((size_t)S * 4);
            for (int s = 0; s < S; s++) {
                const s_plan_t *p = &P[s % R];
                tok[s] = s_plan_draw(p, rl_cuda_uniform(keys[s], steps[s]));
                lp[s] = (float)p->lp[tok[s]];
            }
        }
        for (int s = 0; s < S; s++) {
            const s_plan_t *p = &P[s % R];
            double u = rl_cuda_uniform(keys[s], steps[s]);
            int t = tok[s];
            if (t < 0 || t >= V) {
                bad++;
                continue;
            }
            if (T == 0) {
                bad += t != p->greedy;
                exact += t == p->greedy;
                n_sure++;
            } else if (!p->border) {
                bad += !s_plan_ok(p, t, u);
                exact += t == s_plan_draw(p, u);
                n_sure++;
            } else {
                bad += !p->loose[t];
            }
            lbad += !(fabs(lp[s] - p->lp[t]) <= 4e-6 + 4e-7 * fabs(p->lp[t]));
            count[t] += R == 1;
            n++;
        }
        free(tok);
        free(lp);
    }
    printf("%-52s %ld draws: %ld of %ld as the host model's, %ld outside, %ld logprobs off\n", what,
           n, exact, n_sure, bad, lbad);
    CHECK_MSG(bad == 0, "%s: %ld draws not in the kept set or off their CDF interval", what, bad);
    CHECK_MSG(lbad == 0, "%s: %ld logprobs off", what, lbad);
    CHECK_MSG(exact * 10 >= n_sure * 9, "%s: only %ld of %ld draws as the host model's", what,
              exact, n_sure);
    if (R == 1 && T > 0 && !border) {
        rl_sample_opts_t o = {T, top_k, top_p};
        float *lpw = s_alloc((size_t)V * 4), *pr = s_alloc((size_t)V * 4);
        int32_t *idx = s_alloc((size_t)V * 4);
        rl_sample_dist(dist, lpw, pr, idx, rows, V, &o);
        s_chi2(what, count, dist, V, n);
        free(lpw);
        free(pr);
        free(idx);
    }
    if (s_gpu) {
        rl_test_dfree(d_x);
        rl_test_dfree(d_keys);
        rl_test_dfree(d_steps);
        rl_test_dfree(d_tok);
        rl_test_dfree(d_lp);
        rl_test_dfree(d_map);
        rl_test_dfree(d_us);
    }
    free(map);
    free(us);
    free(rev);
    for (int r = 0; r < R; r++) {
        s_plan_free(&P[r]);
    }
    free(P);
    free(dist);
    free(x);
    free(keys);
    free(steps);
    free(count);
}

static void s_fill_logits(float *x, size_t n, int kind) {
    for (size_t i = 0; i < n; i++) {
        if (kind == 0) { // spread: roughly normal, sd ~2
            x[i] = 2.0f * (s_uniform() + s_uniform() + s_uniform());
        } else if (kind == 2) { // mild: sd ~1
            x[i] = s_uniform() + s_uniform() + s_uniform();
        } else { // ties: five levels
            x[i] = (float)(int)(s_u01() * 5) - 2.0f;
        }
    }
}

static void test_sample_distribution(void) {
    const int V = 37;
    float spread[37], ties[37];
    s_fill_logits(spread, V, 2);
    s_fill_logits(ties, V, 1);
    // one row, 8192 slots x 8 launches = 65,536 draws per configuration; under the CPU emulation
    // (a block of 512 fibers per draw, ~0.6 ms each) 1024 slots x 1 launch: every draw is still
    // checked against the host model, and the chi-square merges bins expected under 5
    const int slots = rl_test_emulated() ? 1024 : 8192, launches = rl_test_emulated() ? 1 : 8;
    if (rl_test_emulated()) {
        printf("model.cuda_head: emulated: %d draws per distribution instead of 65536\n",
               slots * launches);
    }
    s_sample_case("dist spread", spread, 1, V, 1.0f, 0, 1.0f, slots, launches);
    s_sample_case("dist spread", spread, 1, V, 0.7f, 5, 1.0f, slots, launches);
    s_sample_case("dist spread", spread, 1, V, 1.3f, 0, 0.8f, slots, launches);
    s_sample_case("dist spread", spread, 1, V, 0.7f, 10, 0.6f, slots, launches);
    s_sample_case("dist spread", spread, 1, V, 1.0f, 1, 1.0f, slots, launches);
    s_sample_case("dist spread", spread, 1, V, 0.5f, 0, 1e-3f, slots, launches);
    s_sample_case("dist spread", spread, 1, V, 1.0f, V, 1.0f, slots, launches);
    s_sample_case("dist ties", ties, 1, V, 1.0f, 7, 1.0f, slots, launches);
    s_sample_case("dist ties", ties, 1, V, 1.0f, 0, 0.5f, slots, launches);
    s_sample_case("dist ties", ties, 1, V, 2.0f, 12, 0.7f, slots, launches);
}

static void test_sample_exact(void) {
    // many distinct rows, a few draws each, every draw checked against the host model
    const int R = 64;
    const int Vs[2] = {1001, 32003};
    for (int vi = 0; vi < 2; vi++) {
        int V = Vs[vi];
        float *spread = s_alloc((size_t)R * V * 4), *ties = s_alloc((size_t)R * V * 4);
        s_fill_logits(spread, (size_t)R * V, 0);
        s_fill_logits(ties, (size_t)R * V, 1);
        s_sample_case("exact spread", spread, R, V, 0.8f, 50, 0.9f, 4, 1);
        s_sample_case("exact spread", spread, R, V, 1.0f, 0, 0.95f, 4, 1);
        s_sample_case("exact spread", spread, R, V, 1.2f, 0, 1.0f, 4, 1);
        s_sample_case("exact spread", spread, R, V, 0.6f, 1000, 1.0f, 4, 1);
        s_sample_case("exact spread", spread, R, V, 0.0f, 0, 1.0f, 1, 1);
        s_sample_case("exact ties", ties, R, V, 1.0f, 5, 1.0f, 4, 1);
        s_sample_case("exact ties", ties, R, V, 1.0f, 0, 0.3f, 4, 1);
        s_sample_case("exact ties", ties, R, V, 0.0f, 0, 1.0f, 1, 1);
        free(spread);
        free(ties);
    }
}

// Greedy: the lowest id among tied maxima (-0 and +0 tie), and its logprob at T = 1.
static void test_sample_greedy(void) {
    const int V = 1001, R = 5;
    float *x = s_alloc((size_t)R * V * 4);
    int want[5];
    for (int r = 0; r < R; r++) {
        for (int v = 0; v < V; v++) {
            x[(size_t)r * V + v] = -1.0f - (float)s_u01();
        }
    }
    // row 0: all equal
    for (int v = 0; v < V; v++) {
        x[v] = 0.25f;
    }
    want[0] = 0;
    x[1 * V + 700] = x[1 * V + 5] = x[1 * V + 3] = 2.0f; // row 1: three maxima
    want[1] = 3;
    x[2 * V + V - 1] = 0.5f; // row 2: the last id
    want[2] = V - 1;
    x[3 * V + 7] = 0.0f; // row 3: -0 before +0
    x[3 * V + 4] = -0.0f;
    want[3] = 4;
    x[4 * V + 999] = x[4 * V + 998] = 3.0f; // row 4: two adjacent maxima at the end
    want[4] = 998;
    for (int r = 0; r < R; r++) {
        CHECK_INT(rl_sample_argmax(x + (size_t)r * V, V), want[r]); // the CPU agrees
    }
    s_sample_case("greedy ties", x, R, V, 0.0f, 0, 1.0f, 1, 1);
    if (s_gpu) {
        float *d_x = rl_test_dup(x, (size_t)R * V * 4);
        int32_t *d_tok = rl_test_poisoned((size_t)R * 4);
        // greedy needs no stream: keys and steps NULL; logprobs NULL
        CHECK_INT(
            rl_test_cu->sample(rl_test_ctx, d_tok, NULL, d_x, 0.0f, 3, 0.5f, NULL, NULL, R, V), 0);
        int32_t *tok = rl_test_back(d_tok, (size_t)R * 4);
        for (int r = 0; r < R; r++) {
            CHECK_MSG(tok[r] == want[r], "greedy row %d: %d, want %d", r, tok[r], want[r]);
        }
        free(tok);
        rl_test_dfree(d_x);
        rl_test_dfree(d_tok);
    }
    free(x);
}

// The same (key, step) and logits give the same token and logprob, whichever slot and batch the
// row is in; the argument refusals; V = 1; S = 0.
static void test_sample_stream(void) {
    const int V = 1001, S = 96;
    float *x = s_alloc((size_t)S * V * 4);
    s_fill_logits(x, (size_t)S * V, 0);
    uint64_t keys[96], steps[96];
    for (int s = 0; s < S; s++) {
        keys[s] = s_stream(s);
        steps[s] = (uint64_t)s * 7 + 3;
    }
    float *d_x = rl_test_dup(x, (size_t)S * V * 4);
    uint64_t *d_k = rl_test_dup(keys, sizeof keys), *d_s = rl_test_dup(steps, sizeof steps);
    int32_t *d_t = rl_test_poisoned(S * 4);
    float *d_lp = s_poisoned(S * 4);
    const rl_cuda_module_t *m = rl_test_cu;
    rl_cuda_ctx_t *c = rl_test_ctx;
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 0.9f, 40, 0.9f, d_k, d_s, S, V), 0);
    int32_t *t1 = rl_test_back(d_t, S * 4);
    float *l1 = rl_test_back(d_lp, S * 4);
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 0.9f, 40, 0.9f, d_k, d_s, S, V), 0);
    int32_t *t2 = rl_test_back(d_t, S * 4);
    float *l2 = rl_test_back(d_lp, S * 4);
    CHECK_MSG(memcmp(t1, t2, S * 4) == 0 && memcmp(l1, l2, S * 4) == 0,
              "two identical launches drew differently");
    // row 41 alone, as a batch of one
    const int r = 41;
    float *d_x1 = rl_test_dup(x + (size_t)r * V, (size_t)V * 4);
    uint64_t *d_k1 = rl_test_dup(&keys[r], 8), *d_s1 = rl_test_dup(&steps[r], 8);
    int32_t *d_t1 = rl_test_poisoned(4);
    float *d_l1 = s_poisoned(4);
    CHECK_INT(m->sample(c, d_t1, d_l1, d_x1, 0.9f, 40, 0.9f, d_k1, d_s1, 1, V), 0);
    int32_t *t3 = rl_test_back(d_t1, 4);
    float *l3 = rl_test_back(d_l1, 4);
    CHECK_MSG(t3[0] == t1[r] && l3[0] == l1[r], "row %d alone drew %d, in the batch %d", r, t3[0],
              t1[r]);
    // the refusals
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 1e-7f, 0, 1.0f, d_k, d_s, S, V), -1);
    CHECK_CONTAINS(m->errmsg(c), "temperature");
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, -1.0f, 0, 1.0f, d_k, d_s, S, V), -1);
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 1.0f, -1, 1.0f, d_k, d_s, S, V), -1);
    CHECK_CONTAINS(m->errmsg(c), "top_k -1");
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 1.0f, 0, 0.0f, d_k, d_s, S, V), -1);
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 1.0f, 0, 1.5f, d_k, d_s, S, V), -1);
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 1.0f, 0, 1.0f, NULL, d_s, S, V), -1);
    CHECK_CONTAINS(m->errmsg(c), "keys and steps");
    int32_t *zeros = calloc((size_t)S, 4);
    int32_t *d_map = rl_test_dup(zeros, (size_t)S * 4);
    free(zeros);
    CHECK_INT(m->sample_rows(c, d_t, d_lp, d_x, d_map, NULL, 1.0f, 0, 1.0f, S, V), -1);
    CHECK_CONTAINS(m->errmsg(c), "uniforms are needed");
    CHECK_INT(m->sample_rows(c, d_t, d_lp, d_x, d_map, NULL, 0.0f, 0, 1.0f, S, V), 0);
    rl_test_dfree(d_map);
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 1.0f, 0, 1.0f, d_k, d_s, 1, RL_CUDA_SAMPLE_MAX_V + 1),
              -1);
    CHECK_INT(m->sample(c, d_t, d_lp, d_x, 1.0f, 0, 1.0f, d_k, d_s, 0, V), 0);
    // V = 1: token 0, logprob 0, at any settings
    CHECK_INT(m->sample(c, d_t1, d_l1, d_x1, 0.7f, 1, 0.5f, d_k1, d_s1, 1, 1), 0);
    int32_t *t4 = rl_test_back(d_t1, 4);
    float *l4 = rl_test_back(d_l1, 4);
    CHECK(t4[0] == 0 && l4[0] == 0.0f);
    free(x);
    free(t1);
    free(t2);
    free(l1);
    free(l2);
    free(t3);
    free(l3);
    free(t4);
    free(l4);
    rl_test_dfree(d_x);
    rl_test_dfree(d_k);
    rl_test_dfree(d_s);
    rl_test_dfree(d_t);
    rl_test_dfree(d_lp);
    rl_test_dfree(d_x1);
    rl_test_dfree(d_k1);
    rl_test_dfree(d_s1);
    rl_test_dfree(d_t1);
    rl_test_dfree(d_l1);
}

// The module's table has the head's entries, and the scratch's size is what the header says.
static void test_table(void) {
    char err[512];
    const rl_cuda_module_t *m = rl_device_cuda(err, sizeof err);
    if (!m) {
        printf("no CUDA module in this build (%s): its table is not checked\n", err);
        return;
    }
    CHECK(m->logprob_scratch_bytes && m->logprob_forward && m->logprob_backward && m->logits &&
          m->sample);
    size_t al = 256, cv = (size_t)64 * 151936, cc = (size_t)64 * 896;
#define S_AL(b) (((b) + al - 1) / al * al)
    CHECK(m->logprob_scratch_bytes(64, 896, 151936) ==
          S_AL(cv * 4) + S_AL(cv * 2) + S_AL(cc * 2) + S_AL(cc * 4));
#undef S_AL
    CHECK(m->logprob_scratch_bytes(0, 896, 151936) == 0);
    CHECK(m->logprob_scratch_bytes(7, 0, 11) == 0);
    CHECK(m->logprob_scratch_bytes(1, 1, 1) == 4 * 256);
}

int main(void) {
    RL_TEST_RUN(test_philox);
    RL_TEST_RUN(test_table);
    char err[2048];
    rl_device_t d = {1, 0};
    rl_device_info_t info;
    if (rl_device_check(&d, 0, &info, err, sizeof err) == 0) {
        rl_test_cuda_open("model.cuda_head");
        s_gpu = 1;
    } else {
        printf("model.cuda_head: no GPU (%s): the host-side checks only\n", err);
    }
    RL_TEST_RUN(test_head);
    RL_TEST_RUN(test_sample_distribution);
    RL_TEST_RUN(test_sample_exact);
    RL_TEST_RUN(test_sample_greedy);
    if (s_gpu) {
        RL_TEST_RUN(test_head_edges);
        RL_TEST_RUN(test_logits);
        RL_TEST_RUN(test_sample_stream);
        rl_test_cuda_close();
    }
    if (!s_gpu && rl_test_failed == 0) {
        printf("model.cuda_head: host-side checks passed (%d); skipped: no GPU\n", rl_test_checks);
        return RL_TEST_SKIP;
    }
    RL_TEST_DONE();
}

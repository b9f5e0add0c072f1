// test_cuda_elt — the element-wise and small kernels of the CUDA module (rl_cuda_elt.cu) on
// cuda:0 (label gpu; skipped without a GPU) against the CPU kernels they replace: embedding
// and its backward, RMSNorm (rows of C and per head), RoPE from the table, SwiGLU, residual,
// accumulate, dropout, AdamW, the sum of squares and scale of the clip, the scalar head. Fresh
// random inputs, every output poisoned (NaN) first, shapes that are not multiples of 8/16/64
// (C = 200, 1001, D = 40, N = 1, 37, 300), ids of -1, both output dtypes (fp32, bf16),
// accumulate and set, in place where allowed, NULL outputs, n = 0.
//
// Tolerances, and why:
// - Bit for bit (value equality; +0 and -0 are equal): embedding forward and backward, RoPE,
//   residual, accumulate, dropout, AdamW, scale, the head's dhidden. The kernels do the CPU's
//   IEEE operations in the CPU's order with rounding intrinsics nvcc never fuses; the CPU side
//   is built for x86-64's baseline (no FMA) or with -ffp-contract=off (rl_layers.c). A
//   -march=native build of the CPU kernels could fuse and break AdamW's equality.
// - bf16 outputs: equal to rl_test_bf16 of the kernel's own fp32 result (the same call), and
//   within one bf16 ulp of the CPU's fp32 result rounded.
// - SwiGLU: the kernel ports rl_expf operation for operation, so it should be bit for bit too
//   (the suite prints how many elements are); it passes within 2^-20 relative (8 ulp: what
//   an exp with a few ulp of error, like CUDA's expf, would give), with the backward's bound
//   scaled by 1 + |x| (1 + x (1 - s) cancels near x = -1.28). Keeping gate and up in bf16
//   (swiglu_forward_keep, swiglu_backward_kept: the device model's training activations): the
//   same act bits, gate and up rounded, and the backward from them bit for bit the fp32
//   backward given their values.
// - RMSNorm: the sums over a row are double on both sides in different orders, so mean(x^2)
//   rounds to the same float or one ulp apart: rstd and out within 2^-21 relative (4 ulp);
//   dinp within 2^-21 of the magnitudes it is made of (|dinp0| + |r g w| + |x k|). dw (and the
//   head's dw, db): the GPU sums the float terms in double and rounds twice (the total, then
//   dw + total), so it is within 2^-22 (|dw0| + sum |terms|) of the exact sum, which the test
//   computes in double (the CPU's float loop is checked against the same sum with its own,
//   looser bound N 2^-23 (...), which validates the reference).
// - The head's forward: both sides sum in double and round once: 2^-23 |want| + C 2^-51
//   sum |h w| (the double sums' order).
// - The sum of squares: all terms positive, double sums in two orders: 2 n 2^-53 sum.
#include "rl_test_cuda.h"

#include "rl_head.h"
#include "rl_layers.h"
#include "rl_lora.h"
#include "rl_optim.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// inputs and comparisons

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static uint64_t s_next(void) { // xorshift64*
    s_rng ^= s_rng >> 12;
    s_rng ^= s_rng << 25;
    s_rng ^= s_rng >> 27;
    return s_rng * 0x2545f4914f6cdd1dull;
}

static float s_uniform(void) { // (-1, 1)
    return (float)((double)(s_next() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *s_floats(size_t n, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * s_uniform();
    }
    return x;
}

static float *s_copy(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static float *s_zeros(size_t n) {
    return calloc(n ? n : 1, sizeof(float));
}

static int s_same(float a, float b) {
    return a == b || (isnan(a) && isnan(b));
}

static size_t s_count_same(const float *got, const float *want, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        k += s_same(got[i], want[i]);
    }
    return k;
}

// got == want element for element (NaN matches NaN); prints the first difference.
static int s_exact(const char *what, const float *got, const float *want, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s_same(got[i], want[i])) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    if (bad) {
        printf("%-40s n %-8zu %zu differ; first at %zu (got %.9g, want %.9g) FAIL\n", what, n, bad,
               first, (double)got[first], (double)want[first]);
    } else {
        printf("%-40s n %-8zu bit for bit\n", what, n);
    }
    CHECK_MSG(bad == 0, "%s: %zu of %zu elements differ from the CPU", what, bad, n);
    return bad == 0;
}

// |got - want| <= bound[i] and got finite, per element; prints the worst against its bound.
static int s_bounded(const char *what, const float *got, const double *want, const double *bound,
                     size_t n) {
    size_t bad = 0, worst = 0;
    double worst_r = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double r = isfinite(got[i]) ? d / bound[i] : INFINITY;
        if (!(r <= 1.0)) {
            bad++;
        }
        if (!(r <= worst_r)) {
            worst_r = r;
            worst = i;
        }
    }
    printf("%-40s n %-8zu worst |d| %.3g at %zu (got %.9g, want %.9g; %.2f of its bound)%s\n", what,
           n, n ? fabs((double)got[worst] - want[worst]) : 0.0, worst, n ? (double)got[worst] : 0.0,
           n ? want[worst] : 0.0, worst_r, bad ? " FAIL" : "");
    CHECK_MSG(bad == 0, "%s: %zu of %zu elements outside their bounds", what, bad, n);
    return bad == 0;
}

// |got - want| <= rel * |want| + 1e-37 against the CPU's float results.
static int s_close_rel(const char *what, const float *got, const float *want, size_t n,
                       double rel) {
    double *w = calloc(n ? n : 1, sizeof *w), *b = calloc(n ? n : 1, sizeof *b);
    for (size_t i = 0; i < n; i++) {
        w[i] = want[i];
        b[i] = rel * fabs(want[i]) + 1e-37;
    }
    int ok = s_bounded(what, got, w, b, n);
    size_t same = s_count_same(got, want, n);
    printf("%-40s identical to the CPU: %zu of %zu\n", "", same, n);
    free(w);
    free(b);
    return ok;
}

// bf16 output: equal to the rounding of the kernel's own fp32 result.
static void s_bf16_of(const char *what, const uint16_t *got, const float *f32, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = rl_test_bf16(f32[i]);
        int both_nan = isnan(f32[i]) && (got[i] & 0x7fff) > 0x7f80;
        if (got[i] != want && !both_nan) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    printf("%-40s n %-8zu %s\n", what, n, bad ? "FAIL" : "= bf16 of its fp32 result");
    CHECK_MSG(bad == 0,
              "%s: %zu of %zu bf16 values are not the fp32 result rounded (first %zu: "
              "%#06x, fp32 %.9g)",
              what, bad, n, first, bad ? got[first] : 0, bad ? (double)f32[first] : 0.0);
}

// bf16 bits as an ordered integer (-0 and +0 both 0)
static int s_bf16_key(uint16_t b) {
    return (b & 0x8000) ? -(int)(b & 0x7fff) : (int)(b & 0x7fff);
}

// bf16 output within one bf16 ulp of the CPU's fp32 result rounded.
static void s_bf16_near(const char *what, const uint16_t *got, const float *cpu, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int d = s_bf16_key(got[i]) - s_bf16_key(rl_test_bf16(cpu[i]));
        if (d > 1 || d < -1 || isnan(rl_test_from_bf16(got[i]))) {
            if (bad++ == 0) {
                first = i;
            }
        }
    }
    printf("%-40s n %-8zu %s\n", what, n, bad ? "FAIL" : "within 1 bf16 ulp of the CPU");
    CHECK_MSG(bad == 0,
              "%s: %zu of %zu bf16 values off the CPU's by more than one ulp (first "
              "%zu: %#06x, CPU %.9g)",
              what, bad, n, first, bad ? got[first] : 0, bad ? (double)cpu[first] : 0.0);
}

static void *s_dev(const void *host, size_t bytes) {
    return rl_test_dup(host, bytes ? bytes : 1);
}

static float *s_back(const void *dev, size_t n) {
    return rl_test_back(dev, n * sizeof(float));
}

static double *s_scratch(int C) {
    return rl_test_dup(NULL, rl_test_cu->elt_scratch_doubles(C) * sizeof(double));
}

#define S_OK(call)                                                                                 \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        CHECK_MSG(rc_ == 0, "%s: %s", #call, rl_test_cu->errmsg(rl_test_ctx));                     \
    } while (0)

// ---------------------------------------------------------------------------------------------
// embedding

static void s_embedding_case(int N, int C, int V) {
    char what[96];
    size_t nc = (size_t)N * C, vc = (size_t)V * C;
    int32_t *ids = malloc((N ? N : 1) * sizeof *ids);
    for (int i = 0; i < N; i++) {
        ids[i] = (i % 7 == 3) ? -1 : (int32_t)(s_next() % (uint64_t)V);
    }
    uint16_t *wte16 = malloc(vc * sizeof *wte16);
    float *wte = malloc(vc * sizeof *wte);
    for (size_t i = 0; i < vc; i++) {
        wte16[i] = rl_test_bf16(s_uniform());
        wte[i] = rl_test_from_bf16(wte16[i]);
    }
    int32_t *dids = s_dev(ids, (size_t)N * sizeof *ids);
    uint16_t *dwte16 = s_dev(wte16, vc * sizeof *wte16);
    float *dout = rl_test_poisoned(nc * sizeof(float) + 4);
    S_OK(rl_test_cu->embedding_forward(rl_test_ctx, dout, dids, dwte16, N, C, V));
    float *got = s_back(dout, nc), *want = malloc((nc ? nc : 1) * sizeof *want);
    rl_embedding_forward(want, ids, wte, N, C);
    snprintf(what, sizeof what, "embedding fwd N %d C %d V %d", N, C, V);
    s_exact(what, got, want, nc);

    // backward: the plan, its shape, then the kernel against the CPU's row-ordered adds
    int32_t *rows = malloc((N ? N : 1) * sizeof *rows), *seg = malloc((N + 1) * sizeof *seg);
    int n_seg = -1;
    S_OK(rl_test_cu->embedding_plan(rl_test_ctx, ids, N, V, rows, seg, &n_seg));
    int m = 0, plan_ok = n_seg >= 0 && seg[0] == 0;
    for (int i = 0; i < N; i++) {
        m += ids[i] >= 0;
    }
    plan_ok = plan_ok && seg[n_seg] == m;
    for (int k = 0; plan_ok && k < m; k++) {
        plan_ok = ids[rows[k]] >= 0;
        if (k > 0) {
            int a = rows[k - 1], b = rows[k];
            plan_ok = plan_ok && (ids[a] < ids[b] || (ids[a] == ids[b] && a < b));
        }
    }
    for (int u = 0; plan_ok && u < n_seg; u++) {
        plan_ok = seg[u] < seg[u + 1] && (u == 0 || ids[rows[seg[u]]] != ids[rows[seg[u] - 1]]);
        for (int k = seg[u]; plan_ok && k < seg[u + 1]; k++) {
            plan_ok = ids[rows[k]] == ids[rows[seg[u]]];
        }
    }
    CHECK_MSG(plan_ok, "embedding_plan N %d V %d: rows/seg are not the sorted runs of ids", N, V);

    float *g = s_floats(nc, 1.0f), *dw0 = s_floats(vc, 0.5f);
    float *dg = s_dev(g, nc * sizeof *g), *ddw = s_dev(dw0, vc * sizeof *dw0);
    int32_t *drows = s_dev(rows, (size_t)m * sizeof *rows);
    int32_t *dseg = s_dev(seg, (size_t)(n_seg + 1) * sizeof *seg);
    S_OK(rl_test_cu->embedding_backward(rl_test_ctx, ddw, dg, dids, drows, dseg, n_seg, C));
    float *gotw = s_back(ddw, vc), *wantw = s_copy(dw0, vc);
    rl_embedding_backward(wantw, g, ids, N, C);
    snprintf(what, sizeof what, "embedding bwd N %d C %d V %d (%d runs)", N, C, V, n_seg);
    s_exact(what, gotw, wantw, vc);

    rl_test_dfree(dids);
    rl_test_dfree(dwte16);
    rl_test_dfree(dout);
    rl_test_dfree(dg);
    rl_test_dfree(ddw);
    rl_test_dfree(drows);
    rl_test_dfree(dseg);
    free(ids);
    free(wte16);
    free(wte);
    free(got);
    free(want);
    free(rows);
    free(seg);
    free(g);
    free(dw0);
    free(gotw);
    free(wantw);
}

static void test_embedding(void) {
    s_embedding_case(1, 200, 1001);
    s_embedding_case(37, 40, 7); // many rows per id
    s_embedding_case(300, 1001, 1001);
    s_embedding_case(300, 200, 3); // runs of ~100 rows
    s_embedding_case(5, 1, 2);
    s_embedding_case(0, 40, 7); // nothing to do

    // every id -1: forward zeros, no runs, backward leaves dwte as it was
    int32_t ids[4] = {-1, -1, -1, -1}, rows[4], seg[5];
    int n_seg = -1;
    S_OK(rl_test_cu->embedding_plan(rl_test_ctx, ids, 4, 10, rows, seg, &n_seg));
    CHECK_INT(n_seg, 0);
    CHECK_INT(seg[0], 0);
    S_OK(rl_test_cu->embedding_backward(rl_test_ctx, NULL, NULL, NULL, NULL, NULL, 0, 8));

    // an id past the vocabulary: the plan refuses it, the forward writes NaN rather than read
    // outside wte
    int32_t bad[3] = {2, 10, 0};
    CHECK_INT(rl_test_cu->embedding_plan(rl_test_ctx, bad, 3, 10, rows, seg, &n_seg), -1);
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "ids[1] = 10 is outside the vocabulary");
    uint16_t wte[10 * 4];
    for (int i = 0; i < 40; i++) {
        wte[i] = rl_test_bf16((float)i);
    }
    int32_t *dbad = s_dev(bad, sizeof bad);
    uint16_t *dwte = s_dev(wte, sizeof wte);
    float *dout = rl_test_poisoned(12 * sizeof(float));
    S_OK(rl_test_cu->embedding_forward(rl_test_ctx, dout, dbad, dwte, 3, 4, 10));
    float *got = s_back(dout, 12);
    CHECK(got[0] == 8.0f && got[3] == 11.0f && isnan(got[4]) && isnan(got[7]) && got[8] == 0.0f &&
          got[11] == 3.0f);
    rl_test_dfree(dbad);
    rl_test_dfree(dwte);
    rl_test_dfree(dout);
    free(got);
}

// ---------------------------------------------------------------------------------------------
// RMSNorm

static void s_rmsnorm_case(int N, int C) {
    char what[96];
    size_t nc = (size_t)N * C;
    const float eps = 1e-6f;
    float *x = s_floats(nc, 1.0f), *w = malloc(C * sizeof *w);
    for (int i = 0; i < N; i++) { // rows from 1e-3 to 1e3
        float sc = powf(10.0f, (float)(i % 7) - 3.0f);
        for (int c = 0; c < C; c++) {
            x[(size_t)i * C + c] *= sc;
        }
    }
    for (int c = 0; c < C; c++) {
        w[c] = 1.0f + 0.5f * s_uniform();
    }
    float *want = malloc((nc ? nc : 1) * sizeof *want), *want_r = malloc((N ? N : 1) * 4);
    rl_rmsnorm_forward(want, want_r, x, w, eps, N, C);

    float *dx = s_dev(x, nc * 4), *dwt = s_dev(w, (size_t)C * 4);
    // fp32 + bf16 + rstd
    float *dout = rl_test_poisoned(nc * 4 + 4), *dr = rl_test_poisoned((size_t)N * 4 + 4);
    uint16_t *dout16 = rl_test_poisoned(nc * 2 + 2);
    S_OK(rl_test_cu->rmsnorm_forward(rl_test_ctx, dout, dout16, dr, dx, dwt, eps, N, C));
    float *got = s_back(dout, nc), *got_r = s_back(dr, (size_t)N);
    uint16_t *got16 = rl_test_back(dout16, nc * 2);
    snprintf(what, sizeof what, "rmsnorm fwd N %d C %d out", N, C);
    s_close_rel(what, got, want, nc, ldexp(1.0, -21));
    snprintf(what, sizeof what, "rmsnorm fwd N %d C %d rstd", N, C);
    s_close_rel(what, got_r, want_r, (size_t)N, ldexp(1.0, -21));
    snprintf(what, sizeof what, "rmsnorm fwd N %d C %d out bf16", N, C);
    s_bf16_of(what, got16, got, nc);

    // bf16 alone, no rstd: the same bits as with fp32, within one bf16 ulp of the CPU
    uint16_t *d16 = rl_test_poisoned(nc * 2 + 2);
    S_OK(rl_test_cu->rmsnorm_forward(rl_test_ctx, NULL, d16, NULL, dx, dwt, eps, N, C));
    uint16_t *only16 = rl_test_back(d16, nc * 2);
    CHECK_MSG(memcmp(only16, got16, nc * 2) == 0, "rmsnorm N %d C %d: bf16 alone differs", N, C);
    snprintf(what, sizeof what, "rmsnorm fwd N %d C %d bf16 alone", N, C);
    s_bf16_near(what, only16, want, nc);

    // in place: out == inp
    float *dxi = s_dev(x, nc * 4);
    S_OK(rl_test_cu->rmsnorm_forward(rl_test_ctx, dxi, NULL, NULL, dxi, dwt, eps, N, C));
    float *got_i = s_back(dxi, nc);
    snprintf(what, sizeof what, "rmsnorm fwd N %d C %d in place", N, C);
    s_exact(what, got_i, got, nc);

    // backward: accumulate dinp and dw
    float *g = s_floats(nc, 1.0f), *dinp0 = s_floats(nc, 1.0f), *dw0 = s_floats((size_t)C, 1.0f);
    float *cpu_dinp = s_copy(dinp0, nc), *cpu_dw = s_copy(dw0, (size_t)C);
    rl_rmsnorm_backward(cpu_dinp, cpu_dw, g, x, w, want_r, N, C);
    float *dg = s_dev(g, nc * 4), *drr = s_dev(want_r, (size_t)N * 4);
    float *ddinp = s_dev(dinp0, nc * 4), *ddw = s_dev(dw0, (size_t)C * 4);
    double *scratch = s_scratch(C);
    S_OK(rl_test_cu->rmsnorm_backward(rl_test_ctx, ddinp, ddw, dg, dx, dwt, drr, N, C, 1, scratch));
    float *got_dinp = s_back(ddinp, nc), *got_dw = s_back(ddw, (size_t)C);
    double *wd = malloc((nc ? nc : 1) * 8), *bd = malloc((nc ? nc : 1) * 8);
    double *mag = malloc((nc ? nc : 1) * 8); // |r g w| + |x k|: what dinp is made of
    double *wdw = malloc((size_t)C * 8), *bdw = malloc((size_t)C * 8),
           *bdw_cpu = malloc((size_t)C * 8);
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *gi = g + (size_t)i * C;
        double r = want_r[i], dot = 0;
        for (int c = 0; c < C; c++) {
            dot += (double)gi[c] * w[c] * xi[c];
        }
        double k = dot * r * r * r / C;
        for (int c = 0; c < C; c++) {
            size_t o = (size_t)i * C + c;
            wd[o] = cpu_dinp[o];
            mag[o] = fabs(r * gi[c] * w[c]) + fabs(xi[c] * k);
            bd[o] = ldexp(1.0, -21) * (fabs(dinp0[o]) + mag[o]) + 1e-37;
        }
    }
    for (int c = 0; c < C; c++) {
        double s = dw0[c], sa = fabs(dw0[c]);
        for (int i = 0; i < N; i++) {
            size_t o = (size_t)i * C + c;
            float t = (g[o] * x[o]) * want_r[i];
            s += t;
            sa += fabs(t);
        }
        wdw[c] = s;
        bdw[c] = ldexp(1.0, -22) * sa + 1e-37;
        bdw_cpu[c] = ldexp(1.0, -23) * (N + 2) * sa + 1e-37;
    }
    snprintf(what, sizeof what, "rmsnorm bwd N %d C %d dinp +=", N, C);
    s_bounded(what, got_dinp, wd, bd, nc);
    snprintf(what, sizeof what, "rmsnorm bwd N %d C %d dw +=", N, C);
    s_bounded(what, got_dw, wdw, bdw, (size_t)C);
    snprintf(what, sizeof what, "(the reference: CPU dw, its own bound)");
    s_bounded(what, cpu_dw, wdw, bdw_cpu, (size_t)C);

    // set dinp (poisoned), no dw
    float *dset = rl_test_poisoned(nc * 4 + 4);
    S_OK(rl_test_cu->rmsnorm_backward(rl_test_ctx, dset, NULL, dg, dx, dwt, drr, N, C, 0, NULL));
    float *got_set = s_back(dset, nc), *cpu_set = s_zeros(nc);
    rl_rmsnorm_backward(cpu_set, NULL, g, x, w, want_r, N, C);
    for (size_t o = 0; o < nc; o++) {
        wd[o] = cpu_set[o];
        bd[o] = ldexp(1.0, -21) * mag[o] + 1e-37;
    }
    snprintf(what, sizeof what, "rmsnorm bwd N %d C %d dinp =", N, C);
    s_bounded(what, got_set, wd, bd, nc);

    // dw alone, again from dw0: the same bits (a fixed order of sums)
    S_OK(rl_test_cu->h2d(rl_test_ctx, ddw, dw0, (size_t)C * 4));
    S_OK(rl_test_cu->rmsnorm_backward(rl_test_ctx, NULL, ddw, dg, dx, dwt, drr, N, C, 1, scratch));
    float *got_dw2 = s_back(ddw, (size_t)C);
    snprintf(what, sizeof what, "rmsnorm bwd N %d C %d dw again", N, C);
    s_exact(what, got_dw2, got_dw, (size_t)C);

    void *dev[] = {dx, dwt, dout, dr, dout16, d16, dxi, dg, drr, ddinp, ddw, scratch, dset};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        rl_test_dfree(dev[i]);
    }
    void *host[] = {x,   w,     want, want_r,   got,     got_r,    got16,  only16, got_i,
                    g,   dinp0, dw0,  cpu_dinp, cpu_dw,  got_dinp, got_dw, wd,     bd,
                    mag, wdw,   bdw,  bdw_cpu,  got_set, cpu_set,  got_dw2};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(host[i]);
    }
}

static void test_rmsnorm(void) {
    s_rmsnorm_case(1, 200);
    s_rmsnorm_case(37, 1001);
    s_rmsnorm_case(300, 40); // per head: N = rows * heads, C = D
    s_rmsnorm_case(300, 200);
    s_rmsnorm_case(4100, 40); // chunks of 65 rows: more rows per chunk than lanes
    s_rmsnorm_case(1, 1);
    // N = 0: nothing to do, nothing read
    S_OK(rl_test_cu->rmsnorm_forward(rl_test_ctx, NULL, NULL, NULL, NULL, NULL, 1e-6f, 0, 40));
    S_OK(rl_test_cu->rmsnorm_backward(rl_test_ctx, NULL, NULL, NULL, NULL, NULL, NULL, 0, 40, 1,
                                      NULL));
    CHECK_INT(rl_test_cu->rmsnorm_backward(rl_test_ctx, NULL, (float *)8, NULL, NULL, NULL, NULL, 3,
                                           40, 1, NULL),
              -1); // dw without scratch
}

// ---------------------------------------------------------------------------------------------
// RoPE

static void s_rope_case(int N, int H, int D, int n_pos) {
    char what[96];
    size_t n = (size_t)N * H * D;
    float *inv = malloc((size_t)(D / 2) * 4), *cs = malloc((size_t)n_pos * D * 4);
    for (int j = 0; j < D / 2; j++) {
        inv[j] = 1.0f / powf(10000.0f, (float)(2 * j) / (float)D);
    }
    rl_rope_table(cs, inv, n_pos, D);
    int32_t *pos = malloc((N ? N : 1) * 4), *neg = malloc((N ? N : 1) * 4);
    for (int i = 0; i < N; i++) {
        pos[i] = (int32_t)(s_next() % (uint64_t)(2 * n_pos - 1)) - (n_pos - 1);
    }
    pos[0] = 0;
    if (N > 1) {
        pos[N - 1] = n_pos - 1;
    }
    if (N > 2) {
        pos[1] = -(n_pos - 1);
    }
    for (int i = 0; i < N; i++) {
        neg[i] = -pos[i];
    }
    float *x = s_floats(n, 2.0f), *want = malloc(n * 4);
    rl_rope_forward_table(want, x, cs, pos, N, H, D);
    float *dcs = s_dev(cs, (size_t)n_pos * D * 4), *dx = s_dev(x, n * 4);
    int32_t *dpos = s_dev(pos, (size_t)N * 4);
    float *dout = rl_test_poisoned(n * 4 + 4);
    S_OK(rl_test_cu->rope_forward(rl_test_ctx, dout, dx, dcs, dpos, N, H, D, n_pos));
    float *got = s_back(dout, n);
    snprintf(what, sizeof what, "rope fwd N %d H %d D %d", N, H, D);
    s_exact(what, got, want, n);
    float *dxi = s_dev(x, n * 4);
    S_OK(rl_test_cu->rope_forward(rl_test_ctx, dxi, dxi, dcs, dpos, N, H, D, n_pos));
    float *got_i = s_back(dxi, n);
    snprintf(what, sizeof what, "rope fwd N %d H %d D %d in place", N, H, D);
    s_exact(what, got_i, want, n);

    // backward, set: R(pos)^T g = the table's rotation at -pos; in place and into poison
    float *g = s_floats(n, 1.0f), *want_set = malloc(n * 4);
    rl_rope_forward_table(want_set, g, cs, neg, N, H, D);
    float *dg = s_dev(g, n * 4), *dset = rl_test_poisoned(n * 4 + 4);
    S_OK(rl_test_cu->rope_backward(rl_test_ctx, dset, dg, dcs, dpos, N, H, D, n_pos, 0));
    float *got_set = s_back(dset, n);
    snprintf(what, sizeof what, "rope bwd N %d H %d D %d =", N, H, D);
    s_exact(what, got_set, want_set, n);
    S_OK(rl_test_cu->rope_backward(rl_test_ctx, dg, dg, dcs, dpos, N, H, D, n_pos, 0));
    float *got_seti = s_back(dg, n);
    snprintf(what, sizeof what, "rope bwd N %d H %d D %d = in place", N, H, D);
    s_exact(what, got_seti, want_set, n);

    // backward, accumulate: rl_rope_backward (cos and sin from inv_freq, not the table)
    float *dinp0 = s_floats(n, 1.0f), *want_acc = s_copy(dinp0, n);
    rl_rope_backward(want_acc, g, inv, pos, N, H, D);
    float *dacc = s_dev(dinp0, n * 4);
    S_OK(rl_test_cu->h2d(rl_test_ctx, dg, g, n * 4));
    S_OK(rl_test_cu->rope_backward(rl_test_ctx, dacc, dg, dcs, dpos, N, H, D, n_pos, 1));
    float *got_acc = s_back(dacc, n);
    snprintf(what, sizeof what, "rope bwd N %d H %d D %d +=", N, H, D);
    s_exact(what, got_acc, want_acc, n);

    void *dev[] = {dcs, dx, dpos, dout, dxi, dg, dset, dacc};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        rl_test_dfree(dev[i]);
    }
    void *host[] = {inv, cs,       pos,     neg,      x,     want,     got,    got_i,
                    g,   want_set, got_set, got_seti, dinp0, want_acc, got_acc};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(host[i]);
    }
}

static void test_rope(void) {
    s_rope_case(1, 1, 40, 16);
    s_rope_case(37, 3, 40, 64);
    s_rope_case(300, 2, 64, 512);
    s_rope_case(37, 7, 128, 300);
    s_rope_case(5, 2, 2, 4);
    // a position past the table: NaN, not a read outside it
    float cs[4 * 4], x[4] = {1, 2, 3, 4};
    float inv[2] = {1.0f, 0.01f};
    rl_rope_table(cs, inv, 4, 4);
    int32_t pos[1] = {4};
    float *dcs = s_dev(cs, sizeof cs), *dx = s_dev(x, sizeof x);
    int32_t *dpos = s_dev(pos, sizeof pos);
    float *dout = rl_test_poisoned(sizeof x);
    S_OK(rl_test_cu->rope_forward(rl_test_ctx, dout, dx, dcs, dpos, 1, 1, 4, 4));
    float *got = s_back(dout, 4);
    CHECK(isnan(got[0]) && isnan(got[1]) && isnan(got[2]) && isnan(got[3]));
    CHECK_INT(rl_test_cu->rope_forward(rl_test_ctx, dout, dx, dcs, dpos, 1, 1, 5, 4), -1); // odd D
    rl_test_dfree(dcs);
    rl_test_dfree(dx);
    rl_test_dfree(dpos);
    rl_test_dfree(dout);
    free(got);
}

// ---------------------------------------------------------------------------------------------
// SwiGLU

static float *s_gate(size_t n) {
    static const float special[] = {0.0f,   -0.0f,   1e-30f,      -1e-30f, 90.0f, -90.0f,
                                    200.0f, -200.0f, -1.2784645f, 20.0f,   -20.0f};
    float *x = s_floats(n, 8.0f);
    for (size_t i = 0; i < n; i += 13) {
        x[i] = special[(i / 13) % (sizeof special / sizeof special[0])];
    }
    return x;
}

static void s_swiglu_case(size_t n) {
    char what[96];
    float *x = s_gate(n), *u = s_floats(n, 2.0f), *want = malloc(n * 4);
    rl_swiglu_forward(want, x, u, n);
    float *dx = s_dev(x, n * 4), *du = s_dev(u, n * 4);
    float *dout = rl_test_poisoned(n * 4);
    uint16_t *dout16 = rl_test_poisoned(n * 2);
    S_OK(rl_test_cu->swiglu_forward(rl_test_ctx, dout, dout16, dx, du, n));
    float *got = s_back(dout, n);
    uint16_t *got16 = rl_test_back(dout16, n * 2);
    snprintf(what, sizeof what, "swiglu fwd n %zu", n);
    s_close_rel(what, got, want, n, ldexp(1.0, -20));
    snprintf(what, sizeof what, "swiglu fwd n %zu bf16", n);
    s_bf16_of(what, got16, got, n);
    uint16_t *d16 = rl_test_poisoned(n * 2);
    S_OK(rl_test_cu->swiglu_forward(rl_test_ctx, NULL, d16, dx, du, n));
    uint16_t *only16 = rl_test_back(d16, n * 2);
    CHECK_MSG(memcmp(only16, got16, n * 2) == 0, "swiglu n %zu: bf16 alone differs", n);
    snprintf(what, sizeof what, "swiglu fwd n %zu bf16 alone", n);
    s_bf16_near(what, only16, want, n);
    // in place over gate, then over up
    float *dxi = s_dev(x, n * 4), *dui = s_dev(u, n * 4);
    S_OK(rl_test_cu->swiglu_forward(rl_test_ctx, dxi, NULL, dxi, du, n));
    S_OK(rl_test_cu->swiglu_forward(rl_test_ctx, dui, NULL, dx, dui, n));
    float *got_g = s_back(dxi, n), *got_u = s_back(dui, n);
    snprintf(what, sizeof what, "swiglu fwd n %zu out = gate", n);
    s_exact(what, got_g, got, n);
    snprintf(what, sizeof what, "swiglu fwd n %zu out = up", n);
    s_exact(what, got_u, got, n);
    // keeping gate and up in bf16: the same act bits, and gate / up rounded
    uint16_t *k16 = rl_test_poisoned(n * 2), *kg16 = rl_test_poisoned(n * 2),
             *ku16 = rl_test_poisoned(n * 2);
    S_OK(rl_test_cu->swiglu_forward_keep(rl_test_ctx, k16, kg16, ku16, dx, du, n));
    uint16_t *keep16 = rl_test_back(k16, n * 2), *keepg = rl_test_back(kg16, n * 2),
             *keepu = rl_test_back(ku16, n * 2);
    CHECK_MSG(memcmp(keep16, got16, n * 2) == 0, "swiglu keep n %zu: act differs", n);
    snprintf(what, sizeof what, "swiglu keep n %zu gate bf16", n);
    s_bf16_of(what, keepg, x, n);
    snprintf(what, sizeof what, "swiglu keep n %zu up bf16", n);
    s_bf16_of(what, keepu, u, n);
    // the kept gate and up as fp32 (what the backward from them must equal, bit for bit)
    float *xk = malloc(n * 4), *uk = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        xk[i] = rl_test_from_bf16(keepg[i]);
        uk[i] = rl_test_from_bf16(keepu[i]);
    }
    float *dxk = s_dev(xk, n * 4), *duk = s_dev(uk, n * 4);

    // backward: accumulate with all four outputs, then set (poisoned) with all four
    float *g = s_floats(n, 1.0f), *dg0 = s_floats(n, 1.0f), *du0 = s_floats(n, 1.0f);
    double *bg = malloc(n * 8), *bu = malloc(n * 8), *wg = malloc(n * 8), *wu = malloc(n * 8);
    for (int acc = 1; acc >= 0; acc--) {
        float *cg = acc ? s_copy(dg0, n) : s_zeros(n), *cu = acc ? s_copy(du0, n) : s_zeros(n);
        if (acc) {
            rl_swiglu_backward(cg, cu, g, x, u, n);
        } else {
            rl_swiglu_backward_set(cg, cu, g, x, u, n);
        }
        float *ddg = acc ? s_dev(dg0, n * 4) : rl_test_poisoned(n * 4);
        float *ddu = acc ? s_dev(du0, n * 4) : rl_test_poisoned(n * 4);
        uint16_t *ddg16 = rl_test_poisoned(n * 2), *ddu16 = rl_test_poisoned(n * 2);
        float *dgrad = s_dev(g, n * 4);
        S_OK(rl_test_cu->swiglu_backward(rl_test_ctx, ddg, ddu, ddg16, ddu16, dgrad, dx, du, n,
                                         acc));
        float *rg = s_back(ddg, n), *ru = s_back(ddu, n);
        uint16_t *rg16 = rl_test_back(ddg16, n * 2), *ru16 = rl_test_back(ddu16, n * 2);
        for (size_t i = 0; i < n; i++) {
            double s = 1.0f / (1.0f + rl_expf(-x[i])); // the CPU's s (rl_expf clamps)
            double a0 = acc ? fabs(dg0[i]) : 0.0, b0 = acc ? fabs(du0[i]) : 0.0;
            wg[i] = cg[i];
            wu[i] = cu[i];
            bg[i] =
                ldexp(1.0, -20) * (a0 + fabs((double)g[i] * u[i]) * s * (1.0 + 2.0 * fabs(x[i]))) +
                1e-37;
            bu[i] = ldexp(1.0, -20) * (b0 + fabs((double)g[i] * x[i] * s)) + 1e-37;
        }
        snprintf(what, sizeof what, "swiglu bwd n %zu dgate %s", n, acc ? "+=" : "=");
        s_bounded(what, rg, wg, bg, n);
        printf("%-40s identical to the CPU: %zu of %zu\n", "", s_count_same(rg, cg, n), n);
        snprintf(what, sizeof what, "swiglu bwd n %zu dup %s", n, acc ? "+=" : "=");
        s_bounded(what, ru, wu, bu, n);
        printf("%-40s identical to the CPU: %zu of %zu\n", "", s_count_same(ru, cu, n), n);
        snprintf(what, sizeof what, "swiglu bwd n %zu dgate bf16 %s", n, acc ? "+=" : "=");
        s_bf16_of(what, rg16, rg, n);
        snprintf(what, sizeof what, "swiglu bwd n %zu dup bf16 %s", n, acc ? "+=" : "=");
        s_bf16_of(what, ru16, ru, n);

        // one output at a time: dgate alone, then dup alone (the other NULL)
        float *og = acc ? s_dev(dg0, n * 4) : rl_test_poisoned(n * 4);
        float *ou = acc ? s_dev(du0, n * 4) : rl_test_poisoned(n * 4);
        S_OK(rl_test_cu->swiglu_backward(rl_test_ctx, og, NULL, NULL, NULL, dgrad, dx, du, n, acc));
        S_OK(rl_test_cu->swiglu_backward(rl_test_ctx, NULL, ou, NULL, NULL, dgrad, dx, du, n, acc));
        float *rog = s_back(og, n), *rou = s_back(ou, n);
        snprintf(what, sizeof what, "swiglu bwd n %zu dgate alone %s", n, acc ? "+=" : "=");
        s_exact(what, rog, rg, n);
        snprintf(what, sizeof what, "swiglu bwd n %zu dup alone %s", n, acc ? "+=" : "=");
        s_exact(what, rou, ru, n);
        // from the kept bf16 gate and up: swiglu_backward given their fp32 values, bit for bit
        float *kg = acc ? s_dev(dg0, n * 4) : rl_test_poisoned(n * 4);
        float *ku = acc ? s_dev(du0, n * 4) : rl_test_poisoned(n * 4);
        float *fg = acc ? s_dev(dg0, n * 4) : rl_test_poisoned(n * 4);
        float *fu = acc ? s_dev(du0, n * 4) : rl_test_poisoned(n * 4);
        uint16_t *kg16b = rl_test_poisoned(n * 2), *ku16b = rl_test_poisoned(n * 2);
        S_OK(rl_test_cu->swiglu_backward_kept(rl_test_ctx, kg, ku, kg16b, ku16b, dgrad, kg16, ku16,
                                              n, acc));
        S_OK(rl_test_cu->swiglu_backward(rl_test_ctx, fg, fu, NULL, NULL, dgrad, dxk, duk, n, acc));
        float *rkg = s_back(kg, n), *rku = s_back(ku, n), *rfg = s_back(fg, n),
              *rfu = s_back(fu, n);
        uint16_t *rkg16 = rl_test_back(kg16b, n * 2), *rku16 = rl_test_back(ku16b, n * 2);
        snprintf(what, sizeof what, "swiglu bwd kept n %zu dgate %s", n, acc ? "+=" : "=");
        s_exact(what, rkg, rfg, n);
        snprintf(what, sizeof what, "swiglu bwd kept n %zu dup %s", n, acc ? "+=" : "=");
        s_exact(what, rku, rfu, n);
        snprintf(what, sizeof what, "swiglu bwd kept n %zu dgate bf16 %s", n, acc ? "+=" : "=");
        s_bf16_of(what, rkg16, rkg, n);
        snprintf(what, sizeof what, "swiglu bwd kept n %zu dup bf16 %s", n, acc ? "+=" : "=");
        s_bf16_of(what, rku16, rku, n);
        void *kdev[] = {kg, ku, fg, fu, kg16b, ku16b};
        for (size_t i = 0; i < sizeof kdev / sizeof kdev[0]; i++) {
            rl_test_dfree(kdev[i]);
        }
        void *khost[] = {rkg, rku, rfg, rfu, rkg16, rku16};
        for (size_t i = 0; i < sizeof khost / sizeof khost[0]; i++) {
            free(khost[i]);
        }

        void *dev[] = {ddg, ddu, ddg16, ddu16, dgrad, og, ou};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
            rl_test_dfree(dev[i]);
        }
        void *host[] = {cg, cu, rg, ru, rg16, ru16, rog, rou};
        for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
            free(host[i]);
        }
    }
    void *dev[] = {dx, du, dout, dout16, d16, dxi, dui, k16, kg16, ku16, dxk, duk};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        rl_test_dfree(dev[i]);
    }
    void *host[] = {x,   u,  want, got, got16, only16, got_g, got_u, g,  dg0,
                    du0, bg, bu,   wg,  wu,    keep16, keepg, keepu, xk, uk};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(host[i]);
    }
}

static void test_swiglu(void) {
    s_swiglu_case(1);
    s_swiglu_case(37);
    s_swiglu_case(1001);
    s_swiglu_case(300 * 200 + 3);
    S_OK(rl_test_cu->swiglu_forward(rl_test_ctx, NULL, NULL, NULL, NULL, 0));
    S_OK(rl_test_cu->swiglu_backward(rl_test_ctx, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 1));
    S_OK(rl_test_cu->swiglu_forward_keep(rl_test_ctx, NULL, NULL, NULL, NULL, NULL, 0));
    S_OK(rl_test_cu->swiglu_backward_kept(rl_test_ctx, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0,
                                          1));
}

// ---------------------------------------------------------------------------------------------
// residual, accumulate, dropout

static void s_elementwise_case(size_t n) {
    char what[96];
    float *a = s_floats(n, 3.0f), *b = s_floats(n, 3.0f), *want = malloc(n * 4);
    rl_residual_forward(want, a, b, n);
    float *da = s_dev(a, n * 4), *db = s_dev(b, n * 4), *dout = rl_test_poisoned(n * 4);
    S_OK(rl_test_cu->residual_forward(rl_test_ctx, dout, da, db, n));
    float *got = s_back(dout, n);
    snprintf(what, sizeof what, "residual n %zu", n);
    s_exact(what, got, want, n);
    S_OK(rl_test_cu->residual_forward(rl_test_ctx, da, da, db, n)); // out == a
    float *got_a = s_back(da, n);
    snprintf(what, sizeof what, "residual n %zu out = a", n);
    s_exact(what, got_a, want, n);
    S_OK(rl_test_cu->h2d(rl_test_ctx, da, a, n * 4));
    S_OK(rl_test_cu->residual_forward(rl_test_ctx, db, da, db, n)); // out == b
    float *got_b = s_back(db, n);
    snprintf(what, sizeof what, "residual n %zu out = b", n);
    s_exact(what, got_b, want, n);
    float *acc = s_copy(a, n);
    rl_accumulate(acc, b, n);
    S_OK(rl_test_cu->h2d(rl_test_ctx, db, b, n * 4));
    S_OK(rl_test_cu->accumulate(rl_test_ctx, da, db, n));
    float *got_acc = s_back(da, n);
    snprintf(what, sizeof what, "accumulate n %zu", n);
    s_exact(what, got_acc, acc, n);

    // dropout, p = 0.1: mask in {0, 1/0.9}
    float *mask = malloc(n * 4), keep = 1.0f / 0.9f;
    for (size_t i = 0; i < n; i++) {
        mask[i] = (s_next() % 10 == 0) ? 0.0f : keep;
    }
    float *dm = s_dev(mask, n * 4), *wdrop = malloc(n * 4);
    rl_dropout_forward(wdrop, a, mask, n);
    S_OK(rl_test_cu->h2d(rl_test_ctx, da, a, n * 4));
    float *dd = rl_test_poisoned(n * 4);
    uint16_t *dd16 = rl_test_poisoned(n * 2);
    S_OK(rl_test_cu->dropout_forward(rl_test_ctx, dd, dd16, da, dm, n));
    float *got_d = s_back(dd, n);
    uint16_t *got_d16 = rl_test_back(dd16, n * 2);
    snprintf(what, sizeof what, "dropout fwd n %zu", n);
    s_exact(what, got_d, wdrop, n);
    snprintf(what, sizeof what, "dropout fwd n %zu bf16", n);
    s_bf16_of(what, got_d16, got_d, n);
    S_OK(rl_test_cu->dropout_forward(rl_test_ctx, da, NULL, da, dm, n)); // in place
    float *got_di = s_back(da, n);
    snprintf(what, sizeof what, "dropout fwd n %zu in place", n);
    s_exact(what, got_di, wdrop, n);
    // backward: set into poison, accumulate onto b
    float *wset = s_zeros(n), *wacc = s_copy(b, n);
    rl_dropout_backward(wset, a, mask, n);
    rl_dropout_backward(wacc, a, mask, n);
    S_OK(rl_test_cu->h2d(rl_test_ctx, da, a, n * 4));
    float *dset = rl_test_poisoned(n * 4);
    S_OK(rl_test_cu->dropout_backward(rl_test_ctx, dset, da, dm, n, 0));
    S_OK(rl_test_cu->dropout_backward(rl_test_ctx, db, da, dm, n, 1));
    float *got_set = s_back(dset, n), *got_dacc = s_back(db, n);
    snprintf(what, sizeof what, "dropout bwd n %zu =", n);
    s_exact(what, got_set, wset, n);
    snprintf(what, sizeof what, "dropout bwd n %zu +=", n);
    s_exact(what, got_dacc, wacc, n);

    void *dev[] = {da, db, dout, dm, dd, dd16, dset};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        rl_test_dfree(dev[i]);
    }
    void *host[] = {a,     b,     want,    got,    got_a, got_b, acc,     got_acc, mask,
                    wdrop, got_d, got_d16, got_di, wset,  wacc,  got_set, got_dacc};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(host[i]);
    }
}

static void test_elementwise(void) {
    s_elementwise_case(1);
    s_elementwise_case(37);
    s_elementwise_case(100003);
    S_OK(rl_test_cu->residual_forward(rl_test_ctx, NULL, NULL, NULL, 0));
    S_OK(rl_test_cu->accumulate(rl_test_ctx, NULL, NULL, 0));
    S_OK(rl_test_cu->dropout_forward(rl_test_ctx, NULL, NULL, NULL, NULL, 0));
    S_OK(rl_test_cu->dropout_backward(rl_test_ctx, NULL, NULL, NULL, 0, 0));
}

// LoRA dropout's mask made on the device against rl_lora_dropout_mask_rows, bit for bit: rows in
// any order and repeated, widths that are not multiples of anything, p 0, 0.1, 0.5, 0.9
static void test_dropout_mask(void) {
    const int n = 37, widths[] = {1, 200, 1000};
    const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
    int32_t rows[37];
    for (int r = 0; r < n; r++) {
        rows[r] = (r * 7919) % 101; // a padded batch's rows: gaps, out of order
    }
    rows[5] = rows[6];
    int32_t *drows = s_dev(rows, sizeof rows);
    for (int w = 0; w < 3; w++) {
        for (int k = 0; k < 4; k++) {
            const size_t cnt = (size_t)n * (size_t)widths[w];
            float *want = s_floats(cnt, 0.0f);
            uint64_t key = rl_lora_dropout_key(12345, w, k);
            int host_rows[37];
            for (int r = 0; r < n; r++) {
                host_rows[r] = rows[r];
            }
            rl_lora_dropout_mask_rows(want, host_rows, n, widths[w], ps[k], 77, key);
            float *dm = s_dev(NULL, cnt * 4);
            S_OK(rl_test_cu->dropout_mask(rl_test_ctx, dm, drows, n, widths[w], ps[k], 77, key));
            float *got = s_back(dm, cnt);
            char what[96];
            snprintf(what, sizeof what, "dropout mask width %d p %g", widths[w], (double)ps[k]);
            s_exact(what, got, want, cnt);
            size_t kept = 0;
            for (size_t i = 0; i < cnt; i++) {
                kept += got[i] != 0.0f;
            }
            printf("%-40s kept %.3f (1 - p = %.3f)\n", what, (double)kept / (double)cnt,
                   1.0 - (double)ps[k]);
            rl_test_dfree(dm);
            free(want);
            free(got);
        }
    }
    CHECK_INT(rl_test_cu->dropout_mask(rl_test_ctx, NULL, drows, n, 4, 1.0f, 1, 2), -1);
    S_OK(rl_test_cu->dropout_mask(rl_test_ctx, NULL, NULL, 0, 4, 0.5f, 1, 2));
    rl_test_dfree(drows);
}

// ---------------------------------------------------------------------------------------------
// AdamW: the CPU optimizer and the kernel step side by side, m, v and params compared after
// every step (t = 1, 2, 3 from zero moments, then a jump to t = 1000)

static void s_adamw_case(size_t n, const rl_optim_hparams_t *hp) {
    char what[96];
    rl_optim_t *opt = rl_optim_new(n, hp);
    float *p = s_floats(n, 1.0f);
    float *dp = s_dev(p, n * 4), *dm = s_dev(rl_optim_m(opt), n * 4);
    float *dv = s_dev(rl_optim_v(opt), n * 4), *dgr = s_dev(NULL, n * 4);
    const int64_t steps[] = {1, 2, 3, 1000};
    const double lrs[] = {1e-3, 3e-4, 5e-2, 1e-4};
    for (int s = 0; s < 4; s++) {
        float *g = s_floats(n, 1.0f);
        for (size_t i = 0; i < n; i += 11) { // zeros, large and tiny gradients
            g[i] = (i / 11) % 3 == 0 ? 0.0f : (i / 11) % 3 == 1 ? 1e3f * g[i] : 1e-6f * g[i];
        }
        S_OK(rl_test_cu->h2d(rl_test_ctx, dgr, g, n * 4));
        rl_optim_set_steps(opt, steps[s] - 1);
        rl_optim_step(opt, p, g, lrs[s]);
        CHECK_INT(rl_optim_steps(opt), steps[s]);
        S_OK(rl_test_cu->adamw_step(rl_test_ctx, dp, dgr, dm, dv, n, lrs[s], hp->beta1, hp->beta2,
                                    hp->eps, hp->weight_decay, steps[s]));
        float *gp = s_back(dp, n), *gm = s_back(dm, n), *gv = s_back(dv, n);
        snprintf(what, sizeof what, "adamw n %zu wd %g t %lld params", n, hp->weight_decay,
                 (long long)steps[s]);
        s_exact(what, gp, p, n);
        snprintf(what, sizeof what, "adamw n %zu wd %g t %lld m", n, hp->weight_decay,
                 (long long)steps[s]);
        s_exact(what, gm, rl_optim_m(opt), n);
        snprintf(what, sizeof what, "adamw n %zu wd %g t %lld v", n, hp->weight_decay,
                 (long long)steps[s]);
        s_exact(what, gv, rl_optim_v(opt), n);
        free(g);
        free(gp);
        free(gm);
        free(gv);
    }
    rl_test_dfree(dp);
    rl_test_dfree(dm);
    rl_test_dfree(dv);
    rl_test_dfree(dgr);
    free(p);
    rl_optim_destroy(&opt);
}

static void test_adamw(void) {
    const rl_optim_hparams_t a = {0.9, 0.999, 1e-8, 0.01}, b = {0.8, 0.95, 1e-6, 0.0};
    s_adamw_case(1, &a);
    s_adamw_case(1001, &a);
    s_adamw_case(300007, &a);
    s_adamw_case(1001, &b);
    CHECK_INT(rl_test_cu->adamw_step(rl_test_ctx, NULL, NULL, NULL, NULL, 4, 1e-3, 0.9, 0.999, 1e-8,
                                     0.0, 0),
              -1);
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "step count 0");
    S_OK(rl_test_cu->adamw_step(rl_test_ctx, NULL, NULL, NULL, NULL, 0, 1e-3, 0.9, 0.999, 1e-8, 0.0,
                                1));
}

// ---------------------------------------------------------------------------------------------
// the clip: sum of squares, then scale

static double s_sumsq_dev(double *dres, const float *dx, size_t n, int accumulate,
                          double *scratch) {
    double r = NAN;
    S_OK(rl_test_cu->sumsq(rl_test_ctx, dres, dx, n, accumulate, scratch));
    S_OK(rl_test_cu->d2h(rl_test_ctx, &r, dres, sizeof r));
    return r;
}

static void s_clip_case(size_t n) {
    float *x = s_floats(n, 1.0f);
    for (size_t i = 0; i < n; i += 17) {
        x[i] *= 1e3f;
    }
    double ss = 0;
    for (size_t i = 0; i < n; i++) {
        ss += (double)x[i] * x[i];
    }
    double bound = 2.0 * (double)n * ldexp(1.0, -53) * ss;
    float *dx = s_dev(x, n * 4);
    double *dres = s_dev(NULL, sizeof(double)), *scratch = s_scratch(1);
    double got = s_sumsq_dev(dres, dx, n, 0, scratch);
    double again = s_sumsq_dev(dres, dx, n, 0, scratch);
    printf("%-40s n %-8zu got %.17g want %.17g (|d| %.3g, bound %.3g)\n", "sumsq", n, got, ss,
           fabs(got - ss), bound);
    CHECK_MSG(fabs(got - ss) <= bound, "sumsq n %zu: %.17g vs %.17g", n, got, ss);
    CHECK_MSG(memcmp(&got, &again, sizeof got) == 0, "sumsq n %zu: two runs differ", n);
    // two parts into one sum (the clip over several tensors)
    size_t h = n / 2;
    s_sumsq_dev(dres, dx, h, 0, scratch);
    double parts = s_sumsq_dev(dres, dx + h, n - h, 1, scratch);
    CHECK_MSG(fabs(parts - ss) <= bound, "sumsq n %zu in two parts: %.17g vs %.17g", n, parts, ss);

    // the clip to half the norm: the CPU's, and the device's from its own norm
    float *cpu = s_copy(x, n);
    double max_norm = 0.5 * sqrt(ss);
    double norm_cpu = rl_optim_clip_grad_norm(cpu, n, max_norm);
    double norm = sqrt(got);
    float c = (float)(max_norm / (norm + 1e-6));
    float c_cpu = (float)(max_norm / (norm_cpu + 1e-6));
    CHECK_MSG(fabs(norm - norm_cpu) <= ((double)n * ldexp(1.0, -53) + 1e-15) * norm_cpu,
              "clip n %zu: norm %.17g vs %.17g", n, norm, norm_cpu);
    CHECK_MSG(fabsf(c - c_cpu) <= 2e-7f * c_cpu, "clip n %zu: coefficient %.9g vs %.9g", n,
              (double)c, (double)c_cpu);
    S_OK(rl_test_cu->scale(rl_test_ctx, dx, c, n));
    float *got_x = s_back(dx, n), *want_x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        want_x[i] = x[i] * c;
    }
    char what[64];
    snprintf(what, sizeof what, "scale n %zu", n);
    s_exact(what, got_x, want_x, n);
    if (c == c_cpu) {
        snprintf(what, sizeof what, "clip n %zu (the CPU's)", n);
        s_exact(what, got_x, cpu, n);
    }
    rl_test_dfree(dx);
    rl_test_dfree(dres);
    rl_test_dfree(scratch);
    free(x);
    free(cpu);
    free(got_x);
    free(want_x);
}

static void test_clip(void) {
    s_clip_case(1);
    s_clip_case(1001);
    s_clip_case(256 * 1024 + 1); // past one element per thread of the largest grid
    s_clip_case(3000001);
    // n = 0: = writes 0, += leaves the sum
    double *dres = s_dev(NULL, sizeof(double)), *scratch = s_scratch(1), seven = 7.0;
    S_OK(rl_test_cu->h2d(rl_test_ctx, dres, &seven, sizeof seven));
    CHECK(s_sumsq_dev(dres, NULL, 0, 1, scratch) == 7.0);
    CHECK(s_sumsq_dev(dres, NULL, 0, 0, scratch) == 0.0);
    // a NaN passes through (the clip then leaves the gradients alone, as the CPU does)
    float x[5] = {1, 2, NAN, 4, 5};
    float *dx = s_dev(x, sizeof x);
    CHECK(isnan(s_sumsq_dev(dres, dx, 5, 0, scratch)));
    S_OK(rl_test_cu->scale(rl_test_ctx, NULL, 0.5f, 0));
    rl_test_dfree(dres);
    rl_test_dfree(scratch);
    rl_test_dfree(dx);
}

// ---------------------------------------------------------------------------------------------
// the scalar head: the critic's values and the reward model's scores through a row map (rows)
// against rl_head.c, and the plain per-row head with a bias against double

enum { S_VALUES, S_SCORE, S_ROWS };

static void s_head_case(int kind, int B, int T, int C, const int *lengths) {
    char what[128];
    const char *kname = kind == S_VALUES ? "values" : kind == S_SCORE ? "score" : "rows+bias";
    int N = kind == S_ROWS ? B : B * T;
    int n_out = kind == S_SCORE ? B : N;
    size_t nc = (size_t)N * C;
    int32_t *rows = malloc((size_t)n_out * 4);
    for (int k = 0; k < n_out; k++) {
        if (kind == S_VALUES) {
            int b = k / T, t = k % T;
            rows[k] = t >= 1 && t < lengths[b] ? k - 1 : -1;
        } else if (kind == S_SCORE) {
            rows[k] = k * T + lengths[k] - 1;
        } else {
            rows[k] = k;
        }
    }
    float *h = s_floats(nc, 1.0f), *w = s_floats((size_t)C, 1.0f), bias = 0.375f;
    float *want = malloc((size_t)n_out * 4);
    double *wd = malloc((size_t)n_out * 8), *bd = malloc((size_t)n_out * 8);
    if (kind == S_VALUES) {
        rl_head_values_forward(want, h, w, lengths, B, T, C);
    } else if (kind == S_SCORE) {
        rl_head_score_forward(want, h, w, lengths, B, T, C);
    }
    for (int k = 0; k < n_out; k++) {
        double s = 0, sa = 0;
        for (int c = 0; rows[k] >= 0 && c < C; c++) {
            double p = (double)h[(size_t)rows[k] * C + c] * w[c];
            s += p;
            sa += fabs(p);
        }
        if (kind == S_ROWS) {
            s += bias;
            sa += fabs(bias);
            want[k] = (float)s;
        }
        wd[k] = want[k];
        bd[k] = ldexp(1.0, -23) * fabs(want[k]) + C * ldexp(1.0, -51) * sa + 1e-37;
    }
    float *dh = s_dev(h, nc * 4), *dw = s_dev(w, (size_t)C * 4), *dbias = s_dev(&bias, 4);
    int32_t *drows = s_dev(rows, (size_t)n_out * 4);
    const int32_t *rmap = kind == S_ROWS ? NULL : drows; // the plain head: rows NULL
    float *dout = rl_test_poisoned((size_t)n_out * 4 + 4);
    S_OK(rl_test_cu->head_forward(rl_test_ctx, dout, dh, dw, kind == S_ROWS ? dbias : NULL, rmap,
                                  n_out, C));
    float *got = s_back(dout, (size_t)n_out);
    snprintf(what, sizeof what, "head fwd %s B %d T %d C %d", kname, B, T, C);
    s_bounded(what, got, wd, bd, (size_t)n_out);

    // backward: a gradient of 0 now and then (those terms are skipped in dw, as on the CPU: a
    // row with an infinity and a zero gradient must not turn dw into NaN)
    float *g = s_floats((size_t)n_out, 1.0f);
    for (int k = 0; k < n_out; k += 5) {
        g[k] = 0.0f;
        if (rows[k] >= 0) {
            h[(size_t)rows[k] * C] = INFINITY;
        }
    }
    S_OK(rl_test_cu->h2d(rl_test_ctx, dh, h, nc * 4));
    float *dw0 = s_floats((size_t)C, 1.0f), db0 = -0.25f;
    float *dgrad = s_dev(g, (size_t)n_out * 4), *ddw = s_dev(dw0, (size_t)C * 4);
    float *ddb = s_dev(&db0, 4), *ddh = rl_test_poisoned(nc * 4 + 4);
    double *scratch = s_scratch(C);
    S_OK(rl_test_cu->head_backward(rl_test_ctx, ddh, ddw, kind == S_ROWS ? ddb : NULL, dgrad, dh,
                                   dw, rmap, n_out, N, C, 0, scratch));
    float *got_dh = s_back(ddh, nc), *got_dw = s_back(ddw, (size_t)C), *got_db = s_back(ddb, 1);
    float *want_dh = s_zeros(nc), *cpu_dw = s_copy(dw0, (size_t)C);
    double *wdw = malloc((size_t)C * 8), *bdw = malloc((size_t)C * 8);
    if (kind == S_VALUES) {
        rl_head_values_backward(want_dh, cpu_dw, g, h, w, lengths, B, T, C);
    } else if (kind == S_SCORE) {
        rl_head_score_backward(want_dh, cpu_dw, g, h, w, lengths, B, T, C);
    } else {
        for (int k = 0; k < n_out; k++) {
            for (int c = 0; c < C; c++) {
                want_dh[(size_t)k * C + c] = g[k] * w[c];
            }
        }
    }
    for (int c = 0; c < C; c++) {
        double s = dw0[c], sa = fabs(dw0[c]);
        for (int k = 0; k < n_out; k++) {
            if (rows[k] >= 0 && g[k] != 0.0f) {
                double p = (double)g[k] * h[(size_t)rows[k] * C + c];
                s += p;
                sa += fabs(p);
            }
        }
        wdw[c] = s;
        bdw[c] = ldexp(1.0, -22) * sa + 1e-37;
    }
    snprintf(what, sizeof what, "head bwd %s B %d T %d C %d dh =", kname, B, T, C);
    s_exact(what, got_dh, want_dh, nc);
    snprintf(what, sizeof what, "head bwd %s B %d T %d C %d dw +=", kname, B, T, C);
    s_bounded(what, got_dw, wdw, bdw, (size_t)C);
    if (kind != S_ROWS) {
        snprintf(what, sizeof what, "(the reference: CPU dw, the same bound)");
        s_bounded(what, cpu_dw, wdw, bdw, (size_t)C);
    } else {
        double s = db0, sa = fabs(db0);
        for (int k = 0; k < n_out; k++) {
            s += g[k];
            sa += fabs(g[k]);
        }
        double bdb = ldexp(1.0, -22) * sa;
        printf("%-40s got %.9g want %.9g (bound %.3g)\n", "head bwd db +=", (double)got_db[0], s,
               bdb);
        CHECK_MSG(fabs(got_db[0] - s) <= bdb, "head db: %.9g vs %.9g", (double)got_db[0], s);
    }

    // accumulate dh onto dh0; dw alone again: the same bits
    float *dh0 = s_floats(nc, 1.0f), *want_acc = s_copy(dh0, nc);
    for (int k = 0; k < n_out; k++) {
        for (int c = 0; rows[k] >= 0 && c < C; c++) {
            size_t o = (size_t)rows[k] * C + c;
            want_acc[o] = dh0[o] + g[k] * w[c];
        }
    }
    S_OK(rl_test_cu->h2d(rl_test_ctx, ddh, dh0, nc * 4));
    S_OK(rl_test_cu->h2d(rl_test_ctx, ddw, dw0, (size_t)C * 4));
    S_OK(rl_test_cu->head_backward(rl_test_ctx, ddh, NULL, NULL, dgrad, dh, dw, rmap, n_out, N, C,
                                   1, NULL));
    S_OK(rl_test_cu->head_backward(rl_test_ctx, NULL, ddw, NULL, dgrad, dh, dw, rmap, n_out, N, C,
                                   1, scratch));
    float *got_acc = s_back(ddh, nc), *got_dw2 = s_back(ddw, (size_t)C);
    snprintf(what, sizeof what, "head bwd %s B %d T %d C %d dh +=", kname, B, T, C);
    s_exact(what, got_acc, want_acc, nc);
    snprintf(what, sizeof what, "head bwd %s B %d T %d C %d dw again", kname, B, T, C);
    s_exact(what, got_dw2, got_dw, (size_t)C);

    void *dev[] = {dh, dw, dbias, drows, dout, dgrad, ddw, ddb, ddh, scratch};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        rl_test_dfree(dev[i]);
    }
    void *host[] = {rows,   h,      w,       want,   wd,  bd,  got, g,        dw0,     got_dh,
                    got_dw, got_db, want_dh, cpu_dw, wdw, bdw, dh0, want_acc, got_acc, got_dw2};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        free(host[i]);
    }
}

static void test_head(void) {
    const int l3[] = {37, 1, 20}, l2[] = {5, 3}, l1[] = {1}, l4[] = {9, 1, 5, 2};
    const int l37[] = {37, 12, 30};
    s_head_case(S_VALUES, 3, 37, 200, l3);
    s_head_case(S_VALUES, 2, 5, 1001, l2);
    s_head_case(S_VALUES, 1, 1, 40, l1); // no value column at all: zeros
    s_head_case(S_SCORE, 4, 9, 40, l4);
    s_head_case(S_SCORE, 3, 37, 1001, l37);
    s_head_case(S_ROWS, 300, 1, 200, NULL);
    s_head_case(S_ROWS, 1, 1, 1001, NULL);
    // n_out = 0: nothing to write but the zeros of a set dhidden
    float *ddh = rl_test_poisoned(3 * 8 * 4);
    S_OK(rl_test_cu->head_forward(rl_test_ctx, NULL, NULL, NULL, NULL, NULL, 0, 8));
    S_OK(rl_test_cu->head_backward(rl_test_ctx, ddh, NULL, NULL, NULL, NULL, NULL, NULL, 0, 3, 8, 0,
                                   NULL));
    float *got = s_back(ddh, 24), zero[24] = {0};
    s_exact("head bwd n_out 0 dh =", got, zero, 24);
    rl_test_dfree(ddh);
    free(got);
}

int main(void) {
    rl_test_cuda_open("model.cuda_elt");
    RL_TEST_RUN(test_embedding);
    RL_TEST_RUN(test_rmsnorm);
    RL_TEST_RUN(test_rope);
    RL_TEST_RUN(test_swiglu);
    RL_TEST_RUN(test_elementwise);
    RL_TEST_RUN(test_dropout_mask);
    RL_TEST_RUN(test_adamw);
    RL_TEST_RUN(test_clip);
    RL_TEST_RUN(test_head);
    rl_test_cuda_close();
    RL_TEST_DONE();
}

// test_cuda_attn — causal GQA attention on cuda:0 (label gpu; skipped without a GPU), every
// output poisoned (NaN) first and every input fresh and random, against the CPU kernels in fp32
// (rl_attention_*_packed, rl_attention_decode, rl_attention_prefill) and their double twins
// (rl_attention_forward_ref / backward_ref / decode_ref):
//   1. training forward and backward over packed sequences of lengths {1, 5, 64, 65, 130, 300}
//      in one batch, head_dim 40, 64 and 128, NH/NKV 4/4, 4/2, 6/2 and 8/1; head_dim 256 and odd
//      ones (1, 33); peaked softmaxes (scores up to ~±40); gradients accumulated into random
//      values; the backward twice gives the same bits (no atomics);
//   2. edges: empty sequences (first, middle), one row, N = 0, lse NULL, each gradient NULL,
//      shapes refused with their reason;
//   3. one sequence of 4096 against the CPU fp32 kernels (the double twins are too slow there;
//      under the CPU emulation of the module, 1100, and {250, 513, 3} for {1000, 2049, 3});
//   4. the KV cache: rows written to their (slot, position) bit for bit, rows out of range not
//      written, the rest untouched; batched decode (slots of different context lengths, the
//      cache past each length NaN) and batched prefill (runs at several start positions) against
//      the CPU and the double twin, and against the training forward's rows; rows refused (bad
//      slot, n_ctx, positions past max_len) are NaN and the others unaffected;
//   5. the bf16 kernels (tensor cores; the model's): the forward against the double twin on
//      inputs rounded to bf16, the backward against its own contract in double, the prefill from
//      0, 20 and in one-row runs against the bf16 forward's rows bit for bit (section 5 says
//      how close and why).
//
// Tolerances (fp32 on both sides, summed in different orders: tiles of 32/64 keys with an
// online softmax against the CPU's sgemm and double sums, or exact double). A score q.k is a sum
// of D products of size <= 4 (q, k in [-2, 2)) scaled by 1/sqrt(D): its rounding is ~1e-6
// absolute, which moves lse by as much and every p_j relatively by as much; the output is a
// convex combination of v (|v| < 1) summed over <= 4096 keys in fp32 (~sqrt(n) * 6e-8 typical).
// So out within 1e-5 absolute (v is O(1)) + 1e-5 relative, and lse within 1e-5 absolute (its
// float ulp at |lse| ~ 10 is 1e-6): a 10x margin over the ~1e-6 expected. Gradients sum 300 to
// 4096 terms of varying size (p * (dp - D) * q and alike): each array is held to 1e-5 times its
// largest magnitude (at least 1) absolute + 1e-4 relative. Score rounding grows with |s|: the
// peaked case (q, k in [-6, 6), scores up to ~±40, 9x the rounding) scales every tolerance by 9.
// A CPU emulation of these kernels made while writing them (the same code, each CUDA thread a
// fiber) stayed under 1/5 of each tolerance, 1/3 in the peaked case. A wrong index, mask or
// missing tile is an O(0.1) error in some element, far outside all of them.
#include "rl_layers.h"
#include "rl_test_cuda.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL_OUT 1e-5
#define TOL_OUT_REL 1e-5
#define TOL_LSE 1e-5
#define TOL_GRAD 1e-5
#define TOL_GRAD_REL 1e-4

// ---- helpers ----------------------------------------------------------------------------------
static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static double s_rnd(void) { // uniform in [-1, 1) (splitmix64)
    uint64_t z = (s_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static void *s_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "FAIL: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static float *s_floats(size_t n, double amp) { // random, exact in float
    float *f = s_alloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(amp * s_rnd());
    }
    return f;
}

static double *s_widen(const float *f, size_t n) {
    double *d = s_alloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) {
        d[i] = f[i];
    }
    return d;
}

static float *s_back(const void *dev, size_t n) {
    return rl_test_back(dev, n * sizeof(float));
}

static double s_maxabs(const double *w, size_t n) {
    double m = 1.0;
    for (size_t i = 0; i < n; i++) {
        m = fabs(w[i]) > m ? fabs(w[i]) : m;
    }
    return m;
}

// got against an fp32 CPU result (widened) or a double one, tolerances as at the top.
static void s_close_f(const char *what, const float *got, const float *want, size_t n, double atol,
                      double rtol) {
    double *w = s_widen(want, n);
    rl_test_close(what, got, w, n, atol, rtol);
    free(w);
}

// gradients: tol (1, or 9 for the peaked case) times TOL_GRAD * max(1, max |want|) + TOL_GRAD_REL
static void s_close_grad(const char *what, const float *got, const double *want, size_t n,
                         double tol) {
    rl_test_close(what, got, want, n, tol * TOL_GRAD * s_maxabs(want, n), tol * TOL_GRAD_REL);
}

static void s_close_grad_f(const char *what, const float *got, const float *want, size_t n,
                           double tol) {
    double *w = s_widen(want, n);
    s_close_grad(what, got, w, n, tol);
    free(w);
}

static int s_same(const void *a, const void *b, size_t bytes) {
    return memcmp(a, b, bytes) == 0;
}

static int s_all_nan(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isnan(x[i])) {
            return 0;
        }
    }
    return 1;
}

// ---- 1. training forward and backward ----------------------------------------------------------

typedef struct {
    int B, N, T, NH, NKV, D;
    const int *lens;
    int starts[64];
    float *q, *k, *v, *dout, *dq0, *dk0, *dv0; // host inputs, packed
    // device
    float *d_q, *d_k, *d_v, *d_dout, *d_out, *d_lse;
    int *d_starts;
} s_batch_t;

static void s_batch_new(s_batch_t *c, const int *lens, int B, int NH, int NKV, int D, double amp) {
    memset(c, 0, sizeof *c);
    c->B = B, c->NH = NH, c->NKV = NKV, c->D = D, c->lens = lens;
    for (int b = 0; b < B; b++) {
        c->starts[b + 1] = c->starts[b] + lens[b];
        c->T = lens[b] > c->T ? lens[b] : c->T;
    }
    c->N = c->starts[B];
    size_t qn = (size_t)c->N * NH * D, kn = (size_t)c->N * NKV * D;
    c->q = s_floats(qn, amp);
    c->k = s_floats(kn, amp);
    c->v = s_floats(kn, 1.0);
    c->dout = s_floats(qn, 1.0);
    c->dq0 = s_floats(qn, 1.0);
    c->dk0 = s_floats(kn, 1.0);
    c->dv0 = s_floats(kn, 1.0);
    c->d_q = rl_test_dup(c->q, qn * sizeof(float));
    c->d_k = rl_test_dup(c->k, kn * sizeof(float));
    c->d_v = rl_test_dup(c->v, kn * sizeof(float));
    c->d_dout = rl_test_dup(c->dout, qn * sizeof(float));
    c->d_out = rl_test_poisoned(qn * sizeof(float));
    c->d_lse = rl_test_poisoned((size_t)c->N * NH * sizeof(float));
    c->d_starts = rl_test_dup(c->starts, (size_t)(B + 1) * sizeof(int));
}

static void s_batch_free(s_batch_t *c) {
    free(c->q), free(c->k), free(c->v), free(c->dout), free(c->dq0), free(c->dk0), free(c->dv0);
    rl_test_dfree(c->d_q), rl_test_dfree(c->d_k), rl_test_dfree(c->d_v);
    rl_test_dfree(c->d_dout), rl_test_dfree(c->d_out), rl_test_dfree(c->d_lse);
    rl_test_dfree(c->d_starts);
}

// The GPU's forward into the batch's d_out / d_lse.
static int s_gpu_forward(s_batch_t *c, int with_lse) {
    int rc = rl_test_cu->attn_forward(rl_test_ctx, c->d_out, with_lse ? c->d_lse : NULL, c->d_q,
                                      c->d_k, c->d_v, c->d_starts, c->B, c->N, c->NH, c->NKV, c->D);
    CHECK_MSG(rc == 0, "attn_forward: %s", rl_test_cu->errmsg(rl_test_ctx));
    return rc;
}

// The GPU's backward from dq0/dk0/dv0 (each skipped when its flag is 0); host results (caller
// frees; NULL where skipped).
static void s_gpu_backward(s_batch_t *c, int wq, int wk, int wv, float **dq, float **dk,
                           float **dv) {
    size_t qn = (size_t)c->N * c->NH * c->D, kn = (size_t)c->N * c->NKV * c->D;
    float *d_dq = rl_test_dup(c->dq0, qn * sizeof(float));
    float *d_dk = rl_test_dup(c->dk0, kn * sizeof(float));
    float *d_dv = rl_test_dup(c->dv0, kn * sizeof(float));
    float *d_delta = rl_test_poisoned((size_t)c->N * c->NH * sizeof(float));
    int rc = rl_test_cu->attn_backward(
        rl_test_ctx, wq ? d_dq : NULL, wk ? d_dk : NULL, wv ? d_dv : NULL, d_delta, c->d_dout,
        c->d_q, c->d_k, c->d_v, c->d_out, c->d_lse, c->d_starts, c->B, c->N, c->NH, c->NKV, c->D);
    CHECK_MSG(rc == 0, "attn_backward: %s", rl_test_cu->errmsg(rl_test_ctx));
    *dq = s_back(d_dq, qn);
    *dk = s_back(d_dk, kn);
    *dv = s_back(d_dv, kn);
    // a skipped gradient is untouched
    if (!wq) {
        CHECK_MSG(s_same(*dq, c->dq0, qn * sizeof(float)), "dq NULL: the buffer changed");
    }
    if (!wk) {
        CHECK_MSG(s_same(*dk, c->dk0, kn * sizeof(float)), "dk NULL: the buffer changed");
    }
    if (!wv) {
        CHECK_MSG(s_same(*dv, c->dv0, kn * sizeof(float)), "dv NULL: the buffer changed");
    }
    rl_test_dfree(d_dq), rl_test_dfree(d_dk), rl_test_dfree(d_dv), rl_test_dfree(d_delta);
}

// The double twins over the padded layout (B,T), results scattered back to the packed rows.
static void s_ref(const s_batch_t *c, double *out, double *lse, double *dq, double *dk,
                  double *dv) {
    const int B = c->B, T = c->T, NH = c->NH, NKV = c->NKV, D = c->D;
    const size_t qs = (size_t)NH * D, ks = (size_t)NKV * D, pad = (size_t)B * T;
    double *q = s_alloc(pad * qs * 8), *k = s_alloc(pad * ks * 8), *v = s_alloc(pad * ks * 8);
    double *go = s_alloc(pad * qs * 8), *o = s_alloc(pad * qs * 8), *l = s_alloc(pad * NH * 8);
    double *gq = s_alloc(pad * qs * 8), *gk = s_alloc(pad * ks * 8), *gv = s_alloc(pad * ks * 8);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < c->lens[b]; t++) {
            size_t src = (size_t)c->starts[b] + t, dst = (size_t)b * T + t;
            for (size_t e = 0; e < qs; e++) {
                q[dst * qs + e] = c->q[src * qs + e];
                go[dst * qs + e] = c->dout[src * qs + e];
            }
            for (size_t e = 0; e < ks; e++) {
                k[dst * ks + e] = c->k[src * ks + e];
                v[dst * ks + e] = c->v[src * ks + e];
            }
        }
    }
    rl_attention_forward_ref(o, l, q, k, v, c->lens, B, T, NH, NKV, D);
    rl_attention_backward_ref(gq, gk, gv, go, q, k, v, l, c->lens, B, T, NH, NKV, D);
    for (int b = 0; b < B; b++) {
        int len = c->lens[b];
        for (int t = 0; t < len; t++) {
            size_t src = (size_t)b * T + t, dst = (size_t)c->starts[b] + t;
            for (size_t e = 0; e < qs; e++) {
                out[dst * qs + e] = o[src * qs + e];
                dq[dst * qs + e] = c->dq0[dst * qs + e] + gq[src * qs + e];
            }
            for (size_t e = 0; e < ks; e++) {
                dk[dst * ks + e] = c->dk0[dst * ks + e] + gk[src * ks + e];
                dv[dst * ks + e] = c->dv0[dst * ks + e] + gv[src * ks + e];
            }
            for (int h = 0; h < NH; h++) {
                lse[(size_t)c->starts[b] * NH + (size_t)h * len + t] =
                    l[((size_t)b * NH + h) * T + t];
            }
        }
    }
    free(q), free(k), free(v), free(go), free(o), free(l), free(gq), free(gk), free(gv);
}

// One batch: GPU forward and backward against the CPU in fp32 and (with_ref) the double twins.
static void s_train_case(const char *name, const int *lens, int B, int NH, int NKV, int D,
                         double amp, int with_ref) {
    s_batch_t c;
    s_batch_new(&c, lens, B, NH, NKV, D, amp);
    printf("%s: B %d N %d (longest %d) NH %d NKV %d D %d, q/k in [-%g, %g)\n", name, B, c.N, c.T,
           NH, NKV, D, amp, amp);
    const size_t qn = (size_t)c.N * NH * D, kn = (size_t)c.N * NKV * D, ln = (size_t)c.N * NH;
    // the CPU in fp32
    float *sc = s_alloc(rl_attention_scratch_floats(c.T) * sizeof(float));
    float *out_c = s_alloc(qn * 4), *lse_c = s_alloc(ln * 4);
    float *dq_c = s_alloc(qn * 4), *dk_c = s_alloc(kn * 4), *dv_c = s_alloc(kn * 4);
    memcpy(dq_c, c.dq0, qn * 4), memcpy(dk_c, c.dk0, kn * 4), memcpy(dv_c, c.dv0, kn * 4);
    rl_attention_forward_packed(out_c, lse_c, c.q, c.k, c.v, c.starts, B, NH, NKV, D, sc);
    rl_attention_backward_packed(dq_c, dk_c, dv_c, c.dout, c.q, c.k, c.v, lse_c, c.starts, B, NH,
                                 NKV, D, sc);
    // the GPU
    s_gpu_forward(&c, 1);
    float *out = s_back(c.d_out, qn), *lse = s_back(c.d_lse, ln);
    float *dq, *dk, *dv, *dq2, *dk2, *dv2;
    s_gpu_backward(&c, 1, 1, 1, &dq, &dk, &dv);
    s_gpu_backward(&c, 1, 1, 1, &dq2, &dk2, &dv2);
    CHECK_MSG(s_same(dq, dq2, qn * 4) && s_same(dk, dk2, kn * 4) && s_same(dv, dv2, kn * 4),
              "%s: two backward passes differ (not deterministic)", name);
    const double tol = amp > 2.0 ? amp * amp / 4.0 : 1.0; // the peaked case: see the top
    char what[128];
#define S_WHAT(x) (snprintf(what, sizeof what, "  %s vs double", x), what)
    s_close_f("  out vs cpu", out, out_c, qn, tol * TOL_OUT, tol * TOL_OUT_REL);
    s_close_f("  lse vs cpu", lse, lse_c, ln, tol * TOL_LSE, 0);
    s_close_grad_f("  dq vs cpu", dq, dq_c, qn, tol);
    s_close_grad_f("  dk vs cpu", dk, dk_c, kn, tol);
    s_close_grad_f("  dv vs cpu", dv, dv_c, kn, tol);
    if (with_ref) {
        double *o_r = s_alloc(qn * 8), *l_r = s_alloc(ln * 8), *dq_r = s_alloc(qn * 8);
        double *dk_r = s_alloc(kn * 8), *dv_r = s_alloc(kn * 8);
        s_ref(&c, o_r, l_r, dq_r, dk_r, dv_r);
        rl_test_close(S_WHAT("out"), out, o_r, qn, tol * TOL_OUT, tol * TOL_OUT_REL);
        rl_test_close(S_WHAT("lse"), lse, l_r, ln, tol * TOL_LSE, 0);
        s_close_grad(S_WHAT("dq"), dq, dq_r, qn, tol);
        s_close_grad(S_WHAT("dk"), dk, dk_r, kn, tol);
        s_close_grad(S_WHAT("dv"), dv, dv_r, kn, tol);
        free(o_r), free(l_r), free(dq_r), free(dk_r), free(dv_r);
    }
#undef S_WHAT
    free(sc), free(out_c), free(lse_c), free(dq_c), free(dk_c), free(dv_c);
    free(out), free(lse), free(dq), free(dk), free(dv), free(dq2), free(dk2), free(dv2);
    s_batch_free(&c);
}

static const int LENS[] = {1, 5, 64, 65, 130, 300};
enum { NLENS = sizeof LENS / sizeof LENS[0] };

static void test_train(void) {
    const int dims[] = {40, 64, 128};
    const int heads[][2] = {{4, 4}, {4, 2}, {6, 2}, {8, 1}};
    for (int di = 0; di < 3; di++) {
        for (int hi = 0; hi < 4; hi++) {
            char name[64];
            snprintf(name, sizeof name, "train D %d NH/NKV %d/%d", dims[di], heads[hi][0],
                     heads[hi][1]);
            s_train_case(name, LENS, NLENS, heads[hi][0], heads[hi][1], dims[di], 2.0, 1);
        }
    }
    // the largest and odd head dims, a peaked softmax (the running max jumps between tiles)
    const int l2[] = {300, 7, 97};
    s_train_case("train D 256", l2, 3, 4, 2, 256, 2.0, 1);
    s_train_case("train D 33", LENS, NLENS, 6, 3, 33, 2.0, 1);
    s_train_case("train D 1", l2, 3, 2, 1, 1, 2.0, 1);
    s_train_case("train peaked D 64", LENS, NLENS, 4, 2, 64, 6.0, 1);
}

// ---- 2. edges -----------------------------------------------------------------------------------

static void test_edges(void) {
    printf("edges\n");
    // empty sequences first and in the middle, a lone row
    const int e1[] = {0, 3, 0, 70, 1, 0};
    s_train_case("edges: empty sequences", e1, 6, 4, 2, 40, 2.0, 1);
    const int e2[] = {1};
    s_train_case("edges: one row", e2, 1, 2, 2, 64, 2.0, 1);

    // lse NULL gives the same out; a NULL gradient leaves its buffer alone and the others equal
    const int e3[] = {65, 33};
    s_batch_t c;
    s_batch_new(&c, e3, 2, 6, 2, 40, 2.0);
    const size_t qn = (size_t)c.N * c.NH * c.D, kn = (size_t)c.N * c.NKV * c.D;
    s_gpu_forward(&c, 1);
    float *out1 = s_back(c.d_out, qn);
    rl_test_dfree(c.d_out);
    c.d_out = rl_test_poisoned(qn * 4);
    s_gpu_forward(&c, 0);
    float *out2 = s_back(c.d_out, qn);
    CHECK_MSG(s_same(out1, out2, qn * 4), "forward with lse NULL: out differs");
    float *dq, *dk, *dv;
    s_gpu_backward(&c, 1, 1, 1, &dq, &dk, &dv);
    for (int mask = 0; mask < 7; mask++) {
        float *a, *b, *d;
        int wq = mask & 1, wk = (mask >> 1) & 1, wv = (mask >> 2) & 1;
        s_gpu_backward(&c, wq, wk, wv, &a, &b, &d);
        CHECK_MSG((!wq || s_same(a, dq, qn * 4)) && (!wk || s_same(b, dk, kn * 4)) &&
                      (!wv || s_same(d, dv, kn * 4)),
                  "backward with gradients %d%d%d: results differ from all three", wq, wk, wv);
        free(a), free(b), free(d);
    }
    free(out1), free(out2), free(dq), free(dk), free(dv);

    // N = 0: nothing written, 0 returned
    const int zero[3] = {0, 0, 0};
    int *d_zero = rl_test_dup(zero, sizeof zero);
    float *d_o = rl_test_poisoned(64);
    CHECK_INT(rl_test_cu->attn_forward(rl_test_ctx, d_o, d_o, c.d_q, c.d_k, c.d_v, d_zero, 2, 0, 6,
                                       2, 40),
              0);
    CHECK_INT(rl_test_cu->attn_backward(rl_test_ctx, d_o, d_o, d_o, d_o, c.d_dout, c.d_q, c.d_k,
                                        c.d_v, c.d_out, c.d_lse, d_zero, 2, 0, 6, 2, 40),
              0);
    float *o = s_back(d_o, 16);
    CHECK_MSG(s_all_nan(o, 16), "N = 0: a buffer was written");
    free(o);

    // shapes refused, with the reason
    CHECK_INT(rl_test_cu->attn_forward(rl_test_ctx, c.d_out, c.d_lse, c.d_q, c.d_k, c.d_v,
                                       c.d_starts, c.B, c.N, 6, 2, 257),
              -1);
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "head_dim 257");
    CHECK_INT(rl_test_cu->attn_forward(rl_test_ctx, c.d_out, c.d_lse, c.d_q, c.d_k, c.d_v,
                                       c.d_starts, c.B, c.N, 6, 4, 40),
              -1);
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "6 query heads cannot share 4 kv heads");
    CHECK_INT(rl_test_cu->attn_backward(rl_test_ctx, c.d_out, NULL, NULL, c.d_lse, c.d_dout, c.d_q,
                                        c.d_k, c.d_v, c.d_out, c.d_lse, c.d_starts, 0, c.N, 6, 2,
                                        40),
              -1);
    CHECK_INT(rl_test_cu->attn_decode(rl_test_ctx, c.d_out, c.d_q, c.d_k, c.d_v, NULL, d_zero, 1, 6,
                                      2, 0, 1, 1),
              -1);
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "head_dim 0");
    // the context still works
    CHECK_INT(rl_test_cu->sync(rl_test_ctx), 0);
    rl_test_dfree(d_zero), rl_test_dfree(d_o);
    s_batch_free(&c);
}

// ---- 3. long ----------------------------------------------------------------------------------

static void test_long(void) {
    if (rl_test_emulated()) {
        // ~27 s of the CPU emulation at these lengths (every CUDA thread a fiber); shorter ones
        // still span many tiles of both kinds and end mid-tile
        printf("model.cuda_attn: emulated: the long cases at T 1100 and {250, 513, 3} instead of "
               "4096 and {1000, 2049, 3}\n");
        const int e1[] = {1100};
        s_train_case("long T 1100 (emulated)", e1, 1, 2, 1, 64, 2.0, 0);
        const int e2[] = {250, 513, 3};
        s_train_case("long mixed (emulated)", e2, 3, 4, 2, 128, 2.0, 0);
        return;
    }
    const int l1[] = {4096};
    s_train_case("long T 4096", l1, 1, 2, 1, 64, 2.0, 0);
    const int l2[] = {1000, 2049, 3};
    s_train_case("long mixed", l2, 3, 4, 2, 128, 2.0, 0);
}

// bf16 roundings (sections 4 and 5)
static float *s_rounded(const float *x, size_t n) {
    float *r = s_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        r[i] = rl_test_round_bf16(x[i]);
    }
    return r;
}

// ---- 4. the KV cache: write, decode, prefill ---------------------------------------------------

enum { NS = 5, ML = 310 };                      // slots, max_len (not a multiple of any tile)
static const int CTX[NS] = {37, 1, 300, 64, 0}; // positions written per slot (slot 4: none)

// The CPU's view of slot s: K transposed (KVD, ldk) and V (max_len, KVD), from our layout.
static void s_cpu_slot(const float *kc, const float *vc, int s, int KVD, size_t ldk, float *kt,
                       float *v) {
    for (int p = 0; p < ML; p++) {
        const float *kr = kc + ((size_t)s * ML + p) * KVD, *vr = vc + ((size_t)s * ML + p) * KVD;
        for (int e = 0; e < KVD; e++) {
            kt[(size_t)e * ldk + p] = kr[e];
            v[(size_t)p * KVD + e] = vr[e];
        }
    }
    for (int e = 0; e < KVD; e++) {
        for (size_t p = ML; p < ldk; p++) {
            kt[(size_t)e * ldk + p] = NAN;
        }
    }
}

// The bf16 prefill (from the bf16 cache d_kc, d_vc) against the bf16 training forward of the
// same sequence (slot 2 of the cache, c's fp32 keys and values, which the forward rounds): runs
// from position 0 and 20, and one-row runs at positions a decode step takes (the model's decode
// steps are such runs): every row the forward's bits.
static void s_bf16_cache_rows(s_batch_t *c, const uint16_t *d_kc, const uint16_t *d_vc, int NH,
                              int NKV, int D) {
    const int len = c->N, QD = NH * D;
    int rc = rl_test_cu->attn_forward_bf16(rl_test_ctx, c->d_out, c->d_lse, c->d_q, c->d_k, c->d_v,
                                           c->d_starts, 1, len, NH, NKV, D);
    CHECK_MSG(rc == 0, "attn_forward_bf16: %s", rl_test_cu->errmsg(rl_test_ctx));
    float *fo = s_back(c->d_out, (size_t)len * QD);
    enum { R = 7 };
    const int rowp[R] = {0, 31, 32, 63, 64, 128, 299};
    for (int k = 0; k < 3; k++) {
        // k 0, 1: one run from p0; k 2: R runs of one row each
        const int p0 = k == 1 ? 20 : 0, runs = k == 2 ? R : 1;
        int st[R + 1], sl[R], pp[R];
        st[0] = 0;
        for (int b = 0; b < runs; b++) {
            sl[b] = 2;
            pp[b] = k == 2 ? rowp[b] : p0;
            st[b + 1] = k == 2 ? b + 1 : len - p0;
        }
        const int n = st[runs];
        float *q = s_alloc((size_t)n * QD * 4), *want = s_alloc((size_t)n * QD * 4);
        for (int i = 0; i < n; i++) {
            const int at = k == 2 ? rowp[i] : p0 + i;
            memcpy(q + (size_t)i * QD, c->q + (size_t)at * QD, (size_t)QD * 4);
            memcpy(want + (size_t)i * QD, fo + (size_t)at * QD, (size_t)QD * 4);
        }
        float *d_q = rl_test_dup(q, (size_t)n * QD * 4),
              *d_o = rl_test_poisoned((size_t)n * QD * 4);
        int *d_st = rl_test_dup(st, (size_t)(runs + 1) * sizeof(int));
        int *d_sl = rl_test_dup(sl, (size_t)runs * sizeof(int));
        int *d_pp = rl_test_dup(pp, (size_t)runs * sizeof(int));
        rc = rl_test_cu->attn_prefill_bf16(rl_test_ctx, d_o, d_q, d_kc, d_vc, d_st, d_sl, d_pp,
                                           runs, n, NH, NKV, D, NS, ML);
        CHECK_MSG(rc == 0, "attn_prefill_bf16: %s", rl_test_cu->errmsg(rl_test_ctx));
        float *o = s_back(d_o, (size_t)n * QD);
        CHECK_MSG(s_same(o, want, (size_t)n * QD * 4),
                  "bf16 prefill (%s) differs from the bf16 training forward's rows",
                  k == 0   ? "from 0"
                  : k == 1 ? "from 20"
                           : "one-row runs");
        free(q), free(want), free(o);
        rl_test_dfree(d_q), rl_test_dfree(d_o), rl_test_dfree(d_st), rl_test_dfree(d_sl);
        rl_test_dfree(d_pp);
    }
    printf("  bf16: prefill from 0, from 20 and one-row runs give the bf16 forward's bits\n");
    free(fo);
}

static void s_cache_case(int NH, int NKV, int D) {
    printf("kv cache: %d slots of %d positions, NH %d NKV %d D %d\n", NS, ML, NH, NKV, D);
    const int KVD = NKV * D, QD = NH * D;
    const size_t cn = (size_t)NS * ML * KVD;
    // the rows to write: every (slot, position < CTX[slot]) in a scrambled order, and two rows
    // out of range (slot NS, position ML) that must not be written
    int n = 0;
    for (int s = 0; s < NS; s++) {
        n += CTX[s];
    }
    const int nw = n + 2;
    int *slots = s_alloc((size_t)nw * sizeof(int)), *pos = s_alloc((size_t)nw * sizeof(int));
    for (int s = 0, i = 0; s < NS; s++) {
        for (int p = 0; p < CTX[s]; p++, i++) {
            slots[i] = s, pos[i] = p;
        }
    }
    for (int i = n - 1; i > 0; i--) { // Fisher-Yates
        int j = (int)((s_rnd() + 1.0) * 0.5 * (i + 1));
        j = j > i ? i : j;
        int ts = slots[i], tp = pos[i];
        slots[i] = slots[j], pos[i] = pos[j], slots[j] = ts, pos[j] = tp;
    }
    slots[n] = NS, pos[n] = 0, slots[n + 1] = 0, pos[n + 1] = ML;
    float *kw = s_floats((size_t)nw * KVD, 2.0), *vw = s_floats((size_t)nw * KVD, 1.0);
    // what the cache must hold: those rows, NaN (the poison) elsewhere
    float *kc = s_alloc(cn * 4), *vc = s_alloc(cn * 4);
    for (size_t i = 0; i < cn; i++) {
        kc[i] = vc[i] = NAN;
    }
    for (int i = 0; i < n; i++) {
        size_t o = ((size_t)slots[i] * ML + pos[i]) * KVD;
        memcpy(kc + o, kw + (size_t)i * KVD, (size_t)KVD * 4);
        memcpy(vc + o, vw + (size_t)i * KVD, (size_t)KVD * 4);
    }
    float *d_kc = rl_test_poisoned(cn * 4), *d_vc = rl_test_poisoned(cn * 4);
    float *d_kw = rl_test_dup(kw, (size_t)nw * KVD * 4);
    float *d_vw = rl_test_dup(vw, (size_t)nw * KVD * 4);
    int *d_slots = rl_test_dup(slots, (size_t)nw * sizeof(int));
    int *d_pos = rl_test_dup(pos, (size_t)nw * sizeof(int));
    int rc = rl_test_cu->attn_cache_write(rl_test_ctx, d_kc, d_vc, d_kw, d_vw, d_slots, d_pos, nw,
                                          NS, ML, NKV, D);
    CHECK_MSG(rc == 0, "attn_cache_write: %s", rl_test_cu->errmsg(rl_test_ctx));
    float *kg = s_back(d_kc, cn), *vg = s_back(d_vc, cn);
    size_t bad = 0;
    for (size_t i = 0; i < cn; i++) {
        int want_nan = isnan(kc[i]);
        bad += want_nan ? !isnan(kg[i]) || !isnan(vg[i])
                        : memcmp(&kg[i], &kc[i], 4) != 0 || memcmp(&vg[i], &vc[i], 4) != 0;
    }
    printf("  cache write: %d rows (2 out of range), %zu of %zu elements differ\n", nw, bad, cn);
    CHECK_MSG(bad == 0, "cache write: %zu elements differ from the rows written", bad);
    // the bf16 cache: the same rows, each element rounded; the rest keeps the poison
    uint16_t *d_kc16 = rl_test_poisoned(cn * 2), *d_vc16 = rl_test_poisoned(cn * 2);
    rc = rl_test_cu->attn_cache_write_bf16(rl_test_ctx, d_kc16, d_vc16, d_kw, d_vw, d_slots, d_pos,
                                           nw, NS, ML, NKV, D);
    CHECK_MSG(rc == 0, "attn_cache_write_bf16: %s", rl_test_cu->errmsg(rl_test_ctx));
    uint16_t *kg16 = rl_test_back(d_kc16, cn * 2), *vg16 = rl_test_back(d_vc16, cn * 2);
    bad = 0;
    for (size_t i = 0; i < cn; i++) {
        bad += isnan(kc[i]) ? kg16[i] != 0xffffu || vg16[i] != 0xffffu
                            : kg16[i] != rl_test_bf16(kc[i]) || vg16[i] != rl_test_bf16(vc[i]);
    }
    printf("  bf16 cache write: %zu of %zu elements differ\n", bad, cn);
    CHECK_MSG(bad == 0, "bf16 cache write: %zu elements differ from the rows rounded", bad);
    free(kg16), free(vg16);

    const size_t ldk = rl_attention_ldk(ML);
    float *kt = s_alloc((size_t)KVD * ldk * 4), *vs = s_alloc((size_t)ML * KVD * 4);
    float *sc = s_alloc(rl_attention_prefill_scratch_floats(ML, ML) * 4);

    // decode: rows of several slots and lengths (slot 2 read to 129 and 33 of its 300 too), and
    // two refused rows (a slot out of range, n_ctx 0): NaN
    enum { S = 9 };
    const int dslot[S] = {2, 0, 1, 3, 2, 2, 0, NS, 3};
    const int dctx[S] = {300, 37, 1, 64, 129, 33, 32, 5, 0};
    float *q = s_floats((size_t)S * QD, 2.0);
    float *d_q = rl_test_dup(q, (size_t)S * QD * 4), *d_o = rl_test_poisoned((size_t)S * QD * 4);
    int *d_ds = rl_test_dup(dslot, sizeof dslot), *d_dc = rl_test_dup(dctx, sizeof dctx);
    rc = rl_test_cu->attn_decode(rl_test_ctx, d_o, d_q, d_kc, d_vc, d_ds, d_dc, S, NH, NKV, D, NS,
                                 ML);
    CHECK_MSG(rc == 0, "attn_decode: %s", rl_test_cu->errmsg(rl_test_ctx));
    float *o = s_back(d_o, (size_t)S * QD), *oc = s_alloc((size_t)QD * 4);
    double *qd = s_widen(q, (size_t)S * QD), *od = s_alloc((size_t)QD * 8);
    double *kcd = s_widen(kc, cn), *vcd = s_widen(vc, cn);
    for (int r = 0; r < S; r++) {
        char what[96];
        if (dslot[r] >= NS || dctx[r] < 1) {
            snprintf(what, sizeof what, "  decode row %d (slot %d, n_ctx %d) refused", r, dslot[r],
                     dctx[r]);
            CHECK_MSG(s_all_nan(o + (size_t)r * QD, QD), "%s: not NaN", what);
            continue;
        }
        s_cpu_slot(kc, vc, dslot[r], KVD, ldk, kt, vs);
        rl_attention_decode(oc, q + (size_t)r * QD, kt, ldk, vs, (size_t)KVD, dctx[r], NH, NKV, D,
                            sc);
        snprintf(what, sizeof what, "  decode slot %d n_ctx %d vs cpu", dslot[r], dctx[r]);
        s_close_f(what, o + (size_t)r * QD, oc, QD, TOL_OUT, TOL_OUT_REL);
        size_t so = (size_t)dslot[r] * ML * KVD;
        rl_attention_decode_ref(od, qd + (size_t)r * QD, kcd + so, vcd + so, dctx[r], (size_t)KVD,
                                NH, NKV, D);
        snprintf(what, sizeof what, "  decode slot %d n_ctx %d vs double", dslot[r], dctx[r]);
        rl_test_close(what, o + (size_t)r * QD, od, QD, TOL_OUT, TOL_OUT_REL);
    }
    free(o);
    // the same rows over the bf16 cache (attn_decode_bf16c) against the CPU on the rounded cache
    d_o = rl_test_poisoned((size_t)S * QD * 4);
    rc = rl_test_cu->attn_decode_bf16c(rl_test_ctx, d_o, d_q, d_kc16, d_vc16, d_ds, d_dc, S, NH,
                                       NKV, D, NS, ML);
    CHECK_MSG(rc == 0, "attn_decode_bf16c: %s", rl_test_cu->errmsg(rl_test_ctx));
    o = s_back(d_o, (size_t)S * QD);
    float *kcr = s_rounded(kc, cn), *vcr = s_rounded(vc, cn);
    for (int r = 0; r < S; r++) {
        char what[96];
        if (dslot[r] >= NS || dctx[r] < 1) {
            CHECK_MSG(s_all_nan(o + (size_t)r * QD, QD), "bf16 decode row %d refused: not NaN", r);
            continue;
        }
        s_cpu_slot(kcr, vcr, dslot[r], KVD, ldk, kt, vs);
        rl_attention_decode(oc, q + (size_t)r * QD, kt, ldk, vs, (size_t)KVD, dctx[r], NH, NKV, D,
                            sc);
        snprintf(what, sizeof what, "  bf16 cache: decode slot %d n_ctx %d vs cpu", dslot[r],
                 dctx[r]);
        s_close_f(what, o + (size_t)r * QD, oc, QD, TOL_OUT, TOL_OUT_REL);
    }
    free(kcr), free(vcr);
    free(q), free(o), free(qd);
    rl_test_dfree(d_q), rl_test_dfree(d_o), rl_test_dfree(d_ds), rl_test_dfree(d_dc);

    // batched prefill: runs at several start positions, one refused (past max_len): NaN
    enum { R = 6 };
    const int rslot[R] = {2, 0, 3, 2, 1, 0};
    const int rpos0[R] = {0, 20, 63, 150, 0, 300};
    const int rn[R] = {130, 17, 1, 150, 1, 20};
    int qst[R + 1] = {0};
    for (int b = 0; b < R; b++) {
        qst[b + 1] = qst[b] + rn[b];
    }
    const int N = qst[R];
    q = s_floats((size_t)N * QD, 2.0);
    qd = s_widen(q, (size_t)N * QD);
    d_q = rl_test_dup(q, (size_t)N * QD * 4);
    d_o = rl_test_poisoned((size_t)N * QD * 4);
    int *d_qst = rl_test_dup(qst, sizeof qst), *d_rs = rl_test_dup(rslot, sizeof rslot);
    int *d_rp = rl_test_dup(rpos0, sizeof rpos0);
    rc = rl_test_cu->attn_prefill(rl_test_ctx, d_o, d_q, d_kc, d_vc, d_qst, d_rs, d_rp, R, N, NH,
                                  NKV, D, NS, ML);
    CHECK_MSG(rc == 0, "attn_prefill: %s", rl_test_cu->errmsg(rl_test_ctx));
    o = s_back(d_o, (size_t)N * QD);
    for (int b = 0; b < R; b++) {
        char what[96];
        const size_t n_el = (size_t)rn[b] * QD, o0 = (size_t)qst[b] * QD;
        if (rpos0[b] + rn[b] > ML) {
            CHECK_MSG(s_all_nan(o + o0, n_el), "prefill run %d (pos0 %d n %d) not NaN", b, rpos0[b],
                      rn[b]);
            continue;
        }
        float *pc = s_alloc(n_el * 4);
        double *pd = s_alloc(n_el * 8);
        s_cpu_slot(kc, vc, rslot[b], KVD, ldk, kt, vs);
        rl_attention_prefill(pc, q + o0, kt, ldk, vs, (size_t)KVD, rpos0[b], rn[b], NH, NKV, D, sc);
        snprintf(what, sizeof what, "  prefill slot %d pos0 %d n %d vs cpu", rslot[b], rpos0[b],
                 rn[b]);
        s_close_f(what, o + o0, pc, n_el, TOL_OUT, TOL_OUT_REL);
        size_t so = (size_t)rslot[b] * ML * KVD;
        for (int i = 0; i < rn[b]; i++) {
            rl_attention_decode_ref(pd + (size_t)i * QD, qd + o0 + (size_t)i * QD, kcd + so,
                                    vcd + so, rpos0[b] + i + 1, (size_t)KVD, NH, NKV, D);
        }
        snprintf(what, sizeof what, "  prefill slot %d pos0 %d n %d vs double", rslot[b], rpos0[b],
                 rn[b]);
        rl_test_close(what, o + o0, pd, n_el, TOL_OUT, TOL_OUT_REL);
        free(pc), free(pd);
    }
    free(q), free(o), free(qd);
    rl_test_dfree(d_q), rl_test_dfree(d_o), rl_test_dfree(d_qst), rl_test_dfree(d_rs);
    rl_test_dfree(d_rp);

    // against the training forward: slot 2's 300 positions as one training sequence; prefill
    // from 0 (the same tiles: expected the same bits, reported) and from 20, and decode rows
    const int len = CTX[2];
    const size_t so = (size_t)2 * ML * KVD;
    s_batch_t c;
    s_batch_new(&c, &len, 1, NH, NKV, D, 2.0);
    CHECK_INT(rl_test_cu->h2d(rl_test_ctx, c.d_k, kc + so, (size_t)len * KVD * 4), 0);
    CHECK_INT(rl_test_cu->h2d(rl_test_ctx, c.d_v, vc + so, (size_t)len * KVD * 4), 0);
    s_gpu_forward(&c, 1);
    float *fo = s_back(c.d_out, (size_t)len * QD);
    const int two[] = {2, 2}, p0s[] = {0, 20};
    for (int k = 0; k < 2; k++) {
        int st[2] = {0, len - p0s[k]};
        int *d_st = rl_test_dup(st, sizeof st), *d_sl = rl_test_dup(two, sizeof(int));
        int *d_p0 = rl_test_dup(&p0s[k], sizeof(int));
        float *d_po = rl_test_poisoned((size_t)st[1] * QD * 4);
        rc = rl_test_cu->attn_prefill(rl_test_ctx, d_po, c.d_q + (size_t)p0s[k] * QD, d_kc, d_vc,
                                      d_st, d_sl, d_p0, 1, st[1], NH, NKV, D, NS, ML);
        CHECK_MSG(rc == 0, "attn_prefill: %s", rl_test_cu->errmsg(rl_test_ctx));
        float *po = s_back(d_po, (size_t)st[1] * QD);
        char what[96];
        snprintf(what, sizeof what, "  prefill pos0 %d vs training forward", p0s[k]);
        s_close_f(what, po, fo + (size_t)p0s[k] * QD, (size_t)st[1] * QD, TOL_OUT, TOL_OUT_REL);
        if (k == 0) {
            printf("  prefill pos0 0 %s the training forward's bits\n",
                   s_same(po, fo, (size_t)len * QD * 4) ? "has" : "differs from");
        }
        free(po);
        rl_test_dfree(d_st), rl_test_dfree(d_sl), rl_test_dfree(d_p0), rl_test_dfree(d_po);
    }
    s_bf16_cache_rows(&c, d_kc16, d_vc16, NH, NKV, D);
    rl_test_dfree(d_kc16), rl_test_dfree(d_vc16);
    enum { DR = 7 };
    const int trow[DR] = {0, 31, 32, 63, 64, 128, 299};
    int tslot[DR], tctx[DR];
    float *tq = s_alloc((size_t)DR * QD * 4), *tf = s_alloc((size_t)DR * QD * 4);
    for (int r = 0; r < DR; r++) {
        tslot[r] = 2, tctx[r] = trow[r] + 1;
        memcpy(tq + (size_t)r * QD, c.q + (size_t)trow[r] * QD, (size_t)QD * 4);
        memcpy(tf + (size_t)r * QD, fo + (size_t)trow[r] * QD, (size_t)QD * 4);
    }
    d_q = rl_test_dup(tq, (size_t)DR * QD * 4);
    d_o = rl_test_poisoned((size_t)DR * QD * 4);
    d_ds = rl_test_dup(tslot, sizeof tslot), d_dc = rl_test_dup(tctx, sizeof tctx);
    rc = rl_test_cu->attn_decode(rl_test_ctx, d_o, d_q, d_kc, d_vc, d_ds, d_dc, DR, NH, NKV, D, NS,
                                 ML);
    CHECK_MSG(rc == 0, "attn_decode: %s", rl_test_cu->errmsg(rl_test_ctx));
    o = s_back(d_o, (size_t)DR * QD);
    s_close_f("  decode rows vs training forward", o, tf, (size_t)DR * QD, TOL_OUT, TOL_OUT_REL);
    free(o), free(tq), free(tf), free(fo);
    rl_test_dfree(d_q), rl_test_dfree(d_o), rl_test_dfree(d_ds), rl_test_dfree(d_dc);
    s_batch_free(&c);

    free(slots), free(pos), free(kw), free(vw), free(kc), free(vc), free(kg), free(vg);
    free(kt), free(vs), free(sc), free(kcd), free(vcd), free(oc), free(od);
    rl_test_dfree(d_kc), rl_test_dfree(d_vc), rl_test_dfree(d_kw), rl_test_dfree(d_vw);
    rl_test_dfree(d_slots), rl_test_dfree(d_pos);
}

static void test_cache(void) {
    s_cache_case(6, 2, 40);
    s_cache_case(8, 1, 128);
    s_cache_case(4, 4, 64);
    s_cache_case(16, 1, 64); // two blocks of 8 heads per kv head in decode
}

// ---- 5. the bf16 attention (tensor cores) -----------------------------------------------------
//
// attn_forward_bf16 rounds q, k, v to bf16 and P to bf16 for P V. The reference is the double
// twin on the rounded inputs, so what remains is P's rounding (and fp32 sums): each p moves by at
// most u = 2^-9 relatively, so an output (a convex combination of v, |v| < 1) moves by at most
// u: out within u + TOL_OUT. lse sums the unrounded p: within TOL_LSE as in fp32 (times the
// peaked factor).
// attn_backward_bf16 is checked against its own contract computed in double (s_ref_bwd_bf16):
// the GPU's out and lse as inputs, q, k, v rounded, and where the tensor cores take them
// (head_dim <= 128) dout, P and dS rounded to bf16 too. What remains is fp32 against double
// sums, and now and then a p or ds whose fp32 and double values round to neighbouring bf16s (a
// flip: 2^-8 of one term, up to 1e-3 of the array's largest value measured): gradients within
// TOL_BF16_GRAD of each array's largest magnitude (at least 1) but for at most one element in
// 1000 (the flips), and every one within TOL_BF16_FLIP of it.
// Against the plain double backward (no rounding of dout, P, dS) the tensor cores' gradients
// differ by 1.5-3e-3 of the largest value (7e-3 when peaked): printed, not checked. A wrong
// index, mask or tile is an O(0.1) error, far outside.
#define TOL_BF16_OUT (1.0 / 512.0)
#define TOL_BF16_GRAD 1e-4
#define TOL_BF16_FLIP (1.0 / 128.0)

// got within tight * scale of want but for at most n / 1000 elements, and all within loose *
// scale, scale = max(1, max |want|).
static void s_close_flips(const char *what, const float *got, const double *want, size_t n,
                          double tight, double loose) {
    const double m = fmax(1.0, s_maxabs(want, n));
    size_t over = 0, wi = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        over += !(d <= tight * m);
        if (!(d <= worst)) {
            worst = d, wi = i;
        }
    }
    printf(
        "  %-40s n %-8zu %zu beyond %.2g of the largest (allowed %zu); worst %.3g of it at %zu\n",
        what, n, over, tight, n / 1000, worst / m, wi);
    CHECK_MSG(over <= n / 1000 && worst <= loose * m,
              "%s: %zu elements beyond %.3g (allowed %zu), worst %.3g (allowed %.3g)", what, over,
              tight * m, n / 1000, worst, loose * m);
}

// largest |got - want| / max(1, max |want|)
static double s_rel_err(const float *got, const double *want, size_t n) {
    double e = 0.0, m = s_maxabs(want, n);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        e = d > e ? d : e;
    }
    return e / (m > 1.0 ? m : 1.0);
}

// attn_backward_bf16's contract in double (see above): dq, dk, dv = dq0, dk0, dv0 + the
// gradients from q, k, v rounded to bf16 (r: the rounded copies), the given out and lse, and with
// tc, dout, P and dS rounded to bf16 where the tensor cores take them.
static void s_ref_bwd_bf16(const s_batch_t *c, const s_batch_t *r, const float *out,
                           const float *lse, int tc, double *dq, double *dk, double *dv) {
    const int NH = c->NH, NKV = c->NKV, D = c->D, QD = NH * D, KD = NKV * D;
    const double scale = (double)(1.0f / sqrtf((float)D)); // the kernels' float scale
    const size_t qn = (size_t)c->N * QD, kn = (size_t)c->N * KD;
    for (size_t i = 0; i < qn; i++) {
        dq[i] = c->dq0[i];
    }
    for (size_t i = 0; i < kn; i++) {
        dk[i] = c->dk0[i];
        dv[i] = c->dv0[i];
    }
    double *go = s_alloc((size_t)D * 8);
    for (int b = 0; b < c->B; b++) {
        const int row0 = c->starts[b], len = c->lens[b];
        for (int h = 0; h < NH; h++) {
            const int g = h / (NH / NKV);
            for (int i = 0; i < len; i++) {
                const size_t qo = (size_t)(row0 + i) * QD + (size_t)h * D;
                double delta = 0.0;
                for (int d = 0; d < D; d++) {
                    delta += (double)c->dout[qo + d] * out[qo + d];
                    go[d] = tc ? rl_test_round_bf16(c->dout[qo + d]) : c->dout[qo + d];
                }
                const double l = lse[(size_t)row0 * NH + (size_t)h * len + i];
                for (int j = 0; j <= i; j++) {
                    const size_t ko = (size_t)(row0 + j) * KD + (size_t)g * D;
                    double sc = 0.0, dp = 0.0;
                    for (int d = 0; d < D; d++) {
                        sc += (double)r->q[qo + d] * r->k[ko + d];
                        dp += go[d] * r->v[ko + d];
                    }
                    const double p = exp(sc * scale - l), ds = p * (dp - delta);
                    const double pr = tc ? rl_test_round_bf16((float)p) : p,
                                 dsr = tc ? rl_test_round_bf16((float)ds) : ds;
                    for (int d = 0; d < D; d++) {
                        dv[ko + d] += pr * go[d];
                        dk[ko + d] += scale * dsr * r->q[qo + d];
                        dq[qo + d] += scale * dsr * r->k[ko + d];
                    }
                }
            }
        }
    }
    free(go);
}

static void s_bf16_case(const char *name, const int *lens, int B, int NH, int NKV, int D,
                        double amp) {
    s_batch_t c;
    s_batch_new(&c, lens, B, NH, NKV, D, amp);
    const int tc = (D + 15) / 16 * 16 <= 128; // the backward on the tensor cores
    printf("%s: B %d N %d (longest %d) NH %d NKV %d D %d, q/k in [-%g, %g); backward on the %s\n",
           name, B, c.N, c.T, NH, NKV, D, amp, amp, tc ? "tensor cores" : "CUDA cores");
    const size_t qn = (size_t)c.N * NH * D, kn = (size_t)c.N * NKV * D, ln = (size_t)c.N * NH;
    int rc = rl_test_cu->attn_forward_bf16(rl_test_ctx, c.d_out, c.d_lse, c.d_q, c.d_k, c.d_v,
                                           c.d_starts, B, c.N, NH, NKV, D);
    CHECK_MSG(rc == 0, "attn_forward_bf16: %s", rl_test_cu->errmsg(rl_test_ctx));
    float *out = s_back(c.d_out, qn), *lse = s_back(c.d_lse, ln);
    float *gr[2][3];
    for (int t = 0; t < 2; t++) { // twice: the same bits
        float *d_dq = rl_test_dup(c.dq0, qn * 4), *d_dk = rl_test_dup(c.dk0, kn * 4);
        float *d_dv = rl_test_dup(c.dv0, kn * 4), *d_delta = rl_test_poisoned(ln * 4);
        rc = rl_test_cu->attn_backward_bf16(rl_test_ctx, d_dq, d_dk, d_dv, d_delta, c.d_dout, c.d_q,
                                            c.d_k, c.d_v, c.d_out, c.d_lse, c.d_starts, B, c.N, NH,
                                            NKV, D);
        CHECK_MSG(rc == 0, "attn_backward_bf16: %s", rl_test_cu->errmsg(rl_test_ctx));
        gr[t][0] = s_back(d_dq, qn), gr[t][1] = s_back(d_dk, kn), gr[t][2] = s_back(d_dv, kn);
        rl_test_dfree(d_dq), rl_test_dfree(d_dk), rl_test_dfree(d_dv), rl_test_dfree(d_delta);
    }
    CHECK_MSG(s_same(gr[0][0], gr[1][0], qn * 4) && s_same(gr[0][1], gr[1][1], kn * 4) &&
                  s_same(gr[0][2], gr[1][2], kn * 4),
              "%s: two bf16 backward passes differ (not deterministic)", name);
    // the double twin on the rounded inputs
    s_batch_t r = c;
    r.q = s_rounded(c.q, qn), r.k = s_rounded(c.k, kn), r.v = s_rounded(c.v, kn);
    double *o_r = s_alloc(qn * 8), *l_r = s_alloc(ln * 8), *dq_r = s_alloc(qn * 8);
    double *dk_r = s_alloc(kn * 8), *dv_r = s_alloc(kn * 8);
    s_ref(&r, o_r, l_r, dq_r, dk_r, dv_r);
    const double tol = amp > 2.0 ? amp * amp / 4.0 : 1.0;
    rl_test_close("  bf16 out vs double (rounded inputs)", out, o_r, qn,
                  TOL_BF16_OUT + tol * TOL_OUT, 0);
    rl_test_close("  bf16 lse vs double (rounded inputs)", lse, l_r, ln, tol * TOL_LSE, 0);
    const double *gw[3] = {dq_r, dk_r, dv_r};
    const size_t gn[3] = {qn, kn, kn};
    const char *gname[3] = {"dq", "dk", "dv"};
    for (int g = 0; g < 3; g++) {
        printf("  bf16 %s vs the plain double backward: largest error %.3g of the largest |value| "
               "(not checked)\n",
               gname[g], s_rel_err(gr[0][g], gw[g], gn[g]));
    }
    // the contract in double
    double *gc[3] = {dq_r, dk_r, dv_r};
    s_ref_bwd_bf16(&c, &r, out, lse, tc, gc[0], gc[1], gc[2]);
    for (int g = 0; g < 3; g++) {
        char what[96];
        snprintf(what, sizeof what, "  bf16 %s vs its contract in double", gname[g]);
        s_close_flips(what, gr[0][g], gc[g], gn[g], tol * TOL_BF16_GRAD, TOL_BF16_FLIP);
    }
    free(o_r), free(l_r), free(dq_r), free(dk_r), free(dv_r);
    free(r.q), free(r.k), free(r.v);
    for (int t = 0; t < 2; t++) {
        free(gr[t][0]), free(gr[t][1]), free(gr[t][2]);
    }
    free(out), free(lse);
    s_batch_free(&c);
}

static void test_bf16(void) {
    s_bf16_case("bf16 D 40 NH/NKV 4/2", LENS, NLENS, 4, 2, 40, 2.0);
    s_bf16_case("bf16 D 64 NH/NKV 8/1", LENS, NLENS, 8, 1, 64, 2.0);
    s_bf16_case("bf16 D 128 NH/NKV 4/4", LENS, NLENS, 4, 4, 128, 2.0);
    const int l2[] = {300, 7, 97};
    s_bf16_case("bf16 D 256 (blocks of 2 warps)", l2, 3, 4, 2, 256, 2.0);
    s_bf16_case("bf16 D 33", LENS, NLENS, 6, 3, 33, 2.0);
    s_bf16_case("bf16 D 1", l2, 3, 2, 1, 1, 2.0);
    s_bf16_case("bf16 peaked D 64", LENS, NLENS, 4, 2, 64, 6.0);
}

int main(void) {
    rl_test_cuda_open("model.cuda_attn");
    RL_TEST_RUN(test_train);
    RL_TEST_RUN(test_edges);
    RL_TEST_RUN(test_long);
    RL_TEST_RUN(test_cache);
    RL_TEST_RUN(test_bf16);
    rl_test_cuda_close();
    RL_TEST_DONE();
}

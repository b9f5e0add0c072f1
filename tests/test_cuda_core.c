// test_cuda_core — the CUDA module's core on cuda:0 (label gpu; skipped without a GPU): bf16
// conversions bit for bit against the host's rounding (every exponent, ties, NaN, infinities,
// subnormals); device memory (an allocation past the device's memory is refused naming the
// bytes asked and free, and the context goes on working); the cuBLASLt matmul in all four
// transpose combinations, with strides wider than the rows, beta 0 and 1, and shapes that are
// not multiples of 8/16/64, against the same product in double of the bf16-rounded inputs; a
// Linear's bias rows and the bias gradient (column sums).
//
// Tolerance of the matmul: the inputs are exactly the bf16 values both sides use, so the only
// difference is fp32 accumulation order against double: |d| <= K * 2^-23 * sum |a_k b_k| bounds
// it (a crude first-order bound of K fp32 additions); we check 2^-20 * K * sum |a b| + 1e-30.
#include "rl_test_cuda.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t s_rng = 0x243f6a8885a308d3ull;

static float s_uniform(void) { // (-1, 1), xorshift64*
    s_rng ^= s_rng >> 12;
    s_rng ^= s_rng << 25;
    s_rng ^= s_rng >> 27;
    uint64_t r = s_rng * 0x2545f4914f6cdd1dull;
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void test_conversions(void) {
    // every bf16 pattern back to fp32 exactly, and a sweep of fp32 patterns to bf16
    size_t n = 65536;
    uint16_t *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint16_t)i;
    }
    uint16_t *db = rl_test_dup(b, n * sizeof *b);
    float *df = rl_test_poisoned(n * sizeof(float));
    CHECK_INT(rl_test_cu->bf16_to_f32(rl_test_ctx, df, db, n), 0);
    float *f = rl_test_back(df, n * sizeof(float));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = rl_test_from_bf16((uint16_t)i);
        bad += memcmp(&f[i], &want, 4) != 0 && !(isnan(want) && isnan(f[i]));
    }
    CHECK_MSG(bad == 0, "bf16 -> fp32: %zu of 65536 patterns differ", bad);
    // fp32 -> bf16: patterns around every rounding boundary (ties to even both ways), specials
    size_t m = 1 << 20;
    float *src = malloc(m * sizeof *src);
    for (size_t i = 0; i < m; i++) {
        uint32_t u = (uint32_t)(i * 4099u) ^ ((uint32_t)(i & 0xff) << 24);
        if (i % 7 == 0) {
            u = (u & 0xffff0000u) | 0x8000u; // exact ties
        }
        memcpy(&src[i], &u, 4);
    }
    float *ds = rl_test_dup(src, m * sizeof *src);
    uint16_t *dout = rl_test_poisoned(m * sizeof(uint16_t));
    CHECK_INT(rl_test_cu->f32_to_bf16(rl_test_ctx, dout, ds, m), 0);
    uint16_t *got = rl_test_back(dout, m * sizeof *got);
    bad = 0;
    for (size_t i = 0; i < m; i++) {
        uint16_t want = rl_test_bf16(src[i]);
        int both_nan = isnan(src[i]) && (got[i] & 0x7fff) > 0x7f80;
        bad += got[i] != want && !both_nan;
    }
    CHECK_MSG(bad == 0, "fp32 -> bf16: %zu of %zu values round differently from the host", bad, m);
    rl_test_dfree(db);
    rl_test_dfree(df);
    rl_test_dfree(ds);
    rl_test_dfree(dout);
    free(b);
    free(f);
    free(src);
    free(got);
}

static void test_memory(void) {
    void *p = NULL;
    CHECK_INT(rl_test_cu->dmalloc(rl_test_ctx, (size_t)1 << 50, &p), -1);
    CHECK(p == NULL);
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "cannot allocate 1125899906842624 bytes");
    CHECK_CONTAINS(rl_test_cu->errmsg(rl_test_ctx), "free");
    // the context still works after the refusal
    float x = 3.5f, y = 0;
    float *d = rl_test_dup(&x, sizeof x);
    CHECK_INT(rl_test_cu->d2h(rl_test_ctx, &y, d, sizeof y), 0);
    CHECK(y == 3.5f);
    rl_test_dfree(d);
}

// One product: A stored (M,K) or (K,M), B stored (K,N) or (N,K), row strides padded by `pad`;
// C (M,N) with stride ldc = N + pad, starting from C0 (beta 1) or poison (beta 0).
static void s_gemm_case(int M, int N, int K, int ta, int tb, int pad, float beta) {
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + pad, ldb = bc + pad, ldc = N + pad;
    uint16_t *A = malloc((size_t)ar * lda * 2), *B = malloc((size_t)br * ldb * 2);
    float *C0 = malloc((size_t)M * ldc * 4);
    for (size_t i = 0; i < (size_t)ar * lda; i++) {
        A[i] = rl_test_bf16(s_uniform());
    }
    for (size_t i = 0; i < (size_t)br * ldb; i++) {
        B[i] = rl_test_bf16(s_uniform());
    }
    for (size_t i = 0; i < (size_t)M * ldc; i++) {
        C0[i] = s_uniform();
    }
    uint16_t *dA = rl_test_dup(A, (size_t)ar * lda * 2), *dB = rl_test_dup(B, (size_t)br * ldb * 2);
    float *dC = beta != 0 ? rl_test_dup(C0, (size_t)M * ldc * 4)
                          : rl_test_poisoned((size_t)M * ldc * 4);
    rl_cuda_gemm_t g = {M, N, K, ta, tb, lda, ldb, ldc, 0.75f, beta};
    int rc = rl_test_cu->gemm(rl_test_ctx, &g, dA, dB, dC);
    CHECK_MSG(rc == 0, "gemm %dx%dx%d: %s", M, N, K, rl_test_cu->errmsg(rl_test_ctx));
    float *C = rl_test_back(dC, (size_t)M * ldc * 4);
    float *got = calloc((size_t)M * N, sizeof *got);
    double *want = calloc((size_t)M * N, sizeof *want), worst_bound = 0;
    size_t bad = 0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                double a = rl_test_from_bf16(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
                double b = rl_test_from_bf16(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                s += a * b;
                sa += fabs(a * b);
            }
            double w = 0.75 * s + beta * C0[(size_t)i * ldc + j];
            double bound = ldexp(1.0, -20) * K * (0.75 * sa + fabs(beta * C0[(size_t)i * ldc + j]))
                           + 1e-30;
            float gv = C[(size_t)i * ldc + j];
            if (!(fabs(gv - w) <= bound)) {
                bad++;
            }
            worst_bound = bound > worst_bound ? bound : worst_bound;
            got[(size_t)i * N + j] = gv;
            want[(size_t)i * N + j] = w;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "gemm %dx%dx%d t%d%d pad %d beta %g", M, N, K, ta, tb, pad,
             (double)beta);
    // the bound is per element; rl_test_close prints the worst against the loosest bound
    rl_test_close(what, got, want, (size_t)M * N, worst_bound, 0);
    CHECK_MSG(bad == 0, "%s: %zu elements past their own bound", what, bad);
    // the padding columns of C are never written (beta 0: still the poison)
    if (beta == 0 && pad > 0) {
        size_t touched = 0;
        for (int i = 0; i < M; i++) {
            for (int j = N; j < ldc; j++) {
                touched += !isnan(C[(size_t)i * ldc + j]);
            }
        }
        CHECK_MSG(touched == 0, "%s: %zu padding elements written", what, touched);
    }
    rl_test_dfree(dA);
    rl_test_dfree(dB);
    rl_test_dfree(dC);
    free(A);
    free(B);
    free(C0);
    free(C);
    free(got);
    free(want);
}

static void test_gemm(void) {
    const int shapes[][3] = {{1, 1, 1}, {7, 13, 40}, {33, 200, 96}, {130, 61, 257}, {64, 64, 64},
                             {257, 129, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int t = 0; t < 4; t++) {
            s_gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1, 0, 0.0f);
        }
        s_gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], 0, 1, 8, 1.0f);
        s_gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], 1, 0, 3, 0.0f);
    }
}

// A bias written into rows (with a stride wider than the row: the gap keeps its poison) and
// its gradient as column sums against double (fp32 sums of N terms in row order: relative error
// within N * 2^-24 of the sum of magnitudes).
static void test_bias(void) {
    const int shapes[][2] = {{1, 1}, {37, 200}, {300, 1001}, {4096, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], OC = shapes[s][1], ld = OC + 5;
        float *bias = malloc((size_t)OC * 4), *dout = malloc((size_t)N * ld * 4);
        float *db0 = malloc((size_t)OC * 4);
        for (int j = 0; j < OC; j++) {
            bias[j] = s_uniform();
            db0[j] = s_uniform();
        }
        for (size_t i = 0; i < (size_t)N * ld; i++) {
            dout[i] = s_uniform();
        }
        float *dbias = rl_test_dup(bias, (size_t)OC * 4);
        float *drows = rl_test_poisoned((size_t)N * ld * 4);
        CHECK_INT(rl_test_cu->bias_rows(rl_test_ctx, drows, ld, dbias, N, OC), 0);
        float *rows = rl_test_back(drows, (size_t)N * ld * 4);
        size_t bad = 0;
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < ld; j++) {
                float v = rows[(size_t)i * ld + j];
                bad += j < OC ? v != bias[j] : !isnan(v);
            }
        }
        CHECK_MSG(bad == 0, "bias_rows %dx%d: %zu elements wrong", N, OC, bad);
        float *ddout = rl_test_dup(dout, (size_t)N * ld * 4), *ddb = rl_test_dup(db0, (size_t)OC * 4);
        CHECK_INT(rl_test_cu->bias_grad(rl_test_ctx, ddb, ddout, ld, N, OC), 0);
        float *db = rl_test_back(ddb, (size_t)OC * 4);
        double *want = calloc((size_t)OC, sizeof *want), mag = 0;
        for (int j = 0; j < OC; j++) {
            double sum = db0[j], m = fabs(db0[j]);
            for (int i = 0; i < N; i++) {
                sum += dout[(size_t)i * ld + j];
                m += fabs(dout[(size_t)i * ld + j]);
            }
            want[j] = sum;
            mag = m > mag ? m : mag;
        }
        char what[64];
        snprintf(what, sizeof what, "bias_grad %dx%d", N, OC);
        rl_test_close(what, db, want, (size_t)OC, (N + 1) * ldexp(1.0, -24) * mag, 0);
        rl_test_dfree(dbias);
        rl_test_dfree(drows);
        rl_test_dfree(ddout);
        rl_test_dfree(ddb);
        free(bias);
        free(dout);
        free(db0);
        free(rows);
        free(db);
        free(want);
    }
}

// The NCCL entries on a group of one rank (a GPU machine has one device; two ranks need two,
// model.cuda_model and mesh.gpu do that on the emulation): NCCL opened (RLCTL_NCCL_LIBRARY, else
// libnccl.so.2), a communicator made, the in-place reduce-scatter, all-gather and double sum of
// one rank leave the buffers as they were (NCCL's datatypes and in-place forms as the module
// declares them), a rank outside the group refused. Skipped where NCCL cannot be opened, except
// on the emulation (its NCCL is always there: tests/cuemu/cuemu_nccl.cpp).
static void test_comm_one(void) {
    unsigned char id[RL_CUDA_COMM_ID];
    char msg[1024] = "";
    if (rl_test_cu->comm_id(id, msg, sizeof msg) != 0) {
        CHECK_MSG(!rl_test_emulated(), "the emulation's NCCL: %s", msg);
        printf("  NCCL not available (%s): skipped\n", msg);
        return;
    }
    CHECK_MSG(rl_test_cu->comm_id(NULL, msg, sizeof msg) == 0, "comm_id(NULL): %s", msg);
    rl_cuda_comm_t *c = NULL;
    CHECK_MSG(rl_test_cu->comm_new(rl_test_ctx, id, 1, 1, &c) == -1 && c == NULL,
              "rank 1 of a group of 1 was not refused");
    int rc = rl_test_cu->comm_new(rl_test_ctx, id, 1, 0, &c);
    CHECK_MSG(rc == 0, "comm_new: %s", rl_test_cu->errmsg(rl_test_ctx));
    if (rc) {
        return;
    }
    const size_t n = 1000;
    float *h = malloc(n * sizeof *h);
    double hd[3] = {1.5, -2.25, 1e300};
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)i * 0.37f - 100.0f;
    }
    float *d = rl_test_dup(h, n * sizeof *h);
    double *dd = rl_test_dup(hd, sizeof hd);
    rc = rl_test_cu->comm_reduce_scatter(rl_test_ctx, c, d, n);
    rc = rc ? rc : rl_test_cu->comm_all_gather(rl_test_ctx, c, d, n);
    rc = rc ? rc : rl_test_cu->comm_sum_f64(rl_test_ctx, c, dd, 3);
    CHECK_MSG(rc == 0, "the collectives: %s", rl_test_cu->errmsg(rl_test_ctx));
    float *back = rl_test_back(d, n * sizeof *h);
    double *backd = rl_test_back(dd, sizeof hd);
    CHECK_MSG(back && memcmp(back, h, n * sizeof *h) == 0, "a group of one changed its floats");
    CHECK_MSG(backd && memcmp(backd, hd, sizeof hd) == 0, "a group of one changed its doubles");
    printf("  NCCL: a group of one rank: reduce-scatter, all-gather and sum in place, unchanged\n");
    rl_test_cu->comm_free(c);
    rl_test_dfree(d);
    rl_test_dfree(dd);
    free(h);
    free(back);
    free(backd);
}

// CUDA graphs: a gemm (beta 1: it reads C) then a conversion, captured; nothing runs during the
// capture; each launch then does both again, with the inputs as they are at the launch, bit for
// bit what the same calls give queued directly. A copy during a capture spoils it: graph_end
// fails, nothing is left half done, and the context goes on.
static void test_graphs(void) {
    const int M = 37, N = 29, K = 45;
    uint16_t *A = malloc((size_t)M * K * 2), *B = malloc((size_t)K * N * 2);
    float *C0 = malloc((size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++) {
        A[i] = rl_test_bf16(s_uniform());
    }
    for (size_t i = 0; i < (size_t)K * N; i++) {
        B[i] = rl_test_bf16(s_uniform());
    }
    for (size_t i = 0; i < (size_t)M * N; i++) {
        C0[i] = s_uniform();
    }
    rl_cuda_gemm_t g = {M, N, K, 0, 0, K, N, N, 0.75f, 1.0f};
    uint16_t *dA = rl_test_dup(A, (size_t)M * K * 2), *dB = rl_test_dup(B, (size_t)K * N * 2);
    float *dC = rl_test_dup(C0, (size_t)M * N * 4), *dW = rl_test_dup(C0, (size_t)M * N * 4);
    uint16_t *dH = rl_test_poisoned((size_t)M * N * 2), *dHw = rl_test_poisoned((size_t)M * N * 2);
    rl_cuda_graph_t *gr = NULL;
    int rc = rl_test_cu->graph_begin(rl_test_ctx);
    rc = rc ? rc : rl_test_cu->gemm(rl_test_ctx, &g, dA, dB, dC);
    rc = rc ? rc : rl_test_cu->f32_to_bf16(rl_test_ctx, dH, dC, (size_t)M * N);
    rc = rc ? rc : rl_test_cu->graph_end(rl_test_ctx, &gr);
    CHECK_MSG(rc == 0 && gr != NULL, "capture: %s", rl_test_cu->errmsg(rl_test_ctx));
    float *c = rl_test_back(dC, (size_t)M * N * 4);
    CHECK_MSG(c && memcmp(c, C0, (size_t)M * N * 4) == 0, "the captured gemm ran at capture");
    free(c);
    for (int launch = 0; gr && launch < 3; launch++) {
        // the graph and the same calls queued directly, from the same C
        CHECK_INT(rl_test_cu->graph_launch(rl_test_ctx, gr), 0);
        CHECK_INT(rl_test_cu->gemm(rl_test_ctx, &g, dA, dB, dW), 0);
        CHECK_INT(rl_test_cu->f32_to_bf16(rl_test_ctx, dHw, dW, (size_t)M * N), 0);
        CHECK_INT(rl_test_cu->sync(rl_test_ctx), 0);
        float *got = rl_test_back(dC, (size_t)M * N * 4),
              *want = rl_test_back(dW, (size_t)M * N * 4);
        uint16_t *gh = rl_test_back(dH, (size_t)M * N * 2),
                 *wh = rl_test_back(dHw, (size_t)M * N * 2);
        CHECK_MSG(memcmp(got, want, (size_t)M * N * 4) == 0 &&
                      memcmp(gh, wh, (size_t)M * N * 2) == 0,
                  "launch %d of the graph differs from the calls queued directly", launch);
        CHECK_MSG(launch == 0 || memcmp(got, C0, (size_t)M * N * 4) != 0,
                  "launch %d did not accumulate into C", launch);
        free(got);
        free(want);
        free(gh);
        free(wh);
        if (launch == 1) { // new inputs between launches: the graph reads them
            for (size_t i = 0; i < (size_t)M * K; i++) {
                A[i] = rl_test_bf16(s_uniform());
            }
            CHECK_INT(rl_test_cu->h2d(rl_test_ctx, dA, A, (size_t)M * K * 2), 0);
        }
    }
    rl_test_cu->graph_free(gr);
    // a copy inside the capture: refused, the capture spoiled, the context usable after
    gr = NULL;
    CHECK_INT(rl_test_cu->graph_begin(rl_test_ctx), 0);
    CHECK_INT(rl_test_cu->gemm(rl_test_ctx, &g, dA, dB, dC), 0);
    CHECK_MSG(rl_test_cu->h2d(rl_test_ctx, dA, A, (size_t)M * K * 2) != 0,
              "a copy during a capture was not refused");
    CHECK_MSG(rl_test_cu->graph_end(rl_test_ctx, &gr) != 0 && gr == NULL,
              "a spoiled capture gave a graph");
    printf("  graphs: a spoiled capture: %s\n", rl_test_cu->errmsg(rl_test_ctx));
    CHECK_INT(rl_test_cu->gemm(rl_test_ctx, &g, dA, dB, dC), 0);
    CHECK_INT(rl_test_cu->sync(rl_test_ctx), 0);
    printf("  graphs: a gemm and a conversion captured, launched 3 times = the calls queued "
           "directly, bit for bit\n");
    void *dev[] = {dA, dB, dC, dW, dH, dHw};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        rl_test_dfree(dev[i]);
    }
    free(A);
    free(B);
    free(C0);
}

int main(void) {
    rl_test_cuda_open("model.cuda_core");
    RL_TEST_RUN(test_conversions);
    RL_TEST_RUN(test_memory);
    RL_TEST_RUN(test_gemm);
    RL_TEST_RUN(test_bias);
    RL_TEST_RUN(test_comm_one);
    RL_TEST_RUN(test_graphs);
    rl_test_cuda_close();
    RL_TEST_DONE();
}

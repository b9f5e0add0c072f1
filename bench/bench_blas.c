// bench_blas — the machine's ceilings that the model benchmarks are measured against, in the same
// run: cblas_sgemm GFLOP/s on the transformer's shapes (forward NN-style x·Wᵀ, and the TN weight
// gradient), cblas_sgemv GB/s (batch-1 decode reads every weight once per token), and a
// streaming memory bandwidth (read + write). Prints medians of several repetitions. Not a test.
//
//   bench_blas [threads]   (default: all cores)
#include "rl_bench.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern void openblas_set_num_threads(int);
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);

#define REPS 7

static float *s_rand(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)((double)(i * 2654435761u % 1000) / 1000.0 - 0.5);
    }
    return p;
}

// GFLOP/s of the two products of a Linear layer with M rows, N out and K in features:
//   grad = 0: out (M,N) = inp (M,K) @ w (N,K)^T        (forward)
//   grad = 1: dw (N,K) += dout (M,N)^T @ inp (M,K)     (weight gradient, TN)
static double s_sgemm(int M, int N, int K, int grad) {
    float *a = s_rand((size_t)M * (grad ? N : K)), *b = s_rand((size_t)(grad ? M : N) * K);
    float *c = s_rand((size_t)(grad ? N : M) * (grad ? K : N));
    double t[REPS];
    int inner = 1;
    double flop = 2.0 * M * N * K;
    while (inner * flop < 2e9) {
        inner *= 2;
    }
    for (int r = 0; r < REPS; r++) {
        double t0 = rl_bench_now();
        for (int i = 0; i < inner; i++) {
            if (grad) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, a, N, b, K,
                            1.0f, c, K);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K,
                            0.0f, c, N);
            }
        }
        t[r] = (rl_bench_now() - t0) / inner;
    }
    free(a), free(b), free(c);
    return flop / rl_bench_median(t, REPS) / 1e9;
}

// y (N) = W (N,K) x (K): GB/s of weight bytes read
static double s_sgemv(int N, int K) {
    float *w = s_rand((size_t)N * K), *x = s_rand((size_t)K), *y = s_rand((size_t)N);
    double t[REPS];
    int inner = 1;
    double bytes = 4.0 * N * K;
    while (inner * bytes < 1e9) {
        inner *= 2;
    }
    for (int r = 0; r < REPS; r++) {
        double t0 = rl_bench_now();
        for (int i = 0; i < inner; i++) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w, K, x, 1, 0.0f, y, 1);
        }
        t[r] = (rl_bench_now() - t0) / inner;
    }
    free(w), free(x), free(y);
    return bytes / rl_bench_median(t, REPS) / 1e9;
}

// memcpy of 256 MiB: bytes read + written per second
static double s_membw(void) {
    size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = rl_bench_now();
        memcpy(b, a, n);
        t[r] = rl_bench_now() - t0;
    }
    volatile char sink = b[n / 2];
    (void)sink;
    free(a), free(b);
    return 2.0 * (double)n / rl_bench_median(t, REPS) / 1e9;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    if (threads > 0) {
        openblas_set_num_threads(threads);
    }
    printf("openblas: %s (core %s)\n", openblas_get_config(), openblas_get_corename());
    // (M = B*T rows, N = out features, K = in features): 1M, 10M and 100M-class widths
    static const int shapes[][3] = {{2048, 128, 128},  {2048, 384, 128},  {2048, 256, 256},
                                    {2048, 1024, 256}, {2048, 512, 512},  {2048, 1536, 512},
                                    {2048, 1024, 1024}, {2048, 2816, 1024}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        printf("| sgemm x·Wᵀ M=%d N=%d K=%d | %.1f GFLOP/s | dW TN %.1f GFLOP/s |\n", M, N, K,
               s_sgemm(M, N, K, 0), s_sgemm(M, N, K, 1));
    }
    static const int gv[][2] = {{384, 128}, {1024, 256}, {1536, 512}, {2816, 1024}, {8192, 2048}};
    for (size_t i = 0; i < sizeof gv / sizeof gv[0]; i++) {
        printf("| sgemv N=%d K=%d (%.1f MiB) | %.1f GB/s |\n", gv[i][0], gv[i][1],
               4.0 * gv[i][0] * gv[i][1] / (1 << 20), s_sgemv(gv[i][0], gv[i][1]));
    }
    printf("| memcpy 256 MiB | %.1f GB/s (read + write) |\n", s_membw());
    return 0;
}

// small_gemm — OpenBLAS against libxsmm on the GEMM shapes of a training lane and of decode, one
// thread, to decide whether the model's small GEMMs should leave OpenBLAS (the speed issue asked
// to measure the libraries made for small matrices before writing kernels). Not built by CMake
// (libxsmm is not a dependency); the figures are in bench/RESULTS.md.
//
//   apt-get install libxsmm-dev
//   cc -O2 bench/small_gemm.c -lxsmm -lopenblas -lpthread -ldl -lm -o /tmp/small_gemm
//   /tmp/small_gemm
//
// Row-major C (M,N) = X (M,K) W (N,K)^T as the model computes it (cblas_sgemm NoTrans/Trans).
// libxsmm is column-major: C^T (N,M) = op(W) X^T, timed with W^T stored (N,K) column-major ("N",
// its JIT path) and with W as stored ("T", which libxsmm 1.17 hands to BLAS). Best of many
// repetitions (the machine is shared), GFLOP/s = 2 M N K / time.
#include <cblas.h>
#include <libxsmm.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double s_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void s_run(const char *what, int M, int N, int K) {
    float *X = malloc(sizeof(float) * (size_t)M * K), *W = malloc(sizeof(float) * (size_t)N * K);
    float *WT = malloc(sizeof(float) * (size_t)N * K), *C = malloc(sizeof(float) * (size_t)M * N);
    for (size_t i = 0; i < (size_t)M * K; i++) {
        X[i] = (float)(i % 7) * 0.1f;
    }
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) {
            W[(size_t)n * K + k] = (float)((n * K + k) % 5) * 0.1f;
            WT[(size_t)k * N + n] = W[(size_t)n * K + k];
        }
    }
    int reps = (double)M * N * K < 1e5 ? 20000 : 300;
    double best[3] = {1e9, 1e9, 1e9};
    float one = 1.0f, zero = 0.0f;
    libxsmm_blasint m = N, n = M, k = K, ldw = N, ldk = K, ldc = N;
    for (int r = 0; r < reps; r++) {
        double t0 = s_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, X, K, W, K, 0.0f, C, N);
        double t1 = s_now();
        libxsmm_sgemm("N", "N", &m, &n, &k, &one, WT, &ldw, X, &ldk, &zero, C, &ldc);
        double t2 = s_now();
        libxsmm_sgemm("T", "N", &m, &n, &k, &one, W, &ldk, X, &ldk, &zero, C, &ldc);
        double t3 = s_now();
        best[0] = t1 - t0 < best[0] ? t1 - t0 : best[0];
        best[1] = t2 - t1 < best[1] ? t2 - t1 : best[1];
        best[2] = t3 - t2 < best[2] ? t3 - t2 : best[2];
    }
    double g = 2.0 * M * N * K / 1e9;
    printf("| %s | %d x %d x %d | %.1f | %.1f | %.1f |\n", what, M, N, K, g / best[0],
           g / best[1], g / best[2]);
    free(X), free(W), free(WT), free(C);
}

int main(void) {
    openblas_set_num_threads(1);
    libxsmm_init();
    printf("| shape | M x N x K | OpenBLAS GFLOP/s | libxsmm N (JIT) | libxsmm T |\n|---|---|---|---|---|\n");
    // a GRPO lane of the cookbook (16 sequences, ~640 rows; hidden 128, intermediate 384)
    s_run("lane projection q/o", 640, 128, 128);
    s_run("lane projection gate/up", 640, 384, 128);
    s_run("lane projection down", 640, 128, 384);
    s_run("lane LoRA x A^T (r 8)", 640, 8, 128);
    s_run("lane LoRA xa B^T (r 8)", 640, 128, 8);
    s_run("attention block scores (64 rows, D 32)", 64, 64, 32);
    s_run("attention block P V", 64, 32, 64);
    // a decode lane (32 slots) and one decode row's attention scores
    s_run("decode lane projection", 32, 128, 128);
    s_run("decode lane gate/up", 32, 384, 128);
    s_run("decode scores of one row", 1, 56, 32);
    libxsmm_finalize();
    return 0;
}

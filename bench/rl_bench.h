// rl_bench — the timing helpers every benchmark program shares: a monotonic clock in seconds and
// the median of repeated measurements (which the results quote, the machine being noisy).
#ifndef RL_BENCH_H
#define RL_BENCH_H

#include <stdlib.h>
#include <time.h>

static inline double rl_bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int rl_bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Sorts v in place and returns its median (the mean of the two middle values for even n).
static inline double rl_bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, rl_bench_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif

// rl_test_cuda — the harness of the `gpu` suites: the CUDA module and a context on cuda:0, or
// the suite is skipped (exit 77, which ctest reports as skipped, never as passed) saying why:
// no module in this build, no driver, no device. With RLCTL_CUDA_MODULE naming the module
// emulated on the CPU (the suites' .emu twins) cuda:0 is the emulation (rl_test_emulated). Also device buffers filled from and read back
// to the host, and the comparisons the kernel tests share.
#ifndef RL_TEST_CUDA_H
#define RL_TEST_CUDA_H

#include "cuda/rl_cuda_module.h"
#include "rl_device.h"
#include "rl_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RL_TEST_SKIP 77 // SKIP_RETURN_CODE of every gpu suite (tests/gpu.cmake)

static const rl_cuda_module_t *rl_test_cu;
static rl_cuda_ctx_t *rl_test_ctx;
static int rl_test_emu; // cuda:0 is cuemu, the module emulated on the CPU (tests/cuemu/)

// Whether the device the suite opened is the CPU emulation of the module (its name is
// "cuemu (CPU emulation)": tests/cuemu/cuemu_internal.h). Suites shrink their largest cases
// under it, saying so, and never on a GPU.
static inline int rl_test_emulated(void) {
    return rl_test_emu;
}

// Opens the module and a context on cuda:0, or exits 77 saying why. A module named by
// RLCTL_CUDA_MODULE that cannot be used fails the suite instead: it was asked for.
static inline void rl_test_cuda_open(const char *suite) {
    char err[2048];
    rl_device_t d = {1, 0};
    rl_device_info_t info;
    if (rl_device_check(&d, 0, &info, err, sizeof err) != 0) {
        const char *named = getenv("RLCTL_CUDA_MODULE");
        if (named && named[0]) {
            fprintf(stderr, "FAIL %s: %s\n", suite, err);
            exit(1);
        }
        printf("%s: skipped: %s\n", suite, err);
        exit(RL_TEST_SKIP);
    }
    rl_test_emu = strncmp(info.name, "cuemu ", 6) == 0;
    rl_test_cu = rl_device_cuda(err, sizeof err);
    char msg[512];
    if (!rl_test_cu || rl_test_cu->ctx_new(0, &rl_test_ctx, msg, sizeof msg) != 0) {
        fprintf(stderr, "FAIL %s: cuda:0 (%s) found but no context: %s\n", suite, info.name, msg);
        exit(1);
    }
    printf("%s: cuda:0 %s, compute capability %d.%d, %.1f GiB, driver %d, runtime %d\n", suite,
           info.name, info.cc_major, info.cc_minor, (double)info.mem_total / (1 << 30),
           info.driver_version, info.runtime_version);
    if (rl_test_emu) {
        printf("%s: EMULATED on the CPU (tests/cuemu): this checks the module's logic, not a "
               "GPU\n",
               suite);
    }
}

static inline void rl_test_cuda_close(void) {
    if (rl_test_cu && rl_test_ctx) {
        rl_test_cu->ctx_free(rl_test_ctx);
        rl_test_ctx = NULL;
    }
}

// A device copy of host data (bytes), or aborts the suite: a test cannot go on without it.
static inline void *rl_test_dup(const void *host, size_t bytes) {
    void *d = NULL;
    if (rl_test_cu->dmalloc(rl_test_ctx, bytes, &d) != 0 ||
        (host && rl_test_cu->h2d(rl_test_ctx, d, host, bytes) != 0)) {
        fprintf(stderr, "FAIL: device buffer of %zu bytes: %s\n", bytes,
                rl_test_cu->errmsg(rl_test_ctx));
        exit(1);
    }
    return d;
}

// A device buffer of `bytes` filled with 0xff: a float NaN in every lane, so that an output a
// kernel fails to write shows up (outputs are poisoned first, STYLE.md §12).
static inline void *rl_test_poisoned(size_t bytes) {
    void *d = rl_test_dup(NULL, bytes);
    if (rl_test_cu->dset(rl_test_ctx, d, 0xff, bytes) != 0) {
        fprintf(stderr, "FAIL: poisoning: %s\n", rl_test_cu->errmsg(rl_test_ctx));
        exit(1);
    }
    return d;
}

// Host copy of a device buffer (caller owns; free with free()), after waiting for the stream.
static inline void *rl_test_back(const void *dev, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    if (!h || rl_test_cu->sync(rl_test_ctx) != 0 ||
        rl_test_cu->d2h(rl_test_ctx, h, dev, bytes) != 0) {
        fprintf(stderr, "FAIL: reading back %zu bytes: %s\n", bytes,
                rl_test_cu->errmsg(rl_test_ctx));
        exit(1);
    }
    return h;
}

static inline void rl_test_dfree(void *dev) {
    rl_test_cu->dfree(rl_test_ctx, dev);
}

// bf16 bits of x, rounded to nearest even (what torch and __float2bfloat16_rn do); NaN stays NaN.
static inline uint16_t rl_test_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float rl_test_from_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

// x rounded to the nearest bf16 value (to even), as a float.
static inline float rl_test_round_bf16(float x) {
    return rl_test_from_bf16(rl_test_bf16(x));
}

// Compares got (n) with want (n): every |got - want| <= atol + rtol * |want| and got finite;
// prints the worst element and the counts; returns 1 when all are within.
static inline int rl_test_close(const char *what, const float *got, const double *want, size_t n,
                                double atol, double rtol) {
    size_t bad = 0, worst = 0;
    double worst_r = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]), lim = atol + rtol * fabs(want[i]);
        double r = isfinite(got[i]) ? d / lim : INFINITY;
        if (!(r <= 1.0)) {
            bad++;
        }
        if (!(r <= worst_r)) {
            worst_r = r;
            worst = i;
        }
    }
    printf("%-40s n %-8zu worst |d| %.3g at %zu (got %.9g, want %.9g; %.2f of the tolerance)%s\n",
           what, n, n ? fabs((double)got[worst] - want[worst]) : 0.0, worst,
           n ? (double)got[worst] : 0.0, n ? want[worst] : 0.0, worst_r,
           bad ? " FAIL" : "");
    CHECK_MSG(bad == 0, "%s: %zu of %zu elements outside atol %g + rtol %g", what, bad, n, atol,
              rtol);
    return bad == 0;
}

#endif

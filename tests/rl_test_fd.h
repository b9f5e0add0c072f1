// rl_test_fd — finite differences for the gradient checks of the test suites: the central
// difference of a loss (computed in double) along one of its float or double inputs,
// Richardson's extrapolation of two of them (O(h^4)), and the check every loss suite makes of an
// analytic gradient against them: the worst |g - fd| relative to max |fd|, the entry where it is,
// and on failure a FAIL line naming the case, that entry, both values and the tolerance. Not a
// tolerance policy: each suite chooses its inputs, steps and tolerances and says why. For suites
// that include rl_test.h.
#ifndef RL_TEST_FD_H
#define RL_TEST_FD_H

#include "rl_test.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

// A loss at x (its n inputs), in double. ctx: the caller's (the rest of the batch, the knobs).
typedef double (*rl_fd_fn)(void *ctx, const float *x);
typedef double (*rl_fd_fn_d)(void *ctx, const double *x);

// ---- estimates -------------------------------------------------------------------------------

// The central difference of f along input i with step h, O(h^2): x[i] is set to (float)(x[i] +
// h), then (float)(x[i] - h), and put back bit for bit. The quotient divides by the step the
// float input actually took: a float often cannot hold x[i] +- h (a step such as 1e-3 is no
// multiple of x's ulp; a power of two finer than that ulp, or taking x across a power of two, is
// rounded too), and where it can (the loss suites put their inputs on a grid so that it can) the
// step taken is exactly 2h.
static inline double rl_fd_central(rl_fd_fn f, void *ctx, float *x, size_t i, double h) {
    const float x0 = x[i];
    x[i] = (float)((double)x0 + h);
    const double xp = x[i], lp = f(ctx, x);
    x[i] = (float)((double)x0 - h);
    const double xm = x[i], lm = f(ctx, x);
    x[i] = x0;
    return (lp - lm) / (xp - xm);
}

// As rl_fd_central, on a double input. The quotient divides by 2h, as the suites always have: in
// double x +- h misses by at most an ulp of x, 1e-10 of a 1e-6 step on |x| <= 1, far below any
// tolerance here (dividing by the realised step moves the printed worst errors of model.layers
// in their third digit, and nothing else).
static inline double rl_fd_central_d(rl_fd_fn_d f, void *ctx, double *x, size_t i, double h) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = f(ctx, x);
    x[i] = x0 - h;
    const double lm = f(ctx, x);
    x[i] = x0;
    return (lp - lm) / (2.0 * h);
}

// Richardson's extrapolation of the central differences D(h) and D(h/2): (4 D(h/2) - D(h)) / 3.
// Their truncation errors are c2 h^2 + c4 h^4 + ...; the h^2 terms cancel, leaving -c4 h^4 / 4
// (exact for a polynomial of degree <= 4; for x^5 the estimate is 5x^4 - h^4 / 4). f is
// evaluated at x[i] + h, x[i] - h, x[i] + h/2, x[i] - h/2, in that order.
static inline double rl_fd_richardson(rl_fd_fn f, void *ctx, float *x, size_t i, double h) {
    const double d1 = rl_fd_central(f, ctx, x, i, h);
    const double d2 = rl_fd_central(f, ctx, x, i, h / 2.0);
    return (4.0 * d2 - d1) / 3.0;
}

static inline double rl_fd_richardson_d(rl_fd_fn_d f, void *ctx, double *x, size_t i, double h) {
    const double d1 = rl_fd_central_d(f, ctx, x, i, h);
    const double d2 = rl_fd_central_d(f, ctx, x, i, h / 2.0);
    return (4.0 * d2 - d1) / 3.0;
}

// ---- a gradient against them -----------------------------------------------------------------

// What a gradient check found.
typedef struct {
    double rel;     // max_err / max_fd (max_err when every fd is 0); inf: nothing compared
    double max_err; // max |g - fd| (inf where either is NaN)
    double max_fd;  // max |fd|
    long at;        // the entry of max_err (the first, on ties); -1: nothing compared
    double g, fd;   // g and fd there
    size_t n;       // entries compared
} rl_fd_cmp_t;

// Adds entry i (gradient g, estimate fd) to r.
static inline void rl_fd_cmp_add(rl_fd_cmp_t *r, size_t i, double g, double fd) {
    double e = fabs(g - fd);
    if (isnan(e)) {
        e = INFINITY;
    }
    r->max_fd = fmax(r->max_fd, fabs(fd));
    if (r->at < 0 || e > r->max_err) {
        r->max_err = e;
        r->at = (long)i;
        r->g = g;
        r->fd = fd;
    }
    r->n++;
}

// One check: r->rel <= tol. Where every fd is 0 (a loss flat in x: every row clipped, say) the
// error is absolute: g must be 0 too. A check of no entry at all cannot fail, so it fails. A
// failure prints "FAIL [case > func] file:line: <what>: ..." with the worst entry, both values
// and tol, and is counted. Returns r->rel.
static inline double rl_fd_cmp_check_at(const char *func, const char *file, int line,
                                        rl_fd_cmp_t *r, double tol, const char *fmt, va_list ap) {
    r->rel = r->n == 0 ? INFINITY : r->max_fd > 0.0 ? r->max_err / r->max_fd : r->max_err;
    rl_test_checks++;
    if (r->rel <= tol) {
        return r->rel;
    }
    rl_test_failed++;
    rl_test_fail_at(func, file, line);
    vfprintf(stderr, fmt, ap);
    if (r->n == 0) {
        fprintf(stderr, ": no entry compared\n");
    } else {
        fprintf(stderr,
                ": |g - fd| %.3g of max|fd| %.3g: %.3g%s > tol %g; worst at [%ld]: g %.9g "
                "vs fd %.9g\n",
                r->max_err, r->max_fd, r->rel, r->max_fd > 0.0 ? "" : " (every fd is 0: absolute)",
                tol, r->at, r->g, r->fd);
    }
    return r->rel;
}

// Checks the gradient g (n floats) of f at x against Richardson's estimate with step h (see
// rl_fd_richardson) at every entry i where mask (NULL: all) is not 0: a masked entry is never
// moved (it may hold NaN) nor compared. x is put back bit for bit. One check (see
// rl_fd_cmp_check_at): the worst |g - fd| / max |fd| <= tol, the case named by a printf format.
// Returns the comparison. Use through RL_FD_CHECK, whose FAIL line gives the caller's file:line.
static inline rl_fd_cmp_t rl_fd_check_at(const char *func, const char *file, int line, rl_fd_fn f,
                                         void *ctx, float *x, const float *g, size_t n, double h,
                                         const float *mask, double tol, const char *fmt, ...)
    __attribute__((format(printf, 12, 13)));
static inline rl_fd_cmp_t rl_fd_check_at(const char *func, const char *file, int line, rl_fd_fn f,
                                         void *ctx, float *x, const float *g, size_t n, double h,
                                         const float *mask, double tol, const char *fmt, ...) {
    rl_fd_cmp_t r = {0.0, 0.0, 0.0, -1, 0.0, 0.0, 0};
    for (size_t i = 0; i < n; i++) {
        if (!mask || mask[i] != 0.0f) {
            rl_fd_cmp_add(&r, i, g[i], rl_fd_richardson(f, ctx, x, i, h));
        }
    }
    va_list ap;
    va_start(ap, fmt);
    rl_fd_cmp_check_at(func, file, line, &r, tol, fmt, ap);
    va_end(ap);
    return r;
}

// As rl_fd_check_at, on double inputs and a double gradient.
static inline rl_fd_cmp_t rl_fd_check_d_at(const char *func, const char *file, int line,
                                           rl_fd_fn_d f, void *ctx, double *x, const double *g,
                                           size_t n, double h, const float *mask, double tol,
                                           const char *fmt, ...)
    __attribute__((format(printf, 12, 13)));
static inline rl_fd_cmp_t rl_fd_check_d_at(const char *func, const char *file, int line,
                                           rl_fd_fn_d f, void *ctx, double *x, const double *g,
                                           size_t n, double h, const float *mask, double tol,
                                           const char *fmt, ...) {
    rl_fd_cmp_t r = {0.0, 0.0, 0.0, -1, 0.0, 0.0, 0};
    for (size_t i = 0; i < n; i++) {
        if (!mask || mask[i] != 0.0f) {
            rl_fd_cmp_add(&r, i, g[i], rl_fd_richardson_d(f, ctx, x, i, h));
        }
    }
    va_list ap;
    va_start(ap, fmt);
    rl_fd_cmp_check_at(func, file, line, &r, tol, fmt, ap);
    va_end(ap);
    return r;
}

// RL_FD_CHECK(f, ctx, x, g, n, h, mask, tol, "case %d", ...): rl_fd_check_at from the caller.
#define RL_FD_CHECK(f, ctx, x, g, n, h, mask, tol, ...)                                            \
    rl_fd_check_at(__func__, __FILE__, __LINE__, (f), (ctx), (x), (g), (n), (h), (mask), (tol),    \
                   __VA_ARGS__)
#define RL_FD_CHECK_D(f, ctx, x, g, n, h, mask, tol, ...)                                          \
    rl_fd_check_d_at(__func__, __FILE__, __LINE__, (f), (ctx), (x), (g), (n), (h), (mask), (tol),  \
                     __VA_ARGS__)

#endif

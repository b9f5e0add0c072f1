// tests.kit — the shared test kit (tests/rl_test.h) does what every suite relies on:
//   - a failed check's line names its test case and the function it failed in;
//   - a temporary folder is removed with everything in it (sub-folders, a link, whose target
//     outside is left alone) when the suite passed, and kept, saying where, when a check failed;
//   - rl_test_write writes what its format says;
//   - the finite differences of rl_test_fd.h: on a polynomial whose every value is exact in
//     double, the central difference and Richardson's estimate are the formulas' numbers exactly,
//     x is put back bit for bit, a masked input is never moved; a right gradient passes with the
//     error Richardson leaves (c h^4 / 4 for c x^5), a wrong one fails, counted, on a FAIL line
//     naming the case, the entry, both values and the tolerance, as do a check of no entry and
//     a non-zero gradient of a flat loss.
#include "rl_test.h"
#include "rl_test_fd.h"

#include <unistd.h>

static void s_helper(void) {
    CHECK_INT(1 + 1, 3);
}

static void s_case(void) {
    CHECK(1 == 2);
    s_helper();
}

// What a child running `what` wrote on stderr (caller owns; free with free()); *failed_p (may be
// NULL) gets the number of checks that failed in it.
static char *s_stderr_of(void (*what)(void), int *failed_p) {
    int p[2];
    if (pipe(p) != 0) {
        return NULL;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        rl_test_case = NULL; // the child runs `what` alone, outside this suite's case,
        rl_test_failed = 0;  // and counts only its own failures
        what();
        fflush(stderr);
        _exit(rl_test_failed);
    }
    close(p[1]);
    static char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0) {
        n += (size_t)r;
    }
    buf[n] = '\0';
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (failed_p) {
        *failed_p = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    return strdup(buf);
}

static void s_run_case(void) {
    RL_TEST_RUN(s_case);
}

static void test_fail_lines(void) {
    int failed = 0;
    char *out = s_stderr_of(s_run_case, &failed);
    CHECK_INT(failed, 2); // and each counted
    CHECK_CONTAINS(out, "FAIL [s_case] ");
    CHECK_CONTAINS(out, "test_kit.c:");
    CHECK_CONTAINS(out, "1 == 2");
    CHECK_CONTAINS(out, "FAIL [s_case > s_helper] ");
    CHECK_CONTAINS(out, "1 + 1 == 3: 2 != 3");
    free(out);
    out = s_stderr_of(s_helper, NULL); // outside a case: the function alone
    CHECK_CONTAINS(out, "FAIL [s_helper] ");
    free(out);
}

static char s_dir[256], s_outside[300];

// A tree with files, a sub-folder and a link to a file outside it.
static void s_fill(const char *dir) {
    char p[512], q[512];
    snprintf(p, sizeof p, "%s/a.txt", dir);
    rl_test_write(p, "%s %d\n", "x", 1);
    snprintf(p, sizeof p, "%s/sub", dir);
    CHECK(mkdir(p, 0700) == 0);
    snprintf(p, sizeof p, "%s/sub/deeper", dir);
    CHECK(mkdir(p, 0700) == 0);
    snprintf(p, sizeof p, "%s/sub/deeper/b.bin", dir);
    rl_test_write(p, "%c", 0);
    snprintf(q, sizeof q, "%s/sub/link", dir);
    CHECK(symlink(s_outside, q) == 0);
}

static void s_done_failed(void) {
    rl_test_failed = 1;
    rl_test_tmpdir_done(s_dir);
}

static void test_tmpdir(void) {
    char top[256];
    rl_test_tmpdir(top, sizeof top, "kit");
    CHECK(strncmp(top, "/tmp/rl_test_kit_", 17) == 0);
    snprintf(s_outside, sizeof s_outside, "%s/outside.txt", top);
    rl_test_write(s_outside, "keep me");
    char *back = rl_test_read_file(s_outside, NULL);
    CHECK_STR(back, "keep me");
    free(back);
    // a suite that failed keeps its folder and says where
    rl_test_tmpdir(s_dir, sizeof s_dir, "kit");
    s_fill(s_dir);
    char *out = s_stderr_of(s_done_failed, NULL);
    CHECK_CONTAINS(out, s_dir);
    free(out);
    struct stat st;
    CHECK(stat(s_dir, &st) == 0);
    // a passing one removes it all, and nothing a link points at
    int failed = rl_test_failed;
    rl_test_tmpdir_done(s_dir);
    CHECK_MSG(failed == rl_test_failed, "removing %s failed", s_dir);
    CHECK_MSG(lstat(s_dir, &st) != 0 && errno == ENOENT, "%s is still there", s_dir);
    CHECK(stat(s_outside, &st) == 0);
    rl_test_tmpdir_done(top);
    CHECK(lstat(top, &st) != 0);
}

// ---- finite differences (rl_test_fd.h) ----------------------------------------------------------

// f(x) = x0 x1 + sum_i c_i x_i^5. With x on a grid of 2^-2 and h = 2^-3, every input f sees
// (x +- h, x +- h/2: a grid of 2^-4) is exact in float and every value of f in double, so the
// central difference is exactly f' + c_i (10 x_i^2 h^2 + h^4) and Richardson's estimate exactly
// f' - c_i h^4 / 4 (its one rounding, the division by 3, lands on that representable number).
enum { S_N = 4 };
static const double s_c[S_N] = {1.0, -2.0, 0.5, 3.0};
static const float s_x[S_N] = {0.5f, -1.0f, 1.5f, 0.75f};
static const double s_h = 0.125;

typedef struct {
    int calls, moved; // calls of f, and those that saw an input mask skips away from s_x
    const float *mask;
} s_poly_t;

static double s_poly(void *ctx, const float *x) {
    s_poly_t *p = ctx;
    p->calls++;
    double f = (double)x[0] * (double)x[1];
    for (int i = 0; i < S_N; i++) {
        const double v = x[i];
        f += s_c[i] * v * v * v * v * v;
        p->moved += p->mask && p->mask[i] == 0.0f && x[i] != s_x[i];
    }
    return f;
}

static double s_poly_d(void *ctx, const double *x) {
    float xf[S_N];
    for (int i = 0; i < S_N; i++) {
        xf[i] = (float)x[i]; // exact: x is moved on the same grid
    }
    return s_poly(ctx, xf);
}

// df/dx_i at s_x (exact in float).
static double s_poly_grad(int i) {
    const double v = s_x[i];
    return 5.0 * s_c[i] * v * v * v * v + (i == 0 ? s_x[1] : i == 1 ? s_x[0] : 0.0);
}

static double s_flat(void *ctx, const float *x) {
    (void)ctx;
    (void)x;
    return 1.5;
}

static double s_first(void *ctx, const float *x) {
    (void)ctx;
    return x[0];
}

static void test_fd_estimates(void) {
    float x[S_N];
    memcpy(x, s_x, sizeof x);
    s_poly_t p = {0, 0, NULL};
    const double h4 = s_h * s_h * s_h * s_h;
    for (int i = 0; i < S_N; i++) {
        const double v = s_x[i];
        const double d = rl_fd_central(s_poly, &p, x, (size_t)i, s_h);
        CHECK_MSG(d == s_poly_grad(i) + s_c[i] * (10.0 * v * v * s_h * s_h + h4),
                  "central difference [%d]: %.17g", i, d);
        const double r = rl_fd_richardson(s_poly, &p, x, (size_t)i, s_h);
        CHECK_MSG(r == s_poly_grad(i) - s_c[i] * h4 / 4.0, "Richardson [%d]: %.17g want %.17g", i,
                  r, s_poly_grad(i) - s_c[i] * h4 / 4.0);
        CHECK(memcmp(x, s_x, sizeof x) == 0); // put back bit for bit
    }
    CHECK_INT(p.calls, S_N * (2 + 4));
    // the same on double inputs
    double xd[S_N];
    for (int i = 0; i < S_N; i++) {
        xd[i] = s_x[i];
    }
    for (int i = 0; i < S_N; i++) {
        const double r = rl_fd_richardson_d(s_poly_d, &p, xd, (size_t)i, s_h);
        CHECK_MSG(r == s_poly_grad(i) - s_c[i] * h4 / 4.0, "Richardson_d [%d]: %.17g", i, r);
        CHECK(xd[i] == (double)s_x[i]);
    }
    // a step a float cannot take exactly (1e-3 at 0.3): the quotient divides by the step taken,
    // so the derivative of f(x) = x0 is exactly 1, where (x+ - x-) / 2h is not
    float y[1] = {0.3f};
    const double yp = (float)(0.3f + 1e-3), ym = (float)(0.3f - 1e-3);
    CHECK((yp - ym) / 2e-3 != 1.0);
    CHECK(rl_fd_central(s_first, NULL, y, 0, 1e-3) == 1.0);
    CHECK(y[0] == 0.3f);
}

// A right gradient passes, with Richardson's error: |g - fd| = |c_i| h^4 / 4, the worst at the
// largest |c_i| (entry 3); a masked entry is neither moved nor compared; a flat loss with a zero
// gradient passes.
static void test_fd_check(void) {
    float x[S_N], g[S_N];
    memcpy(x, s_x, sizeof x);
    for (int i = 0; i < S_N; i++) {
        g[i] = (float)s_poly_grad(i);
    }
    const double h4_4 = s_h * s_h * s_h * s_h / 4.0, err = 3.0 * h4_4; // 3 * 2^-14
    const int failed = rl_test_failed;
    s_poly_t p = {0, 0, NULL};
    rl_fd_cmp_t r = RL_FD_CHECK(s_poly, &p, x, g, S_N, s_h, NULL, 1e-4, "poly");
    CHECK(r.n == S_N && r.at == 3 && r.g == g[3]);
    CHECK_MSG(r.max_err == err, "max |g - fd| %.17g want %.17g", r.max_err, err);
    CHECK(r.max_fd == s_poly_grad(2) - s_c[2] * h4_4); // entry 2 has the largest |fd|
    CHECK(r.rel == r.max_err / r.max_fd && r.rel > 1e-5 && r.rel < 1e-4);
    CHECK_INT(p.calls, 4 * S_N);
    CHECK(memcmp(x, s_x, sizeof x) == 0);
    const float mask[S_N] = {1, 1, 0, 1};
    s_poly_t pm = {0, 0, mask};
    r = RL_FD_CHECK(s_poly, &pm, x, g, S_N, s_h, mask, 1e-4, "poly masked");
    CHECK(r.n == S_N - 1 && r.at == 3 && r.max_err == err);
    CHECK_INT(pm.calls, 4 * (S_N - 1));
    CHECK_INT(pm.moved, 0);
    double xd[S_N], gd[S_N];
    for (int i = 0; i < S_N; i++) {
        xd[i] = s_x[i];
        gd[i] = g[i];
    }
    r = RL_FD_CHECK_D(s_poly_d, &p, xd, gd, S_N, s_h, NULL, 1e-4, "poly, double inputs");
    CHECK(r.n == S_N && r.at == 3 && r.max_err == err);
    const float zero[S_N] = {0};
    r = RL_FD_CHECK(s_flat, NULL, x, zero, S_N, s_h, NULL, 1e-12, "flat");
    CHECK(r.n == S_N && r.max_fd == 0.0 && r.rel == 0.0);
    CHECK_MSG(rl_test_failed == failed, "a right gradient failed");
}

// Each of these checks fails: a gradient 1% off at entry 1, a check of no entry, a flat loss
// with a gradient that is not 0.
static void s_fd_wrong(void) {
    float x[S_N], g[S_N];
    memcpy(x, s_x, sizeof x);
    for (int i = 0; i < S_N; i++) {
        g[i] = (float)s_poly_grad(i);
    }
    g[1] *= 1.01f;
    s_poly_t p = {0, 0, NULL};
    RL_FD_CHECK(s_poly, &p, x, g, S_N, s_h, NULL, 1e-4, "poly case %d", 7);
    const float none[S_N] = {0};
    RL_FD_CHECK(s_poly, &p, x, g, S_N, s_h, none, 1e-4, "all masked");
    RL_FD_CHECK(s_flat, NULL, x, g, S_N, s_h, NULL, 1e-4, "flat");
}

static void s_run_fd_wrong(void) {
    RL_TEST_RUN(s_fd_wrong);
}

static void test_fd_fail_lines(void) {
    int failed = 0;
    char *out = s_stderr_of(s_run_fd_wrong, &failed);
    CHECK_INT(failed, 3);
    CHECK_CONTAINS(out, "FAIL [s_fd_wrong] ");
    CHECK_CONTAINS(out, "test_kit.c:");
    CHECK_CONTAINS(out, "poly case 7: |g - fd| ");
    CHECK_CONTAINS(out, "> tol 0.0001; worst at [1]: g -9.59500027 vs fd -9.49987793");
    CHECK_CONTAINS(out, "all masked: no entry compared");
    CHECK_CONTAINS(out, "flat: |g - fd| 12.7 of max|fd| 0: 12.7 (every fd is 0: absolute)");
    free(out);
}

int main(void) {
    RL_TEST_RUN(test_fail_lines);
    RL_TEST_RUN(test_tmpdir);
    RL_TEST_RUN(test_fd_estimates);
    RL_TEST_RUN(test_fd_check);
    RL_TEST_RUN(test_fd_fail_lines);
    RL_TEST_DONE();
}

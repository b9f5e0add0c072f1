// rl_test — tiny check macros for the ctest suites. Each failed check prints file:line and
// what differed, and is counted; a suite ends with RL_TEST_DONE(), which prints a summary and
// returns non-zero when anything failed.
#ifndef RL_TEST_H
#define RL_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int rl_test_failed = 0;
static int rl_test_checks = 0;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        rl_test_checks++;                                                             \
        if (!(cond)) {                                                                \
            rl_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        rl_test_checks++;                                                             \
        if (!(cond)) {                                                                \
            rl_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

#define CHECK_INT(a, b)                                                               \
    do {                                                                              \
        long long rl_a_ = (long long)(a), rl_b_ = (long long)(b);                     \
        rl_test_checks++;                                                             \
        if (rl_a_ != rl_b_) {                                                         \
            rl_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__, \
                    #a, #b, rl_a_, rl_b_);                                            \
        }                                                                             \
    } while (0)

#define CHECK_STR(a, b)                                                               \
    do {                                                                              \
        const char *rl_a_ = (a), *rl_b_ = (b);                                        \
        rl_test_checks++;                                                             \
        if (!rl_a_ || !rl_b_ || strcmp(rl_a_, rl_b_) != 0) {                          \
            rl_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s == %s: \"%s\" != \"%s\"\n", __FILE__,     \
                    __LINE__, #a, #b, rl_a_ ? rl_a_ : "(null)", rl_b_ ? rl_b_ : "(null)"); \
        }                                                                             \
    } while (0)

// substring check: haystack contains needle
#define CHECK_CONTAINS(hay, needle)                                                   \
    do {                                                                              \
        const char *rl_h_ = (hay), *rl_n_ = (needle);                                 \
        rl_test_checks++;                                                             \
        if (!rl_h_ || !strstr(rl_h_, rl_n_)) {                                        \
            rl_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, \
                    __LINE__, rl_h_ ? rl_h_ : "(null)", rl_n_);                       \
        }                                                                             \
    } while (0)

// |a-b| <= tol * max(1, |b|): relative for large values, absolute near zero.
#define CHECK_CLOSE(a, b, tol)                                                        \
    do {                                                                              \
        double rl_a_ = (double)(a), rl_b_ = (double)(b);                              \
        double rl_s_ = fabs(rl_b_) > 1.0 ? fabs(rl_b_) : 1.0;                         \
        rl_test_checks++;                                                             \
        if (!(fabs(rl_a_ - rl_b_) <= (tol) * rl_s_)) {                                \
            rl_test_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s ~ %s: %.9g vs %.9g (tol %g)\n", __FILE__, \
                    __LINE__, #a, #b, rl_a_, rl_b_, (double)(tol));                   \
        }                                                                             \
    } while (0)

// Runs a shell command and captures up to cap-1 bytes of its stdout into out (NUL-terminated).
// Returns the exit status, 128 + the signal when it was killed, or -1 when it could not start.
static inline int rl_test_shell(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) {
        return -1;
    }
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    while (fgetc(p) != EOF) { // drain, so the child never dies of SIGPIPE
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

// Reads a whole file, NUL-terminated; *len_p (may be NULL) gets its size. NULL if unreadable.
// caller owns result; free with free().
static inline char *rl_test_read_file(const char *path, size_t *len_p) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    // read to EOF in chunks: /proc files report a size of 0
    size_t n = 0, cap = 4096;
    char *s = malloc(cap + 1);
    while (s) {
        size_t got = fread(s + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            break;
        }
        char *t = realloc(s, 2 * cap + 1);
        if (!t) {
            free(s);
            s = NULL;
            break;
        }
        s = t;
        cap *= 2;
    }
    if (s && ferror(f)) {
        free(s);
        s = NULL;
    }
    if (s) {
        s[n] = '\0';
        if (len_p) {
            *len_p = n;
        }
    }
    fclose(f);
    return s;
}

// Stops the suite when a setup step (a fixture file, a temp dir) failed: nothing after it can run.
#define RL_TEST_ASSERT_FILE(ptr, what)                                                \
    do {                                                                              \
        if (!(ptr)) {                                                                 \
            fprintf(stderr, "FAIL %s:%d: cannot open %s\n", __FILE__, __LINE__, (what)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

#define RL_TEST_DONE()                                                                \
    do {                                                                              \
        fprintf(stderr, "%s: %d checks, %d failed\n", __FILE__, rl_test_checks,       \
                rl_test_failed);                                                      \
        return rl_test_failed ? 1 : 0;                                                \
    } while (0)

#endif

// rl_test — the kit every ctest suite shares: check macros (each failed check prints its test
// case, function, file:line and what differed, and is counted; a suite ends with RL_TEST_DONE(),
// which prints a summary and returns non-zero when anything failed), temporary folders and their
// removal, files written from a format, a shell command's output, a whole file read back. Beside
// it: rl_test_fd.h (finite differences, a gradient checked against them), rl_test_golden.h
// (PyTorch goldens), rl_test_run.h (runs of the binary), rl_test_cuda.h (the gpu suites),
// rl_test_lmdb.h (a damaged trajectory store).
#ifndef RL_TEST_H
#define RL_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int rl_test_failed = 0;
static int rl_test_checks = 0;
// The test case RL_TEST_RUN is running (NULL: none). Every FAIL line names it and the function
// whose check failed: "FAIL [test_calls] file:line: ..." or, for a check in a helper,
// "FAIL [test_calls > s_check_reply] file:line: ...".
static const char *rl_test_case = NULL;

static inline void rl_test_fail_at(const char *func, const char *file, int line) {
    if (rl_test_case && strcmp(rl_test_case, func) != 0) {
        fprintf(stderr, "FAIL [%s > %s] %s:%d: ", rl_test_case, func, file, line);
    } else {
        fprintf(stderr, "FAIL [%s] %s:%d: ", func, file, line);
    }
}

// Runs the test case `fn(...)` under its name (for the FAIL lines).
#define RL_TEST_RUN(fn, ...)                                                          \
    do {                                                                              \
        rl_test_case = #fn;                                                           \
        fn(__VA_ARGS__);                                                              \
        rl_test_case = NULL;                                                          \
    } while (0)

#define CHECK(cond)                                                                   \
    do {                                                                              \
        rl_test_checks++;                                                             \
        if (!(cond)) {                                                                \
            rl_test_failed++;                                                         \
            rl_test_fail_at(__func__, __FILE__, __LINE__);                            \
            fprintf(stderr, "%s\n", #cond);                                           \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        rl_test_checks++;                                                             \
        if (!(cond)) {                                                                \
            rl_test_failed++;                                                         \
            rl_test_fail_at(__func__, __FILE__, __LINE__);                            \
            fprintf(stderr, "%s: ", #cond);                                           \
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
            rl_test_fail_at(__func__, __FILE__, __LINE__);                            \
            fprintf(stderr, "%s == %s: %lld != %lld\n", #a, #b, rl_a_, rl_b_);        \
        }                                                                             \
    } while (0)

#define CHECK_STR(a, b)                                                               \
    do {                                                                              \
        const char *rl_a_ = (a), *rl_b_ = (b);                                        \
        rl_test_checks++;                                                             \
        if (!rl_a_ || !rl_b_ || strcmp(rl_a_, rl_b_) != 0) {                          \
            rl_test_failed++;                                                         \
            rl_test_fail_at(__func__, __FILE__, __LINE__);                            \
            fprintf(stderr, "%s == %s: \"%s\" != \"%s\"\n", #a, #b, rl_a_ ? rl_a_ : "(null)", \
                    rl_b_ ? rl_b_ : "(null)");                                        \
        }                                                                             \
    } while (0)

// substring check: haystack contains needle
#define CHECK_CONTAINS(hay, needle)                                                   \
    do {                                                                              \
        const char *rl_h_ = (hay), *rl_n_ = (needle);                                 \
        rl_test_checks++;                                                             \
        if (!rl_h_ || !strstr(rl_h_, rl_n_)) {                                        \
            rl_test_failed++;                                                         \
            rl_test_fail_at(__func__, __FILE__, __LINE__);                            \
            fprintf(stderr, "\"%s\" does not contain \"%s\"\n", rl_h_ ? rl_h_ : "(null)", rl_n_); \
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
            rl_test_fail_at(__func__, __FILE__, __LINE__);                            \
            fprintf(stderr, "%s ~ %s: %.9g vs %.9g (tol %g)\n", #a, #b, rl_a_, rl_b_, \
                    (double)(tol));                                                   \
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

// ---- temporary folders and files ------------------------------------------------------------

// A fresh folder "/tmp/rl_test_<tag>_XXXXXX" (mkdtemp: new, mode 0700) into dir (cap bytes), or
// the suite stops: nothing can run without it.
static inline void rl_test_tmpdir(char *dir, size_t cap, const char *tag) {
    snprintf(dir, cap, "/tmp/rl_test_%s_XXXXXX", tag);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "FAIL: cannot create a temporary folder %s: %s\n", dir, strerror(errno));
        exit(1);
    }
}

// Removes what is inside the folder open at fd (never following a link), then closes fd.
// Returns 0 or -1 (errno set) at the first thing that could not be removed.
static inline int rl_test_rm_inside(int fd) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 || rl_test_rm_inside(sub) != 0 ||
                         unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) != 0
                     ? -1
                     : 0;
        } else {
            rc = unlinkat(dirfd(d), e->d_name, 0);
        }
    }
    closedir(d);
    return rc;
}

// The end of a suite's temporary folder: removed with everything in it when every check passed
// so far; kept when one failed (what the run left there is the evidence), saying where.
static inline void rl_test_tmpdir_done(const char *dir);

// Writes a file from a printf format, or the suite stops (a fixture it cannot write).
static inline void rl_test_write(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void rl_test_write(const char *path, const char *fmt, ...) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "FAIL: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fclose(f) != 0) {
        fprintf(stderr, "FAIL: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

// Stops the suite when a setup step (a fixture file, a temp dir) failed: nothing after it can run.
#define RL_TEST_ASSERT_FILE(ptr, what)                                                \
    do {                                                                              \
        if (!(ptr)) {                                                                 \
            rl_test_fail_at(__func__, __FILE__, __LINE__);                            \
            fprintf(stderr, "cannot open %s\n", (what));                              \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static inline void rl_test_tmpdir_done(const char *dir) {
    if (rl_test_failed) {
        fprintf(stderr, "what the suite left is kept in %s\n", dir);
        return;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || rl_test_rm_inside(fd) != 0 || rmdir(dir) != 0) {
        rl_test_failed++;
        fprintf(stderr, "FAIL: cannot remove %s: %s\n", dir, strerror(errno));
    }
}

#define RL_TEST_DONE()                                                                \
    do {                                                                              \
        fprintf(stderr, "%s: %d checks, %d failed\n", __FILE__, rl_test_checks,       \
                rl_test_failed);                                                      \
        return rl_test_failed ? 1 : 0;                                                \
    } while (0)

#endif

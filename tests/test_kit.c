// tests.kit — the shared test kit (tests/rl_test.h) does what every suite relies on:
//   - a failed check's line names its test case and the function it failed in;
//   - a temporary folder is removed with everything in it (sub-folders, a link, whose target
//     outside is left alone) when the suite passed, and kept, saying where, when a check failed;
//   - rl_test_write writes what its format says.
#include "rl_test.h"

#include <unistd.h>

static void s_helper(void) {
    CHECK_INT(1 + 1, 3);
}

static void s_case(void) {
    CHECK(1 == 2);
    s_helper();
}

// What a child running `what` wrote on stderr (caller owns; free with free()).
static char *s_stderr_of(void (*what)(void)) {
    int p[2];
    if (pipe(p) != 0) {
        return NULL;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        rl_test_case = NULL; // the child runs `what` alone, outside this suite's case
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
    waitpid(pid, NULL, 0);
    return strdup(buf);
}

static void s_run_case(void) {
    RL_TEST_RUN(s_case);
}

static void test_fail_lines(void) {
    char *out = s_stderr_of(s_run_case);
    CHECK_CONTAINS(out, "FAIL [s_case] ");
    CHECK_CONTAINS(out, "test_kit.c:");
    CHECK_CONTAINS(out, "1 == 2");
    CHECK_CONTAINS(out, "FAIL [s_case > s_helper] ");
    CHECK_CONTAINS(out, "1 + 1 == 3: 2 != 3");
    free(out);
    out = s_stderr_of(s_helper); // outside a case: the function alone
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
    char *out = s_stderr_of(s_done_failed);
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

int main(void) {
    RL_TEST_RUN(test_fail_lines);
    RL_TEST_RUN(test_tmpdir);
    RL_TEST_DONE();
}

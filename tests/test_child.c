// test_child — rl_child, a program spoken to in lines, with programs written here (/bin/sh and
// python3 scripts):
//   1. an echo: replies come back whole (a 1 MiB line both ways), in order, the same process;
//      a line exactly max_len long passes; a request holding a newline is refused and the
//      program kept;
//   2. every way a program can fail names what happened, stops it, and every later call fails
//      with the same message: an exit with status 3, a kill by signal 9, a hang past a 0.3 s
//      deadline (its whole group killed: the grandchild it started is gone too), a line longer
//      than max_len, a second line no request was waiting for, a reply before the whole request
//      was read;
//   3. programs that cannot start: not on PATH, not executable, a folder;
//   4. stderr past the cap: the log (our stderr, a file here) holds the first
//      RL_CHILD_STDERR_CAP bytes, a note where it was cut, the count of dropped bytes and the
//      last bytes, ending with the program's last line;
//   5. stop: a program that exits when its stdin closes is stopped at once; one that ignores it
//      takes the RL_CHILD_GRACE_S grace, then its group is killed and no process is left.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rl_child.h"
#include "rl_clock.h"
#include "rl_err.h"
#include "rl_test.h"

#define LOG "the test's log"
#define NAME "the test command"

static char s_tmp[256];
static char s_err[4096];

// Starts argv (NULL-ended), or NULL with a FAIL naming why.
static rl_child_t *s_start(char *const *argv) {
    rl_child_t *c = NULL;
    int rc = rl_child_start(argv, NAME, LOG, &c, s_err, sizeof s_err);
    CHECK_MSG(rc == 0 && c, "start %s: %s", argv[0], s_err);
    return c;
}

// A /bin/sh script.
static rl_child_t *s_sh(const char *script) {
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    return s_start(argv);
}

// One exchange; the reply (NULL on failure) into *reply. Returns the code.
static int s_call(rl_child_t *c, const char *line, double deadline, size_t max_len, char **reply) {
    size_t len = 0;
    s_err[0] = '\0';
    *reply = NULL;
    return c ? rl_child_call(c, line, strlen(line), deadline, max_len, reply, &len, s_err,
                             sizeof s_err)
             : -1;
}

// 1 when pid is gone (or a zombie nobody of ours waits for) within `s` seconds.
static int s_gone(pid_t pid, double s) {
    for (int i = 0; i <= (int)(s * 100); i++) {
        if (kill(pid, 0) != 0 && errno == ESRCH) {
            return 1;
        }
        char path[64], stat[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (f) {
            size_t n = fread(stat, 1, sizeof stat - 1, f);
            stat[n] = '\0';
            fclose(f);
            const char *p = strrchr(stat, ')');
            if (p && p[1] == ' ' && p[2] == 'Z') {
                return 1;
            }
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

// After a failure whose message holds `want` (returned as `code`): the program is stopped and
// gone, and a later send and call fail with the same message and code.
static void s_check_gone(rl_child_t *c, int rc, int code, const char *want, pid_t pid) {
    CHECK_INT(rc, code);
    CHECK_CONTAINS(s_err, want);
    if (!c) {
        return;
    }
    char first[sizeof s_err];
    snprintf(first, sizeof first, "%s", s_err);
    CHECK_MSG(rl_child_gone(c) && !strcmp(rl_child_gone(c), first), "gone: %s, want %s",
              rl_child_gone(c) ? rl_child_gone(c) : "(null)", first);
    CHECK_INT(rl_child_pid(c), 0);
    CHECK_MSG(s_gone(pid, 2.0), "the program %d outlived its failure", (int)pid);
    char *reply = NULL;
    CHECK_INT(s_call(c, "again", 5, 100, &reply), code);
    CHECK_STR(s_err, first);
    CHECK(reply == NULL);
    s_err[0] = '\0';
    CHECK_INT(rl_child_send(c, "x", 1, s_err, sizeof s_err), code);
    CHECK_STR(s_err, first);
}

// ---------------------------------------------------------------------------------------------
// 1. an echo

static void test_echo(void) {
    char *argv[] = {"python3", "-c",
                    "import sys\nfor l in sys.stdin:\n    sys.stdout.write(l)\n"
                    "    sys.stdout.flush()\n",
                    NULL};
    rl_child_t *c = s_start(argv); // python3 found on PATH
    if (!c) {
        return;
    }
    pid_t pid = rl_child_pid(c);
    CHECK(pid > 0);
    CHECK(rl_child_gone(c) == NULL);
    char *reply = NULL;
    for (int i = 0; i < 3; i++) {
        char line[32];
        snprintf(line, sizeof line, "{\"turn\": %d}", i);
        CHECK_INT(s_call(c, line, 5, 100, &reply), 0);
        CHECK_STR(reply ? reply : "(null)", line);
        free(reply);
    }
    // a line far past the pipes' buffers both ways: written and read at once
    size_t big = 1u << 20;
    char *line = malloc(big + 1);
    RL_ASSERT(line);
    for (size_t i = 0; i < big; i++) {
        line[i] = (char)('a' + i % 26);
    }
    line[big] = '\0';
    size_t len = 0;
    CHECK_INT(rl_child_call(c, line, big, 10, big, &reply, &len, s_err, sizeof s_err), 0);
    CHECK_MSG(reply && len == big && !memcmp(reply, line, big),
              "the 1 MiB line came back as %zu bytes: %s", len, s_err);
    free(reply);
    free(line);
    // exactly max_len bytes pass; send and recv apart
    CHECK_INT(rl_child_send(c, "0123456789", 10, s_err, sizeof s_err), 0);
    CHECK_INT(rl_child_recv(c, 5, 10, &reply, &len, s_err, sizeof s_err), 0);
    CHECK_STR(reply ? reply : "(null)", "0123456789");
    free(reply);
    // a newline in a request: refused, the program kept
    CHECK_INT(rl_child_send(c, "a\nb", 3, s_err, sizeof s_err), RL_EINVAL);
    CHECK_CONTAINS(s_err, "holds a newline");
    CHECK(rl_child_gone(c) == NULL);
    CHECK_INT(s_call(c, "still here", 5, 100, &reply), 0);
    CHECK_STR(reply ? reply : "(null)", "still here");
    free(reply);
    CHECK_INT(rl_child_pid(c), (int)pid); // the same process all along
    double t0 = rl_clock_now();
    rl_child_stop(&c);
    CHECK(c == NULL);
    CHECK_MSG(rl_clock_now() - t0 < 0.8, "an echo that exits on end of input took %.2f s to stop",
              rl_clock_now() - t0);
    CHECK(s_gone(pid, 1.0));
    rl_child_stop(&c); // a no-op on NULL
}

// ---------------------------------------------------------------------------------------------
// 2. failures

static void test_failures(void) {
    char *reply = NULL;
    rl_child_t *c = s_sh("read l; echo oops >&2; exit 3");
    pid_t pid = c ? rl_child_pid(c) : 0;
    s_check_gone(c, s_call(c, "hi", 5, 100, &reply), RL_EIO,
                 "the command exited with status 3 before it replied (its stderr is in " LOG ")",
                 pid);
    rl_child_stop(&c);

    // exits after one good reply: the next send says so
    c = s_sh("read l; echo ok; exit 3");
    pid = c ? rl_child_pid(c) : 0;
    CHECK_INT(s_call(c, "hi", 5, 100, &reply), 0);
    free(reply);
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL); // it has exited by now
    s_check_gone(c, c ? rl_child_send(c, "hi", 2, s_err, sizeof s_err) : -1, RL_EIO,
                 "the command exited with status 3 before this request", pid);
    rl_child_stop(&c);

    c = s_sh("read l; kill -9 $$");
    pid = c ? rl_child_pid(c) : 0;
    s_check_gone(c, s_call(c, "hi", 5, 100, &reply), RL_EIO,
                 "the command was killed by signal 9 (Killed) before it replied", pid);
    rl_child_stop(&c);

    // a hang: stopped at the deadline, with the grandchild it started
    char pidfile[512], script[1024];
    snprintf(pidfile, sizeof pidfile, "%s/grandchild.pid", s_tmp);
    snprintf(script, sizeof script, "sleep 1000 & echo $! > %s; read l; sleep 1000", pidfile);
    c = s_sh(script);
    pid = c ? rl_child_pid(c) : 0;
    pid_t grandchild = 0;
    for (int i = 0; i < 200 && !grandchild; i++) { // it writes the file as it starts
        char *t = rl_test_read_file(pidfile, NULL);
        grandchild = t && strchr(t, '\n') ? (pid_t)atoi(t) : 0;
        free(t);
        struct timespec w = {0, 10000000};
        nanosleep(&w, NULL);
    }
    CHECK_MSG(grandchild > 0 && kill(grandchild, 0) == 0, "no grandchild running (%d)",
              (int)grandchild);
    double t0 = rl_clock_now();
    int rc = s_call(c, "hi", 0.3, 100, &reply);
    double took = rl_clock_now() - t0;
    CHECK_MSG(took >= 0.29 && took < 1.0, "the hang was cut after %.2f s, want 0.3", took);
    s_check_gone(c, rc, RL_ETIMEOUT, "the command gave no reply within 0.3 s and was stopped", pid);
    CHECK_MSG(grandchild > 0 && s_gone(grandchild, 2.0), "the grandchild %d outlived the hang",
              (int)grandchild);
    rl_child_stop(&c);

    // too long a line: 100 bytes against 99
    c = s_sh("read l; printf '%0100d\\n' 0");
    pid = c ? rl_child_pid(c) : 0;
    s_check_gone(c, s_call(c, "hi", 5, 99, &reply), RL_EPROTO,
                 "the command's reply line is longer than 99 bytes", pid);
    rl_child_stop(&c);
    // and a line with no end at all, past max_len
    c = s_sh("read l; while :; do printf xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done");
    pid = c ? rl_child_pid(c) : 0;
    s_check_gone(c, s_call(c, "hi", 5, 5000, &reply), RL_EPROTO,
                 "the command's reply line is longer than 5000 bytes", pid);
    rl_child_stop(&c);

    // two lines for one request: the next send finds the second
    c = s_sh("while read l; do echo one; echo two; done");
    pid = c ? rl_child_pid(c) : 0;
    CHECK_INT(s_call(c, "hi", 5, 100, &reply), 0);
    CHECK_STR(reply ? reply : "(null)", "one");
    free(reply);
    nanosleep(&ts, NULL);
    s_check_gone(c, s_call(c, "hi", 5, 100, &reply), RL_EPROTO,
                 "the command wrote 'two' when no request was waiting (one reply line per "
                 "request line; log to stderr)",
                 pid);
    rl_child_stop(&c);

    // a reply before the whole request (1 MiB, past the pipe's buffer) was read
    c = s_sh("sleep 0.3; echo early; sleep 1000"); // (after the send's look for stale lines)
    pid = c ? rl_child_pid(c) : 0;
    size_t big = 1u << 20;
    char *line = malloc(big + 1);
    RL_ASSERT(line);
    memset(line, 'r', big);
    line[big] = '\0';
    s_check_gone(c, s_call(c, line, 5, 100, &reply), RL_EPROTO,
                 "the command replied 'early' before it read the whole request", pid);
    free(line);
    rl_child_stop(&c);
}

// ---------------------------------------------------------------------------------------------
// 3. programs that cannot start

static void test_cannot_start(void) {
    static rl_child_t *const unset = (rl_child_t *)&s_err; // *out is set to NULL on failure
    rl_child_t *c = unset;
    char *nope[] = {"rl-no-such-program", NULL};
    CHECK_INT(rl_child_start(nope, NAME, LOG, &c, s_err, sizeof s_err), RL_ENOTFOUND);
    CHECK_CONTAINS(s_err, "cannot run rl-no-such-program: no executable of that name on PATH");
    CHECK(c == NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/not_executable.sh", s_tmp);
    rl_test_write(path, "#!/bin/sh\necho hi\n");
    char *plain[] = {path, NULL};
    CHECK_INT(rl_child_start(plain, NAME, LOG, &c, s_err, sizeof s_err), EACCES);
    char want[600];
    snprintf(want, sizeof want, "cannot run %s: Permission denied", path);
    CHECK_CONTAINS(s_err, want);
    CHECK(c == NULL);
    char *dir[] = {s_tmp, NULL};
    CHECK_INT(rl_child_start(dir, NAME, LOG, &c, s_err, sizeof s_err), RL_EINVAL);
    snprintf(want, sizeof want, "cannot run %s: not a regular file", s_tmp);
    CHECK_CONTAINS(s_err, want);
    CHECK(c == NULL);
    // executable, but not a program the kernel runs: exec's own error
    chmod(path, 0700);
    rl_test_write(path, "no interpreter line\n");
    CHECK_INT(rl_child_start(plain, NAME, LOG, &c, s_err, sizeof s_err), ENOEXEC);
    snprintf(want, sizeof want, "cannot run %s: Exec format error", path);
    CHECK_CONTAINS(s_err, want);
    CHECK(c == NULL);
}

// ---------------------------------------------------------------------------------------------
// 4. stderr past the cap

static void test_stderr_cap(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/stderr.log", s_tmp);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    close(fd);
    char *argv[] = {"python3", "-c",
                    "import sys\nl = sys.stdin.readline()\nblock = 'e' * 1023 + '\\n'\n"
                    "for i in range(20 * 1024):\n    sys.stderr.write(block)\n"
                    "sys.stderr.write('the last line\\n')\nsys.stderr.flush()\n"
                    "print('done')\nsys.stdin.readline()\n",
                    NULL};
    rl_child_t *c = s_start(argv);
    char *reply = NULL;
    int rc = s_call(c, "go", 30, 100, &reply);
    char err[sizeof s_err];
    snprintf(err, sizeof err, "%s", s_err);
    rl_child_stop(&c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK_MSG(rc == 0, "flood: %s", err);
    CHECK_STR(reply ? reply : "(null)", "done");
    free(reply);
    size_t n = 0;
    char *log = rl_test_read_file(path, &n);
    size_t most = RL_CHILD_STDERR_CAP + RL_CHILD_STDERR_TAIL + 4096;
    CHECK_MSG(log && n <= most && n > RL_CHILD_STDERR_CAP,
              "20 MiB of stderr made a log of %zu bytes (want at most %zu)", n, most);
    if (log) { // (not CHECK_CONTAINS: it would print megabytes)
        CHECK_MSG(strstr(log, "\nrlctl: warn: " NAME "'s stderr passed 16 MiB: the rest is "
                              "dropped, but for its last 64 KiB"),
                  "the log does not say where it was cut");
        char note[256];
        size_t total = 20u * 1024 * 1024 + strlen("the last line\n");
        snprintf(note, sizeof note, "rlctl: warn: %zu bytes of " NAME "'s stderr were dropped",
                 total - RL_CHILD_STDERR_CAP);
        CHECK_MSG(strstr(log, note), "the log does not say '%s'", note);
        const char *end = "the last line\n";
        CHECK_MSG(n >= strlen(end) && !strcmp(log + n - strlen(end), end),
                  "the log does not end with the program's last line");
    }
    free(log);
}

// ---------------------------------------------------------------------------------------------
// 5. stop

static void test_stop(void) {
    // ignores the end of its stdin (and SIGTERM): the grace, then its group is killed, with the
    // child it started (whose pid is its first line)
    rl_child_t *c = s_sh("trap '' TERM; sleep 1000 & echo $!; wait; sleep 1000");
    pid_t pid = c ? rl_child_pid(c) : 0;
    char *line = NULL;
    size_t len = 0;
    CHECK_INT(c ? rl_child_recv(c, 5, 32, &line, &len, s_err, sizeof s_err) : -1, 0);
    pid_t grandchild = line ? (pid_t)atoi(line) : 0;
    free(line);
    CHECK_MSG(grandchild > 0 && kill(grandchild, 0) == 0, "no grandchild running (%d)",
              (int)grandchild);
    CHECK(c && rl_child_gone(c) == NULL);
    double t0 = rl_clock_now();
    rl_child_stop(&c);
    double took = rl_clock_now() - t0;
    CHECK_MSG(took >= 0.95 && took < 1.8,
              "stopping a program that ignores its stdin took %.2f s, want the %.1f s grace", took,
              RL_CHILD_GRACE_S);
    CHECK(c == NULL);
    CHECK_MSG(pid > 0 && s_gone(pid, 1.0), "the program %d outlived its stop", (int)pid);
    CHECK_MSG(grandchild > 0 && s_gone(grandchild, 1.0), "its child %d outlived the stop",
              (int)grandchild);
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "child");
    RL_TEST_RUN(test_echo);
    RL_TEST_RUN(test_failures);
    RL_TEST_RUN(test_cannot_start);
    RL_TEST_RUN(test_stderr_cap);
    RL_TEST_RUN(test_stop);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

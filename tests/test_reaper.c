// test_reaper — rl_reaper kills what a process started, however it tried to leave: a grandchild
// that called setsid() (out of the process group a worker's killer reaches), ignores SIGTERM
// and whose parent exited, so that it was adopted. Three ends of the reaping process (each in a
// forked runner, since a subreaper and a blocked SIGTERM are for life): rl_reaper_sweep called
// at a normal end; a SIGTERM (the runner then dies of it, as without the reaper); the death of
// its parent (PR_SET_PDEATHSIG). Each checks the grandchild is gone.
#include "rl_err.h"
#include "rl_reaper.h"
#include "rl_test.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Starts a child that starts a grandchild and exits: the grandchild calls setsid(), ignores
// SIGTERM and sleeps. Returns the grandchild's pid (once it runs in its own session), or -1.
static pid_t s_start_escapee(void) {
    int fd[2];
    if (pipe(fd) != 0) {
        return -1;
    }
    pid_t c = fork();
    if (c == 0) {
        pid_t g = fork();
        if (g == 0) {
            setsid();
            signal(SIGTERM, SIG_IGN);
            pid_t me = getpid();
            if (write(fd[1], &me, sizeof me) != (ssize_t)sizeof me) {
                _exit(3);
            }
            for (;;) {
                pause();
            }
        }
        _exit(0);
    }
    close(fd[1]);
    pid_t g = -1;
    if (read(fd[0], &g, sizeof g) != (ssize_t)sizeof g) {
        g = -1;
    }
    close(fd[0]);
    int st;
    waitpid(c, &st, 0); // the grandchild is an orphan now: adopted by the subreaper, if any
    return g;
}

// 1 when pid is gone (not even a zombie of ours) within `s` seconds.
static int s_gone(pid_t pid, double s) {
    for (int i = 0; i < (int)(s * 100); i++) {
        if (kill(pid, 0) != 0 && errno == ESRCH) {
            return 1;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

// Without the reaper a setsid() grandchild outlives everything: the check that would fail.
static void test_without(void) {
    int fd[2];
    RL_ASSERT(pipe(fd) == 0);
    pid_t r = fork();
    if (r == 0) {
        pid_t g = s_start_escapee();
        ssize_t w = write(fd[1], &g, sizeof g);
        _exit(w == (ssize_t)sizeof g ? 0 : 1);
    }
    close(fd[1]);
    pid_t g = -1;
    CHECK(read(fd[0], &g, sizeof g) == (ssize_t)sizeof g && g > 0);
    close(fd[0]);
    int st;
    waitpid(r, &st, 0);
    CHECK_MSG(g > 0 && !s_gone(g, 0.2), "without a reaper the grandchild %d died", (int)g);
    if (g > 0) {
        kill(g, SIGKILL);
    }
}

// The runner becomes a reaper, starts an escapee, sends its pid, then: mode 0 sweeps and exits
// with the number killed; mode 1 waits for a SIGTERM.
static pid_t s_runner(int mode, int fd_out) {
    pid_t r = fork();
    if (r != 0) {
        return r;
    }
    char err[256];
    if (rl_reaper_start(err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        _exit(90);
    }
    pid_t g = s_start_escapee();
    if (write(fd_out, &g, sizeof g) != (ssize_t)sizeof g) {
        _exit(91);
    }
    if (mode == 0) {
        _exit(rl_reaper_sweep(2.0));
    }
    for (;;) {
        pause();
    }
}

static void test_sweep(void) {
    int fd[2];
    RL_ASSERT(pipe(fd) == 0);
    pid_t r = s_runner(0, fd[1]);
    close(fd[1]);
    pid_t g = -1;
    CHECK(read(fd[0], &g, sizeof g) == (ssize_t)sizeof g && g > 0);
    close(fd[0]);
    int st;
    CHECK(waitpid(r, &st, 0) == r);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "the sweep: status %#x (want exit 1: one "
              "process killed)", st);
    CHECK_MSG(g > 0 && s_gone(g, 2.0), "the setsid grandchild %d survived the sweep", (int)g);
}

static void test_sigterm(void) {
    int fd[2];
    RL_ASSERT(pipe(fd) == 0);
    pid_t r = s_runner(1, fd[1]);
    close(fd[1]);
    pid_t g = -1;
    CHECK(read(fd[0], &g, sizeof g) == (ssize_t)sizeof g && g > 0);
    close(fd[0]);
    kill(r, SIGTERM);
    int st;
    CHECK(waitpid(r, &st, 0) == r);
    CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "SIGTERM: status %#x (want killed by "
              "SIGTERM)", st);
    CHECK_MSG(g > 0 && s_gone(g, 2.0), "the setsid grandchild %d survived SIGTERM", (int)g);
}

// The runner's parent dies (as a controller killed with SIGKILL): the runner gets SIGTERM.
static void test_parent_death(void) {
    int fd[2];
    RL_ASSERT(pipe(fd) == 0);
    pid_t m = fork();
    if (m == 0) {
        pid_t r = s_runner(1, fd[1]);
        if (write(fd[1], &r, sizeof r) != (ssize_t)sizeof r) {
            _exit(1);
        }
        struct timespec ts = {0, 100000000}; // the runner has started its escapee by now?
        nanosleep(&ts, NULL);                // no matter: its pid came first on the pipe
        _exit(0);
    }
    close(fd[1]);
    pid_t a = -1, b = -1;
    CHECK(read(fd[0], &a, sizeof a) == (ssize_t)sizeof a);
    CHECK(read(fd[0], &b, sizeof b) == (ssize_t)sizeof b);
    close(fd[0]);
    int st;
    waitpid(m, &st, 0);
    // the pipe carries the grandchild's pid and the runner's, in either order: the runner is
    // the one that is not in a session of its own
    pid_t g = a > 0 && getsid(a) == a ? a : b, r = g == a ? b : a;
    // the runner was adopted by us (a subreaper, see main): it must die of its SIGTERM
    int died = 0;
    for (int i = 0; r > 0 && i < 300 && !died; i++) {
        died = waitpid(r, &st, WNOHANG) == r;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(died && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
              "the runner %d outlived its parent or did not die of SIGTERM (status %#x)", (int)r,
              died ? st : -1);
    CHECK_MSG(g > 0 && s_gone(g, 3.0), "the setsid grandchild %d outlived its reaper's parent",
              (int)g);
}

int main(void) {
    RL_TEST_RUN(test_without);
    RL_TEST_RUN(test_sweep);
    RL_TEST_RUN(test_sigterm);
    // from here on orphans of ours are adopted by this process (the runner whose parent dies),
    // which reaps them: no zombie waits on an init that may not reap
    RL_ASSERT(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    RL_TEST_RUN(test_parent_death);
    RL_TEST_DONE();
}

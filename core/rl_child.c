// rl_child — a program spoken to in lines (see rl_child.h): starting it (fork + exec, its own
// process group, a close-on-exec pipe that reports a failed exec), one request/reply exchange
// under a deadline (poll on both pipes at once), the copy of its stderr, and stopping it.
#include "rl_child.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rl_clock.h"
#include "rl_err.h"

extern char **environ;

#define S_CHUNK 65536 // bytes one read() of the program's stdout asks for

// The copy of the program's stderr into ours (a worker's log), on a thread of its own so that
// the program never blocks on a full pipe between requests: the first RL_CHILD_STDERR_CAP bytes
// as they come, then only the last RL_CHILD_STDERR_TAIL bytes, kept in a ring and written with
// the count of dropped bytes when the pipe closes or the program is stopped.
typedef struct {
    int fd;           // the read end of the program's stderr; -1 when none
    int stop[2];      // a byte written to stop[1] ends the thread (after draining fd)
    pthread_t thread; // valid when `started`
    int started;
    const char *name; // the program, for the notes ("the reward command"); the child's copy
    size_t written, dropped;
    char *tail; // RL_CHILD_STDERR_TAIL bytes, a ring: the newest dropped bytes
    size_t tail_len, tail_pos;
} s_errcopy_t;

struct rl_child {
    pid_t pid;       // the program, leader of its own process group; 0 once reaped
    int to, from;    // its stdin (written), its stdout (read); -1 once closed
    s_errcopy_t err; // its stderr
    char *name;      // "the reward command"
    char *log_name;  // "the reward worker's log"
    char *buf;       // what it wrote that no reply has used yet
    size_t len, cap;
    char *req; // the request line (with its '\n') not yet written: req[sent..req_len)
    size_t req_len, req_cap, sent;
    char gone[512]; // why it was stopped ("" while it runs)
    int gone_rc;    // the code of that failure
};

// ---------------------------------------------------------------------------------------------
// the program's stderr

// write() all of p[0..n) to our stderr; what cannot be written (a closed log) is lost.
static void s_put(const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(2, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

// Takes n bytes the program wrote: into the log below the cap, into the tail ring past it.
static void s_errcopy_take(s_errcopy_t *e, const char *p, size_t n) {
    size_t room = RL_CHILD_STDERR_CAP - e->written;
    size_t now = n < room ? n : room;
    s_put(p, now);
    e->written += now;
    if (now == n) {
        return;
    }
    if (e->dropped == 0) {
        char note[512];
        int k = snprintf(note, sizeof note,
                         "\nrlctl: warn: %s's stderr passed %u MiB: the rest is dropped, but for "
                         "its last %u KiB, written when the command ends\n",
                         e->name, RL_CHILD_STDERR_CAP >> 20, RL_CHILD_STDERR_TAIL >> 10);
        s_put(note, k < (int)sizeof note ? (size_t)k : sizeof note - 1);
    }
    p += now;
    n -= now;
    e->dropped += n;
    if (!e->tail) {
        return; // no memory for the tail: dropped, still counted
    }
    for (size_t i = 0; i < n; i++) { // a ring of the newest TAIL bytes
        e->tail[e->tail_pos] = p[i];
        e->tail_pos = (e->tail_pos + 1) % RL_CHILD_STDERR_TAIL;
    }
    e->tail_len += n;
    if (e->tail_len > RL_CHILD_STDERR_TAIL) {
        e->tail_len = RL_CHILD_STDERR_TAIL;
    }
}

// Writes the count of dropped bytes and the tail (once the program's stderr has ended).
static void s_errcopy_flush(s_errcopy_t *e) {
    if (e->dropped == 0) {
        return;
    }
    char note[512];
    int k = snprintf(note, sizeof note,
                     "\nrlctl: warn: %zu bytes of %s's stderr were dropped (past %u MiB); its "
                     "last %zu bytes:\n",
                     e->dropped, e->name, RL_CHILD_STDERR_CAP >> 20, e->tail_len);
    s_put(note, k < (int)sizeof note ? (size_t)k : sizeof note - 1);
    if (e->tail) {
        size_t start = (e->tail_pos + RL_CHILD_STDERR_TAIL - e->tail_len) % RL_CHILD_STDERR_TAIL;
        size_t first = RL_CHILD_STDERR_TAIL - start;
        first = first < e->tail_len ? first : e->tail_len;
        s_put(e->tail + start, first);
        s_put(e->tail, e->tail_len - first);
    }
    e->dropped = 0;
    e->tail_len = 0;
}

static void *s_errcopy_main(void *arg) {
    s_errcopy_t *e = arg;
    char buf[65536];
    int stopping = 0;
    size_t after_stop = 0; // bytes taken since stop was asked: a writer that never pauses (a
                           // child the program left behind) cannot hold the join forever
    for (;;) {
        struct pollfd pf[2] = {{e->fd, POLLIN, 0}, {e->stop[0], POLLIN, 0}};
        int r = poll(pf, stopping ? 1 : 2, stopping ? 0 : -1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (!stopping && r > 0 && (pf[1].revents & (POLLIN | POLLHUP))) {
            stopping = 1; // rl_child_stop(): drain what is in the pipe now, then end
            continue;
        }
        if (r <= 0) {
            break; // stopping and nothing left
        }
        ssize_t n = read(e->fd, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            if (stopping && errno == EAGAIN) {
                break;
            }
            continue;
        }
        if (n <= 0) {
            break; // the program (and all it started) closed its stderr
        }
        s_errcopy_take(e, buf, (size_t)n);
        if (stopping && (after_stop += (size_t)n) > RL_CHILD_STDERR_TAIL * 16) {
            break;
        }
    }
    s_errcopy_flush(e);
    return NULL;
}

// Starts the copy of the program's stderr from fd (taken over). Returns 0 or an errno; on
// failure the copy is to be stopped (closing fd): the program's stderr is lost rather than the
// program refused.
static int s_errcopy_start(s_errcopy_t *e, int fd) {
    e->fd = fd;
    e->tail = malloc(RL_CHILD_STDERR_TAIL);
    if (pipe(e->stop) != 0) {
        e->stop[0] = e->stop[1] = -1;
        return errno;
    }
    fcntl(e->stop[0], F_SETFD, FD_CLOEXEC);
    fcntl(e->stop[1], F_SETFD, FD_CLOEXEC);
    fcntl(e->fd, F_SETFL, fcntl(e->fd, F_GETFL) | O_NONBLOCK);
    int rc = pthread_create(&e->thread, NULL, s_errcopy_main, e);
    e->started = rc == 0;
    return rc;
}

// Ends the copy: what the pipe holds now is taken, the tail written, the thread joined.
static void s_errcopy_stop(s_errcopy_t *e) {
    if (e->started) {
        char b = 1;
        ssize_t w = write(e->stop[1], &b, 1);
        (void)w;
        pthread_join(e->thread, NULL);
        e->started = 0;
    }
    for (int i = 0; i < 2; i++) {
        if (e->stop[i] >= 0) {
            close(e->stop[i]);
            e->stop[i] = -1;
        }
    }
    if (e->fd >= 0) {
        close(e->fd);
        e->fd = -1;
    }
    free(e->tail);
    e->tail = NULL;
}

// ---------------------------------------------------------------------------------------------
// processes

// "exited with status 3" / "was killed by signal 9 (Killed)"
static void s_describe(int status, char *out, size_t cap) {
    if (WIFEXITED(status)) {
        snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(out, cap, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(out, cap, "stopped");
    }
}

static void s_nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// Waits up to `seconds` for the program to exit, without reaping it (its pid, and so its group
// id, stay taken). Returns 1 when it has exited.
static int s_exited(const rl_child_t *c, double seconds) {
    double t_end = rl_clock_now() + seconds;
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
            return 1; // not our child any more: nothing to wait for
        }
        if (si.si_pid == c->pid) {
            return 1;
        }
        if (rl_clock_now() >= t_end) {
            return 0;
        }
        s_nap_ms(10);
    }
}

// Kills the program's whole group (what it started too) and reaps it; *status gets its exit
// status (-1 when unknown). Kills before reaping, so the group id cannot have been reused.
static void s_kill(rl_child_t *c, int *status) {
    *status = -1;
    if (c->pid <= 0) {
        return;
    }
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
    int st;
    pid_t r;
    while ((r = waitpid(c->pid, &st, 0)) < 0 && errno == EINTR) {
    }
    if (r == c->pid) {
        *status = st;
    }
    c->pid = 0;
}

static void s_close_fds(rl_child_t *c) {
    if (c->to >= 0) {
        close(c->to);
        c->to = -1;
    }
    if (c->from >= 0) {
        close(c->from);
        c->from = -1;
    }
}

// Stops the program (its group killed) and records why, from fmt; returns code with err saying
// it. Every later call fails with that message.
static int s_fail(rl_child_t *c, int code, char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int s_fail(rl_child_t *c, int code, char *err, size_t err_len, const char *fmt, ...) {
    int st;
    s_kill(c, &st);
    s_close_fds(c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->gone, sizeof c->gone, fmt, ap);
    va_end(ap);
    c->len = 0;
    c->req_len = c->sent = 0;
    c->gone_rc = code;
    return rl_errf(err, err_len, code, "%s", c->gone);
}

// The program closed its stdout or stdin: it exited, or will not answer. Gives it
// RL_CHILD_GRACE_S to exit (for its status), then stops it; returns RL_EIO with err saying it.
static int s_lost(rl_child_t *c, const char *when, char *err, size_t err_len) {
    int exited = s_exited(c, RL_CHILD_GRACE_S), st;
    s_kill(c, &st);
    char how[128] = "closed its stdout";
    if (exited && st != -1) {
        s_describe(st, how, sizeof how);
    }
    return s_fail(c, RL_EIO, err, err_len, "the command %s %s (its stderr is in %s)", how, when,
                  c->log_name);
}

// The absolute path `prog` runs as: itself when it holds a '/', else the first executable
// regular file of that name on PATH. Returns 0, or an error code with err filled. caller owns
// *out; free with free().
static int s_resolve(const char *prog, char **out, char *err, size_t err_len) {
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) != 0 || access(prog, X_OK) != 0) {
            int e = errno;
            return rl_errf(err, err_len, e, "cannot run %s: %s", prog, strerror(e));
        }
        if (!S_ISREG(st.st_mode)) {
            return rl_errf(err, err_len, RL_EINVAL, "cannot run %s: not a regular file", prog);
        }
        *out = strdup(prog);
        return *out ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    const char *path = getenv("PATH");
    path = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char *cand = malloc(n + strlen(prog) + 3);
        if (!cand) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        snprintf(cand, n + strlen(prog) + 3, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", prog);
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
            *out = cand;
            return 0;
        }
        free(cand);
        p += n + (p[n] == ':');
    }
    return rl_errf(err, err_len, RL_ENOTFOUND,
                   "cannot run %s: no executable of that name on PATH (%.200s)", prog, path);
}

// The environment the program gets: ours, plus PYTHONUNBUFFERED=1 unless set. caller owns
// result; free with free() (the strings stay borrowed from environ).
static char **s_environment(void) {
    size_t n = 0;
    int has = 0;
    for (char **e = environ; e && *e; e++, n++) {
        has |= !strncmp(*e, "PYTHONUNBUFFERED=", 17);
    }
    char **env = calloc(n + 2, sizeof *env);
    if (!env) {
        return NULL;
    }
    memcpy(env, environ, n * sizeof *env);
    if (!has) {
        env[n] = "PYTHONUNBUFFERED=1";
    }
    return env;
}

// In the child, between fork and exec: only async-signal-safe calls (the parent may have
// threads, whose locks a fork copies held).
static void s_exec(const char *path, char *const *argv, char *const *env, int in, int out,
                   int errfd, int report, pid_t parent) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127); // the parent died before the line above
    }
    // a worker ignores SIGINT and SIGPIPE and may block signals: the program starts clean
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s = 1; s < 32; s++) {
        if (s != SIGKILL && s != SIGSTOP) {
            sigaction(s, &dfl, NULL);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || (errfd >= 0 && dup2(errfd, 2) < 0)) {
        int e = errno;
        ssize_t w = write(report, &e, sizeof e);
        (void)w;
        _exit(127);
    }
    // descriptors the parent did not mark close-on-exec (ours are): not the program's business
    long max = sysconf(_SC_OPEN_MAX);
    max = max > 0 && max < 65536 ? max : 65536;
    for (int fd = 3; fd < max; fd++) {
        if (fd != report) {
            close(fd);
        }
    }
    execve(path, argv, env);
    int e = errno;
    ssize_t w = write(report, &e, sizeof e);
    (void)w;
    _exit(127);
}

// Forks and execs argv into c (c->pid, c->to, c->from, the stderr copy). Returns 0, or an error
// code with err filled (nothing left running).
static int s_spawn(rl_child_t *c, char *const *argv, char *err, size_t err_len) {
    char *path = NULL;
    int rc = s_resolve(argv[0], &path, err, err_len);
    if (rc != 0) {
        return rc;
    }
    char **env = s_environment();
    int in[2] = {-1, -1}, out[2] = {-1, -1}, rep[2] = {-1, -1}, er[2] = {-1, -1};
    rc = RL_ENOMEM;
    if (!env) {
        rl_errf(err, err_len, rc, "out of memory");
        goto done;
    }
    if (pipe(in) != 0 || pipe(out) != 0 || pipe(rep) != 0 || pipe(er) != 0) {
        rc = rl_errf(err, err_len, errno, "cannot run %s: pipe: %s", argv[0], strerror(errno));
        goto done;
    }
    for (int i = 0; i < 2; i++) { // a worker creates processes from one thread
        fcntl(in[i], F_SETFD, FD_CLOEXEC);
        fcntl(out[i], F_SETFD, FD_CLOEXEC);
        fcntl(rep[i], F_SETFD, FD_CLOEXEC);
        fcntl(er[i], F_SETFD, FD_CLOEXEC);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        rc = rl_errf(err, err_len, errno, "cannot run %s: fork: %s", argv[0], strerror(errno));
        goto done;
    }
    if (pid == 0) {
        s_exec(path, argv, env, in[0], out[1], er[1], rep[1], parent);
    }
    setpgid(pid, pid); // also here, so the group exists before any kill(-pid) of ours
    close(rep[1]);
    rep[1] = -1;
    int e = 0;
    ssize_t got;
    while ((got = read(rep[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    c->pid = pid;
    if (got == (ssize_t)sizeof e) { // exec failed: the report pipe did not close on exec
        int st;
        s_kill(c, &st);
        rc = rl_errf(err, err_len, e > 0 ? e : RL_EIO, "cannot run %s: %s", path, strerror(e));
        goto done;
    }
    c->to = in[1];
    c->from = out[0];
    in[1] = out[0] = -1;
    close(er[1]);
    er[1] = -1;
    int ec = s_errcopy_start(&c->err, er[0]);
    er[0] = -1;
    if (ec) { // the program runs on; what it writes to stderr is lost (EPIPE for it)
        s_errcopy_stop(&c->err);
        fprintf(stderr, "rlctl: warn: %s's stderr cannot be copied to this log: %s\n", c->name,
                strerror(ec));
    }
    fcntl(c->to, F_SETFL, fcntl(c->to, F_GETFL) | O_NONBLOCK);
    fcntl(c->from, F_SETFL, fcntl(c->from, F_GETFL) | O_NONBLOCK);
    rc = 0;
done:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) {
            close(in[i]);
        }
        if (out[i] >= 0) {
            close(out[i]);
        }
        if (rep[i] >= 0) {
            close(rep[i]);
        }
        if (er[i] >= 0) {
            close(er[i]);
        }
    }
    free(env);
    free(path);
    return rc;
}

int rl_child_start(char *const *argv, const char *name, const char *log_name, rl_child_t **out,
                   char *err, size_t err_len) {
    RL_ASSERT(argv && argv[0] && name && log_name && out);
    *out = NULL;
    if (!argv[0][0]) {
        return rl_errf(err, err_len, RL_EINVAL, "cannot run an empty program name");
    }
    rl_child_t *c = calloc(1, sizeof *c);
    if (!c) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c->to = c->from = -1;
    c->err.fd = c->err.stop[0] = c->err.stop[1] = -1;
    c->name = strdup(name);
    c->log_name = strdup(log_name);
    c->err.name = c->name;
    int rc = c->name && c->log_name ? s_spawn(c, argv, err, err_len)
                                    : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    if (rc != 0) {
        rl_child_stop(&c);
        return rc;
    }
    *out = c;
    return 0;
}

void rl_child_stop(rl_child_t **cp) {
    rl_child_t *c = cp ? *cp : NULL;
    if (!c) {
        return;
    }
    if (c->to >= 0) { // end of input: a program reading lines exits on its own
        close(c->to);
        c->to = -1;
    }
    if (c->pid > 0) {
        s_exited(c, RL_CHILD_GRACE_S);
    }
    int st;
    s_kill(c, &st);
    s_close_fds(c);
    s_errcopy_stop(&c->err);
    free(c->name);
    free(c->log_name);
    free(c->buf);
    free(c->req);
    free(c);
    *cp = NULL;
}

// ---------------------------------------------------------------------------------------------
// lines

// Writes p[0..n) to the program with SIGPIPE held back: a program that exited gives EPIPE here,
// not a signal that kills the process (rlctl itself, for the check before a run, does not
// ignore it). A SIGPIPE this write raised is taken back off the thread's pending set.
static ssize_t s_write(int fd, const char *p, size_t n) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t w = write(fd, p, n);
    int e = errno;
    if (w < 0 && e == EPIPE && !sigismember(&old, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

// Writes what the program's stdin takes now of the request. Returns 0, or 1 when the program
// closed its stdin (EPIPE) or the write failed otherwise.
static int s_write_some(rl_child_t *c) {
    while (c->sent < c->req_len) {
        ssize_t w = s_write(c->to, c->req + c->sent, c->req_len - c->sent);
        if (w > 0) {
            c->sent += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            return w < 0 && errno == EAGAIN ? 0 : 1;
        }
    }
    return 0;
}

// Reads what the program wrote into c->buf, growing it up to `most` bytes. Returns bytes read
// (0: end of its stdout), or -1 (EAGAIN: nothing now; ENOMEM; another errno: broken), or -2 when
// c->buf holds `most` bytes already.
static ssize_t s_read(rl_child_t *c, size_t most) {
    if (c->len >= most) {
        return -2;
    }
    size_t want = most - c->len < S_CHUNK ? most - c->len : S_CHUNK;
    if (c->len + want + 1 > c->cap) { // doubling, but never past what `most` needs
        size_t cap = c->cap ? c->cap * 2 : 2 * S_CHUNK;
        cap = cap < most ? cap : most;
        cap = cap < c->len + want + 1 ? c->len + want + 1 : cap;
        char *b = realloc(c->buf, cap);
        if (!b) {
            errno = ENOMEM;
            return -1;
        }
        c->buf = b;
        c->cap = cap;
    }
    ssize_t r;
    while ((r = read(c->from, c->buf + c->len, want)) < 0 && errno == EINTR) {
    }
    if (r > 0) {
        c->len += (size_t)r;
    }
    return r;
}

// The start of what the program wrote, quoted for a message.
static void s_quote(const char *t, size_t len, char *out, size_t cap) {
    size_t o = 0, i = 0;
    for (; i < len && i < 100 && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    if (i < len && o + 4 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

const char *rl_child_gone(const rl_child_t *c) {
    return c->gone[0] ? c->gone : NULL;
}

int rl_child_pid(const rl_child_t *c) {
    return (int)c->pid;
}

int rl_child_send(rl_child_t *c, const char *line, size_t len, char *err, size_t err_len) {
    if (c->gone[0]) {
        return rl_errf(err, err_len, c->gone_rc, "%s", c->gone);
    }
    if (memchr(line, '\n', len)) {
        return rl_errf(err, err_len, RL_EINVAL, "a request line holds a newline");
    }
    // anything it wrote since the last reply is out of step with the requests
    ssize_t r = s_read(c, c->len + S_CHUNK);
    if (r == 0) {
        return s_lost(c, "before this request", err, err_len);
    }
    if (c->len > 0) {
        char q[512];
        s_quote(c->buf, c->len - (c->buf[c->len - 1] == '\n'), q, sizeof q);
        return s_fail(c, RL_EPROTO, err, err_len,
                      "the command wrote '%s' when no request was waiting (one reply line per "
                      "request line; log to stderr)",
                      q);
    }
    size_t need = c->req_len + len + 1;
    if (need > c->req_cap) {
        char *q = realloc(c->req, need);
        if (!q) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        c->req = q;
        c->req_cap = need;
    }
    memcpy(c->req + c->req_len, line, len);
    c->req[c->req_len + len] = '\n';
    c->req_len = need;
    if (s_write_some(c) != 0) {
        return s_lost(c, "before it read the whole request", err, err_len);
    }
    return 0;
}

int rl_child_recv(rl_child_t *c, double deadline_s, size_t max_len, char **reply, size_t *len,
                  char *err, size_t err_len) {
    *reply = NULL;
    *len = 0;
    if (c->gone[0]) {
        return rl_errf(err, err_len, c->gone_rc, "%s", c->gone);
    }
    double t_end = deadline_s > 0 && isfinite(deadline_s) ? rl_clock_now() + deadline_s : INFINITY;
    size_t most = max_len < SIZE_MAX ? max_len + 1 : SIZE_MAX; // a line and its '\n'
    char *nl = memchr(c->buf ? c->buf : "", '\n', c->len);
    while (!nl) {
        if (c->len >= most) {
            return s_fail(c, RL_EPROTO, err, err_len,
                          "the command's reply line is longer than %zu bytes", max_len);
        }
        double left = t_end - rl_clock_now();
        if (left <= 0) {
            return s_fail(c, RL_ETIMEOUT, err, err_len,
                          "the command gave no reply within %g s and was stopped", deadline_s);
        }
        struct pollfd pf[2] = {{c->from, POLLIN, 0},
                               {c->sent < c->req_len ? c->to : -1, POLLOUT, 0}};
        int ms = isinf(left) ? -1 : (int)fmin(ceil(left * 1000), 1e9);
        int pr = poll(pf, 2, ms);
        if (pr < 0 && errno != EINTR) {
            return s_fail(c, errno, err, err_len, "poll: %s", strerror(errno));
        }
        if (pr <= 0) {
            continue;
        }
        if ((pf[1].revents & (POLLOUT | POLLERR | POLLHUP)) && s_write_some(c) != 0) {
            return s_lost(c, "before it read the whole request", err, err_len);
        }
        if (pf[0].revents & (POLLIN | POLLERR | POLLHUP)) {
            size_t from = c->len;
            ssize_t r = s_read(c, most);
            if (r == 0) {
                return s_lost(c, "before it replied", err, err_len);
            }
            if (r < 0 && errno != EAGAIN) {
                int e = errno;
                return s_fail(c, e, err, err_len, "reading the command's reply: %s", strerror(e));
            }
            if (r > 0) {
                nl = memchr(c->buf + from, '\n', c->len - from);
            }
        }
    }
    size_t n = (size_t)(nl - c->buf);
    if (n > max_len) {
        return s_fail(c, RL_EPROTO, err, err_len,
                      "the command's reply line is longer than %zu bytes", max_len);
    }
    if (c->sent < c->req_len) {
        char q[512];
        s_quote(c->buf, n, q, sizeof q);
        return s_fail(c, RL_EPROTO, err, err_len,
                      "the command replied '%s' before it read the whole request (read a whole "
                      "line, then reply)",
                      q);
    }
    char *line = malloc(n + 1);
    if (!line) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    memcpy(line, c->buf, n);
    line[n] = '\0';
    memmove(c->buf, c->buf + n + 1, c->len - n - 1); // what follows the line waits
    c->len -= n + 1;
    c->req_len = c->sent = 0;
    *reply = line;
    *len = n;
    return 0;
}

int rl_child_call(rl_child_t *c, const char *line, size_t len, double deadline_s, size_t max_len,
                  char **reply, size_t *reply_len, char *err, size_t err_len) {
    *reply = NULL;
    *reply_len = 0;
    int rc = rl_child_send(c, line, len, err, err_len);
    return rc ? rc : rl_child_recv(c, deadline_s, max_len, reply, reply_len, err, err_len);
}

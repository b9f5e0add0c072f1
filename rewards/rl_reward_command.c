// rl_reward_command — a program scoring over JSON lines: starting it (fork + exec, its own
// process group, a close-on-exec pipe that reports a failed exec), one request/reply exchange
// per batch under a deadline (poll on both pipes at once, so neither side can block the other
// however long the lines are), and stopping it. Everything the program writes is untrusted:
// lines are capped, decoded by rl_reward_json, and anything but one line per request is
// reported, with the start of what it wrote.
#include "rl_reward_command.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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
#include "rl_reward_json.h"

extern char **environ;

#define S_GRACE 1.0 // seconds a program gets to exit after its stdin closes

// The copy of the program's stderr into ours (the reward worker's log), on a thread of its own
// so that the program never blocks on a full pipe between batches: the first
// RL_REWARD_COMMAND_STDERR_CAP bytes as they come, then only the last
// RL_REWARD_COMMAND_STDERR_TAIL bytes, kept in a ring and written with the count of dropped
// bytes when the pipe closes or the reward is destroyed.
typedef struct {
    int fd;           // the read end of the program's stderr; -1 when none
    int stop[2];      // a byte written to stop[1] ends the thread (after draining fd)
    pthread_t thread; // valid when `started`
    int started;
    size_t written, dropped;
    char *tail; // RL_REWARD_COMMAND_STDERR_TAIL bytes, a ring: the newest dropped bytes
    size_t tail_len, tail_pos;
} s_errcopy_t;

typedef struct {
    pid_t pid;    // the program, leader of its own process group; 0 once reaped
    int to, from; // its stdin (written), its stdout (read); -1 once closed
    s_errcopy_t err; // its stderr
    double limit; // seconds one score() may wait for the reply; 0 = no limit
    char *prog;   // argv[0] as the recipe wrote it, for messages
    char *buf;    // what it wrote that no reply has used yet
    size_t len, cap;
    char gone[384]; // why it cannot score any more ("" while it can)
} s_cmd_t;

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
    size_t room = RL_REWARD_COMMAND_STDERR_CAP - e->written;
    size_t now = n < room ? n : room;
    s_put(p, now);
    e->written += now;
    if (now == n) {
        return;
    }
    if (e->dropped == 0) {
        char note[256];
        int k = snprintf(note, sizeof note,
                         "\nrlctl: warn: the reward command's stderr passed %u MiB: the rest is "
                         "dropped, but for its last %u KiB, written when the command ends\n",
                         RL_REWARD_COMMAND_STDERR_CAP >> 20, RL_REWARD_COMMAND_STDERR_TAIL >> 10);
        s_put(note, (size_t)k);
    }
    p += now;
    n -= now;
    e->dropped += n;
    if (!e->tail) {
        return; // no memory for the tail: dropped, still counted
    }
    for (size_t i = 0; i < n; i++) { // a ring of the newest TAIL bytes
        e->tail[e->tail_pos] = p[i];
        e->tail_pos = (e->tail_pos + 1) % RL_REWARD_COMMAND_STDERR_TAIL;
    }
    e->tail_len += n;
    if (e->tail_len > RL_REWARD_COMMAND_STDERR_TAIL) {
        e->tail_len = RL_REWARD_COMMAND_STDERR_TAIL;
    }
}

// Writes the count of dropped bytes and the tail (once the program's stderr has ended).
static void s_errcopy_flush(s_errcopy_t *e) {
    if (e->dropped == 0) {
        return;
    }
    char note[256];
    int k = snprintf(note, sizeof note,
                     "\nrlctl: warn: %zu bytes of the reward command's stderr were dropped (past "
                     "%u MiB); its last %zu bytes:\n",
                     e->dropped, RL_REWARD_COMMAND_STDERR_CAP >> 20, e->tail_len);
    s_put(note, (size_t)k);
    if (e->tail) {
        size_t start = (e->tail_pos + RL_REWARD_COMMAND_STDERR_TAIL - e->tail_len) %
                       RL_REWARD_COMMAND_STDERR_TAIL;
        size_t first = RL_REWARD_COMMAND_STDERR_TAIL - start;
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
    size_t after_stop = 0; // bytes taken since destroy() asked: a writer that never pauses (a
                           // child the program left behind) cannot hold the join forever
    for (;;) {
        struct pollfd pf[2] = {{e->fd, POLLIN, 0}, {e->stop[0], POLLIN, 0}};
        int r = poll(pf, stopping ? 1 : 2, stopping ? 0 : -1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (!stopping && r > 0 && (pf[1].revents & (POLLIN | POLLHUP))) {
            stopping = 1; // destroy(): drain what is in the pipe now, then end
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
        if (stopping && (after_stop += (size_t)n) > RL_REWARD_COMMAND_STDERR_TAIL * 16) {
            break;
        }
    }
    s_errcopy_flush(e);
    return NULL;
}

// Starts the copy of the program's stderr from fd (taken over). Returns 0 or an errno; on
// failure fd is closed and the program's stderr is lost rather than the reward refused.
static int s_errcopy_start(s_errcopy_t *e, int fd) {
    e->fd = fd;
    e->tail = malloc(RL_REWARD_COMMAND_STDERR_TAIL);
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
static int s_exited(const s_cmd_t *c, double seconds) {
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
static void s_stop(s_cmd_t *c, int *status) {
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

static void s_close_fds(s_cmd_t *c) {
    if (c->to >= 0) {
        close(c->to);
        c->to = -1;
    }
    if (c->from >= 0) {
        close(c->from);
        c->from = -1;
    }
}

// The program closed its stdout or stdin: it exited, or will not answer. Reaps it (a second's
// wait for its exit) and records why it is gone; returns RL_EPLUGIN with err saying it.
static int s_lost(s_cmd_t *c, const char *when, char *err, size_t err_len) {
    int exited = s_exited(c, S_GRACE), st;
    s_stop(c, &st);
    s_close_fds(c);
    char how[128] = "closed its stdout";
    if (exited && st != -1) {
        s_describe(st, how, sizeof how);
    }
    snprintf(c->gone, sizeof c->gone,
             "the command %s %s (its stderr is in the reward worker's log)", how, when);
    snprintf(err, err_len, "%s", c->gone);
    return 1;
}

// The absolute path `prog` runs as: itself when it holds a '/', else the first executable
// regular file of that name on PATH. Returns 0, or 1 with err filled. caller owns *out; free
// with free().
static int s_resolve(const char *prog, char **out, char *err, size_t err_len) {
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) != 0 || access(prog, X_OK) != 0) {
            snprintf(err, err_len, "cannot run %s: %s", prog, strerror(errno));
            return 1;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(err, err_len, "cannot run %s: not a regular file", prog);
            return 1;
        }
        *out = strdup(prog);
        return *out ? 0 : (snprintf(err, err_len, "out of memory"), 1);
    }
    const char *path = getenv("PATH");
    path = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char *cand = malloc(n + strlen(prog) + 3);
        if (!cand) {
            snprintf(err, err_len, "out of memory");
            return 1;
        }
        snprintf(cand, n + strlen(prog) + 3, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", prog);
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
            *out = cand;
            return 0;
        }
        free(cand);
        p += n + (p[n] == ':');
    }
    snprintf(err, err_len, "cannot run %s: no executable of that name on PATH (%.200s)", prog,
             path);
    return 1;
}

// The environment the program gets: ours, plus PYTHONUNBUFFERED=1 unless set (a Python program
// that forgets to flush stdout would leave its reply in a buffer and hang the batch). caller
// owns result; free with free() (the strings stay borrowed from environ).
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
static void s_child(const char *path, char *const *argv, char *const *env, int in, int out,
                    int errfd, int report, pid_t parent) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127); // the parent died before the line above
    }
    // the worker ignores SIGINT and SIGPIPE and may block signals: the program starts clean
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

// Starts argv (argc items, argv[0] searched on PATH when it has no '/'); fills c->pid, c->to,
// c->from. Returns 0, or 1 with err filled (nothing left running).
static int s_start(s_cmd_t *c, char **argv, char *err, size_t err_len) {
    char *path = NULL;
    if (s_resolve(argv[0], &path, err, err_len) != 0) {
        return 1;
    }
    char **env = s_environment();
    int in[2] = {-1, -1}, out[2] = {-1, -1}, rep[2] = {-1, -1}, er[2] = {-1, -1};
    int rc = 1;
    if (!env) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    if (pipe(in) != 0 || pipe(out) != 0 || pipe(rep) != 0 || pipe(er) != 0) {
        snprintf(err, err_len, "pipe: %s", strerror(errno));
        goto done;
    }
    for (int i = 0; i < 2; i++) { // the worker creates processes from one thread
        fcntl(in[i], F_SETFD, FD_CLOEXEC);
        fcntl(out[i], F_SETFD, FD_CLOEXEC);
        fcntl(rep[i], F_SETFD, FD_CLOEXEC);
        fcntl(er[i], F_SETFD, FD_CLOEXEC);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, err_len, "cannot run %s: fork: %s", argv[0], strerror(errno));
        goto done;
    }
    if (pid == 0) {
        s_child(path, argv, env, in[0], out[1], er[1], rep[1], parent);
    }
    setpgid(pid, pid); // also here, so the group exists before any kill(-pid) of ours
    close(rep[1]);
    rep[1] = -1;
    int e = 0;
    ssize_t got;
    while ((got = read(rep[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    if (got == (ssize_t)sizeof e) { // exec failed: the report pipe did not close on exec
        c->pid = pid;
        int st;
        s_stop(c, &st);
        snprintf(err, err_len, "cannot run %s: %s", path, strerror(e));
        goto done;
    }
    c->pid = pid;
    c->to = in[1];
    c->from = out[0];
    in[1] = out[0] = -1;
    close(er[1]);
    er[1] = -1;
    int ec = s_errcopy_start(&c->err, er[0]);
    er[0] = -1;
    if (ec) { // the program runs on; what it writes to stderr is lost (EPIPE for it)
        s_errcopy_stop(&c->err);
        fprintf(stderr, "rlctl: warn: the reward command's stderr cannot be copied to this log: "
                        "%s\n", strerror(ec));
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

// ---------------------------------------------------------------------------------------------
// the table

static void s_cmd_destroy(void *state) {
    s_cmd_t *c = state;
    if (!c) {
        return;
    }
    if (c->to >= 0) { // end of input: a program reading lines exits on its own
        close(c->to);
        c->to = -1;
    }
    if (c->pid > 0) {
        s_exited(c, S_GRACE);
    }
    int st;
    s_stop(c, &st);
    s_close_fds(c);
    s_errcopy_stop(&c->err);
    free(c->prog);
    free(c->buf);
    free(c);
}

static int s_cmd_create(const rl_reward_host_t *host, const char *config_json, void **state,
                        char *err, size_t err_len) {
    (void)host;
    json_error_t je;
    json_t *cfg = json_loads(config_json ? config_json : "{}", 0, &je);
    json_t *av = cfg ? json_object_get(cfg, "argv") : NULL;
    json_t *dl = cfg ? json_object_get(cfg, "deadline") : NULL;
    size_t argc = json_array_size(av);
    int ok = json_is_object(cfg) && json_is_array(av) && argc > 0 && (!dl || json_is_number(dl));
    for (size_t i = 0; ok && i < argc; i++) {
        ok = json_is_string(json_array_get(av, i)) &&
             strlen(json_string_value(json_array_get(av, i))) ==
                 json_string_length(json_array_get(av, i));
    }
    ok = ok && json_string_length(json_array_get(av, 0)) > 0;
    if (!ok) {
        json_decref(cfg);
        snprintf(err, err_len, "config: expected {\"argv\": [program, args...], \"deadline\": s}");
        return 1;
    }
    s_cmd_t *c = calloc(1, sizeof *c);
    char **argv = calloc(argc + 1, sizeof *argv);
    int rc = 1;
    if (!c || !argv) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    c->to = c->from = -1;
    c->err.fd = c->err.stop[0] = c->err.stop[1] = -1;
    c->limit = dl ? json_number_value(dl) : 0;
    c->limit = isfinite(c->limit) && c->limit > 0 ? c->limit : 0;
    for (size_t i = 0; i < argc; i++) {
        argv[i] = (char *)json_string_value(json_array_get(av, i));
    }
    if (!(c->prog = strdup(argv[0]))) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    rc = s_start(c, argv, err, err_len);
done:
    free(argv);
    json_decref(cfg);
    if (rc) {
        s_cmd_destroy(c);
        return 1;
    }
    *state = c;
    return 0;
}

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

// Reads what the program wrote into c->buf. Returns bytes read (0: end of its stdout), or -1
// (EAGAIN: nothing now; another errno: broken), or -2 when the buffer would pass the cap.
static ssize_t s_read(s_cmd_t *c) {
    if (c->len + 65536 + 1 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 65536 * 2;
        if (cap > RL_REWARD_JSON_MAX_REPLY + 65536 + 1) {
            cap = RL_REWARD_JSON_MAX_REPLY + 65536 + 1;
        }
        if (c->len + 65536 + 1 > cap) {
            return -2;
        }
        char *b = realloc(c->buf, cap);
        if (!b) {
            errno = ENOMEM;
            return -1;
        }
        c->buf = b;
        c->cap = cap;
    }
    ssize_t r;
    while ((r = read(c->from, c->buf + c->len, 65536)) < 0 && errno == EINTR) {
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

static int s_cmd_score(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                       size_t err_len) {
    s_cmd_t *c = state;
    char q[512];
    if (c->gone[0]) {
        snprintf(err, err_len, "%s", c->gone);
        return 1;
    }
    // anything it wrote since the last reply is out of step with the requests
    ssize_t r = s_read(c);
    if (r == 0) {
        return s_lost(c, "before this batch", err, err_len);
    }
    if (c->len > 0) {
        s_quote(c->buf, c->len - (c->buf[c->len - 1] == '\n'), q, sizeof q);
        snprintf(err, err_len,
                 "the command wrote '%s' when no request was waiting (one reply line per request "
                 "line; log to stderr)",
                 q);
        c->len = 0;
        return 1;
    }
    char *req = NULL;
    size_t req_len = 0;
    if (rl_reward_json_request(items, n, RL_REWARD_JSON_RLCTL, NULL, &req, &req_len, err,
                               err_len) != 0) {
        return 1;
    }
    req[req_len++] = '\n'; // json_dumps' terminating NUL becomes the line's end
    double t_end = c->limit > 0 ? rl_clock_now() + c->limit : INFINITY;
    size_t sent = 0, nl = 0;
    int rc = 0, have_line = 0;
    while (!rc && !have_line) {
        struct pollfd pf[2] = {{c->from, POLLIN, 0}, {sent < req_len ? c->to : -1, POLLOUT, 0}};
        double left = t_end - rl_clock_now();
        if (left <= 0) {
            int st;
            s_stop(c, &st);
            s_close_fds(c);
            snprintf(c->gone, sizeof c->gone,
                     "the command gave no reply within %g s (the reward's deadline, just under "
                     "roles.reward_timeout) and was stopped",
                     c->limit);
            rc = 1;
            snprintf(err, err_len, "%s", c->gone);
            break;
        }
        int ms = isinf(left) ? -1 : (int)fmin(ceil(left * 1000), 1e9);
        int pr = poll(pf, 2, ms);
        if (pr < 0 && errno != EINTR) {
            rc = 1;
            snprintf(err, err_len, "poll: %s", strerror(errno));
        }
        if (pr <= 0) {
            continue;
        }
        if (pf[1].revents & (POLLOUT | POLLERR | POLLHUP)) {
            ssize_t w = s_write(c->to, req + sent, req_len - sent);
            if (w > 0) {
                sent += (size_t)w;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                rc = s_lost(c, "before it read the whole request", err, err_len);
                break;
            }
        }
        if (pf[0].revents & (POLLIN | POLLERR | POLLHUP)) {
            size_t from = c->len;
            r = s_read(c);
            if (r == 0) {
                rc = s_lost(c, "before it replied", err, err_len);
                break;
            }
            if (r == -2) {
                rc = 1;
                snprintf(err, err_len, "the command's reply line is longer than %zu bytes",
                         RL_REWARD_JSON_MAX_REPLY);
                c->len = 0;
                break;
            }
            char *p = r > 0 ? memchr(c->buf + from, '\n', c->len - from) : NULL;
            if (p) {
                nl = (size_t)(p - c->buf);
                have_line = 1;
            }
        }
    }
    free(req);
    if (rc) {
        return rc;
    }
    if (sent < req_len) {
        s_quote(c->buf, nl, q, sizeof q);
        snprintf(err, err_len,
                 "the command replied '%s' before it read the whole request (read a whole line, "
                 "then reply)",
                 q);
        c->len = 0;
        return 1;
    }
    char perr[1024];
    int dr = rl_reward_json_reply(c->buf, nl, RL_REWARD_JSON_RLCTL, n, out, perr, sizeof perr);
    memmove(c->buf, c->buf + nl + 1, c->len - nl - 1); // what follows the line waits
    c->len -= nl + 1;
    if (dr == RL_EPLUGIN) {
        snprintf(err, err_len, "the command replied with an error: %s", perr);
        return 1;
    }
    if (dr != 0) {
        snprintf(err, err_len, "a bad reply from the command: %s", perr);
        return 1;
    }
    return 0;
}

static const rl_reward_table_t s_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "command",
    .create = s_cmd_create,
    .score = s_cmd_score,
    .destroy = s_cmd_destroy,
};

const rl_reward_table_t *rl_reward_command_table(void) {
    return &s_table;
}

// rl_group — worker processes and request/reply with timeouts (see rl_group.h).
#include "rl_group.h"
#include "rl_clock.h"

#include "rl_chan.h"
#include "rl_curve.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_proto.h"
#include "rl_role.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define S_MAX_WORKERS 512
#define S_MISSED_BEATS 10
#define S_SECRET_FD 3      // the worker reads its secret from this descriptor
#define S_DROP_LOGGED 10   // foreign messages logged one by one; after that, every 1000th
#define S_MAX_PENDING 1024 // requests in flight at once

typedef struct {
    char name[64];     // "sampler/1"
    char rid[96];      // routing identity "sampler/1~<16 hex>": unguessable, given on fd 3
    char log[4400];
    pid_t pid;
    int ready;         // said hello
    int alive;         // not yet reaped
    int status;        // waitpid status once reaped
    double last_beat;  // monotonic seconds of the last message or heartbeat
    char error[1024];  // setup error from its hello (a remote: from its attach)
    // a remote sampler (rl_group_connect): no process of ours, its own CURVE connection
    int remote;
    rl_chan_t *chan; // our DEALER to it
    char endpoint[300];
    int up; // a CURVE handshake succeeded
    int failed_handshakes;
    uint64_t attach_id;
    char lost[600]; // why it is gone ("" while it is not)
    char host[128]; // from its attach reply
    int needs_model; // its attach reply asked for the run's model folder
    // a rank of a mesh (rl_group_spawn_mesh): started by the launcher, not by us; its pid is
    // learned from its first message (a child of the launcher), 0 until then
    int mesh; // 1 + the index of its launcher in rl_group.launch, 0: not a rank
    int mesh_rank;
    int far; // a rank that speaks over the mesh's tcp socket (maybe on another host): admitted
             // by its CURVE key; its pid (from its hello) names it, never a process to kill
    int reaps; // its role kills what it started on SIGTERM (rl_role_t.reaps): asked first
} s_worker_t;

// The MPI launcher of a mesh's ranks (rl_group_spawn_mesh).
typedef struct {
    pid_t pid;
    int alive, status;
    char role[32];
    int dp, fsdp, first; // its ranks are w[first .. first + dp·fsdp)
    char log[4400];      // the launcher's own output
    char secret[300];    // the ranks' secret file ("" once removed)
    char died[700];      // how the rank that failed first died, once known
    int died_rank;       // that rank (-1: the launcher itself, or unknown)
    int far;             // its ranks speak over rl_group.mesh_chan (a hostfile)
    int termed;          // SIGTERM sent (once: a second one makes mpirun abort at once)
} s_launch_t;

// A request sent and not collected yet (rl_group_post / rl_group_collect): its reply when it
// came, or why it failed.
typedef struct {
    int used;
    s_worker_t *w;
    uint64_t id;
    double t_sent;
    double t_done;          // > 0: answered or failed
    rl_msg_t *reply;        // an ok reply
    char why[RL_GROUP_WHY]; // "" unless it failed
} s_pending_t;

struct rl_group {
    rl_chan_t *chan;
    char endpoint[300];
    char sock_dir[200];  // the 0700 folder of the ipc socket ("" once removed)
    char sock_path[256];
    char token[65];      // the run's secret: 32 random bytes in hex
    char session[65];    // remote samplers' session token (never the local workers' secret)
    char log_dir[4096];
    double heartbeat;
    int64_t max_frame;
    int (*cancel)(void *ctx);
    void *cancel_ctx;
    uint64_t dropped;
    s_worker_t w[S_MAX_WORKERS];
    int n;
    uint64_t next_id;
    double last_check;  // monotonic time of the last heartbeat check
    s_pending_t pend[S_MAX_PENDING]; // requests sent and not yet collected
    s_launch_t launch[8];            // mesh launchers
    int n_launch;
    rl_chan_t *mesh_chan; // the CURVE ROUTER of ranks across hosts (NULL: none)
    rl_chan_t *last_via;  // the ROUTER the last message came in on (s_recv_any)
};

// The worker named `name` ("sampler/1"), or NULL.
static const s_worker_t *s_find_c(const rl_group_t *g, const char *name) {
    for (int i = 0; i < g->n; i++) {
        if (strcmp(g->w[i].name, name) == 0) {
            return &g->w[i];
        }
    }
    return NULL;
}

static s_worker_t *s_find(rl_group_t *g, const char *name) {
    return (s_worker_t *)s_find_c(g, name);
}

// The worker whose routing identity is `rid` or `rid#hb` (*hb set to which), or NULL.
static s_worker_t *s_find_rid(rl_group_t *g, const char *rid, int *hb) {
    size_t n = strlen(rid);
    *hb = n > 3 && strcmp(rid + n - 3, "#hb") == 0;
    if (*hb) {
        n -= 3;
    }
    for (int i = 0; i < g->n; i++) {
        if (strlen(g->w[i].rid) == n && memcmp(g->w[i].rid, rid, n) == 0) {
            return &g->w[i];
        }
    }
    return NULL;
}

pid_t rl_group_pid(const rl_group_t *self, const char *peer) {
    const s_worker_t *w = s_find_c(self, peer);
    return w && !w->remote ? w->pid : -1;
}

const char *rl_group_host(const rl_group_t *self, const char *peer) {
    const s_worker_t *w = s_find_c(self, peer);
    return w && w->host[0] ? w->host : NULL;
}

// The ROUTER a worker's messages travel on: the mesh's tcp one for a rank across hosts.
static rl_chan_t *s_router(const rl_group_t *g, const s_worker_t *w) {
    return w->far ? g->mesh_chan : g->chan;
}

// "exited with status 3" / "was killed by signal 11 (Segmentation fault)"
static void s_describe_exit(int status, char *buf, size_t cap) {
    if (WIFEXITED(status)) {
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(buf, cap, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(buf, cap, "stopped");
    }
}

// Kills what is left of a worker's process group (the worker is its leader: processes a plugin
// started live in it). The group's id cannot be reused while any member lives.
static void s_kill_group(s_worker_t *w) {
    if (w->pid > 0 && !w->remote && !w->far) {
        kill(-w->pid, SIGKILL);
    }
}

// What the launcher's log says about the rank that failed first: Open MPI writes "process rank
// R with PID P on node N exited on signal S" or "Process name: [[J,1],R]" and "Exit code: C".
// Fills L->died; returns the rank, or -1 when the log does not say.
static int s_launch_died(s_launch_t *L) {
    FILE *f = fopen(L->log, "re");
    char line[1024];
    int rank = -1, code = -1, sig = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *p;
        int r, pid, s;
        if ((p = strstr(line, "process rank ")) &&
            sscanf(p, "process rank %d with PID %d on node %*s exited on signal %d", &r, &pid,
                   &s) == 3 &&
            rank < 0) {
            rank = r;
            sig = s;
        } else if ((p = strstr(line, "Process name: [[")) && rank < 0 &&
                   sscanf(p, "Process name: [[%*d,%*d],%d]", &r) == 1) {
            rank = r;
        } else if ((p = strstr(line, "Exit code:")) && code < 0) {
            sscanf(p, "Exit code: %d", &code);
        }
    }
    if (f) {
        fclose(f);
    }
    if (rank >= 0 && sig > 0) {
        snprintf(L->died, sizeof L->died, "was killed by signal %d (%s)", sig, strsignal(sig));
    } else if (rank >= 0) {
        snprintf(L->died, sizeof L->died, "exited with status %d", code);
    }
    L->died_rank = rank;
    return rank;
}

// A launcher that exited: every rank it started is gone with it; *dead (NULL so far) gets the
// rank that failed first (the launcher's log), else the first rank.
static void s_reap_launch(rl_group_t *g, s_launch_t *L, int st, s_worker_t **dead) {
    L->alive = 0;
    L->status = st;
    int n = L->dp * L->fsdp, first = s_launch_died(L);
    if (!L->died[0] || first < 0 || first >= n) {
        char how[128];
        s_describe_exit(st, how, sizeof how);
        snprintf(L->died, sizeof L->died, "its MPI launcher (pid %d) %s", (int)L->pid, how);
        L->died_rank = -1;
    }
    for (int r = 0; r < n; r++) {
        s_worker_t *w = &g->w[L->first + r];
        if (w->alive) {
            w->alive = 0;
            w->status = st;
            if (w->pid > 0 && !w->far) {
                kill(-w->pid, SIGKILL); // its own process group: a plugin's children too
            }
        }
    }
    if (!*dead) {
        *dead = &g->w[L->first + (first >= 0 && first < n ? first : 0)];
    }
}

// Reaps exited workers; returns the first newly dead one (or NULL).
static s_worker_t *s_reap(rl_group_t *g) {
    s_worker_t *dead = NULL;
    for (int i = 0; i < g->n_launch; i++) {
        int st;
        if (g->launch[i].alive && waitpid(g->launch[i].pid, &st, WNOHANG) == g->launch[i].pid) {
            s_reap_launch(g, &g->launch[i], st, &dead);
        }
    }
    for (int i = 0; i < g->n; i++) {
        s_worker_t *w = &g->w[i];
        if (!w->alive || w->remote || w->mesh) {
            continue;
        }
        int st;
        pid_t r = waitpid(w->pid, &st, WNOHANG);
        if (r == w->pid) {
            w->alive = 0;
            w->status = st;
            s_kill_group(w);
            if (!dead) {
                dead = w;
            }
        }
    }
    return dead;
}

static int s_dead_error(const rl_group_t *g, const s_worker_t *w, char *err, size_t err_len) {
    if (w->mesh) { // the rank that failed first, whichever rank the caller watched
        const s_launch_t *L = &g->launch[w->mesh - 1];
        const s_worker_t *d = L->died_rank >= 0 ? &g->w[L->first + L->died_rank] : w;
        if (L->died_rank < 0) {
            return rl_errf(err, err_len, RL_EIO,
                           "the %s mesh (dp %d x fsdp %d) is gone: %s; logs: %s, %s/%s-*.log",
                           L->role, L->dp, L->fsdp, L->died, L->log, g->log_dir, L->role);
        }
        char refused[160] = "";
        uint64_t nr = L->far && g->mesh_chan ? rl_chan_refused(g->mesh_chan) : 0;
        if (nr > 0) {
            snprintf(refused, sizeof refused,
                     " (the controller refused %llu handshake%s: a "
                     "rank's key not on mesh.allow)",
                     (unsigned long long)nr, nr == 1 ? "" : "s");
        }
        char pid[200] = ""; // unknown until its first message
        if (d->pid > 0) {
            snprintf(pid, sizeof pid, ", pid %d%s%s", (int)d->pid, d->host[0] ? " on " : "",
                     d->host);
        }
        return rl_errf(err, err_len, RL_EIO,
                       "worker %s (rank %d of the %s mesh dp %d x fsdp %d%s) %s; the launcher "
                       "stopped the other ranks; its log: %s (launcher: %s)%s",
                       d->name, d->mesh_rank, L->role, L->dp, L->fsdp, pid, L->died, d->log, L->log,
                       refused);
    }
    if (w->remote) {
        return rl_errf(err, err_len, RL_EIO, "remote %s (%s): %s", w->name, w->endpoint,
                       w->lost[0] ? w->lost : "lost");
    }
    char how[128];
    s_describe_exit(w->status, how, sizeof(how));
    return rl_errf(err, err_len, RL_EIO, "worker %s (pid %d) %s%s%s; its log: %s", w->name,
                   (int)w->pid, how, w->error[0] ? ": " : "", w->error, w->log);
}

// A remote sampler is gone for this run: we cannot kill it, only stop talking to it.
static void s_lose(s_worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_lose(s_worker_t *w, const char *fmt, ...) {
    if (!w->alive) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->lost, sizeof w->lost, fmt, ap);
    va_end(ap);
    w->alive = 0;
}

static void s_kill(rl_group_t *g, s_worker_t *w) {
    if (w->mesh) { // not our child: its launcher is (rl_group_destroy reaps it)
        if (w->alive && w->pid > 0 && !w->far) {
            kill(-w->pid, SIGKILL);
            kill(w->pid, SIGKILL);
        } else if (w->alive && w->far && g->launch[w->mesh - 1].alive &&
                   !g->launch[w->mesh - 1].termed) {
            g->launch[w->mesh - 1].termed = 1; // a pid of another host: the launcher stops its
            kill(g->launch[w->mesh - 1].pid, SIGTERM); // ranks wherever they are
        }
        w->alive = 0;
        return;
    }
    if (w->remote) {
        if (w->alive) {
            s_lose(w, "stopped waiting for it");
        }
        return;
    }
    if (w->alive) {
        int st;
        if (w->reaps && kill(w->pid, SIGTERM) == 0) {
            // it kills what its rewards started (processes that left its group too: setsid),
            // then dies of the SIGTERM; a worker that cannot is killed below after 1 s
            for (int t = 0; t < 200; t++) {
                pid_t r = waitpid(w->pid, &st, WNOHANG);
                if (r == w->pid) {
                    w->status = st;
                    w->alive = 0;
                    break;
                }
                struct timespec ts = {0, 5000000};
                nanosleep(&ts, NULL);
            }
            if (!w->alive) {
                s_kill_group(w); // its group may not be empty: the group id is still ours
                return;
            }
        }
        s_kill_group(w);
        kill(w->pid, SIGKILL);
        if (waitpid(w->pid, &st, 0) == w->pid) {
            w->status = st;
        }
        w->alive = 0;
    }
}

// Hex of n random bytes into out (2n + 1 bytes). Returns 0 or an errno.
static int s_random_hex(char *out, size_t n) {
    unsigned char b[64];
    RL_ASSERT(n <= sizeof b);
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(b + got, n - got, 0);
        if (r < 0 && errno != EINTR) {
            return errno;
        }
        got += r > 0 ? (size_t)r : 0;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    }
    return 0;
}

// A fresh 0700 folder for the socket: under $XDG_RUNTIME_DIR when it is a folder of ours that
// nobody else may write, else $TMPDIR or /tmp (mkdtemp: a new name, mode 0700, never an
// existing folder). The path must fit a unix socket's 108 bytes.
static int s_sock_dir(rl_group_t *g, char *err, size_t err_len) {
    const char *bases[3] = {getenv("XDG_RUNTIME_DIR"), getenv("TMPDIR"), "/tmp"};
    for (int i = 0; i < 3; i++) {
        const char *b = bases[i];
        struct stat st;
        if (!b || b[0] != '/' || strlen(b) > 60 || stat(b, &st) != 0 || !S_ISDIR(st.st_mode)) {
            continue;
        }
        if (i == 0 && (st.st_uid != geteuid() || (st.st_mode & 022))) {
            continue;
        }
        snprintf(g->sock_dir, sizeof g->sock_dir, "%s/rlctl-XXXXXX", b);
        if (mkdtemp(g->sock_dir)) {
            return 0;
        }
    }
    g->sock_dir[0] = '\0';
    return rl_errf(err, err_len, errno ? errno : RL_EIO,
                   "cannot create a private folder for the control socket (in "
                   "$XDG_RUNTIME_DIR, $TMPDIR or /tmp): %s", strerror(errno));
}

int rl_group_new(const char *log_dir, double heartbeat, int64_t max_frame, rl_group_t **out,
                 char *err, size_t err_len) {
    *out = NULL;
    rl_group_t *g = calloc(1, sizeof(*g));
    if (!g) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    snprintf(g->log_dir, sizeof(g->log_dir), "%s", log_dir);
    g->heartbeat = heartbeat > 0 ? heartbeat : 1.0;
    g->max_frame = max_frame;
    g->next_id = 1;
    int rc = s_random_hex(g->token, 32);
    if (!rc) {
        rc = s_random_hex(g->session, 32);
    }
    if (rc) {
        free(g);
        return rl_errf(err, err_len, rc, "getrandom: %s", strerror(rc));
    }
    if (mkdir(log_dir, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        free(g);
        return rl_errf(err, err_len, e, "%s: %s", log_dir, strerror(e));
    }
    struct stat st;
    if (lstat(log_dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        free(g);
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: not a folder of ours (a symlink, or owned by another user): "
                       "refusing to write worker logs there", log_dir);
    }
    if ((rc = s_sock_dir(g, err, err_len)) != 0) {
        free(g);
        return rc;
    }
    snprintf(g->sock_path, sizeof g->sock_path, "%s/ctl", g->sock_dir);
    snprintf(g->endpoint, sizeof(g->endpoint), "ipc://%s", g->sock_path);
    rc = rl_chan_bind(g->endpoint, max_frame, &g->chan, err, err_len);
    if (rc) {
        rmdir(g->sock_dir);
        free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void rl_group_set_cancel(rl_group_t *self, int (*cancel)(void *ctx), void *ctx) {
    self->cancel = cancel;
    self->cancel_ctx = ctx;
}

uint64_t rl_group_dropped(const rl_group_t *self) { return self->dropped; }

// The environment of a worker: ours, with the BLAS settings of its role (threads; 0: every core)
// in e_threads and e_timeout (64 bytes each, the caller's). caller owns result (not the
// strings); free with free().
static char **s_env(int threads, char *e_threads, char *e_timeout) {
    size_t ne = 0;
    while (environ[ne]) {
        ne++;
    }
    char **envp = calloc(ne + 3, sizeof(char *));
    if (!envp) {
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < ne; i++) {
        if (strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) != 0 &&
            strncmp(environ[i], "OPENBLAS_THREAD_TIMEOUT=", 24) != 0) {
            envp[k++] = environ[i];
        }
    }
    snprintf(e_threads, 64, "OPENBLAS_NUM_THREADS=%d", threads > 0 ? threads : 0);
    snprintf(e_timeout, 64, "OPENBLAS_THREAD_TIMEOUT=4");
    if (threads > 0) {
        envp[k++] = e_threads;
    }
    envp[k++] = e_timeout;
    envp[k] = NULL;
    return envp;
}

// The rlctl binary every worker runs (this process's own), into exe (4096 bytes).
static int s_self_exe(char *exe, char *err, size_t err_len) {
    ssize_t n = readlink("/proc/self/exe", exe, 4095);
    if (n <= 0) {
        return rl_errf(err, err_len, errno, "cannot find the rlctl binary: %s", strerror(errno));
    }
    exe[n] = '\0';
    return 0;
}

// A fresh worker entry role/rank: its name, log and unguessable routing identity.
static int s_worker_init(rl_group_t *g, s_worker_t *w, const char *role, int rank, char *err,
                         size_t err_len) {
    memset(w, 0, sizeof(*w));
    snprintf(w->name, sizeof(w->name), "%s/%d", role, rank);
    snprintf(w->log, sizeof(w->log), "%s/%s-%d.log", g->log_dir, role, rank);
    const rl_role_t *r = rl_role_find(role);
    w->reaps = r && r->reaps;
    char nonce[17];
    int rc = s_random_hex(nonce, 8);
    if (rc) {
        return rl_errf(err, err_len, rc, "getrandom: %s", strerror(rc));
    }
    char rid[sizeof w->rid];
    snprintf(rid, sizeof rid, "%s/%d~%s", role, rank, nonce);
    memcpy(w->rid, rid, sizeof rid);
    return 0;
}

// What every spawned process gets: stdout and stderr into `log` (appended, never through a
// link), its own process group, SIGINT/SIGTERM/SIGPIPE at their defaults, no signal blocked.
static void s_spawn_attrs(posix_spawn_file_actions_t *fa, posix_spawnattr_t *at, const char *log) {
    posix_spawn_file_actions_init(fa);
    posix_spawnattr_init(at);
    posix_spawn_file_actions_addopen(fa, 2, log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    posix_spawn_file_actions_adddup2(fa, 2, 1);
    posix_spawnattr_setpgroup(at, 0);
    sigset_t def, none;
    sigemptyset(&def);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(at, &def);
    sigemptyset(&none);
    posix_spawnattr_setsigmask(at, &none);
    posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                     POSIX_SPAWN_SETSIGMASK);
}

int rl_group_spawn(rl_group_t *g, const char *role, int rank, int threads, char *err,
                   size_t err_len) {
    if (g->n == S_MAX_WORKERS) {
        return rl_errf(err, err_len, RL_EINVAL, "more than %d workers", S_MAX_WORKERS);
    }
    char exe[4096];
    s_worker_t *w = &g->w[g->n];
    int rc = s_self_exe(exe, err, err_len);
    if (rc || (rc = s_worker_init(g, w, role, rank, err, err_len)) != 0) {
        return rc;
    }
    // the secret travels through a pipe: never argv (world-readable in /proc) nor environ
    char secret[256];
    int sn = snprintf(secret, sizeof secret, "token %s\nidentity %s\n", g->token, w->rid);
    int pfd[2];
    if (pipe(pfd) != 0) { // close-on-exec just below: the controller spawns from one thread
        return rl_errf(err, err_len, errno, "pipe: %s", strerror(errno));
    }
    fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    if (write(pfd[1], secret, (size_t)sn) != sn) { // < PIPE_BUF: whole or nothing
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return rl_errf(err, err_len, e ? e : RL_EIO, "pipe: %s", strerror(e));
    }
    close(pfd[1]);
    memset(secret, 0, sizeof secret);
    // keep the read end off fd 3 itself, so that dup2 onto 3 always clears close-on-exec
    int rfd = fcntl(pfd[0], F_DUPFD_CLOEXEC, 10);
    close(pfd[0]);
    if (rfd < 0) {
        return rl_errf(err, err_len, errno, "fcntl: %s", strerror(errno));
    }
    char s_rank[32], s_parent[32], s_hb[32], s_fd[16], s_max[32];
    snprintf(s_rank, sizeof(s_rank), "%d", rank);
    snprintf(s_parent, sizeof(s_parent), "%d", (int)getpid());
    snprintf(s_hb, sizeof(s_hb), "%g", g->heartbeat);
    snprintf(s_fd, sizeof(s_fd), "%d", S_SECRET_FD);
    snprintf(s_max, sizeof(s_max), "%lld", (long long)g->max_frame);
    char *argv[] = {exe, "worker", "--role", (char *)role, "--rank", s_rank, "--connect",
                    g->endpoint, "--parent", s_parent, "--heartbeat", s_hb, "--secret-fd", s_fd,
                    "--max-frame", s_max, NULL};
    char e_threads[64], e_timeout[64];
    char **envp = s_env(threads, e_threads, e_timeout);
    if (!envp) {
        close(rfd);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    s_spawn_attrs(&fa, &at, w->log);
    posix_spawn_file_actions_adddup2(&fa, rfd, S_SECRET_FD);
    pid_t pid;
    rc = posix_spawn(&pid, exe, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free(envp);
    close(rfd);
    if (rc) {
        return rl_errf(err, err_len, rc, "cannot start worker %s: %s", w->name, strerror(rc));
    }
    w->pid = pid;
    w->alive = 1;
    w->last_beat = rl_clock_now();
    g->n++;
    rl_log_debug("started %s (pid %d), log %s", w->name, (int)pid, w->log);
    return 0;
}

// The CURVE ROUTER that ranks on other hosts reach (rl_group_spawn_mesh with a hostfile): bound
// once at o->endpoint with the controller's key, admitting o->allow. Returns 0 or an error.
static int s_mesh_bind(rl_group_t *g, const rl_group_mesh_opts_t *o, char *err, size_t err_len) {
    if (g->mesh_chan) {
        return 0;
    }
    if (!o->endpoint || !o->key || !o->rank_key || o->n_allow < 1) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "ranks on other hosts need mesh.endpoint, the controller's key, "
                       "mesh.rank_key and mesh.allow");
    }
    int rc = rl_chan_bind_curve(o->endpoint, g->max_frame, o->key, g->heartbeat, &g->mesh_chan, err,
                                err_len);
    if (!rc && rl_chan_allow(g->mesh_chan, o->allow, o->n_allow, NULL) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (rc) {
        rl_chan_close(&g->mesh_chan, 0);
        return rc;
    }
    rl_log_debug("ranks across hosts connect to %s", rl_chan_endpoint(g->mesh_chan));
    return 0;
}

// The ranks' secrets on this host: a 0600 file in the socket's 0700 folder (only our uid
// reaches either): "token <hex>" and one "identity <rid>" line per rank. Returns 0 or an error.
static int s_mesh_secret(rl_group_t *g, s_launch_t *L, char *err, size_t err_len) {
    int fd = open(L->secret, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        return rl_errf(err, err_len, errno, "%s: %s", L->secret, strerror(errno));
    }
    FILE *f = fdopen(fd, "w");
    int rc = f ? 0 : RL_EIO;
    if (f) {
        fprintf(f, "token %s\n", g->token);
    }
    for (int r = 0; !rc && r < L->dp * L->fsdp; r++) {
        fprintf(f, "identity %s\n", g->w[L->first + r].rid);
    }
    if (f && fclose(f) != 0 && !rc) {
        rc = RL_EIO;
    }
    if (rc) {
        unlink(L->secret);
        return rl_errf(err, err_len, rc, "%s: cannot write the ranks' secret", L->secret);
    }
    return 0;
}

int rl_group_spawn_mesh(rl_group_t *g, const char *role, int dp, int fsdp, int threads,
                        const rl_group_mesh_opts_t *o, char *err, size_t err_len) {
    int n = dp * fsdp;
    const char *launcher = o->launcher ? o->launcher : "mpirun";
    if (dp < 1 || fsdp < 1 || g->n + n > S_MAX_WORKERS || o->n_launcher_args > 16 ||
        g->n_launch == (int)(sizeof g->launch / sizeof g->launch[0])) {
        return rl_errf(err, err_len, RL_EINVAL, "a mesh of dp %d x fsdp %d: too many workers", dp,
                       fsdp);
    }
    char exe[4096];
    int rc = s_self_exe(exe, err, err_len);
    if (rc || (o->hostfile && (rc = s_mesh_bind(g, o, err, err_len)) != 0)) {
        return rc;
    }
    s_launch_t *L = &g->launch[g->n_launch];
    memset(L, 0, sizeof *L);
    snprintf(L->role, sizeof L->role, "%s", role);
    L->dp = dp;
    L->fsdp = fsdp;
    L->first = g->n;
    L->far = o->hostfile != NULL;
    snprintf(L->log, sizeof L->log, "%s/%s-launcher.log", g->log_dir, role);
    // across hosts every rank's identity ends in one nonce given on its command line (it only
    // tells this run's ranks from another's: what admits a rank there is its key)
    char nonce[17] = "";
    if (L->far && (rc = s_random_hex(nonce, 8)) != 0) {
        return rl_errf(err, err_len, rc, "getrandom: %s", strerror(rc));
    }
    for (int r = 0; r < n; r++) {
        s_worker_t *w = &g->w[g->n + r];
        if ((rc = s_worker_init(g, w, role, r, err, err_len)) != 0) {
            return rc;
        }
        w->mesh = g->n_launch + 1;
        w->mesh_rank = r;
        w->far = L->far;
        w->alive = 1;
        w->last_beat = rl_clock_now();
        if (L->far) {
            snprintf(w->rid, sizeof w->rid, "%s/%d~%s", role, r, nonce);
        }
    }
    if (!L->far) { // mpirun hands its ranks no descriptor: their secrets are in a file
        snprintf(L->secret, sizeof L->secret, "%s/mesh-%s.secret", g->sock_dir, role);
        if ((rc = s_mesh_secret(g, L, err, err_len)) != 0) {
            return rc;
        }
    }
    char s_np[16], s_mesh[32], s_parent[32], s_hb[32], s_max[32];
    snprintf(s_np, sizeof s_np, "%d", n);
    snprintf(s_mesh, sizeof s_mesh, "%d,%d", dp, fsdp);
    snprintf(s_parent, sizeof(s_parent), "%d", L->far ? 0 : (int)getpid());
    snprintf(s_hb, sizeof(s_hb), "%g", g->heartbeat);
    snprintf(s_max, sizeof(s_max), "%lld", (long long)g->max_frame);
    // what mpirun needs here, set by us (docs/mesh.md): root in CI, more ranks than cores, idle
    // ranks that yield, no pinning (roles share the cores), shared memory on one host (and tcp
    // between hosts); across hosts the ranks' environment is what they need of ours
    char *argv[80];
    int a = 0;
    argv[a++] = (char *)launcher;
    if (geteuid() == 0) {
        argv[a++] = "--allow-run-as-root";
    }
    const char *fixed[] = {"--oversubscribe",     "--bind-to", "none",  "--mca",
                           "mpi_yield_when_idle", "1",         "--mca", "btl"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        argv[a++] = (char *)fixed[i];
    }
    argv[a++] = L->far ? "self,vader,tcp" : "self,vader";
    if (L->far) {
        const char *hosts[] = {"--hostfile", o->hostfile,
                               "-x",         "OPENBLAS_NUM_THREADS",
                               "-x",         "OPENBLAS_THREAD_TIMEOUT",
                               "-x",         "RLCTL_MESH_SERVER_KEY"};
        for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
            argv[a++] = (char *)hosts[i];
        }
    }
    for (int i = 0; i < o->n_launcher_args; i++) {
        argv[a++] = (char *)o->launcher_args[i];
    }
    const char *ep = L->far ? rl_chan_endpoint(g->mesh_chan) : g->endpoint;
    char *tail[] = {"-np",         s_np,   exe,           "worker",   "--role",    (char *)role,
                    "--mesh",      s_mesh, "--connect",   (char *)ep, "--parent",  s_parent,
                    "--heartbeat", s_hb,   "--max-frame", s_max,      "--log-dir", g->log_dir};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) {
        argv[a++] = tail[i];
    }
    if (L->far) { // public: the nonce, the key file's path (read on the rank's host)
        argv[a++] = "--mesh-nonce";
        argv[a++] = nonce;
        argv[a++] = "--key";
        argv[a++] = (char *)o->rank_key;
    } else {
        argv[a++] = "--secret-file";
        argv[a++] = L->secret;
    }
    argv[a] = NULL;
    char e_threads[64], e_timeout[64], e_key[64];
    char **envp0 = s_env(threads, e_threads, e_timeout);
    size_t ne = 0;
    while (envp0 && envp0[ne]) {
        ne++;
    }
    char **envp = envp0 ? calloc(ne + 2, sizeof *envp) : NULL;
    if (envp) { // the controller's public key for ranks across hosts (not a secret)
        memcpy(envp, envp0, ne * sizeof *envp);
        snprintf(e_key, sizeof e_key, "RLCTL_MESH_SERVER_KEY=%s", L->far ? o->key->pub : "");
        envp[ne] = e_key;
    }
    free(envp0);
    if (!envp) {
        if (L->secret[0]) {
            unlink(L->secret);
        }
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    s_spawn_attrs(&fa, &at, L->log);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    rc = posix_spawnp(&pid, launcher, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    free(envp);
    if (rc) {
        if (L->secret[0]) {
            unlink(L->secret);
        }
        return rl_errf(err, err_len, rc,
                       "cannot start the MPI launcher '%s' for the %s mesh (dp %d x fsdp %d): "
                       "%s (install Open MPI's openmpi-bin, or set mesh.launcher)",
                       launcher, role, dp, fsdp, strerror(rc));
    }
    L->pid = pid;
    L->alive = 1;
    g->n_launch++;
    g->n += n;
    rl_log_debug("started the %s mesh (dp %d x fsdp %d) with %s (pid %d)%s%s, log %s", role, dp,
                 fsdp, launcher, (int)pid, L->far ? " on the hosts of " : "",
                 L->far ? o->hostfile : "", L->log);
    return 0;
}

// Counts (and the first few times logs) a message that is not from a worker of ours. peer: the
// worker's name once the sender is known to be that worker (`verified`), else the identity the
// connection gave itself, which anyone can claim: the log then names the connection by the
// kernel's pid and uid of its process and the identity as a claim, never as the sender.
static void s_drop(rl_group_t *g, const rl_msg_t *m, const char *peer, int verified,
                   const char *why) {
    g->dropped++;
    if (g->dropped > S_DROP_LOGGED && g->dropped % 1000 != 0) {
        return;
    }
    char who[400];
    int64_t pid = -1, uid = -1;
    if (verified) {
        snprintf(who, sizeof who, "%s", peer);
    } else if (g->last_via == g->chan && rl_chan_peer_cred(g->chan, &pid, &uid) == 0) {
        snprintf(who, sizeof who, "pid %lld (uid %lld), on a connection calling itself '%s'",
                 (long long)pid, (long long)uid, peer);
    } else {
        snprintf(who, sizeof who, "a connection calling itself '%s'", peer);
    }
    rl_log_warn("dropped '%s' from %s: %s (%llu dropped so far)", rl_msg_op(m), who, why,
                (unsigned long long)g->dropped);
}

// 1 when a hello or heartbeat carries the run's token (compared in constant time).
static int s_token_ok(const rl_group_t *g, const rl_msg_t *m) {
    char err[256];
    const char *t = NULL;
    if (strcmp(rl_msg_op(m), "hb") == 0) {
        rl_proto_hb_t hb;
        t = rl_proto_hb_decode(m, &hb, err, sizeof err) == 0 ? hb.token : NULL;
    } else {
        rl_proto_hello_t h;
        t = rl_proto_hello_decode(m, &h, err, sizeof err) == 0 ? h.token : NULL;
    }
    size_t n = t ? strlen(t) : 0;
    if (!t || n != strlen(g->token)) {
        return 0;
    }
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)(t[i] ^ g->token[i]);
    }
    return d == 0;
}

// The parent of process pid (from /proc/<pid>/stat), or -1.
static pid_t s_ppid(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) {
        fclose(f);
    }
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); // the command name may hold anything but ends here
    int ppid = -1;
    char state;
    if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2) {
        return -1;
    }
    return (pid_t)ppid;
}

// The worker that sent m on connection `peer`, after the checks of rl_group.h: its routing
// identity (or its heartbeat's), the kernel's pid and uid of the connection, the token on hello
// and heartbeats; a rank across hosts: the mesh's socket, whose handshake checked its key.
// *hb: it came on the heartbeat connection. NULL: dropped and counted.
static s_worker_t *s_sender(rl_group_t *g, const rl_msg_t *m, const char *peer, int *hb) {
    s_worker_t *w = s_find_rid(g, peer, hb);
    if (!w) {
        s_drop(g, m, peer, 0, "not a worker of this run");
        return NULL;
    }
    int via_mesh = g->mesh_chan && g->last_via == g->mesh_chan;
    if (via_mesh != w->far) {
        s_drop(g, m, w->name, 0,
               via_mesh ? "a local worker's name on the tcp socket of the mesh"
                        : "a rank across hosts on the local socket");
        return NULL;
    }
    int64_t pid = -1, uid = -1;
    char key[RL_CURVE_Z85_LEN + 1];
    if (w->far) {
        if (rl_chan_peer_key(g->mesh_chan, key) != 0) { // its key passed mesh.allow
            s_drop(g, m, w->name, 0, "no CURVE key");
            return NULL;
        }
    } else if (rl_chan_peer_cred(g->chan, &pid, &uid) != 0) {
        s_drop(g, m, w->name, 0, "the sender's process is unknown");
        return NULL;
    }
    if (w->mesh && w->pid == 0 && uid == (int64_t)geteuid() && pid > 0 &&
        s_ppid((pid_t)pid) == g->launch[w->mesh - 1].pid) {
        w->pid = (pid_t)pid; // a rank speaks first from a child of its launcher: that is it
        rl_log_debug("%s is pid %lld", w->name, (long long)pid);
    }
    if (!w->far && (uid != (int64_t)geteuid() || pid != (int64_t)w->pid)) {
        char why[160];
        snprintf(why, sizeof why, "not the worker rlctl started under that name (pid %d)",
                 (int)w->pid);
        s_drop(g, m, w->name, 0, why);
        return NULL;
    }
    const char *op = rl_msg_op(m);
    int is_hb = strcmp(op, "hb") == 0, is_hello = strcmp(op, "hello") == 0;
    if (*hb != is_hb) {
        s_drop(g, m, w->name, 1, *hb ? "the heartbeat connection sends only heartbeats"
                                     : "a heartbeat on the request connection");
        return NULL;
    }
    if ((is_hb || is_hello) && !w->far && !s_token_ok(g, m)) {
        s_drop(g, m, w->name, 1, "without the run's token");
        return NULL;
    }
    if (!is_hb && !is_hello && !w->ready) {
        s_drop(g, m, w->name, 1, "before its hello");
        return NULL;
    }
    return w;
}

// Handles one message that is not a reply we wait for: hello, heartbeats, and anything not from
// a worker of ours (dropped). Returns 1 when it was consumed; otherwise *from is the worker.
static int s_bookkeep(rl_group_t *g, rl_msg_t *m, const char *peer, s_worker_t **from) {
    int hb = 0;
    s_worker_t *w = s_sender(g, m, peer, &hb);
    *from = w;
    if (!w) {
        return 1;
    }
    w->last_beat = rl_clock_now();
    if (hb) {
        return 1;
    }
    if (strcmp(rl_msg_op(m), "hello") == 0) {
        rl_proto_hello_t h;
        char err[256];
        rl_msg_t *wel = NULL;
        if (w->ready || w->error[0]) {
            s_drop(g, m, w->name, 1, "a second hello");
        } else if (rl_proto_hello_decode(m, &h, err, sizeof err) != 0) {
            s_drop(g, m, w->name, 1, err);
        } else {
            if (w->far) { // what it says of itself: to name it, never to kill it
                w->pid = (pid_t)h.pid;
                snprintf(w->host, sizeof w->host, "%s", h.host ? h.host : "");
            }
            if (h.error) {
                snprintf(w->error, sizeof(w->error), "%s", h.error);
            } else {
                w->ready = 1;
                if (rl_proto_welcome(rl_msg_id(m), &wel) == 0) {
                    rl_chan_send(s_router(g, w), w->rid, &wel, err, sizeof(err));
                }
            }
        }
        return 1;
    }
    return 0;
}

// 1 when the caller's cancel check asks to stop waiting.
static int s_cancelled(rl_group_t *g) {
    return g->cancel && g->cancel(g->cancel_ctx);
}

// A remote sampler's connection events: a handshake that succeeds, one its allowlist refuses,
// handshakes that fail (another server key, not CURVE), a connection that closes.
static void s_remote_events(rl_group_t *g) {
    for (int i = 0; i < g->n; i++) {
        s_worker_t *w = &g->w[i];
        int64_t v = 0;
        for (rl_chan_event_t ev; w->chan && (ev = rl_chan_event(w->chan, &v)) != RL_CHAN_EV_NONE;) {
            if (!w->alive) {
                continue;
            }
            if (ev == RL_CHAN_EV_UP) {
                w->up = 1;
            } else if (ev == RL_CHAN_EV_AUTH) {
                s_lose(w,
                       "the sampler refused us (ZAP status %lld): the public key of "
                       "roles.client_key is not on its --allow list",
                       (long long)v);
            } else if (w->up && ev == RL_CHAN_EV_DOWN) {
                s_lose(w,
                       "the connection closed (the sampler stopped, or sent no heartbeat "
                       "for %.0f s)",
                       S_MISSED_BEATS * g->heartbeat);
            } else if (!w->up && ++w->failed_handshakes >= 3) {
                s_lose(w,
                       "the CURVE handshake failed %d times: the sampler's public key is not "
                       "the recipe's server_key, or it does not speak CURVE",
                       w->failed_handshakes);
            }
        }
    }
}

// Waits up to timeout_ms for a message on the ROUTER or any remote sampler's connection.
// *remote: the remote it came from (NULL: the ROUTER; peer is then its connection).
static int s_recv_any(rl_group_t *g, int timeout_ms, rl_msg_t **m, s_worker_t **remote, char *peer,
                      size_t peer_len, char *e, size_t e_len) {
    *remote = NULL;
    g->last_via = g->chan;
    rl_chan_t *chans[64];
    s_worker_t *owners[64];
    int n = 0;
    chans[n] = g->chan;
    owners[n++] = NULL;
    if (g->mesh_chan) {
        chans[n] = g->mesh_chan;
        owners[n++] = NULL;
    }
    for (int i = 0; i < g->n && n < 64; i++) {
        if (g->w[i].chan) {
            chans[n] = g->w[i].chan;
            owners[n++] = &g->w[i];
        }
    }
    if (n == 1) {
        return rl_chan_recv(g->chan, timeout_ms, m, peer, peer_len, e, e_len);
    }
    int ready[64];
    int rc = rl_chan_poll(chans, n, timeout_ms, ready);
    if (rc) {
        return rl_errf(e, e_len, rc, "poll: %s", strerror(rc));
    }
    for (int i = 0; i < n; i++) {
        if (ready[i]) {
            *remote = owners[i];
            g->last_via = chans[i];
            rc = rl_chan_recv(chans[i], 0, m, peer, peer_len, e, e_len);
            if (owners[i]) {
                snprintf(peer, peer_len, "%s", owners[i]->name);
            }
            return rc;
        }
    }
    return RL_ETIMEOUT;
}

// A message from remote sampler w: only replies of this run's session count; its attach reply
// makes it ready. Returns 1 when consumed (dropped, or the attach reply), 0 when it is a reply
// for the caller to match.
static int s_remote_msg(rl_group_t *g, s_worker_t *w, const rl_msg_t *m) {
    if (!w->alive) {
        s_drop(g, m, w->name, 1, "a remote sampler this run has stopped talking to");
        return 1;
    }
    if (!rl_proto_session_is(m, g->session)) {
        s_drop(g, m, w->name, 1, "not this run's session (a reply meant for an earlier run?)");
        return 1;
    }
    if (strcmp(rl_msg_op(m), "reply") != 0) {
        s_drop(g, m, w->name, 1, "a remote sampler only answers requests");
        return 1;
    }
    w->last_beat = rl_clock_now();
    if (!w->ready && rl_msg_id(m) == w->attach_id) {
        int ok = 0;
        const char *why = NULL;
        rl_proto_attach_reply_t a;
        char e[256];
        if (rl_proto_reply_status(m, &ok, &why) != 0 || !ok) {
            snprintf(w->error, sizeof w->error, "%s", why ? why : "attach refused");
        } else if (rl_proto_attach_reply_decode(m, &a, e, sizeof e) != 0) {
            snprintf(w->error, sizeof w->error, "%s", e);
        } else {
            w->ready = 1;
            w->pid = (pid_t)a.pid;
            w->needs_model = a.needs_model;
            snprintf(w->host, sizeof w->host, "%s", a.host);
            rl_log_info("%s = %s: host %s, pid %lld, %lld thread%s", w->name, w->endpoint, a.host,
                        (long long)a.pid, (long long)a.threads, a.threads == 1 ? "" : "s");
        }
        return 1;
    }
    if (!w->ready) {
        s_drop(g, m, w->name, 1, "before its attach reply");
        return 1;
    }
    return 0;
}

int rl_group_connect(rl_group_t *g, const char *role, int rank, const char *endpoint,
                     const rl_curve_key_t *client, const char *server_pub, const char *model_hash,
                     const char *run, char *err, size_t err_len) {
    if (g->n == S_MAX_WORKERS) {
        return rl_errf(err, err_len, RL_EINVAL, "more than %d workers", S_MAX_WORKERS);
    }
    s_worker_t *w = &g->w[g->n];
    memset(w, 0, sizeof(*w));
    snprintf(w->name, sizeof(w->name), "%s/%d", role, rank);
    snprintf(w->endpoint, sizeof w->endpoint, "%s", endpoint);
    snprintf(w->log, sizeof w->log, "(on %s)", endpoint);
    w->remote = 1;
    w->pid = -1;
    char nonce[17], rid[64];
    int rc = s_random_hex(nonce, 8);
    if (rc) {
        return rl_errf(err, err_len, rc, "getrandom: %s", strerror(rc));
    }
    snprintf(rid, sizeof rid, "controller~%s", nonce);
    char e[512];
    rc = rl_chan_connect_curve(endpoint, rid, g->max_frame, client, server_pub, g->heartbeat,
                               &w->chan, e, sizeof e);
    if (rc) {
        return rl_errf(err, err_len, rc, "remote %s: %s", w->name, e);
    }
    rl_chan_set_peer_name(w->chan, w->name);
    rl_proto_attach_t q = {g->session, model_hash, run};
    rl_msg_t *m = NULL;
    w->attach_id = g->next_id++;
    rc = rl_proto_attach_encode(&q, w->attach_id, &m, e, sizeof e);
    if (!rc) {
        rc = rl_chan_send(w->chan, NULL, &m, e, sizeof e); // queued until the handshake
    }
    if (rc) {
        rl_chan_close(&w->chan, 0);
        return rl_errf(err, err_len, rc, "remote %s (%s): %s", w->name, endpoint, e);
    }
    w->alive = 1;
    w->last_beat = rl_clock_now();
    g->n++;
    rl_log_debug("connecting %s to %s", w->name, endpoint);
    return 0;
}

// Checks deaths and heartbeats; returns an error for the first problem among `watch` (NULL:
// every worker).
// Reaps exited workers, reads remote connection events, and after a gap in listening (busy
// between calls, stopped, suspended) restarts the heartbeat clocks: beats that arrived meanwhile
// wait unread in the socket, so judge from now on, not from them.
static void s_refresh(rl_group_t *g) {
    s_reap(g);
    s_remote_events(g);
    double now = rl_clock_now();
    if (g->last_check > 0 && now - g->last_check > g->heartbeat) {
        for (int i = 0; i < g->n; i++) {
            g->w[i].last_beat = now;
        }
    }
    g->last_check = now;
}

// One worker as of the last s_refresh: dead, lost, or silent for too long. Returns 0 or why.
static int s_check_one(const rl_group_t *g, const s_worker_t *w, char *err, size_t err_len) {
    if (!w->alive) {
        return s_dead_error(g, w, err, err_len);
    }
    if (w->remote) {
        return 0; // ZMTP heartbeats: a silent remote loses its connection (s_remote_events)
    }
    if (w->mesh && w->pid == 0) {
        return 0; // a rank still starting under its launcher (MPI's start-up): the launcher's
                  // exit or the caller's timeout says when it fails
    }
    double now = rl_clock_now();
    if (now - w->last_beat > S_MISSED_BEATS * g->heartbeat) {
        return rl_errf(err, err_len, RL_ETIMEOUT,
                       "worker %s (pid %d) sent no heartbeat for %.0f s; its log: %s", w->name,
                       (int)w->pid, now - w->last_beat, w->log);
    }
    return 0;
}

// s_refresh, then the first problem among `watch` (NULL: every worker).
static int s_check(rl_group_t *g, int n, s_worker_t *const *watch, char *err, size_t err_len) {
    s_refresh(g);
    for (int i = 0; i < (watch ? n : g->n); i++) {
        int rc = s_check_one(g, watch ? watch[i] : &g->w[i], err, err_len);
        if (rc) {
            return rc;
        }
    }
    return 0;
}

int rl_group_wait_ready(rl_group_t *g, double timeout_s, char *err, size_t err_len) {
    double t0 = rl_clock_now();
    for (;;) {
        int all = 1;
        for (int i = 0; i < g->n; i++) {
            s_worker_t *w = &g->w[i];
            if (w->error[0] && w->remote) {
                return rl_errf(err, err_len, RL_EINVAL, "remote %s (%s): %s", w->name, w->endpoint,
                               w->error);
            }
            if (w->error[0]) {
                return rl_errf(err, err_len, RL_EINVAL, "worker %s: %s", w->name, w->error);
            }
            all &= w->ready;
        }
        if (all) {
            for (int i = 0; i < g->n_launch; i++) { // every rank has its secret: drop the file
                if (g->launch[i].secret[0]) {
                    unlink(g->launch[i].secret);
                    g->launch[i].secret[0] = '\0';
                }
            }
            return 0;
        }
        int rc = s_check(g, 0, NULL, err, err_len);
        if (rc) {
            return rc;
        }
        if (rl_clock_now() - t0 > timeout_s) {
            for (int i = 0; i < g->n; i++) {
                if (g->w[i].remote && !g->w[i].ready) {
                    return rl_errf(err, err_len, RL_ETIMEOUT,
                                   "remote %s (%s) did not answer within %.0f s (%s)", g->w[i].name,
                                   g->w[i].endpoint, timeout_s,
                                   g->w[i].up ? "connected, but no reply to attach"
                                              : "no connection: is it listening there?");
                }
            }
            for (int i = 0; i < g->n; i++) {
                if (g->w[i].far && !g->w[i].ready) {
                    uint64_t nr = rl_chan_refused(g->mesh_chan);
                    return rl_errf(err, err_len, RL_ETIMEOUT,
                                   "rank %s across hosts did not say hello within %.0f s at %s "
                                   "(%llu handshake%s refused: a key not on mesh.allow); is "
                                   "mesh.endpoint reachable from its host? its log: %s, the "
                                   "launcher's: %s",
                                   g->w[i].name, timeout_s, rl_chan_endpoint(g->mesh_chan),
                                   (unsigned long long)nr, nr == 1 ? "" : "s", g->w[i].log,
                                   g->launch[g->w[i].mesh - 1].log);
                }
            }
            return rl_errf(err, err_len, RL_ETIMEOUT, "workers not ready after %.0f s",
                           timeout_s);
        }
        if (s_cancelled(g)) {
            return rl_errf(err, err_len, RL_ECANCELED, "stopped while the workers started");
        }
        rl_msg_t *m = NULL;
        char peer[256], e[512];
        s_worker_t *rw;
        rc = s_recv_any(g, 100, &m, &rw, peer, sizeof(peer), e, sizeof(e));
        if (rc == 0 && rw) {
            if (!s_remote_msg(g, rw, m)) {
                rl_log_warn("unexpected '%s' from %s before it was ready", rl_msg_op(m), rw->name);
            }
            rl_msg_free(&m);
        } else if (rc == 0) {
            s_worker_t *from;
            if (!s_bookkeep(g, m, peer, &from)) {
                rl_log_warn("unexpected '%s' from %s before it was ready", rl_msg_op(m),
                            from->name);
            }
            rl_msg_free(&m);
        } else if (rc == RL_EVERSION && rw) {
            s_lose(rw, "%s", e);
        } else if (rc != RL_ETIMEOUT) {
            rl_log_warn("%s", e);
        }
    }
}

static s_pending_t *s_pending(rl_group_t *g, uint64_t id) {
    for (int i = 0; i < S_MAX_PENDING; i++) {
        if (g->pend[i].used && g->pend[i].id == id) {
            return &g->pend[i];
        }
    }
    return NULL;
}

static void s_pending_fail(s_pending_t *p, const char *why) {
    if (p->t_done == 0) {
        snprintf(p->why, sizeof p->why, "%s", why);
        p->t_done = rl_clock_now();
    }
}

static void s_pending_free(s_pending_t *p) {
    rl_msg_free(&p->reply);
    memset(p, 0, sizeof *p);
}

// Sends one request (taken) to w and records it as pending; a send that fails is recorded as the
// request's failure. Returns 0, or RL_EINVAL when the pending table is full.
static int s_post_one(rl_group_t *g, s_worker_t *w, rl_msg_t **req, uint64_t *id_out) {
    s_pending_t *p = NULL;
    for (int i = 0; i < S_MAX_PENDING && !p; i++) {
        p = g->pend[i].used ? NULL : &g->pend[i];
    }
    if (!p) {
        rl_msg_free(req);
        return RL_EINVAL;
    }
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->w = w;
    p->id = *req ? rl_msg_id(*req) : 0;
    p->t_sent = rl_clock_now();
    *id_out = p->id;
    char e[512], f[RL_GROUP_WHY];
    int bad = 0;
    if (w->remote) { // its own connection; the request names this run's session
        if (!w->alive || !w->ready) {
            bad = w->alive ? rl_errf(f, sizeof f, RL_EINVAL, "remote %s is not attached", w->name)
                           : s_dead_error(g, w, f, sizeof f);
        } else if (rl_proto_session_set(*req, g->session) != 0) {
            bad = rl_errf(f, sizeof f, RL_ENOMEM, "out of memory");
        } else if (rl_chan_send(w->chan, NULL, req, e, sizeof e) != 0) {
            bad = rl_errf(f, sizeof f, RL_EIO, "remote %s (%s): cannot send: %s", w->name,
                          w->endpoint, e);
            s_lose(w, "cannot send: %s", e);
        }
    } else {
        int r = rl_chan_send(s_router(g, w), w->rid, req, e, sizeof(e));
        if (r) {
            // a peer that vanished has usually died: say how, when it did (within 5 s: a mesh
            // rank's death is known once its launcher, mpirun, has noticed it and exited, which
            // took over 1 s on a loaded 2-core machine)
            for (int tries = 0; tries < 100 && w->alive; tries++) {
                s_reap(g);
                if (w->alive) {
                    struct timespec ts = {0, 50000000};
                    nanosleep(&ts, NULL);
                }
            }
            bad = w->alive ? rl_errf(f, sizeof f, r, "worker %s: cannot send: %s", w->name,
                                     rl_strerror(r))
                           : s_dead_error(g, w, f, sizeof f);
        }
    }
    rl_msg_free(req);
    if (bad) {
        s_pending_fail(p, f);
    }
    return 0;
}

// Reads one message (up to timeout_ms) and files it: bookkeeping (hello, heartbeats, foreign
// messages), or the reply of a pending request.
static void s_pump(rl_group_t *g, int timeout_ms) {
    rl_msg_t *m = NULL;
    char peer[256], e[1024];
    s_worker_t *rw;
    int r = s_recv_any(g, timeout_ms, &m, &rw, peer, sizeof(peer), e, sizeof(e));
    if (r == RL_ETIMEOUT) {
        return;
    }
    if (r == RL_EVERSION && rw) { // a remote sampler of another protocol version: no use waiting
        s_lose(rw, "%s", e);
        return;
    }
    if (r) {
        rl_log_warn("%s", e); // malformed: dropped; the request will time out if it was ours
        return;
    }
    s_worker_t *from = rw;
    if (rw ? s_remote_msg(g, rw, m) : s_bookkeep(g, m, peer, &from)) {
        rl_msg_free(&m);
        return;
    }
    s_pending_t *p = s_pending(g, rl_msg_id(m));
    if (!p || p->w != from || p->t_done > 0 || strcmp(rl_msg_op(m), "reply") != 0) {
        rl_log_warn("unexpected '%s' (id %llu) from %s dropped", rl_msg_op(m),
                    (unsigned long long)rl_msg_id(m), from->name);
        rl_msg_free(&m);
        return;
    }
    int ok = 0;
    const char *whyr = NULL;
    if (rl_proto_reply_status(m, &ok, &whyr) != 0 || !ok) {
        char f[RL_GROUP_WHY];
        rl_errf(f, sizeof f, RL_EINVAL, "%s %s: %s", from->remote ? "remote" : "worker", from->name,
                whyr);
        s_pending_fail(p, f);
        rl_msg_free(&m);
        return;
    }
    p->reply = m;
    p->t_done = rl_clock_now();
}

int rl_group_post(rl_group_t *g, int n, const char *const *peers, rl_msg_t **reqs, uint64_t *ids,
                  char *err, size_t err_len) {
    int rc = 0;
    for (int i = 0; i < n; i++) {
        s_worker_t *w = rc ? NULL : s_find(g, peers[i]);
        if (!rc && !w) {
            rc = rl_errf(err, err_len, RL_ENOTFOUND, "no worker %s", peers[i]);
        }
        if (!rc && s_post_one(g, w, &reqs[i], &ids[i]) != 0) {
            rc = rl_errf(err, err_len, RL_EINVAL, "more than %d requests in flight", S_MAX_PENDING);
        }
        rl_msg_free(&reqs[i]);
    }
    return rc;
}

// Waits for the pending requests ids[0..n) (see rl_group_collect). fail_fast: the first failure
// ends the wait with that error (the other requests are abandoned: late replies are dropped);
// otherwise why[i] gets each failure. A request times out timeout_s after it was sent.
static int s_collect(rl_group_t *g, int n, const uint64_t *ids, rl_msg_t **replies,
                     double timeout_s, int *timed_out, int fail_fast, char (*why)[RL_GROUP_WHY],
                     double *elapsed, char *err, size_t err_len) {
    s_pending_t *ps[S_MAX_WORKERS];
    int rc = 0;
    if (n > S_MAX_WORKERS) {
        return rl_errf(err, err_len, RL_EINVAL, "too many requests at once");
    }
    for (int i = 0; i < n; i++) {
        replies[i] = NULL;
        ps[i] = s_pending(g, ids[i]);
        if (why) {
            why[i][0] = '\0';
        }
        if (elapsed) {
            elapsed[i] = 0;
        }
    }
    for (int i = 0; !rc && i < n; i++) {
        if (!ps[i]) {
            rc = rl_errf(err, err_len, RL_ENOTFOUND, "no request %llu in flight",
                         (unsigned long long)ids[i]);
        }
    }
    for (;;) {
        if (rc) {
            break;
        }
        // failures so far: a worker that died or was lost with a request pending
        s_worker_t *waiting[S_MAX_WORKERS];
        int wi[S_MAX_WORKERS], nw = 0;
        s_refresh(g); // once per round, then each pending worker
        for (int i = 0; i < n; i++) {
            if (ps[i]->t_done == 0) {
                char f[RL_GROUP_WHY];
                if (s_check_one(g, ps[i]->w, f, sizeof f) != 0) {
                    s_pending_fail(ps[i], f);
                    continue;
                }
                wi[nw] = i;
                waiting[nw++] = ps[i]->w;
            }
        }
        if (fail_fast) {
            for (int i = 0; !rc && i < n; i++) {
                if (ps[i]->t_done > 0 && ps[i]->why[0]) {
                    rc = rl_errf(err, err_len, RL_EIO, "%s", ps[i]->why);
                }
            }
            if (rc) {
                break;
            }
        }
        if (nw == 0) {
            break;
        }
        double now = rl_clock_now();
        int late = 0;
        for (int j = 0; j < nw; j++) {
            late |= now - ps[wi[j]]->t_sent > timeout_s;
        }
        if (late) {
            if (timed_out) {
                *timed_out = 1;
            }
            for (int j = 0; j < nw; j++) {
                s_pending_t *p = ps[wi[j]];
                if (now - p->t_sent <= timeout_s && !fail_fast) {
                    continue;
                }
                const s_worker_t *w = waiting[j];
                char f[RL_GROUP_WHY];
                if (w->remote) {
                    rl_errf(f, sizeof f, RL_ETIMEOUT,
                            "remote %s (%s) did not answer within %.0f s (dropped from the run)",
                            w->name, w->endpoint, timeout_s);
                } else {
                    rl_errf(f, sizeof f, RL_ETIMEOUT,
                            "worker %s (pid %d) did not answer within %.0f s (stopped); its log: "
                            "%s",
                            w->name, (int)w->pid, timeout_s, w->log);
                }
                s_kill(g, waiting[j]);
                s_pending_fail(p, f);
                if (fail_fast && !rc) {
                    rc = rl_errf(err, err_len, RL_ETIMEOUT, "%s", f);
                } else if (fail_fast) { // every late worker is named
                    size_t l = strlen(err);
                    snprintf(err + l, err_len - l, "; nor did %s (%s)", w->name,
                             w->remote ? w->endpoint : "stopped");
                }
            }
            continue;
        }
        if (s_cancelled(g)) {
            rc = rl_errf(err, err_len, RL_ECANCELED, "stopped while waiting for %s",
                         waiting[0]->name);
            break;
        }
        s_pump(g, 100);
    }
    for (int i = 0; i < n; i++) {
        if (!ps[i]) {
            continue;
        }
        if (!rc && ps[i]->reply) {
            replies[i] = ps[i]->reply;
            ps[i]->reply = NULL;
            if (elapsed) {
                elapsed[i] = ps[i]->t_done - ps[i]->t_sent;
            }
        } else if (!rc && why) {
            snprintf(why[i], RL_GROUP_WHY, "%s", ps[i]->why[0] ? ps[i]->why : "no reply");
        }
        s_pending_free(ps[i]);
    }
    return rc;
}

double rl_group_done_at(rl_group_t *g, uint64_t id) {
    const s_pending_t *p = s_pending(g, id);
    return p ? p->t_done : 0;
}

int rl_group_collect(rl_group_t *g, int n, const uint64_t *ids, rl_msg_t **replies,
                     double timeout_s, char (*why)[RL_GROUP_WHY], double *elapsed, char *err,
                     size_t err_len) {
    return s_collect(g, n, ids, replies, timeout_s, NULL, 0, why, elapsed, err, err_len);
}

// post + collect (rl_group_call, rl_group_call_each).
static int s_call(rl_group_t *g, int n, const char *const *peers, rl_msg_t **reqs,
                  rl_msg_t **replies, double timeout_s, int *timed_out, int fail_fast,
                  char (*why)[RL_GROUP_WHY], double *elapsed, char *err, size_t err_len) {
    uint64_t ids[S_MAX_WORKERS];
    if (timed_out) {
        *timed_out = 0;
    }
    for (int i = 0; i < n; i++) {
        replies[i] = NULL;
    }
    if (n > S_MAX_WORKERS) {
        for (int i = 0; i < n; i++) {
            rl_msg_free(&reqs[i]);
        }
        return rl_errf(err, err_len, RL_EINVAL, "too many requests at once");
    }
    int rc = rl_group_post(g, n, peers, reqs, ids, err, err_len);
    return rc ? rc
              : s_collect(g, n, ids, replies, timeout_s, timed_out, fail_fast, why, elapsed, err,
                          err_len);
}

int rl_group_call(rl_group_t *g, int n, const char *const *peers, rl_msg_t **reqs,
                  rl_msg_t **replies, double timeout_s, int *timed_out, char *err, size_t err_len) {
    return s_call(g, n, peers, reqs, replies, timeout_s, timed_out, 1, NULL, NULL, err, err_len);
}

int rl_group_call_each(rl_group_t *g, int n, const char *const *peers, rl_msg_t **reqs,
                       rl_msg_t **replies, double timeout_s, char (*why)[RL_GROUP_WHY],
                       double *elapsed, char *err, size_t err_len) {
    return s_call(g, n, peers, reqs, replies, timeout_s, NULL, 0, why, elapsed, err, err_len);
}

int rl_group_needs_model(const rl_group_t *self, const char *peer) {
    const s_worker_t *w = s_find_c(self, peer);
    return w && w->remote && w->needs_model;
}

int rl_group_is_remote(const rl_group_t *self, const char *peer) {
    const s_worker_t *w = s_find_c(self, peer);
    return w && w->remote;
}

const char *rl_group_endpoint(const rl_group_t *self, const char *peer) {
    const s_worker_t *w = s_find_c(self, peer);
    return w && w->remote ? w->endpoint : NULL;
}

void rl_group_destroy(rl_group_t **self_p, double timeout_s) {
    rl_group_t *g = *self_p;
    if (!g) {
        return;
    }
    s_reap(g);
    s_remote_events(g);
    uint64_t bye[S_MAX_WORKERS] = {0}; // a remote's shutdown request (its session ends)
    for (int i = 0; i < g->n; i++) {
        s_worker_t *w = &g->w[i];
        if (w->alive && (!w->remote || w->ready)) {
            rl_msg_t *m = NULL;
            char e[256];
            uint64_t id = g->next_id++;
            if (rl_proto_request(RL_PROTO_SHUTDOWN, id, &m) == 0) {
                if (!w->remote) {
                    rl_chan_send(s_router(g, w), w->rid, &m, e, sizeof(e));
                } else if (rl_proto_session_set(m, g->session) == 0 &&
                           rl_chan_send(w->chan, NULL, &m, e, sizeof e) == 0) {
                    bye[i] = id;
                }
                rl_msg_free(&m);
            }
        }
    }
    double t0 = rl_clock_now();
    for (;;) {
        s_reap(g);
        int alive = 0;
        for (int i = 0; i < g->n; i++) {
            alive += g->w[i].remote ? bye[i] != 0 : g->w[i].alive;
        }
        if (!alive || rl_clock_now() - t0 > timeout_s) {
            break;
        }
        rl_msg_t *m = NULL;
        char peer[256], e[256];
        s_worker_t *rw;
        if (s_recv_any(g, 50, &m, &rw, peer, sizeof(peer), e, sizeof(e)) == 0) {
            if (rw && rl_msg_id(m) == bye[rw - g->w]) {
                bye[rw - g->w] = 0;
            }
            rl_msg_free(&m);
        }
    }
    for (int i = 0; i < g->n; i++) {
        s_kill(g, &g->w[i]); // s_reap already killed the process groups of those that exited
        rl_chan_close(&g->w[i].chan, 0);
    }
    for (int i = 0; i < g->n_launch; i++) { // the ranks are gone: their launchers exit
        s_launch_t *L = &g->launch[i];
        int st;
        for (int t = 0; L->alive && t < 40; t++) {
            if (waitpid(L->pid, &st, WNOHANG) == L->pid) {
                L->alive = 0;
            } else {
                struct timespec ts = {0, 50000000};
                nanosleep(&ts, NULL);
            }
        }
        if (L->alive) {
            kill(-L->pid, SIGKILL);
            waitpid(L->pid, &st, 0);
        }
        if (L->secret[0]) {
            unlink(L->secret);
        }
    }
    for (int i = 0; i < S_MAX_PENDING; i++) {
        s_pending_free(&g->pend[i]);
    }
    rl_chan_close(&g->chan, 0);
    rl_chan_close(&g->mesh_chan, 0);
    if (g->sock_dir[0]) {
        unlink(g->sock_path);
        rmdir(g->sock_dir);
    }
    memset(g->token, 0, sizeof g->token);
    memset(g->session, 0, sizeof g->session);
    free(g);
    *self_p = NULL;
}

uint64_t rl_group_next_id(rl_group_t *self) { return self->next_id++; }

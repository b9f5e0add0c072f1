// rl_group_proc — the worker processes of a group (rl_group.h): spawning one worker, or a
// mesh's ranks through the MPI launcher; reaping them, saying how one died, killing.
#include "rl_group_priv.h"
#include "rl_err.h"
#include "rl_clock.h"

#include "rl_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

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
static void s_kill_group(rl_grp_worker_t *w) {
    if (w->pid > 0 && !w->remote && !w->far) {
        kill(-w->pid, SIGKILL);
    }
}

// What the launcher's log says about the rank that failed first: Open MPI writes "process rank
// R with PID P on node N exited on signal S" or "Process name: [[J,1],R]" and "Exit code: C".
// Fills L->died; returns the rank, or -1 when the log does not say.
static int s_launch_died(rl_grp_launch_t *L) {
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
static void s_reap_launch(rl_group_t *g, rl_grp_launch_t *L, int st, rl_grp_worker_t **dead) {
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
        rl_grp_worker_t *w = &g->w[L->first + r];
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
rl_grp_worker_t *rl_grp_reap(rl_group_t *g) {
    rl_grp_worker_t *dead = NULL;
    for (int i = 0; i < g->n_launch; i++) {
        int st;
        if (g->launch[i].alive && waitpid(g->launch[i].pid, &st, WNOHANG) == g->launch[i].pid) {
            s_reap_launch(g, &g->launch[i], st, &dead);
        }
    }
    for (int i = 0; i < g->n; i++) {
        rl_grp_worker_t *w = &g->w[i];
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

int rl_grp_dead_error(const rl_group_t *g, const rl_grp_worker_t *w, char *err, size_t err_len) {
    if (w->mesh) { // the rank that failed first, whichever rank the caller watched
        const rl_grp_launch_t *L = &g->launch[w->mesh - 1];
        const rl_grp_worker_t *d = L->died_rank >= 0 ? &g->w[L->first + L->died_rank] : w;
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
void rl_grp_lose(rl_grp_worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rl_grp_lose(rl_grp_worker_t *w, const char *fmt, ...) {
    if (!w->alive) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->lost, sizeof w->lost, fmt, ap);
    va_end(ap);
    w->alive = 0;
}

void rl_grp_kill(rl_group_t *g, rl_grp_worker_t *w) {
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
            rl_grp_lose(w, "stopped waiting for it");
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
static int s_worker_init(rl_group_t *g, rl_grp_worker_t *w, const char *role, int rank, int reaps,
                         char *err, size_t err_len) {
    memset(w, 0, sizeof(*w));
    snprintf(w->name, sizeof(w->name), "%s/%d", role, rank);
    snprintf(w->log, sizeof(w->log), "%s/%s-%d.log", g->log_dir, role, rank);
    w->reaps = reaps;
    char nonce[17];
    int rc = rl_grp_random_hex(nonce, 8);
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

int rl_group_spawn(rl_group_t *g, const char *role, int rank, int threads, int reaps, char *err,
                   size_t err_len) {
    if (g->n == RL_GRP_MAX_WORKERS) {
        return rl_errf(err, err_len, RL_EINVAL, "more than %d workers", RL_GRP_MAX_WORKERS);
    }
    char exe[4096];
    rl_grp_worker_t *w = &g->w[g->n];
    int rc = s_self_exe(exe, err, err_len);
    if (rc || (rc = s_worker_init(g, w, role, rank, reaps, err, err_len)) != 0) {
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
    snprintf(s_fd, sizeof(s_fd), "%d", RL_GRP_SECRET_FD);
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
    posix_spawn_file_actions_adddup2(&fa, rfd, RL_GRP_SECRET_FD);
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
static int s_mesh_secret(rl_group_t *g, rl_grp_launch_t *L, char *err, size_t err_len) {
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
    if (dp < 1 || fsdp < 1 || g->n + n > RL_GRP_MAX_WORKERS || o->n_launcher_args > 16 ||
        g->n_launch == (int)(sizeof g->launch / sizeof g->launch[0])) {
        return rl_errf(err, err_len, RL_EINVAL, "a mesh of dp %d x fsdp %d: too many workers", dp,
                       fsdp);
    }
    char exe[4096];
    int rc = s_self_exe(exe, err, err_len);
    if (rc || (o->hostfile && (rc = s_mesh_bind(g, o, err, err_len)) != 0)) {
        return rc;
    }
    rl_grp_launch_t *L = &g->launch[g->n_launch];
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
    if (L->far && (rc = rl_grp_random_hex(nonce, 8)) != 0) {
        return rl_errf(err, err_len, rc, "getrandom: %s", strerror(rc));
    }
    for (int r = 0; r < n; r++) {
        rl_grp_worker_t *w = &g->w[g->n + r];
        if ((rc = s_worker_init(g, w, role, r, o->reaps, err, err_len)) != 0) {
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
    if (!L->far) { // a session folder of its own: launchers started at once raced for /tmp's
        snprintf(L->mpi_tmp, sizeof L->mpi_tmp, "%s/mpi-%s", g->sock_dir, role);
        if (mkdir(L->mpi_tmp, 0700) == 0) {
            argv[a++] = "--mca";
            argv[a++] = "orte_tmpdir_base";
            argv[a++] = L->mpi_tmp;
        } else {
            L->mpi_tmp[0] = '\0';
        }
    }
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

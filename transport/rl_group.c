// rl_group — worker processes and request/reply with timeouts (rl_group.h). This part: the
// group itself (creation, the control socket's private folder, lookups, destroy); the others
// are named in rl_group_priv.h.
#include "rl_group_priv.h"
#include "rl_checkpoint.h"
#include "rl_clock.h"
#include "rl_err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// The worker named `name` ("sampler/1"), or NULL.
static const rl_grp_worker_t *s_find_c(const rl_group_t *g, const char *name) {
    for (int i = 0; i < g->n; i++) {
        if (strcmp(g->w[i].name, name) == 0) {
            return &g->w[i];
        }
    }
    return NULL;
}

rl_grp_worker_t *rl_grp_find(rl_group_t *g, const char *name) {
    return (rl_grp_worker_t *)s_find_c(g, name);
}

// The worker whose routing identity is `rid` or `rid#hb` (*hb set to which), or NULL.
rl_grp_worker_t *rl_grp_find_rid(rl_group_t *g, const char *rid, int *hb) {
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
    const rl_grp_worker_t *w = s_find_c(self, peer);
    return w && !w->remote ? w->pid : -1;
}

const char *rl_group_host(const rl_group_t *self, const char *peer) {
    const rl_grp_worker_t *w = s_find_c(self, peer);
    return w && w->host[0] ? w->host : NULL;
}

// The ROUTER a worker's messages travel on: the mesh's tcp one for a rank across hosts.
rl_chan_t *rl_grp_router(const rl_group_t *g, const rl_grp_worker_t *w) {
    return w->far ? g->mesh_chan : g->chan;
}

// Hex of n random bytes into out (2n + 1 bytes). Returns 0 or an errno.
int rl_grp_random_hex(char *out, size_t n) {
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
    int rc = rl_grp_random_hex(g->token, 32);
    if (!rc) {
        rc = rl_grp_random_hex(g->session, 32);
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

int rl_group_needs_model(const rl_group_t *self, const char *peer) {
    const rl_grp_worker_t *w = s_find_c(self, peer);
    return w && w->remote && w->needs_model;
}

int rl_group_is_remote(const rl_group_t *self, const char *peer) {
    const rl_grp_worker_t *w = s_find_c(self, peer);
    return w && w->remote;
}

const char *rl_group_endpoint(const rl_group_t *self, const char *peer) {
    const rl_grp_worker_t *w = s_find_c(self, peer);
    return w && w->remote ? w->endpoint : NULL;
}

void rl_group_destroy(rl_group_t **self_p, double timeout_s) {
    rl_group_t *g = *self_p;
    if (!g) {
        return;
    }
    rl_grp_reap(g);
    rl_grp_remote_events(g);
    uint64_t bye[RL_GRP_MAX_WORKERS] = {0}; // a remote's shutdown request (its session ends)
    for (int i = 0; i < g->n; i++) {
        rl_grp_worker_t *w = &g->w[i];
        if (w->alive && (!w->remote || w->ready)) {
            rl_msg_t *m = NULL;
            char e[256];
            uint64_t id = g->next_id++;
            if (rl_proto_request(RL_PROTO_SHUTDOWN, id, &m) == 0) {
                if (!w->remote) {
                    rl_chan_send(rl_grp_router(g, w), w->rid, &m, e, sizeof(e));
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
        rl_grp_reap(g);
        int alive = 0;
        for (int i = 0; i < g->n; i++) {
            alive += g->w[i].remote ? bye[i] != 0 : g->w[i].alive;
        }
        if (!alive || rl_clock_now() - t0 > timeout_s) {
            break;
        }
        rl_msg_t *m = NULL;
        char peer[256], e[256];
        rl_grp_worker_t *rw;
        if (rl_grp_recv_any(g, 50, &m, &rw, peer, sizeof(peer), e, sizeof(e)) == 0) {
            if (rw && rl_msg_id(m) == bye[rw - g->w]) {
                bye[rw - g->w] = 0;
            }
            rl_msg_free(&m);
        }
    }
    for (int i = 0; i < g->n; i++) {
        // rl_grp_reap already killed the process groups of those that exited
        rl_grp_kill(g, &g->w[i]);
        rl_chan_close(&g->w[i].chan, 0);
    }
    for (int i = 0; i < g->n_launch; i++) { // the ranks are gone: their launchers exit
        rl_grp_launch_t *L = &g->launch[i];
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
        if (L->mpi_tmp[0]) { // what a killed launcher left of its session
            rl_checkpoint_rmtree(L->mpi_tmp);
        }
    }
    for (int i = 0; i < RL_GRP_MAX_PENDING; i++) {
        rl_grp_pending_free(&g->pend[i]);
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


// rl_group_call — requests in flight (rl_group.h): post, pump, collect with timeouts, call.
#include "rl_group_priv.h"
#include "rl_err.h"
#include "rl_clock.h"

#include "rl_log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static rl_grp_pending_t *s_pending(rl_group_t *g, uint64_t id) {
    for (int i = 0; i < RL_GRP_MAX_PENDING; i++) {
        if (g->pend[i].used && g->pend[i].id == id) {
            return &g->pend[i];
        }
    }
    return NULL;
}

static void s_pending_fail(rl_grp_pending_t *p, const char *why) {
    if (p->t_done == 0) {
        snprintf(p->why, sizeof p->why, "%s", why);
        p->t_done = rl_clock_now();
    }
}

void rl_grp_pending_free(rl_grp_pending_t *p) {
    rl_msg_free(&p->reply);
    memset(p, 0, sizeof *p);
}

// Sends one request (taken) to w and records it as pending; a send that fails is recorded as the
// request's failure. Returns 0, or RL_EINVAL when the pending table is full.
static int s_post_one(rl_group_t *g, rl_grp_worker_t *w, rl_msg_t **req, uint64_t *id_out) {
    rl_grp_pending_t *p = NULL;
    for (int i = 0; i < RL_GRP_MAX_PENDING && !p; i++) {
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
                           : rl_grp_dead_error(g, w, f, sizeof f);
        } else if (rl_proto_session_set(*req, g->session) != 0) {
            bad = rl_errf(f, sizeof f, RL_ENOMEM, "out of memory");
        } else if (rl_chan_send(w->chan, NULL, req, e, sizeof e) != 0) {
            bad = rl_errf(f, sizeof f, RL_EIO, "remote %s (%s): cannot send: %s", w->name,
                          w->endpoint, e);
            rl_grp_lose(w, "cannot send: %s", e);
        }
    } else {
        int r = rl_chan_send(rl_grp_router(g, w), w->rid, req, e, sizeof(e));
        if (r) {
            // a peer that vanished has usually died: say how, when it did (within 5 s: a mesh
            // rank's death is known once its launcher, mpirun, has noticed it and exited, which
            // took over 1 s on a loaded 2-core machine)
            for (int tries = 0; tries < 100 && w->alive; tries++) {
                rl_grp_reap(g);
                if (w->alive) {
                    struct timespec ts = {0, 50000000};
                    nanosleep(&ts, NULL);
                }
            }
            bad = w->alive ? rl_errf(f, sizeof f, r, "worker %s: cannot send: %s", w->name,
                                     rl_strerror(r))
                           : rl_grp_dead_error(g, w, f, sizeof f);
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
    rl_grp_worker_t *rw;
    int r = rl_grp_recv_any(g, timeout_ms, &m, &rw, peer, sizeof(peer), e, sizeof(e));
    if (r == RL_ETIMEOUT) {
        return;
    }
    if (r == RL_EVERSION && rw) { // a remote sampler of another protocol version: no use waiting
        rl_grp_lose(rw, "%s", e);
        return;
    }
    if (r) {
        rl_log_warn("%s", e); // malformed: dropped; the request will time out if it was ours
        return;
    }
    rl_grp_worker_t *from = rw;
    if (rw ? rl_grp_remote_msg(g, rw, m) : rl_grp_bookkeep(g, m, peer, &from)) {
        rl_msg_free(&m);
        return;
    }
    rl_grp_pending_t *p = s_pending(g, rl_msg_id(m));
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
        rl_grp_worker_t *w = rc ? NULL : rl_grp_find(g, peers[i]);
        if (!rc && !w) {
            rc = rl_errf(err, err_len, RL_ENOTFOUND, "no worker %s", peers[i]);
        }
        if (!rc && s_post_one(g, w, &reqs[i], &ids[i]) != 0) {
            rc = rl_errf(err, err_len, RL_EINVAL, "more than %d requests in flight",
                         RL_GRP_MAX_PENDING);
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
    rl_grp_pending_t *ps[RL_GRP_MAX_WORKERS];
    int rc = 0;
    if (n > RL_GRP_MAX_WORKERS) {
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
        rl_grp_worker_t *waiting[RL_GRP_MAX_WORKERS];
        int wi[RL_GRP_MAX_WORKERS], nw = 0;
        rl_grp_refresh(g); // once per round, then each pending worker
        for (int i = 0; i < n; i++) {
            if (ps[i]->t_done == 0) {
                char f[RL_GROUP_WHY];
                if (rl_grp_check_one(g, ps[i]->w, f, sizeof f) != 0) {
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
                rl_grp_pending_t *p = ps[wi[j]];
                if (now - p->t_sent <= timeout_s && !fail_fast) {
                    continue;
                }
                const rl_grp_worker_t *w = waiting[j];
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
                rl_grp_kill(g, waiting[j]);
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
        if (rl_grp_cancelled(g)) {
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
        rl_grp_pending_free(ps[i]);
    }
    return rc;
}

double rl_group_done_at(rl_group_t *g, uint64_t id) {
    const rl_grp_pending_t *p = s_pending(g, id);
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
    uint64_t ids[RL_GRP_MAX_WORKERS];
    if (timed_out) {
        *timed_out = 0;
    }
    for (int i = 0; i < n; i++) {
        replies[i] = NULL;
    }
    if (n > RL_GRP_MAX_WORKERS) {
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

// rl_group_admit — who may speak to a group (rl_group.h): every message admitted by its
// identity, pid and token (or, for a remote sampler, its CURVE session), heartbeats, remote
// samplers, and waiting for every worker's hello.
#include "rl_group_priv.h"
#include "rl_err.h"
#include "rl_clock.h"

#include "rl_log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Counts (and the first few times logs) a message that is not from a worker of ours. peer: the
// worker's name once the sender is known to be that worker (`verified`), else the identity the
// connection gave itself, which anyone can claim: the log then names the connection by the
// kernel's pid and uid of its process and the identity as a claim, never as the sender.
static void s_drop(rl_group_t *g, const rl_msg_t *m, const char *peer, int verified,
                   const char *why) {
    g->dropped++;
    if (g->dropped > RL_GRP_DROP_LOGGED && g->dropped % 1000 != 0) {
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
static rl_grp_worker_t *s_sender(rl_group_t *g, const rl_msg_t *m, const char *peer, int *hb) {
    rl_grp_worker_t *w = rl_grp_find_rid(g, peer, hb);
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
int rl_grp_bookkeep(rl_group_t *g, rl_msg_t *m, const char *peer, rl_grp_worker_t **from) {
    int hb = 0;
    rl_grp_worker_t *w = s_sender(g, m, peer, &hb);
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
                    rl_chan_send(rl_grp_router(g, w), w->rid, &wel, err, sizeof(err));
                }
            }
        }
        return 1;
    }
    return 0;
}

// 1 when the caller's cancel check asks to stop waiting.
int rl_grp_cancelled(rl_group_t *g) {
    return g->cancel && g->cancel(g->cancel_ctx);
}

// A remote sampler's connection events: a handshake that succeeds, one its allowlist refuses,
// handshakes that fail (another server key, not CURVE), a connection that closes.
void rl_grp_remote_events(rl_group_t *g) {
    for (int i = 0; i < g->n; i++) {
        rl_grp_worker_t *w = &g->w[i];
        int64_t v = 0;
        for (rl_chan_event_t ev; w->chan && (ev = rl_chan_event(w->chan, &v)) != RL_CHAN_EV_NONE;) {
            if (!w->alive) {
                continue;
            }
            if (ev == RL_CHAN_EV_UP) {
                w->up = 1;
            } else if (ev == RL_CHAN_EV_AUTH) {
                rl_grp_lose(w,
                       "the sampler refused us (ZAP status %lld): the public key of "
                       "roles.client_key is not on its --allow list",
                       (long long)v);
            } else if (w->up && ev == RL_CHAN_EV_DOWN) {
                rl_grp_lose(w,
                       "the connection closed (the sampler stopped, or sent no heartbeat "
                       "for %.0f s)",
                       RL_GRP_MISSED_BEATS * g->heartbeat);
            } else if (!w->up && ++w->failed_handshakes >= 3) {
                rl_grp_lose(w,
                       "the CURVE handshake failed %d times: the sampler's public key is not "
                       "the recipe's server_key, or it does not speak CURVE",
                       w->failed_handshakes);
            }
        }
    }
}

// Waits up to timeout_ms for a message on the ROUTER or any remote sampler's connection.
// *remote: the remote it came from (NULL: the ROUTER; peer is then its connection).
int rl_grp_recv_any(rl_group_t *g, int timeout_ms, rl_msg_t **m, rl_grp_worker_t **remote,
                    char *peer, size_t peer_len, char *e, size_t e_len) {
    *remote = NULL;
    g->last_via = g->chan;
    rl_chan_t *chans[64];
    rl_grp_worker_t *owners[64];
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
int rl_grp_remote_msg(rl_group_t *g, rl_grp_worker_t *w, const rl_msg_t *m) {
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
    if (g->n == RL_GRP_MAX_WORKERS) {
        return rl_errf(err, err_len, RL_EINVAL, "more than %d workers", RL_GRP_MAX_WORKERS);
    }
    rl_grp_worker_t *w = &g->w[g->n];
    memset(w, 0, sizeof(*w));
    snprintf(w->name, sizeof(w->name), "%s/%d", role, rank);
    snprintf(w->endpoint, sizeof w->endpoint, "%s", endpoint);
    snprintf(w->log, sizeof w->log, "(on %s)", endpoint);
    w->remote = 1;
    w->pid = -1;
    char nonce[17], rid[64];
    int rc = rl_grp_random_hex(nonce, 8);
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
void rl_grp_refresh(rl_group_t *g) {
    rl_grp_reap(g);
    rl_grp_remote_events(g);
    double now = rl_clock_now();
    if (g->last_check > 0 && now - g->last_check > g->heartbeat) {
        for (int i = 0; i < g->n; i++) {
            g->w[i].last_beat = now;
        }
    }
    g->last_check = now;
}

// One worker as of the last rl_grp_refresh: dead, lost, or silent for too long. Returns 0 or why.
int rl_grp_check_one(const rl_group_t *g, const rl_grp_worker_t *w, char *err, size_t err_len) {
    if (!w->alive) {
        return rl_grp_dead_error(g, w, err, err_len);
    }
    if (w->remote) {
        return 0; // ZMTP heartbeats: a silent remote loses its connection (rl_grp_remote_events)
    }
    if (w->mesh && w->pid == 0) {
        return 0; // a rank still starting under its launcher (MPI's start-up): the launcher's
                  // exit or the caller's timeout says when it fails
    }
    double now = rl_clock_now();
    if (now - w->last_beat > RL_GRP_MISSED_BEATS * g->heartbeat) {
        return rl_errf(err, err_len, RL_ETIMEOUT,
                       "worker %s (pid %d) sent no heartbeat for %.0f s; its log: %s", w->name,
                       (int)w->pid, now - w->last_beat, w->log);
    }
    return 0;
}

// rl_grp_refresh, then the first problem among `watch` (NULL: every worker).
static int s_check(rl_group_t *g, int n, rl_grp_worker_t *const *watch, char *err, size_t err_len) {
    rl_grp_refresh(g);
    for (int i = 0; i < (watch ? n : g->n); i++) {
        int rc = rl_grp_check_one(g, watch ? watch[i] : &g->w[i], err, err_len);
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
            rl_grp_worker_t *w = &g->w[i];
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
        if (rl_grp_cancelled(g)) {
            return rl_errf(err, err_len, RL_ECANCELED, "stopped while the workers started");
        }
        rl_msg_t *m = NULL;
        char peer[256], e[512];
        rl_grp_worker_t *rw;
        rc = rl_grp_recv_any(g, 100, &m, &rw, peer, sizeof(peer), e, sizeof(e));
        if (rc == 0 && rw) {
            if (!rl_grp_remote_msg(g, rw, m)) {
                rl_log_warn("unexpected '%s' from %s before it was ready", rl_msg_op(m), rw->name);
            }
            rl_msg_free(&m);
        } else if (rc == 0) {
            rl_grp_worker_t *from;
            if (!rl_grp_bookkeep(g, m, peer, &from)) {
                rl_log_warn("unexpected '%s' from %s before it was ready", rl_msg_op(m),
                            from->name);
            }
            rl_msg_free(&m);
        } else if (rc == RL_EVERSION && rw) {
            rl_grp_lose(rw, "%s", e);
        } else if (rc != RL_ETIMEOUT) {
            rl_log_warn("%s", e);
        }
    }
}

// rl_worker — one worker process: read the secret, connect, heartbeat, load the role, hello,
// then serve requests until shutdown. The roles and their verbs are rl_role's (one file each);
// this file is the loop around them: dispatch by the role's verb table, answer every request
// (ok = false with the handler's error when it fails), drop what the controller did not send.
#include "rl_worker.h"

#include "rl_chan.h"
#include "rl_config.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_proto.h"
#include "rl_reaper.h"
#include "rl_role.h"
#include "rl_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

typedef struct {
    const rl_worker_opts_t *o;
    const rl_role_t *role;
    rl_recipe_t *recipe;
    void *state; // the role's
    rl_coll_t *mesh; // this process's mesh (a rank started by the launcher), or NULL
    rl_chan_t *chan;
    int done;
} s_worker_t;

static int s_send(s_worker_t *w, rl_msg_t **m) {
    char err[512];
    int rc = rl_chan_send(w->chan, NULL, m, err, sizeof(err));
    if (rc) {
        rl_log_error("%s/%d: send: %s", w->o->role, w->o->rank, err);
    }
    return rc;
}

// configure: the resolved recipe (parsed here: no worker reads a recipe file) and the thread
// count; the role loads what it needs. A worker configured again drops its role's state first.
static int s_configure(s_worker_t *w, const rl_msg_t *req, char *err, size_t err_len) {
    rl_proto_configure_t q;
    int rc = rl_proto_configure_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (w->state) {
        w->role->teardown(&w->state);
    }
    rl_recipe_destroy(&w->recipe);
    // the controller checked the recipe's files on its host; a worker loads what its role needs
    // and fails on that if it is missing (a sampler of `sampler serve --samplers N` is on another)
    rc = rl_recipe_load_string(w->o->algos, q.recipe, q.recipe_len, "<configure>", NULL, 0,
                               RL_RECIPE_NO_FILE_CHECKS, &w->recipe, err, err_len);
    if (!rc) {
        rl_role_env_t env = {(int)q.threads, w->mesh, w->o->rank};
        rc = w->role->setup(w->recipe, &env, &w->state, err, err_len);
    }
    if (rc) {
        rl_log_error("%s/%d: configure: %s", w->o->role, w->o->rank, err);
    }
    return rc;
}

// Serves one request by the role's verb table; `shutdown` and `configure` are the loop's.
static void s_handle(s_worker_t *w, const rl_msg_t *req) {
    char err[2048] = "";
    rl_msg_t *out = NULL;
    int rc;
    int verb = rl_proto_verb_of(rl_msg_op(req));
    if (verb == RL_PROTO_SHUTDOWN) {
        w->done = 1;
        rc = rl_proto_ok(rl_msg_id(req), &out);
    } else if (verb == RL_PROTO_CONFIGURE) {
        rc = s_configure(w, req, err, sizeof(err));
        if (!rc) {
            rc = rl_proto_ok(rl_msg_id(req), &out);
        }
    } else {
        rc = rl_role_dispatch(w->role, w->state, req, &out, err, sizeof(err));
    }
    if (rc) {
        rl_msg_free(&out);
        if (rl_proto_fail(rl_msg_id(req), err[0] ? err : rl_strerror(rc), &out) != 0) {
            rl_log_error("%s/%d: out of memory answering request %llu", w->o->role, w->o->rank,
                         (unsigned long long)rl_msg_id(req));
            return;
        }
    }
    s_send(w, &out);
}

// A rank's secret from the controller's file: "token <hex>" and the line "identity
// <role>/<rank>~<nonce>" of this rank, as the fd's two lines. Returns 0 or an error.
static int s_secret_file(const char *path, const char *role, int rank, char *out, size_t cap,
                         char *err, size_t err_len) {
    FILE *f = fopen(path, "re");
    if (!f) {
        return rl_errf(err, err_len, RL_EIO, "the mesh secret %s: %s", path, strerror(errno));
    }
    char line[512], want[96];
    snprintf(want, sizeof want, "identity %s/%d~", role, rank);
    size_t n = 0;
    int have_token = 0, have_id = 0;
    while (fgets(line, sizeof line, f)) {
        int tok = strncmp(line, "token ", 6) == 0 && !have_token;
        int id = strncmp(line, want, strlen(want)) == 0 && !have_id;
        if ((tok || id) && n + strlen(line) < cap) {
            memcpy(out + n, line, strlen(line) + 1);
            n += strlen(line);
            have_token |= tok;
            have_id |= id;
        }
    }
    fclose(f);
    memset(line, 0, sizeof line);
    return have_token && have_id
               ? 0
               : rl_errf(err, err_len, RL_EINVAL, "the mesh secret %s has no token or no %s line",
                         path, want);
}

// Reads the secret the controller wrote into fd: "token <hex>\nidentity <id>\n", then closes
// fd. Returns 0 or an error.
static int s_parse_secret(char *buf, char *token, size_t token_cap, char *identity, size_t id_cap,
                          int fd, char *err, size_t err_len);

static int s_read_secret(int fd, char *token, size_t token_cap, char *identity, size_t id_cap,
                         char *err, size_t err_len) {
    char buf[512];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0 || n + (size_t)r >= sizeof buf - 1) {
            n += r > 0 ? (size_t)r : 0;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return s_parse_secret(buf, token, token_cap, identity, id_cap, fd, err, err_len);
}

// The two lines of a secret in buf (wiped afterwards); `fd` (or -1: the mesh file) for errors.
static int s_parse_secret(char *buf, char *token, size_t token_cap, char *identity, size_t id_cap,
                          int fd, char *err, size_t err_len) {
    char *t = strstr(buf, "token "), *i = strstr(buf, "identity ");
    size_t tl = t ? strcspn(t + 6, "\n") : 0, il = i ? strcspn(i + 9, "\n") : 0;
    int bad = !t || !i || tl == 0 || il == 0 || tl >= token_cap || il >= id_cap;
    if (!bad) {
        memcpy(token, t + 6, tl);
        token[tl] = '\0';
        memcpy(identity, i + 9, il);
        identity[il] = '\0';
    }
    memset(buf, 0, strlen(buf));
    return bad ? rl_errf(err, err_len, RL_EINVAL,
                         "no secret on fd %d (the controller writes \"token ...\" and "
                         "\"identity ...\" there)", fd)
               : 0;
}

// 1 while the controller lives: our parent (a worker it spawned), or, for a rank of a mesh
// (whose parent is the MPI launcher), the controller's pid still taken.
static int s_controller_alive(const rl_worker_opts_t *o) {
    if (o->parent <= 0) {
        return 1;
    }
    if (o->mesh_dp > 0) {
        return getppid() != 1 && (kill(o->parent, 0) == 0 || errno == EPERM);
    }
    return getppid() == o->parent;
}

// A rank across hosts: its key pair (from its host's key file), the controller's public key (from
// the launcher's environment) and its identity. Returns 0 or an error.
static int s_far_secret(const rl_worker_opts_t *o, rl_curve_key_t *key, char *server_pub,
                        char *identity, size_t id_cap, char *err, size_t err_len) {
    const char *sp = getenv("RLCTL_MESH_SERVER_KEY");
    if (!sp || !rl_curve_key_valid(sp, strlen(sp))) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "RLCTL_MESH_SERVER_KEY (the controller's public key, which the launcher "
                       "passes on) is %s",
                       sp ? "not a Z85 key" : "not set");
    }
    memcpy(server_pub, sp, RL_CURVE_Z85_LEN + 1);
    snprintf(identity, id_cap, "%s/%d~%s", o->role, o->rank, o->mesh_nonce);
    return rl_curve_load_secret(o->key_file, key, err, err_len);
}

// A rank across hosts watches its connection to the controller: refused by the controller's
// allowlist, another server key, or closed after it was up (the controller is gone). Returns 0
// or why the rank stops.
static int s_far_events(rl_chan_t *chan, int *up, int *bad_handshakes, char *err, size_t err_len) {
    int64_t v;
    rl_chan_event_t ev;
    while ((ev = rl_chan_event(chan, &v)) != RL_CHAN_EV_NONE) {
        if (ev == RL_CHAN_EV_UP) {
            *up = 1;
        } else if (ev == RL_CHAN_EV_AUTH) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "the controller refused this rank (ZAP status %lld): the public key "
                           "of mesh.rank_key is not on its mesh.allow",
                           (long long)v);
        } else if (ev == RL_CHAN_EV_HANDSHAKE && ++*bad_handshakes >= 3) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "the CURVE handshake with the controller failed 3 times: the peer at "
                           "the endpoint is not the controller whose public key we were given");
        } else if (ev == RL_CHAN_EV_DOWN && *up) {
            return rl_errf(err, err_len, RL_EIO, "the connection to the controller closed");
        }
    }
    return 0;
}

// A rank of a mesh: joins the MPI world (its rank is the world rank) and points stderr at its
// own log. Returns 0 or an error.
static int s_join_mesh(rl_worker_opts_t *o, rl_coll_t **mesh_p, char *err, size_t err_len) {
    rl_mesh_t mesh = {o->mesh_dp, o->mesh_fsdp};
    int argc = 0;
    char **argv = NULL;
    int rc = rl_coll_mpi(&mesh, &argc, &argv, mesh_p, err, err_len);
    if (rc) {
        return rc;
    }
    o->rank = rl_coll_rank(*mesh_p);
    if (o->log_dir) {
        char path[4300];
        snprintf(path, sizeof path, "%s/%s-%d.log", o->log_dir, o->role, o->rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
    }
    return 0;
}

int rl_worker_main(const rl_worker_opts_t *opts) {
    // die with the controller (a rank of a mesh: with the launcher, its parent); the terminal's
    // Ctrl-C is the controller's to handle
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rl_worker_opts_t oo = *opts;
    const rl_worker_opts_t *o = &oo;
    // a role that runs programs we did not write answers for every process they start: a
    // subreaper that kills them all when it ends, on SIGTERM and at its parent's death (then
    // SIGTERM instead of SIGKILL); before any thread starts, so SIGTERM is blocked in all
    int reaps = o->serves && o->serves->reaps;
    if (reaps) {
        char e[256];
        if (rl_reaper_start(e, sizeof e) != 0) {
            rl_log_error("%s/%d: %s", o->role, o->rank, e);
            return 1;
        }
    }
    if (!s_controller_alive(o)) {
        return 1; // the controller is already gone
    }
    signal(SIGINT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    s_worker_t w;
    memset(&w, 0, sizeof(w));
    w.o = o;
    char err[2048], id[64], token[128] = "", identity[256];
    char server_pub[RL_CURVE_Z85_LEN + 1] = "", host[256] = "";
    rl_curve_key_t key;
    memset(&key, 0, sizeof key);
    int rc = 0, far = oo.mesh_dp > 0 && oo.key_file, up = 0, bad_hs = 0;
    if (far) {
        rc = s_join_mesh(&oo, &w.mesh, err, sizeof err);
        if (!rc) {
            rc = s_far_secret(&oo, &key, server_pub, identity, sizeof identity, err, sizeof err);
        }
        gethostname(host, sizeof host - 1);
    } else if (oo.mesh_dp > 0) {
        char buf[1024];
        rc = s_join_mesh(&oo, &w.mesh, err, sizeof err);
        if (!rc) {
            rc = s_secret_file(oo.secret_file, oo.role, oo.rank, buf, sizeof buf, err, sizeof err);
        }
        if (!rc) {
            rc = s_parse_secret(buf, token, sizeof token, identity, sizeof identity, -1, err,
                                sizeof err);
        }
    } else {
        rc = s_read_secret(o->secret_fd, token, sizeof token, identity, sizeof identity, err,
                           sizeof err);
    }
    snprintf(id, sizeof(id), "%s/%d", o->role, o->rank);
    double period = o->heartbeat > 0 ? o->heartbeat : 1.0;
    if (!rc) {
        rc = far ? rl_chan_connect_curve(o->endpoint, identity, o->max_frame, &key, server_pub,
                                         period, &w.chan, err, sizeof err)
                 : rl_chan_connect(o->endpoint, identity, o->max_frame, &w.chan, err, sizeof(err));
    }
    if (rc) {
        rl_log_error("%s: %s", id, err);
        memset(&key, 0, sizeof key);
        return 1;
    }
    rl_heartbeat_t *hb = NULL;
    rc = far ? rl_chan_heartbeat_start_curve(o->endpoint, identity, &key, server_pub, period, &hb,
                                             err, sizeof err)
             : rl_chan_heartbeat_start(o->endpoint, identity, token, period, &hb, err, sizeof(err));
    memset(&key, 0, sizeof key);
    // hello at once: the controller then sends `configure` (the recipe and threads), which
    // loads the role's model or rewards
    w.role = o->serves;
    if (!rc && !w.role) {
        rc = rl_errf(err, sizeof(err), RL_EINVAL, "unknown role '%s'", o->role);
    }
    // the capabilities are the role's verb table, and shutdown
    const char *caps[RL_PROTO_N_VERBS + 1];
    int ncaps = 0;
    for (int i = 0; w.role && i < w.role->n_verbs; i++) {
        caps[ncaps++] = rl_proto_verb_name(w.role->verbs[i].verb);
    }
    caps[ncaps++] = rl_proto_verb_name(RL_PROTO_SHUTDOWN);
    rl_proto_hello_t hello = {o->role, o->rank, (int64_t)getpid(), token,
                              caps,    ncaps,   rc ? err : NULL,   far ? host : NULL};
    char e2[256];
    rl_msg_t *m = NULL;
    if (rl_proto_hello_encode(&hello, 0, &m, e2, sizeof e2) != 0) {
        rl_log_error("%s: %s", id, e2);
        rc = rc ? rc : RL_ENOMEM;
    }
    memset(token, 0, sizeof token);
    if (m) {
        s_send(&w, &m);
    }
    if (rc) {
        rl_log_error("%s: %s", id, err);
    }
    uint64_t dropped = 0;
    while (!rc && !w.done) {
        rl_msg_t *req = NULL;
        int r = rl_chan_recv(w.chan, 1000, &req, NULL, 0, err, sizeof(err));
        if (r == RL_ETIMEOUT) {
            if (!s_controller_alive(o)) {
                break; // orphaned
            }
            if (far && (rc = s_far_events(w.chan, &up, &bad_hs, err, sizeof err)) != 0) {
                rl_log_error("%s: %s", id, err);
            }
            continue;
        }
        if (r) {
            rl_log_warn("%s: %s", id, err); // a malformed message: dropped, keep serving
            continue;
        }
        // only the controller that started us gives orders (someone who took over the socket's
        // path would be another process)
        // (across hosts the CURVE handshake proved the controller's key instead)
        int64_t pid = -1, uid = -1;
        int cred = rl_chan_peer_cred(w.chan, &pid, &uid) == 0;
        if (!far && (!cred || uid != (int64_t)geteuid() || (o->parent > 0 && pid != o->parent))) {
            if (++dropped <= 10 || dropped % 1000 == 0) {
                rl_log_warn("%s: dropped '%s' from pid %lld (uid %lld): not the controller "
                            "(pid %d) (%llu dropped so far)", id, rl_msg_op(req),
                            (long long)pid, (long long)uid, o->parent,
                            (unsigned long long)dropped);
            }
            rl_msg_free(&req);
            continue;
        }
        if (strcmp(rl_msg_op(req), "welcome") != 0) {
            s_handle(&w, req);
        }
        rl_msg_free(&req);
    }
    rl_chan_heartbeat_stop(&hb);
    rl_chan_close(&w.chan, 2000);
    if (w.role && w.state) {
        w.role->teardown(&w.state);
    }
    if (reaps) {
        int n = rl_reaper_sweep(2.0);
        if (n > 0) {
            rl_log_info("%s: killed %d process%s the rewards had started and left behind", id,
                        n, n == 1 ? "" : "es");
        }
    }
    rl_recipe_destroy(&w.recipe);
    rl_coll_destroy(&w.mesh);
    return rc ? 1 : 0;
}

// rl_serve — a remote sampler: CURVE server, sessions, the sampler role's verbs (see rl_serve.h).
#define _XOPEN_SOURCE 700 // realpath
#include "rl_serve.h"

#include "rl_chan.h"
#include "rl_config.h"
#include "rl_curve.h"
#include "rl_err.h"
#include "rl_hf.h"
#include "rl_http.h"
#include "rl_log.h"
#include "rl_proto.h"
#include "rl_role.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t s_stop, s_hup;

static void s_on_signal(int sig) {
    if (sig == SIGHUP) {
        s_hup = 1;
    } else {
        s_stop = 1;
    }
}

typedef struct {
    const rl_serve_opts_t *o;
    rl_chan_t *chan;
    const rl_role_t *role;
    char model[PATH_MAX]; // --model, absolute
    char model_hash[17];
    char host[256];
    // the session (active = 0: none)
    int active;
    char session[72];
    char peer[256];                 // the controller's routing identity
    char key[RL_CURVE_Z85_LEN + 1]; // its public key
    int64_t conn;                   // its connection
    char run[256];
    void *state; // the sampler role's, after configure
    rl_recipe_t *recipe;
    int done; // sessions ended
    pthread_mutex_t mu;  // held while a request is served (the HTTP thread takes it too)
    rl_tokenizer_t *tok; // --model's tokenizer (with --http)
    char http_name[300];
} s_serve_t;

// The HTTP front's backend: the session's model, under the protocol loop's lock.
static int s_http_acquire(void *ctx, rl_model_t **model, rl_tokenizer_t **tok, char *why,
                          size_t why_len) {
    s_serve_t *s = ctx;
    pthread_mutex_lock(&s->mu);
    rl_model_t *m = s->active && s->state ? rl_role_sampler_model(s->state) : NULL;
    if (!m) {
        pthread_mutex_unlock(&s->mu);
        snprintf(why, why_len,
                 "no run in progress: this sampler answers with the policy of the "
                 "run it serves");
        return 1;
    }
    *model = m;
    *tok = s->tok;
    return 0;
}

static void s_http_release(void *ctx) {
    s_serve_t *s = ctx;
    pthread_mutex_unlock(&s->mu);
}

static void s_end_session(s_serve_t *s, const char *why) {
    if (!s->active) {
        return;
    }
    if (s->state) {
        s->role->teardown(&s->state);
    }
    rl_recipe_destroy(&s->recipe);
    rl_log_info("session of %s ended: %s; ready for the next run", s->run, why);
    memset(s->session, 0, sizeof s->session);
    s->active = 0;
    s->done++;
}

// Sends a reply with the session's token (the one the request named) to peer.
static void s_reply(s_serve_t *s, const char *peer, const char *session, rl_msg_t **out) {
    char err[512];
    if (session && rl_proto_session_set(*out, session) != 0) {
        rl_msg_free(out);
        return;
    }
    if (rl_chan_send(s->chan, peer, out, err, sizeof err) != 0) {
        rl_log_warn("reply to %s: %s", peer, err);
    }
}

static void s_fail(s_serve_t *s, const char *peer, const rl_msg_t *req, const char *session,
                   const char *why) {
    rl_msg_t *out = NULL;
    if (rl_proto_fail(rl_msg_id(req), why, &out) == 0) {
        s_reply(s, peer, session, &out);
    }
}

// The socket's connection events so far: a session ends when its controller's connection
// closes. Drained before a session records its connection, so that the close of an earlier
// connection with the same descriptor number is never taken for the new one's.
static void s_events(s_serve_t *s) {
    int64_t v;
    for (rl_chan_event_t ev; (ev = rl_chan_event(s->chan, &v)) != RL_CHAN_EV_NONE;) {
        if (ev == RL_CHAN_EV_DOWN && s->active && v == s->conn) {
            s_end_session(s, "the controller's connection closed");
        }
    }
}

// attach: opens a session for this controller when none is live.
static void s_attach(s_serve_t *s, const rl_msg_t *req, const char *peer, const char *key) {
    rl_proto_attach_t q;
    char err[1024];
    if (rl_proto_attach_decode(req, &q, err, sizeof err) != 0) {
        s_fail(s, peer, req, NULL, err);
        return;
    }
    if (strlen(q.session) < 32 || strlen(q.session) >= sizeof s->session) {
        s_fail(s, peer, req, q.session, "attach: a session token of 32 to 71 characters");
        return;
    }
    int64_t conn = rl_chan_peer_conn(s->chan);
    s_events(s);
    if (s->active && strcmp(s->peer, peer) != 0) {
        snprintf(err, sizeof err, "attach: busy: this sampler serves another run (%.900s)", s->run);
        s_fail(s, peer, req, q.session, err);
        return;
    }
    if (strcmp(q.model_hash, s->model_hash) != 0) {
        snprintf(err, sizeof err,
                 "attach: this sampler serves %.800s (fingerprint %s), not the run's model.path "
                 "(fingerprint %.16s): start it with --model pointing at the same model",
                 s->model, s->model_hash, q.model_hash);
        s_fail(s, peer, req, q.session, err);
        return;
    }
    if (s->active) {
        s_end_session(s, "the same controller attached again");
    }
    s->active = 1;
    snprintf(s->session, sizeof s->session, "%s", q.session);
    snprintf(s->peer, sizeof s->peer, "%s", peer);
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->run, sizeof s->run, "%s", q.run);
    s->conn = conn;
    rl_log_info("session opened by %s (key %.8s...)", s->run, key);
    rl_proto_attach_reply_t r = {q.session, (int64_t)getpid(), s->host, s->o->threads};
    rl_msg_t *out = NULL;
    if (rl_proto_attach_reply_encode(&r, rl_msg_id(req), &out, err, sizeof err) == 0) {
        s_reply(s, peer, NULL, &out);
    }
}

// configure: the run's recipe with model.path = our model; files we do not read go unchecked.
static int s_configure(s_serve_t *s, const rl_msg_t *req, char *err, size_t err_len) {
    rl_proto_configure_t q;
    int rc = rl_proto_configure_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (s->state) {
        s->role->teardown(&s->state);
    }
    rl_recipe_destroy(&s->recipe);
    char ov[PATH_MAX + 32];
    size_t k = (size_t)snprintf(ov, sizeof ov, "model.path=\"");
    for (const char *p = s->model; *p && k + 4 < sizeof ov; p++) {
        if (*p == '"' || *p == '\\') {
            ov[k++] = '\\';
        }
        ov[k++] = *p;
    }
    snprintf(ov + k, sizeof ov - k, "\"");
    const char *ovs[1] = {ov};
    rc = rl_recipe_load_string(q.recipe, q.recipe_len, "<configure>", ovs, 1,
                               RL_RECIPE_NO_FILE_CHECKS, &s->recipe, err, err_len);
    if (!rc) {
        rc = s->role->setup(s->recipe, s->o->threads, &s->state, err, err_len);
    }
    return rc;
}

static void s_handle(s_serve_t *s, const rl_msg_t *req, const char *peer) {
    char key[RL_CURVE_Z85_LEN + 1] = "";
    // the ZAP handler admitted this connection; its key must still be allowed now
    if (rl_chan_peer_key(s->chan, key) != 0 || !rl_chan_allowed(s->chan, key)) {
        rl_log_warn("dropped '%s' from a connection whose key (%.8s...) is not on the allowlist",
                    rl_msg_op(req), key);
        return;
    }
    int verb = rl_proto_verb_of(rl_msg_op(req));
    if (verb == RL_PROTO_ATTACH) {
        s_attach(s, req, peer, key);
        return;
    }
    if (!s->active || strcmp(peer, s->peer) != 0 || !rl_proto_session_is(req, s->session)) {
        const char *theirs = NULL;
        rl_msg_get_str(req, "session", &theirs, NULL);
        rl_log_warn("refused '%s' from %s: not the session this sampler serves", rl_msg_op(req),
                    peer);
        s_fail(s, peer, req, theirs,
               s->active ? "not the session this sampler serves (another run's request?)"
                         : "no session: attach first");
        return;
    }
    char err[2048] = "";
    rl_msg_t *out = NULL;
    int rc;
    if (verb == RL_PROTO_SHUTDOWN) {
        rc = rl_proto_ok(rl_msg_id(req), &out);
        if (!rc) {
            s_reply(s, peer, s->session, &out);
        }
        s_end_session(s, "the run is over (shutdown)");
        return;
    }
    if (verb == RL_PROTO_CONFIGURE) {
        rc = s_configure(s, req, err, sizeof err);
        if (!rc) {
            rc = rl_proto_ok(rl_msg_id(req), &out);
        }
    } else {
        rc = rl_role_dispatch(s->role, s->state, req, &out, err, sizeof err);
    }
    if (rc) {
        rl_msg_free(&out);
        rl_log_warn("%s: %s", rl_msg_op(req), err[0] ? err : rl_strerror(rc));
        if (rl_proto_fail(rl_msg_id(req), err[0] ? err : rl_strerror(rc), &out) != 0) {
            return;
        }
    }
    s_reply(s, peer, s->session, &out);
}

// SIGHUP: the allowlist again; a removed key drops every connection (rebind) and ends its
// session.
static void s_reload(s_serve_t *s) {
    char err[1024];
    char(*keys)[RL_CURVE_Z85_LEN + 1] = NULL;
    int n = 0, removed = 0;
    if (rl_curve_load_allow(s->o->allow, &keys, &n, err, sizeof err) != 0) {
        rl_log_error("SIGHUP: %s; keeping the allowlist as it was", err);
        return;
    }
    rl_chan_allow(s->chan, (const char(*)[RL_CURVE_Z85_LEN + 1]) keys, n, &removed);
    free(keys);
    rl_log_info("SIGHUP: allowlist reloaded from %s: %d key%s (%d removed)", s->o->allow, n,
                n == 1 ? "" : "s", removed);
    if (s->active && !rl_chan_allowed(s->chan, s->key)) {
        s_end_session(s, "its key left the allowlist");
    }
    if (removed > 0 && rl_chan_rebind(s->chan, err, sizeof err) != 0) {
        rl_log_error("SIGHUP: cannot bind again: %s", err);
        s_stop = 1;
    }
}

int rl_serve_main(const rl_serve_opts_t *o) {
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    s_serve_t s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.role = rl_role_sampler();
    pthread_mutex_init(&s.mu, NULL);
    char err[2048];
    rl_curve_key_t key;
    char(*keys)[RL_CURVE_Z85_LEN + 1] = NULL;
    int n = 0, rc = rl_curve_load_secret(o->key, &key, err, sizeof err);
    if (!rc) {
        rc = rl_curve_load_allow(o->allow, &keys, &n, err, sizeof err);
    }
    if (!rc && !realpath(o->model, s.model)) {
        rc = rl_errf(err, sizeof err, RL_EINVAL, "--model %s: %s", o->model, strerror(errno));
    }
    if (!rc) {
        rc = rl_hf_folder_hash(s.model, s.model_hash, err, sizeof err);
    }
    if (!rc) {
        rc =
            rl_chan_bind_curve(o->bind, o->max_frame, &key, o->heartbeat, &s.chan, err, sizeof err);
    }
    memset(&key.sec, 0, sizeof key.sec);
    if (!rc) {
        rl_chan_allow(s.chan, (const char(*)[RL_CURVE_Z85_LEN + 1]) keys, n, NULL);
    }
    free(keys);
    if (rc) {
        rl_log_error("sampler serve: %s", err);
        return 1;
    }
    gethostname(s.host, sizeof s.host - 1);
    rl_http_t *http = NULL;
    rl_http_backend_t be = {&s, s_http_acquire, s_http_release, s.http_name};
    if (o->http) {
        const char *base = strrchr(s.model, '/');
        snprintf(s.http_name, sizeof s.http_name, "%.200s", base ? base + 1 : s.model);
        s.tok = rl_tokenizer_new_dir(s.model, err, sizeof err);
        if (!s.tok || rl_http_start(o->http, o->http_token, &be, &http, err, sizeof err) != 0) {
            rl_log_error("sampler serve: %s", err);
            rl_tokenizer_destroy(&s.tok);
            rl_chan_close(&s.chan, 0);
            return 1;
        }
    }
    rl_log_info("sampler serving %s (fingerprint %s), %d allowed key%s, public key %.8s...",
                s.model, s.model_hash, n, n == 1 ? "" : "s", key.pub);
    printf("listening on %s\n", rl_chan_endpoint(s.chan));
    if (http) {
        printf("http on http://%.*s:%d/v1\n", (int)(strrchr(o->http, ':') - o->http), o->http,
               rl_http_port(http));
    }
    fflush(stdout);
    uint64_t refused_logged = 0;
    while (!s_stop && (o->sessions <= 0 || s.done < o->sessions)) {
        pthread_mutex_lock(&s.mu); // a session may end here: not while HTTP holds its model
        if (s_hup) {
            s_hup = 0;
            s_reload(&s);
        }
        s_events(&s);
        pthread_mutex_unlock(&s.mu);
        uint64_t refused = rl_chan_refused(s.chan);
        if (refused > refused_logged) {
            rl_log_warn("refused %llu handshake%s from keys not on the allowlist (%llu so far)",
                        (unsigned long long)(refused - refused_logged),
                        refused - refused_logged == 1 ? "" : "s", (unsigned long long)refused);
            refused_logged = refused;
        }
        rl_msg_t *req = NULL;
        char peer[256];
        rc = rl_chan_recv(s.chan, 200, &req, peer, sizeof peer, err, sizeof err);
        if (rc == RL_ETIMEOUT) {
            continue;
        }
        if (rc) {
            rl_log_warn("%s", err); // a malformed message: dropped, keep serving
            continue;
        }
        pthread_mutex_lock(&s.mu);
        s_handle(&s, req, peer);
        pthread_mutex_unlock(&s.mu);
        rl_msg_free(&req);
    }
    rl_http_stop(&http); // no request holds the model after this
    s_end_session(&s, s_stop ? "stopped by a signal" : "done");
    rl_chan_close(&s.chan, 2000);
    rl_tokenizer_destroy(&s.tok);
    pthread_mutex_destroy(&s.mu);
    return 0;
}

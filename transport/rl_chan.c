// rl_chan — ZeroMQ transport of rl_wire messages: a ROUTER for the controller, DEALERs with
// "<role>/<rank>" identities for the workers, zero-copy frames for large tensors, polled receive
// with a timeout, and the heartbeat thread. Not the message format (rl_wire) and not the verbs
// (docs/protocol.md).
//
// Every chan owns its ZeroMQ context, so no two threads (and never a parent and its child
// process) share one; a context holds ZeroMQ's I/O and reaper threads and costs about as much as
// a socket, which is nothing at the handful of chans a process opens.
#include "rl_chan.h"
#include "rl_clock.h"
#include "rl_curve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define S_MAX_PARTS (2 + RL_WIRE_MAX_FRAMES) // identity + frame 0 + extra frames
#define S_HB_SUFFIX "#hb"

struct rl_chan {
    void *ctx;
    void *sock;
    int router;
    char endpoint[512];
    int has_cred;         // the last message's sender credentials are known
    int64_t cred_pid, cred_uid;
    // CURVE (rl_chan_bind_curve / rl_chan_connect_curve)
    int curve;                           // 1: a CURVE server, 2: a CURVE client
    void *mon;                           // PAIR connected to the socket's monitor (NULL: none)
    char peer_key[RL_CURVE_Z85_LEN + 1]; // the last message's sender's public key ("": none)
    int64_t peer_conn; // the last message's connection (its file descriptor), -1: unknown
    pthread_t zap;     // the ZAP handler (server)
    void *zap_sock;    // its REP socket (bound before the thread starts; the thread's after)
    int zap_started;
    pthread_mutex_t allow_mu;
    char (*allow)[RL_CURVE_Z85_LEN + 1]; // the allowlist (server), under allow_mu
    int n_allow;
    uint64_t refused;                      // handshakes the allowlist refused
    char server_key[RL_CURVE_Z85_LEN + 1]; // the server's secret key (server: to rebind)
    double heartbeat;
    int64_t max_frame; // ZMQ_MAXMSGSIZE
    char peer_name[64]; // a DEALER's name for its peer in messages ("": "controller")
};

// A ZeroMQ failure: returns the positive errno (passed through, STYLE §4) with what failed.
static int s_zfail(char *err, size_t err_len, const char *what, const char *endpoint) {
    int e = zmq_errno();
    rl_errf(err, err_len, e, "%s %s: %s", what, endpoint ? endpoint : "", zmq_strerror(e));
    return e ? e : RL_EIO;
}

// An identity for messages: as is when printable, else in hex (ZeroMQ's generated identities
// start with a 0 byte).
static const char *s_peer_name(char *buf, size_t cap, const void *id, size_t n) {
    const unsigned char *p = id;
    int printable = n > 0;
    for (size_t i = 0; i < n; i++) {
        printable = printable && p[i] >= 0x20 && p[i] < 0x7f;
    }
    size_t k = 0;
    if (printable) {
        k = n < cap - 1 ? n : cap - 1;
        memcpy(buf, p, k);
    } else {
        k = (size_t)snprintf(buf, cap, "0x");
        for (size_t i = 0; i < n && k + 3 < cap; i++) {
            k += (size_t)snprintf(buf + k, cap - k, "%02x", p[i]);
        }
    }
    buf[k < cap ? k : cap - 1] = '\0';
    return buf;
}

static int s_chan_new(int type, const char *endpoint, int64_t max_frame, rl_chan_t **out,
                      char *err, size_t err_len) {
    rl_chan_t *c = calloc(1, sizeof *c);
    if (!c) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c->router = type == ZMQ_ROUTER;
    c->peer_conn = -1;
    c->ctx = zmq_ctx_new();
    if (!c->ctx) {
        int rc = s_zfail(err, err_len, "zmq_ctx_new for", endpoint);
        free(c);
        return rc;
    }
    c->sock = zmq_socket(c->ctx, type);
    if (!c->sock) {
        int rc = s_zfail(err, err_len, "zmq_socket for", endpoint);
        zmq_ctx_term(c->ctx);
        free(c);
        return rc;
    }
    // A peer cannot make us allocate more than one frame may hold (the run's largest real
    // message, or the decoder's cap), nor queue more than a few messages: past RCVHWM ZeroMQ
    // stops reading its connection until we catch up.
    int64_t maxmsg = max_frame > 0 && max_frame < (int64_t)RL_WIRE_MAX_BYTES
                         ? max_frame
                         : (int64_t)RL_WIRE_MAX_BYTES;
    int zero = 0, hwm = RL_CHAN_RCV_HWM;
    c->max_frame = maxmsg;
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(c->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof zero);
    *out = c;
    return 0;
}

static void s_chan_free(rl_chan_t *c) {
    if (c->sock) {
        zmq_close(c->sock);
    }
    if (c->mon) {
        zmq_close(c->mon);
    }
    if (c->zap_started) {
        zmq_ctx_shutdown(c->ctx); // the ZAP thread's blocking recv returns ETERM: it closes
        pthread_join(c->zap, NULL);
    }
    while (zmq_ctx_term(c->ctx) != 0 && zmq_errno() == EINTR) {
    }
    if (c->curve == 1) {
        pthread_mutex_destroy(&c->allow_mu);
    }
    free(c->allow);
    memset(c->server_key, 0, sizeof c->server_key);
    free(c);
}

int rl_chan_bind(const char *endpoint, int64_t max_frame, rl_chan_t **out, char *err,
                 size_t err_len) {
    *out = NULL;
    char ep[sizeof((rl_chan_t *)0)->endpoint];
    size_t n = endpoint ? strlen(endpoint) : 0;
    if (n == 0 || n + 1 >= sizeof ep) {
        return rl_errf(err, err_len, RL_EINVAL, "bad endpoint \"%s\"", endpoint ? endpoint : "");
    }
    memcpy(ep, endpoint, n + 1);
    // "tcp://host:0" asks for any free port; ZeroMQ spells that "*"
    if (strncmp(ep, "tcp://", 6) == 0 && n >= 2 && strcmp(ep + n - 2, ":0") == 0) {
        ep[n - 1] = '*';
    }
    rl_chan_t *c;
    int rc = s_chan_new(ZMQ_ROUTER, endpoint, max_frame, &c, err, err_len);
    if (rc) {
        return rc;
    }
    int one = 1;
    // ROUTER_MANDATORY: a message for an unknown peer fails the send (RL_ENOTFOUND) instead of
    // vanishing. No ROUTER_HANDOVER: a second connection under a name in use is ignored, so it
    // can neither take a worker's messages nor answer in its place.
    if (zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) != 0) {
        rc = s_zfail(err, err_len, "zmq_setsockopt on", endpoint);
        goto fail;
    }
#ifdef ZMQ_IPC_FILTER_UID
    if (strncmp(ep, "ipc://", 6) == 0) {
        // deprecated in libzmq but present in 4.3; the folder's mode and the per-message
        // credential check hold without it
        int uid = (int)geteuid();
        zmq_setsockopt(c->sock, ZMQ_IPC_FILTER_UID, &uid, sizeof uid);
    }
#endif
    if (zmq_bind(c->sock, ep) != 0) {
        rc = s_zfail(err, err_len, "cannot bind", endpoint);
        goto fail;
    }
    size_t len = sizeof c->endpoint;
    if (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, c->endpoint, &len) != 0) {
        memcpy(c->endpoint, ep, n + 1);
    }
    *out = c;
    return 0;
fail:
    s_chan_free(c);
    return rc;
}

int rl_chan_connect(const char *endpoint, const char *identity, int64_t max_frame,
                    rl_chan_t **out, char *err, size_t err_len) {
    *out = NULL;
    size_t n = endpoint ? strlen(endpoint) : 0;
    size_t idn = identity ? strlen(identity) : 0;
    if (n == 0 || n >= sizeof((rl_chan_t *)0)->endpoint) {
        return rl_errf(err, err_len, RL_EINVAL, "bad endpoint \"%s\"", endpoint ? endpoint : "");
    }
    if (idn == 0 || idn > 255) {
        return rl_errf(err, err_len, RL_EINVAL, "identity of %zu bytes (1..255)", idn);
    }
    rl_chan_t *c;
    int rc = s_chan_new(ZMQ_DEALER, endpoint, max_frame, &c, err, err_len);
    if (rc) {
        return rc;
    }
    if (zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, identity, idn) != 0) {
        rc = s_zfail(err, err_len, "bad identity for", endpoint);
        goto fail;
    }
    if (zmq_connect(c->sock, endpoint) != 0) {
        rc = s_zfail(err, err_len, "cannot connect to", endpoint);
        goto fail;
    }
    memcpy(c->endpoint, endpoint, n + 1);
    *out = c;
    return 0;
fail:
    s_chan_free(c);
    return rc;
}

void rl_chan_close(rl_chan_t **self_p, int linger_ms) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_chan_t *c = *self_p;
    // ZeroMQ's linger only ever waits for queued outgoing messages: with none, close is
    // immediate whatever the value
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    s_chan_free(c);
    *self_p = NULL;
}

const char *rl_chan_endpoint(const rl_chan_t *self) {
    return self->endpoint;
}

// ---- send ------------------------------------------------------------------------------------

static int s_send_part(void *sock, const void *data, size_t len, int flags) {
    int rc;
    while ((rc = zmq_send(sock, data, len, flags)) < 0 && zmq_errno() == EINTR) {
    }
    return rc < 0 ? -1 : 0;
}

// Sends m's frames; flags adds ZMQ_DONTWAIT for the heartbeat (a full queue drops a heartbeat
// rather than blocking its thread). Does not free m.
static int s_send(rl_chan_t *self, const char *peer, rl_msg_t *m, int flags, char *err,
                  size_t err_len) {
    const rl_frame_t *fr;
    int nf;
    int rc = rl_msg_encode(m, &fr, &nf);
    if (rc) {
        return rl_errf(err, err_len, rc, "encode op \"%s\": %s", rl_msg_op(m), rl_msg_errmsg(m));
    }
    if (self->router) {
        if (!peer || !peer[0]) {
            return rl_errf(err, err_len, RL_EINVAL, "send op \"%s\" on a ROUTER needs a peer",
                           rl_msg_op(m));
        }
        if (s_send_part(self->sock, peer, strlen(peer), ZMQ_SNDMORE | flags) != 0) {
            if (zmq_errno() == EHOSTUNREACH) {
                return rl_errf(err, err_len, RL_ENOTFOUND, "send op \"%s\": no peer \"%s\"",
                               rl_msg_op(m), peer);
            }
            return s_zfail(err, err_len, "send to", peer);
        }
        flags &= ~ZMQ_DONTWAIT; // the rest of a started multipart message always queues
    }
    if (s_send_part(self->sock, fr[0].data, fr[0].len, (nf > 1 ? ZMQ_SNDMORE : 0) | flags) != 0) {
        return s_zfail(err, err_len, "send on", self->endpoint);
    }
    for (int i = 1; i < nf; i++) {
        // zero-copy: ZeroMQ's I/O thread writes straight from the tensor's storage and calls
        // release when done with it, which may be after m is freed (the frame holds a reference)
        void (*release)(void *, void *);
        void *hint;
        zmq_msg_t zm;
        RL_ASSERT(rl_msg_frame_hold(m, i, &release, &hint) == 0);
        if (zmq_msg_init_data(&zm, (void *)fr[i].data, fr[i].len, release, hint) != 0) {
            release((void *)fr[i].data, hint);
            return s_zfail(err, err_len, "zmq_msg_init_data on", self->endpoint);
        }
        int r;
        while ((r = zmq_msg_send(&zm, self->sock, i + 1 < nf ? ZMQ_SNDMORE : 0)) < 0 &&
               zmq_errno() == EINTR) {
        }
        if (r < 0) {
            int e = s_zfail(err, err_len, "send on", self->endpoint);
            zmq_msg_close(&zm); // ZeroMQ did not take it: this drops our reference
            return e;
        }
    }
    return 0;
}

int rl_chan_send(rl_chan_t *self, const char *peer, rl_msg_t **msg_p, char *err, size_t err_len) {
    int rc = s_send(self, peer, *msg_p, 0, err, err_len);
    rl_msg_free(msg_p);
    return rc;
}

// ---- receive ---------------------------------------------------------------------------------

// The release of a received frame a message kept (rl_msg_decode_owned): the zmq_msg_t lives on
// the heap so that it can outlive rl_chan_recv.
static void s_zmsg_release(void *data, void *hint) {
    (void)data;
    zmq_msg_close(hint);
    free(hint);
}

static zmq_msg_t *s_part_new(void) {
    zmq_msg_t *p = malloc(sizeof *p);
    if (p) {
        zmq_msg_init(p);
    }
    return p;
}

static void s_part_free(zmq_msg_t *p) {
    if (p) {
        zmq_msg_close(p);
        free(p);
    }
}

// The sender's credentials from a received part's "Peer-Address" property: on ipc:// libzmq
// appends ":<uid>:<gid>:<pid>" from SO_PEERCRED of the connection. Returns 1 when found.
static int s_cred(zmq_msg_t *part, int64_t *pid, int64_t *uid) {
    const char *pa = zmq_msg_gets(part, "Peer-Address");
    if (!pa) {
        return 0;
    }
    // the last three ':'-separated fields, each all digits
    long long v[3];
    const char *end = pa + strlen(pa);
    for (int k = 2; k >= 0; k--) {
        const char *p = end;
        while (p > pa && p[-1] >= '0' && p[-1] <= '9') {
            p--;
        }
        if (p == end || p == pa || p[-1] != ':' || end - p > 18) {
            return 0;
        }
        long long x = 0;
        for (const char *q = p; q < end; q++) {
            x = x * 10 + (*q - '0');
        }
        v[k] = x;
        end = p - 1;
    }
    *uid = v[0];
    *pid = v[2];
    return 1;
}

int rl_chan_peer_cred(const rl_chan_t *self, int64_t *pid, int64_t *uid) {
    if (!self->has_cred) {
        return RL_ENOTFOUND;
    }
    *pid = self->cred_pid;
    *uid = self->cred_uid;
    return 0;
}

int rl_chan_recv(rl_chan_t *self, int timeout_ms, rl_msg_t **out, char *peer, size_t peer_len,
                 char *err, size_t err_len) {
    *out = NULL;
    self->has_cred = 0;
    self->peer_key[0] = '\0';
    self->peer_conn = -1;
    if (peer && peer_len) {
        peer[0] = '\0';
    }
    double deadline = rl_clock_now() + (timeout_ms > 0 ? timeout_ms : 0) / 1000.0;
    zmq_msg_t *parts[S_MAX_PARTS] = {NULL};
    int np = 0;
    for (;;) {
        long wait = -1;
        if (timeout_ms >= 0) {
            double left = deadline - rl_clock_now();
            wait = left > 0 ? (long)(left * 1000.0 + 0.999) : 0;
        }
        zmq_pollitem_t it = {.socket = self->sock, .events = ZMQ_POLLIN};
        int r = zmq_poll(&it, 1, wait);
        if (r < 0 && zmq_errno() == EINTR) {
            continue;
        }
        if (r < 0) {
            return s_zfail(err, err_len, "poll on", self->endpoint);
        }
        if (r == 0) {
            if (timeout_ms < 0) {
                continue;
            }
            return rl_errf(err, err_len, RL_ETIMEOUT, "no message on %s within %d ms",
                           self->endpoint, timeout_ms);
        }
        parts[0] = s_part_new();
        if (!parts[0]) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        if (zmq_msg_recv(parts[0], self->sock, ZMQ_DONTWAIT) >= 0) {
            np = 1;
            break;
        }
        int e = zmq_errno();
        s_part_free(parts[0]);
        parts[0] = NULL;
        if (e != EAGAIN && e != EINTR) {
            return s_zfail(err, err_len, "recv on", self->endpoint);
        }
    }
    // The rest of a multipart message is already here (ZeroMQ delivers it whole). Parts past
    // the cap (or that find no memory) are read and dropped, so the next message starts clean.
    int overflow = 0, nomem = 0, more = zmq_msg_more(parts[0]);
    while (more) {
        zmq_msg_t spill;
        zmq_msg_t *pm = np < S_MAX_PARTS && !nomem ? s_part_new() : NULL;
        if (!pm) {
            nomem |= np < S_MAX_PARTS;
            zmq_msg_init(&spill);
            pm = &spill;
        }
        int r;
        while ((r = zmq_msg_recv(pm, self->sock, 0)) < 0 && zmq_errno() == EINTR) {
        }
        more = r >= 0 && zmq_msg_more(pm);
        if (pm == &spill) {
            overflow++;
            zmq_msg_close(&spill);
        } else if (r < 0) {
            s_part_free(pm);
        } else {
            parts[np++] = pm;
        }
    }
    int off = self->router ? 1 : 0;
    int64_t pid = -1, uid = -1;
    // from the first frame of the message itself: a ROUTER's identity part carries no
    // properties when zmq_poll prefetched it (libzmq 4.3)
    int has_cred = s_cred(parts[np > off ? off : 0], &pid, &uid);
    char key[RL_CURVE_Z85_LEN + 1] = "";
    int64_t conn = -1;
    if (self->curve) {
        zmq_msg_t *p0 = parts[np > off ? off : 0];
        const char *uidk = zmq_msg_gets(p0, "User-Id");
        if (uidk && strlen(uidk) == RL_CURVE_Z85_LEN) {
            memcpy(key, uidk, sizeof key);
        }
        int fd = zmq_msg_get(p0, ZMQ_SRCFD);
        conn = fd >= 0 ? fd : -1;
    }
    char who[256];
    snprintf(who, sizeof who, "%s", self->peer_name[0] ? self->peer_name : "controller");
    if (self->router) {
        s_peer_name(who, sizeof who, zmq_msg_data(parts[0]), zmq_msg_size(parts[0]));
        if (peer && peer_len) {
            snprintf(peer, peer_len, "%s", who);
        }
    }
    int rc;
    int nframes = np - off;
    if (nomem) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "from %s: out of memory: dropped", who);
        goto done;
    }
    if (overflow || nframes < 1) {
        rc = rl_errf(err, err_len, RL_EPROTO, "from %s: %d frames (1..%d): dropped", who,
                     nframes + overflow, 1 + RL_WIRE_MAX_FRAMES);
        goto done;
    }
    // Large tensors keep ZeroMQ's receive buffer when it is aligned for their dtype (it is, for
    // a frame of its own: libzmq allocates it whole), instead of a second copy of their size.
    rl_frame_t frames[S_MAX_PARTS];
    rl_frame_owner_t owners[S_MAX_PARTS];
    for (int i = 0; i < nframes; i++) {
        frames[i].data = zmq_msg_data(parts[off + i]);
        frames[i].len = zmq_msg_size(parts[off + i]);
        owners[i].release = i > 0 ? s_zmsg_release : NULL;
        owners[i].hint = parts[off + i];
        owners[i].kept = 0;
    }
    char why[384];
    rc = rl_msg_decode_owned(frames, owners, nframes, out, why, sizeof why);
    if (rc) {
        rl_errf(err, err_len, rc, "from %s: %s: dropped", who, why);
    }
    for (int i = 1; rc == 0 && i < nframes; i++) {
        if (owners[i].kept) {
            parts[off + i] = NULL; // the message's now
        }
    }
    if (rc == 0) {
        self->has_cred = has_cred;
        self->cred_pid = pid;
        self->cred_uid = uid;
        memcpy(self->peer_key, key, sizeof key);
        self->peer_conn = conn;
    }
done:
    for (int i = 0; i < np; i++) {
        s_part_free(parts[i]);
    }
    return rc;
}

// ---- heartbeat -------------------------------------------------------------------------------

struct rl_heartbeat {
    rl_chan_t *chan;
    char token[128]; // "" = none
    double period_s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; // on CLOCK_MONOTONIC: a wall-clock jump neither stalls nor floods beats
    int stop;
};

static void *s_heartbeat_main(void *arg) {
    rl_heartbeat_t *hb = arg;
    uint64_t seq = 0;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&hb->mu);
    while (!hb->stop) {
        pthread_mutex_unlock(&hb->mu);
        rl_msg_t *m = rl_msg_new("hb", ++seq);
        if (m && hb->token[0] && rl_msg_set_str(m, "token", hb->token) != 0) {
            rl_msg_free(&m);
        }
        if (m) {
            // a full queue (controller gone or stalled) drops this beat; the next one retries
            s_send(hb->chan, NULL, m, ZMQ_DONTWAIT, NULL, 0);
            rl_msg_free(&m);
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double t = (double)next.tv_sec + 1e-9 * (double)next.tv_nsec + hb->period_s;
        double tnow = (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
        t = t > tnow ? t : tnow + hb->period_s; // fell behind (suspended): no burst of beats
        next.tv_sec = (time_t)t;
        next.tv_nsec = (long)((t - (double)next.tv_sec) * 1e9);
        pthread_mutex_lock(&hb->mu);
        while (!hb->stop && pthread_cond_timedwait(&hb->cv, &hb->mu, &next) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&hb->mu);
    return NULL;
}

// Both heartbeats: over ipc:// (client NULL) or as a CURVE client of server_pub.
static int s_heartbeat_start(const char *endpoint, const char *identity, const char *token,
                             const rl_curve_key_t *client, const char *server_pub, double period_s,
                             rl_heartbeat_t **out, char *err, size_t err_len) {
    *out = NULL;
    char id[256];
    size_t n = identity ? strlen(identity) : 0;
    if (n == 0 || n + strlen(S_HB_SUFFIX) > 255) {
        return rl_errf(err, err_len, RL_EINVAL, "heartbeat identity of %zu bytes (1..%zu)", n,
                       255 - strlen(S_HB_SUFFIX));
    }
    if (token && strlen(token) >= sizeof(((rl_heartbeat_t *)0)->token)) {
        return rl_errf(err, err_len, RL_EINVAL, "heartbeat token of %zu bytes", strlen(token));
    }
    if (!(period_s > 0.0) || period_s > 86400.0) {
        return rl_errf(err, err_len, RL_EINVAL, "heartbeat period %g s", period_s);
    }
    snprintf(id, sizeof id, "%s%s", identity, S_HB_SUFFIX);
    rl_heartbeat_t *hb = calloc(1, sizeof *hb);
    if (!hb) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    hb->period_s = period_s;
    snprintf(hb->token, sizeof hb->token, "%s", token ? token : "");
    // it never receives: a tiny frame cap
    int rc = client ? rl_chan_connect_curve(endpoint, id, 4096, client, server_pub, period_s,
                                            &hb->chan, err, err_len)
                    : rl_chan_connect(endpoint, id, 4096, &hb->chan, err, err_len);
    if (rc) {
        free(hb);
        return rc;
    }
    int hwm = 4; // stale beats are worthless: queue a few, drop the rest
    zmq_setsockopt(hb->chan->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hb->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&hb->mu, NULL);
    rc = pthread_create(&hb->thread, NULL, s_heartbeat_main, hb);
    if (rc != 0) {
        rl_errf(err, err_len, rc, "heartbeat thread: %s", strerror(rc));
        pthread_cond_destroy(&hb->cv);
        pthread_mutex_destroy(&hb->mu);
        rl_chan_close(&hb->chan, 0);
        free(hb);
        return rc;
    }
    *out = hb;
    return 0;
}

int rl_chan_heartbeat_start(const char *endpoint, const char *identity, const char *token,
                            double period_s, rl_heartbeat_t **out, char *err, size_t err_len) {
    return s_heartbeat_start(endpoint, identity, token, NULL, NULL, period_s, out, err, err_len);
}

int rl_chan_heartbeat_start_curve(const char *endpoint, const char *identity,
                                  const rl_curve_key_t *client, const char *server_pub,
                                  double period_s, rl_heartbeat_t **out, char *err,
                                  size_t err_len) {
    return s_heartbeat_start(endpoint, identity, NULL, client, server_pub, period_s, out, err,
                             err_len);
}

void rl_chan_heartbeat_stop(rl_heartbeat_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_heartbeat_t *hb = *self_p;
    pthread_mutex_lock(&hb->mu);
    hb->stop = 1;
    pthread_cond_signal(&hb->cv);
    pthread_mutex_unlock(&hb->mu);
    pthread_join(hb->thread, NULL);
    pthread_cond_destroy(&hb->cv);
    pthread_mutex_destroy(&hb->mu);
    rl_chan_close(&hb->chan, 0);
    free(hb);
    *self_p = NULL;
}

// ---- CURVE -----------------------------------------------------------------------------------

// The ZAP handler of a CURVE server (RFC 27): ZeroMQ asks it about every handshake on the
// chan's context's inproc://zeromq.zap.01; it admits a client whose public key is on the
// allowlist (answering its Z85 key as the User-Id, which every message of that connection then
// carries) and refuses the rest with 400. Ends when the context shuts down.
static void *s_zap_main(void *arg) {
    rl_chan_t *c = arg;
    void *rep = c->zap_sock; // bound by rl_chan_bind_curve, ours from here on
    for (;;) {
        // version, request id, domain, address, routing id, mechanism, credentials...
        char part[8][256];
        size_t len[8];
        int np = 0, more = 1, err = 0;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            int r = zmq_msg_recv(&m, rep, 0);
            if (r < 0) {
                zmq_msg_close(&m);
                if (zmq_errno() == EINTR) {
                    continue;
                }
                err = 1;
                break;
            }
            if (np < 8) {
                len[np] = zmq_msg_size(&m) < sizeof part[0] ? zmq_msg_size(&m) : 0;
                memcpy(part[np], zmq_msg_data(&m), len[np]);
                part[np][len[np]] = '\0';
                np++;
            }
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        if (err) {
            break; // the context is shutting down
        }
        char key[RL_CURVE_Z85_LEN + 1] = "";
        int ok = 0;
        if (np >= 7 && len[0] == 3 && !memcmp(part[0], "1.0", 3) && len[5] == 5 &&
            !memcmp(part[5], "CURVE", 5) && len[6] == 32) {
            zmq_z85_encode(key, (const uint8_t *)part[6], 32);
            pthread_mutex_lock(&c->allow_mu);
            for (int i = 0; i < c->n_allow && !ok; i++) {
                ok = strcmp(c->allow[i], key) == 0;
            }
            c->refused += !ok;
            pthread_mutex_unlock(&c->allow_mu);
        }
        const char *code = ok ? "200" : "400";
        const char *text = ok ? "OK" : "public key not on the allowlist";
        zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
        zmq_send(rep, part[1], np > 1 ? len[1] : 0, ZMQ_SNDMORE);
        zmq_send(rep, code, 3, ZMQ_SNDMORE);
        zmq_send(rep, text, strlen(text), ZMQ_SNDMORE);
        zmq_send(rep, key, ok ? strlen(key) : 0, ZMQ_SNDMORE);
        zmq_send(rep, "", 0, 0);
    }
    zmq_close(rep);
    return NULL;
}

// Heartbeats of the ZMTP layer (libzmq's I/O thread answers them even while our thread
// computes): a peer silent for 10 periods loses its connection.
static void s_zmtp_heartbeat(rl_chan_t *c, double heartbeat_s) {
    int ivl = (int)((heartbeat_s > 0 ? heartbeat_s : 1.0) * 1000.0);
    int tmo = 10 * ivl;
    c->heartbeat = heartbeat_s > 0 ? heartbeat_s : 1.0;
    zmq_setsockopt(c->sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(c->sock, ZMQ_HEARTBEAT_TIMEOUT, &tmo, sizeof tmo);
    zmq_setsockopt(c->sock, ZMQ_HEARTBEAT_TTL, &tmo, sizeof tmo);
}

// A monitor of the socket's connection events, read by rl_chan_event.
static int s_monitor(rl_chan_t *c, char *err, size_t err_len) {
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://rl-mon-%p", (void *)c);
    int ev = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    if (zmq_socket_monitor(c->sock, ep, ev) != 0 || !(c->mon = zmq_socket(c->ctx, ZMQ_PAIR)) ||
        zmq_connect(c->mon, ep) != 0) {
        return s_zfail(err, err_len, "cannot monitor", c->endpoint);
    }
    int zero = 0;
    zmq_setsockopt(c->mon, ZMQ_LINGER, &zero, sizeof zero);
    return 0;
}

// Binds c->sock (a CURVE server) at its endpoint.
static int s_curve_server_bind(rl_chan_t *c, const char *ep, char *err, size_t err_len) {
    int one = 1;
    const char *domain = "rlctl";
    if (zmq_setsockopt(c->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, c->server_key, RL_CURVE_Z85_LEN) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0) {
        return s_zfail(err, err_len, "cannot set up CURVE on", ep);
    }
    s_zmtp_heartbeat(c, c->heartbeat);
    int rc = s_monitor(c, err, err_len);
    if (!rc && zmq_bind(c->sock, ep) != 0) {
        rc = s_zfail(err, err_len, "cannot bind", ep);
    }
    return rc;
}

int rl_chan_bind_curve(const char *endpoint, int64_t max_frame, const rl_curve_key_t *server,
                       double heartbeat_s, rl_chan_t **out, char *err, size_t err_len) {
    *out = NULL;
    size_t n = endpoint ? strlen(endpoint) : 0;
    if (n == 0 || n + 1 >= sizeof((rl_chan_t *)0)->endpoint || strncmp(endpoint, "tcp://", 6)) {
        return rl_errf(err, err_len, RL_EINVAL, "bad endpoint \"%s\" (tcp://HOST:PORT)",
                       endpoint ? endpoint : "");
    }
    if (!server || !rl_curve_key_valid(server->sec, strlen(server->sec))) {
        return rl_errf(err, err_len, RL_EINVAL, "a CURVE server needs its secret key");
    }
    char ep[sizeof((rl_chan_t *)0)->endpoint];
    memcpy(ep, endpoint, n + 1);
    if (n >= 2 && strcmp(ep + n - 2, ":0") == 0) {
        ep[n - 1] = '*';
    }
    rl_chan_t *c;
    int rc = s_chan_new(ZMQ_ROUTER, endpoint, max_frame, &c, err, err_len);
    if (rc) {
        return rc;
    }
    c->curve = 1;
    c->heartbeat = heartbeat_s;
    pthread_mutex_init(&c->allow_mu, NULL);
    memcpy(c->server_key, server->sec, sizeof c->server_key);
    snprintf(c->endpoint, sizeof c->endpoint, "%s", ep);
    // the ZAP handler must be bound before the first handshake: its socket is bound here, then
    // handed to its thread (pthread_create is the full barrier ZeroMQ asks for a socket that
    // changes threads)
    int zero = 0;
    c->zap_sock = zmq_socket(c->ctx, ZMQ_REP);
    if (!c->zap_sock || zmq_setsockopt(c->zap_sock, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_bind(c->zap_sock, "inproc://zeromq.zap.01") != 0) {
        rc = s_zfail(err, err_len, "cannot bind the ZAP handler of", ep);
        if (c->zap_sock) {
            zmq_close(c->zap_sock);
        }
        s_chan_free(c);
        return rc;
    }
    if (pthread_create(&c->zap, NULL, s_zap_main, c) != 0) {
        zmq_close(c->zap_sock);
        s_chan_free(c);
        return rl_errf(err, err_len, RL_EIO, "cannot start the ZAP handler thread");
    }
    c->zap_started = 1;
    rc = s_curve_server_bind(c, ep, err, err_len);
    if (rc) {
        s_chan_free(c);
        return rc;
    }
    size_t len = sizeof c->endpoint;
    if (zmq_getsockopt(c->sock, ZMQ_LAST_ENDPOINT, c->endpoint, &len) != 0) {
        memcpy(c->endpoint, ep, n + 1);
    }
    *out = c;
    return 0;
}

int rl_chan_allow(rl_chan_t *self, const char (*keys)[RL_CURVE_Z85_LEN + 1], int n, int *removed) {
    if (removed) {
        *removed = 0;
    }
    if (self->curve != 1) {
        return RL_EINVAL;
    }
    char(*copy)[RL_CURVE_Z85_LEN + 1] = n > 0 ? malloc((size_t)n * sizeof *copy) : NULL;
    if (n > 0 && !copy) {
        return RL_ENOMEM;
    }
    if (n > 0) {
        memcpy(copy, keys, (size_t)n * sizeof *copy);
    }
    pthread_mutex_lock(&self->allow_mu);
    int gone = 0;
    for (int i = 0; i < self->n_allow; i++) {
        int kept = 0;
        for (int j = 0; j < n && !kept; j++) {
            kept = strcmp(self->allow[i], copy[j]) == 0;
        }
        gone += !kept;
    }
    free(self->allow);
    self->allow = copy;
    self->n_allow = n;
    pthread_mutex_unlock(&self->allow_mu);
    if (removed) {
        *removed = gone;
    }
    return 0;
}

int rl_chan_allowed(rl_chan_t *self, const char *key) {
    if (self->curve != 1 || !key) {
        return 0;
    }
    int ok = 0;
    pthread_mutex_lock(&self->allow_mu);
    for (int i = 0; i < self->n_allow && !ok; i++) {
        ok = strcmp(self->allow[i], key) == 0;
    }
    pthread_mutex_unlock(&self->allow_mu);
    return ok;
}

uint64_t rl_chan_refused(rl_chan_t *self) {
    if (self->curve != 1) {
        return 0;
    }
    pthread_mutex_lock(&self->allow_mu);
    uint64_t n = self->refused;
    pthread_mutex_unlock(&self->allow_mu);
    return n;
}

int rl_chan_rebind(rl_chan_t *self, char *err, size_t err_len) {
    if (self->curve != 1) {
        return rl_errf(err, err_len, RL_EINVAL, "rebind: not a CURVE server");
    }
    // a fresh socket: every connection of the old one closes; clients still allowed reconnect
    // (ZeroMQ does it by itself) and pass the ZAP handler again
    void *old = self->sock, *oldmon = self->mon;
    zmq_socket_monitor(old, NULL, 0);
    zmq_close(old);
    if (oldmon) {
        zmq_close(oldmon);
    }
    self->mon = NULL;
    self->sock = zmq_socket(self->ctx, ZMQ_ROUTER);
    if (!self->sock) {
        return s_zfail(err, err_len, "zmq_socket for", self->endpoint);
    }
    int zero = 0, hwm = RL_CHAN_RCV_HWM;
    zmq_setsockopt(self->sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(self->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(self->sock, ZMQ_MAXMSGSIZE, &self->max_frame, sizeof self->max_frame);
    // the port is taken again as soon as the old listener is gone; retry briefly
    int rc = 0;
    for (int i = 0; i < 50; i++) {
        if (self->mon) {
            zmq_close(self->mon);
            self->mon = NULL;
        }
        rc = s_curve_server_bind(self, self->endpoint, err, err_len);
        if (rc == 0 || rc != EADDRINUSE) {
            break;
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    return rc;
}

int rl_chan_connect_curve(const char *endpoint, const char *identity, int64_t max_frame,
                          const rl_curve_key_t *client, const char *server_pub, double heartbeat_s,
                          rl_chan_t **out, char *err, size_t err_len) {
    *out = NULL;
    size_t n = endpoint ? strlen(endpoint) : 0;
    size_t idn = identity ? strlen(identity) : 0;
    if (n == 0 || n >= sizeof((rl_chan_t *)0)->endpoint || strncmp(endpoint, "tcp://", 6)) {
        return rl_errf(err, err_len, RL_EINVAL, "bad endpoint \"%s\" (tcp://HOST:PORT)",
                       endpoint ? endpoint : "");
    }
    if (idn == 0 || idn > 255) {
        return rl_errf(err, err_len, RL_EINVAL, "identity of %zu bytes (1..255)", idn);
    }
    if (!client || !rl_curve_key_valid(client->sec, strlen(client->sec)) || !server_pub ||
        !rl_curve_key_valid(server_pub, strlen(server_pub))) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "a CURVE client needs its key pair and the "
                       "server's public key");
    }
    rl_chan_t *c;
    int rc = s_chan_new(ZMQ_DEALER, endpoint, max_frame, &c, err, err_len);
    if (rc) {
        return rc;
    }
    c->curve = 2;
    memcpy(c->endpoint, endpoint, n + 1);
    if (zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, identity, idn) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, server_pub, RL_CURVE_Z85_LEN) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, client->pub, RL_CURVE_Z85_LEN) != 0 ||
        zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, client->sec, RL_CURVE_Z85_LEN) != 0) {
        rc = s_zfail(err, err_len, "cannot set up CURVE for", endpoint);
        goto fail;
    }
    s_zmtp_heartbeat(c, heartbeat_s);
    // a connection that is gone (refused, closed) has no pipe: a send would wait forever
    int sndtmo = (int)(10.0 * c->heartbeat * 1000.0);
    zmq_setsockopt(c->sock, ZMQ_SNDTIMEO, &sndtmo, sizeof sndtmo);
    if ((rc = s_monitor(c, err, err_len)) != 0) {
        goto fail;
    }
    if (zmq_connect(c->sock, endpoint) != 0) {
        rc = s_zfail(err, err_len, "cannot connect to", endpoint);
        goto fail;
    }
    *out = c;
    return 0;
fail:
    s_chan_free(c);
    return rc;
}

rl_chan_event_t rl_chan_event(rl_chan_t *self, int64_t *value) {
    if (!self->mon) {
        return RL_CHAN_EV_NONE;
    }
    zmq_msg_t a, b;
    zmq_msg_init(&a);
    if (zmq_msg_recv(&a, self->mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&a);
        return RL_CHAN_EV_NONE;
    }
    uint16_t ev = 0;
    uint32_t val = 0;
    if (zmq_msg_size(&a) >= 6) {
        memcpy(&ev, zmq_msg_data(&a), 2);
        memcpy(&val, (const char *)zmq_msg_data(&a) + 2, 4);
    }
    int more = zmq_msg_more(&a);
    zmq_msg_close(&a);
    while (more) { // the endpoint part
        zmq_msg_init(&b);
        more = zmq_msg_recv(&b, self->mon, 0) >= 0 && zmq_msg_more(&b);
        zmq_msg_close(&b);
    }
    if (value) {
        *value = val;
    }
    switch (ev) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: return RL_CHAN_EV_UP;
    case ZMQ_EVENT_DISCONNECTED: return RL_CHAN_EV_DOWN;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: return RL_CHAN_EV_AUTH;
    default: return RL_CHAN_EV_HANDSHAKE;
    }
}

int rl_chan_peer_key(const rl_chan_t *self, char out[RL_CURVE_Z85_LEN + 1]) {
    memcpy(out, self->peer_key, RL_CURVE_Z85_LEN + 1);
    return self->peer_key[0] ? 0 : RL_ENOTFOUND;
}

int64_t rl_chan_peer_conn(const rl_chan_t *self) {
    return self->peer_conn;
}

void *rl_chan_socket(rl_chan_t *self) {
    return self->sock;
}

void rl_chan_set_peer_name(rl_chan_t *self, const char *name) {
    snprintf(self->peer_name, sizeof self->peer_name, "%s", name ? name : "");
}

int rl_chan_poll(rl_chan_t *const *chans, int n, int timeout_ms, int *ready) {
    zmq_pollitem_t it[64];
    if (n < 1 || n > 64) {
        return RL_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        it[i] = (zmq_pollitem_t){.socket = chans[i]->sock, .events = ZMQ_POLLIN};
        ready[i] = 0;
    }
    int r;
    while ((r = zmq_poll(it, n, timeout_ms)) < 0 && zmq_errno() == EINTR) {
    }
    if (r < 0) {
        return zmq_errno() ? zmq_errno() : RL_EIO;
    }
    for (int i = 0; i < n; i++) {
        ready[i] = (it[i].revents & ZMQ_POLLIN) != 0;
    }
    return 0;
}

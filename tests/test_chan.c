// test_chan — rl_chan over ipc:// in a temp dir (and tcp://127.0.0.1 port 0): request/reply
// between a ROUTER and DEALERs by identity, a 16 MiB gifted tensor each way, a send to an
// unknown peer (RL_ENOTFOUND), receive timeouts (RL_ETIMEOUT), garbage from a raw ZeroMQ socket
// dropped and reported while the next good message still arrives, and the heartbeat thread
// (with its token). The hardening of the control channel (docs/reliability.md): the kernel's
// pid and uid of each message's sender; a second connection under a name in use is ignored
// (no handover); a frame over the chan's cap is never delivered; a process of another uid
// cannot connect to an ipc:// ROUTER even where the file system would let it.
#include "rl_chan.h"
#include "rl_test.h"

#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Receives one message that must decode, within 5 s.
static rl_msg_t *recv_ok(rl_chan_t *c, char *peer, size_t peer_len) {
    rl_msg_t *m = NULL;
    char err[512] = "";
    int rc = rl_chan_recv(c, 5000, &m, peer, peer_len, err, sizeof err);
    CHECK_MSG(rc == 0 && m, "recv: %d %s", rc, err);
    return m;
}

static void test_request_reply(const char *ep) {
    char err[512] = "";
    rl_chan_t *ctl = NULL, *w0 = NULL, *w1 = NULL;
    int rc = rl_chan_bind(ep, 0, &ctl, err, sizeof err);
    CHECK_MSG(rc == 0, "bind %s: %s", ep, err);
    if (rc) {
        return;
    }
    const char *bound = rl_chan_endpoint(ctl);
    if (strncmp(ep, "tcp://", 6) == 0) {
        CHECK_MSG(strstr(bound, ":0") == NULL && strrchr(bound, ':')[1] != '*',
                  "port not resolved: %s", bound);
    } else {
        CHECK_STR(bound, ep);
    }
    CHECK_INT(rl_chan_connect(bound, "sampler/0", 0, &w0, err, sizeof err), 0);
    CHECK_INT(rl_chan_connect(bound, "actor/1", 0, &w1, err, sizeof err), 0);
    if (!w0 || !w1) {
        goto done;
    }

    // hello from both; the ROUTER learns each identity
    for (int i = 0; i < 2; i++) {
        rl_msg_t *h = rl_msg_new("hello", 100 + (uint64_t)i);
        rl_msg_set_str(h, "role", i ? "actor" : "sampler");
        rl_msg_set_int(h, "rank", i);
        CHECK_INT(rl_chan_send(i ? w1 : w0, NULL, &h, err, sizeof err), 0);
        CHECK(h == NULL);
    }
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        char peer[256];
        rl_msg_t *m = recv_ok(ctl, peer, sizeof peer);
        if (!m) {
            continue;
        }
        CHECK_STR(rl_msg_op(m), "hello");
        int64_t rank = -1;
        CHECK_INT(rl_msg_get_int(m, "rank", &rank), 0);
        CHECK_STR(peer, rank ? "actor/1" : "sampler/0");
        CHECK_INT(rl_msg_id(m), 100 + rank);
        seen |= 1 << rank;
        rl_msg_free(&m);
    }
    CHECK_INT(seen, 3);

    // a request to each by name, a reply with the same id
    for (int i = 0; i < 2; i++) {
        rl_msg_t *q = rl_msg_new("logprobs", 7 + (uint64_t)i);
        rl_msg_set_bool(q, "adapter", i);
        CHECK_INT(rl_chan_send(ctl, i ? "actor/1" : "sampler/0", &q, err, sizeof err), 0);
    }
    for (int i = 0; i < 2; i++) {
        rl_chan_t *w = i ? w1 : w0;
        rl_msg_t *q = recv_ok(w, NULL, 0);
        if (!q) {
            continue;
        }
        int adapter = -1;
        CHECK_INT(rl_msg_get_bool(q, "adapter", &adapter), 0);
        CHECK_INT(adapter, i);
        CHECK_INT(rl_msg_id(q), 7 + i);
        rl_msg_t *a = rl_msg_new("reply", rl_msg_id(q));
        rl_msg_set_bool(a, "ok", 1);
        CHECK_INT(rl_chan_send(w, NULL, &a, err, sizeof err), 0);
        rl_msg_free(&q);
    }
    for (int i = 0; i < 2; i++) {
        char peer[256];
        rl_msg_t *a = recv_ok(ctl, peer, sizeof peer);
        if (a) {
            CHECK_STR(rl_msg_op(a), "reply");
            CHECK_INT(rl_msg_id(a), strcmp(peer, "actor/1") == 0 ? 8 : 7);
        }
        rl_msg_free(&a);
    }

    // unknown peer: the send fails instead of vanishing
    rl_msg_t *q = rl_msg_new("generate", 9);
    rc = rl_chan_send(ctl, "sampler/7", &q, err, sizeof err);
    CHECK_INT(rc, RL_ENOTFOUND);
    CHECK_CONTAINS(err, "sampler/7");
    CHECK(q == NULL);
    // a ROUTER needs a peer
    q = rl_msg_new("generate", 9);
    CHECK_INT(rl_chan_send(ctl, NULL, &q, err, sizeof err), RL_EINVAL);

    // timeouts on both sides; 0 polls
    rl_msg_t *m = NULL;
    double t0 = now_s();
    CHECK_INT(rl_chan_recv(ctl, 60, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    double dt = now_s() - t0;
    CHECK_MSG(dt >= 0.055 && dt < 2.0, "timeout after %.3f s", dt);
    CHECK(m == NULL);
    CHECK_CONTAINS(err, "within 60 ms");
    CHECK_INT(rl_chan_recv(w0, 0, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);
done:
    rl_chan_close(&w0, 0);
    rl_chan_close(&w1, 0);
    rl_chan_close(&ctl, 0);
    rl_chan_close(&ctl, 0); // a no-op on NULL
}

// 16 MiB of f32 both ways as gifted zero-copy frames, plus a small inline tensor beside it.
static void test_big_tensor(const char *ep) {
    char err[512] = "";
    rl_chan_t *ctl = NULL, *w = NULL;
    CHECK_INT(rl_chan_bind(ep, 0, &ctl, err, sizeof err), 0);
    CHECK_INT(rl_chan_connect(ep, "actor/0", 0, &w, err, sizeof err), 0);
    if (!ctl || !w) {
        goto done;
    }
    const size_t n = (16u << 20) / sizeof(float);
    for (int dir = 0; dir < 2; dir++) {
        float *g = malloc(n * sizeof *g);
        for (size_t i = 0; i < n; i++) {
            g[i] = (float)(i % 100003) * (dir ? -0.5f : 0.25f);
        }
        int64_t shape[2] = {(int64_t)(n / 1024), 1024};
        int32_t small[3] = {1, -2, 3};
        int64_t s3 = 3;
        rl_msg_t *m = rl_msg_new(dir ? "load_weights" : "export_weights", 11);
        CHECK_INT(rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 2, shape, g), 0);
        CHECK_INT(rl_msg_set_tensor(m, "small", RL_DT_I32, 1, &s3, small), 0);
        CHECK_INT(rl_msg_set_int(m, "version", 3), 0);
        if (dir == 0) {
            // the DEALER speaks first, so the ROUTER knows "actor/0" when it answers
            CHECK_INT(rl_chan_send(w, NULL, &m, err, sizeof err), 0);
        } else {
            CHECK_INT(rl_chan_send(ctl, "actor/0", &m, err, sizeof err), 0);
        }
        char peer[256];
        rl_msg_t *r = recv_ok(dir ? w : ctl, dir ? NULL : peer, dir ? 0 : sizeof peer);
        if (!r) {
            continue;
        }
        if (dir == 0) {
            CHECK_STR(peer, "actor/0");
        }
        int64_t got[2];
        const void *p = NULL;
        CHECK_INT(rl_msg_get_tensor(r, "weights", RL_DT_F32, 2, got, &p), 0);
        CHECK(got[0] == shape[0] && got[1] == shape[1]);
        size_t bad = 0;
        const float *f = p;
        for (size_t i = 0; p && i < n; i++) {
            bad += f[i] != (float)(i % 100003) * (dir ? -0.5f : 0.25f);
        }
        CHECK_MSG(p && bad == 0, "%zu values differ", bad);
        CHECK_INT(rl_msg_get_tensor(r, "small", RL_DT_I32, 1, got, &p), 0);
        CHECK(got[0] == 3 && ((const int32_t *)p)[1] == -2);
        if (dir == 0) {
            // forward the received message as it is: its tensor (which may be ZeroMQ's receive
            // buffer, kept by the decoder) goes out again as a zero-copy frame
            CHECK_INT(rl_chan_send(ctl, "actor/0", &r, err, sizeof err), 0);
            CHECK(r == NULL);
            rl_msg_t *back = recv_ok(w, NULL, 0);
            const void *q = NULL;
            if (back) {
                CHECK_INT(rl_msg_get_tensor(back, "weights", RL_DT_F32, 2, got, &q), 0);
                CHECK(q && ((const float *)q)[n - 1] == (float)((n - 1) % 100003) * 0.25f);
            }
            rl_msg_free(&back);
        }
        rl_msg_free(&r);
    }
done:
    rl_chan_close(&w, 1000);
    rl_chan_close(&ctl, 0);
}

// A raw ZeroMQ DEALER (its own context) sends garbage; each bad message is reported with the
// peer's name and dropped, and the good message after it arrives intact.
static void test_garbage(const char *ep) {
    char err[512] = "";
    rl_chan_t *ctl = NULL;
    CHECK_INT(rl_chan_bind(ep, 0, &ctl, err, sizeof err), 0);
    if (!ctl) {
        return;
    }
    void *zctx = zmq_ctx_new();
    void *raw = zmq_socket(zctx, ZMQ_DEALER);
    zmq_setsockopt(raw, ZMQ_ROUTING_ID, "raw/0", 5);
    CHECK_INT(zmq_connect(raw, ep), 0);

    // 1: not msgpack; 2: a map of garbage; 3: a wrong version; 4: too many frames;
    // 5: an unreferenced extra frame; 6: empty frame; then a good one, then nothing
    zmq_send(raw, "\xc1\xc1\xc1", 3, 0);
    zmq_send(raw, "\x83\x01\x02\x03\x04\x05\x06", 7, 0);
    rl_msg_t *v2 = rl_msg_new("hello", 1);
    const rl_frame_t *fr;
    int nf;
    rl_msg_encode(v2, &fr, &nf);
    unsigned char *bytes = malloc(fr[0].len);
    memcpy(bytes, fr[0].data, fr[0].len);
    CHECK(bytes[0] == 0x83 && bytes[1] == 0xa1 && bytes[2] == 'v' && bytes[3] == 0x02);
    bytes[3] = 0x03; // v = 3
    zmq_send(raw, bytes, fr[0].len, 0);
    for (int i = 0; i < 70; i++) {
        zmq_send(raw, "x", 1, i < 69 ? ZMQ_SNDMORE : 0);
    }
    zmq_send(raw, fr[0].data, fr[0].len, ZMQ_SNDMORE);
    zmq_send(raw, "extra", 5, 0);
    zmq_send(raw, "", 0, 0);
    rl_msg_t *good = rl_msg_new("hello", 77);
    rl_msg_set_str(good, "role", "raw");
    rl_msg_encode(good, &fr, &nf);
    zmq_send(raw, fr[0].data, fr[0].len, 0);

    const struct {
        int rc;
        const char *what;
    } want[] = {
        {RL_EPROTO, "byte 0xc1 is not a msgpack type"},
        {RL_EPROTO, "a key must be a str, found uint"},
        {RL_EVERSION, "protocol version 3"},
        {RL_EPROTO, "70 frames"},
        {RL_EPROTO, "frame 1 (5 bytes) is not referenced"},
        {RL_EPROTO, "truncated"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        rl_msg_t *m = NULL;
        char peer[256] = "";
        int rc = rl_chan_recv(ctl, 5000, &m, peer, sizeof peer, err, sizeof err);
        CHECK_MSG(rc == want[i].rc, "garbage %zu: rc %d (%s)", i, rc, err);
        CHECK(m == NULL);
        CHECK_CONTAINS(err, "from raw/0");
        CHECK_CONTAINS(err, want[i].what);
        CHECK_STR(peer, "raw/0"); // known even when the message is not, to answer it
    }
    char peer[256];
    rl_msg_t *m = recv_ok(ctl, peer, sizeof peer);
    if (m) {
        CHECK_INT(rl_msg_id(m), 77);
        CHECK_STR(peer, "raw/0");
    }
    rl_msg_free(&m);
    CHECK_INT(rl_chan_recv(ctl, 20, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);

    // a peer without an identity is named in hex
    void *anon = zmq_socket(zctx, ZMQ_DEALER);
    CHECK_INT(zmq_connect(anon, ep), 0);
    zmq_send(anon, "\xc1", 1, 0);
    CHECK_INT(rl_chan_recv(ctl, 5000, &m, peer, sizeof peer, err, sizeof err), RL_EPROTO);
    CHECK_CONTAINS(err, "from 0x00");

    free(bytes);
    rl_msg_free(&v2);
    rl_msg_free(&good);
    zmq_close(anon);
    zmq_close(raw);
    zmq_ctx_term(zctx);
    rl_chan_close(&ctl, 0);
}

static void test_heartbeat(const char *ep) {
    char err[512] = "";
    rl_chan_t *ctl = NULL;
    rl_heartbeat_t *hb = NULL;
    CHECK_INT(rl_chan_bind(ep, 0, &ctl, err, sizeof err), 0);
    CHECK_INT(rl_chan_heartbeat_start(ep, "sampler/2", "t0ken", 0.05, &hb, err, sizeof err), 0);
    if (!ctl || !hb) {
        goto done;
    }
    double t0 = now_s();
    uint64_t last = 0;
    int beats = 0;
    while (beats < 4 && now_s() - t0 < 5.0) {
        char peer[256];
        rl_msg_t *m = recv_ok(ctl, peer, sizeof peer);
        if (!m) {
            break;
        }
        CHECK_STR(rl_msg_op(m), "hb");
        CHECK_STR(peer, "sampler/2#hb");
        CHECK(rl_msg_id(m) > last); // ids count up
        last = rl_msg_id(m);
        const char *tok = "";
        CHECK_INT(rl_msg_get_str(m, "token", &tok, NULL), 0);
        CHECK_STR(tok, "t0ken");
        CHECK_INT(rl_msg_count(m), 1);
        beats++;
        rl_msg_free(&m);
    }
    double dt = now_s() - t0;
    CHECK_INT(beats, 4);
    // four beats, the first at once: about three periods (generous upper bound: a busy machine)
    CHECK_MSG(dt >= 0.1 && dt < 3.0, "4 beats in %.3f s", dt);
    double s0 = now_s();
    rl_chan_heartbeat_stop(&hb);
    CHECK(hb == NULL);
    CHECK_MSG(now_s() - s0 < 0.5, "stop took %.3f s", now_s() - s0);
    rl_chan_heartbeat_stop(&hb); // a no-op on NULL
    // after stop: nothing more than what was already in flight
    rl_msg_t *m = NULL;
    int late = 0;
    while (rl_chan_recv(ctl, 200, &m, NULL, 0, err, sizeof err) == 0) {
        late++;
        rl_msg_free(&m);
    }
    CHECK_MSG(late <= 2, "%d beats after stop", late);
    // a heartbeat with nobody listening never blocks its thread or its stop
    rl_heartbeat_t *lonely = NULL;
    char ep2[700];
    snprintf(ep2, sizeof ep2, "%.600s.nobody", ep);
    CHECK_INT(rl_chan_heartbeat_start(ep2, "actor/0", NULL, 0.001, &lonely, err, sizeof err), 0);
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000}, NULL);
    s0 = now_s();
    rl_chan_heartbeat_stop(&lonely);
    CHECK_MSG(now_s() - s0 < 0.5, "lonely stop took %.3f s", now_s() - s0);
    CHECK_INT(rl_chan_heartbeat_start(ep, "", NULL, 1.0, &lonely, err, sizeof err), RL_EINVAL);
    CHECK_INT(rl_chan_heartbeat_start(ep, "a", NULL, 0.0, &lonely, err, sizeof err), RL_EINVAL);
done:
    rl_chan_heartbeat_stop(&hb);
    rl_chan_close(&ctl, 0);
}


// The sender's credentials: on ipc:// our own pid and uid (the DEALER is in this process); on
// tcp:// unknown.
static void test_credentials(const char *ep) {
    char err[512] = "";
    rl_chan_t *ctl = NULL, *w = NULL;
    CHECK_INT(rl_chan_bind(ep, 0, &ctl, err, sizeof err), 0);
    CHECK_INT(rl_chan_connect(rl_chan_endpoint(ctl), "actor/0", 0, &w, err, sizeof err), 0);
    if (!ctl || !w) {
        goto done;
    }
    int64_t pid = -1, uid = -1;
    CHECK_INT(rl_chan_peer_cred(ctl, &pid, &uid), RL_ENOTFOUND); // nothing received yet
    rl_msg_t *m = rl_msg_new("hello", 1);
    CHECK_INT(rl_chan_send(w, NULL, &m, err, sizeof err), 0);
    m = recv_ok(ctl, NULL, 0);
    int ipc = strncmp(ep, "ipc://", 6) == 0;
    CHECK_INT(rl_chan_peer_cred(ctl, &pid, &uid), ipc ? 0 : RL_ENOTFOUND);
    if (ipc) {
        CHECK_INT((int)pid, (int)getpid());
        CHECK_INT((int)uid, (int)geteuid());
    }
    rl_msg_free(&m);
    // and the controller's, seen by the DEALER
    m = rl_msg_new("welcome", 1);
    CHECK_INT(rl_chan_send(ctl, "actor/0", &m, err, sizeof err), 0);
    m = recv_ok(w, NULL, 0);
    CHECK_INT(rl_chan_peer_cred(w, &pid, &uid), ipc ? 0 : RL_ENOTFOUND);
    CHECK(!ipc || pid == (int64_t)getpid());
    rl_msg_free(&m);
done:
    rl_chan_close(&w, 0);
    rl_chan_close(&ctl, 0);
}

// A second connection under an identity in use is ignored: its messages never arrive, and
// messages for that name still go to the first connection (with ZMQ_ROUTER_HANDOVER the second
// would have taken them).
static void test_no_handover(const char *ep) {
    char err[512] = "";
    rl_chan_t *ctl = NULL, *real = NULL, *fake = NULL;
    CHECK_INT(rl_chan_bind(ep, 0, &ctl, err, sizeof err), 0);
    CHECK_INT(rl_chan_connect(ep, "sampler/0", 0, &real, err, sizeof err), 0);
    if (!ctl || !real) {
        goto done;
    }
    rl_msg_t *m = rl_msg_new("hello", 1);
    CHECK_INT(rl_chan_send(real, NULL, &m, err, sizeof err), 0);
    m = recv_ok(ctl, NULL, 0);
    rl_msg_free(&m);
    CHECK_INT(rl_chan_connect(ep, "sampler/0", 0, &fake, err, sizeof err), 0);
    for (int i = 0; fake && i < 3; i++) {
        m = rl_msg_new("reply", 50 + (uint64_t)i);
        CHECK_INT(rl_chan_send(fake, NULL, &m, err, sizeof err), 0);
    }
    m = NULL;
    CHECK_INT(rl_chan_recv(ctl, 300, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    rl_msg_free(&m);
    m = rl_msg_new("generate", 2);
    CHECK_INT(rl_chan_send(ctl, "sampler/0", &m, err, sizeof err), 0);
    m = recv_ok(real, NULL, 0);
    CHECK(m && rl_msg_id(m) == 2);
    rl_msg_free(&m);
    CHECK_INT(rl_chan_recv(fake, 200, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);
done:
    rl_chan_close(&fake, 0);
    rl_chan_close(&real, 0);
    rl_chan_close(&ctl, 0);
}

// A frame over the cap never arrives (its connection is dropped); a good message from a fresh
// connection does. Both sides: the ROUTER's cap and the DEALER's.
static void test_max_frame(const char *ep) {
    char err[512] = "";
    rl_chan_t *ctl = NULL, *big = NULL, *ok = NULL;
    const int64_t cap = 1 << 20;
    CHECK_INT(rl_chan_bind(ep, cap, &ctl, err, sizeof err), 0);
    CHECK_INT(rl_chan_connect(ep, "actor/0", cap, &big, err, sizeof err), 0);
    if (!ctl || !big) {
        goto done;
    }
    size_t n = (size_t)(2 * cap) / sizeof(float);
    float *w = calloc(n, sizeof *w);
    int64_t shape[1] = {(int64_t)n};
    rl_msg_t *m = rl_msg_new("reply", 1);
    CHECK_INT(rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 1, shape, w), 0);
    CHECK_INT(rl_chan_send(big, NULL, &m, err, sizeof err), 0);
    CHECK_INT(rl_chan_recv(ctl, 500, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    CHECK_INT(rl_chan_connect(ep, "actor/1", cap, &ok, err, sizeof err), 0);
    m = rl_msg_new("hello", 2);
    float *small = calloc(1024, sizeof *small);
    int64_t s1[1] = {1024};
    CHECK_INT(rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 1, s1, small), 0);
    CHECK_INT(rl_chan_send(ok, NULL, &m, err, sizeof err), 0);
    char peer[256];
    m = recv_ok(ctl, peer, sizeof peer);
    CHECK(m && rl_msg_id(m) == 2);
    CHECK_STR(peer, "actor/1");
    rl_msg_free(&m);
    // the DEALER's cap: a 2 MiB frame for actor/1 never reaches it
    w = calloc(n, sizeof *w);
    m = rl_msg_new("load_weights", 3);
    CHECK_INT(rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 1, shape, w), 0);
    CHECK_INT(rl_chan_send(ctl, "actor/1", &m, err, sizeof err), 0);
    CHECK_INT(rl_chan_recv(ok, 500, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);
done:
    rl_chan_close(&ok, 0);
    rl_chan_close(&big, 0);
    rl_chan_close(&ctl, 0);
}

// A process of another uid connects to an ipc:// ROUTER whose socket file it may reach (a
// 0777 folder): its messages never arrive. Needs root to change uid; skipped otherwise.
static void test_other_uid(const char *dir) {
    if (geteuid() != 0) {
        printf("test_other_uid: skipped (needs root to run a process as another uid)\n");
        return;
    }
    char sub[600], ep[700], err[512] = "";
    snprintf(sub, sizeof sub, "%s/open", dir);
    CHECK_INT(mkdir(sub, 0777), 0);
    chmod(sub, 0777);
    chmod(dir, 0755);
    snprintf(ep, sizeof ep, "ipc://%s/ctl", sub);
    rl_chan_t *ctl = NULL;
    CHECK_INT(rl_chan_bind(ep, 0, &ctl, err, sizeof err), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/ctl", sub);
    chmod(path, 0777); // the socket file itself open to all: only the uid filter is left
    if (!ctl) {
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            _exit(3);
        }
        rl_chan_t *w = NULL;
        char e[256];
        if (rl_chan_connect(ep, "sampler/0", 0, &w, e, sizeof e) != 0) {
            _exit(4);
        }
        for (int i = 0; i < 5; i++) {
            rl_msg_t *m = rl_msg_new("hello", 1);
            rl_chan_send(w, NULL, &m, e, sizeof e);
            nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 100 * 1000 * 1000}, NULL);
        }
        rl_chan_close(&w, 0);
        _exit(0);
    }
    rl_msg_t *m = NULL;
    CHECK_INT(rl_chan_recv(ctl, 1500, &m, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    rl_msg_free(&m);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other-uid process: status %d", st);
    rl_chan_close(&ctl, 0);
}

static void test_bad_args(const char *dir) {
    char err[512] = "";
    rl_chan_t *c = NULL;
    CHECK(rl_chan_bind("nonsense://x", 0, &c, err, sizeof err) != 0 && c == NULL);
    CHECK(err[0] != '\0');
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/no/such/dir/sock", dir);
    CHECK(rl_chan_bind(ep, 0, &c, err, sizeof err) != 0 && c == NULL);
    CHECK_CONTAINS(err, "cannot bind");
    CHECK_INT(rl_chan_connect("ipc:///tmp/x", "", 0, &c, err, sizeof err), RL_EINVAL);
    char longid[300];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    CHECK_INT(rl_chan_connect("ipc:///tmp/x", longid, 0, &c, err, sizeof err), RL_EINVAL);
    CHECK(c == NULL);
}

int main(void) {
    char dir[] = "/tmp/rl_test_chan.XXXXXX";
    rl_test_tmpdir(dir, sizeof dir, "chan");
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/ctl", dir);
    RL_TEST_RUN(test_request_reply, ep);
    RL_TEST_RUN(test_request_reply, "tcp://127.0.0.1:0");
    snprintf(ep, sizeof ep, "ipc://%s/big", dir);
    RL_TEST_RUN(test_big_tensor, ep);
    snprintf(ep, sizeof ep, "ipc://%s/garbage", dir);
    RL_TEST_RUN(test_garbage, ep);
    snprintf(ep, sizeof ep, "ipc://%s/hb", dir);
    RL_TEST_RUN(test_heartbeat, ep);
    snprintf(ep, sizeof ep, "ipc://%s/cred", dir);
    RL_TEST_RUN(test_credentials, ep);
    RL_TEST_RUN(test_credentials, "tcp://127.0.0.1:0");
    snprintf(ep, sizeof ep, "ipc://%s/handover", dir);
    RL_TEST_RUN(test_no_handover, ep);
    snprintf(ep, sizeof ep, "ipc://%s/maxframe", dir);
    RL_TEST_RUN(test_max_frame, ep);
    RL_TEST_RUN(test_other_uid, dir);
    RL_TEST_RUN(test_bad_args, dir);
    rl_test_tmpdir_done(dir);
    RL_TEST_DONE();
}

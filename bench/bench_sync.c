// bench_sync — weight sync over the role protocol beside raw ZeroMQ, in the same run. For N:
//   (a) the ceiling: raw ZeroMQ, ipc loopback, N bytes as one zero-copy frame DEALER -> ROUTER,
//       a small ack back;
//   (b) the weight-sync message: an rl_msg holding a gifted f32 tensor of N bytes, rl_chan_send
//       DEALER -> ROUTER, rl_chan_recv (decode + copy into aligned storage), memcpy into the
//       destination weights, a {ok} reply back.
// Both run round trip by round trip in one thread, each socket with its own context (as in two
// processes). Filling the gifted buffer (malloc + memcpy of the weights: the exporter's work) is
// timed apart and reported beside (b). N: the LoRA payload of cookbook/models/arith-base, 16 MiB
// and 64 MiB. Each figure is the median over runs of the mean round trip of a run. Not a test:
// it prints figures and ratios (target: (b) <= 2x (a)).
// A second table does the same over tcp://127.0.0.1, the transport of remote samplers
// (docs/remote.md): (c) raw ZeroMQ tcp zero-copy, (d) the weight-sync message from a CURVE client
// (the controller) to a CURVE server (the sampler), every byte encrypted and authenticated, with
// the full weights of arith-base as one more payload; and a third table beside (e) raw ZeroMQ
// over tcp with CURVE, which isolates the encryption's cost from ours.
// `--serve HOST --keys DIR` runs the three server ends alone at HOST:5601..5603 and `--connect
// HOST --keys DIR` the client ends and the tcp tables, so that the two ends can live in two
// network namespaces (bench/sync_netns.sh). With an argument `--tcp-host
// ADDR` the server side binds there instead (e.g. a veth address into another network namespace).
#include "rl_bench.h"
#include "rl_chan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

// LoRA r=8 on all 7 projections of arith-base (hidden C=128, intermediate 384, 4 layers,
// 4 heads / 2 kv heads of head_dim 32): each projection in->out adds A (r,in) + B (out,r).
static size_t s_lora_floats(void) {
    const size_t C = 128, I = 384, L = 4, NH = 4, NKV = 2, HD = 32, R = 8;
    const size_t io[7][2] = {
        {C, NH * HD},  // q
        {C, NKV * HD}, // k
        {C, NKV * HD}, // v
        {NH * HD, C},  // o
        {C, I},        // gate
        {C, I},        // up
        {I, C},        // down
    };
    size_t per_layer = 0;
    for (int p = 0; p < 7; p++) {
        per_layer += R * io[p][0] + io[p][1] * R;
    }
    return L * per_layer; // 4 * 19,456 = 77,824
}

static void s_noop_free(void *data, void *hint) {
    (void)data;
    (void)hint;
}

static void s_die(const char *what, const char *err) {
    fprintf(stderr, "bench_sync: %s: %s\n", what, err);
    exit(1);
}

// ---- (a) raw ZeroMQ --------------------------------------------------------------------------

typedef struct {
    void *ctx_d, *ctx_r, *dealer, *router;
} s_raw_t;

// keys: NULL, or {server pub, server sec, client pub, client sec} for raw CURVE (no ZAP
// handler: libzmq then admits any client).
static void s_raw_open(s_raw_t *r, const char *ep, const rl_curve_key_t *keys) {
    r->ctx_d = zmq_ctx_new();
    r->ctx_r = zmq_ctx_new();
    r->router = zmq_socket(r->ctx_r, ZMQ_ROUTER);
    r->dealer = zmq_socket(r->ctx_d, ZMQ_DEALER);
    zmq_setsockopt(r->dealer, ZMQ_ROUTING_ID, "raw/0", 5);
    if (keys) {
        int one = 1;
        zmq_setsockopt(r->router, ZMQ_CURVE_SERVER, &one, sizeof one);
        zmq_setsockopt(r->router, ZMQ_CURVE_SECRETKEY, keys[0].sec, 40);
        zmq_setsockopt(r->dealer, ZMQ_CURVE_SERVERKEY, keys[0].pub, 40);
        zmq_setsockopt(r->dealer, ZMQ_CURVE_PUBLICKEY, keys[1].pub, 40);
        zmq_setsockopt(r->dealer, ZMQ_CURVE_SECRETKEY, keys[1].sec, 40);
    }
    char bound[256];
    size_t bl = sizeof bound;
    if (zmq_bind(r->router, ep) != 0 ||
        zmq_getsockopt(r->router, ZMQ_LAST_ENDPOINT, bound, &bl) != 0 ||
        zmq_connect(r->dealer, bound) != 0) {
        s_die("raw zmq", zmq_strerror(zmq_errno()));
    }
}

static void s_raw_close(s_raw_t *r) {
    int zero = 0;
    zmq_setsockopt(r->dealer, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(r->dealer);
    zmq_close(r->router);
    zmq_ctx_term(r->ctx_d);
    zmq_ctx_term(r->ctx_r);
}

static void s_raw_round(s_raw_t *r, const void *src, size_t n) {
    zmq_msg_t m;
    zmq_msg_init_data(&m, (void *)src, n, s_noop_free, NULL);
    if (zmq_msg_send(&m, r->dealer, 0) < 0) {
        s_die("raw send", zmq_strerror(zmq_errno()));
    }
    if (!r->router) { // the other end is another process (--connect): wait for its ack
        char ack[8];
        if (zmq_recv(r->dealer, ack, sizeof ack, 0) != 3) {
            s_die("raw ack", zmq_strerror(zmq_errno()));
        }
        return;
    }
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, r->router, 0) < 0 || zmq_msg_recv(&body, r->router, 0) < 0 ||
        zmq_msg_size(&body) != n) {
        s_die("raw recv", zmq_strerror(zmq_errno()));
    }
    zmq_msg_send(&id, r->router, ZMQ_SNDMORE);
    zmq_send(r->router, "ack", 3, 0);
    zmq_msg_close(&body);
    char ack[8];
    if (zmq_recv(r->dealer, ack, sizeof ack, 0) != 3) {
        s_die("raw ack", zmq_strerror(zmq_errno()));
    }
}

// ---- (b) the weight-sync message -------------------------------------------------------------

typedef struct {
    rl_chan_t *ctl, *actor;
} s_sync_t;

// One round trip; returns its time without the gift fill, adds the fill's time to *fill_s.
static double s_sync_round(s_sync_t *s, const float *src, float *dst, size_t nf, double *fill_s) {
    char err[512];
    double t0 = rl_bench_now();
    float *gift = malloc(nf * sizeof *gift);
    if (!gift) {
        s_die("sync", "out of memory");
    }
    memcpy(gift, src, nf * sizeof *gift);
    double t1 = rl_bench_now();
    *fill_s += t1 - t0;
    rl_msg_t *m = rl_msg_new("reply", 1);
    int64_t shape = (int64_t)nf;
    if (!m || rl_msg_set_int(m, "version", 1) != 0 || rl_msg_set_str(m, "kind", "lora") != 0 ||
        rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 1, &shape, gift) != 0) {
        s_die("sync", "building the message");
    }
    if (rl_chan_send(s->actor, NULL, &m, err, sizeof err) != 0) {
        s_die("sync send", err);
    }
    char peer[256];
    rl_msg_t *r = NULL;
    if (!s->ctl) { // the other end is another process (--connect): wait for its reply
        if (rl_chan_recv(s->actor, 30000, &r, NULL, 0, err, sizeof err) != 0) {
            s_die("sync ack recv", err);
        }
        rl_msg_free(&r);
        return rl_bench_now() - t1;
    }
    if (rl_chan_recv(s->ctl, 10000, &r, peer, sizeof peer, err, sizeof err) != 0) {
        s_die("sync recv", err);
    }
    int64_t got;
    const void *w;
    if (rl_msg_get_tensor(r, "weights", RL_DT_F32, 1, &got, &w) != 0 || (size_t)got != nf) {
        s_die("sync", rl_msg_errmsg(r));
    }
    memcpy(dst, w, nf * sizeof *dst);
    rl_msg_free(&r);
    rl_msg_t *ack = rl_msg_new("reply", 2);
    rl_msg_set_bool(ack, "ok", 1);
    if (rl_chan_send(s->ctl, peer, &ack, err, sizeof err) != 0) {
        s_die("sync ack", err);
    }
    if (rl_chan_recv(s->actor, 10000, &r, NULL, 0, err, sizeof err) != 0) {
        s_die("sync ack recv", err);
    }
    rl_msg_free(&r);
    return rl_bench_now() - t1;
}

typedef struct {
    const char *name;
    size_t floats;
    int iters; // round trips per run (a run lasts ~10-100 ms)
} s_payload_t;

// The full trainable weights of arith-base (cookbook/models/arith-base/config.json): embeddings
// (tied) + 4 layers of attention, MLP and two norms + the final norm.
static size_t s_full_floats(void) {
    const size_t V = 1024, C = 128, I = 384, L = 4, NH = 4, NKV = 2, HD = 32;
    size_t layer = C * NH * HD + 2 * C * NKV * HD + NH * HD * C + 3 * C * I + 2 * C;
    return V * C + L * layer + C;
}

// Interleaved runs of (b) and (a) for each payload; prints one table.
static void s_table(const char *bname, const char *aname, s_raw_t *raw, s_sync_t *sync,
                    const s_payload_t *sizes, int nsizes, int runs) {
    printf("| payload | %s | %s | ratio | gift fill (malloc+memcpy, not in the message's time) "
           "|\n|---|---|---|---|---|\n",
           bname, aname);
    for (int si = 0; si < nsizes; si++) {
        size_t nf = sizes[si].floats, n = nf * 4;
        float *src = malloc(n), *dst = malloc(n);
        if (!src || !dst) {
            s_die("bench", "out of memory");
        }
        for (size_t i = 0; i < nf; i++) {
            src[i] = (float)(i % 1000) * 1e-3f;
        }
        memset(dst, 0, n);
        double fill = 0;
        for (int w = 0; w < 2; w++) { // warm up both paths (allocator, connections, page cache)
            s_raw_round(raw, src, n);
            s_sync_round(sync, src, dst, nf, &fill);
        }
        if (sync->ctl && memcmp(src, dst, n) != 0) { // (--connect: checked by the server)
            s_die("sync", "the destination differs from the source");
        }
        double *ta = malloc((size_t)runs * sizeof *ta), *tb = malloc((size_t)runs * sizeof *tb);
        double *tf = malloc((size_t)runs * sizeof *tf),
               *ratio = malloc((size_t)runs * sizeof *ratio);
        int it = sizes[si].iters;
        for (int r = 0; r < runs; r++) { // interleaved, so both see the same machine
            double t0 = rl_bench_now();
            for (int i = 0; i < it; i++) {
                s_raw_round(raw, src, n);
            }
            ta[r] = (rl_bench_now() - t0) / it;
            double sum = 0;
            fill = 0;
            for (int i = 0; i < it; i++) {
                sum += s_sync_round(sync, src, dst, nf, &fill);
            }
            tb[r] = sum / it;
            tf[r] = fill / it;
            ratio[r] = tb[r] / ta[r];
        }
        double a = rl_bench_median(ta, runs), b = rl_bench_median(tb, runs);
        double f = rl_bench_median(tf, runs), q = rl_bench_median(ratio, runs);
        printf("| %s (%zu f32, %.2f MiB) | %.3f ms (%.2f GB/s) | %.3f ms (%.2f GB/s) | %.2fx | "
               "%.3f ms |\n",
               sizes[si].name, nf, (double)n / (1 << 20), b * 1e3, (double)n / b / 1e9, a * 1e3,
               (double)n / a / 1e9, q, f * 1e3);
        fflush(stdout);
        free(ta);
        free(tb);
        free(tf);
        free(ratio);
        free(src);
        free(dst);
    }
    printf("(medians of %d runs; ratio = median of the per-run ratios; GB/s = payload bytes / "
           "round-trip time)\n",
           runs);
}

// ---- two processes (--serve / --connect): the ends in two network namespaces ---------------

#define S_PORT 5601 // raw tcp; +1 raw tcp with CURVE; +2 the weight-sync message over CURVE

static void s_load_keys(const char *dir, rl_curve_key_t *srv, rl_curve_key_t *cli) {
    char p[600], err[512];
    snprintf(p, sizeof p, "%s/srv/key", dir);
    if (rl_curve_load_secret(p, srv, err, sizeof err) != 0) {
        s_die("keys", err);
    }
    snprintf(p, sizeof p, "%s/cli/key", dir);
    if (rl_curve_load_secret(p, cli, err, sizeof err) != 0) {
        s_die("keys", err);
    }
}

// Serves the three server ends at host forever: acks raw round trips, decodes and copies the
// weight-sync message and replies.
static int s_serve(const char *host, const char *keydir) {
    rl_curve_key_t srv, cli;
    s_load_keys(keydir, &srv, &cli);
    void *ctx = zmq_ctx_new();
    void *r0 = zmq_socket(ctx, ZMQ_ROUTER), *r1 = zmq_socket(ctx, ZMQ_ROUTER);
    int one = 1;
    zmq_setsockopt(r1, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(r1, ZMQ_CURVE_SECRETKEY, srv.sec, 40);
    char ep[160], err[512];
    snprintf(ep, sizeof ep, "tcp://%s:%d", host, S_PORT);
    if (zmq_bind(r0, ep) != 0) {
        s_die("bind", zmq_strerror(zmq_errno()));
    }
    snprintf(ep, sizeof ep, "tcp://%s:%d", host, S_PORT + 1);
    if (zmq_bind(r1, ep) != 0) {
        s_die("bind", zmq_strerror(zmq_errno()));
    }
    rl_chan_t *ctl = NULL;
    snprintf(ep, sizeof ep, "tcp://%s:%d", host, S_PORT + 2);
    if (rl_chan_bind_curve(ep, 0, &srv, 1.0, &ctl, err, sizeof err) != 0) {
        s_die("bind", err);
    }
    const char(*allow)[RL_CURVE_Z85_LEN + 1] = (const char(*)[RL_CURVE_Z85_LEN + 1]) cli.pub;
    rl_chan_allow(ctl, allow, 1, NULL);
    printf("serving at %s:%d..%d\n", host, S_PORT, S_PORT + 2);
    fflush(stdout);
    float *dst = NULL;
    size_t cap = 0;
    for (;;) {
        zmq_pollitem_t it[3] = {{.socket = r0, .events = ZMQ_POLLIN},
                                {.socket = r1, .events = ZMQ_POLLIN},
                                {.socket = rl_chan_socket(ctl), .events = ZMQ_POLLIN}};
        if (zmq_poll(it, 3, -1) < 0) {
            continue;
        }
        void *raws[2] = {r0, r1};
        for (int k = 0; k < 2; k++) { // raw: ack whatever came
            zmq_msg_t id, body;
            zmq_msg_init(&id);
            if (zmq_msg_recv(&id, raws[k], ZMQ_DONTWAIT) >= 0) {
                zmq_msg_init(&body);
                zmq_msg_recv(&body, raws[k], 0);
                zmq_msg_send(&id, raws[k], ZMQ_SNDMORE);
                zmq_send(raws[k], "ack", 3, 0);
                zmq_msg_close(&body);
            }
            zmq_msg_close(&id);
        }
        rl_msg_t *m = NULL;
        char peer[256];
        if (rl_chan_recv(ctl, 0, &m, peer, sizeof peer, err, sizeof err) == 0) {
            int64_t got = 0;
            const void *w;
            if (rl_msg_get_tensor(m, "weights", RL_DT_F32, 1, &got, &w) == 0) {
                if ((size_t)got > cap) {
                    free(dst);
                    cap = (size_t)got;
                    dst = malloc(cap * sizeof *dst);
                }
                if (dst) {
                    memcpy(dst, w, (size_t)got * sizeof *dst);
                }
            }
            rl_msg_free(&m);
            rl_msg_t *ack = rl_msg_new("reply", 2);
            rl_msg_set_bool(ack, "ok", 1);
            rl_chan_send(ctl, peer, &ack, err, sizeof err);
        }
    }
    return 0; // not reached: killed by the script
}

// The client ends against a --serve process at host: the tcp tables, (d) beside (c) and (e).
static int s_connect(const char *host, const char *keydir, int runs) {
    rl_curve_key_t srv, cli, both[2];
    s_load_keys(keydir, &srv, &cli);
    both[0] = srv;
    both[1] = cli;
    char ep[160], err[512];
    s_raw_t raw, rawc;
    memset(&raw, 0, sizeof raw);
    memset(&rawc, 0, sizeof rawc);
    for (int k = 0; k < 2; k++) {
        s_raw_t *r = k ? &rawc : &raw;
        r->ctx_d = zmq_ctx_new();
        r->dealer = zmq_socket(r->ctx_d, ZMQ_DEALER);
        if (k) {
            zmq_setsockopt(r->dealer, ZMQ_CURVE_SERVERKEY, both[0].pub, 40);
            zmq_setsockopt(r->dealer, ZMQ_CURVE_PUBLICKEY, both[1].pub, 40);
            zmq_setsockopt(r->dealer, ZMQ_CURVE_SECRETKEY, both[1].sec, 40);
        }
        snprintf(ep, sizeof ep, "tcp://%s:%d", host, S_PORT + k);
        if (zmq_connect(r->dealer, ep) != 0) {
            s_die("connect", zmq_strerror(zmq_errno()));
        }
    }
    s_sync_t sync = {NULL, NULL};
    snprintf(ep, sizeof ep, "tcp://%s:%d", host, S_PORT + 2);
    if (rl_chan_connect_curve(ep, "controller~0", 0, &cli, srv.pub, 1.0, &sync.actor, err,
                              sizeof err) != 0) {
        s_die("connect", err);
    }
    const size_t lora = s_lora_floats();
    s_payload_t sizes[] = {
        {"LoRA r8 arith-base", lora, 100},
        {"full arith-base", s_full_floats(), 20},
        {"16 MiB", (16u << 20) / 4, 6},
        {"64 MiB", (64u << 20) / 4, 3},
    };
    printf("over tcp://%s (another process, another network namespace):\n", host);
    s_table("weight-sync message, CURVE (d)", "raw ZeroMQ tcp zero-copy (c)", &raw, &sync, sizes, 4,
            runs);
    printf("\n");
    s_table("weight-sync message, CURVE (d)", "raw ZeroMQ tcp CURVE zero-copy (e)", &rawc, &sync,
            sizes, 4, runs);
    return 0;
}

// ---- main ------------------------------------------------------------------------------------

int main(int argc, char **argv) {
    int runs = 7;
    const char *tcp_host = "127.0.0.1";
    const char *serve = NULL, *connect = NULL, *keys = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tcp-host") && i + 1 < argc) {
            tcp_host = argv[++i];
        } else if (!strcmp(argv[i], "--serve") && i + 1 < argc) {
            serve = argv[++i];
        } else if (!strcmp(argv[i], "--connect") && i + 1 < argc) {
            connect = argv[++i];
        } else if (!strcmp(argv[i], "--keys") && i + 1 < argc) {
            keys = argv[++i];
        } else {
            runs = atoi(argv[i]);
        }
    }
    if ((serve || connect) && !keys) {
        s_die("usage", "--serve HOST / --connect HOST need --keys DIR (DIR/srv, DIR/cli: rlctl "
                       "keygen)");
    }
    if (serve) {
        return s_serve(serve, keys);
    }
    if (connect) {
        return s_connect(connect, keys, runs < 1 || runs > 100 ? 7 : runs);
    }
    if (runs < 1 || runs > 100) {
        runs = 7;
    }
    char dir[] = "/tmp/rl_bench_sync.XXXXXX";
    if (!mkdtemp(dir)) {
        s_die("mkdtemp", "failed");
    }
    char ep_raw[128], ep_sync[128], err[512];
    snprintf(ep_raw, sizeof ep_raw, "ipc://%s/raw", dir);
    snprintf(ep_sync, sizeof ep_sync, "ipc://%s/sync", dir);
    s_raw_t raw;
    s_raw_open(&raw, ep_raw, NULL);
    s_sync_t sync;
    if (rl_chan_bind(ep_sync, 0, &sync.ctl, err, sizeof err) != 0 ||
        rl_chan_connect(ep_sync, "actor/0", 0, &sync.actor, err, sizeof err) != 0) {
        s_die("rl_chan", err);
    }

    const size_t lora = s_lora_floats();
    s_payload_t ipc_sizes[] = {
        {"LoRA r8 arith-base", lora, 100},
        {"16 MiB", (16u << 20) / 4, 6},
        {"64 MiB", (64u << 20) / 4, 3},
    };
    s_table("weight-sync message (b)", "raw ZeroMQ ipc zero-copy (a)", &raw, &sync, ipc_sizes, 3,
            runs);

    // over tcp: raw vs CURVE (the remote samplers' transport)
    char ep_tcp[160];
    snprintf(ep_tcp, sizeof ep_tcp, "tcp://%s:*", tcp_host);
    s_raw_t raw_tcp, raw_curve;
    s_raw_open(&raw_tcp, ep_tcp, NULL);
    rl_curve_key_t srv, cli;
    if (zmq_curve_keypair(srv.pub, srv.sec) != 0 || zmq_curve_keypair(cli.pub, cli.sec) != 0) {
        s_die("curve", "no CURVE in this libzmq");
    }
    rl_curve_key_t both[2] = {srv, cli};
    s_raw_open(&raw_curve, ep_tcp, both);
    s_sync_t curve;
    snprintf(ep_tcp, sizeof ep_tcp, "tcp://%s:0", tcp_host);
    if (rl_chan_bind_curve(ep_tcp, 0, &srv, 1.0, &curve.ctl, err, sizeof err) != 0) {
        s_die("curve bind", err);
    }
    const char(*allow)[RL_CURVE_Z85_LEN + 1] = (const char(*)[RL_CURVE_Z85_LEN + 1]) cli.pub;
    rl_chan_allow(curve.ctl, allow, 1, NULL);
    if (rl_chan_connect_curve(rl_chan_endpoint(curve.ctl), "controller~0", 0, &cli, srv.pub, 1.0,
                              &curve.actor, err, sizeof err) != 0) {
        s_die("curve connect", err);
    }
    s_payload_t tcp_sizes[] = {
        {"LoRA r8 arith-base", lora, 100},
        {"full arith-base", s_full_floats(), 20},
        {"16 MiB", (16u << 20) / 4, 6},
        {"64 MiB", (64u << 20) / 4, 3},
    };
    printf("\nover tcp://%s (remote samplers):\n", tcp_host);
    s_table("weight-sync message, CURVE (d)", "raw ZeroMQ tcp zero-copy (c)", &raw_tcp, &curve,
            tcp_sizes, 4, runs);
    printf("\nthe same message beside raw ZeroMQ with CURVE (the encryption alone):\n");
    s_table("weight-sync message, CURVE (d)", "raw ZeroMQ tcp CURVE zero-copy (e)", &raw_curve,
            &curve, tcp_sizes, 4, runs);
    s_raw_close(&raw_curve);
    rl_chan_close(&curve.actor, 0);
    rl_chan_close(&curve.ctl, 0);
    s_raw_close(&raw_tcp);
    rl_chan_close(&sync.actor, 0);
    rl_chan_close(&sync.ctl, 0);
    s_raw_close(&raw);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_sync: could not remove %s\n", dir);
    }
    return 0;
}

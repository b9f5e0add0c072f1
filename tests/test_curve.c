// test_curve — CURVE keys and the authenticated tcp:// chan of remote samplers: key files
// (modes, refusal of a secret key others can read, allowlists as a file or a folder, a bad line
// named file:line, argv holding a key); a CURVE server and client on 127.0.0.1 exchanging a
// message with the client's public key as the sender; refused: a client not on the allowlist
// (RL_CHAN_EV_AUTH), a client expecting another server key, a plaintext client (nothing
// delivered either way); and an allowlist change that removes a key drops its connection
// (rebind) while an allowed client reconnects by itself.
#include "rl_chan.h"
#include "rl_curve.h"
#include "rl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static char s_dir[256];

static void test_keys(void) {
    char err[512] = "", d1[300], path[400];
    rl_curve_key_t k, back;
    snprintf(d1, sizeof d1, "%s/a", s_dir);
    CHECK_INT(rl_curve_keygen(d1, 0, &k, err, sizeof err), 0);
    CHECK_MSG(rl_curve_key_valid(k.pub, strlen(k.pub)) && rl_curve_key_valid(k.sec, 40),
              "keygen: %s / (secret)", k.pub);
    struct stat st;
    snprintf(path, sizeof path, "%s/key", d1);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_INT(rl_curve_load_secret(path, &back, err, sizeof err), 0);
    CHECK_STR(back.pub, k.pub); // derived from the secret
    CHECK(strcmp(back.sec, k.sec) == 0);
    // never overwritten without --force
    CHECK(rl_curve_keygen(d1, 0, NULL, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "never overwrites");
    // a secret key others may read is refused, naming the fix
    chmod(path, 0644);
    CHECK(rl_curve_load_secret(path, &back, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "chmod 600");
    chmod(path, 0600);
    snprintf(path, sizeof path, "%s/key.pub", d1);
    CHECK_INT(rl_curve_load_public(path, &back, err, sizeof err), 0);
    CHECK_STR(back.pub, k.pub);
    // allowlist: a folder of *.pub files, and a file with comments
    char d2[300];
    snprintf(d2, sizeof d2, "%s/b", s_dir);
    rl_curve_key_t k2;
    CHECK_INT(rl_curve_keygen(d2, 0, &k2, err, sizeof err), 0);
    char allow_dir[300], cmd[2400];
    snprintf(allow_dir, sizeof allow_dir, "%s/allow.d", s_dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && cp %s/key.pub %s/a.pub && cp %s/key.pub %s/b.pub"
             " && cp %s/key %s/not-a-pub-file",
             allow_dir, d1, allow_dir, d2, allow_dir, d2, allow_dir);
    CHECK_INT(system(cmd), 0);
    char(*keys)[RL_CURVE_Z85_LEN + 1] = NULL;
    int n = 0;
    CHECK_INT(rl_curve_load_allow(allow_dir, &keys, &n, err, sizeof err), 0);
    CHECK_INT(n, 2);
    CHECK(n == 2 && strcmp(keys[0], k.pub) == 0 && strcmp(keys[1], k2.pub) == 0);
    free(keys);
    char allow_file[300];
    snprintf(allow_file, sizeof allow_file, "%s/allow.txt", s_dir);
    FILE *f = fopen(allow_file, "w");
    fprintf(f, "# controllers\n\n  %s  \n%s\n", k.pub, k.pub);
    fclose(f);
    CHECK_INT(rl_curve_load_allow(allow_file, &keys, &n, err, sizeof err), 0);
    CHECK_INT(n, 1); // a repeated key counts once
    free(keys);
    f = fopen(allow_file, "a");
    fprintf(f, "not a key\n");
    fclose(f);
    CHECK(rl_curve_load_allow(allow_file, &keys, &n, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "allow.txt:5:");
    f = fopen(allow_file, "w");
    fprintf(f, "# nothing yet\n");
    fclose(f);
    CHECK(rl_curve_load_allow(allow_file, &keys, &n, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "no public key");
    // argv holding a key, bare or after '='
    char a1[64];
    snprintf(a1, sizeof a1, "--key=%s", k.sec);
    char *av1[] = {"serve", "--key", k.sec}, *av2[] = {"serve", a1},
         *av3[] = {"serve", "--key", "keys/a/key", "tcp://127.0.0.1:5555"};
    CHECK_INT(rl_curve_argv_key(3, av1), 2);
    CHECK_INT(rl_curve_argv_key(2, av2), 1);
    CHECK_INT(rl_curve_argv_key(4, av3), -1);
}

// A path of 40 characters of Z85's alphabet (which holds '/' and '.') is well-formed key text:
// an argument naming an existing file or folder, or a new one in an existing folder, is a path,
// not a key (a model folder at <7-character folder>/cookbook/models/arith-noisy-base was taken
// for a key and the sampler refused to start).
static void test_key_paths(void) {
    char dir[64] = "/tmp/rlcXXXXXX", p40[64], sub[64], key_arg[64], pat[80];
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "mkdtemp: %s", dir);
        return;
    }
    // dir/aaaa...: 40 characters; dir's own name is letters and digits (mkdtemp)
    size_t n = strlen(dir);
    CHECK(n < 30);
    snprintf(p40, sizeof p40, "%s/%.*s", dir, (int)(39 - n),
             "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
    CHECK_INT((int)strlen(p40), 40);
    CHECK_MSG(rl_curve_key_valid(p40, strlen(p40)), "%s should be well-formed Z85", p40);
    char *av[] = {"serve", "--model", p40, "--bind", "tcp://127.0.0.1:0"};
    // not there yet, but its folder is: a path to be created (--cache DIR)
    CHECK_INT(rl_curve_argv_key(5, av), -1);
    // a folder and a file of that name
    CHECK_INT(mkdir(p40, 0700), 0);
    CHECK_INT(rl_curve_argv_key(5, av), -1);
    snprintf(key_arg, sizeof key_arg, "--model=%s", p40);
    char *av2[] = {"serve", key_arg};
    CHECK_INT(rl_curve_argv_key(2, av2), -1);
    rmdir(p40);
    FILE *f = fopen(p40, "w");
    CHECK(f != NULL);
    if (f) {
        fclose(f);
    }
    CHECK_INT(rl_curve_argv_key(5, av), -1);
    unlink(p40);
    // a path whose folder is missing too is taken for a key (nothing tells it from one)
    snprintf(sub, sizeof sub, "%s/%.*s", dir, (int)(39 - n),
             "q/zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
    CHECK_MSG(rl_curve_key_valid(sub, strlen(sub)), "%s should be well-formed Z85", sub);
    char *av3[] = {"serve", "--cache", sub};
    CHECK_INT(rl_curve_argv_key(3, av3), 2);
    // a key starting with '/' is still a key: the root does not count as its folder
    snprintf(pat, sizeof pat, "/%.39s", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM");
    CHECK_MSG(rl_curve_key_valid(pat, 40), "%s should be well-formed Z85", pat);
    char *av4[] = {"serve", pat};
    CHECK_INT(rl_curve_argv_key(2, av4), 1);
    rmdir(dir);
}

// Waits up to 3 s for one of `want` on c's monitor (other events skipped); returns the event
// seen (RL_CHAN_EV_NONE: none).
static rl_chan_event_t wait_event(rl_chan_t *c, unsigned want, int64_t *value) {
    for (int i = 0; i < 300; i++) {
        rl_chan_event_t e = rl_chan_event(c, value);
        if (e != RL_CHAN_EV_NONE && (want & (1u << e))) {
            return e;
        }
        if (e == RL_CHAN_EV_NONE) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    return RL_CHAN_EV_NONE;
}

// One round trip client -> server -> client; returns 1 when it arrived (and checks the key the
// server saw).
static int round_trip(rl_chan_t *srv, rl_chan_t *cli, const char *cli_pub, int timeout_ms) {
    char err[512] = "", peer[256];
    rl_msg_t *m = rl_msg_new("ping", 7);
    if (rl_chan_send(cli, NULL, &m, err, sizeof err) != 0) {
        return 0;
    }
    if (rl_chan_recv(srv, timeout_ms, &m, peer, sizeof peer, err, sizeof err) != 0) {
        return 0;
    }
    char key[RL_CURVE_Z85_LEN + 1];
    CHECK_INT(rl_chan_peer_key(srv, key), 0);
    CHECK_STR(key, cli_pub);
    CHECK(rl_chan_peer_conn(srv) >= 0);
    rl_msg_free(&m);
    m = rl_msg_new("pong", 7);
    CHECK_INT(rl_chan_send(srv, peer, &m, err, sizeof err), 0);
    int ok = rl_chan_recv(cli, timeout_ms, &m, NULL, 0, err, sizeof err) == 0;
    CHECK_MSG(ok && !strcmp(rl_msg_op(m), "pong"), "no pong: %s", err);
    rl_msg_free(&m);
    return ok;
}

static void test_chan(void) {
    char err[512] = "";
    rl_curve_key_t srv_k, cli_k, other_k;
    CHECK_INT(zmq_curve_keypair(srv_k.pub, srv_k.sec), 0);
    CHECK_INT(zmq_curve_keypair(cli_k.pub, cli_k.sec), 0);
    CHECK_INT(zmq_curve_keypair(other_k.pub, other_k.sec), 0);
    rl_chan_t *srv = NULL;
    CHECK_INT(rl_chan_bind_curve("tcp://127.0.0.1:0", 0, &srv_k, 0.2, &srv, err, sizeof err), 0);
    if (!srv) {
        printf("bind: %s\n", err);
        return;
    }
    const char *ep = rl_chan_endpoint(srv);
    const char(*allow)[RL_CURVE_Z85_LEN + 1] = (const char(*)[RL_CURVE_Z85_LEN + 1]) cli_k.pub;
    CHECK_INT(rl_chan_allow(srv, allow, 1, NULL), 0);

    // the allowed client: a round trip, its key as the sender
    rl_chan_t *cli = NULL;
    CHECK_INT(rl_chan_connect_curve(ep, "ctl~1", 0, &cli_k, srv_k.pub, 0.2, &cli, err, sizeof err),
              0);
    CHECK_INT(wait_event(cli, 1u << RL_CHAN_EV_UP, NULL), RL_CHAN_EV_UP);
    CHECK(round_trip(srv, cli, cli_k.pub, 3000));

    // a client not on the allowlist: refused by the ZAP handler (400), nothing delivered
    rl_chan_t *bad = NULL;
    int64_t v = 0;
    CHECK_INT(
        rl_chan_connect_curve(ep, "ctl~2", 0, &other_k, srv_k.pub, 0.2, &bad, err, sizeof err), 0);
    CHECK_INT(wait_event(bad, 1u << RL_CHAN_EV_AUTH | 1u << RL_CHAN_EV_UP, &v), RL_CHAN_EV_AUTH);
    CHECK_INT(v, 400);
    CHECK(rl_chan_refused(srv) >= 1);
    rl_msg_t *m = rl_msg_new("intrude", 1), *got = NULL;
    rl_chan_send(bad, NULL, &m, err, sizeof err);
    CHECK_INT(rl_chan_recv(srv, 300, &got, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    rl_chan_close(&bad, 0);

    // a client that expects another server key: the handshake never completes
    rl_chan_t *wrong = NULL;
    CHECK_INT(
        rl_chan_connect_curve(ep, "ctl~3", 0, &cli_k, other_k.pub, 0.2, &wrong, err, sizeof err),
        0);
    CHECK(wait_event(wrong, 1u << RL_CHAN_EV_UP | 1u << RL_CHAN_EV_DOWN, NULL) == RL_CHAN_EV_DOWN);
    m = rl_msg_new("intrude", 2);
    rl_chan_send(wrong, NULL, &m, err, sizeof err);
    CHECK_INT(rl_chan_recv(srv, 300, &got, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    rl_chan_close(&wrong, 0);

    // a plaintext client (a raw DEALER, NULL mechanism): nothing gets through
    void *zctx = zmq_ctx_new(), *plain = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(plain, ZMQ_LINGER, &zero, sizeof zero);
    CHECK_INT(zmq_connect(plain, ep), 0);
    for (int i = 0; i < 10; i++) {
        zmq_send(plain, "\x83\xa1v\x02\xa2op\xa1x\xa2id\x01", 14, ZMQ_DONTWAIT);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    CHECK_INT(rl_chan_recv(srv, 500, &got, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    zmq_close(plain);
    zmq_ctx_term(zctx);

    // the allowed client is still served
    CHECK(round_trip(srv, cli, cli_k.pub, 3000));

    // allow the other key instead and rebind: the first client's connection drops, and it is
    // refused when it reconnects; the newly allowed one gets through
    int removed = -1;
    const char(*allow2)[RL_CURVE_Z85_LEN + 1] = (const char(*)[RL_CURVE_Z85_LEN + 1]) other_k.pub;
    CHECK_INT(rl_chan_allow(srv, allow2, 1, &removed), 0);
    CHECK_INT(removed, 1);
    CHECK(!rl_chan_allowed(srv, cli_k.pub) && rl_chan_allowed(srv, other_k.pub));
    CHECK_INT(rl_chan_rebind(srv, err, sizeof err), 0);
    CHECK_INT(wait_event(cli, 1u << RL_CHAN_EV_DOWN, NULL), RL_CHAN_EV_DOWN);
    CHECK_INT(wait_event(cli, 1u << RL_CHAN_EV_AUTH | 1u << RL_CHAN_EV_UP, &v), RL_CHAN_EV_AUTH);
    m = rl_msg_new("after", 4);
    rl_chan_send(cli, NULL, &m, err, sizeof err);
    CHECK_INT(rl_chan_recv(srv, 300, &got, NULL, 0, err, sizeof err), RL_ETIMEOUT);
    rl_chan_t *cli2 = NULL;
    CHECK_INT(
        rl_chan_connect_curve(ep, "ctl~5", 0, &other_k, srv_k.pub, 0.2, &cli2, err, sizeof err), 0);
    CHECK(round_trip(srv, cli2, other_k.pub, 3000));

    // a client whose server vanished sees its connection drop
    rl_chan_close(&srv, 0);
    CHECK_INT(wait_event(cli2, 1u << RL_CHAN_EV_DOWN, NULL), RL_CHAN_EV_DOWN);
    // rl_chan_poll over several chans
    int ready[2] = {1, 1};
    rl_chan_t *both[2] = {cli, cli2};
    CHECK_INT(rl_chan_poll(both, 2, 50, ready), 0);
    CHECK(ready[0] == 0 && ready[1] == 0);
    rl_chan_close(&cli, 0);
    rl_chan_close(&cli2, 0);
}

int main(void) {
    rl_test_tmpdir(s_dir, sizeof s_dir, "curve");
    RL_TEST_RUN(test_keys);
    RL_TEST_RUN(test_key_paths);
    RL_TEST_RUN(test_chan);
    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}

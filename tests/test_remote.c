// test_remote — remote samplers end to end (docs/remote.md): two `rlctl sampler serve` processes
// (one with --model, one that receives the run's model; a third with two sampler processes of
// its own behind one endpoint) in a network namespace of their own,
// reached over a veth pair (loopback, with the reason printed, where namespaces cannot be made),
// serve a GRPO run of the cookbook recipe that matches the same run with two local samplers metric
// for metric and byte for byte (final adapter; the weights synced in buckets). Refused, each with
// its message: a controller key not on the sampler's allowlist, a server key that is not the
// sampler's, another model, a key in argv, a plaintext peer, a reply carrying another run's session
// token (a fake sampler in this process), a request of no session, a second controller while a
// session is live (and the session ends when its controller's connection closes), a key removed
// from the allowlist by SIGHUP. The policy being trained answers OpenAI completions over HTTP (with
// a bearer token, across the namespace) during a run, 503 between runs. A sampler killed mid-run:
// the run finishes on the other one, the log names the endpoint, and the trajectories say which
// sampler sampled each completion.
#include "rl_chan.h"
#include "rl_curve.h"
#include "rl_proto.h"
#include "rl_test_run.h"

#include <pthread.h>
#include <zmq.h>

static char s_tmp[256];
static char s_host[64] = "127.0.0.1"; // where the samplers listen
static char s_ns[64] = "";            // their network namespace ("" = none)
static char s_ep[3][128]; // their endpoints
static char s_http[160];  // sampler 0's OpenAI-compatible endpoint
static pid_t s_pid[3];

// ---- network namespace ------------------------------------------------------------------------

static rl_test_netns_t s_net;

static void s_netns_down(void) {
    rl_test_netns_down(&s_net);
    s_ns[0] = '\0';
}

// Puts the samplers in a namespace of their own behind a veth pair; on failure stays on
// loopback and says why.
static void s_netns_up(void) {
    char out[512];
    if (rl_test_netns_up(&s_net, 't', 231, out, sizeof out) != 0) {
        printf("network namespaces unavailable here (%s): the samplers listen on loopback\n", out);
        return;
    }
    snprintf(s_ns, sizeof s_ns, "%s", s_net.ns);
    snprintf(s_host, sizeof s_host, "%s", s_net.there);
    printf("samplers in network namespace %s at %s, the controller at %s\n", s_ns, s_host,
           s_net.here);
}

// ---- samplers ---------------------------------------------------------------------------------

// Starts sampler i (keys in <tmp>/s<i>, allowlist <tmp>/allow.txt) in the namespace; waits for
// its endpoint. Returns 1 when it listens.
static int s_serve(int i) {
    char args[2048], log[64];
    snprintf(log, sizeof log, "serve%d.out", i);
    snprintf(args, sizeof args,
             "exec %s%s%s%s/rlctl sampler serve --bind tcp://%s:0 --key %s/s%d/key --allow "
             "%s/allow.txt %s%s%s --threads 1%s%s%s "
             "--heartbeat 0.5%s%s%s%s%s > %s/%s 2>&1",
             s_ns[0] ? "ip netns exec " : "", s_ns, s_ns[0] ? " " : "", RL_BINARY_DIR, s_host,
             s_tmp, i, s_tmp, i != 1 ? "--model " : "", i != 1 ? RL_SOURCE_DIR : "",
             i != 1 ? "/cookbook/models/arith-noisy-base" : "",
             i == 2 ? " --samplers 2 --logs " : "", i == 2 ? s_tmp : "", i == 2 ? "/x2-logs" : "",
             i == 0 ? " --http " : "", i == 0 ? s_host : "", i == 0 ? ":0 --http-token " : "",
             i == 0 ? s_tmp : "", i == 0 ? "/http.token" : "", s_tmp, log);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", args, (char *)NULL);
        _exit(127);
    }
    s_pid[i] = pid;
    char path[400];
    snprintf(path, sizeof path, "%s/%s", s_tmp, log);
    for (int t = 0; t < 200; t++) {
        char *txt = rl_test_read_file(path, NULL);
        char *l = txt ? strstr(txt, "listening on ") : NULL;
        char *h = txt ? strstr(txt, "http on ") : NULL;
        if (l && (i != 0 || h)) {
            sscanf(l + 13, "%127s", s_ep[i]);
            if (h) {
                sscanf(h + 8, "%159s", s_http);
            }
            free(txt);
            return 1;
        }
        free(txt);
        rl_test_nap();
    }
    CHECK_MSG(0, "sampler %d did not start", i);
    return 0;
}

// `rlctl run` of the cookbook GRPO recipe (3 steps unless more) into <tmp>/<run>, with `extra`
// overrides (shell words).
static int s_run(const char *run, int steps, const char *extra) {
    char args[4096];
    snprintf(args, sizeof args,
             "run %s/cookbook/grpo_lora.yaml run.dir=%s/%s train.steps=%d optim.warmup_steps=1 "
             "train.eval_every=0 train.eval_samples=64 %s",
             RL_SOURCE_DIR, s_tmp, run, steps, extra);
    return rl_test_rlctl(s_tmp, args);
}

// Starts `rlctl run` of the cookbook recipe into <tmp>/<run> in the background (output in
// <tmp>/<run>.out) and returns its pid once step 2 is in its metrics.
static pid_t s_run_to_step2(const char *run, int steps, const char *extra, const char *ov) {
    char args[4096], path[400], out[64];
    snprintf(args, sizeof args,
             "run %s/cookbook/grpo_lora.yaml run.dir=%s/%s train.steps=%d optim.warmup_steps=1 "
             "train.eval_every=0 train.eval_samples=64 %s %s",
             RL_SOURCE_DIR, s_tmp, run, steps, extra, ov);
    snprintf(out, sizeof out, "%s.out", run);
    pid_t pid = rl_test_spawn(s_tmp, args, out);
    snprintf(path, sizeof path, "%s/%s/metrics.jsonl", s_tmp, run);
    int seen = 0;
    for (int t = 0; t < 1200 && !seen; t++) {
        char *m = rl_test_read_file(path, NULL);
        seen = m && strstr(m, "\"step\":2,");
        free(m);
        rl_test_nap();
    }
    CHECK_MSG(seen, "%s: the run did not reach step 2", run);
    return pid;
}

// The overrides that make samplers 0 and 1 (or the given endpoints and keys) the run's only
// samplers.
static void s_remote(char *out, size_t cap, const char *ep0, const char *key0, const char *ep1,
                     const char *key1, const char *client) {
    snprintf(out, cap,
             "roles.samplers=0 'roles.remote_samplers=[{endpoint: %s, server_key: %s}%s%s%s%s%s]' "
             "roles.client_key=%s",
             ep0, key0, ep1 ? ", {endpoint: " : "", ep1 ? ep1 : "", ep1 ? ", server_key: " : "",
             ep1 ? key1 : "", ep1 ? "}" : "", client);
}

static void s_expect_out(const char *needle) {
    char *out = rl_test_out(s_tmp);
    CHECK_MSG(out && strstr(out, needle), "output lacks \"%s\":\n%s", needle, out ? out : "");
    free(out);
}

// ---- a fake sampler that answers with another run's session --------------------------------

typedef struct {
    rl_chan_t *chan;
    volatile int stop;
} s_fake_t;

static void *s_fake_main(void *arg) {
    s_fake_t *f = arg;
    while (!f->stop) {
        rl_msg_t *m = NULL, *out = NULL;
        char peer[256], err[512];
        if (rl_chan_recv(f->chan, 100, &m, peer, sizeof peer, err, sizeof err) != 0) {
            continue;
        }
        if (!strcmp(rl_msg_op(m), "attach")) {
            rl_proto_attach_t q;
            if (rl_proto_attach_decode(m, &q, err, sizeof err) == 0) {
                rl_proto_attach_reply_t r = {q.session, 1, "fake", 1, 0};
                rl_proto_attach_reply_encode(&r, rl_msg_id(m), &out, err, sizeof err);
            }
        } else if (rl_proto_ok(rl_msg_id(m), &out) == 0) {
            // an earlier run's session: the controller must not take this reply
            rl_proto_session_set(
                out, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        }
        if (out) {
            rl_chan_send(f->chan, peer, &out, err, sizeof err);
        }
        rl_msg_free(&m);
    }
    return NULL;
}

static void test_old_session(void) {
    char err[512], path[400], ov[2048];
    rl_curve_key_t fk;
    snprintf(path, sizeof path, "%s/fake", s_tmp);
    CHECK_INT(rl_curve_keygen(path, 0, &fk, err, sizeof err), 0);
    s_fake_t f = {NULL, 0};
    CHECK_INT(rl_chan_bind_curve("tcp://127.0.0.1:0", 0, &fk, 0.5, &f.chan, err, sizeof err), 0);
    rl_curve_key_t ck;
    snprintf(path, sizeof path, "%s/ctl/key", s_tmp);
    CHECK_INT(rl_curve_load_secret(path, &ck, err, sizeof err), 0);
    const char(*allow)[RL_CURVE_Z85_LEN + 1] = (const char(*)[RL_CURVE_Z85_LEN + 1]) ck.pub;
    rl_chan_allow(f.chan, allow, 1, NULL);
    pthread_t th;
    pthread_create(&th, NULL, s_fake_main, &f);
    char key[400], client[400];
    snprintf(key, sizeof key, "%s/fake/key.pub", s_tmp);
    snprintf(client, sizeof client, "%s/ctl/key", s_tmp);
    s_remote(ov, sizeof ov, rl_chan_endpoint(f.chan), key, NULL, NULL, client);
    strcat(ov, " roles.request_timeout=3");
    CHECK(s_run("old_session", 1, ov) != 0);
    s_expect_out("not this run's session");
    s_expect_out("did not answer within 3 s");
    f.stop = 1;
    pthread_join(th, NULL);
    rl_chan_close(&f.chan, 0);
}

// ---- the sampler's own refusals, from a raw client --------------------------------------------

// Sends op (with session, when given) on c and waits 3 s for the reply; *ok and its error.
static int s_ask(rl_chan_t *c, rl_msg_t *m, const char *session, int *ok, char *why, size_t cap) {
    char err[512];
    if (session) {
        rl_proto_session_set(m, session);
    }
    if (rl_chan_send(c, NULL, &m, err, sizeof err) != 0) {
        return 0;
    }
    rl_msg_t *r = NULL;
    if (rl_chan_recv(c, 3000, &r, NULL, 0, err, sizeof err) != 0) {
        return 0;
    }
    const char *w = NULL;
    rl_proto_reply_status(r, ok, &w);
    snprintf(why, cap, "%s", *ok ? "" : w);
    rl_msg_free(&r);
    return 1;
}

static rl_msg_t *s_attach_msg(const char *session, const char *hash) {
    rl_proto_attach_t q = {session, hash, "test"};
    rl_msg_t *m = NULL;
    char err[256];
    rl_proto_attach_encode(&q, 1, &m, err, sizeof err);
    return m;
}

static void test_sessions(void) {
    char err[512], path[400], why[512], hash[17];
    rl_curve_key_t ck, sk;
    snprintf(path, sizeof path, "%s/ctl/key", s_tmp);
    CHECK_INT(rl_curve_load_secret(path, &ck, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/s0/key.pub", s_tmp);
    CHECK_INT(rl_curve_load_public(path, &sk, err, sizeof err), 0);
    // the cookbook model's fingerprint, as `rlctl run` computes it (rl_refcache_hash_model)
    char *log = NULL;
    snprintf(path, sizeof path, "%s/serve0.out", s_tmp);
    log = rl_test_read_file(path, NULL);
    char *fp = log ? strstr(log, "fingerprint ") : NULL;
    snprintf(hash, sizeof hash, "%.16s", fp ? fp + 12 : "?");
    free(log);
    rl_chan_t *a = NULL, *b = NULL;
    CHECK_INT(rl_chan_connect_curve(s_ep[0], "ctl-a", 0, &ck, sk.pub, 0.5, &a, err, sizeof err), 0);
    CHECK_INT(rl_chan_connect_curve(s_ep[0], "ctl-b", 0, &ck, sk.pub, 0.5, &b, err, sizeof err), 0);
    int ok = 0;
    // no session yet: a request is refused
    CHECK(s_ask(a, rl_msg_new("configure", 2), "00", &ok, why, sizeof why));
    CHECK(!ok && strstr(why, "attach first"));
    // a attaches; b is busy; a request of another session is refused
    const char *sa = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const char *sb = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    CHECK(s_ask(a, s_attach_msg(sa, hash), NULL, &ok, why, sizeof why));
    CHECK_MSG(ok, "attach: %s", why);
    CHECK(s_ask(b, s_attach_msg(sb, hash), NULL, &ok, why, sizeof why));
    CHECK_MSG(!ok && strstr(why, "busy"), "second controller: %s", why);
    CHECK(s_ask(a, rl_msg_new("generate", 3), sb, &ok, why, sizeof why));
    CHECK_MSG(!ok && strstr(why, "not the session"), "wrong session: %s", why);
    // a vanishes: its session ends and b is served
    rl_chan_close(&a, 0);
    int attached = 0;
    for (int t = 0; t < 40 && !attached; t++) {
        rl_test_nap();
        attached = s_ask(b, s_attach_msg(sb, hash), NULL, &ok, why, sizeof why) && ok;
    }
    CHECK_MSG(attached, "after the first controller left: %s", why);
    CHECK(s_ask(b, rl_msg_new("shutdown", 4), sb, &ok, why, sizeof why) && ok);
    rl_chan_close(&b, 0);
    // a plaintext peer gets nothing back, and the sampler still serves afterwards
    void *zctx = zmq_ctx_new(), *plain = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0, got = 0;
    zmq_setsockopt(plain, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(plain, s_ep[0]);
    const rl_frame_t *fr;
    int nf;
    rl_msg_t *m = s_attach_msg(sa, hash);
    rl_msg_encode(m, &fr, &nf);
    for (int t = 0; t < 10; t++) {
        zmq_send(plain, fr[0].data, fr[0].len, ZMQ_DONTWAIT);
        zmq_pollitem_t it = {.socket = plain, .events = ZMQ_POLLIN};
        got |= zmq_poll(&it, 1, 100) > 0;
    }
    rl_msg_free(&m);
    CHECK_MSG(!got, "a plaintext peer got an answer");
    zmq_close(plain);
    zmq_ctx_term(zctx);
}

// POSTs a greedy completion to sampler 0's HTTP endpoint with curl; returns the HTTP status (0:
// no answer) and leaves the body in <tmp>/http.json.
static int s_http_ask(const char *token) {
    char cmd[1200], auth[200] = "", out[64] = "";
    if (token) {
        snprintf(auth, sizeof auth, "-H 'Authorization: Bearer %s'", token);
    }
    snprintf(cmd, sizeof cmd,
             "curl -s -o %s/http.json -w '%%{http_code}' %s -H 'Content-Type: application/json' "
             "-d '{\"prompt\": \"47*3+512=\", \"max_tokens\": 30, \"temperature\": 0}' "
             "%s/completions",
             s_tmp, auth, s_http);
    rl_test_shell(cmd, out, sizeof out);
    return atoi(out);
}

// ---- main ---------------------------------------------------------------------------------------

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "remote");
    char err[512], path[400], cmd[1400];
    const char *who[] = {"ctl", "s0", "s1", "s2", "intruder"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", s_tmp, who[i]);
        CHECK_INT(rl_curve_keygen(path, 0, NULL, err, sizeof err), 0);
    }
    snprintf(cmd, sizeof cmd,
             "cp %s/ctl/key.pub %s/allow.txt && echo "
             "0123456789abcdef-test-token > %s/http.token && chmod 600 %s/http.token",
             s_tmp, s_tmp, s_tmp, s_tmp);
    CHECK_INT(system(cmd), 0);
    if (geteuid() == 0) {
        s_netns_up();
    } else {
        printf("not root: no network namespace; the samplers listen on loopback\n");
    }
    if (!s_serve(0) || !s_serve(1) || !s_serve(2)) {
        goto out;
    }
    char ov[2048], k0[400], k1[400], client[400], bad[400];
    snprintf(k0, sizeof k0, "%s/s0/key.pub", s_tmp);
    snprintf(k1, sizeof k1, "%s/s1/key.pub", s_tmp);
    snprintf(client, sizeof client, "%s/ctl/key", s_tmp);
    snprintf(bad, sizeof bad, "%s/intruder/key", s_tmp);

    // 1. the same run with two local samplers and with two remote ones: the same metrics and
    // the same final adapter (on-policy, even shares)
    CHECK_INT(s_run("local", 3, "roles.samplers=2 roles.sampler_threads=1"), 0);
    s_remote(ov, sizeof ov, s_ep[0], k0, s_ep[1], k1, client);
    // ... the weights in buckets of 0.1 MiB (the 0.30 MiB adapter in 3 messages per sampler)
    strcat(ov, " roles.sync_bucket_mb=0.1");
    CHECK_INT(s_run("remote", 3, ov), 0);
    s_expect_out("2 remote samplers");
    json_t *ml = rl_test_metrics(s_tmp, "local"), *mr = rl_test_metrics(s_tmp, "remote");
    CHECK_MSG(json_array_size(ml) >= 4 && json_equal(ml, mr),
              "metrics of the remote run differ from the local run's");
    json_decref(ml);
    json_decref(mr);
    CHECK(rl_test_files_equal(s_tmp, "local/final/adapter_model.safetensors",
                              "remote/final/adapter_model.safetensors"));
    // sampler 1 has no --model: the run sent it the model folder, which it checked by
    // fingerprint (and keeps for the next runs)
    snprintf(path, sizeof path, "%s/serve1.out", s_tmp);
    char *s1 = rl_test_read_file(path, NULL);
    CHECK_MSG(s1 && strstr(s1, "the run's model arrived"), "sampler 1 log:\n%s", s1 ? s1 : "");
    free(s1);

    // ... and one `sampler serve --samplers 2`: two sampler processes of its own behind one
    // endpoint, the weights crossing the network once; the same numbers again
    char k2[400];
    snprintf(k2, sizeof k2, "%s/s2/key.pub", s_tmp);
    s_remote(ov, sizeof ov, s_ep[2], k2, NULL, NULL, client);
    CHECK_INT(s_run("remote_x2", 3, ov), 0);
    s_expect_out("1 remote sampler");
    ml = rl_test_metrics(s_tmp, "local");
    mr = rl_test_metrics(s_tmp, "remote_x2");
    CHECK_MSG(json_equal(ml, mr), "metrics of the --samplers 2 run differ from the local run's");
    json_decref(ml);
    json_decref(mr);
    CHECK(rl_test_files_equal(s_tmp, "local/final/adapter_model.safetensors",
                              "remote_x2/final/adapter_model.safetensors"));

    // 2. refusals
    s_remote(ov, sizeof ov, s_ep[0], k0, NULL, NULL, bad); // our key is not on its list
    CHECK(s_run("refused_key", 1, ov) != 0);
    s_expect_out("is not on its --allow list");
    s_remote(ov, sizeof ov, s_ep[0], k1, NULL, NULL, client); // not that sampler's key
    CHECK(s_run("wrong_server", 1, ov) != 0);
    s_expect_out("CURVE handshake failed");
    s_remote(ov, sizeof ov, s_ep[0], k0, NULL, NULL, client); // another model
    snprintf(ov + strlen(ov), sizeof ov - strlen(ov), " model.path=%s/cookbook/models/arith-base",
             RL_SOURCE_DIR);
    CHECK(s_run("other_model", 1, ov) != 0);
    s_expect_out("fingerprint");
    char *sec = rl_test_read_file(bad, NULL); // a key in argv
    if (sec) {
        sec[strcspn(sec, "\n")] = '\0';
        snprintf(cmd, sizeof cmd,
                 "sampler serve --bind tcp://127.0.0.1:0 --key '%s' --allow x "
                 "--model y",
                 sec);
        CHECK_INT(rl_test_rlctl(s_tmp, cmd), 2);
        s_expect_out("read from files only");
        free(sec);
    }
    RL_TEST_RUN(test_old_session);
    RL_TEST_RUN(test_sessions);
    // SIGHUP with our key gone from the list: refused; back on it: served
    snprintf(cmd, sizeof cmd, "cp %s/intruder/key.pub %s/allow.txt", s_tmp, s_tmp);
    CHECK_INT(system(cmd), 0);
    kill(s_pid[0], SIGHUP);
    for (int t = 0; t < 10; t++) {
        rl_test_nap();
    }
    s_remote(ov, sizeof ov, s_ep[0], k0, NULL, NULL, client);
    CHECK(s_run("after_hup", 1, ov) != 0);
    s_expect_out("is not on its --allow list");
    snprintf(cmd, sizeof cmd, "cp %s/ctl/key.pub %s/allow.txt", s_tmp, s_tmp);
    CHECK_INT(system(cmd), 0);
    kill(s_pid[0], SIGHUP);
    for (int t = 0; t < 10; t++) {
        rl_test_nap();
    }
    CHECK_INT(s_run("after_hup2", 1, ov), 0);

    // HTTP between runs: the sampler has no policy to answer with; without the token: refused
    const char *tok = "0123456789abcdef-test-token";
    CHECK_INT(s_http_ask(tok), 503);
    CHECK_INT(s_http_ask(NULL), 401);

    // 3. a sampler that stalls mid-run (SIGSTOP: its process, I/O thread included, stops):
    // after 10 missed transport heartbeats of 0.3 s its connection drops and the run finishes
    // on the other one
    s_remote(ov, sizeof ov, s_ep[0], k0, s_ep[1], k1, client);
    pid_t srun = s_run_to_step2("stalled", 5, "roles.heartbeat=0.3", ov);
    kill(s_pid[1], SIGSTOP);
    CHECK_INT(rl_test_wait_exit(srun, 300), 0);
    kill(s_pid[1], SIGCONT);
    snprintf(path, sizeof path, "%s/stalled.out", s_tmp);
    char *sout = rl_test_read_file(path, NULL);
    CHECK_MSG(sout && strstr(sout, "sampler/1 leaves the run"), "stalled run:\n%s",
              sout ? sout : "");
    free(sout);
    for (int t = 0; t < 40; t++) { // the continued sampler finds its session gone
        rl_test_nap();
    }

    // 4. a sampler killed mid-run: the run finishes on the other one
    s_remote(ov, sizeof ov, s_ep[0], k0, s_ep[1], k1, client);
    pid_t run = s_run_to_step2("killed", 6, "algorithm.max_staleness=1", ov);
    // the policy being trained answers over HTTP during the run
    int hs = s_http_ask(tok);
    snprintf(path, sizeof path, "%s/http.json", s_tmp);
    char *hj = rl_test_read_file(path, NULL);
    CHECK_MSG(hs == 200 && hj && strstr(hj, "\"object\":\"text_completion\"") &&
                  strstr(hj, "\"text\":\"47*3="),
              "HTTP during the run: %d %s", hs, hj ? hj : "");
    free(hj);
    kill(s_pid[1], SIGKILL);
    waitpid(s_pid[1], NULL, 0);
    s_pid[1] = -1;
    CHECK_INT(rl_test_wait_exit(run, 300), 0);
    snprintf(path, sizeof path, "%s/killed.out", s_tmp);
    char *out = rl_test_read_file(path, NULL);
    char named[256];
    snprintf(named, sizeof named, "remote sampler/1 (%s): the connection closed", s_ep[1]);
    CHECK_MSG(out && strstr(out, named) && strstr(out, "sampler/1 leaves the run"),
              "the log does not name the lost endpoint:\n%s", out ? out : "");
    free(out);
    // who sampled what: steps 1-2 both samplers; the last step only sampler/0
    char w0[200], w1[200];
    snprintf(w0, sizeof w0, "\"sampler\":\"sampler/0@%s\"", s_ep[0]);
    snprintf(w1, sizeof w1, "\"sampler\":\"sampler/1@%s\"", s_ep[1]);
    snprintf(cmd, sizeof cmd, "traj export %s/killed --step 1", s_tmp);
    CHECK_INT(rl_test_rlctl(s_tmp, cmd), 0);
    s_expect_out(w0);
    s_expect_out(w1);
    snprintf(cmd, sizeof cmd, "traj export %s/killed --step 6", s_tmp);
    CHECK_INT(rl_test_rlctl(s_tmp, cmd), 0);
    s_expect_out(w0);
    out = rl_test_out(s_tmp);
    CHECK_MSG(out && !strstr(out, w1), "step 6 was sampled by the killed sampler");
    free(out);
    // asynchronous (max_staleness 1): every record of every step was sampled with weights at
    // most one version older than the ones its step updates, the regenerated share included
    for (int step = 1; step <= 6; step++) {
        snprintf(cmd, sizeof cmd, "traj export %s/killed --step %d", s_tmp, step);
        CHECK_INT(rl_test_rlctl(s_tmp, cmd), 0);
        out = rl_test_out(s_tmp);
        char *save = NULL;
        int n = 0;
        for (char *l = out ? strtok_r(out, "\n", &save) : NULL; l;
             l = strtok_r(NULL, "\n", &save)) {
            json_t *o = json_loads(l, 0, NULL);
            long long v = (long long)json_integer_value(json_object_get(o, "policy_version"));
            CHECK_MSG(o && v >= step - 2 && v <= step - 1, "step %d: a record of version %lld",
                      step, v);
            n += o != NULL;
            json_decref(o);
        }
        CHECK_MSG(n == 128, "step %d: %d records", step, n);
        free(out);
    }

out:
    for (int i = 0; i < 3; i++) {
        if (s_pid[i] > 0) {
            kill(s_pid[i], SIGTERM);
            if (rl_test_wait_exit(s_pid[i], 10) != 0) {
                printf("note: sampler %d did not exit cleanly on SIGTERM\n", i);
            }
        }
    }
    s_netns_down();
    if (!rl_test_failed && !getenv("RL_TEST_KEEP")) {
        rl_test_tmpdir_done(s_tmp);
    }
    RL_TEST_DONE();
}

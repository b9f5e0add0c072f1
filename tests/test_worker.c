// test_worker — every role's worker process (`rlctl worker --role R`) as a peer sees it, driven
// from a raw ZeroMQ ROUTER socket with the typed messages of rl_proto (docs/protocol.md); every
// verb of every role is answered:
//   - each reads its secret (token, identity) from the descriptor --secret-fd names, says hello
//     under that identity with its role, rank, pid, verbs and the token (the verbs are its
//     role's table), and heartbeats on "<identity>#hb" with the token; before `configure` it
//     refuses work;
//   - configure (the resolved recipe over the protocol) loads the role;
//   - sampler: refuses to generate with weights it does not hold (naming both versions) and
//     weights of the wrong size; frames that are not a message, a message of another protocol
//     version and a verb of another role are refused or dropped and it goes on serving; after
//     load_weights it generates (sizes and finish codes consistent);
//   - actor: logprobs (policy and reference), a GRPO train step (with sequence and with
//     per-token advantages) and an SFT one (the reply's weights are export_weights'), save,
//     load, save_final;
//   - reward: score;
//   - reference: logprobs, the same numbers as the actor's with adapters off;
//   - shutdown: a reply, then exit 0;
//   - a worker whose socket is answered by a process other than its --parent drops every order
//     from it (no reply, no shutdown) and says so in its log.
#include "rl_config.h"
#include "rl_algos.h"
#include "rl_proto.h"
#include "rl_test.h"
#include "rl_wire.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static void *s_sock;
static char s_id[96];   // the identity of the worker being driven
static uint64_t s_next = 1;

#define S_TOKEN "5ec4e7"

// Sends m to the worker (frees it).
// A train reply's statistic `name` (NaN when it has none).
static double s_reply_stat(const rl_proto_train_reply_t *x, const char *name) {
    rl_loss_stats_t st;
    rl_proto_train_reply_stats(x, &st);
    double v = NAN;
    rl_loss_stats_get(&st, name, &v);
    return v;
}

static void s_send(rl_msg_t *m) {
    const rl_frame_t *fr;
    int n;
    CHECK_INT(rl_msg_encode(m, &fr, &n), 0);
    zmq_send(s_sock, s_id, strlen(s_id), ZMQ_SNDMORE);
    for (int i = 0; i < n; i++) {
        zmq_send(s_sock, fr[i].data, fr[i].len, i + 1 < n ? ZMQ_SNDMORE : 0);
    }
    rl_msg_free(&m);
}

// Raw frames to the worker.
static void s_send_raw(const void *data, size_t len) {
    zmq_send(s_sock, s_id, strlen(s_id), ZMQ_SNDMORE);
    zmq_send(s_sock, data, len, 0);
}

// The next message from `from` (skipping others, e.g. heartbeats), or NULL after timeout_ms.
static rl_msg_t *s_recv(const char *from, int timeout_ms) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long el = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (el > timeout_ms) {
            return NULL;
        }
        zmq_pollitem_t it = {s_sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) <= 0) {
            continue;
        }
        char id[128];
        int idn = zmq_recv(s_sock, id, sizeof(id) - 1, 0);
        id[idn > 0 ? idn : 0] = '\0';
        rl_frame_t fr[16];
        zmq_msg_t zm[16];
        int n = 0, more = 1;
        while (more && n < 16) {
            zmq_msg_init(&zm[n]);
            zmq_msg_recv(&zm[n], s_sock, 0);
            fr[n].data = zmq_msg_data(&zm[n]);
            fr[n].len = zmq_msg_size(&zm[n]);
            more = zmq_msg_more(&zm[n]);
            n++;
        }
        rl_msg_t *m = NULL;
        char err[256];
        int rc = rl_msg_decode(fr, n, &m, err, sizeof(err));
        for (int i = 0; i < n; i++) {
            zmq_msg_close(&zm[i]);
        }
        CHECK_MSG(rc == 0, "undecodable message from %s: %s", id, err);
        if (rc == 0 && strcmp(id, from) == 0) {
            return m;
        }
        rl_msg_free(&m);
    }
}

// Sends a request and returns the worker's reply to it (NULL after timeout_ms).
static rl_msg_t *s_call(rl_msg_t *req, int timeout_ms) {
    uint64_t id = rl_msg_id(req);
    s_send(req);
    for (;;) {
        rl_msg_t *m = s_recv(s_id, timeout_ms);
        if (!m || rl_msg_id(m) == id) {
            return m;
        }
        rl_msg_free(&m);
    }
}

// 1 when rep is an ok reply (printing its error when not).
static int s_ok(const rl_msg_t *rep) {
    int ok = 0;
    const char *why = "no reply";
    if (rep) {
        rl_proto_reply_status(rep, &ok, &why);
    }
    CHECK_MSG(ok, "%s: not ok: %s", s_id, why);
    return ok;
}

// A reply with ok = false whose error holds `want`.
static void s_expect_error(rl_msg_t *rep, const char *want) {
    int ok = 1;
    const char *e = "(no reply)";
    CHECK(rep != NULL);
    if (rep) {
        CHECK_INT(rl_proto_reply_status(rep, &ok, &e), 0);
    }
    CHECK_INT(ok, 0);
    CHECK_CONTAINS(e, want);
    rl_msg_free(&rep);
}

// Starts `rlctl worker --role <role>` as `id` connected to ep, its secret on fd 3 through a
// pipe, its stderr into `log` (NULL: inherited), --parent this process.
static pid_t s_start_worker(const char *role, const char *id, const char *ep, const char *log) {
    int pfd[2];
    if (pipe(pfd) != 0) {
        return -1;
    }
    char secret[256];
    int n = snprintf(secret, sizeof secret, "token " S_TOKEN "\nidentity %s\n", id);
    if (write(pfd[1], secret, (size_t)n) != n) {
        return -1;
    }
    close(pfd[1]);
    char parent[32];
    snprintf(parent, sizeof parent, "%d", (int)getpid());
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[0], 3);
        if (log) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(fd, 2);
        }
        execl(RL_BINARY_DIR "/rlctl", "rlctl", "worker", "--role", role, "--rank", "0",
              "--connect", ep, "--heartbeat", "0.2", "--secret-fd", "3", "--parent", parent,
              (char *)NULL);
        _exit(127);
    }
    close(pfd[0]);
    return pid;
}

// Starts role's worker, checks its hello and heartbeat, and configures it with `yaml`.
// Returns its pid, or -1 (checks failed).
static pid_t s_open(const char *role, const char *ep, const char *yaml, const char *want_cap) {
    snprintf(s_id, sizeof s_id, "%s/0~00112233aabbccdd", role);
    pid_t pid = s_start_worker(role, s_id, ep, NULL);
    rl_msg_t *h = s_recv(s_id, 30000);
    CHECK_MSG(h != NULL, "%s: no hello", role);
    if (!h) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    rl_proto_hello_t hello;
    char err[256];
    CHECK_INT(rl_proto_hello_decode(h, &hello, err, sizeof err), 0);
    CHECK_STR(rl_msg_op(h), "hello");
    CHECK_STR(hello.role, role);
    CHECK_INT((int)hello.rank, 0);
    CHECK_INT((int)hello.pid, (int)pid);
    CHECK_STR(hello.token, S_TOKEN);
    int has = 0, has_shutdown = 0;
    for (int i = 0; i < hello.n_caps; i++) {
        has |= strcmp(hello.caps[i], want_cap) == 0;
        has_shutdown |= strcmp(hello.caps[i], "shutdown") == 0;
    }
    CHECK_MSG(has && has_shutdown, "%s: caps lack %s or shutdown", role, want_cap);
    rl_msg_free(&h);
    char hbid[128];
    snprintf(hbid, sizeof hbid, "%s#hb", s_id);
    rl_msg_t *hb = s_recv(hbid, 5000);
    rl_proto_hb_t beat;
    CHECK(hb && rl_proto_hb_decode(hb, &beat, err, sizeof err) == 0 &&
          strcmp(beat.token, S_TOKEN) == 0);
    rl_msg_free(&hb);
    // work before configure is refused
    rl_msg_t *m = NULL;
    rl_proto_request(RL_PROTO_EXPORT_WEIGHTS, s_next++, &m);
    s_expect_error(s_call(m, 10000), "not configured yet");
    rl_proto_configure_t c = {yaml, 0, 1};
    CHECK_INT(rl_proto_configure_encode(&c, s_next++, &m, err, sizeof err), 0);
    s_ok(m = s_call(m, 60000));
    rl_msg_free(&m);
    return pid;
}

// shutdown: a reply, then exit 0.
static void s_close(pid_t pid) {
    rl_msg_t *m = NULL;
    rl_proto_request(RL_PROTO_SHUTDOWN, s_next++, &m);
    s_ok(m = s_call(m, 10000));
    rl_msg_free(&m);
    int st = 0;
    for (int i = 0; i < 100 && waitpid(pid, &st, WNOHANG) == 0; i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: did not exit 0 on shutdown", s_id);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, WNOHANG);
}

// two prompts of the arith task
static const int32_t s_prompts[] = {9, 3, 4, 12, 1, 2, 3, 13, 1, 2, 3, 4, 12};
static const int32_t s_plens[] = {6, 7};

static rl_msg_t *s_generate(int64_t version) {
    int64_t idx[] = {0, 1};
    rl_proto_generate_t g = {.version = version, .prompts = s_prompts, .n_prompt_ids = 13,
                             .prompt_lens = s_plens, .prompt_index = idx, .P = 2, .n = 2,
                             .max_new_tokens = 40, .temperature = 1.0, .top_p = 1.0,
                             .top_k = 0, .seed = 5};
    rl_msg_t *m = NULL;
    char err[256];
    CHECK_INT(rl_proto_generate_encode(&g, s_next++, &m, err, sizeof err), 0);
    return m;
}

static void test_sampler(const char *ep, const char *yaml) {
    pid_t pid = s_open("sampler", ep, yaml, "generate");
    if (pid < 0) {
        return;
    }
    char err[256];
    // no weights yet: a generate for version 0 is refused with both versions
    s_expect_error(s_call(s_generate(0), 10000),
                   "asked for weights version 0, this sampler holds -1");
    // garbage frames, another protocol version, a verb of another role: dropped or refused
    s_send_raw("\xc1\xc1\xc1", 3);
    static const unsigned char v99[] = {0x83, 0xa1, 'v', 0x63, 0xa2, 'o', 'p', 0xa8, 'g', 'e',
                                        'n', 'e', 'r', 'a', 't', 'e', 0xa2, 'i', 'd', 0x07};
    s_send_raw(v99, sizeof(v99));
    s_expect_error(s_call(rl_msg_new("train", s_next++), 10000), "does not serve 'train'");
    // weights of the wrong size, then the right size
    float w0[3] = {0, 0, 0};
    rl_proto_load_weights_t lw = {.version = 0, .kind = "lora", .weights = w0, .n = 3};
    rl_msg_t *m = NULL;
    CHECK_INT(rl_proto_load_weights_encode(&lw, s_next++, &m, err, sizeof err), 0);
    rl_msg_t *rep = s_call(m, 10000);
    const char *e = "";
    int ok = 1;
    if (rep) {
        rl_proto_reply_status(rep, &ok, &e);
    }
    const char *holds = strstr(e, "sampler that holds ");
    CHECK_MSG(holds != NULL, "load_weights of 3 floats: %s", e);
    long n = holds ? atol(holds + 19) : 0;
    rl_msg_free(&rep);
    CHECK(n > 1000);
    float *w = calloc((size_t)(n > 0 ? n : 1), sizeof(float)); // B = 0: the base model
    lw.weights = w;
    lw.n = n;
    CHECK_INT(rl_proto_load_weights_encode(&lw, s_next++, &m, err, sizeof err), 0);
    free(w);
    rep = s_call(m, 10000);
    rl_proto_load_weights_reply_t lr = {-1};
    CHECK(s_ok(rep) && rl_proto_load_weights_reply_decode(rep, &lr, err, sizeof err) == 0);
    CHECK_INT((int)lr.version, 0);
    rl_msg_free(&rep);
    // now it generates: 2 prompts x 2 samples, sizes consistent
    rep = s_call(s_generate(0), 30000);
    rl_proto_generate_reply_t g;
    CHECK(s_ok(rep) && rl_proto_generate_reply_decode(rep, &g, err, sizeof err) == 0);
    if (rep && rl_proto_generate_reply_decode(rep, &g, err, sizeof err) == 0) {
        CHECK_INT((int)g.n_res, 4);
        for (int i = 0; i < (int)g.n_res; i++) {
            CHECK(g.lens[i] >= 1 && g.lens[i] <= 40);
            CHECK(g.finish[i] == 0 || g.finish[i] == 1);
        }
        for (int64_t i = 0; i < g.n_ids; i++) {
            CHECK(g.logprobs[i] <= 0.0f);
        }
    }
    rl_msg_free(&rep);
    // version 1 in two buckets (roles.sync_bucket_mb): between them no version is held and a
    // generate is refused; a bucket out of order is refused; after the last one it generates
    float *w2 = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    int64_t h = n / 2;
    rl_proto_load_weights_t
        b1 = {.version = 1, .kind = "lora", .weights = w2, .n = h, .offset = 0, .total = n},
        b2 = {.version = 1, .kind = "lora", .weights = w2 + h, .n = n - h, .offset = h, .total = n},
        skip = {.version = 1, .kind = "lora", .weights = w2, .n = 1, .offset = h + 1, .total = n};
    CHECK_INT(rl_proto_load_weights_encode(&b1, s_next++, &m, err, sizeof err), 0);
    rep = s_call(m, 10000);
    CHECK(s_ok(rep) && rl_proto_load_weights_reply_decode(rep, &lr, err, sizeof err) == 0);
    CHECK_INT((int)lr.version, -1);
    rl_msg_free(&rep);
    s_expect_error(s_call(s_generate(1), 10000),
                   "asked for weights version 1, this sampler holds -1");
    CHECK_INT(rl_proto_load_weights_encode(&skip, s_next++, &m, err, sizeof err), 0);
    s_expect_error(s_call(m, 10000), "expected");
    CHECK_INT(rl_proto_load_weights_encode(&b2, s_next++, &m, err, sizeof err), 0);
    free(w2);
    rep = s_call(m, 10000);
    CHECK(s_ok(rep) && rl_proto_load_weights_reply_decode(rep, &lr, err, sizeof err) == 0);
    CHECK_INT((int)lr.version, 1);
    rl_msg_free(&rep);
    rep = s_call(s_generate(1), 30000);
    CHECK(s_ok(rep));
    rl_msg_free(&rep);
    // weights through CUDA IPC: a handle without its array info, then a CPU sampler given one:
    // refused, and no version is held after the second
    uint8_t hnd[64] = {1};
    const int64_t arr[2] = {0, n};
    rl_proto_load_weights_t li = {.version = 2, .kind = "lora", .ipc = hnd, .n_ipc = 64};
    CHECK_INT(rl_proto_load_weights_encode(&li, s_next++, &m, err, sizeof err), 0);
    s_expect_error(s_call(m, 10000), "no ipc_array");
    li.ipc_array = arr;
    li.n_ipc_array = 2;
    CHECK_INT(rl_proto_load_weights_encode(&li, s_next++, &m, err, sizeof err), 0);
    s_expect_error(s_call(m, 10000), "weights shared through CUDA IPC need a model on a GPU");
    s_expect_error(s_call(s_generate(1), 10000),
                   "asked for weights version 1, this sampler holds -1");
    s_close(pid);
}

// A (2, 12) batch of the two prompts, each followed by 4 completion tokens (mask on those).
static int32_t s_tok[24], s_len[2];
static uint8_t s_mask[24];

static void s_make_batch(void) {
    memset(s_tok, 0, sizeof s_tok);
    memset(s_mask, 0, sizeof s_mask);
    const int32_t done[4] = {5, 6, 7, 8};
    int off = 0;
    for (int b = 0; b < 2; b++) {
        memcpy(s_tok + b * 12, s_prompts + off, (size_t)s_plens[b] * sizeof(int32_t));
        memcpy(s_tok + b * 12 + s_plens[b], done, sizeof done);
        memset(s_mask + b * 12 + s_plens[b], 1, 4);
        s_len[b] = s_plens[b] + 4;
        off += s_plens[b];
    }
}

// logprobs of the batch from the worker being driven. logp: 24 floats.
static void s_logprobs(int adapter, float *logp) {
    rl_proto_logprobs_t q = {s_tok, s_len, 2, 12, adapter, 1.0};
    rl_msg_t *m = NULL;
    char err[256];
    CHECK_INT(rl_proto_logprobs_encode(&q, s_next++, &m, err, sizeof err), 0);
    rl_msg_t *rep = s_call(m, 30000);
    rl_proto_logprobs_reply_t r;
    int ok = s_ok(rep) && rl_proto_logprobs_reply_decode(rep, &r, err, sizeof err) == 0;
    CHECK_MSG(ok && r.B == 2 && r.T == 12, "logprobs reply: %s", err);
    if (ok) {
        memcpy(logp, r.logp, 24 * sizeof(float));
    }
    rl_msg_free(&rep);
}

static void test_actor(const char *ep, const char *yaml, const char *dir, float *ref_logp) {
    pid_t pid = s_open("actor", ep, yaml, "train");
    if (pid < 0) {
        return;
    }
    char err[256];
    float pol[24];
    s_logprobs(1, pol);
    s_logprobs(0, ref_logp);
    for (int i = 0; i < 24; i++) {
        CHECK(pol[i] <= 0.0f && isfinite(pol[i]));
    }
    // a GRPO step: the reply's weights are the new trainable view
    double adv[2] = {1.0, -1.0};
    rl_proto_train_t t = {.loss = "grpo", .step = 1, .lr = 1e-3, .temperature = 1.0,
                          .tokens = s_tok, .lengths = s_len, .mask = s_mask, .adv = adv,
                          .B = 2, .T = 12, .denom = 8, .micro_batch = 1, .iterations = 1,
                          .want_weights = 1};
    rl_msg_t *m = NULL;
    CHECK_INT(rl_proto_train_encode(&t, s_next++, &m, err, sizeof err), 0);
    rl_msg_t *rep = s_call(m, 60000);
    rl_proto_train_reply_t tr;
    int ok = s_ok(rep) && rl_proto_train_reply_decode(rep, &tr, err, sizeof err) == 0;
    CHECK_MSG(ok && tr.B == 2 && tr.T == 12 && tr.n > 0 && tr.weights &&
                  isfinite(s_reply_stat(&tr, "loss")),
              "train reply: %s", err);
    float *after = ok ? malloc((size_t)tr.n * sizeof(float)) : NULL;
    int64_t n_after = ok ? tr.n : 0;
    if (after) {
        memcpy(after, tr.weights, (size_t)tr.n * sizeof(float));
    }
    rl_msg_free(&rep);
    rl_proto_request(RL_PROTO_EXPORT_WEIGHTS, s_next++, &m);
    rep = s_call(m, 30000);
    rl_proto_export_weights_reply_t ex;
    ok = s_ok(rep) && rl_proto_export_weights_reply_decode(rep, &ex, err, sizeof err) == 0;
    CHECK_MSG(ok && ex.n == n_after && strcmp(ex.kind, "lora") == 0 && after &&
                  memcmp(ex.weights, after, (size_t)n_after * sizeof(float)) == 0,
              "export_weights differs from the train reply's weights");
    rl_msg_free(&rep);
    free(after);
    // per-token advantages (PPO's form) instead of sequence ones
    float tadv[24];
    for (int i = 0; i < 24; i++) {
        tadv[i] = i < 12 ? 0.5f : -0.5f;
    }
    t.adv = NULL;
    t.token_adv = tadv;
    t.step = 2;
    CHECK_INT(rl_proto_train_encode(&t, s_next++, &m, err, sizeof err), 0);
    rep = s_call(m, 60000);
    ok = s_ok(rep) && rl_proto_train_reply_decode(rep, &tr, err, sizeof err) == 0;
    CHECK_MSG(ok && isfinite(s_reply_stat(&tr, "loss")) && s_reply_stat(&tr, "tokens") == 8,
              "train with token_adv: %s", err);
    rl_msg_free(&rep);
    t.token_adv = NULL;
    // an SFT step: no weights asked for, a finite positive loss
    t.loss = "sft";
    t.adv = NULL;
    t.step = 3;
    t.want_weights = 0;
    CHECK_INT(rl_proto_train_encode(&t, s_next++, &m, err, sizeof err), 0);
    rep = s_call(m, 60000);
    ok = s_ok(rep) && rl_proto_train_reply_decode(rep, &tr, err, sizeof err) == 0;
    CHECK_MSG(ok && tr.weights == NULL && s_reply_stat(&tr, "loss") > 0 &&
                  isfinite(s_reply_stat(&tr, "loss")),
              "sft train reply: %s", err);
    rl_msg_free(&rep);
    // save, load, save_final
    char ckpt[600], fin[600], path[700];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    snprintf(fin, sizeof fin, "%s/final", dir);
    mkdir(ckpt, 0700);
    mkdir(fin, 0700);
    rl_proto_save_t sv = {ckpt, 0, NULL};
    CHECK_INT(rl_proto_save_encode(&sv, s_next++, &m, err, sizeof err), 0);
    rep = s_call(m, 30000);
    rl_proto_save_reply_t sr;
    ok = s_ok(rep) && rl_proto_save_reply_decode(rep, &sr, err, sizeof err) == 0;
    CHECK_MSG(ok && sr.model_train_step > 0 && sr.n_trainable == n_after, "save reply: %s",
              err);
    rl_msg_free(&rep);
    snprintf(path, sizeof path, "%s/adapter/adapter_model.safetensors", ckpt);
    CHECK(access(path, F_OK) == 0);
    snprintf(path, sizeof path, "%s/optimizer.bin", ckpt);
    CHECK(access(path, F_OK) == 0);
    sv.model_train_step = sr.model_train_step;
    CHECK_INT(rl_proto_load_encode(&sv, s_next++, &m, err, sizeof err), 0);
    rep = s_call(m, 30000);
    ok = s_ok(rep) && rl_proto_load_reply_decode(rep, &sr, err, sizeof err) == 0;
    CHECK(ok && sr.model_train_step == sv.model_train_step);
    rl_msg_free(&rep);
    rl_proto_save_final_t sf = {fin, 0, NULL, -1};
    CHECK_INT(rl_proto_save_final_encode(&sf, s_next++, &m, err, sizeof err), 0);
    s_ok(rep = s_call(m, 30000));
    rl_msg_free(&rep);
    snprintf(path, sizeof path, "%s/adapter_config.json", fin);
    CHECK(access(path, F_OK) == 0);
    // a verb of another role
    s_expect_error(s_call(s_generate(0), 10000), "does not serve 'generate'");
    s_close(pid);
}

static void test_reward(const char *ep, const char *yaml) {
    pid_t pid = s_open("reward", ep, yaml, "score");
    if (pid < 0) {
        return;
    }
    char err[256];
    const char *pr[2] = {"1+1=", "2+2="}, *co[2] = {"1+1=2 #### 2", "2+2=5 #### 5"};
    const char *rows[2] = {"{\"answer\": \"2\"}", "{\"answer\": \"4\"}"};
    size_t prl[2] = {4, 4}, col[2] = {12, 12}, rowl[2] = {15, 15};
    int32_t ids[2] = {1, 2}, lens[2] = {1, 1};
    rl_proto_score_t q = {.reward = 0, .prompts = pr, .completions = co, .rows = rows,
                          .prompt_lens = prl, .completion_lens = col, .row_lens = rowl, .n = 2,
                          .ids = ids, .n_ids = 2, .lens = lens};
    rl_msg_t *m = NULL;
    CHECK_INT(rl_proto_score_encode(&q, s_next++, &m, err, sizeof err), 0);
    rl_msg_t *rep = s_call(m, 30000);
    rl_proto_score_reply_t sr;
    int ok = s_ok(rep) && rl_proto_score_reply_decode(rep, &sr, err, sizeof err) == 0;
    CHECK_MSG(ok && sr.n == 2 && sr.scores[0] == 1.0 && sr.scores[1] == 0.0,
              "score reply: %s", err);
    rl_msg_free(&rep);
    q.reward = 7;
    CHECK_INT(rl_proto_score_encode(&q, s_next++, &m, err, sizeof err), 0);
    s_expect_error(s_call(m, 10000), "score: no reward 7");
    s_close(pid);
}

static void test_reference(const char *ep, const char *yaml, const float *ref_logp) {
    pid_t pid = s_open("reference", ep, yaml, "logprobs");
    if (pid < 0) {
        return;
    }
    float logp[24];
    s_logprobs(1, logp);
    CHECK_MSG(memcmp(logp, ref_logp, sizeof logp) == 0,
              "the reference worker's logprobs differ from the actor's with adapters off");
    s_close(pid);
}

// A worker connected to a socket that another process (not its --parent) serves: the hello
// reaches that process, but its orders (generate, shutdown) are dropped and logged.
static void test_foreign_controller(const char *dir) {
    char ep[300], log[300];
    snprintf(ep, sizeof ep, "ipc://%s/foreign", dir);
    snprintf(log, sizeof log, "%s/foreign.log", dir);
    snprintf(s_id, sizeof s_id, "sampler/0~00112233aabbccdd");
    pid_t impostor = fork();
    if (impostor == 0) {
        // exit 0: hello seen, no answer to the orders; 2: no hello; 3: an answer came
        void *ctx = zmq_ctx_new();
        s_sock = zmq_socket(ctx, ZMQ_ROUTER);
        if (zmq_bind(s_sock, ep) != 0) {
            _exit(4);
        }
        rl_msg_t *h = s_recv(s_id, 30000);
        if (!h) {
            _exit(2);
        }
        rl_msg_free(&h);
        s_send(s_generate(-1));
        rl_msg_t *m = NULL;
        rl_proto_request(RL_PROTO_SHUTDOWN, 2, &m);
        s_send(m);
        rl_msg_t *rep = s_recv(s_id, 2000);
        _exit(rep ? 3 : 0);
    }
    pid_t w = s_start_worker("sampler", s_id, ep, log);
    int st = -1;
    waitpid(impostor, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "impostor: status %d (2: no hello, 3: the "
              "worker obeyed it)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    CHECK_MSG(waitpid(w, &st, WNOHANG) == 0, "the worker exited on an impostor's shutdown");
    kill(w, SIGKILL);
    waitpid(w, NULL, 0);
    char *txt = rl_test_read_file(log, NULL);
    CHECK_CONTAINS(txt ? txt : "", "not the controller");
    free(txt);
}

int main(void) {
    char dir[] = "/tmp/rl_test_worker.XXXXXX";
    rl_test_tmpdir(dir, sizeof dir, "worker");
    // the cookbook GRPO recipe, resolved, as the controller's configure carries it
    rl_recipe_t *r = NULL;
    char err[4096];
    int rc = rl_recipe_load_file(rl_algos(), RL_SOURCE_DIR "/cookbook/grpo_lora.yaml", NULL, 0, 0,
                                 &r, err, sizeof err);
    CHECK_MSG(rc == 0, "recipe: %s", err);
    char *yaml = NULL;
    CHECK_INT(r ? rl_recipe_to_yaml(r, &yaml) : -1, 0);
    rl_recipe_destroy(&r);
    void *ctx = zmq_ctx_new();
    s_sock = zmq_socket(ctx, ZMQ_ROUTER);
    char ep[128];
    snprintf(ep, sizeof(ep), "ipc://%s/ctl", dir);
    if (!yaml || zmq_bind(s_sock, ep) != 0) {
        fprintf(stderr, "cannot bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
        return 1;
    }
    s_make_batch();
    float ref_logp[24] = {0};
    RL_TEST_RUN(test_sampler, ep, yaml);
    RL_TEST_RUN(test_actor, ep, yaml, dir, ref_logp);
    RL_TEST_RUN(test_reward, ep, yaml);
    RL_TEST_RUN(test_reference, ep, yaml, ref_logp);
    zmq_close(s_sock);
    zmq_ctx_term(ctx);
    free(yaml);
    RL_TEST_RUN(test_foreign_controller, dir);
    rl_test_tmpdir_done(dir);
    RL_TEST_DONE();
}

// test_worker — a sampler worker process (`rlctl worker --role sampler`) as a peer sees it, driven
// from a raw ZeroMQ ROUTER socket with the role protocol (docs/protocol.md):
//   - it reads its secret (token, identity) from the descriptor --secret-fd names, says hello
//     under that identity with its role, rank, pid, verbs and the token, and heartbeats on
//     "<identity>#hb" with the token;
//   - it refuses to generate with weights it does not hold (naming both versions), and weights
//     of the wrong size;
//   - frames that are not a message, a message of another protocol version and an unknown verb
//     are refused or dropped, and it goes on serving;
//   - after load_weights it generates (sizes and finish codes consistent) and exits 0 on shutdown;
//   - a worker whose socket is answered by a process other than its --parent drops every order
//     from it (no reply, no shutdown) and says so in its log.
#include "rl_test.h"
#include "rl_wire.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static void *s_sock;

#define S_ID "sampler/0~00112233aabbccdd"
#define S_TOKEN "5ec4e7"

// Sends m to the worker (frees it).
static void s_send(rl_msg_t *m) {
    const rl_frame_t *fr;
    int n;
    CHECK_INT(rl_msg_encode(m, &fr, &n), 0);
    zmq_send(s_sock, S_ID, strlen(S_ID), ZMQ_SNDMORE);
    for (int i = 0; i < n; i++) {
        zmq_send(s_sock, fr[i].data, fr[i].len, i + 1 < n ? ZMQ_SNDMORE : 0);
    }
    rl_msg_free(&m);
}

// Raw frames to the worker.
static void s_send_raw(const void *data, size_t len) {
    zmq_send(s_sock, S_ID, strlen(S_ID), ZMQ_SNDMORE);
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

// A reply with ok = false whose error holds `want`.
static void s_expect_error(rl_msg_t *rep, uint64_t id, const char *want) {
    CHECK(rep != NULL);
    if (!rep) {
        return;
    }
    int ok = 1;
    const char *e = "";
    CHECK_STR(rl_msg_op(rep), "reply");
    CHECK_INT((int)rl_msg_id(rep), (int)id);
    CHECK_INT(rl_msg_get_bool(rep, "ok", &ok), 0);
    CHECK_INT(ok, 0);
    rl_msg_get_str(rep, "error", &e, NULL);
    CHECK_CONTAINS(e, want);
    rl_msg_free(&rep);
}

static rl_msg_t *s_generate(uint64_t id, int64_t version) {
    rl_msg_t *m = rl_msg_new("generate", id);
    int32_t ids[] = {9, 3, 4, 12, 1, 2, 3, 13, 1, 2, 3, 4, 12}; // two prompts of the arith task
    int32_t lens[] = {6, 7};
    int64_t idx[] = {0, 1}, sh_i[1] = {13}, sh_p[1] = {2};
    rl_msg_set_int(m, "version", version);
    rl_msg_set_tensor(m, "prompts", RL_DT_I32, 1, sh_i, ids);
    rl_msg_set_tensor(m, "prompt_lens", RL_DT_I32, 1, sh_p, lens);
    rl_msg_set_tensor(m, "prompt_index", RL_DT_I64, 1, sh_p, idx);
    rl_msg_set_int(m, "n", 2);
    rl_msg_set_int(m, "max_new_tokens", 40);
    rl_msg_set_float(m, "temperature", 1.0);
    rl_msg_set_float(m, "top_p", 1.0);
    rl_msg_set_int(m, "top_k", 0);
    rl_msg_set_int(m, "seed", 5);
    return m;
}

// Starts `rlctl worker --role sampler` connected to ep, its secret on fd 3 through a pipe, its
// stderr into `log` (NULL: inherited), --parent this process.
static pid_t s_start_worker(const char *ep, const char *log) {
    int pfd[2];
    if (pipe(pfd) != 0) {
        return -1;
    }
    const char *secret = "token " S_TOKEN "\nidentity " S_ID "\n";
    if (write(pfd[1], secret, strlen(secret)) != (ssize_t)strlen(secret)) {
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
        char rank[] = "0", threads[] = "1";
        execl(RL_BINARY_DIR "/rlctl", "rlctl", "worker", "--role", "sampler", "--rank", rank,
              "--connect", ep, "--recipe", RL_SOURCE_DIR "/cookbook/grpo_lora.yaml", "--threads",
              threads, "--heartbeat", "0.2", "--secret-fd", "3", "--parent", parent,
              (char *)NULL);
        _exit(127);
    }
    close(pfd[0]);
    return pid;
}

// A worker connected to a socket that another process (not its --parent) serves: the hello
// reaches that process, but its orders (generate, shutdown) are dropped and logged.
static void test_foreign_controller(const char *dir) {
    char ep[300], log[300];
    snprintf(ep, sizeof ep, "ipc://%s/foreign", dir);
    snprintf(log, sizeof log, "%s/foreign.log", dir);
    pid_t impostor = fork();
    if (impostor == 0) {
        // exit 0: hello seen, no answer to the orders; 2: no hello; 3: an answer came
        void *ctx = zmq_ctx_new();
        s_sock = zmq_socket(ctx, ZMQ_ROUTER);
        if (zmq_bind(s_sock, ep) != 0) {
            _exit(4);
        }
        rl_msg_t *h = s_recv(S_ID, 30000);
        if (!h) {
            _exit(2);
        }
        rl_msg_free(&h);
        s_send(s_generate(1, -1));
        s_send(rl_msg_new("shutdown", 2));
        rl_msg_t *rep = s_recv(S_ID, 2000);
        _exit(rep ? 3 : 0);
    }
    pid_t w = s_start_worker(ep, log);
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
    RL_TEST_ASSERT_FILE(mkdtemp(dir), "a temp dir");
    void *ctx = zmq_ctx_new();
    s_sock = zmq_socket(ctx, ZMQ_ROUTER);
    char ep[128];
    snprintf(ep, sizeof(ep), "ipc://%s/ctl", dir);
    if (zmq_bind(s_sock, ep) != 0) {
        fprintf(stderr, "cannot bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
        return 1;
    }
    pid_t pid = s_start_worker(ep, NULL);
    // hello, then heartbeats on their own identity, both with the token
    rl_msg_t *h = s_recv(S_ID, 30000);
    CHECK(h != NULL);
    if (!h) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        RL_TEST_DONE();
    }
    const char *tok = "";
    rl_msg_get_str(h, "token", &tok, NULL);
    CHECK_STR(tok, S_TOKEN);
    CHECK_STR(rl_msg_op(h), "hello");
    const char *role = "";
    int64_t rank = -1, wpid = 0;
    rl_msg_get_str(h, "role", &role, NULL);
    CHECK_STR(role, "sampler");
    CHECK_INT(rl_msg_get_int(h, "rank", &rank), 0);
    CHECK_INT((int)rank, 0);
    CHECK_INT(rl_msg_get_int(h, "pid", &wpid), 0);
    CHECK_INT((int)wpid, (int)pid);
    const char *const *caps;
    const size_t *capl;
    int ncaps = 0;
    CHECK_INT(rl_msg_get_strs(h, "caps", &caps, &capl, &ncaps), 0);
    int has_gen = 0;
    for (int i = 0; i < ncaps; i++) {
        has_gen |= strcmp(caps[i], "generate") == 0;
    }
    CHECK(has_gen);
    rl_msg_free(&h);
    rl_msg_t *hb = s_recv(S_ID "#hb", 5000);
    CHECK(hb != NULL && strcmp(rl_msg_op(hb), "hb") == 0);
    tok = "";
    if (hb) {
        rl_msg_get_str(hb, "token", &tok, NULL);
    }
    CHECK_STR(tok, S_TOKEN);
    rl_msg_free(&hb);

    // no weights yet: a generate for version 0 is refused with both versions
    s_send(s_generate(1, 0));
    s_expect_error(s_recv(S_ID, 10000), 1, "asked for weights version 0, this sampler "
                                                  "holds -1");
    // garbage frames, another protocol version, an unknown verb: dropped or refused
    s_send_raw("\xc1\xc1\xc1", 3);
    static const unsigned char v99[] = {0x83, 0xa1, 'v', 0x63, 0xa2, 'o', 'p', 0xa8, 'g', 'e',
                                        'n', 'e', 'r', 'a', 't', 'e', 0xa2, 'i', 'd', 0x07};
    s_send_raw(v99, sizeof(v99));
    s_send(rl_msg_new("train", 2));
    s_expect_error(s_recv(S_ID, 10000), 2, "does not serve 'train'");
    // weights of the wrong size, then the right size
    float w0[3] = {0, 0, 0};
    int64_t sh3[1] = {3};
    rl_msg_t *m = rl_msg_new("load_weights", 3);
    rl_msg_set_int(m, "version", 0);
    rl_msg_set_tensor(m, "weights", RL_DT_F32, 1, sh3, w0);
    s_send(m);
    rl_msg_t *rep = s_recv(S_ID, 10000);
    const char *e = "";
    if (rep) {
        rl_msg_get_str(rep, "error", &e, NULL);
    }
    const char *holds = strstr(e, "sampler that holds ");
    CHECK_MSG(holds != NULL, "load_weights of 3 floats: %s", e);
    long n = holds ? atol(holds + 19) : 0;
    rl_msg_free(&rep);
    CHECK(n > 1000);
    float *w = calloc((size_t)(n > 0 ? n : 1), sizeof(float)); // B = 0: the base model
    int64_t shn[1] = {n};
    m = rl_msg_new("load_weights", 4);
    rl_msg_set_int(m, "version", 0);
    rl_msg_set_tensor(m, "weights", RL_DT_F32, 1, shn, w);
    free(w);
    s_send(m);
    rep = s_recv(S_ID, 10000);
    int ok = 0;
    int64_t v = -1;
    CHECK(rep && rl_msg_get_bool(rep, "ok", &ok) == 0 && ok);
    CHECK(rep && rl_msg_get_int(rep, "version", &v) == 0 && v == 0);
    rl_msg_free(&rep);

    // now it generates: 2 prompts x 2 samples, sizes consistent
    s_send(s_generate(5, 0));
    rep = s_recv(S_ID, 30000);
    CHECK(rep && rl_msg_get_bool(rep, "ok", &ok) == 0 && ok);
    int64_t sl[1] = {0}, si[1] = {0}, sp[1] = {0}, sf[1] = {0};
    const int32_t *lens = NULL, *ids = NULL;
    const float *lp = NULL;
    const uint8_t *fin = NULL;
    CHECK(rep && rl_msg_get_tensor(rep, "lens", RL_DT_I32, 1, sl, (const void **)&lens) == 0);
    CHECK(rep && rl_msg_get_tensor(rep, "ids", RL_DT_I32, 1, si, (const void **)&ids) == 0);
    CHECK(rep && rl_msg_get_tensor(rep, "logprobs", RL_DT_F32, 1, sp, (const void **)&lp) == 0);
    CHECK(rep && rl_msg_get_tensor(rep, "finish", RL_DT_U8, 1, sf, (const void **)&fin) == 0);
    CHECK_INT((int)sl[0], 4);
    CHECK_INT((int)sf[0], 4);
    int64_t sum = 0;
    for (int i = 0; lens && i < (int)sl[0]; i++) {
        CHECK(lens[i] >= 1 && lens[i] <= 40);
        CHECK(fin[i] == 0 || fin[i] == 1);
        sum += lens[i];
    }
    CHECK_INT((int)si[0], (int)sum);
    CHECK_INT((int)sp[0], (int)sum);
    for (int64_t i = 0; lp && i < sp[0]; i++) {
        CHECK(lp[i] <= 0.0f);
    }
    rl_msg_free(&rep);

    // shutdown: a reply, then exit 0
    s_send(rl_msg_new("shutdown", 6));
    rep = s_recv(S_ID, 10000);
    CHECK(rep && rl_msg_id(rep) == 6);
    rl_msg_free(&rep);
    int st = 0;
    for (int i = 0; i < 100 && waitpid(pid, &st, WNOHANG) == 0; i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, WNOHANG);
    zmq_close(s_sock);
    zmq_ctx_term(ctx);
    test_foreign_controller(dir);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", dir);
    }
    RL_TEST_DONE();
}

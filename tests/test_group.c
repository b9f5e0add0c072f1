// roles.group — the controller's request/reply group (transport/rl_group*.c) against fake workers.
// The suite is its own worker: rl_group_spawn starts /proc/self/exe, so `test_roles_group worker
// --role R ...` runs the real worker loop (rl_worker_main) serving the fake roles below instead of
// rlctl's. Checked, each naming the worker in its error:
//   - three workers say hello, are configured, and answer calls with their own replies;
//   - requests posted to two workers overlap: the quick one is filed while the slow one works;
//   - call_each: one worker's ok = false does not end the call, the other's reply comes back;
//   - a worker whose handler never returns: the call times out (timed_out set) and that worker is
//     killed; a later call to it fails at once;
//   - a worker that exits in the middle of a request: its exit status and log in the error;
//   - a role the worker does not know: its hello carries the error and wait_ready returns it;
//   - an unknown peer name and a second collect of the same id are refused;
//   - destroy stops every worker (their pids are gone).
#include "rl_err.h"
#include "rl_algos.h"
#include "rl_group.h"
#include "rl_proto.h"
#include "rl_role.h"
#include "rl_test.h"
#include "rl_worker.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---- the fake roles (run in the worker processes) ---------------------------------------------

static int s_setup(const rl_recipe_t *recipe, const rl_role_env_t *env, void **state, char *err,
                   size_t err_len) {
    (void)recipe;
    (void)err;
    (void)err_len;
    *state = (void *)(intptr_t)(env->threads + 1); // non-NULL: configured
    return 0;
}

static void s_teardown(void **state) {
    *state = NULL;
}

// generate: replies n * 2 and its pid
static int s_double(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                    size_t err_len) {
    (void)state;
    int64_t n = 0;
    if (rl_msg_get_int(req, "n", &n) != 0) {
        return rl_errf(err, err_len, RL_EPROTO, "generate: no n");
    }
    int rc = rl_proto_ok(rl_msg_id(req), reply);
    if (!rc) {
        rc = rl_msg_set_int(*reply, "n2", 2 * n);
    }
    if (!rc) {
        rc = rl_msg_set_int(*reply, "pid", (int64_t)getpid());
    }
    return rc;
}

// logprobs: sleeps ms milliseconds, then replies
static int s_slow(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                  size_t err_len) {
    (void)state;
    (void)err;
    (void)err_len;
    int64_t ms = 0;
    rl_msg_get_int(req, "ms", &ms);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return rl_proto_ok(rl_msg_id(req), reply);
}

// train: fails (the loop answers ok = false with this message)
static int s_fail(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                  size_t err_len) {
    (void)state;
    (void)req;
    (void)reply;
    return rl_errf(err, err_len, RL_EINVAL, "a fake failure of the train verb");
}

// values: never returns (the heartbeat thread keeps beating)
static int s_hang(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                  size_t err_len) {
    (void)state;
    (void)req;
    (void)reply;
    (void)err;
    (void)err_len;
    for (;;) {
        pause();
    }
    return 0;
}

// score: the process exits with status 3 in the middle of the request
static int s_die(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                 size_t err_len) {
    (void)state;
    (void)req;
    (void)reply;
    (void)err;
    (void)err_len;
    fprintf(stderr, "fake worker: exiting with status 3 in a request\n");
    _exit(3);
}

static const rl_role_verb_t s_verbs[] = {
    {RL_PROTO_GENERATE, s_double}, {RL_PROTO_LOGPROBS, s_slow}, {RL_PROTO_TRAIN, s_fail},
    {RL_PROTO_VALUES, s_hang},     {RL_PROTO_SCORE, s_die},
};
static const rl_role_t s_echo = {"echo", s_setup, s_teardown, s_verbs,
                                 (int)(sizeof s_verbs / sizeof s_verbs[0]), 0};

// `<this binary> worker --role R --rank N --connect EP --parent PID --heartbeat S --secret-fd FD
// --max-frame B`, as rl_group_spawn writes it (the fake roles: only "echo" is known)
static int s_worker(int argc, char **argv) {
    rl_worker_opts_t o;
    memset(&o, 0, sizeof o);
    o.algos = rl_algos();
    o.secret_fd = -1;
    o.heartbeat = 1.0;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--role") == 0) {
            o.role = v;
        } else if (strcmp(a, "--rank") == 0) {
            o.rank = atoi(v);
        } else if (strcmp(a, "--connect") == 0) {
            o.endpoint = v;
        } else if (strcmp(a, "--parent") == 0) {
            o.parent = atoi(v);
        } else if (strcmp(a, "--heartbeat") == 0) {
            o.heartbeat = atof(v);
        } else if (strcmp(a, "--secret-fd") == 0) {
            o.secret_fd = atoi(v);
        } else if (strcmp(a, "--max-frame") == 0) {
            o.max_frame = atoll(v);
        }
    }
    o.serves = o.role && strcmp(o.role, "echo") == 0 ? &s_echo : NULL;
    return rl_worker_main(&o);
}

// ---- the controller's side ---------------------------------------------------------------------

static char s_dir[256];
static const char *s_recipe = "model: {path: /nonexistent/model}\n"
                              "data: {train: /nonexistent/train.jsonl}\n"
                              "algorithm: {name: grpo}\noptim: {lr: 1e-5}\ntrain: {steps: 1}\n"
                              "rewards: [{builtin: math_answer}]\n";

static rl_msg_t *s_req(rl_group_t *g, const char *op, const char *key, int64_t v) {
    rl_msg_t *m = rl_msg_new(op, rl_group_next_id(g));
    if (!m || (key && rl_msg_set_int(m, key, v) != 0)) {
        fprintf(stderr, "FAIL: out of memory building a request\n");
        exit(1);
    }
    return m;
}

static rl_group_t *s_start(int n, const char *role, const char *sub) {
    char logs[300], err[2048];
    snprintf(logs, sizeof logs, "%s/%s", s_dir, sub);
    rl_group_t *g = NULL;
    int rc = rl_group_new(logs, 0.2, 0, &g, err, sizeof err);
    CHECK_MSG(rc == 0, "rl_group_new: %s", err);
    if (rc) {
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        rc = rl_group_spawn(g, role, i, 1, 0, err, sizeof err);
        CHECK_MSG(rc == 0, "spawn %s/%d: %s", role, i, err);
    }
    return g;
}

static void test_calls(void) {
    rl_group_t *g = s_start(3, "echo", "calls");
    char err[2048];
    int rc = rl_group_wait_ready(g, 30, err, sizeof err);
    CHECK_MSG(rc == 0, "wait_ready: %s", err);
    const char *peers[3] = {"echo/0", "echo/1", "echo/2"};
    rl_msg_t *reqs[3], *replies[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        rl_proto_configure_t q = {s_recipe, 0, 1};
        CHECK(rl_proto_configure_encode(&q, rl_group_next_id(g), &reqs[i], err, sizeof err) == 0);
    }
    rc = rl_group_call(g, 3, peers, reqs, replies, 30, NULL, err, sizeof err);
    CHECK_MSG(rc == 0, "configure: %s", err);
    for (int i = 0; i < 3; i++) {
        rl_msg_free(&replies[i]);
        reqs[i] = s_req(g, "generate", "n", 10 + i);
    }
    // every reply is its own worker's, for its own request
    rc = rl_group_call(g, 3, peers, reqs, replies, 30, NULL, err, sizeof err);
    CHECK_MSG(rc == 0, "generate: %s", err);
    for (int i = 0; !rc && i < 3; i++) {
        int64_t n2 = -1, pid = -1;
        CHECK(rl_msg_get_int(replies[i], "n2", &n2) == 0 && n2 == 2 * (10 + i));
        CHECK(rl_msg_get_int(replies[i], "pid", &pid) == 0 &&
              pid == (int64_t)rl_group_pid(g, peers[i]));
        rl_msg_free(&replies[i]);
    }

    // overlap: a slow request to echo/0 and a quick one to echo/1, both in flight
    uint64_t ids[2];
    rl_msg_t *two[2] = {s_req(g, "logprobs", "ms", 400), s_req(g, "generate", "n", 1)};
    rc = rl_group_post(g, 2, peers, two, ids, err, sizeof err);
    CHECK_MSG(rc == 0, "post: %s", err);
    char why[2][RL_GROUP_WHY];
    rl_msg_t *got[2] = {NULL, NULL};
    rc = rl_group_collect(g, 1, &ids[1], &got[1], 30, &why[1], NULL, err, sizeof err);
    CHECK_MSG(rc == 0 && got[1], "collect the quick one: %s %s", err, why[1]);
    CHECK_MSG(rl_group_done_at(g, ids[0]) == 0, "the slow reply was filed before it was due");
    rc = rl_group_collect(g, 1, &ids[0], &got[0], 30, &why[0], NULL, err, sizeof err);
    CHECK_MSG(rc == 0 && got[0], "collect the slow one: %s %s", err, why[0]);
    rl_msg_free(&got[0]);
    rl_msg_free(&got[1]);
    // an id collected twice is no longer in flight
    rc = rl_group_collect(g, 1, &ids[0], &got[0], 1, &why[0], NULL, err, sizeof err);
    CHECK_MSG(rc != 0 || (!got[0] && why[0][0]), "a second collect of one id succeeded");
    rl_msg_free(&got[0]);

    // call_each: echo/0 fails its request, echo/1 answers; both are reported
    rl_msg_t *each[2] = {s_req(g, "train", NULL, 0), s_req(g, "generate", "n", 5)};
    rc = rl_group_call_each(g, 2, peers, each, got, 30, why, NULL, err, sizeof err);
    CHECK_MSG(rc == 0, "call_each: %s", err);
    CHECK_MSG(!got[0] && strstr(why[0], "echo/0") && strstr(why[0], "fake failure"),
              "why[0] = '%s'", why[0]);
    CHECK_MSG(got[1] && why[1][0] == '\0', "echo/1: why '%s'", why[1]);
    rl_msg_free(&got[1]);

    // an unknown peer
    rl_msg_t *stray = s_req(g, "generate", "n", 1);
    const char *nobody = "echo/9";
    rc = rl_group_call(g, 1, &nobody, &stray, got, 5, NULL, err, sizeof err);
    CHECK_MSG(rc != 0 && strstr(err, "echo/9"), "a call to echo/9: rc %d, '%s'", rc, err);

    // a handler that never returns: the call times out and the worker is killed
    pid_t p2 = rl_group_pid(g, "echo/2");
    int timed_out = 0;
    rl_msg_t *hang = s_req(g, "values", NULL, 0);
    rc = rl_group_call(g, 1, &peers[2], &hang, got, 0.5, &timed_out, err, sizeof err);
    CHECK_MSG(rc != 0 && timed_out && strstr(err, "echo/2"), "hang: rc %d, timed_out %d, '%s'",
              rc, timed_out, err);
    CHECK_MSG(kill(p2, 0) != 0 && errno == ESRCH, "echo/2 (pid %d) still runs", (int)p2);
    rl_msg_t *after = s_req(g, "generate", "n", 1);
    rc = rl_group_call(g, 1, &peers[2], &after, got, 5, NULL, err, sizeof err);
    CHECK_MSG(rc != 0 && strstr(err, "echo/2"), "a call to the killed echo/2: rc %d, '%s'", rc,
              err);

    // a worker that exits in a request: how, and where its log is
    rl_msg_t *die = s_req(g, "score", NULL, 0);
    rc = rl_group_call(g, 1, &peers[1], &die, got, 30, NULL, err, sizeof err);
    CHECK_MSG(rc != 0 && strstr(err, "echo/1") && strstr(err, "exited with status 3") &&
                  strstr(err, "echo-1.log"),
              "a worker exiting: rc %d, '%s'", rc, err);

    // destroy stops the rest
    pid_t p0 = rl_group_pid(g, "echo/0");
    CHECK(p0 > 0);
    rl_group_destroy(&g, 5.0);
    CHECK(g == NULL);
    CHECK_MSG(kill(p0, 0) != 0 && errno == ESRCH, "echo/0 (pid %d) outlived destroy", (int)p0);
}

static void test_unknown_role(void) {
    rl_group_t *g = s_start(1, "nosuch", "unknown");
    char err[2048];
    int rc = rl_group_wait_ready(g, 30, err, sizeof err);
    CHECK_MSG(rc != 0 && strstr(err, "nosuch/0") && strstr(err, "unknown role 'nosuch'"),
              "unknown role: rc %d, '%s'", rc, err);
    rl_group_destroy(&g, 5.0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "worker") == 0) {
        return s_worker(argc, argv);
    }
    rl_test_tmpdir(s_dir, sizeof s_dir, "group");
    RL_TEST_RUN(test_calls);
    RL_TEST_RUN(test_unknown_role);
    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}

// test_env_host — env/rl_env_host's server kind (env.http) on its own, against
// tests/env_server.py on loopback (env.run runs it inside GRPO runs):
//   - a request line is answered with the line env_test.py prints, the body's trailing newline
//     dropped; the next step follows on the same server;
//   - two 500s are retried within http.retries; past them the call fails naming the URL, the
//     attempts and the status;
//   - a hang is cut at env.timeout (all attempts), named;
//   - a port nobody listens on: retried, then the URL and "cannot connect";
//   - an https URL is refused at open, naming the environment's client;
//   - a command's worker that exited fails its call and is started again for the next one (one
//     worker, and two with the request split between them), said in the log; with
//     env.on_error: drop and two workers, only the failed worker's items fail ({"error": ...}).
#include "rl_clock.h"
#include "rl_config.h"
#include "rl_env_host.h"
#include "rl_err.h"
#include "rl_test.h"
#include "rl_test_run.h"

#define PY "/usr/bin/python3"
#define SERVER PY " " RL_SOURCE_DIR "/tests/env_server.py"

static char s_tmp[] = "/tmp/rl_test_env_host_XXXXXX";
static char s_err[4096];

static const char *s_reset = "{\"op\":\"reset\",\"items\":[{\"episode\":\"1-0\",\"row\":"
                             "{\"prompt\":\"hi\"},\"seed\":7}]}";
// what env_test.py answers to s_reset (Python's json.dumps)
static const char *s_reset_reply =
    "{\"items\": [{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}]}";
static const char *s_step = "{\"op\":\"step\",\"items\":[{\"episode\":\"1-0\",\"message\":"
                            "{\"role\":\"assistant\",\"content\":\"x\"}}]}";

// An env.http of url with `retries` and env.timeout `timeout`; the URL lives in static storage
// until the next call.
static rl_recipe_env_t s_env(const char *url, int retries, double timeout) {
    static char u[256];
    snprintf(u, sizeof u, "%s", url);
    rl_recipe_env_t e = {.builtin = -1, .workers = 1, .timeout = timeout};
    e.http.url = u;
    e.http.timeout = 30;
    e.http.retries = retries;
    return e;
}

// Opens an env.http host on 127.0.0.1:port/path. NULL on failure (reported).
static rl_env_host_t *s_open(int port, const char *path, int retries, double timeout) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    rl_recipe_env_t e = s_env(url, retries, timeout);
    rl_env_host_t *h = NULL;
    int rc = rl_env_host_open(&e, &h, s_err, sizeof s_err);
    CHECK_MSG(rc == 0, "open %s: %s", url, s_err);
    return h;
}

// One call: its status, and (rc 0) its reply compared with `want`; else the error with `needle`.
static void s_call(rl_env_host_t *h, const char *req, int want_rc, const char *want) {
    char *reply = NULL;
    s_err[0] = '\0';
    int rc = h ? rl_env_host_call(h, req, &reply, s_err, sizeof s_err) : -1;
    CHECK_MSG(want_rc ? rc != 0 : rc == 0, "rc %d: %s", rc, s_err);
    if (!rc && !want_rc) {
        CHECK_STR(reply, want);
    } else if (rc) {
        CHECK_CONTAINS(s_err, want);
    }
    free(reply);
}

static void test_replies(void) {
    pid_t pid = 0;
    int port = rl_test_serve(s_tmp, SERVER, "turns 2 --fail-first 2", &pid);
    CHECK_MSG(port > 0, "env_server.py did not start");
    rl_env_host_t *h = port > 0 ? s_open(port, "/env", 2, 10) : NULL;
    // the first two attempts get a 500; the third the reply, without its newline
    s_call(h, s_reset, 0, s_reset_reply);
    s_call(h, s_step, 0,
           "{\"items\": [{\"messages\": [{\"role\": \"user\", \"content\": "
           "\"again\"}], \"reward\": 0.25, \"done\": false}]}");
    rl_env_host_close(&h);
    CHECK(h == NULL);
    rl_test_serve_stop(&pid);
    // a crashed environment answers 500 to every step: 1 + retries attempts, then the error
    port = rl_test_serve(s_tmp, SERVER, "crash", &pid);
    h = port > 0 ? s_open(port, "/env", 1, 10) : NULL;
    s_call(h, s_reset, 0, s_reset_reply);
    char want[256];
    snprintf(want, sizeof want,
             "env http: POST http://127.0.0.1:%d/env failed after 2 attempts: HTTP 500: the "
             "environment crashed",
             port);
    s_call(h, s_step, 1, want);
    rl_env_host_close(&h);
    rl_test_serve_stop(&pid);
    // a hang: cut at env.timeout, once
    port = rl_test_serve(s_tmp, SERVER, "hang", &pid);
    h = port > 0 ? s_open(port, "/env", 3, 0.5) : NULL;
    s_call(h, s_reset, 0, s_reset_reply);
    double t0 = rl_clock_now();
    s_call(h, s_step, 1, "no whole reply within 0.5 s (the time left of env.timeout)");
    double dt = rl_clock_now() - t0;
    CHECK_MSG(dt >= 0.45 && dt < 2.0, "the hung call took %.3f s (env.timeout 0.5)", dt);
    rl_env_host_close(&h);
    rl_test_serve_stop(&pid);
    // down: the port of a server that was stopped
    port = rl_test_serve(s_tmp, SERVER, "once", &pid);
    rl_test_serve_stop(&pid);
    h = port > 0 ? s_open(port, "/env", 1, 10) : NULL;
    snprintf(want, sizeof want,
             "env http: POST http://127.0.0.1:%d/env failed after 2 attempts: cannot connect: "
             "Connection refused",
             port);
    s_call(h, s_reset, 1, want);
    rl_env_host_close(&h);
}

static void test_refused(void) {
    rl_recipe_env_t e = s_env("https://127.0.0.1:8123/env", 3, 60);
    rl_env_host_t *h = NULL;
    CHECK_INT(rl_env_host_open(&e, &h, s_err, sizeof s_err), RL_EINVAL);
    CHECK(h == NULL);
    CHECK_CONTAINS(s_err, "env http: https://127.0.0.1:8123/env: "
                          "https is not supported: rlctl's environment client speaks plain http");
    char d[128];
    rl_env_host_describe(&e, d, sizeof d);
    CHECK_STR(d, "http https://127.0.0.1:8123/env");
}

// env.command: `python3 env_test.py crashonce MARKER` with `workers` workers (drop: env.on_error
// drop).
static rl_env_host_t *s_open_command_drop(int workers, const char *marker, int drop) {
    static char *argv[5];
    argv[0] = PY;
    argv[1] = RL_SOURCE_DIR "/tests/env_test.py";
    argv[2] = "crashonce";
    argv[3] = (char *)marker;
    argv[4] = NULL;
    rl_recipe_env_t e = {.builtin = -1, .workers = workers, .timeout = 10};
    e.command.items = argv;
    e.command.n = 4;
    e.on_error = drop ? RL_RECIPE_ENV_DROP : RL_RECIPE_ENV_STOP;
    rl_env_host_t *h = NULL;
    int rc = rl_env_host_open(&e, &h, s_err, sizeof s_err);
    CHECK_MSG(rc == 0, "open: %s", s_err);
    return h;
}

static rl_env_host_t *s_open_command(int workers, const char *marker) {
    return s_open_command_drop(workers, marker, 0);
}

// One call answered with the JSON `want` (any spacing: several workers' replies are joined).
static void s_call_json(rl_env_host_t *h, const char *req, const char *want) {
    char *reply = NULL;
    s_err[0] = '\0';
    int rc = h ? rl_env_host_call(h, req, &reply, s_err, sizeof s_err) : -1;
    json_t *a = reply ? json_loads(reply, 0, NULL) : NULL, *b = json_loads(want, 0, NULL);
    CHECK_MSG(rc == 0 && a && b && json_equal(a, b), "rc %d (%s): %s, not %s", rc, s_err,
              reply ? reply : "(none)", want);
    json_decref(a);
    json_decref(b);
    free(reply);
}

static void test_restart(void) {
    char marker[128];
    snprintf(marker, sizeof marker, "%s/crashed", s_tmp);
    for (int workers = 1; workers <= 2; workers++) {
        unlink(marker);
        rl_env_host_t *h = s_open_command(workers, marker);
        s_call_json(h, s_reset, s_reset_reply);
        const char *again = "{\"items\": [{\"messages\": [{\"role\": \"user\", \"content\": "
                            "\"again\"}], \"reward\": 0.25, \"done\": false}]}";
        s_call_json(h, s_step, again);
        // the second turn's step: the worker holding episode 1-0 exits (it made the marker)
        s_call(h, s_step, 1, "the command exited with status 3 before it replied");
        CHECK_INT(h ? rl_env_host_restarts(h) : -1, 0);
        // the next call starts it again: a new program, which answers (turn 1 of 2)
        s_call_json(h, s_step, again);
        CHECK_INT(h ? rl_env_host_restarts(h) : -1, 1);
        s_call_json(h, s_reset, s_reset_reply);
        CHECK_INT(h ? rl_env_host_restarts(h) : -1, 1);
        rl_env_host_close(&h);
    }
    unlink(marker);
    // a program that is gone when it must start again: that call fails saying so, and so does
    // the next one (it tries again), without a crash
    char prog[160];
    snprintf(prog, sizeof prog, "%s/env.sh", s_tmp);
    FILE *f = fopen(prog, "w");
    CHECK(f != NULL);
    if (!f) {
        return;
    }
    fprintf(f, "#!/bin/sh\nexec " PY " " RL_SOURCE_DIR "/tests/env_test.py crashonce %s\n", marker);
    fclose(f);
    chmod(prog, 0700);
    static char *argv[2];
    argv[0] = prog;
    argv[1] = NULL;
    rl_recipe_env_t e = {.builtin = -1, .workers = 1, .timeout = 10};
    e.command.items = argv;
    e.command.n = 1;
    rl_env_host_t *h = NULL;
    CHECK_INT(rl_env_host_open(&e, &h, s_err, sizeof s_err), 0);
    s_call_json(h, s_reset, s_reset_reply);
    const char *again = "{\"items\": [{\"messages\": [{\"role\": \"user\", \"content\": "
                        "\"again\"}], \"reward\": 0.25, \"done\": false}]}";
    s_call_json(h, s_step, again);
    unlink(prog);
    s_call(h, s_step, 1, "the command exited with status 3 before it replied");
    s_call(h, s_step, 1, "worker 0 could not be started again: ");
    s_call(h, s_step, 1, "worker 0 could not be started again: ");
    CHECK_INT(h ? rl_env_host_restarts(h) : -1, 0);
    rl_env_host_close(&h);
    unlink(marker);
}

// env.on_error: drop, two workers: one worker's failure fails only its own items, each an
// {"error": ...} naming the worker and why, the other worker's items answered; with stop the whole
// call fails (test_restart). 8 episodes with two turns each (even ids), split over the workers by
// their ids; the second turn's step crashes the first worker to see it.
static void test_partial(void) {
    char marker[128], req[2048], *reply = NULL;
    snprintf(marker, sizeof marker, "%s/crashed-partial", s_tmp);
    unlink(marker);
    rl_env_host_t *h = s_open_command_drop(2, marker, 1);
    for (int op = 0; op < 3 && h; op++) { // reset, step, step
        int at = snprintf(req, sizeof req, "{\"op\":\"%s\",\"items\":[", op ? "step" : "reset");
        for (int i = 0; i < 8; i++) {
            at += snprintf(req + at, sizeof req - (size_t)at,
                           op ? "%s{\"episode\":\"1-%d\",\"message\":{\"role\":\"assistant\","
                                "\"content\":\"x\"}}"
                              : "%s{\"episode\":\"1-%d\",\"row\":{\"prompt\":\"hi\"},\"seed\":7}",
                           i ? "," : "", 2 * i);
        }
        snprintf(req + at, sizeof req - (size_t)at, "]}");
        free(reply);
        reply = NULL;
        s_err[0] = '\0';
        int rc = rl_env_host_call(h, req, &reply, s_err, sizeof s_err);
        CHECK_MSG(rc == 0, "call %d: %s", op, s_err);
    }
    json_t *o = reply ? json_loads(reply, 0, NULL) : NULL, *items = json_object_get(o, "items");
    size_t i;
    json_t *it;
    int failed = 0, answered = 0;
    json_array_foreach(items, i, it) {
        json_t *e = json_object_get(it, "error");
        if (e) {
            failed++;
            CHECK_CONTAINS(json_string_value(e), "the command exited with status 3 before it "
                                                 "replied");
            CHECK_CONTAINS(json_string_value(e), ": worker ");
        } else {
            answered += json_is_true(json_object_get(it, "done"));
        }
    }
    printf("  drop, 2 workers: %d items failed with the crashed worker, %d answered\n", failed,
           answered);
    CHECK_MSG(json_array_size(items) == 8 && failed > 0 && answered > 0 && failed + answered == 8,
              "the reply: %s", reply ? reply : "(none)");
    json_decref(o);
    free(reply);
    rl_env_host_close(&h);
    unlink(marker);
}

int main(void) {
    if (access(PY, X_OK) != 0) {
        fprintf(stderr, "note: %s missing; the env server not tested\n", PY);
        return 0;
    }
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "env_host");
    RL_TEST_RUN(test_replies);
    RL_TEST_RUN(test_refused);
    RL_TEST_RUN(test_restart);
    RL_TEST_RUN(test_partial);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

// test_reward_run — `rlctl run` of the cookbook GRPO recipe (cookbook/grpo_lora.yaml, 3 short
// steps) with its reward, math_answer, computed four ways: the built-in, the Python command
// cookbook/plugins/math_reward.py (a path relative to the recipe's folder), a server of the
// rlctl form and a server of OpenRLHF's form (tests/reward_server.py, chunked replies). The
// four metrics.jsonl, without their time and timing keys, must be the same bytes. Then the
// failures, each stopping the run with exit status 1 and a message naming the reward and the
// command or URL: a command that exits mid-run, one that hangs past roles.reward_timeout (and
// leaves no process behind), a server nobody listens on; and an https URL refused before the
// run starts.
#include "rl_test.h"
#include "rl_test_run.h"

#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

static char s_tmp[] = "/tmp/rl_test_reward_run_XXXXXX";
static char s_cmd[8192];

// the cookbook recipe, shortened: 3 steps, one sampler, one thread each, 32 eval rows
#define S_SHORT                                                                                    \
    "train.steps=3 train.eval_every=0 train.eval_samples=32 optim.warmup_steps=1 "                 \
    "roles.samplers=1 roles.actor_threads=1 roles.sampler_threads=1"

// Runs the cookbook recipe from the cookbook folder into <tmp>/<run>, with `extra` overrides;
// output in <tmp>/out.txt. Returns the exit status.
static int s_run(const char *run, const char *extra) {
    snprintf(s_cmd, sizeof s_cmd,
             "cd '%s/cookbook' && '%s/rlctl' run grpo_lora.yaml " S_SHORT
             " run.dir=%s/%s %s > '%s/out.txt' 2>&1",
             RL_SOURCE_DIR, RL_BINARY_DIR, s_tmp, run, extra, s_tmp);
    int st = system(s_cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The metrics of <tmp>/<run> as text, one compact line per logged step; *lines gets their count.
// caller owns result; free with free().
static char *s_metrics_text(const char *run, size_t *lines) {
    json_t *m = rl_test_metrics(s_tmp, run);
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    *lines = json_array_size(m);
    for (size_t i = 0; out && i < json_array_size(m); i++) {
        char *l = json_dumps(json_array_get(m, i), JSON_COMPACT | JSON_PRESERVE_ORDER);
        size_t ll = l ? strlen(l) : 0;
        while (out && len + ll + 2 > cap) {
            char *o = realloc(out, cap *= 2);
            if (!o) {
                free(out);
            }
            out = o;
        }
        if (out && l) {
            memcpy(out + len, l, ll);
            len += ll;
            out[len++] = '\n';
            out[len] = '\0';
        }
        free(l);
    }
    json_decref(m);
    return out;
}

// Starts tests/reward_server.py with `args`; returns its pid, *port its port (0: it failed).
static pid_t s_serve(const char *args, int *port) {
    char pf[600], cmd[2048];
    snprintf(pf, sizeof pf, "%s/port", s_tmp);
    unlink(pf);
    snprintf(cmd, sizeof cmd, "exec " PY " '%s/tests/reward_server.py' '%s' %s", RL_SOURCE_DIR, pf,
             args);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    *port = 0;
    for (int i = 0; i < 200 && *port == 0; i++) {
        char *t = rl_test_read_file(pf, NULL);
        *port = t ? atoi(t) : 0;
        free(t);
        rl_test_nap();
    }
    CHECK_MSG(*port > 0, "reward_server.py %s did not start", args);
    return pid;
}

static void s_unserve(pid_t pid) {
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static void test_same_metrics(void) {
    CHECK_INT(s_run("builtin", ""), 0);
    size_t n_ref = 0;
    char *ref = s_metrics_text("builtin", &n_ref);
    CHECK_MSG(n_ref == 4 && ref && strstr(ref, "\"rewards/correct/mean\"") &&
                  strstr(ref, "\"eval/rewards/correct/mean\""),
              "the built-in run logged %zu lines:\n%s", n_ref, ref ? ref : "");

    struct {
        const char *run, *rewards, *server; // server: reward_server.py's arguments, or NULL
    } ways[] = {
        {"command", "[{name: correct, command: [" PY ", plugins/math_reward.py]}]", NULL},
        {"http", "[{name: correct, http: {url: 'http://127.0.0.1:%d/score'}}]", ""},
        {"openrlhf",
         "[{name: correct, http: {url: 'http://127.0.0.1:%d/get_reward', format: openrlhf}}]",
         "--format openrlhf --chunked"},
    };
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        int port = 0;
        pid_t srv = ways[w].server ? s_serve(ways[w].server, &port) : 0;
        char rewards[512], extra[700];
        snprintf(rewards, sizeof rewards, ways[w].rewards, port);
        snprintf(extra, sizeof extra, "'rewards=%s'", rewards);
        int rc = s_run(ways[w].run, extra);
        s_unserve(srv);
        char *out = rl_test_out(s_tmp);
        CHECK_MSG(rc == 0, "%s: exit %d:\n%s", ways[w].run, rc, out ? out : "");
        free(out);
        size_t n = 0;
        char *got = s_metrics_text(ways[w].run, &n);
        int same = ref && got && n == n_ref && !strcmp(ref, got);
        CHECK_MSG(same, "%s: metrics differ from the built-in's:\n--- builtin\n%s--- %s\n%s",
                  ways[w].run, ref ? ref : "", ways[w].run, got ? got : "");
        fprintf(stderr, "%s: %zu metrics lines, %s the built-in's\n", ways[w].run, n,
                same ? "byte-identical to" : "NOT the same as");
        free(got);
    }
    free(ref);
}

// A command's null is NaN, unscorable: left out of the means and counted in rewards/unscorable
// (tests/reward_command.py ok: the middle item of each batch is null).
static void test_unscorable(void) {
    int rc = s_run("nulls", "train.steps=1 'rewards=[{name: correct, command: [" PY
                            ", ../tests/reward_command.py, ok]}]'");
    CHECK_INT(rc, 0);
    json_t *m = rl_test_metrics(s_tmp, "nulls");
    json_t *step1 = json_array_get(m, 1);
    CHECK_MSG(json_number_value(json_object_get(step1, "rewards/unscorable")) == 1.0 &&
                  json_number_value(json_object_get(step1, "rewards/correct/mean")) == 1.0,
              "step 1: rewards/unscorable %g, rewards/correct/mean %g (want 1 and 1)",
              json_number_value(json_object_get(step1, "rewards/unscorable")),
              json_number_value(json_object_get(step1, "rewards/correct/mean")));
    json_decref(m);
}

static void test_failures(void) {
    // a command that exits on its third request (evaluation before step 1 takes two)
    int rc =
        s_run("exits", "'rewards=[{name: correct, command: [" PY ", ../tests/reward_command.py, "
                       "exit, 3]}]'");
    char *out = rl_test_out(s_tmp);
    CHECK_INT(rc, 1);
    CHECK_CONTAINS(out, "rlctl run: reward 'correct' (command " PY " " RL_SOURCE_DIR
                        "/tests/reward_command.py exit 3) failed on ");
    CHECK_CONTAINS(out, "score failed: the command exited with status 3 before it replied (its "
                        "stderr is in the reward worker's log)");
    free(out);
    char log[700];
    snprintf(log, sizeof log, "%s/exits/logs/reward-0.log", s_tmp);
    out = rl_test_read_file(log, NULL);
    CHECK_CONTAINS(out, "reward_command: exiting on request 3 as asked"); // its stderr
    free(out);
    // it failed before its first step: the retry in the same folder is not refused
    rc = s_run("exits", "train.steps=1 train.eval_samples=4");
    out = rl_test_out(s_tmp);
    CHECK_MSG(rc == 0, "the retry after a failed start: exit %d:\n%s", rc, out);
    CHECK_CONTAINS(out, "stopped before its first step (nothing trained, no checkpoint): "
                        "starting over in it");
    free(out);
    // a command that exits before replying is caught by the check before the run (exit 2, no
    // run folder)
    rc = s_run("exits1", "'rewards=[{name: correct, command: [" PY ", ../tests/reward_command.py, "
                         "exit, 1]}]'");
    out = rl_test_out(s_tmp);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(out, "rewards[0].command: reward 'correct' (command " PY " " RL_SOURCE_DIR
                        "/tests/reward_command.py exit 1): score failed: the command exited with "
                        "status 3 before it replied");
    snprintf(log, sizeof log, "%s/exits1", s_tmp);
    CHECK_MSG(access(log, F_OK) != 0, "%s was made", log);
    free(out);

    // huge finite scores (+-1.7e308): the run stops before training, naming the reward and the
    // score, instead of a NaN loss that names nothing
    rc = s_run("huge", "'rewards=[{name: correct, command: [" PY
                       ", ../tests/reward_command.py, huge]}]'");
    out = rl_test_out(s_tmp);
    CHECK_INT(rc, 1);
    CHECK_CONTAINS(out, "reward 'correct' scored 1.7e+308 on completion 0 of ");
    CHECK_CONTAINS(out, "overflow the batch's statistics");
    CHECK_MSG(!strstr(out, "NaN"), "the run's output names a NaN:\n%s", out);
    free(out);

    // a command that starts a child in a session of its own that ignores SIGTERM (out of the
    // process group the worker kills): gone when the run ends, as the reward worker, a child
    // subreaper, adopted and killed it (it outlived the run before)
    char pidfile[600], extra[1024];
    snprintf(pidfile, sizeof pidfile, "%s/setsid.pid", s_tmp);
    snprintf(extra, sizeof extra,
             "train.steps=1 'rewards=[{name: correct, command: [" PY
             ", ../tests/reward_command.py, setsid, %s]}]'",
             pidfile);
    rc = s_run("setsid", extra);
    CHECK_INT(rc, 0);
    char *pid_txt = rl_test_read_file(pidfile, NULL);
    pid_t child = pid_txt ? (pid_t)atoi(pid_txt) : 0;
    free(pid_txt);
    CHECK_MSG(child > 0 && rl_test_all_gone(&child, 1, 2.0),
              "the command's setsid child %d outlived the run", (int)child);
    if (child > 0) {
        kill(child, SIGKILL);
    }
    snprintf(log, sizeof log, "%s/setsid/logs/reward-0.log", s_tmp);
    out = rl_test_read_file(log, NULL);
    CHECK_CONTAINS(out, "killed 1 process the rewards had started and left behind");
    free(out);

    // a command that hangs: stopped just under roles.reward_timeout (2 s -> 1.8 s) by the check
    // of the command before the run (as `rlctl validate` checks it), with the child it started
    // (in a session of its own, ignoring SIGTERM: killed, as the reward worker of a run would)
    snprintf(pidfile, sizeof pidfile, "%s/hang.pid", s_tmp);
    snprintf(extra, sizeof extra,
             "roles.reward_timeout=2 'rewards=[{name: correct, command: [" PY
             ", ../tests/reward_command.py, hang_setsid, %s]}]'",
             pidfile);
    rc = s_run("hangs", extra);
    out = rl_test_out(s_tmp);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(out, "rewards[0].command: reward 'correct' (command " PY " " RL_SOURCE_DIR
                        "/tests/reward_command.py hang_setsid ");
    CHECK_CONTAINS(out, "score failed: the command gave no reply within 1.8 s (the reward's "
                        "deadline, just under roles.reward_timeout) and was stopped");
    free(out);
    pid_txt = rl_test_read_file(pidfile, NULL);
    child = pid_txt ? (pid_t)atoi(pid_txt) : 0;
    free(pid_txt);
    CHECK_MSG(child > 0 && rl_test_all_gone(&child, 1, 2.0), "the command's child %d is alive",
              (int)child);
    if (child > 0) {
        kill(child, SIGKILL);
    }

    // a server nobody listens on: the URL in the message, after 1 + retries attempts
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0) {
        port = ntohs(a.sin_port);
    }
    snprintf(extra, sizeof extra,
             "'rewards=[{name: correct, http: {url: \"http://127.0.0.1:%d/score\", retries: 1}}]'",
             port);
    rc = s_run("refused", extra);
    out = rl_test_out(s_tmp);
    char want[512];
    snprintf(want, sizeof want,
             "reward 'correct' (http://127.0.0.1:%d/score) failed on the evaluation's batch", port);
    CHECK_INT(rc, 1);
    CHECK_CONTAINS(out, want);
    snprintf(want, sizeof want,
             "POST http://127.0.0.1:%d/score failed after 2 attempts: cannot connect: Connection "
             "refused",
             port);
    CHECK_CONTAINS(out, want);
    free(out);
    if (fd >= 0) {
        close(fd);
    }

    // https: refused by the recipe's checks, at its position, before anything starts
    rc = s_run("https", "'rewards=[{name: correct, http: {url: \"https://rm.example.com/s\"}}]'");
    out = rl_test_out(s_tmp);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(out, "<override 9>:1:");
    CHECK_CONTAINS(out, "rewards[0].http.url: 'https://rm.example.com/s': https is not "
                        "supported");
    CHECK(!rl_test_exists(s_tmp, "https"));
    free(out);
}

int main(void) {
    if (access(PY, X_OK) != 0) {
        fprintf(stderr, "note: %s missing; command and http runs not tested\n", PY);
        return 0;
    }
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "reward_run");
    RL_TEST_RUN(test_same_metrics);
    RL_TEST_RUN(test_unscorable);
    RL_TEST_RUN(test_failures);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

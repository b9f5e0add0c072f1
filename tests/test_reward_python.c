// test_reward_python — `python:` rewards, TRL's reward functions unchanged (tests/trl_rewards.py).
// The runner alone (rewards/rlctl_trl_reward.py, one request line in, one reply line out):
// plain and conversational rows, the row's columns as keyword lists, None, an async function,
// two functions from one file, the last traceback line of an exception and a wrong return in
// the error. Then `rlctl run` of the cookbook GRPO recipe (3 short steps) with math_answer's
// rule behind TRL's signature as `python:` gives the metrics.jsonl of the same rule as a
// `command:` (cookbook/plugins/math_reward.py), byte for byte, and so do rewards in the shapes
// TRL's documentation gives (tests/trl_doc_rewards.py: a conversational dataset with a `solution`
// column, the format reward over the completions' messages) against the same rules as commands;
// a function that raises stops the run with its last traceback line (at the check before the
// run, or during it); a missing file is refused at load, naming the key.
#include "rl_test.h"
#include "rl_test_run.h"

#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

static char s_tmp[] = "/tmp/rl_test_reward_python_XXXXXX";
static char s_cmd[8192];

// one plain row and one conversational row's request lines
#define S_PLAIN                                                                                    \
    "{\"items\": [{\"prompt\": \"1+1=\", \"completion\": \"2\", \"completion_ids\": [5, 1], "      \
    "\"row\": {\"prompt\": \"1+1=\", \"solution\": \"2\"}}, {\"prompt\": \"2+2=\", "               \
    "\"completion\": \"five\", \"completion_ids\": [7], \"row\": {\"prompt\": \"2+2=\", "          \
    "\"solution\": \"4\"}}]}"
#define S_CONV                                                                                     \
    "{\"items\": [{\"prompt\": \"<|user|>hi\", \"completion\": \"<think>x</think>ok\", "           \
    "\"completion_ids\": [1, 2, 3], \"row\": {\"prompt\": [{\"role\": \"user\", \"content\": "     \
    "\"hi\"}]}}]}"

// The runner's reply to `request` with tests/trl_rewards.py's function `fn`. caller owns
// result; free with free().
static char *s_reply(const char *fn, const char *request) {
    char req[600];
    snprintf(req, sizeof req, "%s/req.json", s_tmp);
    FILE *f = fopen(req, "w");
    CHECK(f != NULL);
    if (!f) {
        return NULL;
    }
    fprintf(f, "%s\n", request);
    fclose(f);
    snprintf(s_cmd, sizeof s_cmd,
             PY " '%s/rewards/rlctl_trl_reward.py' '%s/tests/trl_rewards.py' %s < '%s' "
                "> '%s/out.txt' 2> '%s/err.txt'",
             RL_SOURCE_DIR, RL_SOURCE_DIR, fn, req, s_tmp, s_tmp);
    int st = system(s_cmd);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the runner with %s: status %d", fn, st);
    return rl_test_out(s_tmp);
}

static void s_expect(const char *fn, const char *request, const char *want) {
    char *got = s_reply(fn, request);
    CHECK_MSG(got && !strcmp(got, want), "%s: replied\n%s\nwant\n%s", fn, got ? got : "(none)",
              want);
    free(got);
}

static void test_runner(void) {
    s_expect("accuracy_reward", S_PLAIN, "{\"scores\": [1.0, 0.0]}\n"); // the solution column
    s_expect("maybe", S_PLAIN, "{\"scores\": [0.5, null]}\n");          // None -> null
    s_expect("slow", S_PLAIN, "{\"scores\": [2.0, 2.0]}\n");            // async def
    s_expect("seen", S_PLAIN, "{\"scores\": [4.0, 4.0]}\n");            // prompts as strings
    s_expect("seen", S_CONV, "{\"scores\": [4.0]}\n");          // message lists; completion_ids
    s_expect("format_reward", S_CONV, "{\"scores\": [1.0]}\n"); // [{role: assistant, ...}]
    s_expect("divide", S_PLAIN,
             "{\"error\": \"divide: trl_rewards.py:51: ZeroDivisionError: division by zero\"}\n");
    s_expect("text", S_PLAIN,
             "{\"error\": \"text: ValueError: text returned a str; a list of 2 rewards (float "
             "or None) was expected\"}\n");
    s_expect("short", S_PLAIN,
             "{\"error\": \"short: ValueError: short returned 1 values; a list of 2 rewards "
             "(float or None) was expected\"}\n");
    s_expect("nope", S_PLAIN,
             "{\"error\": \"nope: LookupError: trl_rewards.py has no function "
             "'nope'\"}\n"); // a reply, not an exit
    char err[600];
    snprintf(err, sizeof err, "%s/err.txt", s_tmp);
    char *log = rl_test_read_file(err, NULL); // the whole traceback goes to the worker's log
    CHECK_CONTAINS(log, "Traceback (most recent call last)");
    free(log);
}

// Runs the cookbook recipe (3 short steps) into <tmp>/<run> with `extra`; returns the status.
static int s_run(const char *run, const char *extra) {
    snprintf(s_cmd, sizeof s_cmd,
             "cd '%s/cookbook' && '%s/rlctl' run grpo_lora.yaml train.steps=3 "
             "train.eval_every=0 train.eval_samples=32 optim.warmup_steps=1 roles.samplers=1 "
             "roles.actor_threads=1 roles.sampler_threads=1 run.dir=%s/%s %s > '%s/out.txt' 2>&1",
             RL_SOURCE_DIR, RL_BINARY_DIR, s_tmp, run, extra, s_tmp);
    int st = system(s_cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// <tmp>/<run>'s metrics.jsonl without time and timing keys. caller owns result.
static char *s_metrics(const char *run) {
    json_t *m = rl_test_metrics(s_tmp, run);
    char *s =
        m && json_array_size(m) == 4 ? json_dumps(m, JSON_PRESERVE_ORDER | JSON_INDENT(1)) : NULL;
    json_decref(m);
    return s;
}

static void test_same_metrics(void) {
    CHECK_INT(
        s_run("command", "'rewards=[{name: correct, command: [" PY ", plugins/math_reward.py]}]'"),
        0);
    CHECK_INT(s_run("python", "'rewards=[{python: {file: ../tests/trl_rewards.py, function: "
                              "correct}}]'"),
              0);
    char *out = rl_test_out(s_tmp);
    free(out);
    char *a = s_metrics("command"), *b = s_metrics("python");
    CHECK_MSG(a && b && !strcmp(a, b), "metrics differ:\n--- command\n%s\n--- python\n%s",
              a ? a : "(none)", b ? b : "(none)");
    CHECK_MSG(a && strstr(a, "\"rewards/correct/mean\""), "no rewards/correct/mean:\n%s",
              a ? a : "(none)");
    free(a);
    free(b);

    // TRL's documented shapes (tests/trl_doc_rewards.py): a conversational dataset with a
    // `solution` column, the format reward over the completions' messages, an accuracy reward
    // over the column and a length reward (so that the rewards differ between completions),
    // against the same rules as commands: the same metrics
    const char *conv = "data.train=../tests/fixtures/trl/conv_train.jsonl data.eval=null "
                       "model.chat_template=chatml train.steps=2";
    snprintf(s_cmd, sizeof s_cmd,
             "%s 'rewards=[{name: format_reward, command: [" PY ", ../tests/trl_doc_rewards_cmd.py, "
             "format]}, {name: accuracy_reward, command: [" PY ", ../tests/trl_doc_rewards_cmd.py, "
             "accuracy]}, {name: length_reward, weight: 0.01, command: [" PY ", "
             "../tests/trl_doc_rewards_cmd.py, length]}]'",
             conv);
    char *cmd_extra = strdup(s_cmd);
    CHECK_INT(s_run("doc_command", cmd_extra), 0);
    snprintf(s_cmd, sizeof s_cmd,
             "%s 'rewards=[{python: {file: ../tests/trl_doc_rewards.py, function: format_reward}}, "
             "{python: {file: ../tests/trl_doc_rewards.py, function: accuracy_reward}}, "
             "{python: {file: ../tests/trl_doc_rewards.py, function: length_reward}, weight: 0.01}]'",
             conv);
    char *py_extra = strdup(s_cmd);
    CHECK_INT(s_run("doc_python", py_extra), 0);
    free(cmd_extra);
    free(py_extra);
    json_t *ma = rl_test_metrics(s_tmp, "doc_command"), *mb = rl_test_metrics(s_tmp, "doc_python");
    char *ja = ma && json_array_size(ma) == 2 ? json_dumps(ma, JSON_PRESERVE_ORDER) : NULL;
    char *jb = mb && json_array_size(mb) == 2 ? json_dumps(mb, JSON_PRESERVE_ORDER) : NULL;
    CHECK_MSG(ja && jb && !strcmp(ja, jb), "TRL's shapes: metrics differ:\n--- command\n%s\n"
              "--- python\n%s", ja ? ja : "(none)", jb ? jb : "(none)");
    CHECK_MSG(ja && strstr(ja, "\"rewards/accuracy_reward/mean\"") &&
                  strstr(ja, "\"rewards/format_reward/mean\""),
              "no rewards/<name>/mean:\n%s", ja ? ja : "(none)");
    free(ja);
    free(jb);
    json_decref(ma);
    json_decref(mb);

    // None is "not applicable": out of the weighted sum (TRL's nansum), not an unscorable
    // total (`maybe` answers None for every completion longer than 3 characters)
    CHECK_INT(s_run("none", "train.steps=1 'rewards=[{python: {file: ../tests/trl_rewards.py, "
                            "function: maybe}}, {name: correct, builtin: math_answer}]'"),
              0);
    json_t *m = rl_test_metrics(s_tmp, "none");
    json_t *step1 = json_array_get(m, 1);
    double tot = json_number_value(json_object_get(step1, "reward"));
    double cor = json_number_value(json_object_get(step1, "rewards/correct/mean"));
    CHECK_MSG(step1 && !json_object_get(step1, "rewards/unscorable") && tot == cor,
              "step 1: reward %g, rewards/correct/mean %g (want equal), rewards/unscorable %s", tot,
              cor, json_object_get(step1, "rewards/unscorable") ? "logged" : "absent");
    json_decref(m);

    // a function that raises: the check before the run (one request, the first prompt) stops
    // it at the recipe's line, the message ending with its last traceback line
    CHECK_INT(s_run("raises", "train.steps=1 'rewards=[{python: {file: ../tests/trl_rewards.py, "
                              "function: divide}}]'"),
              2);
    out = rl_test_out(s_tmp);
    CHECK_CONTAINS(out, "rewards[0].python: reward 'divide' (command python3 ");
    CHECK_CONTAINS(out, "the command replied with an error: divide: trl_rewards.py:51: "
                        "ZeroDivisionError: division by zero");
    free(out);

    // one that raises only during the run: the run stops (exit 1) with the same last line
    CHECK_INT(s_run("raises_later", "train.steps=2 train.eval_every=0 'rewards=[{python: {file: "
                                    "../tests/trl_rewards.py, function: divide_later}}]'"),
              1);
    out = rl_test_out(s_tmp);
    CHECK_CONTAINS(out, "reward 'divide_later' (command python3 ");
    CHECK_CONTAINS(out, "divide_later: trl_rewards.py:");
    CHECK_CONTAINS(out, "ZeroDivisionError: float division by zero");
    free(out);

    // a missing file: refused before anything starts, naming the key
    CHECK_INT(s_run("missing", "'rewards=[{python: {file: nope.py, function: f}}]'"), 2);
    out = rl_test_out(s_tmp);
    CHECK_CONTAINS(out, "rewards[0].python");
    CHECK_CONTAINS(out, "file 'nope.py' does not exist");
    free(out);
}

int main(void) {
    if (access(PY, X_OK) != 0) {
        fprintf(stderr, "note: %s missing; python rewards not tested\n", PY);
        return 0;
    }
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "reward_python");
    RL_TEST_RUN(test_runner);
    RL_TEST_RUN(test_same_metrics);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

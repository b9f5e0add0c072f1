// test_env_run — `env:` in a GRPO run (docs/envs.md), on the cookbook recipe with a
// conversational copy of its data (tests/fixtures/trl/conv_train.jsonl) and short runs:
//   - a one-turn episode is today's GRPO step: a command environment that gives the row's
//     messages and says done after the first turn gives the plain run's metrics and final
//     adapter, byte for byte;
//   - multi-turn episodes (tests/env_test.py turns 2, on a copy of the model whose template ends
//     every turn with its eos): two turns each, the environment's tokens masked out of the loss
//     in every record (the mask is 0 exactly on them), step rewards summed into the return;
//     the same run with 2 environment workers gives the same metrics; the samplers' kept KV
//     cache (env.keep_kv_cache) spares most of the prefill of later turns; a TRL reward function
//     gets each episode's messages after the first prompt as its completion; PPO runs them too;
//   - the limits: an environment that never says done is cut at env.max_turns;
//   - failures, each named in the error with the environment and the step: a program that cannot
//     answer a reset (before the run, at env.command), a crash, a hang (and, with drop, a
//     worker that exits is started again for the next step)
//     (env.timeout), garbage, the wrong number of items, an {"error"} reply; with
//     env.on_error: drop a bad item drops its episode (counted in env/dropped) and the run goes
//     on, and a step whose every episode is dropped stops the run; a crashed worker of two
//     costs only its own episodes;
//   - the built-in calc and its Python twin (cookbook/envs/calc_env.py) give the same metrics,
//     also on cookbook/grpo_calc.yaml, whose base calls the tool in about half its episodes;
//   - a plugin (include/rlctl/env.h, tests/envs/once.c) in `rlctl env serve` workers gives
//     GRPO's metrics too; one that crashes is named with its signal; one built for another ABI
//     is refused before the run, at env.plugin.
//   - an environment over HTTP (tests/env_server.py: env_test.py's replies, POSTed to /env) gives
//     the command environment's metrics byte for byte, also when its first two requests get a
//     500 (retried); a server that is down (retried, then the run stops), one that answers 500
//     past its retries, one that hangs past env.timeout and one that answers garbage each stop
//     the run naming the URL and the step.
#include "rl_test.h"
#include "rl_test_run.h"

#include <jansson.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#define PY "/usr/bin/python3"

static char s_tmp[] = "/tmp/rl_test_env_run_XXXXXX";
static char s_cmd[8192];

// Runs the cookbook recipe (`steps` short steps, one sampler) into <tmp>/<run> with `extra`
// overrides; output in <tmp>/out.txt. Returns the exit status.
static int s_run_recipe(const char *recipe, const char *run, int steps, const char *extra) {
    snprintf(s_cmd, sizeof s_cmd,
             "cd '%s/cookbook' && timeout 120 '%s/rlctl' run %s train.steps=%d "
             "data.train=../tests/fixtures/trl/conv_train.jsonl data.eval=null "
             "'rewards.0.config={field: solution}' train.eval_every=0 optim.warmup_steps=1 "
             "roles.samplers=1 roles.actor_threads=1 roles.sampler_threads=1 train.log_every=1 "
             "run.dir=%s/%s %s > '%s/out.txt' 2>&1",
             RL_SOURCE_DIR, RL_BINARY_DIR, recipe, steps, s_tmp, run, extra, s_tmp);
    int st = system(s_cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int s_run(const char *run, int steps, const char *extra) {
    return s_run_recipe("grpo_lora.yaml", run, steps, extra);
}

// <tmp>/<run>'s metrics without time, timing and (drop_env) env/ keys, as JSON text. caller
// owns result.
static char *s_metrics(const char *run, int drop_env) {
    json_t *m = rl_test_metrics(s_tmp, run);
    size_t i;
    json_t *o;
    json_array_foreach(m, i, o) {
        const char *k;
        json_t *v;
        void *it;
        json_object_foreach_safe(o, it, k, v) {
            if (drop_env && strncmp(k, "env/", 4) == 0) {
                json_object_del(o, k);
            }
        }
    }
    char *s = json_array_size(m) ? json_dumps(m, JSON_PRESERVE_ORDER | JSON_INDENT(1)) : NULL;
    json_decref(m);
    return s;
}

// The last metrics line's value of `key` (NaN when absent).
static double s_last(const char *run, const char *key) {
    json_t *m = rl_test_metrics(s_tmp, run);
    json_t *v = json_object_get(json_array_get(m, json_array_size(m) - 1), key);
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    json_decref(m);
    return x;
}

// A copy of the cookbook's base model whose chat template ends every turn with its eos (the
// token the model stops on), so that an episode can go on after the policy's turn.
static void s_model(void) {
    snprintf(s_cmd, sizeof s_cmd,
             "cp -r '%s/cookbook/models/arith-noisy-base' '%s/model' && " PY " -c \"import json; "
             "p='%s/model/tokenizer_config.json'; c=json.load(open(p)); "
             "c['eos_token']='<|endoftext|>'; c['chat_template']=\\\"{%% for m in messages %%}{{ "
             "m['role'] }}: {{ m['content'] }}{{ eos_token }}{%% endfor %%}{%% if "
             "add_generation_prompt %%}assistant: {%% endif %%}\\\"; "
             "json.dump(c, open(p, 'w'))\"",
             RL_SOURCE_DIR, s_tmp, s_tmp);
    CHECK_INT(system(s_cmd), 0);
}

static void test_one_turn_is_grpo(void) {
    CHECK_INT(s_run("plain", 3, "model.chat_template=chatml"), 0);
    CHECK_INT(s_run("once", 3,
                    "model.chat_template=chatml 'env.command=[" PY
                    ", ../tests/env_test.py, once]'"),
              0);
    char *a = s_metrics("plain", 0), *b = s_metrics("once", 1);
    CHECK_MSG(a && b && !strcmp(a, b),
              "one-turn episodes differ from GRPO:\n--- plain\n%s\n--- env\n%s", a ? a : "(none)",
              b ? b : "(none)");
    free(a);
    free(b);
    CHECK_MSG(rl_test_files_equal(s_tmp, "plain/final/adapter_model.safetensors",
                                  "once/final/adapter_model.safetensors"),
              "the final adapters differ");
    CHECK(s_last("once", "env/turns") == 1.0);
    // the same environment as a plugin (tests/envs/once.c), in 2 `rlctl env serve` workers
    CHECK_INT(s_run("plugin", 3,
                    "model.chat_template=chatml env.workers=2 env.plugin=" RL_BINARY_DIR
                    "/tests/envs/once.so"),
              0);
    a = s_metrics("plain", 0);
    b = s_metrics("plugin", 1);
    CHECK_MSG(a && b && !strcmp(a, b),
              "a plugin's one-turn episodes differ from GRPO:\n%s\n---\n%s", a ? a : "(none)",
              b ? b : "(none)");
    free(a);
    free(b);
}

// Every record of step 1 of <tmp>/<run>: the mask is 1 on each policy turn's tokens and 0 on
// the environment's tokens between turns; returns the share of records with 2 turns.
static double s_check_masks(const char *run) {
    snprintf(s_cmd, sizeof s_cmd, "traj export %s/%s --step 1", s_tmp, run);
    CHECK_INT(rl_test_rlctl(s_tmp, s_cmd), 0);
    char *out = rl_test_out(s_tmp);
    int two = 0, bad = 0, n_rec = 0;
    char *save = NULL;
    for (char *line = out ? strtok_r(out, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *r = json_loads(line, 0, NULL), *ep = json_object_get(r, "episode");
        json_t *mask = json_object_get(r, "mask"), *turns = json_object_get(ep, "turns");
        json_t *msgs = json_object_get(json_object_get(ep, "conversation"), "messages");
        size_t nt = json_array_size(turns), n = json_array_size(mask);
        n_rec++;
        for (size_t u = 0; u < nt; u++) {
            size_t a = (size_t)json_integer_value(json_array_get(turns, u));
            // a turn's tokens are trained; the environment's before it are not
            bad += a >= n || json_integer_value(json_array_get(mask, a)) != 1;
            bad += u > 0 && json_integer_value(json_array_get(mask, a - 1)) != 0;
        }
        if (nt == 2) {
            two++;
            // the conversation: user, assistant, user "again", assistant
            bad += json_array_size(msgs) != 4 ||
                   strcmp(json_string_value(json_object_get(json_array_get(msgs, 2), "content")),
                          "again") != 0;
        }
        json_decref(r);
    }
    CHECK_MSG(bad == 0, "%d mask or conversation faults in %s's records", bad, run);
    free(out);
    CHECK_MSG(n_rec > 0, "no records in %s", run);
    return n_rec > 0 ? (double)two / n_rec : 0;
}

static void test_turns(void) {
    char extra[600];
    snprintf(extra, sizeof extra,
             "model.path=%s/model 'env.command=[" PY ", ../tests/env_test.py, turns, 2]'", s_tmp);
    CHECK_INT(s_run("turns", 2, extra), 0);
    CHECK(s_last("turns", "env/turns_max") == 2.0);
    CHECK(s_last("turns", "env/turns") > 1.5);
    double er = s_last("turns", "env/reward"), rw = s_last("turns", "reward");
    CHECK_MSG(er > 0.25 && er <= 0.5, "env/reward %g (0.25 a step)", er);
    CHECK_MSG(rw >= er, "the return %g leaves out the environment's rewards %g", rw, er);
    double two = s_check_masks("turns");
    CHECK_MSG(two > 0.5, "only %.0f%% of the episodes took 2 turns", 100 * two);
    // 2 workers: each episode always answered by the same one, the same run
    snprintf(extra, sizeof extra,
             "model.path=%s/model env.workers=2 'env.command=[" PY
             ", ../tests/env_test.py, turns, 2]'",
             s_tmp);
    CHECK_INT(s_run("turns2w", 2, extra), 0);
    char *a = s_metrics("turns", 0), *b = s_metrics("turns2w", 0);
    CHECK_MSG(a && b && !strcmp(a, b), "2 env workers change the run:\n%s\n---\n%s",
              a ? a : "(none)", b ? b : "(none)");
    free(a);
    free(b);
    // the samplers keep each episode's KV cache between its turns (env.keep_kv_cache, the
    // default): 4 turns prefill a fraction of what a full prefill of every turn costs
    double pf[2], tn[2];
    for (int kv = 0; kv < 2; kv++) {
        char run[16];
        snprintf(run, sizeof run, "kv%d", kv);
        snprintf(extra, sizeof extra,
                 "model.path=%s/model env.keep_kv_cache=%s 'env.command=[" PY
                 ", ../tests/env_test.py, turns, 4]'",
                 s_tmp, kv ? "true" : "false");
        CHECK_INT(s_run(run, 1, extra), 0);
        pf[kv] = s_last(run, "env/prefill_tokens");
        tn[kv] = s_last(run, "env/turns");
    }
    printf("prefill tokens of 4-turn episodes: %.0f with the kept cache, %.0f without\n", pf[1],
           pf[0]);
    CHECK_MSG(pf[1] > 0 && pf[1] * 3 < pf[0], "prefilled %g tokens with the kept cache, %g without",
              pf[1], pf[0]);
    CHECK_MSG(fabs(tn[1] - tn[0]) < 0.1, "env/turns %g with the kept cache, %g without", tn[1],
              tn[0]);
    // a sampler of one slot (sampling.max_batch=1) prefills each first prompt once per sample,
    // not once for all its samples, and samples the same episodes
    snprintf(extra, sizeof extra,
             "model.path=%s/model sampling.max_batch=1 'env.command=[" PY
             ", ../tests/env_test.py, turns, 4]'",
             s_tmp);
    CHECK_INT(s_run("kv1s", 1, extra), 0);
    double pf1 = s_last("kv1s", "env/prefill_tokens");
    printf("prefill tokens with one sampler slot: %.0f (%.0f with 64)\n", pf1, pf[1]);
    CHECK_MSG(pf1 > pf[1], "one slot prefilled %g tokens, 64 slots %g", pf1, pf[1]);
    CHECK_MSG(s_last("kv1s", "reward") == s_last("kv1", "reward") &&
                  s_last("kv1s", "env/turns") == tn[1],
              "one sampler slot changed the episodes: reward %g vs %g", s_last("kv1s", "reward"),
              s_last("kv1", "reward"));
    // a TRL reward function sees each episode's messages after the first prompt: as many
    // assistant messages as the episode had turns
    snprintf(extra, sizeof extra,
             "model.path=%s/model 'env.command=[" PY ", ../tests/env_test.py, turns, 2]' "
             "'rewards=[{python: {file: ../tests/trl_rewards.py, function: assistant_turns}, "
             "weight: 0}, {builtin: math_answer, config: {field: solution}}]'",
             s_tmp);
    CHECK_INT(s_run("pyrew", 1, extra), 0);
    double at = s_last("pyrew", "rewards/assistant_turns/mean"), et = s_last("pyrew", "env/turns");
    CHECK_MSG(at == et, "assistant messages per episode %g, env/turns %g", at, et);
    // PPO: the same episodes, its critic's values over them (GAE skips the environment's tokens)
    snprintf(extra, sizeof extra,
             "model.path=%s/model 'env.command=[" PY ", ../tests/env_test.py, turns, 2]'", s_tmp);
    CHECK_INT(s_run_recipe("ppo_lora.yaml", "ppo", 1, extra), 0);
    CHECK(s_last("ppo", "env/turns_max") == 2.0);
    CHECK(s_check_masks("ppo") > 0.5);
    // never done: cut at env.max_turns
    snprintf(extra, sizeof extra,
             "model.path=%s/model env.max_turns=3 'env.command=[" PY ", ../tests/env_test.py, "
             "never]'",
             s_tmp);
    CHECK_INT(s_run("never", 1, extra), 0);
    CHECK(s_last("never", "env/turns_max") == 3.0);
    CHECK(s_last("never", "env/truncated") == 1.0);
}

static void test_failures(void) {
    static const struct {
        const char *mode, *want;
    } cases[] = {
        {"crash", "exited with status 3 before it replied"},
        {"hang", "gave no reply within"},
        {"garbage", "the reply is not JSON"},
        {"count", "127 items for 128 episodes"},
        {"error", "the tool broke"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char extra[600];
        snprintf(extra, sizeof extra,
                 "model.path=%s/model env.timeout=1 'env.command=[" PY
                 ", ../tests/env_test.py, %s]'",
                 s_tmp, cases[i].mode);
        CHECK_INT(s_run("fail", 1, extra), 1);
        char *out = rl_test_out(s_tmp);
        CHECK_CONTAINS(out, cases[i].want);
        CHECK_CONTAINS(out, "env command [" PY);
        CHECK_CONTAINS(out, "step 1");
        free(out);
        snprintf(s_cmd, sizeof s_cmd, "rm -rf '%s/fail'", s_tmp);
        CHECK_INT(system(s_cmd), 0);
    }
    // a plugin that crashes: its worker dies, named; one of another ABI: refused before the run
    CHECK_INT(
        s_run("fail", 1,
              "model.chat_template=chatml 'env.config={crash: true}' env.plugin=" RL_BINARY_DIR
              "/tests/envs/once.so"),
        1);
    char *pout = rl_test_out(s_tmp);
    CHECK_CONTAINS(pout, "env plugin " RL_BINARY_DIR "/tests/envs/once.so");
    CHECK_CONTAINS(pout, "killed by signal 11");
    free(pout);
    snprintf(s_cmd, sizeof s_cmd, "rm -rf '%s/fail'", s_tmp);
    CHECK_INT(system(s_cmd), 0);
    CHECK_INT(s_run("fail", 1,
                    "model.chat_template=chatml env.plugin=" RL_BINARY_DIR
                    "/tests/envs/wrong_abi.so"),
              2);
    pout = rl_test_out(s_tmp);
    CHECK_CONTAINS(pout, "env.plugin");
    CHECK_CONTAINS(pout, "built for environment ABI version 99");
    free(pout);
    // a program that cannot answer a reset is caught before the run, at env.command
    CHECK_INT(s_run("fail", 1,
                    "model.chat_template=chatml 'env.command=[" PY ", ../tests/no_such_env.py]'"),
              2);
    pout = rl_test_out(s_tmp);
    CHECK_CONTAINS(pout, "env.command");
    CHECK_CONTAINS(pout, "exited with status 2 before it replied");
    free(pout);
    // drop: the bad item's episode leaves, the run goes on
    char extra[600];
    snprintf(extra, sizeof extra,
             "model.path=%s/model env.on_error=drop 'env.command=[" PY
             ", ../tests/env_test.py, badone]'",
             s_tmp);
    CHECK_INT(s_run("drop", 2, extra), 0);
    CHECK(s_last("drop", "env/dropped") == 1.0);
    char *out = rl_test_out(s_tmp);
    CHECK_CONTAINS(out, "1 of 128 episodes dropped");
    CHECK_CONTAINS(out, "'done' must be true or false");
    free(out);
    snprintf(extra, sizeof extra,
             "model.path=%s/model env.on_error=drop 'env.command=[" PY
             ", ../tests/env_test.py, garbage]'",
             s_tmp);
    CHECK_INT(s_run("dropall", 1, extra), 1);
    out = rl_test_out(s_tmp);
    CHECK_CONTAINS(out, "every episode was dropped");
    free(out);
    // drop: in step 1 the program exits at the second turn (which only the even episodes reach:
    // they are dropped, the odd ones were done); the next request starts it again and the run
    // goes on, step 2 dropping nothing
    snprintf(extra, sizeof extra,
             "model.path=%s/model env.on_error=drop 'env.command=[" PY
             ", ../tests/env_test.py, crashonce, %s/crashed]'",
             s_tmp, s_tmp);
    CHECK_INT(s_run("restart", 2, extra), 0);
    out = rl_test_out(s_tmp);
    CHECK_CONTAINS(out, "exited with status 3 before it replied");
    CHECK_CONTAINS(out, "was stopped (the command exited with status 3 before it replied");
    CHECK_CONTAINS(out, "starting it again");
    CHECK_CONTAINS(out, "step 1: 64 of 128 episodes dropped");
    free(out);
    CHECK(s_last("restart", "env/dropped") == 0.0); // step 2: none
    // the same with 2 workers: the crash costs only the episodes its worker held in that
    // request (some of the 64), the other worker's go on
    snprintf(extra, sizeof extra,
             "model.path=%s/model env.on_error=drop env.workers=2 'env.command=[" PY
             ", ../tests/env_test.py, crashonce, %s/crashed2]'",
             s_tmp, s_tmp);
    CHECK_INT(s_run("restart2", 1, extra), 0);
    out = rl_test_out(s_tmp);
    const char *at = out ? strstr(out, "step 1: ") : NULL;
    int dropped = -1;
    CHECK_MSG(at && sscanf(at, "step 1: %d of 128 episodes dropped", &dropped) == 1 &&
                  dropped > 0 && dropped < 64,
              "2 workers, one crashed: %d of 128 dropped, want some but fewer than 64 (%s)",
              dropped, out ? out : "");
    CHECK_CONTAINS(out, "the environment says: env command");
    printf("  2 workers, one crashed in step 1: %d of 128 episodes dropped (one worker: 64)\n",
           dropped);
    free(out);
}

static void test_calc_twins(void) {
    char extra[600];
    // the arith rows' string prompts (calc's reset gives the row's prompt as the user's message)
    const char *arith = "data.train=data/arith/train.jsonl 'rewards.0.config={field: answer}'";
    snprintf(extra, sizeof extra, "model.path=%s/model env.builtin=calc %s", s_tmp, arith);
    CHECK_INT(s_run("calc_builtin", 2, extra), 0);
    snprintf(extra, sizeof extra, "model.path=%s/model 'env.command=[" PY ", envs/calc_env.py]' %s",
             s_tmp, arith);
    CHECK_INT(s_run("calc_command", 2, extra), 0);
    char *a = s_metrics("calc_builtin", 0), *b = s_metrics("calc_command", 0);
    CHECK_MSG(a && b && !strcmp(a, b), "builtin calc and calc_env.py differ:\n%s\n---\n%s",
              a ? a : "(none)", b ? b : "(none)");
    free(a);
    free(b);
    // the cookbook's calc recipe, whose base calls the tool in about half its episodes, so the
    // twins answer real calls (and the episodes go on after them) in both runs
    arith = "data.train=data/arith/train.jsonl 'rewards.0.config={field: answer}'";
    CHECK_INT(s_run_recipe("grpo_calc.yaml", "cookbook_builtin", 2, arith), 0);
    snprintf(extra, sizeof extra, "env.builtin=null 'env.command=[" PY ", envs/calc_env.py]' %s",
             arith);
    CHECK_INT(s_run_recipe("grpo_calc.yaml", "cookbook_command", 2, extra), 0);
    a = s_metrics("cookbook_builtin", 0);
    b = s_metrics("cookbook_command", 0);
    CHECK_MSG(a && b && !strcmp(a, b),
              "grpo_calc.yaml: builtin calc and calc_env.py differ:\n%s\n---\n%s", a ? a : "(none)",
              b ? b : "(none)");
    free(a);
    free(b);
    double calls = s_last("cookbook_command", "env/tool_calls");
    CHECK_MSG(calls > 0.25, "grpo_calc.yaml's episodes made %g tool calls each", calls);
    CHECK(s_last("cookbook_command", "env/turns") > 1.25);
}

#define SERVER PY " " RL_SOURCE_DIR "/tests/env_server.py"

// A run against tests/env_server.py MODE (more: its other arguments) with `keys` inside env.http
// and `extra` overrides; the server is stopped after it. Returns the run's exit status.
static int s_run_http(const char *run, int steps, const char *mode, const char *keys,
                      const char *extra) {
    char args[600], ovr[1200];
    pid_t pid = 0;
    snprintf(args, sizeof args, "%s --count '%s/count'", mode, s_tmp);
    int port = rl_test_serve(s_tmp, SERVER, args, &pid);
    CHECK_MSG(port > 0, "env_server.py %s did not start", mode);
    if (port <= 0) {
        return -1;
    }
    snprintf(ovr, sizeof ovr, "model.path=%s/model 'env.http={url: http://127.0.0.1:%d/env%s}' %s",
             s_tmp, port, keys, extra);
    int rc = s_run(run, steps, ovr);
    rl_test_serve_stop(&pid);
    return rc;
}

// Lines of <tmp>/count (the server's requests) that contain `needle`; the file is removed.
static int s_served(const char *needle) {
    char path[600];
    snprintf(path, sizeof path, "%s/count", s_tmp);
    char *t = rl_test_read_file(path, NULL);
    int n = 0;
    for (const char *p = t; p && (p = strstr(p, needle)) != NULL; p++) {
        n++;
    }
    free(t);
    unlink(path);
    return n;
}

static void test_http(void) {
    // the command environment's run (test_turns) over HTTP: the same metrics, every request a
    // POST of JSON to the URL's path
    CHECK_INT(s_run_http("http", 2, "turns 2", "", ""), 0);
    int ok = s_served("/env application/json 200\n");
    CHECK_MSG(ok >= 4, "the server answered %d requests", ok);
    char *a = s_metrics("turns", 0), *b = s_metrics("http", 0);
    CHECK_MSG(a && b && !strcmp(a, b), "the http env differs from the command env:\n%s\n---\n%s",
              a ? a : "(none)", b ? b : "(none)");
    free(b);
    // two 500s, retried: the same run
    CHECK_INT(s_run_http("http500", 2, "turns 2 --fail-first 2", "", ""), 0);
    CHECK_INT(s_served(" 500\n"), 2);
    b = s_metrics("http500", 0);
    CHECK_MSG(a && b && !strcmp(a, b), "two retried 500s change the run:\n%s\n---\n%s",
              a ? a : "(none)", b ? b : "(none)");
    free(a);
    free(b);
    // failures: the run stops naming the URL and the step
    static const struct {
        const char *mode, *keys, *want;
    } cases[] = {
        {"crash", ", retries: 1", "failed after 2 attempts: HTTP 500: the environment crashed"},
        {"hang", "", "no whole reply within 1 s (the time left of env.timeout)"},
        {"garbage", "", "the reply is not JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_INT(s_run_http("fail", 1, cases[i].mode, cases[i].keys, "env.timeout=1"), 1);
        char *out = rl_test_out(s_tmp);
        CHECK_CONTAINS(out, cases[i].want);
        CHECK_CONTAINS(out, "http://127.0.0.1:");
        CHECK_MSG(!strstr(out, "/env: POST http://"), "the URL twice: %s", out);
        CHECK_CONTAINS(out, "step 1");
        free(out);
        snprintf(s_cmd, sizeof s_cmd, "rm -rf '%s/fail'", s_tmp);
        CHECK_INT(system(s_cmd), 0);
    }
    s_served(" "); // (the failures' requests: not counted)
    // down: a port nobody listens on (a server's, stopped), tried 1 + retries times
    pid_t pid = 0;
    char extra[600];
    int port = rl_test_serve(s_tmp, SERVER, "once", &pid);
    rl_test_serve_stop(&pid);
    CHECK_MSG(port > 0, "env_server.py did not start");
    snprintf(extra, sizeof extra,
             "model.path=%s/model 'env.http={url: http://127.0.0.1:%d/env, retries: 2}'", s_tmp,
             port);
    CHECK_INT(s_run("down", 1, extra), 1);
    char *out = rl_test_out(s_tmp);
    char want[200];
    snprintf(want, sizeof want,
             "env http: POST http://127.0.0.1:%d/env failed after 3 attempts: cannot connect: "
             "Connection refused",
             port);
    CHECK_CONTAINS(out, want);
    CHECK_CONTAINS(out, "step 1");
    free(out);
}

int main(void) {
    if (access(PY, X_OK) != 0) {
        fprintf(stderr, "note: %s missing; command environments not tested\n", PY);
        return 0;
    }
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "env_run");
    s_model();
    RL_TEST_RUN(test_one_turn_is_grpo);
    RL_TEST_RUN(test_turns);
    RL_TEST_RUN(test_failures);
    RL_TEST_RUN(test_calc_twins);
    RL_TEST_RUN(test_http);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

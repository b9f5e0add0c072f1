// test_ppo_run — `rlctl run` of PPO end to end on the shipped arith base model (0.8M
// parameters): a controller with an actor holding the critic, samplers and a reward worker, a
// few small rollouts (4 prompts, 2 epochs of 2 mini-batches), the adaptive KL controller on:
//   1. the run folder: PPO's metrics at every step (REFERENCE.md §6 names), the critic in every
//      checkpoint (critic/: adapter, value head, optimizer; state.json: critic_train_step and
//      the KL coefficient, which the controller moved) and in final/critic/ (an HF sequence
//      classifier, LoRA merged, with the tokenizer: critic.init of a new run takes it), per-token
//      values
//      advantages and rewards in every record of the store, and `rlctl traj show` printing them;
//   2. resume is exact with a critic and a moving beta: --stop-at 2 + --resume == one go
//      (metrics, the policy adapter, the critic's adapter and value head, the trajectories);
//   3. the critic in its own worker (roles.critic: worker) computes the same bytes;
//   4. critic warmup: the first step trains only the critic (no policy metrics, the samplers
//      keep version 0), and a fully tuned critic (critic.lora: false) writes an HF folder;
//   5. a critic worker killed mid-run stops the run naming it, with a resumable checkpoint line,
//      and leaves no worker behind.
#include "rl_test.h"
#include "rl_test_run.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static char s_tmp[] = "/tmp/rl_test_ppo_XXXXXX";
#define s_rlctl(args) rl_test_rlctl(s_tmp, args)
#define s_out() rl_test_out(s_tmp)
#define s_exists(rel) rl_test_exists(s_tmp, rel)
#define s_metrics(run) rl_test_metrics(s_tmp, run)
#define s_files_equal(a, b) rl_test_files_equal(s_tmp, a, b)
static char s_cmd[16384];

static void s_recipe(void) {
    char p[600];
    snprintf(p, sizeof(p), "%s/ppo.yaml", s_tmp);
    FILE *f = fopen(p, "w");
    if (!f) {
        return;
    }
    fprintf(f,
            "run: {name: p, seed: 5}\n"
            "model: {path: %s/cookbook/models/arith-base}\n"
            "lora: {enabled: true, r: 4, alpha: 8, target_modules: [q_proj, v_proj, up_proj]}\n"
            "data: {train: %s/cookbook/data/arith/train.jsonl, "
            "eval: %s/cookbook/data/arith/eval.jsonl, format: prompt, answer_field: answer, "
            "max_prompt_length: 16}\n"
            "algorithm: {name: ppo, epochs: 2, mini_batches: 2, beta: 0.05, kl_target: 0.01, "
            "kl_horizon: 40}\n"
            "critic: {lr: 2.0e-3}\n"
            "sampling: {temperature: 1.0, max_new_tokens: 40}\n"
            "rewards:\n  - builtin: math_answer\n"
            "optim: {lr: 1.0e-3, warmup_steps: 1}\n"
            "train: {steps: 4, batch_size: 4, micro_batch_size: 1, eval_every: 2, "
            "eval_samples: 8, save_every: 2}\n"
            "roles: {samplers: 2, sampler_threads: 1, actor_threads: 1}\n",
            RL_SOURCE_DIR, RL_SOURCE_DIR, RL_SOURCE_DIR);
    fclose(f);
}

static int s_run(const char *run, const char *more) {
    snprintf(s_cmd, sizeof(s_cmd), "run %s/ppo.yaml run.dir=%s/%s %s", s_tmp, s_tmp, run, more);
    int rc = s_rlctl(s_cmd);
    if (rc != 0) {
        char *o = s_out();
        fprintf(stderr, "rlctl %s -> %d\n%s\n", s_cmd, rc, o ? o : "");
        free(o);
    }
    return rc;
}

// `rlctl traj export RUN --jsonl` into <tmp>/<name>. Returns its exit status.
static int s_export(const char *run, const char *name) {
    snprintf(s_cmd, sizeof(s_cmd), "traj export %s/%s --jsonl", s_tmp, run);
    int rc = s_rlctl(s_cmd);
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/out.txt", s_tmp);
    snprintf(to, sizeof to, "%s/%s", s_tmp, name);
    rename(from, to);
    return rc;
}

static void s_check_run(const char *run) {
    static const char *const files[] = {
        "checkpoints/step-2/DONE",
        "checkpoints/step-2/adapter/adapter_model.safetensors",
        "checkpoints/step-2/critic/adapter/adapter_model.safetensors",
        "checkpoints/step-2/critic/value_head.safetensors",
        "checkpoints/step-2/critic/optimizer.bin",
        "final/adapter_model.safetensors",
        "final/critic/model.safetensors", // an HF sequence classifier, LoRA merged
        "final/critic/config.json",
        "final/critic/tokenizer.json",
        NULL};
    char rel[600];
    for (int i = 0; files[i]; i++) {
        snprintf(rel, sizeof(rel), "%s/%s", run, files[i]);
        CHECK_MSG(s_exists(rel), "missing %s", rel);
    }
    json_t *m = s_metrics(run);
    CHECK_INT((int)json_array_size(m), 5);
    static const char *const names[] = {"reward",
                                        "rewards/math_answer/mean",
                                        "completions/mean_length",
                                        "kl",
                                        "kl_coef",
                                        "approx_kl",
                                        "entropy",
                                        "clip_ratio/region_mean",
                                        "loss",
                                        "grad_norm",
                                        "value_loss",
                                        "value_clip_fraction",
                                        "returns/mean",
                                        "returns/std",
                                        "advantages/mean",
                                        "advantages/std",
                                        "critic/grad_norm",
                                        "critic/learning_rate",
                                        "learning_rate",
                                        "num_tokens",
                                        "sampler/logprob_gap",
                                        NULL};
    double beta[5] = {0};
    for (size_t i = 1; i < json_array_size(m); i++) {
        json_t *o = json_array_get(m, i);
        for (int k = 0; names[k]; k++) {
            CHECK_MSG(json_is_number(json_object_get(o, names[k])), "step %zu: no %s", i, names[k]);
        }
        CHECK_MSG(json_object_get(o, "explained_variance") != NULL,
                  "step %zu: no "
                  "explained_variance",
                  i);
        beta[i] = json_number_value(json_object_get(o, "kl_coef"));
        double gap = json_number_value(json_object_get(o, "sampler/logprob_gap"));
        CHECK_MSG(gap < 1e-5, "step %zu: sampler/logprob_gap %g", i, gap);
    }
    json_decref(m);
    // the adaptive controller moved beta from its start
    CHECK_MSG(beta[1] == 0.05 && beta[2] != beta[1] && beta[4] != beta[2],
              "kl_coef did not move: %g %g %g", beta[1], beta[2], beta[4]);
    snprintf(rel, sizeof(rel), "%s/%s/checkpoints/step-2/state.json", s_tmp, run);
    char *st = rl_test_read_file(rel, NULL);
    CHECK(st && strstr(st, "\"critic_train_step\"") && strstr(st, "\"kl_coef\""));
    free(st);
}

// every record of a PPO run carries per-token values, advantages and rewards of its completion's
// length
static void s_check_records(const char *name) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", s_tmp, name);
    char *txt = rl_test_read_file(p, NULL);
    int n = 0;
    for (char *l = txt ? strtok(txt, "\n") : NULL; l; l = strtok(NULL, "\n")) {
        json_t *o = json_loads(l, 0, NULL);
        json_t *v = json_object_get(o, "values"), *a = json_object_get(o, "advantages");
        json_t *c = json_object_get(o, "completion_ids");
        json_t *tr = json_object_get(o, "token_rewards");
        CHECK_MSG(json_is_array(v) && json_is_array(a) && json_is_array(tr) &&
                      json_is_array(c) && json_array_size(v) == json_array_size(c) &&
                      json_array_size(a) == json_array_size(c) &&
                      json_array_size(tr) == json_array_size(c),
                  "record %d: values/advantages/token_rewards missing or of the wrong length",
                  n);
        json_decref(o);
        n++;
    }
    free(txt);
    CHECK_MSG(n == 16, "%d records, expected 16 (4 steps x 4 prompts)", n);
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "ppo");
    s_recipe();
    // 1. one go
    CHECK_INT(s_run("a", ""), 0);
    s_check_run("a");
    CHECK_INT(s_export("a", "a.traj"), 0);
    s_check_records("a.traj");
    snprintf(s_cmd, sizeof(s_cmd), "traj show %s/a --step 3", s_tmp);
    CHECK_INT(s_rlctl(s_cmd), 0);
    char *show = s_out();
    CHECK_CONTAINS(show, "advantage per token (below)");
    CHECK_CONTAINS(show, "\n  token rewards: ");
    CHECK_CONTAINS(show, "\n  values:        ");
    CHECK_CONTAINS(show, "\n  advantages:    ");
    free(show);
    // 2. resume
    CHECK_INT(s_run("r", "--stop-at 2"), 0);
    CHECK_INT(s_run("r", "--resume"), 0);
    CHECK_INT(s_export("r", "r.traj"), 0);
    json_t *ma = s_metrics("a"), *mr = s_metrics("r");
    CHECK_MSG(json_equal(ma, mr), "resumed metrics differ from the uninterrupted run's");
    json_decref(mr);
    static const char *const finals[] = {"final/adapter_model.safetensors",
                                         "final/critic/model.safetensors",
                                         "final/critic/config.json", NULL};
    char fa[600], fb[600];
    for (int i = 0; finals[i]; i++) {
        snprintf(fa, sizeof fa, "a/%s", finals[i]);
        snprintf(fb, sizeof fb, "r/%s", finals[i]);
        CHECK_MSG(s_files_equal(fa, fb), "resume: %s differs", finals[i]);
    }
    CHECK_MSG(s_files_equal("a.traj", "r.traj"), "resume: trajectories differ");
    // 3. the critic in its own worker
    CHECK_INT(s_run("w", "roles.critic=worker"), 0);
    char *out = s_out();
    CHECK_CONTAINS(out, "critic");
    free(out);
    json_t *mw = s_metrics("w");
    CHECK_MSG(json_equal(ma, mw), "roles.critic: worker changed the metrics");
    json_decref(mw);
    for (int i = 0; finals[i]; i++) {
        snprintf(fa, sizeof fa, "a/%s", finals[i]);
        snprintf(fb, sizeof fb, "w/%s", finals[i]);
        CHECK_MSG(s_files_equal(fa, fb), "roles.critic: worker: %s differs", finals[i]);
    }
    CHECK(s_exists("w/logs/critic-0.log"));
    json_decref(ma);
    // 4. critic warmup, and a fully tuned critic
    CHECK_INT(s_run("c", "algorithm.critic_warmup_steps=1 critic.lora=false train.steps=2 "
                         "train.save_every=0 train.eval_every=0"),
              0);
    json_t *mc = s_metrics("c");
    json_t *s1 = json_array_get(mc, 1), *s2 = json_array_get(mc, 2);
    CHECK_MSG(s1 && !json_object_get(s1, "loss") && json_object_get(s1, "value_loss"),
              "warmup step 1: the policy trained, or the critic did not");
    CHECK_MSG(s2 && json_object_get(s2, "loss"), "step 2: the policy did not train");
    json_decref(mc);
    CHECK(s_exists("c/final/critic/model.safetensors"));
    CHECK(!s_exists("c/final/critic/value_head.safetensors"));
    CHECK_INT(s_export("c", "c.traj"), 0);
    snprintf(fa, sizeof fa, "%s/c.traj", s_tmp);
    char *ct = rl_test_read_file(fa, NULL);
    // step 1 sampled with version 0, step 2 too: the warmup step synced nothing
    CHECK_MSG(ct && !strstr(ct, "\"policy_version\":1") && !strstr(ct, "\"policy_version\": 1"),
              "a warmup step changed the policy version");
    free(ct);
    // 4b. final/critic/ is a reward-model folder: a new run's critic starts from it
    char ci[700];
    snprintf(ci, sizeof ci,
             "critic.init=%s/a/final/critic train.steps=1 train.save_every=0 train.eval_every=0",
             s_tmp);
    CHECK_INT(s_run("i", ci), 0);
    // 5. the critic worker dies
    snprintf(s_cmd, sizeof(s_cmd),
             "run %s/ppo.yaml run.dir=%s/k roles.critic=worker train.steps=100000 "
             "train.eval_every=0",
             s_tmp, s_tmp);
    pid_t pid = rl_test_spawn(s_tmp, s_cmd, "bg.txt");
    snprintf(fa, sizeof fa, "%s/k/metrics.jsonl", s_tmp);
    int started = 0;
    for (int i = 0; i < 1200 && !started; i++) { // up to 60 s for step 2
        char *m = rl_test_read_file(fa, NULL);
        started = m && strstr(m, "{\"step\":2,") != NULL;
        free(m);
        rl_test_nap();
    }
    CHECK_MSG(started, "the run to kill never reached step 2");
    pid_t kids[64], victim = 0;
    int nk = rl_test_children(pid, kids, 64);
    for (int i = 0; i < nk; i++) {
        char p[128];
        snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)kids[i]);
        size_t len = 0;
        char *cl = rl_test_read_file(p, &len);
        for (size_t j = 0; cl && j + 1 < len; j++) {
            cl[j] = cl[j] ? cl[j] : ' ';
        }
        if (cl && strstr(cl, "--role critic --rank 0")) {
            victim = kids[i];
        }
        free(cl);
    }
    CHECK_MSG(victim > 0, "no critic worker among the controller's %d children", nk);
    if (victim > 0) {
        kill(victim, SIGKILL);
    }
    CHECK_INT(rl_test_wait_exit(pid, 60), 1);
    snprintf(fa, sizeof fa, "%s/bg.txt", s_tmp);
    char *bg = rl_test_read_file(fa, NULL);
    CHECK_CONTAINS(bg, "worker critic/0");
    CHECK_CONTAINS(bg, "killed by signal 9");
    CHECK_CONTAINS(bg, "continue with rlctl run --resume");
    free(bg);
    CHECK_MSG(rl_test_all_gone(kids, nk, 5), "workers left after the critic died");
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

// test_grpo_run — `rlctl run` of GRPO end to end: a controller with actor, sampler and reward
// worker processes on the shipped arith base model (0.8M parameters), a few small steps:
//   1. a run writes the run folder of DESIGN.md §3: metrics with TRL's names at every step,
//      evaluation before/every N/at the end, the TensorBoard file, every step's records in
//      trajectories.lmdb (read back through rl_traj), checkpoints and a PEFT-shaped final/;
//      sampler and trainer logprobs agree (the gap metric);
//   2. resume is exact: 4 steps in one go == --stop-at 2 + --resume (metrics, adapter bytes,
//      trajectory records);
//   3. Ctrl-C (SIGINT) stops after the step with a checkpoint, leaves no worker, and resumes;
//      SIGKILL of the controller leaves no orphan worker;
//   4. bad input is refused before any worker starts and before the run folder is touched;
//   5. a reward plugin that crashes, hangs or fails, and a sampler that dies, stop the run with
//      the culprit named and a resumable checkpoint of the last finished step.
#define _GNU_SOURCE // memmem
#include "rl_test.h"
#include "rl_test_run.h"
#include "rl_traj.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char s_tmp[] = "/tmp/rl_test_grpo_XXXXXX";
#define s_rlctl(args) rl_test_rlctl(s_tmp, args)
#define s_out() rl_test_out(s_tmp)
#define s_exists(rel) rl_test_exists(s_tmp, rel)
#define s_metrics(run) rl_test_metrics(s_tmp, run)
#define s_files_equal(a, b) rl_test_files_equal(s_tmp, a, b)
static char s_cmd[16384];

static const char *s_lora =
    "lora: {enabled: true, r: 4, alpha: 8, target_modules: [q_proj, v_proj, up_proj]}\n";

// A small GRPO recipe on the cookbook's arith task (s_lora's tuning); `extra` appends sections.
static void s_recipe(const char *name, const char *rewards, const char *extra) {
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", s_tmp, name);
    FILE *f = fopen(p, "w");
    if (!f) {
        return;
    }
    fprintf(f,
            "run: {name: g, seed: 7}\n"
            "model: {path: %s/cookbook/models/arith-base}\n"
            "%s"
            "data: {train: %s/cookbook/data/arith/train.jsonl, "
            "eval: %s/cookbook/data/arith/eval.jsonl, format: prompt, answer_field: answer, "
            "max_prompt_length: 16}\n"
            "algorithm: {name: grpo, num_generations: 4, beta: 0.04, loss_agg: token_mean}\n"
            "sampling: {temperature: 1.0, max_new_tokens: 40}\n"
            "rewards:\n%s"
            "optim: {lr: 1.0e-3, warmup_steps: 1}\n"
            "train: {steps: 4, batch_size: 4, micro_batch_size: 8, eval_every: 2, "
            "eval_samples: 16, save_every: 2, keep_checkpoints: 3}\n"
            "roles: {samplers: 2, actor_threads: 1, sampler_threads: 1, reward_timeout: 3}\n%s",
            RL_SOURCE_DIR, s_lora, RL_SOURCE_DIR, RL_SOURCE_DIR,
            rewards ? rewards : "  - {name: correct, builtin: math_answer}\n",
            extra ? extra : "");
    fclose(f);
}

// ---- processes -----------------------------------------------------------------------------

#define s_nap() rl_test_nap()
#define s_spawn(args) rl_test_spawn(s_tmp, args, "bg.txt")
#define s_children(pid, out, cap) rl_test_children(pid, out, cap)
#define s_all_gone(p, n, t) rl_test_all_gone(p, n, t)

// Waits until <run>/metrics.jsonl has a line for step >= `step`.
static int s_wait_step(const char *run, int step, double timeout_s) {
    char p[600], key[64];
    snprintf(p, sizeof(p), "%s/%s/metrics.jsonl", s_tmp, run);
    snprintf(key, sizeof(key), "{\"step\":%d,", step);
    for (int tries = 0; tries < (int)(timeout_s * 20); tries++) {
        char *txt = rl_test_read_file(p, NULL);
        int ok = txt && (strstr(txt, key) != NULL);
        free(txt);
        if (ok) {
            return 1;
        }
        s_nap();
    }
    return 0;
}

#define s_wait_exit(pid, t) rl_test_wait_exit(pid, t)

// The newest step-<N> under <run>/checkpoints with a DONE marker, or -1.
static int s_latest_checkpoint(const char *run) {
    char p[600];
    snprintf(p, sizeof(p), "%s/%s/checkpoints", s_tmp, run);
    DIR *d = opendir(p);
    int best = -1;
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        int n;
        char done[900];
        if (sscanf(e->d_name, "step-%d", &n) == 1) {
            snprintf(done, sizeof(done), "%s/%s/DONE", p, e->d_name);
            if (access(done, F_OK) == 0 && n > best) {
                best = n;
            }
        }
    }
    if (d) {
        closedir(d);
    }
    return best;
}

// ---- 1. a run and its folder ----------------------------------------------------------------

// The first metrics line with an evaluation (before training: step 0). borrowed.
static json_t *s_eval_line(json_t *metrics) {
    for (size_t i = 0; i < json_array_size(metrics); i++) {
        json_t *o = json_array_get(metrics, i);
        if (json_object_get(o, "eval/accuracy")) {
            return o;
        }
    }
    return NULL;
}

static void s_check_store(const char *run, int steps, int per_step) {
    char p[600], err[512];
    snprintf(p, sizeof(p), "%s/%s/trajectories.lmdb", s_tmp, run);
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(p, RL_TRAJ_READONLY, &t, err, sizeof(err)), 0);
    if (!t) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK_INT((int)rl_traj_last_step(t), steps);
    json_t *m = s_metrics(run); // line s is step s
    double worst_gap = 0, epoch1 = 0;
    for (int s = 1; s <= steps; s++) {
        rl_traj_record_t *recs = NULL;
        int n = 0;
        CHECK_INT(rl_traj_read_step(t, (uint64_t)s, &recs, &n, err, sizeof(err)), 0);
        CHECK_INT(n, per_step);
        // TRL's rewards/<name>/std (Bessel), completions/min_length and max_length, epoch: the
        // step's metrics line against its records
        json_t *o = json_array_get(m, (size_t)s);
        double rsum = 0, ss = 0;
        int lo = n > 0 ? recs[0].n_completion : 0, hi = lo;
        for (int i = 0; i < n; i++) {
            rsum += recs[i].rewards[0];
            lo = recs[i].n_completion < lo ? recs[i].n_completion : lo;
            hi = recs[i].n_completion > hi ? recs[i].n_completion : hi;
        }
        for (int i = 0; i < n; i++) {
            ss += (recs[i].rewards[0] - rsum / n) * (recs[i].rewards[0] - rsum / n);
        }
        CHECK_CLOSE(json_number_value(json_object_get(o, "rewards/correct/std")),
                    sqrt(ss / (n - 1)), 1e-12);
        CHECK_INT((int)json_number_value(json_object_get(o, "completions/min_length")), lo);
        CHECK_INT((int)json_number_value(json_object_get(o, "completions/max_length")), hi);
        double epoch = json_number_value(json_object_get(o, "epoch"));
        epoch1 = s == 1 ? epoch : epoch1;
        CHECK_MSG(epoch1 > 0 && epoch1 < 1 && fabs(epoch - s * epoch1) < 1e-12,
                  "step %d: epoch %g (step 1: %g)", s, epoch, epoch1);
        for (int i = 0; i < n; i++) {
            rl_traj_record_t *r = &recs[i];
            CHECK_INT((int)r->step, s);
            CHECK_INT((int)r->policy_version, s - 1);
            CHECK_INT((int)r->prompt_index, i / 4);
            CHECK_INT((int)r->sample_index, i % 4);
            CHECK(r->n_prompt > 0 && r->n_completion > 0 && r->n_completion <= 40);
            CHECK(r->old_logprobs != NULL && r->ref_logprobs != NULL);
            CHECK(r->reward == 0.0 || r->reward == 1.0);
            CHECK_INT(r->n_rewards, 1);
            for (int k = 0; r->old_logprobs && k < r->n_completion; k++) {
                double g = fabs((double)r->old_logprobs[k] - (double)r->sampler_logprobs[k]);
                worst_gap = g > worst_gap ? g : worst_gap;
                CHECK(r->sampler_logprobs[k] <= 0.0f);
            }
        }
        // GRPO advantages of a group sum to zero
        for (int g = 0; g + 4 <= n; g += 4) {
            double sum = 0;
            for (int i = 0; i < 4; i++) {
                sum += recs[g + i].advantage;
            }
            CHECK_CLOSE(sum, 0.0, 1e-9);
        }
        rl_traj_records_free(&recs, n);
    }
    // the sampler's and the trainer's logprobs are the same numbers up to float noise
    CHECK_MSG(worst_gap < 1e-4, "worst |logπ_old - logμ| %g", worst_gap);
    json_decref(m);
    rl_traj_close(&t);
}

static void s_check_run(const char *run) {
    static const char *const files[] = {"recipe.yaml", "metrics.jsonl", "trajectories.lmdb",
                                        "checkpoints/step-2/DONE",
                                        "checkpoints/step-2/adapter/adapter_model.safetensors",
                                        "checkpoints/step-2/optimizer.bin",
                                        "final/adapter_config.json",
                                        "final/adapter_model.safetensors", "logs/actor-0.log",
                                        "logs/sampler-1.log", "logs/reward-0.log", NULL};
    char rel[600];
    for (int i = 0; files[i]; i++) {
        snprintf(rel, sizeof(rel), "%s/%s", run, files[i]);
        CHECK_MSG(s_exists(rel), "missing %s", rel);
    }
    // a TensorBoard event file
    snprintf(rel, sizeof(rel), "%s/%s", s_tmp, run);
    DIR *d = opendir(rel);
    int events = 0;
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        events += strncmp(e->d_name, "events.out.tfevents.", 20) == 0;
    }
    if (d) {
        closedir(d);
    }
    CHECK_INT(events, 1);
    // metrics: step 0 (the evaluation before training), then every step
    json_t *m = s_metrics(run);
    CHECK_INT((int)json_array_size(m), 5);
    static const char *const names[] = {
        "reward", "reward_std", "rewards/correct/mean", "rewards/correct/std",
        "frac_reward_zero_std", "completions/mean_length", "completions/min_length",
        "completions/max_length", "completions/clipped_ratio", "epoch", "kl", "entropy",
        "clip_ratio/low_mean", "clip_ratio/high_mean", "loss", "grad_norm", "learning_rate",
        "num_tokens", "sampler/logprob_gap", NULL};
    for (size_t i = 0; i < json_array_size(m); i++) {
        json_t *o = json_array_get(m, i);
        CHECK_INT((int)json_integer_value(json_object_get(o, "step")), (int)i);
        int evals = i == 0 || i == 2 || i == 4;
        CHECK_MSG((json_object_get(o, "eval/accuracy") != NULL) == evals,
                  "step %zu: eval/accuracy %s", i, evals ? "missing" : "unexpected");
        CHECK(!evals || json_object_get(o, "eval/accuracy_greedy"));
        for (int k = 0; i > 0 && names[k]; k++) {
            CHECK_MSG(json_is_number(json_object_get(o, names[k])), "step %zu: no %s", i,
                      names[k]);
        }
        if (i > 0) {
            double gap = json_number_value(json_object_get(o, "sampler/logprob_gap"));
            CHECK_MSG(gap < 1e-5, "step %zu: sampler/logprob_gap %g", i, gap);
            double kl = json_number_value(json_object_get(o, "kl"));
            CHECK_MSG(i > 1 || fabs(kl) < 1e-6, "step 1: kl %g (the policy is the reference)",
                      kl);
        }
    }
    json_decref(m);
    // the raw file keeps the timings of every phase
    snprintf(rel, sizeof(rel), "%s/%s/metrics.jsonl", s_tmp, run);
    char *txt = rl_test_read_file(rel, NULL);
    static const char *const phases[] = {"timing/generate", "timing/reward", "timing/reference",
                                         "timing/train", "timing/sync", "timing/store", NULL};
    for (int k = 0; txt && phases[k]; k++) {
        CHECK_CONTAINS(txt, phases[k]);
    }
    free(txt);
    // final/ is a PEFT adapter of the recipe's targets
    snprintf(rel, sizeof(rel), "%s/%s/final/adapter_config.json", s_tmp, run);
    json_t *cfg = json_load_file(rel, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(cfg, "peft_type")), "LORA");
    CHECK_INT((int)json_integer_value(json_object_get(cfg, "r")), 4);
    json_decref(cfg);
    snprintf(rel, sizeof(rel), "%s/%s/final/adapter_model.safetensors", s_tmp, run);
    size_t n = 0;
    char *st = rl_test_read_file(rel, &n);
    CHECK(st && n > 8);
    if (st && n > 8) {
        uint64_t h;
        memcpy(&h, st, 8);
        char *hdr = strndup(st + 8, (size_t)h);
        CHECK_CONTAINS(hdr, "base_model.model.model.layers.3.mlp.up_proj.lora_B.weight");
        CHECK_CONTAINS(hdr, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
        CHECK(strstr(hdr, "k_proj") == NULL);
        free(hdr);
    }
    free(st);
    s_check_store(run, 4, 16);
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "grpo");
    char args[8192];
    char *out;
    s_recipe("g.yaml", NULL, NULL);

    // ---- 1. a run ---------------------------------------------------------------------------
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/a", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    CHECK_CONTAINS(out, "eval/accuracy ");
    CHECK_CONTAINS(out, "eval/accuracy_greedy ");
    CHECK_CONTAINS(out, "step 4/4");
    if (rl_test_failed) {
        fprintf(stderr, "%s\n", out ? out : "(no output)");
    }
    free(out);
    s_check_run("a");
    snprintf(args, sizeof(args), "traj ls %s/a", s_tmp);
    CHECK_INT(s_rlctl(args), 0);

    // a stop string of several tokens ends completions where the text first holds it
    snprintf(args, sizeof(args),
             "run %s/g.yaml run.dir=%s/s train.steps=1 train.eval_every=0 train.save_every=0 "
             "'sampling.stop=[\"####\"]'", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(args, sizeof(args), "traj export %s/s --jsonl", s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    int lines = 0, cut = 0;
    for (char *l = out ? strtok(out, "\n") : NULL; l; l = strtok(NULL, "\n")) {
        json_t *o = json_loads(l, 0, NULL);
        if (!o) {
            continue;
        }
        lines++;
        const char *c = json_string_value(json_object_get(o, "completion"));
        const char *fin = json_string_value(json_object_get(o, "finish"));
        size_t n = c ? strlen(c) : 0;
        int ends = n >= 4 && strcmp(c + n - 4, "####") == 0;
        cut += ends && fin && strcmp(fin, "stop") == 0;
        CHECK_MSG(!c || !strstr(c, "####") || ends, "text after the stop string: %s", c);
        json_decref(o);
    }
    free(out);
    CHECK_INT(lines, 16);
    CHECK_MSG(cut >= 12, "%d of 16 completions cut at the stop string", cut);

    // ---- 1b. evaluation by the recipe's own rewards -----------------------------------------
    // correct (math_answer, weight 1) and a weight-0 length term, measured never trained on; 4
    // completions per eval prompt: the pass rate is the share whose total reaches the threshold
    s_recipe("ev_e.yaml",
             "  - {name: correct, builtin: math_answer}\n"
             "  - {name: len, builtin: length, weight: 0, config: {target: 20}}\n",
             NULL);
    snprintf(
        args, sizeof(args),
        "run %s/ev_e.yaml run.dir=%s/ev_e train.steps=1 train.eval_every=1 train.eval_samples=8 "
        "train.eval_k=4 train.save_every=0 log.completions=2",
        s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    // log.completions: a table of the step's first 2 prompts' first completions
    out = s_out();
    CHECK_CONTAINS(out, "step 1: 2 of 16 completions (the first of each of 2 prompts)");
    CHECK_MSG(out && strstr(out, "correct") && strstr(out, "total  advantage  tokens  end") &&
                  strstr(out, "#### "),
              "no completions table: %s", out ? out : "");
    free(out);
    json_t *me = s_metrics("ev_e");
    json_t *e0 = s_eval_line(me);
    double acc = json_number_value(json_object_get(e0, "eval/accuracy"));
    double pk = json_number_value(json_object_get(e0, "eval/pass@4"));
    double cm = json_number_value(json_object_get(e0, "eval/rewards/correct/mean"));
    double er = json_number_value(json_object_get(e0, "eval/reward"));
    CHECK_MSG(json_object_get(e0, "eval/rewards/len/mean") && json_object_get(e0, "eval/pass@4") &&
                  json_object_get(e0, "eval/accuracy_greedy"),
              "no eval/rewards/len/mean, eval/pass@4 or eval/accuracy_greedy in the eval line");
    // the weight-0 term is left out of the total: total = correct, which is 0 or 1
    CHECK_MSG(acc == cm && er == cm && acc > 0 && pk >= acc && pk <= 1,
              "eval/accuracy %g, eval/reward %g, correct mean %g, pass@4 %g", acc, er, cm, pk);
    // the evaluations' completions are in the store's eval table: steps 0 and 1, each 8 prompts
    // x (4 sampled + 1 greedy), scored, none trained on
    snprintf(args, sizeof(args), "traj ls %s/ev_e --eval", s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    CHECK_MSG(out && strstr(out, "       0       40") && strstr(out, "       1       40"),
              "no eval records in the store: %s", out ? out : "");
    free(out);
    snprintf(args, sizeof(args), "traj show %s/ev_e --eval --step 0", s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    CHECK_MSG(out && strstr(out, "[prompt 7, sample 4]") && strstr(out, "(0 trained)") &&
                  strstr(out, "correct="),
              "eval records: %.500s", out ? out : "");
    free(out);
    // rlctl eval RECIPE: the same evaluation in one process, the same draws: the numbers of the
    // run's step-0 evaluation (the base model)
    snprintf(args, sizeof(args),
             "eval %s/ev_e.yaml train.eval_samples=8 train.eval_k=4 train.threads=1 --json", s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    json_t *ej = out ? json_loads(out, 0, NULL) : NULL;
    const char *keys[] = {"eval/accuracy", "eval/accuracy_greedy",      "eval/pass@4",
                          "eval/reward",   "eval/rewards/correct/mean", "eval/rewards/len/mean"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        json_t *a = json_object_get(ej, keys[k]), *b = json_object_get(e0, keys[k]);
        CHECK_MSG(a && b && json_number_value(a) == json_number_value(b),
                  "rlctl eval's %s %g, the run's %g (%s)", keys[k], json_number_value(a),
                  json_number_value(b), out ? out : "");
    }
    json_decref(ej);
    free(out);
    json_decref(me);
    // a threshold no completion reaches; eval rows without an answer, scored by a format rule
    snprintf(s_cmd, sizeof s_cmd,
             "sed 's/, *\"answer\": *\"[^\"]*\"//' %s/cookbook/data/arith/eval.jsonl | "
             "head -n 8 > %s/noanswer.jsonl && ! grep -q answer %s/noanswer.jsonl",
             RL_SOURCE_DIR, s_tmp, s_tmp);
    CHECK_MSG(system(s_cmd) == 0, "cannot write eval rows without answers");
    s_recipe("ev_f.yaml",
             "  - {name: format, builtin: regex_format, config: {pattern: '####'}}\n", NULL);
    snprintf(args, sizeof(args),
             "run %s/ev_f.yaml run.dir=%s/ev_f train.steps=1 train.eval_every=1 data.eval=%s/noanswer.jsonl "
             "train.save_every=0", s_tmp, s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(args, sizeof(args),
             "run %s/ev_f.yaml run.dir=%s/ev_g train.steps=1 train.eval_every=1 data.eval=%s/noanswer.jsonl "
             "train.save_every=0 train.eval_pass_threshold=2", s_tmp, s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    json_t *mf = s_metrics("ev_f"), *mg = s_metrics("ev_g");
    json_t *f0 = s_eval_line(mf), *g0 = s_eval_line(mg);
    double ff = json_number_value(json_object_get(f0, "eval/accuracy"));
    double fr = json_number_value(json_object_get(f0, "eval/rewards/format/mean"));
    CHECK_MSG(json_object_get(f0, "eval/accuracy") && ff == fr && ff > 0.5,
              "format-only eval without answers: accuracy %g, format mean %g", ff, fr);
    CHECK_MSG(json_object_get(g0, "eval/accuracy") &&
                  json_number_value(json_object_get(g0, "eval/accuracy")) == 0,
              "threshold 2: no completion passes");
    json_decref(mf);
    json_decref(mg);

    // ---- 1c. TRL's dataset shapes train, SFT and GRPO alike -----------------------------------
    // from the arith rows: conversational prompts (GRPO; no prompt field: the messages),
    // messages with the answer (GRPO must not show it; SFT trains on it), conversational
    // prompt-completion and preference rows (GRPO takes their prompt), with the built-in ChatML
    snprintf(s_cmd, sizeof s_cmd,
             "cd %s && head -n 64 %s/cookbook/data/arith/train.jsonl | /usr/bin/python3 -c '"
             "import json,sys\n"
             "rows=[json.loads(l) for l in sys.stdin]\n"
             "u=lambda r: {\"role\": \"user\", \"content\": r[\"prompt\"]}\n"
             "a=lambda r: {\"role\": \"assistant\", \"content\": r[\"completion\"]}\n"
             "shapes={\"conv\": lambda r: {\"messages\": [u(r)], \"answer\": r[\"answer\"]},"
             "\"msgs\": lambda r: {\"messages\": [u(r), a(r)], \"answer\": r[\"answer\"]},"
             "\"pc\": lambda r: {\"prompt\": [u(r)], \"completion\": [a(r)], "
             "\"answer\": r[\"answer\"]},"
             "\"pref\": lambda r: {\"prompt\": r[\"prompt\"], \"chosen\": r[\"completion\"], "
             "\"rejected\": \"0\", \"answer\": r[\"answer\"]}}\n"
             "for k,f in shapes.items():\n"
             "  open(\"shape_\"+k+\".jsonl\",\"w\").write(\"\".join(json.dumps(f(r))+\"\\n\" for r "
             "in rows))\n"
             "'",
             s_tmp, RL_SOURCE_DIR);
    CHECK_MSG(system(s_cmd) == 0, "cannot write the dataset shapes");
    const struct {
        const char *name, *recipe, *extra;
    } shapes[] = {
        {"conv", "g.yaml", "data.train=%s/shape_conv.jsonl"},
        {"msgs", "g.yaml", "data.train=%s/shape_msgs.jsonl"},
        {"pc", "g.yaml", "data.train=%s/shape_pc.jsonl"},
        {"pref", "g.yaml", "data.train=%s/shape_pref.jsonl"},
        {"sft_msgs", RL_SOURCE_DIR "/cookbook/sft_arith.yaml",
         "data.train=%s/shape_msgs.jsonl data.format=auto"},
        {"sft_pc", RL_SOURCE_DIR "/cookbook/sft_arith.yaml",
         "data.train=%s/shape_pc.jsonl data.format=auto"},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char extra[700], recipe[700];
        snprintf(extra, sizeof extra, shapes[i].extra, s_tmp);
        snprintf(recipe, sizeof recipe, "%s%s%s", shapes[i].recipe[0] == '/' ? "" : s_tmp,
                 shapes[i].recipe[0] == '/' ? "" : "/", shapes[i].recipe);
        snprintf(args, sizeof(args),
                 "run %s run.dir=%s/shape_%s %s model.chat_template=chatml train.steps=2 "
                 "train.batch_size=4 train.micro_batch_size=4 train.eval_every=0 data.eval=null "
                 "train.save_every=0 optim.warmup_steps=0 roles.samplers=1",
                 recipe, s_tmp, shapes[i].name, extra);
        int rc = s_rlctl(args);
        out = s_out();
        CHECK_MSG(rc == 0 && out && strstr(out, "2 steps in"), "shape %s does not train (%d): %s",
                  shapes[i].name, rc, out ? out : "");
        free(out);
    }
    // the GRPO prompts of conversational rows are the rendered template, without the answer
    // (the arith vocabulary has no letters: the role names decode to nothing)
    snprintf(args, sizeof(args), "traj export %s/shape_msgs --jsonl", s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    const char *pp = out ? strstr(out, "\"prompt\":\"") : NULL;
    const char *pe = pp ? strstr(pp, "\",\"completion\"") : NULL;
    CHECK_MSG(pp && pe && strstr(pp, "<|im_start|>\\n") &&
                  !memmem(pp, (size_t)(pe - pp), "####", 4) &&
                  !memcmp(pe - 14, "<|im_start|>\\n", 14),
              "a messages row's prompt: %.400s", out ? out : "");
    free(out);

    // ---- 2. resume is exact ---------------------------------------------------------------
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/b --stop-at 2", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    CHECK_CONTAINS(out, "stopped after step 2 (--stop-at)");
    free(out);
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/b --resume", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    json_t *ma = s_metrics("a"), *mb = s_metrics("b");
    CHECK_MSG(json_equal(ma, mb), "metrics of 4 steps differ from 2 + resume 2");
    if (!json_equal(ma, mb)) {
        char *x = json_dumps(ma, JSON_COMPACT), *y = json_dumps(mb, JSON_COMPACT);
        fprintf(stderr, "one go: %s\nresumed: %s\n", x, y);
        free(x);
        free(y);
    }
    json_decref(ma);
    json_decref(mb);
    CHECK_MSG(s_files_equal("a/final/adapter_model.safetensors",
                            "b/final/adapter_model.safetensors"),
              "final adapters differ");
    s_check_store("b", 4, 16);
    // resuming from a named older checkpoint redoes the steps after it identically
    snprintf(args, sizeof(args), "cp %s/b/final/adapter_model.safetensors %s/b4.safetensors",
             s_tmp, s_tmp);
    CHECK_INT(system(args), 0);
    snprintf(args, sizeof(args), "run %s/g.yaml --resume %s/b/checkpoints/step-2", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    CHECK_CONTAINS(out, "at step 2");
    free(out);
    CHECK_MSG(s_files_equal("b4.safetensors", "b/final/adapter_model.safetensors"),
              "resuming from step-2 again gave another adapter");
    mb = s_metrics("b");
    CHECK_INT((int)json_array_size(mb), 5);
    json_decref(mb);

    // full fine-tuning: final/ is a complete HF folder that rlctl eval loads
    s_lora = "lora: {enabled: false}\n";
    s_recipe("full.yaml", NULL, NULL);
    s_lora = "lora: {enabled: true, r: 4, alpha: 8, target_modules: [q_proj, v_proj, up_proj]}\n";
    snprintf(args, sizeof(args),
             "run %s/full.yaml run.dir=%s/f optim.lr=1e-4 train.steps=2 train.eval_every=0 "
             "train.save_every=0", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    CHECK(s_exists("f/final/model.safetensors") && s_exists("f/final/tokenizer.json") &&
          s_exists("f/final/config.json") && s_exists("f/final/generation_config.json"));
    snprintf(args, sizeof(args),
             "eval --model %s/f/final --data %s/cookbook/data/arith/eval.jsonl --limit 8 "
             "--max-new-tokens 40", s_tmp, RL_SOURCE_DIR);
    CHECK_INT(s_rlctl(args), 0);

    // ---- 3. signals ------------------------------------------------------------------------
    // Ctrl-C: the step finishes, a checkpoint is written, no worker is left; --resume goes on
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/c train.steps=100000", s_tmp, s_tmp);
    pid_t pid = s_spawn(args);
    CHECK(s_wait_step("c", 2, 60));
    pid_t kids[64];
    int nk = s_children(pid, kids, 64);
    CHECK_INT(nk, 4); // actor, reward, 2 samplers
    kill(pid, SIGINT);
    CHECK_INT(s_wait_exit(pid, 60), 1);
    CHECK_MSG(s_all_gone(kids, nk, 5), "a worker outlived the controller after SIGINT");
    char bg[600];
    snprintf(bg, sizeof(bg), "%s/bg.txt", s_tmp);
    out = rl_test_read_file(bg, NULL);
    CHECK_CONTAINS(out, "interrupted after step");
    CHECK_CONTAINS(out, "--resume");
    free(out);
    int last = s_latest_checkpoint("c");
    CHECK(last >= 2);
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/c --resume train.steps=100000 "
             "--stop-at %d", s_tmp, s_tmp, last + 1);
    CHECK_INT(s_rlctl(args), 0);
    out = s_out();
    char want[128];
    snprintf(want, sizeof(want), "at step %d", last);
    CHECK_CONTAINS(out, want);
    snprintf(want, sizeof(want), "stopped after step %d", last + 1);
    CHECK_CONTAINS(out, want);
    free(out);

    // SIGKILL of the controller: the workers die with it
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/k train.steps=100000", s_tmp, s_tmp);
    pid = s_spawn(args);
    CHECK(s_wait_step("k", 1, 60));
    nk = s_children(pid, kids, 64);
    CHECK_INT(nk, 4);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK_MSG(s_all_gone(kids, nk, 5), "orphan workers after SIGKILL of the controller");

    // ---- 4. bad input: refused before any worker starts, nothing written ----------------------
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/a", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "already holds a run");
    free(out);
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/x model.path=%s/nope", s_tmp, s_tmp,
             s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "model.path");
    free(out);
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/x data.train=%s/nope.jsonl", s_tmp,
             s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "data.train");
    free(out);
    char rows[600];
    snprintf(rows, sizeof(rows), "%s/q.jsonl", s_tmp);
    FILE *f = fopen(rows, "w");
    if (f) {
        fputs("{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"question\": \"2+2=\"}\n", f);
        fclose(f);
    }
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/x data.train=%s", s_tmp, s_tmp, rows);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "q.jsonl:2: no field 'prompt'");
    free(out);
    s_recipe("np.yaml", "  - {name: x, plugin: " RL_TEST_PLUGIN_DIR "/not_a_plugin.so}\n", NULL);
    snprintf(args, sizeof(args), "run %s/np.yaml run.dir=%s/x", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "not_a_plugin.so");
    CHECK_CONTAINS(out, "rewards[0].plugin");
    free(out);
    s_recipe("wa.yaml", "  - {name: x, plugin: " RL_TEST_PLUGIN_DIR "/wrong_abi.so}\n", NULL);
    snprintf(args, sizeof(args), "run %s/wa.yaml run.dir=%s/x", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "wrong_abi.so");
    free(out);
    CHECK_MSG(!s_exists("x"), "a refused run created its folder");

    // ---- 5. failures during a run --------------------------------------------------------------
    // a plugin that crashes on step 3's batch: the run stops naming it, with step 2 resumable
    s_recipe("crash.yaml",
             "  - {name: correct, builtin: math_answer}\n"
             "  - {name: boom, plugin: " RL_TEST_PLUGIN_DIR "/crash.so, config: {after: 2}}\n",
             NULL);
    // (no evaluation: it is scored by the same rewards, and these plugins count their calls)
    snprintf(args, sizeof(args),
             "run %s/crash.yaml run.dir=%s/rc train.save_every=0 train.eval_every=0 data.eval=null", s_tmp,
             s_tmp);
    CHECK_INT(s_rlctl(args), 1);
    out = s_out();
    CHECK_CONTAINS(out, "reward 'boom'");
    CHECK_CONTAINS(out, "crash.so");
    CHECK_CONTAINS(out, "worker reward/0 (pid");
    // SIGSEGV; under AddressSanitizer the sanitizer reports it and exits with status 1
    CHECK_MSG(out && (strstr(out, "killed by signal 11") || strstr(out, "exited with status")),
              "the crash is not described: %s", out ? out : "");
    CHECK_CONTAINS(out, "checkpoint of step 2 written");
    free(out);
    CHECK(s_exists("rc/checkpoints/step-2/DONE"));
    // a plugin that hangs: roles.reward_timeout (3 s) ends it
    s_recipe("hang.yaml",
             "  - {name: correct, builtin: math_answer}\n"
             "  - {name: slow, plugin: " RL_TEST_PLUGIN_DIR "/hang.so, config: {after: 1}}\n",
             NULL);
    snprintf(args, sizeof(args), "run %s/hang.yaml run.dir=%s/rh train.eval_every=0 data.eval=null", s_tmp,
             s_tmp);
    CHECK_INT(s_rlctl(args), 1);
    out = s_out();
    CHECK_CONTAINS(out, "reward 'slow'");
    CHECK_CONTAINS(out, "reward_timeout");
    CHECK_CONTAINS(out, "checkpoint of step 1 written");
    free(out);
    // a plugin that returns an error: its message is shown
    s_recipe("err.yaml",
             "  - {name: correct, builtin: math_answer}\n"
             "  - {name: flaky, plugin: " RL_TEST_PLUGIN_DIR "/score_error.so}\n",
             NULL);
    snprintf(args, sizeof(args), "run %s/err.yaml run.dir=%s/re", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 1);
    out = s_out();
    CHECK_CONTAINS(out, "reward 'flaky'");
    CHECK_CONTAINS(out, "backend unavailable");
    free(out);
    // a sampler killed mid-run: named, with a checkpoint of the last finished step
    snprintf(args, sizeof(args), "run %s/g.yaml run.dir=%s/d train.steps=100000", s_tmp, s_tmp);
    pid = s_spawn(args);
    CHECK(s_wait_step("d", 2, 60));
    nk = s_children(pid, kids, 64);
    pid_t victim = 0;
    for (int i = 0; i < nk; i++) {
        char p[128];
        snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)kids[i]);
        size_t len = 0;
        char *cl = rl_test_read_file(p, &len);
        for (size_t j = 0; cl && j + 1 < len; j++) {
            cl[j] = cl[j] ? cl[j] : ' ';
        }
        if (cl && strstr(cl, "--role sampler --rank 1")) {
            victim = kids[i];
        }
        free(cl);
    }
    CHECK(victim > 0);
    if (victim > 0) {
        kill(victim, SIGKILL);
    }
    CHECK_INT(s_wait_exit(pid, 60), 1);
    out = rl_test_read_file(bg, NULL);
    CHECK_CONTAINS(out, "worker sampler/1");
    CHECK_CONTAINS(out, "killed by signal 9");
    CHECK_CONTAINS(out, "; continue with rlctl run --resume");
    free(out);
    CHECK_MSG(s_all_gone(kids, nk, 5), "workers left after a failed run");

    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

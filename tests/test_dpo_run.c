// test_dpo_run — `rlctl run` of DPO end to end on the arith base model (LoRA) with pairs made here
// (chosen: the worked answer; rejected: the same with a wrong final number):
//   1. TRL's metrics at every step, the loss at ln 2 on the first step (the policy is its
//      reference) and the pairs learned (rewards/accuracies 1 by the last step);
//   2. the reference cache: the first run computes each row's reference sum once
//      (ref/computed = 2 x batch_size a step, the pairs being distinct), a second run on the same
//      data and base computes none and trains to the same bytes;
//   3. resume is exact: --stop-at 3 + --resume == one go (metrics, adapter bytes);
//   4. a DPO recipe with rows of another layout is refused naming the key;
//   5. held-out pairs (data.eval_pairs) before training, every train.eval_every steps and after
//      the last: TRL's metrics under eval/, improving with training, their reference sums
//      computed once (eval/ref/computed);
//   6. held-out prompts (data.eval): eval/accuracy and eval/accuracy_greedy by sampling on the
//      samplers, which get the actor's weights first (the draws are the same at every evaluation,
//      so a change of eval/accuracy is the weights').
#include "rl_test.h"
#include "rl_test_run.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_tmp[] = "/tmp/rl_test_dpo_XXXXXX";
static char s_cmd[8192];

// pairs i0 .. i0 + n - 1 into <tmp>/<name>
static void s_pairs(const char *name, int i0, int n) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", s_tmp, name);
    FILE *f = fopen(p, "w");
    for (int i = i0; f && i < i0 + n; i++) {
        int a = 11 + (i * 7) % 80, b = 2 + i % 8, c = 100 + (i * 37) % 800;
        int x = a * b, y = x + c;
        fprintf(f,
                "{\"prompt\": \"%d*%d+%d=\", \"chosen\": \"%d*%d=%d;%d+%d=%d #### %d\", "
                "\"rejected\": \"%d*%d=%d;%d+%d=%d #### %d\"}\n",
                a, b, c, a, b, x, x, c, y, y, a, b, x, x, c, y, y + 1 + i % 5);
    }
    if (f) {
        fclose(f);
    }
}

static void s_files(void) {
    char p[600];
    s_pairs("pairs.jsonl", 0, 64);
    s_pairs("heldout.jsonl", 64, 12);
    snprintf(p, sizeof p, "%s/dpo.yaml", s_tmp);
    FILE *f = fopen(p, "w");
    if (f) {
        fprintf(f,
                "run: {seed: 3}\n"
                "model: {path: %s/cookbook/models/arith-noisy-base}\n"
                "lora: {enabled: true, r: 4, alpha: 8}\n"
                "data: {train: %s/pairs.jsonl, eval_pairs: %s/heldout.jsonl,\n"
                "       eval: %s/cookbook/data/arith/eval.jsonl}\n"
                "algorithm: {name: dpo, beta: 0.1}\n"
                "sampling: {max_new_tokens: 40}\n"
                "optim: {lr: 1.0e-3}\n"
                "train: {steps: 6, batch_size: 4, micro_batch_size: 4, save_every: 3, "
                "eval_every: 3, eval_samples: 24}\n",
                RL_SOURCE_DIR, s_tmp, s_tmp, RL_SOURCE_DIR);
        fclose(f);
    }
}

static int s_run(const char *run, const char *cache, const char *more) {
    snprintf(s_cmd, sizeof s_cmd, "run %s/dpo.yaml run.dir=%s/%s data.ref_cache=%s/%s %s", s_tmp,
             s_tmp, run, s_tmp, cache, more);
    int rc = rl_test_rlctl(s_tmp, s_cmd);
    if (rc != 0) {
        char *o = rl_test_out(s_tmp);
        fprintf(stderr, "rlctl %s -> %d\n%s\n", s_cmd, rc, o ? o : "");
        free(o);
    }
    return rc;
}

// sum of ref/computed over a run's metrics
static double s_computed(json_t *m) {
    double n = 0;
    for (size_t i = 0; i < json_array_size(m); i++) {
        n += json_number_value(json_object_get(json_array_get(m, i), "ref/computed"));
    }
    return n;
}

// the metrics without ref/computed (what the cache changes)
static json_t *s_no_ref(json_t *m) {
    json_t *c = json_deep_copy(m);
    for (size_t i = 0; i < json_array_size(c); i++) {
        json_object_del(json_array_get(c, i), "ref/computed");
        json_object_del(json_array_get(c, i), "eval/ref/computed");
    }
    return c;
}

int main(void) {
    RL_TEST_ASSERT_FILE(mkdtemp(s_tmp), "a temporary directory");
    s_files();
    // 1. one go, a fresh cache
    CHECK_INT(s_run("a", "cache1", ""), 0);
    json_t *ma = rl_test_metrics(s_tmp, "a");
    CHECK_INT((int)json_array_size(ma), 7); // step 0: the evaluation before training
    static const char *const names[] = {"loss",
                                        "grad_norm",
                                        "learning_rate",
                                        "rewards/chosen",
                                        "rewards/rejected",
                                        "rewards/accuracies",
                                        "rewards/margins",
                                        "logps/chosen",
                                        "logps/rejected",
                                        "num_tokens",
                                        "ref/computed",
                                        NULL};
    for (size_t i = 1; i < json_array_size(ma); i++) {
        json_t *o = json_array_get(ma, i);
        for (int k = 0; names[k]; k++) {
            CHECK_MSG(json_is_number(json_object_get(o, names[k])), "step %zu: no %s", i, names[k]);
        }
        CHECK_MSG(json_number_value(json_object_get(o, "ref/computed")) == 8,
                  "step %zu: %g reference sums computed, expected 8 (4 new pairs)", i,
                  json_number_value(json_object_get(o, "ref/computed")));
    }
    double l1 = json_number_value(json_object_get(json_array_get(ma, 1), "loss"));
    double acc = json_number_value(json_object_get(json_array_get(ma, 6), "rewards/accuracies"));
    CHECK_MSG(fabs(l1 - log(2.0)) < 1e-6, "first loss %.9g, want ln 2", l1);
    CHECK_MSG(acc == 1.0, "the pairs were not learned: rewards/accuracies %g at step 6", acc);
    // held-out pairs before training and every 3 steps, under eval/, improving with training;
    // their reference sums computed at the first evaluation only
    json_t *e0 = json_array_get(ma, 0), *e3 = json_array_get(ma, 3), *e6 = json_array_get(ma, 6);
    CHECK_MSG(json_is_number(json_object_get(e3, "eval/rewards/accuracies")) &&
                  json_is_number(json_object_get(e6, "eval/loss")) &&
                  json_is_number(json_object_get(e0, "eval/loss")) &&
                  !json_object_get(json_array_get(ma, 2), "eval/loss"),
              "eval/ metrics missing at steps 0, 3 and 6, or present at 2");
    CHECK_MSG(json_number_value(json_object_get(e0, "eval/ref/computed")) == 24 &&
                  json_number_value(json_object_get(e3, "eval/ref/computed")) == 0 &&
                  json_number_value(json_object_get(e6, "eval/ref/computed")) == 0,
              "held-out reference sums computed %g, %g, %g times at steps 0, 3, 6 (want 24, 0, 0)",
              json_number_value(json_object_get(e0, "eval/ref/computed")),
              json_number_value(json_object_get(e3, "eval/ref/computed")),
              json_number_value(json_object_get(e6, "eval/ref/computed")));
    CHECK_MSG(fabs(json_number_value(json_object_get(e0, "eval/loss")) - log(2.0)) < 1e-6,
              "eval/loss %.9g before training, want ln 2 (the policy is its reference)",
              json_number_value(json_object_get(e0, "eval/loss")));
    // held-out prompts sampled at every evaluation; the samplers follow the actor's weights
    double g0 = json_number_value(json_object_get(e0, "eval/accuracy_greedy"));
    double g6 = json_number_value(json_object_get(e6, "eval/accuracy_greedy"));
    CHECK_MSG(json_is_number(json_object_get(e0, "eval/accuracy")) &&
                  json_is_number(json_object_get(e3, "eval/accuracy")) &&
                  json_is_number(json_object_get(e6, "eval/accuracy")) &&
                  json_is_number(json_object_get(e6, "eval/format_rate")),
              "eval/accuracy missing at steps 0, 3 or 6");
    fprintf(stderr, "held-out prompts: eval/accuracy %.3f -> %.3f, greedy %.3f -> %.3f\n",
            json_number_value(json_object_get(e0, "eval/accuracy")),
            json_number_value(json_object_get(e6, "eval/accuracy")), g0, g6);
    CHECK_MSG(json_number_value(json_object_get(e0, "eval/accuracy")) !=
                  json_number_value(json_object_get(e6, "eval/accuracy")),
              "eval/accuracy did not move in 6 steps: the samplers kept the base weights?");
    double el3 = json_number_value(json_object_get(e3, "eval/loss"));
    double el6 = json_number_value(json_object_get(e6, "eval/loss"));
    double ea6 = json_number_value(json_object_get(e6, "eval/rewards/accuracies"));
    fprintf(stderr, "held-out pairs: eval/loss %.4f at step 3, %.4f at step 6; accuracy %.2f\n",
            el3, el6, ea6);
    CHECK_MSG(el6 < el3 && el6 < log(2.0) && ea6 > 0.9,
              "the held-out pairs did not improve: loss %g -> %g, accuracy %g", el3, el6, ea6);
    CHECK(rl_test_exists(s_tmp, "a/final/adapter_model.safetensors"));
    // 2. the same data and base again: nothing computed, the same training
    CHECK_INT(s_run("b", "cache1", ""), 0);
    json_t *mb = rl_test_metrics(s_tmp, "b");
    CHECK_MSG(json_number_value(json_object_get(json_array_get(mb, 0), "eval/ref/computed")) == 0,
              "a second run computed the held-out reference sums again");
    CHECK_MSG(s_computed(mb) == 0, "a second run computed %g reference sums", s_computed(mb));
    json_t *xa = s_no_ref(ma), *xb = s_no_ref(mb);
    CHECK_MSG(json_equal(xa, xb), "cached reference sums changed the training");
    CHECK(rl_test_files_equal(s_tmp, "a/final/adapter_model.safetensors",
                              "b/final/adapter_model.safetensors"));
    // 3. resume (a cache of its own): stopped at 3, resumed, equal to one go
    CHECK_INT(s_run("r", "cache2", "--stop-at 3"), 0);
    CHECK_INT(s_run("r", "cache2", "--resume"), 0);
    json_t *mr = rl_test_metrics(s_tmp, "r");
    CHECK_MSG(json_equal(ma, mr), "the resumed run's metrics differ from one go's");
    CHECK(rl_test_files_equal(s_tmp, "a/final/adapter_model.safetensors",
                              "r/final/adapter_model.safetensors"));
    json_decref(xa);
    json_decref(xb);
    json_decref(ma);
    json_decref(mb);
    json_decref(mr);
    // 4. the wrong rows
    snprintf(s_cmd, sizeof s_cmd, "run %s/dpo.yaml run.dir=%s/x data.format=prompt", s_tmp, s_tmp);
    CHECK_INT(rl_test_rlctl(s_tmp, s_cmd), 2);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "data.format: prompt rows hold no pairs; DPO takes auto or preference");
    free(o);
    if (!rl_test_failed) {
        snprintf(s_cmd, sizeof s_cmd, "rm -rf '%s'", s_tmp);
        if (system(s_cmd) != 0) {
            fprintf(stderr, "warning: could not remove %s\n", s_tmp);
        }
    }
    RL_TEST_DONE();
}

// test_pref_run — `rlctl run` of the preference algorithms end to end on the arith base model
// (LoRA) with pairs made here (chosen: the worked answer; rejected: the same with a wrong final
// number). DPO:
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
// Reward models (algorithm rm):
//   7. its metrics at every step (loss near ln 2 at first: a fresh head scores ~0), held-out
//      pairs before training, every eval_every steps and after: eval/rm/accuracy from ~chance to
//      > 0.9;
//   8. final/ is an HF sequence classifier (Qwen2ForSequenceClassification, score.weight [1, C],
//      no lm_head, the tokenizer's pad id, the tokenizer files) whose scores, computed here with
//      the model library, rank the held-out pairs exactly as the run's last evaluation did;
//   9. resume is exact (metrics, final/model.safetensors); a run from final/ as model.path keeps
//      its head (its first evaluation is the last one of the run it came from);
//      The shipped cookbook/models/arith-rm ranks the cookbook's held-out pairs >= 90% right.
//  10. margins (TRL's column) change the loss; pairs of which only some have one are refused;
//      full tuning writes the same kind of folder.
// Rewards from a model (`rewards: - model: DIR`):
//  11. GRPO trained on the reward model of 7 alone, the task's rule measuring with weight 0:
//      every stored completion's `rm` score equals the folder's score of prompt + completion
//      computed here, its total reward is that score (the weight-0 rule neither adds nor makes
//      it NaN), and the rule's mean is logged (and regex_format's, which must match inside
//      rlctl's binary too); a folder that is not a reward model is refused
//      before the run starts, naming the entry.
#include "rl_test.h"
#include "rl_test_run.h"

#include "rl_data.h"
#include "rl_head.h"
#include "rl_model.h"
#include "rl_safetensors.h"
#include "rl_tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_tmp[] = "/tmp/rl_test_pref_XXXXXX";
static char s_cmd[8192];

// <tmp>/<name> with the text of fmt (printf's), replaced.
static void s_write(const char *name, const char *fmt, ...) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", s_tmp, name);
    FILE *f = fopen(p, "w");
    CHECK_MSG(f != NULL, "cannot write %s", p);
    if (f) {
        va_list ap;
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fclose(f);
    }
}

// `rlctl <s_cmd>` in <tmp>; its output on stderr when the exit status is not `want`. Returns the
// exit status.
static int s_rlctl(int want) {
    int rc = rl_test_rlctl(s_tmp, s_cmd);
    if (rc != want) {
        char *o = rl_test_out(s_tmp);
        fprintf(stderr, "rlctl %s -> %d\n%s\n", s_cmd, rc, o ? o : "");
        free(o);
    }
    return rc;
}

// pairs i0 .. i0 + n - 1 into <tmp>/<name>; margins: 0 none, 1 every pair "margin": 2, 2 only
// the first pair
static void s_pairs_m(const char *name, int i0, int n, int margins) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", s_tmp, name);
    FILE *f = fopen(p, "w");
    for (int i = i0; f && i < i0 + n; i++) {
        int a = 11 + (i * 7) % 80, b = 2 + i % 8, c = 100 + (i * 37) % 800;
        int x = a * b, y = x + c;
        fprintf(f,
                "{\"prompt\": \"%d*%d+%d=\", \"chosen\": \"%d*%d=%d;%d+%d=%d #### %d\", "
                "\"rejected\": \"%d*%d=%d;%d+%d=%d #### %d\"%s}\n",
                a, b, c, a, b, x, x, c, y, y, a, b, x, x, c, y, y + 1 + i % 5,
                margins == 1 || (margins == 2 && i == i0) ? ", \"margin\": 2.0" : "");
    }
    if (f) {
        fclose(f);
    }
}

static void s_pairs(const char *name, int i0, int n) {
    s_pairs_m(name, i0, n, 0);
}

static void s_files(void) {
    s_pairs("pairs.jsonl", 0, 64);
    s_pairs("heldout.jsonl", 64, 12);
    s_write("dpo.yaml",
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
}

static int s_run(const char *run, const char *cache, const char *more) {
    snprintf(s_cmd, sizeof s_cmd, "run %s/dpo.yaml run.dir=%s/%s data.ref_cache=%s/%s %s", s_tmp,
             s_tmp, run, s_tmp, cache, more);
    return s_rlctl(0);
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

static void s_dpo(void) {
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
}

// ---- reward models
// -------------------------------------------------------------------------------

static int s_rm_run(const char *run, const char *more) {
    snprintf(s_cmd, sizeof s_cmd, "run %s/rm.yaml run.dir=%s/%s %s", s_tmp, s_tmp, run, more);
    return s_rlctl(0);
}

static double s_num(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

// A reward-model folder opened with the model library (seq_cls), its tokenizer and its head.
typedef struct {
    rl_model_t *m;
    rl_tokenizer_t *tok;
    float *w; // (C) score.weight
    int C;
} s_rmf_t;

static void s_rmf_close(s_rmf_t *f) {
    rl_model_destroy(&f->m);
    rl_tokenizer_destroy(&f->tok);
    free(f->w);
    memset(f, 0, sizeof *f);
}

// Opens `dir`, checking that it is a reward model (score.weight [1, C], no lm_head). 0 or -1.
static int s_rmf_open(const char *dir, s_rmf_t *f) {
    char err[1024] = "";
    memset(f, 0, sizeof *f);
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = 1;
    mo.seq_cls = 1;
    f->m = rl_model_load(dir, &mo, err, sizeof err);
    f->tok = f->m ? rl_tokenizer_new_dir(dir, err, sizeof err) : NULL;
    rl_st_model_t *st = rl_st_model_open(dir, err, sizeof err);
    const rl_st_tensor_t *sw = st ? rl_st_model_find(st, "score.weight") : NULL;
    f->C = f->m ? rl_model_config(f->m)->hidden_size : 0;
    int ok = f->m && f->tok && sw && sw->ndim == 2 && sw->shape[0] == 1 && sw->shape[1] == f->C &&
             !rl_st_model_find(st, "lm_head.weight") &&
             (f->w = malloc((size_t)f->C * sizeof(float))) != NULL;
    CHECK_MSG(ok, "%s: not a reward-model folder (score.weight [1, C], no lm_head): %s", dir, err);
    if (ok) {
        rl_st_to_f32(f->w, sw);
    }
    rl_st_model_destroy(&st);
    if (!ok) {
        s_rmf_close(f);
    }
    return ok ? 0 : -1;
}

// The scores of B right-padded rows: the head at each row's last token. 0 or -1.
static int s_rmf_score(s_rmf_t *f, const int32_t *tok, const int *len, int B, int T, float *out) {
    if (rl_model_forward(f->m, tok, len, B, T, 1.0f, 0, NULL, NULL) != 0) {
        return -1;
    }
    rl_head_score_forward(out, rl_model_hidden(f->m), f->w, len, B, T, f->C);
    return 0;
}

// The pairs of `pairs` scored here by the reward-model folder `dir`: *acc the share ranked
// right, *margin the mean r_w - r_l. 0 or -1.
static int s_score_pairs(const char *dir, const char *pairs, double *acc, double *margin) {
    char err[1024];
    s_rmf_t f;
    rl_data_t *d = NULL;
    if (s_rmf_open(dir, &f) == 0) {
        rl_data_opts_t o;
        rl_data_opts_default(&o);
        o.pairs = 1; // no EOS: the reward model's rows end at the completion
        d = rl_data_load((const char *[]){pairs}, 1, &o, f.tok, err, sizeof err);
        CHECK_MSG(d != NULL, "%s", err);
    }
    int rc = d ? 0 : -1;
    double right = 0, sum = 0;
    size_t n = d ? rl_data_count(d) : 0;
    for (size_t i = 0; !rc && i < n; i += 2) {
        const int32_t *a, *b;
        int la, lb;
        rl_data_example(d, i, &a, NULL, &la, NULL);
        rl_data_example(d, i + 1, &b, NULL, &lb, NULL);
        int T = la > lb ? la : lb, len[2] = {la, lb};
        int32_t tok2[256] = {0};
        memcpy(tok2, a, (size_t)la * sizeof(int32_t));
        memcpy(tok2 + T, b, (size_t)lb * sizeof(int32_t));
        float sc[2];
        rc = s_rmf_score(&f, tok2, len, 2, T, sc);
        if (!rc) {
            right += sc[0] > sc[1];
            sum += (double)sc[0] - (double)sc[1];
        }
    }
    *acc = n ? right / (double)(n / 2) : NAN;
    *margin = n ? sum / (double)(n / 2) : NAN;
    rl_data_destroy(&d);
    s_rmf_close(&f);
    return rc;
}

// The score of prompt + completion (each encoded apart, no special tokens) by the folder
// <tmp>/<run>/final, as rewards/rl_reward_model scores them. NAN on failure.
static double s_score_text(const char *run, const char *prompt, const char *completion) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s/final", s_tmp, run);
    s_rmf_t f;
    double out = NAN;
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    if (s_rmf_open(dir, &f) == 0 &&
        rl_tokenizer_encode(f.tok, prompt, strlen(prompt), 0, &a, &na) == 0 &&
        rl_tokenizer_encode(f.tok, completion, strlen(completion), 0, &b, &nb) == 0 &&
        na + nb <= 256) {
        int len = (int)(na + nb);
        int32_t ids[256];
        memcpy(ids, a, na * sizeof(int32_t));
        memcpy(ids + na, b, nb * sizeof(int32_t));
        float sc = NAN;
        if (s_rmf_score(&f, ids, &len, 1, len, &sc) == 0) {
            out = sc;
        }
    }
    free(a);
    free(b);
    s_rmf_close(&f);
    return out;
}

// 11. GRPO against the reward model of run <tmp>/ra
static void s_model_reward(void) {
    s_write("grpo_rm.yaml",
            "run: {seed: 5}\n"
            "model: {path: %s/cookbook/models/arith-noisy-base}\n"
            "lora: {enabled: true}\n"
            "data: {train: %s/cookbook/data/arith/train.jsonl, max_prompt_length: 16}\n"
            "algorithm: {name: grpo, num_generations: 4}\n"
            "sampling: {max_new_tokens: 40}\n"
            "rewards:\n"
            "  - {name: rm, model: %s/ra/final}\n"
            "  - {name: correct, builtin: math_answer, weight: 0}\n"
            "  - {name: fmt, builtin: regex_format, weight: 0, config: {pattern: "
            "'#### [0-9]+$'}}\n"
            "optim: {lr: 1.0e-3}\n"
            "train: {steps: 2, batch_size: 4, save_every: 0}\n",
            RL_SOURCE_DIR, RL_SOURCE_DIR, s_tmp);
    snprintf(s_cmd, sizeof s_cmd, "run %s/grpo_rm.yaml run.dir=%s/g", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(0), 0);
    json_t *mg = rl_test_metrics(s_tmp, "g");
    CHECK_MSG(json_array_size(mg) == 2 &&
                  isfinite(s_num(json_array_get(mg, 1), "rewards/correct/mean")) &&
                  isfinite(s_num(json_array_get(mg, 1), "rewards/rm/mean")),
              "the model reward's or the measuring rule's mean is missing");
    // regex_format inside rlctl (which links libonig, whose regcomp/regexec shadowed libc's):
    // the base model ends nearly every completion with "#### N"
    CHECK_MSG(s_num(json_array_get(mg, 1), "rewards/fmt/mean") > 0.5,
              "regex_format matched %g of the completions inside rlctl",
              s_num(json_array_get(mg, 1), "rewards/fmt/mean"));
    json_decref(mg);
    snprintf(s_cmd, sizeof s_cmd, "traj export %s/g --jsonl", s_tmp);
    CHECK_INT(rl_test_rlctl(s_tmp, s_cmd), 0);
    char *o = rl_test_out(s_tmp);
    int n = 0, checked = 0, rule_nonzero = 0;
    double worst = 0;
    char *save = NULL;
    for (char *line = o ? strtok_r(o, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *rec = json_loads(line, 0, NULL);
        if (!rec) {
            continue;
        }
        n++;
        double rm = s_num(json_object_get(rec, "rewards"), "rm");
        double correct = s_num(json_object_get(rec, "rewards"), "correct");
        double total = s_num(rec, "reward");
        rule_nonzero += correct != 0;
        CHECK_MSG(total == rm,
                  "record %d: total reward %.9g, the rm score %.9g (weight-0 rule "
                  "%g)",
                  n, total, rm, correct);
        const char *ct = json_string_value(json_object_get(rec, "completion"));
        if (checked < 6 && ct) { // the folder scores the same text the same
            // the export decodes every id; the reward saw the text without the stop token
            char text[512];
            snprintf(text, sizeof text, "%s", ct);
            char *eos = strstr(text, "<|endoftext|>");
            if (eos && strcmp(json_string_value(json_object_get(rec, "finish")), "stop") == 0) {
                *eos = 0;
            }
            double want =
                s_score_text("ra", json_string_value(json_object_get(rec, "prompt")), text);
            worst = fmax(worst, fabs(want - rm));
            checked++;
        }
        json_decref(rec);
    }
    free(o);
    fprintf(stderr,
            "model reward: %d records, the folder's scores within %.3g of the stored "
            "(%d checked), %d with the rule nonzero\n",
            n, worst, checked, rule_nonzero);
    CHECK_MSG(n == 32 && checked == 6 && worst <= 1e-5,
              "%d records; stored rm scores differ from the folder's by %g", n, worst);
    // a folder that is not a reward model: refused before anything runs
    snprintf(s_cmd, sizeof s_cmd,
             "run %s/grpo_rm.yaml run.dir=%s/g2 rewards[0].model=%s/cookbook/models/arith-base",
             s_tmp, s_tmp, RL_SOURCE_DIR);
    CHECK_INT(rl_test_rlctl(s_tmp, s_cmd), 2);
    o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "rewards[0]");
    CHECK_CONTAINS(o, "has no score.weight");
    free(o);
}

static void s_rm(void) {
    char p[700];
    s_write("rm.yaml",
            "run: {seed: 3}\n"
            "model: {path: %s/cookbook/models/arith-noisy-base}\n"
            "lora: {enabled: true}\n"
            "data: {train: %s/rm_pairs.jsonl, eval_pairs: %s/rm_heldout.jsonl}\n"
            "algorithm: {name: rm}\n"
            "optim: {lr: 2.0e-3}\n"
            "train: {steps: 24, batch_size: 8, micro_batch_size: 8, save_every: 12, "
            "eval_every: 12}\n",
            RL_SOURCE_DIR, s_tmp, s_tmp);
    s_pairs("rm_pairs.jsonl", 0, 192);
    s_pairs("rm_heldout.jsonl", 192, 48);
    // 7. metrics, held-out accuracy
    CHECK_INT(s_rm_run("ra", ""), 0);
    json_t *ma = rl_test_metrics(s_tmp, "ra");
    CHECK_INT((int)json_array_size(ma), 25);
    static const char *const names[] = {"loss",        "grad_norm",  "learning_rate",
                                        "rm/accuracy", "rm/margin",  "rm/chosen",
                                        "rm/rejected", "num_tokens", NULL};
    for (size_t i = 1; i < json_array_size(ma); i++) {
        for (int k = 0; names[k]; k++) {
            CHECK_MSG(isfinite(s_num(json_array_get(ma, i), names[k])), "rm step %zu: no %s", i,
                      names[k]);
        }
    }
    json_t *e0 = json_array_get(ma, 0), *e12 = json_array_get(ma, 24);
    double l1 = s_num(json_array_get(ma, 1), "loss");
    double a0 = s_num(e0, "eval/rm/accuracy"), a12 = s_num(e12, "eval/rm/accuracy");
    double g12 = s_num(e12, "eval/rm/margin");
    fprintf(stderr, "rm: first loss %.4f; held-out accuracy %.3f -> %.3f, margin %.3f\n", l1, a0,
            a12, g12);
    CHECK_MSG(fabs(l1 - log(2.0)) < 0.05, "first rm loss %g, want ~ln 2 (a fresh head)", l1);
    CHECK_MSG(isfinite(s_num(json_array_get(ma, 12), "eval/rm/accuracy")) &&
                  !isfinite(s_num(json_array_get(ma, 11), "eval/rm/accuracy")),
              "held-out evaluations not at steps 12 and 24 only");
    CHECK_MSG(a12 > 0.9 && a12 > a0, "the reward model did not learn: accuracy %g -> %g", a0, a12);
    // 8. final/: a sequence classifier that ranks the held-out pairs as the run did
    snprintf(p, sizeof p, "%s/ra/final/config.json", s_tmp);
    json_error_t je;
    json_t *cfg = json_load_file(p, 0, &je);
    CHECK_STR(json_string_value(json_array_get(json_object_get(cfg, "architectures"), 0)),
              "Qwen2ForSequenceClassification");
    CHECK_INT((int)json_object_size(json_object_get(cfg, "id2label")), 1);
    CHECK_INT((int)json_integer_value(json_object_get(cfg, "pad_token_id")), 21);
    json_decref(cfg);
    CHECK(rl_test_exists(s_tmp, "ra/final/tokenizer.json"));
    CHECK(rl_test_exists(s_tmp, "ra/final/tokenizer_config.json"));
    double fa = NAN, fm = NAN;
    char dir[700], pairs[700];
    snprintf(dir, sizeof dir, "%s/ra/final", s_tmp);
    snprintf(pairs, sizeof pairs, "%s/rm_heldout.jsonl", s_tmp);
    CHECK_INT(s_score_pairs(dir, pairs, &fa, &fm), 0);
    fprintf(stderr, "rm final/ scored here: accuracy %.3f, margin %.4f (the run's: %.4f)\n", fa, fm,
            g12);
    CHECK_MSG(fabs(fa - a12) < 1e-9 && fabs(fm - g12) <= 1e-4 * fmax(1.0, fabs(g12)),
              "final/ scores differ from the run's last evaluation: accuracy %g vs %g, margin "
              "%g vs %g",
              fa, a12, fm, g12);
    // 9. resume; training on from final/
    CHECK_INT(s_rm_run("rr", "--stop-at 12"), 0);
    CHECK_INT(s_rm_run("rr", "--resume"), 0);
    json_t *mr = rl_test_metrics(s_tmp, "rr");
    CHECK_MSG(json_equal(ma, mr), "rm: the resumed run's metrics differ from one go's");
    CHECK(rl_test_files_equal(s_tmp, "ra/final/model.safetensors", "rr/final/model.safetensors"));
    json_decref(mr);
    snprintf(p, sizeof p, "model.path=%s/ra/final train.steps=1", s_tmp);
    CHECK_INT(s_rm_run("rc", p), 0);
    json_t *mc = rl_test_metrics(s_tmp, "rc");
    double c0 = s_num(json_array_get(mc, 0), "eval/rm/margin");
    CHECK_MSG(fabs(c0 - g12) <= 1e-4 * fmax(1.0, fabs(g12)),
              "a run from final/ did not keep its head: held-out margin %g, the folder's %g", c0,
              g12);
    json_decref(mc);
    // 10. margins; full tuning
    s_pairs_m("rm_pairs.jsonl", 0, 192, 1);
    CHECK_INT(s_rm_run("rm", "train.steps=1 train.eval_every=0"), 0);
    json_t *mm = rl_test_metrics(s_tmp, "rm");
    double lm = s_num(json_array_get(mm, 1), "loss");
    CHECK_MSG(fabs(lm - log1p(exp(2.0))) < 0.1, "loss with margin 2: %g, want ~softplus(2) %g", lm,
              log1p(exp(2.0)));
    json_decref(mm);
    s_pairs_m("rm_pairs.jsonl", 0, 192, 2);
    CHECK(s_rm_run("rx", "train.steps=1") != 0);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "1 of 192 pairs have a 'margin' field");
    free(o);
    s_pairs("rm_pairs.jsonl", 0, 192);
    CHECK_INT(s_rm_run("rf", "lora.enabled=false optim.lr=1e-4 train.steps=2 "
                             "train.save_every=0 train.eval_every=0"),
              0);
    CHECK(rl_test_exists(s_tmp, "rf/final/model.safetensors"));
    CHECK(rl_test_exists(s_tmp, "rf/final/config.json"));
    json_decref(ma);
    s_model_reward();
    // the shipped reward model (cookbook/tasks/arith/make_rm.sh) ranks the cookbook's held-out
    // pairs as its run measured (docs/training.md): at least 90% right
    CHECK_INT(s_score_pairs(RL_SOURCE_DIR "/cookbook/models/arith-rm",
                            RL_SOURCE_DIR "/cookbook/data/arith/pairs_eval.jsonl", &fa, &fm),
              0);
    fprintf(stderr, "cookbook/models/arith-rm: held-out pairs %.4f ranked right, margin %.3f\n", fa,
            fm);
    CHECK_MSG(fa >= 0.9, "cookbook/models/arith-rm ranks %.4f of the held-out pairs right", fa);
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "pref");
    s_files();
    s_dpo();
    s_rm();
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

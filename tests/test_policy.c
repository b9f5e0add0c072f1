// test_policy — the one training step every loss uses (rl_policy_step) on the cookbook's arith
// base model (0.8M parameters, LoRA): micro-batches hold whole groups of rows (DPO's pairs), a
// batch whose rows are not whole groups is refused, every micro-batch is trimmed to its longest
// row, the loss callback sees each micro-batch once per pass (entropy on the first pass only
// when asked), a non-finite loss stops the step naming it with no update made, and the SFT
// step (the registry's "sft", rl_loss.h) equals the generic step with the SFT loss written out
// here. The critic (PPO's value model, cookbook/ppo_lora.yaml): values aligned like logprobs (0
// at column 0 and at padding), reproducible, the value step drives the clipped value loss down
// toward fixed returns (the gradient's sign through head and model), a checkpoint round trip
// restores values and optimizer bit for bit, and critic.init from a reward model's folder (an HF
// sequence classifier: no lm_head, score.weight) gives that folder's decoder and head. DPO's step
// (the registry's "dpo"): ln 2 when the policy is its reference, learning three pairs, the same
// update in micro-batches of one pair. The reward model's step (the registry's "rm"): its loss
// from the scores, learning three pairs, the same update in micro-batches of one pair.
#include "rl_config.h"
#include "rl_algos.h"
#include "rl_err.h"
#include "rl_head.h"
#include "rl_hf.h"
#include "rl_loss.h"
#include "rl_loss_sft.h"
#include "rl_pref.h"
#include "rl_policy.h"
#include "rl_safetensors.h"
#include "rl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int n_calls;
    int b0[32], n[32], T[32], it[32], ent[32];
    double value; // the loss each micro-batch reports
} s_log_t;

static int s_record(void *ctx, const rl_policy_micro_t *m, float *dlogp, double *loss) {
    s_log_t *l = ctx;
    if (l->n_calls < 32) {
        l->b0[l->n_calls] = m->b0;
        l->n[l->n_calls] = m->n;
        l->T[l->n_calls] = m->T;
        l->it[l->n_calls] = m->iteration;
        l->ent[l->n_calls] = m->entropy != NULL;
    }
    l->n_calls++;
    for (int i = 0; i < m->n * m->T; i++) {
        dlogp[i] = -m->mask[i] * 1e-3f; // a tiny push: the weights move, finitely
    }
    *loss = l->value;
    return 0;
}

static int s_sft(void *ctx, const rl_policy_micro_t *m, float *dlogp, double *loss) {
    int64_t n_tok = *(const int64_t *)ctx;
    *loss = rl_loss_sft_forward(m->logp, m->mask, m->n, m->T, n_tok);
    rl_loss_sft_backward(dlogp, m->mask, m->n, m->T, n_tok);
    return 0;
}

// A (6, 12) batch: row b holds 6 + b tokens (so micro-batches trim differently), mask on the last
// 4 of each.
static int32_t s_tok[72];
static int s_len[6];
static uint8_t s_mask[72];

static void s_batch(void) {
    memset(s_tok, 0, sizeof s_tok);
    memset(s_mask, 0, sizeof s_mask);
    for (int b = 0; b < 6; b++) {
        s_len[b] = 6 + b;
        for (int t = 0; t < s_len[b]; t++) {
            s_tok[b * 12 + t] = 1 + (b * 5 + t * 3) % 13;
            s_mask[b * 12 + t] = t >= s_len[b] - 4;
        }
    }
}

// The batch above as a loss's inputs (rl_loss.h): B rows, micro-batches of mb rows.
static rl_loss_batch_t s_lb(int B, int mb, double lr, int64_t step) {
    return (rl_loss_batch_t){.B = B, .T = 12, .tokens = s_tok, .lengths = s_len, .mask = s_mask,
                             .lr = lr, .temperature = 1.0, .step = step, .micro_batch = mb,
                             .iterations = 1};
}

// One update with the registry's loss `name`: *st gets its loss and gradient norm, *ls (may be
// NULL) its statistics.
static int s_train(const char *name, rl_policy_t *p, const rl_recipe_t *r, const rl_loss_batch_t *b,
                   rl_policy_step_stats_t *st, rl_loss_stats_t *ls, char *err, size_t err_len) {
    const rl_loss_t *L = rl_loss_find(name);
    rl_loss_out_t out;
    memset(&out, 0, sizeof out);
    int rc = L->train(L, p, r, b, &out, err, err_len);
    st->loss = st->grad_norm = NAN;
    rl_loss_stats_get(&out.stats, "loss", &st->loss);
    rl_loss_stats_get(&out.stats, "grad_norm", &st->grad_norm);
    if (ls) {
        *ls = out.stats;
    }
    return rc;
}

// The value of statistic `name` of ls (NaN when absent).
static double s_stat(const rl_loss_stats_t *ls, const char *name) {
    double v = NAN;
    rl_loss_stats_get(ls, name, &v);
    return v;
}

static rl_policy_t *s_policy(rl_recipe_t **r) {
    char err[4096];
    int rc = rl_recipe_load_file(rl_algos(), RL_SOURCE_DIR "/cookbook/grpo_lora.yaml", NULL, 0, 0,
                                 r, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    rl_policy_t *p = NULL;
    if (rc == 0) {
        rc = rl_policy_new(*r, 1, &p, err, sizeof err);
        CHECK_MSG(rc == 0, "%s", err);
    }
    return p;
}

// The clipped value loss (clip eps; 0 = off) of critic c on the batch against returns ret around
// old values, from a forward (rl_policy_values), written out here.
static double s_value_loss(rl_policy_t *c, const float *ret, const float *old, double eps) {
    float v[72];
    char err[256];
    CHECK_INT(rl_policy_values(c, s_tok, s_len, 6, 12, v, err, sizeof err), 0);
    double l = 0, n = 0;
    for (int i = 0; i < 72; i++) {
        if (s_mask[i]) {
            double a = v[i] - ret[i];
            double lo = old[i] - eps, hi = old[i] + eps;
            double vc = eps <= 0 ? v[i] : v[i] < lo ? lo : v[i] > hi ? hi : v[i];
            double b = vc - ret[i];
            l += 0.5 * (a * a > b * b ? a * a : b * b);
            n++;
        }
    }
    return l / n;
}

static rl_policy_t *s_critic(rl_recipe_t **r, const char *const *ovr, int n_ovr, int want_rc,
                             char *err, size_t err_len) {
    int rc = rl_recipe_load_file(rl_algos(), RL_SOURCE_DIR "/cookbook/ppo_lora.yaml", ovr, n_ovr, 0,
                                 r, err, err_len);
    CHECK_MSG(rc == 0, "%s", err);
    rl_policy_t *c = NULL;
    if (rc == 0) {
        rc = rl_policy_new_critic(*r, 1, &c, err, err_len);
        CHECK_MSG(rc == want_rc, "rl_policy_new_critic: %d (%s), expected %d", rc, err, want_rc);
    }
    return c;
}

// An HF sequence classifier (a reward model) made from the model folder `base`: every tensor but
// lm_head.weight, and score.weight [1, C] = w. Returns 0 when written.
static int s_write_rm(const char *base, const char *dir, const float *w, int C) {
    char err[512], path[600];
    rl_st_model_t *st = rl_st_model_open(base, err, sizeof err);
    rl_st_writer_t *wr = rl_st_writer_new();
    int rc = !st || !wr;
    for (int i = 0; !rc && i < rl_st_model_count(st); i++) {
        const rl_st_tensor_t *t = rl_st_model_tensor(st, i);
        if (strcmp(t->name, "lm_head.weight") != 0) {
            rc = rl_st_writer_add(wr, t->name, t->dtype, t->ndim, t->shape, t->data);
        }
    }
    int64_t shape[2] = {1, C};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    rc = rc || rl_st_writer_add_f32(wr, "score.weight", RL_DTYPE_F32, 2, shape, w) ||
         rl_st_writer_write(wr, path, err, sizeof err);
    rl_st_writer_destroy(&wr);
    rl_st_model_destroy(&st);
    snprintf(path, sizeof path, "cp '%s/config.json' '%s/config.json'", base, dir);
    return rc || system(path) != 0;
}

// A sequence classifier of an untied model has no lm_head at all: rl_model loads it with
// seq_cls (not without), computes hidden states as the full folder does, refuses logprobs,
// backward from dlogp and sampling naming why, and save_hf writes it without the head.
static void test_seq_cls_untied(void) {
    const char *base = RL_FIXTURES "/models/llama_gqa";
    char err[2048], dir[] = "/tmp/rl_test_seqcls_XXXXXX", out[300];
    CHECK_MSG(mkdtemp(dir) != NULL, "cannot create a temporary directory");
    rl_hf_config_t cfg;
    CHECK_INT(rl_hf_config_load(base, &cfg, err, sizeof err), 0);
    float w[512] = {0};
    CHECK_INT(s_write_rm(base, dir, w, cfg.hidden_size), 0);
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = 1;
    rl_model_t *plain = rl_model_load(dir, &mo, err, sizeof err);
    CHECK_MSG(!plain && strstr(err, "lm_head.weight") && strstr(err, "score.weight"),
              "without seq_cls: %s", plain ? "loaded" : err);
    rl_model_destroy(&plain);
    mo.seq_cls = 1;
    mo.tune = RL_TUNE_FULL;
    rl_model_t *m = rl_model_load(dir, &mo, err, sizeof err);
    mo.tune = RL_TUNE_NONE;
    mo.seq_cls = 0;
    rl_model_t *ref = rl_model_load(base, &mo, err, sizeof err);
    CHECK_MSG(m && ref, "%s", err);
    int32_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int len[2] = {5, 4};
    float lp[10];
    if (m && ref) {
        CHECK_INT(rl_model_forward(m, tok, len, 2, 5, 1.0f, 1, NULL, NULL), 0);
        CHECK_INT(rl_model_forward(ref, tok, len, 2, 5, 1.0f, 0, lp, NULL), 0);
        CHECK_MSG(memcmp(rl_model_hidden(m), rl_model_hidden(ref),
                         (size_t)10 * (size_t)cfg.hidden_size * sizeof(float)) == 0,
                  "the classifier's hidden states differ from the full folder's");
        CHECK_INT(rl_model_backward(m, lp), RL_EINVAL);
        CHECK_CONTAINS(rl_model_errmsg(m), "no vocabulary head");
        CHECK_INT(rl_model_forward(m, tok, len, 2, 5, 1.0f, 0, lp, NULL), RL_EINVAL);
        CHECK_CONTAINS(rl_model_errmsg(m), "no vocabulary head");
        rl_kvcache_t *kv = rl_kvcache_new(m, 1, 8);
        int slot = 0, pos = 0;
        float logits[64];
        CHECK(kv && rl_model_step(m, kv, tok, &slot, &pos, 1, NULL, logits) == RL_EINVAL);
        rl_kvcache_destroy(&kv);
        snprintf(out, sizeof out, "%s/saved", dir);
        CHECK_INT(rl_model_save_hf(m, out, 0, err, sizeof err), 0);
        rl_st_model_t *st = rl_st_model_open(out, err, sizeof err);
        CHECK(st && !rl_st_model_find(st, "lm_head.weight") &&
              rl_st_model_find(st, "model.norm.weight"));
        rl_st_model_destroy(&st);
    }
    rl_model_destroy(&m);
    rl_model_destroy(&ref);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_INT(system(cmd), 0);
}

// critic.init = a reward model's folder: the critic's values are that folder's decoder read by
// its score.weight (the base's hidden states times w, computed here through rl_model and
// rl_head), LoRA or full; a folder without score.weight is refused naming it.
static void test_critic_from_rm(void) {
    char err[4096], dir[] = "/tmp/rl_test_rm_XXXXXX";
    CHECK_MSG(mkdtemp(dir) != NULL, "cannot create a temporary directory");
    rl_hf_config_t cfg;
    CHECK_INT(rl_hf_config_load(RL_SOURCE_DIR "/cookbook/models/arith-noisy-base", &cfg, err,
                                sizeof err),
              0);
    int C = cfg.hidden_size;
    float *w = malloc((size_t)C * sizeof(float));
    for (int j = 0; j < C; j++) {
        w[j] = 0.01f * (float)(j % 7 - 3);
    }
    CHECK_INT(s_write_rm(RL_SOURCE_DIR "/cookbook/models/arith-noisy-base", dir, w, C), 0);
    // the expected values: the base decoder, then the head
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = 1;
    rl_model_t *m = rl_model_load(RL_SOURCE_DIR "/cookbook/models/arith-noisy-base", &mo, err,
                                  sizeof err);
    float want[72], got[72];
    CHECK(m && rl_model_forward(m, s_tok, s_len, 6, 12, 1.0f, 0, NULL, NULL) == 0);
    if (m) {
        rl_head_values_forward(want, rl_model_hidden(m), w, s_len, 6, 12, C);
    }
    rl_model_destroy(&m);
    char init[200];
    snprintf(init, sizeof init, "critic.init=%s", dir);
    for (int full = 0; full < 2; full++) {
        const char *ovr[2] = {init, full ? "critic.lora=false" : "critic.lora=true"};
        rl_recipe_t *r = NULL;
        rl_policy_t *c = s_critic(&r, ovr, 2, 0, err, sizeof err);
        if (c) {
            CHECK_INT(rl_policy_values(c, s_tok, s_len, 6, 12, got, err, sizeof err), 0);
            CHECK_MSG(memcmp(want, got, sizeof got) == 0,
                      "critic from a reward model (%s): values differ from the folder's decoder "
                      "and score head (e.g. %g vs %g)",
                      full ? "full" : "LoRA", got[5], want[5]);
        }
        if (c && full) {
            // a checkpoint of it (model/ without lm_head) loads back into a fresh one
            char ck[] = "/tmp/rl_test_rmck_XXXXXX";
            CHECK_MSG(mkdtemp(ck) != NULL, "cannot create a temporary directory");
            CHECK_INT(rl_policy_save(c, ck, dir, err, sizeof err), 0);
            rl_recipe_t *r2 = NULL;
            rl_policy_t *c2 = s_critic(&r2, ovr, 2, 0, err, sizeof err);
            CHECK(c2 && rl_policy_load(c2, ck, 0, err, sizeof err) == 0);
            float again[72];
            CHECK(c2 && rl_policy_values(c2, s_tok, s_len, 6, 12, again, err, sizeof err) == 0);
            CHECK_MSG(memcmp(again, got, sizeof got) == 0, "full critic: reloaded values differ");
            rl_policy_destroy(&c2);
            rl_recipe_destroy(&r2);
            char cmd[600];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", ck);
            CHECK_INT(system(cmd), 0);
        }
        rl_policy_destroy(&c);
        rl_recipe_destroy(&r);
    }
    // the base folder has no score.weight: not a reward model
    const char *bad[1] = {"critic.init=" RL_SOURCE_DIR "/cookbook/models/arith-base"};
    rl_recipe_t *r = NULL;
    rl_policy_t *c = s_critic(&r, bad, 1, RL_EINVAL, err, sizeof err);
    CHECK(c == NULL);
    CHECK_CONTAINS(err, "arith-base has no score.weight [1, ");
    rl_recipe_destroy(&r);
    free(w);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_INT(system(cmd), 0);
    test_seq_cls_untied();
}

static void test_critic(void) {
    char err[4096];
    rl_recipe_t *r = NULL, *r2 = NULL;
    rl_policy_t *a = s_critic(&r, NULL, 0, 0, err, sizeof err);
    rl_policy_t *b = s_critic(&r2, NULL, 0, 0, err, sizeof err);
    if (!a || !b) {
        rl_policy_destroy(&a);
        rl_policy_destroy(&b);
        rl_recipe_destroy(&r);
        rl_recipe_destroy(&r2);
        return;
    }
    CHECK_INT(rl_policy_has_head(a), 1);
    float va[72], vb[72];
    CHECK_INT(rl_policy_values(a, s_tok, s_len, 6, 12, va, err, sizeof err), 0);
    CHECK_INT(rl_policy_values(b, s_tok, s_len, 6, 12, vb, err, sizeof err), 0);
    CHECK_MSG(memcmp(va, vb, sizeof va) == 0, "two critics of one recipe differ");
    int nonzero = 0;
    for (int bb = 0; bb < 6; bb++) {
        for (int t = 0; t < 12; t++) {
            float x = va[bb * 12 + t];
            if (t == 0 || t >= s_len[bb]) {
                CHECK_MSG(x == 0.0f, "value [%d,%d] = %g at column 0 or padding", bb, t, x);
            } else {
                nonzero += x != 0.0f && isfinite(x);
            }
        }
    }
    CHECK_MSG(nonzero == 45, "%d of the 45 real value columns hold a value", nonzero);
    // the value step: returns 1 on the masked tokens; without the clip the loss falls far
    float ret[72], old[72];
    for (int i = 0; i < 72; i++) {
        ret[i] = s_mask[i] ? 1.0f : 0.0f;
        old[i] = va[i];
    }
    rl_loss_batch_t vbat = s_lb(6, 3, 1e-2, 1);
    vbat.values = old;
    vbat.returns = ret;
    vbat.denom = 24;
    r->algorithm.value_clip = r2->algorithm.value_clip = 0.0;
    r->algorithm.loss_agg = r2->algorithm.loss_agg = RL_RECIPE_AGG_TOKEN_MEAN;
    r->optim.max_grad_norm = r2->optim.max_grad_norm = 1.0;
    double l0 = s_value_loss(a, ret, old, 0.0);
    rl_policy_step_stats_t st;
    rl_loss_stats_t vs;
    for (int k = 0; k < 20; k++) {
        vbat.step = k + 1;
        CHECK_INT(s_train("value", a, r, &vbat, &st, &vs, err, sizeof err), 0);
    }
    double l1 = s_value_loss(a, ret, old, 0.0);
    fprintf(stderr, "critic: value loss %.4f -> %.4f over 20 steps (tokens %g)\n", l0, l1,
            s_stat(&vs, "tokens"));
    CHECK_MSG(l1 < 0.25 * l0, "the value step did not drive the loss down: %g -> %g", l0, l1);
    CHECK(s_stat(&vs, "tokens") == 24 && s_stat(&vs, "clipped") == 0 && st.grad_norm > 0 &&
          isfinite(st.grad_norm));
    // with the clip 0.2: tokens whose value left the band around the old one are counted as
    // clipped (the band does not bound the values: AdamW's momentum and the shared weights move
    // them on)
    rl_recipe_t *rc2 = NULL;
    rl_policy_t *cc = s_critic(&rc2, NULL, 0, 0, err, sizeof err);
    double clipped = 0;
    if (rc2) {
        rc2->algorithm.value_clip = 0.2;
        rc2->algorithm.loss_agg = RL_RECIPE_AGG_TOKEN_MEAN;
        rc2->optim.max_grad_norm = 1.0;
    }
    for (int k = 0; cc && k < 20; k++) {
        vbat.step = k + 1;
        CHECK_INT(s_train("value", cc, rc2, &vbat, &st, &vs, err, sizeof err), 0);
        clipped += s_stat(&vs, "clipped");
    }
    CHECK_MSG(!cc || clipped > 0, "clip 0.2: no token was ever clipped");
    rl_policy_destroy(&cc);
    rl_recipe_destroy(&rc2);
    // the policy has no head: values are refused
    rl_recipe_t *rp = NULL;
    rl_policy_t *pol = s_policy(&rp);
    if (pol) {
        CHECK_INT(rl_policy_has_head(pol), 0);
        CHECK_INT(rl_policy_values(pol, s_tok, s_len, 6, 12, vb, err, sizeof err), RL_EINVAL);
        vbat.step = 1;
        CHECK_INT(s_train("value", pol, r, &vbat, &st, NULL, err, sizeof err), RL_EINVAL);
    }
    rl_policy_destroy(&pol);
    rl_recipe_destroy(&rp);
    // a checkpoint round trip: b loads a's weights, head and optimizer; one more step on each
    char dir[] = "/tmp/rl_test_critic_XXXXXX";
    CHECK_MSG(mkdtemp(dir) != NULL, "cannot create a temporary directory");
    CHECK_INT(rl_policy_save(a, dir, "base", err, sizeof err), 0);
    CHECK_INT(rl_policy_load(b, dir, 0, err, sizeof err), 0);
    CHECK_INT(rl_policy_values(a, s_tok, s_len, 6, 12, va, err, sizeof err), 0);
    CHECK_INT(rl_policy_values(b, s_tok, s_len, 6, 12, vb, err, sizeof err), 0);
    CHECK_MSG(memcmp(va, vb, sizeof va) == 0, "a loaded critic's values differ");
    vbat.step = 21;
    CHECK_INT(s_train("value", a, r, &vbat, &st, NULL, err, sizeof err), 0);
    CHECK_INT(s_train("value", b, r2, &vbat, &st, NULL, err, sizeof err), 0);
    CHECK_INT(rl_policy_values(a, s_tok, s_len, 6, 12, va, err, sizeof err), 0);
    CHECK_INT(rl_policy_values(b, s_tok, s_len, 6, 12, vb, err, sizeof err), 0);
    CHECK_MSG(memcmp(va, vb, sizeof va) == 0, "the optimizer state did not round-trip");
    char path[600];
    snprintf(path, sizeof path, "%s/value_head.safetensors", dir);
    CHECK_MSG(access(path, F_OK) == 0, "no %s", path);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_INT(system(cmd), 0);
    rl_policy_destroy(&a);
    rl_policy_destroy(&b);
    rl_recipe_destroy(&r);
    rl_recipe_destroy(&r2);
    test_critic_from_rm();
}

// DPO on 3 pairs of the batch (rows 2i chosen, 2i + 1 rejected): the reference is the policy
// with adapters off, which at the start (LoRA B = 0) equals the policy, so every pair's sigmoid
// loss is exactly ln 2; steps then rank every pair right with positive margins; one pair per
// micro-batch gives the update of the whole batch at once (the same global divisors); rows not
// in pairs are refused.
static void test_dpo(void) {
    char err[4096];
    rl_recipe_t *r1 = NULL, *r2 = NULL;
    rl_policy_t *a = s_policy(&r1), *b = s_policy(&r2);
    if (!a || !b) {
        rl_policy_destroy(&a);
        rl_policy_destroy(&b);
        rl_recipe_destroy(&r1);
        rl_recipe_destroy(&r2);
        return;
    }
    rl_policy_rows_t rows = {6, 12, s_tok, s_len, s_mask, 2};
    // the reference sums in micro-batches of 6, as the update below runs: how rows are split
    // into forwards changes the last bits with some OpenBLAS kernels (numerics.md,
    // "Reproducibility"), so other micro-batches agree to rounding only
    double ref[6], pol[6], ref4[6];
    CHECK_INT(rl_policy_sum_logprobs(a, &rows, 0, 6, ref, err, sizeof err), 0);
    CHECK_INT(rl_policy_sum_logprobs(a, &rows, 1, 6, pol, err, sizeof err), 0);
    CHECK_MSG(memcmp(ref, pol, sizeof ref) == 0, "with B = 0 the policy is the reference");
    CHECK_INT(rl_policy_sum_logprobs(a, &rows, 0, 4, ref4, err, sizeof err), 0);
    for (int i = 0; i < 6; i++) {
        CHECK_CLOSE(ref4[i], ref[i], 1e-5 * fabs(ref[i]) + 1e-6);
    }
    for (int i = 0; i < 2; i++) { // sigmoid DPO, beta 0.1, no smoothing, no RPO
        rl_recipe_t *rr = i ? r2 : r1;
        rr->algorithm.loss_type = RL_PREF_SIGMOID;
        rr->algorithm.beta = 0.1;
        rr->algorithm.label_smoothing = 0.0;
        rr->algorithm.rpo_alpha = 0.0;
        rr->optim.max_grad_norm = 1.0;
    }
    rl_loss_batch_t lb = s_lb(6, 6, 5e-3, 1);
    lb.ref_sum = ref;
    rl_loss_stats_t ds;
    rl_policy_step_stats_t st, st2;
    CHECK_INT(s_train("dpo", a, r1, &lb, &st, &ds, err, sizeof err), 0);
    CHECK_MSG(fabs(st.loss - log(2.0)) < 1e-12, "first DPO loss %.17g, want ln 2", st.loss);
    CHECK(s_stat(&ds, "pairs") == 3 && s_stat(&ds, "accuracy") == 0 && st.grad_norm > 0);
    CHECK(isnan(s_stat(&ds, "nll"))); // RPO's statistic only with rpo_alpha > 0
    lb.micro_batch = 2;
    CHECK_INT(s_train("dpo", b, r2, &lb, &st2, NULL, err, sizeof err), 0);
    lb.micro_batch = 6;
    // the same loss and gradient up to float rounding (a micro-batch is trimmed to its longest
    // row, so its matrix shapes and rounding differ; AdamW's first step, ~sign(g), would amplify
    // that in the weights, so they are not compared)
    double rel = fabs(st.grad_norm - st2.grad_norm) / st.grad_norm;
    fprintf(stderr, "dpo: one pair per micro-batch vs all at once: loss %.12g / %.12g, grad "
                    "norm %.9g / %.9g\n",
            st.loss, st2.loss, st.grad_norm, st2.grad_norm);
    CHECK_MSG(fabs(st.loss - st2.loss) < 1e-6 && rel < 1e-4,
              "micro-batches of one pair changed the step: loss %g vs %g, grad norm %g vs %g",
              st.loss, st2.loss, st.grad_norm, st2.grad_norm);
    for (int k = 2; k <= 15; k++) {
        lb.step = k;
        CHECK_INT(s_train("dpo", a, r1, &lb, &st, &ds, err, sizeof err), 0);
    }
    fprintf(stderr, "dpo: after 15 steps loss %.4f, accuracy %g/3, margin %.4f\n", st.loss,
            s_stat(&ds, "accuracy"), s_stat(&ds, "margin") / 3);
    CHECK_MSG(st.loss < 0.6 && s_stat(&ds, "accuracy") == 3 && s_stat(&ds, "margin") > 0,
              "DPO did not learn the pairs: loss %g, %g of 3 ranked right", st.loss,
              s_stat(&ds, "accuracy"));
    lb.B = 5; // rows not in pairs
    lb.step = 16;
    CHECK_INT(s_train("dpo", a, r1, &lb, &st, NULL, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "pairs");
    rl_policy_destroy(&a);
    rl_policy_destroy(&b);
    rl_recipe_destroy(&r1);
    rl_recipe_destroy(&r2);
}

// The reward model's step (the registry's "rm") on 3 pairs, with a critic-shaped model (the
// arith base, a fresh score head): it learns to rank every pair, one pair per micro-batch gives
// the same loss and gradient norm, the scores it trains are rl_policy_scores', rows not in pairs
// and a model without a head are refused.
static void test_rm(void) {
    char err[4096];
    rl_recipe_t *r1 = NULL, *r2 = NULL, *rp = NULL;
    rl_policy_t *a = s_critic(&r1, NULL, 0, 0, err, sizeof err);
    rl_policy_t *b = s_critic(&r2, NULL, 0, 0, err, sizeof err);
    if (!a || !b) {
        rl_policy_destroy(&a);
        rl_policy_destroy(&b);
        rl_recipe_destroy(&r1);
        rl_recipe_destroy(&r2);
        return;
    }
    float q[6];
    CHECK_INT(rl_policy_scores(a, s_tok, s_len, 6, 12, q, err, sizeof err), 0);
    double x = 0;
    for (int i = 0; i < 3; i++) { // the loss at the start, from the scores: mean softplus(-d)
        double d = (double)q[2 * i] - (double)q[2 * i + 1];
        x += log1p(exp(-d)) / 3;
    }
    for (int i = 0; i < 2; i++) {
        rl_recipe_t *rr = i ? r2 : r1;
        rr->algorithm.center_rewards_coefficient = 0.0;
        rr->optim.max_grad_norm = 1.0;
    }
    rl_loss_batch_t lb = s_lb(6, 6, 1e-2, 1);
    rl_loss_stats_t rs;
    rl_policy_step_stats_t st, st2;
    CHECK_INT(s_train("rm", a, r1, &lb, &st, &rs, err, sizeof err), 0);
    CHECK_MSG(fabs(st.loss - x) < 1e-6, "first RM loss %.9g, want %.9g from the scores", st.loss,
              x);
    lb.micro_batch = 2;
    CHECK_INT(s_train("rm", b, r2, &lb, &st2, NULL, err, sizeof err), 0);
    lb.micro_batch = 6;
    CHECK_MSG(fabs(st.loss - st2.loss) < 1e-6 &&
                  fabs(st.grad_norm - st2.grad_norm) <= 1e-4 * st.grad_norm,
              "one pair per micro-batch changed the RM step: loss %g / %g, grad norm %g / %g",
              st.loss, st2.loss, st.grad_norm, st2.grad_norm);
    double margin[6] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}; // a pair's margin on both of its rows
    lb.margin = margin;
    r1->algorithm.center_rewards_coefficient = 0.01;
    for (int k = 2; k <= 20; k++) {
        lb.step = k;
        CHECK_INT(s_train("rm", a, r1, &lb, &st, &rs, err, sizeof err), 0);
    }
    fprintf(stderr, "rm: after 20 steps loss %.4f, accuracy %g/3, margin %.3f\n", st.loss,
            s_stat(&rs, "accuracy"), s_stat(&rs, "margin") / 3);
    CHECK_MSG(s_stat(&rs, "accuracy") == 3 && s_stat(&rs, "margin") > 0,
              "the RM did not learn the pairs: %g of 3", s_stat(&rs, "accuracy"));
    lb.margin = NULL;
    lb.B = 5; // rows not in pairs
    lb.step = 21;
    CHECK_INT(s_train("rm", a, r1, &lb, &st, NULL, err, sizeof err), RL_EINVAL);
    rl_policy_t *p = s_policy(&rp);
    lb.B = 6;
    lb.step = 1;
    CHECK(p && s_train("rm", p, rp, &lb, &st, NULL, err, sizeof err) == RL_EINVAL);
    rl_policy_destroy(&p);
    rl_recipe_destroy(&rp);
    rl_policy_destroy(&a);
    rl_policy_destroy(&b);
    rl_recipe_destroy(&r1);
    rl_recipe_destroy(&r2);
}

int main(void) {
    s_batch();
    rl_recipe_t *r = NULL;
    rl_policy_t *p = s_policy(&r);
    if (!p) {
        rl_recipe_destroy(&r);
        RL_TEST_DONE();
    }
    char err[512];
    rl_policy_step_stats_t st;
    // groups of 2, micro-batch 3 -> micro-batches of 2 rows; two passes; entropy on pass 0 only
    rl_policy_rows_t rows = {6, 12, s_tok, s_len, s_mask, 2};
    rl_policy_step_opts_t o = {1.0f, 3, 2, 1e-3, 1.0, 1, 0, 0};
    s_log_t log = {.value = 0.25};
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), 0);
    CHECK_INT(log.n_calls, 6);
    for (int i = 0; i < 6 && i < log.n_calls; i++) {
        CHECK_INT(log.n[i], 2);
        CHECK_INT(log.b0[i], 2 * (i % 3));
        CHECK_INT(log.it[i], i / 3);
        CHECK_INT(log.ent[i], i < 3);
        CHECK_INT(log.T[i], s_len[log.b0[i] + 1]); // trimmed to the longer of its two rows
    }
    CHECK_INT(st.iterations, 2);
    CHECK(st.loss == 0.75 && st.grad_norm > 0 && isfinite(st.grad_norm));
    // groups of 3, micro-batch 4 -> 3 rows each; micro-batch 1 -> one group (3 rows) each
    rows.group = 3;
    o.iterations = 1;
    o.micro_batch = 4;
    memset(&log, 0, sizeof log);
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), 0);
    CHECK(log.n_calls == 2 && log.n[0] == 3 && log.n[1] == 3 && log.b0[1] == 3);
    o.micro_batch = 1;
    memset(&log, 0, sizeof log);
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), 0);
    CHECK(log.n_calls == 2 && log.n[0] == 3);
    // rows that are not whole groups; a NaN loss (no update: the weights stay)
    rows.group = 4;
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "groups of 4");
    rows.group = 1;
    size_t nw = 0;
    const float *w = rl_policy_weights(p, &nw);
    float *before = malloc(nw * sizeof(float));
    memcpy(before, w, nw * sizeof(float));
    log.value = NAN;
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "iteration 1: the loss is NaN");
    o.step = 12;
    CHECK_INT(rl_policy_step(p, &rows, &o, s_record, &log, &st, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "step 12: the loss is NaN; stopping");
    w = rl_policy_weights(p, &nw);
    CHECK_MSG(memcmp(before, w, nw * sizeof(float)) == 0, "a failed step moved the weights");
    free(before);
    rl_policy_destroy(&p);
    rl_recipe_destroy(&r); // the policy borrowed it

    // the registry's "sft" == rl_policy_step with the SFT loss, on two fresh policies
    int64_t n_tok = 24;
    rl_policy_t *a = s_policy(&r), *b = NULL;
    rl_recipe_t *r2 = NULL;
    b = s_policy(&r2);
    rl_policy_step_stats_t sa, sb;
    rows.group = 1;
    rl_loss_batch_t lb = s_lb(6, 2, 1e-3, 1);
    lb.denom = (double)n_tok;
    r->optim.max_grad_norm = 1.0;
    CHECK_INT(s_train("sft", a, r, &lb, &sa, NULL, err, sizeof err), 0);
    rl_policy_step_opts_t os = {1.0f, 2, 1, 1e-3, 1.0, 0, 1, 0};
    CHECK_INT(rl_policy_step(b, &rows, &os, s_sft, &n_tok, &sb, err, sizeof err), 0);
    size_t na = 0, nb = 0;
    const float *wa = rl_policy_weights(a, &na), *wb = rl_policy_weights(b, &nb);
    CHECK(sa.loss == sb.loss && sa.grad_norm == sb.grad_norm && sa.loss > 0);
    CHECK(na == nb && memcmp(wa, wb, na * sizeof(float)) == 0);
    rl_policy_destroy(&a);
    rl_policy_destroy(&b);
    rl_recipe_destroy(&r);
    rl_recipe_destroy(&r2);
    RL_TEST_RUN(test_critic);
    RL_TEST_RUN(test_dpo);
    RL_TEST_RUN(test_rm);
    RL_TEST_DONE();
}

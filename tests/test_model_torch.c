// test_model_torch — rl_model against PyTorch: the golden files that
// tests/reference/make_model_goldens.py writes under tests/fixtures/models/<name>/ (a plain-torch
// float64 reference decoder, the torch version recorded in goldens.json). For each fixture
// model this checks, in fp32 against the float64 goldens:
//   full tuning  logits (rl_model_logits), logp and entropy at temperature 1 and 0.7, the loss,
//                and every parameter gradient (rl_model_grads) of L = sum(dlogp * logp);
//   LoRA         (rl_model_load_adapter of the fixture's PEFT folder) logp and entropy, and
//                the gradient of every A and B at temperature 1 and 0.7 (found in
//                rl_model_trainable by their values, so no flat layout is assumed); with the
//                adapter disabled the model must give the base model's logp;
//   AdamW        three torch.optim.AdamW steps (trainer/rl_optim on rl_model_trainable): the
//                losses and the watched parameters after each step;
//   scalar head  (score.safetensors, head_goldens.*) a forward without the vocabulary head:
//                rl_model_hidden, rl_head values (aligned like logp) and scores, the losses
//                L_v = sum(dvalues * v), L_s = sum(dscores * s), and their gradients through
//                rl_head's backward and rl_model_backward_hidden: w, the watched parameters
//                (full; lm_head untouched) and every LoRA A and B;
//   a reward model  (llama_gqa_rm: tests/reference/make_seq_cls_fixture.py writes it as
//                transformers lays out LlamaForSequenceClassification) loaded with seq_cls: the
//                score of each sequence (score.weight on the final norm's output at its last real
//                token) against torch's; rl_model_save_seq_cls of that model writes the same
//                tensors (bit for bit) and the classifier's config fields.
// It is not a layer test (test_layers does finite differences on each kernel) and not a
// sampler test (rl_model_step is checked against forward elsewhere).
//
// Error measure, per tensor: max |got - want| over the compared elements divided by
// max |want| of that tensor (an absolute error when the golden is all zero). Every tensor's
// worst error is printed.
#include "rl_err.h"
#include "rl_head.h"
#include "rl_model.h"
#include "rl_optim.h"
#include "rl_safetensors.h"
#include "rl_test.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- tolerances --------------------------------------------------------------------------------
// The goldens are exact to ~1e-7 (float64 compute, float32 storage), so these bound rl_model's
// own fp32 error. The same pipeline run in torch float32 lands at (goldens.json,
// "fp32_torch_error"): logits <= 5e-7, logp/entropy <= 5e-7, parameter gradients <= 2.1e-6,
// LoRA gradients <= 1.9e-6. The tolerances leave 20-50x for another summation order (OpenBLAS
// kernels, -ffp-contract=fast, a different softmax/log-sum-exp arrangement) and stay far below
// what a formula error costs: a wrong RoPE pairing, a missing llama3 band, a lost bias or
// q/k-norm, an off-by-one in the logp alignment or a wrong temperature factor move these
// tensors by 1e-3 to 1 (docs/numerics.md lists measured examples).
#define TOL_LOGITS 1e-5  // forward: K <= 40 dot products, 2 layers, a softmax per head
#define TOL_LOGP 1e-5    // log_softmax over V <= 101, then a gather
#define TOL_ENTROPY 1e-5 // sum p log p over V
#define TOL_LOSS 1e-5    // relative; a weighted sum of logp
// Backward sums over B*T = 36 rows and through every layer; fp32 rounding grows with depth and
// the weight-gradient sums, hence 10x looser than forward.
#define TOL_GRAD 1e-4
// AdamW: each element moves by about lr per step whatever its gradient's size (the update is
// lr * m^ / (sqrt(v^) + eps), homogeneous of degree 0 in g), so parameters after k steps are
// compared in units of lr. The normalisation turns a relative error r in an element's gradient
// into an update error of up to ~2r lr, so an element with a tiny gradient amplifies fp32 noise:
// qwen3_headdim's q_proj has one with a step-1 gradient of 2.4e-7 max|g|, where torch's own
// fp32 run lands 6e-4 lr away and rl_model 9e-3 lr away, and an element at fp32's noise floor
// could flip its update's sign (an error of 2 lr) without any bug. So, per watched tensor:
//   elements with |g1| >= ADAMW_ILL * max|g1| (g1: the step-1 golden gradient): their gradient
//     error is <= ~2e-6 max|g1| / 1e-3 max|g1| = 2e-3 relative, so <= ~4e-3 lr per step;
//     they must be within TOL_ADAMW_LR = 1e-2 lr after each step;
//   the others (exact zeros such as unused embedding rows included) only within Adam's bound,
//     2 lr per step taken.
// A real optimizer or wiring error is far outside: weight decay coupled into the gradient or
// skipped on some tensors costs lr * wd * |p| ~ 0.1 lr per step, a missing bias correction
// ~2 lr at step 1, a stale gradient (no zero_grad) ~1 lr.
#define TOL_ADAMW_LR 1e-2
#define ADAMW_ILL 1e-3
#define TOL_ADAMW_LOSS 1e-4 // relative; losses after steps carry the parameters' drift
// Scalar head (head_goldens.json "fp32_torch_error": hidden <= 5e-7, values/scores <= 1e-6,
// gradients <= 2.2e-6). The hidden states are the logits' computation minus the vocabulary
// matmul, values and scores one more dot product of C <= 32 terms (accumulated in double by
// rl_head), so they get the logits' tolerance; the gradients cross the same layers as the
// logp loss's, hence TOL_GRAD. An off-by-one in the value alignment or the score's row moves
// them by O(1) relative (a neighbouring position's state), a lost dw accumulation or a
// gradient routed to a padding row likewise.
#define TOL_HIDDEN 1e-5
#define TOL_HEAD 1e-5

static const char *s_models[] = {"llama_gqa", "qwen2_tied", "qwen3_headdim", "llama_odd"};

// ---- helpers -----------------------------------------------------------------------------------

// Compares n values. mask (n) or NULL selects the elements compared. Returns the relative error.
static double s_compare(const char *model, const char *what, const float *got, const float *want,
                        size_t n, const unsigned char *mask, double tol) {
    double max_err = 0.0, max_ref = 0.0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (mask && !mask[i]) {
            continue;
        }
        double e = fabs((double)got[i] - (double)want[i]);
        if (isnan(e)) {
            bad++;
            continue;
        }
        if (e > max_err) {
            max_err = e;
            worst = i;
        }
        if (fabs((double)want[i]) > max_ref) {
            max_ref = fabs((double)want[i]);
        }
    }
    double rel = max_ref > 0.0 ? max_err / max_ref : max_err;
    int ok = bad == 0 && rel <= tol;
    printf("  %-14s %-58s rel %.2e (max|err| %.2e, max|ref| %.2e, tol %.0e)%s\n", model, what,
           rel, max_err, max_ref, tol, ok ? "" : "  FAIL");
    CHECK_MSG(ok, "%s %s: relative error %.3g > %.0e (worst element %zu: got %.9g want %.9g; "
              "%zu NaN)", model, what, rel, tol, worst, (double)got[worst], (double)want[worst],
              bad);
    return rel;
}

static void s_check_scalar(const char *model, const char *what, double got, double want,
                           double tol) {
    double rel = fabs(got - want) / (fabs(want) > 1.0 ? fabs(want) : 1.0);
    int ok = rel <= tol;
    printf("  %-14s %-58s rel %.2e (got %.9g, want %.9g, tol %.0e)%s\n", model, what, rel, got,
           want, tol, ok ? "" : "  FAIL");
    CHECK_MSG(ok, "%s %s: %.9g vs %.9g", model, what, got, want);
}

// A golden tensor as a malloc'd float array (the mmap may be unaligned); NULL and a failure
// when absent. *n_p gets the element count.
static float *s_golden(const rl_st_file_t *g, const char *model, const char *name, size_t *n_p) {
    const rl_st_tensor_t *t = rl_st_file_find(g, name);
    CHECK_MSG(t != NULL, "%s: golden '%s' missing", model, name);
    if (!t) {
        return NULL;
    }
    float *out = malloc((size_t)t->numel * sizeof(float) + 1);
    RL_ASSERT(out);
    rl_st_to_f32(out, t);
    if (n_p) {
        *n_p = (size_t)t->numel;
    }
    return out;
}

// The tensor named `name` (HF name) inside a params/grads struct, or NULL.
static float *s_param(rl_model_params_t *p, int L, const char *name) {
    float **slot = rl_model_params_find(p, L, name);
    return slot ? *slot : NULL;
}

// The batch of a fixture: tokens (B,T), lengths (B), dlogp (B,T), and the masks of compared
// positions: valid (t < len, for logits) and scored (1 <= t < len, for logp/entropy).
typedef struct {
    int B, T, V;
    int32_t *tokens;
    int *lengths;
    float *dlogp;
    unsigned char *valid_bt, *valid_btv;
    float *losses;       // loss_t1, lora loss_t1, lora loss_t07
    float *adamw_losses; // 4
} s_batch_t;

static int s_batch_read(const rl_st_file_t *g, const char *model, int V, s_batch_t *bt) {
    memset(bt, 0, sizeof *bt);
    const rl_st_tensor_t *tt = rl_st_file_find(g, "tokens");
    CHECK_MSG(tt && tt->ndim == 2, "%s: golden 'tokens' (B,T) missing", model);
    if (!tt || tt->ndim != 2) {
        return -1;
    }
    bt->B = (int)tt->shape[0];
    bt->T = (int)tt->shape[1];
    bt->V = V;
    size_t BT = (size_t)bt->B * bt->T;
    float *tok = s_golden(g, model, "tokens", NULL);
    float *len = s_golden(g, model, "lengths", NULL);
    bt->dlogp = s_golden(g, model, "dlogp", NULL);
    bt->losses = s_golden(g, model, "losses", NULL);
    bt->adamw_losses = s_golden(g, model, "adamw.losses", NULL);
    if (!tok || !len || !bt->dlogp || !bt->losses || !bt->adamw_losses) {
        free(tok);
        free(len);
        return -1;
    }
    bt->tokens = malloc(BT * sizeof(int32_t));
    bt->lengths = malloc((size_t)bt->B * sizeof(int));
    bt->valid_bt = calloc(BT, 1);
    bt->valid_btv = calloc(BT * (size_t)V, 1);
    RL_ASSERT(bt->tokens && bt->lengths && bt->valid_bt && bt->valid_btv);
    for (size_t i = 0; i < BT; i++) {
        bt->tokens[i] = (int32_t)tok[i];
    }
    for (int b = 0; b < bt->B; b++) {
        bt->lengths[b] = (int)len[b];
        for (int t = 0; t < bt->lengths[b]; t++) {
            memset(bt->valid_btv + ((size_t)b * bt->T + t) * V, 1, (size_t)V);
        }
    }
    // logp/entropy are compared at every position: the contract fixes them to 0 outside
    // 1 <= t < len, and the goldens hold those zeros.
    memset(bt->valid_bt, 1, BT);
    free(tok);
    free(len);
    return 0;
}

static void s_batch_free(s_batch_t *bt) {
    free(bt->tokens);
    free(bt->lengths);
    free(bt->dlogp);
    free(bt->valid_bt);
    free(bt->valid_btv);
    free(bt->losses);
    free(bt->adamw_losses);
}

static double s_loss(const float *dlogp, const float *logp, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += (double)dlogp[i] * logp[i];
    }
    return s;
}

// ---- full tuning: forward, logits, backward, every gradient ------------------------------------
static void s_test_full(const char *model, const char *dir, const rl_st_file_t *g,
                        const s_batch_t *bt) {
    char err[512] = "";
    rl_model_opts_t opts;
    rl_model_opts_default(&opts);
    opts.tune = RL_TUNE_FULL;
    rl_model_t *m = rl_model_load(dir, &opts, err, sizeof err);
    CHECK_MSG(m != NULL, "%s: rl_model_load: %s", model, err);
    if (!m) {
        return;
    }
    size_t BT = (size_t)bt->B * bt->T;
    float *logp = calloc(BT, sizeof(float)), *ent = calloc(BT, sizeof(float));
    RL_ASSERT(logp && ent);
    char what[160];

    int rc = rl_model_forward(m, bt->tokens, bt->lengths, bt->B, bt->T, 1.0f, 1, logp, ent);
    CHECK_MSG(rc == 0, "%s: forward: %s", model, rl_model_errmsg(m));
    if (rc == 0) {
        float *logits = rl_model_logits(m);
        float *want = s_golden(g, model, "logits", NULL);
        CHECK(logits != NULL);
        if (logits && want) {
            s_compare(model, "logits (t < len)", logits, want, BT * bt->V, bt->valid_btv,
                      TOL_LOGITS);
        }
        free(logits);
        free(want);
        want = s_golden(g, model, "logp_t1", NULL);
        if (want) {
            s_compare(model, "logp T=1", logp, want, BT, bt->valid_bt, TOL_LOGP);
        }
        free(want);
        want = s_golden(g, model, "entropy_t1", NULL);
        if (want) {
            s_compare(model, "entropy T=1", ent, want, BT, bt->valid_bt, TOL_ENTROPY);
        }
        free(want);
        s_check_scalar(model, "loss T=1", s_loss(bt->dlogp, logp, BT), bt->losses[0], TOL_LOSS);

        rl_model_zero_grad(m);
        rc = rl_model_backward(m, bt->dlogp);
        CHECK_MSG(rc == 0, "%s: backward: %s", model, rl_model_errmsg(m));
        const rl_hf_config_t *cfg = rl_model_config(m);
        rl_model_params_t *grads = rl_model_grads(m);
        CHECK(grads != NULL);
        int ns = rl_hf_tensor_specs(cfg, NULL, 0);
        rl_hf_tensor_spec_t *specs = calloc((size_t)ns, sizeof *specs);
        RL_ASSERT(specs);
        rl_hf_tensor_specs(cfg, specs, ns);
        for (int i = 0; rc == 0 && grads && i < ns; i++) {
            snprintf(what, sizeof what, "grad.%s", specs[i].name);
            size_t n = 0;
            float *w = s_golden(g, model, what, &n);
            float *got = s_param(grads, cfg->num_hidden_layers, specs[i].name);
            CHECK_MSG(got != NULL, "%s: no gradient pointer for %s", model, specs[i].name);
            if (w && got) {
                s_compare(model, what, got, w, n, NULL, TOL_GRAD);
            }
            free(w);
        }
        free(specs);
    }

    // temperature 0.7: an evaluation forward (train 0)
    rc = rl_model_forward(m, bt->tokens, bt->lengths, bt->B, bt->T, 0.7f, 0, logp, ent);
    CHECK_MSG(rc == 0, "%s: forward T=0.7: %s", model, rl_model_errmsg(m));
    if (rc == 0) {
        float *want = s_golden(g, model, "logp_t07", NULL);
        if (want) {
            s_compare(model, "logp T=0.7", logp, want, BT, bt->valid_bt, TOL_LOGP);
        }
        free(want);
        want = s_golden(g, model, "entropy_t07", NULL);
        if (want) {
            s_compare(model, "entropy T=0.7", ent, want, BT, bt->valid_bt, TOL_ENTROPY);
        }
        free(want);
    }
    free(logp);
    free(ent);
    rl_model_destroy(&m);
    CHECK(m == NULL);
}

// ---- LoRA: the fixture's PEFT adapter ----------------------------------------------------------

// Offset of `vals` (n floats) inside flat (len floats), found by value (the A/B values are
// random, so a match is unique); (size_t)-1 when absent.
static size_t s_find(const float *flat, size_t len, const float *vals, size_t n) {
    for (size_t off = 0; off + n <= len; off++) {
        if (flat[off] == vals[0] && memcmp(flat + off, vals, n * sizeof(float)) == 0) {
            return off;
        }
    }
    return (size_t)-1;
}

// Where each A and B of the adapter file lies in the model's trainable flat array: offs
// (rl_st_file_count(ad)), (size_t)-1 for a tensor not found (a failure). caller owns result;
// free with free().
static size_t *s_adapter_offsets(const char *model, rl_model_t *m, const rl_st_file_t *ad) {
    size_t n_train = 0, n_adapter = 0;
    float *flat = rl_model_trainable(m, &n_train);
    int na = rl_st_file_count(ad);
    size_t *offs = calloc((size_t)na, sizeof(size_t));
    RL_ASSERT(offs);
    for (int i = 0; i < na; i++) {
        const rl_st_tensor_t *t = rl_st_file_tensor(ad, i);
        float *vals = malloc((size_t)t->numel * sizeof(float));
        RL_ASSERT(vals);
        rl_st_to_f32(vals, t);
        offs[i] = flat ? s_find(flat, n_train, vals, (size_t)t->numel) : (size_t)-1;
        CHECK_MSG(offs[i] != (size_t)-1, "%s: adapter tensor %s not found (exactly) among the "
                  "%zu trainable values", model, t->name, n_train);
        n_adapter += (size_t)t->numel;
        free(vals);
    }
    CHECK_MSG(n_train == n_adapter, "%s: %zu trainable values, the adapter has %zu", model,
              n_train, n_adapter);
    return offs;
}

static void s_test_lora(const char *model, const char *dir, const rl_st_file_t *g,
                        const s_batch_t *bt) {
    char err[512] = "", path[1200];
    rl_model_opts_t opts;
    rl_model_opts_default(&opts);
    opts.tune = RL_TUNE_LORA;
    opts.lora_r = 4;
    opts.lora_alpha = 8.0f;
    opts.lora_targets = RL_LORA_ALL;
    opts.lora_dropout = 0.0f;
    rl_model_t *m = rl_model_load(dir, &opts, err, sizeof err);
    CHECK_MSG(m != NULL, "%s: rl_model_load (LoRA): %s", model, err);
    if (!m) {
        return;
    }
    snprintf(path, sizeof path, "%s/adapter", dir);
    int rc = rl_model_load_adapter(m, path, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: rl_model_load_adapter: %s", model, err);
    snprintf(path, sizeof path, "%s/adapter/adapter_model.safetensors", dir);
    rl_st_file_t *ad = rl_st_file_open(path, err, sizeof err);
    CHECK_MSG(ad != NULL, "%s: %s", model, err);
    if (rc != 0 || !ad) {
        rl_st_file_destroy(&ad);
        rl_model_destroy(&m);
        return;
    }

    int na = rl_st_file_count(ad);
    size_t *offs = s_adapter_offsets(model, m, ad);

    size_t BT = (size_t)bt->B * bt->T;
    float *logp = calloc(BT, sizeof(float)), *ent = calloc(BT, sizeof(float));
    RL_ASSERT(logp && ent);
    char what[200];
    const float temps[2] = {1.0f, 0.7f};
    const char *tags[2] = {"t1", "t07"};
    for (int k = 0; k < 2; k++) {
        rl_model_zero_grad(m);
        rc = rl_model_forward(m, bt->tokens, bt->lengths, bt->B, bt->T, temps[k], 1, logp, ent);
        CHECK_MSG(rc == 0, "%s: LoRA forward: %s", model, rl_model_errmsg(m));
        if (rc != 0) {
            break;
        }
        snprintf(what, sizeof what, "lora.logp_%s", tags[k]);
        float *want = s_golden(g, model, what, NULL);
        if (want) {
            s_compare(model, what, logp, want, BT, bt->valid_bt, TOL_LOGP);
        }
        free(want);
        snprintf(what, sizeof what, "lora.entropy_%s", tags[k]);
        want = s_golden(g, model, what, NULL);
        if (want) {
            s_compare(model, what, ent, want, BT, bt->valid_bt, TOL_ENTROPY);
        }
        free(want);
        snprintf(what, sizeof what, "lora loss %s", tags[k]);
        s_check_scalar(model, what, s_loss(bt->dlogp, logp, BT), bt->losses[1 + k], TOL_LOSS);

        rc = rl_model_backward(m, bt->dlogp);
        CHECK_MSG(rc == 0, "%s: LoRA backward: %s", model, rl_model_errmsg(m));
        const float *dflat = rl_model_trainable_grads(m);
        CHECK(dflat != NULL);
        for (int i = 0; rc == 0 && dflat && i < na; i++) {
            const rl_st_tensor_t *t = rl_st_file_tensor(ad, i);
            snprintf(what, sizeof what, "lora.grad_%s.%s", tags[k], t->name);
            float *w = s_golden(g, model, what, NULL);
            if (w && offs[i] != (size_t)-1) {
                // the printed name drops the common "base_model.model.model." prefix
                const char *shortname = strstr(what, "layers.");
                char label[300];
                snprintf(label, sizeof label, "lora d%s %s", tags[k], shortname ? shortname : what);
                s_compare(model, label, dflat + offs[i], w, (size_t)t->numel, NULL, TOL_GRAD);
            }
            free(w);
        }
    }

    // the reference policy: the actor with its adapter disabled is the base model
    rl_model_set_adapter_disabled(m, 1);
    rc = rl_model_forward(m, bt->tokens, bt->lengths, bt->B, bt->T, 1.0f, 0, logp, NULL);
    CHECK_MSG(rc == 0, "%s: forward (adapter disabled): %s", model, rl_model_errmsg(m));
    if (rc == 0) {
        float *want = s_golden(g, model, "logp_t1", NULL);
        if (want) {
            s_compare(model, "logp T=1, adapter disabled = base", logp, want, BT, bt->valid_bt,
                      TOL_LOGP);
        }
        free(want);
    }
    rl_model_set_adapter_disabled(m, 0);

    free(offs);
    free(logp);
    free(ent);
    rl_st_file_destroy(&ad);
    rl_model_destroy(&m);
}

// ---- scalar head: critic values and reward scores (score.safetensors, head_goldens.*) ---------

// One model (full tuning, or LoRA with the fixture's adapter) with the head w (C): hidden
// (full only), values, scores, both losses, and the gradients of L_v = sum(dvalues * v) and
// L_s = sum(dscores * s) through rl_head's backward and rl_model_backward_hidden.
static void s_head_run(const char *model, const char *dir, const rl_st_file_t *h,
                       const s_batch_t *bt, const float *w, int lora) {
    char err[512] = "", path[1200], what[300];
    rl_model_opts_t opts;
    rl_model_opts_default(&opts);
    opts.tune = lora ? RL_TUNE_LORA : RL_TUNE_FULL;
    opts.lora_r = 4;
    opts.lora_alpha = 8.0f;
    opts.lora_targets = RL_LORA_ALL;
    rl_model_t *m = rl_model_load(dir, &opts, err, sizeof err);
    CHECK_MSG(m != NULL, "%s: rl_model_load: %s", model, err);
    if (!m) {
        return;
    }
    rl_st_file_t *ad = NULL;
    size_t *offs = NULL;
    if (lora) {
        snprintf(path, sizeof path, "%s/adapter", dir);
        int rc = rl_model_load_adapter(m, path, err, sizeof err);
        CHECK_MSG(rc == 0, "%s: rl_model_load_adapter: %s", model, err);
        snprintf(path, sizeof path, "%s/adapter/adapter_model.safetensors", dir);
        ad = rl_st_file_open(path, err, sizeof err);
        CHECK_MSG(ad != NULL, "%s: %s", model, err);
        if (rc != 0 || !ad) {
            rl_st_file_destroy(&ad);
            rl_model_destroy(&m);
            return;
        }
        offs = s_adapter_offsets(model, m, ad);
    }
    const rl_hf_config_t *cfg = rl_model_config(m);
    const int B = bt->B, T = bt->T, C = cfg->hidden_size;
    const size_t BT = (size_t)B * T;
    const char *pre = lora ? "lora." : "";
    // the decoder and the final norm only (no vocabulary head), as a critic runs it
    int rc = rl_model_forward(m, bt->tokens, bt->lengths, B, T, 1.0f, 1, NULL, NULL);
    CHECK_MSG(rc == 0, "%s: forward: %s", model, rl_model_errmsg(m));
    const float *hid = rc == 0 ? rl_model_hidden(m) : NULL;
    CHECK(rc != 0 || hid != NULL);
    float *values = calloc(BT, sizeof(float)), *scores = calloc((size_t)B, sizeof(float));
    float *dhid = calloc(BT * C, sizeof(float)), *dw = calloc((size_t)C, sizeof(float));
    unsigned char *real_rows = calloc(BT * C, 1);
    RL_ASSERT(values && scores && dhid && dw && real_rows);
    for (int b = 0; b < B; b++) { // padding rows hold values no token produced
        memset(real_rows + (size_t)b * T * C, 1, (size_t)bt->lengths[b] * C);
    }
    float *dvalues = s_golden(h, model, "dvalues", NULL);
    float *dscores = s_golden(h, model, "dscores", NULL);
    float *losses = s_golden(h, model, "losses", NULL);
    if (hid && dvalues && dscores && losses) {
        if (!lora) {
            float *want = s_golden(h, model, "hidden", NULL);
            if (want) {
                s_compare(model, "head: hidden (t < len)", hid, want, BT * C, real_rows,
                          TOL_HIDDEN);
            }
            free(want);
        }
        rl_head_values_forward(values, hid, w, bt->lengths, B, T, C);
        rl_head_score_forward(scores, hid, w, bt->lengths, B, T, C);
        snprintf(what, sizeof what, "%svalues", pre);
        float *want = s_golden(h, model, what, NULL);
        if (want) { // every position: the zeros at t = 0 and padding are part of the contract
            snprintf(path, sizeof path, "head: %s (B,T)", what);
            s_compare(model, path, values, want, BT, NULL, TOL_HEAD);
        }
        free(want);
        snprintf(what, sizeof what, "%sscores", pre);
        want = s_golden(h, model, what, NULL);
        if (want) {
            snprintf(path, sizeof path, "head: %s (B)", what);
            s_compare(model, path, scores, want, (size_t)B, NULL, TOL_HEAD);
        }
        free(want);
        for (int kind = 0; kind < 2; kind++) { // L_v, then L_s
            const char *k = kind == 0 ? "v" : "s";
            double loss = 0.0;
            rl_model_zero_grad(m);
            memset(dw, 0, (size_t)C * sizeof(float));
            if (kind == 0) {
                for (size_t i = 0; i < BT; i++) {
                    loss += (double)dvalues[i] * values[i];
                }
                rl_head_values_backward(dhid, dw, dvalues, hid, w, bt->lengths, B, T, C);
            } else {
                for (int b = 0; b < B; b++) {
                    loss += (double)dscores[b] * scores[b];
                }
                rl_head_score_backward(dhid, dw, dscores, hid, w, bt->lengths, B, T, C);
            }
            snprintf(what, sizeof what, "head: %sloss L_%s", pre, k);
            s_check_scalar(model, what, loss, losses[(lora ? 2 : 0) + kind], TOL_LOSS);
            rc = rl_model_backward_hidden(m, dhid);
            CHECK_MSG(rc == 0, "%s: backward_hidden: %s", model, rl_model_errmsg(m));
            if (rc != 0) {
                break;
            }
            snprintf(what, sizeof what, "%sgrad_%s.score.weight", pre, k);
            want = s_golden(h, model, what, NULL);
            if (want) {
                snprintf(path, sizeof path, "head: %s", what);
                s_compare(model, path, dw, want, (size_t)C, NULL, TOL_GRAD);
            }
            free(want);
            if (!lora) { // the watched tensors: every golden named grad_<k>.<hf name>
                rl_model_params_t *grads = rl_model_grads(m);
                char prefix[32];
                snprintf(prefix, sizeof prefix, "grad_%s.", k);
                int n_watched = 0;
                for (int i = 0; grads && i < rl_st_file_count(h); i++) {
                    const rl_st_tensor_t *t = rl_st_file_tensor(h, i);
                    const char *name = t->name + strlen(prefix);
                    if (strncmp(t->name, prefix, strlen(prefix)) != 0 ||
                        strcmp(name, "score.weight") == 0) {
                        continue;
                    }
                    float *got = s_param(grads, cfg->num_hidden_layers, name);
                    CHECK_MSG(got != NULL, "%s: no gradient for %s", model, name);
                    want = s_golden(h, model, t->name, NULL);
                    if (got && want) {
                        snprintf(path, sizeof path, "head: %s", t->name);
                        s_compare(model, path, got, want, (size_t)t->numel, NULL, TOL_GRAD);
                    }
                    free(want);
                    n_watched++;
                }
                CHECK_MSG(n_watched >= 3, "%s: only %d head gradients in the goldens", model,
                          n_watched);
                if (grads && !cfg->tie_word_embeddings) { // the vocabulary head takes no part
                    size_t nz = 0, VC = (size_t)cfg->vocab_size * C;
                    for (size_t i = 0; i < VC; i++) {
                        nz += grads->lm_head[i] != 0.0f;
                    }
                    CHECK_MSG(nz == 0, "%s: %zu lm_head gradients non-zero after L_%s", model,
                              nz, k);
                }
            } else {
                const float *dflat = rl_model_trainable_grads(m);
                for (int i = 0; dflat && i < rl_st_file_count(ad); i++) {
                    const rl_st_tensor_t *t = rl_st_file_tensor(ad, i);
                    snprintf(what, sizeof what, "lora.grad_%s.%s", k, t->name);
                    want = s_golden(h, model, what, NULL);
                    if (want && offs[i] != (size_t)-1) {
                        const char *shortname = strstr(what, "layers.");
                        snprintf(path, sizeof path, "head: lora dL_%s %s", k,
                                 shortname ? shortname : what);
                        s_compare(model, path, dflat + offs[i], want, (size_t)t->numel, NULL,
                                  TOL_GRAD);
                    }
                    free(want);
                }
            }
        }
    }
    free(dvalues), free(dscores), free(losses), free(values), free(scores), free(dhid), free(dw);
    free(real_rows), free(offs);
    rl_st_file_destroy(&ad);
    rl_model_destroy(&m);
}

static void s_test_head(const char *model, const char *dir, const s_batch_t *bt, int C) {
    char path[1200], err[512] = "";
    snprintf(path, sizeof path, "%s/score.safetensors", dir);
    rl_st_file_t *sf = rl_st_file_open(path, err, sizeof err);
    CHECK_MSG(sf != NULL, "%s", err);
    snprintf(path, sizeof path, "%s/head_goldens.safetensors", dir);
    rl_st_file_t *h = rl_st_file_open(path, err, sizeof err);
    CHECK_MSG(h != NULL, "%s", err);
    const rl_st_tensor_t *t = sf ? rl_st_file_find(sf, "score.weight") : NULL;
    CHECK_MSG(t && t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == C,
              "%s: score.weight must be [1, %d] (HF's num_labels 1)", model, C);
    if (h && t && t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == C) {
        float *w = malloc((size_t)C * sizeof(float));
        RL_ASSERT(w);
        rl_st_to_f32(w, t);
        s_head_run(model, dir, h, bt, w, 0);
        s_head_run(model, dir, h, bt, w, 1);
        free(w);
    }
    rl_st_file_destroy(&h);
    rl_st_file_destroy(&sf);
}

// ---- AdamW: 3 torch.optim.AdamW steps on the full model ----------------------------------------
static void s_test_adamw(const char *model, const char *dir, const rl_st_file_t *g,
                         const s_batch_t *bt) {
    const double lr = 1e-2; // goldens.json "adamw"
    const rl_optim_hparams_t hp = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                   .weight_decay = 0.1};
    char err[512] = "";
    rl_model_opts_t opts;
    rl_model_opts_default(&opts);
    opts.tune = RL_TUNE_FULL;
    rl_model_t *m = rl_model_load(dir, &opts, err, sizeof err);
    CHECK_MSG(m != NULL, "%s: rl_model_load: %s", model, err);
    if (!m) {
        return;
    }
    size_t n = 0;
    float *params = rl_model_trainable(m, &n);
    float *grads = rl_model_trainable_grads(m);
    CHECK(params != NULL && grads != NULL);
    CHECK_INT((int64_t)n, rl_model_param_count(m));
    rl_optim_t *opt = rl_optim_new(n, &hp);
    RL_ASSERT(opt);
    size_t BT = (size_t)bt->B * bt->T;
    float *logp = calloc(BT, sizeof(float));
    RL_ASSERT(logp);
    rl_model_params_t *P = rl_model_params(m);
    char what[200], label[200];
    for (int step = 1; params && grads && step <= 4; step++) {
        int rc = rl_model_forward(m, bt->tokens, bt->lengths, bt->B, bt->T, 1.0f, step <= 3,
                                  logp, NULL);
        CHECK_MSG(rc == 0, "%s: forward: %s", model, rl_model_errmsg(m));
        if (rc != 0) {
            break;
        }
        snprintf(label, sizeof label, step <= 3 ? "adamw loss before step %d" :
                 "adamw loss after step %d", step <= 3 ? step : 3);
        s_check_scalar(model, label, s_loss(bt->dlogp, logp, BT), bt->adamw_losses[step - 1],
                       TOL_ADAMW_LOSS);
        if (step == 4) {
            break;
        }
        rl_model_zero_grad(m);
        rc = rl_model_backward(m, bt->dlogp);
        CHECK_MSG(rc == 0, "%s: backward: %s", model, rl_model_errmsg(m));
        rl_optim_step(opt, params, grads, lr);
        // the watched tensors: every golden named adamw.step<k>.<hf name>
        char prefix[32];
        snprintf(prefix, sizeof prefix, "adamw.step%d.", step);
        for (int i = 0; i < rl_st_file_count(g); i++) {
            const rl_st_tensor_t *t = rl_st_file_tensor(g, i);
            if (strncmp(t->name, prefix, strlen(prefix)) != 0) {
                continue;
            }
            const char *name = t->name + strlen(prefix);
            float *got = s_param(P, rl_model_config(m)->num_hidden_layers, name);
            CHECK_MSG(got != NULL, "%s: no parameter %s", model, name);
            float *want = s_golden(g, model, t->name, NULL);
            snprintf(what, sizeof what, "grad.%s", name);
            float *g1 = s_golden(g, model, what, NULL); // the step-1 gradient
            if (got && want && g1) {
                double gmax = 0.0;
                for (int64_t j = 0; j < t->numel; j++) {
                    gmax = fmax(gmax, fabs((double)g1[j]));
                }
                // in units of lr, separately over well- and ill-conditioned elements
                double err_ok = 0.0, err_ill = 0.0;
                size_t worst = 0, n_ill = 0;
                int nan = 0;
                for (int64_t j = 0; j < t->numel; j++) {
                    double e = fabs((double)got[j] - (double)want[j]) / lr;
                    nan |= isnan(e);
                    if (fabs((double)g1[j]) < ADAMW_ILL * gmax) {
                        n_ill++;
                        err_ill = fmax(err_ill, e);
                    } else if (e > err_ok) {
                        err_ok = e;
                        worst = (size_t)j;
                    }
                }
                int ok = !nan && err_ok <= TOL_ADAMW_LR && err_ill <= 2.0 * step;
                snprintf(what, sizeof what, "after step %d %s", step, name);
                printf("  %-14s %-58s err %.2e lr (tol %.0e lr); %zu ill-conditioned: %.2e lr "
                       "(tol %d lr)%s\n", model, what, err_ok, TOL_ADAMW_LR, n_ill, err_ill,
                       2 * step, ok ? "" : "  FAIL");
                CHECK_MSG(ok, "%s adamw %s: max error %.3g lr (element %zu: %.9g vs %.9g), "
                          "ill-conditioned %.3g lr", model, what, err_ok, worst,
                          (double)got[worst], (double)want[worst], err_ill);
            }
            free(g1);
            free(want);
        }
    }
    free(logp);
    rl_optim_destroy(&opt);
    rl_model_destroy(&m);
}

// The reward-model fixture: its scores against torch's, and our writer against its layout.
static void s_test_seq_cls(void) {
    char dir[1024], err[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/models/llama_gqa_rm", RL_FIXTURES);
    snprintf(path, sizeof path, "%s/goldens.json", dir);
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    CHECK_MSG(g != NULL, "%s: %s", path, je.text);
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = 1;
    mo.seq_cls = 1;
    rl_model_t *m = rl_model_load(dir, &mo, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    rl_st_model_t *st = rl_st_model_open(dir, err, sizeof err);
    const rl_st_tensor_t *sw = st ? rl_st_model_find(st, "score.weight") : NULL;
    CHECK(sw && sw->ndim == 2 && sw->shape[0] == 1);
    if (!g || !m || !sw) {
        json_decref(g);
        rl_model_destroy(&m);
        rl_st_model_destroy(&st);
        return;
    }
    int C = rl_model_config(m)->hidden_size;
    float *w = malloc((size_t)C * sizeof(float));
    rl_st_to_f32(w, sw);
    json_t *jt = json_object_get(g, "tokens"), *jl = json_object_get(g, "lengths");
    json_t *js = json_object_get(g, "scores");
    int B = (int)json_array_size(jl), T = (int)json_array_size(json_array_get(jt, 0));
    int32_t tok[64];
    int len[8];
    float scores[8];
    for (int b = 0; b < B && b < 8; b++) {
        len[b] = (int)json_integer_value(json_array_get(jl, (size_t)b));
        for (int t = 0; t < T && b * T + t < 64; t++) {
            tok[b * T + t] = (int32_t)json_integer_value(
                json_array_get(json_array_get(jt, (size_t)b), (size_t)t));
        }
    }
    CHECK_INT(rl_model_forward(m, tok, len, B, T, 1.0f, 0, NULL, NULL), 0);
    rl_head_score_forward(scores, rl_model_hidden(m), w, len, B, T, C);
    double worst = 0, top = 0;
    for (int b = 0; b < B; b++) {
        double want = json_number_value(json_array_get(js, (size_t)b));
        worst = fmax(worst, fabs((double)scores[b] - want));
        top = fmax(top, fabs(want));
    }
    printf("llama_gqa_rm: scores vs torch (float64): %.3g of max (tol %g), torch %s\n",
           worst / top, TOL_LOGITS, json_string_value(json_object_get(g, "torch")));
    CHECK_MSG(worst / top <= TOL_LOGITS, "reward-model scores differ from torch's by %g",
              worst / top);
    // our writer: the same tensors, the classifier's config
    char out[] = "/tmp/rl_test_seqcls_out_XXXXXX";
    rl_test_tmpdir(out, sizeof out, "seqcls_out");
    CHECK_INT(rl_model_save_seq_cls(m, out, w, 0, 0, err, sizeof err), 0);
    rl_st_model_t *o = rl_st_model_open(out, err, sizeof err);
    CHECK_MSG(o && rl_st_model_count(o) == rl_st_model_count(st),
              "saved %d tensors, the fixture has %d", o ? rl_st_model_count(o) : -1,
              rl_st_model_count(st));
    for (int i = 0; o && i < rl_st_model_count(st); i++) {
        const rl_st_tensor_t *a = rl_st_model_tensor(st, i);
        const rl_st_tensor_t *b = rl_st_model_find(o, a->name);
        int same = b && b->ndim == a->ndim && b->nbytes == a->nbytes &&
                   memcmp(a->data, b->data, a->nbytes) == 0;
        for (int k = 0; same && k < a->ndim; k++) {
            same = a->shape[k] == b->shape[k];
        }
        CHECK_MSG(same, "saved tensor %s differs from the fixture's (shape or bytes)", a->name);
    }
    rl_st_model_destroy(&o);
    snprintf(path, sizeof path, "%s/config.json", out);
    json_t *c = json_load_file(path, 0, &je);
    CHECK_STR(json_string_value(json_array_get(json_object_get(c, "architectures"), 0)),
              "LlamaForSequenceClassification");
    CHECK_STR(json_string_value(json_object_get(json_object_get(c, "id2label"), "0")),
              "LABEL_0");
    CHECK_INT((int)json_integer_value(json_object_get(json_object_get(c, "label2id"),
                                                      "LABEL_0")),
              0);
    CHECK_INT((int)json_integer_value(json_object_get(c, "pad_token_id")), 0);
    json_decref(c);
    rl_hf_config_t c1, c2;
    CHECK_INT(rl_hf_config_load(dir, &c1, err, sizeof err), 0);
    CHECK_INT(rl_hf_config_load(out, &c2, err, sizeof err), 0);
    CHECK(c1.hidden_size == c2.hidden_size && c1.num_hidden_layers == c2.num_hidden_layers &&
          c1.vocab_size == c2.vocab_size && c1.rope_type == c2.rope_type &&
          c1.tie_word_embeddings == c2.tie_word_embeddings);
    rl_test_tmpdir_done(out);
    free(w);
    json_decref(g);
    rl_model_destroy(&m);
    rl_st_model_destroy(&st);
}

int main(void) {
    for (size_t k = 0; k < sizeof s_models / sizeof s_models[0]; k++) {
        const char *model = s_models[k];
        char dir[1024], path[1100], err[512] = "";
        snprintf(dir, sizeof dir, "%s/models/%s", RL_FIXTURES, model);
        snprintf(path, sizeof path, "%s/goldens.safetensors", dir);
        rl_st_file_t *g = rl_st_file_open(path, err, sizeof err);
        CHECK_MSG(g != NULL, "%s", err);
        rl_hf_config_t cfg;
        int rc = rl_hf_config_load(dir, &cfg, err, sizeof err);
        CHECK_MSG(rc == 0, "%s", err);
        s_batch_t bt;
        if (g && rc == 0 && s_batch_read(g, model, cfg.vocab_size, &bt) == 0) {
            printf("%s (%s, C %d, L %d, NH %d, NKV %d, D %d, V %d, B %d, T %d)\n", model,
                   rl_hf_arch_name(cfg.arch), cfg.hidden_size, cfg.num_hidden_layers,
                   cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                   cfg.vocab_size, bt.B, bt.T);
            RL_TEST_RUN(s_test_full, model, dir, g, &bt);
            RL_TEST_RUN(s_test_lora, model, dir, g, &bt);
            RL_TEST_RUN(s_test_adamw, model, dir, g, &bt);
            RL_TEST_RUN(s_test_head, model, dir, &bt, cfg.hidden_size);
            s_batch_free(&bt);
        }
        rl_st_file_destroy(&g);
    }
    RL_TEST_RUN(s_test_seq_cls);
    RL_TEST_DONE();
}

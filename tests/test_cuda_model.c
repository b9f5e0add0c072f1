// test_cuda_model — the device model (model/rl_model_cuda.c: rl_model_t with opts.device a GPU)
// against the CPU model on the same weights (label gpu; skipped without a GPU; its .emu twin runs
// it on the module emulated on the CPU). Small random models: llama (head_dim 40, no GQA, untied;
// and head_dim 64, GQA, tied), qwen2 (q/k/v biases, GQA, tied), qwen3 (q/k norm, head_dim 40
// with NH*D != C, GQA, untied); hidden 192..256, vocabulary 1001, 2 or 3 layers; tune NONE, LORA
// (several target sets, ranks 8 and 16, dropout 0 and > 0, recompute) and FULL. Batches of B = 5
// right-padded sequences of lengths 1, T and in between, with out-of-range ids at the padding.
// Each case checks logp, entropy, the hidden states (rl_model_hidden), and every gradient after
// rl_model_backward (dlogp) and, separately, after rl_model_backward_hidden (dhidden), against
// the CPU fp32 model; then determinism (a second forward and backward on the device gives the
// same bits) and a forward without the head. Then the optimizer's step on the device against
// trainer/rl_optim (the same bits), the sampler's path (a KV cache on the device and
// rl_model_step against the CPU's: s_test_step), a BF16 folder loaded on the device, a PEFT adapter
// loaded into a tune NONE model on the device (and disabled), and the refusals (too little device
// memory, bad tokens, more tokens than the buffers hold, backward without a training forward, a
// sharded model, rl_model_logits). On the emulation T is 24 instead of 96 (the same cases).
//
// Tolerances, and why. The weights are rounded to bf16 values first (on both models), so the
// device's bf16 copies are the same numbers as the CPU's fp32 ones (one case keeps raw fp32
// weights, which the device rounds). What remains is the device's rounding of every matmul input
// to bf16 (activations in the forward, gradients in the backward): a relative error of at most
// u = 2^-9 per element at every matmul. How far such roundings move a result depends on the model
// and the tensor: a first version allowed sqrt(number of roundings) u times one conditioning
// factor, and attention's q/k gradients (the softmax backward cancels) came out 2-4 times above
// the other tensors, more with dropout, so one factor was too loose for most tensors or too tight
// for those. So each case measures the sensitivity on the CPU: a second CPU fp32 model whose
// matmul weights (and LoRA A, B) are each multiplied by (1 + e), e uniform in [-u, u] (a
// perturbation of a bf16 rounding's size at every matmul), gives per tensor the difference
// D = perturbed - reference that roundings of size u cause there. The device's difference
// d = device - reference must satisfy:
// - normwise, per tensor: ||d|| <= 5 ||D||. The device rounds activations and gradients rather
//   than weights, about as many per matmul, and attention's inputs too (q, k, v and P: the bf16
//   attention on the tensor cores, which D does not model, having no weights); measured on the
//   emulation over 426 tensors: median 1.61, worst 3.38 (layer 0's q_proj LoRA B: the softmax
//   backward cancels); with the fp32 attention (RLCTL_CUDA_ATTN=fp32) median 1.31, worst 2.68;
// - every element: |d_i| <= 32 max(rms(D over i's row), rms(D)), 8 sigma of that allowance (a
//   row is an output unit of a weight gradient, a position of the hidden states; the row's scale
//   follows the sparse rows of the embedding and vocabulary gradients), and exactly 0 in a row
//   where the reference is all 0 (an embedding row no token uses, padding, lm_head from dhidden).
//   Rows are few-mode: the device's error of one row measures 1.2 times D's at the median, 3.5 at
//   the 99th percentile and 5 at worst (the embedding rows of a FULL case, as the same sequence
//   alone in a batch of one: so no other sequence leaks in), hence 8 sigma rather than 6;
// - logp and entropy, per real position: rms(d) <= 5 rms(D) and |d| <= 32 rms(D); exactly 0 at
//   t = 0 and at padding.
// The measured D of logp is 0.5-2e-2 at logits of rms 1.5-2 (a trained model's scale), of the
// hidden states and gradients about 1e-2 normwise. A bug in indexing, a dropped term or a wrong
// mask shows as errors the size of the values themselves: 10-100 times these bounds.
#include "rl_test_cuda.h"

#include "rl_device.h"
#include "rl_err.h"
#include "rl_head.h"
#include "rl_hf.h"
#include "rl_model.h"
#include "rl_optim.h"
#include "rl_rng.h"
#include "rl_sample.h"
#include "rl_sampler.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const double S_U = 1.0 / 512.0; // bf16's unit roundoff, 2^-9
static const double S_RATIO = 5.0;     // ||d|| <= S_RATIO ||D|| (see the top)
static const double S_SAMPLER_LOGP = 0.2; // the sampler's logprobs against the CPU's scoring

// ---------------------------------------------------------------------------------------------
// models

typedef struct {
    const char *name;
    const char *arch; // model_type
    int tied, C, I, L, NH, NKV, D, V;
} s_shape_t;

static const s_shape_t S_LLAMA = {"llama D40 MHA untied", "llama", 0, 200, 344, 2, 5, 5, 40, 1001};
static const s_shape_t S_LLAMA_T = {"llama D64 GQA tied", "llama", 1, 256, 416, 2, 4, 2, 64, 1001};
static const s_shape_t S_QWEN2 = {"qwen2 D64 GQA tied", "qwen2", 1, 192, 320, 3, 3, 1, 64, 1001};
static const s_shape_t S_QWEN3 = {"qwen3 D40 GQA untied", "qwen3", 0, 200, 336, 2, 6, 2, 40, 1001};

static rl_hf_config_t s_cfg(const s_shape_t *s) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"model_type\":\"%s\",\"hidden_size\":%d,\"intermediate_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"head_dim\":%d,\"vocab_size\":%d,\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"
             "\"max_position_embeddings\":4096,\"initializer_range\":0.1,"
             "\"tie_word_embeddings\":%s}",
             s->arch, s->C, s->I, s->L, s->NH, s->NKV, s->D, s->V, s->tied ? "true" : "false");
    rl_hf_config_t cfg;
    char err[512];
    if (rl_hf_config_parse(json, strlen(json), "test", &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "FAIL config: %s\n", err);
        exit(1);
    }
    return cfg;
}

typedef struct {
    const s_shape_t *shape;
    rl_tune_t tune;
    int targets, r;
    float dropout;
    int recompute;
    float temperature;
    int raw_weights; // 1: weights left fp32 (the device rounds them), else rounded to bf16 first
} s_case_t;

static int s_host_optim; // rl_model_opts_t.device_host_optim of the models s_new makes
static int s_infer;      // and their device_infer
// an NCCL group of the models s_new makes (s_test_group; ranks 0: none), on cuda:<s_index>
static const unsigned char *s_comm_id;
static int s_comm_ranks, s_comm_rank, s_index;
// ZeRO-3's group of the models s_new makes (s_test_shard; ranks 0: none)
static const unsigned char *s_shard_id;
static int s_shard_ranks, s_shard_rank, s_shard_masters;

static rl_model_t *s_new(const rl_hf_config_t *cfg, const s_case_t *k, int cuda, int rows) {
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.tune = k->tune;
    o.lora_r = k->r;
    o.lora_alpha = 2.0f * (float)k->r;
    o.lora_targets = k->targets;
    o.lora_dropout = k->dropout;
    o.recompute = k->recompute;
    o.seed = 77;
    o.threads = 1;
    o.device.cuda = cuda;
    o.device_rows = rows;
    o.device_host_optim = s_host_optim;
    o.device_infer = s_infer;
    o.device.index = cuda ? s_index : 0;
    o.device_comm_id = s_comm_id;
    o.device_comm_ranks = s_comm_ranks;
    o.device_comm_rank = s_comm_rank;
    o.device_shard_id = s_shard_id;
    o.device_shard_ranks = s_shard_ranks;
    o.device_shard_rank = s_shard_rank;
    o.device_shard_masters = s_shard_masters;
    char err[2048] = "";
    rl_model_t *m = rl_model_new_random(cfg, &o, 1234, err, sizeof err);
    if (!m) {
        fprintf(stderr, "FAIL new_random (%s): %s\n", cuda ? "cuda:0" : "cpu", err);
        exit(1);
    }
    return m;
}

// Norms and biases away from 1 and 0 (where gradient paths vanish), LoRA A and B non-zero
// (PEFT's B = 0 makes dA = 0); then, unless raw, every parameter rounded to a bf16 value.
static void s_prepare(rl_model_t *m, const s_case_t *k) {
    const rl_hf_config_t *c = rl_model_config(m);
    rl_model_params_t *p = rl_model_params(m);
    rl_rng_t rng;
    rl_rng_seed(&rng, 99);
    int n_specs = rl_hf_tensor_specs(c, NULL, 0);
    rl_hf_tensor_spec_t *specs = calloc((size_t)n_specs, sizeof *specs);
    rl_hf_tensor_specs(c, specs, n_specs);
    for (int i = 0; i < n_specs; i++) {
        float *t = *rl_model_params_find(p, c->num_hidden_layers, specs[i].name);
        size_t n = (size_t)specs[i].shape[0] * (size_t)(specs[i].ndim == 2 ? specs[i].shape[1] : 1);
        const char *nm = specs[i].name;
        size_t len = strlen(nm);
        int is_bias = len > 5 && strcmp(nm + len - 5, ".bias") == 0;
        int is_norm = len > 11 && strcmp(nm + len - 11, "norm.weight") == 0;
        for (size_t j = 0; is_bias && j < n; j++) {
            t[j] = 0.3f * (float)rl_rng_normal(&rng);
        }
        for (size_t j = 0; is_norm && j < n; j++) {
            t[j] = 1.0f + 0.3f * (float)rl_rng_normal(&rng);
        }
        for (size_t j = 0; !k->raw_weights && j < n; j++) {
            t[j] = rl_test_round_bf16(t[j]);
        }
    }
    free(specs);
    if (k->tune == RL_TUNE_LORA) {
        size_t n;
        float *t = rl_model_trainable(m, &n);
        rl_rng_fill_normal(&rng, t, n, 0.0f, 0.1f);
        for (size_t j = 0; j < n; j++) {
            t[j] = rl_test_round_bf16(t[j]);
        }
    }
}

// Every matmul weight (and LoRA A, B) of m times (1 + e), e uniform in [-u, u]: the reference
// for how much roundings of a bf16's size move each result (see the top).
static void s_perturb(rl_model_t *m) {
    const rl_hf_config_t *c = rl_model_config(m);
    rl_rng_t rng;
    rl_rng_seed(&rng, 31337);
    int n_specs = rl_hf_tensor_specs(c, NULL, 0);
    rl_hf_tensor_spec_t *specs = calloc((size_t)n_specs, sizeof *specs);
    rl_hf_tensor_specs(c, specs, n_specs);
    for (int i = 0; i < n_specs; i++) {
        if (specs[i].ndim != 2) {
            continue;
        }
        float *t = *rl_model_params_find(rl_model_params(m), c->num_hidden_layers, specs[i].name);
        size_t n = (size_t)specs[i].shape[0] * (size_t)specs[i].shape[1];
        for (size_t j = 0; j < n; j++) {
            t[j] *= (float)(1.0 + S_U * (2.0 * rl_rng_uniform(&rng) - 1.0));
        }
    }
    free(specs);
    size_t n;
    float *t = rl_model_trainable(m, &n);
    for (size_t j = 0; rl_model_lora(m) && j < n; j++) {
        t[j] *= (float)(1.0 + S_U * (2.0 * rl_rng_uniform(&rng) - 1.0));
    }
}

// dst's host parameters (and trainable ones, unless dst has none) := src's, then pushed (when
// dst is on a device).
static void s_copy_params(rl_model_t *dst, rl_model_t *src) {
    size_t n1, n2;
    float *a = rl_model_weights_flat(dst, &n1), *b = rl_model_weights_flat(src, &n2);
    RL_ASSERT(a && b && n1 == n2);
    memcpy(a, b, n1 * sizeof *a);
    float *ta = rl_model_trainable(dst, &n1), *tb = rl_model_trainable(src, &n2);
    RL_ASSERT(n1 == n2 || n1 == 0); // a tune NONE dst takes the weights only
    if (n1) {
        memcpy(ta, tb, n1 * sizeof *ta);
    }
    CHECK_MSG(rl_model_device_push(dst, 1) == 0, "push: %s", rl_model_errmsg(dst));
}

// ---------------------------------------------------------------------------------------------
// comparisons

static double s_rms(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)x[i] * x[i];
    }
    return n ? sqrt(s / (double)n) : 0.0;
}

// got against want (n, rows of `cols`), with alt the perturbed CPU's result (see the top):
// ||got - want|| <= S_RATIO ||alt - want||; every element within 32 max(rms(alt - want) over its
// row, over all); a row of want all zero: got's exactly zero. Prints the worst element.
static int s_cmp(const char *what, const float *got, const float *want, const float *alt, size_t n,
                 size_t cols) {
    double d2 = 0, a2 = 0, worst_r = -1;
    size_t wi = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i], e = (double)alt[i] - want[i];
        d2 += d * d;
        a2 += e * e;
    }
    const double rms_all = sqrt(a2 / (double)(n ? n : 1));
    for (size_t r0 = 0; r0 < n; r0 += cols) {
        size_t r1 = r0 + cols < n ? r0 + cols : n;
        double e2 = 0;
        int zero = 1;
        for (size_t i = r0; i < r1; i++) {
            double e = (double)alt[i] - want[i];
            e2 += e * e;
            zero &= want[i] == 0.0f;
        }
        double rms_row = sqrt(e2 / (double)(r1 - r0));
        double lim = zero ? 0.0 : 32.0 * (rms_row > rms_all ? rms_row : rms_all);
        for (size_t i = r0; i < r1; i++) {
            double d = fabs((double)got[i] - want[i]);
            double r = lim > 0 ? d / lim : (d > 0 ? INFINITY : 0.0);
            if (!isfinite(got[i])) {
                r = INFINITY;
            }
            bad += !(r <= 1.0);
            if (!(r <= worst_r)) {
                worst_r = r;
                wi = i;
            }
        }
    }
    double ratio = a2 > 0 ? sqrt(d2 / a2) : (d2 > 0 ? INFINITY : 0.0);
    int ok = bad == 0 && ratio <= S_RATIO;
    printf("  %-40s n %-7zu |d|/|D| %.2f (of %g)  worst %.2e at %zu (got %.6g, want %.6g; %.2f "
           "of its bound)%s\n",
           what, n, ratio, S_RATIO, n ? fabs((double)got[wi] - want[wi]) : 0.0, wi,
           n ? (double)got[wi] : 0.0, n ? (double)want[wi] : 0.0, worst_r, ok ? "" : " FAIL");
    CHECK_MSG(ok, "%s: |d|/|D| %.3g (allowed %g), %zu elements beyond their bounds", what, ratio,
              S_RATIO, bad);
    return ok;
}

// logp / entropy (B,T) at real positions against want, alt the perturbed CPU's: rms(d) <=
// S_RATIO rms(D), |d| <= 32 rms(D); exactly 0 (both) at t = 0 and padding.
static void s_cmp_rows(const char *what, const float *got, const float *want, const float *alt,
                       const int *len, int B, int T) {
    double worst = 0, d2 = 0, a2 = 0;
    int wb = 0, wt = 0, bad0 = 0, n = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            if (t >= 1 && t < len[b]) {
                double d = fabs((double)got[i] - want[i]), e = (double)alt[i] - want[i];
                d2 += d * d;
                a2 += e * e;
                n++;
                if (!(d <= worst)) {
                    worst = d;
                    wb = b;
                    wt = t;
                }
            } else {
                bad0 += got[i] != 0.0f || want[i] != 0.0f;
            }
        }
    }
    double rms_d = sqrt(d2 / n), rms_a = sqrt(a2 / n), lim = 32.0 * rms_a;
    size_t wi = (size_t)wb * T + wt;
    int ok = rms_d <= S_RATIO * rms_a && worst <= lim && bad0 == 0;
    printf("  %-40s rms d %.2e, D %.2e (%.2f of %g)  worst |d| %.2e at [%d,%d] (got %.6g, want "
           "%.6g; %.2f of %.2e)%s\n",
           what, rms_d, rms_a, rms_d / rms_a, S_RATIO, worst, wb, wt, (double)got[wi],
           (double)want[wi], worst / lim, lim, ok ? "" : " FAIL");
    CHECK_MSG(ok, "%s: rms %.3g vs D %.3g, worst %.3g beyond %.3g, %d non-zero outside", what,
              rms_d, rms_a, worst, lim, bad0);
}

// Every gradient of the CPU model against the device model's (pulled), alt the perturbed CPU
// model's: per tensor (FULL) or per LoRA A and B.
static void s_cmp_grads(const char *when, rl_model_t *gpu, rl_model_t *cpu, rl_model_t *alt) {
    CHECK_MSG(rl_model_device_pull(gpu, 1) == 0, "pull: %s", rl_model_errmsg(gpu));
    const rl_hf_config_t *c = rl_model_config(cpu);
    const int L = c->num_hidden_layers;
    char what[160];
    rl_model_params_t *gg = rl_model_grads(gpu), *gc = rl_model_grads(cpu),
                      *ga = rl_model_grads(alt);
    if (gg) {
        int n_specs = rl_hf_tensor_specs(c, NULL, 0);
        rl_hf_tensor_spec_t *specs = calloc((size_t)n_specs, sizeof *specs);
        rl_hf_tensor_specs(c, specs, n_specs);
        for (int i = 0; i < n_specs; i++) {
            const char *nm = specs[i].name;
            size_t cols = (size_t)(specs[i].ndim == 2 ? specs[i].shape[1] : specs[i].shape[0]);
            size_t n = (size_t)specs[i].shape[0] * (specs[i].ndim == 2 ? cols : 1);
            snprintf(what, sizeof what, "%s d%s", when, strncmp(nm, "model.", 6) ? nm : nm + 6);
            s_cmp(what, *rl_model_params_find(gg, L, nm), *rl_model_params_find(gc, L, nm),
                  *rl_model_params_find(ga, L, nm), n, cols);
        }
        free(specs);
        return;
    }
    rl_lora_t *lg = rl_model_lora(gpu), *lc = rl_model_lora(cpu), *la = rl_model_lora(alt);
    const int R = rl_lora_rank(lc);
    for (int l = 0; l < L; l++) {
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            if (!(rl_lora_targets(lc) & (1 << m))) {
                continue;
            }
            int in, out;
            rl_lora_module_dims(c, m, &in, &out);
            snprintf(what, sizeof what, "%s dA %d.%s", when, l, rl_lora_module_name(m));
            s_cmp(what, rl_lora_dA(lg, l, m), rl_lora_dA(lc, l, m), rl_lora_dA(la, l, m),
                  (size_t)R * in, (size_t)in);
            snprintf(what, sizeof what, "%s dB %d.%s", when, l, rl_lora_module_name(m));
            s_cmp(what, rl_lora_dB(lg, l, m), rl_lora_dB(lc, l, m), rl_lora_dB(la, l, m),
                  (size_t)R * out, (size_t)R);
        }
    }
}

static int s_same_bits(const void *a, const void *b, size_t bytes) {
    return memcmp(a, b, bytes) == 0;
}

// ---------------------------------------------------------------------------------------------
// a case

#define S_B 5

typedef struct {
    int T, len[S_B];
    int32_t *tok;   // (B,T)
    float *dlogp;   // (B,T): NaN where rl_model_backward must not read
    float *dhidden; // (B*T,C): NaN at padding rows
} s_batch_t;

static s_batch_t s_batch(int T, int V, int C) {
    s_batch_t b;
    b.T = T;
    const int lens[S_B] = {1, T, T / 2 + 3, 2, T - 5};
    memcpy(b.len, lens, sizeof lens);
    b.tok = malloc((size_t)S_B * T * sizeof *b.tok);
    b.dlogp = malloc((size_t)S_B * T * sizeof *b.dlogp);
    b.dhidden = malloc((size_t)S_B * T * C * sizeof *b.dhidden);
    rl_rng_t rng;
    rl_rng_seed(&rng, 4242 + (uint64_t)T);
    for (int i = 0; i < S_B; i++) {
        for (int t = 0; t < T; t++) {
            size_t j = (size_t)i * T + t;
            int real = t < b.len[i];
            // padding holds ids outside the vocabulary: never read
            b.tok[j] = real ? (int32_t)rl_rng_below(&rng, (uint64_t)V) : (t % 2 ? V + 7 : -3);
            b.dlogp[j] = real && t >= 1 ? (float)rl_rng_normal(&rng) : NAN;
            for (int c = 0; c < C; c++) {
                b.dhidden[j * C + c] = real ? 0.05f * (float)rl_rng_normal(&rng) : NAN;
            }
        }
    }
    return b;
}

static void s_batch_free(s_batch_t *b) {
    free(b->tok);
    free(b->dlogp);
    free(b->dhidden);
}

// rms of the CPU's logits / temperature over the batch's real rows.
static double s_logit_rms(rl_model_t *cpu, const s_batch_t *b, int V, float temp) {
    float *lg = rl_model_logits(cpu);
    RL_ASSERT(lg);
    double s = 0;
    size_t n = 0;
    for (int i = 0; i < S_B; i++) {
        const float *row = lg + (size_t)i * b->T * V;
        double r = s_rms(row, (size_t)b->len[i] * V);
        s += r * r * (double)b->len[i] * V;
        n += (size_t)b->len[i] * V;
    }
    free(lg);
    return sqrt(s / (double)n) / temp;
}

static void s_run_case(const s_case_t *k, int T) {
    const s_shape_t *sh = k->shape;
    rl_hf_config_t cfg = s_cfg(sh);
    const int C = sh->C, V = sh->V;
    const int trains = k->tune != RL_TUNE_NONE;
    printf("%s, tune %s%s", sh->name,
           k->tune == RL_TUNE_NONE   ? "NONE"
           : k->tune == RL_TUNE_FULL ? "FULL"
                                     : "LORA",
           k->raw_weights ? ", raw fp32 weights" : "");
    if (k->tune == RL_TUNE_LORA) {
        printf(" r %d targets 0x%02x dropout %.2f", k->r, (unsigned)k->targets, (double)k->dropout);
    }
    printf("%s, temperature %.2f, B %d T %d\n", k->recompute ? ", recompute" : "",
           (double)k->temperature, S_B, T);

    // the reference, the perturbed reference and the device model, on the same weights
    rl_model_t *cpu = s_new(&cfg, k, 0, 0), *alt = s_new(&cfg, k, 0, 0);
    s_prepare(cpu, k);
    s_copy_params(alt, cpu);
    s_perturb(alt);
    rl_model_t *gpu = s_new(&cfg, k, 1, S_B * T);
    s_copy_params(gpu, cpu);
    s_batch_t b = s_batch(T, V, C);
    const size_t BT = (size_t)S_B * T;

    float *lp_c = malloc(BT * sizeof(float)), *en_c = malloc(BT * sizeof(float));
    float *lp_a = malloc(BT * sizeof(float)), *en_a = malloc(BT * sizeof(float));
    float *lp_g = malloc(BT * sizeof(float)), *en_g = malloc(BT * sizeof(float));
    float *hid_g = malloc(BT * C * sizeof(float));
    int rc = rl_model_forward(cpu, b.tok, b.len, S_B, T, k->temperature, trains, lp_c, en_c);
    rc |= rl_model_forward(alt, b.tok, b.len, S_B, T, k->temperature, trains, lp_a, en_a);
    CHECK_MSG(rc == 0, "cpu forward: %s", rl_model_errmsg(cpu));
    memset(lp_g, 0xff, BT * sizeof(float)); // poisoned: every element must be written
    memset(en_g, 0xff, BT * sizeof(float));
    rc = rl_model_forward(gpu, b.tok, b.len, S_B, T, k->temperature, trains, lp_g, en_g);
    CHECK_MSG(rc == 0, "gpu forward: %s", rl_model_errmsg(gpu));
    if (rc) {
        goto done;
    }
    printf("  (rms of the logits / T: %.3f)\n", s_logit_rms(cpu, &b, V, k->temperature));
    s_cmp_rows("logp", lp_g, lp_c, lp_a, b.len, S_B, T);
    s_cmp_rows("entropy", en_g, en_c, en_a, b.len, S_B, T);
    const float *hc = rl_model_hidden(cpu), *ha = rl_model_hidden(alt), *hg = rl_model_hidden(gpu);
    CHECK(hc && ha && hg);
    if (!hc || !ha || !hg) {
        goto done;
    }
    s_cmp("hidden", hg, hc, ha, BT * C, (size_t)C);
    memcpy(hid_g, hg, BT * C * sizeof(float));
    if (!trains) {
        goto done;
    }

    // ---- backward from dlogp, then (after zero_grad) from dhidden
    CHECK(rl_model_backward(cpu, b.dlogp) == 0 && rl_model_backward(alt, b.dlogp) == 0);
    rc = rl_model_backward(gpu, b.dlogp);
    CHECK_MSG(rc == 0, "gpu backward: %s", rl_model_errmsg(gpu));
    s_cmp_grads("logp:", gpu, cpu, alt);
    size_t ng;
    rl_model_trainable(gpu, &ng);
    float *g1 = malloc(ng * sizeof *g1);
    memcpy(g1, rl_model_trainable_grads(gpu), ng * sizeof *g1);
    rl_model_zero_grad(cpu);
    rl_model_zero_grad(alt);
    rl_model_zero_grad(gpu);
    CHECK(rl_model_backward_hidden(cpu, b.dhidden) == 0);
    CHECK(rl_model_backward_hidden(alt, b.dhidden) == 0);
    rc = rl_model_backward_hidden(gpu, b.dhidden);
    CHECK_MSG(rc == 0, "gpu backward_hidden: %s", rl_model_errmsg(gpu));
    s_cmp_grads("hidden:", gpu, cpu, alt);

    // ---- determinism: the same forward (the same dropout masks) and backward, the same bits
    rl_model_zero_grad(gpu);
    rl_model_set_train_step(gpu, rl_model_train_step(gpu) - 1);
    float *lp2 = malloc(BT * sizeof(float)), *en2 = malloc(BT * sizeof(float));
    rc = rl_model_forward(gpu, b.tok, b.len, S_B, T, k->temperature, 1, lp2, en2);
    CHECK(rc == 0 && rl_model_backward(gpu, b.dlogp) == 0 && rl_model_device_pull(gpu, 1) == 0);
    const float *hg2 = rl_model_hidden(gpu);
    int same = s_same_bits(lp2, lp_g, BT * sizeof(float)) &&
               s_same_bits(en2, en_g, BT * sizeof(float)) && hg2 &&
               s_same_bits(hg2, hid_g, BT * C * sizeof(float)) &&
               s_same_bits(rl_model_trainable_grads(gpu), g1, ng * sizeof(float));
    printf("  %-40s %s\n", "second run (logp, entropy, hidden, grads)",
           same ? "the same bits" : "DIFFERS FAIL");
    CHECK_MSG(same, "%s: a second forward and backward gave other bits", sh->name);
    // ---- a forward without the vocabulary head (a critic's) keeps the same hidden states, and
    // a backward from dlogp after it recomputes the head: the same gradients
    rl_model_zero_grad(gpu);
    rl_model_set_train_step(gpu, rl_model_train_step(gpu) - 1);
    rc = rl_model_forward(gpu, b.tok, b.len, S_B, T, k->temperature, 1, NULL, NULL);
    CHECK(rc == 0 && rl_model_backward(gpu, b.dlogp) == 0 && rl_model_device_pull(gpu, 1) == 0);
    hg2 = rl_model_hidden(gpu);
    same = hg2 && s_same_bits(hg2, hid_g, BT * C * sizeof(float)) &&
           s_same_bits(rl_model_trainable_grads(gpu), g1, ng * sizeof(float));
    printf("  %-40s %s\n", "no head, then backward (hidden, grads)",
           same ? "the same bits" : "DIFFERS FAIL");
    CHECK_MSG(same, "%s: a forward without the head changed the hidden states or gradients",
              sh->name);
    free(lp2);
    free(en2);
    free(g1);
done:
    free(lp_c);
    free(en_c);
    free(lp_a);
    free(en_a);
    free(lp_g);
    free(en_g);
    free(hid_g);
    s_batch_free(&b);
    rl_model_destroy(&cpu);
    rl_model_destroy(&alt);
    rl_model_destroy(&gpu);
}

// ---------------------------------------------------------------------------------------------
// the same bf16 weights through a file: rl_model_load on the device from a BF16 folder gives the
// bits of the pushed weights

static void s_test_load(int T) {
    const s_case_t k = {&S_QWEN2, RL_TUNE_NONE, 0, 8, 0.0f, 0, 1.0f, 0};
    rl_hf_config_t cfg = s_cfg(k.shape);
    printf("%s: rl_model_load from a BF16 folder\n", k.shape->name);
    rl_model_t *cpu = s_new(&cfg, &k, 0, 0);
    s_prepare(cpu, &k);
    char dir[] = "/tmp/rl_cuda_model_XXXXXX", err[2048] = "";
    RL_ASSERT(mkdtemp(dir));
    CHECK_MSG(rl_model_save_hf(cpu, dir, 1, err, sizeof err) == 0, "save_hf: %s", err);
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.device.cuda = 1;
    o.device_rows = S_B * T;
    rl_model_t *g1 = rl_model_load(dir, &o, err, sizeof err);
    CHECK_MSG(g1 != NULL, "load on cuda:0: %s", err);
    rl_model_t *g2 = s_new(&cfg, &k, 1, S_B * T);
    s_copy_params(g2, cpu);
    s_batch_t b = s_batch(T, cfg.vocab_size, cfg.hidden_size);
    const size_t BT = (size_t)S_B * T;
    float *l1 = malloc(BT * sizeof(float)), *l2 = malloc(BT * sizeof(float));
    if (g1) {
        CHECK(rl_model_forward(g1, b.tok, b.len, S_B, T, 1.0f, 0, l1, NULL) == 0);
        CHECK(rl_model_forward(g2, b.tok, b.len, S_B, T, 1.0f, 0, l2, NULL) == 0);
        int same = s_same_bits(l1, l2, BT * sizeof(float));
        printf("  %-34s %s\n", "logp, loaded vs pushed", same ? "the same bits" : "DIFFER FAIL");
        CHECK(same);
    }
    char path[512];
    const char *files[] = {"model.safetensors", "config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    free(l1);
    free(l2);
    s_batch_free(&b);
    rl_model_destroy(&g1);
    rl_model_destroy(&g2);
    rl_model_destroy(&cpu);
}

// ---------------------------------------------------------------------------------------------
// the optimizer's step on the device: the clip and AdamW against trainer/rl_optim on the host,
// from the same gradients (pulled): the same operations in the same order, so the same bits

static void s_test_optim(const s_case_t *k, int T) {
    rl_hf_config_t cfg = s_cfg(k->shape);
    printf("%s, tune %s: the clip and AdamW on the device against rl_optim\n", k->shape->name,
           k->tune == RL_TUNE_FULL ? "FULL" : "LORA");
    rl_model_t *cpu = s_new(&cfg, k, 0, 0), *gpu = s_new(&cfg, k, 1, S_B * T);
    s_prepare(cpu, k);
    s_copy_params(gpu, cpu);
    s_batch_t b = s_batch(T, cfg.vocab_size, cfg.hidden_size);
    size_t n;
    float *p = rl_model_trainable(gpu, &n), *g = rl_model_trainable_grads(gpu);
    const rl_optim_hparams_t hp = {0.9, 0.95, 1e-8, 0.1};
    rl_optim_t *opt = rl_optim_new(n, &hp);
    float *ph = malloc(n * sizeof *ph), *gh = malloc(n * sizeof *gh);
    float *m = malloc(n * sizeof *m), *v = malloc(n * sizeof *v);
    float *lp = malloc((size_t)S_B * T * sizeof *lp);
    double clip[3] = {-1.0, 1e9, 0.0}; // step 1 clips to half the norm, step 2 does not, 3 is off
    for (int step = 1; step <= 3; step++) {
        rl_model_zero_grad(gpu);
        int rc = rl_model_forward(gpu, b.tok, b.len, S_B, T, 1.0f, 1, lp, NULL);
        rc = rc ? rc : rl_model_backward(gpu, b.dlogp);
        rc = rc ? rc : rl_model_device_pull(gpu, 1);
        rc = rc ? rc : rl_model_device_pull(gpu, 0);
        CHECK_MSG(rc == 0, "step %d: %s", step, rl_model_errmsg(gpu));
        memcpy(ph, p, n * sizeof *ph);
        memcpy(gh, g, n * sizeof *gh);
        double max_norm = clip[step - 1];
        if (max_norm < 0) {
            max_norm = 0.5 * rl_optim_clip_grad_norm(gh, n, 0.0);
        }
        double nh = rl_optim_clip_grad_norm(gh, n, max_norm), nd = 0.0;
        rl_optim_step(opt, ph, gh, 1e-3);
        rc = rl_model_device_clip(gpu, max_norm, &nd);
        rc = rc ? rc
                : rl_model_device_adamw(gpu, 1e-3, hp.beta1, hp.beta2, hp.eps, hp.weight_decay,
                                        rl_optim_steps(opt));
        rc = rc ? rc : rl_model_device_pull(gpu, 1);
        rc = rc ? rc : rl_model_device_pull(gpu, 0);
        rc = rc ? rc : rl_model_device_optim_state(gpu, m, v, 0);
        CHECK_MSG(rc == 0, "step %d: %s", step, rl_model_errmsg(gpu));
        int same_g = s_same_bits(g, gh, n * sizeof *g), same_p = s_same_bits(p, ph, n * sizeof *p);
        int same_mv = s_same_bits(m, rl_optim_m(opt), n * sizeof *m) &&
                      s_same_bits(v, rl_optim_v(opt), n * sizeof *v);
        printf("  step %d: max_norm %-9.4g norm %.17g (host %.17g); clipped grads %s, params %s, "
               "m and v %s\n",
               step, max_norm, nd, nh, same_g ? "equal" : "DIFFER", same_p ? "equal" : "DIFFER",
               same_mv ? "equal" : "DIFFER");
        CHECK(fabs(nd - nh) <= 1e-12 * nh && same_g && same_p && same_mv);
    }
    // the moments back onto the device (a resumed checkpoint) and out again
    for (size_t i = 0; i < n; i++) {
        m[i] = (float)i * 1e-3f;
        v[i] = (float)(n - i) * 1e-6f;
    }
    float *m2 = malloc(n * sizeof *m2), *v2 = malloc(n * sizeof *v2);
    CHECK(rl_model_device_optim_state(gpu, m, v, 1) == 0 &&
          rl_model_device_optim_state(gpu, m2, v2, 0) == 0);
    CHECK(s_same_bits(m, m2, n * sizeof *m) && s_same_bits(v, v2, n * sizeof *v));
    // a CPU model has no device step
    double nn;
    CHECK(rl_model_device_clip(cpu, 1.0, &nn) == RL_EINVAL);
    // a model whose optimizer steps on the host keeps no moments on the device: AdamW there and
    // its state are refused, the clip is not
    s_host_optim = 1;
    rl_model_t *ho = s_new(&cfg, k, 1, S_B * T);
    s_host_optim = 0;
    CHECK(rl_model_device_clip(ho, 1.0, &nn) == 0);
    CHECK(rl_model_device_adamw(ho, 1e-3, 0.9, 0.95, 1e-8, 0.0, 1) == RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(ho), "keeps no moments on the device");
    CHECK(rl_model_device_optim_state(ho, m, v, 0) == RL_EINVAL);
    rl_model_destroy(&ho);
    free(m2);
    free(v2);
    free(ph);
    free(gh);
    free(m);
    free(v);
    free(lp);
    rl_optim_destroy(&opt);
    s_batch_free(&b);
    rl_model_destroy(&cpu);
    rl_model_destroy(&gpu);
}

// ---------------------------------------------------------------------------------------------
// a critic's or reward model's scalar head on the device (rl_model_device_head_*) against
// rl_head over rl_model_hidden of a twin device model: the values and scores to the bit (the
// same dot products in double over the same hidden states), the head's gradient within a
// rounding of its double sum, and the trunk's gradients to the bit (the same dL/dhidden)

static void s_test_head(const s_case_t *k, int T) {
    rl_hf_config_t cfg = s_cfg(k->shape);
    const int C = cfg.hidden_size;
    printf("%s: the scalar head on the device against rl_head\n", k->shape->name);
    rl_model_t *cpu = s_new(&cfg, k, 0, 0), *g1 = s_new(&cfg, k, 1, S_B * T),
               *g2 = s_new(&cfg, k, 1, S_B * T);
    s_prepare(cpu, k);
    s_copy_params(g1, cpu);
    s_copy_params(g2, cpu);
    s_batch_t b = s_batch(T, cfg.vocab_size, C);
    float *w = malloc((size_t)C * sizeof *w), *dv = malloc((size_t)S_B * T * sizeof *dv);
    float *o1 = malloc((size_t)S_B * T * sizeof *o1), *o2 = malloc((size_t)S_B * T * sizeof *o2);
    float *dw1 = calloc((size_t)C, sizeof *dw1), *dw2 = calloc((size_t)C, sizeof *dw2);
    float *dhid = malloc((size_t)S_B * T * C * sizeof *dhid);
    rl_rng_t rng;
    rl_rng_seed(&rng, 99);
    for (int c = 0; c < C; c++) {
        w[c] = 0.1f * (float)rl_rng_normal(&rng);
    }
    for (int i = 0; i < S_B * T; i++) {
        dv[i] = (float)rl_rng_normal(&rng);
    }
    size_t n = 0;
    float *gr1 = rl_model_trainable_grads(g1), *gr2 = rl_model_trainable_grads(g2);
    (void)rl_model_trainable(g1, &n);
    for (int score = 0; score <= 1; score++) {
        const size_t n_out = score ? S_B : (size_t)S_B * T;
        rl_model_zero_grad(g1);
        rl_model_zero_grad(g2);
        int rc = rl_model_forward(g1, b.tok, b.len, S_B, T, 1.0f, 1, NULL, NULL);
        rc = rc ? rc : rl_model_forward(g2, b.tok, b.len, S_B, T, 1.0f, 1, NULL, NULL);
        rc = rc ? rc : rl_model_device_head_forward(g1, w, score, o1);
        CHECK_MSG(rc == 0, "head forward: %s %s", rl_model_errmsg(g1), rl_model_errmsg(g2));
        const float *hid = rl_model_hidden(g2);
        CHECK(hid != NULL);
        if (rc || !hid) {
            break;
        }
        if (score) {
            rl_head_score_forward(o2, hid, w, b.len, S_B, T, C);
            rl_head_score_backward(dhid, dw2, dv, hid, w, b.len, S_B, T, C);
        } else {
            rl_head_values_forward(o2, hid, w, b.len, S_B, T, C);
            rl_head_values_backward(dhid, dw2, dv, hid, w, b.len, S_B, T, C);
        }
        rc = rl_model_device_head_backward(g1, w, score, dv, dw1);
        rc = rc ? rc : rl_model_backward_hidden(g2, dhid);
        rc = rc ? rc : rl_model_device_pull(g1, 1);
        rc = rc ? rc : rl_model_device_pull(g2, 1);
        CHECK_MSG(rc == 0, "head backward: %s %s", rl_model_errmsg(g1), rl_model_errmsg(g2));
        double dw_gap = 0.0, dw_max = 0.0;
        for (int c = 0; c < C; c++) {
            dw_gap = fmax(dw_gap, fabs((double)dw1[c] - dw2[c]));
            dw_max = fmax(dw_max, fabs((double)dw2[c]));
        }
        int same_out = s_same_bits(o1, o2, n_out * sizeof *o1);
        int same_g = s_same_bits(gr1, gr2, n * sizeof *gr1);
        printf("  %s: outputs %s, the trunk's gradients %s, the head's gradient within %.3g of "
               "%.3g\n",
               score ? "scores" : "values", same_out ? "equal" : "DIFFER",
               same_g ? "equal" : "DIFFER", dw_gap, dw_max);
        CHECK(same_out && same_g && dw_gap <= 4e-7 * dw_max * 2.0);
    }
    // a CPU model has no device head
    CHECK(rl_model_forward(cpu, b.tok, b.len, S_B, T, 1.0f, 0, NULL, NULL) == 0);
    CHECK(rl_model_device_head_forward(cpu, w, 0, o1) == RL_EINVAL);
    free(w);
    free(dv);
    free(o1);
    free(o2);
    free(dw1);
    free(dw2);
    free(dhid);
    s_batch_free(&b);
    rl_model_destroy(&cpu);
    rl_model_destroy(&g1);
    rl_model_destroy(&g2);
}

// ---------------------------------------------------------------------------------------------
// an adapter loaded into a tune NONE model on the device (its device half made anew for it) gives
// the bits of a LORA model holding the same adapter; disabled, the bits of the bare model

static void s_test_adapter(int T) {
    const s_case_t k = {
        &S_LLAMA, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V | RL_LORA_DOWN, 8, 0.0f, 0, 1.0f, 0};
    const s_case_t kn = {&S_LLAMA, RL_TUNE_NONE, 0, 8, 0.0f, 0, 1.0f, 0};
    rl_hf_config_t cfg = s_cfg(k.shape);
    printf("%s: a PEFT adapter loaded into a tune NONE model on the device\n", k.shape->name);
    rl_model_t *cpu = s_new(&cfg, &k, 0, 0), *lora = s_new(&cfg, &k, 1, S_B * T);
    rl_model_t *none = s_new(&cfg, &kn, 1, S_B * T);
    s_prepare(cpu, &k);
    s_copy_params(lora, cpu);
    s_copy_params(none, cpu);
    char dir[] = "/tmp/rl_cuda_adapter_XXXXXX", err[2048] = "";
    RL_ASSERT(mkdtemp(dir));
    CHECK_MSG(rl_model_save_adapter(cpu, dir, NULL, err, sizeof err) == 0, "save: %s", err);
    s_batch_t b = s_batch(T, cfg.vocab_size, cfg.hidden_size);
    const size_t BT = (size_t)S_B * T;
    float *l0 = malloc(BT * sizeof(float)), *l1 = malloc(BT * sizeof(float));
    float *l2 = malloc(BT * sizeof(float)), *l3 = malloc(BT * sizeof(float));
    int rc = rl_model_forward(none, b.tok, b.len, S_B, T, 1.0f, 0, l0, NULL);
    rc |= rl_model_load_adapter(none, dir, err, sizeof err);
    CHECK_MSG(rc == 0, "load_adapter: %s", err);
    rc |= rl_model_forward(none, b.tok, b.len, S_B, T, 1.0f, 0, l1, NULL);
    rc |= rl_model_forward(lora, b.tok, b.len, S_B, T, 1.0f, 0, l2, NULL);
    rl_model_set_adapter_disabled(none, 1);
    rc |= rl_model_forward(none, b.tok, b.len, S_B, T, 1.0f, 0, l3, NULL);
    CHECK_MSG(rc == 0, "forwards: %s / %s", rl_model_errmsg(none), rl_model_errmsg(lora));
    int with = s_same_bits(l1, l2, BT * sizeof(float)),
        without = s_same_bits(l3, l0, BT * sizeof(float));
    int moved = !s_same_bits(l1, l0, BT * sizeof(float));
    printf("  %-40s %s\n", "logp with the adapter vs LORA model",
           with ? "the same bits" : "DIFFER FAIL");
    printf("  %-40s %s\n", "logp, adapter disabled vs none loaded",
           without ? "the same bits" : "DIFFER FAIL");
    CHECK(with && without && moved);
    // its host copy given back (`rlctl generate --adapter --device cuda`): the same logp, with
    // the adapter and without; another adapter refused (its device half would be made anew)
    CHECK_MSG(rl_model_drop_host_weights(none) == 0, "%s", rl_model_errmsg(none));
    rc = rl_model_forward(none, b.tok, b.len, S_B, T, 1.0f, 0, l0, NULL);
    rl_model_set_adapter_disabled(none, 0);
    rc |= rl_model_forward(none, b.tok, b.len, S_B, T, 1.0f, 0, l2, NULL);
    CHECK(rc == 0 && s_same_bits(l0, l3, BT * sizeof(float)) &&
          s_same_bits(l2, l1, BT * sizeof(float)));
    CHECK(rl_model_load_adapter(none, dir, err, sizeof err) == RL_EINVAL);
    printf("  %-40s %s\n", "host copy given back: logp", rc ? "FAILED" : "the same bits");
    char path[512];
    const char *files[] = {"adapter_model.safetensors", "adapter_config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    free(l0);
    free(l1);
    free(l2);
    free(l3);
    s_batch_free(&b);
    rl_model_destroy(&cpu);
    rl_model_destroy(&lora);
    rl_model_destroy(&none);
}

// ---------------------------------------------------------------------------------------------
// refusals

static void s_test_refusals(void) {
    printf("refusals\n");
    const s_case_t k = {&S_LLAMA, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V, 8, 0.0f, 0, 1.0f, 0};
    rl_hf_config_t cfg = s_cfg(k.shape);
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.tune = RL_TUNE_LORA;
    o.device.cuda = 1;
    char err[2048] = "";

    // too little memory: buffers for 2^30 tokens, refused before anything is allocated
    o.device_rows = 1 << 30;
    rl_model_t *m = rl_model_new_random(&cfg, &o, 1, err, sizeof err);
    printf("  device_rows 2^30: %s\n", err);
    CHECK(m == NULL && strstr(err, "bytes of device memory") && strstr(err, "free"));
    rl_model_destroy(&m);

    // a sharded model
    o.device_rows = 64;
    o.sharded = 1;
    m = rl_model_new_random(&cfg, &o, 1, err, sizeof err);
    printf("  sharded: %s\n", err);
    CHECK(m == NULL && strstr(err, "sharded"));
    rl_model_destroy(&m);
    o.sharded = 0;

    // layers sharded over a group (ZeRO-3) without the group's id; with nothing frozen to shard
    o.device_shard_ranks = 2;
    m = rl_model_new_random(&cfg, &o, 1, err, sizeof err);
    printf("  shard group without an id: %s\n", err);
    CHECK(m == NULL && strstr(err, "need the group's id"));
    rl_model_destroy(&m);
    const unsigned char dummy[RL_DEVICE_COMM_ID] = {0}; // refused before it is used
    o.device_shard_id = dummy;
    o.tune = RL_TUNE_FULL;
    m = rl_model_new_random(&cfg, &o, 1, err, sizeof err);
    printf("  shard group, tune FULL: %s\n", err);
    CHECK(m == NULL && strstr(err, "tune FULL has none"));
    rl_model_destroy(&m);
    o.tune = RL_TUNE_LORA;
    o.device_shard_id = NULL;
    o.device_shard_ranks = 0;

    m = rl_model_new_random(&cfg, &o, 1, err, sizeof err);
    CHECK_MSG(m != NULL, "new_random: %s", err);
    if (!m) {
        return;
    }
    int32_t tok[2 * 40];
    int len[2] = {40, 24};
    float lp[80], dl[80];
    for (int i = 0; i < 80; i++) {
        tok[i] = (i * 37) % 1001;
        dl[i] = 0.5f;
    }
    // backward before any training forward
    int rc = rl_model_backward(m, dl);
    printf("  backward first: %s\n", rl_model_errmsg(m));
    CHECK(rc == RL_EINVAL);
    // a bad token id, and a negative one
    tok[3] = 1001;
    rc = rl_model_forward(m, tok, len, 2, 40, 1.0f, 1, lp, NULL);
    printf("  token 1001: %s\n", rl_model_errmsg(m));
    CHECK(rc == RL_EINVAL && strstr(rl_model_errmsg(m), "1001"));
    tok[3] = -1;
    CHECK(rl_model_forward(m, tok, len, 2, 40, 1.0f, 1, lp, NULL) == RL_EINVAL);
    tok[3] = 5;
    // 64 tokens fit; 65 make the buffers anew for 65, and compute what a model made for 128
    // computes (the same seed: the same weights), bit for bit
    len[1] = 25;
    rc = rl_model_forward(m, tok, len, 2, 40, 1.0f, 1, lp, NULL);
    CHECK_MSG(rc == 0, "65 tokens of 64: %s", rl_model_errmsg(m));
    CHECK(rl_model_backward(m, dl) == 0);
    o.device_rows = 128;
    rl_model_t *m2 = rl_model_new_random(&cfg, &o, 1, err, sizeof err);
    CHECK_MSG(m2 != NULL, "new_random: %s", err);
    float lp2[80];
    if (m2) {
        CHECK(rl_model_forward(m2, tok, len, 2, 40, 1.0f, 1, lp2, NULL) == 0);
        CHECK_MSG(s_same_bits(lp, lp2, sizeof lp), "a grown model's forward differs");
        printf("  65 tokens of 64: the buffers grew; logp as a model made for 128\n");
    }
    rl_model_destroy(&m2);
    o.device_rows = 64;
    len[1] = 24;
    rc = rl_model_forward(m, tok, len, 2, 40, 1.0f, 1, lp, NULL);
    CHECK_MSG(rc == 0, "64 tokens: %s", rl_model_errmsg(m));
    CHECK(rl_model_backward(m, dl) == 0);
    // an evaluation forward leaves nothing for a backward
    CHECK(rl_model_forward(m, tok, len, 2, 40, 1.0f, 0, lp, NULL) == 0);
    CHECK(rl_model_backward(m, dl) == RL_EINVAL);
    // dropout switched on after the buffers were laid out without it: refused, not ignored
    rl_lora_set_dropout(rl_model_lora(m), 0.1f);
    rc = rl_model_forward(m, tok, len, 2, 40, 1.0f, 1, lp, NULL);
    printf("  dropout set later: %s\n", rl_model_errmsg(m));
    CHECK(rc == RL_EINVAL && strstr(rl_model_errmsg(m), "dropout"));
    rl_lora_set_dropout(rl_model_lora(m), 0.0f);
    CHECK(rl_model_forward(m, tok, len, 2, 40, 1.0f, 1, lp, NULL) == 0);
    rl_model_destroy(&m);
}

// ---------------------------------------------------------------------------------------------
// the sampler's path on the device: rl_kvcache_t and rl_model_step of a GPU model against the
// CPU's on the same (bf16-valued) weights: a prefill of two prompts in one call (only their last
// rows' logits asked for), then decode steps of both slots; a slot copied (rl_kvcache_copy)
// decodes as its source, to the bit; and a decode's logits equal a fresh prefill's of the same
// sequence (decode = prefill, within 1e-4 of the logits' rms: the same kernels over the same
// cache; measured 0 on the emulation). Tolerance against the CPU, relative to the logits' rms
// (1.4-1.6 here): max |d| <= 0.15 and rms(d) <= 0.03; measured on the emulation at most 0.076
// and 0.016 (bf16 matmul inputs through 2-3 layers); a wrong position, slot, RoPE or layout is
// off by about the logits' own size (1 and more).

// The device's logits b against the CPU's a (rows asked for): max |d| / rms(a), and the rms of
// d / rms(a) into *rel_rms.
static double s_step_gap(const float *a, const float *b, int rows, const unsigned char *want, int V,
                         double *rel_rms) {
    double worst = 0, ss = 0, dd = 0;
    size_t n = 0;
    for (int i = 0; i < rows; i++) {
        for (int v = 0; (!want || want[i]) && v < V; v++) {
            double d = fabs((double)a[(size_t)i * V + v] - (double)b[(size_t)i * V + v]);
            worst = d > worst || d != d ? d : worst;
            ss += (double)a[(size_t)i * V + v] * a[(size_t)i * V + v];
            dd += d * d;
            n++;
        }
    }
    double rms = sqrt(ss / (double)(n ? n : 1));
    if (rel_rms) {
        *rel_rms = sqrt(dd / (double)(n ? n : 1)) / rms;
    }
    return worst / rms;
}

#define S_STEP_MAX 0.15
#define S_STEP_RMS 0.03

// The draws on the device (rl_model_step_draw) against the host's pipeline on the device's own
// logits with the same uniforms. The device keeps the same tokens with the same probabilities
// (rl_sample_dist) but walks its inverse CDF in id order, where rl_sample_token walks the kept
// tokens from the most likely: the same distribution, another map from u to a token. So the
// expected token is the id-order draw over rl_sample_dist (greedy: rl_sample_token's argmax),
// and the logprob rl_sample_log_softmax's at that token within the kernel's double arithmetic
// against the host's float (4e-6 + 4e-7 |logp|). A step rewrites the same k and v at the same
// positions, so rl_model_step and rl_model_step_draw see one cache. Slots 0 and 2 hold the same
// sequence (a copy), slot 1 another; rows are drawn from repeatedly.
static void s_test_draws(rl_model_t *gpu, rl_kvcache_t *gc, int len0, int len1, int V) {
    CHECK(rl_model_on_gpu(gpu));
    const int32_t t[3] = {7, 11, 7};
    const int sl[3] = {0, 1, 2}, ps[3] = {len0, len1, len0};
    float *lg = malloc((size_t)3 * V * sizeof(float));
    float *lp = malloc((size_t)V * sizeof(float)), *pr = malloc((size_t)V * sizeof(float));
    float *dist = malloc((size_t)V * sizeof(float));
    int32_t *idx = malloc((size_t)V * sizeof(int32_t));
    CHECK(rl_model_step(gpu, gc, t, sl, ps, 3, NULL, lg) == 0);
    const rl_sample_opts_t opts[5] = {
        {0.0f, 0, 1.0f}, {1.0f, 0, 1.0f}, {0.7f, 5, 1.0f}, {1.2f, 0, 0.9f}, {1.0f, 3, 0.5f}};
    enum { ND = 9 };
    const int rows[ND] = {0, 1, 2, 1, 1, 0, 2, 2, 1};
    rl_rng_t rng;
    rl_rng_seed(&rng, 4242);
    int same = 0, n = 0, lbad = 0;
    for (int o = 0; o < 5; o++) {
        const float T = opts[o].temperature;
        for (int rep = 0; rep < 8; rep++) {
            double u[ND];
            int32_t tok[ND];
            float tlp[ND];
            for (int j = 0; j < ND; j++) {
                u[j] = rl_rng_uniform(&rng);
            }
            rl_model_draws_t d = {T, opts[o].top_k, opts[o].top_p, ND, rows, u, tok, tlp};
            int rc = rl_model_step_draw(gpu, gc, t, sl, ps, 3, &d);
            CHECK_MSG(rc == 0, "rl_model_step_draw: %s", rl_model_errmsg(gpu));
            for (int j = 0; rc == 0 && j < ND; j++) {
                const float *row = lg + (size_t)rows[j] * V;
                rl_sample_dist(dist, lp, pr, idx, row, V, &opts[o]);
                int32_t want = -1; // the id-order inverse CDF over the kept probabilities
                double W = 0.0, c = 0.0;
                for (int v = 0; v < V; v++) {
                    W += dist[v];
                }
                for (int v = 0; v < V && want < 0; v++) {
                    c += dist[v];
                    want = dist[v] > 0.0f && u[j] * W < c ? v : -1;
                }
                if (T == 0.0f) {
                    float unused;
                    want = rl_sample_token(lp, pr, idx, row, V, &opts[o], u[j], &unused);
                }
                rl_sample_log_softmax(lp, NULL, row, V, T > 0.0f ? T : 1.0f);
                same += tok[j] == want;
                lbad += tok[j] < 0 || tok[j] >= V ||
                        !(fabsf(tlp[j] - lp[tok[j]]) <= 4e-6f + 4e-7f * fabsf(lp[tok[j]]));
                n++;
            }
        }
    }
    printf("  %-34s %d of %d draws the expected token, %d logprobs off\n",
           "draws on the device (5 settings)", same, n, lbad);
    CHECK_MSG(same == n && lbad == 0, "device draws: %d of %d the expected token, %d logprobs off",
              same, n, lbad);
    // refusals: a draw outside the step's rows, uniforms missing at a temperature
    int32_t tok1;
    float lp1;
    const int bad_row = 3;
    rl_model_draws_t d = {1.0f, 0, 1.0f, 1, &bad_row, NULL, &tok1, &lp1};
    CHECK(rl_model_step_draw(gpu, gc, t, sl, ps, 3, &d) == RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(gpu), "outside the step");
    d.rows = rows;
    CHECK(rl_model_step_draw(gpu, gc, t, sl, ps, 3, &d) == RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(gpu), "need uniforms");
    free(lg);
    free(lp);
    free(pr);
    free(dist);
    free(idx);
}

// The sampler on a GPU model (its draws on the device) against the CPU model with the same
// weights, scoring the GPU's completions on the CPU (rl_model_forward): every logprob within 0.2
// of the CPU's (the training forward's logp is held to 32 rms(D), 0.28-0.4 for these models;
// measured at most 0.128, a token drawn at temperature 1, 0.085 with the fp32 attention); greedy,
// every token the CPU's argmax up to a near-tie (its logit within 0.1 of the best: these random
// models' logits are close together, and bf16 breaks some ties the other way), so most are the CPU
// sampler's tokens. (The device walks the kept set in id order, the CPU from the most likely: the
// same distribution, other tokens for the same uniform; s_test_draws checks the map itself.)
static void s_test_sampler(rl_model_t *cpu, rl_model_t *gpu, int V) {
    rl_sampler_t *sc = rl_sampler_new(cpu), *sg = rl_sampler_new(gpu);
    int32_t ids[3][6];
    rl_rng_t rng;
    rl_rng_seed(&rng, 7);
    rl_sampler_prompt_t pr[3];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 6; j++) {
            ids[i][j] = (int32_t)rl_rng_below(&rng, (uint64_t)V);
        }
        pr[i] = (rl_sampler_prompt_t){.ids = ids[i], .len = 3 + i, .index = (uint64_t)i};
    }
    for (int greedy = 1; greedy >= 0; greedy--) {
        rl_sampler_params_t p;
        rl_sampler_params_default(&p);
        p.n = greedy ? 1 : 3;
        p.max_new_tokens = 8;
        p.no_eos = 1;
        p.max_batch = 4; // fewer slots than sequences: admissions mid-run
        p.seed = 11;
        p.sample.temperature = greedy ? 0.0f : 1.0f;
        rl_sampler_result_t *rc_ = NULL, *rg = NULL;
        CHECK(rl_sampler_generate(sc, pr, 3, &p, &rc_) == 0);
        int rc = rl_sampler_generate(sg, pr, 3, &p, &rg);
        CHECK_MSG(rc == 0, "sampler on the GPU model: %s", rl_sampler_errmsg(sg));
        int same = 0, total = 0, lbad = 0, gbad = 0;
        double worst = 0.0;
        for (int k = 0; rc == 0 && k < 3 * p.n; k++) {
            CHECK(rg[k].n_ids == 8);
            const rl_sampler_prompt_t *q = &pr[rg[k].prompt];
            int32_t seq[16];
            float lp[16];
            int len = q->len + rg[k].n_ids;
            memcpy(seq, q->ids, (size_t)q->len * sizeof *seq);
            memcpy(seq + q->len, rg[k].ids, (size_t)rg[k].n_ids * sizeof *seq);
            CHECK(rl_model_forward(cpu, seq, &len, 1, len, 1.0f, 0, lp, NULL) == 0);
            float *lg = greedy ? rl_model_logits(cpu) : NULL;
            for (int j = 0; lg && j < rg[k].n_ids; j++) {
                const float *row = lg + (size_t)(q->len + j - 1) * V;
                float best = row[0];
                for (int v = 1; v < V; v++) {
                    best = row[v] > best ? row[v] : best;
                }
                gbad += !(best - row[rg[k].ids[j]] <= 0.1f);
            }
            free(lg);
            for (int j = 0; j < rg[k].n_ids; j++) {
                double d = fabs((double)rg[k].logprobs[j] - lp[q->len + j]);
                worst = d > worst ? d : worst;
                lbad += !(d <= S_SAMPLER_LOGP);
                same += rg[k].ids[j] == rc_[k].ids[j];
                total++;
            }
        }
        printf("  %-34s %d of %d tokens the CPU sampler's; logprobs vs the CPU's scoring: worst "
               "%.3g\n",
               greedy ? "sampler, greedy" : "sampler, temperature 1", same, total, worst);
        CHECK_MSG(lbad == 0 && gbad == 0 && (!greedy || 4 * same >= 3 * total),
                  "sampler on the GPU: %d of %d tokens the CPU's, %d logprobs off, %d greedy "
                  "tokens not the CPU's argmax",
                  same, total, lbad, gbad);
        rl_sampler_results_free(&rc_, 3 * p.n);
        rl_sampler_results_free(&rg, 3 * p.n);
    }
    rl_sampler_destroy(&sc);
    rl_sampler_destroy(&sg);
}

// CUDA graphs of decode steps: a GPU model with graphs (the default) and its twin without
// (RLCTL_CUDA_GRAPHS=0) take the same steps, logits compared bit for bit: a prefill, 5 decode
// steps of 2 rows (the second captures a graph, the others launch it), 3 of 1 row (another
// graph), then a forward of more tokens than the buffers hold (they move: the graphs captured
// before are stale) and 3 more of 2 rows (captured anew). The counts say how many of each.
// Emulated, a third model whose captures all fail (CUEMU_CAPTURE_FAIL around its steps, as a
// GPU may invalidate one) turns graphs off at its first and gives the same logits, queued.
static int s_bad_step(rl_model_t *m, rl_kvcache_t *c, const int32_t *t, const int *sl,
                      const int *ps, int n, float *out) {
    setenv("CUEMU_CAPTURE_FAIL", "1", 1);
    int rc = rl_model_step(m, c, t, sl, ps, n, NULL, out);
    unsetenv("CUEMU_CAPTURE_FAIL");
    return rc;
}

static void s_test_graphs(const rl_hf_config_t *cfg, const s_case_t *k, rl_model_t *cpu, int V) {
    rl_model_t *on = s_new(cfg, k, 1, 64), *bad = s_new(cfg, k, 1, 64);
    setenv("RLCTL_CUDA_GRAPHS", "0", 1);
    rl_model_t *off = s_new(cfg, k, 1, 64);
    unsetenv("RLCTL_CUDA_GRAPHS");
    s_copy_params(on, cpu);
    s_copy_params(off, cpu);
    s_copy_params(bad, cpu);
    rl_kvcache_t *con = rl_kvcache_new(on, 2, 40), *coff = rl_kvcache_new(off, 2, 40);
    rl_kvcache_t *cbad = rl_kvcache_new(bad, 2, 40);
    const int emu = rl_test_emulated();
    float *c = malloc((size_t)12 * V * sizeof(float));
    int bad_differ = 0;
    float *a = malloc((size_t)12 * V * sizeof(float)), *b = malloc((size_t)12 * V * sizeof(float));
    rl_rng_t rng;
    rl_rng_seed(&rng, 5);
    int32_t tok[12];
    int slots[12], pos[12], len[2] = {7, 5}, differ = 0, steps = 0;
    for (int i = 0; i < 12; i++) {
        tok[i] = (int32_t)rl_rng_below(&rng, (uint64_t)V);
        slots[i] = i < 7 ? 0 : 1;
        pos[i] = i < 7 ? i : i - 7;
    }
    CHECK(con && coff && cbad && rl_model_step(on, con, tok, slots, pos, 12, NULL, a) == 0 &&
          rl_model_step(off, coff, tok, slots, pos, 12, NULL, b) == 0);
    differ += !s_same_bits(a, b, (size_t)12 * V * sizeof(float));
    if (emu) {
        CHECK(s_bad_step(bad, cbad, tok, slots, pos, 12, c) == 0);
        bad_differ += !s_same_bits(c, b, (size_t)12 * V * sizeof(float));
    }
    static const int rows[] = {2, 2, 2, 2, 2, 1, 1, 1, 0, 2, 2, 2};
    for (size_t s = 0; s < sizeof rows / sizeof rows[0]; s++) {
        const int n = rows[s];
        if (n == 0) { // a forward of 70 tokens: more than the 64 rows the buffers hold
            int32_t ft[70];
            int fl = 70;
            float lp[70];
            for (int i = 0; i < 70; i++) {
                ft[i] = (int32_t)rl_rng_below(&rng, (uint64_t)V);
            }
            CHECK(rl_model_forward(on, ft, &fl, 1, 70, 1.0f, 0, lp, NULL) == 0);
            CHECK(rl_model_forward(off, ft, &fl, 1, 70, 1.0f, 0, lp, NULL) == 0);
            CHECK(!emu || rl_model_forward(bad, ft, &fl, 1, 70, 1.0f, 0, lp, NULL) == 0);
            continue;
        }
        int32_t t[2];
        int sl[2] = {0, 1}, ps[2];
        for (int i = 0; i < n; i++) {
            t[i] = (int32_t)rl_rng_below(&rng, (uint64_t)V);
            ps[i] = len[i]++;
        }
        CHECK(rl_model_step(on, con, t, sl, ps, n, NULL, a) == 0);
        CHECK(rl_model_step(off, coff, t, sl, ps, n, NULL, b) == 0);
        differ += !s_same_bits(a, b, (size_t)n * V * sizeof(float));
        if (emu) {
            CHECK(s_bad_step(bad, cbad, t, sl, ps, n, c) == 0);
            bad_differ += !s_same_bits(c, b, (size_t)n * V * sizeof(float));
        }
        steps++;
    }
    long long cap = 0, launched = 0, cap0 = 0, launched0 = 0;
    const char *why = rl_model_device_graphs(on, &cap, &launched);
    const char *why0 = rl_model_device_graphs(off, &cap0, &launched0);
    printf("  %-34s %d of %d steps' logits differ; graphs captured %lld, launched %lld (off: "
           "%lld, %lld: %s)\n",
           "CUDA graphs of decode steps", differ, steps + 1, cap, launched, cap0, launched0,
           why0 ? why0 : "on");
    CHECK_MSG(differ == 0, "%d steps differ with CUDA graphs", differ);
    CHECK_MSG(why == NULL && cap == 3 && launched == 8,
              "graphs: captured %lld (want 3: 2 rows, 1 row, 2 rows after the buffers moved), "
              "launched %lld (want 8); %s",
              cap, launched, why ? why : "on");
    CHECK_MSG(why0 && strstr(why0, "RLCTL_CUDA_GRAPHS=0") && cap0 == 0 && launched0 == 0,
              "the twin without graphs: %s, %lld, %lld", why0 ? why0 : "on", cap0, launched0);
    if (emu) {
        long long capb = 0, launchedb = 0;
        const char *whyb = rl_model_device_graphs(bad, &capb, &launchedb);
        printf("  %-34s %d of %d steps' logits differ from the queued ones; %s\n",
               "every capture failing", bad_differ, steps + 1, whyb ? whyb : "graphs on");
        CHECK_MSG(bad_differ == 0 && whyb && strstr(whyb, "a capture failed") && capb == 0 &&
                      launchedb == 0,
                  "captures failing: %d steps differ; %s; captured %lld, launched %lld", bad_differ,
                  whyb ? whyb : "graphs on", capb, launchedb);
    }
    rl_kvcache_destroy(&cbad);
    rl_model_destroy(&bad);
    free(c);
    free(a);
    free(b);
    rl_kvcache_destroy(&con);
    rl_kvcache_destroy(&coff);
    rl_model_destroy(&on);
    rl_model_destroy(&off);
}

static void s_test_step(const s_case_t *k) {
    rl_hf_config_t cfg = s_cfg(k->shape);
    const int V = cfg.vocab_size;
    printf("%s, %s: the cached step\n", k->shape->name,
           k->tune == RL_TUNE_LORA ? "LoRA" : "frozen");
    rl_model_t *cpu = s_new(&cfg, k, 0, 0);
    s_prepare(cpu, k);
    rl_model_t *gpu = s_new(&cfg, k, 1, 64);
    s_copy_params(gpu, cpu);
    rl_kvcache_t *cc = rl_kvcache_new(cpu, 3, 32), *gc = rl_kvcache_new(gpu, 3, 32);
    rl_kvcache_t *fresh = rl_kvcache_new(gpu, 1, 32);
    CHECK(cc && gc && fresh);
    float *a = malloc((size_t)16 * V * sizeof(float)), *b = malloc((size_t)16 * V * sizeof(float));
    // prefill: prompt 0 (7 tokens) in slot 0, prompt 1 (5) in slot 1, in one call
    int32_t tok[16];
    int slots[16], pos[16];
    unsigned char want[16] = {0};
    rl_rng_t rng;
    rl_rng_seed(&rng, 99);
    for (int i = 0; i < 12; i++) {
        tok[i] = (int32_t)rl_rng_below(&rng, (uint64_t)V);
        slots[i] = i < 7 ? 0 : 1;
        pos[i] = i < 7 ? i : i - 7;
    }
    want[6] = want[11] = 1;
    CHECK(rl_model_step(cpu, cc, tok, slots, pos, 12, want, a) == 0);
    int rc = rl_model_step(gpu, gc, tok, slots, pos, 12, want, b);
    CHECK_MSG(rc == 0, "device prefill: %s", rl_model_errmsg(gpu));
    double rr = 0, g = s_step_gap(a, b, 12, want, V, &rr);
    printf("  %-34s max |d| %.3g, rms %.3g of the logits' rms\n", "prefill logits (2 prompts)", g,
           rr);
    CHECK_MSG(g <= S_STEP_MAX && rr <= S_STEP_RMS, "prefill logits differ: %g, rms %g", g, rr);
    // the history of slot 0, for the decode = prefill check
    int32_t hist[32];
    memcpy(hist, tok, 7 * sizeof *hist);
    int len0 = 7, len1 = 5;
    // decode: one row per slot, four steps
    for (int s = 0; s < 4; s++) {
        int32_t t2[2] = {(int32_t)rl_rng_below(&rng, (uint64_t)V),
                         (int32_t)rl_rng_below(&rng, (uint64_t)V)};
        int sl[2] = {0, 1}, ps[2] = {len0, len1};
        CHECK(rl_model_step(cpu, cc, t2, sl, ps, 2, NULL, a) == 0);
        CHECK(rl_model_step(gpu, gc, t2, sl, ps, 2, NULL, b) == 0);
        g = s_step_gap(a, b, 2, NULL, V, &rr);
        printf("  %-34s max |d| %.3g, rms %.3g of the logits' rms\n",
               s == 0 ? "decode logits (2 slots), 4 steps" : "", g, rr);
        CHECK_MSG(g <= S_STEP_MAX && rr <= S_STEP_RMS, "decode step %d: logits differ: %g, rms %g",
                  s, g, rr);
        hist[len0] = t2[0];
        len0++;
        len1++;
    }
    // decode = prefill: the last decode row of slot 0 against a fresh prefill of its history
    int fs[32], fp[32];
    unsigned char fw[32] = {0};
    for (int i = 0; i < len0; i++) {
        fs[i] = 0;
        fp[i] = i;
    }
    fw[len0 - 1] = 1;
    float *c = malloc((size_t)32 * V * sizeof(float));
    CHECK(rl_model_step(gpu, fresh, hist, fs, fp, len0, fw, c) == 0);
    g = s_step_gap(b, c + (size_t)(len0 - 1) * V, 1, NULL, V, NULL);
    printf("  %-34s max |d| %.3g of the logits' rms\n", "decode vs a fresh prefill", g);
    CHECK_MSG(g <= 1e-4, "decode vs prefill on the device: %g", g);
    // a slot copy decodes as its source, to the bit
    rl_kvcache_copy(gc, 2, 0, len0);
    int32_t t3[2] = {5, 5};
    int sl3[2] = {0, 2}, ps3[2] = {len0, len0};
    CHECK(rl_model_step(gpu, gc, t3, sl3, ps3, 2, NULL, b) == 0);
    CHECK_MSG(s_same_bits(b, b + V, (size_t)V * sizeof(float)), "a copied slot decodes otherwise");
    s_test_draws(gpu, gc, len0, len1, V);
    // out of range: refused before the device sees it
    int bad_slot = 3;
    CHECK(rl_model_step(gpu, gc, t3, &bad_slot, ps3, 1, NULL, b) == RL_EINVAL);
    // rl_model_logits of a forward (two sequences, one padded): the CPU's, zeros at padding;
    // after a step the device's activations are the step's: refused
    int32_t ft[2 * 9];
    int lens[2] = {9, 6};
    for (int i = 0; i < 18; i++) {
        ft[i] = i % 9 < lens[i / 9] ? (int32_t)rl_rng_below(&rng, (uint64_t)V) : 0;
    }
    float lp[18];
    CHECK(rl_model_forward(cpu, ft, lens, 2, 9, 1.0f, 0, lp, NULL) == 0);
    CHECK(rl_model_forward(gpu, ft, lens, 2, 9, 1.0f, 0, lp, NULL) == 0);
    float *la = rl_model_logits(cpu), *lb = rl_model_logits(gpu);
    CHECK_MSG(la && lb, "rl_model_logits: %s", rl_model_errmsg(gpu));
    if (la && lb) {
        unsigned char real[18];
        int pad_zero = 1;
        for (int i = 0; i < 18; i++) {
            real[i] = i % 9 < lens[i / 9];
            for (int v = 0; !real[i] && v < V; v++) {
                pad_zero &= lb[(size_t)i * V + v] == 0.0f;
            }
        }
        g = s_step_gap(la, lb, 18, real, V, &rr);
        printf("  %-34s max |d| %.3g, rms %.3g of the logits' rms\n", "rl_model_logits (forward)",
               g, rr);
        CHECK_MSG(g <= S_STEP_MAX && rr <= S_STEP_RMS && pad_zero,
                  "rl_model_logits: %g, rms %g, padding zeros %d", g, rr, pad_zero);
    }
    free(la);
    free(lb);
    CHECK(rl_model_step(gpu, gc, t3, sl3, ps3, 1, NULL, b) == 0);
    lb = rl_model_logits(gpu);
    CHECK_MSG(lb == NULL && strstr(rl_model_errmsg(gpu), "no forward"), "logits after a step: %s",
              rl_model_errmsg(gpu));
    free(lb);
    free(a);
    free(b);
    free(c);
    rl_kvcache_destroy(&fresh);
    rl_kvcache_destroy(&gc);
    rl_kvcache_destroy(&cc);
    s_test_sampler(cpu, gpu, V);
    s_test_graphs(&cfg, k, cpu, V);
    rl_model_destroy(&gpu);
    rl_model_destroy(&cpu);
}

// ---------------------------------------------------------------------------------------------
// the trainable weights to another process through CUDA IPC (rl_model_device_ipc_*): a child
// process (this program again, --ipc-child) holds a twin model whose trainable parameters start
// elsewhere, loads the parent's device array through its handle, and writes what it then holds
// (the trainable parameters pulled to its host, and the logp of a forward) for the parent to
// compare with its own, bit for bit; twice, the parent's weights updated on the device between
// (the same handle, the new values). Refusals: the parent's own handle, a twin laid out
// otherwise (another LoRA rank), a damaged handle, a CPU model.

static const s_case_t S_IPC_CASES[] = {
    {&S_QWEN2, RL_TUNE_LORA, RL_LORA_ALL, 16, 0.0f, 0, 1.0f, 0},
    {&S_LLAMA, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0},
};

static void s_hex(const unsigned char *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) {
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    }
}

static int s_unhex(const char *h, unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        b[i] = (unsigned char)v;
    }
    return 0;
}

// The child: argv = --ipc-child <case> <lora r> <dir> <infer|train>. Reads lines "load <handle
// hex> <layout hex> <n>" on stdin; answers "ok" (and writes <dir>/child.bin: its trainable
// parameters, then the logp of the batch) or "err <code> <message>" on stdout; "quit" ends it.
// infer: a model that only infers (a sampler: full tuning's keeps no masters, nothing to pull):
// its host's parameters written as they were.
static int s_ipc_child(char **argv) {
    FILE *ans = fdopen(dup(1), "w"); // the answers; everything else printed goes to stderr
    RL_ASSERT(ans && dup2(2, 1) == 1);
    rl_test_cuda_open("model.cuda_model (IPC child)");
    s_case_t k = S_IPC_CASES[atoi(argv[2])];
    k.r = atoi(argv[3]);
    const int infer = strcmp(argv[5], "infer") == 0;
    const int T = rl_test_emulated() ? 24 : 96;
    rl_hf_config_t cfg = s_cfg(k.shape);
    s_infer = infer;
    rl_model_t *m = s_new(&cfg, &k, 1, S_B * T);
    s_prepare(m, &k);
    size_t n;
    float *t = rl_model_trainable(m, &n);
    for (size_t j = 0; j < n; j++) { // not the parent's: a load must replace them all
        t[j] = 0.5f * t[j] + 0.25f;
    }
    RL_ASSERT(rl_model_device_push(m, 1) == 0);
    s_batch_t b = s_batch(T, cfg.vocab_size, cfg.hidden_size);
    float *lp = malloc((size_t)S_B * T * sizeof *lp);
    char line[512], hex[2 * RL_MODEL_IPC_HANDLE + 1];
    while (fgets(line, sizeof line, stdin)) {
        unsigned long long layout;
        long long nn;
        unsigned char h[RL_MODEL_IPC_HANDLE];
        if (strncmp(line, "quit", 4) == 0) {
            break;
        }
        if (sscanf(line, "load %128s %llx %lld", hex, &layout, &nn) != 3 ||
            s_unhex(hex, h, sizeof h) != 0) {
            fprintf(ans, "err -1 bad command\n");
            fflush(ans);
            continue;
        }
        int rc = rl_model_device_ipc_load(m, h, (uint64_t)layout, nn);
        rc = rc || infer ? rc : rl_model_device_pull(m, 0);
        rc = rc ? rc : rl_model_forward(m, b.tok, b.len, S_B, T, k.temperature, 0, lp, NULL);
        if (rc) {
            fprintf(ans, "err %d %s\n", rc, rl_model_errmsg(m));
        } else {
            char path[600];
            snprintf(path, sizeof path, "%s/child.bin", argv[4]);
            FILE *f = fopen(path, "wb");
            RL_ASSERT(f && fwrite(t, sizeof *t, n, f) == n &&
                      fwrite(lp, sizeof *lp, (size_t)S_B * T, f) == (size_t)S_B * T &&
                      fclose(f) == 0);
            fprintf(ans, "ok\n");
        }
        fflush(ans);
    }
    free(lp);
    s_batch_free(&b);
    rl_model_destroy(&m);
    rl_test_cuda_close();
    fclose(ans);
    return 0;
}

typedef struct {
    pid_t pid;
    FILE *to, *from;
} s_child_t;

static s_child_t s_spawn_child(int which, int r, const char *dir, int infer) {
    int in[2], out[2];
    RL_ASSERT(pipe(in) == 0 && pipe(out) == 0);
    fflush(stdout);
    s_child_t c;
    c.pid = fork();
    RL_ASSERT(c.pid >= 0);
    if (c.pid == 0) { // exec at once: a forked child must not use its parent's CUDA context
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        char a[16], b[16];
        snprintf(a, sizeof a, "%d", which);
        snprintf(b, sizeof b, "%d", r);
        execl("/proc/self/exe", "test_model_cuda_model", "--ipc-child", a, b, dir,
              infer ? "infer" : "train", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c.to = fdopen(in[1], "w");
    c.from = fdopen(out[0], "r");
    RL_ASSERT(c.to && c.from);
    return c;
}

// Sends a load of (h, layout, n); returns the child's answer line.
static void s_child_load(s_child_t *c, const unsigned char *h, uint64_t layout, int64_t n,
                         char *answer, size_t cap) {
    char hex[2 * RL_MODEL_IPC_HANDLE + 1];
    s_hex(h, RL_MODEL_IPC_HANDLE, hex);
    fprintf(c->to, "load %s %llx %lld\n", hex, (unsigned long long)layout, (long long)n);
    fflush(c->to);
    if (!fgets(answer, (int)cap, c->from)) {
        snprintf(answer, cap, "(no answer: the child died)");
    }
    answer[strcspn(answer, "\n")] = 0;
}

static void s_child_end(s_child_t *c) {
    fprintf(c->to, "quit\n");
    fclose(c->to);
    fclose(c->from);
    int st = 0;
    waitpid(c->pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the IPC child ended with status %d", st);
}

// One AdamW step of m on the device (its host arrays left as they were).
static void s_device_step(rl_model_t *m, const s_batch_t *b, float temp, int64_t step) {
    float *lp = malloc((size_t)S_B * b->T * sizeof *lp);
    rl_model_zero_grad(m);
    int rc = rl_model_forward(m, b->tok, b->len, S_B, b->T, temp, 1, lp, NULL);
    rc = rc ? rc : rl_model_backward(m, b->dlogp);
    rc = rc ? rc : rl_model_device_adamw(m, 1e-2, 0.9, 0.95, 1e-8, 0.1, step);
    CHECK_MSG(rc == 0, "device step: %s", rl_model_errmsg(m));
    free(lp);
}

static void s_test_ipc(int which, int T) {
    const s_case_t *k = &S_IPC_CASES[which];
    rl_hf_config_t cfg = s_cfg(k->shape);
    printf("%s, tune %s: the trainable weights to another process through CUDA IPC\n",
           k->shape->name, k->tune == RL_TUNE_FULL ? "FULL" : "LORA");
    rl_model_t *m = s_new(&cfg, k, 1, S_B * T);
    s_prepare(m, k);
    RL_ASSERT(rl_model_device_push(m, 1) == 0);
    s_batch_t b = s_batch(T, cfg.vocab_size, cfg.hidden_size);
    char dir[] = "/tmp/rl_cuda_ipc_XXXXXX", path[64], answer[1024];
    RL_ASSERT(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/child.bin", dir);
    size_t n;
    float *t = rl_model_trainable(m, &n);
    float *lp = malloc((size_t)S_B * T * sizeof *lp);
    unsigned char h[RL_MODEL_IPC_HANDLE], h0[RL_MODEL_IPC_HANDLE];
    uint64_t layout = 0;
    int64_t nd = 0;
    s_child_t c = s_spawn_child(which, k->r, dir, 0);
    for (int round = 1; round <= 2; round++) {
        s_device_step(m, &b, k->temperature, round); // the device's weights move on, not the host's
        CHECK_MSG(rl_model_device_ipc_export(m, h, &layout, &nd) == 0, "export: %s",
                  rl_model_errmsg(m));
        CHECK(nd >= (int64_t)n);
        if (round == 1) {
            memcpy(h0, h, sizeof h);
        } else {
            CHECK_MSG(memcmp(h, h0, sizeof h) == 0, "the handle changed between exports");
        }
        s_child_load(&c, h, layout, nd, answer, sizeof answer);
        CHECK_MSG(strcmp(answer, "ok") == 0, "round %d: the child: %s", round, answer);
        CHECK(rl_model_device_pull(m, 0) == 0 &&
              rl_model_forward(m, b.tok, b.len, S_B, T, k->temperature, 0, lp, NULL) == 0);
        size_t bytes = 0;
        char *got = rl_test_read_file(path, &bytes);
        int same_t = got && bytes == (n + (size_t)S_B * T) * sizeof(float) &&
                     s_same_bits(got, t, n * sizeof *t);
        int same_lp = same_t && s_same_bits(got + n * sizeof *t, lp, (size_t)S_B * T * sizeof *lp);
        printf("  round %d: %lld floats (layout %016llx): the child's trainable parameters %s, its "
               "logp %s\n",
               round, (long long)nd, (unsigned long long)layout, same_t ? "equal" : "DIFFER",
               same_lp ? "equal" : "DIFFER");
        CHECK(same_t && same_lp);
        free(got);
    }
    if (k->tune == RL_TUNE_FULL) { // a sampler's model (no masters): the same logp, to the bit
        s_child_t ci = s_spawn_child(which, k->r, dir, 1);
        s_child_load(&ci, h, layout, nd, answer, sizeof answer);
        size_t bytes = 0;
        char *got = rl_test_read_file(path, &bytes);
        int same = !strcmp(answer, "ok") && got && bytes == (n + (size_t)S_B * T) * sizeof(float) &&
                   s_same_bits(got + n * sizeof *t, lp, (size_t)S_B * T * sizeof *lp);
        printf("  a model that only infers (no fp32 masters): %s, its logp %s\n", answer,
               same ? "equal" : "DIFFER");
        CHECK(same);
        free(got);
        s_child_end(&ci);
    }
    // a damaged handle (another process's id): refused, the child goes on
    unsigned char bad[RL_MODEL_IPC_HANDLE];
    memcpy(bad, h, sizeof bad);
    for (size_t i = 8; i < 16; i++) {
        bad[i] ^= 0x5a;
    }
    s_child_load(&c, bad, layout, nd, answer, sizeof answer);
    printf("  a damaged handle: %s\n", answer);
    CHECK_MSG(strncmp(answer, "err ", 4) == 0, "a damaged handle was taken: %s", answer);
    s_child_end(&c);
    // the exporter's own handle
    int rc = rl_model_device_ipc_load(m, h, layout, nd);
    printf("  its own handle: %d %s\n", rc, rc ? rl_model_errmsg(m) : "");
    CHECK(rc == RL_EIO);
    if (k->tune == RL_TUNE_LORA) { // a twin of rank r/2 is laid out otherwise
        s_child_t c2 = s_spawn_child(which, k->r / 2, dir, 0);
        s_child_load(&c2, h, layout, nd, answer, sizeof answer);
        printf("  a LoRA rank %d twin: %s\n", k->r / 2, answer);
        char want[32];
        snprintf(want, sizeof want, "err %d ", RL_EINVAL);
        CHECK(strncmp(answer, want, strlen(want)) == 0);
        CHECK_CONTAINS(answer, "laid out otherwise");
        s_child_end(&c2);
    }
    rl_model_t *cpu = s_new(&cfg, k, 0, 0);
    CHECK(rl_model_device_ipc_export(cpu, h, &layout, &nd) == RL_EINVAL &&
          rl_model_device_ipc_load(cpu, h, layout, nd) == RL_EINVAL);
    rl_model_destroy(&cpu);
    unlink(path);
    rmdir(dir);
    free(lp);
    s_batch_free(&b);
    rl_model_destroy(&m);
}

// ---------------------------------------------------------------------------------------------
// a mesh's optimizer on the devices over an NCCL group (rl_model_opts_t.device_comm_id; ZeRO-2:
// a unit's gradients summed over the ranks after its backward, each rank keeping its part): two
// processes (this program again, --group-child), ranks 0 and 1 on cuda:0 and cuda:1, each with
// its own micro-batch (rank 1's dlogp is rank 0's times -0.5), against one model here that runs
// both micro-batches (its backward sums them): after 3 steps (clipped, not, no clip) the norms,
// parameters and moments within float rounding of the sum's order, the two ranks equal to the
// bit; the moments' download and upload through the group (a checkpoint)

// The third case: tied embeddings (their unit's gradients written at the backward's start and
// end), and rank 0 with two micro-batches (scales 1, 0.25) while rank 1 has one (-0.5) and then
// idles (rl_model_units_idle: its units' sums of zeros with rank 0's second backward).
static const s_case_t S_GROUP_CASES[] = {
    {&S_LLAMA, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V, 8, 0.0f, 0, 1.0f, 0},
    {&S_QWEN3, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0},
    {&S_LLAMA_T, RL_TUNE_FULL, 0, 8, 0.0f, 1, 1.0f, 0},
    // the two full-tuning cases again with the masters sharded (ZeRO-3 of the masters:
    // device_shard_masters; the embedding and the head keep whole bf16 copies), both uneven (the
    // untied head's unit idles too): the same numbers, the parameters pulled through the group
    {&S_QWEN3, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0},
    {&S_LLAMA_T, RL_TUNE_FULL, 0, 8, 0.0f, 1, 1.0f, 0},
};
#define S_GROUP_UNEVEN(which) ((which) >= 2)
#define S_GROUP_MASTERS(which) ((which) >= 3)
static const double S_GROUP_CLIP[3] = {1e-3, 1e9, 0.0};

// What a model s_new made (case k, `rows` tokens, the groups of s_comm_* and s_shard_*) holds
// on its device is what a plan for it says, to the byte.
static void s_check_plan(rl_model_t *m, const s_case_t *k, int rows) {
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.tune = k->tune;
    o.lora_r = k->r;
    o.lora_targets = k->targets;
    o.lora_dropout = k->dropout;
    o.recompute = k->recompute;
    o.device_host_optim = s_host_optim;
    o.device_comm_ranks = s_comm_ranks;
    o.device_shard_ranks = s_shard_ranks;
    o.device_shard_masters = s_shard_masters;
    rl_model_device_plan_t plan;
    char err[512];
    int rc = rl_model_device_plan(rl_model_config(m), &o, 1, rows, &plan, err, sizeof err);
    CHECK_MSG(rc == 0, "plan: %s", err);
    size_t planned = plan.weights + plan.trainable + plan.grads + plan.optim + plan.acts;
    CHECK_MSG(planned == rl_model_device_bytes(m), "planned %zu bytes, holds %zu", planned,
              rl_model_device_bytes(m));
}

// Three steps of m on micro-batches b scaled by scales[0..n) (rank r of a group: its own); then
// the norms, parameters, m and v into out (3 doubles, then 3n floats).
static void s_group_steps(rl_model_t *m, const s_batch_t *b, const float *scales, int nb, int idle,
                          double *norms, float *out) {
    size_t n;
    const float *p = rl_model_trainable(m, &n);
    size_t tn = (size_t)S_B * b->T;
    float *lp = malloc(tn * sizeof *lp), *d = malloc(tn * sizeof *d);
    for (int step = 1; step <= 3; step++) {
        rl_model_zero_grad(m);
        int rc = 0;
        for (int i = 0; !rc && i < nb; i++) {
            for (size_t j = 0; j < tn; j++) {
                d[j] = b->dlogp[j] * scales[i];
            }
            rc = rl_model_forward(m, b->tok, b->len, S_B, b->T, 1.0f, 1, lp, NULL);
            rc = rc ? rc : rl_model_backward(m, d);
        }
        for (int i = 0; !rc && i < idle; i++) {
            rc = rl_model_units_idle(m, 1);
        }
        rc = rc ? rc : rl_model_device_clip(m, S_GROUP_CLIP[step - 1], &norms[step - 1]);
        rc = rc ? rc : rl_model_device_adamw(m, 1e-3, 0.9, 0.95, 1e-8, 0.1, step);
        CHECK_MSG(rc == 0, "step %d: %s", step, rl_model_errmsg(m));
    }
    int rc = rl_model_device_pull(m, 0);
    rc = rc ? rc : rl_model_device_optim_state(m, out + n, out + 2 * n, 0);
    CHECK_MSG(rc == 0, "%s", rl_model_errmsg(m));
    memcpy(out, p, n * sizeof *p);
    free(lp);
    free(d);
}

// The child: argv = --group-child <case> <rank> <id hex> <dir>: its steps into <dir>/rank<r>.bin,
// then the moments up and down again (equal to the bit, else it fails).
static int s_group_child(char **argv) {
    rl_test_cuda_open("model.cuda_model (group child)");
    const s_case_t *k = &S_GROUP_CASES[atoi(argv[2])];
    unsigned char id[RL_DEVICE_COMM_ID];
    RL_ASSERT(strlen(argv[4]) == 2 * sizeof id && s_unhex(argv[4], id, sizeof id) == 0);
    s_comm_id = id;
    s_comm_ranks = 2;
    s_comm_rank = s_index = atoi(argv[3]);
    s_shard_masters = S_GROUP_MASTERS(atoi(argv[2]));
    const int T = rl_test_emulated() ? 24 : 96;
    rl_hf_config_t cfg = s_cfg(k->shape);
    rl_model_t *m = s_new(&cfg, k, 1, S_B * T);
    s_check_plan(m, k, S_B * T);
    if (s_shard_masters) { // no whole array to share; no sampling (a step would gather alone)
        unsigned char h[RL_MODEL_IPC_HANDLE];
        uint64_t lay;
        int64_t nn;
        CHECK(rl_model_device_ipc_export(m, h, &lay, &nn) == RL_EINVAL);
        rl_kvcache_t *kv = rl_kvcache_new(m, 1, 8);
        CHECK_MSG(!kv, "a model whose masters are sharded made a KV cache");
        rl_kvcache_destroy(&kv);
    }
    s_batch_t b = s_batch(T, cfg.vocab_size, cfg.hidden_size);
    size_t n;
    rl_model_trainable(m, &n);
    const int uneven = S_GROUP_UNEVEN(atoi(argv[2]));
    const float scales[2] = {s_comm_rank ? -0.5f : 1.0f, 0.25f};
    float *out = malloc(3 * n * sizeof *out);
    double norms[3];
    s_group_steps(m, &b, scales, uneven && s_comm_rank == 0 ? 2 : 1,
                  uneven && s_comm_rank == 1 ? 1 : 0, norms, out);
    char path[700];
    snprintf(path, sizeof path, "%s/rank%d.bin", argv[5], s_comm_rank);
    FILE *f = fopen(path, "wb");
    RL_ASSERT(f && fwrite(norms, sizeof *norms, 3, f) == 3 &&
              fwrite(out, sizeof *out, 3 * n, f) == 3 * n && fclose(f) == 0);
    float *m2 = malloc(2 * n * sizeof *m2);
    for (size_t i = 0; i < n; i++) {
        out[n + i] = (float)i * 1e-3f;
        out[2 * n + i] = (float)(n - i) * 1e-6f;
    }
    int rc = rl_model_device_optim_state(m, out + n, out + 2 * n, 1);
    rc = rc ? rc : rl_model_device_optim_state(m, m2, m2 + n, 0);
    CHECK_MSG(rc == 0, "%s", rl_model_errmsg(m));
    CHECK_MSG(s_same_bits(m2, out + n, 2 * n * sizeof *m2),
              "rank %d: the moments uploaded and downloaded again differ", s_comm_rank);
    // a checkpoint written by rank 0 alone: rank 1 takes part in the gathers with no host copy
    memset(m2, 0, 2 * n * sizeof *m2);
    rc = rl_model_device_optim_state(m, s_comm_rank ? NULL : m2, s_comm_rank ? NULL : m2 + n, 0);
    CHECK_MSG(rc == 0, "%s", rl_model_errmsg(m));
    CHECK_MSG(s_comm_rank || s_same_bits(m2, out + n, 2 * n * sizeof *m2),
              "rank 0's moments, downloaded while rank 1 kept none, differ");
    CHECK(rl_model_device_optim_state(m, NULL, NULL, 1) == RL_EINVAL); // nothing to upload
    free(m2);
    free(out);
    s_batch_free(&b);
    rl_model_destroy(&m);
    rl_test_cuda_close();
    RL_TEST_DONE();
}

// This program again as `flag` (--group-child, --shard-child) for case `which`, rank `rank`.
static pid_t s_spawn_rank(const char *flag, int which, int rank, const char *idhex,
                          const char *dir) {
    fflush(stdout);
    pid_t pid = fork();
    RL_ASSERT(pid >= 0);
    if (pid == 0) { // exec at once, as s_spawn_child
        char a[16], b[16];
        snprintf(a, sizeof a, "%d", which);
        snprintf(b, sizeof b, "%d", rank);
        execl("/proc/self/exe", "test_model_cuda_model", flag, a, b, idhex, dir, (char *)NULL);
        _exit(127);
    }
    return pid;
}

// max |a - b| / max(max |b|, tiny) over n
static double s_rel_gap(const float *a, const float *b, size_t n) {
    double gap = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        gap = fmax(gap, fabs((double)a[i] - (double)b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return gap / scale;
}

static void s_test_group(int which, int T) {
    const s_case_t *k = &S_GROUP_CASES[which];
    printf("%s, tune %s: the optimizer over an NCCL group of 2 ranks (ZeRO-2 on the devices%s%s)\n",
           k->shape->name, k->tune == RL_TUNE_FULL ? "FULL" : "LORA",
           S_GROUP_MASTERS(which) ? ", the masters sharded" : "",
           S_GROUP_UNEVEN(which) ? "; rank 1 idles once" : "");
    unsigned char id[RL_DEVICE_COMM_ID];
    char err[2048], idhex[2 * RL_DEVICE_COMM_ID + 1];
    rl_device_t d1 = {1, 1};
    int rc = 0;
    if (rl_test_emulated()) { // the ranks' emulation: two devices (this process keeps one)
        setenv("CUEMU_DEVICES", "2", 0);
    } else {
        rc = rl_device_check(&d1, 0, NULL, err, sizeof err);
    }
    rc = rc ? rc : rl_device_comm_id(id, err, sizeof err);
    if (rc && !rl_test_emulated()) { // a GPU machine with one GPU, or without NCCL
        printf("  skipped: %s\n", err);
        return;
    }
    CHECK_MSG(rc == 0,
              "the emulation has 2 devices and NCCL (CUEMU_DEVICES, "
              "RLCTL_NCCL_LIBRARY): %s",
              err);
    if (rc) {
        return;
    }
    s_hex(id, sizeof id, idhex);
    char dir[] = "/tmp/rl_cuda_group_XXXXXX", path[64];
    RL_ASSERT(mkdtemp(dir));
    pid_t kids[2] = {s_spawn_rank("--group-child", which, 0, idhex, dir),
                     s_spawn_rank("--group-child", which, 1, idhex, dir)};
    // the reference: one model, both micro-batches
    rl_hf_config_t cfg = s_cfg(k->shape);
    rl_model_t *m = s_new(&cfg, k, 1, S_B * T);
    s_batch_t b = s_batch(T, cfg.vocab_size, cfg.hidden_size);
    size_t n;
    rl_model_trainable(m, &n);
    float *want = malloc(3 * n * sizeof *want), *got[2];
    const float scales[3] = {1.0f, -0.5f, 0.25f};
    double wn[3], gn[2][3];
    s_group_steps(m, &b, scales, S_GROUP_UNEVEN(which) ? 3 : 2, 0, wn, want);
    int ok = 1;
    for (int r = 0; r < 2; r++) {
        int st = 0;
        waitpid(kids[r], &st, 0);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d ended with status %d", r, st);
        got[r] = calloc(3 * n, sizeof *got[r]);
        snprintf(path, sizeof path, "%s/rank%d.bin", dir, r);
        FILE *f = fopen(path, "rb");
        ok = ok && f && fread(gn[r], sizeof(double), 3, f) == 3 &&
             fread(got[r], sizeof(float), 3 * n, f) == 3 * n;
        if (f) {
            fclose(f);
            unlink(path);
        }
    }
    rmdir(dir);
    CHECK_MSG(ok, "the ranks' results could not be read");
    if (ok) {
        for (int s = 0; s < 3; s++) {
            printf("  step %d: norm %.9g (one model %.9g)\n", s + 1, gn[0][s], wn[s]);
            CHECK(gn[0][s] == gn[1][s] && fabs(gn[0][s] - wn[s]) <= 1e-5 * wn[s]);
        }
        const char *what[3] = {"parameters", "m", "v"};
        for (int j = 0; j < 3; j++) {
            double gap = s_rel_gap(got[0] + j * n, want + j * n, n);
            int same = s_same_bits(got[0] + j * n, got[1] + j * n, n * sizeof(float));
            printf("  %s: ranks %s, %.3g of the largest from one model's\n", what[j],
                   same ? "equal" : "DIFFER", gap);
            CHECK(same && gap <= 1e-5);
        }
    }
    free(got[0]);
    free(got[1]);
    free(want);
    s_batch_free(&b);
    rl_model_destroy(&m);
}

// ---------------------------------------------------------------------------------------------
// ZeRO-3 of the frozen layers (rl_model_opts_t.device_shard_id): three processes (this program
// again, --shard-child), ranks 0..2 on cuda:0..2, each holding a third of every layer (uneven:
// the layers' blocks do not split evenly, tensors straddle the shards), each on its own batch;
// against one unsharded model here doing each rank's work in turn: the same bits (a gathered
// layer is the whole model's layer, byte for byte). The ranks' sequence: a training forward and
// backward; ranks 0 and 1 a second one while rank 2 idles (rl_model_units_idle: its gathers
// only; a rank out of step would wait for its peers until CUEMU_NCCL_TIMEOUT); a scoring
// forward. Per rank: logp and entropy of both forwards, the gradients after each backward.

static const s_case_t S_SHARD_CASES[] = {
    {&S_QWEN2, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V, 8, 0.1f, 0, 1.0f, 0}, // 3 layers: an idle
    {&S_QWEN3, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_K | RL_LORA_O | RL_LORA_DOWN, 8, 0.0f, 1, 1.0f,
     0}, // missing a gather is seen
    {&S_LLAMA, RL_TUNE_NONE, 0, 8, 0.0f, 0, 1.0f, 0},
};
#define S_SHARDS 3

// Rank r's work on m (sharded or not; idle: rank 2's idle micro-batch is run by the sharded
// rank only, the unsharded model skips it) into out: logp, entropy (B*T each, twice), then the
// gradients (n floats, twice; trains only). Returns the floats written.
static size_t s_shard_work(rl_model_t *m, const s_case_t *k, int r, int sharded, float *out) {
    const rl_hf_config_t *cfg = rl_model_config(m);
    const int T = (rl_test_emulated() ? 24 : 96) - 3 * r; // each rank its own batch
    s_batch_t b = s_batch(T, cfg->vocab_size, cfg->hidden_size);
    const size_t BT = (size_t)S_B * T;
    const int trains = k->tune != RL_TUNE_NONE;
    size_t n = 0, at = 0;
    const float *g = trains ? rl_model_trainable_grads(m) : NULL;
    if (trains) {
        rl_model_trainable(m, &n);
    }
    int rc = rl_model_forward(m, b.tok, b.len, S_B, T, 1.0f, trains, out, out + BT);
    at += 2 * BT;
    if (trains) {
        rc = rc ? rc : rl_model_backward(m, b.dlogp);
        rc = rc ? rc : rl_model_device_pull(m, 1);
        if (!rc) {
            memcpy(out + at, g, n * sizeof *g);
        }
        at += n;
        if (r < 2) { // a second micro-batch: its gradients add to the first's
            rc = rc ? rc : rl_model_forward(m, b.tok, b.len, S_B, T, 1.0f, 1, NULL, NULL);
            rc = rc ? rc : rl_model_backward(m, b.dlogp);
        } else if (sharded) {
            rc = rc ? rc : rl_model_units_idle(m, 1);
        }
        rc = rc ? rc : rl_model_device_pull(m, 1);
        if (!rc) {
            memcpy(out + at, g, n * sizeof *g);
        }
        at += n;
    }
    rc = rc ? rc : rl_model_forward(m, b.tok, b.len, S_B, T, 1.0f, 0, out + at, out + at + BT);
    at += 2 * BT;
    CHECK_MSG(rc == 0, "rank %d (%s): %s", r, sharded ? "sharded" : "whole", rl_model_errmsg(m));
    s_batch_free(&b);
    return at;
}

// Floats s_shard_work writes at most for case k.
static size_t s_shard_floats(const s_case_t *k) {
    rl_hf_config_t cfg = s_cfg(k->shape);
    rl_model_t *m = s_new(&cfg, k, 0, 0);
    size_t n = 0;
    if (k->tune != RL_TUNE_NONE) {
        rl_model_trainable(m, &n);
    }
    rl_model_destroy(&m);
    return 4 * (size_t)S_B * 96 + 2 * n;
}

// The child: argv = --shard-child <case> <rank> <id hex> <dir>: its work into <dir>/rank<r>.bin.
static int s_shard_child(char **argv) {
    rl_test_cuda_open("model.cuda_model (shard child)");
    const s_case_t *k = &S_SHARD_CASES[atoi(argv[2])];
    unsigned char id[RL_DEVICE_COMM_ID];
    RL_ASSERT(strlen(argv[4]) == 2 * sizeof id && s_unhex(argv[4], id, sizeof id) == 0);
    s_shard_id = id;
    s_shard_ranks = S_SHARDS;
    s_shard_rank = s_index = atoi(argv[3]);
    rl_hf_config_t cfg = s_cfg(k->shape);
    rl_model_t *m = s_new(&cfg, k, 1, S_B * 96);
    s_prepare(m, k);
    CHECK_MSG(rl_model_device_push(m, 1) == 0, "push: %s", rl_model_errmsg(m));
    CHECK(rl_model_device_shard_ranks(m) == S_SHARDS);
    s_check_plan(m, k, S_B * 96);
    rl_kvcache_t *kv = rl_kvcache_new(m, 2, 16);
    CHECK_MSG(!kv, "a sharded model made a KV cache");
    float *out = calloc(s_shard_floats(k), sizeof *out);
    size_t n = s_shard_work(m, k, s_shard_rank, 1, out);
    char path[700];
    snprintf(path, sizeof path, "%s/rank%d.bin", argv[5], s_shard_rank);
    FILE *f = fopen(path, "wb");
    RL_ASSERT(f && fwrite(out, sizeof *out, n, f) == n && fclose(f) == 0);
    free(out);
    rl_model_destroy(&m);
    rl_test_cuda_close();
    RL_TEST_DONE();
}

static void s_test_shard(int which) {
    const s_case_t *k = &S_SHARD_CASES[which];
    printf("%s, tune %s%s: the frozen layers sharded over %d ranks (ZeRO-3 on the devices)\n",
           k->shape->name, k->tune == RL_TUNE_NONE ? "NONE" : "LORA",
           k->recompute ? ", recompute" : "", S_SHARDS);
    unsigned char id[RL_DEVICE_COMM_ID];
    char err[2048], idhex[2 * RL_DEVICE_COMM_ID + 1];
    rl_device_t d2 = {1, S_SHARDS - 1};
    int rc = 0;
    if (rl_test_emulated()) {
        setenv("CUEMU_DEVICES", "3", 1);
    } else {
        rc = rl_device_check(&d2, 0, NULL, err, sizeof err);
    }
    rc = rc ? rc : rl_device_comm_id(id, err, sizeof err);
    if (rc && !rl_test_emulated()) { // a GPU machine with fewer GPUs, or without NCCL
        printf("  skipped: %s\n", err);
        return;
    }
    CHECK_MSG(rc == 0, "the emulation has 3 devices and NCCL: %s", err);
    if (rc) {
        return;
    }
    s_hex(id, sizeof id, idhex);
    char dir[] = "/tmp/rl_cuda_shard_XXXXXX", path[64];
    RL_ASSERT(mkdtemp(dir));
    pid_t kids[S_SHARDS];
    for (int r = 0; r < S_SHARDS; r++) {
        kids[r] = s_spawn_rank("--shard-child", which, r, idhex, dir);
    }
    rl_hf_config_t cfg = s_cfg(k->shape);
    size_t cap = s_shard_floats(k);
    float *want = calloc(cap, sizeof *want), *got = calloc(cap, sizeof *got);
    for (int r = 0; r < S_SHARDS; r++) {
        rl_model_t *m = s_new(&cfg, k, 1, S_B * 96); // whole, on this process's device
        s_prepare(m, k);
        CHECK_MSG(rl_model_device_push(m, 1) == 0, "push: %s", rl_model_errmsg(m));
        size_t n = s_shard_work(m, k, r, 0, want);
        rl_model_destroy(&m);
        int st = 0;
        waitpid(kids[r], &st, 0);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d ended with status %d", r, st);
        snprintf(path, sizeof path, "%s/rank%d.bin", dir, r);
        FILE *f = fopen(path, "rb");
        size_t k2 = f ? fread(got, sizeof *got, cap, f) : 0;
        if (f) {
            fclose(f);
            unlink(path);
        }
        size_t diff = 0;
        for (size_t i = 0; i < n && k2 == n; i++) {
            diff += memcmp(&got[i], &want[i], sizeof *got) != 0;
        }
        printf("  rank %d: %zu floats (logp, entropy%s), %zu differ from the whole model's\n", r, n,
               k->tune != RL_TUNE_NONE ? ", gradients" : "", k2 == n ? diff : n);
        CHECK_MSG(k2 == n && diff == 0, "rank %d: %zu of %zu floats read, %zu differ", r, k2, n,
                  diff);
    }
    rmdir(dir);
    free(want);
    free(got);
}

// The process's resident memory in KiB (VmRSS), -1 when unknown.
static long s_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) {
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    return kb;
}

// A model on a GPU leaves the host's gradient array alone: the device's gradients are zeroed
// there and rl_model_device_pull(..., 1) writes the host's whole before anything reads them. A
// full-tuning model with 33.6 MB of gradients (a 32768-token vocabulary) zeroes its gradients
// without mapping them: the resident set grows by less than a quarter of them (a host memset
// maps them all; a Llama-3-8B's would be 32 GB a rank, cleared every step).
static void s_test_host_grads(void) {
    static const s_shape_t wide = {
        "llama wide vocabulary tied", "llama", 1, 256, 256, 1, 4, 4, 64, 32768};
    const s_case_t k = {&wide, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0};
    rl_hf_config_t cfg = s_cfg(&wide);
    rl_model_t *m = s_new(&cfg, &k, 1, 64);
    size_t n;
    rl_model_trainable(m, &n);
    long before = s_rss_kb();
    rl_model_zero_grad(m);
    long after = s_rss_kb();
    double grew = (double)(after - before) * 1024.0, bytes = (double)n * sizeof(float);
    printf("host gradients of a model on the GPU: zeroing them grew the resident set by %.1f MB "
           "(the array: %.1f MB)\n",
           grew / 1e6, bytes / 1e6);
    CHECK_MSG(before > 0 && grew < 0.25 * bytes, "zero_grad mapped %.1f MB of %.1f", grew / 1e6,
              bytes / 1e6);
    rl_model_destroy(&m);
}

// ASan keeps what is freed in its quarantine: the resident set cannot show memory given back
#if defined(__SANITIZE_ADDRESS__)
#define S_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_ASAN 1
#endif
#endif
#ifndef S_ASAN
#define S_ASAN 0
#endif

// Half the bytes given back at least (freed: the resident set's fall), or ASan's build.
static void s_check_freed(const char *what, long before, double freed, double bytes) {
    CHECK_MSG(S_ASAN || (before > 0 && freed > 0.5 * bytes), "%s: gave back %.1f MB of %.1f", what,
              freed / 1e6, bytes / 1e6);
    if (S_ASAN) {
        printf("  (ASan: its quarantine keeps what is freed; the bytes given back not checked)\n");
    }
}

// The logits (T, V) of a prefill of tok over a KV cache of the model's (a sampler's step).
static float *s_prefill(rl_model_t *m, const int32_t *tok, int T) {
    const int V = rl_model_config(m)->vocab_size;
    float *out = malloc((size_t)T * V * sizeof *out);
    int *slots = calloc((size_t)T, sizeof *slots), *pos = malloc((size_t)T * sizeof *pos);
    rl_kvcache_t *c = rl_kvcache_new(m, 1, T);
    RL_ASSERT(out && slots && pos);
    for (int i = 0; i < T; i++) {
        pos[i] = i;
    }
    int rc = c ? rl_model_step(m, c, tok, slots, pos, T, NULL, out) : RL_ENOMEM;
    CHECK_MSG(rc == 0, "prefill: %s", rl_model_errmsg(m));
    rl_kvcache_destroy(&c);
    free(slots);
    free(pos);
    return out;
}

// The adapter's random values (small: the logprobs move, nothing overflows), set and pushed.
static void s_adapter_fill(rl_model_t *m, uint64_t seed) {
    size_t n = 0;
    float *w = rl_model_trainable(m, &n);
    rl_rng_t rng;
    rl_rng_seed(&rng, seed);
    rl_rng_fill_normal(&rng, w, n, 0.0f, 0.05f);
    CHECK_MSG(rl_model_device_push(m, 0) == 0, "push: %s", rl_model_errmsg(m));
}

// A LoRA model on the GPU gives its frozen base's host copy back (a LoRA actor, a LoRA
// sampler): the same logprobs to the bit after and half the base's bytes given back at least;
// the adapter still pushes (a weight sync, an optimizer step on the host), saves and loads (a
// checkpoint, a resume) as a twin that kept its copy does (logprobs to the bit); pushing every
// parameter and saving the model are refused.
static void s_test_drop_host_lora(const rl_hf_config_t *cfg, const s_case_t *kl, const int32_t *tok,
                                  int T) {
    rl_model_t *lo = s_new(cfg, kl, 1, 64), *twin = s_new(cfg, kl, 1, 64);
    const double bytes = (double)rl_model_param_count(lo) * sizeof(float);
    float *a = calloc(4 * (size_t)T, sizeof(float)), *b = a + T, *c = b + T, *d = c + T;
    int len = T;
    char err[512], dir[] = "/tmp/rl_drop_host_lora_XXXXXX";
    RL_ASSERT(mkdtemp(dir));
    s_adapter_fill(lo, 5);
    s_adapter_fill(twin, 5);
    CHECK(rl_model_forward(lo, tok, &len, 1, T, 1.0f, 0, a, NULL) == 0);
    long before = s_rss_kb();
    CHECK_MSG(rl_model_drop_host_weights(lo) == 0, "%s", rl_model_errmsg(lo));
    long after = s_rss_kb();
    CHECK(rl_model_forward(lo, tok, &len, 1, T, 1.0f, 0, b, NULL) == 0);
    double freed = (double)(before - after) * 1024.0;
    int same = s_same_bits(a, b, (size_t)T * sizeof *a);
    printf("LoRA: host base given back: %.1f MB of %.1f, logprobs after %s\n", freed / 1e6,
           bytes / 1e6, same ? "the same bits" : "DIFFERENT");
    CHECK_MSG(same, "the logprobs changed after the base's host copy went");
    s_check_freed("LoRA", before, freed, bytes);
    // a new adapter pushed (a weight sync): the twin's logprobs, not the old ones
    s_adapter_fill(lo, 6);
    s_adapter_fill(twin, 6);
    CHECK(rl_model_forward(lo, tok, &len, 1, T, 1.0f, 0, b, NULL) == 0);
    CHECK(rl_model_forward(twin, tok, &len, 1, T, 1.0f, 0, c, NULL) == 0);
    same = s_same_bits(b, c, (size_t)T * sizeof *b);
    int moved = !s_same_bits(a, b, (size_t)T * sizeof *a);
    float *la = s_prefill(lo, tok, T), *lb = s_prefill(twin, tok, T);
    same &= s_same_bits(la, lb, (size_t)T * cfg->vocab_size * sizeof *la);
    free(la);
    free(lb);
    // saved, overwritten, loaded back (a checkpoint and a resume): the twin's again
    CHECK_MSG(rl_model_save_adapter(lo, dir, NULL, err, sizeof err) == 0, "save: %s", err);
    s_adapter_fill(lo, 7);
    CHECK_MSG(rl_model_load_adapter(lo, dir, err, sizeof err) == 0, "load: %s", err);
    CHECK(rl_model_forward(lo, tok, &len, 1, T, 1.0f, 0, d, NULL) == 0);
    int back = s_same_bits(d, c, (size_t)T * sizeof *d);
    printf("LoRA after the drop: a pushed adapter's logprobs and logits %s (moved: %s), saved and "
           "loaded back %s\n",
           same ? "the twin's bits" : "DIFFERENT", moved ? "yes" : "NO",
           back ? "the twin's bits" : "DIFFERENT");
    CHECK(same && moved && back);
    CHECK(rl_model_device_push(lo, 1) == RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(lo), "only a LoRA adapter can be pushed");
    CHECK(rl_model_save_hf(lo, "/tmp/rl_drop_host_never", 0, err, sizeof err) == RL_EINVAL);
    CHECK_CONTAINS(err, "nothing to save");
    char path[600];
    const char *files[] = {"adapter_model.safetensors", "adapter_config.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    free(a);
    rl_model_destroy(&lo);
    rl_model_destroy(&twin);
}

// A model that only infers on the GPU (a sampler: full tuning or LoRA; full tuning's keeps no
// fp32 masters) gives its host copy back and takes new weights in pieces straight into the device
// (rl_model_device_load: a weight sync's buckets, of uneven sizes, most crossing tensors):
// logprobs and a prefill's logits the bits of a twin that kept its copy and pushed the same
// array, and of a model that trains (its masters rounded on the device); the dropped model's host
// adapter untouched; a piece past the end refused, and (full) a push, a pull and a save.
static void s_test_load_pieces(const s_case_t *k) {
    rl_hf_config_t cfg = s_cfg(k->shape);
    enum { T = 12 };
    int32_t tok[T];
    for (int i = 0; i < T; i++) {
        tok[i] = (int32_t)((i * 7919) % cfg.vocab_size);
    }
    s_infer = 1;
    rl_model_t *m = s_new(&cfg, k, 1, 64), *twin = s_new(&cfg, k, 1, 64);
    s_infer = 0;
    size_t n = 0, hn = 0;
    float *w = rl_model_trainable(twin, &n);
    rl_rng_t rng;
    rl_rng_seed(&rng, 11);
    rl_rng_fill_normal(&rng, w, n, 0.0f, k->tune == RL_TUNE_LORA ? 0.05f : 0.08f);
    CHECK_MSG(rl_model_device_push(twin, 0) == 0, "push: %s", rl_model_errmsg(twin));
    float *src = malloc(n * sizeof *src), *a = calloc(2 * (size_t)T, sizeof *a), *b = a + T;
    memcpy(src, w, n * sizeof *src);
    CHECK_MSG(rl_model_drop_host_weights(m) == 0, "%s", rl_model_errmsg(m));
    const float *host = rl_model_trainable(m, &hn); // LoRA: the adapter's arrays stay
    float *host0 = hn ? malloc(hn * sizeof *host0) : NULL;
    if (hn) {
        memcpy(host0, host, hn * sizeof *host0);
    }
    CHECK(rl_model_trainable_size(m) == n && (k->tune == RL_TUNE_LORA ? hn == n : !host));
    static const size_t sizes[] = {1, 777, 4096, 100003, 13};
    int pieces = 0, rc = 0;
    for (size_t at = 0, i = 0; at < n && !rc; at += sizes[i++ % 5], pieces++) {
        size_t len = sizes[i % 5] < n - at ? sizes[i % 5] : n - at;
        rc = rl_model_device_load(m, at, src + at, len, at + len == n);
    }
    CHECK_MSG(rc == 0, "device_load: %s", rl_model_errmsg(m));
    int len = T;
    rc = rl_model_forward(m, tok, &len, 1, T, 1.0f, 0, a, NULL);
    rc |= rl_model_forward(twin, tok, &len, 1, T, 1.0f, 0, b, NULL);
    CHECK(rc == 0);
    float *la = s_prefill(m, tok, T), *lb = s_prefill(twin, tok, T);
    int same = s_same_bits(a, b, (size_t)T * sizeof *a);
    int lsame = s_same_bits(la, lb, (size_t)T * cfg.vocab_size * sizeof *la);
    // and a model that trains (full: its fp32 masters rounded on the device) with the same array
    rl_model_t *tr = s_new(&cfg, k, 1, 64);
    size_t tn = 0;
    memcpy(rl_model_trainable(tr, &tn), src, n * sizeof *src);
    CHECK(tn == n && rl_model_device_push(tr, 0) == 0);
    float *c = calloc((size_t)T, sizeof *c);
    CHECK(rl_model_forward(tr, tok, &len, 1, T, 1.0f, 0, c, NULL) == 0);
    float *lc = s_prefill(tr, tok, T);
    int tsame = s_same_bits(a, c, (size_t)T * sizeof *a) &&
                s_same_bits(la, lc, (size_t)T * cfg.vocab_size * sizeof *la);
    free(c);
    free(lc);
    rl_model_destroy(&tr);
    int kept = !hn || !memcmp(host, host0, hn * sizeof *host0);
    printf("%s, %s, infers only: %zu floats loaded in %d pieces: logprobs %s, a prefill's logits "
           "%s (a training model's: %s), the host's array %s\n",
           k->shape->name, k->tune == RL_TUNE_LORA ? "LoRA" : "full", n, pieces,
           same ? "the twin's bits" : "DIFFERENT", lsame ? "the twin's bits" : "DIFFERENT",
           tsame ? "the same bits" : "DIFFERENT",
           !hn    ? "given back"
           : kept ? "untouched"
                  : "WRITTEN");
    CHECK(same && lsame && kept && tsame);
    CHECK(rl_model_device_load(m, n - 1, src, 2, 1) == RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "device_load");
    if (k->tune == RL_TUNE_FULL) {
        char err[512];
        CHECK(rl_model_device_push(m, 0) == RL_EINVAL);
        CHECK(rl_model_device_pull(m, 0) == RL_EINVAL);
        CHECK_CONTAINS(rl_model_errmsg(m), "nowhere to pull to");
        CHECK(rl_model_save_hf(m, "/tmp/rl_drop_host_never", 0, err, sizeof err) == RL_EINVAL);
    }
    free(la);
    free(lb);
    free(src);
    free(a);
    free(host0);
    rl_model_destroy(&m);
    rl_model_destroy(&twin);
}

// A frozen model on the GPU gives its host weights back (rl_model_drop_host_weights: a
// reference): the same logprobs to the bit after, the resident set smaller by at least half the
// weights' bytes, and what needs the host copy refused (a push, a save, an adapter load); a model
// that trains in full, or one on the CPU, keeps its copy (refused). Then LoRA's case.
static void s_test_drop_host(void) {
    static const s_shape_t wide = {
        "llama wide vocabulary tied", "llama", 1, 256, 256, 1, 4, 4, 64, 32768};
    const s_case_t k = {&wide, RL_TUNE_NONE, 0, 8, 0.0f, 0, 1.0f, 0};
    const s_case_t kl = {&wide, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V, 8, 0.0f, 0, 1.0f, 0};
    const s_case_t kf = {&wide, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0};
    rl_hf_config_t cfg = s_cfg(&wide);
    s_host_optim = 1; // full tuning with the optimizer on the host: it reads the host's copy
    rl_model_t *m = s_new(&cfg, &k, 1, 64), *full = s_new(&cfg, &kf, 1, 64);
    s_host_optim = 0;
    rl_model_t *cpu = s_new(&cfg, &k, 0, 64);
    const double bytes = (double)rl_model_param_count(m) * sizeof(float);
    enum { T = 12 };
    int32_t tok[T];
    int len = T;
    for (int i = 0; i < T; i++) {
        tok[i] = (int32_t)((i * 7919) % cfg.vocab_size);
    }
    float a[T], b[T];
    size_t n0 = 0;
    char err[512];
    CHECK(rl_model_forward(m, tok, &len, 1, T, 1.0f, 0, a, NULL) == 0);
    float *la = s_prefill(m, tok, T);
    long before = s_rss_kb();
    CHECK_MSG(rl_model_drop_host_weights(m) == 0, "%s", rl_model_errmsg(m));
    long after = s_rss_kb();
    CHECK(rl_model_forward(m, tok, &len, 1, T, 1.0f, 0, b, NULL) == 0);
    float *lb = s_prefill(m, tok, T);
    double freed = (double)(before - after) * 1024.0;
    const size_t lbytes = (size_t)T * cfg.vocab_size * sizeof *la;
    printf("host weights given back: %.1f MB of %.1f, logprobs after %s, a prefill's logits %s\n",
           freed / 1e6, bytes / 1e6, s_same_bits(a, b, sizeof a) ? "the same bits" : "DIFFERENT",
           s_same_bits(la, lb, lbytes) ? "the same bits" : "DIFFERENT");
    CHECK_MSG(s_same_bits(a, b, sizeof a), "the logprobs changed after the host copy went");
    CHECK_MSG(s_same_bits(la, lb, lbytes), "the logits changed after the host copy went");
    free(la);
    free(lb);
    s_check_freed("frozen", before, freed, bytes);
    CHECK(rl_model_device_push(m, 1) == RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(m), "gave its host weights back");
    CHECK(rl_model_save_hf(m, "/tmp/rl_drop_host_never", 0, err, sizeof err) == RL_EINVAL);
    CHECK_CONTAINS(err, "nothing to save");
    CHECK(rl_model_load_adapter(m, "/tmp/rl_drop_host_never", err, sizeof err) == RL_EINVAL);
    CHECK_CONTAINS(err, "no adapter can be loaded");
    CHECK(rl_model_drop_host_weights(full) == RL_EINVAL); // it steps on the host
    // full tuning with AdamW on the device (a mesh's rank other than 0): given back, a pull
    // keeps nothing (the group's gathers only), its weights come back through a load
    rl_model_t *fd = s_new(&cfg, &kf, 1, 64);
    size_t fn = 0;
    const float *fh = rl_model_trainable(fd, &fn);
    float *fw = malloc(fn * sizeof *fw);
    memcpy(fw, fh, fn * sizeof *fw);
    CHECK(rl_model_forward(fd, tok, &len, 1, T, 1.0f, 0, a, NULL) == 0);
    CHECK_MSG(rl_model_drop_host_weights(fd) == 0, "%s", rl_model_errmsg(fd));
    CHECK(rl_model_trainable(fd, &n0) == NULL && rl_model_trainable_size(fd) == fn);
    CHECK(rl_model_device_pull(fd, 0) == 0 && rl_model_device_push(fd, 0) == RL_EINVAL);
    for (size_t i = 0; i < fn; i++) { // other weights first: the load below must move them back
        fw[i] *= 0.5f;
    }
    CHECK(rl_model_device_load(fd, 0, fw, fn, 1) == 0);
    CHECK(rl_model_forward(fd, tok, &len, 1, T, 1.0f, 0, b, NULL) == 0);
    CHECK_MSG(!s_same_bits(a, b, sizeof a), "loading other weights changed nothing");
    for (size_t i = 0; i < fn; i++) {
        fw[i] *= 2.0f; // exact: the original weights again
    }
    CHECK(rl_model_device_load(fd, 0, fw, fn, 1) == 0);
    CHECK(rl_model_forward(fd, tok, &len, 1, T, 1.0f, 0, b, NULL) == 0);
    CHECK_MSG(s_same_bits(a, b, sizeof a), "a full model's logprobs after its host copy went");
    free(fw);
    rl_model_destroy(&fd);
    CHECK(rl_model_drop_host_weights(cpu) == RL_EINVAL);
    CHECK_CONTAINS(rl_model_errmsg(cpu), "only a model on a GPU");
    rl_model_destroy(&m);
    rl_model_destroy(&full);
    rl_model_destroy(&cpu);
    s_test_drop_host_lora(&cfg, &kl, tok, T);
    const s_case_t pf = {&S_QWEN2, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0};
    const s_case_t pl = {&S_LLAMA, RL_TUNE_LORA, 0x7f, 8, 0.0f, 0, 1.0f, 0};
    s_test_load_pieces(&pf);
    s_test_load_pieces(&pl);
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "--shard-child") == 0) {
        return s_shard_child(argv);
    }
    if (argc == 6 && strcmp(argv[1], "--ipc-child") == 0) {
        return s_ipc_child(argv);
    }
    if (argc == 6 && strcmp(argv[1], "--group-child") == 0) {
        return s_group_child(argv);
    }
    rl_test_cuda_open("model.cuda_model");
    const int emu = rl_test_emulated();
    const int T = emu ? 24 : 96;
    if (emu) {
        printf("model.cuda_model: emulated: T %d instead of 96\n", T);
    }
    const int ALL = RL_LORA_ALL;
    const s_case_t cases[] = {
        {&S_LLAMA, RL_TUNE_NONE, 0, 8, 0.0f, 0, 1.0f, 0},
        {&S_LLAMA, RL_TUNE_NONE, 0, 8, 0.0f, 0, 1.0f, 1},
        {&S_LLAMA, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V, 8, 0.0f, 0, 1.0f, 0},
        {&S_LLAMA, RL_TUNE_FULL, 0, 8, 0.0f, 0, 0.7f, 0},
        {&S_LLAMA_T, RL_TUNE_FULL, 0, 8, 0.0f, 1, 1.0f, 0},
        {&S_LLAMA_T, RL_TUNE_LORA, ALL, 8, 0.1f, 0, 1.0f, 0},
        {&S_QWEN2, RL_TUNE_LORA, ALL, 16, 0.1f, 0, 1.0f, 0},
        {&S_QWEN2, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0},
        {&S_QWEN3, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_K | RL_LORA_O | RL_LORA_DOWN, 8, 0.2f, 1, 1.0f,
         0},
        {&S_QWEN3, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s_run_case(&cases[i], T);
    }
    const s_case_t optim_cases[] = {
        {&S_LLAMA, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V, 8, 0.0f, 0, 1.0f, 0},
        {&S_QWEN3, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0},
    };
    for (size_t i = 0; i < sizeof optim_cases / sizeof *optim_cases; i++) {
        s_test_optim(&optim_cases[i], T);
    }
    const s_case_t head_cases[] = {
        {&S_QWEN2, RL_TUNE_LORA, ALL, 16, 0.0f, 0, 1.0f, 0},
        {&S_LLAMA, RL_TUNE_FULL, 0, 8, 0.0f, 0, 1.0f, 0},
    };
    for (size_t i = 0; i < sizeof head_cases / sizeof *head_cases; i++) {
        s_test_head(&head_cases[i], T);
    }
    const s_case_t step_cases[] = {
        {&S_LLAMA, RL_TUNE_NONE, 0, 8, 0.0f, 0, 1.0f, 0},
        {&S_QWEN2, RL_TUNE_LORA, ALL, 16, 0.0f, 0, 1.0f, 0},
        {&S_QWEN3, RL_TUNE_LORA, RL_LORA_Q | RL_LORA_V, 8, 0.0f, 0, 1.0f, 0},
    };
    for (size_t i = 0; i < sizeof step_cases / sizeof *step_cases; i++) {
        s_test_step(&step_cases[i]);
    }
    s_test_load(T);
    s_test_adapter(T);
    for (int i = 0; i < (int)(sizeof S_IPC_CASES / sizeof *S_IPC_CASES); i++) {
        s_test_ipc(i, T);
    }
    for (int i = 0; i < (int)(sizeof S_GROUP_CASES / sizeof *S_GROUP_CASES); i++) {
        s_test_group(i, T);
    }
    for (int i = 0; i < (int)(sizeof S_SHARD_CASES / sizeof *S_SHARD_CASES); i++) {
        s_test_shard(i);
    }
    s_test_refusals();
    s_test_host_grads();
    s_test_drop_host();
    rl_test_cuda_close();
    RL_TEST_DONE();
}

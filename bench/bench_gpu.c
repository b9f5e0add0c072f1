// bench_gpu — the model on an NVIDIA GPU beside the device's own ceilings measured in the same
// run (issue 27, "Measured"; DESIGN.md §5). Not a test. Sections, each the median of several
// repetitions after a warm-up:
//
//   peak    the module's bf16 x bf16 -> fp32 gemm (cuBLASLt) at M = N = K = 8192: TFLOP/s, the
//           ceiling MFU is taken against (not a datasheet figure).
//   copy    device-to-device copy of 1 GiB: GB/s counting the bytes read and written, the bound
//           decode at batch 1 is taken against.
//   train   one training step (rl_model_forward train = 1 + rl_model_backward) of B*T = 16384
//           tokens at T = 1024 and 4096, Qwen2.5-0.5B- and 1.5B-shaped random models (rlctl
//           init's init), LoRA r 16 on all 7 projections, and full: tokens/s, model TFLOP/s and
//           MFU = that / peak. FLOPs as bench_model.c counts them (PaLM's convention):
//             full: 6*N*tok + 6*L*T*QD*tok; LoRA: 4*N*tok + 6*N_lora*tok + 6*L*T*QD*tok,
//           N the matmul parameters (the tied head counted once). A model whose step does not fit
//           the device is made again with recompute (said in its row).
//   decode  rl_sampler_generate on the GPU model (tune NONE): batch 1, 64 and 256 prompts of 128
//           tokens, 256 new tokens each (end tokens ignored), temperature 1: new tokens/s of the
//           whole call (prefill included). Batch 1 beside its bandwidth bound: copy GB/s / the
//           bytes one token reads (the bf16 matmul weights, the head once).
//   attn_train  the attention alone at a training step's shape (both head shapes, T = 1024
//           and 4096): the fp32 kernels against the bf16 ones (the forward on the tensor cores),
//           TFLOP/s of causal attention (forward 2 T^2 D per head, backward 2.5 times that).
//   sync    a new weights version into a sampler process on the same GPU (the 0.5B shape, LoRA
//           and full): through CUDA IPC (the sampler copies the actor's trainable array device to
//           device) against the host path's two device copies (the actor's pull to the host and
//           the sampler's load of the buckets), the ZeroMQ transfer between them not counted (a
//           lower bound).
//
//   bench_gpu [--quick] [--tiny] [--json FILE]
//     --quick  the 0.5B shape only, and decode 64 new tokens, one timed call each, no warm-up
//              (what scripts/gpu_check.sh runs within its minutes)
//     --tiny   toy shapes and sizes, to try the program on the emulated module (tests/cuemu)
//     --json   also one JSON object per figure, a line each, into FILE
#include "rl_bench.h"
#include "rl_device.h"
#include "rl_hf.h"
#include "rl_model.h"
#include "rl_rng.h"
#include "rl_sampler.h"

#include "cuda/rl_cuda_module.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    const char *name;
    int C, I, L, NH, NKV, D, V;
} s_shape_t;

// Qwen2.5-0.5B and -1.5B (config.json of the released models), tied embeddings; a toy one
static const s_shape_t S_05B = {"qwen2.5-0.5B", 896, 4864, 24, 14, 2, 64, 151936};
static const s_shape_t S_15B = {"qwen2.5-1.5B", 1536, 8960, 28, 12, 2, 128, 151936};
static const s_shape_t S_TINY = {"tiny", 64, 160, 2, 4, 2, 16, 512};

static int s_tiny, s_quick;
static FILE *s_json;
static const rl_cuda_module_t *s_cu;
static rl_cuda_ctx_t *s_ctx;

static void s_fail(const char *what, const char *why) {
    fprintf(stderr, "bench_gpu: %s: %s\n", what, why);
    exit(1);
}

static void s_record(const char *section, const char *what, double value, const char *unit) {
    if (s_json) {
        fprintf(s_json,
                "{\"section\": \"%s\", \"what\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"}\n",
                section, what, value, unit);
    }
}

static rl_hf_config_t s_cfg(const s_shape_t *s) {
    char json[1024], err[512];
    snprintf(json, sizeof json,
             "{\"model_type\":\"qwen2\",\"hidden_size\":%d,\"intermediate_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"head_dim\":%d,\"vocab_size\":%d,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"
             "\"max_position_embeddings\":32768,\"initializer_range\":0.02,"
             "\"tie_word_embeddings\":true}",
             s->C, s->I, s->L, s->NH, s->NKV, s->D, s->V);
    rl_hf_config_t cfg;
    if (rl_hf_config_parse(json, strlen(json), s->name, &cfg, err, sizeof err) != 0) {
        s_fail(s->name, err);
    }
    return cfg;
}

// Matmul parameters (every projection and the tied head once), and LoRA's at rank r.
static double s_params(const s_shape_t *s, int r, double *n_lora) {
    double C = s->C, I = s->I, QD = (double)s->NH * s->D, KVD = (double)s->NKV * s->D;
    double per = C * QD + 2 * C * KVD + QD * C + 3 * C * I;
    double lora = r * ((C + QD) + 2 * (C + KVD) + (QD + C) + 2 * (C + I) + (I + C));
    *n_lora = s->L * lora;
    return s->L * per + (double)s->V * C;
}

// ---- the ceilings

static double s_peak(void) {
    const int n = s_tiny ? 256 : 8192;
    uint16_t *a = NULL, *b = NULL;
    float *c = NULL;
    size_t nn = (size_t)n * n;
    if (s_cu->dmalloc(s_ctx, nn * 2, (void **)&a) || s_cu->dmalloc(s_ctx, nn * 2, (void **)&b) ||
        s_cu->dmalloc(s_ctx, nn * 4, (void **)&c)) {
        s_fail("peak", s_cu->errmsg(s_ctx));
    }
    s_cu->dset(s_ctx, a, 0x3c, nn * 2); // bf16 0x3c3c, about 0.0115: no overflow, no denormals
    s_cu->dset(s_ctx, b, 0x3c, nn * 2);
    rl_cuda_gemm_t g = {n, n, n, 0, 1, n, n, n, 1.0f, 0.0f};
    double t[5];
    for (int rep = -1; rep < 5; rep++) {
        double t0 = rl_bench_now();
        for (int k = 0; k < 10; k++) {
            if (s_cu->gemm(s_ctx, &g, a, b, c)) {
                s_fail("peak", s_cu->errmsg(s_ctx));
            }
        }
        s_cu->sync(s_ctx);
        if (rep >= 0) {
            t[rep] = (rl_bench_now() - t0) / 10;
        }
    }
    double tf = 2.0 * n * (double)n * n / rl_bench_median(t, 5) / 1e12;
    printf("| peak | bf16 gemm M=N=K=%d (cuBLASLt) | %.3g TFLOP/s |\n", n, tf);
    s_record("peak", "bf16 gemm", tf, "TFLOP/s");
    s_cu->dfree(s_ctx, a);
    s_cu->dfree(s_ctx, b);
    s_cu->dfree(s_ctx, c);
    return tf;
}

static double s_copy(void) {
    const size_t bytes = s_tiny ? ((size_t)4 << 20) : ((size_t)1 << 30);
    void *a = NULL, *b = NULL;
    if (s_cu->dmalloc(s_ctx, bytes, &a) || s_cu->dmalloc(s_ctx, bytes, &b)) {
        s_fail("copy", s_cu->errmsg(s_ctx));
    }
    s_cu->dset(s_ctx, a, 1, bytes);
    double t[5];
    for (int rep = -1; rep < 5; rep++) {
        double t0 = rl_bench_now();
        s_cu->d2d(s_ctx, b, a, bytes);
        s_cu->sync(s_ctx);
        if (rep >= 0) {
            t[rep] = rl_bench_now() - t0;
        }
    }
    double gbs = 2.0 * (double)bytes / rl_bench_median(t, 5) / 1e9;
    printf("| copy | device to device, %zu MiB | %.0f GB/s (read + write) |\n", bytes >> 20, gbs);
    s_record("copy", "d2d", gbs, "GB/s");
    s_cu->dfree(s_ctx, a);
    s_cu->dfree(s_ctx, b);
    return gbs;
}

// ---- the model

// A random model of shape s on cuda:0 for forwards of `rows` tokens (LoRA r 16 on all 7
// projections when tune is LORA); infer: a sampler's (no gradients, no moments). With
// recompute non-NULL, made again with recompute when it does not fit (*recompute says).
static rl_model_t *s_model_opt(const s_shape_t *s, rl_tune_t tune, int rows, int infer,
                               int *recompute) {
    rl_hf_config_t cfg = s_cfg(s);
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.tune = tune;
    o.lora_r = 16;
    o.lora_alpha = 32.0f;
    o.lora_targets = RL_LORA_ALL;
    o.device.cuda = 1;
    o.device_rows = rows;
    o.device_infer = infer;
    char err[2048];
    for (int rc = 0; rc < (recompute ? 2 : 1); rc++) {
        o.recompute = rc;
        if (recompute) {
            *recompute = rc;
        }
        rl_model_t *m = rl_model_new_random(&cfg, &o, 1, err, sizeof err);
        if (m) {
            return m;
        }
        fprintf(stderr, "bench_gpu: %s%s: %s\n", s->name, rc ? " (recompute)" : "", err);
    }
    return NULL;
}

static rl_model_t *s_model(const s_shape_t *s, rl_tune_t tune, int rows, int *recompute) {
    return s_model_opt(s, tune, rows, 0, recompute);
}

static void s_train(const s_shape_t *s, rl_tune_t tune, int T, double peak) {
    const int tok = s_tiny ? 256 : 16384, B = tok / T;
    int recompute = 0;
    rl_model_t *m = s_model(s, tune, tok, &recompute);
    if (!m) {
        printf("| train | %s %s T=%d | did not fit |\n", s->name,
               tune == RL_TUNE_FULL ? "full" : "LoRA r16", T);
        return;
    }
    int32_t *ids = malloc((size_t)tok * sizeof *ids);
    int *len = malloc((size_t)B * sizeof *len);
    float *lp = malloc((size_t)tok * sizeof *lp), *dl = malloc((size_t)tok * sizeof *dl);
    if (!ids || !len || !lp || !dl) {
        s_fail("train", "out of memory");
    }
    rl_rng_t rng;
    rl_rng_seed(&rng, 7);
    for (int i = 0; i < tok; i++) {
        ids[i] = (int32_t)rl_rng_below(&rng, (uint64_t)s->V);
        dl[i] = -1.0f / (float)tok;
    }
    for (int b = 0; b < B; b++) {
        len[b] = T;
    }
    const int reps = s_tiny ? 2 : 3;
    double t[3];
    for (int rep = -1; rep < reps; rep++) {
        double t0 = rl_bench_now();
        if (rl_model_forward(m, ids, len, B, T, 1.0f, 1, lp, NULL) || rl_model_backward(m, dl)) {
            s_fail("train", rl_model_errmsg(m));
        }
        if (rep >= 0) {
            t[rep] = rl_bench_now() - t0;
        }
    }
    double sec = rl_bench_median(t, reps), n_lora;
    double N = s_params(s, 16, &n_lora), QD = (double)s->NH * s->D;
    double flops = tune == RL_TUNE_FULL
                       ? 6 * N * tok + 6.0 * s->L * T * QD * tok
                       : 4 * N * tok + 6 * n_lora * tok + 6.0 * s->L * T * QD * tok;
    double tf = flops / sec / 1e12;
    char what[160];
    snprintf(what, sizeof what, "%s %s T=%d B=%d%s", s->name,
             tune == RL_TUNE_FULL ? "full" : "LoRA r16", T, B, recompute ? " (recompute)" : "");
    printf("| train | %s | %.0f tokens/s, %.3f s/step, %.3g TFLOP/s, MFU %.1f%% |\n", what,
           tok / sec, sec, tf, 100 * tf / peak);
    s_record("train", what, tok / sec, "tokens/s");
    s_record("train", what, 100 * tf / peak, "MFU %");
    free(ids);
    free(len);
    free(lp);
    free(dl);
    rl_model_destroy(&m);
}

// Tokens/s of `batch` prompts decoded NEW tokens each (the median of 3 calls after one; one
// call with --tiny or --quick).
static double s_decode_tps(rl_sampler_t *smp, const rl_sampler_prompt_t *pr, int batch, int NEW) {
    rl_sampler_params_t sp;
    rl_sampler_params_default(&sp);
    sp.n = 1;
    sp.max_new_tokens = NEW;
    sp.no_eos = 1;
    sp.max_batch = batch;
    sp.seed = 3;
    const int reps = s_tiny || s_quick ? 1 : 3;
    double t[3];
    for (int rep = s_quick ? 0 : -1; rep < reps; rep++) {
        rl_sampler_result_t *res = NULL;
        double t0 = rl_bench_now();
        if (rl_sampler_generate(smp, pr, batch, &sp, &res)) {
            s_fail("decode", rl_sampler_errmsg(smp));
        }
        if (rep >= 0) {
            t[rep] = rl_bench_now() - t0;
        }
        rl_sampler_results_free(&res, batch);
    }
    return (double)batch * NEW / rl_bench_median(t, reps);
}

static void s_decode(const s_shape_t *s, double gbs) {
    const int P = s_tiny ? 8 : 128, NEW = s_tiny ? 16 : s_quick ? 64 : 256;
    const int batches[3] = {1, s_tiny ? 4 : 64, s_tiny ? 8 : 256};
    int recompute = 0;
    rl_model_t *m = s_model(s, RL_TUNE_NONE, 2048, &recompute);
    if (!m) {
        printf("| decode | %s | did not fit |\n", s->name);
        return;
    }
    rl_sampler_t *smp = rl_sampler_new(m);
    int32_t *ids = malloc((size_t)256 * P * sizeof *ids);
    rl_sampler_prompt_t *pr = malloc(256 * sizeof *pr);
    if (!smp || !ids || !pr) {
        s_fail("decode", "out of memory");
    }
    rl_rng_t rng;
    rl_rng_seed(&rng, 11);
    for (int i = 0; i < 256 * P; i++) {
        ids[i] = (int32_t)rl_rng_below(&rng, (uint64_t)s->V);
    }
    for (int i = 0; i < 256; i++) {
        pr[i] = (rl_sampler_prompt_t){ids + (size_t)i * P, P, (uint64_t)i};
    }
    double n_lora, N = s_params(s, 16, &n_lora);
    double bound = gbs * 1e9 / (2.0 * N); // tokens/s: each token reads the bf16 weights once
    double tps1 = 0;
    for (int k = 0; k < 3; k++) {
        double tps = s_decode_tps(smp, pr, batches[k], NEW);
        char what[128];
        snprintf(what, sizeof what, "%s batch %d, prompt %d, %d new", s->name, batches[k], P, NEW);
        if (k == 0) {
            long long cap = 0, launched = 0;
            const char *off = rl_model_device_graphs(m, &cap, &launched);
            printf("| decode | %s | %.0f tokens/s, %.1f%% of the bandwidth bound (%.0f); CUDA "
                   "graphs %s (%lld captured, %lld launched) |\n",
                   what, tps, 100 * tps / bound, bound, off ? off : "on", cap, launched);
            tps1 = tps;
        } else {
            printf("| decode | %s | %.0f tokens/s |\n", what, tps);
        }
        s_record("decode", what, tps, "tokens/s");
    }
    rl_sampler_destroy(&smp);
    rl_model_destroy(&m);
    // batch 1 again with every step queued kernel by kernel: what the graphs are worth
    setenv("RLCTL_CUDA_GRAPHS", "0", 1);
    m = s_model(s, RL_TUNE_NONE, 2048, &recompute);
    unsetenv("RLCTL_CUDA_GRAPHS");
    smp = m ? rl_sampler_new(m) : NULL;
    if (smp) {
        double tps = s_decode_tps(smp, pr, 1, NEW);
        char what[128];
        snprintf(what, sizeof what, "%s batch 1, prompt %d, %d new, CUDA graphs off", s->name, P,
                 NEW);
        printf("| decode | %s | %.0f tokens/s (with graphs: %.2fx) |\n", what, tps,
               tps > 0 ? tps1 / tps : 0.0);
        s_record("decode", what, tps, "tokens/s");
    }
    free(ids);
    free(pr);
    rl_sampler_destroy(&smp);
    rl_model_destroy(&m);
}

// ---- attention of a decode step: the two kernels that can take it
// A decode step's attention (S rows, each its own slot with ctx positions) as the model runs it
// (attn_prefill_bf16, each row a run of one: a tile of query rows per row and head; and the fp32
// attn_prefill) and through
// attn_decode_bf16c (attn_decode over the bf16 cache: the heads sharing a kv head in one block,
// reading K and V once for them), beside
// the time the K and V bytes take at the measured copy bandwidth. Which is faster decides which
// one the model's decode steps should take.
static void s_attn(const s_shape_t *s, double gbs) {
    const int S = s_tiny ? 8 : 256, CTX = s_tiny ? 24 : 384;
    const int NH = s->NH, NKV = s->NKV, D = s->D, QD = NH * D, KVD = NKV * D;
    const size_t cache = (size_t)S * CTX * KVD;
    float *q = NULL, *out = NULL, *kc = NULL, *vc = NULL;
    uint16_t *kh = NULL, *vh = NULL; // the bf16 cache attn_prefill_bf16 reads
    int32_t *idx = NULL;
    if (s_cu->dmalloc(s_ctx, (size_t)S * QD * 4, (void **)&q) ||
        s_cu->dmalloc(s_ctx, (size_t)S * QD * 4, (void **)&out) ||
        s_cu->dmalloc(s_ctx, cache * 4, (void **)&kc) ||
        s_cu->dmalloc(s_ctx, cache * 4, (void **)&vc) ||
        s_cu->dmalloc(s_ctx, cache * 2, (void **)&kh) ||
        s_cu->dmalloc(s_ctx, cache * 2, (void **)&vh) ||
        s_cu->dmalloc(s_ctx, (size_t)(4 * S + 1) * 4, (void **)&idx)) {
        s_fail("attn", s_cu->errmsg(s_ctx));
    }
    s_cu->dset(s_ctx, q, 0x3c, (size_t)S * QD * 4); // small finite values
    s_cu->dset(s_ctx, kc, 0x3c, cache * 4);
    s_cu->dset(s_ctx, vc, 0x3c, cache * 4);
    s_cu->dset(s_ctx, kh, 0x3c, cache * 2);
    s_cu->dset(s_ctx, vh, 0x3c, cache * 2);
    // starts 0..S, slots 0..S-1, first positions CTX-1, contexts CTX
    int32_t *h = malloc((size_t)(4 * S + 1) * sizeof *h);
    for (int i = 0; i <= S; i++) {
        h[i] = i;
    }
    for (int i = 0; i < S; i++) {
        h[S + 1 + i] = i;
        h[2 * S + 1 + i] = CTX - 1;
        h[3 * S + 1 + i] = CTX;
    }
    s_cu->h2d(s_ctx, idx, h, (size_t)(4 * S + 1) * sizeof *h);
    free(h);
    const int32_t *starts = idx, *slots = idx + S + 1, *pos0 = idx + 2 * S + 1,
                  *nctx = idx + 3 * S + 1;
    double t[3][5];
    for (int kernel = 0; kernel < 3; kernel++) {
        for (int rep = -1; rep < 5; rep++) {
            double t0 = rl_bench_now();
            for (int k = 0; k < 10; k++) {
                int rc = kernel == 0 ? s_cu->attn_prefill_bf16(s_ctx, out, q, kh, vh, starts, slots,
                                                               pos0, S, S, NH, NKV, D, S, CTX)
                         : kernel == 1 ? s_cu->attn_prefill(s_ctx, out, q, kc, vc, starts, slots,
                                                            pos0, S, S, NH, NKV, D, S, CTX)
                                       : s_cu->attn_decode_bf16c(s_ctx, out, q, kh, vh, slots, nctx,
                                                                 S, NH, NKV, D, S, CTX);
                if (rc) {
                    s_fail("attn", s_cu->errmsg(s_ctx));
                }
            }
            s_cu->sync(s_ctx);
            if (rep >= 0) {
                t[kernel][rep] = (rl_bench_now() - t0) / 10;
            }
        }
    }
    const double tp = rl_bench_median(t[0], 5), tf = rl_bench_median(t[1], 5),
                 td = rl_bench_median(t[2], 5);
    const double bound = 2.0 * cache * 4 / (gbs * 1e9); // K and V read once (fp32)
    char what[160];
    snprintf(what, sizeof what, "%s decode step, %d rows x %d positions (NH %d, NKV %d, D %d)",
             s->name, S, CTX, NH, NKV, D);
    printf("| attn | %s | attn_prefill_bf16 (the model's, bf16 cache) %.1f us, attn_prefill "
           "(fp32) %.1f us, attn_decode_bf16c (bf16 cache) %.1f us (%.2fx); fp32 K and V once at "
           "the copy "
           "bandwidth %.1f us (bf16: half) |\n",
           what, tp * 1e6, tf * 1e6, td * 1e6, td > 0 ? tp / td : 0.0, bound * 1e6);
    s_record("attn", "attn_prefill_bf16, decode step", tp * 1e6, "us");
    s_record("attn", "attn_prefill, decode step", tf * 1e6, "us");
    s_record("attn", "attn_decode_bf16c, decode step", td * 1e6, "us");
    void *dev[] = {q, out, kc, vc, kh, vh, idx};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) {
        s_cu->dfree(s_ctx, dev[i]);
    }
}

// ---- attention of a training step: fp32 (CUDA cores) against bf16 (tensor cores)
// The attention alone, at a training step's shape (B*T = 16384 tokens of sequences of T, the
// shape's heads): attn_forward and attn_backward (fp32) against attn_forward_bf16 (tensor cores:
// the model's) and attn_backward_bf16 (the model's; fp32 CUDA cores reading rounded inputs), in
// TFLOP/s of causal attention (forward 2 T^2 D per head and sequence: Q K^T and P V over half the
// square; backward 2.5 times that, FlashAttention's count) and as a share of the gemm peak.
static double s_attn_time(int which, float *const *b, const int32_t *starts, int B, int N, int NH,
                          int NKV, int D) {
    double t[5];
    for (int rep = -1; rep < 5; rep++) {
        double t0 = rl_bench_now();
        int rc;
        switch (which) {
        case 0:
            rc = s_cu->attn_forward(s_ctx, b[3], b[4], b[0], b[1], b[2], starts, B, N, NH, NKV, D);
            break;
        case 1:
            rc = s_cu->attn_forward_bf16(s_ctx, b[3], b[4], b[0], b[1], b[2], starts, B, N, NH, NKV,
                                         D);
            break;
        case 2:
            rc = s_cu->attn_backward(s_ctx, b[5], b[6], b[7], b[8], b[3], b[0], b[1], b[2], b[3],
                                     b[4], starts, B, N, NH, NKV, D);
            break;
        default:
            rc = s_cu->attn_backward_bf16(s_ctx, b[5], b[6], b[7], b[8], b[3], b[0], b[1], b[2],
                                          b[3], b[4], starts, B, N, NH, NKV, D);
            break;
        }
        if (rc || s_cu->sync(s_ctx)) {
            s_fail("attn_train", s_cu->errmsg(s_ctx));
        }
        if (rep >= 0) {
            t[rep] = rl_bench_now() - t0;
        }
    }
    return rl_bench_median(t, 5);
}

static void s_attn_train(const s_shape_t *s, int T, double peak) {
    const int N = s_tiny ? 256 : 16384, B = N / T, NH = s->NH, NKV = s->NKV, D = s->D;
    const size_t qn = (size_t)N * NH * D, kn = (size_t)N * NKV * D;
    // q, k, v, out, lse, dq, dk, dv, delta
    const size_t n[9] = {qn, kn, kn, qn, (size_t)N * NH, qn, kn, kn, (size_t)N * NH};
    float *b[9] = {NULL};
    for (int i = 0; i < 9; i++) {
        if (s_cu->dmalloc(s_ctx, n[i] * 4, (void **)&b[i])) {
            s_fail("attn_train", s_cu->errmsg(s_ctx));
        }
        s_cu->dset(s_ctx, b[i], 0x3c, n[i] * 4); // small finite values
    }
    int32_t *h = malloc((size_t)(B + 1) * sizeof *h), *starts = NULL;
    for (int i = 0; i <= B; i++) {
        h[i] = i * T;
    }
    if (s_cu->dmalloc(s_ctx, (size_t)(B + 1) * 4, (void **)&starts) ||
        s_cu->h2d(s_ctx, starts, h, (size_t)(B + 1) * 4)) {
        s_fail("attn_train", s_cu->errmsg(s_ctx));
    }
    free(h);
    const double fwd = 2.0 * (double)T * T * D * NH * B, bwd = 2.5 * fwd;
    double tt[4];
    for (int w = 0; w < 4; w++) {
        tt[w] = s_attn_time(w, b, starts, B, N, NH, NKV, D);
    }
    char what[160];
    snprintf(what, sizeof what, "%s heads (NH %d, NKV %d, D %d), T=%d, %d tokens", s->name, NH, NKV,
             D, T, N);
    printf("| attn_train | %s | forward fp32 %.2f ms (%.3g TFLOP/s), bf16 %.2f ms (%.3g TFLOP/s, "
           "%.1f%% of peak); backward fp32 %.2f ms (%.3g TFLOP/s), bf16 %.2f ms (%.3g TFLOP/s) |\n",
           what, tt[0] * 1e3, fwd / tt[0] / 1e12, tt[1] * 1e3, fwd / tt[1] / 1e12,
           100 * fwd / tt[1] / 1e12 / peak, tt[2] * 1e3, bwd / tt[2] / 1e12, tt[3] * 1e3,
           bwd / tt[3] / 1e12);
    const char *names[4] = {"forward fp32", "forward bf16", "backward fp32", "backward bf16"};
    for (int w = 0; w < 4; w++) {
        char key[200];
        snprintf(key, sizeof key, "%s %s T=%d", s->name, names[w], T);
        s_record("attn_train", key, (w < 2 ? fwd : bwd) / tt[w] / 1e12, "TFLOP/s");
    }
    for (int i = 0; i < 9; i++) {
        s_cu->dfree(s_ctx, b[i]);
    }
    s_cu->dfree(s_ctx, starts);
}

// ---- the weight sync (issue 31): the actor's trainable weights into a sampler's process

// The sampler's load through host memory: its buckets (roles.sync_bucket_mb's default, 256 MiB)
// of w (n floats) straight into the device, as roles/rl_role_sampler.c does.
static int s_load_buckets(rl_model_t *m, const float *w, size_t n) {
    const size_t bucket = ((size_t)256 << 20) / sizeof(float);
    int rc = 0;
    for (size_t at = 0; at < n && !rc; at += bucket) {
        size_t len = n - at < bucket ? n - at : bucket;
        rc = rl_model_device_load(m, at, w + at, len, at + len == n);
    }
    return rc;
}

// Median seconds of 5 calls of a load (ipc: from the handle; else the host's buckets) after one.
static double s_sync_time(rl_model_t *m, const unsigned char *h, uint64_t layout, int64_t n) {
    double t[5];
    size_t hn = 0;
    const float *w = rl_model_trainable(m, &hn); // the buckets' bytes (the sampler's own copy)
    for (int rep = -1; rep < 5; rep++) {
        double t0 = rl_bench_now();
        int rc = h ? rl_model_device_ipc_load(m, h, layout, n) : s_load_buckets(m, w, hn);
        if (rc) {
            s_fail("sync", rl_model_errmsg(m));
        }
        if (rep >= 0) {
            t[rep] = rl_bench_now() - t0;
        }
    }
    return rl_bench_median(t, 5);
}

// The sampler's side, a process of its own: bench_gpu --sync-child <tiny> <tune>; reads lines
// "ipc <handle hex> <layout hex> <n>" or "push" and answers each with the median seconds.
static int s_sync_child(char **argv) {
    const s_shape_t *s = atoi(argv[2]) ? &S_TINY : &S_05B;
    rl_model_t *m = s_model_opt(s, (rl_tune_t)atoi(argv[3]), 64, 1, NULL);
    if (!m) {
        return 1;
    }
    char line[512], hex[2 * RL_MODEL_IPC_HANDLE + 1];
    while (fgets(line, sizeof line, stdin)) {
        unsigned char h[RL_MODEL_IPC_HANDLE];
        unsigned long long layout;
        long long n;
        double sec = -1;
        if (sscanf(line, "ipc %128s %llx %lld", hex, &layout, &n) == 3) {
            for (int i = 0; i < RL_MODEL_IPC_HANDLE; i++) {
                unsigned v = 0;
                sscanf(hex + 2 * i, "%2x", &v);
                h[i] = (unsigned char)v;
            }
            sec = s_sync_time(m, h, (uint64_t)layout, (int64_t)n);
        } else if (!strncmp(line, "push", 4)) {
            sec = s_sync_time(m, NULL, 0, 0);
        } else {
            break;
        }
        printf("%.9f\n", sec);
        fflush(stdout);
    }
    rl_model_destroy(&m);
    return 0;
}

// The weights of a version to a sampler on the same GPU: through CUDA IPC (the sampler copies the
// actor's array device to device) against the host path's two device copies (the actor's pull
// to host memory, the sampler's load of the buckets; the ZeroMQ transfer between them, a third and
// fourth copy through host memory, is not counted: the host path's figure is a lower bound).
static void s_sync(const s_shape_t *s, rl_tune_t tune) {
    const char *tn = tune == RL_TUNE_FULL ? "full" : "LoRA r16";
    rl_model_t *m = s_model_opt(s, tune, 64, 0, NULL);
    if (!m) {
        printf("| sync | %s %s | did not fit |\n", s->name, tn);
        return;
    }
    unsigned char h[RL_MODEL_IPC_HANDLE];
    uint64_t layout = 0;
    int64_t nd = 0;
    size_t n = 0;
    rl_model_trainable(m, &n);
    if (rl_model_device_ipc_export(m, h, &layout, &nd)) {
        s_fail("sync", rl_model_errmsg(m));
    }
    int in[2], out[2];
    if (pipe(in) || pipe(out)) {
        s_fail("sync", "pipe");
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { // exec at once: the child must not use this process's CUDA context
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        char a[8], b[8];
        snprintf(a, sizeof a, "%d", s_tiny);
        snprintf(b, sizeof b, "%d", (int)tune);
        execl("/proc/self/exe", "bench_gpu", "--sync-child", a, b, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    FILE *to = fdopen(in[1], "w"), *from = fdopen(out[0], "r");
    char hex[2 * RL_MODEL_IPC_HANDLE + 1], line[128];
    for (int i = 0; i < RL_MODEL_IPC_HANDLE; i++) {
        snprintf(hex + 2 * i, 3, "%02x", h[i]);
    }
    double t_ipc = -1, t_push = -1, t[5];
    fprintf(to, "ipc %s %llx %lld\n", hex, (unsigned long long)layout, (long long)nd);
    fflush(to);
    if (fgets(line, sizeof line, from)) {
        t_ipc = atof(line);
    }
    fprintf(to, "push\n");
    fflush(to);
    if (fgets(line, sizeof line, from)) {
        t_push = atof(line);
    }
    fclose(to);
    fclose(from);
    int st = 0;
    waitpid(pid, &st, 0);
    if (t_ipc <= 0 || t_push <= 0) {
        s_fail("sync", "the sampler's process failed");
    }
    for (int rep = -1; rep < 5; rep++) {
        double t0 = rl_bench_now();
        if (rl_model_device_pull(m, 0)) {
            s_fail("sync", rl_model_errmsg(m));
        }
        if (rep >= 0) {
            t[rep] = rl_bench_now() - t0;
        }
    }
    double t_pull = rl_bench_median(t, 5), mb = (double)n * 4 / 1e6;
    char what[128];
    snprintf(what, sizeof what, "%s %s, %.1f MB", s->name, tn, mb);
    printf("| sync | %s | CUDA IPC %.3f ms (%.1f GB/s); host path >= %.3f ms (pull %.3f + load "
           "%.3f, transfer not counted): IPC %.1fx faster |\n",
           what, 1e3 * t_ipc, mb / 1e3 / t_ipc, 1e3 * (t_pull + t_push), 1e3 * t_pull, 1e3 * t_push,
           (t_pull + t_push) / t_ipc);
    s_record("sync", what, 1e3 * t_ipc, "ms ipc");
    s_record("sync", what, 1e3 * (t_pull + t_push), "ms host (lower bound)");
    rl_model_destroy(&m);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--sync-child")) {
        return s_sync_child(argv);
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            s_quick = 1;
        } else if (!strcmp(argv[i], "--tiny")) {
            s_tiny = 1;
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            if (!(s_json = fopen(argv[++i], "w"))) {
                s_fail(argv[i], "cannot write");
            }
        } else {
            fprintf(stderr, "usage: bench_gpu [--quick] [--tiny] [--json FILE]\n");
            return 2;
        }
    }
    char err[2048], msg[512];
    rl_device_t d = {1, 0};
    rl_device_info_t info;
    if (rl_device_check(&d, 0, &info, err, sizeof err) != 0) {
        fprintf(stderr, "bench_gpu: %s\n", err);
        return 77; // no GPU: nothing to measure
    }
    s_cu = rl_device_cuda(err, sizeof err);
    if (!s_cu || s_cu->ctx_new(0, &s_ctx, msg, sizeof msg) != 0) {
        s_fail("cuda:0", s_cu ? msg : err);
    }
    printf("bench_gpu: %s, %.0f GiB, compute capability %d.%d, driver %d, runtime %d\n\n",
           info.name, (double)info.mem_total / (1 << 30), info.cc_major, info.cc_minor,
           info.driver_version, info.runtime_version);
    printf("| section | what | result |\n|---|---|---|\n");
    double peak = s_peak(), gbs = s_copy();
    const s_shape_t *shapes[2] = {s_tiny ? &S_TINY : &S_05B, &S_15B};
    const int n_shapes = s_tiny || s_quick ? 1 : 2;
    const int Ts[2] = {s_tiny ? 64 : 1024, s_tiny ? 128 : 4096};
    for (int k = 0; k < n_shapes; k++) {
        for (int ti = 0; ti < 2; ti++) {
            s_train(shapes[k], RL_TUNE_LORA, Ts[ti], peak);
            s_train(shapes[k], RL_TUNE_FULL, Ts[ti], peak);
        }
        s_decode(shapes[k], gbs);
        s_attn(shapes[k], gbs);
    }
    for (int k = 0; k < (s_tiny ? 1 : 2); k++) { // the attention alone: both head shapes
        for (int ti = 0; ti < 2; ti++) {
            s_attn_train(s_tiny ? &S_TINY : k == 0 ? &S_05B : &S_15B, Ts[ti], peak);
        }
    }
    s_sync(shapes[0], RL_TUNE_LORA);
    s_sync(shapes[0], RL_TUNE_FULL);
    s_cu->ctx_free(s_ctx);
    if (s_json) {
        fclose(s_json);
    }
    return 0;
}

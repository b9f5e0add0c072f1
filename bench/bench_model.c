// bench_model — the model's speed beside the machine's ceiling measured in the same run, with the
// same OpenBLAS thread count (DESIGN.md §5). Random qwen2-style models (q/k/v biases, GQA, SwiGLU,
// tied embeddings, V 2048 / 8192 / 8192) of about 1M, 10M and 100M parameters. Not a test.
//
//   train   GFLOP/s of one training step (rl_model_forward train=1 + rl_model_backward, B*T = 2048
//           tokens, T = 128 and 512), full and LoRA (r 8, all 7 projections), beside cblas_sgemm
//           on the step's own matmuls (M = B*T, every projection and the lm_head).
//           FLOPs counted (model FLOPs, the PaLM / llm.c convention, tied head counted once):
//             full: 6*N*tok + 6*L*T*QD*tok            (causal attention: 12*L*T^2*QD/2 per seq)
//             LoRA: 4*N*tok + 6*N_lora*tok + 6*L*T*QD*tok (frozen base: forward 2N + input grads
//                   2N; adapter forward 2, backward 4 per adapter parameter)
//           The ceiling is the same matmuls through raw sgemm: forward x*W^T (M,OC,IC), input grad
//           dY*W (M,IC,OC), and (full only) weight grad dY^T*X (OC,IC,M), each shape timed
//           alone; ceiling GFLOP/s = their FLOPs / their summed time (attention excluded).
//   mem     bytes per parameter: VmRSS growth of a fresh process from before the model to after
//           one training step at the benchmark's B*T, with Adam moments (2 floats per trainable
//           parameter, zeroed like the trainer does) allocated here.
//   decode  tokens/s of rl_model_step: batch 1 (n = 1: sgemv) against raw cblas_sgemv over the
//           model's own weight matrices (every projection + lm_head once per token); batch 64
//           (64 slots, one token each per step) against raw sgemm with M = 64 on the same weights;
//           prefill of one 512-token prompt in one call (logits of the last row only) against
//           sgemm with M = 512 on the projections + one sgemv on the lm_head.
// Every figure is the median of several repetitions. Each (model, section) runs in a fresh child
// process (this program re-executed), so RSS figures are not polluted by earlier sections.
//
//   bench_model                         all models, all sections
//   bench_model --sizes 1M,10M          a subset
//   bench_model train|decode SIZE [full|lora]   one section (what the parent runs)
//   bench_model steps SIZE full|lora T STEPS [THREADS]   training steps only (perf record)
//   bench_model prefill SIZE RUNS                 512-token prefills only (perf record)
//   bench_model grpo STEPS [THREADS [LANES]]      the cookbook GRPO update's shape (s_grpo)
//   bench_model decode64 SIZE ROUNDS              batch-64 decode only (perf record)
#include "rl_bench.h"
#include "rl_model.h"

#include <cblas.h>
#undef I

#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern void openblas_set_num_threads(int);
extern int openblas_get_num_threads(void);
extern int openblas_get_num_procs(void);
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern char **environ;

#define TOKENS 2048 // B*T of a training step

static float *s_rand(size_t n) {
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)((double)(i * 2654435761u % 1000) / 1000.0 - 0.5) * 0.1f;
    }
    return p;
}

// ---------------------------------------------------------------------------------------------
// models

typedef struct {
    const char *name;
    int C, I, L, NH, NKV, V;
} s_size_t;

static const s_size_t s_sizes[] = {
    {"1M", 128, 384, 4, 4, 2, 2048},
    {"10M", 256, 1024, 8, 4, 2, 8192},
    {"100M", 1024, 2816, 8, 16, 4, 8192},
};
#define NSIZES ((int)(sizeof s_sizes / sizeof s_sizes[0]))

static const s_size_t *s_size(const char *name) {
    for (int i = 0; i < NSIZES; i++) {
        if (strcmp(s_sizes[i].name, name) == 0) {
            return &s_sizes[i];
        }
    }
    fprintf(stderr, "unknown size %s (1M, 10M, 100M)\n", name);
    exit(2);
}

static rl_hf_config_t s_cfg(const s_size_t *z) {
    char json[1024], err[512];
    snprintf(json, sizeof json,
             "{\"model_type\":\"qwen2\",\"hidden_size\":%d,\"intermediate_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"vocab_size\":%d,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"
             "\"max_position_embeddings\":4096,\"initializer_range\":0.02,"
             "\"tie_word_embeddings\":true}",
             z->C, z->I, z->L, z->NH, z->NKV, z->V);
    rl_hf_config_t cfg;
    if (rl_hf_config_parse(json, strlen(json), "bench", &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "config: %s\n", err);
        exit(1);
    }
    return cfg;
}

static rl_model_t *s_model(const rl_hf_config_t *cfg, rl_tune_t tune) {
    rl_model_opts_t o;
    rl_model_opts_default(&o);
    o.tune = tune;
    o.lora_r = 8;
    o.lora_targets = RL_LORA_ALL;
    char err[512];
    rl_model_t *m = rl_model_new_random(cfg, &o, 42, err, sizeof err);
    if (!m) {
        fprintf(stderr, "model: %s\n", err);
        exit(1);
    }
    return m;
}

// The Linear shapes of one layer (out, in) and how many of each per layer.
typedef struct {
    int OC, IC;
} s_shape_t;

static int s_layer_shapes(const rl_hf_config_t *c, s_shape_t *s) {
    int C = c->hidden_size, I = c->intermediate_size, QD = c->num_attention_heads * c->head_dim;
    int KVD = c->num_key_value_heads * c->head_dim;
    s[0] = (s_shape_t){QD, C};   // q
    s[1] = (s_shape_t){KVD, C};  // k
    s[2] = (s_shape_t){KVD, C};  // v
    s[3] = (s_shape_t){C, QD};   // o
    s[4] = (s_shape_t){I, C};    // gate
    s[5] = (s_shape_t){I, C};    // up
    s[6] = (s_shape_t){C, I};    // down
    return 7;
}

// ---------------------------------------------------------------------------------------------
// ceilings

enum { G_NT = 0, G_NN, G_TN };

// Median seconds of one raw sgemm of the given kind for a Linear (OC,IC) over M rows:
// NT y(M,OC) = x W^T, NN dx(M,IC) = dy W, TN dW(OC,IC) += dy^T x.
static double s_gemm_time(int kind, int M, int OC, int IC) {
    float *x = s_rand((size_t)M * IC), *w = s_rand((size_t)OC * IC), *y = s_rand((size_t)M * OC);
    double flop = 2.0 * M * OC * IC, t[7];
    int inner = 1, reps = 5;
    while (inner * flop < 5e8) {
        inner *= 2;
    }
    for (int r = 0; r < reps; r++) {
        double t0 = rl_bench_now();
        for (int i = 0; i < inner; i++) {
            if (kind == G_NT) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, OC, IC, 1.0f, x, IC, w,
                            IC, 0.0f, y, OC);
            } else if (kind == G_NN) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, IC, OC, 1.0f, y, OC, w,
                            IC, 0.0f, x, IC);
            } else {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, M, 1.0f, y, OC, x,
                            IC, 1.0f, w, IC);
            }
        }
        t[r] = (rl_bench_now() - t0) / inner;
    }
    free(x), free(w), free(y);
    return rl_bench_median(t, reps);
}

// GFLOP/s of raw sgemm over the matmuls of one training step on M rows: every projection of
// every layer and the lm_head, forward + input grad (+ weight grad when full).
static double s_train_ceiling(const rl_hf_config_t *c, int M, int full) {
    s_shape_t s[8];
    int n = s_layer_shapes(c, s);
    double flop = 0.0, sec = 0.0, last[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i <= n; i++) {
        int OC = i < n ? s[i].OC : c->vocab_size, IC = i < n ? s[i].IC : c->hidden_size;
        // q/k/v/o, gate/up share shapes: k == v, gate == up; time each distinct one once
        int dup = i < n && i > 0 && s[i].OC == s[i - 1].OC && s[i].IC == s[i - 1].IC;
        int count = i < n ? c->num_hidden_layers : 1;
        for (int k = 0; k < (full ? 3 : 2); k++) {
            if (!dup) {
                last[k] = s_gemm_time(k, M, OC, IC);
            }
            sec += count * last[k];
            flop += count * 2.0 * M * OC * IC;
        }
    }
    return flop / sec / 1e9;
}

// Weight matrices of the model in the order a step reads them: (ptr, OC, IC).
typedef struct {
    const float *w;
    int OC, IC;
} s_mat_t;

static int s_mats(rl_model_t *m, s_mat_t *out, int head) {
    const rl_hf_config_t *c = rl_model_config(m);
    rl_model_params_t *p = rl_model_params(m);
    s_shape_t s[8];
    s_layer_shapes(c, s);
    int k = 0;
    for (int l = 0; l < c->num_hidden_layers; l++) {
        const rl_layer_params_t *w = &p->layers[l];
        const float *ptr[7] = {w->q_proj, w->k_proj, w->v_proj, w->o_proj,
                               w->gate_proj, w->up_proj, w->down_proj};
        for (int i = 0; i < 7; i++) {
            out[k++] = (s_mat_t){ptr[i], s[i].OC, s[i].IC};
        }
    }
    if (head) {
        out[k++] = (s_mat_t){p->lm_head, c->vocab_size, c->hidden_size};
    }
    return k;
}

// Median seconds of one pass over the model's weights: sgemv per matrix (M == 1) or sgemm with
// M rows (x W^T); with head_gemv the lm_head is one sgemv whatever M (prefill wants one row).
static double s_pass_time(rl_model_t *m, int M, int head_gemv, int reps) {
    s_mat_t mats[1024];
    int n = s_mats(m, mats, 1);
    const rl_hf_config_t *c = rl_model_config(m);
    int mx = c->vocab_size > c->intermediate_size ? c->vocab_size : c->intermediate_size;
    mx = mx > c->hidden_size ? mx : c->hidden_size;
    float *x = s_rand((size_t)M * mx), *y = s_rand((size_t)M * mx);
    double t[64];
    int inner = 1;
    for (int r = -1; r < reps; r++) { // r = -1: warm-up, picks `inner`
        double t0 = rl_bench_now();
        for (int it = 0; it < inner; it++) {
            for (int i = 0; i < n; i++) {
                int rows = i == n - 1 && head_gemv ? 1 : M;
                if (rows == 1) {
                    cblas_sgemv(CblasRowMajor, CblasNoTrans, mats[i].OC, mats[i].IC, 1.0f,
                                mats[i].w, mats[i].IC, x, 1, 0.0f, y, 1);
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, mats[i].OC,
                                mats[i].IC, 1.0f, x, mats[i].IC, mats[i].w, mats[i].IC, 0.0f, y,
                                mats[i].OC);
                }
            }
        }
        double dt = rl_bench_now() - t0;
        if (r < 0) {
            while (inner * dt < 0.05) {
                inner *= 2;
            }
            continue;
        }
        t[r] = dt / inner;
    }
    free(x), free(y);
    return rl_bench_median(t, reps);
}

// ---------------------------------------------------------------------------------------------
// memory

static long s_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            v = atol(line + n + 1);
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// sections

static void s_tokens(int32_t *tok, size_t n, int V, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        tok[i] = (int32_t)(s % (uint64_t)V);
    }
}

static void *(*volatile s_memset)(void *, int, size_t) = memset;

static int s_step(rl_model_t *m, const int32_t *tok, const int *len, int B, int T, float *logp,
                  const float *dlogp) {
    if (rl_model_forward(m, tok, len, B, T, 1.0f, 1, logp, NULL) != 0 ||
        rl_model_backward(m, dlogp) != 0) {
        fprintf(stderr, "step: %s\n", rl_model_errmsg(m));
        exit(1);
    }
    return 0;
}

static void s_train(const s_size_t *z, int full) {
    // OpenBLAS's own buffers exist before the baseline
    float *warm = s_rand(64 * 64);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 64, 64, 64, 1.0f, warm, 64, warm, 64,
                0.0f, warm, 64);
    free(warm);
    rl_hf_config_t cfg = s_cfg(z);
    const int L = cfg.num_hidden_layers, QD = cfg.num_attention_heads * cfg.head_dim;
    const int T0 = 128, B0 = TOKENS / T0;
    int32_t *tok = malloc(TOKENS * sizeof *tok);
    int *len = malloc((size_t)B0 * sizeof *len);
    float *logp = malloc(TOKENS * sizeof *logp), *dlogp = malloc(TOKENS * sizeof *dlogp);
    s_tokens(tok, TOKENS, cfg.vocab_size, 7);
    for (int i = 0; i < TOKENS; i++) {
        dlogp[i] = -1.0f / TOKENS; // an SFT-like loss: every position has a gradient
    }
    long rss0 = s_status_kb("VmRSS");
    rl_model_t *m = s_model(&cfg, full ? RL_TUNE_FULL : RL_TUNE_LORA);
    size_t ntr = 0;
    (void)rl_model_trainable(m, &ntr);
    // Adam m and v, zeroed: the trainer's first update touches every page. Through a volatile
    // pointer, or the compiler folds malloc + memset into an untouched calloc.
    float *adam = malloc(2 * ntr * sizeof *adam);
    s_memset(adam, 0, 2 * ntr * sizeof *adam);
    const double N = (double)rl_model_param_count(m), Nl = full ? 0.0 : (double)ntr;

    const char *mode = full ? "full" : "LoRA r8 all";
    for (int pass = 0; pass < 2; pass++) {
        int T = pass == 0 ? 128 : 512, B = TOKENS / T;
        for (int b = 0; b < B; b++) {
            len[b] = T;
        }
        int steps = N > 5e7 ? 2 : (N > 5e6 ? 4 : 7);
        double t[16];
        // warm-up: a training forward grows the work buffers and faults the activations in
        if (rl_model_forward(m, tok, len, B, T, 1.0f, 1, logp, NULL) != 0) {
            fprintf(stderr, "forward: %s\n", rl_model_errmsg(m));
            exit(1);
        }
        for (int s = 0; s < steps; s++) {
            rl_model_zero_grad(m); // the optimizer's job, outside the timed step
            double t0 = rl_bench_now();
            s_step(m, tok, len, B, T, logp, dlogp);
            t[s] = rl_bench_now() - t0;
            if (pass == 0 && s == 0) {
                long rss1 = s_status_kb("VmRSS");
                double grow = (double)(rss1 - rss0) * 1024.0;
                double wb = 4.0 * N + (full ? 0.0 : 4.0 * Nl), gb = 4.0 * (double)ntr,
                       ab = 8.0 * (double)ntr;
                double rest = grow - wb - gb - ab;
                printf("| bytes/param %s %s (N=%.2fM, trainable %.3fM, B*T=%d) | %.1f B/param "
                       "(RSS +%.0f MiB) | weights %.1f + grads %.2f + Adam %.2f + activations/"
                       "scratch %.1f (%.0f KiB/token) | | |\n",
                       mode, z->name, N / 1e6, (double)ntr / 1e6, TOKENS, grow / N,
                       grow / 1048576.0, wb / N, gb / N, ab / N, rest / N,
                       rest / TOKENS / 1024.0);
                fflush(stdout);
            }
        }
        double sec = rl_bench_median(t, steps);
        double tokn = (double)TOKENS;
        double flop = (full ? 6.0 * N : 4.0 * N + 6.0 * Nl) * tokn +
                      6.0 * L * (double)T * QD * tokn;
        double ceil = s_train_ceiling(&cfg, TOKENS, full);
        double g = flop / sec / 1e9;
        // targets (the speed issue): 10M >= 65% full, >= 55% LoRA; 100M >= 70%; none for 1M
        const char *target = strcmp(z->name, "10M") == 0    ? (full ? "≥65%" : "≥55%")
                             : strcmp(z->name, "100M") == 0 ? "≥70%"
                                                            : "—";
        printf("| train %s %s T=%d B=%d | %.1f GFLOP/s (%.3f s/step, %.0f tok/s; attention %.0f%% "
               "of FLOPs) | sgemm %.1f GFLOP/s on the step's shapes | %.0f%% | %s |\n",
               mode, z->name, T, B, g, sec, tokn / sec,
               100.0 * 6.0 * L * (double)T * QD * tokn / flop, ceil, 100.0 * g / ceil, target);
        fflush(stdout);
    }
    free(adam);
    rl_model_destroy(&m);
    free(tok), free(len), free(logp), free(dlogp);
}

// Only training steps (for perf record): SIZE full|lora T steps.
static void s_steps(const s_size_t *z, int full, int T, int steps, int threads) {
    rl_hf_config_t cfg = s_cfg(z);
    int B = TOKENS / T;
    int32_t *tok = malloc(TOKENS * sizeof *tok);
    int *len = malloc((size_t)B * sizeof *len);
    float *logp = malloc(TOKENS * sizeof *logp), *dlogp = malloc(TOKENS * sizeof *dlogp);
    s_tokens(tok, TOKENS, cfg.vocab_size, 7);
    for (int i = 0; i < TOKENS; i++) {
        dlogp[i] = -1.0f / TOKENS;
    }
    for (int b = 0; b < B; b++) {
        len[b] = T;
    }
    rl_model_t *m = s_model(&cfg, full ? RL_TUNE_FULL : RL_TUNE_LORA);
    if (threads > 0) {
        openblas_set_num_threads(threads);
    }
    for (int s = 0; s < steps; s++) {
        rl_model_zero_grad(m);
        double t0 = rl_bench_now();
        s_step(m, tok, len, B, T, logp, dlogp);
        printf("step %d: %.3f s\n", s, rl_bench_now() - t0);
    }
    rl_model_destroy(&m);
    free(tok), free(len), free(logp), free(dlogp);
}

// The cookbook GRPO update's shape (cookbook/grpo_lora.yaml on models/arith-base: hidden 128,
// intermediate 384, 4 layers, 4/2 heads of 32, V 24, LoRA r 8 on all 7 projections): 128
// sequences of a 9-token prompt and a 20..41-token completion, in micro-batches of 32 padded to
// their longest, forward (train) + backward each; prints ms per update (all 4 micro-batches), the
// median of STEPS, the real and padded token counts. `bench_model grpo STEPS [THREADS]`.
static void s_grpo(int steps, int threads, int lanes) {
    static const s_size_t z = {"arith", 128, 384, 4, 4, 2, 24};
    rl_hf_config_t cfg = s_cfg(&z);
    enum { SEQ = 128, MB = 32, TMAX = 56 };
    int32_t *tok = malloc((size_t)SEQ * TMAX * sizeof *tok);
    int len[SEQ];
    float *logp = malloc((size_t)MB * TMAX * sizeof *logp);
    float *dlogp = malloc((size_t)MB * TMAX * sizeof *dlogp);
    s_tokens(tok, (size_t)SEQ * TMAX, cfg.vocab_size, 11);
    uint64_t r = 5;
    long real = 0, padded = 0;
    for (int b = 0; b < SEQ; b++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        len[b] = 9 + 20 + (int)(r % 22);
        real += len[b];
    }
    rl_model_t *m = s_model(&cfg, RL_TUNE_LORA);
    if (threads > 0) {
        openblas_set_num_threads(threads);
    }
    rl_model_set_lanes(m, lanes);
    double *t = malloc((size_t)steps * sizeof *t);
    for (int s = 0; s < steps; s++) {
        rl_model_zero_grad(m);
        double t0 = rl_bench_now();
        padded = 0;
        for (int b0 = 0; b0 < SEQ; b0 += MB) {
            int T = 1;
            for (int i = 0; i < MB; i++) {
                T = len[b0 + i] > T ? len[b0 + i] : T;
            }
            int32_t mt[MB * TMAX];
            for (int i = 0; i < MB; i++) {
                memcpy(mt + (size_t)i * T, tok + (size_t)(b0 + i) * TMAX, (size_t)T * sizeof *mt);
                for (int j = 0; j < T; j++) {
                    dlogp[(size_t)i * T + j] = j >= 9 && j < len[b0 + i] ? -1.0f / 4096 : 0.0f;
                }
            }
            padded += (long)MB * T;
            s_step(m, mt, len + b0, MB, T, logp, dlogp);
        }
        t[s] = rl_bench_now() - t0;
    }
    printf("grpo update (128 x 9+20..41 tokens, micro-batches of 32, LoRA r 8, %d threads, "
           "lanes %d): "
           "median %.2f ms of %d, %ld real tokens, %ld padded\n",
           openblas_get_num_threads(), lanes, rl_bench_median(t, steps) * 1e3, steps, real, padded);
    rl_model_destroy(&m);
    free(t), free(tok), free(logp), free(dlogp);
}

// Only prefills (for perf record): SIZE RUNS.
static void s_prefills(const s_size_t *z, int runs) {
    rl_hf_config_t cfg = s_cfg(z);
    rl_model_t *m = s_model(&cfg, RL_TUNE_NONE);
    const int P = 512, V = cfg.vocab_size;
    rl_kvcache_t *kv = rl_kvcache_new(m, 1, P);
    int32_t *tok = malloc(P * sizeof *tok);
    int *slot = calloc(P, sizeof *slot), *pos = malloc(P * sizeof *pos);
    unsigned char *want = calloc(P, 1);
    float *logits = malloc((size_t)P * V * sizeof *logits);
    s_tokens(tok, P, V, 9);
    for (int i = 0; i < P; i++) {
        pos[i] = i;
    }
    want[P - 1] = 1;
    for (int r = 0; r < runs; r++) {
        double t0 = rl_bench_now();
        rl_model_step(m, kv, tok, slot, pos, P, want, logits);
        printf("prefill %d: %.3f s\n", r, rl_bench_now() - t0);
    }
    free(tok), free(slot), free(pos), free(want), free(logits);
    rl_kvcache_destroy(&kv);
    rl_model_destroy(&m);
}

// Batch 64: 64 slots with 32-token prompts, then `rounds` rounds of steps of one token per slot
// (positions P.. again each round, overwriting the cache).
static void s_decode64(rl_model_t *m, const s_size_t *z, int rounds) {
    const char *lanes = getenv("RL_BENCH_STEP_LANES"); // A/B of rl_model_set_step_lanes
    if (lanes) {
        rl_model_set_step_lanes(m, atoi(lanes));
    }
    const rl_hf_config_t *cfg = rl_model_config(m);
    const int V = cfg->vocab_size;
    const double N = (double)rl_model_param_count(m);
    const int reps = N > 5e7 ? 5 : 9;
    const int S = 64, P = 32, steps = N > 5e7 ? 12 : 24;
    rl_kvcache_t *kv = rl_kvcache_new(m, S, P + steps + 1);
    int n = S * P;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    int *slot = malloc((size_t)n * sizeof *slot), *pos = malloc((size_t)n * sizeof *pos);
    unsigned char *want = calloc((size_t)n, 1);
    float *logits = malloc((size_t)n * V * sizeof *logits);
    s_tokens(tok, (size_t)n, V, 5);
    for (int i = 0; i < n; i++) {
        slot[i] = i / P, pos[i] = i % P;
        want[i] = pos[i] == P - 1;
    }
    rl_model_step(m, kv, tok, slot, pos, n, want, logits);
    // rounds of the same steps (positions P.. again, overwriting the cache) so that a
    // millisecond step has enough samples for its median
    double *t = malloc((size_t)rounds * steps * sizeof *t);
    for (int s = 0; s < rounds * steps; s++) {
        for (int i = 0; i < S; i++) {
            slot[i] = i, pos[i] = P + s % steps, tok[i] = (int32_t)((i * 131 + s * 17) % V);
        }
        double t0 = rl_bench_now();
        if (rl_model_step(m, kv, tok, slot, pos, S, NULL, logits) != 0) {
            fprintf(stderr, "step: %s\n", rl_model_errmsg(m));
            exit(1);
        }
        t[s] = rl_bench_now() - t0;
    }
    double sec = rl_bench_median(t, rounds * steps);
    double csec = s_pass_time(m, S, 0, reps);
    printf("| decode batch 64 %s (context 32–%d) | %.0f tok/s (%.1f ms/step) | sgemm M=64 on "
           "all weights %.0f tok/s | %.0f%% | %s |\n",
           z->name, P + steps, S / sec, sec * 1e3, S / csec, 100.0 * csec / sec,
           N > 5e7 ? "≥50%" : "≥75%");
    fflush(stdout);
    free(tok), free(slot), free(pos), free(want), free(logits), free(t);
    rl_kvcache_destroy(&kv);
}

static void s_decode(const s_size_t *z) {
    rl_hf_config_t cfg = s_cfg(z);
    rl_model_t *m = s_model(&cfg, RL_TUNE_NONE);
    const int V = cfg.vocab_size;
    const double N = (double)rl_model_param_count(m);
    const int reps = N > 5e7 ? 5 : 9;

    // ---- batch 1: prompt of 64, then decode tokens one at a time (positions 64..)
    {
        const int P = 64, steps = N > 5e7 ? 48 : 96;
        rl_kvcache_t *kv = rl_kvcache_new(m, 1, P + steps + 1);
        int32_t tok[64];
        int slot[64], pos[64];
        unsigned char want[64] = {0};
        float *logits = malloc((size_t)P * V * sizeof *logits);
        s_tokens(tok, P, V, 3);
        for (int i = 0; i < P; i++) {
            slot[i] = 0, pos[i] = i;
        }
        want[P - 1] = 1;
        rl_model_step(m, kv, tok, slot, pos, P, want, logits);
        double t[128];
        int32_t next = tok[P - 1];
        for (int s = 0; s < steps; s++) {
            int p = P + s, sl = 0;
            double t0 = rl_bench_now();
            if (rl_model_step(m, kv, &next, &sl, &p, 1, NULL, logits) != 0) {
                fprintf(stderr, "step: %s\n", rl_model_errmsg(m));
                exit(1);
            }
            t[s] = rl_bench_now() - t0;
            next = (int32_t)((next * 31 + 7) % V);
        }
        double sec = rl_bench_median(t, steps);
        double csec = s_pass_time(m, 1, 1, reps);
        printf("| decode batch 1 %s (context 64–%d) | %.0f tok/s (%.2f ms/token, %.1f GB/s of "
               "weights) | sgemv over all weights %.0f tok/s (%.1f GB/s) | %.0f%% | ≥50%% |\n",
               z->name, P + steps, 1.0 / sec, sec * 1e3, 4.0 * N / sec / 1e9, 1.0 / csec,
               4.0 * N / csec / 1e9, 100.0 * csec / sec);
        fflush(stdout);
        free(logits);
        rl_kvcache_destroy(&kv);
    }
    s_decode64(m, z, N > 5e7 ? 1 : 8);
    // ---- prefill: one prompt of 512 tokens in one call, logits of the last row
    {
        const int P = 512, runs = N > 5e7 ? 3 : 5;
        rl_kvcache_t *kv = rl_kvcache_new(m, 1, P);
        int32_t *tok = malloc(P * sizeof *tok);
        int *slot = calloc(P, sizeof *slot), *pos = malloc(P * sizeof *pos);
        unsigned char *want = calloc(P, 1);
        float *logits = malloc((size_t)P * V * sizeof *logits);
        s_tokens(tok, P, V, 9);
        for (int i = 0; i < P; i++) {
            pos[i] = i;
        }
        want[P - 1] = 1;
        rl_model_step(m, kv, tok, slot, pos, P, want, logits); // warm-up
        double t[8];
        for (int r = 0; r < runs; r++) {
            double t0 = rl_bench_now();
            if (rl_model_step(m, kv, tok, slot, pos, P, want, logits) != 0) {
                fprintf(stderr, "step: %s\n", rl_model_errmsg(m));
                exit(1);
            }
            t[r] = rl_bench_now() - t0;
        }
        double sec = rl_bench_median(t, runs);
        double csec = s_pass_time(m, P, 1, runs);
        const int L = cfg.num_hidden_layers, QD = cfg.num_attention_heads * cfg.head_dim;
        double Nlayers = N - (double)V * cfg.hidden_size;
        double flop = 2.0 * Nlayers * P + 2.0 * L * (double)P * P * QD + 2.0 * V * cfg.hidden_size;
        printf("| prefill 512 %s | %.0f tok/s (%.1f GFLOP/s) | sgemm M=512 on the projections "
               "%.0f tok/s (%.1f GFLOP/s) | %.0f%% | |\n",
               z->name, P / sec, flop / sec / 1e9, P / csec,
               (2.0 * Nlayers * P + 2.0 * V * cfg.hidden_size) / csec / 1e9,
               100.0 * csec / sec);
        fflush(stdout);
        free(tok), free(slot), free(pos), free(want), free(logits);
        rl_kvcache_destroy(&kv);
    }
    rl_model_destroy(&m);
}

// ---------------------------------------------------------------------------------------------

static void s_child(const char *self, char *const *args) {
    fflush(stdout);
    pid_t pid;
    if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0) {
        perror("posix_spawn");
        exit(1);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "child %s %s failed\n", args[1], args[2]);
    }
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "train") == 0) {
        s_train(s_size(argv[2]), argc < 4 || strcmp(argv[3], "lora") != 0);
        return 0;
    }
    if (argc >= 6 && strcmp(argv[1], "steps") == 0) {
        s_steps(s_size(argv[2]), strcmp(argv[3], "lora") != 0, atoi(argv[4]), atoi(argv[5]),
                argc > 6 ? atoi(argv[6]) : 0);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "grpo") == 0) {
        s_grpo(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 0, argc > 4 ? atoi(argv[4]) : 0);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "prefill") == 0) {
        s_prefills(s_size(argv[2]), atoi(argv[3]));
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "decode64") == 0) {
        const s_size_t *z = s_size(argv[2]);
        rl_hf_config_t cfg = s_cfg(z);
        rl_model_t *m = s_model(&cfg, RL_TUNE_NONE);
        s_decode64(m, z, atoi(argv[3]));
        rl_model_destroy(&m);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "decode") == 0) {
        s_decode(s_size(argv[2]));
        return 0;
    }
    const char *only = argc >= 3 && strcmp(argv[1], "--sizes") == 0 ? argv[2] : NULL;
    char cpu[512] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            snprintf(cpu, sizeof cpu, "%s", c ? c + 2 : line);
            cpu[strcspn(cpu, "\n")] = 0;
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    openblas_set_num_threads(openblas_get_num_procs()); // what the model's threads 0 sets
    printf("machine: %s, %d OpenBLAS threads, core %s (%s)\n", cpu, openblas_get_num_threads(),
           openblas_get_corename(), openblas_get_config());
    printf("models: qwen2-style, tied embeddings, V as given; B*T = %d for training\n", TOKENS);
    for (int i = 0; i < NSIZES; i++) {
        rl_hf_config_t c = s_cfg(&s_sizes[i]);
        printf("  %s: C=%d I=%d L=%d NH=%d NKV=%d D=%d V=%d, N=%.2fM\n", s_sizes[i].name,
               c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
               c.num_key_value_heads, c.head_dim, c.vocab_size,
               (double)rl_hf_param_count(&c) / 1e6);
    }
    printf("| figure | measured | ceiling in the same run | ratio | target |\n"
           "|---|---|---|---|---|\n");
    for (int i = 0; i < NSIZES; i++) {
        const char *nm = s_sizes[i].name;
        if (only) {
            char pat[32];
            snprintf(pat, sizeof pat, ",%s,", nm);
            char list[256];
            snprintf(list, sizeof list, ",%s,", only);
            if (!strstr(list, pat)) {
                continue;
            }
        }
        char *a1[] = {argv[0], "train", (char *)nm, "full", NULL};
        char *a2[] = {argv[0], "train", (char *)nm, "lora", NULL};
        char *a3[] = {argv[0], "decode", (char *)nm, NULL};
        s_child("/proc/self/exe", a1);
        s_child("/proc/self/exe", a2);
        s_child("/proc/self/exe", a3);
    }
    return 0;
}

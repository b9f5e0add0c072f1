// test_fsdp — the sharded training step (trainer/rl_fsdp under rl_policy) against the 1×1 step.
//   test_fsdp run <dp> <fsdp> <full|lora> <sft|grpo|critic> <rows> <outdir>
// trains the cookbook's arith base model (0.8M parameters, tied embeddings, attention biases) for
// 5 optimizer steps on fixed batches of <rows> rows (at most 10): SFT's loss, GRPO's (2 passes, a
// KL term to the reference: a sharded frozen copy under full tuning, the adapter disabled under
// LoRA), or PPO's critic (the clipped value loss, a value head). Each rank takes its rows of the
// global batch (rl_mesh_split: 10 rows over 4 ranks are 3, 3, 2, 2; micro-batches of 2 rows, so
// some ranks run idle micro-batches); the divisors are the global batch's. dp = fsdp = 1 runs the
// plain 1×1 policy without MPI; any other shape runs under mpirun, sharded. Rank 0 writes
// <outdir>/result.bin (each step's loss and gradient norm, the probe outputs: the policy's
// logprobs or the critic's values of every row after training, and the trainable weights), and
// every rank writes <outdir>/rank<r>.txt (its bytes of model state and the rows and tokens it
// trained on).
//   test_fsdp compare <refdir> <dir> <dp> <fsdp>
// checks a sharded run against the 1×1 one: losses, gradient norms, probe outputs, weights and
// the update itself within the tolerances below (`exact`: identical), and that the sharding is
// real: each rank's parameter, gradient and optimizer bytes within 15% of 1/fsdp of the 1×1
// figure, each rank trained on its share of the rows, and all ranks together on every token
// exactly once per step.
#include "rl_coll.h"
#include "rl_algos.h"
#include "rl_config.h"
#include "rl_err.h"
#include "rl_loss.h"
#include "rl_mesh.h"
#include "rl_policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { S_BMAX = 10, S_T = 14, S_STEPS = 5, S_MB = 2 };
static int s_b = 10; // rows of the global batch (the run's argument), <= S_BMAX

// Tolerances of a sharded run against the 1×1 run. The gradients are the same float sums in
// another order (per-rank partial sums, then the collectives'); AdamW's first steps at lr 1e-3
// with gradients clipped from norms up to 280 to 1 amplify those last bits. Measured on this
// machine: update error <= 2e-4 of the update, loss <= 2.4e-4 relative (GRPO, full), gradient
// norm <= 1.1e-3 relative, probe logprobs <= 7e-3, weights <= 1.2e-4. A lost or doubled
// micro-batch, a wrong divisor or a stale shard moves these by orders of magnitude.
#define S_TOL_LOSS 1e-3   // |loss - loss_1x1| / max(|loss_1x1|, 0.1)
#define S_TOL_GNORM 5e-3  // relative
#define S_TOL_PROBE 2e-2  // absolute, logprobs (about -3) or values
#define S_TOL_W 5e-4      // absolute, every weight
#define S_TOL_UPDATE 1e-2 // ||dw - dw_1x1|| / ||dw_1x1|| over the 5 steps

static void s_die(const char *what, const char *err) {
    fprintf(stderr, "test_fsdp: %s: %s\n", what, err);
    exit(1);
}

static rl_recipe_t *s_recipe(const char *tune, const char *algo, const char *dir) {
    char path[4200], err[4096];
    snprintf(path, sizeof path, "%s/recipe.%ld.yaml", dir, (long)getpid()); // one per rank
    FILE *f = fopen(path, "w");
    if (!f) {
        s_die(path, "cannot write");
    }
    int lora = strcmp(tune, "lora") == 0, critic = strcmp(algo, "critic") == 0;
    fprintf(f, "run: {name: fsdp, seed: 3}\nmodel: {path: %s/cookbook/models/arith-base}\n",
            RL_SOURCE_DIR);
    if (lora) {
        fprintf(f, "lora: {enabled: true, r: 4, alpha: 8, target_modules: all-linear}\n");
    }
    fprintf(f,
            "data: {train: %s/cookbook/data/arith/train.jsonl, format: prompt, "
            "answer_field: answer}\n",
            RL_SOURCE_DIR);
    if (strcmp(algo, "sft") == 0) {
        fprintf(f, "algorithm: {name: sft}\n");
    } else {
        fprintf(f, "algorithm: {name: %s, beta: 0.05}\n", critic ? "ppo" : "grpo");
        fprintf(f, "rewards: [{name: c, builtin: math_answer}]\n");
    }
    if (critic) {
        fprintf(f, "critic: {init: base, lora: %s}\n", lora ? "true" : "false");
    }
    fprintf(f,
            "optim: {lr: 1.0e-3, weight_decay: 0.01, max_grad_norm: 1.0}\n"
            "train: {steps: %d, batch_size: %d}\n",
            S_STEPS, s_b);
    fclose(f);
    rl_recipe_t *r = NULL;
    if (rl_recipe_load_file(rl_algos(), path, NULL, 0, RL_RECIPE_NO_FILE_CHECKS, &r, err,
                            sizeof err) != 0) {
        s_die(path, err);
    }
    return r;
}

// The global batch of a step: row b of 8 + (b + step) % 7 tokens, the last 5 of them trained.
static int32_t s_tok[S_BMAX * S_T];
static int s_len[S_BMAX];
static uint8_t s_mask[S_BMAX * S_T];

static int64_t s_batch(int step) {
    int64_t n_tok = 0;
    memset(s_tok, 0, sizeof s_tok);
    memset(s_mask, 0, sizeof s_mask);
    for (int b = 0; b < s_b; b++) {
        s_len[b] = 8 + (b + step) % 7;
        for (int t = 0; t < s_len[b]; t++) {
            s_tok[b * S_T + t] = (b * 7 + t * 5 + step * 3) % 24;
            s_mask[b * S_T + t] = t >= s_len[b] - 5;
            n_tok += s_mask[b * S_T + t];
        }
    }
    return n_tok;
}

typedef struct {
    int rows;
    double loss[S_STEPS], gnorm[S_STEPS];
    float probe[S_BMAX * S_T];
    size_t n_w;
    float *w0, *w; // the trainable weights before and after training
} s_result_t;

static void s_write(const char *dir, const s_result_t *res) {
    char path[4200];
    snprintf(path, sizeof path, "%s/result.bin", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(res, offsetof(s_result_t, n_w), 1, f) != 1 ||
        fwrite(&res->n_w, sizeof res->n_w, 1, f) != 1 ||
        fwrite(res->w0, sizeof(float), res->n_w, f) != res->n_w ||
        fwrite(res->w, sizeof(float), res->n_w, f) != res->n_w || fclose(f) != 0) {
        s_die(path, "cannot write");
    }
}

static void s_read(const char *dir, s_result_t *res) {
    char path[4200];
    snprintf(path, sizeof path, "%s/result.bin", dir);
    FILE *f = fopen(path, "rb");
    if (!f || fread(res, offsetof(s_result_t, n_w), 1, f) != 1 ||
        fread(&res->n_w, sizeof res->n_w, 1, f) != 1 || res->n_w > ((size_t)1 << 28) ||
        !(res->w0 = malloc(res->n_w * sizeof(float) + 1)) ||
        !(res->w = malloc(res->n_w * sizeof(float) + 1)) ||
        fread(res->w0, sizeof(float), res->n_w, f) != res->n_w ||
        fread(res->w, sizeof(float), res->n_w, f) != res->n_w) {
        s_die(path, "cannot read");
    }
    fclose(f);
}

// Rows [lo, hi) of the global (s_b, S_T) arrays as rl_policy_rows_t.
static rl_policy_rows_t s_rows(int lo, int hi) {
    return (rl_policy_rows_t){hi - lo, S_T, s_tok + lo * S_T, s_len + lo, s_mask + lo * S_T, 1};
}

// One update with the registry's loss `name` (rl_loss.h): its loss and gradient norm into *st.
static int s_train(const char *name, rl_policy_t *p, const rl_recipe_t *r, const rl_loss_batch_t *b,
                   rl_policy_step_stats_t *st, char *err, size_t err_len) {
    const rl_loss_t *L = rl_loss_find(name);
    rl_loss_out_t out;
    memset(&out, 0, sizeof out);
    int rc = L->train(L, p, r, b, &out, err, err_len);
    rl_loss_stats_get(&out.stats, "loss", &st->loss);
    rl_loss_stats_get(&out.stats, "grad_norm", &st->grad_norm);
    return rc;
}

static int s_run(int dp, int fsdp, const char *tune, const char *algo, const char *dir, int *argc,
                 char ***argv) {
    char err[4096];
    rl_recipe_t *r = s_recipe(tune, algo, dir);
    rl_coll_t *coll = NULL;
    rl_mesh_t mesh = {dp, fsdp};
    int sharded = dp * fsdp > 1, rank = 0, world = dp * fsdp;
    if (sharded) {
        if (rl_coll_mpi(&mesh, argc, argv, &coll, err, sizeof err) != 0) {
            s_die("mpi", err);
        }
        rank = rl_coll_rank(coll);
    }
    int critic = strcmp(algo, "critic") == 0;
    rl_policy_kind_t kind = critic ? RL_POLICY_CRITIC : RL_POLICY_ACTOR;
    rl_policy_t *p = NULL;
    int rc = sharded  ? rl_policy_new_sharded(r, 1, kind, coll, &p, err, sizeof err)
             : critic ? rl_policy_new_critic(r, 1, &p, err, sizeof err)
                      : rl_policy_new(r, 1, &p, err, sizeof err);
    if (rc) {
        s_die("policy", err);
    }
    int64_t lo, hi;
    rl_mesh_split(s_b, world, rank, &lo, &hi);
    s_result_t res;
    memset(&res, 0, sizeof res);
    res.rows = s_b;
    const float *w0 = rl_policy_weights(p, &res.n_w); // collective on a mesh (full tuning)
    if (!w0 || !(res.w0 = malloc(res.n_w * sizeof(float) + 1))) {
        s_die("weights", "gathering failed");
    }
    memcpy(res.w0, w0, res.n_w * sizeof(float));
    int64_t rows = 0, tokens = 0;
    float ref[S_BMAX * S_T], old[S_BMAX * S_T], ret[S_BMAX * S_T];
    for (int step = 0; step < S_STEPS; step++) {
        int64_t n_tok = s_batch(step);
        rl_policy_rows_t rw = s_rows((int)lo, (int)hi);
        for (int b = (int)lo; b < hi; b++) {
            for (int t = 0; t < S_T; t++) {
                tokens += s_mask[b * S_T + t];
            }
        }
        rows += hi - lo;
        rl_policy_step_stats_t st = {0};
        rl_loss_batch_t lb = {.B = rw.B, .T = S_T, .tokens = rw.tokens, .lengths = rw.lengths,
                              .mask = rw.mask, .lr = 1e-3, .temperature = 1.0, .step = step + 1,
                              .micro_batch = S_MB, .iterations = 1};
        if (strcmp(algo, "sft") == 0) {
            lb.denom = (double)n_tok;
            rc = s_train("sft", p, r, &lb, &st, err, sizeof err);
        } else if (!critic) {
            rc = rl_policy_logprobs(p, rw.tokens, rw.lengths, rw.B, S_T, 1.0f, 0, ref, err,
                                    sizeof err);
            double adv[S_BMAX];
            for (int b = 0; b < s_b; b++) {
                adv[b] = ((b * 3 + step) % 5 - 2) * 0.5;
            }
            lb.adv = adv + lo;
            lb.ref_logp = ref;
            lb.denom = (double)n_tok;
            lb.step = 0; // errors name the pass
            lb.iterations = 2;
            if (!rc) {
                rc = s_train("grpo", p, r, &lb, &st, err, sizeof err);
            }
        } else {
            rc = rl_policy_values(p, rw.tokens, rw.lengths, rw.B, S_T, old, err, sizeof err);
            for (int i = 0; i < s_b * S_T; i++) { // returns of the global batch's rows
                ret[i] = (float)((i * 7 % 11) - 5) * 0.1f;
            }
            r->algorithm.value_clip = 0.2;
            r->algorithm.loss_agg = RL_RECIPE_AGG_TOKEN_MEAN;
            lb.values = old;
            lb.returns = ret + lo * S_T;
            lb.denom = (double)n_tok;
            lb.iterations = 2;
            if (!rc) {
                rc = s_train("value", p, r, &lb, &st, err, sizeof err);
            }
        }
        // the losses are each rank's share: the caller sums them
        if (!rc && sharded) {
            rc = rl_coll_all_reduce_f64(coll, RL_MESH_WORLD, &st.loss, 1, err, sizeof err);
        }
        if (rc) {
            s_die("step", err);
        }
        res.loss[step] = st.loss;
        res.gnorm[step] = st.grad_norm;
    }
    // the probe: every rank runs the whole batch (the same rows), rank 0 keeps it
    s_batch(S_STEPS);
    rc = critic
             ? rl_policy_values(p, s_tok, s_len, s_b, S_T, res.probe, err, sizeof err)
             : rl_policy_logprobs(p, s_tok, s_len, s_b, S_T, 1.0f, 1, res.probe, err, sizeof err);
    if (rc) {
        s_die("probe", err);
    }
    const float *w = rl_policy_weights(p, &res.n_w);
    if (!w) {
        s_die("weights", "gathering failed");
    }
    res.w = (float *)w;
    if (rank == 0) {
        s_write(dir, &res);
    }
    free(res.w0);
    rl_policy_bytes_t by;
    rl_policy_bytes(p, &by);
    char path[4200];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        s_die(path, "cannot write");
    }
    fprintf(f, "%zu %zu %zu %zu %zu %lld %lld %.6f\n", by.params, by.grads, by.replicated,
            by.optimizer, by.buffers, (long long)rows, (long long)tokens, by.coll_seconds);
    fclose(f);
    rl_policy_destroy(&p);
    rl_coll_destroy(&coll);
    rl_recipe_destroy(&r);
    return 0;
}

typedef struct {
    size_t params, grads, replicated, optimizer, buffers;
    long long rows, tokens;
} s_acct_t;

static int s_acct(const char *dir, int rank, s_acct_t *a) {
    char path[4200];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
    FILE *f = fopen(path, "r");
    double cs;
    int ok =
        f && fscanf(f, "%zu %zu %zu %zu %zu %lld %lld %lf", &a->params, &a->grads, &a->replicated,
                    &a->optimizer, &a->buffers, &a->rows, &a->tokens, &cs) == 8;
    if (f) {
        fclose(f);
    }
    if (!ok) {
        fprintf(stderr, "FAIL %s: missing or unreadable\n", path);
    }
    return ok;
}

// x is within 15% of ref / parts (both 0 is fine).
static int s_share(const char *what, int rank, size_t x, size_t ref, int parts) {
    double want = (double)ref / parts;
    int ok = ref == 0 ? x == 0 : fabs((double)x / want - 1.0) <= 0.15;
    printf("%s rank %d %-10s %10zu bytes, 1x1 %10zu / %d = %12.0f (%.3f)\n", ok ? "ok  " : "FAIL",
           rank, what, x, ref, parts, want, want > 0 ? (double)x / want : 0.0);
    return ok;
}

// exact: every figure must be identical (micro-batches that line up with the ranks' rows, LoRA:
// the gradients are the same float sums in the same order), the gradient norm within 1e-12.
static int s_compare(const char *refdir, const char *dir, int dp, int fsdp, int exact) {
    s_result_t a, b;
    s_read(refdir, &a);
    s_read(dir, &b);
    if (a.rows != b.rows || a.n_w != b.n_w || a.n_w == 0) {
        fprintf(stderr, "FAIL %s: %d rows, %zu weights; 1x1: %d, %zu\n", dir, b.rows, b.n_w, a.rows,
                a.n_w);
        return 1;
    }
    s_b = a.rows;
    const double tol_loss = exact ? 0 : S_TOL_LOSS, tol_probe = exact ? 0 : S_TOL_PROBE;
    // exact: the norm is still a double sum in another order (per shard, then over the shards)
    const double tol_gnorm = exact ? 1e-12 : S_TOL_GNORM;
    const double tol_w = exact ? 0 : S_TOL_W;
    int fails = 0;
    for (int s = 0; s < S_STEPS; s++) {
        double dl = fabs(a.loss[s] - b.loss[s]) / fmax(fabs(a.loss[s]), 0.1);
        double dg = fabs(a.gnorm[s] - b.gnorm[s]) / fmax(fabs(a.gnorm[s]), 1e-12);
        int ok = dl <= tol_loss && dg <= tol_gnorm && a.gnorm[s] > 0;
        printf("%s step %d loss %.9g vs %.9g (rel %.2g), grad norm %.9g vs %.9g (rel %.2g)\n",
               ok ? "ok  " : "FAIL", s + 1, b.loss[s], a.loss[s], dl, b.gnorm[s], a.gnorm[s], dg);
        fails += !ok;
    }
    double worst = 0;
    for (int i = 0; i < s_b * S_T; i++) {
        worst = fmax(worst, fabs((double)a.probe[i] - b.probe[i]));
    }
    int ok = worst <= tol_probe;
    printf("%s probe outputs: max |diff| %.3g (tolerance %g)\n", ok ? "ok  " : "FAIL", worst,
           tol_probe);
    fails += !ok;
    // the update's error relative to the update itself: ||dw - dw_1x1|| / ||dw_1x1||
    double num = 0, den = 0, wd = 0;
    for (size_t i = 0; i < a.n_w; i++) {
        double ua = (double)a.w[i] - a.w0[i], ub = (double)b.w[i] - b.w0[i];
        num += (ub - ua) * (ub - ua);
        den += ua * ua;
        wd = fmax(wd, fabs((double)a.w[i] - b.w[i]) + fabs((double)a.w0[i] - b.w0[i]));
    }
    double rel = den > 0 ? sqrt(num / den) : 1.0;
    ok = den > 0 && wd <= tol_w && rel <= (exact ? 0 : S_TOL_UPDATE);
    printf("%s weights (%zu): max |diff| %.3g (tolerance %g); update error %.3g of the update "
           "(tolerance %g)\n",
           ok ? "ok  " : "FAIL", a.n_w, wd, tol_w, rel, exact ? 0 : S_TOL_UPDATE);
    fails += !ok;
    s_acct_t ref, r;
    if (!s_acct(refdir, 0, &ref)) {
        return 1;
    }
    long long rows = 0, tokens = 0;
    for (int k = 0; k < dp * fsdp; k++) {
        if (!s_acct(dir, k, &r)) {
            fails++;
            continue;
        }
        fails += !s_share("params", k, r.params, ref.params, fsdp);
        fails += !s_share("grads", k, r.grads, ref.grads, fsdp);
        fails += !s_share("optimizer", k, r.optimizer, ref.optimizer, fsdp);
        int64_t lo, hi;
        rl_mesh_split(s_b, dp * fsdp, k, &lo, &hi);
        ok = r.rows == (hi - lo) * S_STEPS;
        printf("%s rank %d trained on %lld rows (its share: %lld), %lld tokens\n",
               ok ? "ok  " : "FAIL", k, r.rows, (long long)(hi - lo) * S_STEPS, r.tokens);
        fails += !ok;
        rows += r.rows;
        tokens += r.tokens;
    }
    ok = rows == ref.rows && tokens == ref.tokens;
    printf("%s all ranks: %lld rows, %lld tokens; 1x1: %lld, %lld\n", ok ? "ok  " : "FAIL", rows,
           tokens, ref.rows, ref.tokens);
    fails += !ok;
    free(a.w0);
    free(a.w);
    free(b.w0);
    free(b.w);
    printf("%s: %d failure(s)\n", dir, fails);
    return fails ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 8 && strcmp(argv[1], "run") == 0) {
        s_b = atoi(argv[6]);
        if (s_b < 1 || s_b > S_BMAX) {
            fprintf(stderr, "test_fsdp: ROWS must be in 1..%d\n", S_BMAX);
            return 2;
        }
        mkdir(argv[7], 0755);
        return s_run(atoi(argv[2]), atoi(argv[3]), argv[4], argv[5], argv[7], &argc, &argv);
    }
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "compare") == 0) {
        int exact = argc == 7 && strcmp(argv[6], "exact") == 0;
        return s_compare(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), exact);
    }
    fprintf(stderr, "usage: test_fsdp run DP FSDP full|lora sft|grpo|critic ROWS OUTDIR\n"
                    "       test_fsdp compare REFDIR DIR DP FSDP [exact]\n");
    return 2;
}

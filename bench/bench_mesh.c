// bench_mesh — the sharded training step (trainer/rl_fsdp) on a DP×FSDP mesh, run under mpirun
// (bench/mesh.sh), or 1×1 without it:
//   bench_mesh DP FSDP full|lora MODEL_DIR ROWS T STEPS
// trains STEPS SFT steps on a fixed random batch of ROWS rows of T tokens (each rank its share,
// one micro-batch), one BLAS thread per rank, and prints from rank 0: this rank's bytes of model
// state (parameters, gradients, optimizer, replicated trainables, transient buffers: what
// rl_policy_bytes counts, allocated by us, unlike RSS, which counts mmapped frozen weights
// shared through the page cache), the median step time, training tokens/s and the seconds per
// step spent in collectives. The ceiling of tokens/s at dp 2 is twice the 1×1 figure (the same
// run's 1×1 invocation in bench/mesh.sh); bytes are compared with 1/fsdp of the 1×1 figure.
#include "rl_bench.h"
#include "rl_algos.h"
#include "rl_coll.h"
#include "rl_config.h"
#include "rl_loss.h"
#include "rl_mesh.h"
#include "rl_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void s_die(const char *what, const char *err) {
    fprintf(stderr, "bench_mesh: %s: %s\n", what, err);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: bench_mesh DP FSDP full|lora MODEL_DIR ROWS T STEPS\n");
        return 2;
    }
    int dp = atoi(argv[1]), fsdp = atoi(argv[2]), lora = strcmp(argv[3], "lora") == 0;
    const char *model = argv[4];
    int rows = atoi(argv[5]), T = atoi(argv[6]), steps = atoi(argv[7]);
    if (dp < 1 || fsdp < 1 || rows < 1 || T < 2 || steps < 1 || steps > 1000) {
        fprintf(stderr, "bench_mesh: bad arguments\n");
        return 2;
    }
    char err[4096], path[256];
    rl_coll_t *coll = NULL;
    rl_mesh_t mesh = {dp, fsdp};
    int sharded = dp * fsdp > 1, rank = 0, world = dp * fsdp;
    if (sharded) {
        if (rl_coll_mpi(&mesh, &argc, &argv, &coll, err, sizeof err) != 0) {
            s_die("mpi", err);
        }
        rank = rl_coll_rank(coll);
    }
    snprintf(path, sizeof path, "/tmp/bench_mesh.%ld.yaml", (long)getpid());
    FILE *f = fopen(path, "w");
    if (!f) {
        s_die(path, "cannot write");
    }
    fprintf(f, "run: {name: b, seed: 1}\nmodel: {path: %s}\n", model);
    if (lora) {
        fprintf(f, "lora: {enabled: true, r: 8, alpha: 16, target_modules: all-linear}\n");
    }
    fprintf(f,
            "data: {train: /dev/null, format: prompt_completion}\nalgorithm: {name: sft}\n"
            "optim: {lr: 1.0e-4}\ntrain: {steps: 1000, batch_size: %d}\n",
            rows);
    fclose(f);
    rl_recipe_t *r = NULL;
    int rc = rl_recipe_load_file(rl_algos(), path, NULL, 0, RL_RECIPE_NO_FILE_CHECKS, &r, err,
                                 sizeof err);
    unlink(path);
    if (rc) {
        s_die("recipe", err);
    }
    rl_policy_t *p = NULL;
    rc = sharded ? rl_policy_new_sharded(r, 1, RL_POLICY_ACTOR, coll, &p, err, sizeof err)
                 : rl_policy_new(r, 1, &p, err, sizeof err);
    if (rc) {
        s_die("policy", err);
    }
    int V = 24;
    int32_t *tok = malloc((size_t)rows * T * sizeof *tok);
    int *len = malloc((size_t)rows * sizeof *len);
    uint8_t *mask = malloc((size_t)rows * T);
    int64_t n_tok = 0;
    for (int b = 0; b < rows; b++) {
        len[b] = T;
        for (int t = 0; t < T; t++) {
            tok[b * T + t] = (b * 7 + t * 5) % V;
            mask[b * T + t] = t >= T / 4;
            n_tok += mask[b * T + t];
        }
    }
    int64_t lo, hi;
    rl_mesh_split(rows, world, rank, &lo, &hi);
    rl_policy_rows_t rw = {(int)(hi - lo), T, tok + lo * T, len + lo, mask + lo * T, 1};
    double times[1000], colls[1000];
    rl_policy_bytes_t by;
    for (int s = 0; s < steps; s++) {
        rl_policy_bytes(p, &by);
        double c0 = by.coll_seconds, t0 = rl_bench_now();
        if (sharded && rl_coll_barrier(coll, RL_MESH_WORLD, err, sizeof err) != 0) {
            s_die("barrier", err);
        }
        t0 = rl_bench_now();
        const rl_loss_t *L = rl_loss_find("sft");
        rl_loss_batch_t lb = {.B = rw.B, .T = T, .tokens = rw.tokens, .lengths = rw.lengths,
                              .mask = rw.mask, .denom = (double)n_tok, .lr = 1e-4,
                              .temperature = 1.0, .step = s + 1,
                              .micro_batch = rw.B > 0 ? rw.B : 1, .iterations = 1};
        rl_loss_out_t out = {0};
        rc = L->train(L, p, r, &lb, &out, err, sizeof err);
        if (rc) {
            s_die("step", err);
        }
        times[s] = rl_bench_now() - t0;
        rl_policy_bytes(p, &by);
        colls[s] = by.coll_seconds - c0;
    }
    if (rank == 0) {
        const double mib = 1048576.0;
        double t = rl_bench_median(times, steps), c = rl_bench_median(colls, steps);
        printf("mesh dp %d x fsdp %d %s: rank 0 params %.2f MiB, grads %.2f MiB, optimizer "
               "%.2f MiB, replicated %.2f MiB (total %.2f MiB), transient buffers %.2f MiB; "
               "step %.4f s (median of %d), %.0f train tokens/s, collectives %.4f s/step "
               "(%.0f%%)\n",
               dp, fsdp, lora ? "lora" : "full", by.params / mib, by.grads / mib,
               by.optimizer / mib, by.replicated / mib,
               (by.params + by.grads + by.optimizer + by.replicated) / mib, by.buffers / mib, t,
               steps, (double)rows * T / t, c, 100.0 * c / t);
    }
    free(tok);
    free(len);
    free(mask);
    rl_policy_destroy(&p);
    rl_coll_destroy(&coll);
    rl_recipe_destroy(&r);
    return 0;
}

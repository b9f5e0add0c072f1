// bench_traj — the trajectory store's step write beside raw LMDB puts of the same bytes, in the
// same run. One step is shaped like a step of cookbook/grpo_lora.yaml: 16 prompts x 8 samples =
// 128 records, 9-token prompts, 30-token completions, a loss mask, sampler and old logprobs (no
// reference, values or per-token advantages), one reward. Per repetition, interleaved so that
// all three see the same machine, each writing a new step into its own environment:
//   (a) the ceiling: raw LMDB, the 128 records pre-encoded (rl_traj_encode, outside the timing),
//       mdb_put of each under the store's 16-byte key in one transaction of a named database,
//       mdb_txn_commit; once with synced commits (as the store) and once with MDB_NOSYNC;
//   (b) rl_traj_put_step of the same 128 records (encode + delete-old-records cursor + puts +
//       meta + synced commit).
// The encoding alone (rl_traj_encode of the 128 records, the part of (b) that (a) does not do) is
// timed apart. Figures are medians over the steps; the ratio is the median of per-step ratios.
// With --step-ms MS (the median step time of a real GRPO run, bench/grpo_step.sh) it also prints
// the share of that step that (b) takes (target: <= 2%). Not a test: it prints figures and
// ratios.
//
//   bench_traj [--steps N] [--dir DIR] [--step-ms MS]
#include "rl_bench.h"
#include "rl_traj.h"

#include <errno.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { S_PROMPTS = 16, S_G = 8, S_NREC = S_PROMPTS * S_G, S_NP = 9, S_NC = 30, S_KEY = 16 };

static void s_die(const char *what, const char *err) {
    fprintf(stderr, "bench_traj: %s: %s\n", what, err);
    exit(1);
}

// The store's key: u64 step, u32 prompt index, u32 sample index, big-endian.
static void s_key(uint8_t *k, uint64_t step, uint32_t p, uint32_t i) {
    for (int b = 0; b < 8; b++) {
        k[b] = (uint8_t)(step >> (56 - 8 * b));
    }
    for (int b = 0; b < 4; b++) {
        k[8 + b] = (uint8_t)(p >> (24 - 8 * b));
        k[12 + b] = (uint8_t)(i >> (24 - 8 * b));
    }
}

// ---- the step's records ----------------------------------------------------------------------

typedef struct {
    int32_t prompt[S_PROMPTS][S_NP];
    int32_t ids[S_NREC][S_NC];
    uint8_t mask[S_NC];
    float lp[S_NREC][S_NC], old[S_NREC][S_NC];
    double rw[S_NREC];
    char *names[1];
    rl_traj_record_t recs[S_NREC];
} s_step_t;

static void s_step_init(s_step_t *s) {
    static char correct[] = "correct";
    s->names[0] = correct;
    uint32_t x = 12345;
    for (int p = 0; p < S_PROMPTS; p++) {
        for (int t = 0; t < S_NP; t++) {
            x = x * 1664525u + 1013904223u;
            s->prompt[p][t] = (int32_t)(x >> 16) % 24;
        }
    }
    memset(s->mask, 1, sizeof s->mask);
    for (int j = 0; j < S_NREC; j++) {
        for (int t = 0; t < S_NC; t++) {
            x = x * 1664525u + 1013904223u;
            s->ids[j][t] = (int32_t)(x >> 16) % 24;
            s->lp[j][t] = -(float)((x >> 8) & 0xffff) / 8192.0f;
            s->old[j][t] = s->lp[j][t] + 1e-3f;
        }
        s->rw[j] = (double)(j % 3 == 0);
        rl_traj_record_t *r = &s->recs[j];
        r->prompt_index = (uint32_t)(j / S_G);
        r->sample_index = (uint32_t)(j % S_G);
        r->data_index = 1000 + j / S_G;
        r->n_prompt = S_NP;
        r->prompt_ids = s->prompt[j / S_G];
        r->n_completion = S_NC;
        r->completion_ids = s->ids[j];
        r->mask = s->mask;
        r->sampler_logprobs = s->lp[j];
        r->old_logprobs = s->old[j];
        r->n_rewards = 1;
        r->reward_names = s->names;
        r->rewards = &s->rw[j];
        r->reward = s->rw[j];
        r->advantage = s->rw[j] - 1.0 / 3.0;
        r->finish = 0;
    }
}

static void s_step_set(s_step_t *s, uint64_t step) {
    for (int j = 0; j < S_NREC; j++) {
        s->recs[j].step = step;
        s->recs[j].policy_version = step - 1;
    }
}

// ---- (a) raw LMDB ----------------------------------------------------------------------------

typedef struct {
    MDB_env *env;
    MDB_dbi dbi;
} s_raw_t;

static void s_raw_open(s_raw_t *r, const char *path, unsigned flags) {
    if (mkdir(path, 0775) != 0) {
        s_die(path, strerror(errno));
    }
    MDB_txn *txn;
    int rc = mdb_env_create(&r->env);
    if (!rc) {
        rc = mdb_env_set_maxdbs(r->env, 2);
    }
    if (!rc) {
        rc = mdb_env_set_mapsize(r->env, RL_TRAJ_MAP_INITIAL);
    }
    if (!rc) {
        rc = mdb_env_open(r->env, path, flags, 0664);
    }
    if (!rc) {
        rc = mdb_txn_begin(r->env, NULL, 0, &txn);
    }
    if (!rc) {
        rc = mdb_dbi_open(txn, "traj", MDB_CREATE, &r->dbi);
        rc = rc ? rc : mdb_txn_commit(txn);
    }
    if (rc) {
        s_die(path, mdb_strerror(rc));
    }
}

// One step: n pre-encoded values in one transaction, committed.
static void s_raw_put(s_raw_t *r, uint64_t step, void *const *vals, const size_t *lens) {
    MDB_txn *txn;
    int rc = mdb_txn_begin(r->env, NULL, 0, &txn);
    for (int j = 0; !rc && j < S_NREC; j++) {
        uint8_t kb[S_KEY];
        s_key(kb, step, (uint32_t)(j / S_G), (uint32_t)(j % S_G));
        MDB_val k = {S_KEY, kb}, v = {lens[j], vals[j]};
        rc = mdb_put(txn, r->dbi, &k, &v, 0);
    }
    if (rc) {
        mdb_txn_abort(txn);
        s_die("raw put", mdb_strerror(rc));
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        s_die("raw commit", mdb_strerror(rc));
    }
}

// ---- main ------------------------------------------------------------------------------------

static double s_ms(double s) {
    return s * 1e3;
}

int main(int argc, char **argv) {
    int steps = 30;
    const char *base = "/tmp";
    double step_ms = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            base = argv[++i];
        } else if (strcmp(argv[i], "--step-ms") == 0 && i + 1 < argc) {
            step_ms = atof(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_traj [--steps N] [--dir DIR] [--step-ms MS]\n");
            return 2;
        }
    }
    if (steps < 20 || steps > 10000) {
        steps = 30;
    }
    char dir[512], p_sync[600], p_nosync[600], p_store[600], err[512];
    snprintf(dir, sizeof dir, "%s/rl_bench_traj.XXXXXX", base);
    if (!mkdtemp(dir)) {
        s_die(dir, "mkdtemp failed");
    }
    snprintf(p_sync, sizeof p_sync, "%s/raw_sync", dir);
    snprintf(p_nosync, sizeof p_nosync, "%s/raw_nosync", dir);
    snprintf(p_store, sizeof p_store, "%s/store", dir);

    s_step_t *st = calloc(1, sizeof *st);
    if (!st) {
        s_die("bench", "out of memory");
    }
    s_step_init(st);
    s_raw_t raw_sync, raw_nosync;
    s_raw_open(&raw_sync, p_sync, 0);
    s_raw_open(&raw_nosync, p_nosync, MDB_NOSYNC);
    rl_traj_t *store = NULL;
    if (rl_traj_open(p_store, 0, &store, err, sizeof err) != 0) {
        s_die("rl_traj_open", err);
    }

    const int warm = 3;
    double *ta = malloc((size_t)steps * sizeof *ta), *tn = malloc((size_t)steps * sizeof *tn);
    double *tb = malloc((size_t)steps * sizeof *tb), *te = malloc((size_t)steps * sizeof *te);
    double *ratio = malloc((size_t)steps * sizeof *ratio);
    void *vals[S_NREC];
    size_t lens[S_NREC], bytes = 0;
    if (!ta || !tn || !tb || !te || !ratio) {
        s_die("bench", "out of memory");
    }
    for (int r = -warm; r < steps; r++) {
        uint64_t step = (uint64_t)(r + warm + 1);
        s_step_set(st, step);
        // encoding alone (also gives the raw puts their values)
        double t0 = rl_bench_now();
        bytes = 0;
        for (int j = 0; j < S_NREC; j++) {
            if (rl_traj_encode(&st->recs[j], &vals[j], &lens[j]) != 0) {
                s_die("rl_traj_encode", "failed");
            }
            bytes += lens[j];
        }
        double t1 = rl_bench_now();
        s_raw_put(&raw_sync, step, vals, lens);
        double t2 = rl_bench_now();
        s_raw_put(&raw_nosync, step, vals, lens);
        double t3 = rl_bench_now();
        if (rl_traj_put_step(store, step, st->recs, S_NREC, err, sizeof err) != 0) {
            s_die("rl_traj_put_step", err);
        }
        double t4 = rl_bench_now();
        for (int j = 0; j < S_NREC; j++) {
            free(vals[j]);
        }
        if (r >= 0) {
            te[r] = t1 - t0;
            ta[r] = t2 - t1;
            tn[r] = t3 - t2;
            tb[r] = t4 - t3;
            ratio[r] = tb[r] / ta[r];
        }
    }
    // the store holds what was written
    rl_traj_record_t *back = NULL;
    int nback = 0;
    if (rl_traj_read_step(store, (uint64_t)(steps + warm), &back, &nback, err, sizeof err) != 0 ||
        nback != S_NREC || back[S_NREC - 1].n_completion != S_NC) {
        s_die("read back", err[0] ? err : "wrong record count");
    }
    rl_traj_records_free(&back, nback);

    double a = rl_bench_median(ta, steps), an = rl_bench_median(tn, steps);
    double b = rl_bench_median(tb, steps), e = rl_bench_median(te, steps);
    double q = rl_bench_median(ratio, steps);
    printf("step: %d records (16 prompts x 8), prompt %d + completion %d tokens, sampler + old "
           "logprobs, 1 reward: %zu bytes of values (%.0f B/record)\n",
           S_NREC, S_NP, S_NC, bytes, (double)bytes / S_NREC);
    printf("| figure | time per step | ceiling in the same run | ratio |\n|---|---|---|---|\n");
    printf("| rl_traj_put_step (b), synced commit | %.3f ms | raw mdb_put x %d + synced commit "
           "%.3f ms | %.2fx |\n",
           s_ms(b), S_NREC, s_ms(a), q);
    printf("| raw mdb_put x %d + commit, MDB_NOSYNC | %.3f ms | (the sync's share of the "
           "ceiling: %.0f%%) | |\n",
           S_NREC, s_ms(an), a > 0 ? 100.0 * (a - an) / a : 0.0);
    printf("| rl_traj_encode x %d alone (inside b, not in a) | %.3f ms | | |\n", S_NREC, s_ms(e));
    if (step_ms > 0) {
        printf("| (b) as a share of a GRPO step of %.1f ms | %.2f%% | raw synced put: %.2f%% | "
               "target <= 2%% |\n",
               step_ms, 100.0 * s_ms(b) / step_ms, 100.0 * s_ms(a) / step_ms);
    }
    printf("(medians of %d steps after %d warm-up steps; ratio = median of per-step ratios; "
           "files under %s)\n",
           steps, warm, base);
    rl_traj_close(&store);
    mdb_env_close(raw_sync.env);
    mdb_env_close(raw_nosync.env);
    free(ta);
    free(tn);
    free(tb);
    free(te);
    free(ratio);
    free(st);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_traj: could not remove %s\n", dir);
    }
    return 0;
}

// test_checkpoint — checkpoint folders: commit order (DONE last), state.json round trip
// (RNG words beyond 2^53 exact), optimizer.bin inside, the newest complete checkpoint,
// pruning to keep_checkpoints, and refusals (incomplete, malformed, future version).
#include "rl_checkpoint.h"
#include "rl_err.h"
#include "rl_rundir.h"
#include "rl_test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int s_exists(const char *dir, const char *name) {
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void s_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void s_commit(const char *run, int64_t step, rl_optim_t *o) {
    char dir[1024], err[512];
    CHECK_INT(rl_checkpoint_prepare(run, step, dir, sizeof(dir), err, sizeof(err)), 0);
    rl_ckpt_state_t st = {0};
    st.step = step;
    strcpy(st.tune, "full");
    CHECK_INT(rl_checkpoint_commit(dir, &st, o, err, sizeof(err)), 0);
}

int main(void) {
    char run[] = "/tmp/rl_test_ckpt_XXXXXX";
    RL_TEST_ASSERT_FILE(mkdtemp(run), "a temporary directory");
    char dir[1024], err[512], latest[1024], path[1200];
    int64_t step = -1;

    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), RL_ENOTFOUND);

    rl_optim_hparams_t hp = {0.9, 0.999, 1e-8, 0.0};
    rl_optim_t *o = rl_optim_new(10, &hp);
    float p[10] = {0}, g[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    rl_optim_step(o, p, g, 1e-3);

    CHECK_INT(rl_checkpoint_prepare(run, 10, dir, sizeof(dir), err, sizeof(err)), 0);
    CHECK_CONTAINS(dir, "/checkpoints/step-10");
    snprintf(path, sizeof(path), "%s/model", dir);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    snprintf(path, sizeof(path), "%s/model/config.json", dir);
    s_write(path, "{}");
    // before commit: incomplete, invisible
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), RL_ENOTFOUND);
    rl_ckpt_state_t st = {0}, back;
    st.step = 10;
    st.policy_version = 10;
    st.data_epoch = 2;
    st.data_index = 7;
    rl_rng_seed(&st.rng, 42);
    st.rng.s[0] = 0xfedcba9876543210ull; // above 2^63: must survive JSON
    st.rng.has_spare = 1;
    st.rng.spare = -0.123456789012345678;
    strcpy(st.tune, "lora");
    st.n_trainable = 10;
    st.num_tokens = 12345678901LL;
    st.model_train_step = 77;
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), RL_ENOTFOUND);
    CHECK_CONTAINS(err, "incomplete checkpoint");
    CHECK_INT(rl_checkpoint_commit(dir, &st, o, err, sizeof(err)), 0);
    CHECK(s_exists(dir, "DONE"));
    CHECK(s_exists(dir, "optimizer.bin"));
    CHECK(s_exists(dir, "state.json"));
    CHECK(s_exists(dir, "model/config.json"));
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), 0);
    CHECK_INT(back.step, 10);
    CHECK_INT(back.policy_version, 10);
    CHECK_INT(back.data_epoch, 2);
    CHECK_INT(back.data_index, 7);
    CHECK_INT(back.n_trainable, 10);
    CHECK_INT(back.num_tokens, 12345678901LL);
    CHECK_INT(back.model_train_step, 77);
    CHECK_STR(back.tune, "lora");
    CHECK(memcmp(back.rng.s, st.rng.s, sizeof(st.rng.s)) == 0);
    CHECK_INT(back.rng.has_spare, 1);
    CHECK(back.rng.spare == st.rng.spare);
    // the restored RNG continues the same stream
    CHECK(rl_rng_u64(&back.rng) == rl_rng_u64(&st.rng));
    // optimizer.bin loads back
    rl_optim_t *o2 = rl_optim_new(10, &hp);
    snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
    CHECK_INT(rl_optim_load(o2, path, err, sizeof(err)), 0);
    CHECK_INT(rl_optim_steps(o2), 1);
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 10);
    CHECK_STR(latest, dir);

    // 20 incomplete, 9 complete: the newest complete is still 10
    CHECK_INT(rl_checkpoint_prepare(run, 20, dir, sizeof(dir), err, sizeof(err)), 0);
    s_commit(run, 9, NULL);
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 10);
    s_commit(run, 20, o);
    s_commit(run, 30, o);
    s_commit(run, 100, o); // numeric, not lexical, order: 100 > 30
    CHECK_INT(rl_checkpoint_prepare(run, 5, dir, sizeof(dir), err, sizeof(err)), 0);
    CHECK_INT(rl_checkpoint_prepare(run, 110, dir, sizeof(dir), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/checkpoints/step-x", run);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0); // not ours: ignored
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 100);
    CHECK_INT(rl_checkpoint_prune(run, 2, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/checkpoints", run);
    CHECK(s_exists(path, "step-100"));
    CHECK(s_exists(path, "step-30"));
    CHECK(!s_exists(path, "step-20"));
    CHECK(!s_exists(path, "step-10"));
    CHECK(!s_exists(path, "step-9"));
    CHECK(!s_exists(path, "step-5"));   // incomplete and old
    CHECK(s_exists(path, "step-110"));  // incomplete but newest: may be being written
    CHECK(s_exists(path, "step-x"));
    // prepare again over a leftover removes its content
    CHECK_INT(rl_checkpoint_prepare(run, 110, dir, sizeof(dir), err, sizeof(err)), 0);
    CHECK(!s_exists(dir, "DONE"));

    // malformed and future state.json
    snprintf(dir, sizeof(dir), "%s/checkpoints/step-100", run);
    snprintf(path, sizeof(path), "%s/state.json", dir);
    s_write(path, "{\"format\": \"rlctl-checkpoint\", \"version\": 2}");
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), RL_EVERSION);
    CHECK_CONTAINS(err, "version 2");
    s_write(path, "{\"format\": \"rlctl-checkpoint\", \"version\": 1, \"step\": \"x\"}");
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "'step'");
    s_write(path, "{\"format\": ");
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "state.json:1:");
    s_write(path, "[1]");
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "not an rlctl checkpoint state");

    // ---- run folder rules (rl_rundir); the lock across processes is tested in test_sft.c
    char rd[1100];
    snprintf(rd, sizeof(rd), "%s/rundir/a", run);
    int code = 0;
    rl_rundir_t *h = rl_rundir_open(rd, RL_RUNDIR_NEW, &code, err, sizeof(err));
    CHECK(h != NULL); // created, empty
    CHECK_STR(rl_rundir_path(h), rd);
    CHECK(!rl_rundir_holds_run(rd));
    rl_rundir_destroy(&h);
    CHECK(h == NULL);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", rd);
    s_write(path, "{}\n");
    snprintf(path, sizeof(path), "%s/checkpoints/step-1", rd);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    snprintf(path, sizeof(path), "%s/events.out.tfevents.1.h.rlctl", rd);
    s_write(path, "x");
    snprintf(path, sizeof(path), "%s/notes.txt", rd);
    s_write(path, "the user's");
    CHECK(rl_rundir_holds_run(rd));
    h = rl_rundir_open(rd, RL_RUNDIR_NEW, &code, err, sizeof(err));
    CHECK(h == NULL);
    CHECK_INT(code, RL_EINVAL);
    CHECK_CONTAINS(err, "already holds a run (metrics.jsonl, checkpoints/)");
    CHECK_CONTAINS(err, "--force");
    h = rl_rundir_open(rd, RL_RUNDIR_RESUME, &code, err, sizeof(err));
    CHECK(h != NULL);
    CHECK(rl_rundir_holds_run(rd)); // resume keeps everything
    rl_rundir_destroy(&h);
    h = rl_rundir_open(rd, RL_RUNDIR_FORCE, &code, err, sizeof(err));
    CHECK(h != NULL);
    CHECK(!rl_rundir_holds_run(rd));
    CHECK(!s_exists(rd, "events.out.tfevents.1.h.rlctl"));
    CHECK(s_exists(rd, "notes.txt")); // not a run's file: kept
    CHECK(s_exists(rd, ".lock"));
    rl_rundir_destroy(&h);

    CHECK_INT(rl_checkpoint_rmtree(run), 0);
    struct stat sb;
    CHECK(stat(run, &sb) != 0);
    CHECK_INT(rl_checkpoint_rmtree(run), 0); // already gone
    rl_optim_destroy(&o);
    rl_optim_destroy(&o2);
    RL_TEST_DONE();
}

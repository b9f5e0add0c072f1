// test_checkpoint — checkpoint folders: commit order (DONE last), state.json round trip
// (RNG words beyond 2^53 exact), optimizer.bin inside, the newest complete checkpoint,
// pruning to keep_checkpoints, and refusals (incomplete, malformed, future version); the
// commit protocol (write into step-<N>.tmp, publish by rename: a .tmp is never a checkpoint,
// crash leftovers are cleaned or restored), the list newest first, abandoned branches, and
// publishing a folder over an existing one. (fsync itself is not observable without a power
// loss; these tests check the order and the renames around it.) Integrity: commit writes
// manifest.json and a DONE naming its CRC; verify finds a changed file, a missing manifest, a
// damaged marker, and tells an older rlctl's checkpoint (no manifest) apart; read_state refuses
// a state whose step is not its folder's or whose fields are out of range, naming the field, and
// commit refuses to write one.
#include "rl_checkpoint.h"
#include "rl_err.h"
#include "rl_rundir.h"
#include "rl_test.h"

#include <dirent.h>
#include <jansson.h>
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

// A state of `step` that every rule of rl_checkpoint_read_state accepts (a seeded RNG, one
// trainable parameter at least).
static rl_ckpt_state_t s_state(int64_t step, const char *tune) {
    rl_ckpt_state_t st;
    memset(&st, 0, sizeof st);
    st.step = step;
    st.n_trainable = 10;
    rl_rng_seed(&st.rng, (uint64_t)step + 1);
    snprintf(st.tune, sizeof st.tune, "%s", tune);
    return st;
}

static void s_commit(const char *run, int64_t step, rl_optim_t *o) {
    char tmp[1024], dir[1024], err[512];
    CHECK_INT(rl_checkpoint_prepare(run, step, tmp, sizeof(tmp), err, sizeof(err)), 0);
    rl_ckpt_state_t st = s_state(step, "full");
    CHECK_INT(rl_checkpoint_commit(tmp, &st, o, dir, sizeof(dir), err, sizeof(err)), 0);
}

// ---- the commit protocol ---------------------------------------------------------------------

static void s_mktemp(char *buf, size_t cap) {
    rl_test_tmpdir(buf, cap, "ckpt2");
}

// The names in folder dir that start with prefix, counted.
static int s_count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    if (d) {
        closedir(d);
    }
    return n;
}

// Writes a checkpoint of `step` with data_index `index` (to tell copies apart) into run.
static void s_commit_index(const char *run, int64_t step, int64_t index) {
    char tmp[1024], dir[1024], err[512];
    CHECK_INT(rl_checkpoint_prepare(run, step, tmp, sizeof(tmp), err, sizeof(err)), 0);
    rl_ckpt_state_t st = s_state(step, "full");
    st.data_index = index;
    CHECK_INT(rl_checkpoint_commit(tmp, &st, NULL, dir, sizeof(dir), err, sizeof(err)), 0);
}

// commit publishes step-<N>.tmp as step-<N> with DONE inside, leaving no .tmp; replacing an
// existing step-<N> leaves the new content and no aside copy.
static void s_test_commit_protocol(void) {
    char run[64], tmp[1024], dir[1024], err[512], path[1200], ck[1100];
    s_mktemp(run, sizeof(run));
    snprintf(ck, sizeof(ck), "%s/checkpoints", run);
    CHECK_INT(rl_checkpoint_prepare(run, 7, tmp, sizeof(tmp), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/checkpoints/step-7.tmp", run);
    CHECK_STR(tmp, path);
    CHECK(!s_exists(ck, "step-7")); // nothing under the checkpoint's name while it is written
    snprintf(path, sizeof(path), "%s/adapter", tmp);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    snprintf(path, sizeof(path), "%s/adapter/adapter_config.json", tmp);
    s_write(path, "{\"r\": 4}");
    rl_ckpt_state_t st = s_state(7, "lora"), back;
    st.data_index = 1;
    CHECK_INT(rl_checkpoint_commit(tmp, &st, NULL, dir, sizeof(dir), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/checkpoints/step-7", run);
    CHECK_STR(dir, path);
    CHECK(s_exists(dir, "DONE"));
    CHECK(s_exists(dir, "state.json"));
    CHECK(s_exists(dir, "adapter/adapter_config.json"));
    CHECK(access(tmp, F_OK) != 0);
    CHECK_INT(s_count_prefix(ck, "step-7."), 0); // no step-7.tmp, no step-7.old-*
    // a second commit of the same step replaces the first in whole
    s_commit_index(run, 7, 2);
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), 0);
    CHECK_INT(back.data_index, 2);
    CHECK(!s_exists(dir, "adapter")); // the first copy's files went with it
    // GRPO's and SFT's states hold no critic and no algorithm numbers (and write none)
    CHECK(back.has_critic == 0 && back.n_algo == 0);
    char *json = NULL;
    snprintf(path, sizeof(path), "%s/state.json", dir);
    json = rl_test_read_file(path, NULL);
    CHECK(json && !strstr(json, "critic_train_step") && !strstr(json, "\"algo\""));
    free(json);
    // PPO's: the critic's counter and the KL coefficient come back
    CHECK_INT(rl_checkpoint_prepare(run, 9, tmp, sizeof(tmp), err, sizeof(err)), 0);
    rl_ckpt_state_t pst = st;
    pst.step = 9;
    pst.has_critic = 1;
    pst.critic_train_step = 41;
    pst.n_algo = 1;
    strcpy(pst.algo_key[0], "kl_coef");
    pst.algo_value[0] = 0.0123456789012345;
    char dir9[4200];
    CHECK_INT(rl_checkpoint_commit(tmp, &pst, NULL, dir9, sizeof(dir9), err, sizeof(err)), 0);
    CHECK_INT(rl_checkpoint_read_state(dir9, &back, err, sizeof(err)), 0);
    CHECK(back.has_critic == 1 && back.critic_train_step == 41 && back.n_algo == 1);
    CHECK(strcmp(back.algo_key[0], "kl_coef") == 0 && back.algo_value[0] == pst.algo_value[0]);
    CHECK_INT(s_count_prefix(ck, "step-7."), 0);
    // commit refuses a folder that prepare did not give
    CHECK_INT(rl_checkpoint_commit(dir, &st, NULL, path, sizeof(path), err, sizeof(err)),
              RL_EINVAL);
    // a too small dir_out is refused before anything is renamed
    CHECK_INT(rl_checkpoint_prepare(run, 8, tmp, sizeof(tmp), err, sizeof(err)), 0);
    CHECK_INT(rl_checkpoint_commit(tmp, &st, NULL, path, 8, err, sizeof(err)), RL_EINVAL);
    CHECK(!s_exists(ck, "step-8"));
    CHECK_INT(rl_checkpoint_rmtree(run), 0);
}

// A crash between writing and publishing leaves step-<N>.tmp, DONE and all: never a checkpoint
// (latest, list and read_state ignore it), and prepare or prune remove it. A crash between the
// two renames of a replace leaves step-<N>.old-*: restored when step-<N> is missing.
static void s_test_crash_leftovers(void) {
    char run[64], tmp[1024], dir[1200], err[512], path[1200], ck[1100], latest[1024];
    int64_t step = -1, *steps = NULL;
    size_t n = 99;
    rl_ckpt_state_t back;
    s_mktemp(run, sizeof(run));
    snprintf(ck, sizeof(ck), "%s/checkpoints", run);
    s_commit_index(run, 4, 0);
    // step-9 fully written, DONE included, but the run died before the rename
    CHECK_INT(rl_checkpoint_prepare(run, 9, tmp, sizeof(tmp), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/state.json", tmp);
    s_write(path, "{}");
    snprintf(path, sizeof(path), "%s/DONE", tmp);
    s_write(path, "");
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 4);
    CHECK_INT(rl_checkpoint_list(run, &steps, &n), 0);
    CHECK_INT(n, 1);
    CHECK(n == 1 && steps[0] == 4);
    free(steps);
    CHECK_INT(rl_checkpoint_read_state(tmp, &back, err, sizeof(err)), RL_ENOTFOUND);
    CHECK_CONTAINS(err, "incomplete checkpoint");
    // the next prepare (of any step) removes it
    CHECK_INT(rl_checkpoint_prepare(run, 5, dir, sizeof(dir), err, sizeof(err)), 0);
    CHECK(!s_exists(ck, "step-9.tmp"));
    CHECK(s_exists(ck, "step-5.tmp"));
    // and so does prune
    CHECK_INT(rl_checkpoint_prune(run, 5, err, sizeof(err)), 0);
    CHECK(!s_exists(ck, "step-5.tmp"));
    CHECK(s_exists(ck, "step-4/DONE"));
    // a replace of step-4 died after setting the old copy aside: prune puts it back
    snprintf(path, sizeof(path), "%s/step-4", ck);
    snprintf(dir, sizeof(dir), "%s/step-4.old-123-0", ck);
    CHECK_INT(rename(path, dir), 0);
    CHECK_INT(rl_checkpoint_prepare(run, 4, tmp, sizeof(tmp), err, sizeof(err)), 0);
    CHECK(s_exists(ck, "step-4/DONE"));
    CHECK(!s_exists(ck, "step-4.old-123-0"));
    // an aside beside a present step-4 is an old copy: removed
    CHECK_INT(rl_checkpoint_mkdirs(dir), 0);
    CHECK_INT(rl_checkpoint_prune(run, 5, err, sizeof(err)), 0);
    CHECK(!s_exists(ck, "step-4.old-123-0"));
    CHECK(s_exists(ck, "step-4/DONE"));
    CHECK(!s_exists(ck, "step-4.tmp"));
    CHECK_INT(rl_checkpoint_rmtree(run), 0);
}

// list: complete checkpoints only, newest first by number (not by name).
static void s_test_list(void) {
    char run[64], path[1200], err[512], tmp[1024];
    int64_t *steps = (int64_t *)1;
    size_t n = 99;
    s_mktemp(run, sizeof(run));
    CHECK_INT(rl_checkpoint_list(run, &steps, &n), 0); // no checkpoints/ yet
    CHECK_INT(n, 0);
    CHECK(steps == NULL);
    s_commit_index(run, 3, 0);
    s_commit_index(run, 100, 0);
    s_commit_index(run, 12, 0);
    s_commit_index(run, 25, 0);
    snprintf(path, sizeof(path), "%s/checkpoints/step-200", run);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0); // no DONE
    snprintf(path, sizeof(path), "%s/checkpoints/step-300x", run);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    CHECK_INT(rl_checkpoint_prepare(run, 400, tmp, sizeof(tmp), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/DONE", tmp);
    s_write(path, "");
    CHECK_INT(rl_checkpoint_list(run, &steps, &n), 0);
    CHECK_INT(n, 4);
    int64_t want[4] = {100, 25, 12, 3};
    for (size_t i = 0; i < n && i < 4; i++) {
        CHECK_INT(steps[i], want[i]);
    }
    free(steps);
    CHECK_INT(rl_checkpoint_rmtree(run), 0);
}

// abandon_after moves the newer complete checkpoints (and only those) into abandoned-<time>/;
// latest then picks the one resumed; pruning after the new branch's checkpoints keeps them.
static void s_test_abandon(void) {
    char run[64], where[1024], where2[1024], err[512], latest[1024], path[1200], ck[1100];
    int64_t step = -1;
    int moved = -1;
    s_mktemp(run, sizeof(run));
    snprintf(ck, sizeof(ck), "%s/checkpoints", run);
    // nothing to move: nothing created
    CHECK_INT(rl_checkpoint_abandon_after(run, 0, where, sizeof(where), &moved, err,
                                          sizeof(err)), 0);
    CHECK_INT(moved, 0);
    CHECK_STR(where, "");
    s_commit_index(run, 10, 0);
    s_commit_index(run, 20, 0);
    s_commit_index(run, 30, 0);
    snprintf(path, sizeof(path), "%s/step-40", ck);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0); // incomplete: not a checkpoint, not moved
    CHECK_INT(rl_checkpoint_abandon_after(run, 30, where, sizeof(where), &moved, err,
                                          sizeof(err)), 0);
    CHECK_INT(moved, 0);
    CHECK_INT(s_count_prefix(ck, "abandoned-"), 0);
    CHECK_INT(rl_checkpoint_abandon_after(run, 10, where, sizeof(where), &moved, err,
                                          sizeof(err)), 0);
    CHECK_INT(moved, 2);
    CHECK_CONTAINS(where, "/checkpoints/abandoned-");
    CHECK(s_exists(where, "step-20/DONE"));
    CHECK(s_exists(where, "step-30/DONE"));
    CHECK(!s_exists(ck, "step-20"));
    CHECK(!s_exists(ck, "step-30"));
    CHECK(s_exists(ck, "step-10/DONE"));
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 10);
    // the new branch: 15, 18; keep 2 keeps them, not the abandoned 20 and 30
    s_commit_index(run, 15, 0);
    s_commit_index(run, 18, 0);
    CHECK_INT(rl_checkpoint_prune(run, 2, err, sizeof(err)), 0);
    CHECK(s_exists(ck, "step-18/DONE"));
    CHECK(s_exists(ck, "step-15/DONE"));
    CHECK(!s_exists(ck, "step-10"));
    CHECK(s_exists(where, "step-30/DONE")); // prune never looks inside
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 18);
    // a second abandonment in the same second gets its own folder
    CHECK_INT(rl_checkpoint_abandon_after(run, 15, where2, sizeof(where2), &moved, err,
                                          sizeof(err)), 0);
    CHECK_INT(moved, 1);
    CHECK(strcmp(where, where2) != 0);
    CHECK(s_exists(where2, "step-18/DONE"));
    CHECK(s_exists(where, "step-20/DONE"));
    CHECK_INT(s_count_prefix(ck, "abandoned-"), 2);
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 15);
    CHECK_INT(rl_checkpoint_rmtree(run), 0);
}

// publish_dir replaces an existing folder in whole (final.tmp -> final), also into a missing
// one, removes asides a crash left, and refuses folders in different places.
static void s_test_publish_dir(void) {
    char run[64], tmp[1100], dst[1100], path[1200], err[512];
    s_mktemp(run, sizeof(run));
    snprintf(tmp, sizeof(tmp), "%s/final.tmp", run);
    snprintf(dst, sizeof(dst), "%s/final", run);
    CHECK_INT(rl_checkpoint_mkdirs(tmp), 0);
    snprintf(path, sizeof(path), "%s/a.txt", tmp);
    s_write(path, "first");
    CHECK_INT(rl_checkpoint_publish_dir(tmp, dst, err, sizeof(err)), 0); // no final/ yet
    CHECK(s_exists(dst, "a.txt"));
    CHECK(access(tmp, F_OK) != 0);
    // the second replaces the first: its files only
    snprintf(path, sizeof(path), "%s/sub", tmp);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    snprintf(path, sizeof(path), "%s/sub/b.txt", tmp);
    s_write(path, "second");
    snprintf(path, sizeof(path), "%s/link", tmp);
    CHECK_INT(symlink("/nonexistent/target", path), 0); // synced as nothing, not followed
    snprintf(path, sizeof(path), "%s/final.old-1-0", run);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0); // an aside a crash left
    CHECK_INT(rl_checkpoint_publish_dir(tmp, dst, err, sizeof(err)), 0);
    CHECK(s_exists(dst, "sub/b.txt"));
    CHECK(!s_exists(dst, "a.txt"));
    CHECK(access(tmp, F_OK) != 0);
    CHECK_INT(s_count_prefix(run, "final."), 0);
    // a missing tmp, and tmp and dst in different folders, are refused; dst stays
    CHECK(rl_checkpoint_publish_dir(tmp, dst, err, sizeof(err)) != 0);
    snprintf(path, sizeof(path), "%s/sub", dst);
    CHECK_INT(rl_checkpoint_publish_dir(path, tmp, err, sizeof(err)), RL_EINVAL);
    CHECK(s_exists(dst, "sub/b.txt"));
    // sync_tree: a file, a tree, a missing path
    snprintf(path, sizeof(path), "%s/sub/b.txt", dst);
    CHECK_INT(rl_checkpoint_sync_tree(path, err, sizeof(err)), 0);
    CHECK_INT(rl_checkpoint_sync_tree(run, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/missing", run);
    CHECK(rl_checkpoint_sync_tree(path, err, sizeof(err)) != 0);
    CHECK_CONTAINS(err, "missing");
    CHECK_INT(rl_checkpoint_rmtree(run), 0);
}

// ---- integrity: the manifest and state.json's rules ---------------------------------------------

// Sets key (or "outer.inner") of <dir>/state.json to v (stolen), keeping the rest.
static void s_patch(const char *dir, const char *key, json_t *v) {
    char path[1200], outer[64];
    snprintf(path, sizeof path, "%s/state.json", dir);
    json_t *o = json_load_file(path, 0, NULL), *at = o;
    const char *dot = strchr(key, '.');
    if (o && dot) {
        snprintf(outer, sizeof outer, "%.*s", (int)(dot - key), key);
        at = json_object_get(o, outer);
        key = dot + 1;
    }
    CHECK(at != NULL && json_object_set_new(at, key, v) == 0 &&
          json_dump_file(o, path, JSON_INDENT(2)) == 0);
    json_decref(o);
}

// Flips the lowest bit of the byte `back` bytes before the end of <dir>/<rel>.
static void s_flip(const char *dir, const char *rel, long back) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "r+b");
    int c = f && fseek(f, -back, SEEK_END) == 0 ? fgetc(f) : EOF;
    CHECK(c != EOF && fseek(f, -back, SEEK_END) == 0 && fputc(c ^ 1, f) != EOF);
    if (f) {
        fclose(f);
    }
}

// commit's manifest and marker; verify on a good checkpoint, a damaged file, a lost manifest, a
// damaged marker, and an older rlctl's checkpoint (DONE empty, no manifest: *legacy).
static void s_test_verify(void) {
    char run[64], tmp[1024], dir[1024], err[1024], path[1200];
    s_mktemp(run, sizeof(run));
    CHECK_INT(rl_checkpoint_prepare(run, 6, tmp, sizeof(tmp), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/critic", tmp);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    snprintf(path, sizeof(path), "%s/critic/value_head.safetensors", tmp);
    s_write(path, "the critic's head, as its worker wrote it");
    rl_optim_hparams_t hp = {0.9, 0.999, 1e-8, 0.0};
    rl_optim_t *o = rl_optim_new(10, &hp);
    rl_ckpt_state_t st = s_state(6, "lora");
    CHECK_INT(rl_checkpoint_commit(tmp, &st, o, dir, sizeof(dir), err, sizeof(err)), 0);
    rl_optim_destroy(&o);
    snprintf(path, sizeof(path), "%s/DONE", dir);
    char *done = rl_test_read_file(path, NULL), *man = NULL;
    CHECK(done && strncmp(done, "rlctl-checkpoint manifest.json crc32c ", 38) == 0 &&
          strlen(done) == 47 && done[46] == '\n');
    free(done);
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    man = rl_test_read_file(path, NULL);
    CHECK(man && strstr(man, "\"critic/value_head.safetensors\"") &&
          strstr(man, "\"optimizer.bin\"") && strstr(man, "\"state.json\"") &&
          !strstr(man, "DONE"));
    free(man);
    int legacy = -1;
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), 0);
    CHECK_INT(legacy, 0);
    // one bit of optimizer.bin's data, of the critic's head: named
    s_flip(dir, "optimizer.bin", 3);
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "/checkpoints/step-6/optimizer.bin: checksum mismatch");
    s_flip(dir, "optimizer.bin", 3);
    s_flip(dir, "critic/value_head.safetensors", 1);
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "/checkpoints/step-6/critic/value_head.safetensors: checksum mismatch");
    s_flip(dir, "critic/value_head.safetensors", 1);
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), 0);
    // the manifest lost (DONE names it): damaged, not an older rlctl's
    char saved[1200];
    snprintf(saved, sizeof(saved), "%s/../manifest.saved", dir);
    CHECK_INT(rename(path, saved), 0);
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "/checkpoints/step-6/manifest.json: missing (the DONE marker names it)");
    // a damaged marker
    snprintf(path, sizeof(path), "%s/DONE", dir);
    s_write(path, "rlctl-checkpoint manifest.json crc32c xyz\n");
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "/DONE: not a marker this rlctl reads");
    // an older rlctl's: an empty DONE, no manifest: nothing to check, said so
    s_write(path, "");
    legacy = 0;
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), 0);
    CHECK_INT(legacy, 1);
    // an empty DONE beside a manifest: the manifest is checked all the same
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    CHECK_INT(rename(saved, path), 0);
    s_flip(dir, "state.json", 2);
    CHECK_INT(rl_checkpoint_verify(dir, &legacy, err, sizeof(err)), RL_EPROTO);
    CHECK_INT(legacy, 0);
    CHECK_CONTAINS(err, "/state.json: checksum mismatch");
    // incomplete: as read_state says
    CHECK_INT(rl_checkpoint_prepare(run, 8, tmp, sizeof(tmp), err, sizeof(err)), 0);
    CHECK_INT(rl_checkpoint_verify(tmp, &legacy, err, sizeof(err)), RL_ENOTFOUND);
    CHECK_INT(rl_checkpoint_rmtree(run), 0);
}

// state.json's rules, each refused naming the field (the run resumed at step 1e15 and did
// nothing, moved its own folder aside for a step of another folder, took num_tokens -5), and
// commit refuses to write such a state.
static void s_test_state_rules(void) {
    char run[64], tmp[1024], dir[1024], err[1024], best[1200], cmd[2600];
    s_mktemp(run, sizeof(run));
    CHECK_INT(rl_checkpoint_prepare(run, 7, tmp, sizeof(tmp), err, sizeof(err)), 0);
    rl_ckpt_state_t st = s_state(7, "lora"), back;
    st.policy_version = 7;
    st.num_tokens = 100;
    st.has_critic = 1;
    st.n_algo = 1;
    strcpy(st.algo_key[0], "kl_coef");
    st.algo_value[0] = 0.05;
    CHECK_INT(rl_checkpoint_commit(tmp, &st, NULL, dir, sizeof(dir), err, sizeof(err)), 0);
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), 0);
    struct {
        const char *key;
        json_t *v;
        const char *want;
    } bad[] = {
        {"step", json_integer(1000000000000000LL),
         "state.json: 'step' is 1000000000000000, but the folder is step-7"},
        {"step", json_integer(3), "'step' is 3, but the folder is step-7"},
        {"policy_version", json_integer(8), "'policy_version' is 8, outside 0..7"},
        {"num_tokens", json_integer(-5), "'num_tokens' is -5, outside 0.."},
        {"n_trainable", json_integer(0), "'n_trainable' is 0, outside 1.."},
        {"model_train_step", json_integer(-1), "'model_train_step' is -1"},
        {"critic_train_step", json_integer(-2), "'critic_train_step' is -2"},
        {"data.epoch", json_integer(-1), "'data.epoch' is -1"},
        {"num_tokens", json_integer(9007199254740993LL), "'num_tokens' is 9007199254740993"},
        {"tune", json_string("xx"), "'tune' is \"xx\", not \"full\" or \"lora\""},
        {"rng.has_spare", json_integer(2), "'rng.has_spare' is 2, not 0 or 1"},
        {"rng.s", json_pack("[ssss]", "0000000000000000", "0000000000000000",
                            "0000000000000000", "0000000000000000"),
         "'rng.s' is all zero"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char keep[1200], path[1200];
        snprintf(path, sizeof(path), "%s/state.json", dir);
        snprintf(keep, sizeof(keep), "%s/state.keep", run);
        snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, keep);
        CHECK_INT(system(cmd), 0);
        s_patch(dir, bad[i].key, bad[i].v);
        err[0] = '\0';
        CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), RL_EPROTO);
        CHECK_CONTAINS(err, bad[i].want);
        CHECK_CONTAINS(err, "/checkpoints/step-7/state.json: ");
        CHECK_INT(rename(keep, path), 0);
    }
    CHECK_INT(rl_checkpoint_read_state(dir, &back, err, sizeof(err)), 0);
    // a copy named otherwise has no name to check its step against: the recipe's bound is the
    // caller's (the controller: train.steps); a trailing slash still names the folder
    snprintf(best, sizeof(best), "%s/best", run);
    snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s'", dir, best);
    CHECK_INT(system(cmd), 0);
    s_patch(best, "step", json_integer(1000000000000000LL));
    CHECK_INT(rl_checkpoint_read_state(best, &back, err, sizeof(err)), 0);
    CHECK_INT(back.step, 1000000000000000LL);
    s_patch(dir, "step", json_integer(8));
    char slash[1100];
    snprintf(slash, sizeof(slash), "%s//", dir);
    CHECK_INT(rl_checkpoint_read_state(slash, &back, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "'step' is 8, but the folder is step-7");
    // commit refuses a state read_state would refuse: nothing published
    CHECK_INT(rl_checkpoint_prepare(run, 9, tmp, sizeof(tmp), err, sizeof(err)), 0);
    st = s_state(9, "full");
    st.policy_version = 10;
    CHECK_INT(rl_checkpoint_commit(tmp, &st, NULL, dir, sizeof(dir), err, sizeof(err)),
              RL_EPROTO);
    CHECK_CONTAINS(err, "'policy_version' is 10, outside 0..9");
    st = s_state(8, "full"); // into step-9.tmp: not the folder's step
    CHECK_INT(rl_checkpoint_commit(tmp, &st, NULL, dir, sizeof(dir), err, sizeof(err)),
              RL_EPROTO);
    CHECK_CONTAINS(err, "'step' is 8, but the folder is step-9");
    snprintf(cmd, sizeof(cmd), "%s/checkpoints/step-9", run);
    CHECK(access(cmd, F_OK) != 0);
    CHECK_INT(rl_checkpoint_rmtree(run), 0);
}

int main(void) {
    char run[] = "/tmp/rl_test_ckpt_XXXXXX";
    rl_test_tmpdir(run, sizeof run, "ckpt");
    char dir[1024], tmp[1024], err[512], latest[1024], path[1200];
    int64_t step = -1;

    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), RL_ENOTFOUND);

    rl_optim_hparams_t hp = {0.9, 0.999, 1e-8, 0.0};
    rl_optim_t *o = rl_optim_new(10, &hp);
    float p[10] = {0}, g[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    rl_optim_step(o, p, g, 1e-3);

    CHECK_INT(rl_checkpoint_prepare(run, 10, tmp, sizeof(tmp), err, sizeof(err)), 0);
    CHECK_CONTAINS(tmp, "/checkpoints/step-10.tmp");
    snprintf(path, sizeof(path), "%s/model", tmp);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    snprintf(path, sizeof(path), "%s/model/config.json", tmp);
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
    CHECK_INT(rl_checkpoint_read_state(tmp, &back, err, sizeof(err)), RL_ENOTFOUND);
    CHECK_CONTAINS(err, "incomplete checkpoint");
    CHECK_INT(rl_checkpoint_commit(tmp, &st, o, dir, sizeof(dir), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/checkpoints/step-10", run);
    CHECK_STR(dir, path);
    CHECK(access(tmp, F_OK) != 0);
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
    CHECK_INT(rl_checkpoint_prepare(run, 20, tmp, sizeof(tmp), err, sizeof(err)), 0);
    s_commit(run, 9, NULL);
    CHECK_INT(rl_checkpoint_latest(run, latest, sizeof(latest), &step), 0);
    CHECK_INT(step, 10);
    s_commit(run, 20, o);
    s_commit(run, 30, o);
    s_commit(run, 100, o); // numeric, not lexical, order: 100 > 30
    snprintf(path, sizeof(path), "%s/checkpoints/step-5", run);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0); // an older rlctl's interrupted write (no DONE)
    CHECK_INT(rl_checkpoint_prepare(run, 110, tmp, sizeof(tmp), err, sizeof(err)), 0);
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
    CHECK(!s_exists(path, "step-5"));      // no DONE: not a checkpoint
    CHECK(!s_exists(path, "step-110.tmp")); // never published: a leftover once prune runs
    CHECK(s_exists(path, "step-x"));
    // prepare again over a leftover removes its content
    CHECK_INT(rl_checkpoint_prepare(run, 110, tmp, sizeof(tmp), err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/DONE", tmp);
    s_write(path, "");
    CHECK_INT(rl_checkpoint_prepare(run, 110, tmp, sizeof(tmp), err, sizeof(err)), 0);
    CHECK(!s_exists(tmp, "DONE"));

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
    snprintf(path, sizeof(path), "%s/final.tmp", rd); // an interrupted write of final/
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    snprintf(path, sizeof(path), "%s/final.old-12-0", rd);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
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
    CHECK(!s_exists(rd, "final.tmp") && !s_exists(rd, "final.old-12-0"));
    CHECK(s_exists(rd, "notes.txt")); // not a run's file: kept
    CHECK(s_exists(rd, ".lock"));
    rl_rundir_destroy(&h);

    // a start that failed before its first step (the mark, no checkpoint) does not block the
    // retry; once a step is trained (the mark gone), or with a checkpoint, the folder is refused
    snprintf(rd, sizeof(rd), "%s/rundir/b", run);
    h = rl_rundir_open(rd, RL_RUNDIR_NEW, &code, err, sizeof(err));
    CHECK(h != NULL);
    CHECK_INT(h ? rl_rundir_mark_unstarted(h, err, sizeof(err)) : -1, 0);
    CHECK(s_exists(rd, ".unstarted"));
    rl_rundir_destroy(&h);
    snprintf(path, sizeof(path), "%s/recipe.yaml", rd);
    s_write(path, "run: {}\n");
    snprintf(path, sizeof(path), "%s/metrics.jsonl", rd);
    s_write(path, "{\"step\": 0}\n");
    snprintf(path, sizeof(path), "%s/notes.txt", rd);
    s_write(path, "the user's");
    CHECK(rl_rundir_holds_run(rd));
    h = rl_rundir_open(rd, RL_RUNDIR_NEW, &code, err, sizeof(err));
    CHECK_MSG(h != NULL, "the retry after a failed start: %s", err);
    CHECK(!rl_rundir_holds_run(rd) && !s_exists(rd, ".unstarted"));
    CHECK(s_exists(rd, "notes.txt"));
    CHECK_INT(h ? rl_rundir_mark_unstarted(h, err, sizeof(err)) : -1, 0);
    rl_rundir_destroy(&h);
    snprintf(path, sizeof(path), "%s/metrics.jsonl", rd);
    s_write(path, "{\"step\": 1}\n");
    rl_rundir_mark_started(rd); // a step was trained
    CHECK(!s_exists(rd, ".unstarted"));
    h = rl_rundir_open(rd, RL_RUNDIR_NEW, &code, err, sizeof(err));
    CHECK(h == NULL);
    CHECK_CONTAINS(err, "already holds a run (metrics.jsonl)");
    snprintf(path, sizeof(path), "%s/.unstarted", rd); // the mark with a checkpoint: refused
    s_write(path, "");
    snprintf(path, sizeof(path), "%s/checkpoints/step-0", rd);
    CHECK_INT(rl_checkpoint_mkdirs(path), 0);
    h = rl_rundir_open(rd, RL_RUNDIR_NEW, &code, err, sizeof(err));
    CHECK(h == NULL);
    CHECK_CONTAINS(err, "already holds a run (metrics.jsonl, checkpoints/)");
    rl_rundir_destroy(&h);

    RL_TEST_RUN(s_test_commit_protocol);
    RL_TEST_RUN(s_test_crash_leftovers);
    RL_TEST_RUN(s_test_list);
    RL_TEST_RUN(s_test_abandon);
    RL_TEST_RUN(s_test_publish_dir);
    RL_TEST_RUN(s_test_verify);
    RL_TEST_RUN(s_test_state_rules);

    CHECK_INT(rl_checkpoint_rmtree(run), 0);
    struct stat sb;
    CHECK(stat(run, &sb) != 0);
    CHECK_INT(rl_checkpoint_rmtree(run), 0); // already gone
    rl_optim_destroy(&o);
    rl_optim_destroy(&o2);
    RL_TEST_DONE();
}

// integration tests for `rlctl traj` and the documented format: a run folder gets the resolved
// cookbook GRPO recipe (rlctl validate) and a store of 3 steps x 2 prompts x 2 samples written
// through the C API with ids from the arith-base tokenizer. Then `rlctl traj ls` must print each
// step's count, mean reward, mean advantage and policy version; `show` the texts, rewards and
// the old/sampler logprob gap; `show --jsonl` and `export --jsonl` parse as JSON with the same
// values; tests/reference/read_traj.py (python3-lmdb + python3-msgpack, written from
// docs/trajectories.md) must read back exactly what was written; a corrupt record makes the
// commands fail naming its key; and the refusals exit 2. A damaged page (a zeroed leaf, on
// which liblmdb aborts; a node pointing past the end of the file: SIGBUS) no longer kills
// `rlctl traj`: the readers report the damage, naming the store and what to do; `check` finds
// it; `salvage` keeps every record but the page's, moves the old store aside, and afterwards
// the store checks whole and reads again.
#include "rl_err.h"
#include "rl_test.h"
#include "rl_test_lmdb.h"
#include "rl_tokenizer.h"
#include "rl_traj.h"

#include <jansson.h>
#include <lmdb.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARITH RL_SOURCE_DIR "/cookbook/models/arith-base"
#define STEPS 3
#define PROMPTS 2
#define G 2
#define N (PROMPTS * G)

static const char *const s_prompts[PROMPTS] = {"12*3+100=", "45*2+300="};
static const char *const s_completions[G] = {"12*3=36;36+100=136 #### 136", "7 #### 7"};
static char *s_reward_names[2] = {"correct", "format"};

static char s_dir[64], s_run[128], s_out[1 << 20];
static rl_traj_record_t s_recs[STEPS][N];

static int s_rlctl(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/rlctl' %s 2>&1", RL_BINARY_DIR, args);
    return rl_test_shell(cmd, s_out, sizeof s_out);
}

static int32_t *s_encode(rl_tokenizer_t *tok, const char *text, int eos, int *n) {
    int32_t *ids = NULL;
    size_t len = 0;
    RL_ASSERT(rl_tokenizer_encode(tok, text, strlen(text), 0, &ids, &len) == 0);
    if (eos >= 0) {
        ids = realloc(ids, (len + 1) * sizeof(int32_t));
        ids[len++] = eos;
    }
    *n = (int)len;
    return ids;
}

// Step s (1-based): prompt p, sample g. Step 2 stores old logprobs; step 3 has a NaN reward
// (unscorable), a length-finished sample, and policy versions 1 and 2 mixed.
static void s_fill(rl_tokenizer_t *tok, int eos) {
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++) {
            int p = i / G, g = i % G;
            rl_traj_record_t *r = &s_recs[s][i];
            memset(r, 0, sizeof(*r));
            r->step = (uint64_t)s + 1;
            r->prompt_index = (uint32_t)p;
            r->sample_index = (uint32_t)g;
            r->data_index = 10 * p + s;
            r->policy_version = s == 2 ? (uint64_t)(1 + (i % 2)) : (uint64_t)s;
            r->finish = s == 2 && i == 3;
            r->prompt_ids = s_encode(tok, s_prompts[p], -1, &r->n_prompt);
            r->completion_ids = s_encode(tok, s_completions[g], r->finish ? -1 : eos,
                                         &r->n_completion);
            int nc = r->n_completion;
            r->mask = malloc((size_t)nc);
            r->sampler_logprobs = malloc((size_t)nc * 4);
            for (int t = 0; t < nc; t++) {
                r->mask[t] = 1;
                r->sampler_logprobs[t] = -0.125f * (float)(t % 4) - 0.1f * (float)i;
            }
            if (s == 2) { // a PPO-shaped step: values, advantages and rewards per token
                r->values = malloc((size_t)nc * 4);
                r->advantages = malloc((size_t)nc * 4);
                r->token_rewards = malloc((size_t)nc * 4);
                for (int t = 0; t < nc; t++) {
                    r->values[t] = 0.5f + 0.0625f * (float)t;
                    r->advantages[t] = -0.25f * (float)(t % 3) + 0.1f;
                    r->token_rewards[t] = t == nc - 1 ? 1.0f : -0.003f * (float)t;
                }
            }
            if (s == 1) {
                r->old_logprobs = malloc((size_t)nc * 4);
                for (int t = 0; t < nc; t++) {
                    r->old_logprobs[t] = r->sampler_logprobs[t] + (t % 2 ? 0.25f : -0.125f);
                }
            }
            r->n_rewards = 2;
            r->reward_names = s_reward_names;
            r->rewards = malloc(2 * sizeof(double));
            r->rewards[0] = g == 0 ? 1.0 : 0.0;
            r->rewards[1] = s == 2 && i == 1 ? NAN : 0.5;
            r->reward = r->rewards[0] + 0.1 * s;
            r->advantage = g == 0 ? 1.0 / 3.0 : -1.0 / 3.0 + 0.25 * s;
            if (s == 0 && i == 0) { // a two-turn episode: the first 4 tokens the policy's,
                                    // 4 of the environment's, the rest the policy's again
                rl_traj_episode_t *e = calloc(1, sizeof *e);
                e->n_turns = 2;
                e->turn_starts = malloc(2 * sizeof *e->turn_starts);
                e->turn_starts[0] = 0;
                e->turn_starts[1] = 8;
                e->turn_rewards = malloc(2 * sizeof *e->turn_rewards);
                e->turn_rewards[0] = 0.5;
                e->turn_rewards[1] = 0.0;
                e->tool_calls = 1;
                e->conversation = strdup("{\"messages\":[{\"role\":\"user\",\"content\":"
                                         "\"12*3+100=\"}]}");
                for (int t = 4; t < 8; t++) {
                    r->mask[t] = 0;
                }
                r->episode = e;
            }
        }
    }
}

static void s_free(void) {
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++) {
            s_recs[s][i].reward_names = NULL; // static names
            s_recs[s][i].n_rewards = 0;
            rl_traj_record_clear(&s_recs[s][i]);
        }
    }
}

// mean |old - sampler| of a record, as show prints it
static double s_gap(const rl_traj_record_t *r) {
    double g = 0.0;
    for (int t = 0; t < r->n_completion; t++) {
        g += fabs((double)r->old_logprobs[t] - (double)r->sampler_logprobs[t]);
    }
    return g / r->n_completion;
}

// ---- JSON comparisons -----------------------------------------------------------------------

static int s_jints_eq(json_t *a, const int32_t *v, int n) {
    if (!json_is_array(a) || (int)json_array_size(a) != n) {
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if (json_integer_value(json_array_get(a, (size_t)i)) != v[i]) {
            return 0;
        }
    }
    return 1;
}

// float32 arrays: exact when the printer keeps enough digits (9 for rlctl, Python's repr)
static int s_jfloats_eq(json_t *a, const float *v, int n) {
    if (!v) {
        return json_is_null(a);
    }
    if (!json_is_array(a) || (int)json_array_size(a) != n) {
        return 0;
    }
    for (int i = 0; i < n; i++) {
        if ((float)json_number_value(json_array_get(a, (size_t)i)) != v[i]) {
            return 0;
        }
    }
    return 1;
}

// A double printed with `digits` significant digits, or null for NaN.
static int s_jnum_eq(json_t *a, double x, double rel) {
    if (isnan(x)) {
        return json_is_null(a);
    }
    return json_is_number(a) && fabs(json_number_value(a) - x) <= rel * fmax(1.0, fabs(x));
}

// Checks one exported / python-read object against the record it came from. `rel` is the
// tolerance of float64 values: 5e-9 for rlctl's 9 digits, 0 for Python's exact repr.
static void s_check_full(json_t *o, const rl_traj_record_t *r, double rel, const char *who) {
    char at[96];
    snprintf(at, sizeof at, "%s: step %llu prompt %u sample %u", who,
             (unsigned long long)r->step, (unsigned)r->prompt_index, (unsigned)r->sample_index);
    CHECK_MSG(json_integer_value(json_object_get(o, "step")) == (json_int_t)r->step, "%s", at);
    CHECK_MSG(json_integer_value(json_object_get(o, "prompt_index")) == r->prompt_index, "%s",
              at);
    CHECK_MSG(json_integer_value(json_object_get(o, "sample_index")) == r->sample_index, "%s",
              at);
    CHECK_MSG(json_integer_value(json_object_get(o, "data_index")) == r->data_index, "%s", at);
    CHECK_MSG(json_integer_value(json_object_get(o, "policy_version")) ==
                  (json_int_t)r->policy_version, "%s", at);
    CHECK_MSG(s_jints_eq(json_object_get(o, "prompt_ids"), r->prompt_ids, r->n_prompt), "%s",
              at);
    CHECK_MSG(s_jints_eq(json_object_get(o, "completion_ids"), r->completion_ids,
                         r->n_completion), "%s", at);
    json_t *mask = json_object_get(o, "mask");
    int mask_ok = json_is_array(mask) && (int)json_array_size(mask) == r->n_completion;
    for (int t = 0; mask_ok && t < r->n_completion; t++) {
        mask_ok = json_integer_value(json_array_get(mask, (size_t)t)) == r->mask[t];
    }
    CHECK_MSG(mask_ok, "%s: mask", at);
    CHECK_MSG(s_jfloats_eq(json_object_get(o, "sampler_logprobs"), r->sampler_logprobs,
                           r->n_completion), "%s: sampler_logprobs", at);
    CHECK_MSG(s_jfloats_eq(json_object_get(o, "old_logprobs"), r->old_logprobs,
                           r->n_completion), "%s: old_logprobs", at);
    CHECK_MSG(json_is_null(json_object_get(o, "ref_logprobs")), "%s", at);
    CHECK_MSG(s_jfloats_eq(json_object_get(o, "values"), r->values, r->n_completion),
              "%s: values", at);
    CHECK_MSG(s_jfloats_eq(json_object_get(o, "advantages"), r->advantages, r->n_completion),
              "%s: advantages", at);
    // token_rewards is optional in the store: absent from the output when not stored
    json_t *tr = json_object_get(o, "token_rewards");
    CHECK_MSG(r->token_rewards ? s_jfloats_eq(tr, r->token_rewards, r->n_completion) : !tr,
              "%s: token_rewards", at);
    json_t *rw = json_object_get(o, "rewards");
    CHECK_MSG(json_is_object(rw) && json_object_size(rw) == 2, "%s: rewards", at);
    for (int k = 0; k < 2; k++) {
        CHECK_MSG(s_jnum_eq(json_object_get(rw, s_reward_names[k]), r->rewards[k], rel),
                  "%s: rewards.%s", at, s_reward_names[k]);
    }
    CHECK_MSG(s_jnum_eq(json_object_get(o, "reward"), r->reward, rel), "%s: reward", at);
    CHECK_MSG(s_jnum_eq(json_object_get(o, "advantage"), r->advantage, rel), "%s: advantage",
              at);
    const char *fin = json_string_value(json_object_get(o, "finish"));
    CHECK_MSG(fin && !strcmp(fin, r->finish ? "length" : "stop"), "%s: finish", at);
    // a multi-turn episode's turns: present exactly when stored
    json_t *ep = json_object_get(o, "episode");
    CHECK_MSG(!r->episode == !ep, "%s: episode %s", at, ep ? "unexpected" : "missing");
    if (r->episode && ep) {
        const rl_traj_episode_t *e = r->episode;
        json_t *turns = json_object_get(ep, "turns"), *tr2 = json_object_get(ep, "turn_rewards");
        int ok =
            (int)json_array_size(turns) == e->n_turns && (int)json_array_size(tr2) == e->n_turns;
        for (int t = 0; ok && t < e->n_turns; t++) {
            ok = json_integer_value(json_array_get(turns, (size_t)t)) == e->turn_starts[t] &&
                 s_jnum_eq(json_array_get(tr2, (size_t)t), e->turn_rewards[t], rel);
        }
        const char *end = json_string_value(json_object_get(ep, "end"));
        CHECK_MSG(ok && end && !strcmp(end, e->truncated ? "truncated" : "done") &&
                      json_integer_value(json_object_get(ep, "tool_calls")) == e->tool_calls &&
                      json_integer_value(json_object_get(ep, "parse_errors")) == e->parse_errors,
                  "%s: episode", at);
        json_t *conv = json_object_get(ep, "conversation");
        json_t *want = json_loads(e->conversation, 0, NULL);
        CHECK_MSG(json_equal(conv, want), "%s: episode.conversation", at);
        json_decref(want);
    }
}

// Parses the JSON lines of s_out into out[0..cap); returns how many (or -1 on a bad line).
static int s_lines(json_t **out, int cap) {
    int n = 0;
    for (char *line = s_out; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len) {
            json_error_t e;
            json_t *o = json_loadb(line, len, 0, &e);
            if (!o || n == cap) {
                fprintf(stderr, "bad JSON line (%s): %.*s\n", o ? "too many" : e.text,
                        (int)len, line);
                json_decref(o);
                return -1;
            }
            out[n++] = o;
        }
        line += len + (nl ? 1 : 0);
    }
    return n;
}

static void s_decref(json_t **o, int n) {
    for (int i = 0; i < n; i++) {
        json_decref(o[i]);
    }
}

// ---- the commands ---------------------------------------------------------------------------

static void test_ls(void) {
    char args[256];
    snprintf(args, sizeof args, "traj ls '%s'", s_run);
    CHECK_INT(s_rlctl(args), 0);
    CHECK_CONTAINS(s_out, "mean_reward");
    for (int s = 0; s < STEPS; s++) {
        double sr = 0.0, sa = 0.0;
        for (int i = 0; i < N; i++) {
            sr += s_recs[s][i].reward;
            sa += s_recs[s][i].advantage;
        }
        char want[128];
        snprintf(want, sizeof want, "%8d %8d %12.4f %15.4f  %s\n", s + 1, N, sr / N, sa / N,
                 s == 2 ? "1..2" : s == 1 ? "1" : "0");
        CHECK_CONTAINS(s_out, want);
    }
    CHECK_CONTAINS(s_out, "3 steps, 12 records, last step 3");
}

static void test_show(void) {
    char args[256];
    snprintf(args, sizeof args, "traj show '%s' --step 2", s_run);
    CHECK_INT(s_rlctl(args), 0);
    CHECK_CONTAINS(s_out, "step 2: 4 records");
    CHECK_CONTAINS(s_out, "prompt:     \"12*3+100=\"");
    CHECK_CONTAINS(s_out, "prompt:     \"45*2+300=\"");
    CHECK_CONTAINS(s_out, "completion: \"12*3=36;36+100=136 #### 136<|endoftext|>\"");
    CHECK_CONTAINS(s_out, "[prompt 1, sample 1]  data_index 11  policy 1  finish stop");
    CHECK_CONTAINS(s_out, "correct=1 format=0.5  total=1.1  advantage=0.333333");
    char want[128];
    snprintf(want, sizeof want, "logprob gap |old - sampler|: %.6g (mean of %d tokens)",
             s_gap(&s_recs[1][3]), s_recs[1][3].n_completion);
    CHECK_CONTAINS(s_out, want);

    // step 1: no old logprobs, so no gap line; its first record is an episode, shown turn by
    // turn with what was trained
    snprintf(args, sizeof args, "traj show '%s' --step 1", s_run);
    CHECK_INT(s_rlctl(args), 0);
    CHECK(strstr(s_out, "logprob gap") == NULL);
    CHECK_CONTAINS(s_out, "  episode: 2 turns, done, 1 tool calls, 0 parse errors\n"
                          "  [policy] turn 1, 4 tokens trained: \"12*3\"\n"
                          "  [env]    4 tokens of context (after turn 1, reward 0.5): \"=36;\"\n"
                          "  [policy] turn 2, ");
    CHECK_CONTAINS(s_out, "format=0.5");

    snprintf(args, sizeof args, "traj show '%s' --step 3 --jsonl", s_run);
    CHECK_INT(s_rlctl(args), 0);
    json_t *o[8];
    int n = s_lines(o, 8);
    CHECK_INT(n, N);
    for (int i = 0; i < n && i < N; i++) {
        const rl_traj_record_t *r = &s_recs[2][i];
        const char *c = json_string_value(json_object_get(o[i], "completion"));
        char want_c[128];
        snprintf(want_c, sizeof want_c, "%s%s", s_completions[i % G],
                 r->finish ? "" : "<|endoftext|>");
        CHECK_STR(c, want_c);
        CHECK_STR(json_string_value(json_object_get(o[i], "prompt")), s_prompts[i / G]);
        CHECK(json_is_null(json_object_get(o[i], "logprob_gap")));
        CHECK_INT(json_integer_value(json_object_get(o[i], "n_completion")), r->n_completion);
        CHECK(s_jnum_eq(json_object_get(json_object_get(o[i], "rewards"), "format"),
                        r->rewards[1], 5e-9));
        CHECK(json_object_get(o[i], "completion_ids") == NULL); // export's, not show's
    }
    s_decref(o, n);
    snprintf(args, sizeof args, "traj show '%s' --step 2 --jsonl", s_run);
    CHECK_INT(s_rlctl(args), 0);
    n = s_lines(o, 8);
    CHECK_INT(n, N);
    for (int i = 0; i < n && i < N; i++) {
        CHECK(s_jnum_eq(json_object_get(o[i], "logprob_gap"), s_gap(&s_recs[1][i]), 5e-9));
    }
    s_decref(o, n);
}

static void test_export(void) {
    char args[256];
    snprintf(args, sizeof args, "traj export '%s' --jsonl", s_run);
    CHECK_INT(s_rlctl(args), 0);
    json_t *o[16];
    int n = s_lines(o, 16);
    CHECK_INT(n, STEPS * N);
    for (int k = 0; k < n && k < STEPS * N; k++) {
        s_check_full(o[k], &s_recs[k / N][k % N], 5e-9, "export");
        CHECK_STR(json_string_value(json_object_get(o[k], "prompt")), s_prompts[(k % N) / G]);
    }
    s_decref(o, n);
    snprintf(args, sizeof args, "traj export '%s' --step 3", s_run);
    CHECK_INT(s_rlctl(args), 0);
    n = s_lines(o, 16);
    CHECK_INT(n, N);
    for (int k = 0; k < n && k < N; k++) {
        s_check_full(o[k], &s_recs[2][k], 5e-9, "export --step 3");
    }
    s_decref(o, n);
}

static void test_python(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/reference/read_traj.py' "
             "'%s/trajectories.lmdb' 2>&1", RL_SOURCE_DIR, s_run);
    int rc = rl_test_shell(cmd, s_out, sizeof s_out);
    CHECK_MSG(rc == 0, "read_traj.py exited %d: %s", rc, s_out);
    json_t *o[16];
    int n = s_lines(o, 16);
    CHECK_INT(n, 1 + STEPS * N);
    if (n >= 1) {
        json_t *meta = json_object_get(o[0], "meta");
        CHECK_INT(json_integer_value(json_object_get(meta, "schema_version")), 1);
        CHECK_INT(json_integer_value(json_object_get(meta, "last_step")), STEPS);
    }
    for (int k = 1; k < n && k <= STEPS * N; k++) {
        // Python prints float64 with repr (exact) and float32 values widened exactly
        s_check_full(o[k], &s_recs[(k - 1) / N][(k - 1) % N], 0.0, "read_traj.py");
    }
    s_decref(o, n);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/tests/reference/read_traj.py' "
             "'%s/trajectories.lmdb' --step 2 2>&1", RL_SOURCE_DIR, s_run);
    CHECK_INT(rl_test_shell(cmd, s_out, sizeof s_out), 0);
    n = s_lines(o, 16);
    CHECK_INT(n, 1 + N);
    s_decref(o, n);
}

static void test_refusals(void) {
    char args[512];
    CHECK_INT(s_rlctl("traj --help"), 0);
    CHECK_CONTAINS(s_out, "usage: rlctl traj ls RUN");
    CHECK_INT(s_rlctl("traj"), 2);
    CHECK_CONTAINS(s_out, "a subcommand is required");
    snprintf(args, sizeof args, "traj frob '%s'", s_run);
    CHECK_INT(s_rlctl(args), 2);
    CHECK_CONTAINS(s_out, "unknown subcommand 'frob'");
    snprintf(args, sizeof args, "traj show '%s'", s_run);
    CHECK_INT(s_rlctl(args), 2);
    CHECK_CONTAINS(s_out, "--step N is required");
    snprintf(args, sizeof args, "traj show '%s' --step x", s_run);
    CHECK_INT(s_rlctl(args), 2);
    snprintf(args, sizeof args, "traj ls '%s' --jsonl", s_run);
    CHECK_INT(s_rlctl(args), 2);
    CHECK_CONTAINS(s_out, "unknown option '--jsonl'");
    snprintf(args, sizeof args, "traj ls '%s' '%s'", s_run, s_run);
    CHECK_INT(s_rlctl(args), 2);
    snprintf(args, sizeof args, "traj show '%s' --step 9", s_run);
    CHECK_INT(s_rlctl(args), 1);
    CHECK_CONTAINS(s_out, "no records at step 9 (last step 3");
    snprintf(args, sizeof args, "traj ls '%s/nowhere'", s_dir);
    CHECK_INT(s_rlctl(args), 2);
    CHECK_CONTAINS(s_out, "is not a folder");
    snprintf(args, sizeof args, "traj ls '%s'", s_dir); // a folder without a store
    CHECK_INT(s_rlctl(args), 2);
    CHECK_CONTAINS(s_out, "holds no trajectories.lmdb");

    // a run folder whose recipe is gone: ls still works (no text), show cannot decode
    char bare[192], cmd[1024];
    snprintf(bare, sizeof bare, "%s/bare", s_dir);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -r '%s/trajectories.lmdb' '%s/'", bare,
             s_run, bare);
    CHECK_INT(system(cmd), 0);
    snprintf(args, sizeof args, "traj ls '%s'", bare);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(args, sizeof args, "traj show '%s' --step 1", bare);
    CHECK_INT(s_rlctl(args), 2);
    CHECK_CONTAINS(s_out, "recipe.yaml");
}

// A record that does not decode: the commands fail with exit 1 and name its key.
static void test_corrupt(void) {
    char path[192];
    snprintf(path, sizeof path, "%s/trajectories.lmdb", s_run);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    RL_ASSERT(mdb_env_create(&env) == 0);
    mdb_env_set_maxdbs(env, 2);
    RL_ASSERT(mdb_env_open(env, path, 0, 0664) == 0);
    RL_ASSERT(mdb_txn_begin(env, NULL, 0, &txn) == 0);
    RL_ASSERT(mdb_dbi_open(txn, "traj", 0, &dbi) == 0);
    uint8_t key[16] = {0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0}; // step 2, p 1, s 0
    MDB_val k = {16, key}, v = {3, "\x81\xa1v"};                       // a map cut short
    RL_ASSERT(mdb_put(txn, dbi, &k, &v, 0) == 0);
    RL_ASSERT(mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
    char args[256];
    snprintf(args, sizeof args, "traj show '%s' --step 2", s_run);
    CHECK_INT(s_rlctl(args), 1);
    CHECK_CONTAINS(s_out, "record (step 2, prompt 1, sample 0)");
    snprintf(args, sizeof args, "traj ls '%s'", s_run);
    CHECK_INT(s_rlctl(args), 1);
    CHECK_CONTAINS(s_out, "step 2, prompt 1, sample 0");
    snprintf(args, sizeof args, "traj export '%s' --step 3", s_run); // other steps still read
    CHECK_INT(s_rlctl(args), 0);
}

// A run folder "dmg" whose store holds 40 steps of 4 records (the records of s_recs again, under
// other steps), so that `traj` has branch pages; its recipe.yaml is the run's.
static void s_damaged_run(const char *name) {
    char run[192], cmd[1024], path[256], err[1024];
    snprintf(run, sizeof run, "%s/%s", s_dir, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -m 0700 '%s' && cp '%s/recipe.yaml' '%s/'",
             run, run, s_run, run);
    RL_ASSERT(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/trajectories.lmdb", run);
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    RL_ASSERT(t);
    for (int s = 1; s <= 40; s++) {
        rl_traj_record_t recs[N];
        for (int i = 0; i < N; i++) {
            recs[i] = s_recs[(s - 1) % STEPS][i];
            recs[i].step = (uint64_t)s;
        }
        CHECK_INT(rl_traj_put_step(t, (uint64_t)s, recs, N, err, sizeof err), 0);
    }
    rl_traj_close(&t);
}

static void test_damaged(void) {
    char args[512], path[256];
    // a zeroed leaf: a seek into it gives MDB_CORRUPTED, a cursor moving onto it makes
    // liblmdb abort (SIGABRT killed `rlctl traj show` before); no step may kill rlctl now
    s_damaged_run("dmg");
    snprintf(path, sizeof path, "%s/dmg/trajectories.lmdb", s_dir);
    int lost = 0;
    uint64_t first = 0;
    CHECK(rl_test_traj_zero_leaf(path, &lost, &first) > 0);
    snprintf(args, sizeof args, "traj ls '%s/dmg'", s_dir);
    CHECK_INT(s_rlctl(args), 1);
    CHECK_CONTAINS(s_out, "/dmg/trajectories.lmdb is damaged: ");
    CHECK_CONTAINS(s_out, "rlctl traj salvage");
    // the steps around the page: its first record's, the one before and the two after (4
    // records a step: the page's at most 3 records span at most 2 steps)
    int crashed = 0, damaged = 0, fine = 0;
    for (int s = (int)first - 1; s <= (int)first + 2; s++) {
        snprintf(args, sizeof args, "traj show '%s/dmg' --step %d", s_dir, s);
        int rc = s_rlctl(args);
        CHECK_MSG(rc == 0 || rc == 1, "traj show --step %d: exit %d: %s", s, rc, s_out);
        crashed += strstr(s_out, "is damaged: reading it crashed (signal") != NULL;
        damaged += rc == 1 && strstr(s_out, "/dmg/trajectories.lmdb is damaged: ") &&
                   strstr(s_out, "rlctl traj salvage");
        fine += rc == 0;
    }
    CHECK_MSG(crashed >= 1 && damaged >= 1 && damaged + fine == 4, "of steps %d..%d %d "
              "crashed, %d were reported damaged, %d read", (int)first - 1, (int)first + 2,
              crashed, damaged, fine);
    snprintf(args, sizeof args, "traj check '%s/dmg'", s_dir);
    CHECK_INT(s_rlctl(args), 1);
    CHECK_CONTAINS(s_out, "/dmg/trajectories.lmdb is damaged: table traj, after record (step ");
    CHECK_CONTAINS(s_out, "rlctl traj salvage");
    snprintf(args, sizeof args, "traj salvage '%s/dmg'", s_dir);
    CHECK_INT(s_rlctl(args), 0);
    char want[128];
    snprintf(want, sizeof want, "salvaged %d records of 160 (%d lost)", 160 - lost, lost);
    CHECK_CONTAINS(s_out, want);
    CHECK_CONTAINS(s_out, "lost: traj: the records after (step ");
    CHECK_CONTAINS(s_out, "the damaged store is kept as ");
    CHECK_CONTAINS(s_out, "/dmg/trajectories.lmdb.damaged-");
    snprintf(args, sizeof args, "traj check '%s/dmg'", s_dir);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(want, sizeof want, "is whole: %d records in ", 160 - lost);
    CHECK_CONTAINS(s_out, want);
    CHECK_CONTAINS(s_out, "(last step 40)");
    snprintf(args, sizeof args, "traj ls '%s/dmg'", s_dir);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(want, sizeof want, " steps, %d records, last step 40", 160 - lost);
    CHECK_CONTAINS(s_out, want);
    snprintf(args, sizeof args, "traj salvage '%s/dmg'", s_dir); // whole: nothing to do
    CHECK_INT(s_rlctl(args), 0);
    CHECK_CONTAINS(s_out, "nothing to salvage");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -d '%s'/dmg/trajectories.lmdb.damaged-* | wc -l", s_dir);
    CHECK_INT(rl_test_shell(cmd, s_out, sizeof s_out), 0);
    CHECK_INT(atoi(s_out), 1);

    // a node pointing past the end of the file: reading it faults (SIGBUS killed ls before)
    s_damaged_run("wild");
    snprintf(path, sizeof path, "%s/wild/trajectories.lmdb", s_dir);
    CHECK(rl_test_traj_wild_node(path) > 0);
    snprintf(args, sizeof args, "traj ls '%s/wild'", s_dir);
    CHECK_INT(s_rlctl(args), 1);
    CHECK_CONTAINS(s_out, "is damaged: reading it crashed (signal");
    snprintf(args, sizeof args, "traj check '%s/wild'", s_dir);
    CHECK_INT(s_rlctl(args), 1);
    CHECK_CONTAINS(s_out, "/wild/trajectories.lmdb is damaged: ");
    snprintf(args, sizeof args, "traj salvage '%s/wild'", s_dir);
    CHECK_INT(s_rlctl(args), 0);
    CHECK_CONTAINS(s_out, "salvaged ");
    snprintf(args, sizeof args, "traj check '%s/wild'", s_dir);
    CHECK_INT(s_rlctl(args), 0);
    // check and salvage take no record options; salvage needs a store
    snprintf(args, sizeof args, "traj check '%s/wild' --step 1", s_dir);
    CHECK_INT(s_rlctl(args), 2);
    snprintf(args, sizeof args, "traj salvage '%s'", s_dir);
    CHECK_INT(s_rlctl(args), 2);
    CHECK_CONTAINS(s_out, "holds no trajectories.lmdb");
}

int main(void) {
    // a sanitized rlctl: faults on a damaged page must stay signals (AddressSanitizer would turn
    // them into exit status 1), which is what the reader's parent reports
    setenv("ASAN_OPTIONS", "handle_segv=0:handle_sigbus=0", 0);
    rl_test_tmpdir(s_dir, sizeof s_dir, "traj_cli");
    snprintf(s_run, sizeof s_run, "%s/run", s_dir);
    RL_ASSERT(mkdir(s_run, 0775) == 0);
    // the run's recipe.yaml is the resolved cookbook recipe, as `rlctl run` writes it
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/rlctl' validate '%s/cookbook/grpo_lora.yaml' > "
             "'%s/recipe.yaml'", RL_BINARY_DIR, RL_SOURCE_DIR, s_run);
    CHECK_INT(system(cmd), 0);

    char err[1024];
    rl_tokenizer_t *tok = rl_tokenizer_new_dir(ARITH, err, sizeof err);
    RL_TEST_ASSERT_FILE(tok, err);
    int eos = rl_tokenizer_token_to_id(tok, "<|endoftext|>");
    CHECK(eos >= 0);
    s_fill(tok, eos);
    rl_tokenizer_destroy(&tok);

    char path[192];
    snprintf(path, sizeof path, "%s/trajectories.lmdb", s_run);
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(path, 0, &t, err, sizeof err), 0);
    RL_TEST_ASSERT_FILE(t, err);
    for (int s = 0; s < STEPS; s++) {
        int rc = rl_traj_put_step(t, (uint64_t)s + 1, s_recs[s], N, err, sizeof err);
        CHECK_MSG(rc == 0, "put step %d: %s", s + 1, err);
    }
    rl_traj_close(&t);

    RL_TEST_RUN(test_ls);
    RL_TEST_RUN(test_show);
    RL_TEST_RUN(test_export);
    RL_TEST_RUN(test_python);
    RL_TEST_RUN(test_refusals);
    RL_TEST_RUN(test_corrupt);
    RL_TEST_RUN(test_damaged);
    s_free();
    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}

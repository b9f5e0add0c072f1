// cmd_traj — `rlctl traj`: reads a run's trajectory store (rollout/rl_traj, format in
// docs/trajectories.md). `ls` gives one line per step, `show` one step's records as text,
// `export` every field as JSON Lines; `check` walks the whole store for damage and `salvage`
// copies what can be read of a damaged one into a new store. The readers open the store
// read-only, so they can look at a run that is still writing; they run in a child process, since
// LMDB trusts its pages and a damaged one can crash whoever reads it: the parent then reports
// the damage instead of dying (docs/trajectories.md, "A damaged store"). Token ids become text
// with the tokenizer named by the run's recipe.yaml.
#include "rl_cli.h"
#include "rl_algos.h"

#include "rl_config.h"
#include "rl_err.h"
#include "rl_rundir.h"
#include "rl_tokenizer.h"
#include "rl_traj.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char s_help[] =
    "usage: rlctl traj ls RUN [--eval]\n"
    "       rlctl traj show RUN --step N [--jsonl] [--eval]\n"
    "       rlctl traj export RUN [--step N] [--jsonl] [--eval]\n"
    "       rlctl traj check RUN\n"
    "       rlctl traj salvage RUN\n\n"
    "Reads RUN/trajectories.lmdb: the completions a run sampled, with their rewards and\n"
    "advantages (format: docs/trajectories.md). Token ids are decoded with the tokenizer that\n"
    "RUN/recipe.yaml names (model.tokenizer); special tokens are kept in the text.\n\n"
    "  ls       one line per step: records, mean total reward, mean advantage, and the policy\n"
    "           version(s) that sampled them\n"
    "  show     the records of step N: prompt and completion text, each reward, the total, the\n"
    "           advantage (PPO: the reward, the critic's value and the advantage of every\n"
    "           trained token),\n"
    "           the finish reason, and the mean |old - sampler| logprob gap over the\n"
    "           completion's tokens when the actor's old logprobs are stored\n"
    "  export   every record (of step N with --step) as one JSON object per line: the stored\n"
    "           fields (ids, mask, logprob arrays, rewards) plus the prompt and completion text\n"
    "  check    reads the whole store (every page LMDB reaches, every record decoded) and says\n"
    "           whether it is whole; a resume runs the same check before it appends\n"
    "  salvage  for a damaged store: copies every record that can still be read into a new\n"
    "           store, keeps the old one as RUN/trajectories.lmdb.damaged-<unix time>, and\n"
    "           says what was lost; then rlctl run --resume continues. A whole store is left\n"
    "           as it is. Takes the run folder's lock (not while a run writes there)\n\n"
    "options:\n"
    "  --step N     the step (from 1; with --eval, the step an evaluation followed: 0 before\n"
    "               training)\n"
    "  --eval       the evaluations' completions instead of the steps': samples 0..k-1 sampled\n"
    "               (train.eval_k), sample k greedy, scored by the recipe's rewards\n"
    "  --jsonl      show: one JSON object per record instead of text; export: the format\n"
    "               (JSON Lines is export's only one). Numbers carry 9 significant digits\n"
    "               (exact for the float32 arrays); a NaN reward (unscorable) is null\n"
    "  -h, --help   this help\n\n"
    "exit status: 0 ok (check: whole; salvage: done, or nothing to do), 1 a damaged or\n"
    "unreadable store (named, with what to do) or no records at step N, 2 usage or RUN is not\n"
    "a run folder (no trajectories.lmdb, bad recipe.yaml)\n";

typedef enum { S_LS, S_SHOW, S_EXPORT, S_CHECK, S_SALVAGE } s_sub_t;

typedef struct {
    s_sub_t sub;
    const char *run;
    uint64_t step;
    int has_step, jsonl, eval;
} s_opts_t;

static int s_parse(int argc, char **argv, s_opts_t *o) {
    memset(o, 0, sizeof(*o));
    if (argc < 2) {
        fprintf(stderr, "rlctl traj: a subcommand is required: ls, show, export, check or "
                        "salvage (see --help)\n");
        return RL_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "ls") == 0) {
        o->sub = S_LS;
    } else if (strcmp(sub, "show") == 0) {
        o->sub = S_SHOW;
    } else if (strcmp(sub, "export") == 0) {
        o->sub = S_EXPORT;
    } else if (strcmp(sub, "check") == 0) {
        o->sub = S_CHECK;
    } else if (strcmp(sub, "salvage") == 0) {
        o->sub = S_SALVAGE;
    } else {
        fprintf(stderr, "rlctl traj: unknown subcommand '%s': expected ls, show, export, check "
                        "or salvage\n", sub);
        return RL_EXIT_USAGE;
    }
    int reads = o->sub == S_LS || o->sub == S_SHOW || o->sub == S_EXPORT; // records, not pages
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--jsonl") == 0 && reads && o->sub != S_LS) {
            o->jsonl = 1;
        } else if (strcmp(a, "--eval") == 0 && reads) {
            o->eval = 1;
        } else if (strcmp(a, "--step") == 0 && reads && o->sub != S_LS) {
            if (i + 1 >= argc) {
                fprintf(stderr, "rlctl traj: --step needs a value\n");
                return RL_EXIT_USAGE;
            }
            int rc = rl_cli_u64("traj", "--step", argv[++i], &o->step);
            if (rc) {
                return rc;
            }
            o->has_step = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "rlctl traj %s: unknown option '%s' (see --help)\n", sub, a);
            return RL_EXIT_USAGE;
        } else if (!o->run) {
            o->run = a;
        } else {
            fprintf(stderr, "rlctl traj %s: one RUN folder, not '%s' too\n", sub, a);
            return RL_EXIT_USAGE;
        }
    }
    if (!o->run) {
        fprintf(stderr, "rlctl traj %s: RUN (a run folder) is required\n", sub);
        return RL_EXIT_USAGE;
    }
    if (o->sub == S_SHOW && !o->has_step) {
        fprintf(stderr, "rlctl traj show: --step N is required (rlctl traj ls RUN lists the "
                        "steps)\n");
        return RL_EXIT_USAGE;
    }
    return 0;
}

// ---- loading --------------------------------------------------------------------------------

// What to do about a damaged store, after the message that found it.
static void s_hint(const char *run) {
    fprintf(stderr, "rlctl traj: the store looks damaged: `rlctl traj check %s` reads all of it; "
                    "`rlctl traj salvage %s` copies the records that can still be read into a "
                    "new store and keeps the old one aside (docs/trajectories.md, \"A damaged "
                    "store\")\n", run, run);
}

// A failed read: the message and, for damage (RL_EPROTO: a page LMDB refuses, keys out of
// order, a record that does not decode), s_hint.
static void s_read_err(const char *run, const char *sub, int rc, const char *err) {
    if (rc == RL_EPROTO && !strstr(err, "trajectories.lmdb")) {
        fprintf(stderr, "rlctl traj%s%s: %s/trajectories.lmdb is damaged: %s\n", sub ? " " : "",
                sub ? sub : "", run, err);
    } else {
        fprintf(stderr, "rlctl traj%s%s: %s\n", sub ? " " : "", sub ? sub : "", err);
    }
    if (rc == RL_EPROTO) {
        s_hint(run);
    }
}

// RUN/trajectories.lmdb into path (cap bytes), when RUN is a folder that holds one. Returns 0 or
// RL_EXIT_USAGE (printed).
static int s_store_path(const char *run, char *path, size_t cap) {
    struct stat st;
    if (stat(run, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "rlctl traj: %s is not a folder\n", run);
        return RL_EXIT_USAGE;
    }
    if (snprintf(path, cap, "%s/trajectories.lmdb", run) >= (int)cap) {
        fprintf(stderr, "rlctl traj: %s: path too long\n", run);
        return RL_EXIT_USAGE;
    }
    if (stat(path, &st) != 0) {
        fprintf(stderr, "rlctl traj: %s holds no trajectories.lmdb (not a run folder, or a run "
                        "that has not finished a step)\n", run);
        return RL_EXIT_USAGE;
    }
    return 0;
}

static int s_open(const char *run, rl_traj_t **traj) {
    char path[4096], err[1024];
    int rc = s_store_path(run, path, sizeof path);
    if (rc) {
        return rc;
    }
    if ((rc = rl_traj_open(path, RL_TRAJ_READONLY, traj, err, sizeof err)) != 0) {
        s_read_err(run, NULL, rc, err);
        return RL_EXIT_FAIL;
    }
    return 0;
}

// The tokenizer that the run's resolved recipe names.
static int s_tokenizer(const char *run, rl_tokenizer_t **tok) {
    char path[4096];
    static char err[16384];
    snprintf(path, sizeof path, "%s/recipe.yaml", run);
    rl_recipe_t *recipe = NULL;
    int rc = rl_recipe_load_file(rl_algos(), path, NULL, 0, RL_RECIPE_NO_FILE_CHECKS, &recipe, err,
                                 sizeof err);
    if (rc) {
        // err holds every error of an invalid recipe, one per line, each naming the file
        if (err[0]) {
            fprintf(stderr, "rlctl traj: %s%s", err, err[strlen(err) - 1] == '\n' ? "" : "\n");
        } else {
            fprintf(stderr, "rlctl traj: %s: %s\n", path, rl_strerror(rc));
        }
        return RL_EXIT_USAGE;
    }
    *tok = rl_tokenizer_new(recipe->model.tokenizer, err, sizeof err);
    if (!*tok) {
        fprintf(stderr, "rlctl traj: the tokenizer of %s: %s\n", path, err);
    }
    rl_recipe_destroy(&recipe);
    return *tok ? 0 : RL_EXIT_FAIL;
}

// ---- per record -----------------------------------------------------------------------------

// Decoded text, or NULL (with a warning, once) when an id is outside the vocabulary.
// caller owns result; free with free().
static char *s_text(const rl_tokenizer_t *tok, const int32_t *ids, int n) {
    static int warned;
    char *text = NULL;
    size_t len;
    if (rl_tokenizer_decode(tok, ids, (size_t)n, 0, &text, &len) != 0) {
        if (!warned) {
            fprintf(stderr, "rlctl traj: warning: %s (is this the run's tokenizer?)\n",
                    rl_tokenizer_errmsg(tok));
            warned = 1;
        }
        return NULL;
    }
    return text;
}

// Mean |old - sampler| over the completion's tokens; NAN when old logprobs are not stored.
// The mean |old - sampler| over the completion's sampled tokens (an episode's: its policy's, the
// trained ones; the environment's were not sampled); *n gets how many.
static double s_gap(const rl_traj_record_t *r, int *n) {
    *n = 0;
    if (!r->old_logprobs || r->n_completion == 0) {
        return NAN;
    }
    double s = 0.0;
    for (int i = 0; i < r->n_completion; i++) {
        if (r->episode && !r->mask[i]) {
            continue;
        }
        s += fabs((double)r->old_logprobs[i] - (double)r->sampler_logprobs[i]);
        ++*n;
    }
    return *n > 0 ? s / *n : NAN;
}

static json_t *s_jnum(double x) {
    return isfinite(x) ? json_real(x) : json_null(); // JSON has no NaN
}

static json_t *s_jstr(const char *s) {
    return s ? json_string(s) : json_null();
}

static json_t *s_jints(const int32_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        json_array_append_new(a, json_integer(v[i]));
    }
    return a;
}

static json_t *s_jfloats(const float *v, int n) {
    if (!v) {
        return json_null();
    }
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        json_array_append_new(a, s_jnum(v[i]));
    }
    return a;
}

// A multi-turn episode's turns (docs/envs.md), when the record is one.
static void s_jepisode(json_t *o, const rl_traj_record_t *r) {
    const rl_traj_episode_t *e = r->episode;
    if (!e) {
        return;
    }
    json_t *turns = json_array(), *rewards = json_array();
    for (int t = 0; t < e->n_turns; t++) {
        json_array_append_new(turns, json_integer(e->turn_starts[t]));
        json_array_append_new(rewards, s_jnum(e->turn_rewards[t]));
    }
    json_t *conv = e->conversation ? json_loads(e->conversation, 0, NULL) : NULL;
    json_object_set_new(o, "episode",
                        json_pack("{s:o,s:o,s:s,s:i,s:i,s:o}", "turns", turns, "turn_rewards",
                                  rewards, "end", e->truncated ? "truncated" : "done", "tool_calls",
                                  e->tool_calls, "parse_errors", e->parse_errors, "conversation",
                                  conv ? conv : json_null()));
}

static json_t *s_jrecord(const rl_traj_record_t *r, const char *prompt, const char *completion,
                         int full) {
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer((json_int_t)r->step));
    json_object_set_new(o, "prompt_index", json_integer(r->prompt_index));
    json_object_set_new(o, "sample_index", json_integer(r->sample_index));
    json_object_set_new(o, "data_index", json_integer(r->data_index));
    json_object_set_new(o, "policy_version", json_integer((json_int_t)r->policy_version));
    json_object_set_new(o, "finish", json_string(r->finish ? "length" : "stop"));
    if (r->sampler) {
        json_object_set_new(o, "sampler", json_string(r->sampler));
    }
    json_object_set_new(o, "prompt", s_jstr(prompt));
    json_object_set_new(o, "completion", s_jstr(completion));
    json_t *rw = json_object();
    for (int i = 0; i < r->n_rewards; i++) {
        json_object_set_new(rw, r->reward_names[i], s_jnum(r->rewards[i]));
    }
    json_object_set_new(o, "rewards", rw);
    json_object_set_new(o, "reward", s_jnum(r->reward));
    json_object_set_new(o, "advantage", s_jnum(r->advantage));
    if (!full) {
        int n_gap;
        json_object_set_new(o, "n_prompt", json_integer(r->n_prompt));
        json_object_set_new(o, "n_completion", json_integer(r->n_completion));
        json_object_set_new(o, "logprob_gap", s_jnum(s_gap(r, &n_gap)));
        s_jepisode(o, r);
        return o;
    }
    uint8_t *m = r->mask;
    json_t *mask = json_array();
    for (int i = 0; i < r->n_completion; i++) {
        json_array_append_new(mask, json_integer(m[i]));
    }
    json_object_set_new(o, "prompt_ids", s_jints(r->prompt_ids, r->n_prompt));
    json_object_set_new(o, "completion_ids", s_jints(r->completion_ids, r->n_completion));
    json_object_set_new(o, "mask", mask);
    json_object_set_new(o, "sampler_logprobs", s_jfloats(r->sampler_logprobs, r->n_completion));
    json_object_set_new(o, "old_logprobs", s_jfloats(r->old_logprobs, r->n_completion));
    json_object_set_new(o, "ref_logprobs", s_jfloats(r->ref_logprobs, r->n_completion));
    json_object_set_new(o, "values", s_jfloats(r->values, r->n_completion));
    json_object_set_new(o, "advantages", s_jfloats(r->advantages, r->n_completion));
    if (r->token_rewards) { // optional in the store: exported when stored
        json_object_set_new(o, "token_rewards", s_jfloats(r->token_rewards, r->n_completion));
    }
    s_jepisode(o, r);
    return o;
}

static int s_print_json(json_t *o) {
    int rc = o ? json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER |
                                           JSON_REAL_PRECISION(9)) : -1;
    json_decref(o);
    fputc('\n', stdout);
    return rc == 0 ? 0 : RL_EXIT_FAIL;
}

// A text between quotes with backslash escapes for quotes, backslashes and control bytes.
static void s_print_quoted(const char *s) {
    if (!s) {
        fputs("(not decodable with this tokenizer)", stdout);
        return;
    }
    fputc('"', stdout);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            printf("\\%c", *p);
        } else if (*p == '\n') {
            fputs("\\n", stdout);
        } else if (*p == '\t') {
            fputs("\\t", stdout);
        } else if (*p < 0x20 || *p == 0x7f) {
            printf("\\x%02x", *p);
        } else {
            fputc(*p, stdout);
        }
    }
    fputc('"', stdout);
}

// An episode turn by turn: each run of the completion's tokens with one mask value, the
// policy's (trained: [policy]) and the environment's (context: [env]), with each turn's reward.
static void s_print_episode(const rl_tokenizer_t *tok, const rl_traj_record_t *r) {
    const rl_traj_episode_t *e = r->episode;
    printf("  episode: %d turns, %s, %d tool calls, %d parse errors\n", e->n_turns,
           e->truncated ? "truncated" : "done", e->tool_calls, e->parse_errors);
    int t = 0; // policy turns seen: each run of mask 1 is one (the environment's answers,
               // never empty, lie between them)
    for (int i = 0; i < r->n_completion;) {
        int j = i;
        while (j < r->n_completion && r->mask[j] == r->mask[i]) {
            j++;
        }
        t += r->mask[i] != 0;
        char *text = s_text(tok, r->completion_ids + i, j - i);
        if (r->mask[i]) {
            printf("  [policy] turn %d, %d tokens trained: ", t, j - i);
        } else {
            printf("  [env]    %d tokens of context (after turn %d, reward %.6g): ", j - i, t,
                   t > 0 ? e->turn_rewards[t - 1] : 0.0);
        }
        s_print_quoted(text);
        fputc('\n', stdout);
        free(text);
        i = j;
    }
}

static void s_print_record(const rl_tokenizer_t *tok, const rl_traj_record_t *r, const char *prompt,
                           const char *completion) {
    int trained = 0;
    for (int i = 0; i < r->n_completion; i++) {
        trained += r->mask[i] != 0;
    }
    printf("[prompt %u, sample %u]  data_index %lld  policy %llu  finish %s  tokens %d + %d "
           "(%d trained)\n",
           (unsigned)r->prompt_index, (unsigned)r->sample_index, (long long)r->data_index,
           (unsigned long long)r->policy_version, r->finish ? "length" : "stop", r->n_prompt,
           r->n_completion, trained);
    if (r->sampler) {
        printf("  sampled by: %s\n", r->sampler);
    }
    fputs("  prompt:     ", stdout);
    s_print_quoted(prompt);
    if (r->episode) {
        fputc('\n', stdout);
        s_print_episode(tok, r);
        fputs("  rewards:   ", stdout);
    } else {
        fputs("\n  completion: ", stdout);
        s_print_quoted(completion);
        fputs("\n  rewards:   ", stdout);
    }
    for (int i = 0; i < r->n_rewards; i++) {
        printf(" %s=%.6g", r->reward_names[i], r->rewards[i]);
    }
    if (r->advantages) {
        printf("  total=%.6g  advantage per token (below)\n", r->reward);
    } else {
        printf("  total=%.6g  advantage=%.6g\n", r->reward, r->advantage);
    }
    // PPO: the reward, the critic's value and the advantage of each trained token, in order
    const float *rows[3] = {r->token_rewards, r->values, r->advantages};
    const char *what[3] = {"token rewards:", "values:       ", "advantages:   "};
    for (int k = 0; k < 3; k++) {
        if (!rows[k]) {
            continue;
        }
        printf("  %s", what[k]);
        for (int i = 0; i < r->n_completion; i++) {
            if (r->mask[i]) {
                printf(" %.4g", rows[k][i]);
            }
        }
        fputc('\n', stdout);
    }
    int n_gap;
    double gap = s_gap(r, &n_gap);
    if (!isnan(gap)) {
        printf("  logprob gap |old - sampler|: %.6g (mean of %d tokens)\n", gap, n_gap);
    }
}

// ---- subcommands ----------------------------------------------------------------------------

static int s_ls(rl_traj_t *traj, const char *run) {
    char err[1024];
    uint64_t *steps = NULL;
    int n_steps = 0;
    int e = rl_traj_steps(traj, &steps, &n_steps, err, sizeof err);
    if (e) {
        s_read_err(run, "ls", e, err);
        return RL_EXIT_FAIL;
    }
    printf("%8s %8s %12s %15s  %s\n", "step", "records", "mean_reward", "mean_advantage",
           "policy_version");
    long long total = 0;
    int rc = 0;
    for (int s = 0; s < n_steps && !rc; s++) {
        rl_traj_record_t *recs = NULL;
        int n = 0;
        if ((e = rl_traj_read_step(traj, steps[s], &recs, &n, err, sizeof err)) != 0) {
            s_read_err(run, "ls", e, err);
            rc = RL_EXIT_FAIL;
            break;
        }
        // means over the finite values (a NaN total is an unscorable completion)
        double sr = 0.0, sa = 0.0;
        int nr = 0, na = 0;
        uint64_t vmin = UINT64_MAX, vmax = 0;
        for (int i = 0; i < n; i++) {
            if (isfinite(recs[i].reward)) {
                sr += recs[i].reward;
                nr++;
            }
            if (isfinite(recs[i].advantage)) {
                sa += recs[i].advantage;
                na++;
            }
            vmin = recs[i].policy_version < vmin ? recs[i].policy_version : vmin;
            vmax = recs[i].policy_version > vmax ? recs[i].policy_version : vmax;
        }
        char ver[64];
        if (vmin == vmax) {
            snprintf(ver, sizeof ver, "%llu", (unsigned long long)vmin);
        } else {
            snprintf(ver, sizeof ver, "%llu..%llu", (unsigned long long)vmin,
                     (unsigned long long)vmax);
        }
        printf("%8llu %8d %12.4f %15.4f  %s\n", (unsigned long long)steps[s], n,
               nr ? sr / nr : NAN, na ? sa / na : NAN, ver);
        fflush(stdout); // whole steps out before a damaged page can stop the reader
        total += n;
        rl_traj_records_free(&recs, n);
    }
    if (!rc) {
        printf("%d steps, %lld records, last step %llu\n", n_steps, total,
               (unsigned long long)rl_traj_last_step(traj));
    }
    free(steps);
    return rc;
}

// show (full = 0) and export (full = 1) of one step. A step without records is an error: a
// step named with --step that is not there (rl_traj_steps lists only steps with records).
static int s_step(rl_traj_t *traj, const rl_tokenizer_t *tok, const char *run, uint64_t step,
                  int jsonl, int full) {
    char err[1024];
    rl_traj_record_t *recs = NULL;
    int n = 0;
    int e = rl_traj_read_step(traj, step, &recs, &n, err, sizeof err);
    if (e) {
        s_read_err(run, NULL, e, err);
        return RL_EXIT_FAIL;
    }
    if (n == 0) {
        fprintf(stderr, "rlctl traj: %s holds no records at step %llu (last step %llu; "
                        "rlctl traj ls lists the steps)\n", run, (unsigned long long)step,
                (unsigned long long)rl_traj_last_step(traj));
        return RL_EXIT_FAIL;
    }
    int rc = 0;
    if (!jsonl) {
        printf("step %llu: %d records\n", (unsigned long long)step, n);
    }
    for (int i = 0; i < n && !rc; i++) {
        char *prompt = s_text(tok, recs[i].prompt_ids, recs[i].n_prompt);
        char *completion = s_text(tok, recs[i].completion_ids, recs[i].n_completion);
        if (jsonl) {
            rc = s_print_json(s_jrecord(&recs[i], prompt, completion, full));
        } else {
            s_print_record(tok, &recs[i], prompt, completion);
        }
        free(prompt);
        free(completion);
    }
    rl_traj_records_free(&recs, n);
    return rc;
}

// ls, show and export, in this process.
static int s_read(const s_opts_t *o) {
    rl_traj_t *traj = NULL;
    rl_tokenizer_t *tok = NULL;
    uint64_t *steps = NULL;
    int rc = s_open(o->run, &traj);
    if (rc) {
        goto done;
    }
    rl_traj_use_eval(traj, o->eval);
    if (o->sub == S_LS) {
        rc = s_ls(traj, o->run);
        goto done;
    }
    rc = s_tokenizer(o->run, &tok);
    if (rc) {
        goto done;
    }
    int n_steps = 1;
    if (!o->has_step) {
        char err[1024];
        int e = rl_traj_steps(traj, &steps, &n_steps, err, sizeof err);
        if (e) {
            s_read_err(o->run, "export", e, err);
            rc = RL_EXIT_FAIL;
            goto done;
        }
    }
    for (int s = 0; s < n_steps && !rc; s++) {
        rc = s_step(traj, tok, o->run, steps ? steps[s] : o->step,
                    o->jsonl || o->sub == S_EXPORT, o->sub == S_EXPORT);
        fflush(stdout); // whole steps out before a damaged page can stop the reader
    }
    if (!rc && fflush(stdout) != 0) {
        rc = RL_EXIT_FAIL;
    }

done:
    free(steps);
    rl_tokenizer_destroy(&tok);
    rl_traj_close(&traj);
    return rc;
}

// ls, show and export in a child process: LMDB believes its pages, and a damaged one can make
// it read through a wild pointer or abort on an assertion. The child's death is then reported
// here, naming the store, instead of killing rlctl. Output already printed stays printed.
static int s_read_forked(const s_opts_t *o) {
    static const char *const subs[] = {"ls", "show", "export"};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { // no child to spare: read here
        return s_read(o);
    }
    if (pid == 0) {
        int rc = s_read(o);
        fflush(NULL);
        _exit(rc);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "rlctl traj: waitpid: %s\n", strerror(errno));
            return RL_EXIT_FAIL;
        }
    }
    if (WIFEXITED(st)) {
        return WEXITSTATUS(st);
    }
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (sig == SIGPIPE) { // whoever read the output went away
        return RL_EXIT_FAIL;
    }
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGKILL) {
        fprintf(stderr, "rlctl traj: stopped by signal %d (%s)\n", sig, strsignal(sig));
        return RL_EXIT_FAIL;
    }
    fprintf(stderr, "rlctl traj %s: %s/trajectories.lmdb is damaged: reading it crashed "
                    "(signal %d, %s); the output stops where it did\n", subs[o->sub], o->run,
            sig, strsignal(sig));
    s_hint(o->run);
    return RL_EXIT_FAIL;
}

static void s_size(uint64_t n, char *out, size_t cap) {
    if (n >= (1u << 30)) {
        snprintf(out, cap, "%.2f GiB", (double)n / (double)(1u << 30));
    } else {
        snprintf(out, cap, "%.1f MiB", (double)n / (double)(1u << 20));
    }
}

// check: the walk of rl_traj_check, without a time limit.
static int s_check(const s_opts_t *o) {
    char path[4096], err[2048];
    int rc = s_store_path(o->run, path, sizeof path);
    if (rc) {
        return rc;
    }
    rl_traj_check_t c;
    rc = rl_traj_check(path, 0, NULL, &c, err, sizeof err);
    if (rc) {
        fprintf(stderr, "rlctl traj check: %s\n", err);
        if (rc == RL_EPROTO) {
            fprintf(stderr, "rlctl traj check: `rlctl traj salvage %s` copies the records that "
                            "can still be read into a new store and keeps this one aside\n",
                    o->run);
        }
        return RL_EXIT_FAIL;
    }
    char size[32], pending[64] = "";
    s_size(c.bytes, size, sizeof size);
    if (c.pending_step) {
        snprintf(pending, sizeof pending, ", pending step %llu",
                 (unsigned long long)c.pending_step);
    }
    printf("%s is whole: %llu records in %llu steps (last step %llu%s), %llu evaluation records, "
           "%llu free pages; read %s in %.2f s\n", path, (unsigned long long)c.records,
           (unsigned long long)c.steps, (unsigned long long)c.last_step, pending,
           (unsigned long long)c.evals, (unsigned long long)c.free_pages, size, c.seconds);
    return RL_EXIT_OK;
}

// salvage: under the run folder's lock, the check, then rl_traj_salvage when it finds damage.
static int s_salvage(const s_opts_t *o) {
    char path[4096], err[2048];
    int rc = s_store_path(o->run, path, sizeof path);
    if (rc) {
        return rc;
    }
    int code = 0;
    rl_rundir_t *rd = rl_rundir_open(o->run, RL_RUNDIR_RESUME, &code, err, sizeof err);
    if (!rd) {
        fprintf(stderr, "rlctl traj salvage: %s\n", err);
        return code == RL_EINVAL ? RL_EXIT_USAGE : RL_EXIT_FAIL;
    }
    rl_traj_check_t c;
    rc = rl_traj_check(path, 0, NULL, &c, err, sizeof err);
    if (rc == 0) {
        printf("%s is whole (%llu records, %llu evaluation records): nothing to salvage\n", path,
               (unsigned long long)c.records, (unsigned long long)c.evals);
        rl_rundir_destroy(&rd);
        return RL_EXIT_OK;
    }
    if (rc != RL_EPROTO) {
        fprintf(stderr, "rlctl traj salvage: %s\n", err);
        rl_rundir_destroy(&rd);
        return RL_EXIT_FAIL;
    }
    printf("%s\n", err);
    fflush(stdout);
    rl_traj_salvage_t sv;
    rc = rl_traj_salvage(path, &sv, err, sizeof err);
    rl_rundir_destroy(&rd);
    if (rc) {
        fprintf(stderr, "rlctl traj salvage: %s\n", err);
        return RL_EXIT_FAIL;
    }
    char lost[64] = "", lost_eval[64] = "";
    if (sv.counted != UINT64_MAX && sv.counted >= sv.kept) {
        snprintf(lost, sizeof lost, " of %llu (%llu lost)", (unsigned long long)sv.counted,
                 (unsigned long long)(sv.counted - sv.kept));
    }
    if (sv.counted_eval != UINT64_MAX && sv.counted_eval >= sv.kept_eval) {
        snprintf(lost_eval, sizeof lost_eval, " of %llu (%llu lost)",
                 (unsigned long long)sv.counted_eval,
                 (unsigned long long)(sv.counted_eval - sv.kept_eval));
    }
    printf("salvaged %llu records%s and %llu evaluation records%s into a new %s (%d child "
           "processes read the old one)\n", (unsigned long long)sv.kept, lost,
           (unsigned long long)sv.kept_eval, lost_eval, path, sv.children);
    if (sv.unreadable) {
        printf("  %llu of the lost records were reached but could not be read\n",
               (unsigned long long)sv.unreadable);
    }
    for (int i = 0; i < sv.gaps && i < RL_TRAJ_SALVAGE_GAPS; i++) {
        printf("  lost: %s\n", sv.gap[i]);
    }
    if (sv.gaps > RL_TRAJ_SALVAGE_GAPS) {
        printf("  lost: and %d more\n", sv.gaps - RL_TRAJ_SALVAGE_GAPS);
    }
    printf("the damaged store is kept as %s (yours to delete); rlctl run --resume continues the "
           "run\n", sv.aside);
    return RL_EXIT_OK;
}

int rl_cmd_traj(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_help, stdout);
        return RL_EXIT_OK;
    }
    s_opts_t o;
    int rc = s_parse(argc, argv, &o);
    if (rc) {
        return rc;
    }
    if (o.sub == S_CHECK) {
        return s_check(&o);
    }
    if (o.sub == S_SALVAGE) {
        return s_salvage(&o);
    }
    return s_read_forked(&o);
}

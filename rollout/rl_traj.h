// rl_traj — the trajectory store (DESIGN.md §3): one LMDB environment per run,
// <run dir>/trajectories.lmdb, with named databases `traj` (one record per completion, keyed by
// 16 big-endian bytes (u64 step, u32 prompt index, u32 sample index) so cursors walk in training
// order) and `meta` (schema version, last committed step). A record is a plain msgpack map that
// any msgpack library decodes; every field is listed in docs/trajectories.md. A step is written
// in one transaction, or in two when the run must not lose it to a failure after the actor's
// update (rl_traj_put_pending, then rl_traj_put_step); when the map is full it grows (doubling)
// and the transaction is retried.
// A handle is used by one thread at a time; other processes (rlctl traj) may read the same
// environment while a run writes it. A failed write names <path>/data.mdb, and a full disk says
// "disk full". LMDB has no checksums: rl_traj_check and rl_traj_salvage (below) find damaged
// pages and copy what is left, reading only in child processes.
#ifndef RL_TRAJ_H
#define RL_TRAJ_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_TRAJ_SCHEMA_VERSION 1
#define RL_TRAJ_MAX_TOKENS (1 << 20)   // n_prompt, n_completion: larger records are refused
#define RL_TRAJ_MAX_REWARDS 64         // n_rewards (the recipe's cap, RL_RECIPE_MAX_REWARDS)
#define RL_TRAJ_MAX_NAME 255           // bytes of a reward name (no NUL inside)
#define RL_TRAJ_MAX_CONVERSATION (16 << 20) // bytes of an episode's conversation (JSON text)
#define RL_TRAJ_MAP_INITIAL (64u << 20) // map size of a new environment; doubles when full

// A multi-turn episode's extra (docs/envs.md): the completion is everything after the first
// prompt — the policy's turns (mask 1) and the environment's answers (mask 0) — and this says
// where each policy turn starts, what the environment gave after it, and how the episode ended.
typedef struct {
    int n_turns;
    int32_t *turn_starts; // (n_turns) offsets into completion_ids, increasing, from 0
    double *turn_rewards; // (n_turns) the environment's step reward after each turn (0: none)
    int truncated;        // 0: the environment said done; 1: a limit ended it
    int tool_calls;       // calls parsed from the policy's turns
    int parse_errors;     // what looked like a call and did not parse
    char *conversation;   // {"messages": [...], "tools": [...]} as JSON text, or NULL
} rl_traj_episode_t;

// One completion. For rl_traj_put_step and rl_traj_encode the arrays are borrowed for the call;
// rl_traj_read_step and rl_traj_decode allocate them (caller owns; free with
// rl_traj_record_clear / rl_traj_records_free).
typedef struct {
    uint64_t step;            // the optimizer step whose batch this is (1-based)
    uint32_t prompt_index;    // position of the prompt in the step's batch
    uint32_t sample_index;    // 0..G-1
    int64_t data_index;       // the prompt's row in the training file (0-based)
    uint64_t policy_version;  // weights version the sampler used
    int n_prompt;
    int32_t *prompt_ids;      // (n_prompt)
    int n_completion;
    int32_t *completion_ids;  // (n_completion), a stop token included
    uint8_t *mask;            // (n_completion) loss mask: 1 = trained on, 0 = not (no other)
    float *sampler_logprobs;  // (n_completion) logμ
    float *old_logprobs;      // (n_completion) logπ_old recomputed by the actor, or NULL
    float *ref_logprobs;      // (n_completion) or NULL (no reference ran)
    float *values;            // (n_completion) critic values, or NULL
    int n_rewards;
    char **reward_names;      // (n_rewards) recipe reward names
    double *rewards;          // (n_rewards) each reward's raw score (NaN = unscorable)
    double reward;            // the weighted total (with shaping)
    double advantage;         // sequence advantage (GRPO)
    float *advantages;        // (n_completion) per-token advantages (PPO), or NULL
    float *token_rewards;     // (n_completion) per-token rewards (PPO: -beta k1, plus the score
                              // on the last token), or NULL (written only when given)
    int finish;               // rl_sampler_finish_t: 0 stop, 1 length ("stop"/"length" on disk)
    char *sampler;            // who sampled it ("sampler/0", "sampler/2@tcp://host:5555"), or
                              // NULL (not recorded: stores written before the field existed)
    rl_traj_episode_t *episode; // a multi-turn episode's turns, or NULL (one completion)
} rl_traj_record_t;

typedef struct rl_traj rl_traj_t;

enum {
    RL_TRAJ_READONLY = 1u << 0,
    RL_TRAJ_NOSYNC = 1u << 1, // commits are not synced: rl_traj_sync does it (a bulk copy)
};

// Opens (creating when absent, unless RL_TRAJ_READONLY) the environment at `path` (a directory:
// LMDB's data.mdb and lock.mdb live inside). A store written with another schema version is
// refused (RL_EVERSION). Read-only: a missing store gives ENOENT, a folder that is not a
// trajectory store RL_EPROTO. Commits are synced (a crash loses no committed step), unless
// RL_TRAJ_NOSYNC.
// caller owns *out; free with rl_traj_close.
int rl_traj_open(const char *path, unsigned flags, rl_traj_t **out, char *err, size_t err_len);
// As rl_traj_open, with the map size of a new environment given (0 = RL_TRAJ_MAP_INITIAL); an
// existing one keeps its own. Tests use a tiny map to make it grow.
// caller owns *out; free with rl_traj_close.
int rl_traj_open_sized(const char *path, unsigned flags, size_t map_size, rl_traj_t **out,
                       char *err, size_t err_len);
// Switches the record calls (rl_traj_put_step, rl_traj_read_step, rl_traj_steps) to the
// evaluations' table (on = 1) or back to the steps' records (0). An evaluation's completions are
// records as a step's are, keyed by the step it followed (0: before training), prompt and sample:
// sample 0..eval_k-1 the sampled ones, eval_k the greedy one; put_step there writes no meta
// (nor takes step 0 as an error). A store from before this table has no evaluations (reads give
// none; a read-only one cannot take any). rl_traj_truncate_after drops evaluations after its
// step too.
void rl_traj_use_eval(rl_traj_t *self, int on);

// Writes every commit to disk (fdatasync): what a store opened with RL_TRAJ_NOSYNC needs before
// it is relied on. Returns 0 or an error naming data.mdb.
int rl_traj_sync(rl_traj_t *self, char *err, size_t err_len);

// Closes the environment; a no-op when *self_p is NULL; sets *self_p to NULL.
void rl_traj_close(rl_traj_t **self_p);

// The environment's current map size in bytes (it doubles each time a step does not fit).
size_t rl_traj_map_size(const rl_traj_t *self);

// Writes a step's n records and meta's last step in one transaction (records of that step
// already present are replaced; n may be 0, which leaves the step empty). Every recs[i].step
// must equal `step` (>= 1) and no two records share (prompt_index, sample_index); a record
// that breaks this or the limits above gives RL_EINVAL naming it. Meta's last step becomes
// max(last step, step), and a pending step <= step is cleared. A read-only store gives
// RL_EINVAL. Returns 0 or an error with err filled.
int rl_traj_put_step(rl_traj_t *self, uint64_t step, const rl_traj_record_t *recs, int n,
                     char *err, size_t err_len);

// The first of a step's two transactions (docs/trajectories.md, "Pending steps"): writes its
// records as rl_traj_put_step does, but sets meta "pending_step" to `step` instead of raising
// "last_step". The run writes them before the actor's update, so that a failure after the update
// cannot leave the step without records; rl_traj_put_step of the same step (the records again,
// now with old_logprobs) completes it and removes "pending_step". Returns 0 or an error.
int rl_traj_put_pending(rl_traj_t *self, uint64_t step, const rl_traj_record_t *recs, int n,
                        char *err, size_t err_len);

// The largest committed step (meta "last_step"), or 0 when none (or unreadable).
uint64_t rl_traj_last_step(rl_traj_t *self);
// Meta "pending_step": a step written by rl_traj_put_pending and not completed yet, or 0.
uint64_t rl_traj_pending_step(rl_traj_t *self);

// Deletes every record of steps > step, sets the last step to min(last step, step) and drops a
// pending step > step (a resume from a checkpoint older than the store's newest records).
// Returns 0 or an error.
int rl_traj_truncate_after(rl_traj_t *self, uint64_t step, char *err, size_t err_len);

// Reads the records of one step in key order. caller owns *recs_p; free with
// rl_traj_records_free. Returns 0 (n may be 0, *recs_p then NULL), or an error (RL_EPROTO for a
// record that does not decode or whose key disagrees with its fields, RL_EVERSION for a record
// of another version; err names the key as "step S, prompt P, sample I").
int rl_traj_read_step(rl_traj_t *self, uint64_t step, rl_traj_record_t **recs_p, int *n_p,
                      char *err, size_t err_len);

// Steps present in the store, ascending. caller owns *steps_p; free with free().
int rl_traj_steps(rl_traj_t *self, uint64_t **steps_p, int *n_p, char *err, size_t err_len);

// Decodes one record value (a msgpack map from anywhere: fuzzed) into *out (owned arrays),
// overwriting *out (clear a previous record first). Checks every type, length and cap and the
// lengths of the arrays against each other; keys it does not know are skipped. Returns 0, or
// RL_EPROTO / RL_EVERSION / RL_ENOMEM with err naming the field and *out left empty.
// caller owns the arrays of *out; free with rl_traj_record_clear.
int rl_traj_decode(const void *buf, size_t len, rl_traj_record_t *out, char *err,
                   size_t err_len);
// Encodes one record as its msgpack map. Returns 0, RL_EINVAL (a record rl_traj_decode would
// refuse: a count out of range, a NULL array, a negative id, a mask byte other than 0/1, an
// empty, long or repeated reward name, finish other than 0/1) or RL_ENOMEM.
// caller owns *buf_p; free with free().
int rl_traj_encode(const rl_traj_record_t *rec, void **buf_p, size_t *len_p);

// ---- damage (rollout/rl_traj_check.c; docs/trajectories.md, "A damaged store") ------------
// LMDB keeps no checksums and trusts its pages: a damaged page makes a cursor call read through
// a wild pointer (SIGSEGV, SIGBUS) or abort on one of liblmdb's assertions. These two calls read
// a store only in forked child processes, each of which opens the environment itself read-only
// and ends with _exit; the calling process never maps the file, so a crash costs a child. They
// use fork(): call them before starting threads of your own that hold locks malloc does not
// know of (glibc's fork makes malloc and stdio safe in the child).

// What rl_traj_check read.
typedef struct {
    uint64_t records;      // `traj` records read and decoded
    uint64_t steps;        // distinct steps among them
    uint64_t evals;        // `eval` records read and decoded
    uint64_t free_pages;   // page numbers on LMDB's free list (each checked against the file)
    uint64_t last_step;    // meta last_step (0 when absent)
    uint64_t pending_step; // meta pending_step (0 when absent)
    uint64_t bytes;        // the size of data.mdb
    double seconds;        // the walk's wall time
} rl_traj_check_t;

// Checks the store at `path` (an environment folder) in a child process: it walks LMDB's free
// list (every page number inside the file) and each table with a cursor, `meta` (a msgpack uint
// each; schema_version present), `traj` and `eval` (16-byte keys in ascending order, every
// record decoded by rl_traj_decode and its fields equal to its key), compares each table's count
// with the count LMDB keeps, and checks that no record is of a step after meta's last and
// pending steps. It reads the whole file; docs/trajectories.md gives the cost. timeout_s > 0
// bounds the walk (the child is killed then); cancel (may be NULL) is polled every 50 ms and a
// non-zero value kills the child. Other processes may read and write the store meanwhile.
// Returns 0 (whole; *out, which may be NULL, filled), RL_EPROTO when the store is damaged (err:
// "<path> is damaged: <what the child found, or how it died, and where>"), ENOENT when there
// is no store (no data.mdb), RL_EVERSION for another schema version, RL_ETIMEOUT,
// RL_ECANCELED, or another error (it could not fork, open, ...), err filled in every case.
int rl_traj_check(const char *path, double timeout_s, const volatile sig_atomic_t *cancel,
                  rl_traj_check_t *out, char *err, size_t err_len);

#define RL_TRAJ_SALVAGE_GAPS 8 // ranges of unreadable keys that rl_traj_salvage_t describes

// What rl_traj_salvage did.
typedef struct {
    uint64_t kept, kept_eval;         // records copied into the new store (traj, eval)
    uint64_t counted, counted_eval;   // the records LMDB counted in each table, or UINT64_MAX
                                      // when its count could not be read
    uint64_t unreadable;              // records reached whose value or decoding failed
    int gaps;                         // ranges of keys that could not be reached (a damaged
                                      // page's); the first RL_TRAJ_SALVAGE_GAPS are below
    char gap[RL_TRAJ_SALVAGE_GAPS][160]; // "traj: after step 2, prompt 1, sample 3, before
                                      // step 3, prompt 0, sample 0"
    int children;                     // child processes it took
    char aside[4200];                 // where the old store went: <path>.damaged-<unix time>
} rl_traj_salvage_t;

// Copies every record of the store at `path` that can be read into a new store, then moves the
// old one aside (renamed to <path>.damaged-<unix time>, never deleted) and the new one into its
// place. Children read: one walks a table from a key and sends each record's bytes through a
// pipe; when it dies or LMDB reports damage, the record it had reached is given up and the next
// child starts after it, or, when it died moving between pages, probes (a seek each, in a
// child) find the first key after the damaged page that can be reached (by doubling, then
// halving, the distance in the 16-byte key space), so a damaged page loses only the records
// under it. The parent decodes each record (rl_traj_decode) and writes whole steps
// (rl_traj_put_step; the pending step with rl_traj_put_pending), and restores meta's last step.
// The new store is built at <path>.salvage (one left by an interrupted salvage is replaced).
// Nothing else may use the store meanwhile (rlctl holds the run folder's lock). Returns 0 with
// *out filled (records lost is counted - kept, when counted), or an error with err filled and
// the old store where it was.
int rl_traj_salvage(const char *path, rl_traj_salvage_t *out, char *err, size_t err_len);

// Frees the arrays of a record filled by rl_traj_decode and zeroes it.
void rl_traj_record_clear(rl_traj_record_t *rec);
// Clears n records and frees the array; a no-op when *recs_p is NULL; sets *recs_p to NULL.
void rl_traj_records_free(rl_traj_record_t **recs_p, int n);

#ifdef __cplusplus
}
#endif
#endif

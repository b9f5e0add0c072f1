// rl_rundir — the run directory rules of DESIGN.md §3: `rlctl run` refuses a folder that
// already holds a run unless told to resume (continue it) or force (start over), and a lock
// file stops two controllers from sharing one folder. Not a checkpoint writer (rl_checkpoint).
//
// A folder "holds a run" when it contains any of recipe.yaml, metrics.jsonl, checkpoints/,
// final/. --force removes exactly the entries a run writes (those, plus events.out.tfevents.*
// trajectories.lmdb and the workers' logs/) and nothing else of the folder.
// The lock is a POSIX record lock (fcntl F_SETLK) on <dir>/.lock, held while the handle lives
// and released by the kernel if the process dies, so a crashed run never leaves a stale lock;
// the file holds the owner's pid for the message.
#ifndef RL_RUNDIR_H
#define RL_RUNDIR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RL_RUNDIR_NEW = 0,    // refuse a folder that holds a run
    RL_RUNDIR_RESUME = 1, // continue the run in it (an empty folder is fine too)
    RL_RUNDIR_FORCE = 2,  // remove the previous run's entries, then start
} rl_rundir_mode_t;

typedef struct rl_rundir rl_rundir_t;

// Creates `dir` if needed (mkdir -p), takes the lock, and applies `mode`. On failure returns
// NULL and writes why into err: "runs/x already holds a run (metrics.jsonl, checkpoints/);
// use --resume to continue it or --force to start over", "runs/x is in use by another rlctl
// (pid 1234)". *code_p (may be NULL) gets RL_EINVAL for a refusal the user must fix, else the
// error code. caller owns result; free with rl_rundir_destroy (releases the lock).
rl_rundir_t *rl_rundir_open(const char *dir, rl_rundir_mode_t mode, int *code_p, char *err,
                            size_t err_len);

void rl_rundir_destroy(rl_rundir_t **self_p);

// The folder's path as given. borrowed; valid until destroy.
const char *rl_rundir_path(const rl_rundir_t *self);

// 1 when dir holds a run (see above), else 0.
int rl_rundir_holds_run(const char *dir);

#ifdef __cplusplus
}
#endif
#endif

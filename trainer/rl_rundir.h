// rl_rundir — the run directory rules of DESIGN.md §3: `rlctl run` refuses a folder that
// already holds a run unless told to resume (continue it) or force (start over), a lock file
// stops two controllers from sharing one folder, and the folder must be ours. Not a
// checkpoint writer (rl_checkpoint).
//
// A folder "holds a run" when it contains any of recipe.yaml, metrics.jsonl, checkpoints/,
// final/. --force removes exactly the entries a run writes (those, plus events.out.tfevents.*
// trajectories.lmdb, the workers' logs/, and final.tmp / final.old-* that an interrupted write
// of final/ leaves) and nothing else of the folder.
// The lock is a POSIX record lock (fcntl F_SETLK) on <dir>/.lock, held while the handle lives
// and released by the kernel if the process dies, so a crashed run never leaves a stale lock;
// the file holds the owner's pid for the message.
//
// The folder is ours. GRPO workers load the reward plugins that <run>/logs/recipe.yaml names,
// so whoever can change that file runs code as us. Checked with the effective uid, in the way
// of ssh's StrictModes (a folder "writable by others" below means mode & 022, except that
// g+w is allowed when the folder's group is our private group: our primary group, listing no
// other member):
//  - the run folder, and every folder rlctl creates for it: a real folder owned by us and not
//    writable by others. Folders rlctl creates get mode 0700 (logs and trajectories may hold
//    training data; `chmod` opens them up). Files rlctl creates here get mode 0644.
//  - every folder above it (of the real path, from /; when run.dir does not exist yet, the
//    nearest existing one and every folder above that): owned by us or by root, and if
//    writable by others, sticky (+t, as /tmp), where nobody can rename or remove what we own.
//    So `runs/x` created inside /tmp is fine, and a /tmp/x that another user made is refused.
//  - inside the run folder, .lock, recipe.yaml, metrics.jsonl(.tmp), logs/, checkpoints/,
//    final/ and trajectories.lmdb/ must not be symbolic links and must be owned by us; files
//    are opened with O_NOFOLLOW|O_CLOEXEC and folders with O_NOFOLLOW|O_DIRECTORY, so a link
//    put there is refused, never followed.
// Every descriptor the handle holds (the folder, the lock) is close-on-exec: the workers that
// `rlctl run` spawns do not inherit them.
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

// Checks the folders as above, creates `dir` if needed (mkdir -p, mode 0700), takes the lock,
// and applies `mode`. Nothing is created or written anywhere before the checks pass. On
// failure returns NULL and writes why into err: "runs/x already holds a run (metrics.jsonl,
// checkpoints/); use --resume to continue it or --force to start over", "runs/x is in use by
// another rlctl (pid 1234)", "/tmp/x: the run folder is owned by uid 65534, not by you (uid
// 1000) ...". *code_p (may be NULL) gets RL_EINVAL for a refusal the user must fix (every
// rule above), else the error code. caller owns result; free with rl_rundir_destroy
// (releases the lock).
rl_rundir_t *rl_rundir_open(const char *dir, rl_rundir_mode_t mode, int *code_p, char *err,
                            size_t err_len);

void rl_rundir_destroy(rl_rundir_t **self_p);

// The folder's real path: absolute, without symbolic links, "." or ".." (the path whose
// folders open checked; use it for everything written later). borrowed; valid until destroy.
const char *rl_rundir_path(const rl_rundir_t *self);

// 1 when dir holds a run (see above), else 0.
int rl_rundir_holds_run(const char *dir);

// A start that fails leaves nothing that blocks the retry: a new or forced run marks its folder
// (<dir>/.unstarted, before it writes anything else) and removes the mark once it has trained a
// step. RL_RUNDIR_NEW on a folder that still holds the mark and neither checkpoints/ nor final/
// (nothing trained, no checkpoint) starts over in it as RL_RUNDIR_FORCE would, saying so; a
// folder without the mark (a run that trained, or one of an rlctl before the mark) is refused as
// above. Returns 0 or the error of the write.
int rl_rundir_mark_unstarted(rl_rundir_t *self, char *err, size_t err_len);
// Removes the mark of the run folder `dir` (a warning when it cannot; no mark is fine).
void rl_rundir_mark_started(const char *dir);

// Creates folder `name` (one level, e.g. "logs") in the run folder with mode 0700 when it is
// missing, and checks it as the run folder (a real folder, not a link, ours, not writable by
// others). Returns 0, RL_EINVAL when refused, or an errno; the message in err.
int rl_rundir_mkdir(rl_rundir_t *self, const char *name, char *err, size_t err_len);

// Writes n bytes of `data` as `name` in the run folder ("recipe.yaml", or one folder level
// down: "logs/recipe.yaml"; that folder must exist), replacing the file: O_CREAT|O_TRUNC with
// O_NOFOLLOW|O_CLOEXEC, mode 0644 when created. A link in place of the file or the folder is
// refused, never followed. Returns 0, RL_EINVAL when refused, or an errno; the message in err.
int rl_rundir_write_file(rl_rundir_t *self, const char *name, const void *data, size_t n,
                         char *err, size_t err_len);

// Reads `name` (as for write_file) from the run folder without following a link; *data_p gets
// the bytes plus a NUL, *n_p (may be NULL) their count. Returns 0, ENOENT when the file does
// not exist (err untouched), RL_EINVAL when refused, or an errno with the message in err.
// caller owns *data_p; free with free().
int rl_rundir_read_file(rl_rundir_t *self, const char *name, char **data_p, size_t *n_p,
                        char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

// rl_checkpoint — resumable checkpoints in a run directory (DESIGN.md §3):
//   <run>/checkpoints/step-<N>/
//       model/ or adapter/   the weights, written by the caller (rl_model_save_hf / _adapter)
//       optimizer.bin        rl_optim state (magic, version, reserved space, CRC-32C)
//       state.json           step, data position, RNG state, policy version (below)
//       critic/              PPO's critic (its adapter/ or model/, value_head, optimizer.bin)
//       manifest.json        every other file's size and CRC-32C (rl_manifest)
//       DONE                 written last: a checkpoint without it is incomplete and ignored;
//                            it names manifest.json and holds its CRC-32C
// and the helpers around them: the complete checkpoints newest first, pruning to
// keep_checkpoints, moving an abandoned branch aside, publishing a folder in one rename,
// recursive removal and mkdir -p. Not a model writer: what goes into model/ or adapter/ is the
// caller's (the module does not link the model).
//
// Writing one (the commit protocol; a crash or power loss at any point leaves either the
// complete checkpoint or none):
//   1. rl_checkpoint_prepare -> an empty checkpoints/step-<N>.tmp/; the caller (or another
//      process) writes the weights into it with ordinary writes, no fsync needed;
//   2. rl_checkpoint_commit writes optimizer.bin and state.json, then manifest.json (every
//      file read back and checksummed), fsyncs every file and folder in step-<N>.tmp/, writes
//      DONE (fsynced), renames step-<N>.tmp to step-<N> and fsyncs checkpoints/.
// A folder named step-<N>.tmp is never a checkpoint, even with DONE inside: it is what a crash
// left between steps 1 and 2, and prepare and prune remove it. A checkpoint folder holds DONE
// from the moment it has its name.
//
// Reading one: rl_checkpoint_verify checks every file against the manifest, then
// rl_checkpoint_read_state reads state.json; the loaders of the weights refuse NaN and inf
// (rl_model_load, rl_lora_load). A checkpoint that an rlctl before manifests wrote (DONE empty,
// no manifest.json) has nothing to check its files against: verify says so (*legacy) and the
// caller decides (a resume takes it with a warning: optimizer.bin carries its own CRC, the
// weights are checked for non-finite values and state.json for its rules).
//
// Branches: resuming from step-<M> while newer checkpoints exist starts a new branch; the newer
// ones are moved into checkpoints/abandoned-<unix seconds>/ (rl_checkpoint_abandon_after), so
// the branch resumed last is the one that pruning keeps and a plain resume continues.
//
// state.json (format "rlctl-checkpoint", version 1):
//   {"format": "rlctl-checkpoint", "version": 1, "step": 40, "policy_version": 40,
//    "tune": "full", "n_trainable": 791296, "num_tokens": 51200,
//    "model_train_step": 80, "data": {"epoch": 1, "index": 12},
//    "rng": {"s": ["<16 hex digits>" x4], "has_spare": 0, "spare": 0.0}}
// and, only in a run that has them (PPO), "critic_train_step": 80 (the critic's weights are then
// in critic/: its adapter/ or model/, value_head.safetensors, optimizer.bin) and
// "algo": {"kl_coef": 0.05} (the algorithm's own numbers). Both are additive: version 1 reads
// checkpoints without them.
// 64-bit RNG words are hex strings (JSON numbers are doubles to most readers).
#ifndef RL_CHECKPOINT_H
#define RL_CHECKPOINT_H

#include "rl_optim.h"
#include "rl_rng.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CHECKPOINT_FORMAT_VERSION 1
#define RL_CHECKPOINT_MAX_ALGO 8

typedef struct {
    int64_t step;           // optimizer steps done
    int64_t policy_version; // weights version (== step for SFT)
    int64_t data_epoch;     // rl_data_pos_t of the training sampler
    int64_t data_index;
    rl_rng_t rng;           // the trainer's RNG stream
    char tune[8];           // "full" or "lora"
    int64_t n_trainable;    // size of the trainable flat view (checked on resume)
    int64_t num_tokens;     // tokens trained on so far (the cumulative num_tokens metric)
    int64_t model_train_step; // rl_model_train_step: the LoRA dropout mask counter (0 if absent)
    // PPO (written only when present; absent in GRPO and SFT checkpoints):
    int has_critic;           // 1: the critic's weights are in critic/ and its counter below
    int64_t critic_train_step; // the critic's rl_model_train_step
    // an algorithm's own state (PPO: its adaptive KL coefficient) as name -> number, written
    // under "algo" when n_algo > 0
    int n_algo;
    char algo_key[RL_CHECKPOINT_MAX_ALGO][32];
    double algo_value[RL_CHECKPOINT_MAX_ALGO];
} rl_ckpt_state_t;

// Makes <run_dir>/checkpoints/step-<step>.tmp/ empty and ready for the weights and writes its
// path into tmp_dir (cap bytes). Every step-<N>.tmp folder already there is a leftover of an
// interrupted write (one run folder has one writer: rl_rundir's lock) and is removed first; a
// step-<N>.old-* that a crash during a replace left is removed, or renamed back to step-<N> when
// that is missing. Returns 0 or an errno with the message in err.
int rl_checkpoint_prepare(const char *run_dir, int64_t step, char *tmp_dir, size_t cap,
                          char *err, size_t err_len);

// Completes the checkpoint in tmp_dir (a path rl_checkpoint_prepare gave): refuses (RL_EPROTO) a
// state that rl_checkpoint_read_state would refuse, writes optimizer.bin (when optim is
// non-NULL), state.json and manifest.json (every file under tmp_dir with its size and CRC-32C),
// fsyncs every file and folder under tmp_dir (rl_checkpoint_sync_tree), writes DONE naming the
// manifest and its CRC-32C (fsynced), renames tmp_dir to its name without
// ".tmp" (an existing folder of that name is replaced: rl_checkpoint_publish_dir's way) and
// fsyncs checkpoints/. dir_out gets the final step-<N> path (cap bytes). Returns 0, or an error
// with err set. On error step-<N> names the old folder or (when only a sync after the rename
// failed) the new one, each in whole, never a partial one; tmp_dir may remain (prepare and prune
// remove it).
int rl_checkpoint_commit(const char *tmp_dir, const rl_ckpt_state_t *st, const rl_optim_t *optim,
                         char *dir_out, size_t cap, char *err, size_t err_len);

// fsyncs every regular file (opened O_RDONLY) and every folder under path, path included,
// children before their folder; symbolic links are neither followed nor synced. A regular file
// path syncs just that file. Returns 0 or the first errno with the message in err.
int rl_checkpoint_sync_tree(const char *path, char *err, size_t err_len);

// Publishes folder tmp as dst: fsyncs tmp's tree, then replaces dst by tmp so that dst always
// names either the old or the new folder in whole: an existing dst is renamed aside to
// <dst>.old-<unique>, tmp is renamed to dst, their parent folder is fsynced, and the old one is
// removed (with any <dst>.old-* an earlier crash left). tmp and dst must be in the same folder.
// Returns 0, RL_EINVAL (different folders) or an errno, with the message in err; on error dst
// names the old folder or (when only the sync after the rename failed) the new one, in whole.
int rl_checkpoint_publish_dir(const char *tmp, const char *dst, char *err, size_t err_len);

// Checks every file of the complete checkpoint dir against its manifest.json (rl_manifest_verify:
// sizes, CRC-32C, no file missing or added) and the manifest against the CRC in DONE. Returns 0
// (*legacy = 0); 0 with *legacy = 1 when an rlctl before manifests wrote it (DONE empty and no
// manifest.json: nothing was checked); RL_ENOTFOUND (no DONE, or a step-<N>.tmp folder:
// incomplete); RL_EPROTO with err naming the file and what differs ("<dir>/adapter/
// adapter_model.safetensors: checksum mismatch (...)", "<dir>/manifest.json: missing (the DONE
// marker names it)"); RL_EVERSION, RL_EINVAL (a link in the folder) or an errno.
int rl_checkpoint_verify(const char *dir, int *legacy, char *err, size_t err_len);

// Reads dir/state.json of a complete checkpoint and checks it against its folder's name and
// the ranges of a real run: when dir is named step-<N>, step must be N; counts in 0..2^53
// (n_trainable from 1), policy_version in 0..step, tune "full" or "lora", an RNG state that is
// not all zero with has_spare 0 or 1 and a finite spare, finite algo numbers. Returns 0,
// RL_ENOTFOUND (no DONE, or a step-<N>.tmp folder: incomplete), RL_EPROTO (malformed or out of
// range, with the field named), RL_EVERSION, or an errno; err says which. It reads state.json
// only: run rl_checkpoint_verify first; the weights are checked by whoever loads them.
int rl_checkpoint_read_state(const char *dir, rl_ckpt_state_t *st, char *err, size_t err_len);

// Finds the complete checkpoint with the largest step under <run_dir>/checkpoints/. Returns 0
// with its path in dir and its step in *step_p, or RL_ENOTFOUND when there is none.
int rl_checkpoint_latest(const char *run_dir, char *dir, size_t cap, int64_t *step_p);

// The steps of the complete checkpoints (step-<N> folders with DONE) under
// <run_dir>/checkpoints/, newest first, for a resume that falls back to an older one when the
// newest does not load. Returns 0 with *n_out of them in *steps_out (NULL when none, also when
// checkpoints/ does not exist), or an errno. caller owns *steps_out; free with free().
int rl_checkpoint_list(const char *run_dir, int64_t **steps_out, size_t *n_out);

// Starts a new branch at `step`: moves every complete checkpoint newer than step into one new
// folder <run_dir>/checkpoints/abandoned-<unix seconds>[-<k>]/ (renamed, not deleted; latest,
// list and prune never look inside), and fsyncs both folders. `where` gets that folder's path
// (cap bytes; "" when nothing moved) and *n_moved the number moved. Returns 0 or an errno with
// the message in err (checkpoints moved before the error stay moved, counted in *n_moved).
int rl_checkpoint_abandon_after(const char *run_dir, int64_t step, char *where, size_t cap,
                                int *n_moved, char *err, size_t err_len);

// Keeps the `keep` newest complete checkpoints (by step: run rl_checkpoint_abandon_after on
// resuming an older one, so the newest are the current branch's) and removes every other
// step-<N> folder (older complete ones, and any without DONE), every step-<N>.tmp leftover, and
// the old copies (step-<N>.old-*) a crash during a replace left. Call it when no checkpoint is
// being written. Returns 0 or an errno with the message in err.
int rl_checkpoint_prune(const char *run_dir, int keep, char *err, size_t err_len);

// rm -rf path (does not follow symlinks). Returns 0 (also when path does not exist) or an errno.
int rl_checkpoint_rmtree(const char *path);

// mkdir -p path (mode 0755). Returns 0 or an errno.
int rl_checkpoint_mkdirs(const char *path);

// The folder of a file path ("a/b/tokenizer.json" -> "a/b", "x" -> ".", "/x" -> "/").
void rl_checkpoint_dirname(const char *path, char *out, size_t cap);

// Makes the HF folder `dir` usable on its own: copies tokenizer.json, tokenizer_config.json and
// special_tokens_map.json from the folder of `tokenizer` and generation_config.json from
// `model_dir` (files absent there are skipped). Returns 0 or an errno with err filled.
int rl_checkpoint_hf_extras(const char *dir, const char *tokenizer, const char *model_dir,
                            char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

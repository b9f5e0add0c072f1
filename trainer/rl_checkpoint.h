// rl_checkpoint — resumable checkpoints in a run directory (DESIGN.md §3):
//   <run>/checkpoints/step-<N>/
//       model/ or adapter/   the weights, written by the caller (rl_model_save_hf / _adapter)
//       optimizer.bin        rl_optim state (magic, version, reserved space, CRC-32C)
//       state.json           step, data position, RNG state, policy version (below)
//       DONE                 written last: a checkpoint without it is incomplete and ignored
// and the helpers around them: the newest complete checkpoint, pruning to keep_checkpoints,
// recursive removal and mkdir -p. Not a model writer: what goes into model/ or adapter/ is the
// caller's (the module does not link the model).
//
// state.json (format "rlctl-checkpoint", version 1):
//   {"format": "rlctl-checkpoint", "version": 1, "step": 40, "policy_version": 40,
//    "tune": "full", "n_trainable": 791296, "num_tokens": 51200,
//    "model_train_step": 80, "data": {"epoch": 1, "index": 12},
//    "rng": {"s": ["<16 hex digits>" x4], "has_spare": 0, "spare": 0.0}}
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
} rl_ckpt_state_t;

// Makes <run_dir>/checkpoints/step-<step>/ empty and ready (an incomplete leftover of the same
// step is removed first) and writes its path into dir (cap bytes). Returns 0 or an errno with
// the message in err.
int rl_checkpoint_prepare(const char *run_dir, int64_t step, char *dir, size_t cap, char *err,
                          size_t err_len);

// Writes optimizer.bin (when optim is non-NULL), state.json, then DONE, syncing each file so
// that DONE never exists before the rest is on disk. Returns 0 or an error with err set.
int rl_checkpoint_commit(const char *dir, const rl_ckpt_state_t *st, const rl_optim_t *optim,
                         char *err, size_t err_len);

// Reads dir/state.json of a complete checkpoint. Returns 0, RL_ENOTFOUND (no DONE: incomplete),
// RL_EPROTO (malformed, with the field named), RL_EVERSION, or an errno; err says which.
int rl_checkpoint_read_state(const char *dir, rl_ckpt_state_t *st, char *err, size_t err_len);

// Finds the complete checkpoint with the largest step under <run_dir>/checkpoints/. Returns 0
// with its path in dir and its step in *step_p, or RL_ENOTFOUND when there is none.
int rl_checkpoint_latest(const char *run_dir, char *dir, size_t cap, int64_t *step_p);

// Keeps the `keep` newest complete checkpoints and removes every other step-<N> folder
// (older complete ones, and incomplete ones older than the newest complete one). Returns 0 or
// an errno with the message in err.
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

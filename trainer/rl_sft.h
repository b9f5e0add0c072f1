// rl_sft — the supervised fine-tuning loop behind `rlctl run` for algorithm sft, in one file so
// every detail of the method is visible (STYLE.md: CleanRL). Per optimizer step:
//   1. take train.batch_size examples from the seeded epoch order (rl_data);
//   2. count N_tok, the loss tokens of the whole step, before any forward;
//   3. for each micro-batch of train.micro_batch_size: forward -> logp, loss += -sum(m logp)/N_tok,
//      dlogp = -m/N_tok, backward (gradients accumulate), so accumulation equals one big batch;
//   4. a non-finite loss stops the run naming the step; clip the global grad norm;
//   5. AdamW at the scheduled rate lr(step - 1);
//   6. metrics.jsonl + TensorBoard + progress line; eval/loss (and the caller's eval_fn, e.g.
//      eval/accuracy) every train.eval_every steps;
//      a checkpoint every train.save_every steps; final/ at the end.
// Resume takes the newest checkpoint that loads (skipping damaged ones with a warning) and
// moves the checkpoints newer than it into checkpoints/abandoned-<time>/ (rl_checkpoint.h).
// Not the command-line parser (cli/cmd_run.c) and not the run-folder rules (rl_rundir).
#ifndef RL_SFT_H
#define RL_SFT_H

#include "rl_config.h"
#include "rl_metrics.h"
#include "rl_model.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// An evaluation beyond eval/loss, run on eval steps right after it with the model being trained
// (e.g. sampled accuracy on the held-out set, which needs the sampler: trainer/ does not link
// rollout/, so the caller supplies it). It adds its values with rl_metrics_add and may return
// a short summary for the progress line in `note`. Returns 0 or an error (err filled).
typedef int (*rl_sft_eval_fn)(void *ctx, rl_model_t *model, int64_t step, rl_metrics_t *metrics,
                              char *note, size_t note_len, char *err, size_t err_len);

typedef struct {
    const char *run_dir;     // the run folder, already opened and locked (rl_rundir)
    int resume;              // 1: continue from the newest complete checkpoint that loads, if any
    const char *resume_from; // a checkpoints/step-<N> folder to resume from (it must load; no
                             // fallback), or NULL (the newest that loads)
    int64_t stop_at;         // > 0: stop after this step with a checkpoint, as if interrupted
    int tensorboard;         // write an event file beside metrics.jsonl
    // Set (by a signal handler) to stop after the current step with a checkpoint; NULL: none.
    volatile sig_atomic_t *interrupt;
    rl_sft_eval_fn eval_fn;  // optional extra evaluation (NULL: eval/loss only)
    void *eval_ctx;
} rl_sft_opts_t;

// rl_sft_run's return value when *opts->interrupt stopped it (a checkpoint was written).
#define RL_SFT_INTERRUPTED 1

// Runs SFT as the recipe says. Returns 0 when train.steps (or stop_at) are done and final/ (or
// the stop checkpoint) is written; RL_SFT_INTERRUPTED after an interrupt (checkpoint written,
// err says where to resume); otherwise an error code with a message naming what failed in
// err (a NaN loss names the step). When final/ cannot be written, a checkpoint of the last step
// is written first (unless the newest one is of that step) and err says so. The caller prints
// err.
int rl_sft_run(const rl_recipe_t *recipe, const rl_sft_opts_t *opts, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

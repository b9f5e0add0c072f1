// rl_controller — the single controller of a run (DESIGN.md §2), for every algorithm: it owns
// the run's lifecycle — the tokenizer, the algorithm's data (rl_algo), the data order, the
// trajectory store, the metrics; it starts the workers the algorithm needs (actor, reference,
// reward, samplers: rl_group), steps the algorithm, evaluates before training, every
// train.eval_every steps and after the last, logs, writes checkpoints (train.save_every,
// --stop-at, a stop signal, a failure) and final/, resumes (the newest checkpoint that loads; an
// older one starts a new branch), and stops within roles.stop_grace on SIGTERM/SIGINT. What a
// step does is the algorithm's file (rl_algo_grpo.c, rl_algo_sft.c). A worker that dies, a
// request that times out or fails, stops the run with the worker's name and a resumable
// checkpoint when the actor's state allows one.
#ifndef RL_CONTROLLER_H
#define RL_CONTROLLER_H

#include "rl_algo.h"
#include "rl_config.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *run_dir;     // the run folder, opened and locked (rl_rundir); holds recipe.yaml
    int resume;              // continue from the newest complete checkpoint, if any
    const char *resume_from; // with resume: this checkpoints/step-<N> folder instead, or NULL
    int64_t stop_at;         // > 0: stop after this step with a checkpoint, as if interrupted
    int tensorboard;
    volatile sig_atomic_t *interrupt; // set by a signal handler: checkpoint and stop
} rl_controller_opts_t;

// Returned when *opts->interrupt stopped the run after a checkpoint (stop_at returns 0).
#define RL_CONTROLLER_INTERRUPTED 1

// The algorithm's checks that need files but no worker, run before the run folder is touched and
// by `rlctl validate` (the data as the algorithm loads it, with the run's tokenizer and chat
// template: SFT's rows, DPO's and reward models' pairs, GRPO's and PPO's prompts and eval
// answers and every reward).
// Returns 0 or RL_EINVAL with err filled.
int rl_controller_preflight(const rl_algo_t *algo, const rl_recipe_t *recipe, char *err,
                            size_t err_len);

// Runs the recipe with the algorithm `algo` (the caller looks it up: rl_algo_find of the recipe's
// algorithm.name). Returns 0 when train.steps are done and final/ is written,
// RL_CONTROLLER_INTERRUPTED after an interrupt, or an error with err filled.
int rl_controller_run(const rl_algo_t *algo, const rl_recipe_t *recipe,
                      const rl_controller_opts_t *opts, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

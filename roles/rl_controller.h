// rl_controller — the single controller of an RL run (DESIGN.md §2): it owns the loop, the
// dataset order, the run directory, the trajectory store and the metrics, and drives worker
// processes (rl_group) over the role protocol. Per GRPO step:
//   prompts (train.batch_size, seeded epoch order)
//   -> samplers generate G completions each (token ids + sampler logprobs; the prompts are
//      spread over every sampler replica; the RNG stream of a completion depends only on
//      (seed, step, dataset row, sample), not on how prompts are spread)
//   -> the reward worker scores every reward of the recipe (one request per reward, with
//      roles.reward_timeout); total = weighted sum (+ DAPO overlong shaping)
//   -> advantages (rl_grpo_advantages) -> reference logprobs (beta > 0: the actor with adapters
//      disabled) -> the actor's update (rl_policy_train, which also returns logπ_old)
//   -> the step's records into trajectories.lmdb (one transaction)
//   -> weight sync: the actor's trainable weights (the LoRA adapter only, with LoRA) to every
//      sampler, tagged with the new policy version
//   -> metrics.jsonl + TensorBoard, progress line, evaluation, checkpoint.
// Evaluation (before training, every train.eval_every steps, at the end) samples the held-out
// prompts at the recipe's temperature and greedily, and scores the task metric (math_answer
// against data.answer_field): eval/accuracy, eval/accuracy_greedy.
// A worker that dies, a request that times out or fails, stops the run with the worker's name
// and a resumable checkpoint when the actor's state allows one.
#ifndef RL_CONTROLLER_H
#define RL_CONTROLLER_H

#include "rl_config.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *run_dir;     // the run folder, opened and locked (rl_rundir); holds recipe.yaml
    const char *recipe_path; // the resolved recipe the workers load (<run_dir>/recipe.yaml)
    int resume;              // continue from the newest complete checkpoint, if any
    const char *resume_from; // with resume: this checkpoints/step-<N> folder instead, or NULL
    int64_t stop_at;         // > 0: stop after this step with a checkpoint, as if interrupted
    int tensorboard;
    volatile sig_atomic_t *interrupt; // set by a signal handler: checkpoint and stop
} rl_controller_opts_t;

// Returned when *opts->interrupt stopped the run after a checkpoint (stop_at returns 0).
#define RL_CONTROLLER_INTERRUPTED 1

// The checks that need files but no worker, run before the run folder is touched: the tokenizer,
// every training and eval prompt (field present, length), the eval answers, and every reward
// plugin (loads, right ABI, config accepted). Returns 0 or RL_EINVAL with err filled.
int rl_controller_preflight(const rl_recipe_t *recipe, char *err, size_t err_len);

// Runs the recipe's GRPO loop. Returns 0 when train.steps are done and final/ is written,
// RL_CONTROLLER_INTERRUPTED after an interrupt, or an error with err filled.
int rl_controller_run(const rl_recipe_t *recipe, const rl_controller_opts_t *opts, char *err,
                      size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

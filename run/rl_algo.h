// rl_algo — the algorithm seam: an algorithm is one file (rl_algo_grpo.c, rl_algo_sft.c,
// rl_algo_ppo.c, rl_algo_dpo.c, rl_algo_rm.c) that declares its part of the recipe (its name,
// its keys, what it uses of the shared ones, its checks: rl_recipe_algo_def_t), says which roles
// it needs, loads its data, and writes its step against the typed calls of rl_run (generate ->
// score -> reference -> advantages -> store -> train -> sync), the way its paper does, with the
// losses of the registry (trainer/rl_loss.h). The controller (rl_controller) keeps the run's
// lifecycle for every algorithm: the run folder, starting the workers, the cadence of
// evaluation, logging and checkpoints, resume, signals, final/), given the algorithm by its
// caller: this header is the seam the controller knows; the catalog of algorithms is rl_algos.h.
// Adding an algorithm: copy the
// closest sibling, give it its name, and add its one line to RL_ALGOS (rl_algos.h).
#ifndef RL_ALGO_H
#define RL_ALGO_H

#include "rl_checkpoint.h"
#include "rl_run.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The roles a run starts besides the actor (which every algorithm trains).
typedef struct {
    int sampling;  // 1: the run samples (samplers: the local ones and roles.remote_samplers)
    int samplers;  // local sampler workers: roles.samplers, or 0
    int reward;    // 1: a reward worker
    int reference; // 1: a reference worker of its own (0 with roles.reference: actor or when no
                   // reference is needed)
    int critic;    // 0: none; RL_ALGO_CRITIC_ACTOR: in the actor's process; _WORKER: its own
                   // (one process, or a group on the mesh's shape: roles.critic: mesh)
} rl_algo_roles_t;

enum { RL_ALGO_CRITIC_NONE = 0, RL_ALGO_CRITIC_ACTOR = 1, RL_ALGO_CRITIC_WORKER = 2 };

typedef struct {
    rl_recipe_algo_def_t recipe; // its part of the recipe: its name (algorithm.name), keys,
                                 // defaults and checks
    // The roles the run must start for this recipe.
    void (*roles)(const rl_recipe_t *r, rl_algo_roles_t *out);
    // Checks that need files but no worker, before the run folder is touched (prompts, eval
    // answers, plugins). Returns 0 or RL_EINVAL with err filled.
    int (*preflight)(const rl_recipe_t *r, char *err, size_t err_len);
    // Loads the algorithm's data and state (caller owns *state; free with destroy), says how
    // many training examples the data order walks and the largest frame (bytes) its own
    // messages carry besides the weights (a batch's per-token tensors, a score request's texts):
    // the run caps frames from it (rl_group_new). run->tok is loaded; workers are not started.
    int (*create)(rl_run_t *run, void **state, size_t *n_train, double *data_frame, char *err,
                  size_t err_len);
    void (*destroy)(void **state);
    // One optimizer step: the actor's update and everything around it, in the paper's order.
    // When the actor took the update the step calls rl_run_advance (run->step + 1, the data it
    // trained on) and sets *advanced = 1; the step's metrics go to run->metrics (also when a
    // later part of the step failed: the caller writes that line). A failed step leaves the data
    // order to the run, which takes it back to the examples not trained on (rl_run_t.trained).
    // Faults injected for tests (rl_fault.h) live in the run's calls, not in the step.
    int (*step)(void *state, rl_run_t *run, int *advanced, char *note, size_t note_len,
                char *err, size_t err_len);
    // Held-out evaluation at the current weights (NULL: none): adds eval/* metrics; *acc and
    // *acc_greedy get eval/accuracy(_greedy) when the algorithm measures them (else NaN).
    int (*evaluate)(void *state, rl_run_t *run, double *acc, double *acc_greedy, char *note,
                    size_t note_len, char *err, size_t err_len);
    // The algorithm's own numbers a checkpoint keeps (NULL: none): save adds name -> value pairs
    // to st (rl_ckpt_state_t.algo_*), load reads them back on resume (missing ones keep the
    // recipe's start). PPO: its KL coefficient, which the adaptive controller moves.
    void (*save_state)(void *state, rl_ckpt_state_t *st);
    void (*load_state)(void *state, const rl_ckpt_state_t *st);
    // Before a checkpoint (NULL: nothing to do): work the algorithm started ahead of its steps
    // (asynchronous generations) is finished and dropped, and the data order put back where
    // those steps will take their prompts, so that the checkpoint holds everything a resume
    // needs. Returns 0 or an error.
    int (*quiesce)(void *state, rl_run_t *run, char *err, size_t err_len);
    int stores;       // 1: the run keeps trajectories.lmdb
    int bookends;     // 1: evaluate before training and after the last step too (GRPO: the
                      // before/after of the closing summary); 0: every train.eval_every steps
                      // only (TRL's SFT default)
} rl_algo_t;

#ifdef __cplusplus
}
#endif
#endif

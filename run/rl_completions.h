// rl_completions — a few of a step's completions printed as a table beside the metrics
// (`log.completions: N`, TRL's log_completions): the first sample of each of the step's first N
// prompts, with its prompt, completion, each reward, the total, the advantage and how it ended.
// Internal to run/ and the algorithms.
#ifndef RL_COMPLETIONS_H
#define RL_COMPLETIONS_H

#include "rl_rollout.h"

#ifdef __cplusplus
extern "C" {
#endif

// Prints the table for run->step when log.completions > 0 and the step is one whose metrics are
// written (every train.log_every steps and the last). prompts: the rows t->idx refer to; adv:
// (n_res) the completions' sequence advantages, or NULL (PPO's are per token: not shown).
void rl_completions_print(rl_run_t *run, const rl_prompts_t *prompts, const rl_rollout_t *t,
                          const double *adv);

// The cell text of s: at most `width` display characters of it, control characters and quotes
// escaped as JSON does, "…" when cut. out: at least 4 * width + 8 bytes.
void rl_completions_cell(const char *s, size_t len, int width, char *out);

#ifdef __cplusplus
}
#endif
#endif

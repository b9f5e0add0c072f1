// rl_reward_builtin — the built-in rewards as reward ABI tables (include/rlctl/reward.h), the
// same type a plugin exports, so the loader, the worker and the tests treat both alike:
//   math_answer   1 when the completion's final number (rl_reward_math) equals the row's answer
//   regex_format  1 when a Python regular expression matches in the completion (re.search)
//   length        a length shaping term on the completion's token count (target and/or DAPO
//                 overlong penalty)
// Configs and formulas are documented in docs/rewards.md. Not the loader: see rl_reward.
#ifndef RL_REWARD_BUILTIN_H
#define RL_REWARD_BUILTIN_H

#include "rlctl/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

// The table of built-in `which` (RL_RECIPE_REWARD_MATH_ANSWER, _REGEX_FORMAT or _LENGTH of
// rl_config.h), or NULL for any other value. borrowed; valid until program exit.
const rl_reward_table_t *rl_reward_builtin_table(int which);

#ifdef __cplusplus
}
#endif
#endif

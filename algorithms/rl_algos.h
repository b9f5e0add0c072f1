// rl_algos — the catalog of the algorithms this build has: the one list (RL_ALGOS) of the
// algorithm files (rl_algo_<name>.c, each an rl_algo_t, rl_algo.h), looked up by name by the
// commands, and given as a recipe catalog (rl_recipe_algos_t) to every recipe load.
#ifndef RL_ALGOS_H
#define RL_ALGOS_H

#include "rl_algo.h"

#ifdef __cplusplus
extern "C" {
#endif

// Every algorithm of the build, in the order the docs and algorithm.name's choices list them:
// rl_algo_<a> is defined in rl_algo_<a>.c, whose recipe.name is "<a>". Adding one: one line.
#define RL_ALGOS(X) X(grpo) X(sft) X(ppo) X(dpo) X(rm)

#define RL_ALGO_DECLARE(a) extern const rl_algo_t rl_algo_##a;
RL_ALGOS(RL_ALGO_DECLARE)
#undef RL_ALGO_DECLARE

// The algorithm of a recipe's algorithm.name, or NULL. borrowed; valid until program exit.
const rl_algo_t *rl_algo_find(const char *name);
// The catalog of every algorithm, which recipes are loaded with (rl_recipe_load_file).
// borrowed; valid until program exit.
const rl_recipe_algos_t *rl_algos(void);

#ifdef __cplusplus
}
#endif
#endif

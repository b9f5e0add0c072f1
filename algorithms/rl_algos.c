// rl_algos — the catalog of the algorithms that RL_ALGOS (rl_algos.h) lists; each is its own
// file.
#include "rl_algos.h"

#include <string.h>

#define S_ALGO(a) &rl_algo_##a,
#define S_DEF(a) &rl_algo_##a.recipe,
#define S_NAME(a) #a,
static const rl_algo_t *const s_all[] = {RL_ALGOS(S_ALGO)};
static const rl_recipe_algo_def_t *const s_defs[] = {RL_ALGOS(S_DEF)};
static const char *const s_names[] = {RL_ALGOS(S_NAME) NULL};
static const rl_recipe_algos_t s_catalog = {s_defs, (int)(sizeof s_all / sizeof s_all[0]), s_names};

const rl_algo_t *rl_algo_find(const char *name) {
    for (int i = 0; name && i < s_catalog.n; i++) {
        if (strcmp(s_all[i]->recipe.name, name) == 0) {
            return s_all[i];
        }
    }
    return NULL;
}

const rl_recipe_algos_t *rl_algos(void) {
    return &s_catalog;
}

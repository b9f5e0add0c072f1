// rl_algo — the one place that lists the algorithms (see rl_algo.h; each is its own file).
#include "rl_algo.h"

#include <string.h>

const rl_algo_t *rl_algo_find(const char *name) {
    const rl_algo_t *all[] = {rl_algo_grpo(), rl_algo_sft(), rl_algo_ppo(), rl_algo_dpo(),
                              rl_algo_rm()};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(all[i]->name, name) == 0) {
            return all[i];
        }
    }
    return NULL;
}

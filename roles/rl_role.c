// rl_role — the one place that lists the roles (see rl_role.h; each role is its own file).
#include "rl_role.h"

#include <string.h>

const rl_role_t *rl_role_find(const char *name) {
    const rl_role_t *all[] = {rl_role_actor(), rl_role_sampler(), rl_role_reward(),
                              rl_role_reference(), rl_role_critic()};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(all[i]->name, name) == 0) {
            return all[i];
        }
    }
    return NULL;
}

// Test plugin "null_table": rl_reward_entry returns NULL.
#include "rlctl/reward.h"

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return NULL;
}

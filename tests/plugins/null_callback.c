// Test plugin "null_callback": a table of the right version and size whose score is NULL.
#include "stub.h"

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "null_callback",
    .create = stub_create,
    .score = NULL,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

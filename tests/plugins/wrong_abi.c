// Test plugin "wrong_abi": a complete table that claims ABI version 999; the loader must refuse
// it, naming the path and both versions.
#include "stub.h"

static const rl_reward_table_t table = {
    .abi_version = 999,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "wrong_abi",
    .create = stub_create,
    .score = stub_score,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

// Test plugin "no_symbol": a valid table behind a misspelled entry point (rl_reward_entr), so
// the shared object loads but has no rl_reward_entry; the loader must say so.
#include "stub.h"

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "no_symbol",
    .create = stub_create,
    .score = stub_score,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entr(void);
RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entr(void) {
    return &table;
}

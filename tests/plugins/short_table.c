// Test plugin "short_table": struct_size stops before score and destroy, as a table built from
// a truncated header would; the loader must refuse to read past it.
#include "stub.h"

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = offsetof(rl_reward_table_t, score),
    .name = "short_table",
    .create = stub_create,
    .score = stub_score,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

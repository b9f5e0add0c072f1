// Test plugin "create_error": create fails with a message, as a plugin does on a bad config.
#include <stdio.h>

#include "stub.h"

static int create_fail(const rl_reward_host_t *host, const char *config_json, void **state,
                       char *err, size_t err_len) {
    (void)host;
    (void)config_json;
    (void)state;
    snprintf(err, err_len, "config: missing key 'token'");
    return 1;
}

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "create_error",
    .create = create_fail,
    .score = stub_score,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

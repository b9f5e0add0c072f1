// Test plugin "score_error": create succeeds, score fails with a message (as a plugin whose
// backend went away would).
#include <stdio.h>

#include "stub.h"

static int score_fail(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                      size_t err_len) {
    if (!stub_fail_now()) {
        return stub_score(state, items, n, out, err, err_len);
    }
    (void)state;
    (void)items;
    (void)out;
    snprintf(err, err_len, "backend unavailable (%zu items)", n);
    return 2;
}

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "score_error",
    .create = stub_create_after,
    .score = score_fail,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

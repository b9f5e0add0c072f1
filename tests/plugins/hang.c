// Test plugin "hang": loads and creates fine, and score never returns. For the reward worker's
// timeout tests (roles.reward_timeout); never score it in-process.
#include <unistd.h>

#include "stub.h"

static int score_hang(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                      size_t err_len) {
    if (!stub_fail_now()) {
        return stub_score(state, items, n, out, err, err_len);
    }
    (void)state;
    (void)items;
    (void)n;
    (void)out;
    (void)err;
    (void)err_len;
    for (;;) {
        sleep(3600);
    }
    return 1; // not reached
}

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "hang",
    .create = stub_create_after,
    .score = score_hang,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

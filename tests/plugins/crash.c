// Test plugin "crash": loads and creates fine, and score dies of SIGSEGV. For the reward
// worker's tests (a crash costs the batch, named by the reward); never score it in-process.
#include <signal.h>

#include "stub.h"

static int score_crash(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
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
    raise(SIGSEGV);
    return 1; // not reached unless SIGSEGV is ignored
}

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "crash",
    .create = stub_create_after,
    .score = score_crash,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

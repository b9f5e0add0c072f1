// Test plugin "nan": odd items are unscorable (NaN), even items score their index. With config
// {"inf": true} item 1 scores +inf instead, which the host must refuse.
#include <math.h>
#include <string.h>

#include "rlctl/reward.h"

static int nan_create(const rl_reward_host_t *host, const char *config_json, void **state,
                      char *err, size_t err_len) {
    (void)host;
    (void)err;
    (void)err_len;
    static int with_inf = 1, without_inf = 0; // read-only flags: the state is a pointer to one
    *state = strstr(config_json, "\"inf\": true") || strstr(config_json, "\"inf\":true")
                 ? &with_inf
                 : &without_inf;
    return 0;
}

static int nan_score(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                     size_t err_len) {
    (void)items;
    (void)err;
    (void)err_len;
    int inf = *(const int *)state;
    for (size_t i = 0; i < n; i++) {
        out[i] = i % 2 ? (double)NAN : (double)i;
    }
    if (inf && n > 1) {
        out[1] = (double)INFINITY;
    }
    return 0;
}

static void nan_destroy(void *state) {
    (void)state;
}

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "nan",
    .create = nan_create,
    .score = nan_score,
    .destroy = nan_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

// Callbacks shared by the broken test plugins (static inline: a plugin that leaves one out of
// its table gets no unused-function warning): a create that succeeds with no state, a score
// that writes 0, a destroy that does nothing. Each plugin then breaks one thing of its table.
#ifndef RL_TEST_PLUGIN_STUB_H
#define RL_TEST_PLUGIN_STUB_H

#include "rlctl/reward.h"

static inline int stub_create(const rl_reward_host_t *host, const char *config_json, void **state,
                              char *err, size_t err_len) {
    (void)host;
    (void)config_json;
    (void)err;
    (void)err_len;
    *state = NULL;
    return 0;
}

static inline int stub_score(void *state, const rl_reward_item_t *items, size_t n, double *out,
                             char *err, size_t err_len) {
    (void)state;
    (void)items;
    (void)err;
    (void)err_len;
    for (size_t i = 0; i < n; i++) {
        out[i] = 0.0;
    }
    return 0;
}

static inline void stub_destroy(void *state) {
    (void)state;
}

#endif

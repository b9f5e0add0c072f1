// Callbacks shared by the broken test plugins (static inline: a plugin that leaves one out of
// its table gets no unused-function warning): a create that succeeds with no state, a score
// that writes 0, a destroy that does nothing. Each plugin then breaks one thing of its table.
#ifndef RL_TEST_PLUGIN_STUB_H
#define RL_TEST_PLUGIN_STUB_H

#include "rlctl/reward.h"

#include <stdlib.h>
#include <string.h>

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

// The failing plugins (crash, hang, score_error) fail from their call number `after` + 1 on:
// config {"after": N} lets the first N score calls succeed (scores 0), so a run has finished
// steps (and a checkpoint) before the failure. Default 0: the first call fails.
static long stub_after;
static long stub_calls;

static inline int stub_create_after(const rl_reward_host_t *host, const char *config_json,
                                    void **state, char *err, size_t err_len) {
    const char *p = strstr(config_json, "\"after\"");
    stub_after = 0;
    stub_calls = 0;
    if (p && (p = strchr(p, ':')) != NULL) {
        stub_after = strtol(p + 1, NULL, 10);
    }
    return stub_create(host, config_json, state, err, err_len);
}

// 1 when this score call should fail (counts the call).
static inline int stub_fail_now(void) {
    return ++stub_calls > stub_after;
}

#endif

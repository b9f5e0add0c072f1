// Test plugin "ok": a working reward. score = scale * (number of completion tokens), with
// config {"scale": x} (default 1). It checks what the ABI promises (host table version and
// size, NUL-terminated item strings) and fails score with a message when a promise is broken,
// so the loader's tests catch a host that breaks the contract. Built with -fvisibility=hidden:
// ok_hidden_helper must not be visible to dlsym, rl_reward_entry must.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlctl/reward.h"

typedef struct {
    const rl_reward_host_t *host;
    double scale;
} ok_state_t;

// not static and not exported: the test checks that -fvisibility=hidden kept it private
double ok_hidden_helper(const ok_state_t *s, size_t n_ids);
double ok_hidden_helper(const ok_state_t *s, size_t n_ids) {
    return s->scale * (double)n_ids;
}

static int ok_create(const rl_reward_host_t *host, const char *config_json, void **state, char *err,
                     size_t err_len) {
    if (host->abi_version != RL_REWARD_ABI_VERSION || !RL_REWARD_HAS(host, rl_reward_host_t, log)) {
        snprintf(err, err_len, "host table version %u size %u", (unsigned)host->abi_version,
                 (unsigned)host->struct_size);
        return 1;
    }
    ok_state_t *s = malloc(sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return 1;
    }
    s->host = host;
    s->scale = 1.0;
    const char *k = strstr(config_json, "\"scale\"");
    if (k && (k = strchr(k, ':')) != NULL) {
        s->scale = strtod(k + 1, NULL);
    }
    host->log(host->ctx, RL_REWARD_LOG_DEBUG, "ok: created for '%s' with scale %g",
              host->reward_name, s->scale);
    *state = s;
    return 0;
}

static int ok_score(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                    size_t err_len) {
    const ok_state_t *s = state;
    for (size_t i = 0; i < n; i++) {
        const rl_reward_item_t *it = &items[i];
        if (it->prompt[it->prompt_len] != '\0' || it->completion[it->completion_len] != '\0' ||
            it->row_json[it->row_json_len] != '\0') {
            snprintf(err, err_len, "item %zu: a string is not NUL-terminated at its length", i);
            return 1;
        }
        out[i] = ok_hidden_helper(s, it->n_completion_ids);
    }
    return 0;
}

static void ok_destroy(void *state) {
    free(state);
}

static const rl_reward_table_t ok_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "ok",
    .create = ok_create,
    .score = ok_score,
    .destroy = ok_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &ok_table;
}

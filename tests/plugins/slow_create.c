// Test plugin "slow_create": a reward whose create() never returns in the reward worker, so
// that the worker is still loading when the run is stopped (start-up). The controller creates
// every reward once to check it before any worker starts: that first create, in another
// process, writes config {"marker": "..."} and succeeds; a create that finds the marker writes
// its process's pid to config {"pidfile": "..."} and sleeps forever.
#include <stdio.h>
#include <unistd.h>

#include "stub.h"

// The string value of "key" in config_json into out (cap bytes); "" when absent.
static void s_value(const char *config_json, const char *key, char *out, size_t cap) {
    out[0] = '\0';
    const char *p = strstr(config_json, key);
    if (p && (p = strchr(p + strlen(key), '"')) != NULL) { // the value's opening quote
        size_t n = strcspn(p + 1, "\"");
        if (n < cap) {
            memcpy(out, p + 1, n);
            out[n] = '\0';
        }
    }
}

static int create_slow(const rl_reward_host_t *host, const char *config_json, void **state,
                       char *err, size_t err_len) {
    char marker[512], pidfile[512];
    s_value(config_json, "\"marker\"", marker, sizeof marker);
    s_value(config_json, "\"pidfile\"", pidfile, sizeof pidfile);
    if (marker[0] && access(marker, F_OK) != 0) {
        FILE *f = fopen(marker, "w");
        if (f) {
            fclose(f);
        }
        return stub_create(host, config_json, state, err, err_len);
    }
    FILE *f = pidfile[0] ? fopen(pidfile, "w") : NULL;
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    for (;;) {
        sleep(3600);
    }
    return 1; // not reached
}

static const rl_reward_table_t table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "slow_create",
    .create = create_slow,
    .score = stub_score,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

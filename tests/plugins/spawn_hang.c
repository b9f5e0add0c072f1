// Test plugin "spawn_hang": as "hang", but before hanging it starts a child process (in the
// reward worker's process group, as a plugin's helper would be) that sleeps forever, and writes
// the child's pid to the file named by config {"pidfile": "..."}. For the tests that a stopped
// run leaves no process behind (the worker's whole process group is killed).
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "stub.h"

static char pidfile[512];

static int create_spawn(const rl_reward_host_t *host, const char *config_json, void **state,
                        char *err, size_t err_len) {
    const char *p = strstr(config_json, "\"pidfile\"");
    pidfile[0] = '\0';
    if (p && (p = strchr(p + 9, '"')) != NULL) {
        size_t n = strcspn(p + 1, "\"");
        if (n < sizeof pidfile) {
            memcpy(pidfile, p + 1, n);
            pidfile[n] = '\0';
        }
    }
    return stub_create_after(host, config_json, state, err, err_len);
}

static int score_spawn_hang(void *state, const rl_reward_item_t *items, size_t n, double *out,
                            char *err, size_t err_len) {
    if (!stub_fail_now()) {
        return stub_score(state, items, n, out, err, err_len);
    }
    pid_t child = fork();
    if (child == 0) {
        for (;;) {
            pause();
        }
    }
    FILE *f = pidfile[0] ? fopen(pidfile, "w") : NULL;
    if (f) {
        fprintf(f, "%d\n", (int)child);
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
    .name = "spawn_hang",
    .create = create_spawn,
    .score = score_spawn_hang,
    .destroy = stub_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &table;
}

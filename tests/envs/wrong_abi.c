// A test environment plugin built for another ABI version: rlctl must refuse it before the run.
#include "rlctl/env.h"

#include <stddef.h>

static const rl_env_table_t s_table = {
    .abi_version = 99,
    .struct_size = sizeof(rl_env_table_t),
    .name = "wrong_abi",
};

RL_ENV_EXPORT const rl_env_table_t *rl_env_entry(void) {
    return &s_table;
}

// rl_env_module — an environment of the ABI (rlctl/env.h) in this process: a plugin's table
// (dlopen'ed and checked: its symbol, ABI version, table size, callbacks, name) or a built-in's,
// one instance created from a config, answering request lines. What `rlctl env serve` runs in
// each environment worker process; the controller only checks a plugin's table with it
// (rl_env_module_check), never creates one. Not the transport (rl_env_host, rl_child).
#ifndef RL_ENV_MODULE_H
#define RL_ENV_MODULE_H

#include "rlctl/env.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_env_module rl_env_module_t;

// Loads and checks the plugin at `path` without creating an instance (for the checks before a
// run). Returns 0, RL_EPLUGIN (not loadable, no rl_env_entry, a NULL or short table, a NULL
// callback, an empty name) or RL_EVERSION (another ABI version), with err naming the file.
int rl_env_module_check(const char *path, char *err, size_t err_len);

// One instance: of the plugin at `path`, or (path NULL) of the built-in `builtin` ("calc"),
// created with config_json ("{}" when NULL). Returns 0 or an error with err filled (the checks
// above, an unknown built-in, create's own failure). caller owns *out; free with
// rl_env_module_close.
int rl_env_module_open(const char *path, const char *builtin, const char *config_json,
                       rl_env_module_t **out, char *err, size_t err_len);
void rl_env_module_close(rl_env_module_t **self_p);

// Answers one request line (len bytes): 0 and *reply (caller frees with free()), or an error
// with err filled.
int rl_env_module_answer(rl_env_module_t *m, const char *request, size_t len, char **reply,
                         size_t *reply_len, char *err, size_t err_len);

// The table's name ("calc"). borrowed; valid until rl_env_module_close.
const char *rl_env_module_name(const rl_env_module_t *m);

#ifdef __cplusplus
}
#endif
#endif

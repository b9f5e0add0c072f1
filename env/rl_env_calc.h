// rl_env_calc — the built-in `calc` environment (`env: {builtin: calc}`), pinned in docs/envs.md
// so that any implementation of the protocol reproduces it (cookbook/envs/calc_env.py is the
// same environment as a program): reset gives the row's prompt as the user's message and the
// calc tool; step answers each calc call with its value (rl_calc) or "error: bad call", and a
// turn without tool calls ends the episode. It answers one request line with one reply line,
// as a program would, so the built-in and the program go through the same decoder
// (rl_env_proto). Stateless: any episode id is answered.
#ifndef RL_ENV_CALC_H
#define RL_ENV_CALC_H

#include "rlctl/env.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The tools reset gives (OpenAI function schemas), as JSON text. borrowed; static.
const char *rl_env_calc_tools(void);

// Answers the len bytes of one request. Returns 0 and *reply (compact JSON, no newline; caller
// frees), which is {"error": ...} for a request the protocol does not allow (unknown op, an item
// without its fields, a row without a string "prompt"); RL_ENOMEM.
int rl_env_calc_answer(const char *request, size_t len, char **reply);

// The same environment as a table of the environment ABI (rlctl/env.h), as a plugin's would be.
// borrowed; static.
const rl_env_table_t *rl_env_calc_table(void);

#ifdef __cplusplus
}
#endif
#endif

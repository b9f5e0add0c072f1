// rl_env_host — a run's environment (the recipe's `env:`, docs/envs.md): the built-in one,
// answered in this process, a program's worker processes (`env.command`, `env.workers` copies),
// or a server (`env.http`). It answers one request line of the protocol (rl_env_proto) with one
// reply line, as rl_episode's environment callback does. With several workers a request's items
// are split between them by episode (an episode's every request goes to the same worker, worker
// = a hash of its id mod workers, so an environment may keep per-episode state), the parts are
// sent to all of them before any reply is read, and the replies are joined in the request's
// order. A server gets each request line whole as a POST's body (core/rl_httpc: retried on no
// connection, a lost one or a 5xx, every attempt within env.timeout) and its 2xx reply's body is
// the reply line.
//
// A worker that exits, closes its stdout, answers past env.timeout (it is then stopped) or
// answers with anything but one line of JSON fails the call with a message naming the command,
// the worker and what it did; the next call that needs it starts it again (logged), and the
// episodes it held are gone (their next steps are the new program's to refuse). A server's
// failure fails the call naming the URL; the next call tries it again. Not the protocol's checks
// (rl_env_proto decodes the joined reply) and not the episodes (rl_episode).
#ifndef RL_ENV_HOST_H
#define RL_ENV_HOST_H

#include "rl_config.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_env_host rl_env_host_t;

// The longest reply line read from a worker.
#define RL_ENV_HOST_MAX_REPLY (64u << 20)

// Opens the recipe's environment (its builtin, env.workers copies of env.command started now, or
// env.http's URL, parsed: nothing connects before the first call). Returns 0, RL_EINVAL when the
// recipe has none, or the error of a program that cannot be started or a URL that cannot be used
// (err names it). caller owns *out; free with rl_env_host_close.
int rl_env_host_open(const rl_recipe_env_t *env, rl_env_host_t **out, char *err, size_t err_len);
// How many times a worker was started again after a failure (0 for a builtin or a server).
int rl_env_host_restarts(const rl_env_host_t *h);
// Stops the workers (stdin closed, a second's grace, then their process groups killed).
void rl_env_host_close(rl_env_host_t **self_p);

// One request line (no newline) -> *reply (one line, caller frees), within env.timeout for the
// workers and the server. host: an rl_env_host_t (void * so that it is rl_episode_env_fn).
// Returns 0 or an error with err filled.
int rl_env_host_call(void *host, const char *request, char **reply, char *err, size_t err_len);

// "builtin calc", "command [python3 /abs/my_env.py]" or "http http://127.0.0.1:8123/env" (at
// most cap bytes), for messages.
void rl_env_host_describe(const rl_recipe_env_t *env, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

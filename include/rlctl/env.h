// rlctl/env.h — the environment plugin ABI: the one header an environment plugin includes.
//
// An environment plugin is a shared object that exports exactly one symbol, rl_env_entry,
// returning a table of callbacks (rl_env_table_t). It speaks the same protocol as an environment
// program (docs/envs.md, "The protocol"): answer() gets one request as JSON text (reset, step or
// close, batched) and gives one reply as JSON text. rlctl never loads a plugin into the
// controller: `env: {plugin: my_env.so}` runs `env.workers` worker processes (`rlctl env serve
// --plugin my_env.so`), each loading it once, so a plugin that crashes or hangs fails its
// requests as a program would, named, and the run stops or drops the episodes (env.on_error).
// The built-in `calc` environment is a table of this same type compiled into rlctl.
//
// This header is public and append-only, versioned as rlctl/reward.h is: the table starts with
// abi_version and struct_size; new fields are only ever added at its end (RL_ENV_HAS checks for
// one); a change that cannot be made by appending bumps RL_ENV_ABI_VERSION, and rlctl refuses
// plugins built for any other version.
//
// Plain C99/C11; no other rlctl header is needed, and a plugin links against nothing of rlctl.
//
//   cc -shared -fPIC -O2 -I include -o my_env.so my_env.c
#ifndef RLCTL_ENV_H
#define RLCTL_ENV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The ABI this header describes; a plugin puts it in its table's abi_version.
#define RL_ENV_ABI_VERSION 1

#if defined(__GNUC__) || defined(__clang__)
#define RL_ENV_EXPORT __attribute__((visibility("default")))
#else
#define RL_ENV_EXPORT
#endif

// The name rlctl looks up with dlsym().
#define RL_ENV_ENTRY_SYMBOL "rl_env_entry"

// 1 when the table `tbl` is large enough to hold `field` (see rlctl/reward.h's RL_REWARD_HAS).
#define RL_ENV_HAS(tbl, type, field)                                                               \
    ((size_t)(tbl)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

// The plugin's table: a static, constant table returned by rl_env_entry.
//
// Threading: one worker process calls create, answer and destroy from one thread, never two at
// a time; with env.workers = N there are N processes, each with its own instance. An episode's
// requests always go to the same worker, so an instance may keep per-episode state (key it by
// the request's "episode" ids; close says when to forget one).
//
// Errors: a callback that fails returns nonzero and writes a one-line message of at most
// err_len bytes into err; rlctl names the plugin. A request the environment refuses is better
// answered with {"error": "..."} (rlctl quotes it and fails the items). Never call exit() or
// abort(): a crash is contained by the worker process, but it fails the request.
typedef struct rl_env_table {
    uint32_t abi_version; // RL_ENV_ABI_VERSION, as the plugin was built
    uint32_t struct_size; // sizeof(rl_env_table_t), as the plugin was built
    const char *name;     // the plugin's own name (e.g. "calc"), NUL-terminated, static

    // Builds one instance from `config_json`: the recipe's env.config map as JSON text ("{}"
    // when absent; borrowed; valid until create returns). On success returns 0 and sets *state
    // (NULL allowed). On failure returns nonzero with err filled, and owns nothing.
    int (*create)(const char *config_json, void **state, char *err, size_t err_len);

    // Answers one request: `request` is one line of JSON text, `len` bytes, NUL-terminated
    // (borrowed; valid until answer returns). On success returns 0 and sets *reply to one line of
    // JSON text (no newline; it may hold none) allocated with malloc, and *reply_len to its
    // length: rlctl frees it with free_reply. Returns nonzero with err filled when it cannot
    // answer at all (out of memory): the request fails.
    int (*answer)(void *state, const char *request, size_t len, char **reply, size_t *reply_len,
                  char *err, size_t err_len);

    // Frees a reply answer gave (the plugin's own allocator).
    void (*free_reply)(void *state, char *reply);

    // Frees everything create made. Called once per successful create, before the plugin is
    // unloaded.
    void (*destroy)(void *state);
} rl_env_table_t;

typedef const rl_env_table_t *(*rl_env_entry_fn)(void);

// The one symbol a plugin defines: its table (borrowed; valid until the plugin is unloaded), or
// NULL, which rlctl reports as a broken plugin. It must not allocate or have side effects.
RL_ENV_EXPORT const rl_env_table_t *rl_env_entry(void);

#ifdef __cplusplus
}
#endif
#endif

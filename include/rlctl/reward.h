// rlctl/reward.h — the reward plugin ABI: the one header a reward plugin includes.
//
// A reward plugin is a shared object that exports exactly one symbol, rl_reward_entry, returning
// a table of callbacks (rl_reward_table_t). rlctl loads it in a reward worker process, calls
// create() once with the recipe's `config:` map as JSON text, score() once per batch of
// completions, and destroy() at the end. The built-in rewards (math_answer, regex_format,
// length) are tables of this same type compiled into rlctl. The plugin guide is docs/rewards.md.
//
// This header is public and append-only. Both tables (the plugin's rl_reward_table_t and the
// host's rl_reward_host_t) start with abi_version and struct_size; new fields are only ever
// added at their ends, so a reader checks struct_size (RL_REWARD_HAS) before it touches a field
// added after version 1. A change that cannot be made by appending (a field removed, a type or a
// meaning changed, rl_reward_item_t changed) bumps RL_REWARD_ABI_VERSION, and rlctl refuses
// plugins built for any other version. It is not the host's loader: that is rewards/rl_reward.h.
//
// Plain C99/C11; no other rlctl header is needed, and a plugin links against nothing of rlctl.
//
//   cc -shared -fPIC -O2 -I include -o my_reward.so my_reward.c
#ifndef RLCTL_REWARD_H
#define RLCTL_REWARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- versioning -----------------------------------------------------------------------------

// The ABI this header describes. A plugin puts it in its table's abi_version; rlctl refuses a
// plugin whose abi_version differs from its own.
#define RL_REWARD_ABI_VERSION 1

// Marks the one symbol a plugin exports. Plugins should build with -fvisibility=hidden (all
// other symbols stay private, so two plugins never clash); the declaration of rl_reward_entry
// below already carries the mark, and writing it on the definition too documents the intent.
#if defined(_WIN32)
#define RL_REWARD_EXPORT __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define RL_REWARD_EXPORT __attribute__((visibility("default")))
#else
#define RL_REWARD_EXPORT
#endif

// The name rlctl looks up with dlsym().
#define RL_REWARD_ENTRY_SYMBOL "rl_reward_entry"

// 1 when the table `tbl` (a pointer to rl_reward_host_t or rl_reward_table_t) is large enough
// to hold `field`, i.e. the other side was built with a header that has it. Fields of version 1
// are always present once abi_version matched and the loader accepted struct_size.
#define RL_REWARD_HAS(tbl, type, field)                                                            \
    ((size_t)(tbl)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

#if defined(__GNUC__) || defined(__clang__)
#define RL_REWARD_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RL_REWARD_PRINTF(f, a)
#endif

// ---- what the host gives a plugin -----------------------------------------------------------

// Levels for rl_reward_host_t.log (the same order as rlctl's own log levels).
enum {
    RL_REWARD_LOG_ERROR = 0,
    RL_REWARD_LOG_WARN = 1,
    RL_REWARD_LOG_INFO = 2,
    RL_REWARD_LOG_DEBUG = 3,
};

// Services of the host, handed to create(). One table per reward instance; it stays valid
// until destroy() of that instance returns, so a plugin may keep the pointer in its state.
// Call the services only from inside a create/score/destroy call, on the thread that made it.
typedef struct rl_reward_host {
    uint32_t abi_version;    // RL_REWARD_ABI_VERSION of the host
    uint32_t struct_size;    // sizeof(rl_reward_host_t) as the host was built; see RL_REWARD_HAS
    const char *reward_name; // the reward's name in the recipe (its metric is
                             // rewards/<reward_name>/mean); NUL-terminated, never NULL
    void *ctx;               // the host's; pass it back to log() unchanged
    // Writes one line, printf-formatted, to rlctl's log at `level` (RL_REWARD_LOG_*), prefixed
    // with the reward's name; no trailing newline needed. Lines below the run's log level are
    // dropped. Never NULL.
    void (*log)(void *ctx, int level, const char *fmt, ...) RL_REWARD_PRINTF(3, 4);
} rl_reward_host_t;

// One completion to score. Every string is both length-counted and NUL-terminated: text[len]
// is '\0' (text itself may hold no other '\0' a C string function would stop at, but use len).
// Everything an item points to is borrowed; valid until the score() call returns: copy what
// must outlive it. The layout of this struct is fixed for ABI version 1.
typedef struct rl_reward_item {
    const char *prompt;            // the prompt as the model saw it (chat template applied)
    size_t prompt_len;             // bytes, not counting the terminating '\0'
    const char *completion;        // the decoded completion, without the stop token's text
    size_t completion_len;         // bytes, not counting the terminating '\0'
    const int32_t *completion_ids; // the sampled token ids: every token the policy produced,
                                   // the stop token included when generation ended on one
    size_t n_completion_ids;       // how many; equals the trained length of the completion
    const char *row_json;          // the dataset row as one JSON object, every field of it
                                   // (e.g. {"prompt": "2+3=", "answer": "5"})
    size_t row_json_len;           // bytes, not counting the terminating '\0'
} rl_reward_item_t;

// ---- what a plugin gives the host -----------------------------------------------------------

// The plugin's table. Return a pointer to a static, constant table from rl_reward_entry; rlctl
// reads it once at load and keeps the pointer until it unloads the plugin.
//
// Threading: rlctl calls create, score and destroy of one instance from one thread, never two
// at a time. A recipe may list the same .so twice with different configs: that gives two
// instances (two states) in the same process, so keep everything mutable in the state, not in
// globals. A plugin may use threads of its own inside a call but must join them before it
// returns.
//
// Errors: a callback that fails returns nonzero and writes a one-line, NUL-terminated message
// of at most err_len bytes into err (snprintf(err, err_len, ...)); rlctl adds the reward's name.
// Never call exit() or abort(), never install signal handlers: a crash or a hang is contained
// by the reward worker process and its timeout, but it fails the batch (docs/rewards.md).
typedef struct rl_reward_table {
    uint32_t abi_version; // RL_REWARD_ABI_VERSION, as the plugin was built
    uint32_t struct_size; // sizeof(rl_reward_table_t), as the plugin was built
    const char *name;     // the plugin's own name (e.g. "format_bonus"), NUL-terminated, static;
                          // rlctl shows it in messages beside the recipe's name for the reward

    // Builds one instance from `config_json`: the recipe entry's `config:` map as JSON text,
    // NUL-terminated, "{}" when the entry has none (borrowed; valid until create returns).
    // `host` is the host's services (borrowed; valid until destroy of this instance returns).
    // On success returns 0 and sets *state (NULL is allowed: a stateless plugin); rlctl hands
    // *state back to score and destroy. On failure (a bad config, a missing resource) returns
    // nonzero with err filled, and owns nothing: destroy is not called.
    int (*create)(const rl_reward_host_t *host, const char *config_json, void **state, char *err,
                  size_t err_len);

    // Scores items[0..n), writing one double per item into out[0..n). rlctl fills out with NaN
    // before the call; NaN means "unscorable" (e.g. the row has no reference answer): the item
    // is left out of its reward's mean and gets no learning signal from it. Infinite values are
    // refused as an error. Returns 0, or nonzero with err filled: the whole batch fails then.
    // items and out are borrowed; valid until score returns.
    int (*score)(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                 size_t err_len);

    // Frees everything create made (takes ownership of state; it may be NULL when create set
    // it so). Called once per successful create, before the plugin is unloaded.
    void (*destroy)(void *state);
} rl_reward_table_t;

typedef const rl_reward_table_t *(*rl_reward_entry_fn)(void);

// The one symbol a plugin defines. Returns its table (borrowed; valid until the plugin is
// unloaded), or NULL, which rlctl reports as a broken plugin. Called once per load, before
// anything else; it must not allocate or have side effects.
RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void);

#ifdef __cplusplus
}
#endif
#endif

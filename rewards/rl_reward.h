// rl_reward — the host side of the reward ABI (include/rlctl/reward.h): opens one reward of a
// recipe (a built-in, a plugin .so, a reward model, a command or a server), checks its table,
// creates its state from the recipe's config and scores batches through it. Built-ins
// (rl_reward_builtin), reward models (rl_reward_model), commands (rl_reward_command) and
// servers (rl_reward_http) go through the same table type as plugins.
//
// Not the reward worker process, its timeout or the weighted total: those belong to the roles
// that call this module. A crash or a hang inside score() is not caught here; call it from a
// process you can afford to lose (docs/rewards.md, "Crashes and hangs").
//
// All functions are single-threaded per rl_reward_t (the ABI promises plugins one thread).
#ifndef RL_REWARD_H
#define RL_REWARD_H

#include <stddef.h>

#include "rl_config.h"
#include "rlctl/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_reward rl_reward_t;

// Opens the reward `spec` (a recipe entry; name, builtin, plugin, model, command, http,
// config_json, reward_timeout and answer_field are read, borrowed; valid until the call
// returns):
//   - a built-in (spec->builtin = RL_RECIPE_REWARD_MATH_ANSWER, _REGEX_FORMAT, _LENGTH) takes
//     its compiled-in table;
//   - a plugin (spec->builtin = RL_RECIPE_REWARD_PLUGIN, spec->plugin = path of the .so; a path
//     without '/' is taken relative to the working directory, never searched for) is
//     dlopen'ed with RTLD_NOW | RTLD_LOCAL and its rl_reward_entry table is checked: the file
//     loads, the symbol exists and returns non-NULL, abi_version equals RL_REWARD_ABI_VERSION,
//     struct_size covers every version-1 field, name/create/score/destroy are non-NULL;
//   - a reward model (spec->builtin = RL_RECIPE_REWARD_MODEL, spec->model = its folder) takes
//     rl_reward_model's compiled-in table, with `threads` compute threads (0 = all cores;
//     the others ignore it);
//   - a command (RL_RECIPE_REWARD_COMMAND, spec->command = the program and its arguments) takes
//     rl_reward_command's table, which starts the program now;
//   - a server (RL_RECIPE_REWARD_HTTP, spec->http) takes rl_reward_http's table (no connection
//     is made before the first batch).
//   A command or a server gives up on a batch a little before spec->reward_timeout (the
//   controller's wait for the reward worker): 1 s before, or 10% of it when that is shorter;
//   0 = no limit.
// Then calls the table's create() with spec->config_json (NULL means "{}"; a model reward's
// gets "path" and "threads" added; a command's and a server's config is made from their keys,
// see rl_reward_command.h and rl_reward_http.h).
// spec->name names the reward in messages and in rl_reward_name; when NULL the table's name is
// used. Returns 0 and sets *out; or, with a one-line message in err that names the reward (and
// the plugin's path):
//   RL_EINVAL    spec is inconsistent (no plugin path, unknown builtin)
//   RL_EVERSION  the plugin was built for another ABI version (both versions in the message)
//   RL_EPLUGIN   the file cannot be loaded or is not a reward plugin (no symbol, NULL table,
//                short table, NULL callback), or create() failed (the plugin's message; a
//                command that cannot be started; a URL that is not http://)
//   RL_ENOMEM    out of memory
// On failure everything is released again (the plugin is dlclose'd). caller owns *out; free with
// rl_reward_close.
int rl_reward_open(const rl_recipe_reward_t *spec, int threads, rl_reward_t **out, char *err,
                   size_t err_len);

// The pre-flight check run before any worker starts: rl_reward_open then rl_reward_close, so a
// missing file, a broken table or a bad config is reported at once, with nothing scored.
// Returns what rl_reward_open returns, with the same messages.
int rl_reward_check(const rl_recipe_reward_t *spec, char *err, size_t err_len);

// Scores items[0..n) (borrowed; valid until the call returns) into out[0..n). out is filled
// with NaN first, so an item the reward leaves unwritten or calls unscorable is NaN; NaN values
// pass through. n == 0 returns 0 without calling the reward. Returns 0; or RL_EPLUGIN when
// score() returned an error (err: "reward '<name>' (<origin>): score failed: <its message>")
// or wrote an infinite value (err names the item); out is then unspecified.
int rl_reward_score(rl_reward_t *r, const rl_reward_item_t *items, size_t n, double *out, char *err,
                    size_t err_len);

// The reward's name: spec->name, or the table's name when spec->name was NULL.
// borrowed; valid until rl_reward_close.
const char *rl_reward_name(const rl_reward_t *r);

// Where the reward comes from: "builtin <table name>", "model <folder>", the plugin's path as
// given, "command <program> <args...>" (an argument holding a space or a quote in '...') or
// the server's URL.
// borrowed; valid until rl_reward_close.
const char *rl_reward_origin(const rl_reward_t *r);

// The origin rl_reward_origin would give for `spec` (borrowed; valid until the call returns),
// without opening it, into out[0..cap) (cut to fit). For messages about a reward that is not
// open here, e.g. the controller's about the reward worker. Returns the length written.
int rl_reward_spec_origin(const rl_recipe_reward_t *spec, char *out, size_t cap);

// Calls destroy() on the reward's state, unloads a plugin and frees the handle; sets *r_p to
// NULL. A no-op when *r_p is NULL. takes ownership of *r_p and sets it to NULL.
void rl_reward_close(rl_reward_t **r_p);

#ifdef __cplusplus
}
#endif
#endif

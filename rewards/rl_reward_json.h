// rl_reward_json — the JSON that command and http rewards exchange with the program or server
// that scores (docs/rewards.md, "Rewards in any language"): the request object built from a
// batch of items, and the reply decoded into one score per item. Two forms:
//   RL_REWARD_JSON_RLCTL     {"items": [{"prompt", "completion", "completion_ids", "row"}, ...]}
//                            -> {"scores": [number | null, ...]} or {"error": "message"}
//   RL_REWARD_JSON_OPENRLHF  {"query": [prompt + completion], "prompts": [prompt], "labels":
//                            [label]} -> {"rewards": [number, ...]} (OpenRLHF's remote reward)
// Replies come from another program: they are untrusted, decoded with a size cap, and every
// value is checked before it becomes a score. A reply may hold keys this module does not know
// (later versions of either side add keys; the ones above stay).
//
// Not the transport: rl_reward_command (a child process's stdin/stdout) and rl_reward_http
// (HTTP POST) move these bytes.
#ifndef RL_REWARD_JSON_H
#define RL_REWARD_JSON_H

#include <stddef.h>

#include "rlctl/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

// The forms; the values of rewards[].http.format (RL_RECIPE_HTTP_* in rl_config.h).
enum { RL_REWARD_JSON_RLCTL = 0, RL_REWARD_JSON_OPENRLHF = 1 };

// The longest reply decoded (the transports stop reading there): 16 MiB.
#define RL_REWARD_JSON_MAX_REPLY ((size_t)16 << 20)

// Builds the request for items[0..n) (borrowed; valid until the call returns) in `format`, as
// one line of JSON without its newline. Every string is sent as UTF-8 text (non-ASCII escaped
// \uXXXX, so the line is ASCII); bytes of the prompt or completion that are not valid UTF-8 (a
// completion can end inside a character) are sent as U+FFFD, as Python's errors="replace" reads
// them. RLCTL: each item's row is the dataset row as a JSON object, every field. OPENRLHF: a
// label is the row's field `label_field` (a string as it is, any other value as its JSON text,
// "" when the row has no such field or it is null).
// Returns 0 and sets *out (caller owns result; free with free()) and *out_len; or RL_EINVAL when
// an item's row is not a JSON object (err names the item), RL_ENOMEM.
int rl_reward_json_request(const rl_reward_item_t *items, size_t n, int format,
                           const char *label_field, char **out, size_t *out_len, char *err,
                           size_t err_len);

// Decodes `text` (len bytes, need not be NUL-terminated), the reply of `format` to a request of
// n items, into out[0..n). RLCTL reads "scores" (or "error"), OPENRLHF reads "rewards"; other
// keys are ignored. A score is a number or null; null is NaN (unscorable). Python's json module
// writes float('nan') and the infinities as the bare words NaN, Infinity and -Infinity: NaN
// reads as null, an infinity is refused like a plugin's (docs/rewards.md, "NaN").
// Returns 0 with out filled; RL_EPLUGIN when the reply is {"error": "..."} (err: its message);
// RL_EPROTO when it is not the reply asked for: not JSON, not an object, more than
// RL_REWARD_JSON_MAX_REPLY bytes, no scores, a count other than n, a value that is not a
// number or null, an infinity (err says which, quoting the start of the reply). out is
// unspecified after an error.
int rl_reward_json_reply(const char *text, size_t len, int format, size_t n, double *out, char *err,
                         size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

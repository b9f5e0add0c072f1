// rl_env_proto — the environment protocol's JSON (docs/envs.md, "The protocol"): the requests
// rlctl sends (reset, step, close; batched: one line holds many episodes' items) and the
// checked decoding of what an environment answers. An environment is outside code (a program,
// a server): every reply is decoded as hostile — the wrong number of items, a field of the
// wrong type, a message an environment may not send — and refused with a message naming the
// item's episode and the field. Not the transport (the environment workers) and not any
// environment.
#ifndef RL_ENV_PROTO_H
#define RL_ENV_PROTO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- requests (compact JSON text, no newline; caller frees; NULL when out of memory) ------
typedef struct {
    const char *episode; // the episode's id
    json_t *row;         // the dataset row (an object; borrowed)
    uint64_t seed;       // the episode's seed
} rl_env_reset_item_t;

typedef struct {
    const char *episode;
    json_t *message; // the policy's turn: {"role": "assistant", "content", "tool_calls"?}
} rl_env_step_item_t;

char *rl_env_request_reset(const rl_env_reset_item_t *items, int n);
char *rl_env_request_step(const rl_env_step_item_t *items, int n);
char *rl_env_request_close(const char *const *episodes, int n);

// ---- replies ---------------------------------------------------------------------------------
// What reset gives an episode: its first messages (a non-empty array of messages, roles system,
// user, assistant or tool) and its tools (OpenAI function schemas; NULL when none).
typedef struct {
    json_t *messages;
    json_t *tools;
} rl_env_reset_reply_t;

// What step gives an episode: the messages that follow the policy's turn (roles user, tool or
// system; may be empty), the step's reward (finite; 0 when absent) and whether the episode ends.
typedef struct {
    json_t *messages;
    double reward;
    int done;
} rl_env_step_reply_t;

// Decode the len bytes of a reply to a request of n items into out[0..n) (owned; free with
// the _free calls). Returns 0, or RL_EINVAL with err saying what is wrong: not JSON, an
// "error" the environment reports (quoted), a count of items other than n, or the first bad
// field as "item K (episode <id>): <field>: <what>" (episodes: the request's ids, for the
// message). On an error nothing is left to free.
int rl_env_reply_reset(const char *text, size_t len, int n, const char *const *episodes,
                       rl_env_reset_reply_t *out, char *err, size_t err_len);
int rl_env_reply_step(const char *text, size_t len, int n, const char *const *episodes,
                      rl_env_step_reply_t *out, char *err, size_t err_len);
// The same, tolerant of bad items (env.on_error: drop): an item whose fields are wrong is
// marked bad[k] = 1 (out[k] left empty) and the others decoded; err gets the first bad item's
// message. Returns 0 (even with bad items), or RL_EINVAL for a reply wrong as a whole (not JSON,
// an "error", the wrong count).
int rl_env_reply_reset_items(const char *text, size_t len, int n, const char *const *episodes,
                             rl_env_reset_reply_t *out, int *bad, char *err, size_t err_len);
int rl_env_reply_step_items(const char *text, size_t len, int n, const char *const *episodes,
                            rl_env_step_reply_t *out, int *bad, char *err, size_t err_len);
// close's reply: {} (any object without "error").
int rl_env_reply_close(const char *text, size_t len, char *err, size_t err_len);

void rl_env_reset_reply_free(rl_env_reset_reply_t *r, int n);
void rl_env_step_reply_free(rl_env_step_reply_t *r, int n);

#ifdef __cplusplus
}
#endif
#endif

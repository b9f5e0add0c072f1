// rl_reward_http — a reward computed by a server (a recipe's `http:`), as a reward ABI table
// like the built-ins: score() POSTs the batch (rl_reward_json's RLCTL or OPENRLHF form) and
// reads the scores from the reply. The client is core/rl_httpc (http:// only, one connection per
// request, replies capped at RL_REWARD_JSON_MAX_REPLY bytes, every wait bounded): a request that
// finds no server or loses the connection before a whole reply, or gets a 5xx status, is tried
// again after 0.25 s, 0.5 s, 1 s, ... (doubling, at most 4 s) up to `retries` more times; any
// other failure fails the batch at once. Messages name the URL. docs/rewards.md, "Rewards over
// HTTP", is the user's side.
//
// Gives the client's URL and reply parsers this module's names, for its tests and fuzzing
// (fuzz/fuzz_reward_reply.c). Not the loader (rl_reward builds this table's config from the
// recipe entry) and not the JSON (rl_reward_json).
#ifndef RL_REWARD_HTTP_H
#define RL_REWARD_HTTP_H

#include <stddef.h>

#include "rl_httpc.h"
#include "rlctl/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

// The table. Its create() takes a config of rlctl's own making, not a recipe's `config:`:
//   {"url": "http://127.0.0.1:8000/score", "timeout": 30 (seconds per attempt), "format":
//    "rlctl" | "openrlhf", "retries": 3, "label_field": "answer" (openrlhf's labels),
//    "deadline": 2.7 (seconds all attempts of one score() together may take; 0 = no limit)}
// create() only parses the URL (a server need not be up before the first batch); it fails on a
// URL this client cannot use (https, no host, a bad port), with the reason.
// borrowed; valid until program exit.
const rl_reward_table_t *rl_reward_http_table(void);

// ---- the client's parts, under this module's names (core/rl_httpc.h) -----------------------

typedef rl_httpc_url_t rl_reward_http_url_t;
typedef rl_httpc_reply_t rl_reward_http_reply_t;

// rl_httpc_url_parse, its https message naming the reward client.
static inline int rl_reward_http_url_parse(const char *url, rl_reward_http_url_t *out, char *err,
                                           size_t err_len) {
    return rl_httpc_url_parse(url, "reward", out, err, err_len);
}

// rl_httpc_reply_new. caller owns *out; free with rl_reward_http_reply_destroy.
static inline int rl_reward_http_reply_new(size_t max_body, rl_reward_http_reply_t **out) {
    return rl_httpc_reply_new(max_body, out);
}

// rl_httpc_reply_feed.
static inline int rl_reward_http_reply_feed(rl_reward_http_reply_t *p, const char *data, size_t n,
                                            char *err, size_t err_len) {
    return rl_httpc_reply_feed(p, data, n, err, err_len);
}

// rl_httpc_reply_eof.
static inline int rl_reward_http_reply_eof(rl_reward_http_reply_t *p, char *err, size_t err_len) {
    return rl_httpc_reply_eof(p, err, err_len);
}

// rl_httpc_reply_status.
static inline int rl_reward_http_reply_status(const rl_reward_http_reply_t *p) {
    return rl_httpc_reply_status(p);
}

// rl_httpc_reply_body: borrowed; valid until the next feed or destroy.
static inline const char *rl_reward_http_reply_body(const rl_reward_http_reply_t *p, size_t *len) {
    return rl_httpc_reply_body(p, len);
}

// rl_httpc_reply_destroy: sets *p_p to NULL; a no-op when *p_p is NULL.
static inline void rl_reward_http_reply_destroy(rl_reward_http_reply_t **p_p) {
    rl_httpc_reply_destroy(p_p);
}

#ifdef __cplusplus
}
#endif
#endif

// rl_reward_http — a reward computed by a server (a recipe's `http:`), as a reward ABI table
// like the built-ins: score() POSTs the batch (rl_reward_json's RLCTL or OPENRLHF form) and
// reads the scores from the reply. Its client is a small HTTP/1.1 one of our own over plain TCP
// sockets: http:// only (https:// is refused with a message), one connection per request
// ("Connection: close"), replies delimited by Content-Length, chunked transfer coding or the
// close, capped at RL_REWARD_JSON_MAX_REPLY bytes, every wait bounded by poll(). A request that
// finds no server or loses the connection before a whole reply, or gets a 5xx status, is tried
// again after 0.25 s, 0.5 s, 1 s, ... (doubling, at most 4 s) up to `retries` more times; any
// other failure fails the batch at once. Messages name the URL. docs/rewards.md, "Rewards over
// HTTP", is the user's side.
//
// Exposes the URL parser and the reply parser for tests and fuzzing (fuzz/fuzz_reward_reply.c).
// Not the loader (rl_reward builds this table's config from the recipe entry) and not the JSON
// (rl_reward_json).
#ifndef RL_REWARD_HTTP_H
#define RL_REWARD_HTTP_H

#include <stddef.h>

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

// ---- the URL --------------------------------------------------------------------------------

typedef struct {
    char host[256];      // a name or an address; an IPv6 address without its brackets
    char port[6];        // decimal, "80" when the URL has none
    char authority[300]; // HOST[:PORT] as the URL writes it: the Host header
    char path[2048];     // the path and query, "/" when the URL has none
} rl_reward_http_url_t;

// Parses "http://HOST[:PORT][/PATH][?QUERY]" into *out. Returns 0; or RL_EINVAL with err saying
// what is wrong (https, another scheme, no host, a port outside 1..65535, user@ credentials, a
// #fragment, spaces or control bytes, a part too long for *out).
int rl_reward_http_url_parse(const char *url, rl_reward_http_url_t *out, char *err, size_t err_len);

// ---- the reply ------------------------------------------------------------------------------

typedef struct rl_reward_http_reply rl_reward_http_reply_t;

// A parser for one HTTP/1.x reply whose body may hold at most max_body bytes. Returns 0 and
// *out, or RL_ENOMEM. caller owns *out; free with rl_reward_http_reply_destroy.
int rl_reward_http_reply_new(size_t max_body, rl_reward_http_reply_t **out);

// Feeds the next n bytes the server sent (any split of the stream is fine). Returns 0 when more
// are needed, 1 when the reply is complete (bytes past its end are ignored), or RL_EPROTO with
// err saying what is malformed: a status line that is not HTTP/1.x, a head over 64 KiB, a bad
// Content-Length or chunk size, a transfer or content coding other than chunked/identity, a
// body over max_body. 1xx replies (100 Continue) are skipped. After 1 or an error, feeding is a
// no-op returning the same.
int rl_reward_http_reply_feed(rl_reward_http_reply_t *p, const char *data, size_t n, char *err,
                              size_t err_len);

// The server closed the connection. Returns 1 when that completes the reply (a body delimited by
// the close, or a reply already complete), else RL_EPROTO (err: where it was cut short).
int rl_reward_http_reply_eof(rl_reward_http_reply_t *p, char *err, size_t err_len);

// The status code (0 before the status line), and the body so far: NUL-terminated, *len bytes
// (borrowed; valid until the next feed or destroy).
int rl_reward_http_reply_status(const rl_reward_http_reply_t *p);
const char *rl_reward_http_reply_body(const rl_reward_http_reply_t *p, size_t *len);

// Frees the parser; sets *p_p to NULL. A no-op when *p_p is NULL.
void rl_reward_http_reply_destroy(rl_reward_http_reply_t **p_p);

#ifdef __cplusplus
}
#endif
#endif

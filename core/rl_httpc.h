// rl_httpc — rlctl's HTTP/1.1 client, shared by the rewards on a server (rewards/rl_reward_http)
// and the environments on one (env/rl_env_host): one JSON body POSTed, one reply read. Plain TCP
// sockets: http:// only (https:// is refused with a message), one connection per request
// ("Connection: close"), replies delimited by Content-Length, chunked transfer coding or the
// close, capped, every wait bounded by poll(). A request that finds no server or loses the
// connection before a whole reply, or gets a 5xx status, is tried again after 0.25 s, 0.5 s, 1 s,
// ... (doubling, at most 4 s) up to `retries` more times; any other failure is final at once.
//
// Exposes the URL parser and the reply parser for tests and fuzzing. Not what the bodies mean
// (the caller's: rl_reward_json, rl_env_proto) and not the recipe's checks of a URL
// (core/rl_config_load).
#ifndef RL_HTTPC_H
#define RL_HTTPC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- the URL --------------------------------------------------------------------------------

typedef struct {
    char host[256];      // a name or an address; an IPv6 address without its brackets
    char port[6];        // decimal, "80" when the URL has none
    char authority[300]; // HOST[:PORT] as the URL writes it: the Host header
    char path[2048];     // the path and query, "/" when the URL has none
} rl_httpc_url_t;

// Parses "http://HOST[:PORT][/PATH][?QUERY]" into *out. `who` names the client in the message
// refusing https ("reward": "rlctl's reward client speaks plain http (serve the reward on
// ..."). Returns 0; or RL_EINVAL with err saying what is wrong (https, another scheme, no host, a
// port outside 1..65535, user@ credentials, a #fragment, spaces or control bytes, a part too long
// for *out).
int rl_httpc_url_parse(const char *url, const char *who, rl_httpc_url_t *out, char *err,
                       size_t err_len);

// ---- the reply ------------------------------------------------------------------------------

typedef struct rl_httpc_reply rl_httpc_reply_t;

// A parser for one HTTP/1.x reply whose body may hold at most max_body bytes. Returns 0 and
// *out, or RL_ENOMEM. caller owns *out; free with rl_httpc_reply_destroy.
int rl_httpc_reply_new(size_t max_body, rl_httpc_reply_t **out);

// Feeds the next n bytes the server sent (any split of the stream is fine). Returns 0 when more
// are needed, 1 when the reply is complete (bytes past its end are ignored), or RL_EPROTO with
// err saying what is malformed: a status line that is not HTTP/1.x, a head over 64 KiB, a bad
// Content-Length or chunk size, a transfer or content coding other than chunked/identity, a
// body over max_body. 1xx replies (100 Continue) are skipped. After 1 or an error, feeding is a
// no-op returning the same.
int rl_httpc_reply_feed(rl_httpc_reply_t *p, const char *data, size_t n, char *err, size_t err_len);

// The server closed the connection. Returns 1 when that completes the reply (a body delimited by
// the close, or a reply already complete), else RL_EPROTO (err: where it was cut short).
int rl_httpc_reply_eof(rl_httpc_reply_t *p, char *err, size_t err_len);

// The status code (0 before the status line), and the body so far: NUL-terminated, *len bytes
// (borrowed; valid until the next feed or destroy).
int rl_httpc_reply_status(const rl_httpc_reply_t *p);
const char *rl_httpc_reply_body(const rl_httpc_reply_t *p, size_t *len);

// Frees the parser; sets *p_p to NULL. A no-op when *p_p is NULL.
void rl_httpc_reply_destroy(rl_httpc_reply_t **p_p);

// ---- a request and its retries --------------------------------------------------------------

typedef struct {
    const char *url_text;   // the URL as the recipe wrote it, for messages (borrowed)
    rl_httpc_url_t url;     // parsed by rl_httpc_url_parse
    double timeout;         // seconds one attempt (connect, send, the whole reply) may take
    int retries;            // attempts after the first, on no connection, a lost one or a 5xx
    double limit;           // seconds all attempts together may take; 0 = no limit
    const char *limit_name; // the setting `limit` comes from, named when it cuts an attempt
                            // short ("roles.reward_timeout"; borrowed)
    size_t max_body;        // the longest reply body accepted
} rl_httpc_opts_t;

// POSTs body[0..len) (Content-Type: application/json) to o->url until an attempt gets a whole
// reply with a status that is not 5xx, or the retries or the limit run out. Returns 0 with *out
// the 2xx reply (caller owns *out; free with rl_httpc_reply_destroy), RL_ENOMEM, or RL_EIO with
// err "POST URL failed[ after N attempts]: why" (why: no connection, no whole reply in time, a
// malformed reply, or "HTTP 503: " and the start of the reply's body).
int rl_httpc_post(const rl_httpc_opts_t *o, const char *body, size_t len, rl_httpc_reply_t **out,
                  char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

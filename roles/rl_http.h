// rl_http — an OpenAI-compatible HTTP front of a model (docs/remote.md, "HTTP"): POST
// /v1/completions (the legacy text completions API: prompt, max_tokens, temperature, top_p, n,
// stop, seed, logprobs) and GET /v1/models, served by libmicrohttpd on one thread of its own. The
// model comes from a backend that lends it under its own lock for one request at a time: the
// policy a remote sampler is training with (`rlctl sampler serve --http`), or a finished model
// (`rlctl serve`).
//
// Completions are raw text in, raw text out (no chat template); a choice's text stops before the
// first stop string or stop token; `logprobs: k` (0..5) returns the sampled tokens, their
// logprobs (log_softmax(logits / T), T = 1 when temperature is 0: the convention of `rlctl
// logprobs`), and for each token the k most likely tokens with theirs plus the sampled one.
// Errors are OpenAI's error objects with the HTTP status: 400 (a bad request, naming the field;
// a request whose work, n x the sum over its prompts of (prompt tokens + max_tokens), is over
// max_work, naming the fields and the cap), 401 (a bearer token is configured and the request
// lacks it), 404, 405, 413 (a body over 1 MiB), 500 (a non-finite logprob: the model is broken,
// and a reply never leaves a value out), 503 (the backend has no model now: a sampler between
// runs).
#ifndef RL_HTTP_H
#define RL_HTTP_H

#include "rl_model.h"
#include "rl_tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_HTTP_MAX_WORK 65536 // default max_work, tokens

typedef struct {
    void *ctx;
    // Lends the model and tokenizer for one request: returns 0 with them set (the backend is
    // locked until release), or non-zero with why filled (then no release): the HTTP status 503.
    int (*acquire)(void *ctx, rl_model_t **model, rl_tokenizer_t **tok, char *why, size_t why_len);
    void (*release)(void *ctx);
    const char *model_name; // the id /v1/models lists and responses carry
} rl_http_backend_t;

typedef struct rl_http rl_http_t;

typedef struct {
    const char *addr;       // "HOST:PORT" (an IPv4 address or "localhost"; port 0 picks a free
                            // one, see rl_http_port)
    const char *token_file; // a file holding the bearer token every request must carry
                            // ("Authorization: Bearer <token>"), or NULL: then addr must be a
                            // loopback address (anyone who can reach another could use the model)
    int64_t max_work;       // the most tokens of work one completions request may ask for
                            // (n x the sum over its prompts of prompt tokens + max_tokens);
                            // 0: RL_HTTP_MAX_WORK
} rl_http_opts_t;

// Serves as opts says. backend is borrowed (must outlive the server). caller owns *out; free
// with rl_http_stop. Returns 0 or an error (a bad address, a token file that is missing or
// short, an address in use).
int rl_http_start(const rl_http_opts_t *opts, const rl_http_backend_t *backend, rl_http_t **out,
                  char *err, size_t err_len);
int rl_http_port(const rl_http_t *self);
void rl_http_stop(rl_http_t **self_p);

// How one completions call is bounded; all zero: the default cap, never cancelled.
typedef struct {
    int64_t max_work;         // as rl_http_opts_t's (0: RL_HTTP_MAX_WORK)
    int (*cancel)(void *arg); // NULL, or asked before every model step: non-zero stops the call
    void *cancel_arg;         // with status 499 (the client went away: nothing to answer)
} rl_http_call_t;

// One completions request body (JSON) against model/tok, without HTTP: *status (200, 400, 499
// when call->cancel stopped it, or 500) and the response body (JSON; caller owns *body_p; free
// with free()). call may be NULL (all zero). The server calls it; tests call it directly.
int rl_http_complete(rl_model_t *model, rl_tokenizer_t *tok, const char *model_name,
                     const rl_http_call_t *call, const char *body, size_t len, int *status,
                     char **body_p);

#ifdef __cplusplus
}
#endif
#endif

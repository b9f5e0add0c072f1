// rl_http — an OpenAI-compatible HTTP front of a model (docs/remote.md, "HTTP"): POST
// /v1/completions (the legacy text completions API: prompt, max_tokens, temperature, top_p, n,
// stop, seed, logprobs; vLLM's return_token_ids and ignore_eos), /v1/chat/completions and GET
// /v1/models, served by libmicrohttpd. The model comes from a backend that lends it under its
// own lock for one request at a time: the policy a remote sampler is training with (`rlctl
// sampler serve --http`), or a finished model (`rlctl serve`).
//
// Completions are raw text in, raw text out (no chat template); a choice's text stops before the
// first stop string or stop token; `logprobs: k` (0..5) returns the sampled tokens, their
// logprobs (log_softmax(logits / T), T = 1 when temperature is 0: the convention of `rlctl
// logprobs`), and for each token the k most likely tokens with theirs plus the sampled one.
// Errors are OpenAI's error objects with the HTTP status: 400 (a bad request, naming the field;
// a request whose work is over the cap, naming the fields and the cap), 401 (a bearer token is
// configured and the request lacks it), 404, 405, 413 (a body over 1 MiB), 429 (the client's or
// the server's queue of completions is full; with Retry-After), 500 (a non-finite logprob: the
// model is broken, and a reply never leaves a value out), 503 (the backend has no model now: a
// sampler between runs; or the server is stopping).
//
// Threads and limits, so that no client can hold the endpoint from the others:
//   - one I/O thread reads every request and answers all but completions at once; completions
//     wait in one FIFO queue for the generation thread, which runs them one at a time;
//   - a connection must send a request's head within RL_HTTP_HEAD_S seconds of connecting (or
//     of its previous response) and the body within RL_HTTP_BODY_S seconds after the head,
//     however slowly it trickles bytes; otherwise it is closed without a reply; a client that
//     stops reading its response is closed after RL_HTTP_IDLE_S seconds without progress;
//   - one client address holds at most RL_HTTP_CONNS_PER_CLIENT connections (more are closed at
//     once), all clients RL_HTTP_CONNS; one address has at most RL_HTTP_QUEUE_PER_CLIENT
//     completions waiting or running, and at most RL_HTTP_QUEUE wait in all (more: 429);
//   - one request's work, n x the sum over its prompts of (prompt tokens + max_tokens), is at
//     most max_work tokens (400 otherwise, before any generation);
//   - a client that disconnects while its completion waits or runs has it dropped: generation
//     stops before the next model step, and the model goes to the next request.
#ifndef RL_HTTP_H
#define RL_HTTP_H

#include "rl_model.h"
#include "rl_tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// the limits above, in seconds, connections and completions
#define RL_HTTP_HEAD_S 10
#define RL_HTTP_BODY_S 20
#define RL_HTTP_IDLE_S 30
#define RL_HTTP_CONNS_PER_CLIENT 16
#define RL_HTTP_CONNS 256
#define RL_HTTP_QUEUE_PER_CLIENT 4
#define RL_HTTP_QUEUE 16
#define RL_HTTP_MAX_WORK 65536 // default max_work, tokens

typedef struct {
    void *ctx;
    // Lends the model and tokenizer for one request (called on the server's generation thread,
    // which may wait here for the lock): returns 0 with them set (the backend is locked until
    // release), or non-zero with why filled (then no release): the HTTP status 503.
    int (*acquire)(void *ctx, rl_model_t **model, rl_tokenizer_t **tok, char *why, size_t why_len);
    void (*release)(void *ctx);
    const char *model_name; // the id /v1/models lists and responses carry
    const char *chat_template; // the model's chat template text (rl_chat_model_source), or
                               // NULL: chat completions need opts.chat_template
} rl_http_backend_t;

typedef struct rl_http rl_http_t;

typedef struct {
    const char *addr;       // "HOST:PORT" (an IPv4 address or "localhost"; port 0 picks a free
                            // one, see rl_http_port)
    const char *token_file; // a file holding the bearer token every request must carry
                            // ("Authorization: Bearer <token>"): ours and readable by us alone
                            // (mode 0600), as a secret key file; or NULL: then addr must be a
                            // loopback address (anyone who can reach another could use the model)
    int64_t max_work;       // the most tokens of work one completions request may ask for
                            // (n x the sum over its prompts of prompt tokens + max_tokens);
                            // 0: RL_HTTP_MAX_WORK
    const char *chat_template; // chat completions' template: a built-in's name (chatml, llama3),
                               // or NULL: the model's own (tokenizer_config.json's)
    const char *tool_parser;   // how tool calls are read back: "hermes" (NULL) or "llama3_json"
} rl_http_opts_t;

// Serves as opts says. backend is borrowed (must outlive the server). caller owns *out; free
// with rl_http_stop. Returns 0 or an error (a bad address, a token file that is missing, short,
// or readable by others, an address in use).
int rl_http_start(const rl_http_opts_t *opts, const rl_http_backend_t *backend, rl_http_t **out,
                  char *err, size_t err_len);
int rl_http_port(const rl_http_t *self);
// Stops: completions waiting are answered 503, the one running stops at its next model step,
// then every connection closes. A no-op on NULL.
void rl_http_stop(rl_http_t **self_p);

// How one completions call is bounded; all zero: the default cap, never cancelled.
typedef struct {
    int64_t max_work;         // as rl_http_opts_t's (0: RL_HTTP_MAX_WORK)
    int (*cancel)(void *arg); // NULL, or asked before every model step: non-zero stops the call
    void *cancel_arg;         // with status 499 (the client went away: nothing to answer)
    // NULL, or called on the generating thread after every token of every choice (choice j of
    // the reply, prompt-major): the first len bytes of text can no longer change (no stop string
    // will cut them, no later token will finish a character there); done: the choice is over and
    // text is its whole text, as the reply will carry it. text is borrowed for the call.
    void (*on_text)(void *arg, int choice, const char *text, size_t len, int done);
    void *text_arg;
    // Chat completions with stream: true: NULL (the events are the body, written once generation
    // is done), or where each server-sent event goes as it is made (the first once the first
    // token is drawn); a non-zero return stops the stream (the call then ends as cancelled).
    int (*write)(void *arg, const char *bytes, size_t len);
    void *write_arg;
} rl_http_call_t;

// One completions request body (JSON) against model/tok, without HTTP: *status (200, 400, 499
// when call->cancel stopped it, or 500) and the response body (JSON; caller owns *body_p; free
// with free()). call may be NULL (all zero). The server calls it; tests call it directly.
int rl_http_complete(rl_model_t *model, rl_tokenizer_t *tok, const char *model_name,
                     const rl_http_call_t *call, const char *body, size_t len, int *status,
                     char **body_p);

// The chat side of a model: its template and how its tool calls are written.
typedef struct {
    const char *template_text; // the Jinja chat template (the model's, or a built-in's text);
                               // NULL: chat completions are refused (400) naming the cure
    const char *template_name; // for messages ("tokenizer_config.json", "chatml")
    int tool_parser;           // rl_tool_parser_t (env/rl_toolcall.h): hermes, llama3_json
} rl_http_chat_t;

// One chat completions request body (POST /v1/chat/completions) against model/tok: the
// messages (and tools) rendered with the chat template (data.chat_template_kwargs' counterpart:
// chat_template_kwargs), generated as rl_http_complete generates, and answered in OpenAI's
// chat.completion shape: tool calls parsed back (finish_reason "tool_calls"), logprobs as
// {"content": [{token, logprob, bytes, top_logprobs}]}, and with return_token_ids (vLLM's) the
// prompt's and each choice's token ids. stream: true answers the same choices as server-sent
// events (chat.completion.chunk objects, then "data: [DONE]"): per choice a first chunk with the
// role, content deltas as the text grows (a running choice holds back what a stop string, an
// unfinished character or, with tools, a tool call or trailing spaces may yet change: the
// deltas always add up to the message's content), then its tool calls, then a last chunk with
// its finish reason, logprobs and token ids; then the usage chunk when asked. With call->write
// the events go there as they are made, and once the first went, *status is 200 and *body_p
// NULL whatever follows (an error after it is an event {"error": ...} that ends the stream), or
// 499 when call->cancel or call->write stopped it (*body_p then says why, for a log; nothing is
// to be sent); without call->write, the events are the body, *sse 1 (text/event-stream). As
// rl_http_complete otherwise. ignore_eos (vLLM's, as in completions) is taken by both.
int rl_http_chat(rl_model_t *model, rl_tokenizer_t *tok, const rl_http_chat_t *chat,
                 const char *model_name, const rl_http_call_t *call, const char *body, size_t len,
                 int *status, char **body_p, int *sse);

#ifdef __cplusplus
}
#endif
#endif

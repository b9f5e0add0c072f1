// rl_serve — `rlctl sampler serve`: a sampler on another host (DESIGN.md §2, docs/remote.md). It
// binds a ROUTER at a tcp:// endpoint as a CURVE server (rl_chan_bind_curve) whose allowlist
// holds the controllers' public keys, and serves one run at a time with the sampler role's verbs
// (rl_role_sampler: load_weights, generate), the messages of a local sampler:
//
//   attach     a controller opens a session: its session token, the fingerprint of its
//              model.path (rl_refcache_hash_model), which must be this sampler's --model; refused
//              while another controller's session is live ("busy")
//   configure  the run's resolved recipe; model.path is replaced by --model, files the sampler
//              does not read are not checked; --threads overrides the recipe's thread count
//   ...        load_weights, generate
//   shutdown   ends the session (not the process)
//
// Every request after attach must carry the session's token, and every reply carries it back
// (rl_proto_session_*): a request of another session is refused, and a reply can never be
// taken for one of another run. A session ends with shutdown, when its controller's connection
// closes (its process ended, or it sent no ZMTP heartbeat for 10 periods), or when its key
// leaves the allowlist; the sampler then drops the run's state and serves the next one.
// SIGHUP reloads the allowlist; when a key was removed the socket is rebound, which drops every
// connection (allowed controllers reconnect by themselves). SIGINT/SIGTERM end the process.
#ifndef RL_SERVE_H
#define RL_SERVE_H

#include "rl_config.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *bind;  // "tcp://HOST:PORT" (port 0: any free one, printed at start)
    const char *key;   // this sampler's secret key file (rlctl keygen)
    const char *allow; // the controllers' public keys: a file, one per line, or a folder
    const char *model; // the model folder it serves; NULL: each run's own, received over the
                       // protocol (model_file) and checked by fingerprint
    const char *cache; // without model: where received models are kept (NULL: a fresh folder
                       // removed at exit)
    int threads;       // compute threads (0: every core); of each sampler with samplers > 1
    int samplers;      // > 1: this many sampler worker processes of its own over ipc, which
                       // split each generate request; the weights cross the network once
    const char *logs;  // samplers > 1: the folder of their logs (NULL: a fresh one in $TMPDIR)
    double heartbeat;  // ZMTP heartbeat period in seconds (a peer silent 10 periods is gone)
    int64_t max_frame; // the largest frame accepted (0: the decoder's cap)
    int sessions;      // > 0: exit after this many sessions (tests); 0: serve until signalled
    const char *http;  // "HOST:PORT": also answer OpenAI-compatible completions with the
                       // policy of the run being served (rl_http.h); NULL: no HTTP
    const char *http_token; // bearer token file (required unless http is a loopback address)
    int http_max_work;      // the most tokens of work one HTTP request may ask for (0: the
                            // default, RL_HTTP_MAX_WORK)
    const rl_recipe_algos_t *algos; // the algorithms an attached run's recipe is loaded with
                                    // (the caller's: rl_algos())
} rl_serve_opts_t;

// With opts->http, completions are answered from the session's model (503 between runs) under
// the lock the protocol loop holds while it serves a request.
//
// Serves until SIGINT/SIGTERM (returns 0) or a fatal error at start (a key, the allowlist, the
// model or the endpoint; returns non-zero after logging it). Prints one line to stdout when it
// listens: "listening on tcp://HOST:PORT", so a script can find a port 0 endpoint.
int rl_serve_main(const rl_serve_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif

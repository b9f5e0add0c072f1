// rl_episode — multi-turn episodes over an environment, token-in-token-out (docs/envs.md,
// "Episodes"): reset gives each episode its first messages and tools; then, turn by turn, the
// policy samples a continuation of the episode's tokens, its text is read for tool calls, the
// environment steps, and the tokens the chat template writes for the environment's answer are
// appended (rl_turns), until the environment says done or a limit ends the episode. The policy's
// tokens are masked in (the loss covers them), the prompt's and the environment's are context.
// The sampler and the environment are callbacks: the rollout gives the run's samplers and
// environment workers; tests give scripted ones. Not the transport of either.
#ifndef RL_EPISODE_H
#define RL_EPISODE_H

#include "rl_chat.h"
#include "rl_tokenizer.h"
#include "rl_toolcall.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int max_turns;  // env.max_turns: policy turns per episode (>= 1)
    int max_tokens; // env.max_tokens: tokens after the first prompt (policy's and environment's)
    int max_new;    // sampling.max_new_tokens: the most tokens of one policy turn
    rl_tool_parser_t parser;
    rl_chat_format_t fmt;
    rl_tokenizer_t *tok;
    const char *eos; // the end-of-turn token's text (the sampler's stop)
    int drop;        // env.on_error drop: an environment's failure on an episode (a bad item, a
                     // failed request, answers the template cannot write) drops the episodes
                     // concerned (dropped, error) and the others go on; 0: the run's error
} rl_episode_opts_t;

typedef struct {
    char id[48]; // the episode's id in the protocol
    json_t *row; // its dataset row (borrowed)
    uint64_t seed;
    // the sequence: prompt, then turns; mask 1 = the policy's token
    int32_t *ids;
    uint8_t *mask;
    float *logp; // the sampler's logprob of each policy token (0 elsewhere)
    int n, cap, prompt_len;
    int *turn_start; // where each policy turn starts in ids
    double *turn_reward; // the environment's step reward after each turn (0: not stepped)
    int n_turns;
    json_t *messages;  // the conversation (the environment's and the policy's as parsed)
    json_t *tools;     // reset's tools, or NULL
    double env_reward; // the sum of the environment's step rewards
    int done;          // the environment said done
    int truncated;     // a limit ended it first (max_turns, max_tokens, a turn cut by max_new)
    int tool_calls, parse_errors;
    int n_first; // messages reset gave (the first prompt's); the rest follow it
    int dropped; // opts.drop: the environment failed it (error says how); not trained on
    char error[320];
} rl_episode_t;

// One policy turn for each active episode: continue eps[k]'s tokens (ids[0..n)) with at most
// max_new[k] tokens. The callback fills out[k]: the sampled ids (malloc'ed, taken), their
// logprobs (malloc'ed, taken; may be NULL), and ended = 1 when the turn ended with the end-of-turn
// token (included in ids). Returns 0 or an error with err filled.
typedef struct {
    int32_t *ids;
    float *logp;
    int n;
    int ended;
} rl_episode_turn_t;
typedef int (*rl_episode_generate_fn)(void *ctx, rl_episode_t *const *eps, int n,
                                      const int *max_new, rl_episode_turn_t *out, char *err,
                                      size_t err_len);
// One request line to the environment, one reply line back (*reply malloc'ed, taken). Returns 0
// or an error with err filled (a dead or hung environment).
typedef int (*rl_episode_env_fn)(void *ctx, const char *request, char **reply, char *err,
                                 size_t err_len);

// Sets up n episodes (ids "<prefix><k>", rows and seeds given); rl_episodes_free frees them.
void rl_episodes_init(rl_episode_t *eps, int n, const char *prefix, json_t *const *rows,
                      const uint64_t *seeds);
void rl_episodes_free(rl_episode_t *eps, int n);

// Runs the n episodes to their ends: reset, turns, close. Returns 0, or the first error (err
// names the episode where one is to blame: an environment's bad reply, a template that cannot
// write a turn) after which the episodes are left as they are (close is still sent).
int rl_episodes_run(rl_episode_t *eps, int n, const rl_episode_opts_t *o,
                    rl_episode_generate_fn generate, void *gen_ctx, rl_episode_env_fn env,
                    void *env_ctx, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

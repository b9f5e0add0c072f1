// rl_sampler — the sampler engine: N completions per prompt from an rl_model, with one prefill
// per prompt shared by its N samples (the prompt's KV cache slot is copied N-1 times) and a
// batched decode in which every active sequence advances one token per rl_model_step call, each
// at its own length. Sequences that finish free their slot for the next prompt.
//
// Per token it reports log_softmax(logits / T)[token] over the full vocabulary (DESIGN.md §4; the
// kernels and the greedy convention are in rl_sample.h), so its logprobs equal what
// rl_model_forward gives for the same prompt + completion at the same temperature.
//
// Determinism: sample s of prompt p draws from its own RNG stream, seeded from (seed, the
// prompt's `index`, s), one uniform per token. The result for (index, s) therefore does not
// depend on which other prompts share the call, on the order of prompts, or on how many slots
// run at once, only on the logits (which can differ in the last bits between batch shapes; see
// docs/sampling.md). Same seed, same prompts, same thread count: same output.
//
// Stop tokens: a sample ends with finish "stop" at the first token in the stop set (the model
// config's eos ids, unless turned off, plus the request's stop ids); that token IS included in
// the completion ids and logprobs (the trainer must learn to emit it); text for rewards omits it.
// Otherwise it ends with "length" after max_new_tokens tokens.
//
// This module does no tokenization and knows nothing about processes or rewards.
#ifndef RL_SAMPLER_H
#define RL_SAMPLER_H

#include "rl_model.h"
#include "rl_sample.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RL_SAMPLER_FINISH_STOP = 0,   // a stop token was drawn (it is the last id)
    RL_SAMPLER_FINISH_LENGTH = 1, // max_new_tokens reached
} rl_sampler_finish_t;

// "stop" or "length". borrowed; valid until program exit.
const char *rl_sampler_finish_name(rl_sampler_finish_t finish);

// The KV cache slots of a call whose max_batch is 0.
#define RL_SAMPLER_MAX_BATCH_DEFAULT 64

typedef struct {
    int prompt;      // position in the prompts array of the call
    int sample;      // 0..n-1
    int n_ids;       // completion length (>= 1)
    int32_t *ids;    // (n_ids) completion token ids, the stop token included
    float *logprobs; // (n_ids) log_softmax(logits / T)[id], T = 1 when greedy
    rl_sampler_finish_t finish;
} rl_sampler_result_t;

typedef struct {
    rl_sample_opts_t sample; // temperature (0 = greedy), top_k, top_p
    int n;                   // samples per prompt (>= 1)
    int max_new_tokens;      // >= 1
    uint64_t seed;
    const int32_t *stop_ids; // extra stop ids (borrowed for the call), n_stop of them
    int n_stop;
    int no_eos;              // 1: the config's eos ids do not stop (only stop_ids do)
    int max_batch;           // most sequences decoded at once (KV cache slots); 0 =
                             // RL_SAMPLER_MAX_BATCH_DEFAULT
    int (*cancel)(void *arg); // NULL, or asked before every rl_model_step: non-zero stops the
    void *cancel_arg;         // call (RL_ECANCELED); it never changes what is computed
    // Sessions (an episode's turns): (n_prompts) keys or NULL. Sample s of prompt p is kept
    // under key sessions[p] + s when it ends (its prompt and completion, and their KV cache but
    // for the last token); prompt p whose key sessions[p] holds a kept sequence that is a prefix
    // of it prefills only the rest. 0: none. A call keeps only the sessions it names (looked up
    // or kept); rl_sampler_sessions_clear drops them all (new weights).
    const uint64_t *sessions;
    // NULL, or called on the calling thread after every token a sequence draws (a stream of the
    // text as it is generated): result (prompt-major, as *results_p will be) so far, its last id
    // the new one, and done 1 when that token ended it (result->finish is set then). It may
    // only read result; it never changes what is computed.
    void (*on_token)(void *arg, const rl_sampler_result_t *result, int done);
    void *on_token_arg;
} rl_sampler_params_t;

// Defaults: rl_sample_opts_default, n 1, max_new_tokens 256, seed 0, no extra stop ids, eos
// ids stop, max_batch 0 (64), no cancel, no on_token.
void rl_sampler_params_default(rl_sampler_params_t *params);

typedef struct {
    const int32_t *ids; // the prompt's token ids (borrowed for the call), len >= 1 of them
    int len;
    uint64_t index;     // identity of the prompt for the RNG streams (e.g. its dataset row)
} rl_sampler_prompt_t;

typedef struct rl_sampler rl_sampler_t;

// A sampler over `model` (borrowed; must outlive the sampler). The KV cache is sized per
// call. caller owns result; free with rl_sampler_destroy. NULL on allocation failure.
rl_sampler_t *rl_sampler_new(rl_model_t *model);
void rl_sampler_destroy(rl_sampler_t **self_p);

// Longest prompt + max_new_tokens the model takes (its max_position_embeddings).
int rl_sampler_context(const rl_sampler_t *self);

// Samples params->n completions for each of n_prompts prompts. On success returns 0 and sets
// *results_p to n_prompts * n results, prompt-major (result p*n + s is sample s of prompt p).
// Returns RL_EINVAL (bad params; an empty prompt; a token id outside the vocabulary; a prompt
// whose len + max_new_tokens exceeds the context, the message naming the prompt and the
// numbers), RL_ENOMEM, RL_ECANCELED (params->cancel said so; no results), or an error of
// rl_model_step; the message is in rl_sampler_errmsg.
// caller owns *results_p; free with rl_sampler_results_free.
int rl_sampler_generate(rl_sampler_t *self, const rl_sampler_prompt_t *prompts, int n_prompts,
                        const rl_sampler_params_t *params, rl_sampler_result_t **results_p);

// Frees n results and their arrays; sets *results_p to NULL; a no-op on NULL.
void rl_sampler_results_free(rl_sampler_result_t **results_p, int n);

// Token counts of the last successful call: prompt tokens prefilled, tokens decoded, and the
// number of rl_model_step calls (prefill + decode).
typedef struct {
    int64_t prefill_tokens, decode_tokens, steps;
    int64_t reused_tokens; // prompt tokens a session's kept cache spared (not in prefill_tokens)
} rl_sampler_stats_t;
void rl_sampler_stats(const rl_sampler_t *self, rl_sampler_stats_t *out);

// Drops every kept session (their ids and cache): the weights changed, so their cache is stale.
void rl_sampler_sessions_clear(rl_sampler_t *self);

// Message of the last failed call. borrowed; valid until the next call on this handle.
const char *rl_sampler_errmsg(const rl_sampler_t *self);

#ifdef __cplusplus
}
#endif
#endif

// rl_turns — token-in-token-out episodes (docs/envs.md, "Episodes"): the policy's sampled tokens
// are never re-tokenized. An episode's sequence is the first prompt's tokens, then for each turn
// the tokens the policy sampled, then the tokens the model's own chat template writes for the
// environment's answer: the text the template adds after the policy's turn for the new messages,
// with the generation prompt. That text is found by rendering the conversation with the policy's
// last message's content replaced by a sentinel: it is what follows the first end-of-turn token
// (the sampler's stop, e.g. <|im_end|>) after the sentinel, the token included when the sampled
// turn did not end with it (cut by the token limit). Earlier turns are never rendered again, so a
// template that rewrites them (Qwen3 drops earlier <think> blocks once a new user message comes)
// does not change the tokens the sampler saw: the sequence trained is the one sampled.
#ifndef RL_TURNS_H
#define RL_TURNS_H

#include "rl_chat.h"
#include "rl_tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The sentinel: no template or message holds these bytes.
#define RL_TURNS_SENTINEL "\x01rlctl:turn\x01"

// The first prompt's tokens: messages (a JSON array's text) and tools (a JSON array's text, or
// NULL) rendered with the generation prompt and encoded (no special tokens added: the template
// writes them). Returns 0 and *ids_p (caller frees), or RL_EINVAL / RL_ENOMEM with err set.
int rl_turns_prompt(rl_chat_format_t fmt, rl_tokenizer_t *tok, const char *messages_json,
                    const char *tools_json, int32_t **ids_p, size_t *n_p, char *err,
                    size_t err_len);

// The tokens after the policy's turn. history_json: the conversation through the policy's turn
// (its last message is the assistant's, as parsed: content and tool_calls); env_json: the
// environment's messages; eos: the end-of-turn token's text; ended: the sampled turn ended with
// it. Returns 0 and *ids_p (caller frees), RL_EINVAL when the template does not write the
// assistant's content as given or ends no assistant turn with eos after it (err says which), or
// RL_ENOMEM. *text_p (may be NULL) gets the text the ids encode (caller frees).
int rl_turns_after(rl_chat_format_t fmt, rl_tokenizer_t *tok, const char *history_json,
                   const char *env_json, const char *tools_json, const char *eos, int ended,
                   int32_t **ids_p, size_t *n_p, char **text_p, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

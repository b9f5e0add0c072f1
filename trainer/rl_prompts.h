// rl_prompts — the prompt dataset of an RL run (REFERENCE.md §6: TRL's GRPO rows, {"prompt": ...}
// plus any other fields, which the rewards receive as the row's JSON text). A prompt is a string,
// encoded without special tokens, or a list of chat messages ({"role", "content"}) rendered with
// the model's chat template and the assistant header (add_generation_prompt), as TRL does for
// conversational prompts. A prompt longer than max_prompt_length tokens is an error naming
// file:line, or is dropped and counted (truncation policy). The order of the prompts is
// rl_data's: a seeded permutation per epoch, restorable from (epoch, index).
#ifndef RL_PROMPTS_H
#define RL_PROMPTS_H

#include "rl_chat.h"
#include "rl_tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const int32_t *ids; // (len) prompt token ids
    int len;
    const char *text;   // the prompt as the model sees it (after the chat template)
    size_t text_len;
    const char *row;    // the whole JSONL row, as written in the file (JSON text, without its
                        // "\r\n"); rl_jsonl_row_field_text reads a field of it
    size_t row_len;
    int line;           // 1-based line in the file
    const char *file;   // the file the row is from (of a list or a folder; borrowed; valid
                        // until rl_prompts_destroy)
} rl_prompt_t;

typedef struct rl_prompts rl_prompts_t;

// Reads paths[0..n_paths) (files or folders, one after another) through rl_jsonl (blank lines
// skipped, CRLF read as LF, lines of at most RL_JSONL_MAX_LINE bytes). field: the prompt's key;
// chat: how message lists render (RL_CHAT_NONE refuses them); truncation: RL_DATA_TRUNC_ERROR or
// _DROP (rl_data.h values). Errors name path:line: bad JSON, a row that is not an object, a missing
// prompt field
// ("path:3: no field 'prompt' (data.prompt_field)"), an empty prompt, an over-long prompt under
// policy error, a file with no prompt. caller owns result; free with rl_prompts_destroy. NULL on
// error (err filled).
rl_prompts_t *rl_prompts_load(const char *const *paths, int n_paths, const char *field,
                              rl_tokenizer_t *tok, rl_chat_format_t chat, int max_prompt_length,
                              int truncation, char *err, size_t err_len);
void rl_prompts_destroy(rl_prompts_t **self_p);
size_t rl_prompts_count(const rl_prompts_t *self);
size_t rl_prompts_dropped(const rl_prompts_t *self);
// Prompt i (< count). borrowed; valid until destroy.
const rl_prompt_t *rl_prompts_get(const rl_prompts_t *self, size_t i);

#ifdef __cplusplus
}
#endif
#endif

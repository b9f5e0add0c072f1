// rl_chat — renders conversational rows ({"messages": [{"role", "content"}, ...]}) into the
// prompt text of a chat model, in one of two fixed formats:
//   ChatML (Qwen):  <|im_start|>{role}\n{content}<|im_end|>\n ...  [<|im_start|>assistant\n]
//   Llama-3:        <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}
//                   <|eot_id|> ...  [<|start_header_id|>assistant<|end_header_id|>\n\n]
// The format is detected from tokenizer_config.json's chat_template. It is not a Jinja engine:
// templates that are neither are refused, and the differences from the real templates (Qwen3's
// <think> block on a final assistant turn, Llama-3's content trimming) are listed in
// docs/tokenizer.md. The text it returns is then encoded with rl_tokenizer (special tokens in it
// are split out as added tokens).
#ifndef RL_CHAT_H
#define RL_CHAT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RL_CHAT_NONE = 0,
    RL_CHAT_CHATML = 1,
    RL_CHAT_LLAMA3 = 2,
} rl_chat_format_t;

typedef struct {
    const char *role;    // "system", "user", "assistant", "tool", ...
    const char *content; // UTF-8 text
} rl_chat_msg_t;

// Detects the format of a chat_template (contains <|im_start|> -> ChatML, <|start_header_id|>
// -> Llama-3). Returns 0 and sets *fmt_p, or RL_EUNSUPPORTED (other template; err describes
// it) or RL_EINVAL (template is NULL).
int rl_chat_detect(const char *chat_template, rl_chat_format_t *fmt_p, char *err,
                   size_t err_len);

// Parses a format name ("chatml", "llama3"). Returns 0 or RL_EINVAL (err lists the names).
int rl_chat_format_parse(const char *name, rl_chat_format_t *fmt_p, char *err, size_t err_len);

// "chatml", "llama3" or "none". borrowed; valid until program exit.
const char *rl_chat_format_name(rl_chat_format_t fmt);

// Renders n messages; add_generation_prompt appends the assistant header. Returns 0 and a
// NUL-terminated *text_p (*len_p bytes without the NUL), RL_EINVAL (a NULL role or content, or
// fmt is RL_CHAT_NONE) or RL_ENOMEM.
// caller owns *text_p; free with free().
int rl_chat_render(rl_chat_format_t fmt, const rl_chat_msg_t *msgs, size_t n,
                   int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                   size_t err_len);

// As rl_chat_render, from JSON text: a row {"messages": [...]} or the bare [...] list, each item
// {"role": string, "content": string}. Returns RL_EINVAL with the offending item in err.
// caller owns *text_p; free with free().
int rl_chat_render_json(rl_chat_format_t fmt, const char *json, size_t json_len,
                        int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                        size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

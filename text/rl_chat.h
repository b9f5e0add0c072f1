// rl_chat — renders conversations into a chat model's prompt text with the model's own Jinja
// chat template (tokenizer_config.json's `chat_template`, or chat_template.jinja), exactly as
// transformers' apply_chat_template does (text/rl_jinja: the engine; docs/templates.md), or
// with one of the built-in templates (`chatml`, `llama3`: template texts of our own, rendered by
// the same engine). The context a template sees: `messages` (as given: role, content, and any
// other field such as tool_calls or reasoning_content), `tools` when given,
// `add_generation_prompt`, the tokenizer's `bos_token` and `eos_token`, and the keyword
// arguments of the recipe (`data.chat_template_kwargs`, e.g. Qwen3's enable_thinking). The text it
// returns is then encoded with rl_tokenizer (special tokens in it are split out as added tokens).
//
// A chat format is a compiled template, shared and kept for the life of the process (compiled
// once per distinct template, tokens and keyword arguments); RL_CHAT_NONE (NULL) is no template.
#ifndef RL_CHAT_H
#define RL_CHAT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_chat rl_chat_t;
typedef const rl_chat_t *rl_chat_format_t; // borrowed; valid until program exit

#define RL_CHAT_NONE ((rl_chat_format_t)0)
#define RL_CHAT_CHATML (rl_chat_builtin("chatml"))
#define RL_CHAT_LLAMA3 (rl_chat_builtin("llama3"))

typedef struct {
    const char *role;    // "system", "user", "assistant", "tool", ...
    const char *content; // UTF-8 text
} rl_chat_msg_t;

// A built-in template by name ("chatml", "llama3"), or RL_CHAT_NONE for any other name (and
// when out of memory). Built-ins see no bos_token/eos_token of a tokenizer (they write their own).
rl_chat_format_t rl_chat_builtin(const char *name);

// The template text of a built-in ("chatml", "llama3"), or NULL. borrowed; static.
const char *rl_chat_builtin_text(const char *name);

// Compiles a model's template: text (UTF-8), `name` for messages (e.g. the file it came from),
// the tokenizer's bos and eos token text (NULL: undefined in the template) and the keyword
// arguments as a JSON object's text (NULL or "{}": none; its keys become template variables).
// Returns 0 with *fmt_p, RL_EINVAL (a syntax error: err names name:line:col), RL_EUNSUPPORTED
// (a construct outside the engine's subset) or RL_ENOMEM.
int rl_chat_template(const char *text, const char *name, const char *bos, const char *eos,
                     const char *kwargs_json, rl_chat_format_t *fmt_p, char *err, size_t err_len);

// Compiles tokenizer_config.json's chat_template (chat_template may be NULL: then RL_EINVAL,
// "no chat_template ...: name a built-in (chatml, llama3)"). As rl_chat_template with no tokens
// and no keyword arguments.
int rl_chat_detect(const char *chat_template, rl_chat_format_t *fmt_p, char *err,
                   size_t err_len);

// The model's own chat template, found the one way every algorithm and command finds it:
// tokenizer_config.json's `chat_template` (a string, or the list of {"name", "template"} that
// newer models write: the one named "default"), else chat_template.jinja in the same folder.
typedef struct {
    char *text;       // the template text, or NULL when the folder has none
    char where[4400]; // "DIR/tokenizer_config.json chat_template", "DIR/chat_template.jinja"
    char *bos, *eos;  // tokenizer_config.json's bos_token and eos_token text, or NULL
} rl_chat_source_t;

// Reads the template of the model folder `dir` (its tokenizer_config.json; `config`, when not
// NULL, names another tokenizer_config.json to read instead, and dir may then be NULL). A
// missing tokenizer_config.json is no error. Returns 0 (src->text NULL when there is none), or
// RL_EINVAL (tokenizer_config.json is not a JSON object: err names file:line:column), RL_EIO or
// RL_ENOMEM. Free with rl_chat_source_free (also after an error).
int rl_chat_model_source(const char *dir, const char *config, rl_chat_source_t *src, char *err,
                         size_t err_len);
void rl_chat_source_free(rl_chat_source_t *src);

// rl_chat_model_source compiled with its bos/eos and the keyword arguments (as
// rl_chat_template). RL_EINVAL when the folder has no template ("DIR has no chat template (no
// chat_template in tokenizer_config.json, no chat_template.jinja)").
int rl_chat_model_format(const char *dir, const char *config, const char *kwargs_json,
                         rl_chat_format_t *fmt_p, char *err, size_t err_len);

// Parses a built-in's name ("chatml", "llama3"). Returns 0 or RL_EINVAL (err lists the names).
int rl_chat_format_parse(const char *name, rl_chat_format_t *fmt_p, char *err, size_t err_len);

// "chatml", "llama3", the model template's name, or "none". borrowed; valid until program exit.
const char *rl_chat_format_name(rl_chat_format_t fmt);

// Renders n messages; add_generation_prompt appends the assistant header. Returns 0 and a
// NUL-terminated *text_p (*len_p bytes without the NUL), RL_EINVAL (a NULL role or content, fmt
// is RL_CHAT_NONE, or the template raised an error: err says which and where) or RL_ENOMEM.
// caller owns *text_p; free with free().
int rl_chat_render(rl_chat_format_t fmt, const rl_chat_msg_t *msgs, size_t n,
                   int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                   size_t err_len);

// As rl_chat_render, from JSON text: a row {"messages": [...], "tools": [...]?} (other fields
// ignored) or the bare [...] list; each message an object with a string "role" and, unless it
// carries tool_calls, a string "content"; every other field reaches the template as given.
// Returns RL_EINVAL with the offending item in err. caller owns *text_p; free with free().
int rl_chat_render_json(rl_chat_format_t fmt, const char *json, size_t json_len,
                        int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                        size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

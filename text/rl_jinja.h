// rl_jinja — a Jinja template engine for Hugging Face chat templates. It renders the
// `chat_template` of tokenizer_config.json (or chat_template.jinja) as transformers'
// apply_chat_template does: a sandboxed jinja2 environment with trim_blocks and lstrip_blocks on,
// the loop-controls extension (break/continue), a `tojson` filter that keeps non-ASCII text
// (ensure_ascii=False, keys in their order), and the globals raise_exception(msg) and
// strftime_now(fmt). Values print as Python's str() prints them; arithmetic, truthiness and
// undefined variables follow Python and jinja2's default Undefined.
//
// It is not a general Jinja: there is no loader (include/import/extends/block are refused), no
// autoescaping, no call blocks and no recursive loops. Whatever falls outside the supported
// subset (docs/templates.md) fails at compile or render time with an error that names the
// template, line and column; it never renders something jinja2 would render differently on
// purpose. Templates come from model folders (untrusted input): parsing depth, evaluation depth,
// work, memory and output size are all bounded.
#ifndef RL_JINJA_H
#define RL_JINJA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_jinja rl_jinja_t;

// Limits and clock of one render. Zero fields take the defaults below.
typedef struct {
    size_t max_output;  // bytes of rendered text (default RL_JINJA_MAX_OUTPUT)
    size_t max_memory;  // bytes of working memory for values (default RL_JINJA_MAX_MEMORY)
    uint64_t max_steps; // evaluation steps, a bound on time (default RL_JINJA_MAX_STEPS)
    int max_depth;      // nesting of evaluation: expressions, blocks, macro calls
                        // (default RL_JINJA_MAX_DEPTH)
    int fixed_now;      // 1: strftime_now() formats `now` (seconds since the epoch, in UTC) so
                        // renders are reproducible; 0: the current local time, as transformers
    int64_t now;        // used when fixed_now is 1
} rl_jinja_opts_t;

#define RL_JINJA_MAX_OUTPUT ((size_t)64 << 20)
#define RL_JINJA_MAX_MEMORY ((size_t)1 << 30)
#define RL_JINJA_MAX_STEPS ((uint64_t)200000000)
#define RL_JINJA_MAX_DEPTH 400
// Nesting of the source itself (parentheses, blocks) that the parser accepts.
#define RL_JINJA_MAX_PARSE_DEPTH 200

// Compiles template text src[0..len) (UTF-8; need not be NUL-terminated). `name` labels error
// messages, e.g. "tokenizer_config.json chat_template" (copied; NULL reads "template"). Unknown
// filters and tests are compile errors, as in jinja2. Returns 0 and sets *out, RL_EINVAL (syntax
// error or invalid UTF-8: err reads "<name>:<line>:<col>: <what>"), RL_EUNSUPPORTED (a jinja2
// construct outside the subset, e.g. {% include %}; err names it and where) or RL_ENOMEM.
// caller owns *out; free with rl_jinja_free().
int rl_jinja_compile(const char *src, size_t len, const char *name, rl_jinja_t **out, char *err,
                     size_t err_len);

// Renders t with the variables of ctx (a JSON object: each key is a template variable, e.g.
// "messages", "tools", "add_generation_prompt", "bos_token", "enable_thinking"; NULL = none) and
// default options. *out is NUL-terminated; *out_len is its length in bytes without the NUL (the
// text may hold NUL bytes that came from ctx). Returns 0, RL_EINVAL (a runtime error, e.g. a
// type error or an undefined value used where jinja2 raises; or the template called
// raise_exception(msg): err then reads "<name>:<line>:<col>: raise_exception: <msg>"; or a limit
// was reached), RL_EUNSUPPORTED (a value or call outside the subset) or RL_ENOMEM. ctx is only
// read; t may be rendered from several threads at once.
// caller owns *out; free with free().
int rl_jinja_render(const rl_jinja_t *t, const json_t *ctx, char **out, size_t *out_len, char *err,
                    size_t err_len);

// As rl_jinja_render with explicit limits and clock; opts NULL means the defaults.
// caller owns *out; free with free().
int rl_jinja_render_opts(const rl_jinja_t *t, const json_t *ctx, const rl_jinja_opts_t *opts,
                         char **out, size_t *out_len, char *err, size_t err_len);

// The label given to rl_jinja_compile. borrowed; valid until rl_jinja_free(t).
const char *rl_jinja_name(const rl_jinja_t *t);

// Frees a compiled template and sets *t to NULL; a no-op when *t is NULL.
void rl_jinja_free(rl_jinja_t **t);

// The message a template passed to raise_exception(), from an err text that
// rl_jinja_render wrote; NULL when err is not such an error. borrowed; valid while err is.
const char *rl_jinja_raised_message(const char *err);

#ifdef __cplusplus
}
#endif
#endif

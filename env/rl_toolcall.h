// rl_toolcall — tool calls taken out of a policy's sampled text, in the model's own format
// (env.tool_parser), as OpenAI's message shape wants them: an id, a function name and its
// arguments as JSON text. The rules (docs/envs.md, "Tool calls"):
//   hermes (Qwen2.5, Qwen3, Hermes): each `<tool_call>BODY</tool_call>` whose BODY is a JSON
//     object with a non-empty string "name" and an object "arguments" (absent: {}) is a call and
//     leaves the content; a block whose body is anything else, or a `<tool_call>` never closed,
//     stays in the content as written and counts as a parse error.
//   llama3_json (Llama 3.1+ JSON tool calling): a text that starts (after an optional
//     `<|python_tag|>`) with `{` is one or more JSON objects separated by `;`, each with a
//     non-empty string "name" and an object "parameters" (or "arguments"); when every one is,
//     they are the calls and the content is empty, else there is no call, the text is the
//     content and it counts as one parse error. A text that does not start with `{` is content.
// The content is what is left, spaces and newlines around it removed. Calls are numbered in the
// episode: ids "call_<n>" from first_id. Arguments are re-encoded compactly, keys in their order,
// non-ASCII as UTF-8. Malformed input is never an error of the function: it is content.
#ifndef RL_TOOLCALL_H
#define RL_TOOLCALL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RL_TOOL_PARSER_HERMES, RL_TOOL_PARSER_LLAMA3_JSON } rl_tool_parser_t;

// "hermes" or "llama3_json" -> *out. Returns 0, or RL_EINVAL (unknown name).
int rl_tool_parser_find(const char *name, rl_tool_parser_t *out);
// The names, "hermes, llama3_json", for messages.
const char *rl_tool_parser_names(void);

typedef struct {
    char *id;        // "call_<n>"
    char *name;      // the function's name
    char *arguments; // a JSON object's text
} rl_tool_call_t;

typedef struct {
    char *content; // the text without its calls, trimmed (never NULL after a parse;
                   // NUL-terminated, and content_len long: a NUL byte of the text stays)
    size_t content_len;
    rl_tool_call_t *calls;
    int n_calls;
    int parse_errors; // what looked like a call and did not parse (left in the content)
} rl_tool_parse_t;

// Parses the len bytes of text (UTF-8 or not; NUL bytes are content). Returns 0 with *out
// filled (caller frees with rl_tool_parse_free), or RL_ENOMEM.
int rl_tool_parse(rl_tool_parser_t parser, const char *text, size_t len, int first_id,
                  rl_tool_parse_t *out);
void rl_tool_parse_free(rl_tool_parse_t *p);

#ifdef __cplusplus
}
#endif
#endif

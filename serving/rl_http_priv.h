// rl_http_priv — what serving/rl_http.c shares with rl_http_chat.c, and nothing else sees.
#ifndef RL_HTTP_PRIV_H
#define RL_HTTP_PRIV_H

#include <stdarg.h>
#include <stddef.h>

// An OpenAI error object ({"error": {"message", "type", "param", "code"}}) into *body_p (caller
// frees; NULL when out of memory); returns status.
int rl_http_errorv(int status, const char *type, const char *param, char **body_p, const char *fmt,
                   va_list ap) __attribute__((format(printf, 5, 0)));

// Content bytes [start, end) of the first n bytes of a streamed choice's text that its message's
// content will begin with, however the text goes on: all of them without tools (tools 0); with
// tools, those before anything a call may take (parser: rl_tool_parser_t) and without the spaces
// the parser trims (rl_toolcall.h). A stream sends them as deltas while the choice runs.
void rl_http_visible(const char *t, size_t n, int tools, int parser, size_t *start, size_t *end);

#endif

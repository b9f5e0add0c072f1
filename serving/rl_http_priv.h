// rl_http_priv — what serving/rl_http.c shares with rl_http_chat.c, and nothing else sees.
#ifndef RL_HTTP_PRIV_H
#define RL_HTTP_PRIV_H

#include <stdarg.h>

// An OpenAI error object ({"error": {"message", "type", "param", "code"}}) into *body_p (caller
// frees; NULL when out of memory); returns status.
int rl_http_errorv(int status, const char *type, const char *param, char **body_p, const char *fmt,
                   va_list ap) __attribute__((format(printf, 5, 0)));

#endif

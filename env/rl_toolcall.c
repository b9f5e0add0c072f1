// rl_toolcall — the hermes and llama3_json tool-call formats (rl_toolcall.h) over jansson.
#include "rl_toolcall.h"

#include "rl_err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_OPEN "<tool_call>"
#define S_CLOSE "</tool_call>"
#define S_PYTAG "<|python_tag|>"

int rl_tool_parser_find(const char *name, rl_tool_parser_t *out) {
    if (name && strcmp(name, "hermes") == 0) {
        *out = RL_TOOL_PARSER_HERMES;
        return 0;
    }
    if (name && strcmp(name, "llama3_json") == 0) {
        *out = RL_TOOL_PARSER_LLAMA3_JSON;
        return 0;
    }
    return RL_EINVAL;
}

const char *rl_tool_parser_names(void) { return "hermes, llama3_json"; }

// The first occurrence of needle in the n bytes at hay (NUL bytes included), or NULL.
static const char *s_find(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i + k <= n; i++) {
        if (hay[i] == needle[0] && memcmp(hay + i, needle, k) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

static int s_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// A growing byte buffer.
typedef struct {
    char *p;
    size_t n, cap;
} s_buf_t;

static int s_put(s_buf_t *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            return RL_ENOMEM;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

// out->content = the buffer's text, trimmed
static int s_set_content(rl_tool_parse_t *out, const char *s, size_t n) {
    while (n > 0 && s_space(s[0])) {
        s++;
        n--;
    }
    while (n > 0 && s_space(s[n - 1])) {
        n--;
    }
    out->content = malloc(n + 1);
    if (!out->content) {
        return RL_ENOMEM;
    }
    memcpy(out->content, s, n);
    out->content[n] = '\0';
    out->content_len = n;
    return 0;
}

// A call's object: a non-empty string "name" and an object args_key (or alt_key; absent allowed
// when allow_absent). Returns 1 and fills *c, 0 when it is not a call, RL_ENOMEM.
static int s_call(json_t *o, const char *args_key, const char *alt_key, int allow_absent, int id,
                  rl_tool_call_t *c) {
    json_t *name = json_object_get(o, "name");
    if (!json_is_object(o) || !json_is_string(name) || json_string_length(name) == 0) {
        return 0;
    }
    json_t *args = json_object_get(o, args_key);
    if (!args && alt_key) {
        args = json_object_get(o, alt_key);
    }
    if (args ? !json_is_object(args) : !allow_absent) {
        return 0;
    }
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "call_%d", id);
    c->id = strdup(idbuf);
    c->name = strndup(json_string_value(name), json_string_length(name));
    c->arguments = args ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER) : strdup("{}");
    if (!c->id || !c->name || !c->arguments) {
        free(c->id);
        free(c->name);
        free(c->arguments);
        memset(c, 0, sizeof *c);
        return RL_ENOMEM;
    }
    return 1;
}

static int s_push(rl_tool_parse_t *out, const rl_tool_call_t *c) {
    rl_tool_call_t *q = realloc(out->calls, (size_t)(out->n_calls + 1) * sizeof *q);
    if (!q) {
        return RL_ENOMEM;
    }
    out->calls = q;
    out->calls[out->n_calls++] = *c;
    return 0;
}

static int s_hermes(const char *text, size_t len, int first_id, rl_tool_parse_t *out) {
    s_buf_t content = {0};
    int rc = s_put(&content, "", 0);
    size_t i = 0;
    while (rc == 0 && i < len) {
        const char *open = s_find(text + i, len - i, S_OPEN);
        if (!open) {
            rc = s_put(&content, text + i, len - i);
            break;
        }
        size_t at = (size_t)(open - text), body = at + strlen(S_OPEN);
        const char *close = s_find(text + body, len - body, S_CLOSE);
        if (!close) { // never closed (cut by the token limit): content, and an error
            out->parse_errors++;
            rc = s_put(&content, text + i, len - i);
            break;
        }
        size_t end = (size_t)(close - text), after = end + strlen(S_CLOSE);
        json_error_t je;
        json_t *o = json_loadb(text + body, end - body, JSON_REJECT_DUPLICATES, &je);
        rl_tool_call_t c = {0};
        int got = o ? s_call(o, "arguments", NULL, 1, first_id + out->n_calls, &c) : 0;
        json_decref(o);
        if (got < 0) {
            rc = got;
            break;
        }
        if ((rc = s_put(&content, text + i, at - i)) != 0) {
            break;
        }
        if (got == 1) {
            if ((rc = s_push(out, &c)) != 0) {
                free(c.id);
                free(c.name);
                free(c.arguments);
            }
        } else {
            out->parse_errors++;
            rc = s_put(&content, text + at, after - at);
        }
        i = after;
    }
    if (rc == 0) {
        rc = s_set_content(out, content.p, content.n);
    }
    free(content.p);
    return rc;
}

static int s_llama3(const char *text, size_t len, int first_id, rl_tool_parse_t *out) {
    size_t i = 0;
    while (i < len && s_space(text[i])) {
        i++;
    }
    size_t tag = strlen(S_PYTAG);
    if (len - i >= tag && memcmp(text + i, S_PYTAG, tag) == 0) {
        i += tag;
        while (i < len && s_space(text[i])) {
            i++;
        }
    }
    if (i >= len || text[i] != '{') {
        return s_set_content(out, text, len);
    }
    int rc = 0, ok = 1;
    while (ok && rc == 0 && i < len) {
        json_error_t je;
        json_t *o = json_loadb(text + i, len - i, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK,
                               &je);
        rl_tool_call_t c = {0};
        int got = o ? s_call(o, "parameters", "arguments", 0, first_id + out->n_calls, &c) : 0;
        json_decref(o);
        if (got < 0) {
            return got;
        }
        if (got == 0) {
            ok = 0;
            break;
        }
        if ((rc = s_push(out, &c)) != 0) {
            free(c.id);
            free(c.name);
            free(c.arguments);
            return rc;
        }
        i += je.position; // the bytes the object took
        while (i < len && s_space(text[i])) {
            i++;
        }
        if (i < len) { // another call, after a ';'
            if (text[i] != ';') {
                ok = 0;
                break;
            }
            i++;
            while (i < len && s_space(text[i])) {
                i++;
            }
            ok = i < len && text[i] == '{';
        }
    }
    if (!ok) { // not every piece was a call: no call at all, the text is the content
        for (int k = 0; k < out->n_calls; k++) {
            free(out->calls[k].id);
            free(out->calls[k].name);
            free(out->calls[k].arguments);
        }
        free(out->calls);
        out->calls = NULL;
        out->n_calls = 0;
        out->parse_errors = 1;
        return s_set_content(out, text, len);
    }
    return s_set_content(out, "", 0);
}

int rl_tool_parse(rl_tool_parser_t parser, const char *text, size_t len, int first_id,
                  rl_tool_parse_t *out) {
    memset(out, 0, sizeof *out);
    int rc = parser == RL_TOOL_PARSER_LLAMA3_JSON ? s_llama3(text, len, first_id, out)
                                                  : s_hermes(text, len, first_id, out);
    if (rc != 0) {
        rl_tool_parse_free(out);
    }
    return rc;
}

void rl_tool_parse_free(rl_tool_parse_t *p) {
    for (int k = 0; k < p->n_calls; k++) {
        free(p->calls[k].id);
        free(p->calls[k].name);
        free(p->calls[k].arguments);
    }
    free(p->calls);
    free(p->content);
    memset(p, 0, sizeof *p);
}

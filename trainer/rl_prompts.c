// rl_prompts — JSONL prompt rows, read with core's JSONL reader (rl_jsonl). Each kept prompt
// owns its row text, rendered text and ids.
#include "rl_prompts.h"

#include "rl_data.h"
#include "rl_err.h"
#include "rl_jsonl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rl_prompts {
    rl_prompt_t *p;
    size_t n, cap;
    size_t dropped;
    char **files; // the files read, in order (rl_prompt_t.file points at one)
    int n_files;
};

void rl_prompts_destroy(rl_prompts_t **self_p) {
    rl_prompts_t *s = *self_p;
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        free((void *)s->p[i].ids);
        free((void *)s->p[i].text);
        free((void *)s->p[i].row);
    }
    for (int i = 0; i < s->n_files; i++) {
        free(s->files[i]);
    }
    free(s->files);
    free(s->p);
    free(s);
    *self_p = NULL;
}

size_t rl_prompts_count(const rl_prompts_t *self) { return self->n; }
size_t rl_prompts_dropped(const rl_prompts_t *self) { return self->dropped; }
const rl_prompt_t *rl_prompts_get(const rl_prompts_t *self, size_t i) { return &self->p[i]; }

// The prompt text of one row: the string, or the rendered message list. caller owns *text_p.
static int s_prompt_text(json_t *v, const char *line, size_t len, const char *where,
                         const char *field, rl_chat_format_t chat, char **text_p,
                         size_t *text_len, char *err, size_t err_len) {
    (void)line;
    (void)len;
    if (json_is_string(v)) {
        size_t n = json_string_length(v);
        char *t = malloc(n + 1);
        if (!t) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        memcpy(t, json_string_value(v), n + 1);
        *text_p = t;
        *text_len = n;
        return 0;
    }
    if (json_is_array(v)) {
        if (chat == RL_CHAT_NONE) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s: field '%s' is a message list but the model has no chat "
                           "template (set model.chat_template)", where, field);
        }
        // a conversation's answer is never shown to the policy: trailing assistant turns (a
        // `messages` row's reply) are left out, and the prompt ends with the generation prompt
        size_t keep = json_array_size(v);
        while (keep > 0) {
            json_t *role = json_object_get(json_array_get(v, keep - 1), "role");
            if (!json_is_string(role) || strcmp(json_string_value(role), "assistant") != 0) {
                break;
            }
            keep--;
        }
        if (keep == 0) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s: field '%s' holds no message before the assistant's reply", where,
                           field);
        }
        json_t *head = json_array();
        for (size_t i = 0; head && i < keep; i++) {
            json_array_append(head, json_array_get(v, i));
        }
        char *js = head ? json_dumps(head, JSON_COMPACT) : NULL;
        json_decref(head);
        if (!js) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        char msg[512];
        int rc = rl_chat_render_json(chat, js, strlen(js), 1, text_p, text_len, msg,
                                     sizeof(msg));
        free(js);
        if (rc) {
            return rl_errf(err, err_len, RL_EINVAL, "%s: field '%s': %s", where, field, msg);
        }
        return 0;
    }
    return rl_errf(err, err_len, RL_EINVAL,
                   "%s: field '%s' must be a string or a list of messages", where, field);
}

rl_prompts_t *rl_prompts_load(const char *const *paths, int n_paths, const char *field,
                              rl_tokenizer_t *tok, rl_chat_format_t chat, int max_prompt_length,
                              int truncation, char *err, size_t err_len) {
    rl_jsonl_t *in = NULL;
    char path[4200];
    rl_jsonl_names(paths, n_paths, path, sizeof path);
    if (rl_jsonl_open_list(paths, n_paths, 0, &in, err, err_len) != 0) {
        return NULL;
    }
    rl_prompts_t *s = calloc(1, sizeof(*s));
    int rc = s ? 0 : RL_ENOMEM;
    while (!rc) {
        json_t *row = NULL;
        int got = rl_jsonl_next(in, &row);
        if (got == 0) {
            break;
        }
        int lineno = (int)rl_jsonl_lineno(in);
        char where[4200];
        snprintf(where, sizeof(where), "%s:%d", rl_jsonl_path(in), lineno);
        if (got < 0) {
            const json_error_t *je = rl_jsonl_json_error(in);
            rc = je ? rl_errf(err, err_len, RL_EINVAL, "%s:%d: not JSON: %s", where, je->column,
                              je->text)
                    : rl_errf(err, err_len, got, "%s", rl_jsonl_errmsg(in));
            break;
        }
        size_t len;
        const char *line = rl_jsonl_line(in, &len);
        json_t *v = json_object_get(row, field);
        if (!v && json_is_array(json_object_get(row, "messages"))) {
            v = json_object_get(row, "messages"); // a conversational row (TRL): its messages
        }
        if (!v) {
            json_decref(row);
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: no field '%s' (data.prompt_field)", where,
                         field);
            break;
        }
        char *text = NULL;
        size_t text_len = 0;
        rc = s_prompt_text(v, line, len, where, field, chat, &text, &text_len, err, err_len);
        json_decref(row);
        if (rc) {
            break;
        }
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (text_len == 0) {
            free(text);
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: the prompt is empty", where);
            break;
        }
        if ((rc = rl_tokenizer_encode(tok, text, text_len, 0, &ids, &n_ids)) != 0) {
            free(text);
            rc = rl_errf(err, err_len, rc, "%s: %s", where, rl_tokenizer_errmsg(tok));
            break;
        }
        if ((int)n_ids > max_prompt_length) {
            free(text);
            free(ids);
            if (truncation == RL_DATA_TRUNC_ERROR) {
                rc = rl_errf(err, err_len, RL_EINVAL,
                             "%s: the prompt has %zu tokens, more than data.max_prompt_length "
                             "%d (raise it, or data.truncation: drop)",
                             where, n_ids, max_prompt_length);
                break;
            }
            s->dropped++;
            continue;
        }
        if (s->n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 1024;
            rl_prompt_t *p = realloc(s->p, cap * sizeof(*p));
            if (!p) {
                free(text);
                free(ids);
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
                break;
            }
            s->p = p;
            s->cap = cap;
        }
        char *rowtext = malloc(len + 1);
        if (!rowtext) {
            free(text);
            free(ids);
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        memcpy(rowtext, line, len);
        rowtext[len] = '\0';
        const char *file = rl_jsonl_path(in);
        if (!s->n_files || strcmp(s->files[s->n_files - 1], file) != 0) {
            char **g = realloc(s->files, ((size_t)s->n_files + 1) * sizeof *g);
            char *f = g ? strdup(file) : NULL;
            s->files = g ? g : s->files;
            if (!f) {
                free(rowtext);
                free(text);
                free(ids);
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
                break;
            }
            s->files[s->n_files++] = f;
        }
        rl_prompt_t *p = &s->p[s->n++];
        p->file = s->files[s->n_files - 1];
        p->ids = ids;
        p->len = (int)n_ids;
        p->text = text;
        p->text_len = text_len;
        p->row = rowtext;
        p->row_len = len;
        p->line = lineno;
    }
    rl_jsonl_destroy(&in);
    if (!rc && s->n == 0) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: no usable prompt (%zu dropped as longer than "
                     "data.max_prompt_length)", path, s->dropped);
    }
    if (rc) {
        if (rc == RL_ENOMEM && s == NULL) {
            rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        rl_prompts_destroy(&s);
        return NULL;
    }
    return s;
}

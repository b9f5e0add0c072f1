// rl_chat — chat templates rendered by the Jinja engine (see rl_chat.h). A format is a compiled
// template with its fixed variables (the tokenizer's special tokens, the recipe's keyword
// arguments), kept in a process-wide list: compiled once, shared by every thread, never freed.
#include "rl_chat.h"

#include "rl_err.h"
#include "rl_jinja.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rl_chat {
    rl_jinja_t *tpl;
    json_t *vars; // the fixed variables: bos_token, eos_token, the keyword arguments
    char *key;    // what tells it from the others: the template, tokens and arguments
    char name[160];
    rl_chat_t *next;
};

static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static rl_chat_t *s_list; // reachable until exit: not a leak

// The built-ins: what the ChatML and Llama-3 formats write (Llama-3 trims each message's content
// as its real template does), as template texts of our own.
static const struct {
    const char *name, *text;
} s_builtins[] = {
    {"chatml", "{% for message in messages %}"
               "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
               "'\\n' }}"
               "{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"llama3", "{{ '<|begin_of_text|>' }}"
               "{% for message in messages %}"
               "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
               "(message['content'] | trim) + '<|eot_id|>' }}"
               "{% endfor %}"
               "{% if add_generation_prompt %}"
               "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
};

const char *rl_chat_builtin_text(const char *name) {
    for (size_t i = 0; name && i < sizeof s_builtins / sizeof s_builtins[0]; i++) {
        if (strcmp(name, s_builtins[i].name) == 0) {
            return s_builtins[i].text;
        }
    }
    return NULL;
}

// The format of (text, bos, eos, kwargs), compiled on first use. Returns 0 or an error.
static int s_get(const char *text, const char *name, const char *bos, const char *eos,
                 const char *kwargs_json, rl_chat_format_t *fmt_p, char *err, size_t err_len) {
    *fmt_p = RL_CHAT_NONE;
    json_t *vars = NULL;
    if (kwargs_json && kwargs_json[0]) {
        json_error_t je;
        vars = json_loads(kwargs_json, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(vars)) {
            json_decref(vars);
            return rl_errf(err, err_len, RL_EINVAL,
                           "chat template keyword arguments: expected a JSON object, got '%.80s'",
                           kwargs_json);
        }
    } else {
        vars = json_object();
    }
    if (!vars || (bos && json_object_set_new(vars, "bos_token", json_string(bos)) != 0) ||
        (eos && json_object_set_new(vars, "eos_token", json_string(eos)) != 0)) {
        json_decref(vars);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    char *vtext = json_dumps(vars, JSON_COMPACT | JSON_SORT_KEYS);
    size_t kl = strlen(text) + (vtext ? strlen(vtext) : 0) + 2;
    char *key = vtext ? malloc(kl) : NULL;
    if (!key) {
        free(vtext);
        json_decref(vars);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    snprintf(key, kl, "%s%c%s", vtext, '\x01', text);
    free(vtext);
    pthread_mutex_lock(&s_mu);
    for (rl_chat_t *c = s_list; c; c = c->next) {
        if (strcmp(c->key, key) == 0) {
            *fmt_p = c;
            break;
        }
    }
    int rc = 0;
    if (!*fmt_p) {
        rl_chat_t *c = calloc(1, sizeof *c);
        rc = c ? rl_jinja_compile(text, strlen(text), name, &c->tpl, err, err_len) : RL_ENOMEM;
        if (!rc) {
            c->vars = vars;
            c->key = key;
            snprintf(c->name, sizeof c->name, "%s", name);
            c->next = s_list;
            s_list = c;
            *fmt_p = c;
            vars = NULL;
            key = NULL;
        } else if (c) {
            free(c);
        } else {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&s_mu);
    free(key);
    json_decref(vars);
    return rc;
}

rl_chat_format_t rl_chat_builtin(const char *name) {
    const char *text = rl_chat_builtin_text(name);
    rl_chat_format_t fmt = RL_CHAT_NONE;
    char err[256];
    if (text && s_get(text, name, NULL, NULL, NULL, &fmt, err, sizeof err) != 0) {
        fmt = RL_CHAT_NONE; // only out of memory: the built-ins compile
    }
    return fmt;
}

int rl_chat_template(const char *text, const char *name, const char *bos, const char *eos,
                     const char *kwargs_json, rl_chat_format_t *fmt_p, char *err, size_t err_len) {
    *fmt_p = RL_CHAT_NONE;
    if (!text) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "no chat_template (tokenizer_config.json has none, and there is no "
                       "chat_template.jinja): name a built-in (chatml, llama3)");
    }
    return s_get(text, name ? name : "chat_template", bos, eos, kwargs_json, fmt_p, err, err_len);
}

int rl_chat_detect(const char *chat_template, rl_chat_format_t *fmt_p, char *err, size_t err_len) {
    return rl_chat_template(chat_template, "tokenizer_config.json chat_template", NULL, NULL, NULL,
                            fmt_p, err, err_len);
}

// A special token of tokenizer_config.json: a string, or {"content": string}; NULL when absent.
static char *s_config_token(json_t *cfg, const char *key) {
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) {
        v = json_object_get(v, "content");
    }
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

// The whole file at path, NUL-terminated, or NULL (*missing set when it does not exist).
static char *s_read_file(const char *path, int *missing) {
    FILE *f = fopen(path, "rb");
    *missing = f == NULL;
    char *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (64L << 20) &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    if (f) {
        fclose(f);
    }
    return buf;
}

void rl_chat_source_free(rl_chat_source_t *src) {
    free(src->text);
    free(src->bos);
    free(src->eos);
    src->text = src->bos = src->eos = NULL;
}

int rl_chat_model_source(const char *dir, const char *config, rl_chat_source_t *src, char *err,
                         size_t err_len) {
    memset(src, 0, sizeof *src);
    char path[4300];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir ? dir : ".");
    if (config) {
        snprintf(path, sizeof path, "%s", config);
    }
    json_error_t je;
    // model_max_length is often 1e30 written as an integer: big numbers as reals
    json_t *cfg = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
    FILE *probe = cfg ? NULL : fopen(path, "rb");
    if (!cfg && (probe || config)) {
        if (probe) {
            fclose(probe);
        }
        return rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    }
    if (cfg && !json_is_object(cfg)) {
        json_decref(cfg);
        return rl_errf(err, err_len, RL_EINVAL, "%s: not a JSON object", path);
    }
    json_t *t = json_object_get(cfg, "chat_template");
    for (size_t k = 0, n = json_array_size(t); json_is_array(t) && k < n; k++) {
        json_t *e = json_array_get(t, k), *name = json_object_get(e, "name");
        if (json_is_string(name) && strcmp(json_string_value(name), "default") == 0) {
            t = json_object_get(e, "template");
        }
    }
    int rc = 0;
    if (json_is_string(t)) {
        src->text = strdup(json_string_value(t));
        rc = src->text ? 0 : RL_ENOMEM;
        snprintf(src->where, sizeof src->where, "%s chat_template", path);
    } else if (dir) {
        int missing = 0;
        snprintf(src->where, sizeof src->where, "%s/chat_template.jinja", dir);
        src->text = s_read_file(src->where, &missing);
        rc = src->text || missing ? 0 : RL_EIO;
    }
    src->bos = s_config_token(cfg, "bos_token");
    src->eos = s_config_token(cfg, "eos_token");
    json_decref(cfg);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: %s", src->where,
                       rc == RL_ENOMEM ? "out of memory" : "cannot read");
    }
    if (!src->text) {
        src->where[0] = '\0';
    }
    return 0;
}

int rl_chat_model_format(const char *dir, const char *config, const char *kwargs_json,
                         rl_chat_format_t *fmt_p, char *err, size_t err_len) {
    *fmt_p = RL_CHAT_NONE;
    rl_chat_source_t src;
    int rc = rl_chat_model_source(dir, config, &src, err, err_len);
    if (!rc && !src.text) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "%s has no chat template (no chat_template in tokenizer_config.json, no "
                     "chat_template.jinja)",
                     config ? config : dir);
    } else if (!rc) {
        rc = rl_chat_template(src.text, src.where, src.bos, src.eos, kwargs_json, fmt_p, err,
                              err_len);
    }
    rl_chat_source_free(&src);
    return rc;
}

int rl_chat_format_parse(const char *name, rl_chat_format_t *fmt_p, char *err, size_t err_len) {
    *fmt_p = rl_chat_builtin_text(name) ? rl_chat_builtin(name) : RL_CHAT_NONE;
    return *fmt_p ? 0
                  : rl_errf(err, err_len, RL_EINVAL, "chat format '%s' is unknown (chatml, llama3)",
                            name ? name : "(null)");
}

const char *rl_chat_format_name(rl_chat_format_t fmt) {
    return fmt ? fmt->name : "none";
}

// Renders messages (a JSON list, taken) with tools (borrowed, may be NULL).
static int s_render(rl_chat_format_t fmt, json_t *messages, const json_t *tools, int add_gen,
                    char **text_p, size_t *len_p, char *err, size_t err_len) {
    json_t *ctx = json_copy(fmt->vars); // shallow: the fixed variables are only read
    if (!ctx || json_object_set_new(ctx, "messages", messages) != 0 ||
        json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_gen)) != 0 ||
        (tools && json_object_set(ctx, "tools", (json_t *)tools) != 0)) {
        json_decref(ctx);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    size_t len = 0;
    int rc = rl_jinja_render(fmt->tpl, ctx, text_p, &len, err, err_len);
    json_decref(ctx);
    if (!rc && len_p) {
        *len_p = len;
    }
    return rc;
}

int rl_chat_render(rl_chat_format_t fmt, const rl_chat_msg_t *msgs, size_t n,
                   int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                   size_t err_len) {
    *text_p = NULL;
    if (len_p) {
        *len_p = 0;
    }
    if (!fmt) {
        return rl_errf(err, err_len, RL_EINVAL, "no chat format chosen (chatml, llama3)");
    }
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            json_decref(list);
            return rl_errf(err, err_len, RL_EINVAL, "messages[%zu] has no %s", i,
                           msgs[i].role ? "content" : "role");
        }
        json_t *m = json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content);
        if (!m || json_array_append_new(list, m) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    if (!list) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    return s_render(fmt, list, NULL, add_generation_prompt, text_p, len_p, err, err_len);
}

int rl_chat_render_json(rl_chat_format_t fmt, const char *json, size_t json_len,
                        int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                        size_t err_len) {
    *text_p = NULL;
    if (len_p) {
        *len_p = 0;
    }
    if (!fmt) {
        return rl_errf(err, err_len, RL_EINVAL, "no chat format chosen (chatml, llama3)");
    }
    json_error_t jerr;
    json_t *root = json_loadb(json, json_len, 0, &jerr), *list = root, *tools = NULL;
    if (!root) {
        return rl_errf(err, err_len, RL_EINVAL, "messages: %d:%d: %s", jerr.line, jerr.column,
                       jerr.text);
    }
    if (json_is_object(root)) {
        list = json_object_get(root, "messages");
        tools = json_object_get(root, "tools");
    }
    if (!json_is_array(list)) {
        json_decref(root);
        return rl_errf(err, err_len, RL_EINVAL,
                       "messages: expected {\"messages\": [...]} or a [...] list");
    }
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *m = json_array_get(list, i);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        int calls = json_is_array(json_object_get(m, "tool_calls"));
        const char *bad =
            !json_is_object(m)      ? " is not an object"
            : !json_is_string(role) ? ".role is not a string"
            : !json_is_string(content) && !(calls && (!content || json_is_null(content)))
                ? ".content is not a string"
            : json_is_string(content) &&
                    strlen(json_string_value(content)) != json_string_length(content)
                ? ".content holds a NUL character"
                : NULL;
        if (bad) {
            json_decref(root);
            return rl_errf(err, err_len, RL_EINVAL, "messages[%zu]%s", i, bad);
        }
    }
    json_incref(list);
    int rc = s_render(fmt, list, json_is_null(tools) ? NULL : tools, add_generation_prompt, text_p,
                      len_p, err, err_len);
    json_decref(root);
    return rc;
}

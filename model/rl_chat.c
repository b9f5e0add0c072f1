// rl_chat — ChatML and Llama-3 prompt rendering (see rl_chat.h). Checked against the real Qwen3
// and Llama-3 chat templates rendered by @huggingface/jinja (tests/fixtures/tokenizer/
// chat_goldens.jsonl).
#include "rl_chat.h"

#include "rl_err.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} s_buf_t;

static void s_put(s_buf_t *b, const char *s, size_t n) {
    if (b->oom) {
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) {
            c *= 2;
        }
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void s_puts(s_buf_t *b, const char *s) {
    s_put(b, s, strlen(s));
}

// Length of the White_Space character ending at / starting at s (0 if none). The Llama-3
// template trims content with Jinja's `trim` (Python str.strip: Unicode whitespace).
static size_t s_space_len(const unsigned char *s, size_t n) {
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0D) || s[0] == 0x20)) {
        return 1;
    }
    if (n >= 2 && s[0] == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0)) {
        return 2;
    }
    if (n >= 3 && s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) { // U+1680
        return 3;
    }
    // U+2000..200A, U+2028, U+2029, U+202F
    if (n >= 3 && s[0] == 0xE2 && s[1] == 0x80 &&
        (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF)) {
        return 3;
    }
    if (n >= 3 && s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) { // U+205F
        return 3;
    }
    if (n >= 3 && s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) { // U+3000
        return 3;
    }
    return 0;
}

static void s_put_trimmed(s_buf_t *b, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), lo = 0, hi = n;
    size_t k;
    while (lo < hi && (k = s_space_len(p + lo, hi - lo)) > 0) {
        lo += k;
    }
    while (hi > lo) {
        // step back one code point and test it
        size_t q = hi - 1;
        while (q > lo && (p[q] & 0xC0) == 0x80) {
            q--;
        }
        if (s_space_len(p + q, hi - q) != hi - q) {
            break;
        }
        hi = q;
    }
    s_put(b, s + lo, hi - lo);
}

int rl_chat_detect(const char *chat_template, rl_chat_format_t *fmt_p, char *err,
                   size_t err_len) {
    *fmt_p = RL_CHAT_NONE;
    if (!chat_template) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "no chat_template (tokenizer_config.json has none): name the format "
                       "(chatml, llama3)");
    }
    if (strstr(chat_template, "<|im_start|>")) {
        *fmt_p = RL_CHAT_CHATML;
        return 0;
    }
    if (strstr(chat_template, "<|start_header_id|>")) {
        *fmt_p = RL_CHAT_LLAMA3;
        return 0;
    }
    return rl_errf(err, err_len, RL_EUNSUPPORTED,
                   "chat template is not supported: it is neither ChatML (<|im_start|>) nor "
                   "Llama-3 (<|start_header_id|>); it begins \"%.60s\"", chat_template);
}

int rl_chat_format_parse(const char *name, rl_chat_format_t *fmt_p, char *err, size_t err_len) {
    if (name && strcmp(name, "chatml") == 0) {
        *fmt_p = RL_CHAT_CHATML;
        return 0;
    }
    if (name && strcmp(name, "llama3") == 0) {
        *fmt_p = RL_CHAT_LLAMA3;
        return 0;
    }
    return rl_errf(err, err_len, RL_EINVAL, "chat format '%s' is unknown (chatml, llama3)",
                   name ? name : "(null)");
}

const char *rl_chat_format_name(rl_chat_format_t fmt) {
    return fmt == RL_CHAT_CHATML ? "chatml" : fmt == RL_CHAT_LLAMA3 ? "llama3" : "none";
}

int rl_chat_render(rl_chat_format_t fmt, const rl_chat_msg_t *msgs, size_t n,
                   int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                   size_t err_len) {
    *text_p = NULL;
    if (len_p) {
        *len_p = 0;
    }
    if (fmt != RL_CHAT_CHATML && fmt != RL_CHAT_LLAMA3) {
        return rl_errf(err, err_len, RL_EINVAL, "no chat format chosen (chatml, llama3)");
    }
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            return rl_errf(err, err_len, RL_EINVAL, "messages[%zu] has no %s", i,
                           msgs[i].role ? "content" : "role");
        }
    }
    s_buf_t b = {0};
    s_put(&b, "", 0);
    if (fmt == RL_CHAT_CHATML) {
        for (size_t i = 0; i < n; i++) {
            s_puts(&b, "<|im_start|>");
            s_puts(&b, msgs[i].role);
            s_puts(&b, "\n");
            s_puts(&b, msgs[i].content);
            s_puts(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt) {
            s_puts(&b, "<|im_start|>assistant\n");
        }
    } else {
        s_puts(&b, "<|begin_of_text|>");
        for (size_t i = 0; i < n; i++) {
            s_puts(&b, "<|start_header_id|>");
            s_puts(&b, msgs[i].role);
            s_puts(&b, "<|end_header_id|>\n\n");
            s_put_trimmed(&b, msgs[i].content);
            s_puts(&b, "<|eot_id|>");
        }
        if (add_generation_prompt) {
            s_puts(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        }
    }
    if (b.oom) {
        free(b.p);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *text_p = b.p;
    if (len_p) {
        *len_p = b.n;
    }
    return 0;
}

int rl_chat_render_json(rl_chat_format_t fmt, const char *json, size_t json_len,
                        int add_generation_prompt, char **text_p, size_t *len_p, char *err,
                        size_t err_len) {
    *text_p = NULL;
    json_error_t jerr;
    json_t *root = json_loadb(json, json_len, 0, &jerr), *list = root;
    if (!root) {
        return rl_errf(err, err_len, RL_EINVAL, "messages: %d:%d: %s", jerr.line, jerr.column,
                       jerr.text);
    }
    if (json_is_object(root)) {
        list = json_object_get(root, "messages");
    }
    if (!json_is_array(list)) {
        json_decref(root);
        return rl_errf(err, err_len, RL_EINVAL,
                       "messages: expected {\"messages\": [...]} or a [...] list");
    }
    size_t n = json_array_size(list);
    rl_chat_msg_t *msgs = calloc(n ? n : 1, sizeof(*msgs));
    if (!msgs) {
        json_decref(root);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int r = 0;
    for (size_t i = 0; i < n && !r; i++) {
        json_t *m = json_array_get(list, i);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_string(role) || !json_is_string(content)) {
            r = rl_errf(err, err_len, RL_EINVAL, "messages[%zu].%s is not a string", i,
                        json_is_string(role) ? "content" : "role");
        } else if (strlen(json_string_value(content)) != json_string_length(content)) {
            r = rl_errf(err, err_len, RL_EINVAL, "messages[%zu].content holds a NUL character",
                        i);
        }
        msgs[i].role = json_string_value(role);
        msgs[i].content = json_string_value(content);
    }
    if (!r) {
        r = rl_chat_render(fmt, msgs, n, add_generation_prompt, text_p, len_p, err, err_len);
    }
    free(msgs);
    json_decref(root);
    return r;
}

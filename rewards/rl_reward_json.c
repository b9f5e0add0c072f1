// rl_reward_json — building requests and decoding replies of command and http rewards. jansson
// does the JSON; this file makes the text valid UTF-8 before jansson sees it (a completion can
// end inside a character) and reads Python's NaN and Infinity words, which are not JSON, before
// jansson refuses them.
#include "rl_reward_json.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl_err.h"

// ---------------------------------------------------------------------------------------------
// text to JSON strings

// Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one (overlong forms,
// surrogates and code points past U+10FFFF are not valid: RFC 3629).
static size_t s_utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) {
        return 0;
    }
    unsigned cp = c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return len;
}

// A JSON string of s[0..n) with every byte that does not start a valid UTF-8 sequence replaced
// by U+FFFD. NULL when out of memory.
static json_t *s_text(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    n = s ? n : 0;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        size_t l = s_utf8_len(u + i, n - i);
        bad += l == 0;
        i += l ? l : 1;
    }
    if (!bad) {
        return json_stringn((const char *)u, n);
    }
    char *fixed = malloc(n + 2 * bad + 1); // each bad byte (1) becomes EF BF BD (3)
    if (!fixed) {
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = s_utf8_len(u + i, n - i);
        if (l) {
            memcpy(fixed + o, u + i, l);
            o += l;
            i += l;
        } else {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(fixed, o);
    free(fixed);
    return j;
}

// The item's row as a JSON object; NULL with err filled (RL_EINVAL) when it is not one.
static json_t *s_row(const rl_reward_item_t *it, size_t i, char *err, size_t err_len) {
    json_error_t je;
    json_t *row =
        it->row_json ? json_loadb(it->row_json, it->row_json_len, JSON_ALLOW_NUL, &je) : NULL;
    if (!row || !json_is_object(row)) {
        rl_errf(err, err_len, RL_EINVAL, "item %zu: the row is not a JSON object%s%s", i,
                row || !it->row_json ? "" : ": ", row || !it->row_json ? "" : je.text);
        json_decref(row);
        return NULL;
    }
    return row;
}

// ---------------------------------------------------------------------------------------------
// requests

// {"prompt", "completion", "completion_ids", "row"} of one item into *out. Returns 0, or
// RL_EINVAL / RL_ENOMEM with err filled. (jansson's *_set_new and *_append_new take the value
// in every case, failure included, so each is called once and never followed by a decref.)
static int s_item(const rl_reward_item_t *it, size_t i, json_t **out, char *err, size_t err_len) {
    json_t *row = s_row(it, i, err, err_len);
    if (!row) {
        return RL_EINVAL;
    }
    json_t *o = json_object(), *ids = json_array();
    int bad = 0;
    for (size_t k = 0; k < it->n_completion_ids; k++) {
        bad |= json_array_append_new(ids, json_integer(it->completion_ids[k])) != 0;
    }
    bad |= json_object_set_new(o, "prompt", s_text(it->prompt, it->prompt_len)) != 0;
    bad |= json_object_set_new(o, "completion", s_text(it->completion, it->completion_len)) != 0;
    bad |= json_object_set_new(o, "completion_ids", ids) != 0;
    bad |= json_object_set_new(o, "row", row) != 0;
    if (bad || !o) {
        json_decref(o);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = o;
    return 0;
}

// The OpenRLHF label of an item: row[label_field] as text. caller owns result; json_decref.
static json_t *s_label(const json_t *row, const char *label_field) {
    json_t *v = label_field ? json_object_get(row, label_field) : NULL;
    if (!v || json_is_null(v)) {
        return json_string("");
    }
    if (json_is_string(v)) {
        return json_stringn(json_string_value(v), json_string_length(v));
    }
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    json_t *s = t ? json_string(t) : NULL;
    free(t);
    return s;
}

// prompt + completion as one JSON string; NULL when either is NULL or out of memory.
static json_t *s_concat(const json_t *a, const json_t *b) {
    if (!a || !b) {
        return NULL;
    }
    size_t la = json_string_length(a), lb = json_string_length(b);
    char *both = malloc(la + lb + 1);
    if (!both) {
        return NULL;
    }
    memcpy(both, json_string_value(a), la);
    memcpy(both + la, json_string_value(b), lb);
    json_t *j = json_stringn(both, la + lb);
    free(both);
    return j;
}

// {"query", "prompts", "labels"} into *out. Returns 0, or RL_EINVAL / RL_ENOMEM with err.
static int s_openrlhf(const rl_reward_item_t *items, size_t n, const char *label_field,
                      json_t **out, char *err, size_t err_len) {
    json_t *o = json_object(), *q = json_array(), *p = json_array(), *l = json_array();
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const rl_reward_item_t *it = &items[i];
        json_t *row = s_row(it, i, err, err_len);
        if (!row) {
            json_decref(o);
            json_decref(q);
            json_decref(p);
            json_decref(l);
            return RL_EINVAL;
        }
        json_t *prompt = s_text(it->prompt, it->prompt_len);
        json_t *completion = s_text(it->completion, it->completion_len);
        bad |= json_array_append_new(q, s_concat(prompt, completion)) != 0;
        bad |= json_array_append_new(p, prompt) != 0;
        bad |= json_array_append_new(l, s_label(row, label_field)) != 0;
        json_decref(completion);
        json_decref(row);
    }
    bad |= json_object_set_new(o, "query", q) != 0;
    bad |= json_object_set_new(o, "prompts", p) != 0;
    bad |= json_object_set_new(o, "labels", l) != 0;
    if (bad || !o) {
        json_decref(o);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = o;
    return 0;
}

int rl_reward_json_request(const rl_reward_item_t *items, size_t n, int format,
                           const char *label_field, char **out, size_t *out_len, char *err,
                           size_t err_len) {
    RL_ASSERT(out && out_len && (n == 0 || items));
    *out = NULL;
    *out_len = 0;
    json_t *req = NULL;
    int rc = 0;
    if (format == RL_REWARD_JSON_OPENRLHF) {
        rc = s_openrlhf(items, n, label_field, &req, err, err_len);
    } else {
        json_t *arr = json_array();
        int bad = 0;
        for (size_t i = 0; !rc && i < n; i++) {
            json_t *it = NULL;
            rc = s_item(&items[i], i, &it, err, err_len);
            bad |= !rc && json_array_append_new(arr, it) != 0;
        }
        if (rc) {
            json_decref(arr);
            return rc;
        }
        req = json_object();
        bad |= json_object_set_new(req, "items", arr) != 0;
        if (bad || !req) {
            json_decref(req);
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    if (rc) {
        return rc;
    }
    // compact and ASCII: one line, whatever encoding the reader assumes
    char *text = json_dumps(req, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
    json_decref(req);
    if (!text) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = text;
    *out_len = strlen(text);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// replies

// What a reply shows in messages: its first 120 bytes.
static void s_excerpt(const char *t, size_t len, char *out, size_t cap) {
    rl_err_excerpt(t, len, 120, out, cap);
}

// The markers NaN, Infinity and -Infinity become (strings JSON text cannot otherwise hold
// where a score is read: they start with a NUL character).
#define S_NAN "\"\\u0000nan\""
#define S_POS_INF "\"\\u0000+inf\""
#define S_NEG_INF "\"\\u0000-inf\""

// Copies t[0..len) into a new buffer with Python's bare words NaN, Infinity and -Infinity,
// outside strings, replaced by the markers. caller owns result; free with free(). NULL when out
// of memory.
static char *s_python_words(const char *t, size_t len, size_t *out_len) {
    if (len > SIZE_MAX / 4 - 16) {
        return NULL;
    }
    char *o = malloc(len * 4 + 16); // the longest growth: "NaN" (3) -> S_NAN (12)
    if (!o) {
        return NULL;
    }
    size_t n = 0;
    int in_str = 0;
    for (size_t i = 0; i < len;) {
        char c = t[i];
        if (in_str) {
            o[n++] = c;
            if (c == '\\' && i + 1 < len) {
                o[n++] = t[i + 1];
                i += 2;
                continue;
            }
            in_str = c != '"';
            i++;
            continue;
        }
        const char *word = NULL;
        size_t wl = 0;
        if (len - i >= 3 && !memcmp(t + i, "NaN", 3)) {
            word = S_NAN;
            wl = 3;
        } else if (len - i >= 8 && !memcmp(t + i, "Infinity", 8)) {
            word = S_POS_INF;
            wl = 8;
        } else if (len - i >= 9 && !memcmp(t + i, "-Infinity", 9)) {
            word = S_NEG_INF;
            wl = 9;
        }
        if (word) {
            size_t l = strlen(word);
            memcpy(o + n, word, l);
            n += l;
            i += wl;
            continue;
        }
        in_str = c == '"';
        o[n++] = c;
        i++;
    }
    o[n] = '\0';
    *out_len = n;
    return o;
}

// "a string", "an object", ... for messages.
static const char *s_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "a number";
    }
}

int rl_reward_json_reply(const char *text, size_t len, int format, size_t n, double *out, char *err,
                         size_t err_len) {
    RL_ASSERT(text || len == 0);
    char ex[512];
    s_excerpt(text, len, ex, sizeof ex);
    if (len > RL_REWARD_JSON_MAX_REPLY) {
        return rl_errf(err, err_len, RL_EPROTO, "a reply of %zu bytes (at most %zu are read)", len,
                       RL_REWARD_JSON_MAX_REPLY);
    }
    size_t blen = 0;
    char *buf = s_python_words(text, len, &blen);
    if (!buf) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    json_error_t je;
    json_t *root = json_loadb(buf, blen, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!root) {
        return rl_errf(err, err_len, RL_EPROTO, "not JSON (%s): '%s'", je.text, ex);
    }
    int rc = 0;
    const char *key = format == RL_REWARD_JSON_OPENRLHF ? "rewards" : "scores";
    json_t *e = json_object_get(root, "error"), *s = json_object_get(root, key);
    if (!json_is_object(root)) {
        rc = rl_errf(err, err_len, RL_EPROTO, "not a JSON object: '%s'", ex);
    } else if (e && !json_is_null(e)) {
        if (json_is_string(e)) {
            char m[1024];
            s_excerpt(json_string_value(e), json_string_length(e), m, sizeof m);
            rc = rl_errf(err, err_len, RL_EPLUGIN, "%s", m);
        } else {
            rc = rl_errf(err, err_len, RL_EPROTO, "\"error\" is %s, not a string: '%s'", s_kind(e),
                         ex);
        }
    } else if (!s) {
        rc = rl_errf(err, err_len, RL_EPROTO, "no \"%s\"%s: '%s'", key,
                     format == RL_REWARD_JSON_OPENRLHF ? "" : " (nor \"error\")", ex);
    } else if (!json_is_array(s)) {
        rc = rl_errf(err, err_len, RL_EPROTO, "\"%s\" is %s, not a list: '%s'", key, s_kind(s), ex);
    } else if (json_array_size(s) != n) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%zu %s for %zu items: '%s'", json_array_size(s), key,
                     n, ex);
    }
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *v = json_array_get(s, i);
        size_t vl = json_is_string(v) ? json_string_length(v) : 0;
        const char *vs = json_is_string(v) ? json_string_value(v) : "";
        if (json_is_number(v)) {
            out[i] = json_number_value(v);
        } else if (json_is_null(v) || (vl == 4 && !memcmp(vs, "\0nan", 4))) {
            out[i] = NAN;
        } else if (vl == 5 && (!memcmp(vs, "\0+inf", 5) || !memcmp(vs, "\0-inf", 5))) {
            rc = rl_errf(err, err_len, RL_EPROTO,
                         "score %zu of %zu is %sInfinity (write null for an unscorable item)", i, n,
                         vs[1] == '-' ? "-" : "");
        } else {
            rc = rl_errf(err, err_len, RL_EPROTO, "score %zu of %zu is %s, not a number or null", i,
                         n, s_kind(v));
        }
        if (!rc && isinf(out[i])) { // a real the size of a double's range: refused likewise
            rc = rl_errf(err, err_len, RL_EPROTO,
                         "score %zu of %zu is infinite (write null for an unscorable item)", i, n);
        }
    }
    json_decref(root);
    return rc;
}

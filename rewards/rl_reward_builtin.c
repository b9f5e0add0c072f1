// rl_reward_builtin — math_answer, regex_format and length as reward ABI tables.
// Configs are strict like the recipe: an unknown key or a value of the wrong type is a create()
// error, never silently ignored.
#include "rl_reward_builtin.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <oniguruma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl_config.h"
#include "rl_reward_math.h"

// ---------------------------------------------------------------------------------------------
// config helpers

// Parses config_json (NULL = "{}") into an object whose keys are all in `keys` (NULL-ended).
// Returns the object (caller owns result; free with json_decref) or NULL with err filled.
static json_t *s_config(const char *config_json, const char *const *keys, char *err,
                        size_t err_len) {
    json_error_t je;
    json_t *cfg = json_loads(config_json ? config_json : "{}", 0, &je);
    if (!cfg) {
        snprintf(err, err_len, "config is not valid JSON: %s (column %d)", je.text, je.column);
        return NULL;
    }
    if (!json_is_object(cfg)) {
        snprintf(err, err_len, "config must be a map");
        json_decref(cfg);
        return NULL;
    }
    const char *key;
    json_t *val;
    json_object_foreach(cfg, key, val) {
        int known = 0;
        for (int i = 0; keys[i]; i++) {
            known |= strcmp(key, keys[i]) == 0;
        }
        if (!known) {
            char valid[256] = "";
            for (int i = 0; keys[i]; i++) {
                size_t n = strlen(valid);
                snprintf(valid + n, sizeof valid - n, "%s%s", i ? ", " : "", keys[i]);
            }
            snprintf(err, err_len, "config: unknown key '%s' (valid keys: %s)", key, valid);
            json_decref(cfg);
            return NULL;
        }
    }
    return cfg;
}

// Reads optional number `key` of cfg into *out (left alone when absent or null). Returns 1 when
// set, 0 when absent, -1 (err filled) when it is not a number.
static int s_config_number(const json_t *cfg, const char *key, double *out, char *err,
                           size_t err_len) {
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        return 0;
    }
    if (!json_is_number(v)) {
        snprintf(err, err_len, "config: '%s' must be a number", key);
        return -1;
    }
    *out = json_number_value(v);
    return 1;
}

// ---------------------------------------------------------------------------------------------
// math_answer: 1 when the completion's final number equals the row's reference answer, else 0;
// NaN when the row has no usable reference. config {"field": "answer"}.

typedef struct {
    const rl_reward_host_t *host; // borrowed; valid until destroy
    char *field;                  // the row field holding the reference answer
    int warned;                   // a row without a usable reference was logged once
} s_math_t;

static int s_math_create(const rl_reward_host_t *host, const char *config_json, void **state,
                         char *err, size_t err_len) {
    static const char *const keys[] = {"field", NULL};
    json_t *cfg = s_config(config_json, keys, err, err_len);
    if (!cfg) {
        return 1;
    }
    const char *field = "answer";
    json_t *f = json_object_get(cfg, "field");
    if (f && !json_is_null(f)) {
        if (!json_is_string(f) || json_string_length(f) == 0) {
            snprintf(err, err_len, "config: 'field' must be a non-empty string");
            json_decref(cfg);
            return 1;
        }
        field = json_string_value(f);
    }
    s_math_t *m = calloc(1, sizeof *m);
    char *copy = strdup(field);
    json_decref(cfg);
    if (!m || !copy) {
        free(m);
        free(copy);
        snprintf(err, err_len, "out of memory");
        return 1;
    }
    m->host = host;
    m->field = copy;
    *state = m;
    return 0;
}

// The normalised reference answer of row field `v` into out (64 bytes): a number, a numeric
// string ("1,234"), or a GSM8K solution whose answer follows its last "#### ". Returns 0, or -1
// when v holds no such answer.
static int s_math_reference(const json_t *v, char *out) {
    char buf[64];
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return rl_math_normalize(buf, out);
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!isfinite(x) || fabs(x) >= 1e15) {
            return -1;
        }
        snprintf(buf, sizeof buf, "%.10f", x); // the normaliser drops the trailing zeros
        return rl_math_normalize(buf, out);
    }
    if (!json_is_string(v)) {
        return -1;
    }
    const char *s = json_string_value(v);
    if (rl_math_normalize(s, out) == 0) {
        return 0;
    }
    rl_math_answer_t a;
    rl_math_extract(s, json_string_length(v), &a);
    if (!a.formatted) {
        return -1; // free text without "#### ": its last number is not a safe reference
    }
    memcpy(out, a.value, sizeof a.value);
    return 0;
}

static int s_math_score(void *state, const rl_reward_item_t *items, size_t n, double *out,
                        char *err, size_t err_len) {
    s_math_t *m = state;
    for (size_t i = 0; i < n; i++) {
        const rl_reward_item_t *it = &items[i];
        json_error_t je;
        json_t *row = it->row_json ? json_loadb(it->row_json, it->row_json_len, 0, &je) : NULL;
        if (!row || !json_is_object(row)) {
            snprintf(err, err_len, "item %zu: the row is not a JSON object%s%s", i, row ? "" : ": ",
                     row ? "" : (it->row_json ? je.text : "(NULL)"));
            json_decref(row);
            return 1;
        }
        char ref[64];
        json_t *v = json_object_get(row, m->field);
        if (!v || s_math_reference(v, ref) != 0) {
            out[i] = NAN;
            if (!m->warned) {
                m->host->log(m->host->ctx, RL_REWARD_LOG_WARN,
                             "a row has %s field '%s'; such rows score NaN (logged once)",
                             v ? "no numeric answer in" : "no", m->field);
                m->warned = 1;
            }
        } else {
            out[i] = rl_math_correct(it->completion, it->completion_len, ref) ? 1.0 : 0.0;
        }
        json_decref(row);
    }
    return 0;
}

static void s_math_destroy(void *state) {
    s_math_t *m = state;
    if (m) {
        free(m->field);
        free(m);
    }
}

static const rl_reward_table_t s_math_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = RL_RECIPE_REWARD_MATH_ANSWER_NAME,
    .create = s_math_create,
    .score = s_math_score,
    .destroy = s_math_destroy,
};

// ---------------------------------------------------------------------------------------------
// regex_format: 1 when config.pattern matches somewhere in the completion text, else 0: Python's
// re.search(pattern, completion), as TRL users write their format rewards. Compiled by
// Oniguruma (which rlctl links for the tokenizer) with its Python syntax (ONIG_SYNTAX_PYTHON,
// whose default options give Python's meanings without flags: `.` stops at a newline unless
// (?s), `^` is the start of the text and `$` its end or before a final newline unless (?m);
// \d, \w, \s are Unicode classes; (?P<name>...), (?i), (?x) as in Python). Known differences
// from Python's re are listed in docs/rewards.md.
// Not libc's regcomp: libonig exports POSIX-named regcomp/regexec of its own, and in a binary
// that links both, the dynamic linker binds those names to libonig's (with another regex_t).

typedef struct {
    OnigRegex re;
} s_regex_t;

static int s_regex_create(const rl_reward_host_t *host, const char *config_json, void **state,
                          char *err, size_t err_len) {
    (void)host;
    static const char *const keys[] = {"pattern", NULL};
    json_t *cfg = s_config(config_json, keys, err, err_len);
    if (!cfg) {
        return 1;
    }
    json_t *p = json_object_get(cfg, "pattern");
    if (!p || !json_is_string(p)) {
        snprintf(err, err_len, "config: 'pattern' (a Python regular expression) is %s",
                 p && !json_is_null(p) ? "not a string" : "required");
        json_decref(cfg);
        return 1;
    }
    s_regex_t *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, err_len, "out of memory");
        json_decref(cfg);
        return 1;
    }
    const char *pat = json_string_value(p);
    OnigErrorInfo einfo;
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    onig_initialize(&enc, 1);
    int rc = onig_new(&x->re, (const OnigUChar *)pat, (const OnigUChar *)pat + strlen(pat),
                      ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_PYTHON, &einfo);
    if (rc != ONIG_NORMAL) {
        OnigUChar why[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(why, rc, &einfo);
        snprintf(err, err_len, "bad pattern '%s': %s", pat, (const char *)why);
        free(x);
        json_decref(cfg);
        return 1;
    }
    json_decref(cfg);
    *state = x;
    return 0;
}

static int s_regex_score(void *state, const rl_reward_item_t *items, size_t n, double *out,
                         char *err, size_t err_len) {
    (void)err;
    (void)err_len;
    s_regex_t *x = state;
    for (size_t i = 0; i < n; i++) {
        const OnigUChar *t = (const OnigUChar *)(items[i].completion ? items[i].completion : "");
        const OnigUChar *e = t + (items[i].completion ? items[i].completion_len : 0);
        out[i] = onig_search(x->re, t, e, t, e, NULL, ONIG_OPTION_NONE) >= 0 ? 1.0 : 0.0;
    }
    return 0;
}

static void s_regex_destroy(void *state) {
    s_regex_t *x = state;
    if (x) {
        onig_free(x->re);
        free(x);
    }
}

static const rl_reward_table_t s_regex_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = RL_RECIPE_REWARD_REGEX_FORMAT_NAME,
    .create = s_regex_create,
    .score = s_regex_score,
    .destroy = s_regex_destroy,
};

// ---------------------------------------------------------------------------------------------
// length: shaping on the completion's token count L = n_completion_ids (stop token included).
//   target term    -|L - target| / target                      (when "target" is set)
//   overlong term  0                              L <= max - buffer
//                  -(L - (max - buffer)) / buffer * penalty   max - buffer < L <= max
//                  -penalty                       L > max     (also the whole rule at buffer 0)
//                  (DAPO's soft overlong punishment)           (when "max" is set)
// The score is the sum of the terms that are set; at least one must be.

typedef struct {
    double target; // 0 = no target term
    double max;    // 0 = no overlong term
    double buffer, penalty;
} s_length_t;

static int s_length_create(const rl_reward_host_t *host, const char *config_json, void **state,
                           char *err, size_t err_len) {
    (void)host;
    static const char *const keys[] = {"target", "max", "buffer", "penalty", NULL};
    json_t *cfg = s_config(config_json, keys, err, err_len);
    if (!cfg) {
        return 1;
    }
    s_length_t c = {.target = 0, .max = 0, .buffer = 0, .penalty = 1.0};
    int has_target = s_config_number(cfg, "target", &c.target, err, err_len);
    int has_max = has_target < 0 ? -1 : s_config_number(cfg, "max", &c.max, err, err_len);
    int has_buf = has_max < 0 ? -1 : s_config_number(cfg, "buffer", &c.buffer, err, err_len);
    int has_pen = has_buf < 0 ? -1 : s_config_number(cfg, "penalty", &c.penalty, err, err_len);
    json_decref(cfg);
    if (has_pen < 0) {
        return 1;
    }
    if (!has_target && !has_max) {
        snprintf(err, err_len, "config: set 'target' (tokens), 'max' (tokens) or both");
        return 1;
    }
    if (has_target && !(c.target > 0)) {
        snprintf(err, err_len, "config: 'target' must be > 0 (got %g)", c.target);
        return 1;
    }
    if (has_max && !(c.max > 0)) {
        snprintf(err, err_len, "config: 'max' must be > 0 (got %g)", c.max);
        return 1;
    }
    if (!has_max && (has_buf || has_pen)) {
        snprintf(err, err_len, "config: 'buffer' and 'penalty' need 'max'");
        return 1;
    }
    if (!(c.buffer >= 0 && c.buffer <= c.max)) {
        snprintf(err, err_len, "config: 'buffer' must be in [0, max = %g] (got %g)", c.max,
                 c.buffer);
        return 1;
    }
    if (!(c.penalty >= 0) || !isfinite(c.penalty)) {
        snprintf(err, err_len, "config: 'penalty' must be >= 0 (got %g)", c.penalty);
        return 1;
    }
    s_length_t *s = malloc(sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return 1;
    }
    *s = c;
    *state = s;
    return 0;
}

static int s_length_score(void *state, const rl_reward_item_t *items, size_t n, double *out,
                          char *err, size_t err_len) {
    (void)err;
    (void)err_len;
    const s_length_t *c = state;
    for (size_t i = 0; i < n; i++) {
        double L = (double)items[i].n_completion_ids, r = 0.0;
        if (c->target > 0) {
            r -= fabs(L - c->target) / c->target;
        }
        if (c->max > 0) {
            double expected = c->max - c->buffer; // the length from which the penalty grows
            if (L > c->max) {
                r -= c->penalty;
            } else if (L > expected) {
                r -= (L - expected) / c->buffer * c->penalty; // buffer > 0 here: L <= max
            }
        }
        out[i] = r;
    }
    return 0;
}

static void s_length_destroy(void *state) {
    free(state);
}

static const rl_reward_table_t s_length_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = RL_RECIPE_REWARD_LENGTH_NAME,
    .create = s_length_create,
    .score = s_length_score,
    .destroy = s_length_destroy,
};

// ---------------------------------------------------------------------------------------------

const rl_reward_table_t *rl_reward_builtin_table(int which) {
    switch (which) {
    case RL_RECIPE_REWARD_MATH_ANSWER: return &s_math_table;
    case RL_RECIPE_REWARD_REGEX_FORMAT: return &s_regex_table;
    case RL_RECIPE_REWARD_LENGTH: return &s_length_table;
    default: return NULL;
    }
}

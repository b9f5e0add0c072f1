// rl_config_write — the resolved recipe as YAML (rl_recipe_to_yaml, what `rlctl validate`
// prints and `rlctl run` stores as <run.dir>/recipe.yaml): every key that applies, in schema
// order, defaults filled and paths absolute, written so the loader reads it back to the same
// recipe (the tests check this fixed point) and YAML 1.1 readers (PyYAML) read the same values.
//
// Not here: deciding values (rl_config_load.c and rl_config_check.c have done that) or the key
// reference of docs/recipe.md (cli/cmd_validate.c --keys).
#include "rl_config_priv.h"
#include "rl_err.h"
#include "rl_yaml.h"

#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} s_buf_t;

static void s_put(s_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(s_buf_t *b, const char *fmt, ...) {
    if (b->oom) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if (b->n + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + (size_t)n + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

// shortest text that reads back to the same double, with a '.' so YAML 1.1 readers
// (PyYAML) also see a float
static void s_put_double(s_buf_t *b, double v) {
    char t[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, v);
        if (strtod(t, NULL) == v) {
            break;
        }
    }
    char *e = strchr(t, 'e');
    if (!strchr(t, '.')) {
        if (e) {
            char tail[32];
            snprintf(tail, sizeof tail, "%s", e);
            snprintf(e, sizeof t - (size_t)(e - t), ".0%s", tail);
        } else {
            strcat(t, ".0");
        }
    }
    s_put(b, "%s", t);
}

static void s_put_quoted(s_buf_t *b, const char *s, size_t len) {
    s_put(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        const unsigned char *u = (const unsigned char *)s + i;
        if (ch == '"' || ch == '\\') {
            s_put(b, "\\%c", ch);
        } else if (ch == '\n') {
            s_put(b, "\\n");
        } else if (ch == '\t') {
            s_put(b, "\\t");
        } else if (ch < 0x20 || ch == 0x7f) {
            s_put(b, "\\x%02x", ch);
        } else if (ch == 0xc2 && i + 1 < len && u[1] >= 0x80 && u[1] <= 0xa0) {
            s_put(b, "\\x%02x", u[1]); // C1 controls, NEL and NBSP: YAML readers mangle them
            i++;
        } else if (ch == 0xe2 && i + 2 < len && u[1] == 0x80 && (u[2] == 0xa8 || u[2] == 0xa9)) {
            s_put(b, "\\%c", u[2] == 0xa8 ? 'L' : 'P'); // line/paragraph separators
            i += 2;
        } else if (ch == 0xef && i + 2 < len && ((u[1] == 0xbb && u[2] == 0xbf) ||
                                                 (u[1] == 0xbf && u[2] >= 0xbe))) {
            s_put(b, "\\u%s", u[1] == 0xbb ? "FEFF" : (u[2] == 0xbe ? "FFFE" : "FFFF"));
            i += 2;
        } else {
            s_put(b, "%c", ch);
        }
    }
    s_put(b, "\"");
}

static void s_put_str(s_buf_t *b, const char *s) {
    int plain = s[0] != '\0';
    for (const char *p = s; *p && plain; p++) {
        char ch = *p;
        plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '_' || ch == '/' || ch == '-' || ch == '.';
    }
    if (plain && !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '/' ||
                   s[0] == '_')) {
        plain = 0;
    }
    if (plain) {
        rl_yaml_node_t probe = {.kind = RL_YAML_SCALAR, .str = (char *)s, .len = strlen(s),
                                .plain = 1};
        plain = rl_yaml_scalar_type(&probe) == RL_YAML_T_STRING;
    }
    if (plain) {
        s_put(b, "%s", s);
    } else {
        s_put_quoted(b, s, strlen(s));
    }
}

static void s_put_json(s_buf_t *b, const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        int first = 1;
        s_put(b, "{");
        json_object_foreach((json_t *)j, k, v) {
            s_put(b, "%s", first ? "" : ", ");
            s_put_quoted(b, k, strlen(k));
            s_put(b, ": ");
            s_put_json(b, v);
            first = 0;
        }
        s_put(b, "}");
        break;
    }
    case JSON_ARRAY: {
        s_put(b, "[");
        for (size_t i = 0; i < json_array_size(j); i++) {
            s_put(b, "%s", i ? ", " : "");
            s_put_json(b, json_array_get(j, i));
        }
        s_put(b, "]");
        break;
    }
    case JSON_STRING: s_put_quoted(b, json_string_value(j), json_string_length(j)); break;
    case JSON_INTEGER: s_put(b, "%lld", (long long)json_integer_value(j)); break;
    case JSON_REAL: s_put_double(b, json_real_value(j)); break;
    case JSON_TRUE: s_put(b, "true"); break;
    case JSON_FALSE: s_put(b, "false"); break;
    default: s_put(b, "null"); break;
    }
}

static void s_put_value(s_buf_t *b, const rl_recipe_algos_t *algos, const rl_recipe_key_t *k,
                        const rl_cfg_dst_t *d) {
    switch (k->type) {
    case RL_RECIPE_T_BOOL: s_put(b, "%s", *RL_CFG_FIELD(d, k, bool) ? "true" : "false"); break;
    case RL_RECIPE_T_INT: s_put(b, "%d", *RL_CFG_FIELD(d, k, int)); break;
    case RL_RECIPE_T_FLOAT: s_put_double(b, *RL_CFG_FIELD(d, k, double)); break;
    case RL_RECIPE_T_ENUM: {
        int v = *RL_CFG_FIELD(d, k, int);
        s_put(b, "%s", v >= 0 ? rl_recipe_key_choices(algos, k)[v] : "null");
        break;
    }
    case RL_RECIPE_T_STRING:
    case RL_RECIPE_T_PATH_FILE:
    case RL_RECIPE_T_PATH_DIR: {
        const char *s = *RL_CFG_FIELD(d, k, char *);
        if (s) {
            s_put_str(b, s);
        } else {
            s_put(b, "null");
        }
        break;
    }
    case RL_RECIPE_T_PATH_LIST: {
        // one path as a scalar (as a recipe writes it), several as a list: either loads back
        // into the same paths
        const rl_recipe_strlist_t *l = RL_CFG_FIELD(d, k, rl_recipe_strlist_t);
        if (l->n == 0) {
            s_put(b, "null");
            break;
        }
        s_put(b, "%s", l->n > 1 ? "[" : "");
        for (int i = 0; i < l->n; i++) {
            s_put(b, "%s", i ? ", " : "");
            s_put_str(b, l->items[i]);
        }
        s_put(b, "%s", l->n > 1 ? "]" : "");
        break;
    }
    case RL_RECIPE_T_STRING_LIST: {
        const rl_recipe_strlist_t *l = RL_CFG_FIELD(d, k, rl_recipe_strlist_t);
        if (l->n == 0 && (k->flags & RL_RECIPE_K_OPTIONAL)) {
            s_put(b, "null"); // unset (env.command): [] would read back as an empty command
            break;
        }
        s_put(b, "[");
        for (int i = 0; i < l->n; i++) {
            s_put(b, "%s", i ? ", " : "");
            s_put_str(b, l->items[i]);
        }
        s_put(b, "]");
        break;
    }
    case RL_RECIPE_T_FLOAT_LIST: {
        const double *v = RL_CFG_FIELD(d, k, double);
        s_put(b, "[");
        for (int i = 0; i < k->count; i++) {
            s_put(b, "%s", i ? ", " : "");
            s_put_double(b, v[i]);
        }
        s_put(b, "]");
        break;
    }
    case RL_RECIPE_T_ENDPOINTS: {
        const rl_recipe_endpoints_t *l = RL_CFG_FIELD(d, k, rl_recipe_endpoints_t);
        s_put(b, "[");
        for (int i = 0; i < l->n; i++) {
            s_put(b, "%s{endpoint: ", i ? ", " : "");
            s_put_str(b, l->items[i].endpoint);
            s_put(b, ", server_key: ");
            s_put_str(b, l->items[i].server_key);
            s_put(b, "}");
        }
        s_put(b, "]");
        break;
    }
    case RL_RECIPE_T_HTTP: {
        const rl_recipe_http_t *h = RL_CFG_FIELD(d, k, rl_recipe_http_t);
        if (!h->url) {
            s_put(b, "null");
            break;
        }
        s_put(b, "{url: ");
        s_put_str(b, h->url);
        s_put(b, ", timeout: ");
        s_put_double(b, h->timeout);
        if (k->choices) { // an env's http has no format
            s_put(b, ", format: %s", k->choices[h->format]);
        }
        s_put(b, ", retries: %d}", h->retries);
        break;
    }
    case RL_RECIPE_T_MAP: {
        const char *s = *RL_CFG_FIELD(d, k, char *);
        json_t *j = s ? json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
        if (j) {
            s_put_json(b, j);
            json_decref(j);
        } else {
            s_put(b, "{}");
        }
        break;
    }
    }
}

int rl_recipe_to_yaml(const rl_recipe_t *recipe, char **out) {
    s_buf_t b = {0};
    const rl_cfg_section_t *sections;
    int nsections = rl_cfg_sections(&sections);
    s_put(&b, "# resolved recipe (rlctl validate): every default filled, paths absolute\n");
    for (int si = 0; si < nsections; si++) {
        const rl_cfg_section_t *sec = &sections[si];
        if (sec->is_list) {
            s_put(&b, "%s:%s\n", sec->name, recipe->n_rewards ? "" : " []");
            for (int e = 0; e < recipe->n_rewards; e++) {
                rl_cfg_dst_t de = {&recipe->rewards[e], e};
                int first = 1;
                rl_recipe_keys_t it;
                rl_recipe_keys_begin(&it, recipe->algos, recipe->algorithm.def);
                for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
                    if (strcmp(k->section, sec->name) != 0) {
                        continue;
                    }
                    // an entry names one source: omit the other rather than print null
                    const rl_recipe_reward_t *w = &recipe->rewards[e];
                    if ((k->offset == offsetof(rl_recipe_reward_t, builtin) && w->builtin < 0) ||
                        (k->offset == offsetof(rl_recipe_reward_t, plugin) && !w->plugin) ||
                        (k->offset == offsetof(rl_recipe_reward_t, model) && !w->model) ||
                        (k->offset == offsetof(rl_recipe_reward_t, command) &&
                         (!w->command.n || w->python_json)) ||
                        (k->offset == offsetof(rl_recipe_reward_t, python_json) &&
                         !w->python_json) ||
                        (k->offset == offsetof(rl_recipe_reward_t, http) && !w->http.url)) {
                        continue;
                    }
                    s_put(&b, "  %s %s: ", first ? "-" : " ", k->key);
                    s_put_value(&b, recipe->algos, k, &de);
                    s_put(&b, "\n");
                    first = 0;
                }
            }
            continue;
        }
        s_put(&b, "%s:\n", sec->name);
        rl_recipe_keys_t it;
        rl_recipe_keys_begin(&it, recipe->algos, recipe->algorithm.def);
        for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
            if (strcmp(k->section, sec->name) != 0 || !rl_cfg_applies(recipe, k)) {
                continue;
            }
            rl_cfg_dst_t dk = rl_cfg_dst(recipe, k);
            if (!dk.base) {
                continue; // (a settings key of no algorithm: not in a loaded recipe)
            }
            s_put(&b, "  %s: ", k->key);
            s_put_value(&b, recipe->algos, k, &dk);
            s_put(&b, "\n");
        }
    }
    if (b.oom) {
        free(b.s);
        *out = NULL;
        return RL_ENOMEM;
    }
    *out = b.s;
    return 0;
}

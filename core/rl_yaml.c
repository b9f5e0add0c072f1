// rl_yaml — libyaml events folded into a positioned tree (see rl_yaml.h for the rules).
#include "rl_yaml.h"
#include "rl_err.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

// ---------------------------------------------------------------------------------------------
// nodes

rl_yaml_node_t *rl_yaml_node_new(rl_yaml_kind_t kind, const char *file, int line, int col,
                                 const char *str, int plain) {
    rl_yaml_node_t *n = calloc(1, sizeof *n);
    if (!n) {
        return NULL;
    }
    n->kind = kind;
    n->file = file;
    n->line = line;
    n->col = col;
    n->plain = plain;
    if (kind == RL_YAML_SCALAR) {
        size_t len = str ? strlen(str) : 0;
        n->str = malloc(len + 1);
        if (!n->str) {
            free(n);
            return NULL;
        }
        if (len) {
            memcpy(n->str, str, len);
        }
        n->str[len] = '\0';
        n->len = len;
    }
    return n;
}

int rl_yaml_append(rl_yaml_node_t *parent, rl_yaml_node_t *kid, rl_yaml_node_t *val) {
    int need = parent->kind == RL_YAML_MAP ? 2 * (parent->n + 1) : parent->n + 1;
    if (need > parent->cap) {
        int cap = parent->cap ? parent->cap * 2 : 8;
        while (cap < need) {
            cap *= 2;
        }
        rl_yaml_node_t **k = realloc(parent->kids, (size_t)cap * sizeof *k);
        if (!k) {
            return RL_ENOMEM;
        }
        parent->kids = k;
        parent->cap = cap;
    }
    if (parent->kind == RL_YAML_MAP) {
        parent->kids[2 * parent->n] = kid;
        parent->kids[2 * parent->n + 1] = val;
    } else {
        parent->kids[parent->n] = kid;
    }
    parent->n++;
    return 0;
}

rl_yaml_node_t *rl_yaml_map_get(const rl_yaml_node_t *map, const char *key,
                                rl_yaml_node_t **key_out) {
    if (!map || map->kind != RL_YAML_MAP) {
        return NULL;
    }
    for (int i = 0; i < map->n; i++) {
        rl_yaml_node_t *k = map->kids[2 * i];
        if (k && k->kind == RL_YAML_SCALAR && strcmp(k->str, key) == 0) {
            if (key_out) {
                *key_out = k;
            }
            return map->kids[2 * i + 1];
        }
    }
    return NULL;
}

void rl_yaml_destroy(rl_yaml_node_t **node_p) {
    if (!node_p || !*node_p) {
        return;
    }
    rl_yaml_node_t *n = *node_p;
    int nk = n->kind == RL_YAML_MAP ? 2 * n->n : n->n;
    for (int i = 0; i < nk; i++) {
        rl_yaml_destroy(&n->kids[i]);
    }
    free(n->kids);
    free(n->str);
    free(n);
    *node_p = NULL;
}

// ---------------------------------------------------------------------------------------------
// scalar typing: a deliberately small subset of YAML 1.2's core schema, so that a value means
// the same thing to us, to PyYAML users reading our output, and to a human.

static int s_is_digits(const char *s, const char **end) {
    const char *p = s;
    while (*p >= '0' && *p <= '9') {
        p++;
    }
    *end = p;
    return p > s;
}

rl_yaml_type_t rl_yaml_scalar_type(const rl_yaml_node_t *node) {
    if (!node || node->kind != RL_YAML_SCALAR || !node->plain) {
        return RL_YAML_T_STRING;
    }
    const char *s = node->str;
    if (node->len != strlen(s)) {
        return RL_YAML_T_STRING; // embedded NUL: never a number
    }
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
        !strcmp(s, "NULL")) {
        return RL_YAML_T_NULL;
    }
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE") || !strcmp(s, "false") ||
        !strcmp(s, "False") || !strcmp(s, "FALSE")) {
        return RL_YAML_T_BOOL;
    }
    const char *p = s;
    if (*p == '+' || *p == '-') {
        p++;
    }
    const char *q;
    int int_digits = s_is_digits(p, &q);
    p = q;
    if (!*p && int_digits) {
        return RL_YAML_T_INT;
    }
    int frac_digits = 0;
    if (*p == '.') {
        frac_digits = s_is_digits(p + 1, &q);
        p = q;
    }
    if (!int_digits && !frac_digits) {
        return RL_YAML_T_STRING;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') {
            p++;
        }
        if (!s_is_digits(p, &q)) {
            return RL_YAML_T_STRING;
        }
        p = q;
    }
    return *p ? RL_YAML_T_STRING : RL_YAML_T_FLOAT;
}

void *rl_yaml_to_json(const rl_yaml_node_t *node) {
    if (!node) {
        return json_null();
    }
    if (node->kind == RL_YAML_SEQ) {
        json_t *a = json_array();
        for (int i = 0; a && i < node->n; i++) {
            json_t *v = rl_yaml_to_json(node->kids[i]);
            if (!v || json_array_append_new(a, v) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    if (node->kind == RL_YAML_MAP) {
        json_t *o = json_object();
        for (int i = 0; o && i < node->n; i++) {
            const rl_yaml_node_t *k = node->kids[2 * i];
            if (json_object_get(o, k->str)) {
                continue; // a duplicate key: the caller reports it; the first one wins
            }
            json_t *v = rl_yaml_to_json(node->kids[2 * i + 1]);
            if (!v || json_object_setn_new(o, k->str, k->len, v) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    switch (rl_yaml_scalar_type(node)) {
    case RL_YAML_T_NULL: return json_null();
    case RL_YAML_T_BOOL: return json_boolean(node->str[0] == 't' || node->str[0] == 'T');
    case RL_YAML_T_INT: {
        errno = 0;
        long long v = strtoll(node->str, NULL, 10);
        if (errno == ERANGE) {
            double d = strtod(node->str, NULL);
            return isfinite(d) ? json_real(d) : json_stringn(node->str, node->len);
        }
        return json_integer(v);
    }
    case RL_YAML_T_FLOAT: {
        double v = strtod(node->str, NULL);
        // JSON has no infinity: 1e999 stays the text the user wrote
        return isfinite(v) ? json_real(v) : json_stringn(node->str, node->len);
    }
    default: return json_stringn(node->str, node->len);
    }
}

// ---------------------------------------------------------------------------------------------
// parser

typedef struct {
    const char *file;
    int col0;
    int oneline; // col0 > 0 and the text holds no line break
    size_t len;
    int nodes;
    int depth;
    rl_yaml_node_t *stack[RL_YAML_MAX_DEPTH + 1];
    rl_yaml_node_t *root;
    char *err;
    size_t err_len;
} s_parse_t;

// A one-line text placed after "key=" (col0 > 0) reports its end-of-input problems at the end
// of that line, not on a line 2 the user never typed.
static int s_line(const s_parse_t *p, const yaml_mark_t *m) {
    return p->oneline ? 1 : (int)m->line + 1;
}

static int s_col(const s_parse_t *p, const yaml_mark_t *m) {
    if (p->oneline && m->line > 0) {
        return p->col0 + (int)p->len + 1;
    }
    return (int)m->column + 1 + (m->line == 0 ? p->col0 : 0);
}

static int s_fail(s_parse_t *p, const yaml_mark_t *m, const char *what, const char *detail) {
    return rl_errf(p->err, p->err_len, RL_EINVAL, "%s:%d:%d: %s%s", p->file, s_line(p, m),
                   s_col(p, m), what, detail ? detail : "");
}

static int s_tag_ok(const yaml_char_t *tag, const char *allowed) {
    return !tag || !strcmp((const char *)tag, allowed) || !strcmp((const char *)tag, "!");
}

// Hangs `n` under the open container (or makes it the root). Takes ownership of n.
static int s_attach(s_parse_t *p, rl_yaml_node_t *n, const yaml_mark_t *m) {
    if (++p->nodes > RL_YAML_MAX_NODES) {
        rl_yaml_destroy(&n);
        return s_fail(p, m, "too many nodes in one document (limit 100000)", NULL);
    }
    if (p->depth == 0) {
        p->root = n;
        return 0;
    }
    rl_yaml_node_t *top = p->stack[p->depth - 1];
    int rc;
    if (top->kind == RL_YAML_SEQ) {
        rc = rl_yaml_append(top, n, NULL);
    } else if (top->n > 0 && top->kids[2 * top->n - 1] == NULL) {
        top->kids[2 * top->n - 1] = n; // the value of the pending key
        return 0;
    } else {
        if (n->kind != RL_YAML_SCALAR) {
            rl_yaml_destroy(&n);
            return s_fail(p, m, "a mapping key must be a scalar, not a list or map", NULL);
        }
        if (top->n >= RL_YAML_MAX_MAP_KEYS) {
            rl_yaml_destroy(&n);
            return s_fail(p, m, "too many keys in one mapping (limit 1024)", NULL);
        }
        if (strlen(n->str) != n->len) { // keys are compared and printed as C strings
            rl_yaml_destroy(&n);
            return s_fail(p, m, "a mapping key contains a NUL character", NULL);
        }
        rc = rl_yaml_append(top, n, NULL);
    }
    if (rc) {
        rl_yaml_destroy(&n);
    }
    return rc;
}

int rl_yaml_parse(const char *text, size_t len, const char *file, int col0,
                  rl_yaml_node_t **out, char *err, size_t err_len) {
    *out = NULL;
    if (len > RL_YAML_MAX_INPUT) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: %zu bytes is too large (limit %u)", file,
                       len, RL_YAML_MAX_INPUT);
    }
    s_parse_t p = {.file = file, .col0 = col0, .len = len, .err = err, .err_len = err_len};
    p.oneline = col0 > 0 && !memchr(text, '\n', len) && !memchr(text, '\r', len);
    yaml_parser_t yp;
    if (!yaml_parser_initialize(&yp)) {
        return rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", file);
    }
    yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
    int rc = 0, docs = 0, done = 0;
    while (!done && rc == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&yp, &ev)) {
            if (yp.error == YAML_MEMORY_ERROR) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", file);
            } else if (yp.context) {
                char ctx[256];
                snprintf(ctx, sizeof ctx, " (%s at %d:%d)", yp.context,
                         s_line(&p, &yp.context_mark), s_col(&p, &yp.context_mark));
                rc = rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: YAML syntax error: %s%s", file,
                             s_line(&p, &yp.problem_mark), s_col(&p, &yp.problem_mark),
                             yp.problem ? yp.problem : "invalid YAML", ctx);
            } else {
                rc = rl_errf(err, err_len, RL_EINVAL, "%s:%d:%d: YAML syntax error: %s", file,
                             s_line(&p, &yp.problem_mark), s_col(&p, &yp.problem_mark),
                             yp.problem ? yp.problem : "invalid YAML");
            }
            break;
        }
        const yaml_mark_t *m = &ev.start_mark;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                rc = s_fail(&p, m, "only one YAML document is allowed (a second starts here)",
                            NULL);
            }
            break;
        case YAML_ALIAS_EVENT:
            rc = s_fail(&p, m, "aliases (*name) are not supported; write the value out", NULL);
            break;
        case YAML_SCALAR_EVENT: {
            if (!s_tag_ok(ev.data.scalar.tag, "tag:yaml.org,2002:str")) {
                rc = s_fail(&p, m, "unsupported tag ", (const char *)ev.data.scalar.tag);
                break;
            }
            int plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev.data.scalar.tag;
            rl_yaml_node_t *n = rl_yaml_node_new(RL_YAML_SCALAR, file, s_line(&p, m), s_col(&p, m),
                                                 NULL, plain);
            char *s = n ? malloc(ev.data.scalar.length + 1) : NULL;
            if (!s) {
                rl_yaml_destroy(&n);
                rc = rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", file);
                break;
            }
            memcpy(s, ev.data.scalar.value, ev.data.scalar.length);
            s[ev.data.scalar.length] = '\0';
            free(n->str);
            n->str = s;
            n->len = ev.data.scalar.length;
            rc = s_attach(&p, n, m);
            break;
        }
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
            int is_map = ev.type == YAML_MAPPING_START_EVENT;
            const yaml_char_t *tag = is_map ? ev.data.mapping_start.tag
                                            : ev.data.sequence_start.tag;
            if (!s_tag_ok(tag, is_map ? "tag:yaml.org,2002:map" : "tag:yaml.org,2002:seq")) {
                rc = s_fail(&p, m, "unsupported tag ", (const char *)tag);
                break;
            }
            if (p.depth >= RL_YAML_MAX_DEPTH) {
                rc = s_fail(&p, m, "nesting is too deep (limit 64 levels)", NULL);
                break;
            }
            rl_yaml_node_t *n = rl_yaml_node_new(is_map ? RL_YAML_MAP : RL_YAML_SEQ, file,
                                                 s_line(&p, m), s_col(&p, m), NULL, 0);
            if (!n) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", file);
                break;
            }
            rc = s_attach(&p, n, m);
            if (rc == 0) {
                p.stack[p.depth++] = n;
            }
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (p.depth > 0) {
                p.depth--;
            }
            break;
        default: break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&yp);
    if (rc) {
        rl_yaml_destroy(&p.root);
        return rc;
    }
    *out = p.root;
    return 0;
}

// rl_jinja_parse — tokens to a syntax tree with jinja2's grammar: the statements if/elif/else,
// for (else, `if` filter, tuple targets), set (expression, block, namespace attribute), macro,
// filter, with, break/continue, print; and expressions with jinja2's precedence, lowest first:
//   x if c else y  <  or  <  and  <  not  <  comparisons, in, not in  <  + -  <  ~
//   <  * / // %  <  ** (left-associative, as jinja2)  <  unary - +  <  filters |, tests `is`,
//   calls  <  attribute / item access, slices  <  literals, names, ( )
// Statements jinja2 has but this engine refuses (include, import, extends, block, call, ...)
// fail here, as do unknown filters and tests (jinja2 checks those at compile time too).
#include "rl_jinja_int.h"

#include "rl_err.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name; // "for", "if", ...
    int line, col;
    const char *const *ends;
    int nends;
} s_open_t;

typedef struct {
    rl_jarena_t *a;
    rl_jfail_t *f;
    const rl_jtok_t *t;
    size_t n, i;
    int depth;
    int loops; // enclosing for loops (reset inside a macro)
    int saw_varargs, saw_kwargs;
    s_open_t open[RL_JINJA_MAX_PARSE_DEPTH + 1];
    int nopen;
} s_parser_t;

// Growable array of node pointers (arena).
typedef struct {
    rl_jnode_t **v;
    size_t n, cap;
} s_vec_t;

static void s_vpush(s_parser_t *P, s_vec_t *v, rl_jnode_t *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        rl_jnode_t **nv = rl_jalloc(P->a, P->f, cap * sizeof(rl_jnode_t *));
        if (v->n) {
            memcpy(nv, v->v, v->n * sizeof(rl_jnode_t *));
        }
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

static const rl_jtok_t *s_cur(s_parser_t *P) {
    return &P->t[P->i];
}

static const rl_jtok_t *s_look(s_parser_t *P) {
    return &P->t[P->i + 1 < P->n ? P->i + 1 : P->n - 1];
}

static const rl_jtok_t *s_next(s_parser_t *P) {
    const rl_jtok_t *t = &P->t[P->i];
    if (P->i + 1 < P->n) {
        P->i++;
    }
    return t;
}

static void s_describe(const rl_jtok_t *t, char *o, size_t n) {
    switch (t->type) {
    case JT_EOF: snprintf(o, n, "end of template"); break;
    case JT_DATA: snprintf(o, n, "template data"); break;
    case JT_VAR_BEGIN: snprintf(o, n, "begin of print statement"); break;
    case JT_VAR_END: snprintf(o, n, "end of print statement"); break;
    case JT_BLOCK_BEGIN: snprintf(o, n, "begin of statement block"); break;
    case JT_BLOCK_END: snprintf(o, n, "end of statement block"); break;
    case JT_NAME: snprintf(o, n, "'%s'", t->s); break;
    case JT_STRING: snprintf(o, n, "string"); break;
    case JT_INT: snprintf(o, n, "integer"); break;
    case JT_FLOAT: snprintf(o, n, "float"); break;
    case JT_OP: snprintf(o, n, "'%s'", rl_jop_text(t->op)); break;
    default: snprintf(o, n, "token"); break;
    }
}

_Noreturn static void s_fail(s_parser_t *P, const rl_jtok_t *t, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
_Noreturn static void s_fail(s_parser_t *P, const rl_jtok_t *t, int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rl_jfail(P->f, code, t->line, t->col, "%s", msg);
}

_Noreturn static void s_unexpected(s_parser_t *P, const char *want) {
    char got[96];
    s_describe(s_cur(P), got, sizeof(got));
    if (s_cur(P)->type == JT_EOF && P->nopen > 0) {
        const s_open_t *o = &P->open[P->nopen - 1];
        s_fail(P, s_cur(P), RL_EINVAL,
               "unexpected end of template: the '%s' block opened at %d:%d is not closed "
               "(expected '%s')",
               o->name, o->line, o->col, o->ends[0]);
    }
    s_fail(P, s_cur(P), RL_EINVAL, "expected %s, got %s", want, got);
}

static int s_is_name(const rl_jtok_t *t, const char *name) {
    return t->type == JT_NAME && strcmp(t->s, name) == 0;
}

static int s_is_op(const rl_jtok_t *t, int op) {
    return t->type == JT_OP && t->op == op;
}

static void s_expect_op(s_parser_t *P, int op) {
    if (!s_is_op(s_cur(P), op)) {
        char want[16];
        snprintf(want, sizeof(want), "'%s'", rl_jop_text(op));
        s_unexpected(P, want);
    }
    s_next(P);
}

static void s_expect_name(s_parser_t *P, const char *name) {
    if (!s_is_name(s_cur(P), name)) {
        char want[64];
        snprintf(want, sizeof(want), "'%s'", name);
        s_unexpected(P, want);
    }
    s_next(P);
}

static const rl_jtok_t *s_expect_type(s_parser_t *P, int type, const char *want) {
    if (s_cur(P)->type != type) {
        s_unexpected(P, want);
    }
    return s_next(P);
}

static rl_jnode_t *s_node(s_parser_t *P, int kind, const rl_jtok_t *at) {
    rl_jnode_t *n = rl_jalloc(P->a, P->f, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

static void s_enter(s_parser_t *P) {
    if (++P->depth > RL_JINJA_MAX_PARSE_DEPTH) {
        s_fail(P, s_cur(P), RL_EINVAL, "template nested too deeply (more than %d levels)",
               RL_JINJA_MAX_PARSE_DEPTH);
    }
}

static void s_leave(s_parser_t *P) {
    P->depth--;
}

// ------------------------------------------------------------------------------------------
// expressions

static rl_jnode_t *s_expression(s_parser_t *P, int with_condexpr);
static rl_jnode_t *s_unary(s_parser_t *P, int with_filter);
static rl_jnode_t *s_primary(s_parser_t *P);
static rl_jnode_t *s_postfix(s_parser_t *P, rl_jnode_t *node);

enum { END_NONE = 0, END_IN = 1, END_RECURSIVE = 2 };

static int s_tuple_end(s_parser_t *P, int extra) {
    const rl_jtok_t *t = s_cur(P);
    // jinja2 3.1 passes its extra end rules ('in' of a for target, 'recursive') to
    // Token.test_any as one tuple, so they never match: `{% for a, in x %}` is a syntax error
    // there, and here
    (void)extra;
    return t->type == JT_VAR_END || t->type == JT_BLOCK_END || s_is_op(t, JO_RPAREN);
}

static rl_jnode_t *s_primary(s_parser_t *P);

// A primary of an assignment target; with_ns also reads `name.attr` (a namespace attribute).
static rl_jnode_t *s_target_primary(s_parser_t *P, int with_ns) {
    const rl_jtok_t *t = s_cur(P);
    if (with_ns && t->type == JT_NAME && s_is_op(s_look(P), JO_DOT) && strcmp(t->s, "true") &&
        strcmp(t->s, "false") && strcmp(t->s, "True") && strcmp(t->s, "False") &&
        strcmp(t->s, "none") && strcmp(t->s, "None")) {
        s_next(P);
        s_next(P);
        const rl_jtok_t *attr = s_cur(P);
        if (attr->type != JT_NAME) {
            char got[96];
            s_describe(attr, got, sizeof(got));
            s_fail(P, attr, RL_EINVAL, "expected a name, got %s", got);
        }
        s_next(P);
        rl_jnode_t *n = s_node(P, JN_NSREF, t);
        n->name = t->s;
        n->attr = attr->s;
        return n;
    }
    return s_primary(P);
}

// jinja2's parse_tuple: simplified (primaries only, for targets), with_condexpr, extra end
// rule, explicit parentheses (an empty tuple is allowed).
static rl_jnode_t *s_tuple(s_parser_t *P, int simplified, int with_condexpr, int extra,
                           int explicit_parens) {
    int with_ns = simplified == 2;
    const rl_jtok_t *start = s_cur(P);
    s_vec_t args = {0};
    int is_tuple = 0;
    for (;;) {
        if (args.n) {
            s_expect_op(P, JO_COMMA);
        }
        if (s_tuple_end(P, extra)) {
            break;
        }
        rl_jnode_t *e;
        if (simplified) {
            e = s_target_primary(P, with_ns);
        } else {
            e = s_expression(P, with_condexpr);
        }
        s_vpush(P, &args, e);
        if (s_is_op(s_cur(P), JO_COMMA)) {
            is_tuple = 1;
        } else {
            break;
        }
    }
    if (!is_tuple) {
        if (args.n) {
            return args.v[0];
        }
        if (!explicit_parens) {
            s_unexpected(P, "an expression");
        }
    }
    rl_jnode_t *n = s_node(P, JN_TUPLE, start);
    n->args = args.v;
    n->nargs = args.n;
    return n;
}

static void s_call_args(s_parser_t *P, rl_jnode_t *n) {
    const rl_jtok_t *open = s_cur(P);
    s_expect_op(P, JO_LPAREN);
    s_vec_t args = {0}, kwv = {0};
    const char **kwn = NULL;
    size_t kwcap = 0;
    int require_comma = 0;
    while (!s_is_op(s_cur(P), JO_RPAREN)) {
        if (require_comma) {
            s_expect_op(P, JO_COMMA);
            if (s_is_op(s_cur(P), JO_RPAREN)) {
                break;
            }
        }
        if (s_is_op(s_cur(P), JO_MUL) || s_is_op(s_cur(P), JO_POW)) {
            s_fail(P, s_cur(P), RL_EUNSUPPORTED, "*args / **kwargs in a call are not supported");
        }
        if (s_cur(P)->type == JT_NAME && s_is_op(s_look(P), JO_ASSIGN)) {
            const char *key = s_next(P)->s;
            s_next(P);
            for (size_t q = 0; q < kwv.n; q++) {
                if (strcmp(kwn[q], key) == 0) {
                    s_fail(P, open, RL_EINVAL, "keyword argument repeated: %s", key);
                }
            }
            rl_jnode_t *v = s_expression(P, 1);
            if (kwv.n == kwcap) {
                size_t cap = kwcap ? kwcap * 2 : 4;
                const char **nk = rl_jalloc(P->a, P->f, cap * sizeof(char *));
                if (kwv.n) {
                    memcpy(nk, kwn, kwv.n * sizeof(char *));
                }
                kwn = nk;
                kwcap = cap;
            }
            kwn[kwv.n] = key;
            s_vpush(P, &kwv, v);
        } else {
            if (kwv.n) {
                s_fail(P, open, RL_EINVAL,
                       "invalid syntax for function call expression "
                       "(positional argument after keyword argument)");
            }
            s_vpush(P, &args, s_expression(P, 1));
        }
        require_comma = 1;
    }
    s_expect_op(P, JO_RPAREN);
    n->args = args.v;
    n->nargs = args.n;
    n->kwv = kwv.v;
    n->kwn = kwn;
    n->nkw = kwv.n;
}

static const char *s_dotted_name(s_parser_t *P) {
    const rl_jtok_t *t = s_expect_type(P, JT_NAME, "a name");
    if (!s_is_op(s_cur(P), JO_DOT)) {
        return t->s;
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", t->s);
    while (s_is_op(s_cur(P), JO_DOT)) {
        s_next(P);
        const rl_jtok_t *u = s_expect_type(P, JT_NAME, "a name");
        size_t k = strlen(buf);
        snprintf(buf + k, sizeof(buf) - k, ".%s", u->s);
    }
    size_t len = strlen(buf);
    char *c = rl_jalloc(P->a, P->f, len + 1);
    memcpy(c, buf, len + 1);
    return c;
}

// One `| name(args)` (or with start_inline, the first filter of {% filter %} without a pipe).
static rl_jnode_t *s_filter(s_parser_t *P, rl_jnode_t *node, int start_inline) {
    while (s_is_op(s_cur(P), JO_PIPE) || start_inline) {
        if (!start_inline) {
            s_next(P);
        }
        const rl_jtok_t *at = s_cur(P);
        const char *name = s_dotted_name(P);
        int fid = rl_jfilter_id(name);
        if (fid == -1) {
            s_fail(P, at, RL_EINVAL, "no filter named '%s'", name);
        }
        if (fid == -2) {
            s_fail(P, at, RL_EUNSUPPORTED, "the filter '%s' is not supported", name);
        }
        rl_jnode_t *f = s_node(P, JN_FILTER, at);
        f->name = name;
        f->fid = fid;
        f->a = node;
        if (s_is_op(s_cur(P), JO_LPAREN)) {
            s_call_args(P, f);
        }
        node = f;
        start_inline = 0;
    }
    return node;
}

static rl_jnode_t *s_test(s_parser_t *P, rl_jnode_t *node) {
    const rl_jtok_t *is = s_next(P); // `is`
    int negated = 0;
    if (s_is_name(s_cur(P), "not")) {
        s_next(P);
        negated = 1;
    }
    const rl_jtok_t *at = s_cur(P);
    const char *name = s_dotted_name(P);
    int tid = rl_jtest_id(name);
    if (tid == -1) {
        s_fail(P, at, RL_EINVAL, "no test named '%s'", name);
    }
    if (tid == -2) {
        s_fail(P, at, RL_EUNSUPPORTED, "the test '%s' is not supported", name);
    }
    rl_jnode_t *t = s_node(P, JN_TEST, is);
    t->name = name;
    t->fid = tid;
    t->a = node;
    const rl_jtok_t *c = s_cur(P);
    if (s_is_op(c, JO_LPAREN)) {
        s_call_args(P, t);
    } else if ((c->type == JT_NAME || c->type == JT_STRING || c->type == JT_INT ||
                c->type == JT_FLOAT || s_is_op(c, JO_LBRACKET) || s_is_op(c, JO_LBRACE)) &&
               !s_is_name(c, "else") && !s_is_name(c, "or") && !s_is_name(c, "and")) {
        if (s_is_name(c, "is")) {
            s_fail(P, c, RL_EINVAL, "you cannot chain multiple tests with is");
        }
        rl_jnode_t *arg = s_postfix(P, s_primary(P));
        t->args = rl_jalloc(P->a, P->f, sizeof(rl_jnode_t *));
        t->args[0] = arg;
        t->nargs = 1;
    }
    if (negated) {
        rl_jnode_t *n = s_node(P, JN_NOT, is);
        n->a = t;
        return n;
    }
    return t;
}

static rl_jnode_t *s_subscribed(s_parser_t *P) {
    const rl_jtok_t *start = s_cur(P);
    rl_jnode_t *parts[3] = {NULL, NULL, NULL};
    if (s_is_op(s_cur(P), JO_COLON)) {
        s_next(P);
    } else {
        rl_jnode_t *e = s_expression(P, 1);
        if (!s_is_op(s_cur(P), JO_COLON)) {
            return e;
        }
        s_next(P);
        parts[0] = e;
    }
    const rl_jtok_t *c = s_cur(P);
    if (!s_is_op(c, JO_COLON) && !s_is_op(c, JO_RBRACKET) && !s_is_op(c, JO_COMMA)) {
        parts[1] = s_expression(P, 1);
    }
    if (s_is_op(s_cur(P), JO_COLON)) {
        s_next(P);
        c = s_cur(P);
        if (!s_is_op(c, JO_RBRACKET) && !s_is_op(c, JO_COMMA)) {
            parts[2] = s_expression(P, 1);
        }
    }
    rl_jnode_t *s = s_node(P, JN_SLICE, start);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static rl_jnode_t *s_subscript(s_parser_t *P, rl_jnode_t *node) {
    const rl_jtok_t *tok = s_next(P);
    if (s_is_op(tok, JO_DOT)) {
        const rl_jtok_t *at = s_next(P);
        if (at->type == JT_NAME) {
            rl_jnode_t *n = s_node(P, JN_ATTR, tok);
            n->a = node;
            n->name = at->s;
            return n;
        }
        if (at->type != JT_INT) {
            s_fail(P, at, RL_EINVAL, "expected name or number after '.'");
        }
        rl_jnode_t *k = s_node(P, JN_CONST, at);
        k->val = rl_jv_int(at->i);
        rl_jnode_t *n = s_node(P, JN_ITEM, tok);
        n->a = node;
        n->b = k;
        return n;
    }
    // '['
    s_vec_t args = {0};
    while (!s_is_op(s_cur(P), JO_RBRACKET)) {
        if (args.n) {
            s_expect_op(P, JO_COMMA);
        }
        s_vpush(P, &args, s_subscribed(P));
    }
    s_expect_op(P, JO_RBRACKET);
    rl_jnode_t *arg;
    if (args.n == 1) {
        arg = args.v[0];
    } else {
        for (size_t q = 0; q < args.n; q++) {
            if (args.v[q]->kind == JN_SLICE) {
                s_fail(P, tok, RL_EUNSUPPORTED, "multi-dimensional slices are not supported");
            }
        }
        arg = s_node(P, JN_TUPLE, tok);
        arg->args = args.v;
        arg->nargs = args.n;
    }
    rl_jnode_t *n = s_node(P, JN_ITEM, tok);
    n->a = node;
    n->b = arg;
    return n;
}

static rl_jnode_t *s_call(s_parser_t *P, rl_jnode_t *node) {
    rl_jnode_t *n = s_node(P, JN_CALL, s_cur(P));
    n->a = node;
    s_call_args(P, n);
    return n;
}

static rl_jnode_t *s_postfix(s_parser_t *P, rl_jnode_t *node) {
    for (;;) {
        const rl_jtok_t *t = s_cur(P);
        if (s_is_op(t, JO_DOT) || s_is_op(t, JO_LBRACKET)) {
            node = s_subscript(P, node);
        } else if (s_is_op(t, JO_LPAREN)) {
            node = s_call(P, node);
        } else {
            return node;
        }
    }
}

static rl_jnode_t *s_filter_expr(s_parser_t *P, rl_jnode_t *node) {
    for (;;) {
        const rl_jtok_t *t = s_cur(P);
        if (s_is_op(t, JO_PIPE)) {
            node = s_filter(P, node, 0);
        } else if (s_is_name(t, "is")) {
            node = s_test(P, node);
        } else if (s_is_op(t, JO_LPAREN)) {
            node = s_call(P, node);
        } else {
            return node;
        }
    }
}

static rl_jnode_t *s_primary(s_parser_t *P) {
    const rl_jtok_t *t = s_cur(P);
    rl_jnode_t *n;
    s_enter(P);
    if (t->type == JT_NAME) {
        s_next(P);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") ||
            !strcmp(t->s, "False")) {
            n = s_node(P, JN_CONST, t);
            n->val = rl_jv_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
            n = s_node(P, JN_CONST, t);
            n->val = rl_jv_none();
        } else {
            n = s_node(P, JN_NAME, t);
            n->name = t->s;
            if (!strcmp(t->s, "varargs")) {
                P->saw_varargs = 1;
            } else if (!strcmp(t->s, "kwargs")) {
                P->saw_kwargs = 1;
            }
        }
    } else if (t->type == JT_STRING) {
        // adjacent string literals are joined
        size_t len = 0, k = P->i;
        while (P->t[k].type == JT_STRING) {
            len += P->t[k].n;
            k++;
        }
        rl_jstr_t *s = rl_jalloc(P->a, P->f, sizeof(rl_jstr_t) + len + 1);
        size_t o = 0;
        while (s_cur(P)->type == JT_STRING) {
            const rl_jtok_t *u = s_next(P);
            memcpy(s->p + o, u->s, u->n);
            o += u->n;
        }
        s->p[len] = '\0';
        s->n = len;
        s->ncp = rl_jutf8_count(s->p, len);
        n = s_node(P, JN_CONST, t);
        n->val.t = JV_STR;
        n->val.u.s = s;
    } else if (t->type == JT_INT) {
        s_next(P);
        n = s_node(P, JN_CONST, t);
        n->val = rl_jv_int(t->i);
    } else if (t->type == JT_FLOAT) {
        s_next(P);
        n = s_node(P, JN_CONST, t);
        n->val = rl_jv_float(t->f);
    } else if (s_is_op(t, JO_LPAREN)) {
        s_next(P);
        n = s_tuple(P, 0, 1, END_NONE, 1);
        s_expect_op(P, JO_RPAREN);
    } else if (s_is_op(t, JO_LBRACKET)) {
        s_next(P);
        s_vec_t items = {0};
        while (!s_is_op(s_cur(P), JO_RBRACKET)) {
            if (items.n) {
                s_expect_op(P, JO_COMMA);
            }
            if (s_is_op(s_cur(P), JO_RBRACKET)) {
                break;
            }
            s_vpush(P, &items, s_expression(P, 1));
        }
        s_expect_op(P, JO_RBRACKET);
        n = s_node(P, JN_LIST, t);
        n->args = items.v;
        n->nargs = items.n;
    } else if (s_is_op(t, JO_LBRACE)) {
        s_next(P);
        s_vec_t keys = {0}, vals = {0};
        while (!s_is_op(s_cur(P), JO_RBRACE)) {
            if (keys.n) {
                s_expect_op(P, JO_COMMA);
            }
            if (s_is_op(s_cur(P), JO_RBRACE)) {
                break;
            }
            s_vpush(P, &keys, s_expression(P, 1));
            s_expect_op(P, JO_COLON);
            s_vpush(P, &vals, s_expression(P, 1));
        }
        s_expect_op(P, JO_RBRACE);
        n = s_node(P, JN_DICT, t);
        n->args = keys.v;
        n->nargs = keys.n;
        n->kwv = vals.v;
        n->nkw = vals.n;
    } else {
        char got[96];
        s_describe(t, got, sizeof(got));
        if (t->type == JT_EOF || t->type == JT_BLOCK_END || t->type == JT_VAR_END) {
            s_unexpected(P, "an expression");
        }
        s_fail(P, t, RL_EINVAL, "unexpected %s", got);
    }
    s_leave(P);
    return n;
}

static rl_jnode_t *s_unary(s_parser_t *P, int with_filter) {
    const rl_jtok_t *t = s_cur(P);
    rl_jnode_t *node;
    s_enter(P);
    if (s_is_op(t, JO_SUB) || s_is_op(t, JO_ADD)) {
        s_next(P);
        node = s_node(P, s_is_op(t, JO_SUB) ? JN_NEG : JN_POS, t);
        node->a = s_unary(P, 0);
    } else {
        node = s_primary(P);
    }
    node = s_postfix(P, node);
    if (with_filter) {
        node = s_filter_expr(P, node);
    }
    s_leave(P);
    return node;
}

static rl_jnode_t *s_bin(s_parser_t *P, const rl_jtok_t *at, int op, rl_jnode_t *a, rl_jnode_t *b) {
    rl_jnode_t *n = s_node(P, JN_BIN, at);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static rl_jnode_t *s_pow(s_parser_t *P) {
    rl_jnode_t *left = s_unary(P, 1);
    while (s_is_op(s_cur(P), JO_POW)) {
        const rl_jtok_t *t = s_next(P);
        left = s_bin(P, t, JO_POW, left, s_unary(P, 1));
    }
    return left;
}

static rl_jnode_t *s_math2(s_parser_t *P) {
    rl_jnode_t *left = s_pow(P);
    for (;;) {
        const rl_jtok_t *t = s_cur(P);
        if (t->type == JT_OP &&
            (t->op == JO_MUL || t->op == JO_DIV || t->op == JO_FLOORDIV || t->op == JO_MOD)) {
            s_next(P);
            left = s_bin(P, t, t->op, left, s_pow(P));
        } else {
            return left;
        }
    }
}

static rl_jnode_t *s_concat(s_parser_t *P) {
    rl_jnode_t *left = s_math2(P);
    while (s_is_op(s_cur(P), JO_TILDE)) {
        const rl_jtok_t *t = s_next(P);
        left = s_bin(P, t, JO_TILDE, left, s_math2(P));
    }
    return left;
}

static rl_jnode_t *s_math1(s_parser_t *P) {
    rl_jnode_t *left = s_concat(P);
    for (;;) {
        const rl_jtok_t *t = s_cur(P);
        if (t->type == JT_OP && (t->op == JO_ADD || t->op == JO_SUB)) {
            s_next(P);
            left = s_bin(P, t, t->op, left, s_concat(P));
        } else {
            return left;
        }
    }
}

static rl_jnode_t *s_compare(s_parser_t *P) {
    const rl_jtok_t *start = s_cur(P);
    rl_jnode_t *expr = s_math1(P);
    s_vec_t operands = {0};
    uint8_t ops[64];
    for (;;) {
        const rl_jtok_t *t = s_cur(P);
        int op;
        if (t->type == JT_OP && t->op >= JO_EQ && t->op <= JO_LTEQ) {
            s_next(P);
            op = t->op;
        } else if (s_is_name(t, "in")) {
            s_next(P);
            op = JN_IN;
        } else if (s_is_name(t, "not") && s_is_name(s_look(P), "in")) {
            s_next(P);
            s_next(P);
            op = JN_NOTIN;
        } else {
            break;
        }
        if (operands.n >= sizeof(ops)) {
            s_fail(P, t, RL_EUNSUPPORTED, "more than %zu chained comparisons", sizeof(ops));
        }
        ops[operands.n] = (uint8_t)op;
        s_vpush(P, &operands, s_math1(P));
    }
    if (!operands.n) {
        return expr;
    }
    rl_jnode_t *n = s_node(P, JN_CMP, start);
    n->a = expr;
    n->args = operands.v;
    n->nargs = operands.n;
    n->ops = rl_jalloc(P->a, P->f, operands.n);
    memcpy(n->ops, ops, operands.n);
    return n;
}

static rl_jnode_t *s_not(s_parser_t *P) {
    if (s_is_name(s_cur(P), "not")) {
        const rl_jtok_t *t = s_next(P);
        s_enter(P);
        rl_jnode_t *n = s_node(P, JN_NOT, t);
        n->a = s_not(P);
        s_leave(P);
        return n;
    }
    return s_compare(P);
}

static rl_jnode_t *s_and(s_parser_t *P) {
    rl_jnode_t *left = s_not(P);
    while (s_is_name(s_cur(P), "and")) {
        const rl_jtok_t *t = s_next(P);
        rl_jnode_t *n = s_node(P, JN_AND, t);
        n->a = left;
        n->b = s_not(P);
        left = n;
    }
    return left;
}

static rl_jnode_t *s_or(s_parser_t *P) {
    rl_jnode_t *left = s_and(P);
    while (s_is_name(s_cur(P), "or")) {
        const rl_jtok_t *t = s_next(P);
        rl_jnode_t *n = s_node(P, JN_OR, t);
        n->a = left;
        n->b = s_and(P);
        left = n;
    }
    return left;
}

static rl_jnode_t *s_condexpr(s_parser_t *P) {
    rl_jnode_t *expr1 = s_or(P);
    while (s_is_name(s_cur(P), "if")) {
        const rl_jtok_t *t = s_next(P);
        rl_jnode_t *n = s_node(P, JN_COND, t);
        n->a = s_or(P);
        n->b = expr1;
        if (s_is_name(s_cur(P), "else")) {
            s_next(P);
            s_enter(P);
            n->c = s_condexpr(P);
            s_leave(P);
        }
        expr1 = n;
    }
    return expr1;
}

static rl_jnode_t *s_expression(s_parser_t *P, int with_condexpr) {
    return with_condexpr ? s_condexpr(P) : s_or(P);
}

// ------------------------------------------------------------------------------------------
// statements

static int s_can_assign(const rl_jnode_t *n) {
    if (n->kind == JN_NAME || n->kind == JN_NSREF) {
        return 1;
    }
    if (n->kind == JN_TUPLE) {
        for (size_t i = 0; i < n->nargs; i++) {
            if (!s_can_assign(n->args[i])) {
                return 0;
            }
        }
        return 1;
    }
    return 0;
}

static rl_jnode_t *s_assign_target(s_parser_t *P, int name_only, int extra, int with_ns) {
    const rl_jtok_t *t = s_cur(P);
    rl_jnode_t *target;
    if (name_only) {
        s_expect_type(P, JT_NAME, "a name");
        target = s_node(P, JN_NAME, t);
        target->name = t->s;
    } else {
        // set targets may hold namespace attributes, also inside a tuple (jinja2 3.1)
        target = s_tuple(P, with_ns ? 2 : 1, 1, extra, 0);
    }
    if (!s_can_assign(target)) {
        s_fail(P, t, RL_EINVAL, "can't assign to this expression");
    }
    if (target->kind == JN_NAME &&
        (!strcmp(target->name, "true") || !strcmp(target->name, "false") ||
         !strcmp(target->name, "none") || !strcmp(target->name, "True") ||
         !strcmp(target->name, "False") || !strcmp(target->name, "None"))) {
        s_fail(P, t, RL_EINVAL, "can't assign to '%s'", target->name);
    }
    return target;
}

static rl_jnode_t **s_body(s_parser_t *P, const char *const *ends, int nends, size_t *nbody);

static void s_push_open(s_parser_t *P, const char *name, const rl_jtok_t *at,
                        const char *const *ends, int nends) {
    if (P->nopen >= RL_JINJA_MAX_PARSE_DEPTH) {
        s_fail(P, at, RL_EINVAL, "blocks nested too deeply (more than %d levels)",
               RL_JINJA_MAX_PARSE_DEPTH);
    }
    s_open_t *o = &P->open[P->nopen++];
    o->name = name;
    o->line = at->line;
    o->col = at->col;
    o->ends = ends;
    o->nends = nends;
}

// jinja2's parse_statements: optional ':' then '%}', then the body up to one of ends (which is
// left as the current token, unless drop_needle).
static rl_jnode_t **s_statements(s_parser_t *P, const char *const *ends, int nends, int drop_needle,
                                 size_t *nbody) {
    if (s_is_op(s_cur(P), JO_COLON)) {
        s_next(P);
    }
    s_expect_type(P, JT_BLOCK_END, "end of statement block");
    rl_jnode_t **body = s_body(P, ends, nends, nbody);
    if (drop_needle) {
        s_next(P);
    }
    return body;
}

static const char *const s_end_for[] = {"endfor", "else"};
static const char *const s_end_endfor[] = {"endfor"};
static const char *const s_end_if[] = {"endif", "elif", "else"};
static const char *const s_end_endif[] = {"endif"};
static const char *const s_end_set[] = {"endset"};
static const char *const s_end_macro[] = {"endmacro"};
static const char *const s_end_filter[] = {"endfilter"};
static const char *const s_end_with[] = {"endwith"};

static rl_jnode_t *s_stmt_for(s_parser_t *P, const rl_jtok_t *at) {
    rl_jnode_t *n = s_node(P, JN_FOR, at);
    n->a = s_assign_target(P, 0, END_IN, 0);
    s_expect_name(P, "in");
    n->b = s_tuple(P, 0, 0, END_RECURSIVE, 0);
    if (s_is_name(s_cur(P), "if")) {
        s_next(P);
        n->c = s_expression(P, 1);
    }
    if (s_is_name(s_cur(P), "recursive")) {
        // accepted; calling loop(...) to recurse is refused when it happens
        s_next(P);
    }
    s_push_open(P, "for", at, s_end_for, 2);
    P->loops++;
    n->body = s_statements(P, s_end_for, 2, 0, &n->nbody);
    P->loops--;
    const rl_jtok_t *e = s_next(P);
    P->nopen--;
    if (!strcmp(e->s, "else")) {
        s_push_open(P, "for", at, s_end_endfor, 1);
        n->orelse = s_statements(P, s_end_endfor, 1, 1, &n->norelse);
        P->nopen--;
    }
    return n;
}

static rl_jnode_t *s_stmt_if(s_parser_t *P, const rl_jtok_t *at) {
    rl_jnode_t *result = s_node(P, JN_IF, at), *node = result;
    s_push_open(P, "if", at, s_end_if, 3);
    for (;;) {
        node->a = s_tuple(P, 0, 0, END_NONE, 0);
        node->body = s_statements(P, s_end_if, 3, 0, &node->nbody);
        const rl_jtok_t *e = s_next(P);
        if (!strcmp(e->s, "elif")) {
            rl_jnode_t *el = s_node(P, JN_IF, e);
            el->elif = 1;
            node->orelse = rl_jalloc(P->a, P->f, sizeof(rl_jnode_t *));
            node->orelse[0] = el;
            node->norelse = 1;
            node = el; // evaluated iteratively: an elif chain adds no depth
            continue;
        }
        if (!strcmp(e->s, "else")) {
            P->open[P->nopen - 1].ends = s_end_endif;
            P->open[P->nopen - 1].nends = 1;
            node->orelse = s_statements(P, s_end_endif, 1, 1, &node->norelse);
        }
        break;
    }
    P->nopen--;
    return result;
}

static rl_jnode_t *s_stmt_set(s_parser_t *P, const rl_jtok_t *at) {
    rl_jnode_t *target = s_assign_target(P, 0, END_NONE, 1);
    if (s_is_op(s_cur(P), JO_ASSIGN)) {
        s_next(P);
        rl_jnode_t *n = s_node(P, JN_SET, at);
        n->a = target;
        n->b = s_tuple(P, 0, 1, END_NONE, 0);
        return n;
    }
    rl_jnode_t *n = s_node(P, JN_SETBLOCK, at);
    n->a = target;
    n->b = s_filter(P, NULL, 0);
    s_push_open(P, "set", at, s_end_set, 1);
    n->body = s_statements(P, s_end_set, 1, 1, &n->nbody);
    P->nopen--;
    return n;
}

static rl_jnode_t *s_stmt_macro(s_parser_t *P, const rl_jtok_t *at) {
    rl_jnode_t *n = s_node(P, JN_MACRO, at);
    n->name = s_assign_target(P, 1, END_NONE, 0)->name;
    s_expect_op(P, JO_LPAREN);
    s_vec_t defaults = {0};
    const char **params = NULL;
    size_t np = 0, cap = 0;
    while (!s_is_op(s_cur(P), JO_RPAREN)) {
        if (np) {
            s_expect_op(P, JO_COMMA);
        }
        const rl_jtok_t *pt = s_cur(P);
        const char *pname = s_assign_target(P, 1, END_NONE, 0)->name;
        if (s_is_op(s_cur(P), JO_ASSIGN)) {
            s_next(P);
            s_vpush(P, &defaults, s_expression(P, 1));
        } else if (defaults.n) {
            s_fail(P, pt, RL_EINVAL, "non-default argument follows default argument");
        }
        if (np == cap) {
            cap = cap ? cap * 2 : 4;
            const char **nv = rl_jalloc(P->a, P->f, cap * sizeof(char *));
            if (np) {
                memcpy(nv, params, np * sizeof(char *));
            }
            params = nv;
        }
        params[np++] = pname;
    }
    s_expect_op(P, JO_RPAREN);
    n->kwn = params;
    n->nkw = np;
    n->args = defaults.v;
    n->nargs = defaults.n;
    int saved_loops = P->loops, sv = P->saw_varargs, sk = P->saw_kwargs;
    P->loops = 0;
    P->saw_varargs = P->saw_kwargs = 0;
    s_push_open(P, "macro", at, s_end_macro, 1);
    n->body = s_statements(P, s_end_macro, 1, 1, &n->nbody);
    P->nopen--;
    n->varargs = (uint8_t)P->saw_varargs;
    n->kwargs = (uint8_t)P->saw_kwargs;
    P->loops = saved_loops;
    P->saw_varargs = sv | P->saw_varargs;
    P->saw_kwargs = sk | P->saw_kwargs;
    return n;
}

static rl_jnode_t *s_stmt_with(s_parser_t *P, const rl_jtok_t *at) {
    rl_jnode_t *n = s_node(P, JN_WITH, at);
    s_vec_t targets = {0}, values = {0};
    while (s_cur(P)->type != JT_BLOCK_END) {
        if (targets.n) {
            s_expect_op(P, JO_COMMA);
        }
        s_vpush(P, &targets, s_assign_target(P, 0, END_NONE, 0));
        s_expect_op(P, JO_ASSIGN);
        s_vpush(P, &values, s_expression(P, 1));
    }
    n->args = targets.v;
    n->nargs = targets.n;
    n->kwv = values.v;
    n->nkw = values.n;
    s_push_open(P, "with", at, s_end_with, 1);
    n->body = s_statements(P, s_end_with, 1, 1, &n->nbody);
    P->nopen--;
    return n;
}

static rl_jnode_t *s_statement(s_parser_t *P) {
    const rl_jtok_t *t = s_cur(P);
    if (t->type != JT_NAME) {
        s_fail(P, t, RL_EINVAL, "tag name expected");
    }
    const char *w = t->s;
    s_enter(P);
    rl_jnode_t *n = NULL;
    if (!strcmp(w, "for")) {
        s_next(P);
        n = s_stmt_for(P, t);
    } else if (!strcmp(w, "if")) {
        s_next(P);
        n = s_stmt_if(P, t);
    } else if (!strcmp(w, "set")) {
        s_next(P);
        n = s_stmt_set(P, t);
    } else if (!strcmp(w, "macro")) {
        s_next(P);
        n = s_stmt_macro(P, t);
    } else if (!strcmp(w, "filter")) {
        s_next(P);
        n = s_node(P, JN_FILTERBLOCK, t);
        n->b = s_filter(P, NULL, 1);
        s_push_open(P, "filter", t, s_end_filter, 1);
        n->body = s_statements(P, s_end_filter, 1, 1, &n->nbody);
        P->nopen--;
    } else if (!strcmp(w, "with")) {
        s_next(P);
        n = s_stmt_with(P, t);
    } else if (!strcmp(w, "print")) {
        s_next(P);
        n = s_node(P, JN_OUT, t);
        n->a = s_tuple(P, 0, 1, END_NONE, 0);
    } else if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        s_next(P);
        if (!P->loops) {
            s_fail(P, t, RL_EINVAL, "'%s' outside a for loop", w);
        }
        n = s_node(P, w[0] == 'b' ? JN_BREAK : JN_CONTINUE, t);
    } else if (!strcmp(w, "include") || !strcmp(w, "import") || !strcmp(w, "from") ||
               !strcmp(w, "extends") || !strcmp(w, "block") || !strcmp(w, "call") ||
               !strcmp(w, "autoescape") || !strcmp(w, "do") || !strcmp(w, "trans") ||
               !strcmp(w, "raw")) {
        s_fail(P, t, RL_EUNSUPPORTED, "the '%s' tag is not supported", w);
    } else {
        if (P->nopen > 0) {
            const s_open_t *o = &P->open[P->nopen - 1];
            char want[128] = "";
            for (int q = 0; q < o->nends; q++) {
                size_t k = strlen(want);
                snprintf(want + k, sizeof(want) - k, "%s'%s'", q ? " or " : "", o->ends[q]);
            }
            s_fail(P, t, RL_EINVAL,
                   "unknown tag '%s'; the innermost open block is the '%s' at %d:%d, which "
                   "expects %s",
                   w, o->name, o->line, o->col, want);
        }
        s_fail(P, t, RL_EINVAL, "unknown tag '%s'", w);
    }
    s_leave(P);
    return n;
}

static rl_jnode_t **s_body(s_parser_t *P, const char *const *ends, int nends, size_t *nbody) {
    s_vec_t body = {0};
    for (;;) {
        const rl_jtok_t *t = s_cur(P);
        if (t->type == JT_DATA) {
            s_next(P);
            rl_jnode_t *n = s_node(P, JN_TEXT, t);
            rl_jstr_t *s = rl_jalloc(P->a, P->f, sizeof(rl_jstr_t) + t->n + 1);
            memcpy(s->p, t->s, t->n + 1);
            s->n = t->n;
            s->ncp = rl_jutf8_count(s->p, s->n);
            n->val.t = JV_STR;
            n->val.u.s = s;
            s_vpush(P, &body, n);
        } else if (t->type == JT_VAR_BEGIN) {
            s_next(P);
            rl_jnode_t *n = s_node(P, JN_OUT, t);
            n->a = s_tuple(P, 0, 1, END_NONE, 0);
            s_expect_type(P, JT_VAR_END, "end of print statement ('}}')");
            s_vpush(P, &body, n);
        } else if (t->type == JT_BLOCK_BEGIN) {
            s_next(P);
            const rl_jtok_t *w = s_cur(P);
            for (int q = 0; q < nends; q++) {
                if (s_is_name(w, ends[q])) {
                    *nbody = body.n;
                    return body.v;
                }
            }
            s_vpush(P, &body, s_statement(P));
            s_expect_type(P, JT_BLOCK_END, "end of statement block ('%}')");
        } else if (t->type == JT_EOF) {
            if (nends) {
                s_unexpected(P, "an end tag");
            }
            *nbody = body.n;
            return body.v;
        } else {
            char got[96];
            s_describe(t, got, sizeof(got));
            s_fail(P, t, RL_EINVAL, "unexpected %s", got);
        }
    }
}

rl_jnode_t **rl_jparse(rl_jarena_t *a, rl_jfail_t *f, const rl_jtok_t *toks, size_t ntok,
                       size_t *nbody) {
    s_parser_t *P = rl_jalloc(a, f, sizeof(s_parser_t));
    P->a = a;
    P->f = f;
    P->t = toks;
    P->n = ntok;
    return s_body(P, NULL, 0, nbody);
}

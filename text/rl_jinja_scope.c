// rl_jinja_scope — decides, before rendering, which frame owns each variable and what it holds
// when the frame starts, the way jinja2's compiler does (its "symbols"). Not the evaluator: it
// only annotates the syntax tree with frame declarations (rl_jframe_t) that rl_jinja_eval.c
// creates scopes from.
//
// Why it matters: jinja2 decides ownership statically. A frame is the template, a loop body (and
// the loop's `if` test and `else` block, each separately), a macro, a set block, a filter block,
// a with block; an if block is not a frame. In a frame, a name that is assigned there belongs to
// that frame for the whole frame, and starts as:
//   - the caller's variable (resolved), when the frame reads it before it first assigns it,
//   - a copy of the enclosing frame's variable, when an enclosing frame owns the name,
//   - undefined otherwise, even when the caller passed a variable of that name;
// assignments in only some branches of an if also start from the caller's / enclosing value.
// So `{% for m in ms %}{{ b }}{% endfor %}{% set b = 1 %}` prints nothing for b inside the loop
// even when the caller passed b: the template owns b and has not set it yet. Names a frame only
// reads come from the nearest enclosing frame that owns them, live; otherwise from the caller.
//
// The analysis of a frame visits its statements in order (not descending into nested frames),
// then analyzes each nested frame with the finished frame as parent, as jinja2 does.
#include "rl_jinja_int.h"

#include "rl_err.h"

#include <string.h>

typedef struct {
    const char *name;
    uint8_t mode;   // JD_* or 0: no reference in this frame
    uint8_t stored; // assigned in this frame
} s_ent_t;

typedef struct s_sym s_sym_t;
struct s_sym {
    s_sym_t *parent;
    s_ent_t *e;
    size_t n, cap;
};

typedef struct {
    rl_jarena_t *a;
    rl_jfail_t *f;
} s_ctx_t;

static s_ent_t *s_get(s_sym_t *s, const char *name) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->e[i].name == name || strcmp(s->e[i].name, name) == 0) {
            return &s->e[i];
        }
    }
    return NULL;
}

static s_ent_t *s_add(s_ctx_t *c, s_sym_t *s, const char *name) {
    s_ent_t *e = s_get(s, name);
    if (e) {
        return e;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        s_ent_t *ne = rl_jalloc(c->a, c->f, cap * sizeof(s_ent_t));
        if (s->n) {
            memcpy(ne, s->e, s->n * sizeof(s_ent_t));
        }
        s->e = ne;
        s->cap = cap;
    }
    e = &s->e[s->n++];
    e->name = name;
    e->mode = 0;
    e->stored = 0;
    return e;
}

// Does this frame or an enclosing one own a reference to name?
static int s_find_ref(s_sym_t *s, const char *name) {
    for (; s; s = s->parent) {
        s_ent_t *e = s_get(s, name);
        if (e && e->mode) {
            return 1;
        }
    }
    return 0;
}

static void s_load(s_ctx_t *c, s_sym_t *s, const char *name) {
    if (!s_find_ref(s, name)) {
        s_add(c, s, name)->mode = JD_RESOLVE;
    }
}

static void s_store(s_ctx_t *c, s_sym_t *s, const char *name) {
    s_ent_t *e = s_add(c, s, name);
    e->stored = 1;
    if (!e->mode) {
        e->mode = (s->parent && s_find_ref(s->parent, name)) ? JD_ALIAS : JD_UNDEFINED;
    }
}

static void s_param(s_ctx_t *c, s_sym_t *s, const char *name) {
    s_ent_t *e = s_add(c, s, name);
    e->stored = 1;
    e->mode = JD_PARAM;
}

static s_sym_t *s_copy(s_ctx_t *c, const s_sym_t *s) {
    s_sym_t *d = rl_jalloc(c->a, c->f, sizeof(*d));
    d->parent = s->parent;
    d->n = d->cap = s->n;
    if (s->n) {
        d->e = rl_jalloc(c->a, c->f, s->n * sizeof(s_ent_t));
        memcpy(d->e, s->e, s->n * sizeof(s_ent_t));
    }
    return d;
}

// jinja2's branch_update: merge the branches of an if into the frame; a name assigned in some
// but not all branches (and not before the if) starts from the enclosing / caller's value.
static void s_branch_update(s_ctx_t *c, s_sym_t *s, s_sym_t **br, int nb) {
    const char *cand[256];
    int count[256], nc = 0;
    for (int b = 0; b < nb; b++) {
        for (size_t i = 0; i < br[b]->n; i++) {
            const s_ent_t *e = &br[b]->e[i];
            s_ent_t *own = s_get(s, e->name);
            if (!e->stored || (own && own->stored)) {
                continue;
            }
            int k = 0;
            while (k < nc && strcmp(cand[k], e->name) != 0) {
                k++;
            }
            if (k == nc) {
                if (nc == 256) {
                    rl_jfail(c->f, RL_EUNSUPPORTED, 0, 0,
                             "more than 256 names assigned in one if block");
                }
                cand[nc] = e->name;
                count[nc++] = 0;
            }
            count[k]++;
        }
    }
    for (int b = 0; b < nb; b++) {
        for (size_t i = 0; i < br[b]->n; i++) {
            const s_ent_t *e = &br[b]->e[i];
            s_ent_t *own = s_add(c, s, e->name);
            if (e->mode) {
                own->mode = e->mode;
            }
            if (e->stored) {
                own->stored = 1;
            }
        }
    }
    for (int k = 0; k < nc; k++) {
        if (count[k] == nb) {
            continue;
        }
        s_ent_t *own = s_get(s, cand[k]);
        own->mode = (s->parent && s_find_ref(s->parent, cand[k])) ? JD_ALIAS : JD_RESOLVE;
    }
}

// ------------------------------------------------------------------------------------------
// visiting a frame's own nodes

typedef struct {
    rl_jnode_t **v;
    size_t n, cap;
} s_pending_t; // nested frames, analyzed once the frame is complete

static void s_defer(s_ctx_t *c, s_pending_t *p, rl_jnode_t *n) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        rl_jnode_t **nv = rl_jalloc(c->a, c->f, cap * sizeof(rl_jnode_t *));
        if (p->n) {
            memcpy(nv, p->v, p->n * sizeof(rl_jnode_t *));
        }
        p->v = nv;
        p->cap = cap;
    }
    p->v[p->n++] = n;
}

static void s_expr(s_ctx_t *c, s_sym_t *s, const rl_jnode_t *n) {
    if (!n) {
        return;
    }
    switch (n->kind) {
    case JN_NAME: s_load(c, s, n->name); return;
    case JN_DICT:
        for (size_t i = 0; i < n->nargs; i++) {
            s_expr(c, s, n->args[i]);
            s_expr(c, s, n->kwv[i]);
        }
        return;
    case JN_CMP:
        s_expr(c, s, n->a);
        for (size_t i = 0; i < n->nargs; i++) {
            s_expr(c, s, n->args[i]);
        }
        return;
    default:
        // field order of jinja2's nodes: operand first, then arguments / operands in order;
        // a conditional expression visits its test (a) before its two values (b, c)
        s_expr(c, s, n->a);
        s_expr(c, s, n->b);
        s_expr(c, s, n->c);
        for (size_t i = 0; i < n->nargs; i++) {
            s_expr(c, s, n->args[i]);
        }
        for (size_t i = 0; i < n->nkw; i++) {
            s_expr(c, s, n->kwv[i]);
        }
        return;
    }
}

static void s_target(s_ctx_t *c, s_sym_t *s, const rl_jnode_t *t, int param) {
    if (t->kind == JN_NAME) {
        if (param) {
            s_param(c, s, t->name);
        } else {
            s_store(c, s, t->name);
        }
    } else if (t->kind == JN_NSREF) {
        s_load(c, s, t->name);
    } else {
        for (size_t i = 0; i < t->nargs; i++) {
            s_target(c, s, t->args[i], param);
        }
    }
}

static void s_stmts(s_ctx_t *c, s_sym_t *s, rl_jnode_t **body, size_t n, s_pending_t *p);

// The filter chain of a filter / set block: each filter's arguments (the chain starts from the
// block's text, a NULL operand).
static void s_filter_chain(s_ctx_t *c, s_sym_t *s, const rl_jnode_t *f) {
    if (!f) {
        return;
    }
    if (f->a && f->a->kind == JN_FILTER) {
        s_filter_chain(c, s, f->a);
    } else {
        s_expr(c, s, f->a);
    }
    for (size_t i = 0; i < f->nargs; i++) {
        s_expr(c, s, f->args[i]);
    }
    for (size_t i = 0; i < f->nkw; i++) {
        s_expr(c, s, f->kwv[i]);
    }
}

// An if with its elif chain as jinja2 holds it: test, then three branches (body, the elifs,
// else), each visited on a copy of the frame and merged.
static void s_if(s_ctx_t *c, s_sym_t *s, rl_jnode_t *n, s_pending_t *p) {
    s_expr(c, s, n->a);
    s_sym_t *br[3];
    br[0] = s_copy(c, s);
    s_stmts(c, br[0], n->body, n->nbody, p);
    br[1] = s_copy(c, s);
    const rl_jnode_t *last = n;
    while (last->norelse == 1 && last->orelse[0]->kind == JN_IF && last->orelse[0]->elif) {
        rl_jnode_t *el = last->orelse[0];
        // an elif is an if of its own with no elif / else branches
        s_expr(c, br[1], el->a);
        s_sym_t *eb[3] = {s_copy(c, br[1]), s_copy(c, br[1]), s_copy(c, br[1])};
        s_stmts(c, eb[0], el->body, el->nbody, p);
        s_branch_update(c, br[1], eb, 3);
        last = el;
    }
    br[2] = s_copy(c, s);
    s_stmts(c, br[2], last->orelse, last->norelse, p);
    s_branch_update(c, s, br, 3);
}

static void s_stmts(s_ctx_t *c, s_sym_t *s, rl_jnode_t **body, size_t n, s_pending_t *p) {
    for (size_t i = 0; i < n; i++) {
        rl_jnode_t *st = body[i];
        switch (st->kind) {
        case JN_OUT: s_expr(c, s, st->a); break;
        case JN_IF: s_if(c, s, st, p); break;
        case JN_FOR:
            s_expr(c, s, st->b);
            s_defer(c, p, st);
            break;
        case JN_SET:
            s_expr(c, s, st->b);
            s_target(c, s, st->a, 0);
            break;
        case JN_SETBLOCK:
            s_target(c, s, st->a, 0);
            s_defer(c, p, st);
            break;
        case JN_FILTERBLOCK:
            s_filter_chain(c, s, st->b);
            s_defer(c, p, st);
            break;
        case JN_MACRO:
            s_store(c, s, st->name);
            s_defer(c, p, st);
            break;
        case JN_WITH:
            for (size_t k = 0; k < st->nkw; k++) {
                s_expr(c, s, st->kwv[k]);
            }
            s_defer(c, p, st);
            break;
        default: break;
        }
    }
}

static rl_jframe_t *s_frame_of(s_ctx_t *c, const s_sym_t *s) {
    rl_jframe_t *fr = rl_jalloc(c->a, c->f, sizeof(*fr));
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        k += s->e[i].mode != 0;
    }
    fr->names = rl_jalloc(c->a, c->f, (k ? k : 1) * sizeof(char *));
    fr->modes = rl_jalloc(c->a, c->f, k ? k : 1);
    for (size_t i = 0; i < s->n; i++) {
        if (s->e[i].mode) {
            fr->names[fr->n] = s->e[i].name;
            fr->modes[fr->n++] = s->e[i].mode;
        }
    }
    return fr;
}

static void s_nested(s_ctx_t *c, s_sym_t *parent, rl_jnode_t *n);

// Analyzes the frame's own nodes (visit), then its nested frames with it as their parent.
static rl_jframe_t *s_finish(s_ctx_t *c, s_sym_t *s, s_pending_t *p) {
    for (size_t i = 0; i < p->n; i++) {
        s_nested(c, s, p->v[i]);
    }
    return s_frame_of(c, s);
}

static s_sym_t *s_new(s_ctx_t *c, s_sym_t *parent) {
    s_sym_t *s = rl_jalloc(c->a, c->f, sizeof(*s));
    s->parent = parent;
    return s;
}

static void s_nested(s_ctx_t *c, s_sym_t *parent, rl_jnode_t *n) {
    switch (n->kind) {
    case JN_FOR: {
        s_pending_t p = {0};
        s_sym_t *body = s_new(c, parent);
        s_param(c, body, "loop");
        s_target(c, body, n->a, 1);
        s_stmts(c, body, n->body, n->nbody, &p);
        n->fr[0] = s_finish(c, body, &p);
        s_pending_t pt = {0};
        s_sym_t *test = s_new(c, parent);
        s_target(c, test, n->a, 1);
        s_expr(c, test, n->c);
        n->fr[1] = s_finish(c, test, &pt);
        s_pending_t pe = {0};
        s_sym_t *els = s_new(c, parent);
        s_stmts(c, els, n->orelse, n->norelse, &pe);
        n->fr[2] = s_finish(c, els, &pe);
        return;
    }
    case JN_MACRO: {
        s_pending_t p = {0};
        s_sym_t *m = s_new(c, parent);
        for (size_t i = 0; i < n->nkw; i++) {
            s_param(c, m, n->kwn[i]);
        }
        for (size_t i = 0; i < n->nargs; i++) {
            s_expr(c, m, n->args[i]);
        }
        s_stmts(c, m, n->body, n->nbody, &p);
        if (n->varargs) {
            s_param(c, m, "varargs");
        }
        if (n->kwargs) {
            s_param(c, m, "kwargs");
        }
        n->fr[0] = s_finish(c, m, &p);
        return;
    }
    case JN_SETBLOCK: {
        s_pending_t p = {0};
        s_sym_t *b = s_new(c, parent);
        s_stmts(c, b, n->body, n->nbody, &p);
        n->fr[0] = s_finish(c, b, &p);
        return;
    }
    case JN_FILTERBLOCK: {
        s_pending_t p = {0};
        s_sym_t *b = s_new(c, parent);
        s_stmts(c, b, n->body, n->nbody, &p);
        s_filter_chain(c, b, n->b);
        n->fr[0] = s_finish(c, b, &p);
        return;
    }
    case JN_WITH: {
        s_pending_t p = {0};
        s_sym_t *w = s_new(c, parent);
        for (size_t i = 0; i < n->nargs; i++) {
            s_target(c, w, n->args[i], 1);
        }
        s_stmts(c, w, n->body, n->nbody, &p);
        n->fr[0] = s_finish(c, w, &p);
        return;
    }
    default: return;
    }
}

void rl_jscope_analyze(rl_jarena_t *a, rl_jfail_t *f, rl_jnode_t **body, size_t nbody,
                       rl_jframe_t **root) {
    s_ctx_t c = {a, f};
    s_pending_t p = {0};
    s_sym_t *s = s_new(&c, NULL);
    s_stmts(&c, s, body, nbody, &p);
    *root = s_finish(&c, s, &p);
}

// rl_jinja_eval — runs a compiled template: statements write text to the current output
// buffer, expressions produce values. Not the builtins (rl_jinja_builtin.c) nor the value
// model (rl_jinja_value.c).
//
// Scoping follows jinja2: the template has one top-level scope; each iteration of a for loop
// and each macro call gets a fresh scope whose parent is the scope the loop / macro was
// written in, so a {% set %} inside a loop body is gone after the iteration (namespace()
// objects are the way out, as in jinja2); if blocks share their scope; set and filter blocks and
// with blocks get an inner scope. A name is looked up through the scopes, then in the caller's
// variables, then among the globals, and is otherwise undefined.
#include "rl_jinja_int.h"

#include "rl_err.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { S_NORMAL = 0, S_BREAK, S_CONTINUE };

static void s_step(rl_jx_t *x, const rl_jnode_t *n) {
    if (++x->steps > x->max_steps) {
        rl_jx_fail(x, n, RL_EINVAL, "evaluation step limit of %" PRIu64 " reached", x->max_steps);
    }
}

static void s_enter(rl_jx_t *x, const rl_jnode_t *n) {
    if (++x->depth > x->max_depth) {
        rl_jx_fail(x, n, RL_EINVAL, "evaluation nested deeper than %d levels (recursion?)",
                   x->max_depth);
    }
}

// ------------------------------------------------------------------------------------------
// scopes

static rl_jv_t s_lookup(rl_jx_t *x, const char *name);

// A variable declared but not set yet reads as undefined, named as jinja2 names it.
static rl_jv_t s_missing(rl_jx_t *x, const char *name) {
    return rl_jv_undef(x, name, NULL, 0, NULL);
}

static rl_jv_t s_resolve(rl_jx_t *x, const char *name) {
    if (x->ctx) {
        rl_jv_t *v = rl_jdict_gets(x->ctx, name, strlen(name));
        if (v) {
            return *v;
        }
    }
    rl_jv_t g;
    if (rl_jglobal(name, &g)) {
        return g;
    }
    return s_missing(x, name);
}

// The scope of a frame entered now below `parent`, with the frame's variables declared and
// initialized as rl_jinja_scope.c decided.
static rl_jscope_t *s_scope_new(rl_jx_t *x, rl_jscope_t *parent, const rl_jframe_t *fr) {
    rl_jscope_t *s = rl_jx_alloc(x, sizeof(*s));
    s->parent = parent;
    if (!fr || !fr->n) {
        return s;
    }
    s->cap = fr->n;
    s->k = rl_jx_alloc(x, fr->n * sizeof(char *));
    s->v = rl_jx_alloc(x, fr->n * sizeof(rl_jv_t));
    rl_jscope_t *saved = x->scope;
    x->scope = parent;
    for (size_t i = 0; i < fr->n; i++) {
        const char *name = fr->names[i];
        rl_jv_t v;
        switch (fr->modes[i]) {
        case JD_RESOLVE: v = s_resolve(x, name); break;
        case JD_ALIAS: v = s_lookup(x, name); break;
        default: // parameters are set right after; undefined stays so
            v = s_missing(x, name);
            break;
        }
        s->k[i] = name;
        s->v[i] = v;
    }
    s->n = fr->n;
    x->scope = saved;
    return s;
}

static rl_jv_t *s_scope_find1(rl_jscope_t *s, const char *name) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->k[i] == name || strcmp(s->k[i], name) == 0) {
            return &s->v[i];
        }
    }
    return NULL;
}

static void s_scope_set(rl_jx_t *x, rl_jscope_t *s, const char *name, rl_jv_t v) {
    rl_jv_t *old = s_scope_find1(s, name);
    if (old) {
        *old = v;
        return;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        const char **nk = rl_jx_alloc(x, cap * sizeof(char *));
        rl_jv_t *nv = rl_jx_alloc(x, cap * sizeof(rl_jv_t));
        if (s->n) {
            memcpy(nk, s->k, s->n * sizeof(char *));
            memcpy(nv, s->v, s->n * sizeof(rl_jv_t));
        }
        s->k = nk;
        s->v = nv;
        s->cap = cap;
    }
    s->k[s->n] = name;
    s->v[s->n] = v;
    s->n++;
}

rl_jscope_t *rl_jscope_enter(rl_jx_t *x, rl_jscope_t *parent, const rl_jframe_t *fr) {
    return s_scope_new(x, parent, fr);
}

static rl_jv_t s_lookup(rl_jx_t *x, const char *name) {
    for (rl_jscope_t *s = x->scope; s; s = s->parent) {
        rl_jv_t *v = s_scope_find1(s, name);
        if (v) {
            return *v;
        }
    }
    return s_resolve(x, name);
}

// ------------------------------------------------------------------------------------------
// assignment

static void s_assign(rl_jx_t *x, const rl_jnode_t *target, rl_jv_t v, rl_jscope_t *scope) {
    if (target->kind == JN_NAME) {
        s_scope_set(x, scope, target->name, v);
        return;
    }
    if (target->kind == JN_NSREF) {
        rl_jscope_t *saved = x->scope;
        x->scope = scope;
        rl_jv_t ns = s_lookup(x, target->name);
        x->scope = saved;
        if (ns.t != JV_NS) {
            rl_jx_fail(x, target, RL_EINVAL,
                       "TemplateRuntimeError: cannot assign attribute on non-namespace object");
        }
        rl_jdict_set(x, ns.u.d, rl_jv_strz(x, target->attr), v);
        return;
    }
    // tuple unpacking, as Python
    if (v.t != JV_STR && v.t != JV_LIST && v.t != JV_DICT && v.t != JV_GEN && v.t != JV_UNDEF) {
        rl_jx_fail(x, target, RL_EINVAL, "TypeError: cannot unpack non-iterable %s object",
                   rl_jv_type_name(v));
    }
    size_t cnt;
    rl_jv_t *items = rl_jv_iter(x, target, v, &cnt);
    if (cnt > target->nargs) {
        rl_jx_fail(x, target, RL_EINVAL, "ValueError: too many values to unpack (expected %zu)",
                   target->nargs);
    }
    if (cnt < target->nargs) {
        rl_jx_fail(x, target, RL_EINVAL,
                   "ValueError: not enough values to unpack (expected %zu, got %zu)", target->nargs,
                   cnt);
    }
    for (size_t i = 0; i < cnt; i++) {
        s_assign(x, target->args[i], items[i], scope);
    }
}

// ------------------------------------------------------------------------------------------
// expressions

static int64_t s_slice_index(rl_jv_t v, int *ok) {
    if (v.t == JV_INT || v.t == JV_BOOL) {
        return v.u.i;
    }
    *ok = 0;
    return 0;
}

// obj[start:stop:step] as Python (jinja2 compiles slices to plain Python subscripts, so its
// errors are Python's).
static rl_jv_t s_slice(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t obj, const rl_jnode_t *sl) {
    rl_jv_t parts[3];
    int have[3], ok = 1;
    const rl_jnode_t *pn[3] = {sl->a, sl->b, sl->c};
    for (int i = 0; i < 3; i++) {
        have[i] = 0;
        if (pn[i]) {
            parts[i] = rl_jeval(x, pn[i]);
            have[i] = parts[i].t != JV_NONE;
        }
    }
    if (obj.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, obj);
    }
    int64_t start = have[0] ? s_slice_index(parts[0], &ok) : 0;
    int64_t stop = have[1] ? s_slice_index(parts[1], &ok) : 0;
    int64_t step = have[2] ? s_slice_index(parts[2], &ok) : 1;
    int seq = obj.t == JV_STR ||
              (obj.t == JV_LIST && (obj.k == JL_LIST || obj.k == JL_TUPLE || obj.k == JL_RANGE));
    if (obj.t == JV_DICT) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: unhashable type: 'slice'");
    }
    if (!seq) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: '%s' object is not subscriptable",
                   rl_jv_type_name(obj));
    }
    if (!ok) {
        rl_jx_fail(x, n, RL_EINVAL,
                   "TypeError: slice indices must be integers or None or have an __index__ "
                   "method");
    }
    if (step == 0) {
        rl_jx_fail(x, n, RL_EINVAL, "ValueError: slice step cannot be zero");
    }
    int64_t len = obj.t == JV_STR ? (int64_t)obj.u.s->ncp : (int64_t)obj.u.l->n;
    int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1;
    if (!have[0]) {
        start = step < 0 ? upper : lower;
    } else {
        if (start < 0) {
            start += len;
        }
        start = start < lower ? lower : start > upper ? upper : start;
    }
    if (!have[1]) {
        stop = step < 0 ? lower : upper;
    } else {
        if (stop < 0) {
            stop += len;
        }
        stop = stop < lower ? lower : stop > upper ? upper : stop;
    }
    int64_t cnt = 0;
    if (step > 0 && start < stop) {
        cnt = (stop - start + step - 1) / step;
    } else if (step < 0 && start > stop) {
        cnt = (start - stop + (-step) - 1) / (-step);
    }
    x->steps += (uint64_t)cnt;
    if (obj.t == JV_STR) {
        const rl_jstr_t *s = obj.u.s;
        // code point offsets
        size_t *off = rl_jx_alloc(x, ((size_t)len + 1) * sizeof(size_t));
        size_t i = 0, k = 0;
        while (i < s->n) {
            off[k++] = i;
            uint32_t c;
            i += rl_jutf8_dec(s->p + i, s->n - i, &c);
        }
        off[k] = s->n;
        rl_jbuf_t b = {0};
        if (step == 1) {
            rl_jbuf_put(x, &b, s->p + off[start], off[start + cnt] - off[start]);
        } else {
            for (int64_t q = 0, j = start; q < cnt; q++, j += step) {
                rl_jbuf_put(x, &b, s->p + off[j], off[j + 1] - off[j]);
            }
        }
        rl_jv_t r = rl_jv_str_cp(x, b.p ? b.p : "", b.n, (size_t)cnt);
        r.k = obj.k;
        return r;
    }
    rl_jv_t r = rl_jv_list(x, obj.k, (size_t)cnt);
    for (int64_t q = 0, j = start; q < cnt; q++, j += step) {
        r.u.l->v[q] = obj.u.l->v[j];
    }
    if (obj.k == JL_RANGE) {
        const rl_jlist_t *l = obj.u.l;
        r.u.l->r0 = l->r0 + start * l->rs;
        r.u.l->r1 = l->r0 + stop * l->rs;
        r.u.l->rs = l->rs * step;
    }
    return r;
}

static int s_compare(rl_jx_t *x, const rl_jnode_t *n, int op, rl_jv_t a, rl_jv_t b) {
    switch (op) {
    case JO_EQ: return rl_jv_eq(x, n, a, b, 0);
    case JO_NE: return !rl_jv_eq(x, n, a, b, 0);
    case JO_LT: return rl_jv_lt(x, n, a, b, 0);
    case JO_GT: return rl_jv_lt(x, n, b, a, 0);
    case JO_LTEQ: return rl_jv_lt(x, n, a, b, 0) || rl_jv_eq(x, n, a, b, 0);
    case JO_GTEQ: return rl_jv_lt(x, n, b, a, 0) || rl_jv_eq(x, n, a, b, 0);
    case JN_IN: return rl_jcontains(x, n, b, a);
    case JN_NOTIN: return !rl_jcontains(x, n, b, a);
    default: return 0;
    }
}

static void s_eval_args(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t **args, rl_jv_t **kwv) {
    *args = n->nargs ? rl_jx_alloc(x, n->nargs * sizeof(rl_jv_t)) : NULL;
    *kwv = n->nkw ? rl_jx_alloc(x, n->nkw * sizeof(rl_jv_t)) : NULL;
    for (size_t i = 0; i < n->nargs; i++) {
        (*args)[i] = rl_jeval(x, n->args[i]);
    }
    for (size_t i = 0; i < n->nkw; i++) {
        (*kwv)[i] = rl_jeval(x, n->kwv[i]);
    }
}

// A filter node applied to `input` (for filter blocks the chain starts from NULL).
static rl_jv_t s_apply_filters(rl_jx_t *x, const rl_jnode_t *f, rl_jv_t input) {
    rl_jv_t v =
        f->a ? (f->a->kind == JN_FILTER ? s_apply_filters(x, f->a, input) : rl_jeval(x, f->a))
             : input;
    rl_jv_t *args, *kwv;
    s_eval_args(x, f, &args, &kwv);
    return rl_jfilter(x, f, f->fid, v, args, f->nargs, f->kwn, kwv, f->nkw);
}

rl_jv_t rl_jeval(rl_jx_t *x, const rl_jnode_t *n) {
    s_step(x, n);
    s_enter(x, n);
    rl_jv_t r;
    switch (n->kind) {
    case JN_CONST: r = n->val; break;
    case JN_NAME: r = s_lookup(x, n->name); break;
    case JN_ATTR: r = rl_jgetattr(x, n, rl_jeval(x, n->a), n->name); break;
    case JN_ITEM: {
        rl_jv_t obj = rl_jeval(x, n->a);
        if (n->b->kind == JN_SLICE) {
            r = s_slice(x, n, obj, n->b);
        } else {
            r = rl_jgetitem(x, n, obj, rl_jeval(x, n->b));
        }
        break;
    }
    case JN_CALL: {
        rl_jv_t fn = rl_jeval(x, n->a);
        rl_jv_t *args, *kwv;
        s_eval_args(x, n, &args, &kwv);
        r = rl_jcall(x, n, fn, args, n->nargs, n->kwn, kwv, n->nkw);
        break;
    }
    case JN_FILTER: r = s_apply_filters(x, n, rl_jv_none()); break;
    case JN_TEST: {
        rl_jv_t v = rl_jeval(x, n->a);
        rl_jv_t *args, *kwv;
        s_eval_args(x, n, &args, &kwv);
        r = rl_jv_bool(rl_jtest(x, n, n->fid, v, args, n->nargs, n->kwn, kwv, n->nkw));
        break;
    }
    case JN_NOT: r = rl_jv_bool(!rl_jv_truthy(rl_jeval(x, n->a))); break;
    case JN_NEG:
    case JN_POS: {
        rl_jv_t v = rl_jeval(x, n->a);
        if (v.t == JV_UNDEF) {
            rl_jv_undef_fail(x, n, v);
        }
        if (v.t == JV_FLOAT) {
            r = rl_jv_float(n->kind == JN_NEG ? -v.u.f : v.u.f);
        } else if (v.t == JV_INT || v.t == JV_BOOL) {
            if (n->kind == JN_NEG && v.u.i == INT64_MIN) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "integer overflow (beyond 64 bits)");
            }
            r = rl_jv_int(n->kind == JN_NEG ? -v.u.i : v.u.i);
        } else {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: bad operand type for unary %c: '%s'",
                       n->kind == JN_NEG ? '-' : '+', rl_jv_type_name(v));
        }
        break;
    }
    case JN_BIN: r = rl_jbinop(x, n, n->op, rl_jeval(x, n->a), rl_jeval(x, n->b)); break;
    case JN_AND: {
        rl_jv_t a = rl_jeval(x, n->a);
        r = rl_jv_truthy(a) ? rl_jeval(x, n->b) : a;
        break;
    }
    case JN_OR: {
        rl_jv_t a = rl_jeval(x, n->a);
        r = rl_jv_truthy(a) ? a : rl_jeval(x, n->b);
        break;
    }
    case JN_CMP: {
        rl_jv_t left = rl_jeval(x, n->a);
        int ok = 1;
        for (size_t i = 0; i < n->nargs && ok; i++) {
            rl_jv_t right = rl_jeval(x, n->args[i]);
            ok = s_compare(x, n, n->ops[i], left, right);
            left = right;
        }
        r = rl_jv_bool(ok);
        break;
    }
    case JN_COND:
        if (rl_jv_truthy(rl_jeval(x, n->a))) {
            r = rl_jeval(x, n->b);
        } else if (n->c) {
            r = rl_jeval(x, n->c);
        } else {
            char *hint = rl_jx_alloc(x, 128);
            snprintf(hint, 128,
                     "the inline if-expression on line %d evaluated to false and no else "
                     "section was defined.",
                     n->line);
            r = rl_jv_undef(x, NULL, NULL, 0, hint);
        }
        break;
    case JN_LIST:
    case JN_TUPLE:
        r = rl_jv_list(x, n->kind == JN_LIST ? JL_LIST : JL_TUPLE, n->nargs);
        for (size_t i = 0; i < n->nargs; i++) {
            r.u.l->v[i] = rl_jeval(x, n->args[i]);
        }
        break;
    case JN_DICT:
        r = rl_jv_dict(x, n->nargs);
        for (size_t i = 0; i < n->nargs; i++) {
            rl_jv_t k = rl_jeval(x, n->args[i]);
            rl_jv_t v = rl_jeval(x, n->kwv[i]);
            if ((k.t == JV_LIST && k.k != JL_TUPLE) || k.t == JV_DICT || k.t == JV_NS ||
                k.t == JV_GEN) {
                rl_jx_fail(x, n->args[i], RL_EINVAL, "TypeError: unhashable type: '%s'",
                           rl_jv_type_name(k));
            }
            rl_jdict_set(x, r.u.d, k, v);
        }
        break;
    default: rl_jx_fail(x, n, RL_EUNSUPPORTED, "unsupported expression");
    }
    x->depth--;
    return r;
}

// ------------------------------------------------------------------------------------------
// macros

static rl_jv_t s_call_macro(rl_jx_t *x, const rl_jnode_t *site, rl_jv_t fn, rl_jv_t *args,
                            size_t nargs, const char **kwn, rl_jv_t *kwv, size_t nkw) {
    const rl_jmacro_t *m = fn.u.mac;
    const rl_jnode_t *def = m->def;
    size_t np = def->nkw, ndef = def->nargs;
    if (nargs > np && !def->varargs) {
        rl_jx_fail(x, site, RL_EINVAL, "TypeError: macro '%s' takes not more than %zu argument(s)",
                   def->name, np);
    }
    rl_jscope_t *scope = s_scope_new(x, m->closure, def->fr[0]);
    // keyword arguments that do not fill a parameter left empty by the positional ones
    uint8_t *used = nkw ? rl_jx_alloc(x, nkw) : NULL;
    rl_jscope_t *saved_scope = x->scope;
    rl_jbuf_t *saved_out = x->out;
    x->scope = scope;
    for (size_t i = 0; i < np; i++) {
        const char *p = def->kwn[i];
        int have = 0;
        rl_jv_t v = {0};
        if (i < nargs) {
            v = args[i];
            have = 1;
        } else {
            for (size_t q = 0; q < nkw; q++) {
                if (!used[q] && strcmp(kwn[q], p) == 0) {
                    v = kwv[q];
                    used[q] = 1;
                    have = 1;
                    break;
                }
            }
        }
        if (!have) {
            if (i >= np - ndef) {
                // defaults are evaluated inside the macro, after the earlier parameters
                v = rl_jeval(x, def->args[i - (np - ndef)]);
            } else {
                char *hint = rl_jx_alloc(x, strlen(p) + 40);
                sprintf(hint, "parameter '%s' was not provided", p);
                v = rl_jv_undef(x, p, NULL, 0, hint);
            }
        }
        s_scope_set(x, scope, p, v);
    }
    rl_jv_t extra_kw = rl_jv_dict(x, 4);
    for (size_t q = 0; q < nkw; q++) {
        if (!used[q]) {
            if (!def->kwargs) {
                rl_jx_fail(x, site, RL_EINVAL,
                           "TypeError: macro '%s' takes no keyword argument '%s'", def->name,
                           kwn[q]);
            }
            rl_jdict_set(x, extra_kw.u.d, rl_jv_strz(x, kwn[q]), kwv[q]);
        }
    }
    if (def->kwargs) {
        s_scope_set(x, scope, "kwargs", extra_kw);
    }
    if (def->varargs) {
        size_t extra = nargs > np ? nargs - np : 0;
        rl_jv_t va = rl_jv_list(x, JL_TUPLE, extra);
        for (size_t i = 0; i < extra; i++) {
            va.u.l->v[i] = args[np + i];
        }
        s_scope_set(x, scope, "varargs", va);
    }
    rl_jbuf_t *buf = rl_jx_alloc(x, sizeof(rl_jbuf_t));
    x->out = buf;
    rl_jexec_body(x, def->body, def->nbody, scope);
    x->out = saved_out;
    x->scope = saved_scope;
    return rl_jbuf_take(x, buf);
}

rl_jv_t rl_jcall(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fn, rl_jv_t *args, size_t nargs,
                 const char **kwn, rl_jv_t *kwv, size_t nkw) {
    switch (fn.t) {
    case JV_MACRO: {
        s_enter(x, n);
        rl_jv_t r = s_call_macro(x, n, fn, args, nargs, kwn, kwv, nkw);
        x->depth--;
        return r;
    }
    case JV_FUNC: return rl_jfunc_call(x, n, fn, args, nargs, kwn, kwv, nkw);
    case JV_METHOD: return rl_jmethod_call(x, n, fn, args, nargs, kwn, kwv, nkw);
    case JV_UNDEF: rl_jv_undef_fail(x, n, fn);
    case JV_LOOP:
        rl_jx_fail(x, n, RL_EUNSUPPORTED, "calling loop() (recursive loops) is not supported");
    default:
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: '%s' object is not callable", rl_jv_type_name(fn));
    }
}

// ------------------------------------------------------------------------------------------
// statements

static int s_exec(rl_jx_t *x, const rl_jnode_t *n);

static int s_exec_list(rl_jx_t *x, rl_jnode_t **body, size_t nbody) {
    for (size_t i = 0; i < nbody; i++) {
        int st = s_exec(x, body[i]);
        if (st != S_NORMAL) {
            return st;
        }
    }
    return S_NORMAL;
}

void rl_jexec_body(rl_jx_t *x, rl_jnode_t **body, size_t nbody, rl_jscope_t *scope) {
    rl_jscope_t *saved = x->scope;
    x->scope = scope;
    s_exec_list(x, body, nbody);
    x->scope = saved;
}

// Renders body in an inner scope into a new buffer; returns the text and in *st how the body
// ended (a break or continue inside a set / filter block leaves the enclosing loop body at once,
// without the assignment or output, as in jinja2's generated code).
static rl_jv_t s_capture(rl_jx_t *x, const rl_jnode_t *n, int *st_p, rl_jscope_t **scope_p) {
    rl_jbuf_t *saved_out = x->out;
    rl_jscope_t *saved_scope = x->scope;
    rl_jbuf_t *buf = rl_jx_alloc(x, sizeof(rl_jbuf_t));
    x->out = buf;
    x->scope = *scope_p = s_scope_new(x, saved_scope, n->fr[0]);
    int st = s_exec_list(x, n->body, n->nbody);
    x->out = saved_out;
    x->scope = saved_scope;
    *st_p = st;
    return rl_jbuf_take(x, buf);
}

static int s_exec_for(rl_jx_t *x, const rl_jnode_t *n) {
    rl_jv_t it = rl_jeval(x, n->b);
    size_t cnt;
    rl_jv_t *items = rl_jv_iter(x, n->b, it, &cnt);
    rl_jscope_t *outer = x->scope;
    if (n->c) {
        // `for x in y if cond`: filtered before the loop counts (loop.length is the filtered
        // count)
        rl_jv_t *kept = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
        size_t k = 0;
        for (size_t i = 0; i < cnt; i++) {
            rl_jscope_t *s = s_scope_new(x, outer, n->fr[1]);
            s_assign(x, n->a, items[i], s);
            x->scope = s;
            int keep = rl_jv_truthy(rl_jeval(x, n->c));
            x->scope = outer;
            if (keep) {
                kept[k++] = items[i];
            }
        }
        items = kept;
        cnt = k;
    }
    // jinja2 runs the else block unless some iteration reached the end of the body: an
    // iteration left by break or continue does not count
    int completed = 0;
    rl_jloop_t *loop = rl_jx_alloc(x, sizeof(*loop));
    loop->items = items;
    loop->length = (int64_t)cnt;
    rl_jv_t lv = {.t = JV_LOOP};
    lv.u.loop = loop;
    for (size_t i = 0; i < cnt; i++) {
        s_step(x, n);
        loop->index0 = (int64_t)i;
        rl_jscope_t *s = s_scope_new(x, outer, n->fr[0]);
        s_assign(x, n->a, items[i], s);
        s_scope_set(x, s, "loop", lv);
        x->scope = s;
        int st = s_exec_list(x, n->body, n->nbody);
        x->scope = outer;
        if (st == S_BREAK) {
            break;
        }
        completed |= st == S_NORMAL;
    }
    if (!completed && n->norelse) {
        x->scope = s_scope_new(x, outer, n->fr[2]);
        int st = s_exec_list(x, n->orelse, n->norelse);
        x->scope = outer;
        return st;
    }
    return S_NORMAL;
}

static int s_exec(rl_jx_t *x, const rl_jnode_t *n) {
    s_step(x, n);
    s_enter(x, n);
    int st = S_NORMAL;
    switch (n->kind) {
    case JN_TEXT: rl_jbuf_put(x, x->out, n->val.u.s->p, n->val.u.s->n); break;
    case JN_OUT: rl_jv_write_str(x, n, x->out, rl_jeval(x, n->a)); break;
    case JN_IF: {
        const rl_jnode_t *c = n;
        for (;;) {
            if (rl_jv_truthy(rl_jeval(x, c->a))) {
                st = s_exec_list(x, c->body, c->nbody);
                break;
            }
            if (c->norelse == 1 && c->orelse[0]->kind == JN_IF) {
                c = c->orelse[0];
                s_step(x, c);
                continue;
            }
            st = s_exec_list(x, c->orelse, c->norelse);
            break;
        }
        break;
    }
    case JN_FOR: st = s_exec_for(x, n); break;
    case JN_SET: s_assign(x, n->a, rl_jeval(x, n->b), x->scope); break;
    case JN_SETBLOCK: {
        rl_jscope_t *inner;
        rl_jv_t v = s_capture(x, n, &st, &inner);
        if (st != S_NORMAL) {
            break;
        }
        if (n->b) {
            v = s_apply_filters(x, n->b, v);
        }
        s_assign(x, n->a, v, x->scope);
        break;
    }
    case JN_FILTERBLOCK: {
        // the filters' arguments are evaluated in the block's own frame, as jinja2 does
        rl_jscope_t *inner, *outer = x->scope;
        rl_jv_t v = s_capture(x, n, &st, &inner);
        if (st != S_NORMAL) {
            break;
        }
        x->scope = inner;
        v = s_apply_filters(x, n->b, v);
        x->scope = outer;
        rl_jv_write_str(x, n, x->out, v);
        break;
    }
    case JN_MACRO: {
        rl_jv_t m = {.t = JV_MACRO};
        rl_jmacro_t *mac = rl_jx_alloc(x, sizeof(*mac));
        mac->def = n;
        mac->closure = x->scope;
        m.u.mac = mac;
        s_scope_set(x, x->scope, n->name, m);
        break;
    }
    case JN_WITH: {
        rl_jscope_t *outer = x->scope, *s = s_scope_new(x, outer, n->fr[0]);
        for (size_t i = 0; i < n->nargs; i++) {
            s_assign(x, n->args[i], rl_jeval(x, n->kwv[i]), s);
        }
        x->scope = s;
        st = s_exec_list(x, n->body, n->nbody);
        x->scope = outer;
        break;
    }
    case JN_BREAK: st = S_BREAK; break;
    case JN_CONTINUE: st = S_CONTINUE; break;
    default: rl_jx_fail(x, n, RL_EUNSUPPORTED, "unsupported statement");
    }
    x->depth--;
    return st;
}

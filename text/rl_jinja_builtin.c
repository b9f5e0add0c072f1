// rl_jinja_builtin — what a template can call: jinja2's filters and tests, the methods of
// Python's str / dict / list that templates use, attribute and item access as the sandboxed
// environment does them, Python's operators, and the globals (range, dict, namespace,
// raise_exception, strftime_now). Each follows jinja2 3.1 and Python 3; what this engine does
// not implement fails with a message naming it rather than doing something else.
#include "rl_jinja_int.h"

#include "rl_err.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

// ------------------------------------------------------------------------------------------
// argument binding

#define S_MAXP 8

// Binds positional and keyword arguments to the parameter names of `fname` (Python rules).
// have[i] tells whether parameter i was given.
static void s_bind(rl_jx_t *x, const rl_jnode_t *n, const char *fname, const char *const *params,
                   int np, rl_jv_t *args, size_t nargs, const char **kwn, rl_jv_t *kwv, size_t nkw,
                   rl_jv_t *out, int *have) {
    for (int i = 0; i < np; i++) {
        have[i] = 0;
        out[i] = rl_jv_none();
    }
    if (nargs > (size_t)np) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: %s() takes at most %d argument(s) (%zu given)",
                   fname, np, nargs);
    }
    for (size_t i = 0; i < nargs; i++) {
        out[i] = args[i];
        have[i] = 1;
    }
    for (size_t q = 0; q < nkw; q++) {
        int found = 0;
        for (int i = 0; i < np; i++) {
            if (strcmp(params[i], kwn[q]) == 0) {
                if (have[i]) {
                    rl_jx_fail(x, n, RL_EINVAL,
                               "TypeError: %s() got multiple values for argument '%s'", fname,
                               kwn[q]);
                }
                out[i] = kwv[q];
                have[i] = 1;
                found = 1;
                break;
            }
        }
        if (!found) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: %s() got an unexpected keyword argument '%s'",
                       fname, kwn[q]);
        }
    }
}

static void s_no_kwargs(rl_jx_t *x, const rl_jnode_t *n, const char *fname, size_t nkw) {
    if (nkw) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: %s() takes no keyword arguments", fname);
    }
}

static void s_nargs(rl_jx_t *x, const rl_jnode_t *n, const char *fname, size_t nargs, size_t lo,
                    size_t hi) {
    if (nargs < lo || nargs > hi) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: %s() takes %zu to %zu arguments (%zu given)", fname,
                   lo, hi, nargs);
    }
}

const char *rl_jneed_str(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, const char *what) {
    if (v.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, v);
    }
    if (v.t != JV_STR) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: %s must be str, not %s", what, rl_jv_type_name(v));
    }
    return v.u.s->p;
}

int64_t rl_jneed_int(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, const char *what) {
    if (v.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, v);
    }
    if (v.t != JV_INT && v.t != JV_BOOL) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: %s must be an integer, not %s", what,
                   rl_jv_type_name(v));
    }
    return v.u.i;
}

// soft_str: strings as they are (Markup kept), everything else through str().
static rl_jv_t s_soft_str(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v) {
    return rl_jv_to_str(x, n, v);
}

static rl_jv_t s_plain(rl_jv_t v) {
    v.k = 0;
    return v;
}

void rl_jno_markup(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, const char *what) {
    if (v.t == JV_STR && v.k) {
        rl_jx_fail(x, n, RL_EUNSUPPORTED,
                   "%s on a Markup string (from |safe or |escape) is not supported", what);
    }
}

static rl_jv_t s_tuple2(rl_jx_t *x, rl_jv_t a, rl_jv_t b) {
    rl_jv_t t = rl_jv_list(x, JL_TUPLE, 2);
    t.u.l->v[0] = a;
    t.u.l->v[1] = b;
    return t;
}

static int s_hashable(rl_jv_t v) {
    return !((v.t == JV_LIST && v.k != JL_TUPLE && v.k != JL_RANGE) || v.t == JV_DICT ||
             v.t == JV_NS);
}

// ------------------------------------------------------------------------------------------
// operators

static int64_t s_checked(rl_jx_t *x, const rl_jnode_t *n, int ok, int64_t v) {
    if (!ok) {
        rl_jx_fail(x, n, RL_EUNSUPPORTED, "integer overflow (beyond 64 bits)");
    }
    return v;
}

static double s_float_floordiv(double vx, double wx) {
    double mod = fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod != 0.0) {
        if ((wx < 0) != (mod < 0)) {
            div -= 1.0;
        }
    }
    double fd;
    if (div != 0.0) {
        fd = floor(div);
        if (div - fd > 0.5) {
            fd += 1.0;
        }
    } else {
        fd = copysign(0.0, vx / wx);
    }
    return fd;
}

static double s_float_mod(double vx, double wx) {
    double mod = fmod(vx, wx);
    if (mod != 0.0) {
        if ((wx < 0) != (mod < 0)) {
            mod += wx;
        }
    } else {
        mod = copysign(0.0, wx);
    }
    return mod;
}

static const char *s_opname(int op) {
    return rl_jop_text(op);
}

_Noreturn static void s_optype(rl_jx_t *x, const rl_jnode_t *n, int op, rl_jv_t a, rl_jv_t b) {
    if (a.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, a);
    }
    if (b.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, b);
    }
    if ((a.t == JV_LIST && (a.k == JL_KEYS || a.k == JL_ITEMS)) ||
        (b.t == JV_LIST && (b.k == JL_KEYS || b.k == JL_ITEMS))) {
        rl_jx_fail(x, n, RL_EUNSUPPORTED, "set operations on dict views are not supported");
    }
    if (op == JO_ADD && a.t == JV_STR) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: can only concatenate str (not \"%s\") to str",
                   rl_jv_type_name(b));
    }
    if (op == JO_ADD && a.t == JV_LIST && a.k == JL_LIST) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: can only concatenate list (not \"%s\") to list",
                   rl_jv_type_name(b));
    }
    rl_jx_fail(x, n, RL_EINVAL, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
               s_opname(op), rl_jv_type_name(a), rl_jv_type_name(b));
}

static rl_jv_t s_repeat(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t seq, int64_t times) {
    if (times < 0) {
        times = 0;
    }
    size_t len = seq.t == JV_STR ? seq.u.s->n : seq.u.l->n;
    if (len && (uint64_t)times > (uint64_t)(x->arena.limit ? x->arena.limit : SIZE_MAX) / len) {
        rl_jx_fail(x, n, RL_EINVAL, "repetition too large for the memory limit");
    }
    x->steps += (uint64_t)times * (len / 64 + 1);
    if (seq.t == JV_STR) {
        size_t total = len * (size_t)times;
        rl_jstr_t *s = rl_jx_alloc(x, sizeof(rl_jstr_t) + total + 1);
        for (int64_t i = 0; i < times; i++) {
            memcpy(s->p + (size_t)i * len, seq.u.s->p, len);
        }
        s->n = total;
        s->ncp = seq.u.s->ncp * (size_t)times;
        rl_jv_t r = {.t = JV_STR, .k = seq.k};
        r.u.s = s;
        return r;
    }
    rl_jv_t r = rl_jv_list(x, seq.k == JL_TUPLE ? JL_TUPLE : JL_LIST, len * (size_t)times);
    for (int64_t i = 0; i < times; i++) {
        memcpy(r.u.l->v + (size_t)i * len, seq.u.l->v, len * sizeof(rl_jv_t));
    }
    return r;
}

static rl_jv_t s_concat_str(rl_jx_t *x, rl_jv_t a, rl_jv_t b) {
    // Markup + str escapes the plain side and stays Markup (markupsafe)
    if (a.k != b.k) {
        if (a.k) {
            b = rl_jstr_escape(x, b);
        } else {
            a = rl_jstr_escape(x, a);
        }
    }
    rl_jstr_t *s = rl_jx_alloc(x, sizeof(rl_jstr_t) + a.u.s->n + b.u.s->n + 1);
    memcpy(s->p, a.u.s->p, a.u.s->n);
    memcpy(s->p + a.u.s->n, b.u.s->p, b.u.s->n);
    s->n = a.u.s->n + b.u.s->n;
    s->ncp = a.u.s->ncp + b.u.s->ncp;
    rl_jv_t r = {.t = JV_STR, .k = a.k};
    r.u.s = s;
    return r;
}

rl_jv_t rl_jbinop(rl_jx_t *x, const rl_jnode_t *n, int op, rl_jv_t a, rl_jv_t b) {
    if (op == JO_TILDE) {
        rl_jbuf_t buf = {0};
        rl_jv_write_str(x, n, &buf, a);
        rl_jv_write_str(x, n, &buf, b);
        return rl_jbuf_take(x, &buf);
    }
    if (op == JO_MOD && a.t == JV_STR) {
        // str.__mod__ runs first: an undefined right side is a mapping to it, not an error
        return rl_jpercent(x, n, a, b);
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, a.t == JV_UNDEF ? a : b);
    }
    int num = rl_jv_is_number(a) && rl_jv_is_number(b);
    int ints = num && a.t != JV_FLOAT && b.t != JV_FLOAT;
    int64_t r;
    switch (op) {
    case JO_ADD:
        if (ints) {
            int ok = !__builtin_add_overflow(a.u.i, b.u.i, &r);
            return rl_jv_int(s_checked(x, n, ok, r));
        }
        if (num) {
            return rl_jv_float(rl_jv_num(a) + rl_jv_num(b));
        }
        if (a.t == JV_STR && b.t == JV_STR) {
            return s_concat_str(x, a, b);
        }
        if (a.t == JV_LIST && b.t == JV_LIST && a.k == b.k && (a.k == JL_LIST || a.k == JL_TUPLE)) {
            rl_jv_t l = rl_jv_list(x, a.k, a.u.l->n + b.u.l->n);
            memcpy(l.u.l->v, a.u.l->v, a.u.l->n * sizeof(rl_jv_t));
            memcpy(l.u.l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(rl_jv_t));
            x->steps += l.u.l->n / 8;
            return l;
        }
        break;
    case JO_SUB:
        if (ints) {
            int ok = !__builtin_sub_overflow(a.u.i, b.u.i, &r);
            return rl_jv_int(s_checked(x, n, ok, r));
        }
        if (num) {
            return rl_jv_float(rl_jv_num(a) - rl_jv_num(b));
        }
        break;
    case JO_MUL:
        if (ints) {
            int ok = !__builtin_mul_overflow(a.u.i, b.u.i, &r);
            return rl_jv_int(s_checked(x, n, ok, r));
        }
        if (num) {
            return rl_jv_float(rl_jv_num(a) * rl_jv_num(b));
        }
        if ((a.t == JV_STR || (a.t == JV_LIST && (a.k == JL_LIST || a.k == JL_TUPLE))) &&
            (b.t == JV_INT || b.t == JV_BOOL)) {
            return s_repeat(x, n, a, b.u.i);
        }
        if ((b.t == JV_STR || (b.t == JV_LIST && (b.k == JL_LIST || b.k == JL_TUPLE))) &&
            (a.t == JV_INT || a.t == JV_BOOL)) {
            return s_repeat(x, n, b, a.u.i);
        }
        break;
    case JO_DIV:
        if (num) {
            if (rl_jv_num(b) == 0.0) {
                rl_jx_fail(x, n, RL_EINVAL, "ZeroDivisionError: division by zero");
            }
            if (ints) {
                // true division of ints: correctly rounded when both fit in a double
                return rl_jv_float((double)a.u.i / (double)b.u.i);
            }
            return rl_jv_float(rl_jv_num(a) / rl_jv_num(b));
        }
        break;
    case JO_FLOORDIV:
    case JO_MOD:
        if (ints) {
            if (b.u.i == 0) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "ZeroDivisionError: integer division or modulo by zero");
            }
            if (a.u.i == INT64_MIN && b.u.i == -1) {
                if (op == JO_MOD) {
                    return rl_jv_int(0);
                }
                s_checked(x, n, 0, 0);
            }
            int64_t q = a.u.i / b.u.i, m = a.u.i % b.u.i;
            if (m != 0 && ((m < 0) != (b.u.i < 0))) {
                q -= 1;
                m += b.u.i;
            }
            return rl_jv_int(op == JO_FLOORDIV ? q : m);
        }
        if (num) {
            double vx = rl_jv_num(a), wx = rl_jv_num(b);
            if (wx == 0.0) {
                rl_jx_fail(x, n, RL_EINVAL, "ZeroDivisionError: float %s by zero",
                           op == JO_MOD ? "modulo" : "floor division");
            }
            return rl_jv_float(op == JO_FLOORDIV ? s_float_floordiv(vx, wx) : s_float_mod(vx, wx));
        }
        if (op == JO_MOD && a.t == JV_STR) {
            return rl_jpercent(x, n, a, b);
        }
        break;
    case JO_POW:
        if (ints && b.u.i >= 0) {
            int64_t base = a.u.i, e = b.u.i, acc = 1;
            int ok = 1;
            while (e > 0 && ok) {
                if (e & 1) {
                    ok = !__builtin_mul_overflow(acc, base, &acc);
                }
                e >>= 1;
                if (e > 0 && ok) {
                    ok = !__builtin_mul_overflow(base, base, &base);
                }
            }
            return rl_jv_int(s_checked(x, n, ok, acc));
        }
        if (num) {
            double vx = rl_jv_num(a), wx = rl_jv_num(b);
            if (vx == 0.0 && wx < 0) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "ZeroDivisionError: 0.0 cannot be raised to a negative power");
            }
            if (vx < 0 && wx != floor(wx)) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED,
                           "a negative number to a fractional power (a complex number)");
            }
            return rl_jv_float(pow(vx, wx));
        }
        break;
    default: break;
    }
    s_optype(x, n, op, a, b);
}

int rl_jcontains(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t c, rl_jv_t item) {
    switch (c.t) {
    case JV_STR:
        if (item.t != JV_STR) {
            rl_jx_fail(x, n, RL_EINVAL,
                       "TypeError: 'in <string>' requires string as left operand, not %s",
                       rl_jv_type_name(item));
        }
        x->steps += c.u.s->n / 64;
        return rl_jstr_find(c.u.s->p, 0, c.u.s->n, item.u.s->p, item.u.s->n, 0) >= 0;
    case JV_DICT:
        if (!s_hashable(item)) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: unhashable type: '%s'", rl_jv_type_name(item));
        }
        return rl_jdict_get(x, c.u.d, item) != NULL;
    case JV_LIST:
    case JV_GEN:
    case JV_UNDEF: {
        if (c.t == JV_LIST && c.k == JL_KEYS && !s_hashable(item)) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: unhashable type: '%s'", rl_jv_type_name(item));
        }
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, c, &cnt);
        for (size_t i = 0; i < cnt; i++) {
            x->steps++;
            if (rl_jv_eq(x, n, it[i], item, 0)) {
                return 1;
            }
        }
        return 0;
    }
    default:
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: argument of type '%s' is not iterable",
                   rl_jv_type_name(c));
    }
}

// ------------------------------------------------------------------------------------------
// attribute getters (make_attrgetter) and sorting

// item.part1.part2 ... through environment.getitem, digits as integers.
static rl_jv_t s_attrget(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t item, rl_jv_t attr,
                         const rl_jv_t *dflt) {
    if (attr.t != JV_STR) {
        rl_jv_t r = rl_jgetitem(x, n, item, attr);
        return (dflt && r.t == JV_UNDEF) ? *dflt : r;
    }
    const char *p = attr.u.s->p;
    size_t len = attr.u.s->n, i = 0;
    for (;;) {
        size_t j = i;
        while (j < len && p[j] != '.') {
            j++;
        }
        int digits = j > i;
        for (size_t q = i; q < j; q++) {
            digits &= p[q] >= '0' && p[q] <= '9';
        }
        rl_jv_t key;
        if (digits && j - i < 18) {
            int64_t v = 0;
            for (size_t q = i; q < j; q++) {
                v = v * 10 + (p[q] - '0');
            }
            key = rl_jv_int(v);
        } else {
            key = rl_jv_str(x, p + i, j - i);
        }
        item = rl_jgetitem(x, n, item, key);
        if (dflt && item.t == JV_UNDEF) {
            item = *dflt;
        }
        if (j >= len) {
            return item;
        }
        i = j + 1;
    }
}

// sorted()'s reverse= must be an integer (a bool is one)
static int s_sort_reverse(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v) {
    if (v.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, v);
    }
    if (v.t != JV_INT && v.t != JV_BOOL) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: '%s' object cannot be interpreted as an integer",
                   rl_jv_type_name(v));
    }
    return v.u.i != 0;
}

static rl_jv_t s_lower_if_str(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v) {
    return v.t == JV_STR ? rl_jstr_case(x, n, v, JC_LOWER) : v;
}

// Stable sort of items by keys (Python's sorted with key= and reverse=).
static void s_sort(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t *items, rl_jv_t *keys, size_t cnt,
                   int reverse) {
    if (cnt < 2) {
        return;
    }
    size_t *idx = rl_jx_alloc(x, cnt * sizeof(size_t)), *tmp = rl_jx_alloc(x, cnt * sizeof(size_t));
    for (size_t i = 0; i < cnt; i++) {
        idx[i] = i;
    }
    for (size_t w = 1; w < cnt; w *= 2) {
        for (size_t lo = 0; lo < cnt; lo += 2 * w) {
            size_t mid = lo + w < cnt ? lo + w : cnt, hi = lo + 2 * w < cnt ? lo + 2 * w : cnt;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                x->steps++;
                int take_right = reverse ? rl_jv_lt(x, n, keys[idx[i]], keys[idx[j]], 0)
                                         : rl_jv_lt(x, n, keys[idx[j]], keys[idx[i]], 0);
                tmp[o++] = take_right ? idx[j++] : idx[i++];
            }
            while (i < mid) {
                tmp[o++] = idx[i++];
            }
            while (j < hi) {
                tmp[o++] = idx[j++];
            }
        }
        memcpy(idx, tmp, cnt * sizeof(size_t));
    }
    rl_jv_t *copy = rl_jx_alloc(x, cnt * sizeof(rl_jv_t));
    for (size_t i = 0; i < cnt; i++) {
        copy[i] = items[idx[i]];
    }
    memcpy(items, copy, cnt * sizeof(rl_jv_t));
}

// ------------------------------------------------------------------------------------------
// filters

enum {
    F_ABS,
    F_ATTR,
    F_CAPITALIZE,
    F_CENTER,
    F_COUNT,
    F_DEFAULT,
    F_DICTSORT,
    F_ESCAPE,
    F_FIRST,
    F_FLOAT,
    F_FORCEESCAPE,
    F_FORMAT,
    F_INDENT,
    F_INT,
    F_ITEMS,
    F_JOIN,
    F_LAST,
    F_LIST,
    F_LOWER,
    F_MAP,
    F_MAX,
    F_MIN,
    F_REJECT,
    F_REJECTATTR,
    F_REPLACE,
    F_REVERSE,
    F_ROUND,
    F_SAFE,
    F_SELECT,
    F_SELECTATTR,
    F_SORT,
    F_STRING,
    F_SUM,
    F_TITLE,
    F_TOJSON,
    F_TRIM,
    F_UNIQUE,
    F_UPPER,
    F_WORDCOUNT,
    F_BATCH,
};

static const struct {
    const char *name;
    int id;
} s_filters[] = {
    {"abs", F_ABS},
    {"attr", F_ATTR},
    {"batch", F_BATCH},
    {"capitalize", F_CAPITALIZE},
    {"center", F_CENTER},
    {"length", F_COUNT},
    {"count", F_COUNT},
    {"default", F_DEFAULT},
    {"d", F_DEFAULT},
    {"dictsort", F_DICTSORT},
    {"escape", F_ESCAPE},
    {"e", F_ESCAPE},
    {"first", F_FIRST},
    {"float", F_FLOAT},
    {"forceescape", F_FORCEESCAPE},
    {"format", F_FORMAT},
    {"indent", F_INDENT},
    {"int", F_INT},
    {"items", F_ITEMS},
    {"join", F_JOIN},
    {"last", F_LAST},
    {"list", F_LIST},
    {"lower", F_LOWER},
    {"map", F_MAP},
    {"max", F_MAX},
    {"min", F_MIN},
    {"reject", F_REJECT},
    {"rejectattr", F_REJECTATTR},
    {"replace", F_REPLACE},
    {"reverse", F_REVERSE},
    {"round", F_ROUND},
    {"safe", F_SAFE},
    {"select", F_SELECT},
    {"selectattr", F_SELECTATTR},
    {"sort", F_SORT},
    {"string", F_STRING},
    {"sum", F_SUM},
    {"title", F_TITLE},
    {"tojson", F_TOJSON},
    {"trim", F_TRIM},
    {"unique", F_UNIQUE},
    {"upper", F_UPPER},
};

// jinja2 filters this engine refuses
static const char *const s_filters_no[] = {
    "filesizeformat", "groupby",   "pprint", "random",    "slice",    "striptags",
    "truncate",       "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr",
};

int rl_jfilter_id(const char *name) {
    for (size_t i = 0; i < sizeof(s_filters) / sizeof(s_filters[0]); i++) {
        if (!strcmp(s_filters[i].name, name)) {
            return s_filters[i].id;
        }
    }
    for (size_t i = 0; i < sizeof(s_filters_no) / sizeof(s_filters_no[0]); i++) {
        if (!strcmp(s_filters_no[i], name)) {
            return -2;
        }
    }
    return -1;
}

static const char *s_filter_name(int fid) {
    for (size_t i = 0; i < sizeof(s_filters) / sizeof(s_filters[0]); i++) {
        if (s_filters[i].id == fid) {
            return s_filters[i].name;
        }
    }
    return "?";
}

static rl_jv_t s_gen_from(rl_jx_t *x, rl_jv_t *items, size_t cnt) {
    rl_jv_t g = rl_jv_gen(x, JG_GENERATOR, cnt);
    if (cnt) {
        memcpy(g.u.l->v, items, cnt * sizeof(rl_jv_t));
    }
    return g;
}

// select / reject / selectattr / rejectattr
static rl_jv_t s_select(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t seq, rl_jv_t *args, size_t nargs,
                        const char **kwn, rl_jv_t *kwv, size_t nkw, int attr, int keep) {
    size_t off = 0;
    rl_jv_t a = {0};
    if (!rl_jv_truthy(seq)) {
        return rl_jv_gen(x, JG_GENERATOR, 0); // jinja2 yields nothing for a falsy value
    }
    if (attr) {
        if (nargs < 1) {
            rl_jx_fail(x, n, RL_EINVAL,
                       "FilterArgumentError: Missing parameter for attribute name");
        }
        a = args[0];
        off = 1;
    }
    int tid = -3;
    if (nargs > off) {
        const char *tn = rl_jneed_str(x, n, args[off], "test name");
        tid = rl_jtest_id(tn);
        if (tid < 0) {
            rl_jx_fail(x, n, tid == -2 ? RL_EUNSUPPORTED : RL_EINVAL, "no test named '%s'", tn);
        }
    }
    size_t cnt;
    rl_jv_t *it = rl_jv_iter(x, n, seq, &cnt);
    rl_jv_t *out = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
    size_t k = 0;
    for (size_t i = 0; i < cnt; i++) {
        x->steps++;
        rl_jv_t v = attr ? s_attrget(x, n, it[i], a, NULL) : it[i];
        int ok = tid == -3 ? rl_jv_truthy(v)
                           : rl_jtest(x, n, tid, v, args + off + 1,
                                      nargs > off + 1 ? nargs - off - 1 : 0, kwn, kwv, nkw);
        if (ok == keep) {
            out[k++] = it[i];
        }
    }
    return s_gen_from(x, out, k);
}

static rl_jv_t s_tojson(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, rl_jv_t *p, const int *have) {
    // tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    int ensure_ascii = have[0] ? rl_jv_truthy(p[0]) : 0;
    const char *indent = NULL;
    if (have[1] && p[1].t != JV_NONE) {
        if (p[1].t == JV_STR) {
            indent = p[1].u.s->p;
        } else if (p[1].t == JV_INT || p[1].t == JV_BOOL) {
            int64_t w = p[1].u.i;
            if (w > 1000) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "tojson indent above 1000");
            }
            char *s = rl_jx_alloc(x, (size_t)(w > 0 ? w : 0) + 1);
            for (int64_t i = 0; i < w; i++) {
                s[i] = ' ';
            }
            indent = s;
        } else {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: tojson indent must be an int or a str");
        }
    }
    const char *item_sep = indent ? "," : ", ", *key_sep = ": ";
    if (have[2] && p[2].t != JV_NONE) {
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, p[2], &cnt);
        if (cnt != 2 || it[0].t != JV_STR || it[1].t != JV_STR) {
            rl_jx_fail(x, n, RL_EINVAL, "tojson separators must be two strings");
        }
        item_sep = it[0].u.s->p;
        key_sep = it[1].u.s->p;
    }
    int sort_keys = have[3] ? rl_jv_truthy(p[3]) : 0;
    rl_jbuf_t b = {0};
    rl_jv_write_json(x, n, &b, v, indent, item_sep, key_sep, sort_keys, ensure_ascii, 0);
    return rl_jbuf_take(x, &b);
}

static rl_jv_t s_round(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, int64_t prec,
                       const char *method) {
    int m = !strcmp(method, "common")  ? 0
            : !strcmp(method, "ceil")  ? 1
            : !strcmp(method, "floor") ? 2
                                       : -1;
    if (m < 0) {
        rl_jx_fail(x, n, RL_EINVAL, "FilterArgumentError: method must be common, ceil or floor");
    }
    if (!rl_jv_is_number(v)) {
        if (v.t == JV_UNDEF) {
            rl_jv_undef_fail(x, n, v);
        }
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: type %s doesn't define __round__ method",
                   rl_jv_type_name(v));
    }
    if (prec < -300 || prec > 300) {
        rl_jx_fail(x, n, RL_EUNSUPPORTED, "round() precision out of range");
    }
    if (m == 0) {
        if (v.t != JV_FLOAT) {
            if (prec >= 0) {
                return rl_jv_int(v.u.i);
            }
            // round half to even at 10^-prec
            int64_t p10 = 1;
            for (int64_t i = 0; i < -prec; i++) {
                if (__builtin_mul_overflow(p10, 10, &p10)) {
                    return rl_jv_int(0);
                }
            }
            int64_t q = v.u.i / p10, r = v.u.i % p10;
            if (r < 0) {
                q -= 1;
                r += p10;
            }
            if (2 * r > p10 || (2 * r == p10 && (q & 1))) {
                q += 1;
            }
            int64_t out;
            int ok = !__builtin_mul_overflow(q, p10, &out);
            return rl_jv_int(s_checked(x, n, ok, out));
        }
        double f = v.u.f;
        if (!isfinite(f)) {
            return v;
        }
        if (prec < 0) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "round() of a float to a negative precision");
        }
        if (prec == 0) {
            return rl_jv_float(nearbyint(f));
        }
        // correctly rounded decimal text, read back (Python's algorithm)
        char buf[700];
        snprintf(buf, sizeof(buf), "%.*f", (int)prec, f);
        return rl_jv_float(strtod(buf, NULL));
    }
    if (prec < 0 || prec > 300) {
        rl_jx_fail(x, n, RL_EUNSUPPORTED, "round() precision out of range");
    }
    double p10 = pow(10.0, (double)prec);
    double y = rl_jv_num(v) * p10;
    double r = m == 1 ? ceil(y) : floor(y);
    if (!isfinite(r)) {
        rl_jx_fail(x, n, RL_EINVAL, "OverflowError: cannot convert float infinity to integer");
    }
    return rl_jv_float(r / p10);
}

static rl_jv_t s_indent(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, rl_jv_t width, int first,
                        int blank) {
    rl_jv_t ind;
    if (width.t == JV_STR) {
        ind = width;
    } else {
        int64_t w = rl_jneed_int(x, n, width, "indent width");
        if (w > 10000) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "indent width above 10000");
        }
        rl_jbuf_t b = {0};
        for (int64_t i = 0; i < w; i++) {
            rl_jbuf_putc(x, &b, ' ');
        }
        ind = rl_jbuf_take(x, &b);
    }
    // s += "\n" then splitlines(), as jinja2
    rl_jv_t nl = rl_jv_str_cp(x, "\n", 1, 1);
    rl_jv_t lines = rl_jstr_splitlines(x, s_concat_str(x, s_plain(s), nl), 0);
    rl_jbuf_t b = {0};
    const rl_jlist_t *l = lines.u.l;
    if (first) {
        rl_jbuf_put(x, &b, ind.u.s->p, ind.u.s->n);
    }
    for (size_t i = 0; i < l->n; i++) {
        if (i) {
            rl_jbuf_putc(x, &b, '\n');
            if (blank || l->v[i].u.s->n) {
                rl_jbuf_put(x, &b, ind.u.s->p, ind.u.s->n);
            }
        }
        rl_jbuf_put(x, &b, l->v[i].u.s->p, l->v[i].u.s->n);
    }
    rl_jv_t r = rl_jbuf_take(x, &b);
    r.k = s.k;
    return r;
}

static rl_jv_t s_minmax(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t seq, rl_jv_t *p, const int *have,
                        int want_max) {
    int cs = have[0] && rl_jv_truthy(p[0]);
    size_t cnt;
    rl_jv_t *it = rl_jv_iter(x, n, seq, &cnt);
    if (!cnt) {
        return rl_jv_undef(x, NULL, NULL, 0, "No aggregated item, sequence was empty.");
    }
    rl_jv_t best = it[0], bestk = {0};
    for (size_t i = 0; i < cnt; i++) {
        rl_jv_t k = (have[1] && p[1].t != JV_NONE) ? s_attrget(x, n, it[i], p[1], NULL) : it[i];
        if (!cs) {
            k = s_lower_if_str(x, n, k);
        }
        if (i == 0 || (want_max ? rl_jv_lt(x, n, bestk, k, 0) : rl_jv_lt(x, n, k, bestk, 0))) {
            best = it[i];
            bestk = k;
        }
    }
    return best;
}

rl_jv_t rl_jfilter(rl_jx_t *x, const rl_jnode_t *n, int fid, rl_jv_t v, rl_jv_t *args, size_t nargs,
                   const char **kwn, rl_jv_t *kwv, size_t nkw) {
    rl_jv_t p[S_MAXP];
    int have[S_MAXP];
    const char *fname = (n && n->kind == JN_FILTER && n->fid == fid) ? n->name : s_filter_name(fid);
#define BIND(...)                                                                                  \
    do {                                                                                           \
        static const char *const names_[] = {__VA_ARGS__};                                         \
        s_bind(x, n, fname, names_, (int)(sizeof(names_) / sizeof(names_[0])), args, nargs, kwn,   \
               kwv, nkw, p, have);                                                                 \
    } while (0)
#define BIND0() s_bind(x, n, fname, NULL, 0, args, nargs, kwn, kwv, nkw, p, have)
    x->steps++;
    switch (fid) {
    case F_ABS:
        BIND0();
        if (v.t == JV_INT || v.t == JV_BOOL) {
            return rl_jv_int(s_checked(x, n, v.u.i != INT64_MIN, v.u.i < 0 ? -v.u.i : v.u.i));
        }
        if (v.t == JV_FLOAT) {
            return rl_jv_float(fabs(v.u.f));
        }
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: bad operand type for abs(): '%s'",
                   rl_jv_type_name(v));
    case F_ATTR:
        BIND("name");
        if (!have[0]) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: attr() missing 1 required argument: 'name'");
        }
        // Python's getattr only: no fallback to dict keys
        if (v.t == JV_DICT) {
            rl_jv_t name = rl_jv_to_str(x, n, p[0]), m;
            if (memchr(name.u.s->p, 0, name.u.s->n) == NULL &&
                rl_jmethod_lookup(x, n, v, name.u.s->p, &m)) {
                return m;
            }
            return rl_jv_undef(x, name.u.s->p, rl_jv_obj_desc(v), 0, NULL);
        }
        return rl_jgetattr(x, n, v, rl_jv_to_str(x, n, p[0]).u.s->p);
    case F_BATCH: {
        // batch(linecount, fill_with=None): lists of linecount items, the last one filled
        BIND("linecount", "fill_with");
        int64_t per = have[0] ? rl_jneed_int(x, n, p[0], "linecount") : 0;
        if (per <= 0) {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: batch size must be positive");
        }
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        size_t nb = (cnt + (size_t)per - 1) / (size_t)per;
        rl_jv_t g = rl_jv_gen(x, JG_GENERATOR, nb);
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * (size_t)per, k = cnt - lo < (size_t)per ? cnt - lo : (size_t)per;
            int fill = k < (size_t)per && have[1] && p[1].t != JV_NONE;
            rl_jv_t l = rl_jv_list(x, JL_LIST, fill ? (size_t)per : k);
            for (size_t i = 0; i < l.u.l->n; i++) {
                l.u.l->v[i] = i < k ? it[lo + i] : p[1];
            }
            g.u.l->v[b] = l;
        }
        return g;
    }
    case F_CAPITALIZE: BIND0(); return rl_jstr_case(x, n, s_soft_str(x, n, v), JC_CAPITALIZE);
    case F_CENTER:
        BIND("width");
        return rl_jstr_pad(x, n, s_soft_str(x, n, v),
                           have[0] ? rl_jneed_int(x, n, p[0], "width") : 80, rl_jv_none(), 0);
    case F_COUNT: BIND0(); return rl_jv_int(rl_jv_len(x, n, v));
    case F_DEFAULT:
        BIND("default_value", "boolean");
        if (v.t == JV_UNDEF || (have[1] && rl_jv_truthy(p[1]) && !rl_jv_truthy(v))) {
            return have[0] ? p[0] : rl_jv_str_cp(x, "", 0, 0);
        }
        return v;
    case F_DICTSORT: {
        BIND("case_sensitive", "by", "reverse");
        if (v.t != JV_DICT) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: dictsort needs a mapping, not %s",
                       rl_jv_type_name(v));
        }
        int by = 0;
        if (have[1]) {
            const char *s = rl_jneed_str(x, n, p[1], "by");
            if (!strcmp(s, "value")) {
                by = 1;
            } else if (strcmp(s, "key") != 0) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "FilterArgumentError: You can only sort by either \"key\" or "
                           "\"value\"");
            }
        }
        size_t cnt = v.u.d->n;
        rl_jv_t *items = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
        rl_jv_t *keys = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
        for (size_t i = 0; i < cnt; i++) {
            items[i] = s_tuple2(x, v.u.d->k[i], v.u.d->v[i]);
            keys[i] = by ? v.u.d->v[i] : v.u.d->k[i];
            if (!(have[0] && rl_jv_truthy(p[0]))) {
                keys[i] = s_lower_if_str(x, n, keys[i]);
            }
        }
        s_sort(x, n, items, keys, cnt, have[2] && s_sort_reverse(x, n, p[2]));
        rl_jv_t r = rl_jv_list(x, JL_LIST, cnt);
        memcpy(r.u.l->v, items, cnt * sizeof(rl_jv_t));
        return r;
    }
    case F_ESCAPE:
        BIND0();
        if (v.t == JV_STR && v.k) {
            return v;
        }
        return rl_jstr_escape(x, s_plain(rl_jv_to_str(x, n, v)));
    case F_FORCEESCAPE: BIND0(); return rl_jstr_escape(x, s_plain(rl_jv_to_str(x, n, v)));
    case F_FIRST: {
        BIND0();
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        if (!cnt) {
            return rl_jv_undef(x, NULL, NULL, 0, "No first item, sequence was empty.");
        }
        return it[0];
    }
    case F_LAST: {
        BIND0();
        if (v.t == JV_GEN) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: '%s' object is not reversible",
                       rl_jv_type_name(v));
        }
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        if (!cnt) {
            return rl_jv_undef(x, NULL, NULL, 0, "No last item, sequence was empty.");
        }
        return it[cnt - 1];
    }
    case F_FLOAT: {
        BIND("default");
        rl_jv_t dflt = have[0] ? p[0] : rl_jv_float(0.0);
        switch (v.t) {
        case JV_FLOAT: return v;
        case JV_INT:
        case JV_BOOL: return rl_jv_float((double)v.u.i);
        case JV_STR: {
            double d;
            return rl_jstr_parse_float(v.u.s->p, v.u.s->n, &d) ? rl_jv_float(d) : dflt;
        }
        case JV_UNDEF: rl_jv_undef_fail(x, n, v);
        default: return dflt;
        }
    }
    case F_INT: {
        BIND("default", "base");
        rl_jv_t dflt = have[0] ? p[0] : rl_jv_int(0);
        if (have[1] && !(p[1].t == JV_INT && p[1].u.i == 10)) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "int filter with a base other than 10");
        }
        switch (v.t) {
        case JV_INT: return v;
        case JV_BOOL: return rl_jv_int(v.u.i);
        case JV_FLOAT:
            if (isnan(v.u.f)) {
                return dflt;
            }
            if (!isfinite(v.u.f)) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "OverflowError: cannot convert float infinity to integer");
            }
            if (fabs(v.u.f) >= 9.2e18) {
                s_checked(x, n, 0, 0);
            }
            return rl_jv_int((int64_t)v.u.f);
        case JV_STR: {
            int64_t i;
            int r = rl_jstr_parse_int(v.u.s->p, v.u.s->n, &i);
            if (r == 1) {
                return rl_jv_int(i);
            }
            if (r < 0) {
                s_checked(x, n, 0, 0);
            }
            double d;
            if (!rl_jstr_parse_float(v.u.s->p, v.u.s->n, &d) || isnan(d)) {
                return dflt;
            }
            if (!isfinite(d)) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "OverflowError: cannot convert float infinity to integer");
            }
            if (fabs(d) >= 9.2e18) {
                s_checked(x, n, 0, 0);
            }
            return rl_jv_int((int64_t)d);
        }
        case JV_UNDEF: rl_jv_undef_fail(x, n, v);
        default: return dflt;
        }
    }
    case F_FORMAT: {
        if (nargs && nkw) {
            rl_jx_fail(x, n, RL_EINVAL,
                       "FilterArgumentError: can't handle positional and "
                       "keyword arguments at the same time");
        }
        rl_jv_t fmt = s_soft_str(x, n, v);
        if (nkw) {
            rl_jv_t d = rl_jv_dict(x, nkw);
            for (size_t i = 0; i < nkw; i++) {
                rl_jdict_set(x, d.u.d, rl_jv_strz(x, kwn[i]), kwv[i]);
            }
            return rl_jpercent(x, n, fmt, d);
        }
        rl_jv_t t = rl_jv_list(x, JL_TUPLE, nargs);
        for (size_t i = 0; i < nargs; i++) {
            t.u.l->v[i] = args[i];
        }
        return rl_jpercent(x, n, fmt, t);
    }
    case F_INDENT:
        BIND("width", "first", "blank");
        if (v.t != JV_STR) {
            // jinja2 does s += "\n" on the value itself
            s_optype(x, n, JO_ADD, v, rl_jv_str_cp(x, "\n", 1, 1));
        }
        return s_indent(x, n, v, have[0] ? p[0] : rl_jv_int(4), have[1] && rl_jv_truthy(p[1]),
                        have[2] && rl_jv_truthy(p[2]));
    case F_ITEMS: {
        BIND0();
        if (v.t == JV_UNDEF) {
            return rl_jv_gen(x, JG_GENERATOR, 0);
        }
        if (v.t != JV_DICT) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: Can only get item pairs from a mapping.");
        }
        rl_jv_t g = rl_jv_gen(x, JG_GENERATOR, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) {
            g.u.l->v[i] = s_tuple2(x, v.u.d->k[i], v.u.d->v[i]);
        }
        return g;
    }
    case F_JOIN: {
        BIND("d", "attribute");
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        rl_jbuf_t b = {0};
        for (size_t i = 0; i < cnt; i++) {
            if (i && have[0]) {
                rl_jv_write_str(x, n, &b, p[0]);
            }
            rl_jv_t item =
                (have[1] && p[1].t != JV_NONE) ? s_attrget(x, n, it[i], p[1], NULL) : it[i];
            rl_jv_write_str(x, n, &b, item);
        }
        return rl_jbuf_take(x, &b);
    }
    case F_LIST: {
        BIND0();
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        rl_jv_t r = rl_jv_list(x, JL_LIST, cnt);
        if (cnt) {
            memcpy(r.u.l->v, it, cnt * sizeof(rl_jv_t));
        }
        return r;
    }
    case F_LOWER: BIND0(); return rl_jstr_case(x, n, s_soft_str(x, n, v), JC_LOWER);
    case F_UPPER: BIND0(); return rl_jstr_case(x, n, s_soft_str(x, n, v), JC_UPPER);
    case F_TITLE: BIND0(); return rl_jstr_case(x, n, s_soft_str(x, n, v), JC_JTITLE);
    case F_MAP: {
        size_t cnt;
        if (!rl_jv_truthy(v)) {
            return rl_jv_gen(x, JG_GENERATOR, 0); // jinja2 yields nothing for a falsy value
        }
        int by_attr = nargs == 0;
        rl_jv_t attr = {0}, dflt = rl_jv_none();
        int have_dflt = 0, mfid = -1;
        if (by_attr) {
            int found = 0;
            for (size_t i = 0; i < nkw; i++) {
                if (!strcmp(kwn[i], "attribute")) {
                    attr = kwv[i];
                    found = 1;
                } else if (!strcmp(kwn[i], "default")) {
                    dflt = kwv[i];
                    have_dflt = dflt.t != JV_NONE;
                } else {
                    rl_jx_fail(x, n, RL_EINVAL,
                               "FilterArgumentError: Unexpected keyword argument '%s'", kwn[i]);
                }
            }
            if (!found) {
                rl_jx_fail(x, n, RL_EINVAL, "FilterArgumentError: map requires a filter argument");
            }
        } else {
            const char *fn = rl_jneed_str(x, n, args[0], "filter name");
            mfid = rl_jfilter_id(fn);
            if (mfid < 0) {
                rl_jx_fail(x, n, mfid == -2 ? RL_EUNSUPPORTED : RL_EINVAL, "no filter named '%s'",
                           fn);
            }
        }
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        rl_jv_t *out = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
        for (size_t i = 0; i < cnt; i++) {
            x->steps++;
            out[i] = by_attr ? s_attrget(x, n, it[i], attr, have_dflt ? &dflt : NULL)
                             : rl_jfilter(x, n, mfid, it[i], args + 1, nargs - 1, kwn, kwv, nkw);
        }
        return s_gen_from(x, out, cnt);
    }
    case F_MAX:
    case F_MIN:
        BIND("case_sensitive", "attribute");
        return s_minmax(x, n, v, p, have, fid == F_MAX);
    case F_SELECT:
    case F_REJECT: return s_select(x, n, v, args, nargs, kwn, kwv, nkw, 0, fid == F_SELECT);
    case F_SELECTATTR:
    case F_REJECTATTR: return s_select(x, n, v, args, nargs, kwn, kwv, nkw, 1, fid == F_SELECTATTR);
    case F_REPLACE: {
        BIND("old", "new", "count");
        if (!have[0] || !have[1]) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: replace() missing required arguments");
        }
        int64_t count = (have[2] && p[2].t != JV_NONE) ? rl_jneed_int(x, n, p[2], "count") : -1;
        return rl_jstr_replace(x, s_plain(rl_jv_to_str(x, n, v)), rl_jv_to_str(x, n, p[0]),
                               rl_jv_to_str(x, n, p[1]), count);
    }
    case F_REVERSE: {
        BIND0();
        if (v.t == JV_STR) {
            rl_jcps_t c = rl_jstr_decode(x, v);
            rl_jbuf_t b = {0};
            for (size_t i = c.n; i-- > 0;) {
                rl_jbuf_put(x, &b, v.u.s->p + c.off[i], c.off[i + 1] - c.off[i]);
            }
            rl_jv_t r = rl_jbuf_take(x, &b);
            r.k = v.k;
            return r;
        }
        if (v.t == JV_GEN) {
            // reversed() refuses a generator: jinja2 falls back to a reversed list
            size_t cnt;
            rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
            rl_jv_t r = rl_jv_list(x, JL_LIST, cnt);
            for (size_t i = 0; i < cnt; i++) {
                r.u.l->v[i] = it[cnt - 1 - i];
            }
            return r;
        }
        if (v.t != JV_LIST && v.t != JV_DICT && v.t != JV_UNDEF) {
            rl_jx_fail(x, n, RL_EINVAL, "FilterArgumentError: argument must be iterable");
        }
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        rl_jv_t g = rl_jv_gen(x, JG_REVITER, cnt);
        for (size_t i = 0; i < cnt; i++) {
            g.u.l->v[i] = it[cnt - 1 - i];
        }
        return g;
    }
    case F_ROUND: {
        BIND("precision", "method");
        int64_t prec = have[0] ? rl_jneed_int(x, n, p[0], "precision") : 0;
        const char *method = have[1] ? rl_jneed_str(x, n, p[1], "method") : "common";
        return s_round(x, n, v, prec, method);
    }
    case F_SAFE:
        BIND0();
        if (v.t == JV_STR) {
            v.k = 1;
            return v;
        }
        v = s_plain(rl_jv_to_str(x, n, v));
        v.k = 1;
        return v;
    case F_SORT: {
        BIND("reverse", "case_sensitive", "attribute");
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        rl_jv_t r = rl_jv_list(x, JL_LIST, cnt);
        rl_jv_t *keys = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
        int cs = have[1] && rl_jv_truthy(p[1]);
        for (size_t i = 0; i < cnt; i++) {
            r.u.l->v[i] = it[i];
            keys[i] = (have[2] && p[2].t != JV_NONE) ? s_attrget(x, n, it[i], p[2], NULL) : it[i];
            if (!cs) {
                keys[i] = s_lower_if_str(x, n, keys[i]);
            }
        }
        s_sort(x, n, r.u.l->v, keys, cnt, have[0] && s_sort_reverse(x, n, p[0]));
        return r;
    }
    case F_STRING: BIND0(); return s_soft_str(x, n, v);
    case F_SUM: {
        BIND("attribute", "start");
        rl_jv_t acc = have[1] ? p[1] : rl_jv_int(0);
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        for (size_t i = 0; i < cnt; i++) {
            rl_jv_t item =
                (have[0] && p[0].t != JV_NONE) ? s_attrget(x, n, it[i], p[0], NULL) : it[i];
            acc = rl_jbinop(x, n, JO_ADD, acc, item);
        }
        return acc;
    }
    case F_TOJSON:
        BIND("ensure_ascii", "indent", "separators", "sort_keys");
        return s_tojson(x, n, v, p, have);
    case F_TRIM:
        BIND("chars");
        return rl_jstr_strip(x, n, s_soft_str(x, n, v), have[0] ? p[0] : rl_jv_none(), 3);
    case F_UNIQUE: {
        BIND("case_sensitive", "attribute");
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, v, &cnt);
        rl_jv_t *out = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
        rl_jv_t *seen = rl_jx_alloc(x, (cnt ? cnt : 1) * sizeof(rl_jv_t));
        size_t k = 0;
        for (size_t i = 0; i < cnt; i++) {
            rl_jv_t key =
                (have[1] && p[1].t != JV_NONE) ? s_attrget(x, n, it[i], p[1], NULL) : it[i];
            if (!(have[0] && rl_jv_truthy(p[0]))) {
                key = s_lower_if_str(x, n, key);
            }
            if (!s_hashable(key)) {
                rl_jx_fail(x, n, RL_EINVAL, "TypeError: unhashable type: '%s'",
                           rl_jv_type_name(key));
            }
            int dup = 0;
            for (size_t q = 0; q < k && !dup; q++) {
                x->steps++;
                dup = rl_jv_eq(x, n, seen[q], key, 0);
            }
            if (!dup) {
                seen[k] = key;
                out[k++] = it[i];
            }
        }
        return s_gen_from(x, out, k);
    }
    default: rl_jx_fail(x, n, RL_EUNSUPPORTED, "filter '%s' is not supported", fname);
    }
#undef BIND
#undef BIND0
}

// ------------------------------------------------------------------------------------------
// tests

enum {
    T_DEFINED,
    T_UNDEFINED,
    T_NONE,
    T_BOOLEAN,
    T_FALSE,
    T_TRUE,
    T_INTEGER,
    T_FLOAT,
    T_NUMBER,
    T_STRING,
    T_MAPPING,
    T_SEQUENCE,
    T_ITERABLE,
    T_CALLABLE,
    T_SAMEAS,
    T_ESCAPED,
    T_IN,
    T_ODD,
    T_EVEN,
    T_DIVISIBLEBY,
    T_LOWER,
    T_UPPER,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_FILTER,
    T_TEST,
};

static const struct {
    const char *name;
    int id;
} s_tests[] = {
    {"defined", T_DEFINED},
    {"undefined", T_UNDEFINED},
    {"none", T_NONE},
    {"boolean", T_BOOLEAN},
    {"false", T_FALSE},
    {"true", T_TRUE},
    {"integer", T_INTEGER},
    {"float", T_FLOAT},
    {"number", T_NUMBER},
    {"string", T_STRING},
    {"mapping", T_MAPPING},
    {"sequence", T_SEQUENCE},
    {"iterable", T_ITERABLE},
    {"callable", T_CALLABLE},
    {"sameas", T_SAMEAS},
    {"escaped", T_ESCAPED},
    {"in", T_IN},
    {"odd", T_ODD},
    {"even", T_EVEN},
    {"divisibleby", T_DIVISIBLEBY},
    {"lower", T_LOWER},
    {"upper", T_UPPER},
    {"eq", T_EQ},
    {"equalto", T_EQ},
    {"ne", T_NE},
    {"lt", T_LT},
    {"lessthan", T_LT},
    {"le", T_LE},
    {"gt", T_GT},
    {"greaterthan", T_GT},
    {"ge", T_GE},
    {"filter", T_FILTER},
    {"test", T_TEST},
};

int rl_jtest_id(const char *name) {
    for (size_t i = 0; i < sizeof(s_tests) / sizeof(s_tests[0]); i++) {
        if (!strcmp(s_tests[i].name, name)) {
            return s_tests[i].id;
        }
    }
    return -1;
}

static const char *s_test_name(int tid) {
    for (size_t i = 0; i < sizeof(s_tests) / sizeof(s_tests[0]); i++) {
        if (s_tests[i].id == tid) {
            return s_tests[i].name;
        }
    }
    return "?";
}

// str.islower / isupper: at least one cased character and none of the other case.
static int s_case_test(rl_jx_t *x, rl_jv_t s, int upper) {
    rl_jcps_t c = rl_jstr_decode(x, s);
    int cased = 0;
    for (size_t i = 0; i < c.n; i++) {
        int k = rl_jcase_kind(c.cp[i]);
        if (k == 'T' || k == (upper ? 'L' : 'U')) {
            return 0;
        }
        cased |= k != 0;
    }
    return cased;
}

int rl_jtest(rl_jx_t *x, const rl_jnode_t *n, int tid, rl_jv_t v, rl_jv_t *args, size_t nargs,
             const char **kwn, rl_jv_t *kwv, size_t nkw) {
    rl_jv_t p[S_MAXP];
    int have[S_MAXP];
    const char *tname = s_test_name(tid);
    static const char *const one[] = {"other"};
    x->steps++;
    int takes_arg = tid == T_SAMEAS || tid == T_IN || tid == T_DIVISIBLEBY || tid == T_EQ ||
                    tid == T_NE || tid == T_LT || tid == T_LE || tid == T_GT || tid == T_GE;
    s_bind(x, n, tname, one, takes_arg ? 1 : 0, args, nargs, kwn, kwv, nkw, p, have);
    if (takes_arg && !have[0]) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: test '%s' needs an argument", tname);
    }
    switch (tid) {
    case T_DEFINED: return v.t != JV_UNDEF;
    case T_UNDEFINED: return v.t == JV_UNDEF;
    case T_NONE: return v.t == JV_NONE;
    case T_BOOLEAN: return v.t == JV_BOOL;
    case T_FALSE: return v.t == JV_BOOL && !v.u.i;
    case T_TRUE: return v.t == JV_BOOL && v.u.i;
    case T_INTEGER: return v.t == JV_INT;
    case T_FLOAT: return v.t == JV_FLOAT;
    case T_NUMBER: return rl_jv_is_number(v);
    case T_STRING: return v.t == JV_STR;
    case T_MAPPING: return v.t == JV_DICT;
    case T_SEQUENCE:
        return v.t == JV_STR || v.t == JV_DICT || v.t == JV_UNDEF ||
               (v.t == JV_LIST && (v.k == JL_LIST || v.k == JL_TUPLE || v.k == JL_RANGE));
    case T_ITERABLE:
        return v.t == JV_STR || v.t == JV_DICT || v.t == JV_UNDEF || v.t == JV_LIST ||
               v.t == JV_GEN || v.t == JV_LOOP;
    case T_CALLABLE:
        return v.t == JV_MACRO || v.t == JV_FUNC || v.t == JV_METHOD || v.t == JV_UNDEF ||
               v.t == JV_LOOP;
    case T_SAMEAS: {
        // Python's `is`: singletons by value, containers by object; the identity of numbers
        // and strings depends on CPython's caches, so comparing two of those is refused
        rl_jv_t o = p[0];
        int vs = v.t == JV_NONE || v.t == JV_BOOL, os = o.t == JV_NONE || o.t == JV_BOOL;
        int vc = v.t == JV_LIST || v.t == JV_DICT || v.t == JV_NS || v.t == JV_GEN ||
                 v.t == JV_MACRO || v.t == JV_LOOP;
        int oc = o.t == JV_LIST || o.t == JV_DICT || o.t == JV_NS || o.t == JV_GEN ||
                 o.t == JV_MACRO || o.t == JV_LOOP;
        if (vs || os) {
            return v.t == o.t && (v.t == JV_NONE || v.u.i == o.u.i);
        }
        if (vc && oc) {
            return v.t == o.t && v.u.l == o.u.l;
        }
        if (vc || oc || v.t != o.t) {
            return 0; // objects of different types are never the same object
        }
        rl_jx_fail(x, n, RL_EUNSUPPORTED,
                   "the 'sameas' test of numbers or strings is not supported (CPython caches)");
    }
    case T_ESCAPED: return v.t == JV_STR && v.k;
    case T_IN: return rl_jcontains(x, n, p[0], v);
    case T_ODD:
    case T_EVEN: {
        rl_jv_t m = rl_jbinop(x, n, JO_MOD, v, rl_jv_int(2));
        return rl_jv_eq(x, n, m, rl_jv_int(tid == T_ODD ? 1 : 0), 0);
    }
    case T_DIVISIBLEBY: return rl_jv_eq(x, n, rl_jbinop(x, n, JO_MOD, v, p[0]), rl_jv_int(0), 0);
    case T_LOWER:
    case T_UPPER: return s_case_test(x, rl_jv_to_str(x, n, v), tid == T_UPPER);
    case T_EQ: return rl_jv_eq(x, n, v, p[0], 0);
    case T_NE: return !rl_jv_eq(x, n, v, p[0], 0);
    case T_LT: return rl_jv_lt(x, n, v, p[0], 0);
    case T_LE: return rl_jv_lt(x, n, v, p[0], 0) || rl_jv_eq(x, n, v, p[0], 0);
    case T_GT: return rl_jv_lt(x, n, p[0], v, 0);
    case T_GE: return rl_jv_lt(x, n, p[0], v, 0) || rl_jv_eq(x, n, v, p[0], 0);
    case T_FILTER: return v.t == JV_STR && rl_jfilter_id(v.u.s->p) != -1;
    case T_TEST: return v.t == JV_STR && rl_jtest_id(v.u.s->p) != -1;
    default: rl_jx_fail(x, n, RL_EUNSUPPORTED, "test '%s' is not supported", tname);
    }
}

// ------------------------------------------------------------------------------------------
// methods

enum {
    // str
    M_CAPITALIZE = 1,
    M_CENTER,
    M_COUNT,
    M_ENDSWITH,
    M_FIND,
    M_FORMAT,
    M_INDEX,
    M_ISALNUM,
    M_ISALPHA,
    M_ISASCII,
    M_ISDIGIT,
    M_ISLOWER,
    M_ISSPACE,
    M_ISUPPER,
    M_JOIN,
    M_LJUST,
    M_LOWER,
    M_LSTRIP,
    M_PARTITION,
    M_REMOVEPREFIX,
    M_REMOVESUFFIX,
    M_REPLACE,
    M_RFIND,
    M_RINDEX,
    M_RJUST,
    M_RPARTITION,
    M_RSPLIT,
    M_RSTRIP,
    M_SPLIT,
    M_SPLITLINES,
    M_STARTSWITH,
    M_STRIP,
    M_TITLE,
    M_UPPER,
    M_ZFILL,
    // dict
    M_ITEMS,
    M_KEYS,
    M_VALUES,
    M_GET,
    M_DCOPY,
    // list / tuple
    M_LCOUNT,
    M_LINDEX,
    M_LCOPY,
    // loop
    M_CYCLE,
    M_CHANGED,
};

static const struct {
    const char *name;
    int id;
} s_str_methods[] = {
    {"capitalize", M_CAPITALIZE},
    {"center", M_CENTER},
    {"count", M_COUNT},
    {"endswith", M_ENDSWITH},
    {"find", M_FIND},
    {"format", M_FORMAT},
    {"index", M_INDEX},
    {"isalnum", M_ISALNUM},
    {"isalpha", M_ISALPHA},
    {"isascii", M_ISASCII},
    {"isdigit", M_ISDIGIT},
    {"islower", M_ISLOWER},
    {"isspace", M_ISSPACE},
    {"isupper", M_ISUPPER},
    {"join", M_JOIN},
    {"ljust", M_LJUST},
    {"lower", M_LOWER},
    {"lstrip", M_LSTRIP},
    {"partition", M_PARTITION},
    {"removeprefix", M_REMOVEPREFIX},
    {"removesuffix", M_REMOVESUFFIX},
    {"replace", M_REPLACE},
    {"rfind", M_RFIND},
    {"rindex", M_RINDEX},
    {"rjust", M_RJUST},
    {"rpartition", M_RPARTITION},
    {"rsplit", M_RSPLIT},
    {"rstrip", M_RSTRIP},
    {"split", M_SPLIT},
    {"splitlines", M_SPLITLINES},
    {"startswith", M_STARTSWITH},
    {"strip", M_STRIP},
    {"title", M_TITLE},
    {"upper", M_UPPER},
    {"zfill", M_ZFILL},
};

// Python str methods not implemented here (refused rather than treated as missing attributes)
static const char *const s_str_methods_no[] = {
    "casefold",  "encode",      "expandtabs", "format_map", "isdecimal", "isidentifier",
    "isnumeric", "isprintable", "istitle",    "maketrans",  "swapcase",  "translate",
};

static const char *const s_dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
static const char *const s_list_unsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};
static const char *const s_num_attrs[] = {
    "real",       "imag",      "numerator", "denominator", "conjugate",
    "bit_length", "bit_count", "to_bytes",  "from_bytes",  "as_integer_ratio",
    "is_integer", "hex",       "fromhex",
};

static int s_in_list(const char *name, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(list[i], name)) {
            return 1;
        }
    }
    return 0;
}

#define S_IN(name, arr) s_in_list(name, arr, sizeof(arr) / sizeof(arr[0]))

static rl_jv_t s_method(rl_jx_t *x, rl_jv_t obj, int id) {
    rl_jv_t m = {.t = JV_METHOD, .m = (uint16_t)id};
    m.u.recv = rl_jx_alloc(x, sizeof(rl_jv_t));
    *m.u.recv = obj;
    return m;
}

static rl_jv_t s_unsafe(rl_jx_t *x, const char *name, const char *type) {
    char *hint = rl_jx_alloc(x, strlen(name) + strlen(type) + 64);
    sprintf(hint, "access to attribute '%s' of '%s' object is unsafe.", name, type);
    return rl_jv_undef(x, name, NULL, 0, hint);
}

int rl_jmethod_lookup(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t obj, const char *name,
                      rl_jv_t *out) {
    switch (obj.t) {
    case JV_STR:
        for (size_t i = 0; i < sizeof(s_str_methods) / sizeof(s_str_methods[0]); i++) {
            if (!strcmp(s_str_methods[i].name, name)) {
                *out = s_method(x, obj, s_str_methods[i].id);
                return 1;
            }
        }
        if (S_IN(name, s_str_methods_no)) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "the str method '%s' is not supported", name);
        }
        return 0;
    case JV_DICT:
        if (!strcmp(name, "items")) {
            *out = s_method(x, obj, M_ITEMS);
        } else if (!strcmp(name, "keys")) {
            *out = s_method(x, obj, M_KEYS);
        } else if (!strcmp(name, "values")) {
            *out = s_method(x, obj, M_VALUES);
        } else if (!strcmp(name, "get")) {
            *out = s_method(x, obj, M_GET);
        } else if (!strcmp(name, "copy")) {
            *out = s_method(x, obj, M_DCOPY);
        } else if (S_IN(name, s_dict_unsafe)) {
            *out = s_unsafe(x, name, "dict");
        } else if (!strcmp(name, "fromkeys")) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "the dict method 'fromkeys' is not supported");
        } else {
            return 0;
        }
        return 1;
    case JV_LIST:
        if (obj.k != JL_LIST && obj.k != JL_TUPLE) {
            if (obj.k == JL_RANGE &&
                (!strcmp(name, "start") || !strcmp(name, "stop") || !strcmp(name, "step") ||
                 !strcmp(name, "count") || !strcmp(name, "index"))) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "range attributes are not supported");
            }
            if (!strcmp(name, "isdisjoint") || !strcmp(name, "mapping")) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "dict view attributes are not supported");
            }
            return 0;
        }
        if (!strcmp(name, "count")) {
            *out = s_method(x, obj, M_LCOUNT);
        } else if (!strcmp(name, "index")) {
            *out = s_method(x, obj, M_LINDEX);
        } else if (obj.k == JL_LIST && !strcmp(name, "copy")) {
            *out = s_method(x, obj, M_LCOPY);
        } else if (obj.k == JL_LIST && S_IN(name, s_list_unsafe)) {
            *out = s_unsafe(x, name, "list");
        } else {
            return 0;
        }
        return 1;
    case JV_INT:
    case JV_BOOL:
    case JV_FLOAT:
        if (!strcmp(name, "real") || (!strcmp(name, "numerator") && obj.t != JV_FLOAT)) {
            *out = obj.t == JV_FLOAT ? obj : rl_jv_int(obj.u.i);
            return 1;
        }
        if (!strcmp(name, "imag")) {
            *out = obj.t == JV_FLOAT ? rl_jv_float(0.0) : rl_jv_int(0);
            return 1;
        }
        if (!strcmp(name, "denominator") && obj.t != JV_FLOAT) {
            *out = rl_jv_int(1);
            return 1;
        }
        if (S_IN(name, s_num_attrs)) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "the number attribute '%s' is not supported", name);
        }
        return 0;
    case JV_GEN:
        if (!strcmp(name, "send") || !strcmp(name, "throw") || !strcmp(name, "close")) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "generator methods are not supported");
        }
        return 0;
    default: return 0;
    }
}

static int64_t s_loop_attr(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t lv, const char *name,
                           rl_jv_t *out) {
    const rl_jloop_t *l = lv.u.loop;
    int64_t i = l->index0, len = l->length;
    if (!strcmp(name, "index")) {
        *out = rl_jv_int(i + 1);
    } else if (!strcmp(name, "index0")) {
        *out = rl_jv_int(i);
    } else if (!strcmp(name, "revindex")) {
        *out = rl_jv_int(len - i);
    } else if (!strcmp(name, "revindex0")) {
        *out = rl_jv_int(len - i - 1);
    } else if (!strcmp(name, "first")) {
        *out = rl_jv_bool(i == 0);
    } else if (!strcmp(name, "last")) {
        *out = rl_jv_bool(i == len - 1);
    } else if (!strcmp(name, "length")) {
        *out = rl_jv_int(len);
    } else if (!strcmp(name, "depth")) {
        *out = rl_jv_int(1);
    } else if (!strcmp(name, "depth0")) {
        *out = rl_jv_int(0);
    } else if (!strcmp(name, "previtem")) {
        *out = i > 0 ? l->items[i - 1] : rl_jv_undef(x, NULL, NULL, 0, "there is no previous item");
    } else if (!strcmp(name, "nextitem")) {
        *out =
            i + 1 < len ? l->items[i + 1] : rl_jv_undef(x, NULL, NULL, 0, "there is no next item");
    } else if (!strcmp(name, "cycle")) {
        *out = s_method(x, lv, M_CYCLE);
    } else if (!strcmp(name, "changed")) {
        *out = s_method(x, lv, M_CHANGED);
    } else {
        (void)n;
        return 0;
    }
    return 1;
}

// Special attributes every Python object has (the sandbox hides them: unsafe undefined).
static const char *const s_object_dunders[] = {
    "__class__",   "__doc__",          "__init__",
    "__new__",     "__repr__",         "__str__",
    "__eq__",      "__ne__",           "__hash__",
    "__dir__",     "__getattribute__", "__setattr__",
    "__delattr__", "__reduce__",       "__reduce_ex__",
    "__sizeof__",  "__subclasshook__", "__init_subclass__",
    "__format__",  "__lt__",           "__le__",
    "__gt__",      "__ge__",
};

rl_jv_t rl_jgetattr(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t obj, const char *name) {
    x->steps++;
    size_t nl = strlen(name);
    if (S_IN(name, s_object_dunders)) {
        char *hint = rl_jx_alloc(x, nl + 96);
        sprintf(hint, "access to attribute '%s' of '%s' object is unsafe.", name,
                rl_jv_type_name(obj));
        return rl_jv_undef(x, name, NULL, 0, hint);
    }
    if (obj.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, obj);
    }
    rl_jv_t out;
    switch (obj.t) {
    case JV_NS: {
        rl_jv_t *v = rl_jdict_gets(obj.u.d, name, nl);
        if (v) {
            return *v;
        }
        break;
    }
    case JV_LOOP:
        if (s_loop_attr(x, n, obj, name, &out)) {
            return out;
        }
        break;
    case JV_MACRO:
        if (!strcmp(name, "name")) {
            return rl_jv_strz(x, obj.u.mac->def->name);
        }
        if (!strcmp(name, "arguments") || !strcmp(name, "defaults") ||
            !strcmp(name, "catch_kwargs") || !strcmp(name, "catch_varargs") ||
            !strcmp(name, "caller")) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "macro attribute '%s' is not supported", name);
        }
        break;
    default:
        if (rl_jmethod_lookup(x, n, obj, name, &out)) {
            return out;
        }
        if (obj.t == JV_DICT) {
            rl_jv_t *v = rl_jdict_gets(obj.u.d, name, nl);
            if (v) {
                return *v;
            }
        }
        break;
    }
    return rl_jv_undef(x, name, rl_jv_obj_desc(obj), 0, NULL);
}

rl_jv_t rl_jgetitem(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t obj, rl_jv_t key) {
    if (obj.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, obj);
    }
    x->steps++;
    switch (obj.t) {
    case JV_DICT:
        if (s_hashable(key)) {
            rl_jv_t *v = rl_jdict_get(x, obj.u.d, key);
            if (v) {
                return *v;
            }
        }
        break;
    case JV_LIST:
        if ((key.t == JV_INT || key.t == JV_BOOL) &&
            (obj.k == JL_LIST || obj.k == JL_TUPLE || obj.k == JL_RANGE)) {
            int64_t i = key.u.i, len = (int64_t)obj.u.l->n;
            if (i < 0) {
                i += len;
            }
            if (i >= 0 && i < len) {
                return obj.u.l->v[i];
            }
        }
        break;
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t i = key.u.i, len = (int64_t)obj.u.s->ncp;
            if (i < 0) {
                i += len;
            }
            if (i >= 0 && i < len) {
                size_t off = rl_jutf8_offset(obj.u.s->p, obj.u.s->n, (size_t)i);
                uint32_t c;
                size_t k = rl_jutf8_dec(obj.u.s->p + off, obj.u.s->n - off, &c);
                rl_jv_t r = rl_jv_str_cp(x, obj.u.s->p + off, k, 1);
                r.k = obj.k;
                return r;
            }
        }
        break;
    default: break;
    }
    // obj[key] failed: a string key falls back to the attribute (jinja2's getitem)
    if (key.t == JV_STR && !memchr(key.u.s->p, 0, key.u.s->n)) {
        return rl_jgetattr(x, n, obj, key.u.s->p);
    }
    if (key.t == JV_STR) {
        return rl_jv_undef(x, key.u.s->p, rl_jv_obj_desc(obj), 0, NULL);
    }
    rl_jbuf_t b = {0};
    rl_jv_write_repr(x, n, &b, key, 0);
    return rl_jv_undef(x, b.p ? b.p : "", rl_jv_obj_desc(obj), 1, NULL);
}

static rl_jv_t s_bool_all(rl_jx_t *x, rl_jv_t s, int which) {
    rl_jcps_t c = rl_jstr_decode(x, s);
    if (c.n == 0) {
        return rl_jv_bool(0);
    }
    for (size_t i = 0; i < c.n; i++) {
        uint32_t cp = c.cp[i];
        utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
        int alpha = k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
        int digit = k == UTF8PROC_CATEGORY_ND;
        int ok;
        switch (which) {
        case M_ISALPHA: ok = alpha; break;
        case M_ISDIGIT:
            if (k == UTF8PROC_CATEGORY_NO || k == UTF8PROC_CATEGORY_NL) {
                rl_jx_fail(x, NULL, RL_EUNSUPPORTED,
                           "isdigit/isalnum of U+%04X (a numeric character) is not supported",
                           (unsigned)cp);
            }
            ok = digit;
            break;
        case M_ISALNUM:
            if (k == UTF8PROC_CATEGORY_NO || k == UTF8PROC_CATEGORY_NL) {
                rl_jx_fail(x, NULL, RL_EUNSUPPORTED,
                           "isdigit/isalnum of U+%04X (a numeric character) is not supported",
                           (unsigned)cp);
            }
            ok = alpha || digit;
            break;
        case M_ISSPACE: ok = rl_jis_space(cp); break;
        case M_ISASCII: ok = cp < 0x80; break;
        default: ok = 0; break;
        }
        if (!ok) {
            return rl_jv_bool(0);
        }
    }
    return rl_jv_bool(1);
}

static int s_prefix_match(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, rl_jv_t pre, size_t lo,
                          size_t hi, int suffix) {
    if (pre.t == JV_LIST && pre.k == JL_TUPLE) {
        for (size_t i = 0; i < pre.u.l->n; i++) {
            if (s_prefix_match(x, n, s, pre.u.l->v[i], lo, hi, suffix)) {
                return 1;
            }
        }
        return 0;
    }
    if (pre.t != JV_STR) {
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: %s first arg must be str or a tuple of str, not %s",
                   suffix ? "endswith" : "startswith", rl_jv_type_name(pre));
    }
    if (lo > hi) {
        return 0;
    }
    size_t blo = rl_jutf8_offset(s.u.s->p, s.u.s->n, lo);
    size_t bhi = rl_jutf8_offset(s.u.s->p, s.u.s->n, hi);
    size_t pn = pre.u.s->n;
    if (pn > bhi - blo) {
        return 0;
    }
    return memcmp(s.u.s->p + (suffix ? bhi - pn : blo), pre.u.s->p, pn) == 0;
}

static rl_jv_t s_str_call(rl_jx_t *x, const rl_jnode_t *n, int id, rl_jv_t s, rl_jv_t *args,
                          size_t nargs, const char **kwn, rl_jv_t *kwv, size_t nkw) {
    rl_jno_markup(x, n, s, "a method call");
    rl_jv_t p[S_MAXP];
    int have[S_MAXP];
    switch (id) {
    case M_SPLIT:
    case M_RSPLIT: {
        static const char *const names[] = {"sep", "maxsplit"};
        s_bind(x, n, id == M_SPLIT ? "split" : "rsplit", names, 2, args, nargs, kwn, kwv, nkw, p,
               have);
        int64_t maxsplit = have[1] ? rl_jneed_int(x, n, p[1], "maxsplit") : -1;
        return rl_jstr_split(x, n, s, have[0] ? p[0] : rl_jv_none(), maxsplit, id == M_RSPLIT);
    }
    case M_FORMAT: return rl_jstr_format(x, n, s, args, nargs, kwn, kwv, nkw);
    default: break;
    }
    const char *mname = "str method";
    s_no_kwargs(x, n, mname, nkw);
    switch (id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP:
        s_nargs(x, n, "strip", nargs, 0, 1);
        return rl_jstr_strip(x, n, s, nargs ? args[0] : rl_jv_none(),
                             id == M_STRIP    ? 3
                             : id == M_LSTRIP ? 1
                                              : 2);
    case M_STARTSWITH:
    case M_ENDSWITH: {
        s_nargs(x, n, id == M_STARTSWITH ? "startswith" : "endswith", nargs, 1, 3);
        size_t lo, hi;
        rl_jstr_bounds(x, n, s.u.s->ncp, args, nargs, 1, &lo, &hi);
        return rl_jv_bool(s_prefix_match(x, n, s, args[0], lo, hi, id == M_ENDSWITH));
    }
    case M_UPPER: s_nargs(x, n, "upper", nargs, 0, 0); return rl_jstr_case(x, n, s, JC_UPPER);
    case M_LOWER: s_nargs(x, n, "lower", nargs, 0, 0); return rl_jstr_case(x, n, s, JC_LOWER);
    case M_TITLE: s_nargs(x, n, "title", nargs, 0, 0); return rl_jstr_case(x, n, s, JC_PYTITLE);
    case M_CAPITALIZE:
        s_nargs(x, n, "capitalize", nargs, 0, 0);
        return rl_jstr_case(x, n, s, JC_CAPITALIZE);
    case M_REPLACE: {
        s_nargs(x, n, "replace", nargs, 2, 3);
        rl_jneed_str(x, n, args[0], "replace() argument 1");
        rl_jneed_str(x, n, args[1], "replace() argument 2");
        int64_t count = nargs > 2 ? rl_jneed_int(x, n, args[2], "count") : -1;
        return rl_jstr_replace(x, s, args[0], args[1], count);
    }
    case M_FIND:
    case M_RFIND:
    case M_INDEX:
    case M_RINDEX:
    case M_COUNT: {
        s_nargs(x, n, "find", nargs, 1, 3);
        rl_jneed_str(x, n, args[0], "substring");
        size_t lo, hi;
        rl_jstr_bounds(x, n, s.u.s->ncp, args, nargs, 1, &lo, &hi);
        rl_jcps_t c = rl_jstr_decode(x, s);
        size_t blo = c.off[lo < c.n ? lo : c.n], bhi = c.off[hi < c.n ? hi : c.n];
        if (id == M_COUNT) {
            if (lo > hi) {
                return rl_jv_int(0);
            }
            if (args[0].u.s->n == 0) {
                return rl_jv_int((int64_t)(hi - lo) + 1);
            }
            int64_t cnt = 0;
            size_t i = blo;
            int64_t at;
            while ((at = rl_jstr_find(s.u.s->p, i, bhi, args[0].u.s->p, args[0].u.s->n, 0)) >= 0) {
                cnt++;
                i = (size_t)at + args[0].u.s->n;
            }
            return rl_jv_int(cnt);
        }
        int64_t at = lo > hi ? -1
                             : rl_jstr_find(s.u.s->p, blo, bhi, args[0].u.s->p, args[0].u.s->n,
                                            id == M_RFIND || id == M_RINDEX);
        if (at < 0) {
            if (id == M_INDEX || id == M_RINDEX) {
                rl_jx_fail(x, n, RL_EINVAL, "ValueError: substring not found");
            }
            return rl_jv_int(-1);
        }
        return rl_jv_int((int64_t)rl_jstr_cp_index(&c, (size_t)at));
    }
    case M_JOIN: {
        s_nargs(x, n, "join", nargs, 1, 1);
        size_t cnt;
        rl_jv_t *it = rl_jv_iter(x, n, args[0], &cnt);
        rl_jbuf_t b = {0};
        for (size_t i = 0; i < cnt; i++) {
            if (it[i].t != JV_STR) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "TypeError: sequence item %zu: expected str instance, %s found", i,
                           rl_jv_type_name(it[i]));
            }
            if (i) {
                rl_jbuf_put(x, &b, s.u.s->p, s.u.s->n);
            }
            rl_jbuf_put(x, &b, it[i].u.s->p, it[i].u.s->n);
        }
        return rl_jbuf_take(x, &b);
    }
    case M_SPLITLINES:
        s_nargs(x, n, "splitlines", nargs, 0, 1);
        return rl_jstr_splitlines(x, s, nargs && rl_jv_truthy(args[0]));
    case M_CENTER:
    case M_LJUST:
    case M_RJUST:
        s_nargs(x, n, "center", nargs, 1, 2);
        return rl_jstr_pad(x, n, s, rl_jneed_int(x, n, args[0], "width"),
                           nargs > 1 ? args[1] : rl_jv_none(),
                           id == M_CENTER  ? 0
                           : id == M_LJUST ? 1
                                           : 2);
    case M_ZFILL: {
        s_nargs(x, n, "zfill", nargs, 1, 1);
        int64_t w = rl_jneed_int(x, n, args[0], "width");
        int64_t len = (int64_t)s.u.s->ncp;
        if (w <= len) {
            return s;
        }
        if (w > 100000) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "zfill width above 100000");
        }
        rl_jbuf_t b = {0};
        size_t start = 0;
        if (s.u.s->n && (s.u.s->p[0] == '+' || s.u.s->p[0] == '-')) {
            rl_jbuf_putc(x, &b, s.u.s->p[0]);
            start = 1;
        }
        for (int64_t i = 0; i < w - len; i++) {
            rl_jbuf_putc(x, &b, '0');
        }
        rl_jbuf_put(x, &b, s.u.s->p + start, s.u.s->n - start);
        return rl_jbuf_take(x, &b);
    }
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX: {
        s_nargs(x, n, "removeprefix", nargs, 1, 1);
        rl_jneed_str(x, n, args[0], "argument");
        size_t pn = args[0].u.s->n;
        if (pn <= s.u.s->n) {
            if (id == M_REMOVEPREFIX && memcmp(s.u.s->p, args[0].u.s->p, pn) == 0) {
                return rl_jv_str(x, s.u.s->p + pn, s.u.s->n - pn);
            }
            if (id == M_REMOVESUFFIX && memcmp(s.u.s->p + s.u.s->n - pn, args[0].u.s->p, pn) == 0) {
                return rl_jv_str(x, s.u.s->p, s.u.s->n - pn);
            }
        }
        return s;
    }
    case M_PARTITION:
    case M_RPARTITION: {
        s_nargs(x, n, "partition", nargs, 1, 1);
        rl_jneed_str(x, n, args[0], "separator");
        if (args[0].u.s->n == 0) {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: empty separator");
        }
        int64_t at =
            rl_jstr_find(s.u.s->p, 0, s.u.s->n, args[0].u.s->p, args[0].u.s->n, id == M_RPARTITION);
        rl_jv_t t = rl_jv_list(x, JL_TUPLE, 3);
        rl_jv_t empty = rl_jv_str_cp(x, "", 0, 0);
        if (at < 0) {
            t.u.l->v[0] = id == M_PARTITION ? s : empty;
            t.u.l->v[1] = empty;
            t.u.l->v[2] = id == M_PARTITION ? empty : s;
        } else {
            size_t a = (size_t)at, sn = args[0].u.s->n;
            t.u.l->v[0] = rl_jv_str(x, s.u.s->p, a);
            t.u.l->v[1] = args[0];
            t.u.l->v[2] = rl_jv_str(x, s.u.s->p + a + sn, s.u.s->n - a - sn);
        }
        return t;
    }
    case M_ISALNUM:
    case M_ISALPHA:
    case M_ISDIGIT:
    case M_ISSPACE:
    case M_ISASCII:
        s_nargs(x, n, "is...", nargs, 0, 0);
        if (id == M_ISASCII && s.u.s->n == 0) {
            return rl_jv_bool(1);
        }
        return s_bool_all(x, s, id);
    case M_ISLOWER:
    case M_ISUPPER:
        s_nargs(x, n, "is...", nargs, 0, 0);
        return rl_jv_bool(s_case_test(x, s, id == M_ISUPPER));
    default: rl_jx_fail(x, n, RL_EUNSUPPORTED, "unsupported str method");
    }
}

rl_jv_t rl_jmethod_call(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t m, rl_jv_t *args, size_t nargs,
                        const char **kwn, rl_jv_t *kwv, size_t nkw) {
    rl_jv_t obj = *m.u.recv;
    x->steps++;
    if (obj.t == JV_STR) {
        return s_str_call(x, n, m.m, obj, args, nargs, kwn, kwv, nkw);
    }
    switch (m.m) {
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES: {
        s_no_kwargs(x, n, "items", nkw);
        s_nargs(x, n, "items", nargs, 0, 0);
        const rl_jdict_t *d = obj.u.d;
        rl_jv_t r = rl_jv_list(x,
                               m.m == M_ITEMS  ? JL_ITEMS
                               : m.m == M_KEYS ? JL_KEYS
                                               : JL_VALUES,
                               d->n);
        for (size_t i = 0; i < d->n; i++) {
            r.u.l->v[i] = m.m == M_ITEMS  ? s_tuple2(x, d->k[i], d->v[i])
                          : m.m == M_KEYS ? d->k[i]
                                          : d->v[i];
        }
        return r;
    }
    case M_GET: {
        s_no_kwargs(x, n, "get", nkw);
        s_nargs(x, n, "get", nargs, 1, 2);
        if (!s_hashable(args[0])) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: unhashable type: '%s'",
                       rl_jv_type_name(args[0]));
        }
        rl_jv_t *v = rl_jdict_get(x, obj.u.d, args[0]);
        return v ? *v : nargs > 1 ? args[1] : rl_jv_none();
    }
    case M_DCOPY: {
        s_nargs(x, n, "copy", nargs, 0, 0);
        rl_jv_t d = rl_jv_dict(x, obj.u.d->n);
        for (size_t i = 0; i < obj.u.d->n; i++) {
            rl_jdict_set(x, d.u.d, obj.u.d->k[i], obj.u.d->v[i]);
        }
        return d;
    }
    case M_LCOPY: {
        s_nargs(x, n, "copy", nargs, 0, 0);
        rl_jv_t l = rl_jv_list(x, JL_LIST, obj.u.l->n);
        memcpy(l.u.l->v, obj.u.l->v, obj.u.l->n * sizeof(rl_jv_t));
        return l;
    }
    case M_LCOUNT:
    case M_LINDEX: {
        s_no_kwargs(x, n, "index", nkw);
        s_nargs(x, n, m.m == M_LCOUNT ? "count" : "index", nargs, 1, m.m == M_LCOUNT ? 1 : 3);
        int64_t cnt = 0, len = (int64_t)obj.u.l->n, lo = 0, hi = len;
        if (nargs > 1) {
            lo = rl_jneed_int(x, n, args[1], "start");
            lo = lo < 0 ? (lo + len < 0 ? 0 : lo + len) : lo;
        }
        if (nargs > 2) {
            hi = rl_jneed_int(x, n, args[2], "stop");
            hi = hi < 0 ? (hi + len < 0 ? 0 : hi + len) : hi > len ? len : hi;
        }
        for (int64_t i = (m.m == M_LCOUNT ? 0 : lo); i < (m.m == M_LCOUNT ? len : hi); i++) {
            x->steps++;
            if (rl_jv_eq(x, n, obj.u.l->v[i], args[0], 0)) {
                if (m.m == M_LINDEX) {
                    return rl_jv_int(i);
                }
                cnt++;
            }
        }
        if (m.m == M_LINDEX) {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: value is not in list");
        }
        return rl_jv_int(cnt);
    }
    case M_CYCLE: {
        s_no_kwargs(x, n, "cycle", nkw);
        if (!nargs) {
            rl_jx_fail(x, n, RL_EINVAL, "TypeError: no items for cycling given");
        }
        return args[obj.u.loop->index0 % (int64_t)nargs];
    }
    case M_CHANGED: {
        s_no_kwargs(x, n, "changed", nkw);
        rl_jloop_t *l = obj.u.loop;
        rl_jv_t t = rl_jv_list(x, JL_LIST, nargs);
        for (size_t i = 0; i < nargs; i++) {
            t.u.l->v[i] = args[i];
        }
        if (!l->has_changed || !rl_jv_eq(x, n, l->changed_last, t, 0)) {
            l->changed_last = t;
            l->has_changed = 1;
            return rl_jv_bool(1);
        }
        return rl_jv_bool(0);
    }
    default: rl_jx_fail(x, n, RL_EUNSUPPORTED, "unsupported method call");
    }
}

// ------------------------------------------------------------------------------------------
// global functions

enum { G_RANGE = 1, G_DICT, G_NAMESPACE, G_RAISE, G_STRFTIME, G_LIPSUM, G_CYCLER, G_JOINER };

static const struct {
    const char *name;
    int id;
} s_globals[] = {
    {"range", G_RANGE},           {"dict", G_DICT},
    {"namespace", G_NAMESPACE},   {"raise_exception", G_RAISE},
    {"strftime_now", G_STRFTIME}, {"lipsum", G_LIPSUM},
    {"cycler", G_CYCLER},         {"joiner", G_JOINER},
};

int rl_jglobal(const char *name, rl_jv_t *out) {
    for (size_t i = 0; i < sizeof(s_globals) / sizeof(s_globals[0]); i++) {
        if (!strcmp(s_globals[i].name, name)) {
            rl_jv_t v = {.t = JV_FUNC, .m = (uint16_t)s_globals[i].id};
            *out = v;
            return 1;
        }
    }
    return 0;
}

// dict(...) / namespace(...): an optional mapping or iterable of pairs, then keywords.
static rl_jv_t s_make_dict(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t *args, size_t nargs,
                           const char **kwn, rl_jv_t *kwv, size_t nkw) {
    s_nargs(x, n, "dict", nargs, 0, 1);
    rl_jv_t d = rl_jv_dict(x, nkw + 4);
    if (nargs) {
        if (args[0].t == JV_UNDEF) {
            rl_jv_undef_fail(x, n, args[0]); // dict() asks it for .keys
        }
        if (args[0].t == JV_DICT || args[0].t == JV_NS) {
            for (size_t i = 0; i < args[0].u.d->n; i++) {
                rl_jdict_set(x, d.u.d, args[0].u.d->k[i], args[0].u.d->v[i]);
            }
        } else {
            size_t cnt;
            rl_jv_t *it = rl_jv_iter(x, n, args[0], &cnt);
            for (size_t i = 0; i < cnt; i++) {
                size_t pc;
                if (it[i].t != JV_LIST && it[i].t != JV_STR) {
                    rl_jx_fail(x, n, RL_EINVAL,
                               "TypeError: cannot convert dictionary update sequence element "
                               "#%zu to a sequence",
                               i);
                }
                rl_jv_t *pair = rl_jv_iter(x, n, it[i], &pc);
                if (pc != 2) {
                    rl_jx_fail(x, n, RL_EINVAL,
                               "ValueError: dictionary update sequence element #%zu has length "
                               "%zu; 2 is required",
                               i, pc);
                }
                if (!s_hashable(pair[0])) {
                    rl_jx_fail(x, n, RL_EINVAL, "TypeError: unhashable type: '%s'",
                               rl_jv_type_name(pair[0]));
                }
                rl_jdict_set(x, d.u.d, pair[0], pair[1]);
            }
        }
    }
    for (size_t i = 0; i < nkw; i++) {
        rl_jdict_set(x, d.u.d, rl_jv_strz(x, kwn[i]), kwv[i]);
    }
    return d;
}

rl_jv_t rl_jfunc_call(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fn, rl_jv_t *args, size_t nargs,
                      const char **kwn, rl_jv_t *kwv, size_t nkw) {
    x->steps++;
    switch (fn.m) {
    case G_RANGE: {
        s_no_kwargs(x, n, "range", nkw);
        s_nargs(x, n, "range", nargs, 1, 3);
        int64_t v[3];
        for (size_t i = 0; i < nargs; i++) {
            if (args[i].t != JV_INT && args[i].t != JV_BOOL) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "TypeError: '%s' object cannot be interpreted as an integer",
                           rl_jv_type_name(args[i]));
            }
            v[i] = args[i].u.i;
        }
        int64_t start = nargs == 1 ? 0 : v[0], stop = nargs == 1 ? v[0] : v[1],
                step = nargs == 3 ? v[2] : 1;
        if (step == 0) {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: range() arg 3 must not be zero");
        }
        // the sandbox's safe_range refuses more than 100000 items
        double cntd = step > 0 ? ((double)stop - (double)start) / (double)step
                               : ((double)start - (double)stop) / (double)-step;
        if (cntd > 100000.0) {
            rl_jx_fail(x, n, RL_EINVAL,
                       "OverflowError: Range too big. The sandbox blocks ranges larger than "
                       "MAX_RANGE (100000).");
        }
        int64_t cnt = 0;
        if (step > 0 && start < stop) {
            cnt = (stop - start + step - 1) / step;
        } else if (step < 0 && start > stop) {
            cnt = (start - stop - step - 1) / (-step);
        }
        rl_jv_t r = rl_jv_list(x, JL_RANGE, (size_t)cnt);
        for (int64_t i = 0; i < cnt; i++) {
            r.u.l->v[i] = rl_jv_int(start + i * step);
        }
        r.u.l->r0 = start;
        r.u.l->r1 = stop;
        r.u.l->rs = step;
        x->steps += (uint64_t)cnt;
        return r;
    }
    case G_DICT: return s_make_dict(x, n, args, nargs, kwn, kwv, nkw);
    case G_NAMESPACE: {
        rl_jv_t d = s_make_dict(x, n, args, nargs, kwn, kwv, nkw);
        d.t = JV_NS;
        return d;
    }
    case G_RAISE: {
        s_nargs(x, n, "raise_exception", nargs, 1, 1);
        s_no_kwargs(x, n, "raise_exception", nkw);
        rl_jv_t msg = rl_jv_to_str(x, n, args[0]);
        rl_jx_fail(x, n, RL_EINVAL, "raise_exception: %s", msg.u.s->p);
    }
    case G_STRFTIME: {
        s_nargs(x, n, "strftime_now", nargs, 1, 1);
        s_no_kwargs(x, n, "strftime_now", nkw);
        const char *fmt = rl_jneed_str(x, n, args[0], "strftime format");
        struct tm tmv;
        time_t t = x->fixed_now ? (time_t)x->now : time(NULL);
        if (x->fixed_now) {
            gmtime_r(&t, &tmv);
        } else {
            localtime_r(&t, &tmv);
        }
        size_t cap = 256 + strlen(fmt) * 8;
        if (cap > 65536) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "strftime format too long");
        }
        char *buf = rl_jx_alloc(x, cap);
        size_t k = strftime(buf, cap, fmt, &tmv);
        if (k == 0 && fmt[0]) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "strftime format gives no text");
        }
        size_t bad;
        if (!rl_jutf8_valid(buf, k, &bad)) {
            rl_jx_fail(x, n, RL_EINVAL, "strftime produced invalid UTF-8");
        }
        return rl_jv_str(x, buf, k);
    }
    default:
        rl_jx_fail(x, n, RL_EUNSUPPORTED, "the global function '%s' is not supported",
                   fn.m == G_LIPSUM   ? "lipsum"
                   : fn.m == G_CYCLER ? "cycler"
                                      : "joiner");
    }
}

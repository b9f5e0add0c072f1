// rl_jinja_str — Python's str algorithms for rl_jinja on UTF-8 text counted in code points:
// strip / split / splitlines / replace / find / padding, markupsafe's escape, int() and float()
// of a string, printf-style `%` formatting and str.format. The filters and methods that use them
// (and their argument checks) are in rl_jinja_builtin.c; case mappings are in rl_jinja_value.c.
#include "rl_jinja_int.h"

#include "rl_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// ------------------------------------------------------------------------------------------
// string helpers (code points, Python semantics)

rl_jcps_t rl_jstr_decode(rl_jx_t *x, rl_jv_t s) {
    rl_jcps_t c;
    c.n = s.u.s->ncp;
    c.cp = rl_jx_alloc(x, (c.n + 1) * sizeof(uint32_t));
    c.off = rl_jx_alloc(x, (c.n + 1) * sizeof(size_t));
    size_t i = 0, k = 0;
    while (i < s.u.s->n) {
        c.off[k] = i;
        i += rl_jutf8_dec(s.u.s->p + i, s.u.s->n - i, &c.cp[k]);
        k++;
    }
    c.off[k] = s.u.s->n;
    x->steps += k / 16;
    return c;
}

static rl_jv_t s_sub(rl_jx_t *x, rl_jv_t s, const rl_jcps_t *c, size_t lo, size_t hi) {
    rl_jv_t r = rl_jv_str_cp(x, s.u.s->p + c->off[lo], c->off[hi] - c->off[lo], hi - lo);
    r.k = s.k;
    return r;
}

static int s_in_chars(const rl_jcps_t *chars, uint32_t c) {
    if (!chars) {
        return rl_jis_space(c);
    }
    for (size_t i = 0; i < chars->n; i++) {
        if (chars->cp[i] == c) {
            return 1;
        }
    }
    return 0;
}

// str.strip / lstrip / rstrip (which: 1 left, 2 right, 3 both); chars NULL: whitespace.
rl_jv_t rl_jstr_strip(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, rl_jv_t chars, int which) {
    rl_jcps_t c = rl_jstr_decode(x, s), cs;
    const rl_jcps_t *set = NULL;
    if (chars.t != JV_NONE) {
        rl_jneed_str(x, n, chars, "strip arg");
        cs = rl_jstr_decode(x, chars);
        set = &cs;
    }
    size_t lo = 0, hi = c.n;
    if (which & 1) {
        while (lo < hi && s_in_chars(set, c.cp[lo])) {
            lo++;
        }
    }
    if (which & 2) {
        while (hi > lo && s_in_chars(set, c.cp[hi - 1])) {
            hi--;
        }
    }
    return s_sub(x, s, &c, lo, hi);
}

// Byte position of needle in hay[from..to) searching forward (or backward), or -1.
int64_t rl_jstr_find(const char *hay, size_t from, size_t to, const char *nd, size_t nn,
                     int reverse) {
    if (nn > to - from || to < from) {
        return -1;
    }
    if (!reverse) {
        for (size_t i = from; i + nn <= to; i++) {
            if (memcmp(hay + i, nd, nn) == 0) {
                return (int64_t)i;
            }
        }
    } else {
        for (size_t i = to - nn + 1; i-- > from;) {
            if (memcmp(hay + i, nd, nn) == 0) {
                return (int64_t)i;
            }
        }
    }
    return -1;
}

// Python's start/end arguments of find/count/startswith as code point bounds.
void rl_jstr_bounds(rl_jx_t *x, const rl_jnode_t *n, size_t len, rl_jv_t *args, size_t nargs,
                    size_t first, size_t *lo, size_t *hi) {
    int64_t a = 0, b = (int64_t)len;
    if (nargs > first && args[first].t != JV_NONE) {
        a = rl_jneed_int(x, n, args[first], "slice index");
    }
    if (nargs > first + 1 && args[first + 1].t != JV_NONE) {
        b = rl_jneed_int(x, n, args[first + 1], "slice index");
    }
    if (a < 0) {
        a += (int64_t)len;
        if (a < 0) {
            a = 0;
        }
    }
    if (b < 0) {
        b += (int64_t)len;
        if (b < 0) {
            b = 0;
        }
    }
    if (b > (int64_t)len) {
        b = (int64_t)len;
    }
    *lo = (size_t)a;
    *hi = (size_t)b;
}

size_t rl_jstr_cp_index(const rl_jcps_t *c, size_t byte) {
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->off[mid] < byte) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

rl_jv_t rl_jstr_replace(rl_jx_t *x, rl_jv_t s, rl_jv_t old, rl_jv_t nw, int64_t count) {
    rl_jbuf_t b = {0};
    const char *p = s.u.s->p;
    size_t n = s.u.s->n, on = old.u.s->n;
    int64_t done = 0;
    if (on == 0) {
        // '' matches before every code point and at the end
        size_t i = 0;
        while (count < 0 || done < count) {
            rl_jbuf_put(x, &b, nw.u.s->p, nw.u.s->n);
            done++;
            if (i >= n) {
                break;
            }
            uint32_t c;
            size_t k = rl_jutf8_dec(p + i, n - i, &c);
            rl_jbuf_put(x, &b, p + i, k);
            i += k;
        }
        if (i < n) {
            rl_jbuf_put(x, &b, p + i, n - i);
        }
        return rl_jbuf_take(x, &b);
    }
    size_t i = 0;
    while (i < n) {
        int64_t at = (count >= 0 && done >= count) ? -1 : rl_jstr_find(p, i, n, old.u.s->p, on, 0);
        if (at < 0) {
            break;
        }
        rl_jbuf_put(x, &b, p + i, (size_t)at - i);
        rl_jbuf_put(x, &b, nw.u.s->p, nw.u.s->n);
        i = (size_t)at + on;
        done++;
        x->steps++;
    }
    rl_jbuf_put(x, &b, p + i, n - i);
    return rl_jbuf_take(x, &b);
}

// str.split / rsplit; sep NONE: runs of whitespace.
rl_jv_t rl_jstr_split(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, rl_jv_t sep, int64_t maxsplit,
                      int reverse) {
    rl_jv_t *parts = NULL;
    size_t np = 0, cap = 0;
#define S_ADD(v)                                                                                   \
    do {                                                                                           \
        if (np == cap) {                                                                           \
            cap = cap ? cap * 2 : 8;                                                               \
            rl_jv_t *q_ = rl_jx_alloc(x, cap * sizeof(rl_jv_t));                                   \
            if (np) {                                                                              \
                memcpy(q_, parts, np * sizeof(rl_jv_t));                                           \
            }                                                                                      \
            parts = q_;                                                                            \
        }                                                                                          \
        parts[np++] = (v);                                                                         \
        x->steps++;                                                                                \
    } while (0)
    if (sep.t == JV_NONE) {
        rl_jcps_t c = rl_jstr_decode(x, s);
        if (!reverse) {
            size_t i = 0;
            int64_t splits = 0;
            for (;;) {
                while (i < c.n && rl_jis_space(c.cp[i])) {
                    i++;
                }
                if (i >= c.n) {
                    break;
                }
                if (maxsplit >= 0 && splits >= maxsplit) {
                    S_ADD(s_sub(x, s, &c, i, c.n));
                    break;
                }
                size_t j = i;
                while (j < c.n && !rl_jis_space(c.cp[j])) {
                    j++;
                }
                S_ADD(s_sub(x, s, &c, i, j));
                splits++;
                i = j;
            }
        } else {
            size_t i = c.n;
            int64_t splits = 0;
            for (;;) {
                while (i > 0 && rl_jis_space(c.cp[i - 1])) {
                    i--;
                }
                if (i == 0) {
                    break;
                }
                if (maxsplit >= 0 && splits >= maxsplit) {
                    S_ADD(s_sub(x, s, &c, 0, i));
                    break;
                }
                size_t j = i;
                while (j > 0 && !rl_jis_space(c.cp[j - 1])) {
                    j--;
                }
                S_ADD(s_sub(x, s, &c, j, i));
                splits++;
                i = j;
            }
        }
    } else {
        rl_jneed_str(x, n, sep, "separator");
        size_t sn = sep.u.s->n, len = s.u.s->n;
        const char *p = s.u.s->p;
        if (sn == 0) {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: empty separator");
        }
        int64_t splits = 0;
        if (!reverse) {
            size_t i = 0;
            for (;;) {
                int64_t at = (maxsplit >= 0 && splits >= maxsplit)
                                 ? -1
                                 : rl_jstr_find(p, i, len, sep.u.s->p, sn, 0);
                if (at < 0) {
                    S_ADD(rl_jv_str(x, p + i, len - i));
                    break;
                }
                S_ADD(rl_jv_str(x, p + i, (size_t)at - i));
                i = (size_t)at + sn;
                splits++;
            }
        } else {
            size_t e = len;
            for (;;) {
                int64_t at = (maxsplit >= 0 && splits >= maxsplit)
                                 ? -1
                                 : rl_jstr_find(p, 0, e, sep.u.s->p, sn, 1);
                if (at < 0) {
                    S_ADD(rl_jv_str(x, p, e));
                    break;
                }
                S_ADD(rl_jv_str(x, p + at + sn, e - (size_t)at - sn));
                e = (size_t)at;
                splits++;
            }
        }
    }
#undef S_ADD
    rl_jv_t r = rl_jv_list(x, JL_LIST, np);
    for (size_t i = 0; i < np; i++) {
        r.u.l->v[i] = reverse ? parts[np - 1 - i] : parts[i];
        r.u.l->v[i].k = s.k;
    }
    return r;
}

static int s_line_break(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
           c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

// str.splitlines(keepends)
rl_jv_t rl_jstr_splitlines(rl_jx_t *x, rl_jv_t s, int keepends) {
    rl_jcps_t c = rl_jstr_decode(x, s);
    size_t cnt = 0;
    rl_jv_t *parts = rl_jx_alloc(x, (c.n + 1) * sizeof(rl_jv_t));
    size_t i = 0;
    while (i < c.n) {
        size_t j = i;
        while (j < c.n && !s_line_break(c.cp[j])) {
            j++;
        }
        size_t eol = j;
        if (j < c.n) {
            j += (c.cp[j] == '\r' && j + 1 < c.n && c.cp[j + 1] == '\n') ? 2 : 1;
        }
        parts[cnt++] = s_sub(x, s, &c, i, keepends ? j : eol);
        i = j;
    }
    rl_jv_t r = rl_jv_list(x, JL_LIST, cnt);
    memcpy(r.u.l->v, parts, cnt * sizeof(rl_jv_t));
    return r;
}

rl_jv_t rl_jstr_pad(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, int64_t width, rl_jv_t fill,
                    int how) {
    uint32_t f = ' ';
    if (fill.t != JV_NONE) {
        rl_jneed_str(x, n, fill, "fill character");
        if (fill.u.s->ncp != 1) {
            rl_jx_fail(x, n, RL_EINVAL,
                       "TypeError: The fill character must be exactly one character long");
        }
        rl_jutf8_dec(fill.u.s->p, fill.u.s->n, &f);
    }
    int64_t len = (int64_t)s.u.s->ncp;
    if (width <= len) {
        return s;
    }
    int64_t marg = width - len, left;
    if (how == 0) { // center, as CPython
        left = marg / 2 + (marg & width & 1);
    } else if (how == 1) { // ljust
        left = 0;
    } else { // rjust
        left = marg;
    }
    char e[4];
    size_t el = rl_jutf8_enc(f, e);
    rl_jbuf_t b = {0};
    for (int64_t i = 0; i < left; i++) {
        rl_jbuf_put(x, &b, e, el);
    }
    rl_jbuf_put(x, &b, s.u.s->p, s.u.s->n);
    for (int64_t i = left + len; i < width; i++) {
        rl_jbuf_put(x, &b, e, el);
    }
    x->steps += (uint64_t)width;
    rl_jv_t r = rl_jbuf_take(x, &b);
    r.k = s.k;
    return r;
}

rl_jv_t rl_jstr_escape(rl_jx_t *x, rl_jv_t s) {
    rl_jbuf_t b = {0};
    for (size_t i = 0; i < s.u.s->n; i++) {
        char c = s.u.s->p[i];
        switch (c) {
        case '&': rl_jbuf_puts(x, &b, "&amp;"); break;
        case '<': rl_jbuf_puts(x, &b, "&lt;"); break;
        case '>': rl_jbuf_puts(x, &b, "&gt;"); break;
        case '"': rl_jbuf_puts(x, &b, "&#34;"); break;
        case '\'': rl_jbuf_puts(x, &b, "&#39;"); break;
        default: rl_jbuf_putc(x, &b, c); break;
        }
    }
    rl_jv_t r = rl_jbuf_take(x, &b);
    r.k = 1;
    return r;
}

// ------------------------------------------------------------------------------------------
// number parsing as Python's int() / float() of a string

static const char *s_strip_ws(const char *p, size_t n, size_t *len) {
    size_t lo = 0, hi = n;
    uint32_t c;
    size_t k;
    while (lo < hi && (k = rl_jutf8_dec(p + lo, hi - lo, &c)) && rl_jis_space(c)) {
        lo += k;
    }
    while (hi > lo) {
        size_t q = hi - 1;
        while (q > lo && ((unsigned char)p[q] & 0xC0) == 0x80) {
            q--;
        }
        rl_jutf8_dec(p + q, hi - q, &c);
        if (!rl_jis_space(c)) {
            break;
        }
        hi = q;
    }
    *len = hi - lo;
    return p + lo;
}

// int(s, 10): returns 1 and *out, 0 when Python raises ValueError, -1 on 64-bit overflow.
int rl_jstr_parse_int(const char *p, size_t n, int64_t *out) {
    size_t len;
    p = s_strip_ws(p, n, &len);
    size_t i = 0;
    int neg = 0;
    if (i < len && (p[i] == '+' || p[i] == '-')) {
        neg = p[i] == '-';
        i++;
    }
    if (i >= len || !(p[i] >= '0' && p[i] <= '9')) {
        return 0;
    }
    uint64_t v = 0;
    int over = 0;
    while (i < len) {
        if (p[i] == '_') {
            if (i + 1 >= len || !(p[i + 1] >= '0' && p[i + 1] <= '9')) {
                return 0;
            }
            i++;
            continue;
        }
        if (!(p[i] >= '0' && p[i] <= '9')) {
            return 0;
        }
        if (v > (UINT64_MAX - 9) / 10) {
            over = 1;
        } else {
            v = v * 10 + (uint64_t)(p[i] - '0');
        }
        i++;
    }
    if (over || v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) {
        return -1;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

// float(s): 1 and *out, or 0 (ValueError).
int rl_jstr_parse_float(const char *p, size_t n, double *out) {
    size_t len;
    p = s_strip_ws(p, n, &len);
    if (len == 0 || len > 400) {
        return 0;
    }
    char buf[512];
    size_t k = 0, i = 0;
    if (p[i] == '+' || p[i] == '-') {
        buf[k++] = p[i++];
    }
    // inf / infinity / nan, any case
    const char *rest = p + i;
    size_t rl = len - i;
    if ((rl == 3 && strncasecmp(rest, "inf", 3) == 0) ||
        (rl == 8 && strncasecmp(rest, "infinity", 8) == 0)) {
        *out = (buf[0] == '-') ? -INFINITY : INFINITY;
        return 1;
    }
    if (rl == 3 && strncasecmp(rest, "nan", 3) == 0) {
        *out = NAN;
        return 1;
    }
    // digits [. digits] [e [+-] digits], underscores only between digits
    int digits = 0;
    for (; i < len; i++) {
        char c = p[i];
        if (c >= '0' && c <= '9') {
            buf[k++] = c;
            digits++;
        } else if (c == '_') {
            if (!(i > 0 && p[i - 1] >= '0' && p[i - 1] <= '9' && i + 1 < len && p[i + 1] >= '0' &&
                  p[i + 1] <= '9')) {
                return 0;
            }
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
            buf[k++] = c;
        } else {
            return 0;
        }
    }
    buf[k] = '\0';
    if (!digits) {
        return 0;
    }
    // validate the shape strictly (strtod accepts more, e.g. hex)
    size_t q = 0;
    if (buf[q] == '+' || buf[q] == '-') {
        q++;
    }
    int mant = 0;
    while (buf[q] >= '0' && buf[q] <= '9') {
        q++, mant++;
    }
    if (buf[q] == '.') {
        q++;
        while (buf[q] >= '0' && buf[q] <= '9') {
            q++, mant++;
        }
    }
    if (!mant) {
        return 0;
    }
    if (buf[q] == 'e' || buf[q] == 'E') {
        q++;
        if (buf[q] == '+' || buf[q] == '-') {
            q++;
        }
        int ed = 0;
        while (buf[q] >= '0' && buf[q] <= '9') {
            q++, ed++;
        }
        if (!ed) {
            return 0;
        }
    }
    if (buf[q] != '\0') {
        return 0;
    }
    *out = strtod(buf, NULL);
    return 1;
}

// ------------------------------------------------------------------------------------------
// printf-style formatting (str % args and the format filter)

static void s_pad_to(rl_jx_t *x, rl_jbuf_t *b, const char *s, size_t n, size_t ncp, int width,
                     int left) {
    int pad = width > (int)ncp ? width - (int)ncp : 0;
    if (!left) {
        for (int i = 0; i < pad; i++) {
            rl_jbuf_putc(x, b, ' ');
        }
    }
    rl_jbuf_put(x, b, s, n);
    if (left) {
        for (int i = 0; i < pad; i++) {
            rl_jbuf_putc(x, b, ' ');
        }
    }
}

rl_jv_t rl_jpercent(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fmt, rl_jv_t argv) {
    rl_jno_markup(x, n, fmt, "% formatting");
    rl_jv_t *args;
    size_t nargs, used = 0;
    const rl_jdict_t *map = NULL;
    // Python treats any non-tuple argument with __getitem__ (dict, list, range, Undefined) as
    // a mapping: unused, it is not an error
    int maplike = 0;
    if (argv.t == JV_LIST && argv.k == JL_TUPLE) {
        args = argv.u.l->v;
        nargs = argv.u.l->n;
    } else {
        args = &argv;
        nargs = 1;
        if (argv.t == JV_DICT) {
            map = argv.u.d;
        }
        maplike = argv.t == JV_DICT || argv.t == JV_UNDEF ||
                  (argv.t == JV_LIST && (argv.k == JL_LIST || argv.k == JL_RANGE));
    }
    const char *p = fmt.u.s->p;
    size_t len = fmt.u.s->n;
    rl_jbuf_t b = {0};
    for (size_t i = 0; i < len;) {
        if (p[i] != '%') {
            size_t j = i;
            while (j < len && p[j] != '%') {
                j++;
            }
            rl_jbuf_put(x, &b, p + i, j - i);
            i = j;
            continue;
        }
        i++;
        if (i >= len) {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: incomplete format");
        }
        rl_jv_t arg = {0};
        int have_arg = 0;
        if (p[i] == '(') {
            size_t j = i + 1;
            while (j < len && p[j] != ')') {
                j++;
            }
            if (j >= len || !map) {
                if (argv.t == JV_UNDEF) {
                    rl_jv_undef_fail(x, n, argv);
                }
                rl_jx_fail(x, n, RL_EINVAL, "TypeError: format requires a mapping");
            }
            rl_jv_t *v = rl_jdict_gets(map, p + i + 1, j - i - 1);
            if (!v) {
                rl_jx_fail(x, n, RL_EINVAL, "KeyError: %.*s", (int)(j - i - 1), p + i + 1);
            }
            arg = *v;
            have_arg = 1;
            i = j + 1;
        }
        char flags[8];
        int nf = 0;
        while (i < len && strchr("-+ #0", p[i]) && nf < 6) {
            flags[nf++] = p[i++];
        }
        flags[nf] = '\0';
        int width = 0, prec = -1;
        while (i < len && p[i] >= '0' && p[i] <= '9') {
            width = width * 10 + (p[i++] - '0');
            if (width > 10000) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "format width too large");
            }
        }
        if (i < len && p[i] == '.') {
            i++;
            prec = 0;
            while (i < len && p[i] >= '0' && p[i] <= '9') {
                prec = prec * 10 + (p[i++] - '0');
                if (prec > 1000) {
                    rl_jx_fail(x, n, RL_EUNSUPPORTED, "format precision too large");
                }
            }
        }
        if (i >= len) {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: incomplete format");
        }
        char conv = p[i++];
        if (conv == '%') {
            rl_jbuf_putc(x, &b, '%');
            continue;
        }
        if (!have_arg) {
            if (map) {
                arg = argv;
                used = 1;
            } else {
                if (used >= nargs) {
                    rl_jx_fail(x, n, RL_EINVAL,
                               "TypeError: not enough arguments for format string");
                }
                arg = args[used++];
            }
        }
        int left = strchr(flags, '-') != NULL;
        if (conv == 's' || conv == 'r') {
            rl_jbuf_t t = {0};
            if (conv == 's') {
                rl_jv_write_str(x, n, &t, arg);
            } else {
                rl_jv_write_repr(x, n, &t, arg, 0);
            }
            size_t tn = t.n, ncp = rl_jutf8_count(t.p ? t.p : "", t.n);
            if (prec >= 0 && (size_t)prec < ncp) {
                tn = rl_jutf8_offset(t.p, t.n, (size_t)prec);
                ncp = (size_t)prec;
            }
            s_pad_to(x, &b, t.p ? t.p : "", tn, ncp, width, left);
            continue;
        }
        char spec[32];
        char out[1200];
        if (strchr("diuxXo", conv)) {
            int64_t v;
            if (arg.t == JV_INT || arg.t == JV_BOOL) {
                v = arg.u.i;
            } else if (arg.t == JV_FLOAT && strchr("diu", conv)) {
                if (!isfinite(arg.u.f) || fabs(arg.u.f) >= 9.2e18) {
                    rl_jx_fail(x, n, RL_EUNSUPPORTED, "integer overflow (beyond 64 bits)");
                }
                v = (int64_t)arg.u.f;
            } else {
                rl_jx_fail(x, n, RL_EINVAL, "TypeError: %%%c format: a number is required, not %s",
                           conv, rl_jv_type_name(arg));
            }
            if (strchr(flags, '#') && strchr("xXo", conv)) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "the '#' flag is not supported");
            }
            char c2 = conv == 'i' || conv == 'u' ? 'd' : conv;
            const char *len_mod = "ll";
            if (prec >= 0) {
                snprintf(spec, sizeof(spec), "%%%s%d.%d%s%c", flags, width, prec, len_mod, c2);
            } else {
                snprintf(spec, sizeof(spec), "%%%s%d%s%c", flags, width, len_mod, c2);
            }
            if (c2 != 'd' && v < 0) {
                // Python prints a sign and the magnitude for x / o
                uint64_t mag = (uint64_t)0 - (uint64_t)v;
                char tmp[64];
                snprintf(spec, sizeof(spec), "%%ll%c", c2);
                snprintf(tmp, sizeof(tmp), spec, (unsigned long long)mag);
                char tmp2[80];
                snprintf(tmp2, sizeof(tmp2), "-%s", tmp);
                s_pad_to(x, &b, tmp2, strlen(tmp2), strlen(tmp2), width, left);
                continue;
            }
            snprintf(out, sizeof(out), spec, (long long)v);
        } else if (strchr("eEfFgG", conv)) {
            double v;
            if (rl_jv_is_number(arg)) {
                v = rl_jv_num(arg);
            } else {
                rl_jx_fail(x, n, RL_EINVAL, "TypeError: must be real number, not %s",
                           rl_jv_type_name(arg));
            }
            if (strchr(flags, '#')) {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "the '#' flag is not supported");
            }
            if (prec < 0) {
                prec = 6;
            }
            snprintf(spec, sizeof(spec), "%%%s%d.%d%c", flags, width, prec, conv);
            snprintf(out, sizeof(out), spec, v);
        } else if (conv == 'c') {
            char e[4];
            size_t el;
            if (arg.t == JV_INT && arg.u.i >= 0 && arg.u.i <= 0x10FFFF &&
                !(arg.u.i >= 0xD800 && arg.u.i <= 0xDFFF)) {
                el = rl_jutf8_enc((uint32_t)arg.u.i, e);
            } else if (arg.t == JV_STR && arg.u.s->ncp == 1) {
                el = arg.u.s->n;
                memcpy(e, arg.u.s->p, el);
            } else {
                rl_jx_fail(x, n, RL_EINVAL, "TypeError: %%c requires int or char");
            }
            s_pad_to(x, &b, e, el, 1, width, left);
            continue;
        } else {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "the %%%c conversion is not supported", conv);
        }
        rl_jbuf_puts(x, &b, out);
    }
    if (!maplike && used < nargs) {
        rl_jx_fail(x, n, RL_EINVAL,
                   "TypeError: not all arguments converted during string formatting");
    }
    return rl_jbuf_take(x, &b);
}

// str.format with {} / {0} / {name} fields and !s / !r conversions (no format specs).
rl_jv_t rl_jstr_format(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t fmt, rl_jv_t *args, size_t nargs,
                       const char **kwn, rl_jv_t *kwv, size_t nkw) {
    const char *p = fmt.u.s->p;
    size_t len = fmt.u.s->n, auto_idx = 0;
    int manual = 0, autom = 0;
    rl_jbuf_t b = {0};
    for (size_t i = 0; i < len;) {
        char c = p[i];
        if (c == '{' && i + 1 < len && p[i + 1] == '{') {
            rl_jbuf_putc(x, &b, '{');
            i += 2;
            continue;
        }
        if (c == '}' && i + 1 < len && p[i + 1] == '}') {
            rl_jbuf_putc(x, &b, '}');
            i += 2;
            continue;
        }
        if (c == '}') {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: Single '}' encountered in format string");
        }
        if (c != '{') {
            rl_jbuf_putc(x, &b, c);
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < len && p[j] != '}' && p[j] != '!' && p[j] != ':' && p[j] != '{') {
            j++;
        }
        if (j >= len || p[j] == '{') {
            rl_jx_fail(x, n, RL_EINVAL, "ValueError: expected '}' before end of string");
        }
        const char *field = p + i + 1;
        size_t fl = j - i - 1;
        char conv = 's';
        if (p[j] == '!') {
            if (j + 2 >= len || (p[j + 1] != 's' && p[j + 1] != 'r') || p[j + 2] != '}') {
                rl_jx_fail(x, n, RL_EUNSUPPORTED, "this str.format conversion is not supported");
            }
            conv = p[j + 1];
            j += 2;
        }
        if (p[j] == ':') {
            rl_jx_fail(x, n, RL_EUNSUPPORTED, "str.format specs ({:...}) are not supported");
        }
        rl_jv_t v;
        if (fl == 0) {
            if (manual) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "ValueError: cannot switch from manual field "
                           "specification to automatic field numbering");
            }
            autom = 1;
            if (auto_idx >= nargs) {
                rl_jx_fail(x, n, RL_EINVAL, "IndexError: Replacement index %zu out of range",
                           auto_idx);
            }
            v = args[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t idx = 0;
            for (size_t q = 0; q < fl; q++) {
                if (field[q] < '0' || field[q] > '9') {
                    rl_jx_fail(x, n, RL_EUNSUPPORTED,
                               "str.format field names with . or [] are "
                               "not supported");
                }
                idx = idx * 10 + (size_t)(field[q] - '0');
                if (idx > 1000000) {
                    break;
                }
            }
            if (autom) {
                rl_jx_fail(x, n, RL_EINVAL,
                           "ValueError: cannot switch from automatic field "
                           "numbering to manual field specification");
            }
            manual = 1;
            if (idx >= nargs) {
                rl_jx_fail(x, n, RL_EINVAL, "IndexError: Replacement index %zu out of range", idx);
            }
            v = args[idx];
        } else {
            int found = 0;
            for (size_t q = 0; q < fl; q++) {
                if (field[q] == '.' || field[q] == '[') {
                    rl_jx_fail(x, n, RL_EUNSUPPORTED,
                               "str.format field names with . or [] are "
                               "not supported");
                }
            }
            for (size_t q = 0; q < nkw; q++) {
                if (strlen(kwn[q]) == fl && memcmp(kwn[q], field, fl) == 0) {
                    v = kwv[q];
                    found = 1;
                    break;
                }
            }
            if (!found) {
                rl_jx_fail(x, n, RL_EINVAL, "KeyError: '%.*s'", (int)fl, field);
            }
        }
        if (conv == 's') {
            rl_jv_write_str(x, n, &b, v);
        } else {
            rl_jv_write_repr(x, n, &b, v, 0);
        }
        i = j + 1;
    }
    return rl_jbuf_take(x, &b);
}

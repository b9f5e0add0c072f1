// rl_jinja_value — the value model of rl_jinja: the arena every compile and render allocates
// from, Python's str()/repr() of values, json.dumps, equality and order, len and iteration, and
// the UTF-8 / Unicode helpers behind Python's string methods. Not the evaluator: it knows no
// syntax tree beyond node positions for error messages.
#include "rl_jinja_int.h"

#include "rl_err.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

// ------------------------------------------------------------------------------------------
// arena and failure

struct rl_jchunk {
    rl_jchunk_t *next;
    size_t cap, used;
    max_align_t data[];
};

#define S_CHUNK ((size_t)64 << 10)

void *rl_jalloc(rl_jarena_t *a, rl_jfail_t *f, size_t n) {
    if (n > SIZE_MAX / 4) {
        rl_jfail(f, RL_EINVAL, 0, 0, "allocation of %zu bytes refused", n);
    }
    n = (n + 15) & ~(size_t)15;
    if (n == 0) {
        n = 16;
    }
    rl_jchunk_t *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > S_CHUNK / 4 ? n : S_CHUNK;
        if (a->limit && (a->total + cap + sizeof(rl_jchunk_t) > a->limit || n > a->limit)) {
            rl_jfail(f, RL_EINVAL, 0, 0, "working memory limit of %zu bytes reached", a->limit);
        }
        rl_jchunk_t *nc = malloc(sizeof(rl_jchunk_t) + cap);
        if (!nc) {
            rl_jfail(f, RL_ENOMEM, 0, 0, "out of memory");
        }
        nc->cap = cap;
        nc->used = 0;
        a->total += cap + sizeof(rl_jchunk_t);
        if (c && n > S_CHUNK / 4) {
            // a big block goes behind the current chunk so the current one keeps its free space
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void rl_jarena_free(rl_jarena_t *a) {
    rl_jchunk_t *c = a->head;
    while (c) {
        rl_jchunk_t *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->total = 0;
}

_Noreturn void rl_jfail(rl_jfail_t *f, int code, int line, int col, const char *fmt, ...) {
    if (f->err && f->err_len) {
        int k;
        if (line > 0) {
            k = snprintf(f->err, f->err_len, "%s:%d:%d: ", f->name, line, col);
        } else {
            k = snprintf(f->err, f->err_len, "%s: ", f->name);
        }
        if (k >= 0 && (size_t)k < f->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(f->err + k, f->err_len - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    f->code = code;
    longjmp(f->jb, 1);
}

_Noreturn void rl_jx_fail(rl_jx_t *x, const rl_jnode_t *n, int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rl_jfail(&x->fail, code, n ? n->line : 0, n ? n->col : 0, "%s", msg);
}

void *rl_jx_alloc(rl_jx_t *x, size_t n) {
    return rl_jalloc(&x->arena, &x->fail, n);
}

// ------------------------------------------------------------------------------------------
// construction

rl_jv_t rl_jv_undef(rl_jx_t *x, const char *name, const char *obj, int element, const char *hint) {
    rl_jv_t v = {.t = JV_UNDEF};
    rl_jundef_t *u = rl_jx_alloc(x, sizeof(*u));
    u->name = name;
    u->obj = obj;
    u->element = element;
    u->hint = hint;
    v.u.u = u;
    return v;
}

rl_jv_t rl_jv_none(void) {
    rl_jv_t v = {.t = JV_NONE};
    return v;
}

rl_jv_t rl_jv_bool(int b) {
    rl_jv_t v = {.t = JV_BOOL};
    v.u.i = b ? 1 : 0;
    return v;
}

rl_jv_t rl_jv_int(int64_t i) {
    rl_jv_t v = {.t = JV_INT};
    v.u.i = i;
    return v;
}

rl_jv_t rl_jv_float(double f) {
    rl_jv_t v = {.t = JV_FLOAT};
    v.u.f = f;
    return v;
}

rl_jv_t rl_jv_str_cp(rl_jx_t *x, const char *s, size_t n, size_t ncp) {
    rl_jv_t v = {.t = JV_STR};
    rl_jstr_t *js = rl_jx_alloc(x, sizeof(rl_jstr_t) + n + 1);
    if (n) {
        memcpy(js->p, s, n);
    }
    js->p[n] = '\0';
    js->n = n;
    js->ncp = ncp;
    v.u.s = js;
    return v;
}

rl_jv_t rl_jv_str(rl_jx_t *x, const char *s, size_t n) {
    return rl_jv_str_cp(x, s, n, rl_jutf8_count(s, n));
}

rl_jv_t rl_jv_strz(rl_jx_t *x, const char *s) {
    return rl_jv_str(x, s, strlen(s));
}

rl_jv_t rl_jv_list(rl_jx_t *x, int kind, size_t n) {
    rl_jv_t v = {.t = JV_LIST, .k = (uint8_t)kind};
    rl_jlist_t *l = rl_jx_alloc(x, sizeof(*l));
    if (n > SIZE_MAX / sizeof(rl_jv_t) / 2) {
        rl_jx_fail(x, NULL, RL_EINVAL, "list too long");
    }
    l->v = rl_jx_alloc(x, (n ? n : 1) * sizeof(rl_jv_t));
    for (size_t i = 0; i < n; i++) {
        l->v[i].t = JV_NONE;
    }
    l->n = n;
    v.u.l = l;
    return v;
}

rl_jv_t rl_jv_gen(rl_jx_t *x, int kind, size_t n) {
    rl_jv_t v = rl_jv_list(x, 0, n);
    v.t = JV_GEN;
    v.k = (uint8_t)kind;
    return v;
}

rl_jv_t rl_jv_dict(rl_jx_t *x, size_t cap) {
    rl_jv_t v = {.t = JV_DICT};
    rl_jdict_t *d = rl_jx_alloc(x, sizeof(*d));
    d->cap = cap ? cap : 4;
    d->k = rl_jx_alloc(x, d->cap * sizeof(rl_jv_t));
    d->v = rl_jx_alloc(x, d->cap * sizeof(rl_jv_t));
    v.u.d = d;
    return v;
}

// Python's hash equality for dict keys: numbers by value, strings by text, None and tuples.
static int s_key_eq(rl_jx_t *x, rl_jv_t a, rl_jv_t b) {
    if (a.t == JV_STR && b.t == JV_STR) {
        return a.u.s->n == b.u.s->n && memcmp(a.u.s->p, b.u.s->p, a.u.s->n) == 0;
    }
    if (a.t == JV_STR || b.t == JV_STR) {
        return 0;
    }
    return rl_jv_eq(x, NULL, a, b, 0);
}

rl_jv_t *rl_jdict_gets(const rl_jdict_t *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->n; i++) {
        if (d->k[i].t == JV_STR && d->k[i].u.s->n == n && memcmp(d->k[i].u.s->p, k, n) == 0) {
            return &d->v[i];
        }
    }
    return NULL;
}

rl_jv_t *rl_jdict_get(rl_jx_t *x, const rl_jdict_t *d, rl_jv_t k) {
    if (k.t == JV_STR) {
        return rl_jdict_gets(d, k.u.s->p, k.u.s->n);
    }
    x->steps += d->n / 8;
    for (size_t i = 0; i < d->n; i++) {
        if (s_key_eq(x, d->k[i], k)) {
            return &d->v[i];
        }
    }
    return NULL;
}

void rl_jdict_set(rl_jx_t *x, rl_jdict_t *d, rl_jv_t k, rl_jv_t v) {
    rl_jv_t *old = rl_jdict_get(x, d, k);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap * 2;
        rl_jv_t *nk = rl_jx_alloc(x, cap * sizeof(rl_jv_t));
        rl_jv_t *nv = rl_jx_alloc(x, cap * sizeof(rl_jv_t));
        memcpy(nk, d->k, d->n * sizeof(rl_jv_t));
        memcpy(nv, d->v, d->n * sizeof(rl_jv_t));
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

rl_jv_t rl_jv_from_json(rl_jx_t *x, const json_t *j, int depth) {
    if (depth > x->max_depth) {
        rl_jx_fail(x, NULL, RL_EINVAL, "context nested deeper than %d levels", x->max_depth);
    }
    x->steps++;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        rl_jv_t d = rl_jv_dict(x, json_object_size(j));
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)j, key, val) {
            rl_jv_t kv = rl_jv_str(x, key, strlen(key));
            rl_jdict_t *dd = d.u.d;
            // keys of a JSON object are unique: append without a lookup
            if (dd->n == dd->cap) {
                rl_jdict_set(x, dd, kv, rl_jv_from_json(x, val, depth + 1));
            } else {
                dd->k[dd->n] = kv;
                dd->v[dd->n] = rl_jv_from_json(x, val, depth + 1);
                dd->n++;
            }
        }
        return d;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        rl_jv_t l = rl_jv_list(x, JL_LIST, n);
        for (size_t i = 0; i < n; i++) {
            l.u.l->v[i] = rl_jv_from_json(x, json_array_get(j, i), depth + 1);
        }
        return l;
    }
    case JSON_STRING: return rl_jv_str(x, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return rl_jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return rl_jv_float(json_real_value(j));
    case JSON_TRUE: return rl_jv_bool(1);
    case JSON_FALSE: return rl_jv_bool(0);
    case JSON_NULL:
    default: return rl_jv_none();
    }
}

// ------------------------------------------------------------------------------------------
// text buffers

static void s_buf_grow(rl_jx_t *x, rl_jbuf_t *b, size_t need) {
    if (b == x->top && need > x->max_output) {
        rl_jx_fail(x, NULL, RL_EINVAL, "rendered text exceeds the limit of %zu bytes",
                   x->max_output);
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        cap *= 2;
    }
    char *p = rl_jx_alloc(x, cap);
    if (b->n) {
        memcpy(p, b->p, b->n);
    }
    b->p = p;
    b->cap = cap;
}

void rl_jbuf_put(rl_jx_t *x, rl_jbuf_t *b, const char *s, size_t n) {
    if (n == 0) {
        return;
    }
    if (b->n + n + 1 > b->cap) {
        s_buf_grow(x, b, b->n + n + 1);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void rl_jbuf_puts(rl_jx_t *x, rl_jbuf_t *b, const char *s) {
    rl_jbuf_put(x, b, s, strlen(s));
}

void rl_jbuf_putc(rl_jx_t *x, rl_jbuf_t *b, char c) {
    rl_jbuf_put(x, b, &c, 1);
}

void rl_jbuf_printf(rl_jx_t *x, rl_jbuf_t *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (k < 0) {
        return;
    }
    if ((size_t)k < sizeof(tmp)) {
        rl_jbuf_put(x, b, tmp, (size_t)k);
        return;
    }
    char *big = rl_jx_alloc(x, (size_t)k + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    rl_jbuf_put(x, b, big, (size_t)k);
}

rl_jv_t rl_jbuf_take(rl_jx_t *x, rl_jbuf_t *b) {
    return rl_jv_str(x, b->p ? b->p : "", b->n);
}

// ------------------------------------------------------------------------------------------
// UTF-8 and Unicode

size_t rl_jutf8_dec(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) {
        *cp = 0;
        return 1;
    }
    if (u[0] < 0x80) {
        *cp = u[0];
        return 1;
    }
    if ((u[0] & 0xE0) == 0xC0 && n >= 2) {
        *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
        return 2;
    }
    if ((u[0] & 0xF0) == 0xE0 && n >= 3) {
        *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        return 3;
    }
    if ((u[0] & 0xF8) == 0xF0 && n >= 4) {
        *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
              ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
        return 4;
    }
    *cp = 0xFFFD; // not reached for validated text
    return 1;
}

size_t rl_jutf8_enc(uint32_t cp, char *o) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t rl_jutf8_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    }
    return c;
}

size_t rl_jutf8_offset(const char *s, size_t n, size_t cpi) {
    size_t i = 0;
    while (i < n && cpi > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) {
            i++;
        }
        cpi--;
    }
    return i;
}

int rl_jutf8_valid(const char *s, size_t n, size_t *bad_at) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            goto bad;
        }
        if (i + len > n) {
            goto bad;
        }
        for (size_t k = 1; k < len; k++) {
            if ((u[i + k] & 0xC0) != 0x80) {
                goto bad;
            }
            cp = (cp << 6) | (u[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            goto bad;
        }
        i += len;
    }
    return 1;
bad:
    if (bad_at) {
        *bad_at = i;
    }
    return 0;
}

int rl_jis_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.isprintable() for one code point (repr escapes the others).
static int s_printable(uint32_t c) {
    if (c == ' ') {
        return 1;
    }
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return 0;
    default: return 1;
    }
}

// Unicode's Other_Lowercase characters that have no case mapping (modifier letters, ordinal
// indicators): lowercase and cased for Python, invisible to categories and mappings.
static int s_other_lower(uint32_t c) {
    return c == 0xAA || c == 0xBA || (c >= 0x2B0 && c <= 0x2B8) || c == 0x2C0 || c == 0x2C1 ||
           (c >= 0x2E0 && c <= 0x2E4) || c == 0x345 || c == 0x37A || c == 0x10FC ||
           (c >= 0x1D2C && c <= 0x1D6A) || c == 0x1D78 || (c >= 0x1D9B && c <= 0x1DBF) ||
           c == 0x2071 || c == 0x207F || (c >= 0x2090 && c <= 0x209C) || c == 0x2C7C ||
           c == 0x2C7D || c == 0xA69C || c == 0xA69D || c == 0xA770 || c == 0xA7F8 || c == 0xA7F9 ||
           (c >= 0xAB5C && c <= 0xAB5F);
}

int rl_jcase_kind(uint32_t c) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    if (k == UTF8PROC_CATEGORY_LU) {
        return 'U';
    }
    if (k == UTF8PROC_CATEGORY_LL || s_other_lower(c)) {
        return 'L';
    }
    if (k == UTF8PROC_CATEGORY_LT) {
        return 'T';
    }
    // Other_Uppercase / Other_Lowercase with mappings: circled letters, Roman numerals
    if (utf8proc_tolower((utf8proc_int32_t)c) != (utf8proc_int32_t)c) {
        return 'U';
    }
    if (utf8proc_toupper((utf8proc_int32_t)c) != (utf8proc_int32_t)c) {
        return 'L';
    }
    return 0;
}

static int s_cased(uint32_t c) {
    return rl_jcase_kind(c) != 0;
}

static int s_case_ignorable(uint32_t c) {
    switch (c) {
    case 0x27:
    case 0x2E:
    case 0x3A:
    case 0x5E:
    case 0x60:
    case 0xA8:
    case 0xAD:
    case 0xAF:
    case 0xB4:
    case 0xB7:
    case 0xB8:
    case 0x387:
    case 0x5F4:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xFE13:
    case 0xFE52:
    case 0xFE55:
    case 0xFF07:
    case 0xFF0E:
    case 0xFF1A: return 1;
    default: break;
    }
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK;
}

// Code points whose full upper/title mapping (Unicode SpecialCasing) has several characters and
// that we do not spell out below: refused rather than mapped wrongly.
static int s_special_unsupported(uint32_t c) {
    return c == 0x149 || c == 0x1F0 || c == 0x390 || c == 0x3B0 || c == 0x587 ||
           (c >= 0x1E96 && c <= 0x1E9A) || (c >= 0x1F50 && c <= 0x1F57) ||
           (c >= 0x1F80 && c <= 0x1FFF) || (c >= 0xFB13 && c <= 0xFB17);
}

// Full upper (title = 0) or title (title = 1) mapping of c into o; returns the code points.
static int s_upper_full(rl_jx_t *x, const rl_jnode_t *n, uint32_t c, int title, uint32_t *o) {
    static const char *const lig[7][2] = {{"FF", "Ff"},   {"FI", "Fi"},   {"FL", "Fl"},
                                          {"FFI", "Ffi"}, {"FFL", "Ffl"}, {"ST", "St"},
                                          {"ST", "St"}};
    if (c < 0x80) {
        o[0] = (c >= 'a' && c <= 'z') ? c - 32 : c;
        return 1;
    }
    if (c == 0xDF) {
        o[0] = 'S';
        o[1] = title ? 's' : 'S';
        return 2;
    }
    if (c >= 0xFB00 && c <= 0xFB06) {
        const char *s = lig[c - 0xFB00][title];
        int k = 0;
        for (; s[k]; k++) {
            o[k] = (uint32_t)(unsigned char)s[k];
        }
        return k;
    }
    if (s_special_unsupported(c)) {
        rl_jx_fail(x, n, RL_EUNSUPPORTED,
                   "case mapping of U+%04X (several characters in Python) is not supported",
                   (unsigned)c);
    }
    o[0] = (uint32_t)(title ? utf8proc_totitle((utf8proc_int32_t)c)
                            : utf8proc_toupper((utf8proc_int32_t)c));
    return 1;
}

// Full lower mapping of cps[i], with the final-sigma rule looking no further than the string
// being lowered, cps[lo..hi).
static int s_lower_full(const uint32_t *cps, size_t lo, size_t hi, size_t i, uint32_t *o) {
    uint32_t c = cps[i];
    if (c < 0x80) {
        o[0] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
        return 1;
    }
    if (c == 0x130) {
        o[0] = 'i';
        o[1] = 0x307;
        return 2;
    }
    if (c == 0x3A3) {
        // final sigma: preceded by a cased letter and not followed by one (skipping
        // case-ignorable characters on both sides)
        size_t j = i;
        int final = 0;
        while (j > lo && s_case_ignorable(cps[j - 1])) {
            j--;
        }
        if (j > lo && s_cased(cps[j - 1])) {
            size_t k = i + 1;
            while (k < hi && s_case_ignorable(cps[k])) {
                k++;
            }
            final = k == hi || !s_cased(cps[k]);
        }
        o[0] = final ? 0x3C2 : 0x3C3;
        return 1;
    }
    o[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
    return 1;
}

static int s_jtitle_sep(uint32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || rl_jis_space(c);
}

rl_jv_t rl_jstr_case(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t s, int how) {
    const char *p = s.u.s->p;
    size_t len = s.u.s->n, ncp = s.u.s->ncp;
    uint32_t *cps = rl_jx_alloc(x, (ncp + 1) * sizeof(uint32_t));
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        i += rl_jutf8_dec(p + i, len - i, &cps[k++]);
    }
    rl_jbuf_t b = {0};
    int prev_cased = 0;
    size_t item_lo = 0, item_end = 0;
    for (size_t i = 0; i < ncp; i++) {
        uint32_t o[4];
        int m;
        uint32_t c = cps[i];
        switch (how) {
        case JC_UPPER: m = s_upper_full(x, n, c, 0, o); break;
        case JC_LOWER: m = s_lower_full(cps, 0, ncp, i, o); break;
        case JC_CAPITALIZE:
            m = i == 0 ? s_upper_full(x, n, c, 1, o) : s_lower_full(cps, 0, ncp, i, o);
            break;
        case JC_PYTITLE:
            m = prev_cased ? s_lower_full(cps, 0, ncp, i, o) : s_upper_full(x, n, c, 1, o);
            prev_cased = s_cased(c);
            break;
        case JC_JTITLE:
        default: {
            // jinja2's title: each item of re.split(r"([-\s({\[<]+)") is
            // item[0].upper() + item[1:].lower()
            // item[1:].lower() sees only the rest of its item
            int sep = s_jtitle_sep(c);
            int first = i == 0 || sep != s_jtitle_sep(cps[i - 1]);
            if (first) {
                item_end = i + 1;
                while (item_end < ncp && s_jtitle_sep(cps[item_end]) == sep) {
                    item_end++;
                }
                item_lo = i + 1;
            }
            m = first ? s_upper_full(x, n, c, 0, o) : s_lower_full(cps, item_lo, item_end, i, o);
            break;
        }
        }
        for (int q = 0; q < m; q++) {
            char e[4];
            rl_jbuf_put(x, &b, e, rl_jutf8_enc(o[q], e));
        }
    }
    rl_jv_t r = rl_jbuf_take(x, &b);
    r.k = s.k;
    return r;
}

// ------------------------------------------------------------------------------------------
// str() and repr()

void rl_jfloat_repr(double f, char *out, size_t out_len) {
    if (isnan(f)) {
        snprintf(out, out_len, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, out_len, f < 0 ? "-inf" : "inf");
        return;
    }
    // shortest digits that read back to f (David Gay's mode 0, as Python's repr)
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) {
            break;
        }
    }
    // buf: [-]d[.ddd]e[+-]XX
    char digits[32];
    int nd = 0, neg = 0;
    const char *q = buf;
    if (*q == '-') {
        neg = 1;
        q++;
    }
    for (; *q && *q != 'e'; q++) {
        if (*q >= '0' && *q <= '9') {
            digits[nd++] = *q;
        }
    }
    int e10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') {
        nd--;
    }
    digits[nd] = '\0';
    int decpt = e10 + 1; // value = 0.digits * 10^decpt
    char res[64];
    size_t r = 0;
    if (neg) {
        res[r++] = '-';
    }
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            res[r++] = '0';
            res[r++] = '.';
            for (int i = 0; i < -decpt; i++) {
                res[r++] = '0';
            }
            for (int i = 0; i < nd; i++) {
                res[r++] = digits[i];
            }
        } else if (decpt >= nd) {
            for (int i = 0; i < nd; i++) {
                res[r++] = digits[i];
            }
            for (int i = nd; i < decpt; i++) {
                res[r++] = '0';
            }
            res[r++] = '.';
            res[r++] = '0';
        } else {
            for (int i = 0; i < nd; i++) {
                if (i == decpt) {
                    res[r++] = '.';
                }
                res[r++] = digits[i];
            }
        }
        res[r] = '\0';
    } else {
        res[r++] = digits[0];
        if (nd > 1) {
            res[r++] = '.';
            for (int i = 1; i < nd; i++) {
                res[r++] = digits[i];
            }
        }
        int e = decpt - 1;
        snprintf(res + r, sizeof(res) - r, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    snprintf(out, out_len, "%s", res);
}

static void s_write_str_repr(rl_jx_t *x, rl_jbuf_t *b, const char *p, size_t n) {
    int has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char quote = (has_sq && !has_dq) ? '"' : '\'';
    rl_jbuf_putc(x, b, quote);
    size_t i = 0;
    while (i < n) {
        uint32_t c;
        size_t k = rl_jutf8_dec(p + i, n - i, &c);
        if (c == (uint32_t)quote || c == '\\') {
            rl_jbuf_putc(x, b, '\\');
            rl_jbuf_putc(x, b, (char)c);
        } else if (c == '\t') {
            rl_jbuf_puts(x, b, "\\t");
        } else if (c == '\n') {
            rl_jbuf_puts(x, b, "\\n");
        } else if (c == '\r') {
            rl_jbuf_puts(x, b, "\\r");
        } else if (c < 0x20 || c == 0x7F) {
            rl_jbuf_printf(x, b, "\\x%02x", (unsigned)c);
        } else if (c < 0x7F || s_printable(c)) {
            rl_jbuf_put(x, b, p + i, k);
        } else if (c <= 0xFF) {
            rl_jbuf_printf(x, b, "\\x%02x", (unsigned)c);
        } else if (c <= 0xFFFF) {
            rl_jbuf_printf(x, b, "\\u%04x", (unsigned)c);
        } else {
            rl_jbuf_printf(x, b, "\\U%08x", (unsigned)c);
        }
        i += k;
    }
    rl_jbuf_putc(x, b, quote);
}

static void s_depth_check(rl_jx_t *x, const rl_jnode_t *n, int depth) {
    if (depth > x->max_depth) {
        rl_jx_fail(x, n, RL_EINVAL, "value nested deeper than %d levels", x->max_depth);
    }
}

void rl_jv_write_repr(rl_jx_t *x, const rl_jnode_t *n, rl_jbuf_t *b, rl_jv_t v, int depth) {
    s_depth_check(x, n, depth);
    x->steps++;
    switch (v.t) {
    case JV_UNDEF: rl_jbuf_puts(x, b, "Undefined"); return;
    case JV_NONE: rl_jbuf_puts(x, b, "None"); return;
    case JV_BOOL: rl_jbuf_puts(x, b, v.u.i ? "True" : "False"); return;
    case JV_INT: rl_jbuf_printf(x, b, "%" PRId64, v.u.i); return;
    case JV_FLOAT: {
        char tmp[64];
        rl_jfloat_repr(v.u.f, tmp, sizeof(tmp));
        rl_jbuf_puts(x, b, tmp);
        return;
    }
    case JV_STR:
        if (v.k) {
            rl_jbuf_puts(x, b, "Markup(");
        }
        s_write_str_repr(x, b, v.u.s->p, v.u.s->n);
        if (v.k) {
            rl_jbuf_putc(x, b, ')');
        }
        return;
    case JV_LIST: {
        const rl_jlist_t *l = v.u.l;
        const char *open = "[", *close = "]";
        switch (v.k) {
        case JL_TUPLE: open = "(", close = l->n == 1 ? ",)" : ")"; break;
        case JL_RANGE:
            if (l->rs == 1) {
                rl_jbuf_printf(x, b, "range(%" PRId64 ", %" PRId64 ")", l->r0, l->r1);
            } else {
                rl_jbuf_printf(x, b, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ")", l->r0, l->r1,
                               l->rs);
            }
            return;
        case JL_KEYS: open = "dict_keys([", close = "])"; break;
        case JL_VALUES: open = "dict_values([", close = "])"; break;
        case JL_ITEMS: open = "dict_items([", close = "])"; break;
        default: break;
        }
        rl_jbuf_puts(x, b, open);
        for (size_t i = 0; i < l->n; i++) {
            if (i) {
                rl_jbuf_puts(x, b, ", ");
            }
            rl_jv_write_repr(x, n, b, l->v[i], depth + 1);
        }
        rl_jbuf_puts(x, b, close);
        return;
    }
    case JV_DICT:
    case JV_NS: {
        const rl_jdict_t *d = v.u.d;
        if (v.t == JV_NS) {
            rl_jbuf_puts(x, b, "<Namespace ");
        }
        rl_jbuf_putc(x, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i) {
                rl_jbuf_puts(x, b, ", ");
            }
            rl_jv_write_repr(x, n, b, d->k[i], depth + 1);
            rl_jbuf_puts(x, b, ": ");
            rl_jv_write_repr(x, n, b, d->v[i], depth + 1);
        }
        rl_jbuf_putc(x, b, '}');
        if (v.t == JV_NS) {
            rl_jbuf_putc(x, b, '>');
        }
        return;
    }
    case JV_MACRO: rl_jbuf_printf(x, b, "<Macro '%s'>", v.u.mac->def->name); return;
    case JV_LOOP:
        rl_jbuf_printf(x, b, "<LoopContext %" PRId64 "/%" PRId64 ">", v.u.loop->index0 + 1,
                       v.u.loop->length);
        return;
    default:
        // jinja2 prints these with a memory address: nothing to match
        rl_jx_fail(x, n, RL_EUNSUPPORTED,
                   "cannot print a %s object (Python prints its memory address)",
                   rl_jv_type_name(v));
    }
}

void rl_jv_write_str(rl_jx_t *x, const rl_jnode_t *n, rl_jbuf_t *b, rl_jv_t v) {
    if (v.t == JV_STR) {
        rl_jbuf_put(x, b, v.u.s->p, v.u.s->n);
    } else if (v.t == JV_UNDEF) {
        return;
    } else {
        rl_jv_write_repr(x, n, b, v, 0);
    }
}

rl_jv_t rl_jv_to_str(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v) {
    if (v.t == JV_STR) {
        return v;
    }
    rl_jbuf_t b = {0};
    rl_jv_write_str(x, n, &b, v);
    return rl_jbuf_take(x, &b);
}

// ------------------------------------------------------------------------------------------
// json.dumps

static void s_json_str(rl_jx_t *x, rl_jbuf_t *b, const char *p, size_t n, int ensure_ascii) {
    rl_jbuf_putc(x, b, '"');
    size_t i = 0;
    while (i < n) {
        uint32_t c;
        size_t k = rl_jutf8_dec(p + i, n - i, &c);
        switch (c) {
        case '"': rl_jbuf_puts(x, b, "\\\""); break;
        case '\\': rl_jbuf_puts(x, b, "\\\\"); break;
        case '\n': rl_jbuf_puts(x, b, "\\n"); break;
        case '\r': rl_jbuf_puts(x, b, "\\r"); break;
        case '\t': rl_jbuf_puts(x, b, "\\t"); break;
        case '\b': rl_jbuf_puts(x, b, "\\b"); break;
        case '\f': rl_jbuf_puts(x, b, "\\f"); break;
        default:
            if (c < 0x20 || (ensure_ascii && c > 0x7E)) { // Python escapes DEL too
                if (c >= 0x10000) {
                    uint32_t v = c - 0x10000;
                    rl_jbuf_printf(x, b, "\\u%04x\\u%04x", (unsigned)(0xD800 | (v >> 10)),
                                   (unsigned)(0xDC00 | (v & 0x3FF)));
                } else {
                    rl_jbuf_printf(x, b, "\\u%04x", (unsigned)c);
                }
            } else {
                rl_jbuf_put(x, b, p + i, k);
            }
            break;
        }
        i += k;
    }
    rl_jbuf_putc(x, b, '"');
}

static void s_json_float(rl_jx_t *x, rl_jbuf_t *b, double f) {
    if (isnan(f)) {
        rl_jbuf_puts(x, b, "NaN");
    } else if (isinf(f)) {
        rl_jbuf_puts(x, b, f < 0 ? "-Infinity" : "Infinity");
    } else {
        char tmp[64];
        rl_jfloat_repr(f, tmp, sizeof(tmp));
        rl_jbuf_puts(x, b, tmp);
    }
}

static void s_json_newline(rl_jx_t *x, rl_jbuf_t *b, const char *indent, int level) {
    rl_jbuf_putc(x, b, '\n');
    for (int i = 0; i < level; i++) {
        rl_jbuf_puts(x, b, indent);
    }
}

// Stable merge sort of index array idx[0..n) by keys (Python sorted over dict items).
static void s_sort_idx(rl_jx_t *x, const rl_jnode_t *n, const rl_jv_t *keys, size_t *idx,
                       size_t cnt) {
    if (cnt < 2) {
        return;
    }
    size_t *tmp = rl_jx_alloc(x, cnt * sizeof(size_t));
    for (size_t w = 1; w < cnt; w *= 2) {
        for (size_t lo = 0; lo < cnt; lo += 2 * w) {
            size_t mid = lo + w < cnt ? lo + w : cnt, hi = lo + 2 * w < cnt ? lo + 2 * w : cnt;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                if (rl_jv_lt(x, n, keys[idx[j]], keys[idx[i]], 0)) {
                    tmp[o++] = idx[j++];
                } else {
                    tmp[o++] = idx[i++];
                }
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
}

void rl_jv_write_json(rl_jx_t *x, const rl_jnode_t *n, rl_jbuf_t *b, rl_jv_t v, const char *indent,
                      const char *item_sep, const char *key_sep, int sort_keys, int ensure_ascii,
                      int level) {
    s_depth_check(x, n, level);
    x->steps++;
    switch (v.t) {
    case JV_NONE: rl_jbuf_puts(x, b, "null"); return;
    case JV_BOOL: rl_jbuf_puts(x, b, v.u.i ? "true" : "false"); return;
    case JV_INT: rl_jbuf_printf(x, b, "%" PRId64, v.u.i); return;
    case JV_FLOAT: s_json_float(x, b, v.u.f); return;
    case JV_STR: s_json_str(x, b, v.u.s->p, v.u.s->n, ensure_ascii); return;
    case JV_LIST:
        if (v.k == JL_LIST || v.k == JL_TUPLE) {
            const rl_jlist_t *l = v.u.l;
            if (l->n == 0) {
                rl_jbuf_puts(x, b, "[]");
                return;
            }
            rl_jbuf_putc(x, b, '[');
            for (size_t i = 0; i < l->n; i++) {
                if (i) {
                    rl_jbuf_puts(x, b, item_sep);
                }
                if (indent) {
                    s_json_newline(x, b, indent, level + 1);
                }
                rl_jv_write_json(x, n, b, l->v[i], indent, item_sep, key_sep, sort_keys,
                                 ensure_ascii, level + 1);
            }
            if (indent) {
                s_json_newline(x, b, indent, level);
            }
            rl_jbuf_putc(x, b, ']');
            return;
        }
        break;
    case JV_DICT: {
        const rl_jdict_t *d = v.u.d;
        if (d->n == 0) {
            rl_jbuf_puts(x, b, "{}");
            return;
        }
        size_t *idx = rl_jx_alloc(x, d->n * sizeof(size_t));
        for (size_t i = 0; i < d->n; i++) {
            idx[i] = i;
        }
        if (sort_keys) {
            s_sort_idx(x, n, d->k, idx, d->n);
        }
        rl_jbuf_putc(x, b, '{');
        for (size_t q = 0; q < d->n; q++) {
            size_t i = idx[q];
            if (q) {
                rl_jbuf_puts(x, b, item_sep);
            }
            if (indent) {
                s_json_newline(x, b, indent, level + 1);
            }
            rl_jv_t k = d->k[i];
            switch (k.t) {
            case JV_STR: s_json_str(x, b, k.u.s->p, k.u.s->n, ensure_ascii); break;
            case JV_INT: rl_jbuf_printf(x, b, "\"%" PRId64 "\"", k.u.i); break;
            case JV_BOOL: rl_jbuf_puts(x, b, k.u.i ? "\"true\"" : "\"false\""); break;
            case JV_NONE: rl_jbuf_puts(x, b, "\"null\""); break;
            case JV_FLOAT:
                rl_jbuf_putc(x, b, '"');
                s_json_float(x, b, k.u.f);
                rl_jbuf_putc(x, b, '"');
                break;
            default:
                rl_jx_fail(x, n, RL_EINVAL,
                           "TypeError: keys must be str, int, float, bool or None, not %s",
                           rl_jv_type_name(k));
            }
            rl_jbuf_puts(x, b, key_sep);
            rl_jv_write_json(x, n, b, d->v[i], indent, item_sep, key_sep, sort_keys, ensure_ascii,
                             level + 1);
        }
        if (indent) {
            s_json_newline(x, b, indent, level);
        }
        rl_jbuf_putc(x, b, '}');
        return;
    }
    default: break;
    }
    rl_jx_fail(x, n, RL_EINVAL, "TypeError: Object of type %s is not JSON serializable",
               v.t == JV_UNDEF ? "Undefined" : rl_jv_type_name(v));
}

// ------------------------------------------------------------------------------------------
// Python semantics

const char *rl_jv_type_name(rl_jv_t v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return v.k ? "Markup" : "str";
    case JV_LIST:
        switch (v.k) {
        case JL_TUPLE: return "tuple";
        case JL_RANGE: return "range";
        case JL_KEYS: return "dict_keys";
        case JL_VALUES: return "dict_values";
        case JL_ITEMS: return "dict_items";
        default: return "list";
        }
    case JV_DICT: return "dict";
    case JV_GEN: return v.k == JG_REVITER ? "list_reverseiterator" : "generator";
    case JV_NS: return "Namespace";
    case JV_LOOP: return "LoopContext";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_METHOD: return "builtin_function_or_method";
    default: return "object";
    }
}

const char *rl_jv_obj_desc(rl_jv_t v) {
    switch (v.t) {
    case JV_NONE: return "None";
    case JV_STR: return v.k ? "markupsafe.Markup object" : "str object";
    case JV_NS: return "jinja2.utils.Namespace object";
    case JV_LOOP: return "jinja2.runtime.LoopContext object";
    case JV_MACRO: return "jinja2.runtime.Macro object";
    default: break;
    }
    static const char *const lists[] = {"list object",        "tuple object",
                                        "range object",       "dict_keys object",
                                        "dict_values object", "dict_items object"};
    if (v.t == JV_LIST) {
        return lists[v.k < 6 ? v.k : 0];
    }
    switch (v.t) {
    case JV_BOOL: return "bool object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_DICT: return "dict object";
    case JV_GEN: return v.k == JG_REVITER ? "list_reverseiterator object" : "generator object";
    default: return "object";
    }
}

int rl_jv_truthy(rl_jv_t v) {
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL:
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return 1; // generators, namespaces, loops, callables
    }
}

int rl_jv_is_number(rl_jv_t v) {
    return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
}

double rl_jv_num(rl_jv_t v) {
    return v.t == JV_FLOAT ? v.u.f : (double)v.u.i;
}

// Exact comparison of an integer with a double: -1, 0, 1 (2 when f is NaN).
static int s_cmp_int_float(int64_t i, double f) {
    if (isnan(f)) {
        return 2;
    }
    if (f >= 9223372036854775808.0) {
        return -1;
    }
    if (f < -9223372036854775808.0) {
        return 1;
    }
    double fl = floor(f);
    int64_t fi = (int64_t)fl;
    if (i < fi) {
        return -1;
    }
    if (i > fi) {
        return 1;
    }
    return fl == f ? 0 : -1;
}

static int s_num_cmp(rl_jv_t a, rl_jv_t b) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
        return a.u.i < b.u.i ? -1 : a.u.i > b.u.i;
    }
    if (a.t == JV_FLOAT && b.t == JV_FLOAT) {
        if (isnan(a.u.f) || isnan(b.u.f)) {
            return 2;
        }
        return a.u.f < b.u.f ? -1 : a.u.f > b.u.f;
    }
    if (a.t == JV_FLOAT) {
        int c = s_cmp_int_float(b.u.i, a.u.f);
        return c == 2 ? 2 : -c;
    }
    return s_cmp_int_float(a.u.i, b.u.f);
}

static int s_seq_kind(rl_jv_t v) {
    return v.t == JV_LIST && (v.k == JL_LIST || v.k == JL_TUPLE || v.k == JL_RANGE);
}

int rl_jv_eq(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t a, rl_jv_t b, int depth) {
    s_depth_check(x, n, depth);
    if (rl_jv_is_number(a) && rl_jv_is_number(b)) {
        return s_num_cmp(a, b) == 0;
    }
    if (a.t != b.t) {
        return 0;
    }
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.u.s->n == b.u.s->n && memcmp(a.u.s->p, b.u.s->p, a.u.s->n) == 0;
    case JV_LIST: {
        if (a.u.l == b.u.l) {
            return 1;
        }
        if (s_seq_kind(a) && s_seq_kind(b)) {
            if ((a.k == JL_TUPLE) != (b.k == JL_TUPLE) || (a.k == JL_RANGE) != (b.k == JL_RANGE)) {
                return 0;
            }
            if (a.u.l->n != b.u.l->n) {
                return 0;
            }
            for (size_t i = 0; i < a.u.l->n; i++) {
                x->steps++;
                if (!rl_jv_eq(x, n, a.u.l->v[i], b.u.l->v[i], depth + 1)) {
                    return 0;
                }
            }
            return 1;
        }
        rl_jx_fail(x, n, RL_EUNSUPPORTED, "comparing %s with %s is not supported",
                   rl_jv_type_name(a), rl_jv_type_name(b));
    }
    case JV_DICT: {
        const rl_jdict_t *da = a.u.d, *db = b.u.d;
        if (da == db) {
            return 1;
        }
        if (da->n != db->n) {
            return 0;
        }
        for (size_t i = 0; i < da->n; i++) {
            rl_jv_t *o = rl_jdict_get(x, db, da->k[i]);
            if (!o || !rl_jv_eq(x, n, da->v[i], *o, depth + 1)) {
                return 0;
            }
        }
        return 1;
    }
    case JV_FUNC: return a.m == b.m;
    case JV_GEN: return a.u.l == b.u.l;
    case JV_NS: return a.u.d == b.u.d;
    case JV_LOOP: return a.u.loop == b.u.loop;
    case JV_MACRO: return a.u.mac == b.u.mac;
    default: return 0;
    }
}

int rl_jv_lt(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t a, rl_jv_t b, int depth) {
    s_depth_check(x, n, depth);
    if (rl_jv_is_number(a) && rl_jv_is_number(b)) {
        return s_num_cmp(a, b) == -1;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        // UTF-8 byte order is code point order
        size_t m = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        int c = memcmp(a.u.s->p, b.u.s->p, m);
        return c < 0 || (c == 0 && a.u.s->n < b.u.s->n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST && a.k == b.k && (a.k == JL_LIST || a.k == JL_TUPLE)) {
        size_t m = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < m; i++) {
            x->steps++;
            if (!rl_jv_eq(x, n, a.u.l->v[i], b.u.l->v[i], depth + 1)) {
                return rl_jv_lt(x, n, a.u.l->v[i], b.u.l->v[i], depth + 1);
            }
        }
        return a.u.l->n < b.u.l->n;
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF) {
        rl_jv_undef_fail(x, n, a.t == JV_UNDEF ? a : b);
    }
    rl_jx_fail(x, n, RL_EINVAL, "TypeError: '<' not supported between instances of '%s' and '%s'",
               rl_jv_type_name(a), rl_jv_type_name(b));
}

const char *rl_jundef_msg(rl_jx_t *x, rl_jv_t v) {
    const rl_jundef_t *u = v.u.u;
    if (!u) {
        return "undefined value";
    }
    if (u->hint) {
        return u->hint;
    }
    rl_jbuf_t b = {0};
    if (!u->obj) {
        s_write_str_repr(x, &b, u->name, strlen(u->name));
        rl_jbuf_puts(x, &b, " is undefined");
    } else if (u->element) {
        rl_jbuf_printf(x, &b, "%s has no element %s", u->obj, u->name);
    } else {
        s_write_str_repr(x, &b, u->obj, strlen(u->obj));
        rl_jbuf_puts(x, &b, " has no attribute ");
        s_write_str_repr(x, &b, u->name, strlen(u->name));
    }
    return b.p;
}

_Noreturn void rl_jv_undef_fail(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v) {
    rl_jx_fail(x, n, RL_EINVAL, "UndefinedError: %s", rl_jundef_msg(x, v));
}

int64_t rl_jv_len(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v) {
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)v.u.s->ncp;
    case JV_LIST: return (int64_t)v.u.l->n;
    case JV_DICT: return (int64_t)v.u.d->n;
    default:
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: object of type '%s' has no len()",
                   rl_jv_type_name(v));
    }
}

rl_jv_t *rl_jv_iter(rl_jx_t *x, const rl_jnode_t *n, rl_jv_t v, size_t *count) {
    switch (v.t) {
    case JV_UNDEF: *count = 0; return NULL;
    case JV_STR: {
        const rl_jstr_t *s = v.u.s;
        rl_jv_t *out = rl_jx_alloc(x, (s->ncp + 1) * sizeof(rl_jv_t));
        size_t i = 0, k = 0;
        while (i < s->n) {
            uint32_t c;
            size_t len = rl_jutf8_dec(s->p + i, s->n - i, &c);
            out[k++] = rl_jv_str_cp(x, s->p + i, len, 1); // iterating a Markup gives str
            i += len;
        }
        x->steps += k;
        *count = k;
        return out;
    }
    case JV_LIST: *count = v.u.l->n; return v.u.l->v;
    case JV_GEN:
        // Python resumes a generator where the last loop stopped, or finds it exhausted; this
        // engine computes generators whole, so a second pass is refused rather than guessed
        if (v.u.l->used) {
            rl_jx_fail(x, n, RL_EUNSUPPORTED,
                       "iterating a %s (from map/select/reverse/...) a second time is not "
                       "supported; apply |list once and reuse the list",
                       rl_jv_type_name(v));
        }
        v.u.l->used = 1;
        *count = v.u.l->n;
        return v.u.l->v;
    case JV_DICT: *count = v.u.d->n; return v.u.d->k;
    default:
        rl_jx_fail(x, n, RL_EINVAL, "TypeError: '%s' object is not iterable", rl_jv_type_name(v));
    }
}

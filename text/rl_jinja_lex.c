// rl_jinja_lex — splits a template into tokens as jinja2's lexer does with trim_blocks and
// lstrip_blocks on: data between tags, {{ }} / {% %} tags with their expression tokens,
// comments and {% raw %} blocks consumed here, and the whitespace control of `-` / `+` markers.
// Not the parser: tokens carry no meaning beyond their type.
//
// The rules it mirrors (jinja2 3.1):
//  - before lexing, \r\n and \r become \n and one trailing newline is dropped
//    (keep_trailing_newline off);
//  - `{%-`, `{{-`, `{#-` strip all whitespace (Python str.isspace) before the tag;
//  - lstrip_blocks: before a `{%` or `{#` tag (not `{{`, not `{%+`), spaces and tabs, or any
//    other whitespace, between the start of the line and the tag are removed when nothing else
//    is on that line before it; "start of the line" includes the start of the template and the
//    point right after a tag whose end consumed a newline;
//  - `-%}`, `-}}`, `-#}` strip all whitespace after the tag; `%}` and `#}` (trim_blocks) eat one
//    newline right after them; `+%}` and `+#}` eat nothing;
//  - the end of a tag is only recognized while brackets opened inside it are closed.
#include "rl_jinja_int.h"

#include "rl_err.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rl_jarena_t *a;
    rl_jfail_t *f;
    const char *s;
    size_t n;
    rl_jtok_t *toks;
    size_t ntok, cap;
    // position bookkeeping (queries come in increasing order)
    size_t cur, lstart;
    int line;
    size_t colpos;
    int col;
} s_lex_t;

static void s_linecol(s_lex_t *L, size_t pos, int *line, int *col) {
    if (pos < L->cur) {
        // rare: a position before the cursor (error reports); recount from the start
        L->cur = 0, L->lstart = 0, L->line = 1, L->colpos = 0, L->col = 1;
    }
    while (L->cur < pos) {
        if (L->s[L->cur] == '\n') {
            L->line++;
            L->lstart = L->cur + 1;
            L->colpos = L->lstart;
            L->col = 1;
        }
        L->cur++;
    }
    if (L->colpos < L->lstart) {
        L->colpos = L->lstart;
        L->col = 1;
    }
    L->col += (int)rl_jutf8_count(L->s + L->colpos, pos - L->colpos);
    L->colpos = pos;
    *line = L->line;
    *col = L->col;
}

_Noreturn static void s_fail_at(s_lex_t *L, size_t pos, int code, const char *msg) {
    int line, col;
    s_linecol(L, pos, &line, &col);
    rl_jfail(L->f, code, line, col, "%s", msg);
}

static rl_jtok_t *s_push(s_lex_t *L, int type, size_t pos) {
    if (L->ntok == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        rl_jtok_t *t = rl_jalloc(L->a, L->f, cap * sizeof(rl_jtok_t));
        if (L->ntok) {
            memcpy(t, L->toks, L->ntok * sizeof(rl_jtok_t));
        }
        L->toks = t;
        L->cap = cap;
    }
    rl_jtok_t *t = &L->toks[L->ntok++];
    memset(t, 0, sizeof(*t));
    t->type = (uint8_t)type;
    s_linecol(L, pos, &t->line, &t->col);
    return t;
}

static char *s_copy(s_lex_t *L, const char *p, size_t n) {
    char *c = rl_jalloc(L->a, L->f, n + 1);
    memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

// Length of the whitespace code point at s[i] (0 if none).
static size_t s_ws_at(s_lex_t *L, size_t i) {
    if (i >= L->n) {
        return 0;
    }
    uint32_t c;
    size_t k = rl_jutf8_dec(L->s + i, L->n - i, &c);
    return rl_jis_space(c) ? k : 0;
}

static size_t s_skip_ws(s_lex_t *L, size_t i) {
    size_t k;
    while ((k = s_ws_at(L, i)) > 0) {
        i += k;
    }
    return i;
}

// Start of the trailing whitespace of s[lo..hi).
static size_t s_rstrip(s_lex_t *L, size_t lo, size_t hi) {
    while (hi > lo) {
        size_t q = hi - 1;
        while (q > lo && ((unsigned char)L->s[q] & 0xC0) == 0x80) {
            q--;
        }
        if (s_ws_at(L, q) != hi - q) {
            break;
        }
        hi = q;
    }
    return hi;
}

static int s_starts(s_lex_t *L, size_t i, const char *lit) {
    size_t m = strlen(lit);
    return i + m <= L->n && memcmp(L->s + i, lit, m) == 0;
}

static void s_data(s_lex_t *L, size_t lo, size_t hi) {
    if (hi > lo) {
        rl_jtok_t *t = s_push(L, JT_DATA, lo);
        t->s = s_copy(L, L->s + lo, hi - lo);
        t->n = hi - lo;
    }
}

// Emits data s[lo..hi) before a tag with strip sign `sign`; lstrip applies to {% and {#.
static void s_data_before_tag(s_lex_t *L, size_t lo, size_t hi, char sign, int lstrip,
                              int line_starting) {
    if (sign == '-') {
        hi = s_rstrip(L, lo, hi);
    } else if (sign != '+' && lstrip) {
        size_t l_pos = lo;
        for (size_t i = hi; i > lo; i--) {
            if (L->s[i - 1] == '\n') {
                l_pos = i;
                break;
            }
        }
        if ((l_pos > lo || line_starting) && l_pos < hi && s_rstrip(L, l_pos, hi) == l_pos) {
            hi = l_pos;
        }
    }
    s_data(L, lo, hi);
}

// ---- expression tokens

static int s_isdigit(char c) {
    return c >= '0' && c <= '9';
}

// (\d+_)*\d+ at i: end, or i when there is no digit.
static size_t s_digits(s_lex_t *L, size_t i) {
    if (i >= L->n || !s_isdigit(L->s[i])) {
        return i;
    }
    while (i < L->n && s_isdigit(L->s[i])) {
        i++;
    }
    while (i + 1 < L->n && L->s[i] == '_' && s_isdigit(L->s[i + 1])) {
        i++;
        while (i < L->n && s_isdigit(L->s[i])) {
            i++;
        }
    }
    return i;
}

// jinja2's float_re at i: end, or 0 when it does not match.
static size_t s_float(s_lex_t *L, size_t i) {
    if (i > 0 && L->s[i - 1] == '.') {
        return 0;
    }
    size_t j = s_digits(L, i);
    if (j == i) {
        return 0;
    }
    size_t frac = 0;
    if (j < L->n && L->s[j] == '.') {
        size_t k = s_digits(L, j + 1);
        if (k > j + 1) {
            frac = k;
        }
    }
    size_t e = frac ? frac : j;
    if (e < L->n && (L->s[e] == 'e' || L->s[e] == 'E')) {
        size_t k = e + 1;
        if (k < L->n && (L->s[k] == '+' || L->s[k] == '-')) {
            k++;
        }
        size_t m = s_digits(L, k);
        if (m > k) {
            return m;
        }
    }
    return frac;
}

static int s_hexval(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

// jinja2's integer_re at i: end, or 0.
static size_t s_integer(s_lex_t *L, size_t i, int *base) {
    const char *s = L->s;
    size_t n = L->n;
    if (i + 1 < n && s[i] == '0' &&
        (s[i + 1] == 'b' || s[i + 1] == 'B' || s[i + 1] == 'o' || s[i + 1] == 'O' ||
         s[i + 1] == 'x' || s[i + 1] == 'X')) {
        char p = (char)(s[i + 1] | 0x20);
        int b = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        size_t j = i + 2;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') {
                k++;
            }
            int v = k < n ? s_hexval(s[k]) : -1;
            if (v < 0 || v >= b) {
                break;
            }
            j = k + 1;
        }
        if (j > i + 2) {
            *base = b;
            return j;
        }
    }
    *base = 10;
    if (i < n && s[i] >= '1' && s[i] <= '9') {
        size_t j = i + 1;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') {
                k++;
            }
            if (k < n && s_isdigit(s[k])) {
                j = k + 1;
            } else {
                break;
            }
        }
        return j;
    }
    if (i < n && s[i] == '0') {
        size_t j = i + 1;
        for (;;) {
            size_t k = j;
            if (k < n && s[k] == '_') {
                k++;
            }
            if (k < n && s[k] == '0') {
                j = k + 1;
            } else {
                break;
            }
        }
        return j;
    }
    return 0;
}

static const struct {
    const char *text;
    int op;
} s_ops[] = {
    {"//", JO_FLOORDIV}, {"**", JO_POW},   {"==", JO_EQ},      {"!=", JO_NE},      {">=", JO_GTEQ},
    {"<=", JO_LTEQ},     {"+", JO_ADD},    {"-", JO_SUB},      {"/", JO_DIV},      {"*", JO_MUL},
    {"%", JO_MOD},       {"~", JO_TILDE},  {"[", JO_LBRACKET}, {"]", JO_RBRACKET}, {"(", JO_LPAREN},
    {")", JO_RPAREN},    {"{", JO_LBRACE}, {"}", JO_RBRACE},   {">", JO_GT},       {"<", JO_LT},
    {"=", JO_ASSIGN},    {".", JO_DOT},    {":", JO_COLON},    {"|", JO_PIPE},     {",", JO_COMMA},
    {";", JO_SEMICOLON},
};

const char *rl_jop_text(int op) {
    for (size_t i = 0; i < sizeof(s_ops) / sizeof(s_ops[0]); i++) {
        if (s_ops[i].op == op) {
            return s_ops[i].text;
        }
    }
    return "?";
}

// Appends the escape text Python's backslashreplace gives code point c.
static size_t s_bsreplace(uint32_t c, char *o) {
    if (c < 0x100) {
        return (size_t)sprintf(o, "\\x%02x", (unsigned)c);
    }
    if (c < 0x10000) {
        return (size_t)sprintf(o, "\\u%04x", (unsigned)c);
    }
    return (size_t)sprintf(o, "\\U%08x", (unsigned)c);
}

// Decodes the body of a string literal s[lo..hi) as jinja2 does (Python's unicode-escape
// codec after backslashreplace). Returns the arena text; *len its bytes.
static char *s_unescape(s_lex_t *L, size_t lo, size_t hi, size_t *len) {
    // escapes never grow the text except a backslash before non-ASCII (at most 11 bytes per
    // code point of at least 2 bytes)
    char *o = rl_jalloc(L->a, L->f, (hi - lo) * 6 + 1);
    size_t k = 0, i = lo;
    const char *s = L->s;
    while (i < hi) {
        if (s[i] != '\\') {
            o[k++] = s[i++];
            continue;
        }
        size_t at = i;
        i++; // the string rule guarantees a character after the backslash
        char c = s[i];
        uint32_t cp = 0;
        int nhex = 0;
        switch (c) {
        case '\n': i++; continue;
        case '\\':
            o[k++] = '\\';
            i++;
            continue;
        case '\'':
            o[k++] = '\'';
            i++;
            continue;
        case '"':
            o[k++] = '"';
            i++;
            continue;
        case 'a':
            o[k++] = '\a';
            i++;
            continue;
        case 'b':
            o[k++] = '\b';
            i++;
            continue;
        case 'f':
            o[k++] = '\f';
            i++;
            continue;
        case 'n':
            o[k++] = '\n';
            i++;
            continue;
        case 'r':
            o[k++] = '\r';
            i++;
            continue;
        case 't':
            o[k++] = '\t';
            i++;
            continue;
        case 'v':
            o[k++] = '\v';
            i++;
            continue;
        case 'x': nhex = 2; break;
        case 'u': nhex = 4; break;
        case 'U': nhex = 8; break;
        case 'N':
            s_fail_at(L, at, RL_EUNSUPPORTED, "\\N{...} escapes in strings are not supported");
        default: break;
        }
        if (nhex) {
            i++;
            for (int q = 0; q < nhex; q++) {
                int v = i < hi ? s_hexval(s[i]) : -1;
                if (v < 0) {
                    s_fail_at(L, at, RL_EINVAL, "truncated \\x, \\u or \\U escape in a string");
                }
                cp = cp * 16 + (uint32_t)v;
                i++;
            }
        } else if (c >= '0' && c <= '7') {
            for (int q = 0; q < 3 && i < hi && s[i] >= '0' && s[i] <= '7'; q++) {
                cp = cp * 8 + (uint32_t)(s[i] - '0');
                i++;
            }
        } else if ((unsigned char)c >= 0x80) {
            // backslashreplace turned the character into \xNN / \uNNNN first: this backslash
            // and the one of that text make an escaped backslash, and the rest stays literal
            uint32_t u;
            size_t m = rl_jutf8_dec(s + i, hi - i, &u);
            k += s_bsreplace(u, o + k);
            i += m;
            continue;
        } else {
            // unknown escapes stay as they are
            o[k++] = '\\';
            continue;
        }
        if (cp > 0x10FFFF) {
            s_fail_at(L, at, RL_EINVAL, "illegal Unicode character in a string escape");
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            s_fail_at(L, at, RL_EUNSUPPORTED, "a surrogate code point in a string escape");
        }
        k += rl_jutf8_enc(cp, o + k);
    }
    o[k] = '\0';
    *len = k;
    return o;
}

// Interned names: equal names share one pointer (scopes compare pointers first).
typedef struct {
    const char **v;
    size_t n, cap;
} s_names_t;

static const char *s_intern(s_lex_t *L, s_names_t *nm, const char *p, size_t n) {
    for (size_t i = 0; i < nm->n; i++) {
        if (strlen(nm->v[i]) == n && memcmp(nm->v[i], p, n) == 0) {
            return nm->v[i];
        }
    }
    if (nm->n == nm->cap) {
        size_t cap = nm->cap ? nm->cap * 2 : 64;
        const char **v = rl_jalloc(L->a, L->f, cap * sizeof(char *));
        if (nm->n) {
            memcpy(v, nm->v, nm->n * sizeof(char *));
        }
        nm->v = v;
        nm->cap = cap;
    }
    return nm->v[nm->n++] = s_copy(L, p, n);
}

// Tokens of one {{ }} or {% %} tag starting at i (after the opener and its sign). Returns the
// position after the tag's end; *line_starting tells whether that end consumed a newline last.
static size_t s_tag(s_lex_t *L, s_names_t *nm, size_t i, int block, size_t open_pos,
                    int *line_starting) {
    char stack[RL_JINJA_MAX_PARSE_DEPTH];
    int depth = 0;
    const char *s = L->s;
    size_t n = L->n;
    for (;;) {
        if (depth == 0) {
            if (block) {
                if (s_starts(L, i, "+%}")) {
                    s_push(L, JT_BLOCK_END, i);
                    *line_starting = 0;
                    return i + 3;
                }
                if (s_starts(L, i, "-%}")) {
                    s_push(L, JT_BLOCK_END, i);
                    size_t e = s_skip_ws(L, i + 3);
                    *line_starting = e > i + 3 ? s[e - 1] == '\n' : 0;
                    return e;
                }
                if (s_starts(L, i, "%}")) {
                    s_push(L, JT_BLOCK_END, i);
                    if (i + 2 < n && s[i + 2] == '\n') {
                        *line_starting = 1;
                        return i + 3;
                    }
                    *line_starting = 0;
                    return i + 2;
                }
            } else {
                if (s_starts(L, i, "-}}")) {
                    s_push(L, JT_VAR_END, i);
                    size_t e = s_skip_ws(L, i + 3);
                    *line_starting = e > i + 3 ? s[e - 1] == '\n' : 0;
                    return e;
                }
                if (s_starts(L, i, "}}")) {
                    s_push(L, JT_VAR_END, i);
                    *line_starting = 0;
                    return i + 2;
                }
            }
        }
        if (i >= n) {
            s_fail_at(L, open_pos, RL_EINVAL,
                      block ? "unexpected end of template: this '{%' tag is never closed by '%}'"
                            : "unexpected end of template: this '{{' is never closed by '}}'");
        }
        size_t w = s_skip_ws(L, i);
        if (w > i) {
            i = w;
            continue;
        }
        char c = s[i];
        size_t e;
        int base;
        if ((e = s_float(L, i)) > 0) {
            rl_jtok_t *t = s_push(L, JT_FLOAT, i);
            char buf[128];
            size_t k = 0;
            for (size_t q = i; q < e && k + 1 < sizeof(buf); q++) {
                if (s[q] != '_') {
                    buf[k++] = s[q];
                }
            }
            buf[k] = '\0';
            t->f = strtod(buf, NULL);
            i = e;
            continue;
        }
        if ((e = s_integer(L, i, &base)) > 0) {
            rl_jtok_t *t = s_push(L, JT_INT, i);
            uint64_t v = 0;
            for (size_t q = (base == 10 ? i : i + 2); q < e; q++) {
                if (s[q] == '_') {
                    continue;
                }
                uint64_t d = (uint64_t)s_hexval(s[q]);
                if (v > (UINT64_MAX - d) / (uint64_t)base || v * (uint64_t)base + d > INT64_MAX) {
                    s_fail_at(L, i, RL_EUNSUPPORTED,
                              "integer literal does not fit in 64 bits (not supported)");
                }
                v = v * (uint64_t)base + d;
            }
            t->i = (int64_t)v;
            i = e;
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            e = i + 1;
            while (e < n && ((s[e] >= 'a' && s[e] <= 'z') || (s[e] >= 'A' && s[e] <= 'Z') ||
                             s_isdigit(s[e]) || s[e] == '_')) {
                e++;
            }
            rl_jtok_t *t = s_push(L, JT_NAME, i);
            t->s = s_intern(L, nm, s + i, e - i);
            t->n = e - i;
            i = e;
            continue;
        }
        if (c == '\'' || c == '"') {
            e = i + 1;
            while (e < n && s[e] != c) {
                e += (s[e] == '\\' && e + 1 < n) ? 2 : 1;
            }
            if (e >= n) {
                s_fail_at(L, i, RL_EINVAL, "unterminated string literal");
            }
            rl_jtok_t *t = s_push(L, JT_STRING, i);
            t->s = s_unescape(L, i + 1, e, &t->n);
            i = e + 1;
            continue;
        }
        int op = 0;
        size_t oplen = 0;
        for (size_t q = 0; q < sizeof(s_ops) / sizeof(s_ops[0]); q++) {
            if (s_starts(L, i, s_ops[q].text)) {
                op = s_ops[q].op;
                oplen = strlen(s_ops[q].text);
                break;
            }
        }
        if (!op) {
            char msg[64];
            uint32_t cp;
            rl_jutf8_dec(s + i, n - i, &cp);
            if (cp >= 0x20 && cp < 0x7F) {
                snprintf(msg, sizeof(msg), "unexpected character '%c'", (char)cp);
            } else {
                snprintf(msg, sizeof(msg), "unexpected character U+%04X", (unsigned)cp);
            }
            s_fail_at(L, i, RL_EINVAL, msg);
        }
        if (op == JO_LPAREN || op == JO_LBRACKET || op == JO_LBRACE) {
            if (depth >= RL_JINJA_MAX_PARSE_DEPTH) {
                s_fail_at(L, i, RL_EINVAL, "brackets nested too deeply");
            }
            stack[depth++] = op == JO_LPAREN ? ')' : op == JO_LBRACKET ? ']' : '}';
        } else if (op == JO_RPAREN || op == JO_RBRACKET || op == JO_RBRACE) {
            char msg[64];
            if (depth == 0) {
                snprintf(msg, sizeof(msg), "unexpected '%c'", c);
                s_fail_at(L, i, RL_EINVAL, msg);
            }
            if (stack[depth - 1] != c) {
                snprintf(msg, sizeof(msg), "unexpected '%c', expected '%c'", c, stack[depth - 1]);
                s_fail_at(L, i, RL_EINVAL, msg);
            }
            depth--;
        }
        rl_jtok_t *t = s_push(L, JT_OP, i);
        t->op = (uint8_t)op;
        i += oplen;
    }
}

size_t rl_jlex(rl_jarena_t *a, rl_jfail_t *f, const char *src, size_t n, rl_jtok_t **toks_p) {
    s_lex_t L = {.a = a, .f = f, .s = src, .n = n, .line = 1, .col = 1};
    s_names_t nm = {0};
    size_t pos = 0;
    int line_starting = 1;
    while (pos < n) {
        // the next tag opener
        size_t t = pos;
        int kind = 0; // '{', '%', '#'
        while (t + 1 < n) {
            const char *q = memchr(src + t, '{', n - t - 1);
            if (!q) {
                t = n;
                break;
            }
            t = (size_t)(q - src);
            char c2 = src[t + 1];
            if (c2 == '{' || c2 == '%' || c2 == '#') {
                kind = c2;
                break;
            }
            t++;
        }
        if (!kind) {
            s_data(&L, pos, n);
            break;
        }
        char sign = (t + 2 < n && (src[t + 2] == '-' || src[t + 2] == '+')) ? src[t + 2] : 0;
        size_t body = t + 2 + (sign ? 1 : 0);
        // {% raw %} ... {% endraw %}
        if (kind == '%') {
            size_t r = s_skip_ws(&L, body);
            if (s_starts(&L, r, "raw")) {
                size_t r2 = s_skip_ws(&L, r + 3);
                size_t after = 0;
                if (s_starts(&L, r2, "-%}")) {
                    after = s_skip_ws(&L, r2 + 3);
                } else if (s_starts(&L, r2, "%}")) {
                    after = r2 + 2;
                }
                if (after) {
                    s_data_before_tag(&L, pos, t, sign, 1, line_starting);
                    if (after >= n) {
                        break; // jinja2 stops quietly when the raw tag ends the template
                    }
                    // find {%[-+]? \s* endraw \s* (+%}|-%}\s*|%}\n?)
                    size_t q = after;
                    for (;;) {
                        size_t h = q;
                        while (h + 1 < n && !(src[h] == '{' && src[h + 1] == '%')) {
                            h++;
                        }
                        if (h + 1 >= n) {
                            s_fail_at(&L, t, RL_EINVAL, "missing {% endraw %} for this raw block");
                        }
                        char esign = (h + 2 < n && (src[h + 2] == '-' || src[h + 2] == '+'))
                                         ? src[h + 2]
                                         : 0;
                        size_t e1 = s_skip_ws(&L, h + 2 + (esign ? 1 : 0));
                        if (s_starts(&L, e1, "endraw")) {
                            size_t e2 = s_skip_ws(&L, e1 + 6);
                            size_t end = 0;
                            int ls = 0;
                            if (s_starts(&L, e2, "+%}")) {
                                end = e2 + 3;
                            } else if (s_starts(&L, e2, "-%}")) {
                                end = s_skip_ws(&L, e2 + 3);
                                ls = end > e2 + 3 && src[end - 1] == '\n';
                            } else if (s_starts(&L, e2, "%}")) {
                                end = e2 + 2;
                                if (end < n && src[end] == '\n') {
                                    end++;
                                    ls = 1;
                                }
                            }
                            if (end) {
                                int starting = after > r2 + 2 ? src[after - 1] == '\n' : 0;
                                s_data_before_tag(&L, after, h, esign, 1, starting);
                                pos = end;
                                line_starting = ls;
                                break;
                            }
                        }
                        q = h + 2;
                    }
                    continue;
                }
            }
        }
        s_data_before_tag(&L, pos, t, sign, kind != '{', line_starting);
        if (kind == '#') {
            if (body >= n) {
                break; // jinja2 stops quietly when the comment opener ends the template
            }
            size_t q = body;
            size_t end = 0;
            int ls = 0;
            while (q < n) {
                if (s_starts(&L, q, "+#}")) {
                    end = q + 3;
                    break;
                }
                if (s_starts(&L, q, "-#}")) {
                    end = s_skip_ws(&L, q + 3);
                    ls = end > q + 3 && src[end - 1] == '\n';
                    break;
                }
                if (s_starts(&L, q, "#}")) {
                    end = q + 2;
                    if (end < n && src[end] == '\n') {
                        end++;
                        ls = 1;
                    }
                    break;
                }
                q++;
            }
            if (!end) {
                s_fail_at(&L, t, RL_EINVAL, "missing '#}' to end this comment");
            }
            pos = end;
            line_starting = ls;
            continue;
        }
        int block = kind == '%';
        s_push(&L, block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, t);
        pos = s_tag(&L, &nm, body, block, t, &line_starting);
    }
    s_push(&L, JT_EOF, n);
    *toks_p = L.toks;
    return L.ntok;
}

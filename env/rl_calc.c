// rl_calc — integer arithmetic with Python's semantics (rl_calc.h, docs/envs.md): a recursive-
// descent parser of Python's grammar for + - * ** and parentheses over arbitrary-precision
// integers (sign and magnitude, base 1e9 limbs), every value held to RL_CALC_MAX_DIGITS digits.
#include "rl_calc.h"

#include "rl_err.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define S_BASE 1000000000u
#define S_LIMB_DIGITS 9

// An integer: neg and the magnitude d[0..n) (least significant limb first); n = 0 is zero.
typedef struct {
    int neg;
    int n;
    uint32_t *d;
} s_big_t;

typedef enum { S_END, S_INT, S_PLUS, S_MINUS, S_STAR, S_POW, S_LP, S_RP, S_BADCHAR } s_tok_t;

typedef struct {
    const char *s;
    size_t n, i;    // the text and the next byte
    s_tok_t tok;    // the current token, starting at tok_at
    size_t tok_at, tok_len;
    int depth;      // parentheses open
    int rc;         // 0, RL_EINVAL (a bad call) or RL_ENOMEM
} s_parser_t;

static void s_free(s_big_t *b) {
    free(b->d);
    b->d = NULL;
    b->n = 0;
    b->neg = 0;
}

static int s_alloc(s_big_t *b, int limbs) {
    b->neg = 0;
    b->n = 0;
    b->d = calloc((size_t)(limbs > 0 ? limbs : 1), sizeof *b->d);
    return b->d ? 0 : RL_ENOMEM;
}

static void s_trim(s_big_t *b) {
    while (b->n > 0 && b->d[b->n - 1] == 0) {
        b->n--;
    }
    if (b->n == 0) {
        b->neg = 0;
    }
}

static int s_digits(const s_big_t *b) {
    if (b->n == 0) {
        return 1;
    }
    int k = 0;
    for (uint32_t top = b->d[b->n - 1]; top; top /= 10) {
        k++;
    }
    return (b->n - 1) * S_LIMB_DIGITS + k;
}

// |a| vs |b|: -1, 0, 1
static int s_cmp_mag(const s_big_t *a, const s_big_t *b) {
    if (a->n != b->n) {
        return a->n < b->n ? -1 : 1;
    }
    for (int i = a->n - 1; i >= 0; i--) {
        if (a->d[i] != b->d[i]) {
            return a->d[i] < b->d[i] ? -1 : 1;
        }
    }
    return 0;
}

// out = a + (negate_b ? -b : b)
static int s_add(const s_big_t *a, const s_big_t *b, int negate_b, s_big_t *out) {
    int bneg = b->n ? b->neg ^ negate_b : 0;
    int n = (a->n > b->n ? a->n : b->n) + 1;
    if (s_alloc(out, n) != 0) {
        return RL_ENOMEM;
    }
    if (a->neg == bneg || a->n == 0 || b->n == 0) {
        uint64_t carry = 0;
        for (int i = 0; i < n; i++) {
            uint64_t s = carry + (i < a->n ? a->d[i] : 0) + (i < b->n ? b->d[i] : 0);
            out->d[i] = (uint32_t)(s % S_BASE);
            carry = s / S_BASE;
        }
        out->n = n;
        out->neg = a->n ? a->neg : bneg;
    } else {
        const s_big_t *big = a, *small = b;
        int neg = a->neg;
        if (s_cmp_mag(a, b) < 0) {
            big = b;
            small = a;
            neg = bneg;
        }
        int64_t borrow = 0;
        for (int i = 0; i < big->n; i++) {
            int64_t s = (int64_t)big->d[i] - borrow - (i < small->n ? small->d[i] : 0);
            borrow = s < 0;
            out->d[i] = (uint32_t)(s < 0 ? s + S_BASE : s);
        }
        out->n = big->n;
        out->neg = neg;
    }
    s_trim(out);
    return 0;
}

static int s_mul(const s_big_t *a, const s_big_t *b, s_big_t *out) {
    if (s_alloc(out, a->n + b->n) != 0) {
        return RL_ENOMEM;
    }
    uint64_t *acc = calloc((size_t)(a->n + b->n + 1), sizeof *acc);
    if (!acc) {
        s_free(out);
        return RL_ENOMEM;
    }
    for (int i = 0; i < a->n; i++) {
        uint64_t carry = 0;
        for (int j = 0; j < b->n; j++) {
            uint64_t t = acc[i + j] + (uint64_t)a->d[i] * b->d[j] + carry;
            acc[i + j] = t % S_BASE;
            carry = t / S_BASE;
        }
        for (int k = i + b->n; carry; k++) {
            uint64_t t = acc[k] + carry;
            acc[k] = t % S_BASE;
            carry = t / S_BASE;
        }
    }
    for (int i = 0; i < a->n + b->n; i++) {
        out->d[i] = (uint32_t)acc[i];
    }
    free(acc);
    out->n = a->n + b->n;
    out->neg = a->neg ^ b->neg;
    s_trim(out);
    return 0;
}

static int s_small(s_big_t *b, uint32_t v) {
    if (s_alloc(b, 1) != 0) {
        return RL_ENOMEM;
    }
    b->d[0] = v;
    b->n = v ? 1 : 0;
    return 0;
}

// log10 |b| (b not zero), to about 1e-12 relative
static double s_log10(const s_big_t *b) {
    double top = b->d[b->n - 1] + (b->n > 1 ? b->d[b->n - 2] / (double)S_BASE : 0.0);
    return (b->n - 1) * (double)S_LIMB_DIGITS + log10(top);
}

// Keeps a value within the digit limit: RL_EINVAL (and frees it) when it holds more.
static int s_limit(s_big_t *b) {
    if (s_digits(b) > RL_CALC_MAX_DIGITS) {
        s_free(b);
        return RL_EINVAL;
    }
    return 0;
}

// out = b ** e: e < 0 is a bad call (Python gives a float, or divides by zero); a result that
// would exceed the digit limit is refused before it is computed (the estimate's margin, 2
// digits, is far above its error; near the limit the exact digits decide).
static int s_pow(const s_big_t *b, const s_big_t *e, s_big_t *out) {
    if (e->neg) {
        return RL_EINVAL;
    }
    if (e->n == 0) {
        return s_small(out, 1);
    }
    if (b->n == 0) {
        return s_small(out, 0);
    }
    if (b->n == 1 && b->d[0] == 1) { // 1 or -1: the sign follows e's parity (S_BASE is even)
        int rc = s_small(out, 1);
        out->neg = b->neg && (e->d[0] & 1u);
        return rc;
    }
    if (e->n > 1 || (double)e->d[0] * s_log10(b) > RL_CALC_MAX_DIGITS + 2.0) {
        return RL_EINVAL;
    }
    uint32_t k = e->d[0];
    int rc = s_small(out, 1);
    int top = 31;
    while (top > 0 && !(k >> top)) {
        top--;
    }
    for (int bit = top; bit >= 0 && rc == 0; bit--) { // left to right: no value beyond b**k
        s_big_t t;
        if ((rc = s_mul(out, out, &t)) != 0) {
            break;
        }
        s_free(out);
        *out = t;
        if ((k >> bit) & 1u) {
            if ((rc = s_mul(out, b, &t)) != 0) {
                break;
            }
            s_free(out);
            *out = t;
        }
    }
    if (rc != 0) {
        s_free(out);
        return rc;
    }
    return s_limit(out);
}

// ---- the parser ------------------------------------------------------------------------------

static void s_next(s_parser_t *p) {
    while (p->i < p->n && p->s[p->i] == ' ') {
        p->i++;
    }
    p->tok_at = p->i;
    p->tok_len = 1;
    if (p->i >= p->n) {
        p->tok = S_END;
        p->tok_len = 0;
        return;
    }
    char c = p->s[p->i];
    if (c >= '0' && c <= '9') {
        size_t j = p->i;
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') {
            j++;
        }
        p->tok = S_INT;
        p->tok_len = j - p->i;
    } else if (c == '*' && p->i + 1 < p->n && p->s[p->i + 1] == '*') {
        p->tok = S_POW;
        p->tok_len = 2;
    } else {
        p->tok = c == '+'   ? S_PLUS
                 : c == '-' ? S_MINUS
                 : c == '*' ? S_STAR
                 : c == '(' ? S_LP
                 : c == ')' ? S_RP
                            : S_BADCHAR;
    }
    p->i += p->tok_len;
}

static int s_fail(s_parser_t *p, int rc) {
    if (p->rc == 0) {
        p->rc = rc;
    }
    return p->rc;
}

static int s_expr(s_parser_t *p, s_big_t *out);

// atom := integer | "(" expr ")"
static int s_atom(s_parser_t *p, s_big_t *out) {
    if (p->tok == S_INT) {
        const char *t = p->s + p->tok_at;
        size_t len = p->tok_len;
        size_t z = 0;
        while (z < len && t[z] == '0') {
            z++;
        }
        if (z > 0 && z < len) { // a leading 0 before other digits: Python 3's syntax error
            return s_fail(p, RL_EINVAL);
        }
        if (len - z > RL_CALC_MAX_DIGITS) {
            return s_fail(p, RL_EINVAL);
        }
        int limbs = (int)((len - z + S_LIMB_DIGITS - 1) / S_LIMB_DIGITS);
        if (s_alloc(out, limbs) != 0) {
            return s_fail(p, RL_ENOMEM);
        }
        // limbs from the right end, 9 digits each
        size_t end = len;
        for (int l = 0; l < limbs; l++) {
            size_t beg = end > z + S_LIMB_DIGITS ? end - S_LIMB_DIGITS : z;
            uint32_t v = 0;
            for (size_t q = beg; q < end; q++) {
                v = v * 10u + (uint32_t)(t[q] - '0');
            }
            out->d[l] = v;
            end = beg;
        }
        out->n = limbs;
        s_trim(out);
        s_next(p);
        return 0;
    }
    if (p->tok == S_LP) {
        if (++p->depth > RL_CALC_MAX_DEPTH) {
            return s_fail(p, RL_EINVAL);
        }
        s_next(p);
        if (s_expr(p, out) != 0) {
            return p->rc;
        }
        if (p->tok != S_RP) {
            s_free(out);
            return s_fail(p, RL_EINVAL);
        }
        p->depth--;
        s_next(p);
        return 0;
    }
    return s_fail(p, RL_EINVAL);
}

static int s_unary(s_parser_t *p, s_big_t *out);

// power := atom ["**" unary]
static int s_power(s_parser_t *p, s_big_t *out) {
    s_big_t b;
    if (s_atom(p, &b) != 0) {
        return p->rc;
    }
    if (p->tok != S_POW) {
        *out = b;
        return 0;
    }
    s_next(p);
    s_big_t e;
    if (s_unary(p, &e) != 0) {
        s_free(&b);
        return p->rc;
    }
    int rc = s_pow(&b, &e, out);
    s_free(&b);
    s_free(&e);
    return rc ? s_fail(p, rc) : 0;
}

// unary := ("+" | "-")* power (a chain of signs is a sign: no recursion per operator)
static int s_unary(s_parser_t *p, s_big_t *out) {
    int neg = 0;
    while (p->tok == S_PLUS || p->tok == S_MINUS) {
        neg ^= p->tok == S_MINUS;
        s_next(p);
    }
    if (s_power(p, out) != 0) {
        return p->rc;
    }
    out->neg = out->n ? out->neg ^ neg : 0;
    return 0;
}

// term := unary ("*" unary)*
static int s_term(s_parser_t *p, s_big_t *out) {
    if (s_unary(p, out) != 0) {
        return p->rc;
    }
    while (p->tok == S_STAR) {
        s_next(p);
        s_big_t r, t;
        if (s_unary(p, &r) != 0) {
            s_free(out);
            return p->rc;
        }
        int rc = s_mul(out, &r, &t);
        s_free(out);
        s_free(&r);
        if (rc == 0) {
            rc = s_limit(&t);
        }
        if (rc != 0) {
            return s_fail(p, rc);
        }
        *out = t;
    }
    return 0;
}

// expr := term (("+" | "-") term)*
static int s_expr(s_parser_t *p, s_big_t *out) {
    if (s_term(p, out) != 0) {
        return p->rc;
    }
    while (p->tok == S_PLUS || p->tok == S_MINUS) {
        int minus = p->tok == S_MINUS;
        s_next(p);
        s_big_t r, t;
        if (s_term(p, &r) != 0) {
            s_free(out);
            return p->rc;
        }
        int rc = s_add(out, &r, minus, &t);
        s_free(out);
        s_free(&r);
        if (rc == 0) {
            rc = s_limit(&t);
        }
        if (rc != 0) {
            return s_fail(p, rc);
        }
        *out = t;
    }
    return 0;
}

static int s_to_text(const s_big_t *b, char *out, size_t cap) {
    size_t need = (size_t)s_digits(b) + (b->neg ? 1u : 0u) + 1u;
    if (need > cap) {
        return RL_EINVAL;
    }
    char *o = out;
    if (b->neg) {
        *o++ = '-';
    }
    if (b->n == 0) {
        *o++ = '0';
    } else {
        char limb[16];
        int k = 0;
        for (uint32_t top = b->d[b->n - 1]; top || k == 0; top /= 10) {
            limb[k++] = (char)('0' + top % 10);
        }
        while (k > 0) {
            *o++ = limb[--k];
        }
        for (int i = b->n - 2; i >= 0; i--) {
            uint32_t v = b->d[i];
            for (int q = S_LIMB_DIGITS - 1; q >= 0; q--) {
                o[q] = (char)('0' + v % 10);
                v /= 10;
            }
            o += S_LIMB_DIGITS;
        }
    }
    *o = '\0';
    return 0;
}

int rl_calc_eval(const char *expr, size_t len, char *out, size_t cap) {
    if (cap > 0) {
        out[0] = '\0';
    }
    if (cap < RL_CALC_MAX_DIGITS + 2) {
        return RL_EINVAL;
    }
    while (len > 0 && expr[0] == ' ') {
        expr++;
        len--;
    }
    while (len > 0 && expr[len - 1] == ' ') {
        len--;
    }
    if (len == 0 || len > RL_CALC_MAX_LEN) {
        return RL_EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        if (!strchr("0123456789 +-*()", expr[i]) || expr[i] == '\0') {
            return RL_EINVAL;
        }
    }
    s_parser_t p = {.s = expr, .n = len};
    s_next(&p);
    s_big_t v;
    if (s_expr(&p, &v) != 0) {
        return p.rc;
    }
    int rc = p.tok == S_END ? s_to_text(&v, out, cap) : RL_EINVAL;
    s_free(&v);
    return rc;
}

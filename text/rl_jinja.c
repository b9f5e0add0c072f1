// rl_jinja — the public face of the Jinja engine (see rl_jinja.h): compile = normalize newlines
// as jinja2 does, tokenize, parse; render = copy the caller's JSON variables into the render
// arena and run the statements. The work is in rl_jinja_{lex,parse,eval,builtin,value}.c.
#include "rl_jinja.h"

#include "rl_err.h"
#include "rl_jinja_int.h"

#include <stdlib.h>
#include <string.h>

// Compile memory: tokens and syntax tree grow with the source; this only stops runaway input.
#define S_COMPILE_MEMORY ((size_t)512 << 20)

static int s_fail_code(int code) {
    return code ? code : RL_EINVAL;
}

int rl_jinja_compile(const char *src, size_t len, const char *name, rl_jinja_t **out, char *err,
                     size_t err_len) {
    if (err && err_len) {
        err[0] = '\0';
    }
    if (!out || (!src && len)) {
        return rl_errf(err, err_len, RL_EINVAL, "rl_jinja_compile: NULL argument");
    }
    *out = NULL;
    rl_jinja_t *t = calloc(1, sizeof(*t));
    if (!t) {
        return rl_errf(err, err_len, RL_ENOMEM, "rl_jinja_compile: out of memory");
    }
    t->name = strdup(name ? name : "template");
    rl_jfail_t *f = calloc(1, sizeof(*f));
    if (!t->name || !f) {
        free(f);
        rl_jinja_free(&t);
        return rl_errf(err, err_len, RL_ENOMEM, "rl_jinja_compile: out of memory");
    }
    f->err = err;
    f->err_len = err_len;
    f->name = t->name;
    t->arena.limit = S_COMPILE_MEMORY;
    if (setjmp(f->jb)) {
        int code = s_fail_code(f->code);
        free(f);
        rl_jinja_free(&t);
        return code;
    }
    size_t bad;
    if (!rl_jutf8_valid(src ? src : "", len, &bad)) {
        int line = 1, col = 1;
        for (size_t i = 0; i < bad; i++) {
            if (src[i] == '\n') {
                line++, col = 1;
            } else if (((unsigned char)src[i] & 0xC0) != 0x80) {
                col++;
            }
        }
        rl_jfail(f, RL_EINVAL, line, col, "template is not valid UTF-8 (byte offset %zu)", bad);
    }
    // jinja2 reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline off)
    char *norm = rl_jalloc(&t->arena, f, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') {
                i++;
            }
        } else {
            norm[n++] = src[i];
        }
    }
    if (n > 0 && norm[n - 1] == '\n') {
        n--;
    }
    norm[n] = '\0';
    rl_jtok_t *toks;
    size_t ntok = rl_jlex(&t->arena, f, norm, n, &toks);
    t->body = rl_jparse(&t->arena, f, toks, ntok, &t->nbody);
    rl_jscope_analyze(&t->arena, f, t->body, t->nbody, &t->frame);
    free(f);
    *out = t;
    return 0;
}

int rl_jinja_render_opts(const rl_jinja_t *t, const json_t *ctx, const rl_jinja_opts_t *opts,
                         char **out, size_t *out_len, char *err, size_t err_len) {
    if (err && err_len) {
        err[0] = '\0';
    }
    if (!t || !out) {
        return rl_errf(err, err_len, RL_EINVAL, "rl_jinja_render: NULL argument");
    }
    *out = NULL;
    if (out_len) {
        *out_len = 0;
    }
    if (ctx && !json_is_object(ctx)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: the render context must be a JSON object",
                       t->name);
    }
    rl_jinja_opts_t o = {0};
    if (opts) {
        o = *opts;
    }
    rl_jx_t *x = calloc(1, sizeof(*x));
    if (!x) {
        return rl_errf(err, err_len, RL_ENOMEM, "rl_jinja_render: out of memory");
    }
    x->fail.err = err;
    x->fail.err_len = err_len;
    x->fail.name = t->name;
    x->t = t;
    x->arena.limit = o.max_memory ? o.max_memory : RL_JINJA_MAX_MEMORY;
    x->max_output = o.max_output ? o.max_output : RL_JINJA_MAX_OUTPUT;
    x->max_steps = o.max_steps ? o.max_steps : RL_JINJA_MAX_STEPS;
    x->max_depth = o.max_depth > 0 ? o.max_depth : RL_JINJA_MAX_DEPTH;
    x->fixed_now = o.fixed_now;
    x->now = o.now;
    if (setjmp(x->fail.jb)) {
        int code = s_fail_code(x->fail.code);
        rl_jarena_free(&x->arena);
        free(x);
        return code;
    }
    if (ctx) {
        x->ctx = rl_jv_from_json(x, ctx, 0).u.d;
    }
    x->root = rl_jscope_enter(x, NULL, t->frame);
    x->scope = x->root;
    x->top = rl_jx_alloc(x, sizeof(rl_jbuf_t));
    x->out = x->top;
    rl_jexec_body(x, t->body, t->nbody, x->root);
    char *res = malloc(x->top->n + 1);
    if (!res) {
        rl_jarena_free(&x->arena);
        free(x);
        return rl_errf(err, err_len, RL_ENOMEM, "rl_jinja_render: out of memory");
    }
    if (x->top->n) {
        memcpy(res, x->top->p, x->top->n);
    }
    res[x->top->n] = '\0';
    *out = res;
    if (out_len) {
        *out_len = x->top->n;
    }
    rl_jarena_free(&x->arena);
    free(x);
    return 0;
}

int rl_jinja_render(const rl_jinja_t *t, const json_t *ctx, char **out, size_t *out_len, char *err,
                    size_t err_len) {
    return rl_jinja_render_opts(t, ctx, NULL, out, out_len, err, err_len);
}

const char *rl_jinja_name(const rl_jinja_t *t) {
    return t ? t->name : NULL;
}

void rl_jinja_free(rl_jinja_t **t) {
    if (!t || !*t) {
        return;
    }
    rl_jarena_free(&(*t)->arena);
    free((*t)->name);
    free(*t);
    *t = NULL;
}

const char *rl_jinja_raised_message(const char *err) {
    static const char tag[] = ": raise_exception: ";
    const char *p = err ? strstr(err, tag) : NULL;
    return p ? p + sizeof(tag) - 1 : NULL;
}

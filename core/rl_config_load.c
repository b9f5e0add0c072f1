// rl_config_load — a recipe's text -> the typed rl_recipe_t: the YAML tree (rl_yaml), the
// overrides spliced in (rl_config_override.c), duplicate keys, the walk that converts every
// value into its field with the schema's type, range and choices, defaults (the table's, then
// each algorithm's, then the derived ones: run.name, run.dir, model.tokenizer, reward names),
// and the checks (rl_config_check.c). Every stage appends to one error list, sorted by
// position at the end, so a user sees all problems of a recipe in one run; each key keeps the
// position it was set at (rl_recipe_key_location, rl_recipe_errorf).
//
// Not here: the schema table (rl_config_schema.c), checks between keys and of files
// (rl_config_check.c), printing the recipe (rl_config_write.c).
#include "rl_config.h"
#include "rl_config_priv.h"
#include "rl_err.h"
#include "rl_yaml.h"

#include <errno.h>
#include <float.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MAX_SECTIONS 32 // room for the section names in "did you mean" (the table has 10)

// ---------------------------------------------------------------------------------------------
// source positions of every key that a recipe or an override set (struct rl_recipe_priv)

const rl_cfg_loc_t *rl_cfg_loc_find(const rl_recipe_priv_t *p, const char *key) {
    for (int i = 0; p && i < p->n; i++) {
        if (!strcmp(p->locs[i].key, key)) {
            return &p->locs[i];
        }
    }
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// load context and the error list

static int s_file_ord(const rl_cfg_ctx_t *c, const char *file) {
    if (!file) {
        return INT_MAX;
    }
    for (int i = 0; i < c->r->priv->nfiles; i++) {
        if (file == c->r->priv->files[i]) {
            return i;
        }
    }
    return INT_MAX - 1;
}

void rl_cfg_push(rl_cfg_ctx_t *c, const char *file, int line, int col, char *msg) {
    if (!msg) {
        c->oom = 1;
        return;
    }
    if (c->nerr >= RL_RECIPE_MAX_ERRORS) {
        c->dropped++;
        free(msg);
        return;
    }
    if (c->nerr == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        rl_cfg_err_t *e = realloc(c->errs, (size_t)cap * sizeof *e);
        if (!e) {
            c->oom = 1;
            free(msg);
            return;
        }
        c->errs = e;
        c->cap = cap;
    }
    c->errs[c->nerr] = (rl_cfg_err_t){s_file_ord(c, file), line, col, c->nerr, msg};
    c->nerr++;
}

static void s_verr(rl_cfg_ctx_t *c, const char *file, int line, int col, const char *path,
                   const char *fmt, va_list ap) {
    char body[1024], head[512];
    vsnprintf(body, sizeof body, fmt, ap);
    if (file && line > 0) {
        snprintf(head, sizeof head, "%s:%d:%d: ", file, line, col);
    } else if (file) {
        snprintf(head, sizeof head, "%s: ", file);
    } else {
        head[0] = '\0';
    }
    size_t need = strlen(head) + (path ? strlen(path) + 2 : 0) + strlen(body) + 1;
    char *msg = malloc(need);
    if (msg) {
        snprintf(msg, need, "%s%s%s%s", head, path ? path : "", path ? ": " : "", body);
    }
    rl_cfg_push(c, file, line, col, msg);
}

// error at an explicit position
void rl_cfg_err_at(rl_cfg_ctx_t *c, const char *file, int line, int col, const char *path,
                   const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s_verr(c, file, line, col, path, fmt, ap);
    va_end(ap);
}

// error at a node: "file:line:col: path: ..."
void rl_cfg_err(rl_cfg_ctx_t *c, const rl_yaml_node_t *at, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s_verr(c, at ? at->file : c->file, at ? at->line : 0, at ? at->col : 0, path, fmt, ap);
    va_end(ap);
}

// error at the recorded position of a key (or the recipe file when it was defaulted)
void rl_cfg_err_key(rl_cfg_ctx_t *c, const char *key, const char *fmt, ...) {
    const rl_cfg_loc_t *l = rl_cfg_loc_find(c->r->priv, key);
    va_list ap;
    va_start(ap, fmt);
    s_verr(c, l ? l->file : c->file, l ? l->line : 0, l ? l->col : 0, key, fmt, ap);
    va_end(ap);
}

static int s_err_cmp(const void *a, const void *b) {
    const rl_cfg_err_t *x = a, *y = b;
    if (x->ord != y->ord) {
        return x->ord < y->ord ? -1 : 1;
    }
    if (x->line != y->line) { // errors without a line (missing keys) go last
        unsigned lx = (unsigned)x->line - 1u, ly = (unsigned)y->line - 1u;
        return lx < ly ? -1 : 1;
    }
    if (x->col != y->col) {
        return x->col < y->col ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void s_loc_add(rl_cfg_ctx_t *c, const char *key, const rl_yaml_node_t *at) {
    rl_recipe_priv_t *p = c->r->priv;
    for (int i = 0; i < p->n; i++) {
        if (!strcmp(p->locs[i].key, key)) {
            p->locs[i].file = at->file;
            p->locs[i].line = at->line;
            p->locs[i].col = at->col;
            return;
        }
    }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        rl_cfg_loc_t *l = realloc(p->locs, (size_t)cap * sizeof *l);
        if (!l) {
            c->oom = 1;
            return;
        }
        p->locs = l;
        p->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        c->oom = 1;
        return;
    }
    p->locs[p->n++] = (rl_cfg_loc_t){k, at->file, at->line, at->col};
}

// ---------------------------------------------------------------------------------------------
// did you mean: Levenshtein distance, small strings only

static int s_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) {
        return 99;
    }
    int prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) {
        prev[j] = (int)j;
    }
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

// the closest of `cands` to `word`, or NULL when nothing is close enough to be a typo
static const char *s_closest(const char *word, const char *const *cands, int n) {
    const char *best = NULL;
    int bestd = 99;
    int len = (int)strlen(word);
    int limit = len <= 3 ? 1 : (len <= 8 ? 2 : 3);
    for (int i = 0; i < n; i++) {
        int d = s_edit_distance(word, cands[i]);
        size_t lc = strlen(cands[i]);
        if (lc >= 3 && d > limit && !strncmp(word, cands[i], lc)) {
            d = limit; // "optimizer" for "optim": a longer spelling of a known name
        }
        if (d < bestd) {
            bestd = d;
            best = cands[i];
        }
    }
    return bestd <= limit ? best : NULL;
}

// ---------------------------------------------------------------------------------------------
// describing values in messages

void rl_cfg_quote_short(const char *s, char *out, size_t n) {
    size_t o = 0, i = 0;
    for (; s[i] && o + 8 < n && i < 48; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    if (s[i] && o + 4 < n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static void s_found(const rl_yaml_node_t *v, char *out, size_t n) {
    char q[256];
    if (v->kind == RL_YAML_SEQ) {
        snprintf(out, n, "a list");
        return;
    }
    if (v->kind == RL_YAML_MAP) {
        snprintf(out, n, "a map");
        return;
    }
    rl_cfg_quote_short(v->str, q, sizeof q);
    switch (rl_yaml_scalar_type(v)) {
    case RL_YAML_T_NULL: snprintf(out, n, "null"); break;
    case RL_YAML_T_BOOL: snprintf(out, n, "boolean %s", q); break;
    case RL_YAML_T_INT:
    case RL_YAML_T_FLOAT: snprintf(out, n, "number %s", q); break;
    default: snprintf(out, n, "string '%s'", q); break;
    }
}

static void s_join(const char *const *items, char *out, size_t n) {
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; items[i] && o < n; i++) {
        o += (size_t)snprintf(out + o, n - o, "%s%s", i ? ", " : "", items[i]);
    }
}

static void s_fmt_num(double v, char *out, size_t n) {
    snprintf(out, n, "%.10g", v);
}

// "(0, 1]", ">= 1", "an integer in [1, 64]"
static void s_range(const rl_recipe_key_t *k, char *out, size_t n) {
    char lo[32], hi[32];
    s_fmt_num(k->min, lo, sizeof lo);
    s_fmt_num(k->max, hi, sizeof hi);
    int gt = (k->flags & RL_RECIPE_K_MIN_EXCL) != 0, lt = (k->flags & RL_RECIPE_K_MAX_EXCL) != 0;
    const char *what = k->type == RL_RECIPE_T_INT ? "an integer" : "a number";
    int no_max = k->max >= RL_CFG_BIG || (k->type == RL_RECIPE_T_INT && k->max >= RL_CFG_IMAX);
    int no_min = k->min <= -RL_CFG_BIG;
    if (no_max && no_min) {
        snprintf(out, n, "%s", what);
    } else if (no_max) {
        snprintf(out, n, "%s %s %s", what, gt ? ">" : ">=", lo);
    } else {
        snprintf(out, n, "%s in %s%s, %s%s", what, gt ? "(" : "[", lo, hi, lt ? ")" : "]");
    }
}

// ---------------------------------------------------------------------------------------------
// paths: inputs are made absolute against the recipe's directory, lexically (no symlink
// resolution), so the printed recipe works from any directory and is stable across runs.

static char *s_path_join_norm(const char *base, const char *p) {
    size_t lb = base ? strlen(base) : 0, lp = strlen(p);
    char *joined = malloc(lb + lp + 2);
    if (!joined) {
        return NULL;
    }
    if (p[0] == '/' || !base) {
        memcpy(joined, p, lp + 1);
    } else {
        memcpy(joined, base, lb);
        joined[lb] = '/';
        memcpy(joined + lb + 1, p, lp + 1);
    }
    // normalise in place: drop "", "." components, pop on ".."
    char *out = malloc(strlen(joined) + 2);
    if (!out) {
        free(joined);
        return NULL;
    }
    size_t o = 0;
    char *save = NULL;
    for (char *tok = strtok_r(joined, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (!strcmp(tok, ".")) {
            continue;
        }
        if (!strcmp(tok, "..")) {
            while (o > 0 && out[o - 1] != '/') {
                o--;
            }
            if (o > 0) {
                o--;
            }
            continue;
        }
        out[o++] = '/';
        size_t lt = strlen(tok);
        memcpy(out + o, tok, lt);
        o += lt;
    }
    if (o == 0) {
        out[o++] = '/';
    }
    out[o] = '\0';
    free(joined);
    return out;
}

// ---------------------------------------------------------------------------------------------
// converting one value into its field

void rl_cfg_strlist_free(rl_recipe_strlist_t *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->items[i]);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void rl_cfg_endpoints_free(rl_recipe_endpoints_t *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->items[i].endpoint);
        free(l->items[i].server_key);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static void s_field_free(const rl_recipe_key_t *k, const rl_cfg_dst_t *d) {
    switch (k->type) {
    case RL_RECIPE_T_STRING:
    case RL_RECIPE_T_PATH_FILE:
    case RL_RECIPE_T_PATH_DIR:
    case RL_RECIPE_T_MAP: {
        char **s = RL_CFG_FIELD(d, k, char *);
        free(*s);
        *s = NULL;
        break;
    }
    case RL_RECIPE_T_STRING_LIST:
    case RL_RECIPE_T_PATH_LIST: rl_cfg_strlist_free(RL_CFG_FIELD(d, k, rl_recipe_strlist_t)); break;
    case RL_RECIPE_T_ENDPOINTS:
        rl_cfg_endpoints_free(RL_CFG_FIELD(d, k, rl_recipe_endpoints_t));
        break;
    case RL_RECIPE_T_HTTP: {
        rl_recipe_http_t *h = RL_CFG_FIELD(d, k, rl_recipe_http_t);
        free(h->url);
        h->url = NULL;
        break;
    }
    default: break;
    }
}

static int s_scalar_string(rl_cfg_ctx_t *c, const rl_yaml_node_t *v, const rl_yaml_node_t *at,
                           const char *path, const char *what) {
    char f[300];
    if (v->kind != RL_YAML_SCALAR || rl_yaml_scalar_type(v) == RL_YAML_T_NULL) {
        s_found(v, f, sizeof f);
        rl_cfg_err(c, at, path, "expected %s, found %s", what, f);
        return -1;
    }
    if (strlen(v->str) != v->len) {
        rl_cfg_err(c, at, path, "the value contains a NUL character");
        return -1;
    }
    return 0;
}

static int s_number(rl_cfg_ctx_t *c, const rl_recipe_key_t *k, const rl_yaml_node_t *v,
                    const rl_yaml_node_t *at, const char *path, double *out) {
    char f[300], rg[128];
    rl_yaml_type_t t = v->kind == RL_YAML_SCALAR ? rl_yaml_scalar_type(v) : RL_YAML_T_STRING;
    int want_int = k->type == RL_RECIPE_T_INT;
    if (v->kind != RL_YAML_SCALAR || (t != RL_YAML_T_INT && (want_int || t != RL_YAML_T_FLOAT))) {
        s_found(v, f, sizeof f);
        rl_cfg_err(c, at, path, "expected %s, found %s", want_int ? "an integer" : "a number", f);
        return -1;
    }
    double x = strtod(v->str, NULL);
    s_range(k, rg, sizeof rg);
    if (!isfinite(x)) {
        rl_cfg_err(c, at, path, "%s is out of range; allowed: %s", v->str, rg);
        return -1;
    }
    int gt = (k->flags & RL_RECIPE_K_MIN_EXCL) != 0, lt = (k->flags & RL_RECIPE_K_MAX_EXCL) != 0;
    int lo_bad = gt ? !(x > k->min) : !(x >= k->min), hi_bad = lt ? !(x < k->max) : !(x <= k->max);
    // float keys are kept as doubles here but reach float code (lora.alpha becomes the float
    // LoRA scale, optim.eps the float AdamW epsilon, rewards meet float losses): a value a
    // float cannot hold would silently become infinity or 0 there. A bound of +-RL_CFG_BIG means
    // "none", so past it the float limit is the one to report.
    double a = fabs(x);
    int f32 = k->type == RL_RECIPE_T_FLOAT;
    int over = f32 && a > FLT_MAX, under = f32 && a > 0 && a < FLT_TRUE_MIN;
    char q[64];
    rl_cfg_quote_short(v->str, q, sizeof q);
    if ((lo_bad && !(over && k->min <= -RL_CFG_BIG)) ||
        (hi_bad && !(over && k->max >= RL_CFG_BIG))) {
        rl_cfg_err(c, at, path, "%s is out of range; allowed: %s", q, rg);
        return -1;
    }
    if (over) {
        rl_cfg_err(c, at, path,
                   "%s is out of range (a 32-bit float overflows to infinity); allowed: "
                   "%s, at most %.10g in magnitude",
                   q, rg, (double)FLT_MAX);
        return -1;
    }
    if (under) {
        rl_cfg_err(c, at, path,
                   "%s is out of range (a 32-bit float rounds it to 0); allowed: %s, "
                   "nonzero values at least %.10g in magnitude",
                   q, rg, (double)FLT_TRUE_MIN);
        return -1;
    }
    *out = x;
    return 0;
}

// key: the schema key (for a value TRL or verl users write there: rl_cfg_foreign_value), or NULL
static int s_choice(rl_cfg_ctx_t *c, const char *key, const char *const *choices,
                    const rl_yaml_node_t *v, const rl_yaml_node_t *at, const char *path) {
    char all[512], f[300];
    s_join(choices, all, sizeof all);
    if (v->kind != RL_YAML_SCALAR || rl_yaml_scalar_type(v) == RL_YAML_T_NULL) {
        s_found(v, f, sizeof f);
        rl_cfg_err(c, at, path, "expected one of %s, found %s", all, f);
        return -1;
    }
    int n = 0;
    for (; choices[n]; n++) {
        if (!strcmp(choices[n], v->str)) {
            return n;
        }
    }
    const char *near = s_closest(v->str, choices, n);
    rl_cfg_quote_short(v->str, f, sizeof f);
    char theirs[512];
    if (key &&
        rl_cfg_foreign_value(c->algos, c->r->algorithm.def, key, v->str, theirs, sizeof theirs)) {
        rl_cfg_err(c, at, path, "'%s' is not one of %s; %s", f, all, theirs);
    } else if (near) {
        rl_cfg_err(c, at, path, "'%s' is not one of %s; did you mean '%s'?", f, all, near);
    } else {
        rl_cfg_err(c, at, path, "'%s' is not one of %s", f, all);
    }
    return -1;
}

// 1 when s is "tcp://HOST:PORT" with a non-empty host and a port of digits.
static int s_tcp_endpoint(const char *s) {
    if (strncmp(s, "tcp://", 6) != 0) {
        return 0;
    }
    const char *colon = strrchr(s + 6, ':');
    if (!colon || colon == s + 6 || !colon[1] || strlen(colon + 1) > 5) {
        return 0;
    }
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
    }
    return 1;
}

// roles.remote_samplers: a list of {endpoint, server_key} maps. Returns 0 or -1 after errors.
static int s_convert_endpoints(rl_cfg_ctx_t *c, const rl_recipe_key_t *k, const rl_cfg_dst_t *d,
                               const rl_yaml_node_t *v, const rl_yaml_node_t *at,
                               const char *path) {
    char f[300], ip[340];
    if (v->kind != RL_YAML_SEQ) {
        s_found(v, f, sizeof f);
        rl_cfg_err(c, at, path,
                   "expected a list of {endpoint: tcp://HOST:PORT, server_key: "
                   "FILE}, found %s",
                   f);
        return -1;
    }
    if (v->n > 256) {
        rl_cfg_err(c, at, path, "too many items (%d; limit 256)", v->n);
        return -1;
    }
    rl_recipe_endpoints_t l = {calloc((size_t)v->n + 1, sizeof *l.items), 0};
    if (!l.items) {
        c->oom = 1;
        return -1;
    }
    int bad = 0;
    for (int i = 0; i < v->n; i++) {
        const rl_yaml_node_t *it = v->kids[i];
        snprintf(ip, sizeof ip, "%s[%d]", path, i);
        if (it->kind != RL_YAML_MAP) {
            s_found(it, f, sizeof f);
            rl_cfg_err(c, it, ip,
                       "expected a map {endpoint: tcp://HOST:PORT, server_key: FILE}, "
                       "found %s",
                       f);
            bad = 1;
            continue;
        }
        rl_recipe_endpoint_t e = {NULL, NULL};
        for (int j = 0; j < it->n; j++) {
            const rl_yaml_node_t *kn = it->kids[2 * j], *vn = it->kids[2 * j + 1];
            char kp[400];
            snprintf(kp, sizeof kp, "%s.%s", ip, kn->str ? kn->str : "?");
            int is_ep = kn->str && !strcmp(kn->str, "endpoint");
            int is_key = kn->str && !strcmp(kn->str, "server_key");
            if (!is_ep && !is_key) {
                rl_cfg_err(c, kn, kp, "unknown key; an entry has endpoint and server_key");
                bad = 1;
                continue;
            }
            if (s_scalar_string(c, vn, vn, kp, is_ep ? "an endpoint" : "a path")) {
                bad = 1;
                continue;
            }
            if (is_ep && !s_tcp_endpoint(vn->str)) {
                rl_cfg_quote_short(vn->str, f, sizeof f);
                rl_cfg_err(c, vn, kp, "'%s' is not tcp://HOST:PORT", f);
                bad = 1;
                continue;
            }
            char **dst = is_ep ? &e.endpoint : &e.server_key;
            free(*dst);
            *dst = is_ep ? strdup(vn->str)
                         : s_path_join_norm(vn->file == c->file ? c->base : c->cwd, vn->str);
            if (!*dst) {
                c->oom = 1;
                bad = 1;
            }
        }
        if (!bad && (!e.endpoint || !e.server_key)) {
            rl_cfg_err(c, it, ip, "needs both endpoint and server_key (missing %s)",
                       e.endpoint ? "server_key" : "endpoint");
            bad = 1;
        }
        l.items[l.n++] = e;
    }
    if (bad) {
        rl_cfg_endpoints_free(&l);
        return -1;
    }
    s_field_free(k, d);
    *RL_CFG_FIELD(d, k, rl_recipe_endpoints_t) = l;
    return 0;
}

// NULL when s is a URL a server can have (http://HOST[:PORT][/PATH], HOST a name, an IPv4
// address or [an IPv6 one], PORT 1..65535), else what is wrong with it (in buf when it names
// `who`, the reward or the environment). core/rl_httpc parses the same form when it connects.
static const char *s_http_url_problem(const char *s, const char *who, char *buf, size_t cap) {
    if (!strncmp(s, "https://", 8)) {
        snprintf(buf, cap,
                 "https is not supported: rlctl's %s client speaks plain http (serve the %s on "
                 "loopback or a private network, or put a TLS proxy in front of it on this host)",
                 who, who);
        return buf;
    }
    if (strncmp(s, "http://", 7) != 0) {
        return "not an http:// URL (http://HOST:PORT/PATH)";
    }
    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            return "a space or a control character in the URL";
        }
    }
    if (strchr(s, '#')) {
        return "a #fragment, which a request cannot carry";
    }
    const char *h = s + 7, *end = h + strcspn(h, "/?");
    if (memchr(h, '@', (size_t)(end - h))) {
        return "user@ credentials in the URL are not supported";
    }
    const char *port = NULL;
    if (*h == '[') {
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb || rb == h + 1) {
            return "a bad [IPv6] host";
        }
        port = rb + 1 < end ? rb + 1 : NULL;
        if (port && *port != ':') {
            return "text after the [IPv6] host";
        }
    } else {
        port = memchr(h, ':', (size_t)(end - h));
        if ((port ? port : end) == h) {
            return "no host";
        }
    }
    if (port) {
        long v = 0;
        const char *p = port + 1;
        for (; p < end && *p >= '0' && *p <= '9' && v <= 65535; p++) {
            v = v * 10 + (*p - '0');
        }
        if (p == port + 1 || p != end || v < 1 || v > 65535) {
            return "the port is not a number in 1..65535";
        }
    }
    return NULL;
}

static int s_dup_of(const rl_yaml_node_t *map, int i);

// rewards[].http: a map {url, timeout, format, retries}; env.http the same without format (an
// environment's bodies are the protocol's). Every inner key keeps its position. Returns 0, or -1
// after errors (the field keeps its previous value).
static int s_convert_http(rl_cfg_ctx_t *c, const rl_recipe_key_t *k, const rl_cfg_dst_t *d,
                          const rl_yaml_node_t *v, const rl_yaml_node_t *at, const char *path) {
    static const char *const keys[] = {"url", "timeout", "format", "retries", NULL};
    int env = !strcmp(k->section, "env"); // no format
    const rl_recipe_key_t timeout_k = {
        .type = RL_RECIPE_T_FLOAT, .min = 0, .max = 86400, .flags = RL_RECIPE_K_MIN_EXCL};
    const rl_recipe_key_t retries_k = {.type = RL_RECIPE_T_INT, .min = 0, .max = 10};
    char f[300], kp[400];
    if (v->kind != RL_YAML_MAP) {
        s_found(v, f, sizeof f);
        rl_cfg_err(
            c, at, path,
            "expected a map {url: http://HOST:PORT/PATH, timeout: 30, %sretries: 3}, found %s",
            env ? "" : "format: rlctl, ", f);
        return -1;
    }
    rl_recipe_http_t h = {NULL, 30.0, RL_RECIPE_HTTP_RLCTL, 3};
    int bad = 0;
    for (int j = 0; j < v->n; j++) {
        const rl_yaml_node_t *kn = v->kids[2 * j], *vn = v->kids[2 * j + 1];
        if (s_dup_of(v, j) >= 0) {
            continue; // reported by s_check_dups
        }
        rl_cfg_quote_short(kn->str, f, sizeof f);
        snprintf(kp, sizeof kp, "%s.%s", path, f);
        int which = -1;
        for (int i = 0; keys[i]; i++) {
            which = which < 0 && !strcmp(kn->str, keys[i]) ? i : which;
        }
        if (which < 0) {
            static const char *const env_keys[] = {"url", "timeout", "retries", NULL};
            const char *near = s_closest(kn->str, env ? env_keys : keys, env ? 3 : 4);
            if (near) {
                rl_cfg_err(c, kn, kp, "unknown key; did you mean '%s'?", near);
            } else {
                rl_cfg_err(c, kn, kp, "unknown key; http takes url, timeout, %sretries",
                           env ? "" : "format, ");
            }
            bad = 1;
            continue;
        }
        s_loc_add(c, kp, kn);
        if (rl_cfg_is_null(vn)) {
            continue; // null = the default
        }
        double x;
        char wb[300];
        if (which == 0) {
            const char *why;
            if (s_scalar_string(c, vn, kn, kp, "a URL")) {
                bad = 1;
            } else if ((why = s_http_url_problem(vn->str, env ? "environment" : "reward", wb,
                                                 sizeof wb)) != NULL) {
                rl_cfg_quote_short(vn->str, f, sizeof f);
                rl_cfg_err(c, kn, kp, "'%s': %s", f, why);
                bad = 1;
            } else {
                free(h.url);
                if (!(h.url = strdup(vn->str))) {
                    c->oom = 1;
                    bad = 1;
                }
            }
        } else if (which == 1) {
            bad |= s_number(c, &timeout_k, vn, kn, kp, &h.timeout) != 0;
        } else if (which == 2 && env) {
            rl_cfg_err(c, kn, kp,
                       "an environment takes no format: its requests and replies are the "
                       "protocol's JSON (docs/envs.md)");
            bad = 1;
        } else if (which == 2) {
            int i = s_choice(c, k->key, rl_recipe_key_choices(c->algos, k), vn, kn, kp);
            bad |= i < 0;
            h.format = i < 0 ? h.format : i;
        } else if (s_number(c, &retries_k, vn, kn, kp, &x) == 0) {
            h.retries = (int)x; // exact: an integer in [0, 10]
        } else {
            bad = 1;
        }
    }
    if (!bad && !h.url) {
        rl_cfg_err(c, at, path, "needs url: http://HOST:PORT/PATH");
        bad = 1;
    }
    if (bad) {
        free(h.url);
        return -1;
    }
    s_field_free(k, d);
    *RL_CFG_FIELD(d, k, rl_recipe_http_t) = h;
    return 0;
}

// Converts v into the field of k at d. `at` locates errors (the key, or a list item).
static int s_str_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Appends s (taken) to l; 0, or -1 out of memory (s freed).
static int s_strlist_add(rl_cfg_ctx_t *c, rl_recipe_strlist_t *l, char *s) {
    char **g = s ? realloc(l->items, ((size_t)l->n + 2) * sizeof *g) : NULL;
    if (!g) {
        free(s);
        c->oom = 1;
        return -1;
    }
    l->items = g;
    l->items[l->n++] = s;
    l->items[l->n] = NULL;
    return 0;
}

// One item of a paths key, made absolute (against the recipe, or the working directory for an
// override) and, when it is a glob that names no existing path, expanded into the paths it
// matches in byte order of their names (glob's own order follows the locale). A glob that
// matches nothing is an error at the item, unless file checks are off (then it stays as
// written). Returns 0, or -1 after recording an error.
static int s_path_item(rl_cfg_ctx_t *c, const rl_yaml_node_t *it, const rl_yaml_node_t *at,
                       const char *path, rl_recipe_strlist_t *l) {
    if (s_scalar_string(c, it, at, path, "a path")) {
        return -1;
    }
    if (!it->str[0]) {
        rl_cfg_err(c, at, path, "expected a non-empty path");
        return -1;
    }
    char *p = s_path_join_norm(it->file == c->file ? c->base : c->cwd, it->str);
    if (!p) {
        c->oom = 1;
        return -1;
    }
    struct stat st;
    if (!strpbrk(it->str, "*?[") || stat(p, &st) == 0 || (c->flags & RL_RECIPE_NO_FILE_CHECKS)) {
        return s_strlist_add(c, l, p);
    }
    glob_t g;
    int rc = glob(p, GLOB_NOSORT, NULL, &g);
    if (rc == GLOB_NOSPACE) {
        free(p);
        c->oom = 1;
        return -1;
    }
    if (rc != 0 || g.gl_pathc == 0) {
        char q[300];
        rl_cfg_quote_short(it->str, q, sizeof q); // as written: the position says where
        rl_cfg_err(c, at, path, "no file matches '%s'", q);
        free(p);
        if (rc == 0) {
            globfree(&g);
        }
        return -1;
    }
    free(p);
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, s_str_cmp);
    int bad = 0;
    for (size_t i = 0; i < g.gl_pathc && !bad; i++) {
        bad = s_strlist_add(c, l, strdup(g.gl_pathv[i]));
    }
    globfree(&g);
    return bad ? -1 : 0;
}

// A paths key (data.train): one path, a glob or a list of them. Returns 0, or -1 after errors.
static int s_convert_paths(rl_cfg_ctx_t *c, const rl_recipe_key_t *k, const rl_cfg_dst_t *d,
                           const rl_yaml_node_t *v, const rl_yaml_node_t *at, const char *path) {
    char item_path[320];
    if (v->kind == RL_YAML_MAP) {
        rl_cfg_err(c, at, path, "expected a path or a list of paths, found a map");
        return -1;
    }
    int n = v->kind == RL_YAML_SEQ ? v->n : 1;
    if (n == 0) {
        rl_cfg_err(c, at, path, "expected a path or a list of paths, found an empty list");
        return -1;
    }
    if (n > 4096) {
        rl_cfg_err(c, at, path, "too many items (%d; limit 4096)", n);
        return -1;
    }
    rl_recipe_strlist_t l = {0};
    int bad = 0;
    for (int i = 0; i < n && !c->oom; i++) {
        const rl_yaml_node_t *it = v->kind == RL_YAML_SEQ ? v->kids[i] : v;
        snprintf(item_path, sizeof item_path, v->kind == RL_YAML_SEQ ? "%s[%d]" : "%s", path, i);
        bad |= s_path_item(c, it, it, item_path, &l) != 0; // errors at the path itself
    }
    if (bad) {
        rl_cfg_strlist_free(&l);
        return -1;
    }
    s_field_free(k, d);
    *RL_CFG_FIELD(d, k, rl_recipe_strlist_t) = l;
    return 0;
}

// Returns 0, or -1 after recording an error (the field keeps its previous value).
static int s_convert(rl_cfg_ctx_t *c, const rl_recipe_key_t *k, const rl_cfg_dst_t *d,
                     const rl_yaml_node_t *v, const rl_yaml_node_t *at, const char *path) {
    char f[300], item_path[320];
    switch (k->type) {
    case RL_RECIPE_T_BOOL: {
        if (v->kind != RL_YAML_SCALAR || rl_yaml_scalar_type(v) != RL_YAML_T_BOOL) {
            static const char *const yaml11[] = {"yes", "no", "on", "off", "y", "n", "Yes",
                                                 "No", "On", "Off", "YES", "NO", "ON", "OFF"};
            int old_bool = 0;
            for (size_t i = 0; v->kind == RL_YAML_SCALAR && i < 14; i++) {
                old_bool |= v->plain && !strcmp(v->str, yaml11[i]);
            }
            s_found(v, f, sizeof f);
            rl_cfg_err(c, at, path, "expected true or false, found %s%s", f,
                       old_bool ? " (YAML 1.1's yes/no/on/off are not booleans here)" : "");
            return -1;
        }
        *RL_CFG_FIELD(d, k, bool) = v->str[0] == 't' || v->str[0] == 'T';
        return 0;
    }
    case RL_RECIPE_T_INT:
    case RL_RECIPE_T_FLOAT: {
        double x;
        if (s_number(c, k, v, at, path, &x)) {
            return -1;
        }
        if (k->type == RL_RECIPE_T_INT) {
            *RL_CFG_FIELD(d, k, int) = (int)x; // exact: |x| <= IMAX and integral
        } else {
            *RL_CFG_FIELD(d, k, double) = x;
        }
        return 0;
    }
    case RL_RECIPE_T_ENUM: {
        int i = s_choice(c, k->key, rl_recipe_key_choices(c->algos, k), v, at, path);
        if (i < 0) {
            return -1;
        }
        *RL_CFG_FIELD(d, k, int) = i;
        return 0;
    }
    case RL_RECIPE_T_STRING:
    case RL_RECIPE_T_PATH_FILE:
    case RL_RECIPE_T_PATH_DIR: {
        int is_path = k->type != RL_RECIPE_T_STRING;
        if (s_scalar_string(c, v, at, path, is_path ? "a path" : "a string")) {
            return -1;
        }
        if (!v->str[0]) {
            rl_cfg_err(c, at, path, "expected a non-empty %s", is_path ? "path" : "string");
            return -1;
        }
        char *s;
        if (is_path) {
            // recipe paths resolve against the recipe; overrides and run.dir against the cwd
            int run_dir = !strcmp(k->section, "run") && !strcmp(k->key, "dir");
            int from_recipe = v->file == c->file && !run_dir;
            const char *base = from_recipe ? c->base : c->cwd;
            s = s_path_join_norm(base, v->str);
        } else {
            s = strdup(v->str);
        }
        if (!s) {
            c->oom = 1;
            return -1;
        }
        s_field_free(k, d);
        *RL_CFG_FIELD(d, k, char *) = s;
        return 0;
    }
    case RL_RECIPE_T_STRING_LIST: {
        rl_recipe_strlist_t l = {0};
        int n = v->kind == RL_YAML_SEQ ? v->n : 1;
        if (v->kind == RL_YAML_MAP) {
            rl_cfg_err(c, at, path, "expected a list of strings, found a map");
            return -1;
        }
        if (n > 4096) {
            rl_cfg_err(c, at, path, "too many items (%d; limit 4096)", n);
            return -1;
        }
        l.items = calloc((size_t)n + 1, sizeof *l.items);
        if (!l.items) {
            c->oom = 1;
            return -1;
        }
        int bad = 0;
        for (int i = 0; i < n; i++) {
            const rl_yaml_node_t *it = v->kind == RL_YAML_SEQ ? v->kids[i] : v;
            const rl_yaml_node_t *it_at = v->kind == RL_YAML_SEQ ? it : at;
            if (v->kind == RL_YAML_SEQ) {
                snprintf(item_path, sizeof item_path, "%s[%d]", path, i);
            } else {
                snprintf(item_path, sizeof item_path, "%s", path);
            }
            if (s_scalar_string(c, it, it_at, item_path, "a string")) {
                bad = 1;
                continue;
            }
            if (k->choices && s_choice(c, k->key, k->choices, it, it_at, item_path) < 0) {
                bad = 1;
                continue;
            }
            l.items[l.n] = strdup(it->str);
            if (!l.items[l.n]) {
                c->oom = 1;
                bad = 1;
                break;
            }
            l.n++;
        }
        if (bad) {
            rl_cfg_strlist_free(&l);
            return -1;
        }
        s_field_free(k, d);
        *RL_CFG_FIELD(d, k, rl_recipe_strlist_t) = l;
        return 0;
    }
    case RL_RECIPE_T_PATH_LIST: return s_convert_paths(c, k, d, v, at, path);
    case RL_RECIPE_T_FLOAT_LIST: {
        if (v->kind != RL_YAML_SEQ || v->n != k->count) {
            s_found(v, f, sizeof f);
            if (v->kind == RL_YAML_SEQ) {
                snprintf(f, sizeof f, "a list of %d", v->n);
            }
            rl_cfg_err(c, at, path, "expected a list of %d numbers, found %s", k->count, f);
            return -1;
        }
        double tmp[16];
        int bad = 0;
        // items share the key's range; a FLOAT row with the same bounds checks each one
        rl_recipe_key_t item = *k;
        item.type = RL_RECIPE_T_FLOAT;
        for (int i = 0; i < v->n && i < 16; i++) {
            snprintf(item_path, sizeof item_path, "%s[%d]", path, i);
            if (s_number(c, &item, v->kids[i], v->kids[i], item_path, &tmp[i])) {
                bad = 1;
            }
        }
        if (bad) {
            return -1;
        }
        memcpy(RL_CFG_FIELD(d, k, double), tmp, (size_t)k->count * sizeof(double));
        return 0;
    }
    case RL_RECIPE_T_ENDPOINTS: return s_convert_endpoints(c, k, d, v, at, path);
    case RL_RECIPE_T_HTTP: return s_convert_http(c, k, d, v, at, path);
    case RL_RECIPE_T_MAP: {
        if (v->kind != RL_YAML_MAP) {
            s_found(v, f, sizeof f);
            rl_cfg_err(c, at, path, "expected a map, found %s", f);
            return -1;
        }
        json_t *j = rl_yaml_to_json(v);
        char *s = j ? json_dumps(j, 0) : NULL;
        json_decref(j);
        if (!s) {
            c->oom = 1;
            return -1;
        }
        s_field_free(k, d);
        *RL_CFG_FIELD(d, k, char *) = s;
        return 0;
    }
    }
    return -1;
}

// Sets the field of k at d to the default `yaml` (a schema row's text: it must convert).
static void s_default_set(rl_cfg_ctx_t *c, const rl_recipe_key_t *k, const rl_cfg_dst_t *d,
                          const char *yaml) {
    rl_yaml_node_t *v = NULL;
    char e[256];
    int rc = rl_yaml_parse(yaml, strlen(yaml), "<default>", 0, &v, e, sizeof e);
    if (rc == RL_ENOMEM) {
        c->oom = 1;
        return;
    }
    RL_ASSERT(rc == 0 && v); // a schema row with a default the parser rejects
    int nerr = c->nerr;
    rc = s_convert(c, k, d, v, v, k->key);
    RL_ASSERT(rc == 0 || c->oom);
    RL_ASSERT(c->nerr == nerr);
    rl_yaml_destroy(&v);
}

// Sets every key of `section` to its table default `def` (zero/NULL/-1 when it has none). The
// algorithm is not known yet: rl_cfg_algo_defaults applies the per-algorithm ones after the walk.
static void s_defaults(rl_cfg_ctx_t *c, const char *section, const rl_cfg_dst_t *d) {
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, c->algos, NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        if (strcmp(k->section, section) != 0 || (k->flags & RL_RECIPE_K_SETTINGS)) {
            continue; // an algorithm's settings: s_algo_settings, once it is known
        }
        if (k->type == RL_RECIPE_T_ENUM) {
            *RL_CFG_FIELD(d, k, int) = -1;
        }
        if (k->def) {
            s_default_set(c, k, d, k->def);
        }
    }
}

void rl_cfg_algo_defaults(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    const rl_recipe_algo_def_t *a = r->algorithm.def;
    char key[128];
    for (int i = 0; a && a->defaults && a->defaults[i].key; i++) { // unknown: every key keeps def
        const rl_recipe_key_t *k = rl_recipe_key_find(c->algos, a->defaults[i].key);
        RL_ASSERT(k); // an algorithm's default of a key the schema lacks
        int list = rl_cfg_section(k->section)->is_list;
        for (int e = 0; e < (list ? r->n_rewards : 1); e++) {
            if (list) {
                snprintf(key, sizeof key, "%s[%d].%s", k->section, e, k->key);
            } else {
                snprintf(key, sizeof key, "%s.%s", k->section, k->key);
            }
            if (rl_cfg_is_set(r, key)) {
                continue; // written in the recipe or an override (null is not: null = default)
            }
            rl_cfg_dst_t d = list ? (rl_cfg_dst_t){&r->rewards[e], e} : rl_cfg_dst(r, k);
            if (d.base) {
                s_default_set(c, k, &d, a->defaults[i].value);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the tree walk

int rl_cfg_is_null(const rl_yaml_node_t *v) {
    return v->kind == RL_YAML_SCALAR && rl_yaml_scalar_type(v) == RL_YAML_T_NULL;
}

// index of an earlier pair of `map` with the same key as pair i, or -1
static int s_dup_of(const rl_yaml_node_t *map, int i) {
    const rl_yaml_node_t *k = map->kids[2 * i];
    for (int j = 0; j < i; j++) {
        const rl_yaml_node_t *o = map->kids[2 * j];
        if (o->len == k->len && !memcmp(o->str, k->str, k->len)) {
            return j;
        }
    }
    return -1;
}

// YAML forbids duplicate keys and libyaml does not check; report every one, anywhere.
static void s_check_dups(rl_cfg_ctx_t *c, const rl_yaml_node_t *n, const char *path) {
    char sub[512];
    if (n->kind == RL_YAML_SEQ) {
        for (int i = 0; i < n->n; i++) {
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            s_check_dups(c, n->kids[i], sub);
        }
    } else if (n->kind == RL_YAML_MAP) {
        for (int i = 0; i < n->n; i++) {
            const rl_yaml_node_t *k = n->kids[2 * i];
            char q[128];
            rl_cfg_quote_short(k->str, q, sizeof q);
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", q);
            int j = s_dup_of(n, i);
            if (j >= 0) {
                const rl_yaml_node_t *first = n->kids[2 * j];
                rl_cfg_err(c, k, sub, "duplicate key (first at %s:%d:%d); YAML allows a key once",
                           first->file, first->line, first->col);
                continue;
            }
            s_check_dups(c, n->kids[2 * i + 1], sub);
        }
    }
}

// 1 when the recipe's algorithm (any, while it is not known) has key x.
static int s_mine(const rl_cfg_ctx_t *c, const rl_recipe_key_t *x) {
    return !c->r->algorithm.def || rl_recipe_key_for(x, c->r->algorithm.def);
}

// A hint for `name`, a name TRL, verl ... users write, with its value v (or NULL): the value's
// (loss_type: dr_grpo) before the name's, naming only keys the recipe's algorithm has. 1 when
// there is one, in out.
static int s_theirs(const rl_cfg_ctx_t *c, const char *name, const rl_yaml_node_t *v, char *out,
                    size_t cap) {
    const rl_recipe_algo_def_t *a = c->r->algorithm.def;
    if (v && v->kind == RL_YAML_SCALAR &&
        rl_cfg_foreign_value(c->algos, a, name, v->str, out, cap)) {
        return 1;
    }
    return rl_recipe_foreign(c->algos, a, name, out, cap, NULL);
}

static void s_unknown_key(rl_cfg_ctx_t *c, const char *section, const rl_yaml_node_t *k,
                          const rl_yaml_node_t *v, const char *path) {
    const char *cands[128];
    int n = 0;
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, c->algos, NULL);
    for (const rl_recipe_key_t *x; (x = rl_recipe_keys_next(&it)) != NULL && n < 127;) {
        if (!strcmp(x->section, section)) {
            cands[n++] = x->key;
        }
    }
    cands[n] = NULL;
    char theirs[512];
    if (s_theirs(c, k->str, v, theirs, sizeof theirs)) { // a name TRL, verl ... users know
        rl_cfg_err(c, k, path, "unknown key; %s", theirs);
        return;
    }
    const char *near = s_closest(k->str, cands, n);
    if (near) {
        rl_cfg_err(c, k, path, "unknown key; did you mean '%s'?", near);
        return;
    }
    rl_recipe_keys_begin(&it, c->algos, NULL);
    for (const rl_recipe_key_t *x; (x = rl_recipe_keys_next(&it)) != NULL;) {
        if (!strcmp(x->key, k->str) && strcmp(x->section, section) != 0 && s_mine(c, x)) {
            // a key written under the wrong section
            rl_cfg_err(c, k, path, "unknown key; did you mean '%s.%s'?", x->section, x->key);
            return;
        }
    }
    char all[1024];
    s_join(cands, all, sizeof all);
    rl_cfg_err(c, k, path, "unknown key; %s takes: %s", section, all);
}

// Applies the pairs of `map` to the keys of `section` at d; `prefix` is "optim" or
// "rewards[2]".
static void s_apply_map(rl_cfg_ctx_t *c, const char *section, const char *prefix,
                        const rl_yaml_node_t *map, const rl_cfg_dst_t *d) {
    char path[512], q[128];
    for (int i = 0; i < map->n; i++) {
        const rl_yaml_node_t *kn = map->kids[2 * i], *v = map->kids[2 * i + 1];
        if (s_dup_of(map, i) >= 0) {
            continue; // reported by s_check_dups
        }
        rl_cfg_quote_short(kn->str, q, sizeof q);
        snprintf(path, sizeof path, "%s.%s", prefix, q);
        const rl_recipe_key_t *k = rl_cfg_key(c->algos, section, kn->str);
        char theirs[512];
        if (!k) {
            s_unknown_key(c, section, kn, v, path);
            continue;
        }
        if (!s_mine(c, k) && s_theirs(c, kn->str, v, theirs, sizeof theirs)) {
            // another algorithm's key, written for what TRL means by it (GRPO's loss_type)
            rl_cfg_err(c, kn, path, "not a key of %s; %s", c->r->algorithm.def->name, theirs);
            continue;
        }
        if (rl_cfg_is_null(v)) {
            if (k->flags & RL_RECIPE_K_REQUIRED) {
                rl_cfg_err(c, kn, path, "required; found null");
                s_loc_add(c, path, kn);
            }
            continue; // null = the default
        }
        rl_cfg_dst_t dk = d->entry < 0 ? rl_cfg_dst(c->r, k) : *d;
        if (dk.base) { // else another algorithm's setting: s_check_applies says so
            s_convert(c, k, &dk, v, kn, path);
        }
        s_loc_add(c, path, kn);
    }
}

static void s_walk(rl_cfg_ctx_t *c, const rl_yaml_node_t *root) {
    rl_recipe_t *r = c->r;
    char f[300];
    const rl_cfg_section_t *sections;
    int nsections = rl_cfg_sections(&sections);
    RL_ASSERT(nsections <= S_MAX_SECTIONS);
    for (int i = 0; i < root->n; i++) {
        const rl_yaml_node_t *kn = root->kids[2 * i], *v = root->kids[2 * i + 1];
        if (s_dup_of(root, i) >= 0) {
            continue;
        }
        const rl_cfg_section_t *sec = rl_cfg_section(kn->str);
        char q[128];
        rl_cfg_quote_short(kn->str, q, sizeof q);
        if (!sec) {
            const char *names[S_MAX_SECTIONS + 1];
            for (int j = 0; j < nsections; j++) {
                names[j] = sections[j].name;
            }
            names[nsections] = NULL;
            const char *near = s_closest(kn->str, names, nsections);
            const rl_recipe_key_t *elsewhere = NULL;
            rl_recipe_keys_t it;
            rl_recipe_keys_begin(&it, c->algos, NULL);
            for (const rl_recipe_key_t *x; !near && (x = rl_recipe_keys_next(&it)) != NULL;) {
                if (!strcmp(x->key, kn->str) && s_mine(c, x)) {
                    elsewhere = x;
                    break;
                }
            }
            char all[256], theirs[512];
            s_join(names, all, sizeof all);
            if (!elsewhere && s_theirs(c, kn->str, v, theirs, sizeof theirs)) {
                rl_cfg_err(c, kn, q, "unknown %s; %s",
                           v && v->kind == RL_YAML_MAP ? "section" : "key", theirs);
            } else if (near) {
                rl_cfg_err(c, kn, q, "unknown section; did you mean '%s'?", near);
            } else if (elsewhere) {
                rl_cfg_err(c, kn, q, "unknown section; did you mean '%s.%s'?", elsewhere->section,
                           elsewhere->key);
            } else {
                rl_cfg_err(c, kn, q, "unknown section; sections are: %s", all);
            }
            continue;
        }
        s_loc_add(c, sec->name, kn);
        if (rl_cfg_is_null(v)) {
            continue; // "lora:" with nothing under it: all defaults
        }
        if (!sec->is_list) {
            if (v->kind != RL_YAML_MAP) {
                s_found(v, f, sizeof f);
                rl_cfg_err(c, kn, q, "expected a map of keys, found %s", f);
                continue;
            }
            rl_cfg_dst_t d = {r, -1};
            s_apply_map(c, sec->name, sec->name, v, &d);
            continue;
        }
        // rewards: a list of maps
        if (v->kind != RL_YAML_SEQ) {
            s_found(v, f, sizeof f);
            rl_cfg_err(c, kn, q, "expected a list of entries (- name: ...), found %s", f);
            continue;
        }
        if (v->n > RL_RECIPE_MAX_REWARDS) {
            rl_cfg_err(c, kn, q, "%d entries; at most %d are allowed", v->n, RL_RECIPE_MAX_REWARDS);
            continue;
        }
        rl_recipe_reward_t *rw = calloc((size_t)v->n + 1, sizeof *rw);
        if (!rw) {
            c->oom = 1;
            return;
        }
        r->rewards = rw; // the section is walked once: a repeated one is a skipped duplicate
        r->n_rewards = v->n;
        for (int j = 0; j < v->n; j++) {
            rl_cfg_dst_t d = {&rw[j], j};
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%s[%d]", sec->name, j);
            s_defaults(c, sec->name, &d);
            const rl_yaml_node_t *item = v->kids[j];
            if (item->kind != RL_YAML_MAP) {
                s_found(item, f, sizeof f);
                rl_cfg_err(c, item, prefix,
                           "expected a map (name:, builtin:, plugin:, model:, command: or http:, "
                           "...), found %s",
                           f);
                continue;
            }
            s_loc_add(c, prefix, item);
            s_apply_map(c, sec->name, prefix, item, &d);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// after the walk: derived defaults (the cross-key rules and files are rl_config_check.c's)

int rl_cfg_is_set(const rl_recipe_t *r, const char *key) {
    return rl_cfg_loc_find(r->priv, key) != NULL;
}

// names become folder names (run.name) and metric names (rewards[].name)
static int s_name_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

static int s_name_ok(const char *s) {
    if (!*s || !strcmp(s, ".") || !strcmp(s, "..")) {
        return 0;
    }
    for (; *s; s++) {
        if (!s_name_char(*s)) {
            return 0;
        }
    }
    return 1;
}

char *rl_cfg_strdupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

// The runner rlctl ships for `python:` rewards: RLCTL_TRL_RUNNER when set (an installed copy),
// else the source tree's (compiled in, so a build finds it from any working directory).
#ifndef RL_REWARDS_SOURCE_DIR
#define RL_REWARDS_SOURCE_DIR "rewards"
#endif
static const char *s_trl_runner(void) {
    const char *e = getenv("RLCTL_TRL_RUNNER");
    return e && e[0] ? e : RL_REWARDS_SOURCE_DIR "/rlctl_trl_reward.py";
}

// rewards[i].python (set at `key`, its map as JSON in w->python_json): {file, function}; the file
// resolved against the recipe's folder (the working directory for an override) and checked to
// exist; the entry becomes the command [python3, runner, file, function], named after the
// function unless it has a name. python_json is rewritten with the absolute file, so the recipe
// a run writes loads from its own folder.
static void s_python_command(rl_cfg_ctx_t *c, rl_recipe_reward_t *w, const char *key) {
    json_t *j = json_loads(w->python_json, 0, NULL);
    const char *file = json_string_value(json_object_get(j, "file"));
    json_t *fj = json_object_get(j, "function");
    const char *fn = json_string_value(fj);
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
        if (strcmp(k, "file") != 0 && strcmp(k, "function") != 0) {
            rl_cfg_err_key(c, key,
                           "unknown key '%s'; python: takes {file: my_rewards.py, "
                           "function: accuracy_reward}",
                           k);
            json_decref(j);
            return;
        }
    }
    if (!file || !file[0] || !fn || !fn[0]) {
        rl_cfg_err_key(c, key,
                       json_is_array(fj)
                           ? "function: names one function; write one entry per function "
                             "(each has its own name and weight, as TRL's reward_funcs list); "
                             "several entries may name the same file"
                           : "needs file: <a .py file> and function: <its name>, e.g. {file: "
                             "my_rewards.py, function: accuracy_reward}");
        json_decref(j);
        return;
    }
    const rl_cfg_loc_t *l = rl_cfg_loc_find(c->r->priv, key);
    const char *base = l && l->file == c->file ? c->base : c->cwd;
    char *abs = file[0] == '/' ? strdup(file) : s_path_join_norm(base, file);
    struct stat st;
    if (!abs) {
        c->oom = 1;
    } else if (stat(abs, &st) != 0 || !S_ISREG(st.st_mode)) {
        rl_cfg_err_key(c, key, "file '%s' does not exist (looked for %s)", file, abs);
    } else {
        const char *argv[] = {"python3", s_trl_runner(), abs, fn};
        rl_cfg_strlist_free(&w->command);
        w->command.items = calloc(4, sizeof(char *));
        int bad = !w->command.items;
        for (int i = 0; !bad && i < 4; i++) {
            bad |= !(w->command.items[i] = strdup(argv[i]));
            w->command.n += !bad;
        }
        if (!w->name) {
            w->name = strdup(fn);
            bad |= !w->name;
        }
        bad |= json_object_set_new(j, "file", json_string(abs)) != 0;
        char *s = bad ? NULL : json_dumps(j, JSON_PRESERVE_ORDER);
        if (s) {
            free(w->python_json);
            w->python_json = s;
        }
        c->oom |= bad || !s;
    }
    free(abs);
    json_decref(j);
}

// rewards[i].command or env.command (set at `key`): not empty, its program named, and its items
// resolved as paths are: the program (command[0]) when it holds a '/', against the recipe's folder
// (the working directory for an override), like plugin:; a later item when it names a file or
// folder there. A bare program name is left to the PATH search when the command starts.
static void s_check_command(rl_cfg_ctx_t *c, rl_recipe_strlist_t *cmd, const char *key) {
    if (cmd->n == 0) {
        rl_cfg_err_key(c, key,
                       "an empty command; list the program and its arguments, e.g. [python3, "
                       "my_reward.py]");
        return;
    }
    if (!cmd->items[0][0]) {
        rl_cfg_err_key(c, key, "the program (the first item) is an empty string");
        return;
    }
    const rl_cfg_loc_t *l = rl_cfg_loc_find(c->r->priv, key);
    const char *base = l && l->file == c->file ? c->base : c->cwd;
    struct stat st;
    for (int i = 0; i < cmd->n; i++) {
        char *it = cmd->items[i];
        if (!it[0] || it[0] == '/' || it[0] == '-' || (i == 0 && !strchr(it, '/'))) {
            continue;
        }
        char *abs = s_path_join_norm(base, it);
        if (!abs) {
            c->oom = 1;
            return;
        }
        if (i == 0 || stat(abs, &st) == 0) {
            free(it);
            cmd->items[i] = abs;
        } else {
            free(abs);
        }
    }
    if (cmd->n == 1 && strchr(cmd->items[0], ' ') && stat(cmd->items[0], &st) != 0) {
        char q[64];
        rl_cfg_quote_short(cmd->items[0], q, sizeof q);
        rl_cfg_err_key(c, key,
                       "'%s' is one item; a command is a list of the program and its "
                       "arguments, e.g. [python3, my_reward.py]",
                       q);
    }
}

static void s_derive(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    // run.name: the recipe file's stem, made safe for a folder name
    if (!r->run.name) {
        const char *b = strrchr(r->path, '/');
        b = b ? b + 1 : r->path;
        size_t n = strcspn(b, ".");
        char *s = malloc(n + 4);
        if (!s) {
            c->oom = 1;
            return;
        }
        for (size_t i = 0; i < n; i++) {
            s[i] = s_name_char(b[i]) ? b[i] : '_';
        }
        s[n] = '\0';
        if (!n) {
            strcpy(s, "run");
        }
        r->run.name = s;
    } else if (!s_name_ok(r->run.name)) {
        rl_cfg_err_key(c, "run.name",
                       "'%s' cannot name a folder; use letters, digits, '.', '_', '-'",
                       r->run.name);
    }
    if (!r->run.dir) {
        r->run.dir = rl_cfg_strdupf("%s/runs/%s", strcmp(c->cwd, "/") ? c->cwd : "", r->run.name);
    }
    if (!r->model.tokenizer && r->model.path) {
        size_t n = strlen(r->model.path); // "/" + "/tokenizer.json" would read back as one /
        r->model.tokenizer = rl_cfg_strdupf("%s%stokenizer.json", r->model.path,
                                            n > 0 && r->model.path[n - 1] == '/' ? "" : "/");
    }
    if (!r->run.dir || (r->model.path && !r->model.tokenizer)) {
        c->oom = 1;
    }
    // the mesh: its devices are its shape's product
    long long ranks = (long long)r->mesh.dp * r->mesh.fsdp;
    if (!rl_cfg_is_set(r, "mesh.devices")) {
        r->mesh.devices = (int)(ranks <= 4096 ? ranks : 0);
    } else if (r->mesh.devices != ranks) {
        rl_cfg_err_key(c, "mesh.devices",
                       "%d devices cannot hold a mesh of dp %d x fsdp %d = %lld ranks; make "
                       "dp x fsdp equal devices",
                       r->mesh.devices, r->mesh.dp, r->mesh.fsdp, ranks);
    }
    // the critic: the actor's learning rate and tuning mode unless set; critic.init is `base` or
    // a folder (resolved like a path key: against the recipe, or the cwd for an override)
    if (!rl_cfg_is_set(r, "critic.lr")) {
        r->critic.lr = r->optim.lr;
    }
    if (!rl_cfg_is_set(r, "critic.lora")) {
        r->critic.lora = r->lora.enabled;
    }
    if (r->critic.init && strcmp(r->critic.init, "base") != 0) {
        const rl_cfg_loc_t *l = rl_cfg_loc_find(r->priv, "critic.init");
        char *abs = s_path_join_norm(l && l->file == c->file ? c->base : c->cwd, r->critic.init);
        if (!abs) {
            c->oom = 1;
        } else {
            free(r->critic.init);
            r->critic.init = abs;
        }
    }
    // env: one source; the command's paths resolved (its other keys apply only with a source,
    // and the resolved recipe writes them all)
    {
        static const char *const srcs[] = {"env.builtin", "env.command", "env.plugin",
                                           "env.http"};
        int has[4] = {r->env.builtin >= 0, r->env.command.n > 0, r->env.plugin != NULL,
                      r->env.http.url != NULL};
        for (int a = 0, first = -1; a < 4; a++) {
            if (has[a] && first >= 0) {
                rl_cfg_err_key(c, srcs[a],
                               "set together with %s; an env is one of builtin, command, plugin "
                               "and http",
                               srcs[first]);
                break;
            }
            first = has[a] && first < 0 ? a : first;
        }
    }
    if (rl_cfg_is_set(r, "env.command")) {
        s_check_command(c, &r->env.command, "env.command");
    }
    if ((r->env.builtin >= 0 || r->env.http.url) && rl_cfg_is_set(r, "env.workers") &&
        r->env.workers != 1) {
        rl_cfg_err_key(c, "env.workers", "%d: %s; workers apply to env.command", r->env.workers,
                       r->env.builtin >= 0
                           ? "a built-in environment runs in the controller"
                           : "a server takes each request whole (it answers many at once itself)");
    }
    // rewards: name defaults to the builtin's; exactly one source; unique names
    for (int i = 0; i < r->n_rewards; i++) {
        rl_recipe_reward_t *w = &r->rewards[i];
        char key[64];
        snprintf(key, sizeof key, "rewards[%d]", i);
        if (!rl_cfg_is_set(r, key)) {
            continue; // not a map: already reported
        }
        // the sources, in the order messages name them
        static const char *const srcs[] = {"builtin", "plugin", "model",
                                           "command", "http",   "python"};
        int has[6] = {w->builtin >= 0,  w->plugin != NULL,   w->model != NULL,
                      w->command.n > 0, w->http.url != NULL, w->python_json != NULL};
        char ks[6][80], kname[80], kconfig[80];
        int n_has = 0, first = -1, second = -1, written = 0;
        for (int src = 0; src < 6; src++) {
            snprintf(ks[src], sizeof ks[src], "%s.%s", key, srcs[src]);
            written |= rl_cfg_is_set(r, ks[src]);
            if (has[src]) {
                n_has++;
                second = first >= 0 && second < 0 ? src : second;
                first = first < 0 ? src : first;
            }
        }
        snprintf(kname, sizeof kname, "%s.name", key);
        snprintf(kconfig, sizeof kconfig, "%s.config", key);
        if (n_has > 1) {
            rl_cfg_err_key(c, ks[second],
                           "set together with %s; an entry uses one of builtin, plugin, model, "
                           "command, http and python",
                           srcs[first]);
        } else if (!n_has && !written) {
            char all[256];
            s_join(rl_cfg_key(c->algos, "rewards", "builtin")->choices, all, sizeof all);
            rl_cfg_err_key(c, key,
                           "needs builtin: (%s), plugin: <path of a .so>, model: <a reward "
                           "model's folder>, command: [program, args...], http: {url: "
                           "http://HOST:PORT/PATH} or python: {file: my_rewards.py, function: f}",
                           all);
        }
        if (rl_cfg_is_set(r, ks[3])) {
            s_check_command(c, &w->command, ks[3]);
        }
        if (n_has == 1 && first == 5) {
            s_python_command(c, w, ks[5]);
        }
        if (n_has == 1 && first >= 2) {
            static const int kinds[] = {0,
                                        0,
                                        RL_RECIPE_REWARD_MODEL,
                                        RL_RECIPE_REWARD_COMMAND,
                                        RL_RECIPE_REWARD_HTTP,
                                        RL_RECIPE_REWARD_COMMAND};
            w->builtin = kinds[first];
        }
        const char *an = n_has == 1 && first == 4 ? "an" : "a";
        if (n_has == 1 && first >= 3 && rl_cfg_is_set(r, kconfig) && w->config_json &&
            strcmp(w->config_json, "{}") != 0) {
            rl_cfg_err_key(c, kconfig,
                           "%s %s reward takes no config (config: goes to the create() of a "
                           "builtin, plugin or model); %s",
                           an, srcs[first],
                           first == 3   ? "give the program its settings as arguments"
                           : first == 5 ? "give the function its settings in its file"
                                        : "put the settings in the URL or on the server");
        }
        w->reward_timeout = r->roles.reward_timeout;
        w->answer_field = r->data.answer_field;
        if (!w->name && has[0]) {
            w->name = strdup(rl_recipe_reward_builtin_name(w->builtin));
            if (!w->name) {
                c->oom = 1;
            }
        } else if (!w->name && n_has == 1 && first != 5 && !rl_cfg_is_set(r, kname)) {
            // (a python: entry is named after its function, or its error is reported)
            rl_cfg_err_key(c, key, "%s %s reward needs a name:", an, srcs[first]);
        } else if (w->name && !s_name_ok(w->name)) {
            rl_cfg_err_key(c, kname,
                           "'%s' cannot name a metric; use letters, digits, '.', '_', '-'",
                           w->name);
        }
        for (int j = 0; j < i && w->name; j++) {
            if (r->rewards[j].name && !strcmp(r->rewards[j].name, w->name)) {
                rl_cfg_err_key(c, rl_cfg_is_set(r, kname) ? kname : key,
                               "name '%s' is already used by rewards[%d]; names must be unique",
                               w->name, j);
                break;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the algorithm's settings

rl_cfg_dst_t rl_cfg_dst(const rl_recipe_t *r, const rl_recipe_key_t *k) {
    if (!(k->flags & RL_RECIPE_K_SETTINGS)) {
        return (rl_cfg_dst_t){(void *)r, -1};
    }
    const rl_recipe_algo_def_t *a = r->algorithm.def;
    int mine = a && r->algorithm.settings && rl_recipe_key_for(k, a);
    return (rl_cfg_dst_t){mine ? r->algorithm.settings : NULL, -1};
}

// The recipe's algorithm, read from the tree before the walk (algorithm.name, overrides spliced
// in): its settings struct, with the defaults of its keys there. An unknown or missing name
// leaves none (the walk reports it), and every settings key then has nowhere to go.
static void s_algo_settings(rl_cfg_ctx_t *c, const rl_yaml_node_t *root) {
    rl_recipe_t *r = c->r;
    const rl_yaml_node_t *sec = NULL, *name = NULL;
    for (int i = 0; root->kind == RL_YAML_MAP && i < root->n; i++) {
        if (s_dup_of(root, i) < 0 && !strcmp(root->kids[2 * i]->str, "algorithm")) {
            sec = root->kids[2 * i + 1];
        }
    }
    for (int i = 0; sec && sec->kind == RL_YAML_MAP && i < sec->n; i++) {
        if (s_dup_of(sec, i) < 0 && !strcmp(sec->kids[2 * i]->str, "name")) {
            name = sec->kids[2 * i + 1];
        }
    }
    const rl_recipe_algo_def_t *a =
        name && name->kind == RL_YAML_SCALAR ? rl_recipe_algo_find(c->algos, name->str) : NULL;
    if (!a) {
        return;
    }
    r->algorithm.def = a;
    if (!a->settings_size) {
        return;
    }
    if (!(r->algorithm.settings = calloc(1, a->settings_size))) {
        c->oom = 1;
        return;
    }
    rl_cfg_dst_t d = {r->algorithm.settings, -1};
    for (int f = 0; a->keys && a->keys[f]; f++) {
        for (const rl_recipe_key_t *k = a->keys[f]; k->section; k++) {
            if (!(k->flags & RL_RECIPE_K_SETTINGS)) {
                continue;
            }
            RL_ASSERT(k->offset < a->settings_size); // a row outside the algorithm's struct
            if (k->type == RL_RECIPE_T_ENUM) {
                *RL_CFG_FIELD(&d, k, int) = -1;
            }
            if (k->def) {
                s_default_set(c, k, &d, k->def);
            }
        }
    }
}

int rl_recipe_number(const rl_recipe_t *recipe, const char *dotted_key, double *out) {
    const rl_recipe_key_t *k = rl_recipe_key_find(recipe->algos, dotted_key);
    if (!k || rl_cfg_section(k->section)->is_list || !rl_cfg_applies(recipe, k)) {
        return RL_ENOTFOUND;
    }
    rl_cfg_dst_t d = rl_cfg_dst(recipe, k);
    if (!d.base) {
        return RL_ENOTFOUND;
    }
    switch (k->type) {
    case RL_RECIPE_T_BOOL: *out = *RL_CFG_FIELD(&d, k, bool); return 0;
    case RL_RECIPE_T_INT:
    case RL_RECIPE_T_ENUM: *out = *RL_CFG_FIELD(&d, k, int); return 0;
    case RL_RECIPE_T_FLOAT: *out = *RL_CFG_FIELD(&d, k, double); return 0;
    default: return RL_ENOTFOUND;
    }
}

// ---------------------------------------------------------------------------------------------
// load

static void s_recipe_free_fields(rl_recipe_t *r) {
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, r->algos, NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        if (rl_cfg_section(k->section)->is_list) {
            for (int e = 0; e < r->n_rewards; e++) {
                rl_cfg_dst_t de = {&r->rewards[e], e};
                s_field_free(k, &de);
            }
            continue;
        }
        rl_cfg_dst_t d = rl_cfg_dst(r, k);
        if (d.base) {
            s_field_free(k, &d);
        }
    }
    free(r->algorithm.settings);
    r->algorithm.settings = NULL;
    free(r->rewards);
    r->rewards = NULL;
    r->n_rewards = 0;
}

const char *rl_recipe_note(const rl_recipe_t *r) {
    return r && r->priv ? r->priv->note : "";
}

void rl_recipe_destroy(rl_recipe_t **recipe_p) {
    if (!recipe_p || !*recipe_p) {
        return;
    }
    rl_recipe_t *r = *recipe_p;
    s_recipe_free_fields(r);
    if (r->priv) {
        for (int i = 0; i < r->priv->n; i++) {
            free(r->priv->locs[i].key);
        }
        for (int i = 0; i < r->priv->nfiles; i++) {
            free(r->priv->files[i]);
        }
        free(r->priv->locs);
        free(r->priv->files);
        free(r->priv);
    }
    free(r->path);
    free(r);
    *recipe_p = NULL;
}

// The model's sampling defaults (generation_config.json: temperature, top_p, top_k,
// max_new_tokens) for the sampling keys the recipe leaves unset, as transformers' generate() and
// vLLM take them; not with do_sample: false (greedy decoding has no place in RL sampling). A
// missing or unreadable file changes nothing (rl_hf reports a malformed one). Notes what it took.
static void s_generation_defaults(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    if (!r->model.path) {
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/generation_config.json", r->model.path);
    json_t *g = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    json_t *ds = g ? json_object_get(g, "do_sample") : NULL;
    if (!json_is_object(g) || json_is_false(ds)) {
        json_decref(g);
        return;
    }
    char note[160];
    size_t cap = sizeof note, o = 0;
    json_t *v;
    v = json_object_get(g, "temperature");
    if (json_is_number(v) && json_number_value(v) > 0 && json_number_value(v) <= 100 &&
        !rl_cfg_is_set(r, "sampling.temperature")) {
        r->sampling.temperature = json_number_value(v);
        o += (size_t)snprintf(note + o, cap - o, " temperature %g", r->sampling.temperature);
    }
    v = json_object_get(g, "top_p");
    if (json_is_number(v) && json_number_value(v) > 0 && json_number_value(v) <= 1 &&
        !rl_cfg_is_set(r, "sampling.top_p") && o < cap) {
        r->sampling.top_p = json_number_value(v);
        o += (size_t)snprintf(note + o, cap - o, " top_p %g", r->sampling.top_p);
    }
    v = json_object_get(g, "top_k");
    if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < INT_MAX &&
        !rl_cfg_is_set(r, "sampling.top_k") && o < cap) {
        r->sampling.top_k = (int)json_integer_value(v);
        o += (size_t)snprintf(note + o, cap - o, " top_k %d", r->sampling.top_k);
    }
    v = json_object_get(g, "max_new_tokens");
    if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) < INT_MAX &&
        !rl_cfg_is_set(r, "sampling.max_new_tokens") && o < cap) {
        r->sampling.max_new_tokens = (int)json_integer_value(v);
        o += (size_t)snprintf(note + o, cap - o, " max_new_tokens %d", r->sampling.max_new_tokens);
    }
    if (o > 0 && o < cap) { // "sampling: temperature 0.6 top_p 0.95 from ..."
        snprintf(r->priv->note, sizeof r->priv->note,
                 "sampling:%.150s from %.300s (the recipe sets none of these)", note, path);
    }
    json_decref(g);
}

static char *s_dirname_abs(const char *cwd, const char *name) {
    const char *slash = strrchr(name, '/');
    if (!slash) {
        return strdup(cwd);
    }
    size_t n = (size_t)(slash - name);
    char *d = malloc(n + 2);
    if (!d) {
        return NULL;
    }
    memcpy(d, name, n);
    d[n] = '\0';
    if (n == 0) {
        strcpy(d, "/");
    }
    char *abs = s_path_join_norm(cwd, d);
    free(d);
    return abs;
}

int rl_recipe_load_string(const rl_recipe_algos_t *algos, const char *text, size_t len,
                          const char *name, const char *const *overrides, int n_overrides,
                          unsigned flags, rl_recipe_t **out, char *err, size_t err_len) {
    *out = NULL;
    if (err && err_len) {
        err[0] = '\0';
    }
    rl_cfg_ctx_t c = {.flags = flags, .algos = algos};
    rl_yaml_node_t *root = NULL;
    int rc = RL_ENOMEM;
    char cwdbuf[4096];
    rl_recipe_t *r = calloc(1, sizeof *r);
    if (!r || !(r->priv = calloc(1, sizeof *r->priv)) || !(r->path = strdup(name)) ||
        !(r->priv->files = calloc((size_t)n_overrides + 1, sizeof(char *))) ||
        !(r->priv->files[0] = strdup(name))) {
        goto fail;
    }
    r->priv->nfiles = 1;
    r->algos = algos;
    c.r = r;
    c.file = r->priv->files[0];
    for (int i = 0; i < n_overrides; i++) {
        if (!(r->priv->files[i + 1] = rl_cfg_strdupf("<override %d>", i + 1))) {
            goto fail;
        }
        r->priv->nfiles++;
    }
    if (!getcwd(cwdbuf, sizeof cwdbuf)) {
        rc = rl_errf(err, err_len, errno ? errno : RL_EIO, "cannot read the working directory");
        goto fail;
    }
    if (!(c.cwd = strdup(cwdbuf)) || !(c.base = s_dirname_abs(c.cwd, name))) {
        goto fail;
    }
    // defaults first, so the walk only overwrites what the recipe sets
    rl_cfg_dst_t d = {r, -1};
    const rl_cfg_section_t *sections;
    int nsections = rl_cfg_sections(&sections);
    for (int i = 0; i < nsections; i++) {
        if (!sections[i].is_list) {
            s_defaults(&c, sections[i].name, &d);
        }
    }
    char e[1024];
    rc = rl_yaml_parse(text, len, c.file, 0, &root, e, sizeof e);
    if (rc == RL_ENOMEM) {
        goto fail;
    }
    if (rc) {
        // a syntax error stops here: the rest of the tree is unknown
        rl_errf(err, err_len, RL_EINVAL, "%s", e);
        rc = RL_EINVAL;
        goto fail;
    }
    if (!root) {
        root = rl_yaml_node_new(RL_YAML_MAP, c.file, 1, 1, NULL, 0);
        if (!root) {
            goto fail;
        }
    }
    if (root->kind != RL_YAML_MAP) {
        char f[300];
        s_found(root, f, sizeof f);
        rl_cfg_err(&c, root, NULL, "a recipe is a map of sections (run:, model:, ...); found %s",
                   f);
    } else {
        for (int i = 0; i < n_overrides && !c.oom; i++) {
            rl_cfg_apply_override(&c, root, overrides[i], r->priv->files[i + 1]);
        }
        s_check_dups(&c, root, "");
        s_algo_settings(&c, root);
        s_walk(&c, root);
        if (r->algorithm.name >= 0 && r->algorithm.name < algos->n) {
            r->algorithm.def = algos->all[r->algorithm.name];
        }
        rl_cfg_algo_defaults(&c);
        s_derive(&c);
        rl_cfg_check_recipe(&c);
        if (!(flags & RL_RECIPE_NO_FILE_CHECKS)) {
            rl_cfg_check_files(&c);
            if (c.nerr == 0) {
                s_generation_defaults(&c);
            }
        }
    }
    if (c.oom) {
        rc = RL_ENOMEM;
        goto fail;
    }
    if (c.nerr > 0) {
        qsort(c.errs, (size_t)c.nerr, sizeof *c.errs, s_err_cmp);
        size_t o = 0;
        for (int i = 0; i < c.nerr && err && o + 1 < err_len; i++) {
            o += (size_t)snprintf(err + o, err_len - o, "%s%s", i ? "\n" : "", c.errs[i].msg);
        }
        if (c.dropped && err && o + 1 < err_len) {
            snprintf(err + o, err_len - o, "\n%s: ... and %d more errors", name, c.dropped);
        }
        rc = RL_EINVAL;
        goto fail;
    }
    rl_yaml_destroy(&root);
    free(c.cwd);
    free(c.base);
    free(c.errs);
    *out = r;
    return 0;
fail:
    if (rc == RL_ENOMEM) {
        rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", name);
    }
    for (int i = 0; i < c.nerr; i++) {
        free(c.errs[i].msg);
    }
    free(c.errs);
    rl_yaml_destroy(&root);
    free(c.cwd);
    free(c.base);
    rl_recipe_destroy(&r);
    return rc;
}

int rl_recipe_load_file(const rl_recipe_algos_t *algos, const char *path,
                        const char *const *overrides, int n_overrides, unsigned flags,
                        rl_recipe_t **out, char *err, size_t err_len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            if (cap > RL_YAML_MAX_INPUT) {
                rc = rl_errf(err, err_len, RL_EINVAL, "%s: larger than %u bytes", path,
                             RL_YAML_MAX_INPUT);
                break;
            }
            cap = cap ? cap * 2 : 16384;
            char *b = realloc(buf, cap);
            if (!b) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
                break;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                int e = errno ? errno : EIO;
                rc = rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
            }
            break;
        }
    }
    fclose(f);
    if (rc == 0) {
        rc = rl_recipe_load_string(algos, buf ? buf : "", n, path, overrides, n_overrides, flags,
                                   out, err, err_len);
    }
    free(buf);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// locations after loading

int rl_recipe_key_location(const rl_recipe_t *recipe, const char *dotted_key, const char **file,
                           int *line, int *col) {
    const rl_cfg_loc_t *l = rl_cfg_loc_find(recipe->priv, dotted_key);
    if (!l) {
        *file = recipe->path;
        *line = 0;
        *col = 0;
        return RL_ENOTFOUND;
    }
    *file = l->file;
    *line = l->line;
    *col = l->col;
    return 0;
}

int rl_recipe_errorf(const rl_recipe_t *recipe, const char *dotted_key, char *err,
                     size_t err_len, int code, const char *fmt, ...) {
    if (!err || !err_len) {
        return code;
    }
    const char *file;
    int line, col;
    int o;
    if (rl_recipe_key_location(recipe, dotted_key, &file, &line, &col) == 0) {
        o = snprintf(err, err_len, "%s:%d:%d: %s: ", file, line, col, dotted_key);
    } else {
        o = snprintf(err, err_len, "%s: %s: ", file, dotted_key);
    }
    if (o >= 0 && (size_t)o < err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + o, err_len - (size_t)o, fmt, ap);
        va_end(ap);
    }
    return code;
}


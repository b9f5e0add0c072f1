// rl_env_host — a run's environment: the built-in one or a program's workers (rl_env_host.h).
#include "rl_env_host.h"

#include "rl_child.h"
#include "rl_clock.h"
#include "rl_env_calc.h"
#include "rl_err.h"
#include "rl_httpc.h"
#include "rl_log.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rl_env_host {
    int builtin;          // RL_RECIPE_ENV_* or -1
    int n;                // workers of the command
    rl_child_t **kids;    // (n)
    char **argv;          // what each worker runs (NULL-ended, owned): a restart's too
    const char *kind;     // "the env command" or "the env plugin's worker"
    int restarts;         // workers restarted so far
    int is_http;          // a server: http below
    rl_httpc_opts_t http; // its URL, attempts and limit (env.timeout)
    char *url;            // http.url_text's storage
    double timeout;       // seconds a call may take
    int drop;             // env.on_error: drop: a worker's failure fails only its own items
    char what[512];       // "command [python3 /abs/env.py]"
};

void rl_env_host_describe(const rl_recipe_env_t *env, char *out, size_t cap) {
    if (env->builtin >= 0) {
        snprintf(out, cap, "builtin %s", env->builtin == RL_RECIPE_ENV_CALC ? "calc" : "?");
        return;
    }
    if (env->plugin) {
        snprintf(out, cap, "plugin %s", env->plugin);
        return;
    }
    if (env->http.url) {
        snprintf(out, cap, "http %s", env->http.url);
        return;
    }
    size_t o = (size_t)snprintf(out, cap, "command [");
    for (int i = 0; i < env->command.n && o < cap; i++) {
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? " " : "", env->command.items[i]);
    }
    if (o < cap) {
        snprintf(out + o, cap - o, "]");
    }
}

void rl_env_host_close(rl_env_host_t **self_p) {
    rl_env_host_t *h = *self_p;
    if (!h) {
        return;
    }
    for (int k = 0; h->kids && k < h->n; k++) {
        rl_child_stop(&h->kids[k]);
    }
    for (int i = 0; h->argv && h->argv[i]; i++) {
        free(h->argv[i]);
    }
    free(h->argv);
    free(h->kids);
    free(h->url);
    free(h);
    *self_p = NULL;
}

int rl_env_host_open(const rl_recipe_env_t *env, rl_env_host_t **out, char *err, size_t err_len) {
    *out = NULL;
    if (env->builtin < 0 && env->command.n == 0 && !env->plugin && !env->http.url) {
        return rl_errf(err, err_len, RL_EINVAL, "the recipe has no env");
    }
    rl_env_host_t *h = calloc(1, sizeof *h);
    if (!h) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    h->builtin = env->builtin;
    h->timeout = env->timeout;
    h->drop = env->on_error == RL_RECIPE_ENV_DROP;
    rl_env_host_describe(env, h->what, sizeof h->what);
    if (env->http.url) { // nothing to start: a server need not be up before the first request
        h->is_http = 1;
        rl_httpc_opts_t *o = &h->http;
        h->url = strdup(env->http.url);
        o->url_text = h->url;
        o->timeout = env->http.timeout;
        o->retries = env->http.retries;
        o->limit = env->timeout;
        o->limit_name = "env.timeout";
        o->max_body = RL_ENV_HOST_MAX_REPLY;
        char e[1024];
        int rc = !h->url ? rl_errf(e, sizeof e, RL_ENOMEM, "out of memory")
                         : rl_httpc_url_parse(h->url, "environment", &o->url, e, sizeof e);
        if (rc) {
            rl_errf(err, err_len, rc, "env http: %s", e); // e names the URL
            rl_env_host_close(&h);
            return rc;
        }
    } else if (h->builtin < 0) {
        h->n = env->workers > 0 ? env->workers : 1;
        h->kids = calloc((size_t)h->n, sizeof *h->kids);
        if (!h->kids) {
            rl_env_host_close(&h);
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        // a plugin: workers of this rlctl (`rlctl env serve`), so that it never runs in here
        char self[4096], *pargv[8] = {NULL};
        if (env->plugin) {
            ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
            if (n <= 0) {
                rl_env_host_close(&h);
                return rl_errf(err, err_len, RL_EIO,
                               "env %s: cannot find this rlctl's path (/proc/self/exe) to start "
                               "its workers",
                               env->plugin);
            }
            self[n] = '\0';
            char *a[] = {self,
                         "env",
                         "serve",
                         "--plugin",
                         env->plugin,
                         "--config",
                         env->config_json ? env->config_json : "{}",
                         NULL};
            memcpy(pargv, a, sizeof a);
        }
        char *const *argv = env->plugin ? pargv : env->command.items;
        int argc = 0;
        while (argv[argc]) {
            argc++;
        }
        h->argv = calloc((size_t)argc + 1, sizeof *h->argv);
        for (int i = 0; h->argv && i < argc; i++) {
            if (!(h->argv[i] = strdup(argv[i]))) {
                break;
            }
        }
        if (!h->argv || (argc > 0 && !h->argv[argc - 1])) {
            rl_env_host_close(&h);
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        h->kind = env->plugin ? "the env plugin's worker" : "the env command";
        for (int k = 0; k < h->n; k++) {
            char e[1024];
            int rc =
                rl_child_start(h->argv, h->kind, "the controller's log", &h->kids[k], e, sizeof e);
            if (rc) {
                rl_errf(err, err_len, rc, "env %s: worker %d: %s", h->what, k, e);
                rl_env_host_close(&h);
                return rc;
            }
        }
    }
    *out = h;
    return 0;
}

// FNV-1a of an episode's id: which worker answers it.
static int s_worker_of(const char *id, int n) {
    uint64_t x = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
        x = (x ^ *p) * 1099511628211ull;
    }
    return (int)(x % (uint64_t)n);
}

// Worker k as a running program: one that failed a call before (exited, closed its stdout, hung
// past env.timeout, wrote out of turn: rl_child stopped it) is started again, said in the log.
// The episodes it held are gone with it: their next steps are the environment's to refuse.
static int s_alive(rl_env_host_t *h, int k, char *err, size_t err_len) {
    // NULL: a start again failed before (the program is gone): try once more
    const char *why = h->kids[k] ? rl_child_gone(h->kids[k]) : "it could not be started again";
    if (!why) {
        return 0;
    }
    rl_log_warn("env %s: worker %d was stopped (%s); starting it again", h->what, k, why);
    rl_child_stop(&h->kids[k]);
    char e[1024];
    int rc = rl_child_start(h->argv, h->kind, "the controller's log", &h->kids[k], e, sizeof e);
    if (rc) {
        return rl_errf(err, err_len, rc, "env %s: worker %d could not be started again: %s",
                       h->what, k, e);
    }
    h->restarts++;
    return 0;
}

int rl_env_host_restarts(const rl_env_host_t *h) {
    return h->restarts;
}

// One line to worker k and its reply, within the call's deadline t_end.
static int s_exchange(rl_env_host_t *h, int k, const char *line, double t_end, char **reply,
                      char *err, size_t err_len) {
    char e[1024];
    size_t len = 0;
    int rc = s_alive(h, k, err, err_len);
    if (rc) {
        return rc;
    }
    rc = rl_child_send(h->kids[k], line, strlen(line), e, sizeof e);
    if (!rc) {
        double left = t_end - rl_clock_now();
        rc = rl_child_recv(h->kids[k], left > 0.001 ? left : 0.001, RL_ENV_HOST_MAX_REPLY, reply,
                           &len, e, sizeof e);
    }
    if (rc) {
        return rl_errf(err, err_len, rc, "env %s: worker %d: %s", h->what, k, e);
    }
    return 0;
}

// Several workers: the request's items split by episode, sent to all, the replies joined.
static int s_split_call(rl_env_host_t *h, const char *request, char **reply, char *err,
                        size_t err_len) {
    json_error_t je;
    json_t *q = json_loads(request, 0, &je);
    json_t *op = json_object_get(q, "op"), *items = json_object_get(q, "items");
    if (!json_is_string(op) || !json_is_array(items)) {
        json_decref(q);
        return rl_errf(err, err_len, RL_EINVAL, "env: a request without op and items");
    }
    size_t n = json_array_size(items);
    int W = h->n, rc = 0;
    int *who = calloc(n ? n : 1, sizeof *who);
    json_t **parts = calloc((size_t)W, sizeof *parts);
    char **lines = calloc((size_t)W, sizeof *lines), **reps = calloc((size_t)W, sizeof *reps);
    json_t **got = calloc((size_t)W, sizeof *got);
    json_t *joined = json_array();
    if (!who || !parts || !lines || !reps || !got || !joined) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *it = json_array_get(items, i);
        json_t *ep = json_object_get(it, "episode");
        who[i] = s_worker_of(json_is_string(ep) ? json_string_value(ep) : "", W);
        if (!parts[who[i]]) {
            parts[who[i]] = json_array();
        }
        if (!parts[who[i]] || json_array_append(parts[who[i]], it) != 0) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    double t_end = rl_clock_now() + h->timeout;
    // a worker's failure: with drop (not for close, whose reply has no items) it fails only its
    // own items ({"error": ...} in their places: the episodes' decoder drops them), else the call
    const int partial = h->drop && strcmp(json_string_value(op), "close") != 0;
    char **fail = rc ? NULL : calloc((size_t)W, sizeof *fail);
    if (!rc && !fail) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
#define S_FAIL(k, r)                                                                               \
    do {                                                                                           \
        if (partial && (r) != RL_ENOMEM && !fail[k] && (fail[k] = strdup(err)) != NULL) {          \
            rc = 0;                                                                                \
        }                                                                                          \
    } while (0)
    // every part sent before any reply is read: the workers answer at the same time
    for (int k = 0; !rc && k < W; k++) {
        if (!parts[k]) {
            continue;
        }
        json_t *sub = json_pack("{s:O,s:O}", "op", op, "items", parts[k]);
        lines[k] = sub ? json_dumps(sub, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(sub);
        char e[1024];
        if (!lines[k]) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        } else if ((rc = s_alive(h, k, err, err_len)) != 0) {
            S_FAIL(k, rc);
        } else if ((rc = rl_child_send(h->kids[k], lines[k], strlen(lines[k]), e, sizeof e))) {
            rl_errf(err, err_len, rc, "env %s: worker %d: %s", h->what, k, e);
            S_FAIL(k, rc);
        }
    }
    for (int k = 0; !rc && k < W; k++) {
        if (!parts[k] || fail[k]) {
            continue;
        }
        char e[1024];
        size_t len = 0;
        double left = t_end - rl_clock_now();
        rc = rl_child_recv(h->kids[k], left > 0.001 ? left : 0.001, RL_ENV_HOST_MAX_REPLY, &reps[k],
                           &len, e, sizeof e);
        if (rc) {
            rl_errf(err, err_len, rc, "env %s: worker %d: %s", h->what, k, e);
            S_FAIL(k, rc);
            continue;
        }
        got[k] = json_loadb(reps[k], len, 0, &je);
        json_t *ge = json_object_get(got[k], "error");
        if (ge && partial) { // the worker's own error: its items'
            rc = rl_errf(err, err_len, RL_EINVAL, "env %s: worker %d: %.400s", h->what, k,
                         json_is_string(ge) ? json_string_value(ge)
                                            : "(an error that is not a string)");
            S_FAIL(k, rc);
            continue;
        }
        if (ge) { // the worker's own error is the call's: the decoder reports it
            *reply = strdup(reps[k]);
            rc = *reply ? 1 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        size_t want = json_array_size(parts[k]);
        json_t *gi = json_object_get(got[k], "items");
        if (strcmp(json_string_value(op), "close") != 0 &&
            (!json_is_array(gi) || json_array_size(gi) != want)) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "env %s: worker %d answered %s %zu items with %s (%zu items)", h->what, k,
                         json_string_value(op), want,
                         !got[k]              ? "something that is not JSON"
                         : !json_is_array(gi) ? "no items array"
                                              : "another count",
                         json_is_array(gi) ? json_array_size(gi) : (size_t)0);
            S_FAIL(k, rc);
        }
    }
#undef S_FAIL
    if (rc == 1) { // a worker's {"error": ...}, passed on
        rc = 0;
    } else if (!rc) {
        size_t *at = calloc((size_t)W, sizeof *at);
        for (size_t i = 0; at && i < n; i++) { // back in the request's order
            int k = who[i];
            json_t *e = fail[k] ? json_pack("{s:s}", "error", fail[k]) : NULL;
            json_array_append_new(
                joined,
                fail[k] ? e
                        : json_incref(json_array_get(json_object_get(got[k], "items"), at[k]++)));
        }
        json_t *o = at ? json_pack("{s:O}", "items", joined) : NULL;
        *reply = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        free(at);
        if (!*reply) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    for (int k = 0; k < W; k++) {
        if (fail) {
            free(fail[k]);
        }
        if (parts) {
            json_decref(parts[k]);
        }
        if (got) {
            json_decref(got[k]);
        }
        if (lines) {
            free(lines[k]);
        }
        if (reps) {
            free(reps[k]);
        }
    }
    json_decref(joined);
    json_decref(q);
    free(who);
    free(parts);
    free(lines);
    free(reps);
    free(got);
    free(fail);
    return rc;
}

// A server: the request line POSTed, the 2xx reply's body the reply line (trailing whitespace
// dropped; the protocol's decoder judges the rest).
static int s_http_call(rl_env_host_t *h, const char *request, char **reply, char *err,
                       size_t err_len) {
    rl_httpc_reply_t *rep = NULL;
    char e[1024];
    int rc = rl_httpc_post(&h->http, request, strlen(request), &rep, e, sizeof e);
    if (rc) {
        return rl_errf(err, err_len, rc, "env http: %s", e); // e names the URL
    }
    size_t len = 0;
    const char *body = rl_httpc_reply_body(rep, &len);
    while (len > 0 && (body[len - 1] == '\n' || body[len - 1] == '\r' || body[len - 1] == ' ' ||
                       body[len - 1] == '\t')) {
        len--;
    }
    *reply = malloc(len + 1);
    if (*reply) {
        memcpy(*reply, body, len);
        (*reply)[len] = '\0';
    }
    rl_httpc_reply_destroy(&rep);
    return *reply ? 0 : rl_errf(err, err_len, RL_ENOMEM, "env %s: out of memory", h->what);
}

int rl_env_host_call(void *host, const char *request, char **reply, char *err, size_t err_len) {
    rl_env_host_t *h = host;
    *reply = NULL;
    if (h->builtin == RL_RECIPE_ENV_CALC) {
        int rc = rl_env_calc_answer(request, strlen(request), reply);
        return rc ? rl_errf(err, err_len, rc, "env %s: out of memory", h->what) : 0;
    }
    if (h->is_http) {
        return s_http_call(h, request, reply, err, err_len);
    }
    if (h->n == 1) {
        return s_exchange(h, 0, request, rl_clock_now() + h->timeout, reply, err, err_len);
    }
    return s_split_call(h, request, reply, err, err_len);
}

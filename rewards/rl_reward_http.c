// rl_reward_http — scoring on a server: the batch as rl_reward_json's request, POSTed with
// core/rl_httpc's attempts and backoff, the 2xx reply's body decoded by rl_reward_json.
#include "rl_reward_http.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl_err.h"
#include "rl_reward_json.h"

typedef struct {
    rl_httpc_opts_t o; // the URL, timeout (seconds per attempt), retries and deadline
    char *url_text;    // as the recipe wrote it, for messages
    int format;        // RL_REWARD_JSON_*
    char *label_field; // openrlhf: the row field sent as the label
} s_http_t;

// ---------------------------------------------------------------------------------------------
// the table

static void s_http_destroy(void *state) {
    s_http_t *h = state;
    if (h) {
        free(h->url_text);
        free(h->label_field);
        free(h);
    }
}

static int s_http_create(const rl_reward_host_t *host, const char *config_json, void **state,
                         char *err, size_t err_len) {
    (void)host;
    json_error_t je;
    json_t *cfg = json_loads(config_json ? config_json : "{}", 0, &je);
    const char *url = json_string_value(json_object_get(cfg, "url"));
    const char *fmt = json_string_value(json_object_get(cfg, "format"));
    const char *lf = json_string_value(json_object_get(cfg, "label_field"));
    json_t *to = json_object_get(cfg, "timeout"), *re = json_object_get(cfg, "retries");
    json_t *dl = json_object_get(cfg, "deadline");
    int bad = !json_is_object(cfg) || !url || (to && !json_is_number(to)) ||
              (re && !json_is_integer(re)) || (dl && !json_is_number(dl)) ||
              (fmt && strcmp(fmt, "rlctl") != 0 && strcmp(fmt, "openrlhf") != 0);
    s_http_t *h = bad ? NULL : calloc(1, sizeof *h);
    if (bad || !h) {
        json_decref(cfg);
        snprintf(err, err_len,
                 bad ? "config: expected {\"url\": \"http://...\", \"timeout\": s, "
                       "\"format\": rlctl|openrlhf, \"retries\": n, "
                       "\"label_field\": f, \"deadline\": s}"
                     : "out of memory");
        return 1;
    }
    rl_httpc_opts_t *o = &h->o;
    o->timeout = to ? json_number_value(to) : 30.0;
    o->timeout = isfinite(o->timeout) && o->timeout > 0 ? o->timeout : 30.0;
    o->retries = re ? (int)fmax(0, fmin(100, (double)json_integer_value(re))) : 3;
    h->format = fmt && !strcmp(fmt, "openrlhf") ? RL_REWARD_JSON_OPENRLHF : RL_REWARD_JSON_RLCTL;
    o->limit = dl ? json_number_value(dl) : 0;
    o->limit = isfinite(o->limit) && o->limit > 0 ? o->limit : 0;
    o->limit_name = "roles.reward_timeout";
    o->max_body = RL_REWARD_JSON_MAX_REPLY;
    h->url_text = strdup(url);
    o->url_text = h->url_text;
    h->label_field = strdup(lf ? lf : "answer");
    int rc = !h->url_text || !h->label_field
                 ? (snprintf(err, err_len, "out of memory"), 1)
                 : rl_reward_http_url_parse(url, &o->url, err, err_len) != 0;
    json_decref(cfg);
    if (rc) {
        s_http_destroy(h);
        return 1;
    }
    *state = h;
    return 0;
}

static int s_http_score(void *state, const rl_reward_item_t *items, size_t n, double *out,
                        char *err, size_t err_len) {
    s_http_t *h = state;
    char *req = NULL;
    size_t req_len = 0;
    if (rl_reward_json_request(items, n, h->format, h->label_field, &req, &req_len, err, err_len) !=
        0) {
        return 1;
    }
    rl_httpc_reply_t *rep = NULL;
    int rc = rl_httpc_post(&h->o, req, req_len, &rep, err, err_len) != 0;
    if (!rc) { // a 2xx reply: its scores, or the server's error
        char perr[1024];
        size_t blen = 0;
        const char *body = rl_httpc_reply_body(rep, &blen);
        int dr = rl_reward_json_reply(body, blen, h->format, n, out, perr, sizeof perr);
        if (dr == RL_EPLUGIN) {
            snprintf(err, err_len, "%s replied with an error: %s", h->url_text, perr);
        } else if (dr != 0) {
            snprintf(err, err_len, "a bad reply from %s: %s", h->url_text, perr);
        }
        rc = dr != 0;
    }
    rl_httpc_reply_destroy(&rep);
    free(req);
    return rc;
}

static const rl_reward_table_t s_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "http",
    .create = s_http_create,
    .score = s_http_score,
    .destroy = s_http_destroy,
};

const rl_reward_table_t *rl_reward_http_table(void) {
    return &s_table;
}

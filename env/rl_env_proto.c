// rl_env_proto — the environment protocol's requests and checked replies (rl_env_proto.h).
#include "rl_env_proto.h"

#include "rl_err.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- requests --------------------------------------------------------------------------------

static char *s_dump(json_t *req) {
    char *t = req ? json_dumps(req, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(req);
    return t;
}

char *rl_env_request_reset(const rl_env_reset_item_t *items, int n) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *it = json_pack("{s:s, s:O, s:I}", "episode", items[i].episode, "row", items[i].row,
                               "seed", (json_int_t)items[i].seed);
        if (!it || json_array_append_new(arr, it) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return s_dump(arr ? json_pack("{s:s, s:o}", "op", "reset", "items", arr) : NULL);
}

char *rl_env_request_step(const rl_env_step_item_t *items, int n) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        json_t *it =
            json_pack("{s:s, s:O}", "episode", items[i].episode, "message", items[i].message);
        if (!it || json_array_append_new(arr, it) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return s_dump(arr ? json_pack("{s:s, s:o}", "op", "step", "items", arr) : NULL);
}

char *rl_env_request_close(const char *const *episodes, int n) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        if (json_array_append_new(arr, json_pack("{s:s}", "episode", episodes[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return s_dump(arr ? json_pack("{s:s, s:o}", "op", "close", "items", arr) : NULL);
}

// ---- replies ---------------------------------------------------------------------------------

// The reply's object; refuses what is not JSON, an environment's "error", and (items) a count
// other than n. *items_p gets the items array (borrowed from the returned object).
static json_t *s_open(const char *text, size_t len, int n, json_t **items_p, char *err,
                      size_t err_len) {
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        rl_errf(err, err_len, RL_EINVAL, "the reply is not JSON (column %d: %s)", je.column,
                je.text);
        return NULL;
    }
    if (!json_is_object(o)) {
        rl_errf(err, err_len, RL_EINVAL, "the reply is not a JSON object");
        json_decref(o);
        return NULL;
    }
    json_t *e = json_object_get(o, "error");
    if (e) {
        rl_errf(err, err_len, RL_EINVAL, "the environment says: %.400s",
                json_is_string(e) ? json_string_value(e) : "(an error that is not a string)");
        json_decref(o);
        return NULL;
    }
    if (items_p) {
        json_t *items = json_object_get(o, "items");
        if (!json_is_array(items) || json_array_size(items) != (size_t)n) {
            rl_errf(err, err_len, RL_EINVAL, "the reply has %s%zu items for %d episodes",
                    json_is_array(items) ? "" : "no 'items' array: ",
                    json_is_array(items) ? json_array_size(items) : (size_t)0, n);
            json_decref(o);
            return NULL;
        }
        *items_p = items;
    }
    return o;
}

// "item K (episode <id>): " into err, then the rest
static int s_item_err(char *err, size_t err_len, int k, const char *const *episodes,
                      const char *what) {
    return rl_errf(err, err_len, RL_EINVAL, "item %d (episode %.80s): %s", k,
                   episodes && episodes[k] ? episodes[k] : "?", what);
}

// A message an environment sends: an object with a role among `roles` ("|"-separated), a
// string content, and for a tool message a string tool_call_id. Returns 0 or fills why.
static int s_message(json_t *m, const char *roles, char *why, size_t why_len) {
    json_t *role = json_object_get(m, "role");
    if (!json_is_object(m)) {
        snprintf(why, why_len, "a message that is not an object");
        return -1;
    }
    const char *r = json_is_string(role) ? json_string_value(role) : NULL;
    int ok = 0;
    for (const char *p = roles; r && *p && !ok;) {
        size_t k = strcspn(p, "|");
        ok = strlen(r) == k && strncmp(r, p, k) == 0;
        p += k + (p[k] == '|');
    }
    if (!ok) {
        snprintf(why, why_len, "role %s%.40s%s: an environment's messages are %s", r ? "'" : "",
                 r ? r : "missing or not a string", r ? "'" : "", roles);
        return -1;
    }
    if (!json_is_string(json_object_get(m, "content"))) {
        snprintf(why, why_len, "a %s message's content must be a string", r);
        return -1;
    }
    if (strcmp(r, "tool") == 0 && !json_is_string(json_object_get(m, "tool_call_id"))) {
        snprintf(why, why_len, "a tool message needs a string tool_call_id");
        return -1;
    }
    return 0;
}

static int s_messages(json_t *arr, const char *roles, int nonempty, char *why, size_t why_len) {
    if (!json_is_array(arr)) {
        snprintf(why, why_len, "'messages' must be an array");
        return -1;
    }
    if (nonempty && json_array_size(arr) == 0) {
        snprintf(why, why_len, "'messages' must not be empty");
        return -1;
    }
    size_t i;
    json_t *m;
    json_array_foreach(arr, i, m) {
        char inner[300];
        if (s_message(m, roles, inner, sizeof inner) != 0) {
            snprintf(why, why_len, "messages[%zu]: %s", i, inner);
            return -1;
        }
    }
    return 0;
}

// tools: absent or null, or an array of {"type": "function", "function": {"name": string, ...}}
static int s_tools(json_t *t, char *why, size_t why_len) {
    if (!t || json_is_null(t)) {
        return 0;
    }
    if (!json_is_array(t)) {
        snprintf(why, why_len, "'tools' must be an array of function schemas");
        return -1;
    }
    size_t i;
    json_t *x;
    json_array_foreach(t, i, x) {
        json_t *type = json_object_get(x, "type"), *fn = json_object_get(x, "function");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0 ||
            !json_is_object(fn) || !json_is_string(json_object_get(fn, "name"))) {
            snprintf(
                why, why_len,
                "tools[%zu]: a tool is {\"type\": \"function\", \"function\": {\"name\": ...}}", i);
            return -1;
        }
    }
    return 0;
}

// An item's error: strict (bad NULL), the reply's; tolerant, the item is marked bad and the
// first one's message kept in err. Returns what the loop's rc becomes.
static int s_item_bad(int *bad, int *n_bad, char *err, size_t err_len, int k,
                      const char *const *episodes, const char *why) {
    if (!bad) {
        return s_item_err(err, err_len, k, episodes, why);
    }
    if ((*n_bad)++ == 0) {
        s_item_err(err, err_len, k, episodes, why);
    }
    bad[k] = 1;
    return 0;
}

// One reply item k: NULL when it is right (out[k] filled), else what is wrong (in why, or a
// constant).
typedef const char *(*s_item_fn)(json_t *it, void *out, int k, char *why, size_t why_len);

static const char *s_reset_item(json_t *it, void *out, int k, char *why, size_t why_len) {
    rl_env_reset_reply_t *r = (rl_env_reset_reply_t *)out + k;
    json_t *msgs = json_object_get(it, "messages"), *tools = json_object_get(it, "tools");
    if (!json_is_object(it)) {
        return "not an object";
    }
    if (s_messages(msgs, "system|user|assistant|tool", 1, why, why_len) != 0 ||
        s_tools(tools, why, why_len) != 0) {
        return why;
    }
    r->messages = json_incref(msgs);
    r->tools = tools && !json_is_null(tools) ? json_incref(tools) : NULL;
    return NULL;
}

static const char *s_step_item(json_t *it, void *out, int k, char *why, size_t why_len) {
    rl_env_step_reply_t *r = (rl_env_step_reply_t *)out + k;
    json_t *msgs = json_object_get(it, "messages"), *reward = json_object_get(it, "reward");
    json_t *done = json_object_get(it, "done");
    if (!json_is_object(it)) {
        return "not an object";
    }
    if (s_messages(msgs, "user|tool|system", 0, why, why_len) != 0) {
        return why;
    }
    if (reward && !json_is_null(reward) &&
        !(json_is_number(reward) && isfinite(json_number_value(reward)))) {
        return "'reward' must be a finite number";
    }
    if (!json_is_boolean(done)) {
        return "'done' must be true or false";
    }
    r->messages = json_incref(msgs);
    r->reward = reward && !json_is_null(reward) ? json_number_value(reward) : 0.0;
    r->done = json_is_true(done);
    return NULL;
}

// The reply of a request of n items, each decoded by fn into out (zeroed first, size bytes an
// item); strict (bad NULL) or tolerant as rl_env_reply_*_items say. On a strict error what was
// decoded is freed with free_fn.
static int s_decode(const char *text, size_t len, int n, const char *const *episodes, void *out,
                    size_t size, int *bad, s_item_fn fn, void (*free_fn)(void *, int), char *err,
                    size_t err_len) {
    memset(out, 0, (size_t)n * size);
    int n_bad = 0;
    if (bad) {
        memset(bad, 0, (size_t)n * sizeof *bad);
    }
    json_t *items = NULL;
    json_t *o = s_open(text, len, n, &items, err, err_len);
    if (!o) {
        return RL_EINVAL;
    }
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        char why[400];
        json_t *it = json_array_get(items, (size_t)k), *ie = json_object_get(it, "error");
        const char *wrong = why;
        if (ie) { // this item failed (the environment's word, or a worker's failure: rl_env_host)
            snprintf(why, sizeof why, "the environment says: %.300s",
                     json_is_string(ie) ? json_string_value(ie)
                                        : "(an error that is not a string)");
        } else {
            wrong = fn(it, out, k, why, sizeof why);
        }
        if (wrong) {
            rc = s_item_bad(bad, &n_bad, err, err_len, k, episodes, wrong);
        }
    }
    json_decref(o);
    if (rc != 0) {
        free_fn(out, n);
    }
    return rc;
}

static void s_free_reset(void *r, int n) {
    rl_env_reset_reply_free(r, n);
}

static void s_free_step(void *r, int n) {
    rl_env_step_reply_free(r, n);
}

int rl_env_reply_reset(const char *text, size_t len, int n, const char *const *episodes,
                       rl_env_reset_reply_t *out, char *err, size_t err_len) {
    return rl_env_reply_reset_items(text, len, n, episodes, out, NULL, err, err_len);
}

int rl_env_reply_reset_items(const char *text, size_t len, int n, const char *const *episodes,
                             rl_env_reset_reply_t *out, int *bad, char *err, size_t err_len) {
    return s_decode(text, len, n, episodes, out, sizeof *out, bad, s_reset_item, s_free_reset, err,
                    err_len);
}

int rl_env_reply_step(const char *text, size_t len, int n, const char *const *episodes,
                      rl_env_step_reply_t *out, char *err, size_t err_len) {
    return rl_env_reply_step_items(text, len, n, episodes, out, NULL, err, err_len);
}

int rl_env_reply_step_items(const char *text, size_t len, int n, const char *const *episodes,
                            rl_env_step_reply_t *out, int *bad, char *err, size_t err_len) {
    return s_decode(text, len, n, episodes, out, sizeof *out, bad, s_step_item, s_free_step, err,
                    err_len);
}

int rl_env_reply_close(const char *text, size_t len, char *err, size_t err_len) {
    json_t *o = s_open(text, len, 0, NULL, err, err_len);
    json_decref(o);
    return o ? 0 : RL_EINVAL;
}

void rl_env_reset_reply_free(rl_env_reset_reply_t *r, int n) {
    for (int k = 0; r && k < n; k++) {
        json_decref(r[k].messages);
        json_decref(r[k].tools);
        r[k].messages = r[k].tools = NULL;
    }
}

void rl_env_step_reply_free(rl_env_step_reply_t *r, int n) {
    for (int k = 0; r && k < n; k++) {
        json_decref(r[k].messages);
        r[k].messages = NULL;
    }
}

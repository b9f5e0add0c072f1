// rl_env_calc — the built-in calc environment (rl_env_calc.h, docs/envs.md).
#include "rl_env_calc.h"

#include "rl_calc.h"
#include "rl_err.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The tool, exactly as docs/envs.md (and the issue that pinned it) write it.
static const char s_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"calc\",\"description\":\"Evaluate an integer "
    "arithmetic expression.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"expr\":{\"type"
    "\":\"string\",\"description\":\"digits, + - * and parentheses\"}},\"required\":[\"expr\"]}}}]";

#define S_BAD "error: bad call"

const char *rl_env_calc_tools(void) {
    return s_tools;
}

static int s_error(char **reply, const char *fmt, const char *what) {
    char msg[300];
    snprintf(msg, sizeof msg, fmt, what);
    json_t *o = json_pack("{s:s}", "error", msg);
    *reply = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return *reply ? 0 : RL_ENOMEM;
}

// The tool message's content for one call: the value, or S_BAD. out has room for the value.
static void s_call(json_t *call, char *out, size_t cap) {
    json_t *fn = json_object_get(call, "function");
    json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
    snprintf(out, cap, "%s", S_BAD);
    if (!json_is_string(name) || strcmp(json_string_value(name), "calc") != 0 ||
        !json_is_string(args)) {
        return;
    }
    json_t *a = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
    json_t *expr = json_object_get(a, "expr");
    if (json_is_object(a) && json_is_string(expr) &&
        rl_calc_eval(json_string_value(expr), json_string_length(expr), out, cap) != 0) {
        snprintf(out, cap, "%s", S_BAD);
    }
    json_decref(a);
}

static json_t *s_reset_item(json_t *item, const char **why) {
    json_t *prompt = json_object_get(json_object_get(item, "row"), "prompt");
    if (!json_is_string(prompt)) {
        *why = "the row has no string 'prompt'";
        return NULL;
    }
    json_t *tools = json_loads(s_tools, 0, NULL);
    return json_pack("{s:[{s:s, s:O}], s:o}", "messages", "role", "user", "content", prompt,
                     "tools", tools);
}

static json_t *s_step_item(json_t *item, char *value, size_t cap, const char **why) {
    json_t *msg = json_object_get(item, "message");
    if (!json_is_object(msg)) {
        *why = "an item without its 'message'";
        return NULL;
    }
    json_t *calls = json_object_get(msg, "tool_calls");
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        s_call(c, value, cap);
        json_t *id = json_object_get(c, "id");
        json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id",
                                             json_is_string(id) ? json_string_value(id) : "",
                                             "content", value));
    }
    int done = json_array_size(calls) == 0;
    return json_pack("{s:o, s:i, s:b}", "messages", out, "reward", 0, "done", done);
}

int rl_env_calc_answer(const char *request, size_t len, char **reply) {
    *reply = NULL;
    json_t *req = json_loadb(request, len, 0, NULL);
    json_t *op = json_object_get(req, "op"), *items = json_object_get(req, "items");
    const char *o = json_is_string(op) ? json_string_value(op) : "";
    int rc;
    if (!json_is_array(items) ||
        (strcmp(o, "reset") != 0 && strcmp(o, "step") != 0 && strcmp(o, "close") != 0)) {
        rc = s_error(reply, "calc: not a request (%s)", "op reset, step or close, and items");
    } else if (strcmp(o, "close") == 0) {
        *reply = strdup("{}");
        rc = *reply ? 0 : RL_ENOMEM;
    } else {
        json_t *outs = json_array();
        char *value = malloc(RL_CALC_MAX_DIGITS + 2);
        const char *why = value ? NULL : "out of memory";
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            if (why) {
                break;
            }
            json_t *x = strcmp(o, "reset") == 0
                            ? s_reset_item(it, &why)
                            : s_step_item(it, value, RL_CALC_MAX_DIGITS + 2, &why);
            if (!x) {
                break;
            }
            json_array_append_new(outs, x);
        }
        if (why) {
            rc = s_error(reply, "calc: %s", why);
        } else {
            json_t *r = json_pack("{s:O}", "items", outs);
            *reply = r ? json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            json_decref(r);
            rc = *reply ? 0 : RL_ENOMEM;
        }
        json_decref(outs);
        free(value);
    }
    json_decref(req);
    return rc;
}

// ---- as a table of the environment ABI (rlctl/env.h) -----------------------------------------

static int s_tbl_create(const char *config_json, void **state, char *err, size_t err_len) {
    (void)config_json;
    (void)err;
    (void)err_len;
    *state = NULL; // stateless
    return 0;
}

static int s_tbl_answer(void *state, const char *request, size_t len, char **reply,
                        size_t *reply_len, char *err, size_t err_len) {
    (void)state;
    if (rl_env_calc_answer(request, len, reply) != 0) {
        snprintf(err, err_len, "out of memory");
        return 1;
    }
    *reply_len = strlen(*reply);
    return 0;
}

static void s_tbl_free_reply(void *state, char *reply) {
    (void)state;
    free(reply);
}

static void s_tbl_destroy(void *state) {
    (void)state;
}

static const rl_env_table_t s_table = {
    .abi_version = RL_ENV_ABI_VERSION,
    .struct_size = sizeof(rl_env_table_t),
    .name = "calc",
    .create = s_tbl_create,
    .answer = s_tbl_answer,
    .free_reply = s_tbl_free_reply,
    .destroy = s_tbl_destroy,
};

const rl_env_table_t *rl_env_calc_table(void) {
    return &s_table;
}

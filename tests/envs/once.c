// A test environment plugin (include/rlctl/env.h): reset gives the row's prompt (a message list,
// or a string as the user's message), step says done at once (an episode of one turn, as
// tests/env_test.py's `once`). config {"crash": true}: step crashes the worker (SIGSEGV).
#include "rlctl/env.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int crash;
} s_state_t;

static int s_create(const char *config_json, void **state, char *err, size_t err_len) {
    json_t *c = json_loads(config_json, 0, NULL);
    if (!json_is_object(c)) {
        json_decref(c);
        snprintf(err, err_len, "config is not a map");
        return 1;
    }
    s_state_t *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(c);
        snprintf(err, err_len, "out of memory");
        return 1;
    }
    s->crash = json_is_true(json_object_get(c, "crash"));
    json_decref(c);
    *state = s;
    return 0;
}

static int s_answer(void *state, const char *request, size_t len, char **reply, size_t *reply_len,
                    char *err, size_t err_len) {
    s_state_t *s = state;
    json_t *q = json_loadb(request, len, 0, NULL);
    const char *op = json_string_value(json_object_get(q, "op"));
    json_t *items = json_object_get(q, "items"), *out = json_array(), *r;
    size_t i;
    json_t *it;
    if (op && strcmp(op, "step") == 0 && s->crash) {
        raise(SIGSEGV);
    }
    if (op && strcmp(op, "reset") == 0) {
        json_array_foreach(items, i, it) {
            json_t *p = json_object_get(json_object_get(it, "row"), "prompt");
            json_t *msgs = json_is_array(p)
                               ? json_incref(p)
                               : json_pack("[{s:s,s:O}]", "role", "user", "content", p);
            json_array_append_new(out, json_pack("{s:o}", "messages", msgs));
        }
        r = json_pack("{s:O}", "items", out);
    } else if (op && strcmp(op, "step") == 0) {
        json_array_foreach(items, i, it) {
            json_array_append_new(out, json_pack("{s:[],s:b}", "messages", "done", 1));
        }
        r = json_pack("{s:O}", "items", out);
    } else {
        r = json_object();
    }
    *reply = r ? json_dumps(r, JSON_COMPACT) : NULL;
    json_decref(r);
    json_decref(out);
    json_decref(q);
    if (!*reply) {
        snprintf(err, err_len, "out of memory");
        return 1;
    }
    *reply_len = strlen(*reply);
    return 0;
}

static void s_free_reply(void *state, char *reply) {
    (void)state;
    free(reply);
}

static void s_destroy(void *state) {
    free(state);
}

static const rl_env_table_t s_table = {
    .abi_version = RL_ENV_ABI_VERSION,
    .struct_size = sizeof(rl_env_table_t),
    .name = "once",
    .create = s_create,
    .answer = s_answer,
    .free_reply = s_free_reply,
    .destroy = s_destroy,
};

RL_ENV_EXPORT const rl_env_table_t *rl_env_entry(void) {
    return &s_table;
}

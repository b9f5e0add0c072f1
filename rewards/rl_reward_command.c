// rl_reward_command — a reward computed by a program over JSON lines: the reward's own part of
// it (its config, the request built and the reply decoded by rl_reward_json, its messages). The
// program itself — starting it, the exchange under a deadline, stopping it — is core/rl_child.
#include "rl_reward_command.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl_child.h"
#include "rl_err.h"
#include "rl_reward_json.h"

typedef struct {
    rl_child_t *child; // the program
    double limit;      // seconds one score() may wait for the reply; 0 = no limit
    char gone[512];    // why it cannot score any more ("" while it can)
} s_cmd_t;

// ---------------------------------------------------------------------------------------------
// the table

static void s_cmd_destroy(void *state) {
    s_cmd_t *c = state;
    if (!c) {
        return;
    }
    rl_child_stop(&c->child); // stdin closed, a second's grace, the group killed
    free(c);
}

static int s_cmd_create(const rl_reward_host_t *host, const char *config_json, void **state,
                        char *err, size_t err_len) {
    (void)host;
    json_error_t je;
    json_t *cfg = json_loads(config_json ? config_json : "{}", 0, &je);
    json_t *av = cfg ? json_object_get(cfg, "argv") : NULL;
    json_t *dl = cfg ? json_object_get(cfg, "deadline") : NULL;
    size_t argc = json_array_size(av);
    int ok = json_is_object(cfg) && json_is_array(av) && argc > 0 && (!dl || json_is_number(dl));
    for (size_t i = 0; ok && i < argc; i++) {
        ok = json_is_string(json_array_get(av, i)) &&
             strlen(json_string_value(json_array_get(av, i))) ==
                 json_string_length(json_array_get(av, i));
    }
    ok = ok && json_string_length(json_array_get(av, 0)) > 0;
    if (!ok) {
        json_decref(cfg);
        snprintf(err, err_len, "config: expected {\"argv\": [program, args...], \"deadline\": s}");
        return 1;
    }
    s_cmd_t *c = calloc(1, sizeof *c);
    char **argv = calloc(argc + 1, sizeof *argv);
    int rc = 1;
    if (!c || !argv) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    c->limit = dl ? json_number_value(dl) : 0;
    c->limit = isfinite(c->limit) && c->limit > 0 ? c->limit : 0;
    for (size_t i = 0; i < argc; i++) {
        argv[i] = (char *)json_string_value(json_array_get(av, i));
    }
    rc = rl_child_start(argv, "the reward command", "the reward worker's log", &c->child, err,
                        err_len);
done:
    free(argv);
    json_decref(cfg);
    if (rc) {
        s_cmd_destroy(c);
        return 1;
    }
    *state = c;
    return 0;
}

static int s_cmd_score(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                       size_t err_len) {
    s_cmd_t *c = state;
    if (c->gone[0]) {
        snprintf(err, err_len, "%s", c->gone);
        return 1;
    }
    char *req = NULL, *reply = NULL;
    size_t req_len = 0, reply_len = 0;
    if (rl_reward_json_request(items, n, RL_REWARD_JSON_RLCTL, NULL, &req, &req_len, err,
                               err_len) != 0) {
        return 1;
    }
    int rc = rl_child_call(c->child, req, req_len, c->limit, RL_REWARD_JSON_MAX_REPLY, &reply,
                           &reply_len, err, err_len);
    free(req);
    if (rc == RL_ETIMEOUT) { // the deadline is the reward's: say whose
        snprintf(err, err_len,
                 "the command gave no reply within %g s (the reward's deadline, just under "
                 "roles.reward_timeout) and was stopped",
                 c->limit);
    }
    if (rc != 0) {
        if (rl_child_gone(c->child)) { // stopped: every later batch says why
            snprintf(c->gone, sizeof c->gone, "%s", err);
        }
        return 1;
    }
    char perr[1024];
    int dr =
        rl_reward_json_reply(reply, reply_len, RL_REWARD_JSON_RLCTL, n, out, perr, sizeof perr);
    free(reply);
    if (dr == RL_EPLUGIN) {
        snprintf(err, err_len, "the command replied with an error: %s", perr);
        return 1;
    }
    if (dr != 0) {
        snprintf(err, err_len, "a bad reply from the command: %s", perr);
        return 1;
    }
    return 0;
}

static const rl_reward_table_t s_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "command",
    .create = s_cmd_create,
    .score = s_cmd_score,
    .destroy = s_cmd_destroy,
};

const rl_reward_table_t *rl_reward_command_table(void) {
    return &s_table;
}

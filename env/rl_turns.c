// rl_turns — the tokens of an episode's turns (rl_turns.h).
#include "rl_turns.h"

#include "rl_err.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

// {"messages": messages, "tools": tools?} rendered with the generation prompt.
static int s_render(rl_chat_format_t fmt, json_t *messages, const char *tools_json, char **text_p,
                    size_t *len_p, char *err, size_t err_len) {
    json_t *row = json_pack("{s:O}", "messages", messages);
    if (row && tools_json) {
        json_t *tools = json_loads(tools_json, 0, NULL);
        if (!json_is_array(tools)) {
            json_decref(tools);
            json_decref(row);
            return rl_errf(err, err_len, RL_EINVAL, "the tools are not a JSON array");
        }
        json_object_set_new(row, "tools", tools);
    }
    char *json = row ? json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(row);
    if (!json) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = rl_chat_render_json(fmt, json, strlen(json), 1, text_p, len_p, err, err_len);
    free(json);
    return rc;
}

static int s_encode(rl_tokenizer_t *tok, const char *text, size_t len, int32_t **ids_p, size_t *n_p,
                    char *err, size_t err_len) {
    int rc = rl_tokenizer_encode(tok, text, len, 0, ids_p, n_p);
    if (rc != 0) {
        return rl_errf(err, err_len, rc, "the turn's text does not encode (%s)",
                       rc == RL_EINVAL ? "not UTF-8" : "out of memory");
    }
    return 0;
}

int rl_turns_prompt(rl_chat_format_t fmt, rl_tokenizer_t *tok, const char *messages_json,
                    const char *tools_json, int32_t **ids_p, size_t *n_p, char *err,
                    size_t err_len) {
    *ids_p = NULL;
    *n_p = 0;
    json_t *msgs = json_loads(messages_json, 0, NULL);
    if (!json_is_array(msgs)) {
        json_decref(msgs);
        return rl_errf(err, err_len, RL_EINVAL, "the messages are not a JSON array");
    }
    char *text = NULL;
    size_t len = 0;
    int rc = s_render(fmt, msgs, tools_json, &text, &len, err, err_len);
    json_decref(msgs);
    if (rc == 0) {
        rc = s_encode(tok, text, len, ids_p, n_p, err, err_len);
    }
    free(text);
    return rc;
}

int rl_turns_after(rl_chat_format_t fmt, rl_tokenizer_t *tok, const char *history_json,
                   const char *env_json, const char *tools_json, const char *eos, int ended,
                   int32_t **ids_p, size_t *n_p, char **text_p, char *err, size_t err_len) {
    *ids_p = NULL;
    *n_p = 0;
    if (text_p) {
        *text_p = NULL;
    }
    json_t *hist = json_loads(history_json, 0, NULL);
    json_t *env = json_loads(env_json, 0, NULL);
    size_t nh = json_array_size(hist);
    json_t *last = nh ? json_array_get(hist, nh - 1) : NULL;
    json_t *role = json_object_get(last, "role");
    int rc = 0;
    if (!json_is_array(hist) || !json_is_array(env) || !json_is_string(role) ||
        strcmp(json_string_value(role), "assistant") != 0 || !eos || !eos[0]) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "a turn needs the conversation ending with the assistant's message, the "
                     "environment's messages and the end-of-turn token");
    }
    json_t *msgs = rc == 0 ? json_deep_copy(hist) : NULL;
    if (rc == 0 && (!msgs ||
                    json_object_set_new(json_array_get(msgs, nh - 1), "content",
                                        json_string(RL_TURNS_SENTINEL)) != 0 ||
                    json_array_extend(msgs, env) != 0)) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    char *text = NULL;
    size_t len = 0;
    if (rc == 0) {
        rc = s_render(fmt, msgs, tools_json, &text, &len, err, err_len);
    }
    const char *at = NULL, *end = NULL;
    if (rc == 0 && !(at = strstr(text, RL_TURNS_SENTINEL))) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "the chat template does not write the assistant's content as given, so "
                     "the text after the policy's turn cannot be found");
    }
    if (rc == 0 && !(end = strstr(at + strlen(RL_TURNS_SENTINEL), eos))) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "the chat template ends no assistant turn with the end-of-turn token %.40s",
                     eos);
    }
    if (rc == 0) {
        const char *from = end + (ended ? strlen(eos) : 0);
        size_t n = len - (size_t)(from - text);
        rc = s_encode(tok, from, n, ids_p, n_p, err, err_len);
        if (rc == 0 && text_p && !(*text_p = strndup(from, n))) {
            free(*ids_p);
            *ids_p = NULL;
            *n_p = 0;
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    free(text);
    json_decref(msgs);
    json_decref(hist);
    json_decref(env);
    return rc;
}

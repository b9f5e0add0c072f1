// format_bonus — an example reward plugin for the arith task (cookbook/data/arith): a bonus for
// completions that end in the answer format the task teaches, "#### <number>" with nothing
// after it but whitespace, e.g. "66*3=198;198+107=305 #### 305". It says nothing about whether
// the number is right (math_answer does that); paired with it at a small weight it rewards
// well-formed answers while the model is still learning the arithmetic.
//
// config: {"value": v}: the score of a well-formed completion (default 1.0); others score 0.
//
// Build (from the repository root; a recipe loads the .so by its path):
/*
     cc -shared -fPIC -O2 -I include -o cookbook/plugins/format_bonus.so \
         cookbook/plugins/format_bonus.c
*/
// Recipe entry (paths in a recipe resolve against the recipe's folder, here cookbook/):
//   rewards:
//     - {name: correct, builtin: math_answer}
//     - {name: format, plugin: plugins/format_bonus.so, weight: 0.1, config: {value: 1.0}}
// The ABI and the rules a plugin follows are in docs/rewards.md.
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlctl/reward.h"

typedef struct {
    double value; // score of a well-formed completion
} format_bonus_t;

// Reads the number of key "value" from the config's JSON text. The host serialises the recipe's
// `config:` map, so the text is a JSON object; a plugin with more settings would use a JSON
// library here. Returns 0 (leaving *out alone when the key is absent) or -1 when the value is
// not a number.
static int config_value(const char *json, double *out) {
    const char *k = strstr(json, "\"value\"");
    if (!k) {
        return 0;
    }
    k += strlen("\"value\"");
    while (isspace((unsigned char)*k)) {
        k++;
    }
    if (*k != ':') {
        return -1;
    }
    char *end;
    double v = strtod(k + 1, &end);
    if (end == k + 1) {
        return -1;
    }
    *out = v;
    return 0;
}

static int fb_create(const rl_reward_host_t *host, const char *config_json, void **state, char *err,
                     size_t err_len) {
    double value = 1.0;
    if (config_value(config_json, &value) != 0) {
        snprintf(err, err_len, "config: 'value' must be a number (config was %s)", config_json);
        return 1;
    }
    format_bonus_t *s = malloc(sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return 1;
    }
    s->value = value;
    host->log(host->ctx, RL_REWARD_LOG_INFO, "format_bonus: %g for a final '#### <number>'", value);
    *state = s;
    return 0;
}

// 1 when text[0..len) ends with "#### " + a number (an optional '-', digits with optional
// thousands commas, an optional decimal part) + only whitespace.
static int well_formed(const char *text, size_t len) {
    while (len > 0 && isspace((unsigned char)text[len - 1])) {
        len--; // trailing whitespace (a newline before the stop token) is allowed
    }
    size_t end = len, i = len;
    int dots = 0;
    while (i > 0 &&
           (isdigit((unsigned char)text[i - 1]) || text[i - 1] == ',' || text[i - 1] == '.')) {
        dots += text[i - 1] == '.';
        i--;
    }
    if (i == end || dots > 1 || !isdigit((unsigned char)text[i]) ||
        !isdigit((unsigned char)text[end - 1])) {
        return 0; // no number, or one that starts or ends with ',' / '.', or "1.2.3"
    }
    if (i > 0 && text[i - 1] == '-') {
        i--;
    }
    return i >= 5 && memcmp(text + i - 5, "#### ", 5) == 0;
}

static int fb_score(void *state, const rl_reward_item_t *items, size_t n, double *out, char *err,
                    size_t err_len) {
    (void)err;
    (void)err_len;
    const format_bonus_t *s = state;
    for (size_t i = 0; i < n; i++) {
        out[i] = well_formed(items[i].completion, items[i].completion_len) ? s->value : 0.0;
    }
    return 0;
}

static void fb_destroy(void *state) {
    free(state);
}

static const rl_reward_table_t format_bonus_table = {
    .abi_version = RL_REWARD_ABI_VERSION,
    .struct_size = sizeof(rl_reward_table_t),
    .name = "format_bonus",
    .create = fb_create,
    .score = fb_score,
    .destroy = fb_destroy,
};

RL_REWARD_EXPORT const rl_reward_table_t *rl_reward_entry(void) {
    return &format_bonus_table;
}

// fuzz_env — libFuzzer target for what an episode reads from outside: the policy's sampled text
// through the tool-call parsers (rl_toolcall: hermes, llama3_json), the calc tool's expressions
// (rl_calc), and an environment's replies to reset and step (rl_env_proto). Any input must give
// content and calls, or a value or a bad call, never a crash, a leak or a read past the input.
// Checked on the way: the content is never NULL and has no space or newline at its ends; every call
// has an id "call_<n>" numbered from first_id, a non-empty name and arguments that are a JSON
// object's text; a calc value is an optional '-' and digits, no more than the digit limit, with no
// leading zero and no "-0"; a decoded reply has n items whose messages are arrays and whose rewards
// are finite, or an error message.
//
// Input layout:
//   byte 0      0..63: hermes, 64..127: llama3_json, 128..191: calc, 192..223: a reset reply,
//               224..255: a step reply (both for (byte % 4) + 1 episodes)
//   the rest    the sampled text, the expression or the reply
#include "rl_calc.h"
#include "rl_env_proto.h"
#include "rl_err.h"
#include "rl_toolcall.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_check_value(const char *v) {
    const char *d = v[0] == '-' ? v + 1 : v;
    size_t n = strlen(d);
    if (n == 0 || n > RL_CALC_MAX_DIGITS || (n > 1 && d[0] == '0') ||
        (v[0] == '-' && strcmp(d, "0") == 0) || strspn(d, "0123456789") != n) {
        abort();
    }
}

static void s_check_parse(const rl_tool_parse_t *p) {
    if (!p->content) {
        abort();
    }
    size_t n = p->content_len;
    if (p->content[n] != '\0' ||
        (n > 0 && (memchr(" \n\t\r", p->content[0], 4) || memchr(" \n\t\r", p->content[n - 1], 4)))) {
        abort();
    }
    for (int k = 0; k < p->n_calls; k++) {
        char want[32];
        snprintf(want, sizeof want, "call_%d", 5 + k);
        json_t *a = json_loads(p->calls[k].arguments, 0, NULL);
        if (strcmp(p->calls[k].id, want) != 0 || !p->calls[k].name[0] || !json_is_object(a)) {
            abort();
        }
        json_decref(a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] >= 192) {
        static const char *const eps[4] = {"e0", "e1", "e2", "e3"};
        int n = data[0] % 4 + 1, tolerant = (data[0] >> 2) & 1, bad[4] = {0};
        char err[512] = "";
        if (data[0] < 224) {
            rl_env_reset_reply_t r[4];
            if (rl_env_reply_reset_items(text, len, n, eps, r, tolerant ? bad : NULL, err,
                                         sizeof err) == 0) {
                for (int k = 0; k < n; k++) {
                    if (bad[k]) { // a tolerant decode's bad item: empty, and said why
                        if (r[k].messages || r[k].tools || !err[0]) {
                            abort();
                        }
                        continue;
                    }
                    if (!json_is_array(r[k].messages) || json_array_size(r[k].messages) == 0 ||
                        (r[k].tools && !json_is_array(r[k].tools))) {
                        abort();
                    }
                }
                rl_env_reset_reply_free(r, n);
            } else if (!err[0]) {
                abort();
            }
        } else {
            rl_env_step_reply_t r[4];
            if (rl_env_reply_step_items(text, len, n, eps, r, tolerant ? bad : NULL, err,
                                        sizeof err) == 0) {
                for (int k = 0; k < n; k++) {
                    if (bad[k]) {
                        if (r[k].messages || !err[0]) {
                            abort();
                        }
                        continue;
                    }
                    if (!json_is_array(r[k].messages) || !isfinite(r[k].reward) ||
                        (r[k].done != 0 && r[k].done != 1)) {
                        abort();
                    }
                }
                rl_env_step_reply_free(r, n);
            } else if (!err[0]) {
                abort();
            }
        }
        return 0;
    }
    if (data[0] >= 128) {
        static char out[RL_CALC_MAX_DIGITS + 2];
        int rc = rl_calc_eval(text, len, out, sizeof out);
        if (rc == 0) {
            s_check_value(out);
        } else if (rc != RL_EINVAL || out[0] != '\0') {
            abort();
        }
        return 0;
    }
    rl_tool_parse_t p;
    rl_tool_parser_t which = data[0] < 64 ? RL_TOOL_PARSER_HERMES : RL_TOOL_PARSER_LLAMA3_JSON;
    if (rl_tool_parse(which, text, len, 5, &p) == 0) {
        s_check_parse(&p);
        rl_tool_parse_free(&p);
    }
    return 0;
}

// fuzz_jinja — libFuzzer target for rl_jinja: arbitrary bytes as a chat template (it comes from a
// model folder: untrusted), compiled and rendered twice against a small fixed conversation with
// tight limits. Seeds in fuzz/corpus/jinja/ are small hand-written templates in the style of
// real chat templates (ChatML and Llama headers, tools, namespaces, macros, whitespace control).
// Invariants checked (abort on violation):
//   - compile and render return 0, RL_EINVAL, RL_EUNSUPPORTED or RL_ENOMEM, and a failure always
//     says why, naming the template ("fuzz: ..." or "fuzz:<line>:<col>: ...");
//   - a render's text is NUL-terminated at out_len, valid UTF-8, and no longer than the limit;
//   - rendering is deterministic: the second render gives the same result byte for byte.
#include "rl_err.h"
#include "rl_jinja.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char s_ctx[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \" Be brief. \"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9\\u4e16 {{ x }}\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\nYo\","
    "  \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
    "  \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
    " \"add_generation_prompt\": true, \"enable_thinking\": false,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static int s_valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (!k || i + k > n) {
            return 0;
        }
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += k;
    }
    return 1;
}

static void s_check_rc(int rc, const char *err, const char *what) {
    if (rc != 0 && rc != RL_EINVAL && rc != RL_EUNSUPPORTED && rc != RL_ENOMEM) {
        fprintf(stderr, "fuzz_jinja: %s returned %d: %s\n", what, rc, err);
        abort();
    }
    if (rc != 0 && strncmp(err, "fuzz:", 5) != 0) {
        fprintf(stderr, "fuzz_jinja: %s failed without a message naming the template: '%s'\n", what,
                err);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *ctx;
    if (!ctx) {
        ctx = json_loads(s_ctx, 0, NULL);
        if (!ctx) {
            abort();
        }
    }
    char err[512] = "";
    rl_jinja_t *t = NULL;
    int rc = rl_jinja_compile((const char *)data, size, "fuzz", &t, err, sizeof(err));
    s_check_rc(rc, err, "compile");
    if (rc != 0) {
        return 0;
    }
    rl_jinja_opts_t o = {.max_output = 1 << 20,
                         .max_memory = 64 << 20,
                         .max_steps = 200000,
                         .max_depth = 200,
                         .fixed_now = 1,
                         .now = 1721995200};
    char *out[2] = {NULL, NULL};
    size_t len[2] = {0, 0};
    int rcs[2];
    char errs[2][512];
    for (int i = 0; i < 2; i++) {
        errs[i][0] = '\0';
        rcs[i] = rl_jinja_render_opts(t, ctx, &o, &out[i], &len[i], errs[i], sizeof(errs[i]));
        s_check_rc(rcs[i], errs[i], "render");
        if (rcs[i] == 0) {
            if (!out[i] || out[i][len[i]] != '\0' || len[i] > o.max_output ||
                !s_valid_utf8((const unsigned char *)out[i], len[i])) {
                fprintf(stderr, "fuzz_jinja: bad render text (%zu bytes)\n", len[i]);
                abort();
            }
        } else if (out[i]) {
            abort();
        }
    }
    if (rcs[0] != rcs[1] || len[0] != len[1] ||
        (rcs[0] == 0 && memcmp(out[0], out[1], len[0]) != 0) ||
        (rcs[0] != 0 && strcmp(errs[0], errs[1]) != 0)) {
        fprintf(stderr, "fuzz_jinja: two renders differ: rc %d/%d: %s / %s\n", rcs[0], rcs[1],
                errs[0], errs[1]);
        abort();
    }
    free(out[0]);
    free(out[1]);
    rl_jinja_free(&t);
    return 0;
}

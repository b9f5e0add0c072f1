// fuzz_http — libFuzzer on the OpenAI-compatible completions endpoint's request handling
// (rl_http_complete: the JSON body, its fields, prompts through the tokenizer, stop strings,
// logprobs) against cookbook/models/arith-base. Every input must give a status of 200, 400 or
// 500 and a JSON body, never a crash. Requests whose work is large (prompts x n x max_tokens over
// 2048 tokens) are valid but slow, and are skipped so that each input stays fast. Seeds in
// fuzz/corpus/http/.
#include "rl_http.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rl_model_t *s_model;
static rl_tokenizer_t *s_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char err[1024];
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = 1;
    s_model = rl_model_load(RL_SOURCE_DIR "/cookbook/models/arith-base", &mo, err, sizeof err);
    s_tok = s_model
                ? rl_tokenizer_new_dir(RL_SOURCE_DIR "/cookbook/models/arith-base", err, sizeof err)
                : NULL;
    if (!s_tok) {
        fprintf(stderr, "fuzz_http: %s\n", err);
        abort();
    }
    return 0;
}

// 1 when the request asks for a lot of generation (skipped: valid, only slow).
static int s_big(const uint8_t *data, size_t size) {
    json_t *o = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return 0;
    }
    json_t *p = json_object_get(o, "prompt"), *n = json_object_get(o, "n"),
           *m = json_object_get(o, "max_tokens");
    double np = json_is_array(p) ? (double)json_array_size(p) : 1;
    double nn = json_is_integer(n) ? (double)json_integer_value(n) : 1;
    double mt = json_is_integer(m) ? (double)json_integer_value(m) : 16;
    json_decref(o);
    return np * (nn > 1 ? nn : 1) * (mt > 1 ? mt : 1) > 2048;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (s_big(data, size)) {
        return 0;
    }
    int status = 0;
    char *body = NULL;
    rl_http_complete(s_model, s_tok, "fuzz", (const char *)data, size, &status, &body);
    if (status != 200 && status != 400 && status != 500) {
        fprintf(stderr, "fuzz_http: status %d\n", status);
        abort();
    }
    json_t *o = body ? json_loads(body, 0, NULL) : NULL;
    if (!o) {
        fprintf(stderr, "fuzz_http: the body is not JSON: %s\n", body ? body : "(null)");
        abort();
    }
    json_decref(o);
    free(body);
    return 0;
}

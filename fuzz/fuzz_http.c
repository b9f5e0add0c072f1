// fuzz_http — libFuzzer on the OpenAI-compatible endpoint's request handling (rl_http_complete:
// the JSON body, its fields, prompts through the tokenizer, stop strings, logprobs; and, for an
// input whose first byte is 0x01, rl_http_chat on the rest: messages and tools through the
// chatml template, the chat fields, tool calls read back, streaming) against
// cookbook/models/arith-base. Every input must give a status of 200, 400 or 500 and a JSON body
// (server-sent events ending in [DONE] for a streamed chat), never a crash. The work cap is 2048
// tokens, so that each input stays fast (a request over it is a 400, which the fuzzer explores
// too). Seeds in fuzz/corpus/http/.
#include "rl_chat.h"
#include "rl_http.h"
#include "rl_toolcall.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_WORK 2048 // the work cap of every request (rl_http_call_t.max_work)

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int status = 0;
    char *body = NULL;
    rl_http_call_t call = {S_WORK, NULL, NULL};
    int sse = 0;
    if (size > 0 && data[0] == 0x01) {
        rl_http_chat_t chat = {rl_chat_builtin_text("chatml"), "chatml", RL_TOOL_PARSER_HERMES};
        rl_http_chat(s_model, s_tok, &chat, "fuzz", &call, (const char *)data + 1, size - 1,
                     &status, &body, &sse);
    } else {
        rl_http_complete(s_model, s_tok, "fuzz", &call, (const char *)data, size, &status, &body);
    }
    if (sse) {
        size_t n = body ? strlen(body) : 0;
        if (status != 200 || n < 20 || strncmp(body, "data: {", 7) != 0 ||
            strcmp(body + n - 14, "data: [DONE]\n\n") != 0) {
            fprintf(stderr, "fuzz_http: bad events: %s\n", body ? body : "(null)");
            abort();
        }
        free(body);
        return 0;
    }
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

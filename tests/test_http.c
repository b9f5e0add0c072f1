// tests for serving/rl_http's completions request (rl_http_complete), without HTTP, on
// cookbook/models/arith-base: a reply never leaves a value out (a model whose logits are NaN
// gives a 500 naming the choice and token, where jansson used to drop every logprob from a 200;
// a temperature whose logits / T overflow a float is a 400 naming it), the work cap (n x the sum
// of prompt tokens + max_tokens: the bound itself is accepted, one more is a 400 naming the
// fields and the cap, before or after tokenizing), and a cancel callback (status 499 at the step
// it says so; the next request is served as before). The server around it (threads, deadlines,
// per-client limits) is roles.http_limits. And the chat completions request (rl_http_chat): no
// template is a 400 naming the cure; greedy content and token ids equal the completion of the
// chatml-rendered prompt; a stream is server-sent events ending in [DONE]; keyword arguments the
// template does not use, and a completion's own refusal, are 400s naming the field. The client's
// view of it is roles.http_chat.
#include "rl_chat.h"
#include "rl_err.h"
#include "rl_http.h"
#include "rl_test.h"
#include "rl_toolcall.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MODEL RL_SOURCE_DIR "/cookbook/models/arith-base"

static rl_model_t *s_model;
static rl_tokenizer_t *s_tok;

// One request: its status; *reply_p the parsed body (caller owns; json_decref).
static int s_ask(const rl_http_call_t *call, const char *req, json_t **reply_p) {
    int status = 0;
    char *body = NULL;
    CHECK_INT(rl_http_complete(s_model, s_tok, "arith", call, req, strlen(req), &status, &body), 0);
    json_t *o = body ? json_loads(body, 0, NULL) : NULL;
    CHECK_MSG(o != NULL, "the reply to %s is not JSON: %s", req, body ? body : "(null)");
    free(body);
    if (reply_p) {
        *reply_p = o;
    } else {
        json_decref(o);
    }
    return status;
}

static const char *s_message(json_t *o) {
    const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
    return m ? m : "";
}

static const char *s_param(json_t *o) {
    const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "param"));
    return m ? m : "";
}

// ---- the work cap

static void s_test_work(void) {
    // "47*3+512=" is 9 tokens; 2 prompts x n 3 x (9 + max_tokens 11) = 120
    const char *req = "{\"prompt\": [\"47*3+512=\", \"12*3+100=\"], \"n\": 3, \"max_tokens\": 11,"
                      " \"temperature\": 0}";
    rl_http_call_t call = {120, NULL, NULL};
    json_t *o = NULL;
    int st = s_ask(&call, req, &o);
    CHECK_MSG(st == 200, "work 120 under a cap of 120: %d %s", st, s_message(o));
    CHECK_INT(json_array_size(json_object_get(o, "choices")), 6);
    json_decref(o);
    call.max_work = 119; // after tokenizing: the prompts' 18 tokens count
    st = s_ask(&call, req, &o);
    CHECK_MSG(st == 400 && !strcmp(s_param(o), "max_tokens") &&
                  strstr(s_message(o), "120 tokens of work") &&
                  strstr(s_message(o), "n 3 x (18 prompt tokens + 2 prompts x max_tokens 11)") &&
                  strstr(s_message(o), "at most 119") && strstr(s_message(o), "--http-max-work"),
              "work 120 over a cap of 119: %d %s", st, s_message(o));
    json_decref(o);
    call.max_work = 71; // before tokenizing: 2 x 3 x (11 + at least 1) = 72
    st = s_ask(&call, req, &o);
    CHECK_MSG(st == 400 && strstr(s_message(o), "at least 72 tokens of work") &&
                  strstr(s_message(o), "2 prompts x n 3 x (max_tokens 11 + at least 1 prompt "
                                       "token)"),
              "work >= 72 over a cap of 71: %d %s", st, s_message(o));
    json_decref(o);
    // the default cap (RL_HTTP_MAX_WORK): the review's 256 prompts x n 64 x max_tokens 16
    char *big = malloc(256 * 16 + 100);
    size_t k = (size_t)sprintf(big, "{\"prompt\": [");
    for (int i = 0; i < 256; i++) {
        k += (size_t)sprintf(big + k, "%s\"47*3+512=\"", i ? "," : "");
    }
    sprintf(big + k, "], \"n\": 64, \"max_tokens\": 16}");
    st = s_ask(NULL, big, &o);
    CHECK_MSG(st == 400 && strstr(s_message(o), "at most 65536"), "256 x 64 x 16: %d %s", st,
              s_message(o));
    json_decref(o);
    free(big);
}

// ---- cancel

static int s_calls, s_cancel_at;
static int s_cancel(void *arg) {
    (void)arg;
    return ++s_calls > s_cancel_at;
}

static void s_test_cancel(void) {
    const char *req = "{\"prompt\": [\"47*3+512=\", \"12*3+100=\"], \"n\": 4, \"max_tokens\": 30,"
                      " \"temperature\": 1, \"seed\": 5, \"logprobs\": 1}";
    json_t *want = NULL, *o = NULL;
    CHECK_INT(s_ask(NULL, req, &want), 200);
    // a callback that never cancels: the same reply (the id and time aside)
    rl_http_call_t call = {0, s_cancel, NULL};
    s_calls = 0;
    s_cancel_at = 1 << 30;
    CHECK_INT(s_ask(&call, req, &o), 200);
    CHECK_MSG(s_calls > 5, "asked %d times", s_calls);
    CHECK(json_equal(json_object_get(o, "choices"), json_object_get(want, "choices")));
    json_decref(o);
    // cancelled at the 3rd model step; then between the logprobs of the last choices (the
    // callback is asked before every model step and before each choice's logprobs)
    const int ats[2] = {2, s_calls - 2};
    for (int i = 0; i < 2; i++) {
        int at = ats[i];
        s_calls = 0;
        s_cancel_at = at;
        int st = s_ask(&call, req, &o);
        CHECK_MSG(st == 499 && strstr(s_message(o), i ? "before the logprobs of choice 6"
                                                      : "cancelled by the caller after 2 model"),
                  "cancel at %d: %d %s", at, st, s_message(o));
        json_decref(o);
    }
    CHECK_INT(s_ask(NULL, req, &o), 200);
    CHECK(json_equal(json_object_get(o, "choices"), json_object_get(want, "choices")));
    json_decref(o);
    json_decref(want);
}

// ---- values never left out

static void s_test_values(void) {
    json_t *o = NULL;
    // logits / 1e-40 overflow a float: refused, naming the field (it used to be a 200 whose
    // token_logprobs were empty)
    int st =
        s_ask(NULL, "{\"prompt\": \"47*3+512=\", \"temperature\": 1e-40, \"logprobs\": 0}", &o);
    CHECK_MSG(st == 400 && !strcmp(s_param(o), "temperature"), "temperature 1e-40: %d %s", st,
              s_message(o));
    json_decref(o);
    st = s_ask(NULL, "{\"prompt\": \"47*3+512=\", \"temperature\": 1e-6, \"logprobs\": 2}", &o);
    CHECK_MSG(st == 200, "temperature 1e-6: %d %s", st, s_message(o));
    json_decref(o);
    // a model whose final norm is NaN: every logit is NaN
    const rl_hf_config_t *cfg = rl_model_config(s_model);
    float *norm = rl_model_params(s_model)->norm;
    float *keep = malloc((size_t)cfg->hidden_size * sizeof *keep);
    memcpy(keep, norm, (size_t)cfg->hidden_size * sizeof *keep);
    for (int i = 0; i < cfg->hidden_size; i++) {
        norm[i] = NAN;
    }
    const char *reqs[] = {
        "{\"prompt\": \"47*3+512=\", \"max_tokens\": 5, \"temperature\": 0, \"logprobs\": 0}",
        "{\"prompt\": \"47*3+512=\", \"max_tokens\": 5, \"temperature\": 0.7, \"logprobs\": 3}",
    };
    for (int r = 0; r < 2; r++) {
        st = s_ask(NULL, reqs[r], &o);
        CHECK_MSG(st == 500 && strstr(s_message(o), "choice 0, token 0") &&
                      strstr(s_message(o), "nan") && strstr(s_message(o), "not a finite"),
                  "a NaN model, %s: %d %s", reqs[r], st, s_message(o));
        json_decref(o);
    }
    // no logprobs asked: nothing to leave out
    st = s_ask(NULL, "{\"prompt\": \"47*3+512=\", \"max_tokens\": 5, \"temperature\": 0}", &o);
    CHECK_MSG(st == 200, "a NaN model without logprobs: %d %s", st, s_message(o));
    json_decref(o);
    memcpy(norm, keep, (size_t)cfg->hidden_size * sizeof *keep);
    free(keep);
    // restored: every logprob is there
    st = s_ask(NULL, reqs[1], &o);
    json_t *lp = json_object_get(json_array_get(json_object_get(o, "choices"), 0), "logprobs");
    size_t n = json_array_size(json_object_get(lp, "tokens"));
    CHECK_MSG(st == 200 && n > 0 && json_array_size(json_object_get(lp, "token_logprobs")) == n &&
                  json_array_size(json_object_get(lp, "top_logprobs")) == n,
              "restored: %d, %zu tokens", st, n);
    json_decref(o);
}

// ---- chat completions

static int s_chat(const rl_http_chat_t *chat, const char *req, json_t **reply_p, int *sse) {
    int status = 0;
    char *body = NULL;
    CHECK_INT(
        rl_http_chat(s_model, s_tok, chat, "arith", NULL, req, strlen(req), &status, &body, sse),
        0);
    if (*sse) {
        size_t n = body ? strlen(body) : 0;
        CHECK_MSG(n > 20 && !strncmp(body, "data: {", 7) &&
                      !strcmp(body + n - 14, "data: [DONE]\n\n"),
                  "events: %s", body ? body : "(null)");
        *reply_p = NULL;
    } else {
        *reply_p = body ? json_loads(body, 0, NULL) : NULL;
        CHECK_MSG(*reply_p != NULL, "the reply to %s is not JSON: %s", req, body ? body : "(null)");
    }
    free(body);
    return status;
}

static void s_test_chat(void) {
    rl_http_chat_t none = {NULL, NULL, RL_TOOL_PARSER_HERMES};
    rl_http_chat_t chatml = {rl_chat_builtin_text("chatml"), "chatml", RL_TOOL_PARSER_HERMES};
    const char *req = "{\"messages\": [{\"role\": \"user\", \"content\": \"12+30=\"}], "
                      "\"max_tokens\": 8, \"temperature\": 0, \"return_token_ids\": true}";
    json_t *o = NULL;
    int sse = 0;
    CHECK_INT(s_chat(&none, req, &o, &sse), 400);
    CHECK_CONTAINS(s_message(o), "--chat-template chatml|llama3");
    json_decref(o);
    CHECK_INT(s_chat(&chatml, req, &o, &sse), 200);
    json_t *c = NULL;
    CHECK_INT(s_ask(NULL,
                    "{\"prompt\": \"<|im_start|>user\\n12+30=<|im_end|>\\n<|im_start|>assistant"
                    "\\n\", \"max_tokens\": 8, \"temperature\": 0, \"return_token_ids\": true}",
                    &c),
              200);
    json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
    json_t *cc = json_array_get(json_object_get(c, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(ch, "message"), "content")),
              json_string_value(json_object_get(cc, "text")));
    CHECK(json_equal(json_object_get(ch, "token_ids"), json_object_get(cc, "token_ids")));
    CHECK(json_equal(json_object_get(o, "prompt_token_ids"),
                     json_object_get(cc, "prompt_token_ids")));
    CHECK_STR(json_string_value(json_object_get(o, "object")), "chat.completion");
    json_decref(o);
    json_decref(c);
    // a stream; tools with tool_choice auto
    CHECK_INT(
        s_chat(&chatml,
               "{\"messages\": [{\"role\": \"user\", \"content\": \"1+1=\"}], \"max_tokens\": "
               "3, \"stream\": true, \"n\": 2, \"tools\": [{\"type\": \"function\", "
               "\"function\": {\"name\": \"calc\"}}]}",
               &o, &sse),
        200);
    CHECK_INT(sse, 1);
    // refusals: keyword arguments the template does not use; a completion's own, passed on
    sse = 0;
    CHECK_INT(s_chat(&chatml,
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], "
                     "\"chat_template_kwargs\": {\"enable_thinking\": false}}",
                     &o, &sse),
              400);
    CHECK_STR(s_param(o), "chat_template_kwargs");
    json_decref(o);
    CHECK_INT(
        s_chat(&chatml,
               "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}], \"max_tokens\": 0}", &o,
               &sse),
        400);
    CHECK_STR(s_param(o), "max_tokens");
    json_decref(o);
    CHECK_INT(s_chat(&chatml, "{\"messages\": [{\"role\": \"user\"}]}", &o, &sse), 400);
    CHECK_STR(s_param(o), "messages");
    json_decref(o);
}

int main(void) {
    char err[1024];
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = 1;
    mo.tune = RL_TUNE_FULL; // writable weights: the test poisons the final norm
    s_model = rl_model_load(S_MODEL, &mo, err, sizeof err);
    s_tok = s_model ? rl_tokenizer_new_dir(S_MODEL, err, sizeof err) : NULL;
    if (!s_tok) {
        fprintf(stderr, "FAIL: %s\n", err);
        return 1;
    }
    RL_TEST_RUN(s_test_work);
    RL_TEST_RUN(s_test_cancel);
    RL_TEST_RUN(s_test_chat);
    RL_TEST_RUN(s_test_values);
    rl_tokenizer_destroy(&s_tok);
    rl_model_destroy(&s_model);
    RL_TEST_DONE();
}

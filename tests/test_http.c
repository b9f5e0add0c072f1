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
// template does not use, and a completion's own refusal, are 400s naming the field. A stream
// written as it is made (call->write): every choice's deltas add up to its message, tool calls,
// finish reason, logprobs and token ids (sampled choices with stop strings and tools on arith,
// hermes calls on calc-base); the first delta goes out within three model steps of a hundred; a
// write refused stops the call (499). What a running choice with tools may show
// (rl_http_visible) is the start of its final content for random texts at every prefix. The
// client's view of it is roles.http_chat.
#include "rl_chat.h"
#include "rl_err.h"
#include "rl_http.h"
#include "rl_http_priv.h"
#include "rl_test.h"
#include "rl_toolcall.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MODEL RL_SOURCE_DIR "/cookbook/models/arith-base"
#define S_CALC RL_SOURCE_DIR "/cookbook/models/calc-base"

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
    rl_http_call_t call = {.max_work = 120};
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
    rl_http_call_t call = {.cancel = s_cancel};
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

// ---- a streamed chat reply (rl_http_chat with call->write)

typedef struct {
    char *buf; // the events
    size_t len;
    int steps;        // model steps so far (the cancel question is asked before each)
    int first_delta;  // steps when the first content delta was written (-1: none yet)
    int refuse_after; // events written before write refuses (0: never)
    int events;
} s_sink_t;

static int s_sink_write(void *arg, const char *b, size_t n) {
    s_sink_t *s = arg;
    if (s->refuse_after && s->events >= s->refuse_after) {
        return 1;
    }
    char *nb = realloc(s->buf, s->len + n + 1);
    CHECK(nb != NULL);
    memcpy(nb + s->len, b, n);
    s->buf = nb;
    s->len += n;
    s->buf[s->len] = '\0';
    s->events += n >= 6 && !memcmp(b, "data: ", 6);
    if (s->first_delta < 0 && strstr(s->buf, "\"delta\":{\"content\":\"") &&
        !strstr(s->buf, "\"delta\":{\"content\":\"\"}")) {
        s->first_delta = s->steps;
    }
    return 0;
}

static int s_sink_step(void *arg) {
    ((s_sink_t *)arg)->steps++;
    return 0;
}

// The events of a stream, read back as the client adds them up: per choice the content deltas
// joined, the tool calls, the finish reason, the last chunk's logprobs and token ids; [DONE] last.
static json_t *s_stream_read(const char *events) {
    json_t *choices = json_array();
    const char *p = events;
    int done = 0;
    while (p && !strncmp(p, "data: ", 6)) {
        const char *e = strstr(p, "\n\n");
        CHECK_MSG(e != NULL, "an event without its blank line: %.80s", p);
        if (!e) {
            break;
        }
        CHECK_MSG(!done, "an event after [DONE]: %.80s", p);
        if (!strncmp(p + 6, "[DONE]", 6)) {
            done = 1;
            p = e + 2;
            continue;
        }
        json_t *k = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
        CHECK_MSG(
            k && !strcmp(json_string_value(json_object_get(k, "object")), "chat.completion.chunk"),
            "not a chunk: %.200s", p);
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(k, "choices"), i, x) {
            size_t j = (size_t)json_integer_value(json_object_get(x, "index"));
            while (json_array_size(choices) <= j) {
                json_array_append_new(choices, json_pack("{s:s}", "content", ""));
            }
            json_t *c = json_array_get(choices, j), *d = json_object_get(x, "delta");
            const char *add = json_string_value(json_object_get(d, "content"));
            if (add) {
                const char *had = json_string_value(json_object_get(c, "content"));
                size_t n0 = strlen(had), n1 = strlen(add);
                char *t = malloc(n0 + n1 + 1);
                CHECK(t != NULL);
                memcpy(t, had, n0);
                memcpy(t + n0, add, n1 + 1);
                json_object_set_new(c, "content", json_string(t));
                free(t);
            }
            if (json_object_get(d, "tool_calls")) {
                json_object_set(c, "tool_calls", json_object_get(d, "tool_calls"));
            }
            json_t *fr = json_object_get(x, "finish_reason");
            if (json_is_string(fr)) {
                CHECK_MSG(!json_object_get(c, "finish_reason"), "choice %zu finished twice", j);
                json_object_set(c, "finish_reason", fr);
                json_object_set(c, "logprobs", json_object_get(x, "logprobs"));
                json_object_set(c, "token_ids", json_object_get(x, "token_ids"));
            }
        }
        json_decref(k);
        p = e + 2;
    }
    CHECK_MSG(done && p && !*p, "the stream does not end with [DONE]: %.200s", p ? p : "");
    return choices;
}

// Streams req (with "stream": true added) and asks it whole: every choice's deltas add up to
// its message (content, tool calls, finish reason, logprobs, token ids), and the first content
// delta went out before the generation's last step.
static void s_stream_same(rl_model_t *m, rl_tokenizer_t *t, const rl_http_chat_t *chat,
                          const char *req, int want_calls) {
    int status = 0, sse = 0;
    char *body = NULL;
    CHECK_INT(rl_http_chat(m, t, chat, "x", NULL, req, strlen(req), &status, &body, &sse), 0);
    json_t *whole = body ? json_loads(body, 0, NULL) : NULL;
    CHECK_MSG(status == 200 && whole, "%s: %d %s", req, status, body ? body : "");
    free(body);
    json_t *sreq = json_loads(req, 0, NULL);
    json_object_set_new(sreq, "stream", json_true());
    char *sr = json_dumps(sreq, JSON_COMPACT);
    json_decref(sreq);
    s_sink_t sink = {.first_delta = -1};
    rl_http_call_t call = {
        .cancel = s_sink_step, .cancel_arg = &sink, .write = s_sink_write, .write_arg = &sink};
    body = NULL;
    CHECK_INT(rl_http_chat(m, t, chat, "x", &call, sr, strlen(sr), &status, &body, &sse), 0);
    CHECK_MSG(status == 200 && !body && !sse, "%s streamed: %d %s", sr, status, body ? body : "");
    json_t *got = sink.buf ? s_stream_read(sink.buf) : json_array();
    size_t i;
    json_t *ch;
    int calls = 0;
    json_array_foreach(json_object_get(whole, "choices"), i, ch) {
        json_t *msg = json_object_get(ch, "message"), *g = json_array_get(got, i);
        const char *want = json_string_value(json_object_get(msg, "content"));
        CHECK_MSG(g && !strcmp(json_string_value(json_object_get(g, "content")), want ? want : ""),
                  "%s: choice %zu streamed %s, the message is %s", sr, i,
                  json_string_value(json_object_get(g, "content")), want ? want : "null");
        json_t *tc = json_deep_copy(json_object_get(g, "tool_calls"));
        size_t k;
        json_t *x;
        json_array_foreach(tc, k, x) {
            CHECK_INT(json_integer_value(json_object_get(x, "index")), (json_int_t)k);
            json_object_del(x, "index");
        }
        calls += tc != NULL;
        CHECK_MSG(json_equal(tc, json_object_get(msg, "tool_calls")) ||
                      (!tc && !json_object_get(msg, "tool_calls")),
                  "%s: choice %zu's tool calls", sr, i);
        json_decref(tc);
        static const char *const same[] = {"finish_reason", "logprobs", "token_ids"};
        for (int f = 0; f < 3; f++) {
            CHECK_MSG(json_equal(json_object_get(g, same[f]), json_object_get(ch, same[f])) ||
                          (!json_object_get(g, same[f]) && !json_object_get(ch, same[f])),
                      "%s: choice %zu's %s", sr, i, same[f]);
        }
    }
    CHECK_INT(json_array_size(got), json_array_size(json_object_get(whole, "choices")));
    if (want_calls) {
        CHECK_MSG(calls > 0, "%s: no choice called a tool", sr);
    }
    // live: a delta before the last step (the cancel question counts the steps)
    if (sink.first_delta >= 0) {
        CHECK_MSG(sink.first_delta < sink.steps, "%s: the first delta after step %d of %d", sr,
                  sink.first_delta, sink.steps);
    }
    json_decref(got);
    json_decref(whole);
    free(sink.buf);
    free(sr);
}

static void s_test_stream(void) {
    rl_http_chat_t chatml = {rl_chat_builtin_text("chatml"), "chatml", RL_TOOL_PARSER_HERMES};
    char req[512];
    // arith: sampled choices, n 2, with and without stop strings, tools (trimmed content), logprobs
    for (int seed = 1; seed <= 4; seed++) {
        snprintf(req, sizeof req,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"47*3+512=\"}], "
                 "\"max_tokens\": 24, \"temperature\": 1, \"n\": 2, \"seed\": %d, \"logprobs\": "
                 "true, \"top_logprobs\": 2, \"return_token_ids\": true%s%s}",
                 seed, seed % 2 ? ", \"stop\": [\"51\", \"=6\"]" : "",
                 seed > 2 ? ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
                            "\"calc\"}}]"
                          : "");
        s_stream_same(s_model, s_tok, &chatml, req, 0);
    }
    // live: the first delta goes out at the second step of a long generation (ignore_eos)
    s_sink_t sink = {.first_delta = -1};
    rl_http_call_t call = {
        .cancel = s_sink_step, .cancel_arg = &sink, .write = s_sink_write, .write_arg = &sink};
    const char *lr =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"1+1=\"}], \"max_tokens\": "
        "100, \"temperature\": 1, \"ignore_eos\": true, \"stream\": true}";
    int status = 0, sse = 0;
    char *body = NULL;
    CHECK_INT(
        rl_http_chat(s_model, s_tok, &chatml, "x", &call, lr, strlen(lr), &status, &body, &sse), 0);
    CHECK_MSG(status == 200 && sink.first_delta >= 1 && sink.first_delta <= 3 && sink.steps > 100,
              "ignore_eos, 100 tokens: %d, the first delta after step %d of %d", status,
              sink.first_delta, sink.steps);
    free(sink.buf);
    free(body);
    // a write that fails (the client is gone): the call stops, 499, saying why
    s_sink_t gone = {.first_delta = -1, .refuse_after = 3};
    call.cancel_arg = call.write_arg = &gone;
    body = NULL;
    CHECK_INT(
        rl_http_chat(s_model, s_tok, &chatml, "x", &call, lr, strlen(lr), &status, &body, &sse), 0);
    CHECK_MSG(status == 499 && gone.events == 3 && gone.steps < 10 && body &&
                  strstr(body, "cancelled"),
              "a write refused after 3 events: %d after %d steps: %s", status, gone.steps,
              body ? body : "");
    free(gone.buf);
    free(body);
    // calc: hermes tool calls, streamed as a tool_calls delta after the content
    char err[1024];
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = 1;
    rl_model_t *calc = rl_model_load(S_CALC, &mo, err, sizeof err);
    rl_tokenizer_t *ct = calc ? rl_tokenizer_new_dir(S_CALC, err, sizeof err) : NULL;
    rl_chat_source_t src;
    memset(&src, 0, sizeof src);
    CHECK_MSG(ct && rl_chat_model_source(S_CALC, NULL, &src, err, sizeof err) == 0 && src.text,
              "calc-base: %s", err);
    rl_http_chat_t own = {src.text, "tokenizer_config.json", RL_TOOL_PARSER_HERMES};
    const char *cr = "{\"messages\": [{\"role\": \"user\", \"content\": \"99*7+964=\"}], "
                     "\"max_tokens\": 60, \"temperature\": 0.7, \"n\": 6, \"seed\": 2, "
                     "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"calc\"}}]}";
    if (ct && src.text) {
        s_stream_same(calc, ct, &own, cr, 1);
    }
    rl_chat_source_free(&src);
    rl_tokenizer_destroy(&ct);
    rl_model_destroy(&calc);
}

// What a stream sends of a running choice with tools (rl_http_visible) is always the start of
// the content rl_tool_parse will give for the whole text, however it ends: random texts made of
// pieces a model writes (calls whole, cut or malformed, spaces, python tags, JSON), every prefix.
static void s_test_visible(void) {
    static const char *const pieces[] = {" ",
                                         "\n",
                                         "  ",
                                         "a",
                                         "b c",
                                         "<",
                                         "<tool",
                                         "_call>",
                                         "</tool_call>",
                                         "<tool_call>",
                                         "{\"name\": \"calc\", \"arguments\": {\"expr\": \"1+2\"}}",
                                         "{\"name\": \"f\"}",
                                         "{",
                                         "}",
                                         ";",
                                         "<|python_tag|>",
                                         "{\"name\": \"g\", \"parameters\": {}}",
                                         "x",
                                         "\t",
                                         "é"};
    const int np = (int)(sizeof pieces / sizeof *pieces);
    uint64_t r = 12345;
    char text[512];
    int failures = 0;
    for (int parser = 0; parser < 2; parser++) {
        for (int trial = 0; trial < 3000 && failures < 5; trial++) {
            size_t n = 0;
            int k = 1 + (int)((r >> 33) % 8);
            for (int i = 0; i < k; i++) {
                r = r * 6364136223846793005ULL + 1442695040888963407ULL;
                const char *p = pieces[(r >> 33) % (uint64_t)np];
                size_t l = strlen(p);
                if (n + l < sizeof text) {
                    memcpy(text + n, p, l);
                    n += l;
                }
            }
            text[n] = '\0';
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            rl_tool_parse_t tp;
            CHECK_INT(rl_tool_parse((rl_tool_parser_t)parser, text, n, 0, &tp), 0);
            for (size_t m = 0; m <= n; m++) {
                size_t a, b;
                rl_http_visible(text, m, 1, parser, &a, &b);
                if (a > b || b > m || b - a > tp.content_len ||
                    memcmp(text + a, tp.content, b - a)) {
                    failures++;
                    CHECK_MSG(0,
                              "parser %d: the first %zu bytes of '%s' show [%zu, %zu) '%.*s'; "
                              "the content is '%s'",
                              parser, m, text, a, b, (int)(b > a ? b - a : 0), text + a,
                              tp.content);
                    break;
                }
            }
            rl_tool_parse_free(&tp);
        }
    }
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
    RL_TEST_RUN(s_test_stream);
    RL_TEST_RUN(s_test_visible);
    RL_TEST_RUN(s_test_values);
    rl_tokenizer_destroy(&s_tok);
    rl_model_destroy(&s_model);
    RL_TEST_DONE();
}

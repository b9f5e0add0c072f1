// rl_http_chat — OpenAI's chat completions over rl_http_complete (rl_http.h): the request is
// checked and rendered with the chat template, generated as a completions request (the same
// sampler, stop strings, logprobs, work cap and cancellation), and the completion's choices are
// turned into chat messages with their tool calls.
#include "rl_http.h"
#include "rl_http_priv.h"

#include "rl_chat.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_toolcall.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define S_MAX_TOP 5
#define S_DEFAULT_MAX 1024 // max_tokens when the request gives none (capped by the context)

static int s_error(int status, const char *param, char **body_p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int s_error(int status, const char *param, char **body_p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl_http_errorv(status, status == 400 ? "invalid_request_error" : "server_error", param, body_p,
                   fmt, ap);
    va_end(ap);
    return status;
}

// An optional field that must be absent, null, or one of the harmless values.
static int s_off(json_t *x) {
    return !x || json_is_null(x) || json_is_false(x) ||
           (json_is_number(x) && json_number_value(x) == 0) ||
           (json_is_object(x) && json_object_size(x) == 0);
}

typedef struct {
    json_t *messages, *tools, *kwargs;
    int parse_tools;   // tool_choice is not "none"
    int logprobs, top; // logprobs: 0/1; top_logprobs 0..5
    int stream, usage_chunk, token_ids;
    json_t *max_tokens; // borrowed: max_tokens or max_completion_tokens
} s_chat_req_t;

static int s_parse(json_t *o, const char *tmpl, s_chat_req_t *q, char **body_p) {
    memset(q, 0, sizeof *q);
    static const char *const known[] = {"model",
                                        "messages",
                                        "tools",
                                        "tool_choice",
                                        "parallel_tool_calls",
                                        "max_tokens",
                                        "max_completion_tokens",
                                        "temperature",
                                        "top_p",
                                        "n",
                                        "stop",
                                        "seed",
                                        "logprobs",
                                        "top_logprobs",
                                        "stream",
                                        "stream_options",
                                        "user",
                                        "return_token_ids",
                                        "ignore_eos",
                                        "chat_template_kwargs",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "logit_bias",
                                        "response_format",
                                        NULL};
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++) {
            ok = !strcmp(k, known[i]);
        }
        if (!ok) {
            return s_error(400, k, body_p, "unknown field '%s'", k);
        }
    }
    q->messages = json_object_get(o, "messages");
    if (!json_is_array(q->messages) || json_array_size(q->messages) == 0) {
        return s_error(400, "messages", body_p, "'messages' must be a non-empty list of messages");
    }
    q->tools = json_object_get(o, "tools");
    if (q->tools && !json_is_null(q->tools) && !json_is_array(q->tools)) {
        return s_error(400, "tools", body_p, "'tools' must be a list of function schemas");
    }
    q->tools = json_is_array(q->tools) && json_array_size(q->tools) > 0 ? q->tools : NULL;
    json_t *tc = json_object_get(o, "tool_choice");
    q->parse_tools = q->tools != NULL;
    if (tc && !json_is_null(tc)) {
        if (json_is_string(tc) && !strcmp(json_string_value(tc), "none")) {
            q->parse_tools = 0;
        } else if (!json_is_string(tc) || strcmp(json_string_value(tc), "auto") != 0) {
            return s_error(400, "tool_choice", body_p,
                           "'tool_choice' must be \"auto\" or \"none\" (this server does not "
                           "force a call)");
        }
    }
    json_t *ptc = json_object_get(o, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc)) {
        return s_error(400, "parallel_tool_calls", body_p,
                       "'parallel_tool_calls' must be true or false");
    }
    q->kwargs = json_object_get(o, "chat_template_kwargs");
    if (q->kwargs && !json_is_null(q->kwargs) && !json_is_object(q->kwargs)) {
        return s_error(400, "chat_template_kwargs", body_p,
                       "'chat_template_kwargs' must be an object");
    }
    q->kwargs = json_is_object(q->kwargs) ? q->kwargs : NULL;
    // a compiled template is kept per distinct keyword arguments (rl_chat): true or false
    // values of names the template uses keep their number bounded
    const char *kk;
    json_t *kv;
    json_object_foreach(q->kwargs, kk, kv) {
        if (!json_is_boolean(kv) || strlen(kk) > 64 || !tmpl || !strstr(tmpl, kk)) {
            return s_error(400, "chat_template_kwargs", body_p,
                           "chat_template_kwargs: '%.64s' must be a name the chat template uses, "
                           "set to true or false",
                           kk);
        }
    }
    static const char *const bools[] = {"logprobs", "stream", "return_token_ids"};
    int *dst[] = {&q->logprobs, &q->stream, &q->token_ids};
    for (int i = 0; i < 3; i++) {
        json_t *x = json_object_get(o, bools[i]);
        if (x && !json_is_null(x) && !json_is_boolean(x)) {
            return s_error(400, bools[i], body_p, "'%s' must be true or false", bools[i]);
        }
        *dst[i] = json_is_true(x);
    }
    json_t *top = json_object_get(o, "top_logprobs");
    if (top && !json_is_null(top)) {
        if (!json_is_integer(top) || json_integer_value(top) < 0 ||
            json_integer_value(top) > S_MAX_TOP) {
            return s_error(400, "top_logprobs", body_p,
                           "'top_logprobs' must be an integer in [0, %d]", S_MAX_TOP);
        }
        if (!q->logprobs) {
            return s_error(400, "top_logprobs", body_p, "'top_logprobs' needs 'logprobs': true");
        }
        q->top = (int)json_integer_value(top);
    }
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        json_t *iu = json_object_get(so, "include_usage");
        if (!json_is_object(so) || json_object_size(so) != (iu ? 1u : 0u) ||
            (iu && !json_is_boolean(iu))) {
            return s_error(400, "stream_options", body_p,
                           "'stream_options' may hold only include_usage (true or false)");
        }
        q->usage_chunk = json_is_true(iu);
    }
    json_t *mt = json_object_get(o, "max_completion_tokens");
    q->max_tokens = mt && !json_is_null(mt) ? mt : json_object_get(o, "max_tokens");
    // what we do not do is refused, never ignored
    static const char *const unsupported[] = {"presence_penalty", "frequency_penalty", "logit_bias",
                                              NULL};
    for (int i = 0; unsupported[i]; i++) {
        if (!s_off(json_object_get(o, unsupported[i]))) {
            return s_error(400, unsupported[i], body_p, "'%s' is not supported by this server",
                           unsupported[i]);
        }
    }
    json_t *rf = json_object_get(o, "response_format");
    json_t *rft = json_object_get(rf, "type");
    if (rf && !json_is_null(rf) &&
        !(json_is_string(rft) && !strcmp(json_string_value(rft), "text"))) {
        return s_error(400, "response_format", body_p,
                       "'response_format' other than {\"type\": \"text\"} is not supported by "
                       "this server");
    }
    return 0;
}

// The chat message, logprobs and finish reason of one completions choice.
static json_t *s_choice(json_t *cc, const s_chat_req_t *q, int parser, int index, char **body_p,
                        int *st) {
    const char *text = json_string_value(json_object_get(cc, "text"));
    size_t tlen = json_string_length(json_object_get(cc, "text"));
    const char *finish = json_string_value(json_object_get(cc, "finish_reason"));
    rl_tool_parse_t tp;
    memset(&tp, 0, sizeof tp);
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    if (q->parse_tools) {
        if (rl_tool_parse((rl_tool_parser_t)parser, text ? text : "", tlen, 0, &tp) != 0) {
            json_decref(msg);
            *st = s_error(500, NULL, body_p, "out of memory");
            return NULL;
        }
        json_object_set_new(msg, "content",
                            tp.content_len || tp.n_calls == 0
                                ? json_stringn(tp.content, tp.content_len)
                                : json_null());
        if (tp.n_calls > 0) {
            json_t *calls = json_array();
            for (int k = 0; k < tp.n_calls; k++) {
                json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id",
                                                       tp.calls[k].id, "type", "function",
                                                       "function", "name", tp.calls[k].name,
                                                       "arguments", tp.calls[k].arguments));
            }
            json_object_set_new(msg, "tool_calls", calls);
            finish = "tool_calls";
        }
    } else {
        json_object_set_new(msg, "content", json_stringn(text ? text : "", tlen));
    }
    rl_tool_parse_free(&tp);
    // logprobs: the completion's tokens, logprobs and top dictionaries, in chat's list shape
    json_t *lp = json_null();
    json_t *clp = json_object_get(cc, "logprobs");
    if (q->logprobs && json_is_object(clp)) {
        json_t *toks = json_object_get(clp, "tokens"),
               *lps = json_object_get(clp, "token_logprobs");
        json_t *tops = json_object_get(clp, "top_logprobs"), *content = json_array();
        for (size_t i = 0; i < json_array_size(toks); i++) {
            json_t *tk = json_array_get(toks, i);
            json_t *bytes = json_array(), *tl = json_array();
            for (size_t b = 0; b < json_string_length(tk); b++) {
                json_array_append_new(bytes, json_integer((unsigned char)json_string_value(tk)[b]));
            }
            const char *key;
            json_t *val;
            int n = 0;
            json_object_foreach(json_array_get(tops, i), key, val) {
                if (n++ >= q->top) {
                    break; // past the k most likely: the sampled token OpenAI's legacy form adds
                }
                json_t *kb = json_array();
                for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
                    json_array_append_new(kb, json_integer(*p));
                }
                json_array_append_new(
                    tl, json_pack("{s:s,s:O,s:o}", "token", key, "logprob", val, "bytes", kb));
            }
            json_array_append_new(content, json_pack("{s:O,s:O,s:o,s:o}", "token", tk, "logprob",
                                                     json_array_get(lps, i), "bytes", bytes,
                                                     "top_logprobs", tl));
        }
        json_decref(lp);
        lp = json_pack("{s:o}", "content", content);
    }
    json_t *ch = json_pack("{s:i,s:o,s:o,s:s}", "index", index, "message", msg, "logprobs", lp,
                           "finish_reason", finish ? finish : "stop");
    if (ch && q->token_ids) {
        json_object_set(ch, "token_ids", json_object_get(cc, "token_ids"));
    }
    if (!ch) {
        *st = s_error(500, NULL, body_p, "out of memory");
    }
    return ch;
}

// ---- server-sent events
//
// A streamed reply: per choice a first chunk with its role, content deltas as its text grows,
// then (once generation is done) the rest of its content, its tool calls and a last chunk with
// its finish reason, logprobs and token ids; then the usage chunk when asked, then [DONE].

typedef struct {
    char *p;
    size_t n;
} s_text_t;

typedef struct {
    const s_chat_req_t *q;
    int parser;
    const rl_http_call_t *call; // the caller's (cancel, write), or NULL
    char id[64];
    json_int_t created;
    const char *model;
    char *buf; // without call->write: the events so far
    size_t len, cap;
    int started;    // an event went out
    int failed;     // out of memory, or call->write refused: the stream stops
    s_text_t *sent; // per choice: the content sent (NULL p: its role chunk has not gone)
    int n_choices;
} s_stream_t;

static void s_put(s_stream_t *s, const char *b, size_t n) {
    if (s->failed) {
        return;
    }
    s->started = 1;
    if (s->call && s->call->write) {
        s->failed = s->call->write(s->call->write_arg, b, n) != 0;
        return;
    }
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char *nb = realloc(s->buf, cap);
        if (!nb) {
            s->failed = 1;
            return;
        }
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, b, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

// One event "data: TEXT\n\n".
static void s_data(s_stream_t *s, const char *text) {
    s_put(s, "data: ", 6);
    s_put(s, text, strlen(text));
    s_put(s, "\n\n", 2);
}

// One event of a JSON object; takes o (NULL: out of memory).
static void s_event(s_stream_t *s, json_t *o) {
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!t) {
        s->failed = 1;
        return;
    }
    s_data(s, t);
    free(t);
}

// A chat.completion.chunk of one choice; takes ch.
static void s_chunk(s_stream_t *s, json_t *ch) {
    json_t *c = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", s->id, "object", "chat.completion.chunk",
                          "created", s->created, "model", s->model, "choices", ch);
    if (c && s->q->usage_chunk) {
        json_object_set_new(c, "usage", json_null());
    }
    s_event(s, c);
}

// A choice's delta chunk (takes delta), its role chunk first if it has not gone.
static void s_delta(s_stream_t *s, int j, json_t *delta) {
    if (j >= s->n_choices) {
        s_text_t *ns = realloc(s->sent, (size_t)(j + 1) * sizeof *ns);
        if (!ns) {
            json_decref(delta);
            s->failed = 1;
            return;
        }
        memset(ns + s->n_choices, 0, (size_t)(j + 1 - s->n_choices) * sizeof *ns);
        s->sent = ns;
        s->n_choices = j + 1;
    }
    if (!s->sent[j].p) {
        s->sent[j].p = calloc(1, 1);
        s->failed |= !s->sent[j].p;
        s_chunk(s, json_pack("{s:i,s:{s:s,s:s},s:n,s:n}", "index", j, "delta", "role", "assistant",
                             "content", "", "logprobs", "finish_reason"));
    }
    if (delta) {
        s_chunk(s, json_pack("{s:i,s:o,s:n,s:n}", "index", j, "delta", delta, "logprobs",
                             "finish_reason"));
    }
}

// The spaces rl_tool_parse trims.
static int s_ws(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// (rl_http_priv.h)
void rl_http_visible(const char *t, size_t n, int tools, int parser, size_t *start, size_t *end) {
    size_t a = 0;
    if (!tools) {
        *start = 0;
        *end = n;
        return;
    }
    while (a < n && s_ws(t[a])) {
        a++;
    }
    size_t b = n;
    if (parser == RL_TOOL_PARSER_LLAMA3_JSON) {
        static const char tag[] = "<|python_tag|>";
        size_t m = n - a < sizeof tag - 1 ? n - a : sizeof tag - 1;
        if (a == n || t[a] == '{' || !memcmp(t + a, tag, m)) {
            b = a; // a call may start here: nothing is sure until the choice is over
        }
    } else {
        static const char open[] = "<tool_call>";
        for (size_t i = a; i < b; i++) { // the first opening, or an end that may become one
            size_t m = n - i < sizeof open - 1 ? n - i : sizeof open - 1;
            if (!memcmp(t + i, open, m)) {
                b = i;
            }
        }
    }
    while (b > a && s_ws(t[b - 1])) {
        b--;
    }
    *start = a;
    *end = b;
}

// call->on_text of a stream: the choice's new content, as a delta.
static void s_on_text(void *arg, int j, const char *text, size_t len, int done) {
    (void)done;
    s_stream_t *s = arg;
    size_t a, b;
    rl_http_visible(text, len, s->q->parse_tools, s->parser, &a, &b);
    s_delta(s, j, NULL);
    if (s->failed || b - a <= s->sent[j].n) {
        return;
    }
    const char *add = text + a + s->sent[j].n;
    size_t n = b - a - s->sent[j].n;
    char *np = realloc(s->sent[j].p, s->sent[j].n + n + 1);
    if (!np) {
        s->failed = 1;
        return;
    }
    memcpy(np + s->sent[j].n, add, n);
    s->sent[j].p = np;
    s->sent[j].n += n;
    np[s->sent[j].n] = '\0';
    s_delta(s, j, json_pack("{s:s%}", "content", add, n));
}

// The stream's cancel: the caller's, or a stream that cannot go on.
static int s_stream_cancel(void *arg) {
    const s_stream_t *s = arg;
    return s->failed || (s->call && s->call->cancel && s->call->cancel(s->call->cancel_arg));
}

// The end of a stream, from the reply's choices: per choice the content not sent yet, its tool
// calls, its last chunk; then the usage when asked, then [DONE]. 0, or 500 (content sent that the
// message does not begin with: a bug, said in an error event).
static int s_finish(s_stream_t *s, json_t *reply) {
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(reply, "choices"), i, ch) {
        int j = (int)i;
        json_t *msg = json_object_get(ch, "message"), *content = json_object_get(msg, "content");
        s_delta(s, j, NULL);
        if (s->failed) {
            break;
        }
        const char *c = json_string_value(content);
        size_t cn = json_string_length(content);
        const s_text_t *sent = &s->sent[j];
        if (sent->n > cn || memcmp(c ? c : "", sent->p, sent->n)) {
            rl_log_error("http: the content streamed for choice %d is not the start of its "
                         "message (a bug): %.200s",
                         j, sent->p);
            s_event(s, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message",
                                 "the streamed content differs from the message (a bug)", "type",
                                 "server_error", "param", "code"));
            return 500;
        }
        if (cn > sent->n) {
            s_delta(s, j, json_pack("{s:s%}", "content", c + sent->n, cn - sent->n));
        }
        json_t *calls = json_object_get(msg, "tool_calls");
        if (calls) {
            json_t *tc = json_deep_copy(calls);
            size_t k;
            json_t *x;
            json_array_foreach(tc, k, x) {
                json_object_set_new(x, "index", json_integer((json_int_t)k));
            }
            s_delta(s, j, json_pack("{s:o}", "tool_calls", tc));
        }
        json_t *last = json_pack("{s:i,s:{},s:O,s:O}", "index", j, "delta", "logprobs",
                                 json_object_get(ch, "logprobs"), "finish_reason",
                                 json_object_get(ch, "finish_reason"));
        if (last && s->q->token_ids) {
            json_object_set(last, "token_ids", json_object_get(ch, "token_ids"));
            json_object_set(last, "prompt_token_ids", json_object_get(reply, "prompt_token_ids"));
        }
        s_chunk(s, last);
    }
    if (s->q->usage_chunk) {
        s_event(s, json_pack("{s:s,s:s,s:I,s:s,s:[],s:O}", "id", s->id, "object",
                             "chat.completion.chunk", "created", s->created, "model", s->model,
                             "choices", "usage", json_object_get(reply, "usage")));
    }
    s_data(s, "[DONE]");
    return 0;
}

static void s_stream_free(s_stream_t *s) {
    for (int j = 0; j < s->n_choices; j++) {
        free(s->sent[j].p);
    }
    free(s->sent);
    free(s->buf);
}

int rl_http_chat(rl_model_t *model, rl_tokenizer_t *tok, const rl_http_chat_t *chat,
                 const char *model_name, const rl_http_call_t *call, const char *body, size_t len,
                 int *status, char **body_p, int *sse) {
    *body_p = NULL;
    *sse = 0;
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        *status = s_error(400, NULL, body_p,
                          "the body is not a JSON object (%s at line %d, "
                          "column %d)",
                          o ? "not an object" : je.text, je.line, je.column);
        return 0;
    }
    s_chat_req_t q;
    int st = s_parse(o, chat ? chat->template_text : NULL, &q, body_p);
    // the reply's id and time; a stream's state, and the call that feeds it
    s_stream_t ss;
    memset(&ss, 0, sizeof ss);
    ss.q = &q;
    ss.parser = chat ? chat->tool_parser : 0;
    ss.call = call;
    ss.model = model_name;
    ss.created = (json_int_t)time(NULL);
    unsigned char rnd[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        memset(rnd, 0, sizeof rnd);
    }
    memcpy(ss.id, "chatcmpl-", 10);
    for (size_t i = 0; i < sizeof rnd; i++) {
        snprintf(ss.id + 9 + 2 * i, 3, "%02x", rnd[i]);
    }
    rl_http_call_t mine = {0};
    if (call) {
        mine = *call;
    }
    mine.write = NULL;
    if (!st && q.stream) {
        mine.cancel = s_stream_cancel;
        mine.cancel_arg = &ss;
        mine.on_text = s_on_text;
        mine.text_arg = &ss;
    }
    const int live = q.stream && call && call->write; // events go out as they are made
    if (!st && (!chat || !chat->template_text)) {
        st = s_error(400, "messages", body_p,
                     "the model has no chat template (tokenizer_config.json's chat_template, or "
                     "chat_template.jinja); serve it with --chat-template chatml|llama3");
    }
    // the template, with the request's keyword arguments
    rl_chat_format_t fmt = RL_CHAT_NONE;
    char err[512];
    if (!st) {
        char *kw = q.kwargs ? json_dumps(q.kwargs, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        int32_t bos = rl_tokenizer_bos_id(tok), eos = rl_tokenizer_eos_id(tok);
        int rc = rl_chat_template(chat->template_text, chat->template_name,
                                  bos >= 0 ? rl_tokenizer_id_to_token(tok, bos) : NULL,
                                  eos >= 0 ? rl_tokenizer_id_to_token(tok, eos) : NULL, kw, &fmt,
                                  err, sizeof err);
        free(kw);
        if (rc) {
            st = s_error(500, NULL, body_p, "the chat template does not compile: %s", err);
        }
    }
    // the prompt: messages and tools through the template, with the generation prompt
    char *prompt = NULL;
    size_t plen = 0;
    if (!st) {
        json_t *row = json_pack("{s:O}", "messages", q.messages);
        if (q.tools) {
            json_object_set(row, "tools", q.tools);
        }
        char *rj = row ? json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(row);
        if (!rj) {
            st = s_error(500, NULL, body_p, "out of memory");
        } else if (rl_chat_render_json(fmt, rj, strlen(rj), 1, &prompt, &plen, err, sizeof err)) {
            st = s_error(400, "messages", body_p, "the messages do not render: %s", err);
        }
        free(rj);
    }
    // max_tokens when none is given: what the context leaves, at most S_DEFAULT_MAX
    json_t *comp = NULL;
    if (!st) {
        comp = json_deep_copy(o);
        static const char *const drop[] = {"messages",
                                           "tools",
                                           "tool_choice",
                                           "parallel_tool_calls",
                                           "max_completion_tokens",
                                           "logprobs",
                                           "top_logprobs",
                                           "stream",
                                           "stream_options",
                                           "chat_template_kwargs",
                                           "response_format",
                                           NULL};
        for (int i = 0; drop[i]; i++) {
            json_object_del(comp, drop[i]);
        }
        json_object_set_new(comp, "prompt", json_stringn(prompt, plen));
        json_object_set_new(comp, "return_token_ids", json_true());
        if (q.logprobs) {
            json_object_set_new(comp, "logprobs", json_integer(q.top));
        }
        if (q.max_tokens && !json_is_null(q.max_tokens)) {
            json_object_set(comp, "max_tokens", q.max_tokens);
        } else {
            int32_t *ids = NULL;
            size_t n = 0;
            int ctx = rl_model_config(model)->max_position_embeddings;
            long long left = S_DEFAULT_MAX;
            if (rl_tokenizer_encode(tok, prompt, plen, 0, &ids, &n) == 0 && ctx > 0) {
                left = (long long)ctx - (long long)n;
            }
            free(ids);
            left = left > S_DEFAULT_MAX ? S_DEFAULT_MAX : left < 1 ? 1 : left;
            json_object_set_new(comp, "max_tokens", json_integer(left));
        }
    }
    free(prompt);
    char *cbody = NULL;
    if (!st) {
        char *req = json_dumps(comp, JSON_COMPACT);
        if (!req) {
            st = s_error(500, NULL, body_p, "out of memory");
        } else {
            rl_http_complete(model, tok, model_name, &mine, req, strlen(req), &st, &cbody);
            free(req);
        }
    }
    json_decref(comp);
    if (st && st != 200 && live && ss.started) { // the stream went out: its last event
        if (st != 499 && cbody) {
            s_data(&ss, cbody);
        }
        free(*body_p);
        *body_p = st == 499 ? cbody : NULL; // what stopped it, for the server's log
        if (st != 499) {
            free(cbody);
        }
        *status = st == 499 || ss.failed ? 499 : 200;
        s_stream_free(&ss);
        json_decref(o);
        return 0;
    }
    if (st && st != 200) { // an error from the completion: its body, as it is
        if (cbody) {
            free(*body_p);
            *body_p = cbody;
        }
        s_stream_free(&ss);
        json_decref(o);
        *status = st;
        return 0;
    }
    // the completion's reply in chat's shape
    json_t *cr = cbody ? json_loads(cbody, 0, NULL) : NULL;
    free(cbody);
    json_t *choices = json_array();
    size_t i;
    json_t *cc;
    st = cr ? 0 : s_error(500, NULL, body_p, "out of memory");
    json_array_foreach(json_object_get(cr, "choices"), i, cc) {
        json_t *ch = st ? NULL : s_choice(cc, &q, chat->tool_parser, (int)i, body_p, &st);
        if (ch) {
            json_array_append_new(choices, ch);
        }
    }
    json_t *r = NULL;
    if (!st) {
        r = json_pack("{s:s,s:s,s:I,s:s,s:O,s:O}", "id", ss.id, "object", "chat.completion",
                      "created", ss.created, "model", model_name, "choices", choices, "usage",
                      json_object_get(cr, "usage"));
        json_t *c0 = json_array_get(json_object_get(cr, "choices"), 0);
        if (r && q.token_ids) {
            json_object_set(r, "prompt_token_ids", json_object_get(c0, "prompt_token_ids"));
        }
        st = r ? 0 : s_error(500, NULL, body_p, "out of memory");
    }
    if (q.stream && (!st || (live && ss.started))) {
        // a stream's end; or, live, the error that ends it
        int bad = st ? st : s_finish(&ss, r);
        if (live) {
            if (st && *body_p) {
                s_data(&ss, *body_p);
            }
            free(*body_p);
            *body_p = NULL;
            st = ss.failed ? 499 : 200;
        } else if (ss.failed) {
            st = s_error(500, NULL, body_p, "out of memory");
        } else if (bad) {
            st =
                s_error(500, NULL, body_p, "the streamed content differs from the message (a bug)");
        } else {
            *body_p = ss.buf;
            ss.buf = NULL;
            *sse = 1;
            st = 200;
        }
    } else if (!st) {
        *body_p = json_dumps(r, JSON_COMPACT);
        st = *body_p ? 200 : s_error(500, NULL, body_p, "out of memory");
    }
    json_decref(r);
    s_stream_free(&ss);
    json_decref(choices);
    json_decref(cr);
    json_decref(o);
    *status = st;
    return 0;
}

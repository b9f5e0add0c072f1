// rl_http_chat — OpenAI's chat completions over rl_http_complete (rl_http.h): the request is
// checked and rendered with the chat template, generated as a completions request (the same
// sampler, stop strings, logprobs, work cap and cancellation), and the completion's choices are
// turned into chat messages with their tool calls.
#include "rl_http.h"
#include "rl_http_priv.h"

#include "rl_chat.h"
#include "rl_err.h"
#include "rl_toolcall.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// The choices as server-sent events: per choice its role, its content, its tool calls and its
// finish, then the usage when asked, then [DONE].
static char *s_sse(json_t *reply, const s_chat_req_t *q) {
    json_t *id = json_object_get(reply, "id"), *created = json_object_get(reply, "created");
    json_t *model = json_object_get(reply, "model");
    size_t cap = 4096, n = 0;
    char *out = malloc(cap);
    int bad = !out;
    json_t *chunks = json_array();
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(reply, "choices"), i, ch) {
        json_t *msg = json_object_get(ch, "message");
        json_t *delta =
            json_pack("{s:s,s:O}", "role", "assistant", "content", json_object_get(msg, "content"));
        json_t *calls = json_object_get(msg, "tool_calls");
        if (calls) {
            json_t *tc = json_deep_copy(calls);
            size_t k;
            json_t *c;
            json_array_foreach(tc, k, c) {
                json_object_set_new(c, "index", json_integer((json_int_t)k));
            }
            json_object_set_new(delta, "tool_calls", tc);
        }
        json_t *first = json_pack("{s:O,s:o,s:O}", "index", json_object_get(ch, "index"), "delta",
                                  delta, "logprobs", json_object_get(ch, "logprobs"));
        if (q->token_ids && json_object_get(ch, "token_ids")) {
            json_object_set(first, "token_ids", json_object_get(ch, "token_ids"));
        }
        json_object_set_new(first, "finish_reason", json_null());
        json_array_append_new(chunks, json_pack("[o]", first));
        json_array_append_new(chunks,
                              json_pack("[{s:O,s:{},s:n,s:O}]", "index",
                                        json_object_get(ch, "index"), "delta", "logprobs",
                                        "finish_reason", json_object_get(ch, "finish_reason")));
    }
    json_array_foreach(chunks, i, ch) {
        json_t *c = json_pack("{s:O,s:s,s:O,s:O,s:O}", "id", id, "object", "chat.completion.chunk",
                              "created", created, "model", model, "choices", ch);
        if (q->usage_chunk) {
            json_object_set_new(c, "usage", json_null());
        }
        char *t = c ? json_dumps(c, JSON_COMPACT) : NULL;
        json_decref(c);
        size_t need = n + (t ? strlen(t) : 0) + 16;
        if (!t || bad) {
            bad = 1;
        } else {
            if (need > cap) {
                char *q2 = realloc(out, need * 2);
                bad = !q2;
                out = q2 ? q2 : out;
                cap = need * 2;
            }
            if (!bad) {
                n += (size_t)sprintf(out + n, "data: %s\n\n", t);
            }
        }
        free(t);
    }
    if (!bad && q->usage_chunk) {
        json_t *c = json_pack("{s:O,s:s,s:O,s:O,s:[],s:O}", "id", id, "object",
                              "chat.completion.chunk", "created", created, "model", model,
                              "choices", "usage", json_object_get(reply, "usage"));
        char *t = c ? json_dumps(c, JSON_COMPACT) : NULL;
        json_decref(c);
        size_t need = n + (t ? strlen(t) : 0) + 32;
        char *q2 = t ? realloc(out, need) : NULL;
        if (q2) {
            out = q2;
            n += (size_t)sprintf(out + n, "data: %s\n\n", t);
        } else {
            bad = 1;
        }
        free(t);
    }
    if (!bad) {
        char *q2 = realloc(out, n + 16);
        bad = !q2;
        if (q2) {
            out = q2;
            n += (size_t)sprintf(out + n, "data: [DONE]\n\n");
        }
    }
    json_decref(chunks);
    if (bad) {
        free(out);
        return NULL;
    }
    return out;
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
            rl_http_complete(model, tok, model_name, call, req, strlen(req), &st, &cbody);
            free(req);
        }
    }
    json_decref(comp);
    if (st && st != 200) { // an error from the completion: its body, as it is
        if (cbody) {
            free(*body_p);
            *body_p = cbody;
        }
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
    if (!st) {
        const char *cid = json_string_value(json_object_get(cr, "id"));
        char id[64];
        snprintf(id, sizeof id, "chatcmpl-%s", cid && !strncmp(cid, "cmpl-", 5) ? cid + 5 : "0");
        json_t *r = json_pack("{s:s,s:s,s:O,s:s,s:O,s:O}", "id", id, "object", "chat.completion",
                              "created", json_object_get(cr, "created"), "model", model_name,
                              "choices", choices, "usage", json_object_get(cr, "usage"));
        json_t *c0 = json_array_get(json_object_get(cr, "choices"), 0);
        if (r && q.token_ids) {
            json_object_set(r, "prompt_token_ids", json_object_get(c0, "prompt_token_ids"));
        }
        if (r && q.stream) {
            *body_p = s_sse(r, &q);
            *sse = *body_p != NULL;
        } else if (r) {
            *body_p = json_dumps(r, JSON_COMPACT);
        }
        json_decref(r);
        st = *body_p ? 200 : s_error(500, NULL, body_p, "out of memory");
    }
    json_decref(choices);
    json_decref(cr);
    json_decref(o);
    *status = st;
    return 0;
}

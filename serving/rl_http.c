// rl_http — OpenAI-compatible completions over libmicrohttpd (see rl_http.h).
#include "rl_http.h"
#include "rl_http_priv.h"

#include "rl_curve.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_sampler.h"
#include "rl_chat.h"
#include "rl_toolcall.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_BODY_MAX (1u << 20)  // request bodies above this are refused (413)
#define S_MAX_N 64             // completions per prompt
#define S_MAX_PROMPTS 256      // prompts per request
#define S_MAX_TOP 5            // logprobs: 0..5, as OpenAI's
#define S_MAX_STOP 4           // stop strings, as OpenAI's
#define S_LOGITS_MAX (1 << 26) // floats of (T, V) logits for top logprobs
// the smallest positive temperature: below it logits / T overflow a float (inf - inf = NaN)
#define S_MIN_TEMP RL_SAMPLE_MIN_TEMPERATURE

// ---- the completions request ------------------------------------------------------------------

int rl_http_errorv(int status, const char *type, const char *param, char **body_p, const char *fmt,
                   va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_t *e = json_pack("{s:{s:s,s:s,s:o,s:n}}", "error", "message", msg, "type", type, "param",
                          param ? json_string(param) : json_null(), "code");
    *body_p = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return status;
}

// An OpenAI error object with its status.
static int s_error(int status, const char *type, const char *param, char **body_p, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
static int s_error(int status, const char *type, const char *param, char **body_p, const char *fmt,
                   ...) {
    va_list ap;
    va_start(ap, fmt);
    rl_http_errorv(status, type, param, body_p, fmt, ap);
    va_end(ap);
    return status;
}

typedef struct {
    const char *text;
    size_t len;
} s_str_t;

typedef struct {
    s_str_t prompts[S_MAX_PROMPTS];
    int n_prompts;
    int max_tokens, n, logprobs; // logprobs: -1 = none
    double temperature, top_p;
    uint64_t seed;
    s_str_t stop[S_MAX_STOP];
    int n_stop;
    int token_ids; // return_token_ids (vLLM's): the prompt's and each choice's token ids
    int ignore_eos; // ignore_eos (vLLM's): the model's end-of-sequence tokens do not stop
} s_req_t;

// Reads an optional number field; returns 0, or an error status with *body_p.
static int s_num(json_t *o, const char *key, double lo, double hi, double *v, char **body_p) {
    json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x)) {
        return 0;
    }
    if (!json_is_number(x) || !(json_number_value(x) >= lo && json_number_value(x) <= hi)) {
        return s_error(400, "invalid_request_error", key, body_p,
                       "'%s' must be a number in "
                       "[%g, %g]",
                       key, lo, hi);
    }
    *v = json_number_value(x);
    return 0;
}

static int s_int(json_t *o, const char *key, long long lo, long long hi, long long *v,
                 char **body_p) {
    json_t *x = json_object_get(o, key);
    if (!x || json_is_null(x)) {
        return 0;
    }
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi) {
        return s_error(400, "invalid_request_error", key, body_p,
                       "'%s' must be an integer in "
                       "[%lld, %lld]",
                       key, lo, hi);
    }
    *v = json_integer_value(x);
    return 0;
}

// A string or a list of strings into out (at most cap).
static int s_strings(json_t *x, const char *key, s_str_t *out, int cap, int *n, char **body_p) {
    *n = 0;
    if (json_is_string(x)) {
        out[0] = (s_str_t){json_string_value(x), json_string_length(x)};
        *n = 1;
        return 0;
    }
    if (!json_is_array(x) || json_array_size(x) == 0 || json_array_size(x) > (size_t)cap) {
        return s_error(400, "invalid_request_error", key, body_p,
                       "'%s' must be a string or a "
                       "list of 1 to %d strings",
                       key, cap);
    }
    for (size_t i = 0; i < json_array_size(x); i++) {
        json_t *s = json_array_get(x, i);
        if (!json_is_string(s)) {
            return s_error(400, "invalid_request_error", key, body_p,
                           "'%s'[%zu] must be a "
                           "string (token-id prompts are not supported)",
                           key, i);
        }
        out[(*n)++] = (s_str_t){json_string_value(s), json_string_length(s)};
    }
    return 0;
}

static int s_parse(json_t *o, s_req_t *q, char **body_p) {
    memset(q, 0, sizeof *q);
    q->max_tokens = 16; // OpenAI's defaults
    q->n = 1;
    q->logprobs = -1;
    q->temperature = 1.0;
    q->top_p = 1.0;
    static const char *const known[] = {"model",
                                        "prompt",
                                        "max_tokens",
                                        "temperature",
                                        "top_p",
                                        "n",
                                        "stop",
                                        "seed",
                                        "logprobs",
                                        "stream",
                                        "echo",
                                        "user",
                                        "suffix",
                                        "presence_penalty",
                                        "frequency_penalty",
                                        "best_of",
                                        "logit_bias",
                                        "return_token_ids",
                                        "ignore_eos",
                                        NULL};
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++) {
            ok = !strcmp(k, known[i]);
        }
        if (!ok) {
            return s_error(400, "invalid_request_error", k, body_p, "unknown field '%s'", k);
        }
    }
    json_t *p = json_object_get(o, "prompt");
    if (!p) {
        return s_error(400, "invalid_request_error", "prompt", body_p, "'prompt' is required");
    }
    int st = s_strings(p, "prompt", q->prompts, S_MAX_PROMPTS, &q->n_prompts, body_p);
    long long mt = q->max_tokens, n = q->n, lp = -1, seed = 0;
    json_t *lpj = json_object_get(o, "logprobs");
    if (!st) {
        st = s_int(o, "max_tokens", 1, 1 << 20, &mt, body_p);
    }
    if (!st) {
        st = s_int(o, "n", 1, S_MAX_N, &n, body_p);
    }
    if (!st && lpj && !json_is_null(lpj)) {
        st = s_int(o, "logprobs", 0, S_MAX_TOP, &lp, body_p);
    }
    if (!st) {
        st = s_int(o, "seed", 0, INT64_MAX, &seed, body_p);
    }
    if (!st) {
        st = s_num(o, "temperature", 0, 2, &q->temperature, body_p);
    }
    if (!st && q->temperature > 0 && q->temperature < S_MIN_TEMP) {
        st = s_error(400, "invalid_request_error", "temperature", body_p,
                     "'temperature' must be 0 (greedy) or in [%g, 2]: %g divides the logits "
                     "past what a float holds",
                     S_MIN_TEMP, q->temperature);
    }
    if (!st) {
        st = s_num(o, "top_p", 1e-9, 1, &q->top_p, body_p);
    }
    static const char *const bools[] = {"return_token_ids", "ignore_eos"};
    int *dst[] = {&q->token_ids, &q->ignore_eos};
    for (int i = 0; i < 2; i++) {
        json_t *x = json_object_get(o, bools[i]);
        if (!st && x && !json_is_null(x) && !json_is_boolean(x)) {
            st = s_error(400, "invalid_request_error", bools[i], body_p,
                         "'%s' must be true or false", bools[i]);
        }
        *dst[i] = json_is_true(x);
    }
    json_t *stop = json_object_get(o, "stop");
    if (!st && stop && !json_is_null(stop)) {
        st = s_strings(stop, "stop", q->stop, S_MAX_STOP, &q->n_stop, body_p);
    }
    // what we do not do is refused, never ignored
    static const char *const unsupported[] = {"stream",
                                              "echo",
                                              "suffix",
                                              "best_of",
                                              "logit_bias",
                                              "presence_penalty",
                                              "frequency_penalty",
                                              NULL};
    for (int i = 0; !st && unsupported[i]; i++) {
        json_t *x = json_object_get(o, unsupported[i]);
        int off = !x || json_is_null(x) || json_is_false(x) ||
                  (json_is_number(x) && json_number_value(x) == 0) ||
                  (!strcmp(unsupported[i], "best_of") && json_is_integer(x) &&
                   json_integer_value(x) == 1);
        if (!off) {
            st = s_error(400, "invalid_request_error", unsupported[i], body_p,
                         "'%s' is not supported by this server", unsupported[i]);
        }
    }
    q->max_tokens = (int)mt;
    q->n = (int)n;
    q->logprobs = (int)lp;
    q->seed = (uint64_t)seed;
    return st;
}

// ---- one choice ---------------------------------------------------------------------------------

// The choice's tokens cut before the first stop string (and without a trailing special token):
// *kept tokens, the text, and whether it stopped.
typedef struct {
    int kept;
    char *text;
    size_t text_len;
    int stopped;
    size_t *offset; // (kept) byte offset of each token in the text
    size_t hold;    // where the text's longest end that begins a stop string starts (text_len
                    // when none): text from there may yet be cut when more tokens come
} s_cut_t;

static int s_cut(rl_tokenizer_t *tok, const s_req_t *q, const rl_sampler_result_t *res,
                 s_cut_t *c) {
    memset(c, 0, sizeof *c);
    int n = res->n_ids;
    c->stopped = res->finish == RL_SAMPLER_FINISH_STOP;
    if (c->stopped && n > 0) {
        n--; // the stop token is not part of the text
    }
    // the bytes of the tokens, to find stop strings and offsets
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t l = 0;
        if (!rl_tokenizer_is_special(tok, res->ids[i]) &&
            rl_tokenizer_token_bytes(tok, res->ids[i], &l)) {
            total += l;
        }
    }
    char *raw = malloc(total + 1);
    c->offset = malloc(((size_t)n + 1) * sizeof *c->offset);
    if (!raw || !c->offset) {
        free(raw);
        return RL_ENOMEM;
    }
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        c->offset[i] = o;
        size_t l = 0;
        const char *b = rl_tokenizer_is_special(tok, res->ids[i])
                            ? NULL
                            : rl_tokenizer_token_bytes(tok, res->ids[i], &l);
        if (b) {
            memcpy(raw + o, b, l);
            o += l;
        }
    }
    raw[o] = '\0';
    c->hold = o;
    for (int s = 0; s < q->n_stop; s++) {
        size_t sl = q->stop[s].len;
        for (size_t i = o >= sl ? o - sl + 1 : 0; sl > 0 && i < o && i < c->hold; i++) {
            if (!memcmp(raw + i, q->stop[s].text, o - i)) {
                c->hold = i;
            }
        }
    }
    size_t cut = o;
    for (int s = 0; s < q->n_stop; s++) {
        if (q->stop[s].len == 0) {
            continue;
        }
        for (size_t i = 0; i + q->stop[s].len <= o && i < cut; i++) {
            if (!memcmp(raw + i, q->stop[s].text, q->stop[s].len)) {
                cut = i;
                c->stopped = 1;
                break;
            }
        }
    }
    free(raw);
    c->kept = n;
    while (c->kept > 0 && c->offset[c->kept - 1] >= cut && cut < o) {
        c->kept--; // tokens that start at or after the stop string
    }
    int32_t *ids = malloc(((size_t)c->kept + 1) * sizeof *ids);
    if (!ids) {
        return RL_ENOMEM;
    }
    memcpy(ids, res->ids, (size_t)c->kept * sizeof *ids);
    int rc = rl_tokenizer_decode(tok, ids, (size_t)c->kept, RL_TOKENIZER_SKIP_SPECIAL, &c->text,
                                 &c->text_len);
    free(ids);
    if (!rc && c->text_len > cut) { // a token that straddles the stop string's start
        c->text_len = cut;
        c->text[cut] = '\0';
    }
    c->hold = c->hold < c->text_len ? c->hold : c->text_len;
    return rc;
}

// The stream of a call with on_text: the request and the choices' count.
typedef struct {
    rl_tokenizer_t *tok;
    const s_req_t *q;
    const rl_http_call_t *call;
} s_live_t;

// The sampler's on_token: choice k's text that can no longer change goes to call->on_text. A
// running choice's text holds back its end that may begin a stop string, an unfinished UTF-8
// character, and the U+FFFD an unfinished character decodes to (the next token may finish it).
static void s_on_token(void *arg, const rl_sampler_result_t *r, int done) {
    const s_live_t *lv = arg;
    rl_sampler_result_t part = *r;
    if (!done) {
        part.finish = RL_SAMPLER_FINISH_LENGTH; // a running choice's last token is not a stop
    }
    s_cut_t c;
    if (s_cut(lv->tok, lv->q, &part, &c) == 0) {
        size_t n = c.text_len;
        if (!done) {
            n = rl_tokenizer_utf8_valid_prefix(c.text, c.hold);
            while (n >= 3 && !memcmp(c.text + n - 3, "\xEF\xBF\xBD", 3)) {
                n -= 3;
            }
        }
        lv->call->on_text(lv->call->text_arg, r->prompt * lv->q->n + r->sample, c.text, n, done);
    }
    free(c.text);
    free(c.offset);
}

// A logprob as a JSON number, or NULL with why when it is not finite (JSON has no NaN or
// infinity, and jansson returns NULL for them: appended, the value would silently go missing).
static json_t *s_logprob(double v, int choice, int i, const char *what, char *why, size_t why_len) {
    if (!isfinite(v)) {
        snprintf(why, why_len,
                 "choice %d, token %d: the model's %s is %g, not a finite number: its weights "
                 "(or adapter) give non-finite logits; no reply is sent rather than one with "
                 "the value left out",
                 choice, i, what, v);
        return NULL;
    }
    return json_real(v);
}

// logprobs of a choice: the sampled tokens, their logprobs, the k most likely at each position
// and the byte offsets, from one forward over prompt + completion (as `rlctl logprobs`), into
// *out_p (caller owns). Returns 0, or the HTTP status of the error with why: 400 (top logprobs
// of too many logits), 500 (a logprob that is not finite, out of memory).
static int s_logprobs(rl_model_t *model, rl_tokenizer_t *tok, const int32_t *prompt, int P,
                      const rl_sampler_result_t *res, const s_cut_t *c, int k, double temp,
                      int choice, json_t **out_p, char *why, size_t why_len) {
    *out_p = NULL;
    int C = c->kept, T = P + C, V = rl_model_config(model)->vocab_size;
    // the four arrays belong to out from the start (borrowed below): one decref frees all
    json_t *out = json_object(), *tokens = json_array(), *lps = json_array(), *tops = json_array(),
           *offs = json_array();
    int bad = !out || json_object_set_new(out, "tokens", tokens) ||
              json_object_set_new(out, "token_logprobs", lps) ||
              json_object_set_new(out, "top_logprobs", tops) ||
              json_object_set_new(out, "text_offset", offs);
    if (bad) {
        json_decref(out);
        snprintf(why, why_len, "out of memory");
        return 500;
    }
    if (C == 0) {
        *out_p = out;
        return 0;
    }
    if (k > 0 && (double)T * V > S_LOGITS_MAX) {
        snprintf(why, why_len,
                 "logprobs %d needs %d x %d logits; this server computes top "
                 "logprobs for up to %d of them (use logprobs: 0)",
                 k, T, V, S_LOGITS_MAX);
        json_decref(out);
        return 400;
    }
    int32_t *seq = malloc((size_t)T * sizeof *seq);
    float *logp = malloc((size_t)T * sizeof *logp);
    float *logits = NULL;
    int st = 0, rc = seq && logp ? 0 : RL_ENOMEM;
    if (!rc) {
        memcpy(seq, prompt, (size_t)P * sizeof *seq);
        memcpy(seq + P, res->ids, (size_t)C * sizeof *seq);
        rc = rl_model_forward(model, seq, &T, 1, T, (float)temp, 0, logp, NULL);
    }
    if (!rc && k > 0 && !(logits = rl_model_logits(model))) {
        rc = RL_ENOMEM;
    }
    if (rc) {
        snprintf(why, why_len, "logprobs: %s", rl_model_errmsg(model));
        st = 500;
    }
    for (int i = 0; !st && i < C; i++) {
        int32_t id = res->ids[i];
        const char *tk = rl_tokenizer_id_to_token(tok, id);
        char *txt = NULL;
        size_t tl = 0;
        rl_tokenizer_decode(tok, &id, 1, 0, &txt, &tl);
        json_t *lp = s_logprob((double)logp[P + i], choice, i, "logprob", why, why_len);
        json_t *top = json_object();
        if (!lp) {
            st = 500;
        } else if (json_array_append_new(tokens,
                                         json_stringn(txt ? txt : (tk ? tk : ""), txt ? tl : 0)) ||
                   json_array_append(lps, lp) ||
                   json_array_append_new(offs, json_integer((json_int_t)c->offset[i])) || !top) {
            snprintf(why, why_len, "out of memory");
            st = 500;
        }
        if (!st && k > 0) {
            // the distribution that predicted token P + i: logits row P + i - 1
            const float *row = logits + (size_t)(P + i - 1) * (size_t)V;
            double mx = -INFINITY, sum = 0;
            for (int v = 0; v < V; v++) {
                mx = row[v] / temp > mx ? row[v] / temp : mx;
            }
            for (int v = 0; v < V; v++) {
                sum += exp(row[v] / temp - mx);
            }
            double lse = mx + log(sum);
            int best[S_MAX_TOP];
            int nb = 0;
            for (int v = 0; v < V; v++) { // top k by insertion
                int at = nb;
                while (at > 0 && row[v] > row[best[at - 1]]) {
                    at--;
                }
                if (at < k) {
                    int end = nb < k ? nb : k - 1;
                    memmove(best + at + 1, best + at, (size_t)(end - at) * sizeof *best);
                    best[at] = v;
                    nb = nb < k ? nb + 1 : k;
                }
            }
            for (int b = 0; !st && b < nb; b++) {
                char *bt = NULL;
                size_t btl = 0;
                int32_t bid = best[b];
                rl_tokenizer_decode(tok, &bid, 1, 0, &bt, &btl);
                json_t *v =
                    s_logprob(row[bid] / temp - lse, choice, i, "top logprob", why, why_len);
                if (!v) {
                    st = 500;
                } else if (json_object_setn_new(top, bt ? bt : "", bt ? btl : 0, v)) {
                    snprintf(why, why_len, "out of memory");
                    st = 500;
                }
                free(bt);
            }
        }
        // the sampled token is always there (OpenAI's rule), with the forward's logprob
        if (!st && json_object_setn(top, txt ? txt : "", txt ? tl : 0, lp)) {
            snprintf(why, why_len, "out of memory");
            st = 500;
        }
        if (!st && json_array_append(tops, top)) {
            snprintf(why, why_len, "out of memory");
            st = 500;
        }
        json_decref(top);
        json_decref(lp);
        free(txt);
    }
    free(seq);
    free(logp);
    free(logits);
    if (st) {
        json_decref(out);
        return st;
    }
    *out_p = out;
    return 0;
}

// A request whose work is over the cap: 400 naming the fields, the work and the cap.
static int s_too_much(int64_t work, const char *how, int64_t cap, char **body_p) {
    return s_error(400, "invalid_request_error", "max_tokens", body_p,
                   "this request asks for %s%lld tokens of work (%s); this server takes at most "
                   "%lld per request (--http-max-work): send fewer prompts, or a smaller n or "
                   "max_tokens",
                   *how == 'n' ? "" : "at least ", (long long)work, how, (long long)cap);
}

int rl_http_complete(rl_model_t *model, rl_tokenizer_t *tok, const char *model_name,
                     const rl_http_call_t *call, const char *body, size_t len, int *status,
                     char **body_p) {
    *body_p = NULL;
    const rl_http_call_t none = {0};
    call = call ? call : &none;
    const int64_t cap = call->max_work > 0 ? call->max_work : RL_HTTP_MAX_WORK;
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        *status = s_error(400, "invalid_request_error", NULL, body_p,
                          "the body is not a JSON object (%s at line %d, column %d)",
                          o ? "not an object" : je.text, je.line, je.column);
        return 0;
    }
    s_req_t q;
    int st = s_parse(o, &q, body_p);
    if (st) {
        json_decref(o);
        *status = st;
        return 0;
    }
    // the work before the prompts are tokenized (at least one token each), then with their tokens
    char how[160];
    int64_t work = (int64_t)q.n * q.n_prompts * ((int64_t)q.max_tokens + 1);
    if (work > cap) {
        snprintf(how, sizeof how, "%d prompt%s x n %d x (max_tokens %d + at least 1 prompt token)",
                 q.n_prompts, q.n_prompts == 1 ? "" : "s", q.n, q.max_tokens);
        json_decref(o);
        *status = s_too_much(work, how, cap, body_p);
        return 0;
    }
    // the prompts' ids
    int32_t *ids[S_MAX_PROMPTS] = {0};
    size_t nids[S_MAX_PROMPTS] = {0};
    rl_sampler_prompt_t pr[S_MAX_PROMPTS];
    int ctx = rl_model_config(model)->max_position_embeddings;
    for (int i = 0; !st && i < q.n_prompts; i++) {
        if (rl_tokenizer_encode(tok, q.prompts[i].text, q.prompts[i].len, 0, &ids[i], &nids[i]) !=
            0) {
            st = s_error(400, "invalid_request_error", "prompt", body_p, "prompt %d: %s", i,
                         rl_tokenizer_errmsg(tok));
        } else if (nids[i] == 0) {
            st = s_error(400, "invalid_request_error", "prompt", body_p,
                         "prompt %d encodes to no tokens (the first token needs a context)", i);
        } else if (ctx > 0 && (long long)nids[i] + q.max_tokens > ctx) {
            st = s_error(400, "invalid_request_error", "max_tokens", body_p,
                         "prompt %d has %zu tokens; with max_tokens %d that is more than the "
                         "model's context of %d",
                         i, nids[i], q.max_tokens, ctx);
        }
        pr[i] = (rl_sampler_prompt_t){ids[i], (int)nids[i], (uint64_t)i};
    }
    int64_t prompt_sum = 0;
    for (int i = 0; i < q.n_prompts; i++) {
        prompt_sum += (int64_t)nids[i];
    }
    work = (int64_t)q.n * (prompt_sum + (int64_t)q.n_prompts * q.max_tokens);
    if (!st && work > cap) {
        snprintf(how, sizeof how, "n %d x (%lld prompt tokens + %d prompt%s x max_tokens %d)", q.n,
                 (long long)prompt_sum, q.n_prompts, q.n_prompts == 1 ? "" : "s", q.max_tokens);
        st = s_too_much(work, how, cap, body_p);
    }
    rl_sampler_result_t *res = NULL;
    rl_sampler_t *smp = st ? NULL : rl_sampler_new(model);
    if (!st && !smp) {
        st = s_error(500, "server_error", NULL, body_p, "out of memory");
    }
    if (!st) {
        rl_sampler_params_t sp;
        rl_sampler_params_default(&sp);
        sp.sample.temperature = (float)q.temperature;
        sp.sample.top_p = q.temperature > 0 ? (float)q.top_p : 1.0f;
        sp.n = q.n;
        sp.max_new_tokens = q.max_tokens;
        sp.seed = q.seed;
        sp.no_eos = q.ignore_eos;
        sp.cancel = call->cancel;
        sp.cancel_arg = call->cancel_arg;
        s_live_t live = {tok, &q, call};
        if (call->on_text) {
            sp.on_token = s_on_token;
            sp.on_token_arg = &live;
        }
        int rc = rl_sampler_generate(smp, pr, q.n_prompts, &sp, &res);
        if (rc == RL_ECANCELED) {
            st = s_error(499, "client_closed_request", NULL, body_p, "%s", rl_sampler_errmsg(smp));
        } else if (rc) {
            st = s_error(rc == RL_EINVAL ? 400 : 500,
                         rc == RL_EINVAL ? "invalid_request_error" : "server_error", NULL, body_p,
                         "%s", rl_sampler_errmsg(smp));
        }
    }
    json_t *choices = json_array();
    long long prompt_tokens = 0, completion_tokens = 0;
    double lp_temp = q.temperature > 0 ? q.temperature : 1.0;
    for (int i = 0; !st && i < q.n_prompts; i++) {
        prompt_tokens += (long long)nids[i];
    }
    for (int j = 0; !st && j < q.n_prompts * q.n; j++) {
        s_cut_t c;
        if (s_cut(tok, &q, &res[j], &c) != 0) {
            st = s_error(500, "server_error", NULL, body_p, "out of memory");
            free(c.offset);
            free(c.text);
            break;
        }
        completion_tokens += res[j].n_ids;
        json_t *lp = json_null();
        if (q.logprobs >= 0 && call->cancel && call->cancel(call->cancel_arg)) {
            st = s_error(499, "client_closed_request", NULL, body_p,
                         "cancelled before the logprobs of choice %d", j);
        } else if (q.logprobs >= 0) {
            char why[512] = "";
            int p = res[j].prompt;
            st = s_logprobs(model, tok, ids[p], (int)nids[p], &res[j], &c, q.logprobs, lp_temp, j,
                            &lp, why, sizeof why);
            if (st) {
                st = s_error(st, st == 400 ? "invalid_request_error" : "server_error",
                             st == 400 ? "logprobs" : NULL, body_p, "%s", why);
            }
        }
        if (!st) { // every choice is in the reply, or the reply is an error
            json_t *ch = json_pack("{s:s%,s:i,s:o,s:s}", "text", c.text, c.text_len, "index", j,
                                   "logprobs", lp, "finish_reason", c.stopped ? "stop" : "length");
            if (ch && q.token_ids) {
                // what the text came from: the kept tokens, and the stop token that ended them
                int p = res[j].prompt;
                int nt = c.kept +
                         (c.kept == res[j].n_ids - 1 && res[j].finish == RL_SAMPLER_FINISH_STOP);
                json_t *pt = json_array(), *ct = json_array();
                for (size_t i = 0; pt && i < nids[p]; i++) {
                    json_array_append_new(pt, json_integer(ids[p][i]));
                }
                for (int i = 0; ct && i < nt; i++) {
                    json_array_append_new(ct, json_integer(res[j].ids[i]));
                }
                if (json_object_set_new(ch, "prompt_token_ids", pt) ||
                    json_object_set_new(ch, "token_ids", ct)) {
                    json_decref(ch);
                    ch = NULL;
                }
            }
            if (!ch || json_array_append_new(choices, ch)) {
                st = s_error(500, "server_error", NULL, body_p,
                             "choice %d cannot be written as JSON (out of memory, or its text "
                             "is not UTF-8)",
                             j);
            }
        }
        free(c.text);
        free(c.offset);
    }
    if (!st) {
        unsigned char rnd[12];
        char id[40] = "cmpl-";
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
            memset(rnd, 0, sizeof rnd);
        }
        for (size_t i = 0; i < sizeof rnd; i++) {
            snprintf(id + 5 + 2 * i, 3, "%02x", rnd[i]);
        }
        json_t *r =
            json_pack("{s:s,s:s,s:I,s:s,s:O,s:{s:I,s:I,s:I}}", "id", id, "object",
                      "text_completion", "created", (json_int_t)time(NULL), "model", model_name,
                      "choices", choices, "usage", "prompt_tokens", (json_int_t)prompt_tokens,
                      "completion_tokens", (json_int_t)completion_tokens, "total_tokens",
                      (json_int_t)(prompt_tokens + completion_tokens));
        *body_p = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        st = *body_p ? 200 : s_error(500, "server_error", NULL, body_p, "out of memory");
    }
    json_decref(choices);
    if (res) {
        rl_sampler_results_free(&res, q.n_prompts * q.n);
    }
    rl_sampler_destroy(&smp);
    for (int i = 0; i < q.n_prompts; i++) {
        free(ids[i]);
    }
    json_decref(o);
    *status = st;
    return 0;
}

// ---- the server -------------------------------------------------------------------------------
//
// Three threads: MHD's I/O thread (reads every request, answers all but completions at once),
// the generation thread (completions, one at a time from a FIFO queue: the backend lends one
// model) and the watchdog (the head and body deadlines). A completion suspends its connection
// (MHD then neither reads nor times it out) until the generation thread has its answer and
// resumes it; meanwhile the generation thread asks the socket, before every model step, whether
// the client is still there. h->mu guards the socket list, the queue and the requests' states.

// A connection's phase, for its deadline.
enum {
    S_HEAD, // waiting for a request's head (since the accept or the previous response)
    S_BODY, // the head is in: waiting for the body
    S_BUSY, // the request is in: answered, or queued, or generating (no deadline)
    S_SHUT, // over its deadline: shut down, MHD closes it
};

typedef struct s_sock { // one connection (MHD's socket_context)
    int fd;
    int phase;
    double since; // monotonic seconds when the phase began
    struct s_sock *prev, *next;
} s_sock_t;

typedef enum { S_READING, S_QUEUED, S_RUNNING, S_DONE } s_state_t;

typedef struct s_conn { // one request (MHD's con_cls)
    char *buf;
    size_t len;
    int too_big;
    int chat; // /v1/chat/completions (else /v1/completions)
    int sse;  // the answer is server-sent events
    // a completion: queued, then generated, then answered by the I/O thread
    rl_http_t *h;
    s_state_t state;
    struct MHD_Connection *con;
    int fd;
    uint32_t ip; // the client's IPv4 address
    int status;  // once DONE: the answer (499: the client left; close without one)
    char *body;
    struct s_conn *next;
    // a stream (chat with stream: true) once its first event is written: the events not yet
    // sent (sbuf[soff, slen)), under h->mu. The reader (MHD's thread) suspends the connection
    // when it has sent them all (wait 1 while it suspends, 2 once suspended); the generation
    // thread resumes it when it writes more or ends (resume_due: it wrote while wait was 1,
    // the reader resumes then). The stream may outlive its request: a client that leaves
    // mid-stream has MHD finish the request while the generation runs (orphan: the generation
    // thread frees the request then, and never touches its connection again).
    int streaming, s_end, s_err, wait, resume_due;
    char *sbuf;
    size_t slen, soff, scap;
    atomic_int orphan;
} s_conn_t;

struct rl_http {
    struct MHD_Daemon *d;
    const rl_http_backend_t *backend;
    char token[256]; // "" = none
    int port;
    int64_t max_work;
    const char *chat_builtin; // a built-in template's text, or NULL: the tokenizer's
    const char *chat_name;
    int tool_parser;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; // the generation thread's: a completion is queued, or stop
    pthread_cond_t dog_cv;  // the watchdog's (monotonic clock): stop
    s_sock_t *socks;        // the live connections
    s_conn_t *head, *tail;  // completions waiting
    int n_wait;
    s_conn_t *running; // the completion generating
    atomic_int stopping;
    pthread_t gen, dog;
    int gen_up, dog_up;
};

static double s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static enum MHD_Result s_send_as(struct MHD_Connection *con, int status, char *body, int sse) {
    const char *b = body ? body : "{}";
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(b), (void *)b, body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", sse ? "text/event-stream" : "application/json");
    if (sse) {
        MHD_add_response_header(r, "Cache-Control", "no-cache");
    }
    if (status == 429) {
        MHD_add_response_header(r, "Retry-After", "1");
    }
    enum MHD_Result ret = MHD_queue_response(con, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result s_send(struct MHD_Connection *con, int status, char *body) {
    return s_send_as(con, status, body, 0);
}

// 1 when the request carries the configured bearer token (constant time), or none is needed.
static int s_authorized(const rl_http_t *h, struct MHD_Connection *con) {
    if (!h->token[0]) {
        return 1;
    }
    const char *a = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
    size_t n = strlen(h->token);
    if (!a || strncmp(a, "Bearer ", 7) != 0 || strlen(a + 7) != n) {
        return 0;
    }
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)(a[7 + i] ^ h->token[i]);
    }
    return d == 0;
}

// ---- deadlines

// Moves con's connection to phase (its deadline restarts), unless the watchdog shut it.
static void s_phase(rl_http_t *h, struct MHD_Connection *con, int phase) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    s_sock_t *s = ci ? ci->socket_context : NULL;
    if (s) {
        pthread_mutex_lock(&h->mu);
        if (s->phase != S_SHUT) {
            s->phase = phase;
            s->since = s_now();
        }
        pthread_mutex_unlock(&h->mu);
    }
}

// MHD's connection start and close: the list the watchdog walks. MHD calls CLOSED before it
// closes the socket, so under h->mu a listed fd is always this connection's own.
static void s_notify(void *cls, struct MHD_Connection *con, void **socket_context,
                     enum MHD_ConnectionNotificationCode toe) {
    rl_http_t *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
        s_sock_t *s = calloc(1, sizeof *s);
        if (!s || !ci) { // no deadline could be kept: not served
            free(s);
            if (ci) {
                shutdown(ci->connect_fd, SHUT_RDWR);
            }
            return;
        }
        s->fd = ci->connect_fd;
        s->phase = S_HEAD;
        s->since = s_now();
        pthread_mutex_lock(&h->mu);
        s->next = h->socks;
        if (h->socks) {
            h->socks->prev = s;
        }
        h->socks = s;
        pthread_mutex_unlock(&h->mu);
        *socket_context = s;
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        s_sock_t *s = *socket_context;
        pthread_mutex_lock(&h->mu);
        if (s->prev) {
            s->prev->next = s->next;
        } else {
            h->socks = s->next;
        }
        if (s->next) {
            s->next->prev = s->prev;
        }
        pthread_mutex_unlock(&h->mu);
        free(s);
        *socket_context = NULL;
    }
}

// The watchdog: four times a second, shuts down the connections past their head or body
// deadline (MHD's own timeout restarts at every byte, so a client trickling one byte at a time
// would hold a connection for ever). MHD then reads the end of the stream and closes them.
static void *s_watchdog(void *arg) {
    rl_http_t *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!atomic_load(&h->stopping)) {
        double now = s_now();
        for (s_sock_t *s = h->socks; s; s = s->next) {
            double limit = s->phase == S_HEAD   ? RL_HTTP_HEAD_S
                           : s->phase == S_BODY ? RL_HTTP_BODY_S
                                                : 0;
            if (limit > 0 && now - s->since > limit) {
                shutdown(s->fd, SHUT_RDWR);
                s->phase = S_SHUT;
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->dog_cv, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

// ---- completions: the queue and the generation thread

// 1 when the client of a suspended connection is gone: it closed its side (or the connection
// broke). Bytes it sent after its request (a pipelined next one) do not count as gone.
static int s_gone(int fd) {
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

// The message of an OpenAI error object's text ("" when there is none). borrowed from a static
// buffer: for one log line.
static const char *s_error_message(const char *body) {
    static char msg[256];
    json_t *o = body ? json_loads(body, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
    snprintf(msg, sizeof msg, "%s", m ? m : "");
    json_decref(o);
    return msg;
}

// The sampler's cancel question: the server stops, or the client left.
static int s_cancelled(void *arg) {
    s_conn_t *c = arg;
    return atomic_load(&c->h->stopping) || atomic_load(&c->orphan) || s_gone(c->fd);
}

// The reader of c's stream must look again (more events, or the end), under h->mu: 1 when it is
// suspended (the caller resumes the connection, after unlocking); 0 when it is running, or
// suspending (it resumes the connection itself once suspended: resume_due).
static int s_wake(s_conn_t *c) {
    int suspended = c->wait == 2;
    c->resume_due |= c->wait == 1;
    c->wait = suspended ? 0 : c->wait;
    return suspended;
}

// A stream's events, from the generation thread (rl_http_call_t.write): queued for the reader.
// The first resumes the connection (suspended since it was queued) for s_handler to answer with
// the stream; later ones resume it when the reader waits. Non-zero: the stream cannot go on.
static int s_stream_write(void *arg, const char *b, size_t n) {
    s_conn_t *c = arg;
    rl_http_t *h = c->h;
    pthread_mutex_lock(&h->mu);
    if (atomic_load(&c->orphan) || c->s_err) {
        pthread_mutex_unlock(&h->mu);
        return 1;
    }
    if (c->slen + n > c->scap) {
        size_t cap = (c->slen + n) * 2;
        char *nb = realloc(c->sbuf, cap);
        if (!nb) {
            c->s_err = 1;
            pthread_mutex_unlock(&h->mu);
            return 1;
        }
        c->sbuf = nb;
        c->scap = cap;
    }
    memcpy(c->sbuf + c->slen, b, n);
    c->slen += n;
    int resume = !c->streaming || s_wake(c); // the first: suspended since it was queued
    c->streaming = 1;
    pthread_mutex_unlock(&h->mu);
    if (resume) {
        MHD_resume_connection(c->con);
    }
    return 0;
}

// MHD's content reader of a stream (its I/O thread): the events queued; none yet: the connection
// is suspended until the generation thread writes more; the end once the generation ended.
static ssize_t s_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    s_conn_t *c = cls;
    rl_http_t *h = c->h;
    pthread_mutex_lock(&h->mu);
    if (c->soff < c->slen) {
        size_t n = c->slen - c->soff < max ? c->slen - c->soff : max;
        memcpy(buf, c->sbuf + c->soff, n);
        c->soff += n;
        if (c->soff == c->slen) {
            c->soff = c->slen = 0;
        }
        pthread_mutex_unlock(&h->mu);
        return (ssize_t)n;
    }
    if (c->s_end) {
        int err = c->s_err;
        pthread_mutex_unlock(&h->mu);
        return err ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    c->wait = 1;
    pthread_mutex_unlock(&h->mu);
    MHD_suspend_connection(c->con);
    pthread_mutex_lock(&h->mu);
    int resume = c->resume_due;
    c->resume_due = 0;
    c->wait = resume ? 0 : 2;
    pthread_mutex_unlock(&h->mu);
    if (resume) {
        MHD_resume_connection(c->con);
    }
    return 0;
}

// The answer of a stream whose first event is written: 200, text/event-stream, chunked.
static enum MHD_Result s_send_stream(struct MHD_Connection *con, s_conn_t *c) {
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, s_stream_read, c, NULL);
    if (!r) {
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(con, 200, r);
    MHD_destroy_response(r);
    return ret;
}

// Completions of this address waiting or running. Under h->mu.
static int s_outstanding(const rl_http_t *h, uint32_t ip) {
    int n = h->running && h->running->ip == ip;
    for (const s_conn_t *c = h->head; c; c = c->next) {
        n += c->ip == ip;
    }
    return n;
}

// One completion on the generation thread: c->status and c->body.
static void s_generate(rl_http_t *h, s_conn_t *c) {
    rl_model_t *model = NULL;
    rl_tokenizer_t *tok = NULL;
    char why[512] = "";
    double t0 = s_now();
    if (atomic_load(&h->stopping)) {
        c->status = s_error(503, "server_error", NULL, &c->body, "the server is stopping");
    } else if (s_gone(c->fd)) {
        c->status = 499; // left while it waited: nothing to do, nobody to answer
    } else if (h->backend->acquire(h->backend->ctx, &model, &tok, why, sizeof why) != 0) {
        c->status = s_error(503, "server_error", NULL, &c->body, "%s", why);
    } else {
        rl_http_call_t call = {h->max_work, s_cancelled, c, NULL, NULL, NULL, NULL};
        if (c->chat) {
            rl_http_chat_t chat = {
                h->chat_builtin ? h->chat_builtin : h->backend->chat_template,
                h->chat_builtin ? h->chat_name : "the model's chat template", h->tool_parser};
            call.write = s_stream_write;
            call.write_arg = c;
            rl_http_chat(model, tok, &chat, h->backend->model_name, &call, c->buf ? c->buf : "",
                         c->len, &c->status, &c->body, &c->sse);
        } else {
            rl_http_complete(model, tok, h->backend->model_name, &call, c->buf ? c->buf : "",
                             c->len, &c->status, &c->body);
        }
        h->backend->release(h->backend->ctx);
        if (c->status == 499 && atomic_load(&h->stopping)) {
            free(c->body);
            c->status = s_error(503, "server_error", NULL, &c->body, "the server is stopping");
        } else if (c->status == 499) {
            rl_log_info("http: a client left; its completion stopped after %.1f s (%s)",
                        s_now() - t0, s_error_message(c->body));
        }
    }
}

static void *s_generator(void *arg) {
    rl_http_t *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->head && !atomic_load(&h->stopping)) {
            pthread_cond_wait(&h->work_cv, &h->mu);
        }
        s_conn_t *c = h->head;
        if (!c) {
            break; // stopping, and nothing waits
        }
        h->head = c->next;
        h->tail = h->head ? h->tail : NULL;
        h->n_wait--;
        c->state = S_RUNNING;
        h->running = c;
        pthread_mutex_unlock(&h->mu);
        s_generate(h, c);
        pthread_mutex_lock(&h->mu);
        h->running = NULL;
        c->state = S_DONE;
        int resume = 1;                // c is the I/O thread's again
        if (atomic_load(&c->orphan)) { // its request is over: nobody else holds it
            free(c->buf);
            free(c->body);
            free(c->sbuf);
            free(c);
            resume = 0;
        } else if (c->streaming) { // the reader ends the stream once it has sent the rest
            c->s_end = 1;
            c->s_err |= c->status != 200; // cancelled: the stream breaks off
            resume = s_wake(c);
        }
        pthread_mutex_unlock(&h->mu);
        if (resume) {
            MHD_resume_connection(c->con);
        }
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

// A completion whose body is in: refused (429, 503) or queued with its connection suspended.
static enum MHD_Result s_enqueue(rl_http_t *h, struct MHD_Connection *con, s_conn_t *c) {
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ai || !fi) {
        return MHD_NO;
    }
    const struct sockaddr_in *sa = (const struct sockaddr_in *)(const void *)ai->client_addr;
    c->h = h;
    c->con = con;
    c->fd = fi->connect_fd;
    c->ip = sa->sin_family == AF_INET ? ntohl(sa->sin_addr.s_addr) : 0;
    pthread_mutex_lock(&h->mu);
    int stopping = atomic_load(&h->stopping), mine = s_outstanding(h, c->ip), all = h->n_wait;
    pthread_mutex_unlock(&h->mu);
    char *body = NULL, addr[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa->sin_addr, addr, sizeof addr);
    int status = 0;
    if (stopping) {
        status = s_error(503, "server_error", NULL, &body, "the server is stopping");
    } else if (mine >= RL_HTTP_QUEUE_PER_CLIENT) {
        status = s_error(429, "rate_limit_error", NULL, &body,
                         "%s already has %d completions waiting or running (at most %d per "
                         "client): retry when one is answered",
                         addr, mine, RL_HTTP_QUEUE_PER_CLIENT);
    } else if (all >= RL_HTTP_QUEUE) {
        status =
            s_error(429, "rate_limit_error", NULL, &body,
                    "%d completions are waiting (at most %d): retry later", all, RL_HTTP_QUEUE);
    }
    if (status) {
        return s_send(con, status, body);
    }
    // suspended before the generation thread can see it: its resume must come after this
    MHD_suspend_connection(con);
    pthread_mutex_lock(&h->mu);
    if (atomic_load(&h->stopping)) { // the generation thread may be gone: answer it here
        pthread_mutex_unlock(&h->mu);
        c->status = s_error(503, "server_error", NULL, &c->body, "the server is stopping");
        c->state = S_DONE;
        MHD_resume_connection(con);
        return MHD_YES;
    }
    c->state = S_QUEUED;
    c->next = NULL;
    if (h->tail) {
        h->tail->next = c;
    } else {
        h->head = c;
    }
    h->tail = c;
    h->n_wait++;
    pthread_cond_signal(&h->work_cv);
    pthread_mutex_unlock(&h->mu);
    return MHD_YES;
}

// ---- requests

static enum MHD_Result s_handler(void *cls, struct MHD_Connection *con, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
    (void)version;
    rl_http_t *h = cls;
    s_conn_t *c = *con_cls;
    if (!c) { // the head is in: keep state for the body, whose deadline starts now
        if (!(c = calloc(1, sizeof *c))) {
            return MHD_NO;
        }
        atomic_init(&c->orphan, 0);
        c->fd = -1;
        *con_cls = c;
        s_phase(h, con, S_BODY);
        return MHD_YES;
    }
    pthread_mutex_lock(&h->mu);
    int streaming = c->streaming;
    pthread_mutex_unlock(&h->mu);
    if (streaming) { // a stream, its first event written: answered by the reader
        return s_send_stream(con, c);
    }
    if (c->state == S_DONE) { // a completion, back from the generation thread
        if (c->status == 499) {
            return MHD_NO; // its client left: close
        }
        char *b = c->body;
        c->body = NULL;
        return s_send_as(con, c->status, b, c->sse && c->status == 200);
    }
    if (*upload_size > 0) {
        if (c->len + *upload_size > S_BODY_MAX) {
            c->too_big = 1;
        } else {
            char *nb = realloc(c->buf, c->len + *upload_size + 1);
            if (!nb) {
                return MHD_NO;
            }
            c->buf = nb;
            memcpy(c->buf + c->len, upload, *upload_size);
            c->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    s_phase(h, con, S_BUSY);
    char *body = NULL;
    int status;
    if (!s_authorized(h, con)) {
        status = s_error(401, "invalid_request_error", NULL, &body,
                         "a bearer token is required (Authorization: Bearer ...)");
    } else if (c->too_big) {
        status = s_error(413, "invalid_request_error", NULL, &body, "the body is over %u bytes",
                         S_BODY_MAX);
    } else if (!strcmp(url, "/v1/models")) {
        if (strcmp(method, "GET")) {
            status = s_error(405, "invalid_request_error", NULL, &body, "use GET");
        } else {
            json_t *r = json_pack("{s:s,s:[{s:s,s:s,s:s}]}", "object", "list", "data", "id",
                                  h->backend->model_name, "object", "model", "owned_by", "rlctl");
            body = r ? json_dumps(r, JSON_COMPACT) : NULL;
            json_decref(r);
            status = body ? 200 : s_error(500, "server_error", NULL, &body, "out of memory");
        }
    } else if (!strcmp(url, "/v1/completions") || !strcmp(url, "/v1/chat/completions")) {
        if (strcmp(method, "POST")) {
            status = s_error(405, "invalid_request_error", NULL, &body, "use POST");
        } else {
            c->chat = !strcmp(url, "/v1/chat/completions");
            return s_enqueue(h, con, c);
        }
    } else {
        status = s_error(404, "invalid_request_error", NULL, &body,
                         "no such path: %s (this server has /v1/completions, "
                         "/v1/chat/completions and /v1/models)",
                         url);
    }
    return s_send(con, status, body);
}

// A request is over (answered, or its connection closed): the connection waits for the next
// request's head, under the head deadline again.
static void s_completed(void *cls, struct MHD_Connection *con, void **con_cls,
                        enum MHD_RequestTerminationCode toe) {
    (void)toe;
    rl_http_t *h = cls;
    s_conn_t *c = *con_cls;
    if (c) {
        pthread_mutex_lock(&h->mu);
        int running = c->state == S_RUNNING; // a stream whose client left: the generation's
        if (running) {
            atomic_store(&c->orphan, 1);
        }
        pthread_mutex_unlock(&h->mu);
        if (!running) {
            free(c->buf);
            free(c->body);
            free(c->sbuf);
            free(c);
        }
    }
    *con_cls = NULL;
    s_phase(h, con, S_HEAD);
}

// libmicrohttpd's own messages (a connection refused at the per-client limit, a client gone):
// one per event, which a flood of connections would turn into a flood of lines; debug level.
static void s_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n') {
        msg[--n] = '\0';
    }
    rl_log_debug("http: %s", msg);
}

// Reads the bearer token file, refused unless it is ours and readable by us alone (as a secret
// key file: rl_curve_read_secret). Returns 0 or an error naming the file.
static int s_read_token(const char *path, char *token, size_t cap, char *err, size_t err_len) {
    char *b = NULL, e[600];
    if (rl_curve_read_secret(path, "bearer token file", &b, e, sizeof e) != 0) {
        return rl_errf(err, err_len, RL_EINVAL, "--http-token %s", e);
    }
    size_t n = strlen(b);
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == ' ')) {
        n--;
    }
    int rc = 0;
    if (n < 16 || n >= cap) {
        rc = rl_errf(err, err_len, RL_EINVAL, "--http-token %s: a token of %s", path,
                     n < 16 ? "at least 16 characters" : "at most 255 characters");
    } else {
        memcpy(token, b, n);
        token[n] = '\0';
    }
    memset(b, 0, strlen(b));
    free(b);
    return rc;
}

// Stops the threads (the generation thread answers what waits and resumes every connection it
// held), then MHD, then frees. Any part may be missing (a failed start).
static void s_free(rl_http_t *h) {
    pthread_mutex_lock(&h->mu);
    atomic_store(&h->stopping, 1);
    pthread_cond_broadcast(&h->work_cv);
    pthread_cond_broadcast(&h->dog_cv);
    pthread_mutex_unlock(&h->mu);
    if (h->gen_up) {
        pthread_join(h->gen, NULL);
    }
    if (h->dog_up) {
        pthread_join(h->dog, NULL);
    }
    if (h->d) {
        MHD_stop_daemon(h->d); // no connection is suspended now
    }
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->work_cv);
    pthread_cond_destroy(&h->dog_cv);
    memset(h->token, 0, sizeof h->token);
    free(h);
}

int rl_http_start(const rl_http_opts_t *opts, const rl_http_backend_t *backend, rl_http_t **out,
                  char *err, size_t err_len) {
    *out = NULL;
    const char *addr = opts->addr;
    char host[128];
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host) {
        return rl_errf(err, err_len, RL_EINVAL, "--http '%s': expected HOST:PORT",
                       addr ? addr : "");
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (!end || *end || port < 0 || port > 65535) {
        return rl_errf(err, err_len, RL_EINVAL, "--http '%s': bad port", addr);
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost")) {
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        return rl_errf(err, err_len, RL_EINVAL, "--http '%s': '%s' is not an IPv4 address", addr,
                       host);
    }
    if (opts->max_work < 0) {
        return rl_errf(err, err_len, RL_EINVAL, "--http-max-work %lld: must be >= 1",
                       (long long)opts->max_work);
    }
    rl_tool_parser_t parser = RL_TOOL_PARSER_HERMES;
    if (opts->tool_parser && rl_tool_parser_find(opts->tool_parser, &parser) != 0) {
        return rl_errf(err, err_len, RL_EINVAL, "--tool-parser '%s': one of %s", opts->tool_parser,
                       rl_tool_parser_names());
    }
    const char *builtin = opts->chat_template ? rl_chat_builtin_text(opts->chat_template) : NULL;
    if (opts->chat_template && !builtin) {
        return rl_errf(err, err_len, RL_EINVAL, "--chat-template '%s': chatml or llama3",
                       opts->chat_template);
    }
    int loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    if (!opts->token_file && !loopback) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "--http %s is not a loopback address: give --http-token FILE (a bearer "
                       "token every request must carry), or serve on 127.0.0.1",
                       addr);
    }
    rl_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    h->backend = backend;
    h->max_work = opts->max_work > 0 ? opts->max_work : RL_HTTP_MAX_WORK;
    h->chat_builtin = builtin;
    h->chat_name = opts->chat_template;
    h->tool_parser = (int)parser;
    atomic_init(&h->stopping, 0);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->work_cv, NULL);
    pthread_cond_init(&h->dog_cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = opts->token_file
                 ? s_read_token(opts->token_file, h->token, sizeof h->token, err, err_len)
                 : 0;
    if (!rc) {
        h->gen_up = pthread_create(&h->gen, NULL, s_generator, h) == 0;
        h->dog_up = h->gen_up && pthread_create(&h->dog, NULL, s_watchdog, h) == 0;
        rc = h->dog_up ? 0 : rl_errf(err, err_len, RL_ENOMEM, "cannot start the HTTP threads");
    }
    if (!rc) {
        // epoll (or the best poller there is) on MHD's own thread; suspend/resume for
        // completions; the per-address and total connection limits; MHD's idle timeout is the
        // bound on a client that stops reading its response
        h->d = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                MHD_USE_ERROR_LOG,
            0, NULL, NULL, s_handler, h, MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, NULL,
            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, s_completed,
            h, MHD_OPTION_NOTIFY_CONNECTION, s_notify, h, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)RL_HTTP_CONNS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)RL_HTTP_CONNS_PER_CLIENT, MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)RL_HTTP_IDLE_S, MHD_OPTION_END);
        if (!h->d) {
            rc = rl_errf(err, err_len, RL_EIO, "cannot serve HTTP at %s (address in use?)", addr);
        }
    }
    if (rc) {
        s_free(h);
        return rc;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : (int)port;
    *out = h;
    return 0;
}

int rl_http_port(const rl_http_t *self) {
    return self->port;
}

void rl_http_stop(rl_http_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    s_free(*self_p);
    *self_p = NULL;
}

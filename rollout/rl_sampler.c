// rl_sampler — the sampler engine (contract in rl_sampler.h).
//
// Shape of one call, with S = min(n_prompts * n, max_batch) KV cache slots:
//   loop:
//     admit:  while slots are free and prompts remain, give the next prompt k = min(free, its
//             samples left) slots, and prefill all but its last token into the first of them
//             (one rl_model_step for all admitted prompts, in chunks of S_PREFILL_CHUNK tokens,
//             no logits).
//     step:   ONE rl_model_step with one row per slot: the last drawn token of every running
//             sequence, and the last prompt token of every admitted prompt (in its first slot).
//             An admitted prompt's slot is then copied into its other k-1 slots (len positions)
//             and its k samples draw their first token from that shared row, each with its own
//             RNG stream; running sequences draw their next token. A stop token or
//             max_new_tokens frees the slot for the next admission.
//     draw:   every uniform is taken from its sequence's stream before the step. On the CPU the
//             step returns the logits and each draw is rl_sample_token; a model on a GPU draws
//             where its logits are (rl_model_step_draw: the same pipeline, a token and a
//             logprob back per draw instead of V floats).
// Running the last prompt token in the step rather than in the prefill keeps the logits buffer
// at S rows (rl_model_step writes logits at the row index of the call) and costs nothing: it is
// one more row of a call that happens anyway. A prompt with more samples than slots is prefilled
// again for the samples admitted later; with n <= max_batch each prompt is prefilled once.
#include "rl_sampler.h"

#include "rl_err.h"
#include "rl_rng.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// most prompt tokens per prefill call: bounds the model's activation scratch (it grows with n)
#define S_PREFILL_CHUNK 2048

// A kept sequence (rl_sampler_params_t.sessions): its ids and, in slot `i` of the store (its
// index in the array), the KV cache of all but its last token.
typedef struct {
    uint64_t key; // 0: a free entry
    int32_t *ids;
    int len;
    int touched; // named by the call in progress
} s_sess_t;

#define S_MAX_SESSIONS 4096

struct rl_sampler {
    rl_model_t *model;     // borrowed
    rl_kvcache_t *cache;   // kept between calls while big enough
    int cache_slots, cache_len;
    rl_kvcache_t *store; // the sessions' caches (slot i: sess[i])
    s_sess_t *sess;
    int n_sess, store_len; // entries (= the store's slots), its positions per slot
    rl_sampler_stats_t stats;
    char errmsg[512];
};

typedef struct {
    rl_rng_t rng;
    int prompt, sample;
    int slot;              // -1 when not running
    int last_slot;         // the slot it ran in (its cache stays there until the next admission)
    int done;
} s_seq_t;

const char *rl_sampler_finish_name(rl_sampler_finish_t finish) {
    return finish == RL_SAMPLER_FINISH_STOP ? "stop" : "length";
}

void rl_sampler_params_default(rl_sampler_params_t *p) {
    memset(p, 0, sizeof(*p));
    rl_sample_opts_default(&p->sample);
    p->n = 1;
    p->max_new_tokens = 256;
}

rl_sampler_t *rl_sampler_new(rl_model_t *model) {
    RL_ASSERT(model);
    rl_sampler_t *self = calloc(1, sizeof(*self));
    if (self) {
        self->model = model;
    }
    return self;
}

void rl_sampler_destroy(rl_sampler_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_kvcache_destroy(&(*self_p)->cache);
    rl_sampler_sessions_clear(*self_p);
    free(*self_p);
    *self_p = NULL;
}

void rl_sampler_sessions_clear(rl_sampler_t *self) {
    for (int i = 0; i < self->n_sess; i++) {
        free(self->sess[i].ids);
    }
    free(self->sess);
    self->sess = NULL;
    self->n_sess = self->store_len = 0;
    rl_kvcache_destroy(&self->store);
}

// The session kept under key, or NULL.
static s_sess_t *s_sess_find(rl_sampler_t *self, uint64_t key) {
    for (int i = 0; key && i < self->n_sess; i++) {
        if (self->sess[i].key == key) {
            return &self->sess[i];
        }
    }
    return NULL;
}

// Keeps sequence ids[0..len) under key with the KV of its first len - 1 positions, from `slot`
// of the work cache. A session is an optimisation: out of memory or past S_MAX_SESSIONS the
// sequence is simply not kept.
static void s_sess_keep(rl_sampler_t *self, uint64_t key, const int32_t *prompt, int plen,
                        const int32_t *gen, int glen, int slot) {
    int len = plen + glen, kv = len - 1;
    s_sess_t *e = s_sess_find(self, key);
    for (int i = 0; !e && i < self->n_sess; i++) {
        e = self->sess[i].key == 0 ? &self->sess[i] : NULL;
    }
    if (!e || kv > self->store_len) { // a bigger store: more slots or more positions
        int slots = e ? self->n_sess : self->n_sess ? self->n_sess * 2 : 64;
        int slen = kv > self->store_len ? (kv > 2 * self->store_len ? kv : 2 * self->store_len)
                                        : self->store_len;
        int ctx = rl_sampler_context(self);
        slen = slen > ctx ? ctx : slen;
        if (slots > S_MAX_SESSIONS || kv > slen) {
            return;
        }
        rl_kvcache_t *st = rl_kvcache_new(self->model, slots, slen);
        s_sess_t *ns = st ? realloc(self->sess, (size_t)slots * sizeof *ns) : NULL;
        if (!ns) {
            rl_kvcache_destroy(&st);
            return;
        }
        int at = e ? (int)(e - self->sess) : self->n_sess;
        memset(ns + self->n_sess, 0, (size_t)(slots - self->n_sess) * sizeof *ns);
        for (int i = 0; i < self->n_sess; i++) {
            if (ns[i].key) {
                rl_kvcache_copy_from(st, i, self->store, i, ns[i].len - 1);
            }
        }
        rl_kvcache_destroy(&self->store);
        self->store = st;
        self->sess = ns;
        self->n_sess = slots;
        self->store_len = slen;
        e = &self->sess[at];
    }
    int32_t *ids = realloc(e->ids, (size_t)len * sizeof *ids);
    if (!ids) {
        return;
    }
    memcpy(ids, prompt, (size_t)plen * sizeof *ids);
    memcpy(ids + plen, gen, (size_t)glen * sizeof *ids);
    e->ids = ids;
    e->len = len;
    e->key = key;
    e->touched = 1;
    rl_kvcache_copy_from(self->store, (int)(e - self->sess), self->cache, slot, kv);
}

int rl_sampler_context(const rl_sampler_t *self) {
    int ctx = rl_model_config(self->model)->max_position_embeddings;
    return ctx > 0 ? ctx : INT_MAX;
}

const char *rl_sampler_errmsg(const rl_sampler_t *self) { return self->errmsg; }

void rl_sampler_stats(const rl_sampler_t *self, rl_sampler_stats_t *out) { *out = self->stats; }

void rl_sampler_results_free(rl_sampler_result_t **results_p, int n) {
    if (!results_p || !*results_p) {
        return;
    }
    for (int i = 0; i < n; i++) {
        free((*results_p)[i].ids);
        free((*results_p)[i].logprobs);
    }
    free(*results_p);
    *results_p = NULL;
}

static int s_fail(rl_sampler_t *self, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(rl_sampler_t *self, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->errmsg, sizeof self->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

// ---------------------------------------------------------------------------------------------
// RNG streams: splitmix64's finaliser over (seed, prompt index, sample) so that nearby triples
// give unrelated streams.

static uint64_t s_mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t s_stream_seed(uint64_t seed, uint64_t index, int sample) {
    return s_mix(s_mix(s_mix(seed) ^ index) ^ (uint64_t)(uint32_t)sample);
}

// ---------------------------------------------------------------------------------------------
// checks

static int s_check(rl_sampler_t *self, const rl_sampler_prompt_t *prompts, int n_prompts,
                   const rl_sampler_params_t *p, int V) {
    char err[256];
    if (rl_sample_opts_check(&p->sample, err, sizeof err)) {
        return s_fail(self, RL_EINVAL, "%s", err);
    }
    if (p->n < 1) {
        return s_fail(self, RL_EINVAL, "n %d: samples per prompt must be >= 1", p->n);
    }
    if (p->max_new_tokens < 1) {
        return s_fail(self, RL_EINVAL, "max_new_tokens %d: must be >= 1", p->max_new_tokens);
    }
    if (p->max_batch < 0 || n_prompts < 0 || p->n_stop < 0 || (p->n_stop && !p->stop_ids)) {
        return s_fail(self, RL_EINVAL, "max_batch, n_prompts and n_stop must be >= 0");
    }
    for (int i = 0; i < p->n_stop; i++) {
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= V) {
            return s_fail(self, RL_EINVAL, "stop id %d is outside the vocabulary [0, %d)",
                          (int)p->stop_ids[i], V);
        }
    }
    int ctx = rl_sampler_context(self);
    for (int i = 0; i < n_prompts; i++) {
        const rl_sampler_prompt_t *q = &prompts[i];
        if (q->len < 1 || !q->ids) {
            return s_fail(self, RL_EINVAL, "prompt %d is empty (a prompt needs >= 1 token)", i);
        }
        if ((int64_t)q->len + p->max_new_tokens > ctx) {
            return s_fail(self, RL_EINVAL,
                          "prompt %d is too long: %d prompt tokens + max_new_tokens %d = %lld "
                          "positions, more than the model's context of %d "
                          "(max_position_embeddings)",
                          i, q->len, p->max_new_tokens,
                          (long long)q->len + p->max_new_tokens, ctx);
        }
        for (int t = 0; t < q->len; t++) {
            if (q->ids[t] < 0 || q->ids[t] >= V) {
                return s_fail(self, RL_EINVAL,
                              "prompt %d: token %d at position %d is outside the vocabulary "
                              "[0, %d)",
                              i, (int)q->ids[t], t, V);
            }
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// generate

typedef struct {
    // per call, freed at the end
    s_seq_t *seq;          // [total]
    int *slot_seq;         // [S] sequence running in the slot, or -1
    int32_t *tokens;       // [cap_tok] step inputs
    int *slots, *pos;      // [cap_tok]
    int *row_seq;          // [S] the sequence of each row of a step
    int *adm_seq, *adm_k;  // [S] admitted prompts: first sequence, number of samples
    int *dseq, *drow;      // [S] a step's draws: the sequence, the step row it draws from
    double *du;            // [S] their uniforms
    int32_t *dtok;         // [S] the drawn tokens
    float *dlp;            // [S] their logprobs
    // the CPU's draws (NULL with a model on a GPU)
    float *logits;         // [S, V]
    float *logp;           // [V] scratch
    float *probs;          // [V] scratch
    int32_t *idx;          // [V] scratch
    int32_t *stop;         // [n_stop_all]
    int n_stop;
    const rl_sampler_params_t *p; // the call's (borrowed)
} s_work_t;

static void s_work_free(s_work_t *w) {
    free(w->seq);
    free(w->slot_seq);
    free(w->tokens);
    free(w->slots);
    free(w->pos);
    free(w->row_seq);
    free(w->adm_seq);
    free(w->adm_k);
    free(w->dseq);
    free(w->drow);
    free(w->du);
    free(w->dtok);
    free(w->dlp);
    free(w->logits);
    free(w->logp);
    free(w->probs);
    free(w->idx);
    free(w->stop);
}

static int s_is_stop(const s_work_t *w, int32_t tok) {
    for (int i = 0; i < w->n_stop; i++) {
        if (w->stop[i] == tok) {
            return 1;
        }
    }
    return 0;
}

// Sequence k takes its drawn token; it ends on a stop token or at its length.
static void s_take(s_work_t *w, int k, int32_t tok, float lp, const rl_sampler_params_t *p,
                   rl_sampler_result_t *res) {
    s_seq_t *s = &w->seq[k];
    rl_sampler_result_t *r = &res[k];
    r->ids[r->n_ids] = tok;
    r->logprobs[r->n_ids] = lp;
    r->n_ids++;
    if (s_is_stop(w, tok)) {
        r->finish = RL_SAMPLER_FINISH_STOP;
        s->done = 1;
    } else if (r->n_ids == p->max_new_tokens) {
        r->finish = RL_SAMPLER_FINISH_LENGTH;
        s->done = 1;
    }
    if (s->done) {
        w->slot_seq[s->slot] = -1;
        s->last_slot = s->slot;
        s->slot = -1;
    }
    if (p->on_token) {
        p->on_token(p->on_token_arg, r, s->done);
    }
}

// Sequence k, when it has just ended and its prompt names a session: kept (s_sess_keep) before
// its slot is given to another.
static void s_keep(rl_sampler_t *self, const s_work_t *w, const rl_sampler_prompt_t *prompts,
                   const rl_sampler_result_t *res, int k) {
    const s_seq_t *s = &w->seq[k];
    uint64_t key = w->p->sessions && s->done ? w->p->sessions[s->prompt] : 0;
    if (key) {
        const rl_sampler_prompt_t *q = &prompts[s->prompt];
        s_sess_keep(self, key + (uint64_t)s->sample, q->ids, q->len, res[k].ids, res[k].n_ids,
                    s->last_slot);
    }
}

// One rl_model_step over rows [at, at + n) of the work arrays, unless the caller cancels (a
// client that left: the question costs a system call, nothing next to a step).
static int s_step(rl_sampler_t *self, s_work_t *w, int at, int n, float *logits) {
    if (w->p->cancel && w->p->cancel(w->p->cancel_arg)) {
        return s_fail(self, RL_ECANCELED, "cancelled by the caller after %lld model steps",
                      (long long)self->stats.steps);
    }
    int rc = rl_model_step(self->model, self->cache, w->tokens + at, w->slots + at, w->pos + at,
                           n, NULL, logits);
    self->stats.steps++;
    if (rc) {
        return s_fail(self, rc, "model step failed: %s", rl_model_errmsg(self->model));
    }
    return 0;
}

// The step of rows [0, n) and its nd draws (w->dseq, drow, du): into w->dtok and w->dlp.
static int s_step_draw(rl_sampler_t *self, s_work_t *w, int n, int nd, int V) {
    const rl_sampler_params_t *p = w->p;
    if (w->logits) { // the CPU: the logits, then each draw
        int rc = s_step(self, w, 0, n, w->logits);
        for (int d = 0; !rc && d < nd; d++) {
            w->dtok[d] =
                rl_sample_token(w->logp, w->probs, w->idx, w->logits + (size_t)w->drow[d] * V, V,
                                &p->sample, w->du[d], &w->dlp[d]);
        }
        return rc;
    }
    if (p->cancel && p->cancel(p->cancel_arg)) {
        return s_fail(self, RL_ECANCELED, "cancelled by the caller after %lld model steps",
                      (long long)self->stats.steps);
    }
    rl_model_draws_t dr = {.temperature = p->sample.temperature,
                           .top_k = p->sample.top_k,
                           .top_p = p->sample.top_p,
                           .n = nd,
                           .rows = w->drow,
                           .u = w->du,
                           .tokens = w->dtok,
                           .logprobs = w->dlp};
    int rc = rl_model_step_draw(self->model, self->cache, w->tokens, w->slots, w->pos, n, &dr);
    self->stats.steps++;
    if (rc) {
        return s_fail(self, rc, "model step failed: %s", rl_model_errmsg(self->model));
    }
    return 0;
}

int rl_sampler_generate(rl_sampler_t *self, const rl_sampler_prompt_t *prompts, int n_prompts,
                        const rl_sampler_params_t *p, rl_sampler_result_t **results_p) {
    RL_ASSERT(self && p && results_p && (prompts || n_prompts == 0));
    *results_p = NULL;
    self->errmsg[0] = '\0';
    memset(&self->stats, 0, sizeof self->stats);
    const rl_hf_config_t *cfg = rl_model_config(self->model);
    const int V = cfg->vocab_size;
    int rc = s_check(self, prompts, n_prompts, p, V);
    if (rc || n_prompts == 0) {
        return rc;
    }
    const int N = p->n;
    const int64_t total64 = (int64_t)n_prompts * N;
    if (total64 > INT_MAX / 2) {
        return s_fail(self, RL_EINVAL, "%d prompts x %d samples is too many", n_prompts, N);
    }
    const int total = (int)total64;
    const int max_batch = p->max_batch > 0 ? p->max_batch : RL_SAMPLER_MAX_BATCH_DEFAULT;
    const int S = total < max_batch ? total : max_batch;
    // positions fed per sequence: its prompt and all completion tokens but the last
    int max_len = 1, max_prompt = 1;
    for (int i = 0; i < n_prompts; i++) {
        int need = prompts[i].len + p->max_new_tokens - 1;
        max_len = need > max_len ? need : max_len;
        max_prompt = prompts[i].len > max_prompt ? prompts[i].len : max_prompt;
    }
    // one prefill call holds at most S prompts
    const int64_t cap_tok64 = (int64_t)S * max_prompt;
    if (cap_tok64 > INT_MAX) {
        return s_fail(self, RL_EINVAL, "prompts too long for one prefill batch");
    }
    const int cap_tok = (int)cap_tok64 > S ? (int)cap_tok64 : S;

    s_work_t w;
    memset(&w, 0, sizeof w);
    w.p = p;
    rl_sampler_result_t *res = calloc((size_t)total, sizeof(*res));
    w.seq = calloc((size_t)total, sizeof(*w.seq));
    w.slot_seq = malloc((size_t)S * sizeof(int));
    w.tokens = malloc((size_t)cap_tok * sizeof(int32_t));
    w.slots = malloc((size_t)cap_tok * sizeof(int));
    w.pos = malloc((size_t)cap_tok * sizeof(int));
    w.row_seq = malloc((size_t)S * sizeof(int));
    w.adm_seq = malloc((size_t)S * sizeof(int));
    w.adm_k = malloc((size_t)S * sizeof(int));
    w.dseq = malloc((size_t)S * sizeof(int));
    w.drow = malloc((size_t)S * sizeof(int));
    w.du = malloc((size_t)S * sizeof(double));
    w.dtok = malloc((size_t)S * sizeof(int32_t));
    w.dlp = malloc((size_t)S * sizeof(float));
    const int host_draw = !rl_model_on_gpu(self->model);
    if (host_draw) {
        w.logits = malloc((size_t)S * (size_t)V * sizeof(float));
        w.logp = malloc((size_t)V * sizeof(float));
        w.probs = malloc((size_t)V * sizeof(float));
        w.idx = malloc((size_t)V * sizeof(int32_t));
    }
    w.stop = malloc((size_t)(RL_HF_MAX_EOS + p->n_stop + 1) * sizeof(int32_t));
    if (!res || !w.seq || !w.slot_seq || !w.tokens || !w.slots || !w.pos || !w.row_seq ||
        !w.adm_seq || !w.adm_k || !w.dseq || !w.drow || !w.du || !w.dtok || !w.dlp || !w.stop ||
        (host_draw && (!w.logits || !w.logp || !w.probs || !w.idx))) {
        rc = s_fail(self, RL_ENOMEM, "out of memory for %d sequences x %d slots", total, S);
        goto fail;
    }
    if (!p->no_eos) {
        for (int i = 0; i < cfg->n_eos; i++) {
            if (cfg->eos_token_ids[i] >= 0 && cfg->eos_token_ids[i] < V) {
                w.stop[w.n_stop++] = cfg->eos_token_ids[i];
            }
        }
    }
    for (int i = 0; i < p->n_stop; i++) {
        w.stop[w.n_stop++] = p->stop_ids[i];
    }
    for (int k = 0; k < total; k++) {
        s_seq_t *s = &w.seq[k];
        s->prompt = k / N;
        s->sample = k % N;
        s->slot = -1;
        rl_rng_seed(&s->rng, s_stream_seed(p->seed, prompts[s->prompt].index, s->sample));
        res[k].prompt = s->prompt;
        res[k].sample = s->sample;
        res[k].ids = malloc((size_t)p->max_new_tokens * sizeof(int32_t));
        res[k].logprobs = malloc((size_t)p->max_new_tokens * sizeof(float));
        if (!res[k].ids || !res[k].logprobs) {
            rc = s_fail(self, RL_ENOMEM, "out of memory for %d sequences", total);
            goto fail;
        }
    }
    for (int i = 0; i < S; i++) {
        w.slot_seq[i] = -1;
    }
    if (!self->cache || self->cache_slots < S || self->cache_len < max_len) {
        rl_kvcache_destroy(&self->cache);
        self->cache = rl_kvcache_new(self->model, S, max_len);
        if (!self->cache) {
            self->cache_slots = self->cache_len = 0;
            rc = s_fail(self, RL_ENOMEM, "out of memory for a KV cache of %d slots x %d positions",
                        S, max_len);
            goto fail;
        }
        self->cache_slots = S;
        self->cache_len = max_len;
    }

    for (int i = 0; i < self->n_sess; i++) {
        self->sess[i].touched = 0;
    }
    int next = 0; // next sequence to admit (prompt-major order)
    int n_done = 0;
    while (n_done < total) {
        // ---- admit: claim slots for the next prompts; prefill all but their last token ----
        int n_tok = 0, n_adm = 0, free_slot = 0;
        while (next < total) {
            while (free_slot < S && w.slot_seq[free_slot] != -1) {
                free_slot++;
            }
            if (free_slot == S) {
                break;
            }
            const rl_sampler_prompt_t *q = &prompts[w.seq[next].prompt];
            int k = 0; // the samples of this prompt that fit the free slots
            for (int sl = free_slot; sl < S && next + k < total &&
                                     w.seq[next + k].prompt == w.seq[next].prompt;
                 sl++) {
                if (w.slot_seq[sl] == -1) {
                    w.slot_seq[sl] = next + k;
                    w.seq[next + k].slot = sl;
                    k++;
                }
            }
            // a session whose kept sequence starts the prompt: its cache, then the rest
            int from = 0;
            s_sess_t *ss = p->sessions ? s_sess_find(self, p->sessions[w.seq[next].prompt]) : NULL;
            if (ss) {
                ss->touched = 1;
                if (ss->len <= q->len && memcmp(ss->ids, q->ids, (size_t)ss->len * 4) == 0) {
                    from = ss->len - 1 < q->len - 1 ? ss->len - 1 : q->len - 1;
                    rl_kvcache_copy_from(self->cache, w.seq[next].slot, self->store,
                                         (int)(ss - self->sess), from);
                }
            }
            for (int t = from; t < q->len - 1; t++) {
                w.tokens[n_tok] = q->ids[t];
                w.slots[n_tok] = w.seq[next].slot;
                w.pos[n_tok] = t;
                n_tok++;
            }
            w.adm_seq[n_adm] = next;
            w.adm_k[n_adm] = k;
            n_adm++;
            self->stats.prefill_tokens += q->len - from;
            self->stats.reused_tokens += from;
            next += k;
        }
        // no logits: the last prompt tokens run in the step below
        for (int at = 0; at < n_tok; at += S_PREFILL_CHUNK) {
            rc = s_step(self, &w, at, n_tok - at < S_PREFILL_CHUNK ? n_tok - at : S_PREFILL_CHUNK,
                        NULL);
            if (rc) {
                goto fail;
            }
        }
        // ---- one step: the next token of every running sequence (slot order), then the last
        // prompt token of each admitted prompt in its first slot ----
        int n = 0;
        for (int sl = 0; sl < S; sl++) {
            int k = w.slot_seq[sl];
            if (k < 0 || res[k].n_ids == 0) {
                continue;
            }
            const rl_sampler_result_t *r = &res[k];
            w.tokens[n] = r->ids[r->n_ids - 1];
            w.slots[n] = sl;
            w.pos[n] = prompts[w.seq[k].prompt].len + r->n_ids - 1;
            w.row_seq[n] = k;
            n++;
        }
        const int n_run = n;
        for (int a = 0; a < n_adm; a++) {
            const s_seq_t *s0 = &w.seq[w.adm_seq[a]];
            const rl_sampler_prompt_t *q = &prompts[s0->prompt];
            w.tokens[n] = q->ids[q->len - 1];
            w.slots[n] = s0->slot;
            w.pos[n] = q->len - 1;
            w.row_seq[n] = w.adm_seq[a];
            n++;
        }
        // the draws: each running sequence from its row; an admitted prompt's samples share
        // its cache and its last row, each drawing its first token from its own stream. One
        // uniform per token whatever the options, so a stream never shifts with them.
        int nd = 0;
        for (int i = 0; i < n_run; i++) {
            w.dseq[nd] = w.row_seq[i];
            w.drow[nd++] = i;
        }
        for (int a = 0; a < n_adm; a++) {
            for (int j = 0; j < w.adm_k[a]; j++) {
                w.dseq[nd] = w.adm_seq[a] + j;
                w.drow[nd++] = n_run + a;
            }
        }
        for (int d = 0; d < nd; d++) {
            w.du[d] = rl_rng_uniform(&w.seq[w.dseq[d]].rng);
        }
        rc = s_step_draw(self, &w, n, nd, V);
        if (rc) {
            goto fail;
        }
        self->stats.decode_tokens += n_run;
        for (int d = 0; d < n_run; d++) {
            int k = w.dseq[d];
            s_take(&w, k, w.dtok[d], w.dlp[d], p, res);
            n_done += w.seq[k].done;
            s_keep(self, &w, prompts, res, k);
        }
        for (int a = 0, d = n_run; a < n_adm; a++) {
            int k0 = w.adm_seq[a], plen = prompts[w.seq[k0].prompt].len;
            for (int j = 1; j < w.adm_k[a]; j++) {
                rl_kvcache_copy(self->cache, w.seq[k0 + j].slot, w.seq[k0].slot, plen);
            }
            for (int j = 0; j < w.adm_k[a]; j++, d++) {
                s_take(&w, k0 + j, w.dtok[d], w.dlp[d], p, res);
                n_done += w.seq[k0 + j].done;
                s_keep(self, &w, prompts, res, k0 + j);
            }
        }
    }
    for (int i = 0; i < self->n_sess; i++) { // a call keeps only the sessions it named
        if (self->sess[i].key && !self->sess[i].touched) {
            free(self->sess[i].ids);
            self->sess[i].ids = NULL;
            self->sess[i].key = 0;
        }
    }
    // shrink the completion arrays to their length
    for (int k = 0; k < total; k++) {
        int32_t *ids = realloc(res[k].ids, (size_t)res[k].n_ids * sizeof(int32_t));
        float *lp = realloc(res[k].logprobs, (size_t)res[k].n_ids * sizeof(float));
        res[k].ids = ids ? ids : res[k].ids;
        res[k].logprobs = lp ? lp : res[k].logprobs;
    }
    s_work_free(&w);
    *results_p = res;
    return 0;

fail:
    s_work_free(&w);
    rl_sampler_results_free(&res, total);
    return rc;
}

// rl_run — the typed calls an algorithm makes on the role groups (see rl_run.h): generation
// spread over the samplers with every reply checked, the weight sync, logprobs of the policy or
// the reference, evaluation by sampling. Messages are rl_proto's; processes are rl_group's.
#include "rl_run.h"

#include "rl_clock.h"
#include "rl_err.h"
#include "rl_reward_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- calls ------------------------------------------------------------------------------------

rl_chat_format_t rl_run_chat_format(const rl_recipe_t *r, rl_tokenizer_t *tok) {
    switch (r->model.chat_template) {
    case RL_RECIPE_CHAT_CHATML: return RL_CHAT_CHATML;
    case RL_RECIPE_CHAT_LLAMA3: return RL_CHAT_LLAMA3;
    case RL_RECIPE_CHAT_AUTO: {
        const char *tpl = rl_tokenizer_chat_template(tok);
        rl_chat_format_t f = RL_CHAT_NONE;
        char msg[256];
        if (tpl && rl_chat_detect(tpl, &f, msg, sizeof(msg)) != 0) {
            f = RL_CHAT_NONE; // reported only if a conversational row needs it
        }
        return f;
    }
    default: return RL_CHAT_NONE;
    }
}

uint64_t rl_run_id(rl_run_t *run) {
    return rl_group_next_id(run->g);
}

// timeout_s, shortened to what is left before run->deadline
static double s_timeout(const rl_run_t *run, double timeout_s) {
    if (run->deadline > 0) {
        double left = run->deadline - rl_clock_now();
        return left < timeout_s ? (left > 0.05 ? left : 0.05) : timeout_s;
    }
    return timeout_s;
}

int rl_run_call(rl_run_t *run, const rl_run_group_t *grp, int rank, rl_msg_t *req, rl_msg_t **reply,
                double timeout_s, int *timed_out, char *err, size_t err_len) {
    *reply = NULL;
    if (!req) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (rank < 0 || rank >= grp->n) {
        rl_msg_free(&req);
        return rl_errf(err, err_len, RL_EINVAL, "no %s/%d in this run", grp->role, rank);
    }
    const char *peers[1] = {grp->names[rank]};
    return rl_group_call(run->g, 1, peers, &req, reply, s_timeout(run, timeout_s), timed_out, err,
                         err_len);
}

// ---- generation -------------------------------------------------------------------------------

void rl_run_gen_free(rl_run_gen_t *g) {
    free(g->lens);
    free(g->off);
    free(g->ids);
    free(g->lp);
    free(g->fin);
    free(g->cut);
    memset(g, 0, sizeof(*g));
}

// Checks a sampler's generate reply before anything uses it: `want` completions, each of
// 1..max_new_tokens tokens, every id inside the vocabulary, a finish reason of 0 (stop) or 1
// (length), every logprob finite and <= 0 (rl_proto checked the sizes add up). Returns 0 or
// RL_EPROTO naming the worker and the first thing wrong.
static int s_check_reply(const rl_run_t *run, const char *peer, int64_t want,
                         const rl_proto_generate_reply_t *g, char *err, size_t err_len) {
    int mnt = run->r->sampling.max_new_tokens;
    if (g->n_res != want) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "worker %s: generate reply: %lld completions, %lld asked for", peer,
                       (long long)g->n_res, (long long)want);
    }
    for (int64_t i = 0; i < g->n_res; i++) {
        if (g->lens[i] < 1 || g->lens[i] > mnt) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: completion %lld has %d tokens "
                           "(1..sampling.max_new_tokens = %d)",
                           peer, (long long)i, g->lens[i], mnt);
        }
        if (g->finish[i] > 1) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: completion %lld has finish reason %d "
                           "(0 stop, 1 length)",
                           peer, (long long)i, g->finish[i]);
        }
    }
    for (int64_t i = 0; i < g->n_ids; i++) {
        if (g->ids[i] < 0 || g->ids[i] >= run->vocab) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: token id %d outside the vocabulary "
                           "(0..%d)",
                           peer, g->ids[i], run->vocab - 1);
        }
        if (!(g->logprobs[i] <= 0.0f) || isinf(g->logprobs[i])) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: logprob %g of token %lld is not a "
                           "finite number <= 0",
                           peer, (double)g->logprobs[i], (long long)i);
        }
    }
    return 0;
}

// The first position of any multi-token stop string in text[0..len), or len.
static size_t s_stop_at(const rl_run_t *run, const char *text, size_t len) {
    size_t at = len;
    for (int i = 0; i < run->n_stop_str; i++) {
        const char *p = strstr(text, run->stop_str[i]);
        if (p && (size_t)(p - text) < at) {
            at = (size_t)(p - text);
        }
    }
    return at;
}

int rl_run_completion_text(rl_run_t *run, const rl_run_gen_t *g, int j, char **text_p,
                           size_t *len_p) {
    // a stop token is not text; a stop string is cut from the text below
    int n = g->lens[j] - (g->fin[j] == 0 && !(g->cut && g->cut[j]) ? 1 : 0);
    int rc = rl_tokenizer_decode_known(run->tok, g->ids + g->off[j], (size_t)n, 0, text_p, len_p);
    if (rc == 0 && g->cut && g->cut[j]) {
        *len_p = s_stop_at(run, *text_p, *len_p);
        (*text_p)[*len_p] = '\0';
    }
    return rc;
}

// Ends completions at the token that completes a multi-token stop string (finish "stop"); the
// tokens after it are dropped, as if the sampler had stopped there.
static int s_cut_stop_strings(rl_run_t *run, rl_run_gen_t *g) {
    g->cut = calloc((size_t)(g->n_res ? g->n_res : 1), 1);
    if (!g->cut) {
        return RL_ENOMEM;
    }
    for (int j = 0; run->n_stop_str > 0 && j < g->n_res; j++) {
        int n = g->lens[j];
        for (int k = 1; k <= n; k++) {
            g->lens[j] = k;
            uint8_t fin = g->fin[j];
            g->fin[j] = 1; // decode all k tokens
            char *text = NULL;
            size_t len = 0;
            int rc = rl_run_completion_text(run, g, j, &text, &len);
            g->fin[j] = fin;
            if (rc) {
                return rc;
            }
            int hit = s_stop_at(run, text, len) < len;
            free(text);
            if (hit) {
                g->fin[j] = 0;
                g->cut[j] = 1;
                break;
            }
            if (k == n) {
                g->lens[j] = n;
            }
        }
    }
    return 0;
}

int rl_run_generate(rl_run_t *run, const rl_run_prompt_t *prompts, int P, int n, double temperature,
                    uint64_t seed, int samplers, rl_run_gen_t *out, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    memset(out, 0, sizeof(*out));
    int ns = samplers > 0 && samplers < run->samplers.n ? samplers : run->samplers.n;
    ns = ns < P ? ns : P;
    if (ns < 1) {
        return rl_errf(err, err_len, RL_EINVAL, "generate: no sampler or no prompt");
    }
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0}, *reps[RL_RUN_MAX_RANKS] = {0};
    const char *peers[RL_RUN_MAX_RANKS] = {0};
    int rc = 0;
    // contiguous shares: sampler k gets prompts [P*k/ns, P*(k+1)/ns)
    for (int k = 0; k < ns && !rc; k++) {
        int p0 = (int)((int64_t)P * k / ns), p1 = (int)((int64_t)P * (k + 1) / ns);
        int64_t total = 0;
        for (int i = p0; i < p1; i++) {
            total += prompts[i].len;
        }
        int32_t *ids = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
        int32_t *lens = malloc((size_t)(p1 - p0) * sizeof(int32_t));
        int64_t *pidx = malloc((size_t)(p1 - p0) * sizeof(int64_t));
        if (!ids || !lens || !pidx) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        int64_t o = 0;
        for (int i = p0; !rc && i < p1; i++) {
            memcpy(ids + o, prompts[i].ids, (size_t)prompts[i].len * sizeof(int32_t));
            o += prompts[i].len;
            lens[i - p0] = prompts[i].len;
            pidx[i - p0] = prompts[i].index;
        }
        if (!rc) {
            rl_proto_generate_t g = {.version = run->version,
                                     .prompts = ids,
                                     .n_prompt_ids = total,
                                     .prompt_lens = lens,
                                     .prompt_index = pidx,
                                     .P = p1 - p0,
                                     .n = n,
                                     .max_new_tokens = r->sampling.max_new_tokens,
                                     .temperature = temperature,
                                     .top_p = temperature > 0 ? r->sampling.top_p : 1.0,
                                     .top_k = temperature > 0 ? r->sampling.top_k : 0,
                                     .seed = (int64_t)(seed & 0x7fffffffffffffffull),
                                     .stop_ids = run->n_stop > 0 ? run->stop_ids : NULL,
                                     .n_stop = run->n_stop};
            rc = rl_proto_generate_encode(&g, rl_run_id(run), &reqs[k], err, err_len);
        }
        free(ids);
        free(lens);
        free(pidx);
        peers[k] = run->samplers.names[k];
    }
    if (!rc) {
        rc = rl_group_call(run->g, ns, peers, reqs, reps, s_timeout(run, r->roles.request_timeout),
                           NULL, err, err_len);
    } else {
        for (int k = 0; k < ns; k++) {
            rl_msg_free(&reqs[k]);
        }
    }
    if (rc) {
        return rc;
    }
    // check every reply, then gather in prompt order
    rl_proto_generate_reply_t g[RL_RUN_MAX_RANKS];
    int64_t total = 0;
    for (int k = 0; k < ns && !rc; k++) {
        int p0 = (int)((int64_t)P * k / ns), p1 = (int)((int64_t)P * (k + 1) / ns);
        char why[512];
        if (rl_proto_generate_reply_decode(reps[k], &g[k], why, sizeof why) != 0) {
            rc = rl_errf(err, err_len, RL_EPROTO, "worker %s: %s", peers[k], why);
        } else {
            rc = s_check_reply(run, peers[k], (int64_t)(p1 - p0) * n, &g[k], err, err_len);
        }
        if (!rc) {
            total += g[k].n_ids;
            out->prefill += g[k].prefill_tokens;
            out->decode += g[k].decode_tokens;
        }
    }
    int n_res = P * n;
    if (!rc) {
        out->n_res = n_res;
        out->lens = malloc((size_t)n_res * sizeof(int32_t));
        out->off = malloc((size_t)n_res * sizeof(int64_t));
        out->fin = malloc((size_t)n_res);
        out->ids = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
        out->lp = malloc((size_t)(total ? total : 1) * sizeof(float));
        if (!out->lens || !out->off || !out->fin || !out->ids || !out->lp) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    if (!rc) {
        int j = 0;
        int64_t o = 0;
        for (int k = 0; k < ns; k++) {
            int64_t ko = 0;
            for (int64_t i = 0; i < g[k].n_res; i++, j++) {
                int32_t len = g[k].lens[i];
                out->lens[j] = len;
                out->off[j] = o;
                out->fin[j] = g[k].finish[i];
                memcpy(out->ids + o, g[k].ids + ko, (size_t)len * sizeof(int32_t));
                memcpy(out->lp + o, g[k].logprobs + ko, (size_t)len * sizeof(float));
                o += len;
                ko += len;
            }
        }
    }
    for (int k = 0; k < ns; k++) {
        rl_msg_free(&reps[k]);
    }
    if (!rc && s_cut_stop_strings(run, out) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (rc) {
        rl_run_gen_free(out);
    }
    return rc;
}

// ---- weights ----------------------------------------------------------------------------------

int rl_run_export(rl_run_t *run, float **w_p, int64_t *n_p, char *err, size_t err_len) {
    *w_p = NULL;
    *n_p = 0;
    rl_msg_t *req = NULL, *rep = NULL;
    rl_proto_request(RL_PROTO_EXPORT_WEIGHTS, rl_run_id(run), &req);
    int rc = rl_run_call(run, &run->actor, 0, req, &rep, run->r->roles.request_timeout, NULL, err,
                         err_len);
    if (rc) {
        return rc;
    }
    rl_proto_export_weights_reply_t x;
    char why[512];
    if (rl_proto_export_weights_reply_decode(rep, &x, why, sizeof why) != 0) {
        rl_msg_free(&rep);
        return rl_errf(err, err_len, RL_EPROTO, "worker %s: %s", run->actor.names[0], why);
    }
    *w_p = malloc((size_t)(x.n ? x.n : 1) * sizeof(float));
    if (*w_p) {
        memcpy(*w_p, x.weights, (size_t)x.n * sizeof(float));
        *n_p = x.n;
    }
    rl_msg_free(&rep);
    return *w_p ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
}

int rl_run_sync(rl_run_t *run, const float *weights, int64_t n, char *err, size_t err_len) {
    run->n_trainable = n;
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0}, *reps[RL_RUN_MAX_RANKS] = {0};
    const char *peers[RL_RUN_MAX_RANKS] = {0};
    int ns = run->samplers.n, rc = 0;
    rl_proto_load_weights_t q = {run->version, run->r->lora.enabled ? "lora" : "full", weights, n};
    for (int k = 0; k < ns && !rc; k++) {
        rc = rl_proto_load_weights_encode(&q, rl_run_id(run), &reqs[k], err, err_len);
        peers[k] = run->samplers.names[k];
    }
    if (rc) {
        for (int k = 0; k < ns; k++) {
            rl_msg_free(&reqs[k]);
        }
        return rc;
    }
    rc = rl_group_call(run->g, ns, peers, reqs, reps, s_timeout(run, run->r->roles.request_timeout),
                       NULL, err, err_len);
    for (int k = 0; !rc && k < ns; k++) {
        rl_msg_free(&reps[k]);
    }
    return rc;
}

// ---- logprobs ---------------------------------------------------------------------------------

int rl_run_logprobs(rl_run_t *run, int reference, const int32_t *tokens, const int32_t *lengths,
                    int64_t B, int64_t T, double temperature, float *logp, char *err,
                    size_t err_len) {
    // the reference: its own worker when the run has one, else the actor with adapters off
    const rl_run_group_t *grp = reference && run->reference.n > 0 ? &run->reference : &run->actor;
    rl_proto_logprobs_t q = {tokens,     lengths, B, T, !reference || run->reference.n > 0,
                             temperature};
    rl_msg_t *req = NULL, *rep = NULL;
    int rc = rl_proto_logprobs_encode(&q, rl_run_id(run), &req, err, err_len);
    if (!rc) {
        rc = rl_run_call(run, grp, 0, req, &rep, run->r->roles.request_timeout, NULL, err, err_len);
    }
    if (rc) {
        return rc;
    }
    rl_proto_logprobs_reply_t x;
    char why[512];
    if (rl_proto_logprobs_reply_decode(rep, &x, why, sizeof why) != 0 || x.B != B || x.T != T) {
        rl_msg_free(&rep);
        return rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed logprobs reply%s%s",
                       grp->names[0], why[0] ? ": " : "", why);
    }
    memcpy(logp, x.logp, (size_t)B * (size_t)T * sizeof(float));
    rl_msg_free(&rep);
    return 0;
}

// values (cols = T) or scores (cols = 1) of rank 0 of grp
static int s_values(rl_run_t *run, const rl_run_group_t *grp, int scores, const int32_t *tokens,
                    const int32_t *lengths, int64_t B, int64_t T, float *out, char *err,
                    size_t err_len) {
    rl_proto_values_t q = {tokens, lengths, B, T, scores};
    rl_msg_t *req = NULL, *rep = NULL;
    int rc = rl_proto_values_encode(&q, rl_run_id(run), &req, err, err_len);
    if (!rc) {
        rc = rl_run_call(run, grp, 0, req, &rep, run->r->roles.request_timeout, NULL, err, err_len);
    }
    if (rc) {
        return rc;
    }
    rl_proto_values_reply_t x;
    char why[512] = "";
    int64_t cols = scores ? 1 : T;
    if (rl_proto_values_reply_decode(rep, &x, why, sizeof why) != 0 || x.B != B || x.T != cols) {
        rl_msg_free(&rep);
        return rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed %s reply%s%s", grp->names[0],
                       scores ? "scores" : "values", why[0] ? ": " : "", why);
    }
    memcpy(out, x.values, (size_t)B * (size_t)cols * sizeof(float));
    rl_msg_free(&rep);
    return 0;
}

int rl_run_values(rl_run_t *run, const int32_t *tokens, const int32_t *lengths, int64_t B,
                  int64_t T, float *values, char *err, size_t err_len) {
    return s_values(run, &run->critic, 0, tokens, lengths, B, T, values, err, err_len);
}

int rl_run_scores(rl_run_t *run, const rl_run_group_t *grp, const int32_t *tokens,
                  const int32_t *lengths, int64_t B, int64_t T, float *scores, char *err,
                  size_t err_len) {
    return s_values(run, grp, 1, tokens, lengths, B, T, scores, err, err_len);
}

int rl_run_train(rl_run_t *run, const rl_run_group_t *grp, const rl_proto_train_t *q,
                 rl_proto_train_reply_t *x, rl_msg_t **rep, char *err, size_t err_len) {
    rl_msg_t *req = NULL;
    *rep = NULL;
    int rc = rl_proto_train_encode(q, rl_run_id(run), &req, err, err_len);
    if (!rc) {
        rc = rl_run_call(run, grp, 0, req, rep, run->r->roles.request_timeout, NULL, err, err_len);
    }
    if (rc) {
        return rc;
    }
    char why[512] = "";
    if (rl_proto_train_reply_decode(*rep, x, why, sizeof why) != 0 || x->B != q->B ||
        x->T != q->T || (q->want_weights && !x->weights)) {
        rl_msg_free(rep);
        return rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed train reply%s%s",
                       grp->names[0], why[0] ? ": " : "", why);
    }
    return 0;
}

// ---- evaluation -------------------------------------------------------------------------------

int rl_run_eval_accuracy(rl_run_t *run, const rl_run_prompt_t *prompts, char *const *answers, int P,
                         double temperature, uint64_t seed, int samplers, double *acc, double *fmt,
                         double *mean_len, char *err, size_t err_len) {
    rl_run_gen_t g;
    int rc = rl_run_generate(run, prompts, P, 1, temperature, seed, samplers, &g, err, err_len);
    if (rc) {
        return rc;
    }
    double correct = 0, formatted = 0, tokens = 0;
    for (int j = 0; j < g.n_res && !rc; j++) {
        tokens += g.lens[j];
        char *text = NULL;
        size_t len = 0;
        if ((rc = rl_run_completion_text(run, &g, j, &text, &len)) != 0) {
            rc = rl_errf(err, err_len, rc, "eval: cannot decode a completion");
            break;
        }
        rl_math_answer_t a;
        rl_math_extract(text, len, &a);
        formatted += a.formatted;
        correct += rl_math_correct(text, len, answers[j]);
        free(text);
    }
    if (!rc) {
        *acc = correct / (double)g.n_res;
        *fmt = formatted / (double)g.n_res;
        if (mean_len) {
            *mean_len = tokens / (double)g.n_res;
        }
    }
    rl_run_gen_free(&g);
    return rc;
}

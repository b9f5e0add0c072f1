// rl_run — the typed calls an algorithm makes on the role groups (see rl_run.h): generation
// spread over the samplers with every reply checked, the weight sync, logprobs of the policy or
// the reference, evaluation by sampling. Messages are rl_proto's; processes are rl_group's.
#include "rl_run.h"

#include "rl_clock.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_mesh.h"
#include "rl_policy.h"
#include "rl_reward_math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- calls ------------------------------------------------------------------------------------

rl_tokenizer_t *rl_run_tokenizer(const rl_recipe_t *r, char *err, size_t err_len) {
    char msg[2048], dir[4096];
    snprintf(dir, sizeof(dir), "%s", r->model.tokenizer);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    rl_tokenizer_t *tok;
    if (strcmp(base, "tokenizer.json") == 0 && slash) {
        *slash = '\0';
        tok = rl_tokenizer_new_dir(dir, msg, sizeof(msg));
    } else {
        tok = rl_tokenizer_new(r->model.tokenizer, msg, sizeof(msg));
    }
    if (!tok) {
        rl_recipe_errorf(r, "model.tokenizer", err, err_len, RL_EINVAL, "%s", msg);
    }
    return tok;
}

rl_chat_format_t rl_run_chat_format(const rl_recipe_t *r) {
    if (r->model.chat_template == RL_RECIPE_CHAT_NONE) {
        return RL_CHAT_NONE;
    }
    const char *name = r->model.chat_template == RL_RECIPE_CHAT_CHATML   ? "chatml"
                       : r->model.chat_template == RL_RECIPE_CHAT_LLAMA3 ? "llama3"
                                                                         : NULL;
    rl_chat_format_t fmt = RL_CHAT_NONE;
    char msg[1024];
    int rc = 0;
    if (name) {
        rc = rl_chat_template(rl_chat_builtin_text(name), name, NULL, NULL,
                              r->data.chat_template_kwargs, &fmt, msg, sizeof msg);
    } else if (r->model.tokenizer) { // the model's own, from the tokenizer's folder
        char dir[4200];
        const char *slash = strrchr(r->model.tokenizer, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - r->model.tokenizer) : 1,
                 slash ? r->model.tokenizer : ".");
        rl_chat_source_t src;
        rc = rl_chat_model_source(dir, NULL, &src, msg, sizeof msg);
        if (!rc && src.text) {
            rc = rl_chat_template(src.text, src.where, src.bos, src.eos,
                                  r->data.chat_template_kwargs, &fmt, msg, sizeof msg);
        }
        rl_chat_source_free(&src);
    }
    if (rc) { // a conversational row then says there is no template
        rl_log_warn("the chat template cannot be used: %s", msg);
        fmt = RL_CHAT_NONE;
    }
    return fmt;
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

// ---- a role on a mesh ---------------------------------------------------------------------------
// The actor (and a critic it holds) may be the dp·fsdp ranks of a mesh: every rank takes every
// call (their collectives need all of them), each with its share of the rows.

// Rank i's rows of a batch of B rows over the n ranks: whole groups of `group` rows, split
// evenly (rl_mesh_split; data_rank = the rank).
static void s_rows_of(int n, int64_t B, int group, int i, int64_t *lo, int64_t *hi) {
    int64_t a, b;
    rl_mesh_split(B / group, n, i, &a, &b);
    *lo = a * group;
    *hi = b * group;
}

// Sends reqs[i] to rank i of grp and waits for every reply (reps[i]); rc: the requests' build
// (non-zero: they are freed and rc returned; a NULL request is out of memory).
static int s_call_ranks(rl_run_t *run, const rl_run_group_t *grp, int rc, rl_msg_t **reqs,
                        rl_msg_t **reps, double timeout_s, char *err, size_t err_len) {
    const int n = grp->n;
    const char *peers[RL_RUN_MAX_RANKS] = {0};
    for (int i = 0; i < n; i++) {
        peers[i] = grp->names[i];
        if (!rc && !reqs[i]) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    if (!rc && n < 1) {
        rc = rl_errf(err, err_len, RL_EINVAL, "no %s in this run", grp->role);
    }
    if (rc) {
        for (int i = 0; i < n; i++) {
            rl_msg_free(&reqs[i]);
        }
        return rc;
    }
    return rl_group_call(run->g, n, peers, reqs, reps, s_timeout(run, timeout_s), NULL, err,
                         err_len);
}

int rl_run_call_all(rl_run_t *run, const rl_run_group_t *grp, rl_msg_t **reqs, rl_msg_t **reply,
                    double timeout_s, char *err, size_t err_len) {
    *reply = NULL;
    const int n = grp->n;
    rl_msg_t *reps[RL_RUN_MAX_RANKS] = {0};
    int rc = s_call_ranks(run, grp, 0, reqs, reps, timeout_s, err, err_len);
    if (!rc) {
        *reply = reps[0];
        for (int i = 1; i < n; i++) {
            rl_msg_free(&reps[i]);
        }
    }
    return rc;
}

// ---- generation -------------------------------------------------------------------------------

void rl_run_gen_free(rl_run_gen_t *g) {
    free(g->lens);
    free(g->off);
    free(g->ids);
    free(g->lp);
    free(g->fin);
    free(g->cut);
    free(g->who);
    free(g->ver);
    memset(g, 0, sizeof(*g));
}

// Checks a sampler's generate reply before anything uses it: `want` completions, each of
// 1..max_new_tokens tokens, every id inside the vocabulary, a finish reason of 0 (stop) or 1
// (length), every logprob finite and <= 0 (rl_proto checked the sizes add up). Returns 0 or
// RL_EPROTO naming the worker and the first thing wrong.
static int s_check_reply(const rl_run_t *run, const char *peer, int64_t want, int mnt,
                         const rl_proto_generate_reply_t *g, char *err, size_t err_len) {
    if (g->n_res != want) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "worker %s: generate reply: %lld completions, %lld asked for", peer,
                       (long long)g->n_res, (long long)want);
    }
    for (int64_t i = 0; i < g->n_res; i++) {
        if (g->lens[i] < 1 || g->lens[i] > mnt) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "worker %s: generate reply: completion %lld has %d tokens "
                           "(1..%d asked for)",
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

// One generate request of a round: prompts todo[a..b) of the call to sampler k.
typedef struct {
    int a, b, k;
    int64_t version; // the weights version it asked for
    rl_msg_t *rep;
    rl_proto_generate_reply_t g;
} s_share_t;

// The samplers that take part: the first `limit` not dropped from the run.
static int s_active(const rl_run_t *run, int limit, int *ks) {
    int na = 0;
    for (int k = 0; k < limit; k++) {
        if (!run->sampler_out[k]) {
            ks[na++] = k;
        }
    }
    return na;
}

// Splits m prompts into contiguous shares over the na samplers ks[]: even (sampler j gets
// [m*j/na, m*(j+1)/na)) or, with roles.balance: speed, in proportion to each one's measured
// tokens per second. bounds[j]..bounds[j+1] is sampler j's.
void rl_run_split(const rl_run_t *run, int m, int na, const int *ks, int *bounds) {
    double w[RL_RUN_MAX_RANKS], total = 0, known = 0;
    int nk = 0;
    for (int j = 0; j < na; j++) {
        w[j] = run->r->roles.balance == RL_RECIPE_BALANCE_SPEED ? run->sampler_speed[ks[j]] : 0;
        if (w[j] > 0) {
            known += w[j];
            nk++;
        }
    }
    for (int j = 0; j < na; j++) { // unmeasured: the mean of the measured ones (or all equal)
        w[j] = nk == 0 ? 1.0 : w[j] > 0 ? w[j] : known / nk;
        total += w[j];
    }
    bounds[0] = 0;
    double cum = 0;
    for (int j = 0; j < na; j++) {
        cum += w[j];
        bounds[j + 1] = nk == 0 ? (int)((int64_t)m * (j + 1) / na) : (int)floor(m * cum / total);
    }
    bounds[na] = m;
}

// The generate request of prompts todo[a..b).
static int s_gen_request(rl_run_t *run, const rl_run_prompt_t *prompts, const int *todo, int a,
                         int b, int n, int max_new, double temperature, uint64_t seed,
                         rl_msg_t **req, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    int64_t total = 0;
    for (int i = a; i < b; i++) {
        total += prompts[todo[i]].len;
    }
    int32_t *ids = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    int32_t *lens = malloc((size_t)(b - a) * sizeof(int32_t));
    int64_t *pidx = malloc((size_t)(b - a) * sizeof(int64_t));
    int64_t *sess = malloc((size_t)(b - a) * sizeof(int64_t));
    int rc = 0, any_session = 0;
    if (!ids || !lens || !pidx || !sess) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int64_t o = 0;
    for (int i = a; !rc && i < b; i++) {
        const rl_run_prompt_t *q = &prompts[todo[i]];
        memcpy(ids + o, q->ids, (size_t)q->len * sizeof(int32_t));
        o += q->len;
        lens[i - a] = q->len;
        pidx[i - a] = q->index;
        sess[i - a] = q->session;
        any_session |= q->session != 0;
    }
    if (!rc) {
        rl_proto_generate_t g = {.version = run->version,
                                 .prompts = ids,
                                 .n_prompt_ids = total,
                                 .prompt_lens = lens,
                                 .prompt_index = pidx,
                                 .sessions = any_session ? sess : NULL,
                                 .P = b - a,
                                 .n = n,
                                 .max_new_tokens = max_new,
                                 .temperature = temperature,
                                 .top_p = temperature > 0 ? r->sampling.top_p : 1.0,
                                 .top_k = temperature > 0 ? r->sampling.top_k : 0,
                                 .seed = (int64_t)(seed & 0x7fffffffffffffffull),
                                 .stop_ids = run->n_stop > 0 ? run->stop_ids : NULL,
                                 .n_stop = run->n_stop};
        rc = rl_proto_generate_encode(&g, rl_run_id(run), req, err, err_len);
    }
    free(ids);
    free(lens);
    free(pidx);
    free(sess);
    return rc;
}

// A remote sampler that failed a request leaves the run (its work goes to the others); a local
// one ends the run as before. Returns 0 when the run can go on without it, or the error.
static int s_sampler_failed(rl_run_t *run, int k, const char *why, int n_prompts, char *err,
                            size_t err_len) {
    const char *name = run->samplers.names[k];
    if (!rl_group_is_remote(run->g, name)) {
        return rl_errf(err, err_len, RL_EIO, "%s", why);
    }
    run->sampler_out[k] = 1;
    run->samplers_dropped++;
    if (n_prompts > 0) {
        rl_log_warn("%s; %s leaves the run and its %d prompt%s go%s to the other samplers", why,
                    name, n_prompts, n_prompts == 1 ? "" : "s", n_prompts == 1 ? "es" : "");
    } else {
        rl_log_warn("%s; %s leaves the run", why, name);
    }
    return 0;
}

struct rl_run_genjob {
    rl_run_prompt_t *prompts; // (P) copied (the ids stay the caller's)
    int P, n, limit;
    int max_new; // max_new_tokens asked for
    double temperature;
    uint64_t seed;
    int64_t version;        // the weights version it asks for
    int *todo, *next, nt;   // the prompts of the round in flight / still to generate
    int *at_share, *at_pos; // where each prompt's results are
    s_share_t *sh;
    int nsh;
    int nr, idx[RL_RUN_MAX_RANKS]; // the round in flight: its shares and request ids
    uint64_t ids[RL_RUN_MAX_RANKS];
    double t_post, t_done; // when it was posted, when its last reply came
    char last_why[RL_GROUP_WHY];
};

void rl_run_genjob_free(rl_run_genjob_t **job_p) {
    rl_run_genjob_t *j = *job_p;
    if (!j) {
        return;
    }
    for (int i = 0; j->sh && i < j->nsh + j->nr; i++) {
        rl_msg_free(&j->sh[i].rep);
    }
    free(j->prompts);
    free(j->todo);
    free(j->next);
    free(j->at_share);
    free(j->at_pos);
    free(j->sh);
    free(j);
    *job_p = NULL;
}

// Posts a round: the prompts of j->todo spread over the samplers still in the run.
static int s_round_post(rl_run_t *run, rl_run_genjob_t *j, char *err, size_t err_len) {
    int ks[RL_RUN_MAX_RANKS], bounds[RL_RUN_MAX_RANKS + 1];
    int na = s_active(run, j->limit, ks);
    if (na == 0 || j->nsh + na > RL_RUN_MAX_RANKS * 8) {
        return rl_errf(err, err_len, RL_EIO,
                       "no sampler left to generate with (the last one to fail: %s)",
                       j->last_why[0] ? j->last_why : "?");
    }
    rl_run_split(run, j->nt, na, ks, bounds);
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0};
    const char *peers[RL_RUN_MAX_RANKS] = {0};
    int rc = 0;
    j->nr = 0;
    for (int q = 0; !rc && q < na; q++) {
        if (bounds[q + 1] <= bounds[q]) {
            continue; // fewer prompts than samplers
        }
        int x = j->nsh + j->nr;
        j->idx[j->nr] = x;
        j->sh[x] =
            (s_share_t){.a = bounds[q], .b = bounds[q + 1], .k = ks[q], .version = run->version};
        peers[j->nr] = run->samplers.names[ks[q]];
        rc = s_gen_request(run, j->prompts, j->todo, bounds[q], bounds[q + 1], j->n, j->max_new,
                           j->temperature, j->seed, &reqs[j->nr], err, err_len);
        j->nr++;
    }
    if (rc) {
        for (int q = 0; q < j->nr; q++) {
            rl_msg_free(&reqs[q]);
        }
        j->nr = 0;
        return rc;
    }
    return rl_group_post(run->g, j->nr, peers, reqs, j->ids, err, err_len);
}

// Collects the round in flight: good shares keep their prompts; a failed remote sampler leaves
// the run and its prompts make the next round's todo.
static int s_round_finish(rl_run_t *run, rl_run_genjob_t *j, char *err, size_t err_len) {
    rl_msg_t *reps[RL_RUN_MAX_RANKS] = {0};
    static char why[RL_RUN_MAX_RANKS][RL_GROUP_WHY];
    double el[RL_RUN_MAX_RANKS];
    int nr = j->nr,
        rc = rl_group_collect(run->g, nr, j->ids, reps,
                              s_timeout(run, run->r->roles.request_timeout), why, el, err, err_len);
    j->nr = 0;
    int nn = 0;
    for (int q = 0; q < nr; q++) {
        s_share_t *x = &j->sh[j->idx[q]];
        const char *peer = run->samplers.names[x->k];
        x->rep = reps[q];
        if (!rc && x->rep) {
            char w2[512];
            if (rl_proto_generate_reply_decode(x->rep, &x->g, w2, sizeof w2) != 0) {
                rl_errf(why[q], RL_GROUP_WHY, RL_EPROTO, "worker %s: %s", peer, w2);
            } else if (s_check_reply(run, peer, (int64_t)(x->b - x->a) * j->n, j->max_new, &x->g,
                                     why[q], RL_GROUP_WHY) == 0) {
                double tok = (double)(x->g.prefill_tokens + x->g.decode_tokens);
                double sp = el[q] > 0 ? tok / el[q] : 0;
                double *v = &run->sampler_speed[x->k];
                *v = *v > 0 ? 0.5 * *v + 0.5 * sp : sp;
                double done = j->t_post + el[q];
                j->t_done = done > j->t_done ? done : j->t_done;
                continue; // a good share
            }
            rl_msg_free(&x->rep);
        }
        if (rc) {
            continue;
        }
        // failed: its prompts go to the next round (or the run stops)
        snprintf(j->last_why, sizeof j->last_why, "%s", why[q]);
        rc = s_sampler_failed(run, x->k, why[q], x->b - x->a, err, err_len);
        for (int i = x->a; i < x->b; i++) {
            j->next[nn++] = j->todo[i];
        }
        x->b = x->a; // empty: nothing of it is gathered
    }
    for (int q = 0; q < nr; q++) { // the good shares keep their prompts: record where
        s_share_t *x = &j->sh[j->idx[q]];
        for (int i = x->a; i < x->b; i++) {
            j->at_share[j->todo[i]] = j->idx[q];
            j->at_pos[j->todo[i]] = i - x->a;
        }
    }
    j->nsh += nr;
    memcpy(j->todo, j->next, (size_t)nn * sizeof(int));
    j->nt = nn;
    return rc;
}

int rl_run_generate_post(rl_run_t *run, const rl_run_prompt_t *prompts, int P, int n,
                         double temperature, uint64_t seed, int samplers, rl_run_genjob_t **job_p,
                         char *err, size_t err_len) {
    *job_p = NULL;
    int limit = samplers > 0 && samplers < run->samplers.n ? samplers : run->samplers.n;
    if (limit < 1 || P < 1) {
        return rl_errf(err, err_len, RL_EINVAL, "generate: no sampler or no prompt");
    }
    rl_run_genjob_t *j = calloc(1, sizeof *j);
    if (!j) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    j->P = P;
    j->n = n;
    j->limit = limit;
    j->max_new = run->max_new > 0 ? run->max_new : run->r->sampling.max_new_tokens;
    j->temperature = temperature;
    j->seed = seed;
    j->version = run->version;
    j->prompts = malloc((size_t)P * sizeof *j->prompts);
    j->todo = malloc((size_t)P * sizeof(int));
    j->next = malloc((size_t)P * sizeof(int));
    j->at_share = malloc((size_t)P * sizeof(int));
    j->at_pos = malloc((size_t)P * sizeof(int));
    j->sh = calloc((size_t)RL_RUN_MAX_RANKS * 8, sizeof *j->sh);
    int rc = 0;
    if (!j->prompts || !j->todo || !j->next || !j->at_share || !j->at_pos || !j->sh) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; !rc && i < P; i++) {
        j->prompts[i] = prompts[i];
        j->todo[i] = i;
    }
    j->nt = P;
    j->t_post = rl_clock_now();
    if (!rc) {
        rc = s_round_post(run, j, err, err_len);
    }
    if (rc) {
        rl_run_genjob_free(&j);
    }
    *job_p = j;
    return rc;
}

int64_t rl_run_genjob_version(const rl_run_genjob_t *job) {
    return job ? job->version : -1;
}
double rl_run_genjob_done(const rl_run_genjob_t *job) {
    return job ? job->t_done : 0;
}

double rl_run_genjob_done_now(rl_run_t *run, const rl_run_genjob_t *job) {
    if (!job) {
        return 0;
    }
    double last = job->t_done;
    for (int q = 0; q < job->nr; q++) {
        double t = rl_group_done_at(run->g, job->ids[q]);
        if (t <= 0) {
            return 0;
        }
        last = t > last ? t : last;
    }
    return last;
}

int rl_run_generate_collect(rl_run_t *run, rl_run_genjob_t *j, rl_run_gen_t *out, char *err,
                            size_t err_len) {
    memset(out, 0, sizeof(*out));
    int P = j->P, n = j->n, rc = 0;
    // the round in flight, then (when a remote sampler failed) rounds of its prompts
    while (!rc && j->nt > 0) {
        if (j->nr == 0) {
            j->t_post = rl_clock_now();
            rc = s_round_post(run, j, err, err_len);
        }
        if (!rc) {
            rc = s_round_finish(run, j, err, err_len);
        }
    }
    s_share_t *sh = j->sh;
    int nsh = j->nsh, *at_share = j->at_share, *at_pos = j->at_pos;
    // gather in prompt order (sample s of prompt p is result p*n + s)
    int n_res = P * n;
    int64_t total = 0;
    for (int q = 0; !rc && q < nsh; q++) {
        if (sh[q].rep) {
            total += sh[q].g.n_ids;
            out->prefill += sh[q].g.prefill_tokens;
            out->decode += sh[q].g.decode_tokens;
        }
    }
    if (!rc) {
        out->n_res = n_res;
        out->lens = malloc((size_t)n_res * sizeof(int32_t));
        out->off = malloc((size_t)n_res * sizeof(int64_t));
        out->fin = malloc((size_t)n_res);
        out->who = malloc((size_t)n_res * sizeof(int32_t));
        out->ver = malloc((size_t)n_res * sizeof(int64_t));
        out->ids = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
        out->lp = malloc((size_t)(total ? total : 1) * sizeof(float));
        if (!out->lens || !out->off || !out->fin || !out->who || !out->ver || !out->ids ||
            !out->lp) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    if (!rc) {
        // a share holds its prompts in prompt order: a cursor per share walks its ids once
        int64_t *cur = calloc((size_t)(nsh ? nsh : 1), sizeof(int64_t));
        if (!cur) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        int64_t o = 0;
        for (int p = 0; !rc && p < P; p++) {
            const s_share_t *x = &sh[at_share[p]];
            int64_t first = (int64_t)at_pos[p] * n, ko = cur[at_share[p]];
            for (int s = 0; s < n; s++) {
                int r = p * n + s;
                int32_t len = x->g.lens[first + s];
                out->lens[r] = len;
                out->off[r] = o;
                out->fin[r] = x->g.finish[first + s];
                out->who[r] = x->k;
                out->ver[r] = x->version;
                memcpy(out->ids + o, x->g.ids + ko, (size_t)len * sizeof(int32_t));
                memcpy(out->lp + o, x->g.logprobs + ko, (size_t)len * sizeof(float));
                o += len;
                ko += len;
            }
            cur[at_share[p]] = ko;
        }
        free(cur);
    }
    if (!rc && s_cut_stop_strings(run, out) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (rc) {
        rl_run_gen_free(out);
    }
    return rc;
}

int rl_run_generate(rl_run_t *run, const rl_run_prompt_t *prompts, int P, int n, double temperature,
                    uint64_t seed, int samplers, rl_run_gen_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof(*out));
    rl_run_genjob_t *job = NULL;
    int rc =
        rl_run_generate_post(run, prompts, P, n, temperature, seed, samplers, &job, err, err_len);
    if (!rc) {
        rc = rl_run_generate_collect(run, job, out, err, err_len);
    }
    rl_run_genjob_free(&job);
    return rc;
}

// ---- weights ----------------------------------------------------------------------------------

int rl_run_export(rl_run_t *run, float **w_p, int64_t *n_p, char *err, size_t err_len) {
    *w_p = NULL;
    *n_p = 0;
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0}, *rep = NULL;
    for (int i = 0; i < run->actor.n; i++) { // every rank of a mesh gathers, rank 0 answers
        rl_proto_request(RL_PROTO_EXPORT_WEIGHTS, rl_run_id(run), &reqs[i]);
    }
    int rc =
        rl_run_call_all(run, &run->actor, reqs, &rep, run->r->roles.request_timeout, err, err_len);
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

// Which samplers take the weights through CUDA IPC: decided once, at the first sync
// (roles.weight_sync; rlctl validate refused `ipc` where some sampler cannot). Remote samplers
// never do.
static void s_sync_plan(rl_run_t *run) {
    if (run->sync_planned) {
        return;
    }
    run->sync_planned = 1;
    const rl_recipe_t *r = run->r;
    int n_ipc = 0;
    for (int k = 0; k < run->samplers.n; k++) {
        char why[512];
        run->sync_ipc[k] = r->roles.weight_sync != RL_RECIPE_SYNC_HOST && run->actor.n > 0 &&
                           !rl_group_is_remote(run->g, run->samplers.names[k]) &&
                           rl_policy_sync_ipc(r, k, why, sizeof why);
        n_ipc += run->sync_ipc[k];
    }
    if (n_ipc > 0) {
        rl_log_info("weight sync: %d of %d sampler%s copy the actor's weights from its GPU (CUDA "
                    "IPC)",
                    n_ipc, run->samplers.n, run->samplers.n == 1 ? "" : "s");
    }
}

int rl_run_sync_needs_host(rl_run_t *run) {
    s_sync_plan(run);
    int ks[RL_RUN_MAX_RANKS];
    int na = s_active(run, run->samplers.n, ks);
    for (int j = 0; j < na; j++) {
        if (!run->sync_ipc[ks[j]]) {
            return 1;
        }
    }
    return 0;
}

// The buckets of weights to job->na samplers (job->ks).
static int s_post_buckets(rl_run_t *run, const float *weights, int64_t n, rl_run_syncjob_t *job,
                          char *err, size_t err_len) {
    int64_t per = (int64_t)(run->r->roles.sync_bucket_mb * 1048576.0 / 4.0);
    per = per < 1 ? 1 : per;
    int na = job->na;
    int nb = n > 0 ? (int)((n + per - 1) / per) : 1;
    job->na = 0;
    if ((int64_t)na * nb > 1000) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "weight sync: %d buckets for each of %d samplers is too many in flight "
                       "(raise roles.sync_bucket_mb)",
                       nb, na);
    }
    RL_ASSERT(weights || na == 0); // rl_run_sync_needs_host said so
    job->ids = calloc((size_t)na * (size_t)nb + 1, sizeof *job->ids);
    if (!job->ids) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (int b = 0; !rc && b < nb; b++) {
        int64_t off = (int64_t)b * per, len = n - off < per ? n - off : per;
        rl_proto_load_weights_t q = {.version = run->version,
                                     .kind = run->r->lora.enabled ? "lora" : "full",
                                     .weights = weights + off,
                                     .n = len,
                                     .offset = off,
                                     .total = n};
        rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0};
        const char *peers[RL_RUN_MAX_RANKS] = {0};
        for (int j = 0; j < na && !rc; j++) {
            rc = rl_proto_load_weights_encode(&q, rl_run_id(run), &reqs[j], err, err_len);
            peers[j] = run->samplers.names[job->ks[j]];
        }
        if (rc) {
            for (int j = 0; j < na; j++) {
                rl_msg_free(&reqs[j]);
            }
        } else {
            rc = rl_group_post(run->g, na, peers, reqs, job->ids + (size_t)b * na, err, err_len);
        }
        if (!rc) {
            job->nb = b + 1;
        }
    }
    job->na = na;
    if (rc && job->nb == 0) {
        free(job->ids);
        job->ids = NULL;
        job->na = 0;
    }
    return rc;
}

// The actor's publish_weights handle in one load_weights to each of job->ni samplers (job->ki).
static int s_post_ipc(rl_run_t *run, rl_run_syncjob_t *job, char *err, size_t err_len) {
    const int ni = job->ni;
    job->ni = 0;
    rl_msg_t *req = NULL, *rep = NULL;
    rl_proto_request(RL_PROTO_PUBLISH_WEIGHTS, rl_run_id(run), &req);
    if (!req) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    const char *peer = run->actor.names[0];
    char why[RL_GROUP_WHY] = "";
    int rc =
        rl_group_call_each(run->g, 1, &peer, &req, &rep,
                           s_timeout(run, run->r->roles.request_timeout), &why, NULL, err, err_len);
    if (!rc && !rep) { // the actor refused (or is gone: what follows says so)
        return rl_errf(err, err_len, RL_EUNSUPPORTED, "%s", why);
    }
    if (rc) {
        return rc;
    }
    rl_proto_publish_weights_reply_t x;
    if (rl_proto_publish_weights_reply_decode(rep, &x, why, sizeof why) != 0 ||
        x.n_handle != RL_MODEL_IPC_HANDLE) {
        rl_msg_free(&rep);
        return rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed publish_weights reply%s%s",
                       run->actor.names[0], why[0] ? ": " : "", why);
    }
    const int64_t array[2] = {x.layout, x.floats};
    rl_proto_load_weights_t q = {.version = run->version,
                                 .kind = run->r->lora.enabled ? "lora" : "full",
                                 .ipc = x.handle,
                                 .n_ipc = x.n_handle,
                                 .ipc_array = array,
                                 .n_ipc_array = 2};
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0};
    const char *peers[RL_RUN_MAX_RANKS] = {0};
    for (int j = 0; j < ni && !rc; j++) {
        rc = rl_proto_load_weights_encode(&q, rl_run_id(run), &reqs[j], err, err_len);
        peers[j] = run->samplers.names[job->ki[j]];
    }
    if (run->n_trainable == 0) { // no export tells it: the array's floats (with its gaps)
        run->n_trainable = x.floats;
    }
    rl_msg_free(&rep); // the requests hold copies of the handle
    if (rc) {
        for (int j = 0; j < ni; j++) {
            rl_msg_free(&reqs[j]);
        }
        return rc;
    }
    if ((rc = rl_group_post(run->g, ni, peers, reqs, job->ii, err, err_len)) == 0) {
        job->ni = ni;
        run->ipc_inflight += ni;
    }
    return rc;
}

int rl_run_sync_post(rl_run_t *run, const float *weights, int64_t n, rl_run_syncjob_t *job,
                     char *err, size_t err_len) {
    memset(job, 0, sizeof *job);
    if (weights) {
        run->n_trainable = n;
    }
    s_sync_plan(run);
    int ks[RL_RUN_MAX_RANKS];
    int na = s_active(run, run->samplers.n, ks);
    for (int j = 0; j < na; j++) {
        if (run->sync_ipc[ks[j]]) {
            job->ki[job->ni++] = ks[j];
        } else {
            job->ks[job->na++] = ks[j];
        }
    }
    const int ni = job->ni;
    int rc = ni > 0 ? s_post_ipc(run, job, err, err_len) : 0;
    float *own = NULL;
    if (rc == RL_EUNSUPPORTED && run->r->roles.weight_sync == RL_RECIPE_SYNC_AUTO) {
        // the actor cannot share its array (the driver refused a handle): every sampler takes
        // the weights through host memory from now on, this version too
        rl_log_warn("weight sync: the actor cannot share its weights through CUDA IPC (%s); the "
                    "samplers take them through host memory from now on",
                    err);
        for (int j = 0; j < ni; j++) {
            run->sync_ipc[job->ki[j]] = 0;
            job->ks[job->na++] = job->ki[j];
        }
        job->ni = 0;
        rc = weights ? 0 : rl_run_export(run, &own, &n, err, err_len);
        weights = own ? own : weights;
    } else if (rc == RL_EUNSUPPORTED) {
        char why[RL_GROUP_WHY];
        snprintf(why, sizeof why, "%s", err);
        rc = rl_errf(err, err_len, RL_EIO, "%s (roles.weight_sync: ipc)", why);
    }
    if (!rc && (job->na > 0 || job->ni == 0)) {
        rc = s_post_buckets(run, weights, n, job, err, err_len);
    }
    free(own); // the requests hold copies
    return rc;
}

static int s_collect_buckets(rl_run_t *run, rl_run_syncjob_t *job, char *err, size_t err_len) {
    static char why[RL_RUN_MAX_RANKS][RL_GROUP_WHY];
    char failed[RL_RUN_MAX_RANKS] = {0};
    int na = job->na, nb = job->nb, rc = 0;
    job->na = job->nb = 0;
    for (int b = 0; b < nb; b++) {
        rl_msg_t *reps[RL_RUN_MAX_RANKS] = {0};
        int r = rl_group_collect(run->g, na, job->ids + (size_t)b * na, reps,
                                 s_timeout(run, run->r->roles.request_timeout), why, NULL, err,
                                 err_len);
        rc = rc ? rc : r;
        // a remote sampler that misses a version leaves the run (it would refuse work anyway)
        for (int j = 0; j < na; j++) {
            if (!rc && !reps[j] && !failed[j]) {
                failed[j] = 1;
                rc = s_sampler_failed(run, job->ks[j], why[j], 0, err, err_len);
            }
            rl_msg_free(&reps[j]);
        }
    }
    free(job->ids);
    job->ids = NULL;
    int ks[RL_RUN_MAX_RANKS];
    if (!rc && na > 0 && s_active(run, run->samplers.n, ks) == 0) {
        rc = rl_errf(err, err_len, RL_EIO, "no sampler left: %s", why[0]);
    }
    return rc;
}

// Samplers ks[0..n) whose IPC load failed, with auto: the weights through host memory now.
static int s_sync_host_now(rl_run_t *run, const int *ks, int n, char *err, size_t err_len) {
    float *w = NULL;
    int64_t nw = 0;
    int rc = rl_run_export(run, &w, &nw, err, err_len);
    rl_run_syncjob_t job;
    memset(&job, 0, sizeof job);
    job.na = n;
    memcpy(job.ks, ks, (size_t)n * sizeof *ks);
    rc = rc ? rc : s_post_buckets(run, w, nw, &job, err, err_len);
    int r2 = s_collect_buckets(run, &job, err, err_len);
    free(w);
    return rc ? rc : r2;
}

static int s_collect_ipc(rl_run_t *run, rl_run_syncjob_t *job, char *err, size_t err_len) {
    static char why[RL_RUN_MAX_RANKS][RL_GROUP_WHY];
    const int ni = job->ni;
    job->ni = 0;
    rl_msg_t *reps[RL_RUN_MAX_RANKS] = {0};
    int rc =
        rl_group_collect(run->g, ni, job->ii, reps, s_timeout(run, run->r->roles.request_timeout),
                         why, NULL, err, err_len);
    run->ipc_inflight -= ni;
    int redo[RL_RUN_MAX_RANKS], nr = 0;
    for (int j = 0; j < ni; j++) {
        int k = job->ki[j];
        if (!rc && !reps[j]) {
            if (run->r->roles.weight_sync == RL_RECIPE_SYNC_AUTO) {
                rl_log_warn("%s: the weights through CUDA IPC failed (%s); it takes them through "
                            "host memory from now on",
                            run->samplers.names[k], why[j]);
                run->sync_ipc[k] = 0;
                redo[nr++] = k;
            } else {
                rc = rl_errf(err, err_len, RL_EIO, "%s (roles.weight_sync: ipc)", why[j]);
            }
        }
        rl_msg_free(&reps[j]);
    }
    return !rc && nr > 0 ? s_sync_host_now(run, redo, nr, err, err_len) : rc;
}

int rl_run_sync_collect(rl_run_t *run, rl_run_syncjob_t *job, char *err, size_t err_len) {
    int rc = job->ni > 0 ? s_collect_ipc(run, job, err, err_len) : 0;
    int r2 = s_collect_buckets(run, job, err, err_len);
    return rc ? rc : r2;
}

int rl_run_sync(rl_run_t *run, const float *weights, int64_t n, char *err, size_t err_len) {
    rl_run_syncjob_t job;
    int rc = rl_run_sync_post(run, weights, n, &job, err, err_len);
    return rc ? rc : rl_run_sync_collect(run, &job, err, err_len);
}

int rl_run_sync_actor(rl_run_t *run, char *err, size_t err_len) {
    if (run->samplers.n == 0) {
        return 0;
    }
    float *w = NULL;
    int64_t n = 0;
    int rc = rl_run_sync_needs_host(run) ? rl_run_export(run, &w, &n, err, err_len) : 0;
    if (!rc) {
        rc = rl_run_sync(run, w, n, err, err_len);
    }
    free(w);
    return rc;
}

// ---- logprobs ---------------------------------------------------------------------------------

int rl_run_logprobs(rl_run_t *run, int reference, const int32_t *tokens, const int32_t *lengths,
                    int64_t B, int64_t T, double temperature, float *logp, char *err,
                    size_t err_len) {
    // the reference: its own worker when the run has one, else the actor with adapters off
    const rl_run_group_t *grp = reference && run->reference.n > 0 ? &run->reference : &run->actor;
    int n = grp->n, rc = 0;
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0}, *reps[RL_RUN_MAX_RANKS] = {0};
    int64_t lo[RL_RUN_MAX_RANKS], hi[RL_RUN_MAX_RANKS];
    for (int i = 0; !rc && i < n; i++) { // a mesh's ranks: each its rows
        s_rows_of(n, B, 1, i, &lo[i], &hi[i]);
        rl_proto_logprobs_t q = {tokens + lo[i] * T,
                                 lengths + lo[i],
                                 hi[i] - lo[i],
                                 T,
                                 !reference || run->reference.n > 0,
                                 temperature};
        rc = rl_proto_logprobs_encode(&q, rl_run_id(run), &reqs[i], err, err_len);
    }
    rc = s_call_ranks(run, grp, rc, reqs, reps, run->r->roles.request_timeout, err, err_len);
    if (rc) {
        return rc;
    }
    for (int i = 0; !rc && i < n; i++) {
        rl_proto_logprobs_reply_t x;
        char why[512] = "";
        if (rl_proto_logprobs_reply_decode(reps[i], &x, why, sizeof why) != 0 ||
            x.B != hi[i] - lo[i] || x.T != T) {
            rc = rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed logprobs reply%s%s",
                         grp->names[i], why[0] ? ": " : "", why);
        } else {
            memcpy(logp + lo[i] * T, x.logp, (size_t)x.B * (size_t)T * sizeof(float));
        }
    }
    for (int i = 0; i < n; i++) {
        rl_msg_free(&reps[i]);
    }
    return rc;
}

// values (cols = T) or scores (cols = 1) of rank 0 of grp
static int s_values(rl_run_t *run, const rl_run_group_t *grp, int scores, const int32_t *tokens,
                    const int32_t *lengths, int64_t B, int64_t T, float *out, char *err,
                    size_t err_len) {
    int n = grp->n, rc = 0;
    int64_t cols = scores ? 1 : T;
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0}, *reps[RL_RUN_MAX_RANKS] = {0};
    int64_t lo[RL_RUN_MAX_RANKS], hi[RL_RUN_MAX_RANKS];
    for (int i = 0; !rc && i < n; i++) { // a mesh's ranks: each its rows
        s_rows_of(n, B, 1, i, &lo[i], &hi[i]);
        rl_proto_values_t q = {tokens + lo[i] * T, lengths + lo[i], hi[i] - lo[i], T, scores};
        rc = rl_proto_values_encode(&q, rl_run_id(run), &reqs[i], err, err_len);
    }
    rc = s_call_ranks(run, grp, rc, reqs, reps, run->r->roles.request_timeout, err, err_len);
    if (rc) {
        return rc;
    }
    for (int i = 0; !rc && i < n; i++) {
        rl_proto_values_reply_t x;
        char why[512] = "";
        if (rl_proto_values_reply_decode(reps[i], &x, why, sizeof why) != 0 ||
            x.B != hi[i] - lo[i] || x.T != cols) {
            rc = rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed %s reply%s%s",
                         grp->names[i], scores ? "scores" : "values", why[0] ? ": " : "", why);
        } else {
            memcpy(out + lo[i] * cols, x.values, (size_t)x.B * (size_t)cols * sizeof(float));
        }
    }
    for (int i = 0; i < n; i++) {
        rl_msg_free(&reps[i]);
    }
    return rc;
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

// Rows [lo, hi) of a train request (every per-row and per-token array sliced; the global
// divisor and everything else as given).
static rl_proto_train_t s_train_share(const rl_proto_train_t *q, int64_t lo, int64_t hi) {
    rl_proto_train_t s = *q;
    const int64_t T = q->T;
    s.B = hi - lo;
    s.tokens = q->tokens + lo * T;
    s.lengths = q->lengths + lo;
    s.mask = q->mask + lo * T;
#define S_ROW(f) s.f = q->f ? q->f + lo : NULL
#define S_TOK(f) s.f = q->f ? q->f + lo * T : NULL
    S_ROW(adv);
    S_ROW(ref_sum);
    S_ROW(margin);
    S_TOK(token_adv);
    S_TOK(mu_logp);
    S_TOK(ref_logp);
    S_TOK(old_logp);
    S_TOK(values);
    S_TOK(returns);
#undef S_ROW
#undef S_TOK
    return s;
}

// A mesh's train: each rank its rows (a loss's groups stay whole), then one reply as a 1×1 actor
// would give: the statistics merged over the ranks as the loss defines (each rank's share of the
// batch's sums added; the gradient norm, the mesh's, rank 0's), logπ_old laid back in row order,
// the pass count and weights of rank 0 (the weights are whole on rank 0).
static int s_train_mesh(rl_run_t *run, const rl_run_group_t *grp, const rl_proto_train_t *q,
                        rl_msg_t **rep, char *err, size_t err_len) {
    int n = grp->n, rc = 0;
    const rl_loss_t *L = rl_loss_find(q->loss);
    if (!L) {
        return rl_errf(err, err_len, RL_EINVAL, "train: unknown loss '%s'", q->loss);
    }
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0}, *reps[RL_RUN_MAX_RANKS] = {0};
    int64_t lo[RL_RUN_MAX_RANKS], hi[RL_RUN_MAX_RANKS];
    for (int i = 0; !rc && i < n; i++) {
        s_rows_of(n, q->B, L->rows, i, &lo[i], &hi[i]);
        rl_proto_train_t s = s_train_share(q, lo[i], hi[i]);
        rc = rl_proto_train_encode(&s, rl_run_id(run), &reqs[i], err, err_len);
    }
    rc = s_call_ranks(run, grp, rc, reqs, reps, run->r->roles.request_timeout, err, err_len);
    if (rc) {
        return rc;
    }
    float *old = rc ? NULL : calloc((size_t)(q->B * q->T) + 1, sizeof(float));
    if (!rc && !old) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_proto_train_reply_t m;
    memset(&m, 0, sizeof m);
    rl_loss_stats_t acc;
    for (int i = 0; !rc && i < n; i++) {
        rl_proto_train_reply_t x;
        rl_loss_stats_t xs;
        char why[512] = "";
        if (rl_proto_train_reply_decode(reps[i], &x, why, sizeof why) != 0 ||
            x.B != hi[i] - lo[i] || x.T != q->T || (i == 0 && q->want_weights && !x.weights)) {
            rc = rl_errf(err, err_len, RL_EPROTO, "worker %s: malformed train reply%s%s",
                         grp->names[i], why[0] ? ": " : "", why);
            break;
        }
        memcpy(old + lo[i] * q->T, x.old_logp, (size_t)(x.B * x.T) * sizeof(float));
        rl_proto_train_reply_stats(&x, &xs);
        if (i == 0) {
            m = x;
            acc = xs;
        } else if (rl_loss_stats_merge_rank(L, &acc, &xs) != 0) {
            rc = rl_errf(err, err_len, RL_EPROTO,
                         "worker %s: its train reply lacks statistics of rank 0's",
                         grp->names[i]);
        }
    }
    if (!rc) {
        m.old_logp = old;
        m.B = q->B;
        m.T = q->T;
        rl_proto_train_reply_set_stats(&m, &acc);
        rc = rl_proto_train_reply_encode(&m, rl_msg_id(reps[0]), rep, err, err_len);
    }
    free(old);
    for (int i = 0; i < n; i++) {
        rl_msg_free(&reps[i]);
    }
    return rc;
}

int rl_run_train(rl_run_t *run, const rl_run_group_t *grp, const rl_proto_train_t *q,
                 rl_proto_train_reply_t *x, rl_msg_t **rep, char *err, size_t err_len) {
    rl_msg_t *req = NULL;
    *rep = NULL;
    int rc = 0;
    if (run->ipc_inflight > 0) { // samplers read the actor's device array: it must not change
        return rl_errf(err, err_len, RL_EINVAL,
                       "internal: the actor would train while %d sampler%s copy its weights "
                       "(the sync is not collected)",
                       run->ipc_inflight, run->ipc_inflight == 1 ? "" : "s");
    }
    run->actor_consistent = 0; // until rl_run_advance: the trained models are ahead of `step`
    if (grp->n > 1) {
        rc = s_train_mesh(run, grp, q, rep, err, err_len);
    } else if ((rc = rl_proto_train_encode(q, rl_run_id(run), &req, err, err_len)) == 0) {
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

void rl_run_advance(rl_run_t *run, int64_t tokens, const rl_data_pos_t *through) {
    run->step++;
    run->actor_consistent = 1;
    run->num_tokens += tokens;
    run->trained = through ? *through : rl_data_sampler_pos(run->order);
}

void rl_run_loss_metrics(rl_run_t *run, const char *loss, const rl_proto_train_reply_t *x) {
    const rl_loss_t *L = rl_loss_find(loss);
    rl_loss_stats_t st;
    rl_proto_train_reply_stats(x, &st);
    if (L) {
        rl_loss_metrics(L, &st, "", run->metrics);
    }
}

double rl_run_loss_metric(const char *loss, const rl_proto_train_reply_t *x, const char *metric) {
    const rl_loss_t *L = rl_loss_find(loss);
    rl_loss_stats_t st;
    rl_proto_train_reply_stats(x, &st);
    return L ? rl_loss_metric(L, &st, metric) : NAN;
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

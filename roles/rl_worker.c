// rl_worker — one worker process: connect, hello, heartbeat, then serve requests until shutdown.
// Read top to bottom: replies, the actor's verbs, the sampler's, the reward worker's, the loop.
#include "rl_worker.h"

#include "rl_chan.h"
#include "rl_config.h"
#include "rl_err.h"
#include "rl_fault.h"
#include "rl_log.h"
#include "rl_model.h"
#include "rl_policy.h"
#include "rl_reward.h"
#include "rl_sampler.h"
#include "rl_wire.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

typedef struct {
    const rl_worker_opts_t *o;
    rl_recipe_t *recipe;
    rl_chan_t *chan;
    // actor
    rl_policy_t *policy;
    // sampler
    rl_model_t *model;
    rl_sampler_t *sampler;
    int64_t version;  // weights version held (-1: none yet)
    // reward
    rl_reward_t **rewards;
    int n_rewards;
    int done;
} s_worker_t;

// ---- replies -------------------------------------------------------------------------------

static int s_send(s_worker_t *w, rl_msg_t **m) {
    char err[512];
    int rc = rl_chan_send(w->chan, NULL, m, err, sizeof(err));
    if (rc) {
        rl_log_error("%s/%d: send: %s", w->o->role, w->o->rank, err);
    }
    return rc;
}

static rl_msg_t *s_reply(uint64_t id) {
    rl_msg_t *m = rl_msg_new("reply", id);
    if (m && rl_msg_set_bool(m, "ok", 1)) {
        rl_msg_free(&m);
    }
    return m;
}

static void s_fail(s_worker_t *w, uint64_t id, const char *err) {
    rl_msg_t *m = rl_msg_new("reply", id);
    if (!m || rl_msg_set_bool(m, "ok", 0) || rl_msg_set_str(m, "error", err)) {
        rl_msg_free(&m);
        rl_log_error("%s/%d: out of memory answering request %llu", w->o->role, w->o->rank,
                     (unsigned long long)id);
        return;
    }
    s_send(w, &m);
}

// A tensor argument of the request with an exact rank; the message says which is wrong.
static int s_tensor(const rl_msg_t *req, const char *key, rl_wire_dtype_t dt, int ndim,
                    int64_t *shape, const void **data, char *err, size_t err_len) {
    int rc = rl_msg_get_tensor(req, key, dt, ndim, shape, data);
    if (rc == RL_ENOTFOUND) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: missing tensor '%s'", rl_msg_op(req), key);
    }
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: %s", rl_msg_op(req), rl_msg_errmsg(req));
    }
    return 0;
}

static int s_int(const rl_msg_t *req, const char *key, int64_t *v, char *err, size_t err_len) {
    int rc = rl_msg_get_int(req, key, v);
    if (rc) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: '%s': %s", rl_msg_op(req), key,
                       rc == RL_ENOTFOUND ? "missing integer" : rl_msg_errmsg(req));
    }
    return 0;
}

static int s_float(const rl_msg_t *req, const char *key, double *v, char *err, size_t err_len) {
    int rc = rl_msg_get_float(req, key, v);
    if (rc) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: '%s': %s", rl_msg_op(req), key,
                       rc == RL_ENOTFOUND ? "missing number" : rl_msg_errmsg(req));
    }
    return 0;
}

// ---- actor -----------------------------------------------------------------------------------

// tokens (B,T) and lengths (B), checked against each other.
static int s_batch(const rl_msg_t *req, const int32_t **tok, const int32_t **len, int *B, int *T,
                   char *err, size_t err_len) {
    int64_t st[2], sl[1];
    int rc = s_tensor(req, "tokens", RL_DT_I32, 2, st, (const void **)tok, err, err_len);
    if (!rc) {
        rc = s_tensor(req, "lengths", RL_DT_I32, 1, sl, (const void **)len, err, err_len);
    }
    if (rc) {
        return rc;
    }
    if (st[0] < 1 || st[1] < 2 || sl[0] != st[0] || st[0] > (1 << 24) || st[1] > (1 << 24)) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: tokens [%lld,%lld] and lengths [%lld] "
                       "do not fit", rl_msg_op(req), (long long)st[0], (long long)st[1],
                       (long long)sl[0]);
    }
    *B = (int)st[0];
    *T = (int)st[1];
    return 0;
}

static int s_actor_logprobs(s_worker_t *w, const rl_msg_t *req, rl_msg_t **out, char *err,
                            size_t err_len) {
    const int32_t *tok, *len;
    int B = 0, T = 0, adapter = 1;
    int rc = s_batch(req, &tok, &len, &B, &T, err, err_len);
    if (rc) {
        return rc;
    }
    rl_msg_get_bool(req, "adapter", &adapter);
    size_t bt = (size_t)B * (size_t)T;
    float *logp = malloc(bt * sizeof(float));
    if (!logp) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rc = rl_policy_logprobs(w->policy, tok, len, B, T, (float)w->recipe->sampling.temperature,
                            adapter, logp, err, err_len);
    if (rc) {
        free(logp);
        return rc;
    }
    rl_msg_t *m = s_reply(rl_msg_id(req));
    int64_t shape[2] = {B, T};
    if (!m || rl_msg_set_tensor_gift(m, "logp", RL_DT_F32, 2, shape, logp)) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

static int s_actor_train(s_worker_t *w, const rl_msg_t *req, rl_msg_t **out, char *err,
                         size_t err_len) {
    rl_policy_batch_t b = {0};
    const int32_t *tok, *len;
    int rc = s_batch(req, &tok, &len, &b.B, &b.T, err, err_len);
    if (rc) {
        return rc;
    }
    int64_t sh[2];
    const uint8_t *mask;
    const double *adv;
    const float *mu = NULL, *ref = NULL;
    if ((rc = s_tensor(req, "mask", RL_DT_U8, 2, sh, (const void **)&mask, err, err_len)) ||
        (sh[0] != b.B || sh[1] != b.T)) {
        return rc ? rc : rl_errf(err, err_len, RL_EPROTO, "train: mask shape");
    }
    if ((rc = s_tensor(req, "adv", RL_DT_F64, 1, sh, (const void **)&adv, err, err_len)) ||
        sh[0] != b.B) {
        return rc ? rc : rl_errf(err, err_len, RL_EPROTO, "train: adv shape");
    }
    if (rl_msg_has(req, "mu_logp")) {
        if ((rc = s_tensor(req, "mu_logp", RL_DT_F32, 2, sh, (const void **)&mu, err,
                           err_len)) ||
            sh[0] != b.B || sh[1] != b.T) {
            return rc ? rc : rl_errf(err, err_len, RL_EPROTO, "train: mu_logp shape");
        }
    }
    if (rl_msg_has(req, "ref_logp")) {
        if ((rc = s_tensor(req, "ref_logp", RL_DT_F32, 2, sh, (const void **)&ref, err,
                           err_len)) ||
            sh[0] != b.B || sh[1] != b.T) {
            return rc ? rc : rl_errf(err, err_len, RL_EPROTO, "train: ref_logp shape");
        }
    }
    int lens_ok = 1;
    for (int i = 0; i < b.B; i++) {
        lens_ok &= len[i] >= 1 && len[i] <= b.T;
    }
    if (!lens_ok) {
        return rl_errf(err, err_len, RL_EPROTO, "train: a length outside [1, T]");
    }
    int *lengths = malloc((size_t)b.B * sizeof(int));
    float *old = malloc((size_t)b.B * (size_t)b.T * sizeof(float));
    if (!lengths || !old) {
        free(lengths);
        free(old);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < b.B; i++) {
        lengths[i] = len[i];
    }
    int64_t mbs = b.B, iters = 1;
    double lr = 0, denom = 0;
    if ((rc = s_float(req, "lr", &lr, err, err_len)) ||
        (rc = s_float(req, "denom", &denom, err, err_len)) ||
        (rc = s_int(req, "micro_batch", &mbs, err, err_len)) ||
        (rc = s_int(req, "iterations", &iters, err, err_len))) {
        free(lengths);
        free(old);
        return rc;
    }
    b.tokens = tok;
    b.lengths = lengths;
    b.mask = mask;
    b.adv = adv;
    b.mu_logp = mu;
    b.ref_logp = ref;
    b.denom = denom;
    rl_policy_train_stats_t st;
    const rl_recipe_t *r = w->recipe;
    rc = rl_policy_train(w->policy, &b, &r->algorithm, (float)r->sampling.temperature,
                         (int)(mbs < 1 ? 1 : mbs), (int)(iters < 1 ? 1 : iters), lr,
                         r->optim.max_grad_norm, old, &st, err, err_len);
    free(lengths);
    if (rc) {
        free(old);
        return rc;
    }
    rl_msg_t *m = s_reply(rl_msg_id(req));
    int64_t shape[2] = {b.B, b.T};
    if (!m || rl_msg_set_tensor_gift(m, "old_logp", RL_DT_F32, 2, shape, old) ||
        rl_msg_set_float(m, "loss", st.loss.loss) ||
        rl_msg_set_float(m, "tokens", st.loss.tokens) ||
        rl_msg_set_float(m, "kl", st.loss.kl) ||
        rl_msg_set_float(m, "clip_low", st.loss.clip_low) ||
        rl_msg_set_float(m, "clip_high", st.loss.clip_high) ||
        rl_msg_set_float(m, "dual_clip", st.loss.dual_clip) ||
        rl_msg_set_float(m, "ratio", st.loss.ratio) ||
        rl_msg_set_float(m, "tis_weight", st.loss.tis_weight) ||
        rl_msg_set_float(m, "tis_masked", st.loss.tis_masked) ||
        rl_msg_set_float(m, "logprob_gap", st.loss.logprob_gap) ||
        rl_msg_set_float(m, "grad_norm", st.grad_norm) ||
        rl_msg_set_float(m, "entropy", st.entropy) ||
        rl_msg_set_int(m, "iterations", st.iterations)) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    // the updated trainable weights ride along: the controller syncs the samplers from them
    // without another round trip (export_weights)
    size_t nw;
    const float *wts = rl_policy_weights(w->policy, &nw);
    float *copy = malloc(nw * sizeof(float));
    int64_t sw[1] = {(int64_t)nw};
    if (!copy) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    memcpy(copy, wts, nw * sizeof(float));
    if (rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 1, sw, copy)) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

static int s_actor_export(s_worker_t *w, const rl_msg_t *req, rl_msg_t **out, char *err,
                          size_t err_len) {
    size_t n;
    const float *p = rl_policy_weights(w->policy, &n);
    float *copy = malloc(n * sizeof(float));
    if (!copy) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    memcpy(copy, p, n * sizeof(float));
    rl_msg_t *m = s_reply(rl_msg_id(req));
    int64_t shape[1] = {(int64_t)n};
    if (!m || rl_msg_set_str(m, "kind", rl_policy_is_lora(w->policy) ? "lora" : "full") ||
        rl_msg_set_tensor_gift(m, "weights", RL_DT_F32, 1, shape, copy)) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

static int s_actor_save_load(s_worker_t *w, const rl_msg_t *req, int load, rl_msg_t **out,
                             char *err, size_t err_len) {
    const char *dir;
    if (rl_msg_get_str(req, "dir", &dir, NULL)) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: missing 'dir'", rl_msg_op(req));
    }
    int rc;
    int64_t mts = 0;
    if (load) {
        rl_msg_get_int(req, "model_train_step", &mts);
        rc = rl_policy_load(w->policy, dir, (uint64_t)mts, err, err_len);
    } else {
        rc = rl_policy_save(w->policy, dir, w->recipe->model.path, err, err_len);
    }
    if (rc) {
        return rc;
    }
    rl_msg_t *m = s_reply(rl_msg_id(req));
    if (!m || rl_msg_set_int(m, "model_train_step",
                             (int64_t)rl_model_train_step(rl_policy_model(w->policy)))) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

static int s_actor_final(s_worker_t *w, const rl_msg_t *req, rl_msg_t **out, char *err,
                         size_t err_len) {
    const char *dir;
    int bf16 = 0;
    if (rl_msg_get_str(req, "dir", &dir, NULL)) {
        return rl_errf(err, err_len, RL_EPROTO, "save_final: missing 'dir'");
    }
    rl_msg_get_bool(req, "bf16", &bf16);
    int rc = rl_policy_save_final(w->policy, dir, w->recipe->model.path, bf16, err, err_len);
    if (rc) {
        return rc;
    }
    *out = s_reply(rl_msg_id(req));
    return *out ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
}

// ---- sampler ---------------------------------------------------------------------------------

static int s_sampler_load(s_worker_t *w, const rl_msg_t *req, rl_msg_t **out, char *err,
                          size_t err_len) {
    int64_t version, shape[1];
    const float *wts;
    int rc;
    if ((rc = s_int(req, "version", &version, err, err_len)) ||
        (rc = s_tensor(req, "weights", RL_DT_F32, 1, shape, (const void **)&wts, err,
                       err_len))) {
        return rc;
    }
    if (rl_fault("load_weights")) { // docs/reliability.md; tests only
        return rl_errf(err, err_len, RL_EIO, "load_weights: failed (RLCTL_FAULT=load_weights)");
    }
    size_t n;
    float *dst = rl_model_trainable(w->model, &n);
    if (!dst || (int64_t)n != shape[0]) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "load_weights: %lld floats for a sampler that holds %zu", (long long)shape[0],
                       n);
    }
    memcpy(dst, wts, n * sizeof(float));
    w->version = version;
    rl_msg_t *m = s_reply(rl_msg_id(req));
    if (!m || rl_msg_set_int(m, "version", version)) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

static int s_sampler_generate(s_worker_t *w, const rl_msg_t *req, rl_msg_t **out, char *err,
                              size_t err_len) {
    int64_t version, n, mnt, top_k, seed, sp[1], sl[1], si[1], ss[1] = {0};
    double temperature, top_p;
    const int32_t *ids, *plen, *stop = NULL;
    const int64_t *pidx;
    int rc;
    if ((rc = s_int(req, "version", &version, err, err_len)) ||
        (rc = s_int(req, "n", &n, err, err_len)) ||
        (rc = s_int(req, "max_new_tokens", &mnt, err, err_len)) ||
        (rc = s_int(req, "top_k", &top_k, err, err_len)) ||
        (rc = s_int(req, "seed", &seed, err, err_len)) ||
        (rc = s_float(req, "temperature", &temperature, err, err_len)) ||
        (rc = s_float(req, "top_p", &top_p, err, err_len)) ||
        (rc = s_tensor(req, "prompts", RL_DT_I32, 1, sp, (const void **)&ids, err, err_len)) ||
        (rc = s_tensor(req, "prompt_lens", RL_DT_I32, 1, sl, (const void **)&plen, err,
                       err_len)) ||
        (rc = s_tensor(req, "prompt_index", RL_DT_I64, 1, si, (const void **)&pidx, err,
                       err_len))) {
        return rc;
    }
    if (rl_msg_has(req, "stop_ids") &&
        (rc = s_tensor(req, "stop_ids", RL_DT_I32, 1, ss, (const void **)&stop, err, err_len))) {
        return rc;
    }
    if (version != w->version) {
        return rl_errf(err, err_len, RL_EVERSION,
                       "generate: asked for weights version %lld, this sampler holds %lld",
                       (long long)version, (long long)w->version);
    }
    if (si[0] != sl[0] || n < 1 || n > 4096 || mnt < 1 || mnt > (1 << 20) || sl[0] > (1 << 20)) {
        return rl_errf(err, err_len, RL_EPROTO, "generate: inconsistent request");
    }
    int P = (int)sl[0];
    rl_sampler_prompt_t *pr = malloc(((size_t)P + 1) * sizeof(*pr));
    if (!pr) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int64_t off = 0;
    for (int i = 0; i < P; i++) {
        if (plen[i] < 1 || off + plen[i] > sp[0]) {
            free(pr);
            return rl_errf(err, err_len, RL_EPROTO, "generate: prompt_lens exceed prompts");
        }
        pr[i].ids = ids + off;
        pr[i].len = plen[i];
        pr[i].index = (uint64_t)pidx[i];
        off += plen[i];
    }
    rl_sampler_params_t sp_;
    rl_sampler_params_default(&sp_);
    sp_.sample.temperature = (float)temperature;
    sp_.sample.top_p = (float)top_p;
    sp_.sample.top_k = (int)top_k;
    sp_.n = (int)n;
    sp_.max_new_tokens = (int)mnt;
    sp_.seed = (uint64_t)seed;
    sp_.stop_ids = stop;
    sp_.n_stop = (int)ss[0];
    rl_sampler_result_t *res = NULL;
    rc = rl_sampler_generate(w->sampler, pr, P, &sp_, &res);
    free(pr);
    if (rc) {
        return rl_errf(err, err_len, rc, "generate: %s", rl_sampler_errmsg(w->sampler));
    }
    int nres = P * (int)n;
    int64_t total = 0;
    for (int i = 0; i < nres; i++) {
        total += res[i].n_ids;
    }
    int32_t *lens = malloc((size_t)nres * sizeof(int32_t));
    int32_t *oid = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    float *olp = malloc((size_t)(total ? total : 1) * sizeof(float));
    uint8_t *fin = malloc((size_t)nres);
    if (!lens || !oid || !olp || !fin) {
        free(lens);
        free(oid);
        free(olp);
        free(fin);
        rl_sampler_results_free(&res, nres);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int64_t o = 0;
    for (int i = 0; i < nres; i++) {
        lens[i] = res[i].n_ids;
        fin[i] = (uint8_t)res[i].finish;
        memcpy(oid + o, res[i].ids, (size_t)res[i].n_ids * sizeof(int32_t));
        memcpy(olp + o, res[i].logprobs, (size_t)res[i].n_ids * sizeof(float));
        o += res[i].n_ids;
    }
    rl_sampler_results_free(&res, nres);
    // fault injection for the controller's reply checks (docs/reliability.md; tests only)
    if (total > 0 && rl_fault("generate_bad_id")) {
        oid[total - 1] = rl_model_config(w->model)->vocab_size + 7;
    }
    if (total > 0 && rl_fault("generate_bad_logprob")) {
        olp[0] = NAN;
    }
    if (nres > 0 && rl_fault("generate_bad_finish")) {
        fin[0] = 9;
    }
    rl_sampler_stats_t stats;
    rl_sampler_stats(w->sampler, &stats);
    rl_msg_t *m = s_reply(rl_msg_id(req));
    int64_t s1[1] = {nres}, s2[1] = {total};
    if (!m) {
        free(lens);
        free(oid);
        free(olp);
        free(fin);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    // gifts are freed by the message on failure too
    int bad = rl_msg_set_tensor_gift(m, "lens", RL_DT_I32, 1, s1, lens);
    bad |= rl_msg_set_tensor_gift(m, "ids", RL_DT_I32, 1, s2, oid);
    bad |= rl_msg_set_tensor_gift(m, "logprobs", RL_DT_F32, 1, s2, olp);
    bad |= rl_msg_set_tensor_gift(m, "finish", RL_DT_U8, 1, s1, fin);
    bad |= rl_msg_set_int(m, "prefill_tokens", stats.prefill_tokens);
    bad |= rl_msg_set_int(m, "decode_tokens", stats.decode_tokens);
    if (bad) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

// ---- reward ----------------------------------------------------------------------------------

static int s_reward_score(s_worker_t *w, const rl_msg_t *req, rl_msg_t **out, char *err,
                          size_t err_len) {
    int64_t k, sl[1], si[1];
    const char *const *pr, *const *co, *const *rows;
    const size_t *prl, *col, *rowl;
    int np, nc, nr, rc;
    const int32_t *ids, *lens;
    if ((rc = s_int(req, "reward", &k, err, err_len))) {
        return rc;
    }
    if (k < 0 || k >= w->n_rewards) {
        return rl_errf(err, err_len, RL_EPROTO, "score: no reward %lld", (long long)k);
    }
    if (rl_msg_get_strs(req, "prompts", &pr, &prl, &np) ||
        rl_msg_get_strs(req, "completions", &co, &col, &nc) ||
        rl_msg_get_strs(req, "rows", &rows, &rowl, &nr)) {
        return rl_errf(err, err_len, RL_EPROTO, "score: prompts, completions and rows must be "
                       "string lists");
    }
    if ((rc = s_tensor(req, "ids", RL_DT_I32, 1, si, (const void **)&ids, err, err_len)) ||
        (rc = s_tensor(req, "lens", RL_DT_I32, 1, sl, (const void **)&lens, err, err_len))) {
        return rc;
    }
    if (np != nc || nc != nr || sl[0] != nc) {
        return rl_errf(err, err_len, RL_EPROTO, "score: %d prompts, %d completions, %d rows, "
                       "%lld lengths", np, nc, nr, (long long)sl[0]);
    }
    rl_reward_item_t *items = calloc((size_t)nc + 1, sizeof(*items));
    double *scores = malloc(((size_t)nc + 1) * sizeof(double));
    if (!items || !scores) {
        free(items);
        free(scores);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int64_t off = 0;
    for (int i = 0; i < nc; i++) {
        if (lens[i] < 0 || off + lens[i] > si[0]) {
            free(items);
            free(scores);
            return rl_errf(err, err_len, RL_EPROTO, "score: lens exceed ids");
        }
        items[i].prompt = pr[i];
        items[i].prompt_len = prl[i];
        items[i].completion = co[i];
        items[i].completion_len = col[i];
        items[i].completion_ids = ids + off;
        items[i].n_completion_ids = (size_t)lens[i];
        items[i].row_json = rows[i];
        items[i].row_json_len = rowl[i];
        off += lens[i];
    }
    rc = rl_reward_score(w->rewards[k], items, (size_t)nc, scores, err, err_len);
    free(items);
    if (rc) {
        free(scores);
        return rc;
    }
    rl_msg_t *m = s_reply(rl_msg_id(req));
    int64_t shape[1] = {nc};
    if (!m || rl_msg_set_tensor_gift(m, "scores", RL_DT_F64, 1, shape, scores)) {
        rl_msg_free(&m);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *out = m;
    return 0;
}

// ---- setup and the loop --------------------------------------------------------------------

static int s_setup(s_worker_t *w, char *err, size_t err_len) {
    const rl_worker_opts_t *o = w->o;
    int rc = rl_recipe_load_file(o->recipe, NULL, 0, 0, &w->recipe, err, err_len);
    if (rc) {
        return rc;
    }
    if (strcmp(o->role, "actor") == 0) {
        return rl_policy_new(w->recipe, o->threads, &w->policy, err, err_len);
    }
    if (strcmp(o->role, "sampler") == 0) {
        rl_model_opts_t mo;
        rl_policy_model_opts(w->recipe, o->threads, &mo);
        mo.lora_dropout = 0.0f;
        char msg[2048];
        w->model = rl_model_load(w->recipe->model.path, &mo, msg, sizeof(msg));
        if (!w->model) {
            return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
        }
        w->sampler = rl_sampler_new(w->model);
        w->version = -1;
        return w->sampler ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (strcmp(o->role, "reward") == 0) {
        w->n_rewards = w->recipe->n_rewards;
        w->rewards = calloc((size_t)w->n_rewards + 1, sizeof(*w->rewards));
        if (!w->rewards) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        for (int i = 0; i < w->n_rewards; i++) {
            if ((rc = rl_reward_open(&w->recipe->rewards[i], &w->rewards[i], err, err_len))) {
                return rc;
            }
        }
        return 0;
    }
    return rl_errf(err, err_len, RL_EINVAL, "unknown role '%s'", o->role);
}

static void s_teardown(s_worker_t *w) {
    rl_policy_destroy(&w->policy);
    rl_sampler_destroy(&w->sampler);
    rl_model_destroy(&w->model);
    for (int i = 0; i < w->n_rewards; i++) {
        rl_reward_close(&w->rewards[i]);
    }
    free(w->rewards);
    rl_recipe_destroy(&w->recipe);
}

static void s_handle(s_worker_t *w, const rl_msg_t *req) {
    const char *op = rl_msg_op(req);
    const char *role = w->o->role;
    char err[2048] = "";
    rl_msg_t *out = NULL;
    int rc;
    if (strcmp(op, "shutdown") == 0) {
        w->done = 1;
        out = s_reply(rl_msg_id(req));
        rc = out ? 0 : RL_ENOMEM;
    } else if (strcmp(role, "actor") == 0 && strcmp(op, "logprobs") == 0) {
        rc = s_actor_logprobs(w, req, &out, err, sizeof(err));
    } else if (strcmp(role, "actor") == 0 && strcmp(op, "train") == 0) {
        rc = s_actor_train(w, req, &out, err, sizeof(err));
    } else if (strcmp(role, "actor") == 0 && strcmp(op, "export_weights") == 0) {
        rc = s_actor_export(w, req, &out, err, sizeof(err));
    } else if (strcmp(role, "actor") == 0 && strcmp(op, "save") == 0) {
        rc = s_actor_save_load(w, req, 0, &out, err, sizeof(err));
    } else if (strcmp(role, "actor") == 0 && strcmp(op, "load") == 0) {
        rc = s_actor_save_load(w, req, 1, &out, err, sizeof(err));
    } else if (strcmp(role, "actor") == 0 && strcmp(op, "save_final") == 0) {
        rc = s_actor_final(w, req, &out, err, sizeof(err));
    } else if (strcmp(role, "sampler") == 0 && strcmp(op, "load_weights") == 0) {
        rc = s_sampler_load(w, req, &out, err, sizeof(err));
    } else if (strcmp(role, "sampler") == 0 && strcmp(op, "generate") == 0) {
        rc = s_sampler_generate(w, req, &out, err, sizeof(err));
    } else if (strcmp(role, "reward") == 0 && strcmp(op, "score") == 0) {
        rc = s_reward_score(w, req, &out, err, sizeof(err));
    } else {
        rc = rl_errf(err, sizeof(err), RL_EPROTO, "a %s worker does not serve '%s'", role, op);
    }
    if (rc) {
        s_fail(w, rl_msg_id(req), err[0] ? err : rl_strerror(rc));
        return;
    }
    s_send(w, &out);
}

static const char *const s_caps_actor[] = {"logprobs", "train", "export_weights", "save",
                                           "load", "save_final", "shutdown"};
static const char *const s_caps_sampler[] = {"load_weights", "generate", "shutdown"};
static const char *const s_caps_reward[] = {"score", "shutdown"};

// Reads the secret the controller wrote into fd: "token <hex>\nidentity <id>\n", then closes
// fd. Returns 0 or an error.
static int s_read_secret(int fd, char *token, size_t token_cap, char *identity, size_t id_cap,
                         char *err, size_t err_len) {
    char buf[512];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0 || n + (size_t)r >= sizeof buf - 1) {
            n += r > 0 ? (size_t)r : 0;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    char *t = strstr(buf, "token "), *i = strstr(buf, "identity ");
    size_t tl = t ? strcspn(t + 6, "\n") : 0, il = i ? strcspn(i + 9, "\n") : 0;
    int bad = !t || !i || tl == 0 || il == 0 || tl >= token_cap || il >= id_cap;
    if (!bad) {
        memcpy(token, t + 6, tl);
        token[tl] = '\0';
        memcpy(identity, i + 9, il);
        identity[il] = '\0';
    }
    memset(buf, 0, sizeof buf);
    return bad ? rl_errf(err, err_len, RL_EINVAL,
                         "no secret on fd %d (the controller writes \"token ...\" and "
                         "\"identity ...\" there)", fd)
               : 0;
}

int rl_worker_main(const rl_worker_opts_t *o) {
    // die with the controller; the terminal's Ctrl-C is the controller's to handle
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (o->parent > 0 && getppid() != o->parent) {
        return 1; // the controller is already gone
    }
    signal(SIGINT, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    s_worker_t w;
    memset(&w, 0, sizeof(w));
    w.o = o;
    char err[2048], id[64], token[128], identity[256];
    snprintf(id, sizeof(id), "%s/%d", o->role, o->rank);
    int rc = s_read_secret(o->secret_fd, token, sizeof token, identity, sizeof identity, err,
                           sizeof err);
    if (!rc) {
        rc = rl_chan_connect(o->endpoint, identity, o->max_frame, &w.chan, err, sizeof(err));
    }
    if (rc) {
        rl_log_error("%s: %s", id, err);
        return 1;
    }
    rl_heartbeat_t *hb = NULL;
    rc = rl_chan_heartbeat_start(o->endpoint, identity, token,
                                 o->heartbeat > 0 ? o->heartbeat : 1.0, &hb, err, sizeof(err));
    // load before saying hello: the controller counts a worker ready when it says hello
    if (!rc) {
        rc = s_setup(&w, err, sizeof(err));
    }
    rl_msg_t *m = rl_msg_new("hello", 0);
    const char *const *caps = strcmp(o->role, "actor") == 0     ? s_caps_actor
                              : strcmp(o->role, "sampler") == 0 ? s_caps_sampler
                                                                : s_caps_reward;
    int ncaps = strcmp(o->role, "actor") == 0     ? 7
                : strcmp(o->role, "sampler") == 0 ? 3
                                                  : 2;
    if (!m || rl_msg_set_str(m, "role", o->role) || rl_msg_set_int(m, "rank", o->rank) ||
        rl_msg_set_int(m, "pid", (int64_t)getpid()) || rl_msg_set_str(m, "token", token) ||
        rl_msg_set_strs(m, "caps", caps, NULL, ncaps) ||
        (rc && rl_msg_set_str(m, "error", err))) {
        rl_msg_free(&m);
        rl_log_error("%s: out of memory", id);
        rc = RL_ENOMEM;
    }
    memset(token, 0, sizeof token);
    if (m) {
        s_send(&w, &m);
    }
    if (rc) {
        rl_log_error("%s: %s", id, err);
    }
    uint64_t dropped = 0;
    while (!rc && !w.done) {
        rl_msg_t *req = NULL;
        int r = rl_chan_recv(w.chan, 1000, &req, NULL, 0, err, sizeof(err));
        if (r == RL_ETIMEOUT) {
            if (o->parent > 0 && getppid() != o->parent) {
                break; // orphaned
            }
            continue;
        }
        if (r) {
            rl_log_warn("%s: %s", id, err); // a malformed message: dropped, keep serving
            continue;
        }
        // only the controller that started us gives orders (someone who took over the socket's
        // path would be another process)
        int64_t pid = -1, uid = -1;
        int cred = rl_chan_peer_cred(w.chan, &pid, &uid) == 0;
        if (!cred || uid != (int64_t)geteuid() || (o->parent > 0 && pid != o->parent)) {
            if (++dropped <= 10 || dropped % 1000 == 0) {
                rl_log_warn("%s: dropped '%s' from pid %lld (uid %lld): not the controller "
                            "(pid %d) (%llu dropped so far)", id, rl_msg_op(req),
                            (long long)pid, (long long)uid, o->parent,
                            (unsigned long long)dropped);
            }
            rl_msg_free(&req);
            continue;
        }
        if (strcmp(rl_msg_op(req), "welcome") != 0) {
            s_handle(&w, req);
        }
        rl_msg_free(&req);
    }
    rl_chan_heartbeat_stop(&hb);
    rl_chan_close(&w.chan, 2000);
    s_teardown(&w);
    return rc ? 1 : 0;
}

// rl_role_sampler — the sampler role: a model (the recipe's, with the actor's trainable layout)
// and rl_sampler, serving load_weights (a versioned copy of the actor's trainable weights) and
// generate (n completions of each prompt with the weights version the request names; a sampler
// asked for a version it does not hold refuses). The arithmetic is rl_sampler's.
#include "rl_role.h"

#include "rl_err.h"
#include "rl_fault.h"
#include "rl_model.h"
#include "rl_policy.h"
#include "rl_sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rl_model_t *model;
    rl_sampler_t *sampler;
    int64_t version; // weights version held (-1: none yet, or a bucketed load in progress)
    int64_t loading, received; // a bucketed load: its version, the floats received so far
    int max_batch;             // sampling.max_batch: the KV cache's slots
} s_sampler_t;

static void s_teardown(void **state) {
    s_sampler_t *s = *state;
    if (s) {
        rl_sampler_destroy(&s->sampler);
        rl_model_destroy(&s->model);
        free(s);
    }
    *state = NULL;
}

static int s_setup(const rl_recipe_t *recipe, const rl_role_env_t *env, void **state,
                   char *err, size_t err_len) {
    s_sampler_t *s = calloc(1, sizeof *s);
    if (!s) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *state = s;
    rl_model_opts_t mo;
    rl_policy_model_opts(recipe, env->threads, &mo);
    mo.lora_dropout = 0.0f;
    mo.device_infer = 1; // a GPU holds no gradients or moments for it
    mo.device_rows = 0;  // its steps' rows: the default (rlctl plan counts the same)
    int rc = rl_policy_role_device(recipe, "samplers", env->rank, &mo.device, err, err_len);
    if (rc) {
        s_teardown(state);
        return rc;
    }
    char msg[2048];
    s->model = rl_model_load(recipe->model.path, &mo, msg, sizeof(msg));
    if (!s->model) {
        s_teardown(state);
        return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
    }
    // a sampler on a GPU computes there only: its host copy of the weights given back (each
    // weight sync goes straight to the device; a LoRA adapter's few arrays stay)
    if (mo.device.cuda && rl_model_drop_host_weights(s->model) != 0) {
        rl_errf(err, err_len, RL_EINVAL, "%s", rl_model_errmsg(s->model));
        s_teardown(state);
        return RL_EINVAL;
    }
    s->sampler = rl_sampler_new(s->model);
    s->version = -1;
    s->max_batch = recipe->sampling.max_batch;
    if (!s->sampler) {
        s_teardown(state);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    return 0;
}

// load_weights with `ipc`: the actor's device array copied over this sampler's on the device
// (CUDA IPC), whole: the version is held when it returns. The host's copy of the trainable
// weights is not updated (a GPU sampler does not read it; a later bucketed load replaces all
// of it). On a failure no version is held.
static int s_load_ipc(s_sampler_t *s, const rl_proto_load_weights_t *q, const rl_msg_t *req,
                      rl_msg_t **reply, char *err, size_t err_len) {
    if (q->n != 0 || q->n_ipc != RL_MODEL_IPC_HANDLE || q->n_ipc_array != 2) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "load_weights: an IPC handle of %lld bytes (not %d), weights beside it, or "
                       "no ipc_array",
                       (long long)q->n_ipc, RL_MODEL_IPC_HANDLE);
    }
    s->version = -1;
    s->loading = q->version;
    s->received = 0;
    rl_sampler_sessions_clear(s->sampler); // kept caches are of the old weights
    if (rl_fault("load_weights_ipc")) {    // docs/reliability.md; tests only
        return rl_errf(err, err_len, RL_EIO,
                       "load_weights: CUDA IPC failed (RLCTL_FAULT=load_weights_ipc)");
    }
    int rc = rl_model_device_ipc_load(s->model, q->ipc, (uint64_t)q->ipc_array[0], q->ipc_array[1]);
    if (rc) {
        return rl_errf(err, err_len, rc, "load_weights: %s", rl_model_errmsg(s->model));
    }
    s->version = q->version;
    rl_proto_load_weights_reply_t r = {s->version};
    return rl_proto_load_weights_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
}

static int s_load(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                  size_t err_len) {
    s_sampler_t *s = state;
    rl_proto_load_weights_t q;
    int rc = rl_proto_load_weights_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (rl_fault("load_weights")) { // docs/reliability.md; tests only
        return rl_errf(err, err_len, RL_EIO, "load_weights: failed (RLCTL_FAULT=load_weights)");
    }
    if (q.ipc) {
        return s_load_ipc(s, &q, req, reply, err, err_len);
    }
    // on a GPU each bucket goes straight to the device (the host's copy was given back)
    const int dev = rl_model_on_gpu(s->model);
    size_t n = rl_model_trainable_size(s->model);
    float *dst = dev ? NULL : rl_model_trainable(s->model, &n);
    int64_t total = q.total > 0 ? q.total : q.n;
    if ((!dev && !dst) || n == 0 || (int64_t)n != total || q.offset < 0 || q.offset > total - q.n) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "load_weights: %lld floats at %lld of %lld for a sampler that holds %zu",
                       (long long)q.n, (long long)q.offset, (long long)total, n);
    }
    // buckets arrive in order (a sampler serves requests in order); until the last one the
    // weights are a mix, so no version is held and generate is refused
    if (q.offset == 0) {
        s->loading = q.version;
        s->received = 0;
        rl_sampler_sessions_clear(s->sampler); // kept caches are of the old weights
    } else if (q.version != s->loading || q.offset != s->received) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "load_weights: bucket at %lld of version %lld, expected %lld of %lld",
                       (long long)q.offset, (long long)q.version, (long long)s->received,
                       (long long)s->loading);
    }
    s->version = -1;
    const int last = s->received + q.n == total;
    if (!dev) {
        memcpy(dst + q.offset, q.weights, (size_t)q.n * sizeof(float));
    } else if ((rc = rl_model_device_load(s->model, (size_t)q.offset, q.weights, (size_t)q.n,
                                          last)) != 0) {
        return rl_errf(err, err_len, rc, "load_weights: %s", rl_model_errmsg(s->model));
    }
    s->received += q.n;
    if (last) {
        s->version = q.version;
    }
    rl_proto_load_weights_reply_t r = {s->version};
    return rl_proto_load_weights_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
}

static int s_generate(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                      size_t err_len) {
    s_sampler_t *s = state;
    rl_proto_generate_t q;
    int rc = rl_proto_generate_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (q.version != s->version) {
        return rl_errf(err, err_len, RL_EVERSION,
                       "generate: asked for weights version %lld, this sampler holds %lld",
                       (long long)q.version, (long long)s->version);
    }
    int P = (int)q.P;
    rl_sampler_prompt_t *pr = malloc(((size_t)P + 1) * sizeof(*pr));
    if (!pr) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int64_t off = 0;
    for (int i = 0; i < P; i++) { // rl_proto checked that the lengths fit
        pr[i].ids = q.prompts + off;
        pr[i].len = q.prompt_lens[i];
        pr[i].index = (uint64_t)q.prompt_index[i];
        off += q.prompt_lens[i];
    }
    rl_sampler_params_t sp;
    rl_sampler_params_default(&sp);
    sp.sample.temperature = (float)q.temperature;
    sp.sample.top_p = (float)q.top_p;
    sp.sample.top_k = (int)q.top_k;
    sp.n = (int)q.n;
    sp.max_new_tokens = (int)q.max_new_tokens;
    sp.seed = (uint64_t)q.seed;
    sp.stop_ids = q.stop_ids;
    sp.n_stop = (int)q.n_stop;
    sp.max_batch = s->max_batch;
    // session keys: the same bits (a signed and an unsigned type may alias each other)
    sp.sessions = (const uint64_t *)q.sessions;
    rl_sampler_result_t *res = NULL;
    rc = rl_sampler_generate(s->sampler, pr, P, &sp, &res);
    free(pr);
    if (rc) {
        return rl_errf(err, err_len, rc, "generate: %s", rl_sampler_errmsg(s->sampler));
    }
    size_t nres = (size_t)P * (size_t)q.n; // rl_proto bounds both
    int64_t total = 0;
    for (size_t i = 0; i < nres; i++) {
        total += res[i].n_ids;
    }
    int32_t *lens = malloc((nres ? nres : 1) * sizeof(int32_t));
    int32_t *ids = malloc((size_t)(total ? total : 1) * sizeof(int32_t));
    float *lp = malloc((size_t)(total ? total : 1) * sizeof(float));
    uint8_t *fin = malloc(nres ? nres : 1);
    if (lens && ids && lp && fin) {
        int64_t o = 0;
        for (size_t i = 0; i < nres; i++) {
            lens[i] = res[i].n_ids;
            fin[i] = (uint8_t)res[i].finish;
            memcpy(ids + o, res[i].ids, (size_t)res[i].n_ids * sizeof(int32_t));
            memcpy(lp + o, res[i].logprobs, (size_t)res[i].n_ids * sizeof(float));
            o += res[i].n_ids;
        }
        // fault injection for the controller's reply checks (docs/reliability.md; tests only)
        if (total > 0 && rl_fault("generate_bad_id")) {
            ids[total - 1] = rl_model_config(s->model)->vocab_size + 7;
        }
        if (total > 0 && rl_fault("generate_bad_logprob")) {
            lp[0] = NAN;
        }
        if (nres > 0 && rl_fault("generate_bad_finish")) {
            fin[0] = 9;
        }
        rl_sampler_stats_t stats;
        rl_sampler_stats(s->sampler, &stats);
        rl_proto_generate_reply_t r = {.lens = lens,
                                       .n_res = (int64_t)nres,
                                       .ids = ids,
                                       .logprobs = lp,
                                       .n_ids = total,
                                       .finish = fin,
                                       .prefill_tokens = stats.prefill_tokens,
                                       .decode_tokens = stats.decode_tokens};
        rc = rl_proto_generate_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
    } else {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_sampler_results_free(&res, (int)nres);
    free(lens);
    free(ids);
    free(lp);
    free(fin);
    return rc;
}

static const rl_role_verb_t s_verbs[] = {
    {RL_PROTO_LOAD_WEIGHTS, s_load},
    {RL_PROTO_GENERATE, s_generate},
};

static const rl_role_t s_role = {"sampler", s_setup, s_teardown, s_verbs,
                                 (int)(sizeof s_verbs / sizeof s_verbs[0]), 0};

const rl_role_t *rl_role_sampler(void) { return &s_role; }

rl_model_t *rl_role_sampler_model(void *state) {
    s_sampler_t *s = state;
    return s ? s->model : NULL;
}

// rl_role_reference — the reference role of its own (roles.reference: worker): the frozen base
// model (no adapter, no gradients, no optimizer) in a process of its own, serving logprobs. The
// actor then keeps no frozen copy (full tuning) and does not switch its adapters off (LoRA);
// the logprobs are the same numbers either way. With roles.reference: mesh it is the ranks of a
// mesh of its own: each rank keeps its shard of every layer (rl_fsdp) and gathers a layer while
// it computes it; a rank given no rows runs the layers' collectives idle, as its peers need. On
// GPUs each rank holds the whole model on its device (rl_policy_role_device by rank).
#include "rl_role.h"

#include "rl_err.h"
#include "rl_fsdp.h"
#include "rl_model.h"
#include "rl_policy.h"

#include <stdlib.h>

typedef struct {
    rl_model_t *model;
    rl_fsdp_t *fsdp; // a rank of a mesh: this rank's shards (NULL: the whole model)
    int at_once;     // rows per forward (0: all): on a GPU a micro-batch, as its plan says
} s_reference_t;

static void s_teardown(void **state) {
    s_reference_t *s = *state;
    if (s) {
        rl_fsdp_destroy(&s->fsdp);
        rl_model_destroy(&s->model);
        free(s);
    }
    *state = NULL;
}

static int s_setup(const rl_recipe_t *recipe, const rl_role_env_t *env, void **state,
                   char *err, size_t err_len) {
    s_reference_t *s = calloc(1, sizeof *s);
    if (!s) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *state = s;
    rl_model_opts_t mo;
    rl_policy_model_opts(recipe, env->threads, &mo);
    mo.device_infer = 1; // a GPU holds no gradients or moments for it
    mo.tune = RL_TUNE_NONE;
    int drc = rl_policy_role_device(recipe, "reference", env->rank, &mo.device, err, err_len);
    if (drc) {
        s_teardown(state);
        return drc;
    }
    rl_coll_t *mesh = env->mesh;
    mo.sharded = mesh != NULL && !mo.device.cuda; // on GPUs each rank holds the whole model
    char msg[2048];
    s->model = rl_model_load(recipe->model.path, &mo, msg, sizeof msg);
    if (!s->model) {
        s_teardown(state);
        return rl_errf(err, err_len, RL_EINVAL, "reference: %s", msg);
    }
    // on a GPU the frozen reference only computes there: its host copy given back
    if (mo.device.cuda && rl_model_drop_host_weights(s->model) != 0) {
        rl_errf(err, err_len, RL_EINVAL, "reference: %s", rl_model_errmsg(s->model));
        s_teardown(state);
        return RL_EINVAL;
    }
    s->at_once = rl_model_on_gpu(s->model) ? recipe->train.micro_batch_size : 0;
    int rc = mo.sharded ? rl_fsdp_new(s->model, mesh, NULL, 0, &s->fsdp, msg, sizeof msg) : 0;
    if (rc) {
        s_teardown(state);
        return rl_errf(err, err_len, rc, "reference: %s", msg);
    }
    return 0;
}

static int s_logprobs(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                      size_t err_len) {
    s_reference_t *s = state;
    rl_proto_logprobs_t q;
    int rc = rl_proto_logprobs_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (q.B == 0) { // no rows for this rank: sharded, its peers still gather every layer
        rc = s->fsdp ? rl_model_units_idle(s->model, 0) : 0;
        if (rc) {
            return rl_errf(err, err_len, rc, "logprobs: %s", rl_model_errmsg(s->model));
        }
        float none = 0.0f;
        rl_proto_logprobs_reply_t r = {&none, 0, q.T};
        return rl_proto_logprobs_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
    }
    float *logp = malloc((size_t)q.B * (size_t)q.T * sizeof(float));
    int *len = malloc((size_t)q.B * sizeof(int));
    if (!logp || !len) {
        free(logp);
        free(len);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int64_t i = 0; i < q.B; i++) {
        len[i] = q.lengths[i];
    }
    const int B = (int)q.B, T = (int)q.T, k = s->at_once > 0 && s->at_once < B ? s->at_once : B;
    for (int b0 = 0; !rc && b0 < B; b0 += k) {
        rc =
            rl_model_forward(s->model, q.tokens + (size_t)b0 * T, len + b0, B - b0 < k ? B - b0 : k,
                             T, (float)q.temperature, 0, logp + (size_t)b0 * T, NULL);
    }
    if (rc) {
        rc = rl_errf(err, err_len, rc, "logprobs: %s", rl_model_errmsg(s->model));
    } else {
        rl_proto_logprobs_reply_t r = {logp, q.B, q.T};
        rc = rl_proto_logprobs_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
    }
    free(logp);
    free(len);
    return rc;
}

static const rl_role_verb_t s_verbs[] = {{RL_PROTO_LOGPROBS, s_logprobs}};

static const rl_role_t s_role = {"reference", s_setup, s_teardown, s_verbs,
                                 (int)(sizeof s_verbs / sizeof s_verbs[0]), 0};

const rl_role_t *rl_role_reference(void) { return &s_role; }

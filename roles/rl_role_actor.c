// rl_role_actor — the actor role: the trainable policy (rl_policy) and its verbs: logprobs (of
// the policy, or of the reference = the policy with adapters disabled), train (one update over a
// batch), export_weights, and checkpoint save / load / save_final. With PPO and roles.critic:
// actor it also holds the critic (a second model in this process) and serves its verbs: values,
// train with a critic's loss, and save / load / save_final with part "critic" (the handlers of
// rl_role_critic.c). With algorithm rm its policy is a reward model (a score head): values with
// scores. A train request's loss is looked up in the registry (rl_loss.h): the loss's adapter
// trains the model it names; this file decodes requests and encodes replies.
#include "rl_role.h"

#include "rl_err.h"
#include "rl_fault.h"
#include "rl_loss.h"
#include "rl_model.h"
#include "rl_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const rl_recipe_t *recipe; // borrowed from the worker
    rl_policy_t *policy;
    rl_policy_t *critic;       // PPO with roles.critic: actor, else NULL
    rl_coll_t *mesh;           // the worker's mesh (borrowed), or NULL: not a rank of one
} s_actor_t;

static int s_setup(const rl_recipe_t *recipe, const rl_role_env_t *env, void **state,
                   char *err, size_t err_len) {
    s_actor_t *a = calloc(1, sizeof *a);
    if (!a) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    a->recipe = recipe;
    a->mesh = env->mesh;
    // a rank of a mesh shards its models over the mesh (the critic it holds too)
    rl_coll_t *mesh = env->mesh;
    int rm = (recipe->algorithm.def->uses & RL_RECIPE_USES_SCORE_HEAD) != 0;
    int rc = mesh ? rl_policy_new_sharded(recipe, env->threads, rm ? RL_POLICY_RM : RL_POLICY_ACTOR,
                                          mesh, &a->policy, err, err_len)
             : rm ? rl_policy_new_rm(recipe, env->threads, &a->policy, err, err_len)
                  : rl_policy_new(recipe, env->threads, &a->policy, err, err_len);
    if (!rc && (recipe->algorithm.def->uses & RL_RECIPE_USES_CRITIC) &&
        recipe->roles.critic == RL_RECIPE_REF_ACTOR) {
        rc = mesh ? rl_policy_new_sharded(recipe, env->threads, RL_POLICY_CRITIC, mesh, &a->critic,
                                          err, err_len)
                  : rl_policy_new_critic(recipe, env->threads, &a->critic, err, err_len);
    }
    if (rc) {
        rl_policy_destroy(&a->policy);
        free(a);
        return rc;
    }
    *state = a;
    return 0;
}

static void s_teardown(void **state) {
    s_actor_t *a = *state;
    if (a) {
        rl_policy_destroy(&a->policy);
        rl_policy_destroy(&a->critic);
        free(a);
    }
    *state = NULL;
}

// The trainable weights for a reply: every rank of a mesh takes part in gathering them (full
// tuning), rank 0 alone sends them (the others' replies carry none). *n_p = 0 with NULL.
static const float *s_weights(s_actor_t *a, size_t *n_p) {
    const float *w = rl_policy_weights(a->policy, n_p);
    rl_coll_t *mesh = a->mesh;
    if (mesh && rl_coll_rank(mesh) != 0) {
        *n_p = 0;
        return NULL;
    }
    return w;
}

// int copies of lengths (rl_policy takes int *). caller owns result; free with free().
static int *s_lengths(const int32_t *len, int64_t B) {
    int *out = malloc((size_t)(B > 0 ? B : 1) * sizeof(int));
    for (int64_t i = 0; out && i < B; i++) {
        out[i] = len[i];
    }
    return out;
}

static int s_logprobs(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                      size_t err_len) {
    s_actor_t *a = state;
    rl_proto_logprobs_t q;
    int rc = rl_proto_logprobs_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    float *logp = malloc((size_t)q.B * (size_t)q.T * sizeof(float));
    int *len = s_lengths(q.lengths, q.B);
    if (!logp || !len) {
        free(logp);
        free(len);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rc = rl_policy_logprobs(a->policy, q.tokens, len, (int)q.B, (int)q.T, (float)q.temperature,
                            q.adapter, logp, err, err_len);
    if (!rc) {
        rl_proto_logprobs_reply_t r = {logp, q.B, q.T};
        rc = rl_proto_logprobs_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
    }
    free(logp);
    free(len);
    return rc;
}

static int s_train(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                   size_t err_len) {
    s_actor_t *a = state;
    rl_proto_train_t q;
    int rc = rl_proto_train_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    rl_coll_t *mesh = a->mesh;
    char point[32];
    snprintf(point, sizeof point, "train_rank%d", mesh ? rl_coll_rank(mesh) : 0);
    if (mesh && rl_fault(point)) { // one rank fails while its peers wait in a collective
        return rl_errf(err, err_len, RL_EIO, "train: injected fault %s", point);
    }
    const rl_loss_t *L = rl_loss_find(q.loss); // the decoder refused any other name
    if (L->model == RL_LOSS_CRITIC) {
        if (!a->critic) {
            return rl_errf(err, err_len, RL_EINVAL, "train: this actor holds no critic");
        }
        return rl_role_critic_train(a->critic, a->recipe, &q, rl_msg_id(req), reply, err,
                                    err_len);
    }
    int *len = s_lengths(q.lengths, q.B);
    float *old = malloc((size_t)q.B * (size_t)q.T * sizeof(float) + 1);
    if (!len || !old) {
        free(len);
        free(old);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_loss_batch_t b;
    rl_role_loss_batch(&q, len, &b);
    rl_loss_out_t out = {.old_logp = old};
    rc = L->train(L, a->policy, a->recipe, &b, &out, err, err_len);
    free(len);
    if (!rc) {
        // the updated trainable weights ride along: the controller syncs the samplers from them
        // without another round trip (export_weights)
        rl_proto_train_reply_t t = {.old_logp = old, .B = q.B, .T = q.T,
                                    .iterations = out.iterations};
        rl_proto_train_reply_set_stats(&t, &out.stats);
        size_t nw = 0;
        t.weights = q.want_weights ? s_weights(a, &nw) : NULL;
        t.n = (int64_t)nw;
        rc = rl_proto_train_reply_encode(&t, rl_msg_id(req), reply, err, err_len);
    }
    free(old);
    return rc;
}

static int s_export(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                    size_t err_len) {
    s_actor_t *a = state;
    size_t n;
    const float *w = s_weights(a, &n);
    if (!w && !a->mesh) {
        return rl_errf(err, err_len, RL_ENOMEM, "export_weights: out of memory");
    }
    rl_proto_export_weights_reply_t r = {rl_policy_is_lora(a->policy) ? "lora" : "full", w,
                                         (int64_t)n};
    return rl_proto_export_weights_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
}

// The handle of the device array of the trainable parameters (CUDA IPC), for samplers on GPUs
// of this machine: current when it replies (the updates queued are waited for).
static int s_publish(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                     size_t err_len) {
    s_actor_t *a = state;
    rl_model_t *m = rl_policy_model(a->policy);
    if (rl_fault("publish_weights")) { // docs/reliability.md; tests only
        return rl_errf(err, err_len, RL_EIO,
                       "publish_weights: failed (RLCTL_FAULT=publish_weights)");
    }
    unsigned char h[RL_MODEL_IPC_HANDLE];
    uint64_t layout = 0;
    int64_t n = 0;
    int rc = rl_model_device_ipc_export(m, h, &layout, &n);
    if (rc) {
        return rl_errf(err, err_len, rc, "publish_weights: %s", rl_model_errmsg(m));
    }
    rl_proto_publish_weights_reply_t r = {h, RL_MODEL_IPC_HANDLE, (int64_t)layout, n};
    return rl_proto_publish_weights_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
}

static int s_save_reply(s_actor_t *a, const rl_msg_t *req, rl_msg_t **reply, char *err,
                        size_t err_len) {
    size_t n = rl_policy_n_weights(a->policy);
    rl_proto_save_reply_t r = {(int64_t)rl_model_train_step(rl_policy_model(a->policy)),
                               (int64_t)n};
    return rl_proto_save_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
}

// 1 when the request names the critic (part "critic"); an actor without one refuses it
static int s_part_critic(const s_actor_t *a, const char *part, char *err, size_t err_len,
                         int *rc) {
    *rc = 0;
    if (!part || strcmp(part, "critic") != 0) {
        return 0;
    }
    if (!a->critic) {
        *rc = rl_errf(err, err_len, RL_EINVAL, "this actor holds no critic");
    }
    return 1;
}

static int s_values(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                    size_t err_len) {
    s_actor_t *a = state;
    if (rl_policy_has_head(a->policy)) { // a reward model: its scores (or values)
        return rl_role_critic_values(a->policy, req, reply, err, err_len);
    }
    if (!a->critic) {
        return rl_errf(err, err_len, RL_EINVAL, "values: this actor holds no critic");
    }
    return rl_role_critic_values(a->critic, req, reply, err, err_len);
}

static int s_save(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                  size_t err_len) {
    s_actor_t *a = state;
    rl_proto_save_t q;
    int rc = rl_proto_save_decode(req, &q, err, err_len);
    if (!rc && s_part_critic(a, q.part, err, err_len, &rc)) {
        return rc ? rc : rl_role_critic_save(a->critic, a->recipe, req, reply, err, err_len);
    }
    if (!rc) {
        rc = rl_policy_save(a->policy, q.dir, a->recipe->model.path, err, err_len);
    }
    return rc ? rc : s_save_reply(a, req, reply, err, err_len);
}

static int s_load(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                  size_t err_len) {
    s_actor_t *a = state;
    rl_proto_save_t q;
    int rc = rl_proto_load_decode(req, &q, err, err_len);
    if (!rc && s_part_critic(a, q.part, err, err_len, &rc)) {
        return rc ? rc : rl_role_critic_load(a->critic, req, reply, err, err_len);
    }
    if (!rc) {
        rc = rl_policy_load(a->policy, q.dir, (uint64_t)q.model_train_step, err, err_len);
    }
    return rc ? rc : s_save_reply(a, req, reply, err, err_len);
}

static int s_save_final(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                        size_t err_len) {
    s_actor_t *a = state;
    rl_proto_save_final_t q;
    int rc = rl_proto_save_final_decode(req, &q, err, err_len);
    if (!rc && s_part_critic(a, q.part, err, err_len, &rc)) {
        return rc ? rc
                  : rl_role_critic_save_final(a->critic, a->recipe, req, reply, err, err_len);
    }
    if (!rc) {
        rc = rl_policy_save_final(a->policy, q.dir, a->recipe->model.path, q.bf16,
                                  (int)q.pad_token_id, err, err_len);
    }
    if (!rc && rl_proto_ok(rl_msg_id(req), reply) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    return rc;
}

static const rl_role_verb_t s_verbs[] = {
    {RL_PROTO_LOGPROBS, s_logprobs},
    {RL_PROTO_TRAIN, s_train},
    {RL_PROTO_EXPORT_WEIGHTS, s_export},
    {RL_PROTO_PUBLISH_WEIGHTS, s_publish},
    {RL_PROTO_SAVE, s_save},
    {RL_PROTO_LOAD, s_load},
    {RL_PROTO_SAVE_FINAL, s_save_final},
    {RL_PROTO_VALUES, s_values},
};

static const rl_role_t s_role = {"actor", s_setup, s_teardown, s_verbs,
                                 (int)(sizeof s_verbs / sizeof s_verbs[0]), 0};

const rl_role_t *rl_role_actor(void) { return &s_role; }

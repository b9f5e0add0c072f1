// rl_role_critic — PPO's critic (roles.critic: worker): the policy's architecture with a value
// head (rl_policy_new_critic), its own optimizer, serving values, train (the clipped value loss),
// and checkpoint save / load / save_final. The handlers work on a critic policy, so the actor
// serves the same verbs with the critic it holds when roles.critic is actor (rl_role_actor.c).
#include "rl_role.h"

#include "rl_err.h"
#include "rl_model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const rl_recipe_t *recipe; // borrowed from the worker
    rl_policy_t *critic;
} s_critic_t;

// int copies of lengths (rl_policy takes int *). caller owns result; free with free().
static int *s_lengths(const int32_t *len, int64_t B) {
    int *out = malloc((size_t)(B > 0 ? B : 1) * sizeof(int));
    for (int64_t i = 0; out && i < B; i++) {
        out[i] = len[i];
    }
    return out;
}

// ---- the handlers on a critic ------------------------------------------------------------------

int rl_role_critic_values(rl_policy_t *critic, const rl_msg_t *req, rl_msg_t **reply, char *err,
                          size_t err_len) {
    rl_proto_values_t q;
    int rc = rl_proto_values_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    int64_t cols = q.scores ? 1 : q.T; // scores: one per row
    float *v = malloc((size_t)q.B * (size_t)q.T * sizeof(float));
    int *len = s_lengths(q.lengths, q.B);
    if (!v || !len) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    } else if (q.scores) {
        rc = rl_policy_scores(critic, q.tokens, len, (int)q.B, (int)q.T, v, err, err_len);
    } else {
        rc = rl_policy_values(critic, q.tokens, len, (int)q.B, (int)q.T, v, err, err_len);
    }
    if (!rc) {
        rl_proto_values_reply_t r = {v, q.B, cols};
        rc = rl_proto_values_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
    }
    free(v);
    free(len);
    return rc;
}

int rl_role_critic_train(rl_policy_t *critic, const rl_recipe_t *r, const rl_proto_train_t *q,
                         uint64_t id, rl_msg_t **reply, char *err, size_t err_len) {
    const rl_loss_t *L = rl_loss_find(q->loss);
    if (!L || L->model != RL_LOSS_CRITIC) {
        return rl_errf(err, err_len, RL_EINVAL, "train: the critic trains a critic's loss, not %s",
                       q->loss);
    }
    int *len = s_lengths(q->lengths, q->B);
    float *old = calloc((size_t)q->B * (size_t)q->T + 1, sizeof(float));
    if (!len || !old) {
        free(len);
        free(old);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_loss_batch_t b;
    rl_role_loss_batch(q, len, &b);
    rl_loss_out_t out = {.old_logp = old}; // a policy's field: a critic's loss answers zeros
    int rc = L->train(L, critic, r, &b, &out, err, err_len);
    if (!rc) {
        rl_proto_train_reply_t t = {.old_logp = old, .B = q->B, .T = q->T,
                                    .iterations = out.iterations};
        rl_proto_train_reply_set_stats(&t, &out.stats);
        rc = rl_proto_train_reply_encode(&t, id, reply, err, err_len);
    }
    free(len);
    free(old);
    return rc;
}

static int s_save_reply(rl_policy_t *critic, const rl_msg_t *req, rl_msg_t **reply, char *err,
                        size_t err_len) {
    size_t n = 0;
    rl_policy_weights(critic, &n);
    rl_proto_save_reply_t r = {(int64_t)rl_model_train_step(rl_policy_model(critic)), (int64_t)n};
    return rl_proto_save_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
}

// the base an adapter of the critic names (base_model_name_or_path): its init folder
static const char *s_base(const rl_recipe_t *r) {
    return r->critic.init && strcmp(r->critic.init, "base") != 0 ? r->critic.init
                                                                  : r->model.path;
}

// the critic's folder of a checkpoint or of final/ (created here: one level)
static int s_mkdir(const char *dir, char *err, size_t err_len) {
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        return rl_errf(err, err_len, errno, "%s: cannot create: %s", dir, strerror(errno));
    }
    return 0;
}

int rl_role_critic_save(rl_policy_t *critic, const rl_recipe_t *r, const rl_msg_t *req,
                        rl_msg_t **reply, char *err, size_t err_len) {
    rl_proto_save_t q;
    int rc = rl_proto_save_decode(req, &q, err, err_len);
    if (!rc) {
        rc = s_mkdir(q.dir, err, err_len);
    }
    if (!rc) {
        rc = rl_policy_save(critic, q.dir, s_base(r), err, err_len);
    }
    return rc ? rc : s_save_reply(critic, req, reply, err, err_len);
}

int rl_role_critic_load(rl_policy_t *critic, const rl_msg_t *req, rl_msg_t **reply, char *err,
                        size_t err_len) {
    rl_proto_save_t q;
    int rc = rl_proto_load_decode(req, &q, err, err_len);
    if (!rc) {
        rc = rl_policy_load(critic, q.dir, (uint64_t)q.model_train_step, err, err_len);
    }
    return rc ? rc : s_save_reply(critic, req, reply, err, err_len);
}

int rl_role_critic_save_final(rl_policy_t *critic, const rl_recipe_t *r, const rl_msg_t *req,
                              rl_msg_t **reply, char *err, size_t err_len) {
    rl_proto_save_final_t q;
    int rc = rl_proto_save_final_decode(req, &q, err, err_len);
    if (!rc) {
        rc = s_mkdir(q.dir, err, err_len);
    }
    if (!rc) {
        rc = rl_policy_save_final(critic, q.dir, s_base(r), q.bf16, (int)q.pad_token_id, err,
                                  err_len);
    }
    if (!rc && rl_proto_ok(rl_msg_id(req), reply) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    return rc;
}

// ---- the role ----------------------------------------------------------------------------------

static int s_setup(const rl_recipe_t *recipe, const rl_role_env_t *env, void **state,
                   char *err, size_t err_len) {
    s_critic_t *c = calloc(1, sizeof *c);
    if (!c) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c->recipe = recipe;
    // a rank of the critic's own mesh (roles.critic: mesh) shards it over that mesh
    rl_coll_t *mesh = env->mesh;
    int rc = mesh ? rl_policy_new_sharded(recipe, env->threads, RL_POLICY_CRITIC, mesh, &c->critic,
                                          err, err_len)
                  : rl_policy_new_critic(recipe, env->threads, &c->critic, err, err_len);
    if (rc) {
        free(c);
        return rc;
    }
    *state = c;
    return 0;
}

static void s_teardown(void **state) {
    s_critic_t *c = *state;
    if (c) {
        rl_policy_destroy(&c->critic);
        free(c);
    }
    *state = NULL;
}

static int s_values(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err, size_t err_len) {
    return rl_role_critic_values(((s_critic_t *)state)->critic, req, reply, err, err_len);
}

static int s_train(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err, size_t err_len) {
    s_critic_t *c = state;
    rl_proto_train_t q;
    int rc = rl_proto_train_decode(req, &q, err, err_len);
    return rc ? rc
              : rl_role_critic_train(c->critic, c->recipe, &q, rl_msg_id(req), reply, err, err_len);
}

static int s_save(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err, size_t err_len) {
    s_critic_t *c = state;
    return rl_role_critic_save(c->critic, c->recipe, req, reply, err, err_len);
}

static int s_load(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err, size_t err_len) {
    return rl_role_critic_load(((s_critic_t *)state)->critic, req, reply, err, err_len);
}

static int s_save_final(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                        size_t err_len) {
    s_critic_t *c = state;
    return rl_role_critic_save_final(c->critic, c->recipe, req, reply, err, err_len);
}

static const rl_role_verb_t s_verbs[] = {
    {RL_PROTO_VALUES, s_values}, {RL_PROTO_TRAIN, s_train},           {RL_PROTO_SAVE, s_save},
    {RL_PROTO_LOAD, s_load},     {RL_PROTO_SAVE_FINAL, s_save_final},
};

static const rl_role_t s_role = {"critic", s_setup, s_teardown, s_verbs,
                                 (int)(sizeof s_verbs / sizeof s_verbs[0]), 0};

const rl_role_t *rl_role_critic(void) {
    return &s_role;
}

// rl_role — what a worker process serves: a role is a name, a setup from the recipe, and a table
// of verbs (op -> handler). The worker loop (rl_worker) connects, says hello with the verbs of
// the table as its capabilities, and dispatches each request to its handler; `shutdown` is the
// loop's own. One file per role: rl_role_actor.c (the trainable policy), rl_role_sampler.c
// (generation), rl_role_reward.c (the recipe's rewards), rl_role_reference.c (the frozen
// reference, with roles.reference: worker), rl_role_critic.c (PPO's value model, with
// roles.critic: worker; with roles.critic: actor the actor holds the critic and serves its verbs
// through the same handlers). Adding a role: copy one of them, add it to
// rl_role_find (rl_role.c). No processes and no sockets here; handlers get a decoded request and
// return a reply.
#ifndef RL_ROLE_H
#define RL_ROLE_H

#include "rl_coll.h"
#include "rl_config.h"
#include "rl_loss.h"
#include "rl_policy.h"
#include "rl_proto.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Serves one request: `req` (its op is the verb's) -> *reply (caller owns; free with
// rl_msg_free). Returns 0, or an error with err filled (the loop answers ok = false with it).
typedef int (*rl_role_handler_t)(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                                 size_t err_len);

// What the worker gives its role at setup: it is passed down, never looked up (no global). A
// role keeps what it needs of it in its state.
typedef struct {
    int threads;     // compute threads (BLAS and the model's loops)
    rl_coll_t *mesh; // the collectives of the worker's mesh, borrowed while the worker runs; NULL
                     // when it is not a rank of one. A rank shards its models over them.
    int rank;        // the worker's rank among its role's (sampler i: roles.devices.samplers)
} rl_role_env_t;

typedef struct {
    rl_proto_verb_t verb;
    rl_role_handler_t handler;
} rl_role_verb_t;

typedef struct {
    const char *name;            // "actor", "sampler", "reward"
    // Loads what the role needs from the recipe in the worker's environment; *state is the
    // role's (caller owns; free with teardown). Returns 0 or an error with err filled.
    int (*setup)(const rl_recipe_t *recipe, const rl_role_env_t *env, void **state, char *err,
                 size_t err_len);
    void (*teardown)(void **state);
    const rl_role_verb_t *verbs; // the verbs it serves besides shutdown
    int n_verbs;
    // 1: the role runs programs we did not write (reward commands, plugins), so its worker is a
    // child subreaper that kills every process they start when it ends (core/rl_reaper.h)
    int reaps;
} rl_role_t;

// The role named `name`, or NULL. borrowed; valid until program exit.
const rl_role_t *rl_role_find(const char *name);
// Serves one request of a role set up in `state` by the role's verb table (`shutdown` and
// `configure` are the serving loop's, not a role's): *reply as the handler makes it. Returns 0, or
// an error with err filled: the handler's, "a sampler worker does not serve 'train'", or "<op>:
// this worker is not configured yet" when state is NULL.
int rl_role_dispatch(const rl_role_t *role, void *state, const rl_msg_t *req, rl_msg_t **reply,
                     char *err, size_t err_len);

// A decoded train request as its loss's inputs (rl_loss.h): every field copied (pointers
// borrowed from q; lengths: q's as int, caller's), micro_batch and iterations at least 1.
void rl_role_loss_batch(const rl_proto_train_t *q, const int *lengths, rl_loss_batch_t *out);

// The roles, one per file (borrowed; valid until program exit).
const rl_role_t *rl_role_actor(void);
const rl_role_t *rl_role_sampler(void);
const rl_role_t *rl_role_reward(void);
const rl_role_t *rl_role_reference(void);
const rl_role_t *rl_role_critic(void);

// The model a sampler role's state holds (its weights are the last load_weights'), or NULL.
// borrowed; valid until the state's teardown.
rl_model_t *rl_role_sampler_model(void *state);

// The critic's verbs on a critic (rl_policy_new_critic): the critic role's handlers, which the
// actor also calls for the critic it holds (roles.critic: actor) and, values with scores, for a
// reward model (rl_policy_new_rm) it trains. save, load and save_final
// write and read the folder the request names (created by save and save_final: one level);
// train takes a decoded request of a critic's loss (rl_loss_t.model, the registry's "value":
// recipe: value_clip, loss_agg, max_grad_norm).
int rl_role_critic_values(rl_policy_t *critic, const rl_msg_t *req, rl_msg_t **reply, char *err,
                          size_t err_len);
int rl_role_critic_train(rl_policy_t *critic, const rl_recipe_t *r, const rl_proto_train_t *q,
                         uint64_t id, rl_msg_t **reply, char *err, size_t err_len);
int rl_role_critic_save(rl_policy_t *critic, const rl_recipe_t *r, const rl_msg_t *req,
                        rl_msg_t **reply, char *err, size_t err_len);
int rl_role_critic_load(rl_policy_t *critic, const rl_msg_t *req, rl_msg_t **reply, char *err,
                        size_t err_len);
int rl_role_critic_save_final(rl_policy_t *critic, const rl_recipe_t *r, const rl_msg_t *req,
                              rl_msg_t **reply, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

// rl_role — the one place that lists the roles (see rl_role.h; each role is its own file).
#include "rl_role.h"

#include "rl_err.h"

#include <string.h>

const rl_role_t *rl_role_find(const char *name) {
    const rl_role_t *all[] = {rl_role_actor(), rl_role_sampler(), rl_role_reward(),
                              rl_role_reference(), rl_role_critic()};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(all[i]->name, name) == 0) {
            return all[i];
        }
    }
    return NULL;
}

int rl_role_dispatch(const rl_role_t *role, void *state, const rl_msg_t *req, rl_msg_t **reply,
                     char *err, size_t err_len) {
    const char *op = rl_msg_op(req);
    if (!state) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: this worker is not configured yet", op);
    }
    int verb = rl_proto_verb_of(op);
    for (int i = 0; verb >= 0 && i < role->n_verbs; i++) {
        if ((int)role->verbs[i].verb == verb) {
            return role->verbs[i].handler(state, req, reply, err, err_len);
        }
    }
    return rl_errf(err, err_len, RL_EPROTO, "a %s worker does not serve '%s'", role->name, op);
}

void rl_role_loss_batch(const rl_proto_train_t *q, const int *lengths, rl_loss_batch_t *out) {
    *out = (rl_loss_batch_t){
        .B = (int)q->B,
        .T = (int)q->T,
        .tokens = q->tokens,
        .lengths = lengths,
        .mask = q->mask,
        .adv = q->adv,
        .token_adv = q->token_adv,
        .mu_logp = q->mu_logp,
        .ref_logp = q->ref_logp,
        .old_logp = q->old_logp,
        .values = q->values,
        .returns = q->returns,
        .ref_sum = q->ref_sum,
        .margin = q->margin,
        .denom = q->denom,
        .lr = q->lr,
        .temperature = q->temperature,
        .step = q->step,
        .micro_batch = (int)(q->micro_batch < 1 ? 1 : q->micro_batch),
        .iterations = (int)(q->iterations < 1 ? 1 : q->iterations),
    };
}

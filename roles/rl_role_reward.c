// rl_role_reward — the reward role: every reward of the recipe, opened in its order (built-ins,
// plugins, reward models, commands and servers through the one ABI, rewards/rl_reward; a reward
// model computes with the worker's threads; a command's program is this process's child, in a
// process group of its own, its stderr this worker's log), serving score (one reward over one
// batch). A plugin that crashes takes this process with it, which is why rewards run here and
// not in the controller. The worker is a child subreaper (`reaps`): whatever the rewards start,
// even in a session of its own, is killed when the worker ends (core/rl_reaper.h).
#include "rl_role.h"

#include "rl_err.h"
#include "rl_reward.h"

#include <stdlib.h>

typedef struct {
    rl_reward_t **rewards;
    int n;
} s_reward_t;

static void s_teardown(void **state) {
    s_reward_t *s = *state;
    if (s) {
        for (int i = 0; i < s->n; i++) {
            rl_reward_close(&s->rewards[i]);
        }
        free(s->rewards);
        free(s);
    }
    *state = NULL;
}

static int s_setup(const rl_recipe_t *recipe, const rl_role_env_t *env, void **state,
                   char *err, size_t err_len) {
    s_reward_t *s = calloc(1, sizeof *s);
    if (!s || !(s->rewards = calloc((size_t)recipe->n_rewards + 1, sizeof(*s->rewards)))) {
        free(s);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *state = s;
    for (int i = 0; i < recipe->n_rewards; i++) {
        int rc = rl_reward_open(&recipe->rewards[i], env->threads, &s->rewards[i], err, err_len);
        if (rc) {
            s_teardown(state);
            return rc;
        }
        s->n++;
    }
    return 0;
}

static int s_score(void *state, const rl_msg_t *req, rl_msg_t **reply, char *err,
                   size_t err_len) {
    s_reward_t *s = state;
    rl_proto_score_t q;
    int rc = rl_proto_score_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (q.reward < 0 || q.reward >= s->n) {
        return rl_errf(err, err_len, RL_EPROTO, "score: no reward %lld", (long long)q.reward);
    }
    rl_reward_item_t *items = calloc((size_t)q.n + 1, sizeof(*items));
    double *scores = malloc(((size_t)q.n + 1) * sizeof(double));
    if (!items || !scores) {
        free(items);
        free(scores);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int64_t off = 0;
    for (int i = 0; i < q.n; i++) { // rl_proto checked that lens fit in ids
        items[i].prompt = q.prompts[i];
        items[i].prompt_len = q.prompt_lens[i];
        items[i].completion = q.completions[i];
        items[i].completion_len = q.completion_lens[i];
        items[i].completion_ids = q.ids + off;
        items[i].n_completion_ids = (size_t)q.lens[i];
        items[i].row_json = q.rows[i];
        items[i].row_json_len = q.row_lens[i];
        off += q.lens[i];
    }
    rc = rl_reward_score(s->rewards[q.reward], items, (size_t)q.n, scores, err, err_len);
    free(items);
    if (!rc) {
        rl_proto_score_reply_t r = {scores, q.n};
        rc = rl_proto_score_reply_encode(&r, rl_msg_id(req), reply, err, err_len);
    }
    free(scores);
    return rc;
}

static const rl_role_verb_t s_verbs[] = {{RL_PROTO_SCORE, s_score}};

static const rl_role_t s_role = {"reward", s_setup, s_teardown, s_verbs,
                                 (int)(sizeof s_verbs / sizeof s_verbs[0]), 1};

const rl_role_t *rl_role_reward(void) { return &s_role; }

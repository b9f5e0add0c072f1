// rl_episode — multi-turn episodes, token-in-token-out (rl_episode.h, docs/envs.md).
#include "rl_episode.h"

#include "rl_env_proto.h"
#include "rl_err.h"
#include "rl_turns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rl_episodes_init(rl_episode_t *eps, int n, const char *prefix, json_t *const *rows,
                      const uint64_t *seeds) {
    memset(eps, 0, (size_t)n * sizeof *eps);
    for (int k = 0; k < n; k++) {
        snprintf(eps[k].id, sizeof eps[k].id, "%.32s%d", prefix ? prefix : "", k);
        eps[k].row = rows[k];
        eps[k].seed = seeds ? seeds[k] : (uint64_t)k;
    }
}

void rl_episodes_free(rl_episode_t *eps, int n) {
    for (int k = 0; eps && k < n; k++) {
        free(eps[k].ids);
        free(eps[k].mask);
        free(eps[k].logp);
        free(eps[k].turn_start);
        free(eps[k].turn_reward);
        json_decref(eps[k].messages);
        json_decref(eps[k].tools);
        memset(&eps[k], 0, sizeof eps[k]);
    }
}

// Appends n tokens with their mask value and logprobs (NULL: 0).
static int s_append(rl_episode_t *ep, const int32_t *ids, int n, uint8_t mask, const float *logp) {
    if (ep->n + n > ep->cap) {
        int cap = (ep->n + n) * 2 + 64;
        int32_t *i2 = realloc(ep->ids, (size_t)cap * sizeof *i2);
        if (i2) {
            ep->ids = i2;
        }
        uint8_t *m2 = i2 ? realloc(ep->mask, (size_t)cap) : NULL;
        if (m2) {
            ep->mask = m2;
        }
        float *l2 = m2 ? realloc(ep->logp, (size_t)cap * sizeof *l2) : NULL;
        if (!l2) {
            return RL_ENOMEM;
        }
        ep->logp = l2;
        ep->cap = cap;
    }
    memcpy(ep->ids + ep->n, ids, (size_t)n * sizeof *ids);
    memset(ep->mask + ep->n, mask, (size_t)n);
    for (int i = 0; i < n; i++) {
        ep->logp[ep->n + i] = logp ? logp[i] : 0.0f;
    }
    ep->n += n;
    return 0;
}

static int s_active(const rl_episode_t *ep) {
    return !ep->done && !ep->truncated && !ep->dropped;
}

// opts.drop: the episode leaves with its reason; returns 0 so that the others go on.
static int s_drop(rl_episode_t *ep, const char *why) {
    ep->dropped = 1;
    snprintf(ep->error, sizeof ep->error, "%.300s", why);
    return 0;
}

// After a request of n episodes (eps[k], or act[k] when act is given) under opts.drop: the
// items the decoder marked bad leave with the first one's reason (why), and when the request
// failed as a whole (rc, err) all of them leave and the others go on. Returns the rc left.
static int s_drops(rl_episode_t *eps, rl_episode_t *const *act, int n, const int *bad, int rc,
                   const char *op, const char *why, const char *err) {
    for (int k = 0; !rc && bad && k < n; k++) {
        if (bad[k]) {
            char w2[320];
            snprintf(w2, sizeof w2, "a bad item in the %s reply (the first: %.250s)", op, why);
            s_drop(act ? act[k] : &eps[k], w2);
        }
    }
    if (rc && rc != RL_ENOMEM && bad) { // bad is given only under opts.drop
        for (int k = 0; k < n; k++) {
            s_drop(act ? act[k] : &eps[k], err);
        }
        rc = 0;
    }
    return rc;
}

static char *s_dump(const json_t *j) {
    return j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
}

// reset: every episode's first messages, tools and prompt tokens
static int s_reset(rl_episode_t *eps, int n, const rl_episode_opts_t *o, rl_episode_env_fn env,
                   void *env_ctx, char *err, size_t err_len) {
    rl_env_reset_item_t *items = calloc((size_t)n, sizeof *items);
    const char **names = calloc((size_t)n, sizeof *names);
    rl_env_reset_reply_t *rep = calloc((size_t)n, sizeof *rep);
    int rc = items && names && rep ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    for (int k = 0; !rc && k < n; k++) {
        items[k] = (rl_env_reset_item_t){eps[k].id, eps[k].row, eps[k].seed};
        names[k] = eps[k].id;
    }
    char *req = rc ? NULL : rl_env_request_reset(items, n), *reply = NULL;
    if (!rc && !req) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int *bad = rc ? NULL : calloc((size_t)n, sizeof *bad);
    if (!rc && !bad) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    char whole[768] = ""; // the decoder's message
    if (!rc && (rc = env(env_ctx, req, &reply, err, err_len)) == 0) {
        rc = rl_env_reply_reset_items(reply, strlen(reply), n, names, rep, o->drop ? bad : NULL,
                                      whole, sizeof whole);
        if (rc) {
            rl_errf(err, err_len, rc, "the environment's reset: %s", whole);
        }
    }
    rc = s_drops(eps, NULL, n, o->drop ? bad : NULL, rc, "reset", whole, err);
    for (int k = 0; !rc && k < n; k++) {
        rl_episode_t *ep = &eps[k];
        if (ep->dropped) {
            continue;
        }
        ep->messages = json_deep_copy(rep[k].messages);
        ep->n_first = (int)json_array_size(ep->messages);
        ep->tools = rep[k].tools ? json_deep_copy(rep[k].tools) : NULL;
        char *mj = s_dump(ep->messages), *tj = ep->tools ? s_dump(ep->tools) : NULL;
        int32_t *ids = NULL;
        size_t ni = 0;
        char why[512];
        rc = mj ? rl_turns_prompt(o->fmt, o->tok, mj, tj, &ids, &ni, why, sizeof why) : RL_ENOMEM;
        if (rc && rc != RL_ENOMEM && o->drop) {
            char w2[400];
            snprintf(w2, sizeof w2, "its first prompt: %.300s", why);
            rc = s_drop(ep, w2);
        } else if (rc) {
            rl_errf(err, err_len, rc, "episode %s: its first prompt: %s", ep->id,
                    mj ? why : "out of memory");
        } else {
            rc = s_append(ep, ids, (int)ni, 0, NULL);
            ep->prompt_len = ep->n;
        }
        free(ids);
        free(mj);
        free(tj);
    }
    rl_env_reset_reply_free(rep, n);
    free(bad);
    free(rep);
    free(reply);
    free(req);
    free(names);
    free(items);
    return rc;
}

// The policy's turn of ep: its tokens appended (masked in), its text read for tool calls and
// added to the conversation. *cut = 1 when the turn did not end with the end-of-turn token.
static int s_take_turn(rl_episode_t *ep, const rl_episode_opts_t *o, rl_episode_turn_t *t,
                       char *err, size_t err_len) {
    int *ts = realloc(ep->turn_start, (size_t)(ep->n_turns + 1) * sizeof *ts);
    if (ts) {
        ep->turn_start = ts;
    }
    double *tr = ts ? realloc(ep->turn_reward, (size_t)(ep->n_turns + 1) * sizeof *tr) : NULL;
    if (!tr) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    ep->turn_reward = tr;
    ep->turn_reward[ep->n_turns] = 0.0;
    ep->turn_start[ep->n_turns++] = ep->n;
    int rc = s_append(ep, t->ids, t->n, 1, t->logp);
    char *text = NULL;
    size_t tl = 0;
    int body = t->n - (t->ended ? 1 : 0);
    if (!rc && rl_tokenizer_decode(o->tok, t->ids, (size_t)(body > 0 ? body : 0), 0, &text, &tl)) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "episode %s: its turn does not decode", ep->id);
    }
    rl_tool_parse_t tp;
    memset(&tp, 0, sizeof tp);
    if (!rc && rl_tool_parse(o->parser, text ? text : "", tl, ep->tool_calls, &tp) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (!rc) {
        json_t *msg =
            json_pack("{s:s,s:s%}", "role", "assistant", "content", tp.content, tp.content_len);
        if (msg && tp.n_calls > 0) {
            json_t *calls = json_array();
            for (int c = 0; c < tp.n_calls; c++) {
                json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id",
                                                       tp.calls[c].id, "type", "function",
                                                       "function", "name", tp.calls[c].name,
                                                       "arguments", tp.calls[c].arguments));
            }
            json_object_set_new(msg, "tool_calls", calls);
        }
        if (!msg || json_array_append_new(ep->messages, msg) != 0) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        ep->tool_calls += tp.n_calls;
        ep->parse_errors += tp.parse_errors;
    }
    rl_tool_parse_free(&tp);
    free(text);
    if (!rc && !t->ended) {
        ep->truncated = 1; // cut by the turn's or the episode's token limit: no step
    }
    return rc;
}

// step: the environment's answer to each episode's last turn; the tokens of what it says
static int s_step(rl_episode_t **act, int na, const rl_episode_opts_t *o, rl_episode_env_fn env,
                  void *env_ctx, char *err, size_t err_len) {
    rl_env_step_item_t *items = calloc((size_t)na, sizeof *items);
    const char **names = calloc((size_t)na, sizeof *names);
    rl_env_step_reply_t *rep = calloc((size_t)na, sizeof *rep);
    int rc = items && names && rep ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    for (int k = 0; !rc && k < na; k++) {
        size_t nm = json_array_size(act[k]->messages);
        items[k] = (rl_env_step_item_t){act[k]->id, json_array_get(act[k]->messages, nm - 1)};
        names[k] = act[k]->id;
    }
    char *req = rc ? NULL : rl_env_request_step(items, na), *reply = NULL;
    if (!rc && !req) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int *bad = rc ? NULL : calloc((size_t)na, sizeof *bad);
    if (!rc && !bad) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    char whole[768] = ""; // the decoder's message
    if (!rc && (rc = env(env_ctx, req, &reply, err, err_len)) == 0) {
        rc = rl_env_reply_step_items(reply, strlen(reply), na, names, rep, o->drop ? bad : NULL,
                                     whole, sizeof whole);
        if (rc) {
            rl_errf(err, err_len, rc, "the environment's step: %s", whole);
        }
    }
    rc = s_drops(NULL, act, na, o->drop ? bad : NULL, rc, "step", whole, err);
    for (int k = 0; !rc && k < na; k++) {
        rl_episode_t *ep = act[k];
        if (ep->dropped) {
            continue;
        }
        ep->env_reward += rep[k].reward;
        ep->turn_reward[ep->n_turns - 1] = rep[k].reward;
        if (rep[k].done) {
            ep->done = 1;
            continue;
        }
        if (ep->n_turns >= o->max_turns) {
            ep->truncated = 1;
            continue;
        }
        char *hj = s_dump(ep->messages), *ej = s_dump(rep[k].messages);
        char *tj = ep->tools ? s_dump(ep->tools) : NULL, why[512];
        int32_t *ids = NULL;
        size_t ni = 0;
        rc = hj && ej ? rl_turns_after(o->fmt, o->tok, hj, ej, tj, o->eos, 1, &ids, &ni, NULL, why,
                                       sizeof why)
                      : RL_ENOMEM;
        if (rc && rc != RL_ENOMEM && o->drop && hj && ej) {
            char w2[400];
            snprintf(w2, sizeof w2, "the answer to turn %d: %.300s", ep->n_turns, why);
            rc = s_drop(ep, w2);
        } else if (rc) {
            rl_errf(err, err_len, rc, "episode %s: the environment's answer to turn %d: %s", ep->id,
                    ep->n_turns, hj && ej ? why : "out of memory");
        } else if (ep->n - ep->prompt_len + (int)ni >= o->max_tokens) {
            ep->truncated = 1; // no room for the answer and a token of the policy's
        } else {
            rc = s_append(ep, ids, (int)ni, 0, NULL);
            json_array_extend(ep->messages, rep[k].messages);
        }
        free(ids);
        free(hj);
        free(ej);
        free(tj);
    }
    rl_env_step_reply_free(rep, na);
    free(bad);
    free(rep);
    free(reply);
    free(req);
    free(names);
    free(items);
    return rc;
}

static void s_close(rl_episode_t *eps, int n, rl_episode_env_fn env, void *env_ctx) {
    const char **names = calloc((size_t)n, sizeof *names);
    for (int k = 0; names && k < n; k++) {
        names[k] = eps[k].id;
    }
    char *req = names ? rl_env_request_close(names, n) : NULL, *reply = NULL, err[256];
    if (req && env(env_ctx, req, &reply, err, sizeof err) == 0) {
        rl_env_reply_close(reply, strlen(reply), err, sizeof err); // nothing to undo
    }
    free(reply);
    free(req);
    free(names);
}

int rl_episodes_run(rl_episode_t *eps, int n, const rl_episode_opts_t *o,
                    rl_episode_generate_fn generate, void *gen_ctx, rl_episode_env_fn env,
                    void *env_ctx, char *err, size_t err_len) {
    if (n <= 0 || o->max_turns < 1 || o->max_tokens < 1 || o->max_new < 1 || !o->eos) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "episodes need max_turns, max_tokens and max_new of at least 1 and the "
                       "end-of-turn token");
    }
    int rc = s_reset(eps, n, o, env, env_ctx, err, err_len);
    rl_episode_t **act = calloc((size_t)n, sizeof *act);
    int *max_new = calloc((size_t)n, sizeof *max_new);
    rl_episode_turn_t *out = calloc((size_t)n, sizeof *out);
    if (!rc && (!act || !max_new || !out)) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    while (!rc) {
        int na = 0;
        for (int k = 0; k < n; k++) {
            int left = o->max_tokens - (eps[k].n - eps[k].prompt_len);
            if (s_active(&eps[k]) && left <= 0) {
                eps[k].truncated = 1;
            }
            if (s_active(&eps[k])) {
                max_new[na] = left < o->max_new ? left : o->max_new;
                act[na++] = &eps[k];
            }
        }
        if (na == 0) {
            break;
        }
        memset(out, 0, (size_t)na * sizeof *out);
        rc = generate(gen_ctx, act, na, max_new, out, err, err_len);
        for (int k = 0; !rc && k < na; k++) {
            rc = s_take_turn(act[k], o, &out[k], err, err_len);
        }
        for (int k = 0; k < na; k++) {
            free(out[k].ids);
            free(out[k].logp);
        }
        int ns = 0;
        for (int k = 0; !rc && k < na; k++) {
            if (s_active(act[k])) {
                act[ns++] = act[k];
            }
        }
        if (!rc && ns > 0) {
            rc = s_step(act, ns, o, env, env_ctx, err, err_len);
        }
    }
    s_close(eps, n, env, env_ctx);
    free(act);
    free(max_new);
    free(out);
    return rc;
}

// rl_rollout_env — a rollout's multi-turn episodes (the recipe's `env:`; rl_rollout.h,
// docs/envs.md): each of a step's P prompts x G samples is an episode of the environment, run
// through rl_episode with the run's samplers as its policy; the episode's tokens after its first
// prompt become completion j, with the policy's tokens masked in.
//
// Sampling, so that an episode's draws do not depend on how the samplers split the work: the
// first turn of a prompt whose G episodes start from the same tokens is one prompt of G samples,
// drawn exactly as a one-turn rollout draws them (seed of the step, the row's index, sample g);
// every other turn is one sample per episode, seeded by (the step's seed, the turn) and indexed
// by row x G + g.
#include "rl_rollout.h"

#include "rl_clock.h"
#include "rl_env_host.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_metrics.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rl_run_t *run;
    const rl_rollout_t *t;
    const rl_episode_t *eps; // (P*G) episode j = prompt j / G, sample j % G
    uint64_t seed;           // the step's sampling seed
    double temperature;
    int32_t eos;             // the end-of-turn token
    double t_gen;            // seconds in the samplers
    uint64_t key0;           // episode j's session key: key0 + j (0: no sessions)
    int64_t prefill, decode; // tokens the samplers prefilled and decoded
} s_ctx_t;

typedef struct {
    double t_env; // seconds in the environment
    rl_env_host_t *host;
} s_env_ctx_t;

static int s_env(void *ctx, const char *request, char **reply, char *err, size_t err_len) {
    s_env_ctx_t *e = ctx;
    double t0 = rl_clock_now();
    int rc = rl_env_host_call(e->host, request, reply, err, err_len);
    e->t_env += rl_clock_now() - t0;
    return rc;
}

// 1 when every prompt's G episodes are at their first turn with the same tokens.
static int s_grouped(const s_ctx_t *c, rl_episode_t *const *act, int n) {
    int P = c->t->P, G = c->t->G;
    if (n != P * G) {
        return 0;
    }
    for (int j = 0; j < n; j++) {
        const rl_episode_t *a = act[j], *first = act[j - j % G];
        if (a != &c->eps[j] || a->n_turns != 0 || a->n != first->n ||
            memcmp(a->ids, first->ids, (size_t)a->n * sizeof *a->ids) != 0) {
            return 0;
        }
    }
    return 1;
}

static int s_generate(void *ctx, rl_episode_t *const *act, int n, const int *max_new,
                      rl_episode_turn_t *out, char *err, size_t err_len) {
    s_ctx_t *c = ctx;
    rl_run_t *run = c->run;
    int G = c->t->G, grouped = s_grouped(c, act, n);
    int np = grouped ? c->t->P : n, ns = grouped ? G : 1, most = 1;
    rl_run_prompt_t *pr = malloc((size_t)np * sizeof *pr);
    if (!pr) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int k = 0; k < np; k++) {
        const rl_episode_t *a = act[grouped ? k * G : k];
        int j = (int)(a - c->eps);
        int64_t row = (int64_t)c->t->idx[j / G];
        // the session: episode j's key (grouped: sample s of the prompt is episode j + s)
        int64_t key = c->key0 ? (int64_t)(c->key0 + (uint64_t)j) : 0;
        pr[k] = (rl_run_prompt_t){a->ids, a->n, grouped ? row : row * G + j % G, key};
    }
    for (int k = 0; k < n; k++) {
        most = max_new[k] > most ? max_new[k] : most;
    }
    int turn = act[0]->n_turns;
    uint64_t seed = grouped ? c->seed : rl_rollout_mix(c->seed, (uint64_t)turn + 1);
    rl_run_gen_t g;
    double t0 = rl_clock_now();
    run->max_new = most;
    int rc = rl_run_generate(run, pr, np, ns, c->temperature, seed, 0, &g, err, err_len);
    run->max_new = 0;
    c->t_gen += rl_clock_now() - t0;
    if (!rc) {
        c->prefill += g.prefill;
        c->decode += g.decode;
    }
    free(pr);
    for (int k = 0; !rc && k < n; k++) { // result k is act[k]'s (prompt-major either way)
        int len = g.lens[k] < max_new[k] ? g.lens[k] : max_new[k];
        out[k].ids = malloc((size_t)len * sizeof *out[k].ids);
        out[k].logp = malloc((size_t)len * sizeof *out[k].logp);
        if (!out[k].ids || !out[k].logp) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        memcpy(out[k].ids, g.ids + g.off[k], (size_t)len * sizeof *out[k].ids);
        memcpy(out[k].logp, g.lp + g.off[k], (size_t)len * sizeof *out[k].logp);
        out[k].n = len;
        // ended: by the end-of-turn token itself (another stop id, a stop string or a limit
        // leaves the turn cut: the episode is truncated there)
        out[k].ended = len == g.lens[k] && g.fin[k] == 0 && !g.cut[k] && len > 0 &&
                       out[k].ids[len - 1] == c->eos;
    }
    rl_run_gen_free(&g);
    return rc;
}

int rl_rollout_episodes(rl_run_t *run, const rl_prompts_t *prompts, rl_rollout_t *t,
                        double temperature, uint64_t seed, int64_t step, int eval, char *err,
                        size_t err_len) {
    const rl_recipe_t *r = run->r;
    int n = t->P * t->G;
    int32_t eos = rl_tokenizer_eos_id(run->tok);
    const char *eos_text = eos >= 0 ? rl_tokenizer_id_to_token(run->tok, eos) : NULL;
    if (!eos_text) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "env: the tokenizer has no eos token, so a policy turn cannot end");
    }
    json_t **rows = calloc((size_t)n, sizeof *rows);
    uint64_t *seeds = calloc((size_t)n, sizeof *seeds);
    t->eps = calloc((size_t)n, sizeof *t->eps);
    if (!rows || !seeds || !t->eps) {
        free(rows);
        free(seeds);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = 0;
    for (int j = 0; !rc && j < n; j++) {
        const rl_prompt_t *p = rl_prompts_get(prompts, t->idx[j / t->G]);
        rows[j] = json_loadb(p->row, p->row_len, 0, NULL);
        seeds[j] = rl_rollout_mix(seed, (uint64_t)j);
        if (!rows[j]) {
            rc =
                rl_errf(err, err_len, RL_EINVAL, "%s:%d: the row does not parse", p->file, p->line);
        }
    }
    char prefix[32], what[64]; // ids "3-17"; an evaluation's "e3-17"
    snprintf(prefix, sizeof prefix, "%s%lld-", eval ? "e" : "", (long long)step);
    if (eval) {
        snprintf(what, sizeof what, "the evaluation after step %lld", (long long)step);
    } else {
        snprintf(what, sizeof what, "step %lld", (long long)step);
    }
    rl_episodes_init(t->eps, n, prefix, rows, seeds);
    t->n_eps = n;
    rl_episode_opts_t o = {.max_turns = r->env.max_turns,
                           .max_tokens = r->env.max_tokens,
                           .max_new = r->sampling.max_new_tokens,
                           .parser = r->env.tool_parser == RL_RECIPE_TOOLS_LLAMA3_JSON
                                         ? RL_TOOL_PARSER_LLAMA3_JSON
                                         : RL_TOOL_PARSER_HERMES,
                           .fmt = rl_run_chat_format(r),
                           .tok = run->tok,
                           .eos = eos_text,
                           .drop = r->env.on_error == RL_RECIPE_ENV_DROP};
    s_ctx_t c = {
        .run = run, .t = t, .eps = t->eps, .seed = seed, .temperature = temperature, .eos = eos};
    if (r->env.keep_kv_cache) { // keys unique to this step (or evaluation), never 0
        c.key0 = ((uint64_t)(eval ? 1 : 0) << 62) | (((uint64_t)step & 0x3fffffffu) << 32) | 1u;
    }
    s_env_ctx_t e = {.host = run->env};
    t->version = run->version;
    if (!rc) {
        rc = rl_episodes_run(t->eps, n, &o, s_generate, &c, s_env, &e, err, err_len);
    }
    t->t_env = e.t_env;
    t->t_gen = c.t_gen;
    t->gen.prefill = c.prefill;
    t->gen.decode = c.decode;
    if (rc) { // the error names what failed; say which environment and step
        char desc[600], e2[1024];
        rl_env_host_describe(&r->env, desc, sizeof desc);
        snprintf(e2, sizeof e2, "%s", err);
        if (strncmp(e2, "env ", 4) == 0) {
            rl_errf(err, err_len, rc, "%s's episodes: %s", what, e2);
        } else {
            rl_errf(err, err_len, rc, "env %s: %s's episodes: %s", desc, what, e2);
        }
    }
    int dropped = 0, first = -1;
    for (int j = 0; !rc && j < n; j++) {
        if (t->eps[j].dropped) {
            first = first < 0 ? j : first;
            dropped++;
        }
    }
    char desc[600];
    rl_env_host_describe(&r->env, desc, sizeof desc);
    if (dropped > 0) {
        rl_log_warn("env %s: %s: %d of %d episodes dropped (env.on_error: drop); the first, "
                    "episode %s: %s",
                    desc, what, dropped, n, t->eps[first].id, t->eps[first].error);
    }
    if (!rc && dropped == n) { // nothing left: the environment is failing, not an episode
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "env %s: %s: every episode was dropped (env.on_error: drop); the first, "
                     "episode %s: %s",
                     desc, what, t->eps[first].id, t->eps[first].error);
    }
    // the completions: each episode's tokens after its first prompt
    int64_t total = 0;
    for (int j = 0; !rc && j < n; j++) {
        total += t->eps[j].n - t->eps[j].prompt_len;
    }
    rl_run_gen_t *g = &t->gen;
    if (!rc) {
        g->n_res = n;
        g->lens = malloc((size_t)n * sizeof *g->lens);
        g->off = malloc((size_t)n * sizeof *g->off);
        g->ids = malloc((size_t)(total ? total : 1) * sizeof *g->ids);
        g->lp = malloc((size_t)(total ? total : 1) * sizeof *g->lp);
        g->fin = calloc((size_t)n, 1);
        g->cut = calloc((size_t)n, 1);
        if (!g->lens || !g->off || !g->ids || !g->lp || !g->fin || !g->cut) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    int64_t o2 = 0;
    for (int j = 0; !rc && j < n; j++) {
        const rl_episode_t *ep = &t->eps[j];
        int lc = ep->n - ep->prompt_len;
        g->lens[j] = lc;
        g->off[j] = o2;
        memcpy(g->ids + o2, ep->ids + ep->prompt_len, (size_t)lc * sizeof *g->ids);
        memcpy(g->lp + o2, ep->logp + ep->prompt_len, (size_t)lc * sizeof *g->lp);
        g->fin[j] = ep->truncated ? 1 : 0;
        o2 += lc;
    }
    for (int j = 0; j < n; j++) {
        json_decref(rows[j]);
    }
    free(rows);
    free(seeds);
    return rc;
}

void rl_rollout_prompt(const rl_rollout_data_t *d, const rl_rollout_t *t, int j,
                       const int32_t **ids, int *len) {
    if (t->eps) {
        *ids = t->eps[j].ids;
        *len = t->eps[j].prompt_len;
        return;
    }
    const rl_prompt_t *p = rl_prompts_get(d->train, t->idx[j / t->G]);
    *ids = p->ids;
    *len = p->len;
}

void rl_rollout_env_metrics(rl_run_t *run, const rl_rollout_t *t) {
    if (!t->eps || t->n_eps <= 0) {
        return;
    }
    rl_metrics_t *mt = run->metrics;
    double turns = 0, calls = 0, perr = 0, trunc = 0, rew = 0, dropped = 0;
    int most = 0;
    for (int j = 0; j < t->n_eps; j++) {
        const rl_episode_t *ep = &t->eps[j];
        turns += ep->n_turns;
        most = ep->n_turns > most ? ep->n_turns : most;
        calls += ep->tool_calls;
        perr += ep->parse_errors;
        trunc += ep->truncated;
        rew += ep->env_reward;
        dropped += ep->dropped;
    }
    double n = t->n_eps;
    rl_metrics_add(mt, "env/turns", turns / n);
    rl_metrics_add(mt, "env/turns_max", most);
    rl_metrics_add(mt, "env/tool_calls", calls / n);
    rl_metrics_add(mt, "env/parse_errors", perr / n);
    rl_metrics_add(mt, "env/truncated", trunc / n);
    rl_metrics_add(mt, "env/reward", rew / n);
    rl_metrics_add(mt, "env/prefill_tokens", (double)t->gen.prefill);
    rl_metrics_add(mt, "env/decode_tokens", (double)t->gen.decode);
    if (run->r->env.on_error == RL_RECIPE_ENV_DROP) {
        rl_metrics_add(mt, "env/dropped", dropped);
    }
    rl_metrics_add(mt, "timing/env", t->t_env);
}

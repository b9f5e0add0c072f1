// rl_algo_ppo — PPO with a critic (Schulman et al. 2017, in the RLHF form of Ziegler et al. 2019;
// TRL's PPOTrainer, verl's PPO; REFERENCE.md §1) as the controller runs it. Per step, one
// rollout:
//   1. take train.batch_size prompts in the run's data order;
//   2. the samplers generate one completion of each (the weights of the last step);
//   3. the reward worker scores them; the score is the weighted total (NaN = unscorable: 0);
//   4. the rollout policy's logprobs logπ_old (the actor's), the reference's (beta > 0) and
//      the critic's values V of every completion token;
//   5. per-token rewards r_t = -beta (logπ_old - logπ_ref) plus the score at the last token;
//      GAE (gamma, lam) gives advantages and returns R = A + V; the advantages are whitened
//      over the rollout's tokens;
//   6. the records go to the store before any update (pending);
//   7. algorithm.epochs passes over the rollout, each in algorithm.mini_batches shuffled
//      mini-batches; every mini-batch is one optimizer step of the critic (the clipped value
//      loss against R around V) and, once algorithm.critic_warmup_steps rollouts are done, one
//      of the actor (the clipped policy loss with the per-token advantages against logπ_old);
//   8. the records again, with values and advantages; the metrics (REFERENCE.md §6 names); the
//      adaptive controller moves beta when algorithm.kl_target > 0;
//   9. the updated weights to the samplers.
// Evaluation is GRPO's (rl_rollout_evaluate).
#include "rl_algos.h"

#include "rl_clock.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_grpo.h"
#include "rl_ppo.h"
#include "rl_completions.h"
#include "rl_rollout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the recipe: its keys and checks (rl_recipe_algo_def_t) ----------------------------------

// PPO's own settings (the recipe's RL_RECIPE_K_SETTINGS keys below; r->algorithm.settings).
typedef struct {
    double gamma, lam;       // GAE discount and trace decay
    int epochs;              // passes over a rollout
    int mini_batches;        // optimizer steps per pass
    double kl_target;        // adaptive KL controller's target; 0 = beta stays fixed
    double kl_horizon;       // the controller's horizon (sequences)
    int critic_warmup_steps; // first rollouts train only the critic
} s_ppo_settings_t;

static const s_ppo_settings_t *s_set(const rl_recipe_t *r) {
    return r->algorithm.settings;
}

// clang-format off
static const rl_recipe_key_t s_ppo_keys[] = {
    {.section = "algorithm", .key = "gamma", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_IN(s_ppo_settings_t, gamma), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("1.0"), .max = 1, .doc = "GAE discount (TRL 1.0)"},
    {.section = "algorithm", .key = "lam", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_IN(s_ppo_settings_t, lam), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("0.95"), .max = 1, .doc = "GAE trace decay lambda (TRL 0.95)"},
    {.section = "algorithm", .key = "value_clip", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.value_clip), RL_RECIPE_DEF("0.2"), .max = RL_RECIPE_BIG,
     .doc = "clip range of the value loss around the rollout's values (TRL 0.2, verl 0.5); "
            "0 = no clipping"},
    {.section = "algorithm", .key = "epochs", .type = RL_RECIPE_T_INT,
     .offset = RL_RECIPE_IN(s_ppo_settings_t, epochs), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("4"), .min = 1, .max = 64,
     .doc = "passes over each rollout (TRL num_ppo_epochs)"},
    {.section = "algorithm", .key = "mini_batches", .type = RL_RECIPE_T_INT,
     .offset = RL_RECIPE_IN(s_ppo_settings_t, mini_batches), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("1"), .min = 1, .max = 1048576,
     .doc = "optimizer steps per pass; must divide train.batch_size (TRL num_mini_batches)"},
    {.section = "algorithm", .key = "kl_target", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_IN(s_ppo_settings_t, kl_target), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("0"), .max = RL_RECIPE_BIG,
     .doc = "adaptive KL controller's target KL per sequence; 0 = beta stays fixed"},
    {.section = "algorithm", .key = "kl_horizon", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_IN(s_ppo_settings_t, kl_horizon),
     .flags = RL_RECIPE_K_SETTINGS | RL_RECIPE_K_MIN_EXCL, RL_RECIPE_DEF("10000"),
     .max = RL_RECIPE_BIG, .doc = "adaptive KL controller's horizon, in sequences"},
    {.section = "algorithm", .key = "critic_warmup_steps", .type = RL_RECIPE_T_INT,
     .offset = RL_RECIPE_IN(s_ppo_settings_t, critic_warmup_steps), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("0"), .max = RL_RECIPE_IMAX,
     .doc = "first steps train only the critic; the policy waits (verl critic_warmup)"},
    {0},
};
// clang-format on

// A rollout is train.batch_size prompts, one completion each; algorithm.mini_batches divides it,
// and an optimizer step (a mini-batch) is the sequences train.micro_batch_size divides.
static void s_check(rl_recipe_check_t *c, const rl_recipe_t *r) {
    const s_ppo_settings_t *a = s_set(r);
    if (a->mini_batches > 0 && r->train.batch_size % a->mini_batches != 0) {
        rl_recipe_check_err(c, "algorithm.mini_batches", "%d does not divide train.batch_size (%d)",
                            a->mini_batches, r->train.batch_size);
        return;
    }
    long long per_step = r->train.batch_size / (a->mini_batches > 0 ? a->mini_batches : 1);
    char what[160];
    snprintf(what, sizeof what,
             "the %lld sequences of a mini-batch (train.batch_size %d / algorithm.mini_batches "
             "%d)",
             per_step, r->train.batch_size, a->mini_batches);
    rl_recipe_check_step(c, per_step, what);
}

static const rl_recipe_key_t *const s_keys[] = {rl_grpo_clip_keys,  rl_loss_beta_keys,
                                                rl_grpo_token_keys, rl_rollout_shaping_keys,
                                                s_ppo_keys,         NULL};
static const rl_recipe_default_t s_defaults[] = {{"algorithm.beta", "0.05"}, {NULL, NULL}};

// The losses PPO trains with (the registry's, rl_loss.h): the actor's and the critic's.
#define S_ACTOR_LOSS "ppo"
#define S_CRITIC_LOSS "value"

typedef struct {
    rl_rollout_data_t *d;
    double beta;       // the KL coefficient (moves with the adaptive controller)
    rl_sched_t critic; // the critic's learning-rate schedule
} s_ppo_t;

// ---- roles, data, state ----------------------------------------------------------------------

static void s_roles(const rl_recipe_t *r, rl_algo_roles_t *out) {
    out->sampling = 1;
    out->samplers = out->sampling ? r->roles.samplers : 0;
    out->reward = 1;
    out->reference = r->algorithm.beta > 0 && r->roles.reference != RL_RECIPE_REF_ACTOR;
    out->critic =
        r->roles.critic != RL_RECIPE_REF_ACTOR ? RL_ALGO_CRITIC_WORKER : RL_ALGO_CRITIC_ACTOR;
}

static void s_destroy(void **state) {
    s_ppo_t *s = *state;
    if (s) {
        rl_rollout_data_destroy(&s->d);
        free(s);
    }
    *state = NULL;
}

static int s_create(rl_run_t *run, void **state, size_t *n_train, double *data_frame, char *err,
                    size_t err_len) {
    const rl_recipe_t *r = run->r;
    s_ppo_t *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = rl_rollout_data_new(r, run->tok, 0, &s->d, err, err_len);
    if (rc) {
        return rc;
    }
    s->beta = r->algorithm.beta;
    // the critic's schedule: its own rate and warmup, the recipe's shape and length
    s->critic = (rl_sched_t){run->sched.kind, r->critic.lr, r->train.steps, r->critic.warmup_steps,
                             r->optim.min_lr_ratio};
    *n_train = rl_prompts_count(s->d->train);
    *data_frame = rl_rollout_data_frame(run, s->d, (size_t)r->train.batch_size);
    return 0;
}

static void s_save_state(void *state, rl_ckpt_state_t *st) {
    const s_ppo_t *s = state;
    snprintf(st->algo_key[st->n_algo], sizeof st->algo_key[0], "kl_coef");
    st->algo_value[st->n_algo++] = s->beta;
}

static void s_load_state(void *state, const rl_ckpt_state_t *st) {
    s_ppo_t *s = state;
    for (int i = 0; i < st->n_algo; i++) {
        if (strcmp(st->algo_key[i], "kl_coef") == 0) {
            s->beta = st->algo_value[i];
        }
    }
}

// ---- one step
// ------------------------------------------------------------------------------------

typedef struct {
    rl_rollout_t ro;
    float *maskf;            // (B,T) the mask as 0/1 floats
    float *old, *ref;        // (B,T) logπ_old, logπ_ref (NULL when beta = 0)
    float *values;           // (B,T) V at rollout time
    double *score;           // (B) the rows' scores
    double *rew, *adv, *ret; // (B,T) per-token rewards, advantages (whitened), returns
    double *kl_row;          // (B) per-row sums of k1
    float *advf, *retf;      // (B,T) advantages and returns as sent
    float *rewf;             // (B,T) the per-token rewards as stored
    // one mini-batch, gathered
    int32_t *m_tok, *m_len;
    uint8_t *m_mask;
    float *m_adv, *m_old, *m_mu, *m_ref, *m_val, *m_ret;
    int *perm;
    // what the step measured
    int unscorable;          // rows whose score was NaN (0 in the rewards)
    double kl_mean;          // k1 per token
    double ev;               // explained variance of the returns by V
    double adv_mean, adv_std; // the advantages before whitening
    double t_gen, t_reward, t_ref, t_values, t_adv, t_store, t_actor, t_critic; // seconds
} s_step_t;

static void s_step_free(s_step_t *t) {
    rl_rollout_free(&t->ro);
    void *all[] = {t->maskf, t->old,    t->ref,    t->values, t->score, t->rew,
                   t->adv,   t->ret,    t->kl_row, t->advf,   t->retf,  t->m_tok,
                   t->m_len, t->m_mask, t->m_adv,  t->m_old,  t->m_mu,  t->m_ref,
                   t->m_val, t->m_ret,  t->perm,   t->rewf};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        free(all[i]);
    }
    memset(t, 0, sizeof(*t));
}

static int s_alloc(s_step_t *t, int mbs) {
    size_t B = (size_t)t->ro.B, bt = B * (size_t)t->ro.T, mt = (size_t)mbs * (size_t)t->ro.T;
    t->maskf = malloc(bt * sizeof(float));
    t->old = malloc(bt * sizeof(float));
    t->values = malloc(bt * sizeof(float));
    t->score = malloc(B * sizeof(double));
    t->rew = malloc(bt * sizeof(double));
    t->adv = malloc(bt * sizeof(double));
    t->ret = malloc(bt * sizeof(double));
    t->kl_row = calloc(B, sizeof(double));
    t->advf = malloc(bt * sizeof(float));
    t->retf = malloc(bt * sizeof(float));
    t->rewf = malloc(bt * sizeof(float));
    t->m_tok = malloc(mt * sizeof(int32_t));
    t->m_len = malloc((size_t)mbs * sizeof(int32_t));
    t->m_mask = malloc(mt);
    t->m_adv = malloc(mt * sizeof(float));
    t->m_old = malloc(mt * sizeof(float));
    t->m_mu = malloc(mt * sizeof(float));
    t->m_ref = malloc(mt * sizeof(float));
    t->m_val = malloc(mt * sizeof(float));
    t->m_ret = malloc(mt * sizeof(float));
    t->perm = malloc(B * sizeof(int));
    return t->maskf && t->old && t->values && t->score && t->rew && t->adv && t->ret && t->kl_row &&
                   t->advf && t->retf && t->rewf && t->m_tok && t->m_len && t->m_mask && t->m_adv &&
                   t->m_old && t->m_mu && t->m_ref && t->m_val && t->m_ret && t->perm
               ? 0
               : RL_ENOMEM;
}

// rows perm[k0 .. k0+n) of the rollout into the mini-batch arrays; returns its loss divisor
static double s_gather(const rl_run_t *run, s_step_t *t, int k0, int n) {
    const rl_rollout_t *ro = &t->ro;
    size_t T = (size_t)ro->T;
    double active = 0;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)t->perm[k0 + i];
        memcpy(t->m_tok + i * T, ro->tok + b * T, T * sizeof(int32_t));
        memcpy(t->m_mask + i * T, ro->mask + b * T, T);
        memcpy(t->m_adv + i * T, t->advf + b * T, T * sizeof(float));
        memcpy(t->m_old + i * T, t->old + b * T, T * sizeof(float));
        memcpy(t->m_mu + i * T, ro->mu + b * T, T * sizeof(float));
        if (t->ref) {
            memcpy(t->m_ref + i * T, t->ref + b * T, T * sizeof(float));
        }
        memcpy(t->m_val + i * T, t->values + b * T, T * sizeof(float));
        memcpy(t->m_ret + i * T, t->retf + b * T, T * sizeof(float));
        t->m_len[i] = ro->len[b];
        for (size_t c = 0; c < T; c++) {
            active += ro->mask[b * T + c];
        }
    }
    const rl_recipe_t *r = run->r;
    double denom = r->algorithm.loss_agg == RL_RECIPE_AGG_TOKEN_MEAN ? active
                   : r->algorithm.loss_agg == RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN
                       ? (double)n
                       : (double)n * r->sampling.max_new_tokens;
    return denom > 0 ? denom : 1;
}

// The statistics of the updates of one rollout (every mini-batch of every epoch), merged as
// their losses define (rl_loss_stats_merge_update).
typedef struct {
    rl_loss_stats_t actor, critic;
} s_sums_t;

static int s_add(rl_loss_stats_t *acc, const char *loss, const rl_proto_train_reply_t *x,
                 char *err, size_t err_len) {
    rl_loss_stats_t xs;
    rl_proto_train_reply_stats(x, &xs);
    if (rl_loss_stats_merge_update(rl_loss_find(loss), acc, &xs) != 0) {
        return rl_errf(err, err_len, RL_EPROTO, "train reply: the %s loss's statistics changed",
                       loss);
    }
    return 0;
}

// 7. the updates: epochs x mini-batches, critic then actor. *weights: the last actor reply's
// (kept alive in *last_rep) when the actor trained.
static int s_update(rl_run_t *run, s_ppo_t *s, s_step_t *t, int train_actor, s_sums_t *u,
                    rl_msg_t **last_rep, rl_proto_train_reply_t *last, double *t_actor,
                    double *t_critic, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    const s_ppo_settings_t *set = s_set(r);
    int B = t->ro.B, T = t->ro.T, M = set->mini_batches, mbs = B / M;
    double lr = rl_sched_lr(&run->sched, run->step), clr = rl_sched_lr(&s->critic, run->step);
    int rc = 0;
    for (int i = 0; i < B; i++) {
        t->perm[i] = i;
    }
    for (int e = 0; !rc && e < set->epochs; e++) {
        // a fresh order each epoch, from the run's checkpointed stream
        for (int i = B - 1; i > 0; i--) {
            int j = (int)rl_rng_below(&run->rng, (uint64_t)i + 1);
            int x = t->perm[i];
            t->perm[i] = t->perm[j];
            t->perm[j] = x;
        }
        for (int k = 0; !rc && k < M; k++) {
            double denom = s_gather(run, t, k * mbs, mbs);
            int final = e == set->epochs - 1 && k == M - 1;
            rl_proto_train_reply_t x;
            rl_msg_t *rep = NULL;
            double c0 = rl_clock_now();
            rl_proto_train_t q = {.loss = S_CRITIC_LOSS,
                                  .step = run->step + 1,
                                  .lr = clr,
                                  .temperature = 1.0,
                                  .tokens = t->m_tok,
                                  .lengths = t->m_len,
                                  .mask = t->m_mask,
                                  .values = t->m_val,
                                  .returns = t->m_ret,
                                  .B = mbs,
                                  .T = T,
                                  .denom = denom,
                                  .micro_batch = r->train.micro_batch_size,
                                  .iterations = 1,
                                  .want_weights = 0};
            rc = rl_run_train(run, &run->critic, &q, &x, &rep, err, err_len);
            if (!rc) {
                rc = s_add(&u->critic, q.loss, &x, err, err_len);
            }
            rl_msg_free(&rep);
            *t_critic += rl_clock_now() - c0;
            if (rc || !train_actor) {
                continue;
            }
            c0 = rl_clock_now();
            q = (rl_proto_train_t){.loss = S_ACTOR_LOSS,
                                   .step = run->step + 1,
                                   .lr = lr,
                                   .temperature = r->sampling.temperature,
                                   .tokens = t->m_tok,
                                   .lengths = t->m_len,
                                   .mask = t->m_mask,
                                   .token_adv = t->m_adv,
                                   .old_logp = t->m_old,
                                   .mu_logp = t->m_mu,
                                   .ref_logp = t->ref ? t->m_ref : NULL,
                                   .B = mbs,
                                   .T = T,
                                   .denom = denom,
                                   .micro_batch = r->train.micro_batch_size,
                                   .iterations = 1,
                                   .want_weights = final && rl_run_sync_needs_host(run)};
            rc = rl_run_train(run, &run->actor, &q, &x, &rep, err, err_len);
            if (!rc) {
                rc = s_add(&u->actor, q.loss, &x, err, err_len);
            }
            if (!rc && final) {
                *last = x;
                *last_rep = rep; // x.weights points into it
            } else {
                rl_msg_free(&rep);
            }
            *t_actor += rl_clock_now() - c0;
        }
    }
    return rc;
}

// 4. The rollout policy's logprobs logπ_old (the actor's), the reference's (beta > 0) and the
// critic's values of every completion token.
static int s_score_tokens(rl_run_t *run, s_step_t *t, double beta, char *err, size_t err_len) {
    const rl_rollout_t *ro = &t->ro;
    double temp = run->r->sampling.temperature, t0 = rl_clock_now();
    int rc = rl_run_logprobs(run, 0, ro->tok, ro->len, ro->B, ro->T, temp, t->old, err, err_len);
    if (!rc && beta > 0) {
        t->ref = malloc((size_t)ro->B * (size_t)ro->T * sizeof(float));
        rc = t->ref ? rl_run_logprobs(run, 1, ro->tok, ro->len, ro->B, ro->T, temp, t->ref, err,
                                      err_len)
                    : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    double t1 = rl_clock_now();
    t->t_ref = t1 - t0;
    if (!rc) {
        rc = rl_run_values(run, ro->tok, ro->len, ro->B, ro->T, t->values, err, err_len);
    }
    t->t_values = rl_clock_now() - t1;
    return rc;
}

// 5. Per-token rewards, GAE, whitening (rl_ppo.h); the explained variance and k1 per token.
static int s_advantages(const rl_run_t *run, s_step_t *t, double beta, char *err,
                        size_t err_len) {
    const s_ppo_settings_t *set = s_set(run->r);
    const rl_rollout_t *ro = &t->ro;
    int B = ro->B, T = ro->T;
    size_t bt = (size_t)B * (size_t)T;
    double t0 = rl_clock_now();
    for (size_t i = 0; i < bt; i++) {
        t->maskf[i] = ro->mask[i];
    }
    for (int b = 0; b < B; b++) {
        t->score[b] = ro->total[ro->row_of[b]];
    }
    if (rl_ppo_token_rewards(t->maskf, t->old, t->ref, t->score, beta, B, T, t->rew,
                             t->ref ? t->kl_row : NULL, &t->unscorable) != 0 ||
        rl_ppo_gae(t->maskf, t->rew, t->values, set->gamma, set->lam, B, T, t->adv, t->ret) != 0 ||
        rl_ppo_whiten(t->maskf, t->adv, B, T, t->adv, &t->adv_mean, &t->adv_std) != 0 ||
        rl_ppo_explained_variance(t->maskf, t->ret, t->values, B, T, &t->ev) != 0) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "step %lld: advantages: a non-finite logprob or value in the rollout",
                       (long long)run->step + 1);
    }
    double ntok = 0;
    for (size_t i = 0; i < bt; i++) {
        t->advf[i] = (float)t->adv[i];
        t->retf[i] = (float)t->ret[i];
        t->rewf[i] = (float)t->rew[i];
        ntok += ro->mask[i];
    }
    for (int b = 0; b < B; b++) {
        t->kl_mean += t->kl_row[b];
    }
    t->kl_mean = ntok > 0 ? t->kl_mean / ntok : 0; // per token, as GRPO's `kl`
    t->t_adv = rl_clock_now() - t0;
    return 0;
}

// 6, 8. The step's records: before any update (pending), then complete.
static int s_store(rl_run_t *run, s_ppo_t *s, s_step_t *t, int64_t step, int pending, char *err,
                   size_t err_len) {
    double t0 = rl_clock_now();
    rl_rollout_extra_t ex = {
        .old = t->old, .ref = t->ref, .values = t->values, .adv = t->advf, .rewards = t->rewf};
    int rc = rl_rollout_store(run, s->d, &t->ro, step, &ex, pending, err, err_len);
    t->t_store += rl_clock_now() - t0;
    return rc;
}

// 8. The metrics (REFERENCE.md §6 names) and the progress note.
static void s_metrics(rl_run_t *run, s_ppo_t *s, const s_step_t *t, const s_sums_t *u,
                      double beta, int train_actor, double lr, char *note, size_t note_len) {
    rl_metrics_t *mt = run->metrics;
    const rl_rollout_t *ro = &t->ro;
    double rmean = NAN, gen = 0;
    rl_rollout_metrics(run, s->d, ro, t->old, lr, &rmean, &gen);
    rl_completions_print(run, s->d->train, ro, NULL);
    double n = 0, rs = 0, rss = 0;
    for (size_t i = 0; i < (size_t)ro->B * (size_t)ro->T; i++) {
        if (ro->mask[i]) {
            n++;
            rs += t->ret[i];
            rss += t->ret[i] * t->ret[i];
        }
    }
    double rm = n > 0 ? rs / n : 0;
    double rv = n > 1 ? (rss - n * rm * rm) / (n - 1) : 0;
    if (u->actor.updates > 0) {
        rl_loss_metrics(rl_loss_find(S_ACTOR_LOSS), &u->actor, "", mt);
    }
    rl_metrics_add(mt, "kl", t->kl_mean);
    rl_metrics_add(mt, "kl_coef", beta);
    rl_loss_metrics(rl_loss_find(S_CRITIC_LOSS), &u->critic, "", mt);
    rl_metrics_add(mt, "explained_variance", t->ev);
    rl_metrics_add(mt, "returns/mean", rm);
    rl_metrics_add(mt, "returns/std", sqrt(rv > 0 ? rv : 0));
    rl_metrics_add(mt, "advantages/mean", t->adv_mean);
    rl_metrics_add(mt, "advantages/std", t->adv_std);
    rl_metrics_add(mt, "critic/learning_rate", rl_sched_lr(&s->critic, run->step - 1));
    if (t->unscorable) {
        rl_metrics_add(mt, "rewards/unscorable", t->unscorable);
    }
    rl_metrics_add(mt, "timing/generate", t->t_gen);
    rl_metrics_add(mt, "timing/reward", t->t_reward);
    rl_metrics_add(mt, "timing/reference", t->t_ref);
    rl_metrics_add(mt, "timing/values", t->t_values);
    rl_metrics_add(mt, "timing/advantages", t->t_adv);
    rl_metrics_add(mt, "timing/train", t->t_actor);
    rl_metrics_add(mt, "timing/train_critic", t->t_critic);
    rl_metrics_add(mt, "timing/store", t->t_store);
    rl_metrics_add(mt, "tokens_per_second", gen / (t->t_gen > 0 ? t->t_gen : 1));
    snprintf(note, note_len, "reward %.3f value_loss %.4f ev %.2f%s", rmean,
             rl_loss_metric(rl_loss_find(S_CRITIC_LOSS), &u->critic, "value_loss"), t->ev,
             train_actor ? "" : " (critic warmup)");
}

// One PPO step, as the header's list.
static int s_step(void *state, rl_run_t *run, int *advanced, char *note, size_t note_len,
                  char *err, size_t err_len) {
    s_ppo_t *s = state;
    const rl_recipe_t *r = run->r;
    const s_ppo_settings_t *set = s_set(r);
    s_step_t t;
    memset(&t, 0, sizeof(t));
    rl_rollout_t *ro = &t.ro;
    double t0 = rl_clock_now(), beta = s->beta, lr = rl_sched_lr(&run->sched, run->step);
    *advanced = 0;
    // 1-2. prompts, one completion each
    int rc = rl_rollout_generate(run, s->d, r->train.batch_size, 1, ro, err, err_len);
    double t1 = rl_clock_now();
    t.t_gen = t1 - t0;
    // 3. scores
    if (!rc) {
        rc = rl_rollout_score(run, s->d, ro, err, err_len);
    }
    t.t_reward = rl_clock_now() - t1;
    if (!rc && (rl_rollout_batch(run, s->d, ro, NULL) != 0 ||
                s_alloc(&t, ro->B / set->mini_batches) != 0)) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    // 4. logπ_old, logπ_ref, V
    if (!rc) {
        rc = s_score_tokens(run, &t, beta, err, err_len);
    }
    // 5. rewards per token, GAE, whitening
    if (!rc) {
        rc = s_advantages(run, &t, beta, err, err_len);
    }
    // 6. the records before any update
    if (!rc) {
        rc = s_store(run, s, &t, run->step + 1, 1, err, err_len);
    }
    // 7. the updates (the actor waits for the critic's warmup)
    int train_actor = run->step >= set->critic_warmup_steps;
    s_sums_t u;
    memset(&u, 0, sizeof u);
    rl_msg_t *last_rep = NULL;
    rl_proto_train_reply_t last;
    memset(&last, 0, sizeof last);
    if (!rc) {
        rc = s_update(run, s, &t, train_actor, &u, &last_rep, &last, &t.t_actor, &t.t_critic, err,
                      err_len);
    }
    if (!rc) {
        rl_run_advance(run, train_actor ? ro->ntok : 0, NULL);
        *advanced = 1;
        // the adaptive controller (Ziegler et al.): beta follows the rollout's KL per sequence
        if (set->kl_target > 0 && t.ref) {
            double kl_seq = 0;
            for (int b = 0; b < ro->B; b++) {
                kl_seq += t.kl_row[b];
            }
            rl_ppo_kl_coef_update(&s->beta, kl_seq / ro->B, set->kl_target, ro->B, set->kl_horizon);
        }
    }
    // 8. the records complete, the metrics
    if (!rc) {
        rc = s_store(run, s, &t, run->step, 0, err, err_len);
    }
    if (*advanced) {
        s_metrics(run, s, &t, &u, beta, train_actor, lr, note, note_len);
    }
    // 9. sync
    double t2 = rl_clock_now();
    if (!rc && train_actor) {
        run->version = run->step;
        rc = rl_run_sync(run, last.weights, last.n, err, err_len);
    }
    if (!rc) {
        rl_metrics_add(run->metrics, "timing/sync", rl_clock_now() - t2);
        rl_metrics_add(run->metrics, "timing/step", rl_clock_now() - t0);
    }
    rl_msg_free(&last_rep);
    s_step_free(&t);
    return rc;
}

static int s_evaluate(void *state, rl_run_t *run, double *acc, double *acc_greedy, char *note,
                      size_t note_len, char *err, size_t err_len) {
    return rl_rollout_evaluate(((s_ppo_t *)state)->d, run, acc, acc_greedy, note, note_len, err,
                               err_len);
}

const rl_algo_t rl_algo_ppo = {
    .recipe =
        {
            .name = "ppo",
            .title = "PPO",
            .doc = "PPO with a critic: GAE advantages per token, clipped policy and value losses",
            .uses = RL_RECIPE_USES_SAMPLES | RL_RECIPE_USES_CRITIC,
            .keys = s_keys,
            .defaults = s_defaults,
            .check = s_check,
            .settings_size = sizeof(s_ppo_settings_t),
        },
    .roles = s_roles,
    .preflight = rl_rollout_preflight,
    .create = s_create,
    .destroy = s_destroy,
    .step = s_step,
    .evaluate = s_evaluate,
    .save_state = s_save_state,
    .load_state = s_load_state,
    .bookends = 1,
    .stores = 1,
};

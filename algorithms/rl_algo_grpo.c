// rl_algo_grpo — GRPO (DeepSeekMath; TRL's GRPOTrainer and DAPO's knobs; REFERENCE.md §1) as the
// controller runs it. Per step:
//   1. take train.batch_size prompts in the run's data order;
//   2. the samplers generate G = num_generations completions of each (the weights of the last
//      step; each completion's RNG stream from (seed, step, row, sample));
//   3. the reward worker scores every reward of the recipe; total = weighted sum (+ DAPO
//      overlong shaping; NaN = unscorable);
//   4. group advantages (rl_grpo_advantages); groups of equal rewards dropped with
//      drop_zero_std_groups;
//   5. the reference's logprobs of the kept completions (beta > 0);
//   6. the records go to the store before the update (pending), so that nothing after it can
//      lose them;
//   7. the actor's update (the recipe's policy_loss, rl_grpo_loss by default, over
//      micro-batches, num_iterations passes; its first forward is logπ_old);
//   8. the records again with logπ_old; the metrics (TRL's names, REFERENCE.md §6);
//   9. the updated weights to the samplers (the train reply carries them).
// With algorithm.max_staleness = k > 0 the rollouts are asynchronous: the generations of the next
// k steps are posted before the actor trains (with the weights the samplers hold), so the
// samplers generate while the actor trains and step t trains on completions sampled with the
// weights of step t - 1 - s, s <= k (s = k once the pipeline is full). The sync of step t's
// weights queues behind them on each sampler. No generation is posted across a checkpoint, so a
// resume from a train.save_every checkpoint continues exactly.
// Evaluation samples the held-out prompts at the recipe's temperature and greedily and scores
// the task's rule (math_answer against data.answer_field).
#include "rl_algos.h"

#include "rl_clock.h"
#include "rl_err.h"
#include "rl_grpo.h"
#include "rl_loss.h"
#include "rl_completions.h"
#include "rl_rollout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- the recipe: its keys and checks (rl_recipe_algo_def_t) ----------------------------------

// GRPO's own settings (the recipe's RL_RECIPE_K_SETTINGS keys below; r->algorithm.settings).
typedef struct {
    int num_generations;       // G: completions per prompt
    int num_iterations;        // policy updates per generated batch
    bool drop_zero_std_groups; // groups of equal rewards leave the update (DAPO)
    int max_staleness;         // asynchronous rollouts: weights at most this many versions old
} s_grpo_settings_t;

static const s_grpo_settings_t *s_set(const rl_recipe_t *r) {
    return r->algorithm.settings;
}

static const char *const s_scales[] = {[RL_RECIPE_SCALE_GROUP] = "group",
                                       [RL_RECIPE_SCALE_BATCH] = "batch",
                                       [RL_RECIPE_SCALE_NONE] = "none",
                                       NULL};
static const char *const s_advs[] = {
    [RL_RECIPE_ADV_GRPO] = "grpo", [RL_RECIPE_ADV_RLOO] = "rloo", NULL};
static const char *const s_kls[] = {
    [RL_RECIPE_KL_K1] = "k1", [RL_RECIPE_KL_K2] = "k2", [RL_RECIPE_KL_K3] = "k3", NULL};

// clang-format off
static const rl_recipe_key_t s_grpo_keys[] = {
    {.section = "algorithm", .key = "num_generations", .type = RL_RECIPE_T_INT,
     .offset = RL_RECIPE_IN(s_grpo_settings_t, num_generations), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("8"), .min = 2, .max = 4096, .doc = "completions per prompt (G)"},
    {.section = "algorithm", .key = "scale_rewards", .type = RL_RECIPE_T_ENUM,
     .offset = RL_RECIPE_AT(algorithm.scale_rewards), RL_RECIPE_DEF("group"), .choices = s_scales,
     .doc = "divide advantages by the group std, the batch std, or not at all (Dr.GRPO)"},
    {.section = "algorithm", .key = "advantage", .type = RL_RECIPE_T_ENUM,
     .offset = RL_RECIPE_AT(algorithm.advantage), RL_RECIPE_DEF("grpo"), .choices = s_advs,
     .doc = "baseline: group mean (grpo) or leave-one-out mean (rloo)"},
    {.section = "algorithm", .key = "std_eps", .type = RL_RECIPE_T_FLOAT,
     .offset = RL_RECIPE_AT(algorithm.std_eps), RL_RECIPE_DEF("1e-4"), .max = 1,
     .doc = "added to the std before dividing (TRL 1e-4, verl 1e-6)"},
    {0},
};
// clang-format on

// clang-format off
static const rl_recipe_key_t s_grpo_loss_keys[] = {
    {.section = "algorithm", .key = "kl_estimator", .type = RL_RECIPE_T_ENUM,
     .offset = RL_RECIPE_AT(algorithm.kl_estimator), RL_RECIPE_DEF("k3"), .choices = s_kls,
     .doc = "per-token KL estimator"},
    {.section = "algorithm", .key = "policy_loss", .type = RL_RECIPE_T_STRING,
     .offset = RL_RECIPE_AT(algorithm.policy_loss), RL_RECIPE_DEF("grpo"),
     .doc = "the policy-gradient loss: a policy loss of the loss registry (grpo; rlctl validate "
            "names the others)"},
    {0},
};
// clang-format on

// clang-format off
static const rl_recipe_key_t s_grpo_loop_keys[] = {
    {.section = "algorithm", .key = "num_iterations", .type = RL_RECIPE_T_INT,
     .offset = RL_RECIPE_IN(s_grpo_settings_t, num_iterations), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("1"), .min = 1, .max = 64, .doc = "policy updates per generated batch"},
    {.section = "algorithm", .key = "drop_zero_std_groups", .type = RL_RECIPE_T_BOOL,
     .offset = RL_RECIPE_IN(s_grpo_settings_t, drop_zero_std_groups), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("false"),
     .doc = "leave groups whose rewards are all equal out of the update (DAPO dynamic sampling)"},
    {.section = "algorithm", .key = "max_staleness", .type = RL_RECIPE_T_INT,
     .offset = RL_RECIPE_IN(s_grpo_settings_t, max_staleness), .flags = RL_RECIPE_K_SETTINGS,
     RL_RECIPE_DEF("0"), .max = 16,
     .doc = "asynchronous rollouts: the samplers generate the next steps' completions while the "
            "actor trains, with weights at most this many versions old; 0 = on-policy (each step "
            "samples with the weights of the step before)"},
    {0},
};
// clang-format on

// algorithm.policy_loss names a policy loss of the registry (rl_loss.h); a step is
// train.batch_size prompts x algorithm.num_generations completions: the sequences
// train.micro_batch_size divides.
static void s_check(rl_recipe_check_t *c, const rl_recipe_t *r) {
    const rl_loss_t *L = rl_loss_find(r->algorithm.policy_loss);
    if (!L || !L->policy_loss) {
        char names[256];
        rl_recipe_check_err(c, "algorithm.policy_loss", "'%.64s' is not a policy loss; choices: %s",
                            r->algorithm.policy_loss ? r->algorithm.policy_loss : "",
                            rl_loss_names(1, names, sizeof names));
    } else if (L->no_dual_clip && r->algorithm.dual_clip > 0) {
        rl_recipe_check_err(c, "algorithm.dual_clip",
                            "%g does not apply to policy_loss %s (its loss stays bounded for "
                            "negative advantages); use 0",
                            r->algorithm.dual_clip, L->name);
    }
    long long per_step = (long long)r->train.batch_size * s_set(r)->num_generations;
    char what[160];
    snprintf(what, sizeof what,
             "the %lld sequences of a step (train.batch_size %d x algorithm.num_generations %d)",
             per_step, r->train.batch_size, s_set(r)->num_generations);
    rl_recipe_check_step(c, per_step, what);
}

// GRPO's keys in the order the resolved recipe prints them
static const rl_recipe_key_t *const s_keys[] = {
    s_grpo_keys,        rl_grpo_clip_keys,       rl_loss_beta_keys, s_grpo_loss_keys,
    rl_grpo_token_keys, rl_rollout_shaping_keys, s_grpo_loop_keys,  NULL};

// ---- roles and data -----------------------------------------------------------------------------

// The loss the actor trains with: the recipe's algorithm.policy_loss, a policy loss of the
// registry (rl_loss.h).
static const char *s_loss(const rl_recipe_t *r) {
    return r->algorithm.policy_loss;
}

static void s_roles(const rl_recipe_t *r, rl_algo_roles_t *out) {
    out->sampling = 1;
    out->samplers = out->sampling ? r->roles.samplers : 0;
    out->reward = 1;
    out->reference = r->algorithm.beta > 0 && r->roles.reference != RL_RECIPE_REF_ACTOR;
}

#define S_MAX_AHEAD 16 // algorithm.max_staleness's cap

typedef struct {
    rl_rollout_data_t *d;
    rl_rollout_job_t q[S_MAX_AHEAD + 1]; // generations posted ahead, oldest first
    int nq;
    int64_t next_step;     // the step of the next generation to post
    rl_run_syncjob_t sync; // the last weights sync, posted and not collected yet
    double last_done;      // when the samplers last finished a generation (monotonic s)
    double sampler_idle;   // seconds of this step with no generation queued
} s_grpo_t;

static void s_drop_queue(s_grpo_t *g) {
    for (int i = 0; i < g->nq; i++) {
        rl_rollout_job_free(&g->q[i]);
    }
    g->nq = 0;
}

static void s_destroy(void **state) {
    s_grpo_t *g = *state;
    if (g) {
        s_drop_queue(g);
        rl_rollout_data_destroy(&g->d);
        free(g);
    }
    *state = NULL;
}

static int s_create(rl_run_t *run, void **state, size_t *n_train, double *data_frame, char *err,
                    size_t err_len) {
    s_grpo_t *g = calloc(1, sizeof *g);
    if (!g) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    *state = g;
    int rc = rl_rollout_data_new(run->r, run->tok, 0, &g->d, err, err_len);
    rl_rollout_data_t *d = g->d;
    if (rc) {
        return rc;
    }
    *n_train = rl_prompts_count(d->train);
    *data_frame = rl_rollout_data_frame(
        run, d, (size_t)run->r->train.batch_size * (size_t)s_set(run->r)->num_generations);
    return 0;
}

// ---- one step -----------------------------------------------------------------------------------

typedef struct {
    rl_rollout_t ro;      // prompts, completions, scores, the actor's batch
    double *adv;          // (n_res) sequence advantages
    int *keep;            // (n_res) 1 = in the update
    int kept;             // completions in the update
    rl_grpo_adv_stats_t as;
    double *badv;         // (B) advantages of the batch rows
    float *ref;           // (B,T) reference logprobs, or NULL
    float *old;           // (B,T) logπ_old from the train reply
    rl_msg_t *rep;        // the train reply (x's views)
    rl_proto_train_reply_t x;
    int have_x;           // 1: x holds the reply of this step's update
    double lr;
    int64_t staleness;    // versions between the sampling weights and the ones updated
    double waited;        // seconds the actor waited for the step's completions
    double t_gen, t_reward, t_ref, t_train, t_store; // seconds of each phase
} s_step_t;

static void s_step_free(s_step_t *t) {
    rl_rollout_free(&t->ro);
    free(t->adv);
    free(t->keep);
    free(t->badv);
    free(t->ref);
    free(t->old);
    rl_msg_free(&t->rep);
    memset(t, 0, sizeof(*t));
}

static int s_store(rl_run_t *run, const rl_rollout_data_t *d, int64_t step, s_step_t *t,
                   int pending, char *err, size_t err_len) {
    double t0 = rl_clock_now();
    rl_rollout_extra_t x = {.old = t->old, .ref = t->ref, .seq_adv = t->adv};
    int rc = rl_rollout_store(run, d, &t->ro, step, &x, pending, err, err_len);
    t->t_store += rl_clock_now() - t0;
    return rc;
}

// Posts the generation of step g->next_step (the weights the samplers hold: run->version); the
// samplers' idle time since their last generation is counted when nothing was queued.
static int s_post(s_grpo_t *g, rl_run_t *run, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    double prev = g->nq == 0 ? g->last_done : rl_run_genjob_done_now(run, g->q[g->nq - 1].job);
    int rc = rl_rollout_post(run, g->d, r->train.batch_size, s_set(r)->num_generations,
                             g->next_step, &g->q[g->nq], err, err_len);
    if (!rc) {
        // idle: from the end of the last generation queued before this one to now
        double now = rl_clock_now();
        if (prev > 0 && now > prev) {
            g->sampler_idle += now - prev;
        }
        g->nq++;
        g->next_step++;
    }
    return rc;
}

// 1-2. The step's prompts and completions: the oldest generation posted ahead, or one posted
// now; then the generations of the next steps up to k ahead (none across a checkpoint or past
// the last step). A failure leaves the queue to the step (which drops it) and the data order to
// the run (which takes it back to the prompts not trained on).
static int s_rollout(s_grpo_t *g, rl_run_t *run, s_step_t *t, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    int k = s_set(r)->max_staleness, rc = 0;
    double t0 = rl_clock_now();
    g->sampler_idle = 0;
    if (g->nq == 0) {
        g->next_step = run->step + 1;
        rc = s_post(g, run, err, err_len);
    }
    if (rc) {
        return rc;
    }
    double w0 = rl_clock_now();
    rl_rollout_job_t *head = &g->q[0];
    rc = rl_rollout_collect(run, head, &t->ro, err, err_len);
    t->waited = rl_clock_now() - w0;
    double done = rl_run_genjob_done(head->job);
    g->last_done = done > g->last_done ? done : g->last_done;
    t->staleness = run->step - t->ro.version; // the version its completions were sampled with
    if (!rc) {
        rc = rl_run_sync_collect(run, &g->sync, err, err_len); // queued behind it
    }
    if (rc) {
        return rc;
    }
    RL_ASSERT(t->staleness >= 0 && t->staleness <= k); // at most k posted ahead
    rl_rollout_job_free(head);
    memmove(&g->q[0], &g->q[1], (size_t)(g->nq - 1) * sizeof g->q[0]);
    g->nq--;
    const rl_recipe_train_t *tr = &r->train;
    while (!rc && g->nq < k && g->next_step <= tr->steps) {
        int64_t before = g->next_step - 1; // the step just before the one to post
        if (tr->save_every > 0 && before % tr->save_every == 0 && before < tr->steps) {
            break; // a checkpoint comes first
        }
        rc = s_post(g, run, err, err_len);
    }
    t->t_gen = rl_clock_now() - t0;
    return rc;
}

// 4. Group advantages; with drop_zero_std_groups the groups whose advantages are all 0 (equal
// rewards) leave the update.
static int s_advantages(const rl_recipe_t *r, s_step_t *t, char *err, size_t err_len) {
    const rl_recipe_algorithm_t *alg = &r->algorithm;
    int P = r->train.batch_size, G = s_set(r)->num_generations, n = t->ro.gen.n_res;
    t->adv = calloc((size_t)n, sizeof(double));
    t->keep = calloc((size_t)n, sizeof(int));
    if (!t->adv || !t->keep) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int rc = rl_grpo_advantages(t->ro.total, P, G, alg, t->adv, &t->as);
    if (rc) {
        return rl_errf(err, err_len, rc, "advantages: the rewards' mean or std overflows");
    }
    for (int g = 0; g < P; g++) {
        int zero = 1;
        for (int i = 0; i < G; i++) {
            zero &= t->adv[g * G + i] == 0.0;
        }
        for (int i = 0; i < G; i++) {
            t->keep[g * G + i] = !(s_set(r)->drop_zero_std_groups && zero);
            t->kept += t->keep[g * G + i];
        }
    }
    return 0;
}

// 5-7. The kept completions as the actor's batch; the reference's logprobs (beta > 0); the
// records to the store before the update (pending), so that nothing after it can lose them; the
// actor's update (the recipe's policy_loss over micro-batches, num_iterations passes; its first
// forward is logπ_old, kept for the records).
static int s_update(rl_run_t *run, rl_rollout_data_t *d, s_step_t *t, char *err,
                    size_t err_len) {
    const rl_recipe_t *r = run->r;
    rl_rollout_t *ro = &t->ro;
    double t0 = rl_clock_now();
    if (rl_rollout_batch(run, d, ro, t->keep) != 0 ||
        !(t->badv = calloc((size_t)ro->B, sizeof(double)))) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int b = 0; b < ro->B; b++) {
        t->badv[b] = t->adv[ro->row_of[b]];
    }
    size_t bt = (size_t)ro->B * (size_t)ro->T;
    int rc = 0;
    if (r->algorithm.beta > 0) {
        t->ref = malloc(bt * sizeof(float));
        rc = t->ref ? rl_run_logprobs(run, 1, ro->tok, ro->len, ro->B, ro->T,
                                      r->sampling.temperature, t->ref, err, err_len)
                    : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    t->t_ref = rl_clock_now() - t0;
    if (!rc) {
        rc = s_store(run, d, run->step + 1, t, 1, err, err_len);
    }
    double t1 = rl_clock_now();
    if (!rc) {
        rl_proto_train_t q = {.loss = s_loss(r),
                              .step = run->step + 1,
                              .lr = t->lr,
                              .temperature = r->sampling.temperature,
                              .tokens = ro->tok,
                              .lengths = ro->len,
                              .mask = ro->mask,
                              .adv = t->badv,
                              .mu_logp = ro->mu,
                              .ref_logp = t->ref,
                              .B = ro->B,
                              .T = ro->T,
                              .denom = ro->denom,
                              .micro_batch = r->train.micro_batch_size,
                              .iterations = s_set(r)->num_iterations,
                              .want_weights = rl_run_sync_needs_host(run)};
        rc = rl_run_train(run, &run->actor, &q, &t->x, &t->rep, err, err_len);
    }
    t->t_train = rl_clock_now() - t1;
    if (!rc) {
        if (!(t->old = malloc(bt * sizeof(float)))) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        memcpy(t->old, t->x.old_logp, bt * sizeof(float));
        t->have_x = 1;
    }
    return rc;
}

// 8. The metrics (TRL's names, REFERENCE.md §6) and the progress note.
static void s_metrics(rl_run_t *run, const s_grpo_t *gs, const s_step_t *t, char *note,
                      size_t note_len) {
    const rl_recipe_t *r = run->r;
    const rl_rollout_t *ro = &t->ro;
    const rl_proto_train_reply_t *x = t->have_x ? &t->x : NULL;
    rl_metrics_t *mt = run->metrics;
    double rmean = NAN, len_sum = 0;
    rl_rollout_metrics(run, gs->d, ro, x ? t->old : NULL, t->lr, &rmean, &len_sum);
    rl_completions_print(run, gs->d->train, ro, t->adv);
    rl_metrics_add(mt, "reward_std", t->as.reward_std);
    rl_metrics_add(mt, "frac_reward_zero_std", (double)t->as.zero_std_groups / ro->P);
    if (t->as.unscorable) { // totals that are NaN (a reward trained on had no score), as PPO's
        rl_metrics_add(mt, "rewards/unscorable", t->as.unscorable);
    }
    if (x) {
        rl_run_loss_metrics(run, s_loss(r), x);
    }
    rl_metrics_add(mt, "timing/generate", t->t_gen);
    rl_metrics_add(mt, "timing/reward", t->t_reward);
    rl_metrics_add(mt, "timing/reference", t->t_ref);
    rl_metrics_add(mt, "timing/train", t->t_train);
    rl_metrics_add(mt, "timing/store", t->t_store);
    int k = s_set(r)->max_staleness;
    if (k > 0) {
        rl_metrics_add(mt, "async/staleness", (double)t->staleness);
        // the step's completions by how many versions older their weights were than the ones
        // updated (a share regenerated after a remote sampler left is newer)
        int nr = ro->gen.n_res;
        for (int sv = 0; sv <= k && ro->gen.ver; sv++) {
            int c = 0;
            for (int j = 0; j < nr; j++) {
                c += (run->step - 1) - ro->gen.ver[j] == sv;
            }
            char key[48];
            snprintf(key, sizeof key, "async/staleness_%d", sv);
            rl_metrics_add(mt, key, nr > 0 ? (double)c / nr : 0.0);
        }
    }
    double gen_s = t->t_gen > 0 ? t->t_gen : 1;
    rl_metrics_add(mt, "timing/actor_idle", t->waited);
    rl_metrics_add(mt, "tokens_per_second", len_sum / gen_s);
    snprintf(note, note_len, "reward %.3f kl %.4f gen %.0f tok/s", rmean,
             x ? rl_run_loss_metric(s_loss(r), x, "kl") : 0.0, len_sum / gen_s);
}

// 9. The updated weights to the samplers (the train reply carries them); part of this step
// unless generations are queued ahead, which the sync then queues behind.
static int s_sync(s_grpo_t *gs, rl_run_t *run, const s_step_t *t, char *err, size_t err_len) {
    run->version = run->step;
    int rc = rl_run_sync_post(run, t->x.weights, t->x.n, &gs->sync, err, err_len);
    if (!rc && gs->nq == 0) {
        rc = rl_run_sync_collect(run, &gs->sync, err, err_len);
    }
    return rc;
}

static int s_quiesce(void *state, rl_run_t *run, char *err, size_t err_len) {
    s_grpo_t *g = state;
    int rc = 0;
    if (g->nq > 0) {
        // generations posted ahead: finished (the samplers' queues must be clear) and dropped;
        // their steps take the same prompts again
        rl_data_sampler_seek(run->order, g->q[0].pos0);
        for (int i = 0; i < g->nq; i++) {
            rl_rollout_t tmp;
            memset(&tmp, 0, sizeof tmp);
            int r2 = rl_rollout_collect(run, &g->q[i], &tmp, err, err_len);
            rc = rc ? rc : r2;
            rl_rollout_free(&tmp);
        }
        s_drop_queue(g);
    }
    int r3 = rl_run_sync_collect(run, &g->sync, err, err_len);
    return rc ? rc : r3;
}

// One GRPO step, as the header's list. On a failure the generations posted ahead are dropped
// (the run takes the data order back to the prompts not trained on).
static int s_step(void *state, rl_run_t *run, int *advanced, char *note, size_t note_len,
                  char *err, size_t err_len) {
    s_grpo_t *gs = state;
    s_step_t t;
    memset(&t, 0, sizeof(t));
    double t0 = rl_clock_now();
    *advanced = 0;
    t.lr = rl_sched_lr(&run->sched, run->step);
    // 1. the step's prompts, 2. their completions
    int rc = s_rollout(gs, run, &t, err, err_len);
    // 3. rewards
    double t1 = rl_clock_now();
    if (!rc) {
        rc = rl_rollout_score(run, gs->d, &t.ro, err, err_len);
    }
    t.t_reward = rl_clock_now() - t1;
    // 4. advantages
    if (!rc) {
        rc = s_advantages(run->r, &t, err, err_len);
    }
    // 5. reference, 6. the records before the update, 7. the actor's update (none when every
    // group was dropped)
    if (!rc && t.kept > 0) {
        rc = s_update(run, gs->d, &t, err, err_len);
    }
    if (!rc) {
        rl_run_advance(run, t.ro.ntok, gs->nq > 0 ? &gs->q[0].pos0 : NULL);
        *advanced = 1;
    }
    // 8. the records with logπ_old (completing the pending ones), the metrics
    if (!rc) {
        rc = s_store(run, gs->d, run->step, &t, 0, err, err_len);
    }
    if (*advanced) {
        s_metrics(run, gs, &t, note, note_len);
    }
    // 9. sync (after the metrics: a failed sync still leaves the step whole; a resumed run syncs
    // the samplers from the actor anyway)
    double t2 = rl_clock_now();
    if (!rc && t.kept > 0) {
        rc = s_sync(gs, run, &t, err, err_len);
    }
    if (!rc) {
        rl_metrics_add(run->metrics, "timing/sync", rl_clock_now() - t2);
        rl_metrics_add(run->metrics, "timing/step", rl_clock_now() - t0);
        rl_metrics_add(run->metrics, "timing/sampler_idle", gs->sampler_idle);
    } else {
        s_drop_queue(gs);
    }
    s_step_free(&t);
    return rc;
}

static int s_evaluate(void *state, rl_run_t *run, double *acc, double *acc_greedy, char *note,
                      size_t note_len, char *err, size_t err_len) {
    s_grpo_t *g = state;
    return rl_rollout_evaluate(g->d, run, acc, acc_greedy, note, note_len, err, err_len);
}

const rl_algo_t rl_algo_grpo = {
    .recipe =
        {
            .name = "grpo",
            .title = "GRPO",
            .doc = "group-relative policy optimization: G completions a prompt, advantages within "
                   "the group",
            .uses = RL_RECIPE_USES_SAMPLES,
            .keys = s_keys,
            .check = s_check,
            .settings_size = sizeof(s_grpo_settings_t),
        },
    .roles = s_roles,
    .preflight = rl_rollout_preflight,
    .create = s_create,
    .destroy = s_destroy,
    .step = s_step,
    .evaluate = s_evaluate,
    .quiesce = s_quiesce,
    .bookends = 1,
    .stores = 1,
};

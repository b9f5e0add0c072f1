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
#include "rl_algo.h"

#include "rl_clock.h"
#include "rl_err.h"
#include "rl_fault.h"
#include "rl_grpo.h"
#include "rl_loss.h"
#include "rl_completions.h"
#include "rl_rollout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- roles and data -----------------------------------------------------------------------------

// The loss the actor trains with: the recipe's algorithm.policy_loss, a policy loss of the
// registry (rl_loss.h).
static const char *s_loss(const rl_recipe_t *r) {
    return r->algorithm.policy_loss;
}

// The recipe's policy_loss names a policy loss of the registry (the choices are the
// registry's), then the checks every sampling algorithm shares.
static int s_preflight(const rl_recipe_t *r, char *err, size_t err_len) {
    const rl_loss_t *L = rl_loss_find(r->algorithm.policy_loss);
    if (!L || !L->policy_loss) {
        char names[256];
        return rl_recipe_errorf(r, "algorithm.policy_loss", err, err_len, RL_EINVAL,
                                "'%.64s' is not a policy loss; choices: %s",
                                r->algorithm.policy_loss ? r->algorithm.policy_loss : "",
                                rl_loss_names(1, names, sizeof names));
    }
    return rl_rollout_preflight(r, err, err_len);
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
        run, d, (size_t)run->r->train.batch_size * (size_t)run->r->algorithm.num_generations);
    return 0;
}

// ---- one step -----------------------------------------------------------------------------------

typedef struct {
    rl_rollout_t ro;      // prompts, completions, scores, the actor's batch
    double *adv;          // (n_res) sequence advantages
    int *keep;            // (n_res) 1 = in the update
    double *badv;         // (B) advantages of the batch rows
    float *ref;           // (B,T) reference logprobs, or NULL
    float *old;           // (B,T) logπ_old from the train reply
} s_step_t;

static void s_step_free(s_step_t *t) {
    rl_rollout_free(&t->ro);
    free(t->adv);
    free(t->keep);
    free(t->badv);
    free(t->ref);
    free(t->old);
    memset(t, 0, sizeof(*t));
}

static int s_store(rl_run_t *run, const rl_rollout_data_t *d, int64_t step, const s_step_t *t,
                   int pending, char *err, size_t err_len) {
    rl_rollout_extra_t x = {.old = t->old, .ref = t->ref, .seq_adv = t->adv};
    return rl_rollout_store(run, d, &t->ro, step, &x, pending, err, err_len);
}

static void s_metrics(rl_run_t *run, const rl_rollout_data_t *d, const s_step_t *t,
                      const rl_grpo_adv_stats_t *as, const rl_proto_train_reply_t *x, double lr,
                      double *rmean, double *gen_tokens) {
    rl_metrics_t *mt = run->metrics;
    rl_rollout_metrics(run, d, &t->ro, x ? t->old : NULL, lr, rmean, gen_tokens);
    rl_completions_print(run, d->train, &t->ro, t->adv);
    rl_metrics_add(mt, "reward_std", as->reward_std);
    rl_metrics_add(mt, "frac_reward_zero_std", (double)as->zero_std_groups / t->ro.P);
    if (as->unscorable) { // totals that are NaN (a reward trained on had no score), as PPO's
        rl_metrics_add(mt, "rewards/unscorable", as->unscorable);
    }
    if (x) {
        rl_run_loss_metrics(run, s_loss(run->r), x);
    }
}

// Posts the generation of step g->next_step (the weights the samplers hold: run->version); the
// samplers' idle time since their last generation is counted when nothing was queued.
static int s_post(s_grpo_t *g, rl_run_t *run, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    double prev = g->nq == 0 ? g->last_done : rl_run_genjob_done_now(run, g->q[g->nq - 1].job);
    int rc = rl_rollout_post(run, g->d, r->train.batch_size, r->algorithm.num_generations,
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
// the last step). *staleness: versions between the sampling weights and the ones updated now.
static int s_rollout(s_grpo_t *g, rl_run_t *run, rl_rollout_t *ro, int64_t *staleness,
                     double *waited, rl_data_pos_t *pos0, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    int k = r->algorithm.max_staleness, rc = 0;
    if (g->nq == 0) {
        g->next_step = run->step + 1;
        rc = s_post(g, run, err, err_len);
    }
    if (rc) {
        return rc;
    }
    double w0 = rl_clock_now();
    rl_rollout_job_t *head = &g->q[0];
    *pos0 = head->pos0; // where the step's prompts were taken
    rc = rl_rollout_collect(run, head, ro, err, err_len);
    *waited = rl_clock_now() - w0;
    double done = rl_run_genjob_done(head->job);
    g->last_done = done > g->last_done ? done : g->last_done;
    *staleness = run->step - rl_run_genjob_version(head->job);
    if (!rc) {
        rc = rl_run_sync_collect(run, &g->sync, err, err_len); // queued behind it
    }
    if (rc) {
        // the data order goes back to the oldest prompts not trained on
        rl_data_sampler_seek(run->order, head->pos0);
        s_drop_queue(g);
        return rc;
    }
    RL_ASSERT(*staleness >= 0 && *staleness <= k); // at most k posted ahead
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

static int s_step(void *state, rl_run_t *run, int *advanced_p, char *note, size_t note_len,
                  char *err, size_t err_len) {
    s_grpo_t *gs = state;
    rl_rollout_data_t *d = gs->d;
    const rl_recipe_t *r = run->r;
    const rl_recipe_algorithm_t *alg = &r->algorithm;
    int P = r->train.batch_size, G = alg->num_generations;
    s_step_t t;
    memset(&t, 0, sizeof(t));
    rl_rollout_t *ro = &t.ro;
    rl_metrics_t *mt = run->metrics;
    double t0 = rl_clock_now();
    *advanced_p = 0;
    // 1. the step's prompts, 2. generate (or collect what was generated ahead)
    rl_data_pos_t pos0 = rl_data_sampler_pos(run->order); // restored if the step fails
    int64_t staleness = 0;
    double waited = 0;
    gs->sampler_idle = 0;
    int rc = s_rollout(gs, run, ro, &staleness, &waited, &pos0, err, err_len);
    double t1 = rl_clock_now();
    // 3. rewards
    if (!rc) {
        rc = rl_rollout_score(run, d, ro, err, err_len);
    }
    double t2 = rl_clock_now();
    int n = ro->gen.n_res;
    // 4. advantages
    rl_grpo_adv_stats_t as;
    if (!rc) {
        t.adv = calloc((size_t)n, sizeof(double));
        t.keep = calloc((size_t)n, sizeof(int));
        if (!t.adv || !t.keep) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    if (!rc && (rc = rl_grpo_advantages(ro->total, P, G, alg, t.adv, &as)) != 0) {
        rc = rl_errf(err, err_len, rc, "advantages: the rewards' mean or std overflows");
    }
    int kept = 0;
    for (int g = 0; !rc && g < P; g++) {
        int zero = 1;
        for (int i = 0; i < G; i++) {
            zero &= t.adv[g * G + i] == 0.0;
        }
        for (int i = 0; i < G; i++) {
            t.keep[g * G + i] = !(alg->drop_zero_std_groups && zero);
            kept += t.keep[g * G + i];
        }
    }
    // 5. reference, 6. the records before the update, 7. train
    double lr = rl_sched_lr(&run->sched, run->step), t3 = rl_clock_now(), t4 = t3;
    double t_pending = 0;
    rl_msg_t *rep = NULL;
    rl_proto_train_reply_t x;
    int have_x = 0;
    if (!rc && kept > 0) {
        if (rl_rollout_batch(run, d, ro, t.keep) != 0 ||
            !(t.badv = calloc((size_t)ro->B, sizeof(double)))) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        for (int b = 0; !rc && b < ro->B; b++) {
            t.badv[b] = t.adv[ro->row_of[b]];
        }
        if (!rc && alg->beta > 0) {
            t.ref = malloc((size_t)ro->B * (size_t)ro->T * sizeof(float));
            rc = t.ref ? rl_run_logprobs(run, 1, ro->tok, ro->len, ro->B, ro->T,
                                         r->sampling.temperature, t.ref, err, err_len)
                       : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        double ta = rl_clock_now();
        if (!rc) {
            rc = s_store(run, d, run->step + 1, &t, 1, err, err_len);
        }
        t_pending = rl_clock_now() - ta;
        t3 = rl_clock_now();
        if (!rc) {
            rl_proto_train_t q = {.loss = s_loss(r),
                                  .step = run->step + 1,
                                  .lr = lr,
                                  .temperature = r->sampling.temperature,
                                  .tokens = ro->tok,
                                  .lengths = ro->len,
                                  .mask = ro->mask,
                                  .adv = t.badv,
                                  .mu_logp = ro->mu,
                                  .ref_logp = t.ref,
                                  .B = ro->B,
                                  .T = ro->T,
                                  .denom = ro->denom,
                                  .micro_batch = r->train.micro_batch_size,
                                  .iterations = alg->num_iterations,
                                  .want_weights = 1};
            run->actor_consistent = 0;
            rc = rl_run_train(run, &run->actor, &q, &x, &rep, err, err_len);
        }
        t4 = rl_clock_now();
        if (!rc) {
            if (!(t.old = malloc((size_t)ro->B * (size_t)ro->T * sizeof(float)))) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            } else {
                memcpy(t.old, x.old_logp, (size_t)ro->B * (size_t)ro->T * sizeof(float));
                have_x = 1;
            }
        }
    }
    int advanced = 0; // the actor took this step's update (or there was none to take)
    if (!rc) {
        run->step++;
        run->actor_consistent = 1;
        run->num_tokens += ro->ntok;
        advanced = 1;
    }
    // 8. the records with logπ_old (completing the pending ones), the metrics
    double t5 = rl_clock_now();
    if (!rc && rl_fault("store")) {
        rc = rl_errf(err, err_len, RL_EIO, "trajectory store: step %lld could not be written "
                     "(RLCTL_FAULT=store)", (long long)run->step);
    } else if (!rc) {
        rc = s_store(run, d, run->step, &t, 0, err, err_len);
    }
    double t6 = rl_clock_now();
    if (advanced) {
        double rmean = NAN, len_sum = 0;
        s_metrics(run, d, &t, &as, have_x ? &x : NULL, lr, &rmean, &len_sum);
        rl_metrics_add(mt, "timing/generate", t1 - t0);
        rl_metrics_add(mt, "timing/reward", t2 - t1);
        rl_metrics_add(mt, "timing/reference", t3 - t2);
        rl_metrics_add(mt, "timing/train", t4 - t3);
        rl_metrics_add(mt, "timing/store", t_pending + (t6 - t5));
        if (alg->max_staleness > 0) {
            rl_metrics_add(mt, "async/staleness", (double)staleness);
            // the step's completions by how many versions older their weights were than the
            // ones updated (a share regenerated after a remote sampler left is newer)
            int nr = ro->gen.n_res;
            for (int sv = 0; sv <= alg->max_staleness && ro->gen.ver; sv++) {
                int c = 0;
                for (int j = 0; j < nr; j++) {
                    c += (run->step - 1) - ro->gen.ver[j] == sv;
                }
                char key[48];
                snprintf(key, sizeof key, "async/staleness_%d", sv);
                rl_metrics_add(mt, key, nr > 0 ? (double)c / nr : 0.0);
            }
        }
        rl_metrics_add(mt, "timing/actor_idle", waited);
        rl_metrics_add(mt, "tokens_per_second", len_sum / (t1 - t0 > 0 ? t1 - t0 : 1));
        snprintf(note, note_len, "reward %.3f kl %.4f gen %.0f tok/s", rmean,
                 have_x ? rl_run_loss_metric(s_loss(r), &x, "kl") : 0.0,
                 len_sum / (t1 - t0 > 0 ? t1 - t0 : 1));
    }
    // 9. sync (after the metrics: a failed sync still leaves the step whole; a resumed run syncs
    // the samplers from the actor anyway)
    if (!rc && kept > 0) {
        run->version = run->step;
        rc = rl_run_sync_post(run, x.weights, x.n, &gs->sync, err, err_len);
        if (!rc && gs->nq == 0) { // nothing generating ahead: the sync is part of this step
            rc = rl_run_sync_collect(run, &gs->sync, err, err_len);
        }
    }
    double t7 = rl_clock_now();
    if (!rc) {
        rl_metrics_add(mt, "timing/sync", t7 - t6);
        rl_metrics_add(mt, "timing/step", t7 - t0);
        rl_metrics_add(mt, "timing/sampler_idle", gs->sampler_idle);
    }
    *advanced_p = advanced;
    if (rc && !advanced) {
        rl_data_sampler_seek(run->order, pos0); // the step's prompts are taken again on resume
        s_drop_queue(gs);                       // and those of the steps generated ahead
    } else if (rc) {
        if (gs->nq > 0) {
            rl_data_sampler_seek(run->order, gs->q[0].pos0);
        }
        s_drop_queue(gs);
    }
    rl_msg_free(&rep);
    s_step_free(&t);
    return rc;
}

static int s_evaluate(void *state, rl_run_t *run, double *acc, double *acc_greedy, char *note,
                      size_t note_len, char *err, size_t err_len) {
    s_grpo_t *g = state;
    return rl_rollout_evaluate(g->d, run, acc, acc_greedy, note, note_len, err, err_len);
}

static const rl_algo_t s_algo = {
    .name = "grpo",
    .roles = s_roles,
    .preflight = s_preflight,
    .create = s_create,
    .destroy = s_destroy,
    .step = s_step,
    .evaluate = s_evaluate,
    .quiesce = s_quiesce,
    .bookends = 1,
    .stores = 1,
};

const rl_algo_t *rl_algo_grpo(void) { return &s_algo; }

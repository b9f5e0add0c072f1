// rl_rollout — what every algorithm that samples from its own policy shares (GRPO, PPO): its
// prompts and held-out answers, one step's rollout (prompts in the run's data order ->
// completions -> reward scores -> the actor's (B,T) batch), the step's records for the
// trajectory store, the metrics every such algorithm logs, and the held-out evaluation. An
// algorithm file (rl_algo_grpo.c, rl_algo_ppo.c) adds its own math between these calls: the
// advantages, the reference and the critic, the update. Internal to run/ and algorithms/; the structs are open
// so that an algorithm reads like its paper.
#ifndef RL_ROLLOUT_H
#define RL_ROLLOUT_H

#include "rl_episode.h"
#include "rl_prompts.h"
#include "rl_run.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- the data -----------------------------------------------------------------------------------

typedef struct {
    rl_prompts_t *train, *eval;
    char **eval_answers; // (eval count) normalised reference answers
    rl_run_prompt_t *eval_prompts;
    int n_eval; // prompts evaluated (train.eval_samples of them, or all)
} rl_rollout_data_t;

// The training and eval prompts of a recipe (data.train, data.eval, data.prompt_field, the chat
// template, data.max_prompt_length and data.truncation), and the eval answers
// (data.answer_field, normalised as the math reward reads numbers). flags: RL_ROLLOUT_QUIET (no
// info lines), RL_ROLLOUT_EVAL_ONLY (the held-out prompts only: train stays NULL; an algorithm
// that trains on other data but measures accuracy by sampling, as DPO). caller owns *out (also on
// failure, partly filled); free with rl_rollout_data_destroy.
enum { RL_ROLLOUT_QUIET = 1u, RL_ROLLOUT_EVAL_ONLY = 2u };
int rl_rollout_data_new(const rl_recipe_t *r, rl_tokenizer_t *tok, unsigned flags,
                        rl_rollout_data_t **out, char *err, size_t err_len);
void rl_rollout_data_destroy(rl_rollout_data_t **self_p);

// The checks that need files but no worker, before the run folder is touched: the tokenizer,
// the prompts and eval answers, and every reward (plugin ABI, config; a `command:` program is
// started and must reply to one request, the first training prompt with an empty completion, so
// that one that exits before replying is caught here). Errors name the recipe key. Returns 0 or
// RL_EINVAL with err filled.
int rl_rollout_preflight(const rl_recipe_t *r, char *err, size_t err_len);

// The largest data frame of a step of `per_step` completions: a per-token tensor of the largest
// batch (a step's completions or the evaluated prompts) x (longest prompt + max_new_tokens) x 4
// bytes, or a score request's first frame (prompt texts, rows and completion texts: at most 3
// bytes a raw token byte, for U+FFFD replacements; plus the small tensors inline).
double rl_rollout_data_frame(const rl_run_t *run, const rl_rollout_data_t *d, size_t per_step);

// splitmix64 of (a, b): the seed of step b of a run seeded a.
uint64_t rl_rollout_mix(uint64_t a, uint64_t b);

// ---- one step's rollout -----------------------------------------------------------------------

typedef struct {
    int P, G;         // prompts, completions of each
    size_t *idx;      // (P) dataset rows
    rl_run_gen_t gen; // n_res = P * G completions, prompt-major
    int64_t version;  // the weights version that sampled them
    double *raw;      // (R, n_res) each reward's raw score (NaN = unscorable)
    double *total;    // (n_res) weighted total (+ DAPO overlong shaping); NaN: unscorable by a
                      // reward of nonzero weight
    // the actor's batch (rl_rollout_batch): the kept completions, (B,T) right-padded
    int B, T;
    int *row_of;        // (B) completion index of batch row b
    int *brow;          // (n_res) batch row of completion j, or -1 (not kept)
    int32_t *tok, *len; // (B,T), (B)
    uint8_t *mask;      // (B,T) 1 on the completion tokens trained on
    float *mu;          // (B,T) sampler logprobs
    double denom;       // the loss aggregation's divisor of the whole batch (algorithm.loss_agg)
    int64_t ntok;       // active tokens trained on
    // multi-turn episodes (env:): completion j is episode j's tokens after its first prompt
    // (the policy's and the environment's; its mask says which are the policy's); NULL: one
    // prompt -> one completion
    rl_episode_t *eps;
    int n_eps;
    double t_env, t_gen; // seconds the episodes spent in the environment and the samplers
} rl_rollout_t;

void rl_rollout_free(rl_rollout_t *t);

// A step's generation in flight (asynchronous rollouts): its prompts, taken from the data order
// at post, and the samplers' requests.
typedef struct {
    int P, G;
    size_t *idx;        // (P) dataset rows
    rl_data_pos_t pos0; // the data order before they were taken (to take them again)
    int64_t step;       // the step it is for: seeds its sampling
    rl_run_genjob_t *job;
    const rl_rollout_data_t *d; // env: the episodes run at collect (nothing is posted ahead)
} rl_rollout_job_t;

// Takes P prompts in the run's data order and posts their generation (with an env: nothing is
// posted; the episodes run at collect, with the weights the samplers hold then) (G completions
// each, seeded by (run.seed, step), with the weights version the samplers will hold: run->version)
// without waiting. On failure the data order is left where it was. Free with rl_rollout_job_free.
int rl_rollout_post(rl_run_t *run, const rl_rollout_data_t *d, int P, int G, int64_t step,
                    rl_rollout_job_t *job, char *err, size_t err_len);
// Waits for a posted generation and fills t's prompts and completions (t->idx is taken from the
// job). The job is still the caller's to free.
int rl_rollout_collect(rl_run_t *run, rl_rollout_job_t *job, rl_rollout_t *t, char *err,
                       size_t err_len);
void rl_rollout_job_free(rl_rollout_job_t *job);

// 1. takes P prompts in the run's data order (t->idx); 2. the samplers generate G completions of
// each at the recipe's temperature, seeded by (run.seed, step + 1). On failure the data order is
// left where it was.
int rl_rollout_generate(rl_run_t *run, const rl_rollout_data_t *d, int P, int G, rl_rollout_t *t,
                        char *err, size_t err_len);

// The episodes of t's P prompts (rows t->idx of `prompts`) x G (env:; rl_rollout_env.c): each
// one reset by the environment with its row and seed mix(seed, j), then turns of the run's
// samplers (at `temperature`, sampling seed `seed`) and steps of the environment until done or a
// limit (env.max_turns, env.max_tokens); t->eps and t->gen are filled (finish 1 = truncated).
// Errors name the environment, the step (eval: the evaluation after it) and the episode.
int rl_rollout_episodes(rl_run_t *run, const rl_prompts_t *prompts, rl_rollout_t *t,
                        double temperature, uint64_t seed, int64_t step, int eval, char *err,
                        size_t err_len);
// The prompt completion j continues: its dataset prompt (row t->idx[j / G]), or its episode's
// first prompt. borrowed; valid while t and d are.
void rl_rollout_prompt(const rl_rollout_data_t *d, const rl_rollout_t *t, int j,
                       const int32_t **ids, int *len);
// env/turns (mean), env/turns_max, env/tool_calls, env/parse_errors, env/truncated (per
// episode), env/reward (the mean of the environment's rewards), timing/env. Nothing without an
// env.
void rl_rollout_env_metrics(rl_run_t *run, const rl_rollout_t *t);

// 3. the reward worker scores every reward of the recipe (t->raw; an episode's completion text
// is its whole transcript after the first prompt); t->total = the weighted sum
// of the rewards of nonzero weight (plus an episode's environment rewards) (a weight-0 reward is
// measured and logged, never trained on, and its NaN does not make the total NaN), plus DAPO's
// overlong shaping when algorithm.overlong_buffer > 0 (NaN when a reward of nonzero weight was
// unscorable). Errors name the reward and what happened (a timeout stops the reward worker).
int rl_rollout_score(rl_run_t *run, const rl_rollout_data_t *d, rl_rollout_t *t, char *err,
                     size_t err_len);

// The weighted total of each of m completions from each reward's raw scores (R, m): the rewards
// of nonzero weight (a weight-0 reward is measured, never in the total), no shaping; NaN when a
// reward of nonzero weight could not score it.
void rl_rollout_totals(const rl_recipe_t *r, const double *raw, int m, double *total);

// An evaluation's figures (docs/training.md, "Evaluation") over P prompts x n completions each
// (prompt-major): the mean total (eval/reward), each reward's mean over what it scored
// (eval/rewards/<name>/mean), the share of completions whose total reaches
// train.eval_pass_threshold (eval/accuracy) and of prompts with at least one (eval/pass@k).
typedef struct {
    double reward, accuracy, pass_at_k;
    double means[RL_RECIPE_MAX_REWARDS];
} rl_rollout_eval_t;
void rl_rollout_eval_stats(const rl_recipe_t *r, const double *raw, const double *total, int P,
                           int n, rl_rollout_eval_t *out);

// The (B,T) batch of the completions with keep[j] != 0 (NULL: all): prompt + completion ids,
// lengths, the loss mask (0 on truncated completions with algorithm.mask_truncated_completions)
// and the sampler's logprobs; denom from algorithm.loss_agg. Returns 0 or RL_ENOMEM.
int rl_rollout_batch(rl_run_t *run, const rl_rollout_data_t *d, rl_rollout_t *t, const int *keep);

// Per-token arrays of a batch, (B,T) in the batch's layout (any may be NULL).
typedef struct {
    const float *old;      // logπ_old
    const float *ref;      // reference logprobs
    const float *values;   // critic values at rollout time
    const float *adv;      // per-token advantages
    const float *rewards;  // per-token rewards (PPO)
    const double *seq_adv; // (n_res) sequence advantages, by completion index
} rl_rollout_extra_t;

// The step's records (every completion, kept or not) for the trajectory store, as `step`:
// pending = 1 writes them before the update (rl_traj_put_pending), 0 completes them
// (rl_traj_put_step). Per-token arrays are stored for the kept completions. RLCTL_FAULT=store
// fails the completing write (rl_fault.h: tests of a store that fails after the update).
int rl_rollout_store(rl_run_t *run, const rl_rollout_data_t *d, const rl_rollout_t *t, int64_t step,
                     const rl_rollout_extra_t *x, int pending, char *err, size_t err_len);

// The metrics of a rollout every sampling algorithm logs (TRL's names): reward, each reward's
// mean and std, completions/mean_length, min_length, max_length and clipped_ratio,
// sampler/logprob_gap (when old is given), learning_rate, num_tokens, epoch (call it after
// rl_run_advance), tokens/generated, tokens/trained. *reward_mean, *mean_len (may be
// NULL) get the mean total reward (NaN: none scorable) and the generated tokens.
void rl_rollout_metrics(rl_run_t *run, const rl_rollout_data_t *d, const rl_rollout_t *t,
                        const float *old, double lr, double *reward_mean, double *gen_tokens);

// The held-out evaluation: the eval prompts at the recipe's temperature and greedily, scored by
// the task's rule (math_answer against data.answer_field), with the same draws at every
// evaluation: eval/accuracy, eval/accuracy_greedy, eval/format_rate, timing/eval. No data.eval:
// *acc = *acc_greedy = NaN and nothing is logged.
int rl_rollout_evaluate(const rl_rollout_data_t *d, rl_run_t *run, double *acc, double *acc_greedy,
                        char *note, size_t note_len, char *err, size_t err_len);

// The recipe's keys of a rollout's shaping, which GRPO and PPO share (rl_recipe_algo_def_t.keys):
// mask_truncated_completions, overlong_buffer, overlong_penalty.
extern const rl_recipe_key_t rl_rollout_shaping_keys[];

#ifdef __cplusplus
}
#endif
#endif

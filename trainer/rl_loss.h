// rl_loss — the registry of training losses, looked up by name in both processes: the actor
// trains with the loss a train request names, the controller merges and logs what that loss
// reports. A loss is one definition (rl_loss_t): its name, how many rows make one of its groups
// (DPO's and reward models' pairs: 2), which inputs a train request must carry for it, its
// adapter (the function that runs rl_policy_step with its math as the callback, next to that
// math in trainer/rl_<loss>.c) and its statistics: an open list of (name, value) pairs that
// travels in the train reply and becomes metrics through the definitions below, so no struct of
// the protocol or the controller names a loss's statistics. Not the math (rl_grpo.c, rl_ppo.c,
// rl_pref.c, rl_loss_sft.c, rl_loss_gspo.c, rl_loss_cispo.c) and not the model (rl_policy).
#ifndef RL_LOSS_H
#define RL_LOSS_H

#include "rl_config.h"
#include "rl_metrics.h"
#include "rl_policy.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- statistics -------------------------------------------------------------------------------

// Bounds of a statistics list, checked by the train reply's decoder (a peer's list).
#define RL_LOSS_MAX_STATS 32    // statistics in one list
#define RL_LOSS_MAX_STAT_NAME 48 // bytes of a statistic's name: [a-z0-9_], 1..48

// How a statistic is merged: over the micro-batches of one update (the loss adds its shares),
// over the ranks of a mesh (each holds a share of the batch), and over the updates of one step
// (PPO's epochs x mini-batches, each its own train call).
typedef enum {
    RL_LOSS_SUM = 0,   // summed everywhere: a count or a sum a metric divides (tokens, kl)
    RL_LOSS_SHARE = 1, // summed over micro-batches and ranks (each adds its share of the
                       // update's value: the loss), averaged over a step's updates
    RL_LOSS_GLOBAL = 2 // the same on every rank already (the mesh's gradient norm): rank 0's
                       // value, averaged over a step's updates
} rl_loss_merge_t;

// One statistic a loss reports, and the metric it becomes (REFERENCE.md §6's names).
typedef struct {
    const char *name;      // in the train reply: "clip_low"
    rl_loss_merge_t merge;
    const char *metric;    // "clip_ratio/low_mean", or NULL: not logged (a divisor)
    const char *per;       // the statistic the metric divides by ("tokens", "pairs": 1 when it
                           // is not > 0), or NULL: the value itself (SHARE and GLOBAL: over the
                           // step's updates)
} rl_loss_stat_t;

// A list of statistics: names borrowed (a definition's, or a decoded reply's: valid as long as
// that message), values in the order written.
typedef struct {
    int n;
    int updates; // train replies merged into the list (1 for one reply)
    const char *name[RL_LOSS_MAX_STATS];
    double value[RL_LOSS_MAX_STATS];
} rl_loss_stats_t;

// Sets name = value (a new name is appended; `name` borrowed; valid as long as the list). The
// list holds at most RL_LOSS_MAX_STATS names: one more is a programmer error (aborts).
void rl_loss_stats_put(rl_loss_stats_t *s, const char *name, double value);
// The value of `name`: 1 and *value, or 0 when the list has none.
int rl_loss_stats_get(const rl_loss_stats_t *s, const char *name, double *value);

// ---- the definitions --------------------------------------------------------------------------

// The inputs of one update: a train request's fields (rl_proto_train_t); NULL when not sent.
typedef struct {
    int B, T;
    const int32_t *tokens;   // (B,T) right-padded rows
    const int *lengths;      // (B)
    const uint8_t *mask;     // (B,T) 1 on the tokens the loss looks at
    const double *adv;       // (B) sequence advantages
    const float *token_adv;  // (B,T) per-token advantages (PPO's GAE)
    const float *mu_logp;    // (B,T) the sampler's logprobs
    const float *ref_logp;   // (B,T) the reference's logprobs
    const float *old_logp;   // (B,T) logπ_old given (PPO's rollout policy)
    const float *values;     // (B,T) a critic's values at rollout time
    const float *returns;    // (B,T) the returns
    const double *ref_sum;   // (B) DPO: the reference's summed completion logprobs of each row
    const double *margin;    // (B) reward models: each pair's margin, on both of its rows
    double denom;            // the loss's global divisor (rl_grpo_batch_t.denom; SFT: tokens)
    double lr, temperature;
    int64_t step;            // the optimizer step this update makes (1-based; errors name it)
    int micro_batch;         // rows per forward (>= 1)
    int iterations;          // passes over the batch (>= 1)
} rl_loss_batch_t;

// What an update gives back.
typedef struct {
    float *old_logp;         // (B,T) caller's, or NULL: the first pass's logprobs (logπ_old;
                             // the given old_logp; 0 for losses that have none)
    int iterations;          // passes made
    rl_loss_stats_t stats;   // the loss's statistics (its definition's names)
} rl_loss_out_t;

typedef struct rl_loss rl_loss_t;

// The loss's adapter: one update of `model` (the actor's policy, or a model with a head) on b
// with the recipe's settings (the optimizer's max_grad_norm, the loss's knobs). Fills *out.
// Returns 0 or an error with err filled (the step made no update then).
typedef int (*rl_loss_train_fn)(const rl_loss_t *self, rl_policy_t *model, const rl_recipe_t *r,
                                const rl_loss_batch_t *b, rl_loss_out_t *out, char *err,
                                size_t err_len);

// The inputs a request must carry for a loss (rl_loss_t.needs).
enum {
    RL_LOSS_NEEDS_ADV = 1u << 0,       // adv or token_adv
    RL_LOSS_NEEDS_TOKEN_ADV = 1u << 1, // token_adv
    RL_LOSS_NEEDS_OLD = 1u << 2,       // old_logp
    RL_LOSS_NEEDS_VALUES = 1u << 3,    // values and returns
    RL_LOSS_NEEDS_REF_SUM = 1u << 4,   // ref_sum
};

// Which model a loss trains.
typedef enum {
    RL_LOSS_POLICY = 0, // the actor's policy (a reward model is one: its policy has a head)
    RL_LOSS_CRITIC = 1  // PPO's critic (its own worker, or the one the actor holds)
} rl_loss_model_t;

struct rl_loss {
    const char *name;             // the train request's `loss`
    int rows;                     // rows of one group: micro-batches and mesh ranks keep
                                  // groups whole (1, or 2 for pairs)
    unsigned needs;               // RL_LOSS_NEEDS_*
    rl_loss_model_t model;
    int policy_loss;              // 1: a choice of the recipe's algorithm.policy_loss
    int no_dual_clip;             // 1: algorithm.dual_clip does not apply to it (a recipe that
                                  // sets one with it is refused)
    rl_loss_train_fn train;
    const void *impl;             // the adapter's own table, or NULL (GRPO's family: its
                                  // per-micro-batch math, rl_grpo.h)
    const rl_loss_stat_t *stats;  // the statistics it reports, in metric order; ends with {0}
    const char *doc;              // one line: what it is
};

// The loss of that name, or NULL. borrowed; valid until program exit.
const rl_loss_t *rl_loss_find(const char *name);
// The registry in order: n with *all set. borrowed; valid until program exit.
int rl_loss_all(const rl_loss_t *const **all);
// Writes the names of the losses with policy_loss set (policy = 1) or of every loss (policy =
// 0), joined by ", ", into out (truncated to cap - 1 bytes). Returns out.
const char *rl_loss_names(int policy, char *out, size_t cap);

// ---- merging and metrics ----------------------------------------------------------------------

// Merges the statistics of one more train reply of the same update split over mesh ranks
// (rank 0's first, then each other rank's in rank order): SUM and SHARE add, GLOBAL keeps
// rank 0's. Returns 0, or RL_EPROTO when x lacks a statistic acc has.
int rl_loss_stats_merge_rank(const rl_loss_t *self, rl_loss_stats_t *acc,
                             const rl_loss_stats_t *x);
// Adds the statistics of one more update of a step (acc starts zeroed: n = 0): every value of a
// statistic self defines is summed from 0 (names: the definition's, so acc outlives x) and
// acc->updates counts the replies, so that SHARE and GLOBAL statistics become means over the
// updates in rl_loss_metrics. Returns 0, or RL_EPROTO when the replies disagree on their names.
int rl_loss_stats_merge_update(const rl_loss_t *self, rl_loss_stats_t *acc,
                               const rl_loss_stats_t *x);

// The value of metric `metric` of the list as self defines it (the statistic over its `per`,
// SHARE and GLOBAL over updates), or NaN when the list lacks it.
double rl_loss_metric(const rl_loss_t *self, const rl_loss_stats_t *s, const char *metric);
// Adds every metric of self's definitions whose statistic the list holds, in definition order,
// as prefix + metric (prefix "" or "eval/") into mt.
void rl_loss_metrics(const rl_loss_t *self, const rl_loss_stats_t *s, const char *prefix,
                     rl_metrics_t *mt);

// The recipe's KL coefficient algorithm.beta (GRPO, PPO; DPO's temperature), one key that
// several algorithms list (rl_recipe_algo_def_t.keys).
extern const rl_recipe_key_t rl_loss_beta_keys[];

#ifdef __cplusplus
}
#endif
#endif

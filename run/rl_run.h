// rl_run — what an algorithm sees of a run: the recipe, the run's counters (step, policy version,
// data order, RNG, tokens), its store and metrics, and typed calls on the role groups (generate
// over the samplers, score, logprobs of the actor or the reference, train, weight sync,
// evaluation by sampling). The controller (rl_controller) owns the run's lifecycle and fills
// this in; an algorithm file (rl_algo_*.c) reads and calls it. Internal to run/ and algorithms/: the struct is
// open so that an algorithm reads like its paper (`run->r->algorithm.beta`, `run->step`).
#ifndef RL_RUN_H
#define RL_RUN_H

#include "rl_chat.h"
#include "rl_config.h"
#include "rl_data.h"
#include "rl_group.h"
#include "rl_metrics.h"
#include "rl_optim.h"
#include "rl_proto.h"
#include "rl_rng.h"
#include "rl_tokenizer.h"
#include "rl_traj.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_RUN_MAX_RANKS 256

// A role as a group of ranks: "sampler/0" .. "sampler/<n-1>"; n = 0 when the run has none.
typedef struct {
    const char *role;
    int n;
    char names[RL_RUN_MAX_RANKS][32];
} rl_run_group_t;

typedef struct rl_run {
    const rl_recipe_t *r;
    const char *run_dir;
    rl_group_t *g;
    rl_run_group_t actor, samplers, reward, reference; // reference.n = 0: the actor serves it
    rl_run_group_t critic;         // n = 0: no critic; the actor's names when critic_in_actor
    int critic_in_actor;           // 1: the critic is the actor's second model (part "critic")
    rl_tokenizer_t *tok;
    int32_t vocab;                 // config.json's vocab_size: sampled ids are below it
    rl_traj_t *traj;               // the trajectory store (NULL: the algorithm stores nothing)
    rl_metrics_t *metrics;
    rl_data_sampler_t *order;      // the training data's order (its position is checkpointed)
    rl_sched_t sched;
    rl_rng_t rng;                  // the trainer's stream (checkpointed)
    int64_t step;                  // optimizer steps done
    int64_t version;               // the weights version the samplers hold
    unsigned char sampler_out[RL_RUN_MAX_RANKS]; // 1: a remote sampler that left the run
    int samplers_dropped;                        // how many left
    double sampler_speed[RL_RUN_MAX_RANKS];      // tokens/s of each (roles.balance: speed)
    int64_t num_tokens;            // tokens trained on so far
    int64_t n_trainable;           // size of the actor's trainable flat view
    int actor_consistent;          // the actor's weights/optimizer are those of `step` (0 from
                                   // a train call until rl_run_advance)
    rl_data_pos_t trained;         // the data order's position after the examples the actor
                                   // has trained on: when a step fails the controller takes the
                                   // order back here (the step's examples, and any taken ahead
                                   // of it, are taken again on resume)
    int32_t stop_ids[64];          // the tokenizer's EOS and one-token sampling.stop strings
    int n_stop;
    const char *stop_str[64];      // sampling.stop strings of several tokens (cut afterwards)
    int n_stop_str;
    double deadline;               // > 0: no call may wait past this monotonic time
    int max_new;                   // > 0: generate calls posted now ask for at most this many
                                   // new tokens (an episode's turn); 0: sampling.max_new_tokens
    struct rl_env_host *env;       // the recipe's environment (env:), or NULL
    unsigned char sync_ipc[RL_RUN_MAX_RANKS]; // 1: sampler k takes weights through CUDA IPC
    int sync_planned;                         // sync_ipc is decided (at the first sync)
    int ipc_inflight; // IPC loads posted, not collected: the actor may not train
} rl_run_t;

// The tokenizer of a run, loaded as the controller loads it: the folder of model.tokenizer when
// that is a tokenizer.json (so that tokenizer_config.json's special tokens come along), else the
// file alone. NULL with err naming model.tokenizer (the recipe's line) on failure. caller owns
// result; free with rl_tokenizer_destroy.
rl_tokenizer_t *rl_run_tokenizer(const rl_recipe_t *r, char *err, size_t err_len);

// The chat template a recipe renders messages with: model.chat_template when it names a built-in;
// `auto`: the model's own, found by rl_chat_model_source in the folder of model.tokenizer
// (tokenizer_config.json's chat_template, else chat_template.jinja), with tokenizer_config.json's
// bos/eos tokens and data.chat_template_kwargs
// (RL_CHAT_NONE when there is none, or it does not compile: a warning says why, and a
// conversational row then says there is no template); `none`: RL_CHAT_NONE.
rl_chat_format_t rl_run_chat_format(const rl_recipe_t *r);

// ---- calls ------------------------------------------------------------------------------------

// A fresh request id.
uint64_t rl_run_id(rl_run_t *run);

// The actor took the step's update: run->step + 1, the actor consistent again, `tokens` more
// trained on, and the data order's examples up to `through` trained on (NULL: up to the order's
// position now; an algorithm that takes examples ahead of its steps passes where those begin).
void rl_run_advance(rl_run_t *run, int64_t tokens, const rl_data_pos_t *through);
// Sends req (taken) to rank `rank` of group `grp` and waits for its reply (caller owns *reply;
// free with rl_msg_free) up to timeout_s (shortened by run->deadline). Returns 0 or an error
// naming the worker; *timed_out (may be NULL) as rl_group_call.
int rl_run_call(rl_run_t *run, const rl_run_group_t *grp, int rank, rl_msg_t *req,
                rl_msg_t **reply, double timeout_s, int *timed_out, char *err, size_t err_len);

// The same request to every rank of grp (reqs[i] to rank i, taken, each built with its own id):
// the ranks of a mesh (actor, or a critic it holds) all take every call. Waits for every reply;
// *reply gets rank 0's (caller owns; free with rl_msg_free). Errors name the worker at fault.
int rl_run_call_all(rl_run_t *run, const rl_run_group_t *grp, rl_msg_t **reqs, rl_msg_t **reply,
                    double timeout_s, char *err, size_t err_len);

// Completions of one generate call over the samplers, prompt-major (result p*n + s).
typedef struct {
    int n_res;
    int32_t *lens;  // (n_res)
    int64_t *off;   // (n_res) start in ids/lp
    int32_t *ids;   // (sum lens)
    float *lp;      // (sum lens)
    uint8_t *fin;   // (n_res) 0 stop, 1 length
    uint8_t *cut;   // (n_res) 1: ended by a stop string (sampling.stop), not a stop token
    int32_t *who;   // (n_res) the sampler (rank in run->samplers) that generated it
    int64_t *ver;   // (n_res) the weights version that generated it (a share regenerated after
                    // a remote sampler failed asks for the version the others hold then)
    int64_t prefill, decode;
} rl_run_gen_t;
void rl_run_gen_free(rl_run_gen_t *g);

// One prompt to sample from.
typedef struct {
    const int32_t *ids;
    int len;
    int64_t index;  // its dataset row: seeds its RNG streams
    int64_t session; // an episode's turn: the sampler's session key (0: none; sample s is kept
                     // under session + s, and the prompt reuses what its key kept)
} rl_run_prompt_t;

// Generates n completions of each of prompts[0..P) with the samplers' weights (version
// run->version): contiguous shares over the first `samplers` samplers (0: all) still in the run,
// even or by measured speed (roles.balance); a remote sampler whose request fails (lost,
// refused, timed out, a reply that fails the checks) leaves the run with a warning and its
// prompts go to the others (a local one's failure ends the call, as any worker's); every reply
// checked (rl_proto, then ids below the vocabulary, lengths, finish codes, logprobs), multi-token
// stop strings cut. Sampling from the recipe: temperature as given (0 = greedy: top_p 1, top_k
// 0), max_new_tokens, the run's stop ids. caller owns *out; free with rl_run_gen_free.
int rl_run_generate(rl_run_t *run, const rl_run_prompt_t *prompts, int P, int n,
                    double temperature, uint64_t seed, int samplers, rl_run_gen_t *out,
                    char *err, size_t err_len);
// How m prompts are split into contiguous shares over the samplers ks[0..na): sampler ks[j] gets
// [bounds[j], bounds[j+1]). roles.balance even: m*j/na; speed: in proportion to
// run->sampler_speed (the measured tokens/s; a sampler not measured yet counts as the mean of
// those that are, and all equal when none is).
void rl_run_split(const rl_run_t *run, int m, int na, const int *ks, int *bounds);

// The same in two halves, so that generation overlaps other work (asynchronous rollouts):
// post sends the first round of requests (the weights version asked for is run->version now) and
// returns at once; collect waits for the replies (and regenerates a failed remote sampler's share
// on the others) and fills *out as rl_run_generate does. The prompts' ids must stay valid until
// the job is freed. caller owns *job_p; free with rl_run_genjob_free (after collect, or to
// abandon it: late replies are then dropped with a warning).
typedef struct rl_run_genjob rl_run_genjob_t;
int rl_run_generate_post(rl_run_t *run, const rl_run_prompt_t *prompts, int P, int n,
                         double temperature, uint64_t seed, int samplers, rl_run_genjob_t **job_p,
                         char *err, size_t err_len);
int rl_run_generate_collect(rl_run_t *run, rl_run_genjob_t *job, rl_run_gen_t *out, char *err,
                            size_t err_len);
void rl_run_genjob_free(rl_run_genjob_t **job_p);
// The weights version a job asked for (its first round; -1 for no job); when its last reply
// came (monotonic seconds; 0 before collect or for no job).
int64_t rl_run_genjob_version(const rl_run_genjob_t *job);
double rl_run_genjob_done(const rl_run_genjob_t *job);
// Before collect: when its last reply came as filed so far (0: some are still out, or no job).
double rl_run_genjob_done_now(rl_run_t *run, const rl_run_genjob_t *job);

// The text of completion j without its stop token (a stop string cut), ids the tokenizer does
// not know left out. caller owns *text_p; free with free().
int rl_run_completion_text(rl_run_t *run, const rl_run_gen_t *g, int j, char **text_p,
                           size_t *len_p);

// The actor's trainable weights (export_weights). caller owns *w_p; free with free().
int rl_run_export(rl_run_t *run, float **w_p, int64_t *n_p, char *err, size_t err_len);
// Whether the next sync sends weights through host memory to some sampler (roles.weight_sync
// and where the samplers are): then it needs the actor's weights on the host (a train request's
// want_weights, or rl_run_export); 0 when every sampler copies them from the actor's GPU.
int rl_run_sync_needs_host(rl_run_t *run);
// Sends weights (n floats: the actor's trainable view; NULL when !rl_run_sync_needs_host) to
// every sampler as version run->version. Returns 0 or an error naming the sampler.
int rl_run_sync(rl_run_t *run, const float *weights, int64_t n, char *err, size_t err_len);
// rl_run_export when needed, then rl_run_sync: the actor's current weights to every sampler.
int rl_run_sync_actor(rl_run_t *run, char *err, size_t err_len);
// How: a sampler on a GPU that can reach the actor's (roles.weight_sync: auto or ipc) copies
// the actor's device array device to device (CUDA IPC: the actor's publish_weights handle, one
// load_weights each); the others get the weights in buckets of roles.sync_bucket_mb (one message
// each, in order; a sampler holds the version once the last bucket has landed and refuses to
// generate meanwhile). With auto, a sampler whose IPC load fails is warned about and takes the
// weights through host memory from then on (this sync too).
// The same in two halves: post queues the weights behind whatever each sampler is doing (a
// sampler serves requests in order, so a generation posted later sees them); collect waits for
// the replies (a remote sampler that failed leaves the run, as in rl_run_sync). While IPC loads
// are posted and not collected the actor must not train (rl_run_train refuses).
typedef struct {
    int na;                   // samplers taking buckets
    int ks[RL_RUN_MAX_RANKS]; // their ranks
    int nb;                   // buckets (roles.sync_bucket_mb each) per sampler
    uint64_t *ids;            // (nb x na) the requests in flight; freed by collect
    int ni;                   // samplers copying through CUDA IPC
    int ki[RL_RUN_MAX_RANKS]; // their ranks
    uint64_t ii[RL_RUN_MAX_RANKS]; // their requests in flight
} rl_run_syncjob_t;
int rl_run_sync_post(rl_run_t *run, const float *weights, int64_t n, rl_run_syncjob_t *job,
                     char *err, size_t err_len);
int rl_run_sync_collect(rl_run_t *run, rl_run_syncjob_t *job, char *err, size_t err_len);

// logp (B,T) of tokens: the policy (the actor), or the reference (reference = 1: the reference
// worker, or the actor with adapters disabled) at `temperature`. logp: caller's (B*T floats).
int rl_run_logprobs(rl_run_t *run, int reference, const int32_t *tokens, const int32_t *lengths,
                    int64_t B, int64_t T, double temperature, float *logp, char *err,
                    size_t err_len);

// values (B,T) of the critic (rl_head.h's alignment: column t is the value of the state before
// token t). values: caller's (B*T floats).
int rl_run_values(rl_run_t *run, const int32_t *tokens, const int32_t *lengths, int64_t B,
                  int64_t T, float *values, char *err, size_t err_len);

// scores (B) of a reward model (rank 0 of grp: the actor of algorithm rm): the head at each row's
// last real token. scores: caller's (B floats).
int rl_run_scores(rl_run_t *run, const rl_run_group_t *grp, const int32_t *tokens,
                  const int32_t *lengths, int64_t B, int64_t T, float *scores, char *err,
                  size_t err_len);

// Sends a train request to grp (the actor, or the critic) and decodes its reply into *x, checking
// its shape against (B,T) (and the weights when want_weights). On a mesh each rank gets its rows
// (the loss's groups whole: DPO's and RM's pairs) and the replies are merged into one: the
// statistics as the loss defines (rl_loss_stats_merge_rank), logπ_old in row order, rank 0's
// weights. *rep holds the views of *x (caller owns;
// free with rl_msg_free). Errors name the worker. The actor is not consistent with run->step
// from here until rl_run_advance (a rescue checkpoint is not written in between).
int rl_run_train(rl_run_t *run, const rl_run_group_t *grp, const rl_proto_train_t *q,
                 rl_proto_train_reply_t *x, rl_msg_t **rep, char *err, size_t err_len);

// The metrics of the train reply x of loss `loss` (every statistic its definition turns into a
// metric, in its order: rl_loss_metrics) into run->metrics.
void rl_run_loss_metrics(rl_run_t *run, const char *loss, const rl_proto_train_reply_t *x);
// The value of one of those metrics (NaN when the reply has none): a progress note's numbers.
double rl_run_loss_metric(const char *loss, const rl_proto_train_reply_t *x, const char *metric);

// Accuracy of `answers` (normalised reference answers, one per prompt) on prompts[0..P) at
// `temperature` (0 = greedy), one sample each, scored by the task's math rule; *fmt the share of
// completions with a final answer, *mean_len (may be NULL) their mean length in tokens. One
// sample of prompt i is result i: answers[i] scores it.
int rl_run_eval_accuracy(rl_run_t *run, const rl_run_prompt_t *prompts, char *const *answers,
                         int P, double temperature, uint64_t seed, int samplers, double *acc,
                         double *fmt, double *mean_len, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

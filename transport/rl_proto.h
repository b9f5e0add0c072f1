// rl_proto — the role protocol's messages as typed structs (docs/protocol.md is the reference
// for the bytes): every verb, its request and its reply fields, with one encode and one decode
// per message. No field name of a message appears outside this module: the controller, the
// algorithms and the workers fill and read these structs. Not the transport (rl_chan), not the
// msgpack codec (rl_wire), not the processes (rl_group).
//
// The messages (? = optional; [..] = tensor shape; "strs" = a list of strings):
//
//  verb            from -> to            request fields                     reply fields
//  hello           worker -> ctl         role rank pid token caps error?    (op "welcome", id 0)
//  hb              worker -> ctl         token                              (none)
//  configure       ctl -> every worker   recipe threads                     (none)
//  shutdown        ctl -> every worker   —                                  —
//  load_weights    ctl -> sampler        version kind weights[n]            version
//  generate        ctl -> sampler        version prompts[N] prompt_lens[P]  lens[R] ids[M]
//                                        prompt_index[P] n max_new_tokens   logprobs[M] finish[R]
//                                        temperature top_p top_k seed       prefill_tokens
//                                        stop_ids[S]?                       decode_tokens
//  logprobs        ctl -> actor,         tokens[B,T] lengths[B] adapter?    logp[B,T]
//                         reference      temperature
//  train           ctl -> actor, critic  loss step lr temperature           old_logp[B,T]
//                                        tokens[B,T] lengths[B] mask[B,T]   stat_names(strs)
//                                        adv[B]? token_adv[B,T]?            stats[k] iterations
//                                        mu_logp[B,T]? ref_logp[B,T]?       weights[n]?
//                                        denom micro_batch iterations
//                                        want_weights?
//  export_weights  ctl -> actor          —                                  kind weights[n]
//  save            ctl -> actor          dir                                model_train_step
//                                                                           n_trainable
//  load            ctl -> actor          dir model_train_step?              model_train_step
//                                                                           n_trainable
//  save_final      ctl -> actor          dir bf16? pad_token_id?            —
//  score           ctl -> reward         reward prompts(strs)               scores[n]
//                                        completions(strs) rows(strs)
//                                        ids[M] lens[n]
//  attach          ctl -> remote sampler session model_hash               session pid host
//                                        run                                threads needs_model?
//  model_file      ctl -> remote sampler name offset total data[n] last?   (none) needs_model?
//  model_file      ctl -> remote sampler name offset total data[n] last?   (none)
//  values          ctl -> critic         tokens[B,T] lengths[B] scores?     values[B,T]
//                                                                           (scores: [B,1])
//
// train's `loss` names a loss of the registry (trainer/rl_loss.h), which says which of the
// optional inputs it needs: old_logp[B,T]? (the given logπ_old), values[B,T]? returns[B,T]? (a
// critic's), ref_sum[B]? (DPO's reference sums), margin[B]? (a reward model's pair margins, on
// both rows of a pair), and whether rows come in pairs. The reply's statistics are that loss's
// open list: stat_names (k names) and stats (f64 [k]), in its order; the controller merges and
// logs them through the loss's definitions, so no field of this module names them. save, load
// and save_final carry part? ("policy" or "critic": the actor holds the critic with
// roles.critic: actor). A reward model (algorithm rm) is an actor whose policy has a score head:
// values with scores.
//
// A reply is op "reply" with the request's id, `ok` and, when ok is false, `error`; an ok reply
// carries the verb's reply fields. Decoders check every field's presence, type, dtype and rank,
// that tensors sharing a dimension agree (tokens and mask are both [B,T]), and each verb's own
// consistency (prompt_lens add up to at most the prompts, lengths within T, ...); they name the
// verb and the field in err. Decoded pointers are views into the message: borrowed; valid
// until the message is freed. Encoders copy every field into the new message.
#ifndef RL_PROTO_H
#define RL_PROTO_H

#include "rl_loss.h"
#include "rl_wire.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RL_PROTO_HELLO = 0,
    RL_PROTO_HB,
    RL_PROTO_CONFIGURE,
    RL_PROTO_SHUTDOWN,
    RL_PROTO_LOAD_WEIGHTS,
    RL_PROTO_GENERATE,
    RL_PROTO_LOGPROBS,
    RL_PROTO_TRAIN,
    RL_PROTO_EXPORT_WEIGHTS,
    RL_PROTO_SAVE,
    RL_PROTO_LOAD,
    RL_PROTO_SAVE_FINAL,
    RL_PROTO_SCORE,
    RL_PROTO_VALUES,
    RL_PROTO_ATTACH,
    RL_PROTO_MODEL_FILE,
    RL_PROTO_N_VERBS
} rl_proto_verb_t;

// The op string of a verb ("generate"). borrowed; valid until program exit.
const char *rl_proto_verb_name(rl_proto_verb_t verb);
// The verb of an op string, or -1 when it is none of ours.
int rl_proto_verb_of(const char *op);

// ---- hello, hb, configure ---------------------------------------------------------------------

typedef struct {
    const char *role;         // "actor", "sampler", "reward", "reference"
    int64_t rank;
    int64_t pid;
    const char *token;        // the run's token from the worker's secret
    const char *const *caps;  // the verbs it serves (op names)
    int n_caps;
    const char *error;        // NULL, or why its setup failed
    const char *host;         // NULL, or its host name (a rank of a mesh across hosts)
} rl_proto_hello_t;

typedef struct {
    const char *token;
} rl_proto_hb_t;

typedef struct {
    const char *recipe;       // the resolved recipe as YAML text (rl_recipe_to_yaml)
    size_t recipe_len;        // 0 on encode: strlen(recipe)
    int64_t threads;          // the worker's compute threads (0 = every core)
} rl_proto_configure_t;

// ---- remote samplers (rlctl sampler serve) ----------------------------------------------------
// A remote sampler serves one run at a time: the controller's `attach` opens a session; every
// later request and every reply carries the session's token in `session` (rl_proto_session_*);
// `shutdown` ends the session, not the process.

typedef struct {
    const char *session;    // the run's session token (64 hex)
    const char *model_hash; // rl_refcache_hash_model of the run's model.path, 16 hex digits
    const char *run;        // the run's name and host, for the sampler's log
} rl_proto_attach_t;

typedef struct {
    const char *session; // echoed
    int64_t pid;         // the sampler's process id
    const char *host;    // its host name
    int64_t threads;     // its compute threads (0 = every core)
    int needs_model;     // optional (default 0): 1 = it has no copy of the run's model: send it
                         // (model_file) before configure
} rl_proto_attach_reply_t;

// One piece of a model folder's file for a remote sampler that has none (ctl -> remote
// sampler): data lands at offset of the file `name` (a plain file name) of total bytes; `last`
// marks the transfer's final message, after which the sampler checks the folder's fingerprint
// against the session's model_hash. Reply: no fields.
typedef struct {
    const char *name;
    int64_t offset, total;
    const uint8_t *data; // u8 [n]
    int64_t n;
    int last; // optional (default 0)
} rl_proto_model_file_t;

// Adds the session token to a message (a request to, or a reply from, a remote sampler).
// Returns 0 or RL_ENOMEM.
int rl_proto_session_set(rl_msg_t *m, const char *session);
// 1 when m carries `session` equal to the given token (compared in constant time).
int rl_proto_session_is(const rl_msg_t *m, const char *session);

// ---- sampler ----------------------------------------------------------------------------------

typedef struct {
    int64_t version;          // the weights version these are
    const char *kind;         // "lora" (the adapter only) or "full"
    const float *weights;     // f32 [n]: the model's trainable flat view (or a bucket of it)
    int64_t n;
    int64_t offset; // optional (default 0): where this bucket starts in the view
    int64_t total;  // optional (default -1; <= 0 means n): the view's size; the
                    // version is held once the bucket that ends at total has arrived
} rl_proto_load_weights_t;

typedef struct {
    int64_t version;          // the version now held
} rl_proto_load_weights_reply_t;

typedef struct {
    int64_t version;          // the weights version the sampler must hold
    const int32_t *prompts;   // i32 [n_prompt_ids]: the prompts' ids, concatenated
    int64_t n_prompt_ids;
    const int32_t *prompt_lens;  // i32 [P]
    const int64_t *prompt_index; // i64 [P]: each prompt's dataset row (seeds its RNG streams)
    int64_t P;
    int64_t n;                // samples per prompt, 1..4096
    int64_t max_new_tokens;   // 1..2^20
    double temperature, top_p;
    int64_t top_k, seed;
    const int32_t *stop_ids;  // i32 [n_stop] or NULL: the ids that end a completion
    int64_t n_stop;
} rl_proto_generate_t;

typedef struct {
    const int32_t *lens;      // i32 [n_res]: completion lengths, prompt-major (p * n + s)
    const uint8_t *finish;    // u8 [n_res]: 0 stop, 1 length
    int64_t n_res;
    const int32_t *ids;       // i32 [n_ids]: the completions' ids, concatenated
    const float *logprobs;    // f32 [n_ids]: the sampler's logprob of each
    int64_t n_ids;
    int64_t prefill_tokens, decode_tokens;
} rl_proto_generate_reply_t;

// ---- actor and reference ----------------------------------------------------------------------

typedef struct {
    const int32_t *tokens;    // i32 [B,T], right-padded
    const int32_t *lengths;   // i32 [B], each 1..T
    int64_t B, T;
    int adapter;              // 0: the reference (LoRA disabled / frozen base); default 1
    double temperature;       // logprobs of logits / temperature
} rl_proto_logprobs_t;

typedef struct {
    const float *logp;        // f32 [B,T]: logp of token t+1 at column t+1 (column 0 is 0)
    int64_t B, T;
} rl_proto_logprobs_reply_t;

typedef struct {
    const char *loss;         // a loss of the registry (rl_loss_find): which inputs it needs,
                              // how its rows group, what it trains and reports
    int64_t step;             // the optimizer step this update makes (1-based)
    double lr;
    double temperature;     // the forward's (the sampling temperature; SFT: 1)
    const int32_t *tokens;  // i32 [B,T]
    const int32_t *lengths; // i32 [B], each 1..T
    const uint8_t *mask;    // u8 [B,T]: 1 = a completion token trained on
    const double *adv;      // f64 [B] or NULL (SFT; or token_adv): sequence advantages
    const float *token_adv; // f32 [B,T] or NULL: per-token advantages (PPO's GAE)
    const float *mu_logp;   // f32 [B,T] or NULL: the sampler's logprobs (TIS, the gap metric)
    const float *ref_logp;  // f32 [B,T] or NULL: the reference's (beta > 0)
    const float *old_logp;  // f32 [B,T] or NULL: logπ_old given (ppo: the rollout policy's)
    const float *values;    // f32 [B,T] or NULL: value: the critic's values at rollout time
    const float *returns;   // f32 [B,T] or NULL: value: the returns (GAE's)
    const double *ref_sum;  // f64 [B] or NULL: dpo: the reference's summed completion
                            // logprobs of each row (rows in pairs: chosen, rejected)
    const double *margin;   // f64 [B] or NULL: rm: each pair's margin (TRL's column), on
                            // both of its rows
    int64_t B, T;
    double denom;             // the loss's global denominator (GRPO: loss_agg's; SFT: the
                              // step's loss tokens)
    int64_t micro_batch;      // rows per forward/backward
    int64_t iterations;       // passes over the batch (num_iterations)
    int want_weights;         // 1 (default): the reply carries the updated weights
} rl_proto_train_t;

typedef struct {
    const float *old_logp;    // f32 [B,T]: logπ_old from the first forward (0 for a loss
                              // without one)
    int64_t B, T;
    // the loss's statistics (rl_loss_stats_t): n_stats names (at most RL_LOSS_MAX_STATS, each
    // 1..RL_LOSS_MAX_STAT_NAME bytes of [a-z0-9_], no repeats) and their values, in its order
    const char *const *stat_names;
    const size_t *stat_lens;  // decoded: their lengths; NULL to encode NUL-terminated names
    int n_stats;
    const double *stats;      // f64 [n_stats]
    int64_t iterations;       // passes made
    const float *weights; // f32 [n] or NULL (not asked for): the updated trainable weights
    int64_t n;
} rl_proto_train_reply_t;

typedef struct {
    const char *kind;         // "lora" or "full"
    const float *weights;     // f32 [n]
    int64_t n;
} rl_proto_export_weights_reply_t;

typedef struct {
    const char *dir;          // save: a checkpoints/step-N.tmp folder; load: a checkpoint
    int64_t model_train_step; // load: the dropout-mask counter to restore (default 0)
    const char *part;         // NULL or "policy" (default), or "critic": which model of a
                              // worker that holds both (the actor with roles.critic: actor)
} rl_proto_save_t;

typedef struct {
    int64_t model_train_step; // the model's count of training forwards
    int64_t n_trainable;      // the size of its trainable flat view (kept in state.json)
} rl_proto_save_reply_t;

typedef struct {
    const char *dir;      // final.tmp
    int bf16;             // full tuning: write BF16 (default 0: F32)
    const char *part;     // as rl_proto_save_t's
    int64_t pad_token_id; // a model with a head: the pad id its sequence-classification
                          // config.json names (default -1: null)
} rl_proto_save_final_t;

// ---- critic -----------------------------------------------------------------------------------

typedef struct {
    const int32_t *tokens;    // i32 [B,T], right-padded
    const int32_t *lengths;   // i32 [B], each 1..T
    int64_t B, T;
    int scores; // 1: each row's score (the head at its last real token): values
                // [B,1] (a reward model); 0 (default): per-token values [B,T]
} rl_proto_values_t;

typedef struct {
    const float *values;      // f32 [B,T]: aligned like logprobs (column t: the state before
                              // token t; 0 at column 0 and at padding)
    int64_t B, T;
} rl_proto_values_reply_t;

// ---- reward -----------------------------------------------------------------------------------

typedef struct {
    int64_t reward;           // index into the recipe's rewards
    const char *const *prompts, *const *completions, *const *rows; // n strings each
    const size_t *prompt_lens, *completion_lens, *row_lens;
    int n;
    const int32_t *ids;       // i32 [n_ids]: the completions' ids, concatenated
    int64_t n_ids;
    const int32_t *lens;      // i32 [n]
} rl_proto_score_t;

typedef struct {
    const double *scores;     // f64 [n]; NaN = unscorable
    int64_t n;
} rl_proto_score_reply_t;

// ---- encode and decode ------------------------------------------------------------------------
// Encoders: a new message of the verb's op (a reply: op "reply", ok = true) with id `id` and the
// struct's fields copied in. caller owns *out; free with rl_msg_free. Return 0, or RL_ENOMEM /
// RL_EINVAL (a field the wire cannot hold) with err filled.
// Decoders: the fields of msg into *out (views into msg) after the checks above. Return 0 or
// RL_EPROTO with err naming the verb and the field ("train: missing tensor 'mask'").

#define RL_PROTO_CODEC(name, type)                                                             \
    int rl_proto_##name##_encode(const type *m, uint64_t id, rl_msg_t **out, char *err,         \
                                 size_t err_len);                                              \
    int rl_proto_##name##_decode(const rl_msg_t *msg, type *out, char *err, size_t err_len);

RL_PROTO_CODEC(hello, rl_proto_hello_t)
RL_PROTO_CODEC(hb, rl_proto_hb_t)
RL_PROTO_CODEC(configure, rl_proto_configure_t)
RL_PROTO_CODEC(load_weights, rl_proto_load_weights_t)
RL_PROTO_CODEC(load_weights_reply, rl_proto_load_weights_reply_t)
RL_PROTO_CODEC(generate, rl_proto_generate_t)
RL_PROTO_CODEC(generate_reply, rl_proto_generate_reply_t)
RL_PROTO_CODEC(logprobs, rl_proto_logprobs_t)
RL_PROTO_CODEC(logprobs_reply, rl_proto_logprobs_reply_t)
RL_PROTO_CODEC(train, rl_proto_train_t)
RL_PROTO_CODEC(train_reply, rl_proto_train_reply_t)
RL_PROTO_CODEC(export_weights_reply, rl_proto_export_weights_reply_t)
RL_PROTO_CODEC(save, rl_proto_save_t)
RL_PROTO_CODEC(save_reply, rl_proto_save_reply_t)
RL_PROTO_CODEC(load, rl_proto_save_t)
RL_PROTO_CODEC(load_reply, rl_proto_save_reply_t)
RL_PROTO_CODEC(save_final, rl_proto_save_final_t)
RL_PROTO_CODEC(score, rl_proto_score_t)
RL_PROTO_CODEC(score_reply, rl_proto_score_reply_t)
RL_PROTO_CODEC(values, rl_proto_values_t)
RL_PROTO_CODEC(values_reply, rl_proto_values_reply_t)
RL_PROTO_CODEC(attach, rl_proto_attach_t)
RL_PROTO_CODEC(attach_reply, rl_proto_attach_reply_t)
RL_PROTO_CODEC(model_file, rl_proto_model_file_t)

// The statistics of a train reply as a list: names and values borrowed from x (valid until its
// message is freed), updates = 1. x holds at most RL_LOSS_MAX_STATS (the decoder's bound).
void rl_proto_train_reply_stats(const rl_proto_train_reply_t *x, rl_loss_stats_t *out);
// The reply's fields of an update's statistics: x->stat_names, n_stats and stats point into st
// (borrowed; valid as long as st).
void rl_proto_train_reply_set_stats(rl_proto_train_reply_t *x, const rl_loss_stats_t *st);

// A request without fields (shutdown, export_weights): caller owns *out; free with rl_msg_free.
// Returns 0 or RL_ENOMEM.
int rl_proto_request(rl_proto_verb_t verb, uint64_t id, rl_msg_t **out);
// The controller's answer to a hello: op "welcome" with the hello's id.
int rl_proto_welcome(uint64_t id, rl_msg_t **out);
// An ok reply without fields (shutdown, save_final, configure).
int rl_proto_ok(uint64_t id, rl_msg_t **out);
// A failed reply: ok = false, error = `error`. Returns 0 or RL_ENOMEM.
int rl_proto_fail(uint64_t id, const char *error, rl_msg_t **out);
// Reads a reply's envelope: *ok, and on failure *error (borrowed; valid until rl_msg_free; "no
// reason given" when absent). Returns 0, or RL_EPROTO when msg is not a reply with a bool ok.
int rl_proto_reply_status(const rl_msg_t *msg, int *ok, const char **error);

#ifdef __cplusplus
}
#endif
#endif

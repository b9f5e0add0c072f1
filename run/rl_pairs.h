// rl_pairs — what the algorithms that train on preference pairs share (DPO, reward models): the
// pairs of data.train and data.eval_pairs as rl_data preference rows (example 2i: prompt +
// chosen, 2i + 1: prompt + rejected, the loss mask on the completions), and the right-padded
// (B,T) rows of a set of their examples, as a train or logprobs request carries them. Internal
// to run/ and algorithms/.
#ifndef RL_PAIRS_H
#define RL_PAIRS_H

#include "rl_run.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The training pairs (data.train) and the held-out ones (data.eval_pairs, *eval NULL without
// it): the recipe's fields, chat template, data.max_length and data.truncation; eos = 1 appends
// the tokenizer's EOS (config.json's when the tokenizer names none) after each completion, as
// TRL's DPO does; eos = 0 ends each row at its completion's last token (a reward model: the
// token its head reads, see docs/training.md). with_margin: read data.margin_field. A warning
// names the pairs dropped (none with flags RL_PAIRS_QUIET). tok: the run's (rl_run_tokenizer).
// caller owns *train and *eval (also on failure); free with rl_data_destroy.
enum { RL_PAIRS_QUIET = 1u };
int rl_pairs_load(const rl_recipe_t *r, rl_tokenizer_t *tok, int eos, int with_margin,
                  unsigned flags, rl_data_t **train, rl_data_t **eval, char *err, size_t err_len);

// The check before the run (and in `rlctl validate`) of the pairs the run will load: the
// tokenizer as the run loads it, then rl_pairs_load quietly; its errors are the run's, word for
// word. Returns 0 or RL_EINVAL with err filled.
int rl_pairs_preflight(const rl_recipe_t *r, int eos, int with_margin, char *err, size_t err_len);

// Takes P pairs in the run's data order (run->order walks pairs): ex[2i] and ex[2i + 1] get the
// chosen and rejected examples of the i-th. ex: caller's (2P).
void rl_pairs_take(rl_run_t *run, int P, int64_t *ex);

// Rows of examples of one dataset, right-padded to the longest (T >= 2; padding holds token 0).
typedef struct {
    int B, T;
    int64_t *ex;        // (B) example indices
    int32_t *tok, *len; // (B,T), (B)
    uint8_t *mask;      // (B,T)
} rl_pairs_rows_t;

// Fills *out with examples ex[0..B) of data (ex copied). Returns 0 or RL_ENOMEM. Free with
// rl_pairs_rows_free (also on failure).
int rl_pairs_rows(const rl_data_t *data, const int64_t *ex, int B, rl_pairs_rows_t *out);
void rl_pairs_rows_free(rl_pairs_rows_t *rows);

// One optimizer step of the actor on rows w (2 a pair): loss "dpo" (ref_sum: the reference's
// sums, one a row) or "rm" (margin: one a row, or NULL), at rate lr, micro-batches of
// train.micro_batch_size, the divisor the step's pairs. On success the run has advanced: step + 1,
// num_tokens + the rows' tokens, actor_consistent (the weights version stays: these algorithms
// sample nothing in training); *x holds the reply's numbers, views into *rep (caller owns; free
// with rl_msg_free). On failure the run's data order goes back (rl_run_t.trained: the pairs are
// taken again on resume).
int rl_pairs_train(rl_run_t *run, const char *loss, const rl_pairs_rows_t *w, const double *ref_sum,
                   const double *margin, double lr, rl_proto_train_reply_t *x, rl_msg_t **rep,
                   char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

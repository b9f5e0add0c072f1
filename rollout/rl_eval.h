// rl_eval — task evaluation on a held-out JSONL file: sample completions for each row's prompt
// and score them with a caller-supplied scorer (the arithmetic task and GSM8K use the
// math_answer rule: rewards/rl_reward_math). Reports accuracy (mean score), the format rate
// (the share of completions in the task's answer format), mean completion length and the share
// cut by max_new_tokens. This module reads the data and drives the sampler; it does not know
// what a correct answer is.
#ifndef RL_EVAL_H
#define RL_EVAL_H

#include "rl_model.h"
#include "rl_sampler.h"
#include "rl_tokenizer.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// One eval row: the prompt text and the row's reference answer (borrowed; valid until
// rl_eval_data_destroy).
typedef struct {
    const char *prompt;
    const char *answer;
} rl_eval_row_t;

typedef struct rl_eval_data rl_eval_data_t;

// Reads rows {prompt_field: text, answer_field: text or number, ...} from JSONL files and folders
// paths[0..n_paths), one after another, through
// rl_jsonl (blank lines skipped; a number becomes text as rl_jsonl_field_text prints it); at most
// `limit` rows (0 = all). A row without either field, or a line that is not JSON, is an error
// naming file:line. caller owns result; free with rl_eval_data_destroy. NULL on error.
rl_eval_data_t *rl_eval_data_load(const char *const *paths, int n_paths, const char *prompt_field,
                                  const char *answer_field, int limit, char *err, size_t err_len);
int rl_eval_data_count(const rl_eval_data_t *self);
// borrowed; valid until destroy.
const rl_eval_row_t *rl_eval_data_row(const rl_eval_data_t *self, int i);
void rl_eval_data_destroy(rl_eval_data_t **self_p);

// Scores one completion (text without the stop token) against the reference answer: returns
// the score in [0, 1] and sets *formatted to 1 when the completion is in the answer format.
typedef double (*rl_eval_score_fn)(void *ctx, const char *completion, size_t len,
                                   const char *answer, int *formatted);

typedef struct {
    int rows;             // rows evaluated
    int samples;          // completions scored (rows x n)
    double accuracy;      // mean score over completions
    double format_rate;   // share of completions in the answer format
    double mean_length;   // mean completion length in tokens (stop token included)
    double clipped_ratio; // share of completions ended by max_new_tokens
    double seconds;       // wall time of the evaluation
    long long tokens;     // completion tokens generated
} rl_eval_result_t;

// Samples params->n completions per row with `sampler` (prompts encoded with `tok`, no special
// tokens added) and scores them: `score` is called once per completion, in prompt-major order
// (row 0's n completions in sample order, then row 1's, ...), which a scorer that keeps the
// texts (rlctl pairs) relies on. The RNG stream of each row is keyed by its index, so a given
// seed gives the same result whatever the batch size. Completion ids the tokenizer does not
// know (a model vocabulary padded past the tokenizer's) have no text and are dropped before
// scoring, as Hugging Face's decode does. Returns 0, or an error with the message
// in err (a prompt longer than the context, a sampler failure).
int rl_eval_run(rl_sampler_t *sampler, rl_tokenizer_t *tok, const rl_eval_data_t *data,
                const rl_sampler_params_t *params, rl_eval_score_fn score, void *ctx,
                rl_eval_result_t *out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

// rl_data — SFT and preference datasets: JSONL rows -> token ids + loss mask, epoch shuffling
// with a position that can be saved and restored, and micro-batch assembly.
//
// Row layouts (REFERENCE.md §6, as in TRL; field names configurable):
//   prompt_completion {"prompt", "completion"}: prompt and completion are encoded separately
//       and concatenated (no BPE merge across the boundary, so the completion's tokens are the
//       same whatever the prompt), then the EOS token is appended, so the model learns to stop.
//       Loss on completion + EOS when completion_only_loss, else on every token.
//   text {"text"}: the text, then EOS; loss on every token.
//   messages {"messages": [{"role", "content"}, ...]}: rendered with rl_chat (ChatML or
//       Llama-3). Each assistant turn's content and its end-of-turn token carry the loss; the
//       rest (system/user turns, role headers, the newline after ChatML's <|im_end|>) does not.
//       The end-of-turn token already terminates, so no EOS is appended.
//   preference {"prompt", "chosen", "rejected"} (DPO, reward models; TRL's preference format):
//       each row gives TWO consecutive examples, prompt + chosen (example 2i) and prompt +
//       rejected (2i + 1), with the loss mask on the completion only. Strings: encoded as
//       prompt_completion's (EOS appended). Message lists (conversational): the prompt messages
//       rendered with the assistant header (no loss), then what the template adds for the
//       chosen / rejected messages (loss; the trailing newline after ChatML's <|im_end|> not).
//       Implicit prompt (no prompt field, chosen and rejected whole conversations): the prompt
//       is their longest common prefix of messages, as TRL's extract_prompt. A pair with either
//       side over max_length is dropped (or refused) whole.
// Tokens are encoded without special tokens (no BOS), like encode(add_special_tokens=False).
// An example longer than max_length tokens (EOS included) is an error naming file:line, or is
// dropped and counted (truncation policy); nothing is ever cut in the middle.
//
// Mask alignment: mask[t] = 1 means "train on predicting tokens[t] from tokens[< t]", the same
// alignment as rl_model_forward's logp, so mask[0] is always 0.
//
// Not a tokenizer and not a prompt source for GRPO (that is rollout's job).
#ifndef RL_DATA_H
#define RL_DATA_H

#include "rl_chat.h"
#include "rl_tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Row layouts; the values equal RL_RECIPE_FORMAT_* of rl_config.h.
enum {
    RL_DATA_FORMAT_AUTO = 0,
    RL_DATA_FORMAT_PROMPT = 1, // GRPO prompts: refused here
    RL_DATA_FORMAT_PROMPT_COMPLETION = 2,
    RL_DATA_FORMAT_TEXT = 3,
    RL_DATA_FORMAT_MESSAGES = 4,
    RL_DATA_FORMAT_PREFERENCE = 5, // pairs: only with rl_data_opts_t.pairs
};
// Values equal RL_RECIPE_TRUNC_*.
enum { RL_DATA_TRUNC_ERROR = 0, RL_DATA_TRUNC_DROP = 1 };

typedef struct {
    int format;               // RL_DATA_FORMAT_*; AUTO decides from the first row's fields
    const char *prompt_field;     // "prompt"
    const char *completion_field; // "completion"
    const char *text_field;       // "text"
    const char *messages_field;   // "messages"
    const char *chosen_field;     // "chosen"
    const char *rejected_field;   // "rejected"
    const char *margin_field;     // a pair's margin (reward models; TRL's "margin"), a number
                                  // when present; NULL (default): not read
    int pairs;                    // 1: a preference dataset (DPO, RM): rows must be preference rows
                                  // (AUTO finds them); 0: SFT, which refuses them
    int completion_only_loss;     // prompt_completion: loss on completion + EOS only
    int max_length;               // most tokens of one example (> 0)
    int truncation;               // RL_DATA_TRUNC_*
    int32_t eos_id;               // appended after completion / text; -1: append nothing
    rl_chat_format_t chat;        // format of messages rows (RL_CHAT_NONE refuses them)
} rl_data_opts_t;

// Fills the defaults above (format AUTO, TRL field names, completion_only_loss 1, max_length
// 1024, truncation DROP, eos_id -1, chat NONE, pairs 0).
void rl_data_opts_default(rl_data_opts_t *opts);

typedef struct rl_data rl_data_t;

// Reads and tokenizes every row of JSONL files and folders paths[0..n_paths), one after another,
// through rl_jsonl (blank lines skipped, CRLF
// read as LF, lines of at most RL_JSONL_MAX_LINE bytes). Errors name "path:line": bad JSON (with
// the column), a row that is not an object, a missing or non-string field ("path:3: field
// 'completion' is missing"), an over-long example under policy error, a file with no usable
// example. tok is borrowed for the call only. On failure returns NULL with the message in err.
// caller owns result; free with rl_data_destroy.
rl_data_t *rl_data_load(const char *const *paths, int n_paths, const rl_data_opts_t *opts,
                        rl_tokenizer_t *tok, char *err, size_t err_len);

void rl_data_destroy(rl_data_t **self_p);

// The margin of example i's pair (opts.margin_field) into *margin; returns 1 when the dataset's
// pairs have margins (then every pair has one), 0 when none has (*margin = 0).
int rl_data_margin(const rl_data_t *self, size_t i, double *margin);

// Examples kept (a preference dataset: 2 per pair, chosen then rejected), and rows dropped for
// exceeding max_length.
size_t rl_data_count(const rl_data_t *self);
size_t rl_data_dropped(const rl_data_t *self);
// The resolved format (never AUTO).
int rl_data_format(const rl_data_t *self);
// Total trainable tokens (sum of masks) over the dataset.
int64_t rl_data_loss_tokens(const rl_data_t *self);

// Example i (< count): its tokens and mask (borrowed; valid until destroy), its length, and
// the 1-based line of the file it came from.
void rl_data_example(const rl_data_t *self, size_t i, const int32_t **tokens_p,
                     const uint8_t **mask_p, int *len_p, int *line_p);

// ---- order and position ------------------------------------------------------------------------
// Epoch e visits every example once, in the order of a Fisher-Yates permutation drawn from an
// rl_rng seeded by (seed, e) (identity when not shuffling). The order of an epoch depends on
// nothing else, so (epoch, index) alone restores the stream exactly.
typedef struct {
    int64_t epoch; // 0-based
    int64_t index; // next position inside the epoch's order, 0..count
} rl_data_pos_t;

typedef struct rl_data_sampler rl_data_sampler_t;

// A sampler over `data` (borrowed; valid until the sampler is destroyed) at position (0, 0).
// NULL on allocation failure. caller owns result; free with rl_data_sampler_destroy.
rl_data_sampler_t *rl_data_sampler_new(const rl_data_t *data, uint64_t seed, int shuffle);
// The same order over `count` items of any dataset (GRPO prompts).
rl_data_sampler_t *rl_data_sampler_new_count(size_t count, uint64_t seed, int shuffle);
void rl_data_sampler_destroy(rl_data_sampler_t **self_p);

// Returns the next example's index and advances (into the next epoch at the end of one).
size_t rl_data_sampler_next(rl_data_sampler_t *self);
rl_data_pos_t rl_data_sampler_pos(const rl_data_sampler_t *self);
// Moves to `pos`. Returns 0, or RL_EINVAL when pos is outside the data (negative, or index >
// count: a checkpoint of another dataset).
int rl_data_sampler_seek(rl_data_sampler_t *self, rl_data_pos_t pos);

// ---- micro-batches -----------------------------------------------------------------------------
// One right-padded micro-batch. Buffers grow as needed and are reused (no allocation once the
// largest shape has been seen).
typedef struct {
    int B, T;         // rows and padded width (the longest row of this batch)
    int32_t *tokens;  // (B,T); padding holds token 0
    int *lengths;     // (B) real tokens per row
    float *mask;      // (B,T) loss mask, logp-aligned (see above); 0 on padding
    size_t cap_bt, cap_b;
} rl_data_batch_t;

// Fills `batch` with the examples idx[0..n). Returns 0 or RL_ENOMEM.
int rl_data_batch_fill(rl_data_batch_t *batch, const rl_data_t *data, const size_t *idx, int n);

// Frees the buffers and zeroes the struct (the struct itself is the caller's).
void rl_data_batch_free(rl_data_batch_t *batch);

#ifdef __cplusplus
}
#endif
#endif

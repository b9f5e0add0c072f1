// rl_reward_model — the reward of kind `model` (`rewards: - model: DIR`): a reward model's folder
// (an HF sequence classifier with one label, as an `rm` run's final/ or transformers'
// <Arch>ForSequenceClassification) scores each completion as its `score` head on the final
// norm's output at the last token of prompt + completion. It is a reward table of the plugin ABI
// (include/rlctl/reward.h) compiled into rlctl, so the reward worker runs it as any reward: its
// timeout, crash and NaN handling are a plugin's.
//
// The sequence scored: the prompt text (as the policy saw it, the chat template applied) and the
// completion text (without the stop token), each encoded with the folder's tokenizer, no special
// tokens added, concatenated: the rows an `rm` run trains on (trainer/rl_data's preference rows
// without EOS). A sequence longer than the model's max_position_embeddings is unscorable (NaN).
// Batched forward passes of up to `batch_size` sequences (config, default 16), no gradients.
#ifndef RL_REWARD_MODEL_H
#define RL_REWARD_MODEL_H

#include "rlctl/reward.h"

#ifdef __cplusplus
extern "C" {
#endif

// The table. create() takes {"path": DIR, "threads": N, "batch_size": B} (path required; threads
// 0 = all cores, default 1; batch_size default 16) and loads the folder: config.json, the weights
// (seq_cls: score.weight [1, C] required, lm_head absent), tokenizer.json. borrowed; valid until
// program exit.
const rl_reward_table_t *rl_reward_model_table(void);

#ifdef __cplusplus
}
#endif
#endif

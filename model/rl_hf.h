// rl_hf — Hugging Face model folders: config.json (llama, qwen2, qwen3; REFERENCE.md §2),
// generation_config.json stop ids, and the list of tensors (names, shapes) a config implies.
// This module reads and checks formats; it does no arithmetic on weights (that is rl_model).
#ifndef RL_HF_H
#define RL_HF_H

#include "rl_safetensors.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { RL_ARCH_LLAMA = 0, RL_ARCH_QWEN2 = 1, RL_ARCH_QWEN3 = 2 } rl_arch_t;
typedef enum { RL_ROPE_DEFAULT = 0, RL_ROPE_LLAMA3 = 1 } rl_rope_type_t;

#define RL_HF_MAX_EOS 8

typedef struct {
    rl_arch_t arch;
    int hidden_size;          // C
    int intermediate_size;    // MLP width
    int num_hidden_layers;    // L
    int num_attention_heads;  // NH
    int num_key_value_heads;  // NKV (missing in the file -> NH)
    int head_dim;             // D (missing -> hidden_size / NH; Qwen3 sets it)
    int vocab_size;           // V (may exceed the tokenizer's vocabulary)
    int max_position_embeddings;
    float rms_norm_eps;
    double rope_theta;
    rl_rope_type_t rope_type;
    // llama3 rope scaling (valid when rope_type == RL_ROPE_LLAMA3)
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_position_embeddings;
    int tie_word_embeddings;  // 1: lm_head shares embed_tokens
    int attention_bias;       // q/k/v biases present (always 1 for qwen2)
    int o_bias;               // o_proj bias present (llama/qwen3 with attention_bias; never qwen2)
    int mlp_bias;             // llama mlp_bias
    int qk_norm;              // qwen3: RMSNorm over each head of q and k
    char torch_dtype[16];     // "float32", "bfloat16", "float16" or "" when absent
    int bos_token_id;         // -1 when absent
    int n_eos;                // stop ids: config eos_token_id (int or list) plus
    int eos_token_ids[RL_HF_MAX_EOS]; //   generation_config.json's, deduplicated
    double initializer_range; // std of HF's normal init (missing -> 0.02); used by rlctl init
} rl_hf_config_t;

// Parses config.json text (len bytes, not necessarily NUL-terminated) named `path` for
// messages. Missing required fields, wrong types, non-positive sizes, heads that do not divide,
// unknown model_type ("model_type 'mistral' is not supported (llama, qwen2, qwen3)") and unknown
// rope types are errors naming the path and the key. Returns 0 or RL_EINVAL/RL_EUNSUPPORTED.
// Defaults and traps are documented in docs/formats.md ("config.json").
int rl_hf_config_parse(const char *json, size_t len, const char *path, rl_hf_config_t *out,
                       char *err, size_t err_len);

// Reads <dir>/config.json and, when present, <dir>/generation_config.json (merging eos ids).
// Returns 0, RL_ENOTFOUND (no config.json), or a parse error, with the message in err.
int rl_hf_config_load(const char *dir, rl_hf_config_t *out, char *err, size_t err_len);

// Reads and parses one config.json file at `path` (no generation_config.json merge).
// Returns 0, RL_ENOTFOUND, an errno, or a parse error, with the message in err.
int rl_hf_config_load_file(const char *path, rl_hf_config_t *out, char *err, size_t err_len);

// Serialises a config as config.json text that rl_hf_config_parse reads back unchanged and
// transformers accepts. caller owns result; free with free(). NULL on allocation failure.
char *rl_hf_config_to_json(const rl_hf_config_t *cfg);
// The same for the <Arch>ForSequenceClassification of the config (a reward model, one label):
// that architecture name, id2label {"0": "LABEL_0"}, label2id, and pad_token_id (>= 0; -1
// writes null). transformers reads the pad id to find each row's last real token.
// caller owns result; free with free(). NULL on allocation failure.
char *rl_hf_config_to_json_seq_cls(const rl_hf_config_t *cfg, int pad_token_id);

// One tensor a config implies, e.g. {"model.layers.0.self_attn.q_proj.weight", 2, {NH*D, C}}.
typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
} rl_hf_tensor_spec_t;

// Fills the tensor list of a config in HF order (embed, per layer, norm, lm_head unless tied).
// Returns the count; with out == NULL only counts. `cap` bounds writes.
int rl_hf_tensor_specs(const rl_hf_config_t *cfg, rl_hf_tensor_spec_t *out, int cap);

// The most parameters a config may imply (2^40, about 1.1e12): rl_hf_config_load refuses a
// config whose sizes, each in range, multiply to more, so counts and byte sizes of a loaded
// config cannot overflow.
#define RL_HF_MAX_PARAMS (1LL << 40)

// Number of parameters a config implies (tied head counted once). cfg: a loaded config (at
// most RL_HF_MAX_PARAMS), or one whose sizes are known to be small.
int64_t rl_hf_param_count(const rl_hf_config_t *cfg);

// Checks the weights of a model folder against a config: every tensor of rl_hf_tensor_specs
// present with its shape, nothing else (rotary_emb.inv_freq buffers of old conversions are
// ignored), dtypes F32/F16/BF16. Returns 0, RL_EINVAL (missing, unexpected or misshapen
// tensors; err lists the first few of each by name), RL_EUNSUPPORTED (dtype) or RL_ENOMEM.
int rl_hf_check_weights(const rl_hf_config_t *cfg, const rl_st_model_t *model, char *err,
                        size_t err_len);
// The same for an <Arch>ForSequenceClassification folder (a reward model) when seq_cls != 0:
// `score.weight` [1, C] may be present (any other shape is misshapen) and `lm_head.weight` may be
// absent; with seq_cls == 0 it is rl_hf_check_weights.
int rl_hf_check_weights_ex(const rl_hf_config_t *cfg, const rl_st_model_t *model, int seq_cls,
                           char *err, size_t err_len);

const char *rl_hf_arch_name(rl_arch_t arch); // "llama", "qwen2", "qwen3"
const char *rl_hf_rope_type_name(rl_rope_type_t type); // "default", "llama3"

#ifdef __cplusplus
}
#endif
#endif

// rl_config_foreign — the names TRL, transformers, PEFT, verl and OpenRLHF users already know,
// and what each is in a recipe. The loader consults it for a key or section it does not have, so
// `learning_rate: 1e-5` is answered with optim.lr and how the meanings differ, not a bare
// "unknown key". The table is facts from those projects' documented configuration names.
// A hint names only keys the recipe's algorithm has: TRL's GRPO loss_type is answered with
// algorithm.loss_agg, never with DPO's algorithm.loss_type, and a name whose key belongs to
// other algorithms says so instead of suggesting it.
#include "rl_config_priv.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name; // their key (the last path component as users write it); "vllm_*": a prefix
    const char *who;  // whose name it is
    const char *ours; // the recipe key, or NULL: rlctl has no such setting
    const char *how;  // how the meanings differ (or why there is none)
} s_foreign_t;

static const s_foreign_t s_names[] = {
    // transformers TrainingArguments (TRL's configs inherit them)
    {"learning_rate", "transformers/TRL", "optim.lr",
     "the same peak learning rate; its schedule is optim.scheduler"},
    {"num_train_epochs", "transformers/TRL", "train.steps",
     "rlctl counts optimizer steps, not epochs: steps = epochs x rows / train.batch_size"},
    {"max_steps", "transformers/TRL", "train.steps", "the same: optimizer steps"},
    {"per_device_train_batch_size", "transformers/TRL", "train.batch_size",
     "rlctl's is the whole batch of one optimizer step (GRPO/PPO: prompts; SFT: examples; "
     "DPO/RM: pairs), not per device; the per-pass size is train.micro_batch_size"},
    {"gradient_accumulation_steps", "transformers/TRL", "train.micro_batch_size",
     "rlctl sets the sequences per forward/backward pass instead: micro_batch_size = "
     "batch_size / accumulation steps"},
    {"warmup_ratio", "transformers/TRL", "optim.warmup_ratio", "the same, under optim"},
    {"lr_scheduler_type", "transformers/TRL", "optim.scheduler",
     "constant, linear or cosine (after optim.warmup_steps)"},
    {"adam_beta1", "transformers/TRL", "optim.betas", "one list [beta1, beta2]"},
    {"adam_beta2", "transformers/TRL", "optim.betas", "one list [beta1, beta2]"},
    {"adam_epsilon", "transformers/TRL", "optim.eps", "the same"},
    {"output_dir", "transformers/TRL", "run.dir", "the same: the run's folder"},
    {"run_name", "transformers/TRL", "run.name", "the same"},
    {"logging_steps", "transformers/TRL", "train.log_every", "the same: metrics every N steps"},
    {"save_steps", "transformers/TRL", "train.save_every", "the same: a checkpoint every N steps"},
    {"save_total_limit", "transformers/TRL", "train.keep_checkpoints", "the same"},
    {"eval_steps", "transformers/TRL", "train.eval_every",
     "the same: an evaluation every N steps (needs data.eval)"},
    {"gradient_checkpointing", "transformers/TRL", "train.recompute",
     "the same: recompute activations in backward"},
    {"bf16", "transformers/TRL", "model.dtype",
     "rlctl computes in float32; model.dtype is the dtype of the weights it saves"},
    {"fp16", "transformers/TRL", "model.dtype",
     "rlctl computes in float32; model.dtype is the dtype of the weights it saves"},
    {"model_name_or_path", "TRL", "model.path", "a local Hugging Face model folder"},
    {"dataset_name", "TRL", "data.train", "a JSONL file (or files) of rows, not a Hub name"},
    {"dataset_train_split", "TRL", "data.train", "a JSONL file of rows"},
    {"dataset_test_split", "TRL", "data.eval", "a JSONL file of held-out rows"},
    {"dataset_text_field", "TRL", "data.text_field", "the same"},
    // TRL's GRPO/PPO/DPO configs
    {"max_completion_length", "TRL", "sampling.max_new_tokens",
     "the same: most tokens generated per completion"},
    {"epsilon", "TRL", "algorithm.epsilon_low",
     "TRL's epsilon is the lower clip bound, and the upper one too unless epsilon_high is set; "
     "rlctl sets the two apart: algorithm.epsilon_low and algorithm.epsilon_high (0.2 each)"},
    {"epsilon_high", "TRL", "algorithm.epsilon_high", "the same upper clip bound"},
    {"importance_sampling_level", "TRL", "algorithm.policy_loss",
     "token is grpo; sequence (GSPO's sequence-level ratio) is gspo"},
    {"loss_type", "TRL", "algorithm.loss_agg",
     "TRL's GRPO loss_type is how token losses are averaged: grpo is seq_mean_token_mean, "
     "bnpo and dapo are token_mean, dr_grpo is seq_mean_token_sum_norm (Dr. GRPO also sets "
     "algorithm.scale_rewards: none)"},
    {"report_to", "transformers/TRL", NULL,
     "a run writes its metrics to its folder on its own: metrics.jsonl (rlctl plot draws it) "
     "and a TensorBoard event file (rlctl run --no-tensorboard leaves it out); there is no "
     "wandb"},
    {"reward_funcs", "TRL", "rewards",
     "a list of entries, each a builtin, plugin, model, command or http reward"},
    {"reward_weights", "TRL", "rewards[].weight", "one weight per rewards entry"},
    {"use_vllm", "TRL", "roles.samplers",
     "rlctl samples with its own sampler processes, not vLLM: roles.samplers of them (threads "
     "each: roles.sampler_threads) or remote ones (roles.remote_samplers, rlctl sampler serve); "
     "what they sample is set by sampling.*"},
    {"vllm_*", "TRL", "roles.samplers",
     "rlctl samples with its own sampler processes, not vLLM: roles.samplers of them (threads "
     "each: roles.sampler_threads) or remote ones (roles.remote_samplers, rlctl sampler serve); "
     "what they sample is set by sampling.* (temperature, top_p, top_k, max_new_tokens)"},
    {"kl_coef", "TRL/verl", "algorithm.beta",
     "PPO's per-token KL penalty in the reward: rlctl's PPO beta"},
    {"num_ppo_epochs", "TRL", "algorithm.epochs", "the same: passes over each rollout"},
    {"num_mini_batches", "TRL", "algorithm.mini_batches", "the same"},
    {"cliprange", "TRL", "algorithm.epsilon_low",
     "both clip bounds: set algorithm.epsilon_low and algorithm.epsilon_high"},
    {"cliprange_value", "TRL", "algorithm.value_clip", "the same"},
    {"vf_coef", "TRL", NULL,
     "rlctl trains the critic with an optimizer of its own (critic.lr), so the value loss has "
     "no coefficient"},
    {"missing_eos_penalty", "TRL", NULL, "no such setting; a reward can score a missing EOS"},
    // PEFT's LoraConfig / TRL's ModelConfig
    {"use_peft", "TRL", "lora.enabled", "the same"},
    {"lora_r", "TRL", "lora.r", "the same"},
    {"lora_alpha", "PEFT/TRL", "lora.alpha", "the same"},
    {"lora_dropout", "PEFT/TRL", "lora.dropout", "the same"},
    {"lora_target_modules", "TRL", "lora.target_modules", "the same (all-linear too)"},
    // verl
    {"actor_rollout_ref", "verl", NULL,
     "the actor's settings are optim.* and train.*, the rollout's sampling.* and "
     "algorithm.num_generations, the reference's roles.reference and algorithm.beta"},
    {"trainer", "verl", "train",
     "total_training_steps = train.steps, save_freq = train.save_every, test_freq = "
     "train.eval_every"},
    {"reward_model", "verl", "rewards", "an entry with model: (a reward model's folder)"},
    {"kl_loss_coef", "verl", "algorithm.beta",
     "verl's use_kl_loss + kl_loss_coef: the KL term in the loss, as rlctl's GRPO beta"},
    {"use_kl_loss", "verl", "algorithm.beta", "a KL term in the loss whenever algorithm.beta > 0"},
    {"kl_loss_type", "verl", "algorithm.kl_estimator", "verl's low_var_kl is k3"},
    {"ppo_mini_batch_size", "verl", "algorithm.mini_batches",
     "verl counts prompts per mini-batch; rlctl the mini-batches per pass: mini_batches = "
     "train.batch_size / ppo_mini_batch_size"},
    {"ppo_micro_batch_size_per_gpu", "verl", "train.micro_batch_size",
     "sequences per forward/backward pass, for the whole step (rlctl's mesh splits them)"},
    {"ppo_epochs", "verl", "algorithm.epochs", "the same"},
    {"clip_ratio", "verl", "algorithm.epsilon_low",
     "both clip bounds: set algorithm.epsilon_low and algorithm.epsilon_high"},
    {"clip_ratio_low", "verl", "algorithm.epsilon_low", "the same"},
    {"clip_ratio_high", "verl", "algorithm.epsilon_high", "the same"},
    {"clip_ratio_c", "verl", "algorithm.dual_clip", "the same dual-clip constant"},
    {"loss_mode", "verl", "algorithm.policy_loss",
     "verl's policy_loss.loss_mode: vanilla is grpo; gspo and cispo keep their names"},
    {"loss_agg_mode", "verl", "algorithm.loss_agg",
     "token-mean = token_mean, seq-mean-token-mean = seq_mean_token_mean, "
     "seq-mean-token-sum-norm = seq_mean_token_sum_norm"},
    {"entropy_coeff", "verl", NULL, "rlctl has no entropy bonus"},
    {"train_batch_size", "verl/OpenRLHF", "train.batch_size",
     "prompts per step (GRPO, PPO), as verl's data.train_batch_size"},
    {"max_response_length", "verl", "sampling.max_new_tokens", "the same"},
    {"max_num_seqs", "verl/vLLM", "sampling.max_batch",
     "the most sequences a sampler decodes at once"},
    {"total_training_steps", "verl", "train.steps", "the same"},
    {"total_epochs", "verl", "train.steps", "rlctl counts optimizer steps, not epochs"},
    {"save_freq", "verl", "train.save_every", "the same"},
    {"test_freq", "verl", "train.eval_every", "the same"},
    {"norm_adv_by_std_in_grpo", "verl", "algorithm.scale_rewards", "true = group, false = none"},
    {"adv_estimator", "verl", "algorithm.name",
     "grpo = algorithm.name grpo; rloo = grpo with algorithm.advantage rloo; gae = ppo"},
    {"fsdp_size", "verl", "mesh.fsdp", "the same"},
    {"n_gpus_per_node", "verl", "mesh.devices",
     "dp x fsdp ranks (mesh.dp, mesh.fsdp); hosts come from mesh.hostfile"},
    {"nnodes", "verl", "mesh.hostfile", "the hosts of the mesh's ranks"},
    {"optimizer_offload", "verl", "train.optimizer_offload", "the same (on a GPU)"},
    // OpenRLHF
    {"actor_learning_rate", "OpenRLHF", "optim.lr", "the same"},
    {"critic_learning_rate", "OpenRLHF", "critic.lr", "the same"},
    {"init_kl_coef", "OpenRLHF", "algorithm.beta",
     "the same; an adaptive controller is algorithm.kl_target"},
    {"micro_train_batch_size", "OpenRLHF", "train.micro_batch_size", "the same"},
    {"n_samples_per_prompt", "OpenRLHF", "algorithm.num_generations", "the same"},
    {"max_epochs", "OpenRLHF", "algorithm.epochs", "passes over each rollout"},
    {"prompt_max_len", "OpenRLHF", "data.max_prompt_length", "the same"},
    {"generate_max_len", "OpenRLHF", "sampling.max_new_tokens", "the same"},
    {"remote_rm_url", "OpenRLHF", "rewards", "an entry with http: {url: ..., format: openrlhf}"},
};

// 1 when `name` is `pattern` ("vllm_*": any name with that prefix).
static int s_is(const char *pattern, const char *name) {
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*') {
        return strncmp(pattern, name, n - 1) == 0 && name[n - 1];
    }
    return strcmp(pattern, name) == 0;
}

// The recipe key `ours` names ("algorithm.loss_agg", "algorithm.loss_agg: token_mean"), or NULL
// when it names no single key (a section, "rewards[].weight").
static const rl_recipe_key_t *s_key_of(const rl_recipe_algos_t *algos, const char *ours) {
    char key[96];
    size_t n = strcspn(ours, ": [");
    if (n >= sizeof key) {
        return NULL;
    }
    memcpy(key, ours, n);
    key[n] = '\0';
    return rl_recipe_key_find(algos, key);
}

// 1 when a recipe of algorithm a (NULL: not known) has the key `ours` names (or it names none).
static int s_has(const rl_recipe_algos_t *algos, const rl_recipe_algo_def_t *a, const char *ours) {
    const rl_recipe_key_t *k = a ? s_key_of(algos, ours) : NULL;
    return !k || rl_recipe_key_for(k, a);
}

// "grpo, ppo": the algorithms that have k.
static void s_owners(const rl_recipe_algos_t *algos, const rl_recipe_key_t *k, char *out,
                     size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; algos && i < algos->n && o < cap; i++) {
        if (rl_recipe_key_for(k, algos->all[i])) {
            int w = snprintf(out + o, cap - o, "%s%s", o ? ", " : "", algos->all[i]->name);
            o = w < 0 ? cap : o + (size_t)w;
        }
    }
}

int rl_recipe_foreign(const rl_recipe_algos_t *algos, const rl_recipe_algo_def_t *a,
                      const char *name, char *out, size_t cap, const char **key_p) {
    const s_foreign_t *other = NULL; // a row whose key only other algorithms have
    if (key_p) {
        *key_p = NULL;
    }
    for (size_t i = 0; name && i < sizeof s_names / sizeof s_names[0]; i++) {
        const s_foreign_t *f = &s_names[i];
        if (!s_is(f->name, name)) {
            continue;
        }
        if (f->ours && !s_has(algos, a, f->ours)) {
            other = other ? other : f;
            continue;
        }
        if (f->ours) {
            snprintf(out, cap, "'%s' is %s's name; rlctl's is %s (%s)", name, f->who, f->ours,
                     f->how);
            if (key_p && s_key_of(algos, f->ours) && strncmp(f->how, "the same", 8) == 0) {
                *key_p = f->ours;
            }
        } else {
            snprintf(out, cap, "'%s' is %s's; rlctl has no such key: %s", name, f->who, f->how);
        }
        return 1;
    }
    if (other) {
        char owners[128];
        s_owners(algos, s_key_of(algos, other->ours), owners, sizeof owners);
        snprintf(out, cap,
                 "'%s' is %s's name for a setting %s does not have (algorithm.name %s: %s)", name,
                 other->who, a->name, owners, other->ours);
        return 1;
    }
    return 0;
}

// Values TRL or verl users write under a key, that mean something rlctl keeps under another key
// or value: TRL's GRPO loss_type names an aggregation or a loss (rlctl's algorithm.loss_type is
// DPO's), TRL's old boolean scale_rewards a scaling, importance_sampling_level a loss.
typedef struct {
    const char *key, *value; // their key (the last path component) and value
    const char *who;         // whose
    const char *ours;        // "key: value" in a recipe
    const char *how;         // how the meanings differ
} s_foreign_value_t;

static const s_foreign_value_t s_values[] = {
    {"loss_type", "grpo", "TRL's GRPOConfig", "algorithm.loss_agg: seq_mean_token_mean",
     "the same: each completion's token losses averaged, then the completions (a length bias)"},
    {"loss_type", "bnpo", "TRL's GRPOConfig", "algorithm.loss_agg: token_mean",
     "TRL's bnpo divides by the active tokens of each device's micro-batch, token_mean by those "
     "of the step's whole batch (TRL's dapo); the same when a step is one micro-batch"},
    {"loss_type", "dapo", "TRL's GRPOConfig", "algorithm.loss_agg: token_mean",
     "the same: the step's token losses summed over its active tokens and divided by their "
     "count"},
    {"loss_type", "dr_grpo", "TRL's GRPOConfig", "algorithm.loss_agg: seq_mean_token_sum_norm",
     "the same constant divisor, completions x sampling.max_new_tokens; Dr. GRPO also leaves "
     "rewards unscaled, algorithm.scale_rewards: none, which TRL sets apart too"},
    {"loss_type", "cispo", "TRL's GRPOConfig", "algorithm.policy_loss: cispo",
     "the loss, with rlctl's clip bounds: algorithm.epsilon_low, epsilon_high"},
    {"scale_rewards", "true", "TRL's old boolean", "algorithm.scale_rewards: group",
     "true divided the advantages by their group's std, as group does"},
    {"scale_rewards", "false", "TRL's old boolean", "algorithm.scale_rewards: none",
     "false left them unscaled, as none does (Dr. GRPO)"},
    {"importance_sampling_level", "token", "TRL's GRPOConfig", "algorithm.policy_loss: grpo",
     "the same token-level ratio"},
    {"importance_sampling_level", "sequence", "TRL's GRPOConfig", "algorithm.policy_loss: gspo",
     "the same: GSPO's sequence-level ratio"},
};

int rl_cfg_foreign_value(const rl_recipe_algos_t *algos, const rl_recipe_algo_def_t *a,
                         const char *key, const char *value, char *out, size_t cap) {
    for (size_t i = 0; key && value && i < sizeof s_values / sizeof s_values[0]; i++) {
        const s_foreign_value_t *f = &s_values[i];
        // YAML's True/False are booleans as true/false are
        if (strcmp(f->key, key) == 0 && strcasecmp(f->value, value) == 0 &&
            s_has(algos, a, f->ours)) {
            snprintf(out, cap, "%s: %s is %s value; rlctl's is %s (%s)", key, value, f->who,
                     f->ours, f->how);
            return 1;
        }
    }
    return 0;
}

// rl_config — recipe loading: YAML tree (rl_yaml) -> overrides spliced in -> schema walk ->
// derived defaults -> cross-key checks -> file checks. Every stage appends to one error list,
// so a user sees all problems of a recipe in one run. The schema table below is the single
// source of truth; adding a key means adding one row (and a line in docs/recipe.md, which the
// tests enforce).
#include "rl_config.h"
#include "rl_err.h"
#include "rl_yaml.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// the schema

typedef struct {
    const char *name;
    int is_list; // a list of entries (rewards), each described by the section's keys
    const char *doc;
} s_section_t;

static const s_section_t s_sections[] = {
    {"run", 0, "the run's name, folder and seed"},
    {"model", 0, "the Hugging Face model folder to train"},
    {"lora", 0, "LoRA adapters, or full fine-tuning when disabled"},
    {"data", 0, "JSONL datasets and their field names"},
    {"algorithm", 0, "the training algorithm and its knobs"},
    {"sampling", 0, "how completions are sampled (rollouts and evaluation)"},
    {"rewards", 1, "reward functions, summed with weights"},
    {"optim", 0, "optimizer and learning-rate schedule"},
    {"train", 0, "steps, batch sizes and cadence of eval/checkpoints"},
    {"roles", 0, "worker processes of the run: samplers, reference placement, threads, timeouts"},
};
#define S_NSECTIONS ((int)(sizeof s_sections / sizeof s_sections[0]))

static const char *const s_algos[] = {"grpo", "sft", NULL};
static const char *const s_dtypes[] = {"float32", "bfloat16", "float16", "auto", NULL};
static const char *const s_chats[] = {"auto", "chatml", "llama3", "none", NULL};
static const char *const s_formats[] = {"auto", "prompt", "prompt_completion", "text",
                                        "messages", NULL};
static const char *const s_truncs[] = {"error", "drop", NULL};
static const char *const s_scales[] = {"group", "batch", "none", NULL};
static const char *const s_advs[] = {"grpo", "rloo", NULL};
static const char *const s_kls[] = {"k1", "k2", "k3", NULL};
static const char *const s_aggs[] = {"token_mean", "seq_mean_token_mean",
                                     "seq_mean_token_sum_norm", NULL};
static const char *const s_tis[] = {"none", "token", "sequence", NULL};
static const char *const s_optims[] = {"adamw", NULL};
static const char *const s_scheds[] = {"constant", "linear", "cosine", NULL};
static const char *const s_refs[] = {"actor", NULL};
static const char *const s_builtins[] = {"math_answer", "regex_format", "length", NULL};
// the 7 projections of a Llama/Qwen block; "all-linear" (PEFT's spelling) means all of them
static const char *const s_modules[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                        "up_proj", "down_proj", "all-linear", NULL};
#define S_NPROJ 7

#define OFF(f) offsetof(rl_recipe_t, f)
#define ROFF(f) offsetof(rl_recipe_reward_t, f)
#define GRPO (1u << RL_RECIPE_ALGO_GRPO)
#define SFT (1u << RL_RECIPE_ALGO_SFT)
#define REQ RL_RECIPE_K_REQUIRED
#define OPT RL_RECIPE_K_OPTIONAL
#define GT RL_RECIPE_K_MIN_EXCL
#define LT RL_RECIPE_K_MAX_EXCL
#define EXISTS RL_RECIPE_K_EXISTS
#define DERIVED RL_RECIPE_K_DERIVED
#define IMAX 2147483647.0
#define BIG 1e300
#define T(x) RL_RECIPE_T_##x

// One row per key. `def` is YAML text parsed by the same code as a recipe, so a default can
// never be a value the recipe itself would reject (the tests load an all-defaults recipe).
static const rl_recipe_key_t s_keys[] = {
    // run ------------------------------------------------------------------------------------
    {"run", "name", T(STRING), OFF(run.name), NULL, "the recipe file's name without .yaml",
     DERIVED, 0, 0, 0, NULL, 0, NULL, NULL,
     "run name: letters, digits, '.', '_', '-'; names the run folder"},
    {"run", "dir", T(PATH_DIR), OFF(run.dir), NULL, "runs/<run.name>", DERIVED, 0, 0, 0, NULL,
     0, NULL, NULL, "the run's folder (relative: to the working directory, not the recipe)"},
    {"run", "seed", T(INT), OFF(run.seed), "0", "0", 0, 0, IMAX, 0, NULL, 0, NULL, NULL,
     "seed of every RNG (data order, LoRA init, sampling)"},
    // model ----------------------------------------------------------------------------------
    {"model", "path", T(PATH_DIR), OFF(model.path), NULL, "required", REQ | EXISTS, 0, 0, 0,
     NULL, 0, NULL, "config.json", "Hugging Face model folder (config.json, model.safetensors)"},
    {"model", "dtype", T(ENUM), OFF(model.dtype), "auto", "auto", 0, 0, 0, 0, s_dtypes, 0, NULL,
     NULL, "storage dtype of saved weights; auto = the input model's torch_dtype"},
    {"model", "tokenizer", T(PATH_FILE), OFF(model.tokenizer), NULL,
     "<model.path>/tokenizer.json", DERIVED | EXISTS, 0, 0, 0, NULL, 0, NULL, NULL,
     "tokenizer.json to use"},
    {"model", "chat_template", T(ENUM), OFF(model.chat_template), "auto", "auto", 0, 0, 0, 0,
     s_chats, 0, NULL, NULL,
     "how messages become text; auto = from tokenizer_config.json, none = raw text"},
    // lora -----------------------------------------------------------------------------------
    {"lora", "enabled", T(BOOL), OFF(lora.enabled), "false", "false", 0, 0, 0, 0, NULL, 0, NULL,
     NULL, "train LoRA adapters; false = full fine-tuning (the other lora keys are refused)"},
    {"lora", "r", T(INT), OFF(lora.r), "8", "8", 0, 1, 4096, 0, NULL, 0, "lora.enabled", NULL,
     "adapter rank R"},
    {"lora", "alpha", T(FLOAT), OFF(lora.alpha), "16", "16", GT, 0, BIG, 0, NULL, 0,
     "lora.enabled", NULL, "scaling numerator: scale = alpha/r (alpha/sqrt(r) with use_rslora)"},
    {"lora", "dropout", T(FLOAT), OFF(lora.dropout), "0.0", "0.0", LT, 0, 1, 0, NULL, 0,
     "lora.enabled", NULL, "dropout on the adapter input"},
    {"lora", "target_modules", T(STRING_LIST), OFF(lora.target_modules), "all-linear",
     "all-linear", 0, 0, 0, 0, s_modules, 0, "lora.enabled", NULL,
     "projections that get adapters; all-linear = all 7"},
    {"lora", "use_rslora", T(BOOL), OFF(lora.use_rslora), "false", "false", 0, 0, 0, 0, NULL, 0,
     "lora.enabled", NULL, "rank-stabilised scaling alpha/sqrt(r)"},
    // data -----------------------------------------------------------------------------------
    {"data", "train", T(PATH_FILE), OFF(data.train), NULL, "required", REQ | EXISTS, 0, 0, 0,
     NULL, 0, NULL, NULL, "training set, JSONL"},
    {"data", "eval", T(PATH_FILE), OFF(data.eval), NULL, "null", OPT | EXISTS, 0, 0, 0, NULL, 0,
     NULL, NULL, "held-out set, JSONL; needed when train.eval_every > 0"},
    {"data", "format", T(ENUM), OFF(data.format), "auto", "auto", 0, 0, 0, 0, s_formats, 0,
     NULL, NULL, "row layout; auto = decided from the first row's fields"},
    {"data", "prompt_field", T(STRING), OFF(data.prompt_field), "prompt", "prompt", 0, 0, 0, 0,
     NULL, 0, NULL, NULL, "field holding the prompt"},
    {"data", "completion_field", T(STRING), OFF(data.completion_field), "completion",
     "completion", 0, 0, 0, 0, NULL, 0, NULL, NULL, "field holding the completion (SFT)"},
    {"data", "answer_field", T(STRING), OFF(data.answer_field), "answer", "answer", 0, 0, 0, 0,
     NULL, 0, NULL, NULL, "field holding the reference answer (rewards, eval accuracy)"},
    {"data", "text_field", T(STRING), OFF(data.text_field), "text", "text", 0, 0, 0, 0, NULL, 0,
     NULL, NULL, "field holding plain text (format text)"},
    {"data", "messages_field", T(STRING), OFF(data.messages_field), "messages", "messages", 0,
     0, 0, 0, NULL, 0, NULL, NULL, "field holding a chat message list (format messages)"},
    {"data", "max_length", T(INT), OFF(data.max_length), "1024", "1024", 0, 1, 1048576, 0,
     NULL, SFT, NULL, NULL, "most tokens of one example, prompt + completion (SFT)"},
    {"data", "max_prompt_length", T(INT), OFF(data.max_prompt_length), "512", "512", 0, 1,
     1048576, 0, NULL, GRPO, NULL, NULL, "most prompt tokens (GRPO)"},
    {"data", "truncation", T(ENUM), OFF(data.truncation), "drop", "drop", 0, 0, 0, 0, s_truncs,
     0, NULL, NULL, "a row over the limit: drop it (counted in the log) or stop with an error"},
    {"data", "shuffle", T(BOOL), OFF(data.shuffle), "true", "true", 0, 0, 0, 0, NULL, 0, NULL,
     NULL, "reshuffle the training set every epoch (seeded by run.seed)"},
    // algorithm ------------------------------------------------------------------------------
    {"algorithm", "name", T(ENUM), OFF(algorithm.name), NULL, "required", REQ, 0, 0, 0, s_algos,
     0, NULL, NULL, "training algorithm"},
    {"algorithm", "num_generations", T(INT), OFF(algorithm.num_generations), "8", "8", 0, 2,
     4096, 0, NULL, GRPO, NULL, NULL, "completions per prompt (G)"},
    {"algorithm", "scale_rewards", T(ENUM), OFF(algorithm.scale_rewards), "group", "group", 0,
     0, 0, 0, s_scales, GRPO, NULL, NULL,
     "divide advantages by the group std, the batch std, or not at all (Dr.GRPO)"},
    {"algorithm", "advantage", T(ENUM), OFF(algorithm.advantage), "grpo", "grpo", 0, 0, 0, 0,
     s_advs, GRPO, NULL, NULL, "baseline: group mean (grpo) or leave-one-out mean (rloo)"},
    {"algorithm", "std_eps", T(FLOAT), OFF(algorithm.std_eps), "1e-4", "1e-4", 0, 0, 1, 0, NULL,
     GRPO, NULL, NULL, "added to the std before dividing (TRL 1e-4, verl 1e-6)"},
    {"algorithm", "epsilon_low", T(FLOAT), OFF(algorithm.epsilon_low), "0.2", "0.2", LT, 0, 1,
     0, NULL, GRPO, NULL, NULL, "lower clip: ratio >= 1 - epsilon_low"},
    {"algorithm", "epsilon_high", T(FLOAT), OFF(algorithm.epsilon_high), "0.2", "0.2", 0, 0, 10,
     0, NULL, GRPO, NULL, NULL, "upper clip: ratio <= 1 + epsilon_high (DAPO clip-higher 0.28)"},
    {"algorithm", "dual_clip", T(FLOAT), OFF(algorithm.dual_clip), "0", "0", 0, 0, 100, 0, NULL,
     GRPO, NULL, NULL, "dual-clip constant c for negative advantages; 0 = off, else > 1"},
    {"algorithm", "beta", T(FLOAT), OFF(algorithm.beta), "0.0", "0.0", 0, 0, 100, 0, NULL, GRPO,
     NULL, NULL, "KL coefficient; 0 = no reference model"},
    {"algorithm", "kl_estimator", T(ENUM), OFF(algorithm.kl_estimator), "k3", "k3", 0, 0, 0, 0,
     s_kls, GRPO, NULL, NULL, "per-token KL estimator"},
    {"algorithm", "loss_agg", T(ENUM), OFF(algorithm.loss_agg), "token_mean", "token_mean", 0,
     0, 0, 0, s_aggs, GRPO, NULL, NULL, "how token losses are averaged (REFERENCE §1)"},
    {"algorithm", "tis", T(ENUM), OFF(algorithm.tis), "none", "none", 0, 0, 0, 0, s_tis, GRPO,
     NULL, NULL, "sampler-mismatch correction: truncated IS per token, or sequence masking"},
    {"algorithm", "tis_cap", T(FLOAT), OFF(algorithm.tis_cap), "2.0", "2.0", 0, 1, 1000, 0,
     NULL, GRPO, NULL, NULL, "TIS bound C (token: w <= C; sequence: 1/C <= w <= C)"},
    {"algorithm", "mask_truncated_completions", T(BOOL),
     OFF(algorithm.mask_truncated_completions), "false", "false", 0, 0, 0, 0, NULL, GRPO, NULL,
     NULL, "zero the loss of completions cut at max_new_tokens (DAPO)"},
    {"algorithm", "overlong_buffer", T(INT), OFF(algorithm.overlong_buffer), "0", "0", 0, 0,
     1048576, 0, NULL, GRPO, NULL, NULL,
     "DAPO overlong shaping over the last N tokens before max_new_tokens; 0 = off"},
    {"algorithm", "overlong_penalty", T(FLOAT), OFF(algorithm.overlong_penalty), "1.0", "1.0",
     0, 0, BIG, 0, NULL, GRPO, NULL, NULL, "largest overlong penalty (reached at max_new_tokens)"},
    {"algorithm", "num_iterations", T(INT), OFF(algorithm.num_iterations), "1", "1", 0, 1, 64, 0,
     NULL, GRPO, NULL, NULL, "policy updates per generated batch"},
    {"algorithm", "drop_zero_std_groups", T(BOOL), OFF(algorithm.drop_zero_std_groups), "false",
     "false", 0, 0, 0, 0, NULL, GRPO, NULL, NULL,
     "leave groups whose rewards are all equal out of the update (DAPO dynamic sampling)"},
    {"algorithm", "completion_only_loss", T(BOOL), OFF(algorithm.completion_only_loss), "true",
     "true", 0, 0, 0, 0, NULL, SFT, NULL, NULL,
     "prompt/completion rows: loss on completion tokens only"},
    // sampling -------------------------------------------------------------------------------
    {"sampling", "temperature", T(FLOAT), OFF(sampling.temperature), "1.0", "1.0", GT, 0, 100,
     0, NULL, 0, NULL, NULL, "softmax temperature T (logprobs use the same T)"},
    {"sampling", "top_p", T(FLOAT), OFF(sampling.top_p), "1.0", "1.0", GT, 0, 1, 0, NULL, 0,
     NULL, NULL, "nucleus sampling mass; 1.0 = off"},
    {"sampling", "top_k", T(INT), OFF(sampling.top_k), "0", "0", 0, 0, IMAX, 0, NULL, 0, NULL,
     NULL, "sample among the k most likely tokens; 0 = off"},
    {"sampling", "max_new_tokens", T(INT), OFF(sampling.max_new_tokens), "256", "256", 0, 1,
     1048576, 0, NULL, 0, NULL, NULL, "completion length limit (L_max)"},
    {"sampling", "stop", T(STRING_LIST), OFF(sampling.stop), "[]", "[]", 0, 0, 0, 0, NULL, 0,
     NULL, NULL, "extra stop strings (EOS always stops)"},
    // rewards (one entry) --------------------------------------------------------------------
    {"rewards", "name", T(STRING), ROFF(name), NULL, "the builtin's name", DERIVED, 0, 0, 0,
     NULL, 0, NULL, NULL, "metric name (rewards/<name>/mean); unique"},
    {"rewards", "weight", T(FLOAT), ROFF(weight), "1.0", "1.0", 0, -BIG, BIG, 0, NULL, 0, NULL,
     NULL, "the total reward is the weighted sum"},
    {"rewards", "builtin", T(ENUM), ROFF(builtin), NULL, "null", OPT, 0, 0, 0, s_builtins, 0,
     NULL, NULL, "a built-in reward (exactly one of builtin and plugin)"},
    {"rewards", "plugin", T(PATH_FILE), ROFF(plugin), NULL, "null", OPT | EXISTS, 0, 0, 0, NULL,
     0, NULL, NULL, "path of a reward plugin .so"},
    {"rewards", "config", T(MAP), ROFF(config_json), "{}", "{}", 0, 0, 0, 0, NULL, 0, NULL, NULL,
     "any map; passed to the reward's create() as JSON"},
    // optim ----------------------------------------------------------------------------------
    {"optim", "name", T(ENUM), OFF(optim.name), "adamw", "adamw", 0, 0, 0, 0, s_optims, 0, NULL,
     NULL, "optimizer (AdamW, decoupled weight decay)"},
    {"optim", "lr", T(FLOAT), OFF(optim.lr), NULL, "required", REQ | GT, 0, 1, 0, NULL, 0, NULL,
     NULL, "peak learning rate"},
    {"optim", "betas", T(FLOAT_LIST), OFF(optim.betas), "[0.9, 0.999]", "[0.9, 0.999]", LT, 0, 1,
     2, NULL, 0, NULL, NULL, "Adam beta1, beta2"},
    {"optim", "eps", T(FLOAT), OFF(optim.eps), "1e-8", "1e-8", GT, 0, 1, 0, NULL, 0, NULL, NULL,
     "Adam epsilon"},
    {"optim", "weight_decay", T(FLOAT), OFF(optim.weight_decay), "0.0", "0.0", 0, 0, 10, 0, NULL,
     0, NULL, NULL, "decoupled weight decay"},
    {"optim", "max_grad_norm", T(FLOAT), OFF(optim.max_grad_norm), "1.0", "1.0", 0, 0, BIG, 0,
     NULL, 0, NULL, NULL, "clip the global gradient norm; 0 = off"},
    {"optim", "scheduler", T(ENUM), OFF(optim.scheduler), "constant", "constant", 0, 0, 0, 0,
     s_scheds, 0, NULL, NULL, "learning-rate schedule after warmup"},
    {"optim", "warmup_steps", T(INT), OFF(optim.warmup_steps), "0", "0", 0, 0, IMAX, 0, NULL, 0,
     NULL, NULL, "linear warmup steps (or warmup_ratio, not both)"},
    {"optim", "warmup_ratio", T(FLOAT), OFF(optim.warmup_ratio), "0.0", "0.0", LT, 0, 1, 0, NULL,
     0, NULL, NULL, "warmup as a fraction of train.steps"},
    {"optim", "min_lr_ratio", T(FLOAT), OFF(optim.min_lr_ratio), "0.0", "0.0", 0, 0, 1, 0, NULL,
     0, NULL, NULL, "linear/cosine decay ends at lr * min_lr_ratio"},
    // train ----------------------------------------------------------------------------------
    {"train", "steps", T(INT), OFF(train.steps), NULL, "required", REQ, 1, IMAX, 0, NULL, 0,
     NULL, NULL, "optimizer steps"},
    {"train", "batch_size", T(INT), OFF(train.batch_size), "8", "8", 0, 1, 1048576, 0, NULL, 0,
     NULL, NULL, "per optimizer step: prompts (GRPO) or examples (SFT)"},
    {"train", "micro_batch_size", T(INT), OFF(train.micro_batch_size), NULL,
     "the whole step", DERIVED, 1, IMAX, 0, NULL, 0, NULL, NULL,
     "sequences per forward/backward pass (gradient accumulation)"},
    {"train", "eval_every", T(INT), OFF(train.eval_every), "0", "0", 0, 0, IMAX, 0, NULL, 0,
     NULL, NULL, "evaluate every N steps (needs data.eval); 0 = off"},
    {"train", "save_every", T(INT), OFF(train.save_every), "0", "0", 0, 0, IMAX, 0, NULL, 0,
     NULL, NULL, "write a resumable checkpoint every N steps; 0 = only final/"},
    {"train", "keep_checkpoints", T(INT), OFF(train.keep_checkpoints), "2", "2", 0, 1, IMAX, 0,
     NULL, 0, NULL, NULL, "newest checkpoints kept"},
    {"train", "log_every", T(INT), OFF(train.log_every), "1", "1", 0, 1, IMAX, 0, NULL, 0, NULL,
     NULL, "write metrics every N steps"},
    {"train", "eval_samples", T(INT), OFF(train.eval_samples), "0", "0", 0, 0, IMAX, 0, NULL, 0,
     NULL, NULL, "eval rows used per evaluation; 0 = all"},
    {"train", "recompute", T(BOOL), OFF(train.recompute), "false", "false", 0, 0, 0, 0, NULL, 0,
     NULL, NULL, "recompute activations in backward (less memory, more time)"},
    {"train", "threads", T(INT), OFF(train.threads), "0", "0", 0, 0, 4096, 0, NULL, 0, NULL,
     NULL, "compute threads; 0 = all cores"},
    // roles ----------------------------------------------------------------------------------
    {"roles", "samplers", T(INT), OFF(roles.samplers), "1", "1", 0, 1, 256, 0, NULL, GRPO, NULL,
     NULL, "sampler worker processes; a step's prompts are spread over them"},
    {"roles", "reference", T(ENUM), OFF(roles.reference), "actor", "actor", 0, 0, 0, 0, s_refs,
     GRPO, NULL, NULL,
     "where the reference policy runs: actor = in the actor (adapters disabled with LoRA, a "
     "frozen copy with full tuning)"},
    {"roles", "actor_threads", T(INT), OFF(roles.actor_threads), "0", "0", 0, 0, 4096, 0, NULL,
     GRPO, NULL, NULL, "compute threads of the actor worker; 0 = train.threads"},
    {"roles", "sampler_threads", T(INT), OFF(roles.sampler_threads), "0", "0", 0, 0, 4096, 0,
     NULL, GRPO, NULL, NULL, "compute threads of each sampler worker; 0 = train.threads"},
    {"roles", "reward_timeout", T(FLOAT), OFF(roles.reward_timeout), "60", "60", GT, 0, 86400,
     0, NULL, GRPO, NULL, NULL, "seconds one reward may take to score one step's batch"},
    {"roles", "request_timeout", T(FLOAT), OFF(roles.request_timeout), "600", "600", GT, 0,
     86400, 0, NULL, GRPO, NULL, NULL,
     "seconds a worker may take to answer one request before the run stops"},
    {"roles", "heartbeat", T(FLOAT), OFF(roles.heartbeat), "1", "1", GT, 0, 3600, 0, NULL, GRPO,
     NULL, NULL, "seconds between worker heartbeats; 10 missed = the worker is lost"},
    {"roles", "stop_grace", T(FLOAT), OFF(roles.stop_grace), "20", "20", GT, 0, 86400, 0, NULL,
     GRPO, NULL, NULL,
     "seconds from SIGTERM/SIGINT until the run is gone: the step and a checkpoint finish "
     "when they fit, otherwise the workers stop at once"},
};
#define S_NKEYS ((int)(sizeof s_keys / sizeof s_keys[0]))

int rl_recipe_schema(const rl_recipe_key_t **keys) {
    *keys = s_keys;
    return S_NKEYS;
}

const char *rl_recipe_type_name(rl_recipe_type_t type) {
    static const char *const names[] = {"bool",      "int",         "float",      "string",
                                        "enum",      "path (file)", "path (dir)", "string list",
                                        "float list", "map"};
    return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "?";
}

static const s_section_t *s_section(const char *name) {
    for (int i = 0; i < S_NSECTIONS; i++) {
        if (!strcmp(s_sections[i].name, name)) {
            return &s_sections[i];
        }
    }
    return NULL;
}

static const rl_recipe_key_t *s_key(const char *section, const char *key) {
    for (int i = 0; i < S_NKEYS; i++) {
        if (!strcmp(s_keys[i].section, section) && !strcmp(s_keys[i].key, key)) {
            return &s_keys[i];
        }
    }
    return NULL;
}

// "optim.lr" or "rewards.builtin" / "rewards[3].builtin" -> the row
static const rl_recipe_key_t *s_key_dotted(const char *dotted) {
    char sec[64];
    const char *dot = strchr(dotted, '.');
    if (!dot) {
        return NULL;
    }
    size_t n = strcspn(dotted, ".[");
    if (n >= sizeof sec) {
        return NULL;
    }
    memcpy(sec, dotted, n);
    sec[n] = '\0';
    return s_key(sec, dot + 1);
}

const char *rl_recipe_enum_name(const char *dotted_key, int value) {
    const rl_recipe_key_t *k = s_key_dotted(dotted_key);
    if (!k || k->type != RL_RECIPE_T_ENUM || value < 0) {
        return NULL;
    }
    for (int i = 0; k->choices[i]; i++) {
        if (i == value) {
            return k->choices[i];
        }
    }
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// private state: source positions of every key that a recipe or an override set

typedef struct {
    char *key;
    const char *file;
    int line, col;
} s_loc_t;

struct rl_recipe_priv {
    s_loc_t *locs;
    int n, cap;
    char **files; // owned names referenced by locs: [0] the recipe, then "<override N>"
    int nfiles;
};

static const s_loc_t *s_loc_find(const rl_recipe_priv_t *p, const char *key) {
    for (int i = 0; p && i < p->n; i++) {
        if (!strcmp(p->locs[i].key, key)) {
            return &p->locs[i];
        }
    }
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// load context and the error list

typedef struct {
    int ord, line, col, seq;
    char *msg;
} s_err_t;

typedef struct {
    rl_recipe_t *r;
    unsigned flags;
    const char *file; // == r->priv->files[0]; nodes from the recipe carry this pointer
    char *base;       // absolute directory of the recipe (relative inputs resolve here)
    char *cwd;        // absolute working directory (overrides and run.dir resolve here)
    s_err_t *errs;
    int nerr, cap, dropped;
    int oom;
} s_ctx_t;

static int s_file_ord(const s_ctx_t *c, const char *file) {
    if (!file) {
        return INT_MAX;
    }
    for (int i = 0; i < c->r->priv->nfiles; i++) {
        if (file == c->r->priv->files[i]) {
            return i;
        }
    }
    return INT_MAX - 1;
}

static void s_push(s_ctx_t *c, const char *file, int line, int col, char *msg) {
    if (!msg) {
        c->oom = 1;
        return;
    }
    if (c->nerr >= RL_RECIPE_MAX_ERRORS) {
        c->dropped++;
        free(msg);
        return;
    }
    if (c->nerr == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        s_err_t *e = realloc(c->errs, (size_t)cap * sizeof *e);
        if (!e) {
            c->oom = 1;
            free(msg);
            return;
        }
        c->errs = e;
        c->cap = cap;
    }
    c->errs[c->nerr] = (s_err_t){s_file_ord(c, file), line, col, c->nerr, msg};
    c->nerr++;
}

static void s_verr(s_ctx_t *c, const char *file, int line, int col, const char *path,
                   const char *fmt, va_list ap) {
    char body[1024], head[512];
    vsnprintf(body, sizeof body, fmt, ap);
    if (file && line > 0) {
        snprintf(head, sizeof head, "%s:%d:%d: ", file, line, col);
    } else if (file) {
        snprintf(head, sizeof head, "%s: ", file);
    } else {
        head[0] = '\0';
    }
    size_t need = strlen(head) + (path ? strlen(path) + 2 : 0) + strlen(body) + 1;
    char *msg = malloc(need);
    if (msg) {
        snprintf(msg, need, "%s%s%s%s", head, path ? path : "", path ? ": " : "", body);
    }
    s_push(c, file, line, col, msg);
}

// error at an explicit position
static void s_err_at(s_ctx_t *c, const char *file, int line, int col, const char *path,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void s_err_at(s_ctx_t *c, const char *file, int line, int col, const char *path,
                     const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s_verr(c, file, line, col, path, fmt, ap);
    va_end(ap);
}

// error at a node: "file:line:col: path: ..."
static void s_err(s_ctx_t *c, const rl_yaml_node_t *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_err(s_ctx_t *c, const rl_yaml_node_t *at, const char *path, const char *fmt,
                  ...) {
    va_list ap;
    va_start(ap, fmt);
    s_verr(c, at ? at->file : c->file, at ? at->line : 0, at ? at->col : 0, path, fmt, ap);
    va_end(ap);
}

// error at the recorded position of a key (or the recipe file when it was defaulted)
static void s_err_key(s_ctx_t *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_err_key(s_ctx_t *c, const char *key, const char *fmt, ...) {
    const s_loc_t *l = s_loc_find(c->r->priv, key);
    va_list ap;
    va_start(ap, fmt);
    s_verr(c, l ? l->file : c->file, l ? l->line : 0, l ? l->col : 0, key, fmt, ap);
    va_end(ap);
}

static int s_err_cmp(const void *a, const void *b) {
    const s_err_t *x = a, *y = b;
    if (x->ord != y->ord) {
        return x->ord < y->ord ? -1 : 1;
    }
    if (x->line != y->line) { // errors without a line (missing keys) go last
        unsigned lx = (unsigned)x->line - 1u, ly = (unsigned)y->line - 1u;
        return lx < ly ? -1 : 1;
    }
    if (x->col != y->col) {
        return x->col < y->col ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void s_loc_add(s_ctx_t *c, const char *key, const rl_yaml_node_t *at) {
    rl_recipe_priv_t *p = c->r->priv;
    for (int i = 0; i < p->n; i++) {
        if (!strcmp(p->locs[i].key, key)) {
            p->locs[i].file = at->file;
            p->locs[i].line = at->line;
            p->locs[i].col = at->col;
            return;
        }
    }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        s_loc_t *l = realloc(p->locs, (size_t)cap * sizeof *l);
        if (!l) {
            c->oom = 1;
            return;
        }
        p->locs = l;
        p->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        c->oom = 1;
        return;
    }
    p->locs[p->n++] = (s_loc_t){k, at->file, at->line, at->col};
}

// ---------------------------------------------------------------------------------------------
// did you mean: Levenshtein distance, small strings only

static int s_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) {
        return 99;
    }
    int prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) {
        prev[j] = (int)j;
    }
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

// the closest of `cands` to `word`, or NULL when nothing is close enough to be a typo
static const char *s_closest(const char *word, const char *const *cands, int n) {
    const char *best = NULL;
    int bestd = 99;
    int len = (int)strlen(word);
    int limit = len <= 3 ? 1 : (len <= 8 ? 2 : 3);
    for (int i = 0; i < n; i++) {
        int d = s_edit_distance(word, cands[i]);
        size_t lc = strlen(cands[i]);
        if (lc >= 3 && d > limit && !strncmp(word, cands[i], lc)) {
            d = limit; // "optimizer" for "optim": a longer spelling of a known name
        }
        if (d < bestd) {
            bestd = d;
            best = cands[i];
        }
    }
    return bestd <= limit ? best : NULL;
}

// ---------------------------------------------------------------------------------------------
// describing values in messages

static void s_quote_short(const char *s, char *out, size_t n) {
    size_t o = 0, i = 0;
    for (; s[i] && o + 8 < n && i < 48; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f) {
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    if (s[i] && o + 4 < n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static void s_found(const rl_yaml_node_t *v, char *out, size_t n) {
    char q[256];
    if (v->kind == RL_YAML_SEQ) {
        snprintf(out, n, "a list");
        return;
    }
    if (v->kind == RL_YAML_MAP) {
        snprintf(out, n, "a map");
        return;
    }
    s_quote_short(v->str, q, sizeof q);
    switch (rl_yaml_scalar_type(v)) {
    case RL_YAML_T_NULL: snprintf(out, n, "null"); break;
    case RL_YAML_T_BOOL: snprintf(out, n, "boolean %s", q); break;
    case RL_YAML_T_INT:
    case RL_YAML_T_FLOAT: snprintf(out, n, "number %s", q); break;
    default: snprintf(out, n, "string '%s'", q); break;
    }
}

static void s_join(const char *const *items, char *out, size_t n) {
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; items[i] && o < n; i++) {
        o += (size_t)snprintf(out + o, n - o, "%s%s", i ? ", " : "", items[i]);
    }
}

static void s_fmt_num(double v, char *out, size_t n) {
    snprintf(out, n, "%.10g", v);
}

// "(0, 1]", ">= 1", "an integer in [1, 64]"
static void s_range(const rl_recipe_key_t *k, char *out, size_t n) {
    char lo[32], hi[32];
    s_fmt_num(k->min, lo, sizeof lo);
    s_fmt_num(k->max, hi, sizeof hi);
    int gt = (k->flags & RL_RECIPE_K_MIN_EXCL) != 0, lt = (k->flags & RL_RECIPE_K_MAX_EXCL) != 0;
    const char *what = k->type == RL_RECIPE_T_INT ? "an integer" : "a number";
    int no_max = k->max >= BIG || (k->type == RL_RECIPE_T_INT && k->max >= IMAX);
    int no_min = k->min <= -BIG;
    if (no_max && no_min) {
        snprintf(out, n, "%s", what);
    } else if (no_max) {
        snprintf(out, n, "%s %s %s", what, gt ? ">" : ">=", lo);
    } else {
        snprintf(out, n, "%s in %s%s, %s%s", what, gt ? "(" : "[", lo, hi, lt ? ")" : "]");
    }
}

// ---------------------------------------------------------------------------------------------
// paths: inputs are made absolute against the recipe's directory, lexically (no symlink
// resolution), so the printed recipe works from any directory and is stable across runs.

static char *s_path_join_norm(const char *base, const char *p) {
    size_t lb = base ? strlen(base) : 0, lp = strlen(p);
    char *joined = malloc(lb + lp + 2);
    if (!joined) {
        return NULL;
    }
    if (p[0] == '/' || !base) {
        memcpy(joined, p, lp + 1);
    } else {
        memcpy(joined, base, lb);
        joined[lb] = '/';
        memcpy(joined + lb + 1, p, lp + 1);
    }
    // normalise in place: drop "", "." components, pop on ".."
    char *out = malloc(strlen(joined) + 2);
    if (!out) {
        free(joined);
        return NULL;
    }
    size_t o = 0;
    char *save = NULL;
    for (char *tok = strtok_r(joined, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (!strcmp(tok, ".")) {
            continue;
        }
        if (!strcmp(tok, "..")) {
            while (o > 0 && out[o - 1] != '/') {
                o--;
            }
            if (o > 0) {
                o--;
            }
            continue;
        }
        out[o++] = '/';
        size_t lt = strlen(tok);
        memcpy(out + o, tok, lt);
        o += lt;
    }
    if (o == 0) {
        out[o++] = '/';
    }
    out[o] = '\0';
    free(joined);
    return out;
}

// ---------------------------------------------------------------------------------------------
// converting one value into its field

typedef struct {
    void *base; // rl_recipe_t or one rl_recipe_reward_t
    int entry;  // list entry index, -1 for a map section
} s_dst_t;

#define S_FIELD(d, k, T) ((T *)((char *)(d)->base + (k)->offset))

static void s_strlist_free(rl_recipe_strlist_t *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->items[i]);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static void s_field_free(const rl_recipe_key_t *k, const s_dst_t *d) {
    switch (k->type) {
    case RL_RECIPE_T_STRING:
    case RL_RECIPE_T_PATH_FILE:
    case RL_RECIPE_T_PATH_DIR:
    case RL_RECIPE_T_MAP: {
        char **s = S_FIELD(d, k, char *);
        free(*s);
        *s = NULL;
        break;
    }
    case RL_RECIPE_T_STRING_LIST: s_strlist_free(S_FIELD(d, k, rl_recipe_strlist_t)); break;
    default: break;
    }
}

static int s_scalar_string(s_ctx_t *c, const rl_yaml_node_t *v, const rl_yaml_node_t *at,
                           const char *path, const char *what) {
    char f[300];
    if (v->kind != RL_YAML_SCALAR || rl_yaml_scalar_type(v) == RL_YAML_T_NULL) {
        s_found(v, f, sizeof f);
        s_err(c, at, path, "expected %s, found %s", what, f);
        return -1;
    }
    if (strlen(v->str) != v->len) {
        s_err(c, at, path, "the value contains a NUL character");
        return -1;
    }
    return 0;
}

static int s_number(s_ctx_t *c, const rl_recipe_key_t *k, const rl_yaml_node_t *v,
                    const rl_yaml_node_t *at, const char *path, double *out) {
    char f[300], rg[128];
    rl_yaml_type_t t = v->kind == RL_YAML_SCALAR ? rl_yaml_scalar_type(v) : RL_YAML_T_STRING;
    int want_int = k->type == RL_RECIPE_T_INT;
    if (v->kind != RL_YAML_SCALAR || (t != RL_YAML_T_INT && (want_int || t != RL_YAML_T_FLOAT))) {
        s_found(v, f, sizeof f);
        s_err(c, at, path, "expected %s, found %s", want_int ? "an integer" : "a number", f);
        return -1;
    }
    double x = strtod(v->str, NULL);
    s_range(k, rg, sizeof rg);
    if (!isfinite(x)) {
        s_err(c, at, path, "%s is out of range; allowed: %s", v->str, rg);
        return -1;
    }
    int gt = (k->flags & RL_RECIPE_K_MIN_EXCL) != 0, lt = (k->flags & RL_RECIPE_K_MAX_EXCL) != 0;
    int lo_bad = gt ? !(x > k->min) : !(x >= k->min), hi_bad = lt ? !(x < k->max) : !(x <= k->max);
    // float keys are kept as doubles here but reach float code (lora.alpha becomes the float
    // LoRA scale, optim.eps the float AdamW epsilon, rewards meet float losses): a value a
    // float cannot hold would silently become infinity or 0 there. A bound of +-BIG means
    // "none", so past it the float limit is the one to report.
    double a = fabs(x);
    int f32 = k->type == RL_RECIPE_T_FLOAT;
    int over = f32 && a > FLT_MAX, under = f32 && a > 0 && a < FLT_TRUE_MIN;
    char q[64];
    s_quote_short(v->str, q, sizeof q);
    if ((lo_bad && !(over && k->min <= -BIG)) || (hi_bad && !(over && k->max >= BIG))) {
        s_err(c, at, path, "%s is out of range; allowed: %s", q, rg);
        return -1;
    }
    if (over) {
        s_err(c, at, path, "%s is out of range (a 32-bit float overflows to infinity); allowed: "
              "%s, at most %.10g in magnitude", q, rg, (double)FLT_MAX);
        return -1;
    }
    if (under) {
        s_err(c, at, path, "%s is out of range (a 32-bit float rounds it to 0); allowed: %s, "
              "nonzero values at least %.10g in magnitude", q, rg, (double)FLT_TRUE_MIN);
        return -1;
    }
    *out = x;
    return 0;
}

static int s_choice(s_ctx_t *c, const char *const *choices, const rl_yaml_node_t *v,
                    const rl_yaml_node_t *at, const char *path) {
    char all[512], f[300];
    s_join(choices, all, sizeof all);
    if (v->kind != RL_YAML_SCALAR || rl_yaml_scalar_type(v) == RL_YAML_T_NULL) {
        s_found(v, f, sizeof f);
        s_err(c, at, path, "expected one of %s, found %s", all, f);
        return -1;
    }
    int n = 0;
    for (; choices[n]; n++) {
        if (!strcmp(choices[n], v->str)) {
            return n;
        }
    }
    const char *near = s_closest(v->str, choices, n);
    s_quote_short(v->str, f, sizeof f);
    if (near) {
        s_err(c, at, path, "'%s' is not one of %s; did you mean '%s'?", f, all, near);
    } else {
        s_err(c, at, path, "'%s' is not one of %s", f, all);
    }
    return -1;
}

// Converts v into the field of k at d. `at` locates errors (the key, or a list item).
// Returns 0, or -1 after recording an error (the field keeps its previous value).
static int s_convert(s_ctx_t *c, const rl_recipe_key_t *k, const s_dst_t *d,
                     const rl_yaml_node_t *v, const rl_yaml_node_t *at, const char *path) {
    char f[300], item_path[320];
    switch (k->type) {
    case RL_RECIPE_T_BOOL: {
        if (v->kind != RL_YAML_SCALAR || rl_yaml_scalar_type(v) != RL_YAML_T_BOOL) {
            static const char *const yaml11[] = {"yes", "no", "on", "off", "y", "n", "Yes",
                                                 "No", "On", "Off", "YES", "NO", "ON", "OFF"};
            int old_bool = 0;
            for (size_t i = 0; v->kind == RL_YAML_SCALAR && i < 14; i++) {
                old_bool |= v->plain && !strcmp(v->str, yaml11[i]);
            }
            s_found(v, f, sizeof f);
            s_err(c, at, path, "expected true or false, found %s%s", f,
                  old_bool ? " (YAML 1.1's yes/no/on/off are not booleans here)" : "");
            return -1;
        }
        *S_FIELD(d, k, bool) = v->str[0] == 't' || v->str[0] == 'T';
        return 0;
    }
    case RL_RECIPE_T_INT:
    case RL_RECIPE_T_FLOAT: {
        double x;
        if (s_number(c, k, v, at, path, &x)) {
            return -1;
        }
        if (k->type == RL_RECIPE_T_INT) {
            *S_FIELD(d, k, int) = (int)x; // exact: |x| <= IMAX and integral
        } else {
            *S_FIELD(d, k, double) = x;
        }
        return 0;
    }
    case RL_RECIPE_T_ENUM: {
        int i = s_choice(c, k->choices, v, at, path);
        if (i < 0) {
            return -1;
        }
        *S_FIELD(d, k, int) = i;
        return 0;
    }
    case RL_RECIPE_T_STRING:
    case RL_RECIPE_T_PATH_FILE:
    case RL_RECIPE_T_PATH_DIR: {
        int is_path = k->type != RL_RECIPE_T_STRING;
        if (s_scalar_string(c, v, at, path, is_path ? "a path" : "a string")) {
            return -1;
        }
        if (!v->str[0]) {
            s_err(c, at, path, "expected a non-empty %s", is_path ? "path" : "string");
            return -1;
        }
        char *s;
        if (is_path) {
            // recipe paths resolve against the recipe; overrides and run.dir against the cwd
            const char *base = v->file == c->file && k->offset != OFF(run.dir) ? c->base
                                                                             : c->cwd;
            s = s_path_join_norm(base, v->str);
        } else {
            s = strdup(v->str);
        }
        if (!s) {
            c->oom = 1;
            return -1;
        }
        s_field_free(k, d);
        *S_FIELD(d, k, char *) = s;
        return 0;
    }
    case RL_RECIPE_T_STRING_LIST: {
        rl_recipe_strlist_t l = {0};
        int n = v->kind == RL_YAML_SEQ ? v->n : 1;
        if (v->kind == RL_YAML_MAP) {
            s_err(c, at, path, "expected a list of strings, found a map");
            return -1;
        }
        if (n > 4096) {
            s_err(c, at, path, "too many items (%d; limit 4096)", n);
            return -1;
        }
        l.items = calloc((size_t)n + 1, sizeof *l.items);
        if (!l.items) {
            c->oom = 1;
            return -1;
        }
        int bad = 0;
        for (int i = 0; i < n; i++) {
            const rl_yaml_node_t *it = v->kind == RL_YAML_SEQ ? v->kids[i] : v;
            const rl_yaml_node_t *it_at = v->kind == RL_YAML_SEQ ? it : at;
            if (v->kind == RL_YAML_SEQ) {
                snprintf(item_path, sizeof item_path, "%s[%d]", path, i);
            } else {
                snprintf(item_path, sizeof item_path, "%s", path);
            }
            if (s_scalar_string(c, it, it_at, item_path, "a string")) {
                bad = 1;
                continue;
            }
            if (k->choices && s_choice(c, k->choices, it, it_at, item_path) < 0) {
                bad = 1;
                continue;
            }
            l.items[l.n] = strdup(it->str);
            if (!l.items[l.n]) {
                c->oom = 1;
                bad = 1;
                break;
            }
            l.n++;
        }
        if (bad) {
            s_strlist_free(&l);
            return -1;
        }
        s_field_free(k, d);
        *S_FIELD(d, k, rl_recipe_strlist_t) = l;
        return 0;
    }
    case RL_RECIPE_T_FLOAT_LIST: {
        if (v->kind != RL_YAML_SEQ || v->n != k->count) {
            s_found(v, f, sizeof f);
            if (v->kind == RL_YAML_SEQ) {
                snprintf(f, sizeof f, "a list of %d", v->n);
            }
            s_err(c, at, path, "expected a list of %d numbers, found %s", k->count, f);
            return -1;
        }
        double tmp[16];
        int bad = 0;
        // items share the key's range; a FLOAT row with the same bounds checks each one
        rl_recipe_key_t item = *k;
        item.type = RL_RECIPE_T_FLOAT;
        for (int i = 0; i < v->n && i < 16; i++) {
            snprintf(item_path, sizeof item_path, "%s[%d]", path, i);
            if (s_number(c, &item, v->kids[i], v->kids[i], item_path, &tmp[i])) {
                bad = 1;
            }
        }
        if (bad) {
            return -1;
        }
        memcpy(S_FIELD(d, k, double), tmp, (size_t)k->count * sizeof(double));
        return 0;
    }
    case RL_RECIPE_T_MAP: {
        if (v->kind != RL_YAML_MAP) {
            s_found(v, f, sizeof f);
            s_err(c, at, path, "expected a map, found %s", f);
            return -1;
        }
        json_t *j = rl_yaml_to_json(v);
        char *s = j ? json_dumps(j, 0) : NULL;
        json_decref(j);
        if (!s) {
            c->oom = 1;
            return -1;
        }
        s_field_free(k, d);
        *S_FIELD(d, k, char *) = s;
        return 0;
    }
    }
    return -1;
}

// Sets every key of `section` to its table default (zero/NULL/-1 when it has none).
static void s_defaults(s_ctx_t *c, const char *section, const s_dst_t *d) {
    for (int i = 0; i < S_NKEYS; i++) {
        const rl_recipe_key_t *k = &s_keys[i];
        if (strcmp(k->section, section) != 0) {
            continue;
        }
        if (k->type == RL_RECIPE_T_ENUM) {
            *S_FIELD(d, k, int) = -1;
        }
        if (!k->def) {
            continue;
        }
        rl_yaml_node_t *v = NULL;
        char e[256];
        int rc = rl_yaml_parse(k->def, strlen(k->def), "<default>", 0, &v, e, sizeof e);
        if (rc == RL_ENOMEM) {
            c->oom = 1;
            continue;
        }
        RL_ASSERT(rc == 0 && v); // a schema row with a default the parser rejects
        int nerr = c->nerr;
        rc = s_convert(c, k, d, v, v, k->key);
        RL_ASSERT(rc == 0 || c->oom);
        RL_ASSERT(c->nerr == nerr);
        rl_yaml_destroy(&v);
    }
}

// ---------------------------------------------------------------------------------------------
// the tree walk

static int s_is_null(const rl_yaml_node_t *v) {
    return v->kind == RL_YAML_SCALAR && rl_yaml_scalar_type(v) == RL_YAML_T_NULL;
}

// index of an earlier pair of `map` with the same key as pair i, or -1
static int s_dup_of(const rl_yaml_node_t *map, int i) {
    const rl_yaml_node_t *k = map->kids[2 * i];
    for (int j = 0; j < i; j++) {
        const rl_yaml_node_t *o = map->kids[2 * j];
        if (o->len == k->len && !memcmp(o->str, k->str, k->len)) {
            return j;
        }
    }
    return -1;
}

// YAML forbids duplicate keys and libyaml does not check; report every one, anywhere.
static void s_check_dups(s_ctx_t *c, const rl_yaml_node_t *n, const char *path) {
    char sub[512];
    if (n->kind == RL_YAML_SEQ) {
        for (int i = 0; i < n->n; i++) {
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            s_check_dups(c, n->kids[i], sub);
        }
    } else if (n->kind == RL_YAML_MAP) {
        for (int i = 0; i < n->n; i++) {
            const rl_yaml_node_t *k = n->kids[2 * i];
            char q[128];
            s_quote_short(k->str, q, sizeof q);
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", q);
            int j = s_dup_of(n, i);
            if (j >= 0) {
                const rl_yaml_node_t *first = n->kids[2 * j];
                s_err(c, k, sub, "duplicate key (first at %s:%d:%d); YAML allows a key once",
                      first->file, first->line, first->col);
                continue;
            }
            s_check_dups(c, n->kids[2 * i + 1], sub);
        }
    }
}

static void s_unknown_key(s_ctx_t *c, const char *section, const rl_yaml_node_t *k,
                          const char *path) {
    const char *cands[128];
    int n = 0;
    for (int i = 0; i < S_NKEYS && n < 128; i++) {
        if (!strcmp(s_keys[i].section, section)) {
            cands[n++] = s_keys[i].key;
        }
    }
    cands[n] = NULL;
    const char *near = s_closest(k->str, cands, n);
    if (near) {
        s_err(c, k, path, "unknown key; did you mean '%s'?", near);
        return;
    }
    for (int i = 0; i < S_NKEYS; i++) { // a key written under the wrong section
        if (!strcmp(s_keys[i].key, k->str) && strcmp(s_keys[i].section, section) != 0) {
            s_err(c, k, path, "unknown key; did you mean '%s.%s'?", s_keys[i].section,
                  s_keys[i].key);
            return;
        }
    }
    char all[1024];
    s_join(cands, all, sizeof all);
    s_err(c, k, path, "unknown key; %s takes: %s", section, all);
}

// Applies the pairs of `map` to the keys of `section` at d; `prefix` is "optim" or
// "rewards[2]".
static void s_apply_map(s_ctx_t *c, const char *section, const char *prefix,
                        const rl_yaml_node_t *map, const s_dst_t *d) {
    char path[512], q[128];
    for (int i = 0; i < map->n; i++) {
        const rl_yaml_node_t *kn = map->kids[2 * i], *v = map->kids[2 * i + 1];
        if (s_dup_of(map, i) >= 0) {
            continue; // reported by s_check_dups
        }
        s_quote_short(kn->str, q, sizeof q);
        snprintf(path, sizeof path, "%s.%s", prefix, q);
        const rl_recipe_key_t *k = s_key(section, kn->str);
        if (!k) {
            s_unknown_key(c, section, kn, path);
            continue;
        }
        if (s_is_null(v)) {
            if (k->flags & RL_RECIPE_K_REQUIRED) {
                s_err(c, kn, path, "required; found null");
                s_loc_add(c, path, kn);
            }
            continue; // null = the default
        }
        s_convert(c, k, d, v, kn, path);
        s_loc_add(c, path, kn);
    }
}

static void s_walk(s_ctx_t *c, const rl_yaml_node_t *root) {
    rl_recipe_t *r = c->r;
    char f[300];
    for (int i = 0; i < root->n; i++) {
        const rl_yaml_node_t *kn = root->kids[2 * i], *v = root->kids[2 * i + 1];
        if (s_dup_of(root, i) >= 0) {
            continue;
        }
        const s_section_t *sec = s_section(kn->str);
        char q[128];
        s_quote_short(kn->str, q, sizeof q);
        if (!sec) {
            const char *names[S_NSECTIONS + 1];
            for (int j = 0; j < S_NSECTIONS; j++) {
                names[j] = s_sections[j].name;
            }
            names[S_NSECTIONS] = NULL;
            const char *near = s_closest(kn->str, names, S_NSECTIONS);
            const rl_recipe_key_t *elsewhere = NULL;
            for (int j = 0; j < S_NKEYS && !near; j++) {
                if (!strcmp(s_keys[j].key, kn->str)) {
                    elsewhere = &s_keys[j];
                    break;
                }
            }
            char all[256];
            s_join(names, all, sizeof all);
            if (near) {
                s_err(c, kn, q, "unknown section; did you mean '%s'?", near);
            } else if (elsewhere) {
                s_err(c, kn, q, "unknown section; did you mean '%s.%s'?", elsewhere->section,
                      elsewhere->key);
            } else {
                s_err(c, kn, q, "unknown section; sections are: %s", all);
            }
            continue;
        }
        s_loc_add(c, sec->name, kn);
        if (s_is_null(v)) {
            continue; // "lora:" with nothing under it: all defaults
        }
        if (!sec->is_list) {
            if (v->kind != RL_YAML_MAP) {
                s_found(v, f, sizeof f);
                s_err(c, kn, q, "expected a map of keys, found %s", f);
                continue;
            }
            s_dst_t d = {r, -1};
            s_apply_map(c, sec->name, sec->name, v, &d);
            continue;
        }
        // rewards: a list of maps
        if (v->kind != RL_YAML_SEQ) {
            s_found(v, f, sizeof f);
            s_err(c, kn, q, "expected a list of entries (- name: ...), found %s", f);
            continue;
        }
        if (v->n > RL_RECIPE_MAX_REWARDS) {
            s_err(c, kn, q, "%d entries; at most %d are allowed", v->n, RL_RECIPE_MAX_REWARDS);
            continue;
        }
        rl_recipe_reward_t *rw = calloc((size_t)v->n + 1, sizeof *rw);
        if (!rw) {
            c->oom = 1;
            return;
        }
        r->rewards = rw; // the section is walked once: a repeated one is a skipped duplicate
        r->n_rewards = v->n;
        for (int j = 0; j < v->n; j++) {
            s_dst_t d = {&rw[j], j};
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%s[%d]", sec->name, j);
            s_defaults(c, sec->name, &d);
            const rl_yaml_node_t *item = v->kids[j];
            if (item->kind != RL_YAML_MAP) {
                s_found(item, f, sizeof f);
                s_err(c, item, prefix, "expected a map (name:, builtin: or plugin:, ...), "
                                       "found %s", f);
                continue;
            }
            s_loc_add(c, prefix, item);
            s_apply_map(c, sec->name, prefix, item, &d);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// overrides: "a.b.c=<yaml>" spliced into the tree before the walk, so they get exactly the
// checks a recipe gets and their errors point into the argument.

static int s_is_index(const char *s, int *out) {
    if (!*s || strlen(s) > 6) {
        return 0;
    }
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
    }
    *out = atoi(s);
    return 1;
}

// splits "rewards[0].config.x" into "rewards","0","config","x"; returns the count or -1
static int s_split_key(char *key, char **parts, int max) {
    int n = 0;
    for (char *p = key; *p; p++) {
        if (*p == '[') {
            *p = '.';
        } else if (*p == ']') {
            if (p[1] && p[1] != '.' && p[1] != '[') {
                return -1;
            }
            memmove(p, p + 1, strlen(p));
            p--;
        }
    }
    char *s = key;
    while (n < max) {
        char *dot = strchr(s, '.');
        if (dot) {
            *dot = '\0';
        }
        if (!*s) {
            return -1;
        }
        parts[n++] = s;
        if (!dot) {
            return n;
        }
        s = dot + 1;
    }
    return -1;
}

static void s_apply_override(s_ctx_t *c, rl_yaml_node_t *root, const char *arg,
                             const char *fname) {
    const char *eq = strchr(arg, '=');
    rl_yaml_node_t at = {.kind = RL_YAML_SCALAR, .file = fname, .line = 1, .col = 1};
    char q[128];
    s_quote_short(arg, q, sizeof q);
    if (!eq || eq == arg) {
        s_err(c, &at, NULL, "'%s': expected key=value (e.g. optim.lr=1e-4)", q);
        return;
    }
    size_t klen = (size_t)(eq - arg);
    char *key = malloc(klen + 1);
    if (!key) {
        c->oom = 1;
        return;
    }
    memcpy(key, arg, klen);
    key[klen] = '\0';
    char shown[128];
    s_quote_short(key, shown, sizeof shown);
    char *parts[16];
    int np = s_split_key(key, parts, 16);
    if (np < 0) {
        s_err(c, &at, shown, "malformed key; write section.key (e.g. optim.lr)");
        free(key);
        return;
    }
    rl_yaml_node_t *val = NULL;
    char e[1024];
    const char *text = eq + 1;
    int rc = rl_yaml_parse(text, strlen(text), fname, (int)klen + 1, &val, e, sizeof e);
    if (rc) {
        if (rc == RL_ENOMEM) {
            c->oom = 1;
        } else {
            // e already reads "<override N>:line:col: ..."
            s_push(c, fname, 1, 0, strdup(e));
        }
        free(key);
        return;
    }
    if (!val) {
        val = rl_yaml_node_new(RL_YAML_SCALAR, fname, 1, (int)klen + 2, "", 1);
        if (!val) {
            c->oom = 1;
            free(key);
            return;
        }
    }
    rl_yaml_node_t *node = root;
    for (int i = 0; i < np; i++) {
        int last = i == np - 1, idx;
        if (node->kind == RL_YAML_SEQ) {
            if (!s_is_index(parts[i], &idx) || idx >= node->n) {
                s_err(c, &at, shown, "'%s' is not an index of this list (it has %d entries)",
                      parts[i], node->n);
                break;
            }
            if (last) {
                rl_yaml_destroy(&node->kids[idx]);
                node->kids[idx] = val;
                val = NULL;
                break;
            }
            node = node->kids[idx];
            continue;
        }
        if (node->kind != RL_YAML_MAP) {
            s_err(c, &at, shown, "cannot set a key inside a value that is not a map");
            break;
        }
        rl_yaml_node_t *kn = NULL;
        rl_yaml_node_t *child = rl_yaml_map_get(node, parts[i], &kn);
        if (child && last) {
            for (int j = 0; j < node->n; j++) {
                if (node->kids[2 * j] == kn) {
                    rl_yaml_destroy(&node->kids[2 * j + 1]);
                    node->kids[2 * j + 1] = val;
                }
            }
            kn->file = fname; // the key now lives on the command line
            kn->line = 1;
            kn->col = 1;
            val = NULL;
            break;
        }
        if (child && s_is_null(child)) { // "lora:" left empty, then lora.r=8
            rl_yaml_node_t *m = rl_yaml_node_new(RL_YAML_MAP, fname, 1, 1, NULL, 0);
            if (!m) {
                c->oom = 1;
                break;
            }
            for (int j = 0; j < node->n; j++) {
                if (node->kids[2 * j] == kn) {
                    rl_yaml_destroy(&node->kids[2 * j + 1]);
                    node->kids[2 * j + 1] = m;
                }
            }
            node = m;
            continue;
        }
        if (child) {
            node = child;
            continue;
        }
        if (node->n >= RL_YAML_MAX_MAP_KEYS) {
            s_err(c, &at, shown, "too many keys");
            break;
        }
        rl_yaml_node_t *nk = rl_yaml_node_new(RL_YAML_SCALAR, fname, 1, 1, parts[i], 1);
        rl_yaml_node_t *nv = last ? val : rl_yaml_node_new(RL_YAML_MAP, fname, 1, 1, NULL, 0);
        if (!nk || !nv || rl_yaml_append(node, nk, nv)) {
            rl_yaml_destroy(&nk);
            if (!last) {
                rl_yaml_destroy(&nv);
            }
            c->oom = 1;
            break;
        }
        if (last) {
            val = NULL;
            break;
        }
        node = nv;
    }
    rl_yaml_destroy(&val);
    free(key);
}

// ---------------------------------------------------------------------------------------------
// after the walk: derived defaults, cross-key rules, referenced files

static int s_set(const rl_recipe_t *r, const char *key) {
    return s_loc_find(r->priv, key) != NULL;
}

// names become folder names (run.name) and metric names (rewards[].name)
static int s_name_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

static int s_name_ok(const char *s) {
    if (!*s || !strcmp(s, ".") || !strcmp(s, "..")) {
        return 0;
    }
    for (; *s; s++) {
        if (!s_name_char(*s)) {
            return 0;
        }
    }
    return 1;
}

static char *s_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *s_strdupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return s;
}

// Does key k apply to this recipe (its algorithm and its gate)?
static int s_applies(const rl_recipe_t *r, const rl_recipe_key_t *k) {
    if (k->algos && r->algorithm.name >= 0 && !(k->algos & (1u << r->algorithm.name))) {
        return 0;
    }
    if (k->gate) {
        const rl_recipe_key_t *g = s_key_dotted(k->gate);
        RL_ASSERT(g && g->type == RL_RECIPE_T_BOOL);
        if (!*(const bool *)((const char *)r + g->offset)) {
            return 0;
        }
    }
    return 1;
}

static void s_derive(s_ctx_t *c) {
    rl_recipe_t *r = c->r;
    // run.name: the recipe file's stem, made safe for a folder name
    if (!r->run.name) {
        const char *b = strrchr(r->path, '/');
        b = b ? b + 1 : r->path;
        size_t n = strcspn(b, ".");
        char *s = malloc(n + 4);
        if (!s) {
            c->oom = 1;
            return;
        }
        for (size_t i = 0; i < n; i++) {
            s[i] = s_name_char(b[i]) ? b[i] : '_';
        }
        s[n] = '\0';
        if (!n) {
            strcpy(s, "run");
        }
        r->run.name = s;
    } else if (!s_name_ok(r->run.name)) {
        s_err_key(c, "run.name", "'%s' cannot name a folder; use letters, digits, '.', '_', '-'",
                  r->run.name);
    }
    if (!r->run.dir) {
        r->run.dir = s_strdupf("%s/runs/%s", strcmp(c->cwd, "/") ? c->cwd : "", r->run.name);
    }
    if (!r->model.tokenizer && r->model.path) {
        r->model.tokenizer = s_strdupf("%s/tokenizer.json", r->model.path);
    }
    if (!r->run.dir || (r->model.path && !r->model.tokenizer)) {
        c->oom = 1;
    }
    // rewards: name defaults to the builtin's; exactly one source; unique names
    for (int i = 0; i < r->n_rewards; i++) {
        rl_recipe_reward_t *w = &r->rewards[i];
        char key[64];
        snprintf(key, sizeof key, "rewards[%d]", i);
        if (!s_set(r, key)) {
            continue; // not a map: already reported
        }
        int has_b = w->builtin >= 0, has_p = w->plugin != NULL;
        char kb[80], kp[80], kname[80];
        snprintf(kb, sizeof kb, "%s.builtin", key);
        snprintf(kp, sizeof kp, "%s.plugin", key);
        snprintf(kname, sizeof kname, "%s.name", key);
        int b_written = s_set(r, kb), p_written = s_set(r, kp);
        if (has_b && has_p) {
            s_err_key(c, kp, "set together with builtin; an entry uses one of them");
        } else if (!has_b && !has_p && !b_written && !p_written) {
            s_err_key(c, key, "needs builtin: (%s) or plugin: <path of a .so>",
                      "math_answer, regex_format, length");
        }
        if (!w->name && has_b) {
            w->name = strdup(s_builtins[w->builtin]);
            if (!w->name) {
                c->oom = 1;
            }
        } else if (!w->name && has_p && !s_set(r, kname)) {
            s_err_key(c, key, "a plugin reward needs a name:");
        } else if (w->name && !s_name_ok(w->name)) {
            s_err_key(c, kname, "'%s' cannot name a metric; use letters, digits, '.', '_', '-'",
                      w->name);
        }
        for (int j = 0; j < i && w->name; j++) {
            if (r->rewards[j].name && !strcmp(r->rewards[j].name, w->name)) {
                s_err_key(c, s_set(r, kname) ? kname : key,
                          "name '%s' is already used by rewards[%d]; names must be unique",
                          w->name, j);
                break;
            }
        }
    }
}

static void s_cross_checks(s_ctx_t *c) {
    rl_recipe_t *r = c->r;
    char key[96];
    // required keys
    for (int i = 0; i < S_NKEYS; i++) {
        const rl_recipe_key_t *k = &s_keys[i];
        if (!(k->flags & RL_RECIPE_K_REQUIRED) || s_section(k->section)->is_list) {
            continue;
        }
        snprintf(key, sizeof key, "%s.%s", k->section, k->key);
        if (!s_set(r, key)) {
            const s_loc_t *sl = s_loc_find(r->priv, k->section);
            s_err_at(c, sl ? sl->file : c->file, sl ? sl->line : 0, sl ? sl->col : 0, key,
                     "required key is missing (%s)", k->doc);
        }
    }
    // keys written for another algorithm, or behind a false gate
    for (int i = 0; i < r->priv->n; i++) {
        const s_loc_t *l = &r->priv->locs[i];
        const rl_recipe_key_t *k = s_key_dotted(l->key);
        if (!k || !strchr(l->key, '.') || s_applies(r, k)) {
            continue;
        }
        if (k->algos && r->algorithm.name >= 0 && !(k->algos & (1u << r->algorithm.name))) {
            char names[64] = "";
            for (int a = 0; s_algos[a]; a++) {
                if (k->algos & (1u << a)) {
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             names[0] ? " or " : "", s_algos[a]);
                }
            }
            s_err_key(c, l->key, "applies only when algorithm.name is %s (this recipe: %s)",
                      names, s_algos[r->algorithm.name]);
        } else if (k->gate) {
            s_err_key(c, l->key, "set while %s is false; set %s: true or remove %s", k->gate,
                      k->gate, l->key);
        }
    }
    // lora.target_modules: all-linear alone, no repeats; expand all-linear
    rl_recipe_strlist_t *tm = &r->lora.target_modules;
    for (int i = 0; i < tm->n; i++) {
        if (!strcmp(tm->items[i], "all-linear") && tm->n > 1) {
            s_err_key(c, "lora.target_modules", "all-linear already names every projection; "
                                                "use it alone");
            break;
        }
        for (int j = 0; j < i; j++) {
            if (!strcmp(tm->items[i], tm->items[j])) {
                s_err_key(c, "lora.target_modules", "'%s' is listed twice", tm->items[i]);
            }
        }
    }
    if (tm->n == 1 && !strcmp(tm->items[0], "all-linear")) {
        rl_recipe_strlist_t all = {calloc(S_NPROJ + 1, sizeof(char *)), 0};
        for (int i = 0; all.items && i < S_NPROJ; i++) {
            if ((all.items[i] = strdup(s_modules[i])) != NULL) {
                all.n++;
            }
        }
        if (all.n != S_NPROJ) {
            c->oom = 1;
        }
        s_strlist_free(tm);
        *tm = all;
    } else if (r->lora.enabled && tm->n == 0) {
        s_err_key(c, "lora.target_modules", "empty; LoRA needs at least one projection");
    }
    // optimizer schedule
    if (r->optim.warmup_steps > 0 && r->optim.warmup_ratio > 0) {
        const s_loc_t *ws = s_loc_find(r->priv, "optim.warmup_steps");
        s_err_key(c, "optim.warmup_ratio", "set together with optim.warmup_steps (at %s:%d:%d); "
                                           "use one of them",
                  ws ? ws->file : c->file, ws ? ws->line : 0, ws ? ws->col : 0);
    }
    if (r->optim.warmup_steps > 0 && r->train.steps > 0 &&
        r->optim.warmup_steps > r->train.steps) {
        s_err_key(c, "optim.warmup_steps", "%d is more than train.steps (%d)",
                  r->optim.warmup_steps, r->train.steps);
    }
    // algorithm
    int algo = r->algorithm.name;
    if (algo == RL_RECIPE_ALGO_GRPO) {
        double dc = r->algorithm.dual_clip;
        if (dc > 0 && dc <= 1) {
            s_err_key(c, "algorithm.dual_clip", "%g: must be 0 (off) or > 1 (e.g. 3)", dc);
        }
        if (r->algorithm.overlong_buffer >= r->sampling.max_new_tokens) {
            s_err_key(c, "algorithm.overlong_buffer",
                      "%d must be less than sampling.max_new_tokens (%d)",
                      r->algorithm.overlong_buffer, r->sampling.max_new_tokens);
        }
        if (r->data.format == RL_RECIPE_FORMAT_PROMPT_COMPLETION ||
            r->data.format == RL_RECIPE_FORMAT_TEXT) {
            s_err_key(c, "data.format", "%s rows hold no prompt to sample from; GRPO takes "
                                        "auto, prompt or messages",
                      s_formats[r->data.format]);
        }
        if (r->n_rewards == 0) {
            const s_loc_t *sl = s_loc_find(r->priv, "rewards");
            s_err_at(c, sl ? sl->file : c->file, sl ? sl->line : 0, sl ? sl->col : 0, "rewards",
                     "GRPO needs at least one reward (e.g. - builtin: math_answer)");
        }
    }
    // batches: micro_batch_size counts sequences and must divide a step's sequences
    long long per_step = r->train.batch_size;
    if (algo == RL_RECIPE_ALGO_GRPO) {
        per_step *= r->algorithm.num_generations;
    }
    if (per_step > 1048576) {
        s_err_key(c, "train.batch_size", "%lld sequences per step is more than 1048576",
                  per_step);
    } else if (!s_set(r, "train.micro_batch_size")) {
        r->train.micro_batch_size = (int)per_step;
    } else if (r->train.micro_batch_size > 0 && per_step % r->train.micro_batch_size != 0) {
        // (<= 0 only when its own conversion failed, already reported)
        if (algo == RL_RECIPE_ALGO_GRPO) {
            s_err_key(c, "train.micro_batch_size",
                      "%d does not divide the %lld sequences of a step (train.batch_size %d x "
                      "algorithm.num_generations %d)",
                      r->train.micro_batch_size, per_step, r->train.batch_size,
                      r->algorithm.num_generations);
        } else {
            s_err_key(c, "train.micro_batch_size", "%d does not divide train.batch_size (%d)",
                      r->train.micro_batch_size, r->train.batch_size);
        }
    }
    if (r->train.eval_every > 0 && !r->data.eval) {
        s_err_key(c, "train.eval_every", "%d needs data.eval (a held-out JSONL); set it or use 0",
                  r->train.eval_every);
    }
}

static void s_check_path(s_ctx_t *c, const rl_recipe_key_t *k, const char *key, const char *p,
                         const char *loc_key) {
    struct stat st;
    const char *kind = k->type == RL_RECIPE_T_PATH_DIR ? "directory" : "file";
    if (stat(p, &st) != 0) {
        s_err_key(c, loc_key, "%s%s%s '%s' does not exist%s", strcmp(key, loc_key) ? key : "",
                  strcmp(key, loc_key) ? ": " : "", kind, p,
                  strcmp(key, loc_key) ? " (the default; set it to override)" : "");
        return;
    }
    int is_dir = S_ISDIR(st.st_mode);
    if (k->type == RL_RECIPE_T_PATH_DIR && !is_dir) {
        s_err_key(c, loc_key, "'%s' is not a directory", p);
        return;
    }
    if (k->type == RL_RECIPE_T_PATH_FILE && is_dir) {
        s_err_key(c, loc_key, "%s%s'%s' is a directory, expected a file",
                  strcmp(key, loc_key) ? key : "", strcmp(key, loc_key) ? ": " : "", p);
        return;
    }
    if (k->needs) {
        char *f = s_strdupf("%s/%s", p, k->needs);
        if (!f) {
            c->oom = 1;
            return;
        }
        if (stat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
            s_err_key(c, loc_key, "'%s' has no %s; is it a Hugging Face model folder?", p,
                      k->needs);
        }
        free(f);
    }
}

static void s_check_files(s_ctx_t *c) {
    rl_recipe_t *r = c->r;
    char key[96];
    for (int i = 0; i < S_NKEYS; i++) {
        const rl_recipe_key_t *k = &s_keys[i];
        if (!(k->flags & RL_RECIPE_K_EXISTS)) {
            continue;
        }
        int list = s_section(k->section)->is_list;
        int n = list ? r->n_rewards : 1;
        for (int e = 0; e < n; e++) {
            s_dst_t d = {list ? (void *)&r->rewards[e] : (void *)r, list ? e : -1};
            const char *p = *S_FIELD(&d, k, char *);
            if (!p || !s_applies(r, k)) {
                continue;
            }
            if (list) {
                snprintf(key, sizeof key, "%s[%d].%s", k->section, e, k->key);
            } else {
                snprintf(key, sizeof key, "%s.%s", k->section, k->key);
            }
            // a derived path (model.tokenizer) is reported at the key it came from
            const char *loc_key = key;
            if (!s_set(r, key) && k->offset == OFF(model.tokenizer)) {
                struct stat st;
                if (!r->model.path || stat(r->model.path, &st) != 0 || !S_ISDIR(st.st_mode)) {
                    continue; // the folder itself is missing: one error is enough
                }
                loc_key = "model.path";
            }
            s_check_path(c, k, key, p, loc_key);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// load

static void s_recipe_free_fields(rl_recipe_t *r) {
    s_dst_t d = {r, -1};
    for (int i = 0; i < S_NKEYS; i++) {
        const rl_recipe_key_t *k = &s_keys[i];
        if (s_section(k->section)->is_list) {
            for (int e = 0; e < r->n_rewards; e++) {
                s_dst_t de = {&r->rewards[e], e};
                s_field_free(k, &de);
            }
        } else {
            s_field_free(k, &d);
        }
    }
    free(r->rewards);
    r->rewards = NULL;
    r->n_rewards = 0;
}

void rl_recipe_destroy(rl_recipe_t **recipe_p) {
    if (!recipe_p || !*recipe_p) {
        return;
    }
    rl_recipe_t *r = *recipe_p;
    s_recipe_free_fields(r);
    if (r->priv) {
        for (int i = 0; i < r->priv->n; i++) {
            free(r->priv->locs[i].key);
        }
        for (int i = 0; i < r->priv->nfiles; i++) {
            free(r->priv->files[i]);
        }
        free(r->priv->locs);
        free(r->priv->files);
        free(r->priv);
    }
    free(r->path);
    free(r);
    *recipe_p = NULL;
}

static char *s_dirname_abs(const char *cwd, const char *name) {
    const char *slash = strrchr(name, '/');
    if (!slash) {
        return strdup(cwd);
    }
    size_t n = (size_t)(slash - name);
    char *d = malloc(n + 2);
    if (!d) {
        return NULL;
    }
    memcpy(d, name, n);
    d[n] = '\0';
    if (n == 0) {
        strcpy(d, "/");
    }
    char *abs = s_path_join_norm(cwd, d);
    free(d);
    return abs;
}

int rl_recipe_load_string(const char *text, size_t len, const char *name,
                          const char *const *overrides, int n_overrides, unsigned flags,
                          rl_recipe_t **out, char *err, size_t err_len) {
    *out = NULL;
    if (err && err_len) {
        err[0] = '\0';
    }
    s_ctx_t c = {.flags = flags};
    rl_yaml_node_t *root = NULL;
    int rc = RL_ENOMEM;
    char cwdbuf[4096];
    rl_recipe_t *r = calloc(1, sizeof *r);
    if (!r || !(r->priv = calloc(1, sizeof *r->priv)) || !(r->path = strdup(name)) ||
        !(r->priv->files = calloc((size_t)n_overrides + 1, sizeof(char *))) ||
        !(r->priv->files[0] = strdup(name))) {
        goto fail;
    }
    r->priv->nfiles = 1;
    c.r = r;
    c.file = r->priv->files[0];
    for (int i = 0; i < n_overrides; i++) {
        if (!(r->priv->files[i + 1] = s_strdupf("<override %d>", i + 1))) {
            goto fail;
        }
        r->priv->nfiles++;
    }
    if (!getcwd(cwdbuf, sizeof cwdbuf)) {
        rc = rl_errf(err, err_len, errno ? errno : RL_EIO, "cannot read the working directory");
        goto fail;
    }
    if (!(c.cwd = strdup(cwdbuf)) || !(c.base = s_dirname_abs(c.cwd, name))) {
        goto fail;
    }
    // defaults first, so the walk only overwrites what the recipe sets
    s_dst_t d = {r, -1};
    for (int i = 0; i < S_NSECTIONS; i++) {
        if (!s_sections[i].is_list) {
            s_defaults(&c, s_sections[i].name, &d);
        }
    }
    char e[1024];
    rc = rl_yaml_parse(text, len, c.file, 0, &root, e, sizeof e);
    if (rc == RL_ENOMEM) {
        goto fail;
    }
    if (rc) {
        // a syntax error stops here: the rest of the tree is unknown
        rl_errf(err, err_len, RL_EINVAL, "%s", e);
        rc = RL_EINVAL;
        goto fail;
    }
    if (!root) {
        root = rl_yaml_node_new(RL_YAML_MAP, c.file, 1, 1, NULL, 0);
        if (!root) {
            goto fail;
        }
    }
    if (root->kind != RL_YAML_MAP) {
        char f[300];
        s_found(root, f, sizeof f);
        s_err(&c, root, NULL, "a recipe is a map of sections (run:, model:, ...); found %s", f);
    } else {
        for (int i = 0; i < n_overrides && !c.oom; i++) {
            s_apply_override(&c, root, overrides[i], r->priv->files[i + 1]);
        }
        s_check_dups(&c, root, "");
        s_walk(&c, root);
        s_derive(&c);
        s_cross_checks(&c);
        if (!(flags & RL_RECIPE_NO_FILE_CHECKS)) {
            s_check_files(&c);
        }
    }
    if (c.oom) {
        rc = RL_ENOMEM;
        goto fail;
    }
    if (c.nerr > 0) {
        qsort(c.errs, (size_t)c.nerr, sizeof *c.errs, s_err_cmp);
        size_t o = 0;
        for (int i = 0; i < c.nerr && err && o + 1 < err_len; i++) {
            o += (size_t)snprintf(err + o, err_len - o, "%s%s", i ? "\n" : "", c.errs[i].msg);
        }
        if (c.dropped && err && o + 1 < err_len) {
            snprintf(err + o, err_len - o, "\n%s: ... and %d more errors", name, c.dropped);
        }
        rc = RL_EINVAL;
        goto fail;
    }
    rl_yaml_destroy(&root);
    free(c.cwd);
    free(c.base);
    free(c.errs);
    *out = r;
    return 0;
fail:
    if (rc == RL_ENOMEM) {
        rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", name);
    }
    for (int i = 0; i < c.nerr; i++) {
        free(c.errs[i].msg);
    }
    free(c.errs);
    rl_yaml_destroy(&root);
    free(c.cwd);
    free(c.base);
    rl_recipe_destroy(&r);
    return rc;
}

int rl_recipe_load_file(const char *path, const char *const *overrides, int n_overrides,
                        unsigned flags, rl_recipe_t **out, char *err, size_t err_len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            if (cap > RL_YAML_MAX_INPUT) {
                rc = rl_errf(err, err_len, RL_EINVAL, "%s: larger than %u bytes", path,
                             RL_YAML_MAX_INPUT);
                break;
            }
            cap = cap ? cap * 2 : 16384;
            char *b = realloc(buf, cap);
            if (!b) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
                break;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                int e = errno ? errno : EIO;
                rc = rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
            }
            break;
        }
    }
    fclose(f);
    if (rc == 0) {
        rc = rl_recipe_load_string(buf ? buf : "", n, path, overrides, n_overrides, flags, out,
                                   err, err_len);
    }
    free(buf);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// locations after loading

int rl_recipe_key_location(const rl_recipe_t *recipe, const char *dotted_key, const char **file,
                           int *line, int *col) {
    const s_loc_t *l = s_loc_find(recipe->priv, dotted_key);
    if (!l) {
        *file = recipe->path;
        *line = 0;
        *col = 0;
        return RL_ENOTFOUND;
    }
    *file = l->file;
    *line = l->line;
    *col = l->col;
    return 0;
}

int rl_recipe_errorf(const rl_recipe_t *recipe, const char *dotted_key, char *err,
                     size_t err_len, int code, const char *fmt, ...) {
    if (!err || !err_len) {
        return code;
    }
    const char *file;
    int line, col;
    int o;
    if (rl_recipe_key_location(recipe, dotted_key, &file, &line, &col) == 0) {
        o = snprintf(err, err_len, "%s:%d:%d: %s: ", file, line, col, dotted_key);
    } else {
        o = snprintf(err, err_len, "%s: %s: ", file, dotted_key);
    }
    if (o >= 0 && (size_t)o < err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + o, err_len - (size_t)o, fmt, ap);
        va_end(ap);
    }
    return code;
}

// ---------------------------------------------------------------------------------------------
// printing: YAML the loader reads back to the same recipe (tests check the fixed point)

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} s_buf_t;

static void s_put(s_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(s_buf_t *b, const char *fmt, ...) {
    if (b->oom) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if (b->n + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + (size_t)n + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

// shortest text that reads back to the same double, with a '.' so YAML 1.1 readers
// (PyYAML) also see a float
static void s_put_double(s_buf_t *b, double v) {
    char t[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*g", prec, v);
        if (strtod(t, NULL) == v) {
            break;
        }
    }
    char *e = strchr(t, 'e');
    if (!strchr(t, '.')) {
        if (e) {
            char tail[32];
            snprintf(tail, sizeof tail, "%s", e);
            snprintf(e, sizeof t - (size_t)(e - t), ".0%s", tail);
        } else {
            strcat(t, ".0");
        }
    }
    s_put(b, "%s", t);
}

static void s_put_quoted(s_buf_t *b, const char *s, size_t len) {
    s_put(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        const unsigned char *u = (const unsigned char *)s + i;
        if (ch == '"' || ch == '\\') {
            s_put(b, "\\%c", ch);
        } else if (ch == '\n') {
            s_put(b, "\\n");
        } else if (ch == '\t') {
            s_put(b, "\\t");
        } else if (ch < 0x20 || ch == 0x7f) {
            s_put(b, "\\x%02x", ch);
        } else if (ch == 0xc2 && i + 1 < len && u[1] >= 0x80 && u[1] <= 0xa0) {
            s_put(b, "\\x%02x", u[1]); // C1 controls, NEL and NBSP: YAML readers mangle them
            i++;
        } else if (ch == 0xe2 && i + 2 < len && u[1] == 0x80 && (u[2] == 0xa8 || u[2] == 0xa9)) {
            s_put(b, "\\%c", u[2] == 0xa8 ? 'L' : 'P'); // line/paragraph separators
            i += 2;
        } else if (ch == 0xef && i + 2 < len && ((u[1] == 0xbb && u[2] == 0xbf) ||
                                                 (u[1] == 0xbf && u[2] >= 0xbe))) {
            s_put(b, "\\u%s", u[1] == 0xbb ? "FEFF" : (u[2] == 0xbe ? "FFFE" : "FFFF"));
            i += 2;
        } else {
            s_put(b, "%c", ch);
        }
    }
    s_put(b, "\"");
}

static void s_put_str(s_buf_t *b, const char *s) {
    int plain = s[0] != '\0';
    for (const char *p = s; *p && plain; p++) {
        char ch = *p;
        plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '_' || ch == '/' || ch == '-' || ch == '.';
    }
    if (plain && !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '/' ||
                   s[0] == '_')) {
        plain = 0;
    }
    if (plain) {
        rl_yaml_node_t probe = {.kind = RL_YAML_SCALAR, .str = (char *)s, .len = strlen(s),
                                .plain = 1};
        plain = rl_yaml_scalar_type(&probe) == RL_YAML_T_STRING;
    }
    if (plain) {
        s_put(b, "%s", s);
    } else {
        s_put_quoted(b, s, strlen(s));
    }
}

static void s_put_json(s_buf_t *b, const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        int first = 1;
        s_put(b, "{");
        json_object_foreach((json_t *)j, k, v) {
            s_put(b, "%s", first ? "" : ", ");
            s_put_quoted(b, k, strlen(k));
            s_put(b, ": ");
            s_put_json(b, v);
            first = 0;
        }
        s_put(b, "}");
        break;
    }
    case JSON_ARRAY: {
        s_put(b, "[");
        for (size_t i = 0; i < json_array_size(j); i++) {
            s_put(b, "%s", i ? ", " : "");
            s_put_json(b, json_array_get(j, i));
        }
        s_put(b, "]");
        break;
    }
    case JSON_STRING: s_put_quoted(b, json_string_value(j), json_string_length(j)); break;
    case JSON_INTEGER: s_put(b, "%lld", (long long)json_integer_value(j)); break;
    case JSON_REAL: s_put_double(b, json_real_value(j)); break;
    case JSON_TRUE: s_put(b, "true"); break;
    case JSON_FALSE: s_put(b, "false"); break;
    default: s_put(b, "null"); break;
    }
}

static void s_put_value(s_buf_t *b, const rl_recipe_key_t *k, const s_dst_t *d) {
    switch (k->type) {
    case RL_RECIPE_T_BOOL: s_put(b, "%s", *S_FIELD(d, k, bool) ? "true" : "false"); break;
    case RL_RECIPE_T_INT: s_put(b, "%d", *S_FIELD(d, k, int)); break;
    case RL_RECIPE_T_FLOAT: s_put_double(b, *S_FIELD(d, k, double)); break;
    case RL_RECIPE_T_ENUM: {
        int v = *S_FIELD(d, k, int);
        s_put(b, "%s", v >= 0 ? k->choices[v] : "null");
        break;
    }
    case RL_RECIPE_T_STRING:
    case RL_RECIPE_T_PATH_FILE:
    case RL_RECIPE_T_PATH_DIR: {
        const char *s = *S_FIELD(d, k, char *);
        if (s) {
            s_put_str(b, s);
        } else {
            s_put(b, "null");
        }
        break;
    }
    case RL_RECIPE_T_STRING_LIST: {
        const rl_recipe_strlist_t *l = S_FIELD(d, k, rl_recipe_strlist_t);
        s_put(b, "[");
        for (int i = 0; i < l->n; i++) {
            s_put(b, "%s", i ? ", " : "");
            s_put_str(b, l->items[i]);
        }
        s_put(b, "]");
        break;
    }
    case RL_RECIPE_T_FLOAT_LIST: {
        const double *v = S_FIELD(d, k, double);
        s_put(b, "[");
        for (int i = 0; i < k->count; i++) {
            s_put(b, "%s", i ? ", " : "");
            s_put_double(b, v[i]);
        }
        s_put(b, "]");
        break;
    }
    case RL_RECIPE_T_MAP: {
        const char *s = *S_FIELD(d, k, char *);
        json_t *j = s ? json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
        if (j) {
            s_put_json(b, j);
            json_decref(j);
        } else {
            s_put(b, "{}");
        }
        break;
    }
    }
}

int rl_recipe_to_yaml(const rl_recipe_t *recipe, char **out) {
    s_buf_t b = {0};
    s_dst_t d = {(void *)recipe, -1};
    s_put(&b, "# resolved recipe (rlctl validate): every default filled, paths absolute\n");
    for (int si = 0; si < S_NSECTIONS; si++) {
        const s_section_t *sec = &s_sections[si];
        if (sec->is_list) {
            s_put(&b, "%s:%s\n", sec->name, recipe->n_rewards ? "" : " []");
            for (int e = 0; e < recipe->n_rewards; e++) {
                s_dst_t de = {&recipe->rewards[e], e};
                int first = 1;
                for (int i = 0; i < S_NKEYS; i++) {
                    const rl_recipe_key_t *k = &s_keys[i];
                    if (strcmp(k->section, sec->name) != 0) {
                        continue;
                    }
                    // an entry names one source: omit the other rather than print null
                    if ((k->offset == ROFF(builtin) && recipe->rewards[e].builtin < 0) ||
                        (k->offset == ROFF(plugin) && !recipe->rewards[e].plugin)) {
                        continue;
                    }
                    s_put(&b, "  %s %s: ", first ? "-" : " ", k->key);
                    s_put_value(&b, k, &de);
                    s_put(&b, "\n");
                    first = 0;
                }
            }
            continue;
        }
        s_put(&b, "%s:\n", sec->name);
        for (int i = 0; i < S_NKEYS; i++) {
            const rl_recipe_key_t *k = &s_keys[i];
            if (strcmp(k->section, sec->name) != 0 || !s_applies(recipe, k)) {
                continue;
            }
            s_put(&b, "  %s: ", k->key);
            s_put_value(&b, k, &d);
            s_put(&b, "\n");
        }
    }
    if (b.oom) {
        free(b.s);
        *out = NULL;
        return RL_ENOMEM;
    }
    *out = b.s;
    return 0;
}

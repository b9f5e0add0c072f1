// rl_config_schema — the recipe's schema: its sections, one row per key (type, field, default,
// range, choices, the algorithms it belongs to, its gate and its meaning), the enums' choice
// lists, the name lists that model/ and rewards/ share (LoRA modules, built-in rewards), and the
// lookups over them. The table is the single source of truth: adding a key means adding one
// row here (and a line in docs/recipe.md, which the tests enforce). Its order is the order of
// the resolved recipe that `rlctl validate` prints and of docs/recipe.md's key tables.
//
// Not here: reading YAML or converting values (rl_config_load.c), checks between keys
// (rl_config_check.c), printing (rl_config_write.c).
#include "rl_config.h"
#include "rl_config_priv.h"
#include "rl_err.h"

#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// sections and choice lists

static const rl_cfg_section_t s_sections[] = {
    {"run", 0, "the run's name, folder and seed"},
    {"model", 0, "the Hugging Face model folder to train"},
    {"lora", 0, "LoRA adapters, or full fine-tuning when disabled"},
    {"data", 0, "JSONL datasets and their field names"},
    {"algorithm", 0, "the training algorithm and its knobs"},
    {"sampling", 0, "how completions are sampled (rollouts and evaluation)"},
    {"rewards", 1, "reward functions, summed with weights"},
    {"env", 0, "multi-turn episodes: the environment a GRPO or PPO policy talks to (tools)"},
    {"optim", 0, "optimizer and learning-rate schedule"},
    {"critic", 0, "PPO's critic (value model): learning rate, warmup, initialisation, tuning"},
    {"train", 0, "steps, batch sizes and cadence of eval/checkpoints"},
    {"roles", 0, "worker processes of the run: samplers, reference placement, threads, timeouts"},
    {"mesh", 0, "the DP×FSDP device mesh the actor (and a critic it holds) trains on"},
    {"log", 0, "what a run prints beside its metrics"},
};
#define S_NSECTIONS ((int)(sizeof s_sections / sizeof s_sections[0]))

// Each list is indexed by its enum (rl_config.h), so a name cannot drift from its value.
static const char *const s_dtypes[] = {"float32", "bfloat16", "float16", "auto", NULL};
static const char *const s_chats[] = {"auto", "chatml", "llama3", "none", NULL};
static const char *const s_formats[] = {"auto",     "prompt",     "prompt_completion", "text",
                                        "messages", "preference", NULL};
static const char *const s_truncs[] = {"error", "drop", NULL};
static const char *const s_optims[] = {"adamw", NULL};
static const char *const s_scheds[] = {"constant", "linear", "cosine", NULL};
static const char *const s_refs[] = {"actor", "worker", "mesh", NULL};
static const char *const s_balances[] = {[RL_RECIPE_BALANCE_EVEN] = "even",
                                         [RL_RECIPE_BALANCE_SPEED] = "speed", NULL};
static const char *const s_syncs[] = {[RL_RECIPE_SYNC_AUTO] = "auto",
                                      [RL_RECIPE_SYNC_HOST] = "host",
                                      [RL_RECIPE_SYNC_IPC] = "ipc", NULL};
static const char *const s_colls[] = {[RL_RECIPE_COLL_AUTO] = "auto",
                                      [RL_RECIPE_COLL_HOST] = "host",
                                      [RL_RECIPE_COLL_NCCL] = "nccl", NULL};
static const char *const s_envs[] = {[RL_RECIPE_ENV_CALC] = "calc", NULL};
static const char *const s_env_errors[] = {[RL_RECIPE_ENV_STOP] = "stop",
                                           [RL_RECIPE_ENV_DROP] = "drop", NULL};
static const char *const s_tool_parsers[] = {[RL_RECIPE_TOOLS_HERMES] = "hermes",
                                             [RL_RECIPE_TOOLS_LLAMA3_JSON] = "llama3_json", NULL};
static const char *const s_http_formats[] = {[RL_RECIPE_HTTP_RLCTL] = "rlctl",
                                             [RL_RECIPE_HTTP_OPENRLHF] = "openrlhf", NULL};

// ---------------------------------------------------------------------------------------------
// the lists model/ and rewards/ use too (rl_config.h): one copy each, here

static const char *const s_builtins[] = {
    [RL_RECIPE_REWARD_MATH_ANSWER] = RL_RECIPE_REWARD_MATH_ANSWER_NAME,
    [RL_RECIPE_REWARD_REGEX_FORMAT] = RL_RECIPE_REWARD_REGEX_FORMAT_NAME,
    [RL_RECIPE_REWARD_LENGTH] = RL_RECIPE_REWARD_LENGTH_NAME,
    [RL_RECIPE_REWARD_NBUILTIN] = NULL,
};

// PEFT order; the choices of lora.target_modules add "all-linear", which means all of them
static const char *const s_modules[] = {
    RL_RECIPE_LORA_Q_PROJ,    RL_RECIPE_LORA_K_PROJ,   RL_RECIPE_LORA_V_PROJ,
    RL_RECIPE_LORA_O_PROJ,    RL_RECIPE_LORA_GATE_PROJ, RL_RECIPE_LORA_UP_PROJ,
    RL_RECIPE_LORA_DOWN_PROJ, RL_RECIPE_LORA_ALL_LINEAR, NULL,
};
_Static_assert(sizeof s_modules / sizeof s_modules[0] == RL_RECIPE_LORA_NMOD + 2,
               "s_modules: the 7 projections, all-linear, NULL");

const char *rl_recipe_lora_module_name(int m) {
    return m >= 0 && m < RL_RECIPE_LORA_NMOD ? s_modules[m] : NULL;
}

const char *rl_recipe_reward_builtin_name(int which) {
    return which >= 0 && which < RL_RECIPE_REWARD_NBUILTIN ? s_builtins[which] : NULL;
}

// ---------------------------------------------------------------------------------------------
// the table

#define OFF(f) offsetof(rl_recipe_t, f)
#define ROFF(f) offsetof(rl_recipe_reward_t, f) // a rewards entry's keys
#define SAMPLES RL_RECIPE_USES_SAMPLES
#define SEQUENCES RL_RECIPE_USES_SEQUENCES
#define PAIRS RL_RECIPE_USES_PAIRS
#define MARGINS RL_RECIPE_USES_MARGINS
#define REF_SUMS RL_RECIPE_USES_REF_SUMS
#define CRITIC RL_RECIPE_USES_CRITIC
#define REQUIRED RL_RECIPE_K_REQUIRED
#define OPTIONAL RL_RECIPE_K_OPTIONAL
#define MIN_EXCL RL_RECIPE_K_MIN_EXCL
#define MAX_EXCL RL_RECIPE_K_MAX_EXCL
#define EXISTS RL_RECIPE_K_EXISTS
#define FOLDER RL_RECIPE_K_FOLDER
#define DERIVED RL_RECIPE_K_DERIVED
#define IMAX RL_CFG_IMAX // no upper bound (an int key)
#define BIG RL_CFG_BIG   // no bound (a float key: -BIG, BIG)
// a default the docs show as written (every default but a derived one's)
#define DEF(yaml) .def = yaml, .def_doc = yaml

// One row per key; fields left out are 0 / NULL (no flags, min = max = 0, every algorithm, no
// gate). `def` is YAML text parsed by the same code as a recipe, so a default can never be a
// value the recipe itself would reject (the tests load an all-defaults recipe). An algorithm's
// own keys are its definition's (algorithms/rl_algo_*.c), and an algorithm whose default of a shared
// key differs says so in its definition's `defaults`.
static const rl_recipe_key_t s_keys[] = {
    // run ------------------------------------------------------------------------------------
    {.section = "run",
     .key = "name",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(run.name),
     .def_doc = "the recipe file's name without .yaml",
     .flags = DERIVED,
     .doc = "run name: letters, digits, '.', '_', '-'; names the run folder"},
    {.section = "run",
     .key = "dir",
     .type = RL_RECIPE_T_PATH_DIR,
     .offset = OFF(run.dir),
     .def_doc = "runs/<run.name>",
     .flags = DERIVED,
     .doc = "the run's folder (relative: to the working directory, not the recipe)"},
    {.section = "run",
     .key = "seed",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(run.seed),
     DEF("0"),
     .max = IMAX,
     .doc = "seed of every RNG (data order, LoRA init, sampling)"},
    // model ----------------------------------------------------------------------------------
    {.section = "model",
     .key = "path",
     .type = RL_RECIPE_T_PATH_DIR,
     .offset = OFF(model.path),
     .def_doc = "required",
     .flags = REQUIRED | EXISTS,
     .needs = "config.json",
     .doc = "Hugging Face model folder (config.json, model.safetensors)"},
    {.section = "model",
     .key = "dtype",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(model.dtype),
     DEF("auto"),
     .choices = s_dtypes,
     .doc = "storage dtype of saved weights; auto = the input model's torch_dtype"},
    {.section = "model",
     .key = "tokenizer",
     .type = RL_RECIPE_T_PATH_FILE,
     .offset = OFF(model.tokenizer),
     .def_doc = "<model.path>/tokenizer.json",
     .flags = DERIVED | EXISTS,
     .doc = "tokenizer.json to use"},
    {.section = "model",
     .key = "chat_template",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(model.chat_template),
     DEF("auto"),
     .choices = s_chats,
     .doc = "how messages become text; auto = from tokenizer_config.json, none = raw text"},
    {.section = "model",
     .key = "device",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(model.device),
     DEF("cpu"),
     .doc = "where the roles holding the model compute: cpu, or cuda / cuda:N (an NVIDIA GPU, "
            "checked before anything starts; actor, reference, critic and samplers share it, and a "
            "mesh's ranks when mesh.share_devices allows: docs/gpu.md)"},
    // lora -----------------------------------------------------------------------------------
    {.section = "lora",
     .key = "enabled",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(lora.enabled),
     DEF("false"),
     .doc = "train LoRA adapters; false = full fine-tuning (the other lora keys are refused)"},
    {.section = "lora",
     .key = "r",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(lora.r),
     DEF("8"),
     .min = 1,
     .max = 4096,
     .gate = "lora.enabled",
     .doc = "adapter rank R"},
    {.section = "lora",
     .key = "alpha",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(lora.alpha),
     DEF("16"),
     .flags = MIN_EXCL,
     .max = BIG,
     .gate = "lora.enabled",
     .doc = "scaling numerator: scale = alpha/r (alpha/sqrt(r) with use_rslora)"},
    {.section = "lora",
     .key = "dropout",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(lora.dropout),
     DEF("0.0"),
     .flags = MAX_EXCL,
     .max = 1,
     .gate = "lora.enabled",
     .doc = "dropout on the adapter input"},
    {.section = "lora",
     .key = "target_modules",
     .type = RL_RECIPE_T_STRING_LIST,
     .offset = OFF(lora.target_modules),
     DEF("all-linear"),
     .choices = s_modules,
     .gate = "lora.enabled",
     .doc = "projections that get adapters; all-linear = all 7"},
    {.section = "lora",
     .key = "use_rslora",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(lora.use_rslora),
     DEF("false"),
     .gate = "lora.enabled",
     .doc = "rank-stabilised scaling alpha/sqrt(r)"},
    // data -----------------------------------------------------------------------------------
    {.section = "data",
     .key = "train",
     .type = RL_RECIPE_T_PATH_LIST,
     .offset = OFF(data.train),
     .def_doc = "required",
     .flags = REQUIRED | EXISTS | FOLDER,
     .doc = "training set: a JSONL file, a folder of *.jsonl files read in name order, a glob "
            "(data/*.jsonl, in name order) or a list of these, read in the order given"},
    {.section = "data",
     .key = "eval",
     .type = RL_RECIPE_T_PATH_LIST,
     .offset = OFF(data.eval),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS | FOLDER,
     .doc = "held-out set: as data.train (files, folders, globs); needed when "
            "train.eval_every > 0"},
    {.section = "data",
     .key = "format",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(data.format),
     DEF("auto"),
     .choices = s_formats,
     .doc = "row layout; auto = decided from the first row's fields"},
    {.section = "data",
     .key = "prompt_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.prompt_field),
     DEF("prompt"),
     .doc = "field holding the prompt"},
    {.section = "data",
     .key = "completion_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.completion_field),
     DEF("completion"),
     .doc = "field holding the completion (SFT)"},
    {.section = "data",
     .key = "answer_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.answer_field),
     DEF("answer"),
     .doc = "field holding the reference answer (rewards, eval accuracy)"},
    {.section = "data",
     .key = "text_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.text_field),
     DEF("text"),
     .doc = "field holding plain text (format text)"},
    {.section = "data",
     .key = "messages_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.messages_field),
     DEF("messages"),
     .doc = "field holding a chat message list (format messages)"},
    {.section = "data",
     .key = "chat_template_kwargs",
     .type = RL_RECIPE_T_MAP,
     .offset = OFF(data.chat_template_kwargs),
     DEF("{}"),
     .doc = "keyword arguments of the chat template (apply_chat_template's), e.g. "
            "{enable_thinking: false} for Qwen3"},
    {.section = "data",
     .key = "chosen_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.chosen_field),
     DEF("chosen"),
     .uses = PAIRS,
     .doc = "field holding the preferred completion (DPO, RM)"},
    {.section = "data",
     .key = "rejected_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.rejected_field),
     DEF("rejected"),
     .uses = PAIRS,
     .doc = "field holding the dispreferred completion (DPO, RM)"},
    {.section = "data",
     .key = "margin_field",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(data.margin_field),
     DEF("margin"),
     .uses = MARGINS,
     .doc = "field holding a pair's margin (TRL's margin column), used when the rows have it"},
    {.section = "data",
     .key = "eval_pairs",
     .type = RL_RECIPE_T_PATH_LIST,
     .offset = OFF(data.eval_pairs),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS | FOLDER,
     .uses = PAIRS,
     .doc = "held-out preference rows, JSONL: the DPO or RM metrics under eval/ every "
            "train.eval_every steps"},
    {.section = "data",
     .key = "ref_cache",
     .type = RL_RECIPE_T_PATH_DIR,
     .offset = OFF(data.ref_cache),
     .def_doc = "$XDG_CACHE_HOME/rlctl/refcache",
     .flags = OPTIONAL,
     .uses = REF_SUMS,
     .doc = "where the reference's logprob sums are cached across runs (~/.cache/rlctl/refcache "
            "without XDG_CACHE_HOME)"},
    {.section = "data",
     .key = "max_length",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(data.max_length),
     DEF("1024"),
     .min = 1,
     .max = 1048576,
     .uses = SEQUENCES,
     .doc = "most tokens of one example, prompt + completion (SFT; DPO, RM: each side of a "
            "pair)"},
    {.section = "data",
     .key = "max_prompt_length",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(data.max_prompt_length),
     DEF("512"),
     .min = 1,
     .max = 1048576,
     .uses = SAMPLES,
     .doc = "most prompt tokens"},
    {.section = "data",
     .key = "truncation",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(data.truncation),
     DEF("drop"),
     .choices = s_truncs,
     .doc = "a row over the limit: drop it (counted in the log) or stop with an error"},
    {.section = "data",
     .key = "shuffle",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(data.shuffle),
     DEF("true"),
     .doc = "reshuffle the training set every epoch (seeded by run.seed)"},
    // algorithm ------------------------------------------------------------------------------
    {.section = "algorithm",
     .key = "name",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(algorithm.name),
     .def_doc = "required",
     .flags = REQUIRED,
     .doc = "training algorithm"},
    // then the algorithm's own keys: its definition's (rl_recipe_algo_def_t.keys)
    // sampling -------------------------------------------------------------------------------
    {.section = "sampling",
     .key = "temperature",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(sampling.temperature),
     DEF("1.0"),
     .min = 1e-6,
     .max = 100,
     .doc = "softmax temperature T (logprobs use the same T; below 1e-6 the logits / T "
            "overflow a float)"},
    {.section = "sampling",
     .key = "top_p",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(sampling.top_p),
     DEF("1.0"),
     .flags = MIN_EXCL,
     .max = 1,
     .doc = "nucleus sampling mass; 1.0 = off"},
    {.section = "sampling",
     .key = "top_k",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(sampling.top_k),
     DEF("0"),
     .max = IMAX,
     .doc = "sample among the k most likely tokens; 0 = off"},
    {.section = "sampling",
     .key = "max_new_tokens",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(sampling.max_new_tokens),
     DEF("256"),
     .min = 1,
     .max = 1048576,
     .doc = "completion length limit (L_max)"},
    {.section = "sampling",
     .key = "max_batch",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(sampling.max_batch),
     DEF("64"),
     .min = 1,
     .max = 4096,
     .doc = "most sequences a sampler decodes at once (its KV cache slots; vLLM's "
            "max_num_seqs); the same draws, the logits' last bits aside"},
    {.section = "sampling",
     .key = "stop",
     .type = RL_RECIPE_T_STRING_LIST,
     .offset = OFF(sampling.stop),
     DEF("[]"),
     .doc = "extra stop strings (EOS always stops)"},
    // rewards (one entry) --------------------------------------------------------------------
    {.section = "rewards",
     .key = "name",
     .type = RL_RECIPE_T_STRING,
     .offset = ROFF(name),
     .def_doc = "the builtin's name",
     .flags = DERIVED,
     .doc = "metric name (rewards/<name>/mean); unique"},
    {.section = "rewards",
     .key = "weight",
     .type = RL_RECIPE_T_FLOAT,
     .offset = ROFF(weight),
     DEF("1.0"),
     .min = -BIG,
     .max = BIG,
     .doc = "the total reward is the weighted sum"},
    {.section = "rewards",
     .key = "builtin",
     .type = RL_RECIPE_T_ENUM,
     .offset = ROFF(builtin),
     .def_doc = "null",
     .flags = OPTIONAL,
     .choices = s_builtins,
     .doc = "a built-in reward (exactly one of builtin, plugin, model, command, http and python)"},
    {.section = "rewards",
     .key = "plugin",
     .type = RL_RECIPE_T_PATH_FILE,
     .offset = ROFF(plugin),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS,
     .doc = "path of a reward plugin .so"},
    {.section = "rewards",
     .key = "model",
     .type = RL_RECIPE_T_PATH_DIR,
     .offset = ROFF(model),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS,
     .needs = "config.json",
     .doc = "a reward model's folder (an HF sequence classifier, e.g. an rm run's final/): "
            "scores prompt + completion"},
    {.section = "rewards",
     .key = "command",
     .type = RL_RECIPE_T_STRING_LIST,
     .offset = ROFF(command),
     .def_doc = "null",
     .flags = OPTIONAL,
     .doc = "a program and its arguments (e.g. [python3, my_reward.py]), started once, scoring "
            "each batch as JSON lines on its stdin/stdout; an item naming a file beside the "
            "recipe resolves there"},
    {.section = "rewards",
     .key = "python",
     .type = RL_RECIPE_T_MAP,
     .offset = ROFF(python_json),
     .def_doc = "null",
     .flags = OPTIONAL,
     .doc = "a TRL reward function, unchanged: {file: my_rewards.py (beside the recipe), function: "
            "accuracy_reward}; run by rlctl's runner as a command reward (name: the function's)"},
    {.section = "rewards",
     .key = "http",
     .type = RL_RECIPE_T_HTTP,
     .offset = ROFF(http),
     .def_doc = "null",
     .flags = OPTIONAL,
     .choices = s_http_formats,
     .doc = "a reward server each batch is POSTed to: {url: http://HOST:PORT/PATH, timeout: "
            "30 (seconds per attempt), format: rlctl or openrlhf, retries: 3}"},
    {.section = "rewards",
     .key = "config",
     .type = RL_RECIPE_T_MAP,
     .offset = ROFF(config_json),
     DEF("{}"),
     .doc = "any map; passed to the reward's create() as JSON"},
    // env ------------------------------------------------------------------------------------
    {.section = "env",
     .key = "builtin",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(env.builtin),
     .def_doc = "null",
     .flags = OPTIONAL,
     .choices = s_envs,
     .uses = SAMPLES,
     .doc = "a built-in environment (calc: an integer calculator tool); one of builtin, "
            "command, plugin and http"},
    {.section = "env",
     .key = "command",
     .type = RL_RECIPE_T_STRING_LIST,
     .offset = OFF(env.command),
     .def_doc = "null",
     .flags = OPTIONAL,
     .uses = SAMPLES,
     .doc = "a program and its arguments (e.g. [python3, my_env.py]) answering reset/step/close "
            "as JSON lines on its stdin/stdout; an item naming a file beside the recipe resolves "
            "there"},
    {.section = "env",
     .key = "plugin",
     .type = RL_RECIPE_T_PATH_FILE,
     .offset = OFF(env.plugin),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS,
     .uses = SAMPLES,
     .doc = "an environment plugin .so (include/rlctl/env.h), run in env.workers worker "
            "processes (rlctl env serve)"},
    {.section = "env",
     .key = "config",
     .type = RL_RECIPE_T_MAP,
     .offset = OFF(env.config_json),
     DEF("{}"),
     .uses = SAMPLES,
     .doc = "any map; passed to the plugin's create() as JSON"},
    {.section = "env",
     .key = "http",
     .type = RL_RECIPE_T_HTTP,
     .offset = OFF(env.http),
     .def_doc = "null",
     .flags = OPTIONAL,
     .uses = SAMPLES,
     .doc = "a server each request is POSTed to, its reply the body: {url: http://HOST:PORT/PATH, "
            "timeout: 30 (seconds per attempt), retries: 3}; no format"},
    {.section = "env",
     .key = "workers",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(env.workers),
     DEF("1"),
     .min = 1,
     .max = 256,
     .uses = SAMPLES,
     .doc = "worker processes of the command or plugin, each answering its share of the "
            "episodes"},
    {.section = "env",
     .key = "max_turns",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(env.max_turns),
     DEF("4"),
     .min = 1,
     .max = 1024,
     .uses = SAMPLES,
     .doc = "policy turns per episode; an episode still going after them is truncated"},
    {.section = "env",
     .key = "max_tokens",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(env.max_tokens),
     DEF("1024"),
     .min = 1,
     .max = 1048576,
     .uses = SAMPLES,
     .doc = "tokens of an episode after its first prompt (the policy's and the environment's)"},
    {.section = "env",
     .key = "timeout",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(env.timeout),
     DEF("60"),
     .flags = MIN_EXCL,
     .max = 86400,
     .uses = SAMPLES,
     .doc = "seconds one request (a batch of episodes) may wait for the environment's reply "
            "(over http: all its attempts)"},
    {.section = "env",
     .key = "on_error",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(env.on_error),
     DEF("stop"),
     .choices = s_env_errors,
     .uses = SAMPLES,
     .doc = "an environment's bad reply to an episode: stop the run, or drop the episode "
            "(counted in env/dropped)"},
    {.section = "env",
     .key = "tool_parser",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(env.tool_parser),
     DEF("hermes"),
     .choices = s_tool_parsers,
     .uses = SAMPLES,
     .doc = "how tool calls are read from the policy's text: hermes (<tool_call>{json}"
            "</tool_call>, Qwen) or llama3_json"},
    {.section = "env",
     .key = "keep_kv_cache",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(env.keep_kv_cache),
     DEF("true"),
     .uses = SAMPLES,
     .doc = "samplers keep each episode's KV cache between its turns and prefill only the new "
            "tokens (logprobs then differ from a full prefill by float rounding, ~1e-6)"},
    // optim ----------------------------------------------------------------------------------
    {.section = "optim",
     .key = "name",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(optim.name),
     DEF("adamw"),
     .choices = s_optims,
     .doc = "optimizer (AdamW, decoupled weight decay)"},
    {.section = "optim",
     .key = "lr",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(optim.lr),
     .def_doc = "required",
     .flags = REQUIRED | MIN_EXCL,
     .max = 1,
     .doc = "peak learning rate"},
    {.section = "optim",
     .key = "betas",
     .type = RL_RECIPE_T_FLOAT_LIST,
     .offset = OFF(optim.betas),
     DEF("[0.9, 0.999]"),
     .flags = MAX_EXCL,
     .max = 1,
     .count = 2,
     .doc = "Adam beta1, beta2"},
    {.section = "optim",
     .key = "eps",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(optim.eps),
     DEF("1e-8"),
     .flags = MIN_EXCL,
     .max = 1,
     .doc = "Adam epsilon"},
    {.section = "optim",
     .key = "weight_decay",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(optim.weight_decay),
     DEF("0.0"),
     .max = 10,
     .doc = "decoupled weight decay"},
    {.section = "optim",
     .key = "max_grad_norm",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(optim.max_grad_norm),
     DEF("1.0"),
     .max = BIG,
     .doc = "clip the global gradient norm; 0 = off"},
    {.section = "optim",
     .key = "scheduler",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(optim.scheduler),
     DEF("constant"),
     .choices = s_scheds,
     .doc = "learning-rate schedule after warmup"},
    {.section = "optim",
     .key = "warmup_steps",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(optim.warmup_steps),
     DEF("0"),
     .max = IMAX,
     .doc = "linear warmup steps (or warmup_ratio, not both)"},
    {.section = "optim",
     .key = "warmup_ratio",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(optim.warmup_ratio),
     DEF("0.0"),
     .flags = MAX_EXCL,
     .max = 1,
     .doc = "warmup as a fraction of train.steps"},
    {.section = "optim",
     .key = "min_lr_ratio",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(optim.min_lr_ratio),
     DEF("0.0"),
     .max = 1,
     .doc = "linear/cosine decay ends at lr * min_lr_ratio"},
    // critic ---------------------------------------------------------------------------------
    {.section = "critic",
     .key = "lr",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(critic.lr),
     .def_doc = "optim.lr",
     .flags = DERIVED | MIN_EXCL,
     .max = 1,
     .uses = CRITIC,
     .doc = "the critic's peak learning rate (its own AdamW; betas, eps, decay from optim)"},
    {.section = "critic",
     .key = "warmup_steps",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(critic.warmup_steps),
     DEF("0"),
     .max = IMAX,
     .uses = CRITIC,
     .doc = "the critic's linear warmup steps (then optim.scheduler)"},
    {.section = "critic",
     .key = "init",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(critic.init),
     DEF("base"),
     .uses = CRITIC,
     .doc = "base = model.path with a fresh value head; or a reward model's folder (HF sequence "
            "classifier: score.weight)"},
    {.section = "critic",
     .key = "lora",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(critic.lora),
     .def_doc = "lora.enabled",
     .flags = DERIVED,
     .uses = CRITIC,
     .doc = "train the critic with LoRA (the lora section's settings) or fully"},
    // train ----------------------------------------------------------------------------------
    {.section = "train",
     .key = "steps",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.steps),
     .def_doc = "required",
     .flags = REQUIRED,
     .min = 1,
     .max = IMAX,
     .doc = "optimizer steps"},
    {.section = "train",
     .key = "batch_size",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.batch_size),
     DEF("8"),
     .min = 1,
     .max = 1048576,
     .doc = "per step: prompts (GRPO, PPO: a rollout) or examples (SFT)"},
    {.section = "train",
     .key = "micro_batch_size",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.micro_batch_size),
     .def_doc = "the whole step",
     .flags = DERIVED,
     .min = 1,
     .max = IMAX,
     .doc = "sequences per forward/backward pass (gradient accumulation)"},
    {.section = "train",
     .key = "eval_every",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.eval_every),
     DEF("0"),
     .max = IMAX,
     .doc = "evaluate every N steps (needs data.eval); 0 = off"},
    {.section = "train",
     .key = "save_every",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.save_every),
     DEF("0"),
     .max = IMAX,
     .doc = "write a resumable checkpoint every N steps; 0 = only final/"},
    {.section = "train",
     .key = "keep_checkpoints",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.keep_checkpoints),
     DEF("2"),
     .min = 1,
     .max = IMAX,
     .doc = "newest checkpoints kept"},
    {.section = "train",
     .key = "log_every",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.log_every),
     DEF("1"),
     .min = 1,
     .max = IMAX,
     .doc = "write metrics every N steps"},
    {.section = "train",
     .key = "eval_samples",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.eval_samples),
     DEF("0"),
     .max = IMAX,
     .doc = "eval rows used per evaluation; 0 = all"},
    {.section = "train",
     .key = "eval_k",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.eval_k),
     DEF("1"),
     .min = 1,
     .max = 1024,
     .doc = "completions sampled per eval prompt; > 1 adds eval/pass@k (a prompt passes when any "
            "of its k does)"},
    {.section = "train",
     .key = "eval_pass_threshold",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(train.eval_pass_threshold),
     DEF("1.0"),
     .min = -BIG,
     .max = BIG,
     .doc = "a completion passes when its total reward (the recipe's rewards, weighted) reaches "
            "this: eval/accuracy, eval/accuracy_greedy, eval/pass@k"},
    {.section = "train",
     .key = "recompute",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(train.recompute),
     DEF("false"),
     .doc = "recompute activations in backward (less memory, more time)"},
    {.section = "train",
     .key = "optimizer_offload",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(train.optimizer_offload),
     DEF("false"),
     .doc = "on a GPU, AdamW's moments and step in host memory (the gradients come over and the "
            "parameters go back every step) instead of on the device; a head (critic, reward "
            "model) and a mesh always use the host (docs/gpu.md)"},
    {.section = "train",
     .key = "threads",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(train.threads),
     DEF("0"),
     .max = 4096,
     .doc = "compute threads; 0 = all cores"},
    // roles ----------------------------------------------------------------------------------
    {.section = "roles",
     .key = "samplers",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(roles.samplers),
     DEF("1"),
     .min = 0,
     .max = 256,
     .doc = "local sampler worker processes; a step's prompts are spread over them and the "
            "remote samplers (0 only with remote_samplers)"},
    {.section = "roles",
     .key = "remote_samplers",
     .type = RL_RECIPE_T_ENDPOINTS,
     .offset = OFF(roles.remote_samplers),
     DEF("[]"),
     .doc = "samplers on other hosts (rlctl sampler serve): a list of {endpoint: "
            "tcp://HOST:PORT, server_key: its key.pub}; needs client_key (docs/remote.md)"},
    {.section = "roles",
     .key = "balance",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(roles.balance),
     DEF("even"),
     .choices = s_balances,
     .doc = "how a step's prompts are spread over the samplers: even = equal shares (bitwise "
            "reproducible); speed = in proportion to each one's measured tokens/s (the last "
            "bits of sampler logprobs then depend on timing)"},
    {.section = "roles",
     .key = "sync_bucket_mb",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(roles.sync_bucket_mb),
     DEF("256"),
     .flags = MIN_EXCL,
     .max = 16384,
     .doc = "the weights travel to each sampler in messages of at most this many MiB, in order "
            "(a sampler holds the new version once the last has landed)"},
    {.section = "roles",
     .key = "weight_sync",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(roles.weight_sync),
     DEF("auto"),
     .choices = s_syncs,
     .doc = "how new weights reach the samplers: ipc = a sampler on a GPU copies them from the "
            "actor's GPU, device to device (CUDA IPC: the same machine, the same GPU or a peer); "
            "host = in buckets through host memory (sync_bucket_mb); auto = ipc for every sampler "
            "that can take it, host for the others"},
    {.section = "roles",
     .key = "client_key",
     .type = RL_RECIPE_T_PATH_FILE,
     .offset = OFF(roles.client_key),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS,
     .doc = "this controller's secret key file (rlctl keygen) for remote_samplers; its "
            "key.pub goes on each sampler's --allow list"},
    {.section = "roles",
     .key = "devices",
     .type = RL_RECIPE_T_MAP,
     .offset = OFF(roles.devices),
     DEF("{}"),
     .doc = "a role's device instead of model.device: {actor: cuda:0, critic: cuda:0, reference: "
            "cuda:1, samplers: [cuda:1, cuda:2]} (sampler i on entry i mod n; a list for the "
            "actor, critic or reference places a mesh's ranks: rank r on entry r); checked before "
            "anything starts (docs/gpu.md)"},
    {.section = "roles",
     .key = "reference",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(roles.reference),
     DEF("actor"),
     .choices = s_refs,
     .doc = "where the reference policy runs: actor = in the actor (adapters disabled with LoRA, a "
            "frozen copy with full tuning); worker = a process of its own; mesh = processes of its "
            "own on the mesh's shape, sharded like the actor (docs/mesh.md)"},
    {.section = "roles",
     .key = "critic",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(roles.critic),
     DEF("actor"),
     .choices = s_refs,
     .uses = CRITIC,
     .doc = "where PPO's critic runs: actor = a second model in the actor's process(es); worker "
            "= a process of its own; mesh = processes of its own on the mesh's shape, sharded "
            "like the actor"},
    {.section = "roles",
     .key = "actor_threads",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(roles.actor_threads),
     DEF("0"),
     .max = 4096,
     .doc = "compute threads of the actor worker; 0 = train.threads"},
    {.section = "roles",
     .key = "sampler_threads",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(roles.sampler_threads),
     DEF("0"),
     .max = 4096,
     .doc = "compute threads of each sampler worker; 0 = train.threads"},
    {.section = "roles",
     .key = "reward_timeout",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(roles.reward_timeout),
     DEF("60"),
     .flags = MIN_EXCL,
     .max = 86400,
     .doc = "seconds one reward may take to score one step's batch"},
    {.section = "roles",
     .key = "request_timeout",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(roles.request_timeout),
     DEF("600"),
     .flags = MIN_EXCL,
     .max = 86400,
     .doc = "seconds a worker may take to answer one request before the run stops"},
    {.section = "roles",
     .key = "heartbeat",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(roles.heartbeat),
     DEF("1"),
     .flags = MIN_EXCL,
     .max = 3600,
     .doc = "seconds between worker heartbeats; 10 missed = the worker is lost"},
    {.section = "roles",
     .key = "stop_grace",
     .type = RL_RECIPE_T_FLOAT,
     .offset = OFF(roles.stop_grace),
     DEF("20"),
     .flags = MIN_EXCL,
     .max = 86400,
     .doc = "seconds from SIGTERM/SIGINT until the run is gone: the step and a checkpoint finish "
            "when they fit, otherwise the workers stop at once"},
    // mesh -----------------------------------------------------------------------------------
    {.section = "mesh",
     .key = "dp",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(mesh.dp),
     DEF("1"),
     .min = 1,
     .max = 4096,
     .doc = "data-parallel replicas: each holds the whole model (as fsdp shards) and trains on "
            "its share of every batch"},
    {.section = "mesh",
     .key = "fsdp",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(mesh.fsdp),
     DEF("1"),
     .min = 1,
     .max = 4096,
     .doc = "ranks each replica's parameters, gradients and optimizer state are sharded over"},
    {.section = "mesh",
     .key = "devices",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(mesh.devices),
     .def_doc = "dp × fsdp",
     .flags = DERIVED,
     .min = 1,
     .max = 4096,
     .doc = "the mesh's devices (on CPU: actor worker processes of roles.actor_threads threads "
            "each); must equal dp × fsdp"},
    {.section = "mesh",
     .key = "launcher",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(mesh.launcher),
     DEF("mpirun"),
     .doc = "the MPI launcher (Open MPI's mpirun) that starts the ranks of a mesh larger than "
            "1×1; rlctl adds what it needs (docs/mesh.md)"},
    {.section = "mesh",
     .key = "launcher_args",
     .type = RL_RECIPE_T_STRING_LIST,
     .offset = OFF(mesh.launcher_args),
     DEF("[]"),
     .doc = "more arguments for the launcher, before the program (e.g. [--mca, "
            "btl_tcp_if_include, eth1] across hosts)"},
    {.section = "mesh",
     .key = "hostfile",
     .type = RL_RECIPE_T_PATH_FILE,
     .offset = OFF(mesh.hostfile),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS,
     .doc = "the launcher's hostfile (`HOST slots=N` lines): ranks on other hosts, which reach "
            "the controller at mesh.endpoint over tcp with CURVE keys (docs/mesh.md)"},
    {.section = "mesh",
     .key = "endpoint",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(mesh.endpoint),
     .def_doc = "null",
     .flags = OPTIONAL,
     .doc = "with hostfile: tcp://ADDR:PORT the controller binds for its ranks (ADDR: its "
            "address every host reaches; port 0 picks a free one)"},
    {.section = "mesh",
     .key = "key",
     .type = RL_RECIPE_T_PATH_FILE,
     .offset = OFF(mesh.key),
     .def_doc = "roles.client_key",
     .flags = OPTIONAL | EXISTS,
     .doc = "with hostfile: the controller's secret key file (rlctl keygen); the ranks are given "
            "its public key"},
    {.section = "mesh",
     .key = "rank_key",
     .type = RL_RECIPE_T_STRING,
     .offset = OFF(mesh.rank_key),
     .def_doc = "null",
     .flags = OPTIONAL,
     .doc = "with hostfile: the ranks' secret key file, the same absolute path on every host "
            "(rlctl keygen there); its key.pub goes on mesh.allow"},
    {.section = "mesh",
     .key = "allow",
     .type = RL_RECIPE_T_PATH_FILE,
     .offset = OFF(mesh.allow),
     .def_doc = "null",
     .flags = OPTIONAL | EXISTS,
     .doc = "with hostfile: the ranks' public keys the controller admits (one per line)"},
    {.section = "mesh",
     .key = "share_devices",
     .type = RL_RECIPE_T_BOOL,
     .offset = OFF(mesh.share_devices),
     DEF("false"),
     .doc = "let several ranks of a mesh on GPUs share one device (rank r on entry r mod n of "
            "its role's devices); without it each rank needs a device of its own (docs/gpu.md)"},
    {.section = "mesh",
     .key = "collectives",
     .type = RL_RECIPE_T_ENUM,
     .offset = OFF(mesh.collectives),
     DEF("auto"),
     .choices = s_colls,
     .doc = "the actor's mesh on GPUs: nccl = gradients summed between the ranks' GPUs with NCCL "
            "and AdamW on the devices, its state split over every rank (each rank on a GPU of "
            "its own); host = the gradients to host memory, summed with MPI, AdamW on the host; "
            "auto = nccl where it can run (distinct GPUs, NCCL found, no head, no "
            "optimizer_offload), else host (docs/gpu.md)"},
    // log ------------------------------------------------------------------------------------
    {.section = "log",
     .key = "completions",
     .type = RL_RECIPE_T_INT,
     .offset = OFF(log.completions),
     DEF("0"),
     .max = 1024,
     .doc = "print a table of this many completions (the first of each of the step's first N "
            "prompts: text, rewards, total, advantage) every logged step (TRL's "
            "log_completions); 0 = none"},
};
#define S_NKEYS ((int)(sizeof s_keys / sizeof s_keys[0]))

#undef OFF
#undef ROFF
#undef SAMPLES
#undef SEQUENCES
#undef PAIRS
#undef MARGINS
#undef REF_SUMS
#undef CRITIC
#undef REQUIRED
#undef OPTIONAL
#undef MIN_EXCL
#undef MAX_EXCL
#undef EXISTS
#undef FOLDER
#undef DERIVED
#undef IMAX
#undef BIG
#undef DEF

const char *rl_recipe_type_name(rl_recipe_type_t type) {
    static const char *const names[] = {"bool",      "int",         "float",      "string",
                                        "enum",      "path (file)", "path (dir)", "string list",
                                        "float list", "map",         "endpoint list",
                                        "http map",   "paths"};
    return (unsigned)type < sizeof names / sizeof names[0] ? names[type] : "?";
}

// ---------------------------------------------------------------------------------------------
// the algorithms

const rl_recipe_algo_def_t *rl_recipe_algo_find(const rl_recipe_algos_t *algos, const char *name) {
    for (int i = 0; algos && name && i < algos->n; i++) {
        if (strcmp(algos->all[i]->name, name) == 0) {
            return algos->all[i];
        }
    }
    return NULL;
}

// 1 when a lists row k among its own keys.
static int s_has_key(const rl_recipe_algo_def_t *a, const rl_recipe_key_t *k) {
    for (int f = 0; a->keys && a->keys[f]; f++) {
        for (const rl_recipe_key_t *x = a->keys[f]; x->section; x++) {
            if (x == k) {
                return 1;
            }
        }
    }
    return 0;
}

// 1 when k is a shared row (the table's), 0 when it is an algorithm's own.
static int s_shared(const rl_recipe_key_t *k) {
    return k >= s_keys && k < s_keys + S_NKEYS;
}

int rl_recipe_key_for(const rl_recipe_key_t *k, const rl_recipe_algo_def_t *a) {
    if (!s_shared(k)) {
        return s_has_key(a, k);
    }
    return !k->uses || (k->uses & a->uses) != 0;
}

// ---------------------------------------------------------------------------------------------
// walking the rows

void rl_recipe_keys_begin(rl_recipe_keys_t *it, const rl_recipe_algos_t *algos,
                          const rl_recipe_algo_def_t *only) {
    memset(it, 0, sizeof *it);
    it->algos = algos;
    it->only = only;
}

// The algorithm the walk is in (the it->algo-th of those walked), or NULL past the last.
static const rl_recipe_algo_def_t *s_walk_algo(const rl_recipe_keys_t *it) {
    if (it->only) {
        return it->algo == 0 ? it->only : NULL;
    }
    return it->algos && it->algo < it->algos->n ? it->algos->all[it->algo] : NULL;
}

// 1 when row k was listed by an algorithm walked before the it->algo-th.
static int s_seen(const rl_recipe_keys_t *it, const rl_recipe_key_t *k) {
    for (int i = 0; !it->only && i < it->algo; i++) {
        if (s_has_key(it->algos->all[i], k)) {
            return 1;
        }
    }
    return 0;
}

const rl_recipe_key_t *rl_recipe_keys_next(rl_recipe_keys_t *it) {
    for (;;) {
        if (it->in_algos) {
            const rl_recipe_algo_def_t *a = s_walk_algo(it);
            if (!a) {
                it->in_algos = 0; // the shared rows after algorithm.name
                continue;
            }
            const rl_recipe_key_t *f = a->keys ? a->keys[it->frag] : NULL;
            if (!f) {
                it->algo++;
                it->frag = it->item = 0;
                continue;
            }
            const rl_recipe_key_t *k = &f[it->item];
            if (!k->section) {
                it->frag++;
                it->item = 0;
                continue;
            }
            it->item++;
            if (!s_seen(it, k)) {
                return k;
            }
            continue;
        }
        if (it->row >= S_NKEYS) {
            return NULL;
        }
        const rl_recipe_key_t *k = &s_keys[it->row++];
        if (strcmp(k->section, "algorithm") == 0 && strcmp(k->key, "name") == 0) {
            it->in_algos = 1; // the algorithms' rows come next
        }
        return k;
    }
}

// ---------------------------------------------------------------------------------------------
// lookups

int rl_cfg_sections(const rl_cfg_section_t **sections) {
    *sections = s_sections;
    return S_NSECTIONS;
}

const rl_cfg_section_t *rl_cfg_section(const char *name) {
    for (int i = 0; i < S_NSECTIONS; i++) {
        if (!strcmp(s_sections[i].name, name)) {
            return &s_sections[i];
        }
    }
    return NULL;
}

const rl_recipe_key_t *rl_cfg_key(const rl_recipe_algos_t *algos, const char *section,
                                  const char *key) {
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, algos, NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        if (!strcmp(k->section, section) && !strcmp(k->key, key)) {
            return k;
        }
    }
    return NULL;
}

const rl_recipe_key_t *rl_recipe_key_find(const rl_recipe_algos_t *algos, const char *dotted) {
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
    return rl_cfg_key(algos, sec, dot + 1);
}

const char *const *rl_recipe_key_choices(const rl_recipe_algos_t *algos, const rl_recipe_key_t *k) {
    if (k->choices) {
        return k->choices;
    }
    static const char *const none[] = {NULL};
    return k->type == RL_RECIPE_T_ENUM && algos ? algos->names : none;
}

const char *rl_recipe_enum_name(const rl_recipe_algos_t *algos, const char *dotted_key, int value) {
    const rl_recipe_key_t *k = rl_recipe_key_find(algos, dotted_key);
    if (!k || k->type != RL_RECIPE_T_ENUM || value < 0) {
        return NULL;
    }
    const char *const *ch = rl_recipe_key_choices(algos, k);
    for (int i = 0; ch[i]; i++) {
        if (i == value) {
            return ch[i];
        }
    }
    return NULL;
}

int rl_cfg_applies(const rl_recipe_t *r, const rl_recipe_key_t *k) {
    if (r->algorithm.def && !rl_recipe_key_for(k, r->algorithm.def)) {
        return 0;
    }
    if (k->gate) {
        const rl_recipe_key_t *g = rl_recipe_key_find(r->algos, k->gate);
        RL_ASSERT(g && g->type == RL_RECIPE_T_BOOL);
        if (!*(const bool *)((const char *)r + g->offset)) {
            return 0;
        }
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// defaults per algorithm

// a's default of k ("algorithm.beta"), or NULL
static const char *s_algo_default(const rl_recipe_algo_def_t *a, const rl_recipe_key_t *k) {
    for (int i = 0; a && a->defaults && a->defaults[i].key; i++) {
        const char *d = a->defaults[i].key;
        size_t ls = strlen(k->section);
        if (strncmp(d, k->section, ls) == 0 && d[ls] == '.' && strcmp(d + ls + 1, k->key) == 0) {
            return a->defaults[i].value;
        }
    }
    return NULL;
}

const char *rl_recipe_key_default(const rl_recipe_key_t *k, const rl_recipe_algo_def_t *a) {
    const char *d = s_algo_default(a, k);
    return d ? d : k->def;
}

const char *rl_recipe_key_default_doc(const rl_recipe_algos_t *algos, const rl_recipe_key_t *k,
                                      char *out, size_t n) {
    if (!n) {
        return out;
    }
    // one text for all unless an algorithm the key applies to has a default of its own
    int differs = 0;
    for (int a = 0; algos && a < algos->n; a++) {
        const char *d = s_algo_default(algos->all[a], k);
        if (rl_recipe_key_for(k, algos->all[a]) && d && (!k->def || strcmp(d, k->def))) {
            differs = 1;
        }
    }
    if (!differs) {
        snprintf(out, n, "%s", k->def_doc);
        return out;
    }
    size_t o = 0;
    out[0] = '\0';
    for (int a = 0; a < algos->n && o < n; a++) {
        if (!rl_recipe_key_for(k, algos->all[a])) {
            continue;
        }
        const char *d = rl_recipe_key_default(k, algos->all[a]);
        int w = snprintf(out + o, n - o, "%s%s (%s)", o ? ", " : "", d ? d : k->def_doc,
                         algos->all[a]->name);
        o = w < 0 ? n : o + (size_t)w;
    }
    return out;
}

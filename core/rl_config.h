// rl_config — the recipe: YAML file + command-line overrides -> one typed, validated struct.
// One schema table (rl_recipe_schema) drives everything: parsing, defaults, range and choice
// checks, the resolved YAML that `rlctl validate` prints, and the docs test that keeps
// docs/recipe.md complete. Every error names file:line:column and the dotted key, says what was
// found and what is allowed, and all errors of a recipe are reported at once. Each key keeps
// its source position so later stages can report problems found after loading (a broken
// config.json, say) at the line that named the file. This module reads no model or data file:
// it only checks that referenced paths exist. Schema and semantics: docs/recipe.md.
//
// The implementation is split by job (core/rl_config_priv.h is what the parts share):
//   rl_config_schema.c    the table, the enums' choice lists, the shared name lists, lookups
//   rl_config_load.c      YAML -> typed struct: conversions, defaults, error list, positions
//   rl_config_override.c  command-line `a.b=value` spliced into the YAML tree
//   rl_config_check.c     cross-key checks (generic, what an algorithm uses, its own check), files
//   rl_config_write.c     the resolved YAML that `rlctl validate` prints
#ifndef RL_CONFIG_H
#define RL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- value types and the schema table -------------------------------------------------------

typedef enum {
    RL_RECIPE_T_BOOL = 0,
    RL_RECIPE_T_INT,         // stored as int
    RL_RECIPE_T_FLOAT,       // stored as double
    RL_RECIPE_T_STRING,      // stored as char * (NULL when optional and unset)
    RL_RECIPE_T_ENUM,        // stored as int: the index into `choices` (-1 when unset)
    RL_RECIPE_T_PATH_FILE,   // char *: absolute path of an existing file (when RL_RECIPE_K_EXISTS)
    RL_RECIPE_T_PATH_DIR,    // char *: absolute path of a directory
    RL_RECIPE_T_STRING_LIST, // rl_recipe_strlist_t
    RL_RECIPE_T_FLOAT_LIST,  // double[count]
    RL_RECIPE_T_MAP,         // char *: any YAML map, kept as JSON text (reward plugin ABI)
    RL_RECIPE_T_ENDPOINTS,   // rl_recipe_endpoints_t: [{endpoint: tcp://.., server_key: path}]
    RL_RECIPE_T_HTTP,        // rl_recipe_http_t: {url: http://.., timeout, format, retries}
    RL_RECIPE_T_PATH_LIST,   // rl_recipe_strlist_t: absolute paths of files or folders (of
                             // *.jsonl), given as one path, a list or a glob (expanded, sorted
                             // by name); n == 0 when optional and unset
} rl_recipe_type_t;

enum {
    RL_RECIPE_K_REQUIRED = 1u << 0, // no default: the recipe must set it
    RL_RECIPE_K_OPTIONAL = 1u << 1, // may stay unset (null); printed as null
    RL_RECIPE_K_MIN_EXCL = 1u << 2, // value > min (else >= min)
    RL_RECIPE_K_MAX_EXCL = 1u << 3, // value < max (else <= max)
    RL_RECIPE_K_EXISTS = 1u << 4,   // a path that must exist when loaded
    RL_RECIPE_K_DERIVED = 1u << 5,  // default computed from other keys (see def_doc)
    RL_RECIPE_K_FOLDER = 1u << 6,   // a file key that may also name a folder (of *.jsonl files)
    RL_RECIPE_K_SETTINGS = 1u << 7, // an algorithm's own key whose value lives in its settings
                                    // (offset into rl_recipe_algorithm_t.settings)
};

// What an algorithm does, which decides the keys outside its own that apply to it
// (rl_recipe_key_t.uses, rl_recipe_algo_def_t.uses).
enum {
    RL_RECIPE_USES_SAMPLES = 1u << 0,    // samples its own policy: prompts, rewards (GRPO, PPO)
    RL_RECIPE_USES_SEQUENCES = 1u << 1,  // trains on given sequences (SFT, DPO, RM)
    RL_RECIPE_USES_PAIRS = 1u << 2,      // preference pairs (DPO, RM)
    RL_RECIPE_USES_MARGINS = 1u << 3,    // a pair's margin (RM)
    RL_RECIPE_USES_REF_SUMS = 1u << 4,   // the reference's sums of a pair's rows, cached (DPO)
    RL_RECIPE_USES_CRITIC = 1u << 5,     // a critic (PPO)
    RL_RECIPE_USES_SCORE_HEAD = 1u << 6, // the actor is a model with a score head (RM)
};

typedef struct {
    const char *section;        // "optim"; for a list section ("rewards"), one entry's keys
    const char *key;            // "lr"
    rl_recipe_type_t type;
    size_t offset;              // into rl_recipe_t, or into the entry struct of a list section
    const char *def;            // default as YAML text; NULL when required, optional, derived
    const char *def_doc;        // the default as docs show it ("required", "runs/<run.name>")
    unsigned flags;             // RL_RECIPE_K_*
    double min, max;            // numeric range; for lists, bounds on each item
    int count;                  // FLOAT_LIST: exact number of items
    const char *const *choices; // ENUM values, or allowed STRING_LIST items; NULL-terminated
                                // (algorithm.name: NULL, the algorithms of the catalog)
    unsigned uses;              // RL_RECIPE_USES_*: a shared row applies to the algorithms that
                                // do one of these (0: every one); an algorithm's own row applies
                                // to the algorithms that list it
    const char *gate;           // a bool key that must be true for this key to apply, or NULL
    const char *needs;          // PATH_DIR: a file the directory must contain, or NULL
    const char *doc;            // one line of meaning
} rl_recipe_key_t;

// Writing rows (an algorithm's own, in its file): where the value lives, a default the docs
// show as written, and the bounds that mean none (an int key's upper one; a float key's).
#define RL_RECIPE_AT(field) offsetof(rl_recipe_t, field)
#define RL_RECIPE_DEF(yaml) .def = yaml, .def_doc = yaml
// A key of an algorithm's own settings struct (its file's; rl_recipe_algo_def_t.settings_size):
// .offset = RL_RECIPE_IN(s_grpo_settings_t, num_generations), .flags = RL_RECIPE_K_SETTINGS
#define RL_RECIPE_IN(type, field) offsetof(type, field)
#define RL_RECIPE_IMAX 2147483647.0
#define RL_RECIPE_BIG 1e300

// ---- algorithms ---------------------------------------------------------------------------
// An algorithm's part of the recipe is declared in the algorithm's own file (algorithms/rl_algo_*.c):
// its name, what it does (which shared keys apply), its own keys (fragments of schema rows in
// section "algorithm"; a fragment several algorithms share, such as the policy-gradient loss's
// clip knobs, is declared once by its owner and listed by each), its defaults of keys it shares
// with others, and its checks between keys. The loader is given the catalog of every algorithm
// (rl_recipe_algos_t) and names none of them.

typedef struct {
    const char *key;   // "algorithm.beta"
    const char *value; // YAML text
} rl_recipe_default_t;

typedef struct rl_cfg_ctx rl_recipe_check_t; // a load in progress (rl_recipe_check_*)
typedef struct rl_recipe rl_recipe_t;

typedef struct rl_recipe_algo_def {
    const char *name;                    // algorithm.name
    const char *title;                   // in messages: "GRPO", "a reward model"
    const char *doc;                     // one line: what it trains
    unsigned uses;                       // RL_RECIPE_USES_*
    const rl_recipe_key_t *const *keys;  // its fragments, NULL-terminated; each fragment's rows
                                         // end with one whose section is NULL
    const rl_recipe_default_t *defaults; // its defaults of shared keys (ends {NULL}), or NULL
    size_t settings_size;                // its settings struct (its file's), where the values
                                         // of its RL_RECIPE_K_SETTINGS keys live; 0: none
    // Its checks between keys (NULL: none), after the checks of what it uses (samples: a prompt
    // format and a reward; pairs: a pair format), reported with rl_recipe_check_err.
    void (*check)(rl_recipe_check_t *c, const rl_recipe_t *r);
} rl_recipe_algo_def_t;

// Every algorithm of a build (the algorithm layer's rl_algos()). borrowed by each recipe loaded
// with it; valid until program exit.
typedef struct {
    const rl_recipe_algo_def_t *const *all;
    int n;
    const char *const *names; // the n names, NULL-terminated: algorithm.name's choices
} rl_recipe_algos_t;

// In an algorithm's check: an error at the key's position ("file:line:col: key: ...", or the
// file when the key took its default).
void rl_recipe_check_err(rl_recipe_check_t *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// In an algorithm's check: 1 when the recipe (or an override) set `key`.
int rl_recipe_check_is_set(rl_recipe_check_t *c, const char *key);
// In an algorithm's check: the sequences of one optimizer step (`what` says whose, for the
// error) are what train.micro_batch_size divides; derives train.micro_batch_size when unset.
void rl_recipe_check_step(rl_recipe_check_t *c, long long per_step, const char *what);

// The algorithm called `name` in the catalog, or NULL.
const rl_recipe_algo_def_t *rl_recipe_algo_find(const rl_recipe_algos_t *algos, const char *name);
// 1 when key k can apply to algorithm a: one of a's own rows, or a shared row of what a uses.
int rl_recipe_key_for(const rl_recipe_key_t *k, const rl_recipe_algo_def_t *a);

// ---- the schema -----------------------------------------------------------------------------

// The schema's rows in recipe order: the shared rows (core/rl_config_schema.c) with the
// algorithms' own rows after algorithm.name (those of every algorithm of `algos`, or of `only`
// when not NULL; a row several algorithms list comes once, in the first one's order):
//   rl_recipe_keys_t it;
//   rl_recipe_keys_begin(&it, algos, NULL);
//   for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) ...
typedef struct {
    const rl_recipe_algos_t *algos;
    const rl_recipe_algo_def_t *only;
    int row, algo, frag, item, in_algos;
} rl_recipe_keys_t;
void rl_recipe_keys_begin(rl_recipe_keys_t *it, const rl_recipe_algos_t *algos,
                          const rl_recipe_algo_def_t *only);
const rl_recipe_key_t *rl_recipe_keys_next(rl_recipe_keys_t *it);

// The row of "optim.lr", "rewards.builtin" or "rewards[3].builtin" among the shared rows and
// every algorithm's (algos may be NULL: the shared rows only), or NULL.
// borrowed; valid until program exit.
const rl_recipe_key_t *rl_recipe_key_find(const rl_recipe_algos_t *algos, const char *dotted);

// A name TRL, transformers, PEFT, verl or OpenRLHF users write for a setting (learning_rate,
// vllm_gpu_memory_utilization), answered for a recipe of algorithm `a` (NULL: not known): writes
// into out "'learning_rate' is transformers/TRL's name; rlctl's is optim.lr (how the meanings
// differ)", or "'x' is TRL's; rlctl has no such key: why", or for a setting only other
// algorithms have "'x' is TRL's name for a setting grpo does not have (algorithm.name ppo: key)",
// and returns 1; 0 when the name is none of theirs. *key_p (may be NULL) is set to the recipe
// key named when it is one key that takes their value as it is (learning_rate: optim.lr; not
// num_train_epochs: train.steps), else NULL. borrowed; valid until program exit.
int rl_recipe_foreign(const rl_recipe_algos_t *algos, const rl_recipe_algo_def_t *a,
                      const char *name, char *out, size_t cap, const char **key_p);

// Returns "bool", "int", ... for a type. borrowed; valid until program exit.
const char *rl_recipe_type_name(rl_recipe_type_t type);

// The choices of an ENUM or STRING_LIST row: k->choices, or for algorithm.name the catalog's
// names. borrowed; valid until program exit.
const char *const *rl_recipe_key_choices(const rl_recipe_algos_t *algos, const rl_recipe_key_t *k);

// The default of key k, as YAML text, for a recipe of algorithm `a` (NULL when unknown): a's
// default of it when a has one, else k->def (NULL for required, optional and derived keys).
// borrowed; valid until program exit.
const char *rl_recipe_key_default(const rl_recipe_key_t *k, const rl_recipe_algo_def_t *a);

// Writes the default of key k as docs and `rlctl validate --keys` show it into out[0..n)
// (truncated to n - 1 bytes): k->def_doc when every algorithm the key applies to has the same
// default, else each one's default with the algorithm in parentheses, in catalog order
// ("0.0 (grpo), 0.05 (ppo)"). Returns out.
const char *rl_recipe_key_default_doc(const rl_recipe_algos_t *algos, const rl_recipe_key_t *k,
                                      char *out, size_t n);

// Returns the name of value `value` of the ENUM key `dotted_key` ("optim.scheduler",
// "rewards.builtin"; algorithm.name: the catalog's, with algos not NULL), or NULL when either is
// unknown. borrowed; valid until program exit.
const char *rl_recipe_enum_name(const rl_recipe_algos_t *algos, const char *dotted_key, int value);

// ---- enum values (the order of each key's `choices`) --------------------------------------

enum {
    RL_RECIPE_DTYPE_FLOAT32 = 0,
    RL_RECIPE_DTYPE_BFLOAT16 = 1,
    RL_RECIPE_DTYPE_FLOAT16 = 2,
    RL_RECIPE_DTYPE_AUTO = 3, // the input model's torch_dtype
};
enum {
    RL_RECIPE_CHAT_AUTO = 0,
    RL_RECIPE_CHAT_CHATML = 1,
    RL_RECIPE_CHAT_LLAMA3 = 2,
    RL_RECIPE_CHAT_NONE = 3,
};
enum {
    RL_RECIPE_FORMAT_AUTO = 0,
    RL_RECIPE_FORMAT_PROMPT = 1,
    RL_RECIPE_FORMAT_PROMPT_COMPLETION = 2,
    RL_RECIPE_FORMAT_TEXT = 3,
    RL_RECIPE_FORMAT_MESSAGES = 4,
    RL_RECIPE_FORMAT_PREFERENCE = 5, // {prompt, chosen, rejected}: DPO
};
enum { RL_RECIPE_PREF_SIGMOID = 0, RL_RECIPE_PREF_HINGE = 1, RL_RECIPE_PREF_IPO = 2 };
enum { RL_RECIPE_TRUNC_ERROR = 0, RL_RECIPE_TRUNC_DROP = 1 };
enum { RL_RECIPE_SCALE_GROUP = 0, RL_RECIPE_SCALE_BATCH = 1, RL_RECIPE_SCALE_NONE = 2 };
enum { RL_RECIPE_ADV_GRPO = 0, RL_RECIPE_ADV_RLOO = 1 };
enum { RL_RECIPE_KL_K1 = 0, RL_RECIPE_KL_K2 = 1, RL_RECIPE_KL_K3 = 2 };
enum {
    RL_RECIPE_AGG_TOKEN_MEAN = 0,
    RL_RECIPE_AGG_SEQ_MEAN_TOKEN_MEAN = 1,
    RL_RECIPE_AGG_SEQ_MEAN_TOKEN_SUM_NORM = 2,
};
enum { RL_RECIPE_TIS_NONE = 0, RL_RECIPE_TIS_TOKEN = 1, RL_RECIPE_TIS_SEQUENCE = 2 };
enum { RL_RECIPE_OPTIM_ADAMW = 0 };
// roles.reference, roles.critic: in the actor's process(es); one process of its own; a group of
// its own on the mesh's shape (dp·fsdp processes, sharded like the actor; on 1×1: one process)
enum { RL_RECIPE_REF_ACTOR = 0, RL_RECIPE_REF_WORKER = 1, RL_RECIPE_REF_MESH = 2 };
enum { RL_RECIPE_BALANCE_EVEN = 0, RL_RECIPE_BALANCE_SPEED = 1 }; // roles.balance
// roles.weight_sync: CUDA IPC for every sampler that can take it, else buckets through host
// memory; always buckets; CUDA IPC or a refusal
enum { RL_RECIPE_SYNC_AUTO = 0, RL_RECIPE_SYNC_HOST = 1, RL_RECIPE_SYNC_IPC = 2 };
// mesh.collectives: NCCL between the ranks' GPUs where each rank holds one (and NCCL loads), else
// host memory; always host memory; NCCL or a refusal
enum { RL_RECIPE_COLL_AUTO = 0, RL_RECIPE_COLL_HOST = 1, RL_RECIPE_COLL_NCCL = 2 };
// env.builtin, env.on_error, env.tool_parser (the parser's order is env/rl_toolcall.h's)
enum { RL_RECIPE_ENV_CALC = 0 };
enum { RL_RECIPE_ENV_STOP = 0, RL_RECIPE_ENV_DROP = 1 };
enum { RL_RECIPE_TOOLS_HERMES = 0, RL_RECIPE_TOOLS_LLAMA3_JSON = 1 };
enum { RL_RECIPE_SCHED_CONSTANT = 0, RL_RECIPE_SCHED_LINEAR = 1, RL_RECIPE_SCHED_COSINE = 2 };
enum {
    RL_RECIPE_REWARD_HTTP = -4,    // `http:` names a reward server (rl_recipe_http_t)
    RL_RECIPE_REWARD_COMMAND = -3, // `command:` names a program speaking JSON lines
    RL_RECIPE_REWARD_MODEL = -2,   // `model:` names a reward model's folder
    RL_RECIPE_REWARD_PLUGIN = -1,  // `plugin:` names a .so
    RL_RECIPE_REWARD_MATH_ANSWER = 0,
    RL_RECIPE_REWARD_REGEX_FORMAT = 1,
    RL_RECIPE_REWARD_LENGTH = 2,
    RL_RECIPE_REWARD_NBUILTIN = 3,
};

// ---- names that model/ and rewards/ share with the recipe (each list exists only here) -----
// core is the lowest layer, so the lists live here and the others use them: the recipe's
// choices for lora.target_modules and rewards[].builtin, model/rl_lora's PEFT module names and
// rewards/rl_reward_builtin's table names are the same strings. Macros, so that a static table
// elsewhere (a reward's rl_reward_table_t, rl_lora's module paths) can be built from them.

// LoRA's target modules, the 7 projections of a Llama/Qwen block, in PEFT order: module
// m = 0..6 (bit m of a target set in model/rl_lora.h and model/rl_model.h).
#define RL_RECIPE_LORA_NMOD 7
#define RL_RECIPE_LORA_Q_PROJ "q_proj"
#define RL_RECIPE_LORA_K_PROJ "k_proj"
#define RL_RECIPE_LORA_V_PROJ "v_proj"
#define RL_RECIPE_LORA_O_PROJ "o_proj"
#define RL_RECIPE_LORA_GATE_PROJ "gate_proj"
#define RL_RECIPE_LORA_UP_PROJ "up_proj"
#define RL_RECIPE_LORA_DOWN_PROJ "down_proj"
#define RL_RECIPE_LORA_ALL_LINEAR "all-linear" // PEFT's spelling of "all 7"

// PEFT's name of module m ("q_proj"), NULL for m outside 0..6. borrowed; valid until program
// exit.
const char *rl_recipe_lora_module_name(int m);

// The built-in rewards, named for rewards[].builtin and for their ABI tables.
#define RL_RECIPE_REWARD_MATH_ANSWER_NAME "math_answer"
#define RL_RECIPE_REWARD_REGEX_FORMAT_NAME "regex_format"
#define RL_RECIPE_REWARD_LENGTH_NAME "length"

// The name of built-in `which` (RL_RECIPE_REWARD_MATH_ANSWER .. _LENGTH), NULL for any other
// value (RL_RECIPE_REWARD_PLUGIN included). borrowed; valid until program exit.
const char *rl_recipe_reward_builtin_name(int which);

// ---- the typed recipe ---------------------------------------------------------------------
// Paths are absolute (inputs resolved against the recipe's directory, see docs/recipe.md).

typedef struct {
    char **items;
    int n;
} rl_recipe_strlist_t;

// A paths key's items as the dataset readers take them (rl_jsonl_open_list): borrowed; valid
// until the recipe is destroyed.
static inline const char *const *rl_recipe_paths(const rl_recipe_strlist_t *l) {
    return (const char *const *)l->items;
}

typedef struct {
    char *name;
    char *dir;
    int seed;
} rl_recipe_run_t;

typedef struct {
    char *path;      // Hugging Face folder (holds config.json)
    int dtype;       // RL_RECIPE_DTYPE_*
    char *tokenizer; // tokenizer.json
    int chat_template; // RL_RECIPE_CHAT_*
    char *device;      // "cpu", "cuda", "cuda:N" as written (rl_cli_check_model checks it)
} rl_recipe_model_t;

typedef struct {
    bool enabled;    // false: full fine-tuning
    int r;
    double alpha;
    double dropout;
    rl_recipe_strlist_t target_modules; // "all-linear" is expanded to the 7 projections
    bool use_rslora;
} rl_recipe_lora_t;

typedef struct {
    rl_recipe_strlist_t train; // the files and folders of the training set, in reading order
    rl_recipe_strlist_t eval;  // the held-out set's (n == 0 when unset)
    int format;      // RL_RECIPE_FORMAT_*
    char *prompt_field, *completion_field, *answer_field, *text_field, *messages_field;
    char *chat_template_kwargs; // keyword arguments of the chat template, a JSON object's text
    char *chosen_field, *rejected_field; // DPO's and RM's preference rows
    char *margin_field;                  // RM: a pair's margin (used when the rows have it)
    char *ref_cache;  // DPO: the reference sums' cache folder; NULL: $XDG_CACHE_HOME/rlctl/refcache
    rl_recipe_strlist_t eval_pairs; // DPO, RM: held-out preference rows' (n == 0 when unset)
    int max_length;   // SFT
    int max_prompt_length; // GRPO
    int truncation;  // RL_RECIPE_TRUNC_*
    bool shuffle;
} rl_recipe_data_t;

typedef struct {
    int name; // the algorithm's index in the catalog the recipe was loaded with
    const rl_recipe_algo_def_t *def; // that algorithm (NULL only while loading an unknown name)
    void *settings; // def->settings_size bytes: the algorithm's own struct (its file declares
                    // it), owned by the recipe; NULL when it has none
    // The keys the losses and rollouts read in the worker processes too (their rows live
    // with their owners: trainer/rl_grpo.c, trainer/rl_loss.c, run/rl_rollout.c, and the
    // algorithm that alone has them). An algorithm's other keys are in its settings.
    int scale_rewards;                           // GRPO: RL_RECIPE_SCALE_*
    int advantage;                               // GRPO: RL_RECIPE_ADV_*
    double std_eps;                              // GRPO
    double epsilon_low, epsilon_high, dual_clip; // the clipped policy loss (GRPO, PPO)
    double beta;                                 // KL coefficient (GRPO, PPO; DPO's temperature)
    int kl_estimator;                            // GRPO: RL_RECIPE_KL_*
    int loss_agg;                                // RL_RECIPE_AGG_* (GRPO, PPO)
    int tis;                                     // RL_RECIPE_TIS_* (GRPO, PPO)
    double tis_cap;
    bool mask_truncated_completions; // a rollout's shaping (GRPO, PPO)
    int overlong_buffer;
    double overlong_penalty;
    char *policy_loss;         // GRPO: the policy-gradient loss, a name of the loss registry
                               // (trainer/rl_loss.h), checked by GRPO's recipe check
    double value_clip;         // PPO: epsilon_v of the clipped value loss
    int loss_type;             // DPO: RL_RECIPE_PREF_*
    double label_smoothing;    // DPO: cDPO's epsilon (sigmoid)
    double rpo_alpha;          // DPO: weight of RPO's NLL term on chosen; 0 = off
    double center_rewards_coefficient; // RM: TRL's weight of mean((r_w + r_l)^2); 0 = off
} rl_recipe_algorithm_t;

typedef struct {
    double lr;          // the critic's peak learning rate (default: optim.lr)
    int warmup_steps;   // its linear warmup (its schedule is optim.scheduler)
    char *init;         // "base" (model.path with a fresh head) or a reward-model folder
    bool lora;          // LoRA (the lora section's rank, alpha, targets) or full; default
                        // lora.enabled
} rl_recipe_critic_t;

typedef struct {
    double temperature, top_p;
    int top_k, max_new_tokens;
    int max_batch; // most sequences a sampler decodes at once (its KV cache slots)
    rl_recipe_strlist_t stop;
} rl_recipe_sampling_t;

enum { RL_RECIPE_HTTP_RLCTL = 0, RL_RECIPE_HTTP_OPENRLHF = 1 }; // rewards[].http.format

// A reward server (rewards[].http): docs/rewards.md, "Rewards over HTTP".
typedef struct {
    char *url;      // "http://HOST[:PORT][/PATH]"; NULL when the entry has no `http:`
    double timeout; // seconds one attempt (connect, send, reply) may take
    int format;     // RL_RECIPE_HTTP_*: the request and reply objects
    int retries;    // attempts after the first, on a connection failure or a 5xx status
} rl_recipe_http_t;

typedef struct {
    char *name;
    double weight;
    int builtin;       // RL_RECIPE_REWARD_* (RL_RECIPE_REWARD_PLUGIN when `plugin` is set,
                       // RL_RECIPE_REWARD_MODEL when `model` is, _COMMAND, _HTTP)
    char *plugin;      // absolute path of the .so, or NULL
    char *model;       // absolute path of a reward model's folder (an HF sequence classifier),
                       // or NULL
    char *config_json; // the entry's `config:` map as JSON text ("{}" when absent)
    rl_recipe_strlist_t command; // the program and its arguments (n = 0 when unset); items
                                 // naming a file beside the recipe are absolute
    rl_recipe_http_t http;       // the reward server (http.url NULL when unset)
    char *python_json; // the entry's `python:` map as JSON text, its file absolute (NULL when
                       // unset); at load it becomes `command` (python3, the runner, file, function)
    // Not keys of the entry: copied from the rest of the recipe at load, so that a reward opened
    // from its entry alone (the reward worker, rl_reward_check) has what it needs.
    double reward_timeout;    // roles.reward_timeout: a command or http reward gives up on a
                              // batch a little before the controller does
    const char *answer_field; // data.answer_field (the labels of http format openrlhf);
                              // borrowed; valid until rl_recipe_destroy
} rl_recipe_reward_t;

// Multi-turn episodes (docs/envs.md): the environment a GRPO or PPO rollout talks to. Unset
// (builtin -1, no command, no plugin, no http): one prompt -> one completion, as always.
typedef struct {
    int builtin;                 // RL_RECIPE_ENV_* or -1
    rl_recipe_strlist_t command; // a program speaking the protocol (n = 0 when unset); items
                                 // naming a file beside the recipe are absolute
    char *plugin;                // absolute path of an environment .so (rlctl/env.h), or NULL
    char *config_json;           // env.config as JSON text ("{}" when absent): the plugin's
                                 // create() configuration
    rl_recipe_http_t http;       // a server speaking it (http.url NULL when unset); its format
                                 // is unused (the recipe refuses one)
    int workers;                 // copies of the program, each taking a share of the episodes
    int max_turns;               // policy turns per episode
    int max_tokens;              // tokens of an episode after its first prompt
    double timeout;              // seconds one request may wait for its reply
    int on_error;                // RL_RECIPE_ENV_STOP or _DROP
    int tool_parser;             // RL_RECIPE_TOOLS_*
    bool keep_kv_cache;          // samplers keep an episode's KV cache between its turns
} rl_recipe_env_t;

typedef struct {
    int name;          // RL_RECIPE_OPTIM_*
    double lr;
    double betas[2];
    double eps, weight_decay, max_grad_norm;
    int scheduler;     // RL_RECIPE_SCHED_*
    int warmup_steps;
    double warmup_ratio, min_lr_ratio;
} rl_recipe_optim_t;

typedef struct {
    int steps, batch_size, micro_batch_size;
    int eval_every, save_every, keep_checkpoints, log_every, eval_samples;
    int eval_k;                 // completions sampled per eval prompt (eval/pass@k when > 1)
    double eval_pass_threshold; // a completion passes when its total reward reaches this
    bool recompute;
    bool optimizer_offload; // on a GPU: AdamW on the host (heads and meshes always are)
    int threads;
    int step_sequences; // derived by the checks: the sequences of one optimizer step,
                        // which micro_batch_size must divide (0: not known)
} rl_recipe_train_t;

// A remote sampler (roles.remote_samplers[i]).
typedef struct {
    char *endpoint;         // "tcp://HOST:PORT"
    char *server_key;       // absolute path of its public key file
} rl_recipe_endpoint_t;

typedef struct {
    rl_recipe_endpoint_t *items;
    int n;
} rl_recipe_endpoints_t;

typedef struct {
    int samplers;           // sampler worker processes
    int reference;          // RL_RECIPE_REF_*
    int critic;             // RL_RECIPE_REF_*: the critic in the actor's process or its own
    int actor_threads, sampler_threads; // 0 = train.threads
    double reward_timeout, request_timeout, heartbeat; // seconds
    double stop_grace;      // seconds from a stop signal until the run is gone
    rl_recipe_endpoints_t remote_samplers; // rlctl sampler serve endpoints
    int balance;            // RL_RECIPE_BALANCE_*: how a step's prompts are spread
    double sync_bucket_mb;  // the weights travel to samplers in buckets of this many MiB
    int weight_sync;        // RL_RECIPE_SYNC_*: how (docs/gpu.md, "Weight sync on a GPU")
    char *client_key;       // the controller's secret key file (NULL: none)
    char *devices;          // a role's device instead of model.device: a JSON object's text
                            // {actor, critic, reference, samplers: "cuda:N" or a list: sampler
                            // i / a mesh's rank i on entry i mod n} (rl_cli_check_model checks)
} rl_recipe_roles_t;

// The DP×FSDP mesh the actor (and a critic it holds) trains on (docs/mesh.md).
typedef struct {
    int dp, fsdp;           // the shape: dp replicas of fsdp shards; 1×1 = no mesh
    int devices;            // dp × fsdp (checked: a recipe that says both must agree)
    char *launcher;         // the MPI launcher that starts the ranks ("mpirun")
    rl_recipe_strlist_t launcher_args; // more arguments for it, before the program
    // ranks on other hosts (docs/mesh.md, "Across hosts"): all NULL = every rank on this host
    char *hostfile;         // the launcher's hostfile (absolute)
    char *endpoint;         // tcp://ADDR:PORT the controller binds for its ranks
    char *key;              // the controller's secret key file (NULL: roles.client_key)
    char *rank_key;         // the ranks' secret key file, the same absolute path on every host
    char *allow;            // the ranks' public keys the controller admits (a file)
    int share_devices;      // ranks on GPUs may share a device (else one device per rank)
    int collectives;        // RL_RECIPE_COLL_*: the actor's gradients and optimizer on GPUs
} rl_recipe_mesh_t;

// What a run prints beside its metrics.
typedef struct {
    int completions; // completions shown as a table every logged step (TRL's log_completions)
} rl_recipe_log_t;

typedef struct rl_recipe_priv rl_recipe_priv_t;

struct rl_recipe {
    char *path;        // the recipe's name as given to the loader
    const rl_recipe_algos_t *algos; // the catalog it was loaded with (borrowed)
    rl_recipe_run_t run;
    rl_recipe_model_t model;
    rl_recipe_lora_t lora;
    rl_recipe_data_t data;
    rl_recipe_algorithm_t algorithm;
    rl_recipe_critic_t critic;
    rl_recipe_sampling_t sampling;
    rl_recipe_reward_t *rewards;
    int n_rewards;
    rl_recipe_env_t env;
    rl_recipe_optim_t optim;
    rl_recipe_train_t train;
    rl_recipe_roles_t roles;
    rl_recipe_mesh_t mesh;
    rl_recipe_log_t log;
    rl_recipe_priv_t *priv; // source positions; use rl_recipe_key_location
};

// 1 when the recipe's rollouts are multi-turn episodes (env.builtin, command or plugin set).
static inline int rl_recipe_has_env(const rl_recipe_t *r) {
    return r->env.builtin >= 0 || r->env.command.n > 0 || r->env.plugin != NULL ||
           r->env.http.url != NULL;
}

// ---- loading --------------------------------------------------------------------------------

#define RL_RECIPE_MAX_REWARDS 64
#define RL_RECIPE_MAX_ERRORS 100

enum {
    RL_RECIPE_NO_FILE_CHECKS = 1u << 0, // skip the existence checks of referenced paths
};

// Loads the recipe file `path`, applies `overrides` ("dotted.key=<YAML value>", in order; a
// key may index list entries as rewards.0.weight or rewards[0].weight), fills every default
// and validates. `flags` is a mask of RL_RECIPE_NO_FILE_CHECKS. On success returns 0 and sets
// *out. On an invalid recipe returns RL_EINVAL and writes every error, one per line
// ("file:line:col: key: what was found; what is allowed"), into err; RL_ENOMEM when out of
// memory; a positive errno when the file cannot be read. caller owns *out; free with
// rl_recipe_destroy.
// `algos` is the catalog of algorithms (rl_algos()), borrowed by the recipe.
int rl_recipe_load_file(const rl_recipe_algos_t *algos, const char *path,
                        const char *const *overrides, int n_overrides, unsigned flags,
                        rl_recipe_t **out, char *err, size_t err_len);

// As rl_recipe_load_file, for recipe text text[0..len) named `name` in messages; relative
// paths resolve against name's directory (the current one when name has no '/').
int rl_recipe_load_string(const rl_recipe_algos_t *algos, const char *text, size_t len,
                          const char *name, const char *const *overrides, int n_overrides,
                          unsigned flags, rl_recipe_t **out, char *err, size_t err_len);

// Frees the recipe; a no-op when *recipe_p is NULL; sets *recipe_p to NULL.
void rl_recipe_destroy(rl_recipe_t **recipe_p);

// What the loader took from outside the recipe for keys it leaves unset (the model's
// generation_config.json sampling defaults), as one line for the log; "" when nothing.
// borrowed; valid until rl_recipe_destroy.
const char *rl_recipe_note(const rl_recipe_t *r);

// ---- after loading --------------------------------------------------------------------------

// Writes the resolved recipe (every applicable key, defaults filled, absolute paths) as YAML
// that the loader accepts unchanged. Returns 0 or RL_ENOMEM.
// caller owns *out; free with free().
int rl_recipe_to_yaml(const rl_recipe_t *recipe, char **out);

// Where `dotted_key` ("model.path", "rewards[1].plugin") was set. Returns 0 with the key's
// position (file borrowed; valid until rl_recipe_destroy), or RL_ENOTFOUND when the key took
// its default, in which case *file is the recipe's path and *line = *col = 0.
int rl_recipe_key_location(const rl_recipe_t *recipe, const char *dotted_key, const char **file,
                           int *line, int *col);

// The value of a number, bool or enum key ("algorithm.gamma", "optim.lr") that applies to the
// recipe, as a double (an enum's index, a bool's 0 or 1): 0 with *out set, or RL_ENOTFOUND.
int rl_recipe_number(const rl_recipe_t *recipe, const char *dotted_key, double *out);

// Formats "file:line:col: dotted_key: <fmt...>" (or "file: dotted_key: ..." for a defaulted
// key) into err, for errors found after loading. Returns `code`.
int rl_recipe_errorf(const rl_recipe_t *recipe, const char *dotted_key, char *err,
                     size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#ifdef __cplusplus
}
#endif
#endif

// rl_cli — the rlctl subcommands and the small helpers they share. Each subcommand lives in
// cli/cmd_<name>.c as `int rl_cmd_<name>(int argc, char **argv)`, where argv[0] is the
// subcommand name; it returns the process exit code: 0 ok, 1 runtime failure, 2 usage or
// invalid input that the user must fix (bad recipe, bad flags).
#ifndef RL_CLI_H
#define RL_CLI_H

#include "rl_config.h"
#include "rl_model.h"
#include "rl_tokenizer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { RL_EXIT_OK = 0, RL_EXIT_FAIL = 1, RL_EXIT_USAGE = 2 };

int rl_cmd_run(int argc, char **argv);
int rl_cmd_validate(int argc, char **argv);
int rl_cmd_tokenize(int argc, char **argv);
int rl_cmd_detokenize(int argc, char **argv);
int rl_cmd_inspect(int argc, char **argv);
int rl_cmd_init(int argc, char **argv);
int rl_cmd_export(int argc, char **argv);
int rl_cmd_generate(int argc, char **argv);
int rl_cmd_logprobs(int argc, char **argv);
int rl_cmd_eval(int argc, char **argv);
int rl_cmd_pairs(int argc, char **argv);
int rl_cmd_traj(int argc, char **argv);
int rl_cmd_plot(int argc, char **argv);
int rl_cmd_worker(int argc, char **argv);
int rl_cmd_sampler(int argc, char **argv);
int rl_cmd_keygen(int argc, char **argv);
int rl_cmd_template(int argc, char **argv);
// `rlctl eval RECIPE.yaml ...` (cli/cmd_eval_recipe.c): argv[1] is the recipe.
int rl_cli_eval_recipe(int argc, char **argv);
int rl_cmd_serve(int argc, char **argv);
int rl_cmd_env(int argc, char **argv);
int rl_cmd_devices(int argc, char **argv);
int rl_cmd_plan(int argc, char **argv);

// Reads the recipe's model folder as `run` will: config.json, weights that match it, and a
// tokenizer that fits its vocabulary. Problems are reported at the recipe line that named the
// folder or tokenizer (RL_EINVAL, err filled); 0 when all is well. With a role on a GPU it also
// plans the devices' memory (rl_cli_plan) and refuses a plan that does not fit; plan_out: NULL,
// or where a plan that fits is kept (NULL when every role is on the CPU; kept even when a later
// check fails; caller frees).
typedef struct rl_cli_plan rl_cli_plan_t;
int rl_cli_check_model(const rl_recipe_t *r, rl_cli_plan_t **plan_out, char *err, size_t err_len);

// The device memory a recipe's run needs (rlctl plan, cli/cmd_plan.c): per role on a GPU (its
// device: roles.devices, else model.device), each of its processes' model
// (rl_model_device_plan at train.micro_batch_size rows of the recipe's longest sequence) and a
// sampler's KV cache; per device their sum beside its memory. Roles on the CPU are not counted.
#define RL_CLI_PLAN_MAX 16
typedef struct {
    char role[40];
    rl_device_t device;
    int procs;                    // processes of this role on the device (samplers: several)
    int rows;                     // tokens one forward holds
    rl_model_device_plan_t model; // each process's model
    size_t acts_flipped;          // its activations with train.recompute the other way
    size_t kv;                    // a sampler's KV cache (0: none)
    size_t total;                 // one process's bytes
} rl_cli_plan_role_t;
typedef struct {
    rl_device_t device;
    size_t total; // the bytes of every process on it
    int known;    // found: name and memory below; else why
    char name[128], why[1024];
    size_t mem_total, mem_free;
} rl_cli_plan_dev_t;
typedef struct rl_cli_plan {
    int seq_len, micro_batch;
    rl_cli_plan_role_t roles[RL_CLI_PLAN_MAX];
    int n; // 0: no role on a GPU, nothing planned
    rl_cli_plan_dev_t devs[RL_CLI_PLAN_MAX];
    int n_devs;
    size_t total;   // every process's bytes, all devices
    int fits;       // every device found holds its processes
    int largest_mb; // the largest train.micro_batch_size the recipe allows (a
                    // divisor of a step's sequences; pairs: even) that fits on
                    // every device; 0: none (or a device not found)
} rl_cli_plan_t;
// Computes p for r (a recipe loaded and checked). Returns 0, or RL_EINVAL / RL_ENOTFOUND (no
// CUDA module) with err filled.
int rl_cli_plan(const rl_recipe_t *r, rl_cli_plan_t *p, char *err, size_t err_len);
// Logs where each role that holds the model runs and its planned memory (rlctl run's placement
// lines), from p as rl_cli_check_model kept it (NULL: every role is on the CPU, nothing).
void rl_cli_plan_log(const rl_cli_plan_t *p);

// Parses a subcommand's flags with getopt_long before the subcommand reads them (argv[0] is the
// subcommand): spec lists its long flags ("force stop-at= resume?": a switch, one that takes a
// value, one that takes a value only as --resume=DIR). Rewrites *argc_p/*argv_p so that every
// flag is spelled out ("--thr=2" -> "--threads" "2"), positional arguments in their order, and
// what follows "--" as given. An unknown flag (with the nearest one), a missing value, a value
// for a switch or an ambiguous abbreviation is printed as "rlctl <cmd>: ..." and returns
// RL_EXIT_USAGE; else 0. The new argv lives until exit.
int rl_cli_flags(const char *cmd, const char *spec, int *argc_p, char ***argv_p);

// Returns 1 when argv[1..] holds "-h" or "--help".
int rl_cli_wants_help(int argc, char **argv);

// Option values: parse `v` given for `flag` of command `cmd` into *out. On a bad value print
// "rlctl <cmd>: <flag> '<v>': expected ..." on stderr and return RL_EXIT_USAGE; else 0.
int rl_cli_int(const char *cmd, const char *flag, const char *v, long lo, long hi, int *out);
int rl_cli_float(const char *cmd, const char *flag, const char *v, double lo, double hi,
                 float *out);
int rl_cli_u64(const char *cmd, const char *flag, const char *v, uint64_t *out);

// Loads an HF folder for inference (tune NONE, `threads` compute threads), its tokenizer (refused
// when an id reaches config.json's vocab_size: rl_tokenizer_new_dir), and with adapter != NULL
// a PEFT adapter. Problems are printed as "rlctl <cmd>: ..." and give
// RL_EXIT_USAGE with nothing loaded; 0 on success.
// caller owns *model_p and *tok_p; free with rl_model_destroy and rl_tokenizer_destroy.
int rl_cli_load_model(const char *cmd, const char *model_dir, const char *adapter, int threads,
                      rl_model_t **model_p, rl_tokenizer_t **tok_p);
// As rl_cli_load_model, with the model's forward on device (NULL: the CPU) for at most rows
// tokens at once (opts.device_rows; 0: rl_model's default).
int rl_cli_load_model_on(const char *cmd, const char *model_dir, const char *adapter, int threads,
                         const rl_device_t *device, int rows, rl_model_t **model_p,
                         rl_tokenizer_t **tok_p);

// A command's --device (text NULL: the CPU): parsed and checked before anything is loaded
// (rl_device_check). not_yet: NULL, or why this command does not run on a GPU yet (a usable GPU
// is then refused, saying so). Returns 0 with *out set, or RL_EXIT_USAGE after printing
// "rlctl CMD: --device TEXT: why" (no driver, no device, an index out of range, ... in
// rl_device's words).
int rl_cli_device(const char *cmd, const char *text, const char *not_yet, rl_device_t *out);

// Encodes `in` (no special tokens), or with chat = 1 `in` as one user turn of the tokenizer's
// chat template plus the assistant header. Problems are printed as "rlctl <cmd>: <what>: ..."
// (`model_dir` names the folder whose template is missing). Returns 0 or an exit code.
// caller owns *ids_p; free with free().
int rl_cli_encode(const char *cmd, rl_tokenizer_t *tok, const char *what, const char *model_dir,
                  const char *in, int chat, int32_t **ids_p, size_t *n_p);

// The math_answer score in the shape of rl_eval_score_fn (ctx unused): 1 when the completion's
// final number equals the answer; *formatted = it ends in "#### N".
double rl_cli_math_score(void *ctx, const char *text, size_t len, const char *answer,
                         int *formatted);

#ifdef __cplusplus
}
#endif
#endif

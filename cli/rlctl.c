// rlctl — the command-line entry point: dispatches to one cli/cmd_<name>.c per subcommand.
#include "rl_cli.h"
#include "rl_version.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
    // its flags for rl_cli_flags: "name" a switch, "name=" takes a value, "name?" takes one only
    // as --name=value (otherwise the command reads what follows)
    const char *flags;
} s_command_t;

// One line per subcommand; `rlctl --help` lists them in this order.
static const s_command_t s_commands[] = {
    {"run", rl_cmd_run, "train as a recipe says (grpo, ppo, dpo, rm, sft)",
     "force no-tensorboard resume? stop-at="},
    {"validate", rl_cmd_validate, "check a recipe and print it with every default filled",
     "keys no-file-checks"},
    {"tokenize", rl_cmd_tokenize, "print the token ids of a text",
     "model= tokenizer= text= file= json add-special-tokens"},
    {"detokenize", rl_cmd_detokenize, "print the text of token ids",
     "model= tokenizer= ids= json= skip-special-tokens"},
    {"inspect", rl_cmd_inspect, "list the tensors of a safetensors file or model folder", "json"},
    {"init", rl_cmd_init, "write a randomly initialised Hugging Face model folder",
     "config= tokenizer= out= dtype= seed= force"},
    {"export", rl_cmd_export, "merge a LoRA adapter into its base model (an HF folder)",
     "model= adapter= out= dtype= max-shard-size="},
    {"generate", rl_cmd_generate, "sample completions of a prompt from a model",
     "model= adapter= prompt= chat json n= max-new-tokens= temperature= top-p= top-k= seed= "
     "stop-id= threads= device= max-batch="},
    {"eval", rl_cmd_eval,
     "evaluate a model or run on held-out data (a recipe's rewards, or accuracy)",
     "model= adapter= data= prompt-field= answer-field= limit= n= max-new-tokens= temperature= "
     "top-p= top-k= seed= threads= json run= device= max-batch="},
    {"pairs", rl_cmd_pairs, "preference pairs (right vs wrong) from a model's own samples",
     "model= adapter= data= prompt-field= answer-field= limit= n= max-new-tokens= temperature= "
     "top-p= top-k= seed= threads= out="},
    {"template", rl_cmd_template, "render a conversation with a model's chat template",
     "model= tokenizer-config= template= messages= add-generation-prompt kwargs="},
    {"logprobs", rl_cmd_logprobs, "per-token logprobs of a completion given a prompt",
     "model= adapter= prompt= completion= chat json temperature= threads= device="},
    {"traj", rl_cmd_traj,
     "list, show and export the completions a run sampled; check and salvage its store",
     "jsonl step= eval"},
    {"plot", rl_cmd_plot, "draw runs' metrics.jsonl curves as an SVG file",
     "metric= out= title= width= height= smooth="},
    {"sampler", rl_cmd_sampler, "serve as a remote sampler of runs (sampler serve)",
     "bind= key= allow= model= cache= http= http-token= http-max-work= threads= logs= samplers= "
     "sessions= heartbeat="},
    {"serve", rl_cmd_serve,
     "serve a model over OpenAI-compatible HTTP (/v1/completions, /v1/chat/completions)",
     "model= adapter= http= http-token= http-max-work= name= threads= chat-template= "
     "tool-parser= device="},
    {"env", rl_cmd_env, "serve an environment plugin over stdin/stdout (env serve)",
     "plugin= builtin= config="},
    {"devices", rl_cmd_devices, "list the GPUs and the CPU this machine can compute on", "json"},
    {"plan", rl_cmd_plan, "the device memory a recipe's run needs, role by role", "json"},
    {"keygen", rl_cmd_keygen, "write a CURVE key pair for remote samplers", "out= force"},
    {"worker", rl_cmd_worker, "a worker process of a run (started by rlctl run)",
     "role= rank= connect= parent= secret-fd= max-frame= mesh= secret-file= log-dir= heartbeat= "
     "key= mesh-nonce="},
    {NULL, NULL, NULL, NULL},
};

static void s_usage(FILE *out) {
    fprintf(out,
            "rlctl %s — RL post-training for language models\n\n"
            "usage: rlctl <command> [args]   (rlctl <command> --help for its options)\n\n"
            "commands:\n",
            RLCTL_VERSION);
    for (const s_command_t *c = s_commands; c->name; c++) {
        fprintf(out, "  %-12s %s\n", c->name, c->summary);
    }
    fprintf(out, "\noptions:\n  -h, --help     this help\n  --version      print the version\n"
                 "\nenvironment:\n  RLCTL_LOG=error|warn|info|debug   log level (default info)\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        s_usage(stderr);
        return RL_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        s_usage(stdout);
        return RL_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("rlctl %s\n", RLCTL_VERSION);
        return RL_EXIT_OK;
    }
    for (const s_command_t *c = s_commands; c->name; c++) {
        if (strcmp(cmd, c->name) == 0) {
            int n = argc - 1;
            char **args = argv + 1;
            int rc = rl_cli_flags(c->name, c->flags, &n, &args);
            return rc ? rc : c->fn(n, args);
        }
    }
    const char *near = NULL; // a typo's nearest command: the most leading letters in common
    size_t best = 1;
    for (const s_command_t *c = s_commands; c->name; c++) {
        size_t k = 0;
        while (cmd[k] && cmd[k] == c->name[k]) {
            k++;
        }
        if (k > best || (k == best && !near)) {
            best = k;
            near = k >= 2 ? c->name : near;
        }
    }
    if (near) {
        fprintf(stderr,
                "rlctl: unknown command '%s'; did you mean '%s'? (rlctl --help lists the "
                "commands)\n",
                cmd, near);
    } else {
        fprintf(stderr, "rlctl: unknown command '%s' (rlctl --help lists the commands)\n", cmd);
    }
    return RL_EXIT_USAGE;
}

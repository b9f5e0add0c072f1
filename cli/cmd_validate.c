// rlctl validate — check a recipe (plus command-line overrides) and print it resolved, or print
// every error and exit 2. Also prints the key reference (--keys) that docs/recipe.md embeds.
#include "rl_cli.h"
#include "rl_algos.h"
#include "rl_config.h"
#include "rl_controller.h"
#include "rl_device.h"
#include "rl_err.h"
#include "rl_hf.h"
#include "rl_safetensors.h"
#include "rl_tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_help(FILE *out) {
    fprintf(out,
            "usage: rlctl validate RECIPE.yaml [section.key=VALUE ...]\n"
            "       rlctl validate --keys\n\n"
            "Checks a recipe and prints it resolved (every default filled, paths absolute) as\n"
            "YAML that `rlctl validate` and `rlctl run` accept unchanged. On errors, prints each\n"
            "one as file:line:column: key: message on stderr and exits 2.\n\n"
            "overrides (applied in order, checked like the recipe itself):\n"
            "  optim.lr=1e-4                      VALUE is YAML\n"
            "  lora.target_modules=[q_proj,v_proj]\n"
            "  rewards.0.weight=0.5               list entries by index (or rewards[0].weight)\n\n"
            "options:\n"
            "  --keys            print every recipe key with its type, default and meaning\n"
            "  --no-file-checks  do not check that referenced files exist, nor read the model\n"
            "  -h, --help        this help\n\n"
            "exit status: 0 valid, 2 invalid recipe or usage, 1 other failure\n"
            "schema: docs/recipe.md\n");
}

static void s_choices(FILE *out, const char *const *c) {
    for (int i = 0; c[i]; i++) {
        fprintf(out, "%s`%s`", i ? ", " : "", c[i]);
    }
}

// Markdown tables, one per section; docs/recipe.md carries this output.
static void s_keys(FILE *out) {
    const rl_recipe_algos_t *algos = rl_algos();
    const char *section = "";
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, algos, NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        int i = section[0] != '\0';
        if (strcmp(k->section, section) != 0) {
            section = k->section;
            fprintf(out, "%s### `%s`\n\n| key | type | default | allowed | meaning |\n"
                         "|---|---|---|---|---|\n",
                    i ? "\n" : "", section);
        }
        int list = !strcmp(section, "rewards");
        char def[256]; // def_doc, or each algorithm's default: "0.0 (grpo), 0.1 (sft)"
        fprintf(out, "| `%s%s.%s` | %s | `%s` | ", section, list ? "[]" : "", k->key,
                rl_recipe_type_name(k->type), rl_recipe_key_default_doc(algos, k, def, sizeof def));
        if (k->choices || k->type == RL_RECIPE_T_ENUM) {
            s_choices(out, rl_recipe_key_choices(algos, k));
        } else if (k->type == RL_RECIPE_T_INT || k->type == RL_RECIPE_T_FLOAT ||
                   k->type == RL_RECIPE_T_FLOAT_LIST) {
            int gt = (k->flags & RL_RECIPE_K_MIN_EXCL) != 0;
            int lt = (k->flags & RL_RECIPE_K_MAX_EXCL) != 0;
            int no_max = k->max >= 1e300 || (k->type == RL_RECIPE_T_INT && k->max >= 2147483647.0);
            if (k->min <= -1e300 && no_max) {
                fprintf(out, "any");
            } else if (no_max) {
                fprintf(out, "%s %.10g", gt ? ">" : "≥", k->min);
            } else {
                fprintf(out, "%s%.10g, %.10g%s", gt ? "(" : "[", k->min, k->max, lt ? ")" : "]");
            }
        } else if (k->type == RL_RECIPE_T_PATH_DIR && k->needs) {
            fprintf(out, "folder with `%s`", k->needs);
        } else if (k->flags & RL_RECIPE_K_EXISTS) {
            fprintf(out, k->type == RL_RECIPE_T_PATH_LIST ? "existing files or folders, globs"
                         : k->flags & RL_RECIPE_K_FOLDER  ? "existing file or folder"
                                                          : "existing file");
        } else {
            fprintf(out, "—");
        }
        // the algorithms a key applies to, when not all: " *(grpo, ppo)*"
        char algo[96] = "";
        int all = 1;
        for (int a = 0; a < algos->n; a++) {
            all &= rl_recipe_key_for(k, algos->all[a]);
        }
        for (int a = 0; !all && a < algos->n; a++) {
            if (rl_recipe_key_for(k, algos->all[a])) {
                size_t l = strlen(algo);
                snprintf(algo + l, sizeof algo - l, "%s%s", l ? ", " : " *(", algos->all[a]->name);
            }
        }
        if (algo[0]) {
            snprintf(algo + strlen(algo), sizeof algo - strlen(algo), ")*");
        }
        fprintf(out, " | %s%s |\n", k->doc, algo);
    }
}

int rl_cmd_validate(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_help(stdout);
        return RL_EXIT_OK;
    }
    // this process computes nothing on a GPU: its device queries run in a child process, so that
    // it holds no CUDA context (docs/gpu.md)
    rl_device_isolate(1);
    const char *path = NULL;
    const char **ovr = calloc((size_t)argc + 1, sizeof *ovr);
    int n_ovr = 0;
    unsigned flags = 0;
    if (!ovr) {
        fprintf(stderr, "rlctl validate: out of memory\n");
        return RL_EXIT_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keys")) {
            s_keys(stdout);
            free(ovr);
            return RL_EXIT_OK;
        } else if (!strcmp(argv[i], "--no-file-checks")) {
            flags |= RL_RECIPE_NO_FILE_CHECKS;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "rlctl validate: unknown option '%s' (rlctl validate --help)\n",
                    argv[i]);
            free(ovr);
            return RL_EXIT_USAGE;
        } else if (!path) {
            path = argv[i];
        } else {
            ovr[n_ovr++] = argv[i];
        }
    }
    if (!path) {
        s_help(stderr);
        free(ovr);
        return RL_EXIT_USAGE;
    }
    size_t err_len = 1 << 16;
    char *err = malloc(err_len);
    rl_recipe_t *r = NULL;
    char *yaml = NULL;
    int code = RL_EXIT_OK;
    if (!err) {
        fprintf(stderr, "rlctl validate: out of memory\n");
        free(ovr);
        return RL_EXIT_FAIL;
    }
    int rc = rl_recipe_load_file(rl_algos(), path, ovr, n_ovr, flags, &r, err, err_len);
    if (rc == 0 && !(flags & RL_RECIPE_NO_FILE_CHECKS)) {
        rc = rl_cli_check_model(r, NULL, err, err_len);
    }
    // what the algorithm loads, as `rlctl run` checks it before it touches the run folder (the
    // same function, so the same messages): the datasets with the run's tokenizer and chat
    // template, eval answers, rewards (a command answers one request)
    if (rc == 0 && !(flags & RL_RECIPE_NO_FILE_CHECKS)) {
        const rl_algo_t *algo = rl_algo_find(r->algorithm.def->name);
        rc = algo ? rl_controller_preflight(algo, r, err, err_len)
                  : rl_errf(err, err_len, RL_EINVAL, "algorithm.name: this build has no such "
                            "algorithm");
    }
    if (rc == RL_EINVAL) {
        int lines = 1;
        for (const char *p = err; *p; p++) {
            lines += *p == '\n';
        }
        fprintf(stderr, "%s\nrlctl validate: %s: %d error%s\n", err, path, lines,
                lines == 1 ? "" : "s");
        code = RL_EXIT_USAGE;
    } else if (rc == ENOENT || rc == EACCES || rc == EISDIR) {
        fprintf(stderr, "rlctl validate: %s\n", err);
        code = RL_EXIT_USAGE;
    } else if (rc != 0) {
        fprintf(stderr, "rlctl validate: %s\n", err);
        code = RL_EXIT_FAIL;
    } else if (rl_recipe_to_yaml(r, &yaml) != 0) {
        fprintf(stderr, "rlctl validate: out of memory\n");
        code = RL_EXIT_FAIL;
    } else if (fputs(yaml, stdout) < 0 || fflush(stdout) != 0) {
        fprintf(stderr, "rlctl validate: cannot write the recipe: %s\n", strerror(errno));
        code = RL_EXIT_FAIL;
    }
    free(yaml);
    rl_recipe_destroy(&r);
    free(err);
    free(ovr);
    return code;
}

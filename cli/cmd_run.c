// rlctl run — run a recipe: checks it, opens the run folder under the rules of DESIGN.md §3
// (refuse a folder holding a run unless --resume or --force; a lock file), writes the resolved
// recipe.yaml, and starts the controller (run/rl_controller) with the workers the recipe's
// algorithm needs (algorithms/rl_algo_*).
#include "rl_cli.h"
#include "rl_algos.h"
#include "rl_config.h"
#include "rl_controller.h"
#include "rl_device.h"
#include "rl_err.h"
#include "rl_log.h"
#include "rl_rundir.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void s_help(FILE *out) {
    fprintf(out,
            "usage: rlctl run RECIPE.yaml [section.key=VALUE ...] [--resume [DIR] | --force]\n\n"
            "Trains as the recipe says and writes the run folder (run.dir, default\n"
            "runs/<run.name>): recipe.yaml, metrics.jsonl, a TensorBoard event file,\n"
            "checkpoints/step-<N>/ and final/ (an HF folder, or a PEFT adapter with LoRA).\n"
            "The run folder must be yours and writable by no one else, and every folder above\n"
            "it yours or root's (sticky if others may write, as /tmp); a new one gets mode\n"
            "0700, and no symbolic link inside it is followed. A run that stopped before it\n"
            "trained a step (no checkpoint) leaves nothing that blocks the retry: the next run\n"
            "starts over in its folder.\n\n"
            "options:\n"
            "  --resume [DIR]   continue the run in run.dir (or in DIR, a run folder or one of\n"
            "                   its checkpoints/step-<N>) from its newest complete checkpoint\n"
            "  --force          start over in a folder that holds a run (removes its recipe.yaml,\n"
            "                   metrics, event files, checkpoints/ and final/)\n"
            "  --stop-at N      stop after step N with a checkpoint, as if interrupted\n"
            "  --no-tensorboard do not write the event file\n"
            "  (SIGINT/SIGTERM: finish the step and write a checkpoint when that fits in\n"
            "   roles.stop_grace seconds, else stop now and keep the newest checkpoint; exit 1;\n"
            "   twice: stop now)\n"
            "  -h, --help       this help\n\n"
            "algorithms: sft (a controller with an actor worker, and samplers for the accuracy),\n"
            "grpo (a controller with actor, sampler and reward workers); the workers' logs go\n"
            "to <run>/logs/.\n"
            "exit status: 0 done, 2 invalid recipe, usage or a refused run folder, 1 other\n"
            "failure\n");
}

static volatile sig_atomic_t s_interrupt = 0;

// SIGINT / SIGTERM count into s_interrupt: the controller stops within roles.stop_grace of the
// first (the step and a checkpoint when they fit), at once on the second, cleaning up its
// workers both times; a third exits without cleaning up (the workers die with the controller:
// PR_SET_PDEATHSIG).
static void s_on_signal(int sig) {
    (void)sig;
    if (s_interrupt < 3) {
        s_interrupt++;
    }
    if (s_interrupt >= 3) {
        _exit(1);
    }
}

static void s_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static int s_is_file(const char *dir, const char *name) {
    char p[4200];
    int w = snprintf(p, sizeof(p), "%s/%s", dir, name);
    return w > 0 && (size_t)w < sizeof(p) && access(p, F_OK) == 0;
}

// Writes the resolved recipe as `name` in the run folder (never through a link). Returns 0
// or 1 (printed).
static int s_put_recipe(const rl_recipe_t *r, rl_rundir_t *rd, const char *name) {
    char *yaml = NULL, err[1024];
    if (rl_recipe_to_yaml(r, &yaml) != 0) {
        fprintf(stderr, "rlctl run: out of memory\n");
        return 1;
    }
    int rc = rl_rundir_write_file(rd, name, yaml, strlen(yaml), err, sizeof(err));
    if (rc) {
        fprintf(stderr, "rlctl run: %s\n", err);
    }
    free(yaml);
    return rc ? 1 : 0;
}

// Writes the resolved recipe as <run>/recipe.yaml; on resume keeps the original and warns when
// the recipe now differs from it. Returns 0 or 1 (printed).
static int s_write_recipe(const rl_recipe_t *r, rl_rundir_t *rd, int resume) {
    char *yaml = NULL, *old = NULL, err[1024];
    size_t n = 0;
    int rc = ENOENT;
    if (resume) {
        rc = rl_rundir_read_file(rd, "recipe.yaml", &old, &n, err, sizeof(err));
    }
    if (rc == ENOENT) {
        return s_put_recipe(r, rd, "recipe.yaml");
    }
    if (rc) {
        fprintf(stderr, "rlctl run: %s\n", err);
        return 1;
    }
    if (rl_recipe_to_yaml(r, &yaml) != 0) {
        fprintf(stderr, "rlctl run: out of memory\n");
        free(old);
        return 1;
    }
    if (n != strlen(yaml) || memcmp(old, yaml, n) != 0) {
        rl_log_warn("%s/recipe.yaml differs from the recipe given now; the run continues with "
                    "the one given now (a changed recipe may not resume exactly)",
                    rl_rundir_path(rd));
    }
    free(old);
    free(yaml);
    return 0;
}

// GRPO: <run>/logs/ (mode 0700, checked as the run folder) and logs/recipe.yaml, the recipe
// given now, which the workers load. Returns 0 or 1 (printed).
// The workers' log folder, made and checked by the run folder's rules.
static int s_make_logs(rl_rundir_t *rd) {
    char err[1024];
    if (rl_rundir_mkdir(rd, "logs", err, sizeof(err)) != 0) {
        fprintf(stderr, "rlctl run: %s\n", err);
        return 1;
    }
    return 0;
}

int rl_cmd_run(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_help(stdout);
        return RL_EXIT_OK;
    }
    // this process computes nothing on a GPU: its device queries run in a child process, so that
    // it holds no CUDA context (docs/gpu.md)
    rl_device_isolate(1);
    const char *recipe_path = NULL, *resume_dir = NULL;
    int resume = 0, force = 0, tensorboard = 1;
    long long stop_at = 0;
    const char **overrides = calloc((size_t)argc + 1, sizeof(char *));
    int n_over = 0, code = RL_EXIT_USAGE;
    rl_recipe_t *r = NULL;
    rl_rundir_t *rd = NULL;
    rl_cli_plan_t *plan = NULL; // the devices' memory plan, with a role on a GPU
    if (!overrides) {
        fprintf(stderr, "rlctl run: out of memory\n");
        return RL_EXIT_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--resume") == 0) {
            resume = 1;
            // an optional DIR: the next argument when it is neither a flag nor an override
            if (i + 1 < argc && argv[i + 1][0] != '-' && !strchr(argv[i + 1], '=') &&
                recipe_path) {
                resume_dir = argv[++i];
            }
        } else if (strncmp(a, "--resume=", 9) == 0) {
            resume = 1;
            resume_dir = a + 9;
        } else if (strcmp(a, "--force") == 0) {
            force = 1;
        } else if (strcmp(a, "--no-tensorboard") == 0) {
            tensorboard = 0;
        } else if (strcmp(a, "--stop-at") == 0 && i + 1 < argc) {
            char *end;
            stop_at = strtoll(argv[++i], &end, 10);
            if (*end || stop_at < 1) {
                fprintf(stderr, "rlctl run: --stop-at wants a step >= 1, not '%s'\n", argv[i]);
                goto done;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "rlctl run: unknown option '%s' (rlctl run --help)\n", a);
            goto done;
        } else if (!recipe_path) {
            recipe_path = a;
        } else if (strchr(a, '=')) {
            overrides[n_over++] = a;
        } else {
            fprintf(stderr, "rlctl run: '%s' is neither an override (key=value) nor an option\n",
                    a);
            goto done;
        }
    }
    if (!recipe_path) {
        s_help(stderr);
        goto done;
    }
    if (resume && force) {
        fprintf(stderr, "rlctl run: --resume and --force exclude each other\n");
        goto done;
    }
    static char err[16384];
    int rc =
        rl_recipe_load_file(rl_algos(), recipe_path, overrides, n_over, 0, &r, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "%s%s", err, err[0] && err[strlen(err) - 1] == '\n' ? "" : "\n");
        code = rc == RL_EINVAL ? RL_EXIT_USAGE : RL_EXIT_FAIL;
        goto done;
    }
    // the model folder and its tokenizer (ids below vocab_size), then what the algorithm checks
    // before anything is written (GRPO: its prompts, eval answers and reward plugins)
    const rl_algo_t *algo = rl_algo_find(r->algorithm.def->name);
    if (!algo) { // the schema lists only algorithms that exist: a build without one
        fprintf(stderr, "rlctl run: algorithm.name: this build has no such algorithm\n");
        code = RL_EXIT_USAGE;
        goto done;
    }
    if ((rc = rl_cli_check_model(r, &plan, err, sizeof(err))) != 0 ||
        (rc = rl_controller_preflight(algo, r, err, sizeof(err))) != 0) {
        fprintf(stderr, "%s%s", err, err[0] && err[strlen(err) - 1] == '\n' ? "" : "\n");
        code = rc == RL_EINVAL || rc == RL_EUNSUPPORTED ? RL_EXIT_USAGE : RL_EXIT_FAIL;
        goto done;
    }
    rl_cli_plan_log(plan); // where the roles holding the model run (on a GPU), and their memory
    free(plan);
    plan = NULL;

    // the run folder: run.dir, or the folder --resume names (a run, or one of its checkpoints)
    char run_dir[4200], ckpt[4200] = "";
    snprintf(run_dir, sizeof(run_dir), "%s", r->run.dir);
    if (resume_dir) {
        if (s_is_file(resume_dir, "state.json")) {
            snprintf(ckpt, sizeof(ckpt), "%s", resume_dir);
            // <run>/checkpoints/step-<N>[/] -> <run>
            snprintf(run_dir, sizeof(run_dir), "%s", resume_dir);
            for (int up = 0; up < 2; up++) {
                size_t n = strlen(run_dir);
                while (n > 1 && run_dir[n - 1] == '/') {
                    run_dir[--n] = '\0';
                }
                char *slash = strrchr(run_dir, '/');
                if (slash && slash != run_dir) {
                    *slash = '\0';
                } else {
                    snprintf(run_dir, sizeof(run_dir), "%s/../..", resume_dir);
                    break;
                }
            }
        } else {
            snprintf(run_dir, sizeof(run_dir), "%s", resume_dir);
        }
        if (access(run_dir, F_OK) != 0) {
            fprintf(stderr, "rlctl run: --resume %s: no such folder\n", resume_dir);
            goto done;
        }
    }
    rl_rundir_mode_t mode = resume ? RL_RUNDIR_RESUME : force ? RL_RUNDIR_FORCE : RL_RUNDIR_NEW;
    rd = rl_rundir_open(run_dir, mode, &rc, err, sizeof(err));
    if (!rd) {
        fprintf(stderr, "rlctl run: %s\n", err);
        code = rc == RL_EINVAL ? RL_EXIT_USAGE : RL_EXIT_FAIL;
        goto done;
    }
    // from here on the folder's real path, the one whose folders rl_rundir_open checked
    int w = snprintf(run_dir, sizeof(run_dir), "%s", rl_rundir_path(rd));
    if (w < 0 || (size_t)w >= sizeof(run_dir)) {
        fprintf(stderr, "rlctl run: %s: path too long\n", rl_rundir_path(rd));
        code = RL_EXIT_FAIL;
        goto done;
    }
    // a new run's folder is marked until it trains a step: a start that fails leaves nothing
    // that blocks the retry (rl_rundir.h)
    if (!resume && rl_rundir_mark_unstarted(rd, err, sizeof(err)) != 0) {
        fprintf(stderr, "rlctl run: %s\n", err);
        code = RL_EXIT_FAIL;
        goto done;
    }
    if (s_write_recipe(r, rd, resume)) {
        code = RL_EXIT_FAIL;
        goto done;
    }
    rl_log_info("run folder: %s", run_dir);
    if (rl_recipe_note(r)[0]) { // defaults taken from the model folder
        rl_log_info("%s", rl_recipe_note(r));
    }
    // the workers get the recipe given now over the protocol (recipe.yaml keeps the run's first)
    if (s_make_logs(rd)) {
        code = RL_EXIT_FAIL;
        goto done;
    }
    rl_controller_opts_t co = {run_dir, resume, ckpt[0] ? ckpt : NULL, stop_at, tensorboard,
                               &s_interrupt};
    s_catch_signals();
    rc = rl_controller_run(algo, r, &co, err, sizeof(err));
    if (rc) {
        fprintf(stderr, "rlctl run: %s\n", err);
        code = RL_EXIT_FAIL;
        goto done;
    }
    code = RL_EXIT_OK;
done:
    free(plan);
    rl_rundir_destroy(&rd);
    rl_recipe_destroy(&r);
    free(overrides);
    return code;
}

// rl_cli — helpers shared by the rlctl subcommands: --help detection and option-value parsing
// with one message format.
#include "rl_cli.h"

#include "rl_policy.h"
#include "rl_config.h"
#include "rl_safetensors.h"
#include "rl_hf.h"

#include "rl_chat.h"
#include "rl_err.h"
#include "rl_reward_math.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rl_cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            return 1;
        }
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
    }
    return 0;
}

int rl_cli_int(const char *cmd, const char *flag, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "rlctl %s: %s '%s': expected an integer in [%ld, %ld]\n", cmd, flag, v,
                lo, hi);
        return RL_EXIT_USAGE;
    }
    *out = (int)x;
    return 0;
}

int rl_cli_float(const char *cmd, const char *flag, const char *v, double lo, double hi,
                 float *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= lo && x <= hi)) {
        fprintf(stderr, "rlctl %s: %s '%s': expected a number in [%g, %g]\n", cmd, flag, v, lo,
                hi);
        return RL_EXIT_USAGE;
    }
    *out = (float)x;
    return 0;
}

int rl_cli_u64(const char *cmd, const char *flag, const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') {
        fprintf(stderr, "rlctl %s: %s '%s': expected an unsigned integer\n", cmd, flag, v);
        return RL_EXIT_USAGE;
    }
    *out = (uint64_t)x;
    return 0;
}

int rl_cli_device(const char *cmd, const char *text, const char *not_yet, rl_device_t *out) {
    memset(out, 0, sizeof *out);
    if (!text) {
        return 0;
    }
    char err[2048];
    if (rl_device_open(text, out, err, sizeof err) != 0) {
        fprintf(stderr, "rlctl %s: --device %s: %s\n", cmd, text, err);
        return RL_EXIT_USAGE;
    }
    if (out->cuda && not_yet) {
        fprintf(stderr, "rlctl %s: --device %s: %s: use --device cpu\n", cmd, text, not_yet);
        return RL_EXIT_USAGE;
    }
    return 0;
}

int rl_cli_load_model(const char *cmd, const char *model_dir, const char *adapter, int threads,
                      rl_model_t **model_p, rl_tokenizer_t **tok_p) {
    return rl_cli_load_model_on(cmd, model_dir, adapter, threads, NULL, 0, model_p, tok_p);
}

int rl_cli_load_model_on(const char *cmd, const char *model_dir, const char *adapter, int threads,
                         const rl_device_t *device, int rows, rl_model_t **model_p,
                         rl_tokenizer_t **tok_p) {
    char err[1024];
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    mo.threads = threads;
    if (device) {
        mo.device = *device;
        mo.device_rows = rows;
    }
    rl_model_t *model = rl_model_load(model_dir, &mo, err, sizeof err);
    rl_tokenizer_t *tok = model ? rl_tokenizer_new_dir(model_dir, err, sizeof err) : NULL;
    if (!model || !tok) {
        fprintf(stderr, "rlctl %s: %s\n", cmd, err);
    } else if (adapter && rl_model_load_adapter(model, adapter, err, sizeof err) != 0) {
        fprintf(stderr, "rlctl %s: adapter %s: %s\n", cmd, adapter, err);
        rl_tokenizer_destroy(&tok);
    } else if (rl_model_on_gpu(model) && rl_model_drop_host_weights(model) != 0) {
        // on a GPU the model computes there only: its host copy given back
        fprintf(stderr, "rlctl %s: %s\n", cmd, rl_model_errmsg(model));
        rl_tokenizer_destroy(&tok);
    }
    if (!tok) {
        rl_model_destroy(&model);
        return RL_EXIT_USAGE;
    }
    *model_p = model;
    *tok_p = tok;
    return 0;
}

int rl_cli_encode(const char *cmd, rl_tokenizer_t *tok, const char *what, const char *model_dir,
                  const char *in, int chat, int32_t **ids_p, size_t *n_p) {
    char err[4608];
    char *text = NULL;
    size_t len = strlen(in);
    if (chat) {
        rl_chat_format_t fmt;
        if (rl_chat_model_format(model_dir, NULL, NULL, &fmt, err, sizeof err)) {
            fprintf(stderr, "rlctl %s: %s; or drop --chat\n", cmd, err);
            return RL_EXIT_USAGE;
        }
        rl_chat_msg_t msg = {"user", in};
        if (rl_chat_render(fmt, &msg, 1, 1, &text, &len, err, sizeof err)) {
            fprintf(stderr, "rlctl %s: %s\n", cmd, err);
            return RL_EXIT_FAIL;
        }
    }
    int rc = rl_tokenizer_encode(tok, text ? text : in, len, 0, ids_p, n_p);
    free(text);
    if (rc) {
        fprintf(stderr, "rlctl %s: %s: %s\n", cmd, what, rl_tokenizer_errmsg(tok));
        return rc == RL_ENOMEM ? RL_EXIT_FAIL : RL_EXIT_USAGE;
    }
    return 0;
}

double rl_cli_math_score(void *ctx, const char *text, size_t len, const char *answer,
                         int *formatted) {
    (void)ctx;
    rl_math_answer_t a;
    rl_math_extract(text, len, &a);
    *formatted = a.formatted;
    return rl_math_correct(text, len, answer);
}

// The recipe loader only checks that model.path holds a config.json; here the folder is read
// as `run` will read it: config.json (and generation_config.json) parse, the weights match the
// tensors the config implies (a reward model's, algorithm rm, may also be a sequence
// classifier's: score.weight, no lm_head), and the tokenizer loads and fits in the model's
// vocabulary. A problem is reported at the recipe line that named the folder or the tokenizer.
int rl_cli_check_model(const rl_recipe_t *r, rl_cli_plan_t **plan_out, char *err, size_t err_len) {
    if (plan_out) {
        *plan_out = NULL;
    }
    char msg[2048];
    rl_hf_config_t cfg;
    rl_st_model_t *weights = NULL;
    rl_tokenizer_t *tok = NULL;
    // the device first: a GPU that is not there is refused before anything is read
    rl_device_t dev;
    const char *dn = r->model.device ? r->model.device : "cpu";
    if (rl_device_open(dn, &dev, msg, sizeof msg) != 0) {
        return rl_recipe_errorf(r, "model.device", err, err_len, RL_EINVAL, "%s", msg);
    }
    // roles.devices: roles that hold the model, devices that are there
    const char *where =
        r->roles.devices && strcmp(r->roles.devices, "{}") != 0 ? "roles.devices" : "model.device";
    int rc = rl_policy_check_devices(r, msg, sizeof msg);
    if (rc) {
        return rl_recipe_errorf(r, "roles.devices", err, err_len, RL_EINVAL, "%s", msg);
    }
    // every process's device is there: each sampler's, each rank's of a mesh
    static const char *const roles[] = {"actor", "critic", "reference", "samplers"};
    const int ranks = r->mesh.dp * r->mesh.fsdp;
    int any_gpu = dev.cuda;
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < (i == 3 ? (r->roles.samplers > 0 ? r->roles.samplers : 1) : ranks);
             k++) {
            rl_device_t d;
            if (rl_policy_role_device(r, roles[i], k, &d, msg, sizeof msg) != 0 ||
                (d.cuda && rl_device_check(&d, 0, NULL, msg, sizeof msg) != 0)) {
                return rl_recipe_errorf(r, "roles.devices", err, err_len, RL_EINVAL, "%s: %s",
                                        roles[i], msg);
            }
            any_gpu |= d.cuda;
        }
    }
    const char *key = where;
    if (rl_policy_check_mesh_devices(r, &key, msg, sizeof msg) != 0) {
        return rl_recipe_errorf(r, key, err, err_len, RL_EINVAL, "%s", msg);
    }
    // roles.weight_sync: ipc: every sampler can copy the actor's weights from its GPU
    if (r->roles.weight_sync == RL_RECIPE_SYNC_IPC && r->roles.remote_samplers.n > 0) {
        return rl_recipe_errorf(r, "roles.weight_sync", err, err_len, RL_EINVAL,
                                "ipc: remote samplers (roles.remote_samplers) take the weights "
                                "through host memory (auto sends them so)");
    }
    for (int k = 0; r->roles.weight_sync == RL_RECIPE_SYNC_IPC && k < r->roles.samplers; k++) {
        if (!rl_policy_sync_ipc(r, k, msg, sizeof msg)) {
            return rl_recipe_errorf(r, "roles.weight_sync", err, err_len, RL_EINVAL,
                                    "ipc: %s (auto sends such a sampler the weights through host "
                                    "memory)",
                                    msg);
        }
    }
    rc = rl_hf_config_load(r->model.path, &cfg, msg, sizeof msg);
    if (rc != 0) {
        return rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    if (any_gpu) { // the roles' memory on their devices, before anything starts (rlctl plan)
        rl_cli_plan_t *p = malloc(sizeof *p);
        if (!p) {
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        rc = rl_cli_plan(r, p, err, err_len);
        for (int d = 0; !rc && !p->fits && d < p->n_devs; d++) {
            const rl_cli_plan_dev_t *v = &p->devs[d];
            char name[32];
            if (v->known && v->total > v->mem_free) {
                rc = rl_recipe_errorf(r, where, err, err_len, RL_EINVAL,
                                      "%s (%s) has %.1f MiB free and the run's roles there need "
                                      "%.1f MiB (rlctl plan shows each role's share; the largest "
                                      "train.micro_batch_size that fits: %d)",
                                      rl_device_name(&v->device, name, sizeof name), v->name,
                                      (double)v->mem_free / (1 << 20), (double)v->total / (1 << 20),
                                      p->largest_mb);
            }
        }
        if (rc || !plan_out) {
            free(p);
        } else {
            *plan_out = p;
        }
        if (rc) {
            return rc;
        }
    }
    weights = rl_st_model_open(r->model.path, msg, sizeof msg);
    if (!weights) {
        return rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    int seq_cls = (r->algorithm.def->uses & RL_RECIPE_USES_SCORE_HEAD) != 0;
    rc = rl_hf_check_weights_ex(&cfg, weights, seq_cls, msg, sizeof msg);
    rl_st_model_destroy(&weights);
    if (rc != 0) {
        return rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    tok = rl_tokenizer_new(r->model.tokenizer, msg, sizeof msg);
    if (!tok) {
        return rl_recipe_errorf(r, "model.tokenizer", err, err_len, RL_EINVAL, "%s", msg);
    }
    // model.tokenizer may live outside model.path: new_dir's own check does not cover it
    char config[4200];
    snprintf(config, sizeof config, "%s/config.json", r->model.path);
    rc = rl_tokenizer_check_vocab(tok, cfg.vocab_size, r->model.tokenizer, config, msg,
                                  sizeof msg);
    rl_tokenizer_destroy(&tok);
    if (rc != 0) {
        return rl_recipe_errorf(r, "model.tokenizer", err, err_len, RL_EINVAL, "%s", msg);
    }
    return 0;
}

// rlctl plan — the device memory a recipe's run needs, role by role, before it starts (issue
// 31): each process that holds the model on model.device, its model's parts (rl_model_device_plan:
// the sizes rl_model_load then allocates), a sampler's KV cache, the sum beside what the device
// has, and the largest micro-batch that fits. rl_cli_plan is also what `validate` and `run`
// check before anything starts (rl_cli_check_model).
#include "rl_cli.h"

#include "rl_algo.h"
#include "rl_algos.h"
#include "rl_config.h"
#include "rl_device.h"
#include "rl_err.h"
#include "rl_hf.h"
#include "rl_log.h"
#include "rl_model.h"
#include "rl_policy.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_help(FILE *out) {
    fprintf(out,
            "usage: rlctl plan RECIPE.yaml [section.key=VALUE ...] [--json]\n\n"
            "The device memory the recipe's run needs on model.device, role by role: each\n"
            "process's model (frozen weights, trainable parameters, gradients, AdamW moments,\n"
            "activations at train.micro_batch_size, and with train.recompute flipped), a\n"
            "sampler's KV cache; their sum beside the device's memory, and the largest\n"
            "micro-batch that fits. On the CPU (model.device: cpu) there is nothing to plan.\n"
            "Needs the CUDA module, not a GPU: without one the device's memory is unknown.\n\n"
            "options:\n"
            "  --json       one JSON object\n"
            "  -h, --help   this help\n\n"
            "exit status: 0 it fits (or no device to compare with), 1 it does not, 2 usage or an\n"
            "invalid recipe\n"
            "docs: docs/gpu.md#the-plan-rlctl-plan\n");
}

static int s_add(rl_cli_plan_t *p, const char *role, rl_device_t dev, int procs,
                 const rl_hf_config_t *cfg, const rl_model_opts_t *mo, int has_head, int rows,
                 int kv_slots, int kv_len, char *err, size_t err_len) {
    if (!dev.cuda || procs < 1) {
        return 0; // on the CPU: nothing on a device
    }
    if (p->n == RL_CLI_PLAN_MAX) {
        return rl_errf(err, err_len, RL_EINVAL, "too many roles to plan");
    }
    rl_cli_plan_role_t *e = &p->roles[p->n];
    memset(e, 0, sizeof *e);
    snprintf(e->role, sizeof e->role, "%s", role);
    e->device = dev;
    e->procs = procs;
    e->rows = rows > 0 ? rows : 4096;
    int rc = rl_model_device_plan(cfg, mo, has_head, rows, &e->model, err, err_len);
    if (rc) {
        return rc;
    }
    rl_model_opts_t flip = *mo;
    flip.recompute = !mo->recompute;
    rl_model_device_plan_t other;
    if ((rc = rl_model_device_plan(cfg, &flip, has_head, rows, &other, err, err_len)) != 0) {
        return rc;
    }
    e->acts_flipped = other.acts;
    e->kv = kv_slots ? rl_model_device_kvcache_bytes(cfg, kv_slots, kv_len, e->rows, 1) : 0;
    e->total = e->model.weights + e->model.trainable + e->model.grads + e->model.optim +
               e->model.acts + e->kv;
    p->n++;
    p->total += (size_t)procs * e->total;
    int d = 0;
    while (d < p->n_devs && p->devs[d].device.index != dev.index) {
        d++;
    }
    if (d == p->n_devs) {
        memset(&p->devs[d], 0, sizeof p->devs[d]);
        p->devs[d].device = dev;
        p->n_devs++;
    }
    p->devs[d].total += (size_t)procs * e->total;
    return 0;
}

// A role's n processes (a mesh's ranks, or samplers: process i on rl_policy_role_device(dev_role,
// i)), one entry per device they are on, named `role`.
static int s_add_procs(const rl_recipe_t *r, rl_cli_plan_t *p, const char *role,
                       const char *dev_role, int n, const rl_hf_config_t *cfg,
                       const rl_model_opts_t *mo, int has_head, int rows, int kv_slots, int kv_len,
                       char *err, size_t err_len) {
    int done[256] = {0}, rc = 0;
    for (int i = 0; !rc && i < n && i < 256; i++) {
        rl_device_t di, dj;
        if (done[i] || (rc = rl_policy_role_device(r, dev_role, i, &di, err, err_len)) != 0) {
            continue;
        }
        int k = 0;
        for (int j = i; !rc && j < n && j < 256; j++) {
            rc = rl_policy_role_device(r, dev_role, j, &dj, err, err_len);
            if (!rc && dj.cuda == di.cuda && dj.index == di.index) {
                done[j] = 1;
                k++;
            }
        }
        rc = rc ? rc
                : s_add(p, role, di, k, cfg, mo, has_head, rows, kv_slots, kv_len, err, err_len);
    }
    return rc;
}

// The roles (and, with mb > 0, that micro-batch instead of the recipe's) into p.
static int s_roles(const rl_recipe_t *r, const rl_hf_config_t *cfg, int mb, rl_cli_plan_t *p,
                   char *err, size_t err_len) {
    const rl_algo_t *algo = rl_algo_find(r->algorithm.def->name);
    if (!algo) {
        return rl_errf(err, err_len, RL_EINVAL, "algorithm.name: this build has no such algorithm");
    }
    rl_algo_roles_t ro = {0};
    algo->roles(r, &ro);
    const unsigned uses = r->algorithm.def->uses;
    p->n = p->n_devs = 0;
    p->total = 0;
    p->seq_len = rl_policy_seq_len(r);
    p->micro_batch = mb > 0 ? mb : r->train.micro_batch_size;
    const int rows = p->micro_batch * p->seq_len;
    rl_model_opts_t actor;
    rl_policy_model_opts(r, 1, &actor);
    // a mesh: each rank of the actor (and of a critic or reference on its ranks or a mesh of
    // their own) holds the whole model on its device
    const int ranks = r->mesh.dp * r->mesh.fsdp;
    const int rm = (uses & RL_RECIPE_USES_SCORE_HEAD) != 0;
    // AdamW's moments on the device only where the optimizer steps there (rl_policy's dev_optim):
    // 1×1, or a mesh with NCCL (its moments split over the ranks; planned as if NCCL loads)
    const int nccl = rl_policy_wants_nccl(r);
    actor.device_host_optim = (ranks > 1 && !nccl) || rm || r->train.optimizer_offload;
    actor.device_comm_ranks = nccl ? ranks : 0;
    // with NCCL and fsdp > 1 the frozen layers are sharded over each row (ZeRO-3): the actor's
    // base under LoRA, full tuning's reference
    const int zero3 = nccl && r->mesh.fsdp > 1 ? r->mesh.fsdp : 0;
    actor.device_shard_ranks = actor.tune == RL_TUNE_LORA ? zero3 : 0;
    actor.device_shard_masters = zero3 && actor.tune == RL_TUNE_FULL; // over all ranks
    int rc = s_add_procs(r, p, rm ? "actor (reward model)" : "actor", "actor", ranks, cfg, &actor,
                         !rm, rows, 0, 0, err, err_len);
    // full tuning's reference in the actor: a frozen copy beside it, on the actor's device
    const int ref_needed = r->algorithm.beta > 0 || (uses & RL_RECIPE_USES_REF_SUMS);
    if (!rc && ref_needed && !r->lora.enabled && r->roles.reference == RL_RECIPE_REF_ACTOR) {
        rl_model_opts_t ref = actor;
        ref.device_comm_ranks = 0;
        ref.device_shard_ranks = zero3;
        ref.tune = RL_TUNE_NONE;
        rc = s_add_procs(r, p, "reference (in the actor)", "actor", ranks, cfg, &ref, 1, rows, 0, 0,
                         err, err_len);
    }
    if (!rc && ro.reference) {
        rl_model_opts_t ref = actor;
        ref.device_comm_ranks = 0;
        ref.device_shard_ranks = 0;
        ref.tune = RL_TUNE_NONE;
        ref.device_infer = 1;
        rc = s_add_procs(r, p, "reference", "reference",
                         r->roles.reference == RL_RECIPE_REF_MESH ? ranks : 1, cfg, &ref, 1, rows,
                         0, 0, err, err_len);
    }
    if (!rc && ro.critic) {
        rl_model_opts_t cr = actor;
        cr.tune = r->critic.lora ? RL_TUNE_LORA : RL_TUNE_FULL;
        cr.device_host_optim = 1; // its value head's optimizer is the host's
        cr.device_comm_ranks = 0;
        cr.device_shard_ranks = 0;
        rc = s_add_procs(r, p,
                         ro.critic == RL_ALGO_CRITIC_ACTOR ? "critic (in the actor)" : "critic",
                         "critic", r->roles.critic == RL_RECIPE_REF_WORKER ? 1 : ranks, cfg, &cr, 0,
                         rows, 0, 0, err, err_len);
    }
    // the samplers, by device: the actor's trainable layout, no gradients, activations for their
    // steps (the default 4096 rows), a KV cache of sampling.max_batch slots
    rl_model_opts_t sm = actor;
    sm.device_comm_ranks = 0;
    sm.device_shard_ranks = 0;
    sm.lora_dropout = 0.0f;
    sm.device_infer = 1;
    const int plen = uses & RL_RECIPE_USES_SAMPLES ? r->data.max_prompt_length : r->data.max_length;
    return rc ? rc
              : s_add_procs(r, p, "sampler", "samplers", ro.samplers, cfg, &sm, 1, 0,
                            r->sampling.max_batch, plen + r->sampling.max_new_tokens - 1, err,
                            err_len);
}

// Every device fits (those not found count as fitting: nothing to compare with).
static int s_fits(const rl_cli_plan_t *p, const rl_cli_plan_t *q) {
    for (int d = 0; d < q->n_devs; d++) {
        for (int e = 0; e < p->n_devs; e++) {
            if (p->devs[e].device.index == q->devs[d].device.index && p->devs[e].known &&
                q->devs[d].total > p->devs[e].mem_free) {
                return 0;
            }
        }
    }
    return 1;
}

int rl_cli_plan(const rl_recipe_t *r, rl_cli_plan_t *p, char *err, size_t err_len) {
    memset(p, 0, sizeof *p);
    char msg[1024];
    int rc = rl_policy_check_devices(r, msg, sizeof msg);
    if (rc) {
        return rl_recipe_errorf(r, "roles.devices", err, err_len, RL_EINVAL, "%s", msg);
    }
    rl_hf_config_t cfg;
    if (rl_hf_config_load(r->model.path, &cfg, msg, sizeof msg) != 0) {
        return rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    if ((rc = s_roles(r, &cfg, 0, p, err, err_len)) != 0 || p->n == 0) {
        return rc; // p->n 0: every role on the CPU
    }
    int all = 1;
    for (int d = 0; d < p->n_devs; d++) {
        rl_cli_plan_dev_t *v = &p->devs[d];
        rl_device_info_t info;
        v->known = rl_device_check(&v->device, 0, &info, msg, sizeof msg) == 0;
        if (!v->known) {
            snprintf(v->why, sizeof v->why, "%s", msg);
            all = 0;
            continue;
        }
        snprintf(v->name, sizeof v->name, "%s", info.name);
        v->mem_total = info.mem_total;
        v->mem_free = info.mem_free;
    }
    p->fits = s_fits(p, p);
    if (!all) {
        return 0;
    }
    // the largest micro-batch that fits (the totals grow with it: the activations) among those
    // the recipe allows: the divisors of a step's sequences (pairs: even), from the largest down
    rl_cli_plan_t *q = malloc(sizeof *q);
    if (!q) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    const int n_seq = r->train.step_sequences;
    const int pairs = (r->algorithm.def->uses & RL_RECIPE_USES_PAIRS) != 0;
    int lo = 0;
    for (int mb = n_seq; mb >= 1 && !lo && !rc; mb--) {
        if (n_seq % mb != 0 || (pairs && mb % 2 != 0)) {
            continue;
        }
        rc = s_roles(r, &cfg, mb, q, err, err_len);
        lo = !rc && s_fits(p, q) ? mb : 0;
    }
    free(q);
    p->largest_mb = lo;
    return rc;
}

static double s_mib(size_t b) {
    return (double)b / (1 << 20);
}

void rl_cli_plan_log(const rl_cli_plan_t *p) {
    for (int i = 0; p && i < p->n; i++) {
        const rl_cli_plan_role_t *e = &p->roles[i];
        char dn[32];
        const char *name = "";
        for (int d = 0; d < p->n_devs; d++) {
            name = p->devs[d].device.index == e->device.index ? p->devs[d].name : name;
        }
        rl_log_info("placement: %d %s%s on %s (%s): %.1f MiB planned%s", e->procs, e->role,
                    e->procs > 1 ? "s" : "", rl_device_name(&e->device, dn, sizeof dn), name,
                    s_mib(e->total), e->procs > 1 ? " each" : "");
    }
}

static void s_print(const rl_recipe_t *r, const rl_cli_plan_t *p, const char *path) {
    printf("plan: %s, %s\n", path, r->algorithm.def->name);
    for (int d = 0; d < p->n_devs; d++) {
        const rl_cli_plan_dev_t *v = &p->devs[d];
        char dn[32];
        rl_device_name(&v->device, dn, sizeof dn);
        if (v->known) {
            printf("%s: %s, %.1f GiB, %.1f GiB free\n", dn, v->name,
                   (double)v->mem_total / (1 << 30), (double)v->mem_free / (1 << 30));
        } else {
            printf("%s: not here (%s)\n", dn, v->why);
        }
    }
    printf("sequences of up to %d tokens; micro-batch %d rows (train.micro_batch_size): %d "
           "tokens per forward\n",
           p->seq_len, p->micro_batch, p->micro_batch * p->seq_len);
    printf("MiB per process  %-24s %-7s %5s %8s %9s %8s %8s %11s %11s %8s %9s\n", "role", "device",
           "procs", "weights", "trainable", "grads", "optim", "activations",
           r->train.recompute ? "(no recomp)" : "(recompute)", "KV cache", "total");
    for (int i = 0; i < p->n; i++) {
        const rl_cli_plan_role_t *e = &p->roles[i];
        char dn[32];
        rl_device_name(&e->device, dn, sizeof dn);
        printf("                 %-24s %-7s %5d %8.1f %9.1f %8.1f %8.1f %11.1f %11.1f %8.1f "
               "%9.1f\n",
               e->role, dn, e->procs, s_mib(e->model.weights), s_mib(e->model.trainable),
               s_mib(e->model.grads), s_mib(e->model.optim), s_mib(e->model.acts),
               s_mib(e->acts_flipped), s_mib(e->kv), s_mib(e->total));
    }
    for (int d = 0; d < p->n_devs; d++) {
        const rl_cli_plan_dev_t *v = &p->devs[d];
        char dn[32];
        rl_device_name(&v->device, dn, sizeof dn);
        printf("%s in all: %.1f MiB", dn, s_mib(v->total));
        if (v->known) {
            printf(" of %.1f MiB free: %s", s_mib(v->mem_free),
                   v->total <= v->mem_free ? "fits" : "DOES NOT FIT");
        }
        printf("\n");
    }
    if (p->largest_mb > 0 || p->fits) {
        printf("largest micro-batch that fits: %d rows (of those dividing a step's %d "
               "sequences)\n",
               p->largest_mb, r->train.step_sequences);
    }
    printf("not counted: each process's CUDA context (a few hundred MiB), the allocator's "
           "rounding\n");
}

static json_t *s_json(const rl_recipe_t *r, const rl_cli_plan_t *p) {
    json_t *roles = json_array(), *devs = json_array();
    char dn[32];
    for (int i = 0; i < p->n; i++) {
        const rl_cli_plan_role_t *e = &p->roles[i];
        rl_device_name(&e->device, dn, sizeof dn);
        json_t *o = json_pack(
            "{s:s,s:s,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "role", e->role, "device", dn,
            "processes", e->procs, "rows", e->rows, "weights", (json_int_t)e->model.weights,
            "trainable", (json_int_t)e->model.trainable, "grads", (json_int_t)e->model.grads,
            "optim", (json_int_t)e->model.optim, "activations", (json_int_t)e->model.acts,
            "kv_cache", (json_int_t)e->kv, "total", (json_int_t)e->total);
        json_object_set_new(
            o, r->train.recompute ? "activations_without_recompute" : "activations_with_recompute",
            json_integer((json_int_t)e->acts_flipped));
        json_array_append_new(roles, o);
    }
    for (int d = 0; d < p->n_devs; d++) {
        const rl_cli_plan_dev_t *v = &p->devs[d];
        rl_device_name(&v->device, dn, sizeof dn);
        json_t *o = json_pack("{s:s,s:I,s:b}", "device", dn, "total", (json_int_t)v->total, "known",
                              v->known);
        if (v->known) {
            json_object_set_new(o, "name", json_string(v->name));
            json_object_set_new(o, "mem_total", json_integer((json_int_t)v->mem_total));
            json_object_set_new(o, "mem_free", json_integer((json_int_t)v->mem_free));
        } else {
            json_object_set_new(o, "why", json_string(v->why));
        }
        json_array_append_new(devs, o);
    }
    return json_pack("{s:s,s:i,s:i,s:o,s:o,s:I,s:b,s:i}", "algorithm", r->algorithm.def->name,
                     "seq_len", p->seq_len, "micro_batch", p->micro_batch, "roles", roles,
                     "devices", devs, "total", (json_int_t)p->total, "fits", p->fits,
                     "largest_micro_batch", p->largest_mb);
}

int rl_cmd_plan(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        s_help(stdout);
        return RL_EXIT_OK;
    }
    // this process computes nothing on a GPU: its device queries run in a child process, so that
    // it holds no CUDA context (docs/gpu.md)
    rl_device_isolate(1);
    const char *path = NULL;
    const char **ovr = calloc((size_t)argc + 1, sizeof *ovr);
    int n_ovr = 0, json = 0;
    if (!ovr) {
        fprintf(stderr, "rlctl plan: out of memory\n");
        return RL_EXIT_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "rlctl plan: unknown option '%s' (rlctl plan --help)\n", argv[i]);
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
    rl_cli_plan_t *p = malloc(sizeof *p);
    rl_recipe_t *r = NULL;
    int code = RL_EXIT_OK;
    if (!err || !p) {
        fprintf(stderr, "rlctl plan: out of memory\n");
        free(err);
        free(p);
        free(ovr);
        return RL_EXIT_FAIL;
    }
    int rc = rl_recipe_load_file(rl_algos(), path, ovr, n_ovr, RL_RECIPE_NO_FILE_CHECKS, &r, err,
                                 err_len);
    rc = rc ? rc : rl_cli_plan(r, p, err, err_len);
    if (rc) {
        fprintf(stderr, "%s\nrlctl plan: %s: not planned\n", err, path);
        code = rc == RL_EINVAL || rc == ENOENT ? RL_EXIT_USAGE : RL_EXIT_FAIL;
    } else if (p->n == 0) {
        printf("plan: %s runs on the CPU (model.device, roles.devices): nothing to plan on a "
               "device\n",
               path);
    } else {
        if (json) {
            json_t *o = s_json(r, p);
            char *s = json_dumps(o, JSON_COMPACT);
            printf("%s\n", s ? s : "{}");
            free(s);
            json_decref(o);
        } else {
            s_print(r, p, path);
        }
        code = p->fits ? RL_EXIT_OK : RL_EXIT_FAIL;
    }
    rl_recipe_destroy(&r);
    free(p);
    free(err);
    free(ovr);
    return code;
}

// rl_policy — a trainable model (the actor's policy, or a critic: the same with a value head),
// its optimizer and the one training step every loss runs (each loss's adapter, beside its math,
// calls rl_policy_step with its callback: rl_loss.h). Read top to bottom: options, setup,
// logprobs and values, the step, scores and sums, weights and checkpoints.
#include "rl_policy.h"

#include "rl_err.h"
#include "rl_device.h"
#include "rl_fsdp.h"
#include "rl_head.h"
#include "rl_log.h"
#include "rl_optim.h"
#include "rl_rng.h"
#include "rl_safetensors.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rl_policy {
    const rl_recipe_t *r;
    int threads;
    rl_model_t *model;
    rl_model_t *ref;        // full tuning's frozen reference, loaded on first use
    rl_optim_t *optim;
    float *params, *grads;  // trainable flat view (borrowed from model)
    size_t n_params;
    // micro-batch scratch, grown to the largest (mb, T) seen
    int32_t *tok;
    int *len;
    float *logp, *ent, *dlogp, *mask;
    size_t cap;
    int kind; // S_POLICY, S_CRITIC, S_RM
    // a critic's value head or a reward model's score head (NULL for the policy): w (C), its
    // gradient, and dL/dhidden scratch
    float *head, *dhead;
    float *dhidden;         // (mb*T, C), grown with cap
    int C;
    // on a mesh (NULL: 1×1): the collectives (borrowed), the sharded model and reference
    rl_coll_t *coll;
    rl_fsdp_t *fsdp, *ref_fsdp;
    float *wfull; // full tuning on a mesh: the gathered weights rl_policy_weights gives
    // on a GPU without a head or a mesh, unless train.optimizer_offload: the clip and AdamW run
    // on the device, whose parameters are then ahead of the host's copy until fetched (the
    // weights for a sampler, a checkpoint); its moments go to a checkpoint's file directly
    int dev_optim, host_params_stale;
    // a mesh on GPUs of their own with NCCL (rl_policy_wants_nccl, and NCCL loaded on every
    // rank): no fsdp; the model sums the gradients over the ranks and steps AdamW (dev_optim)
    int nccl;
};

enum { S_POLICY = 0, S_CRITIC = 1, S_RM = 2 };

// The optimizer's parts: the model's trainable flat view, then the head (a critic); on a mesh
// what this rank updates (rl_fsdp_optim_parts).
static int s_parts(rl_policy_t *p, rl_optim_part_t parts[2]) {
    if (p->fsdp) {
        return rl_fsdp_optim_parts(p->fsdp, parts);
    }
    parts[0] = (rl_optim_part_t){p->params, p->grads, p->n_params};
    if (!p->head) {
        return 1;
    }
    parts[1] = (rl_optim_part_t){p->head, p->dhead, (size_t)p->C};
    return 2;
}

// ---- options and setup ---------------------------------------------------------------------

static int s_lora_bits(const rl_recipe_strlist_t *tm) {
    static const char *const names[] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                        "gate_proj", "up_proj", "down_proj"};
    int bits = 0;
    for (int i = 0; i < tm->n; i++) {
        for (int k = 0; k < 7; k++) {
            if (strcmp(tm->items[i], names[k]) == 0) {
                bits |= 1 << k; // RL_LORA_Q .. RL_LORA_DOWN in this order
            }
        }
        if (strcmp(tm->items[i], "all-linear") == 0) {
            bits |= RL_LORA_ALL;
        }
    }
    return bits;
}

void rl_policy_model_opts(const rl_recipe_t *r, int threads, rl_model_opts_t *mo) {
    rl_model_opts_default(mo);
    mo->tune = r->lora.enabled ? RL_TUNE_LORA : RL_TUNE_FULL;
    mo->lora_r = r->lora.r;
    mo->lora_alpha = (float)r->lora.alpha;
    mo->lora_dropout = (float)r->lora.dropout;
    mo->lora_targets = s_lora_bits(&r->lora.target_modules);
    mo->use_rslora = r->lora.use_rslora;
    mo->seed = (uint64_t)r->run.seed;
    mo->recompute = r->train.recompute;
    mo->threads = threads;
    // model.device (checked by rl_cli_check_model before any role starts): the roles that hold
    // the model compute there; a recipe without it, or with one that does not parse, the CPU
    char why[160];
    if (r->model.device && rl_device_parse(r->model.device, &mo->device, why, sizeof why) != 0) {
        mo->device = (rl_device_t){0, 0};
    }
    // a GPU's activations for a micro-batch (what rlctl plan counts; a longer forward grows them)
    long long rows = (long long)r->train.micro_batch_size * rl_policy_seq_len(r);
    mo->device_rows = rows > 0 && rows <= (1 << 30) ? (int)rows : 0;
}

static const char *const S_DEVICE_ROLES[] = {"actor", "critic", "reference", "samplers", NULL};

int rl_policy_check_devices(const rl_recipe_t *r, char *err, size_t err_len) {
    json_t *o = r->roles.devices ? json_loads(r->roles.devices, 0, NULL) : NULL;
    int rc = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int known = 0;
        for (int i = 0; S_DEVICE_ROLES[i]; i++) {
            known |= !strcmp(k, S_DEVICE_ROLES[i]);
        }
        char why[256];
        rl_device_t d;
        if (!known) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "'%s' is not a role that holds the model: actor, critic, reference, "
                         "samplers",
                         k);
        } else if (json_is_array(v) && json_array_size(v) > 0) {
            for (size_t i = 0; !rc && i < json_array_size(v); i++) {
                json_t *e = json_array_get(v, i);
                if (!json_is_string(e) ||
                    rl_device_parse(json_string_value(e), &d, why, sizeof why) != 0) {
                    rc = rl_errf(err, err_len, RL_EINVAL, "%s[%zu]: %s", k, i,
                                 json_is_string(e) ? why : "expected a device name");
                }
            }
        } else if (!json_is_string(v)) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: expected a device name (cpu, cuda, cuda:N) or a non-empty list of "
                         "them",
                         k);
        } else if (rl_device_parse(json_string_value(v), &d, why, sizeof why) != 0) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: %s", k, why);
        }
        if (rc) {
            break;
        }
    }
    json_decref(o);
    return rc;
}

int rl_policy_role_device(const rl_recipe_t *r, const char *role, int rank, rl_device_t *out,
                          char *err, size_t err_len) {
    char why[256];
    const char *name = r->model.device ? r->model.device : "cpu";
    json_t *o = r->roles.devices ? json_loads(r->roles.devices, 0, NULL) : NULL;
    json_t *v = json_object_get(o, role);
    if (json_is_array(v) && json_array_size(v) > 0) {
        v = json_array_get(v, (size_t)(rank < 0 ? 0 : rank) % json_array_size(v));
    }
    name = json_is_string(v) ? json_string_value(v) : name;
    int rc = rl_device_parse(name, out, why, sizeof why);
    json_decref(o);
    return rc ? rl_errf(err, err_len, RL_EINVAL, "%s's device: %s", role, why) : 0;
}

int rl_policy_sync_ipc(const rl_recipe_t *r, int k, char *why, size_t why_len) {
    rl_device_t a, s;
    char na[32], ns[32], msg[512];
    if (rl_policy_role_device(r, "actor", 0, &a, why, why_len) != 0 ||
        rl_policy_role_device(r, "samplers", k, &s, why, why_len) != 0) {
        return 0;
    }
    rl_device_name(&a, na, sizeof na);
    rl_device_name(&s, ns, sizeof ns);
    if (!a.cuda || !s.cuda) {
        snprintf(why, why_len, "sampler %d is on %s and the actor on %s: CUDA IPC is between GPUs",
                 k, ns, na);
        return 0;
    }
    if (rl_policy_wants_nccl(r) && r->mesh.fsdp > 1 && !r->lora.enabled) {
        snprintf(why, why_len,
                 "the actor's masters are split over its mesh (ZeRO-3, mesh.fsdp > 1 with "
                 "NCCL): no whole array to share");
        return 0;
    }
    if (a.index == s.index) {
        return 1;
    }
    int access = 0;
    if (rl_device_peer(s.index, a.index, &access, msg, sizeof msg) != 0) {
        snprintf(why, why_len, "sampler %d on %s, the actor on %s: %s", k, ns, na, msg);
        return 0;
    }
    if (!access) {
        snprintf(why, why_len,
                 "sampler %d on %s cannot reach the actor's %s (no peer access between them)", k,
                 ns, na);
    }
    return access;
}

// The actor's ranks' devices all distinct GPUs (1: yes; 0 with why).
static int s_distinct_gpus(const rl_recipe_t *r, char *why, size_t why_len) {
    const int n = r->mesh.dp * r->mesh.fsdp;
    char msg[256];
    for (int i = 0; i < n; i++) {
        rl_device_t d, e;
        if (rl_policy_role_device(r, "actor", i, &d, msg, sizeof msg) != 0 || !d.cuda) {
            snprintf(why, why_len, "the actor's mesh is not on GPUs");
            return 0;
        }
        for (int j = 0; j < i; j++) {
            if (rl_policy_role_device(r, "actor", j, &e, msg, sizeof msg) == 0 &&
                e.index == d.index) {
                snprintf(why, why_len, "ranks %d and %d share cuda:%d", j, i, d.index);
                return 0;
            }
        }
    }
    return 1;
}

// Why the recipe keeps the actor's mesh off NCCL (NULL: it does not).
static const char *s_no_nccl(const rl_recipe_t *r, char *why, size_t why_len) {
    const unsigned uses = r->algorithm.def ? r->algorithm.def->uses : 0;
    if (r->mesh.dp * r->mesh.fsdp < 2) {
        return "1x1";
    }
    if (r->mesh.collectives == RL_RECIPE_COLL_HOST) {
        return "mesh.collectives: host";
    }
    if (!s_distinct_gpus(r, why, why_len)) {
        return why;
    }
    if (uses & RL_RECIPE_USES_SCORE_HEAD) {
        return "a reward model's score head steps on the host";
    }
    if (r->train.optimizer_offload) {
        return "train.optimizer_offload keeps AdamW on the host";
    }
    return NULL;
}

int rl_policy_wants_nccl(const rl_recipe_t *r) {
    char why[256];
    return s_no_nccl(r, why, sizeof why) == NULL;
}

int rl_policy_check_mesh_devices(const rl_recipe_t *r, const char **key, char *err,
                                 size_t err_len) {
    const int n = r->mesh.dp * r->mesh.fsdp;
    const unsigned uses = r->algorithm.def ? r->algorithm.def->uses : 0;
    const int critic = (uses & RL_RECIPE_USES_CRITIC) && r->roles.critic != RL_RECIPE_REF_WORKER;
    const int ref = r->roles.reference == RL_RECIPE_REF_MESH &&
                    (r->algorithm.beta > 0 || (uses & RL_RECIPE_USES_REF_SUMS));
    const char *const groups[3] = {"actor", critic ? "critic" : NULL, ref ? "reference" : NULL};
    json_t *o = r->roles.devices ? json_loads(r->roles.devices, 0, NULL) : NULL;
    int rc = 0;
    *key = "model.device";
    for (int g = 0; n > 1 && !rc && g < 3; g++) {
        if (!groups[g]) {
            continue;
        }
        *key = json_object_get(o, groups[g]) ? "roles.devices" : "model.device";
        rl_device_t d0, d, e;
        char a[32], b[32];
        rc = rl_policy_role_device(r, groups[g], 0, &d0, err, err_len);
        for (int i = 1; !rc && i < n; i++) {
            if ((rc = rl_policy_role_device(r, groups[g], i, &d, err, err_len)) != 0) {
                break;
            }
            if (d.cuda != d0.cuda) {
                rc = rl_errf(err, err_len, RL_EINVAL,
                             "%s: the ranks of a %dx%d mesh are all on GPUs or all on the CPU "
                             "(rank 0 on %s, rank %d on %s)",
                             groups[g], r->mesh.dp, r->mesh.fsdp, rl_device_name(&d0, a, sizeof a),
                             i, rl_device_name(&d, b, sizeof b));
            }
            for (int j = 0; !rc && d.cuda && !r->mesh.share_devices && j < i; j++) {
                rc = rl_policy_role_device(r, groups[g], j, &e, err, err_len);
                if (!rc && e.index == d.index) {
                    rc = rl_errf(err, err_len, RL_EINVAL,
                                 "%s: ranks %d and %d of the %dx%d mesh are both on %s: each rank "
                                 "needs a GPU of its own (list one per rank in roles.devices.%s), "
                                 "or set mesh.share_devices: true to let ranks share one",
                                 groups[g], j, i, r->mesh.dp, r->mesh.fsdp,
                                 rl_device_name(&d, a, sizeof a), groups[g]);
                }
            }
        }
        if (!rc && d0.cuda && r->mesh.hostfile) {
            *key = "mesh.hostfile";
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s on GPUs: a mesh across hosts does not run on GPUs yet (its ranks' "
                         "devices cannot be checked from here; docs/gpu.md)",
                         groups[g]);
        }
    }
    json_decref(o);
    char why[256];
    const char *no = rc || r->mesh.collectives != RL_RECIPE_COLL_NCCL || n < 2
                         ? NULL
                         : s_no_nccl(r, why, sizeof why);
    if (no) {
        *key = "mesh.collectives";
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "nccl: the actor's mesh cannot use NCCL: %s (each rank needs a GPU of its "
                     "own; use auto or host)",
                     no);
    }
    return rc;
}

int rl_policy_seq_len(const rl_recipe_t *r) {
    if (r->algorithm.def && (r->algorithm.def->uses & RL_RECIPE_USES_SAMPLES)) {
        return r->data.max_prompt_length + r->sampling.max_new_tokens;
    }
    return r->data.max_length;
}

// This process's rank on its mesh (0: 1×1).
static int s_rank(const rl_policy_t *p) {
    return p->coll ? rl_coll_rank(p->coll) : 0;
}

// On a mesh: shards the freshly loaded model m (opts.sharded) over the fsdp groups; LoRA's
// adapter and a head stay whole on every rank (rl_fsdp.h: replicated).
static int s_shard_model(rl_policy_t *p, rl_model_t *m, char *err, size_t err_len) {
    if (p->model) {
        rl_model_destroy(&m);
        return rl_errf(err, err_len, RL_EUNSUPPORTED,
                       "a sharded model is loaded once (a checkpoint's weights are scattered)");
    }
    rl_optim_part_t rep[2];
    int n_rep = 0;
    size_t n = 0;
    char msg[1024];
    if (rl_model_on_gpu(m)) {
        // a GPU holds the whole model: its trainable parameters (gradients pulled to the host)
        // and a head are replicated; gradients and optimizer state split over fsdp (rl_fsdp.h)
        float *params = rl_model_trainable(m, &n), *grads = rl_model_trainable_grads(m);
        if (!params || !grads || n == 0) {
            rl_model_destroy(&m);
            return rl_errf(err, err_len, RL_EINVAL, "the model has no trainable parameters");
        }
        rep[n_rep++] = (rl_optim_part_t){params, grads, n};
        if (p->head) {
            rep[n_rep++] = (rl_optim_part_t){p->head, p->dhead, (size_t)p->C};
        }
        int rc = rl_fsdp_new_replicated(p->coll, rep, n_rep, &p->fsdp, msg, sizeof msg);
        if (rc) {
            rl_model_destroy(&m);
            return rl_errf(err, err_len, rc, "the mesh's optimizer slices: %s", msg);
        }
        p->model = m;
        p->params = params;
        p->grads = grads;
        p->n_params = n;
        return 0;
    }
    float *lora = rl_model_grads(m) ? NULL : rl_model_trainable(m, &n); // whole on every rank
    if (p->head) {
        rep[n_rep++] = (rl_optim_part_t){p->head, p->dhead, (size_t)p->C};
    }
    int rc = rl_fsdp_new(m, p->coll, rep, n_rep, &p->fsdp, msg, sizeof msg);
    if (rc) {
        rl_model_destroy(&m);
        return rl_errf(err, err_len, rc, "sharding the model: %s", msg);
    }
    p->model = m;
    p->params = lora; // full tuning: gathered on demand (rl_policy_weights)
    p->grads = NULL;  // the adapter's gradients: rl_fsdp's pieces
    p->n_params = lora ? n : rl_fsdp_full_size(p->fsdp);
    return 0;
}

// Every rank of the mesh together, for `groups` groups of ranks (this rank's: `group`; leader:
// it is the group's first): each rank opens NCCL (rl_device_comm_id), each leader making its
// group's id, and one all-reduce over the world (the bytes as doubles: exact) hands every rank
// its group's id. *failed: the ranks where NCCL would not open (the same on every rank); why:
// this rank's reason. Returns 0 or the all-reduce's error.
static int s_group_id(rl_policy_t *p, int groups, int group, int leader, unsigned char *id,
                      int *failed, char *why, size_t why_len, char *err, size_t err_len) {
    const size_t W = 1 + RL_DEVICE_COMM_ID; // per group: its failures, then the id's bytes
    double *v = calloc((size_t)groups * W, sizeof *v);
    if (!v) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    double *mine = v + (size_t)group * W;
    mine[0] = rl_device_comm_id(leader ? id : NULL, why, why_len) != 0;
    for (int i = 0; leader && !mine[0] && i < RL_DEVICE_COMM_ID; i++) {
        mine[1 + i] = id[i];
    }
    int rc = rl_coll_all_reduce_f64(p->coll, RL_MESH_WORLD, v, (size_t)groups * W, err, err_len);
    *failed = 0;
    for (int g = 0; !rc && g < groups; g++) {
        *failed += (int)v[(size_t)g * W];
    }
    for (int i = 0; !rc && !*failed && i < RL_DEVICE_COMM_ID; i++) {
        id[i] = (unsigned char)mine[1 + i];
    }
    free(v);
    return rc;
}

// On a mesh that wants NCCL (rl_policy_wants_nccl), at load, every rank together: each opens NCCL,
// the ranks agree (one failure: none uses it) and rank 0's id reaches every rank (s_group_id).
// *use = 1 with id, or 0: mesh.collectives auto goes on through host memory (rank 0 says why),
// nccl stops here.
static int s_nccl_agree(rl_policy_t *p, unsigned char *id, int *use, char *err, size_t err_len) {
    char why[1024] = "";
    int failed = 0;
    *use = 0;
    int rc = s_group_id(p, 1, 0, s_rank(p) == 0, id, &failed, why, sizeof why, err, err_len);
    if (rc) {
        return rc;
    }
    if (failed > 0) {
        const int world = rl_mesh_size(rl_coll_mesh(p->coll));
        if (p->r->mesh.collectives == RL_RECIPE_COLL_NCCL) {
            return rl_errf(
                err, err_len, RL_ENOTFOUND,
                "mesh.collectives: nccl: NCCL cannot be opened on %d of the %d ranks%s%s", failed,
                world, *why ? ": " : "", why);
        }
        if (s_rank(p) == 0) {
            rl_log_warn("the actor's mesh sums its gradients through host memory (MPI): NCCL "
                        "cannot be opened on %d of the %d ranks%s%s",
                        failed, world, *why ? ": " : "", why);
        }
        return 0;
    }
    *use = 1;
    return 0;
}

// ZeRO-3 on GPUs with NCCL (mesh.fsdp > 1): the NCCL id of this rank's fsdp group (each group's
// first rank makes one: s_group_id). opts: where the model's options get it (id holds it).
// Returns 0 or an error (on every rank alike: a group's failure is everyone's).
static int s_shard_group(rl_policy_t *p, unsigned char *id, rl_model_opts_t *opts, char *err,
                         size_t err_len) {
    const rl_mesh_t *mesh = rl_coll_mesh(p->coll);
    const int rank = s_rank(p), frank = rl_mesh_fsdp_rank(mesh, rank);
    char why[1024] = "";
    int failed = 0;
    int rc = s_group_id(p, mesh->dp, rl_mesh_dp_rank(mesh, rank), frank == 0, id, &failed, why,
                        sizeof why, err, err_len);
    if (!rc && failed) {
        rc = rl_errf(err, err_len, RL_EIO,
                     "the NCCL groups of the sharded layers: NCCL would not open on %d rank%s%s%s",
                     failed, failed == 1 ? "" : "s", *why ? ": " : "", why);
    }
    if (!rc) {
        opts->device_shard_id = id;
        opts->device_shard_ranks = mesh->fsdp;
        opts->device_shard_rank = frank;
    }
    return rc;
}

static int s_load_model(rl_policy_t *p, const char *dir, char *err, size_t err_len) {
    rl_model_opts_t mo;
    rl_policy_model_opts(p->r, p->threads, &mo);
    if (p->kind == S_CRITIC) {
        mo.tune = p->r->critic.lora ? RL_TUNE_LORA : RL_TUNE_FULL; // the critic's own mode
    }
    if (p->head) {
        mo.seq_cls = 1; // the folder may be a reward model's (score.weight, no lm_head)
    }
    char msg[2048];
    int rc = rl_policy_role_device(p->r, p->kind == S_CRITIC ? "critic" : "actor", s_rank(p),
                                   &mo.device, err, err_len);
    if (rc) {
        return rc;
    }
    // a mesh shards the model's units over its ranks; on GPUs each rank holds it whole
    mo.sharded = p->coll != NULL && !mo.device.cuda;
    // on GPUs of their own: the ranks' NCCL group, the optimizer on the devices
    unsigned char id[RL_DEVICE_COMM_ID];
    int nccl = 0;
    if (p->coll && !p->model && !p->head && mo.device.cuda && rl_policy_wants_nccl(p->r) &&
        (rc = s_nccl_agree(p, id, &nccl, err, err_len)) != 0) {
        return rc;
    }
    if (nccl) {
        mo.device_comm_id = id;
        mo.device_comm_ranks = rl_mesh_size(rl_coll_mesh(p->coll));
        mo.device_comm_rank = s_rank(p);
    }
    // and with fsdp > 1 the frozen base's layers sharded over each fsdp group (ZeRO-3)
    unsigned char sid[RL_DEVICE_COMM_ID];
    if (nccl && rl_coll_mesh(p->coll)->fsdp > 1 && mo.tune == RL_TUNE_LORA &&
        (rc = s_shard_group(p, sid, &mo, err, err_len)) != 0) {
        return rc;
    }
    // full tuning: the fp32 masters split over the whole mesh instead (ZeRO-3 of the
    // masters, on the ZeRO-2 group)
    mo.device_shard_masters = nccl && rl_coll_mesh(p->coll)->fsdp > 1 && mo.tune == RL_TUNE_FULL;
    // the optimizer on the host (dev_optim below is the converse): no moments on the device
    mo.device_host_optim =
        (p->coll != NULL && !nccl) || p->head != NULL || p->r->train.optimizer_offload;
    rl_model_t *m = rl_model_load(dir, &mo, msg, sizeof(msg));
    if (!m) {
        return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
    }
    // LoRA on a GPU: the frozen base computes there only, its host copy given back (a head's
    // final save merges the adapter into the base: kept). Full tuning on a mesh's GPUs with
    // AdamW there: ranks other than 0 write no checkpoint and send no weights, so they keep no
    // host copy either (their pulls make the gathers only; a resume loads into the device)
    const int rank_full =
        nccl && s_rank(p) != 0 && mo.tune == RL_TUNE_FULL && !p->head && !mo.device_host_optim;
    if (mo.device.cuda && ((mo.tune == RL_TUNE_LORA && !p->head) || rank_full) &&
        rl_model_drop_host_weights(m) != 0) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s", rl_model_errmsg(m));
        rl_model_destroy(&m);
        return rc;
    }
    if (rank_full) {
        rl_log_info("rank %d gave its host copy of the weights back (rank 0 writes the "
                    "checkpoints and sends the weights)",
                    s_rank(p));
    }
    if (p->coll && !nccl) {
        return s_shard_model(p, m, err, err_len);
    }
    p->nccl = nccl;
    size_t n = 0;
    float *params = rl_model_trainable(m, &n); // NULL: given back (rank_full)
    float *grads = rl_model_trainable_grads(m);
    n = rl_model_trainable_size(m);
    if ((!params && !rank_full) || !grads || n == 0 || (p->optim && n != p->n_params)) {
        rl_model_destroy(&m);
        return rl_errf(err, err_len, RL_EINVAL, "%s: %zu trainable parameters, expected %zu",
                       dir, n, p->n_params);
    }
    rl_model_destroy(&p->model);
    p->model = m;
    p->params = params;
    p->grads = grads;
    p->n_params = n;
    return 0;
}

// A reward model's score head from its folder: `score.weight` [1, C] (HF's
// <Arch>ForSequenceClassification with num_labels 1), any of F32/F16/BF16. optional: a folder
// without one keeps the fresh head (*found = 0); else that is an error naming `key`.
static int s_head_from_folder(rl_policy_t *p, const char *dir, const char *key, int optional,
                              int *found, char *err, size_t err_len) {
    char msg[2048];
    *found = 0;
    rl_st_model_t *st = rl_st_model_open(dir, msg, sizeof msg);
    if (!st) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: %s", key, msg);
    }
    const rl_st_tensor_t *t = rl_st_model_find(st, "score.weight");
    int rc = 0;
    if (t && t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == p->C) {
        if ((rc = rl_st_check_finite(t, dir, msg, sizeof msg)) != 0) {
            rc = rl_errf(err, err_len, rc, "%s: %s", key, msg);
        } else {
            rl_st_to_f32(p->head, t);
            *found = 1;
        }
    } else if (!optional || t) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "%s: %s has no score.weight [1, %d]: not a reward model (an HF sequence "
                     "classifier with one label)%s",
                     key, dir, p->C, optional ? "" : "; use base to start from model.path");
    }
    rl_st_model_destroy(&st);
    return rc;
}

// The policy (S_POLICY), the critic (S_CRITIC: critic.init's weights, the critic's tuning mode,
// a value head) or a reward model (S_RM: model.path in the recipe's tuning mode with a score
// head: the folder's own when it is a reward model, else a fresh one).
static int s_new(const rl_recipe_t *r, int threads, int kind, rl_coll_t *coll, rl_policy_t **out,
                 char *err, size_t err_len) {
    *out = NULL;
    rl_policy_t *p = calloc(1, sizeof(*p));
    if (!p) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    p->r = r;
    p->threads = threads;
    p->kind = kind;
    p->coll = coll;
    const char *dir = r->model.path;
    int critic = kind != S_POLICY;
    int from_rm = kind == S_CRITIC && r->critic.init && strcmp(r->critic.init, "base") != 0;
    if (from_rm) {
        dir = r->critic.init; // a reward model's folder: its decoder and its score head
    }
    if (critic) {
        // the head exists before the model loads: s_load_model reads the critic's tuning mode
        // from it. Its size is known once the config is read.
        rl_hf_config_t cfg;
        char msg[2048];
        if (rl_hf_config_load(dir, &cfg, msg, sizeof msg) != 0) {
            free(p);
            return rl_errf(err, err_len, RL_EINVAL, "%s%s", from_rm ? "critic.init: " : "",
                           msg);
        }
        p->C = cfg.hidden_size;
        p->head = calloc((size_t)p->C, sizeof(float));
        p->dhead = calloc((size_t)p->C, sizeof(float));
        if (!p->head || !p->dhead) {
            rl_policy_destroy(&p);
            return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
        // HF's init of a fresh score head: N(0, initializer_range), from the run's seed (a
        // stream of its own: the LoRA init keeps its draws)
        rl_rng_t rng;
        rl_rng_seed(&rng, (uint64_t)r->run.seed * 0x9E3779B97F4A7C15ull + 0xC217Cull);
        rl_rng_fill_normal(&rng, p->head, (size_t)p->C, 0.0f, (float)cfg.initializer_range);
    }
    int rc = s_load_model(p, dir, err, err_len), found = 0;
    if (!rc && from_rm) {
        rc = s_head_from_folder(p, dir, "critic.init", 0, &found, err, err_len);
    } else if (!rc && kind == S_RM) {
        rc = s_head_from_folder(p, dir, "model.path", 1, &found, err, err_len);
    }
    if (rc) {
        rl_policy_destroy(&p);
        return rc;
    }
    rl_optim_hparams_t hp = {r->optim.betas[0], r->optim.betas[1], r->optim.eps,
                             r->optim.weight_decay};
    p->optim =
        rl_optim_new(p->fsdp ? rl_fsdp_optim_size(p->fsdp) : p->n_params + (size_t)p->C, &hp);
    if (!p->optim) {
        rl_policy_destroy(&p);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory (optimizer state)");
    }
    p->dev_optim = rl_model_on_gpu(p->model) && (!p->coll || p->nccl) && !p->head &&
                   !r->train.optimizer_offload;
    if (p->nccl && s_rank(p) == 0) {
        rl_log_info("the actor's %dx%d mesh sums its gradients between its GPUs with NCCL; AdamW "
                    "steps on the devices, its state split over the %d ranks",
                    r->mesh.dp, r->mesh.fsdp, r->mesh.dp * r->mesh.fsdp);
        if (r->mesh.fsdp > 1 && !r->lora.enabled && !p->head) {
            rl_log_info("its fp32 masters are split over the %d ranks (ZeRO-3 of the "
                        "masters): each rank's GPU holds its part, all-gathers a layer with NCCL "
                        "before computing it, and keeps the embedding's and the head's bf16 "
                        "copies whole",
                        r->mesh.dp * r->mesh.fsdp);
        }
        if (rl_model_device_shard_ranks(p->model) > 1) {
            rl_log_info("its frozen layers are sharded over each fsdp group of %d ranks (ZeRO-3): "
                        "each rank's GPU holds 1/%d of every layer and all-gathers a layer with "
                        "NCCL before computing it",
                        r->mesh.fsdp, r->mesh.fsdp);
        }
    }
    *out = p;
    return 0;
}

int rl_policy_new(const rl_recipe_t *r, int threads, rl_policy_t **out, char *err, size_t err_len) {
    return s_new(r, threads, S_POLICY, NULL, out, err, err_len);
}

int rl_policy_new_critic(const rl_recipe_t *r, int threads, rl_policy_t **out, char *err,
                         size_t err_len) {
    return s_new(r, threads, S_CRITIC, NULL, out, err, err_len);
}

int rl_policy_new_rm(const rl_recipe_t *r, int threads, rl_policy_t **out, char *err,
                     size_t err_len) {
    return s_new(r, threads, S_RM, NULL, out, err, err_len);
}

int rl_policy_new_sharded(const rl_recipe_t *r, int threads, rl_policy_kind_t kind, rl_coll_t *coll,
                          rl_policy_t **out, char *err, size_t err_len) {
    int k = kind == RL_POLICY_CRITIC ? S_CRITIC : kind == RL_POLICY_RM ? S_RM : S_POLICY;
    return s_new(r, threads, k, coll, out, err, err_len);
}

void rl_policy_bytes(const rl_policy_t *self, rl_policy_bytes_t *out) {
    memset(out, 0, sizeof *out);
    size_t n_opt = rl_optim_size(self->optim);
    out->optimizer = 2 * n_opt * sizeof(float);
    if (self->fsdp && !rl_model_on_gpu(self->model)) {
        rl_fsdp_bytes_t b;
        rl_fsdp_bytes(self->fsdp, &b);
        out->params = b.params;
        out->grads = b.grads;
        out->replicated = b.replicated;
        out->buffers = b.buffers;
        out->coll_seconds = rl_fsdp_coll_seconds(self->fsdp);
        return;
    }
    // 1×1, or a rank on a GPU (the host's copy of the whole model): every parameter (frozen or
    // not); full tuning's gradients; LoRA and a head with their gradients as the replicated part
    // of a mesh would count them
    int lora = rl_policy_is_lora(self);
    out->params = (size_t)rl_model_param_count(self->model) * sizeof(float);
    out->grads = self->n_params * sizeof(float);
    out->replicated = ((lora ? self->n_params : 0) + 2 * (size_t)self->C) * sizeof(float);
}

int rl_policy_has_head(const rl_policy_t *self) { return self->head != NULL; }

int rl_policy_sharded(const rl_policy_t *self) { return self->coll != NULL; }

int rl_policy_sum_global(rl_policy_t *self, double *v, int n, char *err, size_t err_len) {
    return self->coll ? rl_coll_all_reduce_f64(self->coll, RL_MESH_WORLD, v, (size_t)n, err,
                                               err_len)
                      : 0;
}

void rl_policy_destroy(rl_policy_t **self_p) {
    rl_policy_t *p = *self_p;
    if (!p) {
        return;
    }
    rl_fsdp_destroy(&p->fsdp);
    rl_fsdp_destroy(&p->ref_fsdp);
    rl_model_destroy(&p->model);
    rl_model_destroy(&p->ref);
    rl_optim_destroy(&p->optim);
    free(p->wfull);
    free(p->tok);
    free(p->len);
    free(p->logp);
    free(p->ent);
    free(p->dlogp);
    free(p->mask);
    free(p->head);
    free(p->dhead);
    free(p->dhidden);
    free(p);
    *self_p = NULL;
}

rl_model_t *rl_policy_model(rl_policy_t *self) { return self->model; }

int rl_policy_is_lora(const rl_policy_t *self) {
    return (self->head ? self->r->critic.lora : self->r->lora.enabled) ? 1 : 0;
}

// The device's optimizer ran ahead of the host's copy: its parameters to the host (with NCCL
// a collective: every rank calls it). Returns 0 or an error.
static int s_fetch(rl_policy_t *self, char *err, size_t err_len) {
    if (self->host_params_stale) {
        int rc = rl_model_device_pull(self->model, 0);
        if (rc) {
            return rl_errf(err, err_len, rc, "%s", rl_model_errmsg(self->model));
        }
        self->host_params_stale = 0;
    }
    return 0;
}

const float *rl_policy_weights(rl_policy_t *self, size_t *n_p) {
    *n_p = self->n_params;
    char msg[256];
    if (s_fetch(self, msg, sizeof msg) != 0) {
        return NULL;
    }
    if (self->fsdp && !self->params) { // full tuning on a mesh: gathered from the shards
        if (!self->wfull && !(self->wfull = malloc(self->n_params * sizeof(float)))) {
            return NULL;
        }
        if (rl_fsdp_gather_full(self->fsdp, self->wfull, msg, sizeof msg) != 0) {
            return NULL;
        }
        return self->wfull;
    }
    return self->params;
}

// On a mesh every rank runs as many micro-batches as the rank with the most (its peers' units
// are gathered with it): the largest count over the world.
static int s_mesh_micro_count(rl_policy_t *self, int mine, int *most, char *err, size_t err_len) {
    const rl_mesh_t *mesh = rl_coll_mesh(self->coll);
    int world = rl_mesh_size(mesh);
    double *counts = calloc((size_t)world, sizeof(double));
    if (!counts) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    counts[rl_coll_rank(self->coll)] = mine;
    int rc = rl_coll_all_reduce_f64(self->coll, RL_MESH_WORLD, counts, (size_t)world, err, err_len);
    *most = 0;
    for (int i = 0; !rc && i < world; i++) {
        *most = (int)counts[i] > *most ? (int)counts[i] : *most;
    }
    free(counts);
    return rc;
}

// ---- logprobs --------------------------------------------------------------------------------

// A rank of a mesh without rows in a forward (train: and backward) its peers run: the units'
// collectives without the compute (rl_model_units_idle).
static int s_idle(rl_policy_t *self, rl_model_t *m, int train, char *err, size_t err_len) {
    (void)self;
    int rc = rl_model_units_idle(m, train);
    return rc ? rl_errf(err, err_len, rc, "%s", rl_model_errmsg(m)) : 0;
}

// Rows of a batch one scoring forward takes: all of them, but on a GPU a micro-batch
// (train.micro_batch_size) at a time: the device's activations are planned for a micro-batch
// (rlctl plan), and a whole batch's would grow them past what the plan said.
static int s_rows_at_once(const rl_policy_t *self, const rl_model_t *m, int B) {
    int mb = self->r->train.micro_batch_size;
    return rl_model_on_gpu(m) && mb > 0 && B > mb ? mb : B;
}

int rl_policy_logprobs(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B,
                       int T, float temperature, int adapter, float *logp, char *err,
                       size_t err_len) {
    rl_model_t *m = self->model;
    if (!adapter && !self->r->lora.enabled) {
        if (!self->ref) {
            rl_model_opts_t mo;
            rl_policy_model_opts(self->r, self->threads, &mo);
            mo.tune = RL_TUNE_NONE;
            int rc =
                rl_policy_role_device(self->r, "actor", s_rank(self), &mo.device, err, err_len);
            if (rc) {
                return rc;
            }
            // on a mesh the reference is sharded too (on GPUs with NCCL: its layers over each
            // fsdp group, as the actor's frozen base; else whole on each rank's device)
            mo.sharded = self->coll != NULL && !mo.device.cuda;
            unsigned char sid[RL_DEVICE_COMM_ID];
            if (self->nccl && rl_coll_mesh(self->coll)->fsdp > 1 &&
                (rc = s_shard_group(self, sid, &mo, err, err_len)) != 0) {
                return rc;
            }
            char msg[2048];
            self->ref = rl_model_load(self->r->model.path, &mo, msg, sizeof(msg));
            if (!self->ref) {
                return rl_errf(err, err_len, RL_EINVAL, "reference: %s", msg);
            }
            rc = mo.sharded
                     ? rl_fsdp_new(self->ref, self->coll, NULL, 0, &self->ref_fsdp, msg, sizeof msg)
                     : 0;
            // on a GPU the frozen reference only computes there: its host copy given back
            if (!rc && mo.device.cuda && rl_model_drop_host_weights(self->ref) != 0) {
                rc = RL_EINVAL;
                snprintf(msg, sizeof msg, "%s", rl_model_errmsg(self->ref));
            }
            if (rc) {
                rl_model_destroy(&self->ref);
                return rl_errf(err, err_len, rc, "reference: %s", msg);
            }
            if (rl_model_device_shard_ranks(self->ref) > 1 && s_rank(self) == 0) {
                rl_log_info("the reference's layers are sharded over each fsdp group of %d "
                            "ranks (ZeRO-3), gathered a layer at a time with NCCL",
                            rl_model_device_shard_ranks(self->ref));
            }
        }
        m = self->ref;
    }
    // layers sharded on GPUs (ZeRO-3): every rank runs as many forwards as the rank with the
    // most, idle ones gathering the layers with its peers
    const int zero3 = self->coll && rl_model_device_shard_ranks(m) > 1;
    if (B == 0 && self->coll && !zero3) {
        return s_idle(self, m, 0, err, err_len);
    }
    int rc = 0, k = s_rows_at_once(self, m, B), mine = B > 0 ? (B + k - 1) / k : 0, most = mine;
    if (zero3 && (rc = s_mesh_micro_count(self, mine, &most, err, err_len)) != 0) {
        return rc;
    }
    if (!adapter && m == self->model) {
        rl_model_set_adapter_disabled(m, 1);
    }
    for (int b0 = 0; !rc && b0 < B; b0 += k) {
        int n = B - b0 < k ? B - b0 : k;
        rc = rl_model_forward(m, tokens + (size_t)b0 * T, lengths + b0, n, T, temperature, 0,
                              logp + (size_t)b0 * T, NULL);
    }
    for (int i = mine; !rc && i < most; i++) {
        rc = rl_model_units_idle(m, 0);
    }
    if (!adapter && m == self->model) {
        rl_model_set_adapter_disabled(m, 0);
    }
    if (rc) {
        return rl_errf(err, err_len, rc, "logprobs: %s", rl_model_errmsg(m));
    }
    return 0;
}

// The head's outputs for the last forward of n rows (lengths, T columns): score 1 gives n
// scores, 0 the (n,T) values. On a GPU the head runs there (the hidden states stay on the
// device); else rl_head over rl_model_hidden. Returns 0 or an error (rl_model_errmsg).
static int s_head_forward(rl_policy_t *self, const int *lengths, int n, int T, int score,
                          float *out) {
    rl_model_t *m = self->model;
    if (rl_model_on_gpu(m)) {
        return rl_model_device_head_forward(m, self->head, score, out);
    }
    if (score) {
        rl_head_score_forward(out, rl_model_hidden(m), self->head, lengths, n, T, self->C);
    } else {
        rl_head_values_forward(out, rl_model_hidden(m), self->head, lengths, n, T, self->C);
    }
    return 0;
}

// Its backward from dout (that shape), the head's gradient into dhead, then the model's.
static int s_head_backward(rl_policy_t *self, const int *lengths, int n, int T, int score,
                           const float *dout) {
    rl_model_t *m = self->model;
    if (rl_model_on_gpu(m)) {
        return rl_model_device_head_backward(m, self->head, score, dout, self->dhead);
    }
    const float *hid = rl_model_hidden(m);
    if (score) {
        rl_head_score_backward(self->dhidden, self->dhead, dout, hid, self->head, lengths, n, T,
                               self->C);
    } else {
        rl_head_values_backward(self->dhidden, self->dhead, dout, hid, self->head, lengths, n, T,
                                self->C);
    }
    return rl_model_backward_hidden(m, self->dhidden);
}

int rl_policy_values(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B, int T,
                     float *values, char *err, size_t err_len) {
    if (!self->head) {
        return rl_errf(err, err_len, RL_EINVAL, "values: this model has no value head");
    }
    if (B == 0 && self->coll) {
        return s_idle(self, self->model, 0, err, err_len);
    }
    for (int b0 = 0, k = s_rows_at_once(self, self->model, B); b0 < B; b0 += k) {
        int n = B - b0 < k ? B - b0 : k;
        int rc = rl_model_forward(self->model, tokens + (size_t)b0 * T, lengths + b0, n, T, 1.0f, 0,
                                  NULL, NULL);
        if (rc) {
            return rl_errf(err, err_len, rc, "values: %s", rl_model_errmsg(self->model));
        }
        if ((rc = s_head_forward(self, lengths + b0, n, T, 0, values + (size_t)b0 * T)) != 0) {
            return rl_errf(err, err_len, rc, "values: %s", rl_model_errmsg(self->model));
        }
    }
    return 0;
}

// ---- the update --------------------------------------------------------------------------------

static int s_grow(void **p, size_t n, size_t size) {
    void *q = realloc(*p, n * size);
    if (!q) {
        return RL_ENOMEM;
    }
    *p = q;
    return 0;
}

static int s_scratch(rl_policy_t *p, size_t bt, int mb) {
    if (bt <= p->cap) {
        return 0;
    }
    if (s_grow((void **)&p->tok, bt, sizeof(int32_t)) || s_grow((void **)&p->logp, bt, 4) ||
        s_grow((void **)&p->ent, bt, 4) || s_grow((void **)&p->dlogp, bt, 4) ||
        s_grow((void **)&p->mask, bt, 4) || s_grow((void **)&p->len, (size_t)mb, sizeof(int)) ||
        (p->head && s_grow((void **)&p->dhidden, bt * (size_t)p->C, sizeof(float)))) {
        return RL_ENOMEM;
    }
    p->cap = bt;
    return 0;
}

// One micro-batch: rows [b0, b0+n) forward -> loss -> backward; *part gets its share of the
// loss.
static int s_micro(rl_policy_t *self, const rl_policy_rows_t *rows, const rl_policy_step_opts_t *o,
                   rl_policy_loss_fn loss, void *ctx, int it, int b0, int n, double *part,
                   char *err, size_t err_len) {
    int Tm = 1; // the micro-batch's longest row: no forward over padding columns
    for (int i = 0; i < n; i++) {
        self->len[i] = rows->lengths[b0 + i];
        Tm = self->len[i] > Tm ? self->len[i] : Tm;
    }
    for (int i = 0; i < n; i++) {
        memcpy(self->tok + (size_t)i * Tm, rows->tokens + (size_t)(b0 + i) * rows->T,
               (size_t)Tm * sizeof(int32_t));
        for (int t = 0; t < Tm; t++) {
            self->mask[(size_t)i * Tm + t] = rows->mask[(size_t)(b0 + i) * rows->T + t];
        }
    }
    // the policy: logprobs (and entropy); a critic: its values (no vocabulary head)
    float *ent = o->entropy && it == 0 && !self->head ? self->ent : NULL;
    int rc = rl_model_forward(self->model, self->tok, self->len, n, Tm, o->temperature, 1,
                              self->head ? NULL : self->logp, ent);
    if (rc) {
        return rl_errf(err, err_len, rc, "train forward: %s", rl_model_errmsg(self->model));
    }
    rl_policy_micro_t m = {b0, n, Tm, it, self->logp, ent, self->mask, NULL};
    if (self->head) { // a critic's values, or with o->scores a reward model's scores
        if ((rc = s_head_forward(self, self->len, n, Tm, o->scores, self->logp)) != 0) {
            return rl_errf(err, err_len, rc, "train forward: %s", rl_model_errmsg(self->model));
        }
        m.logp = NULL;
        m.values = self->logp;
    }
    if ((rc = loss(ctx, &m, self->dlogp, part)) != 0) {
        return rl_errf(err, err_len, rc, "train: bad loss input");
    }
    rc = self->head ? s_head_backward(self, self->len, n, Tm, o->scores, self->dlogp)
                    : rl_model_backward(self->model, self->dlogp);
    if (rc) {
        return rl_errf(err, err_len, rc, "train backward: %s", rl_model_errmsg(self->model));
    }
    return 0;
}

// The update of a pass on the device (dev_optim): the clip's norm (*gnorm), refused when not
// finite, then AdamW with the host optimizer's step count.
static int s_device_update(rl_policy_t *self, const rl_policy_step_opts_t *o, const char *where,
                           const char *hint, double *gnorm, char *err, size_t err_len) {
    rl_model_t *m = self->model;
    int rc = rl_model_device_clip(m, o->max_grad_norm, gnorm);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: %s", where, rl_model_errmsg(m));
    }
    if (!isfinite(*gnorm)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: the gradient norm is %s%s", where,
                       isnan(*gnorm) ? "NaN" : "infinite", hint);
    }
    const rl_recipe_t *r = self->r;
    int64_t steps = rl_optim_steps(self->optim) + 1;
    rc = rl_model_device_adamw(m, o->lr, r->optim.betas[0], r->optim.betas[1], r->optim.eps,
                               r->optim.weight_decay, steps);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: %s", where, rl_model_errmsg(m));
    }
    rl_optim_set_steps(self->optim, steps);
    self->host_params_stale = 1;
    return 0;
}

int rl_policy_step(rl_policy_t *self, const rl_policy_rows_t *rows,
                   const rl_policy_step_opts_t *o, rl_policy_loss_fn loss, void *ctx,
                   rl_policy_step_stats_t *st, char *err, size_t err_len) {
    memset(st, 0, sizeof(*st));
    int group = rows->group > 0 ? rows->group : 1;
    // on a mesh a rank may have no rows of the global batch
    if (rows->B < (self->coll ? 0 : 1) || rows->T < 2 || o->micro_batch < 1 || o->iterations < 1 ||
        rows->B % group != 0) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "train: empty batch, bad micro-batch size or rows not in groups of %d",
                       group);
    }
    // a micro-batch holds whole groups (at least one)
    int mb = o->micro_batch < rows->B ? o->micro_batch : rows->B;
    mb = mb / group * group;
    mb = mb > 0 ? mb : group;
    if (s_scratch(self, (size_t)mb * (size_t)rows->T, mb)) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int n_mb = (rows->B + mb - 1) / mb, most = n_mb;
    if (self->coll && s_mesh_micro_count(self, n_mb, &most, err, err_len) != 0) {
        return RL_EIO;
    }
    rl_optim_part_t parts[2];
    int n_parts = s_parts(self, parts);
    for (int it = 0; it < o->iterations; it++) {
        rl_model_zero_grad(self->model);
        if (self->head) {
            memset(self->dhead, 0, (size_t)self->C * sizeof(float));
        }
        if (self->fsdp) {
            rl_fsdp_zero_grad(self->fsdp);
        }
        double total = 0.0;
        for (int i = 0; i < most; i++) {
            int b0 = i * mb, n = rows->B - b0 < mb ? rows->B - b0 : mb, rc;
            double part = 0.0;
            if (i < n_mb) {
                rc = s_micro(self, rows, o, loss, ctx, it, b0, n, &part, err, err_len);
            } else {
                rc = s_idle(self, self->model, 1, err, err_len);
            }
            if (rc) {
                return rc;
            }
            total += part;
        }
        int rc = 0;
        double global = total; // every rank of a mesh decides alike below, on the mesh's loss
        if (self->coll) {
            rc = rl_coll_all_reduce_f64(self->coll, RL_MESH_WORLD, &global, 1, err, err_len);
        }
        char where[64];
        snprintf(where, sizeof where, o->step > 0 ? "step %lld" : "iteration %lld",
                 o->step > 0 ? (long long)o->step : (long long)it + 1);
        const char *hint = o->step > 0 ? "; stopping (lower optim.lr, check the data, or resume "
                                         "from the last checkpoint)"
                                       : "";
        if (!rc && !isfinite(global)) {
            return rl_errf(err, err_len, RL_EINVAL, "%s: the loss is %s%s", where,
                           isnan(global) ? "NaN" : "infinite", hint);
        }
        if (!rc && self->dev_optim) { // the clip and AdamW on the device
            rc = s_device_update(self, o, where, hint, &st->grad_norm, err, err_len);
            if (rc) {
                return rc;
            }
            st->loss = total;
            st->iterations = it + 1;
            continue;
        }
        // a model on a GPU: its gradients come to the host, where the optimizer (and a head's
        // gradient) is; the updated trainable parameters go back up after the step
        if (!rc && (rc = rl_model_device_pull(self->model, 1)) != 0) {
            return rl_errf(err, err_len, rc, "%s: %s", where, rl_model_errmsg(self->model));
        }
        double gnorm = 0.0;
        if (!rc && self->fsdp) {
            rc = rl_fsdp_reduce_grads(self->fsdp, o->max_grad_norm, &gnorm, err, err_len);
        } else if (!rc) {
            gnorm = rl_optim_clip_grad_norm_parts(parts, n_parts, o->max_grad_norm);
        }
        if (rc) {
            return rc;
        }
        if (!isfinite(gnorm)) {
            return rl_errf(err, err_len, RL_EINVAL, "%s: the gradient norm is %s%s", where,
                           isnan(gnorm) ? "NaN" : "infinite", hint);
        }
        rl_optim_step_parts(self->optim, parts, n_parts, o->lr);
        if (self->fsdp && (rc = rl_fsdp_gather_replicated(self->fsdp, err, err_len)) != 0) {
            return rc;
        }
        if ((rc = rl_model_device_push(self->model, 0)) != 0) {
            return rl_errf(err, err_len, rc, "%s: %s", where, rl_model_errmsg(self->model));
        }
        st->loss = total;
        st->grad_norm = gnorm;
        st->iterations = it + 1;
    }
    return 0;
}

int rl_policy_sum_logprobs(rl_policy_t *self, const rl_policy_rows_t *rows, int adapter,
                           int micro_batch, double *sums, char *err, size_t err_len) {
    int mb = micro_batch < 1 ? 1 : micro_batch;
    float *logp = malloc((size_t)mb * (size_t)rows->T * sizeof(float));
    if (!logp) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int n_mb = (rows->B + mb - 1) / mb, most = n_mb;
    int rc = self->coll ? s_mesh_micro_count(self, n_mb, &most, err, err_len) : 0;
    for (int i = n_mb; !rc && i < most; i++) { // on a mesh: the peers' extra forwards
        rc = rl_policy_logprobs(self, rows->tokens, rows->lengths, 0, rows->T, 1.0f, adapter, logp,
                                err, err_len);
    }
    for (int b0 = 0; !rc && b0 < rows->B; b0 += mb) {
        int n = rows->B - b0 < mb ? rows->B - b0 : mb;
        rc = rl_policy_logprobs(self, rows->tokens + (size_t)b0 * rows->T, rows->lengths + b0, n,
                                rows->T, 1.0f, adapter, logp, err, err_len);
        for (int i = 0; !rc && i < n; i++) {
            double sum = 0;
            for (int t = 0; t < rows->T; t++) {
                size_t j = (size_t)(b0 + i) * rows->T + t;
                sum += rows->mask[j] ? (double)logp[(size_t)i * rows->T + t] : 0.0;
            }
            sums[b0 + i] = sum;
        }
    }
    free(logp);
    return rc;
}

int rl_policy_scores(rl_policy_t *self, const int32_t *tokens, const int *lengths, int B, int T,
                     float *scores, char *err, size_t err_len) {
    if (!self->head) {
        return rl_errf(err, err_len, RL_EINVAL, "scores: this model has no score head");
    }
    if (B == 0 && self->coll) {
        return s_idle(self, self->model, 0, err, err_len);
    }
    for (int b0 = 0, k = s_rows_at_once(self, self->model, B); b0 < B; b0 += k) {
        int n = B - b0 < k ? B - b0 : k;
        int rc = rl_model_forward(self->model, tokens + (size_t)b0 * T, lengths + b0, n, T, 1.0f, 0,
                                  NULL, NULL);
        if (rc) {
            return rl_errf(err, err_len, rc, "scores: %s", rl_model_errmsg(self->model));
        }
        if ((rc = s_head_forward(self, lengths + b0, n, T, 1, scores + b0)) != 0) {
            return rl_errf(err, err_len, rc, "scores: %s", rl_model_errmsg(self->model));
        }
    }
    return 0;
}

// ---- weights and checkpoints ---------------------------------------------------------------

// A critic's value head as <dir>/value_head.safetensors: `score.weight` [1, C] in F32, HF's name
// of a sequence classifier's head.
#define S_HEAD_FILE "value_head.safetensors"
#define S_HEAD_NAME "score.weight"

static int s_head_save(const rl_policy_t *self, const char *dir, char *err, size_t err_len) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/" S_HEAD_FILE, dir);
    rl_st_writer_t *w = rl_st_writer_new();
    int64_t shape[2] = {1, self->C};
    int rc = w ? rl_st_writer_add_f32(w, S_HEAD_NAME, RL_DTYPE_F32, 2, shape, self->head)
               : RL_ENOMEM;
    if (!rc) {
        rc = rl_st_writer_write(w, path, err, err_len);
    } else {
        rl_errf(err, err_len, rc, "%s: cannot write the value head", path);
    }
    rl_st_writer_destroy(&w);
    return rc;
}

static int s_head_load(rl_policy_t *self, const char *dir, char *err, size_t err_len) {
    char path[4200], msg[2048];
    snprintf(path, sizeof(path), "%s/" S_HEAD_FILE, dir);
    rl_st_file_t *f = NULL;
    int rc = rl_st_file_load(path, &f, msg, sizeof msg);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s", msg);
    }
    const rl_st_tensor_t *t = rl_st_file_find(f, S_HEAD_NAME);
    if (!t || t->ndim != 2 || t->shape[0] != 1 || t->shape[1] != self->C) {
        rl_st_file_destroy(&f);
        return rl_errf(err, err_len, RL_EINVAL, "%s: no tensor %s of shape [1, %d]", path,
                       S_HEAD_NAME, self->C);
    }
    if ((rc = rl_st_check_finite(t, path, err, err_len)) != 0) {
        rl_st_file_destroy(&f);
        return rc;
    }
    rl_st_to_f32(self->head, t);
    rl_st_file_destroy(&f);
    return 0;
}

// ---- on a mesh: checkpoints in the 1×1 layout -------------------------------------------------
// A sharded policy writes and reads the same files as a 1×1 one (the whole model, the whole
// optimizer state: full parameters in HF order, then LoRA's adapter and the head), so a checkpoint
// of any mesh loads into any other (rl_fsdp's gather and scatter). World rank 0 writes; every rank
// takes part in the gathers and reads what it needs.

size_t rl_policy_n_weights(const rl_policy_t *self) {
    return self->n_params;
}

// An unsharded copy of the model on world rank 0 (*out stays NULL elsewhere; every rank takes
// part): the gathered parameters (full tuning's, or LoRA's frozen base) and LoRA's adapter.
static int s_whole_model(rl_policy_t *p, rl_model_t **out, char *err, size_t err_len) {
    *out = NULL;
    size_t n = rl_fsdp_full_size(p->fsdp), nf = 0;
    float *full = malloc((n ? n : 1) * sizeof(float));
    if (!full) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory for %zu parameters", n);
    }
    int rc = rl_fsdp_gather_full(p->fsdp, full, err, err_len);
    if (rc || s_rank(p) != 0) {
        free(full);
        return rc;
    }
    rl_model_opts_t mo;
    rl_policy_model_opts(p->r, p->threads, &mo);
    mo.tune = rl_policy_is_lora(p) ? RL_TUNE_LORA : RL_TUNE_NONE;
    char msg[1024];
    rl_model_t *m = rl_model_new_random(rl_model_config(p->model), &mo, 0, msg, sizeof msg);
    float *flat = m ? rl_model_weights_flat(m, &nf) : NULL;
    size_t nl = 0;
    float *lora = m && mo.tune == RL_TUNE_LORA ? rl_model_trainable(m, &nl) : NULL;
    if (!m) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "the whole model: %s", msg);
    } else if (!flat || nf != n || (lora && nl != p->n_params)) {
        rc = rl_errf(err, err_len, RL_EUNSUPPORTED,
                     "a sharded model without a vocabulary head cannot be written whole");
    } else {
        memcpy(flat, full, n * sizeof(float));
        if (lora) {
            memcpy(lora, p->params, nl * sizeof(float));
        }
        *out = m;
        m = NULL;
    }
    rl_model_destroy(&m);
    free(full);
    return rc;
}

static int s_save_mesh(rl_policy_t *self, const char *dir, const char *base_model, char *err,
                       size_t err_len) {
    char path[4200];
    int rc = 0, rank0 = s_rank(self) == 0;
    rl_model_t *whole = NULL;
    if (rl_policy_is_lora(self)) {
        snprintf(path, sizeof(path), "%s/adapter", dir);
        rc = rank0 ? rl_model_save_adapter(self->model, path, base_model, err, err_len) : 0;
    } else if (rl_model_on_gpu(self->model)) { // whole on every rank: rank 0 writes it
        snprintf(path, sizeof(path), "%s/model", dir);
        rc = rank0 ? rl_model_save_hf(self->model, path, 0, err, err_len) : 0;
    } else if ((rc = s_whole_model(self, &whole, err, err_len)) == 0 && whole) {
        snprintf(path, sizeof(path), "%s/model", dir);
        rc = rl_model_save_hf(whole, path, 0, err, err_len);
    }
    rl_model_destroy(&whole);
    if (!rc && rank0 && self->head) {
        rc = s_head_save(self, dir, err, err_len);
    }
    // the optimizer: m and v gathered whole (every rank), written by rank 0
    size_t w = rl_fsdp_whole_state_size(self->fsdp);
    float *mv = rc ? NULL : malloc(2 * (w ? w : 1) * sizeof(float));
    if (!rc && !mv) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory for the optimizer state");
    }
    if (!rc) {
        rc = rl_fsdp_gather_state(self->fsdp, rl_optim_m(self->optim), mv, err, err_len);
    }
    if (!rc) {
        rc = rl_fsdp_gather_state(self->fsdp, rl_optim_v(self->optim), mv + w, err, err_len);
    }
    if (!rc && rank0) {
        rl_optim_hparams_t hp = {self->r->optim.betas[0], self->r->optim.betas[1],
                                 self->r->optim.eps, self->r->optim.weight_decay};
        rl_optim_t *o = rl_optim_new(w, &hp);
        if (!o) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory for the optimizer state");
        } else {
            memcpy(rl_optim_m(o), mv, w * sizeof(float));
            memcpy(rl_optim_v(o), mv + w, w * sizeof(float));
            rl_optim_set_steps(o, rl_optim_steps(self->optim));
            snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
            rc = rl_optim_save(o, path, err, err_len);
            rl_optim_destroy(&o);
        }
    }
    free(mv);
    return rc;
}

// A checkpoint's whole model (path: its model/ folder) into a model on a GPU that a mesh's rank
// holds whole: its trainable parameters, read on the CPU, copied over the host's and pushed.
static int s_load_full_gpu(rl_policy_t *self, const char *path, char *err, size_t err_len) {
    char msg[2048];
    rl_model_opts_t mo;
    rl_policy_model_opts(self->r, self->threads, &mo);
    mo.tune = RL_TUNE_FULL; // the trainable layout, read below
    mo.seq_cls = self->head != NULL;
    mo.device = (rl_device_t){0, 0};
    rl_model_t *m = rl_model_load(path, &mo, msg, sizeof msg);
    if (!m) {
        return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
    }
    size_t n = 0;
    const float *w = rl_model_trainable(m, &n);
    int rc = 0;
    if (!w || n != self->n_params) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: %zu parameters, expected %zu", path, n,
                     self->n_params);
    } else if (!self->params) { // the host's copy given back (a mesh's rank): into the device
        if ((rc = rl_model_device_load(self->model, 0, w, n, 1)) != 0) {
            rc = rl_errf(err, err_len, rc, "%s: %s", path, rl_model_errmsg(self->model));
        }
    } else {
        memcpy(self->params, w, n * sizeof(float));
        if ((rc = rl_model_device_push(self->model, 0)) != 0) {
            rc = rl_errf(err, err_len, rc, "%s: %s", path, rl_model_errmsg(self->model));
        }
    }
    rl_model_destroy(&m);
    return rc;
}

static int s_load_mesh(rl_policy_t *self, const char *dir, uint64_t model_train_step, char *err,
                       size_t err_len) {
    char path[4200], msg[2048];
    int rc = 0;
    if (rl_policy_is_lora(self)) { // the adapter is whole on every rank
        snprintf(path, sizeof(path), "%s/adapter", dir);
        if ((rc = rl_model_load_adapter(self->model, path, msg, sizeof(msg))) != 0) {
            return rl_errf(err, err_len, rc, "%s", msg);
        }
    } else if (rl_model_on_gpu(self->model)) { // the checkpoint's whole model, on every rank
        snprintf(path, sizeof(path), "%s/model", dir);
        if ((rc = s_load_full_gpu(self, path, err, err_len)) != 0) {
            return rc;
        }
    } else { // this rank's pieces of the checkpoint's whole model
        rl_model_opts_t mo;
        rl_policy_model_opts(self->r, self->threads, &mo);
        mo.tune = RL_TUNE_NONE;
        mo.seq_cls = self->head != NULL;
        mo.device = (rl_device_t){0, 0};
        snprintf(path, sizeof(path), "%s/model", dir);
        rl_model_t *m = rl_model_load(path, &mo, msg, sizeof msg);
        if (!m) {
            return rl_errf(err, err_len, RL_EINVAL, "%s", msg);
        }
        rc = rl_fsdp_scatter_model(self->fsdp, m, err, err_len);
        rl_model_destroy(&m);
        if (rc) {
            return rc;
        }
    }
    if (self->head && (rc = s_head_load(self, dir, err, err_len)) != 0) {
        return rc;
    }
    // the optimizer: the whole state file, this rank's slice of it
    size_t w = rl_fsdp_whole_state_size(self->fsdp);
    rl_optim_hparams_t hp = {self->r->optim.betas[0], self->r->optim.betas[1], self->r->optim.eps,
                             self->r->optim.weight_decay};
    rl_optim_t *o = rl_optim_new(w, &hp);
    if (!o) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory for the optimizer state");
    }
    snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
    rc = rl_optim_load(o, path, err, err_len);
    if (!rc) {
        rl_fsdp_scatter_state(self->fsdp, rl_optim_m(o), rl_optim_m(self->optim));
        rl_fsdp_scatter_state(self->fsdp, rl_optim_v(o), rl_optim_v(self->optim));
        rl_optim_set_steps(self->optim, rl_optim_steps(o));
        rl_model_set_train_step(self->model, model_train_step);
    }
    rl_optim_destroy(&o);
    return rc;
}

int rl_policy_save(rl_policy_t *self, const char *dir, const char *base_model, char *err,
                   size_t err_len) {
    char path[4200];
    int rc;
    if (self->fsdp) {
        return s_save_mesh(self, dir, base_model, err, err_len);
    }
    // with NCCL every rank takes part (the parameters and moments may be split over them) and
    // rank 0 writes
    const int dev = self->dev_optim, writer = !self->nccl || s_rank(self) == 0;
    if ((rc = s_fetch(self, err, err_len)) != 0) {
        return rc;
    }
    char opath[4200];
    snprintf(opath, sizeof(opath), "%s/optimizer.bin", dir);
    rl_optim_writer_t *w = NULL;
    if (dev) { // the device's moments straight into the file: no copy of them in memory
        float *m = NULL, *v = NULL;
        int wrc = writer ? rl_optim_write_begin(opath, rl_optim_size(self->optim), &w, &m, &v, err,
                                                err_len)
                         : 0;
        // every rank joins the gathers; one that writes nothing (m NULL) keeps nothing
        if ((rc = rl_model_device_optim_state(self->model, m, v, 0)) != 0) {
            rl_optim_write_abort(&w);
            return rl_errf(err, err_len, rc, "%s", rl_model_errmsg(self->model));
        }
        if (wrc) {
            return wrc;
        }
    }
    if (!writer) {
        return 0;
    }
    if (rl_policy_is_lora(self)) {
        snprintf(path, sizeof(path), "%s/adapter", dir);
        rc = rl_model_save_adapter(self->model, path, base_model, err, err_len);
    } else {
        snprintf(path, sizeof(path), "%s/model", dir);
        rc = rl_model_save_hf(self->model, path, 0, err, err_len);
    }
    if (!rc && self->head) {
        rc = s_head_save(self, dir, err, err_len);
    }
    if (rc) {
        rl_optim_write_abort(&w);
        return rc;
    }
    return dev ? rl_optim_write_end(&w, self->optim, err, err_len)
               : rl_optim_save(self->optim, opath, err, err_len);
}

int rl_policy_load(rl_policy_t *self, const char *dir, uint64_t model_train_step, char *err,
                   size_t err_len) {
    char path[4200], msg[2048];
    int rc;
    if (self->fsdp) {
        return s_load_mesh(self, dir, model_train_step, err, err_len);
    }
    if (rl_policy_is_lora(self)) {
        snprintf(path, sizeof(path), "%s/adapter", dir);
        rc = rl_model_load_adapter(self->model, path, msg, sizeof(msg));
        if (rc) {
            return rl_errf(err, err_len, rc, "%s", msg);
        }
    } else {
        snprintf(path, sizeof(path), "%s/model", dir);
        // with NCCL the model stays (its group made once): the weights go into it
        rc = self->nccl ? s_load_full_gpu(self, path, err, err_len)
                        : s_load_model(self, path, err, err_len);
        if (rc) {
            return rc;
        }
    }
    if (self->head && (rc = s_head_load(self, dir, err, err_len)) != 0) {
        return rc;
    }
    snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
    // the device's optimizer only uploads them: read where the file's pages are (one copy for
    // a machine's ranks), given back after the upload
    rc = self->dev_optim ? rl_optim_load_shared(self->optim, path, err, err_len)
                         : rl_optim_load(self->optim, path, err, err_len);
    if (rc) {
        return rc;
    }
    // the device's optimizer: the loaded moments up (the parameters went up with the load),
    // then the file's pages given back
    self->host_params_stale = 0;
    if (self->dev_optim) {
        rc = rl_model_device_optim_state(self->model, rl_optim_m(self->optim),
                                         rl_optim_v(self->optim), 1);
        rl_optim_release(self->optim);
        if (rc) {
            return rl_errf(err, err_len, rc, "%s: %s", path, rl_model_errmsg(self->model));
        }
    }
    rl_model_set_train_step(self->model, model_train_step);
    return 0;
}

int rl_policy_save_final(rl_policy_t *self, const char *dir, const char *base_model, int bf16,
                         int pad_token_id, char *err, size_t err_len) {
    if ((self->fsdp || self->nccl) && rl_model_on_gpu(self->model)) {
        // with NCCL the masters may be split over the ranks (ZeRO-3 of the masters):
        // every rank takes part in bringing them to the host
        int rc = self->nccl ? s_fetch(self, err, err_len) : 0;
        if (rc || s_rank(self) != 0) {
            return rc; // every rank holds the whole model: rank 0 writes it, as 1×1 does below
        }
    } else if (self->fsdp && (self->head || !rl_policy_is_lora(self))) {
        // the whole model on rank 0 (every rank takes part), written as a 1×1 run writes it
        rl_model_t *m = NULL;
        int rc = s_whole_model(self, &m, err, err_len);
        if (!rc && m) {
            rc = self->head
                     ? rl_model_save_seq_cls(m, dir, self->head, pad_token_id, bf16, err, err_len)
                     : rl_model_save_hf(m, dir, bf16, err, err_len);
        }
        rl_model_destroy(&m);
        return rc;
    } else if (self->fsdp && s_rank(self) != 0) {
        return 0; // LoRA's adapter is whole on rank 0
    }
    int rc = s_fetch(self, err, err_len);
    if (rc) {
        return rc;
    }
    if (self->head) { // a reward model or a critic: an HF sequence classifier, LoRA merged
        return rl_model_save_seq_cls(self->model, dir, self->head, pad_token_id, bf16, err,
                                     err_len);
    }
    if (rl_policy_is_lora(self)) {
        return rl_model_save_adapter(self->model, dir, base_model, err, err_len);
    }
    return rl_model_save_hf(self->model, dir, bf16, err, err_len);
}

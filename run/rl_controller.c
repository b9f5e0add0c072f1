// rl_controller — the lifecycle of a run, for every algorithm (rl_algo): the tokenizer, the
// algorithm's data, the workers its recipe needs (actor, reference, reward, samplers), the
// cadence of steps, evaluation, metrics and checkpoints, resume, stop signals, final/. What a
// step does is the algorithm's file (rl_algo_grpo.c, rl_algo_sft.c). Read top to bottom: state,
// setup, checkpoints and resume, stopping on a signal, the loop.
#include "rl_controller.h"

#include "rl_algo.h"
#include "rl_checkpoint.h"
#include "rl_clock.h"
#include "rl_curve.h"
#include "rl_env_host.h"
#include "rl_err.h"
#include "rl_fault.h"
#include "rl_hf.h"
#include "rl_log.h"
#include "rl_lora.h"
#include "rl_policy.h"
#include "rl_progress.h"
#include "rl_refcache.h"
#include "rl_role.h"
#include "rl_run.h"
#include "rl_rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- state -----------------------------------------------------------------------------------

enum { S_PHASE_START = 0, S_PHASE_STEP, S_PHASE_EVAL, S_PHASE_IDLE };
#define S_STOP_MARGIN 1.0 // seconds kept for stopping the workers and exiting

typedef struct {
    rl_run_t run;
    const rl_controller_opts_t *o;
    const rl_algo_t *algo;
    void *state;            // the algorithm's
    rl_progress_t *progress;
    int64_t max_frame;      // the largest frame any side of the run receives (s_max_frame)
    int64_t last_ckpt;      // step of the newest checkpoint written or loaded (-1: none)
    int trained;            // 1 once this process trained a step (the folder's mark removed)
    double t_ckpt;          // seconds the last checkpoint took (0: none written yet)
    double eval_first[2], eval_last[2]; // accuracy, greedy (NaN: not measured)
    double t_start;
    // stopping on a signal (s_cancel)
    int phase;              // S_PHASE_*: what the controller is doing now
    double t_signal;        // monotonic time the first signal was seen (0: none)
    double t_step_start;    // monotonic start of the step in progress
    double t_step_est;      // seconds the last step took (0: none finished yet)
    int stop_now;           // 1: the step would not fit in roles.stop_grace; 2: a second signal
    int do_eval;            // the algorithm evaluates and the recipe has held-out data
} s_ctl_t;

// ---- setup ------------------------------------------------------------------------------------

// The tokenizer (rl_run_tokenizer) and the stop ids and strings.
static int s_setup_tokenizer(rl_run_t *run, char *err, size_t err_len) {
    const rl_recipe_t *r = run->r;
    run->tok = rl_run_tokenizer(r, err, err_len);
    if (!run->tok) {
        return RL_EINVAL;
    }
    int32_t eos = rl_tokenizer_eos_id(run->tok);
    if (eos >= 0) {
        run->stop_ids[run->n_stop++] = eos;
    }
    for (int i = 0; i < r->sampling.stop.n && run->n_stop < 64; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        const char *t = r->sampling.stop.items[i];
        if (rl_tokenizer_encode(run->tok, t, strlen(t), 0, &ids, &n) == 0 && n == 1) {
            run->stop_ids[run->n_stop++] = ids[0]; // the sampler stops on it
        } else if (t[0]) {
            run->stop_str[run->n_stop_str++] = t;  // cut where the text first holds it
        }
        free(ids);
    }
    return 0;
}

int rl_controller_preflight(const rl_algo_t *algo, const rl_recipe_t *r, char *err,
                            size_t err_len) {
    return algo->preflight ? algo->preflight(r, err, err_len) : 0;
}

static int s_cancel(void *ctx);

// The largest frame any side of the run receives, from the run's real messages (each frame
// of a message is capped by ZMQ_MAXMSGSIZE; a peer sending more loses its connection): the
// trainable weights in one frame (LoRA: the adapter only; full: every parameter), and the
// algorithm's own largest data frame; the cap is the larger plus a quarter, plus 1 MiB for the
// small fields.
static int s_max_frame(s_ctl_t *s, double data_frame, char *err, size_t err_len) {
    const rl_recipe_t *r = s->run.r;
    rl_hf_config_t cfg;
    char msg[1024];
    if (rl_hf_config_load(r->model.path, &cfg, msg, sizeof msg) != 0) {
        return rl_recipe_errorf(r, "model.path", err, err_len, RL_EINVAL, "%s", msg);
    }
    s->run.vocab = cfg.vocab_size;
    double weights = (double)rl_hf_param_count(&cfg);
    if (r->lora.enabled) {
        rl_model_opts_t mo;
        rl_policy_model_opts(r, 1, &mo);
        weights = 0;
        for (int m = 0; m < RL_LORA_NMOD; m++) {
            int in = 0, out = 0;
            if (mo.lora_targets & (1 << m)) {
                rl_lora_module_dims(&cfg, m, &in, &out);
                weights += (double)cfg.num_hidden_layers * r->lora.r * (in + out);
            }
        }
    }
    double big = 4.0 * weights > data_frame ? 4.0 * weights : data_frame;
    double cap = big * 1.25 + (double)(1 << 20);
    s->max_frame = cap >= (double)RL_WIRE_MAX_BYTES ? (int64_t)RL_WIRE_MAX_BYTES : (int64_t)cap;
    rl_log_debug("frames capped at %lld bytes (weights %.0f, data %.0f)",
                 (long long)s->max_frame, 4.0 * weights, data_frame);
    return 0;
}

// "sampler/0" .. of a group of n
static void s_group(rl_run_group_t *grp, const char *role, int n) {
    grp->role = role;
    grp->n = n;
    for (int k = 0; k < n; k++) {
        snprintf(grp->names[k], sizeof(grp->names[k]), "%s/%d", role, k);
    }
}

// roles.remote_samplers as samplers first .. first + n - 1: our key, each one's public key, the
// fingerprint of model.path that each must serve (rl_group_connect).
static int s_connect_remote(s_ctl_t *s, int first, int n, char *err, size_t err_len) {
    const rl_recipe_t *r = s->run.r;
    rl_curve_key_t me;
    char hash[17], host[128] = "?", label[400];
    int rc = rl_curve_load_secret(r->roles.client_key, &me, err, err_len);
    if (!rc) {
        uint64_t h = 0; // the model's fingerprint, as the sampler computes it (rl_serve.c)
        rc = rl_refcache_hash_model(r->model.path, RL_REFCACHE_HASH_INIT, &h, err, err_len);
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)h);
    }
    gethostname(host, sizeof host - 1);
    snprintf(label, sizeof label, "run %s of %s (pid %d)", r->run.name ? r->run.name : "?", host,
             (int)getpid());
    for (int i = 0; !rc && i < n; i++) {
        const rl_recipe_endpoint_t *e = &r->roles.remote_samplers.items[i];
        rl_curve_key_t srv;
        rc = rl_curve_load_public(e->server_key, &srv, err, err_len);
        if (!rc) {
            rc = rl_group_connect(s->run.g, "sampler", first + i, e->endpoint, &me, srv.pub, hash,
                                  label, err, err_len);
        }
    }
    memset(&me, 0, sizeof me);
    return rc;
}

// Whether a role's workers run programs we did not write (rl_role_t.reaps).
static int s_reaps(const char *role) {
    const rl_role_t *rr = rl_role_find(role);
    return rr && rr->reaps;
}

// Starts a role's group on the mesh (the actor; a reference or critic with roles.X: mesh) through
// its launcher: on this host, or (mesh.hostfile) on the hosts of the hostfile, which reach us at
// mesh.endpoint with the keys of the recipe.
static int s_spawn_mesh(s_ctl_t *s, const char *role, int threads, char *err, size_t err_len) {
    const rl_recipe_t *r = s->run.r;
    const rl_recipe_mesh_t *m = &r->mesh;
    rl_group_mesh_opts_t o = {.launcher = m->launcher,
                              .launcher_args = (const char *const *)m->launcher_args.items,
                              .n_launcher_args = m->launcher_args.n,
                              .hostfile = m->hostfile,
                              .endpoint = m->endpoint,
                              .rank_key = m->rank_key,
                              .reaps = s_reaps(role)};
    rl_curve_key_t me;
    memset(&me, 0, sizeof me);
    char(*allow)[RL_CURVE_Z85_LEN + 1] = NULL;
    int rc = 0;
    if (m->hostfile) {
        rc = rl_curve_load_secret(m->key ? m->key : r->roles.client_key, &me, err, err_len);
        if (!rc) {
            rc = rl_curve_load_allow(m->allow, &allow, &o.n_allow, err, err_len);
        }
        o.key = &me;
        o.allow = (const char(*)[RL_CURVE_Z85_LEN + 1]) allow;
    }
    if (!rc) {
        rc = rl_group_spawn_mesh(s->run.g, role, m->dp, m->fsdp, threads, &o, err, err_len);
    }
    memset(&me, 0, sizeof me);
    free(allow);
    return rc;
}

// The run's model folder (its plain files at the top level) to the remote samplers that have
// none, in pieces of 64 MiB, the same piece to all of them at once; the last piece says so and
// each checks the folder's fingerprint.
static int s_send_model(s_ctl_t *s, char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    const char *peers[RL_RUN_MAX_RANKS];
    int np = 0;
    for (int k = 0; k < run->samplers.n; k++) {
        if (rl_group_needs_model(run->g, run->samplers.names[k])) {
            peers[np++] = run->samplers.names[k];
        }
    }
    if (np == 0) {
        return 0;
    }
    const char *dir = run->r->model.path;
    DIR *d = opendir(dir);
    if (!d) {
        return rl_errf(err, err_len, errno, "%s: %s", dir, strerror(errno));
    }
    char *names[1024];
    int nn = 0;
    int64_t bytes = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && nn < 1024;) {
        char p[4400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
            (names[nn] = strdup(e->d_name))) {
            bytes += st.st_size;
            nn++;
        }
    }
    closedir(d);
    rl_log_info("sending the model (%d files, %.1f MiB) to %d remote sampler%s", nn,
                (double)bytes / 1048576.0, np, np == 1 ? "" : "s");
    const int64_t piece = (int64_t)64 << 20;
    uint8_t *buf = malloc((size_t)piece);
    int rc = buf ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    for (int f = 0; !rc && f < nn; f++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            rc = rl_errf(err, err_len, errno, "%s: %s", p, strerror(errno));
            if (fd >= 0) {
                close(fd);
            }
            break;
        }
        int64_t total = st.st_size, off = 0;
        do {
            int64_t len = total - off < piece ? total - off : piece;
            for (int64_t got = 0; !rc && got < len;) {
                ssize_t r = pread(fd, buf + got, (size_t)(len - got), (off_t)(off + got));
                if (r <= 0 && errno != EINTR) {
                    rc = rl_errf(err, err_len, r < 0 ? errno : RL_EIO, "%s: cannot read", p);
                }
                got += r > 0 ? r : 0;
            }
            int last = f == nn - 1 && off + len == total;
            rl_proto_model_file_t q = {names[f], off, total, buf, len, last};
            rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0}, *reps[RL_RUN_MAX_RANKS] = {0};
            for (int i = 0; !rc && i < np; i++) {
                rc = rl_proto_model_file_encode(&q, rl_run_id(run), &reqs[i], err, err_len);
            }
            if (!rc) {
                rc = rl_group_call(run->g, np, peers, reqs, reps, run->r->roles.request_timeout,
                                   NULL, err, err_len);
            } else {
                for (int i = 0; i < np; i++) {
                    rl_msg_free(&reqs[i]);
                }
            }
            for (int i = 0; !rc && i < np; i++) {
                rl_msg_free(&reps[i]);
            }
            off += len;
        } while (!rc && off < total);
        close(fd);
    }
    free(buf);
    for (int f = 0; f < nn; f++) {
        free(names[f]);
    }
    return rc;
}

// The placement of a mesh (docs/mesh.md): the rank grid, then each rank's roles, host, process,
// threads and expected bytes of model state (this rank's shards: parameters, full tuning's
// gradients, AdamW's m and v; LoRA's adapter and a head whole on every rank).
static void s_print_placement(s_ctl_t *s, int threads) {
    const rl_recipe_t *r = s->run.r;
    const int dp = r->mesh.dp, fsdp = r->mesh.fsdp, n = dp * fsdp;
    char host[256] = "localhost", grid[512] = "";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    size_t o = 0;
    for (int d = 0; d < dp && o + 32 < sizeof grid; d++) {
        o += (size_t)snprintf(grid + o, sizeof grid - o, "%s[", d ? ", " : "");
        for (int f = 0; f < fsdp && o + 16 < sizeof grid; f++) {
            o += (size_t)snprintf(grid + o, sizeof grid - o, "%s%d", f ? ", " : "", d * fsdp + f);
        }
        o += (size_t)snprintf(grid + o, sizeof grid - o, "]");
    }
    // expected bytes: the base's parameters split over fsdp; what trains on top of them
    rl_hf_config_t cfg;
    char msg[512];
    double base = 0, lora = 0;
    if (rl_hf_config_load(r->model.path, &cfg, msg, sizeof msg) == 0) {
        base = (double)rl_hf_param_count(&cfg) * 4.0;
        if (r->lora.enabled) { // the adapter's floats: r (in + out) per targeted module
            rl_model_opts_t mo;
            rl_policy_model_opts(r, 0, &mo);
            for (int m = 0; m < RL_LORA_NMOD; m++) {
                int in, out;
                rl_lora_module_dims(&cfg, m, &in, &out);
                lora += (mo.lora_targets >> m & 1) * 4.0 * r->lora.r * (in + out) *
                        cfg.num_hidden_layers;
            }
        }
    }
    // full: params, grads, m, v sharded; LoRA: the base sharded, A and B whole, their
    // gradients, m and v sharded. On GPUs (the host's side of each rank): the whole model's fp32
    // copy (LoRA: the adapter's only), the trainables' gradients whole, m and v sharded
    rl_device_t d0;
    char dn[32], err[256];
    int gpu = rl_policy_role_device(r, "actor", 0, &d0, err, sizeof err) == 0 && d0.cuda;
    // with NCCL (rl_policy_wants_nccl) the host keeps the whole model's copy (and an adapter's
    // gradients; full tuning's are the devices' only, the host's array never touched); the
    // moments are the devices' (a checkpoint's go straight into its file and back: mapped)
    const int nccl = gpu && rl_policy_wants_nccl(r);
    double train = r->lora.enabled ? lora : base;
    // LoRA on a GPU: the frozen base's copy given back once the device holds it (a reward
    // model's score head keeps it: its final save merges the adapter)
    const int rm = (r->algorithm.def->uses & RL_RECIPE_USES_SCORE_HEAD) != 0;
    const double hbase = gpu && r->lora.enabled && !rm ? 0 : base;
    double per = nccl              ? hbase + (r->lora.enabled ? 2 * lora : 0)
                 : gpu             ? hbase + (r->lora.enabled ? lora : 0) + train + 2 * train / fsdp
                 : r->lora.enabled ? base / fsdp + lora + 3 * lora / fsdp
                                   : base / fsdp * 4;
    // with NCCL and fsdp > 1 the frozen layers are sharded over each row (ZeRO-3, docs/gpu.md)
    const int ref_in =
        r->roles.reference == RL_RECIPE_REF_ACTOR &&
        (r->algorithm.beta > 0 || (r->algorithm.def->uses & RL_RECIPE_USES_REF_SUMS));
    const char *holds = !nccl || fsdp == 1 ? "each rank's GPU holds the whole model"
                        : r->lora.enabled
                            ? "each rank's GPU holds 1/fsdp of the frozen base's layers (ZeRO-3: "
                              "all-gathered a layer at a time within its row with NCCL) and the "
                              "rest of the model whole"
                        : ref_in ? "each rank's GPU holds its part of the fp32 masters (ZeRO-3: "
                                   "the layers all-gathered a layer at a time over the mesh with "
                                   "NCCL), the embedding's and head's bf16 copies whole, and "
                                   "1/fsdp of a reference's layers"
                                 : "each rank's GPU holds its part of the fp32 masters (ZeRO-3: "
                                   "the layers all-gathered a layer at a time over the mesh with "
                                   "NCCL) and the embedding's and head's bf16 copies whole";
    rl_log_info("mesh dp %d x fsdp %d = %d ranks %s; data split over all ranks (data_rank = "
                "rank), %s%s",
                dp, fsdp, n, grid, gpu ? holds : "",
                nccl  ? "; gradients summed between the GPUs with NCCL, AdamW on the devices, its "
                        "state split over all ranks (mesh.collectives auto: through host memory "
                        "where NCCL does not load; logs/actor-0.log says which)"
                : gpu ? "; gradients (through host memory) and optimizer state sharded over each "
                        "row"
                      : "parameters, gradients and optimizer state sharded over each row");
    rl_log_info("  rank  dp fsdp  roles                 host             process         threads"
                "  device   model state%s",
                gpu ? " (host)" : "");
    char roles[64];
    snprintf(roles, sizeof roles, "actor%s%s", s->run.critic_in_actor ? ", critic" : "",
             ref_in ? ", reference" : "");
    // the actor's ranks, then a reference's or critic's group of its own on the same shape (a
    // frozen reference holds only its parameters' shard; a critic what an actor holds)
    const rl_run_group_t *grp[3] = {&s->run.actor, &s->run.reference, &s->run.critic};
    const char *label[3] = {roles, "reference", "critic"};
    const char *const dev_role[3] = {"actor", "reference", "critic"}; // rl_policy_role_device's
    // a reference on a GPU gives its host copy back once the device holds it
    const double bytes[3] = {per, gpu ? 0 : base / fsdp, per};
    for (int g = 0; g < 3; g++) {
        int own = grp[g]->n == n && !(g == 2 && s->run.critic_in_actor);
        for (int k = 0; own && k < n; k++) {
            char proc[64];
            pid_t pid = rl_group_pid(s->run.g, grp[g]->names[k]);
            const char *at = rl_group_host(s->run.g, grp[g]->names[k]); // a rank across hosts
            snprintf(proc, sizeof proc, "%s pid %d", grp[g]->names[k], (int)pid);
            rl_device_t d = {0, 0};
            (void)rl_policy_role_device(r, dev_role[g], k, &d, err, sizeof err); // checked
            // full tuning with NCCL and AdamW on the GPUs: ranks other than 0 give their host
            // copy back (rank 0 writes the checkpoints and sends the weights)
            const int gave =
                g == 0 && k > 0 && nccl && !r->lora.enabled && !rm && !r->train.optimizer_offload;
            rl_log_info("  %4d  %2d %4d  %-20s  %-15.15s  %-15s %7d  %-7s  %.1f MiB%s", k, k / fsdp,
                        k % fsdp, label[g], at ? at : host, proc, threads,
                        rl_device_name(&d, dn, sizeof dn), (gave ? 0 : bytes[g]) / 1048576.0,
                        g == 0 && s->run.critic_in_actor ? " (+ the critic)" : "");
        }
    }
    int ref1 = s->run.reference.n == 1, critic1 = s->run.critic.n == 1 && !s->run.critic_in_actor;
    rl_log_info("  other workers (one process each, unsharded): %d sampler%s%s%s%s",
                s->run.samplers.n, s->run.samplers.n == 1 ? "" : "s", ref1 ? ", reference" : "",
                s->run.reward.n ? ", reward" : "", critic1 ? ", critic" : "");
}

static int s_setup_workers(s_ctl_t *s, char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    const rl_recipe_t *r = run->r;
    rl_algo_roles_t ro = {0};
    s->algo->roles(r, &ro);
    int ns = ro.samplers, nrw = ro.reward, nref = ro.reference;
    int nremote = ro.sampling ? r->roles.remote_samplers.n : 0;
    int ncr = ro.critic == RL_ALGO_CRITIC_WORKER;
    if (ns + nremote > RL_RUN_MAX_RANKS) {
        return rl_errf(err, err_len, RL_EINVAL, "more than %d samplers", RL_RUN_MAX_RANKS);
    }
    const int ranks = r->mesh.dp * r->mesh.fsdp; // the actor's: its mesh
    // a reference or critic of its own: one process, or a group on the mesh's shape
    const int ref_ranks = r->roles.reference == RL_RECIPE_REF_MESH ? ranks : 1;
    const int critic_ranks = r->roles.critic == RL_RECIPE_REF_MESH ? ranks : 1;
    s_group(&run->actor, "actor", ranks);
    s_group(&run->reference, "reference", nref * ref_ranks);
    s_group(&run->reward, "reward", nrw);
    s_group(&run->samplers, "sampler", ns + nremote); // the remote ones after the local ones
    s_group(&run->critic, "critic", ncr * critic_ranks);
    if (ro.critic == RL_ALGO_CRITIC_ACTOR) {
        run->critic = run->actor; // the actor's process holds it: requests name part "critic"
        run->critic_in_actor = 1;
    }
    char logs[4200];
    snprintf(logs, sizeof(logs), "%s/logs", s->o->run_dir);
    int rc = rl_group_new(logs, r->roles.heartbeat, s->max_frame, &run->g, err, err_len);
    if (rc) {
        return rc;
    }
    rl_group_set_cancel(run->g, s_cancel, s);
    int at = r->roles.actor_threads ? r->roles.actor_threads : r->train.threads;
    int st = r->roles.sampler_threads ? r->roles.sampler_threads : r->train.threads;
    // every worker: its group, its threads
    const rl_run_group_t *groups[5] = {&run->actor, &run->reference, &run->reward,
                                       &run->samplers, ncr ? &run->critic : &run->reference};
    const int threads[5] = {at, at, 1, st, at};
    const int n_groups = ncr ? 5 : 4;
    for (int k = 0; k < n_groups; k++) {
        int local = groups[k] == &run->samplers ? ns : groups[k]->n;
        if (groups[k] != &run->samplers && groups[k]->n > 1) { // a mesh: its launcher starts
            rc = rc ? rc : s_spawn_mesh(s, groups[k]->role, threads[k], err, err_len); // ranks
            continue;
        }
        for (int i = 0; !rc && i < local; i++) {
            rc = rl_group_spawn(run->g, groups[k]->role, i, threads[k], s_reaps(groups[k]->role),
                                err, err_len);
        }
    }
    if (!rc && nremote > 0) {
        rc = s_connect_remote(s, ns, nremote, err, err_len);
    }
    double t0 = rl_clock_now();
    if (rc || (rc = rl_group_wait_ready(run->g, r->roles.request_timeout, err, err_len)) ||
        (rc = s_send_model(s, err, err_len))) {
        return rc;
    }
    // configure: the resolved recipe and each one's threads, over the protocol; each loads what
    // its role needs (the model, the rewards) and answers
    char *yaml = NULL;
    if (rl_recipe_to_yaml(r, &yaml) != 0) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_msg_t *reqs[RL_RUN_MAX_RANKS + 4] = {0}, *reps[RL_RUN_MAX_RANKS + 4] = {0};
    const char *peers[RL_RUN_MAX_RANKS + 4];
    int n = 0;
    for (int k = 0; !rc && k < n_groups; k++) {
        for (int i = 0; !rc && i < groups[k]->n; i++) {
            rl_proto_configure_t q = {yaml, 0, threads[k]};
            peers[n] = groups[k]->names[i];
            rc = rl_proto_configure_encode(&q, rl_run_id(run), &reqs[n++], err, err_len);
        }
    }
    free(yaml);
    if (!rc) {
        rc = rl_group_call(run->g, n, peers, reqs, reps, r->roles.request_timeout, NULL, err,
                           err_len);
    } else {
        for (int i = 0; i < n; i++) {
            rl_msg_free(&reqs[i]);
        }
    }
    for (int i = 0; !rc && i < n; i++) {
        rl_msg_free(&reps[i]);
    }
    if (rc) {
        return rc;
    }
    char ta[32], ts[32], more[160] = "";
    snprintf(ta, sizeof(ta), at > 1 ? "%d threads" : at == 1 ? "1 thread" : "all cores", at);
    snprintf(ts, sizeof(ts), st > 1 ? "%d threads" : st == 1 ? "1 thread" : "all cores", st);
    if (ns > 0) {
        snprintf(more, sizeof more, ", %d sampler%s (%s each)", ns, ns == 1 ? "" : "s", ts);
    }
    if (nremote > 0) {
        size_t l = strlen(more);
        snprintf(more + l, sizeof more - l, ", %d remote sampler%s", nremote,
                 nremote == 1 ? "" : "s");
    }
    rl_log_info("workers ready in %.1f s: actor (%s%s)%s%s%s%s", rl_clock_now() - t0, ta,
                run->critic_in_actor ? ", with the critic" : "", nref ? ", reference" : "",
                ncr ? ", critic" : "", more, nrw ? ", reward" : "");
    if (ranks > 1) {
        s_print_placement(s, at);
    }
    return 0;
}

// The weights version run->version to every sampler, from the actor (export_weights).
static int s_sync_from_actor(s_ctl_t *s, char *err, size_t err_len) {
    return rl_run_sync_actor(&s->run, err, err_len);
}

// ---- checkpoints, resume, final/ ----------------------------------------------------------------

// save or load (q: rl_proto_save_t) or save_final (rl_proto_save_final_t) to every rank of grp:
// the ranks of a mesh all take part (their gathers), rank 0 writes. *rep: rank 0's reply.
static int s_save_all(rl_run_t *run, const rl_run_group_t *grp, rl_proto_verb_t verb, const void *q,
                      rl_msg_t **rep, char *err, size_t err_len) {
    rl_msg_t *reqs[RL_RUN_MAX_RANKS] = {0};
    int rc = 0;
    for (int i = 0; !rc && i < grp->n; i++) {
        uint64_t id = rl_run_id(run);
        rc = verb == RL_PROTO_SAVE   ? rl_proto_save_encode(q, id, &reqs[i], err, err_len)
             : verb == RL_PROTO_LOAD ? rl_proto_load_encode(q, id, &reqs[i], err, err_len)
                                     : rl_proto_save_final_encode(q, id, &reqs[i], err, err_len);
    }
    if (rc) {
        for (int i = 0; i < grp->n; i++) {
            rl_msg_free(&reqs[i]);
        }
        return rc;
    }
    return rl_run_call_all(run, grp, reqs, rep, run->r->roles.request_timeout, err, err_len);
}

// One save / load (verb) of the critic into or from <dir>/critic: its own worker, or the actor
// (part "critic"). *x gets the save / load reply. Returns 0 or an error naming the worker.
static int s_critic_call(rl_run_t *run, int load, const char *dir, int64_t train_step,
                         rl_proto_save_reply_t *x, char *err, size_t err_len) {
    char sub[4300];
    snprintf(sub, sizeof sub, "%s/critic", dir);
    rl_proto_save_t q = {sub, train_step, "critic"};
    rl_msg_t *rep = NULL;
    int rc =
        s_save_all(run, &run->critic, load ? RL_PROTO_LOAD : RL_PROTO_SAVE, &q, &rep, err, err_len);
    if (rc) {
        return rc;
    }
    char why[256] = "";
    rc = rl_proto_save_reply_decode(rep, x, why, sizeof why);
    rl_msg_free(&rep);
    return rc ? rl_errf(err, err_len, rc, "worker %s: %s", run->critic.names[0], why) : 0;
}

// Writes checkpoints/step-<step> by the commit protocol of rl_checkpoint.h: the actor saves its
// weights and optimizer into step-<N>.tmp/ (full tuning: with the tokenizer files, a usable HF
// folder), the controller adds state.json, syncs the tree, writes DONE and renames it.
static int s_checkpoint(s_ctl_t *s, char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    const rl_recipe_t *r = run->r;
    double t0 = rl_clock_now();
    char tmp[4200], dir[4200], model[4300];
    int rc = rl_checkpoint_prepare(s->o->run_dir, run->step, tmp, sizeof(tmp), err, err_len);
    if (rc) {
        return rc;
    }
    rl_proto_save_t q = {tmp, 0, NULL};
    rl_msg_t *rep = NULL;
    if ((rc = s_save_all(run, &run->actor, RL_PROTO_SAVE, &q, &rep, err, err_len)) != 0) {
        return rc;
    }
    rl_proto_save_reply_t x = {0};
    char why[256];
    rc = rl_proto_save_reply_decode(rep, &x, why, sizeof why);
    rl_msg_free(&rep);
    if (rc) {
        return rl_errf(err, err_len, rc, "worker %s: %s", run->actor.names[0], why);
    }
    snprintf(model, sizeof model, "%s/model", tmp);
    if (!r->lora.enabled &&
        (rc = rl_checkpoint_hf_extras(model, r->model.tokenizer, r->model.path, err,
                                      err_len)) != 0) {
        return rc;
    }
    rl_proto_save_reply_t cx = {0};
    if (run->critic.n > 0 && (rc = s_critic_call(run, 0, tmp, 0, &cx, err, err_len))) {
        return rc;
    }
    rl_data_pos_t pos = rl_data_sampler_pos(run->order);
    rl_ckpt_state_t st;
    memset(&st, 0, sizeof(st));
    st.has_critic = run->critic.n > 0;
    st.critic_train_step = cx.model_train_step;
    if (s->algo->save_state) {
        s->algo->save_state(s->state, &st);
    }
    st.step = run->step;
    st.policy_version = run->version;
    st.data_epoch = pos.epoch;
    st.data_index = pos.index;
    st.rng = run->rng;
    snprintf(st.tune, sizeof(st.tune), "%s", r->lora.enabled ? "lora" : "full");
    run->n_trainable = x.n_trainable;
    st.n_trainable = x.n_trainable;
    st.num_tokens = run->num_tokens;
    st.model_train_step = x.model_train_step;
    if ((rc = rl_checkpoint_commit(tmp, &st, NULL, dir, sizeof dir, err, err_len)) ||
        (rc = rl_checkpoint_prune(s->o->run_dir, r->train.keep_checkpoints, err, err_len))) {
        return rc;
    }
    s->last_ckpt = run->step;
    s->t_ckpt = rl_clock_now() - t0;
    rl_log_info("checkpoint: %s", dir);
    return 0;
}

// Restores the run from checkpoint folder `dir`: every file checked against the manifest
// (rl_checkpoint_verify; a checkpoint of an rlctl before manifests is taken with a warning),
// state.json (its own rules, then the recipe's), the data position, the actor's weights and
// optimizer (the workers refuse NaN or inf weights). Returns 0, or an error that leaves the
// run's state untouched; *mismatch is set when the checkpoint does not fit the recipe (another
// tuning, a step past train.steps, a data position outside the dataset), which an older
// checkpoint would not fix either.
static int s_load_checkpoint(s_ctl_t *s, const char *dir, int *mismatch, char *err,
                             size_t err_len) {
    rl_run_t *run = &s->run;
    *mismatch = 0;
    rl_ckpt_state_t st;
    int legacy = 0;
    int rc = rl_checkpoint_verify(dir, &legacy, err, err_len);
    if (rc || (rc = rl_checkpoint_read_state(dir, &st, err, err_len)) != 0) {
        return rc;
    }
    if (legacy) {
        rl_log_warn("%s has no manifest.json (an older rlctl wrote it): its files cannot be "
                    "checked against checksums; loading it with the other checks only "
                    "(optimizer.bin's own checksum, finite weights, state.json's rules)", dir);
    }
    const char *tune = run->r->lora.enabled ? "lora" : "full";
    if (strcmp(st.tune, tune) != 0) {
        *mismatch = 1;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: the checkpoint is of %s tuning, the recipe asks for %s", dir, st.tune,
                       tune);
    }
    if (st.step > run->r->train.steps) { // raising train.steps continues a run; lowering it:
        *mismatch = 1;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: the checkpoint is of step %lld, past train.steps %d: raise "
                       "train.steps to continue it, or --resume a checkpoint of step %d or "
                       "earlier (that starts a new branch)",
                       dir, (long long)st.step, run->r->train.steps, run->r->train.steps);
    }
    rl_data_pos_t pos = {st.data_epoch, st.data_index}, before = rl_data_sampler_pos(run->order);
    if (rl_data_sampler_seek(run->order, pos) != 0) {
        *mismatch = 1;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: data position (epoch %lld, index %lld) is outside data.train "
                       "(%s%s): was the dataset changed?",
                       dir, (long long)pos.epoch, (long long)pos.index, run->r->data.train.items[0],
                       run->r->data.train.n > 1 ? ", ..." : "");
    }
    rl_proto_save_t q = {dir, st.model_train_step, NULL};
    rl_msg_t *rep = NULL;
    if ((rc = s_save_all(run, &run->actor, RL_PROTO_LOAD, &q, &rep, err, err_len)) != 0) {
        rl_data_sampler_seek(run->order, before);
        return rc;
    }
    rl_proto_save_reply_t x = {0};
    char why[256] = "";
    rc = rl_proto_save_reply_decode(rep, &x, why, sizeof why);
    rl_msg_free(&rep);
    if (rc) {
        rl_data_sampler_seek(run->order, before);
        return rl_errf(err, err_len, rc, "worker %s: %s", run->actor.names[0], why);
    }
    if (x.n_trainable != st.n_trainable) { // the weights loaded, but state.json disagrees
        rl_data_sampler_seek(run->order, before);
        return rl_errf(err, err_len, RL_EPROTO,
                       "%s/state.json: 'n_trainable' is %lld, the loaded weights have %lld", dir,
                       (long long)st.n_trainable, (long long)x.n_trainable);
    }
    if (run->critic.n > 0) {
        rl_proto_save_reply_t cx;
        if (!st.has_critic) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: the checkpoint holds no critic", dir);
            *mismatch = 1;
        } else {
            rc = s_critic_call(run, 1, dir, st.critic_train_step, &cx, err, err_len);
        }
        if (rc) {
            rl_data_sampler_seek(run->order, before);
            return rc;
        }
    }
    if (s->algo->load_state) {
        s->algo->load_state(s->state, &st);
    }
    run->step = st.step;
    run->version = st.policy_version;
    run->rng = st.rng;
    run->num_tokens = st.num_tokens;
    run->n_trainable = st.n_trainable;
    s->last_ckpt = st.step;
    return 0;
}

// --resume: the checkpoint named (an error when it does not load), or the newest complete one
// that loads (the ones skipped, and why, are logged). Resuming from a checkpoint older than the
// newest starts a new branch: the newer checkpoints are moved aside (rl_checkpoint_abandon_after).
static int s_resume(s_ctl_t *s, char *err, size_t err_len) {
    const char *run_dir = s->o->run_dir;
    int rc = 0, mismatch = 0;
    if (s->o->resume_from) {
        if ((rc = s_load_checkpoint(s, s->o->resume_from, &mismatch, err, err_len)) != 0) {
            return rc;
        }
        rl_log_info("resuming from %s at step %lld", s->o->resume_from, (long long)s->run.step);
    } else {
        int64_t *steps = NULL;
        size_t n = 0;
        if ((rc = rl_checkpoint_list(run_dir, &steps, &n)) != 0) {
            return rl_errf(err, err_len, rc, "%s/checkpoints: %s", run_dir, strerror(rc));
        }
        if (n == 0) {
            rl_log_warn("%s: no complete checkpoint; starting from step 0", run_dir);
            return 0;
        }
        size_t i = 0;
        char first[2200] = "";
        for (; i < n; i++) {
            char dir[4200], why[2048];
            snprintf(dir, sizeof dir, "%s/checkpoints/step-%lld", run_dir, (long long)steps[i]);
            if ((rc = s_load_checkpoint(s, dir, &mismatch, why, sizeof why)) == 0) {
                rl_log_info("resuming from %s at step %lld", dir, (long long)s->run.step);
                break;
            }
            if (mismatch) { // the recipe's fault, not the checkpoint's: an older one would not fit
                free(steps);
                return rl_errf(err, err_len, rc, "%s", why);
            }
            rl_log_warn("skipping checkpoints/step-%lld: %s", (long long)steps[i], why);
            if (!first[0]) {
                snprintf(first, sizeof(first), "step-%lld: %s", (long long)steps[i], why);
            }
        }
        free(steps);
        if (i == n) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s/checkpoints: none of the %zu complete checkpoints loads (the "
                           "newest, %.1000s); start over with --force",
                           run_dir, n, first);
        }
    }
    // the names of the checkpoints the new branch leaves behind, for the log
    char names[512] = "", where[4200];
    int64_t *steps = NULL;
    size_t n = 0;
    if (rl_checkpoint_list(run_dir, &steps, &n) == 0) {
        for (size_t i = n; i-- > 0;) {
            size_t l = strlen(names);
            if (steps[i] > s->run.step && l + 32 < sizeof(names)) {
                snprintf(names + l, sizeof(names) - l, "%sstep-%lld", l ? ", " : "",
                         (long long)steps[i]);
            }
        }
    }
    free(steps);
    int moved = 0;
    if ((rc = rl_checkpoint_abandon_after(run_dir, s->run.step, where, sizeof where, &moved,
                                          err, err_len)) != 0) {
        return rc;
    }
    if (moved > 0) {
        rl_log_warn("resuming from step %lld starts a new branch: moved %d newer checkpoint%s "
                    "(%s) to %s (their metrics lines and trajectories after step %lld are "
                    "dropped)",
                    (long long)s->run.step, moved, moved == 1 ? "" : "s", names, where,
                    (long long)s->run.step);
    }
    return 0;
}

// On resume: eval/accuracy(_greedy) of the step-0 line of metrics.jsonl, if there is one.
static void s_first_eval(s_ctl_t *s, const char *metrics_path) {
    FILE *f = fopen(metrics_path, "rb");
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *a = json_object_get(o, "eval/accuracy");
        json_t *g = json_object_get(o, "eval/accuracy_greedy");
        int first = json_integer_value(json_object_get(o, "step")) == 0 && a && g;
        if (first) {
            s->eval_first[0] = json_number_value(a);
            s->eval_first[1] = json_number_value(g);
        }
        json_decref(o);
        if (first) {
            break;
        }
    }
    free(line);
    if (f) {
        fclose(f);
    }
}

// Writes final/: the actor saves into final.tmp/, which is published as final/ in one rename
// (rl_checkpoint_publish_dir), so final/ is either the previous one or this one, whole. Full
// tuning: in model.dtype (auto: the input model's torch_dtype), with the tokenizer files. A
// reward model (algorithm rm) and PPO's critic (final/critic/) are HF sequence classifiers (LoRA
// merged) with the tokenizer files and the tokenizer's pad id, usable as they are by
// `rewards: - model:`, critic.init and transformers.
static int s_final(s_ctl_t *s, char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    const rl_recipe_t *r = run->r;
    char path[4200], tmp[4200];
    snprintf(path, sizeof(path), "%s/final", s->o->run_dir);
    snprintf(tmp, sizeof(tmp), "%s/final.tmp", s->o->run_dir);
    int rc;
    struct stat st;
    if (lstat(tmp, &st) == 0 && !S_ISDIR(st.st_mode)) {
        return rl_errf(err, err_len, EEXIST,
                       "%s is in the way (not a folder rlctl wrote; move it away)", tmp);
    }
    if ((rc = rl_checkpoint_rmtree(tmp)) || (rc = rl_checkpoint_mkdirs(tmp))) {
        return rl_errf(err, err_len, rc, "%s: %s", tmp, strerror(rc));
    }
    if (rl_fault("final")) {
        return rl_errf(err, err_len, RL_EIO, "%s: cannot write (RLCTL_FAULT=final)", tmp);
    }
    int bf16 = r->model.dtype == RL_RECIPE_DTYPE_BFLOAT16;
    if (r->model.dtype == RL_RECIPE_DTYPE_AUTO) {
        rl_hf_config_t cfg;
        char msg[512];
        bf16 = rl_hf_config_load(r->model.path, &cfg, msg, sizeof(msg)) == 0 &&
               strcmp(cfg.torch_dtype, "bfloat16") == 0;
    }
    int rm = (r->algorithm.def->uses & RL_RECIPE_USES_SCORE_HEAD) != 0;
    int pad = rl_tokenizer_pad_id(run->tok);
    rl_proto_save_final_t q = {tmp, bf16, NULL, pad};
    rl_msg_t *rep = NULL;
    if ((rc = s_save_all(run, &run->actor, RL_PROTO_SAVE_FINAL, &q, &rep, err, err_len)) != 0) {
        return rc;
    }
    rl_msg_free(&rep);
    if ((!r->lora.enabled || rm) &&
        (rc = rl_checkpoint_hf_extras(tmp, r->model.tokenizer, r->model.path, err, err_len))) {
        return rc;
    }
    // the critic (PPO) in final/critic/: a sequence classifier as a reward model is
    if (run->critic.n > 0) {
        char sub[4300];
        snprintf(sub, sizeof sub, "%s/critic", tmp);
        rl_proto_save_final_t cq = {sub, bf16, "critic", pad};
        if ((rc = s_save_all(run, &run->critic, RL_PROTO_SAVE_FINAL, &cq, &rep, err, err_len)) ||
            (rc = rl_checkpoint_hf_extras(sub, r->model.tokenizer, r->model.path, err, err_len))) {
            rl_msg_free(&rep);
            return rc;
        }
        rl_msg_free(&rep);
    }
    if ((rc = rl_checkpoint_publish_dir(tmp, path, err, err_len)) != 0) {
        return rc;
    }
    rl_log_info("final %s: %s", rm ? "reward model" : r->lora.enabled ? "adapter" : "model", path);
    return 0;
}

// ---- stopping on a signal ---------------------------------------------------------------------
// SIGINT/SIGTERM set *o->interrupt (cli/cmd_run.c counts them). The run must be gone within
// roles.stop_grace seconds of the first one. s_cancel, polled by every wait of rl_group, decides
// when to stop waiting: at once during start-up and evaluations (nothing there is needed for a
// checkpoint) and on a second signal; during a step, as soon as the rest of the step (estimated
// from the last step's time) plus a checkpoint (the last one's time) plus S_STOP_MARGIN no longer
// fit in the grace left. The loop then writes a checkpoint of the last finished step when that
// alone fits, and stops.

// Seconds a checkpoint takes: the last one's, or (none yet) the weights and Adam's two moments
// written at 100 MB/s.
static double s_ckpt_estimate(const s_ctl_t *s) {
    return s->t_ckpt > 0 ? s->t_ckpt : 0.5 + 12.0 * (double)s->run.n_trainable / 100e6;
}

// Seconds of roles.stop_grace left (a large number before any signal).
static double s_grace_left(const s_ctl_t *s) {
    return s->t_signal > 0 ? s->run.r->roles.stop_grace - (rl_clock_now() - s->t_signal) : 1e30;
}

static int s_cancel(void *ctx) {
    s_ctl_t *s = ctx;
    int n = s->o->interrupt ? (int)*s->o->interrupt : 0;
    if (n == 0) {
        return 0;
    }
    double now = rl_clock_now();
    if (s->t_signal == 0) {
        s->t_signal = now;
    }
    if (n >= 2) {
        s->stop_now = 2;
    }
    if (s->stop_now || s->phase == S_PHASE_START || s->phase == S_PHASE_EVAL) {
        return 1;
    }
    double need = S_STOP_MARGIN + s_ckpt_estimate(s);
    if (s->phase == S_PHASE_STEP) {
        double rest = s->t_step_est > 0 ? 1.2 * s->t_step_est - (now - s->t_step_start) : 1e30;
        need += rest > 0 ? rest : 0;
    }
    if (need > s_grace_left(s)) {
        s->stop_now = 1;
        return 1;
    }
    return 0;
}

// After a wait was cancelled (RL_ECANCELED): a checkpoint of the last finished step when the
// actor holds it and it fits in the grace left, then the message. Returns
// RL_CONTROLLER_INTERRUPTED.
static int s_stop_cancelled(s_ctl_t *s, char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    char note[1024] = "";
    s_cancel(s); // notes the time of a signal that arrived during a wait no one polled
    double left = s_grace_left(s);
    int wrote = 0;
    if (s->stop_now != 2 && run->actor_consistent && run->step > s->last_ckpt &&
        run->step > 0 && s_ckpt_estimate(s) + S_STOP_MARGIN <= left) {
        rl_group_set_cancel(run->g, NULL, NULL);
        run->deadline = rl_clock_now() + left - S_STOP_MARGIN;
        char e2[1024];
        wrote = s_checkpoint(s, e2, sizeof e2) == 0;
        if (!wrote) {
            rl_log_warn("no checkpoint on stopping: %s", e2);
        }
    }
    if (wrote) {
        snprintf(note, sizeof note, "checkpoint of step %lld written", (long long)run->step);
    } else if (s->last_ckpt > 0) {
        snprintf(note, sizeof note,
                 "the newest complete checkpoint is of step %lld; rlctl run --resume redoes the "
                 "steps after it", (long long)s->last_ckpt);
    } else {
        snprintf(note, sizeof note, "no checkpoint: a new run starts from step 0");
    }
    char why[256], when[128];
    if (s->stop_now == 2) {
        snprintf(why, sizeof why, "stopped at once on a second signal");
    } else if (s->phase == S_PHASE_STEP) {
        snprintf(why, sizeof why, "stopped on a signal: the step and a checkpoint would not "
                 "finish within roles.stop_grace (%g s)", run->r->roles.stop_grace);
    } else {
        snprintf(why, sizeof why, "stopped on a signal");
    }
    if (s->phase == S_PHASE_START) {
        snprintf(when, sizeof when, "during start-up (the workers were still starting)");
    } else if (s->phase == S_PHASE_EVAL) {
        snprintf(when, sizeof when, "during the evaluation %s step %lld",
                 run->step > 0 ? "after" : "before", (long long)(run->step > 0 ? run->step : 1));
    } else {
        snprintf(when, sizeof when, "during step %lld", (long long)run->step + 1);
    }
    return rl_errf(err, err_len, RL_CONTROLLER_INTERRUPTED, "%s, %s; %s%s", why, when, note,
                   wrote ? "; continue with rlctl run --resume" : "");
}

// ---- the loop ---------------------------------------------------------------------------------

// Evaluates (the algorithm's), noting the first and last accuracies for the closing summary.
static int s_evaluate(s_ctl_t *s, char *note, size_t note_len, char *err, size_t err_len) {
    double acc = NAN, greedy = NAN;
    int rc = s->algo->evaluate(s->state, &s->run, &acc, &greedy, note, note_len, err, err_len);
    if (!rc && !isnan(acc)) {
        if (isnan(s->eval_first[0])) {
            s->eval_first[0] = acc;
            s->eval_first[1] = greedy;
        }
        s->eval_last[0] = acc;
        s->eval_last[1] = greedy;
    }
    return rc;
}

// The store of trajectories (an algorithm that stores them), opened for appending: on resume it is
// checked first, and a damaged one is refused with the way out (docs/trajectories.md, "A damaged
// store"). Returns 0 or an error.
static int s_open_store(s_ctl_t *s, char *err, size_t err_len) {
    const rl_controller_opts_t *o = s->o;
    char path[4200];
    snprintf(path, sizeof(path), "%s/trajectories.lmdb", o->run_dir);
    int rc = o->resume ? rl_traj_check(path, -1, o->interrupt, NULL, err, err_len) : 0;
    if (rc == ENOENT) {
        rc = 0; // no store yet
    } else if (rc == RL_EPROTO || rc == RL_ETIMEOUT) {
        size_t n = strlen(err);
        snprintf(err + n, err_len > n ? err_len - n : 0, "; nothing was written. `rlctl "
                 "traj salvage %s` copies its readable records into a new store (the old "
                 "one is kept), then resume again", o->run_dir);
    }
    if (!rc) {
        rc = rl_traj_open(path, 0, &s->run.traj, err, err_len);
    }
    return rc;
}

// Everything before the first step: the tokenizer, the algorithm's data and state, the data
// order, the store, the workers, the resume, the metrics and progress, the first weight sync,
// the evaluation before training. *last: the step the run stops after. Returns 0 or an error
// (the phase stays as it was: s_stop_cancelled says where a stop came).
static int s_start(s_ctl_t *s, int64_t *last, char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    const rl_recipe_t *r = run->r;
    const rl_controller_opts_t *o = s->o;
    char path[4200], msg[1024];
    size_t n_train = 0;
    double data_frame = 0;
    int rc = s_setup_tokenizer(run, err, err_len);
    if (!rc) {
        rc = s->algo->create(run, &s->state, &n_train, &data_frame, err, err_len);
    }
    if (!rc) {
        run->order = rl_data_sampler_new_count(n_train, (uint64_t)r->run.seed, r->data.shuffle);
        rc = run->order ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    if (!rc && s->algo->stores) {
        rc = s_open_store(s, err, err_len);
    }
    if (!rc) {
        rc = s_max_frame(s, data_frame, err, err_len);
    }
    if (!rc) {
        rc = s_setup_workers(s, err, err_len);
    }
    if (!rc && rl_recipe_has_env(r)) { // after the workers: an env program inherits none of them
        rc = rl_env_host_open(&r->env, &run->env, err, err_len);
    }
    if (!rc && o->resume) {
        rc = s_resume(s, err, err_len);
    }
    if (run->order) { // where a failure takes the data order back to (rl_run_t.trained)
        run->trained = rl_data_sampler_pos(run->order);
    }
    run->sched = rl_sched_from_recipe(r);
    if (!rc) {
        snprintf(path, sizeof(path), "%s/metrics.jsonl", o->run_dir);
        rc = rl_metrics_truncate_after(path, run->step, err, err_len);
    }
    if (!rc && run->traj &&
        (rl_traj_last_step(run->traj) > (uint64_t)run->step ||
         rl_traj_pending_step(run->traj) > (uint64_t)run->step)) {
        rc = rl_traj_truncate_after(run->traj, (uint64_t)run->step, err, err_len);
    }
    if (!rc && run->step > 0) {
        s_first_eval(s, path); // the "before" of the closing summary
    }
    if (!rc) {
        run->metrics = rl_metrics_new(o->run_dir, o->tensorboard, msg, sizeof(msg));
        if (!run->metrics) {
            rc = rl_errf(err, err_len, RL_EIO, "%s", msg);
        }
    }
    if (!rc) {
        s->progress = rl_progress_new(stderr, r->train.steps, r->train.log_every,
                                      RL_PROGRESS_AUTO);
        if (!s->progress) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    // weights version run->step to every sampler (the adapter only, with LoRA)
    if (!rc) {
        run->version = run->step;
        rc = s_sync_from_actor(s, err, err_len);
    }
    // evaluation: every train.eval_every steps, and with the algorithm's bookends before
    // training and after the last step
    if (!rc && s->do_eval && s->algo->bookends && run->step == 0) {
        char note[128] = "";
        s->phase = S_PHASE_EVAL;
        if ((rc = s_evaluate(s, note, sizeof(note), err, err_len)) == 0) {
            if (note[0]) {
                rl_log_info("before training: %s", note);
            }
            if ((rc = rl_metrics_write(run->metrics, 0, rl_clock_wall())) != 0) {
                rc = rl_errf(err, err_len, rc, "%s", rl_metrics_errmsg(run->metrics));
            }
        }
    }
    *last = r->train.steps;
    if (o->stop_at > 0 && o->stop_at < *last) {
        *last = o->stop_at;
    }
    if (!rc && o->interrupt && *o->interrupt) {
        // Ctrl-C during start-up or the first evaluation: nothing new to save
        rc = rl_errf(err, err_len, RL_CONTROLLER_INTERRUPTED,
                     "interrupted before step %lld; nothing was trained in this run%s",
                     (long long)run->step + 1, s->last_ckpt > 0 ? "; continue with rlctl run "
                                                                 "--resume" : "");
    }
    return rc;
}

// After the algorithm's step: the evaluation when it is due, the metrics line, progress, and
// the checkpoint, stop or --stop-at that follow. t0: when the step started; note: its progress
// note. *done = 1 when the run stops here without an error (--stop-at). Returns 0 or an error
// (RL_CONTROLLER_INTERRUPTED after a signal's checkpoint).
static int s_after_step(s_ctl_t *s, double t0, const char *note, int64_t last, int *done,
                        char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    const rl_recipe_t *r = run->r;
    const rl_controller_opts_t *o = s->o;
    int64_t total = r->train.steps, step = run->step;
    char enote[128] = "";
    s->phase = S_PHASE_IDLE;
    s->t_step_est = rl_clock_now() - t0;
    int log_now = step % r->train.log_every == 0 || step == last;
    int interrupted = o->interrupt && *o->interrupt;
    int rc = 0;
    if (!interrupted && s->do_eval &&
        ((r->train.eval_every > 0 && step % r->train.eval_every == 0) ||
         (s->algo->bookends && step == total))) {
        s->phase = S_PHASE_EVAL;
        rc = s_evaluate(s, enote, sizeof(enote), err, err_len);
        if (rc) {
            // the step's own line still goes out (a rescue checkpoint of this step follows:
            // without it a resume would leave a hole)
            rl_metrics_write(run->metrics, step, rl_clock_wall());
            return rc;
        }
        s->phase = S_PHASE_IDLE;
        log_now = 1;
    }
    rl_metrics_add(run->metrics, "timing/step_total", rl_clock_now() - t0);
    if (log_now && (rc = rl_metrics_write(run->metrics, step, rl_clock_wall())) != 0) {
        return rl_errf(err, err_len, rc, "%s", rl_metrics_errmsg(run->metrics));
    }
    if (!log_now) {
        rl_metrics_clear(run->metrics);
    }
    rl_progress_update(s->progress, step, "%s%s%s", note, enote[0] ? " | " : "", enote);
    int stop = interrupted && step < last;
    int save = (r->train.save_every > 0 && step % r->train.save_every == 0 && step < total) ||
               (step == last && last < total) || stop;
    if (save && s->algo->quiesce && (rc = s->algo->quiesce(s->state, run, err, err_len))) {
        return rc;
    }
    if (save && (rc = s_checkpoint(s, err, err_len))) {
        return rc;
    }
    if (stop) {
        rl_progress_finish(s->progress);
        return rl_errf(err, err_len, RL_CONTROLLER_INTERRUPTED,
                       "interrupted after step %lld; checkpoint written; continue with "
                       "rlctl run --resume", (long long)step);
    }
    if (step == last && last < total) {
        rl_progress_finish(s->progress);
        rl_log_info("stopped after step %lld (--stop-at); checkpoint written; continue "
                    "with rlctl run --resume", (long long)step);
        *done = 1;
    }
    return 0;
}

// Appends to err where the run can continue from: "(checkpoint of step N written; ...)" or
// "(the newest checkpoint is of step N; ...)".
static void s_note_resume(char *err, size_t err_len, const char *fmt, int64_t step) {
    size_t l = strlen(err);
    snprintf(err + l, err_len - l, fmt, (long long)step);
}

// The end of the run, whatever happened: a signal's stop explained, final/ and the summary when
// every step is done, or, after a failure, a resumable checkpoint of the last finished step when
// the actor still can (else the newest one named). Returns the run's result.
static int s_finish(s_ctl_t *s, int rc, char *err, size_t err_len) {
    rl_run_t *run = &s->run;
    int64_t total = run->r->train.steps;
    if (rc && run->order) {
        // the examples of a step that failed or stopped, and any taken ahead of it, are taken
        // again on resume: the checkpoint below keeps the position after the last trained on
        rl_data_sampler_seek(run->order, run->trained);
    }
    if (s->progress) {
        rl_progress_finish(s->progress);
    }
    if (rc == RL_ECANCELED) {
        rc = s_stop_cancelled(s, err, err_len);
    }
    if (!rc && run->step >= total) {
        char why[2048];
        if ((rc = s_final(s, why, sizeof why)) != 0) {
            rl_errf(err, err_len, rc, "final/ could not be written: %s", why);
        }
        if (!rc && !isnan(s->eval_first[0])) {
            fprintf(stderr,
                    "eval/accuracy         %5.1f%% -> %5.1f%% (%+.1f points)\n"
                    "eval/accuracy_greedy  %5.1f%% -> %5.1f%% (%+.1f points)\n",
                    100 * s->eval_first[0], 100 * s->eval_last[0],
                    100 * (s->eval_last[0] - s->eval_first[0]), 100 * s->eval_first[1],
                    100 * s->eval_last[1], 100 * (s->eval_last[1] - s->eval_first[1]));
        }
        if (!rc) {
            rl_log_info("%lld steps in %.0f s", (long long)total, rl_clock_now() - s->t_start);
        }
    }
    // a failure (final/ included) leaves the rescue checkpoint below
    if (rc && rc != RL_CONTROLLER_INTERRUPTED && run->g && run->actor_consistent &&
        run->step > s->last_ckpt && run->step > 0) {
        // leave a resumable checkpoint of the last finished step when the actor still can
        char e2[1024];
        if (s_checkpoint(s, e2, sizeof(e2)) == 0) {
            s_note_resume(err, err_len,
                          "\n(checkpoint of step %lld written; continue with rlctl run --resume)",
                          run->step);
        } else {
            rl_log_warn("no checkpoint after the failure: %s", e2);
            if (s->last_ckpt > 0) {
                s_note_resume(err, err_len,
                              "\n(the newest checkpoint is of step %lld; continue with rlctl "
                              "run --resume)", s->last_ckpt);
            }
        }
    } else if (rc && rc != RL_CONTROLLER_INTERRUPTED && s->last_ckpt > 0) {
        s_note_resume(err, err_len,
                      "\n(the newest checkpoint is of step %lld; continue with rlctl run "
                      "--resume)", s->last_ckpt);
    }
    return rc;
}

// Stops the workers (at once when a signal came during start-up or a second signal came, else
// within what is left of roles.stop_grace) and frees the run.
static void s_teardown(s_ctl_t *s) {
    rl_run_t *run = &s->run;
    double grace = s_grace_left(s) - 0.5; // stopping: what is left of roles.stop_grace
    grace = grace < 5.0 ? (grace > 0.1 ? grace : 0.1) : 5.0;
    // stopped on a signal during start-up: workers still loading cannot answer shutdown, and
    // nothing of theirs is worth waiting for: killed at once
    int at_once = s->stop_now == 2 || (s->t_signal > 0 && s->phase == S_PHASE_START);
    rl_group_destroy(&run->g, at_once ? 0.0 : grace);
    rl_env_host_close(&run->env);
    rl_progress_destroy(&s->progress);
    rl_metrics_destroy(&run->metrics);
    rl_traj_close(&run->traj);
    if (s->algo && s->state) {
        s->algo->destroy(&s->state);
    }
    rl_data_sampler_destroy(&run->order);
    rl_tokenizer_destroy(&run->tok);
}

int rl_controller_run(const rl_algo_t *algo, const rl_recipe_t *r, const rl_controller_opts_t *o,
                      char *err, size_t err_len) {
    s_ctl_t s;
    memset(&s, 0, sizeof(s));
    rl_run_t *run = &s.run;
    run->r = r;
    run->run_dir = o->run_dir;
    run->actor_consistent = 1;
    s.o = o;
    s.algo = algo;
    s.do_eval = algo->evaluate && (r->data.eval.n || r->data.eval_pairs.n);
    s.eval_first[0] = s.eval_first[1] = NAN;
    s.eval_last[0] = s.eval_last[1] = NAN;
    s.last_ckpt = -1;
    s.t_start = rl_clock_now();
    rl_rng_seed(&run->rng, (uint64_t)r->run.seed);
    int64_t last = 0;
    int rc = s_start(&s, &last, err, err_len);
    if (!rc) { // a failure keeps the phase: s_stop_cancelled says where the stop came
        s.phase = S_PHASE_IDLE;
    }
    int done = 0;
    while (!rc && !done && run->step < last) {
        double t0 = rl_clock_now();
        char note[256] = "";
        int advanced = 0;
        s.phase = S_PHASE_STEP;
        s.t_step_start = t0;
        rc = algo->step(s.state, run, &advanced, note, sizeof(note), err, err_len);
        if (advanced && !s.trained) { // the folder now holds what a retry must not remove
            rl_rundir_mark_started(o->run_dir);
            s.trained = 1;
        }
        if (rc) { // s.phase stays: s_stop_cancelled says where the stop came
            // the step's line still goes out when the update was taken: no hole on resume
            if (advanced && rl_metrics_write(run->metrics, run->step, rl_clock_wall()) != 0) {
                rl_log_warn("metrics of step %lld: %s", (long long)run->step,
                            rl_metrics_errmsg(run->metrics));
            }
            break;
        }
        rc = s_after_step(&s, t0, note, last, &done, err, err_len);
    }
    rc = s_finish(&s, rc, err, err_len);
    s_teardown(&s);
    return rc;
}

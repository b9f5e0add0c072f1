// test_gpu_run — whole runs with model.device: cuda (issue 31's first placement): every role
// that holds the model (the actor and the reference in it, a critic, the samplers) on cuda:0,
// colocated, each process with its own context. Label gpu (skipped without one); its .emu twin
// runs the same on the module emulated on the CPU (tests/cuemu), which checks the roles' host
// logic (pull, optimizer, push, the sampler's draws and weight sync), not a GPU. The cookbook's
// arith models, a few steps each, small evaluations:
//   1. SFT (3 steps) and DPO (2 steps): the same data as on the CPU, so the losses of every step
//      within 1% of the CPU run's (bf16 matmuls; measured 2e-4 and 1.5e-3 on the emulation);
//   2. PPO with the critic in the actor (its value head on the host, the trunk on the device):
//      finite metrics, a final adapter and critic; the first step's losses within 5% of the CPU
//      run's when its rollout drew the CPU's tokens (plain temperature sampling walks the
//      vocabulary in id order on both, so a bf16 rounding rarely moves a draw; said when it did);
//   3. GRPO: exact resume on the device (--stop-at 1, --resume == one go: metrics, the adapter,
//      the trajectories), and the adapter it trained evaluates on the CPU (rlctl eval);
//      SFT (full tuning) and GRPO (LoRA) with AdamW on the device (the default) end with the
//      weights train.optimizer_offload=true (AdamW on the host) gives, to the bit;
// (A mesh on the GPU: tests/test_mesh_gpu.c.)
//   4. the device out of memory in a training forward (RLCTL_FAULT=cuda_oom, the path of a
//      failed allocation) stops the run naming the worker, the phase, the bytes and the newest
//      checkpoint; --resume then finishes it;
//   5. roles.weight_sync: through CUDA IPC (auto, here) == through host memory, to the bit (GRPO
//      LoRA, SFT full with evaluations); a failed IPC load falls back to host memory (auto) or
//      stops the run (ipc); validate refuses ipc for a sampler on the CPU;
//   6. (the emulation only) rlctl run makes no CUDA context: its device checks run in
//      rlctl-probe children (CUEMU_CONTEXTS says who makes one);
//   7. (the emulation only: two emulated devices) roles.devices puts the actor and a sampler on
//      one device and the other sampler on the other: the run logs that placement and completes,
//      both samplers copying through IPC (peers); without peer access (CUEMU_PEER=0) the one on
//      the other device takes host memory, and the run ends as with peers.
// On a GPU machine (scripts/gpu_check.sh) the build is not where it was made: RLCTL_BIN names the
// rlctl to run and RL_SOURCE_DIR the checkout (its cookbook); by default, this build's.
#include "rl_test.h"
#include "rl_test_cuda.h"
#include "rl_test_run.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_tmp[64];
static char s_cmd[8192];
static char s_cook[1024]; // the cookbook folder
static const char *s_bin; // the rlctl binary

// Runs `<s_bin> <args>`, output in <tmp>/out.txt. Returns the exit status.
static int s_rlctl(const char *args) {
    return rl_test_rlctl_at(s_bin, s_tmp, args);
}
#define S_SMALL                                                                                    \
    "optim.warmup_steps=0 train.eval_every=0 train.eval_samples=8 train.save_every=0 "             \
    "train.log_every=1"

static int s_run(const char *recipe, const char *run, const char *dev, const char *more) {
    snprintf(s_cmd, sizeof s_cmd, "run %s/%s run.dir=%s/%s model.device=%s " S_SMALL " %s", s_cook,
             recipe, s_tmp, run, dev, more);
    int rc = s_rlctl(s_cmd);
    if (rc != 0) {
        char *o = rl_test_out(s_tmp);
        fprintf(stderr, "rlctl %s -> %d\n%s\n", s_cmd, rc, o ? o : "");
        free(o);
    }
    return rc;
}

// The value of `key` at each logged step 1..n of a run's metrics.jsonl (NAN where absent).
static void s_series(const char *run, const char *key, double *out, int n) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s/metrics.jsonl", s_tmp, run);
    for (int i = 0; i < n; i++) {
        out[i] = NAN;
    }
    char *txt = rl_test_read_file(p, NULL);
    for (char *l = txt ? strtok(txt, "\n") : NULL; l; l = strtok(NULL, "\n")) {
        json_t *o = json_loads(l, 0, NULL);
        int step = (int)json_integer_value(json_object_get(o, "step"));
        json_t *v = json_object_get(o, key);
        if (step >= 1 && step <= n && json_is_number(v)) {
            out[step - 1] = json_number_value(v);
        }
        json_decref(o);
    }
    free(txt);
}

// |gpu - cpu| <= tol |cpu| at each step, printed.
static void s_close(const char *what, const char *key, const double *cpu, const double *gpu, int n,
                    double tol) {
    for (int i = 0; i < n; i++) {
        double rel = fabs(gpu[i] - cpu[i]) / fabs(cpu[i]);
        printf("  %-5s step %d %-12s cpu %.6f gpu %.6f (%.2g relative; tolerance %g)\n", what,
               i + 1, key, cpu[i], gpu[i], rel, tol);
        CHECK_MSG(isfinite(gpu[i]) && rel <= tol, "%s step %d: %s %g on the GPU, %g on the CPU",
                  what, i + 1, key, gpu[i], cpu[i]);
    }
}

// The default (AdamW on the device) against train.optimizer_offload=true (AdamW on the host) for
// run `dev` made with `more`: the same final weights to the bit (the device's AdamW is rl_optim's
// operations in its order) and the same metrics, the gradient norm (a double sum in another
// order) within 1e-12.
static void s_offload_same(const char *recipe, const char *dev, const char *more,
                           const char *file) {
    char run[96], args[1024];
    snprintf(run, sizeof run, "%s_offload", dev);
    snprintf(args, sizeof args, "%s train.optimizer_offload=true", more);
    CHECK_INT(s_run(recipe, run, "cuda", args), 0);
    char fa[256], fb[256];
    snprintf(fa, sizeof fa, "%s/final/%s", dev, file);
    snprintf(fb, sizeof fb, "%s/final/%s", run, file);
    CHECK_MSG(rl_test_files_equal(s_tmp, fa, fb), "%s: the device's AdamW and the host's differ",
              fb);
    rl_test_metrics_close(s_tmp, dev, run, 1e-12, 1e-12, 2);
}

static void s_test_sft_dpo(void) {
    double c[3], g[3];
    CHECK_INT(s_run("sft_arith.yaml", "sft_cpu", "cpu", "train.steps=3"), 0);
    CHECK_INT(s_run("sft_arith.yaml", "sft_gpu", "cuda", "train.steps=3"), 0);
    s_series("sft_cpu", "loss", c, 3);
    s_series("sft_gpu", "loss", g, 3);
    s_close("SFT", "loss", c, g, 3, 0.01);
    s_offload_same("sft_arith.yaml", "sft_gpu", "train.steps=3", "model.safetensors");
    // DPO with 8 held-out pairs (the cookbook's 384 would be most of the emulated run)
    char pairs[600];
    snprintf(pairs, sizeof pairs, "%s/pairs.jsonl", s_tmp);
    char sh[2400];
    snprintf(sh, sizeof sh, "head -n 8 '%s/data/arith/pairs_eval.jsonl' > '%s'", s_cook, pairs);
    CHECK_INT(system(sh), 0);
    char more[800];
    snprintf(more, sizeof more, "train.steps=2 data.eval_pairs=%s", pairs);
    CHECK_INT(s_run("dpo_lora.yaml", "dpo_cpu", "cpu", more), 0);
    CHECK_INT(s_run("dpo_lora.yaml", "dpo_gpu", "cuda", more), 0);
    s_series("dpo_cpu", "loss", c, 2);
    s_series("dpo_gpu", "loss", g, 2);
    s_close("DPO", "loss", c, g, 2, 0.01);
}

static void s_test_ppo(void) {
    const char *more = "train.steps=2 train.batch_size=4 train.micro_batch_size=2";
    CHECK_INT(s_run("ppo_lora.yaml", "ppo_cpu", "cpu", more), 0);
    CHECK_INT(s_run("ppo_lora.yaml", "ppo_gpu", "cuda", more), 0);
    CHECK(rl_test_exists(s_tmp, "ppo_gpu/final/adapter_model.safetensors"));
    CHECK(rl_test_exists(s_tmp, "ppo_gpu/final/critic/model.safetensors"));
    static const char *const keys[] = {"loss", "value_loss", "grad_norm", "reward"};
    double c[4][2], g[4][2];
    for (int k = 0; k < 4; k++) {
        s_series("ppo_cpu", keys[k], c[k], 2);
        s_series("ppo_gpu", keys[k], g[k], 2);
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(isfinite(g[k][i]), "PPO on the GPU: %s at step %d is %g", keys[k], i + 1,
                      g[k][i]);
        }
    }
    if (g[3][0] == c[3][0]) {
        s_close("PPO", "loss", c[0], g[0], 1, 0.05);
        s_close("PPO", "value_loss", c[1], g[1], 1, 0.05);
    } else {
        printf("  PPO: the first rollout drew other tokens than the CPU's (reward %g, %g): its "
               "losses are not compared\n",
               g[3][0], c[3][0]);
    }
}

// `rlctl traj export RUN --jsonl` into <tmp>/<name>. Returns its exit status.
static int s_export(const char *run, const char *name) {
    snprintf(s_cmd, sizeof s_cmd, "traj export %s/%s --jsonl", s_tmp, run);
    int rc = s_rlctl(s_cmd);
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/out.txt", s_tmp);
    snprintf(to, sizeof to, "%s/%s", s_tmp, name);
    rename(from, to);
    return rc;
}

static void s_test_grpo(void) {
    const char *more = "train.steps=2 train.batch_size=2 train.micro_batch_size=16 "
                       "train.save_every=1";
    CHECK_INT(s_run("grpo_lora.yaml", "grpo_a", "cuda", more), 0);
    char stop[400];
    snprintf(stop, sizeof stop, "%s --stop-at 1", more);
    CHECK_INT(s_run("grpo_lora.yaml", "grpo_r", "cuda", stop), 0);
    snprintf(stop, sizeof stop, "%s --resume", more);
    CHECK_INT(s_run("grpo_lora.yaml", "grpo_r", "cuda", stop), 0);
    json_t *ma = rl_test_metrics(s_tmp, "grpo_a"), *mr = rl_test_metrics(s_tmp, "grpo_r");
    CHECK_MSG(json_array_size(ma) == 3 && json_equal(ma, mr),
              "GRPO on the GPU: resumed metrics differ from the uninterrupted run's");
    json_decref(ma);
    json_decref(mr);
    CHECK_MSG(rl_test_files_equal(s_tmp, "grpo_a/final/adapter_model.safetensors",
                                  "grpo_r/final/adapter_model.safetensors"),
              "GRPO on the GPU: the resumed adapter differs");
    CHECK_INT(s_export("grpo_a", "a.traj"), 0);
    CHECK_INT(s_export("grpo_r", "r.traj"), 0);
    CHECK_MSG(rl_test_files_equal(s_tmp, "a.traj", "r.traj"),
              "GRPO on the GPU: resumed trajectories differ");
    printf("  GRPO on the GPU: --stop-at 1 + --resume == one go (metrics, adapter, "
           "trajectories)\n");
    s_offload_same("grpo_lora.yaml", "grpo_a", more, "adapter_model.safetensors");
    // the adapter trained on the device, evaluated on the CPU
    snprintf(s_cmd, sizeof s_cmd,
             "eval --model %s/models/arith-noisy-base --adapter %s/grpo_a/final --data "
             "%s/data/arith/eval.jsonl --limit 8 --json",
             s_cook, s_tmp, s_cook);
    CHECK_INT(s_rlctl(s_cmd), 0);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "\"accuracy\"");
    free(o);
}

// Runs a and b ended alike: the same metrics (but timings), the same final `file`, and with
// traj the same trajectories.
static void s_same_run(const char *a, const char *b, const char *file, int traj) {
    json_t *ma = rl_test_metrics(s_tmp, a), *mb = rl_test_metrics(s_tmp, b);
    CHECK_MSG(json_array_size(ma) > 0 && json_equal(ma, mb), "%s and %s: the metrics differ", a, b);
    json_decref(ma);
    json_decref(mb);
    char fa[256], fb[256];
    snprintf(fa, sizeof fa, "%s/final/%s", a, file);
    snprintf(fb, sizeof fb, "%s/final/%s", b, file);
    CHECK_MSG(rl_test_files_equal(s_tmp, fa, fb), "%s and %s: %s differs", a, b, file);
    if (traj) {
        snprintf(fa, sizeof fa, "%s.traj", a);
        snprintf(fb, sizeof fb, "%s.traj", b);
        CHECK_INT(s_export(a, fa), 0);
        CHECK_INT(s_export(b, fb), 0);
        CHECK_MSG(rl_test_files_equal(s_tmp, fa, fb), "%s and %s: the trajectories differ", a, b);
    }
}

// RLCTL_FAULT=fault on GRPO (LoRA, `more`): with roles.weight_sync auto the run (`run`) goes on
// through host memory, saying want_auto, and ends as grpo_a; with ipc it stops (exit 1) saying
// want_ipc.
static void s_sync_fault(const char *fault, const char *more, const char *run,
                         const char *want_auto, const char *want_ipc) {
    setenv("RLCTL_FAULT", fault, 1);
    CHECK_INT(s_run("grpo_lora.yaml", run, "cuda", more), 0);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, want_auto);
    free(o);
    s_same_run("grpo_a", run, "adapter_model.safetensors", 1);
    snprintf(s_cmd, sizeof s_cmd,
             "run %s/grpo_lora.yaml run.dir=%s/%s_ipc model.device=cuda " S_SMALL
             " %s roles.weight_sync=ipc",
             s_cook, s_tmp, run, more);
    int rc = s_rlctl(s_cmd);
    unsetenv("RLCTL_FAULT");
    o = rl_test_out(s_tmp);
    CHECK_MSG(rc == 1, "weight_sync=ipc with RLCTL_FAULT=%s: exit %d", fault, rc);
    CHECK_CONTAINS(o, want_ipc);
    free(o);
}

// roles.weight_sync: auto (the default; every sampler here is on the actor's GPU, so each copies
// the weights through CUDA IPC) against host (buckets through host memory): GRPO (LoRA; grpo_a
// above) and SFT (full tuning, an evaluation sampling at each step) end alike to the bit. A
// failed IPC load falls back to host memory for that sampler with auto (warned; the same run)
// and stops the run with ipc; validate refuses ipc for a sampler that cannot take it.
static void s_test_weight_sync(void) {
    const char *more = "train.steps=2 train.batch_size=2 train.micro_batch_size=16 "
                       "train.save_every=1";
    char args[600];
    snprintf(args, sizeof args, "%s roles.weight_sync=host", more);
    CHECK_INT(s_run("grpo_lora.yaml", "grpo_host", "cuda", args), 0);
    s_same_run("grpo_a", "grpo_host", "adapter_model.safetensors", 1);
    const char *sft = "train.steps=2 train.eval_every=1";
    CHECK_INT(s_run("sft_arith.yaml", "sft_ipc", "cuda", sft), 0);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "weight sync: 1 of 1 sampler copy the actor's weights from its GPU (CUDA "
                      "IPC)");
    free(o);
    snprintf(args, sizeof args, "%s roles.weight_sync=host", sft);
    CHECK_INT(s_run("sft_arith.yaml", "sft_host", "cuda", args), 0);
    o = rl_test_out(s_tmp);
    CHECK_MSG(!strstr(o, "CUDA IPC"), "weight_sync=host used CUDA IPC: %s", o);
    free(o);
    s_same_run("sft_ipc", "sft_host", "model.safetensors", 0);
    printf("  weight sync through CUDA IPC == through host memory (GRPO LoRA, SFT full)\n");
    // every sampler's first IPC load fails; the actor cannot give its handle
    s_sync_fault("load_weights_ipc", more, "grpo_fallback",
                 "sampler/0: the weights through CUDA IPC failed (worker sampler/0: "
                 "load_weights: CUDA IPC failed (RLCTL_FAULT=load_weights_ipc)); it takes "
                 "them through host memory from now on",
                 "load_weights: CUDA IPC failed (RLCTL_FAULT=load_weights_ipc) "
                 "(roles.weight_sync: ipc)");
    printf("  a failed IPC load: host memory instead (auto), the run stopped (ipc)\n");
    s_sync_fault("publish_weights", more, "grpo_nopublish",
                 "weight sync: the actor cannot share its weights through CUDA IPC (worker "
                 "actor/0: publish_weights: failed (RLCTL_FAULT=publish_weights)); the "
                 "samplers take them through host memory from now on",
                 "publish_weights: failed (RLCTL_FAULT=publish_weights) (roles.weight_sync: "
                 "ipc)");
    snprintf(s_cmd, sizeof s_cmd,
             "validate %s/grpo_lora.yaml 'roles.devices={samplers: cpu}' model.device=cuda "
             "roles.weight_sync=ipc",
             s_cook);
    CHECK_INT(s_rlctl(s_cmd), 2);
    o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "roles.weight_sync: ipc: sampler 0 is on cpu and the actor on cuda:0: CUDA "
                      "IPC is between GPUs");
    free(o);
}

// Which processes make a CUDA context (tests/cuemu's CUEMU_CONTEXTS log: "<comm>\t<command>"):
// the workers do; rlctl run itself never does (its device checks and its plan ran in rlctl-probe
// children, which end), so the controller holds nothing on the GPU during the run.
static void s_test_contexts(void) {
    if (!rl_test_emulated()) {
        return; // the emulation is what says who makes one
    }
    char path[600];
    snprintf(path, sizeof path, "%s/contexts.txt", s_tmp);
    setenv("CUEMU_CONTEXTS", path, 1);
    int rc = s_run("grpo_lora.yaml", "contexts", "cuda",
                   "train.steps=1 train.batch_size=2 train.micro_batch_size=16");
    unsetenv("CUEMU_CONTEXTS");
    CHECK_INT(rc, 0);
    char *log = rl_test_read_file(path, NULL);
    CHECK_MSG(log != NULL, "no %s", path);
    int probes = 0, actors = 0, samplers = 0;
    for (char *l = log ? strtok(log, "\n") : NULL; l; l = strtok(NULL, "\n")) {
        char *tab = strchr(l, '\t');
        CHECK_MSG(tab != NULL, "a line without a tab: %s", l);
        if (!tab) {
            continue;
        }
        *tab = '\0';
        const char *comm = l, *cmd = tab + 1;
        if (strstr(cmd, " run ")) {
            CHECK_MSG(strcmp(comm, "rlctl-probe") == 0, "rlctl run made a CUDA context itself (%s)",
                      comm);
            probes += strcmp(comm, "rlctl-probe") == 0;
        }
        actors += strstr(cmd, " worker --role actor") != NULL;
        samplers += strstr(cmd, " worker --role sampler") != NULL;
    }
    printf("  CUDA contexts: %d rlctl-probe, %d actor, %d sampler processes; none in rlctl run\n",
           probes, actors, samplers);
    CHECK(probes >= 1 && actors == 1 && samplers == 2);
    free(log);
}

static void s_test_oom(void) {
    const char *more = "train.steps=2 train.batch_size=2 train.micro_batch_size=16 "
                       "train.save_every=1";
    setenv("RLCTL_FAULT", "cuda_oom@2", 1);
    snprintf(s_cmd, sizeof s_cmd,
             "run %s/grpo_lora.yaml run.dir=%s/oom model.device=cuda " S_SMALL " %s", s_cook, s_tmp,
             more);
    int rc = s_rlctl(s_cmd);
    unsetenv("RLCTL_FAULT");
    char *o = rl_test_out(s_tmp);
    printf("  out of memory: %s", o ? strstr(o, "rlctl run:") ? strstr(o, "rlctl run:") : o : "");
    CHECK_MSG(rc != 0, "the run went on after the device ran out of memory");
    CHECK_CONTAINS(o, "worker actor/0: train forward: cuda:0: no room for the activations of");
    CHECK_CONTAINS(o, "bytes): out of memory");
    CHECK_CONTAINS(o, "(the newest checkpoint is of step 1; continue with rlctl run --resume)");
    free(o);
    snprintf(s_cmd, sizeof s_cmd,
             "run %s/grpo_lora.yaml run.dir=%s/oom model.device=cuda " S_SMALL " %s --resume",
             s_cook, s_tmp, more);
    CHECK_INT(s_rlctl(s_cmd), 0);
}

static void s_test_two_devices(void) {
    if (!rl_test_emulated()) {
        return; // the GPU machines have one device
    }
    setenv("CUEMU_DEVICES", "2", 1);
    snprintf(s_cmd, sizeof s_cmd,
             "run %s/grpo_lora.yaml run.dir=%s/two " S_SMALL " train.steps=1 train.batch_size=2 "
             "train.micro_batch_size=16 'roles.devices={actor: cuda:1, samplers: [cuda:0, "
             "cuda:1]}'",
             s_cook, s_tmp);
    int rc = s_rlctl(s_cmd);
    unsetenv("CUEMU_DEVICES");
    char *o = rl_test_out(s_tmp);
    CHECK_MSG(rc == 0, "two devices: %s", o ? o : "");
    CHECK_CONTAINS(o, "placement: 1 actor on cuda:1 (cuemu (CPU emulation))");
    CHECK_CONTAINS(o, "placement: 1 sampler on cuda:0 (cuemu (CPU emulation))");
    CHECK_CONTAINS(o, "placement: 1 sampler on cuda:1 (cuemu (CPU emulation))");
    CHECK_CONTAINS(o, "weight sync: 2 of 2 samplers copy"); // cuda:0 reaches cuda:1 as a peer
    free(o);
    CHECK(rl_test_exists(s_tmp, "two/final/adapter_model.safetensors"));
    // without peer access, the sampler on the other device takes host memory
    setenv("CUEMU_DEVICES", "2", 1);
    setenv("CUEMU_PEER", "0", 1);
    snprintf(s_cmd, sizeof s_cmd,
             "run %s/grpo_lora.yaml run.dir=%s/two_nopeer " S_SMALL " train.steps=1 "
             "train.batch_size=2 train.micro_batch_size=16 'roles.devices={actor: cuda:1, "
             "samplers: [cuda:0, cuda:1]}'",
             s_cook, s_tmp);
    rc = s_rlctl(s_cmd);
    unsetenv("CUEMU_PEER");
    unsetenv("CUEMU_DEVICES");
    o = rl_test_out(s_tmp);
    CHECK_MSG(rc == 0, "two devices, no peers: %s", o ? o : "");
    CHECK_CONTAINS(o, "weight sync: 1 of 2 samplers copy");
    free(o);
    s_same_run("two", "two_nopeer", "adapter_model.safetensors", 1);
}

int main(void) {
    const char *src = getenv("RL_SOURCE_DIR");
    snprintf(s_cook, sizeof s_cook, "%s/cookbook", src && src[0] ? src : RL_SOURCE_DIR);
    s_bin = getenv("RLCTL_BIN");
    s_bin = s_bin && s_bin[0] ? s_bin : RL_BINARY_DIR "/rlctl";
    rl_test_cuda_open("roles.gpu_run");
    rl_test_cuda_close();
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "gpu_run");
    RL_TEST_RUN(s_test_sft_dpo);
    RL_TEST_RUN(s_test_ppo);
    RL_TEST_RUN(s_test_grpo);
    RL_TEST_RUN(s_test_weight_sync);
    RL_TEST_RUN(s_test_contexts);
    RL_TEST_RUN(s_test_oom);
    RL_TEST_RUN(s_test_two_devices);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

// test_mesh_gpu — a DP×FSDP mesh whose ranks are on GPUs (docs/gpu.md, "A mesh on GPUs"): each
// rank holds the whole model on its device, its gradients come to the host, where they are
// reduce-scattered over fsdp and summed over dp (MPI), the optimizer updates this rank's slice
// and the slices are all-gathered back before the push. Label gpu (skipped without one); its
// .emu twin runs the same on the emulated module (tests/cuemu), where it checks the host logic
// (the slices, the collectives, the checkpoints), not a GPU. Against the same run on 1×1 on the
// same device, the cookbook's arith models, a few steps each:
//   1. GRPO (LoRA, the reference = the adapter disabled) on two ranks sharing cuda:0 as dp 2 and
//      as fsdp 2 (mesh.share_devices): every metric of every step and the final adapter within
//      the CPU mesh's tolerances (docs/mesh.md); and with the reference on a mesh of its own
//      (roles.reference: mesh, fsdp 2);
//   2. PPO with the critic on the actor's ranks (its value head a second replicated part) on
//      fsdp 2: the same, with one epoch per rollout (PPO's default 4 epochs over 4 rows amplify
//      the order of a sum past these tolerances: on the emulation the 1×1 run with micro-batches
//      of 1 and of 2 rows differ as much as the mesh does, 2.5e-5 in the adapter after a step);
//   3. SFT with full tuning stopped at step 2 on fsdp 2 and resumed on dp 2 (the checkpoint's
//      whole model and optimizer state, written by rank 0, scattered into the other shape's
//      slices) ends within tolerance of the uninterrupted 1×1 run;
//   4. validate refuses two ranks on one GPU without mesh.share_devices, a mesh mixing the CPU
//      and a GPU, and GPUs on a mesh across hosts, naming the key;
//   5. (the emulation only: two emulated devices) roles.devices.actor [cuda:0, cuda:1] puts rank
//      r on entry r without sharing: rlctl plan counts one actor per device, the run's placement
//      prints each rank's device, and it matches 1×1 as in 1 (mesh.collectives: host);
//   6. (the emulation only) the same with NCCL (emulated between the ranks): GRPO within
//      tolerance of 1×1, SFT's exact resume and 1×1's tolerance, auto's fallback to host memory
//      and nccl's stop without NCCL; validate refuses nccl on a shared GPU and on the CPU.
// On a GPU machine (scripts/gpu_check.sh) RLCTL_BIN names the rlctl to run and RL_SOURCE_DIR the
// checkout, as in roles.gpu_run; the mesh needs Open MPI's mpirun there (the suite skips with a
// message when the launcher is missing).
#include "rl_test.h"
#include "rl_test_cuda.h"
#include "rl_test_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The CPU mesh's tolerances (docs/mesh.md): the same float sums in another order
#define S_TOL 2e-3
#define S_FLOOR 0.05
#define S_TOL_W 5e-4

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
    "train.log_every=1 roles.actor_threads=1"

// `rlctl run` of a cookbook recipe on the GPU into run folder `run`; prints the output when it
// fails. Returns the exit status.
static int s_run(const char *recipe, const char *run, const char *more) {
    snprintf(s_cmd, sizeof s_cmd, "run %s/%s run.dir=%s/%s model.device=cuda " S_SMALL " %s",
             s_cook, recipe, s_tmp, run, more);
    int rc = s_rlctl(s_cmd);
    if (rc != 0) {
        char *o = rl_test_out(s_tmp);
        fprintf(stderr, "rlctl %s -> %d\n%s\n", s_cmd, rc, o ? o : "");
        free(o);
    }
    return rc;
}

// The final weights of run b against a's: every value within the CPU mesh's S_TOL_W but for a
// few (S_FEW: 2 + one in 20,000), and those within S_ADAM. Why a few: the device model rounds
// its activations to bf16 (the matmuls' inputs, SwiGLU's gate and up, attention's q, k, v, P, dS
// and dout), so the sums' order, which moves a value by an ulp of fp32, now and then moves one by
// an ulp of bf16 (2^-8); and AdamW turns a gradient near zero whose sign that flips into a step
// of about lr the other way (seen on the emulation: 20 of SFT's 791,680 weights, the largest
// 2.1e-3 apart after 3 steps at lr 2e-3; 2 with the fp32 attention, RLCTL_CUDA_ATTN=fp32, whose
// fewer roundings flip fewer). S_ADAM = 2 x 3 steps x lr 2e-3, the largest of these runs: the
// farthest two AdamW runs can take a weight apart (a step moves it about lr at most).
#define S_FEW(n) (2 + (n) / 20000)
#define S_ADAM 0.012
static void s_final_close(const char *a, const char *b, const char *file) {
    char fa[1400], fb[1400];
    snprintf(fa, sizeof fa, "%s/%s/final/%s", s_tmp, a, file);
    snprintf(fb, sizeof fb, "%s/%s/final/%s", s_tmp, b, file);
    size_t over = 0, n = 0;
    double d = rl_test_st_diff(fa, fb, S_TOL_W, &over, &n);
    CHECK_MSG(d <= S_ADAM && over <= S_FEW(n),
              "%s vs %s: final/%s: %zu of %zu values differ by more than %g (at most %zu may), "
              "the largest by %.3g (at most %g)",
              b, a, file, over, n, S_TOL_W, (size_t)S_FEW(n), d, S_ADAM);
    printf("  %-24s final/%s: %zu of %zu values beyond %g, the largest %.2g\n", b, file, over, n,
           S_TOL_W, d);
}

// The run `recipe` (with `more`) on 1×1 and on each of the shapes, compared.
static void s_case(const char *name, const char *recipe, const char *more, const char *file,
                   const char *const *shapes, int n_shapes) {
    char base[64], run[96], args[1024];
    snprintf(base, sizeof base, "%s-1x1", name);
    if (s_run(recipe, base, more) != 0) {
        CHECK_MSG(0, "%s: the 1x1 run failed", name);
        return;
    }
    for (int k = 0; k < n_shapes; k++) {
        snprintf(run, sizeof run, "%s-%s", name, shapes[k]);
        snprintf(args, sizeof args, "%s mesh.share_devices=true mesh.dp=%c mesh.fsdp=%c", more,
                 shapes[k][0], shapes[k][2]);
        if (s_run(recipe, run, args) != 0) {
            CHECK_MSG(0, "%s failed", run);
            continue;
        }
        char *o = rl_test_out(s_tmp);
        CHECK_CONTAINS(o, "each rank's GPU holds the whole model");
        free(o);
        rl_test_metrics_close(s_tmp, base, run, S_TOL, S_FLOOR, 2);
        s_final_close(base, run, file);
    }
}

static void s_test_grpo(void) {
    static const char *const shapes[] = {"2x1", "1x2"};
    const char *more =
        "train.steps=3 train.batch_size=2 train.micro_batch_size=4 algorithm.beta=0.04";
    s_case("grpo", "grpo_lora.yaml", more, "adapter_model.safetensors", shapes, 2);
    // the reference on a mesh of its own (each rank the whole frozen model on its device): the
    // same numbers as the adapter switched off in the actor
    char args[512];
    snprintf(args, sizeof args, "%s roles.reference=mesh mesh.fsdp=2 mesh.share_devices=true",
             more);
    CHECK_INT(s_run("grpo_lora.yaml", "grpo-refmesh", args), 0);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "reference/1 pid ");
    free(o);
    rl_test_metrics_close(s_tmp, "grpo-1x1", "grpo-refmesh", S_TOL, S_FLOOR, 2);
    s_final_close("grpo-1x1", "grpo-refmesh", "adapter_model.safetensors");
}

static void s_test_ppo(void) {
    static const char *const shapes[] = {"1x2"};
    s_case("ppo", "ppo_lora.yaml",
           "train.steps=2 train.batch_size=4 train.micro_batch_size=2 algorithm.epochs=1",
           "adapter_model.safetensors", shapes, 1);
    CHECK(rl_test_exists(s_tmp, "ppo-1x2/final/critic/model.safetensors"));
}

static void s_test_sft_reshard(void) {
    const char *more = "train.steps=3 train.batch_size=16 train.micro_batch_size=4 "
                       "train.save_every=1";
    CHECK_INT(s_run("sft_arith.yaml", "sft-1x1", more), 0);
    char args[512];
    snprintf(args, sizeof args, "%s mesh.share_devices=true mesh.fsdp=2 --stop-at 2", more);
    CHECK_INT(s_run("sft_arith.yaml", "sft-re", args), 0);
    snprintf(args, sizeof args, "%s mesh.share_devices=true mesh.dp=2 --resume", more);
    CHECK_INT(s_run("sft_arith.yaml", "sft-re", args), 0);
    rl_test_metrics_close(s_tmp, "sft-1x1", "sft-re", S_TOL, S_FLOOR, 3);
    s_final_close("sft-1x1", "sft-re", "model.safetensors");
}

static void s_test_refusals(void) {
    char hosts[200];
    snprintf(hosts, sizeof hosts, "%s/hosts", s_tmp);
    FILE *f = fopen(hosts, "w");
    CHECK(f && fputs("localhost slots=2\n", f) >= 0 && fclose(f) == 0);
    static const char *const bad[][2] = {
        {"model.device=cuda mesh.dp=2",
         "model.device: actor: ranks 0 and 1 of the 2x1 mesh are both on cuda:0: each rank needs "
         "a GPU of its own (list one per rank in roles.devices.actor), or set "
         "mesh.share_devices: true"},
        {"'roles.devices={actor: [cpu, cuda:0]}' mesh.fsdp=2",
         "roles.devices: actor: the ranks of a 1x2 mesh are all on GPUs or all on the CPU (rank 0 "
         "on cpu, rank 1 on cuda:0)"},
        {"model.device=cuda mesh.dp=2 mesh.share_devices=true mesh.hostfile=HOSTS "
         "mesh.endpoint=tcp://127.0.0.1:0 mesh.rank_key=/nonexistent/key mesh.allow=HOSTS "
         "mesh.key=HOSTS",
         "mesh.hostfile: actor on GPUs: a mesh across hosts does not run on GPUs yet"},
        {"model.device=cuda mesh.dp=2 mesh.share_devices=true mesh.collectives=nccl",
         "mesh.collectives: nccl: the actor's mesh cannot use NCCL: ranks 0 and 1 share cuda:0"},
        {"mesh.dp=2 mesh.collectives=nccl",
         "mesh.collectives: nccl: the actor's mesh cannot use NCCL: the actor's mesh is not on "
         "GPUs"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        char more[1024], *at;
        snprintf(more, sizeof more, "%s", bad[b][0]);
        while ((at = strstr(more, "HOSTS")) != NULL) { // the hostfile's path
            char rest[1024];
            snprintf(rest, sizeof rest, "%s", at + 5);
            snprintf(at, sizeof more - (size_t)(at - more), "%s%s", hosts, rest);
        }
        snprintf(s_cmd, sizeof s_cmd, "validate %s/grpo_lora.yaml roles.actor_threads=1 %s", s_cook,
                 more);
        CHECK_INT(s_rlctl(s_cmd), 2);
        char *o = rl_test_out(s_tmp);
        CHECK_CONTAINS(o, bad[b][1]);
        const char *line = o ? strstr(o, bad[b][1]) : NULL;
        while (line && line > o && line[-1] != '\n') {
            line--; // the line that says it
        }
        printf("  refused: %.*s\n", line ? (int)strcspn(line, "\n") : 0, line ? line : "");
        free(o);
    }
}

static void s_test_two_devices(void) {
    if (!rl_test_emulated()) {
        return; // the GPU machines have one device
    }
    setenv("CUEMU_DEVICES", "2", 1);
    const char *more = "train.steps=3 train.batch_size=2 train.micro_batch_size=4 "
                       "algorithm.beta=0.04 mesh.dp=2 'roles.devices={actor: [cuda:0, cuda:1]}' "
                       "mesh.collectives=host";
    snprintf(s_cmd, sizeof s_cmd, "plan %s/grpo_lora.yaml optim.warmup_steps=0 %s", s_cook, more);
    CHECK_INT(s_rlctl(s_cmd), 0);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, " actor                    cuda:0      1 ");
    CHECK_CONTAINS(o, " actor                    cuda:1      1 ");
    free(o);
    int rc = s_run("grpo_lora.yaml", "grpo-two", more);
    unsetenv("CUEMU_DEVICES");
    CHECK_INT(rc, 0);
    o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "actor/0 pid ");
    CHECK_CONTAINS(o, "  cuda:0   ");
    CHECK_CONTAINS(o, "  cuda:1   ");
    free(o);
    if (rc == 0) {
        rl_test_metrics_close(s_tmp, "grpo-1x1", "grpo-two", S_TOL, S_FLOOR, 2);
        s_final_close("grpo-1x1", "grpo-two", "adapter_model.safetensors");
    }
}

// The log of run `run`'s actor rank `rank` (logs/actor-<rank>.log), or NULL.
static char *s_rank_log(const char *run, int rank) {
    char path[200];
    snprintf(path, sizeof path, "%s/%s/logs/actor-%d.log", s_tmp, run, rank);
    return rl_test_read_file(path, NULL);
}

// The log of run `run`'s actor rank 0, or NULL.
static char *s_actor_log(const char *run) {
    return s_rank_log(run, 0);
}

// Run `run` of `recipe` with `more` on two emulated GPUs: its output and actor rank 0's log say
// `said` and `logged`, and it matches run `base` (1x1) within the CPU mesh's tolerances (at
// least `lines` training lines; the final `file`).
static void s_nccl_run(const char *recipe, const char *base, const char *run, const char *more,
                       int lines, const char *file, const char *said, const char *logged) {
    int rc = s_run(recipe, run, more);
    CHECK_INT(rc, 0);
    char *o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, said);
    free(o);
    o = s_actor_log(run);
    CHECK_CONTAINS(o, logged);
    free(o);
    if (rc == 0) {
        rl_test_metrics_close(s_tmp, base, run, S_TOL, S_FLOOR, lines);
        s_final_close(base, run, file);
    }
}

// (the emulation only) a rank per device with NCCL (mesh.collectives auto; NCCL emulated between
// the ranks, tests/cuemu/cuemu_nccl.cpp): the gradients summed on the devices, AdamW there with
// its state split over the ranks. GRPO (LoRA) on dp 2 within tolerance of 1×1; SFT (full tuning)
// on fsdp 2 stopped at step 2 and resumed equals its uninterrupted run to the bit (the checkpoint's
// moments gathered from, and scattered back to, the ranks' devices) and 1×1 within tolerance;
// without NCCL (RLCTL_NCCL_LIBRARY a missing file) auto goes on through host memory, saying so,
// and nccl stops before the first step naming the key.
static void s_test_nccl(void) {
    if (!rl_test_emulated()) {
        return; // the GPU machines have one device
    }
    setenv("CUEMU_DEVICES", "2", 1);
    const char *two = "'roles.devices={actor: [cuda:0, cuda:1]}'";
    char more[1024];
    snprintf(more, sizeof more,
             "train.steps=3 train.batch_size=2 train.micro_batch_size=4 algorithm.beta=0.04 "
             "mesh.dp=2 %s",
             two);
    s_nccl_run("grpo_lora.yaml", "grpo-1x1", "grpo-nccl", more, 2, "adapter_model.safetensors",
               "gradients summed between the GPUs with NCCL, AdamW on the devices",
               "sums its gradients between its GPUs with NCCL");
    // fsdp 2: the frozen base's layers sharded over the two GPUs (ZeRO-3), gathered a layer at
    // a time, which computes the whole layers' numbers: within tolerance of 1x1 as dp 2
    snprintf(more, sizeof more,
             "train.steps=3 train.batch_size=2 train.micro_batch_size=4 algorithm.beta=0.04 "
             "mesh.fsdp=2 %s",
             two);
    s_nccl_run("grpo_lora.yaml", "grpo-1x1", "grpo-zero3", more, 2, "adapter_model.safetensors",
               "each rank's GPU holds 1/fsdp of the frozen base's layers (ZeRO-3",
               "its frozen layers are sharded over each fsdp group of 2 ranks (ZeRO-3)");
    // full tuning: the masters split over the ranks (ZeRO-3 of the masters) and its
    // reference (a frozen copy in the actor) sharded as LoRA's base: GRPO tuned in full, with
    // its KL term, on fsdp 2 against 1x1
    const char *full = "train.steps=2 train.batch_size=2 train.micro_batch_size=4 "
                       "algorithm.beta=0.04 'lora={enabled: false}' optim.lr=1e-4";
    CHECK_INT(s_run("grpo_lora.yaml", "grpo-full-1x1", full), 0);
    snprintf(more, sizeof more, "%s mesh.fsdp=2 %s", full, two);
    s_nccl_run("grpo_lora.yaml", "grpo-full-1x1", "grpo-full-zero3", more, 1, "model.safetensors",
               "each rank's GPU holds its part of the fp32 masters (ZeRO-3: the layers "
               "all-gathered a layer at a time over the mesh with NCCL), the embedding's and "
               "head's bf16 copies whole, and 1/fsdp of a reference's layers",
               "the reference's layers are sharded over each fsdp group of 2 ranks");
    char *lg = s_actor_log("grpo-full-zero3");
    CHECK_CONTAINS(lg, "its fp32 masters are split over the 2 ranks (ZeRO-3 of the masters)");
    free(lg);
    // DPO (LoRA) on fsdp 2 with ZeRO-3: the reference's sums (the adapter off) and the policy's
    // over sharded layers, the micro-batches' forwards in step on both ranks
    const char *dpo = "train.steps=2 train.batch_size=4 train.micro_batch_size=2";
    CHECK_INT(s_run("dpo_lora.yaml", "dpo-1x1", dpo), 0);
    snprintf(more, sizeof more, "%s mesh.fsdp=2 %s", dpo, two);
    s_nccl_run("dpo_lora.yaml", "dpo-1x1", "dpo-zero3", more, 2, "adapter_model.safetensors",
               "each rank's GPU holds 1/fsdp of the frozen base's layers (ZeRO-3",
               "its frozen layers are sharded over each fsdp group of 2 ranks (ZeRO-3)");
    // PPO (LoRA) on fsdp 2: the actor's base sharded (ZeRO-3), the critic on the actor's ranks
    // through host memory (its value head's optimizer is the host's), against s_test_ppo's 1x1
    snprintf(more, sizeof more,
             "train.steps=2 train.batch_size=4 train.micro_batch_size=2 algorithm.epochs=1 "
             "mesh.fsdp=2 'roles.devices={actor: [cuda:0, cuda:1], critic: [cuda:0, cuda:1]}'");
    s_nccl_run("ppo_lora.yaml", "ppo-1x1", "ppo-zero3", more, 2, "adapter_model.safetensors",
               "each rank's GPU holds 1/fsdp of the frozen base's layers (ZeRO-3",
               "its frozen layers are sharded over each fsdp group of 2 ranks (ZeRO-3)");
    const char *sft = "train.steps=3 train.batch_size=16 train.micro_batch_size=4 "
                      "train.save_every=1 mesh.fsdp=2";
    snprintf(more, sizeof more, "%s %s", sft, two);
    CHECK_INT(s_run("sft_arith.yaml", "sft-nccl", more), 0);
    snprintf(more, sizeof more, "%s %s --stop-at 2", sft, two);
    CHECK_INT(s_run("sft_arith.yaml", "sft-nccl-re", more), 0);
    snprintf(more, sizeof more, "%s %s --resume", sft, two);
    CHECK_INT(s_run("sft_arith.yaml", "sft-nccl-re", more), 0);
    char *o = s_actor_log("sft-nccl-re");
    CHECK_CONTAINS(o, "sums its gradients between its GPUs with NCCL");
    free(o);
    // rank 1 keeps no host copy of the weights: its resume went into its device (exact below)
    o = s_rank_log("sft-nccl-re", 1);
    CHECK_CONTAINS(o, "rank 1 gave its host copy of the weights back");
    free(o);
    rl_test_metrics_close(s_tmp, "sft-nccl", "sft-nccl-re", 0.0, 1e-30, 3);
    rl_test_final_close(s_tmp, "sft-nccl", "sft-nccl-re", "model.safetensors", 0.0);
    rl_test_metrics_close(s_tmp, "sft-1x1", "sft-nccl", S_TOL, S_FLOOR, 3);
    s_final_close("sft-1x1", "sft-nccl", "model.safetensors");
    // no NCCL: auto through host memory, nccl refused
    const char *keep = getenv("RLCTL_NCCL_LIBRARY");
    char *saved = keep ? strdup(keep) : NULL;
    setenv("RLCTL_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    snprintf(more, sizeof more,
             "train.steps=1 train.batch_size=16 train.micro_batch_size=4 "
             "mesh.dp=2 %s",
             two);
    CHECK_INT(s_run("sft_arith.yaml", "sft-nonccl", more), 0);
    o = s_actor_log("sft-nonccl");
    CHECK_CONTAINS(o, "sums its gradients through host memory (MPI): NCCL cannot be opened on 2 "
                      "of the 2 ranks: NCCL is not available: cannot open "
                      "/nonexistent/libnccl.so.2");
    free(o);
    snprintf(s_cmd, sizeof s_cmd,
             "run %s/sft_arith.yaml run.dir=%s/sft-nonccl2 model.device=cuda " S_SMALL
             " %s mesh.collectives=nccl",
             s_cook, s_tmp, more);
    CHECK_INT(s_rlctl(s_cmd), 1);
    o = rl_test_out(s_tmp);
    CHECK_CONTAINS(o, "mesh.collectives: nccl: NCCL cannot be opened on 2 of the 2 ranks");
    free(o);
    if (saved) {
        setenv("RLCTL_NCCL_LIBRARY", saved, 1);
        free(saved);
    }
    unsetenv("CUEMU_DEVICES");
}

int main(void) {
    const char *src = getenv("RL_SOURCE_DIR");
    snprintf(s_cook, sizeof s_cook, "%s/cookbook", src && src[0] ? src : RL_SOURCE_DIR);
    s_bin = getenv("RLCTL_BIN");
    s_bin = s_bin && s_bin[0] ? s_bin : RL_BINARY_DIR "/rlctl";
    rl_test_cuda_open("mesh.gpu");
    rl_test_cuda_close();
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        printf("mesh.gpu: no mpirun on this machine (Open MPI starts a mesh's ranks): skipped\n");
        return 77;
    }
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "mesh_gpu");
    RL_TEST_RUN(s_test_refusals);
    RL_TEST_RUN(s_test_grpo);
    RL_TEST_RUN(s_test_ppo);
    RL_TEST_RUN(s_test_sft_reshard);
    RL_TEST_RUN(s_test_two_devices);
    RL_TEST_RUN(s_test_nccl);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

// tests for `rlctl devices`: without a usable GPU (a CUDA module that is not there) it lists the
// CPU (its cores as this process's affinity counts them, its memory) and says why there is no
// GPU, exit 0, in text and JSON; with the CUDA module emulated on the CPU (tests/cuemu: the fake
// device list of CUEMU_DEVICES and CUEMU_MEMORY) it lists each device with its memory, compute
// capability and whether rlctl can use it, and no device at all is said so;
// CUDA_VISIBLE_DEVICES is echoed; an unknown argument is exit 2. And --device on logprobs,
// generate, eval and serve, and model.device in a recipe: a device that is not one, or not
// there (no module, an index past the visible ones), is exit 2 naming it and why, before
// anything is loaded; on the emulated GPU logprobs computes its forward there and generate and
// eval their cached steps (the CPU's tokens, its logprobs within the bf16 tolerance of
// docs/gpu.md), serve answers a completion with top logprobs from the GPU; a recipe on the
// emulated cuda:0 validates, one naming cuda:1 is refused. roles.weight_sync: ipc is refused
// for a sampler on the CPU (with or without a GPU) or on a device without peer access. NCCL's
// line (it opens, or why not).
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include "rl_test.h"

#include <jansson.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char s_out[1 << 16];

// rlctl ARGS with the environment variables env, its output in s_out.
#define S_RECIPE RL_SOURCE_DIR "/cookbook/grpo_lora.yaml"

static int s_cmd(const char *env, const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "env %s '%s/rlctl' %s 2>&1", env, RL_BINARY_DIR, args);
    return rl_test_shell(cmd, s_out, sizeof s_out);
}

// rlctl devices ARGS.
static int s_run(const char *env, const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "devices %s", args);
    return s_cmd(env, cmd);
}

static json_t *s_json(const char *env) {
    CHECK_INT(s_run(env, "--json"), 0);
    json_t *o = json_loads(s_out, 0, NULL);
    CHECK_MSG(o != NULL, "--json is not JSON: %s", s_out);
    return o;
}

static void s_test_no_gpu(void) {
    const char *env = "RLCTL_CUDA_MODULE=/nonexistent/librlctl_cuda.so";
    CHECK_INT(s_run(env, ""), 0);
    CHECK_CONTAINS(s_out, "cpu ");
    CHECK_CONTAINS(s_out, "no GPU: ");
    CHECK_CONTAINS(s_out, "RLCTL_CUDA_MODULE=/nonexistent/librlctl_cuda.so");
    json_t *o = s_json(env);
    json_t *cpu = json_object_get(o, "cpu"), *cu = json_object_get(o, "cuda");
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    CHECK_INT(json_integer_value(json_object_get(cpu, "cores")), CPU_COUNT(&set));
    CHECK(json_integer_value(json_object_get(cpu, "mem_total")) > (1LL << 26));
    CHECK(json_integer_value(json_object_get(cpu, "mem_available")) > 0);
    CHECK_INT(json_array_size(json_object_get(cu, "devices")), 0);
    CHECK_CONTAINS(json_string_value(json_object_get(cu, "why")), "RLCTL_CUDA_MODULE");
    CHECK(json_is_null(json_object_get(cu, "driver_version")));
    json_decref(o);
    CHECK_INT(s_run("", "--frobnicate"), 2);
    CHECK_CONTAINS(s_out, "'--frobnicate'");
    CHECK_INT(s_run("", "cuda"), 2);
    CHECK_CONTAINS(s_out, "unknown argument 'cuda'");
    // weights through CUDA IPC need GPUs: refused on the CPU, naming the key; auto and host pass
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " roles.weight_sync=ipc"), 2);
    CHECK_CONTAINS(s_out, "roles.weight_sync: ipc: sampler 0 is on cpu and the actor on cpu: "
                          "CUDA IPC is between GPUs");
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " roles.weight_sync=auto"), 0);
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " roles.weight_sync=host"), 0);
}

static void s_test_emulated(void) {
#ifdef RL_CUEMU_MODULE
    char env[1024];
    snprintf(env, sizeof env,
             "RLCTL_CUDA_MODULE=%s CUEMU_DEVICES=3 CUEMU_MEMORY=5G CUDA_VISIBLE_DEVICES=0,1,2",
             RL_CUEMU_MODULE);
    CHECK_INT(s_run(env, ""), 0);
    CHECK_CONTAINS(s_out, "cuda:2   cuemu (CPU emulation): 5.0 GiB (5.0 GiB free), compute "
                          "capability 9.0");
    CHECK_CONTAINS(s_out, "CUDA_VISIBLE_DEVICES=0,1,2");
    CHECK(!strstr(s_out, "no GPU"));
    json_t *o = s_json(env);
    json_t *cu = json_object_get(o, "cuda"), *devs = json_object_get(cu, "devices");
    CHECK_INT(json_array_size(devs), 3);
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d) {
        char name[32];
        snprintf(name, sizeof name, "cuda:%zu", i);
        CHECK_STR(json_string_value(json_object_get(d, "device")), name);
        CHECK_INT(json_integer_value(json_object_get(d, "mem_total")), 5LL << 30);
        CHECK_STR(json_string_value(json_object_get(d, "compute_capability")), "9.0");
        CHECK(json_is_true(json_object_get(d, "usable")) &&
              json_is_null(json_object_get(d, "why")));
    }
    CHECK(json_is_null(json_object_get(cu, "why")));
    CHECK_STR(json_string_value(json_object_get(cu, "visible_devices")), "0,1,2");
    CHECK_STR(json_string_value(json_object_get(cu, "driver_version")), "13.0");
    json_decref(o);
    // the topology between the three: peer access and its rank, in text and JSON; none with
    // CUEMU_PEER=0
    CHECK_INT(s_run(env, ""), 0);
    CHECK_CONTAINS(s_out, "peers    direct access between devices (P2P)");
    CHECK_CONTAINS(s_out, "\n         cuda:0   cuda:1   cuda:2\n");
    CHECK_CONTAINS(s_out, "\ncuda:1   P2P r0   -        P2P r0\n");
    o = s_json(env);
    json_t *topo = json_object_get(json_object_get(o, "cuda"), "topology");
    CHECK_INT(json_array_size(topo), 6);
    json_t *t0 = json_array_get(topo, 0);
    CHECK(json_is_true(json_object_get(t0, "peer_access")) &&
          json_integer_value(json_object_get(t0, "performance_rank")) == 0);
    json_decref(o);
    char env_np[1100];
    snprintf(env_np, sizeof env_np, "%s CUEMU_PEER=0", env);
    CHECK_INT(s_run(env_np, ""), 0);
    CHECK_CONTAINS(s_out, "\ncuda:2   no P2P   no P2P   -\n");
    // NCCL (a mesh with a GPU per rank): opens, or why not, in text and JSON
    char env_nc[1100];
    snprintf(env_nc, sizeof env_nc, "%s RLCTL_NCCL_LIBRARY=%s", env, RL_CUEMU_NCCL);
    CHECK_INT(s_run(env_nc, ""), 0);
    CHECK_CONTAINS(s_out, "libnccl_cuemu.so opens: a mesh with a GPU per rank sums its gradients");
    snprintf(env_nc, sizeof env_nc, "%s RLCTL_NCCL_LIBRARY=/nonexistent/libnccl.so.2", env);
    CHECK_INT(s_run(env_nc, ""), 0);
    CHECK_CONTAINS(s_out,
                   "\nnccl     NCCL is not available: cannot open /nonexistent/libnccl.so.2");
    o = s_json(env_nc);
    json_t *nc = json_object_get(json_object_get(o, "cuda"), "nccl");
    CHECK(json_is_false(json_object_get(nc, "available")));
    CHECK_CONTAINS(json_string_value(json_object_get(nc, "why")), "cannot open");
    json_decref(o);
    // roles.devices on these three: a placement validates and plans per device; each impossible
    // one is refused naming the key, before anything starts
    CHECK_INT(s_cmd(env, "plan " S_RECIPE " 'roles.devices={actor: cuda:2, samplers: [cuda:0, "
                         "cuda:1]}'"),
              0);
    CHECK_CONTAINS(s_out, " actor                    cuda:2 ");
    CHECK_CONTAINS(s_out, " sampler                  cuda:0 ");
    CHECK_CONTAINS(s_out, " sampler                  cuda:1 ");
    CHECK_CONTAINS(s_out, "cuda:2 in all: ");
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " 'roles.devices={samplers: [cuda:1, cuda:2]}'"), 0);
    // a mesh on the CPU beside samplers on a GPU; a mesh's ranks on a device each
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " 'roles.devices={samplers: cuda:1}' mesh.dp=2 "
                         "roles.actor_threads=1"),
              0);
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " 'roles.devices={actor: [cuda:1, cuda:2]}' "
                         "mesh.dp=2 roles.actor_threads=1"),
              0);
    static const char *const bad[][2] = {
        {"'roles.devices={reference: cuda:3}'",
         "roles.devices: reference: cuda:3: there are 3 visible GPUs (cuda:0 .. cuda:2)"},
        {"'roles.devices={samplers: [cuda:0, cuda:7]}'", "roles.devices: samplers: cuda:7: there"},
        {"'roles.devices={learner: cuda:0}'",
         "roles.devices: 'learner' is not a role that holds the model"},
        {"'roles.devices={actor: gpu0}'", "roles.devices: actor: "},
        {"'roles.devices={samplers: []}'", "or a non-empty list of them"},
        {"'roles.devices={actor: [cuda:0, cuda:5]}' mesh.dp=2 roles.actor_threads=1",
         "roles.devices: actor: cuda:5: there are 3 visible GPUs"},
        {"'roles.devices={actor: [cuda:1, cuda:1]}' mesh.dp=2 roles.actor_threads=1",
         "roles.devices: actor: ranks 0 and 1 of the 2x1 mesh are both on cuda:1"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        char args[512];
        snprintf(args, sizeof args, "validate " S_RECIPE " %s", bad[b][0]);
        CHECK_INT(s_cmd(env, args), 2);
        CHECK_CONTAINS(s_out, bad[b][1]);
    }
    // roles.weight_sync: ipc between peers passes; without peer access, or with a sampler on
    // the CPU, it is refused naming the key
    const char *ipc = "validate " S_RECIPE " 'roles.devices={actor: cuda:1, samplers: [cuda:1, "
                      "cuda:2]}' roles.weight_sync=ipc";
    CHECK_INT(s_cmd(env, ipc), 0);
    CHECK_INT(s_cmd(env_np, ipc), 2);
    CHECK_CONTAINS(s_out, "roles.weight_sync: ipc: sampler 1 on cuda:2 cannot reach the actor's "
                          "cuda:1 (no peer access between them)");
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " model.device=cuda:1 'roles.devices={samplers: "
                         "cpu}' roles.weight_sync=ipc"),
              2);
    CHECK_CONTAINS(s_out, "roles.weight_sync: ipc: sampler 0 is on cpu and the actor on cuda:1");
    // the driver sees no device
    snprintf(env, sizeof env, "RLCTL_CUDA_MODULE=%s CUEMU_DEVICES=0", RL_CUEMU_MODULE);
    o = s_json(env);
    cu = json_object_get(o, "cuda");
    CHECK_INT(json_array_size(json_object_get(cu, "devices")), 0);
    CHECK_MSG(json_string_value(json_object_get(cu, "why")) != NULL, "no why: %s", s_out);
    json_decref(o);
    CHECK_INT(s_run(env, ""), 0);
    CHECK_CONTAINS(s_out, "no GPU: ");
#else
    printf("no emulated CUDA module in this build: its checks are not run\n");
#endif
}

// ---- --device on the commands, model.device in recipes

#define S_ARITH RL_SOURCE_DIR "/cookbook/models/arith-base"
#define S_LOGPROBS                                                                                 \
    "logprobs --model " S_ARITH                                                                    \
    " --prompt 47*3+512= --completion '47*3=141;141+512=653 #### 653' "                            \
    "--json"

#define S_GENERATE "generate --model " S_ARITH " --prompt 47*3+512= --temperature 0 --json"
#define S_EVAL "eval --model " S_ARITH " --data " RL_SOURCE_DIR "/cookbook/data/arith/eval.jsonl"
#define S_SERVE "serve --model " S_ARITH " --http 127.0.0.1:0"

// Each command that takes --device (from the first-th), with it set to `device`: exit 2, its
// message containing want.
static void s_refused(const char *env, const char *device, const char *want, int first) {
    static const char *const cmds[] = {S_LOGPROBS, S_GENERATE, S_EVAL, S_SERVE};
    for (int i = first; i < 4; i++) {
        char args[1024];
        snprintf(args, sizeof args, "%s --device %s", cmds[i], device);
        CHECK_MSG(s_cmd(env, args) == 2 && strstr(s_out, want) && strstr(s_out, "--device"),
                  "rlctl %s: want exit 2 saying '%s', got: %s", args, want, s_out);
    }
}

static void s_test_device_flags(void) {
    const char *none = "RLCTL_CUDA_MODULE=/nonexistent/librlctl_cuda.so";
    s_refused(none, "cuda", "RLCTL_CUDA_MODULE=/nonexistent/librlctl_cuda.so", 0);
    s_refused(none, "gpu", "allowed: cpu, cuda, cuda:N", 0);
    CHECK_INT(s_cmd(none, "validate " S_RECIPE " model.device=cuda:1"), 2);
    CHECK_CONTAINS(s_out, "model.device: cuda:1: ");
    CHECK_CONTAINS(s_out, "RLCTL_CUDA_MODULE");
    CHECK_INT(s_cmd(none, "validate " S_RECIPE " model.device=tpu"), 2);
    CHECK_CONTAINS(s_out, "model.device: device 'tpu' is not one");
    CHECK_INT(s_cmd(none, "validate " S_RECIPE " model.device=cpu"), 0);
    CHECK_INT(s_cmd(none, S_LOGPROBS " --device cpu"), 0);
#ifdef RL_CUEMU_MODULE
    char env[1024];
    snprintf(env, sizeof env, "RLCTL_CUDA_MODULE=%s CUEMU_DEVICES=1", RL_CUEMU_MODULE);
    // the forward (logprobs) and the cached steps (generate, greedy) on the (emulated) GPU: the
    // CPU's tokens, and its logprobs within the bf16 tolerance
    static const struct {
        const char *args, *ids, *lps;
    } runs[] = {{S_LOGPROBS, "completion_ids", "logprobs"}, {S_GENERATE, "ids", "logprobs"}};
    for (int r = 0; r < 2; r++) {
        char args[1024];
        CHECK_INT(s_cmd(none, runs[r].args), 0);
        json_t *cpu = json_loads(s_out, 0, NULL);
        snprintf(args, sizeof args, "%s --device cuda", runs[r].args);
        CHECK_INT(s_cmd(env, args), 0);
        json_t *gpu = json_loads(s_out, 0, NULL);
        CHECK_MSG(cpu && gpu, "not JSON: %s", s_out);
        json_t *cs = json_object_get(cpu, "samples"), *gs = json_object_get(gpu, "samples");
        json_t *co = cs ? json_array_get(cs, 0) : cpu, *go = gs ? json_array_get(gs, 0) : gpu;
        json_t *a = json_object_get(co, runs[r].lps), *b = json_object_get(go, runs[r].lps);
        CHECK_MSG(json_equal(json_object_get(co, runs[r].ids), json_object_get(go, runs[r].ids)),
                  "%s: the tokens differ", args);
        CHECK_INT(json_array_size(a), cs ? 30 : 29); // generate's ids end with the stop token
        CHECK_INT(json_array_size(b), json_array_size(a));
        double worst = 0, differ = 0;
        for (size_t i = 0; i < json_array_size(a); i++) {
            double d =
                json_real_value(json_array_get(a, i)) - json_real_value(json_array_get(b, i));
            worst = fabs(d) > worst ? fabs(d) : worst;
            differ += d != 0;
        }
        printf("%.8s --device cuda (emulated) vs the CPU: worst |logprob difference| %.3g over "
               "%zu tokens\n",
               runs[r].args, worst, json_array_size(a));
        CHECK_MSG(worst < 0.1 && differ > 0, "%s: worst %g (the tolerance is 0.1), %g differ", args,
                  worst, differ);
        json_decref(cpu);
        json_decref(gpu);
    }
    CHECK_INT(s_cmd(env, S_EVAL " --limit 2 --json --device cuda"), 0);
    CHECK_CONTAINS(s_out, "\"accuracy\"");
    s_refused(env, "cuda:1", "there is 1 visible GPU (cuda:0)", 0);
    // serve on the device: a completion with top logprobs (rl_model_logits on the device)
    char script[] = "/tmp/rl_test_serve_XXXXXX";
    int fd = mkstemp(script);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL);
    if (f) {
        fprintf(f,
                "log=$(mktemp)\n"
                "env %s '%s/rlctl' " S_SERVE " --device cuda >\"$log\" 2>&1 &\n"
                "pid=$!; port=\n"
                "for i in $(seq 100); do\n"
                "  port=$(sed -n 's|.*http://127.0.0.1:\\([0-9]*\\)/v1.*|\\1|p' \"$log\")\n"
                "  [ -n \"$port\" ] && break; sleep 0.2\n"
                "done\n"
                "curl -s --max-time 60 \"http://127.0.0.1:$port/v1/completions\" -d '{\"prompt\": "
                "\"47*3+512=\", \"max_tokens\": 40, \"temperature\": 0, \"logprobs\": 2}'\n"
                "kill $pid; wait $pid; cat \"$log\"; rm -f \"$log\"\n",
                env, RL_BINARY_DIR);
        fclose(f);
        char cmd[512];
        snprintf(cmd, sizeof cmd, "sh %s 2>&1", script);
        CHECK_INT(rl_test_shell(cmd, s_out, sizeof s_out), 0);
        CHECK_CONTAINS(s_out, "\"text\":\"47*3=141;141+512=653 #### 653\"");
        CHECK_CONTAINS(s_out, "\"top_logprobs\":[{");
        unlink(script);
    }
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " model.device=cuda"), 0);
    CHECK_INT(s_cmd(env, "validate " S_RECIPE " model.device=cuda:1"), 2);
    CHECK_CONTAINS(s_out, "model.device: ");
    CHECK_CONTAINS(s_out, "there is 1 visible GPU (cuda:0)");
#endif
}

int main(void) {
    RL_TEST_RUN(s_test_no_gpu);
    RL_TEST_RUN(s_test_emulated);
    RL_TEST_RUN(s_test_device_flags);
    RL_TEST_DONE();
}

// test_mesh_run — `rlctl run` on a DP×FSDP mesh (docs/mesh.md) against the same run on 1×1, on
// the cookbook's models (0.8M parameters), 5 optimizer steps each:
//   1. every algorithm trains on the mesh as on 1×1: SFT (full tuning) and GRPO (LoRA, a KL term
//      to the reference = the adapter disabled) on dp 2 × fsdp 1, dp 1 × fsdp 2 and dp 2 × fsdp 2;
//      GRPO with full tuning (the frozen reference sharded too), PPO (LoRA, the critic sharded on
//      the actor's ranks, in a worker of its own, or sharded on a mesh of its own), GRPO with the
//      reference sharded on a mesh of its own, DPO and a reward model (LoRA, pairs never split)
//      on dp 1 × fsdp 2 and dp 2 × fsdp 2.
//      Every training metric of every step within the tolerances below of the 1×1 run's, and the
//      final weights (adapter or model) too;
//   2. the placement is printed: the rank grid and one line per rank (roles, host, pid, threads,
//      expected model-state bytes);
//   3. checkpoints reshard: SFT stopped at step 3 on 1×1 and resumed on 2×2, and stopped on 2×2
//      and resumed on 1×1, end where the uninterrupted 1×1 run ends;
//   4. a rank killed mid-run (SIGKILL) stops the run within seconds naming the rank and the
//      signal, and leaves no rank, launcher or worker behind; a rank whose request fails while
//      its peers wait in a collective stops the run naming it, and the stuck ranks are killed;
//   5. rlctl does not link MPI (a 1×1 run never loads it); rlctl validate refuses impossible
//      meshes: devices that are not dp × fsdp, a batch that does not split over the ranks, DPO
//      pairs that would split, a hostfile without its endpoint, a relative rank key;
//   6. across hosts: GRPO (LoRA) on dp 2 × fsdp 2 with ranks 2 and 3 on "another host" (a
//      network namespace behind a veth pair, reached by the launcher through an `ip netns exec`
//      agent in ssh's place, with a host name of its own): the ranks join over tcp with CURVE
//      keys, MPI runs over tcp between the hosts, and the run matches 1×1 as in 1; the placement
//      names each rank's host; a rank whose key is not on mesh.allow stops the run saying so, and
//      nothing is left behind. Where namespaces cannot be made (not root, no CAP_NET_ADMIN) it
//      says so and runs the same with every rank on this host over loopback (the hostfile, tcp
//      and CURVE path all the same).
#include "rl_test.h"
#include "rl_test_run.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static char s_tmp[] = "/tmp/rl_test_mesh_XXXXXX";
#define s_rlctl(args) rl_test_rlctl(s_tmp, args)
#define s_out() rl_test_out(s_tmp)

// The 1×1 run against a mesh run: the same float sums in another order (rank shares, then the
// collectives); sampling afterwards sees the slightly different weights. A metric m passes when
// |m - m_1x1| <= S_TOL * max(|m_1x1|, S_FLOOR); weights when the update's error is below
// S_TOL_UPDATE of the update (or every weight within S_TOL_W when the base is not at hand).
#define S_TOL 2e-3
#define S_FLOOR 0.05
#define S_TOL_W 5e-4

static const char *const s_shapes[][2] = {{"2", "1"}, {"1", "2"}, {"2", "2"}};

// The recipes: the cookbook's, shortened (5 steps, no evaluation, no warmup, small batches).
static const struct {
    const char *algo, *recipe;
} s_recipes[] = {
    {"sft", "cookbook/sft_arith.yaml train.batch_size=16 train.micro_batch_size=4 "
            "train.log_every=1"},
    {"grpo", "cookbook/grpo_lora.yaml train.batch_size=4 algorithm.num_generations=4 "
             "train.micro_batch_size=4 algorithm.beta=0.04"},
    {"ppo", "cookbook/ppo_lora.yaml train.batch_size=8 algorithm.epochs=2 "
            "algorithm.mini_batches=2 train.micro_batch_size=2"},
    {"ppo_cw", "cookbook/ppo_lora.yaml train.batch_size=8 algorithm.epochs=2 "
               "algorithm.mini_batches=2 train.micro_batch_size=2 roles.critic=worker"},
    {"ppo_cm", "cookbook/ppo_lora.yaml train.batch_size=8 algorithm.epochs=2 "
               "algorithm.mini_batches=2 train.micro_batch_size=2 roles.critic=mesh"},
    {"grpo_rm", "cookbook/grpo_lora.yaml train.batch_size=4 algorithm.num_generations=4 "
                "train.micro_batch_size=4 algorithm.beta=0.04 roles.reference=mesh"},
    {"dpo", "cookbook/dpo_lora.yaml train.batch_size=4 train.micro_batch_size=2 "
            "train.log_every=1"},
    {"rm", "cookbook/rm_lora.yaml train.batch_size=4 train.micro_batch_size=2 "
           "train.log_every=1"},
};

static void s_args(char *buf, size_t cap, const char *algo, const char *run, const char *extra) {
    char full[700]; // GRPO with full tuning: s_grpo_full_recipe's file
    snprintf(full, sizeof full, "%s/grpo_full.yaml", s_tmp);
    const char *base = full;
    for (size_t i = 0; i < sizeof s_recipes / sizeof s_recipes[0]; i++) {
        base = !strcmp(algo, s_recipes[i].algo) ? s_recipes[i].recipe : base;
    }
    snprintf(buf, cap,
             "run %s%s%s run.dir=%s/%s train.steps=5 optim.warmup_steps=0 train.eval_every=0 "
             "train.save_every=0 roles.samplers=1 roles.actor_threads=1 roles.sampler_threads=1 "
             "%s",
             base[0] == '/' ? "" : RL_SOURCE_DIR, base[0] == '/' ? "" : "/", base, s_tmp, run,
             extra);
}

// GRPO with full tuning: the cookbook's GRPO recipe without its lora section.
static void s_grpo_full_recipe(void) {
    char p[700];
    snprintf(p, sizeof p, "%s/grpo_full.yaml", s_tmp);
    FILE *f = fopen(p, "w");
    if (!f) {
        CHECK_MSG(0, "cannot write %s", p);
        return;
    }
    fprintf(f,
            "run: {name: g, seed: 0}\n"
            "model: {path: %s/cookbook/models/arith-noisy-base}\n"
            "data: {train: %s/cookbook/data/arith/train.jsonl, format: prompt, "
            "answer_field: answer, max_prompt_length: 16}\n"
            "algorithm: {name: grpo, num_generations: 4, beta: 0.04}\n"
            "sampling: {temperature: 1.0, max_new_tokens: 40}\n"
            "rewards:\n  - builtin: math_answer\n"
            "optim: {lr: 1.0e-4}\n"
            "train: {batch_size: 4, micro_batch_size: 4}\n",
            RL_SOURCE_DIR, RL_SOURCE_DIR);
    fclose(f);
}

// Every numeric metric of every training line of run `b` against run `a`.
static void s_compare_metrics(const char *a, const char *b) {
    rl_test_metrics_close(s_tmp, a, b, S_TOL, S_FLOOR, 5);
}

static void s_compare_final(const char *a, const char *b, const char *file) {
    rl_test_final_close(s_tmp, a, b, file, S_TOL_W);
}

static void s_case(const char *algo, const char *tune, const char *extra, int all_shapes) {
    char run[64], args[2048], ex[512];
    snprintf(run, sizeof run, "%s-%s-1x1", algo, tune);
    s_args(args, sizeof args, algo, run, extra);
    int rc = s_rlctl(args);
    if (rc != 0) {
        char *out = s_out();
        CHECK_MSG(0, "%s failed (%d): %s", run, rc, out ? out : "");
        free(out);
        return;
    }
    // a reward model's final/ is an HF sequence classifier (LoRA merged)
    const char *file = !strcmp(tune, "full") || !strcmp(algo, "rm") ? "model.safetensors"
                                                                    : "adapter_model.safetensors";
    for (int k = all_shapes ? 0 : 1; k < 3; k++) {
        char mrun[64];
        snprintf(mrun, sizeof mrun, "%s-%s-%sx%s", algo, tune, s_shapes[k][0], s_shapes[k][1]);
        snprintf(ex, sizeof ex, "%s mesh.dp=%s mesh.fsdp=%s", extra, s_shapes[k][0],
                 s_shapes[k][1]);
        s_args(args, sizeof args, algo, mrun, ex);
        rc = s_rlctl(args);
        char *out = s_out();
        CHECK_MSG(rc == 0, "%s failed (%d): %s", mrun, rc, out ? out : "");
        if (rc == 0 && k == 2) { // the placement: the grid, then one line per rank
            CHECK_MSG(strstr(out, "mesh dp 2 x fsdp 2 = 4 ranks [0, 1], [2, 3]") &&
                          strstr(out, "actor/3 pid") && strstr(out, "MiB"),
                      "no placement printed: %s", out);
            // a critic or reference on a mesh of its own: its four ranks, their own processes
            const char *own = !strcmp(algo, "ppo_cm")    ? "critic/3 pid"
                              : !strcmp(algo, "grpo_rm") ? "reference/3 pid"
                                                         : NULL;
            CHECK_MSG(!own || strstr(out, own), "no placement line '%s': %s", own, out);
        }
        free(out);
        if (rc == 0) {
            s_compare_metrics(run, mrun);
            s_compare_final(run, mrun, file);
        }
    }
}

// 3. SFT stopped at step 3 on one shape and resumed on another ends as the uninterrupted run.
static void s_reshard(const char *from_dp, const char *from_fsdp, const char *to_dp,
                      const char *to_fsdp) {
    char run[64], args[2048], ex[256];
    snprintf(run, sizeof run, "reshard-%sx%s-%sx%s", from_dp, from_fsdp, to_dp, to_fsdp);
    snprintf(ex, sizeof ex, "mesh.dp=%s mesh.fsdp=%s --stop-at 3", from_dp, from_fsdp);
    s_args(args, sizeof args, "sft", run, ex);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(ex, sizeof ex, "mesh.dp=%s mesh.fsdp=%s --resume", to_dp, to_fsdp);
    s_args(args, sizeof args, "sft", run, ex);
    int rc = s_rlctl(args);
    char *out = s_out();
    CHECK_MSG(rc == 0, "%s: resume failed (%d): %s", run, rc, out ? out : "");
    free(out);
    if (rc == 0) {
        s_compare_metrics("sft-full-1x1", run);
        s_compare_final("sft-full-1x1", run, "model.safetensors");
    }
}

// 4. A rank killed mid-run: the run stops, names it, leaves nothing behind.
static void s_rank_death(void) {
    char args[2048];
    s_args(args, sizeof args, "grpo", "death",
           "train.steps=200 mesh.dp=2 mesh.fsdp=2 roles.heartbeat=0.5");
    pid_t ctl = rl_test_spawn(s_tmp, args, "death.txt");
    char path[600];
    snprintf(path, sizeof path, "%s/death.txt", s_tmp);
    pid_t victim = 0;
    for (int t = 0; t < 1200 && !victim; t++) { // the placement names each rank's pid
        char *out = rl_test_read_file(path, NULL);
        const char *p = out ? strstr(out, "actor/2 pid ") : NULL;
        if (p && strstr(out, "step 2/")) {
            victim = (pid_t)atoi(p + strlen("actor/2 pid "));
        }
        free(out);
        rl_test_nap();
    }
    CHECK_MSG(victim > 0, "no step 2 with a placement line for actor/2");
    pid_t kids[64];
    int nk = rl_test_children(ctl, kids, 64); // the launcher, samplers, reward
    pid_t gone[256];
    int ng = 0;
    for (int i = 0; i < nk; i++) {
        gone[ng++] = kids[i];
        ng += rl_test_children(kids[i], gone + ng, 64); // the launcher's ranks
    }
    if (victim > 0) {
        kill(victim, SIGKILL);
    }
    int st = rl_test_wait_exit(ctl, 60);
    char *out = rl_test_read_file(path, NULL);
    CHECK_MSG(st != 0 && st != -1, "the run did not stop with an error (%d)", st);
    CHECK_MSG(out && strstr(out, "worker actor/2 (rank 2 of the actor mesh dp 2 x fsdp 2, pid") &&
                  strstr(out, "was killed by signal 9"),
              "the error does not name rank 2 and its signal: %s", out ? out : "");
    CHECK_MSG(rl_test_all_gone(gone, ng, 10), "a rank, the launcher or a worker outlived the run");
    free(out);
}

// 4b. One rank fails its second train request while its peers wait for it in a collective: the
// run stops naming it, the stuck ranks are killed, nothing is left.
static void s_rank_fails(void) {
    char args[2048], path[600];
    s_args(args, sizeof args, "grpo", "fails", "mesh.dp=2 mesh.fsdp=2");
    setenv("RLCTL_FAULT", "train_rank1@2", 1);
    pid_t ctl = rl_test_spawn(s_tmp, args, "fails.txt");
    unsetenv("RLCTL_FAULT");
    pid_t kids[64], all[256];
    int ng = 0;
    for (int t = 0; t < 200 && ng < 3; t++) { // the launcher, the sampler, the reward worker
        ng = rl_test_children(ctl, kids, 64);
        rl_test_nap();
    }
    memcpy(all, kids, (size_t)ng * sizeof *all);
    for (int i = 0, n0 = ng; i < n0; i++) {
        ng += rl_test_children(kids[i], all + ng, 64); // the launcher's ranks
    }
    int st = rl_test_wait_exit(ctl, 60);
    snprintf(path, sizeof path, "%s/fails.txt", s_tmp);
    char *out = rl_test_read_file(path, NULL);
    CHECK_MSG(st != 0 && st != -1, "the run did not stop with an error (%d)", st);
    CHECK_MSG(out && strstr(out, "actor/1") && strstr(out, "injected fault train_rank1"),
              "the error does not name actor/1 and its failure: %s", out ? out : "");
    CHECK_MSG(rl_test_all_gone(all, ng, 10), "a rank, the launcher or a worker outlived the run");
    free(out);
}

// 5. rlctl validate: impossible meshes, each reported at its key.
static void s_validate(void) {
    char args[1024];
    struct {
        const char *recipe, *extra, *want;
    } cases[] = {
        {"grpo_lora", "mesh.dp=2 mesh.fsdp=2 mesh.devices=3",
         "mesh.devices: 3 devices cannot hold a mesh of dp 2 x fsdp 2 = 4 ranks"},
        {"grpo_lora", "mesh.dp=3",
         "mesh.dp: a mesh of dp 3 x fsdp 1 = 3 ranks cannot split the "
         "128 sequences"},
        {"dpo_lora", "mesh.fsdp=32",
         "mesh.fsdp: a mesh of dp 1 x fsdp 32 = 32 ranks cannot split "
         "the pairs of"},
        {"grpo_lora", "mesh.dp=2 mesh.hostfile=" RL_SOURCE_DIR "/cookbook/grpo_lora.yaml",
         "mesh.hostfile: needs mesh.endpoint"},
        {"grpo_lora",
         "mesh.dp=2 mesh.hostfile=" RL_SOURCE_DIR "/cookbook/grpo_lora.yaml "
         "mesh.endpoint=tcp://10.0.0.1:0 mesh.rank_key=keys/rank",
         "mesh.rank_key: \"keys/rank\" is read on each rank's host: give an absolute path"},
        {"grpo_lora", "mesh.dp=2 mesh.endpoint=tcp://10.0.0.1:0",
         "mesh.endpoint: is for ranks on other hosts: set mesh.hostfile too"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "validate %s/cookbook/%s.yaml %s", RL_SOURCE_DIR,
                 cases[i].recipe, cases[i].extra);
        int rc = s_rlctl(args);
        char *out = s_out();
        CHECK_MSG(rc != 0 && out && strstr(out, cases[i].want) && strstr(out, "<override"),
                  "validate %s %s: want '%s' at its override, got (%d): %s", cases[i].recipe,
                  cases[i].extra, cases[i].want, rc, out ? out : "");
        free(out);
    }
}

// 6. Across hosts: ranks 2 and 3 in a network namespace of their own.
static void s_across_hosts(void) {
    rl_test_netns_t net;
    char why[512], cmd[4096], args[4096], ex[3000], agent[1200] = "";
    char hosts[128] = "localhost slots=4";
    // RL_TEST_NO_NETNS=1: as where namespaces cannot be made
    int ns = !getenv("RL_TEST_NO_NETNS") && rl_test_netns_up(&net, 'm', 232, why, sizeof why) == 0;
    if (getenv("RL_TEST_NO_NETNS")) {
        memset(&net, 0, sizeof net);
        snprintf(why, sizeof why, "RL_TEST_NO_NETNS is set");
    }
    if (ns) {
        printf("ranks 2 and 3 in network namespace %s at %s, the controller at %s\n", net.ns,
               net.there, net.here);
        snprintf(agent, sizeof agent,
                 ", --mca, plm_rsh_agent, \"%s/tests/netns_agent.sh %s\", --mca, "
                 "oob_tcp_if_include, %s, --mca, btl_tcp_if_include, %s",
                 RL_SOURCE_DIR, net.ns, net.subnet, net.subnet);
        snprintf(hosts, sizeof hosts, "localhost slots=2\\n%s slots=2", net.there);
    } else { // the hostfile's path all the same (tcp, CURVE), every rank on this host
        printf("network namespaces unavailable here (%s): the hostfile names only localhost and "
               "the ranks connect over loopback\n",
               why);
        snprintf(net.here, sizeof net.here, "127.0.0.1");
        snprintf(net.there, sizeof net.there, "localhost");
    }
    snprintf(cmd, sizeof cmd,
             "exec 2>&1; set -e; cd %s; mkdir -p keys; %s/rlctl keygen --out keys/ctl; "
             "%s/rlctl keygen --out keys/rank; cp keys/rank/key.pub keys/allow; "
             "cp keys/ctl/key.pub keys/wrong_allow; "
             "printf '%s\\n' > keys/hosts",
             s_tmp, RL_BINARY_DIR, RL_BINARY_DIR, hosts);
    CHECK_MSG(rl_test_shell(cmd, why, sizeof why) == 0, "keys: %s", why);
    for (int refused = 0; refused < 2; refused++) {
        const char *run = refused ? "hosts-refused" : "grpo-lora-hosts";
        snprintf(ex, sizeof ex,
                 "mesh.dp=2 mesh.fsdp=2 mesh.hostfile=%s/keys/hosts mesh.endpoint=tcp://%s:0 "
                 "mesh.key=%s/keys/ctl/key mesh.rank_key=%s/keys/rank/key "
                 "mesh.allow=%s/keys/%s 'mesh.launcher_args=[--mca, btl_base_warn_component_"
                 "unused, 0%s]' roles.request_timeout=60",
                 s_tmp, net.here, s_tmp, s_tmp, s_tmp, refused ? "wrong_allow" : "allow", agent);
        s_args(args, sizeof args, "grpo", run, ex);
        char outname[96];
        snprintf(outname, sizeof outname, "%s.txt", run); // each run its own: no stale output
        pid_t ctl = rl_test_spawn(s_tmp, args, outname);
        // every process of the run as it appears: workers, the launcher, the agent, the ranks
        // on both hosts; until the ranks said hello (or the run ended)
        snprintf(cmd, sizeof cmd, "%s/%s", s_tmp, outname);
        pid_t all[256] = {ctl};
        int ng = 1;
        for (int t = 0; t < 1200 && !rl_test_gone(ctl); t++) {
            for (int i = 0; i < ng && ng < 192; i++) {
                pid_t kids[64];
                int nk = rl_test_children(all[i], kids, 64);
                for (int k = 0; k < nk && ng < 192; k++) {
                    int seen = 0;
                    for (int j = 0; j < ng; j++) {
                        seen |= all[j] == kids[k];
                    }
                    all[ng] = kids[k];
                    ng += !seen;
                }
            }
            char *o = rl_test_read_file(cmd, NULL);
            int ready = o && strstr(o, "workers ready");
            free(o);
            if (ready) {
                break;
            }
            rl_test_nap();
        }
        int st = rl_test_wait_exit(ctl, 240);
        char *out = rl_test_read_file(cmd, NULL);
        char host[64] = "", line[128];
        snprintf(host, sizeof host, "%s", net.there);
        for (char *c = host; *c; c++) {
            *c = *c == '.' ? '-' : *c; // the agent's host name
        }
        if (!ns) {
            gethostname(host, sizeof host - 1);
        }
        if (!refused) {
            CHECK_MSG(st == 0, "%s failed (%d): %s", run, st, out ? out : "");
            snprintf(line, sizeof line, "%-15.15s  actor/2 pid", host);
            CHECK_MSG(out && strstr(out, line) && strstr(out, "actor/3 pid"),
                      "the placement does not put rank 2 on %s: %s", host, out ? out : "");
            if (st == 0) {
                s_compare_metrics("grpo-lora-1x1", run);
                s_compare_final("grpo-lora-1x1", run, "adapter_model.safetensors");
            }
        } else {
            CHECK_MSG(st != 0 && st != -1 && out && strstr(out, "not on mesh.allow"),
                      "a rank key not on mesh.allow: want the run to stop saying so (%d): %s", st,
                      out ? out : "");
        }
        CHECK_MSG(rl_test_all_gone(all + 1, ng - 1, 15),
                  "%s: a rank, the launcher or a worker "
                  "outlived the run (%d processes watched)",
                  run, ng - 1);
        printf("  %s: %d processes, all gone after the run\n", run, ng - 1);
        free(out);
    }
    rl_test_netns_down(&net);
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "mesh");
    // a 1×1 run never loads MPI: rlctl does not link it (the backend is a module of its own)
    char cmd[1200], out[4096] = "";
    snprintf(cmd, sizeof cmd, "ldd %s/rlctl", RL_BINARY_DIR);
    CHECK_MSG(rl_test_shell(cmd, out, sizeof out) == 0 && strstr(out, "libc.so") &&
                  !strstr(out, "libmpi"),
              "rlctl links MPI: %s", out);
    s_validate();
    printf("SFT, full tuning\n");
    s_case("sft", "full", "", 1);
    printf("GRPO, LoRA, KL to the reference\n");
    s_case("grpo", "lora", "", 1);
    printf("GRPO, full tuning, the reference sharded\n");
    s_grpo_full_recipe();
    s_case("grpo_full", "full", "", 0); // not in s_recipes: s_args takes the file
    printf("PPO, LoRA, the critic on the actor's ranks\n");
    s_case("ppo", "lora", "", 0);
    printf("PPO, LoRA, the critic in a worker of its own (one process)\n");
    s_case("ppo_cw", "lora", "", 0);
    printf("PPO, LoRA, the critic on a mesh of its own (sharded, processes of its own)\n");
    s_case("ppo_cm", "lora", "", 0);
    printf("GRPO, LoRA, the reference on a mesh of its own (sharded)\n");
    s_case("grpo_rm", "lora", "", 0);
    printf("DPO, LoRA\n");
    s_case("dpo", "lora", "", 0);
    printf("a reward model, LoRA\n");
    s_case("rm", "lora", "", 0);
    printf("checkpoints reshard\n");
    s_reshard("1", "1", "2", "2");
    s_reshard("2", "2", "1", "1");
    printf("a rank dies\n");
    s_rank_death();
    printf("a rank fails while its peers wait\n");
    s_rank_fails();
    printf("across hosts\n");
    s_across_hosts();
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

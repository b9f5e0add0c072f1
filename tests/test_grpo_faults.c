// test_grpo_faults — a GRPO run under the faults of docs/reliability.md, each compared with an
// undisturbed run of the same recipe (metrics without timings, adapter bytes, trajectories):
//   0. roles.reference: worker gives the run of the actor-side reference, to the bit;
//   1. intruders: while a run goes, a process of the same uid that rlctl did not start and (as
//      root) a process of another uid find the control socket in the workers' argv and try to
//      join as sampler/0 and actor/0, say a failing hello, inject replies and heartbeats, and
//      wait for weights; the run finishes with the metrics of the undisturbed run, the intruders
//      receive nothing, and the controller reports the messages it dropped;
//   2. a sampler that answers garbage (an id outside the vocabulary, a NaN logprob, a finish
//      reason of 9; RLCTL_FAULT) stops the run, naming the worker and what was wrong;
//   3. the store failing after the actor's update: the step keeps its records (written before
//      the update) and its metrics line, a checkpoint of it is written, and the resumed run ends
//      with the undisturbed run's metrics and trajectories (that step's old logprobs aside);
//   4. writing final/ failing: the rescue checkpoint of the last step is written, no half
//      final/ is left, and a resume writes final/ byte-identical to the undisturbed one (after
//      a resume into a damaged trajectory store was refused, naming it and changing nothing,
//      and `rlctl traj salvage` copied what was readable into a new store); the
//      weight sync failing after an update leaves the step whole, and a resume ends as the
//      undisturbed run; a sampler that stops (SIGSTOP) is lost after 10 heartbeats;
//   5. resuming from an older checkpoint moves the newer ones aside (a new branch), a plain
//      --resume continues the new branch, and a corrupt newest checkpoint is skipped (named);
//      a NaN or one flipped bit in the newest adapter fails its checksum, an inf in one without
//      a manifest (an older rlctl's) is refused by the actor, a state.json whose step is not its
//      folder's, whose num_tokens is negative or whose n_trainable is not the size of the loaded
//      weights is refused: each skipped naming the file (and tensor or field), the run
//      resuming from the one before; a step past train.steps (a copy named otherwise, or
//      train.steps lowered) stops the resume, moving nothing;
//   6. SIGTERM while a reward hangs: the run is gone within roles.stop_grace (the step could
//      not finish), names the newest checkpoint, and the process the plugin started is gone
//      too; a second SIGTERM stops at once.
#include "rl_test.h"
#include "rl_test_lmdb.h"
#include "rl_test_run.h"
#include "rl_traj.h"
#include "rl_wire.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static char s_tmp[] = "/tmp/rl_test_faults_XXXXXX";
#define s_rlctl(args) rl_test_rlctl(s_tmp, args)
#define s_out() rl_test_out(s_tmp)
#define s_exists(rel) rl_test_exists(s_tmp, rel)

static double s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The recipe of every run here: the cookbook's arith task, 4 steps of 4 prompts x 4 samples,
// LoRA, 2 samplers, evaluation every 2 steps, a checkpoint every 2; `rewards` replaces the
// math_answer reward, `extra` appends keys.
static void s_recipe(const char *name, const char *rewards, const char *extra) {
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", s_tmp, name);
    FILE *f = fopen(p, "w");
    if (!f) {
        return;
    }
    fprintf(f,
            "run: {name: g, seed: 11}\n"
            "model: {path: %s/cookbook/models/arith-base}\n"
            "lora: {enabled: true, r: 4, alpha: 8, target_modules: [q_proj, v_proj]}\n"
            "data: {train: %s/cookbook/data/arith/train.jsonl, "
            "eval: %s/cookbook/data/arith/eval.jsonl, format: prompt, answer_field: answer, "
            "max_prompt_length: 16}\n"
            "algorithm: {name: grpo, num_generations: 4, beta: 0.04}\n"
            "sampling: {temperature: 1.0, max_new_tokens: 32}\n"
            "rewards:\n%s"
            "optim: {lr: 1.0e-3}\n"
            "train: {steps: 4, batch_size: 4, micro_batch_size: 16, eval_every: 2, "
            "eval_samples: 8, save_every: 2, keep_checkpoints: 5}\n"
            "roles: {samplers: 2, actor_threads: 1, sampler_threads: 1%s}\n",
            RL_SOURCE_DIR, RL_SOURCE_DIR, RL_SOURCE_DIR,
            rewards ? rewards : "  - {name: correct, builtin: math_answer}\n", extra ? extra : "");
    fclose(f);
}

// Runs rlctl with RLCTL_FAULT=fault (NULL: none) and checks its exit status; on a mismatch the
// output is printed.
static void s_run(const char *args, const char *fault, int want) {
    if (fault) {
        setenv("RLCTL_FAULT", fault, 1);
    }
    int got = s_rlctl(args);
    unsetenv("RLCTL_FAULT");
    CHECK_MSG(got == want, "rlctl %s%s%s: exit %d, wanted %d", args, fault ? " with fault " : "",
              fault ? fault : "", got, want);
    if (got != want) {
        char *out = s_out();
        fprintf(stderr, "%s\n", out ? out : "(no output)");
        free(out);
    }
}

// 1 when the output of the last s_run holds `what` (printed when not).
static int s_out_has(const char *what) {
    char *out = s_out();
    int ok = out && strstr(out, what);
    CHECK_MSG(ok, "the output lacks \"%s\":\n%s", what, out ? out : "(none)");
    free(out);
    return ok;
}

// Drops the eval/* values of step `step`'s line.
static void s_drop_eval(json_t *lines, int step) {
    for (size_t i = 0; i < json_array_size(lines); i++) {
        json_t *o = json_array_get(lines, i);
        if (json_integer_value(json_object_get(o, "step")) != step) {
            continue;
        }
        const char *k;
        json_t *v;
        void *it;
        json_object_foreach_safe(o, it, k, v) {
            if (strncmp(k, "eval/", 5) == 0 || strcmp(k, "timing/eval") == 0) {
                json_object_del(o, k);
            }
        }
    }
}

// Metrics of two runs, timings aside, are equal; at step no_eval (0: none) the evaluation, which
// a run that failed in that step's sync never ran, is left out.
static void s_same_metrics_but(const char *a, const char *b, int no_eval) {
    json_t *x = rl_test_metrics(s_tmp, a), *y = rl_test_metrics(s_tmp, b);
    if (no_eval > 0) {
        s_drop_eval(x, no_eval);
        s_drop_eval(y, no_eval);
    }
    int eq = json_equal(x, y);
    CHECK_MSG(eq, "metrics of %s and %s differ", a, b);
    if (!eq) {
        char *tx = json_dumps(x, JSON_COMPACT), *ty = json_dumps(y, JSON_COMPACT);
        fprintf(stderr, "%s:\n%s\n%s:\n%s\n", a, tx ? tx : "", b, ty ? ty : "");
        free(tx);
        free(ty);
    }
    CHECK_INT((int)json_array_size(x), 5); // step 0 (evaluation) and 4 steps
    json_decref(x);
    json_decref(y);
}

static void s_same_metrics(const char *a, const char *b) {
    s_same_metrics_but(a, b, 0);
}

// Two runs' trajectory stores hold the same records; `skip_old_step`'s old logprobs may be absent
// in b (the failed second transaction of that step).
static void s_same_store(const char *a, const char *b, int skip_old_step) {
    char pa[700], pb[700], err[512];
    snprintf(pa, sizeof pa, "%s/%s/trajectories.lmdb", s_tmp, a);
    snprintf(pb, sizeof pb, "%s/%s/trajectories.lmdb", s_tmp, b);
    rl_traj_t *ta = NULL, *tb = NULL;
    CHECK_INT(rl_traj_open(pa, RL_TRAJ_READONLY, &ta, err, sizeof err), 0);
    CHECK_INT(rl_traj_open(pb, RL_TRAJ_READONLY, &tb, err, sizeof err), 0);
    for (int step = 1; ta && tb && step <= 4; step++) {
        rl_traj_record_t *ra = NULL, *rb = NULL;
        int na = 0, nb = 0;
        CHECK_INT(rl_traj_read_step(ta, (uint64_t)step, &ra, &na, err, sizeof err), 0);
        CHECK_INT(rl_traj_read_step(tb, (uint64_t)step, &rb, &nb, err, sizeof err), 0);
        CHECK_MSG(na == nb && na == 16, "step %d: %d and %d records", step, na, nb);
        for (int i = 0; i < na && i < nb; i++) {
            const rl_traj_record_t *x = &ra[i], *y = &rb[i];
            int n = x->n_completion;
            int same = n == y->n_completion &&
                       memcmp(x->completion_ids, y->completion_ids, (size_t)n * 4) == 0 &&
                       memcmp(x->sampler_logprobs, y->sampler_logprobs, (size_t)n * 4) == 0 &&
                       x->reward == y->reward && x->advantage == y->advantage &&
                       (x->ref_logprobs == NULL) == (y->ref_logprobs == NULL);
            if (step == skip_old_step) {
                same = same && y->old_logprobs == NULL;
            } else {
                same = same && x->old_logprobs && y->old_logprobs &&
                       memcmp(x->old_logprobs, y->old_logprobs, (size_t)n * 4) == 0;
            }
            CHECK_MSG(same, "step %d record %d differs between %s and %s", step, i, a, b);
        }
        rl_traj_records_free(&ra, na);
        rl_traj_records_free(&rb, nb);
    }
    rl_traj_close(&ta);
    rl_traj_close(&tb);
}

// ---- 1. intruders --------------------------------------------------------------------------

// The argument after `flag` in process pid's command line into out; 0 when there is none.
static int s_arg_after(pid_t pid, const char *flag, char *out, size_t cap) {
    char p[64];
    size_t len = 0;
    snprintf(p, sizeof p, "/proc/%d/cmdline", (int)pid);
    char *argv = rl_test_read_file(p, &len);
    int found = 0;
    for (size_t o = 0; argv && !found && o < len; o += strlen(argv + o) + 1) {
        size_t next = o + strlen(argv + o) + 1;
        if (strcmp(argv + o, flag) == 0 && next < len) {
            snprintf(out, cap, "%s", argv + next);
            found = 1;
        }
    }
    free(argv);
    return found;
}

// The control socket: the --connect argument of a worker of controller `ctl`, or "".
static void s_find_endpoint(pid_t ctl, char *ep, size_t cap) {
    ep[0] = '\0';
    pid_t kids[64];
    int n = rl_test_children(ctl, kids, 64);
    for (int i = 0; i < n && !s_arg_after(kids[i], "--connect", ep, cap); i++) {
    }
}

static volatile sig_atomic_t s_intruder_stop;
static void s_on_term(int sig) {
    (void)sig;
    s_intruder_stop = 1;
}

// Sends m's frames on a raw DEALER without waiting (frees m).
static void s_raw_send(void *sock, rl_msg_t *m) {
    const rl_frame_t *fr;
    int nf;
    if (m && rl_msg_encode(m, &fr, &nf) == 0) {
        for (int i = 0; i < nf; i++) {
            zmq_send(sock, fr[i].data, fr[i].len, (i + 1 < nf ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
        }
    }
    rl_msg_free(&m);
}

// The intruder (a child process; as `uid` when >= 0): finds the control socket, connects as
// sampler/0, actor/0 and sampler/0#hb, and until SIGTERM says a failing hello, injects ok replies
// for request ids 1..400 and heartbeats, and counts what it receives. Exits 0 (it attacked and
// received nothing), 1 (never found the socket) or 2 (it received messages).
static void s_intruder(pid_t ctl, int uid) {
    signal(SIGTERM, s_on_term);
    if (uid >= 0 && (setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0)) {
        _exit(3);
    }
    char ep[512] = "";
    for (double t0 = s_now(); !ep[0] && !s_intruder_stop && s_now() - t0 < 60;) {
        s_find_endpoint(ctl, ep, sizeof ep);
        rl_test_nap();
    }
    if (!ep[0]) {
        _exit(1);
    }
    void *ctx = zmq_ctx_new();
    static const char *const ids[3] = {"sampler/0", "actor/0", "sampler/0#hb"};
    void *socks[3];
    int zero = 0;
    for (int k = 0; k < 3; k++) {
        socks[k] = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(socks[k], ZMQ_ROUTING_ID, ids[k], strlen(ids[k]));
        zmq_setsockopt(socks[k], ZMQ_LINGER, &zero, sizeof zero);
        zmq_connect(socks[k], ep);
    }
    long received = 0;
    uint64_t id = 1;
    for (int round = 0; !s_intruder_stop; round++) {
        for (int k = 0; k < 2; k++) {
            if (round % 50 == 0) {
                rl_msg_t *h = rl_msg_new("hello", 0);
                rl_msg_set_str(h, "role", k ? "actor" : "sampler");
                rl_msg_set_int(h, "rank", 0);
                rl_msg_set_int(h, "pid", (int64_t)getpid());
                rl_msg_set_str(h, "token", "0000");
                rl_msg_set_str(h, "error", "forged hello: the run must not stop on it");
                s_raw_send(socks[k], h);
            }
            for (int j = 0; j < 20; j++) {
                rl_msg_t *r = rl_msg_new("reply", id + (uint64_t)j);
                rl_msg_set_bool(r, "ok", 1);
                rl_msg_set_int(r, "version", 0);
                rl_msg_set_int(r, "model_train_step", 0);
                s_raw_send(socks[k], r);
            }
        }
        s_raw_send(socks[2], rl_msg_new("hb", (uint64_t)round + 1));
        id = id + 20 > 400 ? 1 : id + 20;
        for (int k = 0; k < 3; k++) {
            char buf[64];
            while (zmq_recv(socks[k], buf, sizeof buf, ZMQ_DONTWAIT) >= 0) {
                received++;
            }
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    for (int k = 0; k < 3; k++) {
        zmq_close(socks[k]);
    }
    zmq_ctx_term(ctx);
    _exit(received ? 2 : 0);
}

static void test_intruders(void) {
    char args[2048];
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/a", s_tmp, s_tmp);
    s_run(args, NULL, 0);
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/b", s_tmp, s_tmp);
    pid_t ctl = rl_test_spawn(s_tmp, args, "b.txt");
    int root = geteuid() == 0;
    pid_t in[2] = {-1, -1};
    for (int k = 0; k < (root ? 2 : 1); k++) {
        in[k] = fork();
        if (in[k] == 0) {
            s_intruder(ctl, k == 0 ? -1 : 65534);
        }
    }
    if (!root) {
        printf("test_intruders: the other-uid intruder is skipped (needs root)\n");
    }
    int st = rl_test_wait_exit(ctl, 300);
    for (int k = 0; k < 2; k++) {
        if (in[k] <= 0) {
            continue;
        }
        kill(in[k], SIGTERM);
        int ist = rl_test_wait_exit(in[k], 30);
        CHECK_MSG(ist == 0, "intruder %s: exit %d (1: it never found the socket, 2: it "
                  "received messages meant for the workers)", k ? "of another uid" : "of our uid",
                  ist);
    }
    char p[700];
    snprintf(p, sizeof p, "%s/b.txt", s_tmp);
    char *out = rl_test_read_file(p, NULL);
    CHECK_MSG(st == 0, "the disturbed run: exit %d:\n%s", st, out ? out : "");
    // the same-uid intruder reached the socket: what it sent was dropped, and said so
    CHECK_CONTAINS(out ? out : "", "dropped");
    CHECK(out == NULL || strstr(out, "forged hello") == NULL);
    // logged by the kernel's pid of the sender, the name it gave itself only as a claim (it
    // was logged as "from connection 'sampler/0'", the worker's own name). Only the first few
    // drops are logged, and which of the intruder's two connections ZeroMQ hears first is a
    // race, so either claimed name may be the one in the log.
    CHECK_MSG(out && (strstr(out, "on a connection calling itself 'sampler/0'") ||
                      strstr(out, "on a connection calling itself 'actor/0'")),
              "no drop logged as 'on a connection calling itself <claimed name>':\n%s",
              out ? out : "");
    CHECK_MSG(out && !strstr(out, "from connection '") && !strstr(out, "from sampler/0:"),
              "a dropped message is logged under the name the intruder claimed:\n%s",
              out ? out : "");
    free(out);
    s_same_metrics("a", "b");
    CHECK(rl_test_files_equal(s_tmp, "a/final/adapter_model.safetensors",
                              "b/final/adapter_model.safetensors"));
}

// roles.reference: worker (the reference in a process of its own) gives the metrics, the
// trajectories and the adapter of the run whose actor computes it (beta 0.04 in both).
static void test_reference_worker(void) {
    char args[2048];
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/rw roles.reference=worker", s_tmp,
             s_tmp);
    s_run(args, NULL, 0);
    s_out_has("reference,");
    s_same_metrics("a", "rw");
    s_same_store("a", "rw", 0);
    CHECK(rl_test_files_equal(s_tmp, "a/final/adapter_model.safetensors",
                              "rw/final/adapter_model.safetensors"));
}

// ---- 2. garbage from a sampler --------------------------------------------------------------

static void test_bad_replies(void) {
    static const struct {
        const char *fault, *want;
    } cases[] = {
        {"generate_bad_id@2", "outside the vocabulary"},
        {"generate_bad_logprob@2", "is not a finite number <= 0"},
        {"generate_bad_finish@2", "finish reason 9"},
    };
    char args[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/bad%zu", s_tmp, s_tmp, i);
        s_run(args, cases[i].fault, 1);
        s_out_has("generate reply");
        s_out_has(cases[i].want);
        s_out_has("worker sampler/");
    }
}

// ---- 3. the store fails after the update ----------------------------------------------------

static void test_store_fault(void) {
    char args[2048];
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/st", s_tmp, s_tmp);
    s_run(args, "store@3", 1);
    s_out_has("RLCTL_FAULT=store");
    s_out_has("checkpoint of step 3 written");
    // step 3: its records (pending: no old logprobs) and its metrics line are there
    char p[700], err[512];
    snprintf(p, sizeof p, "%s/st/trajectories.lmdb", s_tmp);
    rl_traj_t *t = NULL;
    CHECK_INT(rl_traj_open(p, RL_TRAJ_READONLY, &t, err, sizeof err), 0);
    if (t) {
        CHECK_INT((int)rl_traj_last_step(t), 2);
        CHECK_INT((int)rl_traj_pending_step(t), 3);
        rl_traj_record_t *recs = NULL;
        int n = 0;
        CHECK_INT(rl_traj_read_step(t, 3, &recs, &n, err, sizeof err), 0);
        CHECK_INT(n, 16);
        CHECK(n > 0 && recs[0].old_logprobs == NULL && recs[0].ref_logprobs != NULL);
        rl_traj_records_free(&recs, n);
        rl_traj_close(&t);
    }
    json_t *m = rl_test_metrics(s_tmp, "st");
    json_t *last = json_array_get(m, json_array_size(m) - 1);
    CHECK_INT((int)json_integer_value(json_object_get(last, "step")), 3);
    json_decref(m);
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/st --resume", s_tmp, s_tmp);
    s_run(args, NULL, 0);
    s_same_metrics("a", "st");
    s_same_store("a", "st", 3);
}

// ---- 4. final/ cannot be written ------------------------------------------------------------

static void test_final_fault(void) {
    char args[2048];
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/fi", s_tmp, s_tmp);
    s_run(args, "final", 1);
    s_out_has("RLCTL_FAULT=final");
    s_out_has("checkpoint of step 4 written");
    CHECK(!s_exists("fi/final"));
    CHECK(s_exists("fi/checkpoints/step-4/DONE"));
    // a page of the trajectory store lost (zeroed): the resume refuses to append to it, names
    // it and the way out, and leaves the run folder as it was; salvage, then the resume goes on
    char p[700], list[700], before[1 << 14], after[1 << 14];
    snprintf(p, sizeof p, "%s/fi/trajectories.lmdb", s_tmp);
    int lost = 0;
    CHECK(rl_test_traj_zero_leaf(p, &lost, NULL) > 0);
    // (LMDB's lock.mdb aside: every reader writes its table of readers there)
    snprintf(list, sizeof list, "cd '%s/fi' && find . ! -name .lock ! -name lock.mdb -printf "
             "'%%p %%s %%T@\\n' | sort", s_tmp);
    CHECK_INT(rl_test_shell(list, before, sizeof before), 0);
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/fi --resume", s_tmp, s_tmp);
    s_run(args, NULL, 1);
    s_out_has("/fi/trajectories.lmdb is damaged: ");
    s_out_has("nothing was written. `rlctl traj salvage ");
    CHECK_INT(rl_test_shell(list, after, sizeof after), 0);
    CHECK_MSG(strcmp(before, after) == 0, "the refused resume changed the run folder:\n%s\n"
              "now:\n%s", before, after);
    snprintf(args, sizeof args, "traj salvage %s/fi", s_tmp);
    s_run(args, NULL, 0);
    char want[64];
    snprintf(want, sizeof want, "(%d lost)", lost);
    s_out_has(want);
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/fi --resume", s_tmp, s_tmp);
    s_run(args, NULL, 0);
    CHECK(rl_test_files_equal(s_tmp, "a/final/adapter_model.safetensors",
                              "fi/final/adapter_model.safetensors"));
    CHECK(!s_exists("fi/final.tmp"));
    s_same_metrics("a", "fi");
}

// The samplers refuse their 3rd load_weights (the sync after step 2): step 2 is whole (metrics
// line, records), its checkpoint is written, and the resumed run ends as the undisturbed one.
static void test_sync_fault(void) {
    char args[2048];
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/sy", s_tmp, s_tmp);
    s_run(args, "load_weights@3", 1);
    s_out_has("RLCTL_FAULT=load_weights");
    s_out_has("checkpoint of step 2 written");
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/sy --resume", s_tmp, s_tmp);
    s_run(args, NULL, 0);
    s_same_metrics_but("a", "sy", 2); // step 2's evaluation came after the failed sync
    CHECK(rl_test_files_equal(s_tmp, "a/final/adapter_model.safetensors",
                              "sy/final/adapter_model.safetensors"));
    s_same_store("a", "sy", 0);
}

// A sampler stopped with SIGSTOP sends no heartbeats: after 10 periods it is lost and the run
// stops naming it; the stopped process is killed with the rest.
static void test_silent_worker(void) {
    char args[2048];
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/hb roles.heartbeat=0.2 "
             "train.steps=40", s_tmp, s_tmp);
    pid_t ctl = rl_test_spawn(s_tmp, args, "hb.txt");
    char p[700];
    snprintf(p, sizeof p, "%s/hb/metrics.jsonl", s_tmp);
    for (int tries = 0; tries < 1200; tries++) {
        char *txt = rl_test_read_file(p, NULL);
        int ok = txt && strstr(txt, "{\"step\":2,");
        free(txt);
        if (ok) {
            break;
        }
        rl_test_nap();
    }
    pid_t kids[64];
    int nk = rl_test_children(ctl, kids, 64), stopped = 0;
    for (int i = 0; i < nk && !stopped; i++) {
        char role[32];
        if (s_arg_after(kids[i], "--role", role, sizeof role) && strcmp(role, "sampler") == 0) {
            stopped = kill(kids[i], SIGSTOP) == 0;
        }
    }
    CHECK(stopped);
    int st = rl_test_wait_exit(ctl, 60);
    snprintf(p, sizeof p, "%s/hb.txt", s_tmp);
    char *out = rl_test_read_file(p, NULL);
    CHECK_MSG(st == 1, "a stopped sampler: exit %d:\n%s", st, out ? out : "");
    CHECK_CONTAINS(out ? out : "", "sent no heartbeat for");
    free(out);
    CHECK_MSG(rl_test_all_gone(kids, nk, 5), "a worker outlived the run");
}

// ---- 5. branches and a corrupt newest checkpoint --------------------------------------------

static void test_branches(void) {
    char args[2048];
    // checkpoints 1, 2, 3 (not 4: the last step writes final/)
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/br train.save_every=1", s_tmp, s_tmp);
    s_run(args, NULL, 0);
    CHECK(s_exists("br/checkpoints/step-3/DONE"));
    // back to step 1: 2 and 3 are moved aside, the new branch writes its own step 2
    snprintf(args, sizeof args,
             "run %s/g.yaml run.dir=%s/br train.save_every=1 --resume %s/br/checkpoints/step-1 "
             "--stop-at 2", s_tmp, s_tmp, s_tmp);
    s_run(args, NULL, 0);
    s_out_has("new branch: moved 2 newer checkpoints (step-2, step-3) to");
    CHECK(s_exists("br/checkpoints/step-2/DONE"));
    CHECK(!s_exists("br/checkpoints/step-3"));
    char p[700];
    snprintf(p, sizeof p, "%s/br/checkpoints", s_tmp);
    DIR *d = opendir(p);
    int abandoned = 0;
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        if (strncmp(e->d_name, "abandoned-", 10) == 0) {
            char rel[800];
            snprintf(rel, sizeof rel, "br/checkpoints/%s/step-3/DONE", e->d_name);
            abandoned += s_exists(rel);
        }
    }
    if (d) {
        closedir(d);
    }
    CHECK_INT(abandoned, 1);
    // a plain resume continues the new branch (step 2), not the abandoned step 3
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/br train.save_every=1 --resume "
             "--stop-at 3", s_tmp, s_tmp);
    s_run(args, NULL, 0);
    s_out_has("checkpoints/step-2 at step 2");
    // the newest (step 3) corrupt: skipped with its name, step 2 resumes
    snprintf(p, sizeof p, "%s/br/checkpoints/step-3/adapter/adapter_model.safetensors", s_tmp);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("not a safetensors file", f);
        fclose(f);
    }
    s_run(args, NULL, 0);
    s_out_has("skipping checkpoints/step-3");
    s_out_has("step-3");
    s_out_has("checkpoints/step-2 at step 2");
}

// The newest checkpoint damaged in the ways a disk, a tool or a hand can damage it: each time a
// plain --resume skips step-3 naming the file and why, resumes from step-2 and stops at 3,
// writing a whole step-3 for the next case (the damaged one goes to abandoned-*).
static void test_damaged_checkpoints(void) {
    char args[2048], resume[2048];
    const char *ad = "dm/checkpoints/step-3/adapter/adapter_model.safetensors";
    const char *ck = "dm/checkpoints/step-3", *state = "dm/checkpoints/step-3/state.json";
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/dm train.save_every=1 --stop-at 3",
             s_tmp, s_tmp);
    s_run(args, NULL, 0);
    snprintf(resume, sizeof resume,
             "run %s/g.yaml run.dir=%s/dm train.save_every=1 --resume --stop-at 3", s_tmp, s_tmp);
    // a NaN written over the adapter's last weight, then one bit flipped in it (finite: it
    // resumed silently before): the manifest's checksum
    for (int k = 0; k < 2; k++) {
        CHECK_INT(rl_test_damage(s_tmp, ad, 4, k == 0 ? 0x7fc00000u : 0), 0);
        s_run(resume, NULL, 0);
        s_out_has("skipping checkpoints/step-3: ");
        s_out_has("/checkpoints/step-3/adapter/adapter_model.safetensors: checksum mismatch");
        s_out_has("checkpoints/step-2 at step 2");
    }
    // an inf in a checkpoint without a manifest (an older rlctl's): taken with a warning, and
    // the actor refuses the tensor
    CHECK_INT(rl_test_unmanifest(s_tmp, ck), 0);
    CHECK_INT(rl_test_damage(s_tmp, ad, 4, 0x7f800000u), 0);
    s_run(resume, NULL, 0);
    s_out_has("/checkpoints/step-3 has no manifest.json (an older rlctl wrote it)");
    s_out_has("skipping checkpoints/step-3: worker actor/0: ");
    s_out_has("lora_B.weight' holds a non-finite value (inf at element 255 of [64, 4])");
    s_out_has("checkpoints/step-2 at step 2");
    // state.json's rules: a step that is not the folder's (it resumed at step 1e15 and did
    // nothing; step 2 inside step-3 moved step-3 itself aside), a negative count
    CHECK_INT(rl_test_unmanifest(s_tmp, ck), 0);
    CHECK_INT(rl_test_edit(s_tmp, state, "\"step\": 3,", "\"step\": 1000000000000000,"), 0);
    s_run(resume, NULL, 0);
    s_out_has("state.json: 'step' is 1000000000000000, but the folder is step-3");
    s_out_has("checkpoints/step-2 at step 2");
    CHECK_INT(rl_test_unmanifest(s_tmp, ck), 0);
    CHECK_INT(rl_test_edit(s_tmp, state, "\"num_tokens\": ", "\"num_tokens\": -"), 0);
    s_run(resume, NULL, 0);
    s_out_has("state.json: 'num_tokens' is -");
    s_out_has("checkpoints/step-2 at step 2");
    // n_trainable that is not the size of the weights the actor loaded
    CHECK_INT(rl_test_unmanifest(s_tmp, ck), 0);
    CHECK_INT(rl_test_edit(s_tmp, state, "\"n_trainable\": ", "\"n_trainable\": 1"), 0);
    s_run(resume, NULL, 0);
    s_out_has("state.json: 'n_trainable' is 1");
    s_out_has(", the loaded weights have ");
    s_out_has("checkpoints/step-2 at step 2");
    // a step past train.steps: a copy named otherwise (no folder name to check it against), or
    // train.steps lowered below the newest: the resume stops, nothing is moved
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp -a %s/%s %s/dm/checkpoints/best", s_tmp, ck, s_tmp);
    CHECK_INT(system(cmd), 0);
    CHECK_INT(rl_test_unmanifest(s_tmp, "dm/checkpoints/best"), 0);
    CHECK_INT(rl_test_edit(s_tmp, "dm/checkpoints/best/state.json", "\"step\": 3,",
                           "\"step\": 1000000000000000,"), 0);
    CHECK_INT(rl_test_edit(s_tmp, "dm/checkpoints/best/state.json", "\"policy_version\": 3,",
                           "\"policy_version\": 0,"), 0);
    snprintf(args, sizeof args, "run %s/g.yaml --resume %s/dm/checkpoints/best", s_tmp, s_tmp);
    s_run(args, NULL, 1);
    s_out_has("best: the checkpoint is of step 1000000000000000, past train.steps 4");
    snprintf(args, sizeof args, "run %s/g.yaml run.dir=%s/dm train.steps=2 --resume", s_tmp,
             s_tmp);
    s_run(args, NULL, 1);
    s_out_has("step-3: the checkpoint is of step 3, past train.steps 2: raise train.steps");
    CHECK(s_exists("dm/checkpoints/step-3/DONE"));
    CHECK(s_exists("dm/checkpoints/step-3/manifest.json"));
}

// ---- 6. signals -----------------------------------------------------------------------------

// Starts a run whose reward hangs (and starts a child) on its 3rd call, waits until it hangs.
// Returns the controller's pid; *plugin_child gets the pid of the process the plugin started.
static pid_t s_start_hanging(const char *name, const char *grace, pid_t *kids, int *nk,
                             pid_t *plugin_child) {
    char rw[1024], pidfile[700], args[2048], extra[128];
    snprintf(pidfile, sizeof pidfile, "%s/%s.pid", s_tmp, name);
    unlink(pidfile);
    snprintf(rw, sizeof rw,
             "  - {name: correct, builtin: math_answer}\n"
             "  - {name: slow, plugin: %s/spawn_hang.so, weight: 0.0, "
             "config: {after: 2, pidfile: %s}}\n",
             RL_TEST_PLUGIN_DIR, pidfile);
    snprintf(extra, sizeof extra, ", reward_timeout: 600, stop_grace: %s", grace);
    char yaml[64];
    snprintf(yaml, sizeof yaml, "%s.yaml", name);
    s_recipe(yaml, rw, extra);
    // no evaluation: the recipe's rewards score it too, and the plugin counts its calls
    snprintf(args, sizeof args, "run %s/%s run.dir=%s/%s train.eval_every=0 data.eval=null",
             s_tmp, yaml, s_tmp, name);
    char out[64];
    snprintf(out, sizeof out, "%s.txt", name);
    pid_t ctl = rl_test_spawn(s_tmp, args, out);
    *plugin_child = -1;
    for (int tries = 0; tries < 1200 && *plugin_child <= 0; tries++) {
        char *txt = rl_test_read_file(pidfile, NULL);
        if (txt && atoi(txt) > 0) {
            *plugin_child = (pid_t)atoi(txt);
        }
        free(txt);
        rl_test_nap();
    }
    CHECK_MSG(*plugin_child > 0, "%s: the plugin never hung", name);
    *nk = rl_test_children(ctl, kids, 64);
    return ctl;
}

static void test_signals(void) {
    pid_t kids[64], child;
    int nk = 0;
    // one SIGTERM, stop_grace 3: the hung step cannot finish; gone within the grace
    pid_t ctl = s_start_hanging("sig1", "3", kids, &nk, &child);
    double t0 = s_now();
    kill(ctl, SIGTERM);
    int st = rl_test_wait_exit(ctl, 30);
    double dt = s_now() - t0;
    char p[700];
    snprintf(p, sizeof p, "%s/sig1.txt", s_tmp);
    char *out = rl_test_read_file(p, NULL);
    CHECK_MSG(st == 1, "SIGTERM: exit %d:\n%s", st, out ? out : "");
    // 3 s of grace; 1 s more for a loaded machine's process exit and this loop's polling
    CHECK_MSG(dt < 4.0, "SIGTERM: gone after %.1f s (roles.stop_grace 3)", dt);
    CHECK_CONTAINS(out ? out : "", "would not finish within roles.stop_grace (3 s)");
    CHECK_CONTAINS(out ? out : "", "the newest complete checkpoint is of step 2");
    free(out);
    CHECK_MSG(rl_test_all_gone(kids, nk, 2), "a worker outlived the run");
    CHECK_MSG(child <= 0 || rl_test_all_gone(&child, 1, 2),
              "the process the plugin started outlived the run");
    CHECK(s_exists("sig1/checkpoints/step-2/DONE"));

    // a long grace: the first SIGTERM waits for the step, the second stops at once
    ctl = s_start_hanging("sig2", "120", kids, &nk, &child);
    kill(ctl, SIGTERM);
    struct timespec ts = {0, 500000000};
    nanosleep(&ts, NULL);
    CHECK_MSG(!rl_test_gone(ctl), "one SIGTERM with 120 s of grace stopped the hung step");
    t0 = s_now();
    kill(ctl, SIGTERM);
    st = rl_test_wait_exit(ctl, 30);
    dt = s_now() - t0;
    snprintf(p, sizeof p, "%s/sig2.txt", s_tmp);
    out = rl_test_read_file(p, NULL);
    CHECK_MSG(st == 1, "second SIGTERM: exit %d:\n%s", st, out ? out : "");
    CHECK_MSG(dt < 2.0, "second SIGTERM: gone after %.1f s", dt);
    CHECK_CONTAINS(out ? out : "", "stopped at once on a second signal");
    free(out);
    CHECK_MSG(rl_test_all_gone(kids, nk, 2), "a worker outlived the run");
    CHECK_MSG(child <= 0 || rl_test_all_gone(&child, 1, 2),
              "the process the plugin started outlived the run");

    // SIGTERM during start-up, while the reward worker is still loading (a plugin whose create
    // never returns in the worker): gone at once, saying so; it took ~5 s (the workers were
    // asked to shut down and given the grace) and said "during step 1"
    char rw[2048], marker[700], pidfile[700], args[2048];
    snprintf(marker, sizeof marker, "%s/startup.marker", s_tmp);
    snprintf(pidfile, sizeof pidfile, "%s/startup.pid", s_tmp);
    unlink(marker);
    unlink(pidfile);
    snprintf(rw, sizeof rw,
             "  - {name: correct, builtin: math_answer}\n"
             "  - {name: slow, plugin: %s/slow_create.so, weight: 0.0, "
             "config: {marker: %s, pidfile: %s}}\n",
             RL_TEST_PLUGIN_DIR, marker, pidfile);
    s_recipe("startup.yaml", rw, ", stop_grace: 20");
    snprintf(args, sizeof args, "run %s/startup.yaml run.dir=%s/startup", s_tmp, s_tmp);
    ctl = rl_test_spawn(s_tmp, args, "startup.txt");
    pid_t loading = -1;
    for (int tries = 0; tries < 1200 && loading <= 0; tries++) {
        char *txt = rl_test_read_file(pidfile, NULL);
        if (txt && atoi(txt) > 0) {
            loading = (pid_t)atoi(txt);
        }
        free(txt);
        rl_test_nap();
    }
    CHECK_MSG(loading > 0, "start-up: the reward worker never started loading");
    nk = rl_test_children(ctl, kids, 64);
    t0 = s_now();
    kill(ctl, SIGTERM);
    st = rl_test_wait_exit(ctl, 30);
    dt = s_now() - t0;
    snprintf(p, sizeof p, "%s/startup.txt", s_tmp);
    out = rl_test_read_file(p, NULL);
    CHECK_MSG(st == 1, "SIGTERM during start-up: exit %d:\n%s", st, out ? out : "");
    // at once: 1 s for the reward worker's own stop (SIGTERM, then SIGKILL), and polling
    CHECK_MSG(dt < 2.0, "SIGTERM during start-up: gone after %.1f s (roles.stop_grace 20)", dt);
    CHECK_CONTAINS(out ? out : "", "stopped on a signal, during start-up");
    CHECK_MSG(out && !strstr(out, "during step"), "start-up named a step:\n%s", out ? out : "");
    free(out);
    CHECK_MSG(rl_test_all_gone(kids, nk, 2), "a worker outlived the run");
    CHECK_MSG(rl_test_all_gone(&loading, 1, 2), "the loading reward worker outlived the run");
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "faults");
    chmod(s_tmp, 0755); // the other-uid intruder must be able to look for the socket
    s_recipe("g.yaml", NULL, NULL);
    RL_TEST_RUN(test_intruders);
    RL_TEST_RUN(test_reference_worker);
    RL_TEST_RUN(test_bad_replies);
    RL_TEST_RUN(test_store_fault);
    RL_TEST_RUN(test_final_fault);
    RL_TEST_RUN(test_sync_fault);
    RL_TEST_RUN(test_silent_worker);
    RL_TEST_RUN(test_branches);
    RL_TEST_RUN(test_damaged_checkpoints);
    RL_TEST_RUN(test_signals);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

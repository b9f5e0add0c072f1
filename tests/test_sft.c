// test_sft — `rlctl run` end to end on a tiny random Qwen2 model (rlctl init, 2 layers, C 32,
// the byte-level fixture tokenizer) and a 32-row prompt/completion set:
//   - the loss falls over 30 steps (and eval/loss with it); final/ is a usable HF folder;
//   - resume is exact: 30 steps in one go == stop at 13 + --resume, and == resuming from the
//     older step-10 checkpoint (metrics lines after it are dropped), metrics and final weights
//     byte for byte; the same for LoRA (adapter bytes);
//   - accumulation: micro-batches 2 x 2 == one micro-batch of 4 within float tolerance;
//   - the run folder rules (refuse, --force, lock), a NaN loss naming the step, usage errors.
#include "rl_test.h"
#include "rl_test_run.h"

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FIX RL_FIXTURES "/data"
static char s_tmp[] = "/tmp/rl_test_sft_XXXXXX";
#define s_rlctl(args) rl_test_rlctl(s_tmp, args)
#define s_out() rl_test_out(s_tmp)
#define s_exists(rel) rl_test_exists(s_tmp, rel)
#define s_metrics(run) rl_test_metrics(s_tmp, run)
#define s_files_equal(a, b) rl_test_files_equal(s_tmp, a, b)
static char s_cmd[8192];

static void s_recipe(const char *name, const char *extra) {
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", s_tmp, name);
    FILE *f = fopen(p, "w");
    if (!f) {
        return;
    }
    fprintf(f,
            "run: {name: t, seed: 3}\n"
            "model: {path: %s/model, tokenizer: %s/tok/tokenizer.json}\n"
            "lora: {enabled: false}\n"
            "data: {train: %s/sft_tiny.jsonl, eval: %s/sft_tiny.jsonl, "
            "format: prompt_completion, max_length: 32}\n"
            "algorithm: {name: sft}\n"
            "optim: {lr: 0.01, scheduler: cosine, warmup_steps: 3, min_lr_ratio: 0.1}\n"
            "train: {steps: 30, batch_size: 4, micro_batch_size: 4, eval_every: 10, "
            "save_every: 10, keep_checkpoints: 2}\n%s",
            s_tmp, FIX, FIX, FIX, extra ? extra : "");
    fclose(f);
}

static double s_num(json_t *arr, size_t i, const char *key) {
    json_t *v = json_object_get(json_array_get(arr, i), key);
    return v ? json_number_value(v) : NAN;
}

// Largest |a - b| over the F32 data of two safetensors files with the same header.
static double s_weights_maxdiff(const char *a, const char *b) {
    char pa[600], pb[600];
    size_t na = 0, nb = 0;
    snprintf(pa, sizeof(pa), "%s/%s", s_tmp, a);
    snprintf(pb, sizeof(pb), "%s/%s", s_tmp, b);
    char *x = rl_test_read_file(pa, &na), *y = rl_test_read_file(pb, &nb);
    double md = INFINITY;
    uint64_t h;
    if (x && y && na == nb && na > 8) {
        memcpy(&h, x, 8);
        if (8 + h <= na && memcmp(x, y, 8 + h) == 0) {
            md = 0;
            for (size_t off = 8 + h; off + 4 <= na; off += 4) {
                float u, v;
                memcpy(&u, x + off, 4);
                memcpy(&v, y + off, 4);
                double d = fabs((double)u - (double)v);
                md = d > md ? d : md;
            }
        }
    }
    free(x);
    free(y);
    return md;
}

// Sets model.norm.weight[0] of a model folder to NaN (every logit becomes NaN).
static int s_poison(const char *model_dir) {
    char p[600];
    snprintf(p, sizeof(p), "%s/%s/model.safetensors", s_tmp, model_dir);
    size_t n;
    char *b = rl_test_read_file(p, &n);
    if (!b) {
        return -1;
    }
    uint64_t h;
    memcpy(&h, b, 8);
    json_t *hdr = json_loadb(b + 8, h, 0, NULL);
    json_t *t = json_object_get(hdr, "model.norm.weight");
    json_t *off = json_array_get(json_object_get(t, "data_offsets"), 0);
    int rc = -1;
    if (json_is_integer(off)) {
        float nan = NAN;
        memcpy(b + 8 + h + json_integer_value(off), &nan, 4);
        FILE *f = fopen(p, "wb");
        if (f) {
            rc = fwrite(b, 1, n, f) == n ? 0 : -1;
            fclose(f);
        }
    }
    json_decref(hdr);
    free(b);
    return rc;
}

int main(void) {
    RL_TEST_ASSERT_FILE(mkdtemp(s_tmp), "a temporary directory");
    char args[4096];
    snprintf(args, sizeof(args),
             "init --config %s/tiny_config.json --tokenizer %s/tok/tokenizer.json --out %s/model "
             "--seed 1", FIX, FIX, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    s_recipe("sft.yaml", NULL);

    // ---- 1. the loss falls ---------------------------------------------------------------------
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/a", s_tmp, s_tmp);
    int rc = s_rlctl(args);
    CHECK_INT(rc, 0);
    if (rc) {
        char *o = s_out();
        fprintf(stderr, "%s\n", o ? o : "");
        free(o);
    }
    json_t *a = s_metrics("a");
    CHECK_INT(json_array_size(a), 30);
    double first = (s_num(a, 0, "loss") + s_num(a, 1, "loss") + s_num(a, 2, "loss")) / 3;
    double last = (s_num(a, 27, "loss") + s_num(a, 28, "loss") + s_num(a, 29, "loss")) / 3;
    fprintf(stderr, "loss: first 3 steps %.4f, last 3 steps %.4f; eval/loss %.4f -> %.4f\n",
            first, last, s_num(a, 9, "eval/loss"), s_num(a, 29, "eval/loss"));
    CHECK(first > log(100.0)); // a random 260-way model starts near log(260) = 5.56
    CHECK(last < 0.5 * first);
    CHECK(s_num(a, 29, "eval/loss") < s_num(a, 9, "eval/loss"));
    CHECK_INT((int64_t)s_num(a, 0, "step"), 1);
    CHECK_CLOSE(s_num(a, 0, "learning_rate"), 0.0, 0); // warmup starts at 0 (transformers)
    CHECK_CLOSE(s_num(a, 3, "learning_rate"), 0.01, 1e-12);
    CHECK(s_num(a, 29, "num_tokens") > s_num(a, 0, "num_tokens"));
    CHECK(s_num(a, 0, "grad_norm") > 0);
    CHECK(s_exists("a/final/config.json"));
    CHECK(s_exists("a/final/model.safetensors"));
    CHECK(s_exists("a/final/tokenizer.json"));
    CHECK(s_exists("a/final/tokenizer_config.json"));
    CHECK(s_exists("a/recipe.yaml"));
    CHECK(s_exists("a/checkpoints/step-10/DONE"));
    CHECK(s_exists("a/checkpoints/step-20/DONE"));
    CHECK(s_exists("a/checkpoints/step-20/optimizer.bin"));
    CHECK(s_exists("a/checkpoints/step-20/model/model.safetensors"));

    // ---- 2. resume is exact --------------------------------------------------------------------
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/b --stop-at 13", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    CHECK(s_exists("b/checkpoints/step-13/DONE"));
    CHECK(!s_exists("b/final"));
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/b --resume", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    json_t *b = s_metrics("b");
    CHECK(json_equal(a, b));
    CHECK(s_files_equal("a/final/model.safetensors", "b/final/model.safetensors"));
    // from an older checkpoint: the lines after step 10 are dropped and rewritten
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/c --stop-at 13", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(args, sizeof(args), "run %s/sft.yaml --resume %s/c/checkpoints/step-10", s_tmp,
             s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    json_t *c = s_metrics("c");
    CHECK(json_equal(a, c));
    CHECK(s_files_equal("a/final/model.safetensors", "c/final/model.safetensors"));
    json_decref(b);
    json_decref(c);

    // ---- 3. accumulation: 2 micro-batches of 2 == 1 of 4 ---------------------------------------
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/d train.micro_batch_size=2", s_tmp,
             s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    json_t *d = s_metrics("d");
    CHECK_INT(json_array_size(d), 30);
    // Same math, different summation order: fp32 rounding ~1e-7 per op; over 30 Adam steps
    // the difference grows but stays well under 1e-4 relative on the loss.
    for (size_t i = 0; i < json_array_size(d) && i < 30; i++) {
        CHECK_CLOSE(s_num(d, i, "loss"), s_num(a, i, "loss"), 1e-4);
        CHECK_CLOSE(s_num(d, i, "grad_norm"), s_num(a, i, "grad_norm"), 1e-3);
        CHECK(s_num(d, i, "num_tokens") == s_num(a, i, "num_tokens"));
    }
    double md = s_weights_maxdiff("a/final/model.safetensors", "d/final/model.safetensors");
    fprintf(stderr, "accumulation: max |w_2x2 - w_1x4| = %.3g\n", md);
    CHECK(md < 1e-4);
    json_decref(d);

    // ---- 4. LoRA (dropout 0.1): adapter out, exact resume -------------------------------------
    snprintf(args, sizeof(args),
             "run %s/sft.yaml run.dir=%s/la lora.enabled=true lora.r=4 lora.dropout=0.1 "
             "train.steps=8 train.save_every=4 optim.lr=0.05", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    CHECK(s_exists("la/final/adapter_config.json"));
    CHECK(s_exists("la/final/adapter_model.safetensors"));
    CHECK(s_exists("la/checkpoints/step-4/adapter/adapter_model.safetensors"));
    json_t *la = s_metrics("la");
    CHECK(s_num(la, 7, "loss") < s_num(la, 0, "loss"));
    snprintf(args, sizeof(args),
             "run %s/sft.yaml run.dir=%s/lb lora.enabled=true lora.r=4 lora.dropout=0.1 "
             "train.steps=8 train.save_every=4 optim.lr=0.05 --stop-at 5", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    snprintf(args, sizeof(args),
             "run %s/sft.yaml run.dir=%s/lb lora.enabled=true lora.r=4 lora.dropout=0.1 "
             "train.steps=8 train.save_every=4 optim.lr=0.05 --resume", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    json_t *lb = s_metrics("lb");
    CHECK(json_equal(la, lb));
    CHECK(s_files_equal("la/final/adapter_model.safetensors",
                        "lb/final/adapter_model.safetensors"));
    json_decref(la);
    json_decref(lb);

    // ---- 4b. text and messages rows through the loop (ChatML detected from the template) -----
    static const char *const formats[] = {"text", "messages"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof(args),
                 "run %s/sft.yaml run.dir=%s/fmt-%s data.train=%s/%s.jsonl data.format=%s "
                 "train.eval_every=0 train.save_every=0 train.steps=4 train.batch_size=2 "
                 "train.micro_batch_size=1 optim.warmup_steps=0",
                 s_tmp, s_tmp, formats[i], FIX, formats[i], formats[i]);
        CHECK_INT(s_rlctl(args), 0);
        char run[64];
        snprintf(run, sizeof(run), "fmt-%s", formats[i]);
        json_t *m = s_metrics(run);
        CHECK_INT(json_array_size(m), 4);
        CHECK(isfinite(s_num(m, 3, "loss")) && s_num(m, 3, "loss") < s_num(m, 0, "loss"));
        json_decref(m);
    }

    // ---- 5. run folder rules -------------------------------------------------------------------
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/a train.steps=4", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    char *out = s_out();
    CHECK_CONTAINS(out, "already holds a run");
    CHECK_CONTAINS(out, "--resume");
    free(out);
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/a train.steps=4 --force", s_tmp,
             s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    json_t *f = s_metrics("a");
    CHECK_INT(json_array_size(f), 4);
    CHECK(!s_exists("a/checkpoints/step-20"));
    json_decref(f);
    // the lock: a child holds it, rlctl refuses
    int pfd[2];
    CHECK_INT(pipe(pfd), 0);
    pid_t child = fork();
    if (child == 0) {
        char lp[600];
        snprintf(lp, sizeof(lp), "%s/a/.lock", s_tmp);
        int fd = open(lp, O_RDWR | O_CREAT, 0644);
        struct flock fl = {0};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        char ok = fcntl(fd, F_SETLK, &fl) == 0 ? '1' : '0';
        if (write(pfd[1], &ok, 1) != 1) {
            _exit(1);
        }
        pause();
        _exit(0);
    }
    char ok = '0';
    CHECK(read(pfd[0], &ok, 1) == 1 && ok == '1');
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/a --resume", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "is in use by another rlctl");
    free(out);
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    close(pfd[0]);
    close(pfd[1]);

    // ---- 5b. SIGTERM: the step finishes, a checkpoint is written, exit 1 ---------------------
    {
        char recipe[600], rundir[600], mpath[700], logp[700];
        snprintf(recipe, sizeof(recipe), "%s/sft.yaml", s_tmp);
        snprintf(rundir, sizeof(rundir), "run.dir=%s/sig", s_tmp);
        snprintf(mpath, sizeof(mpath), "%s/sig/metrics.jsonl", s_tmp);
        snprintf(logp, sizeof(logp), "%s/sig.txt", s_tmp);
        char exe[600];
        snprintf(exe, sizeof(exe), "%s/rlctl", RL_BINARY_DIR);
        pid_t pid = fork();
        if (pid == 0) {
            int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 2);
            dup2(fd, 1);
            execl(exe, exe, "run", recipe, rundir, "train.steps=1000000", "train.save_every=0",
                  "train.eval_every=0", (char *)NULL);
            _exit(127);
        }
        // wait (up to 60 s) until a few steps are logged, then ask it to stop
        for (int i = 0; i < 600; i++) {
            char *m = rl_test_read_file(mpath, NULL);
            int lines = 0;
            for (char *q = m; q && *q; q++) {
                lines += *q == '\n';
            }
            free(m);
            if (lines >= 3) {
                break;
            }
            nanosleep(&(struct timespec){0, 100000000}, NULL);
        }
        kill(pid, SIGTERM);
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
        char *txt = rl_test_read_file(logp, NULL);
        CHECK_CONTAINS(txt, "interrupted after step");
        free(txt);
        json_t *m = s_metrics("sig");
        size_t n = json_array_size(m);
        char ck[64];
        snprintf(ck, sizeof(ck), "sig/checkpoints/step-%zu/DONE", n);
        CHECK_MSG(s_exists(ck), "%s", ck);
        json_decref(m);
    }

    // ---- 6. a NaN loss stops the run naming the step -------------------------------------------
    snprintf(args, sizeof(args), "init --config %s/tiny_config.json --tokenizer "
             "%s/tok/tokenizer.json --out %s/nanmodel --seed 1", FIX, FIX, s_tmp);
    CHECK_INT(s_rlctl(args), 0);
    CHECK_INT(s_poison("nanmodel"), 0);
    snprintf(args, sizeof(args), "run %s/sft.yaml run.dir=%s/n model.path=%s/nanmodel", s_tmp,
             s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 1);
    out = s_out();
    CHECK_CONTAINS(out, "step 1: the loss is NaN");
    free(out);

    // ---- 7. usage errors ------------------------------------------------------------------------
    snprintf(args, sizeof(args), "run %s/sft.yaml --resume --force", s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    snprintf(args, sizeof(args), "run %s/sft.yaml optim.lr=fast run.dir=%s/x", s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    out = s_out();
    CHECK_CONTAINS(out, "optim.lr");
    free(out);

    json_decref(a);
    snprintf(s_cmd, sizeof(s_cmd), "rm -rf '%s'", s_tmp);
    if (!rl_test_failed && system(s_cmd) != 0) {
        fprintf(stderr, "warning: could not remove %s\n", s_tmp);
    }
    RL_TEST_DONE();
}

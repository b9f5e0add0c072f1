// tests for `rlctl generate` and `rlctl logprobs`: runs the built binary on the cookbook's
// arith-base model (random weights, a one-character-per-token tokenizer), parses generate's
// JSON, scores each generated completion with `rlctl logprobs` and checks that the two agree
// (the sampler's cached decode vs the trainer's forward, through the printed %.9g numbers),
// the same with a PEFT adapter (written here with random A and B) and with --chat (a copy of the
// model given a ChatML template), then the refusals: help, a missing model, a bad adapter, a
// prompt longer than the context, --chat without a chat template, bad flags.
#include "rl_err.h"
#include "rl_model.h"
#include "rl_rng.h"
#include "rl_test.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_MODEL RL_SOURCE_DIR "/cookbook/models/arith-base"

static char s_tmp[] = "/tmp/rl_test_generate_XXXXXX";

typedef struct {
    int code;     // exit code, -1 when it did not exit
    char *out;    // stdout, NUL-terminated
    char *err;    // stderr, NUL-terminated
} s_run_t;

static char *s_read_fd(int fd) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    RL_ASSERT(buf);
    for (;;) {
        if (n + 1 >= cap) {
            buf = realloc(buf, cap *= 2);
            RL_ASSERT(buf);
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got <= 0) {
            break;
        }
        n += (size_t)got;
    }
    buf[n] = '\0';
    return buf;
}

// Runs rlctl with argv (NULL-terminated, without the program name); no shell, so any text
// passes as is.
static s_run_t s_rlctl(const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = RL_BINARY_DIR "/rlctl";
    for (int i = 0; args[i]; i++) {
        RL_ASSERT(n < 63);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    char err_path[600];
    snprintf(err_path, sizeof err_path, "%s/stderr", s_tmp);
    int fds[2];
    RL_ASSERT(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    RL_ASSERT(pid >= 0);
    if (pid == 0) {
        int ef = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[1], 1);
        dup2(ef, 2);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    s_run_t r;
    r.out = s_read_fd(fds[0]);
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    int ef = open(err_path, O_RDONLY);
    r.err = ef >= 0 ? s_read_fd(ef) : strdup("");
    if (ef >= 0) {
        close(ef);
    }
    return r;
}

static void s_free(s_run_t *r) {
    free(r->out);
    free(r->err);
}

static json_t *s_json(const s_run_t *r) {
    json_error_t je;
    json_t *j = json_loads(r->out, 0, &je);
    CHECK_MSG(j != NULL, "not JSON (%s): %.300s", je.text, r->out);
    return j;
}

// generate --json with `extra` flags, then logprobs of every sample at temperature `T`:
// completion_ids must equal the sample's ids and the logprobs agree within `tol`.
static void s_roundtrip(const char *model, const char *prompt, const char *const *extra,
                        const char *const *lextra, const char *T, int max_new, double tol,
                        double *worst) {
    const char *args[40] = {"generate", "--model", model, "--prompt", prompt, "--json"};
    int n = 6;
    for (int i = 0; extra[i]; i++) {
        args[n++] = extra[i];
    }
    args[n] = NULL;
    s_run_t g = s_rlctl(args);
    CHECK_MSG(g.code == 0, "generate exit %d: %s", g.code, g.err);
    json_t *j = g.code == 0 ? s_json(&g) : NULL;
    json_t *samples = json_object_get(j, "samples");
    CHECK(json_is_array(json_object_get(j, "prompt_ids")));
    CHECK(json_is_array(samples) && json_array_size(samples) >= 1);
    size_t si;
    json_t *s;
    json_array_foreach(samples, si, s) {
        json_t *ids = json_object_get(s, "ids"), *lps = json_object_get(s, "logprobs");
        const char *text = json_string_value(json_object_get(s, "text"));
        const char *fin = json_string_value(json_object_get(s, "finish_reason"));
        CHECK(json_is_array(ids) && json_is_array(lps) && text && fin);
        if (!json_is_array(ids) || !text || !fin) {
            continue;
        }
        size_t len = json_array_size(ids);
        CHECK_INT(json_array_size(lps), len);
        int stop = strcmp(fin, "stop") == 0;
        CHECK(stop || strcmp(fin, "length") == 0);
        const char *stop_text = "";
        if (stop) {
            // the stop token is the last id: the eos 21 = <|endoftext|>, or with the chat copy
            // the tokenizer's eos_token 23 = <|im_end|>; the text omits it
            json_int_t last = json_integer_value(json_array_get(ids, len - 1));
            CHECK(last == 21 || last == 23);
            stop_text = last == 21 ? "<|endoftext|>" : "<|im_end|>";
            CHECK(strstr(text, stop_text) == NULL);
        } else {
            CHECK_INT(len, max_new);
        }
        // score the same completion: the text plus the stop token's text (which encodes back
        // to the stop id; the arith tokenizer maps each character to one token)
        char completion[1024];
        snprintf(completion, sizeof completion, "%s%s", text, stop_text);
        const char *largs[40] = {"logprobs", "--model", model, "--prompt", prompt,
                                 "--completion", completion, "--temperature", T, "--json"};
        int ln = 10;
        for (int i = 0; lextra[i]; i++) {
            largs[ln++] = lextra[i];
        }
        largs[ln] = NULL;
        s_run_t l = s_rlctl(largs);
        CHECK_MSG(l.code == 0, "logprobs exit %d: %s", l.code, l.err);
        json_t *lj = l.code == 0 ? s_json(&l) : NULL;
        json_t *cids = json_object_get(lj, "completion_ids");
        json_t *llps = json_object_get(lj, "logprobs");
        CHECK_INT(json_array_size(cids), len);
        CHECK(json_equal(json_object_get(lj, "prompt_ids"), json_object_get(j, "prompt_ids")));
        double sum = 0.0;
        for (size_t i = 0; i < len && i < json_array_size(cids); i++) {
            CHECK_INT(json_integer_value(json_array_get(cids, i)),
                      json_integer_value(json_array_get(ids, i)));
            double a = json_number_value(json_array_get(lps, i));
            double b = json_number_value(json_array_get(llps, i));
            double d = a > b ? a - b : b - a;
            *worst = d > *worst ? d : *worst;
            CHECK_MSG(d <= tol, "sample %zu token %zu: generate %.9g vs logprobs %.9g", si, i, a,
                      b);
            sum += b;
        }
        CHECK_CLOSE(json_number_value(json_object_get(lj, "sum")), sum, 1e-5);
        json_decref(lj);
        s_free(&l);
    }
    json_decref(j);
    s_free(&g);
}

static void s_test_roundtrip(void) {
    double worst = 0.0;
    // printed with %.9g (9 significant digits: < 1e-8 for |x| < 10) over the sampler/forward
    // gap of a few 1e-7 on this model's small logits: 1e-4 is the tolerance asked of the CLI
    const char *t1[] = {"--n", "4", "--max-new-tokens", "24", "--seed", "5", NULL};
    const char *none[] = {NULL};
    s_roundtrip(S_MODEL, "12+34=", t1, none, "1", 24, 1e-4, &worst);
    const char *t2[] = {"--n", "3", "--max-new-tokens", "16", "--temperature", "0.7",
                        "--top-k", "8", "--top-p", "0.9", "--seed", "1", NULL};
    s_roundtrip(S_MODEL, "91*3+125=", t2, none, "0.7", 16, 1e-4, &worst);
    // greedy reports logprobs at T = 1 (rlctl logprobs --temperature 0 means 1 as well)
    const char *t3[] = {"--temperature", "0", "--max-new-tokens", "10", NULL};
    s_roundtrip(S_MODEL, "7-2=", t3, none, "0", 10, 1e-4, &worst);
    printf("generate vs logprobs: worst |difference| %.3g\n", worst);

    // same seed, same output; another seed, another
    const char *a[] = {"generate", "--model", S_MODEL, "--prompt", "1+1=", "--n", "3",
                       "--max-new-tokens", "12", "--seed", "9", "--json", NULL};
    s_run_t r1 = s_rlctl(a), r2 = s_rlctl(a);
    CHECK(r1.code == 0 && r2.code == 0);
    CHECK_STR(r1.out, r2.out);
    const char *b[] = {"generate", "--model", S_MODEL, "--prompt", "1+1=", "--n", "3",
                       "--max-new-tokens", "12", "--seed", "10", "--json", NULL};
    s_run_t r3 = s_rlctl(b);
    CHECK(r3.code == 0 && strcmp(r1.out, r3.out) != 0);
    // one KV cache slot (--max-batch 1: the samples one after another) draws the same tokens;
    // the logprobs differ in their last bits only (a step of one row is a matrix-vector
    // product, of three a matrix product: docs/sampling.md, Determinism); 0 is refused
    const char *a1[] = {"generate", "--model",          S_MODEL, "--prompt", "1+1=", "--n",
                        "3",        "--max-new-tokens", "12",    "--seed",   "9",    "--max-batch",
                        "1",        "--json",           NULL};
    s_run_t r1b = s_rlctl(a1);
    CHECK(r1b.code == 0);
    json_t *ja = s_json(&r1), *jb = r1b.code == 0 ? s_json(&r1b) : NULL;
    json_t *sa = json_object_get(ja, "samples"), *sb = json_object_get(jb, "samples");
    CHECK_INT((long long)json_array_size(sb), 3);
    double lp_gap = 0;
    for (size_t k = 0; k < json_array_size(sa) && k < json_array_size(sb); k++) {
        json_t *x = json_array_get(sa, k), *y = json_array_get(sb, k);
        CHECK(json_equal(json_object_get(x, "ids"), json_object_get(y, "ids")));
        CHECK_STR(json_string_value(json_object_get(y, "text")),
                  json_string_value(json_object_get(x, "text")));
        json_t *lx = json_object_get(x, "logprobs"), *ly = json_object_get(y, "logprobs");
        for (size_t i = 0; i < json_array_size(lx); i++) {
            double d = fabs(json_number_value(json_array_get(lx, i)) -
                            json_number_value(json_array_get(ly, i)));
            lp_gap = d > lp_gap || !(d == d) ? d : lp_gap;
        }
    }
    printf("--max-batch 1 vs 64: the same tokens, logprobs within %.3g\n", lp_gap);
    CHECK_MSG(lp_gap <= 1e-5, "--max-batch 1: logprobs differ by %g", lp_gap);
    json_decref(ja);
    json_decref(jb);
    s_free(&r1b);
    a1[12] = "0";
    s_run_t r1z = s_rlctl(a1);
    CHECK_INT(r1z.code, 2);
    s_free(&r1z);
    // prompt_ids: one character per token, as the model README states
    json_t *j = s_json(&r1);
    char *pid = json_dumps(json_object_get(j, "prompt_ids"), JSON_COMPACT);
    CHECK_STR(pid, "[9,4,9,19]");
    free(pid);
    json_decref(j);
    s_free(&r1);
    s_free(&r2);
    s_free(&r3);
    // plain output
    const char *c[] = {"generate", "--model", S_MODEL, "--prompt", "1+1=", "--n", "2",
                       "--max-new-tokens", "5", NULL};
    s_run_t r4 = s_rlctl(c);
    CHECK_INT(r4.code, 0);
    CHECK_CONTAINS(r4.out, "--- sample 1:");
    s_free(&r4);
    const char *d[] = {"logprobs", "--model", S_MODEL, "--prompt", "1+1=", "--completion", "2",
                       NULL};
    s_run_t r5 = s_rlctl(d);
    CHECK_INT(r5.code, 0);
    CHECK_CONTAINS(r5.out, "sum\t");
    s_free(&r5);
    // a temperature above 0 but so small that logits / T overflow a float (every logprob was
    // -nan): refused, as the HTTP front and the recipe do
    const char *e[] = {"generate", "--model", S_MODEL, "--prompt", "1+1=", "--temperature",
                       "1e-40", NULL};
    s_run_t r6 = s_rlctl(e);
    CHECK_INT(r6.code, 2);
    s_free(&r6);
    const char *f[] = {"logprobs", "--model", S_MODEL, "--prompt", "1+1=", "--completion", "2",
                       "--temperature", "1e-40", NULL};
    s_run_t r7 = s_rlctl(f);
    CHECK_INT(r7.code, 2);
    s_free(&r7);
}

// Writes a PEFT adapter for arith-base into dir with random A and B (B = 0 would be a no-op).
static int s_write_adapter(const char *dir) {
    char err[1024];
    rl_model_opts_t opts;
    rl_model_opts_default(&opts);
    opts.tune = RL_TUNE_LORA;
    opts.lora_r = 4;
    opts.lora_alpha = 8.0f;
    opts.lora_targets = RL_LORA_ALL;
    rl_model_t *m = rl_model_load(S_MODEL, &opts, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m) {
        return -1;
    }
    size_t n = 0;
    float *w = rl_model_trainable(m, &n);
    rl_rng_t rng;
    rl_rng_seed(&rng, 77);
    rl_rng_fill_normal(&rng, w, n, 0.0f, 0.2f);
    int rc = rl_model_save_adapter(m, dir, S_MODEL, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    rl_model_destroy(&m);
    return rc;
}

// The first generated logprob of a prompt under `model` (+ adapter when not NULL), greedy.
static double s_first_logprob(const char *adapter, const char *prompt) {
    const char *a[] = {"generate", "--model", S_MODEL, "--prompt", prompt, "--temperature", "0",
                       "--max-new-tokens", "1", "--json", adapter ? "--adapter" : NULL, adapter,
                       NULL};
    s_run_t r = s_rlctl(a);
    CHECK_MSG(r.code == 0, "%s", r.err);
    json_t *j = r.code == 0 ? s_json(&r) : NULL;
    double lp = json_number_value(
        json_array_get(json_object_get(json_array_get(json_object_get(j, "samples"), 0),
                                       "logprobs"), 0));
    json_decref(j);
    s_free(&r);
    return lp;
}

static void s_test_adapter_and_chat(void) {
    double worst = 0.0;
    char adapter[600];
    snprintf(adapter, sizeof adapter, "%s/lora", s_tmp);
    if (s_write_adapter(adapter) == 0) {
        const char *g[] = {"--adapter", adapter, "--n", "3", "--max-new-tokens", "20", "--seed",
                           "2", NULL};
        const char *l[] = {"--adapter", adapter, NULL};
        s_roundtrip(S_MODEL, "45+6=", g, l, "1", 20, 1e-4, &worst);
        // the adapter changes the distribution
        double base = s_first_logprob(NULL, "45+6="), tuned = s_first_logprob(adapter, "45+6=");
        CHECK_MSG(fabs(base - tuned) > 1e-3, "adapter had no effect: %g vs %g", base, tuned);
        // the same adapter with lora_alpha 1e38: finite (so loaded), but the forward overflows;
        // generate and logprobs fail naming it instead of printing nan (not JSON)
        char huge[600], path[700], cfg_path[700];
        snprintf(huge, sizeof huge, "%s/lora_huge", s_tmp);
        mkdir(huge, 0755);
        snprintf(path, sizeof path, "%s/adapter_model.safetensors", adapter);
        snprintf(cfg_path, sizeof cfg_path, "%s/adapter_model.safetensors", huge);
        CHECK(symlink(path, cfg_path) == 0);
        snprintf(path, sizeof path, "%s/adapter_config.json", adapter);
        json_t *cfg = json_load_file(path, 0, NULL);
        json_object_set_new(cfg, "lora_alpha", json_real(1e38));
        snprintf(cfg_path, sizeof cfg_path, "%s/adapter_config.json", huge);
        CHECK(cfg && json_dump_file(cfg, cfg_path, 0) == 0);
        json_decref(cfg);
        const char *hg[] = {"generate", "--model", S_MODEL, "--adapter", huge, "--prompt",
                            "45+6=", "--max-new-tokens", "4", "--json", NULL};
        s_run_t h = s_rlctl(hg);
        CHECK_MSG(h.code == 1 && strstr(h.err, "the logits are not finite") == NULL &&
                      strstr(h.err, "logits are not finite numbers"),
                  "generate with lora_alpha 1e38: exit %d\n%s%s", h.code, h.out, h.err);
        s_free(&h);
        const char *hl[] = {"logprobs", "--model", S_MODEL, "--adapter", huge, "--prompt",
                            "45+6=", "--completion", "51", "--json", NULL};
        h = s_rlctl(hl);
        CHECK_MSG(h.code == 1 && strstr(h.err, "logits are not finite numbers"),
                  "logprobs with lora_alpha 1e38: exit %d\n%s%s", h.code, h.out, h.err);
        s_free(&h);
    }
    // --chat: a copy of arith-base whose tokenizer_config.json has a ChatML template (the
    // tokenizer has <|im_start|> and <|im_end|>; letters it lacks are dropped)
    char chat[600], src[700], dst[700];
    snprintf(chat, sizeof chat, "%s/chat-model", s_tmp);
    mkdir(chat, 0755);
    const char *files[] = {"config.json", "generation_config.json", "model.safetensors",
                           "tokenizer.json"};
    for (int i = 0; i < 4; i++) {
        snprintf(src, sizeof src, "%s/%s", S_MODEL, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", chat, files[i]);
        CHECK(symlink(src, dst) == 0);
    }
    snprintf(dst, sizeof dst, "%s/tokenizer_config.json", chat);
    FILE *f = fopen(dst, "w");
    RL_ASSERT(f);
    fputs("{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"{% for message in messages %}"
          "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
          "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}\"}\n", f);
    fclose(f);
    const char *g[] = {"--chat", "--n", "2", "--max-new-tokens", "12", "--seed", "4", NULL};
    const char *l[] = {"--chat", NULL};
    s_roundtrip(chat, "2+2=", g, l, "1", 12, 1e-4, &worst);
    const char *a[] = {"generate", "--model", chat, "--prompt", "2+2=", "--chat",
                       "--max-new-tokens", "1", "--json", NULL};
    s_run_t r = s_rlctl(a);
    json_t *j = r.code == 0 ? s_json(&r) : NULL;
    char *pid = json_dumps(json_object_get(j, "prompt_ids"), JSON_COMPACT);
    // <|im_start|> "\n" 2 + 2 = <|im_end|> "\n" <|im_start|> "\n" ("user", "assistant" dropped)
    CHECK_STR(pid, "[22,0,10,4,10,19,23,0,22,0]");
    free(pid);
    json_decref(j);
    s_free(&r);
    printf("adapter and chat: worst |difference| %.3g\n", worst);
    for (int i = 0; i < 4; i++) {
        snprintf(dst, sizeof dst, "%s/%s", chat, files[i]);
        unlink(dst);
    }
    snprintf(dst, sizeof dst, "%s/tokenizer_config.json", chat);
    unlink(dst);
    rmdir(chat);
    const char *lora_files[] = {"adapter_config.json", "adapter_model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(dst, sizeof dst, "%s/%s", adapter, lora_files[i]);
        unlink(dst);
    }
    rmdir(adapter);
}

static void s_expect_fail(const char *const *args, int code, const char *msg) {
    s_run_t r = s_rlctl(args);
    CHECK_MSG(r.code == code, "%s %s: exit %d, want %d (%s)", args[0], args[1], r.code, code,
              r.err);
    CHECK_CONTAINS(r.err, msg);
    CHECK_MSG(strchr(r.err, '\n') == strrchr(r.err, '\n'), "more than one line: %s", r.err);
    s_free(&r);
}

static void s_test_refusals(void) {
    const char *h1[] = {"generate", "--help", NULL};
    s_run_t r = s_rlctl(h1);
    CHECK_INT(r.code, 0);
    CHECK_CONTAINS(r.out, "usage: rlctl generate");
    s_free(&r);
    const char *h2[] = {"logprobs", "-h", NULL};
    r = s_rlctl(h2);
    CHECK_INT(r.code, 0);
    CHECK_CONTAINS(r.out, "usage: rlctl logprobs");
    s_free(&r);
    const char *h3[] = {"--help", NULL};
    r = s_rlctl(h3);
    CHECK_CONTAINS(r.out, "generate");
    CHECK_CONTAINS(r.out, "logprobs");
    s_free(&r);

    char missing[600], bad_adapter[600];
    snprintf(missing, sizeof missing, "%s/no-such-model", s_tmp);
    snprintf(bad_adapter, sizeof bad_adapter, "%s/adapter", s_tmp);
    mkdir(bad_adapter, 0755);
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/adapter_config.json", bad_adapter);
    FILE *f = fopen(cfg, "w");
    RL_ASSERT(f);
    fputs("{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8, \"target_modules\": "
          "[\"q_proj\"]}\n", f);
    fclose(f);

    char long_prompt[201];
    memset(long_prompt, '1', 200);
    long_prompt[200] = '\0';

    const char *g1[] = {"generate", "--model", missing, "--prompt", "1", NULL};
    s_expect_fail(g1, 2, "no-such-model");
    const char *g2[] = {"generate", "--model", S_MODEL, "--adapter", bad_adapter, "--prompt",
                        "1", NULL};
    s_expect_fail(g2, 2, "adapter");
    const char *g3[] = {"generate", "--model", S_MODEL, "--prompt", long_prompt, NULL};
    s_expect_fail(g3, 2, "too long");
    const char *g4[] = {"generate", "--model", S_MODEL, "--prompt", "1+1=",
                        "--max-new-tokens", "125", NULL}; // 4 + 125 > 128
    s_expect_fail(g4, 2, "context of 128");
    const char *g5[] = {"generate", "--model", S_MODEL, "--prompt", "1", "--chat", NULL};
    s_expect_fail(g5, 2, "chat_template");
    const char *g6[] = {"generate", "--model", S_MODEL, "--prompt", "1", "--top-p", "1.5", NULL};
    s_expect_fail(g6, 2, "--top-p");
    const char *g7[] = {"generate", "--model", S_MODEL, "--prompt", "1", "--bogus", NULL};
    s_expect_fail(g7, 2, "unknown option");
    const char *g8[] = {"generate", "--model", S_MODEL, NULL};
    s_expect_fail(g8, 2, "--prompt");
    const char *l1[] = {"logprobs", "--model", missing, "--prompt", "1", "--completion", "2",
                        NULL};
    s_expect_fail(l1, 2, "no-such-model");
    const char *l2[] = {"logprobs", "--model", S_MODEL, "--prompt", "1", "--completion",
                        long_prompt, NULL};
    s_expect_fail(l2, 2, "too long");
    const char *l3[] = {"logprobs", "--model", S_MODEL, "--adapter", bad_adapter, "--prompt",
                        "1", "--completion", "2", NULL};
    s_expect_fail(l3, 2, "adapter");
    const char *l4[] = {"logprobs", "--model", S_MODEL, "--prompt", "", "--completion", "2",
                        NULL};
    s_expect_fail(l4, 2, "no tokens");
    const char *l5[] = {"logprobs", "--model", S_MODEL, "--prompt", "1", NULL};
    s_expect_fail(l5, 2, "--completion");
    unlink(cfg);
    rmdir(bad_adapter);
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "generate");
    RL_TEST_RUN(s_test_roundtrip);
    RL_TEST_RUN(s_test_adapter_and_chat);
    RL_TEST_RUN(s_test_refusals);
    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

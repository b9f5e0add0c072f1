// tests for `rlctl init`: runs the built binary on a tiny qwen3 config, reopens the folder with
// rl_hf_config_load + rl_st_model_open + rl_hf_check_weights, and checks the init scheme
// (Linear/embedding ~ N(0, initializer_range), biases 0, RMSNorm weights exactly 1), the seed's
// determinism, bf16 output, the tokenizer_config.json and chat_template.jinja copied with the
// tokenizer, and the refusals (non-empty --out, bad flags, small vocab_size).
#include "rl_err.h"
#include "rl_hf.h"
#include "rl_safetensors.h"
#include "rl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_tmp[] = "/tmp/rl_test_init_XXXXXX";

// Runs "rlctl <args>" with output discarded; returns the exit code (-1 if it did not exit).
static int s_rlctl(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/rlctl %s >/dev/null 2>&1", RL_BINARY_DIR, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void s_write(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_tmp, name);
    FILE *f = fopen(path, "w");
    RL_ASSERT(f);
    fputs(text, f);
    fclose(f);
}


static const char *s_config =
    "{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"intermediate_size\": 128,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 32, \"vocab_size\": 48, \"tie_word_embeddings\": false,"
    " \"attention_bias\": true, \"initializer_range\": 0.05, \"eos_token_id\": [40, 41],"
    " \"bos_token_id\": 39}";

static const char *s_tokenizer =
    "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 41, \"content\": \"<|end|>\","
    " \"special\": true}], \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1},"
    " \"merges\": []}}";

static void s_check_folder(const char *dir, rl_dtype_t want_dtype) {
    char err[1024] = "";
    rl_hf_config_t cfg;
    int rc = rl_hf_config_load(dir, &cfg, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc) {
        return;
    }
    CHECK_INT(cfg.head_dim, 32);
    CHECK_INT(cfg.n_eos, 2);
    CHECK_INT(cfg.eos_token_ids[1], 41);
    CHECK_INT(cfg.bos_token_id, 39);
    CHECK_STR(cfg.torch_dtype, want_dtype == RL_DTYPE_F32 ? "float32" : "bfloat16");
    rl_st_model_t *m = rl_st_model_open(dir, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m) {
        return;
    }
    rc = rl_hf_check_weights(&cfg, m, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);

    // Normal tensors: embed + lm_head 2*48*64, per layer q,o 2*128*64 + k,v 2*64*64 + MLP
    // 3*128*64: 6,144 + 2*49,152 = 104,448 draws of N(0, 0.05). The pooled mean has sd
    // 0.05/sqrt(104448) = 1.5e-4 (bound 1e-3 ~ 6 sd); the pooled std has relative sd
    // 1/sqrt(2N) = 0.22% (bound 2% ~ 9 sd; bf16 rounding moves it < 0.4%). Each tensor's own std
    // (>= 3072 draws, relative sd <= 1.3%) must be within 10% (~8 sd).
    double s1 = 0, s2 = 0;
    long long n_normal = 0;
    int ones_ok = 1, zeros_ok = 1, dtype_ok = 1;
    for (int i = 0; i < rl_st_model_count(m); i++) {
        const rl_st_tensor_t *t = rl_st_model_tensor(m, i);
        dtype_ok &= t->dtype == want_dtype;
        float *x = malloc((size_t)t->numel * sizeof *x);
        RL_ASSERT(x);
        rl_st_to_f32(x, t);
        size_t len = strlen(t->name);
        if (len > 5 && strcmp(t->name + len - 5, ".bias") == 0) {
            for (int64_t k = 0; k < t->numel; k++) {
                zeros_ok &= x[k] == 0.0f;
            }
        } else if (len > 11 && strcmp(t->name + len - 11, "norm.weight") == 0) {
            for (int64_t k = 0; k < t->numel; k++) {
                ones_ok &= x[k] == 1.0f;
            }
        } else {
            double t1 = 0, t2 = 0;
            for (int64_t k = 0; k < t->numel; k++) {
                t1 += x[k];
                t2 += (double)x[k] * x[k];
            }
            double tstd = sqrt(t2 / t->numel - (t1 / t->numel) * (t1 / t->numel));
            CHECK_MSG(fabs(tstd - 0.05) < 0.005, "%s: std %g", t->name, tstd);
            s1 += t1;
            s2 += t2;
            n_normal += t->numel;
        }
        free(x);
    }
    CHECK(dtype_ok);
    CHECK(ones_ok);
    CHECK(zeros_ok);
    CHECK_INT(n_normal, 104448);
    double mean = s1 / (double)n_normal;
    double std = sqrt(s2 / (double)n_normal - mean * mean);
    fprintf(stderr, "  %s: %lld normal draws, mean %.3g, std %.5g\n", dir, n_normal, mean, std);
    CHECK(fabs(mean) < 1e-3);
    CHECK(fabs(std - 0.05) < 0.02 * 0.05);
    rl_st_model_destroy(&m);
}

int main(void) {
    rl_test_tmpdir(s_tmp, sizeof s_tmp, "init");
    s_write("config.json", s_config);
    s_write("tokenizer.json", s_tokenizer);
    char args[1024], a[512], b[512];
    snprintf(a, sizeof a, "%s/a", s_tmp);
    snprintf(b, sizeof b, "%s/b", s_tmp);
    const char *common = "--config %s/config.json --tokenizer %s/tokenizer.json --out %s";

    char fmt[256];
    snprintf(fmt, sizeof fmt, "init %s --seed 7", common);
    snprintf(args, sizeof args, fmt, s_tmp, s_tmp, a);
    CHECK_INT(s_rlctl(args), 0);
    s_check_folder(a, RL_DTYPE_F32);

    // the same seed gives the same bytes; a non-empty --out is refused without --force
    CHECK_INT(s_rlctl(args), 2);
    snprintf(fmt, sizeof fmt, "init %s --seed 7 --force", common);
    snprintf(args, sizeof args, fmt, s_tmp, s_tmp, b);
    CHECK_INT(s_rlctl(args), 0);
    char pa[600], pb[600];
    size_t la = 0, lb = 0;
    snprintf(pa, sizeof pa, "%s/model.safetensors", a);
    snprintf(pb, sizeof pb, "%s/model.safetensors", b);
    char *da = rl_test_read_file(pa, &la), *db = rl_test_read_file(pb, &lb);
    CHECK(da && db && la == lb && memcmp(da, db, la) == 0);
    free(db);

    // another seed, into the now non-empty b with --force: different weights, same size
    snprintf(fmt, sizeof fmt, "init %s --seed 8 --force", common);
    snprintf(args, sizeof args, fmt, s_tmp, s_tmp, b);
    CHECK_INT(s_rlctl(args), 0);
    db = rl_test_read_file(pb, &lb);
    CHECK(da && db && la == lb && memcmp(da, db, la) != 0);
    free(da);
    free(db);

    // tokenizer copied byte for byte
    snprintf(pa, sizeof pa, "%s/tokenizer.json", a);
    da = rl_test_read_file(pa, &la);
    CHECK(da && la == strlen(s_tokenizer) && memcmp(da, s_tokenizer, la) == 0);
    free(da);

    // the tokenizer's config and chat template files come along (the model's own template)
    const char *tc = "{\"chat_template\": \"{{ messages[0]['content'] }}!\", \"eos_token\": \"e\"}";
    const char *jt = "{{ messages[0]['role'] }}";
    s_write("tokenizer_config.json", tc);
    s_write("chat_template.jinja", jt);
    snprintf(fmt, sizeof fmt, "init %s --seed 7", common);
    char c[512];
    snprintf(c, sizeof c, "%s/c", s_tmp);
    snprintf(args, sizeof args, fmt, s_tmp, s_tmp, c);
    CHECK_INT(s_rlctl(args), 0);
    const char *want[2][2] = {{"tokenizer_config.json", tc}, {"chat_template.jinja", jt}};
    for (int i = 0; i < 2; i++) {
        snprintf(pa, sizeof pa, "%s/%s", c, want[i][0]);
        da = rl_test_read_file(pa, &la);
        CHECK_MSG(da && la == strlen(want[i][1]) && memcmp(da, want[i][1], la) == 0,
                  "%s: '%s', not '%s'", pa, da ? da : "(missing)", want[i][1]);
        free(da);
    }
    snprintf(pa, sizeof pa, "%s/tokenizer_config.json", s_tmp);
    unlink(pa);
    snprintf(pa, sizeof pa, "%s/chat_template.jinja", s_tmp);
    unlink(pa);

    // bf16
    snprintf(fmt, sizeof fmt, "init %s --seed 7 --dtype bf16 --force", common);
    snprintf(args, sizeof args, fmt, s_tmp, s_tmp, b);
    CHECK_INT(s_rlctl(args), 0);
    s_check_folder(b, RL_DTYPE_BF16);

    // refusals: bad dtype, bad seed, missing flag, vocab_size smaller than the tokenizer
    snprintf(fmt, sizeof fmt, "init %s --dtype fp8 --force", common);
    snprintf(args, sizeof args, fmt, s_tmp, s_tmp, b);
    CHECK_INT(s_rlctl(args), 2);
    snprintf(fmt, sizeof fmt, "init %s --seed -1 --force", common);
    snprintf(args, sizeof args, fmt, s_tmp, s_tmp, b);
    CHECK_INT(s_rlctl(args), 2);
    snprintf(args, sizeof args, "init --config %s/config.json --out %s", s_tmp, b);
    CHECK_INT(s_rlctl(args), 2);
    s_write("small.json", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\":"
                          " 128, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                          " \"vocab_size\": 41}");
    snprintf(args, sizeof args, "init --config %s/small.json --tokenizer %s/tokenizer.json"
             " --out %s/c", s_tmp, s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);
    s_write("bad.json", "{\"model_type\": \"gpt2\"}");
    snprintf(args, sizeof args, "init --config %s/bad.json --tokenizer %s/tokenizer.json"
             " --out %s/c", s_tmp, s_tmp, s_tmp);
    CHECK_INT(s_rlctl(args), 2);

    // sizes each in range whose products overflow int64 (3 * I * C * L ~ 2^67): refused at
    // load naming the sizes (it aborted on an assertion or printed a negative count), and the
    // --out folder is never made
    char c_out[600], path[700];
    snprintf(c_out, sizeof c_out, "%s/huge/c", s_tmp);
    s_write("huge.json", "{\"model_type\": \"llama\", \"hidden_size\": 16777216,"
                         " \"intermediate_size\": 16777216, \"num_hidden_layers\": 100000,"
                         " \"num_attention_heads\": 256, \"vocab_size\": 16777216}");
    snprintf(args, sizeof args, "init --config %s/huge.json --tokenizer %s/tokenizer.json"
             " --out %s", s_tmp, s_tmp, c_out);
    CHECK_INT(s_rlctl(args), 2);
    snprintf(path, sizeof path, "%s/huge", s_tmp);
    CHECK_MSG(access(path, F_OK) != 0, "%s was made", path);
    rl_hf_config_t hc;
    char err[1024] = "";
    snprintf(path, sizeof path, "%s/huge.json", s_tmp);
    CHECK(rl_hf_config_load_file(path, &hc, err, sizeof err) == RL_EINVAL);
    CHECK_CONTAINS(err, "parameters (vocab_size 16777216, hidden_size 16777216");
    CHECK_CONTAINS(err, "more than rlctl handles");
    // a config within the bound whose weights do not fit in memory (4.8e11 parameters, under a
    // 4 GB address-space limit): the error, and nothing left: not the folder, not a file
    s_write("big.json", "{\"model_type\": \"llama\", \"hidden_size\": 65536,"
                        " \"intermediate_size\": 65536, \"num_hidden_layers\": 16,"
                        " \"num_attention_heads\": 512, \"vocab_size\": 4096}");
    snprintf(args, sizeof args, "init --config %s/big.json --tokenizer %s/tokenizer.json"
             " --out %s", s_tmp, s_tmp, c_out);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "ulimit -v 4000000; %s/rlctl %s >%s/big.err 2>&1", RL_BINARY_DIR,
             args, s_tmp);
    int st = system(cmd);
    CHECK_INT(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 1);
    snprintf(path, sizeof path, "%s/big.err", s_tmp);
    char *msg = rl_test_read_file(path, NULL);
    CHECK(msg != NULL);
    if (msg) {
        CHECK_CONTAINS(msg, "out of memory for 4");
        CHECK_CONTAINS(msg, "nothing written to");
    }
    free(msg);
    snprintf(path, sizeof path, "%s/huge", s_tmp);
    CHECK_MSG(access(path, F_OK) != 0, "%s was left behind", path);
    // --force into a folder that holds a model: the failure leaves its files as they were
    snprintf(args, sizeof args, "init --config %s/big.json --tokenizer %s/tokenizer.json"
             " --out %s --force", s_tmp, s_tmp, a);
    snprintf(cmd, sizeof cmd, "ulimit -v 4000000; %s/rlctl %s >/dev/null 2>&1", RL_BINARY_DIR,
             args);
    st = system(cmd);
    CHECK_INT(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 1);
    s_check_folder(a, RL_DTYPE_F32);
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 4", a);
    CHECK_MSG(system(cmd) == 0, "%s holds files other than the model's four", a);

    rl_test_tmpdir_done(s_tmp);
    RL_TEST_DONE();
}

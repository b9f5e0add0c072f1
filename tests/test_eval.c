// tests for rl_eval and `rlctl eval`: the JSONL reader (fields as text or numbers, blank lines,
// errors at file:line), that every completion is scored once against its own row's answer with
// the text the tokenizer decodes (stop token excluded), that the summary is the mean of the
// scores, and the command's output and refusals.
#include "rl_eval.h"
#include "rl_test.h"

#include <stdlib.h>
#include <unistd.h>

#define MODEL RL_FIXTURES "/recipes/model"

typedef struct {
    int calls;
    char answers[64][16];
    int lens[64];
    double expect_sum;
    int expect_fmt;
} s_log_t;

// A scorer that records what it saw: score 1 for completions of even length, "formatted" when
// the text holds a '#'.
static double s_score(void *ctx, const char *text, size_t len, const char *answer,
                      int *formatted) {
    s_log_t *log = ctx;
    if (log->calls < 64) {
        snprintf(log->answers[log->calls], sizeof log->answers[0], "%s", answer);
        log->lens[log->calls] = (int)len;
    }
    log->calls++;
    *formatted = memchr(text, '#', len) != NULL;
    log->expect_fmt += *formatted;
    double s = len % 2 == 0 ? 1.0 : 0.0;
    log->expect_sum += s;
    return s;
}

static void s_write(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "FAIL cannot write %s\n", path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

int main(void) {
    char dir[] = "/tmp/rl_test_eval_XXXXXX";
    rl_test_tmpdir(dir, sizeof dir, "eval");
    char good[256], bad_field[256], bad_json[256], err[1024];
    snprintf(good, sizeof good, "%s/good.jsonl", dir);
    snprintf(bad_field, sizeof bad_field, "%s/bad_field.jsonl", dir);
    snprintf(bad_json, sizeof bad_json, "%s/bad_json.jsonl", dir);
    s_write(good, "{\"prompt\": \"12*3+100=\", \"answer\": \"136\"}\n"
                  "\n"
                  "{\"prompt\": \"45*2+300=\", \"answer\": 390, \"extra\": [1]}\n"
                  "{\"q\": \"1+1=\", \"a\": 2.5, \"prompt\": \"7*7+7=\", \"answer\": \"56\"}\n");
    s_write(bad_field, "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"prompt\": \"2+2=\"}\n");
    s_write(bad_json, "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"prompt\": \n");

    // ---- reader
    rl_eval_data_t *d =
        rl_eval_data_load((const char *[]){good}, 1, "prompt", "answer", 0, err, sizeof err);
    CHECK_MSG(d != NULL, "%s", err);
    if (d) {
        CHECK_INT(rl_eval_data_count(d), 3);
        CHECK_STR(rl_eval_data_row(d, 1)->prompt, "45*2+300=");
        CHECK_STR(rl_eval_data_row(d, 1)->answer, "390");
        CHECK(rl_eval_data_row(d, 3) == NULL);
        rl_eval_data_destroy(&d);
        CHECK(d == NULL);
    }
    d = rl_eval_data_load((const char *[]){good}, 1, "q", "a", 0, err, sizeof err);
    CHECK_MSG(d == NULL, "rows 1-2 have no 'q'");
    CHECK_CONTAINS(err, "good.jsonl:1: the row has no text field 'q'");
    d = rl_eval_data_load((const char *[]){good}, 1, "prompt", "answer", 2, err, sizeof err);
    CHECK(d && rl_eval_data_count(d) == 2);
    rl_eval_data_destroy(&d);
    err[0] = '\0';
    CHECK(rl_eval_data_load((const char *[]){bad_field}, 1, "prompt", "answer", 0, err,
                            sizeof err) == NULL);
    CHECK_CONTAINS(err, "bad_field.jsonl:2: the row has no text or number field 'answer'");
    err[0] = '\0';
    CHECK(rl_eval_data_load((const char *[]){bad_json}, 1, "prompt", "answer", 0, err,
                            sizeof err) == NULL);
    CHECK_CONTAINS(err, "bad_json.jsonl:2: ");
    err[0] = '\0';
    CHECK(rl_eval_data_load((const char *[]){"/nonexistent.jsonl"}, 1, "prompt", "answer", 0, err,
                            sizeof err) == NULL);
    CHECK_CONTAINS(err, "/nonexistent.jsonl: ");

    // ---- run: every completion scored once, against its own row's answer
    rl_model_opts_t mo;
    rl_model_opts_default(&mo);
    rl_model_t *model = rl_model_load(MODEL, &mo, err, sizeof err);
    rl_tokenizer_t *tok = rl_tokenizer_new_dir(MODEL, err, sizeof err);
    d = rl_eval_data_load((const char *[]){good}, 1, "prompt", "answer", 0, err, sizeof err);
    CHECK_MSG(model && tok && d, "%s", err);
    if (model && tok && d) {
        rl_sampler_t *sampler = rl_sampler_new(model);
        rl_sampler_params_t sp;
        rl_sampler_params_default(&sp);
        sp.n = 4;
        sp.max_new_tokens = 7;
        sp.seed = 3;
        s_log_t log = {0};
        rl_eval_result_t r;
        int erc = rl_eval_run(sampler, tok, d, &sp, s_score, &log, &r, err, sizeof err);
        CHECK_MSG(erc == 0, "%d: %s", erc, err);
        CHECK_INT(log.calls, 12);
        CHECK_INT(r.rows, 3);
        CHECK_INT(r.samples, 12);
        for (int k = 0; k < 12; k++) {
            CHECK_STR(log.answers[k], k < 4 ? "136" : k < 8 ? "390" : "56");
        }
        CHECK_CLOSE(r.accuracy, log.expect_sum / 12.0, 1e-12);
        CHECK_CLOSE(r.format_rate, log.expect_fmt / 12.0, 1e-12);
        CHECK(r.mean_length >= 1.0 && r.mean_length <= 7.0);
        CHECK(r.clipped_ratio >= 0.0 && r.clipped_ratio <= 1.0);
        // the same seed gives the same evaluation
        s_log_t log2 = {0};
        rl_eval_result_t r2;
        CHECK_INT(rl_eval_run(sampler, tok, d, &sp, s_score, &log2, &r2, err, sizeof err), 0);
        CHECK(memcmp(log.lens, log2.lens, sizeof log.lens) == 0);
        CHECK_CLOSE(r2.accuracy, r.accuracy, 0.0);
        // a prompt that does not fit the context is refused with the sampler's message
        sp.max_new_tokens = 1 << 20;
        CHECK(rl_eval_run(sampler, tok, d, &sp, s_score, &log, &r, err, sizeof err) != 0);
        CHECK_CONTAINS(err, "eval: ");
        rl_sampler_destroy(&sampler);
    }
    rl_eval_data_destroy(&d);
    rl_tokenizer_destroy(&tok);
    rl_model_destroy(&model);

    // ---- the command
    static char out[8192];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s/rlctl' eval --model '%s' --data '%s' --json --n 2 2>&1",
             RL_BINARY_DIR, MODEL, good);
    CHECK_INT(rl_test_shell(cmd, out, sizeof out), 0);
    CHECK_CONTAINS(out, "{\"rows\": 3, \"samples\": 6, \"accuracy\": ");
    CHECK_CONTAINS(out, "\"format_rate\": ");
    snprintf(cmd, sizeof cmd, "'%s/rlctl' eval --model '%s' --data '%s' 2>&1", RL_BINARY_DIR,
             MODEL, bad_field);
    CHECK_INT(rl_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "bad_field.jsonl:2: the row has no text or number field 'answer'");
    snprintf(cmd, sizeof cmd, "'%s/rlctl' eval --model '%s' 2>&1", RL_BINARY_DIR, MODEL);
    CHECK_INT(rl_test_shell(cmd, out, sizeof out), 2);
    CHECK_CONTAINS(out, "--data FILE are required");
    snprintf(cmd, sizeof cmd, "'%s/rlctl' eval --model /nonexistent --data '%s' 2>&1",
             RL_BINARY_DIR, good);
    CHECK_INT(rl_test_shell(cmd, out, sizeof out), 2);
    rl_test_tmpdir_done(dir);
    RL_TEST_DONE();
}

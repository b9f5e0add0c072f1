// bench_tokenizer — encode throughput (MB/s of UTF-8 input, one core) of rl_tokenizer on the real
// Qwen3 tokenizer.json over a few MB of mixed text built from the committed golden corpus.
// Reports three figures, each the median of several runs: cold (the pre-token cache bypassed),
// first pass (a fresh handle whose cache fills as it goes: one pass over new training data) and
// warm (the cache filled by a previous pass), and a line for bench/RESULTS.md. Not a test.
//
//   bench_tokenizer [TOKENIZER_DIR] [MB]   (defaults: the fetched qwen3 folder, 4 MB)
#include "rl_bench.h"
#include "rl_tokenizer.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 5

// The corpus texts joined by newlines, repeated until `want` bytes: a realistic mix of prose,
// code, scripts and whitespace (repetition favours the warm cache, which is what training data
// with its recurring words does too; the cold figure bypasses the cache entirely).
static char *s_build_text(const char *corpus, size_t want, size_t *len_p) {
    FILE *f = fopen(corpus, "rb");
    if (!f) {
        return NULL;
    }
    char *one = NULL, *line = NULL;
    size_t one_n = 0, cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        json_t *row = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, NULL);
        json_t *t = json_object_get(row, "text");
        if (json_is_string(t)) {
            size_t n = json_string_length(t);
            char *q = realloc(one, one_n + n + 1);
            if (!q) {
                break;
            }
            one = q;
            memcpy(one + one_n, json_string_value(t), n);
            one_n += n;
            one[one_n++] = '\n';
        }
        json_decref(row);
    }
    free(line);
    fclose(f);
    if (!one_n) {
        free(one);
        return NULL;
    }
    char *text = malloc(want + one_n);
    size_t n = 0;
    while (text && n < want) {
        memcpy(text + n, one, one_n);
        n += one_n;
    }
    free(one);
    *len_p = n;
    return text;
}

static double s_run(rl_tokenizer_t *tok, const char *text, size_t len, int flags, size_t *ntok) {
    int32_t *ids = NULL;
    double t0 = rl_bench_now();
    int r = rl_tokenizer_encode(tok, text, len, flags, &ids, ntok);
    double dt = rl_bench_now() - t0;
    free(ids);
    if (r) {
        fprintf(stderr, "bench_tokenizer: encode failed: %s\n", rl_tokenizer_errmsg(tok));
        exit(1);
    }
    return dt;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : RL_SOURCE_DIR "/tests/fixtures/third_party/qwen3";
    double mb = argc > 2 ? atof(argv[2]) : 4.0;
    char err[512];
    double t0 = rl_bench_now();
    rl_tokenizer_t *tok = rl_tokenizer_new_dir(dir, err, sizeof(err));
    double t_load = rl_bench_now() - t0;
    if (!tok) {
        fprintf(stderr, "bench_tokenizer: %s (run tests/reference/fetch_tokenizers.sh)\n", err);
        return 1;
    }
    size_t len = 0;
    char *text = s_build_text(RL_SOURCE_DIR "/tests/fixtures/tokenizer/corpus.jsonl",
                              (size_t)(mb * 1e6), &len);
    if (!text) {
        fprintf(stderr, "bench_tokenizer: cannot read the corpus\n");
        return 1;
    }
    double cold[RUNS], first[RUNS], warm[RUNS];
    size_t ntok = 0;
    for (int i = 0; i < RUNS; i++) {
        cold[i] = s_run(tok, text, len, RL_TOKENIZER_NO_CACHE, &ntok);
    }
    for (int i = 0; i < RUNS; i++) {
        rl_tokenizer_t *fresh = rl_tokenizer_new_dir(dir, err, sizeof(err));
        if (!fresh) {
            fprintf(stderr, "bench_tokenizer: %s\n", err);
            return 1;
        }
        first[i] = s_run(fresh, text, len, 0, &ntok);
        rl_tokenizer_destroy(&fresh);
    }
    s_run(tok, text, len, 0, &ntok); // fill the cache
    for (int i = 0; i < RUNS; i++) {
        warm[i] = s_run(tok, text, len, 0, &ntok);
    }
    qsort(cold, RUNS, sizeof(double), rl_bench_cmp);
    qsort(warm, RUNS, sizeof(double), rl_bench_cmp);
    qsort(first, RUNS, sizeof(double), rl_bench_cmp);
    double mbs_cold = (double)len / 1e6 / cold[RUNS / 2];
    double mbs_first = (double)len / 1e6 / first[RUNS / 2];
    double mbs_warm = (double)len / 1e6 / warm[RUNS / 2];
    printf("tokenizer: %.2f MB mixed text, %zu tokens (%.2f bytes/token), load %.2f s\n",
           (double)len / 1e6, ntok, (double)len / (double)ntok, t_load);
    printf("tokenizer: encode cold %.1f MB/s, first pass %.1f MB/s, warm %.1f MB/s "
           "(median of %d, one core)\n", mbs_cold, mbs_first, mbs_warm, RUNS);
    printf("| tokenizer encode (Qwen3, mixed corpus, 1 core) | %.1f MB/s cold, %.1f MB/s first "
           "pass, %.1f MB/s warm | %.2f Mtok/s warm | load %.2f s |\n",
           mbs_cold, mbs_first, mbs_warm, (double)ntok / 1e6 / warm[RUNS / 2], t_load);
    free(text);
    rl_tokenizer_destroy(&tok);
    return 0;
}

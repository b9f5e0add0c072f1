// rl_test_run — helpers for suites that run the rlctl binary on run folders under a temporary
// directory `tmp`: run a command (output kept in <tmp>/out.txt), read that output, test paths,
// compare files, and read a run's metrics.jsonl without the values that differ run to run.
#ifndef RL_TEST_RUN_H
#define RL_TEST_RUN_H

#include "rl_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// Runs `rlctl <args>` with stdout+stderr into <tmp>/out.txt. Returns the exit status (-1 when
// it did not exit).
static inline int rl_test_rlctl(const char *tmp, const char *args) {
    size_t cap = strlen(args) + strlen(tmp) + sizeof(RL_BINARY_DIR) + 64;
    char *cmd = malloc(cap);
    if (!cmd) {
        return -1;
    }
    snprintf(cmd, cap, "%s/rlctl %s > %s/out.txt 2>&1", RL_BINARY_DIR, args, tmp);
    int st = system(cmd);
    free(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The output of the last rl_test_rlctl. caller owns result; free with free().
static inline char *rl_test_out(const char *tmp) {
    char p[1024];
    snprintf(p, sizeof(p), "%s/out.txt", tmp);
    return rl_test_read_file(p, NULL);
}

// 1 when <tmp>/<rel> exists.
static inline int rl_test_exists(const char *tmp, const char *rel) {
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    return access(p, F_OK) == 0;
}

// 1 when <tmp>/<a> and <tmp>/<b> hold the same bytes.
static inline int rl_test_files_equal(const char *tmp, const char *a, const char *b) {
    char pa[1400], pb[1400];
    size_t na = 0, nb = 0;
    snprintf(pa, sizeof(pa), "%s/%s", tmp, a);
    snprintf(pb, sizeof(pb), "%s/%s", tmp, b);
    char *x = rl_test_read_file(pa, &na), *y = rl_test_read_file(pb, &nb);
    int eq = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

// <tmp>/<run>/metrics.jsonl as a JSON array of its lines, without "time", "timing/*" and
// "tokens_per_second". caller owns result; json_decref.
static inline json_t *rl_test_metrics(const char *tmp, const char *run) {
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s/metrics.jsonl", tmp, run);
    char *txt = rl_test_read_file(p, NULL);
    json_t *arr = json_array();
    if (!txt) {
        return arr;
    }
    char *save = NULL;
    for (char *line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(line, 0, NULL);
        if (!o) {
            CHECK_MSG(0, "bad metrics line: %s", line);
            continue;
        }
        json_object_del(o, "time");
        const char *k;
        json_t *v;
        void *it;
        json_object_foreach_safe(o, it, k, v) {
            if (strncmp(k, "timing/", 7) == 0 || strcmp(k, "tokens_per_second") == 0) {
                json_object_del(o, k);
            }
        }
        json_array_append_new(arr, o);
    }
    free(txt);
    return arr;
}

#endif

// rl_test_run — helpers for suites that run the rlctl binary on run folders under a temporary
// directory `tmp`: run a command (output kept in <tmp>/out.txt) or start one in the background,
// read that output, test paths, compare files, watch processes (children, exits, whether gone),
// and read a run's metrics.jsonl without the values that differ run to run.
#ifndef RL_TEST_RUN_H
#define RL_TEST_RUN_H

#include "rl_test.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
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

// Sleeps 50 ms.
static inline void rl_test_nap(void) {
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
}

// Starts `exec rlctl <args>` in the background with stdout+stderr into <tmp>/<out>. Returns
// its pid (the rlctl process itself).
static inline pid_t rl_test_spawn(const char *tmp, const char *args, const char *out) {
    size_t cap = strlen(args) + strlen(tmp) + strlen(out) + sizeof(RL_BINARY_DIR) + 64;
    char *cmd = malloc(cap);
    if (!cmd) {
        return -1;
    }
    snprintf(cmd, cap, "exec %s/rlctl %s > %s/%s 2>&1", RL_BINARY_DIR, args, tmp, out);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    free(cmd);
    return pid;
}

// Children of `pid` (from /proc/<pid>/task/<pid>/children). Returns their count (<= cap).
static inline int rl_test_children(pid_t pid, pid_t *out, int cap) {
    char p[128];
    snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    char *txt = rl_test_read_file(p, NULL);
    int n = 0;
    char *save = NULL;
    for (char *t = txt ? strtok_r(txt, " \n", &save) : NULL; t && n < cap;
         t = strtok_r(NULL, " \n", &save)) {
        out[n++] = (pid_t)atoi(t);
    }
    free(txt);
    return n;
}

// 1 when the process is gone (or a zombie nobody reaps).
static inline int rl_test_gone(pid_t pid) {
    char p[128];
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    char *txt = rl_test_read_file(p, NULL);
    if (!txt) {
        return 1;
    }
    char *rp = strrchr(txt, ')');
    int zombie = rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
    free(txt);
    return zombie;
}

// 1 when every p[i] is gone within timeout_s.
static inline int rl_test_all_gone(const pid_t *p, int n, double timeout_s) {
    for (int tries = 0; tries < (int)(timeout_s * 20); tries++) {
        int all = 1;
        for (int i = 0; i < n; i++) {
            all &= rl_test_gone(p[i]);
        }
        if (all) {
            return 1;
        }
        rl_test_nap();
    }
    return 0;
}

// Waits up to timeout_s for child `pid`: its exit status, 128 + signal, or -1 (then killed).
static inline int rl_test_wait_exit(pid_t pid, double timeout_s) {
    for (int tries = 0; tries < (int)(timeout_s * 20); tries++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        rl_test_nap();
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
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

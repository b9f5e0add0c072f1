// rl_test_run — helpers for suites that run the rlctl binary on run folders under a temporary
// directory `tmp`: run a command (output kept in <tmp>/out.txt) or start one in the background,
// read that output, start a test server and stop it, test paths, compare files, damage a
// checkpoint's files, watch processes (children, exits, whether gone), read a run's
// metrics.jsonl without the values that differ run to run, and compare two runs' metrics and
// weights.
#ifndef RL_TEST_RUN_H
#define RL_TEST_RUN_H

#include "rl_test.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// Runs `<bin> <args>` (bin: an rlctl, quoted) with stdout+stderr into <tmp>/out.txt. Returns the
// exit status (-1 when it did not exit).
static inline int rl_test_rlctl_at(const char *bin, const char *tmp, const char *args) {
    size_t cap = strlen(args) + strlen(tmp) + strlen(bin) + 64;
    char *cmd = malloc(cap);
    if (!cmd) {
        return -1;
    }
    snprintf(cmd, cap, "'%s' %s > %s/out.txt 2>&1", bin, args, tmp);
    int st = system(cmd);
    free(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The same with this build's rlctl.
static inline int rl_test_rlctl(const char *tmp, const char *args) {
    return rl_test_rlctl_at(RL_BINARY_DIR "/rlctl", tmp, args);
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

// Starts a test server in the background: `exec <cmd> <tmp>/port <args>` (cmd e.g. "python3
// tests/env_server.py"), which writes the port it listens on to <tmp>/port; waits up to 10 s for
// it. Returns the port with *pid set, or -1 (*pid 0, the server stopped).
static inline int rl_test_serve(const char *tmp, const char *cmd, const char *args, pid_t *pid) {
    char pf[512], line[4096];
    snprintf(pf, sizeof pf, "%s/port", tmp);
    unlink(pf);
    snprintf(line, sizeof line, "exec %s %s %s", cmd, pf, args);
    *pid = fork();
    if (*pid == 0) {
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 400 && *pid > 0; i++) {
        char *t = rl_test_read_file(pf, NULL);
        int port = t ? atoi(t) : 0;
        free(t);
        if (port > 0) {
            return port;
        }
        struct timespec ts = {0, 25000000};
        nanosleep(&ts, NULL);
    }
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    *pid = 0;
    return -1;
}

// Stops a server rl_test_serve started (SIGKILL, reaped); a no-op when *pid is 0.
static inline void rl_test_serve_stop(pid_t *pid) {
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    *pid = 0;
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

// Damages <tmp>/<rel> in place: the 4 bytes `back` bytes before its end become `word` (a float's
// bits: 0x7fc00000 is a NaN), or, with word 0, the lowest bit of that byte flips. Returns 0 or -1.
static inline int rl_test_damage(const char *tmp, const char *rel, size_t back, uint32_t word) {
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    size_t n = 0;
    char *b = rl_test_read_file(p, &n);
    FILE *f = b && n >= back && back >= 4 ? fopen(p, "wb") : NULL;
    if (f) {
        unsigned char *at = (unsigned char *)b + n - back;
        if (word) {
            for (int i = 0; i < 4; i++) {
                at[i] = (unsigned char)(word >> (8 * i)); // safetensors data is little-endian
            }
        } else {
            at[0] ^= 1;
        }
    }
    int rc = f && fwrite(b, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f) != 0) {
        rc = -1;
    }
    free(b);
    return rc;
}

// Replaces the first `from` in <tmp>/<rel> by `to`. Returns 0, or -1 when from is not there.
static inline int rl_test_edit(const char *tmp, const char *rel, const char *from,
                               const char *to) {
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    char *b = rl_test_read_file(p, NULL), *at = b ? strstr(b, from) : NULL;
    FILE *f = at ? fopen(p, "wb") : NULL;
    int rc = f && fwrite(b, 1, (size_t)(at - b), f) == (size_t)(at - b) && fputs(to, f) >= 0 &&
                     fputs(at + strlen(from), f) >= 0
                 ? 0
                 : -1;
    if (f && fclose(f) != 0) {
        rc = -1;
    }
    free(b);
    return rc;
}

// Makes checkpoint folder <tmp>/<rel> look as an rlctl before manifests wrote it: no
// manifest.json, an empty DONE. Returns 0 or -1.
static inline int rl_test_unmanifest(const char *tmp, const char *rel) {
    char p[1400];
    snprintf(p, sizeof(p), "%s/%s/manifest.json", tmp, rel);
    int rc = unlink(p);
    snprintf(p, sizeof(p), "%s/%s/DONE", tmp, rel);
    FILE *f = fopen(p, "wb");
    if (!f || fclose(f) != 0) {
        rc = -1;
    }
    return rc;
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

// Run b's metrics against run a's (rl_test_metrics of both): every numeric value of every training
// line (one with "loss" or "critic/loss"), |b - a| / max(|a|, floor). Checks both have as many
// lines and at least min_lines training lines, and the worst within tol; prints the worst.
static inline void rl_test_metrics_close(const char *tmp, const char *a, const char *b, double tol,
                                         double floor, int min_lines) {
    json_t *ma = rl_test_metrics(tmp, a), *mb = rl_test_metrics(tmp, b);
    size_t i;
    json_t *o;
    int lines = 0, worst_line = 0;
    double worst = 0;
    char worst_key[128] = "";
    json_array_foreach(ma, i, o) {
        json_t *p = json_array_get(mb, i);
        if (!json_object_get(o, "loss") && !json_object_get(o, "critic/loss")) {
            continue; // evaluations, run info
        }
        lines++;
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
            if (!json_is_number(v)) {
                continue;
            }
            json_t *w = p ? json_object_get(p, k) : NULL;
            double x = json_number_value(v), y = w ? json_number_value(w) : NAN;
            double rel = fabs(x - y) / fmax(fabs(x), floor);
            if (!(rel <= worst) || !w) {
                worst = w ? rel : INFINITY;
                worst_line = (int)i;
                snprintf(worst_key, sizeof worst_key, "%s", k);
            }
        }
    }
    CHECK_MSG(lines >= min_lines, "%s: %d training lines", a, lines);
    CHECK_MSG(json_array_size(ma) == json_array_size(mb), "%s has %zu metrics lines, %s %zu", a,
              json_array_size(ma), b, json_array_size(mb));
    CHECK_MSG(worst <= tol, "%s vs %s: %s on line %d differs by %.3g of its value (tolerance %g)",
              b, a, worst_key, worst_line + 1, worst, tol);
    printf("  %-24s %d training lines, every metric within %.2g (worst %s, line %d)\n", b, lines,
           worst, worst_key, worst_line + 1);
    json_decref(ma);
    json_decref(mb);
}

// The F32 tensors of two safetensors files (the same header): their largest difference, and
// into *over (may be NULL) how many of the *n (may be NULL) values differ by more than tol;
// INFINITY when a file is missing or the headers differ.
static inline double rl_test_st_diff(const char *fa, const char *fb, double tol, size_t *over,
                                     size_t *n) {
    size_t na = 0, nb = 0, k = 0, o = 0;
    char *a = rl_test_read_file(fa, &na), *b = rl_test_read_file(fb, &nb);
    double worst = INFINITY;
    uint64_t ha = 0, hb = 0;
    if (a && b && na > 8 && nb > 8) {
        memcpy(&ha, a, 8);
        memcpy(&hb, b, 8);
    }
    if (ha && ha == hb && na == nb && !memcmp(a + 8, b + 8, ha)) { // the same header
        worst = 0;
        for (size_t i = 8 + ha; i + 4 <= na; i += 4, k++) {
            float x, y;
            memcpy(&x, a + i, 4);
            memcpy(&y, b + i, 4);
            double d = fabs((double)x - y);
            worst = fmax(worst, d);
            o += !(d <= tol);
        }
    }
    free(a);
    free(b);
    if (over) {
        *over = o;
    }
    if (n) {
        *n = k;
    }
    return worst;
}

// Their largest difference (rl_test_st_diff).
static inline double rl_test_st_max_diff(const char *fa, const char *fb) {
    return rl_test_st_diff(fa, fb, 0.0, NULL, NULL);
}

// <tmp>/<b>/final/<file> against <tmp>/<a>/final/<file> (rl_test_st_max_diff): checks every
// weight within tol and prints the largest difference.
static inline void rl_test_final_close(const char *tmp, const char *a, const char *b,
                                       const char *file, double tol) {
    char fa[1400], fb[1400];
    snprintf(fa, sizeof fa, "%s/%s/final/%s", tmp, a, file);
    snprintf(fb, sizeof fb, "%s/%s/final/%s", tmp, b, file);
    double d = rl_test_st_max_diff(fa, fb);
    CHECK_MSG(d <= tol, "%s vs %s: final/%s differs by %.3g (tolerance %g)", b, a, file, d, tol);
    printf("  %-24s final/%s within %.2g\n", b, file, d);
}

// A network namespace behind a veth pair: "another host" on this one, so that every byte to it
// crosses a (virtual) network link. Names from the tag and the pid; this side 10.<b>.<net>.1, the
// namespace 10.<b>.<net>.2 with net = 20 + pid % 200 (two suites or runs at once do not collide).
typedef struct {
    char ns[32], veth[32];
    char here[32], there[32], subnet[40]; // "10.b.net.1", "10.b.net.2", "10.b.net.0/24"
} rl_test_netns_t;

// Removes n's namespace (the veth pair goes with it). Safe on one that is not up.
static inline void rl_test_netns_down(rl_test_netns_t *n) {
    char cmd[512];
    if (!n->ns[0]) {
        return;
    }
    snprintf(cmd, sizeof cmd,
             "ip netns del %s; ip link del %s 2>/dev/null; ! ip netns list | grep -qw %s", n->ns,
             n->veth, n->ns);
    if (system(cmd) != 0) {
        printf("note: could not remove %s\n", n->ns);
    }
    n->ns[0] = '\0';
}

// Makes the namespace. Returns 0, or non-zero with why (not root, no CAP_NET_ADMIN) in why.
static inline int rl_test_netns_up(rl_test_netns_t *n, char tag, int b, char *why, size_t cap) {
    char cmd[2048];
    int id = (int)getpid() % 100000, net = 20 + id % 200;
    memset(n, 0, sizeof *n);
    snprintf(n->ns, sizeof n->ns, "rl%c%d", tag, id);
    snprintf(n->veth, sizeof n->veth, "rl%ch%d", tag, id);
    snprintf(n->here, sizeof n->here, "10.%d.%d.1", b, net);
    snprintf(n->there, sizeof n->there, "10.%d.%d.2", b, net);
    snprintf(n->subnet, sizeof n->subnet, "10.%d.%d.0/24", b, net);
    snprintf(cmd, sizeof cmd,
             "set -e; ip netns add %s; ip link add %s type veth peer name rl%cs%d; "
             "ip link set rl%cs%d netns %s; ip addr add %s/24 dev %s; ip link set %s up; "
             "ip netns exec %s ip addr add %s/24 dev rl%cs%d; "
             "ip netns exec %s ip link set rl%cs%d up; ip netns exec %s ip link set lo up 2>&1",
             n->ns, n->veth, tag, id, tag, id, n->ns, n->here, n->veth, n->veth, n->ns, n->there,
             tag, id, n->ns, tag, id, n->ns);
    why[0] = '\0';
    if (rl_test_shell(cmd, why, cap) != 0) {
        if (!why[0]) {
            snprintf(why, cap, "ip netns failed");
        }
        rl_test_netns_down(n);
        return 1;
    }
    return 0;
}

#endif

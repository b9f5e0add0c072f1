// test_optim — AdamW against an independent double-precision reference and hand-computed
// first steps, schedules at their key steps, clipping, and the state file (round trip,
// corrupt, truncated, wrong version, wrong size).
#include "rl_crc32c.h"
#include "rl_err.h"
#include "rl_optim.h"
#include "rl_test.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

// ---- reference: torch.optim.AdamW written out in double, one element at a time -------------
typedef struct {
    double m, v;
} s_ref_state_t;

static void s_ref_adamw(double *p, s_ref_state_t *st, const double *g, size_t n, int t,
                        double lr, double b1, double b2, double eps, double wd) {
    for (size_t i = 0; i < n; i++) {
        p[i] -= lr * wd * p[i];
        st[i].m = b1 * st[i].m + (1 - b1) * g[i];
        st[i].v = b2 * st[i].v + (1 - b2) * g[i] * g[i];
        double mhat = st[i].m / (1 - pow(b1, t));
        double vhat = st[i].v / (1 - pow(b2, t));
        p[i] -= lr * mhat / (sqrt(vhat) + eps);
    }
}

static void test_adamw(void) {
    enum { N = 7, STEPS = 25 };
    rl_optim_hparams_t hp = {0.9, 0.999, 1e-8, 0.01};
    rl_optim_t *o = rl_optim_new(N, &hp);
    CHECK(o != NULL);
    float p[N], g[N];
    double pr[N], gr[N];
    s_ref_state_t st[N];
    memset(st, 0, sizeof(st));
    for (int i = 0; i < N; i++) {
        p[i] = (float)(0.5 - 0.13 * i);
        pr[i] = p[i];
    }
    // Step 1 by hand: mhat = g, vhat = g^2, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps).
    double lr = 1e-2;
    for (int i = 0; i < N; i++) {
        g[i] = (float)(0.3 * (i - 3) + 0.05);
        gr[i] = g[i];
    }
    float p0[N];
    memcpy(p0, p, sizeof(p));
    rl_optim_step(o, p, g, lr);
    s_ref_adamw(pr, st, gr, N, 1, lr, 0.9, 0.999, 1e-8, 0.01);
    for (int i = 0; i < N; i++) {
        double hand = p0[i] * (1 - lr * 0.01) - lr * g[i] / (fabs(g[i]) + 1e-8);
        CHECK_CLOSE(p[i], hand, 1e-6);
    }
    CHECK_INT(rl_optim_steps(o), 1);
    // Further steps with changing gradients and a changing lr against the reference. float
    // elements vs double reference: relative error per step ~1e-7, over 25 steps well under 1e-5.
    for (int t = 2; t <= STEPS; t++) {
        lr = 1e-2 * (1.0 - t / 50.0);
        for (int i = 0; i < N; i++) {
            g[i] = (float)(sin(0.7 * t + i) * (i + 1) * 0.1);
            gr[i] = g[i];
        }
        rl_optim_step(o, p, g, lr);
        s_ref_adamw(pr, st, gr, N, t, lr, 0.9, 0.999, 1e-8, 0.01);
    }
    for (int i = 0; i < N; i++) {
        CHECK_CLOSE(p[i], pr[i], 1e-5);
        CHECK_CLOSE(rl_optim_m(o)[i], st[i].m, 1e-5);
        CHECK_CLOSE(rl_optim_v(o)[i], st[i].v, 1e-5);
    }
    // Hand-computed two-step value for one scalar: p0 = 1, g1 = 1, g2 = -1, lr 0.1, wd 0,
    // b1 0.9, b2 0.999: step 1 p = 1 - 0.1 = 0.9; step 2 m = 0.09 - 0.1 = -0.01 → mhat =
    // -0.01/0.19, v = 0.000999 + 0.001 = 0.001999 → vhat = 0.001999/0.001999 = 1 (to 1e-3), so
    // p2 = 0.9 + 0.1 * (0.01/0.19) / (sqrt(0.001999/(1-0.999^2)) + eps).
    rl_optim_hparams_t hp2 = {0.9, 0.999, 1e-8, 0.0};
    rl_optim_t *o2 = rl_optim_new(1, &hp2);
    float x = 1.0f, gx = 1.0f;
    rl_optim_step(o2, &x, &gx, 0.1);
    CHECK_CLOSE(x, 0.9, 1e-6);
    gx = -1.0f;
    rl_optim_step(o2, &x, &gx, 0.1);
    double vhat = 0.001999 / (1 - 0.999 * 0.999);
    CHECK_CLOSE(x, 0.9 + 0.1 * (0.01 / 0.19) / (sqrt(vhat) + 1e-8), 1e-6);
    rl_optim_destroy(&o2);
    rl_optim_destroy(&o);
    CHECK(o == NULL);
    rl_optim_destroy(&o); // no-op on NULL
}

static void test_schedules(void) {
    rl_sched_t s = {RL_SCHED_CONSTANT, 1.0, 100, 10, 0.0};
    CHECK_CLOSE(rl_sched_lr(&s, 0), 0.0, 1e-12); // transformers: warmup starts at 0
    CHECK_CLOSE(rl_sched_lr(&s, 5), 0.5, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 10), 1.0, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 99), 1.0, 1e-12);
    s.kind = RL_SCHED_LINEAR;
    CHECK_CLOSE(rl_sched_lr(&s, 9), 0.9, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 10), 1.0, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 55), 0.5, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 99), 1.0 / 90, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 100), 0.0, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 150), 0.0, 1e-12);
    s.kind = RL_SCHED_COSINE;
    CHECK_CLOSE(rl_sched_lr(&s, 10), 1.0, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 55), 0.5, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 100), 0.0, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 33), 0.5 * (1 + cos(3.14159265358979 * 23 / 90)),
                1e-12);
    s.min_lr_ratio = 0.1;
    CHECK_CLOSE(rl_sched_lr(&s, 55), 0.55, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 100), 0.1, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 5), 0.5, 1e-12); // warmup unaffected by the floor
    s.kind = RL_SCHED_LINEAR;
    CHECK_CLOSE(rl_sched_lr(&s, 55), 0.55, 1e-12);
    CHECK_CLOSE(rl_sched_lr(&s, 100), 0.1, 1e-12);
    s.lr = 3e-4;
    s.warmup_steps = 0;
    CHECK_CLOSE(rl_sched_lr(&s, 0), 3e-4, 1e-12); // no warmup: full rate at step 0
    CHECK_INT(rl_sched_warmup(7, 0.0, 100), 7);
    CHECK_INT(rl_sched_warmup(0, 0.05, 30), 2);  // ceil(1.5)
    CHECK_INT(rl_sched_warmup(0, 0.1, 100), 10);
    CHECK_INT(rl_sched_warmup(0, 0.0, 100), 0);
}

static void test_clip(void) {
    float g[2] = {3.0f, 4.0f};
    double n = rl_optim_clip_grad_norm(g, 2, 1.0);
    CHECK_CLOSE(n, 5.0, 1e-12);
    CHECK_CLOSE(g[0], 3.0 / (5.0 + 1e-6), 1e-6);
    CHECK_CLOSE(g[1], 4.0 / (5.0 + 1e-6), 1e-6);
    CHECK_CLOSE(sqrt(g[0] * g[0] + g[1] * g[1]), 1.0, 1e-6);
    float h[2] = {3.0f, 4.0f};
    CHECK_CLOSE(rl_optim_clip_grad_norm(h, 2, 10.0), 5.0, 1e-12);
    CHECK(h[0] == 3.0f && h[1] == 4.0f); // under the bound: untouched
    CHECK_CLOSE(rl_optim_clip_grad_norm(h, 2, 0.0), 5.0, 1e-12);
    CHECK(h[0] == 3.0f && h[1] == 4.0f); // 0 = off, the norm is still reported
    float z[3] = {NAN, 1.0f, 2.0f};
    CHECK(isnan(rl_optim_clip_grad_norm(z, 3, 1.0)));
    CHECK(z[1] == 1.0f);
}

static int s_write_bytes(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        return -1;
    }
    size_t w = fwrite(b, 1, n, f);
    fclose(f);
    return w == n ? 0 : -1;
}

static void test_state_file(const char *dir) {
    enum { N = 100 };
    rl_optim_hparams_t hp = {0.9, 0.95, 1e-6, 0.1};
    rl_optim_t *a = rl_optim_new(N, &hp), *b = rl_optim_new(N, &hp);
    float pa[N], pb[N], g[N];
    for (int i = 0; i < N; i++) {
        pa[i] = pb[i] = (float)i / N;
    }
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < N; i++) {
            g[i] = (float)cos(i * 0.3 + t);
        }
        rl_optim_step(a, pa, g, 1e-3);
    }
    char path[512], err[512];
    snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
    CHECK_INT(rl_optim_save(a, path, err, sizeof(err)), 0);
    CHECK_INT(rl_optim_load(b, path, err, sizeof(err)), 0);
    CHECK_INT(rl_optim_steps(b), 3);
    CHECK(memcmp(rl_optim_m(a), rl_optim_m(b), N * sizeof(float)) == 0);
    CHECK(memcmp(rl_optim_v(a), rl_optim_v(b), N * sizeof(float)) == 0);
    // continuing both gives bit-identical parameters (resume exactness at the optimizer level)
    memcpy(pb, pa, sizeof(pa));
    for (int t = 3; t < 6; t++) {
        for (int i = 0; i < N; i++) {
            g[i] = (float)cos(i * 0.3 + t);
        }
        rl_optim_step(a, pa, g, 1e-3);
        rl_optim_step(b, pb, g, 1e-3);
    }
    CHECK(memcmp(pa, pb, sizeof(pa)) == 0);

    size_t n = 0;
    unsigned char *bytes = (unsigned char *)rl_test_read_file(path, &n);
    CHECK_INT(n, RL_OPTIM_HEADER_SIZE + 2 * N * sizeof(float));
    char bad[512];
    snprintf(bad, sizeof(bad), "%s/bad.bin", dir);
    rl_optim_t *c = rl_optim_new(N, &hp);
    int rc;
    // truncated data
    s_write_bytes(bad, bytes, n - 10);
    rc = rl_optim_load(c, bad, err, sizeof(err));
    CHECK_INT(rc, RL_EIO);
    CHECK_CONTAINS(err, "truncated");
    CHECK_CONTAINS(err, "bad.bin");
    CHECK_INT(rl_optim_steps(c), 0); // unchanged on error
    // truncated header
    s_write_bytes(bad, bytes, 40);
    rc = rl_optim_load(c, bad, err, sizeof(err));
    CHECK_INT(rc, RL_EIO);
    CHECK_CONTAINS(err, "truncated");
    // empty file
    s_write_bytes(bad, bytes, 0);
    rc = rl_optim_load(c, bad, err, sizeof(err));
    CHECK(rc != 0);
    CHECK_CONTAINS(err, "not an rlctl optimizer state");
    // trailing bytes
    unsigned char *longer = calloc(n + 4, 1);
    memcpy(longer, bytes, n);
    s_write_bytes(bad, longer, n + 4);
    rc = rl_optim_load(c, bad, err, sizeof(err));
    CHECK_INT(rc, RL_EIO);
    CHECK_CONTAINS(err, "trailing");
    free(longer);
    // a flipped bit in the moments
    bytes[RL_OPTIM_HEADER_SIZE + 17] ^= 0x10;
    s_write_bytes(bad, bytes, n);
    rc = rl_optim_load(c, bad, err, sizeof(err));
    CHECK_INT(rc, RL_EPROTO);
    CHECK_CONTAINS(err, "corrupt");
    bytes[RL_OPTIM_HEADER_SIZE + 17] ^= 0x10;
    // bad magic
    bytes[0] = 'X';
    s_write_bytes(bad, bytes, n);
    rc = rl_optim_load(c, bad, err, sizeof(err));
    CHECK_INT(rc, RL_EPROTO);
    CHECK_CONTAINS(err, "not an rlctl optimizer state file");
    bytes[0] = 'R';
    // future version
    uint32_t v = 99;
    memcpy(bytes + 8, &v, 4);
    s_write_bytes(bad, bytes, n);
    rc = rl_optim_load(c, bad, err, sizeof(err));
    CHECK_INT(rc, RL_EVERSION);
    CHECK_CONTAINS(err, "version 99");
    v = RL_OPTIM_FORMAT_VERSION;
    memcpy(bytes + 8, &v, 4);
    // the file is intact again
    s_write_bytes(bad, bytes, n);
    CHECK_INT(rl_optim_load(c, bad, err, sizeof(err)), 0);
    // another parameter count
    rl_optim_t *d = rl_optim_new(N + 1, &hp);
    rc = rl_optim_load(d, path, err, sizeof(err));
    CHECK_INT(rc, RL_EINVAL);
    CHECK_CONTAINS(err, "holds 100 parameters");
    // missing file
    snprintf(bad, sizeof(bad), "%s/none.bin", dir);
    rc = rl_optim_load(d, bad, err, sizeof(err));
    CHECK(rc > 0);
    CHECK_CONTAINS(err, "none.bin");
    free(bytes);
    rl_optim_destroy(&a);
    rl_optim_destroy(&b);
    rl_optim_destroy(&c);
    rl_optim_destroy(&d);
}

// rl_optim_load_shared: the same state as rl_optim_load, read from the file's read-only pages;
// the same refusals, leaving the state unchanged; released (or loaded over) to writable zeros.
static void test_state_file_shared(const char *dir) {
    enum { N = 100 };
    rl_optim_hparams_t hp = {0.9, 0.95, 1e-6, 0.1};
    rl_optim_t *a = rl_optim_new(N, &hp), *b = rl_optim_new(N, &hp);
    float p[N], g[N];
    for (int i = 0; i < N; i++) {
        p[i] = (float)i / N;
        g[i] = (float)sin(i * 0.7);
    }
    rl_optim_step(a, p, g, 1e-3);
    rl_optim_step(a, p, g, 1e-3);
    char path[512], bad[512], err[512];
    snprintf(path, sizeof(path), "%s/shared.bin", dir);
    snprintf(bad, sizeof(bad), "%s/shared_bad.bin", dir);
    CHECK_INT(rl_optim_save(a, path, err, sizeof(err)), 0);
    size_t n = 0;
    unsigned char *bytes = (unsigned char *)rl_test_read_file(path, &n);
    // refusals first, on a fresh state: unchanged (step 0, zeros)
    s_write_bytes(bad, bytes, n - 10);
    CHECK_INT(rl_optim_load_shared(b, bad, err, sizeof(err)), RL_EIO);
    CHECK_CONTAINS(err, "truncated");
    unsigned char *longer = calloc(n + 4, 1);
    memcpy(longer, bytes, n);
    s_write_bytes(bad, longer, n + 4);
    CHECK_INT(rl_optim_load_shared(b, bad, err, sizeof(err)), RL_EIO);
    CHECK_CONTAINS(err, "trailing");
    free(longer);
    bytes[RL_OPTIM_HEADER_SIZE + 9] ^= 0x01;
    s_write_bytes(bad, bytes, n);
    CHECK_INT(rl_optim_load_shared(b, bad, err, sizeof(err)), RL_EPROTO);
    CHECK_CONTAINS(err, "corrupt");
    s_write_bytes(bad, bytes, 40);
    CHECK_INT(rl_optim_load_shared(b, bad, err, sizeof(err)), RL_EIO);
    CHECK_CONTAINS(err, "truncated");
    snprintf(bad, sizeof(bad), "%s/none_shared.bin", dir);
    CHECK(rl_optim_load_shared(b, bad, err, sizeof(err)) > 0);
    CHECK_CONTAINS(err, "none_shared.bin");
    rl_optim_t *c = rl_optim_new(N + 1, &hp);
    CHECK_INT(rl_optim_load_shared(c, path, err, sizeof(err)), RL_EINVAL);
    CHECK_CONTAINS(err, "holds 100 parameters");
    CHECK_INT(rl_optim_steps(b), 0);
    int zero = 1;
    for (int i = 0; i < 2 * N; i++) {
        zero = zero && rl_optim_m(b)[i] == 0.0f;
    }
    CHECK_MSG(zero, "a refused shared load changed the state");
    // the intact file: the saved state, bit for bit
    CHECK_INT(rl_optim_load_shared(b, path, err, sizeof(err)), 0);
    CHECK_INT(rl_optim_steps(b), 2);
    CHECK(memcmp(rl_optim_m(a), rl_optim_m(b), 2 * N * sizeof(float)) == 0);
    // loaded over by the copying load, then released: writable zeros, and it steps
    CHECK_INT(rl_optim_load(b, path, err, sizeof(err)), 0);
    CHECK(memcmp(rl_optim_m(a), rl_optim_m(b), 2 * N * sizeof(float)) == 0);
    CHECK_INT(rl_optim_load_shared(b, path, err, sizeof(err)), 0);
    rl_optim_release(b);
    zero = 1;
    for (int i = 0; i < 2 * N; i++) {
        zero = zero && rl_optim_m(b)[i] == 0.0f && rl_optim_v(b)[i % N] == 0.0f;
    }
    CHECK_MSG(zero, "released moments are not zeros");
    rl_optim_step(b, p, g, 1e-3);
    CHECK(rl_optim_m(b)[1] != 0.0f);
    // destroyed while mapped
    rl_optim_destroy(&c);
    c = rl_optim_new(N, &hp);
    CHECK_INT(rl_optim_load_shared(c, path, err, sizeof(err)), 0);
    free(bytes);
    rl_optim_destroy(&a);
    rl_optim_destroy(&b);
    rl_optim_destroy(&c);
}

// rl_optim_write_*: moments filled in place into the file's mapping give rl_optim_save's file,
// byte for byte; abort and a refused end leave no file behind; a folder that is not there is
// an error naming the path.
static void test_state_writer(const char *dir) {
    enum { N = 77 };
    rl_optim_hparams_t hp = {0.9, 0.99, 1e-8, 0.01};
    rl_optim_t *a = rl_optim_new(N, &hp), *other = rl_optim_new(N + 1, &hp);
    float p[N], g[N];
    for (int i = 0; i < N; i++) {
        p[i] = (float)i;
        g[i] = (float)cos(i * 1.3);
    }
    rl_optim_step(a, p, g, 1e-2);
    char want[512], got[512], tmp[520], err[512];
    snprintf(want, sizeof(want), "%s/want.bin", dir);
    snprintf(got, sizeof(got), "%s/got.bin", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", got);
    CHECK_INT(rl_optim_save(a, want, err, sizeof(err)), 0);
    rl_optim_writer_t *w = NULL;
    float *m = NULL, *v = NULL;
    CHECK_INT(rl_optim_write_begin(got, N, &w, &m, &v, err, sizeof(err)), 0);
    CHECK(w && m && v == m + N && access(tmp, F_OK) == 0 && access(got, F_OK) != 0);
    memcpy(m, rl_optim_m(a), N * sizeof(float));
    memcpy(v, rl_optim_v(a), N * sizeof(float));
    CHECK_INT(rl_optim_write_end(&w, a, err, sizeof(err)), 0);
    CHECK(w == NULL && access(tmp, F_OK) != 0);
    size_t nw = 0, ng = 0;
    char *bw = rl_test_read_file(want, &nw), *bg = rl_test_read_file(got, &ng);
    CHECK_MSG(bw && bg && nw == ng && memcmp(bw, bg, nw) == 0,
              "the file written in place differs from rl_optim_save's (%zu, %zu bytes)", ng, nw);
    free(bw);
    free(bg);
    // it loads as any state file
    rl_optim_t *b = rl_optim_new(N, &hp);
    CHECK_INT(rl_optim_load(b, got, err, sizeof(err)), 0);
    CHECK_INT(rl_optim_steps(b), 1);
    // abort: nothing left, the old file untouched
    CHECK_INT(rl_optim_write_begin(got, N, &w, &m, &v, err, sizeof(err)), 0);
    rl_optim_write_abort(&w);
    CHECK(w == NULL && access(tmp, F_OK) != 0);
    CHECK_INT(rl_optim_load(b, got, err, sizeof(err)), 0);
    // an end with a state of another size: refused, the temporary removed
    CHECK_INT(rl_optim_write_begin(got, N, &w, &m, &v, err, sizeof(err)), 0);
    CHECK_INT(rl_optim_write_end(&w, other, err, sizeof(err)), RL_EINVAL);
    CHECK_CONTAINS(err, "77 parameters");
    CHECK(w == NULL && access(tmp, F_OK) != 0);
    // a folder that is not there
    snprintf(got, sizeof(got), "%s/no/such/dir/opt.bin", dir);
    CHECK(rl_optim_write_begin(got, N, &w, &m, &v, err, sizeof(err)) > 0 && w == NULL);
    CHECK_CONTAINS(err, "no/such/dir/opt.bin.tmp");
    rl_optim_destroy(&a);
    rl_optim_destroy(&b);
    rl_optim_destroy(&other);
}

// No room for the file (a full disk: here a process whose files may not grow past 64 KiB,
// RLIMIT_FSIZE, the errors posix_fallocate gives alike): rl_optim_write_begin reserves the
// file's blocks first, so the checkpoint fails there with an error naming the file and why, not
// with a SIGBUS while the moments are written into the mapping; no temporary is left and the
// state file already there is untouched. In a child process (the limit is the process's).
static void test_state_writer_full(const char *dir) {
    char path[512], tmp[520], err[512] = "";
    snprintf(path, sizeof(path), "%s/got.bin", dir); // test_state_writer's, a valid state
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    size_t n0 = 0;
    char *before = rl_test_read_file(path, &n0);
    CHECK(before != NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit lim = {1 << 16, 1 << 16};
        signal(SIGXFSZ, SIG_IGN); // the error, not the signal
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
            _exit(3);
        }
        rl_optim_writer_t *w = NULL;
        float *m = NULL, *v = NULL;
        int rc = rl_optim_write_begin(path, 1 << 20, &w, &m, &v, err, sizeof(err)); // 8 MiB
        printf("  no room for 8 MiB of moments: %d %s\n", rc, err);
        fflush(stdout);
        _exit(rc == 0 ? 1 : w != NULL ? 2 : !strstr(err, tmp) ? 4 : 0);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the refusal (exit 0) was not seen: status %d (1 taken, 2 a writer left, 3 no "
              "limit, 4 the message does not name %s)",
              st, tmp);
    CHECK_MSG(access(tmp, F_OK) != 0, "%s was left behind", tmp);
    size_t n1 = 0;
    char *after = rl_test_read_file(path, &n1);
    CHECK_MSG(after && n1 == n0 && memcmp(before, after, n0) == 0, "%s changed", path);
    free(before);
    free(after);
}

static void test_crc32c(void) {
    // RFC 3720 (iSCSI) B.4 vectors and the usual check value.
    CHECK_INT(rl_crc32c(0, "123456789", 9), 0xE3069283u);
    unsigned char zeros[32] = {0}, ones[32], inc[32];
    memset(ones, 0xff, sizeof(ones));
    for (int i = 0; i < 32; i++) {
        inc[i] = (unsigned char)i;
    }
    CHECK_INT(rl_crc32c(0, zeros, 32), 0x8A9136AAu);
    CHECK_INT(rl_crc32c(0, ones, 32), 0x62A8AB43u);
    CHECK_INT(rl_crc32c(0, inc, 32), 0x46DD794Eu);
    CHECK_INT(rl_crc32c(rl_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    CHECK_INT(rl_crc32c(0, "", 0), 0u);
    // the 8-bytes-a-step loop against the bit-by-bit definition: every length 0..300 at every
    // alignment 0..7, and split at every point (the continuation argument)
    unsigned char buf[320];
    uint32_t x = 7;
    for (size_t i = 0; i < sizeof buf; i++) {
        x = x * 1664525u + 1013904223u;
        buf[i] = (unsigned char)(x >> 24);
    }
    int bad = 0;
    for (size_t off = 0; off < 8 && !bad; off++) {
        for (size_t len = 0; len <= 300 && !bad; len++) {
            uint32_t ref = 0xffffffffu;
            for (size_t i = 0; i < len; i++) {
                ref ^= buf[off + i];
                for (int k = 0; k < 8; k++) {
                    ref = (ref & 1u) ? (ref >> 1) ^ 0x82F63B78u : ref >> 1;
                }
            }
            ref = ~ref;
            size_t cut = len / 3;
            bad = rl_crc32c(0, buf + off, len) != ref ||
                  rl_crc32c(rl_crc32c(0, buf + off, cut), buf + off + cut, len - cut) != ref;
            CHECK_MSG(!bad, "crc32c of %zu bytes at offset %zu differs from the bitwise one", len,
                      off);
        }
    }
}

// Several parts (a model's flat view and a scalar head) are one optimizer: the same bits as one
// array holding both, for the clipping and for every AdamW step; sizes that do not add up are
// refused without a step.
static void test_parts(void) {
    enum { N1 = 37, N2 = 5, N = N1 + N2 };
    rl_optim_hparams_t hp = {0.9, 0.999, 1e-8, 0.01};
    rl_optim_t *one = rl_optim_new(N, &hp), *two = rl_optim_new(N, &hp);
    float p1[N], g1[N], p2a[N1], p2b[N2], g2a[N1], g2b[N2];
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        p1[i] = (float)((x >> 8) % 2001) / 1000.0f - 1.0f;
        if (i < N1) {
            p2a[i] = p1[i];
        } else {
            p2b[i - N1] = p1[i];
        }
    }
    for (int step = 1; step <= 4; step++) {
        for (int i = 0; i < N; i++) {
            x = x * 1664525u + 1013904223u;
            g1[i] = (float)((x >> 8) % 2001) / 100.0f - 10.0f; // norms well above max_norm
            if (i < N1) {
                g2a[i] = g1[i];
            } else {
                g2b[i - N1] = g1[i];
            }
        }
        rl_optim_part_t parts[2] = {{p2a, g2a, N1}, {p2b, g2b, N2}};
        double n1 = rl_optim_clip_grad_norm(g1, N, 1.0);
        double n2 = rl_optim_clip_grad_norm_parts(parts, 2, 1.0);
        CHECK_MSG(n1 == n2, "parts: norm %.17g vs one array %.17g", n2, n1);
        rl_optim_step(one, p1, g1, 1e-2);
        CHECK_INT(rl_optim_step_parts(two, parts, 2, 1e-2), 0);
        CHECK_MSG(memcmp(p1, p2a, sizeof p2a) == 0 && memcmp(p1 + N1, p2b, sizeof p2b) == 0,
                  "parts: step %d differs from one array", step);
    }
    rl_optim_part_t bad = {p2a, g2a, N1};
    CHECK_INT(rl_optim_step_parts(two, &bad, 1, 1e-2), RL_EINVAL);
    CHECK_INT((int)rl_optim_steps(two), 4);
    rl_optim_destroy(&one);
    rl_optim_destroy(&two);
}

int main(void) {
    char dir[] = "/tmp/rl_test_optim_XXXXXX";
    rl_test_tmpdir(dir, sizeof dir, "optim");
    RL_TEST_RUN(test_crc32c);
    RL_TEST_RUN(test_adamw);
    RL_TEST_RUN(test_schedules);
    RL_TEST_RUN(test_clip);
    RL_TEST_RUN(test_parts);
    RL_TEST_RUN(test_state_file, dir);
    RL_TEST_RUN(test_state_file_shared, dir);
    RL_TEST_RUN(test_state_writer, dir);
    RL_TEST_RUN(test_state_writer_full, dir);
    rl_test_tmpdir_done(dir);
    RL_TEST_DONE();
}

// test_layers — rl_layers numerics (STYLE.md §9):
//   1. every fast fp32 kernel against its double `_ref` twin on random inputs (odd sizes);
//   2. central finite differences in double on every `_ref` backward, for every input and
//      parameter, with the random linear functional L = sum(dout * out);
//   3. padding: padded rows are exactly zero in outputs and gradients, and padded inputs (even
//      NaN) never reach real rows;
//   4. RoPE inv_freq (default and llama3) against hand-computed values;
//   5. the model's fast paths: rl_expf, the RoPE table, packed attention (test_fast_paths).
#include "rl_hf.h"
#include "rl_layers.h"
#include "rl_test.h"
#include "rl_test_fd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// Sizes: deliberately odd so no kernel gets away with an aligned-only path.
enum { B = 3, T = 7, BT = B * T, C = 13, OC = 11, NH = 4, NKV = 2, D = 6, R = 3, V = 37 };
static const int LENS[B] = {7, 4, 1};

// Fast vs ref: fp32 has a unit roundoff of 6e-8; the longest reduction here has 37 terms of
// magnitude <= ~4, so accumulated rounding stays well under 1e-6 of max(1, |value|). 1e-5
// leaves a 10x margin and still catches any real bug (wrong index, missing term: O(0.1)).
#define TOL_FAST 1e-5
// Finite differences in double with step 1e-6: truncation error ~h^2 |f'''| ~ 1e-12, roundoff
// ~eps |L| / h ~ 1e-16 * 10 / 1e-6 = 1e-9; 1e-6 relative (floor 1) is a 1000x margin.
#define FD_STEP 1e-6
#define TOL_FD 1e-6

// ---- helpers ----------------------------------------------------------------------------------
typedef struct {
    uint64_t s;
} rng_t;

static double rnd(rng_t *r) { // uniform in [-1, 1)
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

// Random values that are exact in float, in both precisions.
static void fill2(rng_t *r, float *f, double *d, size_t n, double amp) {
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(amp * rnd(r));
        if (d) {
            d[i] = f[i];
        }
    }
}

static float *fal(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        abort();
    }
    return p;
}

static double *dal(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) {
        abort();
    }
    return p;
}

// max |f - d| / max(1, |d|) over n, with a CHECK against tol.
static double s_cmp(const char *what, const float *f, const double *d, size_t n, double tol) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double s = fabs(d[i]) > 1.0 ? fabs(d[i]) : 1.0;
        double e = fabs((double)f[i] - d[i]) / s;
        if (!(e <= worst)) {
            worst = e; // also catches NaN
        }
    }
    printf("  fast vs ref  %-26s worst %.3g\n", what, worst);
    CHECK_MSG(worst <= tol, "%s: %g > %g", what, worst, tol);
    return worst;
}

// ---- finite differences -----------------------------------------------------------------------
// A loss closure: returns L(params) = sum(dout * forward(params)), reading the params (one of
// which s_fd moves in place) from ctx.
typedef double (*loss_fn)(void *ctx);

typedef struct {
    loss_fn f;
    void *ctx;
} s_closure_t;

// The closure as an rl_fd_fn_d: it reads x, moved in place, from its ctx.
static double s_closure_call(void *p, const double *x) {
    (void)x;
    const s_closure_t *c = p;
    return c->f(c->ctx);
}

static double g_fd_worst = 0.0;

static void s_fd(const char *what, double *x, size_t n, const double *grad, loss_fn f,
                 void *ctx) {
    double worst = 0.0;
    size_t at = 0;
    s_closure_t c = {f, ctx};
    for (size_t i = 0; i < n; i++) {
        double num = rl_fd_central_d(s_closure_call, &c, x, i, FD_STEP);
        double s = fabs(num) > 1.0 ? fabs(num) : 1.0;
        double e = fabs(num - grad[i]) / s;
        if (!(e <= worst)) {
            worst = e;
            at = i;
        }
    }
    printf("  fin. diff.   %-26s worst %.3g (at %zu of %zu)\n", what, worst, at, n);
    CHECK_MSG(worst <= TOL_FD, "%s: %g > %g", what, worst, TOL_FD);
    if (worst > g_fd_worst) {
        g_fd_worst = worst;
    }
}

static double s_dot(const double *a, const double *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += a[i] * b[i];
    }
    return s;
}

// ---- embedding --------------------------------------------------------------------------------
typedef struct {
    const int32_t *ids;
    double *wte, *out, *dout;
} emb_ctx;

static double emb_loss(void *p) {
    emb_ctx *c = p;
    rl_embedding_forward_ref(c->out, c->ids, c->wte, BT, C);
    return s_dot(c->out, c->dout, (size_t)BT * C);
}

static void test_embedding(rng_t *r) {
    printf("embedding\n");
    int32_t ids[BT];
    for (int i = 0; i < BT; i++) {
        ids[i] = (int32_t)((i * 7) % V);
    }
    ids[3] = ids[5]; // a repeated id accumulates twice
    ids[BT - 1] = -1; // padding
    float *wte = fal(V * C), *out = fal(BT * C), *dout = fal(BT * C), *dw = fal(V * C);
    double *wted = dal(V * C), *outd = dal(BT * C), *doutd = dal(BT * C), *dwd = dal(V * C);
    fill2(r, wte, wted, V * C, 1.0);
    fill2(r, dout, doutd, BT * C, 1.0);
    fill2(r, dw, dwd, V * C, 1.0);
    rl_embedding_forward(out, ids, wte, BT, C);
    rl_embedding_forward_ref(outd, ids, wted, BT, C);
    s_cmp("embedding fwd", out, outd, BT * C, TOL_FAST);
    rl_embedding_backward(dw, dout, ids, BT, C);
    rl_embedding_backward_ref(dwd, doutd, ids, BT, C);
    s_cmp("embedding bwd dwte", dw, dwd, V * C, TOL_FAST);
    for (int c = 0; c < C; c++) {
        CHECK(out[(size_t)(BT - 1) * C + c] == 0.0f);
    }
    emb_ctx cx = {ids, wted, outd, doutd};
    memset(dwd, 0, sizeof(double) * V * C);
    rl_embedding_backward_ref(dwd, doutd, ids, BT, C);
    s_fd("embedding dwte", wted, V * C, dwd, emb_loss, &cx);
    free(wte), free(out), free(dout), free(dw), free(wted), free(outd), free(doutd), free(dwd);
}

// ---- RMSNorm ----------------------------------------------------------------------------------
typedef struct {
    double *x, *w, *out, *rstd, *dout;
    int N, C;
} rms_ctx;

static double rms_loss(void *p) {
    rms_ctx *c = p;
    rl_rmsnorm_forward_ref(c->out, c->rstd, c->x, c->w, 1e-5, c->N, c->C);
    return s_dot(c->out, c->dout, (size_t)c->N * c->C);
}

static void test_rmsnorm_shape(rng_t *r, int N, int Cn, const char *tag) {
    char name[64];
    size_t n = (size_t)N * Cn;
    float *x = fal(n), *w = fal(Cn), *out = fal(n), *rstd = fal(N), *dout = fal(n);
    float *dx = fal(n), *dw = fal(Cn);
    double *xd = dal(n), *wd = dal(Cn), *outd = dal(n), *rstdd = dal(N), *doutd = dal(n);
    double *dxd = dal(n), *dwd = dal(Cn);
    fill2(r, x, xd, n, 2.0);
    fill2(r, w, wd, Cn, 1.5);
    fill2(r, dout, doutd, n, 1.0);
    fill2(r, dx, dxd, n, 1.0);
    fill2(r, dw, dwd, Cn, 1.0);
    rl_rmsnorm_forward(out, rstd, x, w, 1e-5f, N, Cn);
    rl_rmsnorm_forward_ref(outd, rstdd, xd, wd, 1e-5, N, Cn);
    snprintf(name, sizeof name, "rmsnorm%s fwd", tag);
    s_cmp(name, out, outd, n, TOL_FAST);
    rl_rmsnorm_backward(dx, dw, dout, x, w, rstd, N, Cn);
    rl_rmsnorm_backward_ref(dxd, dwd, doutd, xd, wd, rstdd, N, Cn);
    snprintf(name, sizeof name, "rmsnorm%s bwd dinp", tag);
    s_cmp(name, dx, dxd, n, TOL_FAST);
    snprintf(name, sizeof name, "rmsnorm%s bwd dw", tag);
    s_cmp(name, dw, dwd, Cn, TOL_FAST);
    // in place
    memcpy(out, x, n * sizeof(float));
    rl_rmsnorm_forward(out, NULL, out, w, 1e-5f, N, Cn);
    snprintf(name, sizeof name, "rmsnorm%s fwd in place", tag);
    s_cmp(name, out, outd, n, TOL_FAST);

    memset(dxd, 0, n * sizeof(double));
    memset(dwd, 0, Cn * sizeof(double));
    rl_rmsnorm_backward_ref(dxd, dwd, doutd, xd, wd, rstdd, N, Cn);
    rms_ctx cx = {xd, wd, outd, rstdd, doutd, N, Cn};
    snprintf(name, sizeof name, "rmsnorm%s dinp", tag);
    s_fd(name, xd, n, dxd, rms_loss, &cx);
    snprintf(name, sizeof name, "rmsnorm%s dw", tag);
    s_fd(name, wd, Cn, dwd, rms_loss, &cx);
    free(x), free(w), free(out), free(rstd), free(dout), free(dx), free(dw);
    free(xd), free(wd), free(outd), free(rstdd), free(doutd), free(dxd), free(dwd);
}

static void test_rmsnorm(rng_t *r) {
    printf("rmsnorm\n");
    test_rmsnorm_shape(r, BT, C, "");
    test_rmsnorm_shape(r, BT * NH, D, " per-head");
}

// ---- linear -----------------------------------------------------------------------------------
typedef struct {
    double *x, *w, *b, *out, *dout;
} lin_ctx;

static double lin_loss(void *p) {
    lin_ctx *c = p;
    rl_linear_forward_ref(c->out, c->x, c->w, c->b, BT, C, OC);
    return s_dot(c->out, c->dout, (size_t)BT * OC);
}

static void test_linear(rng_t *r) {
    printf("linear\n");
    float *x = fal(BT * C), *w = fal(OC * C), *b = fal(OC), *out = fal(BT * OC);
    float *dout = fal(BT * OC), *dx = fal(BT * C), *dw = fal(OC * C), *db = fal(OC);
    double *xd = dal(BT * C), *wd = dal(OC * C), *bd = dal(OC), *outd = dal(BT * OC);
    double *doutd = dal(BT * OC), *dxd = dal(BT * C), *dwd = dal(OC * C), *dbd = dal(OC);
    fill2(r, x, xd, BT * C, 1.0);
    fill2(r, w, wd, OC * C, 1.0);
    fill2(r, b, bd, OC, 1.0);
    fill2(r, dout, doutd, BT * OC, 1.0);
    fill2(r, dx, dxd, BT * C, 1.0);
    fill2(r, dw, dwd, OC * C, 1.0);
    fill2(r, db, dbd, OC, 1.0);
    rl_linear_forward(out, x, w, b, BT, C, OC);
    rl_linear_forward_ref(outd, xd, wd, bd, BT, C, OC);
    s_cmp("linear fwd", out, outd, BT * OC, TOL_FAST);
    rl_linear_forward(out, x, w, NULL, BT, C, OC);
    rl_linear_forward_ref(outd, xd, wd, NULL, BT, C, OC);
    s_cmp("linear fwd (no bias)", out, outd, BT * OC, TOL_FAST);
    rl_linear_backward(dx, dw, db, dout, x, w, BT, C, OC);
    rl_linear_backward_ref(dxd, dwd, dbd, doutd, xd, wd, BT, C, OC);
    s_cmp("linear bwd dinp", dx, dxd, BT * C, TOL_FAST);
    s_cmp("linear bwd dw", dw, dwd, OC * C, TOL_FAST);
    s_cmp("linear bwd dbias", db, dbd, OC, TOL_FAST);
    // NULL skips: dinp only must leave dw untouched
    float w0 = dw[0];
    rl_linear_backward(dx, NULL, NULL, dout, x, w, BT, C, OC);
    CHECK(dw[0] == w0);
    // logits helper == linear without bias
    rl_logits_forward(out, x, w, BT, C, OC);
    s_cmp("logits fwd", out, outd, BT * OC, TOL_FAST);

    memset(dxd, 0, sizeof(double) * BT * C);
    memset(dwd, 0, sizeof(double) * OC * C);
    memset(dbd, 0, sizeof(double) * OC);
    rl_linear_backward_ref(dxd, dwd, dbd, doutd, xd, wd, BT, C, OC);
    lin_ctx cx = {xd, wd, bd, outd, doutd};
    s_fd("linear dinp", xd, BT * C, dxd, lin_loss, &cx);
    s_fd("linear dw", wd, OC * C, dwd, lin_loss, &cx);
    s_fd("linear dbias", bd, OC, dbd, lin_loss, &cx);
    free(x), free(w), free(b), free(out), free(dout), free(dx), free(dw), free(db);
    free(xd), free(wd), free(bd), free(outd), free(doutd), free(dxd), free(dwd), free(dbd);
}

// ---- LoRA (+ dropout) -------------------------------------------------------------------------
typedef struct {
    double *x, *A, *B, *out, *xa, *dout;
    double scale;
} lora_ctx;

static double lora_loss(void *p) {
    lora_ctx *c = p;
    memset(c->out, 0, sizeof(double) * BT * OC);
    rl_lora_forward_ref(c->out, c->xa, c->x, c->A, c->B, c->scale, BT, C, R, OC);
    return s_dot(c->out, c->dout, (size_t)BT * OC);
}

static void test_lora(rng_t *r) {
    printf("lora\n");
    const float scale = 16.0f / 3.0f;
    float *x = fal(BT * C), *A = fal(R * C), *Bm = fal(OC * R), *out = fal(BT * OC);
    float *xa = fal(BT * R), *dxa = fal(BT * R), *dout = fal(BT * OC), *dx = fal(BT * C);
    float *dA = fal(R * C), *dB = fal(OC * R);
    double *xd = dal(BT * C), *Ad = dal(R * C), *Bd = dal(OC * R), *outd = dal(BT * OC);
    double *xad = dal(BT * R), *doutd = dal(BT * OC), *dxd = dal(BT * C), *dAd = dal(R * C);
    double *dBd = dal(OC * R);
    fill2(r, x, xd, BT * C, 1.0);
    fill2(r, A, Ad, R * C, 0.5);
    fill2(r, Bm, Bd, OC * R, 0.5);
    fill2(r, out, outd, BT * OC, 1.0); // forward accumulates onto the base output
    fill2(r, dout, doutd, BT * OC, 1.0);
    fill2(r, dx, dxd, BT * C, 1.0);
    fill2(r, dA, dAd, R * C, 1.0);
    fill2(r, dB, dBd, OC * R, 1.0);
    rl_lora_forward(out, xa, x, A, Bm, scale, BT, C, R, OC);
    rl_lora_forward_ref(outd, xad, xd, Ad, Bd, scale, BT, C, R, OC);
    s_cmp("lora fwd (+= base)", out, outd, BT * OC, TOL_FAST);
    s_cmp("lora fwd saved xa", xa, xad, BT * R, TOL_FAST);
    rl_lora_backward(dx, dA, dB, dxa, dout, x, xa, A, Bm, scale, BT, C, R, OC);
    rl_lora_backward_ref(dxd, dAd, dBd, doutd, xd, xad, Ad, Bd, scale, BT, C, R, OC);
    s_cmp("lora bwd dinp", dx, dxd, BT * C, TOL_FAST);
    s_cmp("lora bwd dA", dA, dAd, R * C, TOL_FAST);
    s_cmp("lora bwd dB", dB, dBd, OC * R, TOL_FAST);

    memset(dxd, 0, sizeof(double) * BT * C);
    memset(dAd, 0, sizeof(double) * R * C);
    memset(dBd, 0, sizeof(double) * OC * R);
    lora_ctx cx = {xd, Ad, Bd, outd, xad, doutd, scale};
    lora_loss(&cx);
    rl_lora_backward_ref(dxd, dAd, dBd, doutd, xd, xad, Ad, Bd, scale, BT, C, R, OC);
    s_fd("lora dinp", xd, BT * C, dxd, lora_loss, &cx);
    s_fd("lora dA", Ad, R * C, dAd, lora_loss, &cx);
    s_fd("lora dB", Bd, OC * R, dBd, lora_loss, &cx);

    // Dropout on the branch input: y = s (m.x) A^T B^T; chain rule gives dx = m . dx_drop. The
    // composed gradient must match the analytic one computed with the dropped input in double.
    float *mask = fal(BT * C), *xdrop = fal(BT * C), *dxdrop = fal(BT * C), *dx2 = fal(BT * C);
    double *md = dal(BT * C), *xdropd = dal(BT * C), *dxdropd = dal(BT * C);
    for (int i = 0; i < BT * C; i++) {
        mask[i] = rnd(r) < 0.0 ? 0.0f : 1.0f / 0.75f; // mask values for p = 0.25 (approx.)
        md[i] = mask[i];
        xdropd[i] = xd[i] * md[i];
    }
    rl_dropout_forward(xdrop, x, mask, BT * C);
    memset(out, 0, sizeof(float) * BT * OC);
    rl_lora_forward(out, xa, xdrop, A, Bm, scale, BT, C, R, OC);
    rl_lora_backward(dxdrop, NULL, NULL, dxa, dout, xdrop, xa, A, Bm, scale, BT, C, R, OC);
    rl_dropout_backward(dx2, dxdrop, mask, BT * C);
    memset(outd, 0, sizeof(double) * BT * OC);
    rl_lora_forward_ref(outd, xad, xdropd, Ad, Bd, scale, BT, C, R, OC);
    rl_lora_backward_ref(dxdropd, NULL, NULL, doutd, xdropd, xad, Ad, Bd, scale, BT, C, R, OC);
    for (int i = 0; i < BT * C; i++) {
        dxdropd[i] *= md[i];
    }
    s_cmp("lora+dropout fwd", out, outd, BT * OC, TOL_FAST);
    s_cmp("lora+dropout dinp", dx2, dxdropd, BT * C, TOL_FAST);
    free(mask), free(xdrop), free(dxdrop), free(dx2), free(md), free(xdropd), free(dxdropd);
    free(x), free(A), free(Bm), free(out), free(xa), free(dxa), free(dout), free(dx), free(dA);
    free(dB), free(xd), free(Ad), free(Bd), free(outd), free(xad), free(doutd), free(dxd);
    free(dAd), free(dBd);
}

// ---- RoPE -------------------------------------------------------------------------------------
typedef struct {
    double *x, *out, *dout;
    const double *inv;
    const int *pos;
} rope_ctx;

static double rope_loss(void *p) {
    rope_ctx *c = p;
    rl_rope_forward_ref(c->out, c->x, c->inv, c->pos, BT, NH, D);
    return s_dot(c->out, c->dout, (size_t)BT * NH * D);
}

static void test_rope(rng_t *r) {
    printf("rope\n");
    // inv_freq against hand-computed values. D = 8, theta = 1e4: theta^(-2i/D) = 1, 0.1, 0.01,
    // 0.001. llama3 with factor 8, low_ff 1, high_ff 4, orig 1024: wavelen = 2 pi / inv =
    // 6.28, 62.8, 628.3, 6283; high_wavelen = 256, low_wavelen = 1024. i = 0, 1 keep; i = 3
    // (> 1024) -> 0.001 / 8 = 1.25e-4; i = 2 is medium: s = (1024 / 628.3185 - 1) / 3 =
    // 0.2099154, inv = (1 - s) 0.01 / 8 + s 0.01 = 0.0030867610.
    rl_hf_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.head_dim = 8;
    cfg.rope_theta = 10000.0;
    cfg.rope_type = RL_ROPE_DEFAULT;
    float invf[64];
    double invd[64];
    const double want_def[4] = {1.0, 0.1, 0.01, 0.001};
    rl_rope_inv_freq(invf, &cfg);
    rl_rope_inv_freq_ref(invd, &cfg);
    for (int i = 0; i < 4; i++) {
        CHECK_CLOSE(invd[i], want_def[i], 1e-14);
        CHECK_MSG(fabs(invf[i] - want_def[i]) <= 2e-7 * want_def[i], "default inv[%d] %.9g", i,
                  (double)invf[i]);
    }
    cfg.rope_type = RL_ROPE_LLAMA3;
    cfg.rope_factor = 8.0;
    cfg.rope_low_freq_factor = 1.0;
    cfg.rope_high_freq_factor = 4.0;
    cfg.rope_original_max_position_embeddings = 1024;
    const double want_l3[4] = {1.0, 0.1, 0.003086760967011274, 0.000125};
    rl_rope_inv_freq(invf, &cfg);
    rl_rope_inv_freq_ref(invd, &cfg);
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(fabs(invd[i] - want_l3[i]) <= 1e-14 * want_l3[i], "llama3 ref inv[%d] %.17g",
                  i, invd[i]);
        CHECK_MSG(fabs(invf[i] - want_l3[i]) <= 5e-7 * want_l3[i], "llama3 inv[%d] %.9g", i,
                  (double)invf[i]);
    }
    // Llama-3.2-1B's config (D 64, theta 5e5, factor 32, 1/4, 8192): values from the same
    // formula evaluated independently in double (python).
    char err[256];
    if (rl_hf_config_load(RL_FIXTURES "/hf/llama-3.2-1b", &cfg, err, sizeof err) == 0) {
        static const struct {
            int i;
            double v;
        } l32[] = {{0, 1.0},
                   {1, 0.6636012376960885},
                   {10, 0.016560440080994446},
                   {15, 0.001290547928209264},
                   {16, 0.00042955679655936815},
                   {17, 9.70828780262767e-05},
                   {20, 8.570255489881478e-06},
                   {25, 1.102883668639601e-06},
                   {31, 9.418306725434909e-08}};
        CHECK_INT(cfg.rope_type, RL_ROPE_LLAMA3);
        rl_rope_inv_freq(invf, &cfg);
        rl_rope_inv_freq_ref(invd, &cfg);
        double worst_f = 0.0;
        for (size_t n = 0; n < sizeof l32 / sizeof l32[0]; n++) {
            double w = l32[n].v;
            CHECK_MSG(fabs(invd[l32[n].i] - w) <= 1e-13 * w, "llama3.2 ref inv[%d]", l32[n].i);
            double e = fabs(invf[l32[n].i] - w) / w;
            worst_f = e > worst_f ? e : worst_f;
        }
        // fp32 rounding through ~8 float ops: a few ulp (6e-8 each).
        printf("  llama-3.2-1b inv_freq fp32 vs double: worst rel %.3g\n", worst_f);
        CHECK(worst_f <= 1e-6);
    } else {
        CHECK_MSG(0, "config: %s", err);
    }

    // Bit-exact fp32: transformers' op sequence re-run in python with a float32 rounding after
    // every op (scalar / tensor is reciprocal-then-multiply, python scalars cast to float32,
    // pow taken as correctly rounded), for the config above, the llama_gqa golden's (orig 64)
    // and Llama-3.2-1B's.
    {
        static const float small[4] = {0x1p+0f, 0x1.99999ap-4f, 0x1.94968p-9f, 0x1.0624dep-13f};
        static const float gqa[4] = {0x1p+0f, 0x1.ab5e6p-7f, 0x1.47ae14p-10f, 0x1.0624dep-13f};
        static const float l32[32] = {
            0x1p+0f,        0x1.53c38cp-1f,  0x1.c2ef78p-2f,  0x1.2b3dc6p-2f,  0x1.8d276p-3f,
            0x1.078d4p-3f,  0x1.5dc95ap-4f,  0x1.d03ccep-5f,  0x1.34119p-5f,   0x1.98de92p-6f,
            0x1.0f5386p-6f, 0x1.681adap-7f,  0x1.ddee9ep-8f,  0x1.3d2804p-8f,  0x1.a4ee4p-9f,
            0x1.524f36p-10f, 0x1.c26c4p-12f, 0x1.9731eep-14f, 0x1.46831ap-16f, 0x1.b15902p-17f,
            0x1.1f91fp-17f, 0x1.7da9e8p-18f, 0x1.fa8b86p-19f, 0x1.5024d6p-19f, 0x1.be2188p-20f,
            0x1.280d96p-20f, 0x1.88ec2p-21f, 0x1.04be68p-21f, 0x1.5a0f4ep-22f, 0x1.cb4a9ap-23f,
            0x1.30c94ep-23f, 0x1.94836p-24f};
        rl_hf_config_t c2;
        memset(&c2, 0, sizeof c2);
        c2.head_dim = 8;
        c2.rope_theta = 10000.0;
        c2.rope_type = RL_ROPE_LLAMA3;
        c2.rope_factor = 8.0;
        c2.rope_low_freq_factor = 1.0;
        c2.rope_high_freq_factor = 4.0;
        c2.rope_original_max_position_embeddings = 1024;
        rl_rope_inv_freq(invf, &c2);
        CHECK(memcmp(invf, small, sizeof small) == 0);
        c2.rope_original_max_position_embeddings = 64;
        rl_rope_inv_freq(invf, &c2);
        CHECK(memcmp(invf, gqa, sizeof gqa) == 0);
        if (cfg.head_dim == 64) { // the Llama-3.2-1B config loaded above
            rl_rope_inv_freq(invf, &cfg);
            int same = 0;
            for (int i = 0; i < 32; i++) {
                same += invf[i] == l32[i];
            }
            printf("  llama-3.2-1b inv_freq bit-exact vs emulated torch fp32: %d of 32\n", same);
            CHECK_INT(same, 32);
        }
    }

    // forward / backward, fast vs ref, positions per token (not monotone, some large)
    cfg.head_dim = D;
    cfg.rope_theta = 10000.0;
    cfg.rope_type = RL_ROPE_DEFAULT;
    rl_rope_inv_freq(invf, &cfg);
    double invr[D / 2];
    for (int i = 0; i < D / 2; i++) {
        invr[i] = invf[i]; // same frequencies in both, so only the rotation is compared
    }
    int pos[BT];
    for (int i = 0; i < BT; i++) {
        pos[i] = (i * 5) % 9 + (i == 4 ? 1000 : 0);
    }
    size_t n = (size_t)BT * NH * D;
    float *x = fal(n), *out = fal(n), *dout = fal(n), *dx = fal(n);
    double *xd = dal(n), *outd = dal(n), *doutd = dal(n), *dxd = dal(n);
    fill2(r, x, xd, n, 1.0);
    fill2(r, dout, doutd, n, 1.0);
    fill2(r, dx, dxd, n, 1.0);
    rl_rope_forward(out, x, invf, pos, BT, NH, D);
    rl_rope_forward_ref(outd, xd, invr, pos, BT, NH, D);
    // The fast kernel rounds the angle fl(inv * pos) to float (as torch does): at pos 1000 that
    // is up to 6e-8 * 1000 = 6e-5 rad off the double angle, hence 1e-4 here.
    s_cmp("rope fwd", out, outd, n, 1e-4);
    rl_rope_backward(dx, dout, invf, pos, BT, NH, D);
    rl_rope_backward_ref(dxd, doutd, invr, pos, BT, NH, D);
    s_cmp("rope bwd", dx, dxd, n, 1e-4);
    // in place, and the inverse via negated positions
    float *y = fal(n);
    memcpy(y, x, n * sizeof(float));
    rl_rope_forward(y, y, invf, pos, BT, NH, D);
    CHECK(memcmp(y, out, n * sizeof(float)) == 0);
    int npos[BT];
    for (int i = 0; i < BT; i++) {
        npos[i] = -pos[i];
    }
    rl_rope_forward(y, y, invf, npos, BT, NH, D);
    double back = 0.0;
    for (size_t i = 0; i < n; i++) {
        back = fmax(back, fabs(y[i] - x[i]));
    }
    printf("  rope inverse round trip max |err| %.3g\n", back);
    CHECK(back <= 1e-6);

    memset(dxd, 0, n * sizeof(double));
    rl_rope_backward_ref(dxd, doutd, invr, pos, BT, NH, D);
    rope_ctx cx = {xd, outd, doutd, invr, pos};
    s_fd("rope dinp", xd, n, dxd, rope_loss, &cx);
    free(x), free(out), free(dout), free(dx), free(y), free(xd), free(outd), free(doutd);
    free(dxd);
}

// ---- attention --------------------------------------------------------------------------------
enum { QN = BT * NH * D, KN = BT * NKV * D };

typedef struct {
    double *q, *k, *v, *out, *lse, *dout;
} att_ctx;

static double att_loss(void *p) {
    att_ctx *c = p;
    rl_attention_forward_ref(c->out, c->lse, c->q, c->k, c->v, LENS, B, T, NH, NKV, D);
    return s_dot(c->out, c->dout, QN);
}

static int s_padded(int row) { // row of (B,T): padding?
    return row % T >= LENS[row / T];
}

static void test_attention(rng_t *r) {
    printf("attention\n");
    float *q = fal(QN), *k = fal(KN), *v = fal(KN), *out = fal(QN), *lse = fal(B * NH * T);
    float *dout = fal(QN), *dq = fal(QN), *dk = fal(KN), *dv = fal(KN);
    float *scratch = fal(rl_attention_scratch_floats(T));
    double *qd = dal(QN), *kd = dal(KN), *vd = dal(KN), *outd = dal(QN), *lsed = dal(B * NH * T);
    double *doutd = dal(QN), *dqd = dal(QN), *dkd = dal(KN), *dvd = dal(KN);
    fill2(r, q, qd, QN, 2.0);
    fill2(r, k, kd, KN, 2.0);
    fill2(r, v, vd, KN, 1.0);
    fill2(r, dout, doutd, QN, 1.0);
    fill2(r, dq, dqd, QN, 1.0);
    fill2(r, dk, dkd, KN, 1.0);
    fill2(r, dv, dvd, KN, 1.0);
    rl_attention_forward(out, lse, q, k, v, LENS, B, T, NH, NKV, D, scratch);
    rl_attention_forward_ref(outd, lsed, qd, kd, vd, LENS, B, T, NH, NKV, D);
    s_cmp("attention fwd", out, outd, QN, TOL_FAST);
    s_cmp("attention fwd lse", lse, lsed, B * NH * T, TOL_FAST);
    rl_attention_backward(dq, dk, dv, dout, q, k, v, lse, LENS, B, T, NH, NKV, D, scratch);
    rl_attention_backward_ref(dqd, dkd, dvd, doutd, qd, kd, vd, lsed, LENS, B, T, NH, NKV, D);
    s_cmp("attention bwd dq", dq, dqd, QN, TOL_FAST);
    s_cmp("attention bwd dk", dk, dkd, KN, TOL_FAST);
    s_cmp("attention bwd dv", dv, dvd, KN, TOL_FAST);

    // finite differences on the ref, every element of q, k, v (padded ones included: their
    // gradient is 0 and so must the numerical one be)
    memset(dqd, 0, sizeof(double) * QN);
    memset(dkd, 0, sizeof(double) * KN);
    memset(dvd, 0, sizeof(double) * KN);
    rl_attention_backward_ref(dqd, dkd, dvd, doutd, qd, kd, vd, lsed, LENS, B, T, NH, NKV, D);
    att_ctx cx = {qd, kd, vd, outd, lsed, doutd};
    s_fd("attention dq", qd, QN, dqd, att_loss, &cx);
    s_fd("attention dk", kd, KN, dkd, att_loss, &cx);
    s_fd("attention dv", vd, KN, dvd, att_loss, &cx);

    // padding: outputs and gradients of padded rows are exactly 0, and NaN in padded q/k/v/dout
    // changes nothing in real rows (it is never read)
    memset(dq, 0, sizeof(float) * QN);
    memset(dk, 0, sizeof(float) * KN);
    memset(dv, 0, sizeof(float) * KN);
    float *out2 = fal(QN), *dq2 = fal(QN), *dk2 = fal(KN), *dv2 = fal(KN);
    rl_attention_forward(out, lse, q, k, v, LENS, B, T, NH, NKV, D, scratch);
    rl_attention_backward(dq, dk, dv, dout, q, k, v, lse, LENS, B, T, NH, NKV, D, scratch);
    int pad_ok = 1;
    for (int row = 0; row < BT; row++) {
        if (!s_padded(row)) {
            continue;
        }
        for (int e = 0; e < NH * D; e++) {
            pad_ok &= out[row * NH * D + e] == 0.0f && dq[row * NH * D + e] == 0.0f;
        }
        for (int e = 0; e < NKV * D; e++) {
            pad_ok &= dk[row * NKV * D + e] == 0.0f && dv[row * NKV * D + e] == 0.0f;
        }
        for (int h = 0; h < NH; h++) {
            pad_ok &= lse[((row / T) * NH + h) * T + row % T] == 0.0f;
        }
        for (int e = 0; e < NH * D; e++) {
            q[row * NH * D + e] = NAN;
            dout[row * NH * D + e] = NAN;
        }
        for (int e = 0; e < NKV * D; e++) {
            k[row * NKV * D + e] = NAN;
            v[row * NKV * D + e] = NAN;
        }
    }
    CHECK_MSG(pad_ok, "padded rows of out/lse/dq/dk/dv are not all exactly 0");
    rl_attention_forward(out2, lse, q, k, v, LENS, B, T, NH, NKV, D, scratch);
    rl_attention_backward(dq2, dk2, dv2, dout, q, k, v, lse, LENS, B, T, NH, NKV, D, scratch);
    CHECK_MSG(memcmp(out, out2, sizeof(float) * QN) == 0, "padded inputs changed real outputs");
    CHECK_MSG(memcmp(dq, dq2, sizeof(float) * QN) == 0 && memcmp(dk, dk2, sizeof(float) * KN) == 0
                  && memcmp(dv, dv2, sizeof(float) * KN) == 0,
              "padded inputs changed real gradients");
    // lse NULL is allowed in forward
    rl_attention_forward(out2, NULL, q, k, v, LENS, B, T, NH, NKV, D, scratch);
    CHECK(memcmp(out, out2, sizeof(float) * QN) == 0);

    // decode: one query against a cache (K transposed with ldk > T, V with a row stride larger
    // than NKV*D) equals the reference and the full attention's row t of sequence 0 (it attends
    // to keys 0..t). The cache past t holds NaN: decode reads it and must ignore it.
    const size_t stride = NKV * D + 5, ldk = rl_attention_ldk(T) + 16;
    float *kc = fal(NKV * D * ldk), *vc = fal(T * stride), *dec = fal(NH * D);
    float *sc = fal(2 * rl_attention_ldk(T));
    double *kcd = dal(T * stride), *vcd = dal(T * stride), *decd = dal(NH * D);
    for (size_t i = 0; i < NKV * D * ldk; i++) {
        kc[i] = NAN;
    }
    for (int j = 0; j < T; j++) {
        for (int e = 0; e < NKV * D; e++) {
            kc[e * ldk + j] = k[j * NKV * D + e];
            vc[j * stride + e] = v[j * NKV * D + e];
            kcd[j * stride + e] = kc[e * ldk + j];
            vcd[j * stride + e] = vc[j * stride + e];
        }
    }
    for (int t = 0; t < T; t++) {
        rl_attention_decode(dec, q + (size_t)t * NH * D, kc, ldk, vc, stride, t + 1, NH, NKV, D,
                            sc);
        double qq[NH * D];
        for (int e = 0; e < NH * D; e++) {
            qq[e] = q[(size_t)t * NH * D + e];
        }
        rl_attention_decode_ref(decd, qq, kcd, vcd, t + 1, stride, NH, NKV, D);
        char name[48];
        snprintf(name, sizeof name, "decode t=%d vs ref", t);
        s_cmp(name, dec, decd, NH * D, TOL_FAST);
        snprintf(name, sizeof name, "decode t=%d vs full", t);
        s_cmp(name, dec, outd + (size_t)t * NH * D, NH * D, TOL_FAST);
    }
    free(kc), free(vc), free(dec), free(sc), free(kcd), free(vcd), free(decd);
    free(out2), free(dq2), free(dk2), free(dv2);
    free(q), free(k), free(v), free(out), free(lse), free(dout), free(dq), free(dk), free(dv);
    free(scratch), free(qd), free(kd), free(vd), free(outd), free(lsed), free(doutd), free(dqd);
    free(dkd), free(dvd);
}

// Decode with head_dim 40 (two 16-float blocks and a tail of 8), 3 query heads per kv head, and
// contexts of 1..37 keys (partial key blocks): against the double reference, the cache past
// n_ctx NaN.
static void test_attention_decode_blocks(rng_t *r) {
    printf("attention decode, 16-wide blocks\n");
    enum { DT = 37, DNH = 6, DNKV = 2, DD = 40, KVW = DNKV * DD };
    const size_t ldk = rl_attention_ldk(DT), ldv = KVW + 3;
    float *kt = fal(KVW * ldk), *vc = fal(DT * ldv), *q = fal(DNH * DD), *out = fal(DNH * DD);
    float *sc = fal(2 * rl_attention_ldk(DT));
    double *kd = dal(DT * ldv), *vd = dal(DT * ldv), *qd = dal(DNH * DD), *outd = dal(DNH * DD);
    fill2(r, vc, vd, DT * ldv, 1.0);
    fill2(r, q, qd, DNH * DD, 2.0);
    for (int j = 0; j < DT; j++) {
        for (int e = 0; e < KVW; e++) {
            kt[e * ldk + j] = (float)(2.0 * rnd(r));
            kd[j * ldv + e] = kt[e * ldk + j];
        }
    }
    for (int n = 1; n <= DT; n++) {
        for (int e = 0; e < KVW; e++) {
            for (size_t j = (size_t)n; j < ldk; j++) {
                kt[e * ldk + j] = NAN;
            }
        }
        rl_attention_decode(out, q, kt, ldk, vc, ldv, n, DNH, DNKV, DD, sc);
        rl_attention_decode_ref(outd, qd, kd, vd, n, ldv, DNH, DNKV, DD);
        char name[48];
        snprintf(name, sizeof name, "decode D=40 n_ctx=%d", n);
        s_cmp(name, out, outd, DNH * DD, TOL_FAST);
        for (int e = 0; e < KVW; e++) { // restore the next key
            if (n < DT) {
                kt[e * ldk + n] = (float)kd[n * ldv + e];
            }
        }
    }
    free(kt), free(vc), free(q), free(out), free(sc), free(kd), free(vd), free(qd), free(outd);
}

// Long sequences: several 64-row blocks (and a partial one) in forward, backward and prefill.
static void test_attention_long(rng_t *r) {
    printf("attention, long (row blocks)\n");
    enum { LB = 2, LT = 150 };
    const int lens[LB] = {150, 77};
    const size_t qn = (size_t)LB * LT * NH * D, kn = (size_t)LB * LT * NKV * D;
    float *q = fal(qn), *k = fal(kn), *v = fal(kn), *out = fal(qn), *lse = fal(LB * NH * LT);
    float *dout = fal(qn), *dq = fal(qn), *dk = fal(kn), *dv = fal(kn);
    float *scratch = fal(rl_attention_scratch_floats(LT));
    double *qd = dal(qn), *kd = dal(kn), *vd = dal(kn), *outd = dal(qn), *lsed = dal(LB * NH * LT);
    double *doutd = dal(qn), *dqd = dal(qn), *dkd = dal(kn), *dvd = dal(kn);
    fill2(r, q, qd, qn, 2.0);
    fill2(r, k, kd, kn, 2.0);
    fill2(r, v, vd, kn, 1.0);
    fill2(r, dout, doutd, qn, 1.0);
    rl_attention_forward(out, lse, q, k, v, lens, LB, LT, NH, NKV, D, scratch);
    rl_attention_forward_ref(outd, lsed, qd, kd, vd, lens, LB, LT, NH, NKV, D);
    s_cmp("attention T=150 fwd", out, outd, qn, TOL_FAST);
    s_cmp("attention T=150 lse", lse, lsed, LB * NH * LT, TOL_FAST);
    rl_attention_backward(dq, dk, dv, dout, q, k, v, lse, lens, LB, LT, NH, NKV, D, scratch);
    rl_attention_backward_ref(dqd, dkd, dvd, doutd, qd, kd, vd, lsed, lens, LB, LT, NH, NKV, D);
    s_cmp("attention T=150 bwd dq", dq, dqd, qn, TOL_FAST);
    s_cmp("attention T=150 bwd dk", dk, dkd, kn, TOL_FAST);
    s_cmp("attention T=150 bwd dv", dv, dvd, kn, TOL_FAST);
    // prefill of sequence 0 from position 0 and from position 20 (K of sequence 0 transposed
    // into a cache, v of sequence 0 a cache with stride NKV*D): equals the full attention's rows
    const int starts[2] = {0, 20};
    const size_t ldk = rl_attention_ldk(LT);
    float *kt = fal(NKV * D * ldk);
    for (int j = 0; j < LT; j++) {
        for (int e = 0; e < NKV * D; e++) {
            kt[e * ldk + j] = k[j * NKV * D + e];
        }
    }
    for (int s = 0; s < 2; s++) {
        int p0 = starts[s], n = LT - p0;
        float *pre = fal((size_t)n * NH * D);
        float *ps = fal(rl_attention_prefill_scratch_floats(n, p0 + n));
        rl_attention_prefill(pre, q + (size_t)p0 * NH * D, kt, ldk, v, NKV * D, p0, n, NH, NKV, D,
                             ps);
        s_cmp(s == 0 ? "prefill pos0=0 n=150" : "prefill pos0=20 n=130", pre,
              outd + (size_t)p0 * NH * D, (size_t)n * NH * D, TOL_FAST);
        free(pre), free(ps);
    }
    free(kt);
    free(q), free(k), free(v), free(out), free(lse), free(dout), free(dq), free(dk), free(dv);
    free(scratch), free(qd), free(kd), free(vd), free(outd), free(lsed), free(doutd), free(dqd);
    free(dkd), free(dvd);
}

// ---- SwiGLU and residual ------------------------------------------------------------------------
enum { SN = BT * OC };
typedef struct {
    double *g, *u, *out, *dout;
} glu_ctx;

static double glu_loss(void *p) {
    glu_ctx *c = p;
    rl_swiglu_forward_ref(c->out, c->g, c->u, SN);
    return s_dot(c->out, c->dout, SN);
}

static void test_swiglu(rng_t *r) {
    printf("swiglu\n");
    float *g = fal(SN), *u = fal(SN), *out = fal(SN), *dout = fal(SN), *dg = fal(SN);
    float *du = fal(SN);
    double *gd = dal(SN), *ud = dal(SN), *outd = dal(SN), *doutd = dal(SN), *dgd = dal(SN);
    double *dud = dal(SN);
    fill2(r, g, gd, SN, 6.0);
    fill2(r, u, ud, SN, 2.0);
    fill2(r, dout, doutd, SN, 1.0);
    fill2(r, dg, dgd, SN, 1.0);
    fill2(r, du, dud, SN, 1.0);
    rl_swiglu_forward(out, g, u, SN);
    rl_swiglu_forward_ref(outd, gd, ud, SN);
    s_cmp("swiglu fwd", out, outd, SN, TOL_FAST);
    rl_swiglu_backward(dg, du, dout, g, u, SN);
    rl_swiglu_backward_ref(dgd, dud, doutd, gd, ud, SN);
    s_cmp("swiglu bwd dgate", dg, dgd, SN, TOL_FAST);
    s_cmp("swiglu bwd dup", du, dud, SN, TOL_FAST);
    memset(dgd, 0, sizeof(double) * SN);
    memset(dud, 0, sizeof(double) * SN);
    rl_swiglu_backward_ref(dgd, dud, doutd, gd, ud, SN);
    glu_ctx cx = {gd, ud, outd, doutd};
    s_fd("swiglu dgate", gd, SN, dgd, glu_loss, &cx);
    s_fd("swiglu dup", ud, SN, dud, glu_loss, &cx);

    // residual / accumulate / dropout are one-liners; check them exactly
    rl_residual_forward(out, g, u, SN);
    int ok = 1;
    for (int i = 0; i < SN; i++) {
        ok &= out[i] == g[i] + u[i];
    }
    rl_accumulate(out, g, SN);
    for (int i = 0; i < SN; i++) {
        ok &= out[i] == (g[i] + u[i]) + g[i];
    }
    CHECK_MSG(ok, "residual / accumulate");
    free(g), free(u), free(out), free(dout), free(dg), free(du), free(gd), free(ud), free(outd);
    free(doutd), free(dgd), free(dud);
}

// ---- logprob head -------------------------------------------------------------------------------
enum { LN = 9 };
static const double TEMP = 0.7;

typedef struct {
    double *h, *w, *logp, *ent, *dlogp, *dent;
    const int32_t *tg;
} lp_ctx;

static double lp_loss(void *p) {
    lp_ctx *c = p;
    rl_logprob_forward_ref(c->logp, c->ent, c->h, c->w, c->tg, TEMP, LN, C, V);
    return s_dot(c->logp, c->dlogp, LN) + s_dot(c->ent, c->dent, LN);
}

static void test_logprob(rng_t *r) {
    printf("logprob head\n");
    int32_t tg[LN] = {3, 36, -1, 0, 17, 17, -1, 5, 30};
    float *h = fal(LN * C), *w = fal(V * C), *logp = fal(LN), *ent = fal(LN);
    float *dlogp = fal(LN), *dent = fal(LN), *dh = fal(LN * C), *dw = fal(V * C);
    double *hd = dal(LN * C), *wd = dal(V * C), *logpd = dal(LN), *entd = dal(LN);
    double *dlogpd = dal(LN), *dentd = dal(LN), *dhd = dal(LN * C), *dwd = dal(V * C);
    fill2(r, h, hd, LN * C, 1.5);
    fill2(r, w, wd, V * C, 1.0);
    fill2(r, dlogp, dlogpd, LN, 1.0);
    fill2(r, dent, dentd, LN, 1.0);
    fill2(r, dh, dhd, LN * C, 1.0);
    fill2(r, dw, dwd, V * C, 1.0);
    dlogp[4] = 0.0f, dlogpd[4] = 0.0; // a row with only an entropy gradient
    // chunk 1 and 4 (< LN rows): several chunks, with padding rows packed out
    for (int chunk = 1; chunk <= 4; chunk += 3) {
        float *scratch = fal(rl_logprob_scratch_floats(chunk, C, V));
        rl_logprob_forward(logp, ent, h, w, tg, (float)TEMP, LN, C, V, scratch, chunk);
        rl_logprob_forward_ref(logpd, entd, hd, wd, tg, TEMP, LN, C, V);
        s_cmp(chunk == 1 ? "logprob fwd logp (chunk 1)" : "logprob fwd logp (chunk 4)", logp,
              logpd, LN, TOL_FAST);
        s_cmp("logprob fwd entropy", ent, entd, LN, TOL_FAST);
        float *dh1 = fal(LN * C), *dw1 = fal(V * C);
        double *dh1d = dal(LN * C), *dw1d = dal(V * C);
        memcpy(dh1, dh, sizeof(float) * LN * C), memcpy(dw1, dw, sizeof(float) * V * C);
        memcpy(dh1d, dhd, sizeof(double) * LN * C), memcpy(dw1d, dwd, sizeof(double) * V * C);
        rl_logprob_backward(dh1, dw1, dlogp, dent, h, w, tg, (float)TEMP, LN, C, V, scratch,
                            chunk);
        rl_logprob_backward_ref(dh1d, dw1d, dlogpd, dentd, hd, wd, tg, TEMP, LN, C, V);
        s_cmp("logprob bwd dh", dh1, dh1d, LN * C, TOL_FAST);
        s_cmp("logprob bwd dw", dw1, dw1d, V * C, TOL_FAST);
        // without the entropy gradient
        memcpy(dh1, dh, sizeof(float) * LN * C), memcpy(dw1, dw, sizeof(float) * V * C);
        memcpy(dh1d, dhd, sizeof(double) * LN * C), memcpy(dw1d, dwd, sizeof(double) * V * C);
        rl_logprob_backward(dh1, dw1, dlogp, NULL, h, w, tg, (float)TEMP, LN, C, V, scratch,
                            chunk);
        rl_logprob_backward_ref(dh1d, dw1d, dlogpd, NULL, hd, wd, tg, TEMP, LN, C, V);
        s_cmp("logprob bwd dh (no dent)", dh1, dh1d, LN * C, TOL_FAST);
        s_cmp("logprob bwd dw (no dent)", dw1, dw1d, V * C, TOL_FAST);
        free(dh1), free(dw1), free(dh1d), free(dw1d), free(scratch);
    }
    // cross-check against full logits
    float *logits = fal(LN * V);
    rl_logits_forward(logits, h, w, LN, C, V);
    double worst = 0.0;
    for (int i = 0; i < LN; i++) {
        if (tg[i] < 0) {
            continue;
        }
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < V; v++) {
            mx = fmax(mx, logits[i * V + v] / TEMP);
        }
        for (int v = 0; v < V; v++) {
            s += exp(logits[i * V + v] / TEMP - mx);
        }
        double lpv = logits[i * V + tg[i]] / TEMP - mx - log(s);
        worst = fmax(worst, fabs(lpv - logp[i]));
    }
    printf("  logprob vs full-logits log_softmax: worst %.3g\n", worst);
    CHECK(worst <= TOL_FAST);
    free(logits);

    // padding rows: logp/entropy exactly 0, dh rows exactly 0, NaN there changes nothing
    float *scratch = fal(rl_logprob_scratch_floats(4, C, V));
    float *dh0 = fal(LN * C), *dhn = fal(LN * C), *logp2 = fal(LN), *ent2 = fal(LN);
    rl_logprob_forward(logp, ent, h, w, tg, (float)TEMP, LN, C, V, scratch, 4);
    rl_logprob_backward(dh0, NULL, dlogp, dent, h, w, tg, (float)TEMP, LN, C, V, scratch, 4);
    int ok = 1;
    for (int i = 0; i < LN; i++) {
        if (tg[i] >= 0) {
            continue;
        }
        ok &= logp[i] == 0.0f && ent[i] == 0.0f;
        for (int c = 0; c < C; c++) {
            ok &= dh0[i * C + c] == 0.0f;
            h[i * C + c] = NAN;
        }
        dlogp[i] = NAN;
        dent[i] = NAN;
    }
    CHECK_MSG(ok, "logprob: padded rows not exactly 0");
    rl_logprob_forward(logp2, ent2, h, w, tg, (float)TEMP, LN, C, V, scratch, 4);
    rl_logprob_backward(dhn, NULL, dlogp, dent, h, w, tg, (float)TEMP, LN, C, V, scratch, 4);
    CHECK(memcmp(logp, logp2, sizeof(float) * LN) == 0);
    CHECK(memcmp(ent, ent2, sizeof(float) * LN) == 0);
    CHECK(memcmp(dh0, dhn, sizeof(float) * LN * C) == 0);
    free(scratch), free(dh0), free(dhn), free(logp2), free(ent2);

    memset(dhd, 0, sizeof(double) * LN * C);
    memset(dwd, 0, sizeof(double) * V * C);
    rl_logprob_backward_ref(dhd, dwd, dlogpd, dentd, hd, wd, tg, TEMP, LN, C, V);
    lp_ctx cx = {hd, wd, logpd, entd, dlogpd, dentd, tg};
    s_fd("logprob dh (T=0.7, +entropy)", hd, LN * C, dhd, lp_loss, &cx);
    s_fd("logprob dw (T=0.7, +entropy)", wd, V * C, dwd, lp_loss, &cx);
    free(h), free(w), free(logp), free(ent), free(dlogp), free(dent), free(dh), free(dw);
    free(hd), free(wd), free(logpd), free(entd), free(dlogpd), free(dentd), free(dhd), free(dwd);
}

// 5. the fast paths the model takes: rl_expf's error over a sweep, the RoPE table against the
// per-row cos/sin (bit for bit, negative positions included), packed attention against padded
// attention (bit for bit: the same calls on the same rows).
static void test_fast_paths(rng_t *r) {
    printf("fast paths\n");
    double worst = 0.0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.0f + 175.0f * (float)i / 2000000.0f;
        double want = exp((double)x), got = rl_expf(x);
        worst = fmax(worst, fabs(got - want) / want);
    }
    printf("rl_expf: worst relative error %.3g over [-87, 88] (2e6 points)\n", worst);
    CHECK(worst < 2.4e-7); // 2 float ulps (2^-23 = 1.19e-7)
    CHECK(rl_expf(0.0f) == 1.0f && isnan(rl_expf(NAN)) && rl_expf(-1000.0f) > 0.0f &&
          isfinite(rl_expf(1000.0f)));

    enum { RT = 9, RD = 8 };
    float inv[RD / 2], cs[RT * RD], x[RT * 3 * RD], a[RT * 3 * RD], b[RT * 3 * RD];
    int pos[RT];
    for (int j = 0; j < RD / 2; j++) {
        inv[j] = powf(10000.0f, -2.0f * (float)j / RD);
    }
    rl_rope_table(cs, inv, RT, RD);
    fill2(r, x, NULL, RT * 3 * RD, 2.0);
    for (int sign = 1; sign >= -1; sign -= 2) {
        for (int t = 0; t < RT; t++) {
            pos[t] = sign * ((t * 5) % RT);
        }
        rl_rope_forward(a, x, inv, pos, RT, 3, RD);
        rl_rope_forward_table(b, x, cs, pos, RT, 3, RD);
        CHECK_MSG(memcmp(a, b, sizeof a) == 0, "rope table, positions of sign %d", sign);
    }

    // packed: the real rows of the padded layout, back to back
    const size_t qs = NH * D, ks = NKV * D;
    float *q = fal(BT * qs), *k = fal(BT * ks), *v = fal(BT * ks), *dout = fal(BT * qs);
    float *o1 = fal(BT * qs), *l1 = fal(B * NH * T), *dq1 = fal(BT * qs), *dk1 = fal(BT * ks),
          *dv1 = fal(BT * ks);
    float *pq = fal(BT * qs), *pk = fal(BT * ks), *pv = fal(BT * ks), *pdo = fal(BT * qs);
    float *o2 = fal(BT * qs), *l2 = fal(BT * NH), *dq2 = fal(BT * qs), *dk2 = fal(BT * ks),
          *dv2 = fal(BT * ks), *sc = fal(rl_attention_scratch_floats(T));
    fill2(r, q, NULL, BT * qs, 2.0);
    fill2(r, k, NULL, BT * ks, 2.0);
    fill2(r, v, NULL, BT * ks, 1.0);
    fill2(r, dout, NULL, BT * qs, 1.0);
    int starts[B + 1] = {0};
    for (int bb = 0; bb < B; bb++) {
        starts[bb + 1] = starts[bb] + LENS[bb];
        size_t n = (size_t)LENS[bb], src = (size_t)bb * T, dst = (size_t)starts[bb];
        memcpy(pq + dst * qs, q + src * qs, n * qs * sizeof(float));
        memcpy(pdo + dst * qs, dout + src * qs, n * qs * sizeof(float));
        memcpy(pk + dst * ks, k + src * ks, n * ks * sizeof(float));
        memcpy(pv + dst * ks, v + src * ks, n * ks * sizeof(float));
    }
    rl_attention_forward(o1, l1, q, k, v, LENS, B, T, NH, NKV, D, sc);
    rl_attention_backward(dq1, dk1, dv1, dout, q, k, v, l1, LENS, B, T, NH, NKV, D, sc);
    rl_attention_forward_packed(o2, l2, pq, pk, pv, starts, B, NH, NKV, D, sc);
    rl_attention_backward_packed(dq2, dk2, dv2, pdo, pq, pk, pv, l2, starts, B, NH, NKV, D, sc);
    int same = 1;
    for (int bb = 0; bb < B; bb++) {
        size_t n = (size_t)LENS[bb], src = (size_t)bb * T, dst = (size_t)starts[bb];
        same &= memcmp(o1 + src * qs, o2 + dst * qs, n * qs * sizeof(float)) == 0;
        same &= memcmp(dq1 + src * qs, dq2 + dst * qs, n * qs * sizeof(float)) == 0;
        same &= memcmp(dk1 + src * ks, dk2 + dst * ks, n * ks * sizeof(float)) == 0;
        same &= memcmp(dv1 + src * ks, dv2 + dst * ks, n * ks * sizeof(float)) == 0;
        for (int h = 0; h < NH; h++) {
            same &= memcmp(l1 + ((size_t)bb * NH + h) * T, l2 + dst * NH + (size_t)h * n,
                           n * sizeof(float)) == 0;
        }
    }
    CHECK_MSG(same, "packed attention differs from padded attention");

    // the writing SwiGLU backward equals the accumulating one into zeros (garbage before it)
    enum { NSW = 37 };
    float g[NSW], u[NSW], d[NSW], ga[NSW] = {0}, ua[NSW] = {0}, gs[NSW], us[NSW];
    fill2(r, g, NULL, NSW, 3.0);
    fill2(r, u, NULL, NSW, 1.0);
    fill2(r, d, NULL, NSW, 1.0);
    for (int i = 0; i < NSW; i++) {
        gs[i] = us[i] = NAN;
    }
    rl_swiglu_backward(ga, ua, d, g, u, NSW);
    rl_swiglu_backward_set(gs, us, d, g, u, NSW);
    CHECK_MSG(memcmp(ga, gs, sizeof ga) == 0 && memcmp(ua, us, sizeof ua) == 0,
              "rl_swiglu_backward_set differs from rl_swiglu_backward into zeros");
    float *bufs[] = {q,  k,  v,   dout, o1, l1,  dq1, dk1, dv1, pq,
                     pk, pv, pdo, o2,   l2, dq2, dk2, dv2, sc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(bufs[i]);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); // keep our lines and the CHECK failures (stderr) in order
    rl_layers_set_threads(1);
    rng_t r = {12345};
    RL_TEST_RUN(test_embedding, &r);
    RL_TEST_RUN(test_rmsnorm, &r);
    RL_TEST_RUN(test_linear, &r);
    RL_TEST_RUN(test_lora, &r);
    RL_TEST_RUN(test_rope, &r);
    RL_TEST_RUN(test_attention, &r);
    RL_TEST_RUN(test_attention_long, &r);
    RL_TEST_RUN(test_attention_decode_blocks, &r);
    RL_TEST_RUN(test_swiglu, &r);
    RL_TEST_RUN(test_logprob, &r);
    RL_TEST_RUN(test_fast_paths, &r);
    printf("worst finite-difference error over all backward passes: %.3g (tol %g)\n", g_fd_worst,
           TOL_FD);
    fflush(stdout);
    RL_TEST_DONE();
}

// test_safetensors — the safetensors reader, writer and dtype conversions (core/rl_safetensors).
// Conversions are checked exhaustively over all 16-bit patterns and against a double-based
// reference rounding written here; the reader against files built byte by byte by
// tests/fixtures/safetensors/make_fixtures.py (good files with exact values, a bad corpus with
// the expected messages, bad model folders), and the built `rlctl inspect` on the same corpus;
// the writer by byte identity with the python writer and by round trips; rl_st_nonfinite finds
// the first NaN/inf of each dtype (every 16-bit pattern, and F32 across blocks, unaligned).
#include "rl_err.h"
#include "rl_safetensors.h"
#include "rl_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define FIX RL_FIXTURES "/safetensors"

static char s_tmpdir[256];

// ---- helpers -------------------------------------------------------------------------------

static uint32_t s_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float s_float(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

// xorshift64*: explicit seed, state in the caller.
static uint64_t s_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}


// Runs `rlctl inspect <path>`; returns the exit code (or 128 + signal) and stderr in `errbuf`.
static int s_run_inspect(const char *path, const char *flag, char *errbuf, size_t errlen) {
    char errpath[512];
    snprintf(errpath, sizeof errpath, "%s/inspect.stderr", s_tmpdir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char *argv[] = {RL_BINARY_DIR "/rlctl", "inspect", (char *)path, (char *)flag, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        snprintf(errbuf, errlen, "posix_spawn failed: %s", strerror(rc));
        return -1;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    size_t n = 0;
    char *text = rl_test_read_file(errpath, &n);
    snprintf(errbuf, errlen, "%s", text ? text : "");
    free(text);
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}

// ---- conversions ---------------------------------------------------------------------------

// Independent decoders: value of a binary16 / bfloat16 pattern computed in double.
static double s_ref_f16_value(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0x1f) {
        v = m ? NAN : INFINITY;
    } else if (e == 0) {
        v = ldexp((double)m, -24);
    } else {
        v = ldexp((double)(m | 0x400), e - 25);
    }
    return sign ? -v : v;
}

// Round-to-nearest-even of x to a binary format with `p` significand bits (implicit bit
// included), minimum normal exponent emin, overflowing to inf at 2^emax_plus1. Done in double,
// where x / quantum is exact and nearbyint rounds half to even in the default mode.
static double s_ref_round(double x, int p, int emin, int emax_plus1) {
    if (isnan(x) || isinf(x) || x == 0.0) {
        return x;
    }
    double ax = fabs(x);
    int k;
    frexp(ax, &k); // ax = m * 2^k, m in [0.5, 1): floor(log2 ax) = k - 1
    int e = k - 1 < emin ? emin : k - 1;
    double quantum = ldexp(1.0, e - (p - 1));
    double r = nearbyint(ax / quantum) * quantum;
    if (r >= ldexp(1.0, emax_plus1)) {
        r = INFINITY;
    }
    return copysign(r, x);
}

static int s_same_value(double a, double b) {
    if (isnan(a) || isnan(b)) {
        return isnan(a) && isnan(b);
    }
    return a == b && signbit(a) == signbit(b);
}

static void test_f16_exhaustive(void) {
    int bad_decode = 0, bad_trip = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = rl_f16_to_f32((uint16_t)h);
        if (!s_same_value(f, s_ref_f16_value((uint16_t)h))) {
            bad_decode++;
        }
        uint16_t back = rl_f32_to_f16(f);
        int is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        if (!is_nan && back != h) {
            bad_trip++;
        }
        // NaN stays NaN with its sign, and becomes quiet; a quiet NaN comes back unchanged.
        if (is_nan && (((back >> 10) & 0x1f) != 0x1f || !(back & 0x200) ||
                       (back & 0x8000) != (h & 0x8000) || ((h & 0x200) && back != h))) {
            bad_nan++;
        }
    }
    CHECK_INT(bad_decode, 0);
    CHECK_INT(bad_trip, 0);
    CHECK_INT(bad_nan, 0);
}

static void test_bf16_exhaustive(void) {
    int bad_decode = 0, bad_trip = 0, bad_nan = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = rl_bf16_to_f32((uint16_t)b);
        if (s_bits(f) != b << 16) {
            bad_decode++;
        }
        uint16_t back = rl_f32_to_bf16(f);
        int is_nan = ((b >> 7) & 0xff) == 0xff && (b & 0x7f);
        if (!is_nan && back != b) {
            bad_trip++;
        }
        if (is_nan && (((back >> 7) & 0xff) != 0xff || !(back & 0x40) ||
                       (back & 0x8000) != (b & 0x8000) || ((b & 0x40) && back != b))) {
            bad_nan++;
        }
    }
    CHECK_INT(bad_decode, 0);
    CHECK_INT(bad_trip, 0);
    CHECK_INT(bad_nan, 0);
    // A NaN whose payload sits only in the low 16 bits must not truncate to infinity.
    uint16_t n = rl_f32_to_bf16(s_float(0x7f800001u));
    CHECK(((n >> 7) & 0xff) == 0xff && (n & 0x7f) != 0);
    n = rl_f32_to_bf16(s_float(0xff800001u));
    CHECK(((n >> 7) & 0xff) == 0xff && (n & 0x7f) != 0 && (n & 0x8000));
}

static int s_check_one_f32(float x) {
    int bad = 0;
    double r16 = s_ref_round((double)x, 11, -14, 16);
    double r_bf = s_ref_round((double)x, 8, -126, 128);
    double g16 = rl_f16_to_f32(rl_f32_to_f16(x));
    double g_bf = rl_bf16_to_f32(rl_f32_to_bf16(x));
    if (!s_same_value(g16, r16)) {
        fprintf(stderr, "  f16: x=%a (0x%08x) got %a want %a\n", (double)x, s_bits(x), g16, r16);
        bad++;
    }
    if (!s_same_value(g_bf, r_bf)) {
        fprintf(stderr, "  bf16: x=%a (0x%08x) got %a want %a\n", (double)x, s_bits(x), g_bf,
                r_bf);
        bad++;
    }
    return bad;
}

static void test_rounding_vs_reference(void) {
    const float edges[] = {
        0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, FLT_MIN,
        FLT_TRUE_MIN, -FLT_TRUE_MIN,
        // f16: max finite, just below the overflow tie, the tie (-> inf), above it
        65504.0f, 65519.99609375f, 65520.0f, 65520.0078125f, 65536.0f, -65520.0f,
        // f16: smallest subnormal, the tie below it (-> 0), just above the tie (-> 2^-24)
        0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.fffffep-26f, -0x1p-25f,
        // f16 subnormal ties: 1.5 units -> 2, 2.5 units -> 2, 3.5 -> 4
        0x1.8p-24f, 0x1.4p-23f, 0x1.cp-22f,
        // the largest subnormal and the tie between it and the smallest normal (-> normal)
        0x1.ff8p-15f, 0x1.ffcp-15f, 0x1p-14f,
        // normal ties: 1 + 2^-11 -> 1, 1 + 3*2^-11 -> 1 + 2^-9, just above a tie
        0x1.002p0f, 0x1.006p0f, 0x1.002002p0f,
        // bf16: ties 1 + 2^-8 -> 1, 1 + 3*2^-8 -> up; max finite; its overflow tie (-> inf)
        0x1.01p0f, 0x1.03p0f, 0x1.fep127f, 0x1.ffp127f, 0x1.fefffep127f,
        // bf16 subnormal range (f32 subnormals)
        0x1p-133f, 0x1p-134f, 0x1.8p-133f, 0x1p-149f, 0x1.fep-127f, 0x1.ffp-127f,
        3.14159265f, -2.7182817f, 1e-8f, 1e-5f, 6.1e-5f, 1e5f, 1e38f,
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        bad += s_check_one_f32(edges[i]);
    }
    // Every f32 whose low bits sit exactly on or next to a rounding boundary of either format.
    uint64_t seed = 0x5eed5afe7e45ull;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)s_rand(&seed);
        if (i % 4 == 1) {
            u = (u & 0xffffe000u) | 0x1000u | ((uint32_t)i & 0x10 ? 1u : 0u); // f16 ties
        } else if (i % 4 == 2) {
            u = (u & 0xffff0000u) | 0x8000u | ((uint32_t)i & 0x10 ? 1u : 0u); // bf16 ties
        } else if (i % 4 == 3) {
            // exponents around the f16 range (2^-26 .. 2^17), where the subnormal and
            // overflow paths live
            u = (u & 0x807fffffu) | ((uint32_t)(101 + (s_rand(&seed) % 44)) << 23);
        }
        bad += s_check_one_f32(s_float(u));
        if (bad > 20) {
            break;
        }
    }
    CHECK_INT(bad, 0);
    // Exact codes for a few: RNE ties and overflow, NaN stays quiet NaN.
    CHECK_INT(rl_f32_to_f16(65520.0f), 0x7c00);
    CHECK_INT(rl_f32_to_f16(65519.99609375f), 0x7bff);
    CHECK_INT(rl_f32_to_f16(0x1p-25f), 0x0000);
    CHECK_INT(rl_f32_to_f16(0x1.000002p-25f), 0x0001);
    CHECK_INT(rl_f32_to_f16(-0x1p-24f), 0x8001);
    CHECK_INT(rl_f32_to_f16(NAN) & 0x7e00, 0x7e00);
    CHECK_INT(rl_f32_to_bf16(0x1.01p0f), 0x3f80);
    CHECK_INT(rl_f32_to_bf16(0x1.03p0f), 0x3f82);
    CHECK_INT(rl_f32_to_bf16(FLT_MAX), 0x7f80);
    CHECK_INT(rl_f32_to_bf16(NAN) & 0x7fc0, 0x7fc0);
    CHECK_INT(rl_dtype_size(RL_DTYPE_F32), 4);
    CHECK_INT(rl_dtype_size(RL_DTYPE_BF16), 2);
    CHECK_STR(rl_dtype_name(RL_DTYPE_BF16), "BF16");
}

// ---- good fixtures with exact values -------------------------------------------------------

static void s_unhex(const char *hex, char *out, size_t cap) {
    size_t n = 0;
    for (; hex[0] && hex[1] && n + 1 < cap; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (char)v;
    }
    out[n] = '\0';
}

static void s_check_values_line(const rl_st_tensor_t *t, const char *dtype, const char *shape,
                                const char *bits, const char *name) {
    CHECK_MSG(t != NULL, "tensor '%s' not found", name);
    if (!t) {
        return;
    }
    CHECK_STR(rl_dtype_name(t->dtype), dtype);
    char sh[128] = "";
    for (int d = 0; d < t->ndim; d++) {
        size_t o = strlen(sh);
        snprintf(sh + o, sizeof sh - o, d ? "x%lld" : "%lld", (long long)t->shape[d]);
    }
    CHECK_STR(sh, shape);
    float *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
    rl_st_to_f32(v, t);
    int64_t count = 0;
    const char *p = bits;
    while (*p) {
        unsigned long want = strtoul(p, (char **)&p, 16);
        if (count < t->numel) {
            CHECK_MSG(s_bits(v[count]) == want, "%s[%lld]: 0x%08x != 0x%08lx", name,
                      (long long)count, s_bits(v[count]), want);
        }
        count++;
        if (*p == ',') {
            p++;
        }
    }
    CHECK_INT(count, t->numel);
    CHECK_INT(t->nbytes, (size_t)t->numel * rl_dtype_size(t->dtype));
    free(v);
}

static void test_good_fixtures(void) {
    size_t len;
    char *text = rl_test_read_file(FIX "/good/values.txt", &len);
    CHECK(text != NULL);
    if (!text) {
        return;
    }
    char err[512] = "";
    int lines = 0, per_file = 0;
    char last_file[128] = "";
    rl_st_file_t *f = NULL;
    rl_st_model_t *m = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *fields[5] = {0};
        char *p = line;
        for (int i = 0; i < 5; i++) {
            fields[i] = p;
            p = strchr(p, '\t');
            if (p) {
                *p++ = '\0';
            } else {
                for (int j = i + 1; j < 5; j++) {
                    fields[j] = (char *)""; // missing trailing fields are empty
                }
                break;
            }
        }
        if (strcmp(fields[0], last_file) != 0) {
            if (f) {
                CHECK_INT(rl_st_file_count(f), per_file);
            }
            if (m) {
                CHECK_INT(rl_st_model_count(m), per_file);
            }
            rl_st_file_destroy(&f);
            rl_st_model_destroy(&m);
            snprintf(last_file, sizeof last_file, "%s", fields[0]);
            char path[512];
            snprintf(path, sizeof path, FIX "/good/%s", fields[0]);
            if (strstr(fields[0], ".safetensors")) {
                f = rl_st_file_open(path, err, sizeof err);
                CHECK_MSG(f != NULL, "%s", err);
            } else {
                m = rl_st_model_open(path, err, sizeof err);
                CHECK_MSG(m != NULL, "%s", err);
            }
            per_file = 0;
        }
        char name[256];
        s_unhex(fields[1], name, sizeof name);
        const rl_st_tensor_t *t = f ? rl_st_file_find(f, name) : m ? rl_st_model_find(m, name)
                                                                   : NULL;
        s_check_values_line(t, fields[2], fields[3], fields[4], name);
        per_file++;
        lines++;
    }
    if (f) {
        CHECK_INT(rl_st_file_count(f), per_file);
    }
    if (m) {
        CHECK_INT(rl_st_model_count(m), per_file);
    }
    rl_st_file_destroy(&f);
    rl_st_model_destroy(&m);
    CHECK(lines >= 15);
    free(text);

    f = rl_st_file_open(FIX "/good/writer_rules.safetensors", err, sizeof err);
    CHECK_MSG(f != NULL, "%s", err);
    if (f) {
        CHECK_STR(rl_st_file_metadata(f, "format"), "pt");
        CHECK_STR(rl_st_file_metadata(f, "source"), "make_fixtures.py");
        CHECK_STR(rl_st_file_metadata(f, "a\nkey"), "line\001break");
        CHECK(rl_st_file_metadata(f, "nope") == NULL);
        CHECK_INT(rl_st_file_metadata_count(f), 3);
        CHECK(rl_st_file_find(f, "nope") == NULL);
        CHECK(rl_st_file_tensor(f, -1) == NULL);
        CHECK(rl_st_file_tensor(f, rl_st_file_count(f)) == NULL);
        // tensors come in data-offset order
        for (int i = 1; i < rl_st_file_count(f); i++) {
            const rl_st_tensor_t *a = rl_st_file_tensor(f, i - 1), *b = rl_st_file_tensor(f, i);
            CHECK((const char *)a->data + a->nbytes == (const char *)b->data);
        }
        const rl_st_tensor_t *s = rl_st_file_find(f, "scalar");
        CHECK(s && s->ndim == 0 && s->numel == 1);
        rl_st_file_destroy(&f);
        CHECK(f == NULL);
        rl_st_file_destroy(&f); // no-op on NULL
    }
    f = rl_st_file_open(FIX "/good/foreign.safetensors", err, sizeof err);
    CHECK_MSG(f != NULL, "%s", err);
    if (f) {
        CHECK_STR(rl_st_file_metadata(f, "note"), "foreign!");
        CHECK(rl_st_file_metadata(f, "format") == NULL);
        rl_st_file_destroy(&f);
    }
    const char *empties[] = {FIX "/good/no_tensors.safetensors",
                             FIX "/good/bare_empty.safetensors"};
    for (int i = 0; i < 2; i++) {
        f = rl_st_file_open(empties[i], err, sizeof err);
        CHECK_MSG(f != NULL, "%s", err);
        if (f) {
            CHECK_INT(rl_st_file_count(f), 0);
            CHECK(rl_st_file_find(f, "x") == NULL);
            rl_st_file_destroy(&f);
        }
    }
    m = rl_st_model_open(FIX "/good/sharded", err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (m) {
        CHECK_INT(rl_st_model_shard_count(m), 2);
        CHECK_STR(rl_st_model_shard_name(m, 0), "model-00001-of-00002.safetensors");
        CHECK_STR(rl_st_model_tensor(m, 2)->name, "layer.1.w");
        CHECK(rl_st_model_find(m, "nope") == NULL);
        rl_st_model_destroy(&m);
    }
    // rl_st_parse on memory, with and without a handle
    char *buf = rl_test_read_file(FIX "/good/writer_rules.safetensors", &len);
    CHECK(buf != NULL);
    if (buf) {
        CHECK_INT(rl_st_parse(buf, len, NULL, err, sizeof err), 0);
        CHECK_INT(rl_st_parse(buf, len, &f, err, sizeof err), 0);
        CHECK(f && rl_st_file_find(f, "h.half") != NULL);
        rl_st_file_destroy(&f);
        // every truncation fails cleanly with a message
        int bad = 0;
        for (size_t n = 0; n < len; n++) {
            err[0] = '\0';
            if (rl_st_parse(buf, n, &f, err, sizeof err) == 0 || f != NULL || !err[0]) {
                bad++;
            }
        }
        CHECK_INT(bad, 0);
        free(buf);
    }
}

// ---- bad corpus: library and rlctl inspect -------------------------------------------------

static int s_manifest_has(const char *manifest, const char *name) {
    size_t n = strlen(name);
    for (const char *p = manifest; (p = strstr(p, name)); p++) {
        if ((p == manifest || p[-1] == '\n') && p[n] == '\t') {
            return 1;
        }
    }
    return 0;
}

static void s_check_corpus(const char *dir, int is_model) {
    char path[512];
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    size_t len;
    char *text = rl_test_read_file(path, &len);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text) {
        return;
    }
    char *copy = strdup(text);
    int cases = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        CHECK(tab != NULL);
        if (!tab) {
            continue;
        }
        *tab = '\0';
        const char *want = tab + 1;
        snprintf(path, sizeof path, "%s/%s", dir, line);
        char err[1024] = "";
        if (is_model) {
            rl_st_model_t *m = rl_st_model_open(path, err, sizeof err);
            CHECK_MSG(m == NULL, "%s opened", path);
            rl_st_model_destroy(&m);
        } else {
            rl_st_file_t *f = rl_st_file_open(path, err, sizeof err);
            CHECK_MSG(f == NULL, "%s opened", path);
            rl_st_file_destroy(&f);
            // the in-memory parser gives the same message without the path
            size_t n = 0;
            char *buf = rl_test_read_file(path, &n);
            char err2[1024] = "";
            CHECK(buf != NULL);
            if (buf) {
                CHECK(rl_st_parse(buf, n, NULL, err2, sizeof err2) < 0);
                CHECK_CONTAINS(err2, want);
                free(buf);
            }
        }
        CHECK_CONTAINS(err, want);
        CHECK_CONTAINS(err, line); // the message names the file or folder
        char serr[2048];
        int code = s_run_inspect(path, NULL, serr, sizeof serr);
        CHECK_MSG(code >= 1 && code <= 127, "rlctl inspect %s exited %d", path, code);
        CHECK_CONTAINS(serr, want);
        cases++;
    }
    CHECK(cases >= (is_model ? 10 : 30));
    // Every file in the corpus has its expected message (a forgotten entry would go untested).
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "expected.txt") == 0) {
            continue;
        }
        CHECK_MSG(s_manifest_has(copy, de->d_name), "%s/%s has no line in expected.txt", dir,
                  de->d_name);
    }
    if (d) {
        closedir(d);
    }
    free(copy);
    free(text);
}

static void test_bad_corpus(void) {
    s_check_corpus(FIX "/bad", 0);
    s_check_corpus(FIX "/bad_model", 1);

    char err[512];
    rl_st_file_t *f = NULL;
    CHECK_INT(rl_st_file_load(FIX "/does-not-exist.safetensors", &f, err, sizeof err),
              RL_ENOTFOUND);
    CHECK_CONTAINS(err, "does-not-exist.safetensors: cannot open");
    CHECK_INT(rl_st_file_load(FIX "/bad/dtype_i64.safetensors", &f, err, sizeof err),
              RL_EUNSUPPORTED);
    CHECK_INT(rl_st_file_load(FIX "/bad/overlap.safetensors", &f, err, sizeof err), RL_EPROTO);
    CHECK_INT(rl_st_file_load(FIX "/good", &f, err, sizeof err), RL_EINVAL);
    CHECK(f == NULL);
    rl_st_model_t *m = NULL;
    char empty_dir[512];
    snprintf(empty_dir, sizeof empty_dir, "%s/empty_model", s_tmpdir);
    mkdir(empty_dir, 0755);
    CHECK_INT(rl_st_model_load(empty_dir, &m, err, sizeof err), RL_ENOTFOUND);
    CHECK_CONTAINS(err, "no model.safetensors or model.safetensors.index.json in this folder");
    CHECK_INT(rl_st_model_load(FIX "/no-such-dir", &m, err, sizeof err), RL_ENOTFOUND);
    CHECK(m == NULL);

    // the CLI on good input, usage errors and help
    char serr[2048];
    CHECK_INT(s_run_inspect(FIX "/good/writer_rules.safetensors", NULL, serr, sizeof serr), 0);
    CHECK_INT(s_run_inspect(FIX "/good/sharded", "--json", serr, sizeof serr), 0);
    CHECK_INT(s_run_inspect(FIX "/good/sharded/model.safetensors.index.json", NULL, serr,
                            sizeof serr), 0);
    CHECK_INT(s_run_inspect(FIX "/good/sharded", "--bogus", serr, sizeof serr), 2);
    CHECK_INT(s_run_inspect("--help", NULL, serr, sizeof serr), 0);
    CHECK_INT(s_run_inspect(empty_dir, NULL, serr, sizeof serr), 1);
    CHECK_CONTAINS(serr, "no model.safetensors");
}

// ---- writer --------------------------------------------------------------------------------

static int s_files_equal(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *pa = rl_test_read_file(a, &la), *pb = rl_test_read_file(b, &lb);
    int eq = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
    if (pa && pb && !eq) {
        size_t i = 0;
        while (i < la && i < lb && pa[i] == pb[i]) {
            i++;
        }
        fprintf(stderr, "  %s (%zu bytes) and %s (%zu bytes) differ at byte %zu\n", a, la, b, lb,
                i);
    }
    free(pa);
    free(pb);
    return eq;
}

// Re-writes the python writer's file with our writer, tensors added in reverse, and compares.
static void test_writer_matches_python(void) {
    char err[512];
    const char *ref = FIX "/good/writer_rules.safetensors";
    rl_st_file_t *f = rl_st_file_open(ref, err, sizeof err);
    CHECK_MSG(f != NULL, "%s", err);
    if (!f) {
        return;
    }
    for (int variant = 0; variant < 2; variant++) {
        rl_st_writer_t *w = rl_st_writer_new();
        CHECK(w != NULL);
        float *tmp[16] = {0};
        for (int i = rl_st_file_count(f) - 1; i >= 0; i--) {
            const rl_st_tensor_t *t = rl_st_file_tensor(f, i);
            if (variant == 0) {
                CHECK_INT(rl_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data), 0);
            } else {
                // via F32: every F16/BF16 value (NaN included, as it is quiet) survives
                tmp[i] = malloc((size_t)(t->numel + 1) * sizeof(float));
                rl_st_to_f32(tmp[i], t);
                CHECK_INT(rl_st_writer_add_f32(w, t->name, t->dtype, t->ndim, t->shape, tmp[i]),
                          0);
            }
        }
        for (int i = rl_st_file_metadata_count(f) - 1; i >= 0; i--) {
            const char *k = rl_st_file_metadata_key(f, i);
            CHECK_INT(rl_st_writer_set_metadata(w, k, rl_st_file_metadata(f, k)), 0);
        }
        char out[512];
        snprintf(out, sizeof out, "%s/rewrite%d.safetensors", s_tmpdir, variant);
        CHECK_INT(rl_st_writer_write(w, out, err, sizeof err), 0);
        CHECK_MSG(s_files_equal(out, ref), "C writer (variant %d) differs from python", variant);
        rl_st_writer_destroy(&w);
        CHECK(w == NULL);
        for (int i = 0; i < 16; i++) {
            free(tmp[i]);
        }
    }
    rl_st_file_destroy(&f);
}

static void test_writer_roundtrip(void) {
    uint64_t seed = 42;
    enum { N = 37 };
    float f32[N];
    uint16_t f16[N], bf16[N];
    for (int i = 0; i < N; i++) {
        f32[i] = (float)((double)(s_rand(&seed) >> 11) * 0x1p-53 * 20.0 - 10.0);
        f16[i] = rl_f32_to_f16(f32[i]);
        bf16[i] = rl_f32_to_bf16(f32[i]);
    }
    float scalar = -3.5f;
    const int64_t sh_a[] = {N}, sh_b[] = {1, N}, sh_c[] = {N, 1, 1}, sh_z[] = {3, 0, 2};
    rl_st_writer_t *w = rl_st_writer_new();
    CHECK_INT(rl_st_writer_add(w, "c.f16", RL_DTYPE_F16, 3, sh_c, f16), 0);
    CHECK_INT(rl_st_writer_add(w, "a.bf16", RL_DTYPE_BF16, 1, sh_a, bf16), 0);
    CHECK_INT(rl_st_writer_add(w, "b.f32", RL_DTYPE_F32, 2, sh_b, f32), 0);
    CHECK_INT(rl_st_writer_add(w, "scalar", RL_DTYPE_F32, 0, NULL, &scalar), 0);
    CHECK_INT(rl_st_writer_add(w, "zero", RL_DTYPE_BF16, 3, sh_z, NULL), 0);
    CHECK_INT(rl_st_writer_add(w, "d.f32", RL_DTYPE_F32, 1, sh_a, f32), 0);
    CHECK_INT(rl_st_writer_add_f32(w, "e.bf16", RL_DTYPE_BF16, 1, sh_a, f32), 0);
    CHECK_INT(rl_st_writer_set_metadata(w, "step", "7"), 0);
    // refusals
    CHECK_INT(rl_st_writer_add(w, "b.f32", RL_DTYPE_F32, 1, sh_a, f32), RL_EINVAL);
    CHECK_INT(rl_st_writer_add(w, "__metadata__", RL_DTYPE_F32, 1, sh_a, f32), RL_EINVAL);
    const int64_t neg[] = {-1};
    CHECK_INT(rl_st_writer_add(w, "neg", RL_DTYPE_F32, 1, neg, f32), RL_EINVAL);
    const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_INT(rl_st_writer_add(w, "nine", RL_DTYPE_F32, 9, nine, f32), RL_EINVAL);
    CHECK_INT(rl_st_writer_add(w, "bad\xff", RL_DTYPE_F32, 1, sh_a, f32), RL_EINVAL);
    CHECK_INT(rl_st_writer_set_metadata(w, "format", "tf"), RL_EINVAL);

    char path[512], err[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", s_tmpdir);
    CHECK_INT(rl_st_writer_write(w, path, err, sizeof err), 0);
    // writing again over an existing file replaces it
    CHECK_INT(rl_st_writer_write(w, path, err, sizeof err), 0);
    // an unwritable target fails, with the path, and leaves no temp file behind
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no-such-dir/x.safetensors", s_tmpdir);
    CHECK(rl_st_writer_write(w, bad, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "no-such-dir/x.safetensors");
    rl_st_writer_destroy(&w);

    rl_st_file_t *f = rl_st_file_open(path, err, sizeof err);
    CHECK_MSG(f != NULL, "%s", err);
    if (!f) {
        return;
    }
    size_t len;
    unsigned char *raw = (unsigned char *)rl_test_read_file(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) {
        hlen = (hlen << 8) | raw[i];
    }
    CHECK_INT(hlen % 8, 0);
    CHECK_INT(raw[8 + hlen - 1] == ' ' || raw[8 + hlen - 1] == '}', 1);
    free(raw);
    CHECK_STR(rl_st_file_metadata(f, "format"), "pt");
    CHECK_STR(rl_st_file_metadata(f, "step"), "7");
    CHECK_INT(rl_st_file_count(f), 7);
    // file order = element size desc, then name
    const char *order[] = {"b.f32", "d.f32", "scalar", "a.bf16", "c.f16", "e.bf16", "zero"};
    for (int i = 0; i < 7; i++) {
        const rl_st_tensor_t *t = rl_st_file_tensor(f, i);
        CHECK_STR(t->name, order[i]);
        // the map is page aligned, so this checks 8 + N + begin against the element size
        CHECK_MSG((uintptr_t)t->data % rl_dtype_size(t->dtype) == 0, "%s misaligned", t->name);
    }
    const rl_st_tensor_t *t = rl_st_file_find(f, "b.f32");
    CHECK(t && t->numel == N && t->ndim == 2 && memcmp(t->data, f32, sizeof f32) == 0);
    t = rl_st_file_find(f, "a.bf16");
    CHECK(t && memcmp(t->data, bf16, sizeof bf16) == 0);
    t = rl_st_file_find(f, "c.f16");
    CHECK(t && t->ndim == 3 && memcmp(t->data, f16, sizeof f16) == 0);
    t = rl_st_file_find(f, "e.bf16");
    CHECK(t && memcmp(t->data, bf16, sizeof bf16) == 0);
    t = rl_st_file_find(f, "scalar");
    CHECK(t && t->ndim == 0 && t->numel == 1 && t->nbytes == 4);
    if (t) {
        float v;
        rl_st_to_f32(&v, t);
        CHECK(v == -3.5f);
    }
    t = rl_st_file_find(f, "zero");
    CHECK(t && t->numel == 0 && t->nbytes == 0 && t->ndim == 3);
    float back[N];
    t = rl_st_file_find(f, "c.f16");
    if (t) {
        rl_st_to_f32(back, t);
        for (int i = 0; i < N; i++) {
            CHECK(back[i] == rl_f16_to_f32(f16[i]));
            CHECK_CLOSE(back[i], f32[i], 1e-3); // f16 keeps 11 bits: rel. error <= 2^-11
        }
    }
    rl_st_file_destroy(&f);

    // no temp files left beside the output
    DIR *d = opendir(s_tmpdir);
    struct dirent *de;
    int tmps = 0;
    while (d && (de = readdir(d))) {
        tmps += strstr(de->d_name, ".tmp.") != NULL;
    }
    if (d) {
        closedir(d);
    }
    CHECK_INT(tmps, 0);

    // a writer with no tensors makes a legal empty file
    w = rl_st_writer_new();
    snprintf(path, sizeof path, "%s/empty.safetensors", s_tmpdir);
    CHECK_INT(rl_st_writer_write(w, path, err, sizeof err), 0);
    rl_st_writer_destroy(&w);
    f = rl_st_file_open(path, err, sizeof err);
    CHECK_MSG(f != NULL, "%s", err);
    CHECK(f && rl_st_file_count(f) == 0);
    rl_st_file_destroy(&f);
}

static void test_writer_sharded(void) {
    enum { N = 10 };
    float v[N][16];
    const int64_t sh[] = {4, 4};
    rl_st_writer_t *w = rl_st_writer_new();
    char name[64];
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 16; k++) {
            v[i][k] = (float)(i * 16 + k) * 0.5f;
        }
        snprintf(name, sizeof name, "layers.%d.weight", i);
        // alternate dtypes: 64 bytes (F32) and 32 bytes (BF16) per tensor
        CHECK_INT(rl_st_writer_add_f32(w, name, i % 2 ? RL_DTYPE_BF16 : RL_DTYPE_F32, 2, sh,
                                       v[i]), 0);
    }
    CHECK_INT(rl_st_writer_set_metadata(w, "who", "test"), 0);
    char dir[512], err[512], path[600];
    snprintf(dir, sizeof dir, "%s/sharded", s_tmpdir);
    mkdir(dir, 0755);
    // 100-byte shards: F32 (64) + BF16 (32) = 96 fit, so 5 shards of two tensors
    CHECK_INT(rl_st_writer_write_sharded(w, dir, 100, err, sizeof err), 0);
    rl_st_model_t *m = rl_st_model_open(dir, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (m) {
        CHECK_INT(rl_st_model_shard_count(m), 5);
        CHECK_STR(rl_st_model_shard_name(m, 4), "model-00005-of-00005.safetensors");
        CHECK_INT(rl_st_model_count(m), N);
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "layers.%d.weight", i);
            const rl_st_tensor_t *t = rl_st_model_find(m, name);
            CHECK(t != NULL);
            if (t) {
                float back[16];
                rl_st_to_f32(back, t);
                CHECK(memcmp(back, v[i], sizeof back) == 0); // k/2 is exact in BF16 too
            }
        }
        rl_st_model_destroy(&m);
    }
    snprintf(path, sizeof path, "%s/model-00002-of-00005.safetensors", dir);
    rl_st_file_t *f = rl_st_file_open(path, err, sizeof err);
    CHECK(f && rl_st_file_count(f) == 2);
    CHECK(f && rl_st_file_metadata(f, "who") && rl_st_file_metadata(f, "format"));
    rl_st_file_destroy(&f);
    size_t len;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    char *idx = rl_test_read_file(path, &len);
    CHECK_CONTAINS(idx, "\"total_size\": 480");
    CHECK_CONTAINS(idx, "\"layers.3.weight\": \"model-00002-of-00005.safetensors\"");
    free(idx);
    // a limit smaller than one tensor: one tensor per shard
    snprintf(dir, sizeof dir, "%s/sharded1", s_tmpdir);
    mkdir(dir, 0755);
    CHECK_INT(rl_st_writer_write_sharded(w, dir, 1, err, sizeof err), 0);
    m = rl_st_model_open(dir, err, sizeof err);
    CHECK(m && rl_st_model_shard_count(m) == N && rl_st_model_count(m) == N);
    rl_st_model_destroy(&m);
    // everything fits: a single model.safetensors and no index
    snprintf(dir, sizeof dir, "%s/single", s_tmpdir);
    mkdir(dir, 0755);
    CHECK_INT(rl_st_writer_write_sharded(w, dir, (size_t)1 << 30, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    CHECK(access(path, F_OK) != 0);
    m = rl_st_model_open(dir, err, sizeof err);
    CHECK(m && rl_st_model_shard_count(m) == 1 && rl_st_model_count(m) == N);
    CHECK(m && strcmp(rl_st_model_shard_name(m, 0), "model.safetensors") == 0);
    rl_st_model_destroy(&m);
    rl_st_writer_destroy(&w);
}

// Many tensors: lookups go through the hash, not a scan.
static void test_many_tensors(void) {
    enum { N = 20000 };
    rl_st_writer_t *w = rl_st_writer_new();
    float v[N];
    const int64_t one[] = {1};
    char name[64];
    for (int i = 0; i < N; i++) {
        v[i] = (float)i;
        snprintf(name, sizeof name, "model.layers.%d.mlp.weight", i);
        if (rl_st_writer_add(w, name, RL_DTYPE_F32, 1, one, &v[i]) != 0) {
            CHECK(0);
            break;
        }
    }
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/many.safetensors", s_tmpdir);
    CHECK_INT(rl_st_writer_write(w, path, err, sizeof err), 0);
    rl_st_writer_destroy(&w);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rl_st_file_t *f = rl_st_file_open(path, err, sizeof err);
    CHECK_MSG(f != NULL, "%s", err);
    if (!f) {
        return;
    }
    int bad = 0;
    for (int rep = 0; rep < 10; rep++) {
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "model.layers.%d.mlp.weight", i);
            const rl_st_tensor_t *t = rl_st_file_find(f, name);
            float x = -1;
            if (t) {
                rl_st_to_f32(&x, t);
            }
            bad += !t || x != (float)i;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK_INT(bad, 0);
    CHECK(rl_st_file_find(f, "model.layers.20000.mlp.weight") == NULL);
    // 200k lookups: well under a millisecond each even under ASan; a linear scan would need
    // 2*10^9 string compares and take far longer than this bound.
    CHECK_MSG(sec < 5.0, "open + 200k lookups took %.2f s", sec);
    fprintf(stderr, "  open + %d lookups over %d tensors: %.3f s\n", 10 * N, N, sec);
    rl_st_file_destroy(&f);
}

static void s_rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[1024];
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            s_rm_tree(p);
        } else {
            unlink(p);
        }
    }
    if (d) {
        closedir(d);
    }
    rmdir(dir);
}

// rl_st_nonfinite: every F16 and BF16 pattern alone (-1 exactly when the value is finite), and a
// NaN / +-inf placed after the first block of a long F32 tensor read from an unaligned address.
static void test_nonfinite(void) {
    uint8_t b2[4];
    for (uint32_t h = 0; h < 65536; h++) {
        b2[1] = (uint8_t)h;
        b2[2] = (uint8_t)(h >> 8);
        rl_st_tensor_t t = {.dtype = RL_DTYPE_F16, .numel = 1, .data = b2 + 1, .nbytes = 2};
        int64_t want = isfinite(rl_f16_to_f32((uint16_t)h)) ? -1 : 0;
        if (rl_st_nonfinite(&t) != want) {
            CHECK_MSG(0, "F16 0x%04x: rl_st_nonfinite %lld, want %lld", h,
                      (long long)rl_st_nonfinite(&t), (long long)want);
            break;
        }
        t.dtype = RL_DTYPE_BF16;
        want = isfinite(rl_bf16_to_f32((uint16_t)h)) ? -1 : 0;
        if (rl_st_nonfinite(&t) != want) {
            CHECK_MSG(0, "BF16 0x%04x: rl_st_nonfinite %lld, want %lld", h,
                      (long long)rl_st_nonfinite(&t), (long long)want);
            break;
        }
    }
    enum { N = 10000 };
    uint8_t *buf = malloc(4 * N + 1);
    float special[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; buf && k < 4; k++) {
        for (int i = 0; i < N; i++) { // large, tiny, subnormal, zero and negative: all finite
            float x = i % 4 == 0 ? FLT_MAX : i % 4 == 1 ? -FLT_MIN : i % 4 == 2 ? 1e-45f : -0.0f;
            memcpy(buf + 1 + 4 * (size_t)i, &x, 4);
        }
        if (k < 3) {
            memcpy(buf + 1 + 4 * 9000, &special[k], 4);
            memcpy(buf + 1 + 4 * 9500, &special[k], 4);
        }
        rl_st_tensor_t t = {.dtype = RL_DTYPE_F32, .numel = N, .data = buf + 1, .nbytes = 4 * N};
        CHECK_INT(rl_st_nonfinite(&t), k < 3 ? 9000 : -1);
        char err[256] = "";
        t.name = "w";
        t.ndim = 2;
        t.shape[0] = 100;
        t.shape[1] = 100;
        CHECK_INT(rl_st_check_finite(&t, "f.safetensors", err, sizeof err), k < 3 ? RL_EINVAL : 0);
        if (k < 3) {
            const char *what[] = {"(nan at element 9000 of [100, 100])",
                                  "(inf at element 9000 of [100, 100])",
                                  "(-inf at element 9000 of [100, 100])"};
            CHECK_CONTAINS(err, "f.safetensors: tensor 'w' holds a non-finite value ");
            CHECK_CONTAINS(err, what[k]);
        }
    }
    free(buf);
    rl_st_tensor_t empty = {.dtype = RL_DTYPE_F32, .numel = 0, .data = NULL};
    CHECK_INT(rl_st_nonfinite(&empty), -1);
}

int main(void) {
    rl_test_tmpdir(s_tmpdir, sizeof s_tmpdir, "safetensors");
    RL_TEST_RUN(test_f16_exhaustive);
    RL_TEST_RUN(test_bf16_exhaustive);
    RL_TEST_RUN(test_rounding_vs_reference);
    RL_TEST_RUN(test_good_fixtures);
    RL_TEST_RUN(test_bad_corpus);
    RL_TEST_RUN(test_writer_matches_python);
    RL_TEST_RUN(test_writer_roundtrip);
    RL_TEST_RUN(test_writer_sharded);
    RL_TEST_RUN(test_many_tensors);
    RL_TEST_RUN(test_nonfinite);
    s_rm_tree(s_tmpdir);
    RL_TEST_DONE();
}

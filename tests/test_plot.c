// tests for `rlctl plot` (cli/cmd_plot.c) and its math (cli/rl_svg.c, linked in directly).
// rl_svg: nice steps, axes on ordinary, flat, single-point, huge, tiny and negative ranges,
// tick labels (fixed, exponent, percent), the trailing mean (including a huge value leaving the
// window), XML escaping. rlctl plot, on synthetic runs written to a temp folder: run "runA" logs
// reward = step/100 on steps 0..100 (a null at step 7), eval/accuracy every 25 steps and a cut
// short last line; a run in a folder whose name needs XML escaping logs an alternating reward
// on steps 1..40. Each SVG is checked for well-formedness by a small XML tokenizer here (no
// Python in CI), then for panels, polylines, markers, legend texts, tick labels and the exact
// pixel of known points (read back against the frame rectangle of its panel). Refusals: a
// missing metric, file or folder, an empty file, bad lines (file:line), bad flags (exit 2), an
// unwritable --out (exit 1).
#include "rl_err.h"
#include "rl_svg.h"
#include "rl_test.h"

#include <float.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[64], s_out[1 << 16];

static int s_rlctl(const char *fmt, ...) {
    char args[2048], cmd[2600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/rlctl' plot %s 2>&1", s_dir, RL_BINARY_DIR, args);
    return rl_test_shell(cmd, s_out, sizeof s_out);
}

static void s_write(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    FILE *f = fopen(path, "wb");
    RL_ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

static void s_mkdir(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    RL_ASSERT(mkdir(path, 0755) == 0);
}

static char *s_read_out(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s_dir, rel);
    return rl_test_read_file(path, NULL);
}

// A file the rest of a test function needs: count a failure and leave the function.
#define S_NEED(ptr, what)                                                             \
    do {                                                                              \
        if (!(ptr)) {                                                                 \
            CHECK_MSG(0, "cannot read %s", (what));                                   \
            return;                                                                   \
        }                                                                             \
    } while (0)

static int s_count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) {
        n++;
    }
    return n;
}

// ---- a small XML well-formedness check --------------------------------------------------------

#define S_NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-:_"

// Checks: one root, every start tag closed in order, names and quoted attributes, no raw '<' in
// text or attribute values, '&' only as one of the five entities or a character reference.
// Stricter than XML in one way: a raw '>' in text is refused too (rl_svg_escape writes &gt;).
// Returns NULL when well-formed, else a static message with the byte offset.
static const char *s_xml_check(const char *x) {
    static char msg[256];
    char stack[64][64];
    int depth = 0, roots = 0;
    const char *p = x;
#define S_BAD(...) (snprintf(msg, sizeof msg, __VA_ARGS__), msg)
    while (*p) {
        if (*p == '&') {
            static const char *const ent[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            int ok = p[1] == '#';
            for (int i = 0; i < 5 && !ok; i++) {
                ok = strncmp(p, ent[i], strlen(ent[i])) == 0;
            }
            if (!ok) {
                return S_BAD("bad '&' at offset %ld", (long)(p - x));
            }
            p++;
            continue;
        }
        if (*p != '<') {
            if (*p == '>') {
                return S_BAD("raw '>' in text at offset %ld", (long)(p - x));
            }
            if (depth == 0 && *p != '\n' && *p != ' ') {
                return S_BAD("text outside the root at offset %ld", (long)(p - x));
            }
            p++;
            continue;
        }
        if (strncmp(p, "<?", 2) == 0 || strncmp(p, "<!--", 4) == 0) {
            const char *close = p[1] == '?' ? "?>" : "-->";
            const char *end = strstr(p, close);
            if (!end) {
                return S_BAD("unterminated <? or <!-- at offset %ld", (long)(p - x));
            }
            p = end + strlen(close);
            continue;
        }
        int closing = p[1] == '/';
        const char *n = p + 1 + closing;
        size_t len = strspn(n, S_NAME_CHARS);
        if (len == 0 || len >= 64) {
            return S_BAD("bad tag name at offset %ld", (long)(p - x));
        }
        const char *q = n + len;
        if (closing) {
            if (*q != '>' || depth == 0 || strlen(stack[depth - 1]) != len ||
                strncmp(stack[depth - 1], n, len) != 0) {
                return S_BAD("mismatched </%.*s> at offset %ld", (int)len, n, (long)(p - x));
            }
            depth--;
            p = q + 1;
            continue;
        }
        // attributes: (space name="value")*
        for (;;) {
            size_t sp = strspn(q, " \n\t");
            q += sp;
            if (*q == '>' || (q[0] == '/' && q[1] == '>')) {
                break;
            }
            size_t an = strspn(q, S_NAME_CHARS);
            if (an == 0 || sp == 0 || q[an] != '=' || q[an + 1] != '"') {
                return S_BAD("bad attribute at offset %ld", (long)(q - x));
            }
            const char *v = q + an + 2, *e = strchr(v, '"');
            if (!e) {
                return S_BAD("unterminated attribute at offset %ld", (long)(q - x));
            }
            for (const char *c = v; c < e; c++) {
                if (*c == '<') {
                    return S_BAD("'<' in an attribute at offset %ld", (long)(c - x));
                }
            }
            q = e + 1;
        }
        if (depth == 0 && ++roots > 1) {
            return S_BAD("a second root element at offset %ld", (long)(p - x));
        }
        if (*q == '/') {
            p = q + 2;
            continue;
        }
        if (depth == 64) {
            return S_BAD("nested too deep");
        }
        memcpy(stack[depth], n, len);
        stack[depth++][len] = '\0';
        p = q + 1;
    }
    if (depth != 0 || roots != 1) {
        return S_BAD("%d elements left open, %d roots", depth, roots);
    }
    return NULL;
#undef S_BAD
}

#define CHECK_XML(svg)                                                                \
    do {                                                                              \
        const char *rl_e_ = (svg) ? s_xml_check(svg) : "no file";                     \
        CHECK_MSG(rl_e_ == NULL, "not well-formed XML: %s", rl_e_);                   \
    } while (0)

// The text from the start tag of element id="<id>" to the end of the document (later
// elements included: callers look for what comes first). NULL when missing.
static const char *s_elem(const char *svg, const char *id) {
    char key[64];
    snprintf(key, sizeof key, "id=\"%s\"", id);
    return svg ? strstr(svg, key) : NULL;
}

// A copy of svg[from .. first `until` after it). caller owns result; free with free().
static char *s_slice(const char *from, const char *until) {
    if (!from) {
        return strdup("");
    }
    const char *e = strstr(from, until);
    return strndup(from, e ? (size_t)(e - from) : strlen(from));
}

// The frame rectangle of panel `id`.
static int s_frame(const char *svg, const char *id, double *x, double *y, double *w, double *h) {
    const char *p = s_elem(svg, id);
    p = p ? strstr(p, "<rect class=\"frame\"") : NULL;
    return p && sscanf(p, "<rect class=\"frame\" x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"%lf\"",
                       x, y, w, h) == 4;
}

// The points of the first (k = 0) or a later polyline at or after `from`; returns the count.
static int s_points(const char *from, int k, double *xy, int cap) {
    const char *p = from;
    for (int i = 0; p && i <= k; i++) {
        p = strstr(p, "<polyline");
        if (p && i < k) {
            p++;
        }
    }
    p = p ? strstr(p, "points=\"") : NULL;
    if (!p) {
        return 0;
    }
    p += 8;
    int n = 0;
    while (*p && *p != '"' && n < cap) {
        char *e;
        xy[2 * n] = strtod(p, &e);
        if (*e != ',') {
            break;
        }
        xy[2 * n + 1] = strtod(e + 1, &e);
        n++;
        p = e + (*e == ' ');
    }
    return n;
}

// ---- rl_svg -----------------------------------------------------------------------------------

static void s_axis_case(double lo, double hi, int ticks, int integer, double want_lo,
                        double want_hi, double want_step, int want_n) {
    rl_svg_axis_t a;
    rl_svg_axis(lo, hi, ticks, integer, &a);
    int ok = fabs(a.lo - want_lo) <= 1e-12 * fmax(1.0, fabs(want_lo)) &&
             fabs(a.hi - want_hi) <= 1e-12 * fmax(1.0, fabs(want_hi)) &&
             fabs(a.step - want_step) <= 1e-12 * want_step && a.n == want_n;
    CHECK_MSG(ok, "axis(%g, %g, %d, %d) = [%.17g, %.17g] step %.17g n %d; want [%g, %g] step %g "
              "n %d", lo, hi, ticks, integer, a.lo, a.hi, a.step, a.n, want_lo, want_hi,
              want_step, want_n);
}

static void s_label_case(double lo, double hi, int ticks, int percent, int i, const char *want) {
    rl_svg_axis_t a;
    char buf[64];
    rl_svg_axis(lo, hi, ticks, 0, &a);
    const char *got = rl_svg_tick_label(&a, rl_svg_tick(&a, i), percent, buf, sizeof buf);
    CHECK_MSG(strcmp(got, want) == 0, "label of tick %d of axis(%g, %g, %d)%s: \"%s\", want "
              "\"%s\"", i, lo, hi, ticks, percent ? " in %" : "", got, want);
}

static void s_escape_case(const char *in, const char *want) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    RL_ASSERT(f != NULL);
    CHECK_INT(rl_svg_escape(f, in), 0);
    fclose(f);
    CHECK_STR(buf, want);
    free(buf);
}

static void s_test_svg_math(void) {
    int k;
    CHECK_CLOSE(rl_svg_nice_step(100, 5, 0, &k), 20, 0);
    CHECK_INT(k, 1);
    CHECK_CLOSE(rl_svg_nice_step(1, 10, 0, &k), 0.1, 1e-15);
    CHECK_INT(k, -1);
    CHECK_CLOSE(rl_svg_nice_step(0.3, 3, 0, NULL), 0.1, 1e-15); // 0.3/3 is 0.09999999999999999
    CHECK_CLOSE(rl_svg_nice_step(7, 5, 0, NULL), 2, 0);
    CHECK_CLOSE(rl_svg_nice_step(26, 5, 0, NULL), 10, 0);
    CHECK_CLOSE(rl_svg_nice_step(3, 8, 1, NULL), 1, 0); // whole steps on an integer axis

    // ordinary ranges: widened outwards to whole ticks
    s_axis_case(0, 1, 5, 0, 0, 1, 0.2, 6);
    s_axis_case(0.58, 0.824, 5, 0, 0.55, 0.85, 0.05, 7);
    s_axis_case(0.6, 0.9, 6, 0, 0.6, 0.9, 0.05, 7); // 0.6/0.05 is not exactly 12 in doubles
    s_axis_case(0, 100, 6, 1, 0, 100, 20, 6);
    s_axis_case(1, 3, 8, 1, 1, 3, 1, 3);
    s_axis_case(-3e7, 1.2e8, 5, 0, -5e7, 1.5e8, 5e7, 5);
    s_axis_case(-0.013, -0.002, 5, 0, -0.015, 0, 0.005, 4); // 0.002 would need 5.5 intervals
    s_axis_case(-0.013, -0.002, 6, 0, -0.014, -0.002, 0.002, 7);
    // flat and single points are padded
    s_axis_case(0, 0, 5, 0, -1, 1, 0.5, 5);
    s_axis_case(7, 7, 8, 1, 6, 8, 1, 3);
    s_axis_case(5, 5, 5, 0, 4.4, 5.6, 0.2, 7);
    s_axis_case(-2e9, -2e9, 4, 0, -2.2e9, -1.8e9, 1e8, 5);
    // the extremes stay finite, with their ticks inside
    rl_svg_axis_t a;
    rl_svg_axis(-DBL_MAX, DBL_MAX, 5, 0, &a);
    int ok = isfinite(a.lo) && isfinite(a.hi) && isfinite(a.step) && a.n >= 2 && a.n <= 7;
    for (int i = 0; ok && i < a.n; i++) {
        double t = rl_svg_tick(&a, i), px = rl_svg_map(&a, t, 0, 100);
        ok = isfinite(t) && t >= a.lo && t <= a.hi && px >= 0 && px <= 100;
    }
    CHECK_MSG(ok, "axis(-DBL_MAX, DBL_MAX): [%g, %g] step %g n %d", a.lo, a.hi, a.step, a.n);
    rl_svg_axis(1e-300, 1e-300, 5, 0, &a);
    CHECK(isfinite(a.step) && a.step > 0 && a.lo < 1e-300 && a.hi > 1e-300);
    // ticks: computed by index, zero exactly
    rl_svg_axis(-0.3, 0.3, 6, 0, &a);
    CHECK(rl_svg_tick(&a, 3) == 0.0 && !signbit(rl_svg_tick(&a, 3)));
    CHECK_CLOSE(rl_svg_map(&a, 0.0, 10, 110), 60, 1e-12);
    CHECK_CLOSE(rl_svg_map(&a, -0.3, 10, 110), 10, 1e-12);

    // labels: decimals from the step, exponents outside [1e-4, 1e6), percent
    s_label_case(0, 1, 5, 0, 0, "0.0");
    s_label_case(0, 1, 5, 0, 1, "0.2");
    s_label_case(0.58, 0.824, 5, 0, 0, "0.55");
    s_label_case(0, 500, 5, 0, 5, "500");
    s_label_case(-0.3, 0.3, 6, 0, 3, "0.0");
    s_label_case(-3e7, 1.2e8, 5, 0, 0, "-5.0e+07");
    s_label_case(-3e7, 1.2e8, 5, 0, 1, "0");
    s_label_case(-3e7, 1.2e8, 5, 0, 4, "1.5e+08");
    s_label_case(1e-9, 3e-9, 4, 0, 0, "1.0e-09");
    s_label_case(1e6, 1e6 + 10, 5, 0, 1, "1.000002e+06");
    s_label_case(0.5, 0.9, 5, 1, 0, "50%");
    s_label_case(0.5, 0.9, 5, 1, 4, "90%");
    s_label_case(0.95, 0.99, 4, 1, 0, "95%");
    s_label_case(0.951, 0.968, 4, 1, 1, "95.5%");

    // trailing mean
    double y[5] = {1, 2, 3, 4, 5}, out[5];
    CHECK_INT(rl_svg_smooth(out, y, 5, 3), 0);
    double want[5] = {1, 1.5, 2, 3, 4};
    for (int i = 0; i < 5; i++) {
        CHECK_CLOSE(out[i], want[i], 1e-15);
    }
    CHECK_INT(rl_svg_smooth(out, y, 5, 1), 0);
    for (int i = 0; i < 5; i++) {
        CHECK(out[i] == y[i]);
    }
    CHECK_INT(rl_svg_smooth(out, y, 5, 50), 0); // a window longer than the series
    CHECK_CLOSE(out[4], 3, 1e-15);
    CHECK_CLOSE(out[1], 1.5, 1e-15);
    // a running sum would keep 1e17's rounding residue (and print 0) after it leaves the window
    double big[6] = {1e17, 1, 1, 1, 1, 1}, out6[6];
    CHECK_INT(rl_svg_smooth(out6, big, 6, 2), 0);
    CHECK_CLOSE(out6[1], 5e16, 1e-15);
    CHECK_CLOSE(out6[2], 1, 1e-15);
    CHECK_CLOSE(out6[5], 1, 1e-15);
    double huge[3] = {DBL_MAX, DBL_MAX, DBL_MAX};
    CHECK_INT(rl_svg_smooth(out, huge, 3, 3), 0);
    CHECK_MSG(isfinite(out[2]) && out[2] > 0.99 * DBL_MAX, "mean of DBL_MAX: %g", out[2]);

    // XML text
    s_escape_case("a&b<c>\"d'e", "a&amp;b&lt;c&gt;&quot;d&apos;e");
    s_escape_case("tab\tok\x01\x1f", "tab\tok??");
    s_escape_case("caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac");
    s_escape_case("\xff\xc3", "??");           // not UTF-8; a sequence cut short
    s_escape_case("\xed\xa0\x80", "???");      // a surrogate
    s_escape_case("\xef\xbf\xbe", "???");      // U+FFFE is not an XML character
}

// ---- rlctl plot -------------------------------------------------------------------------------

#define RUNB "b&<x>\"q\""   // a folder name with every character XML escapes but '
#define RUNB_XML "b&amp;&lt;x&gt;&quot;q&quot;"

static void s_fixtures(void) {
    s_mkdir("runA");
    s_mkdir(RUNB);
    char *a = malloc(1 << 16), *b = malloc(1 << 16);
    RL_ASSERT(a && b);
    size_t na = 0, nb = 0;
    // runA: reward = step/100 (null at step 7), loss, eval/accuracy on 0, 25, .. 100
    for (int s = 0; s <= 100; s++) {
        na += (size_t)snprintf(a + na, (1 << 16) - na, "{\"step\":%d,\"time\":%d.5", s,
                               1700000000 + s);
        if (s == 7) {
            na += (size_t)snprintf(a + na, (1 << 16) - na, ",\"reward\":null");
        } else {
            na += (size_t)snprintf(a + na, (1 << 16) - na, ",\"reward\":%.17g", s / 100.0);
        }
        na += (size_t)snprintf(a + na, (1 << 16) - na, ",\"loss\":%g,\"note\":\"x\"",
                               2.0 - s / 100.0);
        if (s % 25 == 0) {
            na += (size_t)snprintf(a + na, (1 << 16) - na, ",\"eval/accuracy\":%.17g",
                                   0.5 + 0.1 * (s / 25));
        }
        na += (size_t)snprintf(a + na, (1 << 16) - na, "}\n");
    }
    snprintf(a + na, (1 << 16) - na, "{\"step\":101,\"time\":17000001"); // torn: no newline
    s_write("runA/metrics.jsonl", a);
    // runB: reward alternates 0.75, 0.25 on steps 1..40
    for (int s = 1; s <= 40; s++) {
        nb += (size_t)snprintf(b + nb, (1 << 16) - nb, "{\"step\":%d,\"reward\":%g}\n", s,
                               s % 2 ? 0.75 : 0.25);
    }
    s_write(RUNB "/metrics.jsonl", b);
    free(a);
    free(b);
}

static void s_test_two_runs(void) {
    CHECK_INT(s_rlctl("runA '" RUNB "' --out two.svg --title 'A & B <vs> \"x\"'"), 0);
    CHECK_CONTAINS(s_out, "wrote two.svg: 2 panels, 2 runs");
    CHECK_CONTAINS(s_out, "warning: runA/metrics.jsonl:102: the last line is cut short");
    char *svg = s_read_out("two.svg");
    S_NEED(svg, "two.svg");
    CHECK_XML(svg);
    CHECK_CONTAINS(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\"");
    CHECK_CONTAINS(svg, ">A &amp; B &lt;vs&gt; &quot;x&quot;</text>");
    CHECK_INT(s_count(svg, "<g class=\"panel\""), 2);
    // panel 1: reward, both runs; panel 2: eval/accuracy, runA only
    char *p1 = s_slice(s_elem(svg, "panel1"), "id=\"panel2\"");
    char *p2 = s_slice(s_elem(svg, "panel2"), "</svg>");
    CHECK_INT(s_count(p1, "<polyline"), 2);
    CHECK_INT(s_count(p2, "<polyline"), 1);
    CHECK_CONTAINS(p1, ">reward</text>");
    CHECK_CONTAINS(p1, ">runA</text>");
    CHECK_CONTAINS(p1, ">" RUNB_XML "</text>");
    CHECK_CONTAINS(p2, ">" RUNB_XML " (no data)</text>");
    CHECK_CONTAINS(p2, ">eval/accuracy (%)</text>"); // the y axis title, percent
    CHECK_CONTAINS(p2, ">50%</text>");
    CHECK_CONTAINS(p2, ">90%</text>");
    CHECK_CONTAINS(p1, ">0.0</text>");
    CHECK_CONTAINS(p1, ">1.0</text>");
    CHECK_CONTAINS(p1, ">100</text>"); // the x axis
    CHECK_CONTAINS(p1, ">step</text>");
    // markers on sparse curves only: eval's 5 points, not runA's 100 or runB's 40 (5 px apart)
    char *e1 = s_slice(s_elem(p2, "panel2-run1"), "</g>\n</g>");
    CHECK_INT(s_count(e1, "<circle"), 5);
    free(e1);
    char *b1 = s_slice(s_elem(p1, "panel1-run2"), "</g>\n</g>");
    CHECK_INT(s_count(b1, "<circle"), 0);
    char *a1 = s_slice(s_elem(p1, "panel1-run1"), "</g>");
    CHECK_INT(s_count(a1, "<circle"), 0);

    // known points, mapped exactly: axis x [0, 100], reward [0, 1], eval [0.5, 0.9]
    double x, y, w, h;
    CHECK(s_frame(svg, "panel1", &x, &y, &w, &h));
    static double xy[2 * 256];
    int n = s_points(a1, 0, xy, 256);
    CHECK_INT(n, 100); // 101 steps, one null
    char want[64];
    snprintf(want, sizeof want, "%.2f,%.2f", x + 0.5 * w, y + 0.5 * h); // step 50, reward 0.5
    CHECK_CONTAINS(a1, want);
    CHECK_CLOSE(xy[0], x, 0);         // step 0, reward 0: bottom left
    CHECK_CLOSE(xy[1], y + h, 0);
    CHECK_CLOSE(xy[2 * 99], x + w, 0); // step 100, reward 1: top right
    CHECK_CLOSE(xy[2 * 99 + 1], y, 0);
    CHECK_MSG(fabs(xy[2 * 7] - (x + 0.08 * w)) < 0.006, "step 8 (after 6: 7 is null) at %g",
              xy[2 * 7]);
    CHECK(s_frame(svg, "panel2", &x, &y, &w, &h));
    n = s_points(s_elem(p2, "panel2-run1"), 0, xy, 256);
    CHECK_INT(n, 5);
    CHECK_MSG(n == 5 && fabs(xy[2] - (x + 0.25 * w)) < 0.006 &&
              fabs(xy[3] - (y + 0.75 * h)) < 0.006, "eval at step 25 (0.6) drawn at %g,%g; "
              "frame %g %g %g %g", xy[2], xy[3], x, y, w, h);
    free(a1);
    free(b1);
    free(p1);
    free(p2);
    free(svg);
    // no temporary file stays behind
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c tmp", s_dir);
    rl_test_shell(cmd, s_out, sizeof s_out);
    CHECK_STR(s_out, "0\n");
}

static void s_test_smooth_and_choice(void) {
    // --smooth 4 on the alternating reward: faint raw line + smoothed line, flat at 0.5
    CHECK_INT(s_rlctl("'" RUNB "' --metric reward --smooth 4 --out sm.svg"), 0);
    CHECK_CONTAINS(s_out, "wrote sm.svg: 1 panel, 1 run");
    char *svg = s_read_out("sm.svg");
    S_NEED(svg, "sm.svg");
    CHECK_XML(svg);
    CHECK_INT(s_count(svg, "<polyline"), 2);
    CHECK_CONTAINS(svg, "stroke-opacity=\"0.3\"");
    CHECK_CONTAINS(svg, ">mean of last 4 points</text>");
    double x, y, w, h;
    CHECK(s_frame(svg, "panel1", &x, &y, &w, &h));
    static double xy[2 * 64];
    int n = s_points(svg, 1, xy, 64); // the second polyline is the smoothed one
    CHECK_INT(n, 40);
    int flat = n == 40;
    for (int i = 3; i < n && flat; i++) {
        flat = fabs(xy[2 * i + 1] - (y + 0.5 * h)) < 1e-9; // axis [0.2, 0.8]: 0.5 mid-height
    }
    CHECK_MSG(flat, "the trailing mean of 0.75, 0.25, ... is not flat at mid-height %g",
              y + 0.5 * h);
    CHECK_MSG(n == 40 && fabs(xy[1] - (y + h * (1 - (0.75 - 0.2) / 0.6))) < 0.006,
              "first smoothed point at %g", xy[1]);
    free(svg);

    // an evaluation panel is not smoothed (a trailing mean over a few evaluations misstates the
    // last one): the training panel gets its faint raw line and its mean, eval/accuracy only its
    // raw points, and the legends say which
    CHECK_INT(s_rlctl("runA --metric reward --metric eval/accuracy --smooth 4 --out sme.svg"), 0);
    svg = s_read_out("sme.svg");
    S_NEED(svg, "sme.svg");
    CHECK_XML(svg);
    char *q1 = s_slice(s_elem(svg, "panel1"), "id=\"panel2\"");
    char *q2 = s_slice(s_elem(svg, "panel2"), "</svg>");
    CHECK_INT(s_count(q1, "<polyline"), 2);
    CHECK_CONTAINS(q1, ">mean of last 4 points</text>");
    CHECK_INT(s_count(q2, "<polyline"), 1);
    CHECK_INT(s_count(q2, "stroke-opacity=\"0.3\""), 0);
    CHECK_CONTAINS(q2, ">evaluations: not smoothed</text>");
    CHECK(q2 == NULL || strstr(q2, "mean of last") == NULL);
    free(q1);
    free(q2);
    free(svg);

    // a metrics.jsonl given directly is named after its folder; the other metric by name
    CHECK_INT(s_rlctl("runA/metrics.jsonl --metric loss --metric loss --out f.svg"), 0);
    CHECK_CONTAINS(s_out, "wrote f.svg: 1 panel, 1 run");
    svg = s_read_out("f.svg");
    CHECK_XML(svg);
    CHECK_CONTAINS(svg, ">runA</text>");
    CHECK_CONTAINS(svg, ">loss</text>");
    free(svg);

    // no reward or eval/accuracy: the first numeric metric
    s_mkdir("runF");
    s_write("runF/metrics.jsonl", "{\"step\":1,\"time\":1,\"tag\":\"a\",\"kl\":null}\n"
                                  "{\"step\":2,\"time\":2,\"kl\":null,\"entropy\":0.5}\n");
    CHECK_INT(s_rlctl("runF --out def.svg"), 0);
    svg = s_read_out("def.svg");
    CHECK_XML(svg);
    CHECK_CONTAINS(svg, ">entropy</text>");
    free(svg);
    // a metric that is null on every line: an empty panel, a warning
    CHECK_INT(s_rlctl("runF --metric kl --out kl.svg"), 0);
    CHECK_CONTAINS(s_out, "warning: the metric 'kl' has no numeric value");
    svg = s_read_out("kl.svg");
    CHECK_XML(svg);
    CHECK_CONTAINS(svg, ">runF (no data)</text>");
    free(svg);

    // a single point, a flat series, huge negative values: all draw, with sane ticks
    s_mkdir("runG");
    s_write("runG/metrics.jsonl", "{\"step\":5,\"reward\":0.3,\"flat\":2,\"big\":-3e13}\n"
                                  "{\"step\":6,\"flat\":2,\"big\":-1.1e14}\n"
                                  "{\"step\":9,\"flat\":2,\"big\":5e12}\n");
    CHECK_INT(s_rlctl("runG --metric reward --metric flat --metric big --width 500 --height 200 "
                      "--out g.svg"), 0);
    svg = s_read_out("g.svg");
    S_NEED(svg, "g.svg");
    CHECK_CONTAINS(svg, "width=\"500\" height=\"612\" viewBox=\"0 0 500 612\""); // 8+3*200+4
    CHECK_XML(svg);
    char *p1 = s_slice(s_elem(svg, "panel1"), "id=\"panel2\"");
    CHECK_INT(s_count(p1, "<polyline"), 0); // one point: a marker only
    CHECK_INT(s_count(p1, "<circle"), 1);
    CHECK_CONTAINS(s_elem(svg, "panel2"), ">2.2</text>"); // flat at 2: padded to [1.8, 2.2]
    CHECK_CONTAINS(s_elem(svg, "panel3"), ">-1.5e+14</text>");
    CHECK_CONTAINS(s_elem(svg, "panel3"), ">5.0e+13</text>");
    CHECK(strstr(svg, "nan") == NULL && strstr(svg, "inf") == NULL);
    free(p1);
    free(svg);

    // two runs with the same folder name are named by their paths
    s_mkdir("x");
    s_mkdir("y");
    s_mkdir("x/run");
    s_mkdir("y/run");
    s_write("x/run/metrics.jsonl", "{\"step\":1,\"reward\":1}\n");
    s_write("y/run/metrics.jsonl", "{\"step\":1,\"reward\":2}\n");
    CHECK_INT(s_rlctl("x/run y/run/ --out d.svg"), 0);
    svg = s_read_out("d.svg");
    CHECK_CONTAINS(svg, ">x/run</text>");
    CHECK_CONTAINS(svg, ">y/run/</text>");
    free(svg);
}

static void s_test_refusals(void) {
    CHECK_INT(s_rlctl("--help"), 0);
    CHECK_CONTAINS(s_out, "usage: rlctl plot RUN...");
    CHECK_CONTAINS(s_out, "exit status:");

    CHECK_INT(s_rlctl("runA --metric nope --metric reward --metric nada --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "no run has the metric 'nope', 'nada'");
    CHECK_CONTAINS(s_out, "reward, loss, eval/accuracy");
    CHECK_INT(s_rlctl("nowhere --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "nowhere: No such file or directory");
    s_mkdir("empty_dir");
    CHECK_INT(s_rlctl("empty_dir --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "empty_dir holds no metrics.jsonl");
    s_mkdir("empty");
    s_write("empty/metrics.jsonl", "\n");
    CHECK_INT(s_rlctl("runA empty --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "empty/metrics.jsonl holds no metrics");
    s_mkdir("bad");
    s_write("bad/metrics.jsonl", "{\"step\":1,\"reward\":1}\nnot json\n{\"step\":3}\n");
    CHECK_INT(s_rlctl("bad --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "bad/metrics.jsonl:2:");
    s_write("bad/metrics.jsonl", "{\"step\":1,\"reward\":1}\n[1, 2]\n");
    CHECK_INT(s_rlctl("bad --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "bad/metrics.jsonl:2: a row must be a JSON object");
    // a bad last line that ends with a newline was not cut short by a crash
    s_write("bad/metrics.jsonl", "{\"step\":1,\"reward\":1}\n{\"step\":2,\"rew\n");
    CHECK_INT(s_rlctl("bad --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "bad/metrics.jsonl:2:");
    s_write("bad/metrics.jsonl", "{\"step\":1,\"reward\":1}\n{\"reward\":2}\n");
    CHECK_INT(s_rlctl("bad --out m.svg"), 2);
    CHECK_CONTAINS(s_out, "bad/metrics.jsonl:2: a line without a numeric \"step\"");
    char *none = s_read_out("m.svg");
    CHECK_MSG(none == NULL, "a refused plot wrote m.svg");
    free(none);

    CHECK_INT(s_rlctl("runA"), 2);
    CHECK_CONTAINS(s_out, "--out FILE.svg is required");
    CHECK_INT(s_rlctl("--out m.svg"), 2);
    CHECK_CONTAINS(s_out, "at least one RUN");
    CHECK_INT(s_rlctl("runA --out m.svg --frobnicate"), 2);
    CHECK_CONTAINS(s_out, "unknown option '--frobnicate'");
    CHECK_INT(s_rlctl("runA --out m.svg --smooth 0"), 2);
    CHECK_CONTAINS(s_out, "--smooth '0': expected an integer");
    CHECK_INT(s_rlctl("runA --out m.svg --width 10"), 2);
    CHECK_INT(s_rlctl("runA --out"), 2);
    CHECK_CONTAINS(s_out, "option '--out' needs a value");
    // a picture that cannot be written is a runtime failure
    CHECK_INT(s_rlctl("runA --out no/such/dir/m.svg"), 1);
    CHECK_CONTAINS(s_out, "cannot create no/such/dir/m.svg.");
}

// The checker itself: what it must refuse and accept.
static void s_test_xml_check(void) {
    static const char *const bad[] = {
        "<a><b></a></b>", "<a>x & y</a>", "<a x=1/>", "<a x=\"<\"/>", "<a>", "<a/><b/>",
        "<a>1 > 0</a>", "text<a/>", "<a x=\"1\"y=\"2\"/>", "<a><!-- open</a>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(s_xml_check(bad[i]) != NULL, "the XML check accepts %s", bad[i]);
    }
    const char *good = "<?xml version=\"1.0\"?>\n<svg a=\"&amp;&#38;\"><g><t>&lt;x&gt;</t>"
                       "<!-- c --><e/></g></svg>\n";
    CHECK_MSG(s_xml_check(good) == NULL, "the XML check refuses good XML: %s", s_xml_check(good));
}

int main(void) {
    RL_TEST_RUN(s_test_svg_math);
    RL_TEST_RUN(s_test_xml_check);

    rl_test_tmpdir(s_dir, sizeof s_dir, "plot");
    s_fixtures();
    RL_TEST_RUN(s_test_two_runs);
    RL_TEST_RUN(s_test_smooth_and_choice);
    RL_TEST_RUN(s_test_refusals);

    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}

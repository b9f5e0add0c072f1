// cmd_plot — `rlctl plot`: draws the curves of one or more runs' metrics.jsonl (docs/training.md
// "Metrics") as one SVG 1.1 file: one panel per metric, stacked, x = step, the runs overlaid
// with a legend. The SVG text is written here by hand (no plotting library); the tick, label,
// mapping and smoothing math is in rl_svg.h. It only reads the runs, so it can plot a run that
// is still writing. Not a metrics writer (trainer/rl_metrics) and not a dashboard.
#define _XOPEN_SOURCE 700 // realpath
#include "rl_cli.h"

#include "rl_err.h"
#include "rl_jsonl.h"
#include "rl_svg.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char s_help[] =
    "usage: rlctl plot RUN... --out FILE.svg [--metric NAME]... [--title TEXT]\n"
    "                  [--width PX] [--height PX] [--smooth N]\n\n"
    "Draws the metrics of one or more runs as one SVG 1.1 file (docs/plot.md): one panel per\n"
    "metric, stacked, x = step, the runs overlaid in distinct colours with a legend naming each\n"
    "run by its folder. RUN is a run folder (RUN/metrics.jsonl) or a metrics.jsonl file.\n\n"
    "options:\n"
    "  --out FILE.svg   where to write the picture (required; replaced atomically)\n"
    "  --metric NAME    a metric to draw; repeat for more panels, drawn in the order given\n"
    "                   (default: reward and eval/accuracy, those the runs have; else the first\n"
    "                   numeric metric)\n"
    "  --title TEXT     a title above the panels\n"
    "  --width PX       picture width (default 800)\n"
    "  --height PX      height of each panel (default 300)\n"
    "  --smooth N       draw the trailing mean of the last N points of each curve (the raw\n"
    "                   values stay, faint; the legend says so); eval/ metrics are drawn\n"
    "                   unsmoothed\n"
    "  -h, --help       this help\n\n"
    "Values that are null, or missing from a line, are skipped: a curve joins the points on\n"
    "each side (a metric logged every 25 steps is a line through its points, with markers).\n"
    "A metric whose name starts with eval/accuracy or ends in accuracy, ratio, fraction or\n"
    "format_rate, and whose values all lie in [0, 1], gets a percent axis. A last line cut\n"
    "short (a crash, or a run still writing it) is skipped with a warning.\n\n"
    "exit status: 0 ok, 1 the picture could not be written, 2 usage, a RUN with no\n"
    "metrics.jsonl, an empty one, a line that is not a JSON object (file:line), or a --metric\n"
    "that no run has\n";

// Tableau's 10 colours: run i gets s_colours[i % 10] in every panel.
static const char *const s_colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                        "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                        "#bcbd22", "#17becf"};
#define S_N_COLOURS ((int)(sizeof(s_colours) / sizeof(s_colours[0])))

#define S_MARKER_GAP 8.0 // a curve whose points lie this many px apart (mean) gets markers
#define S_CHAR_W 7        // estimated width in px of one character at font-size 11-12

// ---- options --------------------------------------------------------------------------------

typedef struct {
    const char **runs;    // RUN arguments (borrowed from argv); n_runs >= 1
    const char **metrics; // --metric values, deduplicated (borrowed from argv)
    int n_runs, n_metrics;
    const char *out, *title;
    int width, height, smooth;
} s_opts_t;

static int s_parse(int argc, char **argv, s_opts_t *o) {
    o->width = 800;
    o->height = 300;
    o->smooth = 1;
    o->runs = calloc((size_t)argc, sizeof(*o->runs));
    o->metrics = calloc((size_t)argc, sizeof(*o->metrics));
    if (!o->runs || !o->metrics) {
        fprintf(stderr, "rlctl plot: out of memory\n");
        return RL_EXIT_FAIL;
    }
    int options = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && strcmp(a, "--") == 0) {
            options = 0; // every later argument is a RUN, even one that starts with '-'
            continue;
        }
        if (!options || a[0] != '-' || a[1] == '\0') {
            o->runs[o->n_runs++] = a;
            continue;
        }
        int takes = strcmp(a, "--metric") == 0 || strcmp(a, "--out") == 0 ||
                    strcmp(a, "--title") == 0 || strcmp(a, "--width") == 0 ||
                    strcmp(a, "--height") == 0 || strcmp(a, "--smooth") == 0;
        if (!takes) {
            fprintf(stderr, "rlctl plot: unknown option '%s' (see --help)\n", a);
            return RL_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "rlctl plot: %s needs a value\n", a);
            return RL_EXIT_USAGE;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--metric") == 0) {
            if (!v[0]) {
                fprintf(stderr, "rlctl plot: --metric needs a name\n");
                return RL_EXIT_USAGE;
            }
            int dup = 0;
            for (int m = 0; m < o->n_metrics; m++) {
                dup |= strcmp(o->metrics[m], v) == 0;
            }
            if (!dup) {
                o->metrics[o->n_metrics++] = v;
            }
        } else if (strcmp(a, "--out") == 0) {
            o->out = v;
        } else if (strcmp(a, "--title") == 0) {
            o->title = v;
        } else if (strcmp(a, "--width") == 0) {
            rc = rl_cli_int("plot", a, v, 320, 20000, &o->width);
        } else if (strcmp(a, "--height") == 0) {
            rc = rl_cli_int("plot", a, v, 120, 10000, &o->height);
        } else {
            rc = rl_cli_int("plot", a, v, 1, 1000000, &o->smooth);
        }
        if (rc) {
            return rc;
        }
    }
    if (o->n_runs == 0) {
        fprintf(stderr, "rlctl plot: at least one RUN (a run folder or a metrics.jsonl) is "
                        "required (see --help)\n");
        return RL_EXIT_USAGE;
    }
    if (!o->out || !o->out[0]) {
        fprintf(stderr, "rlctl plot: --out FILE.svg is required\n");
        return RL_EXIT_USAGE;
    }
    return 0;
}

// ---- reading the runs -----------------------------------------------------------------------

typedef struct {
    double x, y; // step, value
    long ord;    // line order, so that sorting by step keeps the file's order within a step
} s_point_t;

typedef struct {
    char *name;
    s_point_t *pt; // the lines where the metric is a number, in file order
    int n, cap;
} s_series_t;

typedef struct {
    const char *arg; // as given (borrowed from argv)
    char *path;      // the metrics.jsonl read
    char *label;     // legend name: the run's folder name
    s_series_t *ser; // every metric seen with a number or null, in order of first appearance
    int n_ser, cap_ser;
    int hint;      // where the next key is looked for first
    int dup_label; // another run has the same folder name
    long n_rows;
} s_run_t;

static void s_run_free(s_run_t *r) {
    for (int i = 0; i < r->n_ser; i++) {
        free(r->ser[i].name);
        free(r->ser[i].pt);
    }
    free(r->ser);
    free(r->path);
    free(r->label);
    memset(r, 0, sizeof(*r));
}

// The last component of path p, trailing slashes ignored ("runs/a/" -> "a"). caller owns
// result; free with free().
static char *s_basename(const char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') {
        n--;
    }
    size_t b = n;
    while (b > 0 && p[b - 1] != '/') {
        b--;
    }
    return strndup(p + b, n - b);
}

// The name of folder `dir` as a reader would say it: its last component, or for ".", ".." and
// the like the last component of its real path. caller owns result; free with free().
static char *s_folder_name(const char *dir) {
    char *base = s_basename(dir);
    if (base && (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)) {
        char *real = realpath(dir, NULL);
        if (real) {
            free(base);
            base = s_basename(real);
            free(real);
        }
    }
    return base;
}

// Resolves r->arg to r->path and r->label. Returns 0 or an exit code (message printed).
static int s_locate(s_run_t *r) {
    struct stat st;
    if (stat(r->arg, &st) != 0) {
        fprintf(stderr, "rlctl plot: %s: %s (expected a run folder or a metrics.jsonl)\n",
                r->arg, strerror(errno));
        return RL_EXIT_USAGE;
    }
    size_t n = strlen(r->arg);
    if (S_ISDIR(st.st_mode)) {
        r->path = malloc(n + sizeof("/metrics.jsonl"));
        if (!r->path) {
            return RL_EXIT_FAIL;
        }
        snprintf(r->path, n + sizeof("/metrics.jsonl"), "%s/metrics.jsonl", r->arg);
        r->label = s_folder_name(r->arg);
        if (stat(r->path, &st) != 0) {
            fprintf(stderr, "rlctl plot: %s holds no metrics.jsonl (not a run folder, or a run "
                            "that has not logged a step yet)\n", r->arg);
            return RL_EXIT_USAGE;
        }
        // st is now the file's
    } else {
        r->path = strdup(r->arg);
        char *base = s_basename(r->arg);
        if (base && strcmp(base, "metrics.jsonl") == 0) { // name it after its folder
            const char *slash = strrchr(r->arg, '/');
            char *dir = slash ? strndup(r->arg, (size_t)(slash - r->arg) + 1)
                              : strdup(".");
            r->label = dir ? s_folder_name(dir) : NULL;
            free(dir);
            free(base);
        } else {
            r->label = base;
        }
    }
    if (r->label && !r->label[0]) { // "/" has no name
        free(r->label);
        r->label = strdup(r->arg);
    }
    if (!r->path || !r->label) {
        fprintf(stderr, "rlctl plot: out of memory\n");
        return RL_EXIT_FAIL;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "rlctl plot: %s is not a regular file\n", r->path);
        return RL_EXIT_USAGE;
    }
    return 0;
}

// The series of metric `name` in r, added (empty) when new; NULL when out of memory.
static s_series_t *s_series(s_run_t *r, const char *name) {
    // consecutive lines mostly carry the same keys in the same order: try the next one first
    if (r->hint < r->n_ser && strcmp(r->ser[r->hint].name, name) == 0) {
        return &r->ser[r->hint++];
    }
    for (int i = 0; i < r->n_ser; i++) {
        if (strcmp(r->ser[i].name, name) == 0) {
            r->hint = i + 1;
            return &r->ser[i];
        }
    }
    if (r->n_ser == r->cap_ser) {
        int cap = r->cap_ser ? 2 * r->cap_ser : 32;
        s_series_t *s = realloc(r->ser, (size_t)cap * sizeof(*s));
        if (!s) {
            return NULL;
        }
        r->ser = s;
        r->cap_ser = cap;
    }
    s_series_t *s = &r->ser[r->n_ser];
    memset(s, 0, sizeof(*s));
    s->name = strdup(name);
    if (!s->name) {
        return NULL;
    }
    r->hint = ++r->n_ser;
    return s;
}

static int s_push(s_series_t *s, double x, double y) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        s_point_t *p = realloc(s->pt, (size_t)cap * sizeof(*p));
        if (!p) {
            return RL_ENOMEM;
        }
        s->pt = p;
        s->cap = cap;
    }
    s->pt[s->n] = (s_point_t){x, y, s->n};
    s->n++;
    return 0;
}

// 1 when the file's last byte is "\n" (or it is empty), 0 otherwise.
static int s_ends_in_newline(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return 1;
    }
    int nl = 1;
    if (fseek(f, -1, SEEK_END) == 0) {
        nl = fgetc(f) == '\n';
    }
    fclose(f);
    return nl;
}

// Reads r->path into r's series. Returns 0 or an exit code (message printed).
static int s_read(s_run_t *r) {
    char err[1024];
    rl_jsonl_t *j = NULL;
    int rc = rl_jsonl_open(r->path, 0, &j, err, sizeof err);
    if (rc) {
        fprintf(stderr, "rlctl plot: %s\n", err);
        return rc == RL_ENOMEM ? RL_EXIT_FAIL : RL_EXIT_USAGE;
    }
    int ret = 0;
    for (;;) {
        json_t *row = NULL;
        rc = rl_jsonl_next(j, &row);
        if (rc == 0) {
            break;
        }
        if (rc != 1) {
            long line = rl_jsonl_lineno(j);
            snprintf(err, sizeof err, "%s", rl_jsonl_errmsg(j));
            // A crash (or a writer caught mid-line) leaves a last line without its "\n"; only
            // such a line may be skipped. Any other bad line means the file is not what we
            // think it is. The end is checked now, as late as possible, for a live run's sake.
            const char *text;
            size_t len;
            if (rl_jsonl_json_error(j) && rl_jsonl_next_line(j, &text, &len) == 0 &&
                !s_ends_in_newline(r->path)) {
                fprintf(stderr, "rlctl plot: warning: %s:%ld: the last line is cut short (a "
                                "crash, or a run still writing it); skipped\n", r->path, line);
                break;
            }
            fprintf(stderr, "rlctl plot: %s\n", err);
            ret = (rc == RL_ENOMEM || rc == RL_EIO) ? RL_EXIT_FAIL : RL_EXIT_USAGE;
            break;
        }
        json_t *step = json_object_get(row, "step");
        if (!json_is_number(step)) {
            fprintf(stderr, "rlctl plot: %s:%ld: a line without a numeric \"step\"\n", r->path,
                    rl_jsonl_lineno(j));
            json_decref(row);
            ret = RL_EXIT_USAGE;
            break;
        }
        double x = json_number_value(step);
        const char *key;
        json_t *v;
        json_object_foreach(row, key, v) {
            if (strcmp(key, "step") == 0 || strcmp(key, "time") == 0 ||
                (!json_is_number(v) && !json_is_null(v))) {
                continue; // not a metric, or not a number (a string, a nested object)
            }
            s_series_t *s = s_series(r, key);
            // null is NaN or Inf written by rl_metrics: the metric exists, the point does not
            if (!s || (json_is_number(v) && isfinite(json_number_value(v)) &&
                       s_push(s, x, json_number_value(v)) != 0)) {
                ret = RL_EXIT_FAIL;
                fprintf(stderr, "rlctl plot: out of memory\n");
                break;
            }
        }
        json_decref(row);
        if (ret) {
            break;
        }
        r->n_rows++;
    }
    rl_jsonl_destroy(&j);
    if (!ret && r->n_rows == 0) {
        fprintf(stderr, "rlctl plot: %s holds no metrics (no step logged yet)\n", r->path);
        ret = RL_EXIT_USAGE;
    }
    return ret;
}

static const s_series_t *s_find(const s_run_t *r, const char *name) {
    for (int i = 0; i < r->n_ser; i++) {
        if (strcmp(r->ser[i].name, name) == 0) {
            return &r->ser[i];
        }
    }
    return NULL;
}

// How many points metric `name` has over all runs; *present (may be NULL) = some run has
// the name, even if only with nulls.
static long s_points(const s_run_t *runs, int n_runs, const char *name, int *present) {
    long n = 0;
    int any = 0;
    for (int i = 0; i < n_runs; i++) {
        const s_series_t *s = s_find(&runs[i], name);
        if (s) {
            any = 1;
            n += s->n;
        }
    }
    if (present) {
        *present = any;
    }
    return n;
}

// Every metric name of the runs, comma-separated, in order of first appearance.
static void s_list_metrics(FILE *f, const s_run_t *runs, int n_runs) {
    int first = 1;
    for (int i = 0; i < n_runs; i++) {
        for (int k = 0; k < runs[i].n_ser; k++) {
            int seen = 0;
            for (int p = 0; p < i && !seen; p++) {
                seen = s_find(&runs[p], runs[i].ser[k].name) != NULL;
            }
            if (!seen) {
                fprintf(f, "%s%s", first ? "" : ", ", runs[i].ser[k].name);
                first = 0;
            }
        }
    }
    if (first) {
        fputs("none besides step and time", f);
    }
}

// The metrics to draw into o->metrics: the ones asked for (each must exist in some run), or the
// defaults. Returns 0 or RL_EXIT_USAGE (message printed).
static int s_choose(s_opts_t *o, const s_run_t *runs) {
    if (o->n_metrics > 0) {
        int missing = 0;
        for (int m = 0; m < o->n_metrics; m++) {
            int present;
            s_points(runs, o->n_runs, o->metrics[m], &present);
            if (!present) {
                fprintf(stderr, "%s'%s'", missing ? ", " : "rlctl plot: no run has the metric ",
                        o->metrics[m]);
                missing++;
            }
        }
        if (missing) {
            fputs(" (the runs' metrics: ", stderr);
            s_list_metrics(stderr, runs, o->n_runs);
            fputs(")\n", stderr);
            return RL_EXIT_USAGE;
        }
        for (int m = 0; m < o->n_metrics; m++) {
            if (s_points(runs, o->n_runs, o->metrics[m], NULL) == 0) {
                fprintf(stderr, "rlctl plot: warning: the metric '%s' has no numeric value "
                                "(only null) in any run; its panel is empty\n", o->metrics[m]);
            }
        }
        return 0;
    }
    static const char *const defaults[] = {"reward", "eval/accuracy"};
    for (int d = 0; d < 2; d++) {
        if (s_points(runs, o->n_runs, defaults[d], NULL) > 0) {
            o->metrics[o->n_metrics++] = defaults[d];
        }
    }
    for (int i = 0; i < o->n_runs && o->n_metrics == 0; i++) {
        for (int k = 0; k < runs[i].n_ser && o->n_metrics == 0; k++) {
            if (runs[i].ser[k].n > 0) {
                o->metrics[o->n_metrics++] = runs[i].ser[k].name;
            }
        }
    }
    if (o->n_metrics == 0) {
        fputs("rlctl plot: no metric has a numeric value in these runs (their metrics: ",
              stderr);
        s_list_metrics(stderr, runs, o->n_runs);
        fputs(")\n", stderr);
        return RL_EXIT_USAGE;
    }
    return 0;
}

// Two runs with the same folder name ("a/run" and "b/run") are named by their arguments.
static void s_unique_labels(s_run_t *runs, int n) {
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < n; k++) {
            runs[i].dup_label |= k != i && strcmp(runs[i].label, runs[k].label) == 0 &&
                                 strcmp(runs[i].arg, runs[k].arg) != 0;
        }
    }
    for (int i = 0; i < n; i++) {
        char *a = runs[i].dup_label ? strdup(runs[i].arg) : NULL;
        if (a) {
            free(runs[i].label);
            runs[i].label = a;
        }
    }
}

// ---- the picture ----------------------------------------------------------------------------

typedef struct {
    s_point_t *pt; // the run's points of the panel's metric, sorted by step
    double *y;     // their values (pt[k].y), as an array
    double *sm;    // with --smooth: their trailing means; else NULL
    int n;
    int present; // the run has the metric (possibly only nulls)
} s_curve_t;

typedef struct {
    const char *metric;
    int percent;
    int smooth; // the trailing mean's window of this panel (1: none)
    rl_svg_axis_t y;
    s_curve_t *c; // one per run
} s_panel_t;

static int s_cmp_point(const void *a, const void *b) {
    const s_point_t *p = a, *q = b;
    if (p->x != q->x) {
        return p->x < q->x ? -1 : 1;
    }
    return (p->ord > q->ord) - (p->ord < q->ord);
}

static int s_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// Shares: percent axis by name, when every value is in [0, 1].
static int s_percent_name(const char *m) {
    return strncmp(m, "eval/accuracy", 13) == 0 || s_ends_with(m, "accuracy") ||
           s_ends_with(m, "ratio") || s_ends_with(m, "fraction") ||
           s_ends_with(m, "format_rate");
}

// Fills p's curves from the runs. Returns 0 or RL_ENOMEM.
// --smooth's window for a metric: evaluations (eval/...) are drawn as they are, since a trailing
// mean over a handful of evaluations misstates the last one.
static int s_smooth_of(const char *metric, int smooth) {
    return strncmp(metric, "eval/", 5) == 0 ? 1 : smooth;
}

static int s_panel_data(s_panel_t *p, const s_run_t *runs, int n_runs, int smooth) {
    p->c = calloc((size_t)n_runs, sizeof(*p->c));
    if (!p->c) {
        return RL_ENOMEM;
    }
    for (int i = 0; i < n_runs; i++) {
        const s_series_t *s = s_find(&runs[i], p->metric);
        s_curve_t *c = &p->c[i];
        c->present = s != NULL;
        if (!s || s->n == 0) {
            continue;
        }
        c->pt = malloc((size_t)s->n * sizeof(*c->pt));
        if (!c->pt) {
            return RL_ENOMEM;
        }
        memcpy(c->pt, s->pt, (size_t)s->n * sizeof(*c->pt));
        c->n = s->n;
        qsort(c->pt, (size_t)c->n, sizeof(*c->pt), s_cmp_point);
        c->y = malloc((size_t)c->n * sizeof(*c->y));
        if (!c->y) {
            return RL_ENOMEM;
        }
        for (int k = 0; k < c->n; k++) {
            c->y[k] = c->pt[k].y;
        }
        if (smooth > 1) {
            c->sm = malloc((size_t)c->n * sizeof(*c->sm));
            if (!c->sm || rl_svg_smooth(c->sm, c->y, c->n, smooth) != 0) {
                return RL_ENOMEM;
            }
        }
    }
    return 0;
}

static void s_panel_free(s_panel_t *p, int n_runs) {
    for (int i = 0; p->c && i < n_runs; i++) {
        free(p->c[i].pt);
        free(p->c[i].y);
        free(p->c[i].sm);
    }
    free(p->c);
}

// Where everything goes, in px. Panels are stacked; the legend is a column on the right.
typedef struct {
    int W, H;        // picture
    int top0, ph;    // first panel's top, panel height
    int x0, x1;      // plot area, left and right (shared by every panel)
    int legend_x;    // left of the legend column
    int legend_chars; // the most characters a legend line may show
    int yticks;      // intervals asked of a y axis
} s_layout_t;

// Plot area of panel i, top and bottom.
static int s_py0(const s_layout_t *L, int i) {
    return L->top0 + i * L->ph + 12;
}
static int s_py1(const s_layout_t *L, int i) {
    return L->top0 + (i + 1) * L->ph - 46;
}

static void s_svg_num(FILE *f, double v) {
    fprintf(f, "%.2f", v);
}

// A legend or label text, shortened to `max` characters (counting UTF-8 sequences as one) with
// "..." when longer.
static void s_text_clipped(FILE *f, const char *s, int max) {
    int chars = 0;
    const char *p = s;
    for (; *p; p++) {
        chars += ((unsigned char)*p & 0xc0) != 0x80;
    }
    if (chars <= max || max < 4) {
        rl_svg_escape(f, s);
        return;
    }
    // keep max-3 characters: cut before the (max-2)th character's first byte
    int seen = 0;
    for (p = s; *p; p++) {
        if (((unsigned char)*p & 0xc0) != 0x80 && ++seen > max - 3) {
            break;
        }
    }
    char *head = strndup(s, (size_t)(p - s));
    if (head) {
        rl_svg_escape(f, head);
        free(head);
    }
    fputs("...", f);
}

static void s_polyline(FILE *f, const s_curve_t *c, const double *ys, const rl_svg_axis_t *xa,
                       const s_panel_t *p, const s_layout_t *L, int panel, const char *colour,
                       int faint) {
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"",
            colour, faint ? "1" : "1.5",
            faint ? " stroke-opacity=\"0.3\"" : " stroke-linejoin=\"round\"");
    for (int k = 0; k < c->n; k++) {
        double px = rl_svg_map(xa, c->pt[k].x, L->x0, L->x1);
        double py = rl_svg_map(&p->y, ys[k], s_py1(L, panel), s_py0(L, panel));
        if (isfinite(px) && isfinite(py)) {
            fputs(k ? " " : "", f);
            s_svg_num(f, px);
            fputc(',', f);
            s_svg_num(f, py);
        }
    }
    fputs("\"/>\n", f);
}

static void s_draw_panel(FILE *f, const s_panel_t *p, int panel, const rl_svg_axis_t *xa,
                         const s_run_t *runs, int n_runs, int asked, const s_layout_t *L) {
    const int smooth = p->smooth;
    int py0 = s_py0(L, panel), py1 = s_py1(L, panel);
    char lab[64];
    fprintf(f, "<g class=\"panel\" id=\"panel%d\">\n", panel + 1);
    // grid and tick labels
    fputs("<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n", f);
    for (int i = 0; i < xa->n; i++) {
        double x = rl_svg_map(xa, rl_svg_tick(xa, i), L->x0, L->x1);
        fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>\n", x, py0, x, py1);
    }
    for (int i = 0; i < p->y.n; i++) {
        double y = rl_svg_map(&p->y, rl_svg_tick(&p->y, i), py1, py0);
        fprintf(f, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\"/>\n", L->x0, y, L->x1, y);
    }
    fputs("</g>\n", f);
    fprintf(f, "<rect class=\"frame\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
               "fill=\"none\" stroke=\"#888888\"/>\n", L->x0, py0, L->x1 - L->x0, py1 - py0);
    fputs("<g class=\"xticks\" font-size=\"11\" text-anchor=\"middle\" fill=\"#333333\">\n", f);
    for (int i = 0; i < xa->n; i++) {
        double v = rl_svg_tick(xa, i);
        fprintf(f, "<text x=\"%.2f\" y=\"%d\">%s</text>\n", rl_svg_map(xa, v, L->x0, L->x1),
                py1 + 15, rl_svg_tick_label(xa, v, 0, lab, sizeof lab));
    }
    fputs("</g>\n<g class=\"yticks\" font-size=\"11\" text-anchor=\"end\" fill=\"#333333\">\n",
          f);
    for (int i = 0; i < p->y.n; i++) {
        double v = rl_svg_tick(&p->y, i);
        fprintf(f, "<text x=\"%d\" y=\"%.2f\">%s</text>\n", L->x0 - 6,
                rl_svg_map(&p->y, v, py1, py0) + 4.0,
                rl_svg_tick_label(&p->y, v, p->percent, lab, sizeof lab));
    }
    fputs("</g>\n", f);
    // axis titles
    fprintf(f, "<text class=\"xtitle\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n",
            (L->x0 + L->x1) / 2, py1 + 34);
    int ty = (py0 + py1) / 2;
    fprintf(f, "<text class=\"ytitle\" x=\"14\" y=\"%d\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 14 %d)\">", ty, ty);
    rl_svg_escape(f, p->metric);
    fprintf(f, "%s</text>\n", p->percent ? " (%)" : "");
    // curves: faint raw values under the smoothed line, markers on the line drawn solid
    for (int i = 0; i < n_runs; i++) {
        const s_curve_t *c = &p->c[i];
        const char *colour = s_colours[i % S_N_COLOURS];
        if (c->n == 0) {
            continue;
        }
        const double *solid = c->sm ? c->sm : c->y;
        fprintf(f, "<g class=\"run\" id=\"panel%d-run%d\">\n", panel + 1, i + 1);
        if (c->n >= 2) {
            if (c->sm) {
                s_polyline(f, c, c->y, xa, p, L, panel, colour, 1);
            }
            s_polyline(f, c, solid, xa, p, L, panel, colour, 0);
        }
        // sparse curves (an eval every 25 steps, a single point) show where their points are
        double x_first = rl_svg_map(xa, c->pt[0].x, L->x0, L->x1);
        double x_last = rl_svg_map(xa, c->pt[c->n - 1].x, L->x0, L->x1);
        if (c->n == 1 || (x_last - x_first) / (c->n - 1) >= S_MARKER_GAP) {
            fprintf(f, "<g class=\"markers\" fill=\"%s\">\n", colour);
            for (int k = 0; k < c->n; k++) {
                double px = rl_svg_map(xa, c->pt[k].x, L->x0, L->x1);
                double py = rl_svg_map(&p->y, solid[k], py1, py0);
                if (isfinite(px) && isfinite(py)) {
                    fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\"/>\n", px, py);
                }
            }
            fputs("</g>\n", f);
        }
        fputs("</g>\n", f);
    }
    // legend: the metric, then one line per run, then what smoothing did
    int lx = L->legend_x, ly = py0 + 12;
    fprintf(f, "<g class=\"legend\" font-size=\"12\">\n<text x=\"%d\" y=\"%d\" "
               "font-weight=\"bold\">", lx, ly);
    s_text_clipped(f, p->metric, L->legend_chars + 2); // no swatch, but bold
    fputs("</text>\n", f);
    for (int i = 0; i < n_runs; i++) {
        int y = ly + 18 * (i + 1);
        const char *colour = s_colours[i % S_N_COLOURS];
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"2.5\"/>\n", lx, y - 4, lx + 18, y - 4, colour);
        fprintf(f, "<text x=\"%d\" y=\"%d\"%s>", lx + 24, y,
                p->c[i].n ? "" : " fill=\"#888888\"");
        s_text_clipped(f, runs[i].label, L->legend_chars - (p->c[i].n ? 0 : 10));
        fprintf(f, "%s</text>\n", p->c[i].n ? "" : " (no data)");
    }
    if (smooth > 1) {
        int y = ly + 18 * (n_runs + 1);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555555\">mean of last %d "
                   "points</text>\n<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555555\">"
                   "faint: raw values</text>\n", lx, y, smooth, lx, y + 15);
    } else if (asked > 1) {
        int y = ly + 18 * (n_runs + 1);
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555555\">evaluations: "
                "not smoothed</text>\n",
                lx, y);
    }
    fputs("</g>\n</g>\n", f);
}

static void s_svg(FILE *f, const s_opts_t *o, const s_run_t *runs, const s_panel_t *panels,
                  const rl_svg_axis_t *xa, const s_layout_t *L) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<title>", L->W, L->H, L->W, L->H);
    if (o->title) {
        rl_svg_escape(f, o->title);
    } else {
        fputs("rlctl plot:", f);
        for (int m = 0; m < o->n_metrics; m++) {
            fputs(m ? ", " : " ", f);
            rl_svg_escape(f, o->metrics[m]);
        }
    }
    fprintf(f, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            L->W, L->H);
    if (o->title) {
        fprintf(f, "<text class=\"title\" x=\"%d\" y=\"26\" text-anchor=\"middle\" "
                   "font-size=\"16\" font-weight=\"bold\">", L->W / 2);
        rl_svg_escape(f, o->title);
        fputs("</text>\n", f);
    }
    for (int m = 0; m < o->n_metrics; m++) {
        s_draw_panel(f, &panels[m], m, xa, runs, o->n_runs, o->smooth, L);
    }
    fputs("</svg>\n", f);
}

// Writes the picture to o->out through a temporary file in the same folder, renamed over it
// once complete and synced, so a reader never sees half a picture. Returns 0 or RL_EXIT_FAIL.
static int s_write(const s_opts_t *o, const s_run_t *runs, const s_panel_t *panels,
                   const rl_svg_axis_t *xa, const s_layout_t *L) {
    size_t n = strlen(o->out) + 32;
    char *tmp = malloc(n);
    if (!tmp) {
        return RL_EXIT_FAIL;
    }
    snprintf(tmp, n, "%s.%ld.tmp", o->out, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "rlctl plot: cannot create %s: %s\n", tmp, strerror(errno));
        free(tmp);
        return RL_EXIT_FAIL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        fprintf(stderr, "rlctl plot: %s: %s\n", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return RL_EXIT_FAIL;
    }
    s_svg(f, o, runs, panels, xa, L);
    int bad = fflush(f) != 0 || ferror(f) || fsync(fd) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        fprintf(stderr, "rlctl plot: writing %s: %s\n", tmp, strerror(e));
    } else if (rename(tmp, o->out) != 0) {
        fprintf(stderr, "rlctl plot: cannot rename %s to %s: %s\n", tmp, o->out,
                strerror(errno));
        bad = 1;
    }
    if (bad) {
        unlink(tmp);
    }
    free(tmp);
    return bad ? RL_EXIT_FAIL : 0;
}

// Axes and layout from the data. Returns 0 or RL_ENOMEM.
static int s_plan(const s_opts_t *o, const s_run_t *runs, s_panel_t *panels, rl_svg_axis_t *xa,
                  s_layout_t *L) {
    L->W = o->width;
    L->ph = o->height;
    L->top0 = o->title ? 40 : 8;
    L->H = L->top0 + o->n_metrics * L->ph + 4;
    L->yticks = (s_py1(L, 0) - s_py0(L, 0)) / 45;
    L->yticks = L->yticks < 2 ? 2 : L->yticks;
    double xlo = INFINITY, xhi = -INFINITY;
    int y_chars = 1, legend_chars = 0;
    for (int m = 0; m < o->n_metrics; m++) {
        s_panel_t *p = &panels[m];
        p->metric = o->metrics[m];
        p->smooth = s_smooth_of(p->metric, o->smooth);
        if (s_panel_data(p, runs, o->n_runs, p->smooth) != 0) {
            return RL_ENOMEM;
        }
        double ylo = INFINITY, yhi = -INFINITY;
        for (int i = 0; i < o->n_runs; i++) {
            const s_curve_t *c = &p->c[i];
            for (int k = 0; k < c->n; k++) {
                xlo = fmin(xlo, c->pt[k].x);
                xhi = fmax(xhi, c->pt[k].x);
                ylo = fmin(ylo, c->pt[k].y); // the means lie inside the values' range
                yhi = fmax(yhi, c->pt[k].y);
            }
        }
        if (ylo > yhi) { // no point in any run: an empty panel on a unit range
            ylo = 0.0;
            yhi = 1.0;
        }
        p->percent = s_percent_name(p->metric) && ylo >= 0.0 && yhi <= 1.0;
        rl_svg_axis(ylo, yhi, L->yticks, 0, &p->y);
        char lab[64];
        for (int i = 0; i < p->y.n; i++) {
            int n = (int)strlen(rl_svg_tick_label(&p->y, rl_svg_tick(&p->y, i), p->percent,
                                                  lab, sizeof lab));
            y_chars = n > y_chars ? n : y_chars;
        }
    }
    // the legend's widest line, in characters of a run's line (which starts 24 px further in)
    for (int i = 0; i < o->n_runs; i++) {
        int n = (int)strlen(runs[i].label) + 10; // room for " (no data)"
        legend_chars = n > legend_chars ? n : legend_chars;
    }
    for (int m = 0; m < o->n_metrics; m++) {
        int n = (int)strlen(o->metrics[m]) - 2;
        legend_chars = n > legend_chars ? n : legend_chars;
    }
    if (o->smooth > 1) {
        char note[64];
        int n = snprintf(note, sizeof note, "mean of last %d points", o->smooth) - 3;
        legend_chars = n > legend_chars ? n : legend_chars;
        n = (int)strlen("evaluations: not smoothed") - 3;
        legend_chars = n > legend_chars ? n : legend_chars;
    }
    if (xlo > xhi) {
        xlo = 0.0;
        xhi = 1.0;
    }
    int left = 30 + S_CHAR_W * y_chars;
    left = left > L->W / 4 ? L->W / 4 : left;
    // legend column: 14 px gap, an 18 px swatch and 6 px, the text, 6 px to the edge
    int lw = 44 + S_CHAR_W * legend_chars;
    lw = lw < 130 ? 130 : lw > L->W / 3 ? L->W / 3 : lw;
    L->x0 = left;
    L->x1 = L->W - lw;
    L->legend_x = L->x1 + 14;
    L->legend_chars = (lw - 44) / S_CHAR_W;
    int xticks = (L->x1 - L->x0) / 90;
    rl_svg_axis(xlo, xhi, xticks < 2 ? 2 : xticks, 1, xa);
    return 0;
}

int rl_cmd_plot(int argc, char **argv) {
    if (rl_cli_wants_help(argc, argv)) {
        fputs(s_help, stdout);
        return RL_EXIT_OK;
    }
    s_opts_t o;
    memset(&o, 0, sizeof(o));
    s_run_t *runs = NULL;
    s_panel_t *panels = NULL;
    int rc = s_parse(argc, argv, &o);
    if (rc) {
        goto done;
    }
    runs = calloc((size_t)o.n_runs, sizeof(*runs));
    if (!runs) {
        rc = RL_EXIT_FAIL;
        goto done;
    }
    for (int i = 0; i < o.n_runs && !rc; i++) {
        runs[i].arg = o.runs[i];
        rc = s_locate(&runs[i]);
        if (!rc) {
            rc = s_read(&runs[i]);
        }
    }
    if (rc) {
        goto done;
    }
    s_unique_labels(runs, o.n_runs);
    rc = s_choose(&o, runs);
    if (rc) {
        goto done;
    }
    panels = calloc((size_t)o.n_metrics, sizeof(*panels));
    rl_svg_axis_t xa;
    s_layout_t L;
    if (!panels || s_plan(&o, runs, panels, &xa, &L) != 0) {
        fprintf(stderr, "rlctl plot: out of memory\n");
        rc = RL_EXIT_FAIL;
        goto done;
    }
    rc = s_write(&o, runs, panels, &xa, &L);
    if (!rc) {
        printf("wrote %s: %d panel%s, %d run%s\n", o.out, o.n_metrics,
               o.n_metrics == 1 ? "" : "s", o.n_runs, o.n_runs == 1 ? "" : "s");
    }

done:
    for (int m = 0; panels && m < o.n_metrics; m++) {
        s_panel_free(&panels[m], o.n_runs);
    }
    free(panels);
    for (int i = 0; runs && i < o.n_runs; i++) {
        s_run_free(&runs[i]);
    }
    free(runs);
    free(o.runs);
    free(o.metrics);
    return rc;
}

// test_proto_doc — docs/protocol.md's field tables are what the protocol's definition
// (transport/rl_proto_def.h) says: every table rl_proto_doc makes ("verbs", then one per message)
// sits in the doc exactly once, between
//
//   <!-- rl_proto_doc NAME -->
//   ...the table, as `rl_proto_doc(out, NAME)` writes it...
//   <!-- /rl_proto_doc -->
//
// and a table that differs fails with a diff (- the doc's line, + the definition's). With
// `--write` the suite rewrites the tables between the markers in place (the prose around them is
// the doc's own) and then checks the result.
#include "rl_err.h"
#include "rl_proto.h"
#include "rl_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_OPEN "<!-- rl_proto_doc "
#define S_CLOSE "<!-- /rl_proto_doc -->"
#define S_MAX_LINES 8192

typedef struct {
    char *text; // the file, '\n' replaced by NUL
    char *line[S_MAX_LINES];
    int n;
} s_doc_t;

static int s_split(char *text, size_t len, char **line, int cap) {
    int n = 0;
    for (char *p = text; p < text + len && n < cap;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        line[n++] = p;
        if (!nl) {
            break;
        }
        *nl = 0;
        p = nl + 1;
    }
    return n;
}

// the table `name` as the definition makes it. caller owns result; free with free().
static char *s_table(const char *name, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) {
        return NULL;
    }
    int rc = rl_proto_doc(f, name);
    fclose(f);
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

// A line diff of a (the doc's lines na, from doc line a0) against b (the definition's): the
// longest common subsequence, then - and + lines.
static void s_diff(char **a, int na, int a0, char **b, int nb) {
    int *L = calloc((size_t)(na + 1) * (size_t)(nb + 1), sizeof(int));
    if (!L) {
        return;
    }
#define S_L(i, j) L[(size_t)(i) * (size_t)(nb + 1) + (size_t)(j)]
    for (int i = na - 1; i >= 0; i--) {
        for (int j = nb - 1; j >= 0; j--) {
            S_L(i, j) = strcmp(a[i], b[j]) == 0          ? S_L(i + 1, j + 1) + 1
                        : S_L(i + 1, j) >= S_L(i, j + 1) ? S_L(i + 1, j)
                                                         : S_L(i, j + 1);
        }
    }
    int i = 0, j = 0;
    while (i < na || j < nb) {
        if (i < na && j < nb && strcmp(a[i], b[j]) == 0) {
            i++;
            j++;
        } else if (i < na && (j == nb || S_L(i + 1, j) >= S_L(i, j + 1))) {
            fprintf(stderr, "  - %s   (doc line %d)\n", a[i], a0 + i + 1);
            i++;
        } else {
            fprintf(stderr, "  + %s\n", b[j++]);
        }
    }
#undef S_L
    free(L);
}

// Checks the doc's tables; with out != NULL also writes the doc with every table replaced by the
// definition's. Returns the number of tables that differ.
static int s_check(s_doc_t *d, const char *path, FILE *out) {
    int differ = 0;
    int seen[256] = {0};
    int n_names = 0;
    while (rl_proto_doc_name(n_names)) {
        n_names++;
    }
    CHECK(n_names > 1 && n_names < 256);
    for (int i = 0; i < d->n; i++) {
        const char *l = d->line[i];
        if (out) {
            fprintf(out, "%s%s", l, i + 1 < d->n ? "\n" : "");
        }
        if (strncmp(l, S_OPEN, strlen(S_OPEN)) != 0) {
            CHECK_MSG(strncmp(l, S_CLOSE, strlen(S_CLOSE)) != 0, "%s:%d: a close with no open",
                      path, i + 1);
            continue;
        }
        char name[64] = "";
        const char *nm = l + strlen(S_OPEN);
        size_t k = strcspn(nm, " ");
        CHECK_MSG(k > 0 && k < sizeof name && strcmp(nm + k, " -->") == 0,
                  "%s:%d: a marker is `" S_OPEN "NAME -->`", path, i + 1);
        memcpy(name, nm, k < sizeof name ? k : 0);
        int which = -1;
        for (int w = 0; w < n_names && name[0]; w++) {
            if (strcmp(rl_proto_doc_name(w), name) == 0) {
                which = w;
            }
        }
        CHECK_MSG(which >= 0, "%s:%d: no table '%s' in the definition", path, i + 1, name);
        if (which >= 0) {
            seen[which]++;
        }
        int end = i + 1;
        while (end < d->n && strcmp(d->line[end], S_CLOSE) != 0 &&
               strncmp(d->line[end], S_OPEN, strlen(S_OPEN)) != 0) {
            end++;
        }
        CHECK_MSG(end < d->n && strcmp(d->line[end], S_CLOSE) == 0,
                  "%s:%d: table '%s' is not closed by `" S_CLOSE "`", path, i + 1, name);
        if (end >= d->n || which < 0) {
            continue;
        }
        size_t tl = 0;
        char *t = s_table(name, &tl);
        CHECK_MSG(t != NULL, "rl_proto_doc(%s) failed", name);
        if (!t) {
            continue;
        }
        char *want[512];
        int nw = s_split(t, tl, want, 512);
        if (nw > 0 && want[nw - 1][0] == 0) {
            nw--; // the text ends in '\n'
        }
        int same = nw == end - i - 1;
        for (int j = 0; same && j < nw; j++) {
            same = strcmp(want[j], d->line[i + 1 + j]) == 0;
        }
        if (!same) {
            differ++;
            fprintf(stderr, "%s:%d: table '%s' is not what transport/rl_proto_def.h says:\n", path,
                    i + 2, name);
            s_diff(&d->line[i + 1], end - i - 1, i + 1, want, nw);
        }
        if (out) {
            for (int j = 0; j < nw; j++) {
                fprintf(out, "%s\n", want[j]);
            }
            fprintf(out, "%s%s", d->line[end], end + 1 < d->n ? "\n" : "");
        }
        free(t);
        i = end;
    }
    for (int w = 0; w < n_names && w < 256; w++) {
        CHECK_MSG(seen[w] == 1,
                  "%s: table '%s' appears %d times (once expected): add `" S_OPEN
                  "%s -->` and `" S_CLOSE "` where it belongs",
                  path, rl_proto_doc_name(w), seen[w], rl_proto_doc_name(w));
    }
    return differ;
}

static int s_load(s_doc_t *d, const char *path) {
    size_t len = 0;
    memset(d, 0, sizeof *d);
    d->text = rl_test_read_file(path, &len);
    CHECK_MSG(d->text != NULL, "%s: unreadable", path);
    if (!d->text) {
        return -1;
    }
    d->n = s_split(d->text, len, d->line, S_MAX_LINES);
    CHECK_MSG(d->n < S_MAX_LINES, "%s: more than %d lines", path, S_MAX_LINES);
    return 0;
}

static const char *s_path;
static int s_write;

static void test_doc_tables(void) {
    s_doc_t d;
    if (s_load(&d, s_path) != 0) {
        return;
    }
    if (s_write) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s.tmp", s_path);
        FILE *out = fopen(tmp, "w");
        CHECK_MSG(out != NULL, "%s: cannot write", tmp);
        if (out) {
            int differ = s_check(&d, s_path, out);
            CHECK_MSG(fclose(out) == 0 && rename(tmp, s_path) == 0, "%s: cannot write", s_path);
            fprintf(stderr, "%s: %d tables rewritten\n", s_path, differ);
        }
        free(d.text);
        if (s_load(&d, s_path) != 0) {
            return;
        }
    }
    int differ = s_check(&d, s_path, NULL);
    CHECK_MSG(differ == 0,
              "%s: %d tables differ from transport/rl_proto_def.h (rewrite them: %s --write)", s_path,
              differ, "test_roles_proto_doc");
    free(d.text);
}

// The summary names every verb, and a message's table has a row per field: rl_proto_doc itself.
static void test_rl_proto_doc(void) {
    size_t len = 0;
    char *t = s_table("verbs", &len);
    CHECK(t != NULL);
    for (int v = 0; t && v < RL_PROTO_N_VERBS; v++) {
        char cell[64];
        snprintf(cell, sizeof cell, "| `%s` |", rl_proto_verb_name((rl_proto_verb_t)v));
        CHECK_MSG(strstr(t, cell) != NULL, "the summary has no row for %s", cell);
    }
    CHECK(t && strstr(t, "| `load` | actor, critic | `dir`, `model_train_step`?, `part`? | "
                         "`model_train_step`, `n_trainable` |"));
    free(t);
    t = s_table("generate_reply", &len);
    CHECK(t && strstr(t, "| `lens` | i32 [n_res] |") && strstr(t, "| `finish` | u8 [n_res] |"));
    free(t);
    t = s_table("train", &len);
    CHECK(t && strstr(t, "| `want_weights` | bool, optional (default true) |") &&
          strstr(t, "| `adv` | f64 [B], optional |") &&
          strstr(t, "| `step` | int, optional "
                    "(default 0) |"));
    free(t);
    t = s_table("train_reply", &len);
    CHECK(t && strstr(t, "| `stat_names` | strs [n_stats] |") &&
          strstr(t, "| `stats` | f64 [n_stats] |"));
    free(t);
    CHECK(s_table("nonsense", &len) == NULL);
    FILE *f = fopen("/dev/null", "w");
    CHECK_INT(f ? rl_proto_doc(f, "nonsense") : -1, RL_ENOTFOUND);
    if (f) {
        fclose(f);
    }
}

int main(int argc, char **argv) {
    s_path = RL_SOURCE_DIR "/docs/protocol.md";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--write") == 0) {
            s_write = 1;
        } else {
            s_path = argv[i];
        }
    }
    RL_TEST_RUN(test_rl_proto_doc);
    RL_TEST_RUN(test_doc_tables);
    RL_TEST_DONE();
}

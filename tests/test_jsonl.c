// tests for rl_jsonl, the JSONL reader under the SFT, GRPO-prompt and eval datasets: CRLF and LF
// files read alike, blank and whitespace-only lines are skipped but counted, a last line without
// "\n" counts, the line cap (exactly at the cap, one byte over, a file with no newline at all,
// lines that span the reader's buffer), JSON errors and non-objects named path:line(:column)
// without ending the input, invalid UTF-8 and NULs inside a line, read and open errors, the same
// lines from memory as from a file, a folder read as its *.jsonl files in name order, and the
// field-as-text helper the datasets use for answers.
#include "rl_err.h"
#include "rl_jsonl.h"
#include "rl_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_dir[] = "/tmp/rl_test_jsonl_XXXXXX";

// Writes n bytes to <dir>/name; returns the path (static buffer of the caller).
static const char *s_write(char *path, size_t cap, const char *name, const void *data, size_t n) {
    snprintf(path, cap, "%s/%s", s_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "FAIL cannot write %s\n", path);
        exit(1);
    }
    if (n) {
        fwrite(data, 1, n, f);
    }
    fclose(f);
    return path;
}

#define WRITE(path, name, lit) s_write(path, sizeof path, name, lit, sizeof(lit) - 1)

// Reads every row of r into a description: "L:key=value;..." per row, "E:<errmsg>" per error.
static void s_rows(rl_jsonl_t *r, char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (int guard = 0; guard < 100; guard++) {
        json_t *row = NULL;
        int rc = rl_jsonl_next(r, &row);
        if (rc == 0) {
            break;
        }
        if (rc < 0) {
            o += (size_t)snprintf(out + o, cap - o, "E%ld:%s|", rl_jsonl_lineno(r),
                                  rl_jsonl_errmsg(r));
            if (!rl_jsonl_json_error(r) && strstr(rl_jsonl_errmsg(r), "object") == NULL) {
                break; // sticky: a line too long, a read error
            }
            continue;
        }
        char *js = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
        o += (size_t)snprintf(out + o, cap - o, "%ld:%s|", rl_jsonl_lineno(r), js);
        free(js);
        json_decref(row);
        if (o >= cap) {
            break;
        }
    }
}

// The same bytes through a file and through memory give the same rows and errors.
static void s_expect(const char *name, const void *data, size_t n, size_t max_line,
                     const char *want) {
    char path[512], got_file[4096], got_mem[4096], err[512];
    s_write(path, sizeof path, name, data, n);
    rl_jsonl_t *r = NULL;
    CHECK_INT(rl_jsonl_open(path, max_line, &r, err, sizeof err), 0);
    if (!r) {
        return;
    }
    s_rows(r, got_file, sizeof got_file);
    rl_jsonl_destroy(&r);
    CHECK(r == NULL);
    CHECK_INT(rl_jsonl_open_mem(name, data, n, max_line, &r, err, sizeof err), 0);
    s_rows(r, got_mem, sizeof got_mem);
    rl_jsonl_destroy(&r);
    // the file's messages carry its full path, memory's the name: compare after the directory
    char want_file[4096];
    size_t o = 0;
    for (const char *p = want; *p && o + 1 < sizeof want_file; p++) {
        if (strncmp(p, "@/", 2) == 0) {
            o += (size_t)snprintf(want_file + o, sizeof want_file - o, "%s/", s_dir);
            p++;
        } else {
            want_file[o++] = *p;
        }
    }
    want_file[o] = '\0';
    CHECK_STR(got_file, want_file);
    char want_mem[4096];
    o = 0;
    for (const char *p = want; *p && o + 1 < sizeof want_mem; p++) {
        if (strncmp(p, "@/", 2) == 0) {
            p++;
        } else {
            want_mem[o++] = *p;
        }
    }
    want_mem[o] = '\0';
    CHECK_STR(got_mem, want_mem);
}

#define EXPECT(name, lit, max_line, want) s_expect(name, lit, sizeof(lit) - 1, max_line, want)

static void test_lines(void) {
    EXPECT("lf.jsonl", "{\"a\":1}\n{\"a\":2}\n", 0, "1:{\"a\":1}|2:{\"a\":2}|");
    EXPECT("crlf.jsonl", "{\"a\":1}\r\n{\"a\":2}\r\n", 0, "1:{\"a\":1}|2:{\"a\":2}|");
    EXPECT("no_final_newline.jsonl", "{\"a\":1}\n{\"a\":2}", 0, "1:{\"a\":1}|2:{\"a\":2}|");
    EXPECT("no_final_crlf.jsonl", "{\"a\":1}\r\n{\"a\":2}\r", 0, "1:{\"a\":1}|2:{\"a\":2}|");
    EXPECT("blank.jsonl", "\n\n  \t \n\r\n{\"a\":1}\n \r \n\n{\"b\":2}\n\n", 0,
           "5:{\"a\":1}|8:{\"b\":2}|");
    EXPECT("empty.jsonl", "", 0, "");
    EXPECT("only_blank.jsonl", "\n \n\t\r\n", 0, "");
    EXPECT("indented.jsonl", "  {\"a\":1}  \r\n", 0, "1:{\"a\":1}|");

    // the line a reader hands out: no "\n", no trailing "\r"s, NUL-terminated
    char path[512], err[256];
    WRITE(path, "text.jsonl", "x\r\r\n\n  y \r\nlast");
    rl_jsonl_t *r = NULL;
    CHECK_INT(rl_jsonl_open(path, 0, &r, err, sizeof err), 0);
    CHECK_STR(rl_jsonl_path(r), path);
    CHECK_INT(rl_jsonl_lineno(r), 0);
    const char *line = NULL;
    size_t len = 0;
    CHECK_INT(rl_jsonl_next_line(r, &line, &len), 1);
    CHECK(len == 1 && strcmp(line, "x") == 0);
    CHECK_INT(rl_jsonl_lineno(r), 1);
    CHECK_INT(rl_jsonl_next_line(r, &line, &len), 1);
    CHECK(len == 4 && strcmp(line, "  y ") == 0);
    CHECK_INT(rl_jsonl_lineno(r), 3);
    size_t l2 = 0;
    CHECK(rl_jsonl_line(r, &l2) == line && l2 == 4);
    CHECK_INT(rl_jsonl_next_line(r, &line, &len), 1);
    CHECK(len == 4 && strcmp(line, "last") == 0);
    CHECK_INT(rl_jsonl_lineno(r), 4);
    CHECK_INT(rl_jsonl_next_line(r, &line, &len), 0);
    CHECK_INT(rl_jsonl_next_line(r, &line, &len), 0);
    CHECK(rl_jsonl_line(r, NULL) == NULL);
    rl_jsonl_destroy(&r);
    rl_jsonl_destroy(&r); // a no-op on NULL
}

static void test_errors(void) {
    // JSON errors name path:line:column and do not end the input
    EXPECT("bad.jsonl", "{\"a\":1}\n{\"a\" 1}\n{\"a\":3}\n", 0,
           "1:{\"a\":1}|E2:@/bad.jsonl:2:6: invalid JSON: ':' expected near '1'|3:{\"a\":3}|");
    EXPECT("dup.jsonl", "{\"a\":1,\"a\":2}\n", 0,
           "E1:@/dup.jsonl:1:10: invalid JSON: duplicate object key near '\"a\"'|");
    EXPECT("not_object.jsonl", "[1,2]\n{\"a\":1}\n", 0,
           "E1:@/not_object.jsonl:1: a row must be a JSON object|2:{\"a\":1}|");
    EXPECT("scalar.jsonl", "\"s\"\n", 0,
           "E1:@/scalar.jsonl:1:3: invalid JSON: '[' or '{' expected near '\"s\"'|");
    EXPECT("unterminated.jsonl", "{\"a\":\"abc\r\n", 0,
           "E1:@/unterminated.jsonl:1:9: invalid JSON: premature end of input near '\"abc'|");
    // invalid UTF-8 (a lone continuation byte) and a NUL inside a line
    EXPECT("utf8.jsonl", "{\"a\":1}\n{\"a\":\"\x80\"}\n", 0,
           "1:{\"a\":1}|E2:@/utf8.jsonl:2:6: invalid JSON: unable to decode byte 0x80 near "
           "'\"'|");
    EXPECT("nul.jsonl", "{\"a\":1}\0x\n{\"a\":2}\n", 0,
           "E1:@/nul.jsonl:1:8: invalid JSON: end of file expected near end of file|2:{\"a\":2}|");

    // the line cap: at the cap, one over, the "\r" counted
    EXPECT("cap_ok.jsonl", "{\"a\":123}\n{\"b\":1}\n", 9, "1:{\"a\":123}|2:{\"b\":1}|");
    EXPECT("cap_over.jsonl", "{\"a\":1}\n{\"a\":1234}\n{\"b\":1}\n", 9,
           "1:{\"a\":1}|E2:@/cap_over.jsonl:2: line longer than 9 bytes (the JSONL line limit)|");
    EXPECT("cap_cr.jsonl", "{\"a\":123}\r\n", 9,
           "E1:@/cap_cr.jsonl:1: line longer than 9 bytes (the JSONL line limit)|");
    EXPECT("cap_last.jsonl", "{\"a\":1}\n{\"a\":1234}", 9,
           "1:{\"a\":1}|E2:@/cap_last.jsonl:2: line longer than 9 bytes (the JSONL line limit)|");
    // a blank line over the cap is refused too: the cap bounds memory, whatever the line holds
    EXPECT("cap_blank.jsonl", "{\"a\":1}\n            \n", 9,
           "1:{\"a\":1}|E2:@/cap_blank.jsonl:2: line longer than 9 bytes (the JSONL line limit)|");

    // the error is sticky: the input ends there
    char path[512], err[256];
    WRITE(path, "sticky.jsonl", "0123456789abc\n{}\n");
    rl_jsonl_t *r = NULL;
    CHECK_INT(rl_jsonl_open(path, 4, &r, err, sizeof err), 0);
    json_t *row = NULL;
    CHECK_INT(rl_jsonl_next(r, &row), RL_EINVAL);
    CHECK(row == NULL && rl_jsonl_json_error(r) == NULL);
    char first[512];
    snprintf(first, sizeof first, "%s", rl_jsonl_errmsg(r));
    CHECK_INT(rl_jsonl_next(r, &row), RL_EINVAL);
    CHECK_STR(rl_jsonl_errmsg(r), first);
    CHECK_INT(rl_jsonl_lineno(r), 1);
    rl_jsonl_destroy(&r);

    // open and read errors
    snprintf(path, sizeof path, "%s/absent.jsonl", s_dir);
    CHECK_INT(rl_jsonl_open(path, 0, &r, err, sizeof err), ENOENT);
    CHECK(r == NULL);
    char want[600];
    snprintf(want, sizeof want, "%s: %s", path, strerror(ENOENT));
    CHECK_STR(err, want);
    // a file that opens and cannot be read (page 0 of our own memory is unmapped: EIO)
    CHECK_INT(rl_jsonl_open("/proc/self/mem", 0, &r, err, sizeof err), 0);
    CHECK_INT(rl_jsonl_next(r, &row), RL_EIO);
    CHECK_STR(rl_jsonl_errmsg(r), "/proc/self/mem: read error");
    rl_jsonl_destroy(&r);
}

// Lines longer than the reader's first buffer (64 KiB), a line exactly at a large cap, and a
// file with no newline at all over the cap.
static void test_big(void) {
    size_t n_lines = 5, width = 150000;
    size_t total = n_lines * (width + 12);
    char *text = malloc(total + 1);
    RL_ASSERT(text);
    size_t o = 0;
    for (size_t i = 0; i < n_lines; i++) {
        o += (size_t)sprintf(text + o, "{\"%zu\":\"", i);
        memset(text + o, 'a' + (int)i, width);
        o += width;
        o += (size_t)sprintf(text + o, "\"}%s", i % 2 ? "\r\n" : "\n");
    }
    char path[512], err[256];
    s_write(path, sizeof path, "big.jsonl", text, o);
    for (int mem = 0; mem < 2; mem++) {
        rl_jsonl_t *r = NULL;
        CHECK_INT(mem ? rl_jsonl_open_mem("big", text, o, 0, &r, err, sizeof err)
                      : rl_jsonl_open(path, 0, &r, err, sizeof err),
                  0);
        json_t *row;
        size_t seen = 0;
        while (rl_jsonl_next(r, &row) == 1) {
            char key[16];
            snprintf(key, sizeof key, "%zu", seen);
            const char *v = json_string_value(json_object_get(row, key));
            CHECK(v && strlen(v) == width && v[0] == 'a' + (int)seen &&
                  v[width - 1] == 'a' + (int)seen);
            CHECK_INT(rl_jsonl_lineno(r), (long)seen + 1);
            json_decref(row);
            seen++;
        }
        CHECK_INT(seen, n_lines);
        CHECK_STR(rl_jsonl_errmsg(r), "");
        rl_jsonl_destroy(&r);
    }
    // one line exactly at a cap larger than the first buffer, then one byte more
    size_t cap = width + 8;
    memset(text, ' ', cap);
    memcpy(text, "{\"k\":1}", 7);
    text[cap] = '\n';
    rl_jsonl_t *r = NULL;
    CHECK_INT(rl_jsonl_open_mem("at_cap", text, cap + 1, cap, &r, err, sizeof err), 0);
    json_t *row = NULL;
    CHECK_INT(rl_jsonl_next(r, &row), 1);
    json_decref(row);
    CHECK_INT(rl_jsonl_next(r, &row), 0);
    rl_jsonl_destroy(&r);
    CHECK_INT(rl_jsonl_open_mem("over_cap", text, cap + 1, cap - 1, &r, err, sizeof err), 0);
    CHECK_INT(rl_jsonl_next(r, &row), RL_EINVAL);
    rl_jsonl_destroy(&r);
    // no newline at all: refused once the cap is passed, not after reading everything
    memset(text, 'x', o);
    s_write(path, sizeof path, "one_line.jsonl", text, o);
    CHECK_INT(rl_jsonl_open(path, 1000, &r, err, sizeof err), 0);
    CHECK_INT(rl_jsonl_next(r, &row), RL_EINVAL);
    CHECK_CONTAINS(rl_jsonl_errmsg(r), "one_line.jsonl:1: line longer than 1000 bytes");
    rl_jsonl_destroy(&r);
    free(text);
}

static void test_fields(void) {
    json_error_t je;
    json_t *row = json_loads("{\"s\":\"136\",\"i\":-390,\"r\":2.5,\"t\":0.1,\"e\":\"\",\"b\":true,"
                             "\"n\":null,\"l\":[1]}",
                             0, &je);
    RL_ASSERT(row);
    const char *keys[] = {"s", "i", "r", "t", "e"};
    const char *want[] = {"136", "-390", "2.5", "0.10000000000000001", ""};
    for (int k = 0; k < 5; k++) {
        char *t = NULL;
        CHECK_INT(rl_jsonl_field_text(row, keys[k], &t), 0);
        CHECK_STR(t, want[k]);
        free(t);
    }
    const char *none[] = {"b", "n", "l", "absent"};
    for (int k = 0; k < 4; k++) {
        char *t = (char *)"x";
        CHECK_INT(rl_jsonl_field_text(row, none[k], &t), RL_ENOTFOUND);
        CHECK(t == NULL);
    }
    json_decref(row);
    const char text[] = "{\"answer\": 42, \"prompt\": \"6*7=\"}";
    char *t = NULL;
    CHECK_INT(rl_jsonl_row_field_text(text, sizeof text - 1, "answer", &t), 0);
    CHECK_STR(t, "42");
    free(t);
    CHECK_INT(rl_jsonl_row_field_text(text, sizeof text - 1, "q", &t), RL_ENOTFOUND);
    CHECK_INT(rl_jsonl_row_field_text("[1]", 3, "q", &t), RL_EINVAL);
    CHECK_INT(rl_jsonl_row_field_text("{", 1, "q", &t), RL_EINVAL);
}

// A folder reads as its *.jsonl files in name order, each from line 1, its errors naming the
// file; hidden files and other names are skipped; a folder with none is refused.
static void test_folder(void) {
    char path[700], cmd[2400], err[1024];
    snprintf(path, sizeof path, "%s/many", s_dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/empty %s && cd %s && printf '{\"a\": 1}\\n\\n{\"a\": 2}\\n' > "
             "b.jsonl && printf '{\"a\": 0}' > a.jsonl && printf '{\"a\": 9}\\n' > "
             ".hidden.jsonl && printf '{\"a\": 8}\\n' > c.txt && printf 'x\\n' > d.jsonl",
             s_dir, path, path);
    CHECK_INT(system(cmd), 0);
    rl_jsonl_t *r = NULL;
    CHECK_INT(rl_jsonl_open(path, 0, &r, err, sizeof err), 0);
    if (!r) {
        return;
    }
    const char *want[][2] = {{"a.jsonl", "0"}, {"b.jsonl", "1"}, {"b.jsonl", "2"}};
    const long lines[] = {1, 1, 3};
    for (int i = 0; i < 3; i++) {
        json_t *row = NULL;
        CHECK_INT(rl_jsonl_next(r, &row), 1);
        CHECK_MSG(row && json_integer_value(json_object_get(row, "a")) == atoi(want[i][1]),
                  "row %d of the folder", i);
        const char *p = rl_jsonl_path(r);
        CHECK_MSG(strlen(p) > 7 && !strcmp(p + strlen(p) - 7, want[i][0]), "row %d from %s", i, p);
        CHECK_INT((int)rl_jsonl_lineno(r), (int)lines[i]);
        json_decref(row);
    }
    json_t *row = NULL;
    CHECK_INT(rl_jsonl_next(r, &row), RL_EINVAL); // d.jsonl's "x"
    CHECK_CONTAINS(rl_jsonl_errmsg(r), "/many/d.jsonl:1:1: invalid JSON");
    CHECK_INT(rl_jsonl_next(r, &row), 0);
    rl_jsonl_destroy(&r);
    snprintf(path, sizeof path, "%s/empty", s_dir);
    CHECK_INT(rl_jsonl_open(path, 0, &r, err, sizeof err), RL_EINVAL);
    CHECK_CONTAINS(err, "/empty: a folder with no *.jsonl file");
}

// A list reads its files and folders one after another in the order given (a folder as its
// *.jsonl files by name), each file from line 1; a missing file fails the open; no path is
// refused; rl_jsonl_names gives the list's name in messages.
static void test_list(void) {
    char one[200], two[200], dir[200], cmd[1600], err[1024];
    snprintf(one, sizeof one, "%s/list_one.jsonl", s_dir);
    snprintf(two, sizeof two, "%s/list_two.jsonl", s_dir);
    snprintf(dir, sizeof dir, "%s/list_dir", s_dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && printf '{\"a\": 1}\\n{\"a\": 2}\\n' > %s && printf '{\"a\": 3}' > %s "
             "&& printf '{\"a\": 5}\\n' > %s/y.jsonl && printf '{\"a\": 4}\\n' > %s/x.jsonl",
             dir, two, one, dir, dir);
    CHECK_INT(system(cmd), 0);
    const char *paths[] = {two, dir, one};
    rl_jsonl_t *r = NULL;
    CHECK_INT(rl_jsonl_open_list(paths, 3, 0, &r, err, sizeof err), 0);
    if (!r) {
        return;
    }
    const int a[] = {1, 2, 4, 5, 3};
    const char *from[] = {"list_two.jsonl", "list_two.jsonl", "x.jsonl", "y.jsonl",
                          "list_one.jsonl"};
    const long lines[] = {1, 2, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        json_t *row = NULL;
        CHECK_INT(rl_jsonl_next(r, &row), 1);
        CHECK_MSG(row && json_integer_value(json_object_get(row, "a")) == a[i], "row %d", i);
        const char *p = rl_jsonl_path(r);
        size_t lp = strlen(p), lf = strlen(from[i]);
        CHECK_MSG(lp > lf && !strcmp(p + lp - lf, from[i]), "row %d from %s", i, p);
        CHECK_INT((int)rl_jsonl_lineno(r), (int)lines[i]);
        json_decref(row);
    }
    json_t *row = NULL;
    CHECK_INT(rl_jsonl_next(r, &row), 0);
    rl_jsonl_destroy(&r);
    char gone[220];
    snprintf(gone, sizeof gone, "%s/list_gone.jsonl", s_dir);
    const char *bad[] = {one, gone};
    CHECK_INT(rl_jsonl_open_list(bad, 2, 0, &r, err, sizeof err), 0); // opened lazily
    if (r) {
        CHECK_INT(rl_jsonl_next(r, &row), 1);
        json_decref(row);
        CHECK_INT(rl_jsonl_next(r, &row), ENOENT);
        CHECK_CONTAINS(rl_jsonl_errmsg(r), "list_gone.jsonl: No such file or directory");
        rl_jsonl_destroy(&r);
    }
    CHECK_INT(rl_jsonl_open_list(paths, 0, 0, &r, err, sizeof err), RL_EINVAL);
    char name[1600];
    CHECK_STR(rl_jsonl_names(paths, 1, name, sizeof name), two);
    snprintf(cmd, sizeof cmd, "%s (+2 more)", two);
    CHECK_STR(rl_jsonl_names(paths, 3, name, sizeof name), cmd);
}

int main(void) {
    rl_test_tmpdir(s_dir, sizeof s_dir, "jsonl");
    RL_TEST_RUN(test_folder);
    RL_TEST_RUN(test_list);
    RL_TEST_RUN(test_lines);
    RL_TEST_RUN(test_errors);
    RL_TEST_RUN(test_big);
    RL_TEST_RUN(test_fields);
    rl_test_tmpdir_done(s_dir);
    RL_TEST_DONE();
}

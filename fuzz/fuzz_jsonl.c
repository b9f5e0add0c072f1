// fuzz_jsonl — libFuzzer target for the JSONL reader (rl_jsonl) that the SFT, prompt and eval
// datasets read through: arbitrary bytes as a JSONL file, read from memory (the same buffering
// code a file goes through; only the call that tops the buffer up differs). Any input must give
// rows, JSON errors and at most one error that ends the input, never a crash, a leak or a read
// past the input. Checked on the way: a line handed out holds no "\n", ends in no "\r", is
// NUL-terminated, is not blank and is no longer than the cap; line numbers only grow and never
// pass the number of "\n" plus one; every row is an object, and the field-as-text helper agrees
// with jansson on each of its fields.
//
// Input layout:
//   byte 0      the line cap: < 128 the default (64 MiB), else 4 * (byte - 127) bytes (4..512),
//               so small caps make lines cross the cap and the buffer grow and wrap
//   the rest    the file
#include "rl_err.h"
#include "rl_jsonl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Every field of a row through rl_jsonl_field_text: text exactly for strings and numbers.
static void s_fields(json_t *row) {
    const char *key;
    json_t *v;
    json_object_foreach(row, key, v) {
        char *t = NULL;
        int rc = rl_jsonl_field_text(row, key, &t);
        int textual = json_is_string(v) || json_is_integer(v) || json_is_real(v);
        if ((rc == 0) != textual || (rc != 0 && rc != RL_ENOTFOUND && rc != RL_ENOMEM) ||
            (rc == 0 && !t) || (rc != 0 && t)) {
            abort();
        }
        if (json_is_string(v) && strcmp(t, json_string_value(v)) != 0) {
            abort();
        }
        free(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    size_t cap = data[0] < 128 ? 0 : 4 * (size_t)(data[0] - 127);
    size_t n = size - 1;
    // a private copy of exactly n bytes, so ASan flags any read past the file's end
    uint8_t *file = malloc(n ? n : 1);
    if (!file) {
        return 0;
    }
    memcpy(file, data + 1, n);
    long newlines = 0;
    for (size_t i = 0; i < n; i++) {
        newlines += file[i] == '\n';
    }
    char err[256];
    rl_jsonl_t *r = NULL;
    if (rl_jsonl_open_mem("fuzz.jsonl", file, n, cap, &r, err, sizeof err) != 0) {
        free(file);
        return 0; // out of memory only
    }
    size_t limit = cap ? cap : RL_JSONL_MAX_LINE;
    long last = 0;
    for (;;) {
        json_t *row = NULL;
        int rc = rl_jsonl_next(r, &row);
        long lineno = rl_jsonl_lineno(r);
        if (lineno < last || lineno > newlines + 1) {
            abort();
        }
        last = lineno;
        if (rc == 0) {
            if (row) {
                abort();
            }
            break;
        }
        if (rc < 0) {
            const char *msg = rl_jsonl_errmsg(r);
            if (row || msg[0] == '\0' || strncmp(msg, "fuzz.jsonl:", 11) != 0 ||
                (rc != RL_EINVAL && rc != RL_ENOMEM)) {
                abort(); // an error names the file and line, with a known code
            }
            if (rc == RL_EINVAL && (rl_jsonl_json_error(r) || strstr(msg, "JSON object"))) {
                continue; // a bad line: the next one is read
            }
            if (rl_jsonl_next(r, &row) != rc || row) { // anything else ends the input
                abort();
            }
            break;
        }
        size_t len = 0;
        const char *line = rl_jsonl_line(r, &len);
        if (!row || !json_is_object(row) || !line || len == 0 || len > limit || line[len] != '\0' ||
            memchr(line, '\n', len) || line[len - 1] == '\r' || strspn(line, " \t\r") == len) {
            abort();
        }
        s_fields(row);
        json_decref(row);
    }
    // the same bytes as one line of text: the helper for rows kept as text agrees with a parse
    char *t = NULL;
    int rc = rl_jsonl_row_field_text((const char *)file, n, "answer", &t);
    if ((rc == 0) != (t != NULL)) {
        abort();
    }
    free(t);
    rl_jsonl_destroy(&r);
    free(file);
    return 0;
}

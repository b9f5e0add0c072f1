// rl_jsonl — the JSONL reader (see rl_jsonl.h). Lines are cut from one buffer that grows up to
// the line cap plus two bytes (the "\n" that ends the longest allowed line, and the NUL written
// after a line), so memory stays bounded whatever the file holds; getline() would grow without
// limit on a file with no newline. Files and memory go through the same code: only s_fill, which
// tops the buffer up, knows the difference (the fuzzer drives the memory path).
#include "rl_jsonl.h"

#include "rl_err.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_FIRST_CAP ((size_t)64 << 10) // first buffer size; doubles up to the cap

struct rl_jsonl {
    FILE *f;            // NULL: reading mem
    const uint8_t *mem; // borrowed
    size_t mem_len, mem_off;
    char *path;  // the file being read (a folder's: the current one)
    char **more; // a folder's files after the current one, in name order (NULL: none)
    int n_more, next;
    size_t max_line;
    char *buf; // buf[beg..end): bytes read and not yet handed out
    size_t cap, beg, end;
    size_t scanned; // bytes after beg known to hold no "\n"
    int eof;
    int sticky; // an error that ends the input (a line too long, a read error)
    long lineno;
    const char *line; // the last line handed out (inside buf)
    size_t line_len;
    json_error_t jerr;
    int have_jerr;
    char errmsg[4608];
};

__attribute__((format(printf, 3, 4))) static int s_fail(rl_jsonl_t *r, int code, const char *fmt,
                                                        ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->errmsg, sizeof r->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

// ---- open / close ------------------------------------------------------------------------------

static int s_new(const char *path, size_t max_line, rl_jsonl_t **out, char *err, size_t err_len) {
    rl_jsonl_t *r = calloc(1, sizeof *r);
    if (r) {
        r->path = strdup(path);
    }
    if (!r || !r->path) {
        free(r);
        return rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
    }
    // the cap plus "\n" plus NUL must fit a size_t
    r->max_line = max_line == 0             ? RL_JSONL_MAX_LINE
                  : max_line > SIZE_MAX / 2 ? SIZE_MAX / 2
                                            : max_line;
    r->cap = r->max_line + 2 < S_FIRST_CAP ? r->max_line + 2 : S_FIRST_CAP;
    r->buf = malloc(r->cap);
    if (!r->buf) {
        free(r->path);
        free(r);
        return rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", path);
    }
    *out = r;
    return 0;
}

static int s_name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// The *.jsonl files of folder `dir` ("dir/name"), sorted by name. Returns their count (*names_p:
// caller frees each and the array), or -1 with err filled (none, unreadable, out of memory).
static int s_folder(const char *dir, char ***names_p, char *err, size_t err_len) {
    *names_p = NULL;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        rl_errf(err, err_len, e, "%s: %s", dir, strerror(e));
        return -1;
    }
    char **names = NULL;
    int n = 0, cap = 0, oom = 0;
    for (struct dirent *e = readdir(d); e && !oom; e = readdir(d)) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".jsonl") != 0 || e->d_name[0] == '.') {
            continue;
        }
        char *full = malloc(strlen(dir) + l + 2);
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **g = realloc(names, (size_t)cap * sizeof *g);
            oom = !g;
            names = g ? g : names;
        }
        if (!full || oom) {
            free(full);
            oom = 1;
            break;
        }
        sprintf(full, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            names[n++] = full;
        } else {
            free(full);
        }
    }
    closedir(d);
    if (oom || n == 0) {
        for (int i = 0; i < n; i++) {
            free(names[i]);
        }
        free(names);
        rl_errf(err, err_len, oom ? RL_ENOMEM : RL_EINVAL,
                oom ? "%s: out of memory" : "%s: a folder with no *.jsonl file", dir);
        return -1;
    }
    qsort(names, (size_t)n, sizeof *names, s_name_cmp);
    *names_p = names;
    return n;
}

static void s_names_free(char **names, int n) {
    for (int i = 0; names && i < n; i++) {
        free(names[i]);
    }
    free(names);
}

int rl_jsonl_open_list(const char *const *paths, int n_paths, size_t max_line, rl_jsonl_t **out,
                       char *err, size_t err_len) {
    *out = NULL;
    // the files in reading order: a file as it is, a folder as its *.jsonl files by name
    char **names = NULL;
    int n = 0, cap = 0;
    for (int p = 0; p < n_paths; p++) {
        struct stat st;
        char **dir = NULL;
        int nd = 1;
        if (stat(paths[p], &st) == 0 && S_ISDIR(st.st_mode)) {
            if ((nd = s_folder(paths[p], &dir, err, err_len)) < 0) {
                s_names_free(names, n);
                return RL_EINVAL;
            }
        }
        if (n + nd > cap) {
            cap = n + nd + 16;
            char **g = realloc(names, (size_t)cap * sizeof *g);
            if (!g) {
                s_names_free(dir, nd);
                s_names_free(names, n);
                return rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", paths[p]);
            }
            names = g;
        }
        for (int i = 0; i < nd; i++) {
            names[n++] = dir ? dir[i] : strdup(paths[p]);
            if (!names[n - 1]) {
                s_names_free(names, n - 1);
                return rl_errf(err, err_len, RL_ENOMEM, "%s: out of memory", paths[p]);
            }
        }
        free(dir);
    }
    if (n == 0) {
        return rl_errf(err, err_len, RL_EINVAL, "no dataset file given");
    }
    FILE *f = fopen(names[0], "rb");
    if (!f) {
        int e = errno;
        rl_errf(err, err_len, e, "%s: %s", names[0], strerror(e));
        s_names_free(names, n);
        return e;
    }
    int rc = s_new(names[0], max_line, out, err, err_len);
    if (rc) {
        fclose(f);
        s_names_free(names, n);
        return rc;
    }
    (*out)->f = f;
    free(names[0]);
    (*out)->more = names;
    (*out)->n_more = n;
    (*out)->next = 1;
    return 0;
}

const char *rl_jsonl_names(const char *const *paths, int n_paths, char *out, size_t cap) {
    if (n_paths > 1) {
        snprintf(out, cap, "%s (+%d more)", paths[0], n_paths - 1);
    } else {
        snprintf(out, cap, "%s", n_paths == 1 ? paths[0] : "");
    }
    return out;
}

int rl_jsonl_open(const char *path, size_t max_line, rl_jsonl_t **out, char *err, size_t err_len) {
    return rl_jsonl_open_list(&path, 1, max_line, out, err, err_len);
}

int rl_jsonl_open_mem(const char *name, const void *data, size_t len, size_t max_line,
                      rl_jsonl_t **out, char *err, size_t err_len) {
    *out = NULL;
    int rc = s_new(name, max_line, out, err, err_len);
    if (rc) {
        return rc;
    }
    (*out)->mem = data;
    (*out)->mem_len = data ? len : 0;
    return 0;
}

void rl_jsonl_destroy(rl_jsonl_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_jsonl_t *r = *self_p;
    if (r->f) {
        fclose(r->f);
    }
    for (int i = r->next; r->more && i < r->n_more; i++) {
        free(r->more[i]);
    }
    free(r->more);
    free(r->buf);
    free(r->path);
    free(r);
    *self_p = NULL;
}

// ---- lines -------------------------------------------------------------------------------------

// Makes room after `end` (moving the pending bytes to the front, growing up to the cap plus two)
// and reads into it, keeping one byte free for the NUL after a last line. Returns 0 (sets eof at
// the end of the input), RL_EIO or RL_ENOMEM.
static int s_fill(rl_jsonl_t *r) {
    if (r->beg > 0) {
        memmove(r->buf, r->buf + r->beg, r->end - r->beg);
        r->end -= r->beg;
        r->beg = 0;
    }
    size_t most = r->max_line + 2;
    if (r->end + 1 >= r->cap && r->cap < most) {
        size_t cap = r->cap < most / 2 ? r->cap * 2 : most;
        char *b = realloc(r->buf, cap);
        if (!b) {
            return s_fail(r, RL_ENOMEM, "%s: out of memory", r->path);
        }
        r->buf = b;
        r->cap = cap;
    }
    size_t room = r->cap - 1 - r->end; // > 0: the caller reads only while a line may still fit
    size_t got;
    if (r->f) {
        got = fread(r->buf + r->end, 1, room, r->f);
        if (got == 0 && ferror(r->f)) {
            return s_fail(r, RL_EIO, "%s: read error", r->path);
        }
    } else {
        got = r->mem_len - r->mem_off < room ? r->mem_len - r->mem_off : room;
        if (got) {
            memcpy(r->buf + r->end, r->mem + r->mem_off, got);
        }
        r->mem_off += got;
    }
    r->end += got;
    r->eof = got == 0;
    return 0;
}

// The next raw line (blank or not): 1, 0 at the end, or a sticky error.
static int s_raw_line(rl_jsonl_t *r, char **line_p, size_t *len_p) {
    for (;;) {
        size_t pending = r->end - r->beg;
        char *start = r->buf + r->beg;
        char *nl =
            pending > r->scanned ? memchr(start + r->scanned, '\n', pending - r->scanned) : NULL;
        size_t len = nl ? (size_t)(nl - start) : pending;
        if (len > r->max_line) {
            r->lineno++;
            return r->sticky = s_fail(r, RL_EINVAL,
                                      "%s:%ld: line longer than %zu bytes (the JSONL "
                                      "line limit)",
                                      r->path, r->lineno, r->max_line);
        }
        if (nl || (r->eof && pending)) {
            r->lineno++;
            r->beg += len + (nl ? 1 : 0);
            r->scanned = 0;
            start[len] = '\0'; // the "\n", or the byte s_fill keeps free after a last line
            *line_p = start;
            *len_p = len;
            return 1;
        }
        if (r->eof && r->more && r->next < r->n_more) { // a folder's next file, from line 1
            FILE *f = fopen(r->more[r->next], "rb");
            if (!f) {
                int e = errno;
                return r->sticky = s_fail(r, e, "%s: %s", r->more[r->next], strerror(e));
            }
            fclose(r->f);
            r->f = f;
            free(r->path);
            r->path = r->more[r->next];
            r->more[r->next++] = NULL;
            r->eof = 0;
            r->lineno = 0;
            r->beg = r->end = r->scanned = 0;
            continue;
        }
        if (r->eof) {
            return 0;
        }
        r->scanned = pending;
        int rc = s_fill(r);
        if (rc) {
            return r->sticky = rc;
        }
    }
}

int rl_jsonl_next_line(rl_jsonl_t *r, const char **line_p, size_t *len_p) {
    r->have_jerr = 0;
    r->line = NULL;
    r->line_len = 0;
    if (r->sticky) {
        return r->sticky; // errmsg still says what ended the input
    }
    r->errmsg[0] = '\0';
    for (;;) {
        char *line = NULL;
        size_t len = 0;
        int rc = s_raw_line(r, &line, &len);
        if (rc != 1) {
            return rc;
        }
        while (len && line[len - 1] == '\r') {
            line[--len] = '\0';
        }
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) {
            k++;
        }
        if (k == len) {
            continue; // blank: only JSON whitespace
        }
        r->line = line;
        r->line_len = len;
        *line_p = line;
        *len_p = len;
        return 1;
    }
}

int rl_jsonl_next(rl_jsonl_t *r, json_t **row_p) {
    *row_p = NULL;
    const char *line;
    size_t len;
    int rc = rl_jsonl_next_line(r, &line, &len);
    if (rc != 1) {
        return rc;
    }
    json_t *row = json_loadb(line, len, JSON_REJECT_DUPLICATES, &r->jerr);
    if (!row) {
        r->have_jerr = 1;
        return s_fail(r, RL_EINVAL, "%s:%ld:%d: invalid JSON: %s", r->path, r->lineno,
                      r->jerr.column, r->jerr.text);
    }
    if (!json_is_object(row)) {
        json_decref(row);
        return s_fail(r, RL_EINVAL, "%s:%ld: a row must be a JSON object", r->path, r->lineno);
    }
    *row_p = row;
    return 1;
}

long rl_jsonl_lineno(const rl_jsonl_t *self) {
    return self->lineno;
}

const char *rl_jsonl_line(const rl_jsonl_t *self, size_t *len_p) {
    if (len_p) {
        *len_p = self->line_len;
    }
    return self->line;
}

const char *rl_jsonl_path(const rl_jsonl_t *self) {
    return self->path;
}
const char *rl_jsonl_errmsg(const rl_jsonl_t *self) {
    return self->errmsg;
}

const json_error_t *rl_jsonl_json_error(const rl_jsonl_t *self) {
    return self->have_jerr ? &self->jerr : NULL;
}

// ---- fields ------------------------------------------------------------------------------------

int rl_jsonl_field_text(const json_t *row, const char *field, char **text_p) {
    *text_p = NULL;
    const json_t *v = json_object_get(row, field);
    char buf[64];
    if (json_is_string(v)) {
        *text_p = strdup(json_string_value(v));
    } else if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        *text_p = strdup(buf);
    } else if (json_is_real(v)) {
        snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
        *text_p = strdup(buf);
    } else {
        return RL_ENOTFOUND;
    }
    return *text_p ? 0 : RL_ENOMEM;
}

int rl_jsonl_row_field_text(const char *row, size_t len, const char *field, char **text_p) {
    *text_p = NULL;
    json_error_t je;
    json_t *obj = json_loadb(row, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return RL_EINVAL;
    }
    int rc = rl_jsonl_field_text(obj, field, text_p);
    json_decref(obj);
    return rc;
}

// rl_metrics — metrics.jsonl and the TensorBoard event file. The protobuf encoding is done by
// hand: only varints, fixed64/fixed32 and length-delimited fields are needed.
#include "rl_metrics.h"

#include "rl_crc32c.h"
#include "rl_err.h"
#include "rl_log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char *name;
    double value;
} s_kv_t;

struct rl_metrics {
    FILE *jsonl;
    FILE *tf;
    s_kv_t *kv;
    int n, cap;
    char errmsg[512];
    unsigned char *buf;
    size_t buf_cap;
};

// ---- protobuf by hand --------------------------------------------------------------------------

typedef struct {
    unsigned char *p;
    size_t n, cap;
    int overflow;
} s_pb_t;

static void s_pb_bytes(s_pb_t *b, const void *data, size_t n) {
    if (b->n + n > b->cap) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void s_pb_varint(s_pb_t *b, uint64_t v) {
    unsigned char tmp[10];
    size_t k = 0;
    do {
        tmp[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    s_pb_bytes(b, tmp, k);
}

static size_t s_varint_len(uint64_t v) {
    size_t k = 1;
    while (v > 0x7f) {
        v >>= 7;
        k++;
    }
    return k;
}

// key = (field << 3) | wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
static void s_pb_key(s_pb_t *b, int field, int wire) {
    s_pb_varint(b, (uint64_t)(field << 3 | wire));
}

static void s_pb_string(s_pb_t *b, int field, const char *s, size_t n) {
    s_pb_key(b, field, 2);
    s_pb_varint(b, n);
    s_pb_bytes(b, s, n);
}

size_t rl_metrics_tf_event(unsigned char *buf, size_t cap, double wall_time, int64_t step,
                           const char *file_version, const char *const *tags,
                           const float *values, int n) {
    s_pb_t b = {buf, 0, cap, 0};
    s_pb_key(&b, 1, 1);
    s_pb_bytes(&b, &wall_time, 8); // little-endian host (checked in rl_optim.c)
    s_pb_key(&b, 2, 0);
    s_pb_varint(&b, (uint64_t)step); // int64: negative values as 10-byte two's complement
    if (file_version) {
        s_pb_string(&b, 3, file_version, strlen(file_version));
    } else {
        // Summary length = sum over values of (key + len varint + Value bytes)
        size_t sum_len = 0;
        for (int i = 0; i < n; i++) {
            size_t tl = strlen(tags[i]);
            size_t vl = 1 + s_varint_len(tl) + tl + 1 + 4;
            sum_len += 1 + s_varint_len(vl) + vl;
        }
        s_pb_key(&b, 5, 2);
        s_pb_varint(&b, sum_len);
        for (int i = 0; i < n; i++) {
            size_t tl = strlen(tags[i]);
            size_t vl = 1 + s_varint_len(tl) + tl + 1 + 4;
            s_pb_key(&b, 1, 2);
            s_pb_varint(&b, vl);
            s_pb_string(&b, 1, tags[i], tl);
            s_pb_key(&b, 2, 5);
            s_pb_bytes(&b, &values[i], 4);
        }
    }
    return b.overflow ? 0 : b.n;
}

int rl_metrics_tf_record(void *file, const void *data, size_t n) {
    FILE *f = file;
    uint64_t len = n;
    uint32_t crc_len = rl_crc32c_mask(rl_crc32c(0, &len, 8));
    uint32_t crc_data = rl_crc32c_mask(rl_crc32c(0, data, n));
    int ok = fwrite(&len, 8, 1, f) == 1 && fwrite(&crc_len, 4, 1, f) == 1 &&
             (n == 0 || fwrite(data, n, 1, f) == 1) && fwrite(&crc_data, 4, 1, f) == 1;
    return ok ? 0 : RL_EIO;
}

// ---- the sink --------------------------------------------------------------------------------

// Why open(path, ... O_NOFOLLOW) failed: a link in place of a run file is refused.
static int s_open_err(char *err, size_t err_len, const char *path, const char *verb, int e) {
    if (e == ELOOP) {
        return rl_errf(err, err_len, e, "%s is a symbolic link; rlctl does not follow links in "
                       "a run folder: remove it", path);
    }
    return rl_errf(err, err_len, e, "%s: cannot %s: %s", path, verb, strerror(e));
}

rl_metrics_t *rl_metrics_new(const char *dir, int tensorboard, char *err, size_t err_len) {
    rl_metrics_t *self = calloc(1, sizeof(*self));
    char path[4096];
    if (!self) {
        rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        s_open_err(err, err_len, path, "open", errno);
        goto fail;
    }
    // a last line cut short by a crash must not swallow the next one: end it first
    struct stat st;
    char last = '\n';
    if (fstat(fd, &st) == 0 && st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) == 1 &&
        last != '\n' && write(fd, "\n", 1) != 1) {
        rl_errf(err, err_len, errno, "%s: cannot write: %s", path, strerror(errno));
        close(fd);
        goto fail;
    }
    self->jsonl = fdopen(fd, "ab");
    if (!self->jsonl) {
        rl_errf(err, err_len, errno, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        goto fail;
    }
    if (tensorboard) {
        char host[256] = "localhost";
        if (gethostname(host, sizeof(host) - 1) != 0) {
            strcpy(host, "localhost");
        }
        host[sizeof(host) - 1] = '\0';
        double now = (double)time(NULL);
        // the same second twice (a quick resume) must not overwrite: add a counter
        fd = -1;
        for (int k = 0; k < 100 && fd < 0; k++) {
            if (k == 0) {
                snprintf(path, sizeof(path), "%s/events.out.tfevents.%.0f.%s.rlctl", dir, now,
                         host);
            } else {
                snprintf(path, sizeof(path), "%s/events.out.tfevents.%.0f.%s.rlctl.%d", dir,
                         now, host, k);
            }
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0 && errno != EEXIST) {
                break;
            }
        }
        self->tf = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (!self->tf) {
            s_open_err(err, err_len, path, "create", errno);
            if (fd >= 0) {
                close(fd);
            }
            goto fail;
        }
        unsigned char ev[128];
        size_t n = rl_metrics_tf_event(ev, sizeof(ev), now, 0, "brain.Event:2", NULL, NULL, 0);
        if (rl_metrics_tf_record(self->tf, ev, n) || fflush(self->tf)) {
            rl_errf(err, err_len, RL_EIO, "%s: write failed", path);
            goto fail;
        }
    }
    return self;
fail:
    rl_metrics_destroy(&self);
    return NULL;
}

void rl_metrics_destroy(rl_metrics_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_metrics_t *self = *self_p;
    if (self->jsonl) {
        fclose(self->jsonl);
    }
    if (self->tf) {
        fclose(self->tf);
    }
    for (int i = 0; i < self->n; i++) {
        free(self->kv[i].name);
    }
    free(self->kv);
    free(self->buf);
    free(self);
    *self_p = NULL;
}

int rl_metrics_add(rl_metrics_t *self, const char *name, double value) {
    for (int i = 0; i < self->n; i++) {
        if (strcmp(self->kv[i].name, name) == 0) {
            self->kv[i].value = value;
            return 0;
        }
    }
    if (self->n == self->cap) {
        int cap = self->cap ? 2 * self->cap : 16;
        s_kv_t *kv = realloc(self->kv, (size_t)cap * sizeof(*kv));
        if (!kv) {
            return RL_ENOMEM;
        }
        self->kv = kv;
        self->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) {
        return RL_ENOMEM;
    }
    self->kv[self->n++] = (s_kv_t){copy, value};
    return 0;
}

static int s_write_tf(rl_metrics_t *self, int64_t step, double time) {
    size_t need = 64;
    for (int i = 0; i < self->n; i++) {
        need += strlen(self->kv[i].name) + 32;
    }
    if (need > self->buf_cap) {
        unsigned char *b = realloc(self->buf, need);
        if (!b) {
            return RL_ENOMEM;
        }
        self->buf = b;
        self->buf_cap = need;
    }
    const char **tags = calloc((size_t)self->n + 1, sizeof(*tags));
    float *vals = calloc((size_t)self->n + 1, sizeof(*vals));
    int rc = RL_ENOMEM;
    if (tags && vals) {
        for (int i = 0; i < self->n; i++) {
            tags[i] = self->kv[i].name;
            vals[i] = (float)self->kv[i].value;
        }
        size_t len = rl_metrics_tf_event(self->buf, self->buf_cap, time, step, NULL, tags, vals,
                                         self->n);
        rc = len ? rl_metrics_tf_record(self->tf, self->buf, len) : RL_EIO;
        if (!rc && fflush(self->tf)) {
            rc = RL_EIO;
        }
    }
    free(tags);
    free(vals);
    return rc;
}

// Shortest "%.*g" that reads back as the same double (15 to 17 digits), so 0.1 prints as 0.1
// and every value still round-trips exactly.
static void s_fmt_double(char *buf, size_t cap, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            return;
        }
    }
}

// Appends to a growing string; returns 0 or RL_ENOMEM.
static int s_cat(char **s, size_t *n, size_t *cap, const char *add) {
    size_t k = strlen(add);
    if (*n + k + 1 > *cap) {
        size_t c = (*cap ? *cap : 256);
        while (c < *n + k + 1) {
            c *= 2;
        }
        char *p = realloc(*s, c);
        if (!p) {
            return RL_ENOMEM;
        }
        *s = p;
        *cap = c;
    }
    memcpy(*s + *n, add, k + 1);
    *n += k;
    return 0;
}

int rl_metrics_write(rl_metrics_t *self, int64_t step, double time) {
    int rc = 0;
    char *line = NULL, num[64];
    size_t n = 0, cap = 0;
    snprintf(num, sizeof(num), "{\"step\":%lld,\"time\":%.3f", (long long)step, time);
    rc = s_cat(&line, &n, &cap, num);
    for (int i = 0; i < self->n && !rc; i++) {
        // the name through jansson, so any character is escaped as JSON wants
        json_t *js = json_string(self->kv[i].name);
        char *key = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        double v = self->kv[i].value;
        if (isfinite(v)) {
            s_fmt_double(num, sizeof(num), v);
        } else {
            strcpy(num, "null"); // JSON has no NaN / Infinity
        }
        rc = !key || s_cat(&line, &n, &cap, ",") || s_cat(&line, &n, &cap, key) ||
                     s_cat(&line, &n, &cap, ":") || s_cat(&line, &n, &cap, num)
                 ? RL_ENOMEM
                 : 0;
        free(key);
    }
    if (!rc) {
        rc = s_cat(&line, &n, &cap, "}\n");
    }
    if (rc) {
        free(line);
        snprintf(self->errmsg, sizeof(self->errmsg), "out of memory");
        return rc;
    }
    if (fputs(line, self->jsonl) < 0 || fflush(self->jsonl)) {
        snprintf(self->errmsg, sizeof(self->errmsg), "metrics.jsonl: write failed: %s",
                 strerror(errno));
        rc = RL_EIO;
    }
    free(line);
    if (!rc && self->tf && self->n > 0) {
        rc = s_write_tf(self, step, time);
        if (rc) {
            snprintf(self->errmsg, sizeof(self->errmsg), "event file: write failed");
        }
    }
    for (int i = 0; i < self->n; i++) {
        free(self->kv[i].name);
    }
    self->n = 0;
    return rc;
}

void rl_metrics_clear(rl_metrics_t *self) {
    for (int i = 0; i < self->n; i++) {
        free(self->kv[i].name);
    }
    self->n = 0;
}

const char *rl_metrics_errmsg(const rl_metrics_t *self) { return self->errmsg; }

// 1 when the n bytes are only blanks (an empty line).
static int s_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') {
            return 0;
        }
    }
    return 1;
}

// fsync of the folder holding `path`, so a rename in it is on disk (best effort: some file
// systems refuse fsync on folders).
static void s_sync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else if ((size_t)(slash - path) < sizeof(dir)) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    } else {
        return;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int rl_metrics_truncate_after(const char *path, int64_t step, char *err, size_t err_len) {
    int in_fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in_fd < 0) {
        return errno == ENOENT ? 0 : s_open_err(err, err_len, path, "open", errno);
    }
    FILE *f = fdopen(in_fd, "rb");
    if (!f) {
        int e = errno;
        close(in_fd);
        return rl_errf(err, err_len, e, "%s: cannot open: %s", path, strerror(e));
    }
    char *tmp = malloc(strlen(path) + 5);
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int rc = 0, dropped = 0;
    FILE *out = NULL;
    if (!tmp) {
        fclose(f);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    sprintf(tmp, "%s.tmp", path);
    // a temp file left by a crash (or a link in its place) goes; O_EXCL makes a fresh one
    if (unlink(tmp) != 0 && errno != ENOENT) {
        rc = rl_errf(err, err_len, errno, "%s: cannot remove: %s", tmp, strerror(errno));
        goto done;
    }
    int out_fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    out = out_fd >= 0 ? fdopen(out_fd, "wb") : NULL;
    if (!out) {
        rc = s_open_err(err, err_len, tmp, "create", errno);
        if (out_fd >= 0) {
            close(out_fd);
            unlink(tmp);
        }
        goto done;
    }
    // Keep the JSON objects whose "step" is <= step (or that have none), each ending in a
    // newline. Anything else is a line that a crash cut short (a torn tail, or the zeros a file
    // system leaves after a crash) and is dropped: kept, the next line would be glued to it.
    while ((got = getline(&line, &cap, f)) >= 0) {
        if (s_blank(line, (size_t)got)) {
            continue;
        }
        json_t *o = json_loadb(line, (size_t)got, 0, NULL);
        if (!json_is_object(o)) {
            json_decref(o);
            dropped++;
            continue;
        }
        json_t *s = json_object_get(o, "step");
        int keep = !json_is_integer(s) || json_integer_value(s) <= step;
        json_decref(o);
        if (keep && (fwrite(line, 1, (size_t)got, out) != (size_t)got ||
                     (line[got - 1] != '\n' && fputc('\n', out) == EOF))) {
            rc = rl_errf(err, err_len, RL_EIO, "%s: write failed", tmp);
            break;
        }
    }
    if (!rc && ferror(f)) {
        rc = rl_errf(err, err_len, RL_EIO, "%s: read failed", path);
    }
    // crash-safe: the new content is on disk before it replaces the old name
    if (!rc && (fflush(out) != 0 || fsync(fileno(out)) != 0)) {
        rc = rl_errf(err, err_len, RL_EIO, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (fclose(out) != 0 && !rc) {
        rc = rl_errf(err, err_len, RL_EIO, "%s: write failed", tmp);
    }
    if (!rc && rename(tmp, path) != 0) {
        rc = rl_errf(err, err_len, errno, "%s: cannot replace: %s", path, strerror(errno));
    }
    if (rc) {
        unlink(tmp);
    } else {
        s_sync_parent(path);
        if (dropped) {
            rl_log_warn("%s: dropped %d %s (a write cut short by a crash)", path, dropped,
                        dropped == 1 ? "line that is not a JSON object"
                                     : "lines that are not JSON objects");
        }
    }
done:
    free(line);
    free(tmp);
    fclose(f);
    return rc;
}

// rl_manifest — manifest.json of a folder: every file's size and CRC-32C. The walk reads names
// with lstat and opens files O_NOFOLLOW, so a link planted in a folder is refused, never
// followed; files are read in 1 MiB pieces (a checkpoint's files can be many GB).
#include "rl_manifest.h"

#include "rl_crc32c.h"
#include "rl_err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MAX_MANIFEST (64u << 20) // a manifest of a million files is ~80 MB; ours are ~2 KB

typedef struct {
    char **rel;   // (n) paths relative to the folder; caller frees with s_list_free
    uint64_t *size;
    size_t n, cap;
} s_list_t;

static void s_list_free(s_list_t *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->rel[i]);
    }
    free(l->rel);
    free(l->size);
    memset(l, 0, sizeof *l);
}

static int s_list_add(s_list_t *l, const char *rel, uint64_t size) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        char **r = realloc(l->rel, cap * sizeof *r);
        if (r) {
            l->rel = r;
        }
        uint64_t *s = r ? realloc(l->size, cap * sizeof *s) : NULL;
        if (!s) {
            return RL_ENOMEM;
        }
        l->size = s;
        l->cap = cap;
    }
    if (!(l->rel[l->n] = strdup(rel))) {
        return RL_ENOMEM;
    }
    l->size[l->n++] = size;
    return 0;
}

static int s_cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// 1 when name is in the NULL-terminated list skip (NULL: empty)
static int s_skipped(const char *name, const char *const *skip) {
    for (size_t i = 0; skip && skip[i]; i++) {
        if (strcmp(name, skip[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

// Adds the regular files under <root>/<rel> (rel "" at the top) to l, names sorted at each level.
static int s_walk(const char *root, const char *rel, const char *const *skip, s_list_t *l,
                  char *err, size_t err_len) {
    char path[4200];
    int w = snprintf(path, sizeof path, "%s%s%s", root, rel[0] ? "/" : "", rel);
    if (w < 0 || (size_t)w >= sizeof path) {
        return rl_errf(err, err_len, ENAMETOOLONG, "%s/%s: path too long", root, rel);
    }
    DIR *d = opendir(path);
    if (!d) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            (!rel[0] && (strcmp(e->d_name, RL_MANIFEST_FILE) == 0 || s_skipped(e->d_name, skip)))) {
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **v = realloc(names, cap * sizeof *v);
            if (!v) {
                rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
                break;
            }
            names = v;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (n > 1) {
        qsort(names, n, sizeof *names, s_cmp_name);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        char sub[4200], full[4400];
        struct stat st;
        w = snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
        if (w < 0 || (size_t)w >= sizeof sub) {
            rc = rl_errf(err, err_len, ENAMETOOLONG, "%s/%s: path too long", path, names[i]);
            break;
        }
        snprintf(full, sizeof full, "%s/%s", root, sub);
        if (lstat(full, &st) != 0) {
            int e = errno;
            rc = rl_errf(err, err_len, e, "%s: %s", full, strerror(e));
        } else if (S_ISDIR(st.st_mode)) {
            rc = s_walk(root, sub, skip, l, err, err_len);
        } else if (!S_ISREG(st.st_mode)) {
            rc = rl_errf(err, err_len, RL_EINVAL,
                         "%s: not a regular file (a link?); a checked folder holds only files "
                         "and folders", full);
        } else if (s_list_add(l, sub, (uint64_t)st.st_size) != 0) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
    return rc;
}

// CRC-32C and length of the file at path (opened without following a link).
static int s_crc_file(const char *path, uint32_t *crc, uint64_t *len, char *err,
                      size_t err_len) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    enum { BUF = 1 << 20 };
    unsigned char *buf = malloc(BUF);
    if (!buf) {
        close(fd);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    uint32_t c = 0;
    uint64_t total = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = read(fd, buf, BUF);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            int e = errno;
            rc = rl_errf(err, err_len, e, "%s: cannot read: %s", path, strerror(e));
            break;
        }
        if (r == 0) {
            break;
        }
        c = rl_crc32c(c, buf, (size_t)r);
        total += (uint64_t)r;
    }
    free(buf);
    close(fd);
    *crc = c;
    *len = total;
    return rc;
}

int rl_manifest_write(const char *dir, const char *const *skip, uint32_t *crc_out, char *err,
                      size_t err_len) {
    s_list_t l = {0};
    json_t *root = NULL, *files = NULL;
    char *text = NULL;
    int fd = -1;
    int rc = s_walk(dir, "", skip, &l, err, err_len);
    if (rc) {
        goto fail;
    }
    root = json_object();
    files = json_object();
    if (!root || !files) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < l.n; i++) {
        char path[4400], hex[9];
        uint32_t crc;
        uint64_t len;
        snprintf(path, sizeof path, "%s/%s", dir, l.rel[i]);
        if ((rc = s_crc_file(path, &crc, &len, err, err_len)) != 0) {
            goto fail;
        }
        snprintf(hex, sizeof hex, "%08x", crc);
        json_t *e = json_pack("{s:I, s:s}", "size", (json_int_t)len, "crc32c", hex);
        if (!e || json_object_set_new(files, l.rel[i], e) != 0) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            goto fail;
        }
    }
    json_object_set_new(root, "format", json_string("rlctl-manifest"));
    json_object_set_new(root, "version", json_integer(RL_MANIFEST_FORMAT_VERSION));
    json_object_set_new(root, "checksum", json_string("crc32c"));
    json_object_set(root, "files", files);
    text = json_dumps(root, JSON_PRESERVE_ORDER | JSON_INDENT(1));
    if (!text) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto fail;
    }
    size_t n = strlen(text);
    text[n] = '\n'; // json_dumps ends without one; the '\0' is not written
    n++;
    char path[4200];
    int w = snprintf(path, sizeof path, "%s/" RL_MANIFEST_FILE, dir);
    if (w < 0 || (size_t)w >= sizeof path) {
        rc = rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", dir);
        goto fail;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = errno;
        rl_errf(err, err_len, rc, "%s: cannot write: %s", path, strerror(rc));
        goto fail;
    }
    for (size_t off = 0; off < n;) {
        ssize_t k = write(fd, text + off, n - off);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            rc = errno;
            rl_errf(err, err_len, rc, "%s: cannot write: %s", path, strerror(rc));
            goto fail;
        }
        off += (size_t)k;
    }
    if (fsync(fd) != 0) {
        rc = errno;
        rl_errf(err, err_len, rc, "%s: fsync: %s", path, strerror(rc));
        goto fail;
    }
    *crc_out = rl_crc32c(0, text, n);
fail:
    if (fd >= 0 && close(fd) != 0 && !rc) {
        rc = errno;
        rl_errf(err, err_len, rc, "%s/" RL_MANIFEST_FILE ": %s", dir, strerror(rc));
    }
    free(text);
    json_decref(files);
    json_decref(root);
    s_list_free(&l);
    return rc;
}

// Reads <dir>/manifest.json whole into *out (*n bytes). caller owns *out; free with free().
static int s_read_manifest(const char *path, char **out, size_t *n, char *err, size_t err_len) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return e == ENOENT ? rl_errf(err, err_len, RL_ENOTFOUND, "%s: missing", path)
                           : rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > S_MAX_MANIFEST) {
        close(fd);
        return rl_errf(err, err_len, RL_EPROTO, "%s: not a regular file of at most %u bytes",
                       path, S_MAX_MANIFEST);
    }
    size_t cap = (size_t)st.st_size, got = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    while (got < cap) {
        ssize_t k = read(fd, buf + got, cap - got);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            break;
        }
        got += (size_t)k;
    }
    close(fd);
    buf[got] = '\0';
    *out = buf;
    *n = got;
    return 0;
}

// A manifest entry's size and CRC, or RL_EPROTO naming the path.
static int s_entry(json_t *e, const char *mpath, const char *rel, uint64_t *size, uint32_t *crc,
                   char *err, size_t err_len) {
    json_t *s = json_object_get(e, "size"), *c = json_object_get(e, "crc32c");
    const char *h = json_string_value(c);
    char *end = NULL;
    unsigned long v = h ? strtoul(h, &end, 16) : 0;
    if (!json_is_integer(s) || json_integer_value(s) < 0 || !h || strlen(h) != 8 || *end ||
        v > 0xffffffffUL) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "%s: the entry of '%s' is malformed (wants size >= 0 and crc32c as 8 hex "
                       "digits)", mpath, rel);
    }
    *size = (uint64_t)json_integer_value(s);
    *crc = (uint32_t)v;
    return 0;
}

int rl_manifest_verify(const char *dir, const char *const *skip, int has_crc, uint32_t crc,
                       char *err, size_t err_len) {
    char mpath[4200];
    int w = snprintf(mpath, sizeof mpath, "%s/" RL_MANIFEST_FILE, dir);
    if (w < 0 || (size_t)w >= sizeof mpath) {
        return rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", dir);
    }
    char *text = NULL;
    size_t n = 0;
    s_list_t l = {0};
    json_t *root = NULL;
    int rc = s_read_manifest(mpath, &text, &n, err, err_len);
    if (rc) {
        return rc;
    }
    uint32_t got = rl_crc32c(0, text, n);
    if (has_crc && got != crc) {
        rc = rl_errf(err, err_len, RL_EPROTO,
                     "%s: checksum mismatch (crc32c %08x, the DONE marker says %08x); the "
                     "manifest changed after it was written", mpath, got, crc);
        goto fail;
    }
    json_error_t je;
    root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s:%d:%d: %s", mpath, je.line, je.column, je.text);
        goto fail;
    }
    json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
    json_t *sum = json_object_get(root, "checksum"), *files = json_object_get(root, "files");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "rlctl-manifest") != 0 ||
        !json_is_integer(ver)) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s: not an rlctl manifest (format, version)",
                     mpath);
        goto fail;
    }
    if (json_integer_value(ver) != RL_MANIFEST_FORMAT_VERSION) {
        rc = rl_errf(err, err_len, RL_EVERSION,
                     "%s: manifest format version %lld is not supported (this rlctl reads %d)",
                     mpath, (long long)json_integer_value(ver), RL_MANIFEST_FORMAT_VERSION);
        goto fail;
    }
    if (!json_is_string(sum) || strcmp(json_string_value(sum), "crc32c") != 0 ||
        !json_is_object(files)) {
        rc = rl_errf(err, err_len, RL_EPROTO,
                     "%s: 'checksum' must be \"crc32c\" and 'files' an object", mpath);
        goto fail;
    }
    if ((rc = s_walk(dir, "", skip, &l, err, err_len)) != 0) {
        goto fail;
    }
    // sizes first: a file cut short, added or missing is found without reading the folder
    uint64_t size;
    uint32_t want;
    for (size_t i = 0; i < l.n; i++) {
        json_t *e = json_object_get(files, l.rel[i]);
        if (!e) {
            rc = rl_errf(err, err_len, RL_EPROTO,
                         "%s/%s: not in " RL_MANIFEST_FILE " (added after it was written)", dir,
                         l.rel[i]);
            goto fail;
        }
        if ((rc = s_entry(e, mpath, l.rel[i], &size, &want, err, err_len)) != 0) {
            goto fail;
        }
        if (size != l.size[i]) {
            rc = rl_errf(err, err_len, RL_EPROTO,
                         "%s/%s: %llu bytes, " RL_MANIFEST_FILE " says %llu; the file changed "
                         "after it was written", dir, l.rel[i], (unsigned long long)l.size[i],
                         (unsigned long long)size);
            goto fail;
        }
    }
    if (json_object_size(files) != l.n) { // every walked name is listed: some listed one is gone
        char **sorted = malloc((l.n ? l.n : 1) * sizeof *sorted);
        if (!sorted) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            goto fail;
        }
        memcpy(sorted, l.rel, l.n * sizeof *sorted);
        qsort(sorted, l.n, sizeof *sorted, s_cmp_name);
        const char *key;
        json_t *e;
        json_object_foreach(files, key, e) {
            if (!l.n || !bsearch(&key, sorted, l.n, sizeof *sorted, s_cmp_name)) {
                rc = rl_errf(err, err_len, RL_EPROTO,
                             "%s/%s: missing (" RL_MANIFEST_FILE " lists it)", dir, key);
                break;
            }
        }
        free(sorted);
        if (!rc) {
            rc = rl_errf(err, err_len, RL_EPROTO, "%s: inconsistent file list", mpath);
        }
        goto fail;
    }
    for (size_t i = 0; i < l.n; i++) {
        char path[4400];
        uint32_t c;
        uint64_t len;
        snprintf(path, sizeof path, "%s/%s", dir, l.rel[i]);
        s_entry(json_object_get(files, l.rel[i]), mpath, l.rel[i], &size, &want, err, err_len);
        if ((rc = s_crc_file(path, &c, &len, err, err_len)) != 0) {
            goto fail;
        }
        if (c != want || len != size) {
            rc = rl_errf(err, err_len, RL_EPROTO,
                         "%s: checksum mismatch (crc32c %08x, " RL_MANIFEST_FILE " says %08x); "
                         "the file changed after it was written", path, c, want);
            goto fail;
        }
    }
fail:
    json_decref(root);
    free(text);
    s_list_free(&l);
    return rc;
}

// rl_curve — CURVE key files (see rl_curve.h).
#include "rl_curve.h"

#include "rl_err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define S_MAX_KEYS 4096
#define S_FILE_MAX (1 << 20) // an allowlist or key file larger than this is not one

int rl_curve_key_valid(const char *text, size_t len) {
    if (len != RL_CURVE_Z85_LEN) {
        return 0;
    }
    char z[RL_CURVE_Z85_LEN + 1];
    memcpy(z, text, len);
    z[len] = '\0';
    uint8_t raw[32];
    return zmq_z85_decode(raw, z) != NULL;
}

// Reads a whole small file (opened O_NOFOLLOW|O_CLOEXEC) into a NUL-terminated buffer; *st gets
// its stat. caller owns *buf_p. Returns 0 or an error naming the file.
static int s_read(const char *path, char **buf_p, struct stat *st, char *err, size_t err_len) {
    *buf_p = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_size > S_FILE_MAX) {
        close(fd);
        return rl_errf(err, err_len, RL_EINVAL, "%s: not a regular file under 1 MiB", path);
    }
    char *b = malloc((size_t)st->st_size + 1);
    if (!b) {
        close(fd);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    size_t n = 0;
    while (n < (size_t)st->st_size) {
        ssize_t r = read(fd, b + n, (size_t)st->st_size - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    b[n] = '\0';
    *buf_p = b;
    return 0;
}

// The one key of a key file: its text without surrounding blank space. Returns 0 or an error.
static int s_one_key(const char *path, const char *text, char out[RL_CURVE_Z85_LEN + 1], char *err,
                     size_t err_len) {
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
        p++;
    }
    size_t n = strcspn(p, " \t\r\n");
    const char *q = p + n;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') {
        q++;
    }
    if (!rl_curve_key_valid(p, n) || *q) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: not a CURVE key file (one 40-character Z85 key, as rlctl keygen "
                       "writes)",
                       path);
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

int rl_curve_read_secret(const char *path, const char *what, char **buf_p, char *err,
                         size_t err_len) {
    struct stat st;
    int rc = s_read(path, buf_p, &st, err, err_len);
    if (rc) {
        return rc;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        memset(*buf_p, 0, strlen(*buf_p));
        free(*buf_p);
        *buf_p = NULL;
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: a %s must be ours and readable by us alone (mode %04o; chmod 600 %s)",
                       path, what, (unsigned)(st.st_mode & 07777), path);
    }
    return 0;
}

int rl_curve_load_secret(const char *path, rl_curve_key_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    char *b;
    int rc = rl_curve_read_secret(path, "secret key", &b, err, err_len);
    if (rc) {
        return rc;
    }
    rc = s_one_key(path, b, out->sec, err, err_len);
    memset(b, 0, strlen(b));
    free(b);
    if (!rc && zmq_curve_public(out->pub, out->sec) != 0) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: cannot derive the public key: %s", path,
                     zmq_strerror(zmq_errno()));
    }
    if (rc) {
        memset(out, 0, sizeof *out);
    }
    return rc;
}

int rl_curve_load_public(const char *path, rl_curve_key_t *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    char *b;
    struct stat st;
    int rc = s_read(path, &b, &st, err, err_len);
    if (!rc) {
        rc = s_one_key(path, b, out->pub, err, err_len);
        free(b);
    }
    return rc;
}

// Writes text into path, created exclusively (O_EXCL unless force) with mode. Returns 0 or an
// error naming the file.
static int s_write(const char *path, const char *text, mode_t mode, int force, char *err,
                   size_t err_len) {
    if (force && unlink(path) != 0 && errno != ENOENT) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s%s", path, strerror(e),
                       e == EEXIST ? " (rlctl keygen never overwrites a key; --force does)" : "");
    }
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int e = errno;
    if (fchmod(fd, mode) != 0 || close(fd) != 0 || w != (ssize_t)n) {
        return rl_errf(err, err_len, e ? e : RL_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    return 0;
}

int rl_curve_keygen(const char *dir, int force, rl_curve_key_t *out, char *err, size_t err_len) {
    rl_curve_key_t k;
    memset(&k, 0, sizeof k);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", dir, strerror(e));
    }
    if (zmq_curve_keypair(k.pub, k.sec) != 0) {
        return rl_errf(err, err_len, RL_EIO, "zmq_curve_keypair: %s (libzmq without CURVE?)",
                       zmq_strerror(zmq_errno()));
    }
    char path[4200], text[RL_CURVE_Z85_LEN + 2];
    snprintf(path, sizeof path, "%s/key", dir);
    snprintf(text, sizeof text, "%s\n", k.sec);
    int rc = s_write(path, text, 0600, force, err, err_len);
    memset(text, 0, sizeof text);
    if (!rc) {
        snprintf(path, sizeof path, "%s/key.pub", dir);
        snprintf(text, sizeof text, "%s\n", k.pub);
        rc = s_write(path, text, 0644, force, err, err_len);
    }
    if (!rc && out) {
        *out = k;
    }
    memset(&k, 0, sizeof k);
    return rc;
}

// Appends key to the list (*keys_p, *n_p), skipping one already in it.
static int s_add(char (**keys_p)[RL_CURVE_Z85_LEN + 1], int *n_p, const char *key, char *err,
                 size_t err_len) {
    for (int i = 0; i < *n_p; i++) {
        if (strcmp((*keys_p)[i], key) == 0) {
            return 0;
        }
    }
    if (*n_p == S_MAX_KEYS) {
        return rl_errf(err, err_len, RL_EINVAL, "more than %d keys in an allowlist", S_MAX_KEYS);
    }
    char(*k)[RL_CURVE_Z85_LEN + 1] = realloc(*keys_p, (size_t)(*n_p + 1) * sizeof *k);
    if (!k) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    memcpy(k[*n_p], key, RL_CURVE_Z85_LEN + 1);
    *keys_p = k;
    (*n_p)++;
    return 0;
}

static int s_cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Every *.pub of a folder, in name order.
static int s_allow_dir(const char *path, char (**keys_p)[RL_CURVE_Z85_LEN + 1], int *n_p, char *err,
                       size_t err_len) {
    DIR *d = opendir(path);
    if (!d) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    char **names = NULL;
    int nn = 0, rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d)) != NULL;) {
        size_t l = strlen(e->d_name);
        if (l <= 4 || strcmp(e->d_name + l - 4, ".pub") != 0 || e->d_name[0] == '.') {
            continue;
        }
        char **nn2 = realloc(names, (size_t)(nn + 1) * sizeof *names);
        if (!nn2 || !(nn2[nn] = strdup(e->d_name))) {
            names = nn2 ? nn2 : names;
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        names = nn2;
        nn++;
    }
    closedir(d);
    if (nn > 1) {
        qsort(names, (size_t)nn, sizeof *names, s_cmp_name);
    }
    for (int i = 0; !rc && i < nn; i++) {
        char f[4400];
        rl_curve_key_t k;
        snprintf(f, sizeof f, "%s/%s", path, names[i]);
        rc = rl_curve_load_public(f, &k, err, err_len);
        if (!rc) {
            rc = s_add(keys_p, n_p, k.pub, err, err_len);
        }
    }
    for (int i = 0; i < nn; i++) {
        free(names[i]);
    }
    free(names);
    return rc;
}

// A file of keys, one per line.
static int s_allow_file(const char *path, char (**keys_p)[RL_CURVE_Z85_LEN + 1], int *n_p,
                        char *err, size_t err_len) {
    char *b;
    struct stat st;
    int rc = s_read(path, &b, &st, err, err_len);
    int line = 0;
    for (char *p = b; !rc && p && *p;) {
        line++;
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *s = p;
        while (n > 0 && (*s == ' ' || *s == '\t')) {
            s++;
            n--;
        }
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) {
            n--;
        }
        if (n > 0 && s[0] != '#') {
            if (!rl_curve_key_valid(s, n)) {
                rc = rl_errf(err, err_len, RL_EINVAL,
                             "%s:%d: not a public key (one 40-character Z85 key per line)", path,
                             line);
            } else {
                char k[RL_CURVE_Z85_LEN + 1];
                memcpy(k, s, n);
                k[n] = '\0';
                rc = s_add(keys_p, n_p, k, err, err_len);
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    free(b);
    return rc;
}

int rl_curve_load_allow(const char *path, char (**keys_p)[RL_CURVE_Z85_LEN + 1], int *n_p,
                        char *err, size_t err_len) {
    *keys_p = NULL;
    *n_p = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    int rc = S_ISDIR(st.st_mode) ? s_allow_dir(path, keys_p, n_p, err, err_len)
                                 : s_allow_file(path, keys_p, n_p, err, err_len);
    if (!rc && *n_p == 0) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s: no public key in it (%s)", path,
                     S_ISDIR(st.st_mode) ? "a folder of *.pub files" : "one key per line");
    }
    if (rc) {
        free(*keys_p);
        *keys_p = NULL;
        *n_p = 0;
    }
    return rc;
}

// 1 when text (a NUL-terminated argument or the part after its '=') is taken for a key: a
// well-formed Z85 key that is not a path. Z85's alphabet holds '/' and '.', so a 40-character
// path can be a well-formed key: one that names an existing file or folder, or whose folder
// exists (a path to be created, as --cache DIR), is a path. The root does not count as such a
// folder: a key starting with '/' and holding no other one would otherwise pass as a path.
static int s_is_key(const char *text) {
    size_t n = strlen(text);
    if (!rl_curve_key_valid(text, n)) {
        return 0;
    }
    struct stat st;
    if (lstat(text, &st) == 0) {
        return 0;
    }
    const char *slash = strrchr(text, '/');
    if (slash && slash > text) {
        char dir[RL_CURVE_Z85_LEN + 1];
        memcpy(dir, text, (size_t)(slash - text));
        dir[slash - text] = '\0';
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
            return 0;
        }
    }
    return 1;
}

int rl_curve_argv_key(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (s_is_key(a) || (eq && s_is_key(eq + 1))) {
            return i;
        }
    }
    return -1;
}

// rl_checkpoint — checkpoint folders, state.json and the DONE marker. DONE is the commit
// point (llm.c's habit): everything before it is fsynced, so a crash at any moment leaves
// either a complete checkpoint or one that rl_checkpoint_latest skips.
#include "rl_checkpoint.h"

#include "rl_err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- files and folders -------------------------------------------------------------------------

int rl_checkpoint_mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf)) {
        return ENAMETOOLONG;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                return errno;
            }
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        return errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

int rl_checkpoint_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        return errno == ENOENT ? 0 : errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return unlink(path) == 0 ? 0 : errno;
    }
    DIR *d = opendir(path);
    if (!d) {
        return errno;
    }
    struct dirent *e;
    int rc = 0;
    size_t n = strlen(path);
    while ((e = readdir(d)) && !rc) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        size_t k = n + strlen(e->d_name) + 2;
        char *child = malloc(k);
        if (!child) {
            rc = ENOMEM;
            break;
        }
        snprintf(child, k, "%s/%s", path, e->d_name);
        rc = rl_checkpoint_rmtree(child);
        free(child);
    }
    closedir(d);
    if (!rc && rmdir(path) != 0) {
        rc = errno;
    }
    return rc;
}

// Writes `n` bytes to path and fsyncs it. Returns 0 or errno.
static int s_write_synced(const char *path, const char *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        return errno;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            int e = errno;
            close(fd);
            return e;
        }
        off += (size_t)w;
    }
    int rc = fsync(fd) == 0 ? 0 : errno;
    if (close(fd) != 0 && !rc) {
        rc = errno;
    }
    return rc;
}

static int s_sync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        return errno;
    }
    int rc = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

static int s_exists(const char *dir, const char *name) {
    char p[4200];
    int w = snprintf(p, sizeof(p), "%s/%s", dir, name);
    return w > 0 && (size_t)w < sizeof(p) && access(p, F_OK) == 0;
}

// ---- writing --------------------------------------------------------------------------------

int rl_checkpoint_prepare(const char *run_dir, int64_t step, char *dir, size_t cap, char *err,
                          size_t err_len) {
    int w = snprintf(dir, cap, "%s/checkpoints/step-%lld", run_dir, (long long)step);
    if (w < 0 || (size_t)w >= cap) {
        return rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", run_dir);
    }
    int rc = rl_checkpoint_rmtree(dir);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot remove the old folder: %s", dir,
                       strerror(rc));
    }
    rc = rl_checkpoint_mkdirs(dir);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot create: %s", dir, strerror(rc));
    }
    return 0;
}

int rl_checkpoint_commit(const char *dir, const rl_ckpt_state_t *st, const rl_optim_t *optim,
                         char *err, size_t err_len) {
    char path[4200];
    int rc;
    if (optim) {
        snprintf(path, sizeof(path), "%s/optimizer.bin", dir);
        rc = rl_optim_save(optim, path, err, err_len);
        if (rc) {
            return rc;
        }
        rc = s_sync_path(path);
        if (rc) {
            return rl_errf(err, err_len, rc, "%s: fsync: %s", path, strerror(rc));
        }
    }
    json_t *o = json_object(), *data = json_object(), *rng = json_object(), *s = json_array();
    if (!o || !data || !rng || !s) {
        json_decref(o);
        json_decref(data);
        json_decref(rng);
        json_decref(s);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    json_object_set_new(o, "format", json_string("rlctl-checkpoint"));
    json_object_set_new(o, "version", json_integer(RL_CHECKPOINT_FORMAT_VERSION));
    json_object_set_new(o, "step", json_integer(st->step));
    json_object_set_new(o, "policy_version", json_integer(st->policy_version));
    json_object_set_new(o, "tune", json_string(st->tune));
    json_object_set_new(o, "n_trainable", json_integer(st->n_trainable));
    json_object_set_new(o, "num_tokens", json_integer(st->num_tokens));
    json_object_set_new(o, "model_train_step", json_integer(st->model_train_step));
    json_object_set_new(data, "epoch", json_integer(st->data_epoch));
    json_object_set_new(data, "index", json_integer(st->data_index));
    json_object_set_new(o, "data", data);
    for (int i = 0; i < 4; i++) {
        char hex[17];
        snprintf(hex, sizeof(hex), "%016" PRIx64, st->rng.s[i]);
        json_array_append_new(s, json_string(hex));
    }
    json_object_set_new(rng, "s", s);
    json_object_set_new(rng, "has_spare", json_integer(st->rng.has_spare));
    json_object_set_new(rng, "spare", json_real(st->rng.spare));
    json_object_set_new(o, "rng", rng);
    char *text = json_dumps(o, JSON_PRESERVE_ORDER | JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(o);
    if (!text) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    snprintf(path, sizeof(path), "%s/state.json", dir);
    size_t len = strlen(text);
    rc = s_write_synced(path, text, len);
    free(text);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot write: %s", path, strerror(rc));
    }
    // the folder's entries (model/, optimizer.bin, state.json) before the marker
    rc = s_sync_path(dir);
    if (!rc) {
        snprintf(path, sizeof(path), "%s/DONE", dir);
        rc = s_write_synced(path, "", 0);
    }
    if (!rc) {
        rc = s_sync_path(dir);
    }
    return rc ? rl_errf(err, err_len, rc, "%s: cannot write DONE: %s", dir, strerror(rc)) : 0;
}

// ---- reading --------------------------------------------------------------------------------

static int s_get_int(json_t *o, const char *key, int64_t *v, const char *path, char *err,
                     size_t err_len) {
    json_t *x = json_object_get(o, key);
    if (!json_is_integer(x)) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: '%s' is missing or not an integer", path,
                       key);
    }
    *v = json_integer_value(x);
    return 0;
}

int rl_checkpoint_read_state(const char *dir, rl_ckpt_state_t *st, char *err, size_t err_len) {
    char path[4200];
    if (!s_exists(dir, "DONE")) {
        return rl_errf(err, err_len, RL_ENOTFOUND,
                       "%s: incomplete checkpoint (no DONE marker: the run stopped while "
                       "writing it)", dir);
    }
    snprintf(path, sizeof(path), "%s/state.json", dir);
    json_error_t jerr;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) {
        return rl_errf(err, err_len, access(path, F_OK) == 0 ? RL_EPROTO : ENOENT,
                       "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    }
    int rc = 0;
    memset(st, 0, sizeof(*st));
    json_t *fmt = json_object_get(o, "format");
    int64_t version = 0, has_spare = 0;
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "rlctl-checkpoint") != 0) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s: not an rlctl checkpoint state (format)",
                     path);
        goto done;
    }
    if ((rc = s_get_int(o, "version", &version, path, err, err_len))) {
        goto done;
    }
    if (version != RL_CHECKPOINT_FORMAT_VERSION) {
        rc = rl_errf(err, err_len, RL_EVERSION,
                     "%s: checkpoint format version %lld is not supported (this rlctl reads %d)",
                     path, (long long)version, RL_CHECKPOINT_FORMAT_VERSION);
        goto done;
    }
    json_t *data = json_object_get(o, "data"), *rng = json_object_get(o, "rng");
    json_t *tune = json_object_get(o, "tune");
    json_t *s = rng ? json_object_get(rng, "s") : NULL;
    json_t *spare = rng ? json_object_get(rng, "spare") : NULL;
    if ((rc = s_get_int(o, "step", &st->step, path, err, err_len)) ||
        (rc = s_get_int(o, "policy_version", &st->policy_version, path, err, err_len)) ||
        (rc = s_get_int(o, "n_trainable", &st->n_trainable, path, err, err_len)) ||
        (rc = s_get_int(o, "num_tokens", &st->num_tokens, path, err, err_len))) {
        goto done;
    }
    if (!json_is_object(data) || !json_is_object(rng) || !json_is_string(tune) ||
        strlen(json_string_value(tune)) >= sizeof(st->tune)) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s: 'data', 'rng' or 'tune' is missing", path);
        goto done;
    }
    if ((rc = s_get_int(data, "epoch", &st->data_epoch, path, err, err_len)) ||
        (rc = s_get_int(data, "index", &st->data_index, path, err, err_len)) ||
        (rc = s_get_int(rng, "has_spare", &has_spare, path, err, err_len))) {
        goto done;
    }
    strcpy(st->tune, json_string_value(tune));
    if (json_object_get(o, "model_train_step") &&
        (rc = s_get_int(o, "model_train_step", &st->model_train_step, path, err, err_len))) {
        goto done;
    }
    if (!json_is_array(s) || json_array_size(s) != 4 || !json_is_number(spare)) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s: 'rng' must hold s (4 words) and spare", path);
        goto done;
    }
    for (int i = 0; i < 4; i++) {
        json_t *w = json_array_get(s, (size_t)i);
        const char *h = json_string_value(w);
        char *end = NULL;
        errno = 0;
        unsigned long long v = h ? strtoull(h, &end, 16) : 0;
        if (!h || strlen(h) != 16 || *end != '\0' || errno) {
            rc = rl_errf(err, err_len, RL_EPROTO, "%s: rng.s[%d] is not 16 hex digits", path, i);
            goto done;
        }
        st->rng.s[i] = (uint64_t)v;
    }
    st->rng.has_spare = (int)has_spare;
    st->rng.spare = json_number_value(spare);
    if (st->step < 0 || st->data_epoch < 0 || st->data_index < 0) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s: negative step or data position", path);
    }
done:
    json_decref(o);
    return rc;
}

// Parses "step-<digits>" into *step; 0 when the name is something else.
static int s_parse_step(const char *name, int64_t *step) {
    if (strncmp(name, "step-", 5) != 0 || name[5] == '\0') {
        return 0;
    }
    int64_t v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10) {
            return 0;
        }
        v = v * 10 + (*p - '0');
    }
    *step = v;
    return 1;
}

typedef struct {
    int64_t step;
    int done;
} s_ckpt_t;

static int s_cmp_step(const void *a, const void *b) {
    int64_t x = ((const s_ckpt_t *)a)->step, y = ((const s_ckpt_t *)b)->step;
    return x < y ? -1 : x > y;
}

// Lists step-<N> folders sorted by step. caller owns *out; free with free().
static int s_list(const char *run_dir, s_ckpt_t **out, size_t *n_out) {
    char root[4200];
    snprintf(root, sizeof(root), "%s/checkpoints", run_dir);
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(root);
    if (!d) {
        return errno == ENOENT ? 0 : errno;
    }
    s_ckpt_t *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t step;
        if (!s_parse_step(e->d_name, &step)) {
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            s_ckpt_t *nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                free(v);
                closedir(d);
                return ENOMEM;
            }
            v = nv;
        }
        char dir[4200];
        int w = snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name);
        v[n].step = step;
        v[n].done = w > 0 && (size_t)w < sizeof(dir) && s_exists(dir, "DONE");
        n++;
    }
    closedir(d);
    if (n) {
        qsort(v, n, sizeof(*v), s_cmp_step);
    }
    *out = v;
    *n_out = n;
    return 0;
}

int rl_checkpoint_latest(const char *run_dir, char *dir, size_t cap, int64_t *step_p) {
    s_ckpt_t *v;
    size_t n;
    int rc = s_list(run_dir, &v, &n);
    if (rc) {
        return rc;
    }
    rc = RL_ENOTFOUND;
    for (size_t i = n; i-- > 0;) {
        if (v[i].done) {
            snprintf(dir, cap, "%s/checkpoints/step-%lld", run_dir, (long long)v[i].step);
            *step_p = v[i].step;
            rc = 0;
            break;
        }
    }
    free(v);
    return rc;
}

int rl_checkpoint_prune(const char *run_dir, int keep, char *err, size_t err_len) {
    s_ckpt_t *v;
    size_t n;
    int rc = s_list(run_dir, &v, &n);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s/checkpoints: %s", run_dir, strerror(rc));
    }
    int kept = 0;
    int64_t newest_done = -1;
    for (size_t i = n; i-- > 0;) {
        if (v[i].done && newest_done < 0) {
            newest_done = v[i].step;
        }
    }
    for (size_t i = n; i-- > 0 && !rc;) {
        int remove_it;
        if (v[i].done) {
            remove_it = kept >= keep;
            kept++;
        } else {
            // an incomplete folder newer than every complete one may be being written now
            remove_it = v[i].step < newest_done;
        }
        if (remove_it) {
            char dir[4200];
            snprintf(dir, sizeof(dir), "%s/checkpoints/step-%lld", run_dir, (long long)v[i].step);
            rc = rl_checkpoint_rmtree(dir);
            if (rc) {
                rl_errf(err, err_len, rc, "%s: cannot remove: %s", dir, strerror(rc));
            }
        }
    }
    free(v);
    return rc;
}

// ---- HF folder extras ---------------------------------------------------------------------------

// Copies file src to dst. A missing src is fine (returns 0).
static int s_copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    if (!in) {
        return errno == ENOENT ? 0 : errno;
    }
    FILE *out = fopen(dst, "wb");
    if (!out) {
        int e = errno;
        fclose(in);
        return e;
    }
    char buf[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            rc = EIO;
            break;
        }
    }
    if (ferror(in)) {
        rc = EIO;
    }
    fclose(in);
    if (fclose(out) != 0 && !rc) {
        rc = EIO;
    }
    return rc;
}

void rl_checkpoint_dirname(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash) {
        snprintf(out, cap, ".");
    } else if (slash == out) {
        out[1] = '\0';
    } else {
        *slash = '\0';
    }
}

// out = a + "/" + b; returns ENAMETOOLONG when it does not fit.
static int s_join(char *out, size_t cap, const char *a, const char *b) {
    int w = snprintf(out, cap, "%s/%s", a, b);
    return w < 0 || (size_t)w >= cap ? ENAMETOOLONG : 0;
}

int rl_checkpoint_hf_extras(const char *dir, const char *tokenizer, const char *model_dir,
                            char *err, size_t err_len) {
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json", NULL};
    char tokdir[4096], src[4200], dst[4200];
    rl_checkpoint_dirname(tokenizer, tokdir, sizeof(tokdir));
    int rc;
    for (int i = 0; files[i]; i++) {
        if ((rc = s_join(src, sizeof(src), tokdir, files[i])) ||
            (rc = s_join(dst, sizeof(dst), dir, files[i])) || (rc = s_copy_file(src, dst))) {
            return rl_errf(err, err_len, rc, "%s: cannot copy: %s", dst, strerror(rc));
        }
    }
    if ((rc = s_join(src, sizeof(src), model_dir, "generation_config.json")) ||
        (rc = s_join(dst, sizeof(dst), dir, "generation_config.json")) ||
        (rc = s_copy_file(src, dst)) != 0) {
        return rl_errf(err, err_len, rc, "%s: cannot copy: %s", dst, strerror(rc));
    }
    return 0;
}

// rl_checkpoint — checkpoint folders, state.json and the DONE marker. The commit point is the
// rename of step-<N>.tmp (DONE inside) to step-<N>, after every file and folder in it was
// fsynced (llm.c's DONE habit, plus the rename that makes it atomic): a crash or power loss at
// any moment leaves either a complete checkpoint or a step-<N>.tmp that nothing reads. What
// happens to a complete one later (a bit flipped on disk, a file cut short or edited) is found
// by its manifest (rl_manifest, named with its CRC in DONE) and by state.json's rules.
#include "rl_checkpoint.h"

#include "rl_err.h"
#include "rl_manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

// Opens path read-only (fsync needs no write access) and fsyncs it. A folder on a file system
// that cannot sync folders (EINVAL) counts as synced: nothing more can be done there.
static int s_sync_path(const char *path, int is_dir) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | (is_dir ? O_DIRECTORY : O_NOFOLLOW));
    if (fd < 0) {
        return errno;
    }
    int rc = fsync(fd) == 0 ? 0 : errno;
    if (rc == EINVAL && is_dir) {
        rc = 0;
    }
    close(fd);
    return rc;
}

// fsyncs the folder that holds path (its entry for path: a rename or a new name in it).
static int s_sync_parent(const char *path, char *err, size_t err_len) {
    char parent[4200];
    rl_checkpoint_dirname(path, parent, sizeof(parent));
    int rc = s_sync_path(parent, 1);
    return rc ? rl_errf(err, err_len, rc, "%s: fsync: %s", parent, strerror(rc)) : 0;
}

static int s_exists(const char *dir, const char *name) {
    char p[4200];
    int w = snprintf(p, sizeof(p), "%s/%s", dir, name);
    return w > 0 && (size_t)w < sizeof(p) && access(p, F_OK) == 0;
}

// out = a + "/" + b; returns ENAMETOOLONG when it does not fit.
static int s_join(char *out, size_t cap, const char *a, const char *b) {
    int w = snprintf(out, cap, "%s/%s", a, b);
    return w < 0 || (size_t)w >= cap ? ENAMETOOLONG : 0;
}

int rl_checkpoint_sync_tree(const char *path, char *err, size_t err_len) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    int rc = 0;
    if (S_ISREG(st.st_mode)) {
        rc = s_sync_path(path, 0);
        return rc ? rl_errf(err, err_len, rc, "%s: fsync: %s", path, strerror(rc)) : 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        return 0; // a link (not followed) or a special file: no data of ours
    }
    DIR *d = opendir(path);
    if (!d) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    size_t n = strlen(path);
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        size_t k = n + strlen(e->d_name) + 2;
        char *child = malloc(k);
        if (!child) {
            rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
            break;
        }
        snprintf(child, k, "%s/%s", path, e->d_name);
        rc = rl_checkpoint_sync_tree(child, err, err_len);
        free(child);
    }
    closedir(d);
    // the folder after its children: its entries name files whose data is already on disk
    if (!rc && (rc = s_sync_path(path, 1)) != 0) {
        rl_errf(err, err_len, rc, "%s: fsync: %s", path, strerror(rc));
    }
    return rc;
}

// ---- names in checkpoints/ --------------------------------------------------------------------

// Parses "step-<digits>" into *step; 0 when the name is something else ("step-3.tmp" included).
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

// The entry names of folder dir (without "." and ".."), read in full before the caller renames
// or removes any of them. caller owns *names_out (and each name); free with s_names_free.
static int s_names(const char *dir, char ***names_out, size_t *n_out) {
    *names_out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) {
        return errno;
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                rc = ENOMEM;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(e->d_name))) {
            rc = ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    *names_out = v;
    *n_out = n;
    return rc;
}

static void s_names_free(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
}

// Tidies folder dir after a crash. Names "<base>.old-*" are the old copy a replace set aside
// (s_swap): removed when <base> exists, renamed back to <base> when it does not (a crash between
// the two renames: the aside is the last complete copy). With tmp_too, "<base>.tmp" folders
// (writes that never got published) are removed. only_base limits this to one base name; NULL
// means every step-<N>. Returns 0 or an errno with err set.
static int s_tidy(const char *dir, const char *only_base, int tmp_too, char *err,
                  size_t err_len) {
    char **names;
    size_t n;
    int rc = s_names(dir, &names, &n);
    if (rc) {
        s_names_free(names, n);
        return rc == ENOENT ? 0 : rl_errf(err, err_len, rc, "%s: %s", dir, strerror(rc));
    }
    for (size_t i = 0; i < n && !rc; i++) {
        const char *nm = names[i], *old = strstr(nm, ".old-");
        size_t len = strlen(nm), bl;
        if (old) {
            bl = (size_t)(old - nm);
        } else if (tmp_too && len > 4 && strcmp(nm + len - 4, ".tmp") == 0) {
            bl = len - 4;
        } else {
            continue;
        }
        char base[256], path[4200], to[4200];
        int64_t step;
        if (bl >= sizeof(base)) {
            continue;
        }
        memcpy(base, nm, bl);
        base[bl] = '\0';
        if (only_base ? strcmp(base, only_base) != 0 : !s_parse_step(base, &step)) {
            continue;
        }
        if ((rc = s_join(path, sizeof(path), dir, nm)) ||
            (rc = s_join(to, sizeof(to), dir, base))) {
            rl_errf(err, err_len, rc, "%s: path too long", dir);
        } else if (old && access(to, F_OK) != 0) {
            if (rename(path, to) != 0) {
                rc = errno;
                rl_errf(err, err_len, rc, "%s: cannot rename back to %s: %s", path, base,
                        strerror(rc));
            }
        } else if ((rc = rl_checkpoint_rmtree(path)) != 0) {
            rl_errf(err, err_len, rc, "%s: cannot remove: %s", path, strerror(rc));
        }
    }
    s_names_free(names, n);
    return rc;
}

// Replaces dst by folder tmp, both in one folder, so that dst names the old or the new folder in
// whole at every moment but one rename apart: an existing dst is renamed aside to
// <dst>.old-<pid>-<k>, tmp to dst, the folder is fsynced, then the aside (and any older one)
// removed. On a failed rename the aside goes back to dst. Returns 0 or an errno with err set.
static int s_swap(const char *tmp, const char *dst, char *err, size_t err_len) {
    char parent[4200], parent2[4200], aside[4300] = "";
    rl_checkpoint_dirname(tmp, parent, sizeof(parent));
    rl_checkpoint_dirname(dst, parent2, sizeof(parent2));
    if (strcmp(parent, parent2) != 0) {
        return rl_errf(err, err_len, RL_EINVAL, "%s and %s are not in the same folder", tmp,
                       dst);
    }
    struct stat st;
    if (lstat(dst, &st) == 0) {
        for (int k = 0;; k++) {
            int w = snprintf(aside, sizeof(aside), "%s.old-%ld-%d", dst, (long)getpid(), k);
            if (w < 0 || (size_t)w >= sizeof(aside)) {
                return rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", dst);
            }
            if (lstat(aside, &st) != 0 && errno == ENOENT) {
                break;
            }
            if (k == 1000) {
                return rl_errf(err, err_len, EEXIST, "%s: no free name to set it aside", dst);
            }
        }
        if (rename(dst, aside) != 0) {
            int e = errno;
            return rl_errf(err, err_len, e, "%s: cannot set aside: %s", dst, strerror(e));
        }
    } else if (errno != ENOENT) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", dst, strerror(e));
    }
    if (rename(tmp, dst) != 0) {
        int e = errno;
        if (aside[0] && rename(aside, dst) != 0) {
            return rl_errf(err, err_len, e, "%s: cannot rename to %s: %s (the old one is %s)",
                           tmp, dst, strerror(e), aside);
        }
        return rl_errf(err, err_len, e, "%s: cannot rename to %s: %s", tmp, dst, strerror(e));
    }
    int rc = s_sync_parent(dst, err, err_len);
    if (rc) {
        return rc;
    }
    // the new folder is in place: the old copy and leftovers of crashed replaces go (a failure
    // here leaves garbage, not a wrong checkpoint; the next tidy retries)
    const char *base = strrchr(dst, '/');
    base = base ? base + 1 : dst;
    char e2[256];
    s_tidy(parent, base, 0, e2, sizeof(e2));
    return 0;
}

int rl_checkpoint_publish_dir(const char *tmp, const char *dst, char *err, size_t err_len) {
    int rc = rl_checkpoint_sync_tree(tmp, err, err_len);
    return rc ? rc : s_swap(tmp, dst, err, err_len);
}

// ---- state.json's rules -------------------------------------------------------------------------

// The DONE marker of a checkpoint with a manifest: this prefix, its CRC-32C as 8 hex digits, and
// a newline. An older rlctl wrote DONE empty (and no manifest).
#define S_DONE_PREFIX "rlctl-checkpoint " RL_MANIFEST_FILE " crc32c "
static const char *const s_skip_done[] = {"DONE", NULL};

// Counts past 2^53 are no real run's (and not exact as the doubles most JSON readers use).
#define S_MAX_COUNT 9007199254740992LL

// Checks a state against its folder `dir` (when it is named step-<N>, step must be N) and the
// ranges every real run's state is in. where names the state in messages (state.json's path).
// Returns 0 or RL_EPROTO naming the field.
static int s_check_state(const rl_ckpt_state_t *st, const char *dir, const char *where,
                         char *err, size_t err_len) {
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') {
        dl--;
    }
    const char *b = dir + dl;
    while (b > dir && b[-1] != '/') {
        b--;
    }
    char base[64] = "";
    if ((size_t)(dir + dl - b) < sizeof base) {
        memcpy(base, b, (size_t)(dir + dl - b));
        base[dir + dl - b] = '\0';
    }
    int64_t n;
    if (s_parse_step(base, &n) && st->step != n) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: 'step' is %lld, but the folder is %s", where,
                       (long long)st->step, base);
    }
    struct {
        const char *name;
        int64_t v, lo, hi;
    } f[] = {{"step", st->step, 0, S_MAX_COUNT},
             {"policy_version", st->policy_version, 0, st->step},
             {"n_trainable", st->n_trainable, 1, S_MAX_COUNT},
             {"num_tokens", st->num_tokens, 0, S_MAX_COUNT},
             {"model_train_step", st->model_train_step, 0, S_MAX_COUNT},
             {"critic_train_step", st->critic_train_step, 0, S_MAX_COUNT},
             {"data.epoch", st->data_epoch, 0, S_MAX_COUNT},
             {"data.index", st->data_index, 0, S_MAX_COUNT},
             {"rng.has_spare", st->rng.has_spare, 0, 1}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v < f[i].lo || f[i].v > f[i].hi) {
            return rl_errf(err, err_len, RL_EPROTO, "%s: '%s' is %lld, outside %lld..%lld%s",
                           where, f[i].name, (long long)f[i].v, (long long)f[i].lo,
                           (long long)f[i].hi,
                           strcmp(f[i].name, "policy_version") == 0 ? " (0..step)" : "");
        }
    }
    if (strcmp(st->tune, "full") != 0 && strcmp(st->tune, "lora") != 0) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: 'tune' is \"%s\", not \"full\" or \"lora\"",
                       where, st->tune);
    }
    if ((st->rng.s[0] | st->rng.s[1] | st->rng.s[2] | st->rng.s[3]) == 0) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "%s: 'rng.s' is all zero (xoshiro256** never reaches that state)", where);
    }
    if (!isfinite(st->rng.spare)) {
        return rl_errf(err, err_len, RL_EPROTO, "%s: 'rng.spare' is not finite", where);
    }
    for (int i = 0; i < st->n_algo && i < RL_CHECKPOINT_MAX_ALGO; i++) {
        if (!isfinite(st->algo_value[i])) {
            return rl_errf(err, err_len, RL_EPROTO, "%s: 'algo.%s' is not finite", where,
                           st->algo_key[i]);
        }
    }
    return 0;
}

// ---- writing --------------------------------------------------------------------------------

int rl_checkpoint_prepare(const char *run_dir, int64_t step, char *tmp_dir, size_t cap,
                          char *err, size_t err_len) {
    char root[4200];
    int w = snprintf(root, sizeof(root), "%s/checkpoints", run_dir);
    int w2 = snprintf(tmp_dir, cap, "%s/step-%lld.tmp", root, (long long)step);
    if (w < 0 || (size_t)w >= sizeof(root) || w2 < 0 || (size_t)w2 >= cap) {
        return rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", run_dir);
    }
    int rc = rl_checkpoint_mkdirs(root);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot create: %s", root, strerror(rc));
    }
    // checkpoints/ itself must survive a power loss along with what goes into it
    if ((rc = s_sync_parent(root, err, err_len)) || (rc = s_tidy(root, NULL, 1, err, err_len))) {
        return rc;
    }
    if (mkdir(tmp_dir, 0755) != 0) {
        rc = errno;
        return rl_errf(err, err_len, rc, "%s: cannot create: %s", tmp_dir, strerror(rc));
    }
    return 0;
}

int rl_checkpoint_commit(const char *tmp_dir, const rl_ckpt_state_t *st, const rl_optim_t *optim,
                         char *dir_out, size_t cap, char *err, size_t err_len) {
    char path[4400], dst[4200];
    size_t tl = strlen(tmp_dir);
    if (tl <= 4 || strcmp(tmp_dir + tl - 4, ".tmp") != 0 || tl - 4 >= sizeof(dst) ||
        tl - 4 >= cap) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: not a folder from rl_checkpoint_prepare (<name>.tmp), or too long",
                       tmp_dir);
    }
    memcpy(dst, tmp_dir, tl - 4);
    dst[tl - 4] = '\0';
    // a state that rl_checkpoint_read_state would refuse is never written
    int rc = s_check_state(st, dst, "the state to write", err, err_len);
    if (rc) {
        return rc;
    }
    if (optim) {
        snprintf(path, sizeof(path), "%s/optimizer.bin", tmp_dir);
        rc = rl_optim_save(optim, path, err, err_len);
        if (rc) {
            return rc;
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
    if (st->has_critic) {
        json_object_set_new(o, "critic_train_step", json_integer(st->critic_train_step));
    }
    if (st->n_algo > 0) {
        json_t *a = json_object();
        for (int i = 0; a && i < st->n_algo && i < RL_CHECKPOINT_MAX_ALGO; i++) {
            json_object_set_new(a, st->algo_key[i], json_real(st->algo_value[i]));
        }
        json_object_set_new(o, "algo", a);
    }
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
    snprintf(path, sizeof(path), "%s/state.json", tmp_dir);
    size_t len = strlen(text);
    rc = s_write_synced(path, text, len);
    free(text);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot write: %s", path, strerror(rc));
    }
    // every file's size and CRC-32C, read back from what the callers and we wrote; the marker
    // below carries the manifest's own CRC
    uint32_t mcrc = 0;
    if ((rc = rl_manifest_write(tmp_dir, s_skip_done, &mcrc, err, err_len)) != 0) {
        return rc;
    }
    // what the callers wrote without syncing (the weights, from other modules or processes),
    // then every folder, before the marker
    if ((rc = rl_checkpoint_sync_tree(tmp_dir, err, err_len)) != 0) {
        return rc;
    }
    char marker[64];
    int ml = snprintf(marker, sizeof marker, S_DONE_PREFIX "%08x\n", mcrc);
    snprintf(path, sizeof(path), "%s/DONE", tmp_dir);
    rc = s_write_synced(path, marker, (size_t)ml);
    if (!rc) {
        rc = s_sync_path(tmp_dir, 1);
    }
    if (rc) {
        return rl_errf(err, err_len, rc, "%s: cannot write DONE: %s", tmp_dir, strerror(rc));
    }
    // the commit point: one rename gives the folder its name with DONE already inside
    if ((rc = s_swap(tmp_dir, dst, err, err_len)) != 0) {
        return rc;
    }
    snprintf(dir_out, cap, "%s", dst);
    return 0;
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

// RL_ENOTFOUND with err set unless dir is a complete checkpoint (DONE inside, not a .tmp).
static int s_complete(const char *dir, char *err, size_t err_len) {
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') {
        dl--;
    }
    if (dl > 4 && memcmp(dir + dl - 4, ".tmp", 4) == 0) {
        return rl_errf(err, err_len, RL_ENOTFOUND,
                       "%s: incomplete checkpoint (never published as step-<N>: the run "
                       "stopped while writing it)", dir);
    }
    if (!s_exists(dir, "DONE")) {
        return rl_errf(err, err_len, RL_ENOTFOUND,
                       "%s: incomplete checkpoint (no DONE marker: the run stopped while "
                       "writing it)", dir);
    }
    return 0;
}

int rl_checkpoint_verify(const char *dir, int *legacy, char *err, size_t err_len) {
    *legacy = 0;
    int rc = s_complete(dir, err, err_len);
    if (rc) {
        return rc;
    }
    char path[4200], marker[128];
    int w = snprintf(path, sizeof path, "%s/DONE", dir);
    if (w < 0 || (size_t)w >= sizeof path) {
        return rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", dir);
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: %s", path, strerror(e));
    }
    ssize_t n = read(fd, marker, sizeof marker - 1);
    close(fd);
    if (n < 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "%s: cannot read: %s", path, strerror(e));
    }
    marker[n] = '\0';
    if (n == 0 && !s_exists(dir, RL_MANIFEST_FILE)) {
        *legacy = 1; // an rlctl before manifests: nothing to check the files against
        return 0;
    }
    // the marker names the manifest and its CRC: exactly S_DONE_PREFIX, 8 hex digits, "\n"
    const size_t pl = strlen(S_DONE_PREFIX);
    unsigned long crc = 0;
    int has_crc = n > 0;
    if (has_crc) {
        char *end = NULL;
        if ((size_t)n != pl + 9 || strncmp(marker, S_DONE_PREFIX, pl) != 0 ||
            marker[pl + 8] != '\n' || marker[pl] == '-' || marker[pl] == '+' ||
            marker[pl] == ' ' || (crc = strtoul(marker + pl, &end, 16), end != marker + pl + 8)) {
            return rl_errf(err, err_len, RL_EPROTO,
                           "%s: not a marker this rlctl reads (damaged, or written by a newer "
                           "rlctl)", path);
        }
    }
    rc = rl_manifest_verify(dir, s_skip_done, has_crc, (uint32_t)crc, err, err_len);
    if (rc == RL_ENOTFOUND) { // DONE names a manifest that is not there
        rc = rl_errf(err, err_len, RL_EPROTO, "%s/" RL_MANIFEST_FILE ": missing (the DONE "
                     "marker names it)", dir);
    }
    return rc;
}

int rl_checkpoint_read_state(const char *dir, rl_ckpt_state_t *st, char *err, size_t err_len) {
    char path[4200];
    int rc0 = s_complete(dir, err, err_len);
    if (rc0) {
        return rc0;
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
    if (json_object_get(o, "critic_train_step")) {
        st->has_critic = 1;
        if ((rc = s_get_int(o, "critic_train_step", &st->critic_train_step, path, err,
                            err_len))) {
            goto done;
        }
    }
    json_t *algo = json_object_get(o, "algo");
    if (algo) {
        const char *k;
        json_t *v;
        if (!json_is_object(algo) || json_object_size(algo) > RL_CHECKPOINT_MAX_ALGO) {
            rc = rl_errf(err, err_len, RL_EPROTO, "%s: 'algo' must be an object of at most %d "
                         "numbers", path, RL_CHECKPOINT_MAX_ALGO);
            goto done;
        }
        json_object_foreach(algo, k, v) {
            if (!json_is_number(v) || strlen(k) >= sizeof st->algo_key[0]) {
                rc = rl_errf(err, err_len, RL_EPROTO, "%s: algo.%s is not a number", path, k);
                goto done;
            }
            snprintf(st->algo_key[st->n_algo], sizeof st->algo_key[0], "%s", k);
            st->algo_value[st->n_algo++] = json_number_value(v);
        }
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
    if (has_spare < 0 || has_spare > 1) {
        rc = rl_errf(err, err_len, RL_EPROTO, "%s: 'rng.has_spare' is %lld, not 0 or 1", path,
                     (long long)has_spare);
        goto done;
    }
    st->rng.has_spare = (int)has_spare;
    st->rng.spare = json_number_value(spare);
    rc = s_check_state(st, dir, path, err, err_len);
done:
    json_decref(o);
    return rc;
}


// ---- the checkpoints of a run ------------------------------------------------------------------

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
    char **names;
    size_t nn;
    int rc = s_names(root, &names, &nn);
    if (rc) {
        s_names_free(names, nn);
        return rc == ENOENT ? 0 : rc;
    }
    s_ckpt_t *v = nn ? malloc(nn * sizeof(*v)) : NULL;
    if (nn && !v) {
        s_names_free(names, nn);
        return ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < nn; i++) {
        int64_t step;
        char dir[4200];
        if (!s_parse_step(names[i], &step)) {
            continue;
        }
        v[n].step = step;
        v[n].done = s_join(dir, sizeof(dir), root, names[i]) == 0 && s_exists(dir, "DONE");
        n++;
    }
    s_names_free(names, nn);
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

int rl_checkpoint_list(const char *run_dir, int64_t **steps_out, size_t *n_out) {
    *steps_out = NULL;
    *n_out = 0;
    s_ckpt_t *v;
    size_t n;
    int rc = s_list(run_dir, &v, &n);
    if (rc) {
        return rc;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        k += (size_t)v[i].done;
    }
    int64_t *steps = k ? malloc(k * sizeof(*steps)) : NULL;
    if (k && !steps) {
        free(v);
        return ENOMEM;
    }
    k = 0;
    for (size_t i = n; i-- > 0;) {
        if (v[i].done) {
            steps[k++] = v[i].step;
        }
    }
    free(v);
    *steps_out = steps;
    *n_out = k;
    return 0;
}

int rl_checkpoint_abandon_after(const char *run_dir, int64_t step, char *where, size_t cap,
                                int *n_moved, char *err, size_t err_len) {
    *n_moved = 0;
    if (cap) {
        where[0] = '\0';
    }
    s_ckpt_t *v;
    size_t n;
    int rc = s_list(run_dir, &v, &n);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s/checkpoints: %s", run_dir, strerror(rc));
    }
    size_t newer = 0;
    for (size_t i = 0; i < n; i++) {
        newer += v[i].done && v[i].step > step;
    }
    if (newer == 0) {
        free(v);
        return 0;
    }
    // one folder per abandonment, named by the time it happened (unique: -2, -3... if needed)
    char root[4200], dst[4300], from[4400], to[4400];
    int made = 0;
    snprintf(root, sizeof(root), "%s/checkpoints", run_dir);
    long long now = (long long)time(NULL);
    for (int k = 1;; k++) {
        int w = k == 1 ? snprintf(dst, sizeof(dst), "%s/abandoned-%lld", root, now)
                       : snprintf(dst, sizeof(dst), "%s/abandoned-%lld-%d", root, now, k);
        if (w < 0 || (size_t)w >= sizeof(dst) || (size_t)w >= cap) {
            rc = rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", root);
            break;
        }
        if (mkdir(dst, 0755) == 0) {
            made = 1;
            break;
        }
        if (errno != EEXIST || k == 1000) {
            rc = errno;
            rl_errf(err, err_len, rc, "%s: cannot create: %s", dst, strerror(rc));
            break;
        }
    }
    for (size_t i = 0; i < n && !rc; i++) {
        if (!v[i].done || v[i].step <= step) {
            continue;
        }
        snprintf(from, sizeof(from), "%s/step-%lld", root, (long long)v[i].step);
        snprintf(to, sizeof(to), "%s/step-%lld", dst, (long long)v[i].step);
        if (rename(from, to) != 0) {
            rc = errno;
            rl_errf(err, err_len, rc, "%s: cannot move into %s: %s", from, dst, strerror(rc));
            break;
        }
        (*n_moved)++;
    }
    free(v);
    if (*n_moved > 0) {
        snprintf(where, cap, "%s", dst);
    } else if (made) {
        rmdir(dst); // nothing moved: the empty folder goes again
    }
    // both folders' entries changed: a power loss must not bring the moved ones back
    int rc2 = 0;
    if (*n_moved > 0 && (rc2 = s_sync_path(dst, 1)) == 0) {
        rc2 = s_sync_path(root, 1);
    }
    if (!rc && rc2) {
        rc = rl_errf(err, err_len, rc2, "%s: fsync: %s", root, strerror(rc2));
    }
    return rc;
}

int rl_checkpoint_prune(const char *run_dir, int keep, char *err, size_t err_len) {
    char root[4200];
    snprintf(root, sizeof(root), "%s/checkpoints", run_dir);
    // one run folder has one writer (rl_rundir's lock) and it is here, not writing: every
    // step-<N>.tmp is a leftover
    int rc = s_tidy(root, NULL, 1, err, err_len);
    if (rc) {
        return rc;
    }
    s_ckpt_t *v;
    size_t n;
    rc = s_list(run_dir, &v, &n);
    if (rc) {
        return rl_errf(err, err_len, rc, "%s/checkpoints: %s", run_dir, strerror(rc));
    }
    int kept = 0;
    for (size_t i = n; i-- > 0 && !rc;) {
        // a step-<N> without DONE is no checkpoint: an older rlctl's interrupted write (this
        // one writes into step-<N>.tmp and renames)
        int remove_it = !v[i].done || kept >= keep;
        kept += v[i].done;
        if (remove_it) {
            char dir[4300];
            snprintf(dir, sizeof(dir), "%s/step-%lld", root, (long long)v[i].step);
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

// rl_rundir — run folder refusal, --force clean-up, the lock file, and the ownership rules
// (the folder and every folder above it checked with fstat on descriptors opened one level
// at a time, so what is checked is what is used).
#define _XOPEN_SOURCE 700 // realpath

#include "rl_rundir.h"

#include "rl_checkpoint.h"
#include "rl_err.h"
#include "rl_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rl_rundir {
    char *path; // the real path
    int dir_fd; // the run folder, O_DIRECTORY|O_CLOEXEC
    int lock_fd;
};

static const char *const s_markers[] = {"recipe.yaml", "metrics.jsonl", "checkpoints", "final",
                                        NULL};

// What a run writes at the top of its folder: none may be a link; the last four are folders.
static const char *const s_entries[] = {"recipe.yaml",      "metrics.jsonl", "metrics.jsonl.tmp",
                                        "logs",             "checkpoints",   "final",
                                        "trajectories.lmdb", NULL};
enum { S_FIRST_FOLDER = 3 };

// Written before a new run writes anything, removed once it has trained a step: a folder that
// still holds it, and no checkpoint or final/, holds only a start that failed.
#define S_UNSTARTED ".unstarted"

static int s_has(const char *dir, const char *name) {
    char p[4200];
    int w = snprintf(p, sizeof(p), "%s/%s", dir, name);
    return w > 0 && (size_t)w < sizeof(p) && access(p, F_OK) == 0;
}

int rl_rundir_holds_run(const char *dir) {
    for (int i = 0; s_markers[i]; i++) {
        if (s_has(dir, s_markers[i])) {
            return 1;
        }
    }
    return 0;
}

// Removes what a run writes; leaves anything else (and the lock file) alone.
static int s_clean(const char *dir, char *err, size_t err_len) {
    DIR *d = opendir(dir);
    if (!d) {
        return rl_errf(err, err_len, errno, "%s: %s", dir, strerror(errno));
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) && !rc) {
        const char *n = e->d_name;
        // final.tmp and final.old-*: what an interrupted publish of final/ leaves
        int ours = strncmp(n, "events.out.tfevents.", 20) == 0 ||
                   strcmp(n, "trajectories.lmdb") == 0 || strcmp(n, "metrics.jsonl.tmp") == 0 ||
                   strcmp(n, "logs") == 0 || strcmp(n, "final.tmp") == 0 ||
                   strncmp(n, "final.old-", 10) == 0 || strcmp(n, S_UNSTARTED) == 0;
        for (int i = 0; s_markers[i] && !ours; i++) {
            ours = strcmp(n, s_markers[i]) == 0;
        }
        if (!ours) {
            continue;
        }
        char p[4200];
        int w = snprintf(p, sizeof(p), "%s/%s", dir, n);
        if (w < 0 || (size_t)w >= sizeof(p)) {
            rc = rl_errf(err, err_len, ENAMETOOLONG, "%s: path too long", dir);
            break;
        }
        rc = rl_checkpoint_rmtree(p); // lstat-based: a link is removed, never followed
        if (rc) {
            rl_errf(err, err_len, rc, "%s: cannot remove: %s", p, strerror(rc));
        }
    }
    closedir(d);
    return rc;
}

// ---- ownership and modes ---------------------------------------------------------------------

// 1 when gid is our private group: our effective group, and its entry lists no member but us
// (the user-private-group scheme of Debian and Ubuntu, where umask 002 makes folders g+w).
static int s_private_group(gid_t gid) {
    if (gid != getegid()) {
        return 0;
    }
    char buf[16384], pbuf[4096];
    struct group gr, *g = NULL;
    struct passwd pw, *p = NULL;
    if (getgrgid_r(gid, &gr, buf, sizeof(buf), &g) != 0 || !g) {
        return 0;
    }
    if (getpwuid_r(geteuid(), &pw, pbuf, sizeof(pbuf), &p) != 0 || !p) {
        return 0;
    }
    for (char **m = g->gr_mem; m && *m; m++) {
        if (strcmp(*m, p->pw_name) != 0) {
            return 0;
        }
    }
    return 1;
}

static int s_writable_by_others(const struct stat *st) {
    return (st->st_mode & S_IWOTH) || ((st->st_mode & S_IWGRP) && !s_private_group(st->st_gid));
}

// The rule for the run folder and the folders made for it: a folder, ours, only we write.
static int s_check_own(const char *given, const char *path, const struct stat *st, char *err,
                       size_t err_len) {
    const char *subj = strcmp(given, path) == 0 ? "it" : path;
    if (!S_ISDIR(st->st_mode)) {
        return rl_errf(err, err_len, RL_EINVAL, "%s: %s is not a folder", given, path);
    }
    if (st->st_uid != geteuid()) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: refusing the run folder: %s is owned by uid %u (mode %04o), not by "
                       "you (uid %u); rlctl only uses a run folder that is yours, because its "
                       "workers load the reward plugins its recipe names. Choose another "
                       "run.dir, or remove that folder",
                       given, subj, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
                       (unsigned)geteuid());
    }
    if (s_writable_by_others(st)) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: refusing the run folder: %s has mode %04o, writable by others; "
                       "rlctl only uses a run folder that only you can write, because its "
                       "workers load the reward plugins its recipe names. Run `chmod go-w %s` "
                       "or choose another run.dir",
                       given, subj, (unsigned)(st->st_mode & 07777), path);
    }
    return 0;
}

// The rule for every folder above: ours or root's, and sticky when others may write to it.
static int s_check_above(const char *given, const char *path, const struct stat *st, char *err,
                         size_t err_len) {
    if (st->st_uid != geteuid() && st->st_uid != 0) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: refusing the run folder: %s, a folder on its path, is owned by uid "
                       "%u (mode %04o), not by you (uid %u) or root, so that user could swap "
                       "the run folder. Choose a run.dir under folders that are yours",
                       given, path, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
                       (unsigned)geteuid());
    }
    if (s_writable_by_others(st) && !(st->st_mode & S_ISVTX)) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s: refusing the run folder: %s, a folder on its path, has mode %04o: "
                       "writable by others and not sticky, so they could swap the run folder. "
                       "Run `chmod go-w %s` (or `chmod +t`, as /tmp), or choose another run.dir",
                       given, path, (unsigned)(st->st_mode & 07777), path);
    }
    return 0;
}

// Opens the existing folder `real` (absolute, without links) from / one level at a time with
// O_NOFOLLOW|O_DIRECTORY and checks each folder with fstat: the ones above with s_check_above,
// the last with s_check_own when last_own, else with s_check_above. Returns 0 with *fd_p (a
// descriptor of `real`, close-on-exec), or an error.
static int s_walk(const char *given, const char *real, int last_own, int *fd_p, char *err,
                  size_t err_len) {
    *fd_p = -1;
    size_t n = strlen(real);
    char *cur = malloc(n + 2);
    if (!cur) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0;
    struct stat st;
    strcpy(cur, "/");
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = rl_errf(err, err_len, errno, "/: %s", strerror(errno));
        goto done;
    }
    const char *p = real;
    while (*p == '/') {
        p++;
    }
    if (*p == '\0') { // the run folder is / itself
        rc = last_own ? s_check_own(given, "/", &st, err, err_len)
                      : s_check_above(given, "/", &st, err, err_len);
        goto done;
    }
    if ((rc = s_check_above(given, "/", &st, err, err_len)) != 0) {
        goto done;
    }
    size_t len = 0; // of cur, without the "/" of the root
    while (*p) {
        size_t k = strcspn(p, "/");
        cur[len] = '/';
        memcpy(cur + len + 1, p, k);
        cur[len + 1 + k] = '\0';
        len += 1 + k;
        int next = openat(fd, cur + len - k, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 || fstat(next, &st) != 0) {
            rc = errno == ELOOP ? rl_errf(err, err_len, RL_EINVAL,
                                          "%s: %s changed to a symbolic link while checked",
                                          given, cur)
                                : rl_errf(err, err_len, errno, "%s: %s: %s", given, cur,
                                          strerror(errno));
            if (next >= 0) {
                close(next);
            }
            goto done;
        }
        close(fd);
        fd = next;
        p += k;
        while (*p == '/') {
            p++;
        }
        rc = *p == '\0' && last_own ? s_check_own(given, cur, &st, err, err_len)
                                    : s_check_above(given, cur, &st, err, err_len);
        if (rc) {
            goto done;
        }
    }
done:
    free(cur);
    if (rc) {
        if (fd >= 0) {
            close(fd);
        }
        return rc;
    }
    *fd_p = fd;
    return 0;
}

// Why openat(parent, name, O_NOFOLLOW ...) failed with `e`: a link is a refusal.
static int s_open_failed(int parent, const char *name, const char *shown, int e, char *err,
                         size_t err_len) {
    struct stat st;
    if ((e == ELOOP || e == ENOTDIR || e == EMLINK) &&
        fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "%s is a symbolic link; rlctl does not follow links in a run folder "
                       "(another user could point it anywhere): remove it",
                       shown);
    }
    return rl_errf(err, err_len, e, "%s: cannot open: %s", shown, strerror(e));
}

// Opens folder `name` (one level) under `parent` without following a link, creating it with
// mode 0700 when create, and checks it with s_check_own. `parent_path` for the messages.
static int s_subdir(int parent, const char *parent_path, const char *name, int create,
                    const char *given, int *fd_p, char **path_p, char *err, size_t err_len) {
    *fd_p = -1;
    size_t n = strlen(parent_path) + strlen(name) + 2;
    char *path = malloc(n);
    if (!path) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    snprintf(path, n, "%s%s%s", parent_path,
             parent_path[strlen(parent_path) - 1] == '/' ? "" : "/", name);
    if (create && mkdirat(parent, name, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        rl_errf(err, err_len, e, "%s: cannot create %s: %s", given, path, strerror(e));
        free(path);
        return e;
    }
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    int rc = 0;
    if (fd < 0) {
        rc = s_open_failed(parent, name, path, errno, err, err_len);
    } else if (fstat(fd, &st) != 0) {
        rc = rl_errf(err, err_len, errno, "%s: %s", path, strerror(errno));
    } else {
        rc = s_check_own(given, path, &st, err, err_len);
    }
    if (rc) {
        if (fd >= 0) {
            close(fd);
        }
        free(path);
        return rc;
    }
    *fd_p = fd;
    if (path_p) {
        *path_p = path;
    } else {
        free(path);
    }
    return 0;
}

// Opens (creating when missing, mode 0700) the run folder `dir` under the rules of the header.
// Returns 0 with *fd_p and *real_p (caller owns result; free with free()), or an error.
static int s_open_folder(const char *dir, int *fd_p, char **real_p, char *err, size_t err_len) {
    *fd_p = -1;
    *real_p = NULL;
    size_t n = strlen(dir);
    if (n == 0) {
        return rl_errf(err, err_len, RL_EINVAL, "the run folder's path is empty");
    }
    char *buf = malloc(n + 1);
    if (!buf) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    memcpy(buf, dir, n + 1);
    // the longest existing prefix: buf[0, split) exists, dir + split is to be created
    size_t split = n;
    struct stat st;
    int rc = 0;
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') {
            continue;
        }
        if (buf[i - 1] == '/') {
            continue; // "a//b"
        }
        char c = buf[i];
        buf[i] = '\0';
        int ok = stat(buf, &st) == 0;
        int e = errno;
        buf[i] = c;
        if (!ok) {
            if (e != ENOENT) {
                rc = rl_errf(err, err_len, e, "%s: %s", dir, strerror(e));
                goto done;
            }
            // dir[0, start of this component) exists
            split = i;
            while (split > 0 && buf[split - 1] != '/') {
                split--;
            }
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: %.*s is not a folder", dir, (int)i, buf);
            goto done;
        }
    }
    // the existing part: its real path, walked and checked from /
    const char *rest = dir + split;
    if (split == 0) {
        strcpy(buf, dir[0] == '/' ? "/" : ".");
    } else {
        buf[split] = '\0';
    }
    char *real = realpath(buf, NULL);
    if (!real) {
        rc = rl_errf(err, err_len, errno, "%s: %s: %s", dir, buf, strerror(errno));
        goto done;
    }
    int fd = -1;
    rc = s_walk(dir, real, *rest == '\0', &fd, err, err_len);
    // the rest, one folder at a time: mkdir 0700, opened without following, checked
    while (!rc && *rest) {
        while (*rest == '/') {
            rest++;
        }
        size_t k = strcspn(rest, "/");
        if (k == 0) {
            break;
        }
        char name[256];
        if (k >= sizeof(name)) {
            rc = rl_errf(err, err_len, ENAMETOOLONG, "%s: a name is too long", dir);
            break;
        }
        memcpy(name, rest, k);
        name[k] = '\0';
        rest += k;
        if (strcmp(name, ".") == 0) {
            continue;
        }
        if (strcmp(name, "..") == 0) {
            rc = rl_errf(err, err_len, RL_EINVAL, "%s: cannot create: '..' after a folder "
                         "that does not exist", dir);
            break;
        }
        int next = -1;
        char *next_path = NULL;
        rc = s_subdir(fd, real, name, 1, dir, &next, &next_path, err, err_len);
        if (!rc) {
            close(fd);
            fd = next;
            free(real);
            real = next_path;
        }
    }
    if (rc) {
        if (fd >= 0) {
            close(fd);
        }
        free(real);
        goto done;
    }
    *fd_p = fd;
    *real_p = real;
done:
    free(buf);
    return rc;
}

// The entries a run writes: no links, ours, folders where folders are expected.
static int s_check_entries(const rl_rundir_t *self, char *err, size_t err_len) {
    for (int i = 0; s_entries[i]; i++) {
        struct stat st;
        if (fstatat(self->dir_fd, s_entries[i], &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) {
                continue;
            }
            return rl_errf(err, err_len, errno, "%s/%s: %s", self->path, s_entries[i],
                           strerror(errno));
        }
        if (S_ISLNK(st.st_mode)) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s/%s is a symbolic link; rlctl does not follow links in a run "
                           "folder (another user could point it anywhere): remove it",
                           self->path, s_entries[i]);
        }
        int want_dir = i >= S_FIRST_FOLDER;
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
            return rl_errf(err, err_len, RL_EINVAL, "%s/%s is not a %s", self->path,
                           s_entries[i], want_dir ? "folder" : "regular file");
        }
        if (st.st_uid != geteuid()) {
            return rl_errf(err, err_len, RL_EINVAL,
                           "%s/%s is owned by uid %u, not by you (uid %u); rlctl only uses "
                           "what is yours in a run folder: remove it",
                           self->path, s_entries[i], (unsigned)st.st_uid,
                           (unsigned)geteuid());
        }
    }
    return 0;
}

// ---- the handle ------------------------------------------------------------------------------

rl_rundir_t *rl_rundir_open(const char *dir, rl_rundir_mode_t mode, int *code_p, char *err,
                            size_t err_len) {
    int code = 0;
    rl_rundir_t *self = calloc(1, sizeof(*self));
    if (!self) {
        code = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto out;
    }
    self->dir_fd = -1;
    self->lock_fd = -1;
    int rc = s_open_folder(dir, &self->dir_fd, &self->path, err, err_len);
    if (rc) {
        code = rc;
        goto fail;
    }
    self->lock_fd = openat(self->dir_fd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                           0644);
    if (self->lock_fd < 0) {
        char shown[4200];
        snprintf(shown, sizeof(shown), "%s/.lock", self->path);
        code = s_open_failed(self->dir_fd, ".lock", shown, errno, err, err_len);
        goto fail;
    }
    struct stat st;
    if (fstat(self->lock_fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        code = rl_errf(err, err_len, RL_EINVAL,
                       "%s/.lock is not a regular file of yours (uid %u): remove it",
                       self->path, (unsigned)geteuid());
        goto fail;
    }
    struct flock fl = {0};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(self->lock_fd, F_SETLK, &fl) != 0) {
        char pid[32] = "";
        ssize_t r = pread(self->lock_fd, pid, sizeof(pid) - 1, 0);
        pid[r > 0 ? r : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        code = rl_errf(err, err_len, RL_EINVAL, "%s is in use by another rlctl (pid %s)", dir,
                       pid[0] ? pid : "unknown");
        goto fail;
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(self->lock_fd, 0) != 0 || pwrite(self->lock_fd, pid, (size_t)n, 0) != n) {
        code = rl_errf(err, err_len, RL_EIO, "%s/.lock: cannot write", self->path);
        goto fail;
    }
    // a start that failed before its first step (nothing trained, no checkpoint) does not
    // block the retry: what it wrote is removed as --force would
    int failed_start = mode == RL_RUNDIR_NEW && s_has(self->path, S_UNSTARTED) &&
                       !s_has(self->path, "checkpoints") && !s_has(self->path, "final");
    if (failed_start && rl_rundir_holds_run(self->path)) {
        rl_log_info("%s: the run started there stopped before its first step (nothing trained, "
                    "no checkpoint): starting over in it",
                    dir);
    }
    if (mode == RL_RUNDIR_FORCE || failed_start) {
        rc = s_clean(self->path, err, err_len);
        if (rc) {
            code = rc;
            goto fail;
        }
    }
    if ((rc = s_check_entries(self, err, err_len)) != 0) {
        code = rc;
        goto fail;
    }
    if (mode == RL_RUNDIR_NEW && rl_rundir_holds_run(self->path)) {
        char found[256] = "";
        for (int i = 0; s_markers[i]; i++) {
            if (s_has(self->path, s_markers[i])) {
                size_t k = strlen(found);
                snprintf(found + k, sizeof(found) - k, "%s%s%s", k ? ", " : "", s_markers[i],
                         i >= 2 ? "/" : "");
            }
        }
        code = rl_errf(err, err_len, RL_EINVAL,
                       "%s already holds a run (%s); use --resume to continue it or --force "
                       "to start over", dir, found);
        goto fail;
    }
    goto out;
fail:
    rl_rundir_destroy(&self);
out:
    if (code_p) {
        *code_p = code;
    }
    return self;
}

void rl_rundir_destroy(rl_rundir_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    rl_rundir_t *self = *self_p;
    if (self->lock_fd >= 0) {
        close(self->lock_fd); // releases the record lock
    }
    if (self->dir_fd >= 0) {
        close(self->dir_fd);
    }
    free(self->path);
    free(self);
    *self_p = NULL;
}

const char *rl_rundir_path(const rl_rundir_t *self) { return self->path; }

int rl_rundir_mark_unstarted(rl_rundir_t *self, char *err, size_t err_len) {
    return rl_rundir_write_file(self, S_UNSTARTED, "", 0, err, err_len);
}

void rl_rundir_mark_started(const char *dir) {
    char p[4200];
    int w = snprintf(p, sizeof p, "%s/" S_UNSTARTED, dir);
    if (w > 0 && (size_t)w < sizeof p && unlink(p) != 0 && errno != ENOENT) {
        rl_log_warn("%s: cannot remove: %s (a retry with the same run.dir would start over "
                    "in this run's folder)",
                    p, strerror(errno));
    }
}

int rl_rundir_mkdir(rl_rundir_t *self, const char *name, char *err, size_t err_len) {
    RL_ASSERT(name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, ".."));
    int fd = -1;
    int rc = s_subdir(self->dir_fd, self->path, name, 1, self->path, &fd, NULL, err, err_len);
    if (fd >= 0) {
        close(fd);
    }
    return rc;
}

// Opens `name` ("file" or "folder/file") in the run folder with `flags` plus
// O_NOFOLLOW|O_CLOEXEC, the folder checked as the run folder. ENOENT without a message.
static int s_open_in(rl_rundir_t *self, const char *name, int flags, int *fd_p, char *err,
                     size_t err_len) {
    RL_ASSERT(name[0] && name[0] != '/' && !strstr(name, ".."));
    *fd_p = -1;
    const char *slash = strchr(name, '/');
    RL_ASSERT(!slash || !strchr(slash + 1, '/'));
    int parent = self->dir_fd, own = -1, rc = 0;
    char *parent_path = NULL;
    if (slash) {
        char folder[256];
        size_t k = (size_t)(slash - name);
        RL_ASSERT(k < sizeof(folder));
        memcpy(folder, name, k);
        folder[k] = '\0';
        struct stat st;
        if (fstatat(self->dir_fd, folder, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
            return ENOENT;
        }
        rc = s_subdir(self->dir_fd, self->path, folder, 0, self->path, &own, &parent_path, err,
                      err_len);
        if (rc) {
            return rc;
        }
        parent = own;
        name = slash + 1;
    }
    char shown[4400];
    snprintf(shown, sizeof(shown), "%s/%s", parent_path ? parent_path : self->path, name);
    int fd = openat(parent, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    struct stat st;
    if (fd < 0) {
        rc = errno == ENOENT && !(flags & O_CREAT)
                 ? ENOENT
                 : s_open_failed(parent, name, shown, errno, err, err_len);
    } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = rl_errf(err, err_len, RL_EINVAL, "%s is not a regular file", shown);
        close(fd);
        fd = -1;
    }
    if (own >= 0) {
        close(own);
    }
    free(parent_path);
    *fd_p = fd;
    return rc;
}

int rl_rundir_write_file(rl_rundir_t *self, const char *name, const void *data, size_t n,
                         char *err, size_t err_len) {
    int fd;
    int rc = s_open_in(self, name, O_WRONLY | O_CREAT | O_TRUNC, &fd, err, err_len);
    if (rc == ENOENT) {
        return rl_errf(err, err_len, ENOENT, "%s/%s: cannot create: %s", self->path, name,
                       strerror(ENOENT));
    }
    if (rc) {
        return rc;
    }
    const char *p = data;
    size_t off = 0;
    while (off < n && !rc) {
        ssize_t w = write(fd, p + off, n - off);
        if (w < 0 && errno != EINTR && errno != EAGAIN) {
            rc = rl_errf(err, err_len, errno, "%s/%s: cannot write: %s", self->path, name,
                         strerror(errno));
        }
        off += w > 0 ? (size_t)w : 0;
    }
    if (close(fd) != 0 && !rc) {
        rc = rl_errf(err, err_len, errno, "%s/%s: cannot write: %s", self->path, name,
                     strerror(errno));
    }
    return rc;
}

int rl_rundir_read_file(rl_rundir_t *self, const char *name, char **data_p, size_t *n_p,
                        char *err, size_t err_len) {
    *data_p = NULL;
    int fd;
    int rc = s_open_in(self, name, O_RDONLY, &fd, err, err_len);
    if (rc) {
        return rc;
    }
    size_t n = 0, cap = 4096;
    char *s = malloc(cap + 1);
    while (s) {
        ssize_t r = read(fd, s + n, cap - n);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (r < 0) {
            rc = rl_errf(err, err_len, errno, "%s/%s: cannot read: %s", self->path, name,
                         strerror(errno));
            break;
        }
        if (r == 0) {
            break;
        }
        n += (size_t)r;
        if (n == cap) {
            char *t = cap < ((size_t)1 << 30) ? realloc(s, 2 * cap + 1) : NULL;
            if (!t) {
                free(s);
                s = NULL;
                break;
            }
            s = t;
            cap *= 2;
        }
    }
    close(fd);
    if (!s && !rc) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "%s/%s: out of memory", self->path, name);
    }
    if (rc) {
        free(s);
        return rc;
    }
    s[n] = '\0';
    *data_p = s;
    if (n_p) {
        *n_p = n;
    }
    return 0;
}

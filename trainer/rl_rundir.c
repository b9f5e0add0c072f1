// rl_rundir — run folder refusal, --force clean-up and the lock file.
#include "rl_rundir.h"

#include "rl_checkpoint.h"
#include "rl_err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rl_rundir {
    char *path;
    int lock_fd;
};

static const char *const s_markers[] = {"recipe.yaml", "metrics.jsonl", "checkpoints", "final",
                                        NULL};

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
        int ours = strncmp(n, "events.out.tfevents.", 20) == 0 ||
                   strcmp(n, "trajectories.lmdb") == 0 || strcmp(n, "metrics.jsonl.tmp") == 0 ||
                   strcmp(n, "logs") == 0;
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
        rc = rl_checkpoint_rmtree(p);
        if (rc) {
            rl_errf(err, err_len, rc, "%s: cannot remove: %s", p, strerror(rc));
        }
    }
    closedir(d);
    return rc;
}

rl_rundir_t *rl_rundir_open(const char *dir, rl_rundir_mode_t mode, int *code_p, char *err,
                            size_t err_len) {
    int code = 0;
    rl_rundir_t *self = calloc(1, sizeof(*self));
    if (!self || !(self->path = strdup(dir))) {
        free(self);
        self = NULL;
        code = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
        goto out;
    }
    self->lock_fd = -1;
    int rc = rl_checkpoint_mkdirs(dir);
    if (rc) {
        code = rl_errf(err, err_len, rc, "%s: cannot create the run folder: %s", dir,
                       strerror(rc));
        goto fail;
    }
    char lock[4200];
    snprintf(lock, sizeof(lock), "%s/.lock", dir);
    self->lock_fd = open(lock, O_RDWR | O_CREAT, 0644);
    if (self->lock_fd < 0) {
        code = rl_errf(err, err_len, errno, "%s: cannot open: %s", lock, strerror(errno));
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
        code = rl_errf(err, err_len, RL_EIO, "%s: cannot write", lock);
        goto fail;
    }
    if (mode == RL_RUNDIR_NEW && rl_rundir_holds_run(dir)) {
        char found[256] = "";
        for (int i = 0; s_markers[i]; i++) {
            if (s_has(dir, s_markers[i])) {
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
    if (mode == RL_RUNDIR_FORCE) {
        rc = s_clean(dir, err, err_len);
        if (rc) {
            code = rc;
            goto fail;
        }
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
    free(self->path);
    free(self);
    *self_p = NULL;
}

const char *rl_rundir_path(const rl_rundir_t *self) { return self->path; }

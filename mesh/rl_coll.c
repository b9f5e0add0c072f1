// rl_coll — the collectives' two backends (see rl_coll.h). The MPI backend lives in its own
// shared module (rl_coll_module.h), loaded here with dlopen only for a mesh larger than 1×1.
#include "rl_coll.h"

#include "rl_coll_module.h"
#include "rl_err.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RL_COLL_MODULE_DIR
#define RL_COLL_MODULE_DIR "" // where the build puts the module (CMake sets it)
#endif

struct rl_coll {
    rl_mesh_t mesh;
    int rank;
    const rl_coll_module_t *mpi; // NULL: the single-process backend
    void *state;                 // the module's (the module stays loaded until exit)
};

int rl_coll_single(rl_coll_t **out, char *err, size_t err_len) {
    rl_coll_t *c = calloc(1, sizeof *c);
    if (!c) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c->mesh = (rl_mesh_t){1, 1};
    *out = c;
    return 0;
}

// Opens the MPI module: beside the running binary (rlctl), else where the build put it. Returns
// the handle or NULL with why in msg.
static void *s_open_module(char *msg, size_t msg_len) {
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *dirs[2] = {NULL, RL_COLL_MODULE_DIR};
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            dirs[0] = exe;
        }
    }
    msg[0] = '\0';
    for (int i = 0; i < 2; i++) {
        if (!dirs[i] || !dirs[i][0]) {
            continue;
        }
        snprintf(path, sizeof path, "%s/" RL_COLL_MODULE_FILE, dirs[i]);
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (dl) {
            return dl;
        }
        const char *e = dlerror();
        size_t l = strlen(msg);
        if (l + 8 < msg_len) { // dlerror names the path
            snprintf(msg + l, msg_len - l, "%s%.900s", l ? "; " : "", e ? e : "dlopen failed");
        }
    }
    return NULL;
}

int rl_coll_mpi(const rl_mesh_t *mesh, int *argc, char ***argv, rl_coll_t **out, char *err,
                size_t err_len) {
    *out = NULL;
    int rc = rl_mesh_check(mesh, err, err_len);
    if (rc) {
        return rc;
    }
    char msg[1024];
    void *dl = s_open_module(msg, sizeof msg);
    if (!dl) {
        return rl_errf(err, err_len, RL_ENOTFOUND,
                       "a mesh of dp %d x fsdp %d needs the MPI module " RL_COLL_MODULE_FILE
                       " (built beside rlctl with Open MPI): %s",
                       mesh->dp, mesh->fsdp, msg);
    }
    rl_coll_module_fn fn = NULL;
    *(void **)&fn = dlsym(dl, RL_COLL_MODULE_SYMBOL);
    const rl_coll_module_t *m = fn ? fn() : NULL;
    if (!m || m->abi != RL_COLL_MODULE_ABI) {
        dlclose(dl);
        return rl_errf(err, err_len, RL_EINVAL,
                       RL_COLL_MODULE_FILE " is not this rlctl's MPI module (ABI %d, want %d)",
                       m ? m->abi : -1, RL_COLL_MODULE_ABI);
    }
    rl_coll_t *c = calloc(1, sizeof *c);
    if (!c) {
        dlclose(dl);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c->mesh = *mesh;
    c->mpi = m;
    if (m->init(mesh, argc, argv, &c->state, &c->rank, msg, sizeof msg) != 0) {
        dlclose(dl);
        free(c);
        return rl_errf(err, err_len, RL_EIO, "%s", msg);
    }
    *out = c;
    return 0;
}

void rl_coll_destroy(rl_coll_t **self_p) {
    rl_coll_t *c = *self_p;
    if (!c) {
        return;
    }
    if (c->mpi) {
        c->mpi->fini(c->state);
        // the module stays loaded: MPI's own libraries keep threads and handlers until exit
    }
    free(c);
    *self_p = NULL;
}

const rl_mesh_t *rl_coll_mesh(const rl_coll_t *self) {
    return &self->mesh;
}
int rl_coll_rank(const rl_coll_t *self) {
    return self->rank;
}

int rl_coll_group_size(const rl_coll_t *self, rl_mesh_axis_t axis) {
    return axis == RL_MESH_WORLD ? rl_mesh_size(&self->mesh)
           : axis == RL_MESH_DP  ? self->mesh.dp
                                 : self->mesh.fsdp;
}

int rl_coll_group_index(const rl_coll_t *self, rl_mesh_axis_t axis) {
    return axis == RL_MESH_WORLD ? self->rank
           : axis == RL_MESH_DP  ? rl_mesh_dp_rank(&self->mesh, self->rank)
                                 : rl_mesh_fsdp_rank(&self->mesh, self->rank);
}

// 1 when the collective has nothing to do beyond copying: a group of one.
static int s_alone(const rl_coll_t *c, rl_mesh_axis_t axis) {
    return !c->mpi || rl_coll_group_size(c, axis) == 1;
}

static int s_done(int r, const char *msg, char *err, size_t err_len) {
    return r == 0 ? 0 : rl_errf(err, err_len, RL_EIO, "%s", msg);
}

// In-place sum over the group of n floats (f64 = 0) or doubles.
static int s_all_reduce(rl_coll_t *self, rl_mesh_axis_t axis, void *buf, size_t n, int f64,
                        char *err, size_t err_len) {
    char msg[512];
    if (s_alone(self, axis) || n == 0) {
        return 0;
    }
    return s_done(self->mpi->all_reduce(self->state, axis, buf, n, f64, msg, sizeof msg), msg, err,
                  err_len);
}

int rl_coll_all_reduce(rl_coll_t *self, rl_mesh_axis_t axis, float *buf, size_t n, char *err,
                       size_t err_len) {
    return s_all_reduce(self, axis, buf, n, 0, err, err_len);
}

int rl_coll_all_reduce_f64(rl_coll_t *self, rl_mesh_axis_t axis, double *buf, size_t n, char *err,
                           size_t err_len) {
    return s_all_reduce(self, axis, buf, n, 1, err, err_len);
}

int rl_coll_reduce_scatter(rl_coll_t *self, rl_mesh_axis_t axis, const float *in, float *out,
                           const size_t *counts, char *err, size_t err_len) {
    char msg[512];
    if (s_alone(self, axis)) {
        memcpy(out, in, counts[0] * sizeof *out);
        return 0;
    }
    return s_done(self->mpi->reduce_scatter(self->state, axis, in, out, counts,
                                            rl_coll_group_size(self, axis), msg, sizeof msg),
                  msg, err, err_len);
}

int rl_coll_all_gather(rl_coll_t *self, rl_mesh_axis_t axis, const float *in, float *out,
                       const size_t *counts, char *err, size_t err_len) {
    char msg[512];
    if (s_alone(self, axis)) {
        memcpy(out, in, counts[0] * sizeof *out);
        return 0;
    }
    return s_done(self->mpi->all_gather(self->state, axis, in, out, counts,
                                        rl_coll_group_size(self, axis),
                                        rl_coll_group_index(self, axis), msg, sizeof msg),
                  msg, err, err_len);
}

int rl_coll_broadcast(rl_coll_t *self, rl_mesh_axis_t axis, float *buf, size_t n, int root,
                      char *err, size_t err_len) {
    char msg[512];
    if (s_alone(self, axis) || n == 0) {
        return 0;
    }
    return s_done(self->mpi->broadcast(self->state, axis, buf, n, root, msg, sizeof msg), msg, err,
                  err_len);
}

int rl_coll_barrier(rl_coll_t *self, rl_mesh_axis_t axis, char *err, size_t err_len) {
    char msg[512];
    if (s_alone(self, axis)) {
        return 0;
    }
    return s_done(self->mpi->barrier(self->state, axis, msg, sizeof msg), msg, err, err_len);
}

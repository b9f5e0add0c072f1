// rl_coll — the collectives' two backends (see rl_coll.h).
#include "rl_coll.h"

#include "rl_err.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

struct rl_coll {
    rl_mesh_t mesh;
    int rank;
    int mpi;            // 1: the MPI backend
    int we_initialized; // MPI_Init was ours: MPI_Finalize is too
    MPI_Comm comm[3];   // world, dp, fsdp (RL_MESH_* order)
};

static int s_mpi_fail(int code, char *err, size_t err_len, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return rl_errf(err, err_len, RL_EIO, "%s: %.*s", what, len, msg);
}

int rl_coll_single(rl_coll_t **out, char *err, size_t err_len) {
    rl_coll_t *c = calloc(1, sizeof *c);
    if (!c) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c->mesh = (rl_mesh_t){1, 1};
    *out = c;
    return 0;
}

int rl_coll_mpi(const rl_mesh_t *mesh, int *argc, char ***argv, rl_coll_t **out, char *err,
                size_t err_len) {
    *out = NULL;
    int rc = rl_mesh_check(mesh, err, err_len);
    if (rc) {
        return rc;
    }
    rl_coll_t *c = calloc(1, sizeof *c);
    if (!c) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    c->mesh = *mesh;
    c->mpi = 1;
    int inited = 0, provided = 0, size = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int e = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (e != MPI_SUCCESS) {
            free(c);
            return s_mpi_fail(e, err, err_len, "MPI_Init_thread");
        }
        c->we_initialized = 1;
    }
    // errors come back as codes, never abort the job from inside a collective
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != rl_mesh_size(mesh)) {
        rc = rl_errf(err, err_len, RL_EINVAL,
                     "the MPI world has %d ranks; mesh dp %d x fsdp %d "
                     "needs %d",
                     size, mesh->dp, mesh->fsdp, rl_mesh_size(mesh));
        rl_coll_destroy(&c);
        return rc;
    }
    c->comm[RL_MESH_WORLD] = MPI_COMM_WORLD;
    int d = rl_mesh_dp_rank(mesh, c->rank), f = rl_mesh_fsdp_rank(mesh, c->rank);
    // a dp group: the same fsdp_rank, ordered by dp_rank; an fsdp group: the same dp_rank
    int e1 = MPI_Comm_split(MPI_COMM_WORLD, f, d, &c->comm[RL_MESH_DP]);
    int e2 = MPI_Comm_split(MPI_COMM_WORLD, d, f, &c->comm[RL_MESH_FSDP]);
    if (e1 != MPI_SUCCESS || e2 != MPI_SUCCESS) {
        rc = s_mpi_fail(e1 != MPI_SUCCESS ? e1 : e2, err, err_len, "MPI_Comm_split");
        rl_coll_destroy(&c);
        return rc;
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
        for (int a = RL_MESH_DP; a <= RL_MESH_FSDP; a++) {
            if (c->comm[a] != MPI_COMM_NULL && c->comm[a] != 0) {
                MPI_Comm_free(&c->comm[a]);
            }
        }
        int fin = 0;
        MPI_Finalized(&fin);
        if (c->we_initialized && !fin) {
            MPI_Finalize();
        }
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

// In-place sum over the group of n values of MPI type `type`.
static int s_all_reduce(rl_coll_t *self, rl_mesh_axis_t axis, void *buf, size_t n,
                        MPI_Datatype type, char *err, size_t err_len) {
    if (s_alone(self, axis) || n == 0) {
        return 0;
    }
    int e = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, type, MPI_SUM, self->comm[axis]);
    return e == MPI_SUCCESS ? 0 : s_mpi_fail(e, err, err_len, "all-reduce");
}

int rl_coll_all_reduce(rl_coll_t *self, rl_mesh_axis_t axis, float *buf, size_t n, char *err,
                       size_t err_len) {
    return s_all_reduce(self, axis, buf, n, MPI_FLOAT, err, err_len);
}

int rl_coll_all_reduce_f64(rl_coll_t *self, rl_mesh_axis_t axis, double *buf, size_t n, char *err,
                           size_t err_len) {
    return s_all_reduce(self, axis, buf, n, MPI_DOUBLE, err, err_len);
}

int rl_coll_reduce_scatter(rl_coll_t *self, rl_mesh_axis_t axis, const float *in, float *out,
                           const size_t *counts, char *err, size_t err_len) {
    int g = rl_coll_group_size(self, axis);
    if (s_alone(self, axis)) {
        memcpy(out, in, counts[0] * sizeof *out);
        return 0;
    }
    int *rc = malloc((size_t)g * sizeof *rc);
    if (!rc) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    for (int i = 0; i < g; i++) {
        rc[i] = (int)counts[i];
    }
    int e = MPI_Reduce_scatter(in, out, rc, MPI_FLOAT, MPI_SUM, self->comm[axis]);
    free(rc);
    return e == MPI_SUCCESS ? 0 : s_mpi_fail(e, err, err_len, "reduce-scatter");
}

int rl_coll_all_gather(rl_coll_t *self, rl_mesh_axis_t axis, const float *in, float *out,
                       const size_t *counts, char *err, size_t err_len) {
    int g = rl_coll_group_size(self, axis), me = rl_coll_group_index(self, axis);
    if (s_alone(self, axis)) {
        memcpy(out, in, counts[0] * sizeof *out);
        return 0;
    }
    int *rc = malloc((size_t)g * sizeof *rc), *dis = malloc((size_t)g * sizeof *dis);
    if (!rc || !dis) {
        free(rc);
        free(dis);
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int off = 0;
    for (int i = 0; i < g; i++) {
        rc[i] = (int)counts[i];
        dis[i] = off;
        off += rc[i];
    }
    int e = MPI_Allgatherv(in, rc[me], MPI_FLOAT, out, rc, dis, MPI_FLOAT, self->comm[axis]);
    free(rc);
    free(dis);
    return e == MPI_SUCCESS ? 0 : s_mpi_fail(e, err, err_len, "all-gather");
}

int rl_coll_broadcast(rl_coll_t *self, rl_mesh_axis_t axis, float *buf, size_t n, int root,
                      char *err, size_t err_len) {
    if (s_alone(self, axis) || n == 0) {
        return 0;
    }
    int e = MPI_Bcast(buf, (int)n, MPI_FLOAT, root, self->comm[axis]);
    return e == MPI_SUCCESS ? 0 : s_mpi_fail(e, err, err_len, "broadcast");
}

int rl_coll_barrier(rl_coll_t *self, rl_mesh_axis_t axis, char *err, size_t err_len) {
    if (s_alone(self, axis)) {
        return 0;
    }
    int e = MPI_Barrier(self->comm[axis]);
    return e == MPI_SUCCESS ? 0 : s_mpi_fail(e, err, err_len, "barrier");
}

// rl_coll_mpi — the MPI backend of rl_coll, built as its own shared module (librlctl_mpi.so,
// linked to Open MPI) that rl_coll loads only for a mesh larger than 1×1 (rl_coll_module.h).
// One process per rank, started by mpirun; errors come back as codes (MPI_ERRORS_RETURN) with
// MPI's own message.
#include "rl_coll_module.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int we_initialized; // MPI_Init was ours: MPI_Finalize is too
    MPI_Comm comm[3];   // world, dp, fsdp (RL_MESH_* order)
} s_state_t;

static int s_fail(int code, const char *what, char *msg, size_t msg_len) {
    char m[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, m, &len);
    snprintf(msg, msg_len, "%s: %.*s", what, len, m);
    return -1;
}

static void s_fini(void *state) {
    s_state_t *s = state;
    if (!s) {
        return;
    }
    for (int a = RL_MESH_DP; a <= RL_MESH_FSDP; a++) {
        if (s->comm[a] != MPI_COMM_NULL) {
            MPI_Comm_free(&s->comm[a]);
        }
    }
    int fin = 0;
    MPI_Finalized(&fin);
    if (s->we_initialized && !fin) {
        MPI_Finalize();
    }
    free(s);
}

static int s_init(const rl_mesh_t *mesh, int *argc, char ***argv, void **state, int *rank,
                  char *msg, size_t msg_len) {
    *state = NULL;
    s_state_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    s->comm[RL_MESH_DP] = s->comm[RL_MESH_FSDP] = MPI_COMM_NULL;
    int inited = 0, provided = 0, size = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int e = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (e != MPI_SUCCESS) {
            free(s);
            return s_fail(e, "MPI_Init_thread", msg, msg_len);
        }
        s->we_initialized = 1;
    }
    // errors come back as codes, never abort the job from inside a collective
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != rl_mesh_size(mesh)) {
        snprintf(msg, msg_len, "the MPI world has %d ranks; mesh dp %d x fsdp %d needs %d", size,
                 mesh->dp, mesh->fsdp, rl_mesh_size(mesh));
        s_fini(s);
        return -1;
    }
    s->comm[RL_MESH_WORLD] = MPI_COMM_WORLD;
    int d = rl_mesh_dp_rank(mesh, *rank), f = rl_mesh_fsdp_rank(mesh, *rank);
    // a dp group: the same fsdp_rank, ordered by dp_rank; an fsdp group: the same dp_rank
    int e1 = MPI_Comm_split(MPI_COMM_WORLD, f, d, &s->comm[RL_MESH_DP]);
    int e2 = MPI_Comm_split(MPI_COMM_WORLD, d, f, &s->comm[RL_MESH_FSDP]);
    if (e1 != MPI_SUCCESS || e2 != MPI_SUCCESS) {
        s_fail(e1 != MPI_SUCCESS ? e1 : e2, "MPI_Comm_split", msg, msg_len);
        s_fini(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int s_all_reduce(void *state, int axis, void *buf, size_t n, int f64, char *msg,
                        size_t msg_len) {
    s_state_t *s = state;
    int e = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, f64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
                          s->comm[axis]);
    return e == MPI_SUCCESS ? 0 : s_fail(e, "all-reduce", msg, msg_len);
}

static int s_reduce_scatter(void *state, int axis, const float *in, float *out,
                            const size_t *counts, int group, char *msg, size_t msg_len) {
    s_state_t *s = state;
    int *rc = malloc((size_t)group * sizeof *rc);
    if (!rc) {
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    for (int i = 0; i < group; i++) {
        rc[i] = (int)counts[i];
    }
    int e = MPI_Reduce_scatter(in, out, rc, MPI_FLOAT, MPI_SUM, s->comm[axis]);
    free(rc);
    return e == MPI_SUCCESS ? 0 : s_fail(e, "reduce-scatter", msg, msg_len);
}

static int s_all_gather(void *state, int axis, const float *in, float *out, const size_t *counts,
                        int group, int index, char *msg, size_t msg_len) {
    s_state_t *s = state;
    int *rc = malloc((size_t)group * sizeof *rc), *dis = malloc((size_t)group * sizeof *dis);
    if (!rc || !dis) {
        free(rc);
        free(dis);
        snprintf(msg, msg_len, "out of memory");
        return -1;
    }
    int off = 0;
    for (int i = 0; i < group; i++) {
        rc[i] = (int)counts[i];
        dis[i] = off;
        off += rc[i];
    }
    int e = MPI_Allgatherv(in, rc[index], MPI_FLOAT, out, rc, dis, MPI_FLOAT, s->comm[axis]);
    free(rc);
    free(dis);
    return e == MPI_SUCCESS ? 0 : s_fail(e, "all-gather", msg, msg_len);
}

static int s_broadcast(void *state, int axis, float *buf, size_t n, int root, char *msg,
                       size_t msg_len) {
    s_state_t *s = state;
    int e = MPI_Bcast(buf, (int)n, MPI_FLOAT, root, s->comm[axis]);
    return e == MPI_SUCCESS ? 0 : s_fail(e, "broadcast", msg, msg_len);
}

static int s_barrier(void *state, int axis, char *msg, size_t msg_len) {
    s_state_t *s = state;
    int e = MPI_Barrier(s->comm[axis]);
    return e == MPI_SUCCESS ? 0 : s_fail(e, "barrier", msg, msg_len);
}

static const rl_coll_module_t s_module = {RL_COLL_MODULE_ABI, s_init,           s_fini,
                                          s_all_reduce,       s_reduce_scatter, s_all_gather,
                                          s_broadcast,        s_barrier};

// The module's one export (RL_COLL_MODULE_SYMBOL); the build hides every other symbol.
__attribute__((visibility("default"))) const rl_coll_module_t *rl_coll_mpi_module(void);
const rl_coll_module_t *rl_coll_mpi_module(void) {
    return &s_module;
}

// rl_coll_module — the table the MPI backend of rl_coll exports from its own shared module,
// librlctl_mpi.so (mesh/mpi/rl_coll_mpi.c, linked to Open MPI). rl_coll loads it with dlopen only
// when a mesh larger than 1×1 starts, so a 1×1 run never loads MPI (DESIGN.md §2). Internal to
// mesh/: nothing else includes this.
#ifndef RL_COLL_MODULE_H
#define RL_COLL_MODULE_H

#include "rl_mesh.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_COLL_MODULE_ABI 1
#define RL_COLL_MODULE_FILE "librlctl_mpi.so"
#define RL_COLL_MODULE_SYMBOL "rl_coll_mpi_module"

// Every function returns 0 or -1 with msg (msg_len bytes) filled; axis is an rl_mesh_axis_t.
typedef struct {
    int abi; // RL_COLL_MODULE_ABI
    // Initializes MPI when nobody has (MPI_THREAD_FUNNELED), checks the world's size against the
    // mesh, splits the dp and fsdp groups; *state is the module's, *rank this process's.
    int (*init)(const rl_mesh_t *mesh, int *argc, char ***argv, void **state, int *rank, char *msg,
                size_t msg_len);
    void (*fini)(void *state); // frees the groups; finalizes MPI when init initialized it
    // in-place sums: float (f64 = 0) or double
    int (*all_reduce)(void *state, int axis, void *buf, size_t n, int f64, char *msg,
                      size_t msg_len);
    int (*reduce_scatter)(void *state, int axis, const float *in, float *out, const size_t *counts,
                          int group, char *msg, size_t msg_len);
    int (*all_gather)(void *state, int axis, const float *in, float *out, const size_t *counts,
                      int group, int index, char *msg, size_t msg_len);
    int (*broadcast)(void *state, int axis, float *buf, size_t n, int root, char *msg,
                     size_t msg_len);
    int (*barrier)(void *state, int axis, char *msg, size_t msg_len);
} rl_coll_module_t;

// The module's one export (RL_COLL_MODULE_SYMBOL).
typedef const rl_coll_module_t *(*rl_coll_module_fn)(void);

#ifdef __cplusplus
}
#endif
#endif

// rl_coll — collectives over the mesh's groups (DESIGN.md §2, "Collectives"): all-reduce,
// reduce-scatter, all-gather, broadcast and barrier of float buffers, within the world, a dp
// group (the ranks holding one shard) or an fsdp group (the ranks of one replica). Two backends:
// single-process (a 1×1 mesh: every collective is a copy or nothing; no MPI at run time) and MPI
// (Open MPI or MPICH, one process per rank, started by mpirun; MPI_Init only there). Sums are
// float sums in the backend's order: equal to a 1×1 run's up to rounding (stated tolerances).
#ifndef RL_COLL_H
#define RL_COLL_H

#include "rl_mesh.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_coll rl_coll_t;

// The single-process backend of a 1×1 mesh. caller owns *out; free with rl_coll_destroy.
int rl_coll_single(rl_coll_t **out, char *err, size_t err_len);
// The MPI backend of `mesh`, from the module librlctl_mpi.so (rl_coll_module.h: beside the
// running binary, else where the build put it; RL_ENOTFOUND saying so when neither has it; a
// 1×1 run never loads it, nor MPI): initializes MPI when nobody has (MPI_THREAD_FUNNELED: only the
// calling thread communicates) and checks that the world has dp·fsdp ranks; this process is world
// rank r = (dp_rank, fsdp_rank) of rl_mesh.h. caller owns *out; free with rl_coll_destroy (which
// finalizes MPI when it initialized it). Returns 0 or an error.
int rl_coll_mpi(const rl_mesh_t *mesh, int *argc, char ***argv, rl_coll_t **out, char *err,
                size_t err_len);
void rl_coll_destroy(rl_coll_t **self_p);

const rl_mesh_t *rl_coll_mesh(const rl_coll_t *self);
int rl_coll_rank(const rl_coll_t *self); // this process's world rank
// The size of this rank's group along axis, and this rank's index in it.
int rl_coll_group_size(const rl_coll_t *self, rl_mesh_axis_t axis);
int rl_coll_group_index(const rl_coll_t *self, rl_mesh_axis_t axis);

// In place: buf[0..n) = the sum over the group of every member's buf.
int rl_coll_all_reduce(rl_coll_t *self, rl_mesh_axis_t axis, float *buf, size_t n, char *err,
                       size_t err_len);
// The same for doubles (token counts, metrics).
int rl_coll_all_reduce_f64(rl_coll_t *self, rl_mesh_axis_t axis, double *buf, size_t n, char *err,
                           size_t err_len);
// in: the group's blocks laid end to end, member i's of counts[i] floats; out (counts[index]
// floats) = this member's block summed over the group. counts: one per group member.
int rl_coll_reduce_scatter(rl_coll_t *self, rl_mesh_axis_t axis, const float *in, float *out,
                           const size_t *counts, char *err, size_t err_len);
// in: this member's counts[index] floats; out: every member's block laid end to end.
int rl_coll_all_gather(rl_coll_t *self, rl_mesh_axis_t axis, const float *in, float *out,
                       const size_t *counts, char *err, size_t err_len);
// buf[0..n) of the group's member `root` (an index in the group) to every member.
int rl_coll_broadcast(rl_coll_t *self, rl_mesh_axis_t axis, float *buf, size_t n, int root,
                      char *err, size_t err_len);
int rl_coll_barrier(rl_coll_t *self, rl_mesh_axis_t axis, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif

// rl_mesh — the DP×FSDP device mesh (DESIGN.md §2): dp·fsdp ranks laid out row-major, rank =
// dp_rank·fsdp + fsdp_rank (dp 2 × fsdp 2: [[0,1],[2,3]]). An fsdp group is a row (the ranks that
// hold the shards of one replica), a dp group a column (the ranks that hold the same shard). Data
// is split over all ranks in rank order (data_rank = rank). Pure arithmetic: no processes, no
// communication (rl_coll is the communication).
#ifndef RL_MESH_H
#define RL_MESH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_MESH_MAX 4096 // ranks

typedef struct {
    int dp, fsdp; // the shape, each >= 1
} rl_mesh_t;

typedef enum {
    RL_MESH_WORLD = 0, // every rank
    RL_MESH_DP,        // the ranks holding the same shard (a column), ordered by dp_rank
    RL_MESH_FSDP,      // the ranks of one replica (a row), ordered by fsdp_rank
} rl_mesh_axis_t;

// Checks a shape: dp, fsdp >= 1 and dp·fsdp <= RL_MESH_MAX. Returns 0 or RL_EINVAL with why.
int rl_mesh_check(const rl_mesh_t *m, char *err, size_t err_len);
static inline int rl_mesh_size(const rl_mesh_t *m) {
    return m->dp * m->fsdp;
}
static inline int rl_mesh_dp_rank(const rl_mesh_t *m, int rank) {
    return rank / m->fsdp;
}
static inline int rl_mesh_fsdp_rank(const rl_mesh_t *m, int rank) {
    return rank % m->fsdp;
}
static inline int rl_mesh_rank(const rl_mesh_t *m, int dp_rank, int fsdp_rank) {
    return dp_rank * m->fsdp + fsdp_rank;
}

// The ranks of rank's group along axis, in group order, into out (capacity >= the group's size);
// returns the group's size. *index (may be NULL) gets rank's position in it.
int rl_mesh_group(const rl_mesh_t *m, int rank, rl_mesh_axis_t axis, int *out, int *index);

// An even split of n items over parts: part i gets [lo, hi) with the first n % parts parts one
// item larger (rows of a batch over the data ranks, elements of a flat tensor over the fsdp
// ranks).
void rl_mesh_split(int64_t n, int parts, int i, int64_t *lo, int64_t *hi);

#ifdef __cplusplus
}
#endif
#endif

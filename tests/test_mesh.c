// test_mesh — the DP×FSDP layout (rl_mesh: ranks, dp and fsdp groups, even splits) and the
// single-process collectives backend (a 1×1 mesh: copies, no MPI at run time). The MPI backend is
// mesh.coll_mpi (test_coll_mpi.c under mpirun).
#include "rl_coll.h"
#include "rl_mesh.h"
#include "rl_test.h"

#include <string.h>

static void test_layout(void) {
    char err[256];
    rl_mesh_t m = {2, 2};
    CHECK_INT(rl_mesh_check(&m, err, sizeof err), 0);
    rl_mesh_t bad = {0, 2};
    CHECK(rl_mesh_check(&bad, err, sizeof err) != 0);
    // [[0,1],[2,3]]: rank 3 is dp 1, fsdp 1
    CHECK_INT(rl_mesh_dp_rank(&m, 3), 1);
    CHECK_INT(rl_mesh_fsdp_rank(&m, 2), 0);
    CHECK_INT(rl_mesh_rank(&m, 1, 0), 2);
    int g[8], idx = -1;
    CHECK_INT(rl_mesh_group(&m, 2, RL_MESH_FSDP, g, &idx), 2); // a row
    CHECK(g[0] == 2 && g[1] == 3 && idx == 0);
    CHECK_INT(rl_mesh_group(&m, 3, RL_MESH_DP, g, &idx), 2); // a column
    CHECK(g[0] == 1 && g[1] == 3 && idx == 1);
    CHECK_INT(rl_mesh_group(&m, 1, RL_MESH_WORLD, g, &idx), 4);
    CHECK(idx == 1 && g[3] == 3);
    rl_mesh_t w = {3, 1};
    CHECK_INT(rl_mesh_group(&w, 1, RL_MESH_FSDP, g, &idx), 1);
    // even splits: 10 over 4 parts -> 3, 3, 2, 2
    int64_t lo, hi, total = 0, want[4] = {3, 3, 2, 2};
    for (int i = 0; i < 4; i++) {
        rl_mesh_split(10, 4, i, &lo, &hi);
        CHECK_INT((int)(hi - lo), (int)want[i]);
        CHECK_INT((int)lo, (int)total);
        total = hi;
    }
    CHECK_INT((int)total, 10);
}

static void test_single(void) {
    char err[256];
    rl_coll_t *c = NULL;
    CHECK_INT(rl_coll_single(&c, err, sizeof err), 0);
    CHECK_INT(rl_coll_rank(c), 0);
    CHECK_INT(rl_coll_group_size(c, RL_MESH_WORLD), 1);
    float a[3] = {1, 2, 3}, b[3] = {0};
    double d[2] = {4, 5};
    size_t counts[1] = {3};
    CHECK_INT(rl_coll_all_reduce(c, RL_MESH_WORLD, a, 3, err, sizeof err), 0);
    CHECK(a[0] == 1 && a[2] == 3);
    CHECK_INT(rl_coll_all_reduce_f64(c, RL_MESH_DP, d, 2, err, sizeof err), 0);
    CHECK(d[1] == 5);
    CHECK_INT(rl_coll_reduce_scatter(c, RL_MESH_FSDP, a, b, counts, err, sizeof err), 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    memset(b, 0, sizeof b);
    CHECK_INT(rl_coll_all_gather(c, RL_MESH_FSDP, a, b, counts, err, sizeof err), 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_INT(rl_coll_broadcast(c, RL_MESH_WORLD, a, 3, 0, err, sizeof err), 0);
    CHECK_INT(rl_coll_barrier(c, RL_MESH_WORLD, err, sizeof err), 0);
    rl_coll_destroy(&c);
}

int main(void) {
    RL_TEST_RUN(test_layout);
    RL_TEST_RUN(test_single);
    RL_TEST_DONE();
}

// test_coll_mpi — the MPI collectives backend on a dp×fsdp mesh (run by ctest under mpirun, 4
// ranks for dp 2 × fsdp 2 on 2 cores: oversubscribed, yielding when idle). Every rank fills its
// buffers with small integers (exact in float), so each sum is checked exactly: all-reduce over
// the world, a dp group and an fsdp group (f32 and f64), reduce-scatter and all-gather with
// uneven blocks (the flat shards of rl_mesh_split), broadcast from a non-zero root, barrier. A
// world of the wrong size is refused. Each rank prints its own failures; rank 0 the summary.
#include "rl_coll.h"
#include "rl_test.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    rl_mesh_t m = {argc > 2 ? atoi(argv[1]) : 2, argc > 2 ? atoi(argv[2]) : 2};
    char err[512] = "";
    rl_coll_t *c = NULL;
    int rc = rl_coll_mpi(&m, &argc, &argv, &c, err, sizeof err);
    CHECK_MSG(rc == 0, "rl_coll_mpi: %s", err);
    if (rc) {
        return 1;
    }
    int r = rl_coll_rank(c), n = rl_mesh_size(&m);
    int d = rl_mesh_dp_rank(&m, r), f = rl_mesh_fsdp_rank(&m, r);
    // all-reduce: element i of rank r holds r*10 + i
    float a[5];
    double ad[5];
    for (rl_mesh_axis_t ax = RL_MESH_WORLD; ax <= RL_MESH_FSDP; ax++) {
        for (int i = 0; i < 5; i++) {
            a[i] = (float)(r * 10 + i);
            ad[i] = r * 10 + i;
        }
        CHECK_INT(rl_coll_all_reduce(c, ax, a, 5, err, sizeof err), 0);
        CHECK_INT(rl_coll_all_reduce_f64(c, ax, ad, 5, err, sizeof err), 0);
        int g[64], gn = rl_mesh_group(&m, r, ax, g, NULL);
        for (int i = 0; i < 5; i++) {
            double want = 0;
            for (int k = 0; k < gn; k++) {
                want += g[k] * 10 + i;
            }
            CHECK_MSG(a[i] == (float)want && ad[i] == want,
                      "rank %d axis %d: all-reduce[%d] %g, "
                      "expected %g",
                      r, (int)ax, i, (double)a[i], want);
        }
    }
    // reduce-scatter / all-gather in the fsdp group: 7 elements split unevenly (rl_mesh_split)
    int gs = rl_coll_group_size(c, RL_MESH_FSDP), gi = rl_coll_group_index(c, RL_MESH_FSDP);
    size_t counts[64];
    int64_t lo, hi, mylo = 0, myhi = 0;
    for (int k = 0; k < gs; k++) {
        rl_mesh_split(7, gs, k, &lo, &hi);
        counts[k] = (size_t)(hi - lo);
        if (k == gi) {
            mylo = lo;
            myhi = hi;
        }
    }
    float full[7], shard[7], back[7];
    for (int i = 0; i < 7; i++) {
        full[i] = (float)(r + i); // the "gradient" of rank r
    }
    CHECK_INT(rl_coll_reduce_scatter(c, RL_MESH_FSDP, full, shard, counts, err, sizeof err), 0);
    for (int64_t i = mylo; i < myhi; i++) {
        float want = 0;
        for (int k = 0; k < gs; k++) {
            want += (float)(rl_mesh_rank(&m, d, k) + i);
        }
        CHECK_MSG(shard[i - mylo] == want, "rank %d: reduce-scatter[%lld] %g, expected %g", r,
                  (long long)i, (double)shard[i - mylo], (double)want);
    }
    // all-gather of the shards puts the summed tensor back together on every member
    CHECK_INT(rl_coll_all_gather(c, RL_MESH_FSDP, shard, back, counts, err, sizeof err), 0);
    for (int i = 0; i < 7; i++) {
        float want = 0;
        for (int k = 0; k < gs; k++) {
            want += (float)(rl_mesh_rank(&m, d, k) + i);
        }
        CHECK_MSG(back[i] == want, "rank %d: all-gather[%d] %g, expected %g", r, i, (double)back[i],
                  (double)want);
    }
    // broadcast from the last member of the dp group
    int dn = rl_coll_group_size(c, RL_MESH_DP);
    float b[3] = {(float)r, (float)r, (float)r};
    CHECK_INT(rl_coll_broadcast(c, RL_MESH_DP, b, 3, dn - 1, err, sizeof err), 0);
    CHECK_MSG(b[2] == (float)rl_mesh_rank(&m, dn - 1, f), "rank %d: broadcast %g", r, (double)b[2]);
    CHECK_INT(rl_coll_barrier(c, RL_MESH_WORLD, err, sizeof err), 0);
    // a mesh the world does not match is refused (MPI is initialized already: reused)
    rl_mesh_t wrong = {n, 2};
    rl_coll_t *w = NULL;
    CHECK(rl_coll_mpi(&wrong, &argc, &argv, &w, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "needs");
    // every rank's result, summed: the job fails when any rank failed
    double bad = rl_test_failed;
    rl_coll_all_reduce_f64(c, RL_MESH_WORLD, &bad, 1, err, sizeof err);
    rl_coll_destroy(&c);
    if (r == 0) {
        printf("test_coll_mpi: dp %d x fsdp %d, %d ranks, %d failures in all\n", m.dp, m.fsdp, n,
               (int)bad);
    }
    return bad > 0 ? 1 : 0;
}

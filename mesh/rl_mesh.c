// rl_mesh — the DP×FSDP layout (see rl_mesh.h).
#include "rl_mesh.h"

#include "rl_err.h"

int rl_mesh_check(const rl_mesh_t *m, char *err, size_t err_len) {
    if (m->dp < 1 || m->fsdp < 1 || (int64_t)m->dp * m->fsdp > RL_MESH_MAX) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "mesh dp %d x fsdp %d: each must be at least 1 and the product at most %d",
                       m->dp, m->fsdp, RL_MESH_MAX);
    }
    return 0;
}

int rl_mesh_group(const rl_mesh_t *m, int rank, rl_mesh_axis_t axis, int *out, int *index) {
    int d = rl_mesh_dp_rank(m, rank), f = rl_mesh_fsdp_rank(m, rank), n = 0;
    switch (axis) {
    case RL_MESH_WORLD:
        for (int r = 0; r < rl_mesh_size(m); r++) {
            out[n++] = r;
        }
        if (index) {
            *index = rank;
        }
        break;
    case RL_MESH_DP:
        for (int i = 0; i < m->dp; i++) {
            out[n++] = rl_mesh_rank(m, i, f);
        }
        if (index) {
            *index = d;
        }
        break;
    case RL_MESH_FSDP:
        for (int i = 0; i < m->fsdp; i++) {
            out[n++] = rl_mesh_rank(m, d, i);
        }
        if (index) {
            *index = f;
        }
        break;
    }
    return n;
}

void rl_mesh_split(int64_t n, int parts, int i, int64_t *lo, int64_t *hi) {
    int64_t base = n / parts, extra = n % parts;
    *lo = (int64_t)i * base + (i < extra ? i : extra);
    *hi = *lo + base + (i < extra ? 1 : 0);
}

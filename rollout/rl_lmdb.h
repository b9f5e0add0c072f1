// rl_lmdb — what rollout's LMDB stores (rl_traj, rl_refcache) share: LMDB's return codes as
// rlctl's. Internal to rollout/.
#ifndef RL_LMDB_H
#define RL_LMDB_H

#include "rl_err.h"

#include <lmdb.h>

// LMDB's negative codes as RL_E* (MDB_* are negative and rl_strerror does not know them);
// 0, positive errno values and RL_E* codes pass through.
static inline int rl_lmdb_code(int rc) {
    if (rc >= 0 || (rc <= -1001 && rc >= -1099)) {
        return rc;
    }
    switch (rc) {
    case MDB_NOTFOUND: return RL_ENOTFOUND;
    case MDB_VERSION_MISMATCH: return RL_EVERSION;
    case MDB_INVALID:
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_BAD_VALSIZE: return RL_EPROTO;
    default: return RL_EIO;
    }
}

#endif

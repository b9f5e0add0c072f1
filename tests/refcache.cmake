# rollout/rl_refcache: DPO's cache of reference log-probability sums (LMDB), and its hashes.
rl_add_test(NAME rollout.refcache SOURCES test_refcache.c LIBS rl_rollout rl_core LABELS unit
            TIMEOUT 60)

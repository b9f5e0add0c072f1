# rollout.traj: the trajectory store (rl_traj) on its own: codec round trips and every malformed
# map, key order, replace, truncate, map growth from a tiny map, read-only reopen, version
# refusal, corrupt values named by key, and the per-step put time (printed); damaged pages found
# by rl_traj_check and salvaged by rl_traj_salvage; a full disk (a tmpfs in a user namespace,
# RLCTL_FAULT=traj_enospc) named as such; dead readers' slots freed by the writer.
rl_add_test(NAME rollout.traj SOURCES test_traj.c LIBS rl_rollout LABELS unit TIMEOUT 120)
# cli.traj: a store written through the C API into a run folder, read back by `rlctl traj
# ls/show/export` and by tests/reference/read_traj.py (python3-lmdb + python3-msgpack, written
# from docs/trajectories.md alone); damaged stores reported (not crashed on), checked and
# salvaged with `rlctl traj check/salvage`
rl_add_test(NAME cli.traj SOURCES test_traj_cli.c LIBS rl_rollout LABELS integration
            TIMEOUT 120)
add_dependencies(test_cli_traj rlctl)

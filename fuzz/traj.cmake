# libFuzzer on the trajectory record decoder (rl_traj_decode: values read back from LMDB), and so
# on core's msgpack reader (rl_mpack) the way records use it (typed reads, a depth limit); seeds
# in fuzz/corpus/traj/ (records written by rl_traj_encode and damaged copies, see
# tests/test_traj.c for what each kind of damage must give).
rl_add_fuzz(traj fuzz_traj.c rl_rollout)

# bench_traj: the trajectory store's step write (rl_traj_put_step of a cookbook-shaped GRPO step)
# beside raw LMDB puts of the same pre-encoded bytes (synced and MDB_NOSYNC commits), measured in
# the same run. A program, not a test.
add_executable(bench_traj ${CMAKE_CURRENT_SOURCE_DIR}/bench_traj.c)
target_link_libraries(bench_traj PRIVATE rl_rollout)

# bench_mesh: the sharded training step on a DP×FSDP mesh (per-rank bytes, tokens/s, time in
# collectives), run under mpirun by bench/mesh.sh. A program, not a test.
add_executable(bench_mesh ${CMAKE_CURRENT_SOURCE_DIR}/bench_mesh.c)
target_link_libraries(bench_mesh PRIVATE rl_algorithms rl_serving)

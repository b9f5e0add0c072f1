# bench_sync: weight sync as a role-protocol message (rl_msg + rl_chan, decode, copy into the
# destination) beside raw ZeroMQ ipc zero-copy transfer of the same bytes, measured in the same
# run. A program, not a test.
add_executable(bench_sync ${CMAKE_CURRENT_SOURCE_DIR}/bench_sync.c)
target_link_libraries(bench_sync PRIVATE rl_algorithms rl_serving)

# bench_safetensors: load + convert GB/s of a 256 MiB BF16 file beside memcpy bandwidth.
add_executable(bench_safetensors ${CMAKE_CURRENT_SOURCE_DIR}/bench_safetensors.c)
target_link_libraries(bench_safetensors PRIVATE rl_core)

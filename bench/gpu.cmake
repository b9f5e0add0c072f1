# bench_gpu: the model on a GPU (training step, decode) beside the device's measured bf16 gemm
# peak and copy bandwidth, in one run (scripts/gpu_check.sh runs it with --quick). A program,
# not a test; --tiny tries it on the emulated module.
add_executable(bench_gpu ${CMAKE_CURRENT_SOURCE_DIR}/bench_gpu.c)
target_link_libraries(bench_gpu PRIVATE rl_rollout rl_model)

# bench_model: training GFLOP/s (full, LoRA), decode tokens/s (batch 1, batch 64), prefill and
# bytes per parameter of random qwen2-style models, each beside the sgemm/sgemv ceiling on the
# model's own shapes measured in the same run. A program, not a test.
add_executable(bench_model ${CMAKE_CURRENT_SOURCE_DIR}/bench_model.c)
target_link_libraries(bench_model PRIVATE rl_rollout rl_model PkgConfig::OPENBLAS)

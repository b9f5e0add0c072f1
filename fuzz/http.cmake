# libFuzzer on the OpenAI-compatible completions request (rl_http_complete) against the cookbook
# model; seeds in fuzz/corpus/http/.
rl_add_fuzz(http fuzz_http.c rl_algorithms rl_serving)
target_compile_definitions(fuzz_http PRIVATE RL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

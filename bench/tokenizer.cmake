# bench_tokenizer: encode MB/s of rl_tokenizer on the real Qwen3 tokenizer (fetched by
# tests/reference/fetch_tokenizers.sh), cold and warm cache. A program, not a test.
add_executable(bench_tokenizer ${CMAKE_CURRENT_SOURCE_DIR}/bench_tokenizer.c)
target_compile_definitions(bench_tokenizer PRIVATE RL_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(bench_tokenizer PRIVATE rl_text)

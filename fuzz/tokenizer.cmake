# libFuzzer on rl_tokenizer encode/decode with the hand-made fixtures; seeds in
# fuzz/corpus/tokenizer/ (short texts covering contractions, CR/LF runs, added tokens, NFD).
rl_add_fuzz(tokenizer fuzz_tokenizer.c rl_model)
target_compile_definitions(fuzz_tokenizer PRIVATE RL_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures")

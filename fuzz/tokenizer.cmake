# libFuzzer on rl_tokenizer encode/decode with the hand-made fixtures; seeds in
# fuzz/corpus/tokenizer/ (short texts covering contractions, CR/LF runs, added tokens, NFD).
rl_add_fuzz(tokenizer fuzz_tokenizer.c rl_text)
target_compile_definitions(fuzz_tokenizer PRIVATE RL_FIXTURES="${CMAKE_SOURCE_DIR}/tests/fixtures")
# libFuzzer on the rl_tokenizer loader: arbitrary bytes as tokenizer.json text. Seeds in
# fuzz/corpus/tokenizer_load/ (small hand-written files: the minimal BPE, added tokens with a
# template, Split + NFC, holes and ignore_merges, and the huge-id file that once reserved 17 GiB).
rl_add_fuzz(tokenizer_load fuzz_tokenizer_load.c rl_text)

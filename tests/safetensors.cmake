# core/rl_safetensors: reader, writer, conversions, the fixture corpus, and `rlctl inspect` on it.
rl_add_test(NAME core.safetensors SOURCES test_safetensors.c LIBS rl_core LABELS unit TIMEOUT 300)
add_dependencies(test_core_safetensors rlctl) # the test runs the built rlctl on the bad corpus

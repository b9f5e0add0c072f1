# libFuzzer on the safetensors header parser; seeds in fuzz/corpus/safetensors/ (copied from the
# fixtures by tests/fixtures/safetensors/make_fixtures.py).
rl_add_fuzz(safetensors fuzz_safetensors.c rl_core)

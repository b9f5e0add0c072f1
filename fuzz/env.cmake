# libFuzzer on what an episode reads from sampled text: the tool-call parsers and the calc
# tool's expressions (env/rl_toolcall, rl_calc); the input's first byte picks which (see
# fuzz_env.c). Seeds in fuzz/corpus/env/ (hand-written: hermes blocks good and broken, Llama 3
# calls with ';' and the python tag, expressions at the limits).
rl_add_fuzz(env fuzz_env.c rl_env rl_core)

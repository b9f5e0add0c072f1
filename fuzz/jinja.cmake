# libFuzzer on rl_jinja: arbitrary bytes as a chat template, compiled and rendered against a fixed
# conversation with tight limits. Seeds in fuzz/corpus/jinja/ (small hand-written templates in
# the style of real chat templates; the real ones are third-party and never committed).
rl_add_fuzz(jinja fuzz_jinja.c rl_text)

# libFuzzer on the JSONL reader (rl_jsonl: lines, the line cap, JSON rows, the field-as-text
# helper) that the SFT, prompt and eval datasets read through; the input's first byte picks the
# line cap (see fuzz_jsonl.c). Seeds in fuzz/corpus/jsonl/ (hand-written: dataset rows of each
# kind, CRLF and blank lines, no final newline, small caps, JSON errors, invalid UTF-8, a NUL).
rl_add_fuzz(jsonl fuzz_jsonl.c rl_core)

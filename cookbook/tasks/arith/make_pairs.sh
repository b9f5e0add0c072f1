#!/bin/sh
# Rebuilds cookbook/data/arith/pairs_train.jsonl and pairs_eval.jsonl, the preference pairs of
# cookbook/dpo_lora.yaml and cookbook/rm_lora.yaml: models/arith-noisy-base's own samples
# (`rlctl pairs`: 4 completions of each prompt at temperature 1, scored by the task's rule; a
# prompt with a right and a wrong completion gives one pair, the first right one chosen and the
# first wrong one rejected). Training pairs come from the 20000 training prompts (seed 0),
# held-out pairs from the 500 held-out prompts (seed 1), so no prompt is in both.
# Deterministic for a given machine and thread count (made with 2 threads). Run from the
# repository root after building rlctl; RLCTL names the binary (default build/release/rlctl).
set -eu
RLCTL=${RLCTL:-build/release/rlctl}
BASE=cookbook/models/arith-noisy-base
D=cookbook/data/arith
"$RLCTL" pairs --model "$BASE" --data "$D/train.jsonl" --n 4 --max-new-tokens 40 \
    --seed 0 --threads 2 --out "$D/pairs_train.jsonl"
"$RLCTL" pairs --model "$BASE" --data "$D/eval.jsonl" --n 4 --max-new-tokens 40 \
    --seed 1 --threads 2 --out "$D/pairs_eval.jsonl"

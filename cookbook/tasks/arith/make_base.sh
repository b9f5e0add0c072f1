#!/bin/sh
# Rebuilds cookbook/models/arith-base, the SFT base that cookbook/grpo_lora.yaml improves:
# cookbook/sft_arith.yaml (1000 steps, cosine) trains cookbook/models/arith-init, and the base is
# its step-750 checkpoint: three quarters of the way, the model answers about half of the
# held-out questions greedily (the finished run answers ~83%, leaving little for RL to do).
# Deterministic for a given machine and thread count (it was made with 2 threads). Run from the
# repository root after building rlctl; RLCTL names the binary (default build/release/rlctl).
set -eu
RLCTL=${RLCTL:-build/release/rlctl}
RUN=${RUN:-runs/sft_arith_base}
"$RLCTL" run cookbook/sft_arith.yaml run.dir="$RUN" --force --stop-at 750
test -f "$RUN/checkpoints/step-750/DONE"
# the model files are replaced; the folder's README stays
rm -f cookbook/models/arith-base/*.json cookbook/models/arith-base/*.safetensors
mkdir -p cookbook/models/arith-base
cp "$RUN"/checkpoints/step-750/model/* cookbook/models/arith-base/
"$RLCTL" eval --model cookbook/models/arith-base --data cookbook/data/arith/eval.jsonl \
    --max-new-tokens 40 --temperature 0
"$RLCTL" eval --model cookbook/models/arith-base --data cookbook/data/arith/eval.jsonl \
    --max-new-tokens 40 --temperature 1

#!/bin/sh
# Rebuilds cookbook/models/arith-rm, the reward model cookbook/grpo_rm.yaml trains against:
# cookbook/rm_full.yaml (a reward model on models/arith-noisy-base, fully tuned, two passes over
# the arith preference pairs) run to the end; its final/ is an HF sequence classifier
# with the tokenizer, copied here as it is. Deterministic for a given machine and thread count
# (made with 2 threads). Run from the repository root after building rlctl; RLCTL names the
# binary (default build/release/rlctl).
set -eu
RLCTL=${RLCTL:-build/release/rlctl}
RUN=${RUN:-runs/rm_full}
"$RLCTL" run cookbook/rm_full.yaml run.dir="$RUN" --force
test -f "$RUN/final/model.safetensors"
# the model files are replaced; the folder's README stays
rm -f cookbook/models/arith-rm/*.json cookbook/models/arith-rm/*.safetensors
mkdir -p cookbook/models/arith-rm
cp "$RUN"/final/* cookbook/models/arith-rm/
grep -o '"eval/rm/accuracy":[0-9.]*' "$RUN/metrics.jsonl" | tail -1

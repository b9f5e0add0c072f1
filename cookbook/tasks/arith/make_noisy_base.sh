#!/bin/sh
# Rebuilds cookbook/models/arith-noisy-base, an SFT base whose errors RL can fix:
# cookbook/sft_arith_noisy.yaml (1000 steps, cosine) trains cookbook/models/arith-init on
# cookbook/data/arith/sft_noisy.jsonl, the training rows with 30% of the final answers wrong by
# one digit (make_data.py --noise 0.3), and the base is the finished run. It learns the arithmetic
# (~92% greedy on the held-out questions) but at temperature 1 copies the result wrongly about as
# often as its data did (~64%): room for a reward on the final answer.
# Deterministic for a given machine and thread count (it was made with 2 threads). Run from the
# repository root after building rlctl; RLCTL names the binary (default build/release/rlctl).
set -eu
RLCTL=${RLCTL:-build/release/rlctl}
RUN=${RUN:-runs/sft_arith_noisy_base}
"$RLCTL" run cookbook/sft_arith_noisy.yaml run.dir="$RUN" --force
test -f "$RUN/final/model.safetensors"
# the model files are replaced; the folder's README stays
rm -f cookbook/models/arith-noisy-base/*.json cookbook/models/arith-noisy-base/*.safetensors
mkdir -p cookbook/models/arith-noisy-base
cp "$RUN"/final/* cookbook/models/arith-noisy-base/
"$RLCTL" eval --model cookbook/models/arith-noisy-base --data cookbook/data/arith/eval.jsonl \
    --max-new-tokens 40 --temperature 0
for seed in 0 1 2 3; do
    "$RLCTL" eval --model cookbook/models/arith-noisy-base --data cookbook/data/arith/eval.jsonl \
        --max-new-tokens 40 --temperature 1 --seed "$seed"
done

#!/bin/sh
# Rebuilds cookbook/models/calc-init and cookbook/models/calc-base, the SFT base that
# cookbook/grpo_calc.yaml improves: the tokenizer and chat template (make_tokenizer.py), random
# weights (rlctl init --seed 0), then cookbook/sft_calc.yaml (600 steps) on
# cookbook/data/calc/sft.jsonl (make_data.py: half the questions call the tool, half answer at
# once). The base is the finished run; its accuracy is measured with the GRPO recipe's own
# evaluation (episodes of the calc environment at temperature 1 on the 500 eval questions: the
# "before training" line of a 1-step run). Deterministic for a given machine and thread count
# (it was made with 2 threads). Run from the repository root after building rlctl; RLCTL names
# the binary (default build/release/rlctl).
set -eu
RLCTL=${RLCTL:-build/release/rlctl}
case "$RLCTL" in /*) ;; *) RLCTL="$PWD/$RLCTL" ;; esac
RUN=${RUN:-$PWD/runs/sft_calc}
INIT=cookbook/models/calc-init
/usr/bin/python3 cookbook/tasks/calc/make_tokenizer.py --out "$INIT"
"$RLCTL" init --config "$INIT/config.json" --tokenizer "$INIT/tokenizer.json" --out "$INIT" \
    --seed 0 --dtype fp32 --force
/usr/bin/python3 cookbook/tasks/calc/make_data.py --check --rlctl "$RLCTL"
"$RLCTL" run cookbook/sft_calc.yaml run.dir="$RUN" --force
test -f "$RUN/final/model.safetensors"
# the model files are replaced; the folder's README stays
rm -f cookbook/models/calc-base/*.json cookbook/models/calc-base/*.safetensors
mkdir -p cookbook/models/calc-base
cp "$RUN"/final/*.json "$RUN"/final/model.safetensors cookbook/models/calc-base/
(cd cookbook && "$RLCTL" run grpo_calc.yaml train.steps=1 optim.warmup_steps=0 \
    train.eval_every=1 run.dir="$RUN-eval" --force 2>&1 | grep 'before training')

#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs the build dependencies, builds rlctl,
# and runs the cookbook's GRPO recipe on the embedded default.
# Until the GRPO loop lands (see docs/status.md) the job ends at `rlctl validate`, which loads
# and checks the cookbook recipes, their model folder and data, and prints the resolved recipe,
# followed by the held-out accuracy of the base model that the GRPO recipe starts from.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target rlctl >/dev/null
for r in cookbook/sft_arith.yaml cookbook/grpo_lora.yaml; do
  echo "== rlctl validate $r"
  ./build/release/rlctl validate "$r" "$@"
done
echo "== rlctl eval cookbook/models/arith-base (held-out accuracy, greedy and temperature 1)"
for t in 0 1; do
  ./build/release/rlctl eval --model cookbook/models/arith-base \
    --data cookbook/data/arith/eval.jsonl --max-new-tokens 40 --temperature "$t"
done

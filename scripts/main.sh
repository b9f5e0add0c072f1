#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs the build dependencies, builds rlctl,
# and runs the cookbook's GRPO recipe on the embedded default.
# Until the GRPO loop lands (see docs/status.md) the job ends at `rlctl validate`, which loads
# and checks the cookbook recipes, their model folder and data, and prints the resolved recipe.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target rlctl >/dev/null
for r in cookbook/sft_arith.yaml cookbook/grpo_lora.yaml; do
  echo "== rlctl validate $r"
  ./build/release/rlctl validate "$r" "$@"
done

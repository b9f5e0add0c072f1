#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: installs the build dependencies, builds rlctl,
# and runs the cookbook's GRPO recipe on the embedded default (a controller with actor, sampler
# and reward worker processes on this machine over ipc://, the shipped base model). It prints a
# live progress line and ends with eval/accuracy and eval/accuracy_greedy before and after;
# the run folder is runs/grpo_lora (started over on every call: --force). Extra
# arguments are recipe overrides (e.g. train.steps=50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target rlctl >/dev/null
./build/release/rlctl run cookbook/grpo_lora.yaml --force "$@"

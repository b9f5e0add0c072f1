#!/usr/bin/env bash
# Builds the Release benchmarks and runs them; prints the machine line and each program's
# output (medians of several runs, each figure beside the ceiling measured in the same run).
# Copy the figures into bench/RESULTS.md. Benchmarks are not tests: nothing here fails on speed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
bash tests/reference/fetch_tokenizers.sh >/dev/null
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" >/dev/null
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $cpu, $(nproc) threads, $(free -g | awk '/Mem:/{print $2}') GiB, $(date -u +%F)"
for b in build/release/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b"
done
# GRPO: a short real run of cookbook/grpo_lora.yaml (3 invocations, each with the store and
# weight-sync ceilings measured right after it; load averages recorded before and after).
echo "== GRPO (bench/grpo_step.sh)"
bash bench/grpo_step.sh build/release 3
# rlctl's training step beside PyTorch CPU (Debian's python3-torch) and raw sgemm, same run
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "== PyTorch side by side (bench/side_by_side.sh)"
  bash bench/side_by_side.sh build/release
fi
# PPO: the step-time split beside GRPO's on the same shape (64 sequences a step; 3 invocations).
echo "== PPO (bench/ppo_step.sh)"
bash bench/ppo_step.sh build/release 3

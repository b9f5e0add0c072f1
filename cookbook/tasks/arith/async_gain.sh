#!/usr/bin/env bash
# The learning gain of asynchronous GRPO rollouts (algorithm.max_staleness) on the cookbook
# recipe: cookbook/grpo_lora.yaml with max_staleness 0 (on-policy), 1 and 2, seeds 0, 1 and 2
# each, the recipe's 200 steps. Prints eval/accuracy before -> after of every run, then for each
# k the mean gain, the seeds' spread (min..max) and the ratio to the on-policy mean gain.
# docs/algorithms.md quotes its output.
#
#   bash cookbook/tasks/arith/async_gain.sh [RLCTL (default build/release/rlctl)] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rlctl=${1:-build/release/rlctl}
out=${2:-runs/async_gain}
mkdir -p "$out"
for k in 0 1 2; do
  for seed in 0 1 2; do
    dir="$out/k$k-s$seed"
    if [ ! -f "$dir/final/adapter_model.safetensors" ]; then
      "$rlctl" run cookbook/grpo_lora.yaml run.dir="$dir" run.seed=$seed \
        algorithm.max_staleness=$k --force >"$out/k$k-s$seed.log" 2>&1
    fi
  done
done
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
gain = {}
for k in (0, 1, 2):
    for seed in (0, 1, 2):
        rows = [json.loads(l) for l in open(os.path.join(out, f"k{k}-s{seed}", "metrics.jsonl"))]
        ev = [r["eval/accuracy"] for r in rows if "eval/accuracy" in r]
        steps = [r for r in rows if "loss" in r]
        wall = sum(r.get("timing/step", 0) for r in steps)
        g = 100 * (ev[-1] - ev[0])
        gain.setdefault(k, []).append(g)
        print(f"k={k} seed={seed}: eval/accuracy {100*ev[0]:.1f}% -> {100*ev[-1]:.1f}% "
              f"({g:+.1f} points), {len(steps)} steps, {60*len(steps)/wall:.0f} steps/min")
base = sum(gain[0]) / 3
for k in (0, 1, 2):
    m = sum(gain[k]) / 3
    print(f"max_staleness {k}: mean gain {m:+.1f} points (seeds {min(gain[k]):+.1f} .. "
          f"{max(gain[k]):+.1f}), {100*m/base:.0f}% of on-policy")
PY

#!/usr/bin/env bash
# A/B check of a change that must not change any number: builds BASE (a commit, default the
# merge-base with origin/main or HEAD~1) in a worktree beside the working tree's own build, runs
# the same recipes with the same seed on both, and compares
#   - cookbook/grpo_lora.yaml: metrics.jsonl (without time, timing/* and tokens_per_second),
#     every trajectory record (`rlctl traj export --jsonl`) and final/adapter_model.safetensors;
#   - cookbook/sft_arith.yaml over 50 steps: metrics.jsonl (the same keys aside) and
#     final/model.safetensors.
# Bits depend on the machine's BLAS kernels, so both builds must run on the same machine, in one
# session: this is a tool for a refactor's proof, not a CI test.
#
#   bash scripts/ab_check.sh [BASE] [GRPO_STEPS (default: the recipe's 200)]
# Extra overrides for both runs of GRPO can be given in AB_GRPO_ARGS, for SFT in AB_SFT_ARGS.
# Exit status 0 when everything is identical, 1 when anything differs (printed), 2 on usage or
# build errors.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
base=${1:-HEAD~1}
steps=${2:-}
jobs=${RL_JOBS:-$(nproc)}
work=$(mktemp -d /tmp/rlctl-ab.XXXXXX)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1; rm -rf "$work"' EXIT

rev=$(git rev-parse --short "$base" 2>/dev/null) || { echo "ab_check: no commit '$base'"; exit 2; }
echo "ab_check: base $rev ($(git log -1 --format=%s "$rev" | cut -c1-70))"
echo "ab_check: new  working tree at $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes')"

build() { # build <source dir> <build dir>
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release >"$2.log" 2>&1 &&
    cmake --build "$2" -j "$jobs" --target rlctl >>"$2.log" 2>&1
}
git worktree add -q --detach "$work/base" "$rev" || exit 2
build "$work/base" "$work/base-build" || { tail -20 "$work/base-build.log"; exit 2; }
build "$root" "$work/new-build" || { tail -20 "$work/new-build.log"; exit 2; }

# metrics.jsonl without the values that differ run to run, one JSON object a line, sorted keys
strip_metrics() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    o = {k: v for k, v in o.items()
         if k != "time" and not k.startswith("timing/") and k != "tokens_per_second"}
    print(json.dumps(o, sort_keys=True))' "$1"
}

status=0
same() { # same <what> <file a> <file b>
  if cmp -s "$2" "$3"; then
    echo "  identical: $1 ($(wc -c <"$2") bytes)"
  else
    echo "  DIFFERENT: $1"; diff "$2" "$3" | head -10; status=1
  fi
}

grpo_args=(${steps:+train.steps=$steps} ${AB_GRPO_ARGS:-})
sft_args=(train.steps=50 train.save_every=25 ${AB_SFT_ARGS:-})
for side in base new; do
  bin="$work/$side-build/rlctl"
  echo "== $side: GRPO ${grpo_args[*]}"
  "$bin" run cookbook/grpo_lora.yaml run.dir="$work/$side-grpo" "${grpo_args[@]}" \
    >"$work/$side-grpo.log" 2>&1 || { tail -20 "$work/$side-grpo.log"; exit 2; }
  grep -E "eval/accuracy|steps in" "$work/$side-grpo.log" | sed 's/^/  /'
  strip_metrics "$work/$side-grpo/metrics.jsonl" >"$work/$side-grpo.metrics"
  # the `sampler` field names the process that sampled a record (not a number; a base built
  # before the field existed has none): compared without it
  "$work/new-build/rlctl" traj export "$work/$side-grpo" --jsonl |
    sed -E 's/,"sampler":"[^"]*"//' >"$work/$side-grpo.traj" || exit 2
  echo "== $side: SFT ${sft_args[*]}"
  "$bin" run cookbook/sft_arith.yaml run.dir="$work/$side-sft" "${sft_args[@]}" \
    >"$work/$side-sft.log" 2>&1 || { tail -20 "$work/$side-sft.log"; exit 2; }
  strip_metrics "$work/$side-sft/metrics.jsonl" >"$work/$side-sft.metrics"
done

echo "== compare"
same "GRPO metrics.jsonl, $(wc -l <"$work/base-grpo.metrics") lines" \
  "$work/base-grpo.metrics" "$work/new-grpo.metrics"
same "GRPO trajectories, $(wc -l <"$work/base-grpo.traj") records" \
  "$work/base-grpo.traj" "$work/new-grpo.traj"
same "GRPO final/adapter_model.safetensors" \
  "$work/base-grpo/final/adapter_model.safetensors" "$work/new-grpo/final/adapter_model.safetensors"
same "SFT metrics.jsonl, $(wc -l <"$work/base-sft.metrics") lines" \
  "$work/base-sft.metrics" "$work/new-sft.metrics"
same "SFT final/model.safetensors" \
  "$work/base-sft/final/model.safetensors" "$work/new-sft/final/model.safetensors"
echo "ab_check: $([ $status -eq 0 ] && echo 'identical' || echo 'DIFFERENT')"
exit $status

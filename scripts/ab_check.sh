#!/usr/bin/env bash
# A/B check of a change that must not change any number: builds BASE (a commit, default HEAD~1)
# in a worktree beside the working tree's own build, runs the same recipes with the same seed on
# both, and compares, for each case, metrics.jsonl (without time, timing/* and tokens_per_second),
# every trajectory record (`rlctl traj export --jsonl`, for the algorithms that store them) and
# every *.safetensors under final/ (the adapter, a merged model, a critic):
#   grpo  cookbook/grpo_lora.yaml (GRPO_STEPS, default the recipe's 200)
#   sft   cookbook/sft_arith.yaml, 50 steps
#   ppo   cookbook/ppo_lora.yaml, 6 steps (an evaluation and a checkpoint at 3)
#   dpo   cookbook/dpo_lora.yaml, 10 steps (held-out pairs and prompts evaluated at 5 and 10)
#   rm    cookbook/rm_lora.yaml, 10 steps (held-out pairs at 5 and 10)
#   mesh  cookbook/grpo_lora.yaml on a 2x2 mesh (mpirun, docs/mesh.md), 4 steps
# Bits depend on the machine's BLAS kernels, so both builds must run on the same machine, in one
# session: this is a tool for a refactor's proof, not a CI test.
#
#   bash scripts/ab_check.sh [BASE] [GRPO_STEPS]
# AB_CASES picks cases (default "grpo sft ppo dpo rm mesh"); AB_<CASE>_ARGS adds overrides to
# both runs of a case (AB_GRPO_ARGS, AB_PPO_ARGS, ...). AB_WORK names a folder to keep between
# calls (the worktrees and both builds, rebuilt incrementally); by default a temporary one is
# removed at exit. AB_NEW names a commit to build as the new side (in a worktree of its own, so the
# working tree may change meanwhile) instead of the working tree. Both builds leave the CUDA
# module out (the runs are on the CPU). RL_JOBS: build jobs. Exit status 0 when everything is identical, 1 when
# anything differs (printed), 2 on usage, build or run errors.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
base=${1:-HEAD~1}
steps=${2:-}
jobs=${RL_JOBS:-$(nproc)}
cases=${AB_CASES:-grpo sft ppo dpo rm mesh}
if [ -n "${AB_WORK:-}" ]; then
  work=$AB_WORK
  mkdir -p "$work" || exit 2
  for c in grpo sft ppo dpo rm mesh; do # the runs of an earlier call (not the builds)
    rm -rf "$work/base-$c" "$work/new-$c" "$work/base-$c".* "$work/new-$c".* \
      "$work/base-$c-refcache" "$work/new-$c-refcache"
  done
else
  work=$(mktemp -d /tmp/rlctl-ab.XXXXXX)
  trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1
        git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1; rm -rf "$work"' EXIT
fi

rev=$(git rev-parse --short "$base" 2>/dev/null) || { echo "ab_check: no commit '$base'"; exit 2; }
echo "ab_check: base $rev ($(git log -1 --format=%s "$rev" | cut -c1-70))"
if [ -n "${AB_NEW:-}" ]; then
  new_rev=$(git rev-parse --short "$AB_NEW" 2>/dev/null) || { echo "ab_check: no commit '$AB_NEW'"; exit 2; }
  echo "ab_check: new  $new_rev ($(git log -1 --format=%s "$new_rev" | cut -c1-70))"
else
  echo "ab_check: new  working tree at $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + uncommitted changes')"
fi
echo "ab_check: cases: $cases"

build() { # build <source dir> <build dir>
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DRLCTL_CUDA=OFF >"$2.log" 2>&1 &&
    cmake --build "$2" -j "$jobs" --target rlctl >>"$2.log" 2>&1
}
checkout() { # checkout <worktree> <commit>
  if [ -d "$1" ]; then
    git -C "$1" checkout -q --detach "$2"
  else
    git worktree add -q --detach "$1" "$2"
  fi
}
checkout "$work/base" "$rev" || exit 2
build "$work/base" "$work/base-build" || { tail -20 "$work/base-build.log"; exit 2; }
new_src=$root
if [ -n "${AB_NEW:-}" ]; then
  checkout "$work/new" "$new_rev" || exit 2
  new_src=$work/new
fi
build "$new_src" "$work/new-build" || { tail -20 "$work/new-build.log"; exit 2; }

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

# case -> recipe and overrides (both runs); a run folder per side
recipe_of() {
  case $1 in
    grpo | mesh) echo cookbook/grpo_lora.yaml ;;
    sft) echo cookbook/sft_arith.yaml ;;
    ppo) echo cookbook/ppo_lora.yaml ;;
    dpo) echo cookbook/dpo_lora.yaml ;;
    rm) echo cookbook/rm_lora.yaml ;;
    *) return 1 ;;
  esac
}
args_of() {
  case $1 in
    grpo) echo "${steps:+train.steps=$steps} ${AB_GRPO_ARGS:-}" ;;
    sft) echo "train.steps=50 train.save_every=25 ${AB_SFT_ARGS:-}" ;;
    ppo) echo "train.steps=6 optim.warmup_steps=2 train.eval_every=3 train.eval_samples=64" \
           "train.save_every=3" \
           "${AB_PPO_ARGS:-}" ;;
    dpo) echo "train.steps=10 train.eval_every=5 train.eval_samples=64 train.save_every=5" \
           "${AB_DPO_ARGS:-}" ;;
    rm) echo "train.steps=10 train.eval_every=5 train.save_every=5 ${AB_RM_ARGS:-}" ;;
    mesh) echo "mesh.dp=2 mesh.fsdp=2 train.steps=4 optim.warmup_steps=2 train.eval_every=2" \
            "train.eval_samples=64 train.save_every=2 ${AB_MESH_ARGS:-}" ;;
  esac
}

for c in $cases; do
  recipe=$(recipe_of "$c") || { echo "ab_check: no case '$c'"; exit 2; }
  read -r -a args <<<"$(args_of "$c")"
  for side in base new; do
    bin="$work/$side-build/rlctl"
    dir="$work/$side-$c"
    extra=()
    # DPO's reference sums are cached across runs: each run its own, empty cache
    [ "$c" = dpo ] && extra=(data.ref_cache="$dir-refcache")
    echo "== $side: $c: $recipe ${args[*]}"
    "$bin" run "$recipe" run.dir="$dir" "${args[@]}" "${extra[@]}" >"$dir.log" 2>&1 ||
      { tail -20 "$dir.log"; exit 2; }
    grep -E "eval/accuracy|steps in" "$dir.log" | sed 's/^/  /'
    strip_metrics "$dir/metrics.jsonl" >"$dir.metrics"
    if [ -e "$dir/trajectories.lmdb" ]; then
      # the `sampler` field names the process that sampled a record (not a number; a base built
      # before the field existed has none): compared without it
      "$work/new-build/rlctl" traj export "$dir" --jsonl |
        sed -E 's/,"sampler":"[^"]*"//' >"$dir.traj" || exit 2
    fi
    (cd "$dir/final" && find . -name '*.safetensors' | sort) >"$dir.finals"
  done
done

echo "== compare"
for c in $cases; do
  b="$work/base-$c" n="$work/new-$c"
  same "$c metrics.jsonl, $(wc -l <"$b.metrics") lines" "$b.metrics" "$n.metrics"
  if [ -f "$b.traj" ] || [ -f "$n.traj" ]; then
    same "$c trajectories, $(wc -l <"$b.traj") records" "$b.traj" "$n.traj"
  fi
  same "$c final/ files" "$b.finals" "$n.finals"
  while read -r f; do
    same "$c final/${f#./}" "$b/final/$f" "$n/final/$f"
  done <"$b.finals"
done
echo "ab_check: $([ $status -eq 0 ] && echo 'identical' || echo 'DIFFERENT')"
exit $status

#!/usr/bin/env bash
# Steps per minute of cookbook/grpo_lora.yaml with algorithm.max_staleness 0, 1 and 2, in two
# set-ups measured in the same invocation:
#   - local: the recipe as it is (2 local samplers of 1 thread, an actor of 2 threads), all on
#     this machine's cores;
#   - slowed: one remote sampler (`rlctl sampler serve`, 1 thread, over CURVE on loopback) pinned
#     to the last core beside a busy loop on the same core (a sampler on a busy core), the
#     controller and an actor of 1 thread pinned to the first core: generation and training on
#     different cores, the generation slowed.
# Each run: 40 steps, no evaluation; steps/min = 60 x (steps after the 5th) / their summed
# timing/step; also the median timing/actor_idle and timing/sampler_idle of those steps. Prints a
# table per invocation and the medians over invocations (docs: bench/RESULTS.md).
#
#   bash bench/async_step.sh [BUILD_DIR (default build/release)] [INVOCATIONS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build/release}
n=${2:-3}
rlctl="$bdir/rlctl"
[ -x "$rlctl" ] || { echo "async_step: $rlctl is missing (build $bdir first)" >&2; exit 1; }
command -v taskset >/dev/null || { echo "async_step: taskset (util-linux) is missing" >&2; exit 1; }
cores=$(nproc)
last=$((cores - 1))
tmp=$(mktemp -d /tmp/rl_async_step.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

"$rlctl" keygen --out "$tmp/ctl" >/dev/null
"$rlctl" keygen --out "$tmp/smp" >/dev/null
model=$("$rlctl" validate cookbook/grpo_lora.yaml | awk '/^model:/ {m = 1} m && /^  path:/ {
  gsub(/"/, "", $2); print $2; exit}')

# steps/min, median actor idle, median sampler idle of a run's metrics.jsonl (steps > 5)
figures() {
  python3 - "$1" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
st = [r for r in rows if "loss" in r and r["step"] > 5]
t = sum(r["timing/step"] for r in st)
ai = statistics.median(r.get("timing/actor_idle", float("nan")) for r in st)
si = statistics.median(r.get("timing/sampler_idle", float("nan")) for r in st)
print("%.1f %.3f %.3f" % (60 * len(st) / t, ai, si))
PY
}

run() { # run <name> <k> <local|slow> [overrides...]
  local name=$1 k=$2 mode=$3
  shift 3
  local pre=()
  [ "$mode" = slow ] && pre=(taskset -c 0)
  "${pre[@]}" "$rlctl" run cookbook/grpo_lora.yaml run.dir="$tmp/$name" train.steps=40 \
    train.eval_every=0 train.eval_samples=1 algorithm.max_staleness="$k" "$@" --force \
    >"$tmp/$name.log" 2>&1 || { tail -5 "$tmp/$name.log"; exit 1; }
  figures "$tmp/$name/metrics.jsonl"
}

declare -A all
for i in $(seq 1 "$n"); do
  echo "== invocation $i (load $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "| set-up | max_staleness | steps/min | actor idle (s/step) | sampler idle (s/step) |"
  echo "|---|---|---|---|---|"
  for k in 0 1 2; do
    read -r spm ai si < <(run "local-k$k" "$k" local)
    echo "| local | $k | $spm | $ai | $si |"
    all["local-$k"]+="$spm "
  done
  # the slowed sampler: pinned beside a busy loop
  taskset -c "$last" sh -c 'while :; do :; done' &
  pids+=($!)
  taskset -c "$last" "$rlctl" sampler serve --bind tcp://127.0.0.1:0 --key "$tmp/smp/key" \
    --allow "$tmp/ctl/key.pub" --model "$model" --threads 1 >"$tmp/serve$i.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do grep -q "listening on" "$tmp/serve$i.out" && break; sleep 0.1; done
  ep=$(awk '/listening on/ {print $3}' "$tmp/serve$i.out")
  for k in 0 1 2; do
    read -r spm ai si < <(run "slow-k$k" "$k" slow roles.samplers=0 \
      "roles.remote_samplers=[{endpoint: $ep, server_key: $tmp/smp/key.pub}]" \
      roles.client_key="$tmp/ctl/key" roles.actor_threads=1)
    echo "| slowed remote sampler | $k | $spm | $ai | $si |"
    all["slow-$k"]+="$spm "
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pids=()
done
echo "== medians over $n invocations (steps/min)"
for s in local slow; do
  line="$s:"
  for k in 0 1 2; do
    m=$(echo "${all[$s-$k]}" | tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{v[NR]=$1} END {
      print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
    line+=" k=$k $m [${all[$s-$k]% }]"
  done
  echo "$line"
done

#!/usr/bin/env bash
# The GRPO figures: a short real run of cookbook/grpo_lora.yaml (40 steps, no evaluation, 2
# samplers of 1 thread, an actor of 2 threads), with the ceilings measured right after it in the
# same invocation:
#   - store: median timing/store of the run (steps > 5) as a share of its median timing/step
#     (target <= 2%), then bench_traj --step-ms <that step>: rl_traj_put_step of a step of the
#     same shape beside raw LMDB puts of the same bytes;
#   - sync: median timing/sync of the run (export from the actor, then load on both samplers)
#     beside bench_sync's raw ZeroMQ ipc round trip of the same byte count (the recipe's LoRA
#     payload: r 8 on all 7 projections of a 4-layer model of hidden 128, intermediate 384, 4
#     heads / 2 kv heads of 32 = 77,824 f32 = 311,296 B, bench_sync's first row); target <= 2x.
# Each invocation records the load averages (/proc/loadavg) before and after, since the machine
# is shared. Prints one block per invocation and the medians over invocations.
#
#   bash bench/grpo_step.sh [BUILD_DIR (default build/release)] [INVOCATIONS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build/release}
n=${2:-3}
for x in "$bdir/rlctl" "$bdir/bench/bench_traj" "$bdir/bench/bench_sync"; do
  [ -x "$x" ] || { echo "grpo_step: $x is missing (build $bdir first)" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/rl_grpo_step.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# arithmetic on decimals (awk, so that nothing beyond the build's packages is needed)
calc() { awk "BEGIN {printf \"%.6f\", $1}"; }
. bench/lib.sh # median, metric

for i in $(seq 1 "$n"); do
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  run="$tmp/run$i"
  t0=$(date +%s.%N)
  if ! "$bdir/rlctl" run cookbook/grpo_lora.yaml run.dir="$run" train.steps=40 \
      train.eval_every=0 data.eval=null optim.warmup_steps=0 roles.samplers=2 \
      roles.sampler_threads=1 roles.actor_threads=2 >"$tmp/log$i" 2>&1; then
    tail -20 "$tmp/log$i" >&2
    exit 1
  fi
  wall=$(calc "$(date +%s.%N) - $t0")
  m="$run/metrics.jsonl"
  store=$(metric "$m" timing/store | median)
  step=$(metric "$m" timing/step | median)
  sync=$(metric "$m" timing/sync | median)
  gen=$(metric "$m" timing/generate | median)
  train=$(metric "$m" timing/train | median)
  nsteps=$(metric "$m" timing/step | wc -l)
  step_ms=$(calc "$step * 1000")
  traj=$("$bdir/bench/bench_traj" --dir "$tmp" --step-ms "$step_ms")
  syncb=$("$bdir/bench/bench_sync" 5)
  load1=$(cut -d' ' -f1-3 /proc/loadavg)
  # bench_traj: | rl_traj_put_step (b)... | B ms | raw ... A ms | Rx |
  put_row=$(grep '^| rl_traj_put_step' <<<"$traj")
  put_ms=$(awk -F'|' '{split($3, a, " "); print a[1]}' <<<"$put_row")
  raw_ms=$(awk -F'|' '{n = split($4, a, " "); print a[n - 1]}' <<<"$put_row")
  put_ratio=$(awk -F'|' '{sub(/x/, "", $5); print $5 + 0}' <<<"$put_row")
  nosync_ms=$(grep '^| raw mdb_put .* MDB_NOSYNC' <<<"$traj" | awk -F'|' '{split($3, a, " "); print a[1]}')
  # bench_sync: | LoRA r8 arith-base (...) | B ms (...) | A ms (...) | Rx | fill |
  lora_row=$(grep -m1 '^| LoRA' <<<"$syncb") # the first table: ipc
  msg_ms=$(awk -F'|' '{split($3, a, " "); print a[1]}' <<<"$lora_row")
  zmq_ms=$(awk -F'|' '{split($4, a, " "); print a[1]}' <<<"$lora_row")
  sync_ms=$(calc "$sync * 1000")
  store_ms=$(calc "$store * 1000")
  share=$(calc "100 * $store / $step")
  put_share=$(calc "100 * $put_ms / $step_ms")
  sync_ratio=$(calc "$sync_ms / $zmq_ms")
  printf '== invocation %d: load before %s, after %s; run %.0f s, %d steps > 5\n' \
    "$i" "$load0" "$load1" "$wall" "$nsteps"
  printf '  run medians: step %.1f ms (generate %.1f, train %.1f), store %.3f ms, sync %.3f ms\n' \
    "$step_ms" "$(calc "$gen * 1000")" "$(calc "$train * 1000")" "$store_ms" \
    "$sync_ms"
  printf '  store in the run: %.3f ms = %.2f%% of the step (target <= 2%%)\n' "$store_ms" "$share"
  printf '  bench_traj: rl_traj_put_step %.3f ms vs raw synced put %.3f ms = %.2fx (no sync %.3f ms);' \
    "$put_ms" "$raw_ms" "$put_ratio" "$nosync_ms"
  printf ' %.2f%% of the step\n' "$put_share"
  printf '  sync in the run: %.3f ms vs raw ZeroMQ ipc round trip of the same bytes %.3f ms = %.2fx' \
    "$sync_ms" "$zmq_ms" "$sync_ratio"
  printf ' (target <= 2x; bench_sync message %.3f ms)\n' "$msg_ms"
  echo "$i $step_ms $store_ms $share $put_ms $raw_ms $put_ratio $nosync_ms $put_share $sync_ms $zmq_ms $sync_ratio $msg_ms" \
    >>"$tmp/rows"
done

col() { awk -v c="$1" '{print $c}' "$tmp/rows" | median; }
all() { awk -v c="$1" '{printf "%s%.3g", (NR > 1 ? "/" : ""), $c}' "$tmp/rows"; }
echo "== medians of $n invocations [per invocation]"
printf '  step %.1f ms [%s]; store %.3f ms [%s] = %.2f%% of the step [%s] (target <= 2%%)\n' \
  "$(col 2)" "$(all 2)" "$(col 3)" "$(all 3)" "$(col 4)" "$(all 4)"
printf '  bench_traj: put_step %.3f ms [%s] vs raw synced put %.3f ms [%s]: %.2fx [%s];' \
  "$(col 5)" "$(all 5)" "$(col 6)" "$(all 6)" "$(col 7)" "$(all 7)"
printf ' no-sync put %.3f ms [%s]; put_step = %.2f%% of the step [%s]\n' \
  "$(col 8)" "$(all 8)" "$(col 9)" "$(all 9)"
printf '  sync %.3f ms [%s] vs raw ZeroMQ %.3f ms [%s]: %.2fx [%s] (target <= 2x); bench_sync message %.3f ms [%s]\n' \
  "$(col 10)" "$(all 10)" "$(col 11)" "$(all 11)" "$(col 12)" "$(all 12)" "$(col 13)" "$(all 13)"

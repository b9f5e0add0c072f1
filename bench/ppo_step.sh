#!/usr/bin/env bash
# The PPO step-time split beside GRPO's on the same recipe shape: 64 sequences a step from the
# cookbook's arith base (PPO: cookbook/ppo_lora.yaml, 64 prompts x 1 completion, 4 epochs of 2
# mini-batches, critic in the actor's process; GRPO: cookbook/grpo_lora.yaml with 8 prompts x 8
# completions, one update), 30 steps each, no evaluation, 2 samplers of 1 thread, an actor of 2
# threads. Per phase: the median over steps > 5 of its timing/* metric. Each invocation runs both
# back to back and records the load averages (/proc/loadavg) before and after; the medians over
# invocations are printed last.
#
#   bash bench/ppo_step.sh [BUILD_DIR (default build/release)] [INVOCATIONS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build/release}
n=${2:-3}
[ -x "$bdir/rlctl" ] || { echo "ppo_step: $bdir/rlctl is missing (build $bdir first)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rl_ppo_step.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

. bench/lib.sh # median, metric

common="train.steps=30 train.eval_every=0 data.eval=null train.save_every=0
  optim.warmup_steps=0 roles.samplers=2 roles.sampler_threads=1 roles.actor_threads=2"
ppo_phases="step generate reward reference values advantages train train_critic store sync"
grpo_phases="step generate reward reference train store sync"
for i in $(seq 1 "$n"); do
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  # shellcheck disable=SC2086
  "$bdir/rlctl" run cookbook/ppo_lora.yaml run.dir="$tmp/ppo$i" $common >"$tmp/ppo$i.log" 2>&1 ||
    { tail -20 "$tmp/ppo$i.log" >&2; exit 1; }
  # shellcheck disable=SC2086
  "$bdir/rlctl" run cookbook/grpo_lora.yaml run.dir="$tmp/grpo$i" $common train.batch_size=8 \
    train.micro_batch_size=32 >"$tmp/grpo$i.log" 2>&1 || { tail -20 "$tmp/grpo$i.log" >&2; exit 1; }
  load1=$(cut -d' ' -f1-3 /proc/loadavg)
  printf '== invocation %d: load before %s, after %s\n' "$i" "$load0" "$load1"
  for algo in ppo grpo; do
    phases=$ppo_phases
    [ "$algo" = grpo ] && phases=$grpo_phases
    line="  $algo:"
    for p in $phases; do
      v=$(metric "$tmp/$algo$i/metrics.jsonl" "timing/$p" 1000 | median)
      line="$line $p $(printf '%.1f' "$v")"
      echo "$v" >>"$tmp/$algo.$p"
    done
    echo "$line (ms, medians of steps 6-30)"
  done
done
echo "== medians of $n invocations (ms)"
for algo in ppo grpo; do
  phases=$ppo_phases
  [ "$algo" = grpo ] && phases=$grpo_phases
  line="  $algo:"
  for p in $phases; do
    line="$line $p $(printf '%.1f' "$(median <"$tmp/$algo.$p")")"
  done
  echo "$line"
done

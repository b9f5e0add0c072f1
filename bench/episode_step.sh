#!/usr/bin/env bash
# Multi-turn episodes (docs/envs.md): short real runs of cookbook/grpo_calc.yaml (20 steps, no
# evaluation; 16 questions x 8 episodes a step, the calc tool), three ways in each invocation:
#   kv      the built-in calc environment, samplers keeping each episode's KV cache between
#           turns (env.keep_kv_cache: true, the default)
#   nokv    the same without it: every turn prefills the whole episode so far
#   python  the kept cache, the environment as a program (cookbook/envs/calc_env.py)
# Per way, over steps > 5: the episode throughput (policy turns/s and tokens/s of the samplers,
# prefilled + decoded, over timing/generate, which holds the turns and the environment's
# answers), prefill tokens per step, and the environment's share of the step (timing/env /
# timing/step). Each invocation records the load averages before and after (a shared machine).
# Prints one block per invocation and the medians over invocations.
#
#   bash bench/episode_step.sh [BUILD_DIR (default build/release)] [INVOCATIONS (default 3)]
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build/release}
n=${2:-3}
[ -x "$bdir/rlctl" ] || { echo "episode_step: $bdir/rlctl is missing (build it first)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rl_episode_step.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

. bench/lib.sh # median, metric
# per-step ratio a/b of two metrics, then their median
ratio() { paste <(metric "$1" "$2") <(metric "$1" "$3") | awk '{ if ($2 > 0) print $1 / $2 }' |
  median; }

declare -A turns_s tok_s prefill share
ways="kv nokv python"
for i in $(seq 1 "$n"); do
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  for w in $ways; do
    extra=()
    case $w in
      nokv) extra=(env.keep_kv_cache=false) ;;
      python) extra=(env.builtin=null "env.command=[python3, cookbook/envs/calc_env.py]") ;;
    esac
    m="$tmp/$w$i/metrics.jsonl"
    "$bdir/rlctl" run cookbook/grpo_calc.yaml train.steps=20 train.eval_every=0 \
      train.save_every=0 run.dir="$tmp/$w$i" "${extra[@]}" > "$tmp/$w$i.log" 2>&1
    # episodes x turns per step / generation seconds; tokens: prefill + decode of the samplers
    ep=$(( 16 * 8 ))
    t=$(paste <(metric "$m" env/turns) <(metric "$m" timing/generate) |
      awk -v ep=$ep '{ if ($2 > 0) print ep * $1 / $2 }' | median)
    k=$(paste <(metric "$m" env/prefill_tokens) <(metric "$m" env/decode_tokens) \
      <(metric "$m" timing/generate) | awk '{ if ($3 > 0) print ($1 + $2) / $3 }' | median)
    p=$(metric "$m" env/prefill_tokens | median)
    s=$(ratio "$m" timing/env timing/step)
    turns_s[$w]+="$t "; tok_s[$w]+="$k "; prefill[$w]+="$p "; share[$w]+="$s "
    printf 'invocation %d %-6s  turns/s %8.1f  tokens/s %9.0f  prefill/step %7.0f  env share %.4f\n' \
      "$i" "$w" "$t" "$k" "$p" "$s"
  done
  echo "  load before/after: $load0 / $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "medians over $n invocations:"
for w in $ways; do
  printf '  %-6s  turns/s %8.1f  tokens/s %9.0f  prefill/step %7.0f  env share %.4f\n' "$w" \
    "$(tr ' ' '\n' <<< "${turns_s[$w]}" | grep . | median)" \
    "$(tr ' ' '\n' <<< "${tok_s[$w]}" | grep . | median)" \
    "$(tr ' ' '\n' <<< "${prefill[$w]}" | grep . | median)" \
    "$(tr ' ' '\n' <<< "${share[$w]}" | grep . | median)"
done

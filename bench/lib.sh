# bench/lib.sh — the helpers the step benchmarks share (sourced by grpo_step.sh, ppo_step.sh and
# episode_step.sh): the median of numbers, and a metric's values from a run's metrics.jsonl.

# median of the numbers on stdin, one per line ("nan" when there are none)
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan";
  else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# metric FILE KEY [SCALE]: the values of KEY in metrics.jsonl FILE at steps > 5 (the first steps
# warm caches and pools), one per line, as written, or times SCALE when one is given
metric() { awk -v key="\"$2\":" -v scale="${3:-}" '{
  s = $0; sub(/^.*"step":/, "", s); sub(/[,}].*$/, "", s)
  if (s + 0 <= 5) next
  i = index($0, key); if (!i) next
  v = substr($0, i + length(key)); sub(/[,}].*$/, "", v)
  if (scale == "") print v; else print v * scale }' "$1"; }

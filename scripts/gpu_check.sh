#!/usr/bin/env bash
# The GPU checks, in one command on a GPU machine (at most ~8 minutes): every `gpu` suite
# (each kernel against the CPU reference, the model against the CPU path, whole runs and the
# memory plan) and rlctl's logprobs and generate end to end on the GPU against the CPU
# (cli.device_e2e), the model against transformers on the same GPU (model.transformers:
# scripts/gpu_transformers.py), the cookbook's GRPO recipe on the GPU gaining as on the CPU
# (run.grpo_gpu), then the benchmark
# bench_gpu --quick (the training step and decode beside the measured gemm peak and copy
# bandwidth; the weight sync through CUDA IPC against the host path), each with its log
# under $OUT (or ./gpu_check.out), and a short table printed last with the device's name,
# driver and the date. Runs what scripts/gpu_pack.sh packed here into .gpu/ (the GPU machines
# lack our Debian libraries and a package registry): device tool call
#   carry [".gpu"], command "bash scripts/gpu_check.sh", timeout_s 540
# Each row is printed (and kept in $OUT/table.txt) as soon as it is known, and every step runs
# within RL_GPU_DEADLINE seconds of the start (480: a call of 540 s still prints its table);
# what the deadline leaves no time for is NOT RUN.
# Exits non-zero when a suite failed, was skipped or did not run (on a GPU machine nothing may
# skip).
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
out="${OUT:-$root/gpu_check.out}"
mkdir -p "$out"
[ -f .gpu/pack.tar.xz ] ||
  { echo "gpu_check: no .gpu/pack.tar.xz (run scripts/gpu_pack.sh here first)"; exit 2; }
pack=/tmp/rlctl-gpu
rm -rf "$pack" && mkdir -p "$pack" && tar -C "$pack" -xJf .gpu/pack.tar.xz ||
  { echo "gpu_check: cannot unpack .gpu/pack.tar.xz"; exit 2; }
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# the packed Open MPI (a mesh's launcher, mesh.gpu), relocated to its prefix here
if [ -x "$pack/ompi/bin/mpirun" ]; then
  export PATH="$pack/ompi/bin:$PATH" OPAL_PREFIX="$pack/ompi"
  export PMIX_MCA_mca_base_component_path="$pack/pmix/lib/pmix"
  export OMPI_MCA_mca_base_component_show_load_errors=0
fi
per_suite="${RL_GPU_SUITE_SECONDS:-240}"
# the suites that run rlctl (roles.gpu_run) run the packed one, on this checkout's cookbook
export RLCTL_BIN="$pack/bin/rlctl" RL_SOURCE_DIR="$root"
# NCCL (the module opens it for a mesh with a GPU per rank; model.cuda_core checks a group of one
# rank): torch's wheel's, where nothing else names one
if [ -z "${RLCTL_NCCL_LIBRARY:-}" ]; then
  nccl=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
  [ -n "$nccl" ] && [ -f "$nccl" ] && export RLCTL_NCCL_LIBRARY="$nccl"
fi
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader \
    2>&1 | sed 's/^/gpu /'
  uname -r | sed 's/^/kernel /'
} | tee "$out/device.txt"
status=0
rows=()
# every row as soon as it is known: printed, and in $out/table.txt (a run cut short by the device
# tool's limit still shows what it did); every step within the deadline (RL_GPU_DEADLINE
# seconds from the start, 480 by default: the device tool's call allows 540)
start=$(date +%s)
deadline=$((start + ${RL_GPU_DEADLINE:-480}))
: >"$out/table.txt"
row() { # NAME RESULT MILLISECONDS NOTE
  local r
  r=$(printf '%-28s %-10s %5d.%01d s  %s' "$1" "$2" $(($3 / 1000)) $((($3 % 1000) / 100)) "$4")
  rows+=("$r")
  echo "$r" | tee -a "$out/table.txt"
}
# runs "$@" for at most $1 seconds and what is left before the deadline; 200 when less than 5
# seconds are left (not run), 124 when it ran out of time
within() {
  local left=$((deadline - $(date +%s))) want=$1
  shift
  [ "$left" -lt "$want" ] && want=$left
  [ "$want" -ge 5 ] || return 200
  timeout "$want" "$@"
}
# a row's result from an exit status
result() {
  case $1 in
    0) echo pass ;;
    77) echo SKIPPED ;;
    124) echo TIMEOUT ;;
    200) echo "NOT RUN" ;;
    *) echo "FAIL($1)" ;;
  esac
}
# step NAME SECONDS NOTE COMMAND...: runs COMMAND from the checkout within SECONDS (and the
# deadline), its output in $out/NAME.log, then prints its row; NOTE is "head" or "tail" (the
# log's first or last line) or the note itself
step() {
  local name=$1 secs=$2 note=$3 t0 rc dt_ms
  shift 3
  t0=$(date +%s%N)
  (cd "$root" && within "$secs" "$@") >"$out/$name.log" 2>&1
  rc=$?
  dt_ms=$((($(date +%s%N) - t0) / 1000000))
  [ $rc -eq 0 ] || status=1
  case $note in
    head) note=$(head -n 1 "$out/$name.log" | cut -c1-60) ;;
    tail) note=$(tail -n 1 "$out/$name.log" | cut -c1-60) ;;
  esac
  row "$name" "$(result $rc)" "$dt_ms" "$note"
}
while read -r suite; do
  [ -n "$suite" ] || continue
  exe="$pack/bin/test_${suite//./_}"
  log="$out/${suite}.log"
  t0=$(date +%s%N)
  (cd "$root" && within "$per_suite" "$exe") >"$log" 2>&1
  rc=$?
  dt_ms=$((($(date +%s%N) - t0) / 1000000))
  res=$(result $rc)
  [ $rc -eq 0 ] || status=1
  checks=$(grep -Eo '[0-9]+ checks, [0-9]+ failed' "$log" | tail -n 1)
  row "$suite" "$res" "$dt_ms" "$checks"
done < "$pack/gpu_tests.txt"
# end to end through rlctl: logprobs and greedy generate on the GPU against the CPU (the same
# tokens, logprobs within 0.1), and sampling 64 x 100 tokens on each (tokens/s, median of 3)
e2e() {
  local m="$root/cookbook/models/arith-base" r="$pack/bin/rlctl"
  local p=(--model "$m" --prompt "47*3+512=") lp=(--completion "47*3=141;141+512=653 #### 653")
  "$r" logprobs "${p[@]}" "${lp[@]}" --json >"$out/e2e_lp_cpu.json" &&
    "$r" logprobs "${p[@]}" "${lp[@]}" --json --device cuda >"$out/e2e_lp_gpu.json" &&
    "$r" generate "${p[@]}" --temperature 0 --json >"$out/e2e_gen_cpu.json" &&
    "$r" generate "${p[@]}" --temperature 0 --json --device cuda >"$out/e2e_gen_gpu.json" ||
    return 1
  python3 - "$out" <<'PY' || return 1
import json, sys
o = sys.argv[1]
ld = lambda n: json.load(open(f"{o}/e2e_{n}.json"))
a, b = ld("lp_cpu"), ld("lp_gpu")
ga, gb = ld("gen_cpu")["samples"][0], ld("gen_gpu")["samples"][0]
w1 = max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"]))
w2 = max(abs(x - y) for x, y in zip(ga["logprobs"], gb["logprobs"]))
ok = a["completion_ids"] == b["completion_ids"] and ga["ids"] == gb["ids"] and max(w1, w2) < 0.1
print(f"logprobs worst {w1:.3g}, generate worst {w2:.3g}, same tokens {ga['ids'] == gb['ids']}")
sys.exit(0 if ok else 1)
PY
  for dev in cpu cuda; do
    for i in 1 2 3; do
      local t0=$(date +%s%N)
      "$r" generate "${p[@]}" --n 64 --max-new-tokens 100 --temperature 1 --seed $i \
        --device "$dev" --json >"$out/e2e_sample_$dev.json" || return 1
      echo "$dev $((($(date +%s%N) - t0) / 1000000))"
    done
  done
}
step cli.device_e2e 120 head \
  bash -c "$(declare -f e2e); root='$root' pack='$pack' out='$out' e2e"
# the model against transformers on the same GPU (scripts/gpu_transformers.py: arith-base and
# random llama and qwen3 models; transformers fp32 within 1e-3 of rlctl's CPU, rlctl's GPU as
# close to it as transformers' bf16, within a factor 2)
step model.transformers 150 tail python3 scripts/gpu_transformers.py "$pack/bin/rlctl" "$out"
# the cookbook's GRPO recipe on the GPU (every role there): 60 steps must gain as on the CPU
# (+22.0 points of eval/accuracy at temperature 1 on the CPU, 2026-11-28; bound +15)
grpo_gpu() {
  local r="$pack/bin/rlctl" d="$out/grpo_gpu"
  rm -rf "$d"
  "$r" run "$root/cookbook/grpo_lora.yaml" model.device=cuda train.steps=60 train.eval_every=60 \
    train.save_every=0 run.dir="$d" >"$out/grpo_gpu.run.log" 2>&1 || return 1
  python3 - "$d/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ev = [r["eval/accuracy"] for r in rows if "eval/accuracy" in r]
st = [r["timing/step"] for r in rows if "timing/step" in r]
gain = (ev[-1] - ev[0]) * 100
print(f"eval/accuracy {ev[0]:.3f} -> {ev[-1]:.3f} ({gain:+.1f} points; CPU +22.0), "
      f"median step {statistics.median(st):.2f} s")
sys.exit(0 if gain >= 15 else 1)
PY
}
step run.grpo_gpu 200 head \
  bash -c "$(declare -f grpo_gpu); root='$root' pack='$pack' out='$out' grpo_gpu"
# the benchmark (bench/bench_gpu.c): the device's bf16 gemm peak and copy bandwidth, then the
# 0.5B-shaped model's training step and decode beside them; its table is printed below
step bench_gpu "${RL_GPU_BENCH_SECONDS:-200}" "table below" \
  "$pack/bin/bench_gpu" --quick --json "$out/bench_gpu.json"
echo
grep '^|' "$out/bench_gpu.log"
echo
echo "=== gpu_check: $(sed -n 's/^gpu //p' "$out/device.txt" | head -n 1)"
printf '%-28s %-10s %9s  %s\n' suite result time checks
for r in "${rows[@]}"; do echo "$r"; done
exit $status

#!/usr/bin/env bash
# The GPU checks, in one command on a GPU machine (at most ~8 minutes): every `gpu` suite
# (each kernel against the CPU reference, the model against the CPU path), each with its log
# under $OUT (or ./gpu_check.out), and a short table printed last with the device's name,
# driver and the date. Runs what scripts/gpu_pack.sh packed here into .gpu/ (the GPU machines
# lack our Debian libraries and a package registry): device tool call
#   carry [".gpu"], command "bash scripts/gpu_check.sh", timeout_s 540
# Exits non-zero when a suite failed or was skipped (on a GPU machine nothing may skip).
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
per_suite="${RL_GPU_SUITE_SECONDS:-240}"
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader \
    2>&1 | sed 's/^/gpu /'
  uname -r | sed 's/^/kernel /'
} | tee "$out/device.txt"
status=0
rows=()
while read -r suite; do
  [ -n "$suite" ] || continue
  exe="$pack/bin/test_${suite//./_}"
  log="$out/${suite}.log"
  t0=$(date +%s%N)
  (cd "$root" && timeout "$per_suite" "$exe") >"$log" 2>&1
  rc=$?
  dt_ms=$((($(date +%s%N) - t0) / 1000000))
  case $rc in
    0) res=pass ;;
    77) res=SKIPPED; status=1 ;;
    124) res=TIMEOUT; status=1 ;;
    *) res="FAIL($rc)"; status=1 ;;
  esac
  checks=$(grep -Eo '[0-9]+ checks, [0-9]+ failed' "$log" | tail -n 1)
  rows+=("$(printf '%-28s %-10s %5d.%01d s  %s' "$suite" "$res" $((dt_ms / 1000)) \
    $(((dt_ms % 1000) / 100)) "$checks")")
done < "$pack/gpu_tests.txt"
echo
echo "=== gpu_check: $(sed -n 's/^gpu //p' "$out/device.txt" | head -n 1)"
printf '%-28s %-10s %9s  %s\n' suite result time checks
for r in "${rows[@]}"; do echo "$r"; done
exit $status

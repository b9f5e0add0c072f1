#!/usr/bin/env bash
# side_by_side — rlctl's training step beside PyTorch CPU and raw sgemm, in the same run, on the
# same machine, with the same thread count. Not a test.
#
#   rlctl    `bench_model train SIZE full|lora` (bench/bench_model.c): GFLOP/s of one
#            rl_model_forward(train) + rl_model_backward at B*T = 2048 tokens, T = 128 and 512,
#            and the raw cblas_sgemm ceiling on that step's own matmuls (attention excluded).
#   PyTorch  bench/torch_side.py: the same qwen2-style shapes, tokens and FLOP convention in plain
#            torch (Debian's python3-torch), forward + backward, median of several steps.
#   threads  bench_model sizes OpenBLAS to the CPUs it may run on (openblas_get_num_procs, which
#            follows the affinity mask; OPENBLAS_NUM_THREADS is overridden), so with THREADS below
#            the CPU count both sides run under `taskset` on the first THREADS allowed CPUs;
#            torch gets torch.set_num_threads + OPENBLAS_NUM_THREADS/OMP_NUM_THREADS = THREADS.
#            Both sides link the same system OpenBLAS (libblas.so.3 -> openblas-pthread here).
#            torch_side.py sets OMP_WAIT_POLICY=PASSIVE unless you set it: under libgomp's default
#            policy (spin a while after each parallel region) torch's OpenMP threads starve
#            OpenBLAS's and its 2-thread step ran ~2-3x slower here (OMP_WAIT_POLICY=ACTIVE
#            bash bench/side_by_side.sh shows a spinning configuration).
# GFLOP/s use the same FLOP count on both sides, so rlctl / PyTorch is the step-time speedup.
#
#   bash bench/side_by_side.sh [BUILD_DIR]       (default build/release; builds bench_model if missing)
#   THREADS=2 SIZES=1M,10M bash bench/side_by_side.sh     (defaults; 100M is slow: SIZES=...,100M)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
THREADS=${THREADS:-2}
SIZES=${SIZES:-1M,10M}
BM=$BUILD/bench/bench_model
PY=/usr/bin/python3

if [ ! -x "$BM" ]; then # one command for a newcomer: build the benchmark first
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j "$(nproc)" --target bench_model >/dev/null
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "$PY cannot import torch: apt-get install python3-torch" >&2
    exit 1
fi

# the CPUs this shell may use (cgroup / affinity), e.g. "0-1" or "0,2,4-7"; pin to the first THREADS
allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
ncpu=$(echo "$allowed" | awk -F, '{n = 0; for (i = 1; i <= NF; i++) {split($i, r, "-");
       n += (r[2] == "" ? 1 : r[2] - r[1] + 1)} print n}')
if [ "$THREADS" -gt "$ncpu" ]; then
    echo "THREADS=$THREADS but only $ncpu CPUs ($allowed) are available" >&2
    exit 1
fi
PIN=()
if [ "$THREADS" -lt "$ncpu" ]; then
    cpus=$(echo "$allowed" | awk -F, -v want="$THREADS" '{s = ""; n = 0
           for (i = 1; i <= NF && n < want; i++) {split($i, r, "-"); if (r[2] == "") r[2] = r[1]
               for (c = r[1]; c <= r[2] && n < want; c++) {s = s (n ? "," : "") c; n++}}
           print s}')
    PIN=(taskset -c "$cpus")
fi
export OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS

load0=$(cut -d' ' -f1 /proc/loadavg) # other work on the machine skews both sides
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# bench_model with no matching size prints only its machine line (CPU, threads, OpenBLAS core)
machine=$("${PIN[@]}" "$BM" --sizes none | grep '^machine:' || true)
for s in ${SIZES//,/ }; do
    for m in full lora; do
        echo "running rlctl $s $m ..." >&2
        "${PIN[@]}" "$BM" train "$s" "$m" >>"$tmp/rlctl"
    done
    echo "running torch $s ..." >&2
    "${PIN[@]}" "$PY" bench/torch_side.py --sizes "$s" --threads "$THREADS" >>"$tmp/torch"
done

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "${machine:-machine: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)}"
echo "CPUs available: $ncpu ($allowed), THREADS=$THREADS${PIN:+ (taskset -c $cpus)}," \
     "B*T = 2048 tokens, LoRA r 8 alpha 16 on all 7 projections"
grep -m1 '^torch ' "$tmp/torch" || true
awk -v a="$load0" '{printf "load average (1 min): %s before, %s after%s\n", a, $1,
     (a > 0.5) ? " (other work shared the CPUs: figures are noisy, rerun on a quiet machine)" : ""}' \
    /proc/loadavg
echo
# rlctl rows:  | train full 1M T=128 B=16 | 57.0 GFLOP/s (0.241 s/step, ...) | sgemm 110.9 ... |
#              | train LoRA r8 all 1M T=128 B=16 | ...
# torch rows:  | torch full 1M T=128 B=16 | 25.9 GFLOP/s (0.529 s/step, ...) | ... |
awk -F'|' '
function key(label,   n, w, i, size, t) {
    n = split(label, w, " ")
    for (i = 1; i <= n; i++) {
        if (w[i] ~ /^[0-9]+M$/) size = w[i]
        if (w[i] ~ /^T=/) t = substr(w[i], 3)
    }
    return size " " (label ~ /LoRA|lora/ ? "lora" : "full") " " t
}
function secs(cell,   s) { s = cell; sub(/^[^(]*\(/, "", s); sub(/ s\/step.*/, "", s); return s }
FNR == 1 { side++ }
$2 ~ /^ (train|torch) / {
    k = key($2); split($3, g, " ")
    if (side == 1) {
        if (!(k in rg)) order[++nk] = k
        rg[k] = g[1]; rs[k] = secs($3); split($4, c, " "); ceil[k] = c[2]
    } else { tg[k] = g[1]; ts[k] = secs($3) }
}
END {
    print "| model, mode, T | rlctl GFLOP/s (s/step) | PyTorch GFLOP/s (s/step) | rlctl / PyTorch | raw sgemm ceiling GFLOP/s | rlctl % of sgemm |"
    print "|---|---|---|---|---|---|"
    for (i = 1; i <= nk; i++) {
        k = order[i]; split(k, p, " ")
        pt = (k in tg) ? sprintf("%s (%s)", tg[k], ts[k]) : "—"
        ratio = (k in tg) && tg[k] > 0 ? sprintf("%.2fx", rg[k] / tg[k]) : "—"
        printf "| %s %s T=%s | %s (%s) | %s | %s | %s | %.0f%% |\n", p[1], p[2], p[3],
               rg[k], rs[k], pt, ratio, ceil[k], 100 * rg[k] / ceil[k]
    }
}' "$tmp/rlctl" "$tmp/torch"

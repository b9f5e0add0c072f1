#!/bin/sh
# The sharded step against the 1×1 step (tests/test_fsdp.c): for full and LoRA tuning and for
# SFT, GRPO and PPO's critic, a 1×1 run, then dp 2 × fsdp 1, dp 1 × fsdp 2 and dp 2 × fsdp 2
# under mpirun, each compared with the 1×1 run within the stated tolerances (10 rows: 3, 3, 2, 2
# over 4 ranks, so some ranks run idle micro-batches). Then LoRA on 4 rows over 2 ranks, where
# each rank's micro-batch is one of the 1×1 run's: SFT identical to the bit. GRPO and the critic
# also run forwards of the whole batch (logπ_old, values) that a rank runs on its half: a
# forward packs its sequences' rows, and OpenBLAS picks its small-matrix kernel (another
# summation order) by M·N·K, so the same row can round differently in a batch of 2 and of 4;
# those two are held to the stated tolerances. What mpirun needs here
# (root in CI, 4 ranks on 2 cores, one host) is set by the project: see tests/mesh.cmake.
# usage: fsdp_check.sh TEST_FSDP MPIEXEC OUTDIR
set -u
bin=$1
mpi="$2 --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,vader"
out=$3
rm -rf "$out"
mkdir -p "$out"
fails=0
# check TUNE ALGO ROWS "SHAPES" [exact]
check() {
    ref=$out/$1-$2-$3-1x1
    if ! "$bin" run 1 1 $1 $2 $3 "$ref" >"$ref.log" 2>&1; then
        cat "$ref.log"
        echo "FAIL $1 $2 $3 rows 1x1: the run failed"
        fails=$((fails + 1))
        return
    fi
    for shape in $4; do
        dp=${shape%x*}
        fsdp=${shape#*x}
        dir=$out/$1-$2-$3-$shape
        echo "== $1 $2, $3 rows, dp $dp x fsdp $fsdp ${5:-}"
        if ! $mpi -np $((dp * fsdp)) "$bin" run $dp $fsdp $1 $2 $3 "$dir" >"$dir.log" 2>&1; then
            cat "$dir.log"
            echo "FAIL $1 $2 ${shape}: the run failed"
            fails=$((fails + 1))
        elif ! "$bin" compare "$ref" "$dir" $dp $fsdp ${5:-}; then
            fails=$((fails + 1))
        fi
    done
}
for tune in full lora; do
    for algo in sft grpo critic; do
        check $tune $algo 10 "2x1 1x2 2x2"
    done
done
check lora sft 4 "2x1 1x2" exact
for algo in grpo critic; do
    check lora $algo 4 "2x1 1x2"
done
echo "fsdp_check: $fails failure(s)"
[ $fails -eq 0 ]

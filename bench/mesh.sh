#!/usr/bin/env bash
# The mesh benchmark (bench/bench_mesh.c) on a 9.5M-parameter qwen2-style model (hidden 256, 12
# layers, vocabulary 24), each figure the median of 3 invocations of 5 steps:
#   - per-rank bytes of parameters + gradients + optimizer state at fsdp 1, 2, 4 (full and LoRA),
#     against 1/fsdp of the 1×1 figure;
#   - training tokens/s at dp 1 and dp 2 (one BLAS thread per rank), against twice the 1×1
#     figure, and the seconds per step spent in collectives.
# usage: bench/mesh.sh [BUILD_DIR]   (default build/release, built by bench/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(cd "${1:-build/release}" && pwd)
M=$B/bench_mesh_model
MPI="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca btl self,vader"
[ "$(id -u)" = 0 ] && MPI="$MPI --allow-run-as-root"
if [ ! -f "$M/model.safetensors" ]; then
  cat > "$B/bench_mesh_config.json" <<'JSON'
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 24,
 "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 12,
 "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "hidden_act": "silu",
 "max_position_embeddings": 256, "initializer_range": 0.02, "rms_norm_eps": 1e-6,
 "rope_theta": 10000.0, "tie_word_embeddings": true, "torch_dtype": "float32",
 "bos_token_id": 21, "eos_token_id": 21}
JSON
  "$B/rlctl" init --config "$B/bench_mesh_config.json" \
    --tokenizer cookbook/models/arith-base/tokenizer.json --out "$M" --force >/dev/null
fi
run() { # DP FSDP TUNE: the median line of 3 invocations (by step time)
  local n=$(($1 * $2)) lines=()
  for i in 1 2 3; do
    if [ "$n" = 1 ]; then
      lines+=("$("$B/bench/bench_mesh" "$1" "$2" "$3" "$M" 16 128 5)")
    else
      lines+=("$($MPI -np "$n" "$B/bench/bench_mesh" "$1" "$2" "$3" "$M" 16 128 5)")
    fi
  done
  printf '%s\n' "${lines[@]}" |
    awk '{for (i = 1; i <= NF; i++) if ($i == "step") { print $(i + 1) "\t" $0; break }}' |
    sort -n | sed -n 2p | cut -f2-
}
for tune in ${MESH_TUNES:-full lora}; do
  for shape in "1 1" "1 2" "1 4" "2 1"; do
    run $shape $tune
  done
done

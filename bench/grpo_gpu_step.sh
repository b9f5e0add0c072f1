#!/usr/bin/env bash
# The GRPO step on a GPU (issue 31, "Measured"): rlctl's phases, the medians over every step
# after the first of timing/generate, timing/reference, timing/train, timing/sync and
# timing/step, for
#   cookbook  cookbook/grpo_lora.yaml as it is (16 prompts x 8 completions of up to 40 tokens,
#             LoRA r 8 on all 7 projections), on the GPU and on this machine's CPU;
#   0.5B      a Qwen2.5-0.5B-shaped model (rlctl init: random weights; the arith tokenizer, whose
#             24 ids are all the random model can end on, so the completions run their full
#             length), 64 prompts x 8 completions x 256 tokens, the cookbook's LoRA, on the GPU.
# The PyTorch loop doing the same work on the same GPU is python3 bench/torch_gpu_side.py --grpo;
# its rows sit beside these in bench/RESULTS.md.
#
#   bash bench/grpo_gpu_step.sh [RLCTL (default build/release/rlctl)] [--tiny] [--steps N]
#     --tiny     a toy model (hidden 64) and 8 x 4 x 16 instead of 0.5B: to try the script on
#                the emulated module (RLCTL_CUDA_MODULE, tests/cuemu)
#     --steps N  steps per run (default 4: the first is not counted)
set -euo pipefail
cd "$(dirname "$0")/.."
rlctl=build/release/rlctl
tiny=0
steps=4
while [ $# -gt 0 ]; do
  case $1 in
    --tiny) tiny=1 ;;
    --steps) steps=$2; shift ;;
    -*) echo "usage: grpo_gpu_step.sh [RLCTL] [--tiny] [--steps N]" >&2; exit 2 ;;
    *) rlctl=$1 ;;
  esac
  shift
done
[ -x "$rlctl" ] || { echo "grpo_gpu_step: $rlctl is not there (build it first)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/rl_grpo_gpu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# median of the values of KEY in metrics.jsonl FILE at steps >= 2, in ms ("-" when none)
phase() { awk -v key="\"$2\":" '{
  s = $0; sub(/^.*"step":/, "", s); sub(/[,}].*$/, "", s)
  if (s + 0 < 2) next
  i = index($0, key); if (!i) next
  v = substr($0, i + length(key)); sub(/[,}].*$/, "", v); print v * 1000 }' "$1" |
  sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-";
    else printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# run NAME DEVICE WHAT [overrides...]: one run, one row
run() {
  local name=$1 dev=$2 what=$3
  shift 3
  local d="$tmp/$name"
  if ! "$rlctl" run cookbook/grpo_lora.yaml run.dir="$d" model.device="$dev" \
      train.steps="$steps" train.eval_every=0 data.eval=null train.save_every=0 \
      optim.warmup_steps=0 "$@" >"$tmp/$name.log" 2>&1; then
    tail -n 20 "$tmp/$name.log" >&2
    echo "| grpo step | rlctl $dev $what | FAILED (log above) |"
    return 1
  fi
  local m="$d/metrics.jsonl"
  printf '| grpo step | rlctl %s %s | generate %s ms, reference %s, train %s, sync %s; step %s ms |\n' \
    "$dev" "$what" "$(phase "$m" timing/generate)" "$(phase "$m" timing/reference)" \
    "$(phase "$m" timing/train)" "$(phase "$m" timing/sync)" "$(phase "$m" timing/step)"
}

if [ $tiny = 1 ]; then
  cfg='{"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 160,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "vocab_size": 512, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "max_position_embeddings": 512, "tie_word_embeddings": true}'
  big="tiny"; P=8; G=4; NEW=16
else # Qwen2.5-0.5B's config.json
  cfg='{"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "head_dim": 64,
    "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "max_position_embeddings": 32768, "tie_word_embeddings": true}'
  big="qwen2.5-0.5B"; P=64; G=8; NEW=256
fi
echo "$cfg" >"$tmp/config.json"
"$rlctl" init --config "$tmp/config.json" --tokenizer cookbook/models/arith-init/tokenizer.json \
  --out "$tmp/model" --seed 0 >"$tmp/init.log" 2>&1 ||
  { cat "$tmp/init.log" >&2; exit 1; }
echo "grpo_gpu_step: $("$rlctl" devices 2>/dev/null | grep -m1 '^cuda:0' || echo 'no GPU listed')"
echo
echo "| section | what | result |"
echo "|---|---|---|"
status=0
run cookbook_cuda cuda "cookbook 16x8x40" || status=1
run cookbook_cpu cpu "cookbook 16x8x40" || status=1
run big cuda "$big LoRA r8 ${P}x${G}x${NEW}" model.path="$tmp/model" train.batch_size=$P \
  algorithm.num_generations=$G sampling.max_new_tokens=$NEW train.micro_batch_size=32 \
  roles.samplers=1 || status=1
exit $status

#!/usr/bin/env python3
"""gpu_transformers — rlctl's model on the GPU against transformers on the same GPU (issue 27:
"logits/logp against PyTorch + transformers on the same GPU in bf16, tolerances stated"). Run
by scripts/gpu_check.sh on a GPU machine (torch and transformers installed there).

usage: python3 scripts/gpu_transformers.py RLCTL OUT_DIR

Models: the cookbook's trained arith-base (qwen2, tied embeddings, q/k/v biases), and random
llama (untied, GQA) and qwen3 (untied, q/k norm) models that `rlctl init` makes with the arith
tokenizer and initializer_range 0.25 (so that their logits spread: 0.02 gives near-uniform
softmaxes). Texts: three arith problems, a right, a wrong and a garbled completion each, so
the completion's tokens range from near-certain to unlikely. For each, the completion's token
logprobs at temperature 1 (prompt and completion encoded apart, as `rlctl logprobs` does):

  cpu32  rlctl logprobs on the CPU (fp32; tests/test_model_torch.c ties this path to PyTorch)
  gpu    rlctl logprobs --device cuda (bf16 weights and matmuls, fp32 activations)
  hf32   transformers' AutoModelForCausalLM of the same folder in float32 on the GPU
  hf16   the same in bfloat16 (what a transformers user runs)

Passes when, for every model, |hf32 - cpu32| <= 1e-3 everywhere (transformers reads rlctl's
folder as the same model) and |gpu - cpu32| <= max(2 * max |hf16 - cpu32|, 0.02) (rlctl's bf16
path is as close to the fp32 result as transformers' own bf16, within a factor 2). Prints a line
per model and a last line "transformers: PASS|FAIL ..."; writes OUT_DIR/transformers.json.
Exit 0 (pass), 1 (fail), 77 (no torch, transformers or CUDA: nothing compared).
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_DEVICE = "cuda"
TOK = os.path.join(ROOT, "cookbook", "models", "arith-init", "tokenizer.json")
PROBLEMS = [
    ("47*3+512=", ["47*3=141;141+512=653 #### 653", "47*3=142;142+512=654 #### 654",
                   "7;=3 4*1 #### 99+"]),
    ("908-15*6=", ["15*6=90;908-90=818 #### 818", "15*6=96;908-96=812 #### 812",
                   "####;;6 0=8"]),
    ("12+34=", ["12+34=46 #### 46", "12+34=47 #### 47", "4 4 4 4 #### 1"]),
]


def config(model_type):
    """A small random model's config.json for the arith tokenizer (24 ids, bos/eos 21)."""
    c = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}[model_type]],
        "model_type": model_type, "vocab_size": 24, "hidden_size": 64,
        "intermediate_size": 176, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "hidden_act": "silu",
        "max_position_embeddings": 128, "initializer_range": 0.25, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": False,
        "torch_dtype": "float32", "bos_token_id": 21, "eos_token_id": 21,
        "attention_bias": False,
    }
    if model_type == "llama":
        c["mlp_bias"] = False
    return c


def rlctl_logprobs(rlctl, model, prompt, completion, device):
    args = [rlctl, "logprobs", "--model", model, "--prompt", prompt, "--completion", completion,
            "--json"] + (["--device", device] if device else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1])
        return 2
    rlctl, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"transformers: NOT RUN (no {e.name})")
        return 77
    if not torch.cuda.is_available():
        print("transformers: NOT RUN (torch sees no CUDA device)")
        return 77
    models = [("arith-base (qwen2, tied)", os.path.join(ROOT, "cookbook", "models", "arith-base"))]
    for mt, name in (("llama", "llama (untied, GQA)"), ("qwen3", "qwen3 (untied, q/k norm)")):
        d = os.path.join(out_dir, "tf_" + mt)
        os.makedirs(d, exist_ok=True)
        cfg = os.path.join(out_dir, f"tf_{mt}.json")
        with open(cfg, "w") as f:
            json.dump(config(mt), f)
        subprocess.run([rlctl, "init", "--config", cfg, "--tokenizer", TOK, "--out", d, "--seed",
                        "7", "--force"], check=True, capture_output=True)
        models.append((name, d))

    report, ok = [], True
    for name, path in models:
        # the folder's fp32 weights, and their bf16 rounding (as loading with a bf16 dtype does;
        # .to() works across transformers' versions, whose dtype argument changed its name)
        ref = {}
        for dt in (torch.float32, torch.bfloat16):
            m = transformers.AutoModelForCausalLM.from_pretrained(path)
            ref[dt] = m.to(device=TORCH_DEVICE, dtype=dt).eval()
            assert next(ref[dt].parameters()).dtype == dt
        worst = {"hf32": 0.0, "hf16": 0.0, "gpu": 0.0, "gpu_hf16": 0.0}
        n = 0
        for prompt, completions in PROBLEMS:
            for comp in completions:
                a = rlctl_logprobs(rlctl, path, prompt, comp, None)
                g = rlctl_logprobs(rlctl, path, prompt, comp, "cuda")
                if g["completion_ids"] != a["completion_ids"]:
                    raise SystemExit(f"{name}: the GPU run encoded {comp!r} otherwise")
                ids = a["prompt_ids"] + a["completion_ids"]
                p = len(a["prompt_ids"])
                x = torch.tensor([ids], device=TORCH_DEVICE)
                lp = {}
                with torch.no_grad():
                    for dt, m in ref.items():
                        logits = m(input_ids=x).logits[0].float()
                        ls = torch.log_softmax(logits, dim=-1)
                        tgt = torch.tensor(a["completion_ids"], device=TORCH_DEVICE)
                        lp[dt] = ls[p - 1:len(ids) - 1].gather(1, tgt[:, None])[:, 0].tolist()
                for j, c32 in enumerate(a["logprobs"]):
                    worst["hf32"] = max(worst["hf32"], abs(lp[torch.float32][j] - c32))
                    worst["hf16"] = max(worst["hf16"], abs(lp[torch.bfloat16][j] - c32))
                    worst["gpu"] = max(worst["gpu"], abs(g["logprobs"][j] - c32))
                    worst["gpu_hf16"] = max(worst["gpu_hf16"],
                                            abs(g["logprobs"][j] - lp[torch.bfloat16][j]))
                    n += 1
        bound = max(2 * worst["hf16"], 0.02)
        good = worst["hf32"] <= 1e-3 and worst["gpu"] <= bound
        ok = ok and good
        print(f"{name}: {n} tokens; |hf32-cpu32| {worst['hf32']:.2g} (<= 1e-3), "
              f"|hf16-cpu32| {worst['hf16']:.3g}, |gpu-cpu32| {worst['gpu']:.3g} (<= {bound:.3g}), "
              f"|gpu-hf16| {worst['gpu_hf16']:.3g}: {'ok' if good else 'FAIL'}")
        report.append({"model": name, "tokens": n, "bound": bound, "ok": good, **worst})
        del ref
        torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "transformers.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "device": torch.cuda.get_device_name(0), "models": report}, f, indent=1)
    print(f"transformers: {'PASS' if ok else 'FAIL'} (torch {torch.__version__}, transformers "
          f"{transformers.__version__}, {len(report)} models)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

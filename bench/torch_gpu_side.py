#!/usr/bin/env python3
# torch_gpu_side — the PyTorch peer of bench/bench_gpu.c on the same GPU (issue 27, "Measured"):
# the work a user of transformers would run instead, with bench_gpu's shapes, so the rows
# compare line by line.
#
#   model   transformers' Qwen2ForCausalLM with the Qwen2.5-0.5B / -1.5B configs (random
#           weights, tied embeddings), bf16, SDPA attention.
#   train   forward + backward of -mean(token logprobs) over B*T = 16384 tokens at T 1024 and
#           4096: full (every parameter trains), and LoRA r 16 (alpha 32) on all 7 projections
#           through peft when it is installed (the row says so when it is not). One warm-up
#           step, then the median of 3; tokens/s and the same model FLOPs as bench_gpu (PaLM's
#           convention), TFLOP/s.
#   attn_train  scaled_dot_product_attention alone (causal, bf16, GQA in the kernel where torch
#           has it) at bench_gpu's attn_train shapes (16384 tokens, T 1024 and 4096, both head
#           shapes): forward, and backward with its forward outside the clock; TFLOP/s counted
#           as bench_gpu counts them (forward 2 T^2 D per head and sequence, backward 2.5 times).
#   decode  model.generate of batch 1, 64 and 256 prompts of 128 random tokens, exactly NEW new
#           tokens (min_new_tokens = max_new_tokens), sampling at temperature 1 with no top-k:
#           new tokens/s of the whole call.
#
#   grpo    (--grpo instead of the above) the GRPO step of bench/grpo_gpu_step.sh's 0.5B run the
#           way a transformers user writes it (TRL's GRPOTrainer without vLLM does this work):
#           model.generate of 8 completions of each of 64 random 9-token prompts, exactly 256
#           new tokens at temperature 1; the old logprobs (a no-grad forward, micro-batches of
#           32); one update: the clipped-ratio loss (epsilon 0.2, token mean) over micro-batches
#           of 32, the gradient clipped to norm 1, AdamW (lr 1e-3); LoRA r 8, alpha 16 on all 7
#           projections (the cookbook's). Rewards are random 0/1 (the arith reward of random
#           text is 0 everywhere, which would leave nothing to train). No weight sync: the
#           sampler is the trained model. One warm-up step, then the medians of 3.
#
#   python3 bench/torch_gpu_side.py [--quick] [--grpo] [--json FILE]
#     --quick  the 0.5B shape only, decode 64 new tokens, one timed call (as bench_gpu --quick)
# Prints one markdown row per figure, as bench_gpu does.
import argparse
import json
import statistics
import sys
import time

SHAPES = {  # name: (C, I, L, NH, NKV, D, V), as bench_gpu.c's
    "qwen2.5-0.5B": (896, 4864, 24, 14, 2, 64, 151936),
    "qwen2.5-1.5B": (1536, 8960, 28, 12, 2, 128, 151936),
}
TOKENS = 16384


def params(shape, r):
    C, I, L, NH, NKV, D, V = shape
    QD, KVD = NH * D, NKV * D
    per = C * QD + 2 * C * KVD + QD * C + 3 * C * I
    lora = r * ((C + QD) + 2 * (C + KVD) + (QD + C) + 2 * (C + I) + (I + C))
    return L * per + V * C, L * lora


def make(torch, name, lora, r=16, alpha=32):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    C, I, L, NH, NKV, D, V = SHAPES[name]
    cfg = Qwen2Config(hidden_size=C, intermediate_size=I, num_hidden_layers=L,
                      num_attention_heads=NH, num_key_value_heads=NKV, vocab_size=V,
                      max_position_embeddings=32768, rope_theta=1e6, tie_word_embeddings=True,
                      attn_implementation="sdpa")
    m = Qwen2ForCausalLM(cfg).to("cuda", torch.bfloat16)
    if lora:
        from peft import LoraConfig, get_peft_model

        m = get_peft_model(m, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0,
                                         target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                         "gate_proj", "up_proj", "down_proj"]))
    return m


def train(torch, name, lora, T, out):
    what = "%s %s T=%d B=%d" % (name, "LoRA r16" if lora else "full", T, TOKENS // T)
    try:
        m = make(torch, name, lora)
    except ImportError as e:
        print("| train | torch %s | not run: %s |" % (what, e))
        return
    m.train()
    g = torch.Generator(device="cuda").manual_seed(7)
    ids = torch.randint(0, SHAPES[name][6], (TOKENS // T, T), device="cuda", generator=g)

    def step():
        logits = m(input_ids=ids).logits
        lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])
        (-lp.mean()).backward()

    times = []
    for rep in range(4):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        if rep:
            times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    N, n_lora = params(SHAPES[name], 16)
    L, QD = SHAPES[name][2], SHAPES[name][3] * SHAPES[name][5]
    attn = 6 * L * T * QD * TOKENS
    flops = (4 * N * TOKENS + 6 * n_lora * TOKENS + attn) if lora else (6 * N * TOKENS + attn)
    print("| train | torch %s | %.0f tokens/s, %.3f s/step, %.3g TFLOP/s |"
          % (what, TOKENS / sec, sec, flops / sec / 1e12))
    out.append({"section": "train", "what": "torch " + what, "value": TOKENS / sec,
                "unit": "tokens/s"})
    del m
    torch.cuda.empty_cache()


def decode(torch, name, new, reps, out):
    m = make(torch, name, False).eval()
    g = torch.Generator(device="cuda").manual_seed(11)
    for b in (1, 64, 256):
        ids = torch.randint(0, SHAPES[name][6], (b, 128), device="cuda", generator=g)
        times = []
        for rep in range(reps + (reps > 1)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                           temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new,
                           min_new_tokens=new, pad_token_id=0)
            torch.cuda.synchronize()
            if rep or reps == 1:
                times.append(time.perf_counter() - t0)
        tps = b * new / statistics.median(times)
        what = "%s batch %d, prompt 128, %d new" % (name, b, new)
        print("| decode | torch %s | %.0f tokens/s |" % (what, tps))
        out.append({"section": "decode", "what": "torch " + what, "value": tps,
                    "unit": "tokens/s"})
    del m
    torch.cuda.empty_cache()


def attn_train(torch, name, T, out, device="cuda", tokens=TOKENS, reps=5):
    """SDPA alone (causal, bf16, GQA) at a training step's shape: bench_gpu's attn_train row."""
    import torch.nn.functional as F

    C, I, L, NH, NKV, D, V = SHAPES[name]
    B = tokens // T
    g = torch.Generator(device=device).manual_seed(5)
    q = torch.randn(B, NH, T, D, device=device, generator=g).to(torch.bfloat16).requires_grad_()
    k = torch.randn(B, NKV, T, D, device=device, generator=g).to(torch.bfloat16).requires_grad_()
    v = torch.randn(B, NKV, T, D, device=device, generator=g).to(torch.bfloat16).requires_grad_()
    dout = torch.randn(B, NH, T, D, device=device, generator=g).to(torch.bfloat16)
    try:  # GQA inside the kernel (torch >= 2.5); else k and v repeated, as transformers did
        F.scaled_dot_product_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], is_causal=True,
                                       enable_gqa=True)
        gqa = True
    except TypeError:
        gqa = False

    def fwd():
        if gqa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        r = NH // NKV
        return F.scaled_dot_product_attention(q, k.repeat_interleave(r, 1),
                                              v.repeat_interleave(r, 1), is_causal=True)

    def timed(f):
        times = []
        for rep in range(reps + 1):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            f()
            if device == "cuda":
                torch.cuda.synchronize()
            if rep:
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    tf = timed(lambda: fwd().detach())
    o = [None]

    def step():  # the backward alone: its forward outside the clock
        o[0] = fwd()
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        o[0].backward(dout)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    step()
    tb = statistics.median([step() for _ in range(reps)])
    fl = 2.0 * T * T * D * NH * B
    what = "sdpa %s heads (NH %d, NKV %d, D %d), T=%d, %d tokens%s" % (
        name, NH, NKV, D, T, tokens, "" if gqa else " (k, v repeated)")
    print("| attn_train | torch %s | forward %.2f ms (%.3g TFLOP/s); backward %.2f ms "
          "(%.3g TFLOP/s) |" % (what, tf * 1e3, fl / tf / 1e12, tb * 1e3, 2.5 * fl / tb / 1e12))
    out.append({"section": "attn_train", "what": "torch %s forward" % what,
                "value": fl / tf / 1e12, "unit": "TFLOP/s"})
    out.append({"section": "attn_train", "what": "torch %s backward" % what,
                "value": 2.5 * fl / tb / 1e12, "unit": "TFLOP/s"})


def grpo(torch, name, out, P=64, G=8, new=256, prompt=9, mb=32, reps=3):
    what = "%s LoRA r8 %dx%dx%d" % (name, P, G, new)
    try:
        m = make(torch, name, True, r=8, alpha=16)
    except ImportError as e:
        print("| grpo step | torch %s | not run: %s |" % (what, e))
        return
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    g = torch.Generator(device="cuda").manual_seed(5)
    prompts = torch.randint(0, SHAPES[name][6], (P, prompt), device="cuda", generator=g)

    def completion_logprobs(x):  # logp of x's completion tokens, (rows, new) fp32
        logits = m(input_ids=x).logits[:, prompt - 1:-1].float()
        return torch.log_softmax(logits, -1).gather(-1, x[:, prompt:, None]).squeeze(-1)

    def timed(f):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = f()
        torch.cuda.synchronize()
        return r, time.perf_counter() - t0

    phases = {"generate": [], "logprobs": [], "train": []}
    for rep in range(reps + 1):
        m.eval()

        def generate():
            with torch.no_grad():
                return m.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                                  do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                  max_new_tokens=new, min_new_tokens=new,
                                  num_return_sequences=G, pad_token_id=0)

        seqs, t_gen = timed(generate)

        def old_logprobs():
            with torch.no_grad():
                return torch.cat([completion_logprobs(seqs[i:i + mb])
                                  for i in range(0, seqs.shape[0], mb)])

        old, t_lp = timed(old_logprobs)
        r = torch.randint(0, 2, (P, G), device="cuda", generator=g).float()
        adv = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).reshape(-1)
        m.train()

        def update():
            opt.zero_grad(set_to_none=True)
            n_tok = seqs.shape[0] * new
            for i in range(0, seqs.shape[0], mb):
                ratio = torch.exp(completion_logprobs(seqs[i:i + mb]) - old[i:i + mb])
                a = adv[i:i + mb, None]
                loss = -torch.min(ratio * a, torch.clamp(ratio, 0.8, 1.2) * a).sum() / n_tok
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()

        _, t_train = timed(update)
        if rep:
            phases["generate"].append(t_gen)
            phases["logprobs"].append(t_lp)
            phases["train"].append(t_train)
    med = {k: 1000 * statistics.median(v) for k, v in phases.items()}
    step = sum(med.values())
    print("| grpo step | torch cuda %s | generate %.1f ms, logprobs %.1f, train %.1f, sync 0; "
          "step %.1f ms |" % (what, med["generate"], med["logprobs"], med["train"], step))
    out.append({"section": "grpo", "what": "torch " + what, "value": step, "unit": "ms"})
    del m, opt
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--grpo", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("torch_gpu_side: no GPU for torch %s" % torch.__version__, file=sys.stderr)
        return 77
    import transformers

    print("torch_gpu_side: torch %s, transformers %s, %s\n"
          % (torch.__version__, transformers.__version__, torch.cuda.get_device_name(0)))
    print("| section | what | result |\n|---|---|---|")
    out = []
    for name in list(SHAPES)[:1] if a.grpo else []:
        grpo(torch, name, out)
    for name in list(SHAPES)[:1 if a.quick else 2] if not a.grpo else []:
        for T in (1024, 4096):
            for lora in (True, False):
                train(torch, name, lora, T, out)
        decode(torch, name, 64 if a.quick else 256, 1 if a.quick else 3, out)
    for name in list(SHAPES) if not a.grpo else []:  # the attention alone: both head shapes
        for T in (1024, 4096):
            attn_train(torch, name, T, out)
    if a.json:
        with open(a.json, "w") as f:
            for o in out:
                f.write(json.dumps(o) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

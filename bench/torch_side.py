#!/usr/bin/python3
# torch_side — the PyTorch CPU side of bench/side_by_side.sh: the training step of
# bench_model.c (`bench_model train SIZE full|lora`) rebuilt in plain torch (no transformers),
# same shapes, same token count, same FLOP convention, so the two GFLOP/s figures compare.
#
#   model   qwen2-style decoder written out below: embedding; per layer RMSNorm (eps 1e-6) ->
#           q/k/v Linear with bias -> RoPE (theta 1e6, rotate_half) -> causal GQA attention ->
#           o Linear (no bias) -> residual; RMSNorm -> gate/up (no bias) -> SiLU(gate)*up -> down
#           -> residual; final RMSNorm; tied lm_head; log_softmax gathered at the next token.
#           Sizes 1M / 10M / 100M are bench_model.c's s_sizes (C, I, L, NH, NKV, V; D = C/NH).
#           Attention is matmul + causal mask + softmax: torch 1.13 (Debian's python3-torch) has
#           no F.scaled_dot_product_attention; it is used when present (torch >= 2.0).
#   step    forward + backward of loss = -sum(token logprobs)/tokens (rlctl's dlogp = -1/tokens),
#           B*T = 2048 tokens, T = 128 (B 16) and 512 (B 4). full: every parameter trains.
#           lora: base frozen, rank-8 A/B (alpha 16, scale 2) on all 7 projections, B random
#           (not zero) so every gradient path runs. Grads are zeroed in place outside the timed
#           step (backward accumulates into them, as rlctl's does). One untimed warm-up step,
#           then the median of --steps (default as bench_model: 7 / 4 / 2 by model size).
#   threads --threads for torch.set_num_threads, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, and
#           OMP_WAIT_POLICY=PASSIVE unless set (see below: spinning OpenMP threads halve speed).
#   FLOPs   bench_model's: full 6*N*tok + 6*L*T*QD*tok; lora 4*N*tok + 6*N_lora*tok +
#           6*L*T*QD*tok; N = base parameters (tied embedding once), N_lora = adapter parameters.
#
#   /usr/bin/python3 bench/torch_side.py [--sizes 1M,10M] [--modes full,lora] [--T 128,512]
#                                        [--threads 2] [--steps N]
# Prints one markdown row per (size, mode, T):
#   | torch full 1M T=128 B=16 | 12.3 GFLOP/s (0.456 s/step, 4491 tok/s) | N=1.05M N_lora=0 |
import argparse
import os
import statistics
import sys
import time

SIZES = {  # name: (C, I, L, NH, NKV, V), as bench_model.c's s_sizes
    "1M": (128, 384, 4, 4, 2, 2048),
    "10M": (256, 1024, 8, 4, 2, 8192),
    "100M": (1024, 2816, 8, 16, 4, 8192),
}
TOKENS = 2048

ap = argparse.ArgumentParser(description="PyTorch CPU training step on bench_model's shapes")
ap.add_argument("--sizes", default="1M,10M")
ap.add_argument("--modes", default="full,lora")
ap.add_argument("--T", default="128,512")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--steps", type=int, default=0, help="timed steps (0: 7 / 4 / 2 by size)")
args = ap.parse_args()

# OpenBLAS (torch's BLAS on Debian) reads its thread count when torch loads it. libgomp's
# threads (torch's elementwise ops) spin after each parallel region and starve OpenBLAS's own
# pthreads of the same cores: with the default (active) wait policy a 2-thread step runs ~2-3x
# slower here. PASSIVE unless the caller chose a policy.
os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)
SDPA = hasattr(F, "scaled_dot_product_attention")


class RMSNorm(nn.Module):
    def __init__(self, C, eps=1e-6):
        super().__init__()
        self.w, self.eps = nn.Parameter(torch.ones(C)), eps

    def forward(self, x):
        return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LoRALinear(nn.Module):
    """Frozen base Linear + (alpha/r) * x A^T B^T."""

    def __init__(self, base, r=8, alpha=16.0):
        super().__init__()
        self.base, self.scale = base, alpha / r
        self.A = nn.Parameter(torch.randn(r, base.in_features) * 0.02)
        self.B = nn.Parameter(torch.randn(base.out_features, r) * 0.02)  # not zero: see header

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.A), self.B) * self.scale


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Layer(nn.Module):
    def __init__(self, C, I, NH, NKV):
        super().__init__()
        self.NH, self.NKV, self.D = NH, NKV, C // NH
        self.ln1, self.ln2 = RMSNorm(C), RMSNorm(C)
        self.q = nn.Linear(C, NH * self.D)
        self.k = nn.Linear(C, NKV * self.D)
        self.v = nn.Linear(C, NKV * self.D)
        self.o = nn.Linear(NH * self.D, C, bias=False)
        self.gate = nn.Linear(C, I, bias=False)
        self.up = nn.Linear(C, I, bias=False)
        self.down = nn.Linear(I, C, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        h = self.ln1(x)
        q = self.q(h).view(B, T, self.NH, self.D).transpose(1, 2)
        k = self.k(h).view(B, T, self.NKV, self.D).transpose(1, 2)
        v = self.v(h).view(B, T, self.NKV, self.D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        g = self.NH // self.NKV  # GQA: each kv head serves g query heads (HF repeat_kv)
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        if SDPA:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) * self.D**-0.5
            a = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(B, T, -1))
        h = self.ln2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, C, I, L, NH, NKV, V):
        super().__init__()
        self.D = C // NH
        self.wte = nn.Embedding(V, C)
        self.layers = nn.ModuleList(Layer(C, I, NH, NKV) for _ in range(L))
        self.norm = RMSNorm(C)
        for n, p in self.named_parameters():  # HF-like init; biases zero, norms one
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif n.endswith(("q.bias", "k.bias", "v.bias")):
                nn.init.zeros_(p)

    def forward(self, tok):
        B, T = tok.shape
        inv = 1.0 / (1e6 ** (torch.arange(0, self.D, 2, dtype=torch.float32) / self.D))
        f = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        x = self.wte(tok)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logits = F.linear(self.norm(x), self.wte.weight)  # tied lm_head
        # logprob of the next token at every position (the last wraps around: same FLOPs)
        return torch.log_softmax(logits, dim=-1).gather(-1, tok.roll(-1, 1).unsqueeze(-1))


def bench(name, mode, T):
    C, I, L, NH, NKV, V = SIZES[name]
    torch.manual_seed(42)
    m = Model(C, I, L, NH, NKV, V)
    N = sum(p.numel() for p in m.parameters())  # tied embedding counted once
    Nl = 0
    if mode == "lora":
        for p in m.parameters():
            p.requires_grad_(False)
        for layer in m.layers:
            for a in ("q", "k", "v", "o", "gate", "up", "down"):
                setattr(layer, a, LoRALinear(getattr(layer, a)))
        Nl = sum(p.numel() for p in m.parameters() if p.requires_grad)
    params = [p for p in m.parameters() if p.requires_grad]
    B = TOKENS // T
    tok = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(7))
    steps = args.steps or (2 if N > 5e7 else 4 if N > 5e6 else 7)
    times = []
    for s in range(steps + 1):  # s == 0: warm-up
        for p in params:
            if p.grad is not None:
                p.grad.zero_()
        t0 = time.perf_counter()
        loss = m(tok).sum() * (-1.0 / TOKENS)
        loss.backward()
        if s > 0:
            times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    QD = NH * (C // NH)
    att = 6.0 * L * T * QD * TOKENS
    flop = (6.0 * N if mode == "full" else 4.0 * N + 6.0 * Nl) * TOKENS + att
    print(f"| torch {mode} {name} T={T} B={B} | {flop / sec / 1e9:.1f} GFLOP/s ({sec:.3f} s/step, "
          f"{TOKENS / sec:.0f} tok/s) | N={N / 1e6:.2f}M N_lora={Nl} |", flush=True)


print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
      f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, "
      f"attention: {'F.scaled_dot_product_attention' if SDPA else 'matmul + masked softmax'}",
      flush=True)
for name in args.sizes.split(","):
    if name not in SIZES:
        sys.exit(f"unknown size {name} (1M, 10M, 100M)")
    for mode in args.modes.split(","):
        for T in (int(t) for t in args.T.split(",")):
            bench(name, mode, T)

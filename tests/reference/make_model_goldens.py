#!/usr/bin/python3
"""Golden files for rl_model (tests/test_model_torch.c), computed with PyTorch.

Run:  /usr/bin/python3 tests/reference/make_model_goldens.py   (Debian's python3-torch/numpy)

For each small random model below this writes tests/fixtures/models/<name>/:
  config.json, model.safetensors        an HF folder (F32 weights)
  adapter/                              a PEFT LoRA adapter (r 4, alpha 8, all 7 projections)
  goldens.safetensors, goldens.json     what rl_model must reproduce
  score.safetensors                     a scalar head `score.weight` [1, C] (critic / reward
                                        model, HF <Arch>ForSequenceClassification's)
  head_goldens.safetensors, head_goldens.json   what rl_model + rl_head must reproduce with it

The reference decoder is written here in plain torch from REFERENCE.md §2 (transformers is not
available): RMSNorm w*x*rsqrt(mean(x^2)+eps); rotate_half RoPE on pairs (i, i+D/2) with
inv_freq = 1/(theta ** (arange(0,D,2)/D)) computed in fp32 exactly as transformers does, llama3
rope scaling as transformers' _compute_llama3_parameters; GQA (query head h uses kv head
h // (NH/NKV)); causal softmax attention with scale 1/sqrt(D) and padded keys masked; Qwen3
q_norm/k_norm over each head before RoPE; Qwen2 q/k/v biases; SwiGLU MLP; tied or separate head.

Precision: the weights are drawn, rounded to float32 (that is what the fixture stores and what
rl_model reads), then the whole golden computation runs in float64 (RoPE angles excepted: they
are formed in fp32 like transformers does, then cos/sin are taken in float64). Every golden is
stored as float32. So the goldens are the exact answer for the stored weights to ~1e-7
relative, and the C test's tolerances measure rl_model's fp32 error alone.

Conventions (model/rl_model.h): tokens (B,T) right padded, lengths[b] real tokens at positions
0..len-1; logp[b,t] = log_softmax(logits[b,t-1]/temp)[tokens[b,t]] for 1 <= t < len, else 0;
entropy likewise aligned. Loss (an SFT loss with per-token weights, like advantages):
  L = -sum_bt c[b,t] * logp[b,t] / sum_bt m[b,t]
m = 1 on the "completion" tokens (prompt_len[b] <= t < len[b]), c = m * u with u ~ U(0.5, 1.5),
so dL/dlogp = -c / sum(m), stored as `dlogp`.

Scalar head (model/rl_head.h; REFERENCE.md §1 "Reward model", "PPO with a critic"): w =
score.weight (1, C) on the final norm's output h (B,T,C), no bias. Values aligned like logp
(TRL's full_value[:, context_length - 1 : -1]): v[b,t] = w . h[b,t-1] for 1 <= t < len, else 0;
scores s[b] = w . h[b, len-1] (the last real token). Losses L_v = sum c_v * v, L_s = sum c_s * s
with random c. Every draw for the head comes from its own generator (HEAD_SEED + index), after
and apart from the draws above, so adding it changed no byte of the other files.
"""

import json
import math
import os
import re
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_writer import write_safetensors  # noqa: E402

SEED = 1234
B, T = 3, 12
LENGTHS = [12, 5, 9]          # right padded to T; one full, two shorter
PROMPT_LENS = [3, 1, 4]       # the loss looks at t >= prompt_len (and t >= 1)
TEMPS = [1.0, 0.7]
LORA_R, LORA_ALPHA = 4, 8.0
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ADAMW = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
ADAMW_STEPS = 3
HEAD_SEED = 4321              # the scalar head's own generator (score.weight, loss weights)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                     "fixtures", "models"))

# The fixture models. Every one draws its tokens from [0, tokens_below) with tokens_below < V,
# so the top of every vocabulary is never an input (rl_model must still normalise over all V).
MODELS = [
    # llama: GQA 4/2, llama3 rope scaling (all three frequency bands hit: with D 8, theta 1e4,
    # wavelengths 6.3 | 63 | 628, 6283 against high/low limits 16 and 64), untied head.
    dict(name="llama_gqa", model_type="llama", hidden_size=32, intermediate_size=40,
         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=80,
         rms_norm_eps=1e-5, rope_theta=10000.0,
         rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                           high_freq_factor=4.0, original_max_position_embeddings=64),
         tie_word_embeddings=False, tokens_below=72),
    # qwen2: q/k/v biases (no o bias), tied head.
    dict(name="qwen2_tied", model_type="qwen2", hidden_size=24, intermediate_size=40,
         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=80,
         rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, tokens_below=72),
    # qwen3: q_norm/k_norm, head_dim 8 while hidden/heads = 6 (NH*D = 32 != C = 24), tied.
    dict(name="qwen3_headdim", model_type="qwen3", hidden_size=24, intermediate_size=40,
         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
         vocab_size=72, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
         tokens_below=64),
    # odd sizes: C 30, 3 heads of 10, one kv head (MQA), I 37, V 101 with only ids < 50 used,
    # one layer, llama attention_bias (q/k/v/o) and mlp_bias, untied head.
    dict(name="llama_odd", model_type="llama", hidden_size=30, intermediate_size=37,
         num_hidden_layers=1, num_attention_heads=3, num_key_value_heads=1, vocab_size=101,
         rms_norm_eps=1e-6, rope_theta=500.0, tie_word_embeddings=False, attention_bias=True,
         mlp_bias=True, tokens_below=50),
]


# ---- configuration ---------------------------------------------------------------------------
def dims(m):
    C, NH = m["hidden_size"], m["num_attention_heads"]
    return dict(C=C, I=m["intermediate_size"], L=m["num_hidden_layers"], NH=NH,
                NKV=m["num_key_value_heads"], D=m.get("head_dim", C // NH), V=m["vocab_size"])


def biases(m):
    """(q/k/v bias, o bias, mlp bias) as rl_hf reads them (REFERENCE.md §2)."""
    if m["model_type"] == "qwen2":
        return True, False, False
    ab = m.get("attention_bias", False)
    return ab, ab, m.get("mlp_bias", False) if m["model_type"] == "llama" else False


def config_json(m):
    d = dims(m)
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "qwen3": "Qwen3ForCausalLM"}[m["model_type"]]],
        "model_type": m["model_type"],
        "vocab_size": d["V"], "hidden_size": d["C"], "intermediate_size": d["I"],
        "num_hidden_layers": d["L"], "num_attention_heads": d["NH"],
        "num_key_value_heads": d["NKV"], "head_dim": d["D"], "hidden_act": "silu",
        "max_position_embeddings": 128, "initializer_range": 0.02,
        "rms_norm_eps": m["rms_norm_eps"], "rope_theta": m["rope_theta"],
        "rope_scaling": m.get("rope_scaling"),
        "tie_word_embeddings": m["tie_word_embeddings"],
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }
    if m["model_type"] != "qwen2":
        cfg["attention_bias"] = m.get("attention_bias", False)
    if m["model_type"] == "llama":
        cfg["mlp_bias"] = m.get("mlp_bias", False)
    if m["model_type"] == "qwen2":
        cfg["use_sliding_window"] = False
    return cfg


# ---- random weights --------------------------------------------------------------------------
def f32(t):
    """Round to float32 (what the fixture stores), then compute in float64."""
    return t.float().double()


def make_params(m, gen):
    """HF-named float64 tensors holding float32-representable values. Scales are chosen so
    that logits spread over a few units (HF's 0.02 init would give near-uniform softmaxes and
    weak tests): embeddings N(0, 0.5^2), Linear weights N(0, 1/in), biases N(0, 0.1^2), norm
    weights 1 + N(0, 0.1^2)."""
    d = dims(m)
    C, I, NH, NKV, D, V = d["C"], d["I"], d["NH"], d["NKV"], d["D"], d["V"]
    qkv_b, o_b, mlp_b = biases(m)

    def normal(*shape, std=1.0):
        return f32(torch.randn(*shape, generator=gen, dtype=torch.float64) * std)

    def linear(out, inp):
        return normal(out, inp, std=1.0 / math.sqrt(inp))

    def norm(n):
        return f32(1.0 + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64))

    P = {"model.embed_tokens.weight": normal(V, C, std=0.5)}
    for i in range(d["L"]):
        p = f"model.layers.{i}."
        P[p + "input_layernorm.weight"] = norm(C)
        P[p + "self_attn.q_proj.weight"] = linear(NH * D, C)
        P[p + "self_attn.k_proj.weight"] = linear(NKV * D, C)
        P[p + "self_attn.v_proj.weight"] = linear(NKV * D, C)
        P[p + "self_attn.o_proj.weight"] = linear(C, NH * D)
        if qkv_b:
            P[p + "self_attn.q_proj.bias"] = normal(NH * D, std=0.1)
            P[p + "self_attn.k_proj.bias"] = normal(NKV * D, std=0.1)
            P[p + "self_attn.v_proj.bias"] = normal(NKV * D, std=0.1)
        if o_b:
            P[p + "self_attn.o_proj.bias"] = normal(C, std=0.1)
        if m["model_type"] == "qwen3":
            P[p + "self_attn.q_norm.weight"] = norm(D)
            P[p + "self_attn.k_norm.weight"] = norm(D)
        P[p + "post_attention_layernorm.weight"] = norm(C)
        P[p + "mlp.gate_proj.weight"] = linear(I, C)
        P[p + "mlp.up_proj.weight"] = linear(I, C)
        P[p + "mlp.down_proj.weight"] = linear(C, I)
        if mlp_b:
            P[p + "mlp.gate_proj.bias"] = normal(I, std=0.1)
            P[p + "mlp.up_proj.bias"] = normal(I, std=0.1)
            P[p + "mlp.down_proj.bias"] = normal(C, std=0.1)
    P["model.norm.weight"] = norm(C)
    if not m["tie_word_embeddings"]:
        P["lm_head.weight"] = normal(V, C, std=2.0 / math.sqrt(C))
    return P


def lora_module(i, target):
    sub = "mlp" if target in ("gate_proj", "up_proj", "down_proj") else "self_attn"
    return f"model.layers.{i}.{sub}.{target}"


def make_lora(m, gen):
    """PEFT-named A (R, in) and B (out, R). A ~ U(+-1/sqrt(in)) as PEFT inits it; B is drawn
    N(0, 0.2^2) instead of PEFT's zeros so the adapter changes the outputs and both gradients
    are non-trivial."""
    d = dims(m)
    C, I, NH, NKV, D = d["C"], d["I"], d["NH"], d["NKV"], d["D"]
    shapes = {"q_proj": (NH * D, C), "k_proj": (NKV * D, C), "v_proj": (NKV * D, C),
              "o_proj": (C, NH * D), "gate_proj": (I, C), "up_proj": (I, C),
              "down_proj": (C, I)}
    A = {}
    for i in range(d["L"]):
        for t in LORA_TARGETS:
            out, inp = shapes[t]
            key = "base_model.model." + lora_module(i, t)
            bound = 1.0 / math.sqrt(inp)
            A[key + ".lora_A.weight"] = f32(
                (torch.rand(LORA_R, inp, generator=gen, dtype=torch.float64) * 2 - 1) * bound)
            A[key + ".lora_B.weight"] = f32(
                torch.randn(out, LORA_R, generator=gen, dtype=torch.float64) * 0.2)
    return A


# ---- the reference decoder -------------------------------------------------------------------
def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope_inv_freq(m, D):
    """inv_freq in float32, as transformers' _compute_default_rope_parameters and
    _compute_llama3_parameters compute it."""
    base = m["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    rs = m.get("rope_scaling")
    if rs is None:
        return inv_freq
    assert rs["rope_type"] == "llama3"
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old_context_len = rs["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low
    high_freq_wavelen = old_context_len / high
    wavelen = 2 * math.pi / inv_freq
    # long wavelengths (low frequencies) are slowed down by `factor`
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    # the band in between is interpolated
    smooth = (old_context_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


def rope_cos_sin(m, D, T_):
    inv_freq = rope_inv_freq(m, D)                      # (D/2) fp32
    pos = torch.arange(T_, dtype=torch.float32)         # positions start at 0 (right padding)
    freqs = pos[:, None] * inv_freq[None, :]            # (T, D/2) fp32, like transformers
    emb = torch.cat([freqs, freqs], dim=-1).double()    # (T, D)
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def forward_hidden(m, P, tokens, lengths, lora=None):
    """tokens (B,T) long, lengths list -> the final norm's output (B,T,C) float64, the input of
    the vocabulary head and of the scalar head (rl_model_hidden)."""
    d = dims(m)
    C, NH, NKV, D = d["C"], d["NH"], d["NKV"], d["D"]
    eps = m["rms_norm_eps"]
    Bn, Tn = tokens.shape
    scaling = LORA_ALPHA / LORA_R

    def linear(name, x):
        y = x @ P[name + ".weight"].T
        if name + ".bias" in P:
            y = y + P[name + ".bias"]
        if lora is not None:
            key = "base_model." + "model." + name
            if key + ".lora_A.weight" in lora:
                A, Bm = lora[key + ".lora_A.weight"], lora[key + ".lora_B.weight"]
                y = y + scaling * ((x @ A.T) @ Bm.T)
        return y

    dtype = P["model.embed_tokens.weight"].dtype
    cos, sin = (t.to(dtype) for t in rope_cos_sin(m, D, Tn))  # (T, D)
    causal = torch.ones(Tn, Tn, dtype=torch.bool).tril()  # query t sees keys <= t
    key_valid = torch.arange(Tn)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
    allowed = causal[None, None, :, :] & key_valid[:, None, None, :]         # (B,1,T,T)

    x = P["model.embed_tokens.weight"][tokens]            # (B, T, C)
    for i in range(d["L"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, P[p + "input_layernorm.weight"], eps)
        q = linear(p + "self_attn.q_proj", h).view(Bn, Tn, NH, D)
        k = linear(p + "self_attn.k_proj", h).view(Bn, Tn, NKV, D)
        v = linear(p + "self_attn.v_proj", h).view(Bn, Tn, NKV, D)
        if m["model_type"] == "qwen3":                    # per-head RMSNorm before RoPE
            q = rms_norm(q, P[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, P[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, D)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // NKV, dim=1)         # query head h uses kv head h//(NH/NKV)
        v = v.repeat_interleave(NH // NKV, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D)      # (B, NH, T, T)
        s = s.masked_fill(~allowed, float("-inf"))
        a = torch.softmax(s, dim=-1) @ v                  # (B, NH, T, D)
        a = a.transpose(1, 2).reshape(Bn, Tn, NH * D)
        x = x + linear(p + "self_attn.o_proj", a)
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"], eps)
        g = linear(p + "mlp.gate_proj", h)
        u = linear(p + "mlp.up_proj", h)
        x = x + linear(p + "mlp.down_proj", torch.nn.functional.silu(g) * u)
    return rms_norm(x, P["model.norm.weight"], eps)


def forward_logits(m, P, tokens, lengths, lora=None):
    """tokens (B,T) long, lengths list -> logits (B,T,V) float64."""
    x = forward_hidden(m, P, tokens, lengths, lora)
    head = P["lm_head.weight"] if "lm_head.weight" in P else P["model.embed_tokens.weight"]
    return x @ head.T                                      # (B, T, V)


def token_logp_entropy(logits, tokens, valid, temp):
    """logp, entropy (B,T) with the rl_model alignment: position t scores token t with the
    distribution predicted at t-1; `valid` (B,T) is 1 for 1 <= t < len."""
    lsm = torch.log_softmax(logits / temp, dim=-1)       # (B, T, V)
    pred = lsm[:, :-1, :]                                 # predictions for t = 1..T-1
    lp = pred.gather(-1, tokens[:, 1:, None]).squeeze(-1)
    ent = -(pred.exp() * pred).sum(-1)
    zero = torch.zeros(tokens.shape[0], 1, dtype=logits.dtype)
    logp = torch.cat([zero, lp], dim=1) * valid
    entropy = torch.cat([zero, ent], dim=1) * valid
    return logp, entropy


# ---- one fixture -----------------------------------------------------------------------------
def to_np(t):
    return t.detach().double().numpy().astype(np.float32)



def compute(m, P, lora, tokens, valid, dlogp, dtype):
    """Every golden for one model, with the computation in `dtype` (float64 for the goldens,
    float32 for the error estimate). Returns (goldens dict of float32 arrays, info, watched)."""
    d = dims(m)
    P = {k: v.to(dtype) for k, v in P.items()}
    lora = {k: v.to(dtype) for k, v in lora.items()}
    valid = valid.to(dtype)
    dlogp = dlogp.to(dtype)

    def loss_of(logp):
        return (dlogp * logp).sum()        # = -sum(c * logp) / sum(m), with the rounded c/N

    G = {}
    info = {}

    # -- full model: logits, logp, entropy, loss and every parameter gradient --
    params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
    logits = forward_logits(m, params, tokens, LENGTHS)
    lmask = (torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]).to(dtype)
    G["logits"] = to_np(logits * lmask[:, :, None])
    for temp in TEMPS:
        tag = "t1" if temp == 1.0 else "t07"
        logp, ent = token_logp_entropy(logits, tokens, valid, temp)
        G[f"logp_{tag}"] = to_np(logp)
        G[f"entropy_{tag}"] = to_np(ent)
        if temp == 1.0:
            loss = loss_of(logp)
            loss.backward()
            info["loss_t1"] = loss.item()
    for k, v in params.items():
        G["grad." + k] = to_np(v.grad)

    # -- LoRA: frozen base, adapter applied; logp and A/B gradients at both temperatures --
    for temp in TEMPS:
        tag = "t1" if temp == 1.0 else "t07"
        Lp = {k: v.clone().requires_grad_(True) for k, v in lora.items()}
        logits_l = forward_logits(m, P, tokens, LENGTHS, lora=Lp)
        logp, ent = token_logp_entropy(logits_l, tokens, valid, temp)
        loss = loss_of(logp)
        loss.backward()
        info[f"lora_loss_{tag}"] = loss.item()
        G[f"lora.logp_{tag}"] = to_np(logp)
        G[f"lora.entropy_{tag}"] = to_np(ent)
        for k, v in Lp.items():
            G[f"lora.grad_{tag}.{k}"] = to_np(v.grad)

    # -- AdamW: 3 steps of the T=1 loss on the full model, every parameter decayed --
    params = [v.clone().requires_grad_(True) for v in P.values()]
    names = list(P.keys())
    opt = torch.optim.AdamW(params, **ADAMW)
    watched = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
               "model.layers.0.input_layernorm.weight",
               f"model.layers.{d['L'] - 1}.mlp.down_proj.weight", "model.norm.weight"]
    watched += [n for n in ("model.layers.0.self_attn.q_proj.bias",
                            "model.layers.0.self_attn.q_norm.weight") if n in P]
    losses = []
    for step in range(1, ADAMW_STEPS + 1):
        opt.zero_grad()
        Pd = dict(zip(names, params))
        logp, _ = token_logp_entropy(forward_logits(m, Pd, tokens, LENGTHS), tokens, valid, 1.0)
        loss = loss_of(logp)
        loss.backward()
        losses.append(loss.item())
        opt.step()
        for n in watched:
            G[f"adamw.step{step}.{n}"] = to_np(Pd[n])
    with torch.no_grad():
        Pd = dict(zip(names, params))
        logp, _ = token_logp_entropy(forward_logits(m, Pd, tokens, LENGTHS), tokens, valid, 1.0)
        losses.append(loss_of(logp).item())
    info["adamw_losses"] = losses
    G["losses"] = np.array([info["loss_t1"], info["lora_loss_t1"], info["lora_loss_t07"]],
                           dtype=np.float32)
    G["adamw.losses"] = np.array(losses, dtype=np.float32)
    return G, info, watched


# ---- the scalar head (critic values, reward scores) -------------------------------------------
def head_values_scores(hidden, w, valid):
    """hidden (B,T,C), w (1,C), valid (B,T) 1 at 1 <= t < len -> values (B,T), scores (B)."""
    per_pos = (hidden @ w.T).squeeze(-1)                  # (B, T): w . h[b,t]
    zero = torch.zeros(hidden.shape[0], 1, dtype=hidden.dtype)
    values = torch.cat([zero, per_pos[:, :-1]], dim=1) * valid   # v[b,t] = w . h[b,t-1]
    last = torch.tensor(LENGTHS) - 1
    scores = per_pos[torch.arange(hidden.shape[0]), last]        # s[b] = w . h[b,len-1]
    return values, scores


def head_watched(P):
    """The full-tuning gradients stored per head loss: the embedding, every tensor of layer 0
    (the deepest: its gradient crosses every layer) and the final norm."""
    return (["model.embed_tokens.weight"] + [k for k in P if k.startswith("model.layers.0.")] +
            ["model.norm.weight"])


def compute_head(m, P, lora, tokens, valid, w, cv, cs, dtype):
    """Every head golden, computed in `dtype`. Returns (goldens dict of float32 arrays, losses)."""
    P = {k: v.to(dtype) for k, v in P.items()}
    lora = {k: v.to(dtype) for k, v in lora.items()}
    valid, w, cv, cs = valid.to(dtype), w.to(dtype), cv.to(dtype), cs.to(dtype)
    lmask = (torch.arange(T)[None, :] < torch.tensor(LENGTHS)[:, None]).to(dtype)
    watched = head_watched(P)
    G, losses = {}, {}
    for kind in ("v", "s"):
        # full tuning: every parameter and w get gradients; the stored ones are `watched`
        params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
        wr = w.clone().requires_grad_(True)
        hidden = forward_hidden(m, params, tokens, LENGTHS)
        values, scores = head_values_scores(hidden, wr, valid)
        loss = (cv * values).sum() if kind == "v" else (cs * scores).sum()
        loss.backward()
        losses[f"loss_{kind}"] = loss.item()
        if kind == "v":
            G["hidden"] = to_np(hidden * lmask[:, :, None])
            G["values"] = to_np(values)
            G["scores"] = to_np(scores)
        G[f"grad_{kind}.score.weight"] = to_np(wr.grad)
        for k in watched:
            G[f"grad_{kind}.{k}"] = to_np(params[k].grad)
        if "lm_head.weight" in params:      # the vocabulary head plays no part
            assert params["lm_head.weight"].grad is None
        # LoRA: frozen base, adapter applied; every A and B, and w
        Lp = {k: v.clone().requires_grad_(True) for k, v in lora.items()}
        wr = w.clone().requires_grad_(True)
        hidden = forward_hidden(m, P, tokens, LENGTHS, lora=Lp)
        values, scores = head_values_scores(hidden, wr, valid)
        loss = (cv * values).sum() if kind == "v" else (cs * scores).sum()
        loss.backward()
        losses[f"lora_loss_{kind}"] = loss.item()
        if kind == "v":
            G["lora.values"] = to_np(values)
            G["lora.scores"] = to_np(scores)
        G[f"lora.grad_{kind}.score.weight"] = to_np(wr.grad)
        for k, v in Lp.items():
            G[f"lora.grad_{kind}.{k}"] = to_np(v.grad)
    G["losses"] = np.array([losses["loss_v"], losses["loss_s"], losses["lora_loss_v"],
                            losses["lora_loss_s"]], dtype=np.float32)
    return G, losses


def make_head_goldens(m, index, P, lora, tokens, valid, out_dir, command):
    """score.safetensors, head_goldens.safetensors and head_goldens.json for one fixture. Its
    random numbers come from a generator of its own, so the other files keep every byte."""
    seed = HEAD_SEED + index
    gen = torch.Generator().manual_seed(seed)
    C = dims(m)["C"]
    # w ~ N(0, 1/C): |h| ~ sqrt(C) after the final norm, so values and scores are O(1)
    w = f32(torch.randn(1, C, generator=gen, dtype=torch.float64) / math.sqrt(C))
    cv = f32(valid * (2 * torch.rand(B, T, generator=gen, dtype=torch.float64) - 1))
    cs = f32(2 * torch.rand(B, generator=gen, dtype=torch.float64) - 1)

    G, losses = compute_head(m, P, lora, tokens, valid, w, cv, cs, torch.float64)
    G32, _ = compute_head(m, P, lora, tokens, valid, w, cv, cs, torch.float32)
    fp32_err = {}
    for k in G:
        parts = k.split(".")
        cat = ("lora." if parts[0] == "lora" else "") + (
            "grad" if k.split(".")[1 if parts[0] == "lora" else 0].startswith("grad") else
            parts[-1])
        scale = float(np.abs(G[k]).max())
        err = float(np.abs(G[k] - G32[k]).max()) / (scale if scale > 0 else 1.0)
        fp32_err[cat] = max(fp32_err.get(cat, 0.0), err)
    G["dvalues"] = to_np(cv)
    G["dscores"] = to_np(cs)

    write_safetensors(os.path.join(out_dir, "score.safetensors"), {"score.weight": to_np(w)})
    write_safetensors(os.path.join(out_dir, "head_goldens.safetensors"), G)
    meta = {
        "generator": "tests/reference/make_model_goldens.py",
        "command": command,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python_version": sys.version.split()[0],
        "seed": seed,
        "compute_dtype": "float64 (RoPE angles in float32 as transformers forms them)",
        "stored_dtype": "float32",
        "model": m["name"],
        "batch": "tokens and lengths of goldens.json",
        "head": "score.weight (1, C) of score.safetensors, no bias, on the final norm's output h",
        "values": "v[b,t] = w . h[b,t-1] for 1 <= t < len, else 0 (aligned like logp; TRL "
                  "full_value[:, context_length - 1 : -1])",
        "scores": "s[b] = w . h[b, len-1] (the last real token)",
        "loss_v": "L_v = sum(dvalues * v)", "loss_s": "L_s = sum(dscores * s)",
        "losses": [losses["loss_v"], losses["loss_s"], losses["lora_loss_v"],
                   losses["lora_loss_s"]],
        "watched": head_watched(P),
        "fp32_torch_error": {k: float("%.3g" % v) for k, v in sorted(fp32_err.items())},
        "fp32_torch_error_note": "max |float32 torch - float64 golden| / max |golden| per kind "
                                 "of golden (worst tensor); not used by the test",
        "goldens": {
            "hidden": "(B,T,C) the final norm's output at t < len, 0 at padding",
            "values, scores": "(B,T), (B) full model",
            "dvalues, dscores": "(B,T) dL_v/dv (0 outside 1 <= t < len), (B) dL_s/ds",
            "grad_<v|s>.score.weight": "dL/dw (1,C)",
            "grad_<v|s>.<hf name>": "dL/dparam for the watched tensors, full fine-tuning "
                                    "(lm_head, when untied, gets no gradient)",
            "lora.values, lora.scores": "with the adapter applied",
            "lora.grad_<v|s>.<peft key>, lora.grad_<v|s>.score.weight": "dL/dA, dL/dB, dL/dw",
            "losses": "(4) L_v, L_s full; L_v, L_s LoRA",
        },
    }
    text = json.dumps(meta, indent=1)
    text = re.sub(r"\[\s*([-+0-9.e, \n]+?)\s*\]",
                  lambda mo: "[" + ", ".join(x.strip() for x in mo.group(1).split(",")) + "]",
                  text)
    with open(os.path.join(out_dir, "head_goldens.json"), "w") as f:
        f.write(text + "\n")


def make_fixture(m, index, command):
    seed = SEED + index
    gen = torch.Generator().manual_seed(seed)
    d = dims(m)
    out_dir = os.path.join(ROOT, m["name"])
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(os.path.join(out_dir, "adapter"))

    P = make_params(m, gen)
    lora = make_lora(m, gen)

    # batch: right padded; padding positions hold arbitrary (valid) ids that must not matter
    tokens = torch.randint(0, m["tokens_below"], (B, T), generator=gen)
    valid = torch.zeros(B, T, dtype=torch.float64)
    mask = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        valid[b, 1:LENGTHS[b]] = 1.0
        mask[b, max(1, PROMPT_LENS[b]):LENGTHS[b]] = 1.0
    coef = f32(mask * (0.5 + torch.rand(B, T, generator=gen, dtype=torch.float64)))
    n_mask = mask.sum()
    dlogp = f32(-coef / n_mask)            # dL/dlogp, exactly what the C test feeds backward

    G, info, watched = compute(m, P, lora, tokens, valid, dlogp, torch.float64)
    # The same pipeline in float32 (torch's CPU kernels): not stored, but its distance to the
    # float64 goldens is what any fp32 implementation should expect, and is recorded in
    # goldens.json to back the C test's tolerances.
    G32, _, _ = compute(m, P, lora, tokens, valid, dlogp, torch.float32)
    fp32_err = {}
    for k in G:
        cat = k.split(".")[0] if k.startswith(("grad", "adamw")) else k.split(".")[0] + (
            ".grad" if ".grad_" in k else ("." + k.split(".")[1] if "." in k else ""))
        scale = float(np.abs(G[k]).max())
        err = float(np.abs(G[k] - G32[k]).max()) / (scale if scale > 0 else 1.0)
        fp32_err[cat] = max(fp32_err.get(cat, 0.0), err)
    losses = info["adamw_losses"]

    G["tokens"] = tokens.numpy().astype(np.float32)
    G["lengths"] = np.array(LENGTHS, dtype=np.float32)
    G["dlogp"] = to_np(dlogp)
    G["loss_mask"] = to_np(mask)

    # -- files --
    cfg = config_json(m)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "model.safetensors"),
                      {k: to_np(v) for k, v in P.items()})
    adapter_cfg = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": LORA_R, "lora_alpha": LORA_ALPHA,
        "lora_dropout": 0.0, "target_modules": LORA_TARGETS, "bias": "none",
        "use_rslora": False, "fan_in_fan_out": False, "inference_mode": False,
        "base_model_name_or_path": "..",
    }
    with open(os.path.join(out_dir, "adapter", "adapter_config.json"), "w") as f:
        json.dump(adapter_cfg, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "adapter", "adapter_model.safetensors"),
                      {k: to_np(v) for k, v in lora.items()})
    write_safetensors(os.path.join(out_dir, "goldens.safetensors"), G)

    meta = {
        "generator": "tests/reference/make_model_goldens.py",
        "command": command,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python_version": sys.version.split()[0],
        "seed": seed,
        "compute_dtype": "float64 (RoPE angles in float32 as transformers forms them)",
        "stored_dtype": "float32",
        "model": m["name"],
        "B": B, "T": T,
        "tokens": tokens.tolist(),
        "lengths": LENGTHS,
        "prompt_lens": PROMPT_LENS,
        "temperatures": TEMPS,
        "loss": "L = sum(dlogp * logp) = -sum(c*logp)/sum(m); m = loss_mask, "
                "c = m*U(0.5,1.5); gradients of L at temperature 1 (full) and 1, 0.7 (LoRA)",
        "loss_t1": info["loss_t1"],
        "lora": {"r": LORA_R, "alpha": LORA_ALPHA, "scaling": LORA_ALPHA / LORA_R,
                 "targets": LORA_TARGETS, "dir": "adapter",
                 "loss_t1": info["lora_loss_t1"], "loss_t07": info["lora_loss_t07"]},
        "fp32_torch_error": {k: float("%.3g" % v) for k, v in sorted(fp32_err.items())},
        "fp32_torch_error_note": "max |float32 torch - float64 golden| / max |golden| per "
                                 "kind of golden (worst tensor); not used by the test",
        "adamw": {"lr": ADAMW["lr"], "betas": list(ADAMW["betas"]), "eps": ADAMW["eps"],
                  "weight_decay": ADAMW["weight_decay"], "steps": ADAMW_STEPS,
                  "decay_applies_to": "every parameter (one torch param group)",
                  "losses": losses, "losses_note": "loss before step 1..3, then after step 3",
                  "watched": watched},
        "goldens": {
            "logits": "(B,T,V) at t < len, 0 at padding",
            "logp_t1, logp_t07, entropy_t1, entropy_t07": "(B,T) full model",
            "dlogp": "(B,T) dL/dlogp fed to rl_model_backward", "loss_mask": "(B,T) m",
            "grad.<hf name>": "dL/dparam, full fine-tuning at T=1 (tied: embed has both uses)",
            "lora.logp_<t>, lora.entropy_<t>": "(B,T) with the adapter applied",
            "lora.grad_<t>.<peft key>": "dL/dA, dL/dB at temperature t",
            "adamw.step<k>.<hf name>": "the watched parameters after AdamW step k",
            "tokens, lengths": "as F32 too (also in this json)",
            "losses": "(3) loss_t1, lora loss_t1, lora loss_t07",
            "adamw.losses": "(4) the adamw losses below",
        },
    }
    text = json.dumps(meta, indent=1)
    # lists of numbers on one line each (tokens, lengths, losses): readable and small
    text = re.sub(r"\[\s*([-+0-9.e, \n]+?)\s*\]",
                  lambda mo: "[" + ", ".join(x.strip() for x in mo.group(1).split(",")) + "]",
                  text)
    with open(os.path.join(out_dir, "goldens.json"), "w") as f:
        f.write(text + "\n")

    make_head_goldens(m, index, P, lora, tokens, valid, out_dir, command)

    size = sum(os.path.getsize(os.path.join(dp, fn))
               for dp, _, fns in os.walk(out_dir) for fn in fns)
    print(f"{m['name']}: {sum(v.numel() for v in P.values())} params, loss {info['loss_t1']:.6f},"
          f" adamw {['%.6f' % x for x in losses]}, {size / 1024:.0f} KiB")
    return size


def main():
    torch.set_num_threads(1)
    command = " ".join(["/usr/bin/python3"] + [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    os.makedirs(ROOT, exist_ok=True)
    total = 0
    for i, m in enumerate(MODELS):
        total += make_fixture(m, i, command)
    print(f"torch {torch.__version__}, numpy {np.__version__}: {total / 1024:.0f} KiB in {ROOT}")


if __name__ == "__main__":
    main()

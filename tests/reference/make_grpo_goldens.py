#!/usr/bin/python3
"""Golden files for trainer/rl_grpo (tests/test_grpo.c), computed with PyTorch autograd.

Run:  /usr/bin/python3 tests/reference/make_grpo_goldens.py   (Debian's python3-torch)

Writes tests/fixtures/grpo/<case>.json, one file per case, and index.json (the case names and
the torch version). The GRPO math is written here in plain torch straight from REFERENCE.md §1
(not from the C code): group advantages (grpo / rloo; group / batch / no std scaling; NaN =
unscorable; zero-variance groups give 0), and the per-token policy loss

    ratio = exp(clamp(logp - old, -20, 20))          old = logp.detach() when old_logp is null
    l     = -min(ratio A, clamp(ratio, 1 - eps_low, 1 + eps_high) A)
    dual clip c > 0:  l = where(A < 0, min(l, -c A), l)
    TIS token:        l = l * clamp(exp(old - mu), max=cap).detach()
    TIS sequence:     mask = mask * [1/cap <= exp(sum_t (old - mu) mask) <= cap]
    l = l + beta * k  with k1 = logp - ref, k2 = (logp - ref)^2 / 2,
                      k3 = clamp(exp(ref - logp) - (ref - logp) - 1, -10, 10)
    token_mean, seq_mean_token_sum_norm:  sum(l m) / denom
    seq_mean_token_mean:                  sum_b [sum_t l m / max(1, sum_t m)] / denom

and dL/dlogp comes from loss.backward(). The TIS weight multiplies the policy term only (verl
weights the policy-gradient loss, not the KL penalty); rl_grpo.h documents the same choice.

Precision: inputs are drawn, rounded to float32 (what the C test feeds rl_grpo_loss), and the
loss runs in float64, so the goldens are the exact answer for the stored inputs to ~1e-15.
Log-ratios, KL differences and TIS log-weights are drawn from sets that stay well away from
every kink (clip bounds, the dual-clip bound, k3's clamp, the sequence-TIS interval), so an
ulp of difference in exp() cannot flip a branch. JSON has no NaN: an unscorable reward is
written as null.
"""

import json
import math
import os

import torch

SEED = 20261122
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                     "fixtures", "grpo"))

# Log-ratios logp - old: ratios 0.41 .. 4.95, at least 0.028 (in log space) from ln(0.8),
# ln(1.2), ln(1.28) and ln(3) (the clip and dual-clip bounds used below).
LOG_RATIOS = [-0.9, -0.5, -0.3, -0.1, 0.0, 0.05, 0.1, 0.21, 0.3, 0.6, 1.3, 1.6]
# logp - ref: -3.0 puts k3 above its clamp (exp(3) - 4 = 16.1), the k3 kink is at -2.61.
KL_DIFFS = [-3.0, -1.0, -0.4, 0.2, 0.7, 1.5]
# old - mu: token TIS weights 0.67 .. 2.46 (the last above the cap 2)
TIS_DIFFS = [-0.4, -0.2, 0.1, 0.2, 0.5, 0.9]

gen = torch.Generator().manual_seed(SEED)


def uniform(lo, hi, n):
    return (lo + (hi - lo) * torch.rand(n, generator=gen, dtype=torch.float64)).tolist()


def choice(values, n, jitter):
    idx = torch.randint(len(values), (n,), generator=gen).tolist()
    jit = uniform(-jitter, jitter, n)
    return [values[i] + j for i, j in zip(idx, jit)]


def f32(xs):
    """Rounds to float32 and back: the exact values the C test reads."""
    return torch.tensor(xs, dtype=torch.float32).double().tolist()


# ---- the reference math -------------------------------------------------------------------------

def kl_term(est, logp, ref):
    if est == "k1":
        return logp - ref
    if est == "k2":
        return 0.5 * (logp - ref) ** 2
    k3 = torch.exp(ref - logp) - (ref - logp) - 1.0
    return torch.clamp(k3, -10.0, 10.0)


def torch_loss(c):
    B, T, alg = c["B"], c["T"], c["alg"]
    t = lambda xs: torch.tensor(xs, dtype=torch.float64).view(B, T)  # noqa: E731
    logp = t(c["logp"]).requires_grad_(True)
    old = logp.detach() if c["old_logp"] is None else t(c["old_logp"])
    ref = None if c["ref_logp"] is None else t(c["ref_logp"])
    mu = None if c["mu_logp"] is None else t(c["mu_logp"])
    mask = t(c["mask"])
    A = torch.tensor(c["adv"], dtype=torch.float64).view(B, 1).expand(B, T)
    el, eh, dc = alg["epsilon_low"], alg["epsilon_high"], alg["dual_clip"]
    beta, cap = alg["beta"], alg["tis_cap"]

    ratio = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
    l = -torch.min(ratio * A, torch.clamp(ratio, 1.0 - el, 1.0 + eh) * A)
    l_before_dual = l
    if dc > 0:
        l = torch.where(A < 0, torch.min(l, -dc * A), l)
    w = torch.ones(B, T, dtype=torch.float64)
    m = mask
    keep = torch.ones(B, dtype=torch.float64)
    if alg["tis"] == "token":
        w = torch.clamp(torch.exp(old - mu), max=cap).detach()
        l = l * w
    elif alg["tis"] == "sequence":
        seq_w = torch.exp(((old - mu) * mask).sum(1))
        keep = ((seq_w >= 1.0 / cap) & (seq_w <= cap)).double().detach()
        m = mask * keep.view(B, 1)
        w = keep.view(B, 1).expand(B, T)
    k = None
    if ref is not None:
        k = kl_term(alg["kl_estimator"], logp, ref)
    if beta > 0:
        l = l + beta * k
    if alg["loss_agg"] == "seq_mean_token_mean":
        loss = ((l * m).sum(1) / torch.clamp(mask.sum(1), min=1.0)).sum() / c["denom"]
    else:  # token_mean and seq_mean_token_sum_norm differ only in the caller's denom
        loss = (l * m).sum() / c["denom"]
    loss.backward()

    on = mask > 0
    stats = {
        "tokens": mask.sum().item(),
        "kl": 0.0 if k is None else (k.detach() * mask).sum().item(),
        "clip_low": ((A < 0) & (ratio < 1.0 - el) & on).sum().item(),
        "clip_high": ((A > 0) & (ratio > 1.0 + eh) & on).sum().item(),
        "dual_clip": 0 if dc <= 0 else ((A < 0) & (l_before_dual > -dc * A) & on).sum().item(),
        "ratio": (ratio.detach() * mask).sum().item(),
        "tis_weight": (w * mask).sum().item(),
        "tis_masked": (1.0 - keep).sum().item(),
        "logprob_gap": 0.0 if mu is None else ((old - mu).abs() * mask).sum().item(),
    }
    return loss.item(), logp.grad.reshape(-1).tolist(), stats


def torch_advantages(c):
    n, G, alg = c["n_groups"], c["G"], c["alg"]
    r = torch.tensor([math.nan if x is None else x for x in c["rewards"]],
                     dtype=torch.float64).view(n, G)
    ok = torch.isfinite(r)
    rz = torch.where(ok, r, torch.zeros_like(r))
    cnt = ok.sum(1, keepdim=True).double()
    mean = rz.sum(1, keepdim=True) / torch.clamp(cnt, min=1.0)
    dev = torch.where(ok, r - mean, torch.zeros_like(r))
    std = torch.sqrt((dev ** 2).sum(1, keepdim=True) / torch.clamp(cnt - 1.0, min=1.0))
    big = torch.full_like(r, math.inf)
    equal = (torch.where(ok, r, big).amin(1, keepdim=True) ==
             torch.where(ok, r, -big).amax(1, keepdim=True))
    zero = (cnt < 2) | equal
    if alg["advantage"] == "rloo":  # the mean of the other scorable members
        others = (rz.sum(1, keepdim=True) - r) / torch.clamp(cnt - 1.0, min=1.0)
        a = r - others
    else:
        a = r - mean
    if alg["scale_rewards"] == "group":
        a = a / (std + alg["std_eps"])
    elif alg["scale_rewards"] == "batch":
        a = a / (r[ok].std(unbiased=True) + alg["std_eps"])
    a = torch.where(ok & ~zero, a, torch.zeros_like(a))
    two = cnt.view(-1) >= 2
    stats = {
        "groups": n,
        "zero_std_groups": int(zero.sum().item()),
        "unscorable": int((~ok).sum().item()),
        "reward_mean": r[ok].mean().item(),
        "reward_std": torch.where(equal, torch.zeros_like(std), std).view(-1)[two].mean().item()
        if two.any() else 0.0,
    }
    return a.reshape(-1).tolist(), stats


# ---- the cases ----------------------------------------------------------------------------------

BASE = dict(epsilon_low=0.2, epsilon_high=0.2, dual_clip=0.0, beta=0.0, kl_estimator="k3",
            loss_agg="token_mean", tis="none", tis_cap=2.0)


def make_inputs(B, T, old_given, ref_given, mu_given, tis_seq_cap=None, empty_row=False,
                big_ratios=False):
    """Right-padded rows of prompt + completion; the loss looks at the completion tokens.
    Masked positions hold finite garbage (never read by rl_grpo_loss). big_ratios draws ratios
    above the dual-clip bound 3 more often, and alternates the sign of the advantages."""
    while True:
        mask = []
        for b in range(B):
            p = int(torch.randint(0, 3, (1,), generator=gen))
            n = int(torch.randint(1, T - p + 1, (1,), generator=gen))
            if empty_row and b == B - 1:
                n = 0
            mask += [0.0] * p + [1.0] * n + [0.0] * (T - p - n)
        old = uniform(-3.0, -0.05, B * T)
        lr = choice(LOG_RATIOS + ([1.3, 1.6] * 4 if big_ratios else []), B * T, 0.01)
        logp = f32([o + x for o, x in zip(old, lr)])
        old = f32(old)
        ref = f32([lp - d for lp, d in zip(logp, choice(KL_DIFFS, B * T, 0.02))])
        mu = f32([o - d for o, d in zip(old, choice(TIS_DIFFS, B * T, 0.02))])
        garbage = uniform(-30.0, 30.0, 4 * B * T)
        for i in range(B * T):
            if mask[i] == 0.0:
                logp[i], old[i], ref[i], mu[i] = f32(garbage[4 * i:4 * i + 4])
        if tis_seq_cap is None:
            break
        # sequence TIS: every row's log-weight at least 0.05 from +-log(cap), and at least one
        # row dropped and one kept, so the case tests the drop
        base = logp if not old_given else old
        sums = [sum((base[b * T + t] - mu[b * T + t]) * mask[b * T + t] for t in range(T))
                for b in range(B)]
        lc = math.log(tis_seq_cap)
        if (all(abs(abs(s) - lc) > 0.05 for s in sums) and any(abs(s) > lc for s in sums)
                and any(abs(s) < lc and any(mask[b * T:(b + 1) * T])
                        for b, s in enumerate(sums))):
            break
    adv = choice([-1.7, -1.0, -0.6, -0.2, 0.3, 0.8, 1.2, 2.0], B, 0.05)
    if big_ratios:
        adv = [abs(a) * (-1.0 if b % 2 == 0 else 1.0) for b, a in enumerate(adv)]
    adv = f32(adv)
    return dict(logp=logp, old_logp=old if old_given else None,
                ref_logp=ref if ref_given else None, mu_logp=mu if mu_given else None,
                mask=mask, adv=adv)


def loss_case(name, what, B=4, T=7, old=True, ref=True, mu=True, empty_row=False, **alg_kw):
    alg = dict(BASE, **alg_kw)
    while True:  # a dual-clip case redraws until the bound binds on 2 tokens or more
        inputs = make_inputs(B, T, old, ref, mu,
                             tis_seq_cap=alg["tis_cap"] if alg["tis"] == "sequence" else None,
                             empty_row=empty_row, big_ratios=alg["dual_clip"] > 0)
        tokens = sum(inputs["mask"])
        # the micro-batch is one of several: the global divisor is larger than its own counts
        denom = {"token_mean": tokens + 5.0, "seq_mean_token_mean": B + 2.0,
                 "seq_mean_token_sum_norm": (B + 2.0) * T}[alg["loss_agg"]]
        c = dict(kind="loss", name=name, what=what, B=B, T=T, alg=alg, denom=denom, **inputs)
        c["loss"], c["dlogp"], c["stats"] = torch_loss(c)
        if alg["dual_clip"] <= 0 or c["stats"]["dual_clip"] >= 2:
            return c


def adv_case(name, scale, advantage, std_eps=1e-4):
    G, n = 5, 6
    rewards = []
    for g in range(n):
        if g == 1:
            rewards += [1.0] * G                           # zero variance
        elif g == 2:
            rewards += [None, 0.5, None, None, None]       # one scorable: zero variance
        elif g == 3:
            rewards += [0.0, None, 1.0, 1.0, 0.0]          # binary with an unscorable
        else:
            rewards += f32(uniform(-2.0, 3.0, G))
    rewards[G * 5 + 4] = None
    alg = dict(scale_rewards=scale, advantage=advantage, std_eps=std_eps)
    c = dict(kind="advantages", name=name, n_groups=n, G=G, alg=alg, rewards=rewards)
    c["adv"], c["stats"] = torch_advantages(c)
    return c


def main():
    os.makedirs(ROOT, exist_ok=True)
    cases = [
        adv_case("adv_group_grpo", "group", "grpo"),
        adv_case("adv_batch_grpo", "batch", "grpo"),
        adv_case("adv_none_grpo", "none", "grpo"),
        adv_case("adv_group_rloo", "group", "rloo", std_eps=1e-6),
        adv_case("adv_batch_rloo", "batch", "rloo"),
        adv_case("adv_none_rloo", "none", "rloo"),
        loss_case("agg_token_mean", "token_mean; ref given with beta 0 (stats.kl only)"),
        loss_case("agg_seq_mean_token_mean", "seq_mean_token_mean with an empty row",
                  empty_row=True, loss_agg="seq_mean_token_mean"),
        loss_case("agg_seq_mean_token_sum_norm", "Dr.GRPO sum / (B L_max)",
                  loss_agg="seq_mean_token_sum_norm"),
        loss_case("kl_k1", "beta 0.1, k1", beta=0.1, kl_estimator="k1"),
        loss_case("kl_k2", "beta 0.1, k2", beta=0.1, kl_estimator="k2"),
        loss_case("kl_k3", "beta 0.1, k3 (some tokens above the clamp)", B=5, beta=0.1,
                  kl_estimator="k3"),
        loss_case("clip_higher", "DAPO eps_high 0.28", B=5, epsilon_high=0.28),
        loss_case("dual_clip", "dual clip c = 3", B=5, dual_clip=3.0),
        loss_case("tis_token", "token TIS, cap 2", tis="token"),
        loss_case("tis_sequence", "sequence TIS, cap 2, k1 (dropped rows lose it too)", B=6,
                  tis="sequence", beta=0.05, kl_estimator="k1"),
        loss_case("old_null", "old_logp null (ratio 1), k3, token TIS, seq_mean_token_mean",
                  old=False, beta=0.04, tis="token", loss_agg="seq_mean_token_mean"),
        loss_case("old_null_tis_sequence", "old_logp null, sequence TIS", B=6, old=False,
                  tis="sequence", tis_cap=1.5),
        loss_case("no_ref_no_mu", "neither ref nor mu given", ref=False, mu=False),
        loss_case("all_knobs", "eps 0.2/0.28, dual 3, k2, token TIS, seq_mean_token_mean",
                  B=6, T=9, epsilon_high=0.28, dual_clip=3.0, beta=0.05, kl_estimator="k2",
                  tis="token", tis_cap=1.8, loss_agg="seq_mean_token_mean", empty_row=True),
    ]
    for c in cases:
        c["torch_version"] = torch.__version__
        with open(os.path.join(ROOT, c["name"] + ".json"), "w") as f:
            json.dump(c, f, allow_nan=False, indent=None, separators=(",", ":"))
            f.write("\n")
    index = dict(torch_version=torch.__version__, seed=SEED,
                 script="tests/reference/make_grpo_goldens.py",
                 cases=[c["name"] for c in cases])
    with open(os.path.join(ROOT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("wrote %d cases to %s (torch %s)" % (len(cases), ROOT, torch.__version__))


if __name__ == "__main__":
    main()

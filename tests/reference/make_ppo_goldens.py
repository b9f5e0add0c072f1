#!/usr/bin/python3
"""Golden files for trainer/rl_ppo and the PPO use of rl_grpo_loss (tests/test_ppo.c), computed
with PyTorch.

Run:  /usr/bin/python3 tests/reference/make_ppo_goldens.py   (Debian's python3-torch)

Writes tests/fixtures/ppo/<case>.json, one file per case, and index.json (the case names, the
seed and the torch version). The math is written here in plain torch straight from REFERENCE.md
§1 ("PPO with a critic" and the policy loss above it), not from the C code, and where possible
in a different form from the obvious loop:

  rewards   r[b,t] = -beta (old - ref) on active tokens, + score[b] on the row's last active
            token (a non-finite score adds 0; a row with no active token gets nothing)
  GAE       per row, over its active tokens compacted into one sequence (masked positions in
            between are skipped), V = 0 past the last one:
              delta_k = r_k + gamma V_{k+1} - V_k,  A_k = sum_{j >= k} (gamma lam)^(j-k) delta_j
            (the closed form of A_k = delta_k + gamma lam A_{k+1}, as a matrix product),
            R = A + V
  whiten    (x - mean) * rsqrt(var + 1e-8), mean and var (unbiased, torch.var's default) over
            the active tokens of the batch
  ev        1 - var(R - V) / var(R) over the active tokens
  value     Vc = max(min(V, V_old + eps), V_old - eps); l = 1/2 max((V - R)^2, (Vc - R)^2)
            (eps = 0: l = 1/2 (V - R)^2), aggregated as the policy loss; dL/dV by autograd
  policy    ratio = exp(clamp(logp - old, -20, 20)); l = -min(ratio A, clamp(ratio, 1 - el,
            1 + eh) A); dual clip c: where A < 0, l = min(l, -c A); + beta k1 (logp - ref);
            A per token; token_mean: sum(l m) / denom; seq_mean_token_mean: sum_b [sum_t l m /
            sum_t m] / denom; dL/dlogp by autograd
  kl ctl    beta *= 1 + clamp(kl / target - 1, -0.2, 0.2) * n_steps / horizon

Precision: float inputs are drawn and rounded to float32 (what the C test feeds), the math runs
in float64, so the goldens are the exact answers for the stored inputs to ~1e-15. Value offsets
V - V_old, returns and log-ratios are drawn away from every kink (the clip bounds, the point
where the two value branches cross outside the clip range, the policy clip and dual-clip bounds)
by far more than an ulp, so no branch can flip between torch and C. Masked positions hold finite
garbage (the C test replaces it with NaN). JSON has no NaN: an unscorable score is null.
"""

import json
import math
import os

import torch

SEED = 20261123
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                     "fixtures", "ppo"))

gen = torch.Generator().manual_seed(SEED)


def uniform(lo, hi, n):
    return (lo + (hi - lo) * torch.rand(n, generator=gen, dtype=torch.float64)).tolist()


def randint(lo, hi):
    """An integer in [lo, hi]."""
    return int(torch.randint(lo, hi + 1, (1,), generator=gen))


def choice(values, n, jitter):
    idx = torch.randint(len(values), (n,), generator=gen).tolist()
    jit = uniform(-jitter, jitter, n)
    return [values[i] + j for i, j in zip(idx, jit)]


def f32(xs):
    """Rounds to float32 and back: the exact values the C test reads."""
    return torch.tensor(xs, dtype=torch.float32).double().tolist()


def t64(xs, B, T):
    return torch.tensor(xs, dtype=torch.float64).view(B, T)


def make_mask(B, T, hole_row=None, empty_row=None):
    """Rows of prompt + completion + right padding; hole_row gets a masked gap inside its
    completion (tool output in a multi-turn row); empty_row has no active token."""
    mask = []
    for b in range(B):
        p = randint(0, 2)
        n = randint(2, T - p)
        row = [0.0] * p + [1.0] * n + [0.0] * (T - p - n)
        if b == hole_row:
            row = [0.0] + [1.0] * 2 + [0.0] * 2 + [1.0] * (T - 6) + [0.0]
        if b == empty_row:
            row = [0.0] * T
        mask += row
    return mask


def garbage_fill(xs, mask):
    g = uniform(-50.0, 50.0, len(xs))
    return [x if m else y for x, m, y in zip(xs, mask, g)]


# ---- rewards, GAE, whitening, explained variance -----------------------------------------------

def torch_rewards(B, T, mask, old, ref, score, beta):
    m = t64(mask, B, T)
    k1 = (t64(old, B, T) - t64(ref, B, T)) * m
    r = -beta * k1
    idx = torch.arange(T, dtype=torch.float64).expand(B, T)
    last = torch.where(m > 0, idx, torch.full_like(idx, -1.0)).amax(1).long()
    unscorable = 0
    for b in range(B):
        s = score[b]
        if s is None or not math.isfinite(s):
            unscorable += 1
            continue
        if last[b] >= 0:
            r[b, last[b]] += s
    r = r * m
    return r, (k1 * m).sum(1), unscorable


def torch_gae(B, T, mask, r, values, gamma, lam):
    m = t64(mask, B, T)
    V = t64(values, B, T)
    A = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        idx = torch.nonzero(m[b] > 0).view(-1)
        n = idx.numel()
        if n == 0:
            continue
        rv, vv = r[b, idx], V[b, idx]
        v_next = torch.cat([vv[1:], torch.zeros(1, dtype=torch.float64)])
        delta = rv + gamma * v_next - vv
        k = torch.arange(n, dtype=torch.float64)
        expo = k.view(1, n) - k.view(n, 1)  # j - i
        M = torch.where(expo >= 0, torch.pow(torch.tensor(gamma * lam, dtype=torch.float64),
                                             torch.clamp(expo, min=0.0)),
                        torch.zeros(n, n, dtype=torch.float64))
        A[b, idx] = M @ delta
    R = (A + V) * m
    return A * m, R


def torch_whiten(B, T, mask, x):
    m = t64(mask, B, T) > 0
    vals = x[m]
    mean = vals.mean()
    var = vals.var(unbiased=True)
    w = (x - mean) * torch.rsqrt(var + 1e-8)
    return torch.where(m, w, torch.zeros_like(w)), mean.item(), var.sqrt().item()


def torch_ev(B, T, mask, R, values):
    m = t64(mask, B, T) > 0
    Rm, Vm = R[m], t64(values, B, T)[m]
    return 1.0 - ((Rm - Vm).var() / Rm.var()).item()


def gae_case(name, what, gamma, lam, beta, B=6, T=10):
    mask = make_mask(B, T, hole_row=2, empty_row=B - 1)
    old = f32(uniform(-4.0, -0.05, B * T))
    ref = f32([o + d for o, d in zip(old, uniform(-0.8, 0.8, B * T))])
    values = f32(uniform(-1.5, 1.5, B * T))
    score = f32(uniform(-2.0, 3.0, B))
    score[1] = None  # unscorable: KL rewards only
    score[B - 1] = 7.0  # the empty row's score goes nowhere
    c = dict(kind="gae", name=name, what=what, B=B, T=T, gamma=gamma, lam=lam, beta=beta,
             mask=mask, old_logp=garbage_fill(old, mask), ref_logp=garbage_fill(ref, mask),
             values=garbage_fill(values, mask), score=score)
    r, kl_row, unscorable = torch_rewards(B, T, mask, old, ref, score, beta)
    A, R = torch_gae(B, T, mask, r, values, gamma, lam)
    W, mean, std = torch_whiten(B, T, mask, A)
    c.update(rewards=r.reshape(-1).tolist(), kl_row=kl_row.tolist(), unscorable=unscorable,
             adv=A.reshape(-1).tolist(), ret=R.reshape(-1).tolist(),
             whitened=W.reshape(-1).tolist(), adv_mean=mean, adv_std=std,
             explained_variance=torch_ev(B, T, mask, R, values))
    return c


# ---- the value loss ------------------------------------------------------------------------------

def aggregate(l, m, agg, denom):
    if agg == "seq_mean_token_mean":
        return ((l * m).sum(1) / torch.clamp(m.sum(1), min=1.0)).sum() / denom
    return (l * m).sum() / denom  # token_mean and seq_mean_token_sum_norm: the caller's denom


def torch_value_loss(c):
    B, T, eps = c["B"], c["T"], c["eps_v"]
    m = t64(c["mask"], B, T)
    V = t64(c["values"], B, T).requires_grad_(True)
    R = t64(c["returns"], B, T)
    l1 = (V - R) ** 2
    if eps > 0:
        Vo = t64(c["old_values"], B, T)
        Vc = torch.max(torch.min(V, Vo + eps), Vo - eps)
        l2 = (Vc - R) ** 2
        l = 0.5 * torch.max(l1, l2)
        clipped = ((l2 > l1) & (m > 0)).sum().item()
    else:
        l = 0.5 * l1
        clipped = 0
    loss = aggregate(l, m, c["loss_agg"], c["denom"])
    loss.backward()
    on = m > 0
    stats = dict(tokens=m.sum().item(), clipped=clipped, sq_err=(l1.detach() * m).sum().item(),
                 value=(V.detach() * m).sum().item(), ret=(R * m).sum().item())
    return loss.item(), V.grad.reshape(-1).tolist(), stats, on


# V - V_old offsets with eps 0.2: inside, near the bounds (0.16, 0.24: 0.04 from them) and far out
VALUE_OFFSETS = [-0.7, -0.24, -0.16, -0.05, 0.0, 0.08, 0.16, 0.24, 0.5]


def value_case(name, what, loss_agg, eps_v=0.2, B=5, T=8):
    while True:
        mask = make_mask(B, T, hole_row=1, empty_row=B - 1 if loss_agg ==
                         "seq_mean_token_mean" else None)
        vo = f32(uniform(-2.0, 2.0, B * T))
        v = f32([a + d for a, d in zip(vo, choice(VALUE_OFFSETS, B * T, 0.01))])
        r = f32([a + d for a, d in zip(vo, uniform(-1.2, 1.2, B * T))])
        # keep every active token away from the kinks: |V - V_old| = eps and, outside the clip
        # range, V + Vc = 2R (where the two branches cross)
        ok = True
        for i in range(B * T):
            if not mask[i] or eps_v <= 0:
                continue
            d = v[i] - vo[i]
            vc = min(max(v[i], vo[i] - eps_v), vo[i] + eps_v)
            if abs(abs(d) - eps_v) < 0.03 or (abs(d) > eps_v and abs(v[i] + vc - 2 * r[i]) < 0.05):
                ok = False
        if not ok:
            continue
        tokens = sum(mask)
        denom = {"token_mean": tokens + 3.0, "seq_mean_token_mean": B + 2.0,
                 "seq_mean_token_sum_norm": (B + 2.0) * T}[loss_agg]
        c = dict(kind="value", name=name, what=what, B=B, T=T, eps_v=eps_v, loss_agg=loss_agg,
                 denom=denom, mask=mask, values=garbage_fill(v, mask),
                 old_values=garbage_fill(vo, mask), returns=garbage_fill(r, mask))
        c["loss"], c["dvalues"], c["stats"], on = torch_value_loss(c)
        # both branches of the max must be met outside the clip range
        outside_unclipped = sum(1 for i in range(B * T) if mask[i] and abs(v[i] - vo[i]) > eps_v)
        if eps_v <= 0 or (c["stats"]["clipped"] >= 3 and
                          outside_unclipped - c["stats"]["clipped"] >= 2):
            return c


# ---- the PPO policy loss (rl_grpo_loss with per-token advantages) -------------------------------

# logp - old: ratios 0.41 .. 4.95, >= 0.028 in log space from ln 0.8, ln 1.2, ln 1.28, ln 3
LOG_RATIOS = [-0.9, -0.5, -0.3, -0.1, 0.0, 0.05, 0.1, 0.21, 0.3, 0.6, 1.3, 1.6]


def torch_policy_loss(c):
    B, T, alg = c["B"], c["T"], c["alg"]
    logp = t64(c["logp"], B, T).requires_grad_(True)
    old = t64(c["old_logp"], B, T)
    ref = t64(c["ref_logp"], B, T)
    m = t64(c["mask"], B, T)
    A = t64(c["adv_tok"], B, T)
    el, eh, dc, beta = alg["epsilon_low"], alg["epsilon_high"], alg["dual_clip"], alg["beta"]
    ratio = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
    l = -torch.min(ratio * A, torch.clamp(ratio, 1.0 - el, 1.0 + eh) * A)
    before_dual = l
    if dc > 0:
        l = torch.where(A < 0, torch.min(l, -dc * A), l)
    k1 = logp - ref
    if beta > 0:
        l = l + beta * k1
    loss = aggregate(l, m, alg["loss_agg"], c["denom"])
    loss.backward()
    on = m > 0
    stats = dict(
        tokens=m.sum().item(),
        kl=(k1.detach() * m).sum().item(),
        clip_low=((A < 0) & (ratio < 1.0 - el) & on).sum().item(),
        clip_high=((A > 0) & (ratio > 1.0 + eh) & on).sum().item(),
        dual_clip=0 if dc <= 0 else ((A < 0) & (before_dual > -dc * A) & on).sum().item(),
        ratio=(ratio.detach() * m).sum().item())
    return loss.item(), logp.grad.reshape(-1).tolist(), stats


def policy_case(name, what, B=5, T=8, **alg_kw):
    alg = dict(epsilon_low=0.2, epsilon_high=0.2, dual_clip=0.0, beta=0.0, kl_estimator="k1",
               loss_agg="token_mean")
    alg.update(alg_kw)
    while True:
        mask = make_mask(B, T, hole_row=2, empty_row=B - 1 if alg["loss_agg"] ==
                         "seq_mean_token_mean" else None)
        old = f32(uniform(-3.0, -0.05, B * T))
        logp = f32([o + x for o, x in zip(old, choice(LOG_RATIOS, B * T, 0.01))])
        ref = f32([lp - d for lp, d in zip(logp, uniform(-1.0, 1.0, B * T))])
        # per-token advantages as whitening leaves them: mean ~0, std ~1, both signs per row
        adv = f32(choice([-2.1, -1.3, -0.7, -0.25, 0.2, 0.6, 1.1, 1.9], B * T, 0.05))
        tokens = sum(mask)
        denom = {"token_mean": tokens + 4.0, "seq_mean_token_mean": B + 1.0}[alg["loss_agg"]]
        c = dict(kind="policy", name=name, what=what, B=B, T=T, alg=alg, denom=denom, mask=mask,
                 logp=garbage_fill(logp, mask), old_logp=garbage_fill(old, mask),
                 ref_logp=garbage_fill(ref, mask), adv_tok=garbage_fill(adv, mask))
        c["loss"], c["dlogp"], c["stats"] = torch_policy_loss(c)
        s = c["stats"]
        if s["clip_low"] >= 1 and s["clip_high"] >= 1 and (alg["dual_clip"] <= 0 or
                                                           s["dual_clip"] >= 2):
            return c


# ---- the adaptive KL controller ------------------------------------------------------------------

def kl_ctl_case():
    beta, target, horizon = 0.05, 6.0, 10000.0
    steps = []
    kls = [2.0, 5.5, 6.0, 6.9, 9.0, 30.0, -1.0, 0.0]
    ns = [64, 64, 128, 64, 512, 64, 64, 256]
    for kl, n in zip(kls, ns):
        e = min(max(kl / target - 1.0, -0.2), 0.2)
        beta = beta * (1.0 + e * n / horizon)
        steps.append(dict(kl=kl, n_steps=n, beta=beta))
    return dict(kind="kl_ctl", name="kl_controller", what="TRL target 6, horizon 10000",
                beta0=0.05, target=target, horizon=horizon, steps=steps)


def main():
    os.makedirs(ROOT, exist_ok=True)
    cases = [
        gae_case("gae_trl", "TRL defaults gamma 1, lam 0.95, beta 0.05", 1.0, 0.95, 0.05),
        gae_case("gae_discounted", "gamma 0.99, lam 0.9, beta 0.1", 0.99, 0.9, 0.1),
        gae_case("gae_short", "gamma 0.8, lam 0.5, beta 0.2", 0.8, 0.5, 0.2),
        gae_case("gae_td0", "gamma 0.9, lam 0 (one-step TD), beta 0: no KL term", 0.9, 0.0, 0.0),
        gae_case("gae_mc", "gamma 1, lam 1 (Monte Carlo returns), beta 0.03", 1.0, 1.0, 0.03),
        value_case("value_token_mean", "eps_v 0.2, token_mean", "token_mean"),
        value_case("value_seq_mean_token_mean", "eps_v 0.2, seq_mean_token_mean, empty row",
                   "seq_mean_token_mean"),
        value_case("value_seq_mean_token_sum_norm", "eps_v 0.5 (verl), Dr.GRPO sum / (B L_max)",
                   "seq_mean_token_sum_norm", eps_v=0.5),
        value_case("value_no_clip", "eps_v 0: no clipping, token_mean", "token_mean", eps_v=0.0),
        policy_case("policy_clip", "clip 0.2, token_mean"),
        policy_case("policy_clip_higher_dual", "eps 0.2/0.28, dual clip 3, seq_mean_token_mean",
                    epsilon_high=0.28, dual_clip=3.0, loss_agg="seq_mean_token_mean"),
        policy_case("policy_k1", "clip 0.2, k1 beta 0.05, dual clip 3, token_mean", beta=0.05,
                    dual_clip=3.0),
        policy_case("policy_all", "eps 0.2/0.28, dual 3, k1 beta 0.05, seq_mean_token_mean",
                    B=6, T=9, epsilon_high=0.28, dual_clip=3.0, beta=0.05,
                    loss_agg="seq_mean_token_mean"),
        kl_ctl_case(),
    ]
    for c in cases:
        c["torch_version"] = torch.__version__
        with open(os.path.join(ROOT, c["name"] + ".json"), "w") as f:
            json.dump(c, f, allow_nan=False, indent=None, separators=(",", ":"))
            f.write("\n")
    index = dict(torch_version=torch.__version__, seed=SEED,
                 script="tests/reference/make_ppo_goldens.py",
                 cases=[c["name"] for c in cases])
    with open(os.path.join(ROOT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("wrote %d cases to %s (torch %s)" % (len(cases), ROOT, torch.__version__))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Golden files for trainer/rl_pref (tests/test_pref.c), computed with PyTorch autograd.

Run:  /usr/bin/python3 tests/reference/make_pref_goldens.py   (Debian's python3-torch)

Writes tests/fixtures/pref/<case>.json, one file per case, and index.json (the case names, the
seed and the torch version). The math is plain torch written from REFERENCE.md §1 ("DPO",
"Reward model") and from what TRL does (DPOTrainer v0.28.0, the last release with `rpo_alpha`
and with label smoothing on the sigmoid loss; RewardTrainer), not from the C code. It works at
the level of TOKENS, as TRL does, so the goldens also check the caller's broadcast of rl_pref's
per-pair gradients to per-token gradients:

  DPO  per pair, token log-probabilities logp (policy, the leaf) and ref (reference) of the
       chosen (w) and rejected (l) completions, a right-padded mask per completion:
         s = sum_t logp m                  (IPO: s = sum_t logp m / sum_t m, TRL's
                                            `all_logps / loss_mask.sum(-1)`, policy and ref)
         h = (s_w - ref_w) - (s_l - ref_l)
         sigmoid: -(1 - eps) logsigmoid(beta h) - eps logsigmoid(-beta h)
         hinge:   relu(1 - beta h)
         ipo:     (h - 1 / (2 beta))^2
         loss = mean over pairs + rpo_alpha * nll, nll = -sum(logp_w m_w) / sum(m_w): TRL's
                `nll_loss`, F.cross_entropy over the batch's chosen completion tokens (a token
                mean over the whole batch; checked below against F.cross_entropy on the logits
                the token log-probabilities come from), from the unnormalised logp also for IPO
       dL/dlogp by autograd (per token; 0 where the mask is 0). Metrics as TRL logs them:
         rewards/chosen = mean beta (s_w - ref_w), rewards/rejected likewise (the IPO-normalised
         s for IPO), rewards/accuracies = mean [chosen > rejected], rewards/margins = mean of the
         difference, logps/chosen = mean s_w, logps/rejected = mean s_l, nll_loss = nll
  RM   scores q_w, q_l (leaves), margin m (optional), center coefficient c:
         loss = mean -logsigmoid(q_w - q_l - m) + c mean (q_w + q_l)^2
       dL/dq by autograd; accuracy = mean [q_w > q_l], margin = mean (q_w - q_l) (without m)

Precision: inputs are drawn in float64, rounded to float32 (the token log-probabilities a model
returns), stored, and the math runs in float64 on the stored values, so the goldens are the
exact answers for those inputs to ~1e-15. Inputs are redrawn until no pair sits within 1e-3 of
the hinge's kink (beta h = 1) and no reward comparison is a near tie. Masked positions hold
finite garbage (the C test replaces it with NaN).
"""

import json
import os

import torch
import torch.nn.functional as F

SEED = 20261124
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                     "fixtures", "pref"))

gen = torch.Generator().manual_seed(SEED)


def rand(*shape, lo=0.0, hi=1.0):
    return lo + (hi - lo) * torch.rand(*shape, generator=gen, dtype=torch.float64)


def randint(lo, hi, shape):
    """Integers in [lo, hi]."""
    return torch.randint(lo, hi + 1, shape, generator=gen)


def f32(t):
    return t.float().double()


# ---- DPO -----------------------------------------------------------------------------------------

def token_logps(n, T, V, lengths, spread):
    """Per-token log-probabilities of random tokens under random logits (policy), and under
    perturbed logits (reference); checks TRL's nll_loss fact on the chosen side."""
    logits = rand(n, T, V, lo=-3.0, hi=3.0)
    labels = randint(0, V - 1, (n, T))
    ref_logits = logits + spread.view(n, 1, 1) * rand(n, T, V, lo=-1.0, hi=1.0)
    mask = (torch.arange(T).view(1, T) < lengths.view(n, 1)).double()
    lp = torch.log_softmax(logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    rp = torch.log_softmax(ref_logits, -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    # TRL computes nll_loss as F.cross_entropy(logits, labels) over the chosen completion tokens
    # of the batch (padding ignored): that is minus the token mean of these log-probabilities.
    on = mask > 0
    ce = F.cross_entropy(logits[on], labels[on])
    tm = -(lp * mask).sum() / mask.sum()
    assert abs(ce.item() - tm.item()) < 1e-12, (ce.item(), tm.item())
    return f32(lp), f32(rp), mask


def garbage(x, mask):
    g = rand(*x.shape, lo=-50.0, hi=50.0)
    return torch.where(mask > 0, x, g)


def torch_dpo(c):
    n, T = c["n"], c["T"]
    loss_type, beta = c["loss_type"], c["beta"]
    eps, alpha = c["label_smoothing"], c["rpo_alpha"]
    mw = torch.tensor(c["mask_w"], dtype=torch.float64).view(n, T)
    ml = torch.tensor(c["mask_l"], dtype=torch.float64).view(n, T)
    lw = torch.tensor(c["logp_w"], dtype=torch.float64).view(n, T).requires_grad_(True)
    ll = torch.tensor(c["logp_l"], dtype=torch.float64).view(n, T).requires_grad_(True)
    rw = torch.tensor(c["ref_w"], dtype=torch.float64).view(n, T)
    rl = torch.tensor(c["ref_l"], dtype=torch.float64).view(n, T)
    # masked garbage must not leak: multiply by the mask AFTER replacing it (where), as TRL zeroes
    # per_token_logps[~loss_mask] before summing
    z = torch.zeros_like(mw)
    sw = torch.where(mw > 0, lw, z).sum(1)
    sl = torch.where(ml > 0, ll, z).sum(1)
    refw = torch.where(mw > 0, rw, z).sum(1)
    refl = torch.where(ml > 0, rl, z).sum(1)
    if loss_type == "ipo":
        sw, refw = sw / mw.sum(1), refw / mw.sum(1)
        sl, refl = sl / ml.sum(1), refl / ml.sum(1)
    h = (sw - refw) - (sl - refl)
    if loss_type == "sigmoid":
        losses = -(1 - eps) * F.logsigmoid(beta * h) - eps * F.logsigmoid(-beta * h)
    elif loss_type == "hinge":
        losses = torch.relu(1 - beta * h)
    elif loss_type == "ipo":
        losses = (h - 1 / (2 * beta)) ** 2
    else:
        raise ValueError(loss_type)
    nll = -torch.where(mw > 0, lw, z).sum() / mw.sum()
    loss = losses.mean() + (alpha * nll if alpha > 0 else 0.0)
    loss.backward()
    cr = beta * (sw - refw).detach()
    rr = beta * (sl - refl).detach()
    metrics = {
        "rewards/chosen": cr.mean().item(),
        "rewards/rejected": rr.mean().item(),
        "rewards/accuracies": (cr > rr).double().mean().item(),
        "rewards/margins": (cr - rr).mean().item(),
        "logps/chosen": sw.detach().mean().item(),
        "logps/rejected": sl.detach().mean().item(),
        "nll_loss": nll.item(),
    }
    return loss.item(), lw.grad.reshape(-1).tolist(), ll.grad.reshape(-1).tolist(), metrics, h


def dpo_case(name, what, loss_type, beta=0.1, label_smoothing=0.0, rpo_alpha=0.0, n=8, T=12,
             V=11):
    while True:
        len_w = randint(1, T, (n,))
        len_l = randint(1, T, (n,))
        lp_w, rp_w, mw = token_logps(n, T, V, len_w, rand(n, lo=0.2, hi=3.0))
        lp_l, rp_l, ml = token_logps(n, T, V, len_l, rand(n, lo=0.2, hi=3.0))
        c = dict(kind="dpo", name=name, what=what, n=n, T=T, loss_type=loss_type, beta=beta,
                 label_smoothing=label_smoothing, rpo_alpha=rpo_alpha, denom=float(n),
                 nll_denom=mw.sum().item(),
                 mask_w=mw.reshape(-1).tolist(), mask_l=ml.reshape(-1).tolist(),
                 n_w=len_w.tolist(), n_l=len_l.tolist(),
                 logp_w=garbage(lp_w, mw).reshape(-1).tolist(),
                 logp_l=garbage(lp_l, ml).reshape(-1).tolist(),
                 ref_w=garbage(rp_w, mw).reshape(-1).tolist(),
                 ref_l=garbage(rp_l, ml).reshape(-1).tolist())
        loss, gw, gl, metrics, h = torch_dpo(c)
        z = beta * h.detach()
        if (z - 1).abs().min().item() < 1e-3 or h.detach().abs().min().item() < 1e-3:
            continue  # a hinge kink or a reward tie: redraw
        if loss_type == "hinge" and not ((z < 1).sum() >= 2 and (z > 1).sum() >= 2):
            continue  # both sides of the hinge
        if not (0 < metrics["rewards/accuracies"] < 1):
            continue  # both outcomes of the accuracy
        c.update(loss=loss, dlogp_w=gw, dlogp_l=gl, metrics=metrics)
        return c


# ---- reward model --------------------------------------------------------------------------------

def rm_case(name, what, margin, center, n=10):
    while True:
        qw = f32(rand(n, lo=-3.0, hi=3.0))
        ql = f32(qw - rand(n, lo=-2.5, hi=4.0))  # mostly chosen ahead, some not
        m = f32(rand(n, lo=0.0, hi=2.0)) if margin else None
        if (qw - ql).abs().min().item() < 1e-3 or not (0 < (qw > ql).double().mean() < 1):
            continue
        break
    qw_ = qw.clone().requires_grad_(True)
    ql_ = ql.clone().requires_grad_(True)
    x = qw_ - ql_ - (m if m is not None else 0.0)
    loss = -F.logsigmoid(x).mean()
    if center > 0:
        loss = loss + center * torch.mean((qw_ + ql_) ** 2)
    loss.backward()
    metrics = {"accuracy": (qw > ql).double().mean().item(), "margin": (qw - ql).mean().item(),
               "mean_reward": torch.cat([qw, ql]).mean().item()}
    return dict(kind="rm", name=name, what=what, n=n, denom=float(n), center=center,
                q_w=qw.tolist(), q_l=ql.tolist(), margin=None if m is None else m.tolist(),
                loss=loss.item(), dq_w=qw_.grad.tolist(), dq_l=ql_.grad.tolist(),
                metrics=metrics)


def main():
    os.makedirs(ROOT, exist_ok=True)
    cases = [
        dpo_case("dpo_sigmoid", "sigmoid, beta 0.1", "sigmoid"),
        dpo_case("dpo_cdpo", "sigmoid, beta 0.1, label smoothing 0.1 (cDPO)", "sigmoid",
                 label_smoothing=0.1),
        dpo_case("dpo_hinge", "hinge, beta 0.1, both sides of the kink", "hinge"),
        dpo_case("dpo_ipo", "ipo, beta 0.1 (per-token means)", "ipo"),
        dpo_case("dpo_rpo", "sigmoid, beta 0.1, rpo_alpha 1.0", "sigmoid", rpo_alpha=1.0),
        dpo_case("dpo_ipo_rpo", "ipo, beta 0.5, rpo_alpha 0.5 (NLL unnormalised), label "
                 "smoothing 0.2 ignored", "ipo", beta=0.5, label_smoothing=0.2, rpo_alpha=0.5),
        dpo_case("dpo_cdpo_rpo", "sigmoid, beta 0.25, label smoothing 0.3, rpo_alpha 0.7",
                 "sigmoid", beta=0.25, label_smoothing=0.3, rpo_alpha=0.7),
        rm_case("rm_plain", "Bradley-Terry", margin=False, center=0.0),
        rm_case("rm_margin", "Bradley-Terry with per-pair margins", margin=True, center=0.0),
        rm_case("rm_center", "Bradley-Terry, center_rewards_coefficient 0.01", margin=False,
                center=0.01),
        rm_case("rm_margin_center", "margins and centering 0.1", margin=True, center=0.1),
    ]
    for c in cases:
        c["torch_version"] = torch.__version__
        with open(os.path.join(ROOT, c["name"] + ".json"), "w") as f:
            json.dump(c, f, allow_nan=False, indent=None, separators=(",", ":"))
            f.write("\n")
    index = dict(torch_version=torch.__version__, seed=SEED,
                 script="tests/reference/make_pref_goldens.py",
                 cases=[c["name"] for c in cases])
    with open(os.path.join(ROOT, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("wrote %d cases to %s (torch %s)" % (len(cases), ROOT, torch.__version__))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Golden files for the policy losses of GRPO's family beyond GRPO's own (trainer/rl_loss_*.c;
tests/test_loss_<name>.c), computed with PyTorch autograd.

Run:  /usr/bin/python3 tests/reference/make_policy_loss_goldens.py   (Debian's python3-torch)

Writes tests/fixtures/<loss>/<case>.json and index.json (the case names and the torch version)
for each loss below. The inputs are drawn by make_grpo_goldens.py's generators (the same
batches, masks and garbage at masked positions, float32-rounded), each loss from a seed of its
own. The math is written here in plain torch from REFERENCE.md §1, not from the C code:

GSPO (sequence-level ratio; TRL importance_sampling_level="sequence"):
    log s_i = clamp(sum_t (logp - old) m / max(1, sum_t m), -20, 20)    old = logp.detach()
    s_i     = exp(log s_i), broadcast over row i's tokens                 when old_logp is null
    l       = -min(s A, clamp(s, 1 - eps_low, 1 + eps_high) A)
    then dual clip, TIS, the KL term and the aggregation exactly as make_grpo_goldens.py's GRPO,
and dL/dlogp from loss.backward(): the gradient flows through s_i into every token of the row.

CISPO (the clipped importance weight, detached; verl's bounds, both sides):
    r = exp(clamp(logp - old, -20, 20))
    l = -clamp(r, 1 - eps_low, 1 + eps_high).detach() * A * logp
    then TIS, the KL term and the aggregation as GRPO's (no dual clip),
and dL/dlogp from loss.backward(): no gradient through the weight.

Precision and kinks: the loss runs in float64 on the stored float32 inputs; a case is drawn
again until every row's log s_i lies at least 0.02 from the clip bounds' logs (and from ln c
with the dual clip), so that an ulp cannot flip a branch.
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_grpo_goldens as g  # noqa: E402  (its input generators and KL estimators)

FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                         "fixtures"))
SEEDS = {"gspo": 20261128, "cispo": 20261129}


def tensors(c):
    B, T = c["B"], c["T"]
    t = lambda xs: torch.tensor(xs, dtype=torch.float64).view(B, T)  # noqa: E731
    logp = t(c["logp"]).requires_grad_(True)
    old = logp.detach() if c["old_logp"] is None else t(c["old_logp"])
    ref = None if c["ref_logp"] is None else t(c["ref_logp"])
    mu = None if c["mu_logp"] is None else t(c["mu_logp"])
    mask = t(c["mask"])
    A = torch.tensor(c["adv"], dtype=torch.float64).view(B, 1).expand(B, T)
    return logp, old, ref, mu, mask, A


def finish(c, logp, old, ref, mu, mask, A, l, ratio, extra_stats):
    """TIS, the KL term and the aggregation on the per-token policy loss l (as GRPO's), then
    backward and the statistics."""
    B, T, alg = c["B"], c["T"], c["alg"]
    beta, cap = alg["beta"], alg["tis_cap"]
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
        k = g.kl_term(alg["kl_estimator"], logp, ref)
    if beta > 0:
        l = l + beta * k
    if alg["loss_agg"] == "seq_mean_token_mean":
        loss = ((l * m).sum(1) / torch.clamp(mask.sum(1), min=1.0)).sum() / c["denom"]
    else:  # token_mean and seq_mean_token_sum_norm differ only in the caller's denom
        loss = (l * m).sum() / c["denom"]
    loss.backward()
    x = (logp - old).detach()
    stats = dict(extra_stats)
    stats.update({
        "tokens": mask.sum().item(),
        "kl": 0.0 if k is None else (k.detach() * mask).sum().item(),
        "ratio": (ratio.detach() * mask).sum().item(),
        "tis_weight": (w * mask).sum().item(),
        "tis_masked": (1.0 - keep).sum().item(),
        "logprob_gap": 0.0 if mu is None else ((old - mu).abs() * mask).sum().item(),
        "approx_kl": (0.5 * x * x * mask).sum().item(),
    })
    return loss.item(), logp.grad.reshape(-1).tolist(), stats


# ---- GSPO ---------------------------------------------------------------------------------------

def gspo_log_s(logp, old, mask):
    n = torch.clamp(mask.sum(1, keepdim=True), min=1.0)
    return ((logp - old) * mask).sum(1, keepdim=True) / n


def torch_gspo(c):
    logp, old, ref, mu, mask, A = tensors(c)
    B, T, alg = c["B"], c["T"], c["alg"]
    el, eh, dc = alg["epsilon_low"], alg["epsilon_high"], alg["dual_clip"]
    s = torch.exp(torch.clamp(gspo_log_s(logp, old, mask), -20.0, 20.0)).expand(B, T)
    l = -torch.min(s * A, torch.clamp(s, 1.0 - el, 1.0 + eh) * A)
    before_dual = l
    if dc > 0:
        l = torch.where(A < 0, torch.min(l, -dc * A), l)
    on = mask > 0
    extra = {
        "clip_low": ((A < 0) & (s < 1.0 - el) & on).sum().item(),
        "clip_high": ((A > 0) & (s > 1.0 + eh) & on).sum().item(),
        "dual_clip": 0 if dc <= 0 else ((A < 0) & (before_dual > -dc * A) & on).sum().item(),
    }
    return finish(c, logp, old, ref, mu, mask, A, l, s, extra)


def gspo_far_from_kinks(c):
    B, T, alg = c["B"], c["T"], c["alg"]
    logp, old, _, _, mask, _ = tensors(c)
    ls = gspo_log_s(logp.detach(), old, mask).view(-1).tolist()
    kinks = [math.log(1.0 - alg["epsilon_low"]), math.log(1.0 + alg["epsilon_high"])]
    if alg["dual_clip"] > 0:
        kinks.append(math.log(alg["dual_clip"]))
    n = mask.sum(1).tolist()
    return all(all(abs(x - k) > 0.02 for k in kinks) for x, cnt in zip(ls, n) if cnt > 0)


# ---- CISPO --------------------------------------------------------------------------------------

def torch_cispo(c):
    logp, old, ref, mu, mask, A = tensors(c)
    alg = c["alg"]
    el, eh = alg["epsilon_low"], alg["epsilon_high"]
    r = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
    l = -torch.clamp(r, 1.0 - el, 1.0 + eh).detach() * A * logp
    on = mask > 0
    extra = {
        "clip_low": ((r < 1.0 - el) & on).sum().item(),
        "clip_high": ((r > 1.0 + eh) & on).sum().item(),
        "dual_clip": 0,
    }
    return finish(c, logp, old, ref, mu, mask, A, l, r, extra)


def cispo_cases():
    def case(*a, **k):
        return loss_case("cispo", torch_cispo, lambda c: True, *a, **k)
    return [
        case("agg_token_mean", "token_mean; ref given with beta 0 (stats.kl only)"),
        case("agg_seq_mean_token_mean", "seq_mean_token_mean with an empty row", empty_row=True,
             loss_agg="seq_mean_token_mean"),
        case("agg_seq_mean_token_sum_norm", "Dr.GRPO sum / (B L_max)",
             loss_agg="seq_mean_token_sum_norm"),
        case("kl_k3", "beta 0.1, k3", B=5, beta=0.1, kl_estimator="k3"),
        case("kl_k1", "beta 0.1, k1", beta=0.1, kl_estimator="k1"),
        case("clip_higher", "eps_high 0.28", B=6, epsilon_high=0.28),
        case("upper_only", "TRL's form: no lower bound to speak of, upper bound 5", B=6,
             epsilon_low=0.999, epsilon_high=4.0),
        case("tis_token", "token TIS, cap 2", tis="token"),
        case("tis_sequence", "sequence TIS, cap 2, k1", B=6, tis="sequence", beta=0.05,
             kl_estimator="k1"),
        case("old_null", "old_logp null (w = 1), k3, token TIS, seq_mean_token_mean", old=False,
             beta=0.04, tis="token", loss_agg="seq_mean_token_mean"),
        case("no_ref_no_mu", "neither ref nor mu given", ref=False, mu=False),
        case("all_knobs", "eps 0.2/0.28, k2, token TIS, seq_mean_token_mean", B=6, T=9,
             epsilon_high=0.28, beta=0.05, kl_estimator="k2", tis="token", tis_cap=1.8,
             loss_agg="seq_mean_token_mean", empty_row=True),
    ]


# ---- the cases ----------------------------------------------------------------------------------

def loss_case(loss, fn, ok, name, what, B=4, T=7, old=True, ref=True, mu=True, empty_row=False,
              **alg_kw):
    alg = dict(g.BASE, **alg_kw)
    while True:
        inputs = g.make_inputs(B, T, old, ref, mu,
                               tis_seq_cap=alg["tis_cap"] if alg["tis"] == "sequence" else None,
                               empty_row=empty_row, big_ratios=alg["dual_clip"] > 0)
        tokens = sum(inputs["mask"])
        denom = {"token_mean": tokens + 5.0, "seq_mean_token_mean": B + 2.0,
                 "seq_mean_token_sum_norm": (B + 2.0) * T}[alg["loss_agg"]]
        c = dict(kind="loss", loss=loss, name=name, what=what, B=B, T=T, alg=alg, denom=denom,
                 **inputs)
        if not ok(c):
            continue
        c["loss_value"], c["dlogp"], c["stats"] = fn(c)
        if alg["dual_clip"] <= 0 or c["stats"]["dual_clip"] >= 2:
            return c


def gspo_cases():
    def case(*a, **k):
        return loss_case("gspo", torch_gspo, gspo_far_from_kinks, *a, **k)
    return [
        case("agg_token_mean", "token_mean; ref given with beta 0 (stats.kl only)"),
        case("agg_seq_mean_token_mean", "seq_mean_token_mean with an empty row", empty_row=True,
             loss_agg="seq_mean_token_mean"),
        case("agg_seq_mean_token_sum_norm", "Dr.GRPO sum / (B L_max)",
             loss_agg="seq_mean_token_sum_norm"),
        case("kl_k3", "beta 0.1, k3", B=5, beta=0.1, kl_estimator="k3"),
        case("kl_k2", "beta 0.1, k2", beta=0.1, kl_estimator="k2"),
        case("clip_higher", "eps_high 0.28", B=6, epsilon_high=0.28),
        case("paper_clip", "the paper's range: eps 3e-4 / 4e-4", B=6, epsilon_low=3e-4,
             epsilon_high=4e-4),
        case("dual_clip", "dual clip c = 3", B=6, T=4, dual_clip=3.0),
        case("tis_token", "token TIS, cap 2", tis="token"),
        case("tis_sequence", "sequence TIS, cap 2, k1", B=6, tis="sequence", beta=0.05,
             kl_estimator="k1"),
        case("old_null", "old_logp null (s = 1), k3, token TIS, seq_mean_token_mean", old=False,
             beta=0.04, tis="token", loss_agg="seq_mean_token_mean"),
        case("no_ref_no_mu", "neither ref nor mu given", ref=False, mu=False),
        case("all_knobs", "eps 0.2/0.28, dual 3, k2, token TIS, seq_mean_token_mean", B=6, T=9,
             epsilon_high=0.28, dual_clip=3.0, beta=0.05, kl_estimator="k2", tis="token",
             tis_cap=1.8, loss_agg="seq_mean_token_mean", empty_row=True),
    ]


LOSSES = {"gspo": gspo_cases, "cispo": cispo_cases}


def write(loss, cases):
    root = os.path.join(FIXTURES, loss)
    os.makedirs(root, exist_ok=True)
    for c in cases:
        c["torch_version"] = torch.__version__
        with open(os.path.join(root, c["name"] + ".json"), "w") as f:
            json.dump(c, f, allow_nan=False, indent=None, separators=(",", ":"))
            f.write("\n")
    index = dict(torch_version=torch.__version__, seed=SEEDS[loss],
                 script="tests/reference/make_policy_loss_goldens.py",
                 cases=[c["name"] for c in cases])
    with open(os.path.join(root, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("wrote %d %s cases to %s (torch %s)" % (len(cases), loss, root, torch.__version__))


def main():
    for loss, cases in LOSSES.items():
        g.gen.manual_seed(SEEDS[loss])  # each loss its own draws
        write(loss, cases())


if __name__ == "__main__":
    main()

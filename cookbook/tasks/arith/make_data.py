#!/usr/bin/env python3
"""Writes the arith task's data: cookbook/data/arith/{train,eval}.jsonl.

Each row is one question `a*b+c=` (a in 10..99, b in 2..9, c in 100..999) with its worked
answer, in TRL's prompt/completion form plus the bare answer for reward functions:

    {"prompt": "91*3+125=", "completion": "91*3=273;273+125=398 #### 398", "answer": "398"}

The split is by prompt: eval rows are drawn first, then train rows from the questions left, so
no prompt appears in both files (nor twice in one). Python's random.Random(seed) is the
Mersenne Twister, whose sequence is fixed across platforms and Python 3 versions, so the same
seed writes the same bytes. Standard library only.

usage: make_data.py [--seed 1234] [--train 20000] [--eval 500] [--out cookbook/data/arith]
       make_data.py --check   (ctest: the committed files are what this script writes, every
                               row's arithmetic is right, and no prompt is shared)
"""
import argparse
import json
import os
import random

A_RANGE = (10, 99)
B_RANGE = (2, 9)
C_RANGE = (100, 999)


def row(a, b, c):
    prod = a * b
    total = prod + c
    return {
        "prompt": f"{a}*{b}+{c}=",
        "completion": f"{a}*{b}={prod};{prod}+{c}={total} #### {total}",
        "answer": str(total),
    }


def draw_unique(rng, n, taken):
    """n distinct (a, b, c) triples not in `taken`; adds them to `taken`."""
    out = []
    while len(out) < n:
        q = (rng.randint(*A_RANGE), rng.randint(*B_RANGE), rng.randint(*C_RANGE))
        if q not in taken:
            taken.add(q)
            out.append(q)
    return out


def jsonl(triples):
    return "".join(json.dumps(row(a, b, c), ensure_ascii=True) + "\n" for a, b, c in triples)


def check_rows(path):
    """Re-derives every row of a file from its prompt; returns the set of prompts."""
    prompts = set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            r = json.loads(line)
            a, rest = r["prompt"].rstrip("=").split("*")
            b, c = rest.split("+")
            want = row(int(a), int(b), int(c))
            if r != want:
                raise SystemExit(f"{path}:{n}: {r} != {want}")
            if r["prompt"] in prompts:
                raise SystemExit(f"{path}:{n}: prompt {r['prompt']} repeated")
            prompts.add(r["prompt"])
    return prompts


def check(args, train_text, eval_text):
    for name, text in (("train.jsonl", train_text), ("eval.jsonl", eval_text)):
        path = os.path.join(args.out, name)
        with open(path, encoding="utf-8", newline="") as f:
            if f.read() != text:
                raise SystemExit(f"{path} differs from what make_data.py writes (seed {args.seed})")
    shared = (check_rows(os.path.join(args.out, "train.jsonl"))
              & check_rows(os.path.join(args.out, "eval.jsonl")))
    if shared:
        raise SystemExit(f"{len(shared)} prompts in both train and eval, e.g. {min(shared)}")
    print(f"ok: {args.out} matches seed {args.seed}; rows correct; no shared prompt")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.normpath(os.path.join(here, "..", "..", "data", "arith"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--eval", type=int, default=500)
    p.add_argument("--out", default=default_out)
    p.add_argument("--check", action="store_true", help="verify the files instead of writing")
    args = p.parse_args()

    space = ((A_RANGE[1] - A_RANGE[0] + 1) * (B_RANGE[1] - B_RANGE[0] + 1)
             * (C_RANGE[1] - C_RANGE[0] + 1))
    if args.train + args.eval > space // 2:
        p.error(f"asked for {args.train + args.eval} questions out of {space}; keep it under half")

    rng = random.Random(args.seed)
    taken = set()
    eval_q = draw_unique(rng, args.eval, taken)
    train_q = draw_unique(rng, args.train, taken)
    assert not set(eval_q) & set(train_q)

    train_text, eval_text = jsonl(train_q), jsonl(eval_q)
    if args.check:
        check(args, train_text, eval_text)
        return
    os.makedirs(args.out, exist_ok=True)
    for name, text in (("train.jsonl", train_text), ("eval.jsonl", eval_text)):
        with open(os.path.join(args.out, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    print(f"wrote {args.train} train and {args.eval} eval rows to {args.out} (seed {args.seed})")


if __name__ == "__main__":
    main()

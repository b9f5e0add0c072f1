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


def write_jsonl(path, triples):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for a, b, c in triples:
            f.write(json.dumps(row(a, b, c), ensure_ascii=True) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.normpath(os.path.join(here, "..", "..", "data", "arith"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--eval", type=int, default=500)
    p.add_argument("--out", default=default_out)
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

    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "train.jsonl"), train_q)
    write_jsonl(os.path.join(args.out, "eval.jsonl"), eval_q)
    print(f"wrote {args.train} train and {args.eval} eval rows to {args.out} (seed {args.seed})")


if __name__ == "__main__":
    main()

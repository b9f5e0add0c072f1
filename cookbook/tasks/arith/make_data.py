#!/usr/bin/env python3
"""Writes the arith task's data: cookbook/data/arith/{train,eval,sft_noisy}.jsonl.

Each row is one question `a*b+c=` (a in 10..99, b in 2..9, c in 100..999) with its worked
answer, in TRL's prompt/completion form plus the bare answer for reward functions:

    {"prompt": "91*3+125=", "completion": "91*3=273;273+125=398 #### 398", "answer": "398"}

The split is by prompt: eval rows are drawn first, then train rows from the questions left, so
no prompt appears in both files (nor twice in one). Python's random.Random(seed) is the
Mersenne Twister, whose sequence is fixed across platforms and Python 3 versions, so the same
seed writes the same bytes. Standard library only.

sft_noisy.jsonl is SFT data with label noise, as real SFT data has: the train rows in the same
order, except that exactly round(noise * train) of them, drawn by their own
random.Random(noise_seed), carry a wrong final answer after "#### ". The worked chain before it
stays right and "answer" stays the true result; one digit of the final number is changed to
another value (never a leading zero), so the wrong number has the same length and differs from
the true total. A model trained on it learns the arithmetic but copies the result wrongly part
of the time, an error that a reward on the final answer can teach it out of.

    {"prompt": "91*3+125=", "completion": "91*3=273;273+125=398 #### 378", "answer": "398"}

usage: make_data.py [--seed 1234] [--train 20000] [--eval 500] [--noise 0.3]
                    [--noise-seed 4321] [--out cookbook/data/arith]
       make_data.py --check   (ctest: the committed files are what this script writes, every
                               row's arithmetic is right, no prompt is shared, and
                               sft_noisy.jsonl differs from train.jsonl in exactly the chosen
                               rows, and there only in the final answer)
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


def wrong_total(rng, total):
    """`total` (a decimal string) with one digit changed: same length, no leading zero."""
    pos = rng.randrange(len(total))
    digits = [d for d in "0123456789" if d != total[pos] and not (pos == 0 and d == "0")]
    return total[:pos] + rng.choice(digits) + total[pos + 1:]


def noisy_rows(rng, triples, noise):
    """The rows of `triples` with round(noise * len) final answers made wrong.

    Returns (rows, wrong): rows as dicts in the order of `triples`, and the sorted indices of
    the rows whose number after "#### " was changed. The chain and "answer" stay right."""
    rows = [row(a, b, c) for a, b, c in triples]
    wrong = sorted(rng.sample(range(len(rows)), round(noise * len(rows))))
    for i in wrong:
        r = rows[i]
        chain, total = r["completion"].split(" #### ")
        r["completion"] = f"{chain} #### {wrong_total(rng, total)}"
    return rows, wrong


def rows_text(rows):
    return "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in rows)


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


def check_noisy(path, train_path, wrong):
    """Every row of `path` equals the same row of `train_path`, except the rows in `wrong`,
    whose final number (only) is another number of the same length without a leading zero."""
    wrong = set(wrong)
    with open(path, encoding="utf-8") as f, open(train_path, encoding="utf-8") as g:
        noisy, clean = f.read().splitlines(), g.read().splitlines()
    if len(noisy) != len(clean):
        raise SystemExit(f"{path}: {len(noisy)} rows, {train_path} has {len(clean)}")
    for i, (line, clean_line) in enumerate(zip(noisy, clean)):
        n, want = json.loads(line), json.loads(clean_line)
        if i not in wrong:
            if n != want:
                raise SystemExit(f"{path}:{i + 1}: {n} != {want} (this row is not a noisy one)")
            continue
        chain, total = n["completion"].split(" #### ")
        want_chain, want_total = want["completion"].split(" #### ")
        if (n["prompt"], n["answer"], chain) != (want["prompt"], want["answer"], want_chain):
            raise SystemExit(f"{path}:{i + 1}: {n} differs from {want} before the final answer")
        if (total == want_total or len(total) != len(want_total) or not total.isdigit()
                or total[0] == "0"
                or sum(x != y for x, y in zip(total, want_total)) != 1):
            raise SystemExit(f"{path}:{i + 1}: {total} is not {want_total} with one digit changed")


def check(args, texts, wrong):
    for name, text in texts:
        path = os.path.join(args.out, name)
        with open(path, encoding="utf-8", newline="") as f:
            if f.read() != text:
                raise SystemExit(f"{path} differs from what make_data.py writes (seed {args.seed},"
                                 f" noise {args.noise}, noise seed {args.noise_seed})")
    train_path = os.path.join(args.out, "train.jsonl")
    shared = check_rows(train_path) & check_rows(os.path.join(args.out, "eval.jsonl"))
    if shared:
        raise SystemExit(f"{len(shared)} prompts in both train and eval, e.g. {min(shared)}")
    check_noisy(os.path.join(args.out, "sft_noisy.jsonl"), train_path, wrong)
    print(f"ok: {args.out} matches seed {args.seed}; rows correct; no shared prompt; "
          f"sft_noisy.jsonl has {len(wrong)} wrong final answers (noise {args.noise}, "
          f"noise seed {args.noise_seed}) and is otherwise train.jsonl")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.normpath(os.path.join(here, "..", "..", "data", "arith"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--eval", type=int, default=500)
    p.add_argument("--noise", type=float, default=0.3,
                   help="fraction of sft_noisy.jsonl rows with a wrong final answer")
    p.add_argument("--noise-seed", type=int, default=4321,
                   help="seed of the random.Random that picks and changes those rows")
    p.add_argument("--out", default=default_out)
    p.add_argument("--check", action="store_true", help="verify the files instead of writing")
    args = p.parse_args()

    space = ((A_RANGE[1] - A_RANGE[0] + 1) * (B_RANGE[1] - B_RANGE[0] + 1)
             * (C_RANGE[1] - C_RANGE[0] + 1))
    if args.train + args.eval > space // 2:
        p.error(f"asked for {args.train + args.eval} questions out of {space}; keep it under half")
    if not 0.0 <= args.noise <= 1.0:
        p.error(f"--noise {args.noise} is not a fraction in [0, 1]")

    rng = random.Random(args.seed)
    taken = set()
    eval_q = draw_unique(rng, args.eval, taken)
    train_q = draw_unique(rng, args.train, taken)
    assert not set(eval_q) & set(train_q)

    noisy, wrong = noisy_rows(random.Random(args.noise_seed), train_q, args.noise)
    texts = (("train.jsonl", jsonl(train_q)), ("eval.jsonl", jsonl(eval_q)),
             ("sft_noisy.jsonl", rows_text(noisy)))
    if args.check:
        check(args, texts, wrong)
        return
    os.makedirs(args.out, exist_ok=True)
    for name, text in texts:
        with open(os.path.join(args.out, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    print(f"wrote {args.train} train and {args.eval} eval rows to {args.out} (seed {args.seed}),"
          f" and sft_noisy.jsonl with {len(wrong)} wrong final answers (noise {args.noise},"
          f" noise seed {args.noise_seed})")


if __name__ == "__main__":
    main()

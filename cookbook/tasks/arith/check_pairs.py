#!/usr/bin/python3
"""Checks the committed preference pairs of the arith task (make_pairs.sh writes them):

- every row is {"prompt", "chosen", "rejected", "answer"} with string values;
- the chosen completion is right and the rejected one wrong by the task's rule (the number after
  the last "#### ", else the last number in the text, against the answer; commas removed);
- each prompt and answer is a row of train.jsonl (pairs_train) or eval.jsonl (pairs_eval), at
  most one pair per prompt, and no prompt is in both files.

The pairs are a model's samples, so their bytes depend on the machine's float kernels; this
checks what they must be, not their bytes. Run: /usr/bin/python3 check_pairs.py (ctest:
cookbook.arith_pairs). Exits 1 naming the first bad row.
"""

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "data", "arith")


def final_number(text):
    m = re.findall(r"#### *(-?[0-9][0-9,]*)", text)
    if m:
        return m[-1].replace(",", "")
    m = re.findall(r"-?[0-9][0-9,]*", text)
    return m[-1].replace(",", "") if m else None


def rows(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    seen = {}
    for pairs, source in (("pairs_train.jsonl", "train.jsonl"), ("pairs_eval.jsonl", "eval.jsonl")):
        answers = {r["prompt"]: r["answer"] for r in rows(source)}
        for i, r in enumerate(rows(pairs), 1):
            where = "%s:%d" % (pairs, i)
            if sorted(r) != ["answer", "chosen", "prompt", "rejected"] or not all(
                    isinstance(v, str) for v in r.values()):
                sys.exit("%s: not a {prompt, chosen, rejected, answer} row of strings" % where)
            if answers.get(r["prompt"]) != r["answer"]:
                sys.exit("%s: prompt %r with answer %r is not a row of %s" %
                         (where, r["prompt"], r["answer"], source))
            if final_number(r["chosen"]) != r["answer"]:
                sys.exit("%s: the chosen completion is not right" % where)
            if final_number(r["rejected"]) == r["answer"]:
                sys.exit("%s: the rejected completion is right" % where)
            if r["prompt"] in seen:
                sys.exit("%s: prompt %r already in %s" % (where, r["prompt"], seen[r["prompt"]]))
            seen[r["prompt"]] = where
    print("pairs ok: %d prompts" % len(seen))


if __name__ == "__main__":
    main()

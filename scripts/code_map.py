#!/usr/bin/env python3
"""The shape of the source tree, for reviews of a change to the house (docs/status.md's map):

  python3 scripts/code_map.py folders            each source folder: files and lines
  python3 scripts/code_map.py longest [N]        the N longest C functions (default 15)
  python3 scripts/code_map.py names WORD...      where each word is written as a C string
                                                 literal ("grpo") outside tests/ and docs/

A function is a definition that starts at column 0 and ends at the first '}' at column 0 after
it (the house style: STYLE.md); its length counts the lines from its signature to that brace.
Run from anywhere; it reads the checkout it lives in.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {"build", "tests", "docs", "bench", "cookbook", "fuzz", "scripts", ".git", ".gpu"}
DEF = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\([^;]*$")


def sources(exts=(".c", ".h", ".cu", ".cuh")):
    for d, subs, files in os.walk(ROOT):
        rel = os.path.relpath(d, ROOT)
        top = rel.split(os.sep)[0]
        if top in SKIP:
            subs[:] = []
            continue
        subs.sort()
        for f in sorted(files):
            if f.endswith(exts):
                yield os.path.join(rel, f)


def folders():
    rows = {}
    for p in sources():
        n = sum(1 for _ in open(os.path.join(ROOT, p), errors="replace"))
        d = os.path.dirname(p) or "."
        files, lines = rows.get(d, (0, 0))
        rows[d] = (files + 1, lines + n)
    print(f"{'folder':<24} {'files':>5} {'lines':>7}")
    for d in sorted(rows):
        print(f"{d:<24} {rows[d][0]:>5} {rows[d][1]:>7}")
    print(f"{'all':<24} {sum(v[0] for v in rows.values()):>5} "
          f"{sum(v[1] for v in rows.values()):>7}")


def functions():
    for p in sources((".c", ".cu")):
        lines = open(os.path.join(ROOT, p), errors="replace").read().split("\n")
        i = 0
        while i < len(lines):
            m = DEF.match(lines[i])
            if m and not lines[i].startswith(("typedef", "struct", "enum", "#")):
                j = i
                while j < len(lines) and not lines[j].rstrip().endswith("{"):
                    if lines[j].rstrip().endswith(";"):
                        break
                    j += 1
                if j < len(lines) and lines[j].rstrip().endswith("{"):
                    k = j + 1
                    while k < len(lines) and lines[k] != "}":
                        k += 1
                    yield (k - i + 1, p, i + 1, m.group(1))
                    i = k + 1
                    continue
            i += 1


def longest(n):
    rows = sorted(functions(), reverse=True)[:n]
    print(f"{'lines':>5}  function (file:line)")
    for length, p, line, name in rows:
        print(f"{length:>5}  {name} ({p}:{line})")


def names(words):
    for w in words:
        lit = '"' + w + '"'
        hits = []
        for p in sources((".c", ".h")):
            for no, line in enumerate(open(os.path.join(ROOT, p), errors="replace"), 1):
                if lit in line:
                    hits.append(f"{p}:{no}")
        print(f"{lit}: {len(hits)} place{'s' if len(hits) != 1 else ''}")
        for h in hits:
            print(f"    {h}")


def main(argv):
    if len(argv) >= 2 and argv[1] == "folders":
        folders()
    elif len(argv) >= 2 and argv[1] == "longest":
        longest(int(argv[2]) if len(argv) > 2 else 15)
    elif len(argv) >= 3 and argv[1] == "names":
        names(argv[2:])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""Golden values of the calc environment's tool (docs/envs.md): expressions and what Python makes
of them under the pinned rules, written to tests/fixtures/env/calc.jsonl as
{"expr": ..., "value": "<decimal>" | null} (null: "error: bad call"). The values come from
Python's own parser (ast) and integers, never from rlctl's C code. Run from the repository root:
    /usr/bin/python3 tests/reference/make_calc_goldens.py
"""
import ast
import json
import math
import random
import sys

MAX_LEN, MAX_DEPTH, MAX_DIGITS = 1000, 200, 4300
ALLOWED = set("0123456789 +-*()")
sys.setrecursionlimit(20000)
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)  # the limit below is the rule's, applied to every value


class Bad(Exception):
    pass


def digits(v):
    return len(str(abs(v)))


def check(v):
    if digits(v) > MAX_DIGITS:
        raise Bad()
    return v


def ev(n):
    if isinstance(n, ast.Expression):
        return ev(n.body)
    if isinstance(n, ast.Constant) and type(n.value) is int:
        return check(n.value)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.UAdd, ast.USub)):
        v = ev(n.operand)
        return -v if isinstance(n.op, ast.USub) else v
    if isinstance(n, ast.BinOp):
        a, b = ev(n.left), ev(n.right)
        if isinstance(n.op, ast.Add):
            return check(a + b)
        if isinstance(n.op, ast.Sub):
            return check(a - b)
        if isinstance(n.op, ast.Mult):
            return check(a * b)
        if isinstance(n.op, ast.Pow):
            if b < 0:
                raise Bad()  # a float, or ZeroDivisionError, in Python
            if abs(a) >= 2 and (b > 10**6 or b * math.log10(abs(a)) > MAX_DIGITS + 2):
                raise Bad()  # refused before computing, as the rule says
            return check(a ** b)
    raise Bad()  # a call, a tuple, anything that is not an integer expression


def calc(expr):
    e = expr.strip(" ")
    if not e or len(e) > MAX_LEN or any(c not in ALLOWED for c in e):
        return None
    try:
        tree = ast.parse(e, mode="eval")
        return str(ev(tree))
    except (Bad, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def rand_expr(rng, depth=0):
    r = rng.random()
    if depth > 4 or r < 0.3:
        k = rng.choice([1, 1, 1, 2, 3, 5, 12, 30])
        lit = str(rng.randrange(10 ** k))
        if rng.random() < 0.05:
            lit = "0" + lit  # a leading zero
        return lit
    if r < 0.4:
        return rng.choice(["-", "+", "--", "- "]) + rand_expr(rng, depth + 1)
    if r < 0.5:
        return "(" + rand_expr(rng, depth + 1) + ")"
    op = rng.choice(["+", "-", "*", "*", "**", " + ", " * ", "** "])
    left = rand_expr(rng, depth + 1)
    right = rand_expr(rng, depth + 1)
    if op.strip() == "**" and rng.random() < 0.7:
        right = str(rng.randrange(0, 40))
    return left + op + right


def mutate(rng, s):
    s = list(s)
    for _ in range(rng.randrange(1, 3)):
        c = rng.choice("0123456789 +-*()")
        i = rng.randrange(len(s) + 1)
        if rng.random() < 0.5 and s:
            del s[min(i, len(s) - 1)]
        else:
            s.insert(i, c)
    return "".join(s)


def main():
    rng = random.Random(20261128)
    cases = [
        "1+2", " 1+2 ", "00", "01", "007", "0", "-0", "2**-1", "-2**2", "2*-3", "--3", "2** 3",
        "2* *3", "2***3", "()", "(1)(2)", "1 2", "0**0", "2**3**2", "(-2)**3", "+(3)", "", " ",
        "1+", "(1", "1)", "2**10000", "10**4299", "10**4300", "-10**4299", "9**9**9",
        "1**123456789012345678901234567890", "(-1)**99999999999999999999999", "0**-1",
        "1**-1", "2**-0", "(" * 200 + "7" + ")" * 200, "(" * 201 + "7" + ")" * 201,
        "-" * 998 + "1", "1" * 1000, "1" * 1001, "12a", "1/2", "1 % 2", "99999999999*99999999999",
        "999999999*999999999+1", "1000000000-1", "-1000000000+1", "123456789012345678-123456789012345679",
        "3 *(2+ 5) ** 2", "(((((((1)))))))*(2)", "2**0**0", "(2**2)**-0",
    ]
    for _ in range(1500):
        e = rand_expr(rng)
        cases.append(mutate(rng, e) if rng.random() < 0.3 else e)
    seen = set()
    with open("tests/fixtures/env/calc.jsonl", "w") as f:
        f.write(json.dumps({"python": sys.version.split()[0], "made_by": "tests/reference/make_calc_goldens.py"}) + "\n")
        n = 0
        for e in cases:
            if e in seen or len(e) > 1100:
                continue
            seen.add(e)
            f.write(json.dumps({"expr": e, "value": calc(e)}) + "\n")
            n += 1
    print("wrote", n, "cases")


if __name__ == "__main__":
    main()

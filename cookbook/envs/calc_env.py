#!/usr/bin/env python3
"""The cookbook's calc environment as a program (env: {command: [python3, envs/calc_env.py]}):
the same environment as rlctl's built-in one (env: {builtin: calc}), pinned in docs/envs.md.
It reads one JSON request per line on stdin and writes one JSON reply per line on stdout."""
import ast
import json
import math
import sys

TOOLS = [{"type": "function", "function": {
    "name": "calc", "description": "Evaluate an integer arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expr": {
        "type": "string", "description": "digits, + - * and parentheses"}},
        "required": ["expr"]}}}]
MAX_LEN, MAX_DIGITS, ALLOWED = 1000, 4300, set("0123456789 +-*()")
sys.setrecursionlimit(20000)
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)


class Bad(Exception):
    pass


def check(v):
    if len(str(abs(v))) > MAX_DIGITS:
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
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow)):
        a, b = ev(n.left), ev(n.right)
        if isinstance(n.op, ast.Pow):
            if b < 0 or (abs(a) >= 2 and (b > 10**6 or b * math.log10(abs(a)) > MAX_DIGITS + 2)):
                raise Bad()
            return check(a ** b)
        return check(a + b if isinstance(n.op, ast.Add) else a - b if isinstance(n.op, ast.Sub)
                     else a * b)
    raise Bad()


def calc(call):
    try:
        fn = call["function"]
        args = json.loads(fn["arguments"])
        e = args["expr"].strip(" ") if fn["name"] == "calc" and isinstance(args, dict) else None
        if not isinstance(e, str) or not e or len(e) > MAX_LEN or set(e) - ALLOWED:
            raise Bad()
        return str(ev(ast.parse(e, mode="eval")))
    except (Bad, SyntaxError, ValueError, RecursionError, MemoryError, KeyError, TypeError,
            AttributeError):
        return "error: bad call"


def answer(req):
    op, items = req.get("op"), req.get("items")
    if op == "close":
        return {}
    if op == "reset":
        out = []
        for it in items:
            prompt = it.get("row", {}).get("prompt")
            if not isinstance(prompt, str):
                return {"error": "calc: the row has no string 'prompt'"}
            out.append({"messages": [{"role": "user", "content": prompt}], "tools": TOOLS})
        return {"items": out}
    if op == "step":
        out = []
        for it in items:
            calls = it["message"].get("tool_calls") or []
            msgs = [{"role": "tool", "tool_call_id": c["id"] if isinstance(c.get("id"), str) else "",
                     "content": calc(c)}
                    for c in calls]
            out.append({"messages": msgs, "reward": 0, "done": not calls})
        return {"items": out}
    return {"error": "calc: not a request (op reset, step or close, and items)"}


for line in sys.stdin:
    print(json.dumps(answer(json.loads(line)), separators=(",", ":"), ensure_ascii=False),
          flush=True)

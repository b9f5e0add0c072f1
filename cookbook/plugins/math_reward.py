#!/usr/bin/env python3
"""math_reward.py: the built-in `math_answer` reward as a `command:` reward, in Python.

A reward in any language is a program that reads one JSON request line per batch on stdin and
writes one JSON reply line on stdout (docs/rewards.md, "Rewards in any language"):

    {"items": [{"prompt": ..., "completion": ..., "completion_ids": [...], "row": {...}}, ...]}
    -> {"scores": [1.0, 0.0, null, ...]}      (null: unscorable)  or  {"error": "why"}

This one scores as rewards/rl_reward_math.c does, rule for rule, so that a run with it and a run
with `builtin: math_answer` write the same metrics (the test suite compares them byte for byte):
1.0 when the completion's final number equals the row's reference answer, 0.0 when not, null
when the row has no usable reference. Only ASCII characters take part in a number ('0'-'9',
never Unicode digits), as in C, where the text is UTF-8 bytes.

    rewards:
      - name: correct
        command: [python3, plugins/math_reward.py]   # beside a recipe in cookbook/
        # command: [python3, plugins/math_reward.py, --field, gold]   another answer field

Standard library only. Diagnostics go to stderr, which rlctl keeps in the reward worker's log.
"""
import json
import math
import sys

DIGITS = "0123456789"


def _scan(t, i):
    """End of the number starting at t[i] (a sign or a digit), or i when none starts there.
    Commas count only between digits ("1,234"); a '.' only when a digit follows ("42." is 42)."""
    n, j = len(t), i
    if j < n and t[j] in "-+":
        j += 1
    if j >= n or t[j] not in DIGITS:
        return i
    while j < n:
        if t[j] in DIGITS:
            j += 1
        elif t[j] == "," and j + 1 < n and t[j + 1] in DIGITS and t[j - 1] in DIGITS:
            j += 1
        else:
            break
    if j + 1 < n and t[j] == "." and t[j + 1] in DIGITS:
        j += 1
        while j < n and t[j] in DIGITS:
            j += 1
    return j


def _norm(t, i, j):
    """t[i:j] normalised: commas, '+', leading zeros and trailing decimal zeros dropped; None
    when longer than 60 characters."""
    neg = False
    if i < j and t[i] in "-+":
        neg = t[i] == "-"
        i += 1
    buf = t[i:j].replace(",", "")
    if len(buf) > 60:
        return None
    dot = buf.find(".")
    if dot >= 0:
        end = len(buf)
        while end > dot + 1 and buf[end - 1] == "0":
            end -= 1
        buf = buf[:dot] if end == dot + 1 else buf[:end]
    while len(buf) > 1 and buf[0] == "0" and buf[1] in DIGITS:
        buf = buf[1:]
    zero = all(ch in "0." for ch in buf)
    return ("-" if neg and not zero else "") + buf


def extract(text):
    """(value, formatted) of the completion's final answer: the number after the last "####"
    (spaces and '$' may stand between), else the last number; value None when there is none."""
    n = len(text)
    for i in range(n - 4, -1, -1):
        if text[i:i + 4] != "####":
            continue
        k = i + 4
        while k < n and text[k] in " $":
            k += 1
        e = _scan(text, k)
        if e > k:
            v = _norm(text, k, e)
            if v is not None:
                return v, True
    best = None
    i = 0
    while i < n:
        c = text[i]
        starts = c in DIGITS or (c in "-+" and i + 1 < n and text[i + 1] in DIGITS)
        if starts and c in "-+" and i > 0 and text[i - 1] in DIGITS:
            i += 1  # "3-4": a sign glued to a digit is an operator
            continue
        e = _scan(text, i) if starts else i
        if e > i:
            best = (i, e)
            i = e
        else:
            i += 1
    if best is not None:
        v = _norm(text, best[0], best[1])
        if v is not None:
            return v, False
    return None, False


def normalize(answer):
    """A reference answer normalised as a number, or None when it is not one. Like C, the text
    ends at a NUL character."""
    answer = answer.split("\0", 1)[0]
    i, n = 0, len(answer)
    while i < n and answer[i] in " $":
        i += 1
    while n > i and answer[n - 1] == " ":
        n -= 1
    e = _scan(answer[:n], i)
    if e == i or e != n:
        return None
    return _norm(answer, i, e)


def reference(v):
    """The normalised reference of a row's field: a number, a numeric string, or a GSM8K
    solution whose answer follows its last "####"; None otherwise (unscorable)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return normalize("%d" % v)
    if isinstance(v, float):
        if not math.isfinite(v) or abs(v) >= 1e15:
            return None
        return normalize("%.10f" % v)
    if not isinstance(v, str):
        return None
    r = normalize(v)
    if r is not None:
        return r
    value, formatted = extract(v)
    return value if formatted else None


def correct(completion, ref):
    """1 when the completion's answer equals ref: equal strings, or, with a decimal part on
    either side, equal values within 1e-9 relative."""
    value, _ = extract(completion)
    ref = normalize(ref)
    if value is None or ref is None:
        return 0
    if value == ref:
        return 1
    if "." not in value and "." not in ref:
        return 0
    x, y = float(value), float(ref)
    return int(abs(x - y) <= 1e-9 * max(1.0, abs(y)))


warned = False


def score(item, field="answer"):
    """An item's score: 1.0, 0.0, or None (unscorable: the row holds no usable reference)."""
    global warned
    v = item["row"].get(field)
    ref = reference(v) if v is not None else None
    if ref is None:
        if not warned:
            print("math_reward: a row has %s field '%s'; such rows score null (logged once)"
                  % ("no numeric answer in" if v is not None else "no", field), file=sys.stderr)
            warned = True
        return None
    return float(correct(item["completion"], ref))


def main():
    field = sys.argv[sys.argv.index("--field") + 1] if "--field" in sys.argv else "answer"
    for line in sys.stdin:                     # one request line per batch
        try:
            request = json.loads(line)
            reply = {"scores": [score(item, field) for item in request["items"]]}
        except Exception as e:                 # the batch fails with this message
            reply = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()                     # one reply line per request, at once


if __name__ == "__main__":
    main()

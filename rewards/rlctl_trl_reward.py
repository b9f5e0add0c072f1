#!/usr/bin/env python3
"""rlctl's runner for TRL-style reward functions (a recipe's `python:` reward entry).

rlctl starts it as a command reward: `python3 rlctl_trl_reward.py FILE FUNCTION`. It imports
FILE once, then answers each request line (docs/rewards.md, "Rewards in any language") by calling
FUNCTION with TRL's signature: f(prompts, completions, completion_ids, **columns) -> list of
float or None. Standard library only.
"""
import asyncio
import importlib.util
import inspect
import json
import math
import os
import sys
import traceback


def load(path, name):
    spec = importlib.util.spec_from_file_location(
        "rlctl_user_rewards_" + os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))   # the file's own imports, as `python file` finds them
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise LookupError("%s has no function '%s'" % (os.path.basename(path), name))
    return fn


def conversational(row):
    p = row.get("prompt")
    return isinstance(p, list) and all(isinstance(m, dict) and "role" in m for m in p)


def call(fn, name, items):
    rows = [it.get("row") or {} for it in items]
    conv = bool(rows) and conversational(rows[0])
    episodes = [r.pop("rlctl_episode", None) for r in rows]
    if any(e is not None for e in episodes):
        # multi-turn episodes (env:): the completion is what followed the first prompt, as
        # messages (the policy's turns with their tool calls, the environment's answers)
        prompts = [r.get("prompt") if conv else it["prompt"] for r, it in zip(rows, items)]
        completions = [e["messages"] if e else [{"role": "assistant", "content": it["completion"]}]
                       for e, it in zip(episodes, items)]
    elif conv:
        prompts = [r.get("prompt") for r in rows]
        completions = [[{"role": "assistant", "content": it["completion"]}] for it in items]
    else:
        prompts = [it["prompt"] for it in items]
        completions = [it["completion"] for it in items]
    ids = [it.get("completion_ids", []) for it in items]
    columns = {}
    for r in rows:
        for k in r:
            if k != "prompt" and k not in columns:
                columns[k] = [row.get(k) for row in rows]
    columns["trainer_state"] = None           # rlctl has no TRL TrainerState (docs/rewards.md)
    out = fn(prompts=prompts, completions=completions, completion_ids=ids, **columns)
    if inspect.isawaitable(out):
        out = asyncio.run(_await(out))
    if not isinstance(out, (list, tuple)) or len(out) != len(items):
        raise ValueError("%s returned %s; a list of %d rewards (float or None) was expected"
                         % (name, _what(out), len(items)))
    scores = []
    for i, v in enumerate(out):
        if v is None:
            scores.append(None)                 # not applicable: rlctl's NaN
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("%s returned %r for completion %d; a float or None was expected"
                             % (name, v, i))
        else:
            v = float(v)
            scores.append(None if math.isnan(v) else v)
    return scores


async def _await(a):
    return await a


def _what(out):
    if isinstance(out, (list, tuple)):
        return "%d values" % len(out)
    return "a %s" % type(out).__name__


def last_line(e, path):
    """'File:line: ExceptionType: message', the traceback's last line and the deepest frame
    of the user's file."""
    where = ""
    for fr in traceback.extract_tb(e.__traceback__):
        if os.path.abspath(fr.filename) == path:
            where = "%s:%d: " % (os.path.basename(fr.filename), fr.lineno)
    if isinstance(e, SyntaxError) and e.filename and e.lineno:
        where = "%s:%d: " % (os.path.basename(e.filename), e.lineno)
    return where + traceback.format_exception_only(type(e), e)[-1].strip()


def main(argv):
    if len(argv) != 3:
        raise SystemExit("usage: rlctl_trl_reward.py FILE FUNCTION")
    path, name = os.path.abspath(argv[1]), argv[2]
    try:
        fn, failed = load(path, name), None
    except Exception as e:                     # each batch fails with why, instead of an exit
        traceback.print_exc(file=sys.stderr)   # that only says "see the log"
        fn, failed = None, "%s: %s" % (name, last_line(e, path))
    for line in sys.stdin:
        try:
            if failed:
                reply = {"error": failed}
            else:
                reply = {"scores": call(fn, name, json.loads(line)["items"])}
        except Exception as e:
            traceback.print_exc(file=sys.stderr)  # the whole traceback, in the worker's log
            reply = {"error": "%s: %s" % (name, last_line(e, path))}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""A test environment (env: {command: [python3, tests/env_test.py, MODE]}), one JSON request
line in, one reply line out; tests/env_server.py serves the same replies over HTTP. reset: the
row's prompt (a message list, or a string as the user's message); then, by MODE:
  once     step: done at once, reward 0 (an episode of one turn: plain GRPO)
  turns N  step: a user message "again" for N-1 turns with reward 0.25 each, then done
  never    step: never done (the limits end it)
  crash    exits with status 3 at the first step
  crashonce FILE  two turns for an episode whose id ends in an even number, one for an odd
           one (rewards as `turns`); the first program to get a step of some episode's second
           turn while FILE does not exist creates it and exits with status 3; an episode a
           program does not know (reset by one that exited) starts at its turn 0 there
  hang     never answers the first step
  garbage  answers the first step with a line that is not JSON
  count    answers the first step with one item too few
  error    answers the first step with {"error": "the tool broke"}
  badone   as once, but the first item of each step reply lacks "done"
"""
import json
import sys
import time

CRASH, HANG = object(), object()  # what reply() gives instead of a line


def reply(mode, n_turns, turn, q):
    """The reply line to request q (a dict), or CRASH or HANG. turn: each episode's turns so far,
    kept by the caller between requests."""
    items = q.get("items", [])
    if q["op"] == "reset":
        out = []
        for it in items:
            p = it["row"]["prompt"]
            msgs = p if isinstance(p, list) else [{"role": "user", "content": p}]
            turn[it["episode"]] = 0
            out.append({"messages": msgs})
        return json.dumps({"items": out})
    if q["op"] != "step":
        return json.dumps({})
    if mode == "crash":
        return CRASH
    if mode.startswith("crashonce:") and any(turn.get(it["episode"], 0) >= 1 for it in items):
        try:
            open(mode.split(":", 1)[1], "x").close()
            return CRASH
        except FileExistsError:
            pass
    if mode == "hang":
        return HANG
    if mode == "garbage":
        return "this is not json"
    if mode == "error":
        return json.dumps({"error": "the tool broke"})
    out = []
    for it in items:
        turn[it["episode"]] = turn.get(it["episode"], 0) + 1
        t = turn[it["episode"]]
        if mode in ("once", "badone"):
            out.append({"messages": [], "done": True})
        elif mode == "never":
            out.append({"messages": [{"role": "user", "content": "again"}], "done": False})
        else:
            last = n_turns
            if mode.startswith("crashonce:"):
                last = 2 if int(it["episode"].rsplit("-", 1)[-1]) % 2 == 0 else 1
            done = t >= last
            out.append({"messages": [] if done else [{"role": "user", "content": "again"}],
                        "reward": 0.25, "done": done})
    if mode == "count":
        out = out[:-1]
    if mode == "badone":
        del out[0]["done"]
    return json.dumps({"items": out})


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "once"
    n_turns = int(sys.argv[2]) if len(sys.argv) > 2 and mode != "crashonce" else 2
    if mode == "crashonce":
        mode = "crashonce:" + sys.argv[2]
    turn = {}
    for line in sys.stdin:
        r = reply(mode, n_turns, turn, json.loads(line))
        if r is CRASH:
            sys.exit(3)
        if r is HANG:
            time.sleep(3600)
        print(r, flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A test environment (env: {command: [python3, tests/env_test.py, MODE]}), one JSON request
line in, one reply line out. reset: the row's prompt (a message list, or a string as the user's
message); then, by MODE:
  once     step: done at once, reward 0 (an episode of one turn: plain GRPO)
  turns N  step: a user message "again" for N-1 turns with reward 0.25 each, then done
  never    step: never done (the limits end it)
  crash    exits with status 3 at the first step
  hang     never answers the first step
  garbage  answers the first step with a line that is not JSON
  count    answers the first step with one item too few
  error    answers the first step with {"error": "the tool broke"}
  badone   as once, but the first item of each step reply lacks "done"
"""
import json
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "once"
n_turns = int(sys.argv[2]) if len(sys.argv) > 2 else 2
turn = {}
for line in sys.stdin:
    q = json.loads(line)
    items = q.get("items", [])
    if q["op"] == "reset":
        out = []
        for it in items:
            p = it["row"]["prompt"]
            msgs = p if isinstance(p, list) else [{"role": "user", "content": p}]
            turn[it["episode"]] = 0
            out.append({"messages": msgs})
        reply = {"items": out}
    elif q["op"] == "step":
        if mode == "crash":
            sys.exit(3)
        if mode == "hang":
            time.sleep(3600)
        if mode == "garbage":
            print("this is not json", flush=True)
            continue
        if mode == "error":
            print(json.dumps({"error": "the tool broke"}), flush=True)
            continue
        out = []
        for it in items:
            turn[it["episode"]] += 1
            t = turn[it["episode"]]
            if mode in ("once", "badone"):
                out.append({"messages": [], "done": True})
            elif mode == "never":
                out.append({"messages": [{"role": "user", "content": "again"}], "done": False})
            else:
                done = t >= n_turns
                out.append({"messages": [] if done else [{"role": "user", "content": "again"}],
                            "reward": 0.25, "done": done})
        if mode == "count":
            out = out[:-1]
        if mode == "badone":
            del out[0]["done"]
        reply = {"items": out}
    else:
        reply = {}
    print(json.dumps(reply), flush=True)

#!/usr/bin/env python3
# tests/trl_doc_rewards.py's two rules as one `command:` reward each (JSON lines, docs/rewards.md):
#   trl_doc_rewards_cmd.py format|accuracy|length
import json
import re
import sys

rule = sys.argv[1]
for line in sys.stdin:
    items = json.loads(line)["items"]
    if rule == "format":
        scores = [1.0 if re.match(r"^<think>.*?</think><answer>.*?</answer>$", it["completion"])
                  else 0.0 for it in items]
    elif rule == "accuracy":
        scores = [1.0 if it["row"]["solution"] in it["completion"] else 0.0 for it in items]
    else:
        scores = [float(len(it["completion"])) for it in items]
    print(json.dumps({"scores": scores}), flush=True)

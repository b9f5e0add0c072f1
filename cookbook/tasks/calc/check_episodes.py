#!/usr/bin/env python3
"""Checks that the calc model's episodes are token-in-token-out exact (ctest cookbook.calc_episodes).

Runs one step of cookbook/grpo_calc.yaml (the built-in calc environment, calc-base, 16 questions
x 8 episodes) and reads the step's trajectories: every episode's tokens (the first prompt's and
the completion's, the policy's turns and the tool's answers) must be exactly the tokens of its
whole conversation rendered at once by the model's chat template (`rlctl template`, without the
newline the template writes after the last turn) and tokenized (`rlctl tokenize`): the template
is prefix-stable, so the turn-by-turn sequence the sampler saw is the conversation. At least a
quarter of the episodes must have called the tool (two turns), or the check would prove little.

usage: check_episodes.py --rlctl build/release/rlctl [--dir /tmp/calc_episodes]
"""
import argparse
import json
import os
import subprocess
import tempfile


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rlctl", required=True)
    p.add_argument("--dir", help="the run folder (default: a temporary one)")
    args = p.parse_args()
    rlctl = os.path.abspath(args.rlctl)
    model = os.path.join(root, "cookbook", "models", "calc-base")
    with tempfile.TemporaryDirectory() as tmp:
        run = args.dir or os.path.join(tmp, "run")
        subprocess.run([rlctl, "run", "grpo_calc.yaml", "train.steps=1", "optim.warmup_steps=0",
                        "train.eval_every=0", "train.save_every=0", "roles.samplers=1",
                        "roles.actor_threads=1", f"run.dir={run}", "--force"],
                       cwd=os.path.join(root, "cookbook"), check=True, capture_output=True)
        out = subprocess.run([rlctl, "traj", "export", run, "--step", "1"], check=True,
                             capture_output=True).stdout.decode()
        conv_path, text_path = os.path.join(tmp, "conv.json"), os.path.join(tmp, "text.txt")
        n = two = 0
        for line in out.splitlines():
            r = json.loads(line)
            conv = (r.get("episode") or {}).get("conversation")
            if not conv:
                raise SystemExit(f"record {n}: no episode conversation in the trajectory")
            with open(conv_path, "w", encoding="utf-8") as f:
                json.dump(conv, f)
            text = subprocess.run([rlctl, "template", "--model", model, "--messages", conv_path],
                                  check=True, capture_output=True).stdout
            if not text.endswith(b"<|im_end|>\n"):
                raise SystemExit(f"record {n}: the render does not end a turn: {text[-40:]!r}")
            with open(text_path, "wb") as f:
                f.write(text[:-1])
            ids = [int(x) for x in subprocess.run(
                [rlctl, "tokenize", "--model", model, "--file", text_path], check=True,
                capture_output=True).stdout.split()]
            seq = r["prompt_ids"] + r["completion_ids"]
            if ids != seq:
                at = next((i for i, (a, b) in enumerate(zip(ids, seq)) if a != b),
                          min(len(ids), len(seq)))
                raise SystemExit(f"record {n}: the episode's {len(seq)} tokens differ from its "
                                 f"conversation's {len(ids)} at token {at}\n"
                                 f"conversation: {json.dumps(conv)}\n"
                                 f"render: {ids}\nepisode: {seq}")
            n += 1
            two += len(r["episode"].get("turns") or []) == 2
        if n == 0 or two < n / 4:
            raise SystemExit(f"{n} episodes, {two} with two turns: too few tool calls to check")
        print(f"ok: {n} episodes ({two} called the tool) are their conversations' tokens exactly")


if __name__ == "__main__":
    main()

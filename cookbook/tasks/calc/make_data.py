#!/usr/bin/env python3
"""Writes the calc task's SFT data: cookbook/data/calc/sft.jsonl, from cookbook/data/arith/train.jsonl.

The calc task is the arith questions (same split: cookbook/data/arith, train for SFT and RL,
eval held out) with a `calc` tool, the built-in environment of docs/envs.md. A transcript is
what an episode of that environment is, in the calc model's own chat template
(cookbook/tasks/calc/make_tokenizer.py): the tools line, the question as the user's message,
then either

  - a tool call: the assistant calls calc on the question's expression, the tool answers its
    value, the assistant writes "#### N" (the share 1 - --direct of the questions); or
  - a direct answer: the assistant writes "#### N" at once, from its own arithmetic.

The direct transcripts are the base's flaw that RL can fix: the small model's mental
arithmetic is mostly wrong, the tool never is, so a reward on the final answer teaches it to
call. Which questions answer directly is drawn by random.Random(--seed).

rlctl's SFT renders `messages` rows as role/content pairs only (trainer/rl_data.c: no `tools`,
no `tool_calls`), so each policy turn is one prompt/completion row whose prompt is the
transcript so far exactly as the template writes it (ending with the assistant's header) and
whose completion is that turn's text; SFT adds the eos (<|im_end|>) after it. The loss then
covers the policy's turns only, as GRPO's mask does: the tool's answer is prompt. A tool
transcript gives two rows, a direct one one row:

  {"prompt": "<|im_start|>system\\ntools: calc<|im_end|>\\n<|im_start|>user\\n91*3+125=<|im_end|>\\n<|im_start|>assistant\\n",
   "completion": "<tool_call>{\\"name\\": \\"calc\\", \\"arguments\\": {\\"expr\\":\\"91*3+125\\"}}</tool_call>", "answer": "398"}
  {"prompt": "...</tool_call><|im_end|>\\n<|im_start|>tool\\n398<|im_end|>\\n<|im_start|>assistant\\n",
   "completion": "#### 398", "answer": "398"}

The rows of one question are consecutive, in train.jsonl's order. Standard library only; the
same seed writes the same bytes.

usage: make_data.py [--direct 0.5] [--seed 77] [--arith cookbook/data/arith] [--out cookbook/data/calc]
       make_data.py --check [--rlctl build/release/rlctl]
                    (ctest: sft.jsonl is what this script writes, every row's arithmetic and
                    call are right, the questions are arith's train questions and none of eval;
                    with --rlctl, the transcripts' text is what `rlctl template` renders with
                    cookbook/models/calc-init's template, for the first 50 questions)
"""
import argparse
import json
import os
import random
import subprocess
import tempfile

TOOLS = [{"type": "function", "function": {
    "name": "calc", "description": "Evaluate an integer arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expr": {
        "type": "string", "description": "digits, + - * and parentheses"}},
        "required": ["expr"]}}}]


def conversation(prompt, answer, direct):
    """The episode's messages as the environment and rlctl build them (docs/envs.md)."""
    msgs = [{"role": "user", "content": prompt}]
    if not direct:
        args = json.dumps({"expr": prompt.rstrip("=")}, separators=(",", ":"))
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "calc", "arguments": args}}]})
        msgs.append({"role": "tool", "tool_call_id": "call_0", "content": answer})
    msgs.append({"role": "assistant", "content": f"#### {answer}"})
    return msgs


def render(msgs, tools, add_generation_prompt):
    """The calc chat template (make_tokenizer.py's TEMPLATE), written out in Python."""
    out = []
    if tools:
        out.append("<|im_start|>system\ntools:"
                   + "".join(" " + t["function"]["name"] for t in tools) + "<|im_end|>\n")
    for m in msgs:
        out.append(f"<|im_start|>{m['role']}\n{m.get('content') or ''}")
        for c in m.get("tool_calls") or []:
            f = c["function"]
            out.append(f'<tool_call>{{"name": "{f["name"]}", "arguments": {f["arguments"]}}}'
                       "</tool_call>")
        out.append("<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


def sft_rows(msgs, answer):
    """One prompt/completion row per assistant turn: the text before it (with the header), the
    turn's text (without its <|im_end|>, which SFT appends as the eos)."""
    rows = []
    for k, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        head = render(msgs[:k], TOOLS, True)
        whole = render(msgs[:k + 1], TOOLS, False)
        assert whole.startswith(head) and whole.endswith("<|im_end|>\n")
        rows.append({"prompt": head, "completion": whole[len(head):-len("<|im_end|>\n")],
                     "answer": answer})
    return rows


def read_rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def build(args):
    train = read_rows(os.path.join(args.arith, "train.jsonl"))
    rng = random.Random(args.seed)
    direct = set(rng.sample(range(len(train)), round(args.direct * len(train))))
    convs = [(r["prompt"], r["answer"], conversation(r["prompt"], r["answer"], i in direct))
             for i, r in enumerate(train)]
    rows = [x for p, a, msgs in convs for x in sft_rows(msgs, a)]
    text = "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in rows)
    return text, convs, direct


def check_rlctl(rlctl, model, convs):
    """The Python rendering is what rlctl renders with the model's own template."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "conv.json")
        for prompt, _, msgs in convs:
            for gen in (False, True):
                with open(path, "w", encoding="utf-8") as f:
                    json.dump({"messages": msgs if not gen else msgs[:1], "tools": TOOLS}, f)
                cmd = [rlctl, "template", "--model", model, "--messages", path]
                got = subprocess.run(cmd + (["--add-generation-prompt"] if gen else []),
                                     check=True, capture_output=True).stdout.decode()
                want = render(msgs if not gen else msgs[:1], TOOLS, gen)
                if got != want:
                    raise SystemExit(f"{prompt}: rlctl template renders {got!r}, "
                                     f"make_data.py writes {want!r}")


def check(args, text, convs, direct):
    path = os.path.join(args.out, "sft.jsonl")
    with open(path, encoding="utf-8", newline="") as f:
        if f.read() != text:
            raise SystemExit(f"{path} differs from what make_data.py writes (direct {args.direct},"
                             f" seed {args.seed})")
    evalq = {r["prompt"] for r in read_rows(os.path.join(args.arith, "eval.jsonl"))}
    n_call = 0
    for n, r in enumerate(read_rows(path), 1):
        user = r["prompt"].split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
        a, rest = user.rstrip("=").split("*")
        b, c = rest.split("+")
        total = str(int(a) * int(b) + int(c))
        if user in evalq:
            raise SystemExit(f"{path}:{n}: question {user} is an eval question")
        call = ('<tool_call>{"name": "calc", "arguments": {"expr":"'
                + user.rstrip("=") + '"}}</tool_call>')
        if r["answer"] != total or r["completion"] not in (call, f"#### {total}"):
            raise SystemExit(f"{path}:{n}: {r} is not a right turn for {user} (= {total})")
        if "<|im_start|>tool\n" in r["prompt"] and not r["prompt"].endswith(
                f"{call}<|im_end|>\n<|im_start|>tool\n{total}<|im_end|>\n<|im_start|>assistant\n"):
            raise SystemExit(f"{path}:{n}: the tool's answer is not {total}")
        n_call += r["completion"] == call
    if args.rlctl:
        model = os.path.normpath(os.path.join(args.out, "..", "..", "models", "calc-init"))
        check_rlctl(args.rlctl, model, [convs[i] for i in range(50)])
    print(f"ok: {path} matches seed {args.seed}; {len(convs)} questions, {n_call} call the tool, "
          f"{len(direct)} answer directly; every turn right"
          + ("; rlctl template renders the same text" if args.rlctl else ""))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    data = os.path.normpath(os.path.join(here, "..", "..", "data"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--direct", type=float, default=0.5,
                   help="the share of questions answered without the tool")
    p.add_argument("--seed", type=int, default=77, help="picks those questions")
    p.add_argument("--arith", default=os.path.join(data, "arith"))
    p.add_argument("--out", default=os.path.join(data, "calc"))
    p.add_argument("--check", action="store_true", help="verify the file instead of writing")
    p.add_argument("--rlctl", help="with --check: compare the text with `rlctl template`")
    args = p.parse_args()
    if not 0.0 <= args.direct <= 1.0:
        p.error(f"--direct {args.direct} is not a fraction in [0, 1]")
    text, convs, direct = build(args)
    if args.check:
        check(args, text, convs, direct)
        return
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sft.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {args.out}/sft.jsonl: {text.count(chr(10))} rows from {len(convs)} questions "
          f"({len(direct)} answered directly)")


if __name__ == "__main__":
    main()

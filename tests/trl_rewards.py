"""Reward functions with TRL's signature, for tests/test_reward_python.c (`python:` rewards).

`correct` is cookbook/plugins/math_reward.py's rule (the one the `command:` run uses) behind
TRL's call; the others exercise the runner: conversational rows, columns, None, async, errors.
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cookbook", "plugins"))
import math_reward  # noqa: E402


def correct(prompts, completions, completion_ids, answer, **kwargs):
    out = []
    for c, a in zip(completions, answer):
        ref = math_reward.reference(a) if a is not None else None
        out.append(None if ref is None else float(math_reward.correct(c, ref)))
    return out


def accuracy_reward(completions, solution, **kwargs):
    """TRL's documented shape: plain completions against a `solution` column."""
    return [1.0 if c.strip() == s else 0.0 for c, s in zip(completions, solution)]


def format_reward(completions, **kwargs):
    """Conversational: each completion is [{"role": "assistant", "content": ...}]."""
    return [1.0 if c[0]["content"].startswith("<think>") else 0.0 for c in completions]


def seen(prompts, completions, completion_ids, trainer_state, **kwargs):
    """1 + the number of completion ids when the prompt is a message list, else its length;
    -1 when trainer_state is not None."""
    if trainer_state is not None:
        return [-1.0 for _ in prompts]
    return [float(len(ids) + 1) if isinstance(p, list) else float(len(p))
            for p, ids in zip(prompts, completion_ids)]


def maybe(completions, **kwargs):
    return [None if len(c) > 3 else 0.5 for c in completions]


async def slow(completions, **kwargs):
    await asyncio.sleep(0)
    return [2.0 for _ in completions]


def divide(completions, **kwargs):
    return [1 / 0 for _ in completions]


_calls = 0


def divide_later(completions, **kwargs):
    # fine on its first call in a process (the check before the run), raising on the second
    global _calls
    _calls += 1
    return [1.0 / (2 - _calls) for _ in completions]


def text(completions, **kwargs):
    return "1.0"


def short(completions, **kwargs):
    return [1.0]


def assistant_turns(prompts, completions, **kwargs):
    # multi-turn episodes (env:): each completion is the messages after the first prompt
    assert "rlctl_episode" not in kwargs, "the episode is the completion, not a column"
    return [float(sum(1 for m in c if m["role"] == "assistant")) for c in completions]

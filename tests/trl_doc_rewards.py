# Reward functions in the shape TRL's documentation gives them (GRPOTrainer's reward_funcs):
# conversational completions (a list holding the assistant's message) and a `solution` column
# of the dataset as a keyword list. rewards.python trains the cookbook recipe with them as
# `python:` rewards and with tests/trl_doc_rewards_cmd.py, the same rules as a `command:`.
import re


def format_reward(completions, **kwargs):
    """1.0 when the answer is written as <think>...</think><answer>...</answer>."""
    pattern = r"^<think>.*?</think><answer>.*?</answer>$"
    contents = [completion[0]["content"] for completion in completions]
    return [1.0 if re.match(pattern, content) else 0.0 for content in contents]


def accuracy_reward(completions, solution, **kwargs):
    """1.0 when the completion holds the row's solution."""
    contents = [completion[0]["content"] for completion in completions]
    return [1.0 if s in c else 0.0 for c, s in zip(contents, solution)]


def length_reward(completions, **kwargs):
    """Longer completions score more (characters of the assistant's message)."""
    return [float(len(completion[0]["content"])) for completion in completions]

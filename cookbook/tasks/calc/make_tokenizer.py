#!/usr/bin/env python3
"""Writes the calc task's tokenizer and chat template: cookbook/models/calc-init/{tokenizer,tokenizer_config}.json.

As cookbook/tasks/arith/make_tokenizer.py, a byte-level BPE tokenizer in Hugging Face's
tokenizer.json format with no merges, so every character is its own token: here the 95
printable ASCII characters and newline (ids 0-95 in byte order, written through GPT-2's
byte-to-unicode table), so that any text the environment answers (`error: bad call`) has tokens.
Then the added tokens: three special ones, <|endoftext|> (the pad), <|im_start|> and <|im_end|>
(the eos: the end of every turn, what the model stops on), and four plain ones that keep a tool
call short, exactly the pieces the chat template writes around a `calc` call:
`<tool_call>`, `{"name": "calc", "arguments": `, `{"expr":"` (the start of the compact JSON
arguments rlctl re-encodes) and `"}}`, then `</tool_call>`. A call is then 5 tokens plus its
expression. Plain (not special) added tokens survive decoding, so the tool-call parser sees them.

The chat template (tokenizer_config.json chat_template) is ChatML-like and compact: a system
line naming the tools (`tools: calc`), not their JSON schemas; an assistant message's
tool_calls in hermes form; `tool` messages as a turn of their own. Standard library only; the
output is deterministic.

usage: make_tokenizer.py [--out cookbook/models/calc-init]
"""
import argparse
import json
import os

CHARS = "".join(chr(c) for c in range(32, 127)) + "\n"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PLAIN = ["<tool_call>", '{"name": "calc", "arguments": ', '{"expr":"', '"}}', "</tool_call>"]

# The model's own chat template. Tools: one system line with their names. A tool call:
# <tool_call>{"name": NAME, "arguments": ARGUMENTS}</tool_call>, ARGUMENTS the JSON text as given.
TEMPLATE = (
    "{%- if tools %}<|im_start|>system\ntools:{% for t in tools %} {{ t.function.name }}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content %}{{ m.content }}{% endif %}"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{\"name\": \""
    "{{ c.function.name }}\", \"arguments\": {{ c.function.arguments }}}</tool_call>"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def bytes_to_unicode():
    """GPT-2's table: printable latin-1 bytes map to themselves, the other 68 to U+0100 + n."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
            + list(range(ord("®"), ord("ÿ") + 1)))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def tokenizer_json():
    b2u = bytes_to_unicode()
    chars = sorted(CHARS, key=ord)
    assert len(set(chars)) == 96
    vocab = {b2u[ord(c)]: i for i, c in enumerate(chars)}
    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": i < len(SPECIAL)}
             for i, s in enumerate(SPECIAL + PLAIN)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def tokenizer_config_json(tok):
    decoder = {str(t["id"]): {k: t[k] for k in
                              ("content", "lstrip", "normalized", "rstrip", "single_word",
                               "special")}
               for t in tok["added_tokens"]}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 256,
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def write(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.normpath(os.path.join(here, "..", "..", "models", "calc-init"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=default_out)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = tokenizer_json()
    write(os.path.join(args.out, "tokenizer.json"), tok)
    write(os.path.join(args.out, "tokenizer_config.json"), tokenizer_config_json(tok))
    n = len(tok["model"]["vocab"]) + len(tok["added_tokens"])
    print(f"wrote {args.out}/tokenizer.json ({n} tokens) and tokenizer_config.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the arith task tokenizer (shared by arith-init and arith-base): cookbook/models/arith-init/{tokenizer,tokenizer_config}.json.

A byte-level BPE tokenizer in Hugging Face's tokenizer.json format with no merges, so every
character is its own token: the 21 characters of the arith task (digits, `* + - = ; # , . ?`,
space and newline), each written through GPT-2's byte-to-unicode table as byte-level
vocabularies are (space is "Ġ", newline "Ċ"), with ids in byte order, followed by three special
added tokens: <|endoftext|> (21, the eos), <|im_start|> (22) and <|im_end|> (23). The
pre-tokenizer is ByteLevel without its regex: with no merges, splitting could not change the
ids. Characters outside the 21 have no token (BPE without unk_token drops them, as HF does).
Standard library only; the output is deterministic.

usage: make_tokenizer.py [--out cookbook/models/arith-init]
"""
import argparse
import json
import os

CHARS = "0123456789*+-=;#,.? \n"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


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
    assert len(set(chars)) == 21
    vocab = {b2u[ord(c)]: i for i, c in enumerate(chars)}
    added = [{"id": len(vocab) + i, "content": s, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for i, s in enumerate(SPECIAL)]
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
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": 128,
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
    default_out = os.path.normpath(os.path.join(here, "..", "..", "models", "arith-init"))
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

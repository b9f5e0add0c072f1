#!/bin/sh
# Rebuilds cookbook/models/arith-init, the random starting point of cookbook/sft_arith.yaml, from
# scratch: the tokenizer (make_tokenizer.py) and random
# weights from config.json with `rlctl init --seed 0` (fp32). Run from the repository root after
# building rlctl; RLCTL names the binary (default build/dev/rlctl).
set -eu
RLCTL=${RLCTL:-build/dev/rlctl}
OUT=cookbook/models/arith-init
/usr/bin/python3 cookbook/tasks/arith/make_tokenizer.py --out "$OUT"
# --force: the folder already holds the config and tokenizer that init reads (it reads both
# before writing anything, then writes them back normalised/copied)
"$RLCTL" init --config "$OUT/config.json" --tokenizer "$OUT/tokenizer.json" --out "$OUT" \
    --seed 0 --dtype fp32 --force

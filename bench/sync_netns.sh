#!/usr/bin/env bash
# Weight sync across two network namespaces: bench_sync's server ends (`--serve`) in a namespace
# of their own behind a veth pair (10.231.78.2), the client ends (`--connect`) in this one
# (10.231.78.1), so that every byte crosses a (virtual) network link between two processes:
# the weight-sync message over CURVE beside raw ZeroMQ tcp, plain and with CURVE, same bytes,
# same run. Needs root (ip netns). bench/RESULTS.md quotes it.
#
#   bash bench/sync_netns.sh [BUILD_DIR (default build/release)] [RUNS (default 5)]
set -euo pipefail
cd "$(dirname "$0")/.."
bdir=${1:-build/release}
runs=${2:-5}
bin="$bdir/bench/bench_sync"
[ -x "$bin" ] && [ -x "$bdir/rlctl" ] || { echo "sync_netns: build $bdir first" >&2; exit 1; }
ns=rlbench$$
tmp=$(mktemp -d /tmp/rl_sync_netns.XXXXXX)
srv=
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns"
ip link add rbh$$ type veth peer name rbs$$
ip link set rbs$$ netns "$ns"
ip addr add 10.231.78.1/24 dev rbh$$
ip link set rbh$$ up
ip netns exec "$ns" ip addr add 10.231.78.2/24 dev rbs$$
ip netns exec "$ns" ip link set rbs$$ up
ip netns exec "$ns" ip link set lo up
"$bdir/rlctl" keygen --out "$tmp/srv" >/dev/null
"$bdir/rlctl" keygen --out "$tmp/cli" >/dev/null
ip netns exec "$ns" "$bin" --serve 10.231.78.2 --keys "$tmp" >"$tmp/serve.out" 2>&1 &
srv=$!
for _ in $(seq 1 50); do grep -q serving "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
"$bin" --connect 10.231.78.2 --keys "$tmp" "$runs"

#!/usr/bin/env bash
# GET throughput of the gateway for 4 KB and 64 KB values on loopback (not a test: prints numbers).
# Starts its own redis-server and a release gateway on free ports, loads them with the bounded
# closed-loop generator in examples/load.rs, and stops both by PID on exit.
# Env: REDIS_SERVER_BIN (default redis-server), BENCH_SECONDS (default 5), BENCH_CONNECTIONS (default 16).
set -euo pipefail
cd "$(dirname "$0")"

REDIS_SERVER_BIN=${REDIS_SERVER_BIN:-redis-server}
SECONDS_PER_RUN=${BENCH_SECONDS:-5}
CONNECTIONS=${BENCH_CONNECTIONS:-16}
TOKEN="bench-token-$$"

command -v "$REDIS_SERVER_BIN" >/dev/null || { echo "redis-server not found: apt-get install -y redis-server or set REDIS_SERVER_BIN" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 1; }

# The workspace's `native` profile (optimised, no LTO), as npm run dev/bench build the gateway.
cargo build --profile native --quiet --bin upstash-gateway --example load
BIN_DIR="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/native"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

REDIS_PORT=$(free_port)
"$REDIS_SERVER_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
PIDS+=($!)
GW_PORT=$(free_port)
UPSTASH_REDIS_REST_TOKEN=$TOKEN RUST_LOG=warn "$BIN_DIR/upstash-gateway" \
  --listen "127.0.0.1:$GW_PORT" --redis-url "redis://127.0.0.1:$REDIS_PORT" &
PIDS+=($!)
URL="http://127.0.0.1:$GW_PORT"

ready=""
for _ in $(seq 1 200); do
  if curl -sf -H "Authorization: Bearer $TOKEN" "$URL/ping" >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.05
done
[ -n "$ready" ] || { echo "gateway did not become ready" >&2; exit 1; }

echo "upstash-gateway GET throughput, loopback, $(nproc) cores, $CONNECTIONS connections, ${SECONDS_PER_RUN}s per run"
for size in 4096 65536; do
  key="bench:$size"
  head -c "$size" /dev/zero | tr '\0' 'x' | curl -sf -X POST -H "Authorization: Bearer $TOKEN" \
    --data-binary @- "$URL/set/$key" >/dev/null
  printf '%6s B values: ' "$size"
  "$BIN_DIR/examples/load" "$URL" "$TOKEN" "$key" "$CONNECTIONS" "$SECONDS_PER_RUN"
done
if command -v redis-benchmark >/dev/null; then
  echo "for reference, redis-benchmark GET straight to redis-server (no HTTP, 4 KB values, same connection count):"
  redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -t set,get -d 4096 -c "$CONNECTIONS" -n 100000 -q | tr '\r' '\n' | grep -E 'GET: ' | tail -1
fi

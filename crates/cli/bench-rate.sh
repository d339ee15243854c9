#!/usr/bin/env bash
# Rate benchmark of kvbench itself (not a test): on loopback, against a minimal static target,
# prints achieved vs requested rate at 10, 400 and 2,000 req/s, the pacer's scheduling lag, and
# the highest rate kvbench sustains next to oha's (when oha is on PATH). Every run is bounded in
# time; only 127.0.0.1 is contacted. Takes about a minute.
set -euo pipefail
cd "$(dirname "$0")"

# The workspace's `native` profile (optimised, no LTO), as npm run bench builds kvbench.
cargo build --profile native --quiet --bin kvbench --example static_target
BIN_DIR="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/native"
KVBENCH=$BIN_DIR/kvbench
WORK=$(mktemp -d)
TARGET_PID=
cleanup() { [ -n "$TARGET_PID" ] && kill "$TARGET_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

"$BIN_DIR/examples/static_target" 127.0.0.1:0 >"$WORK/target.log" &
TARGET_PID=$!
for _ in $(seq 50); do grep -q listening "$WORK/target.log" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^listening on //p' "$WORK/target.log")
[ -n "$URL" ] || { echo "static target did not start"; exit 1; }

echo "kvbench rate benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, target $URL"
echo "$(uname -sr); $(rustc --version)"

# run RATE DURATION -> prints the report; sets ACHIEVED, FAILED, NOT_SENT, LAG
run() {
  local out="$WORK/r$1"
  "$KVBENCH" run --url "$URL" --rate "$1" --duration "$2" --interval 60s --max-in-flight 256 \
    --timeout 2s --out "$out" >"$out.txt"
  ACHIEVED=$(sed -n 's/^achieved rate \([0-9.]*\) req\/s.*/\1/p' "$out.txt")
  FAILED=$(sed -n 's/.* failed \([0-9]*\) (not sent \([0-9]*\)).*/\1/p' "$out.txt")
  NOT_SENT=$(sed -n 's/.* (not sent \([0-9]*\)).*/\1/p' "$out.txt")
  LAG=$(sed -n 's/^ *pacer lag ms: //p' "$out.txt")
  E2E=$(awk '/^end-to-end/ {print "p50 " $4 " p99 " $7 " max " $8}' "$out.txt")
}

echo
printf '%-10s %-9s %-11s %-8s %-7s %-36s %s\n' requested duration achieved "diff %" failed "pacer lag ms" "end-to-end ms"
for spec in 10:10s 400:10s 2000:5s; do
  rate=${spec%%:*}; dur=${spec##*:}
  run "$rate" "$dur"
  diff=$(awk -v a="$ACHIEVED" -v r="$rate" 'BEGIN { printf "%+.2f", (a - r) / r * 100 }')
  printf '%-10s %-9s %-11s %-8s %-7s %-36s %s\n' "$rate/s" "$dur" "$ACHIEVED/s" "$diff" "$FAILED" "$LAG" "$E2E"
done

echo
echo "highest sustained rate (3 s steps; sustained = achieved within 1% and no failure, no 'not sent'):"
BEST=0
for rate in 2000 4000 6000 8000 12000 16000 24000 32000; do
  run "$rate" 3s
  ok=$(awk -v a="$ACHIEVED" -v r="$rate" -v f="$FAILED" 'BEGIN { print (a >= r * 0.99 && f == 0) ? "yes" : "no" }')
  echo "  $rate/s: achieved $ACHIEVED/s, failed $FAILED (not sent $NOT_SENT), pacer lag $LAG -> $ok"
  [ "$ok" = yes ] || break
  BEST=$rate
done
echo "kvbench sustains: $BEST req/s (open loop)"

if command -v oha >/dev/null 2>&1; then
  OHA=$(oha -z 5s -c 64 --no-tui "$URL" | sed -n 's/^[[:space:]]*Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p')
  echo "oha (closed loop, 64 connections, 5 s): $OHA req/s"
  awk -v k="$BEST" -v o="$OHA" 'BEGIN { if (o > 0) printf "ratio kvbench / oha: %.2f\n", k / o }'
else
  echo "oha not installed"
fi

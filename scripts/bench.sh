#!/usr/bin/env bash
# `npm run bench`: installs what is missing, builds, starts the local stack on free loopback
# ports (redis-server → upstash-gateway, denokv, and the worker under Miniflare with its local
# KV, Durable Objects, D1, R2 and Cache API; `redis` goes to the same redis-server), runs
# `kvbench run` against it, prints the report, writes it to bench-results/<timestamp>/ and stops
# the stack. Knobs (env): BENCH_RATE (default 50 req/s), BENCH_DURATION (60s), BENCH_ARGS (extra
# `kvbench run` flags), BENCH_QUERY (extra /test query, e.g. "min_bytes=1024&max_bytes=1024"),
# BENCH_FAULTS (gateway fault flags, e.g. "--fault-delay-ms 5-20 --fault-status-fraction 0.01"),
# BENCH_WARMUP (10s: load sent at the same rate before the measured run and not reported; 0 = none),
# BENCH_ENGINE (kvbench, or k6: k6/kvbench.js sends the load and `kvbench import k6` reports it).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"

RATE=${BENCH_RATE:-50}
ENGINE=${BENCH_ENGINE:-kvbench}
case "$ENGINE" in kvbench | k6) ;; *) die "BENCH_ENGINE must be kvbench or k6, got '$ENGINE'" ;; esac
DURATION=${BENCH_DURATION:-60s}
WARMUP=${BENCH_WARMUP:-10s}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$ROOT/bench-results/$STAMP"

bash scripts/setup.sh
export KVBENCH_SKIP_SETUP=1
log "building the gateway and kvbench"
cargo build --profile native -p upstash-gateway -p kvbench --locked --quiet
bash scripts/build.sh

stack_init "$ROOT/.stack/bench-$STAMP"
trap 'stack_stop; rm -rf "$STACK_DIR"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_redis "$(free_port)"
# shellcheck disable=SC2086  # BENCH_FAULTS is a list of flags
start_gateway "$(free_port)" ${BENCH_FAULTS:-}
start_denokv "$(free_port)"
# Loopback only and no token: the k6 engine keeps its answers under a run id (BENCH_OPEN).
STACK_EXTRA_ENV="${STACK_EXTRA_ENV:+$STACK_EXTRA_ENV
}BENCH_OPEN=true"
start_miniflare "$(free_port)"
url="http://127.0.0.1:$WORKER_PORT/test${BENCH_QUERY:+?$BENCH_QUERY}"
log "stack up: worker $url, gateway :$GATEWAY_PORT, redis :$REDIS_PORT, denokv :$DENOKV_PORT"

mkdir -p "$OUT"
rss_mib() { ps -o rss= -p "$1" 2>/dev/null | awk '{printf "%.0f", $1/1024}'; }
# workerd is the child of the Miniflare server we started (its process group).
workerd_pid=$(pgrep -g "$(cat "$STACK_DIR/worker.pid")" -f "workerd serve" | head -n 1 || true)

# Warm-up, not reported: the first seconds of a fresh stack are a cold isolate (the wasm module
# compiled and tiered up on workerd's only thread, first connections) and a write storm (every key
# misses, so each request writes 4-64 KiB into every store). Measured at 200 req/s: e2e p99 ~200 ms
# in the first 3 s against ~30 ms after 10 s, which dominated the tail of a 30 s run; the resident
# memory each process settles at is also reached in this phase, so rss.csv starts after it.
if [ "$WARMUP" != 0 ] && [ "$WARMUP" != 0s ]; then
  log "warm-up: $WARMUP at $RATE req/s (not reported; BENCH_WARMUP=0 skips it)"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  "$ROOT/target/native/kvbench" run --url "$url" --rate "$RATE" --duration "$WARMUP" \
    --label warmup --interval "$WARMUP" --out "$STACK_DIR/warmup" ${BENCH_ARGS:-} >/dev/null 2>&1 ||
    die "the warm-up run failed (exit $?)"
fi

set +e
if [ "$ENGINE" = k6 ]; then
  # k6 drives the same open-loop schedule (constant-arrival-rate); its raw samples are kept
  # next to the report and imported into the same report.json / report.html / charts.
  log "k6 run k6/kvbench.js: $RATE req/s for $DURATION (BENCH_ENGINE=k6)"
  k6 run --quiet --no-usage-report -e KVBENCH_URL="http://127.0.0.1:$WORKER_PORT/test" \
    -e KVBENCH_QUERY="${BENCH_QUERY:-}" -e KVBENCH_RATE="$RATE" -e KVBENCH_DURATION="$DURATION" \
    --out "json=$OUT/k6.json.gz" "$ROOT/k6/kvbench.js" &
else
  log "kvbench run --rate $RATE --duration $DURATION"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  "$ROOT/target/native/kvbench" run --url "$url" --rate "$RATE" --duration "$DURATION" --label local \
    --out "$OUT" ${BENCH_ARGS:-} &
fi
kv_pid=$!
# Resident memory of the load generator and workerd, sampled every 5 s while it runs.
rss_log="$OUT/rss.csv"
echo "elapsed_s,loadgen_mib,workerd_mib" >"$rss_log"
(
  t=0
  while kill -0 "$kv_pid" 2>/dev/null; do
    echo "$t,$(rss_mib "$kv_pid"),${workerd_pid:+$(rss_mib "$workerd_pid")}" >>"$rss_log"
    sleep 5; t=$((t + 5))
  done
) &
sampler=$!
wait "$kv_pid"
status=$?
wait "$sampler" 2>/dev/null
set -e
awk -F, 'NR == 2 { k0 = $2; w0 = $3 } NR > 1 && $2 != "" { k1 = $2; w1 = $3 }
  END { if (NR > 1) printf "[kvbench] resident memory (MiB) first sample -> last: load generator %s -> %s, workerd %s -> %s (rss.csv)\n", k0, k1, w0, w1 }' "$rss_log" >&2
if [ "$ENGINE" = k6 ]; then
  [ "$status" = 0 ] || die "k6 run failed (exit $status)"
  "$ROOT/target/native/kvbench" import k6 "$OUT/k6.json.gz" --label local --out "$OUT" ||
    die "kvbench import k6 failed (exit $?)"
else
  [ "$status" = 0 ] || die "kvbench run failed (exit $status)"
fi
log "report written to bench-results/$STAMP/ (report.html, report.json, timeline.svg, timeline-hits.svg, latency.svg)"

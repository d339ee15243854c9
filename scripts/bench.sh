#!/usr/bin/env bash
# `npm run bench`: installs what is missing, builds, starts the local stack on free loopback
# ports (redis-server → upstash-gateway → the worker under Miniflare with its local KV), runs
# `kvbench run` against it, prints the report, writes it to bench-results/<timestamp>/ and stops
# the stack. Knobs (env): BENCH_RATE (default 50 req/s), BENCH_DURATION (60s), BENCH_ARGS (extra
# `kvbench run` flags), BENCH_QUERY (extra /test query, e.g. "min_bytes=1024&max_bytes=1024"),
# BENCH_FAULTS (gateway fault flags, e.g. "--fault-delay-ms 5-20 --fault-status-fraction 0.01").
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"

RATE=${BENCH_RATE:-50}
DURATION=${BENCH_DURATION:-60s}
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
start_miniflare "$(free_port)"
url="http://127.0.0.1:$WORKER_PORT/test${BENCH_QUERY:+?$BENCH_QUERY}"
log "stack up: worker $url, gateway :$GATEWAY_PORT, redis :$REDIS_PORT"

mkdir -p "$OUT"
rss() { ps -o rss= -p "$1" 2>/dev/null | awk '{printf "%d", $1/1024}'; }
worker_pid=$(pgrep -f -n "workerd serve" -s "$(cat "$STACK_DIR/worker.pid")" || true)

log "kvbench run --rate $RATE --duration $DURATION"
set +e
# shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
kvbench_bin="$ROOT/target/native/kvbench"
"$kvbench_bin" run --url "$url" --rate "$RATE" --duration "$DURATION" --label local \
  --interval 5s --out "$OUT" ${BENCH_ARGS:-} &
kv_pid=$!
sleep 2
start_rss_kvbench=$(rss "$kv_pid"); start_rss_workerd=$([ -n "$worker_pid" ] && rss "$worker_pid")
wait "$kv_pid"
status=$?
set -e
end_rss_workerd=$([ -n "$worker_pid" ] && rss "$worker_pid")
[ -z "$worker_pid" ] || log "workerd resident memory: ${start_rss_workerd:-?} MiB after 2 s, ${end_rss_workerd:-?} MiB at the end"
log "kvbench resident memory after 2 s: ${start_rss_kvbench:-?} MiB (its report prints the peak)"
[ "$status" = 0 ] || die "kvbench run failed (exit $status)"
log "report written to bench-results/$STAMP/ (report.json, timeline.svg, latency.svg)"

#!/usr/bin/env bash
# `npm run bench`: installs what is missing, builds, starts the local stack on free loopback
# ports (redis-server → upstash-gateway, denokv, and the worker under Miniflare with its local
# KV, Durable Objects, D1, R2 and Cache API; `redis` goes to the same redis-server), runs
# `kvbench run` against it, prints the report, writes it to bench-results/<timestamp>/ and stops
# the stack. Knobs (env): BENCH_RATE (default 50 req/s), BENCH_DURATION (60s), BENCH_ARGS (extra
# `kvbench run` flags), BENCH_QUERY (extra /test query, e.g. "min_bytes=1024&max_bytes=1024"),
# BENCH_FAULTS (gateway fault flags, e.g. "--fault-delay-ms 5-20 --fault-status-fraction 0.01"),
# BENCH_WARMUP (10s: load sent at the same rate before the measured run and not reported; 0 = none),
# BENCH_ENGINE (kvbench, or k6: k6/kvbench.js sends the load and `kvbench import k6` reports it),
# BENCH_SAMPLE_S (5: how often resources.csv samples the stack's memory, descriptors and logs),
# BENCH_FRESH_ROUNDS (2: freshness rounds of each case after the load, across two local members,
# the second in a read region; 0 = none), BENCH_FRESH_LIMIT (20s: how long a reader waits for a
# version), KVBENCH_REPLICA_LAG_MS (1000: the read region's replication lag).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"

RATE=${BENCH_RATE:-50}
ENGINE=${BENCH_ENGINE:-kvbench}
case "$ENGINE" in kvbench | k6) ;; *) die "BENCH_ENGINE must be kvbench or k6, got '$ENGINE'" ;; esac
DURATION=${BENCH_DURATION:-60s}
WARMUP=${BENCH_WARMUP:-10s}
SAMPLE_S=${BENCH_SAMPLE_S:-5}
FRESH_ROUNDS=${BENCH_FRESH_ROUNDS:-2}
[[ "$FRESH_ROUNDS" =~ ^[0-9]+$ ]] && [ "$FRESH_ROUNDS" -le 1000 ] || die "BENCH_FRESH_ROUNDS must be 0 to 1000, got '$FRESH_ROUNDS'"
FRESH_LIMIT=${BENCH_FRESH_LIMIT:-20s}
REPLICA_LAG_MS=${KVBENCH_REPLICA_LAG_MS:-1000}
[[ "$REPLICA_LAG_MS" =~ ^[0-9]+$ ]] && [ "$REPLICA_LAG_MS" -le 600000 ] || die "KVBENCH_REPLICA_LAG_MS must be 0 to 600000 ms, got '$REPLICA_LAG_MS'"
case "$SAMPLE_S" in '' | *[!0-9]* | 0) die "BENCH_SAMPLE_S must be a whole number of seconds, got '$SAMPLE_S'" ;; esac
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
start_postgres "$(free_port)"
# Loopback only and no token: the k6 engine keeps its answers under a run id (BENCH_OPEN).
STACK_EXTRA_ENV="${STACK_EXTRA_ENV:+$STACK_EXTRA_ENV
}BENCH_OPEN=true"
start_miniflare "$(free_port)"
url="http://127.0.0.1:$WORKER_PORT/test${BENCH_QUERY:+?$BENCH_QUERY}"
log "stack up: worker $url, gateway :$GATEWAY_PORT, redis :$REDIS_PORT, denokv :$DENOKV_PORT"

mkdir -p "$OUT"

# Warm-up, not reported: the first seconds of a fresh stack are a cold isolate (the wasm module
# compiled and tiered up on workerd's only thread, first connections) and a write storm (every key
# misses, so each request writes 4-64 KiB into every store). Measured at 200 req/s: e2e p99 ~200 ms
# in the first 3 s against ~30 ms after 10 s, which dominated the tail of a 30 s run; the resident
# memory each process settles at is also reached in this phase, so resources.csv starts after it.
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
# Every process of the stack, sampled every SAMPLE_S seconds while the load runs: resident memory
# (MiB) and open file descriptors of the load generator, workerd (every workerd of the Miniflare
# server's process group, summed), that server (node), the gateway, redis-server and denokv; and
# the total size of the stack's logs (bytes). A process that is gone leaves its cells empty.
PROCS="loadgen workerd miniflare gateway redis denokv"
pids_of() {
  case $1 in
    loadgen) echo "$kv_pid" ;;
    workerd) pgrep -g "$(cat "$STACK_DIR/worker.pid")" -f "workerd serve" || true ;;
    miniflare) cat "$STACK_DIR/worker.pid" ;;
    *) cat "$STACK_DIR/$1.pid" ;;
  esac
}
# "MIB FDS" summed over the given live PIDs, or nothing when none lives.
usage() {
  local pid kib fds=0 live=0
  kib=$(ps -o rss= -p "$(echo "$@" | tr ' ' ,)" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  for pid in "$@"; do
    [ -d "/proc/$pid/fd" ] || continue
    live=1; fds=$((fds + $(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)))
  done
  [ "$live" = 0 ] || echo "$(((kib + 512) / 1024)) $fds"
}
res_log="$OUT/resources.csv"
{
  printf elapsed_s
  for p in $PROCS; do printf ',%s_mib' "$p"; done
  for p in $PROCS; do printf ',%s_fds' "$p"; done
  echo ,log_bytes
} >"$res_log"
(
  t0=$SECONDS next=0
  while kill -0 "$kv_pid" 2>/dev/null; do
    mib="" fds=""
    for p in $PROCS; do
      # shellcheck disable=SC2046  # one word per PID
      read -r m f <<<"$(usage $(pids_of "$p"))" || true
      mib="$mib,${m:-}" fds="$fds,${f:-}"
    done
    logs=$(stat -c %s "$STACK_DIR"/*.log 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    echo "$((SECONDS - t0))$mib$fds,$logs" >>"$res_log"
    next=$((next + SAMPLE_S))
    while [ $((SECONDS - t0)) -lt "$next" ] && kill -0 "$kv_pid" 2>/dev/null; do sleep 1; done
  done
) &
sampler=$!
wait "$kv_pid"
status=$?
wait "$sampler" 2>/dev/null
set -e
# Per column: the first sample, the last one taken while the process lived, and the largest.
awk -F, 'NR == 1 { for (i = 2; i <= NF; i++) h[i] = $i; next }
  { for (i = 2; i <= NF; i++) if ($i != "") { if (!(i in f)) f[i] = $i; l[i] = $i; if ($i + 0 > m[i]) m[i] = $i + 0 } }
  END { if (NR < 2) exit
    printf "[kvbench] stack resources, first sample -> last (max), every %s s in resources.csv:\n", s
    for (i = 2; i <= NF; i++) if (i in f) printf "  %-14s %s -> %s (%s)\n", h[i], f[i], l[i], m[i] }' s="$SAMPLE_S" "$res_log" >&2
if [ "$ENGINE" = k6 ]; then
  [ "$status" = 0 ] || die "k6 run failed (exit $status)"
  "$ROOT/target/native/kvbench" import k6 "$OUT/k6.json.gz" --label local --out "$OUT" ||
    die "kvbench import k6 failed (exit $?)"
else
  [ "$status" = 0 ] || die "kvbench run failed (exit $status)"
fi
if [ "$FRESH_ROUNDS" != 0 ]; then
  # Fresh or fast: a writer member on the primaries, a reader member in a read region whose
  # replicas lag by KVBENCH_REPLICA_LAG_MS; the rounds join this run's report.
  log "freshness: $FRESH_ROUNDS round(s) of each case, replicas $REPLICA_LAG_MS ms behind (KVBENCH_REPLICA_LAG_MS)"
  start_replicas "$REPLICA_LAG_MS"
  writer_port=$(free_port)
  reader_port=$(free_port)
  while [ "$reader_port" = "$writer_port" ]; do reader_port=$(free_port); done
  start_fresh_members "$writer_port" "$reader_port"
  "$ROOT/target/native/kvbench" fresh --writer "local-1=http://127.0.0.1:$writer_port" \
    --reader "local-2=http://127.0.0.1:$reader_port" --rounds "$FRESH_ROUNDS" --limit "$FRESH_LIMIT" \
    --out "$OUT" || die "kvbench fresh failed (exit $?)"
fi
log "report written to bench-results/$STAMP/ (report.html, report.json, timeline.svg, timeline-hits.svg, latency.svg)"

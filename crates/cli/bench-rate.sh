#!/usr/bin/env bash
# Benchmarks of kvbench itself (not tests), on loopback against examples/static_target.rs (a
# one-thread hyper server with a fixed /test body that counts what it receives). Every run is
# bounded in time; only 127.0.0.1 is contacted.
#
#   ./bench-rate.sh accuracy   achieved vs requested rate at 10, 400 and 2,000 req/s, pacer lag
#   ./bench-rate.sh versus     kvbench next to oha, open loop both, at RATES (alternated rounds):
#                              what the target received, p99, not_sent, CPU, context switches and
#                              syscalls per request (perf stat)
#   ./bench-rate.sh            both
#
# Environment: RATES (default "10000 20000 30000"), DURATION (10s), ROUNDS (3), CONNECTIONS (64,
# oha's -c and kvbench's --connections; KVBENCH_CONNECTIONS=auto leaves kvbench on its default),
# KVBENCH_ARGS (more `kvbench run` flags, e.g. "--threads 2"),
# OHA (oha binary; `cargo install oha --version 1.16.0 --locked`), PERF (perf binary; without it
# CPU comes from /proc and context switches and syscalls are not counted). Needs python3 to read
# the JSON outputs.
set -euo pipefail
cd "$(dirname "$0")"
MODE=${1:-all}
RATES=${RATES:-"10000 20000 30000"}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-64}
KVBENCH_CONNECTIONS=${KVBENCH_CONNECTIONS:-$CONNECTIONS}
read -r -a KVBENCH_ARGS <<<"${KVBENCH_ARGS:-}"
OHA=${OHA:-oha}
PERF=${PERF:-perf}

# The workspace's `native` profile (optimised, no LTO), as npm run bench builds kvbench.
cargo build --profile native --quiet --bin kvbench --example static_target
BIN_DIR="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/native"
KVBENCH=${KVBENCH:-$BIN_DIR/kvbench}
WORK=$(mktemp -d)
TARGET_PID=
cleanup() { [ -n "$TARGET_PID" ] && kill "$TARGET_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

"$BIN_DIR/examples/static_target" 127.0.0.1:0 >"$WORK/target.log" &
TARGET_PID=$!
for _ in $(seq 50); do grep -q listening "$WORK/target.log" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^listening on //p' "$WORK/target.log")
[ -n "$URL" ] || { echo "static target did not start"; exit 1; }
COUNT_URL=${URL%/test}/count

echo "kvbench benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, target $URL"
echo "$(uname -sr); $(rustc --version); load average $(cut -d' ' -f1-3 /proc/loadavg)"

received() { curl -s "$COUNT_URL"; }

# measure OUT CMD...: runs CMD under perf stat (or /proc accounting) into OUT.perf
measure() {
  local out=$1; shift
  if command -v "$PERF" >/dev/null 2>&1; then
    "$PERF" stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter -o "$out.perf" -- "$@"
  else
    # bash's `times`: the second line is the children's user and system time.
    local t0 t1
    t0=$(times | tail -1)
    "$@"
    t1=$(times | tail -1)
    python3 -c "import re,sys
s=lambda t: sum(int(m)*60+float(x) for m,x in re.findall(r'(\d+)m([\d.]+)s', t))
print(f'{(s(sys.argv[2])-s(sys.argv[1]))*1000:.1f},msec,task-clock')" "$t0" "$t1" >"$out.perf"
  fi
}

# row TOOL RATE ROUND OUT COUNT: one line of the side-by-side table
row() {
  python3 - "$@" <<'EOF'
import json, sys
tool, rate, rnd, out, count, dur = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
perf = {}
try:
    for line in open(out + ".perf"):
        f = line.strip().split(",")
        if len(f) >= 3 and f[0] not in ("", "<not counted>", "<not supported>"):
            perf[f[2]] = float(f[0])
except FileNotFoundError:
    pass
if tool == "kvbench":
    r = json.load(open(out + "/report.json"))
    p99 = next(x for x in r["summary"]["latency"] if x["name"] == "end-to-end")["p99_ms"]
    not_sent = str(r["total"]["failures"].get("not_sent", 0))
    failed = sum(r["total"]["failures"].values())
else:
    r = json.load(open(out + ".json"))
    p99 = r["latencyPercentiles"]["p99"] * 1000
    not_sent = "-"
    failed = sum(r.get("errorDistribution", {}).values())
n = max(count, 1)
cpu = perf.get("task-clock", 0.0)
cs = perf.get("context-switches")
sc = perf.get("raw_syscalls:sys_enter")
fmt = lambda v: "-" if v is None else f"{v / n:.2f}"
print(f"{tool:<8} {int(rate):>7}/s {rnd:>5} {count / dur:>10.0f}/s {count / (rate * dur) * 100:>6.2f}% "
      f"{p99:>8.2f} {not_sent:>8} {failed:>7} {cpu / n * 1000:>8.1f} {fmt(cs):>6} {fmt(sc):>6}")
EOF
}

DUR_S=$(python3 -c "import re,sys; m=re.fullmatch(r'(\d+)(ms|s|m)', '$DURATION'); print(int(m[1]) * {'ms': 0.001, 's': 1, 'm': 60}[m[2]])")

run_kvbench() { # RATE ROUND
  local out="$WORK/kv-$1-$2" before after
  local conn=()
  [ "$KVBENCH_CONNECTIONS" = auto ] || conn=(--connections "$KVBENCH_CONNECTIONS")
  before=$(received)
  measure "$out" "$KVBENCH" run --url "$URL" --rate "$1" --duration "$DURATION" --interval 60s \
    --timeout 2s "${conn[@]}" "${KVBENCH_ARGS[@]}" --out "$out" >"$out.txt"
  after=$(received)
  row kvbench "$1" "$2" "$out" $((after - before)) "$DUR_S"
}

run_oha() { # RATE ROUND
  local out="$WORK/oha-$1-$2" before after
  before=$(received)
  measure "$out" "$OHA" -q "$1" --latency-correction -c "$CONNECTIONS" -z "$DURATION" -t 2s \
    --no-tui --output-format json -o "$out.json" "$URL"
  after=$(received)
  row oha "$1" "$2" "$out" $((after - before)) "$DUR_S"
}

if [ "$MODE" = accuracy ] || [ "$MODE" = all ]; then
  echo
  echo "accuracy (kvbench, default connections):"
  printf '%-10s %-9s %-11s %-8s %-7s %-36s %s\n' requested duration achieved "diff %" failed "pacer lag ms" "end-to-end ms"
  for spec in 10:10s 400:10s 2000:5s; do
    rate=${spec%%:*}; dur=${spec##*:}; out="$WORK/acc-$rate"
    "$KVBENCH" run --url "$URL" --rate "$rate" --duration "$dur" --interval 60s --timeout 2s \
      --out "$out" >"$out.txt"
    achieved=$(sed -n 's/^achieved rate \([0-9.]*\) req\/s.*/\1/p' "$out.txt")
    failed=$(sed -n 's/.* failed \([0-9]*\) (not sent.*/\1/p' "$out.txt")
    lag=$(sed -n 's/^ *pacer lag ms: //p' "$out.txt")
    e2e=$(awk '/^end-to-end +[0-9]/ {print "p50 " $3 " p99 " $6 " max " $7}' "$out.txt")
    diff=$(awk -v a="$achieved" -v r="$rate" 'BEGIN { printf "%+.2f", (a - r) / r * 100 }')
    printf '%-10s %-9s %-11s %-8s %-7s %-36s %s\n' "$rate/s" "$dur" "$achieved/s" "$diff" "$failed" "$lag" "$e2e"
  done
fi

if [ "$MODE" = versus ] || [ "$MODE" = all ]; then
  echo
  if ! command -v "$OHA" >/dev/null 2>&1; then
    echo "oha not found (cargo install oha --version 1.16.0 --locked); kvbench alone:"
  else
    echo "side by side, open loop both: kvbench --connections $KVBENCH_CONNECTIONS ${KVBENCH_ARGS[*]}; $($OHA --version) -q R --latency-correction -c $CONNECTIONS"
  fi
  echo "(received: counted by the target over the $DURATION run; CPU, context switches and syscalls per received request)"
  printf '%-8s %9s %5s %12s %7s %8s %8s %7s %8s %6s %6s\n' tool requested round received "%" "p99 ms" not_sent failed "CPU µs" "cs" "sys"
  for rate in $RATES; do
    for round in $(seq "$ROUNDS"); do
      # Alternate which tool goes first, so drift in the machine's load hits both alike.
      if [ $((round % 2)) = 1 ] || ! command -v "$OHA" >/dev/null 2>&1; then
        run_kvbench "$rate" "$round"
        command -v "$OHA" >/dev/null 2>&1 && run_oha "$rate" "$round"
      else
        run_oha "$rate" "$round"
        run_kvbench "$rate" "$round"
      fi
    done
  done
fi

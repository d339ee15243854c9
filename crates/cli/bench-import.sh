#!/usr/bin/env bash
# Import benchmark of kvbench (documented, not a timed test): `kvbench import k6` throughput in
# lines/s and MB/s, and its peak memory, on a synthetic k6 JSON file of the published run
# (20 load zones × 10 req/s × 30 min, written by examples/k6_synth.rs in the exact shape k6 v1.1.0
# gives k6/kvbench.js), plain and gzip, next to a 4× smaller file (7.5 min) to show that memory
# does not grow with the file. Every import is checked against what the generator wrote
# (scheduled, sent, answered, failures per load zone and per store; lines). Goal: the 30 min
# file in under 30 s on 2 cores, memory flat in file size.
#
# Needs about 2.7 GB free in $TMPDIR (one file at a time, each deleted after its import) and
# GNU time (/usr/bin/time; installed with apt-get when missing and running as root). The files
# are read right after being written, so from the page cache. Takes a few minutes.
#
# Environment: ZONES (20), RATE (10 req/s per zone), DURATION (1800 s), GZIP_LEVEL (6, k6's).
set -euo pipefail
cd "$(dirname "$0")"

ZONES=${ZONES:-20}
RATE=${RATE:-10}
DURATION=${DURATION:-1800}
SMALL=$((DURATION / 4))
GZIP_LEVEL=${GZIP_LEVEL:-6}
# The timeline interval `--interval auto` picks for a duration (collect::auto_interval). The small
# file is imported with the full duration's, so the two imports differ only in the file's size.
auto_s() { awk -v d="$1" 'BEGIN { s = int(d / 60 + 0.5); if (s < 5) s = 5; if (s > 60) s = 60; print s }'; }
AUTO_S=$(auto_s "$DURATION")

if [ ! -x /usr/bin/time ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y -qq time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
  else
    echo "needs GNU time (/usr/bin/time) for the peak memory: apt-get install time"; exit 1
  fi
fi

# The workspace's `native` profile (optimised, no LTO), as bench-rate.sh.
cargo build --profile native --quiet -p kvbench --bin kvbench --examples
BIN_DIR="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/native"
KVBENCH=$BIN_DIR/kvbench
SYNTH=$BIN_DIR/examples/k6_synth

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvbench-import.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# About 5.8 kB of JSON per iteration; room for the largest plain file plus a margin.
NEED_MB=$(awk -v n="$((ZONES * DURATION))" -v r="$RATE" 'BEGIN { printf "%d", n * r * 5800 / 1e6 * 1.2 + 200 }')
AVAIL_MB=$(df -Pm "$WORK" | awk 'NR == 2 { print $4 }')
df -h "$WORK" | sed 's/^/  /'
if [ "$AVAIL_MB" -lt "$NEED_MB" ]; then
  echo "needs about $NEED_MB MB free in $(dirname "$WORK"), has $AVAIL_MB MB (set TMPDIR elsewhere)"; exit 1
fi

echo "kvbench import benchmark, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores," \
  "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine slows the wall time; cpu s is user + sys)"
echo "$(uname -sr); $(rustc --version); synthetic k6 v1.1.0 output of k6/kvbench.js," \
  "$ZONES zones × $RATE req/s, gzip level $GZIP_LEVEL"
echo

# json_field FILE NAME -> the top-level number NAME of the generator's (pretty) counts
json_field() { sed -n "s/^  \"$2\": \\([0-9.]*\\),\\{0,1\\}\$/\\1/p" "$1" | head -1; }

printf '%-8s %-5s %-9s %10s %9s %8s %8s %7s %11s %8s %9s  %s\n' \
  duration file interval lines "file MB" "JSON MB" seconds "cpu s" "lines/s" "MB/s" "peak MB" check

# bench DURATION_S gzip|plain INTERVAL
bench() {
  local secs=$1 kind=$2 interval=$3 file="$WORK/k6-$1s.json" gzflag= shown=$3
  [ "$interval" = auto ] && shown="auto=$(auto_s "$secs")s"
  if [ "$kind" = gzip ]; then file=$file.gz; gzflag=--gzip; fi
  "$SYNTH" gen --zones "$ZONES" --rate "$RATE" --duration "$secs" $gzflag --gzip-level "$GZIP_LEVEL" \
    --out "$file" --counts "$WORK/counts.json" >/dev/null
  sync "$file" 2>/dev/null || true
  rm -rf "$WORK/out"
  /usr/bin/time -f '%e %M %U %S' -o "$WORK/time" \
    "$KVBENCH" import k6 "$file" --out "$WORK/out" --interval "$interval" >"$WORK/import.txt"
  local check
  if "$SYNTH" verify --counts "$WORK/counts.json" --report "$WORK/out/report.json" >"$WORK/verify.txt" 2>&1; then
    check=ok
  else
    check=MISMATCH; cat "$WORK/verify.txt" >&2
  fi
  local lines bytes file_bytes
  lines=$(json_field "$WORK/counts.json" lines)
  bytes=$(json_field "$WORK/counts.json" bytes)
  file_bytes=$(json_field "$WORK/counts.json" file_bytes)
  local elapsed rss_kb user sys
  read -r elapsed rss_kb user sys <"$WORK/time"
  awk -v d="$((secs / 60))m$((secs % 60))s" -v k="$kind" -v iv="$shown" -v l="$lines" -v b="$bytes" \
    -v fb="$file_bytes" -v e="$elapsed" -v cpu="$user $sys" -v m="$rss_kb" -v c="$check" 'BEGIN {
      sub(/m0s$/, "m", d); e = (e > 0) ? e : 0.01; split(cpu, u, " ")
      printf "%-8s %-5s %-9s %10d %9.0f %8.0f %8.2f %7.2f %11.0f %8.1f %9.1f  %s\n",
        d, k, iv, l, fb / 1e6, b / 1e6, e, u[1] + u[2], l / e, b / 1e6 / e, m / 1024, c }'
  rm -f "$file"
}

bench "$DURATION" plain "${AUTO_S}s"
bench "$DURATION" gzip "${AUTO_S}s"
bench "$SMALL" plain "${AUTO_S}s"
bench "$SMALL" gzip "${AUTO_S}s"
bench "$SMALL" plain auto

echo
echo "lines/s and MB/s: lines and bytes of the uncompressed JSON over the import's wall time"
echo "(reading, parsing, collecting and writing report.json/.html/.svg); cpu s: user + sys;"
echo "peak MB: maximum resident set size (GNU time); check: the report matches what was written."
echo "Memory follows the timeline (load zones × open intervals × histograms), not the file:"
echo "the last row is the small file with its own auto interval (shorter, so more kept open)."

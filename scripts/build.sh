#!/usr/bin/env bash
# Builds the worker bundles without touching the network — the benchmark worker into build/, the
# fleet member's build of it (the same /test without the operations plane: cargo feature
# `main-worker` off) into build-member/, and the report worker (crates/report-worker, GET
# /report's renderer) into crates/report-worker/build/ — with worker-build pointed at the pinned
# wasm-bindgen CLI, binaryen's wasm-opt and wrangler's esbuild instead of downloading.
# `build.sh worker`, `build.sh member` or `build.sh report` builds one.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[ "${KVBENCH_SKIP_SETUP:-}" = 1 ] || bash scripts/setup.sh

export WASM_BINDGEN_BIN="$(command -v wasm-bindgen)"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"

# While a build runs it is listed in $KVBENCH_BUILDS (one file per build, its PID): the dev
# stack's watchdog does not take a worker that is being rebuilt (wrangler holds its requests
# meanwhile) for a hung one.
BUILDS_DIR=${KVBENCH_BUILDS:-$ROOT/.stack/builds}
mkdir -p "$BUILDS_DIR"
echo "$$" >"$BUILDS_DIR/$$"
trap 'rm -f "$BUILDS_DIR/$$"' EXIT

# build_key DIR [CARGO_ARG...]: what a bundle of DIR is a function of — the wasm cargo built (cargo
# decides whether a source, a dependency, a flag or the toolchain changed), the tools that turn
# it into the bundle, and this script. Runs cargo's build of the crate exactly as worker-build
# does (same command, same environment), so worker-build's own cargo step is then a no-op.
build_key() {
  local dir=$1 crate wasm
  shift
  crate=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$dir/Cargo.toml" | head -n 1 | tr - _)
  (cd "$dir" && WASM_BINDGEN_USE_JS_SYS=1 cargo build --lib --release --target wasm32-unknown-unknown --quiet --locked "$@")
  wasm="$ROOT/target/wasm32-unknown-unknown/release/$crate.wasm"
  [ -f "$wasm" ] || die "cargo built no $wasm"
  {
    sha256sum <"$wasm"
    worker-build --version
    wasm-bindgen --version
    sha256sum <"$ROOT/scripts/build.sh"
    echo "names=${KVBENCH_WASM_NAMES:-}"
    echo "cargo args: $*"
  } | sha256sum | cut -d' ' -f1
}

# build_one DIR OUT GOAL_KIB [CARGO_ARG...]: worker-build --release of DIR into DIR/OUT, then the
# size report — unless DIR/OUT holds the bundle of exactly these inputs (build_key), which is then
# reused as it is: wasm-bindgen and wasm-opt are most of a build's time, and a restart or a
# touched file changes nothing they make. KVBENCH_REBUILD=1 builds anyway. The main worker and
# the member share cargo's target directory: one of them after the other relinks the crate only.
build_one() {
  local dir=$1 out=$2 goal=$3 key
  shift 3
  local stamp="$dir/$out/.kvbench-build-key" label=$dir
  [ "$out" = build ] || label="$dir, $out"
  key=$(build_key "$dir" "$@")
  if [ "${KVBENCH_REBUILD:-}" != 1 ] && [ -f "$dir/$out/index.js" ] && [ -f "$dir/$out/index_bg.wasm" ] &&
    [ "$(cat "$stamp" 2>/dev/null)" = "$key" ]; then
    log "build of $label reused: its inputs did not change (key ${key:0:12})"
    return 0
  fi
  rm -f "$stamp"
  log "worker-build --release ($label${*:+, $*})"
  (cd "$dir" && worker-build --release --out-dir "$out" . "$@")
  local wasm="$dir/$out/index_bg.wasm"
  [ -f "$wasm" ] || die "worker-build produced no $wasm"
  # worker-build keeps the wasm "names" section (function names in a panic's stack trace): ~120
  # KiB raw, ~35 KiB gzip, 15% of the bundle. Strip it, unless KVBENCH_WASM_NAMES=1 (debugging a
  # deployed panic). Same features as worker-build's wasm-opt run.
  if [ "${KVBENCH_WASM_NAMES:-}" != 1 ]; then
    local features=(mutable-globals sign-ext nontrapping-float-to-int bulk-memory multivalue reference-types exception-handling)
    "$WASM_OPT_BIN" "$wasm" --strip-debug "${features[@]/#/--enable-}" -o "$wasm"
  fi
  local raw gz
  raw=$(stat -c %s "$wasm")
  gz=$(gzip -9 -c "$wasm" | wc -c)
  local verdict="within"
  [ "$gz" -le $((goal * 1024)) ] || verdict="OVER"
  log "bundle: $wasm $(kib "$raw") KiB raw, $(kib "$gz") KiB gzip ($verdict its goal of $goal KiB gzip)"
  # npm test sets KVBENCH_BUNDLE_GOALS=enforce: there a bundle over its goal is a failure (the
  # stamp is not written, so the next build checks again).
  if [ "$verdict" = OVER ] && [ "${KVBENCH_BUNDLE_GOALS:-}" = enforce ]; then
    die "$label's bundle is $(kib "$gz") KiB gzip, over its goal of $goal KiB"
  fi
  echo "$key" >"$stamp"
}

# kib BYTES: in KiB with one decimal.
kib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1024 }'; }

case "${1:-all}" in
  worker) build_one . build 417 ;;
  member) build_one . build-member 300 --no-default-features ;;
  report) build_one crates/report-worker build 1024 ;;
  # The workers-rs hello world of bench/cold.mjs (not part of all: only that benchmark uses it).
  hello) build_one bench/hello-rs build 100 ;;
  all) build_one . build 417; build_one . build-member 300 --no-default-features; build_one crates/report-worker build 1024 ;;
  *) die "usage: build.sh [worker|member|report|all|hello]" ;;
esac

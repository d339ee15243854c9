#!/usr/bin/env bash
# Builds both worker bundles without touching the network — the benchmark worker into build/ and
# the report worker (crates/report-worker, GET /report's renderer) into crates/report-worker/build/
# — with worker-build pointed at the pinned wasm-bindgen CLI, binaryen's wasm-opt and wrangler's
# esbuild instead of downloading. `build.sh worker` or `build.sh report` builds one.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[ "${KVBENCH_SKIP_SETUP:-}" = 1 ] || bash scripts/setup.sh

export WASM_BINDGEN_BIN="$(command -v wasm-bindgen)"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"

# build_one DIR GOAL_KIB: worker-build --release in DIR, then the size report.
build_one() {
  local dir=$1 goal=$2
  log "worker-build --release ($dir)"
  (cd "$dir" && worker-build --release)
  local wasm="$dir/build/index_bg.wasm"
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
  log "bundle: $wasm $((raw / 1024)) KiB raw, $((gz / 1024)) KiB gzip (goal <= $goal KiB gzip)"
}

case "${1:-all}" in
  worker) build_one . 250 ;;
  report) build_one crates/report-worker 1024 ;;
  all) build_one . 250; build_one crates/report-worker 1024 ;;
  *) die "usage: build.sh [worker|report|all]" ;;
esac

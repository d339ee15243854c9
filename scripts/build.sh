#!/usr/bin/env bash
# Builds the worker bundle into build/ without touching the network: worker-build is pointed at
# the pinned wasm-bindgen CLI, binaryen's wasm-opt and wrangler's esbuild instead of downloading.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
[ "${KVBENCH_SKIP_SETUP:-}" = 1 ] || bash scripts/setup.sh

export WASM_BINDGEN_BIN="$(command -v wasm-bindgen)"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
log "worker-build --release"
worker-build --release
wasm="build/index_bg.wasm"
[ -f "$wasm" ] || die "worker-build produced no $wasm"
# worker-build keeps the wasm "names" section (function names in a panic's stack trace): ~120 KiB
# raw, ~35 KiB gzip, 15% of the bundle. Strip it to stay under the size goal, unless
# KVBENCH_WASM_NAMES=1 (debugging a deployed panic). Same features as worker-build's wasm-opt run.
if [ "${KVBENCH_WASM_NAMES:-}" != 1 ]; then
  features=(mutable-globals sign-ext nontrapping-float-to-int bulk-memory multivalue reference-types exception-handling)
  "$WASM_OPT_BIN" "$wasm" --strip-debug "${features[@]/#/--enable-}" -o "$wasm"
fi
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
log "bundle: $wasm $((raw / 1024)) KiB raw, $((gz / 1024)) KiB gzip (goal <= 250 KiB gzip)"

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
raw=$(stat -c %s "$wasm")
gz=$(gzip -9 -c "$wasm" | wc -c)
log "bundle: $wasm $((raw / 1024)) KiB raw, $((gz / 1024)) KiB gzip (goal <= 250 KiB gzip)"

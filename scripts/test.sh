#!/usr/bin/env bash
# Every test of the project, in the order a failure is cheapest to find: lint, native, wasm,
# build, end to end. Installs what is missing first. Exits non-zero on the first failure.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
export KVBENCH_SKIP_SETUP=1
# Tests spawn their own redis-server and gateway on free loopback ports.
export GATEWAY_BIN="$ROOT/target/debug/upstash-gateway"
# The Deno KV tests (native and e2e) spawn their own denokv the same way.
DENOKV_BIN="${DENOKV_BIN:-$(command -v denokv || true)}"
[ -n "$DENOKV_BIN" ] || die "denokv is missing: run npm run setup (cargo install denokv --version 0.14.0 --locked)"
export DENOKV_BIN
# The report.html test loads the page in Debian's chromium (setup.sh installs it): here a missing
# browser is a failure, not a skip.
export KVBENCH_REQUIRE_BROWSER=1

step() { log "── $* ──"; }

step "cargo fmt --check"
cargo fmt --all --check

step "clippy (host)"
cargo clippy --workspace --all-targets --locked -- -D warnings
step "clippy (wasm32-unknown-unknown)"
cargo clippy -p kvbench-worker -p kvbench-core -p kvbench-report -p kvbench-report-worker -p kvbench-wire --target wasm32-unknown-unknown --all-targets --locked -- -D warnings
# The fleet member's build (without the main-worker feature: scripts/build.sh member).
cargo clippy -p kvbench-worker --target wasm32-unknown-unknown --lib --no-default-features --locked -- -D warnings

step "native tests (core + mocked bindings, gateway against a real redis-server)"
cargo test --workspace --locked
cargo build -p upstash-gateway --locked  # the binary the JS suites spawn
cargo build -p kvbench --locked  # the CLI the report (and k6) e2e suites run

step "wasm tests (every #[wasm_bindgen_test] inside workerd via Miniflare, real bindings)"
cargo test -p kvbench-worker --lib --target wasm32-unknown-unknown --locked

step "build the workers (benchmark, its fleet member build, report)"
bash scripts/build.sh

step "wrangler deploy --dry-run (both workers)"
for config in crates/report-worker/wrangler.toml wrangler.toml; do
  dry="$(mktemp -d)"
  wrangler deploy --dry-run -c "$config" --outdir "$dry" >"$dry.log" 2>&1 || { cat "$dry.log"; die "wrangler deploy --dry-run -c $config failed"; }
  tail -n 5 "$dry.log"
  rm -rf "$dry" "$dry.log"
done

step "end-to-end tests (built worker under Miniflare)"
# The files, not the directory: Node 22 and 24 load a directory argument as a module.
node --test --test-concurrency=1 tests/e2e/*.test.mjs

log "all tests passed"

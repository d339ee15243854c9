#!/usr/bin/env bash
# Every test of the project, in the order a failure is cheapest to find: lint, native, wasm,
# build, end to end. Installs what is missing first. Exits non-zero on the first failure.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
# Knobs that change what a test does (UPDATE_GOLDEN rewrites goldens, the rates and timeouts
# loosen what is checked) come from the project's own settings here, never from the caller's shell.
for knob in $(compgen -e | grep -E '^(KVBENCH_|BENCH_|HOSTILE_|UPDATE_GOLDEN$)' || true); do
  log "ignoring $knob from the environment"
  unset "$knob"
done
bash scripts/setup.sh
export KVBENCH_SKIP_SETUP=1
# A bundle over its goal fails the build here (npm run bench only reports it).
export KVBENCH_BUNDLE_GOALS=enforce
# What the tree looks like before the run: a test that writes into it (a golden, a generated doc,
# wrangler.toml) fails the run at the end.
tree_state() {
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout"; return; }
  { git diff HEAD --binary; git ls-files -o --exclude-standard -z | xargs -0 -r sha1sum; } | sha1sum
}
tree_before=$(tree_state)
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
cargo clippy -p kvbench-worker -p kvbench-core -p kvbench-spec -p kvbench-report -p kvbench-report-worker -p kvbench-wire --target wasm32-unknown-unknown --all-targets --locked -- -D warnings
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
# The files, not the directory: Node 22 and 24 load a directory argument as a module. The TAP copy
# of the results is read after the run: a skipped or todo test fails it (node:test exits 0).
tap=$(mktemp)
node --test --test-concurrency=1 --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" tests/e2e/*.test.mjs
for kind in skipped todo cancelled; do
  count=$(awk -v k="# $kind" '$0 ~ "^"k" " { n = $3 } END { print n + 0 }' "$tap")
  [ "$count" = 0 ] || { grep -B2 -iE "# (SKIP|TODO)" "$tap" | head -40; die "$count end-to-end test(s) $kind: every test must run"; }
done
grep -q "^# pass [1-9]" "$tap" || die "the end-to-end run reported no passing test"
rm -f "$tap"

step "the run left the tree as it found it"
if [ "$(tree_state)" != "$tree_before" ]; then
  git status --short
  die "the tests changed files in the checkout (a golden or a generated doc differs): review, commit or revert"
fi

log "all tests passed"

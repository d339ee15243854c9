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

# Waits until a TCP port on 127.0.0.1 accepts connections (bounded).
wait_port() {
  local port=$1 what=$2 tries=${3:-150}
  for _ in $(seq "$tries"); do
    if port_open "$port"; then return 0; fi
    sleep 0.2
  done
  die "$what did not listen on 127.0.0.1:$port in time"
}

# A free TCP port on loopback.
free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

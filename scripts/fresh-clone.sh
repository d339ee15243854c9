#!/usr/bin/env bash
# `npm run test:fresh`: what a new user and CI get, before you submit. Clones the current commit
# (not the working tree: uncommitted changes are not in it) into a new directory whose path has a
# space in it, and runs `npm test` there — nothing of this checkout's node_modules, target/,
# .tools/ or .stack/ comes along, so a missing install step or a path that is not quoted fails
# here as it would for them.
#
#   --no-tools   also hide the tools cargo installed for this machine (worker-build,
#                wasm-bindgen, denokv, anything else in ~/.cargo/bin but rustup's own): the clone's
#                setup installs them again into its own directory (~10 more minutes on 2 cores).
#   --keep       keep the scratch directory afterwards (its path is printed).
#   --commit REV clone REV instead of HEAD.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

no_tools=0 keep=0 rev=HEAD
while [ $# -gt 0 ]; do
  case "$1" in
    --no-tools) no_tools=1 ;;
    --keep) keep=1 ;;
    --commit) rev=${2:?--commit needs a revision}; shift ;;
    *) die "unknown flag $1 (flags: --no-tools, --keep, --commit REV)" ;;
  esac
  shift
done

commit=$(git -C "$ROOT" rev-parse --verify "$rev^{commit}") || die "--commit: $rev is not a commit"
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
  log "note: the working tree has uncommitted changes; they are not tested (commit them first)"
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kvbench fresh clone.XXXXXX")
cleanup() {
  if [ "$keep" = 1 ]; then
    log "kept $scratch"
  else
    rm -rf "$scratch"
  fi
}
trap cleanup EXIT
dir="$scratch/kv bench"
log "cloning $commit into '$dir'"
git clone --quiet --no-hardlinks "$ROOT" "$dir"
git -C "$dir" checkout --quiet --detach "$commit"

env_args=()
if [ "$no_tools" = 1 ]; then
  # rustup's proxies only (cargo, rustc, clippy, rustfmt …): every tool the project installs
  # itself has to come from its own setup, into the scratch directory.
  bin="$scratch/rustup-bin"
  mkdir -p "$bin"
  for proxy in cargo rustc rustup rustdoc rustfmt cargo-fmt cargo-clippy clippy-driver rust-gdb rust-lldb; do
    [ -e "$HOME/.cargo/bin/$proxy" ] && ln -s "$HOME/.cargo/bin/$proxy" "$bin/$proxy"
  done
  clean_path=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vx "$HOME/.cargo/bin" | grep -v "node_modules/.bin\|\.tools/" | paste -sd:)
  env_args=(PATH="$scratch/tools/bin:$bin:$clean_path" CARGO_INSTALL_ROOT="$scratch/tools")
  log "tools hidden: cargo installs into $scratch/tools"
fi

started=$(date +%s)
log "npm test in the clone (a fresh clone builds everything: ~30 minutes on 2 cores)"
if (cd "$dir" && env "${env_args[@]}" npm test); then
  log "fresh clone of $commit: green in $(($(date +%s) - started)) s"
else
  rc=$?
  keep=1
  die "fresh clone of $commit: npm test failed (exit $rc) after $(($(date +%s) - started)) s; the clone is kept in '$dir'"
fi

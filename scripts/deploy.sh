#!/usr/bin/env bash
# `npm run deploy` (after `npx wrangler login`): deploys the report worker, then the benchmark
# worker — wrangler (>= 4.45) creates the KV namespace, D1 database and R2 bucket of wrangler.toml
# on the first deploy and writes their ids back — applies the D1 migrations (the table), and
# checks the result at its URL (scripts/check-deploy.mjs). Secrets are optional: README.md,
# "Deploying". KVBENCH_DEPLOY_CHECK=0 skips the check.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
export KVBENCH_SKIP_SETUP=1
export WRANGLER_SEND_METRICS=false

wrangler whoami >/dev/null 2>&1 || die "not logged in to Cloudflare: run 'npx wrangler login' first"

log "deploying the report worker (crates/report-worker)"
wrangler deploy -c crates/report-worker/wrangler.toml

log "deploying the benchmark worker"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
wrangler deploy 2>&1 | tee "$out"
[ "${PIPESTATUS[0]}" = 0 ] || die "wrangler deploy failed"

if grep -q '^\[\[d1_databases\]\]' wrangler.toml; then
  log "applying the D1 migrations (migrations/)"
  CI=1 wrangler d1 migrations apply BENCH_D1 --remote </dev/null ||
    die "wrangler d1 migrations apply BENCH_D1 --remote failed"
fi

url="$(grep -oE 'https://[A-Za-z0-9.-]+\.workers\.dev' "$out" | head -n 1 || true)"
if [ -z "$url" ]; then
  log "deployed; no workers.dev URL in wrangler's output (a custom domain?): check it with"
  log "  node scripts/check-deploy.mjs https://<your host>"
  exit 0
fi
log "deployed: $url"
[ "${KVBENCH_DEPLOY_CHECK:-1}" = 0 ] || node scripts/check-deploy.mjs "$url"

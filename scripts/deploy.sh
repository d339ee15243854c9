#!/usr/bin/env bash
# `npm run deploy` (after `npx wrangler login`): deploys the report worker, then the benchmark
# worker — wrangler (>= 4.45) creates the KV namespace, D1 database and R2 bucket of wrangler.toml
# on the first deploy and writes their ids back — applies the D1 migrations (the table), deploys
# the fleet (the benchmark worker once per placement region of crates/core/fleet-regions.json;
# FLEET_REGIONS=none|N|region,... chooses fewer), tells the main worker's probes where the members
# are (the FLEET secret), and checks the result at its URL (scripts/check-deploy.mjs).
#
# Never open: every worker is deployed with BENCH_TOKEN in the same upload (`--secrets-file`), the
# one from the environment, else the one kept in .fleet/bench-token, else a new one kept there
# (mode 600). The stores' secrets (UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN, DENO_KV_URL,
# DENO_KV_ACCESS_TOKEN, REDIS_URL, POSTGRES_URL) go to the members from the environment (wrangler cannot read a
# secret back); a store whose secrets are not given is "not configured" on the members.
# KVBENCH_DEPLOY_CHECK=0 skips the check.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
export KVBENCH_SKIP_SETUP=1
export WRANGLER_SEND_METRICS=false

wrangler whoami >/dev/null 2>&1 || die "not logged in to Cloudflare: run 'npx wrangler login' first"

FLEET_DIR="$ROOT/.fleet"
mkdir -p "$FLEET_DIR"
chmod 700 "$FLEET_DIR"
TOKEN_FILE="$FLEET_DIR/bench-token"
if [ -n "${BENCH_TOKEN:-}" ]; then
  token=$(printf '%s' "$BENCH_TOKEN" | tr -d '[:space:]')
elif [ -s "$TOKEN_FILE" ]; then
  token=$(tr -d '[:space:]' <"$TOKEN_FILE")
  log "BENCH_TOKEN: the one kept in $TOKEN_FILE"
else
  token=$(node -e 'console.log(require("crypto").randomBytes(24).toString("base64url"))')
  (umask 077; printf '%s\n' "$token" >"$TOKEN_FILE")
  log "BENCH_TOKEN: made a new one, kept in $TOKEN_FILE (mode 600): send it as 'Authorization: Bearer <token>'"
fi
[ -n "$token" ] || die "BENCH_TOKEN is blank"
out="$(mktemp)"
secrets="$(umask 077; mktemp)"
trap 'rm -f "$out" "$secrets"' EXIT
# secrets_file NAME...: a JSON file (mode 600) of BENCH_TOKEN and those of the given variables
# that are set, for `wrangler deploy --secrets-file` (JSON: any character of a URL or token is safe).
secrets_file() {
  KVBENCH_TOKEN="$token" node -e '
    const out = { BENCH_TOKEN: process.env.KVBENCH_TOKEN };
    for (const name of process.argv.slice(1)) if (process.env[name]) out[name] = process.env[name];
    process.stdout.write(JSON.stringify(out));
  ' "$@" >"$secrets"
}

# Postgres, when POSTGRES_URL is given: the table (migrations/postgres, applied with psql from
# here), a Hyperdrive configuration `kvbench` for the same database, made once and bound as
# BENCH_HYPERDRIVE in wrangler.toml (kept there like wrangler's own id write-back), and both
# stores added to STORES. Without it both stores are left out (GET / says why: not configured).
store_vars=()
if [ -n "${POSTGRES_URL:-}" ]; then
  log "applying the Postgres migrations (migrations/postgres) to POSTGRES_URL"
  bash scripts/postgres.sh migrate "$POSTGRES_URL" ||
    die "the Postgres migration failed: is POSTGRES_URL reachable from this machine, and its user allowed to create a table?"
  if ! grep -q '^\[\[hyperdrive\]\]' wrangler.toml; then
    log "creating the Hyperdrive configuration kvbench"
    # Its output is not shown on failure: it may quote the connection string (the password).
    # wrangler takes the string only as an argument (ps shows it for the second this runs, on
    # this machine); psql, above, gets it through libpq's variables instead.
    hd_out=$(wrangler hyperdrive create kvbench --connection-string="$POSTGRES_URL" 2>&1 </dev/null) ||
      die "wrangler hyperdrive create kvbench failed (run it by hand to see why; a configuration of that name may exist: put its id in wrangler.toml as [[hyperdrive]] binding = \"BENCH_HYPERDRIVE\")"
    hd_id=$(grep -oE '\b[0-9a-f]{32}\b' <<<"$hd_out" | head -n 1 || true)
    [ -n "$hd_id" ] || die "no configuration id in the output of wrangler hyperdrive create"
    printf '\n# Made by npm run deploy from POSTGRES_URL (the hyperdrive store).\n[[hyperdrive]]\nbinding = "BENCH_HYPERDRIVE"\nid = "%s"\n' "$hd_id" >>wrangler.toml
    log "  Hyperdrive $hd_id, bound as BENCH_HYPERDRIVE in wrangler.toml"
  fi
  store_vars=(--var "STORES:kv,upstash,denokv,do,d1,r2,cache,redis,postgres,hyperdrive")
fi

log "deploying the report worker (crates/report-worker)"
wrangler deploy -c crates/report-worker/wrangler.toml

log "deploying the benchmark worker"
secrets_file POSTGRES_URL
wrangler deploy --secrets-file "$secrets" ${store_vars[@]+"${store_vars[@]}"} 2>&1 | tee "$out"
[ "${PIPESTATUS[0]}" = 0 ] || die "wrangler deploy failed"

if grep -q '^\[\[d1_databases\]\]' wrangler.toml; then
  log "applying the D1 migrations (migrations/)"
  CI=1 wrangler d1 migrations apply BENCH_D1 --remote </dev/null ||
    die "wrangler d1 migrations apply BENCH_D1 --remote failed"
fi

url="$(grep -oE 'https://[A-Za-z0-9.-]+\.workers\.dev' "$out" | head -n 1 || true)"

# The fleet: one member per placement region, each with the token and the stores' secrets.
regions="${FLEET_REGIONS:-all}"
fleet=""
if [ "$regions" != none ]; then
  node scripts/fleet.mjs --regions "$regions" --out "$FLEET_DIR/wrangler.jsonc" >"$FLEET_DIR/members.txt" ||
    die "scripts/fleet.mjs failed"
  log "deploying the fleet: $(wc -l <"$FLEET_DIR/members.txt") members (FLEET_REGIONS=$regions)"
  secrets_file UPSTASH_REDIS_REST_URL UPSTASH_REDIS_REST_TOKEN DENO_KV_URL DENO_KV_ACCESS_TOKEN REDIS_URL POSTGRES_URL
  while read -r env region name; do
    log "  $region -> $name"
    wrangler deploy -c "$FLEET_DIR/wrangler.jsonc" --env "$env" --secrets-file "$secrets" ${store_vars[@]+"${store_vars[@]}"} >"$out" 2>&1 </dev/null ||
      { tail -n 20 "$out" >&2; die "deploying fleet member $name ($region) failed"; }
    member_url="$(grep -oE "https://$name\.[A-Za-z0-9.-]+\.workers\.dev" "$out" | head -n 1 || true)"
    [ -n "$member_url" ] || die "no workers.dev URL in the deploy of $name (workers_dev is on in its config)"
    fleet="${fleet:+$fleet,}$region=$member_url"
  done <"$FLEET_DIR/members.txt"
fi
# The main worker's probes call the members (no FLEET secret: none).
if [ -n "$fleet" ]; then
  printf '%s' "$fleet" | wrangler secret put FLEET >/dev/null || die "wrangler secret put FLEET failed"
else
  CI=1 wrangler secret delete FLEET >/dev/null 2>&1 </dev/null || true
fi
log "the probes call $(if [ -n "$fleet" ]; then tr ',' '\n' <<<"$fleet" | wc -l; else echo 0; fi) fleet members (GET /probes lists them)"

if [ -z "$url" ]; then
  log "deployed; no workers.dev URL in wrangler's output (a custom domain?): check it with"
  log "  node scripts/check-deploy.mjs https://<your host>"
  exit 0
fi
log "deployed: $url"
[ "${KVBENCH_DEPLOY_CHECK:-1}" = 0 ] || BENCH_TOKEN="$token" node scripts/check-deploy.mjs "$url"

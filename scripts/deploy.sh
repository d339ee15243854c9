#!/usr/bin/env bash
# `npm run deploy` (after `npx wrangler login`, or with CLOUDFLARE_API_TOKEN and
# CLOUDFLARE_ACCOUNT_ID set): works the same in a terminal, a pipe and CI — nothing relies on
# wrangler's interactive id write-back, and wrangler.toml is never written to. In order:
#  1. builds both workers;
#  2. finds or creates the account's resources by name — the KV namespace, D1 database and R2
#     bucket of wrangler.toml (and the bucket's lifecycle rule, the backstop that deletes the
#     benchmark's objects a day after their last write), and the Hyperdrive configuration when
#     POSTGRES_URL is given — and writes the main worker's deploy config with their ids
#     (scripts/resources.mjs → $KVBENCH_DEPLOY_DIR/kvbench.jsonc);
#  3. deploys the report worker, then the benchmark worker from that config;
#  4. applies the D1 migrations (the table and its expiry index);
#  5. deploys the fleet (the benchmark worker once per placement region of
#     crates/core/fleet-regions.json; FLEET_REGIONS=none|N|region,... chooses fewer), and tells
#     the main worker's probes where the members are (the FLEET secret);
#  6. checks the result at its URL (scripts/check-deploy.mjs; KVBENCH_DEPLOY_CHECK=0 skips it).
# Before any of it, the inputs are checked (scripts/deploy-inputs.mjs): FLEET_REGIONS, BENCH_TOKEN
# and POSTGRES_URL — a bad one stops the deploy before it builds, creates or uploads anything,
# naming the variable and never quoting a secret. Every wrangler call has a deadline
# (KVBENCH_STEP_TIMEOUT_S, 300 s by default) and a deadline missed names its step. A worker with
# workers_dev must come back with a workers.dev URL of the account's subdomain, or the deploy fails.
# A failed step stops the deploy with a message naming it; running it again redoes every step
# (each is idempotent) and creates nothing twice. Members of an earlier deploy that FLEET_REGIONS
# no longer selects are left deployed and named (the probes stop calling them; delete them with
# `npx wrangler delete --name <worker>`).
#
# Never open: every worker with a URL is deployed with BENCH_TOKEN in the same upload
# (`--secrets-file`): the one from the environment, else the one kept in
# $KVBENCH_DEPLOY_DIR/bench-token, else a new one kept there (mode 600). The stores' secrets
# (UPSTASH_REDIS_REST_URL, UPSTASH_REDIS_REST_TOKEN, DENO_KV_URL, DENO_KV_ACCESS_TOKEN, REDIS_URL,
# POSTGRES_URL) go to the workers from the environment (wrangler cannot read a secret back); a
# store whose secrets are not given is "not configured".
# KVBENCH_DEPLOY_DIR: where the deploy's state lives (default .fleet, git-ignored).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
export WRANGLER_SEND_METRICS=false

FLEET_DIR="${KVBENCH_DEPLOY_DIR:-$ROOT/.fleet}"
mkdir -p "$FLEET_DIR"
chmod 700 "$FLEET_DIR"
FLEET_DIR="$(cd "$FLEET_DIR" && pwd)"
TOKEN_FILE="$FLEET_DIR/bench-token"
# The token as given, never rewritten: one with whitespace or a character a header cannot carry
# is refused below. The kept file's trailing newline is the file's, not the token's.
if [ -n "${BENCH_TOKEN:-}" ]; then
  token=$BENCH_TOKEN
  token_from="the environment"
elif [ -s "$TOKEN_FILE" ]; then
  token=$(cat "$TOKEN_FILE")
  token_from=$TOKEN_FILE
  log "BENCH_TOKEN: the one kept in $TOKEN_FILE"
else
  token=$(node -e 'console.log(require("crypto").randomBytes(24).toString("base64url"))')
  (umask 077; printf '%s\n' "$token" >"$TOKEN_FILE")
  token_from=$TOKEN_FILE
  log "BENCH_TOKEN: made a new one, kept in $TOKEN_FILE (mode 600): send it as 'Authorization: Bearer <token>'"
fi
BENCH_TOKEN="$token" KVBENCH_TOKEN_FROM="$token_from" node scripts/deploy-inputs.mjs ||
  die "the deploy's inputs are refused (above); nothing was built, created or uploaded"

[ "${KVBENCH_SKIP_SETUP:-}" = 1 ] || bash scripts/setup.sh
export KVBENCH_SKIP_SETUP=1

# Each wrangler call's deadline, in seconds: an API that never answers fails the step.
STEP_TIMEOUT_S="${KVBENCH_STEP_TIMEOUT_S:-300}"
[[ "$STEP_TIMEOUT_S" =~ ^[1-9][0-9]{0,4}$ ]] || die "KVBENCH_STEP_TIMEOUT_S: expected whole seconds from 1 to 99999"
export KVBENCH_STEP_TIMEOUT_S=$STEP_TIMEOUT_S
# wrangler_within ARGS...: wrangler, stopped (with its children) at the deadline; exits 124 or
# 137 (timed_out) when it was.
wrangler_within() {
  timeout --kill-after=10 "$STEP_TIMEOUT_S" wrangler "$@"
}
timed_out() { [ "$1" = 124 ] || [ "$1" = 137 ]; }

wrangler_within whoami >/dev/null 2>&1 </dev/null ||
  die "not logged in to Cloudflare, or its API did not answer in time: run 'npx wrangler login' first (or set CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID)"

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
# run_wrangler WHAT ARGS...: wrangler without a terminal and within its deadline, its output kept
# in $out and shown only when it fails (the last lines), so a failure names its step.
run_wrangler() {
  local what=$1 status=0
  shift
  wrangler_within "$@" >"$out" 2>&1 </dev/null || status=$?
  [ "$status" = 0 ] && return 0
  tail -n 20 "$out" >&2
  timed_out "$status" && die "$what: no answer within $STEP_TIMEOUT_S s (KVBENCH_STEP_TIMEOUT_S); stopped it"
  die "$what failed"
}
# workers_dev_url NAME: the workers.dev URL wrangler printed for the worker NAME (in $out), checked:
# one label of the account's subdomain, not a placeholder of an answer without one.
workers_dev_url() {
  local name=$1 found
  found="$(grep -oE "https://$name\.[A-Za-z0-9.-]+\.workers\.dev" "$out" | head -n 1 || true)"
  [ -n "$found" ] || return 0
  [[ "$found" =~ ^https://$name\.([a-z0-9]([a-z0-9-]*[a-z0-9])?)\.workers\.dev$ ]] &&
    [ "${BASH_REMATCH[1]}" != undefined ] && [ "${BASH_REMATCH[1]}" != null ] ||
    die "the deploy of $name printed $found: the API gave no workers.dev subdomain for the account (register one: Workers & Pages in the dashboard)"
  echo "$found"
}

log "building both workers"
bash scripts/build.sh

# Postgres, when POSTGRES_URL is given: the table (migrations/postgres, applied with psql from
# here) and both Postgres stores added to STORES; the Hyperdrive configuration is one of the
# resources below. Without it both stores are left out (GET / says why: not configured).
# The build every report names (GET /'s `provenance`: the commit, wrangler's and the crates'
# versions), as a plain-text var.
store_vars=(--var "KVBENCH_PROVENANCE:$(node scripts/provenance.mjs deployed)")
if [ -n "${POSTGRES_URL:-}" ]; then
  log "applying the Postgres migrations (migrations/postgres) to POSTGRES_URL"
  bash scripts/postgres.sh migrate "$POSTGRES_URL" ||
    die "the Postgres migration failed: is POSTGRES_URL reachable from this machine, and its user allowed to create a table?"
  store_vars+=(--var "STORES:kv,upstash,denokv,do,d1,r2,cache,redis,postgres,hyperdrive")
fi

log "finding or creating the resources (scripts/resources.mjs)"
MAIN_CONFIG="$FLEET_DIR/kvbench.jsonc"
node scripts/resources.mjs --config wrangler.toml --out "$MAIN_CONFIG" >"$FLEET_DIR/resources.txt" ||
  die "scripts/resources.mjs failed"
while read -r kind binding name id how; do
  log "  $kind $binding: $name ($id, $how)"
done <"$FLEET_DIR/resources.txt"

log "deploying the report worker (crates/report-worker)"
run_wrangler "deploying the report worker" deploy -c crates/report-worker/wrangler.toml

log "deploying the benchmark worker"
secrets_file POSTGRES_URL
run_wrangler "deploying the benchmark worker" deploy -c "$MAIN_CONFIG" --secrets-file "$secrets" ${store_vars[@]+"${store_vars[@]}"}
url="$(workers_dev_url kvbench)"
if [ -z "$url" ] && grep -qE '"workers_dev": *true' "$MAIN_CONFIG"; then
  die "the deploy of the benchmark worker printed no workers.dev URL, and its config has workers_dev = true"
fi

if grep -q '"d1_databases"' "$MAIN_CONFIG"; then
  log "applying the D1 migrations (migrations/)"
  run_wrangler "wrangler d1 migrations apply BENCH_D1 --remote" d1 migrations apply BENCH_D1 --remote -c "$MAIN_CONFIG"
fi

# The fleet: one member per placement region, each with the token and the stores' secrets.
regions="${FLEET_REGIONS:-all}"
fleet=""
previous="$(cut -d' ' -f3 "$FLEET_DIR/members.txt" 2>/dev/null || true)"
: >"$FLEET_DIR/members.next"
if [ "$regions" != none ] && [ "$regions" != 0 ]; then
  node scripts/fleet.mjs --from "$MAIN_CONFIG" --regions="$regions" --out "$FLEET_DIR/wrangler.jsonc" >"$FLEET_DIR/members.next" ||
    die "scripts/fleet.mjs failed"
  log "deploying the fleet: $(wc -l <"$FLEET_DIR/members.next") members (FLEET_REGIONS=$regions)"
  secrets_file UPSTASH_REDIS_REST_URL UPSTASH_REDIS_REST_TOKEN DENO_KV_URL DENO_KV_ACCESS_TOKEN REDIS_URL POSTGRES_URL
  while read -r env region name; do
    log "  $region -> $name"
    run_wrangler "deploying fleet member $name ($region)" deploy -c "$FLEET_DIR/wrangler.jsonc" --env "$env" --secrets-file "$secrets" ${store_vars[@]+"${store_vars[@]}"}
    member_url="$(workers_dev_url "$name")"
    [ -n "$member_url" ] || die "no workers.dev URL in the deploy of $name (workers_dev is on in its config)"
    fleet="${fleet:+$fleet,}$region=$member_url"
  done <"$FLEET_DIR/members.next"
fi
# The main worker's probes call the members; with none, the FLEET secret is deleted (when the
# worker has one: `secret list` first, so a missing one is not an error to ignore).
if [ -n "$fleet" ]; then
  printf '%s' "$fleet" >"$secrets"
  status=0
  wrangler_within secret put FLEET -c "$MAIN_CONFIG" <"$secrets" >"$out" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    tail -n 20 "$out" >&2
    timed_out "$status" && die "wrangler secret put FLEET: no answer within $STEP_TIMEOUT_S s (KVBENCH_STEP_TIMEOUT_S); stopped it"
    die "wrangler secret put FLEET failed"
  fi
else
  run_wrangler "wrangler secret list" secret list -c "$MAIN_CONFIG" --format json
  if node -e 'const l = JSON.parse(require("fs").readFileSync(0, "utf8").replace(/^[^[]*/s, "")); process.exit(l.some((s) => s.name === "FLEET") ? 0 : 1)' <"$out"; then
    CI=1 run_wrangler "wrangler secret delete FLEET" secret delete FLEET -c "$MAIN_CONFIG"
  fi
fi
mv "$FLEET_DIR/members.next" "$FLEET_DIR/members.txt"
log "the probes call $(if [ -n "$fleet" ]; then tr ',' '\n' <<<"$fleet" | wc -l; else echo 0; fi) fleet members (GET /probes lists them)"
# Members of the previous deploy that are not in this one: still deployed, no longer called.
dropped="$(comm -23 <(sort <<<"$previous" | sed '/^$/d') <(cut -d' ' -f3 "$FLEET_DIR/members.txt" | sort))"
if [ -n "$dropped" ]; then
  log "left deployed, no longer called by the probes (delete each with 'npx wrangler delete --name <worker>'): $(tr '\n' ' ' <<<"$dropped")"
fi

if [ -z "$url" ]; then
  log "deployed; no workers.dev URL in wrangler's output (a custom domain?): check it with"
  log "  node scripts/check-deploy.mjs https://<your host>"
  exit 0
fi
log "deployed: $url"
[ "${KVBENCH_DEPLOY_CHECK:-1}" = 0 ] || BENCH_TOKEN="$token" node scripts/check-deploy.mjs "$url"

#!/usr/bin/env bash
# `npm run dev`: the whole local stack in the foreground — redis-server, upstash-gateway, denokv,
# a private PostgreSQL and `wrangler dev` on 127.0.0.1:8787 with its local KV, Durable Objects, D1,
# R2, Cache API and Hyperdrive (a direct connection to that PostgreSQL, as `npm run bench` binds
# it) — until Ctrl-C or SIGTERM, which stop every process it started (by PID) and nothing else.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/scripts/stack.sh"
cd "$ROOT"

PORT=${KVBENCH_PORT:-8787}
GATEWAY=${KVBENCH_GATEWAY_PORT:-8079}
REDIS=${KVBENCH_REDIS_PORT:-6390}
DENOKV=${KVBENCH_DENOKV_PORT:-4512}
POSTGRES=${KVBENCH_POSTGRES_PORT:-4513}
# KVBENCH_STACK_DIR: another state dir (the e2e test runs its own stack beside a user's).
DIR=${KVBENCH_STACK_DIR:-$ROOT/.stack/dev}
LOCK="$DIR.lock"

mkdir -p "$(dirname "$DIR")"
if [ -f "$LOCK" ] && kill -0 "$(cat "$LOCK")" 2>/dev/null; then
  die "the dev stack is already running (pid $(cat "$LOCK")); stop it with Ctrl-C in its terminal or 'kill $(cat "$LOCK")'"
fi
echo $$ >"$LOCK"

stopped=0
cleanup() {
  [ "$stopped" = 1 ] && return
  stopped=1
  log "stopping the stack"
  stack_stop
  rm -f "$LOCK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Without PostgreSQL the stack still runs, without the two Postgres stores (postgres_installed below).
KVBENCH_POSTGRES=optional bash scripts/setup.sh
export KVBENCH_SKIP_SETUP=1
# KVBENCH_GATEWAY_BIN: a gateway already built (the e2e test gives npm test's debug build); else
# the optimised one, built here.
if [ -z "${KVBENCH_GATEWAY_BIN:-}" ]; then
  log "building the gateway"
  cargo build --profile native -p upstash-gateway --locked --quiet
fi
bash scripts/build.sh

stack_init "$DIR"
start_redis "$REDIS"
start_gateway "$GATEWAY"
start_denokv "$DENOKV"
# The postgres store's POSTGRES_URL and the hyperdrive store's BENCH_HYPERDRIVE, in the worker and
# the fleet members; a machine without PostgreSQL runs the rest.
if pg_missing=$(postgres_installed 2>&1); then
  start_postgres "$POSTGRES"
  PG_LINE="127.0.0.1:$POSTGRES               (the worker's POSTGRES_URL and BENCH_HYPERDRIVE, a direct connection; password in $DIR/worker.env)"
else
  log "PostgreSQL skipped: ${pg_missing#scripts/postgres.sh: } — the postgres and hyperdrive stores answer not_configured"
  PG_LINE="not started: PostgreSQL is not installed (postgres and hyperdrive answer not_configured)"
fi
apply_d1_migrations
# A local fleet: KVBENCH_FLEET members (default 3, 0 for none), each the built benchmark worker
# in a workerd of its own on a free loopback port, which the probes call like placed members.
FLEET_N=${KVBENCH_FLEET:-3}
[[ "$FLEET_N" =~ ^[0-9]+$ ]] && [ "$FLEET_N" -le 20 ] || die "KVBENCH_FLEET: expected 0 to 20 local members, got '$FLEET_N'"
FLEET=""
MEMBER_PORTS=()
# Where code ran: a stand-in of Cloudflare's trace (scripts/trace-standin.mjs) tells the main
# worker's hint probes LOC and each member a colo of its own (local-1 L01, …), so the path that
# asks it runs here as deployed (docs/probes.md, "How place is witnessed").
TRACE=$(free_port)
while [[ " $PORT $GATEWAY $REDIS $DENOKV $POSTGRES " == *" $TRACE "* ]]; do TRACE=$(free_port); done
TRACE_COLOS=("main=LOC")
for i in $(seq "$FLEET_N"); do TRACE_COLOS+=("local-$i=L$(printf %02d "$i")"); done
spawn trace node "$ROOT/scripts/trace-standin.mjs" --port "$TRACE" "${TRACE_COLOS[@]}"
wait_port "$TRACE" "the trace stand-in" 50
trace_url() { echo "http://127.0.0.1:$TRACE/$1/cdn-cgi/trace"; }
for i in $(seq "$FLEET_N"); do
  # Distinct from the members started just before, which may not listen yet.
  member_port=$(free_port)
  while [[ " ${MEMBER_PORTS[*]:-} $PORT $GATEWAY $REDIS $DENOKV $POSTGRES $TRACE " == *" $member_port "* ]]; do member_port=$(free_port); done
  STACK_EXTRA_ENV="${STACK_EXTRA_ENV:+$STACK_EXTRA_ENV
}PROBE_COLO_URL=$(trace_url "local-$i")" start_member "local-$i" "$member_port"
  MEMBER_PORTS+=("$member_port")
  FLEET="${FLEET:+$FLEET,}local-$i=http://127.0.0.1:$member_port"
done
[ "$FLEET_N" = 0 ] || log "fleet: $FLEET_N local members ($FLEET)"
# The probes on a short interval (KVBENCH_PROBE_EVERY seconds, default 10; KVBENCH_PROBES=off
# leaves them stopped); their colo is the trace stand-in's.
PROBE_EVERY=${KVBENCH_PROBE_EVERY:-10}
STACK_EXTRA_ENV="${STACK_EXTRA_ENV:+$STACK_EXTRA_ENV
}PROBE_EVERY=$PROBE_EVERY
PROBE_BUDGET_USD=${PROBE_BUDGET_USD:-1000000}
PROBE_COLO_URL=$(trace_url main)
BENCH_OPEN=${BENCH_OPEN:-true}${FLEET:+
FLEET=$FLEET}"
log "starting wrangler dev (builds the worker, ~20 s)"
start_wrangler "$PORT"
for i in $(seq "$FLEET_N"); do
  wait_member "local-$i" "${MEMBER_PORTS[$((i - 1))]}"
done
if [ "${KVBENCH_PROBES:-on}" != off ]; then
  curl -fsS -X POST "http://127.0.0.1:$PORT/probes/start" >/dev/null &&
    log "probes started every ${PROBE_EVERY} s: GET http://127.0.0.1:$PORT/probes, /probes/answers" ||
    log "could not start the probes (POST /probes/start)"
fi

cat >&2 <<MSG

  worker          http://127.0.0.1:$PORT/test      (local KV, DO, D1, R2 in $DIR/wrangler-state)
  upstash-gateway http://127.0.0.1:$GATEWAY        (token in $DIR/worker.env)
  redis-server    127.0.0.1:$REDIS               (no persistence; also the worker's REDIS_URL)
  denokv          http://127.0.0.1:$DENOKV        (SQLite in $DIR; token in $DIR/worker.env)
  postgres        $PG_LINE
  fleet           ${FLEET:-none}   (KVBENCH_FLEET=$FLEET_N local members)
  trace stand-in  http://127.0.0.1:$TRACE/<name>/cdn-cgi/trace   (${TRACE_COLOS[*]})
  logs            $DIR/*.log
$(if [ -n "${KVBENCH_INSPECTOR_PORT:-}" ]; then
  echo "  devtools        127.0.0.1:$INSPECTOR_PORT  (KVBENCH_INSPECTOR_PORT; no auth: loopback only)"
fi)

  Try:  curl -s 'http://127.0.0.1:$PORT/test?key=1' ; curl -s 'http://127.0.0.1:$PORT/test?key=1'
        curl -s http://127.0.0.1:$PORT/probes ; curl -s http://127.0.0.1:$PORT/probes/answers
  Ctrl-C stops everything.

MSG

# Stay up while every service is and the worker answers; stop the whole stack if one of them
# exits, or if the worker has not answered /healthz for STACK_HEALTH_DEAD_S (120) seconds while
# no build ran — a slow answer under load or a rebuild after an edit is not a death
# (scripts/stack.sh, stack_watch). stack_watch also keeps the logs bounded.
while :; do
  stack_watch "http://127.0.0.1:$PORT/healthz"
  sleep 2
done

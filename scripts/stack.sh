# The local stack on real parts, as a library for dev.sh and bench.sh (sourced, not run):
# redis-server (private port, no persistence) → upstash-gateway (Upstash REST), a self-hosted
# denokv (KV Connect, SQLite in the state dir), and the worker (wrangler dev or Miniflare) with its
# local KV, Durable Objects, D1 (migrated), R2 and Cache API; the `redis` store talks RESP to the
# same redis-server as the gateway (its keys are namespaced). Every process is started in its own
# process group, its PID recorded under $STACK_DIR, and stopped by that PID only.
# shellcheck shell=bash

STACK_PIDS=()

# stack_init DIR: creates the state dir and per-run tokens.
stack_init() {
  STACK_DIR=$1
  mkdir -p "$STACK_DIR"
  STACK_TOKEN="local-$(node -e 'console.log(require("crypto").randomBytes(16).toString("hex"))')"
  STACK_ADMIN_TOKEN="admin-$(node -e 'console.log(require("crypto").randomBytes(16).toString("hex"))')"
  STACK_DENO_TOKEN="deno-$(node -e 'console.log(require("crypto").randomBytes(16).toString("hex"))')"
  export STACK_DIR STACK_TOKEN STACK_ADMIN_TOKEN STACK_DENO_TOKEN
}

# spawn NAME CMD...: runs CMD in its own session (so its children can be stopped with it),
# logs to $STACK_DIR/NAME.log (appending, so stack_watch can cut a log that grows too long while
# its writer keeps going), remembers its PID.
spawn() {
  local name=$1; shift
  : >"$STACK_DIR/$name.log"
  setsid "$@" >>"$STACK_DIR/$name.log" 2>&1 < /dev/null &
  local pid=$!
  echo "$pid" >"$STACK_DIR/$name.pid"
  STACK_PIDS+=("$name:$pid")
}

require_free_port() {
  if port_open "$1"; then
    die "127.0.0.1:$1 ($2) is already in use — is another stack running? (set ${3} to use another port)"
  fi
}

# Fails with the tail of a service's log when it died during start.
check_alive() {
  local name=$1 pid
  pid=$(cat "$STACK_DIR/$name.pid")
  if ! kill -0 "$pid" 2>/dev/null; then
    tail -n 20 "$STACK_DIR/$name.log" >&2 || true
    die "$name exited during start (log: $STACK_DIR/$name.log)"
  fi
}

start_redis() {
  REDIS_PORT=$1
  require_free_port "$REDIS_PORT" redis-server KVBENCH_REDIS_PORT
  spawn redis redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$STACK_DIR" --protected-mode yes
  for _ in $(seq 100); do
    if redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then return 0; fi
    check_alive redis
    sleep 0.1
  done
  die "redis-server did not answer PING on 127.0.0.1:$REDIS_PORT"
}

start_gateway() {
  GATEWAY_PORT=$1; shift
  require_free_port "$GATEWAY_PORT" upstash-gateway KVBENCH_GATEWAY_PORT
  UPSTASH_REDIS_REST_TOKEN="$STACK_TOKEN" GATEWAY_ADMIN_TOKEN="$STACK_ADMIN_TOKEN" \
    spawn gateway "${KVBENCH_GATEWAY_BIN:-$ROOT/target/native/upstash-gateway}" --listen "127.0.0.1:$GATEWAY_PORT" \
    --redis-url "redis://127.0.0.1:$REDIS_PORT" "$@"
  wait_port "$GATEWAY_PORT" upstash-gateway 150 check_alive gateway
  check_alive gateway
}

# Self-hosted Deno KV (KV Connect) with a SQLite file in the state dir. The access token goes
# through the environment (denokv reads DENO_KV_ACCESS_TOKEN), not the command line, where any
# local user could read it in `ps`.
start_denokv() {
  DENOKV_PORT=$1
  require_free_port "$DENOKV_PORT" denokv KVBENCH_DENOKV_PORT
  DENO_KV_ACCESS_TOKEN="$STACK_DENO_TOKEN" \
    spawn denokv denokv --sqlite-path "$STACK_DIR/denokv.sqlite" serve \
    --addr "127.0.0.1:$DENOKV_PORT"
  wait_port "$DENOKV_PORT" denokv 150 check_alive denokv
  check_alive denokv
}

# A private PostgreSQL (scripts/postgres.sh: its own data dir, 127.0.0.1 only, a per-run
# password, the kvbench database migrated) for the `postgres` store, and Miniflare's or
# wrangler's local Hyperdrive binding pointed at it (a direct connection: no pool, no cache).
# Watched by stack_watch and stopped by stack_stop, by the PID it records in the state dir
# (pg_ctl's server, which is not a child of ours: `spawn` does not fit it).
start_postgres() {
  POSTGRES_PORT=$1
  require_free_port "$POSTGRES_PORT" postgres KVBENCH_POSTGRES_PORT
  local password
  password="pg-$(node -e 'console.log(require("crypto").randomBytes(16).toString("hex"))')"
  POSTGRES_URL=$(bash "$ROOT/scripts/postgres.sh" start "$STACK_DIR" "$POSTGRES_PORT" "$password") ||
    die "PostgreSQL did not start (bash scripts/setup.sh installs it)"
  STACK_POSTGRES=1
}

# start_replicas LAG_MS: read regions with a known lag, real replication behind it. A Redis replica
# of the stack's redis-server (replicaof) whose link to it runs through scripts/delay-proxy.mjs, so
# every write reaches it LAG_MS late; a second gateway, the read region, that answers single reads
# from the replica and sends writes to the primary (--read-url), as Upstash's read regions do; and,
# with the stack's PostgreSQL, a hot standby applying each commit LAG_MS after the primary made it
# (recovery_min_apply_delay). A member started with STACK_READ_REGION=1 reads through them.
start_replicas() {
  local lag=$1 link
  link=$(free_port)
  spawn replica-link node "$ROOT/scripts/delay-proxy.mjs" --port "$link" --target "127.0.0.1:$REDIS_PORT" --delay "$lag"
  wait_port "$link" "the replica's delaying link" 100 check_alive replica-link
  REPLICA_PORT=$(free_port)
  spawn redis-replica redis-server --port "$REPLICA_PORT" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$STACK_DIR" --dbfilename replica.rdb --protected-mode yes --replicaof 127.0.0.1 "$link"
  # The handshake crosses the link a few times: bounded by 30 s plus a few lags.
  local tries=$((300 + lag / 20))
  for _ in $(seq "$tries"); do
    if redis-cli -p "$REPLICA_PORT" info replication 2>/dev/null | grep -q '^master_link_status:up'; then break; fi
    check_alive redis-replica
    sleep 0.1
  done
  redis-cli -p "$REPLICA_PORT" info replication 2>/dev/null | grep -q '^master_link_status:up' ||
    die "the Redis replica on 127.0.0.1:$REPLICA_PORT did not sync with its primary"
  READ_GATEWAY_PORT=$(free_port)
  UPSTASH_REDIS_REST_TOKEN="$STACK_TOKEN" \
    spawn gateway-read "${KVBENCH_GATEWAY_BIN:-$ROOT/target/native/upstash-gateway}" --listen "127.0.0.1:$READ_GATEWAY_PORT" \
    --redis-url "redis://127.0.0.1:$REDIS_PORT" --read-url "redis://127.0.0.1:$REPLICA_PORT"
  wait_port "$READ_GATEWAY_PORT" "the read region's gateway" 150 check_alive gateway-read
  if [ -n "${POSTGRES_URL:-}" ]; then
    STANDBY_URL=$(bash "$ROOT/scripts/postgres.sh" standby "$STACK_DIR/standby" "$POSTGRES_URL" "$(free_port)" "$lag") ||
      die "the PostgreSQL standby did not start"
    STACK_STANDBY=1
  fi
  REPLICA_LAG_MS=$lag
}

# True when this machine has a PostgreSQL server and psql; else says what is missing (stderr).
postgres_installed() {
  bash "$ROOT/scripts/postgres.sh" check
}

# The worker's environment: the local services, as a dotenv file (wrangler hides its values).
write_worker_env() {
  # A file per reader (worker.env, member-<label>.env): a member's node reads its file a moment
  # after it is spawned, and the next start must not rewrite it under it (each member has its
  # own PROBE_COLO_URL).
  local file="$STACK_DIR/${1:-worker}.env"
  umask 077
  local provenance gateway=$GATEWAY_PORT postgres=${POSTGRES_URL:-}
  provenance=$(node "$ROOT/scripts/provenance.mjs" local) || die "scripts/provenance.mjs failed"
  # A member in a read region (start_replicas) reads Upstash and PostgreSQL through the replicas.
  if [ -n "${STACK_READ_REGION:-}" ]; then
    gateway=$READ_GATEWAY_PORT
    postgres=${STANDBY_URL:-$postgres}
  fi
  {
    # The build the reports name (GET /'s provenance), for wrangler dev as for Miniflare.
    echo "KVBENCH_PROVENANCE=$provenance"
    echo "UPSTASH_REDIS_REST_URL=http://127.0.0.1:$gateway"
    echo "UPSTASH_REDIS_REST_TOKEN=$STACK_TOKEN"
    if [ -n "${REDIS_PORT:-}" ]; then
      # The same database over TCP: `redis` and `upstash` compare the two protocols.
      echo "REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
    fi
    if [ -n "${DENOKV_PORT:-}" ]; then
      echo "DENO_KV_URL=http://127.0.0.1:$DENOKV_PORT"
      echo "DENO_KV_ACCESS_TOKEN=$STACK_DENO_TOKEN"
    fi
    if [ -n "$postgres" ]; then
      echo "POSTGRES_URL=$postgres"
      # wrangler's name for a local Hyperdrive binding's database (scripts/worker-options.mjs
      # reads the same name for Miniflare).
      echo "CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_BENCH_HYPERDRIVE=$postgres"
      # Both Postgres stores are measured next to the default ones (STORES= overrides).
      echo "STORES=kv,upstash,denokv,do,d1,r2,cache,redis,postgres,hyperdrive"
    fi
  } >"$file"
  [ -z "${STACK_EXTRA_ENV:-}" ] || printf '%s\n' "$STACK_EXTRA_ENV" >>"$file"
  WORKER_ENV_FILE=$file
}

# D1's table (migrations/) in wrangler dev's local database under the state dir: run before
# start_wrangler (Miniflare's server applies them itself, scripts/serve-worker.mjs).
apply_d1_migrations() {
  wrangler d1 migrations apply BENCH_D1 --local --persist-to "$STACK_DIR/wrangler-state" \
    >"$STACK_DIR/d1-migrations.log" 2>&1 </dev/null ||
    { tail -n 20 "$STACK_DIR/d1-migrations.log" >&2; die "wrangler d1 migrations apply failed"; }
}

# wrangler dev with its local bindings (KV, Durable Objects, D1, R2) persisted under the state dir,
# and BENCH_HYPERDRIVE on the stack's PostgreSQL when it runs one (what `npm run dev` runs).
# Its devtools inspector runs code in the worker and has no auth. wrangler's CLI (4.86 through 4.164) cannot turn
# it off (only its programmatic API can), and by default it takes the well-known 127.0.0.1:9229.
# So: KVBENCH_INSPECTOR_PORT when set (to attach devtools), else a random free loopback port that
# nothing advertises. workerd's own inspector, which wrangler's proxy attaches to, stays on an
# ephemeral loopback port either way (wrangler has no switch for it).
start_wrangler() {
  WORKER_PORT=$1
  require_free_port "$WORKER_PORT" "wrangler dev" KVBENCH_PORT
  INSPECTOR_PORT=${KVBENCH_INSPECTOR_PORT:-$(free_port)}
  require_free_port "$INSPECTOR_PORT" "wrangler dev's inspector" KVBENCH_INSPECTOR_PORT
  write_worker_env
  # The benchmark worker's config: wrangler.toml plus, with the stack's PostgreSQL, the
  # BENCH_HYPERDRIVE binding wrangler.toml leaves to npm run deploy (scripts/dev-config.mjs), in
  # the state dir. wrangler reads the binding's local database from the variable below, never
  # from that file. KVBENCH_WRANGLER_JS: another wrangler entry point (tests use a stand-in).
  local config="$STACK_DIR/kvbench.jsonc"
  node "$ROOT/scripts/dev-config.mjs" --config "$ROOT/wrangler.toml" --out "$config" \
    ${POSTGRES_URL:+--hyperdrive} || die "scripts/dev-config.mjs failed"
  # Both workers: the benchmark worker (first: it serves the port) and the report worker behind
  # its REPORT binding (GET /report).
  CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_BENCH_HYPERDRIVE="${POSTGRES_URL:-}" \
    spawn worker node "${KVBENCH_WRANGLER_JS:-$ROOT/node_modules/wrangler/bin/wrangler.js}" \
    dev -c "$config" -c crates/report-worker/wrangler.toml \
    --local --ip 127.0.0.1 --port "$WORKER_PORT" \
    --inspector-ip 127.0.0.1 --inspector-port "$INSPECTOR_PORT" \
    --show-interactive-dev-session=false --env-file "$WORKER_ENV_FILE" \
    --persist-to "$STACK_DIR/wrangler-state"
  wait_port "$WORKER_PORT" "wrangler dev" 600 check_alive worker
  check_alive worker
}

# The prebuilt bundle under Miniflare's own HTTP server: ~4x the throughput of wrangler dev's
# proxy, so the benchmark measures the stores rather than the dev tooling.
start_miniflare() {
  WORKER_PORT=$1
  require_free_port "$WORKER_PORT" worker KVBENCH_PORT
  write_worker_env
  spawn worker node "$ROOT/scripts/serve-worker.mjs" --port "$WORKER_PORT" --env-file "$WORKER_ENV_FILE"
  wait_port "$WORKER_PORT" worker 300 check_alive worker
  check_alive worker
}

# start_member LABEL PORT: one local fleet member — the member build (build-member/) in a workerd
# of its own (scripts/serve-worker.mjs --member), as a placed member runs it, on 127.0.0.1:PORT, with the stack's
# services. The probes call it over HTTP like a placed member (docs/probes.md: "The fleet").
# It only starts the member (each reads an env file of its own):
# wait_member waits for it, so several members and wrangler start side by side.
start_member() {
  local label=$1 port=$2
  require_free_port "$port" "fleet member $label" KVBENCH_FLEET
  # The probes call a member's /test with the main worker's BENCH_TOKEN, and the local stack has
  # none: a member is open like the stack (BENCH_OPEN, default true as npm run dev's; the
  # caller's STACK_EXTRA_ENV, written after it, wins), else every call would be a 403.
  local STACK_EXTRA_ENV="BENCH_OPEN=${BENCH_OPEN:-true}${STACK_EXTRA_ENV:+
$STACK_EXTRA_ENV}"
  write_worker_env "member-$label"
  spawn "member-$label" node "$ROOT/scripts/serve-worker.mjs" --port "$port" --env-file "$WORKER_ENV_FILE" --member
}

# start_fresh_members WRITER_PORT READER_PORT: the freshness rounds' two vantage points in one
# workerd, sharing its KV, D1, R2 and Durable Objects as one account's workers do: local-1 on the
# primaries, local-2 in the read region (start_replicas first). Wait for each with wait_member.
start_fresh_members() {
  local writer=$1 reader=$2 writer_env
  local STACK_EXTRA_ENV="BENCH_OPEN=${BENCH_OPEN:-true}
PROBE_COLO_URL=none"
  write_worker_env member-local-1
  writer_env=$WORKER_ENV_FILE
  STACK_READ_REGION=1 write_worker_env member-local-2
  spawn fresh-members node "$ROOT/scripts/serve-worker.mjs" --port "$writer" --env-file "$writer_env" \
    --member --also "$reader:$WORKER_ENV_FILE"
  wait_port "$writer" "the freshness members" 900 check_alive fresh-members
  wait_port "$reader" "the freshness members" 900 check_alive fresh-members
}

wait_member() {
  local label=$1 port=$2
  # 180 s: three members' workerd start at once, and on 2 cores beside another build (a fresh
  # clone's npm test running next to this one) 60 s was not always enough.
  wait_port "$port" "fleet member $label" 900 check_alive "member-$label"
  check_alive "member-$label"
}

# Stops every process this stack started, newest first: SIGTERM to its process group, then
# SIGKILL after a bounded wait.
stack_stop() {
  local entry name pid i
  for ((i = ${#STACK_PIDS[@]} - 1; i >= 0; i--)); do
    entry=${STACK_PIDS[$i]}; name=${entry%%:*}; pid=${entry##*:}
    # The whole session group: a service's children (wrangler's workerd) outlive their leader.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    # Whatever is left of the group is killed, whether or not its leader still lives.
    kill -KILL -- "-$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$STACK_DIR/$name.pid"
  done
  STACK_PIDS=()
  if [ -n "${STACK_STANDBY:-}" ]; then
    bash "$ROOT/scripts/postgres.sh" stop "$STACK_DIR/standby" || true
    STACK_STANDBY=""
  fi
  if [ -n "${STACK_POSTGRES:-}" ]; then
    bash "$ROOT/scripts/postgres.sh" stop "$STACK_DIR" || true
    STACK_POSTGRES=""
  fi
}

# Logs are cut to their last STACK_LOG_KEEP bytes when they pass STACK_LOG_MAX (a service that
# logs an error per request must not fill the disk).
STACK_LOG_MAX=${STACK_LOG_MAX:-67108864}
STACK_LOG_KEEP=${STACK_LOG_KEEP:-8388608}
# The watchdog's patience with a live worker that does not answer (seconds without one answer to
# HEALTH_URL, not counting time while a build runs). /healthz touches no store: a worker that is
# merely busy — saturated by a benchmark, on a machine another job keeps busy — answers it within
# seconds, since its isolate serves requests concurrently and every /test span ends within its
# timeout (TIMEOUT_MS, 10 s by default). Two minutes without one answer is no queue: it is a hung
# isolate (workerd gives up on code that hangs much sooner) or a wedged proxy. A rebuild does not
# count: wrangler holds requests until the new bundle is loaded, and a release build with
# wasm-opt takes minutes on two busy cores.
STACK_HEALTH_DEAD_S=${STACK_HEALTH_DEAD_S:-120}
# How long one look waits for its answer.
STACK_HEALTH_TIMEOUT_S=${STACK_HEALTH_TIMEOUT_S:-10}
# Where scripts/build.sh lists the builds that run (one file per build, named by its PID).
STACK_BUILDS=${KVBENCH_BUILDS:-$ROOT/.stack/builds}
# Milliseconds: whole seconds would count two looks 1.1 s apart as 2 s when they straddle a tick.
STACK_UNANSWERED_MS=0
STACK_LAST_LOOK=

# True while a build of a worker runs (a listed build whose process lives). A listing left by a
# build that was killed is removed.
stack_building() {
  local f pid building=1
  for f in "$STACK_BUILDS"/*; do
    [ -f "$f" ] || continue
    pid=$(basename "$f")
    if kill -0 "$pid" 2>/dev/null; then
      building=0
    else
      rm -f "$f"
    fi
  done
  return $building
}

# stack_watch [HEALTH_URL]: one look at the stack. Fails naming the part that died — a process
# gone (at once), or a worker that has not answered HEALTH_URL for STACK_HEALTH_DEAD_S seconds
# while no build ran — and cuts logs that grew too long. A slow answer is an answer.
stack_watch() {
  local health=${1:-} entry name pid log size now
  for entry in "${STACK_PIDS[@]}"; do
    name=${entry%%:*}; pid=${entry##*:}
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$STACK_DIR/$name.log" >&2 || true
      die "$name exited (pid $pid; log: $STACK_DIR/$name.log): stopping the stack"
    fi
    log="$STACK_DIR/$name.log"
    size=$(stat -c %s "$log" 2>/dev/null || echo 0)
    if [ "$size" -gt "$STACK_LOG_MAX" ]; then
      tail -c "$STACK_LOG_KEEP" "$log" >"$log.cut" && {
        printf '[kvbench] log cut: it passed %s bytes; the last %s follow\n' "$STACK_LOG_MAX" "$STACK_LOG_KEEP"
        cat "$log.cut"
      } >"$log" || true
      rm -f "$log.cut"
    fi
  done
  if [ -n "${STACK_POSTGRES:-}" ]; then
    pid=$(cat "$STACK_DIR/postgres.pid" 2>/dev/null || true)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$(cat "$STACK_DIR/postgres.data" 2>/dev/null)/server.log" >&2 2>/dev/null || true
      die "postgres exited (pid ${pid:-unknown}): stopping the stack"
    fi
  fi
  [ -n "$health" ] || return 0
  if curl -fsS --max-time "$STACK_HEALTH_TIMEOUT_S" -o /dev/null "$health" 2>/dev/null; then
    STACK_UNANSWERED_MS=0
    STACK_LAST_LOOK=$(date +%s%3N)
    return 0
  fi
  now=$(date +%s%3N)
  # The time since the previous look counts against the worker only when no build ran at
  # either end of it.
  if stack_building; then
    STACK_LAST_LOOK=
    return 0
  fi
  if [ -n "$STACK_LAST_LOOK" ]; then
    STACK_UNANSWERED_MS=$((STACK_UNANSWERED_MS + now - STACK_LAST_LOOK))
  fi
  STACK_LAST_LOOK=$now
  if [ "$STACK_UNANSWERED_MS" -ge "$((STACK_HEALTH_DEAD_S * 1000))" ]; then
    die "$health has not answered for $((STACK_UNANSWERED_MS / 1000)) s while no build ran (looks every few seconds, each waiting ${STACK_HEALTH_TIMEOUT_S} s; STACK_HEALTH_DEAD_S=$STACK_HEALTH_DEAD_S) although its processes live: the worker is hung, stopping the stack (logs: $STACK_DIR/*.log)"
  fi
}

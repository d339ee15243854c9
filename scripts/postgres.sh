#!/usr/bin/env bash
# A private PostgreSQL server for the local stack and the tests: Debian's server (installed by
# scripts/setup.sh) in a data directory of its own, on 127.0.0.1 only (no Unix socket), with
# password (SCRAM) authentication, its database `kvbench` migrated (migrations/postgres).
#
#   scripts/postgres.sh start DIR PORT PASSWORD   starts it, prints the postgres:// URL;
#                                                 DIR/postgres.pid holds the server's PID; a
#                                                 start that fails at any step stops the server
#                                                 it started and removes its data
#   scripts/postgres.sh migrate URL               applies migrations/postgres to URL (a URL that
#                                                 cannot be parsed is refused, never printed)
#   scripts/postgres.sh standby DIR PRIMARY_URL PORT LAG_MS
#                                                 a hot standby of the server at PRIMARY_URL
#                                                 (pg_basebackup -R) on PORT that applies each
#                                                 commit LAG_MS after the primary made it
#                                                 (recovery_min_apply_delay); prints its URL;
#                                                 DIR/postgres.pid as for start
#   scripts/postgres.sh stop DIR                  stops it (by that PID) and removes its data
#   scripts/postgres.sh check                     fails, saying what is missing, without a server
#                                                 (initdb, pg_ctl) or psql
#
# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user that
# Debian's package creates, in a data directory under /tmp that it can reach.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() { echo "scripts/postgres.sh: $*" >&2; exit 1; }

bindir() {
  local d
  for d in ${PG_BIN_DIR:+"$PG_BIN_DIR"} /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  done
  die "no PostgreSQL server (initdb, pg_ctl): bash scripts/setup.sh installs Debian's postgresql, or set PG_BIN_DIR"
}

check() {
  bindir >/dev/null
  command -v psql >/dev/null || die "psql is missing: bash scripts/setup.sh installs postgresql-client"
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local dir="$1" port="$2" password="$3" bin
  [ -n "$password" ] || die "start needs a password"
  bin="$(bindir)"
  command -v psql >/dev/null || die "psql is missing: bash scripts/setup.sh installs postgresql-client"
  mkdir -p "$dir"
  # KVBENCH_PG_DATA_ROOT: where the data directory goes (/tmp; a test gives its own, so that what
  # a concurrent run makes is not taken for its own). The server's user must be able to reach it.
  START_DATA="$(mktemp -d "${KVBENCH_PG_DATA_ROOT:-/tmp}/kvbench-postgres.XXXXXX")"
  START_DIR="$dir"
  # Any step that fails from here on (initdb, the server, the database, a migration) stops the
  # server it started and removes its data: a failed start leaves nothing running.
  trap 'start_failed' EXIT
  local data="$START_DATA"
  echo "$data" >"$dir/postgres.data"
  chmod 755 "$data"
  [ "$(id -u)" = 0 ] && chown postgres "$data"
  printf '%s\n' "$password" >"$data/pwfile"
  [ "$(id -u)" = 0 ] && chown postgres "$data/pwfile"
  as_owner "$bin/initdb" --no-sync -D "$data/db" -U kvbench --pwfile="$data/pwfile" \
    --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$data/initdb.log" 2>&1 ||
    die "initdb failed: $(tail -5 "$data/initdb.log")"
  rm -f "$data/pwfile"
  as_owner "$bin/pg_ctl" -D "$data/db" -l "$data/server.log" -w -t 60 \
    -o "-p $port -h 127.0.0.1 -c unix_socket_directories=" start >/dev/null ||
    die "the server did not start: $(tail -5 "$data/server.log" 2>/dev/null)"
  head -1 "$data/db/postmaster.pid" >"$dir/postgres.pid"
  local url="postgres://kvbench:$password@127.0.0.1:$port"
  psql_url "$url/postgres" -c "CREATE DATABASE kvbench" >/dev/null || die "CREATE DATABASE kvbench failed"
  migrate "$url/kvbench" || die "the migrations (migrations/postgres) failed"
  trap - EXIT
  echo "$url/kvbench?sslmode=disable"
}

standby() {
  local dir="$1" primary="$2" port="$3" lag_ms="$4" bin parsed k v
  bin="$(bindir)"
  [[ "$lag_ms" =~ ^[0-9]+$ ]] || die "standby: LAG_MS must be a whole number of milliseconds"
  mkdir -p "$dir"
  START_DATA="$(mktemp -d "${KVBENCH_PG_DATA_ROOT:-/tmp}/kvbench-postgres.XXXXXX")"
  START_DIR="$dir"
  trap 'start_failed' EXIT
  local data="$START_DATA"
  echo "$data" >"$dir/postgres.data"
  chmod 755 "$data"
  # The primary's parts as libpq variables (never on a command line); its password in a pgpass
  # file the standby keeps using for its replication connection.
  local -A pg=()
  parsed="$(mktemp)"
  PG_URL_IN="$primary" node "$ROOT/scripts/pg-url.mjs" libpq PRIMARY_URL >"$parsed" || { rm -f "$parsed"; exit 2; }
  while IFS='=' read -r -d '' k v; do pg[$k]=$v; done <"$parsed"
  rm -f "$parsed"
  printf '%s:%s:*:%s:%s\n' "${pg[PGHOST]}" "${pg[PGPORT]}" "${pg[PGUSER]}" "${pg[PGPASSWORD]}" >"$data/pgpass"
  chmod 600 "$data/pgpass"
  [ "$(id -u)" = 0 ] && chown postgres "$data" "$data/pgpass"
  as_owner env PGPASSFILE="$data/pgpass" "$bin/pg_basebackup" -h "${pg[PGHOST]}" -p "${pg[PGPORT]}" \
    -U "${pg[PGUSER]}" -D "$data/db" -R -X stream --no-sync >"$data/basebackup.log" 2>&1 ||
    die "pg_basebackup failed: $(tail -5 "$data/basebackup.log")"
  printf "hot_standby = on\nrecovery_min_apply_delay = '%sms'\n" "$lag_ms" >>"$data/db/postgresql.auto.conf"
  as_owner "$bin/pg_ctl" -D "$data/db" -l "$data/server.log" -w -t 60 \
    -o "-p $port -h 127.0.0.1 -c unix_socket_directories=" start >/dev/null ||
    die "the standby did not start: $(tail -5 "$data/server.log" 2>/dev/null)"
  head -1 "$data/db/postmaster.pid" >"$dir/postgres.pid"
  trap - EXIT
  echo "postgres://${pg[PGUSER]}:${pg[PGPASSWORD]}@127.0.0.1:$port/${pg[PGDATABASE]:-kvbench}?sslmode=disable"
}

# The EXIT trap of a start that did not finish: stop what it started (by the PID it recorded, or
# the data directory's postmaster.pid when it failed before recording it) and remove its data.
start_failed() {
  local status=$?
  if [ ! -s "$START_DIR/postgres.pid" ] && [ -s "$START_DATA/db/postmaster.pid" ]; then
    head -1 "$START_DATA/db/postmaster.pid" >"$START_DIR/postgres.pid"
  fi
  stop "$START_DIR"
  rm -rf "$START_DATA"
  exit "$status"
}

# psql on a postgres:// URL without putting the URL on a command line (where ps shows its
# password to every user): its parts go to libpq's variables (PGHOST, PGPASSWORD, PGSSLMODE, ...),
# split by scripts/pg-url.mjs (percent-decoded), and psql gets only the other arguments.
psql_url() {
  local url="$1" k v
  shift
  local -a vars=()
  local parsed
  # scripts/pg-url.mjs refuses a URL it cannot parse naming the variable, never printing it.
  parsed="$(mktemp)"
  PG_URL_IN="$url" node "$ROOT/scripts/pg-url.mjs" libpq "${PG_URL_NAME:-POSTGRES_URL}" >"$parsed" || { rm -f "$parsed"; exit 2; }
  while IFS='=' read -r -d '' k v; do vars+=("$k=$v"); done <"$parsed"
  rm -f "$parsed"
  [ "${#vars[@]}" -gt 0 ] || die "not a postgres:// URL (${PG_URL_NAME:-POSTGRES_URL})"
  env PGCONNECT_TIMEOUT=10 "${vars[@]}" psql -q -v ON_ERROR_STOP=1 "$@"
}

# Applies every migration, in order; each is idempotent (CREATE ... IF NOT EXISTS).
migrate() {
  local f
  for f in "$ROOT"/migrations/postgres/*.sql; do
    psql_url "$1" -f "$f" >/dev/null || return 1
  done
}

stop() {
  local dir="$1" pid data
  pid="$(cat "$dir/postgres.pid" 2>/dev/null || true)"
  data="$(cat "$dir/postgres.data" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid" 2>/dev/null || true # fast shutdown
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  case "$data" in */kvbench-postgres.*) rm -rf "$data" ;; esac
  rm -f "$dir/postgres.pid" "$dir/postgres.data"
}

case "${1:-}" in
  start) [ $# = 4 ] || die "usage: start DIR PORT PASSWORD"; start "$2" "$3" "$4" ;;
  standby) [ $# = 5 ] || die "usage: standby DIR PRIMARY_URL PORT LAG_MS"; standby "$2" "$3" "$4" "$5" ;;
  stop) [ $# = 2 ] || die "usage: stop DIR"; stop "$2" ;;
  migrate) [ $# = 2 ] || die "usage: migrate URL"; migrate "$2" ;;
  check) [ $# = 1 ] || die "usage: check"; check ;;
  *) die "usage: start DIR PORT PASSWORD | standby DIR PRIMARY_URL PORT LAG_MS | stop DIR | migrate URL | check" ;;
esac

#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite, on 127.0.0.1 only.
#
#   scripts/services/postgres.sh start    install the server if missing, initialise, start, wait, print the DSN
#   scripts/services/postgres.sh stop     stop it (the data directory is kept for the next start)
#   scripts/services/postgres.sh status   exit 0 and print the DSN if it runs, exit 3 if not
#
# The DSN lines name no password; a `passfile=` line names the file that holds it (mode 0600).
#
# Environment:
#   ARETL_TEST_PG_PORT       TCP port (default 55432)
#   ARETL_TEST_PG_PASSWORD   password of the superuser `aretl` (default: a random one, made when the
#                            cluster is first set up and kept in <cluster dir>/superuser-password);
#                            changing it re-initialises the data directory on the next start
#   ARETL_TEST_PG_DIR        where the cluster lives (default <repo>/.cache/services/postgres)
#   ARETL_TEST_PG_BINDIR     directory holding initdb/pg_ctl (default: PATH, then /usr/lib/postgresql/*/bin)
#
# The server is ours alone: its own data directory, run as the `postgres` OS user (initdb refuses
# root), password (SCRAM) authentication over TCP, no Unix socket, and durability switched off for
# speed (fsync, synchronous_commit, full_page_writes). The database `aretl` is owned by `aretl`.
# Idempotent: `start` on a running server only prints the DSN. Works from any cwd, needs no stdin.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=lib.sh
source "$repo/scripts/services/lib.sh"
port=${ARETL_TEST_PG_PORT:-55432}
user=aretl
dbname=aretl
host=127.0.0.1
pg_os_user=postgres

log() { echo "postgres.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

# Runs a command as the OS user that owns the cluster (postgres when we are root, else ourselves).
as_pg() {
  if is_root; then
    runuser -u "$pg_os_user" -- "$@"
  else
    "$@"
  fi
}

find_bindir() {
  local d
  if [ -n "${ARETL_TEST_PG_BINDIR:-}" ]; then
    [ -x "$ARETL_TEST_PG_BINDIR/pg_ctl" ] && { echo "$ARETL_TEST_PG_BINDIR"; return 0; }
    return 1
  fi
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    d=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  fi
  # Debian keeps the server binaries off PATH, one directory per major version; take the newest.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -n -r); do
    [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

install_server() {
  is_root || die "PostgreSQL (initdb/pg_ctl) is not installed and we are not root: apt-get install postgresql"
  command -v apt-get >/dev/null || die "PostgreSQL is not installed and apt-get is not available"
  log "installing PostgreSQL from Debian packages (apt-get update + install postgresql)"
  export DEBIAN_FRONTEND=noninteractive
  # Keep the package scripts from starting the distro's own cluster service: we run our own server.
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && made_policy=1
  fi
  local rc=0
  {
    apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql
  } >&2 || rc=$?
  [ "$made_policy" = 1 ] && rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get install postgresql failed (exit $rc)"
  # If the package did start its default cluster anyway, stop it: nothing here needs it.
  if command -v pg_lsclusters >/dev/null 2>&1; then
    pg_lsclusters --no-header 2>/dev/null | while read -r ver name _port status _rest; do
      if [ "$status" = online ]; then
        pg_ctlcluster "$ver" "$name" stop >/dev/null 2>&1 || true
      fi
    done
  fi
}

# The cluster directory: the repo's .cache unless the postgres OS user cannot reach it (a checkout
# under a private home directory), then a per-checkout directory under /var/tmp.
cluster_dir() {
  if [ -n "${ARETL_TEST_PG_DIR:-}" ]; then
    echo "$ARETL_TEST_PG_DIR"; return
  fi
  local d="$repo/.cache/services/postgres"
  if is_root && id "$pg_os_user" >/dev/null 2>&1 && ! runuser -u "$pg_os_user" -- test -x "$repo" 2>/dev/null; then
    d="/var/tmp/aretl-test-postgres-$(printf '%s' "$repo" | sha1sum | cut -c1-12)"
  fi
  echo "$d"
}

base=$(cluster_dir)
data="$base/data"
logfile="$base/postgres.log"
stampfile="$base/.initialized-for"
passfile="$base/superuser-password"

# The superuser's password: the environment's, else the one made for this cluster (random, mode 0600:
# kept beside the cluster, never in the project's files, argv or the DSN lines).
load_password() {
  if [ -n "${ARETL_TEST_PG_PASSWORD:-}" ]; then
    password=$ARETL_TEST_PG_PASSWORD
    return
  fi
  if [ ! -s "$passfile" ]; then
    mkdir -p "$base"
    ( umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > "$passfile" )
  fi
  password=$(cat "$passfile")
}

running_port() {
  # Line 4 of postmaster.pid is the port of a running server.
  [ -f "$data/postmaster.pid" ] && sed -n 4p "$data/postmaster.pid" 2>/dev/null || true
}

is_running() {
  [ -n "${bindir:-}" ] || return 1
  [ -f "$data/PG_VERSION" ] || return 1
  as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

print_dsn() {
  local p=${1:-$port}
  echo "host=$host port=$p dbname=$dbname user=$user"
  echo "postgresql://$user@$host:$p/$dbname"
  if [ -z "${ARETL_TEST_PG_PASSWORD:-}" ]; then echo "passfile=$passfile"; fi
}

client() { # psql over TCP as the superuser
  PGPASSWORD="$password" PGCONNECT_TIMEOUT=5 "$psql" -X -q -v ON_ERROR_STOP=1 \
    -h "$host" -p "$port" -U "$user" "$@"
}

init_cluster() {
  local want=$1
  log "initialising a new cluster in $data"
  if is_running; then as_pg "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null || true; fi
  rm -rf "$data"
  mkdir -p "$data"
  if is_root; then chown -R "$pg_os_user:" "$base"; fi
  chmod 700 "$data"
  local pwfile="$base/.pwfile"
  ( umask 077; printf '%s\n' "$password" > "$pwfile" )
  if is_root; then chown "$pg_os_user:" "$pwfile"; fi
  as_pg "$bindir/initdb" -D "$data" -U "$user" --pwfile="$pwfile" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 \
    -E UTF8 --no-locale --no-sync >"$base/initdb.log" 2>&1 \
    || { rm -f "$pwfile"; cat "$base/initdb.log" >&2; die "initdb failed"; }
  rm -f "$pwfile"
  echo "include_if_exists = 'aretl_test.conf'" >> "$data/postgresql.conf"
  echo "$want" > "$stampfile"
}

write_settings() {
  local f="$data/aretl_test.conf"
  cat > "$f" <<EOF
# Written by scripts/services/postgres.sh on every start. Test-only settings: no durability.
listen_addresses = '$host'
port = $port
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
shared_buffers = 128MB
log_min_messages = warning
log_line_prefix = '%m [%p] '
EOF
  if is_root; then chown "$pg_os_user:" "$f"; fi
}

port_busy() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

do_start() {
  bindir=$(find_bindir) || { install_server 9>&-; bindir=$(find_bindir) || die "no initdb/pg_ctl after installing postgresql"; }
  psql="$bindir/psql"; [ -x "$psql" ] || psql=$(command -v psql) || die "psql not found"
  pg_isready="$bindir/pg_isready"; [ -x "$pg_isready" ] || pg_isready=$(command -v pg_isready) || die "pg_isready not found"
  if is_root && ! id "$pg_os_user" >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash "$pg_os_user"
  fi
  local version want
  load_password
  version=$("$bindir/postgres" --version 2>/dev/null || "$bindir/pg_ctl" --version)

  # The stamp ties the data directory to the server version, superuser and password it was made for.
  want=$(printf '%s\n%s\n%s\n' "$version" "$user" "$password" | sha1sum | cut -d' ' -f1)
  if is_running; then
    local rp; rp=$(running_port)
    if [ "$rp" = "$port" ] && [ -f "$stampfile" ] && [ "$(cat "$stampfile")" = "$want" ]; then
      client -d "$dbname" -tAc 'SELECT 1' >/dev/null \
        || die "running on $host:$port but $user cannot connect to $dbname (see $logfile)"
      log "already running ($version)"
      print_dsn "$port"
      return 0
    fi
    log "running with other settings (port $rp, or another password): restarting"
    as_pg "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null
  fi

  mkdir -p "$base"
  if is_root; then chown "$pg_os_user:" "$base"; fi
  if [ ! -f "$data/PG_VERSION" ] || [ ! -f "$stampfile" ] || [ "$(cat "$stampfile")" != "$want" ]; then
    init_cluster "$want"
  fi
  write_settings
  if port_busy "$port"; then
    die "port $host:$port is already in use by another process (set ARETL_TEST_PG_PORT)"
  fi

  log "starting on $host:$port ($version), log $logfile"
  # A stale pid file left by a killed server is handled by pg_ctl itself.
  # 9>&-: the server must not inherit (and so hold forever) the lock taken below.
  if ! as_pg "$bindir/pg_ctl" -D "$data" -l "$logfile" -w -t 60 start >/dev/null 9>&-; then
    tail -n 30 "$logfile" >&2 || true
    die "pg_ctl start failed"
  fi
  for _ in $(seq 1 120); do
    "$pg_isready" -q -h "$host" -p "$port" -d postgres -t 2 && break
    sleep 0.25
  done
  "$pg_isready" -q -h "$host" -p "$port" -d postgres -t 2 || { tail -n 30 "$logfile" >&2; die "server not ready"; }

  if [ "$(client -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$dbname'")" != 1 ]; then
    client -d postgres -c "CREATE DATABASE $dbname OWNER $user" >/dev/null
  fi
  client -d "$dbname" -tAc 'SELECT 1' >/dev/null || die "cannot connect to $dbname as $user"
  log "ready"
  print_dsn "$port"
}

do_stop() {
  bindir=$(find_bindir) || { log "not installed, nothing to stop"; return 0; }
  if is_running; then
    as_pg "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
    log "stopped"
  else
    log "not running"
  fi
}

do_status() {
  bindir=$(find_bindir) || { log "not installed"; return 3; }
  if is_running; then
    log "running (data $data)"
    print_dsn "$(running_port)"
    return 0
  fi
  log "not running"
  return 3
}

cmd=${1:-}
case "$cmd" in
  start|stop|status) ;;
  *) echo "usage: $0 {start|stop|status}" >&2; exit 2 ;;
esac

lock_for_change "$cmd" "$base"

case "$cmd" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
esac

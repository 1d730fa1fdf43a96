#!/usr/bin/env bash
# A throwaway PostgreSQL server (Debian's postgresql package) that lives
# entirely in STATE_DIR, for tests of sweeps whose truth is a database.
#
#   eval "$(scripts/postgres/cluster.sh up /abs/state/dir)"
#   scripts/postgres/cluster.sh stop|start /abs/state/dir   # a restart mid-sweep
#   scripts/postgres/cluster.sh down /abs/state/dir
#
# `up` installs postgresql with apt-get if its binaries are missing (exit 3
# when it cannot: no root, no package), runs
# initdb and pg_ctl as a non-root user (PostgreSQL refuses root: as root the
# server runs as `nobody`), listens on 127.0.0.1 only, on a free port from
# 25432, and prints exactly one line on stdout:
#   export TG_PG_URL=postgresql://sweeper@127.0.0.1:PORT/sweeps TG_PG_PASSFILE=... TG_PG_CA=... ...
# The server speaks TLS with a certificate for 127.0.0.1 from a CA made
# here (STATE_DIR/ca.crt). The role `sweeper` has a password (scram-sha-256 over TCP), kept in a
# libpq password file STATE_DIR/pgpass (mode 0600) and never on a command
# line. `down` stops the server by its data directory and removes STATE_DIR
# (only if this script made it), so it is idempotent and safe on a shared
# machine. Messages go to stderr.
set -euo pipefail

PROG=${0##*/}
MARKER=.postgres-cluster-sh
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
# Exit 3: PostgreSQL is not installed and cannot be (tests skip on it).
cannot_install() { log "error: $*"; exit 3; }
die() { log "error: $*"; exit 1; }
usage() { printf 'usage: %s up|down|stop|start STATE_DIR (absolute)\n' "$PROG" >&2; exit 2; }

(($# == 2)) || usage
cmd=$1 state=$2
[[ $state == /* ]] || usage

bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x $d/initdb && -x $d/pg_ctl ]] && { echo "$d"; return 0; }
  done
  return 1
}

install_postgres() {
  bindir >/dev/null && return 0
  [[ $(id -u) == 0 ]] || cannot_install "postgresql is not installed and installing it needs root (apt-get install postgresql)"
  log "installing Debian's postgresql (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >&2; } \
    || cannot_install "apt-get install postgresql failed"
  bindir >/dev/null || cannot_install "postgresql installed, but no initdb under /usr/lib/postgresql/*/bin"
}

# Runs a command as the server's user (nobody when we are root).
as_owner() {
  if [[ $(id -u) == 0 ]]; then
    # runuser is in /usr/sbin, which a root shell's PATH may lack.
    "$(command -v runuser || echo /usr/sbin/runuser)" -u nobody -- "$@"
  else
    "$@"
  fi
}

# shellcheck source=../lib/ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/ports.sh"

pick_port() {
  local p
  for ((p = 25432; p < 25532; p++)); do
    port_busy "$p" || { echo "$p"; return 0; }
  done
  die "no free port in 25432-25531"
}

start_server() {
  local bin=$1
  as_owner "$bin/pg_ctl" -D "$state/data" -l "$state/sock/server.log" -w -t 60 start >&2 \
    || { tail -n 20 "$state/sock/server.log" >&2 || true; die "pg_ctl start failed (log: $state/sock/server.log)"; }
}

up() {
  install_postgres
  local bin port pw
  bin=$(bindir)
  mkdir -p "$state"
  touch "$state/$MARKER"
  chmod 0755 "$state"
  port=$(pick_port)
  pw=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  # initdb reads the superuser's password from a file; the server's user must read it.
  mkdir -p "$state/data" "$state/sock"
  printf '%s\n' "$pw" >"$state/initpw"
  if [[ $(id -u) == 0 ]]; then chown nobody "$state/data" "$state/sock" "$state/initpw"; fi
  chmod 0700 "$state/data"
  as_owner "$bin/initdb" -D "$state/data" -U postgres --auth-local=trust \
    --auth-host=scram-sha-256 --pwfile="$state/initpw" -E UTF8 --locale=C.UTF-8 >"$state/initdb.log" 2>&1 \
    || { cat "$state/initdb.log" >&2; die "initdb failed"; }
  rm -f "$state/initpw"
  cat >>"$state/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$state/sock'
fsync = on
max_connections = 100
ssl = on
ssl_cert_file = '$state/sock/server.crt'
ssl_key_file = '$state/sock/server.key'
EOF
  make_certs
  start_server "$bin"
  # The sweeps' role and database, made over the socket (trust) as postgres.
  as_owner "$bin/psql" -q -h "$state/sock" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 >&2 <<EOF
CREATE ROLE sweeper LOGIN PASSWORD '$pw';
CREATE DATABASE sweeps OWNER sweeper;
EOF
  printf '127.0.0.1:%s:*:sweeper:%s\n' "$port" "$pw" >"$state/pgpass"
  chmod 0600 "$state/pgpass"
  log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data: $state/data)"
  printf 'export TG_PG_URL=postgresql://sweeper@127.0.0.1:%s/sweeps TG_PG_PASSFILE=%s TG_PG_BIN=%s TG_PG_SOCK=%s TG_PG_PORT=%s TG_PG_CA=%s\n' \
    "$port" "$state/pgpass" "$bin" "$state/sock" "$port" "$state/ca.crt"
}

# A CA and a server certificate for 127.0.0.1 signed by it: the server
# speaks TLS, so clients' default sslmode (prefer) encrypts, and
# verify-full can be checked against STATE_DIR/ca.crt.
make_certs() {
  local d=$state/sock
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$state/ca.key" -out "$state/ca.crt" -days 2 \
    -subj "/CN=trainguard test CA" >/dev/null 2>&1 || die "openssl: cannot make the test CA"
  openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" -out "$state/server.csr" \
    -subj "/CN=127.0.0.1" >/dev/null 2>&1 || die "openssl: cannot make the server key"
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >"$state/san.ext"
  openssl x509 -req -in "$state/server.csr" -CA "$state/ca.crt" -CAkey "$state/ca.key" -CAcreateserial \
    -out "$d/server.crt" -days 2 -extfile "$state/san.ext" >/dev/null 2>&1 || die "openssl: cannot sign the server certificate"
  chmod 0600 "$d/server.key"
  if [[ $(id -u) == 0 ]]; then chown nobody "$d/server.key" "$d/server.crt"; fi
}

stop() {
  local bin
  bin=$(bindir) || return 0
  [[ -d $state/data ]] || return 0
  as_owner "$bin/pg_ctl" -D "$state/data" -m fast -w -t 30 stop >&2 2>/dev/null \
    || as_owner "$bin/pg_ctl" -D "$state/data" -m immediate -w stop >&2 2>/dev/null || true
}

case $cmd in
  up) up ;;
  stop) stop ;;
  start) start_server "$(bindir)" ;;
  down)
    stop
    if [[ -e $state/$MARKER ]]; then rm -rf "$state"; fi
    ;;
  *) usage ;;
esac

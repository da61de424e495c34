#!/usr/bin/env bash
# The embedded default database: a MariaDB from Debian's packages, data in .data/mariadb (git-ignored),
# listening on 127.0.0.1 unless DB_BIND_ADDRESS says otherwise (0.0.0.0 on the DB host of a multi-host
# run: docs/deployment.md). Seeding (schema + users) is done by the harness, the same way for any DB.
#   db/local.sh start|stop|status|install
# Env: DB_BIND_ADDRESS (127.0.0.1), DB_PORT (3306), DB_NAME (bench), DB_USER (bench), DB_PASSWORD (bench),
#      DB_CPUS (taskset list, optional), DB_DATADIR (.data/mariadb; a second instance needs its own, and its
#      own DB_PORT: the faults test kills its own server, never the shared one).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
port=${DB_PORT:-3306}
bind=${DB_BIND_ADDRESS:-127.0.0.1}
name=${DB_NAME:-bench}
user=${DB_USER:-bench}
password=${DB_PASSWORD:-bench}
datadir=${DB_DATADIR:-$root/.data/mariadb}
socket=$datadir/mysqld.sock
pidfile=$datadir/mysqld.pid
log=$datadir.log
install_log=$(dirname "$datadir")/install-db.log

die() { echo "db: $*" >&2; exit 1; }

install() {
  command -v mariadbd >/dev/null && command -v mariadb >/dev/null && return
  command -v apt-get >/dev/null || die "MariaDB is missing and this is not a Debian/Ubuntu system: install MariaDB 10.11+ (or MySQL 8) and set DB_HOST/DB_PORT/DB_USER/DB_PASSWORD to use it."
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "db: installing mariadb-server from Debian's packages" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client >/dev/null \
    || { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-client >/dev/null; } \
    || die "could not install mariadb-server with apt-get"
  # Debian's package may start its own service where systemd runs: we use our own instance only.
}

# The server in the pid file is alive: not a killed server that is still exiting or not yet reaped (a
# zombie answers kill -0), and not a recycled pid of some other program.
alive() {
  local stat state
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  state=${stat##*) }; state=${state%% *}
  [[ "$stat" == *"(mariadbd)"* && "$state" != Z && "$state" != X ]]
}

running() { local pid; pid=$(cat "$pidfile" 2>/dev/null) && [ -n "$pid" ] && alive "$pid"; }

# After SIGKILL the server's main thread shows Z (so not `running`) while its other threads still exit and hold
# the port (seen here: Z with 2 tasks, the port still accepting).
threads_left() {
  local pid; pid=$(cat "$pidfile" 2>/dev/null) && [ -n "$pid" ] || return 1
  grep -q '(mariadbd)' "/proc/$pid/stat" 2>/dev/null && [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -gt 1 ]
}

pinged() { mariadb-admin --no-defaults --socket="$socket" -uroot ping >/dev/null 2>&1; }

# Accepts TCP connections where clients connect (the harness and the ports use TCP, not the socket).
tcp_open() {
  local host=$bind
  [ "$host" = 0.0.0.0 ] && host=127.0.0.1
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

root_sql() { mariadb --no-defaults --socket="$socket" -uroot "$@"; }

start() {
  install
  if running; then
    # A server that is still starting (another caller) answers soon; one that was just killed (SIGKILL:
    # the faults scenario) is exiting: wait for either, so that one call to `start` always works.
    for _ in $(seq 1 300); do
      if pinged && tcp_open; then echo "db: already running on $bind:$port (pid $(cat "$pidfile"))" >&2; return; fi
      running || break
      sleep 0.1
    done
    running && die "mariadbd (pid $(cat "$pidfile")) is running but does not answer: see $log, or stop it with db/local.sh stop"
  fi
  rm -f "$socket"  # left behind by a killed server
  for _ in $(seq 1 300); do threads_left || break; sleep 0.1; done
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port is busy (another MySQL?): stop it, or use it with DB_HOST/DB_PORT/DB_USER/DB_PASSWORD and BENCH_DB=external, or pick another DB_PORT"
  fi
  local fresh=0
  if [ ! -d "$datadir/mysql" ]; then
    mkdir -p "$datadir"
    mariadb-install-db --no-defaults --datadir="$datadir" --user="$(id -un)" \
      --auth-root-authentication-method=socket --skip-test-db >"$install_log" 2>&1 \
      || die "mariadb-install-db failed: see $install_log"
    fresh=1
  fi
  local pin=()
  [ -n "${DB_CPUS:-}" ] && pin=(taskset -c "$DB_CPUS")
  # setsid: the server outlives this script but not the harness, which stops it by pid file.
  setsid "${pin[@]}" mariadbd --no-defaults --datadir="$datadir" --user="$(id -un)" \
    --bind-address="$bind" --port="$port" --socket="$socket" --pid-file="$pidfile" \
    --skip-name-resolve --max-connections=1000 --innodb-buffer-pool-size=512M \
    --performance-schema=OFF --log-error="$log" </dev/null >/dev/null 2>&1 &
  # Ready when it answers on its socket and accepts TCP (after a kill, crash recovery comes first).
  for _ in $(seq 1 300); do
    pinged && tcp_open && break
    kill -0 $! 2>/dev/null || die "mariadbd exited at start: see $log"
    sleep 0.1
  done
  pinged && tcp_open || die "mariadbd did not answer within 30 s: see $log"
  if [ "$fresh" = 1 ] || ! root_sql -e "SELECT 1 FROM mysql.user WHERE user='$user'" | grep -q 1; then
    root_sql <<SQL
CREATE DATABASE IF NOT EXISTS \`$name\`;
CREATE USER IF NOT EXISTS '$user'@'%' IDENTIFIED BY '$password';
GRANT ALL ON \`$name\`.* TO '$user'@'%';
-- the conformance suite reads the server's Questions/Com_select counters, as TechEmpower's verifier does
GRANT PROCESS ON *.* TO '$user'@'%';
SQL
  fi
  echo "db: MariaDB $(mariadbd --version | awk '{print $3}') up on $bind:$port (data in ${datadir#"$root"/})" >&2
}

stop() {
  running || { echo "db: not running" >&2; return; }
  local pid; pid=$(cat "$pidfile")
  kill "$pid"
  for _ in $(seq 1 300); do alive "$pid" || { echo "db: stopped" >&2; return; }; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

status() {
  if running; then echo "running pid $(cat "$pidfile") port $port"; else echo "stopped"; exit 3; fi
}

case "${1:-}" in
  start|stop|status|install) "$1" ;;
  *) die "usage: db/local.sh start|stop|status|install" ;;
esac

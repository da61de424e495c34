#!/bin/sh
# compose.offline.yaml's database (bench-offline-mariadb, scripts/offline-images.sh): Debian's MariaDB started the
# way the official MySQL and MariaDB images start it, for the part of their contract compose.yaml uses. First start
# (empty data directory): initialise it, create MYSQL_DATABASE and MYSQL_USER with MYSQL_PASSWORD (granted all on
# that database), run /docker-entrypoint-initdb.d/*.sql into it, all on a socket-only server, which is then stopped.
# Then the server in the foreground, with compose.yaml's arguments (a first argument starting with '-' is an
# option of mariadbd, as with the official images). The root account has no password and only the local socket,
# as MYSQL_RANDOM_ROOT_PASSWORD leaves it reachable by nobody from outside.
set -eu
case "${1:-}" in -*) set -- mariadbd "$@" ;; esac
datadir=/var/lib/mysql
sock=/run/mysqld/init.sock
mkdir -p /run/mysqld "$datadir"
chown mysql:mysql /run/mysqld "$datadir"
if [ ! -d "$datadir/mysql" ]; then
  mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db --auth-root-authentication-method=socket \
    > /dev/null
  mariadbd --user=mysql --datadir="$datadir" --skip-networking --socket="$sock" &
  server=$!
  tries=0
  until mariadb-admin --socket="$sock" ping --silent 2>/dev/null; do
    tries=$((tries + 1))
    [ "$tries" -lt 600 ] || { echo "offline-entrypoint: the init server did not start" >&2; exit 1; }
    sleep 0.1
  done
  mariadb --socket="$sock" <<SQL
CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE}\`;
CREATE USER '${MYSQL_USER}'@'%' IDENTIFIED BY '${MYSQL_PASSWORD}';
GRANT ALL ON \`${MYSQL_DATABASE}\`.* TO '${MYSQL_USER}'@'%';
SQL
  for f in /docker-entrypoint-initdb.d/*.sql; do
    [ -e "$f" ] || continue
    echo "offline-entrypoint: running $f"
    mariadb --socket="$sock" "$MYSQL_DATABASE" < "$f"
  done
  mariadb-admin --socket="$sock" shutdown
  wait "$server"
fi
if [ "$1" = mariadbd ]; then
  exec "$@" --user=mysql
fi
exec "$@"

#!/usr/bin/env bash
# The images compose.offline.yaml puts where compose.yaml names registry images, made from Debian 12's packages with
# mmdebstrap and `docker import` (no image registry is reachable on the machines this project is developed on):
#   bench-offline-mariadb   the database: Debian's MariaDB 10.11, started by db/offline-entrypoint.sh as the official
#                           MySQL/MariaDB images start (MYSQL_* variables, /docker-entrypoint-initdb.d)
#   bench-offline-python    db-seed's base: Debian's Python 3.11 with db/Dockerfile's pinned packages already in it,
#                           so that its `pip install` finds them installed and needs no network
#   bench-offline-jre       the ports' base: this host's JDK 25 (JAVA_HOME, else Temurin 25 at its Debian path) in
#                           /opt/java/openjdk, where the Temurin images have it
# Nothing else differs from compose.yaml. An image is rebuilt only when this script or its inputs change (a label
# holds their hash). Usage: scripts/offline-images.sh [--force | --tars]
#   --tars  only each missing image's file system, as a tar under build/offline-images/ (no Docker engine needed:
#           `just test` makes them beside its first step); a later run imports a tar made from the same inputs
#           instead of running mmdebstrap again, then removes it
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
suite=bookworm
jdk=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
[ -x "$jdk/bin/java" ] || { echo "error: no JDK at $jdk: set JAVA_HOME to a JDK 25" >&2; exit 1; }
force=${1:-}
tars=build/offline-images
# the packages db/Dockerfile installs: faker and pymysql pinned in harness/requirements.txt, the rest in its RUN line
pins=$(grep -iE '^(faker|pymysql)==' harness/requirements.txt | tr '\n' ' ')
pins+=$(grep -oE '[a-z0-9_.-]+==[0-9][^ ]*' db/Dockerfile | tr '\n' ' ')
aptopt='Acquire::Check-Valid-Until "false"'

# NAME INPUTS... -- MMDEBSTRAP-ARGS... -- IMPORT-CHANGES...
image() {
  local name=$1; shift
  local inputs=() args=() changes=()
  while [ "$1" != -- ]; do inputs+=("$1"); shift; done; shift
  while [ "$1" != -- ]; do args+=("$1"); shift; done; shift
  changes=("$@")
  local hash
  hash=$(cat "$0" "${inputs[@]}" | sha256sum | cut -c1-16)
  local tar=$tars/${name//:/-}.$hash.tar
  if [ "$force" != --force ] \
     && [ "$(docker image inspect -f '{{index .Config.Labels "bench.inputs"}}' "$name" 2>/dev/null)" = "$hash" ]; then
    rm -f "$tar"
    return 0
  fi
  if [ "$force" = --tars ]; then
    [ -f "$tar" ] && return 0
    echo "offline image $name: mmdebstrap $suite into $tar" >&2
    mkdir -p "$tars"
    rm -f "$tars/${name//:/-}".*.tar*
    mmdebstrap --quiet --variant=minbase --aptopt="$aptopt" "${args[@]}" "$suite" - > "$tar.partial"
    mv "$tar.partial" "$tar"
    return 0
  fi
  local change_args=(--change "LABEL bench.inputs=$hash")
  for c in "${changes[@]}"; do change_args+=(--change "$c"); done
  if [ "$force" != --force ] && [ -f "$tar" ]; then
    echo "offline image $name: docker import of $tar" >&2
    docker import "${change_args[@]}" "$tar" "$name" >/dev/null
    rm -f "$tar"
    return 0
  fi
  echo "offline image $name: mmdebstrap $suite + docker import" >&2
  mmdebstrap --quiet --variant=minbase --aptopt="$aptopt" "${args[@]}" "$suite" - \
    | docker import "${change_args[@]}" - "$name" >/dev/null
}

image bench-offline-mariadb:$suite db/offline-entrypoint.sh -- \
  --include=mariadb-server,mariadb-client \
  --customize-hook='rm -rf "$1"/var/lib/mysql/*' \
  --customize-hook='printf "[mysqld]\nbind-address = 0.0.0.0\n" > "$1"/etc/mysql/mariadb.conf.d/99-container.cnf' \
  --customize-hook='copy-in db/offline-entrypoint.sh /usr/local/bin' \
  -- \
  'ENTRYPOINT ["/usr/local/bin/offline-entrypoint.sh"]' 'CMD ["mariadbd"]' 'EXPOSE 3306'

# The wheels come through this host's pip (its index and certificates, e.g. a PyPI mirror) for Debian 12's Python
# 3.11, and the chroot installs them with no network of its own.
wheels=build/offline-wheels
python=$(command -v python3.11 || echo "$root/.venv/bin/python")
"$python" -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.11 \
  --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$wheels" $pins
# shellcheck disable=SC2016
image bench-offline-python:$suite harness/requirements.txt db/Dockerfile -- \
  --include=python3,python3-pip,python-is-python3 \
  --customize-hook="mkdir -p \"\$1/tmp/wheels\" && cp $wheels/*.whl \"\$1/tmp/wheels/\"" \
  --customize-hook="chroot \"\$1\" python3 -m pip install -q --no-index --find-links /tmp/wheels --break-system-packages $pins" \
  --customize-hook='rm -rf "$1"/tmp/wheels "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
  -- \
  'ENV LANG=C.UTF-8' 'CMD ["python3"]'

image bench-offline-jre:25 "$jdk/release" -- \
  --customize-hook="mkdir -p \"\$1/opt/java\" && cp -a \"$jdk\" \"\$1/opt/java/openjdk\"" \
  -- \
  'ENV JAVA_HOME=/opt/java/openjdk' \
  'ENV PATH=/opt/java/openjdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'ENV LANG=C.UTF-8'

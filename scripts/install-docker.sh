#!/usr/bin/env bash
# What compose.yaml needs on this host, installed when missing: Docker Engine (Debian's docker.io), mmdebstrap (the
# offline images' Debian base, scripts/offline-images.sh) and the Compose v2 CLI. Debian 12 packages Compose v1 only,
# so v2 is built from the Go module proxy into tools/bin/ (git-ignored): ~14 min the first time on a 2-core box, a
# few seconds once Go's module and build caches hold it. A `docker compose` plugin already installed is used as is.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# v2.32.4: built and run here (2.24+ reads `!reset` in compose.offline.yaml, 2.23.1+ inline `configs`)
COMPOSE_VERSION=2.32.4

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
if [ ${#need[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "error: missing ${need[*]}: install Docker Engine and mmdebstrap with your package manager" >&2
    exit 1
  fi
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${need[*]} from Debian's packages" >&2
  # policy-rc.d: the package must not start its daemon; harness/compose.py starts dockerd with the project's options
  $sudo sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
  rc=0
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 \
    || { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } \
    || rc=$?
  $sudo rm -f /usr/sbin/policy-rc.d
  [ $rc -eq 0 ] || exit $rc
fi

docker compose version >/dev/null 2>&1 && exit 0
bin=$root/tools/bin/docker-compose
[ -x "$bin" ] && "$bin" version --short 2>/dev/null | grep -qx "v\?$COMPOSE_VERSION" && exit 0
go=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$go" ]; then
  echo "error: the Compose v2 CLI is built with Go 1.24+: install Go (https://go.dev/dl/) or the docker compose plugin" >&2
  exit 1
fi
echo "building the Compose CLI v$COMPOSE_VERSION into tools/bin/ (Go module proxy; ~14 min the first time)" >&2
mkdir -p "$root/tools/bin"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# A module of our own that requires compose: `go install pkg@version` refuses modules with replace directives.
(cd "$tmp" && "$go" mod init compose-cli >/dev/null 2>&1 \
  && "$go" get -tool "github.com/docker/compose/v2/cmd@v$COMPOSE_VERSION" \
  && "$go" build -trimpath -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=v$COMPOSE_VERSION" \
       -o "$tmp/docker-compose" github.com/docker/compose/v2/cmd) \
  && mv "$tmp/docker-compose" "$bin"

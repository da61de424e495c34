#!/usr/bin/env bash
# What compose.yaml needs on this host, installed when missing: Docker Engine (Debian's docker.io), mmdebstrap (the
# offline images' Debian base, scripts/offline-images.sh) and the Compose v2 CLI. A `docker compose` plugin already
# installed is used as is. Debian 12 packages Compose v1 only; Debian 13 (trixie) packages v2 (2.26.1), a static Go
# binary that needs only libc 2.34+. So its package is fetched with apt from the Debian archive this host's apt
# sources name (signature checked against the host's Debian keyring), through an apt state of its own in a
# temporary folder, and only its binary is copied into tools/bin/ (git-ignored): under a minute, nothing installed
# or changed in the host's packages. Where that fails (no apt, no Debian source), the CLI is built from the Go
# module proxy instead: ~9-14 min the first time on a 2-core box, seconds once Go's module and build caches hold it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# 2.24+ reads `!reset` in compose.offline.yaml (2.23.1+ inline `configs`): any CLI from that version on is used.
COMPOSE_MIN=2.24.0
# v2.32.4: what is built from the Go module proxy where Debian's package cannot be had
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

# `install-docker.sh packages`: the Debian packages only (`just test` fetches the Compose CLI beside its first step)
[ "${1:-}" = packages ] && exit 0
docker compose version >/dev/null 2>&1 && exit 0
bin=$root/tools/bin/docker-compose
# VERSION is at least COMPOSE_MIN ("v2.32.4", "2.26.1-4")
recent() { local v=${1#v}; v=${v%%-*}; [ "$(printf '%s\n%s\n' "$COMPOSE_MIN" "$v" | sort -V | head -1)" = "$COMPOSE_MIN" ]; }
[ -x "$bin" ] && recent "$("$bin" version --short 2>/dev/null || echo 0)" && exit 0
mkdir -p "$root/tools/bin"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# Debian 13's docker-compose package: the host's Debian mirror, trixie's Release checked with the host's keyring
from_debian() {
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || return 1
  case "$(dpkg --print-architecture 2>/dev/null)" in amd64|arm64) ;; *) return 1 ;; esac
  local mirror keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Label: Debian' 'Identifier: Packages' 2>/dev/null | head -1)
  [ -n "$mirror" ] && [ -r "$keyring" ] || return 1
  local state=$tmp/apt
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/deb"
  echo "deb [signed-by=$keyring] $mirror trixie main" > "$state/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$state/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$state/lists"
              -o "Dir::Cache=$state/cache" -o "APT::Sandbox::User=$(id -un)" -o Acquire::Languages=none -qq)
  apt-get "${opts[@]}" update >/dev/null || return 1
  (cd "$state/deb" && apt-get "${opts[@]}" download docker-compose >/dev/null) || return 1
  dpkg-deb -x "$state"/deb/docker-compose_*.deb "$state/root" || return 1
  local cli=$state/root/usr/libexec/docker/cli-plugins/docker-compose
  "$cli" version --short >/dev/null 2>&1 && recent "$("$cli" version --short)" || return 1
  mv "$cli" "$bin"
}
if from_debian; then
  echo "Compose CLI $("$bin" version --short) from Debian 13's docker-compose package into tools/bin/" >&2
  exit 0
fi

go=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$go" ]; then
  echo "error: no Compose v2 CLI: Debian 13's docker-compose package could not be fetched, and building one needs" \
       "Go 1.24+: install Go (https://go.dev/dl/) or the docker compose plugin" >&2
  exit 1
fi
echo "building the Compose CLI v$COMPOSE_VERSION into tools/bin/ (Go module proxy; ~14 min the first time)" >&2
# A module of our own that requires compose: `go install pkg@version` refuses modules with replace directives.
(cd "$tmp" && "$go" mod init compose-cli >/dev/null 2>&1 \
  && "$go" get -tool "github.com/docker/compose/v2/cmd@v$COMPOSE_VERSION" \
  && "$go" build -trimpath -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=v$COMPOSE_VERSION" \
       -o "$tmp/docker-compose" github.com/docker/compose/v2/cmd) \
  && mv "$tmp/docker-compose" "$bin"

#!/usr/bin/env bash
# Installs the native tools a run needs, from Debian's packages, when they are missing.
# (openloop, the default load generator, is built from tools/openloop with cargo by the harness itself.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# Toxiproxy, the slow-db scenario's userspace latency proxy (this kernel has no netem): built from the Go module
# proxy into tools/bin/ (git-ignored) on first use. v2.12.0 is the newest the module proxy serves here.
TOXIPROXY_VERSION=2.12.0
toxiproxy() {
  local bin=$root/tools/bin/toxiproxy-server
  [ -x "$bin" ] && "$bin" -version 2>/dev/null | grep -qx "toxiproxy-server version $TOXIPROXY_VERSION" && return 0
  local go; go=$(command -v go || echo /usr/local/go/bin/go)
  if [ ! -x "$go" ]; then
    echo "error: the slow-db scenario needs Toxiproxy, built with Go 1.23+: install Go (https://go.dev/dl/), then rerun" >&2
    return 1
  fi
  echo "building toxiproxy-server v$TOXIPROXY_VERSION into tools/bin/ (go install)" >&2
  mkdir -p "$root/tools/bin"
  local tmp; tmp=$(mktemp -d)
  GOBIN=$tmp "$go" install -ldflags "-X github.com/Shopify/toxiproxy/v2.Version=$TOXIPROXY_VERSION" \
    "github.com/Shopify/toxiproxy/v2/cmd/server@v$TOXIPROXY_VERSION" && mv "$tmp/server" "$bin"
  local rc=$?; rm -rf "$tmp"; return $rc
}
if [ "${1:-}" = toxiproxy ]; then toxiproxy; exit; fi
# Only slow-db needs it: without Go the other recipes still run (the scenario then says what to install).
# `install-tools.sh packages` installs only the Debian packages below (`just test` builds Toxiproxy beside its first step).
if [ "${1:-}" != packages ] && { command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; }; then
  toxiproxy || echo "warning: toxiproxy was not built (the slow-db scenario needs it)" >&2
fi

need=()
command -v mariadbd >/dev/null || need+=(mariadb-server)
command -v mariadb >/dev/null || need+=(mariadb-client)
command -v wrk >/dev/null || command -v wrk2 >/dev/null || need+=(wrk)
command -v sysbench >/dev/null || need+=(sysbench)
# nginx: the downstream of GET /feed (harness/downstream.py, with the echo module's echo_sleep: a timer, no
# thread), and the cheapest server there is, to measure a generator's own cost (`calibrate`, `eval-generators`)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
[ -e /usr/lib/nginx/modules/ngx_http_echo_module.so ] || need+=(libnginx-mod-http-echo)
# cc: `calibrate` compiles its native part (tools/calibrate/kernel.c) on first use
command -v cc >/dev/null || need+=(gcc)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "error: missing ${need[*]}: install them with your package manager (wrk2 from https://github.com/giltene/wrk2 is preferred over wrk)" >&2
  exit 1
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${need[*]} from Debian's packages" >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 \
  || { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }

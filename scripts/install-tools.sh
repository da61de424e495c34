#!/usr/bin/env bash
# Installs the native tools a run needs, from Debian's packages, when they are missing.
# (openloop, the default load generator, is built from tools/openloop with cargo by the harness itself.)
set -euo pipefail
need=()
command -v mariadbd >/dev/null || need+=(mariadb-server)
command -v mariadb >/dev/null || need+=(mariadb-client)
command -v wrk >/dev/null || command -v wrk2 >/dev/null || need+=(wrk)
command -v sysbench >/dev/null || need+=(sysbench)
# `eval` also needs nginx (the cheapest server there is, to measure the generators' own cost)
[ "${1:-}" = eval ] && { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light); }
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "error: missing ${need[*]}: install them with your package manager (wrk2 from https://github.com/giltene/wrk2 is preferred over wrk)" >&2
  exit 1
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${need[*]} from Debian's packages" >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 \
  || { $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; }

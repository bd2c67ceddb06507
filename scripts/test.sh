#!/usr/bin/env bash
# Runs every test of the workspace. Installs what the tests need first:
# promtool and the Prometheus server (Debian's `prometheus` package), used to
# lint /metrics and to evaluate the Grafana dashboards' queries.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "The tests need: ${need_apt[*]} (Debian packages). Install them as root: apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

cargo test --workspace --all-targets "$@"

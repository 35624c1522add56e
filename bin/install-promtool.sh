#!/usr/bin/env bash
# Install Debian's prometheus package for its two binaries: promtool (tests/test_prometheus_rules.py
# checks and unit-tests config/prometheus/*.rules.yml with it) and prometheus (the alert
# integration test runs one on a free loopback port). Needs root and apt-get; exits 0 when both
# are there, 1 saying why not. bin/setup.sh and the tests call it.
# The package enables a prometheus service on :9090, which the tests do not want (they run
# their own): a service the install started is stopped and disabled.
set -euo pipefail
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "promtool/prometheus are not installed, and installing them needs root and apt-get (apt-get install prometheus)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
install() { apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; }
if ! install && ! { apt-get update -qq >/dev/null 2>&1 && install; }; then
  echo "apt-get install prometheus failed" >&2
  exit 1
fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
elif [ -f /run/prometheus/prometheus.pid ] && [ -x /etc/init.d/prometheus ]; then
  /etc/init.d/prometheus stop >/dev/null 2>&1 || true  # only the daemon its pid file names
fi
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1

#!/usr/bin/env bash
# Create/refresh the project's virtualenv (.venv) with everything the tests and tools need.
# Idempotent and quick when nothing changed: it reinstalls only when pyproject.toml changes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  echo "kmirror needs Python 3.11 (found: $("$py" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
# kcat (librdkafka's CLI) is a stock client the integration tests drive; Debian packages it.
if ! command -v kcat >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing kcat (apt-get)" >&2
    (apt-get install -y -qq kcat >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq kcat >/dev/null; }) \
      || echo "warning: could not install kcat; its tests will fail" >&2
  else
    echo "warning: kcat is not installed (apt-get install kcat); its tests will fail" >&2
  fi
fi
# promtool and prometheus (Debian's prometheus package): the alert rules' checks and unit tests,
# and the integration test that runs a real Prometheus; without them those tests skip, saying why.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing promtool and prometheus (apt-get install prometheus)" >&2
  fi
  bin/install-promtool.sh || echo "warning: promtool/prometheus are not installed; the alert rule tests will skip" >&2
fi
extras="${KMIRROR_EXTRAS:-test,audit}"
stamp_want="$(sha256sum pyproject.toml | cut -c1-16)-$extras"
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
if [ "$(cat .venv/.kmirror-stamp 2>/dev/null)" != "$stamp_want" ]; then
  echo "installing kmirror and its packages into .venv (log: .venv/setup.log)" >&2
  if ! { .venv/bin/python -m pip install -q --upgrade pip && .venv/bin/python -m pip install -q -e ".[$extras]"; } >.venv/setup.log 2>&1; then
    cat .venv/setup.log >&2
    echo "setup failed: see the pip output above" >&2
    exit 1
  fi
  echo "$stamp_want" > .venv/.kmirror-stamp
fi
# kafkajs (Node.js) is a stock client the integration tests drive (tests/js); npm installs the
# locked version again only when tests/js/package-lock.json changes. Without node/npm only the
# kafkajs tests skip, saying why.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  js_want="$(cat tests/js/package.json tests/js/package-lock.json | sha256sum | cut -c1-16)"
  if [ "$(cat tests/js/node_modules/.kmirror-stamp 2>/dev/null)" != "$js_want" ]; then
    echo "installing tests/js's npm packages (kafkajs)" >&2
    if ! (cd tests/js && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
      echo "setup failed: npm ci in tests/js" >&2
      exit 1
    fi
    echo "$js_want" > tests/js/node_modules/.kmirror-stamp
  fi
else
  echo "warning: node/npm are not installed (apt-get install nodejs npm); the kafkajs tests will skip" >&2
fi
# Byte-compile the sources once: every node process and tool then starts ~0.4 s sooner, also
# where PYTHONDONTWRITEBYTECODE stops Python from caching them itself (only changed files are
# compiled again).
.venv/bin/python -m compileall -q -j 0 broker protocol audit tests bench >/dev/null \
  || echo "warning: could not byte-compile the sources (slower starts only)" >&2

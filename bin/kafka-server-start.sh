#!/usr/bin/env bash
# Run a kmirror node in the foreground: bin/kafka-server-start.sh config/server.properties
# SIGTERM/SIGINT shut it down cleanly (exit 0).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$root/.venv/bin/python"
[ -x "$py" ] || { "$root/bin/setup.sh" >&2; }
cd "$root"
exec "$py" -m broker "$@"

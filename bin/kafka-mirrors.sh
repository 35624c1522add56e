#!/usr/bin/env bash
# Cluster mirror tool (KIP-1279): create/alter/list/describe/delete mirrors, add/remove/pause/resume topics.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$root/.venv/bin/python" -m broker.cli.mirrors "$@"

#!/usr/bin/env bash
# ACLs: add, list, remove, incl. KIP-1279's --cluster-mirror resource (Kafka's kafka-acls.sh flags).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$root/.venv/bin/python" -m broker.cli.acls "$@"

#!/usr/bin/env bash
# Storage tool (random-uuid, format, info), as Apache Kafka's bin/kafka-storage.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$root/.venv/bin/python" -m broker.cli.storage "$@"

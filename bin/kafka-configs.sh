#!/usr/bin/env bash
# Dynamic configs of topics, brokers and cluster mirrors (KIP-1279): describe, alter (Kafka's kafka-configs.sh flags).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$root/.venv/bin/python" -m broker.cli.configs "$@"

#!/usr/bin/env bash
# Dump Kafka log segments (.log/.index/.timeindex) like Apache Kafka's kafka-dump-log.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$root/.venv/bin/python" -m broker.cli.dump_log "$@"

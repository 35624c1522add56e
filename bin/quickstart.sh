#!/usr/bin/env bash
# The main job: set up, start a local kmirror node on free loopback ports, create a topic, produce
# 100k records with a stock idempotent lz4 producer (confluent-kafka), consume them with a consumer
# group, show the node's Prometheus counters, stop the node. Options: --records N, --keep.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin/setup.sh
exec .venv/bin/python -m broker.cli.quickstart "$@"

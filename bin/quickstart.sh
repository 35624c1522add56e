#!/usr/bin/env bash
# The main job: set up, start a source and a destination kmirror node on free loopback ports,
# produce 100k records to the source (stock idempotent lz4 producer), mirror the topic to the
# destination (kafka-mirrors.sh --create/--add), show --describe and that topic ids and bytes are
# equal, read the mirror with a stock consumer, fail over (--remove) and write to the destination.
# It stops both nodes at the end, on an error, on Ctrl-C or SIGTERM.
# Options: --records N, --keep (leave the nodes running at the end, or when interrupted: it
# prints their PIDs and the kill command that stops them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin/setup.sh
exec .venv/bin/python -m broker.cli.quickstart "$@"

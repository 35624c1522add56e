#!/usr/bin/env bash
# The main job: set up, start a source kmirror node and a three-node destination cluster (one KRaft
# quorum of combined broker+controller nodes, replication factor 3, min.insync.replicas=2) on free
# loopback ports, produce 100k records to the source (stock idempotent lz4 producer), mirror the
# topic to the destination (kafka-mirrors.sh --create/--add), show --describe, that topic ids are
# equal and that every destination replica holds the source's bytes, read the mirror with a stock
# consumer, fail over (--remove) and write to the destination with acks=all.
# It stops every node at the end, on an error, on Ctrl-C or SIGTERM.
# Options: --records N, --destination-nodes 3|1 (1: a one-node destination), --keep (leave the
# nodes running at the end, or when interrupted: it prints their PIDs and the kill command that
# stops them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin/setup.sh
exec .venv/bin/python -m broker.cli.quickstart "$@"

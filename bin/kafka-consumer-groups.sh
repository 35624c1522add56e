#!/usr/bin/env bash
# Consumer groups: list, describe, reset offsets, delete (Kafka's kafka-consumer-groups.sh flags).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.consumer_groups "$@"

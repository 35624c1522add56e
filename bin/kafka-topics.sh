#!/usr/bin/env bash
# Create, list, describe, alter (partitions) and delete topics (Kafka's kafka-topics.sh flags and output).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.topics "$@"

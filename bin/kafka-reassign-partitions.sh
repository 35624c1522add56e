#!/usr/bin/env bash
# Move partitions between brokers (Apache Kafka's kafka-reassign-partitions.sh flags).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.reassign_partitions "$@"

#!/usr/bin/env bash
# Print a topic's records read through a share group, KIP-932 (Kafka's kafka-console-share-consumer.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.console_share_consumer "$@"

#!/usr/bin/env bash
# Print a topic's records on standard output (Kafka's kafka-console-consumer.sh flags and formatters).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.console_consumer "$@"

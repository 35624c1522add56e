#!/usr/bin/env bash
# Dynamic configs of topics, brokers and cluster mirrors (KIP-1279): describe, alter (Kafka's kafka-configs.sh flags).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.configs "$@"

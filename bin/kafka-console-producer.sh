#!/usr/bin/env bash
# Publish standard input's lines as records (Kafka's kafka-console-producer.sh flags and line reader).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.console_producer "$@"

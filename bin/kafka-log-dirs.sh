#!/usr/bin/env bash
# Each broker's log directories and replica sizes as JSON (Kafka's kafka-log-dirs.sh --describe).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.log_dirs "$@"

#!/usr/bin/env bash
# SIGTERM (or $SIGNAL) to the nodes started from this checkout; --process-role=<role> or
# --node-id=<id> picks some (Kafka's kafka-server-stop.sh, KIP-979).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.server_stop "$@"

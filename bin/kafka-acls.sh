#!/usr/bin/env bash
# ACLs: add, list, remove, incl. KIP-1279's --cluster-mirror resource (Kafka's kafka-acls.sh flags).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.acls "$@"

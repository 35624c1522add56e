#!/usr/bin/env bash
# Share groups (KIP-932): list, describe, delete (Kafka's kafka-share-groups.sh flags).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.share_groups "$@"

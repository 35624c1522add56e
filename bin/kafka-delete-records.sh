#!/usr/bin/env bash
# Delete records below given offsets (Kafka's kafka-delete-records.sh --offset-json-file).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.delete_records "$@"

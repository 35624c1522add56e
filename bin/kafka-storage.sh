#!/usr/bin/env bash
# Storage tool (random-uuid, format, info), as Apache Kafka's bin/kafka-storage.sh.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.storage "$@"

#!/usr/bin/env bash
# The KRaft metadata quorum: describe --status / --replication, as Apache Kafka's kafka-metadata-quorum.sh.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.metadata_quorum "$@"

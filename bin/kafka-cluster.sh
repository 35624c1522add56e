#!/usr/bin/env bash
# The cluster's id and broker unregistration (decommissioning), as Kafka's kafka-cluster.sh.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.cluster "$@"

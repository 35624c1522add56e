#!/usr/bin/env bash
# Each broker and the API versions it serves (Kafka's kafka-broker-api-versions.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.broker_api_versions "$@"

#!/usr/bin/env bash
# Finalized feature flags: describe, upgrade, downgrade, disable, version-mapping (Kafka's kafka-features.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.features "$@"

#!/usr/bin/env bash
# Each partition's offset for a time (latest, earliest, a timestamp...): Kafka's kafka-get-offsets.sh.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.get_offsets "$@"

#!/usr/bin/env bash
# Preferred or unclean leader elections (Apache Kafka's kafka-leader-election.sh flags).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.leader_election "$@"

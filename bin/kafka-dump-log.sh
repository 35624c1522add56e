#!/usr/bin/env bash
# Dump Kafka log segments (.log/.index/.timeindex) like Apache Kafka's kafka-dump-log.sh.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.dump_log "$@"

#!/usr/bin/env bash
# Consumer throughput (Kafka's kafka-consumer-perf-test.sh; librdkafka's consumer).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.consumer_perf "$@"

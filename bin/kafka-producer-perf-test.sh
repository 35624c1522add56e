#!/usr/bin/env bash
# Producer throughput and latency (Kafka's kafka-producer-perf-test.sh; librdkafka's producer).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.producer_perf "$@"

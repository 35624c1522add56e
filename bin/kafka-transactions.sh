#!/usr/bin/env bash
# Transactions: list, describe, describe-producers, abort, find-hanging (Kafka's kafka-transactions.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.transactions "$@"

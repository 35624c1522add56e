#!/usr/bin/env sh
# Runs every benchmark from the repository root, in the project venv (created by bin/setup.sh).
# Arguments go to the protocol bench; the broker, mirror, transaction, cleaner and replication
# benches (real processes on loopback, < 90 s, ~2 min, < 90 s, < 60 s and < 90 s) run with their
# defaults.
set -eu
cd "$(dirname "$0")/.."
if [ -f .venv/bin/activate ]; then
    . .venv/bin/activate
fi
python -m bench.protocol_bench "$@"
python -m bench.broker_bench
python -m bench.mirror_bench
python -m bench.txn_bench
python -m bench.cleaner_bench
python -m bench.replication_bench

#!/usr/bin/env sh
# Runs the benchmarks from the repository root, in the project venv when there is one.
set -eu
cd "$(dirname "$0")/.."
if [ -f /work/main/.venv/bin/activate ]; then
    . /work/main/.venv/bin/activate
fi
python -m bench.protocol_bench "$@"

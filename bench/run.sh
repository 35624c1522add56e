#!/usr/bin/env sh
# Runs every benchmark from the repository root, in the project venv (created by bin/setup.sh).
set -eu
cd "$(dirname "$0")/.."
if [ -f .venv/bin/activate ]; then
    . .venv/bin/activate
fi
python -m bench.protocol_bench "$@"

#!/usr/bin/env bash
# The main job. Until the broker lands (issue 3) it exercises the protocol layer end to end:
# the codec benchmark, ours vs kio's generic codec, measured in one run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin/setup.sh
exec bench/run.sh "$@"

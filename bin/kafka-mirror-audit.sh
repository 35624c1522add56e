#!/usr/bin/env bash
# Audit a mirror from dumped segments on PySpark (docs/audit.md):
#   kafka-mirror-audit.sh --source DIR --destination DIR --output DIR [--master URL] [--topics REGEX]
# Exit 0: all partitions IDENTICAL or LAGGING; 2: any DIVERGED or MISSING; 1: usage/input error.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec audit "$@"

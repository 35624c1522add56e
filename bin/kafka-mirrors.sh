#!/usr/bin/env bash
# Cluster mirror tool (KIP-1279): create/alter/list/describe/delete mirrors, add/remove/pause/resume topics.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker.cli.mirrors "$@"

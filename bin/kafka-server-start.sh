#!/usr/bin/env bash
# Run a kmirror node in the foreground: bin/kafka-server-start.sh config/server.properties
# (a relative path is the caller's: this script does not change directory). SIGTERM/SIGINT
# stop it cleanly at any time, start-up included (exit 0); a start-up failure prints one line
# on stderr and exits 1. --help, --version.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
kmirror_exec broker "$@"

#!/usr/bin/env bash
# Container entry point (see Dockerfile): format the node's log dirs unless already formatted,
# then run the node in the foreground (exec: it receives docker stop's SIGTERM and exits cleanly).
# Usage: bin/docker-entrypoint.sh <server.properties>, with KMIRROR_CLUSTER_ID set to the cluster
# id (bin/kafka-storage.sh random-uuid); every node of one cluster needs the same id.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
config="${1:?usage: docker-entrypoint.sh <server.properties>}"
cluster_id="${KMIRROR_CLUSTER_ID:?set KMIRROR_CLUSTER_ID (bin/kafka-storage.sh random-uuid)}"
"$root/bin/kafka-storage.sh" format --ignore-formatted -t "$cluster_id" -c "$config"
exec "$root/bin/kafka-server-start.sh" "$config"

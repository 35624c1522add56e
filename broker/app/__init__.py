"""Composition root: builds one node from its server.properties and runs its parts.

`Node` (node.py) composes, in order, what one construction step per module makes; each
``build_*`` takes only the parts it needs and returns a frozen bundle of what it made:
storage (secrets codec, log dirs with their crash recovery, the cleaner), metadata_quorum (the
quorum and its channels to the active controller), replication (the replica manager, its
fetchers and AlterPartition sender), controller_parts (the controller with its parts and
unasked duties), coordinators (groups, transactions, mirror states, share states, and the
shards of them this node holds), request_services (what the request handlers share),
api_handlers (the handlers with their dispatcher), and mirroring (fetchers, the state driver,
the metadata sync, and `broker.mirror.node_view` for what they ask of the node). `Node` owns
the metadata image: the quorum's commit listener replaces it, and every part follows the delta.

parts.py gathers the bundles; start-up order, the maintenance loop and shutdown are
lifecycle.py (`NodeRuntime`); the Prometheus endpoint, metrics_endpoint.py. The process around
the node (signals, exit codes, the storage check) is `broker.node_process`; how it finds and
reaches the other nodes, `broker.cluster_view`.
"""

from .lifecycle import StartupError
from .node import Node

__all__ = ["Node", "StartupError"]

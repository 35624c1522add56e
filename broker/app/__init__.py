"""Composition root: builds one node from its server.properties and runs its parts.

`Node` (node.py) only wires, in named construction steps called from ``__init__``, one module
each: storage (secrets codec, log dirs with their crash recovery, the cleaner), metadata_quorum
(the quorum and its channels to the active controller), controller_parts (the controller with
its parts and unasked duties), coordinators (groups, transactions, mirror states, share states,
and the shards of them this node holds), request_services (what the request handlers share),
api_handlers (the handlers with their dispatcher), and mirroring (fetchers, the state driver,
the metadata sync, and `broker.mirror.node_view` for what they ask of the node). It owns the
metadata image: the quorum's commit listener replaces it, and every part follows the delta.

Start-up order, the maintenance loop and shutdown are lifecycle.py; the Prometheus endpoint,
metrics_endpoint.py. The process around the node (signals, exit codes, the storage check) is
`broker.node_process`; how it finds and reaches the other nodes, `broker.cluster_view`.
"""

from .lifecycle import StartupError
from .node import Node

__all__ = ["Node", "StartupError"]

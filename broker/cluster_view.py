"""How this node finds and reaches the other nodes of the cluster.

`ClusterView` reads the metadata image: which node leads a partition, and where a live broker
listens for other brokers (the inter-broker listener). `PeerClients` makes the connections this
node opens to the others: to the quorum's voters (Raft RPCs), to the active controller
(forwarded requests, broker registration and heartbeats) and to other brokers (transaction
markers, KIP-890 verification).
"""

from __future__ import annotations

from collections.abc import Callable

from .config.server_config import ServerConfig
from .metadata.image import MetadataImage
from .network.client import ReconnectingClient

QUORUM_REQUEST_TIMEOUT_MS = 2000  # controller.quorum.request.timeout.ms (Kafka's default)
PEER_REQUEST_TIMEOUT_MS = 30_000


class ClusterView:
    def __init__(self, image: Callable[[], MetadataImage], config: ServerConfig) -> None:
        self._image = image
        self._config = config

    @property
    def inter_broker_listener(self) -> str:
        """``inter.broker.listener.name``, else the first advertised non-controller listener."""
        cfg = self._config
        if cfg.inter_broker_listener_name:
            return cfg.inter_broker_listener_name
        names = [
            a.name for a in cfg.advertised_listeners if a.name not in cfg.controller_listener_names
        ]
        return names[0] if names else ""

    def broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """A live broker's endpoint on the inter-broker listener."""
        b = self._image().brokers.get(broker_id)
        ep = b.endpoint(self.inter_broker_listener) if b is not None and not b.fenced else None
        return None if ep is None else (ep.host, ep.port)

    def partition_leader(self, topic: str, partition: int) -> int | None:
        t = self._image().topics.get(topic)
        part = t.partitions.get(partition) if t is not None else None
        return None if part is None else part.leader


class PeerClients:
    """Client factories for the connections to other nodes, named after this node."""

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id

    def quorum(self, dest: int, host: str, port: int) -> ReconnectingClient:
        timeout = QUORUM_REQUEST_TIMEOUT_MS
        return ReconnectingClient(
            host,
            port,
            f"raft-{self._node_id}",
            request_timeout_ms=timeout,
            connect_timeout_ms=min(timeout, 1000),
        )

    def controller(self, dest: int, host: str, port: int) -> ReconnectingClient:
        # long enough for any controller operation, or a retry could repeat a done request
        return self.broker(host, port)

    def broker(self, host: str, port: int) -> ReconnectingClient:
        return ReconnectingClient(
            host, port, f"broker-{self._node_id}", request_timeout_ms=PEER_REQUEST_TIMEOUT_MS
        )

"""How this node finds and reaches the other nodes of the cluster.

`ClusterView` reads the metadata image: which node leads a partition, and where a live broker
listens for other brokers (the inter-broker listener). `PeerClients` makes the connections this
node opens to the others: to the quorum's voters (Raft RPCs), to the active controller
(forwarded requests, broker registration and heartbeats) and to other brokers (replica fetches,
transaction markers, KIP-890 verification, remote mirror and share-group states). Each speaks
the security of the listener it reaches (`broker.security.node_links`); a link that fails TLS or
SASL is logged once per reason (peer, listener, why) while its clients keep retrying with
Kafka's reconnect backoff.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

from .config.server_config import ServerConfig
from .metadata.image import MetadataImage
from .network.client import ReconnectingClient
from .network.errors import NetworkError
from .network.fetch_timeout import fetch_timeout_ms
from .security.errors import AuthenticationFailed
from .security.node_links import NodeLink, NodeLinks, build_node_links, inter_broker_listener

log = logging.getLogger(__name__)

QUORUM_REQUEST_TIMEOUT_MS = 2000  # controller.quorum.request.timeout.ms (Kafka's default)
PEER_REQUEST_TIMEOUT_MS = 30_000
REPLICA_CONNECT_TIMEOUT_MS = 1000  # a replica fetcher's connection setup (see replica_fetch)
_TLS_HINTS = ("SSLError", "SSLCertVerificationError", "certificate", "TLS")


class ClusterView:
    def __init__(self, image: Callable[[], MetadataImage], config: ServerConfig) -> None:
        self._image = image
        self._config = config

    @property
    def inter_broker_listener(self) -> str:
        """``inter.broker.listener.name``, else the first advertised non-controller listener."""
        return inter_broker_listener(self._config)

    def broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """A live broker's endpoint on the inter-broker listener."""
        b = self._image().brokers.get(broker_id)
        ep = b.endpoint(self.inter_broker_listener) if b is not None and not b.fenced else None
        return None if ep is None else (ep.host, ep.port)

    def partition_leader(self, topic: str, partition: int) -> int | None:
        t = self._image().topics.get(topic)
        part = t.partitions.get(partition) if t is not None else None
        return None if part is None else part.leader


def is_auth_failure(error: BaseException) -> bool:
    """Did a connect fail in TLS or SASL (not a peer that is down or slow)?"""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, (AuthenticationFailed, ssl.SSLError)):
            return True
        seen = seen.__cause__ or seen.__context__
    text = str(error)
    return "authentication" in text or any(h in text for h in _TLS_HINTS)


class LinkWatch:
    """One log line when a peer refuses this node's TLS or SASL (again for a new reason), one
    when it accepts it again: however many clients reach that peer."""

    def __init__(self) -> None:
        self._failing: dict[tuple[str, int], str] = {}

    def observer(
        self, link: NodeLink, peer: str, host: str, port: int
    ) -> Callable[[NetworkError | None], None]:
        key = (host, port)

        def seen(error: NetworkError | None) -> None:
            if error is None:
                if self._failing.pop(key, None) is not None:
                    log.info(
                        "node link to %s at %s:%d on listener %s: authenticated",
                        peer, host, port, link.describe(),
                    )  # fmt: skip
                return
            if not is_auth_failure(error):
                return
            reason = str(error)
            if self._failing.get(key) == reason:
                return
            self._failing[key] = reason
            log.warning(
                "node link to %s at %s:%d on listener %s, as %s, fails: %s; retrying with backoff",
                peer, host, port, link.describe(), link.principal, reason,
            )  # fmt: skip

        return seen


class PeerClients:
    """Client factories for the connections to other nodes, named after this node."""

    def __init__(self, config: ServerConfig, links: NodeLinks | None = None) -> None:
        self._node_id = config.node_id
        self._fetch_wait_ms = config.replica_fetch_wait_max_ms
        self.links = links if links is not None else build_node_links(config)
        self._watch = LinkWatch()

    def quorum(self, dest: int, host: str, port: int) -> ReconnectingClient:
        timeout = QUORUM_REQUEST_TIMEOUT_MS
        return self._client(
            self.links.controller,
            f"node {dest}",
            host,
            port,
            f"raft-{self._node_id}",
            request_timeout_ms=timeout,
            connect_timeout_ms=min(timeout, 1000),
        )

    def controller(self, dest: int, host: str, port: int) -> ReconnectingClient:
        # long enough for any controller operation, or a retry could repeat a done request
        return self._client(
            self.links.controller,
            f"controller {dest}",
            host,
            port,
            f"broker-{self._node_id}",
            request_timeout_ms=PEER_REQUEST_TIMEOUT_MS,
        )

    def broker(
        self, host: str, port: int, *, connect_timeout_ms: int = 10_000
    ) -> ReconnectingClient:
        return self._client(
            self.links.inter_broker,
            "broker",
            host,
            port,
            f"broker-{self._node_id}",
            request_timeout_ms=PEER_REQUEST_TIMEOUT_MS,
            connect_timeout_ms=connect_timeout_ms,
        )

    def replica_fetch(self, host: str, port: int) -> ReconnectingClient:
        """A replica fetcher's connection: as ``broker``, but a connection attempt (with its
        ApiVersions exchange) gives up within ``REPLICA_CONNECT_TIMEOUT_MS`` (or the bound of a
        Fetch, if less): the fetcher tries again at once, so a link that heals is found within
        about that, where an attempt started during the cut sat out its SYN retransmissions
        for up to 10 s after the heal."""
        connect_ms = fetch_timeout_ms(self._fetch_wait_ms, PEER_REQUEST_TIMEOUT_MS)
        return self.broker(
            host, port, connect_timeout_ms=min(REPLICA_CONNECT_TIMEOUT_MS, connect_ms)
        )

    def _client(
        self,
        link: NodeLink,
        peer: str,
        host: str,
        port: int,
        client_id: str,
        *,
        request_timeout_ms: int,
        connect_timeout_ms: int = 10_000,
    ) -> ReconnectingClient:
        sec = link.security
        return ReconnectingClient(
            host,
            port,
            client_id,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            ssl_context=sec.ssl_context,
            authenticate=sec.authenticate if sec.uses_sasl else None,
            on_connect=self._watch.observer(link, peer, host, port),
        )

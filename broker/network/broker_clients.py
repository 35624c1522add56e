"""Connections from this node to the other brokers of the cluster (the inter-broker listener).

What one node asks of another: transaction markers for partitions the other leads
(WriteTxnMarkers), KIP-890 checks with the transaction coordinator of another node
(AddPartitionsToTxn v4, verify only), mirror states (Read/WriteMirrorStates), replica fetching
(Fetch, ListOffsets). One ``ReconnectingClient`` per broker, created on first use from
``endpoint(broker_id)`` (the caller resolves it from the metadata image) and replaced when the
broker's endpoint changes. A broker answers one connection's requests in order, so each kind of
traffic has its own ``BrokerClients`` (each replica fetcher its own): a request waiting on the
other broker never delays another kind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from protocol.build import build
from protocol.registry import REGISTRY

from .client import ReconnectingClient
from .errors import NetworkError
from .peer_refusals import PeerRefusals, answer_code, api_name

# broker id -> (host, port) on the inter-broker listener, None: not known or fenced
Endpoint = Callable[[int], tuple[str, int] | None]
ClientFactory = Callable[[str, int], ReconnectingClient]


class UnknownBroker(NetworkError):
    pass


class BrokerClients:
    def __init__(self, endpoint: Endpoint, client_factory: ClientFactory) -> None:
        self._endpoint = endpoint
        self._factory = client_factory
        self._clients: dict[int, tuple[str, int, ReconnectingClient]] = {}
        self._refusals = PeerRefusals("inter-broker client")

    async def request(
        self, broker_id: int, api_key: int, body: Mapping[str, Any], version: int | None = None
    ) -> Any:
        """Send to ``broker_id``; its decoded response. ``NetworkError`` when it cannot be
        reached (unknown, fenced, connection lost) or serves no common version."""
        client = self._client(broker_id)
        host, port, _ = self._clients[broker_id]
        if version is None:
            version = await client.version_for(api_key)
        request: Any = build(REGISTRY.spec(api_key).request_type(version), dict(body))
        response = await client.send(request, version)
        # a broker that refuses this node (no CLUSTER_ACTION there) is logged once
        self._refusals.note(
            f"broker {broker_id} at {host}:{port}",
            api_name(REGISTRY.spec(api_key).name),
            answer_code(response),
        )
        return response

    async def version_for(self, broker_id: int, api_key: int) -> int:
        """The highest version of ``api_key`` both sides serve (``NetworkError`` if none)."""
        return await self._client(broker_id).version_for(api_key)

    async def send_raw(
        self,
        broker_id: int,
        api_key: int,
        version: int,
        body: bytes | bytearray | memoryview,
        *,
        timeout_ms: int | None = None,
    ) -> memoryview:
        """Send an encoded request body; the response body, undecoded (hot paths parse it).
        ``timeout_ms``: this request's own bound instead of the client's request timeout."""
        client = self._client(broker_id)
        return await client.send_raw(api_key, version, body, timeout_ms=timeout_ms)

    def request_timeout_ms(self, broker_id: int) -> int:
        """The request timeout of the connection to ``broker_id`` (``UnknownBroker`` if none)."""
        return self._client(broker_id).request_timeout_ms

    def _client(self, broker_id: int) -> ReconnectingClient:
        ep = self._endpoint(broker_id)
        if ep is None:
            raise UnknownBroker(f"broker {broker_id} has no live endpoint in the metadata")
        known = self._clients.get(broker_id)
        if known is not None and (known[0], known[1]) == ep:
            return known[2]
        if known is not None:
            known[2].close()
        client = self._factory(*ep)
        self._clients[broker_id] = (ep[0], ep[1], client)
        return client

    async def close(self) -> None:
        clients = [c for _, _, c in self._clients.values()]
        self._clients.clear()
        for c in clients:
            c.close()
        for c in clients:
            with contextlib.suppress(Exception):
                await c.wait_closed()

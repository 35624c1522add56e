"""A voter's controller listener on loopback for the in-process quorum tests: it serves the KRaft
RPCs (and ApiVersions) of whatever driver the voter has at the moment, and builds the voter's
connections to its peers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.api.api_versions import make_handler as api_versions_handler
from broker.api.context import RequestContext
from broker.api.dispatcher import Api, Dispatcher
from broker.api.quorum import QuorumApi
from broker.metadata.image import MetadataImage
from broker.network.client import ReconnectingClient
from broker.network.server import ConnectionContext, KafkaServer, Listener
from broker.quorum.driver import QuorumDriver
from broker.quorum.wire import FETCH


def now_ms() -> int:
    return int(time.time() * 1000)


class QuorumPeer:
    def __init__(self, node_id: int, root: Path, driver: Callable[[], QuorumDriver | None]) -> None:
        self.node_id = node_id
        self.dir = root / f"node-{node_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        api = QuorumApi(driver, now_ms)
        versions = api_versions_handler(
            lambda _l: self.dispatcher.supported_versions(), MetadataImage
        )
        self.dispatcher = Dispatcher(
            [Api(18, versions, max_version=4), *api.apis(), Api(FETCH, api.fetch, min_version=13)]
        )
        self.server = KafkaServer([Listener("CONTROLLER", "127.0.0.1", 0)], self._handle)
        self.port = 0

    async def _handle(self, conn: ConnectionContext, frame: memoryview) -> Any:
        def ctx(header: Any) -> RequestContext:
            return RequestContext(header, conn.connection_id, conn.listener, conn.peer_host)

        return await self.dispatcher.handle(ctx, frame)

    async def listen(self, port: int = 0) -> None:
        self.server = KafkaServer([Listener("CONTROLLER", "127.0.0.1", port)], self._handle)
        await self.server.start()
        self.port = self.server.bound_ports["CONTROLLER"]

    def raft_client(self, dest: int, host: str, port: int) -> ReconnectingClient:
        return ReconnectingClient(
            host, port, f"raft-{self.node_id}", request_timeout_ms=2000, connect_timeout_ms=500
        )

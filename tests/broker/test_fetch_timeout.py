"""Issue 31: a Fetch that gets no answer gives up after a bound derived from its own max wait
(broker/network/fetch_timeout.py), not the 30 s request timeout, and its fetcher reconnects.

The peer is a toy broker that accepts connections, answers ApiVersions and Metadata, and never
answers a Fetch: what a follower or a mirror meets when a link is cut with its connection left
open, or after the heal while the answer sits in a TCP retransmit queue.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.log.clock import SystemClock
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.mirror.fetcher import MirrorFetcherManager
from broker.mirror.source import SourceClient
from broker.network.broker_clients import BrokerClients
from broker.network.client import MIN_SETUP_MS, ReconnectingClient
from broker.network.errors import ConnectError, RequestTimeoutError
from broker.network.fetch_timeout import fetch_timeout_ms
from broker.network.server import ConnectionContext
from broker.quorum.driver import QuorumDriver
from broker.raft import messages as m
from broker.raft.outputs import Send
from broker.replication.partition import Partition, sole_leader
from broker.replication.partition_state import ReplicationConfig
from broker.replication.replica_fetcher import FetcherConfig, ReplicaFetcher
from protocol.fetch_codec import encode_fetch_request
from protocol.registry import REGISTRY
from tests.broker.network_support import ToyBroker, run, start_server
from tests.broker.replication_support import Brokers, reg
from tests.broker.test_quorum_network import Applied
from tests.broker.test_raft_voters_api import lone_core

FETCH = 1
WAIT_MS = 200
BOUND_S = 2.2  # fetch_timeout_ms(WAIT_MS, 30_000), as test_the_bound checks


EMPTY_FETCH = encode_fetch_request(
    12,
    max_wait_ms=WAIT_MS,
    min_bytes=1,
    max_bytes=1 << 20,
    session_id=0,
    session_epoch=-1,
    partitions=[],
    forgotten=[],
    by_topic_id=False,
)


def test_the_bound() -> None:
    assert fetch_timeout_ms(WAIT_MS, 30_000) / 1000 == BOUND_S
    assert fetch_timeout_ms(500, 30_000) == 2500  # max.wait + 2 s
    assert fetch_timeout_ms(5000, 30_000) == 10_000  # max.wait + max.wait
    assert fetch_timeout_ms(500, 2000) == 2000  # never beyond the request timeout
    assert fetch_timeout_ms(-1, 30_000) == 2000


class SilentFetchBroker(ToyBroker):
    """Serves Fetch in ApiVersions, then holds every Fetch unanswered (until the server stops)."""

    def __init__(self, topics: tuple[str, ...] = ("alpha",)) -> None:
        spec = REGISTRY.spec(FETCH)
        super().__init__(ranges={FETCH: (4, spec.max_version)}, topics=topics, hook=self._hold)
        self.fetches: list[float] = []  # when each Fetch arrived (monotonic)
        self.connections: set[int] = set()
        self._never = asyncio.Event()

    async def _hold(self, conn: ConnectionContext, api_key: int, corr: int) -> None:
        self.connections.add(id(conn))
        if api_key == FETCH:
            self.fetches.append(time.monotonic())
            await self._never.wait()


async def _until(cond: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_a_fetch_times_out_after_its_own_bound_and_the_client_reconnects() -> None:
    async def main() -> None:
        toy = SilentFetchBroker()
        server = await start_server(toy)
        client = ReconnectingClient(*toy.address, "t", request_timeout_ms=30_000)
        try:
            t0 = time.monotonic()
            with pytest.raises(RequestTimeoutError, match="within 300 ms"):
                await client.send_raw(FETCH, 12, EMPTY_FETCH, timeout_ms=300)
            assert 0.25 < time.monotonic() - t0 < 2.0
            with pytest.raises(RequestTimeoutError):  # a new connection, same fate
                await client.send_raw(FETCH, 12, EMPTY_FETCH, timeout_ms=300)
            assert client.connects == 2 and len(toy.connections) == 2
        finally:
            client.close()
            await server.close(timeout=0)

    run(main())


def test_replica_fetcher_reconnects_within_the_bound(tmp_path: Path) -> None:
    async def main() -> None:
        toy = SilentFetchBroker()
        server = await start_server(toy)
        logs = LogManager([tmp_path], LogConfig(), SystemClock())
        plog = logs.get_or_create("alpha", 0, uuid.uuid4())
        part = Partition(
            "alpha", 0, plog.topic_id, plog, 1, Brokers(), ReplicationConfig(), SystemClock().now_ms
        )
        part.become(reg((1, 2), leader=2), broker_epoch=101)
        clients = BrokerClients(
            lambda _b: toy.address,
            lambda h, p: ReconnectingClient(h, p, "t", request_timeout_ms=30_000),
        )
        cfg = FetcherConfig(wait_max_ms=WAIT_MS, backoff_ms=100)
        fetcher = ReplicaFetcher((2, 0), 1, clients, cfg, lambda: 101)
        fetcher.add(part)
        fetcher.start()
        try:
            await _until(lambda: len(toy.fetches) >= 3, 3 * (BOUND_S + 1.5))
            gaps = [b - a for a, b in itertools.pairwise(toy.fetches)]
            # each unanswered Fetch is given up after the bound, then back-off and a reconnect
            assert all(BOUND_S - 0.1 < g < BOUND_S + 1.5 for g in gaps), gaps
            assert len(toy.connections) >= 3  # a new connection for each
        finally:
            fetcher.stop()
            await fetcher.wait_stopped()
            await server.close(timeout=0)
            logs.close()

    run(main())


def test_mirror_fetcher_reconnects_within_the_bound(tmp_path: Path) -> None:
    async def main() -> None:
        toy = SilentFetchBroker()
        server = await start_server(toy)
        logs = LogManager([tmp_path], LogConfig(), SystemClock())
        logs.get_or_create("alpha", 0, None)
        owners: dict[tuple[str, int], Partition] = {}

        def partition(topic: str, p: int) -> Partition | None:
            plog = logs.get(topic, p)
            if plog is None:
                return None
            if (topic, p) not in owners:
                owners[(topic, p)] = sole_leader(plog, SystemClock().now_ms)
            return owners[(topic, p)]

        mgr = MirrorFetcherManager(7, partition, SystemClock(), on_failed=lambda *a: None)
        host, port = toy.address
        config = {"bootstrap.servers": f"{host}:{port}", "fetch.max.wait.ms": str(WAIT_MS)}
        try:
            await mgr.add("mr", config, {("alpha", 0): None})
            await _until(lambda: len(toy.fetches) >= 3, 3 * (BOUND_S + 3.0))
            gaps = [b - a for a, b in itertools.pairwise(toy.fetches)]
            assert all(BOUND_S - 0.1 < g < BOUND_S + 3.0 for g in gaps), gaps
        finally:
            await mgr.close()
            await server.close(timeout=0)
            logs.close()

    run(main())


def test_a_mirror_request_timeout_reaches_its_source_connections() -> None:
    """request.timeout.ms in a mirror's config (which only the metadata sync read) is the
    request timeout of the fetchers' connections too, and bounds their Fetch."""
    config = {"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": "1500"}
    source = SourceClient(config, "t")
    assert source.request_timeout_ms == 1500
    assert source._client("127.0.0.1", 1, "t").request_timeout_ms == 1500
    assert fetch_timeout_ms(500, source.request_timeout_ms) == 1500
    assert SourceClient({"bootstrap.servers": "h:1"}, "t").request_timeout_ms == 30_000
    for bad in ("soon", "0", "-5"):
        with pytest.raises(ValueError, match=r"request\.timeout\.ms"):
            SourceClient({"bootstrap.servers": "h:1", "request.timeout.ms": bad}, "t")


def test_a_quorum_fetch_is_bounded_by_its_own_wait() -> None:
    """The quorum's Fetch to a voter that never answers fails after max_wait + 2 s even on a
    connection whose request timeout is 30 s (the quorum's own is 2 s, the lower bound)."""

    async def main() -> None:
        toy = SilentFetchBroker()
        server = await start_server(toy)
        clients: list[ReconnectingClient] = []

        def factory(_dest: int, host: str, port: int) -> ReconnectingClient:
            clients.append(ReconnectingClient(host, port, "raft", request_timeout_ms=30_000))
            return clients[-1]

        core = lone_core(False)
        driver = QuorumDriver(core, {2: toy.address}, Applied(), SystemClock().now_ms, factory)
        try:
            t0 = time.monotonic()
            fetch = m.FetchRequest(1, 0, 0, -1, max_wait_ms=WAIT_MS)
            await asyncio.wait_for(driver._send_request(Send(2, 7, fetch)), 10)
            waited = time.monotonic() - t0
            assert len(toy.fetches) == 1 and BOUND_S - 0.1 < waited < BOUND_S + 1.0, waited
            assert not clients[0]._conn or not clients[0]._conn.connected  # closed: reconnects
        finally:
            await driver.close(resign=False)
            await server.close(timeout=0)

    run(main())


def test_connection_setup_gives_up_within_the_connect_timeout() -> None:
    """A peer whose kernel accepts but that never answers ApiVersions (a frozen process, a cut
    right after the handshake): setting up fails after the connect timeout (at least
    MIN_SETUP_MS), not the request timeout, so the caller tries again at the connect cadence."""

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = ReconnectingClient(
            "127.0.0.1", port, "t", request_timeout_ms=30_000, connect_timeout_ms=500
        )
        try:
            t0 = time.monotonic()
            with pytest.raises(ConnectError, match="version negotiation"):
                await client.connection()
            assert MIN_SETUP_MS / 1000 - 0.05 < time.monotonic() - t0 < MIN_SETUP_MS / 1000 + 1.0
        finally:
            client.close()
            server.close()

    run(main())

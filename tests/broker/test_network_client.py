"""ClientConnection / ReconnectingClient against KafkaServer with the toy handler."""

import asyncio
import random
import time

import pytest

from broker.network.client import ClientConnection, ReconnectingClient, backoff_ms
from broker.network.errors import (
    ConnectError,
    ConnectionClosedError,
    RequestTimeoutError,
    UnsupportedVersionError,
)
from broker.network.server import ConnectionContext
from protocol.registry import REGISTRY, body_bytes, decode_body
from tests.waits import wait_for_async

from .network_support import (
    API_VERSIONS,
    METADATA,
    PRODUCE,
    ToyBroker,
    build,
    metadata_request,
    run,
    start_server,
)


def test_round_trip_with_negotiated_version() -> None:
    async def main() -> None:
        broker = ToyBroker(max_versions={METADATA: 7})
        server = await start_server(broker)
        host, port = server.address()
        client = ClientConnection(host, port, "test-client")
        await client.connect()
        assert client.api_versions_version == 3
        assert client.server_versions[METADATA] == (0, 7)
        assert client.version_for(METADATA) == 7
        assert client.version_for(API_VERSIONS) == REGISTRY.spec(API_VERSIONS).max_version
        assert client.request_type(METADATA) is REGISTRY.spec(METADATA).request_type(7)
        response = await client.send(metadata_request(7, ("orders",)))
        assert [t.name for t in response.topics] == ["orders"]
        assert response.brokers[0].port == port
        # The ApiVersions request carried our software name (v3 is flexible).
        assert broker.seen[0][:2] == (API_VERSIONS, 3)
        with pytest.raises(UnsupportedVersionError):
            await client.send(metadata_request(8))  # above what the server said it supports
        client.close()
        await client.wait_closed()
        await server.close()

    run(main())


def test_api_versions_falls_back_when_v3_is_unsupported() -> None:
    async def main() -> None:
        broker = ToyBroker(max_versions={API_VERSIONS: 2})
        server = await start_server(broker)
        client = ClientConnection(*server.address(), "old-server-test")
        await client.connect()
        assert [(k, v) for k, v, _ in broker.seen] == [(API_VERSIONS, 3), (API_VERSIONS, 2)]
        assert client.api_versions_version == 2
        assert client.server_versions[API_VERSIONS] == (0, 2)
        assert client.version_for(API_VERSIONS) == 2
        client.close()
        await server.close()

    run(main())


def test_version_for_without_overlap_is_a_clear_error() -> None:
    async def main() -> None:
        top = REGISTRY.spec(METADATA).max_version
        server = await start_server(ToyBroker(ranges={METADATA: (top + 1, top + 3)}))
        client = ClientConnection(*server.address(), None)
        await client.connect()
        with pytest.raises(UnsupportedVersionError, match="metadata"):
            client.version_for(METADATA)
        with pytest.raises(UnsupportedVersionError, match="not supported"):
            client.version_for(1)  # Fetch: the toy server does not list it
        with pytest.raises(UnsupportedVersionError, match="unknown"):
            client.version_for(9999)
        client.close()
        await server.close()

    run(main())


def test_pipelined_requests_match_their_responses() -> None:
    async def main() -> None:
        rng = random.Random(7)
        delays = {i: rng.random() * 0.02 for i in range(100)}
        server = await start_server(ToyBroker(delay=lambda corr: delays.get(corr, 0)))
        client = ClientConnection(*server.address(), "pipeline")
        await client.connect()
        names = [f"topic-{i}" for i in range(40)]
        responses = await asyncio.gather(*(client.send(metadata_request(12, (n,))) for n in names))
        assert [r.topics[0].name for r in responses] == names
        client.close()
        await server.close()

    run(main())


def test_send_raw_returns_the_undecoded_body() -> None:
    async def main() -> None:
        server = await start_server(ToyBroker())
        client = ClientConnection(*server.address(), "raw")
        await client.connect()
        request = metadata_request(12, ("a", "b"))
        raw = await client.send_raw(METADATA, 12, body_bytes(request))
        assert isinstance(raw, memoryview)
        decoded = decode_body(REGISTRY.spec(METADATA).response_type(12), raw, 0)
        assert [t.name for t in decoded.topics] == ["a", "b"]
        assert decoded == await client.send(request)
        client.close()
        await server.close()

    run(main())


def test_send_no_response_for_acks_zero_produce() -> None:
    async def main() -> None:
        broker = ToyBroker()
        server = await start_server(broker)
        client = ClientConnection(*server.address(), "producer")
        await client.connect()
        produce = build(
            REGISTRY.spec(PRODUCE).request_type(9),
            transactional_id=None,
            acks=0,
            timeout=__import__("datetime").timedelta(seconds=1),
            topic_data=(),
        )
        await client.send_no_response(produce)
        response = await client.send(metadata_request(12, ("after",)))
        assert response.topics[0].name == "after"
        assert (PRODUCE, 9) in [(k, v) for k, v, _ in broker.seen]
        client.close()
        await server.close()

    run(main())


def test_request_timeout_closes_the_connection() -> None:
    async def main() -> None:
        async def hook(conn: ConnectionContext, key: int, corr: int) -> None:
            if key == METADATA:
                await asyncio.sleep(10)  # never answers: the client's timeout fires first

        broker = ToyBroker(hook=hook)
        server = await start_server(broker)
        client = ClientConnection(*server.address(), "slow", request_timeout_ms=100)
        await client.connect()
        first = asyncio.ensure_future(client.send(metadata_request(12)))
        await wait_for_async(
            lambda: any(key == METADATA for key, _, _ in broker.seen), 5, "the first request"
        )
        second = asyncio.ensure_future(client.send(metadata_request(12)))
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await first
        assert time.monotonic() - started < 1.0
        with pytest.raises(ConnectionClosedError):
            await second  # its stream is gone with the first one's
        assert not client.connected
        with pytest.raises(ConnectionClosedError):
            await client.send(metadata_request(12))
        await server.close(timeout=0.1)

    run(main())


def test_connect_refused_is_a_connect_error() -> None:
    async def main() -> None:
        server = await start_server(ToyBroker())
        host, port = server.address()
        await server.close()
        with pytest.raises(ConnectError):
            await ClientConnection(host, port, None, connect_timeout_ms=1000).connect()

    run(main())


def test_reconnects_after_server_restart() -> None:
    async def main() -> None:
        broker = ToyBroker(max_versions={METADATA: 9})
        server = await start_server(broker)
        host, port = server.address()
        client = ReconnectingClient(host, port, "reconnect", rng=random.Random(1))
        assert await client.version_for(METADATA) == 9
        assert (await client.send(metadata_request(9, ("x",)))).topics[0].name == "x"
        await server.close()
        with pytest.raises((ConnectionClosedError, ConnectError)):
            await client.send(metadata_request(9))
        with pytest.raises(ConnectError):
            await client.send(metadata_request(9))  # nobody listening
        # Back, now with a newer Metadata: the client must re-negotiate.
        broker2 = ToyBroker(max_versions={METADATA: 11})
        server2 = await start_server(broker2, port=port)
        for _ in range(20):
            try:
                response = await client.send(metadata_request(11, ("y",)))
                break
            except ConnectError:
                continue
        else:
            raise AssertionError("never reconnected")
        assert response.topics[0].name == "y"
        assert await client.version_for(METADATA) == 11
        assert client.connects == 2
        # the network totals span both connections (what a mirror fetcher's metrics show)
        stats = client.stats
        assert (stats.connections_created, stats.connections_closed) == (2, 1)
        assert stats.connection_count == 1
        # ApiVersions + Metadata on each connection; the sends after the close never left
        assert stats.requests_sent == stats.responses_received == 4
        assert stats.bytes_sent > stats.request_size_max > 0 and stats.bytes_received > 0
        assert (stats.auth_successes, stats.auth_failures) == (0, 0)  # no SASL here
        client.close()
        await client.wait_closed()
        assert client.stats.connection_count == 0
        await server2.close()

    run(main())


def test_reconnect_waits_out_the_backoff() -> None:
    async def main() -> None:
        server = await start_server(ToyBroker())
        host, port = server.address()
        await server.close()
        client = ReconnectingClient(
            host, port, None, reconnect_backoff_ms=40, reconnect_backoff_max_ms=200
        )
        started = time.monotonic()
        for _ in range(4):
            with pytest.raises(ConnectError):
                await client.send(metadata_request(9))
        # Waits after failures 1, 2, 3: ~80 + 160 + 200 ms (jitter +/-20%).
        assert 0.3 < time.monotonic() - started < 1.5

    run(main())


def test_backoff_grows_and_caps_with_jitter() -> None:
    rng = random.Random(3)
    for failures, expected in [(0, 50), (1, 100), (2, 200), (4, 800), (5, 1000), (40, 1000)]:
        for _ in range(20):
            assert 0.8 * expected <= backoff_ms(failures, 50, 1000, rng) <= 1.2 * expected
    values = {backoff_ms(2, 50, 1000, rng) for _ in range(10)}
    assert len(values) > 1  # jittered

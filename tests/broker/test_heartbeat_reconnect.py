"""Issue 31: a broker heartbeat that gets no answer gives up after its attempt bound
(``heartbeat_attempt_ms``), and the next attempt goes over a new connection.

The controller here is a toy that holds every BrokerHeartbeat sent on the first connection
unanswered, as a connection that carried a request into a cut link does after the heal (its
answer waits in a TCP retransmit queue), and answers on any later connection. Before the fix the
lifecycle channel abandoned the request after half a session but kept the connection, so every
heartbeat after the heal waited there again, and the controller fenced the healed broker.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

from kio.schema.errors import ErrorCode

from broker.network.client import ReconnectingClient
from broker.network.server import ConnectionContext, Response
from broker.quorum.broker_lifecycle import heartbeat_attempt_ms
from broker.quorum.controller_channel import ControllerChannel
from protocol.registry import REGISTRY
from tests.broker.network_support import ToyBroker, build, response, run, start_server

HEARTBEAT = 63
HB_VERSION = 1


class FirstConnectionSilent(ToyBroker):
    """Serves BrokerHeartbeat; on the first connection it never answers one."""

    def __init__(self) -> None:
        spec = REGISTRY.spec(HEARTBEAT)
        super().__init__(ranges={HEARTBEAT: (spec.min_version, spec.max_version)})
        self.first: int | None = None
        self.answered: list[int] = []  # the connection (id) of each answered heartbeat
        self.held = 0
        self._never = asyncio.Event()

    async def handle(self, conn: ConnectionContext, frame: memoryview) -> Response | None:
        request = REGISTRY.decode_request(frame)
        header = request.header
        if header.api_key != HEARTBEAT:
            return await super().handle(conn, frame)
        if self.first is None:
            self.first = id(conn)
        if id(conn) == self.first:
            self.held += 1
            await self._never.wait()
        self.answered.append(id(conn))
        rtype = REGISTRY.spec(HEARTBEAT).response_type(header.api_version)
        body = build(
            rtype,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            is_caught_up=True,
            is_fenced=False,
            should_shut_down=False,
        )
        return response(HEARTBEAT, header.api_version, header.correlation_id, body)


def _heartbeat() -> Any:
    return build(
        REGISTRY.spec(HEARTBEAT).request_type(HB_VERSION),
        broker_id=1,
        broker_epoch=5,
        current_metadata_offset=10,
        want_fence=False,
        want_shut_down=False,
    )


def test_the_attempt_bound() -> None:
    assert heartbeat_attempt_ms(1000, 6000) == 2000  # two intervals
    assert heartbeat_attempt_ms(2000, 9000) == 4000  # Kafka's defaults: under half a session
    assert heartbeat_attempt_ms(4000, 9000) == 4500  # never beyond half a session
    assert heartbeat_attempt_ms(100, 9000) == 1000  # at least 1 s


def test_a_silent_connection_is_dropped_and_the_heartbeat_answered_on_a_new_one() -> None:
    async def main() -> None:
        toy = FirstConnectionSilent()
        server = await start_server(toy)
        clients: list[ReconnectingClient] = []

        def factory(node: int, host: str, port: int) -> ReconnectingClient:
            clients.append(ReconnectingClient(host, port, "b1", request_timeout_ms=30_000))
            return clients[-1]

        host, port = toy.address
        channel = ControllerChannel(
            lambda: (1, host, port), factory, timeout_ms=3000, attempt_timeout_ms=300
        )
        try:
            t0 = time.monotonic()
            resp = await channel.request(HEARTBEAT, _heartbeat())
            took = time.monotonic() - t0
            assert resp.error_code == ErrorCode.none and not resp.is_fenced
            assert toy.held == 1 and len(toy.answered) == 1
            assert toy.answered[0] != toy.first  # on another connection
            assert 0.25 < took < 2.0, took  # the attempt bound, not the channel's 3 s
            # the next heartbeat uses the new connection at once
            t1 = time.monotonic()
            await channel.request(HEARTBEAT, _heartbeat())
            assert time.monotonic() - t1 < 0.25 and toy.held == 1
            assert sum(c.connects for c in clients) == 2
        finally:
            await channel.close()
            await server.close(timeout=0)

    run(main())


def test_without_an_attempt_bound_the_channel_waits_out_its_timeout() -> None:
    """The channel's overall timeout alone (the forwarding channel): one attempt, then
    TimeoutError; the connection is dropped, so the next request reconnects."""

    async def main() -> None:
        toy = FirstConnectionSilent()
        server = await start_server(toy)
        host, port = toy.address
        channel = ControllerChannel(
            lambda: (1, host, port),
            lambda n, h, p: ReconnectingClient(h, p, "b1", request_timeout_ms=30_000),
            timeout_ms=400,
        )
        try:
            t0 = time.monotonic()
            try:
                await channel.request(HEARTBEAT, _heartbeat())
            except TimeoutError:
                pass
            else:
                raise AssertionError("answered on the silent connection")
            assert time.monotonic() - t0 < 2.0
            resp = await channel.request(HEARTBEAT, _heartbeat())
            assert resp.error_code == ErrorCode.none and toy.answered[0] != toy.first
        finally:
            await channel.close()
            await server.close(timeout=0)

    run(main())

"""KafkaServer over loopback, driven by raw sockets."""

import asyncio
import random
import socket
import struct

import pytest

from broker.network.server import ConnectionContext, KafkaServer, Listener, Response
from tests.waits import wait_for_async

from .network_support import (
    API_VERSIONS,
    METADATA,
    RawConn,
    ToyBroker,
    api_versions_request,
    metadata_request,
    run,
    start_server,
)


def test_answers_api_versions_and_metadata() -> None:
    async def main() -> None:
        broker = ToyBroker()
        server = await start_server(broker)
        conn = await RawConn.open(server)
        conn.send(api_versions_request(3), corr=7)
        conn.send(metadata_request(12), corr=8)
        corr, body = await conn.read_response(API_VERSIONS, 3)
        assert corr == 7
        assert {k.api_key for k in body.api_keys} >= {API_VERSIONS, METADATA}
        corr, body = await conn.read_response(METADATA, 12)
        assert corr == 8
        assert [t.name for t in body.topics] == ["alpha", "beta"]
        assert body.brokers[0].port == server.bound_ports["PLAINTEXT"]
        assert server.requests == 2 and server.connections_open == 1
        assert server.bytes_in > 0 and server.bytes_out > 0
        ctx = server.connections[0]
        assert ctx.listener == "PLAINTEXT" and ctx.security_protocol == "PLAINTEXT"
        host, port = server.address()
        assert ctx.connection_id.startswith(f"{host}:{port}-127.0.0.1:")
        assert ctx.connection_id.endswith("-0")
        conn.close()
        await server.close()
        assert server.connections_open == 0

    run(main())


def test_pipelined_responses_keep_request_order() -> None:
    finished: list[int] = []

    async def main() -> None:
        # Later requests finish first: request i sleeps (n - i) * 5 ms.
        n = 10
        broker = ToyBroker(delay=lambda corr: (n - corr) * 0.005)
        inner = broker.handle

        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            out = await inner(conn, frame)
            finished.append(struct.unpack_from(">i", frame, 4)[0])
            return out

        server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], handle)
        await server.start()
        conn = await RawConn.open(server)
        for i in range(n):
            conn.send(metadata_request(9, (f"t{i}",)), corr=i)
        for i in range(n):
            corr, body = await conn.read_response(METADATA, 9)
            assert corr == i
            assert [t.name for t in body.topics] == [f"t{i}"]
        assert finished == list(reversed(range(n)))  # really concurrent, really out of order
        conn.close()
        await server.close()

    run(main())


@pytest.mark.parametrize("prefix", [struct.pack(">i", -1), struct.pack(">i", 4097)])
def test_bad_frame_size_closes_only_that_connection(prefix: bytes) -> None:
    async def main() -> None:
        server = await start_server(ToyBroker(), max_request_bytes=4096)
        good = await RawConn.open(server)
        bad = await RawConn.open(server)
        bad.send_bytes(prefix + b"\0" * 16)
        assert await bad.is_closed()
        good.send(api_versions_request(3), corr=1)
        corr, _ = await good.read_response(API_VERSIONS, 3)
        assert corr == 1
        assert server.connections_open == 1
        good.close()
        await server.close()

    run(main())


def test_max_inflight_pauses_reading() -> None:
    async def main() -> None:
        active = 0
        peak = 0
        started = 0
        release = asyncio.Event()

        async def hook(conn: ConnectionContext, key: int, corr: int) -> None:
            nonlocal active, peak, started
            started += 1
            active += 1
            peak = max(peak, active)
            await release.wait()
            active -= 1

        server = await start_server(ToyBroker(hook=hook), max_inflight=4)
        conn = await RawConn.open(server)
        for i in range(30):
            conn.send(metadata_request(9, ("x",)), corr=i)
        await conn.writer.drain()
        await wait_for_async(lambda: started >= 4, 5, "4 requests in the handler")
        # Without the limit all 30 would have started by the first poll (they arrive in one
        # read); `peak` below checks that no fifth one started before the release.
        assert started == 4  # the other 26 wait in the buffer / the socket
        release.set()
        for i in range(30):
            corr, _ = await conn.read_response(METADATA, 9)
            assert corr == i
        assert peak == 4
        conn.close()
        await server.close()

    run(main())


def test_write_backpressure_pauses_reading() -> None:
    big = b"\xab" * (2 * 1024 * 1024)

    async def main() -> None:
        calls = 0

        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            nonlocal calls
            calls += 1
            corr = struct.unpack_from(">i", frame, 4)[0]
            return [struct.pack(">i", corr), memoryview(big)]

        server = KafkaServer(
            [Listener("PLAINTEXT", "127.0.0.1", 0)],
            handle,
            write_high_water=64 * 1024,
            write_low_water=16 * 1024,
        )
        await server.start()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        sock.connect(server.address())
        reader, writer = await asyncio.open_connection(sock=sock)
        conn = RawConn(reader, writer)
        n = 40
        for i in range(n):
            conn.send(metadata_request(9), corr=i)
            await writer.drain()
            await asyncio.sleep(0.003)
        # Time for the server to read the rest if it would (nothing to wait on: it must not).
        await asyncio.sleep(0.1)
        assert calls < n  # nobody reads the responses: the server stopped reading requests
        for i in range(n):
            frame = await conn.read_frame()
            assert struct.unpack_from(">i", frame)[0] == i and len(frame) == 4 + len(big)
        assert calls == n
        conn.close()
        await server.close()

    run(main())


def test_idle_connection_is_closed() -> None:
    async def main() -> None:
        server = await start_server(ToyBroker(), idle_ms=150)
        idle = await RawConn.open(server)
        busy = await RawConn.open(server)
        for i in range(8):  # 8 x 40 ms > idle_ms, but never 150 ms quiet
            busy.send(api_versions_request(3), corr=i)
            await busy.read_response(API_VERSIONS, 3)
            await asyncio.sleep(0.04)
        assert await idle.is_closed(timeout=1.0)
        assert server.idle_closed == 1
        busy.send(api_versions_request(3), corr=99)
        assert (await busy.read_response(API_VERSIONS, 3))[0] == 99
        busy.close()
        await server.close()

    run(main())


def test_max_connections_holds_the_next_one_until_a_close() -> None:
    async def main() -> None:
        server = await start_server(ToyBroker(), max_connections=2, max_connections_per_ip=5)
        first, second = await RawConn.open(server), await RawConn.open(server)
        third = await RawConn.open(server)  # TCP is up, but it is not served yet
        third.send(api_versions_request(3), corr=3)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(third.read_response(API_VERSIONS, 3), 0.3)
        stats = server.listener_snapshot()["PLAINTEXT"]
        assert stats.blocked_times == 1 and stats.blocked_seconds >= 0.25
        first.close()
        assert (await asyncio.wait_for(third.read_response(API_VERSIONS, 3), 2))[0] == 3
        assert server.quotas.total == 2 and server.listener_stats["PLAINTEXT"].closed == 1
        waiting = await RawConn.open(server)  # held again; closing the server lets it go
        await server.close(timeout=0.5)
        assert await waiting.is_closed(timeout=2.0)
        for c in (second, third, waiting):
            c.close()

    run(main())


def test_idle_connections_stay_with_idle_ms_negative() -> None:
    async def main() -> None:
        server = await start_server(ToyBroker(), idle_ms=-1)
        conn = await RawConn.open(server)
        await asyncio.sleep(0.1)
        conn.send(api_versions_request(3), corr=1)
        assert (await conn.read_response(API_VERSIONS, 3))[0] == 1
        assert server.idle_closed == 0
        conn.close()
        await server.close()

    run(main())


def test_handler_exception_closes_only_that_connection() -> None:
    async def main() -> None:
        async def hook(conn: ConnectionContext, key: int, corr: int) -> None:
            if corr == 666:
                raise RuntimeError("boom")

        server = await start_server(ToyBroker(hook=hook))
        a = await RawConn.open(server)
        b = await RawConn.open(server)
        a.send(api_versions_request(3), corr=665)
        a.send(api_versions_request(3), corr=666)
        assert (await a.read_response(API_VERSIONS, 3))[0] == 665
        assert await a.is_closed()
        b.send(api_versions_request(3), corr=1)
        assert (await b.read_response(API_VERSIONS, 3))[0] == 1
        b.close()
        await server.close()

    run(main())


def test_handler_may_return_no_response() -> None:
    async def main() -> None:
        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            corr = struct.unpack_from(">i", frame, 4)[0]
            return None if corr % 2 else [struct.pack(">i", corr)]

        server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], handle)
        await server.start()
        conn = await RawConn.open(server)
        for i in range(6):
            conn.send(api_versions_request(3), corr=i)
        got = [struct.unpack(">i", await conn.read_frame())[0] for _ in range(3)]
        assert got == [0, 2, 4]
        conn.close()
        await server.close()

    run(main())


def test_random_bytes_never_hurt_the_server() -> None:
    rng = random.Random(1279)
    errors: list[object] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
        server = await start_server(ToyBroker(), max_request_bytes=1 << 16)
        for round_ in range(60):
            conn = await RawConn.open(server)
            if round_ % 3 == 0:
                data = rng.randbytes(rng.randrange(1, 200))  # unframed noise
            else:
                # Well-framed garbage, sometimes with a real request header in front.
                payload = rng.randbytes(rng.randrange(0, 300))
                if round_ % 3 == 1:
                    payload = (
                        struct.pack(
                            ">hhi", rng.choice([3, 18, 0, 1, 999]), rng.randrange(-2, 20), 5
                        )
                        + payload
                    )
                data = struct.pack(">i", len(payload)) + payload
            conn.send_bytes(data)
            conn.writer.write_eof()
            await conn.is_closed(timeout=1.0)  # whatever happens, it ends
            conn.close()
        checker = await RawConn.open(server)
        checker.send(api_versions_request(3), corr=3)
        assert (await checker.read_response(API_VERSIONS, 3))[0] == 3
        checker.close()
        await wait_for_async(lambda: server.connections_open == 0, 5, "every connection closed")
        await server.close()

    run(main())
    assert errors == []


def test_close_waits_for_inflight_responses() -> None:
    async def main() -> None:
        broker = ToyBroker(delay=lambda corr: 0.1)
        server = await start_server(broker)
        conn = await RawConn.open(server)
        conn.send(api_versions_request(3), corr=1)
        # `seen` is written as the handler starts, before its 0.1 s delay
        await wait_for_async(lambda: bool(broker.seen), 5, "the request in the handler")
        closing = asyncio.create_task(server.close(timeout=2.0))
        corr, _ = await conn.read_response(API_VERSIONS, 3)
        assert corr == 1
        await closing
        assert await conn.is_closed()
        with pytest.raises(OSError):
            await RawConn.open(server)

    run(main())


def test_large_request_frames_arrive_intact() -> None:
    async def main() -> None:
        seen: list[bytes] = []

        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            seen.append(bytes(frame))
            return [frame[:4]]

        server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], handle)
        await server.start()
        conn = await RawConn.open(server)
        payloads = [
            random.Random(i).randbytes(n) for i, n in enumerate([10, 70_000, 5, 3_000_000, 40_000])
        ]
        for p in payloads:
            conn.send_bytes(struct.pack(">i", len(p)) + p)
        for p in payloads:
            assert await conn.read_frame() == p[:4]
        assert seen == payloads
        conn.close()
        await server.close()

    run(main())


def test_handler_can_answer_then_close() -> None:
    async def main() -> None:
        closed = asyncio.Event()

        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            corr = struct.unpack_from(">i", frame, 4)[0]
            if corr == 2:
                conn.close()  # e.g. authentication failed: this response, then hang up
                closed.set()
            await asyncio.sleep(0.01 * (3 - corr))  # earlier requests finish later
            return [struct.pack(">i", corr)]

        server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], handle)
        await server.start()
        conn = await RawConn.open(server)
        for i in range(3):
            conn.send(api_versions_request(3), corr=i)
        await asyncio.wait_for(closed.wait(), 5)
        conn.send(api_versions_request(3), corr=3)  # after close(): never served
        got = [struct.unpack(">i", await conn.read_frame())[0] for _ in range(3)]
        assert got == [0, 1, 2]
        assert await conn.is_closed()
        assert server.requests == 3
        await server.close()

    run(main())

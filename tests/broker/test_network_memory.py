"""Memory a client can make the listener hold: size prefixes, frames before authentication,
requests in flight, closed connections; and a fatal request ends its connection there."""

from __future__ import annotations

import asyncio
import gc
import random
import struct
import weakref

from broker.network.framer import BIG_START, DEFAULT_CHUNK, FrameReader
from broker.network.server import ConnectionContext, KafkaServer, Listener, Response
from tests.waits import wait_for_async

from .network_support import RawConn, api_versions_request, run

MiB = 1024 * 1024


def test_a_size_prefix_alone_does_not_allocate_its_frame() -> None:
    reader = FrameReader(max_size=200 * MiB)
    buf = reader.get_buffer()
    buf[:4] = struct.pack(">i", 100 * MiB)
    reader.buffer_updated(4)
    assert reader.next_frame() is None
    # no array of its own yet: the next bytes go to the connection's chunk
    assert reader.pending_size == 0
    assert len(reader.get_buffer()) <= DEFAULT_CHUNK


def test_a_large_frame_gets_its_own_array_after_half_a_chunk() -> None:
    reader = FrameReader(max_size=200 * MiB)
    small = struct.pack(">i", 6) + b"corr01"
    assert feed(reader, small + struct.pack(">i", 100 * MiB) + bytes(1000)) == [b"corr01"]
    assert feed(reader, bytes(DEFAULT_CHUNK // 2 - 2000)) == []
    assert reader.pending_size == 0  # still under half a chunk: kept in the chunk
    feed(reader, bytes(1000))
    assert reader.pending_size == 100 * MiB
    assert len(reader.get_buffer()) <= BIG_START  # what the loop may write into next


def feed(reader: FrameReader, data: bytes) -> list[bytes]:
    """Hand ``data`` to the reader as the loop would (in pieces as big as its buffers)."""
    frames, pos = [], 0
    while pos < len(data):
        buf = reader.get_buffer()
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        reader.buffer_updated(n)
        pos += n
        while (frame := reader.next_frame()) is not None:
            frames.append(bytes(frame))
    return frames


def test_a_big_frame_grows_as_it_arrives_and_arrives_intact() -> None:
    rng = random.Random(7)
    reader = FrameReader(max_size=64 * MiB)
    payload = rng.randbytes(5 * MiB + 123)
    stream = struct.pack(">i", len(payload)) + payload + struct.pack(">i", 3) + b"abc"
    pos, frames, largest_buffer = 0, [], 0
    while pos < len(stream):
        buf = reader.get_buffer()
        largest_buffer = max(largest_buffer, len(buf))
        n = min(len(buf), rng.randint(1, 300_000), len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        reader.buffer_updated(n)
        pos += n
        while (frame := reader.next_frame()) is not None:
            frames.append(bytes(frame))
    assert frames == [payload, b"abc"]
    assert largest_buffer < len(payload)  # never handed the whole frame's size up front


def test_the_limit_can_change_between_frames() -> None:
    reader = FrameReader(max_size=1000)
    assert reader.max_size == 1000
    reader.set_max_size(5000)
    buf = reader.get_buffer()
    buf[:4] = struct.pack(">i", 4000)
    reader.buffer_updated(4)
    assert reader.next_frame() is None  # accepted, waiting for its bytes


async def _echo_corr(conn: ConnectionContext, frame: memoryview) -> Response | None:
    return [frame[4:8]]


def test_frames_before_authentication_are_capped() -> None:
    async def main() -> None:
        listener = Listener("SASL", "127.0.0.1", 0, pre_auth_max_bytes=1000)
        seen: list[int] = []

        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            seen.append(len(frame))
            if len(frame) == 10:
                conn.authenticated()
            return [frame[4:8]]

        server = KafkaServer([listener], handle)
        await server.start()
        try:
            big = random.Random(1).randbytes(5000)
            conn = await RawConn.open(server)
            conn.send_bytes(struct.pack(">i", len(big)) + big)
            assert await conn.is_closed()
            assert seen == []
            conn.close()
            # once authenticated, the server's own limit applies
            conn = await RawConn.open(server)
            conn.send_bytes(struct.pack(">i", 10) + bytes(10))
            await conn.read_frame()
            conn.send_bytes(struct.pack(">i", len(big)) + big)
            assert len(await conn.read_frame()) == 4
            assert seen == [10, 5000]
            conn.close()
        finally:
            await server.close()

    run(main())


def test_a_fatal_request_drops_the_requests_pipelined_after_it() -> None:
    async def main() -> None:
        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            corr = struct.unpack_from(">i", frame, 4)[0]
            if corr == 1:
                await asyncio.sleep(0.05)  # the later requests are already being served
                conn.close(fatal=True)
                return None
            return [struct.pack(">i", corr)]

        server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], handle)
        await server.start()
        try:
            conn = await RawConn.open(server)
            for corr in range(4):
                conn.send(api_versions_request(3), corr=corr)
            assert struct.unpack(">i", await conn.read_frame())[0] == 0
            assert await conn.is_closed()  # 2 and 3 never answered
            conn.close()
        finally:
            await server.close()

    run(main())


def test_queued_request_bytes_are_bounded_across_connections() -> None:
    async def main() -> None:
        release = asyncio.Event()
        served: list[int] = []

        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            served.append(len(frame))
            await release.wait()
            return [frame[4:8]]

        server = KafkaServer(
            [Listener("PLAINTEXT", "127.0.0.1", 0)], handle, queued_max_request_bytes=3000
        )
        await server.start()
        try:
            conns = [await RawConn.open(server) for _ in range(3)]
            for c in conns:
                c.send_bytes(struct.pack(">i", 2000) + bytes(2000))
            await wait_for_async(lambda: len(served) >= 2, 5, "two requests served")
            await asyncio.sleep(0.2)  # time for a third to sneak in, if it could
            assert len(served) == 2 and server.memory_full
            release.set()
            for c in conns:
                await c.read_frame()
            assert len(served) == 3 and server.queued_request_bytes == 0
            for c in conns:
                c.close()
        finally:
            await server.close()

    run(main())


def test_a_large_frame_reserves_its_size_and_is_read_to_its_end_when_memory_is_full() -> None:
    """queued.max.request.bytes as Kafka's memory pool: a large frame takes its announced size
    when its bytes start to arrive; at the bound frames already started are still read to their
    end (else they could wait on each other for ever), new ones wait for memory."""

    async def main() -> None:
        release = asyncio.Event()
        served: list[int] = []

        async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
            served.append(len(frame))
            await release.wait()
            return [frame[4:8]]

        size = 200 * 1024
        server = KafkaServer(
            [Listener("PLAINTEXT", "127.0.0.1", 0)], handle, queued_max_request_bytes=300 * 1024
        )
        await server.start()
        try:
            conns = [await RawConn.open(server) for _ in range(3)]
            payload = random.Random(3).randbytes(size)
            frame = struct.pack(">i", size) + payload
            for c in conns[:2]:  # two frames started: both reserved, the bound passed
                c.send_bytes(frame[: 3 * DEFAULT_CHUNK])
            await wait_for_async(lambda: server.queued_request_bytes == 2 * size, 5, "reserved")
            assert server.memory_full
            conns[2].send_bytes(frame)  # waits: no new frame starts at the bound
            for c in conns[:2]:
                c.send_bytes(frame[3 * DEFAULT_CHUNK :])  # the started ones complete
            await wait_for_async(lambda: len(served) == 2, 5, "the started frames served")
            await asyncio.sleep(0.2)  # time for the third to sneak in, if it could
            assert len(served) == 2 and server.queued_request_bytes == 2 * size
            release.set()
            for c in conns:
                assert await c.read_frame() == payload[4:8]
            assert served == [size] * 3 and server.queued_request_bytes == 0
            for c in conns:
                c.close()
        finally:
            await server.close()

    run(main())


def test_a_reservation_is_given_back_when_its_connection_goes() -> None:
    async def main() -> None:
        server = KafkaServer(
            [Listener("PLAINTEXT", "127.0.0.1", 0)], _echo_corr, queued_max_request_bytes=MiB
        )
        await server.start()
        try:
            conn = await RawConn.open(server)
            conn.send_bytes(struct.pack(">i", 2 * MiB) + bytes(DEFAULT_CHUNK))
            await wait_for_async(lambda: server.memory_full, 5, "the frame reserved")
            conn.close()
            await wait_for_async(lambda: server.queued_request_bytes == 0, 5, "given back")
            assert not server.memory_full
            conn = await RawConn.open(server)  # others are served again
            conn.send(api_versions_request(3), corr=9)
            assert struct.unpack(">i", await conn.read_frame())[0] == 9
            conn.close()
        finally:
            await server.close()

    run(main())


def test_a_closed_connection_keeps_no_buffers_alive() -> None:
    async def main() -> None:
        server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], _echo_corr)
        await server.start()
        gc.collect()
        gc.disable()  # what follows must be freed by reference counting, not by a full GC
        try:
            conn = await RawConn.open(server)
            conn.send(api_versions_request(3), corr=5)
            await conn.read_frame()
            (proto,) = server.open_connections
            ctx = proto.ctx
            reader = weakref.ref(proto)
            conn.close()
            await wait_for_async(lambda: server.connections_open == 0, 2, "the close seen")
            del proto
            assert reader() is None
            assert ctx is not None and ctx.closed  # a context kept by a handler
        finally:
            gc.enable()
            await server.close()

    run(main())


def test_served_requests_leave_no_reference_cycles() -> None:
    """A request's slot, task and context must not form a cycle: one that outlives a young
    collection keeps the request's frame and response (megabytes for a Produce or a Fetch)
    until a full one."""

    async def main() -> None:
        server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], _echo_corr)
        await server.start()
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(5):
                conn = await RawConn.open(server)
                for corr in range(4):
                    conn.send(api_versions_request(3), corr=corr)
                for corr in range(4):
                    assert struct.unpack(">i", await conn.read_frame())[0] == corr
                conn.close()
                await conn.writer.wait_closed()
            await wait_for_async(lambda: server.connections_open == 0, 2, "the closes seen")
            gc.collect()
            ours = {"_Slot", "Connection", "ConnectionContext", "FrameReader", "Task", "Context"}
            left = [type(o).__name__ for o in gc.garbage if type(o).__name__ in ours]
            assert left == []
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
            await server.close()

    run(main())

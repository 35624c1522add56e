"""Loopback throughput of broker.network: small-request round trips and 1 MiB responses.

Run with ``python -m bench.network_bench``. The server answers every request with a canned
response (no decoding), so this measures framing, ordering, the event loop and the client's
correlation matching, not the codec. Both sides run on one uvloop loop in one process.
"""

import argparse
import asyncio
import struct
import time
from collections.abc import Awaitable, Callable

import uvloop

from broker.network.client import ClientConnection
from broker.network.server import ConnectionContext, KafkaServer, Listener, Response

MiB = 1 << 20
SMALL_KEY = 3  # Metadata; the server doesn't care, send_raw just needs a known header version
BIG_KEY = 1  # Fetch v12+ (flexible): response header v1


def make_handler(
    big: memoryview,
) -> Callable[[ConnectionContext, memoryview], Awaitable[Response | None]]:
    async def handle(conn: ConnectionContext, frame: memoryview) -> Response | None:
        key, _, corr = struct.unpack_from(">hhi", frame, 0)
        if key == BIG_KEY:
            return [struct.pack(">ib", corr, 0), big]  # response header v1: corr + empty tags
        return [struct.pack(">i", corr), b"\0" * 32]

    return handle


async def round_trips(client: ClientConnection, seconds: float, depth: int) -> float:
    body = b"\x01\x00\x00\x00"  # Metadata v12: no topics, flags, tags
    count = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        await asyncio.gather(*(client.send_raw(SMALL_KEY, 12, body) for _ in range(depth)))
        count += depth
    return count / (time.perf_counter() - started)


async def big_responses(client: ClientConnection, seconds: float, depth: int) -> float:
    body = b""  # the server ignores it
    total = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        views = await asyncio.gather(*(client.send_raw(BIG_KEY, 12, body) for _ in range(depth)))
        total += sum(len(v) for v in views)
    return total / MiB / (time.perf_counter() - started)


async def main(seconds: float) -> None:
    big = memoryview(bytes(MiB))
    server = KafkaServer([Listener("PLAINTEXT", "127.0.0.1", 0)], make_handler(big))
    await server.start()
    client = ClientConnection(*server.address(), "bench")
    await client.connect(negotiate=False)  # the canned server can't answer it
    for depth in (1, 16):
        rate = await round_trips(client, seconds, depth)
        print(f"small round trips, {depth:2d} in flight: {rate:10.0f} req/s")
    for depth in (1, 4):
        rate = await big_responses(client, seconds, depth)
        print(f"1 MiB responses,   {depth:2d} in flight: {rate:10.0f} MiB/s")
    client.close()
    await server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main(args.seconds))

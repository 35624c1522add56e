"""Mirror fetcher throughput vs a raw Fetch loop over the same bytes, from a kmirror source node.

    python bench/mirror_fetch_bench.py [--mb 64] [--partition-max-bytes 1048576]

Starts a source node in a temp dir, fills one partition with ~1 MiB lz4 batches (incompressible
values) using confluent-kafka, then times (1) a raw loop: Fetch requests on one connection,
responses parsed zero-copy, nothing written; (2) MirrorFetcherManager copying the partition into
a LogManager in a temp dir. Prints MB/s for both and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from broker.log.clock import SystemClock
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.mirror.fetcher import MirrorFetcherManager
from broker.mirror.source import SourceClient
from broker.network.client import ClientConnection
from broker.replication.partition import sole_leader
from protocol.fetch_codec import (
    FETCH,
    FetchPartitionRequest,
    encode_fetch_request,
    parse_fetch_response,
)
from protocol.records import scan_batches
from tests.integration.node import Node

TOPIC = "bench"


def fill(bootstrap: str, total_mb: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=15)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 100,
            "batch.size": 1_000_000,
            "message.max.bytes": 1_000_000,
        }
    )
    for _ in range(total_mb * 100):
        while True:
            try:
                p.produce(TOPIC, value=os.urandom(10_000))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


async def raw_loop(node: Node, end: int, part_max: int) -> tuple[float, int]:
    conn = ClientConnection("127.0.0.1", node.port, "bench-raw")
    await conn.connect()
    version = min(conn.version_for(FETCH), 12)  # by name, no session
    offset = 0
    total = 0
    start = time.perf_counter()
    while offset < end:
        body = encode_fetch_request(
            version,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=50 << 20,
            session_id=0,
            session_epoch=-1,
            partitions=[FetchPartitionRequest(TOPIC, None, 0, offset, -1, -1, -1, part_max)],
            forgotten=[],
            by_topic_id=False,
        )
        resp = parse_fetch_response(await conn.send_raw(FETCH, version, body), version)
        for _, pdata in resp.partitions:
            for view in scan_batches(pdata.records, verify_crc=False, allow_partial_tail=True):
                offset = view.next_offset
                total += view.size
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed, total


async def mirror(node: Node, end: int, part_max: int, root: Path) -> tuple[float, int]:
    client = SourceClient({"bootstrap.servers": node.bootstrap}, "bench")
    tid = (await client.topics([TOPIC]))[TOPIC].topic_id
    await client.close()
    logs = LogManager([root], LogConfig(), SystemClock())
    plog = logs.get_or_create(TOPIC, 0, tid)
    done = asyncio.Event()

    def appended(_t: str, _p: int) -> None:
        if plog.log_end_offset >= end:
            done.set()

    owner = sole_leader(plog, SystemClock().now_ms)
    mgr = MirrorFetcherManager(
        9,
        lambda t, p: owner if (t, p) == (TOPIC, 0) else None,
        SystemClock(),
        on_failed=lambda *a: print("FAILED", a),
        on_appended=appended,
    )
    start = time.perf_counter()
    await mgr.add(
        "bench",
        {"bootstrap.servers": node.bootstrap, "max.partition.fetch.bytes": str(part_max)},
        {(TOPIC, 0): tid},
    )
    await asyncio.wait_for(done.wait(), 300)
    elapsed = time.perf_counter() - start
    await mgr.close()
    size = plog.size_bytes
    logs.close()
    return elapsed, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--partition-max-bytes", type=int, default=1 << 20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        node = Node(Path(tmp) / "src")
        node.start()
        try:
            t0 = time.perf_counter()
            fill(node.bootstrap, args.mb)
            print(f"filled {args.mb} MB in {time.perf_counter() - t0:.1f}s")
            end = args.mb * 100
            raw_s, raw_bytes = asyncio.run(raw_loop(node, end, args.partition_max_bytes))
            mir_s, mir_bytes = asyncio.run(
                mirror(node, end, args.partition_max_bytes, Path(tmp) / "dest")
            )
            raw_rate = raw_bytes / raw_s / 1e6
            mir_rate = mir_bytes / mir_s / 1e6
            print(f"raw fetch loop: {raw_bytes / 1e6:.1f} MB in {raw_s:.2f}s = {raw_rate:.1f} MB/s")
            print(f"mirror fetcher: {mir_bytes / 1e6:.1f} MB in {mir_s:.2f}s = {mir_rate:.1f} MB/s")
            print(f"ratio mirror/raw: {mir_rate / raw_rate:.2f}")
        finally:
            node.kill()


if __name__ == "__main__":
    main()

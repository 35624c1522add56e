"""Cluster Mirroring against baselines, all real processes on loopback, one run (~2-3 min).

    python -m bench.mirror_bench [--mb 200] [--partitions 4] [--lag-seconds 10] [--json FILE]

A kmirror source node and a kmirror destination node. Cases:

1. copy: ``--mb`` of lz4 batches (semi-compressible JSON-like values) in ``--partitions``
   partitions, copied three ways, MB/s of source log bytes:
   - raw: a Fetch loop on one connection appending each response's record bytes to a file (no
     mirroring logic: the floor any copier pays for loopback + disk); goal mirror/raw >= 0.5;
   - mirror: ``kafka-mirrors --add`` until the destination's end offsets equal the source's
     (includes topic creation and the PREPARING step);
   - re-produce: a confluent-kafka consumer + producer pipeline (zstd, as MirrorMaker-style
     tools run it) into a plain topic on the destination; goal mirror/re-produce >= 5.
2. lag: a paced producer process writes 20 MB/s for ``--lag-seconds`` into a mirrored topic; the
   bench samples both clusters' end offsets every 10 ms and reports how old the oldest record
   missing at the destination is (0 when caught up): p50/p99/max; goal p99 < 100 ms.
3. failover: a mirrored topic with 100 partitions; ``kafka-mirrors --remove`` until every
   partition describes STOPPED; goal < 1 s.

The machine is shared by both nodes and the clients, as in any loopback benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from broker.cli import mirrors as mirrors_cli
from broker.mirror.source import SourceClient
from broker.network.client import ClientConnection
from protocol.fetch_codec import (
    FETCH,
    FetchPartitionRequest,
    encode_fetch_request,
    parse_fetch_response,
)
from protocol.records import scan_batches
from tests.integration.node import Node

MIRROR = "bench"
COPY_TOPIC = "copy"
LAG_TOPIC = "steady"
FAILOVER_TOPIC = "failover"
FAILOVER_PARTITIONS = 100
LAG_RATE = 20_000_000  # bytes/s
LAG_RECORD = 10_000


@dataclass
class Row:
    case: str
    unit: str
    ours: float
    baseline: float | None
    goal: str
    met: bool


def _value(size: int, rng: random.Random) -> bytes:
    """JSON-ish text that compresses about 3:1, like real event payloads."""
    words = [b"order", b"customer", b"amount", b"currency", b"EUR", b"status", b"shipped"]
    out = bytearray()
    while len(out) < size:
        out += b'{"%s":%d,"%s":"%08x"},' % (
            rng.choice(words),
            rng.randrange(1 << 30),
            rng.choice(words),
            rng.getrandbits(32),
        )
    return bytes(out[:size])


def _wait(what: str, check: Callable[[], bool], timeout: float, step: float = 0.02) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if check():
            return time.perf_counter() - start
        time.sleep(step)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def _tool(dst: Node, *args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    rc = mirrors_cli.main(["--bootstrap-server", dst.bootstrap, *args], out, err)
    if rc != 0:
        raise RuntimeError(f"kafka-mirrors {args}: {err.getvalue()}")
    return out.getvalue()


def _create_topic(node: Node, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    try:
        return [
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        c.close()


def _fill(node: Node, topic: str, partitions: int, mb: int) -> int:
    """Writes ``mb`` MB of values; returns the source log's bytes for the topic."""
    _create_topic(node, topic, partitions)
    p = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 50,
            "batch.size": 1_000_000,
        }
    )
    rng = random.Random(7)
    values = [_value(2000, rng) for _ in range(64)]
    for i in range(mb * 500):
        while True:
            try:
                p.produce(topic, values[i % 64], partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError("fill did not flush")
    return sum(f.stat().st_size for d in node.log_dir.glob(f"{topic}-*") for f in d.glob("*.log"))


# -- case 1: copy --------------------------------------------------------------------------------


async def _raw_copy(src: Node, topic: str, ends: list[int], out: Path) -> tuple[float, int]:
    conn = ClientConnection("127.0.0.1", src.port, "bench-raw")
    await conn.connect()
    version = min(conn.version_for(FETCH), 12)  # by topic name, no session: simplest loop
    offsets = [0] * len(ends)
    total = 0
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    try:
        while any(o < e for o, e in zip(offsets, ends, strict=True)):
            body = encode_fetch_request(
                version,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=50 << 20,
                session_id=0,
                session_epoch=-1,
                partitions=[
                    FetchPartitionRequest(topic, None, p, offsets[p], -1, -1, -1, 1 << 20)
                    for p in range(len(ends))
                    if offsets[p] < ends[p]
                ],
                forgotten=[],
                by_topic_id=False,
            )
            resp = parse_fetch_response(await conn.send_raw(FETCH, version, body), version)
            for _, pdata in resp.partitions:
                part = pdata.partition
                views = list(scan_batches(pdata.records, verify_crc=False, allow_partial_tail=True))
                if not views:
                    continue
                offsets[part] = views[-1].next_offset
                size = sum(v.size for v in views)
                os.write(fd, memoryview(pdata.records)[:size])
                total += size
        os.fsync(fd)
    finally:
        os.close(fd)
        conn.close()
    return time.perf_counter() - start, total


def _reproduce(src: Node, dst: Node, topic: str, ends: list[int]) -> float:
    target = "reproduced"
    _create_topic(dst, target, len(ends))
    total = sum(ends)
    c = Consumer(
        {
            "bootstrap.servers": src.bootstrap,
            "group.id": "bench-reproduce",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 1 << 20,
        }
    )
    p = Producer(
        {
            "bootstrap.servers": dst.bootstrap,
            "compression.type": "zstd",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "enable.idempotence": True,
        }
    )
    c.assign([TopicPartition(topic, i, 0) for i in range(len(ends))])
    seen = 0
    start = time.perf_counter()
    deadline = start + 600
    while seen < total and time.perf_counter() < deadline:
        for m in c.consume(1000, timeout=0.5):
            if m.error():
                continue
            while True:
                try:
                    p.produce(target, m.value(), m.key(), partition=m.partition() or 0)
                    break
                except BufferError:
                    p.poll(0.01)
            seen += 1
        p.poll(0)
    if p.flush(120) != 0 or seen < total:
        raise RuntimeError(f"re-produce incomplete: {seen}/{total}")
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def _mirror_copy(src: Node, dst: Node, topic: str, ends: list[int]) -> float:
    async def run() -> float:
        probe = SourceClient({"bootstrap.servers": dst.bootstrap}, "bench-probe")
        start = time.perf_counter()
        await asyncio.to_thread(_tool, dst, "--add", "--topic", topic, "--mirror", MIRROR)
        try:
            while time.perf_counter() - start < 600:
                try:
                    got = [
                        (await probe.list_offsets(topic, p, -1, isolation_level=0))[0]
                        for p in range(len(ends))
                    ]
                except Exception:
                    got = []
                if got == ends:
                    return time.perf_counter() - start
                await asyncio.sleep(0.01)
        finally:
            await probe.close()
        raise TimeoutError("the mirror copy did not finish in 600 s")

    return asyncio.run(run())


# -- case 2: lag at a steady rate ----------------------------------------------------------------


def paced_produce(bootstrap: str, topic: str, rate: int, seconds: float) -> None:
    """Child process: ``rate`` bytes/s of incompressible LAG_RECORD-byte values (so the log
    grows at ``rate`` too), round-robin, lz4."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": "lz4",
            "linger.ms": 5,
            "enable.idempotence": True,
        }
    )
    values = [os.urandom(LAG_RECORD) for _ in range(16)]
    per_tick = rate * 0.01 / LAG_RECORD  # records per 10 ms
    start = time.perf_counter()
    sent = 0.0
    n = 0
    while (now := time.perf_counter()) - start < seconds:
        due = (now - start) / 0.01 * per_tick
        while sent < due:
            try:
                p.produce(topic, values[n % 16])
            except BufferError:
                p.poll(0.001)
                continue
            sent += 1
            n += 1
        p.poll(0)
        time.sleep(0.002)
    p.flush(30)
    print(json.dumps({"records": n, "seconds": time.perf_counter() - start}), flush=True)


async def _sample_lag(
    src: Node, dst: Node, topic: str, partitions: int, seconds: float
) -> list[float]:
    """Every 10 ms: per partition, the age of the oldest record the source has and the
    destination lacks (from the time the source's end first passed the destination's end)."""
    s = SourceClient({"bootstrap.servers": src.bootstrap}, "bench-lag-src")
    d = SourceClient({"bootstrap.servers": dst.bootstrap}, "bench-lag-dst")
    history: list[list[tuple[float, int]]] = [[] for _ in range(partitions)]
    lags: list[float] = []
    deadline = time.perf_counter() + seconds
    try:
        while time.perf_counter() < deadline:
            tick = time.perf_counter()
            for p in range(partitions):
                src_end = (await s.list_offsets(topic, p, -1, isolation_level=0))[0]
                now = time.perf_counter()
                h = history[p]
                if not h or h[-1][1] != src_end:
                    h.append((now, src_end))
                dst_end = (await d.list_offsets(topic, p, -1, isolation_level=0))[0]
                if dst_end >= src_end:
                    lags.append(0.0)
                    continue
                # first sample at which the source already held offset dst_end
                i = bisect.bisect_right([e for _, e in h], dst_end)
                first_seen = h[i][0] if i < len(h) else now
                lags.append(time.perf_counter() - first_seen)
            await asyncio.sleep(max(0.0, 0.01 - (time.perf_counter() - tick)))
    finally:
        await s.close()
        await d.close()
    return lags


def _lag_case(src: Node, dst: Node, partitions: int, seconds: float) -> list[float]:
    _create_topic(src, LAG_TOPIC, partitions)
    _tool(dst, "--add", "--topic", LAG_TOPIC, "--mirror", MIRROR)
    _wait(
        "the steady topic mirrored",
        lambda: _ends(dst.bootstrap, LAG_TOPIC, partitions) == [0] * partitions,
        60,
        0.1,
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.mirror_bench",
            "paced-produce",
            src.bootstrap,
            LAG_TOPIC,
            str(LAG_RATE),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        time.sleep(1.0)  # connection set-up and first batches are not steady state
        lags = asyncio.run(_sample_lag(src, dst, LAG_TOPIC, partitions, seconds - 1.5))
        out, _ = proc.communicate(timeout=seconds + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    produced = json.loads(out.decode().strip().splitlines()[-1])
    rate = produced["records"] * LAG_RECORD / produced["seconds"] / 1e6
    print(f"  paced producer: {rate:.1f} MB/s over {produced['seconds']:.1f}s")
    return lags


# -- case 3: failover ----------------------------------------------------------------------------


def _failover_case(src: Node, dst: Node) -> float:
    _create_topic(src, FAILOVER_TOPIC, FAILOVER_PARTITIONS)
    p = Producer({"bootstrap.servers": src.bootstrap, "linger.ms": 5})
    for i in range(FAILOVER_PARTITIONS * 10):
        p.produce(FAILOVER_TOPIC, b"x" * 100, partition=i % FAILOVER_PARTITIONS)
    p.flush(30)
    ends = _ends(src.bootstrap, FAILOVER_TOPIC, FAILOVER_PARTITIONS)
    _tool(dst, "--add", "--topic", FAILOVER_TOPIC, "--mirror", MIRROR)
    _wait(
        "the failover topic mirrored",
        lambda: _ends(dst.bootstrap, FAILOVER_TOPIC, FAILOVER_PARTITIONS) == ends,
        120,
        0.2,
    )

    def all_stopped() -> bool:
        rows = [
            line.split()
            for line in _tool(dst, "--describe", "--mirror", MIRROR).splitlines()
            if f" {FAILOVER_TOPIC} " in f" {line} "
        ]
        return len(rows) == FAILOVER_PARTITIONS and all(r[6] == "STOPPED" for r in rows)

    start = time.perf_counter()
    _tool(dst, "--remove", "--topic", FAILOVER_TOPIC, "--mirror", MIRROR)
    _wait("every partition STOPPED", all_stopped, 60, step=0.01)
    return time.perf_counter() - start


# -- main ----------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "paced-produce":
        paced_produce(argv[1], argv[2], int(argv[3]), float(argv[4]))
        return
    ap = argparse.ArgumentParser(prog="python -m bench.mirror_bench", description=__doc__)
    ap.add_argument("--mb", type=int, default=200, help="MB to copy in case 1")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--lag-seconds", type=float, default=10.0)
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument(
        "--quick", action="store_true", help="only the copy, mirror vs raw (bin/bench.sh --check)"
    )
    args = ap.parse_args(argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="mirror-bench-") as tmp:
        base = Path(tmp)
        src = Node(base / "src")
        dst = Node(base / "dst", mirror__metadata__refresh__interval__ms="1000")
        src.start()
        dst.start()
        try:
            props = base / "mirror.properties"
            props.write_text(f"bootstrap.servers={src.bootstrap}\n")
            _tool(dst, "--create", "--mirror", MIRROR, "--mirror-config", str(props))

            t = time.perf_counter()
            log_bytes = _fill(src, COPY_TOPIC, args.partitions, args.mb)
            ends = _ends(src.bootstrap, COPY_TOPIC, args.partitions)
            print(f"filled {log_bytes / 1e6:.0f} MB of log in {time.perf_counter() - t:.1f}s")
            raw_s, raw_bytes = asyncio.run(_raw_copy(src, COPY_TOPIC, ends, base / "raw.bin"))
            mirror_s = _mirror_copy(src, dst, COPY_TOPIC, ends)
            mb = log_bytes / 1e6
            raw_rate, mirror_rate = raw_bytes / 1e6 / raw_s, mb / mirror_s
            rows.append(
                Row(
                    "copy: mirror vs raw fetch+append",
                    "MB/s",
                    mirror_rate,
                    raw_rate,
                    ">= 0.5",
                    mirror_rate / raw_rate >= 0.5,
                )
            )
            if args.quick:
                _report(rows, args.json)
                return
            rep_rate = mb / _reproduce(src, dst, COPY_TOPIC, ends)
            rows.append(
                Row(
                    "copy: mirror vs consume+re-produce (zstd)",
                    "MB/s",
                    mirror_rate,
                    rep_rate,
                    ">= 5",
                    mirror_rate / rep_rate >= 5,
                )
            )

            lags = _lag_case(src, dst, args.partitions, args.lag_seconds)
            p50, p99, worst = (_pct(lags, 0.5), _pct(lags, 0.99), max(lags, default=0.0))
            behind = sum(1 for x in lags if x > 0)
            print(
                f"  lag samples: {len(lags)} ({behind} behind), p50 {p50 * 1e3:.1f} ms,"
                f" max {worst * 1e3:.1f} ms"
            )
            rows.append(Row("lag p99 at 20 MB/s", "ms", p99 * 1e3, None, "< 100", p99 < 0.1))

            fo = _failover_case(src, dst)
            rows.append(Row("failover of 100 partitions", "s", fo, None, "< 1", fo < 1.0))
        finally:
            dst.kill()
            src.kill()
    _report(rows, args.json)


def _report(rows: list[Row], json_path: str | None) -> None:
    print()
    print(f"{'case':45} {'ours':>10} {'baseline':>10} {'ratio':>7}  goal      met")
    for r in rows:
        base_s = f"{r.baseline:10.1f}" if r.baseline is not None else " " * 10
        ratio = f"{r.ours / r.baseline:7.2f}" if r.baseline else " " * 7
        print(
            f"{r.case:45} {r.ours:10.2f} {base_s} {ratio}  {r.goal:9} {'yes' if r.met else 'NO'}"
            f"  ({r.unit})"
        )
    if json_path:
        Path(json_path).write_text(json.dumps([r.__dict__ for r in rows], indent=2))


if __name__ == "__main__":
    main()

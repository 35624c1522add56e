"""The log cleaner: its speed, and what it costs producers while it runs.

Run with ``bin/bench.sh cleaner_bench`` (``python -m bench.cleaner_bench``). Two parts, < 60 s:

1. cleaner MB/s on one core, in this process: a partition of --mib MiB of 100-byte records
   over --keys keys in 1 MiB segments, all dirty, cleaned once by ``LogCleaner`` (one worker):
   dirty MiB read / wall seconds, and how much was kept.
2. produce latency on a real node: a confluent-kafka producer (acks=all, linger.ms=0, one
   100-byte record at a time, the next sent when the previous is acknowledged) into a
   one-partition topic, first while nothing is cleaned (the baseline), then while the cleaner
   compacts a --mib MiB partition of the same node (its topic switched to
   cleanup.policy=compact once filled). p50/p99/max of each, and the p99 ratio (goal <= 2).
   Only samples taken while the clean is under way count (from the node's "beginning
   cleaning" log line to its "cleaned offsets" line). The node's clean time is printed too.

``--threads`` and ``--io-max-bytes`` set log.cleaner.threads and
log.cleaner.io.max.bytes.per.second on the node.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.broker_bench import cpu_seconds, stop_node
from tests.integration.node import Node

MiB = 1 << 20
BIG = "cleaner-big"
LAT = "cleaner-latency"
VALUE = b"v" * 100


# -- part 1: in-process cleaner speed ----------------------------------------------------------


def clean_speed(workdir: Path, mib: int, keys: int) -> tuple[float, float, float]:
    """(MB/s of dirty log, seconds, kept fraction) for one clean of a fully dirty partition."""
    from broker.log import LogConfig, LogManager, ManualClock, ProducerStateManager
    from broker.log.cleaner import CleanerConfig, LogCleaner
    from protocol.records import Record, build_batch

    now = int(time.time() * 1000)
    config = LogConfig.from_properties(
        {"cleanup.policy": "compact", "segment.bytes": str(MiB), "min.cleanable.dirty.ratio": "0"}
    )
    clock = ManualClock(now)
    logs = LogManager([workdir], config, clock)
    plog = logs.get_or_create("speed", 0, uuid.uuid4(), config)
    plog.load_producer_state(ProducerStateManager(plog.dir, ManualClock(now)))
    rng = random.Random(1)
    while plog.size_bytes < mib * MiB:
        records = [Record(key=b"key-%08d" % rng.randrange(keys), value=VALUE) for _ in range(50)]
        plog.append_as_leader(build_batch(records, base_timestamp=now), 0, now_ms=now)
    plog.high_watermark = plog.log_end_offset
    plog.roll()
    cleaner = LogCleaner(logs, CleanerConfig(), clock)
    started = time.perf_counter()
    cleaned = asyncio.run(cleaner.clean_all())
    seconds = time.perf_counter() - started
    asyncio.run(cleaner.close())
    logs.close()
    if cleaned != 1:
        raise RuntimeError("the partition was not cleaned")
    return cleaner.bytes_read / 1e6 / seconds, seconds, cleaner.bytes_written / cleaner.bytes_read


# -- part 2: produce latency on a node ----------------------------------------------------------


@dataclass
class Latencies:
    samples: list[float]

    def pct(self, p: float) -> float:
        s = sorted(self.samples)
        return s[min(len(s) - 1, int(len(s) * p))] * 1000 if s else float("nan")

    def line(self, label: str) -> str:
        return (
            f"{label:<28} {len(self.samples):>7} {self.pct(0.5):>8.2f} {self.pct(0.99):>8.2f}"
            f" {max(self.samples, default=float('nan')) * 1000:>8.2f}"
        )


class Sampler:
    """One record at a time, acks=all: each sample is one produce round trip."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self._p = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.num.messages": 1}
        )
        self._done = False
        self._error: Any = None

    def _cb(self, err: Any, _msg: Any) -> None:
        self._done, self._error = True, err

    def one(self) -> float:
        self._done = False
        started = time.perf_counter()
        self._p.produce(LAT, value=VALUE, partition=0, on_delivery=self._cb)
        while not self._done:
            self._p.poll(0.01)
        if self._error is not None:
            raise RuntimeError(f"produce failed: {self._error}")
        return time.perf_counter() - started

    def close(self) -> None:
        self._p.flush(10)


def fill(bootstrap: str, mib: int, keys: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    rng = random.Random(2)
    for _ in range(mib * MiB // 130):  # ~130 bytes per record in the log
        key = b"key-%08d" % rng.randrange(keys)
        while True:
            try:
                p.produce(BIG, key=key, value=VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(60):
        raise RuntimeError("the fill was not acknowledged")


def admin_call(bootstrap: str, what: str) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures: dict[Any, Any]
    if what == "create":
        big = {"segment.bytes": str(MiB), "min.cleanable.dirty.ratio": "0.01"}
        futures = admin.create_topics(
            [NewTopic(BIG, 1, 1, config=big), NewTopic(LAT, 1, 1)], operation_timeout=20
        )
    else:
        entry = ConfigEntry(
            "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET
        )
        futures = admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, BIG, incremental_configs=[entry])]
        )
    for f in futures.values():
        f.result(30)


class NodeLog:
    """The node's output, read as it grows: when the clean of BIG began and ended."""

    def __init__(self, node: Node) -> None:
        self._path = node.output
        self._pos = self._path.stat().st_size
        self.began = False
        self.seconds: float | None = None

    def poll(self) -> None:
        with self._path.open("rb") as f:
            f.seek(self._pos)
            chunk = f.read()
        self._pos += len(chunk)
        for line in chunk.decode(errors="replace").splitlines():
            if f"{BIG}-0: beginning cleaning" in line:
                self.began = True
            m = re.search(rf"{BIG}-0: cleaned offsets .* in ([0-9.]+) s", line)
            if m:
                self.seconds = float(m.group(1))


def latency_under_cleaning(
    workdir: Path, mib: int, keys: int, seconds: float, overrides: dict[str, str]
) -> tuple[Latencies, Latencies, float, float]:
    node = Node(workdir / "node", 1, log__cleaner__backoff__ms="100", **overrides)
    try:
        node.start()
        admin_call(node.bootstrap, "create")
        fill(node.bootstrap, mib, keys)
        sampler = Sampler(node.bootstrap)
        for _ in range(200):  # warm up: connections, metadata
            sampler.one()
        base: list[float] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            base.append(sampler.one())
        node_log = NodeLog(node)
        admin_call(node.bootstrap, "alter")
        under: list[float] = []
        started: float | None = None
        cpu0 = 0.0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            sample = sampler.one()
            if started is None:
                node_log.poll()
                if node_log.began:
                    started, cpu0 = time.monotonic(), cpu_seconds(node.proc.pid)  # type: ignore[union-attr]
                continue
            under.append(sample)
            if len(under) % 20 == 0:
                node_log.poll()
                if node_log.seconds is not None:
                    break
        else:
            raise RuntimeError("the cleaner did not finish within 120 s")
        assert started is not None and node_log.seconds is not None
        wall = time.monotonic() - started
        cpu = cpu_seconds(node.proc.pid) - cpu0  # type: ignore[union-attr]
        sampler.close()
        return Latencies(base), Latencies(under), node_log.seconds, cpu / wall
    finally:
        stop_node(node, workdir, keep=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=64, help="size of the partition to clean")
    parser.add_argument("--keys", type=int, default=200_000, help="distinct keys in it")
    parser.add_argument("--seconds", type=float, default=4.0, help="baseline sampling time")
    parser.add_argument("--threads", type=int, help="log.cleaner.threads on the node")
    parser.add_argument("--io-max-bytes", type=float, help="log.cleaner.io.max.bytes.per.second")
    parser.add_argument("--skip-speed", action="store_true", help="only the latency part")
    args = parser.parse_args()
    overrides: dict[str, str] = {}
    if args.threads:
        overrides["log__cleaner__threads"] = str(args.threads)
    if args.io_max_bytes:
        overrides["log__cleaner__io__max__bytes__per__second"] = str(args.io_max_bytes)
    workdir = Path(tempfile.mkdtemp(prefix="kmirror-cleaner-bench-"))
    started = time.perf_counter()
    try:
        if not args.skip_speed:
            rate, secs, kept = clean_speed(workdir / "speed", args.mib, args.keys)
            print(
                f"cleaner, one worker: {args.mib} MiB dirty ({args.keys:,} keys) in {secs:.2f} s:"
                f" {rate:.1f} MB/s, {kept:.0%} of the bytes kept"
            )
            shutil.rmtree(workdir / "speed", ignore_errors=True)
        base, under, clean_s, node_cpu = latency_under_cleaning(
            workdir, args.mib, args.keys, args.seconds, overrides
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'produce latency, ms':<28} {'samples':>7} {'p50':>8} {'p99':>8} {'max':>8}")
    print(base.line("nothing cleaned"))
    print(under.line(f"cleaning {args.mib} MiB"))
    ratio = under.pct(0.99) / base.pct(0.99)
    print(
        f"p99 ratio {ratio:.2f} (goal <= 2: {'ok' if ratio <= 2 else 'MISS'});"
        f" the node cleaned {args.mib} MiB in {clean_s:.1f} s"
        f" ({args.mib * MiB / 1e6 / clean_s:.1f} MB/s); the node's own process (not its"
        f" cleaner workers) used {node_cpu:.0%} of a core meanwhile"
    )
    print(f"({time.perf_counter() - started:.0f} s, {os.cpu_count()} cores)", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Stock-client helpers for integration tests: produce and read back with each library.

Every reader returns records as `Rec` so a test can produce with one library and compare what
another library reads, field by field. Every loop here is bounded by a deadline.
"""

import asyncio
import json
import struct
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition as AioTP  # type: ignore[import-untyped]
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTP

# The polling helpers of every integration test, re-exported (defined in tests/waits.py).
from tests.waits import wait_for as wait_for
from tests.waits import wait_for_async as wait_for_async

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Rec:
    """One record as a test compares it (offset and timestamp only where a test needs them)."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    offset: int = -1
    timestamp: int = -1

    def body(self) -> tuple[int, bytes | None, bytes | None, Headers]:
        return (self.partition, self.key, self.value, self.headers)


def make_records(
    tag: str, n: int, partitions: int, headers: bool = True, null_header: bool = True
) -> list[Rec]:
    """n records spread round-robin over partitions; some with null key / empty value / headers."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"{tag}-k{i}".encode()
        value = b"" if i % 11 == 5 else f"{tag}-v{i}-".encode() * (1 + i % 5)
        hdrs: Headers = ()
        if headers and i % 2 == 0:  # repeated keys, empty and null values are all legal
            hdrs = (
                ("h1", f"x{i}".encode()),
                ("h2", b""),
                ("h1", None if null_header and i % 4 == 0 else b"again"),
            )
        out.append(Rec(i % partitions, key, value, hdrs))
    return out


def by_partition(
    recs: Iterable[Rec],
) -> dict[int, list[tuple[bytes | None, bytes | None, Headers]]]:
    out: dict[int, list[tuple[bytes | None, bytes | None, Headers]]] = {}
    for r in recs:
        out.setdefault(r.partition, []).append((r.key, r.value, r.headers))
    return out


# --- admin ------------------------------------------------------------------------------------


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    a = admin(bootstrap)  # keep the handle alive until the future resolves
    fs = a.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    fs[name].result(15)


# --- confluent-kafka --------------------------------------------------------------------------


def _ck_headers(h: Any) -> Headers:
    return tuple((k, v) for k, v in (h or []))


def ck_produce(bootstrap: str, topic: str, recs: Sequence[Rec], **conf: Any) -> list[str]:
    """Produce with confluent-kafka; returns delivery errors (empty when all were acknowledged)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[str] = []

    def cb(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for r in recs:
        kw: dict[str, Any] = {"partition": r.partition, "on_delivery": cb}
        if r.headers:
            kw["headers"] = list(r.headers)
        if r.timestamp >= 0:
            kw["timestamp"] = r.timestamp
        p.produce(topic, key=r.key, value=r.value, **kw)
        p.poll(0)
    left = p.flush(20)
    assert left == 0, f"{left} records not delivered by confluent-kafka"
    return errors


def ck_consumer(bootstrap: str, **conf: Any) -> Consumer:
    base = {
        "bootstrap.servers": bootstrap,
        "group.id": "unused",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    return Consumer({**base, **conf})


def ck_drain(c: Consumer, n: int, timeout: float, idle: float | None = None) -> list[Rec]:
    """Poll until n records arrived (or timeout); with idle, keep polling that long for extras."""
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(out) < n:
        for m in c.consume(num_messages=500, timeout=0.2):
            if m.error():
                raise KafkaException(m.error())
            out.append(ck_rec(m))
    if idle:
        end = time.monotonic() + idle
        while time.monotonic() < end:
            for m in c.consume(num_messages=500, timeout=0.1):
                if not m.error():
                    out.append(ck_rec(m))
    return out


def ck_rec(m: Any) -> Rec:
    return Rec(
        m.partition(), m.key(), m.value(), _ck_headers(m.headers()), m.offset(), m.timestamp()[1]
    )


def ck_values(bootstrap: str, topic: str, expect: int, timeout: float = 60) -> list[bytes]:
    """The values of ``topic`` from the start, with a fresh group, until ``expect`` arrived or
    ``timeout`` passed (fewer then)."""
    cons = ck_consumer(bootstrap, **{"group.id": f"check-{topic}-{time.monotonic_ns()}"})
    cons.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expect and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
    finally:
        cons.close()
    return out


def ck_read_all(
    bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 15
) -> list[Rec]:
    """Read n records from the beginning of every partition (manual assignment, no group)."""
    c = ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        return ck_drain(c, n, timeout, idle=0.3)
    finally:
        c.close()


# --- kafka-python -----------------------------------------------------------------------------


def kp_produce(bootstrap: str, topic: str, recs: Sequence[Rec], **conf: Any) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
    try:
        futures = [
            p.send(topic, key=r.key, value=r.value, headers=list(r.headers), partition=r.partition)
            for r in recs
        ]
        p.flush(timeout=20)
        if conf.get("acks", 1) != 0:
            for f in futures:
                f.get(timeout=5)
    finally:
        p.close(timeout=5)


def kp_read_all(
    bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 15
) -> list[Rec]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [KpTP(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        return kp_drain(c, n, timeout)
    finally:
        c.close()


def kp_drain(c: KafkaConsumer, n: int, timeout: float) -> list[Rec]:
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(out) < n:
        for batch in c.poll(timeout_ms=200).values():
            out.extend(
                Rec(m.partition, m.key, m.value, tuple(m.headers or ()), m.offset, m.timestamp)
                for m in batch
            )
    return out


# --- aiokafka ---------------------------------------------------------------------------------


def aio_produce(bootstrap: str, topic: str, recs: Sequence[Rec], **conf: Any) -> None:
    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
        await p.start()
        try:
            futs = [
                await p.send(
                    topic, key=r.key, value=r.value, headers=list(r.headers), partition=r.partition
                )
                for r in recs
            ]
            await asyncio.wait_for(asyncio.gather(*futs), 20)
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), 40))


def aio_read_all(
    bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 15
) -> list[Rec]:
    async def run() -> list[Rec]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        out: list[Rec] = []
        try:
            tps = [AioTP(topic, p) for p in range(partitions)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and len(out) < n:
                got = await c.getmany(timeout_ms=200)
                for batch in got.values():
                    out.extend(
                        Rec(
                            m.partition,
                            m.key,
                            m.value,
                            tuple(m.headers or ()),
                            m.offset,
                            m.timestamp,
                        )
                        for m in batch
                    )
        finally:
            await c.stop()
        return out

    return asyncio.run(asyncio.wait_for(run(), timeout + 20))


# --- kcat -------------------------------------------------------------------------------------


def kcat_produce(
    bootstrap: str, topic: str, lines: Sequence[str], partition: int, codec: str
) -> None:
    """kcat -P: one record per line, `key:value`, header h=kcat on every record."""
    subprocess.run(
        [
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            str(partition),
            "-z",
            codec,
            "-K",
            ":",
            "-H",
            "src=kcat",
        ],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=30,
    )


def kcat_read_all(bootstrap: str, topic: str, timeout: float = 20) -> list[Rec]:
    """kcat -C -o beginning -e -J: every record of every partition, as JSON lines."""
    res = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q"],
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = []
    for line in res.stdout.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        h = d.get("headers") or []
        hdrs = tuple(
            (h[i], None if h[i + 1] is None else h[i + 1].encode()) for i in range(0, len(h), 2)
        )
        key = d["key"].encode() if d.get("key") is not None else None
        value = d["payload"].encode() if d.get("payload") is not None else None
        out.append(Rec(d["partition"], key, value, hdrs, d["offset"], d.get("ts", -1)))
    return out


# --- on-disk check -----------------------------------------------------------------------------

CODEC_IDS = {"none": 0, None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(log_dir: Path, topic: str) -> set[int]:
    """Compression ids (attributes & 7) of every batch in the topic's segments, read from disk:
    proves the client really compressed and the broker kept the batch as it came."""
    codecs: set[int] = set()
    for seg in log_dir.glob(f"{topic}-*/*.log"):
        data = seg.read_bytes()
        pos = 0
        while pos + 23 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (attrs,) = struct.unpack_from(">h", data, pos + 21)
            codecs.add(attrs & 7)
            pos += 12 + length
    return codecs


READERS: dict[str, Callable[[str, str, int, int], list[Rec]]] = {
    "confluent": ck_read_all,
    "kafka-python": kp_read_all,
    "aiokafka": aio_read_all,
    "kcat": lambda b, t, _p, _n: kcat_read_all(b, t),
}

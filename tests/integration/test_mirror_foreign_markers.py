"""A source whose COMMIT/ABORT markers carry the type in the key and a null (or short) value, as
some Kafka-compatible brokers write them, mirrored into a kmirror node.

The source is a real kmirror node whose partition log is replaced, while it is stopped, with
such transactions (built with the project's batch builder); it recovers the segment on restart.
On the destination a stock read_committed consumer must see every committed record, the LSO must
reach the log end, and failover (``--remove``, truncate to the LSO) must delete nothing.

Second test: a control batch the mirror cannot read (no key, here) fails its partition only:
FAILED in ``--describe`` and in the failed-partitions metric, the reason in the broker's log,
the records before it mirrored, the topic's other partition still mirroring.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, IsolationLevel, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from confluent_kafka.cimpl import NewTopic

from protocol.records import ControlType, Record, build_batch, control_key, scan_batches

from .clients import wait_for
from .mirror_helpers import (
    create_mirror,
    describe_rows,
    mirror_tool,
    scrape,
    total,
    write_mirror_config,
)
from .node import Node

TOPIC = "foreign-txns"
T0 = int(time.time() * 1000)


def _records(tag: str, n: int) -> list[Record]:
    return [
        Record(key=b"%s-k%d" % (tag.encode(), i), value=b"%s%d" % (tag.encode(), i))
        for i in range(n)
    ]


def _data(offset: int, values: list[Record], pid: int = -1, seq: int = -1) -> bytes:
    return build_batch(
        values,
        base_offset=offset,
        partition_leader_epoch=0,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        is_transactional=pid >= 0,
        base_timestamp=T0,
    )


def _marker(offset: int, pid: int, commit: bool, value: bytes | None = None) -> bytes:
    """COMMIT/ABORT as the foreign broker writes it: type in the key, ``value`` (null)."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    return build_batch(
        [Record(key=control_key(kind), value=value)],
        base_offset=offset,
        partition_leader_epoch=0,
        producer_id=pid,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
        base_timestamp=T0,
    )


def _foreign_segment() -> tuple[bytes, list[tuple[int, bytes]], int]:
    """The segment, the (offset, value) of every committed record, and the log end offset."""
    c1, a, c2, c3, c4 = (
        _records(t, n) for t, n in (("c", 3), ("a", 2), ("d", 2), ("e", 1), ("f", 1))
    )
    batches = [
        _data(0, c1, pid=1000, seq=0),  # 0-2
        _marker(3, 1000, commit=True),  # null value
        _data(4, a, pid=2000, seq=0),  # 4-5, aborted
        _marker(6, 2000, commit=False),  # null value
        _data(7, c2, pid=1000, seq=3),  # 7-8
        _marker(9, 1000, commit=True, value=b"\x00\x00"),  # short value
        _data(10, [Record(key=b"p0", value=b"plain0")]),  # 10
        _data(11, c3, pid=3000, seq=0),  # 11: two transactions interleaved
        _data(12, c4, pid=4000, seq=0),  # 12
        _marker(13, 3000, commit=True),
        _marker(14, 4000, commit=True),
        _data(15, [Record(key=b"p1", value=b"plain1")]),  # 15
    ]
    committed = [(0, b"c0"), (1, b"c1"), (2, b"c2"), (7, b"d0"), (8, b"d1")]
    committed += [(10, b"plain0"), (11, b"e0"), (12, b"f0"), (15, b"plain1")]
    return b"".join(batches), committed, 16


def _seed_source(src: Node, partitions: int, segments: dict[int, bytes]) -> None:
    """Create the topic, then replace the given partitions' logs with ``segments``."""
    src.start()
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(15)
    assert src.stop() == 0
    for partition, data in segments.items():
        part = src.log_dir / f"{TOPIC}-{partition}"
        for f in part.iterdir():
            if f.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
                f.unlink()
        (part / f"{0:020d}.log").write_bytes(data)
    (src.log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)  # recover the new segments
    src.start()


def _latest(bootstrap: str, isolation: IsolationLevel, partition: int = 0) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(TOPIC, partition)
    try:
        futures = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation)
        return int(futures[tp].result(15).offset)
    except Exception:  # the destination's topic may not exist yet
        return -1


def _read_committed(bootstrap: str) -> list[tuple[int, bytes]]:
    """What a stock read_committed consumer delivers until it reports the end (the LSO)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{time.monotonic_ns()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return got
            got.append((m.offset(), m.value()))
    finally:
        c.close()
    raise AssertionError(f"no end of partition: {got}")


def _log_bytes(node: Node, partition: int = 0) -> bytes:
    return b"".join(
        p.read_bytes() for p in sorted((node.log_dir / f"{TOPIC}-{partition}").glob("*.log"))
    )


def test_null_value_markers_are_mirrored_and_end_their_transactions(tmp_path: Path) -> None:
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst")
    segment, committed, end = _foreign_segment()
    try:
        _seed_source(src, 1, {0: segment})
        dst.start()
        create_mirror(
            dst, "m1", write_mirror_config(tmp_path / "mirror.properties", src.bootstrap), TOPIC
        )
        wait_for(
            lambda: _latest(dst.bootstrap, IsolationLevel.READ_UNCOMMITTED) == end,
            30,
            f"the mirror to copy the partition up to {end}",
            step=0.1,
        )
        mirrored = [(b.base_offset, bytes(b.buffer)) for b in scan_batches(_log_bytes(dst))]
        assert mirrored == [(b.base_offset, bytes(b.buffer)) for b in scan_batches(segment)]

        # Every transaction ended: the LSO is the log end, read_committed sees every commit.
        assert _latest(dst.bootstrap, IsolationLevel.READ_COMMITTED) == end
        assert _read_committed(dst.bootstrap) == committed

        # Failover truncates to the LSO: nothing committed goes, MIRROR_PID_RESET follows.
        mirror_tool(dst, "--remove", "--topic", TOPIC, "--mirror", "m1")
        wait_for(
            lambda: _latest(dst.bootstrap, IsolationLevel.READ_UNCOMMITTED) == end + 1,
            30,
            "failover (the MIRROR_PID_RESET after the mirrored log)",
            step=0.1,
        )
        assert _latest(dst.bootstrap, IsolationLevel.READ_COMMITTED) == end + 1
        assert _read_committed(dst.bootstrap) == committed
        assert "truncating" not in dst.output.read_text(errors="replace")
    finally:
        dst.kill()
        src.kill()


def test_an_unreadable_control_batch_fails_only_its_partition(tmp_path: Path) -> None:
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst", mirror__metadata__refresh__interval__ms="500")
    keyless = build_batch(
        [Record(key=None, value=b"\x00\x00\x00\x00\x00\x00")],
        base_offset=2,
        partition_leader_epoch=0,
        is_control=True,
        base_timestamp=T0,
    )
    bad = b"".join(
        [
            _data(0, [Record(key=b"k0", value=b"v0"), Record(key=b"k1", value=b"v1")]),
            keyless,
            _data(3, [Record(key=b"k3", value=b"v3")]),
        ]
    )
    try:
        _seed_source(src, 2, {0: bad})
        p = Producer({"bootstrap.servers": src.bootstrap})
        for i in range(5):
            p.produce(TOPIC, value=b"ok%d" % i, partition=1)
        assert p.flush(20) == 0
        dst.start()
        create_mirror(
            dst, "m1", write_mirror_config(tmp_path / "mirror.properties", src.bootstrap), TOPIC
        )

        def states() -> dict[str, str]:
            return {row[2]: row[6] for row in describe_rows(dst, "m1", TOPIC)}

        wait_for(
            lambda: states() == {"0": "FAILED", "1": "MIRRORING"},
            30,
            "partition 0 FAILED, partition 1 MIRRORING",
            step=0.2,
        )
        # The records before the unreadable batch are mirrored; the partition stops there.
        assert _latest(dst.bootstrap, IsolationLevel.READ_UNCOMMITTED, 0) == 2
        reason = "unreadable control batch at offset 2: control record key must have"
        assert reason in dst.output.read_text(errors="replace")
        described = mirror_tool(dst, "--describe", "--mirror", "m1")
        assert f"{TOPIC}-0 FAILED: {reason}" in described, described
        samples = scrape(dst)
        assert total(samples, "kafka_server_mirror_failed_partitions", mirror="m1") == 1
        assert total(samples, "kafka_server_mirror_partitions", mirror="m1", state="FAILED") == 1

        # The other partition keeps mirroring.
        for i in range(5, 8):
            p.produce(TOPIC, value=b"ok%d" % i, partition=1)
        assert p.flush(20) == 0
        wait_for(
            lambda: _latest(dst.bootstrap, IsolationLevel.READ_UNCOMMITTED, 1) == 8,
            30,
            "partition 1 to keep mirroring",
            step=0.1,
        )
        assert states() == {"0": "FAILED", "1": "MIRRORING"}
    finally:
        dst.kill()
        src.kill()

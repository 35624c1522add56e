"""What a leader makes of produced batches, against a real node and stock clients.

1. The batch max timestamp comes from the records, not from the producer's header: librdkafka
   writes MaxTimestamp 0 when every record has timestamp -1, and a header of 0 used to make the
   segment look like 1970, so a 7-day time retention deleted the records at its next scan.
2. A batch refused for some of its records names them (KIP-467 record_errors, error_message).
"""

import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from crc32c import crc32c
from kafka.net.compat import KafkaNetClient  # type: ignore[import-untyped]
from kafka.protocol.producer import ProduceRequest  # type: ignore[import-untyped]
from kafka.record.memory_records import MemoryRecordsBuilder  # type: ignore[import-untyped]

from protocol.records import BatchView, iter_records, scan_batches

from .clients import create_topic
from .node import Node

WEEK_MS = 7 * 24 * 3600 * 1000
RETENTION_CHECK_MS = 200
INVALID_RECORD = 87
INVALID_TIMESTAMP = 32


@pytest.fixture
def vnode(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "node1", log__retention__check__interval__ms=str(RETENTION_CHECK_MS))
    n.start()
    yield n
    n.kill()


def stored_batches(node: Node, topic: str) -> list[BatchView]:
    data = b"".join(p.read_bytes() for p in sorted((node.log_dir / f"{topic}-0").glob("*.log")))
    return list(scan_batches(data))


def read_all(bootstrap: str, topic: str, expect: int, timeout: float = 15) -> list[Any]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m)
        # a little longer: nothing more may come
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                out.append(m)
        return out
    finally:
        c.close()


def earliest_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"w-{topic}"})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low)
    finally:
        c.close()


def outlive_retention_scans() -> None:
    time.sleep(RETENTION_CHECK_MS * 8 / 1000)


def raw_produce(node: Node, topic: str, records: bytes, version: int = 9) -> Any:
    """One Produce request carrying ``records`` as they are, via kafka-python's own classes."""
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=records)])
        ],
        min_version=version,
        max_version=version,
    )
    client = KafkaNetClient(bootstrap_servers=node.bootstrap)
    try:
        client.check_version()
        response = client.send_and_receive(1, request, timeout_ms=15_000)
    finally:
        client.close()
    (answer,) = [p for t in response.responses for p in t.partition_responses]
    return answer


def kp_batch(
    records: list[tuple[int, bytes | None, bytes]], *, max_timestamp: int | None = None
) -> bytes:
    """A v2 batch from kafka-python's builder; ``max_timestamp`` overwrites the header's claim
    (CRC recomputed), as a client with a buggy writer would send it."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for ts, key, value in records:
        builder.append(ts, key, value)
    builder.close()
    raw = bytearray(builder.buffer())
    if max_timestamp is not None:
        struct.pack_into(">q", raw, 35, max_timestamp)
        struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


# -- 1. the batch max timestamp -----------------------------------------------------------


def test_librdkafka_records_without_timestamp_are_stored_with_minus_one_and_kept(
    vnode: Node,
) -> None:
    """confluent-kafka with timestamp=-1 on every record: librdkafka's header says
    MaxTimestamp 0 (its running max starts at 0). Kafka's leader recomputes it from the records,
    which gives -1 (no record has a timestamp); retention then uses the segment's mtime."""
    topic = "no-timestamps"
    create_topic(vnode.bootstrap, topic, config={"retention.ms": str(WEEK_MS)})
    p = Producer({"bootstrap.servers": vnode.bootstrap, "linger.ms": 50})
    for i in range(3):
        p.produce(topic, value=b"v%d" % i, partition=0, timestamp=-1)
    assert p.flush(15) == 0
    outlive_retention_scans()  # a header of 0 made them 55 years old: deleted here
    assert earliest_offset(vnode.bootstrap, topic) == 0
    assert [m.value() for m in read_all(vnode.bootstrap, topic, 3)] == [b"v0", b"v1", b"v2"]
    batches = stored_batches(vnode, topic)  # one, unless librdkafka sent before lingering
    assert [r.timestamp for b in batches for r in iter_records(b)] == [-1, -1, -1]
    assert all((b.base_timestamp, b.max_timestamp) == (-1, -1) for b in batches)
    assert all(b.crc_ok() for b in batches)


def test_a_header_max_timestamp_of_zero_is_rewritten_and_retention_keeps_the_records(
    vnode: Node,
) -> None:
    topic = "zero-header"
    create_topic(vnode.bootstrap, topic, config={"retention.ms": str(WEEK_MS)})
    now = int(time.time() * 1000)
    records = [(now + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    answer = raw_produce(vnode, topic, kp_batch(records, max_timestamp=0))
    assert answer.error_code == 0
    outlive_retention_scans()
    assert earliest_offset(vnode.bootstrap, topic) == 0
    got = read_all(vnode.bootstrap, topic, 3)
    assert [(m.value(), m.timestamp()[1]) for m in got] == [(v, ts) for ts, _k, v in records]
    (batch,) = stored_batches(vnode, topic)
    assert batch.max_timestamp == now + 2  # the records' max, as Kafka's leader stores it
    assert batch.base_timestamp == now
    assert batch.crc_ok()


# -- 2. KIP-467 record errors ---------------------------------------------------------------


def test_librdkafka_fails_exactly_the_keyless_records_of_a_compacted_batch(vnode: Node) -> None:
    """100 records in one batch, every tenth without a key, to a compacted topic: the batch is
    refused, and from the response's record_errors librdkafka fails the 10 keyless records with
    INVALID_RECORD and the 90 others with _INVALID_DIFFERENT_RECORD (as librdkafka's own test
    0011 expects from Kafka)."""
    topic = "compacted-record-errors"
    create_topic(vnode.bootstrap, topic, config={"cleanup.policy": "compact"})
    p = Producer(
        {
            "bootstrap.servers": vnode.bootstrap,
            "linger.ms": 1000,
            "batch.num.messages": 1000,
        }
    )
    p.list_topics(topic, timeout=10)
    reports: dict[int, Any] = {}

    def report(index: int) -> Any:
        return lambda err, _msg: reports.__setitem__(index, err)

    for i in range(100):
        key = None if i % 10 == 0 else b"k%d" % i
        p.produce(topic, key=key, value=b"v%d" % i, partition=0, on_delivery=report(i))
    assert p.flush(20) == 0
    codes = {i: (err.code() if err is not None else 0) for i, err in reports.items()}
    bad = sorted(i for i, c in codes.items() if c == KafkaError.INVALID_RECORD)
    others = sorted(i for i, c in codes.items() if c == KafkaError._INVALID_DIFFERENT_RECORD)
    assert bad == list(range(0, 100, 10)), codes
    assert len(others) == 90, codes
    assert stored_batches(vnode, topic) == []


def test_record_errors_name_the_keyless_records(vnode: Node) -> None:
    topic = "compacted-raw"
    create_topic(vnode.bootstrap, topic, config={"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    records = [(now, None if i % 10 == 3 else b"k%d" % i, b"v") for i in range(100)]
    for version in (8, 9, 12):
        answer = raw_produce(vnode, topic, kp_batch(records), version=version)
        assert answer.error_code == INVALID_RECORD
        assert [e.batch_index for e in answer.record_errors] == list(range(3, 100, 10))
        assert all("key" in e.batch_index_error_message for e in answer.record_errors)
        assert "10 record(s)" in answer.error_message
    assert stored_batches(vnode, topic) == []


def test_record_errors_name_the_records_with_out_of_range_timestamps(vnode: Node) -> None:
    """message.timestamp.after.max.ms is one hour by default: the two records two hours ahead
    are named, whatever the header's max timestamp claims."""
    topic = "future"
    create_topic(vnode.bootstrap, topic)
    now = int(time.time() * 1000)
    hours = [0, 0, 2, 0, 0, 2]
    records = [(now + h * 3600_000, b"k", b"v") for h in hours]
    answer = raw_produce(vnode, topic, kp_batch(records, max_timestamp=now))
    assert answer.error_code == INVALID_TIMESTAMP
    assert [e.batch_index for e in answer.record_errors] == [2, 5]
    assert answer.error_message
    assert stored_batches(vnode, topic) == []

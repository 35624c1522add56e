"""Transactions through a mirror: librdkafka's mock cluster as the source, written by a stock
confluent-kafka transactional producer (a committed, an aborted and an open transaction, then
plain records), mirrored byte for byte into a kmirror node.

On the destination, stock clients must see what Kafka would show them: a read_committed
consumer exactly the committed records (the aborted ones filtered with the Fetch response's
aborted-transaction list, everything from the open transaction on held back by the LSO), a
read_uncommitted one everything; ListOffsets READ_COMMITTED answers the LSO, the open
transaction's first offset; DescribeProducers shows the producer and its open transaction.
Failover then truncates to the LSO (KIP-1279), leaving no hanging transaction.

The mock writes its COMMIT/ABORT markers with CRC 0; the mirror stores them with the CRC filled
in (see ``PartitionLog.append_raw``), which the on-disk check below verifies.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from protocol.records import ControlType, iter_records, parse_control_record, scan_batches
from protocol.txn_index import decode_entries

from .clients import wait_for
from .mirror_helpers import MockCluster, create_mirror, mirror_tool, write_mirror_config
from .node import Node

TOPIC = "payments"
COMMITTED = [b"c%d" % i for i in range(5)]
ABORTED = [b"a%d" % i for i in range(5)]
OPEN = [b"o%d" % i for i in range(3)]
PLAIN = [b"n%d" % i for i in range(2)]
# The mock's offsets: c 0-4, COMMIT 5, a 6-10, ABORT 11, o 12-14, n 15-16.
OPEN_FIRST = len(COMMITTED) + 1 + len(ABORTED) + 1
END = OPEN_FIRST + len(OPEN) + len(PLAIN)


def _read(bootstrap: str, isolation: str) -> list[tuple[int, bytes]]:
    """Every record a stock consumer delivers until it reports the partition's end (for
    read_committed librdkafka's end is the LSO)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"probe-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
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
    raise AssertionError(f"no end of partition for {isolation}: {got}")


def _read_kafka_python(bootstrap: str, until: int) -> list[tuple[int, bytes]]:
    """kafka-python, read_committed (it checks CRCs, markers included): every record delivered
    until its position reaches ``until``."""
    tp = KpTopicPartition(TOPIC, 0)
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    c.assign([tp])
    c.seek(tp, 0)
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    try:
        while c.position(tp) < until:
            assert time.monotonic() < deadline, (c.position(tp), got)
            for records in c.poll(timeout_ms=200).values():
                got.extend((r.offset, r.value) for r in records)
    finally:
        c.close()
    return got


def _latest(bootstrap: str, isolation: IsolationLevel) -> int:
    """The end offset; -1 while the admin client's leader epoch is behind the partition's (the
    failover's epoch bump fences it until its next Metadata, as Kafka's brokers do)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(TOPIC, 0)
    futures = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=isolation)
    try:
        return int(futures[tp].result(15).offset)
    except KafkaException as e:
        if e.args[0].code() in (KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH):
            return -1
        raise


def _segments(node: Node, suffix: str) -> list[Path]:
    return sorted((node.log_dir / f"{TOPIC}-0").glob(f"*{suffix}"))


@pytest.fixture
def source() -> Iterator[tuple[MockCluster, Producer]]:
    mock = MockCluster(brokers=1)
    mock.create_topic(TOPIC, 1)
    txn = Producer({"bootstrap.servers": mock.bootstrap, "transactional.id": "pay-1"})
    try:
        txn.init_transactions(30)
        for values, commit in ((COMMITTED, True), (ABORTED, False)):
            txn.begin_transaction()
            for v in values:
                txn.produce(TOPIC, value=v, partition=0)
            assert txn.flush(10) == 0
            (txn.commit_transaction if commit else txn.abort_transaction)(30)
        txn.begin_transaction()
        for v in OPEN:
            txn.produce(TOPIC, value=v, partition=0)
        assert txn.flush(10) == 0  # left open
        plain = Producer({"bootstrap.servers": mock.bootstrap})
        for v in PLAIN:
            plain.produce(TOPIC, value=v, partition=0)
        assert plain.flush(10) == 0
        yield mock, txn
    finally:
        mock.close()


def test_read_committed_on_a_mirror_of_transactions(
    tmp_path: Path, source: tuple[MockCluster, Producer]
) -> None:
    mock, _txn = source
    # The source, read directly: all data records (the mock ignores isolation levels).
    assert [v for _, v in _read(mock.bootstrap, "read_uncommitted")] == (
        COMMITTED + ABORTED + OPEN + PLAIN
    )
    dst = Node(tmp_path / "dst")
    dst.start()
    try:
        props = write_mirror_config(tmp_path / "mirror.properties", mock.bootstrap)
        create_mirror(dst, "mock", props, TOPIC)
        wait_for(
            lambda: _latest(dst.bootstrap, IsolationLevel.READ_UNCOMMITTED) == END,
            30,
            "the mirror to copy the whole source partition",
        )

        # The LSO stops at the open transaction, wherever it is asked.
        assert _latest(dst.bootstrap, IsolationLevel.READ_COMMITTED) == OPEN_FIRST
        committed = _read(dst.bootstrap, "read_committed")
        assert committed == list(enumerate(COMMITTED))
        assert _read_kafka_python(dst.bootstrap, OPEN_FIRST) == committed
        uncommitted = _read(dst.bootstrap, "read_uncommitted")
        assert [v for _, v in uncommitted] == COMMITTED + ABORTED + OPEN + PLAIN

        # DescribeProducers: the mirrored producer, its open transaction at OPEN_FIRST.
        kadmin = KafkaAdminClient(bootstrap_servers=dst.bootstrap)
        try:
            state = kadmin.describe_producers([KpTopicPartition(TOPIC, 0)])
        finally:
            kadmin.close()
        (producer,) = state[KpTopicPartition(TOPIC, 0)].active_producers
        assert producer.producer_id >= 0
        assert producer.current_transaction_start_offset == OPEN_FIRST
        assert producer.last_sequence == len(COMMITTED) + len(ABORTED) + len(OPEN) - 1

        # On disk: the markers with valid CRCs, the abort in the transaction index.
        raw = b"".join(p.read_bytes() for p in _segments(dst, ".log"))
        markers = [b for b in scan_batches(raw) if b.is_control]
        assert [b.base_offset for b in markers] == [len(COMMITTED), OPEN_FIRST - 1]
        assert all(b.crc_ok() for b in markers)
        (index,) = _segments(dst, ".txnindex")
        entries, torn = decode_entries(index.read_bytes())
        assert torn == 0
        assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == [
            (producer.producer_id, len(COMMITTED) + 1, OPEN_FIRST - 1)
        ]

        # Failover: truncated to the LSO, then MIRROR_PID_RESET; nothing hangs any more.
        mirror_tool(dst, "--remove", "--topic", TOPIC, "--mirror", "mock")
        wait_for(
            lambda: _latest(dst.bootstrap, IsolationLevel.READ_UNCOMMITTED) == OPEN_FIRST + 1,
            30,
            "failover truncation to the LSO",
        )
        assert _latest(dst.bootstrap, IsolationLevel.READ_COMMITTED) == OPEN_FIRST + 1
        assert [v for _, v in _read(dst.bootstrap, "read_uncommitted")] == COMMITTED + ABORTED
        assert [v for _, v in _read(dst.bootstrap, "read_committed")] == COMMITTED
        raw = b"".join(p.read_bytes() for p in _segments(dst, ".log"))
        last = list(scan_batches(raw))[-1]
        record = next(iter_records(last))
        assert parse_control_record(record.key, record.value).type == ControlType.MIRROR_PID_RESET
    finally:
        dst.kill()

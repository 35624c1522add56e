"""Log compaction on a real node, driven by confluent-kafka: a compacted topic keeps the
latest value of each key at its original offset, and ``__consumer_offsets`` stops growing
with the commits of one group (and still loads after a restart)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from .clients import create_topic, wait_for
from .mirror_helpers import scrape
from .node import Node


@pytest.fixture
def cnode(tmp_path: Path) -> Iterator[Node]:
    n = Node(
        tmp_path / "node1",
        log__cleaner__backoff__ms="200",
        # the smallest segment.bytes a topic accepts (Kafka 4.x: 1 MiB)
        offsets__topic__segment__bytes="1048576",
    )
    n.start()
    yield n
    n.kill()


def log_bytes(node: Node, prefix: str) -> int:
    return sum(p.stat().st_size for p in node.log_dir.glob(f"{prefix}*/*.log"))


def test_compacted_topic_keeps_latest_value_per_key(cnode: Node) -> None:
    topic = "compacted"
    create_topic(
        cnode.bootstrap,
        topic,
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "1048576",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    produced: dict[int, tuple[bytes | None, bytes | None]] = {}
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            produced[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": cnode.bootstrap, "linger.ms": 0})
    for i in range(300):  # ~2.8 MiB: two closed segments and the active one
        key = f"key-{i % 5}".encode()
        p.produce(
            topic,
            key=key,
            value=f"{key.decode()}-update-{i:04d}-".encode() * 500,
            partition=0,
            on_delivery=on_delivery,
        )
        p.poll(0)
    assert p.flush(20) == 0 and not errors
    latest = {k: (o, v) for o, (k, v) in sorted(produced.items())}
    # Payload bytes alone (the cleaner may already be at work): over two 1 MiB segments.
    written = sum(len(v or b"") for _, v in produced.values())
    assert written > 2 * 1024 * 1024

    wait_for(
        lambda: log_bytes(cnode, topic + "-") < written / 2, 30, "the compacted topic to shrink"
    )

    c = Consumer(
        {"bootstrap.servers": cnode.bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    last = max(produced)
    seen: dict[int, tuple[bytes | None, bytes | None]] = {}
    deadline = time.monotonic() + 20
    while last not in seen and time.monotonic() < deadline:
        for m in c.consume(num_messages=500, timeout=0.2):
            assert m.error() is None, m.error()
            offset = m.offset()
            assert offset is not None
            seen[offset] = (m.key(), m.value())
    c.close()
    assert last in seen
    assert all(produced[o] == kv for o, kv in seen.items())  # same records, same offsets
    for k, (at, value) in latest.items():
        assert seen[at] == (k, value)
    assert len(seen) < len(produced) / 2

    # Kafka's LogCleaner / LogCleanerManager gauges on the Prometheus endpoint.
    scraped = scrape(cnode)
    one = {n: values[0] for n, values in scraped.items() if n.startswith("kafka_log_logcleaner")}
    assert 0 < one["kafka_log_logcleaner_cleaner_recopy_percent"][1] < 50
    assert one["kafka_log_logcleaner_deadthreadcount"][1] == 0
    assert one["kafka_log_logcleaner_max_clean_time_secs"][1] >= 0
    assert one["kafka_log_logcleaner_max_buffer_utilization_percent"][1] == 0  # 5 keys
    assert 0 <= one["kafka_log_logcleanermanager_time_since_last_run_ms"][1] < 60_000
    assert one["kafka_log_logcleanermanager_uncleanable_partitions_count"] == (
        {"log_directory": str(cnode.log_dir)},
        0,
    )
    assert scraped["kafka_log_logcleanermanager_uncleanable_bytes"][0][1] == 0
    assert "kafka_log_logcleanermanager_max_dirty_percent" in scraped
    assert "kafka_log_logcleaner_max_compaction_delay_secs" in scraped


def test_consumer_offsets_shrink_and_reload(cnode: Node) -> None:
    topic = "committed"
    create_topic(cnode.bootstrap, topic)
    c = Consumer(
        {
            "bootstrap.servers": cnode.bootstrap,
            "group.id": "busy-group",
            "enable.auto.commit": False,
        }
    )
    meta = "m" * 4000
    for i in range(1, 301):  # ~1.2 MiB of commit records: at least one closed segment
        c.commit(offsets=[TopicPartition(topic, 0, i, meta)], asynchronous=False)
    c.close()
    written = 300 * len(meta)  # payload alone: the first 1 MiB segment is closed
    # Compacted, the closed segments keep one offset record.
    wait_for(
        lambda: log_bytes(cnode, "__consumer_offsets-") < written - 512 * 1024,
        30,
        "__consumer_offsets to be compacted",
    )
    assert cnode.stop() == 0
    cnode.start()
    c = Consumer(
        {
            "bootstrap.servers": cnode.bootstrap,
            "group.id": "busy-group",
            "enable.auto.commit": False,
        }
    )
    (tp,) = c.committed([TopicPartition(topic, 0)], timeout=15)
    c.close()
    assert (tp.offset, tp.metadata) == (300, meta)

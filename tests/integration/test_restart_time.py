"""Restart time after a kill -9 is bounded by what was written since the last recovery
checkpoint, not by the size of the log: committed offsets are fetchable well within a stock
consumer's 10 s session timeout, and the start-up replays only the tail."""

import os
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .node import Node

pytestmark = pytest.mark.serial  # measures time: bin/test.sh runs it alone

TOPIC = "restart-time"
GROUP = "restart-time-g"
PARTITIONS = 4
MiB = 1 << 20
RECORD = 1024
CHECKPOINT_MS = 1000
BOUND_S = 10.0  # a stock consumer's session timeout


def _produce(node: Node, mib: int) -> int:
    producer = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 16384,  # the Java client's default: many small batches
        }
    )
    value = os.urandom(RECORD)
    count = mib * MiB // RECORD
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    return count


def _committed(node: Node) -> list[int] | None:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": GROUP})
    try:
        got = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=1)
    except KafkaException:
        return None
    finally:
        consumer.close()
    if any(tp.error is not None for tp in got):
        return None
    return [tp.offset for tp in got]


def _replayed(text: str) -> int:
    return sum(int(n) for n in re.findall(r"producer state rebuilt from (\d+) batches", text))


def test_committed_offsets_are_fetchable_soon_after_a_kill_9(tmp_path: Path) -> None:
    node = Node(
        tmp_path / "node",
        num__partitions=str(PARTITIONS),
        log__flush__offset__checkpoint__interval__ms=str(CHECKPOINT_MS),
    )
    node.start()
    try:
        count = _produce(node, 48)
        consumer = Consumer(
            {"bootstrap.servers": node.bootstrap, "group.id": GROUP, "enable.auto.commit": False}
        )
        offsets = [TopicPartition(TOPIC, p, 100 + p) for p in range(PARTITIONS)]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()
        time.sleep(CHECKPOINT_MS / 1000 + 1.5)  # a recovery checkpoint passes
        node.kill()
        since = node.output.stat().st_size
        start = time.monotonic()
        node.launch()
        committed = None
        while committed is None and time.monotonic() - start < 30:
            committed = _committed(node)
        took = time.monotonic() - start
        assert committed == [100 + p for p in range(PARTITIONS)]
        assert took < BOUND_S, f"committed offsets took {took:.1f}s after a kill -9"
        text = node.output.read_bytes()[since:].decode(errors="replace")
        # Everything was checkpointed before the kill: nothing (or next to nothing) to replay,
        # where the whole log (about 3000 batches) was replayed before.
        assert _replayed(text) < 100, text[-3000:]
        # And nothing was lost or duplicated.
        reader = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "restart-time-r"})
        ends = [
            reader.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        ]
        reader.close()
        assert sum(ends) == count
    finally:
        node.kill()

"""Destination-side mirror throttling between two real kmirror nodes, configured with a stock
admin client as the KIP shows: ``mirror.replication.throttled.rate`` (dynamic broker config)
limits only the replicas ``mirror.replication.throttled.replicas`` lists for this broker; an
unlisted partition of the same topic, fetched by the same fetcher, is not held back."""

import glob
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from protocol.records import scan_batches

from .clients import create_topic, wait_for
from .mirror_helpers import create_mirror, running, write_mirror_config
from .node import Node

TOPIC = "thr"
RATE = 250_000  # bytes/s
PER_PARTITION = 500  # records of 1 KiB each: ~2 s for the throttled partition


def _alter(bootstrap: str, res: ConfigResource) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer
    admin.incremental_alter_configs([res])[res].result(10)


def _set(kind: ConfigResource.Type, name: str, key: str, value: str) -> ConfigResource:
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    return ConfigResource(kind, name, incremental_configs=[entry])


def _topic_config(bootstrap: str, key: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    entry = admin.describe_configs([res])[res].result(10).get(key)
    return None if entry is None else entry.value


def _ends(c: Consumer, bootstrap: str) -> dict[int, int]:
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1] for p in (0, 1)}
    except KafkaException:
        return {}


def _batch_bytes(node: Node, partition: int) -> int:
    total = 0
    for path in glob.glob(str(node.log_dir / f"{TOPIC}-{partition}" / "*.log")):
        total += sum(v.size for v in scan_batches(Path(path).read_bytes(), allow_partial_tail=True))
    return total


@pytest.fixture()
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst", node_id=4, mirror__metadata__refresh__interval__ms="500")
    with running(src, dst):
        yield src, dst


def test_only_listed_replicas_are_throttled(pair: tuple[Node, Node], tmp_path: Path) -> None:
    src, dst = pair
    create_topic(src.bootstrap, TOPIC, 2)
    create_mirror(
        dst, "tm", write_mirror_config(tmp_path / "mirror.properties", src.bootstrap), TOPIC
    )

    # bad lists are refused naming the bad entry
    bad = _set(ConfigResource.Type.TOPIC, TOPIC, "mirror.replication.throttled.replicas", "0:4,x")
    with pytest.raises(KafkaException) as e:
        _alter(dst.bootstrap, bad)
    assert e.value.args[0].name() == "INVALID_CONFIG" and "'x'" in e.value.args[0].str()
    # partition 0 on this broker (4) is throttled; partition 1 is not listed
    key = "mirror.replication.throttled.replicas"
    _alter(dst.bootstrap, _set(ConfigResource.Type.TOPIC, TOPIC, key, "0:4,1:7"))
    _alter(
        dst.bootstrap,
        _set(ConfigResource.Type.BROKER, "4", "mirror.replication.throttled.rate", str(RATE)),
    )

    # small batches: a fetch returns whole batches, so the throttle works at batch granularity
    p = Producer(
        {
            "bootstrap.servers": src.bootstrap,
            "linger.ms": 20,
            "batch.size": 16384,
            "enable.idempotence": True,
        }
    )
    start = time.monotonic()
    for i in range(2 * PER_PARTITION):
        p.produce(TOPIC, os.urandom(1024), partition=i % 2)  # incompressible
    assert p.flush(20) == 0
    want = {0: PER_PARTITION, 1: PER_PARTITION}
    done: dict[int, float] = {}
    c = Consumer({"bootstrap.servers": dst.bootstrap, "group.id": "probe"})

    def both_mirrored() -> bool:  # notes when each partition got there
        ends = _ends(c, dst.bootstrap)
        for part in (0, 1):
            if part not in done and ends.get(part) == want[part]:
                done[part] = time.monotonic() - start
        return len(done) == 2

    try:
        wait_for(
            both_mirrored,
            start + 30 - time.monotonic(),
            "both partitions mirrored within 30 s",
            detail=lambda: f"mirrored so far (seconds): {done}",
        )
    finally:
        c.close()
    expected = _batch_bytes(src, 0) / RATE
    assert expected > 1.5  # the data is big enough to measure the rate
    assert 0.6 * expected <= done[0] <= 3 * expected + 1, (done, expected)
    assert done[1] < 0.5 * done[0], (done, expected)
    # the list is this cluster's own setting: the metadata sync (every 500 ms) keeps it
    assert _topic_config(dst.bootstrap, key) == "0:4,1:7"

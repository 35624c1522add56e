"""A node with two ``log.dirs`` (JBOD): partitions spread over both, DescribeLogDirs shows each
dir with what it holds, AlterReplicaLogDirs moves a partition to the other dir while a stock
idempotent producer keeps writing (every acknowledged record is there afterwards, in order,
once, and after a restart), and the request's errors. kafka-python's KafkaAdminClient sends
DescribeLogDirs and AlterReplicaLogDirs (librdkafka has neither), confluent-kafka produces and
reads."""

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import TopicPartitionReplica  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from .clients import ck_read_all, create_topic, wait_for
from .node import Node

NONE, UNKNOWN_TOPIC, LOG_DIR_NOT_FOUND = 0, 3, 57


@pytest.fixture(scope="module")
def jbod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    work = tmp_path_factory.mktemp("jbod") / "n1"
    n = Node(work, log__dirs=f"{work / 'd1'},{work / 'd2'}")
    n.start()
    yield n
    n.kill()


@pytest.fixture
def kp(jbod: Node) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=jbod.bootstrap, request_timeout_ms=10000)
    yield a
    a.close()


def dirs_of(node: Node) -> tuple[Path, Path]:
    return node.workdir / "d1", node.workdir / "d2"


def log_dirs(kp: KafkaAdminClient, topic_partitions: Any = None) -> dict[str, dict[str, Any]]:
    (broker,) = kp.describe_log_dirs(topic_partitions)
    return {d["log_dir"]: d for d in broker["log_dirs"]}


def holdings(kp: KafkaAdminClient, topic: str) -> dict[str, list[tuple[int, bool]]]:
    """log dir -> [(partition, is future)] of ``topic``."""
    return {
        path: sorted(
            (p["partition_index"], p["is_future_key"])
            for t in d["topics"]
            if t["name"] == topic
            for p in t["partitions"]
        )
        for path, d in log_dirs(kp).items()
    }


def test_partitions_spread_over_both_dirs_and_are_described(
    jbod: Node, kp: KafkaAdminClient
) -> None:
    d1, d2 = dirs_of(jbod)
    create_topic(jbod.bootstrap, "spread", 6)
    described = log_dirs(kp)
    assert list(described) == [str(d1), str(d2)]
    for d in described.values():
        assert d["error_code"] == NONE
        assert d["total_bytes"] >= d["usable_bytes"] > 0
    held = holdings(kp, "spread")
    assert held[str(d1)] and held[str(d2)], held
    assert sorted(p for ps in held.values() for p, _ in ps) == list(range(6))
    for path, parts in held.items():
        on_disk = {c.name for c in Path(path).iterdir() if c.name.startswith("spread-")}
        assert on_disk == {f"spread-{p}" for p, _ in parts}
    only = log_dirs(kp, {"spread": [0]})
    assert sum(len(t["partitions"]) for d in only.values() for t in d["topics"]) == 1


def produce_continuously(
    bootstrap: str, topic: str, stop: threading.Event, acked: list[int], errors: list[str]
) -> None:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 30000,
        }
    )

    def cb(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(int(msg.value()[:10]))

    pad = b"." * 990
    i = 0
    deadline = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            p.produce(topic, value=b"%010d" % i + pad, partition=0, on_delivery=cb)
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
        if i % 50 == 0:
            time.sleep(0.01)  # about 5 MB/s: a steady stream, not a disk benchmark
    assert p.flush(30) == 0


def test_move_a_partition_while_producing(jbod: Node, kp: KafkaAdminClient) -> None:
    d1, d2 = dirs_of(jbod)
    create_topic(jbod.bootstrap, "moving", 1, {"segment.bytes": "1048576"})
    (source,) = [path for path, parts in holdings(kp, "moving").items() if parts]
    target = str(d2) if source == str(d1) else str(d1)
    acked: list[int] = []
    errors: list[str] = []
    stop = threading.Event()
    producer = threading.Thread(
        target=produce_continuously, args=(jbod.bootstrap, "moving", stop, acked, errors)
    )
    producer.start()
    try:
        # several MB first, so the move copies segments in passes while records keep coming
        wait_for(lambda: len(acked) >= 8000, 60, "8000 records acknowledged")
        tpr = TopicPartitionReplica("moving", 0, 1)
        result = kp.alter_replica_log_dirs({tpr: target})
        assert [e.errno for e in result.values()] == [NONE]
        seen_future = False

        def moved() -> bool:
            nonlocal seen_future
            held = holdings(kp, "moving")
            seen_future = seen_future or (0, True) in held[target]
            return held[target] == [(0, False)] and held[source] == []

        wait_for(moved, 60, "the partition to be in the target dir only", step=0.02)
        at_move = len(acked)
        wait_for(lambda: len(acked) >= at_move + 2000, 60, "records after the move")
    finally:
        stop.set()
        producer.join(60)
    assert not producer.is_alive()
    assert errors == []
    assert acked == list(range(len(acked))), "acknowledged out of order or with gaps"
    name = "moving-0"
    assert (Path(target) / name).is_dir() and not (Path(source) / name).exists()
    got = ck_read_all(jbod.bootstrap, "moving", 1, len(acked), timeout=60)
    values = [int(r.value[:10]) for r in got if r.value is not None]
    assert values == list(range(len(acked))), (
        "a record acknowledged before or during the move is missing"
    )
    # Still there, and still in the target dir, after a restart.
    assert jbod.stop() == 0
    jbod.start()
    fresh = KafkaAdminClient(bootstrap_servers=jbod.bootstrap, request_timeout_ms=10000)
    try:
        assert holdings(fresh, "moving")[target] == [(0, False)]
    finally:
        fresh.close()
    got = ck_read_all(jbod.bootstrap, "moving", 1, len(acked), timeout=60)
    assert [int(r.value[:10]) for r in got if r.value is not None] == list(range(len(acked)))
    print(f"moved with {at_move} records, {len(acked)} in all; future replica seen: {seen_future}")


def test_alter_replica_log_dirs_errors(jbod: Node, kp: KafkaAdminClient) -> None:
    d1, _d2 = dirs_of(jbod)
    create_topic(jbod.bootstrap, "stay", 1)
    (current,) = [path for path, parts in holdings(kp, "stay").items() if parts]

    def alter(topic: str, path: str) -> int:
        result = kp.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): path})
        (error,) = result.values()
        return int(error.errno)

    assert alter("stay", str(jbod.workdir / "not-a-log-dir")) == LOG_DIR_NOT_FOUND
    assert alter("stay", "d1") == LOG_DIR_NOT_FOUND  # not the absolute path
    assert alter("no-such-topic", str(d1)) == UNKNOWN_TOPIC
    assert alter("stay", current) == NONE  # already there: nothing moves
    assert holdings(kp, "stay")[current] == [(0, False)]

"""Auto-creating topics at once through every node of three (issue 27), with stock clients.

- 30 topics auto-created at the same moment through all three nodes by librdkafka
  (confluent-kafka) and kafka-python: every partition then takes an acks=all write within
  10 s, the metadata log holds one TopicRecord per name, and every node's metadata image digest
  (``kmirror_metadata_image_info``) agrees.
- Auto-create through each node answers LEADER_NOT_AVAILABLE (with the name) or the full
  topic, never no error with 0 partitions, and the first produce succeeds.
- After all that, a node killed with kill -9 restarts from its metadata snapshot (the cluster
  snapshots every few KB of metadata) and holds the same image digest as the others.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer  # type: ignore[import-untyped]

from protocol.metadata_records import decode_metadata_record
from protocol.records import iter_records, scan_batches
from tests.waits import wait_value

from .cluster import Cluster
from .test_metadata_snapshots import all_alike, loaded_since, snapshot_past

TOPICS = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # small snapshot interval: the restart test below loads the image from a snapshot
    c = Cluster(
        Path(tmp_path_factory.mktemp("auto-create")),
        metadata__log__max__record__bytes__between__snapshots="8000",
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


def topic_records(c: Cluster) -> Counter[str]:
    """TopicRecords per name in the first node's metadata log segments."""
    names: Counter[str] = Counter()
    node = c.nodes[0]
    for seg in sorted((node.log_dir / "__cluster_metadata-0").glob("*.log")):
        for batch in scan_batches(seg.read_bytes()):
            if batch.is_control:
                continue
            for rec in iter_records(batch):
                r = decode_metadata_record(bytes(rec.value or b""))
                if type(r).__name__ == "TopicRecord":
                    names[r.name] += 1
    return names


def _ck_auto_create(bootstrap: str, names: list[str], go: threading.Event) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "allow.auto.create.topics": True})
    go.wait(30)
    for n in names:
        p.list_topics(n, timeout=20)


def _kp_auto_create(bootstrap: str, names: list[str], go: threading.Event) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=20000)
    try:
        go.wait(30)
        for n in names:
            p.partitions_for(n)
    finally:
        p.close(timeout=5)


def test_thirty_topics_auto_created_through_all_nodes_at_once(cluster: Cluster) -> None:
    names = [f"auto-{i:02d}" for i in range(TOPICS)]
    go = threading.Event()
    errors: list[BaseException] = []

    def guarded(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [
        threading.Thread(target=guarded, args=(fn, n.bootstrap, order, go))
        for n in cluster.nodes
        for fn, order in ((_ck_auto_create, names), (_kp_auto_create, names[::-1]))
    ]
    for t in threads:
        t.start()
    time.sleep(1.0)  # every client connected and waiting
    go.set()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)

    # every partition takes an acks=all write within 10 s
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    delivered: dict[str, Any] = {}
    start = time.monotonic()
    for n in names:
        p.produce(n, b"v", callback=lambda err, msg, n=n: delivered.__setitem__(n, err))
    p.flush(10)
    took = time.monotonic() - start
    failed = {n: e for n, e in delivered.items() if e is not None}
    assert len(delivered) == TOPICS and not failed, (failed, sorted(set(names) - set(delivered)))
    assert took < 10, took

    counts = topic_records(cluster)
    assert {n: counts[n] for n in names} == dict.fromkeys(names, 1)
    wait_value(lambda: all_alike(cluster.nodes), 30, "the same metadata digest on every node")


def _kp_partitions(bootstrap: str, name: str) -> int:
    """kafka-python's producer auto-creates the topic through Metadata and retries while the
    answer is LEADER_NOT_AVAILABLE: the partitions it ends with (0: an answer of no error and
    no partitions was taken as final)."""
    p = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=15000)
    try:
        return len(p.partitions_for(name) or ())
    finally:
        p.close(timeout=5)


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
def test_auto_create_through_each_node_answers_leader_not_available_or_the_topic(
    cluster: Cluster, client: str
) -> None:
    for node in cluster.nodes:
        name = f"first-{client}-{node.node_id}"
        if client == "librdkafka":
            md = Producer({"bootstrap.servers": node.bootstrap}).list_topics(name, timeout=10)
            t = md.topics[name]
            code = t.error.code() if t.error is not None else 0
            count = len(t.partitions)
            if code:
                assert code == KafkaError.LEADER_NOT_AVAILABLE, t.error
        else:
            code, count = 0, _kp_partitions(node.bootstrap, name)
        assert code or count > 0, f"node {node.node_id}: no error and 0 partitions for {name}"
        p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
        result: list[Any] = []
        p.produce(name, b"first", callback=lambda err, msg, out=result: out.append(err))
        p.flush(15)
        assert result == [None], result


def test_a_node_restarted_from_its_snapshot_holds_the_same_image(cluster: Cluster) -> None:
    """Runs after the concurrent creates: the restarted node's image, loaded from its newest
    snapshot plus the log after it, has the digest of the live nodes' images."""
    node = cluster.nodes[-1]
    snapshot_past(cluster.nodes, 0)  # more topics until every node wrote a snapshot
    node.kill()
    seen = node.output.stat().st_size
    node.start()
    loaded = wait_value(lambda: loaded_since(node, seen) or None, 30, "the snapshot loaded")
    assert loaded[-1] > 0, loaded
    wait_value(lambda: all_alike(cluster.nodes), 30, "the same metadata digest on every node")

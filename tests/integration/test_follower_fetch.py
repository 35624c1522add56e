"""KIP-392 on three real nodes in racks r1, r2 and r3 with
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``.

One topic, RF=3, led by node 1; a confluent-kafka consumer per rack (``client.rack``). Each
consumer drains alone while the others are paused, so the nodes' metrics tell who served it:
the r2 and r3 consumers read from nodes 2 and 3 as followers (after node 1 named them in
``preferred_read_replica``), the r1 consumer from the leader. Then leadership moves to node 2
(reassignment to [2, 1, 3] and ``kafka-leader-election.sh --election-type PREFERRED``), more
records are produced, and the same three consumers go on: r1 now reads from node 1 as a
follower, r2 from its new leader, r3 still from node 3. Every consumer gets every record
exactly once, in order.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.waits import wait_for

from .cluster import Cluster
from .mirror_helpers import scrape, total
from .node import ROOT

pytestmark = pytest.mark.timeout(300)

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "racked"
FOLLOWER_BYTES = "kafka_server_fetch_consumer_follower_bytes_total"
PREFERRED = "kafka_server_fetch_preferred_read_replica_answers_total"
N = 300  # records per phase


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("racks"),
        replica__selector__class=SELECTOR,
        auto__leader__rebalance__enable="false",
    )
    for n in c.nodes:
        n.settings["broker.rack"] = f"r{n.node_id}"
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _metrics(c: Cluster) -> dict[int, tuple[float, float]]:
    """Per node: (record bytes served to consumers as a follower, preferred-replica answers)."""
    out = {}
    for n in c.nodes:
        s = scrape(n)
        out[n.node_id] = (total(s, FOLLOWER_BYTES), total(s, PREFERRED))
    return out


def _produce(c: Cluster, start: int) -> int:
    """N records valued v<start>..; the bytes of their values."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[object] = []
    for i in range(start, start + N):
        p.produce(
            TOPIC, b"v%06d" % i, partition=0, on_delivery=lambda e, _m: e and errors.append(e)
        )
    assert p.flush(60) == 0 and not errors, errors[:3]
    return N * 7


def _drain(consumer: Consumer, got: list[bytes], until: int, timeout: float = 60) -> None:
    """Poll until ``until`` records in all arrived (bounded in time)."""
    deadline = time.monotonic() + timeout
    while len(got) < until and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None or m.error():
            continue
        got.append(m.value())
    assert len(got) == until, f"{len(got)} of {until} records"


def _phase(
    c: Cluster, consumers: dict[int, Consumer], got: dict[int, list[bytes]], until: int
) -> dict[int, dict[int, tuple[float, float]]]:
    """Each consumer alone (the others paused) drains to ``until``: the metric deltas it caused."""
    tp = [TopicPartition(TOPIC, 0)]
    deltas = {}
    for rack, consumer in consumers.items():
        before = _metrics(c)
        consumer.resume(tp)
        _drain(consumer, got[rack], until)
        consumer.pause(tp)
        time.sleep(0.5)  # a fetch in flight when paused lands in this phase
        after = _metrics(c)
        deltas[rack] = {n: (after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in before}
    return deltas


def _leader(c: Cluster) -> int:
    state = c.partition_state(TOPIC)
    return -1 if state is None else state[0]


def _move_leader_to_2(c: Cluster, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 1, 3]}]}
        )
    )
    tool = str(ROOT / "bin" / "kafka-reassign-partitions.sh")
    res = subprocess.run(
        [tool, "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file", str(plan)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res
    wait_for(lambda: (c.partition_state(TOPIC) or (0, []))[1] == [2, 1, 3], 30, what="reorder")
    res = subprocess.run(
        [str(ROOT / "bin" / "kafka-leader-election.sh"), "--bootstrap-server", c.bootstrap,
         "--election-type", "PREFERRED", "--topic", TOPIC, "--partition", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res
    wait_for(lambda: _leader(c) == 2, 30, what="node 2 leads")


def test_each_rack_reads_its_own_replica_before_and_after_a_leader_move(
    cluster: Cluster, tmp_path: Path
) -> None:
    c = cluster
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    # broker.rack reaches the registrations, and Metadata / DescribeCluster answer it
    nodes = a.describe_cluster().result(timeout=30).nodes
    assert {n.id: n.rack for n in nodes} == {1: "r1", 2: "r2", 3: "r3"}
    a.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])])[
        TOPIC
    ].result(30)
    wait_for(lambda: c.known_everywhere(TOPIC) and _leader(c) == 1, 30, what="topic led by 1")
    data = _produce(c, 0)
    wait_for(lambda: (c.partition_state(TOPIC) or (0, [], []))[2] == [1, 2, 3], 30, what="ISR")

    consumers = {}
    got: dict[int, list[bytes]] = {}
    for rack in (1, 2, 3):
        consumer = Consumer(
            {
                "bootstrap.servers": c.bootstrap,
                "group.id": f"rack-{rack}",
                "client.rack": f"r{rack}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        consumer.pause([TopicPartition(TOPIC, 0)])
        consumers[rack], got[rack] = consumer, []
    try:
        first = _phase(c, consumers, got, N)
        # r1: the leader serves it; nobody reads as a follower, nobody is named
        assert all(first[1][n] == (0, 0) for n in (1, 2, 3)), first[1]
        # r2, r3: node 1 names their node, which serves every record as a follower
        for rack in (2, 3):
            others = [n for n in (2, 3) if n != rack]
            assert first[rack][1][1] >= 1, first[rack]
            assert first[rack][rack][0] >= data, first[rack]
            assert all(first[rack][n][0] == 0 for n in [1, *others]), first[rack]

        _move_leader_to_2(c, tmp_path)
        data = _produce(c, N)
        wait_for(lambda: (c.partition_state(TOPIC) or (0, [], []))[2] == [1, 2, 3], 30, what="ISR")
        second = _phase(c, consumers, got, 2 * N)
        # r1: node 2 names node 1, now a follower, which serves it
        assert second[1][2][1] >= 1 and second[1][1][0] >= data, second[1]
        assert second[1][2][0] == 0 and second[1][3][0] == 0, second[1]
        # r2: its own node leads now and serves it; no follower reads anywhere
        assert all(second[2][n][0] == 0 for n in (1, 2, 3)), second[2]
        # r3: still node 3, as a follower of the new leader
        assert second[3][3][0] >= data and second[3][1][0] == 0, second[3]

        expected = [b"v%06d" % i for i in range(2 * N)]
        for rack in (1, 2, 3):
            assert got[rack] == expected, f"rack r{rack}: records missing, repeated or reordered"
    finally:
        for consumer in consumers.values():
            consumer.close()

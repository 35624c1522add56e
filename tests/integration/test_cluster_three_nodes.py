"""Three node processes from the shipped config/node-{1,2,3}.properties form one cluster.

Stock clients see one cluster: every node lists the three brokers, a topic's partitions are led by
all three, admin requests sent to any node work (the node forwards them to the active controller),
records produced across the leaders read back whole, and a consumer group's coordinator may sit on
another node than the one the client bootstrapped from. Killing the active controller (kill -9)
elects a new one and CreateTopics sent to a survivor succeeds within 5 s.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from tests.waits import wait_value

from .clients import admin, by_partition, ck_produce, ck_read_all, kp_read_all, make_records
from .cluster import Cluster
from .node import Node

_LEADER = re.compile(rb"metadata quorum: leader (\d+) at epoch (\d+)")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path).start()
    try:
        yield c
    finally:
        c.stop()


def quorum_leader(node: Node) -> tuple[int, int]:
    """(leader, epoch) as the node last logged it."""
    found = _LEADER.findall(node.output.read_bytes())
    return (int(found[-1][0]), int(found[-1][1])) if found else (-1, -1)


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = admin(bootstrap).list_topics(topic, timeout=10)
    return {p: pm.leader for p, pm in md.topics[topic].partitions.items()}


def create(bootstrap: str, name: str, partitions: int) -> None:
    fs = admin(bootstrap).create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    fs[name].result(15)


def test_three_nodes_are_one_cluster(cluster: Cluster) -> None:
    n1, n2, n3 = cluster.nodes
    # every node knows all three brokers
    for node in cluster.nodes:
        md = admin(node.bootstrap).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3], node.node_id
        assert md.cluster_id == cluster.cluster_id
    # an admin request to a node that is not the controller is forwarded
    leader, _ = quorum_leader(n1)
    other = next(n for n in cluster.nodes if n.node_id != leader)
    create(other.bootstrap, "spread", 30)
    leaders = wait_value(
        lambda: ls if len(ls := partition_leaders(n3.bootstrap, "spread")) == 30 else None,
        timeout=10,
        what="30 partitions in n3's metadata",
    )
    assert set(leaders.values()) == {1, 2, 3}, leaders
    # records go to each partition's leader and read back whole, from any bootstrap node
    recs = make_records("spread", 600, 30)
    assert ck_produce(n2.bootstrap, "spread", recs) == []
    got = ck_read_all(n1.bootstrap, "spread", 30, len(recs), timeout=30)
    assert by_partition(got) == by_partition(recs)
    got_kp = kp_read_all(n3.bootstrap, "spread", 30, len(recs), timeout=30)
    assert by_partition(got_kp) == by_partition(recs)


def test_active_controller_killed_a_survivor_creates_topics(cluster: Cluster) -> None:
    leader, epoch = wait_value(
        lambda: le if (le := quorum_leader(cluster.nodes[0]))[0] > 0 else None,
        timeout=10,
        what="a quorum leader",
    )
    victim = cluster.node(leader)
    survivors = [n for n in cluster.nodes if n is not victim]
    victim.kill()
    t0 = time.monotonic()
    # sent to a survivor; it forwards to whichever node leads the quorum once one is elected
    fs = admin(survivors[0].bootstrap).create_topics(
        [NewTopic("after-failover", 3, 1)], operation_timeout=10
    )
    fs["after-failover"].result(15)
    took = time.monotonic() - t0
    new_leader, new_epoch = quorum_leader(survivors[0])
    assert new_leader in {n.node_id for n in survivors} and new_epoch > epoch
    assert took < 5.0, f"CreateTopics took {took:.1f}s after the controller was killed"
    print(f"election + CreateTopics after kill -9 of the controller: {took:.2f}s")
    # the killed node comes back and catches up
    victim.start(timeout=60)
    wait_value(
        lambda: "after-failover" in admin(victim.bootstrap).list_topics(timeout=5).topics,
        timeout=20,
        what="the restarted node to learn the topic",
    )

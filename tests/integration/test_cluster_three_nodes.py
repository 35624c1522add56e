"""Three node processes from the shipped config/node-{1,2,3}.properties form one cluster.

Stock clients see one cluster: every node lists the three brokers, a topic's partitions are led by
all three, admin requests sent to any node work (the node forwards them to the active controller),
records produced across the leaders read back whole, and a consumer group's coordinator may sit on
another node than the one the client bootstrapped from. Killing the active controller (kill -9)
elects a new one and CreateTopics sent to a survivor succeeds within 5 s.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from broker.config.meta_properties import random_uuid
from tests.waits import wait_value

from .clients import admin, by_partition, ck_produce, ck_read_all, kp_read_all, make_records
from .cluster import Cluster
from .node import ROOT, Node, free_port

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
    a = admin(bootstrap)  # keep the handle alive until the future resolves
    fs = a.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    fs[name].result(15)


def test_three_nodes_are_one_cluster(cluster: Cluster) -> None:
    n1, n2, n3 = cluster.nodes
    # every node knows all three brokers
    for node in cluster.nodes:  # each node learns the others' registrations as they commit
        md = wait_value(
            lambda node=node: (
                m
                if sorted((m := admin(node.bootstrap).list_topics(timeout=10)).brokers) == [1, 2, 3]
                else None
            ),
            timeout=10,
            what=f"node {node.node_id} to list brokers 1, 2 and 3",
        )
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


def quorum_tool(*args: str) -> str:
    done = subprocess.run(
        [str(ROOT / "bin" / "kafka-metadata-quorum.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_metadata_quorum_tool_on_the_cluster(cluster: Cluster) -> None:
    n1, n2, n3 = cluster.nodes
    leader, _epoch = wait_value(
        lambda: le if (le := quorum_leader(n1))[0] > 0 else None, timeout=10, what="a leader"
    )
    # from a controller listener (DescribeCluster endpoint type 2 finds the leader), and from a
    # broker listener (forwarded to the active controller): the same quorum
    for args in (
        ("--bootstrap-controller", f"127.0.0.1:{n2.controller_port}"),
        ("--bootstrap-server", n3.bootstrap),
    ):
        status = dict(
            (k.strip(), v.strip())
            for k, v in (
                line.split(":", 1)
                for line in quorum_tool(*args, "describe", "--status").splitlines()
            )
        )
        assert status["ClusterId"] == cluster.cluster_id
        assert status["LeaderId"] == str(leader)
        assert [v["id"] for v in json.loads(status["CurrentVoters"])] == [1, 2, 3]
        rows = quorum_tool(*args, "describe", "--replication").splitlines()
        assert rows[0].split() == [
            "NodeId",
            "DirectoryId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
        ]
        statuses = sorted(r.split()[-1] for r in rows[1:])
        assert statuses == ["Follower", "Follower", "Leader"], rows


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
    a = admin(survivors[0].bootstrap)
    fs = a.create_topics([NewTopic("after-failover", 3, 1)], operation_timeout=10)
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


def test_three_controllers_and_a_broker_on_its_own(tmp_path: Path) -> None:
    """process.roles=controller on three nodes (the quorum), process.roles=broker on a fourth
    (an observer of the metadata log): the broker registers with the active controller and
    serves clients; the controllers host no partitions."""
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    cluster_id = random_uuid()
    nodes: list[Node] = []
    for i, port in ports.items():
        n = Node(tmp_path / f"c{i}", i)
        n.settings = {
            "process.roles": "controller",
            "node.id": str(i),
            "controller.quorum.voters": voters,
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(n.log_dir),
            "metrics.port": "0",
        }
        n.port = n.controller_port = port
        nodes.append(n)
    broker = Node(tmp_path / "b4", 4)
    broker.settings = {
        "process.roles": "broker",
        "node.id": "4",
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(broker.log_dir),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "metrics.port": "0",
    }
    nodes.append(broker)
    for n in nodes:
        n.cluster_id = cluster_id
    try:
        for n in nodes:
            n.launch()
        for n in nodes:
            n.wait_started(60)
        md = wait_value(
            lambda: m if (m := admin(broker.bootstrap).list_topics(timeout=10)).brokers else None,
            timeout=10,
            what="the broker in its own metadata",
        )
        assert sorted(md.brokers) == [4]
        create(broker.bootstrap, "observed", 4)
        recs = make_records("observed", 200, 4)
        assert ck_produce(broker.bootstrap, "observed", recs) == []
        got = ck_read_all(broker.bootstrap, "observed", 4, len(recs), timeout=30)
        assert by_partition(got) == by_partition(recs)
        for n in nodes[:3]:  # controllers hold the metadata log, no partition
            assert sorted(p.name for p in n.log_dir.iterdir() if p.is_dir()) == [
                "__cluster_metadata-0"
            ]
    finally:
        for n in nodes:
            n.kill()


def test_a_node_formatted_for_another_cluster_is_named(tmp_path: Path) -> None:
    """Node 3 formatted with another cluster id: nodes 1 and 2 are a majority and serve; node 3
    never joins, and both sides say in their log which voter belongs to another cluster."""
    c = Cluster(tmp_path)
    stray = c.node(3)
    stray.cluster_id = random_uuid()
    try:
        for n in c.nodes:
            n.launch()
        for n in c.nodes[:2]:
            n.wait_started(60)
        create(c.node(1).bootstrap, "majority", 2)
        wait_value(
            lambda: b"belongs to another cluster" in stray.output.read_bytes(),
            timeout=20,
            what="node 3 to name the voters of the other cluster",
            detail=stray.log_tail,
        )
        assert b"voter 3 at" in c.node(1).output.read_bytes() + c.node(2).output.read_bytes()
        assert b"kmirror node 3 started" not in stray.output.read_bytes()
    finally:
        c.kill()

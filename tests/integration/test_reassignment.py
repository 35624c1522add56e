"""Partition reassignment across three real nodes with ``bin/kafka-reassign-partitions.sh``;
records written and read with confluent-kafka (librdkafka), metadata read with its AdminClient.

- an RF=1 partition with data moves from one node to another: the new node's log holds the same
  bytes, the old node deletes its copy, and every record is still there;
- an RF=2 partition grows to RF=3 and all three copies are identical;
- ``--cancel`` of a reassignment that cannot finish (its new replica is stopped) puts the
  partition back on its original replicas; ``--list`` and ``--verify`` report each stage.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.waits import wait_for, wait_value

from .clients import ck_values
from .cluster import Cluster
from .node import ROOT

TOOL = str(ROOT / "bin" / "kafka-reassign-partitions.sh")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("reassign"),
        default__replication__factor="3",
        offsets__topic__replication__factor="3",
        replica__lag__time__max__ms="3000",
        broker__session__timeout__ms="4000",
        broker__heartbeat__interval__ms="500",
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _tool(c: Cluster, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TOOL, "--bootstrap-server", c.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _plan(tmp_path: Path, name: str, topic: str, replicas: list[int]) -> str:
    path = tmp_path / name
    path.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}
        )
    )
    return str(path)


def _create(c: Cluster, name: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[replicas])])[
        name
    ].result(30)
    wait_for(lambda: c.known_everywhere(name), 30, what=f"{name} in metadata")


def _produce(c: Cluster, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list[KafkaError] = []
    for v in values:
        p.produce(
            topic,
            v,
            partition=0,
            on_delivery=lambda err, _m: err is not None and errors.append(err),
        )
        p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]


def _copy(c: Cluster, node_id: int, topic: str) -> bytes | None:
    """A node's copy of partition 0 (its .log files concatenated); None: no directory."""
    d = Path(c.node(node_id).log_dir) / f"{topic}-0"
    if not d.is_dir():
        return None
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def _verified(c: Cluster, plan: str, topic: str) -> None:
    def done() -> bool:
        res = _tool(c, "--verify", "--reassignment-json-file", plan)
        assert res.returncode == 0, res
        return f"Reassignment of partition {topic}-0 is completed." in res.stdout

    wait_for(done, 60, what=f"{topic}-0 reassignment completed")


def test_move_a_single_replica_partition_with_its_data(cluster: Cluster, tmp_path: Path) -> None:
    _create(cluster, "move", [1])
    values = [f"m{i}".encode() * 20 for i in range(3000)]
    _produce(cluster, "move", values)
    original = _copy(cluster, 1, "move")
    assert original and _copy(cluster, 2, "move") is None

    plan = _plan(tmp_path, "move.json", "move", [2])
    res = _tool(cluster, "--execute", "--reassignment-json-file", plan)
    assert res.returncode == 0, res
    assert "Current partition replica assignment" in res.stdout
    assert '{"version":1,"partitions":[{"topic":"move","partition":0,"replicas":[1],' in res.stdout
    assert "Successfully started partition reassignment for move-0" in res.stdout

    _verified(cluster, plan, "move")
    state = wait_value(
        lambda: (s := cluster.partition_state("move")) and s[1] == [2] and s[0] == 2 and s,
        30,
        what="move-0 led by 2 alone",
    )
    assert state == (2, [2], [2])
    wait_for(lambda: _copy(cluster, 1, "move") is None, 30, what="node 1 deleted its copy")
    assert _copy(cluster, 2, "move") == original
    assert ck_values(cluster.bootstrap, "move", len(values)) == values
    res = _tool(cluster, "--list")
    assert res.returncode == 0 and res.stdout.strip() == "No partition reassignments found.", res


def test_grow_from_two_replicas_to_three(cluster: Cluster, tmp_path: Path) -> None:
    _create(cluster, "grow", [1, 2])
    values = [f"g{i}".encode() * 20 for i in range(2000)]
    _produce(cluster, "grow", values)
    assert _copy(cluster, 3, "grow") is None

    plan = _plan(tmp_path, "grow.json", "grow", [1, 2, 3])
    res = _tool(cluster, "--execute", "--reassignment-json-file", plan)
    assert res.returncode == 0, res
    _verified(cluster, plan, "grow")
    state = wait_value(
        lambda: (s := cluster.partition_state("grow")) and s[2] == [1, 2, 3] and s,
        30,
        what="grow-0 in sync on three nodes",
    )
    assert state[1] == [1, 2, 3] and state[0] == 1

    def identical() -> bool:
        copies = {n: _copy(cluster, n, "grow") for n in (1, 2, 3)}
        return len(set(copies.values())) == 1 and bool(copies[1])

    wait_for(identical, 30, what="three identical copies")
    assert ck_values(cluster.bootstrap, "grow", len(values)) == values


def test_cancel_puts_the_partition_back(cluster: Cluster, tmp_path: Path) -> None:
    _create(cluster, "undo", [1])
    _produce(cluster, "undo", [b"before"])
    plan = _plan(tmp_path, "undo.json", "undo", [1, 3])
    node3 = cluster.node(3)
    assert node3.proc is not None
    os.kill(node3.proc.pid, signal.SIGSTOP)  # the new replica cannot catch up
    try:
        res = _tool(cluster, "--execute", "--reassignment-json-file", plan)
        assert res.returncode == 0, res
        res = _tool(cluster, "--list")
        assert res.returncode == 0, res
        assert "Current partition reassignments:" in res.stdout
        assert "undo-0: replicas: 1,3. adding: 3." in res.stdout
        res = _tool(cluster, "--verify", "--reassignment-json-file", plan)
        assert "Reassignment of partition undo-0 is still in progress." in res.stdout, res
        # a second --execute is refused while one is going on
        res = _tool(cluster, "--execute", "--reassignment-json-file", plan)
        assert res.returncode == 1 and "Cannot execute because there is an existing" in res.stdout

        res = _tool(cluster, "--cancel", "--reassignment-json-file", plan)
        assert res.returncode == 0, res
        assert "Successfully cancelled partition reassignment for: undo-0" in res.stdout
        state = cluster.partition_state("undo")
        assert state is not None and state[1] == [1], state
        res = _tool(cluster, "--cancel", "--reassignment-json-file", plan)
        assert res.returncode == 0, res
        assert "None of the specified partition reassignments are active." in res.stdout
        res = _tool(cluster, "--verify", "--reassignment-json-file", plan)
        assert (
            "There is no active reassignment of partition undo-0, but replica set is 1 rather "
            "than 1,3." in res.stdout
        ), res
    finally:
        os.kill(node3.proc.pid, signal.SIGCONT)
    # once back, node 3 holds no copy of a partition it no longer replicates
    wait_for(lambda: _copy(cluster, 3, "undo") is None, 30, what="node 3 without undo-0")
    _produce(cluster, "undo", [b"after"])
    assert ck_values(cluster.bootstrap, "undo", 2) == [b"before", b"after"]


def test_refusals(cluster: Cluster, tmp_path: Path) -> None:
    _create(cluster, "refuse", [1])
    res = _tool(
        cluster, "--execute", "--reassignment-json-file", _plan(tmp_path, "a.json", "refuse", [9])
    )
    assert res.returncode == 1 and "Unknown broker id 9" in res.stderr, res
    res = _tool(
        cluster,
        "--execute",
        "--disallow-replication-factor-change",
        "--reassignment-json-file",
        _plan(tmp_path, "b.json", "refuse", [1, 2]),
    )
    assert res.returncode == 1, res
    assert "Error reassigning partition(s):" in res.stdout
    assert "refuse-0: The replication factor is changed from 1 to 2" in res.stdout
    assert cluster.partition_state("refuse") == (1, [1], [1])


def test_generate_proposes_a_plan_for_the_brokers_given(cluster: Cluster, tmp_path: Path) -> None:
    _create(cluster, "gen", [1, 2])
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "gen"}]}))
    # The tool may ask a node a metadata update behind the one that created the topic (as
    # Kafka's tool can): asked again until it knows the topic, bounded.
    res = wait_value(
        lambda: (
            (
                r := _tool(
                    cluster,
                    "--generate",
                    "--topics-to-move-json-file",
                    str(topics),
                    "--broker-list",
                    "2,3",
                )
            ).returncode
            == 0
            and r
        ),
        20,
        what="kafka-reassign-partitions.sh --generate to find the topic",
    )
    lines = res.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {
        "version": 1,
        "partitions": [
            {"topic": "gen", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"] * 2}
        ],
    }
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert [sorted(p["replicas"]) for p in proposed] == [[2, 3]]
    assert cluster.partition_state("gen") is not None and cluster.partition_state("gen")[1] == [
        1,
        2,
    ]  # type: ignore[index]

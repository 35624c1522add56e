"""Partition replication across three real nodes, driven by stock clients (issue 12).

One cluster (the shipped ``config/node-{1,2,3}.properties`` with replication turned up:
RF=3, min.insync.replicas=2, replica.lag.time.max.ms short enough for a test) serves the module:

- acks=all records land on every replica, byte for byte at the same offsets;
- a stopped follower (SIGSTOP) leaves the ISR after replica.lag.time.max.ms and writes go on;
  with min.insync.replicas raised above the ISR, acks=all is refused (NOT_ENOUGH_REPLICAS) and
  acks=1 still lands; when it resumes it catches up and rejoins the ISR, and acks=all works
  again (two of three nodes stopped would also stop the metadata quorum, which decides ISRs);
- kill -9 of a partition's leader: the controller elects another in-sync replica with a new
  leader epoch, the producer carries on, and every acknowledged record is there, once.
"""

from __future__ import annotations

import os
import re
import signal
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.waits import wait_for, wait_value

from .clients import ck_values
from .cluster import Cluster

LAG_MS = 3000

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("replication"),
        default__replication__factor="3",
        min__insync__replicas="2",
        offsets__topic__replication__factor="3",
        transaction__state__log__replication__factor="3",
        transaction__state__log__min__isr="2",
        replica__lag__time__max__ms=str(LAG_MS),
        broker__session__timeout__ms="4000",
        broker__heartbeat__interval__ms="500",
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _create(c: Cluster, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def created() -> bool:
        try:
            admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
        except KafkaException as e:
            # a node paused or killed by the test before may still be fenced (it re-registers
            # within a heartbeat or two): RF 3 waits for it rather than failing
            if e.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR:
                return False
            raise
        return True

    wait_for(created, 30, what=f"{name} created with three replicas", step=0.5)
    wait_for(lambda: c.known_everywhere(name), 30, what=f"{name} in metadata")


State = tuple[int, list[int], list[int]]


def _until(
    c: Cluster, topic: str, pred: Callable[[State], bool], timeout: float, what: str
) -> State:
    def get() -> State | None:
        s = c.partition_state(topic, 0)
        return s if s is not None and pred(s) else None

    return wait_value(get, timeout, what=what, detail=lambda: c.partition_state(topic, 0))


def _produce(c: Cluster, topic: str, values: list[bytes], acks: str = "all") -> list[object]:
    """Deliver each value; the per-record results (offset or KafkaError)."""
    p = Producer(
        {
            "bootstrap.servers": c.bootstrap,
            # "all-once": acks=all without retries, to see the broker's error
            "acks": "all" if acks == "all-once" else acks,
            "enable.idempotence": acks == "all",
            "message.timeout.ms": 20000,
            "retries": 2147483647 if acks == "all" else 0,
        }
    )
    results: list[object] = [None] * len(values)

    def done(i: int) -> object:
        def cb(err: KafkaError | None, msg: object) -> None:
            results[i] = err if err is not None else msg.offset()  # type: ignore[attr-defined]

        return cb

    for i, v in enumerate(values):
        p.produce(topic, v, partition=0, on_delivery=done(i))
        p.poll(0)
    p.flush(60)
    return results


def _segments(c: Cluster, topic: str, partition: int) -> dict[int, bytes]:
    """Each node's copy of the partition: its .log files concatenated."""
    out = {}
    for n in c.nodes:
        d = Path(n.log_dir) / f"{topic}-{partition}"
        out[n.node_id] = b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
    return out


def test_every_replica_holds_the_same_bytes(cluster: Cluster) -> None:
    _create(cluster, "same-bytes")
    values = [f"v{i}".encode() * 10 for i in range(2000)]
    results = _produce(cluster, "same-bytes", values)
    assert all(isinstance(r, int) for r in results), [r for r in results if not isinstance(r, int)]
    assert sorted(results) == list(range(2000))  # type: ignore[type-var]

    def identical() -> bool:
        copies = _segments(cluster, "same-bytes", 0)
        return len(set(copies.values())) == 1 and len(next(iter(copies.values()))) > 0

    wait_for(identical, 30, what="three identical replicas")
    assert ck_values(cluster.bootstrap, "same-bytes", 2000) == values


def _pause(c: Cluster, node_id: int) -> None:
    proc = c.node(node_id).proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)


def _resume(c: Cluster, node_id: int) -> None:
    proc = c.node(node_id).proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGCONT)


def _scrape(c: Cluster, node_id: int) -> str:
    port = c.node(node_id).metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def _metric(text: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m is not None, f"{name} not scraped"
    return float(m.group(1))


def _set_min_isr(c: Cluster, topic: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    resource.add_incremental_config(
        ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_isr_shrinks_refuses_acks_all_under_min_isr_and_heals(cluster: Cluster) -> None:
    _create(cluster, "isr")
    leader, replicas, _isr = _until(cluster, "isr", lambda s: s[2] == [1, 2, 3], 30, "full ISR")
    stopped = next(r for r in replicas if r != leader)
    _pause(cluster, stopped)
    try:
        shrunk = _until(
            cluster, "isr", lambda s: len(s[2]) == 2, LAG_MS / 1000 + 30, "an ISR of two"
        )
        assert stopped not in shrunk[2]
        metrics = _scrape(cluster, leader)
        assert _metric(metrics, "kafka_server_replicamanager_underreplicatedpartitions") >= 1
        ok = _produce(cluster, "isr", [b"two-in-sync"])
        assert isinstance(ok[0], int), ok
        # Two in sync, three required: acks=all is refused before the append, acks=1 lands.
        _set_min_isr(cluster, "isr", "3")
        refused = wait_value(
            lambda: (
                (r := _produce(cluster, "isr", [b"refused"], acks="all-once"))
                and isinstance(r[0], KafkaError)
                and r[0]
            ),
            30,
            what="NOT_ENOUGH_REPLICAS",
        )
        assert refused.code() == KafkaError.NOT_ENOUGH_REPLICAS, refused
        one = _produce(cluster, "isr", [b"acks-one"], acks="1")
        assert isinstance(one[0], int), one
    finally:
        _resume(cluster, stopped)
    _until(cluster, "isr", lambda s: s[2] == [1, 2, 3], 60, "the ISR whole again")

    # the stopped node was fenced out of the ISR by the controller (its session ran out first);
    # its return is a leader's own change, through AlterPartition (on a loaded machine the
    # leadership may have moved meanwhile, so every node's count is summed). The metadata shows
    # the whole ISR once the controller committed it, a moment before the leader reads the
    # AlterPartition answer that counts it: the count is awaited.
    def expands() -> float:
        return sum(
            _metric(_scrape(cluster, n.node_id), "kafka_server_replicamanager_isrexpands_total")
            for n in cluster.nodes
        )

    wait_for(lambda: expands() >= 1, 15, "an ISR expansion counted", detail=expands)
    again = _produce(cluster, "isr", [b"all-again"])
    assert isinstance(again[0], int), again
    got = ck_values(cluster.bootstrap, "isr", 3)
    assert got == [b"two-in-sync", b"acks-one", b"all-again"]


def test_leader_killed_nothing_acked_is_lost(cluster: Cluster) -> None:
    _create(cluster, "failover")
    first = _produce(cluster, "failover", [f"a{i}".encode() for i in range(500)])
    assert all(isinstance(r, int) for r in first)
    state = cluster.partition_state("failover", 0)
    assert state is not None
    leader = state[0]
    node = cluster.node(leader)
    node.kill()
    try:
        moved = _until(cluster, "failover", lambda s: s[0] not in (-1, leader), 60, "a new leader")
        assert leader not in moved[2]
        second = _produce(cluster, "failover", [f"b{i}".encode() for i in range(500)])
        assert all(isinstance(r, int) for r in second), [
            r for r in second if not isinstance(r, int)
        ][:3]
    finally:
        node.start(60)
    _until(cluster, "failover", lambda s: s[2] == [1, 2, 3], 60, "the restarted node in the ISR")
    got = ck_values(cluster.bootstrap, "failover", 1000)
    expected = [f"a{i}".encode() for i in range(500)] + [f"b{i}".encode() for i in range(500)]
    assert got == expected

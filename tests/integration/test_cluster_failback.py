"""Failback with clusters of several nodes (RF=3, min.insync.replicas=2), KIP-1279 "Failback":
A -> B (three nodes), fail over to B, B takes writes (and so does A, which B never sees), then A
mirrors from B under the same mirror name. A is one node, or three.

A asks B for the last epoch B mirrored of each partition (B's partitions are led by different
nodes, each answering for its own), keeps everything up to it, drops its own later records (the
fetch protocol's divergence truncation within the last mirrored epoch; on three nodes A's
followers then truncate from A's leader, the KIP's second phase) and copies only B's new
batches: A's mirror fetchers append exactly the bytes of B's batches past the point of
failover. Afterwards every replica of A and of B holds the same batches, byte for byte, at the
same offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from protocol.records import scan_batches
from tests.faults.replicas import Batch, compare_replicas, partition_batches

from .clients import admin, wait_for
from .cluster import Cluster
from .mirror_helpers import (
    create_mirror,
    describe_rows,
    end_offsets,
    mirror_tool,
    produce_numbered,
    scrape,
    total,
    wait_caught_up,
    write_mirror_config,
)
from .node import Node

TOPIC, PARTITIONS, MIRROR = "orders", 3, "dr"


@dataclass
class Side:
    """One cluster of the test: its nodes (one, or three with RF=3) and how to reach it."""

    nodes: list[Node]
    bootstrap: str

    @property
    def first(self) -> Node:
        return self.nodes[0]

    def batches(self, p: int) -> list[Batch]:
        return partition_batches(self.first.log_dir / f"{TOPIC}-{p}")

    def replica_problems(self) -> list[str]:
        """Where the copies of a partition differ between this side's nodes (none: one node)."""
        ids = [n.node_id for n in self.nodes]
        return compare_replicas(
            {n.node_id: n.log_dir for n in self.nodes},
            {(TOPIC, p): ids for p in range(PARTITIONS)},
        )


@pytest.fixture(params=["A one node", "A three nodes"])
def sides(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Side, Side]]:
    one = request.param == "A one node"
    a_node = Node(tmp_path / "a") if one else None
    a_cluster = None if one else Cluster(tmp_path / "a")
    b = Cluster(tmp_path / "b")
    try:
        if a_node is not None:
            a_node.start()
        b.start()
        if a_cluster is not None:
            a_cluster.start()
        a = (
            Side([a_node], a_node.bootstrap)
            if a_node is not None
            else Side(a_cluster.nodes, a_cluster.bootstrap)  # type: ignore[union-attr]
        )
        yield a, Side(b.nodes, b.bootstrap)
    finally:
        if a_cluster is not None:
            a_cluster.stop()
        b.stop()
        if a_node is not None:
            a_node.kill()


def _bytes_from(node: Node, p: int, offset: int) -> int:
    """Bytes of the partition's batches at or past ``offset`` in the node's segment files."""
    d = node.log_dir / f"{TOPIC}-{p}"
    raw = b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
    return sum(len(b.raw) for b in scan_batches(raw) if b.base_offset >= offset)


def _writable(bootstrap: str) -> bool:
    """One acks=all record to every partition succeeds."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[object] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for part in range(PARTITIONS):
        p.produce(TOPIC, b"probe", partition=part, on_delivery=done)
    p.flush(10)
    return not errors


def _identical(side: Side, what: str) -> None:
    problems: list[str] = []

    def agree() -> bool:
        problems[:] = side.replica_problems()
        return not problems

    wait_for(agree, 30, what, detail=lambda: problems)


def test_failback_to_the_old_source_copies_only_the_delta(
    sides: tuple[Side, Side], tmp_path: Path
) -> None:
    t0 = time.monotonic()
    a, b = sides
    # the cluster's default replication factor: 3 (RF=3, min.insync.replicas=2) on three nodes
    client = admin(a.bootstrap)
    client.create_topics([NewTopic(TOPIC, PARTITIONS, -1)])[TOPIC].result(15)
    assert produce_numbered(a.bootstrap, TOPIC, 600) == []
    create_mirror(b.first, MIRROR, write_mirror_config(tmp_path / "to-a.props", a.bootstrap), TOPIC)
    ends = wait_caught_up(a.bootstrap, b.bootstrap, TOPIC, PARTITIONS, "B caught up with A", 60)

    # failover to B; B takes writes, and so does A (records B never gets)
    mirror_tool(b.nodes[1], "--remove", "--topic", TOPIC, "--mirror", MIRROR)
    wait_for(lambda: _writable(b.bootstrap), 30, "B writable after failover", step=0.2)
    assert produce_numbered(b.bootstrap, TOPIC, 150, start=10_000) == []
    assert produce_numbered(a.bootstrap, TOPIC, 60, start=20_000) == []
    _identical(a, "A's replicas identical before failback")
    _identical(b, "B's replicas identical before failback")
    a_before = {p: a.batches(p) for p in range(PARTITIONS)}

    # failback: A mirrors from B (all of B's nodes as bootstrap), the same mirror name
    t_failback = time.monotonic()
    create_mirror(a.first, MIRROR, write_mirror_config(tmp_path / "to-b.props", b.bootstrap), TOPIC)
    b_ends = wait_caught_up(b.bootstrap, a.bootstrap, TOPIC, PARTITIONS, "A caught up with B", 60)
    failback_s = time.monotonic() - t_failback
    assert all(b_ends[p] > ends[p] for p in range(PARTITIONS)), (ends, b_ends)

    # every replica on each side byte-identical, and A holds exactly B's batches
    _identical(a, "A's replicas identical after failback")
    _identical(b, "B's replicas identical after failback")
    for p in range(PARTITIONS):
        got, want = a.batches(p), b.batches(p)
        assert got == want, f"{TOPIC}-{p}: A {len(got)} batches, B {len(want)}"
        # A's batches up to the point of failover are the ones it had (B mirrored them)
        kept = [x for x in a_before[p] if x.last_offset < ends[p]]
        assert got[: len(kept)] == kept, f"{TOPIC}-{p}: A's mirrored prefix changed"
        assert got[len(kept)].base_offset == ends[p], (p, got[len(kept)], ends[p])
    # only the delta crossed: A's fetchers appended exactly B's batches past the failover point
    delta = sum(_bytes_from(b.first, p, ends[p]) for p in range(PARTITIONS))
    whole = sum(_bytes_from(b.first, p, 0) for p in range(PARTITIONS))
    name = "kafka_server_mirror_appended_bytes_total"
    appended = sum(total(scrape(n), name, mirror=MIRROR) for n in a.nodes)
    assert appended == delta < whole / 2, (appended, delta, whole)
    notes = mirror_tool(a.first, "--describe", "--mirror", MIRROR)
    assert "from scratch" not in notes, notes
    assert {r[6] for r in describe_rows(a.first, MIRROR, TOPIC)} == {"MIRRORING"}, notes
    assert end_offsets(a.bootstrap, TOPIC, PARTITIONS) == b_ends
    print(
        f"A of {len(a.nodes)} node(s): failback copied {appended:.0f} of {whole} bytes in "
        f"{failback_s:.1f}s; test {time.monotonic() - t0:.1f}s"
    )

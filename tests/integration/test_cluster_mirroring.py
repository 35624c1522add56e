"""Mirroring into a three-node destination cluster: the mirror partitions are led by different
nodes, each node runs the fetchers of the partitions it leads, and the mirror admin RPCs work
when sent to any node (forwarded to the active controller)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.records import ControlType, iter_records, parse_control_record, scan_batches
from tests.faults.replicas import compare_replicas

from .clients import (
    admin,
    by_partition,
    ck_produce,
    ck_read_all,
    create_topic,
    make_records,
    wait_for,
)
from .cluster import Cluster
from .mirror_helpers import (
    create_mirror,
    describe_rows,
    mirror_tool,
    wait_caught_up,
    write_mirror_config,
)
from .node import Node


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[Node, Cluster]]:
    src = Node(tmp_path / "src").start()
    dst = Cluster(tmp_path / "dst")
    try:
        dst.start()
        yield src, dst
    finally:
        dst.stop()
        src.kill()


def test_mirror_partitions_on_three_nodes(clusters: tuple[Node, Cluster], tmp_path: Path) -> None:
    src, dst = clusters
    create_topic(src.bootstrap, "orders", 6)
    recs = make_records("orders", 600, 6)
    assert ck_produce(src.bootstrap, "orders", recs) == []
    config = write_mirror_config(tmp_path / "m.properties", src.bootstrap)
    create_mirror(dst.node(2), "dr", config, "orders")
    wait_caught_up(src.bootstrap, dst.bootstrap, "orders", 6, "the mirror on three nodes", 60)
    md = admin(dst.bootstrap).list_topics("orders", timeout=10)
    leaders = {p: pm.leader for p, pm in md.topics["orders"].partitions.items()}
    assert set(leaders.values()) == {1, 2, 3}, leaders
    got = ck_read_all(dst.node(3).bootstrap, "orders", 6, len(recs), timeout=30)
    assert by_partition(got) == by_partition(recs)
    # --describe asks every node (each reports the mirror partitions it leads): the same whole
    # table whichever node the tool starts from
    for node in dst.nodes:
        rows = describe_rows(node, "dr", "orders")
        assert sorted(int(r[2]) for r in rows) == list(range(6)), (node.node_id, rows)
        assert {r[6] for r in rows} == {"MIRRORING"}, (node.node_id, rows)
        assert {r[5] for r in rows} == {"0"}, (node.node_id, rows)
    # failover through another node: every partition becomes writable, on its own leader
    mirror_tool(dst.node(1), "--remove", "--topic", "orders", "--mirror", "dr")
    more = make_records("after", 60, 6)
    wait_for(
        lambda: ck_produce(dst.bootstrap, "orders", more[:6]) == [],
        timeout=30,
        what="the failed-over topic to take writes on every partition",
    )
    # KIP-1279 failover leaves every replica ending at the same offsets with the marker: one
    # MIRROR_PID_RESET per partition, at the same offset on each of its replicas
    md = admin(dst.bootstrap).list_topics("orders", timeout=10)
    assignment = {
        ("orders", p): list(pm.replicas) for p, pm in md.topics["orders"].partitions.items()
    }
    assert all(len(r) > 1 for r in assignment.values()), assignment
    log_dirs = {n.node_id: n.log_dir for n in dst.nodes}
    problems: list[str] = []

    def agree() -> bool:
        problems[:] = compare_replicas(log_dirs, assignment)
        return not problems

    wait_for(agree, 30, "every replica to hold the same batches", detail=lambda: problems)
    for (_, p), replicas in sorted(assignment.items()):
        at = {n: _marker_offsets(log_dirs[n] / f"orders-{p}") for n in replicas}
        assert len({tuple(v) for v in at.values()}) == 1 and len(at[replicas[0]]) == 1, (p, at)


def _marker_offsets(partition_dir: Path) -> list[int]:
    """Where the partition's MIRROR_PID_RESET control batches are in this replica's segments."""
    raw = b"".join(f.read_bytes() for f in sorted(partition_dir.glob("*.log")))
    out = []
    for b in scan_batches(raw):
        if b.is_control:
            rec = next(iter_records(b))
            if parse_control_record(rec.key, rec.value).type == ControlType.MIRROR_PID_RESET:
                out.append(b.base_offset)
    return out

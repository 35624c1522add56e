"""Failback with a destination of three nodes (RF=3, min.insync.replicas=2), KIP-1279 "Failback":
A (one node) -> B (three nodes), fail over to B, B takes writes (and so does A, which B never
sees), then A mirrors from B under the same mirror name.

A asks B for the last epoch B mirrored of each partition (B's partitions are led by different
nodes, each answering for its own), keeps everything up to it, drops its own later records (the
fetch protocol's divergence truncation within the last mirrored epoch) and copies only B's new
batches: A's mirror fetchers append exactly the bytes of B's batches past the point of failover.
Afterwards A and every replica of B hold the same batches, byte for byte, at the same offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from protocol.records import scan_batches
from tests.faults.replicas import Batch, compare_replicas, partition_batches

from .clients import create_topic, wait_for
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


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[Node, Cluster]]:
    a = Node(tmp_path / "a").start()
    b = Cluster(tmp_path / "b")
    try:
        b.start()
        yield a, b
    finally:
        b.stop()
        a.kill()


def _batches(node: Node, p: int) -> list[Batch]:
    return partition_batches(node.log_dir / f"{TOPIC}-{p}")


def _bytes_from(node: Node, p: int, offset: int) -> int:
    """Bytes of the partition's batches at or past ``offset`` in the node's segment files."""
    d = node.log_dir / f"{TOPIC}-{p}"
    raw = b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
    return sum(len(b.raw) for b in scan_batches(raw) if b.base_offset >= offset)


def _writable(bootstrap: str) -> bool:
    """One acks=all record to every partition succeeds."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[object] = []
    for part in range(PARTITIONS):
        p.produce(TOPIC, b"probe", partition=part, on_delivery=lambda e, _m: e and errors.append(e))
    p.flush(10)
    return not errors


def test_failback_to_the_old_source_copies_only_the_delta(
    clusters: tuple[Node, Cluster], tmp_path: Path
) -> None:
    t0 = time.monotonic()
    a, b = clusters
    create_topic(a.bootstrap, TOPIC, PARTITIONS)
    assert produce_numbered(a.bootstrap, TOPIC, 600) == []
    create_mirror(
        b.node(1), MIRROR, write_mirror_config(tmp_path / "to-a.props", a.bootstrap), TOPIC
    )
    ends = wait_caught_up(a.bootstrap, b.bootstrap, TOPIC, PARTITIONS, "B caught up with A", 60)
    leaders = {p: b.partition_state(TOPIC, p) for p in range(PARTITIONS)}
    assert len({s[0] for s in leaders.values() if s is not None}) > 1, leaders  # spread

    # failover to B; B takes writes, and so does A (records B never gets)
    mirror_tool(b.node(2), "--remove", "--topic", TOPIC, "--mirror", MIRROR)
    wait_for(lambda: _writable(b.bootstrap), 30, "B writable after failover", step=0.2)
    assert produce_numbered(b.bootstrap, TOPIC, 150, start=10_000) == []
    assert produce_numbered(a.bootstrap, TOPIC, 60, start=20_000) == []
    a_before = {p: _batches(a, p) for p in range(PARTITIONS)}
    assignment = {(TOPIC, p): [1, 2, 3] for p in range(PARTITIONS)}
    log_dirs = {n.node_id: n.log_dir for n in b.nodes}
    problems: list[str] = []

    def b_replicas_agree() -> bool:
        problems[:] = compare_replicas(log_dirs, assignment)
        return not problems

    wait_for(b_replicas_agree, 30, "B's replicas identical", detail=lambda: problems)

    # failback: A mirrors from B (all three nodes as bootstrap), the same mirror name
    t_failback = time.monotonic()
    create_mirror(a, MIRROR, write_mirror_config(tmp_path / "to-b.props", b.bootstrap), TOPIC)
    b_ends = wait_caught_up(b.bootstrap, a.bootstrap, TOPIC, PARTITIONS, "A caught up with B", 60)
    failback_s = time.monotonic() - t_failback
    assert all(b_ends[p] > ends[p] for p in range(PARTITIONS)), (ends, b_ends)

    # every replica of B byte-identical, and A holds exactly B's batches
    wait_for(b_replicas_agree, 30, "B's replicas identical", detail=lambda: problems)
    for p in range(PARTITIONS):
        got, want = _batches(a, p), _batches(b.node(1), p)
        assert got == want, f"{TOPIC}-{p}: A {len(got)} batches, B {len(want)}"
        # A's batches up to the point of failover are the ones it had (B mirrored them)
        kept = [x for x in a_before[p] if x.last_offset < ends[p]]
        assert got[: len(kept)] == kept, f"{TOPIC}-{p}: A's mirrored prefix changed"
        assert got[len(kept)].base_offset == ends[p], (p, got[len(kept)], ends[p])
    # only the delta crossed: A's fetchers appended exactly B's batches past the failover point
    delta = sum(_bytes_from(b.node(1), p, ends[p]) for p in range(PARTITIONS))
    whole = sum(_bytes_from(b.node(1), p, 0) for p in range(PARTITIONS))
    appended = total(scrape(a), "kafka_server_mirror_appended_bytes_total", mirror=MIRROR)
    assert appended == delta < whole / 2, (appended, delta, whole)
    notes = mirror_tool(a, "--describe", "--mirror", MIRROR)
    assert "from scratch" not in notes, notes
    assert {r[6] for r in describe_rows(a, MIRROR, TOPIC)} == {"MIRRORING"}, notes
    assert end_offsets(a.bootstrap, TOPIC, PARTITIONS) == b_ends
    print(
        f"failback copied {appended} of {whole} bytes in {failback_s:.1f}s; "
        f"test {time.monotonic() - t0:.1f}s"
    )

"""Metadata snapshots in a three-node cluster of real processes (the shipped configs, with a
small ``metadata.log.max.record.bytes.between.snapshots``): the nodes snapshot their metadata
image and drop their log below it; a node killed with kill -9 while the others moved their log
start past its log end catches up through FetchSnapshot when it restarts, and then holds the
same metadata as the others (``kmirror_metadata_image_info``'s digest and offset)."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from tests.waits import wait_value

from .clients import admin
from .cluster import Cluster
from .mirror_helpers import Samples, scrape
from .node import Node

SNAPSHOT_BYTES = "8000"
_LEADER = re.compile(rb"metadata quorum: leader (\d+) at epoch (\d+)")
_LOADED = re.compile(rb"metadata snapshot loaded: offsets below (\d+)")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, metadata__log__max__record__bytes__between__snapshots=SNAPSHOT_BYTES)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def image_info(node: Node) -> tuple[str, int] | None:
    """(digest, offset) from the node's ``kmirror_metadata_image_info``."""
    try:
        samples: Samples = scrape(node)
    except OSError:
        return None
    found = samples.get("kmirror_metadata_image_info", [])
    offset = samples.get("kmirror_metadata_image_offset", [])
    if len(found) != 1 or len(offset) != 1:
        return None
    labels, _ = found[0]
    return labels["digest"], int(offset[0][1])


def log_end(node: Node) -> int:
    samples = scrape(node)
    ((_, value),) = samples["kafka_server_raft_metrics_log_end_offset"]
    return int(value)


def snapshot_ends(node: Node) -> list[int]:
    files = (node.log_dir / "__cluster_metadata-0").glob("*.checkpoint")
    return sorted(int(p.name.split("-")[0]) for p in files)


def quorum_leader(node: Node) -> int:
    found = _LEADER.findall(node.output.read_bytes())
    return int(found[-1][0]) if found else -1


def all_alike(nodes: list[Node]) -> tuple[str, int] | None:
    infos = {image_info(n) for n in nodes}
    if len(infos) != 1:
        return None
    (info,) = infos
    return info


def create_topics(names: list[str], bootstrap: str) -> None:
    a = admin(bootstrap)  # kept alive until the futures resolve
    fs = a.create_topics([NewTopic(n, 3, 1) for n in names], operation_timeout=20)
    for f in fs.values():
        f.result(30)


def snapshot_past(rest: list[Node], bound: int) -> int:
    """Create topics through ``rest`` until each of them wrote a snapshot past ``bound`` (so
    its log starts there); how many topics it took."""
    bootstrap = ",".join(n.bootstrap for n in rest)
    created = 0
    for batch in range(40):
        if all(snapshot_ends(n) and snapshot_ends(n)[-1] > bound for n in rest):
            break
        create_topics([f"t-{batch}-{i}" for i in range(20)], bootstrap)
        created += 20
    else:
        raise AssertionError(f"no snapshot past offset {bound}: {[snapshot_ends(n) for n in rest]}")
    wait_value(lambda: all_alike(rest), 30, "the same image on the live nodes")
    return created


def loaded_since(node: Node, seen: int) -> list[int]:
    """End offsets of the snapshots the node logged loading after byte ``seen`` of its output."""
    with node.output.open("rb") as f:
        f.seek(seen)
        return [int(x) for x in _LOADED.findall(f.read())]


def test_a_killed_node_behind_the_log_start_catches_up_through_a_snapshot(
    cluster: Cluster,
) -> None:
    nodes = cluster.nodes
    create_topics([f"early-{i}" for i in range(10)], cluster.bootstrap)
    wait_value(lambda: all_alike(nodes), 30, "the same image on every node")

    leader = wait_value(lambda: max(quorum_leader(nodes[0]), 0), 10, "a quorum leader")
    victim = next(n for n in nodes if n.node_id != leader)
    rest = [n for n in nodes if n is not victim]
    victim.kill()  # kill -9
    # the victim's log cannot end after what the others held when it died
    bound = max(log_end(n) for n in rest)
    created = 10 + snapshot_past(rest, bound)

    assert all(e <= bound for e in snapshot_ends(victim))  # none of its own can help it
    seen = victim.output.stat().st_size
    victim.launch()
    victim.wait_started(60)
    wait_value(
        lambda: all_alike(nodes),
        60,
        "the restarted node to hold the others' metadata",
        detail=lambda: [(n.node_id, image_info(n)) for n in nodes] + [victim.log_tail(20)],
    )
    loaded = loaded_since(victim, seen)
    # fetched from the leader (FetchSnapshot): past anything its own log held
    assert loaded and loaded[0] > bound, victim.log_tail(40)
    ends = snapshot_ends(victim)
    assert ends and ends[0] > bound
    listed = admin(victim.bootstrap).list_topics(timeout=10).topics
    assert sum(1 for t in listed if t.startswith(("early-", "t-"))) == created


def test_a_paused_node_behind_the_log_start_replaces_its_image_while_running(
    cluster: Cluster,
) -> None:
    """SIGSTOP instead of a kill: the node is running (its image loaded) when it finds itself
    behind the leader's log start, so the snapshot replaces a live image. What changed while it
    slept reaches it through the difference of the two images: the partitions of a topic deleted
    meanwhile leave its log dirs."""
    nodes = cluster.nodes
    create_topics([f"early-{i}" for i in range(10)], cluster.bootstrap)
    wait_value(lambda: all_alike(nodes), 30, "the same image on every node")
    leader = wait_value(lambda: max(quorum_leader(nodes[0]), 0), 10, "a quorum leader")
    victim = next(n for n in nodes if n.node_id != leader)
    rest = [n for n in nodes if n is not victim]
    hosted = sorted(p.name for p in victim.log_dir.glob("early-*"))
    assert hosted, "no early-* partition on the victim"
    assert victim.proc is not None
    seen = victim.output.stat().st_size
    victim.proc.send_signal(signal.SIGSTOP)
    try:
        bound = max(log_end(n) for n in rest)
        a = admin(",".join(n.bootstrap for n in rest))
        for f in a.delete_topics([f"early-{i}" for i in range(10)], operation_timeout=20).values():
            f.result(30)
        snapshot_past(rest, bound)
    finally:
        victim.proc.send_signal(signal.SIGCONT)
    wait_value(
        lambda: all_alike(nodes),
        60,
        "the resumed node to hold the others' metadata",
        detail=lambda: [(n.node_id, image_info(n)) for n in nodes] + [victim.log_tail(20)],
    )
    loaded = loaded_since(victim, seen)
    assert loaded and loaded[0] > bound, victim.log_tail(40)
    assert "metadata snapshot below offset" in victim.log_tail(200)  # replaced, not first load
    wait_value(
        lambda: not list(victim.log_dir.glob("early-*")),
        20,
        "the deleted topics' partitions to leave the resumed node",
        detail=lambda: sorted(p.name for p in victim.log_dir.glob("early-*")),
    )

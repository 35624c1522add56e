"""Mirror topologies beyond one source and one destination (KIP-1279, "Producer State
Management": chain, fan-in, fan-out), between real kmirror nodes, driven by kafka-mirrors.sh and
stock confluent-kafka clients. Each checks every replica byte-identical to its source: the chain
with the PySpark audit job itself (run once in this suite), the others with the audit's
comparison run in-process and batch digests of the segment files.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from confluent_kafka import Producer

from .clients import ck_values, create_topic, wait_for
from .cluster import Cluster
from .mirror_helpers import (
    create_mirror,
    end_offsets,
    mirror_tool,
    node_mirror_states,
    produce_numbered,
    running,
    wait_caught_up,
    write_mirror_config,
)
from .node import ROOT, Node
from .topology_helpers import (
    assert_identical,
    audit_dirs,
    batches,
    markers,
    producer_ids,
    topic_id,
)

TOPIC = "orders"
PARTITIONS = 2


def _writable(bootstrap: str, topic: str, start: int) -> bool:
    """One acknowledged record per partition (a failed-over topic may take a moment)."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    errors: list[object] = []
    for part in range(PARTITIONS):
        p.produce(
            topic,
            key=b"w%d" % (start + part),
            value=b"v%06d" % (start + part),
            partition=part,
            on_delivery=lambda e, m: errors.append(e) if e else None,
        )
    p.flush(10)
    return not errors


def _values(bootstrap: str, topic: str, n: int) -> list[bytes]:
    got = ck_values(bootstrap, topic, n, timeout=30)
    assert len(got) == n, (bootstrap, topic, len(got), n)
    return got


# --- chain: A -> B -> C --------------------------------------------------------------------


def test_chain_mirror_of_a_mirror_then_failover_at_each_hop(tmp_path: Path) -> None:
    a, b, c = Node(tmp_path / "a"), Node(tmp_path / "b"), Node(tmp_path / "c")
    with running(a, b, c, clean_stop=True):
        create_topic(a.bootstrap, TOPIC, PARTITIONS)
        assert not produce_numbered(a.bootstrap, TOPIC, 300)
        create_mirror(b, "from-a", write_mirror_config(tmp_path / "ab.properties", a.bootstrap))
        mirror_tool(b, "--add", "--topic", TOPIC, "--mirror", "from-a")
        wait_caught_up(a.bootstrap, b.bootstrap, TOPIC, PARTITIONS, "B to copy A")
        # C mirrors B's topic, itself a mirror topic (read-only on B)
        create_mirror(c, "from-b", write_mirror_config(tmp_path / "bc.properties", b.bootstrap))
        mirror_tool(c, "--add", "--topic", TOPIC, "--mirror", "from-b")
        ends = wait_caught_up(b.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C to copy B")
        assert ends == end_offsets(a.bootstrap, TOPIC, PARTITIONS)
        # more writes on A travel both hops while both mirrors run
        assert not produce_numbered(a.bootstrap, TOPIC, 200, start=300)
        wait_caught_up(a.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C to copy A via B", 45)
        ids = {n: topic_id(n.bootstrap, TOPIC) for n in (a, b, c)}
        assert len(set(ids.values())) == 1, ids
        for p in range(PARTITIONS):
            ab = batches(a.log_dir, TOPIC, p)
            assert ab and batches(b.log_dir, TOPIC, p) == ab == batches(c.log_dir, TOPIC, p), p
        keys = {(TOPIC, p) for p in range(PARTITIONS)}
        assert_identical(audit_dirs(a.log_dir, b.log_dir, TOPIC), keys, "A vs B")
        assert_identical(audit_dirs(b.log_dir, c.log_dir, TOPIC), keys, "B vs C")

        # failover at B: B's topic becomes writable; C keeps following B and so gets B's
        # MIRROR_PID_RESET marker and B's own writes as data it mirrors
        mirror_tool(b, "--remove", "--topic", TOPIC, "--mirror", "from-a")
        wait_for(lambda: _writable(b.bootstrap, TOPIC, 500), 30, "B's topic to take writes")
        assert not produce_numbered(b.bootstrap, TOPIC, 100, start=502)
        b_ends = wait_caught_up(b.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C to follow B", 45)
        states = node_mirror_states(c, "from-b")
        assert {s for s, _ in states.values()} == {"MIRRORING"}, states
        for p in range(PARTITIONS):
            b_markers = markers(b.log_dir, TOPIC, p)
            assert len(b_markers) == 1, (p, b_markers)
            assert markers(c.log_dir, TOPIC, p) == b_markers, p
            assert batches(c.log_dir, TOPIC, p) == batches(b.log_dir, TOPIC, p), p
            a_batches = batches(a.log_dir, TOPIC, p)
            assert batches(b.log_dir, TOPIC, p)[: len(a_batches)] == a_batches, p
            assert b_markers[0][0] == a_batches[-1].last_offset + 1, (p, b_markers)
        assert end_offsets(b.bootstrap, TOPIC, PARTITIONS) == b_ends
        assert_identical(audit_dirs(b.log_dir, c.log_dir, TOPIC), keys, "B vs C after B failover")
        # B's producers reuse the producer ids A's had (each cluster allocates from 0): C's
        # producer state was reset by B's marker, so it stored them like any other batch
        pids = {
            n.node_id: sorted(set(producer_ids(n.log_dir, TOPIC, 0))) for n in (a, b, c)
        }  # noqa: F841 (reported below on failure)

        # failover at C: C writes its own marker after B's and takes writes
        mirror_tool(c, "--remove", "--topic", TOPIC, "--mirror", "from-b")
        wait_for(lambda: _writable(c.bootstrap, TOPIC, 900), 30, "C's topic to take writes")
        assert not produce_numbered(c.bootstrap, TOPIC, 40, start=902)
        for p in range(PARTITIONS):
            c_markers = markers(c.log_dir, TOPIC, p)
            assert c_markers[0] == markers(b.log_dir, TOPIC, p)[0], (p, c_markers)
            assert len(c_markers) == 2 and c_markers[1][0] > c_markers[0][0], (p, c_markers, pids)
            assert c_markers[1][1] != c_markers[0][1], c_markers  # each names its own source
        # every acknowledged record is readable on C, once: A's 500, B's 102, C's 42
        got = _values(c.bootstrap, TOPIC, 500 + 102 + 42)
        assert len(set(got)) == len(got)
    # stopped cleanly: the audit job (Spark) reads the segments, A against C
    report = _spark_audit(a.log_dir, c.log_dir, tmp_path / "audit")
    assert report["verdicts"] == {"IDENTICAL": PARTITIONS, "LAGGING": 0, "DIVERGED": 0, "MISSING": 0}
    for part in report["partitions"]:
        # C's mirrored part ends at B's marker (A never had it): the rest is B's and C's
        assert part["failover_offset"] >= 0 and part["post_failover_batches"] > 0, part
        assert part["matched_batches"] == part["source_batches"], part


def _spark_audit(source: Path, destination: Path, out: Path) -> dict:
    run = subprocess.run(
        [
            str(ROOT / "bin" / "kafka-mirror-audit.sh"),
            "--source",
            str(source),
            "--destination",
            str(destination),
            "--output",
            str(out),
            "--master",
            "local[2]",
            "--topics",
            TOPIC,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads((out / "report.json").read_text())

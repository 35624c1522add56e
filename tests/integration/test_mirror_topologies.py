"""Mirror topologies beyond one source and one destination (KIP-1279, "Producer State
Management": chain, fan-in, fan-out), between real kmirror nodes, driven by kafka-mirrors.sh and
stock confluent-kafka clients. Each checks every replica byte-identical to its source: the chain
with the PySpark audit job itself (run once in this suite), the others with the audit's
comparison run in-process and batch digests of the segment files.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import TopicPartition as KpTopicPartition  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from tests.faults.replicas import compare_replicas

from .clients import ck_values, create_topic, wait_for
from .cluster import Cluster
from .mirror_helpers import (
    create_mirror,
    end_offsets,
    mirror_tool,
    node_mirror_states,
    produce_numbered,
    run_mirror_tool,
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
    running_together,
    topic_id,
)

TXN_SETTINGS = {
    "transaction__state__log__replication__factor": "1",
    "transaction__state__log__num__partitions": "2",
}
TOPIC = "orders"
PARTITIONS = 2


def _writable(bootstrap: str, topic: str, acked: list[int]) -> bool:
    """One record per partition (a failed-over topic may take a moment to take writes); the
    partition of each one acknowledged goes to ``acked``, as a failed attempt may still have
    written some. True when all were."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    failed: list[object] = []

    def done(err: object, msg: object) -> None:
        if err:
            failed.append(err)
        else:
            acked.append(msg.partition())  # type: ignore[attr-defined]

    for part in range(PARTITIONS):
        p.produce(topic, value=b"w%06d" % next(_PROBES), partition=part, on_delivery=done)
    p.flush(10)
    return not failed and len(p) == 0


_PROBES = itertools.count()


def _values(bootstrap: str, topic: str, n: int) -> list[bytes]:
    got = ck_values(bootstrap, topic, n, timeout=30)
    assert len(got) == n, (bootstrap, topic, len(got), n)
    return got


GROUP = "readers"


def _read_and_commit(bootstrap: str, n: int) -> tuple[list[bytes], dict[int, int]]:
    """Group ``readers`` reads ``n`` records of TOPIC (from its committed offsets, else the
    start) and commits synchronously: the values and the committed offsets."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    got: list[bytes] = []
    try:
        c.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(n - len(got), timeout=0.5):
                assert not m.error(), m.error()
                got.append(m.value())
        assert len(got) == n, (bootstrap, len(got), n)
        done = c.commit(asynchronous=False) or []
        return got, {tp.partition: tp.offset for tp in done if tp.offset >= 0}
    finally:
        c.close()


def _committed(bootstrap: str) -> dict[int, int]:
    """Group ``readers``'s committed offsets of TOPIC ({} while unknown)."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        tps = probe.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=5)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    except KafkaException:
        return {}
    finally:
        probe.close()


def _commit_transaction(bootstrap: str, topic: str, n: int) -> None:
    """``n`` records over every partition in one committed transaction."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "chain-txn"})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=b"t%d" % i, value=b"t%06d" % i, partition=i % PARTITIONS)
    p.commit_transaction(20)


def _producers(node: Node, topic: str) -> dict[int, list[tuple[int, int, int, int]]]:
    """Each partition's active producers as kafka-python's DescribeProducers reads them:
    sorted (producer id, epoch, last sequence, open transaction's first offset)."""
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        states = admin.describe_producers([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        admin.close()
    return {
        tp.partition: sorted(
            (s.producer_id, s.producer_epoch, s.last_sequence, s.current_transaction_start_offset)
            for s in state.active_producers
        )
        for tp, state in states.items()
    }


# --- chain: A -> B -> C --------------------------------------------------------------------


def test_chain_mirror_of_a_mirror_then_failover_at_each_hop(tmp_path: Path) -> None:
    a = Node(tmp_path / "a", **TXN_SETTINGS)
    fast = {"mirror__metadata__refresh__interval__ms": "1000"}  # group offsets synced each 1 s
    b, c = Node(tmp_path / "b", **fast), Node(tmp_path / "c", **fast)
    with running_together(a, b, c, clean_stop=True):
        create_topic(a.bootstrap, TOPIC, PARTITIONS)
        assert not produce_numbered(a.bootstrap, TOPIC, 300)
        _commit_transaction(a.bootstrap, TOPIC, 20)  # COMMIT markers travel both hops too
        create_mirror(b, "from-a", write_mirror_config(tmp_path / "ab.properties", a.bootstrap))
        mirror_tool(b, "--add", "--topic", TOPIC, "--mirror", "from-a")
        wait_caught_up(a.bootstrap, b.bootstrap, TOPIC, PARTITIONS, "B to copy A")
        # C mirrors B's topic, itself a mirror topic (read-only on B)
        create_mirror(c, "from-b", write_mirror_config(tmp_path / "bc.properties", b.bootstrap))
        mirror_tool(c, "--add", "--topic", TOPIC, "--mirror", "from-b")
        ends = wait_caught_up(b.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C to copy B")
        assert ends == end_offsets(a.bootstrap, TOPIC, PARTITIONS)
        # A's producer state is rebuilt from the bytes at each hop
        assert _producers(a, TOPIC) == _producers(b, TOPIC) == _producers(c, TOPIC)
        # more writes on A travel both hops while both mirrors run
        assert not produce_numbered(a.bootstrap, TOPIC, 200, start=300)
        wait_caught_up(a.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C to copy A via B", 45)
        ids = {n: topic_id(n.bootstrap, TOPIC) for n in (a, b, c)}
        assert len(set(ids.values())) == 1, ids
        # a consumer group's offsets on A are synced to B, and from B's copy to C
        read_on_a, at_a = _read_and_commit(a.bootstrap, 120)
        wait_for(lambda: _committed(c.bootstrap) == at_a, 30, "A's group offsets at C via B")
        for p in range(PARTITIONS):
            ab = batches(a.log_dir, TOPIC, p)
            assert ab and batches(b.log_dir, TOPIC, p) == ab == batches(c.log_dir, TOPIC, p), p
        keys = {(TOPIC, p) for p in range(PARTITIONS)}
        assert_identical(audit_dirs(a.log_dir, b.log_dir, TOPIC), keys, "A vs B")
        assert_identical(audit_dirs(b.log_dir, c.log_dir, TOPIC), keys, "B vs C")

        # failover at B: B's topic becomes writable; C keeps following B and so gets B's
        # MIRROR_PID_RESET marker and B's own writes as data it mirrors
        mirror_tool(b, "--remove", "--topic", TOPIC, "--mirror", "from-a")
        on_b: list[int] = []
        wait_for(lambda: _writable(b.bootstrap, TOPIC, on_b), 30, "B's topic to take writes")
        assert not produce_numbered(b.bootstrap, TOPIC, 100, start=502)
        b_ends = wait_caught_up(b.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C to follow B", 45)
        states = node_mirror_states(c, "from-b")
        assert {s for s, _ in states.values()} == {"MIRRORING"}, states
        for p in range(PARTITIONS):
            b_markers = markers(b.log_dir, TOPIC, p)
            assert [cid for _, cid in b_markers] == [a.cluster_id], (p, b_markers)
            assert markers(c.log_dir, TOPIC, p) == b_markers, p
            assert batches(c.log_dir, TOPIC, p) == batches(b.log_dir, TOPIC, p), p
            a_batches = batches(a.log_dir, TOPIC, p)
            assert batches(b.log_dir, TOPIC, p)[: len(a_batches)] == a_batches, p
            assert b_markers[0][0] == a_batches[-1].last_offset + 1, (p, b_markers)
        assert end_offsets(b.bootstrap, TOPIC, PARTITIONS) == b_ends
        assert_identical(audit_dirs(b.log_dir, c.log_dir, TOPIC), keys, "B vs C after B failover")
        # KIP-1279: a mirrored MIRROR_PID_RESET resets the mirror's producer state as the
        # source's own did. B's new producers reuse ids A's had (each cluster allocates its own
        # from 0); C holds B's state, none of A's three producers is left behind
        b_state = _producers(b, TOPIC)
        assert _producers(c, TOPIC) == b_state != _producers(a, TOPIC)
        for p in range(PARTITIONS):
            after = {pid for pid, *_ in b_state[p]}
            assert after and after < set(producer_ids(a.log_dir, TOPIC, p)), (p, b_state)

        # failover at C: C writes its own marker after B's and takes writes
        mirror_tool(c, "--remove", "--topic", TOPIC, "--mirror", "from-b")
        on_c: list[int] = []
        wait_for(lambda: _writable(c.bootstrap, TOPIC, on_c), 30, "C's topic to take writes")
        assert not produce_numbered(c.bootstrap, TOPIC, 40, start=902)
        for p in range(PARTITIONS):
            c_markers = markers(c.log_dir, TOPIC, p)
            assert c_markers[0] == markers(b.log_dir, TOPIC, p)[0], (p, c_markers)
            assert len(c_markers) == 2 and c_markers[1][0] > c_markers[0][0], (p, c_markers)
            assert c_markers[1][1] == b.cluster_id, c_markers  # each names its source
        # every acknowledged record is readable on C, once: A's 520, B's 100 and probes, C's
        got = _values(c.bootstrap, TOPIC, 520 + 100 + len(on_b) + 40 + len(on_c))
        assert len(set(got)) == len(got)
        # the group moves to C and reads exactly what it had not read on A
        rest, _ = _read_and_commit(c.bootstrap, len(got) - len(read_on_a))
        assert sorted(read_on_a + rest) == sorted(got)
    # stopped cleanly: the audit job (Spark) reads the segments, A against C
    report = _spark_audit(a.log_dir, c.log_dir, tmp_path / "audit")
    assert report["verdicts"] == {
        "IDENTICAL": PARTITIONS,
        "LAGGING": 0,
        "DIVERGED": 0,
        "MISSING": 0,
    }
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


# --- fan-in: A1 -> B <- A2, a node of B killed meanwhile -------------------------------------

FAN_IN = {"a1": ("a1.orders", "a1.events"), "a2": ("a2.orders", "a2.payments")}


def test_fan_in_two_sources_into_three_nodes_one_killed(tmp_path: Path) -> None:
    sources = {name: Node(tmp_path / name) for name in FAN_IN}
    b = Cluster(tmp_path / "b")
    with running_together(*sources.values(), *b.nodes):
        for name, src in sources.items():
            for t in FAN_IN[name]:
                create_topic(src.bootstrap, t, PARTITIONS)
                assert not produce_numbered(src.bootstrap, t, 150)
            create_topic(src.bootstrap, f"x.{name}", 1)  # matches neither pattern: stays home
            config = write_mirror_config(tmp_path / f"{name}.properties", src.bootstrap)
            # each mirror's admin requests through a different node of B (forwarded)
            create_mirror(b.node(1 if name == "a1" else 2), f"from-{name}", config, f"{name}.*")
        for name, src in sources.items():
            for t in FAN_IN[name]:
                wait_caught_up(src.bootstrap, b.bootstrap, t, PARTITIONS, f"B to copy {t}", 60)
        # A2 has an a1.orders of its own: the second mirror cannot take B's over
        create_topic(sources["a2"].bootstrap, "a1.orders", 1)
        rc, _, err = run_mirror_tool(
            b.node(3), "--add", "--topic", "a1.orders", "--mirror", "from-a2"
        )
        assert rc == 1 and "INCONSISTENT_TOPIC_ID" in err and "a1.orders" in err, err
        # kill -9 the node of B leading a1.orders-0 while both sources take writes
        victim = b.node(_leader(b, "a1.orders", 0))
        failed: list[str] = []
        writers = [
            threading.Thread(target=_produce_slowly, args=(src.bootstrap, t, 150, 300, failed))
            for name, src in sources.items()
            for t in FAN_IN[name]
        ]
        for w in writers:
            w.start()
        time.sleep(1.0)
        victim.kill()
        for w in writers:
            w.join(60)
        assert not any(w.is_alive() for w in writers)
        assert not failed, failed
        for name, src in sources.items():
            for t in FAN_IN[name]:
                wait_caught_up(
                    src.bootstrap, _live_bootstrap(b), t, PARTITIONS, f"{t} with a node down", 60
                )
        victim.start(60)
        for name, src in sources.items():
            for t in FAN_IN[name]:
                assert not produce_numbered(src.bootstrap, t, 50, start=450)
                wait_caught_up(src.bootstrap, b.bootstrap, t, PARTITIONS, f"{t} after restart", 60)
        assignment = {
            (t, p): _replicas(b, t, p)
            for ts in FAN_IN.values()
            for t in ts
            for p in range(PARTITIONS)
        }
        assert all(len(r) == 3 for r in assignment.values()), assignment
        log_dirs = {n.node_id: n.log_dir for n in b.nodes}
        problems: list[str] = []

        def agree() -> bool:
            problems[:] = compare_replicas(log_dirs, assignment)
            return not problems

        wait_for(agree, 60, "every replica of B to hold the same batches", detail=lambda: problems)
        wait_for(
            lambda: all(
                (s := b.partition_state(t, p)) is not None and s[2] == [1, 2, 3]
                for t, p in assignment
            ),
            60,
            "the restarted node to rejoin every ISR",
        )
        # every replica on every node of B is identical to its own source's log
        for name, src in sources.items():
            keys = {(t, p) for t in FAN_IN[name] for p in range(PARTITIONS)}
            for n in b.nodes:
                reports = audit_dirs(src.log_dir, n.log_dir, rf"{name}\..*")
                assert_identical(reports, keys, f"{name} vs B node {n.node_id}")
            assert not (b.nodes[0].log_dir / f"x.{name}-0").exists()
        for name in FAN_IN:
            rows = mirror_tool(b.node(3), "--describe", "--mirror", f"from-{name}").splitlines()
            table = [r.split() for r in rows[1:] if r.startswith(f"from-{name}")]
            assert len(table) == 2 * PARTITIONS, rows
            assert {r[6] for r in table} == {"MIRRORING"} and {r[5] for r in table} == {"0"}, rows
        for t in ("a1.orders", "a2.payments"):
            assert len(set(_values(b.bootstrap, t, 350))) == 350  # 150 + 150 + 50


def _produce_slowly(bootstrap: str, topic: str, n: int, start: int, failed: list[str]) -> None:
    """``n`` numbered records in 10 bursts about 0.3 s apart (writes across the kill); what
    went wrong goes to ``failed`` (a thread's exception would not fail the test)."""
    try:
        for k in range(10):
            errors = produce_numbered(bootstrap, topic, n // 10, start + k * (n // 10))
            failed.extend(f"{topic}: {e}" for e in errors)
            time.sleep(0.3)
    except Exception as e:  # reported by the test thread
        failed.append(f"{topic}: {e!r}")


def _leader(cluster: Cluster, topic: str, partition: int) -> int:
    state = cluster.partition_state(topic, partition)
    assert state is not None, (topic, partition)
    return state[0]


def _replicas(cluster: Cluster, topic: str, partition: int) -> list[int]:
    state = cluster.partition_state(topic, partition)
    assert state is not None, (topic, partition)
    return state[1]


def _live_bootstrap(cluster: Cluster) -> str:
    return ",".join(n.bootstrap for n in cluster.nodes if n.proc and n.proc.poll() is None)


# --- fan-out: B <- A -> C ------------------------------------------------------------------


def test_fan_out_one_source_two_mirrors(tmp_path: Path) -> None:
    a, b, c = Node(tmp_path / "a"), Node(tmp_path / "b"), Node(tmp_path / "c")
    with running_together(a, b, c):
        create_topic(a.bootstrap, TOPIC, PARTITIONS)
        assert not produce_numbered(a.bootstrap, TOPIC, 200)
        for dst in (b, c):
            props = write_mirror_config(tmp_path / f"{dst.workdir.name}.properties", a.bootstrap)
            create_mirror(dst, "from-a", props, TOPIC)
        assert not produce_numbered(a.bootstrap, TOPIC, 200, start=200)
        for dst in (b, c):
            wait_caught_up(a.bootstrap, dst.bootstrap, TOPIC, PARTITIONS, "both mirrors", 45)
        ids = {topic_id(n.bootstrap, TOPIC) for n in (a, b, c)}
        assert len(ids) == 1, ids
        keys = {(TOPIC, p) for p in range(PARTITIONS)}
        for dst in (b, c):
            assert_identical(audit_dirs(a.log_dir, dst.log_dir, TOPIC), keys, "fan-out")
            for p in range(PARTITIONS):
                assert batches(dst.log_dir, TOPIC, p) == batches(a.log_dir, TOPIC, p), p
        # failover at B alone: C goes on mirroring A, with no marker of B's
        at_failover = end_offsets(a.bootstrap, TOPIC, PARTITIONS)
        mirror_tool(b, "--remove", "--topic", TOPIC, "--mirror", "from-a")
        on_b: list[int] = []
        wait_for(lambda: _writable(b.bootstrap, TOPIC, on_b), 30, "B's topic to take writes")
        assert not produce_numbered(a.bootstrap, TOPIC, 100, start=400)
        wait_caught_up(a.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C after B's failover", 45)
        assert_identical(audit_dirs(a.log_dir, c.log_dir, TOPIC), keys, "C after B's failover")
        for p in range(PARTITIONS):
            assert markers(c.log_dir, TOPIC, p) == [], p
            assert len(markers(b.log_dir, TOPIC, p)) == 1, p
        assert len(_values(c.bootstrap, TOPIC, 500)) == 500
        # B holds what it had at failover, its marker and its own record, not A's later writes
        after = end_offsets(b.bootstrap, TOPIC, PARTITIONS)
        want = {p: e + 1 + on_b.count(p) for p, e in at_failover.items()}  # + marker, probes
        assert after == want, (after, at_failover, on_b)
        # A is lost; C, ahead of B by A's last 100 records, is pointed at the promoted B: C
        # fails over from A, then mirrors B. B has no record of mirroring from C, so KIP-1279
        # has C truncate and copy B from scratch (the --describe note says so)
        a.kill()
        mirror_tool(c, "--remove", "--topic", TOPIC, "--mirror", "from-a")
        create_mirror(c, "from-b", write_mirror_config(tmp_path / "cb.properties", b.bootstrap))
        mirror_tool(c, "--add", "--topic", TOPIC, "--mirror", "from-b")
        # end offsets as a consumer reads them (ListOffsets latest) come back on C
        wait_caught_up(b.bootstrap, c.bootstrap, TOPIC, PARTITIONS, "C to follow B", 45)
        assert_identical(audit_dirs(b.log_dir, c.log_dir, TOPIC), keys, "C re-pointed at B")
        for p in range(PARTITIONS):
            assert batches(c.log_dir, TOPIC, p) == batches(b.log_dir, TOPIC, p), p
        assert len(_values(c.bootstrap, TOPIC, 400 + len(on_b))) == 400 + len(on_b)  # A's, B's
        states = node_mirror_states(c, "from-b")
        assert {s for s, _ in states.values()} == {"MIRRORING"}, states
        assert any("from scratch" in (why or "") for _, why in states.values()), states

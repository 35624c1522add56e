"""Cluster Mirroring into a three-node destination (RF=3, min.insync.replicas=2) while each round
kills -9 a random destination node and restarts it; the source keeps taking writes all along.

After the rounds the mirror catches up (lag 0 on every partition) and every replica of every
destination partition holds exactly the source's batches at the source's offsets, byte for byte,
read from the segment files of all four nodes. Then failover (``--remove``) makes every
partition writable on whichever node leads it.

Two sources: one kmirror node (its segment files are the reference for the byte compare), and
librdkafka's mock cluster with three brokers (an independent implementation; its partitions'
leaders are moved between its brokers during the rounds, and the destination replicas are
compared with each other). Sources are never killed; the destination nodes are killed while they
lead mirror partitions and ``__mirror_state`` partitions. Every client that talks to the dying
destination (the metadata watcher) runs in a child process (tests/faults/workload.py); the
producer only talks to the source. CI runs 4 rounds; ``KMIRROR_FAULT_ROUNDS=20`` is the issue's
run, ``KMIRROR_FAULT_SEED=<n>`` replays one.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.clients import create_topic
from tests.integration.mirror_helpers import (
    MockCluster,
    create_mirror,
    end_offsets,
    mirror_tool,
    wait_caught_up,
    write_mirror_config,
)
from tests.integration.node import Node
from tests.waits import wait_for

from .harness import FaultCluster, fault_rounds, fault_seed
from .replicas import compare_replicas, partition_batches
from .workload import MetadataWatch

ROUNDS = fault_rounds(4)
SEED = fault_seed()
TOPIC, PARTITIONS, MIRROR = "orders", 6, "dr"
SOURCE_ID = 0  # the source's log dir in the byte compare
SETTINGS = {"broker__session__timeout__ms": "4000", "broker__heartbeat__interval__ms": "1000"}


class SourceLoad(threading.Thread):
    """An idempotent acks=all producer writing to the source until stopped (bounded)."""

    def __init__(self, bootstrap: str, limit: int = 2_000_000) -> None:
        super().__init__(daemon=True, name="source-load")
        self.bootstrap, self.limit = bootstrap, limit
        self.stop_event = threading.Event()
        self.sent = 0
        self.errors: list[str] = []

    def run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "compression.type": "lz4",
            }
        )

        def done(err: object, _msg: object) -> None:
            if err is not None:
                self.errors.append(str(err))

        while not self.stop_event.is_set() and self.sent < self.limit:
            for _ in range(200):
                p.produce(TOPIC, f"v{self.sent:09d}".encode(), key=str(self.sent), on_delivery=done)
                self.sent += 1
            p.poll(0)
            time.sleep(0.05)  # about 4,000 records/s: the source stays ahead of nothing
        p.flush(30)


def full_isr(meta: MetadataWatch, since: float) -> bool:
    snap = meta.latest(after=since)
    return (
        snap is not None
        and any(t == TOPIC for t, _ in snap.parts)
        and all(ld >= 0 and sorted(isr) == sorted(reps) for ld, reps, isr in snap.parts.values())
    )


class Source:
    """The mirror's source: a kmirror node or librdkafka's mock cluster of three brokers."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind = kind
        self.node: Node | None = None
        self.mock: MockCluster | None = None
        if kind == "kmirror":
            self.node = Node(workdir / "source").start()
            self.bootstrap = self.node.bootstrap
            create_topic(self.bootstrap, TOPIC, PARTITIONS)
        else:
            self.mock = MockCluster(brokers=3)
            self.bootstrap = self.mock.bootstrap
            self.mock.create_topic(TOPIC, PARTITIONS)

    def move_a_leader(self, fc: FaultCluster) -> str:
        """On the mock cluster: a random partition's leadership to a random broker."""
        if self.mock is None:
            return ""
        p, broker = fc.rng.randrange(PARTITIONS), fc.rng.randint(1, 3)
        self.mock.set_leader(TOPIC, p, broker)
        return f"; source leader of {TOPIC}-{p} -> mock broker {broker}"

    def close(self) -> None:
        if self.node is not None:
            self.node.kill()
        if self.mock is not None:
            self.mock.close()


def replica_problems(source: Source, fc: FaultCluster, meta: MetadataWatch) -> list[str]:
    """Where destination replicas differ from the source's partition (a kmirror source: its
    segment files) or from each other (the mock source keeps its log in memory)."""
    snap = meta.latest()
    assert snap is not None
    assignment = {(TOPIC, p): snap.parts[(TOPIC, p)][1] for p in range(PARTITIONS)}
    log_dirs = {n.node_id: n.log_dir for n in fc.nodes}
    if source.node is None:
        return compare_replicas(log_dirs, assignment)
    out = []
    for p in range(PARTITIONS):
        want = partition_batches(source.node.log_dir / f"{TOPIC}-{p}")
        for node_id in assignment[(TOPIC, p)]:
            got = partition_batches(log_dirs[node_id] / f"{TOPIC}-{p}")
            if got != want:
                i = next(
                    (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
                    min(len(want), len(got)),
                )
                out.append(
                    f"{TOPIC}-{p} on node {node_id}: {len(got)} batches, the source "
                    f"{len(want)}; first difference at batch #{i}"
                )
    return out


@pytest.mark.timeout(240 + ROUNDS * 60)
@pytest.mark.parametrize("kind", ["kmirror", "librdkafka-mock"])
def test_mirror_survives_destination_kill_rounds(tmp_path: Path, kind: str) -> None:
    print(f"seed {SEED} rounds {ROUNDS} source {kind} (replay: KMIRROR_FAULT_SEED={SEED})")
    source = Source(kind, tmp_path)
    load: SourceLoad | None = None
    meta: MetadataWatch | None = None
    try:
        with FaultCluster(tmp_path / "dst", SEED, **SETTINGS) as fc:
            load = SourceLoad(source.bootstrap)
            load.start()
            config = write_mirror_config(tmp_path / "m.properties", source.bootstrap)
            create_mirror(fc.node(1), MIRROR, config, TOPIC)
            meta = MetadataWatch(fc.bootstrap, tmp_path / "meta")
            meta.start()
            wait_for(lambda: full_isr(meta, 0), 60, "the mirror topic on three replicas")
            for r in range(ROUNDS):
                victim = fc.rng.choice(fc.nodes)
                time.sleep(fc.rng.uniform(1.0, 3.0))
                fc.kill(victim)
                moved = source.move_a_leader(fc)
                time.sleep(fc.rng.uniform(0.5, 3.0))
                fc.restart(victim)
                since = time.monotonic()
                wait_for(
                    lambda s=since: full_isr(meta, s),  # type: ignore[misc]
                    90,
                    f"round {r}: every ISR whole again\n{fc.describe()}",
                )
                print(
                    f"round {r}: node {victim.node_id}{moved}; source records {load.sent}",
                    flush=True,
                )
            load.stop_event.set()
            load.join(60)
            assert load.errors == [], load.errors[:5]
            ends = wait_caught_up(
                source.bootstrap, fc.bootstrap, TOPIC, PARTITIONS, "lag 0 after the rounds", 120
            )
            assert sum(ends.values()) >= load.sent
            # followers fetch up to the leader's end a moment after the HW: wait for them
            problems: list[str] = []

            def identical() -> bool:
                problems[:] = replica_problems(source, fc, meta)
                return not problems

            wait_for(
                identical, 60, "every replica identical to the source", detail=lambda: problems
            )
            # failover: every partition takes writes on its own leader
            mirror_tool(fc.node(fc.rng.choice([1, 2, 3])), "--remove", "--topic", TOPIC,
                        "--mirror", MIRROR)  # fmt: skip
            p = Producer({"bootstrap.servers": fc.bootstrap, "acks": "all"})
            errors: list[object] = []

            def writable() -> bool:
                errors.clear()
                for part in range(PARTITIONS):
                    p.produce(
                        TOPIC,
                        b"after",
                        partition=part,
                        on_delivery=lambda e, _m: e and errors.append(e),
                    )
                p.flush(10)
                return not errors

            wait_for(writable, 60, "every partition writable after failover", detail=lambda: errors)
            after = end_offsets(fc.bootstrap, TOPIC, PARTITIONS)
            assert all(after[q] > ends[q] for q in range(PARTITIONS)), (ends, after)
            print(
                f"seed {SEED} ({kind}): {ROUNDS} rounds, {load.sent} records mirrored, "
                "replicas identical"
            )
    finally:
        if load is not None:
            load.stop_event.set()
        if meta is not None:
            meta.stop()
            meta.join(40)
        source.close()

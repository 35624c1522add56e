"""PREPARING on a three-node destination (RF=3, min.insync.replicas=2) whose follower is frozen
(SIGSTOP) cannot finish the LME truncation's second phase: after ``mirror.truncation.timeout.ms``
the partition is FAILED, ``--describe`` says which replica did not truncate, and the leader's
Prometheus endpoint counts it. The KIP's recovery then works: remove the topic from the mirror,
add it again with every node running, and it mirrors.

The topic has ``mirror.support.unclean.leader.election=true`` (from the source, as a synced
config), so every replica must truncate, in the ISR or not. Without it a frozen follower only
delays PREPARING: it leaves the ISR after ``replica.lag.time.max.ms`` (so does every
``__mirror_state`` write wait for that, acks=all), and the partition goes on with the two
replicas left; the unit tests cover an ISR member that never truncates. The ISR keeps
``min.insync.replicas`` here (two of three), so the wait is bounded rather than retried.

A partition re-added after failover enters PREPARING again and is cut (the kmirror source has
no record of mirroring from here, so KIP-1279 mirrors it from scratch): its followers must
truncate too. The frozen follower is chosen, among the partitions' followers, to be neither
the active controller (the add is forwarded there) nor the node coordinating the partition's
mirror state (its reads would stall instead): the test is about the truncation wait only.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from broker.coordinator.runtime import partition_for
from tests.integration.clients import create_topic
from tests.integration.mirror_helpers import (
    create_mirror,
    describe_rows,
    mirror_tool,
    node_mirror_states,
    produce_numbered,
    scrape,
    total,
    wait_caught_up,
    write_mirror_config,
)
from tests.integration.node import Node
from tests.waits import wait_for

from .harness import FaultCluster, active_controller, fault_seed

TOPIC, PARTITIONS, MIRROR = "orders", 3, "dr"
TIMEOUT_MS = 3000
SETTINGS = {
    "mirror__truncation__timeout__ms": str(TIMEOUT_MS),
    # the frozen node leaves the ISRs soon: the __mirror_state writes (acks=all) go on
    "replica__lag__time__max__ms": "4000",
}

Placement = tuple[int, list[int], list[int]]  # leader, replicas, ISR


def _coordinator(fc: FaultCluster, partition: int) -> int:
    """The node leading the ``__mirror_state`` shard that keeps the partition's state."""
    meta = (fc.node(1).log_dir / f"{TOPIC}-{partition}" / "partition.metadata").read_text()
    topic_id = meta.split("topic_id:", 1)[1].strip()  # Kafka's base64 form, as the key uses
    shard = partition_for(f"{MIRROR}:{topic_id}:{partition}", 50)
    placed = fc.cluster.partition_state("__mirror_state", shard)
    assert placed is not None
    return placed[0]


def _states(fc: FaultCluster, via: Node) -> set[str]:
    return {row[6] for row in describe_rows(via, MIRROR, TOPIC)}


def test_a_follower_that_cannot_truncate_fails_the_partition(tmp_path: Path) -> None:
    t0 = time.monotonic()
    src = Node(tmp_path / "src").start()
    try:
        unclean = {"mirror.support.unclean.leader.election": "true"}
        create_topic(src.bootstrap, TOPIC, PARTITIONS, unclean)
        assert produce_numbered(src.bootstrap, TOPIC, 300) == []
        with FaultCluster(tmp_path / "dst", fault_seed(), **SETTINGS) as fc:
            config = write_mirror_config(tmp_path / "m.properties", src.bootstrap)
            create_mirror(fc.node(1), MIRROR, config, TOPIC)
            wait_caught_up(src.bootstrap, fc.bootstrap, TOPIC, PARTITIONS, "the first copy", 60)
            placed: dict[int, Placement | None] = {}

            def full_isr() -> bool:
                placed.update({p: fc.cluster.partition_state(TOPIC, p) for p in range(PARTITIONS)})
                return all(s is not None and len(s[2]) == 3 for s in placed.values())

            wait_for(full_isr, 30, "three replicas in every ISR", detail=lambda: placed)
            controller = active_controller(fc)
            choices = [
                (p, r)
                for p, s in placed.items()
                if s is not None
                for r in s[1]
                if r not in (s[0], controller, _coordinator(fc, p))
            ]
            assert choices, f"no follower to freeze: {placed}, controller {controller}"
            partition, victim_id = choices[0]
            leader = fc.node(placed[partition][0])  # type: ignore[index]
            victim = fc.node(victim_id)

            # failover, then freeze a follower and add the topic back: PREPARING again
            mirror_tool(leader, "--remove", "--topic", TOPIC, "--mirror", MIRROR)
            wait_for(lambda: _states(fc, leader) == {"STOPPED"}, 30, "STOPPED after failover")
            fc.pause(victim)
            t_add = time.monotonic()
            mirror_tool(leader, "--add", "--topic", TOPIC, "--mirror", MIRROR)
            wait_for(
                lambda: node_mirror_states(leader, MIRROR)[(TOPIC, partition)][0] == "FAILED",
                40,
                f"{TOPIC}-{partition} FAILED on its leader {leader.node_id}",
                step=0.2,
            )
            failed_after = time.monotonic() - t_add
            assert failed_after >= TIMEOUT_MS / 1000, failed_after  # not before the bound
            metrics = scrape(leader)
            timeouts = "kafka_server_mirror_truncation_timeouts_total"
            assert total(metrics, timeouts, mirror=MIRROR) >= 1
            assert total(metrics, "kafka_server_mirror_partitions", state="FAILED") >= 1
            assert total(metrics, "kafka_server_mirror_failed_partitions", mirror=MIRROR) >= 1

            # --describe asks every node: let the frozen one answer again (FAILED stays)
            fc.resume(victim)
            text = mirror_tool(leader, "--describe", "--mirror", MIRROR)
            row = next(r for r in describe_rows(leader, MIRROR, TOPIC) if r[2] == str(partition))
            assert row[6] == "FAILED", text
            notes = text.split("Notes:", 1)[-1]
            named = re.search(
                rf"{TOPIC}-{partition} FAILED: replicas \[([\d, ]+)\] did not complete", notes
            )
            assert named is not None, text
            assert str(victim_id) in named.group(1).split(", "), text
            assert f"mirror.truncation.timeout.ms={TIMEOUT_MS}" in notes, text

            # the KIP's recovery: remove the topic from the mirror and add it back
            mirror_tool(leader, "--remove", "--topic", TOPIC, "--mirror", MIRROR)
            wait_for(lambda: _states(fc, leader) == {"STOPPED"}, 40, "STOPPED after FAILED")
            mirror_tool(leader, "--add", "--topic", TOPIC, "--mirror", MIRROR)
            wait_for(lambda: _states(fc, leader) == {"MIRRORING"}, 30, "MIRRORING again")
            wait_caught_up(src.bootstrap, fc.bootstrap, TOPIC, PARTITIONS, "mirrored again", 30)
            print(
                f"{TOPIC}-{partition} FAILED {failed_after:.1f}s after the add (bound "
                f"{TIMEOUT_MS} ms, node {victim_id} frozen); test {time.monotonic() - t0:.1f}s"
            )
    finally:
        src.kill()

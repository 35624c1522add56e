"""A quorum leader (the active controller) paused with SIGSTOP for 15 s on three real nodes, then
continued: while it slept the others elected a new leader and fenced its broker; when it wakes,
its timers have all expired and its soft state (when each broker last heartbeated) is 15 s old.
It must act on none of it: no ``fencing broker`` line in its log after the resume, and no
FenceBrokerRecord for any broker but the paused one in the metadata log (read with the shipped
``bin/kafka-dump-log.sh --cluster-metadata-decoder``) on any node.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from tests.waits import wait_value

from .clients import admin, ck_produce, make_records
from .cluster import Cluster, metadata_records
from .node import Node

TOPIC = "stale"
PAUSE_S = 15.0
_LEADER = re.compile(rb"metadata quorum: leader (\d+) at epoch (\d+)")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path).start()
    try:
        yield c
    finally:
        c.stop()


def _output_since(node: Node, offset: int) -> bytes:
    with node.output.open("rb") as f:
        f.seek(offset)
        return f.read()


def _leader(node: Node, since: int = 0) -> tuple[int, int] | None:
    """(leader, epoch) of the node's last ``metadata quorum: leader`` line after ``since``."""
    found = _LEADER.findall(_output_since(node, since))
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def _agreed_leader(nodes: list[Node]) -> tuple[int, int] | None:
    seen = {_leader(n) for n in nodes}
    if len(seen) != 1:
        return None
    (found,) = seen
    return found if found is not None and found[0] >= 0 else None


def _fenced_ids(node: Node) -> list[int]:
    return [r["data"]["id"] for r in metadata_records(node) if r["type"] == "FENCE_BROKER_RECORD"]


def _created(bootstrap: str) -> bool:
    """Create the topic; False (to try again) when the cluster is not ready for RF=3 yet."""
    a = admin(bootstrap)
    try:
        a.create_topics([NewTopic(TOPIC, 6, 3)], operation_timeout=20)[TOPIC].result(30)
    except KafkaException as e:
        return bool(e.args and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS)
    return True


def test_a_paused_quorum_leader_acts_on_nothing_from_its_stale_state(cluster: Cluster) -> None:
    nodes = cluster.nodes
    wait_value(lambda: _created(cluster.bootstrap), 60, f"topic {TOPIC} created", step=1.0)
    assert ck_produce(cluster.bootstrap, TOPIC, make_records("a", 60, 6), acks="all") == []
    old_id, old_epoch = wait_value(lambda: _agreed_leader(nodes), 30, "one quorum leader")
    old = cluster.node(old_id)
    rest = [n for n in nodes if n is not old]
    before = {n.node_id: _fenced_ids(n) for n in nodes}
    assert old.proc is not None
    seen = old.output.stat().st_size
    old.proc.send_signal(signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        new_id, _ = wait_value(
            lambda: (lambda x: x if x is not None and x[0] != old_id else None)(
                _agreed_leader(rest)
            ),
            PAUSE_S,
            "a new quorum leader among the others",
        )
        # the new leader fences the paused broker once its session times out (9 s)
        wait_value(
            lambda: old_id in _fenced_ids(cluster.node(new_id))[len(before[new_id]) :],
            PAUSE_S,
            "the paused broker fenced by the new leader",
            step=0.5,
        )
        time.sleep(max(0.0, PAUSE_S - (time.monotonic() - stopped)))
    finally:
        old.proc.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    # it hears of the new leader; then give its duties (every second) a few turns
    wait_value(
        lambda: (_leader(old, seen) or (-1, -1))[0] == new_id,
        30,
        "the resumed node to follow the new leader",
        detail=lambda: old.log_tail(30),
    )
    time.sleep(max(0.0, 4.0 - (time.monotonic() - resumed)))
    after = _output_since(old, seen)
    assert b"stall watch: the event loop did not run for" in after, old.log_tail(40)
    assert b"fencing broker" not in after, old.log_tail(60)
    for n in nodes:
        fenced = _fenced_ids(n)[len(before[n.node_id]) :]
        assert set(fenced) <= {old_id}, (n.node_id, fenced)
    # and the cluster serves again with the old leader back as a broker
    assert ck_produce(cluster.bootstrap, TOPIC, make_records("b", 60, 6), acks="all") == []
    assert old_epoch < (_leader(old, seen) or (-1, -1))[1]

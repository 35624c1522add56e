"""Leader epochs and leader elections on real nodes.

OffsetForLeaderEpoch: a raw v4 request (encoded with kio's schemas) gets the leader epoch cache's
answer and the epoch checks; librdkafka, assigned a position that carries a leader epoch,
validates it with OffsetForLeaderEpoch before it fetches (KIP-320) and reads from there.

ElectLeaders: on three nodes, a partition's leadership leaves its preferred replica when that
node stops and stays away when it is back (auto.leader.rebalance.enable=false here); then
``kafka-leader-election.sh --election-type PREFERRED --all-topic-partitions`` sent to any node
moves it back, and a second run finds nothing to do. confluent-kafka's AdminClient.elect_leaders
gets the same answers.
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.headers import parse_response_header
from protocol.registry import REGISTRY, body_bytes, decode_body
from tests.waits import wait_value

from .clients import admin, ck_consumer, ck_drain, ck_produce, create_topic, make_records
from .cluster import Cluster
from .node import ROOT, Node

OFFSET_FOR_LEADER_EPOCH = 23
TOOL = str(ROOT / "bin" / "kafka-leader-election.sh")


# -- OffsetForLeaderEpoch ------------------------------------------------------------------


def _ask_epochs(node: Node, topic: str, current: int, epoch: int) -> Any:
    """One OffsetForLeaderEpoch v4 over a plain socket; the decoded response."""
    spec = REGISTRY.spec(OFFSET_FOR_LEADER_EPOCH)
    req = build(
        spec.request_type(4),
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                    ],
                }
            ],
        },
    )
    cid = b"raw-test"
    head = struct.pack(">hhih", OFFSET_FOR_LEADER_EPOCH, 4, 7, len(cid)) + cid + b"\x00"
    payload = head + body_bytes(req)
    with socket.create_connection(("127.0.0.1", node.port), timeout=5) as s:
        s.settimeout(5)
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read(s, 4))[0]
        data = _read(s, size)
    corr, pos = parse_response_header(data, spec.response_header_version(4))
    assert corr == 7
    return decode_body(spec.response_type(4), data, pos)


def _read(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "the node closed the connection"
        buf += chunk
    return buf


def _answer(resp: Any) -> tuple[int, int, int]:
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.leader_epoch), int(p.end_offset)


def _requests_served(node: Node, api: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    pattern = rf'^kafka_network_request_requests_total\{{request="{api}",version="\d+"\}} (\S+)$'
    return int(sum(float(v) for v in re.findall(pattern, text, re.M)))


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "n").start()
    try:
        yield n
    finally:
        n.stop()


def test_offset_for_leader_epoch_raw_and_librdkafka(node: Node) -> None:
    create_topic(node.bootstrap, "epochs")
    assert not ck_produce(node.bootstrap, "epochs", make_records("e", 6, partitions=1))
    # the topic's only leader epoch (0) is the current one: it ends at the log end
    assert _answer(_ask_epochs(node, "epochs", -1, 0)) == (0, 0, 6)
    assert _answer(_ask_epochs(node, "epochs", 0, 0)) == (0, 0, 6)
    assert _answer(_ask_epochs(node, "epochs", 3, 0))[0] == ErrorCode.unknown_leader_epoch
    assert _answer(_ask_epochs(node, "epochs", -1, 5)) == (0, -1, -1)  # newer than any
    assert _answer(_ask_epochs(node, "nope", -1, 0))[0] == ErrorCode.unknown_topic_or_partition

    before = _requests_served(node, "OffsetForLeaderEpoch")
    c = ck_consumer(node.bootstrap, **{"group.id": "epochs-g"})
    try:
        c.assign([TopicPartition("epochs", 0, 2, leader_epoch=0)])
        got = ck_drain(c, 4, timeout=20)
    finally:
        c.close()
    assert [r.value for r in got] == [r.value for r in make_records("e", 6, partitions=1)][2:]
    # librdkafka validated the position with the leader before fetching from it
    assert _requests_served(node, "OffsetForLeaderEpoch") > before


# -- ElectLeaders --------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, auto__leader__rebalance__enable="false").start()
    try:
        yield c
    finally:
        c.stop()


def _partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as a stock client reads the metadata."""
    md = admin(bootstrap).list_topics(topic, timeout=10)
    return {
        p: (pm.leader, list(pm.replicas), list(pm.isrs))
        for p, pm in md.topics[topic].partitions.items()
    }


def _all_led(
    bootstrap: str, topic: str, count: int
) -> dict[int, tuple[int, list[int], list[int]]] | None:
    parts = _partitions(bootstrap, topic)
    return parts if len(parts) == count and all(p[0] >= 0 for p in parts.values()) else None


def _led_by_another(bootstrap: str, topic: str, partition: int, node_id: int) -> int | None:
    leader = _partitions(bootstrap, topic)[partition][0]
    return None if leader in (-1, node_id) else leader


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)


def test_preferred_election_moves_leadership_back(cluster: Cluster) -> None:
    a = admin(cluster.bootstrap)
    fs = a.create_topics([NewTopic("el", 3, 3)], operation_timeout=10)
    fs["el"].result(15)
    first = wait_value(
        lambda: _all_led(cluster.bootstrap, "el", 3),
        timeout=15,
        what="the topic's partitions have leaders",
    )
    assert all(leader == replicas[0] for leader, replicas, _isr in first.values()), first
    partition, (victim, _replicas, _isr) = min(first.items())
    survivor = next(n for n in cluster.nodes if n.node_id != victim)

    # the preferred leader stops: its partitions move to another replica
    assert cluster.node(victim).stop() == 0
    moved = wait_value(
        lambda: _led_by_another(survivor.bootstrap, "el", partition, victim),
        timeout=30,
        what=f"el-{partition} led by another node than {victim}",
    )
    # while it is down its preferred replica cannot lead (the request goes to the active
    # controller from whichever node gets it)
    res = _tool(
        "--bootstrap-server", survivor.bootstrap,
        "--election-type", "PREFERRED", "--topic", "el", "--partition", str(partition),
    )  # fmt: skip
    assert res.returncode == 1, res
    assert res.stdout.strip() == (
        f"Error completing leader election (PREFERRED) for partition: el-{partition}: "
        "PREFERRED_LEADER_NOT_AVAILABLE"
    ), res
    # back again, and in sync (the leader's AlterPartition): the leadership stays where it went
    cluster.node(victim).start(timeout=60)
    wait_value(
        lambda: victim in _partitions(survivor.bootstrap, "el")[partition][2] or None,
        timeout=60,
        what=f"node {victim} back in the ISR of el-{partition}",
        detail=lambda: _partitions(survivor.bootstrap, "el"),
    )
    assert _partitions(survivor.bootstrap, "el")[partition][0] == moved

    res = _tool(
        "--bootstrap-server", survivor.bootstrap,
        "--election-type", "PREFERRED", "--all-topic-partitions",
    )  # fmt: skip
    assert res.returncode == 0, res
    assert "Successfully completed leader election (PREFERRED) for partitions" in res.stdout, res
    assert f"el-{partition}" in res.stdout, res
    # the survivor's metadata shows the new leader one metadata update after the election
    wait_value(
        lambda: _partitions(survivor.bootstrap, "el")[partition][0] == victim,
        15,
        what=f"el-{partition} led by {victim} in the survivor's metadata",
    )

    # nothing left to elect: every partition already has its preferred leader
    res = _tool(
        "--bootstrap-server", cluster.node(victim).bootstrap,
        "--election-type", "preferred", "--topic", "el", "--partition", str(partition),
    )  # fmt: skip
    assert res.returncode == 0, res
    assert res.stdout.strip() == f"Valid replica already elected for partitions el-{partition}"
    res = _tool(
        "--bootstrap-server", survivor.bootstrap,
        "--election-type", "PREFERRED", "--all-topic-partitions",
    )  # fmt: skip
    assert (res.returncode, res.stdout) == (0, ""), res

    # a stock admin client: no election needed, an unknown partition
    result = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition("el", partition)]).result(15)
    assert result[TopicPartition("el", partition)].code() == ErrorCode.election_not_needed
    result = a.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("el", 9)]).result(15)
    assert result[TopicPartition("el", 9)].code() == ErrorCode.unknown_topic_or_partition


def test_tool_failures_exit_1(node: Node) -> None:
    """A partition that cannot be elected and an unknown one: one line each, exit 1."""
    create_topic(node.bootstrap, "one")
    res = _tool(
        "--bootstrap-server", node.bootstrap, "--election-type", "UNCLEAN",
        "--topic", "missing", "--partition", "0",
    )  # fmt: skip
    assert res.returncode == 1, res
    assert "Error completing leader election (UNCLEAN) for partition: missing-0: " in res.stdout
    assert "UNKNOWN_TOPIC_OR_PARTITION" in res.stdout
    assert "1 replica(s) could not be elected" in res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    started = time.monotonic()
    res = _tool(
        "--bootstrap-server",
        "127.0.0.1:1",
        "--election-type",
        "PREFERRED",
        "--all-topic-partitions",
    )
    assert res.returncode == 1 and "cannot connect" in res.stderr, res
    assert time.monotonic() - started < 30

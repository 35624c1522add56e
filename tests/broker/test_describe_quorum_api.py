"""DescribeQuorum (55) v0-2 through the dispatcher: requests and responses encoded and decoded
by protocol.registry, answered by QuorumApi from a (fake or real) quorum driver."""

import asyncio
import random
from typing import Any

import pytest

from broker.api.context import RequestContext
from broker.api.dispatcher import Dispatcher
from broker.api.quorum import QuorumApi
from broker.network.client import ReconnectingClient
from broker.quorum.driver import QuorumDriver
from broker.raft.core import NotLeader, QuorumDescription, RaftCore, ReplicaDescription
from broker.raft.messages import SnapshotId
from broker.raft.quorum_state import MemoryQuorumStateStore
from broker.raft.replicated_log import MemoryLog
from protocol.build import build
from protocol.registry import REGISTRY

from .network_support import run

KEY = 55
LEADING = QuorumDescription(
    leader_id=1,
    leader_epoch=7,
    high_watermark=42,
    voters=(
        ReplicaDescription(1, 45, 5000, 5000),
        ReplicaDescription(2, 42, 4990, 4900),
        ReplicaDescription(3, -1, -1, -1),
    ),
    observers=(ReplicaDescription(9, 40, 4000, 3000),),
)
ENDPOINTS = {
    1: [("CONTROLLER", "127.0.0.1", 9093)],
    2: [("CONTROLLER", "127.0.0.1", 9094)],
    3: [("CONTROLLER", "::1", 9095)],
}


class FakeDriver:
    def __init__(self, answer: QuorumDescription | NotLeader) -> None:
        self.answer = answer

    def describe(self) -> QuorumDescription | NotLeader:
        return self.answer


class DenyAll:
    def authorize(self, principal: str, host: str, op: Any, rtype: Any, name: str) -> bool:
        return False


def request(
    version: int, topics: list[tuple[str, list[int]]] | None = None, corr: int = 11
) -> bytes:
    topics = topics if topics is not None else [("__cluster_metadata", [0])]
    body: Any = build(
        REGISTRY.spec(KEY).request_type(version),
        {
            "topics": [
                {"topic_name": t, "partitions": [{"partition_index": p} for p in ps]}
                for t, ps in topics
            ]
        },
    )
    return REGISTRY.encode_request(version, corr, "test", body)[4:]


def ask(api: QuorumApi, version: int, frame: bytes) -> Any:
    dispatcher = Dispatcher(api.apis())

    def ctx(header: Any) -> RequestContext:
        return RequestContext(header, "c1", "CONTROLLER", "127.0.0.1")

    async def go() -> Any:
        parts = await dispatcher.handle(ctx, memoryview(frame))
        assert parts is not None
        corr, body = REGISTRY.decode_response(KEY, version, b"".join(bytes(p) for p in parts))
        assert corr == 11
        return body

    return asyncio.run(go())


def leader_api(answer: QuorumDescription | NotLeader = LEADING, **kw: Any) -> QuorumApi:
    driver = FakeDriver(answer)
    return QuorumApi(lambda: driver, lambda: 0, lambda: ENDPOINTS, **kw)  # type: ignore[arg-type, return-value]


def test_served_versions() -> None:
    assert Dispatcher(leader_api().apis()).supported_versions()[KEY] == (0, 2)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_leader_describes_voters_and_observers(version: int) -> None:
    resp = ask(leader_api(), version, request(version))
    assert int(resp.error_code) == 0
    (topic,) = resp.topics
    assert topic.topic_name == "__cluster_metadata"
    (p,) = topic.partitions
    assert (int(p.partition_index), int(p.error_code)) == (0, 0)
    assert (p.leader_id, p.leader_epoch, p.high_watermark) == (1, 7, 42)
    assert [(r.replica_id, r.log_end_offset) for r in p.current_voters] == [
        (1, 45),
        (2, 42),
        (3, -1),
    ]
    assert [(r.replica_id, r.log_end_offset) for r in p.observers] == [(9, 40)]
    if version >= 1:
        assert [(r.last_fetch_timestamp, r.last_caught_up_timestamp) for r in p.current_voters] == [
            (5000, 5000),
            (4990, 4900),
            (-1, -1),
        ]
        assert (p.observers[0].last_fetch_timestamp, p.observers[0].last_caught_up_timestamp) == (
            4000,
            3000,
        )
    else:
        assert not hasattr(p.current_voters[0], "last_fetch_timestamp")
    if version >= 2:
        assert resp.error_message is None and p.error_message is None
        # no directory ids here: the zero uuid, which kio reads back as None
        assert all(r.replica_directory_id is None for r in p.current_voters)
        nodes = {n.node_id: [(li.name, li.host, li.port) for li in n.listeners] for n in resp.nodes}
        assert nodes == ENDPOINTS  # the voters' endpoints, not the observer's
    else:
        assert not hasattr(resp, "nodes")


@pytest.mark.parametrize("version", [0, 2])
def test_a_node_that_does_not_lead_says_who_does(version: int) -> None:
    resp = ask(leader_api(NotLeader(3, 8)), version, request(version))
    assert int(resp.error_code) == 0
    (p,) = resp.topics[0].partitions
    assert int(p.error_code) == 6  # NOT_LEADER_OR_FOLLOWER
    assert (p.leader_id, p.leader_epoch, p.high_watermark) == (3, 8, -1)
    assert p.current_voters == () and p.observers == ()
    if version >= 2:
        assert p.error_message and "not the current leader" in p.error_message
        assert resp.nodes == ()


def test_another_partition_is_unknown() -> None:
    resp = ask(leader_api(), 2, request(2, [("orders", [0, 1]), ("__cluster_metadata", [0])]))
    assert int(resp.error_code) == 0
    got = [
        (t.topic_name, int(p.partition_index), int(p.error_code))
        for t in resp.topics
        for p in t.partitions
    ]
    assert got == [("orders", 0, 3), ("orders", 1, 3), ("__cluster_metadata", 0, 3)]
    resp = ask(leader_api(), 1, request(1, [("__cluster_metadata", [1])]))
    assert [int(p.error_code) for p in resp.topics[0].partitions] == [3]


def test_describe_needs_describe_on_the_cluster() -> None:
    resp = ask(leader_api(authorizer=lambda: DenyAll()), 2, request(2))
    assert int(resp.error_code) == 31  # CLUSTER_AUTHORIZATION_FAILED
    assert resp.topics == () and resp.error_message == "Cluster authorization failed."


def test_a_node_without_a_quorum_is_not_available() -> None:
    api = QuorumApi(lambda: None, lambda: 0)
    resp = ask(api, 1, request(1))
    assert int(resp.error_code) == 8  # BROKER_NOT_AVAILABLE
    assert resp.topics == ()


class Listener:
    def handle_commit(self, high_watermark: int) -> None:
        pass

    def handle_leader_change(self, leader_id: int, epoch: int) -> None:
        pass

    def handle_load_snapshot(self, snapshot_id: SnapshotId) -> None:
        pass

    def snapshot_state(self, up_to: int) -> tuple[int, bytes] | None:
        return None


def _no_peers(dest: int, host: str, port: int) -> ReconnectingClient:
    raise AssertionError("a lone voter has no peers")


def test_a_lone_voter_describes_itself_through_its_driver() -> None:
    now = [1_700_000_000_000]

    async def go() -> tuple[Any, Any]:
        core = RaftCore(1, frozenset({1}), MemoryLog(), MemoryQuorumStateStore(), random.Random(1))
        driver = QuorumDriver(core, {}, Listener(), lambda: now[0], _no_peers)
        driver.start()
        try:
            await driver.append([b"a", b"b"])
            now[0] += 250
            api = QuorumApi(lambda: driver, lambda: now[0], lambda: {1: [("CONTROLLER", "h", 1)]})
            dispatcher = Dispatcher(api.apis())

            def ctx(header: Any) -> RequestContext:
                return RequestContext(header, "c1", "CONTROLLER", "127.0.0.1")

            parts = await dispatcher.handle(ctx, memoryview(request(2)))
            assert parts is not None
            return REGISTRY.decode_response(KEY, 2, b"".join(bytes(p) for p in parts))
        finally:
            await driver.close()

    _, resp = run(go())
    (p,) = resp.topics[0].partitions
    assert (p.leader_id, p.leader_epoch, p.high_watermark) == (1, 1, 3)
    (me,) = p.current_voters
    assert (me.replica_id, me.log_end_offset) == (1, 3)
    assert me.last_fetch_timestamp == me.last_caught_up_timestamp == now[0]
    assert [n.node_id for n in resp.nodes] == [1]

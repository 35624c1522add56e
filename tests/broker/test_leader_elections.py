"""ElectLeaders on the active controller: Kafka's preferred and unclean election rules, the
answer for every partition, the periodic leader balance, and the API's checks (ALTER on the
cluster, the active controller only, the election type)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api.elect_leaders import ElectLeadersApi
from broker.api.error_response import error_response
from broker.api.services import Services
from broker.controller.elections import (
    ElectionType,
    LeaderBalance,
    LeaderElections,
    elect,
)
from broker.metadata.image import PartitionImage
from broker.security.acls import AclOperation, ResourceType
from protocol.build import build
from protocol.metadata_records import latest_type
from protocol.registry import REGISTRY

from .test_cluster_control import FakeCore

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
RegisterBrokerRecord = latest_type("RegisterBrokerRecord")
BrokerRegistrationChangeRecord = latest_type("BrokerRegistrationChangeRecord")
PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN
E = ErrorCode


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


def _cluster(brokers: dict[int, str]) -> FakeCore:
    """Brokers by id: "up" (active), "fenced" or "shutdown" (in controlled shutdown)."""
    core = FakeCore()
    records = []
    for b, state in brokers.items():
        records.append(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=uuid.UUID(int=b),
                broker_epoch=b,
                end_points=(),
                features=(),
                rack=None,
                fenced=state == "fenced",
            )
        )
        if state == "shutdown":
            records.append(
                BrokerRegistrationChangeRecord(
                    broker_id=b, broker_epoch=b, in_controlled_shutdown=1
                )
            )
    run(core.commit(records))
    return core


def _topic(core: FakeCore, name: str, *parts: tuple[list[int], list[int], int]) -> None:
    """Partitions as (replicas, isr, leader)."""
    tid = uuid.uuid4()
    records: list[Any] = [TopicRecord(name=name, topic_id=tid)]
    for i, (replicas, isr, leader) in enumerate(parts):
        records.append(
            PartitionRecord(
                partition_id=i,
                topic_id=tid,
                replicas=replicas,
                isr=isr,
                leader=leader,
                leader_epoch=5,
                partition_epoch=0,
            )
        )
    run(core.commit(records))


def _part(core: FakeCore, name: str, i: int = 0) -> PartitionImage:
    return core.image.topics[name].partitions[i]


def _elect(core: FakeCore, kind: ElectionType, name: str = "t", i: int = 0) -> ErrorCode:
    answer, _record = elect(core.image, name, i, kind)
    return answer.error


# -- the rules -------------------------------------------------------------------------------


def test_preferred_elects_the_first_replica_when_in_sync_and_active() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1, 2, 3], [1, 2, 3], 2))
    results = run(LeaderElections(core).elect_leaders(PREFERRED, [("t", [0])]))
    assert results == [("t", [results[0][1][0]])] and results[0][1][0].error == E.none
    p = _part(core, "t")
    assert (p.leader, p.leader_epoch, p.isr) == (1, 6, (1, 2, 3))  # a new leader epoch


def test_preferred_not_needed_when_the_preferred_replica_leads() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 1))
    assert _elect(core, PREFERRED) == E.election_not_needed


def test_preferred_not_available_out_of_isr_fenced_or_shutting_down() -> None:
    core = _cluster({1: "up", 2: "up", 3: "fenced", 4: "shutdown"})
    _topic(
        core,
        "t",
        ([1, 2], [2], 2),  # preferred out of the ISR
        ([3, 2], [3, 2], 2),  # preferred fenced
        ([4, 2], [4, 2], 2),  # preferred in controlled shutdown
    )
    for i in range(3):
        assert _elect(core, PREFERRED, "t", i) == E.preferred_leader_not_available
    before = core.offset
    results = run(LeaderElections(core).elect_leaders(PREFERRED, [("t", [0, 1, 2])]))
    assert [a.error for a in results[0][1]] == [E.preferred_leader_not_available] * 3
    assert core.offset == before  # nothing committed


def test_preferred_on_a_leaderless_partition_takes_the_next_valid_replica() -> None:
    """Kafka's PREFERRED election still elects someone valid when nobody leads."""
    core = _cluster({1: "fenced", 2: "up"})
    _topic(core, "t", ([1, 2], [1, 2], -1))
    assert _elect(core, PREFERRED) == E.none
    run(LeaderElections(core).elect_leaders(PREFERRED, [("t", [0])]))
    assert _part(core, "t").leader == 2


def test_unclean_not_needed_when_a_leader_exists() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1, 2], [2], 2))
    assert _elect(core, UNCLEAN) == E.election_not_needed


def test_unclean_elects_a_live_replica_outside_the_isr_and_shrinks_the_isr_to_it() -> None:
    core = _cluster({1: "fenced", 2: "fenced", 3: "up"})
    _topic(core, "t", ([1, 2, 3], [1], -1))
    results = run(LeaderElections(core).elect_leaders(UNCLEAN, [("t", [0])]))
    assert results[0][1][0].error == E.none
    p = _part(core, "t")
    assert (p.leader, p.isr, p.leader_epoch) == (3, (3,), 6)


def test_unclean_prefers_an_in_sync_replica() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1, 2, 3], [3], -1))
    run(LeaderElections(core).elect_leaders(UNCLEAN, [("t", [0])]))
    p = _part(core, "t")
    assert (p.leader, p.isr) == (3, (3,))


def test_unclean_with_no_live_replica() -> None:
    core = _cluster({1: "fenced", 2: "shutdown"})
    _topic(core, "t", ([1, 2], [1], -1))
    assert _elect(core, UNCLEAN) == E.eligible_leaders_not_available


def test_unknown_topic_or_partition() -> None:
    core = _cluster({1: "up"})
    _topic(core, "t", ([1], [1], 1))
    results = run(LeaderElections(core).elect_leaders(PREFERRED, [("nope", [0]), ("t", [7])]))
    assert [(t, [a.error for a in answers]) for t, answers in results] == [
        ("nope", [E.unknown_topic_or_partition]),
        ("t", [E.unknown_topic_or_partition]),
    ]
    assert results[0][1][0].message == "No such topic as nope"


def test_every_partition_leaves_out_the_ones_needing_no_election() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "a", ([1, 2], [1, 2], 2), ([2, 1], [2, 1], 2), ([1, 2], [2], 2))
    _topic(core, "b", ([2, 1], [2, 1], 2))
    results = run(LeaderElections(core).elect_leaders(PREFERRED, None))
    assert [(t, [(a.partition, a.error) for a in answers]) for t, answers in results] == [
        ("a", [(0, E.none), (2, E.preferred_leader_not_available)]),
        ("b", []),
    ]
    assert _part(core, "a", 0).leader == 1


# -- the periodic balance -----------------------------------------------------------------


def test_balance_moves_leaders_back_within_the_cap_then_waits_an_interval() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", *[([1, 2], [1, 2], 2)] * 3, ([1, 2], [2], 2))
    elections = LeaderElections(core, max_elections=2)
    balance = LeaderBalance(elections, interval_ms=1000)
    balance.became_active(0)
    run(balance.tick(999))
    assert [_part(core, "t", i).leader for i in range(4)] == [2, 2, 2, 2]
    run(balance.tick(1000))  # the cap: two elections, the next round at once
    assert [_part(core, "t", i).leader for i in range(4)] == [1, 1, 2, 2]
    run(balance.tick(1001))
    assert [_part(core, "t", i).leader for i in range(4)] == [1, 1, 1, 2]
    assert elections.imbalanced()  # partition 3: its preferred replica is out of the ISR
    before = core.offset
    run(balance.tick(1500))
    assert core.offset == before


# -- the API ----------------------------------------------------------------------------------


@dataclass
class Ctx:
    api_version: int
    principal: str = "User:alice"
    peer_host: str = "127.0.0.1"


class Allow:
    def __init__(self, *grants: tuple[AclOperation, ResourceType]) -> None:
        self.grants = set(grants)
        self.asked: list[tuple[AclOperation, ResourceType, str]] = []

    def authorize(self, principal: str, host: str, op: Any, rtype: Any, name: str) -> bool:
        self.asked.append((op, rtype, name))
        return (op, rtype) in self.grants


def _api(core: FakeCore, authorizer: Any = None, active: bool = True) -> ElectLeadersApi:
    services = Services(
        node_id=1,
        cluster_id="c",
        image=lambda: core.image,
        controller=None,
        replicas=None,
        log_manager=None,
        config=None,
        now_ms=lambda: 0,
        authorizer=authorizer,
    )
    return ElectLeadersApi(services, LeaderElections(core), lambda: active)


def _request(version: int, kind: int, parts: list[tuple[str, list[int]]] | None) -> Any:
    return build(
        REGISTRY.spec(43).request_type(version),
        {
            "election_type": kind,
            "topic_partitions": (
                None if parts is None else [{"topic": t, "partitions": ps} for t, ps in parts]
            ),
            "timeout": 1000,
        },
    )


def _call(api: ElectLeadersApi, version: int, req: Any) -> Any:
    return run(api.elect_leaders(Ctx(version), req))  # type: ignore[arg-type]


def _codes(resp: Any) -> list[tuple[str, int, int]]:
    return [
        (t.topic, int(r.partition_id), int(r.error_code))
        for t in resp.replica_election_results
        for r in t.partition_result
    ]


def test_api_elects_and_answers_each_partition() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 2), ([1, 2], [1, 2], 1))
    resp = _call(_api(core), 2, _request(2, 0, [("t", [0, 1])]))
    assert resp.error_code == E.none
    assert _codes(resp) == [("t", 0, 0), ("t", 1, E.election_not_needed)]
    assert _part(core, "t").leader == 1


def test_api_v0_asks_for_preferred_elections() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 2))
    resp = _call(_api(core), 0, _request(0, 1, [("t", [0])]))
    assert _codes(resp) == [("t", 0, 0)] and _part(core, "t").leader == 1


def test_api_needs_alter_on_the_cluster() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 2))
    denied = Allow((AclOperation.DESCRIBE, ResourceType.CLUSTER))
    resp = _call(_api(core, denied), 2, _request(2, 0, [("t", [0])]))
    assert resp.error_code == E.cluster_authorization_failed
    assert _codes(resp) == [("t", 0, E.cluster_authorization_failed)]
    assert (AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster") in denied.asked
    assert _part(core, "t").leader == 2
    allowed = Allow((AclOperation.ALTER, ResourceType.CLUSTER))
    resp = _call(_api(core, allowed), 2, _request(2, 0, None))
    assert resp.error_code == E.none and _part(core, "t").leader == 1


def test_api_not_controller_and_unknown_election_type() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 2))
    resp = _call(_api(core, active=False), 1, _request(1, 0, [("t", [0])]))
    assert resp.error_code == E.not_controller
    assert _codes(resp) == [("t", 0, E.not_controller)]
    resp = _call(_api(core), 2, _request(2, 7, [("t", [0])]))
    assert resp.error_code == E.invalid_request
    assert resp.replica_election_results[0].partition_result[0].error_message == (
        "Unknown election type 7"
    )
    assert _part(core, "t").leader == 2


def test_forwarding_error_response_names_every_partition() -> None:
    """What a broker answers when the controller cannot be reached (each version's shape)."""
    for version in (0, 1, 2):
        req = _request(version, 0, [("t", [0, 3])])
        resp = error_response(43, version, req, E.request_timed_out, "no controller")
        assert _codes(resp) == [("t", 0, E.request_timed_out), ("t", 3, E.request_timed_out)]
        if version >= 1:
            assert resp.error_code == E.request_timed_out

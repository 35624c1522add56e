"""Partition reassignment on the active controller (Kafka's ReplicationControlManager rules):
starting, replacing and cancelling a reassignment, its completion by the leader's ISR change
(AlterPartition), ListPartitionReassignments, the image and snapshot fields, and the APIs'
checks and error shapes."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api.error_response import error_response
from broker.api.forwarding import FORWARDED_APIS
from broker.api.reassignments import ReassignmentsApi
from broker.api.services import Services
from broker.controller.alter_partition import AlterPartitionControl, PartitionAlter, TopicAlter
from broker.controller.partition_change import UncleanElection
from broker.controller.reassignment import Reassignments
from broker.metadata.image import MetadataImage, PartitionImage, apply_records
from broker.metadata.snapshot import decode_snapshot, encode_snapshot, image_records
from broker.security.acls import AclOperation, ResourceType
from protocol.build import build
from protocol.registry import REGISTRY

from .test_cluster_control import FakeCore
from .test_leader_elections import Allow, Ctx, _cluster, _topic, run

E = ErrorCode


def _p(core: FakeCore, name: str = "t", i: int = 0) -> PartitionImage:
    return core.image.topics[name].partitions[i]


def _state(p: PartitionImage) -> tuple[Any, ...]:
    return (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas)


def _alter(
    core: FakeCore, *parts: tuple[int, list[int] | None], topic: str = "t", **kw: Any
) -> list[Any]:
    answers = run(Reassignments(core, **kw).alter([(topic, list(parts))]))
    return [(a.partition, a.error) for _t, out in answers for a in out]


def _isr_change(core: FakeCore, leader: int, isr: list[int], name: str = "t") -> Any:
    """The leader's AlterPartition for partition 0 with the current epochs."""
    t = core.image.topics[name]
    p = t.partitions[0]
    alter = PartitionAlter(0, p.leader_epoch, tuple((r, -1) for r in isr), p.partition_epoch)
    epoch = core.image.brokers[leader].epoch
    res = run(
        AlterPartitionControl(core).alter_partition(
            leader, epoch, [TopicAlter(t.topic_id, (alter,))]
        )
    )
    return res.topics[0].partitions[0]


# -- starting a reassignment -----------------------------------------------------------------


def test_a_move_adds_the_target_then_the_isr_change_completes_it() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1], [1], 1))
    assert _alter(core, (0, [2])) == [(0, E.none)]
    p = _p(core)
    # replicas: the target, then the replicas leaving; the ISR and leader unchanged
    assert _state(p) == ((2, 1), (1,), 1, (2,), (1,))
    assert p.leader_epoch == 5  # nothing left the replica list yet
    # the leader adds the new replica to the ISR: the reassignment completes in that record
    answer = _isr_change(core, 1, [1, 2])
    assert answer.error == E.new_leader_elected  # the sender was removed and no longer leads
    p = _p(core)
    assert _state(p) == ((2,), (2,), 2, (), ())
    assert p.leader_epoch == 6


def test_growth_keeps_the_leader_and_completes_when_all_targets_are_in_sync() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 1))
    assert _alter(core, (0, [1, 2, 3])) == [(0, E.none)]
    assert _state(_p(core)) == ((1, 2, 3), (1, 2), 1, (3,), ())
    answer = _isr_change(core, 1, [1, 2, 3])
    assert answer.error == E.none and answer.state is not None
    p = _p(core)
    assert _state(p) == ((1, 2, 3), (1, 2, 3), 1, (), ())
    assert answer.state == p
    assert p.leader_epoch == 5  # nobody left: the same leader epoch


def test_a_shrink_within_the_isr_completes_at_once_and_bumps_the_epoch() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1, 2, 3], [1, 2, 3], 1))
    assert _alter(core, (0, [2, 3])) == [(0, E.none)]
    p = _p(core)
    assert _state(p) == ((2, 3), (2, 3), 2, (), ())
    assert p.leader_epoch == 6
    assert len(core.batches[-1]) == 1  # one record: start and completion together


def test_a_reordering_is_not_a_reassignment() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1, 2, 3], [1, 2, 3], 1))
    assert _alter(core, (0, [3, 2, 1])) == [(0, E.none)]
    p = _p(core)
    assert _state(p) == ((3, 2, 1), (1, 2, 3), 1, (), ())
    assert p.leader_epoch == 5
    before = len(core.batches)
    assert _alter(core, (0, [3, 2, 1])) == [(0, E.none)]  # the same again: no record
    assert len(core.batches) == before


def test_an_isr_change_short_of_the_target_does_not_complete() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up", 4: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 1))
    assert _alter(core, (0, [3, 4])) == [(0, E.none)]
    assert _state(_p(core)) == ((3, 4, 1, 2), (1, 2), 1, (3, 4), (1, 2))
    answer = _isr_change(core, 1, [1, 2, 3])
    assert answer.error == E.none
    assert _state(_p(core)) == ((3, 4, 1, 2), (1, 2, 3), 1, (3, 4), (1, 2))
    assert _isr_change(core, 1, [1, 2, 3, 4]).error == E.new_leader_elected
    assert _state(_p(core)) == ((3, 4), (3, 4), 3, (), ())


def test_errors_per_partition_and_the_others_go_ahead() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1], [1], 1), ([1], [1], 1))
    answers = run(
        Reassignments(core).alter(
            [
                ("t", [(0, []), (1, [2]), (5, [2]), (0, [2, 2]), (0, [9, 2])]),
                ("nope", [(0, [1])]),
            ]
        )
    )
    got = [(t, a.partition, a.error, a.message) for t, out in answers for a in out]
    assert got == [
        (
            "t",
            0,
            E.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        ),
        ("t", 1, E.none, None),
        ("t", 5, E.unknown_topic_or_partition, "Unable to find partition t:5."),
        (
            "t",
            0,
            E.invalid_replica_assignment,
            "The manual partition assignment includes the broker 2 more than once.",
        ),
        (
            "t",
            0,
            E.invalid_replica_assignment,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        ("nope", 0, E.unknown_topic_or_partition, "Unable to find a topic named nope."),
    ]
    assert _state(_p(core, "t", 1)) == ((2, 1), (1,), 1, (2,), (1,))
    assert _state(_p(core, "t", 0)) == ((1,), (1,), 1, (), ())


def test_the_metadata_topic_is_unknown() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "__cluster_metadata", ([1], [1], 1))
    assert _alter(core, (0, [2]), topic="__cluster_metadata") == [(0, E.unknown_topic_or_partition)]


def test_replication_factor_change_refused_when_not_allowed() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 1))
    answers = run(Reassignments(core).alter([("t", [(0, [1, 2, 3])])], allow_rf_change=False))
    a = answers[0][1][0]
    assert (a.error, a.message) == (
        E.invalid_replication_factor,
        "The replication factor is changed from 2 to 3",
    )
    assert (
        run(Reassignments(core).alter([("t", [(0, [3, 1])])], allow_rf_change=False))[0][1][0].error
        == E.none
    )
    # while moving, the count is the one the partition is headed for (2, not the 3 listed)
    assert _state(_p(core)) == ((3, 1, 2), (1, 2), 1, (3,), (2,))
    assert (
        run(Reassignments(core).alter([("t", [(0, [2, 3])])], allow_rf_change=False))[0][1][0].error
        == E.none
    )


def test_a_new_reassignment_replaces_the_ongoing_one() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1], [1], 1))
    assert _alter(core, (0, [2])) == [(0, E.none)]
    # against the current replicas [2, 1]: both leave, 3 comes
    assert _alter(core, (0, [3])) == [(0, E.none)]
    assert _state(_p(core)) == ((3, 1, 2), (1,), 1, (3,), (1, 2))
    # Kafka's quirk: a target with nothing to add or remove keeps the ongoing adding/removing
    assert _alter(core, (0, [3, 1, 2])) == [(0, E.none)]
    assert _state(_p(core)) == ((3, 1, 2), (1,), 1, (3,), (1, 2))


# -- cancelling ------------------------------------------------------------------------------


def test_cancel_reverts_to_the_original_replicas() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 1))
    assert _alter(core, (0, [3, 2])) == [(0, E.none)]
    _isr_change(core, 1, [1, 2])  # no change
    assert _state(_p(core)) == ((3, 2, 1), (1, 2), 1, (3,), (1,))
    epoch = _p(core).leader_epoch
    assert _alter(core, (0, None)) == [(0, E.none)]
    p = _p(core)
    assert _state(p) == ((2, 1), (1, 2), 1, (), ())
    assert p.leader_epoch == epoch + 1  # 3 left the replica list


def test_cancel_drops_adding_replicas_from_the_isr() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up", 4: "up"})
    _topic(core, "t", ([1, 2], [1, 2], 1))
    assert _alter(core, (0, [3, 4])) == [(0, E.none)]
    _isr_change(core, 1, [1, 2, 3])
    assert _alter(core, (0, None)) == [(0, E.none)]
    assert _state(_p(core)) == ((1, 2), (1, 2), 1, (), ())


def test_cancel_without_a_reassignment() -> None:
    core = _cluster({1: "up"})
    _topic(core, "t", ([1], [1], 1))
    answers = run(Reassignments(core).alter([("t", [(0, None)])]))
    a = answers[0][1][0]
    assert (a.error, a.message) == (
        E.no_reassignment_in_progress,
        "No partition reassignment is in progress.",
    )


def _only_adding_in_sync(core: FakeCore) -> None:
    """t-0 moving from [1] to [2] with only 2 in the ISR (1 fell out; 2 leads)."""
    _topic(core, "t", ([1], [1], 1))
    assert _alter(core, (0, [2, 3])) == [(0, E.none)]
    _isr_change(core, 1, [1, 2])
    t = core.image.topics["t"]
    from broker.controller.reassignment import PartitionChangeRecord

    run(
        core.commit([PartitionChangeRecord(partition_id=0, topic_id=t.topic_id, isr=[2], leader=2)])
    )


def test_cancel_that_needs_an_unclean_election() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _only_adding_in_sync(core)
    assert _state(_p(core)) == ((2, 3, 1), (2,), 2, (2, 3), (1,))
    answers = run(Reassignments(core).alter([("t", [(0, None)])]))
    a = answers[0][1][0]
    assert a.error == E.invalid_replica_assignment
    assert (
        a.message
        == "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
    )
    assert _alter(core, (0, None), unclean=UncleanElection(True)) == [(0, E.none)]
    assert _state(_p(core)) == ((1,), (1,), 1, (), ())


# -- listing ---------------------------------------------------------------------------------


def test_list_only_the_partitions_being_reassigned() -> None:
    core = _cluster({1: "up", 2: "up", 3: "up"})
    _topic(core, "t", ([1], [1], 1), ([1], [1], 1))
    _topic(core, "u", ([1], [1], 1))
    _alter(core, (1, [2]))
    r = Reassignments(core)
    everything = r.list(None)
    assert [
        (t, [(o.partition, o.replicas, o.adding, o.removing) for o in os]) for t, os in everything
    ] == [("t", [(1, (2, 1), (2,), (1,))])]
    assert r.list([("t", [0]), ("u", [0]), ("nope", [0])]) == []
    assert [t for t, _ in r.list([("t", [0, 1, 7])])] == ["t"]


# -- the image and the snapshot --------------------------------------------------------------


def test_the_snapshot_keeps_an_ongoing_reassignment() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1], [1], 1))
    _alter(core, (0, [2]))
    entries = decode_snapshot(encode_snapshot(image_records(core.image)))
    loaded, _ = apply_records(MetadataImage(), entries)
    p = loaded.topics["t"].partitions[0]
    assert (p.adding_replicas, p.removing_replicas) == ((2,), (1,))
    assert p == _p(core)


# -- the APIs --------------------------------------------------------------------------------


def _api(core: FakeCore, authorizer: Any = None, active: bool = True) -> ReassignmentsApi:
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
    return ReassignmentsApi(services, Reassignments(core), lambda: active)


def _alter_request(
    version: int, parts: list[tuple[int, list[int] | None]], allow: bool = True
) -> Any:
    return build(
        REGISTRY.spec(45).request_type(version),
        {
            "timeout": 1000,
            "allow_replication_factor_change": allow,
            "topics": [
                {
                    "name": "t",
                    "partitions": [{"partition_index": p, "replicas": r} for p, r in parts],
                }
            ],
        },
    )


def _list_request(topics: list[tuple[str, list[int]]] | None) -> Any:
    return build(
        REGISTRY.spec(46).request_type(0),
        {
            "timeout": 1000,
            "topics": None
            if topics is None
            else [{"name": t, "partition_indexes": ps} for t, ps in topics],
        },
    )


def _codes(resp: Any) -> list[tuple[str, int, int]]:
    return [
        (t.name, int(p.partition_index), int(p.error_code))
        for t in resp.responses
        for p in t.partitions
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_api_alter_and_list(version: int) -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1], [1], 1))
    api = _api(core)
    resp = run(api.alter(Ctx(version), _alter_request(version, [(0, [2]), (3, [1])])))  # type: ignore[arg-type]
    assert resp.error_code == E.none and resp.error_message is None
    assert _codes(resp) == [("t", 0, 0), ("t", 3, E.unknown_topic_or_partition)]
    listed = run(api.list(Ctx(0), _list_request(None)))  # type: ignore[arg-type]
    assert listed.error_code == E.none
    [topic] = listed.topics
    assert topic.name == "t"
    [o] = topic.partitions
    assert (
        o.partition_index,
        list(o.replicas),
        list(o.adding_replicas),
        list(o.removing_replicas),
    ) == (
        0,
        [2, 1],
        [2],
        [1],
    )


def test_api_v1_refuses_a_replication_factor_change_and_echoes_the_flag() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1], [1], 1))
    resp = run(_api(core).alter(Ctx(1), _alter_request(1, [(0, [1, 2])], allow=False)))  # type: ignore[arg-type]
    assert _codes(resp) == [("t", 0, E.invalid_replication_factor)]
    assert resp.allow_replication_factor_change is False


def test_api_needs_alter_and_describe_on_the_cluster() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1], [1], 1))
    describe_only = Allow((AclOperation.DESCRIBE, ResourceType.CLUSTER))
    api = _api(core, describe_only)
    resp = run(api.alter(Ctx(0), _alter_request(0, [(0, [2])])))  # type: ignore[arg-type]
    assert resp.error_code == E.cluster_authorization_failed
    assert _codes(resp) == [("t", 0, E.cluster_authorization_failed)]
    assert (AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster") in describe_only.asked
    assert _p(core).replicas == (1,)
    assert run(api.list(Ctx(0), _list_request(None))).error_code == E.none  # type: ignore[arg-type]
    alter_only = Allow((AclOperation.ALTER, ResourceType.CLUSTER))
    listed = run(_api(core, alter_only).list(Ctx(0), _list_request([("t", [0])])))  # type: ignore[arg-type]
    assert listed.error_code == E.cluster_authorization_failed
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in listed.topics] == [
        ("t", [0])
    ]


def test_api_not_controller() -> None:
    core = _cluster({1: "up", 2: "up"})
    _topic(core, "t", ([1], [1], 1))
    api = _api(core, active=False)
    resp = run(api.alter(Ctx(1), _alter_request(1, [(0, [2])])))  # type: ignore[arg-type]
    assert resp.error_code == E.not_controller and _codes(resp) == [("t", 0, E.not_controller)]
    assert run(api.list(Ctx(0), _list_request(None))).error_code == E.not_controller  # type: ignore[arg-type]


def test_forwarded_and_the_forwarding_error_shapes() -> None:
    assert {45, 46} <= FORWARDED_APIS
    for version in (0, 1):
        resp = error_response(
            45, version, _alter_request(version, [(0, [2]), (1, None)]), E.request_timed_out, "x"
        )
        assert resp.error_code == E.request_timed_out
        assert _codes(resp) == [("t", 0, E.request_timed_out), ("t", 1, E.request_timed_out)]
    resp = error_response(46, 0, _list_request([("t", [0, 2])]), E.request_timed_out, "x")
    assert resp.error_code == E.request_timed_out
    assert [p.partition_index for p in resp.topics[0].partitions] == [0, 2]
    assert error_response(46, 0, _list_request(None), E.request_timed_out, "x").topics == ()


def test_partition_image_defaults_to_no_reassignment() -> None:
    p = PartitionImage(0, (1,), (1,), 1, 0, 0)
    assert not p.reassigning and p.adding_replicas == () and p.removing_replicas == ()

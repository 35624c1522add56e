"""Kafka's RackAwareReplicaSelector rules, on their own (`replication.replica_selector`)."""

from __future__ import annotations

from broker.replication.replica_selector import (
    FollowerView,
    ReplicaView,
    preferred_read_replica,
    rack_aware_select,
)

LEADER = ReplicaView(1, "a", 100, 0)


def test_same_rack_most_caught_up_then_freshest_then_largest_id() -> None:
    behind = ReplicaView(2, "b", 90, 0)
    ahead = ReplicaView(3, "b", 95, 500)
    assert rack_aware_select("b", LEADER, [LEADER, behind, ahead]) == ahead
    fresher = ReplicaView(4, "b", 95, 10)
    assert rack_aware_select("b", LEADER, [LEADER, behind, ahead, fresher]) == fresher
    twin = ReplicaView(5, "b", 95, 10)
    assert rack_aware_select("b", LEADER, [LEADER, fresher, twin]) == twin


def test_leader_when_no_rack_no_match_or_leader_in_rack() -> None:
    other = ReplicaView(2, "b", 100, 0)
    assert rack_aware_select("", LEADER, [LEADER, other]) == LEADER
    assert rack_aware_select("z", LEADER, [LEADER, other]) == LEADER
    same = ReplicaView(2, "a", 100, 0)
    assert rack_aware_select("a", LEADER, [LEADER, same]) == LEADER


def test_candidates_need_isr_coverage_and_a_reachable_broker() -> None:
    racks = {1: (True, "a"), 2: (True, "b"), 3: (False, "c"), 4: (True, "d")}

    def pick(rack: str, offset: int, isr: frozenset[int] = frozenset({1, 2, 3, 4})) -> int:
        followers = [
            FollowerView(2, 10, 50, 0),
            FollowerView(3, 0, 100, 0),
            FollowerView(4, 0, 100, 0),
        ]
        return preferred_read_replica(
            "rack-aware", rack, 1, 100, isr, followers, offset, 1000, racks.__getitem__
        )

    assert pick("b", 20) == 2
    assert pick("b", 5) == -1  # below broker 2's log start
    assert pick("b", 60) == -1  # past broker 2's log end
    assert pick("c", 20) == -1  # broker 3 has no endpoint on the consumer's listener
    assert pick("d", 20) == 4
    assert pick("d", 20, isr=frozenset({1, 2})) == -1
    assert (
        preferred_read_replica(None, "d", 1, 100, frozenset({1, 4}), [], 0, 0, racks.__getitem__)
        == -1
    )

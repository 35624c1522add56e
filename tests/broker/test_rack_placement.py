"""Replica placement over racks (broker.rack), as Kafka's rack-aware assignor spreads them."""

import itertools
from collections import Counter

from broker.controller.topics import assign_replicas


def test_without_racks_round_robin() -> None:
    assert assign_replicas([3, 1, 2], range(4), 2, 0) == {
        0: [1, 2],
        1: [2, 3],
        2: [3, 1],
        3: [1, 2],
    }


def test_consecutive_leaders_alternate_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    placed = assign_replicas(list(racks), range(12), 1, 0, racks)
    leaders = [placed[p][0] for p in range(12)]
    assert all(racks[x] != racks[y] for x, y in itertools.pairwise(leaders))
    assert Counter(leaders) == Counter({b: 2 for b in racks})  # still even over brokers


def test_replicas_of_a_partition_use_distinct_racks_first() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for start in range(6):
        placed = assign_replicas(list(racks), range(30), 3, start, racks)
        for reps in placed.values():
            assert len(set(reps)) == 3
            assert len({racks[b] for b in reps}) == 3, reps
    # more replicas than racks: every rack first, then any broker not yet used
    placed = assign_replicas([1, 2, 3, 4], range(8), 3, 0, {1: "a", 2: "a", 3: "b", 4: "b"})
    for reps in placed.values():
        assert (
            len(set(reps)) == 3
            and {1: "a", 2: "a", 3: "b", 4: "b"}[reps[1]]
            != {1: "a", 2: "a", 3: "b", 4: "b"}[reps[0]]
        )


def test_a_broker_without_a_rack_means_no_rack_awareness() -> None:
    racks = {1: "a", 2: None, 3: "b"}
    assert assign_replicas([1, 2, 3], range(3), 1, 0, racks) == {0: [1], 1: [2], 2: [3]}

"""The sans-IO parts of KIP-848 groups: the uniform and range assignors, reconciliation."""

import uuid

import pytest

from broker.coordinator.group.assignors import MemberSpec, RangeAssignor, UniformAssignor
from broker.coordinator.group.consumer_group import InvalidRegex, compile_regex, resolve_regex
from broker.coordinator.group.reconcile import MemberAssignment, MemberState, reconcile

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _spec(*topics: uuid.UUID, current: dict[uuid.UUID, frozenset[int]] | None = None) -> MemberSpec:
    return MemberSpec(frozenset(topics), current or {})


def _all(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def _counts(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def test_uniform_assigns_every_partition_once_and_balanced() -> None:
    members = {m: _spec(T1, T2) for m in ("a", "b", "c")}
    result = UniformAssignor().assign(members, {T1: 4, T2: 3})
    assert _all(result) == sorted([(T1, p) for p in range(4)] + [(T2, p) for p in range(3)])
    assert _counts(result) == [2, 2, 3]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = UniformAssignor().assign({m: _spec(T1) for m in ("a", "b")}, {T1: 6})
    members = {m: _spec(T1, current=before[m]) for m in ("a", "b")} | {"c": _spec(T1)}
    after = UniformAssignor().assign(members, {T1: 6})
    assert _counts(after) == [2, 2, 2]
    for m in ("a", "b"):  # each old member only gave partitions up
        assert after[m][T1] <= before[m][T1]


def test_uniform_heterogeneous_subscriptions() -> None:
    members = {"a": _spec(T1), "b": _spec(T1, T2), "c": _spec(T2)}
    result = UniformAssignor().assign(members, {T1: 3, T2: 3})
    assert _all(result) == sorted([(T1, p) for p in range(3)] + [(T2, p) for p in range(3)])
    assert T2 not in result["a"] and T1 not in result["c"]
    assert _counts(result) == [2, 2, 2]


def test_uniform_drops_partitions_of_unsubscribed_or_shrunk_topics() -> None:
    members = {"a": _spec(T1, current={T1: frozenset({0, 1, 5}), T2: frozenset({0})})}
    assert UniformAssignor().assign(members, {T1: 3, T2: 1}) == {"a": {T1: frozenset({0, 1, 2})}}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    members = {m: _spec(T1, T2) for m in ("a", "b")}
    result = RangeAssignor().assign(members, {T1: 5, T2: 2})
    assert result["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    assert result["b"] == {T1: frozenset({3, 4}), T2: frozenset({1})}


def test_regex_checks_reject_what_re2_rejects() -> None:
    assert compile_regex("orders-.*").fullmatch("orders-1")
    for bad in ("(a)\\1", "(?=x)y", "(?<!a)b", "a*+", "(?>ab)", "[unclosed"):
        with pytest.raises(InvalidRegex):
            compile_regex(bad)


def _never(_t: uuid.UUID, _p: int) -> bool:
    return False


def test_reconcile_new_member_gets_its_target_and_the_target_epoch() -> None:
    start = MemberAssignment(0, 0, MemberState.STABLE)
    got = reconcile(start, 3, {T1: frozenset({0, 1})}, {}, _never)
    assert got == MemberAssignment(3, 0, MemberState.STABLE, {T1: frozenset({0, 1})}, {})


def test_reconcile_revokes_first_keeping_the_epoch() -> None:
    cur = MemberAssignment(3, 2, MemberState.STABLE, {T1: frozenset({0, 1, 2})})
    target = {T1: frozenset({0, 3})}
    got = reconcile(cur, 4, target, {T1: frozenset({0, 1, 2})}, _never)
    assert got.state is MemberState.UNREVOKED_PARTITIONS and got.epoch == 3
    assert got.assigned == {T1: frozenset({0})}
    assert got.pending_revocation == {T1: frozenset({1, 2})}
    # still owning a revoked partition: nothing moves
    assert reconcile(got, 4, target, {T1: frozenset({0, 1})}, _never) == got
    # revoked: the epoch bumps and the new partition comes in
    done = reconcile(got, 4, target, {T1: frozenset({0})}, _never)
    assert done == MemberAssignment(4, 3, MemberState.STABLE, {T1: frozenset({0, 3})}, {})


def test_reconcile_waits_for_partitions_another_member_still_holds() -> None:
    cur = MemberAssignment(1, 0, MemberState.STABLE, {T1: frozenset({0})})
    held = {(T1, 1)}

    def by_other(t: uuid.UUID, p: int) -> bool:
        return (t, p) in held

    got = reconcile(cur, 2, {T1: frozenset({0, 1, 2})}, {T1: frozenset({0})}, by_other)
    assert got.state is MemberState.UNRELEASED_PARTITIONS and got.epoch == 2
    assert got.assigned == {T1: frozenset({0, 2})}
    held.clear()  # the other member revoked it
    got = reconcile(got, 2, {T1: frozenset({0, 1, 2})}, None, by_other)
    assert got.state is MemberState.STABLE and got.assigned == {T1: frozenset({0, 1, 2})}


class _Versioned(dict[str, tuple[uuid.UUID, int]]):
    version = 0


def test_regex_resolution_is_cached_per_metadata_version() -> None:
    topics = _Versioned({"orders-1": (T1, 1), "__internal-x": (T2, 1), "other": (T2, 1)})
    topics.version = 7
    assert resolve_regex(".*", topics) == {"orders-1", "other"}  # internal topics never
    assert resolve_regex("orders-.*", topics) == {"orders-1"}
    topics["orders-2"] = (T2, 1)
    assert resolve_regex("orders-.*", topics) == {"orders-1"}  # same version: cached
    topics.version = 8
    assert resolve_regex("orders-.*", topics) == {"orders-1", "orders-2"}
    assert resolve_regex("(?=bad)", topics) == frozenset()

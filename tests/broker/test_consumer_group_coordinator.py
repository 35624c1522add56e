"""KIP-848 consumer groups through the group coordinator: heartbeats, reconciliation between
members, fencing, timers, offsets, and the records that bring a group back on reload."""

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.consumer_shard import HeartbeatParams, HeartbeatResult
from broker.coordinator.group.shard import CommitItem, CommitParams
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler
from tests.broker.group_support import (
    PARTITIONS,
    Env,
    async_test,
    config,
    join_params,
    start_join,
)

E = ErrorCode
T1 = uuid.UUID(int=11)
Topics = dict[str, tuple[uuid.UUID, int]]


async def _env(topics: Topics, logs: dict[int, InMemoryRecordLog] | None = None, **cfg: Any) -> Env:
    sched = ManualScheduler()
    coord = GroupCoordinator(
        config(consumer_session_timeout_ms=10_000, **cfg), sched, lambda: topics
    )
    env = Env(coord, sched)
    for p in range(PARTITIONS):
        env.logs[p] = logs[p] if logs else InMemoryRecordLog()
        await coord.load(p, env.logs[p])
    return env


def _hb(member: str, epoch: int, owned: Any = None, **kw: Any) -> HeartbeatParams:
    base: dict[str, Any] = {"group_id": "g", "member_id": member, "member_epoch": epoch}
    if epoch == 0:
        base |= {"rebalance_timeout_ms": 5000, "topic_names": ("t1",), "owned": {}}
    else:
        base["owned"] = owned
    return HeartbeatParams(**(base | kw))


def _parts(r: HeartbeatResult) -> set[int]:
    assert r.assignment is not None
    return set(r.assignment.get(T1, frozenset()))


@async_test
async def test_two_members_share_partitions_only_after_revocation() -> None:
    env = await _env({"t1": (T1, 4)})
    c = env.coord
    a = await c.consumer_group_heartbeat(_hb("a", 0))
    assert (a.error, a.member_epoch, _parts(a)) == (E.none, 1, {0, 1, 2, 3})
    assert a.heartbeat_interval_ms == 5000
    b = await c.consumer_group_heartbeat(_hb("b", 0))
    # b's share is still a's: b is at the new epoch with nothing yet
    assert (b.error, b.member_epoch, _parts(b)) == (E.none, 2, set())
    a2 = await c.consumer_group_heartbeat(_hb("a", 1, {T1: frozenset({0, 1, 2, 3})}))
    kept = _parts(a2)
    assert a2.member_epoch == 1 and len(kept) == 2  # revoke first, same epoch
    b2 = await c.consumer_group_heartbeat(_hb("b", 2, {}))
    assert b2.assignment is None or _parts(b2) == set()  # not released yet
    a3 = await c.consumer_group_heartbeat(_hb("a", 1, {T1: frozenset(kept)}))
    assert a3.member_epoch == 2
    b3 = await c.consumer_group_heartbeat(_hb("b", 2, {}))
    assert _parts(b3) == {0, 1, 2, 3} - kept
    d = await c.consumer_group_describe("g")
    assert (d.state, d.epoch, d.assignment_epoch, d.assignor) == ("Stable", 2, 2, "uniform")
    classic = await c.describe_group("g")  # DescribeGroups: classic consumer protocol bytes
    assert (classic.state, classic.protocol_type) == ("Stable", "consumer")
    assert sorted(m.assignment[-4:] for m in classic.members) == [b"\xff" * 4] * 2  # no user data
    assert all(
        m.metadata.startswith(b"\x00\x03\x00\x00\x00\x01\x00\x02t1") for m in classic.members
    )
    listed = (await c.list_groups())[1]
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("g", "consumer", "Stable")]


@async_test
async def test_epoch_errors_and_leave() -> None:
    env = await _env({"t1": (T1, 2)})
    c = env.coord
    await c.consumer_group_heartbeat(_hb("a", 0))
    assert (await c.consumer_group_heartbeat(_hb("a", 5))).error == E.fenced_member_epoch
    assert (await c.consumer_group_heartbeat(_hb("x", 1))).error == E.unknown_member_id
    missing = await c.consumer_group_heartbeat(_hb("a", 1, group_id="nope"))
    assert missing.error == E.group_id_not_found
    bad = await c.consumer_group_heartbeat(_hb("b", 0, server_assignor="sticky"))
    assert bad.error == E.unsupported_assignor
    rx = await c.consumer_group_heartbeat(_hb("b", 0, topic_names=None, topic_regex="(a)\\1"))
    assert rx.error == E.invalid_regular_expression
    env2 = await _env({"t1": (T1, 2)}, consumer_max_size=1)
    assert (await env2.coord.consumer_group_heartbeat(_hb("a", 0))).error == E.none
    full = await env2.coord.consumer_group_heartbeat(_hb("b", 0))
    assert full.error == E.group_max_size_reached
    left = await c.consumer_group_heartbeat(_hb("a", -1))
    assert (left.error, left.member_epoch) == (E.none, -1)
    assert (await c.consumer_group_describe("g")).state == "Empty"


@async_test
async def test_regex_subscription_follows_new_topics() -> None:
    topics: Topics = {"orders-1": (T1, 2)}
    env = await _env(topics)
    c = env.coord
    r = await c.consumer_group_heartbeat(_hb("a", 0, topic_names=None, topic_regex="orders-.*"))
    assert r.assignment == {T1: frozenset({0, 1})}
    t2 = uuid.UUID(int=12)
    topics["orders-2"] = (t2, 1)  # a topic created later joins the subscription
    r = await c.consumer_group_heartbeat(_hb("a", r.member_epoch, {T1: frozenset({0, 1})}))
    assert r.member_epoch == 2 and r.assignment == {T1: frozenset({0, 1}), t2: frozenset({0})}


@async_test
async def test_session_timeout_fences_and_hands_partitions_over() -> None:
    env = await _env({"t1": (T1, 2)})
    c = env.coord
    await c.consumer_group_heartbeat(_hb("a", 0))
    b = await c.consumer_group_heartbeat(_hb("b", 0))
    for _ in range(3):  # b keeps heartbeating, a goes silent
        await env.advance(4000)
        b = await c.consumer_group_heartbeat(_hb("b", b.member_epoch, {}))
    assert [m.member_id for m in (await c.consumer_group_describe("g")).members] == ["b"]
    b = await c.consumer_group_heartbeat(_hb("b", b.member_epoch, {}))
    assert b.member_epoch == 3 and _parts(b) == {0, 1}


@async_test
async def test_offset_commit_checks_member_epoch() -> None:
    env = await _env({"t1": (T1, 1)})
    c = env.coord
    a = await c.consumer_group_heartbeat(_hb("a", 0))

    def commit(member: str, epoch: int, version: int = 9) -> CommitParams:
        return CommitParams("g", epoch, member, None, -1, [CommitItem("t1", 0, 7, -1, "")], version)

    assert await c.commit_offsets(commit("a", a.member_epoch)) == [E.none]
    assert await c.commit_offsets(commit("a", a.member_epoch + 1)) == [E.stale_member_epoch]
    assert await c.commit_offsets(commit("zz", 1)) == [E.unknown_member_id]
    assert await c.commit_offsets(commit("", -1)) == [E.unknown_member_id]  # group not empty
    assert await c.commit_offsets(commit("a", a.member_epoch, 8)) == [E.unsupported_version]
    _, found = await c.fetch_offsets("g", [("t1", [0])])
    assert found[0][1][0].offset == 7


@async_test
async def test_reload_restores_group_members_and_offsets() -> None:
    env = await _env({"t1": (T1, 2)})
    c = env.coord
    a = await c.consumer_group_heartbeat(_hb("a", 0))
    params = CommitParams("g", a.member_epoch, "a", None, -1, [CommitItem("t1", 1, 5, -1, "")], 9)
    assert await c.commit_offsets(params) == [E.none]
    again = await _env({"t1": (T1, 2)}, logs=env.logs)
    d = await again.coord.consumer_group_describe("g")
    assert (d.error, d.state, d.epoch, d.assignment_epoch) == (E.none, "Stable", 1, 1)
    assert d.members[0].assignment == [(T1, "t1", [0, 1])]
    r = await again.coord.consumer_group_heartbeat(_hb("a", 1, {T1: frozenset({0, 1})}))
    assert (r.error, r.member_epoch) == (E.none, 1)
    _, found = await again.coord.fetch_offsets("g", [("t1", [1])])
    assert found[0][1][0].offset == 5


@async_test
async def test_empty_classic_group_converts_live_one_does_not() -> None:
    env = await _env({"t1": (T1, 1)})
    c = env.coord
    # offsets alone (a simple group) make an empty classic group: it becomes a consumer group
    simple = CommitParams("g", -1, "", None, -1, [CommitItem("t1", 0, 3, -1, "")], 9)
    assert await c.commit_offsets(simple) == [E.none]
    r = await c.consumer_group_heartbeat(_hb("a", 0))
    assert r.error == E.none
    assert (await c.list_groups())[1][0].group_type == "consumer"
    assert (await c.consumer_group_describe("nope")).error == E.group_id_not_found
    assert await c.delete_groups(["g"]) == {"g": E.non_empty_group}
    await c.consumer_group_heartbeat(_hb("a", -1))
    assert await c.delete_groups(["g"]) == {"g": E.none}
    assert (await c.consumer_group_describe("g")).error == E.group_id_not_found


@async_test
async def test_classic_join_takes_over_an_empty_consumer_group() -> None:
    env = await _env({"t1": (T1, 1)})
    c = env.coord
    await c.consumer_group_heartbeat(_hb("a", 0))
    # a classic member of a live consumer group needs a consumer protocol subscription
    # (b"meta" is none); tests/broker/test_mixed_groups.py has the mixed groups
    joined = await c.join_group(join_params("g"))
    assert joined.error == E.inconsistent_group_protocol
    await c.consumer_group_heartbeat(_hb("a", -1))
    task = start_join(env, join_params("g"))
    await env.advance(3000)
    assert (await task).error == E.none
    assert (await c.list_groups())[1][0].group_type == "classic"
    assert (await c.consumer_group_describe("g")).error == E.group_id_not_found
    # a live classic group whose member metadata does not parse is not upgraded
    assert (await c.consumer_group_heartbeat(_hb("b", 0))).error == E.group_id_not_found


@async_test
async def test_static_member_comes_back_with_its_partitions() -> None:
    env = await _env({"t1": (T1, 4)})
    c = env.coord
    a = await c.consumer_group_heartbeat(_hb("a", 0, instance_id="i-a"))
    b = await c.consumer_group_heartbeat(_hb("b", 0))
    a = await c.consumer_group_heartbeat(_hb("a", a.member_epoch, {T1: frozenset(range(4))}))
    a = await c.consumer_group_heartbeat(_hb("a", a.member_epoch, a.assignment))
    b = await c.consumer_group_heartbeat(_hb("b", b.member_epoch, {}))
    held = _parts(a)
    assert len(held) == 2 and _parts(b) == {0, 1, 2, 3} - held
    epoch = (await c.consumer_group_describe("g")).epoch
    # the same instance under a new member id while the old one is still in: refused
    clash = await c.consumer_group_heartbeat(_hb("a2", 0, instance_id="i-a"))
    assert clash.error == E.unreleased_instance_id
    gone = await c.consumer_group_heartbeat(_hb("a", -2, instance_id="i-a"))
    assert (gone.error, gone.member_epoch) == (E.none, -2)
    back = await c.consumer_group_heartbeat(_hb("a2", 0, instance_id="i-a"))
    assert back.error == E.none and _parts(back) == held  # same partitions, no rebalance
    d = await c.consumer_group_describe("g")
    assert d.epoch == epoch and sorted(m.member_id for m in d.members) == ["a2", "b"]
    b2 = await c.consumer_group_heartbeat(_hb("b", b.member_epoch, b.assignment))
    assert b2.error == E.none and b2.member_epoch == b.member_epoch
    # a static member that does not come back within its session is removed
    assert (await c.consumer_group_heartbeat(_hb("a2", -2, instance_id="i-a"))).error == E.none
    for _ in range(3):
        await env.advance(4000)
        b2 = await c.consumer_group_heartbeat(_hb("b", b2.member_epoch, {}))
    assert [m.member_id for m in (await c.consumer_group_describe("g")).members] == ["b"]
